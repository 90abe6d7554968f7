//! What a statement answers, in InfluxDB 1.x's JSON shape: series with
//! `name`, `tags`, `columns` and `values`, times as RFC 3339 (in the
//! statement's `tz()`) or as integers in the request's `epoch` unit.

use chrono::{Offset as _, TimeZone as _};
use serde_json::{json, Map, Value as Json};

/// One cell of a result row.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Value {
    Null,
    /// ns since the epoch.
    Time(i64),
    Float(f64),
    Integer(i64),
    Unsigned(u64),
    String(String),
    Boolean(bool),
}

impl Value {
    /// The value as a float, for interpolation and derivatives.
    pub(crate) fn as_f64(&self) -> Option<f64> {
        match self {
            Value::Float(v) => Some(*v),
            Value::Integer(v) => Some(*v as f64),
            Value::Unsigned(v) => Some(*v as f64),
            _ => None,
        }
    }

    pub(crate) fn is_null(&self) -> bool {
        matches!(self, Value::Null)
    }
}

/// One series of a statement's answer.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Series {
    /// The measurement (absent for some `SHOW`s).
    pub(crate) name: Option<String>,
    /// The `GROUP BY` tag set, sorted by key; `None` when not grouped.
    pub(crate) tags: Option<Vec<(String, String)>>,
    pub(crate) columns: Vec<String>,
    pub(crate) values: Vec<Vec<Value>>,
}

/// How times are written.
#[derive(Debug, Clone, Copy)]
pub(crate) struct TimeFormat {
    /// `epoch=`: ns per unit; `None`: RFC 3339.
    pub(crate) epoch: Option<i64>,
    pub(crate) zone: Option<chrono_tz::Tz>,
}

/// The `epoch` parameter's unit in ns: the units of a write's `precision`
/// (`None` for an unknown unit, which InfluxDB treats as absent).
pub(crate) fn epoch_unit(epoch: &str) -> Option<i64> {
    chingest::Precision::parse(epoch)
        .ok()
        .map(chingest::Precision::nanos_per_unit)
}

/// A time as Go's RFC3339Nano writes it: no trailing zeros in the
/// fraction, `Z` for a zero offset.
pub(crate) fn rfc3339(ns: i64, zone: Option<chrono_tz::Tz>) -> String {
    let utc = chrono::Utc.timestamp_nanos(ns);
    let (local, offset) = match zone {
        Some(zone) => {
            let local = utc.with_timezone(&zone);
            (local.naive_local(), local.offset().fix().local_minus_utc())
        }
        None => (utc.naive_utc(), 0),
    };
    let mut text = local.format("%Y-%m-%dT%H:%M:%S").to_string();
    let nanos = ns.rem_euclid(1_000_000_000);
    if nanos != 0 {
        let fraction = format!("{nanos:09}");
        text.push('.');
        text.push_str(fraction.trim_end_matches('0'));
    }
    if offset == 0 {
        text.push('Z');
    } else {
        let sign = if offset < 0 { '-' } else { '+' };
        let offset = offset.abs();
        text.push_str(&format!(
            "{sign}{:02}:{:02}",
            offset / 3600,
            offset % 3600 / 60
        ));
    }
    text
}

fn cell(value: &Value, format: TimeFormat) -> Json {
    match value {
        Value::Null => Json::Null,
        Value::Time(ns) => match format.epoch {
            // Go's integer division: toward zero, also before 1970.
            Some(unit) => json!(ns / unit),
            None => json!(rfc3339(*ns, format.zone)),
        },
        Value::Float(v) if v.is_finite() => json!(v),
        Value::Float(_) => Json::Null,
        Value::Integer(v) => json!(v),
        Value::Unsigned(v) => json!(v),
        Value::String(v) => json!(v),
        Value::Boolean(v) => json!(v),
    }
}

impl Series {
    /// The series as InfluxDB writes it; `partial` when more of its rows
    /// follow in the next chunk.
    pub(crate) fn to_json(&self, rows: &[Vec<Value>], format: TimeFormat, partial: bool) -> Json {
        let mut object = Map::new();
        if let Some(name) = &self.name {
            object.insert("name".into(), json!(name));
        }
        if let Some(tags) = &self.tags {
            let tags: Map<String, Json> = tags.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
            object.insert("tags".into(), Json::Object(tags));
        }
        object.insert("columns".into(), json!(self.columns));
        if !rows.is_empty() {
            let values: Vec<Json> = rows
                .iter()
                .map(|row| Json::Array(row.iter().map(|v| cell(v, format)).collect()))
                .collect();
            object.insert("values".into(), Json::Array(values));
        }
        if partial {
            object.insert("partial".into(), json!(true));
        }
        Json::Object(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_as_go_writes_them() {
        assert_eq!(rfc3339(0, None), "1970-01-01T00:00:00Z");
        assert_eq!(rfc3339(1_500_000_000, None), "1970-01-01T00:00:01.5Z");
        assert_eq!(rfc3339(-1, None), "1969-12-31T23:59:59.999999999Z");
        let chicago: chrono_tz::Tz = "America/Chicago".parse().unwrap();
        assert_eq!(rfc3339(0, Some(chicago)), "1969-12-31T18:00:00-06:00");
        let utc: chrono_tz::Tz = "UTC".parse().unwrap();
        assert_eq!(rfc3339(0, Some(utc)), "1970-01-01T00:00:00Z");
    }

    #[test]
    fn epochs() {
        let format = TimeFormat {
            epoch: epoch_unit("ms"),
            zone: None,
        };
        assert_eq!(cell(&Value::Time(1_999_999), format), json!(1));
        assert_eq!(epoch_unit("x"), None);
        assert_eq!(cell(&Value::Float(f64::NAN), format), Json::Null);
    }
}
