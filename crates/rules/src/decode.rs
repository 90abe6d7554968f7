//! yaml.v3's decoding of a document into Go types, as Prometheus's files
//! are read (rule files, promtool's unit tests): type errors gathered in
//! document order and worded as yaml.v3 words them, unknown fields, repeated
//! keys, merge keys, and the first error that is not a type error (a bad
//! duration), which ends decoding. The types' own readers are `impl
//! Decoder` blocks of the modules that define them.

use std::time::Duration;

use crate::duration;
use crate::gofmt::quote;
use crate::yaml::{self, Kind, Node};

/// Labels or annotations, in the file's order.
pub type Pairs = Vec<(String, String)>;

/// One thing wrong with a file, worded as promtool prints it after the
/// file's name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Problem {
    /// The line it names, when it names one.
    pub line: Option<usize>,
    /// What promtool prints after `FILE: `.
    pub message: String,
}

impl std::fmt::Display for Problem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// yaml.v3's decoder: type errors gathered in document order, and the
/// first error that is not one (a bad duration), which ends decoding.
#[derive(Default)]
pub(crate) struct Decoder {
    pub(crate) errors: Vec<String>,
    pub(crate) fatal: Option<String>,
}

impl Decoder {
    pub(crate) fn type_errors(&self) -> Option<Problem> {
        let first = self.errors.first()?;
        let line = first
            .strip_prefix("line ")
            .and_then(|rest| rest.split(':').next()?.parse().ok());
        Some(Problem {
            line,
            message: format!("yaml: unmarshal errors:\n  {}", self.errors.join("\n  ")),
        })
    }

    pub(crate) fn mismatch(&mut self, node: &Node, into: &str) {
        self.errors.push(format!(
            "line {}: cannot unmarshal {} into {into}",
            node.line,
            node.describe()
        ));
    }

    /// A mapping's entries as a struct or map reads them: `None` when the
    /// node is null (the zero value) or not a mapping (a type error), or
    /// when it repeats a key (yaml.v3 then reads none of it). Merge keys
    /// (`<<`) bring the entries they name, under the mapping's own.
    pub(crate) fn entries<'n>(
        &mut self,
        node: &'n Node,
        into: &str,
    ) -> Option<Vec<(&'n Node, &'n Node)>> {
        let entries = match &node.kind {
            Kind::Map(entries) => entries,
            _ if node.is_null() => return None,
            _ => {
                self.mismatch(node, into);
                return None;
            }
        };
        let before = self.errors.len();
        for (i, (a, _)) in entries.iter().enumerate() {
            for (b, _) in &entries[i + 1..] {
                if a.tag() == b.tag() && a.value() == b.value() && scalar(a) == scalar(b) {
                    self.errors.push(format!(
                        "line {}: mapping key {} already defined at line {}",
                        b.line,
                        quote(b.value()),
                        a.line
                    ));
                }
            }
        }
        if self.errors.len() > before {
            return None;
        }
        let own: Vec<&str> = entries
            .iter()
            .filter(|(k, _)| k.tag() != "!!merge")
            .map(|(k, _)| k.value())
            .collect();
        let mut out: Vec<(&Node, &Node)> = Vec::new();
        for (key, value) in entries {
            if key.tag() != "!!merge" {
                out.push((key, value));
                continue;
            }
            let merged: Vec<&Node> = match &value.kind {
                Kind::Seq(items) => items.iter().collect(),
                _ => vec![value],
            };
            for source in merged {
                let Kind::Map(pairs) = &source.kind else {
                    self.errors.push(format!(
                        "line {}: map merge requires map or sequence of maps as the value",
                        source.line
                    ));
                    continue;
                };
                for (k, v) in pairs {
                    let taken = own.contains(&k.value())
                        || out.iter().any(|(seen, _)| seen.value() == k.value());
                    if !taken {
                        out.push((k, v));
                    }
                }
            }
        }
        Some(out)
    }

    pub(crate) fn string(&mut self, node: &Node) -> String {
        match &node.kind {
            Kind::Scalar { .. } if node.is_null() => String::new(),
            Kind::Scalar { text, .. } => text.clone(),
            _ => {
                self.mismatch(node, "string");
                String::new()
            }
        }
    }

    pub(crate) fn int(&mut self, node: &Node) -> i64 {
        if node.is_null() {
            return 0;
        }
        let value = match node.tag() {
            "!!int" => yaml::parse_int(node.value()).and_then(|v| i64::try_from(v).ok()),
            "!!float" => node
                .value()
                .replace('_', "")
                .parse::<f64>()
                .ok()
                .filter(|v| v.is_finite() && v.abs() < 9.2e18)
                .map(|v| v as i64),
            _ => None,
        };
        value.unwrap_or_else(|| {
            self.mismatch(node, "int");
            0
        })
    }

    /// `model.Duration`: read as a string, then parsed; a parse error ends
    /// decoding (it is no type error).
    pub(crate) fn duration(&mut self, node: &Node) -> Duration {
        if node.is_null() {
            return Duration::ZERO;
        }
        let before = self.errors.len();
        let text = self.string(node);
        if self.errors.len() > before {
            return Duration::ZERO;
        }
        match duration::parse(&text) {
            Ok(d) => d,
            Err(err) => {
                self.fatal.get_or_insert(err);
                Duration::ZERO
            }
        }
    }

    pub(crate) fn map(&mut self, node: &Node) -> Pairs {
        let Some(entries) = self.entries(node, "map[string]string") else {
            return Pairs::new();
        };
        entries
            .into_iter()
            .map(|(k, v)| (self.string(k), self.string(v)))
            .collect()
    }

    pub(crate) fn unknown(&mut self, key: &Node, into: &str) {
        self.errors.push(format!(
            "line {}: field {} not found in type {into}",
            key.line,
            key.value()
        ));
    }
}

/// Whether a node is a scalar (keys compare by kind and text).
fn scalar(node: &Node) -> bool {
    matches!(node.kind, Kind::Scalar { .. })
}
