//! Typed points (`WriteRequest.points`) as the library's
//! [`chingest::Point`]s, borrowing the request's strings (slices of the
//! request buffer, see `chingest_proto::v1::Point`): they take the
//! line-protocol write path's rules without being written out as text and
//! parsed again. A point with a field that carries no value or a string
//! that is not UTF-8 is refused here; everything else is judged by
//! `Ingestor::write_points`. Fields keep the order the client sent (a
//! client's points usually list a measurement's fields alike, which the
//! write path then resolves once).

use chingest::{LineRejection, PointValue};
use chingest_proto::v1::{field_value, Point};

/// A points request, ready for `Ingestor::write_points`.
#[derive(Debug, Default)]
pub(crate) struct Converted<'a> {
    /// The points that could be converted, in request order.
    pub(crate) points: Vec<chingest::Point<'a>>,
    /// The 1-based position in the request of each of `points`.
    pub(crate) positions: Vec<usize>,
    /// Points refused here, by 1-based position.
    pub(crate) rejected: Vec<LineRejection>,
}

/// Converts `points`.
pub(crate) fn convert(points: &[Point]) -> Converted<'_> {
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

fn text<'a>(bytes: &'a [u8], what: &str) -> Result<&'a str, String> {
    std::str::from_utf8(bytes).map_err(|_| format!("{what} is not UTF-8"))
}

fn convert_one(point: &Point) -> Result<chingest::Point<'_>, String> {
    let mut tags = Vec::with_capacity(point.tags.len());
    for tag in &point.tags {
        tags.push((
            text(&tag.key, "a tag key")?,
            text(&tag.value, "a tag value")?,
        ));
    }
    let mut fields = Vec::with_capacity(point.fields.len());
    for field in &point.fields {
        let key = text(&field.key, "a field key")?;
        let value = match field.value.as_ref().and_then(|v| v.value.as_ref()) {
            Some(field_value::Value::Float(v)) => PointValue::Float(*v),
            Some(field_value::Value::Integer(v)) => PointValue::Integer(*v),
            Some(field_value::Value::Unsigned(v)) => PointValue::UInteger(*v),
            Some(field_value::Value::String(v)) => PointValue::String(v),
            Some(field_value::Value::Boolean(v)) => PointValue::Boolean(*v),
            None => return Err(format!("field {key:?} has no value")),
        };
        fields.push((key, value));
    }
    Ok(chingest::Point {
        measurement: text(&point.measurement, "the measurement")?,
        tags,
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
    use super::*;

    #[test]
    fn every_type_converts_and_bad_points_are_refused_by_position() {
        use field_value::Value;
        let good = Point::new("m", Some(1_000))
            .tag("host", "a")
            .field("f", Value::Float(1.5))
            .field("s", Value::String("a\nb".into()));
        let mut valueless = Point::new("m", None).field("v", Value::Integer(1));
        valueless.fields[0].value = None;
        let mut not_utf8 = good.clone();
        not_utf8.tags[0].value = prost::bytes::Bytes::from_static(b"\xff");
        let points = vec![good.clone(), valueless, not_utf8, good];
        let out = convert(&points);
        assert_eq!(out.positions, [1, 4]);
        assert_eq!(out.points[0].tags, [("host", "a")]);
        assert_eq!(out.points[0].fields[1], ("s", PointValue::String("a\nb")));
        let refused: Vec<(usize, &str)> = out
            .rejected
            .iter()
            .map(|r| (r.line, r.reason.as_str()))
            .collect();
        assert_eq!(
            refused,
            [
                (2, "field \"v\" has no value"),
                (3, "a tag value is not UTF-8")
            ]
        );
        // The write's second point is the request's fourth.
        let merged = rejections(
            &out,
            vec![LineRejection {
                line: 2,
                column: None,
                reason: "conflict".into(),
            }],
        );
        let lines: Vec<usize> = merged.iter().map(|r| r.line).collect();
        assert_eq!(lines, [2, 3, 4]);
    }
}
