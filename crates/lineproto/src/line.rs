//! The parsed form of one line: [`Line`] and its [`FieldValue`]s.
//!
//! Everything here borrows from the input buffer. A `Line` is designed to be
//! reused: [`Parser::next_into`](crate::Parser::next_into) clears and refills
//! its vectors, so after the first few lines parsing allocates nothing.

use crate::escape::Escaped;

/// A field value.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum FieldValue<'a> {
    /// A float: `1`, `-1.5`, `1e9`, `1.5E-3`. Always finite.
    Float(f64),
    /// A signed integer: `1i`, `-7i`.
    Integer(i64),
    /// An unsigned integer: `1u`.
    UInteger(u64),
    /// A string: `"text"`. The [`Escaped`] holds the text between the quotes
    /// and unescapes `\"` and `\\`.
    String(Escaped<'a>),
    /// A boolean: `t T true True TRUE f F false False FALSE`.
    Boolean(bool),
}

impl FieldValue<'_> {
    /// Name of the value's type: `float`, `integer`, `unsigned`, `string`
    /// or `boolean`.
    pub fn type_name(&self) -> &'static str {
        match self {
            FieldValue::Float(_) => "float",
            FieldValue::Integer(_) => "integer",
            FieldValue::UInteger(_) => "unsigned",
            FieldValue::String(_) => "string",
            FieldValue::Boolean(_) => "boolean",
        }
    }
}

/// One accepted line of line protocol.
#[derive(Debug, Clone, Default)]
pub struct Line<'a> {
    /// 1-based physical line number the line starts on (blank lines,
    /// comments and line feeds in earlier lines' string values count).
    pub line_number: usize,
    /// Raw text of the measurement and tag set exactly as written: everything
    /// from the measurement's first byte up to the first unescaped space.
    /// Two lines with the same series key have the same measurement and tags.
    pub series_key: &'a str,
    /// The measurement name.
    pub measurement: Escaped<'a>,
    /// Tags in the order written. Duplicate keys are passed through.
    pub tags: Vec<(Escaped<'a>, Escaped<'a>)>,
    /// Fields in the order written; never empty for an accepted line.
    /// Duplicate keys are passed through.
    pub fields: Vec<(Escaped<'a>, FieldValue<'a>)>,
    /// Nanoseconds since the Unix epoch, after precision conversion; the
    /// parse's default time when the line has no timestamp.
    pub timestamp: i64,
    /// Whether the line had a timestamp.
    pub timestamp_given: bool,
    /// Whether the field keys are, byte for byte and in order, those of the
    /// last line from the same [`Parser`](crate::Parser) whose field set was
    /// parsed (keys with escapes never count as the same). Lets a consumer
    /// reuse what it resolved for that line's keys without comparing them;
    /// it must forget that resolution whenever the parser reports an error.
    pub same_field_keys: bool,
}

impl<'a> Line<'a> {
    /// The value of the first tag whose unescaped key is `key`.
    pub fn tag(&self, key: &str) -> Option<Escaped<'a>> {
        self.tags.iter().find(|(k, _)| *k == key).map(|&(_, v)| v)
    }

    /// The value of the first field whose unescaped key is `key`.
    pub fn field(&self, key: &str) -> Option<FieldValue<'a>> {
        self.fields.iter().find(|(k, _)| *k == key).map(|&(_, v)| v)
    }
}
