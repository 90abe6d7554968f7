//! How data that did not arrive as Prometheus samples is named in PromQL:
//! a measurement's numeric field is the metric `<measurement>_<field>`
//! with the measurement's tags as labels (VictoriaMetrics' mapping of line
//! protocol); OTLP's gauges and sums are their metric, named by
//! OpenTelemetry's Prometheus translation (unit suffixes, `_total` for
//! monotonic sums, `job` and `instance` from the service); every name made
//! a valid Prometheus name.

/// The measurement remote write fills: its `__name__` tag is the metric
/// name and its `value` field the sample.
pub const PROMETHEUS_MEASUREMENT: &str = "prometheus";

/// The field holding remote write's samples.
pub const PROMETHEUS_FIELD: &str = "value";

/// OTLP's measurements PromQL reads: gauges, and sums (monotonic or not).
pub const OTLP_GAUGES: &str = "otel_metrics_gauge";
/// OTLP's sums.
pub const OTLP_SUMS: &str = "otel_metrics_sum";
/// OTLP's metadata (each metric's unit).
pub const OTLP_METADATA: &str = "otel_metrics_metadata";
/// The tag holding an OTLP point's metric name.
pub const OTLP_METRIC_NAME: &str = "metric_name";

/// An OTLP metric's Prometheus name: `name` made valid, its `unit` as a
/// suffix (`s` → `_seconds`, `By/s` → `_bytes_per_second`, `1` → `_ratio`
/// for gauges; `{…}` annotations dropped), `_total` for monotonic sums.
pub fn otlp_metric_name(name: &str, unit: &str, gauge: bool, monotonic: bool) -> String {
    let mut out = sanitize(name, true);
    let suffix = if unit == "1" {
        if gauge {
            "ratio".to_owned()
        } else {
            String::new()
        }
    } else {
        unit_words(unit)
    };
    if !suffix.is_empty() && !out.ends_with(&format!("_{suffix}")) {
        out.push('_');
        out.push_str(&suffix);
    }
    if monotonic && !gauge && !out.ends_with("_total") {
        out.push_str("_total");
    }
    out
}

/// A UCUM unit in words (`ms` → `milliseconds`, `By/s` →
/// `bytes_per_second`); unknown units as they are, made valid.
fn unit_words(unit: &str) -> String {
    let word = |u: &str| -> String {
        let known = match u {
            "d" => "days",
            "h" => "hours",
            "min" => "minutes",
            "s" => "seconds",
            "ms" => "milliseconds",
            "us" => "microseconds",
            "ns" => "nanoseconds",
            "By" => "bytes",
            "KiBy" => "kibibytes",
            "MiBy" => "mebibytes",
            "GiBy" => "gibibytes",
            "TiBy" => "tibibytes",
            "KBy" => "kilobytes",
            "MBy" => "megabytes",
            "GBy" => "gigabytes",
            "TBy" => "terabytes",
            "m" => "meters",
            "V" => "volts",
            "A" => "amperes",
            "J" => "joules",
            "W" => "watts",
            "g" => "grams",
            "Cel" => "celsius",
            "Hz" => "hertz",
            "%" => "percent",
            "1" => "",
            other => return sanitize(other, false).trim_matches('_').to_owned(),
        };
        known.to_owned()
    };
    // `{requests}` and the like annotate a count: no unit.
    let plain: String = {
        let mut out = String::new();
        let mut depth = 0;
        for c in unit.chars() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                _ if depth == 0 => out.push(c),
                _ => {}
            }
        }
        out
    };
    // The unit after `/` in the singular (`By/s` → `bytes_per_second`).
    let per_word = |u: &str| -> String {
        match u {
            "s" => "second".to_owned(),
            "m" => "minute".to_owned(),
            "h" => "hour".to_owned(),
            "d" => "day".to_owned(),
            "w" => "week".to_owned(),
            "mo" => "month".to_owned(),
            "y" => "year".to_owned(),
            other => word(other),
        }
    };
    match plain.split_once('/') {
        Some((per, over)) => {
            let (per, over) = (word(per), per_word(over));
            match (per.is_empty(), over.is_empty()) {
                (_, true) => per,
                (true, false) => format!("per_{over}"),
                (false, false) => format!("{per}_per_{over}"),
            }
        }
        None => word(&plain),
    }
}

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
        assert_eq!(
            otlp_metric_name("http.server.duration", "s", false, false),
            "http_server_duration_seconds"
        );
        assert_eq!(
            otlp_metric_name("http.server.requests", "{request}", false, true),
            "http_server_requests_total"
        );
        assert_eq!(
            otlp_metric_name("net.io", "By/s", true, false),
            "net_io_bytes_per_second"
        );
        assert_eq!(
            otlp_metric_name("cpu.utilization", "1", true, false),
            "cpu_utilization_ratio"
        );
        assert_eq!(
            otlp_metric_name("jobs_total", "1", false, true),
            "jobs_total"
        );
        assert!(is_plain_measurement("cpu"));
    }
}
