//! A test file decoded as promtool's `yaml.UnmarshalStrict` reads it into
//! its types.

use std::time::Duration;

use crate::alert::Labels;
use crate::decode::Decoder;
use crate::yaml::{self, Kind, Node};

use super::notation::number;

/// A test file as promtool reads it.
#[derive(Debug, Default)]
pub(super) struct TestFile {
    pub(super) rule_files: Vec<String>,
    pub(super) evaluation_interval: Option<Duration>,
    pub(super) group_eval_order: Vec<String>,
    pub(super) tests: Vec<TestGroup>,
}

#[derive(Debug, Default)]
pub(super) struct TestGroup {
    pub(super) interval: Option<Duration>,
    pub(super) input_series: Vec<(String, String)>,
    pub(super) alert_rule_test: Vec<AlertTest>,
    pub(super) promql_expr_test: Vec<ExprTest>,
    pub(super) external_labels: Labels,
    pub(super) external_url: String,
    pub(super) name: String,
}

#[derive(Debug, Default)]
pub(super) struct AlertTest {
    pub(super) eval_time: Duration,
    pub(super) alertname: String,
    pub(super) exp_alerts: Vec<(Labels, Labels)>,
}

#[derive(Debug, Default)]
pub(super) struct ExprTest {
    pub(super) expr: String,
    pub(super) eval_time: Duration,
    pub(super) exp_samples: Vec<(String, f64)>,
}

/// The test file's YAML, decoded strictly as promtool's `UnmarshalStrict`.
pub(super) fn parse(text: &str) -> Result<TestFile, String> {
    let root = yaml::parse(text).map_err(|err| err.to_string())?;
    let Some(root) = root else {
        return Ok(TestFile::default());
    };
    let mut decoder = Decoder::default();
    let file = decoder.test_file(&root);
    if let Some(fatal) = decoder.fatal {
        return Err(fatal);
    }
    if let Some(problem) = decoder.type_errors() {
        return Err(problem.message);
    }
    Ok(file)
}

impl Decoder {
    fn strings(&mut self, node: &Node) -> Vec<String> {
        match &node.kind {
            Kind::Seq(items) => items.iter().map(|item| self.string(item)).collect(),
            _ if node.is_null() => Vec::new(),
            _ => {
                self.mismatch(node, "[]string");
                Vec::new()
            }
        }
    }

    fn items<'n>(&mut self, node: &'n Node, into: &str) -> Vec<&'n Node> {
        match &node.kind {
            Kind::Seq(items) => items.iter().collect(),
            _ if node.is_null() => Vec::new(),
            _ => {
                self.mismatch(node, into);
                Vec::new()
            }
        }
    }

    fn labels(&mut self, node: &Node) -> Labels {
        self.map(node).into_iter().collect()
    }

    fn float(&mut self, node: &Node) -> f64 {
        let text = node.value();
        let value = match node.tag() {
            "!!int" | "!!float" => number(&text.replace('_', "")).ok(),
            _ => None,
        };
        value.unwrap_or_else(|| {
            self.mismatch(node, "float64");
            0.0
        })
    }

    fn test_file(&mut self, root: &Node) -> TestFile {
        let mut file = TestFile::default();
        for (key, value) in self.entries(root, "main.unitTestFile").unwrap_or_default() {
            match key.value() {
                "rule_files" => file.rule_files = self.strings(value),
                "evaluation_interval" => file.evaluation_interval = Some(self.duration(value)),
                "group_eval_order" => file.group_eval_order = self.strings(value),
                "tests" => {
                    for item in self.items(value, "[]main.testGroup") {
                        let group = self.test_group(item);
                        file.tests.push(group);
                    }
                }
                _ => self.unknown(key, "main.unitTestFile"),
            }
        }
        file
    }

    fn test_group(&mut self, node: &Node) -> TestGroup {
        let mut group = TestGroup::default();
        for (key, value) in self.entries(node, "main.testGroup").unwrap_or_default() {
            match key.value() {
                "interval" => group.interval = Some(self.duration(value)),
                "input_series" => {
                    for item in self.items(value, "[]main.series") {
                        let mut series = (String::new(), String::new());
                        for (k, v) in self.entries(item, "main.series").unwrap_or_default() {
                            match k.value() {
                                "series" => series.0 = self.string(v),
                                "values" => series.1 = self.string(v),
                                _ => self.unknown(k, "main.series"),
                            }
                        }
                        group.input_series.push(series);
                    }
                }
                "alert_rule_test" => {
                    for item in self.items(value, "[]main.alertTestCase") {
                        let test = self.alert_test(item);
                        group.alert_rule_test.push(test);
                    }
                }
                "promql_expr_test" => {
                    for item in self.items(value, "[]main.promqlTestCase") {
                        let test = self.expr_test(item);
                        group.promql_expr_test.push(test);
                    }
                }
                "external_labels" => group.external_labels = self.labels(value),
                "external_url" => group.external_url = self.string(value),
                "name" => group.name = self.string(value),
                _ => self.unknown(key, "main.testGroup"),
            }
        }
        group
    }

    fn alert_test(&mut self, node: &Node) -> AlertTest {
        let mut test = AlertTest::default();
        for (key, value) in self.entries(node, "main.alertTestCase").unwrap_or_default() {
            match key.value() {
                "eval_time" => test.eval_time = self.duration(value),
                "alertname" => test.alertname = self.string(value),
                "exp_alerts" => {
                    for item in self.items(value, "[]main.alert") {
                        let mut alert = (Labels::new(), Labels::new());
                        for (k, v) in self.entries(item, "main.alert").unwrap_or_default() {
                            match k.value() {
                                "exp_labels" => alert.0 = self.labels(v),
                                "exp_annotations" => alert.1 = self.labels(v),
                                _ => self.unknown(k, "main.alert"),
                            }
                        }
                        test.exp_alerts.push(alert);
                    }
                }
                _ => self.unknown(key, "main.alertTestCase"),
            }
        }
        test
    }

    fn expr_test(&mut self, node: &Node) -> ExprTest {
        let mut test = ExprTest::default();
        for (key, value) in self
            .entries(node, "main.promqlTestCase")
            .unwrap_or_default()
        {
            match key.value() {
                "expr" => test.expr = self.string(value),
                "eval_time" => test.eval_time = self.duration(value),
                "exp_samples" => {
                    for item in self.items(value, "[]main.sample") {
                        let mut sample = (String::new(), 0.0);
                        for (k, v) in self.entries(item, "main.sample").unwrap_or_default() {
                            match k.value() {
                                "labels" => sample.0 = self.string(v),
                                "value" => sample.1 = self.float(v),
                                _ => self.unknown(k, "main.sample"),
                            }
                        }
                        test.exp_samples.push(sample);
                    }
                }
                _ => self.unknown(key, "main.promqlTestCase"),
            }
        }
        test
    }
}
