//! How PromQL names what is stored: remote write's samples by their
//! `__name__` tag; OTLP's gauges and sums by their metric, named by
//! OpenTelemetry's Prometheus translation (unit suffixes, `_total` for
//! monotonic sums, `job` and `instance` from the service); any other
//! measurement's numeric field as the metric `<measurement>_<field>` with
//! the measurement's tags as labels (VictoriaMetrics' mapping of line
//! protocol); every name made a valid Prometheus name.
//!
//! What the protocols write (measurements, fields, tags) is named by
//! `chingest_codecs`, which writes it: [`shape`] reads those names, so a
//! rename there is a rename here.

use chingest_codecs::{otlp, prometheus as remote_write};

/// How PromQL reads a measurement, by its name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// Remote write's samples: each series named by its `__name__` tag,
    /// its samples in [`remote_write::VALUE`].
    RemoteWrite,
    /// OTLP's gauges (`gauge`) or sums: each series named by its
    /// [`otlp::METRIC_NAME`] tag ([`otlp_metric_name`]), its samples in
    /// [`otlp::VALUE`].
    Otlp {
        /// Gauges (else sums).
        gauge: bool,
    },
    /// Any other measurement: each numeric field the metric
    /// [`metric_name`].
    Plain,
    /// Not metrics of their own: the protocols' other measurements
    /// (histograms, exemplars, metadata), which are other shapes.
    Other,
}

/// How PromQL reads `measurement`.
pub fn shape(measurement: &str) -> Shape {
    match measurement {
        remote_write::SAMPLES => Shape::RemoteWrite,
        otlp::GAUGE => Shape::Otlp { gauge: true },
        otlp::SUM => Shape::Otlp { gauge: false },
        other
            if remote_write::MEASUREMENTS.contains(&other)
                || otlp::MEASUREMENTS.contains(&other) =>
        {
            Shape::Other
        }
        _ => Shape::Plain,
    }
}

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

/// [`label_name`] of an owned key: the key itself when it is a label name
/// already (no copy: every series' every tag goes through here).
pub fn into_label_name(tag_key: String) -> String {
    match is_label_name(&tag_key) {
        true => tag_key,
        false => label_name(&tag_key),
    }
}

/// Whether `name` is a valid label name as it is.
pub fn is_label_name(name: &str) -> bool {
    !name.starts_with(|c: char| c.is_ascii_digit())
        && !name.is_empty()
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
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
        assert!(is_label_name("_1") && !is_label_name("1a") && !is_label_name("é"));
        assert_eq!(into_label_name("a.b".to_owned()), "a_b");
        assert_eq!(into_label_name("1a".to_owned()), "_1a");
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
        assert_eq!(shape("cpu"), Shape::Plain);
        assert_eq!(shape("prometheus_histograms"), Shape::Other);
        assert_eq!(shape("otel_metrics_sum"), Shape::Otlp { gauge: false });
    }
}
