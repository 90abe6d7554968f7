//! The values a template works with, the Go types they stand for (named
//! in errors as Go names them), and how Go prints each; and what an
//! expansion is given (its data, its bounds, the `query` hook).

use std::collections::BTreeMap;
use std::sync::Arc;

use crate::gofmt;

/// An alert's data, the template's `.` (Prometheus's `AlertTemplateData`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AlertData {
    /// The alert's labels (`$labels`, `.Labels`).
    pub labels: BTreeMap<String, String>,
    /// The configured external labels (`$externalLabels`).
    pub external_labels: BTreeMap<String, String>,
    /// The configured external URL (`$externalURL`).
    pub external_url: String,
    /// The alert's value (`$value`, `.Value`).
    pub value: f64,
}

/// A sample of a `query` result: labels and value.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The series' labels, `__name__` included.
    pub labels: BTreeMap<String, String>,
    /// Its value.
    pub value: f64,
}

/// The bounds of one expansion.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Nodes executed and loop iterations.
    pub max_steps: usize,
    /// Bytes of output.
    pub max_output: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_steps: 100_000,
            max_output: 256 * 1024,
        }
    }
}

/// Answers a template's `query`: an instant query at the evaluation's
/// time (the evaluator provides it).
pub trait Query {
    /// The query's samples, or why it failed.
    fn query(&self, expr: &str) -> Result<Vec<Sample>, String>;
}

/// A value during execution.
#[derive(Debug, Clone)]
pub(crate) enum Value {
    /// No value (Go's invalid `reflect.Value` or a nil interface).
    Nil,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(String),
    /// `map[string]string`.
    Labels(Arc<BTreeMap<String, String>>),
    /// The alert's data.
    Data(Arc<AlertData>),
    /// `query`'s result.
    Samples(Arc<Vec<Sample>>),
    /// One of its samples.
    Sample(Arc<Sample>),
    /// `*time.Time`, in ms since the epoch.
    Time(i64),
    /// `args`' result: `map[string]interface{}`.
    Args(Arc<BTreeMap<String, Value>>),
}

impl Value {
    /// The Go type's name, as errors print it.
    pub(crate) fn type_name(&self) -> &'static str {
        match self {
            Value::Nil => "<nil>",
            Value::Bool(_) => "bool",
            Value::Int(_) => "int",
            Value::Float(_) => "float64",
            Value::Str(_) => "string",
            Value::Labels(_) => "map[string]string",
            Value::Data(_) => {
                "struct { Labels map[string]string; ExternalLabels map[string]string; ExternalURL string; Value float64 }"
            }
            Value::Samples(_) => "template.queryResult",
            Value::Sample(_) => "*template.sample",
            Value::Time(_) => "*time.Time",
            Value::Args(_) => "map[string]interface {}",
        }
    }

    /// Go's truth: false, 0, "", empty collections and nil are false.
    pub(crate) fn truth(&self) -> bool {
        match self {
            Value::Nil => false,
            Value::Bool(b) => *b,
            Value::Int(i) => *i != 0,
            Value::Float(f) => *f != 0.0,
            Value::Str(s) => !s.is_empty(),
            Value::Labels(m) => !m.is_empty(),
            Value::Samples(v) => !v.is_empty(),
            Value::Args(m) => !m.is_empty(),
            Value::Data(_) | Value::Sample(_) | Value::Time(_) => true,
        }
    }

    /// The value as `{{ . }}` prints it (Go's `fmt.Fprint`).
    pub(crate) fn print(&self) -> String {
        match self {
            Value::Nil => "<no value>".into(),
            other => other.sprint(),
        }
    }

    /// `fmt.Sprint` of the value (`%v`).
    pub(crate) fn sprint(&self) -> String {
        match self {
            Value::Nil => "<nil>".into(),
            Value::Bool(b) => b.to_string(),
            Value::Int(i) => i.to_string(),
            Value::Float(f) => gofmt::float(*f, 'v', None),
            Value::Str(s) => s.clone(),
            Value::Labels(m) => print_map(m.iter().map(|(k, v)| (k.as_str(), v.clone()))),
            Value::Data(d) => format!(
                "{{{} {} {} {}}}",
                print_map(d.labels.iter().map(|(k, v)| (k.as_str(), v.clone()))),
                print_map(
                    d.external_labels
                        .iter()
                        .map(|(k, v)| (k.as_str(), v.clone()))
                ),
                d.external_url,
                gofmt::float(d.value, 'v', None)
            ),
            Value::Samples(v) => {
                let items: Vec<String> =
                    v.iter().map(|s| format!("&{}", print_sample(s))).collect();
                format!("[{}]", items.join(" "))
            }
            Value::Sample(s) => print_sample(s),
            Value::Time(ms) => format_time(*ms),
            Value::Args(m) => print_map(m.iter().map(|(k, v)| (k.as_str(), v.sprint()))),
        }
    }
}

fn print_sample(s: &Sample) -> String {
    format!(
        "{{{} {}}}",
        print_map(s.labels.iter().map(|(k, v)| (k.as_str(), v.clone()))),
        gofmt::float(s.value, 'v', None)
    )
}

fn print_map<'a>(entries: impl Iterator<Item = (&'a str, String)>) -> String {
    let items: Vec<String> = entries.map(|(k, v)| format!("{k}:{v}")).collect();
    format!("map[{}]", items.join(" "))
}

/// A time as Go's `time.Time.String` prints one in UTC:
/// `2006-01-02 15:04:05.999999999 +0000 UTC` (fraction without trailing
/// zeros, none when whole).
pub(crate) fn format_time(ms: i64) -> String {
    let days = ms.div_euclid(86_400_000);
    let in_day = ms.rem_euclid(86_400_000);
    let (y, m, d) = civil_from_days(days);
    let (h, min, s, frac) = (
        in_day / 3_600_000,
        in_day / 60_000 % 60,
        in_day / 1000 % 60,
        in_day % 1000,
    );
    let mut out = format!("{y:04}-{m:02}-{d:02} {h:02}:{min:02}:{s:02}");
    if frac != 0 {
        let digits = format!("{frac:03}");
        out.push('.');
        out.push_str(digits.trim_end_matches('0'));
    }
    out.push_str(" +0000 UTC");
    out
}

/// The proleptic Gregorian date of a day count since 1970-01-01 (Howard
/// Hinnant's `civil_from_days`).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let y = yoe + era * 400;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    (if m <= 2 { y + 1 } else { y }, m, d)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_print_as_go_prints_them() {
        assert_eq!(format_time(0), "1970-01-01 00:00:00 +0000 UTC");
        assert_eq!(
            format_time(1_461_666_000_500),
            "2016-04-26 10:20:00.5 +0000 UTC"
        );
        assert_eq!(format_time(-1), "1969-12-31 23:59:59.999 +0000 UTC");
        assert_eq!(
            format_time(951_782_400_000),
            "2000-02-29 00:00:00 +0000 UTC"
        );
    }

    #[test]
    fn values_print_as_go_prints_them() {
        let labels: BTreeMap<String, String> = [
            ("b".to_owned(), "2".to_owned()),
            ("a".to_owned(), "1".to_owned()),
        ]
        .into();
        assert_eq!(Value::Labels(Arc::new(labels)).print(), "map[a:1 b:2]");
        assert_eq!(Value::Float(1e6).print(), "1e+06");
        assert_eq!(Value::Nil.print(), "<no value>");
    }
}
