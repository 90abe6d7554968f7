//! The Prometheus text format's pieces: a metric's header lines, its
//! series by one label, a histogram's series, and label values escaped.

use std::fmt::Write as _;

use chingest::stats::Histogram;

pub(super) fn header(out: &mut String, name: &str, kind: &str, help: &str) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
}

/// A metric whose series differ by one label, `label`: its header, then
/// a line per `(value of the label, sample value)`.
pub(super) fn by_label<V: std::fmt::Display>(
    out: &mut String,
    (name, kind, help): (&str, &str, &str),
    label: &str,
    series: impl IntoIterator<Item = (String, V)>,
) {
    header(out, name, kind, help);
    for (value_of_label, value) in series {
        let _ = writeln!(
            out,
            "{name}{{{label}=\"{}\"}} {value}",
            escape_label(&value_of_label)
        );
    }
}

/// A label value as the exposition format escapes it.
pub(super) fn escape_label(value: &str) -> String {
    value
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

pub(super) fn histogram(out: &mut String, name: &str, labels: &str, h: &Histogram) {
    let sep = if labels.is_empty() { "" } else { "," };
    for (bound, count) in h.buckets() {
        let le = if bound.is_infinite() {
            "+Inf".to_owned()
        } else {
            bound.to_string()
        };
        let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{le}\"}} {count}");
    }
    let braces = if labels.is_empty() {
        String::new()
    } else {
        format!("{{{labels}}}")
    };
    let _ = writeln!(out, "{name}_sum{braces} {}", h.sum());
    let _ = writeln!(out, "{name}_count{braces} {}", h.count());
}
