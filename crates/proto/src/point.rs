//! `chingest.v1.Points` and `Point`, written by hand instead of generated,
//! so that a request's points decode without hashing or copying a string:
//! the `tags` and `fields` maps are lists of entries (a protobuf map is, on
//! the wire, a repeated message of key 1 and value 2), and every string is
//! a `Bytes` slice of the point's bytes, which are copied out of the
//! request once, whole (gRPC's receive buffer is not one contiguous
//! `Bytes`: decoded from it, every string would be an allocation of its
//! own). The receiver checks UTF-8. Wire-compatible with the `.proto`:
//! clients generated from it (maps and all) send exactly these bytes.

use prost::bytes::{Buf, BufMut, Bytes};
use prost::encoding::{self, DecodeContext, WireType};
use prost::{DecodeError, Message};

/// A list of points (a oneof member cannot be repeated itself).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Points {
    /// The points.
    pub points: Vec<Point>,
}

impl Message for Points {
    fn encode_raw(&self, buf: &mut impl BufMut) {
        for point in &self.points {
            encoding::message::encode(1, point, buf);
        }
    }

    fn merge_field(
        &mut self,
        tag: u32,
        wire_type: WireType,
        buf: &mut impl Buf,
        ctx: DecodeContext,
    ) -> Result<(), DecodeError> {
        if tag != 1 {
            return encoding::skip_field(wire_type, tag, buf, ctx);
        }
        // The point's bytes, copied once; its strings are slices of them.
        let mut bytes = Bytes::new();
        encoding::bytes::merge(wire_type, &mut bytes, buf, ctx)?;
        // Points of a request are usually alike: room for as many tags and
        // fields as the previous one had saves growing the lists entry by
        // entry.
        let (tags, fields) = self
            .points
            .last()
            .map_or((0, 0), |p| (p.tags.len(), p.fields.len()));
        let mut point = Point {
            tags: Vec::with_capacity(tags),
            fields: Vec::with_capacity(fields),
            ..Point::default()
        };
        point.merge(bytes)?;
        self.points.push(point);
        Ok(())
    }

    fn encoded_len(&self) -> usize {
        encoding::message::encoded_len_repeated(1, &self.points)
    }

    fn clear(&mut self) {
        self.points.clear();
    }
}

/// One point: what one line of line protocol says, typed.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Point {
    /// Measurement name (required), UTF-8.
    #[prost(bytes = "bytes", tag = "1")]
    pub measurement: Bytes,
    /// Tag keys and values; an empty value is no tag.
    #[prost(message, repeated, tag = "2")]
    pub tags: Vec<Tag>,
    /// Field keys and values; at least one.
    #[prost(message, repeated, tag = "3")]
    pub fields: Vec<Field>,
    /// Time in units of the request's precision; absent: the server's clock.
    #[prost(int64, optional, tag = "4")]
    pub timestamp: Option<i64>,
}

/// A tag: one entry of `Point.tags`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Tag {
    /// The tag key, UTF-8.
    #[prost(bytes = "bytes", tag = "1")]
    pub key: Bytes,
    /// The tag value, UTF-8.
    #[prost(bytes = "bytes", tag = "2")]
    pub value: Bytes,
}

/// A field: one entry of `Point.fields`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Field {
    /// The field key, UTF-8.
    #[prost(bytes = "bytes", tag = "1")]
    pub key: Bytes,
    /// The value.
    #[prost(message, optional, tag = "2")]
    pub value: Option<FieldValue>,
}

/// A field's value (`chingest.v1.FieldValue`), beside the points that
/// hold it, as prost would generate it: with [`Point`] hand-written, the
/// generated messages name both, and neither names the generated module.
#[derive(Clone, PartialEq, prost::Message)]
pub struct FieldValue {
    /// The value, of one of the column types.
    #[prost(oneof = "field_value::Value", tags = "1, 2, 3, 4, 5")]
    pub value: Option<field_value::Value>,
}

/// The members of [`FieldValue`]'s `value`.
pub mod field_value {
    /// A field's value, by the column type it is stored in.
    #[derive(Clone, PartialEq, prost::Oneof)]
    pub enum Value {
        /// Float64 column. Must be finite.
        #[prost(double, tag = "1")]
        Float(f64),
        /// Int64 column.
        #[prost(int64, tag = "2")]
        Integer(i64),
        /// UInt64 column.
        #[prost(uint64, tag = "3")]
        Unsigned(u64),
        /// String column.
        #[prost(string, tag = "4")]
        String(String),
        /// Bool column.
        #[prost(bool, tag = "5")]
        Boolean(bool),
    }
}

impl Point {
    /// A point of `measurement` at `timestamp`, without tags or fields yet.
    pub fn new(measurement: &str, timestamp: Option<i64>) -> Point {
        Point {
            measurement: Bytes::copy_from_slice(measurement.as_bytes()),
            tags: Vec::new(),
            fields: Vec::new(),
            timestamp,
        }
    }

    /// This point with the tag `key` = `value`.
    pub fn tag(mut self, key: &str, value: &str) -> Point {
        self.tags.push(Tag {
            key: Bytes::copy_from_slice(key.as_bytes()),
            value: Bytes::copy_from_slice(value.as_bytes()),
        });
        self
    }

    /// This point with the field `key` = `value`.
    pub fn field(mut self, key: &str, value: field_value::Value) -> Point {
        self.fields.push(Field {
            key: Bytes::copy_from_slice(key.as_bytes()),
            value: Some(FieldValue { value: Some(value) }),
        });
        self
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashMap;

    use prost::Message;

    use super::field_value::Value;
    use super::*;

    /// What a client generated from the `.proto` sends: maps.
    #[derive(Clone, PartialEq, prost::Message)]
    struct MapPoint {
        #[prost(string, tag = "1")]
        measurement: String,
        #[prost(map = "string, string", tag = "2")]
        tags: HashMap<String, String>,
        #[prost(map = "string, message", tag = "3")]
        fields: HashMap<String, FieldValue>,
        #[prost(int64, optional, tag = "4")]
        timestamp: Option<i64>,
    }

    #[test]
    fn map_points_decode_as_entry_lists_and_back() {
        let sent = MapPoint {
            measurement: "cpu".into(),
            tags: HashMap::from([("host".into(), "a".into())]),
            fields: HashMap::from([(
                "v".into(),
                FieldValue {
                    value: Some(Value::Integer(7)),
                },
            )]),
            timestamp: Some(3),
        };
        let got = Point::decode(sent.encode_to_vec().as_slice()).unwrap();
        assert_eq!(
            got,
            Point::new("cpu", Some(3))
                .tag("host", "a")
                .field("v", Value::Integer(7))
        );
        assert_eq!(
            MapPoint::decode(got.encode_to_vec().as_slice()).unwrap(),
            sent
        );
    }
}
