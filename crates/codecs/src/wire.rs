//! Protobuf's wire format, read in place: the fields of one message as
//! integers and slices of the buffer. Remote write 1.0 and OTLP metrics
//! are decoded with it straight into borrowed shapes, with no generated
//! message structs in between: those allocate a `Vec` per repeated field
//! and a `String` per string, most of a protocol's decoding time
//! (docs/benchmarks.md §11, §12).
//!
//! What `prost` refuses is refused here too: a truncated or overlong
//! varint, a length past the end, a field number 0, the group wire types;
//! a known field sent with another wire type is the caller's to refuse.
//! Unknown fields are skipped, as proto3 says.

use crate::error::{Error, Result};

/// A field's value, as its wire type carries it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Value<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 1: `double`, `fixed64`, `sfixed64`.
    Fixed64(u64),
    /// Wire type 2: strings, bytes, messages, packed repeated fields.
    Bytes(&'a [u8]),
    /// Wire type 5: `float`, `fixed32`, `sfixed32`.
    Fixed32(u32),
}

/// The fields of one message, in the order they were written.
#[derive(Debug, Clone)]
pub(crate) struct Fields<'a> {
    rest: &'a [u8],
}

impl<'a> Fields<'a> {
    /// The fields of the message encoded in `message`.
    pub(crate) fn of(message: &'a [u8]) -> Fields<'a> {
        Fields { rest: message }
    }

    /// The next field's number and value; `None` at the end.
    #[inline]
    pub(crate) fn next_field(&mut self) -> Result<Option<(u32, Value<'a>)>> {
        if self.rest.is_empty() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = u32::try_from(key >> 3)
            .ok()
            .filter(|n| *n != 0)
            .ok_or_else(|| invalid(format!("field number {} is out of range", key >> 3)))?;
        let value = match key & 7 {
            0 => Value::Varint(self.varint()?),
            1 => Value::Fixed64(u64::from_le_bytes(self.take(8)?.try_into().unwrap())),
            2 => {
                let len = usize::try_from(self.varint()?)
                    .map_err(|_| invalid("a length is out of range".into()))?;
                Value::Bytes(self.take(len)?)
            }
            5 => Value::Fixed32(u32::from_le_bytes(self.take(4)?.try_into().unwrap())),
            wire => return Err(invalid(format!("field {number}: wire type {wire}"))),
        };
        Ok(Some((number, value)))
    }

    /// Reads a varint.
    #[inline]
    pub(crate) fn varint(&mut self) -> Result<u64> {
        // Keys and short lengths: one byte.
        if let Some((&byte, rest)) = self.rest.split_first() {
            if byte < 0x80 {
                self.rest = rest;
                return Ok(u64::from(byte));
            }
        }
        let mut value = 0u64;
        for (i, byte) in self.rest.iter().take(10).enumerate() {
            value |= u64::from(byte & 0x7f) << (7 * i);
            if byte & 0x80 == 0 {
                // The tenth byte may carry only the top bit.
                if i == 9 && *byte > 1 {
                    break;
                }
                self.rest = &self.rest[i + 1..];
                return Ok(value);
            }
        }
        Err(invalid("a varint is truncated or too long".into()))
    }

    /// Whether every field has been read.
    pub(crate) fn is_empty(&self) -> bool {
        self.rest.is_empty()
    }

    #[inline]
    fn take(&mut self, len: usize) -> Result<&'a [u8]> {
        if len > self.rest.len() {
            return Err(invalid(format!(
                "{len} bytes announced, {} left",
                self.rest.len()
            )));
        }
        let (taken, rest) = self.rest.split_at(len);
        self.rest = rest;
        Ok(taken)
    }
}

/// A message of two strings in the form senders write them, read without
/// the field loop: field 1 then field 2, each shorter than 128 bytes,
/// nothing else. Both are checked UTF-8 in one pass (the two bytes between
/// them are ASCII). `None`: read it field by field, which reads or refuses
/// what this leaves. A remote write `Label`; an OTLP `KeyValue`, whose
/// field 2 is an `AnyValue` message.
pub(crate) fn string_pair(message: &[u8]) -> Option<(&str, &str)> {
    let [0x0a, first_len, rest @ ..] = message else {
        return None;
    };
    let first_len = usize::from(*first_len);
    let [0x12, second_len, second @ ..] = rest.get(first_len..)? else {
        return None;
    };
    if first_len >= 0x80 || *second_len >= 0x80 || usize::from(*second_len) != second.len() {
        return None;
    }
    let text = std::str::from_utf8(&message[2..]).ok()?;
    Some((text.get(..first_len)?, text.get(first_len + 2..)?))
}

/// A message that breaks the wire format ([`reading`] names the message).
pub(crate) fn invalid(why: String) -> Error {
    Error::Malformed {
        message: "a protobuf message",
        why,
    }
}

/// `result` of reading `message` (with its article: "a remote write
/// WriteRequest"), whose malformed-protobuf error names it.
pub(crate) fn reading<T>(message: &'static str, result: Result<T>) -> Result<T> {
    result.map_err(|e| match e {
        Error::Malformed { why, .. } => Error::Malformed { message, why },
        e => e,
    })
}

/// The error for field `number` of `message` sent with an unexpected wire
/// type.
pub(crate) fn wrong_type(message: &str, number: u32, value: &Value<'_>) -> Error {
    invalid(format!(
        "{message} field {number} has the wrong wire type ({value:?})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(bytes: &[u8]) -> Result<Vec<(u32, Value<'_>)>> {
        let mut fields = Fields::of(bytes);
        let mut all = Vec::new();
        while let Some(field) = fields.next_field()? {
            all.push(field);
        }
        Ok(all)
    }

    #[test]
    fn every_wire_type_reads_back() {
        let bytes = [
            0x08, 0x96, 0x01, // 1: varint 150
            0x11, 1, 0, 0, 0, 0, 0, 0, 0x80, // 2: fixed64
            0x1a, 2, b'h', b'i', // 3: bytes "hi"
            0x25, 1, 0, 0, 0, // 4: fixed32 1
            0x28, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, // 5: u64::MAX
        ];
        assert_eq!(
            fields(&bytes).unwrap(),
            vec![
                (1, Value::Varint(150)),
                (2, Value::Fixed64(0x8000_0000_0000_0001)),
                (3, Value::Bytes(b"hi")),
                (4, Value::Fixed32(1)),
                (5, Value::Varint(u64::MAX)),
            ]
        );
    }

    #[test]
    fn malformed_messages_are_refused() {
        for bad in [
            &[0x08][..],   // a varint missing
            &[0x08, 0x80], // a varint cut short
            &[
                0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02,
            ], // past 64 bits
            &[0x1a, 3, b'a'], // a length past the end
            &[0x11, 1, 2, 3], // a fixed64 cut short
            &[0x0b],       // a group
            &[0x00, 0x01], // field number 0
            &[
                0x1a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01,
            ], // a huge length
        ] {
            assert!(fields(bad).is_err(), "{bad:?}");
        }
    }
}
