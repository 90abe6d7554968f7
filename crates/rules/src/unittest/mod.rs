//! `promtool test rules`, as Prometheus 2.42's promtool runs it
//! (`cmd/promtool/unittest.go`): a test file names rule files and test
//! groups; each group's `input_series` are loaded at its `interval`, every
//! rule group is evaluated from time 0 at each `evaluation_interval` up to
//! the latest `eval_time` (recorded series written back), the firing
//! alerts compared at each `alert_rule_test`'s time and each
//! `promql_expr_test` queried at the end. Output and exit code are
//! promtool's. The rules run on the same evaluation as the server's
//! (`group.rs`), over the series in memory (`evaluate_in_memory`).

use std::collections::HashMap;
use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

use chingest_promql::{Labels as SeriesLabels, Options, Series};

use crate::alert::{Labels, Sample, State};
use crate::check::{self, Outcome, FAILURE};
use crate::duration;
use crate::duration::millis;
use crate::file::Group;
use crate::gofmt::quote;
use crate::group::{samples_of, GroupState, Storage};
use crate::load;
use crate::settings::Settings;

mod decode;
mod format;
mod notation;

use decode::{parse, ExprTest, TestGroup};
use format::{alerts_string, go_duration, indent_lines, samples_string};
use notation::{expand_values, parse_metric};

/// Most evaluations of the rules one test group may ask for.
const MAX_EVALUATIONS: i64 = 1_000_000;

/// Runs the tests of every file in order, printing as promtool prints;
/// the exit code (0, or 1 when a test failed).
pub fn test_files(
    paths: &[impl AsRef<Path>],
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> io::Result<i32> {
    let mut failed = false;
    for path in paths {
        let path = path.as_ref();
        writeln!(out, "Unit Testing:  {}", path.display())?;
        let errors = test_file(path);
        if errors.is_empty() {
            writeln!(out, "  SUCCESS")?;
        } else {
            out.flush()?;
            writeln!(err, "  FAILED:")?;
            for error in errors {
                writeln!(err, "{error}")?;
                err.flush()?;
                writeln!(out)?;
            }
            failed = true;
        }
        writeln!(out)?;
    }
    Ok(if failed { FAILURE } else { 0 })
}

/// One file's failures, each worded as promtool words it.
fn test_file(path: &Path) -> Vec<String> {
    let text = match check::read(path) {
        Ok(text) => text,
        Err(err) => return vec![err.to_string()],
    };
    let file = match parse(&text) {
        Ok(file) => file,
        Err(err) => return vec![err],
    };
    let base = path.parent().unwrap_or(Path::new("."));
    let rule_files = match load::expand(&file.rule_files, base) {
        Ok(paths) => paths,
        Err(err) => return vec![err.to_string()],
    };
    let evaluation_interval = file
        .evaluation_interval
        .filter(|d| !d.is_zero())
        .unwrap_or(Duration::from_secs(60));
    let mut order: HashMap<&str, usize> = HashMap::new();
    for (i, name) in file.group_eval_order.iter().enumerate() {
        if order.insert(name, i).is_some() {
            return vec![format!("group name repeated in evaluation order: {name}")];
        }
    }
    let mut errors = Vec::new();
    for test in &file.tests {
        errors.extend(test.run(evaluation_interval, &order, &rule_files));
    }
    errors
}

/// The series of a unit test in memory: what rules read and write.
struct Memory {
    series: Mutex<Vec<Series>>,
    index: Mutex<HashMap<Labels, usize>>,
    options: Options,
}

impl Memory {
    fn new(loaded: Vec<(Labels, Vec<(i64, f64)>)>) -> Memory {
        let memory = Memory {
            series: Mutex::new(Vec::new()),
            index: Mutex::new(HashMap::new()),
            options: Options::default(),
        };
        for (labels, points) in loaded {
            memory.append(&labels, &points);
        }
        memory
    }

    fn append(&self, labels: &Labels, points: &[(i64, f64)]) {
        let mut series = self.series.lock().unwrap();
        let mut index = self.index.lock().unwrap();
        let at = *index.entry(labels.clone()).or_insert_with(|| {
            let pairs = labels.iter().map(|(k, v)| (k.clone(), v.clone())).collect();
            series.push(Series {
                labels: SeriesLabels::new(pairs),
                points: Vec::new(),
            });
            series.len() - 1
        });
        let points_of = &mut series[at].points;
        for &(t, v) in points {
            // A later write at a time replaces the earlier, as storage keeps one.
            match points_of.binary_search_by_key(&t, |p| p.0) {
                Ok(i) => points_of[i].1 = v,
                Err(i) => points_of.insert(i, (t, v)),
            }
        }
    }

    fn instant(&self, expr: &str, ts: i64) -> Result<Vec<Sample>, String> {
        let series = self.series.lock().unwrap();
        let value = chingest_promql::evaluate_in_memory(expr, &series, (ts, ts, 0), self.options)
            .map_err(|err| err.to_string())?;
        samples_of(value)
    }
}

impl Storage for Memory {
    async fn query(&self, expr: &str, ts: i64) -> Result<Vec<Sample>, String> {
        self.instant(expr, ts)
    }

    async fn write(&self, ts: i64, samples: &[&Sample]) -> Result<(), String> {
        for sample in samples {
            self.append(&sample.labels, &[(ts, sample.value)]);
        }
        Ok(())
    }

    fn query_blocking(&self, expr: &str, ts: i64) -> Result<Vec<Sample>, String> {
        self.instant(expr, ts)
    }
}

impl TestGroup {
    fn run(
        &self,
        evaluation_interval: Duration,
        order: &HashMap<&str, usize>,
        rule_files: &[PathBuf],
    ) -> Vec<String> {
        let interval = self
            .interval
            .filter(|d| !d.is_zero())
            .unwrap_or(evaluation_interval);
        let interval_ms = millis(interval);
        let mut loaded = Vec::new();
        for (series, values) in &self.input_series {
            let labels = match parse_metric(series) {
                Ok(labels) => labels,
                Err(err) => return vec![format!("parse error: {series:?}: {err}")],
            };
            let values = match expand_values(values) {
                Ok(values) => values,
                Err(err) => return vec![format!("parse error: {values:?}: {err}")],
            };
            let points = values
                .into_iter()
                .enumerate()
                .filter_map(|(i, v)| Some((i as i64 * interval_ms, v?)))
                .collect();
            loaded.push((labels, points));
        }
        let memory = Memory::new(loaded);
        // Groups as the manager loads them, ordered by group_eval_order.
        let settings = Settings {
            evaluation_interval: interval,
            external_labels: self.external_labels.clone(),
            external_url: self.external_url.clone(),
            ..Settings::default()
        };
        let mut groups: Vec<(usize, GroupState)> = Vec::new();
        let mut problems = Vec::new();
        for path in rule_files {
            let options = check::Options {
                duplicate_rules: false,
                lint_fatal: false,
            };
            match check::check_file(path, options) {
                Outcome::Valid(file) => {
                    let name = path.display().to_string();
                    groups.extend(file.groups.iter().map(|g: &Group| {
                        let rank = order.get(g.name.as_str()).copied().unwrap_or(usize::MAX);
                        (rank, GroupState::new(&name, g, &settings))
                    }));
                }
                Outcome::Invalid(found) => problems.extend(found),
                Outcome::Lint(_) => unreachable!("linting is off"),
            }
        }
        if !problems.is_empty() {
            return problems;
        }
        // Stable: groups not in the order keep the files' order after it.
        groups.sort_by_key(|(rank, _)| *rank);
        let mut groups: Vec<GroupState> = groups.into_iter().map(|(_, g)| g).collect();

        let max_eval = self
            .alert_rule_test
            .iter()
            .map(|t| t.eval_time)
            .chain(self.promql_expr_test.iter().map(|t| t.eval_time))
            .max()
            .unwrap_or_default();
        let step = millis(evaluation_interval).max(1);
        if millis(max_eval) / step > MAX_EVALUATIONS {
            return vec![format!(
                "{} evaluations of the rules asked for, more than the {MAX_EVALUATIONS} run",
                millis(max_eval) / step
            )];
        }
        for test in &self.alert_rule_test {
            if test.alertname.is_empty() {
                let group = match self.name.is_empty() {
                    true => String::new(),
                    false => format!(" (in TestGroup {})", self.name),
                };
                return vec![format!(
                    "an item under alert_rule_test misses required attribute alertname at eval_time {}{group}",
                    duration::format(test.eval_time)
                )];
            }
        }
        let mut alert_times: Vec<Duration> =
            self.alert_rule_test.iter().map(|t| t.eval_time).collect();
        alert_times.sort();
        alert_times.dedup();
        let mut next_check = 0;
        let mut errors = Vec::new();
        let mut ts = 0;
        while ts <= millis(max_eval) {
            let mut eval_errors = Vec::new();
            for group in &mut groups {
                block_on(group.evaluate(&memory, &settings, ts));
                for rule in &group.rules {
                    if let Some(err) = &rule.status.last_error {
                        eval_errors.push(format!(
                            "    rule: {}, time: {}, err: {err}",
                            rule.rule.name,
                            go_duration(ts)
                        ));
                    }
                }
            }
            if !eval_errors.is_empty() {
                errors.extend(eval_errors);
                return errors;
            }
            while next_check < alert_times.len()
                && ts <= millis(alert_times[next_check])
                && millis(alert_times[next_check]) < ts + step
            {
                let at = alert_times[next_check];
                errors.extend(self.check_alerts(at, &groups));
                next_check += 1;
            }
            ts += step;
        }
        for test in &self.promql_expr_test {
            errors.extend(test.check(&memory));
        }
        errors
    }

    /// The alert tests at `at` against the firing alerts of the groups.
    fn check_alerts(&self, at: Duration, groups: &[GroupState]) -> Vec<String> {
        let mut errors = Vec::new();
        for test in self.alert_rule_test.iter().filter(|t| t.eval_time == at) {
            let mut got: Vec<(Labels, Labels)> = groups
                .iter()
                .flat_map(|g| &g.rules)
                .filter(|r| r.rule.name == test.alertname)
                .filter_map(|r| r.alerts.as_ref())
                .flat_map(|a| a.alerts())
                .filter(|a| a.state == State::Firing)
                .map(|a| (a.labels.clone(), a.annotations.clone()))
                .collect();
            let mut expected: Vec<(Labels, Labels)> = test
                .exp_alerts
                .iter()
                .map(|(labels, annotations)| {
                    let mut labels = labels.clone();
                    labels.insert("alertname".into(), test.alertname.clone());
                    (labels, annotations.clone())
                })
                .collect();
            got.sort();
            expected.sort();
            if got != expected {
                let name = match self.name.is_empty() {
                    true => String::new(),
                    false => format!("    name: {},\n", self.name),
                };
                let indent = "            ";
                errors.push(format!(
                    "{name}    alertname: {}, time: {}, \n        exp:{}, \n        got:{}",
                    test.alertname,
                    duration::format(test.eval_time),
                    indent_lines(&alerts_string(&expected), indent),
                    indent_lines(&alerts_string(&got), indent)
                ));
            }
        }
        errors
    }
}

impl ExprTest {
    fn check(&self, memory: &Memory) -> Vec<String> {
        let time = duration::format(self.eval_time);
        let expr = quote(&self.expr);
        let got = match memory.instant(&self.expr, millis(self.eval_time)) {
            Ok(got) => got,
            Err(err) => {
                // The parser's reason, as promtool words it (without its
                // line and column).
                let err = match err.strip_prefix("invalid parameter \"query\": ") {
                    Some(reason) => format!("parse error: {reason}"),
                    None => err,
                };
                return vec![format!("    expr: {expr}, time: {time}, err: {err}")];
            }
        };
        let mut expected = Vec::new();
        for (labels, value) in &self.exp_samples {
            match parse_metric(labels) {
                Ok(parsed) => expected.push((parsed, *value)),
                Err(err) => {
                    return vec![format!(
                        "    expr: {expr}, time: {time}, err: labels {}: {err}",
                        quote(labels)
                    )]
                }
            }
        }
        let mut got: Vec<(Labels, f64)> = got.into_iter().map(|s| (s.labels, s.value)).collect();
        got.sort_by(|a, b| a.0.cmp(&b.0));
        expected.sort_by(|a, b| a.0.cmp(&b.0));
        // Go's reflect.DeepEqual: NaN equals nothing, not even NaN.
        let equal = got.len() == expected.len()
            && got
                .iter()
                .zip(&expected)
                .all(|(g, e)| g.0 == e.0 && g.1 == e.1);
        match equal {
            true => Vec::new(),
            false => vec![format!(
                "    expr: {expr}, time: {time},\n        exp: {}\n        got: {}",
                samples_string(&expected),
                samples_string(&got)
            )],
        }
    }
}

/// Runs a future that never waits on I/O (the rules over memory) to its end.
fn block_on<F: std::future::Future>(future: F) -> F::Output {
    let waker = std::task::Waker::noop();
    let mut context = std::task::Context::from_waker(waker);
    let mut future = std::pin::pin!(future);
    loop {
        if let std::task::Poll::Ready(out) = future.as_mut().poll(&mut context) {
            return out;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_print_as_go_prints_them() {
        assert_eq!(go_duration(0), "0s");
        assert_eq!(go_duration(600_000), "10m0s");
        assert_eq!(go_duration(5_400_000), "1h30m0s");
        assert_eq!(go_duration(1_500), "1.5s");
        assert_eq!(go_duration(250), "250ms");
    }
}
