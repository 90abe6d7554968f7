//! How data that did not arrive as Prometheus samples is named in PromQL:
//! a measurement's numeric field is the metric `<measurement>_<field>`
//! with the measurement's tags as labels (VictoriaMetrics' mapping of line
//! protocol), every name made a valid Prometheus name.

/// The measurement remote write fills: its `__name__` tag is the metric
/// name and its `value` field the sample.
pub const PROMETHEUS_MEASUREMENT: &str = "prometheus";

/// The field holding remote write's samples.
pub const PROMETHEUS_FIELD: &str = "value";

/// Whether a measurement of the database is a metric source of its own
/// (not remote write's histograms, exemplars and metadata, which are
/// other shapes; not OTLP's, which carry their metric name in a tag).
pub fn is_plain_measurement(name: &str) -> bool {
    name != PROMETHEUS_MEASUREMENT
        && !name.starts_with("prometheus_")
        && !name.starts_with("otel_metrics_")
}

/// The metric a measurement's field is read as: `<measurement>_<field>`,
/// made a valid metric name.
pub fn metric_name(measurement: &str, field: &str) -> String {
    sanitize(&format!("{measurement}_{field}"), true)
}

/// A tag key as a label name: characters outside `[a-zA-Z0-9_]` become
/// `_` (`resource.service.name` → `resource_service_name`), and a leading
/// digit gets a `_` before it.
pub fn label_name(tag_key: &str) -> String {
    sanitize(tag_key, false)
}

/// Whether `name` is a valid label name as it is.
pub fn is_label_name(name: &str) -> bool {
    !name.is_empty() && label_name(name) == name
}

fn sanitize(name: &str, metric: bool) -> String {
    let mut out = String::with_capacity(name.len() + 1);
    if name.starts_with(|c: char| c.is_ascii_digit()) {
        out.push('_');
    }
    for c in name.chars() {
        let valid = c.is_ascii_alphanumeric() || c == '_' || (metric && c == ':');
        out.push(if valid { c } else { '_' });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_become_valid_prometheus_names() {
        assert_eq!(metric_name("cpu", "usage_idle"), "cpu_usage_idle");
        assert_eq!(metric_name("http.server", "p99"), "http_server_p99");
        assert_eq!(metric_name("9lives", "x"), "_9lives_x");
        assert_eq!(label_name("resource.service.name"), "resource_service_name");
        assert!(is_label_name("host") && !is_label_name("a-b") && !is_label_name(""));
        assert!(!is_plain_measurement("prometheus_histograms"));
        assert!(is_plain_measurement("cpu"));
    }
}
