//! How promtool prints a failure: Go's durations, Prometheus's label
//! sets, the expected and the got alerts and samples.

use crate::alert::Labels;
use crate::gofmt::{float, quote};

/// Go's `time.Duration.String()` of `ms` milliseconds (`10m0s`, `1h30m0s`,
/// `500ms`), as promtool prints an evaluation's time.
pub(super) fn go_duration(ms: i64) -> String {
    if ms == 0 {
        return "0s".into();
    }
    if ms < 1000 {
        return format!("{ms}ms");
    }
    let (h, m) = (ms / 3_600_000, ms / 60_000 % 60);
    let s = (ms % 60_000) as f64 / 1000.0;
    let seconds = format!("{}s", float(s, 'v', None));
    match (h, m) {
        (0, 0) => seconds,
        (0, m) => format!("{m}m{seconds}"),
        (h, m) => format!("{h}h{m}m{seconds}"),
    }
}

/// Prometheus's `labels.Labels.String()`: `{a="1", b="2"}`.
pub(super) fn labels_string(labels: &Labels) -> String {
    let pairs: Vec<String> = labels
        .iter()
        .map(|(k, v)| format!("{k}={}", quote(v)))
        .collect();
    format!("{{{}}}", pairs.join(", "))
}

/// promtool's `labelsAndAnnotations.String()`.
pub(super) fn alerts_string(alerts: &[(Labels, Labels)]) -> String {
    if alerts.is_empty() {
        return "[]".into();
    }
    let one = |(labels, annotations): &(Labels, Labels)| {
        format!(
            "\nLabels:{}\nAnnotations:{}",
            labels_string(labels),
            labels_string(annotations)
        )
    };
    let mut s = format!("[\n0:{}", indent_lines(&one(&alerts[0]), "  "));
    for (i, alert) in alerts[1..].iter().enumerate() {
        s += &format!(",\n{}:{}", i + 1, indent_lines(&one(alert), "  "));
    }
    s + "\n]"
}

/// promtool's `parsedSamplesString`.
pub(super) fn samples_string(samples: &[(Labels, f64)]) -> String {
    if samples.is_empty() {
        return "nil".into();
    }
    let one = |(labels, value): &(Labels, f64)| {
        format!("{} {}", labels_string(labels), float_capital_e(*value))
    };
    samples.iter().map(one).collect::<Vec<_>>().join(", ")
}

/// `strconv.FormatFloat(v, 'E', -1, 64)`.
pub(super) fn float_capital_e(v: f64) -> String {
    crate::gofmt::float_e(v).replace('e', "E")
}

/// promtool's `indentLines`: every line but the first indented.
pub(super) fn indent_lines(lines: &str, indent: &str) -> String {
    lines
        .split('\n')
        .collect::<Vec<_>>()
        .join(&format!("\n{indent}"))
}
