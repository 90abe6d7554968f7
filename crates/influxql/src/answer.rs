//! What a statement answers, as InfluxDB 1.x models it: series with a
//! `name`, `tags`, `columns` and rows of `values`, and how times are
//! written (RFC 3339 in the statement's `tz()`, or integers in the
//! request's `epoch` unit). Writing the model out (JSON, chunks) is the
//! front end's: InfluxDB's own HTTP service does it too.

use chrono::{Offset as _, TimeZone as _};

/// One cell of a result row.
#[derive(Debug, Clone, PartialEq)]
pub enum Value {
    /// No value.
    Null,
    /// A time, ns since the epoch.
    Time(i64),
    /// A float.
    Float(f64),
    /// An integer.
    Integer(i64),
    /// An unsigned integer.
    Unsigned(u64),
    /// A string.
    String(String),
    /// A boolean.
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
pub struct Series {
    /// The measurement (absent for some `SHOW`s).
    pub name: Option<String>,
    /// The `GROUP BY` tag set, sorted by key; `None` when not grouped.
    pub tags: Option<Vec<(String, String)>>,
    /// The columns' names.
    pub columns: Vec<String>,
    /// The rows, a value per column.
    pub values: Vec<Vec<Value>>,
}

impl Series {
    /// A series of no tag set.
    pub(crate) fn new(name: Option<&str>, columns: &[&str], values: Vec<Vec<Value>>) -> Series {
        Series {
            name: name.map(str::to_owned),
            tags: None,
            columns: columns.iter().map(|c| (*c).to_owned()).collect(),
            values,
        }
    }
}

/// A statement's answer: its series and the time zone its times are
/// written in.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    /// The series, in the order InfluxDB gives them.
    pub series: Vec<Series>,
    /// The statement's `tz()`.
    pub zone: Option<chrono_tz::Tz>,
}

/// How times are written.
#[derive(Debug, Clone, Copy)]
pub struct TimeFormat {
    /// `epoch=`: ns per unit; `None`: RFC 3339.
    pub epoch: Option<i64>,
    /// The zone of RFC 3339 times (the statement's `tz()`); `None`: UTC.
    pub zone: Option<chrono_tz::Tz>,
}

impl TimeFormat {
    /// A time as the answer writes it: an integer of `epoch` units, or
    /// RFC 3339 text.
    pub fn time(&self, ns: i64) -> Value {
        match self.epoch {
            // Go's integer division: toward zero, also before 1970.
            Some(unit) => Value::Integer(ns / unit),
            None => Value::String(rfc3339(ns, self.zone)),
        }
    }
}

/// The `epoch` parameter's unit in ns: the units of a write's `precision`
/// (`None` for an unknown unit, which InfluxDB treats as absent).
pub fn epoch_unit(epoch: &str) -> Option<i64> {
    chingest::Precision::parse(epoch)
        .ok()
        .map(chingest::Precision::nanos_per_unit)
}

/// A time as Go's RFC3339Nano writes it: no trailing zeros in the
/// fraction, `Z` for a zero offset.
fn rfc3339(ns: i64, zone: Option<chrono_tz::Tz>) -> String {
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
        assert_eq!(format.time(1_999_999), Value::Integer(1));
        assert_eq!(format.time(-1_999_999), Value::Integer(-1));
        assert_eq!(epoch_unit("x"), None);
        let rfc = TimeFormat {
            epoch: None,
            zone: None,
        };
        assert_eq!(rfc.time(0), Value::String("1970-01-01T00:00:00Z".into()));
    }
}
