//! PromQL's values: label sets, samples, and the four result types, with
//! Prometheus's number formats.

use std::sync::{Arc, OnceLock};

/// The metric name's label.
pub const METRIC_NAME: &str = "__name__";

/// Prometheus's stale marker: the NaN a sender writes when a series ends.
const STALE_NAN_BITS: u64 = 0x7ff0_0000_0000_0002;

/// The stale marker, as rules write it for a series that ended.
pub const STALE_NAN: f64 = f64::from_bits(STALE_NAN_BITS);

/// Whether `value` is a stale marker (not any NaN: only that one).
pub fn is_stale(value: f64) -> bool {
    value.to_bits() == STALE_NAN_BITS
}

/// A label set: pairs sorted by name, names unique, values never empty (a
/// label with an empty value is no label). Shared: evaluation copies a
/// series' labels into every step's sample, and the set without its
/// metric name — what most functions answer with — is made once per set.
/// Its hash and where its metric name is are found once, when it is made:
/// a range query groups and compares the same sets at every step.
#[derive(Debug, Clone)]
pub struct Labels(Arc<LabelSet>);

/// The empty set, hashed like every other: a derived default's hash (0)
/// made `{}` from `vector()` unequal to `{}` from `sum without (…)`.
impl Default for Labels {
    fn default() -> Labels {
        Labels::sorted(Vec::new())
    }
}

#[derive(Debug, Default)]
struct LabelSet {
    pairs: Box<[(String, String)]>,
    /// The pairs' hash.
    hash: u64,
    /// Where `__name__` is among the pairs.
    name: Option<usize>,
    /// The set without `__name__`, once asked for.
    unnamed: OnceLock<Labels>,
}

impl PartialEq for Labels {
    fn eq(&self, other: &Labels) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
            || (self.0.hash == other.0.hash && self.0.pairs == other.0.pairs)
    }
}

impl Eq for Labels {}

impl std::hash::Hash for Labels {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        state.write_u64(self.0.hash);
    }
}

impl PartialOrd for Labels {
    fn partial_cmp(&self, other: &Labels) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Labels {
    fn cmp(&self, other: &Labels) -> std::cmp::Ordering {
        self.0.pairs.cmp(&other.0.pairs)
    }
}

impl Labels {
    /// The label set of `pairs`, in any order; empty values are dropped
    /// and of repeated names the last wins.
    pub fn new(mut pairs: Vec<(String, String)>) -> Labels {
        pairs.retain(|(_, v)| !v.is_empty());
        pairs.reverse();
        pairs.sort_by(|a, b| a.0.cmp(&b.0));
        pairs.dedup_by(|a, b| a.0 == b.0);
        Labels::sorted(pairs)
    }

    /// The label set of `pairs`, already sorted, unique and non-empty.
    fn sorted(pairs: Vec<(String, String)>) -> Labels {
        use std::hash::BuildHasher as _;
        // Keyed once a process: a hash a writer of labels cannot aim.
        static KEYS: std::sync::LazyLock<std::collections::hash_map::RandomState> =
            std::sync::LazyLock::new(Default::default);
        let hash = KEYS.hash_one(&pairs);
        Labels(Arc::new(LabelSet {
            hash,
            name: pairs.iter().position(|(n, _)| n == METRIC_NAME),
            pairs: pairs.into_boxed_slice(),
            unnamed: OnceLock::new(),
        }))
    }

    /// The pairs, sorted by name.
    pub fn pairs(&self) -> &[(String, String)] {
        &self.0.pairs
    }

    /// The value of `name`, `""` when absent (as PromQL reads it).
    pub fn get(&self, name: &str) -> &str {
        if name == METRIC_NAME {
            return self.0.name.map_or("", |i| &self.0.pairs[i].1);
        }
        match self.0.pairs.binary_search_by(|(n, _)| n.as_str().cmp(name)) {
            Ok(i) => &self.0.pairs[i].1,
            Err(_) => "",
        }
    }

    /// Where the set lives: the same for every copy of one set (a key for
    /// what is derived from it while a copy is held).
    pub(crate) fn address(&self) -> usize {
        Arc::as_ptr(&self.0) as usize
    }

    /// Whether the set has no labels.
    pub fn is_empty(&self) -> bool {
        self.0.pairs.is_empty()
    }

    /// The same set without the metric name.
    pub fn without_name(&self) -> Labels {
        if self.0.name.is_none() {
            return self.clone();
        }
        self.0
            .unnamed
            .get_or_init(|| self.filter(|n| n != METRIC_NAME))
            .clone()
    }

    /// The set with `name` set to `value` (removed when `value` is empty).
    pub fn with(&self, name: &str, value: &str) -> Labels {
        let mut pairs: Vec<(String, String)> = self
            .pairs()
            .iter()
            .filter(|(n, _)| n != name)
            .cloned()
            .collect();
        if !value.is_empty() {
            pairs.push((name.to_owned(), value.to_owned()));
            pairs.sort_by(|a, b| a.0.cmp(&b.0));
        }
        Labels::sorted(pairs)
    }

    /// The labels `keep` accepts.
    pub fn filter(&self, mut keep: impl FnMut(&str) -> bool) -> Labels {
        Labels::sorted(
            self.pairs()
                .iter()
                .filter(|(n, _)| keep(n))
                .cloned()
                .collect(),
        )
    }
}

impl std::fmt::Display for Labels {
    /// Prometheus's form: `{a="1", b="2"}`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("{")?;
        for (i, (name, value)) in self.pairs().iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{name}={value:?}")?;
        }
        f.write_str("}")
    }
}

/// One element of an instant vector: a series' labels, its value at the
/// evaluation time, and the time of the sample it came from (what
/// `timestamp()` reports; the evaluation time for computed samples).
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The series' labels.
    pub labels: Labels,
    /// The sample's time, ms since the epoch.
    pub time: i64,
    /// The value.
    pub value: f64,
}

/// A series with its points: an element of a range vector or of a range
/// query's answer.
#[derive(Debug, Clone, PartialEq)]
pub struct Series {
    /// The series' labels.
    pub labels: Labels,
    /// `(time in ms, value)`, in time order.
    pub points: Vec<(i64, f64)>,
}

/// Sorts series by their label sets, as Prometheus orders a selection
/// (and so the order its aggregations add in). Each set's pairs are laid
/// out once as bytes that compare as the pairs do (`0` after every name
/// and value, below any other byte), so a comparison is one `memcmp`, not
/// one per pair: a selection of 40,000 series sorts in a third of the
/// time. Sets holding a `0` byte are compared pair by pair.
pub(crate) fn sort_by_labels<T>(series: &mut Vec<T>, labels: impl Fn(&T) -> &Labels) {
    let keys: Option<Vec<Vec<u8>>> = series
        .iter()
        .map(|s| {
            let pairs = labels(s).pairs();
            let len = pairs.iter().map(|(n, v)| n.len() + v.len() + 2).sum();
            let mut key = Vec::with_capacity(len);
            for (name, value) in pairs {
                if name.as_bytes().contains(&0) || value.as_bytes().contains(&0) {
                    return None;
                }
                key.extend_from_slice(name.as_bytes());
                key.push(0);
                key.extend_from_slice(value.as_bytes());
                key.push(0);
            }
            Some(key)
        })
        .collect();
    let Some(keys) = keys else {
        series.sort_unstable_by(|a, b| labels(a).cmp(labels(b)));
        return;
    };
    let mut order: Vec<usize> = (0..series.len()).collect();
    order.sort_unstable_by(|&a, &b| keys[a].cmp(&keys[b]));
    let mut taken: Vec<Option<T>> = std::mem::take(series).into_iter().map(Some).collect();
    series.extend(
        order
            .into_iter()
            .map(|i| taken[i].take().expect("each once")),
    );
}

/// A query's answer, in Prometheus's result types.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// `scalar`: a time (ms) and a number.
    Scalar(i64, f64),
    /// `string`: a time (ms) and a string.
    String(i64, String),
    /// `vector`: one sample per series, at the evaluation time (ms).
    Vector(i64, Vec<Sample>),
    /// `matrix`: series with their points.
    Matrix(Vec<Series>),
}

impl Value {
    /// Prometheus's `resultType`.
    pub fn result_type(&self) -> &'static str {
        match self {
            Value::Scalar(..) => "scalar",
            Value::String(..) => "string",
            Value::Vector(..) => "vector",
            Value::Matrix(_) => "matrix",
        }
    }
}

/// A value as Prometheus writes it (Go's `strconv.FormatFloat(v, 'f', -1,
/// 64)`): the shortest decimal that reads back the same, never an
/// exponent; `NaN`, `+Inf`, `-Inf`.
pub fn format_value(value: f64) -> String {
    let mut out = Vec::new();
    write_value(&mut out, value);
    String::from_utf8(out).expect("a number's text is ASCII")
}

/// [`format_value`] written at the end of `out`: no string of its own for
/// each of a matrix's points.
pub fn write_value(out: &mut Vec<u8>, value: f64) {
    use std::io::Write as _;
    if value.is_nan() {
        out.extend_from_slice(b"NaN");
    } else if value.is_infinite() {
        out.extend_from_slice(if value > 0.0 { b"+Inf" } else { b"-Inf" });
    } else {
        // Rust's `Display` of f64 is the shortest round-trip form without
        // an exponent, as Go's 'f' with precision -1; `-0` too.
        let _ = write!(out, "{value}");
    }
}

/// A time in ms as Prometheus writes it: seconds, with up to three
/// decimals (a JSON number).
pub fn format_time(ms: i64) -> String {
    let mut out = Vec::new();
    write_time(&mut out, ms);
    String::from_utf8(out).expect("a number's text is ASCII")
}

/// [`format_time`] written at the end of `out`.
pub fn write_time(out: &mut Vec<u8>, ms: i64) {
    use std::io::Write as _;
    let seconds = ms.div_euclid(1000);
    let millis = ms.rem_euclid(1000);
    let _ = match millis {
        0 => write!(out, "{seconds}"),
        m if m % 100 == 0 => write!(out, "{seconds}.{}", m / 100),
        m if m % 10 == 0 => write!(out, "{seconds}.{:02}", m / 10),
        m => write!(out, "{seconds}.{m:03}"),
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn series_sort_as_their_label_sets() {
        let set = |pairs: &[(&str, &str)]| {
            Labels::new(
                pairs
                    .iter()
                    .map(|(n, v)| (n.to_string(), v.to_string()))
                    .collect(),
            )
        };
        let sets = [
            set(&[("a", "x")]),
            set(&[("a", "x"), ("b", "y")]),
            set(&[("a", "xy")]),
            set(&[("ab", "x")]),
            set(&[("a", "x!")]),
            set(&[]),
            set(&[("b", "")]),
            set(&[("a", "x"), ("c", "z")]),
        ];
        let mut want: Vec<Labels> = sets.to_vec();
        want.sort();
        let series = |sets: &[Labels]| -> Vec<Series> {
            sets.iter()
                .map(|labels| Series {
                    labels: labels.clone(),
                    points: Vec::new(),
                })
                .collect()
        };
        let mut sorted = series(&sets);
        sort_by_labels(&mut sorted, |s| &s.labels);
        let got: Vec<Labels> = sorted.into_iter().map(|s| s.labels).collect();
        assert_eq!(got, want);
        // A set holding a 0 byte: compared pair by pair.
        let mut with_zero = series(&[set(&[("a", "x\0y")]), set(&[("a", "x")])]);
        sort_by_labels(&mut with_zero, |s| &s.labels);
        assert_eq!(with_zero[0].labels, set(&[("a", "x")]));
    }

    #[test]
    fn values_are_written_as_prometheus_writes_them() {
        assert_eq!(format_value(1e21), "1000000000000000000000");
        assert_eq!(format_value(1e-7), "0.0000001");
        assert_eq!(format_value(0.1 + 0.2), "0.30000000000000004");
        assert_eq!(format_value(-0.0), "-0");
        assert_eq!(format_value(f64::NAN), "NaN");
        assert_eq!(format_value(f64::NEG_INFINITY), "-Inf");
        assert_eq!(format_value(2.0), "2");
        assert_eq!(format_time(1_700_000_000_500), "1700000000.5");
        assert_eq!(format_time(1_700_000_000_000), "1700000000");
        assert_eq!(format_time(1_700_000_000_012), "1700000000.012");
        assert_eq!(format_time(1_700_000_000_120), "1700000000.12");
        assert_eq!(format_time(1_700_000_000_100), "1700000000.1");
        assert_eq!(format_time(999), "0.999");
    }

    #[test]
    fn label_sets_are_sorted_and_drop_empty_values() {
        let labels = Labels::new(vec![
            ("b".into(), "2".into()),
            ("a".into(), "1".into()),
            ("c".into(), "".into()),
        ]);
        assert_eq!(labels.to_string(), r#"{a="1", b="2"}"#);
        assert_eq!(labels.get("c"), "");
        assert_eq!(labels.with("a", "").to_string(), r#"{b="2"}"#);
        assert_eq!(labels.with("__name__", "x").without_name(), labels);
    }
}
