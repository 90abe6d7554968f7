//! Per-line parse errors.
//!
//! Owns [`LineError`] (where: line and column) and [`ErrorKind`] (what),
//! and the rule that text quoted back to the user is short. Errors are the
//! only place the crate allocates on its own account, and only when a line
//! is rejected, so the happy path stays allocation-free. Messages are meant
//! to be returned verbatim in an HTTP error body.

use std::fmt;

/// Longest excerpt of user text quoted in an error message, in bytes.
pub(crate) const EXCERPT_MAX: usize = 64;

/// `s` cut to at most [`EXCERPT_MAX`] bytes on a character boundary, with
/// `...` marking a cut.
pub(crate) fn excerpt(s: &str) -> String {
    if s.len() <= EXCERPT_MAX {
        return s.to_owned();
    }
    let mut end = EXCERPT_MAX - 3;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    let mut out = String::with_capacity(end + 3);
    out.push_str(&s[..end]);
    out.push_str("...");
    out
}

/// A rejected line: where, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LineError {
    /// 1-based physical line number the line starts on (blank lines,
    /// comments and line feeds in earlier lines' string values count).
    pub line_number: usize,
    /// 1-based byte column of the offending token within the line (counted
    /// from the line's start, across line feeds in its string values).
    pub column: usize,
    /// What is wrong.
    pub kind: ErrorKind,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "line {}, column {}: {}",
            self.line_number, self.column, self.kind
        )
    }
}

impl std::error::Error for LineError {}

/// Why a line was rejected.
///
/// Text quoted from the line (names, values) is the raw text as written,
/// cut to at most 64 bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The line is not valid UTF-8; the column is that of the first bad byte.
    InvalidUtf8,
    /// The line is longer than [`ParseOptions::max_line_len`](crate::ParseOptions::max_line_len).
    LineTooLong {
        /// The limit in bytes.
        limit: usize,
    },
    /// The line starts with a comma: there is no measurement name.
    MissingMeasurement,
    /// A measurement, tag key, tag value or field key ends with a backslash
    /// (either a lone one at the end of the line or an escaped `\\`). Such
    /// names are rejected, as InfluxDB does.
    TrailingBackslash {
        /// The name as written.
        name: String,
    },
    /// A tag has no key (`m,=v`, `m, f=1`, `m,`, `m,a=1,,b=2`).
    EmptyTagKey,
    /// A tag has no `=` or nothing after it (`m,k f=1`, `m,k= f=1`), or
    /// its key has an unescaped comma (`m,a,b=v f=1`: the tag `a` has no
    /// value).
    MissingTagValue {
        /// The tag key as written.
        key: String,
    },
    /// A tag value has an unescaped `=` after its first byte
    /// (`m,k=a=b f=1`); the column is that of the `=`.
    EqualsInTagValue {
        /// The tag key as written.
        key: String,
    },
    /// The line has no field set.
    MissingFields,
    /// A field has no key (`m =1`, `m f=1,`, `m f=1,,g=2`).
    EmptyFieldKey,
    /// A field has no `=` or nothing after it (`m f`, `m f= 1`), or its key
    /// has an unescaped comma (`m a,b=1`: the field `a` has no value).
    MissingFieldValue {
        /// The field key as written.
        key: String,
    },
    /// A field value is not a float, integer, unsigned integer, string or
    /// boolean (includes `NaN`, `inf`, `.`, `+1` and garbage after a value).
    InvalidFieldValue {
        /// The field key as written.
        key: String,
        /// The value as written, up to the next comma or space.
        value: String,
    },
    /// A value with an `i` or `u` suffix is not a valid integer of that
    /// kind (`1.5i`, `-1u`).
    InvalidInteger {
        /// The field key as written.
        key: String,
        /// The value as written.
        value: String,
    },
    /// An integer does not fit its type (`i64` for `i`, `u64` for `u`).
    IntegerOutOfRange {
        /// The field key as written.
        key: String,
        /// The value as written.
        value: String,
    },
    /// A float is too large to be finite (`1e400`).
    FloatOutOfRange {
        /// The field key as written.
        key: String,
        /// The value as written.
        value: String,
    },
    /// A string field value has no closing double quote before the end of
    /// the input; the column is that of the opening quote.
    UnterminatedString {
        /// The field key as written.
        key: String,
    },
    /// The timestamp is not an optionally negative decimal integer.
    InvalidTimestamp {
        /// The timestamp as written.
        value: String,
    },
    /// The timestamp is not between `i64::MIN + 2` and `i64::MAX - 1`
    /// nanoseconds after conversion to nanoseconds (InfluxDB's range).
    TimestampOutOfRange {
        /// The timestamp as written.
        value: String,
    },
    /// Something other than spaces follows the timestamp.
    TrailingGarbage {
        /// The unexpected text.
        text: String,
    },
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ErrorKind::InvalidUtf8 => f.write_str("line is not valid UTF-8"),
            ErrorKind::LineTooLong { limit } => {
                write!(f, "line is longer than the limit of {limit} bytes")
            }
            ErrorKind::MissingMeasurement => f.write_str("missing measurement name"),
            ErrorKind::TrailingBackslash { name } => {
                write!(f, "name '{name}' ends with a backslash")
            }
            ErrorKind::EmptyTagKey => f.write_str("empty tag key"),
            ErrorKind::MissingTagValue { key } => write!(f, "missing value for tag '{key}'"),
            ErrorKind::EqualsInTagValue { key } => {
                write!(f, "unescaped '=' in the value of tag '{key}'")
            }
            ErrorKind::MissingFields => f.write_str("missing fields (at least one is required)"),
            ErrorKind::EmptyFieldKey => f.write_str("empty field key"),
            ErrorKind::MissingFieldValue { key } => {
                write!(f, "missing value for field '{key}'")
            }
            ErrorKind::InvalidFieldValue { key, value } => {
                write!(f, "invalid field value '{value}' for field '{key}'")
            }
            ErrorKind::InvalidInteger { key, value } => {
                write!(f, "invalid integer '{value}' for field '{key}'")
            }
            ErrorKind::IntegerOutOfRange { key, value } => {
                write!(f, "integer '{value}' for field '{key}' is out of range")
            }
            ErrorKind::FloatOutOfRange { key, value } => {
                write!(f, "float '{value}' for field '{key}' is out of range")
            }
            ErrorKind::UnterminatedString { key } => {
                write!(f, "unterminated string value for field '{key}'")
            }
            ErrorKind::InvalidTimestamp { value } => write!(f, "invalid timestamp '{value}'"),
            ErrorKind::TimestampOutOfRange { value } => {
                write!(f, "timestamp '{value}' is out of range")
            }
            ErrorKind::TrailingGarbage { text } => {
                write!(f, "unexpected text '{text}' after the timestamp")
            }
        }
    }
}
