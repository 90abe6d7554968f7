//! Typed points to line protocol, so that points take exactly the write
//! path (checks, limits, schema rules, partial writes) of line protocol.
//!
//! Each point becomes one line, or is rejected here when line protocol
//! cannot say it: a name that is empty, ends in a backslash or holds a line
//! feed, a measurement starting with `#` or a tab, a string holding a line
//! feed, a non-finite float, or no fields.

use std::fmt::Write as _;

use chingest::LineRejection;
use chingest_proto::v1::{field_value, Point};
use lineproto::{escape_measurement, escape_string_field, escape_tag};

/// A points request as a line-protocol body.
#[derive(Debug, Default)]
pub(super) struct PointsBody {
    /// One line per point that could be written.
    pub(super) body: String,
    /// The 1-based position in the request of the point on each line.
    pub(super) positions: Vec<usize>,
    /// Points refused before parsing, by 1-based position.
    pub(super) rejected: Vec<LineRejection>,
}

/// Writes `points` as line protocol.
pub(super) fn to_line_protocol(points: &[Point]) -> PointsBody {
    let mut out = PointsBody::default();
    for (i, point) in points.iter().enumerate() {
        let start = out.body.len();
        match write_point(point, &mut out.body) {
            Ok(()) => {
                out.body.push('\n');
                out.positions.push(i + 1);
            }
            Err(reason) => {
                out.body.truncate(start);
                out.rejected.push(LineRejection {
                    line: i + 1,
                    column: None,
                    reason,
                });
            }
        }
    }
    out
}

/// Maps the rejections of the line-protocol write back to point positions
/// and merges them with the points refused up front, in request order.
pub(super) fn rejections(body: &PointsBody, from_write: Vec<LineRejection>) -> Vec<LineRejection> {
    let mut all: Vec<LineRejection> = from_write
        .into_iter()
        .map(|r| LineRejection {
            line: body.positions.get(r.line - 1).copied().unwrap_or(r.line),
            column: None,
            reason: r.reason,
        })
        .chain(body.rejected.iter().cloned())
        .collect();
    all.sort_by_key(|r| r.line);
    all
}

fn writable(kind: &str, name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err(format!("empty {kind}"));
    }
    if name.ends_with('\\') {
        return Err(format!("{kind} {name:?} ends in a backslash"));
    }
    if name.contains(['\n', '\r']) {
        return Err(format!("{kind} {name:?} holds a line break"));
    }
    Ok(())
}

fn write_point(point: &Point, out: &mut String) -> Result<(), String> {
    writable("measurement", &point.measurement)?;
    if point.measurement.starts_with(['#', '\t']) {
        return Err(format!(
            "measurement {:?} starts with '#' or a tab",
            point.measurement
        ));
    }
    if point.fields.is_empty() {
        return Err("a point needs at least one field".into());
    }
    escape_measurement(&point.measurement, out);
    // Sorted, so the same point always writes the same line.
    let mut tags: Vec<_> = point.tags.iter().filter(|(_, v)| !v.is_empty()).collect();
    tags.sort();
    for (key, value) in tags {
        writable("tag key", key)?;
        writable("tag value", value)?;
        out.push(',');
        escape_tag(key, out);
        out.push('=');
        escape_tag(value, out);
    }
    let mut fields: Vec<_> = point.fields.iter().collect();
    fields.sort_by(|a, b| a.0.cmp(b.0));
    for (n, (key, value)) in fields.into_iter().enumerate() {
        writable("field key", key)?;
        out.push(if n == 0 { ' ' } else { ',' });
        escape_tag(key, out);
        out.push('=');
        match &value.value {
            Some(field_value::Value::Float(v)) if v.is_finite() => {
                // `{:?}` keeps a decimal point or exponent, so the value
                // stays a float, and round-trips exactly.
                let _ = write!(out, "{v:?}");
            }
            Some(field_value::Value::Float(v)) => {
                return Err(format!("field {key:?}: {v} is not a finite float"))
            }
            Some(field_value::Value::Integer(v)) => {
                let _ = write!(out, "{v}i");
            }
            Some(field_value::Value::Unsigned(v)) => {
                let _ = write!(out, "{v}u");
            }
            Some(field_value::Value::String(v)) => {
                if v.contains('\n') {
                    return Err(format!("field {key:?}: strings cannot hold a line feed"));
                }
                out.push('"');
                escape_string_field(v, out);
                out.push('"');
            }
            Some(field_value::Value::Boolean(v)) => out.push_str(if *v { "true" } else { "false" }),
            None => return Err(format!("field {key:?} has no value")),
        }
    }
    if let Some(timestamp) = point.timestamp {
        let _ = write!(out, " {timestamp}");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use chingest_proto::v1::FieldValue;

    use super::*;

    fn value(v: field_value::Value) -> FieldValue {
        FieldValue { value: Some(v) }
    }

    fn point(measurement: &str, tags: &[(&str, &str)], fields: Vec<(&str, FieldValue)>) -> Point {
        Point {
            measurement: measurement.into(),
            tags: tags
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            fields: fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            timestamp: Some(1_000),
        }
    }

    #[test]
    fn every_type_and_escape() {
        let p = point(
            "cpu load",
            &[("host", "a,b"), ("empty", ""), ("k=1", "v")],
            vec![
                ("f", value(field_value::Value::Float(1.0))),
                ("i", value(field_value::Value::Integer(-3))),
                ("u", value(field_value::Value::Unsigned(u64::MAX))),
                (
                    "s",
                    value(field_value::Value::String("say \"hi\" \\".into())),
                ),
                ("b", value(field_value::Value::Boolean(true))),
            ],
        );
        let out = to_line_protocol(&[p]);
        assert_eq!(
            out.body,
            "cpu\\ load,host=a\\,b,k\\=1=v b=true,f=1.0,i=-3i,s=\"say \\\"hi\\\" \\\\\",u=18446744073709551615u 1000\n"
        );
        // The line parses back to the same values.
        let parsed = lineproto::parse(out.body.as_bytes(), lineproto::ParseOptions::default());
        assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
        match parsed.lines[0].field("s") {
            Some(lineproto::FieldValue::String(s)) => assert_eq!(s.unescape(), "say \"hi\" \\"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unwritable_points_are_rejected_by_position() {
        let good = point("m", &[], vec![("v", value(field_value::Value::Integer(1)))]);
        let points = vec![
            good.clone(),
            point("m", &[], vec![]),
            point(
                "m",
                &[],
                vec![("v", value(field_value::Value::Float(f64::NAN)))],
            ),
            point(
                "#m",
                &[],
                vec![("v", value(field_value::Value::Integer(1)))],
            ),
            point(
                "m",
                &[("k", "a\nb")],
                vec![("v", value(field_value::Value::Integer(1)))],
            ),
            Point {
                fields: HashMap::from([("v".to_string(), FieldValue { value: None })]),
                ..good.clone()
            },
            good,
        ];
        let out = to_line_protocol(&points);
        assert_eq!(out.positions, [1, 7]);
        let lines: Vec<usize> = out.rejected.iter().map(|r| r.line).collect();
        assert_eq!(lines, [2, 3, 4, 5, 6]);
        assert!(
            out.rejected[1].reason.contains("finite"),
            "{:?}",
            out.rejected[1]
        );
        // A rejection of the body's second line is the request's 7th point.
        let merged = rejections(
            &out,
            vec![LineRejection {
                line: 2,
                column: Some(3),
                reason: "conflict".into(),
            }],
        );
        assert_eq!(merged.last().unwrap().line, 7);
        assert_eq!(merged.len(), 6);
    }
}
