//! Typed points (`WriteRequest.points`) as the library's
//! [`chingest::Point`]s, borrowing the request's strings: they take the
//! line-protocol write path's rules without being written out as text and
//! parsed again. A point with a field that carries no value is refused
//! here; everything else is judged by `Ingestor::write_points`.

use chingest::{LineRejection, PointValue};
use chingest_proto::v1::{field_value, Point};

/// A points request, ready for `Ingestor::write_points`.
#[derive(Debug, Default)]
pub(super) struct Converted<'a> {
    /// The points that could be converted, in request order.
    pub(super) points: Vec<chingest::Point<'a>>,
    /// The 1-based position in the request of each of `points`.
    pub(super) positions: Vec<usize>,
    /// Points refused here, by 1-based position.
    pub(super) rejected: Vec<LineRejection>,
}

/// Converts `points`.
pub(super) fn convert(points: &[Point]) -> Converted<'_> {
    let mut out = Converted::default();
    for (i, point) in points.iter().enumerate() {
        match convert_one(point) {
            Ok(converted) => {
                out.points.push(converted);
                out.positions.push(i + 1);
            }
            Err(reason) => out.rejected.push(LineRejection {
                line: i + 1,
                column: None,
                reason,
            }),
        }
    }
    out
}

fn convert_one(point: &Point) -> Result<chingest::Point<'_>, String> {
    let mut fields = Vec::with_capacity(point.fields.len());
    for (key, value) in &point.fields {
        let value = match &value.value {
            Some(field_value::Value::Float(v)) => PointValue::Float(*v),
            Some(field_value::Value::Integer(v)) => PointValue::Integer(*v),
            Some(field_value::Value::Unsigned(v)) => PointValue::UInteger(*v),
            Some(field_value::Value::String(v)) => PointValue::String(v),
            Some(field_value::Value::Boolean(v)) => PointValue::Boolean(*v),
            None => return Err(format!("field {key:?} has no value")),
        };
        fields.push((key.as_str(), value));
    }
    // A decoded map iterates in an order of its own: sorted, consecutive
    // points of a measurement list the same keys in the same order, which
    // the write path resolves once instead of per point.
    fields.sort_unstable_by_key(|(key, _)| *key);
    Ok(chingest::Point {
        measurement: &point.measurement,
        tags: point
            .tags
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect(),
        fields,
        timestamp: point.timestamp,
    })
}

/// Maps the rejections of the write back to point positions and merges
/// them with the points refused here, in request order.
pub(super) fn rejections(
    converted: &Converted<'_>,
    from_write: Vec<LineRejection>,
) -> Vec<LineRejection> {
    let mut all: Vec<LineRejection> = from_write
        .into_iter()
        .map(|r| LineRejection {
            line: converted
                .positions
                .get(r.line - 1)
                .copied()
                .unwrap_or(r.line),
            column: None,
            reason: r.reason,
        })
        .chain(converted.rejected.iter().cloned())
        .collect();
    all.sort_by_key(|r| r.line);
    all
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use chingest_proto::v1::FieldValue;

    use super::*;

    fn value(v: field_value::Value) -> FieldValue {
        FieldValue { value: Some(v) }
    }

    fn point(fields: Vec<(&str, FieldValue)>) -> Point {
        Point {
            measurement: "m".into(),
            tags: HashMap::from([("host".to_string(), "a".to_string())]),
            fields: fields
                .into_iter()
                .map(|(k, v)| (k.to_string(), v))
                .collect(),
            timestamp: Some(1_000),
        }
    }

    #[test]
    fn every_type_converts_and_valueless_fields_are_refused_by_position() {
        let good = point(vec![
            ("f", value(field_value::Value::Float(1.5))),
            ("s", value(field_value::Value::String("a\nb".into()))),
        ]);
        let points = vec![
            good.clone(),
            point(vec![("v", FieldValue { value: None })]),
            good,
        ];
        let out = convert(&points);
        assert_eq!(out.positions, [1, 3]);
        assert_eq!(out.points[0].tags, [("host", "a")]);
        assert!(out.points[0]
            .fields
            .contains(&("s", PointValue::String("a\nb"))));
        assert_eq!(out.rejected.len(), 1);
        assert_eq!(out.rejected[0].line, 2);
        assert!(out.rejected[0].reason.contains("no value"));
        // The write's second point is the request's third.
        let merged = rejections(
            &out,
            vec![LineRejection {
                line: 2,
                column: None,
                reason: "conflict".into(),
            }],
        );
        let lines: Vec<usize> = merged.iter().map(|r| r.line).collect();
        assert_eq!(lines, [2, 3]);
    }
}
