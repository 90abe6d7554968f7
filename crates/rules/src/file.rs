//! A rule file read and checked as Prometheus 2.42 reads and checks it
//! (`model/rulefmt`): the YAML decoded with unknown fields refused and
//! yaml.v3's type errors, then every group and rule validated, each problem
//! worded as promtool prints it (`5:15: group "g", rule 1, "name": …`).
//!
//! Two decodings, as rulefmt makes them: into the typed groups (type
//! errors, unknown fields, duplicate keys, durations), and into the raw
//! nodes of the groups (whose positions the validation names); an error of
//! either is the file's, and a YAML syntax error is reported by both.
//!
//! Beyond 2.42, a group may have `query_offset` (Prometheus 2.53),
//! `labels` (Prometheus 3.0) and chingest's own `database`; promtool 2.42
//! refuses them as unknown.

use std::time::Duration;

use crate::decode::Decoder;
pub use crate::decode::{Pairs, Problem};
use crate::gofmt::quote;
use crate::template;
use crate::yaml::{self, Kind, Node};

/// A rule file's groups.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct RuleFile {
    /// The groups, in the file's order.
    pub groups: Vec<Group>,
}

/// A group: rules evaluated in order, at one interval.
#[derive(Debug, Clone, PartialEq)]
pub struct Group {
    /// Unique in its file.
    pub name: String,
    /// The group's own interval; `None`: the configured default.
    pub interval: Option<Duration>,
    /// How far back evaluation looks (Prometheus 2.53's `query_offset`);
    /// `None`: the configured default.
    pub query_offset: Option<Duration>,
    /// Most series (recording) or alerts (alerting) a rule may produce; 0
    /// or less is no limit.
    pub limit: i64,
    /// Labels added to every rule's output (Prometheus 3.0).
    pub labels: Pairs,
    /// chingest's own key: the database the group's rules read and write;
    /// `None`: the configured ones.
    pub database: Option<String>,
    /// Evaluated in this order.
    pub rules: Vec<Rule>,
    /// Where the group starts in its file (1-based).
    pub line: usize,
}

/// A recording or an alerting rule.
#[derive(Debug, Clone, PartialEq)]
pub struct Rule {
    /// The series name a recording rule writes, or the alert's name.
    pub name: String,
    /// PromQL, checked by chingest's parser.
    pub expr: String,
    /// Labels added to (recording) or templated into (alerting) the output.
    pub labels: Pairs,
    /// Recording or alerting.
    pub kind: RuleKind,
    /// Where the rule starts in its file (1-based).
    pub line: usize,
}

/// What a rule does with its expression's result.
#[derive(Debug, Clone, PartialEq)]
pub enum RuleKind {
    /// Writes the result as the series `name`.
    Recording,
    /// Turns each result series into an alert.
    Alerting(Alerting),
}

/// An alerting rule's settings.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Alerting {
    /// How long a series must be in the result before the alert fires
    /// (`for`).
    pub hold: Duration,
    /// How long the alert keeps firing once its series left the result.
    pub keep_firing_for: Duration,
    /// Templates of the alert's annotations.
    pub annotations: Pairs,
}

/// A rule file's text read and checked: its groups, or every problem
/// found (as many as Prometheus finds, in its order).
pub fn parse(text: &str) -> Result<RuleFile, Vec<Problem>> {
    let root = match yaml::parse(text) {
        Ok(root) => root,
        Err(err) => {
            // Both of rulefmt's decodings fail on it, and both say so.
            let problem = Problem {
                line: (err.line > 0).then_some(err.line),
                message: err.to_string(),
            };
            return Err(vec![problem.clone(), problem]);
        }
    };
    let Some(root) = root else {
        return Ok(RuleFile::default());
    };
    let mut problems = Vec::new();
    let mut typed = Decoder::default();
    let raw = typed.file(&root);
    match typed.fatal {
        Some(message) => problems.push(Problem {
            line: None,
            message,
        }),
        None => problems.extend(typed.type_errors()),
    }
    let mut nodes = Decoder::default();
    nodes.group_nodes(&root);
    problems.extend(nodes.type_errors());
    if !problems.is_empty() {
        return Err(problems);
    }
    let problems = validate(&raw);
    if !problems.is_empty() {
        return Err(problems);
    }
    Ok(RuleFile {
        groups: raw.groups.into_iter().map(RawGroup::into_group).collect(),
    })
}

/// A field read as yaml.v3's `Node`: its scalar text and where it is
/// (0:0 when absent, as Prometheus prints it).
#[derive(Debug, Clone, Default)]
struct At {
    value: String,
    line: usize,
    column: usize,
}

impl At {
    fn of(node: &Node) -> At {
        At {
            value: node.value().to_owned(),
            line: node.line,
            column: node.column,
        }
    }

    fn position(&self) -> String {
        format!("{}:{}", self.line, self.column)
    }
}

#[derive(Debug, Default)]
struct RawFile {
    groups: Vec<RawGroup>,
}

#[derive(Debug, Default)]
struct RawGroup {
    name: String,
    interval: Duration,
    query_offset: Option<Duration>,
    limit: i64,
    labels: Pairs,
    database: Option<String>,
    rules: Vec<RawRule>,
    /// The group's node (rulefmt's second decoding).
    at: At,
}

#[derive(Debug, Default)]
struct RawRule {
    record: At,
    alert: At,
    expr: At,
    hold: Duration,
    keep_firing_for: Duration,
    labels: Pairs,
    annotations: Pairs,
    line: usize,
}

impl RawGroup {
    fn into_group(self) -> Group {
        Group {
            name: self.name,
            interval: (!self.interval.is_zero()).then_some(self.interval),
            query_offset: self.query_offset,
            limit: self.limit,
            labels: self.labels,
            database: self.database,
            line: self.at.line,
            rules: self
                .rules
                .into_iter()
                .map(|rule| Rule {
                    name: if rule.alert.value.is_empty() {
                        rule.record.value
                    } else {
                        rule.alert.value.clone()
                    },
                    expr: rule.expr.value,
                    labels: rule.labels,
                    line: rule.line,
                    kind: if rule.alert.value.is_empty() {
                        RuleKind::Recording
                    } else {
                        RuleKind::Alerting(Alerting {
                            hold: rule.hold,
                            keep_firing_for: rule.keep_firing_for,
                            annotations: rule.annotations,
                        })
                    },
                })
                .collect(),
        }
    }
}

impl Decoder {
    fn file(&mut self, root: &Node) -> RawFile {
        let mut file = RawFile::default();
        for (key, value) in self.entries(root, "rulefmt.RuleGroups").unwrap_or_default() {
            match key.value() {
                "groups" => match &value.kind {
                    Kind::Seq(items) => {
                        file.groups = items.iter().map(|item| self.group(item)).collect();
                    }
                    _ if value.is_null() => {}
                    _ => self.mismatch(value, "[]rulefmt.RuleGroup"),
                },
                _ => self.unknown(key, "rulefmt.RuleGroups"),
            }
            if self.fatal.is_some() {
                break;
            }
        }
        file
    }

    fn group(&mut self, node: &Node) -> RawGroup {
        let mut group = RawGroup {
            at: At::of(node),
            ..RawGroup::default()
        };
        for (key, value) in self.entries(node, "rulefmt.RuleGroup").unwrap_or_default() {
            match key.value() {
                "name" => group.name = self.string(value),
                "interval" => group.interval = self.duration(value),
                "query_offset" if !value.is_null() => {
                    group.query_offset = Some(self.duration(value));
                }
                "query_offset" => {}
                "limit" => group.limit = self.int(value),
                "labels" => group.labels = self.map(value),
                "database" if !value.is_null() => group.database = Some(self.string(value)),
                "database" => {}
                "rules" => match &value.kind {
                    Kind::Seq(items) => {
                        group.rules = items.iter().map(|item| self.rule(item)).collect();
                    }
                    _ if value.is_null() => {}
                    _ => self.mismatch(value, "[]rulefmt.RuleNode"),
                },
                _ => self.unknown(key, "rulefmt.RuleGroup"),
            }
            if self.fatal.is_some() {
                break;
            }
        }
        group
    }

    fn rule(&mut self, node: &Node) -> RawRule {
        let mut rule = RawRule {
            line: node.line,
            ..RawRule::default()
        };
        for (key, value) in self.entries(node, "rulefmt.RuleNode").unwrap_or_default() {
            match key.value() {
                "record" => rule.record = At::of(value),
                "alert" => rule.alert = At::of(value),
                "expr" => rule.expr = At::of(value),
                "for" => rule.hold = self.duration(value),
                "keep_firing_for" => rule.keep_firing_for = self.duration(value),
                "labels" => rule.labels = self.map(value),
                "annotations" => rule.annotations = self.map(value),
                _ => self.unknown(key, "rulefmt.RuleNode"),
            }
            if self.fatal.is_some() {
                break;
            }
        }
        rule
    }

    /// rulefmt's second decoding: the top-level mapping, its `groups` as
    /// raw nodes (so only what is wrong at the top is found again).
    fn group_nodes(&mut self, root: &Node) {
        for (key, value) in self.entries(root, "rulefmt.ruleGroups").unwrap_or_default() {
            if key.value() == "groups" && !matches!(value.kind, Kind::Seq(_)) && !value.is_null() {
                self.mismatch(value, "[]yaml.Node");
            }
        }
    }
}

/// Prometheus 2.42's label names: `[a-zA-Z_][a-zA-Z0-9_]*`.
pub fn is_valid_label_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Prometheus 2.42's metric names: `[a-zA-Z_:][a-zA-Z0-9_:]*`.
pub fn is_valid_metric_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

/// rulefmt's `RuleGroups.Validate`.
fn validate(file: &RawFile) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for group in &file.groups {
        let at = &group.at;
        if group.name.is_empty() {
            problems.push(Problem {
                line: Some(at.line),
                message: format!("{}: Groupname must not be empty", at.position()),
            });
        }
        if !seen.insert(group.name.as_str()) {
            problems.push(Problem {
                line: Some(at.line),
                message: format!(
                    "{}: groupname: \"{}\" is repeated in the same file",
                    at.position(),
                    group.name
                ),
            });
        }
        if group.database.as_deref() == Some("") {
            problems.push(Problem {
                line: Some(at.line),
                message: format!("{}: database must not be empty", at.position()),
            });
        }
        for (name, _) in &group.labels {
            if !is_valid_label_name(name) || name == "__name__" {
                problems.push(Problem {
                    line: Some(at.line),
                    message: format!("invalid label name: {name}"),
                });
            }
        }
        for (i, rule) in group.rules.iter().enumerate() {
            let name = if rule.alert.value.is_empty() {
                &rule.record.value
            } else {
                &rule.alert.value
            };
            for (at, reason) in validate_rule(rule) {
                let prefix = format!(
                    "group {}, rule {}, {}",
                    quote(&group.name),
                    i + 1,
                    quote(name)
                );
                let (line, message) = match at {
                    [Some(a), Some(b)] => (
                        a.line,
                        format!("{}: {}: {prefix}: {reason}", a.position(), b.position()),
                    ),
                    [Some(a), None] => (a.line, format!("{}: {prefix}: {reason}", a.position())),
                    _ => (rule.line, format!("{prefix}: {reason}")),
                };
                problems.push(Problem {
                    line: Some(line).filter(|l| *l > 0),
                    message,
                });
            }
        }
    }
    problems
}

/// rulefmt's `RuleNode.Validate`: each problem with the nodes it names.
fn validate_rule(rule: &RawRule) -> Vec<([Option<&At>; 2], String)> {
    let mut out = Vec::new();
    let (record, alert) = (&rule.record, &rule.alert);
    if !record.value.is_empty() && !alert.value.is_empty() {
        out.push((
            [Some(record), Some(alert)],
            "only one of 'record' and 'alert' must be set".to_owned(),
        ));
    }
    if record.value.is_empty() && alert.value.is_empty() {
        out.push((
            [Some(record), None],
            "one of 'record' or 'alert' must be set".to_owned(),
        ));
    }
    if rule.expr.value.is_empty() {
        out.push((
            [Some(&rule.expr), None],
            "field 'expr' must be set in rule".to_owned(),
        ));
    } else if let Err(err) = chingest_promql::parse_expr(&rule.expr.value) {
        out.push((
            [Some(&rule.expr), None],
            format!("could not parse expression: {err}"),
        ));
    }
    if !record.value.is_empty() {
        if !rule.annotations.is_empty() {
            out.push((
                [Some(record), None],
                "invalid field 'annotations' in recording rule".to_owned(),
            ));
        }
        if !rule.hold.is_zero() {
            out.push((
                [Some(record), None],
                "invalid field 'for' in recording rule".to_owned(),
            ));
        }
        if !rule.keep_firing_for.is_zero() {
            out.push((
                [Some(record), None],
                "invalid field 'keep_firing_for' in recording rule".to_owned(),
            ));
        }
        if !is_valid_metric_name(&record.value) {
            out.push((
                [Some(record), None],
                format!("invalid recording rule name: {}", record.value),
            ));
        }
    }
    for (name, _) in &rule.labels {
        if !is_valid_label_name(name) || name == "__name__" {
            out.push(([None, None], format!("invalid label name: {name}")));
        }
    }
    for (name, _) in &rule.annotations {
        if !is_valid_label_name(name) {
            out.push(([None, None], format!("invalid annotation name: {name}")));
        }
    }
    if !alert.value.is_empty() {
        let name = format!("__alert_{}", alert.value);
        for (what, pairs) in [("label", &rule.labels), ("annotation", &rule.annotations)] {
            for (key, text) in pairs {
                if let Err(err) = template::parse_alert_template(&name, text) {
                    out.push(([None, None], format!("{what} {}: {err}", quote(key))));
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn problems(text: &str) -> Vec<String> {
        parse(text)
            .unwrap_err()
            .into_iter()
            .map(|p| p.message)
            .collect()
    }

    #[test]
    fn a_group_may_name_its_database_but_not_an_empty_one() {
        let text = |db: &str| {
            format!("groups:\n  - name: g\n    database: {db}\n    rules:\n      - record: a:b\n        expr: up\n")
        };
        let file = parse(&text("telegraf")).unwrap();
        assert_eq!(file.groups[0].database.as_deref(), Some("telegraf"));
        let problems = problems(&text("''"));
        assert!(
            problems
                .iter()
                .any(|p| p.contains("database must not be empty")),
            "{problems:?}"
        );
    }

    #[test]
    fn a_good_file_reads_into_groups_and_rules() {
        let file = parse(
            "groups:\n  - name: g\n    interval: 30s\n    limit: 10\n    query_offset: 1m\n    rules:\n      - record: job:up:sum\n        expr: sum by (job) (up)\n        labels: {team: a}\n      - alert: Down\n        expr: up == 0\n        for: 5m\n        keep_firing_for: 1m\n        annotations:\n          summary: \"{{ $labels.instance }} is down\"\n",
        )
        .unwrap();
        let group = &file.groups[0];
        assert_eq!(group.name, "g");
        assert_eq!(group.interval, Some(Duration::from_secs(30)));
        assert_eq!(group.query_offset, Some(Duration::from_secs(60)));
        assert_eq!(group.limit, 10);
        assert_eq!(group.line, 2);
        assert_eq!(group.rules[0].name, "job:up:sum");
        assert_eq!(group.rules[0].kind, RuleKind::Recording);
        assert_eq!(group.rules[0].labels, vec![("team".into(), "a".into())]);
        assert_eq!(group.rules[1].line, 10);
        let RuleKind::Alerting(alerting) = &group.rules[1].kind else {
            panic!("an alerting rule")
        };
        assert_eq!(alerting.hold, Duration::from_secs(300));
        assert_eq!(alerting.keep_firing_for, Duration::from_secs(60));
    }

    #[test]
    fn type_errors_are_gathered_as_yaml_v3_gathers_them() {
        assert_eq!(
            problems("groups:\n  - name: a\n    rules:\n      - record: x\n        expr: up\n        foo: 1\n      - record: y\n        expr: up\n        labels: [1]\n"),
            vec!["yaml: unmarshal errors:\n  line 6: field foo not found in type rulefmt.RuleNode\n  line 9: cannot unmarshal !!seq into map[string]string"]
        );
        assert_eq!(
            problems("groups: []\ngroups: []\n"),
            vec![
                "yaml: unmarshal errors:\n  line 2: mapping key \"groups\" already defined at line 1";
                2
            ]
        );
        assert_eq!(
            problems("groups:\n  - name: a\n    limit: abcdefghijkl\n"),
            vec!["yaml: unmarshal errors:\n  line 3: cannot unmarshal !!str `abcdefg...` into int"]
        );
        assert_eq!(
            problems("groups:\n  - name: a\n    rules:\n      - alert: A\n        expr: up\n        for: 5\n        foo: 1\n"),
            vec!["not a valid duration string: \"5\""]
        );
    }

    #[test]
    fn scalars_of_any_type_read_as_strings_and_nulls_as_nothing() {
        let file = parse("groups:\n  - name: a\n    limit: 1.5\n    rules:\n      - record: x\n        expr: 1\n        for: ~\n        labels: {a: 1, b: true, c: }\n").unwrap();
        let rule = &file.groups[0].rules[0];
        assert_eq!(file.groups[0].limit, 1);
        assert_eq!(
            rule.labels,
            vec![
                ("a".into(), "1".into()),
                ("b".into(), "true".into()),
                ("c".into(), String::new())
            ]
        );
    }

    #[test]
    fn merge_keys_bring_entries_under_the_mappings_own() {
        let file = parse("groups:\n  - name: a\n    rules:\n      - record: x\n        expr: up\n        labels: &l {a: b, c: d}\n      - record: y\n        expr: up\n        labels:\n          <<: *l\n          c: e\n").unwrap();
        assert_eq!(
            file.groups[0].rules[1].labels,
            vec![("a".into(), "b".into()), ("c".into(), "e".into())]
        );
    }
}
