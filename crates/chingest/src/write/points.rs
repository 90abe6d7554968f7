//! Typed points: what one line of line protocol says, given as values
//! instead of text. Each point becomes a [`lineproto::Line`] borrowing the
//! caller's strings — no text is written or parsed — and takes the line
//! path of `lp.rs` from there, with every rule of it: limits, schema on
//! write, type conflicts, cardinality, deferral of lines that need DDL, and
//! partial writes with a rejection per point.
//!
//! A point's series key (the raw-key cache's key) is the line-protocol text
//! of its measurement and its tags sorted by key, so a series written as
//! points and as lines shares one cache entry.

use lineproto::{escape_measurement, escape_tag, Escaped, FieldValue, Line, Precision};

/// One point: a measurement, tags, typed fields and an optional time.
#[derive(Debug, Clone, PartialEq)]
pub struct Point<'a> {
    /// The measurement (required).
    pub measurement: &'a str,
    /// Tag keys and values; a tag with an empty value is no tag, as in
    /// line protocol.
    pub tags: Vec<(&'a str, &'a str)>,
    /// Field keys and values; at least one.
    pub fields: Vec<(&'a str, PointValue<'a>)>,
    /// Time in units of the write's precision; `None`: the time of the
    /// write.
    pub timestamp: Option<i64>,
}

/// A field value of a [`Point`]: one of the five field types.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum PointValue<'a> {
    /// A Float64 field; must be finite.
    Float(f64),
    /// An Int64 field.
    Integer(i64),
    /// A UInt64 field.
    UInteger(u64),
    /// A String field.
    String(&'a str),
    /// A Bool field.
    Boolean(bool),
}

/// A write's typed points, ready to become lines one at a time: with
/// their series keys, and what their timestamps mean.
pub(crate) struct PointLines<'a> {
    points: &'a [Point<'a>],
    keys: SeriesKeys,
    precision: Precision,
    now_ns: i64,
}

/// The series keys of some points, in one buffer: point `i`'s is
/// `buffer[ranges[i]]`.
struct SeriesKeys {
    buffer: String,
    ranges: Vec<std::ops::Range<usize>>,
}

impl SeriesKeys {
    fn new(points: &[Point<'_>]) -> SeriesKeys {
        let mut buffer = String::new();
        let mut ranges = Vec::with_capacity(points.len());
        let mut tags: Vec<(&str, &str)> = Vec::new();
        for point in points {
            let start = buffer.len();
            escape_measurement(point.measurement, &mut buffer);
            tags.clear();
            tags.extend(point.tags.iter().filter(|(_, v)| !v.is_empty()));
            tags.sort_unstable();
            for (key, value) in &tags {
                buffer.push(',');
                escape_tag(key, &mut buffer);
                buffer.push('=');
                escape_tag(value, &mut buffer);
            }
            ranges.push(start..buffer.len());
        }
        SeriesKeys { buffer, ranges }
    }

    fn get(&self, i: usize) -> &str {
        &self.buffer[self.ranges[i].clone()]
    }
}

impl<'a> PointLines<'a> {
    /// `points`, whose timestamps are in `precision`; `now_ns` stands for
    /// a missing one.
    pub(crate) fn new(points: &'a [Point<'a>], precision: Precision, now_ns: i64) -> Self {
        PointLines {
            points,
            keys: SeriesKeys::new(points),
            precision,
            now_ns,
        }
    }

    /// How many points there are.
    pub(crate) fn len(&self) -> usize {
        self.points.len()
    }

    /// Fills `line` with point `index` (line number `index + 1`), or says
    /// why the point cannot be a line: what the line-protocol parser would
    /// refuse before a line exists (empty names, no fields, a float that is
    /// not finite, a time out of range). One `Line` is reused for every
    /// point, as the parser reuses one for every line.
    pub(crate) fn fill(&'a self, index: usize, line: &mut Line<'a>) -> Result<(), String> {
        let point = &self.points[index];
        if point.measurement.is_empty() {
            return Err("empty measurement".into());
        }
        if point.fields.is_empty() {
            return Err("a point needs at least one field".into());
        }
        line.tags.clear();
        for (key, value) in &point.tags {
            if key.is_empty() {
                return Err("empty tag key".into());
            }
            if !value.is_empty() {
                line.tags.push((Escaped::plain(key), Escaped::plain(value)));
            }
        }
        line.fields.clear();
        for (key, value) in &point.fields {
            if key.is_empty() {
                return Err("empty field key".into());
            }
            let value = match *value {
                PointValue::Float(v) if !v.is_finite() => {
                    return Err(format!("field {key:?} is {v}: floats must be finite"))
                }
                PointValue::Float(v) => FieldValue::Float(v),
                PointValue::Integer(v) => FieldValue::Integer(v),
                PointValue::UInteger(v) => FieldValue::UInteger(v),
                PointValue::String(v) => FieldValue::String(Escaped::plain(v)),
                PointValue::Boolean(v) => FieldValue::Boolean(v),
            };
            line.fields.push((Escaped::plain(key), value));
        }
        let precision = self.precision;
        line.timestamp = match point.timestamp {
            Some(t) => precision
                .to_nanos(t)
                .ok_or_else(|| format!("timestamp {t} {} is out of range", precision.as_str()))?,
            None => self.now_ns,
        };
        line.line_number = index + 1;
        line.series_key = self.keys.get(index);
        line.measurement = Escaped::plain(point.measurement);
        line.timestamp_given = point.timestamp.is_some();
        line.same_field_keys = false;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point<'a>(tags: Vec<(&'a str, &'a str)>) -> Point<'a> {
        Point {
            measurement: "cpu load",
            tags,
            fields: vec![("v", PointValue::Float(1.0))],
            timestamp: Some(2),
        }
    }

    #[test]
    fn series_keys_are_line_protocol_with_sorted_tags() {
        let points = [
            point(vec![("host", "a,b"), ("dc", "x=y"), ("empty", "")]),
            point(vec![]),
        ];
        let keys = SeriesKeys::new(&points);
        assert_eq!(keys.get(0), r"cpu\ load,dc=x\=y,host=a\,b");
        assert_eq!(keys.get(1), r"cpu\ load");
    }

    #[test]
    fn points_become_lines_or_reasons() {
        let good = point(vec![("host", "a"), ("empty", "")]);
        let mut bad = vec![good.clone(); 5];
        bad[0].measurement = "";
        bad[1].fields.clear();
        bad[2].tags = vec![("", "x")];
        bad[3].fields = vec![("v", PointValue::Float(f64::NAN))];
        bad[4].timestamp = Some(i64::MAX);
        let all: Vec<Point<'_>> = std::iter::once(good).chain(bad).collect();
        let lines = PointLines::new(&all, Precision::Seconds, 7);
        let mut line = Line::default();
        lines.fill(0, &mut line).unwrap();
        assert_eq!(line.timestamp, 2_000_000_000);
        assert_eq!(line.tags.len(), 1);
        assert_eq!(line.measurement.unescape(), "cpu load");
        let reasons: Vec<String> = (1..all.len())
            .map(|i| lines.fill(i, &mut line).unwrap_err())
            .collect();
        assert_eq!(reasons[0], "empty measurement");
        assert!(reasons[1].contains("at least one field"));
        assert_eq!(reasons[2], "empty tag key");
        assert!(reasons[3].contains("finite"));
        assert!(reasons[4].contains("out of range"));
    }
}
