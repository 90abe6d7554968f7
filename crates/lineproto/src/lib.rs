//! InfluxDB line protocol parser: bytes in, per-line results (points or
//! errors) out.
//!
//! The crate does no I/O and has no dependencies. It is built for ingest
//! throughput: [`Parser::next_into`] parses into a reused [`Line`] without
//! allocating, and every name and value is a borrowed slice of the input
//! ([`Escaped`]) that is unescaped only when asked. A bad line is reported
//! with its line number and column and never stops the lines after it.
//!
//! ```
//! use lineproto::{FieldValue, Line, ParseOptions, Parser};
//!
//! let body = b"cpu,host=a usage=0.5,count=3i 1700000000000000000\nbad line\n";
//! let mut parser = Parser::new(body, ParseOptions::default());
//! let mut line = Line::default();
//!
//! parser.next_into(&mut line).unwrap().unwrap();
//! assert_eq!(line.measurement, "cpu");
//! assert_eq!(line.tag("host").unwrap(), "a");
//! assert_eq!(line.field("count"), Some(FieldValue::Integer(3)));
//! assert_eq!(line.timestamp, 1_700_000_000_000_000_000);
//!
//! let error = parser.next_into(&mut line).unwrap().unwrap_err();
//! assert_eq!(error.to_string(), "line 2, column 9: missing value for field 'line'");
//! assert!(parser.next_into(&mut line).is_none());
//! ```
//!
//! # Syntax accepted
//!
//! ```text
//! measurement[,tag_key=tag_value...] field_key=field_value[,field_key=field_value...] [timestamp]
//! ```
//!
//! * Lines end at `\n`; a `\r` just before it (or at the end of the input)
//!   is dropped. A line feed always ends a line, even inside a quoted string
//!   or after a backslash: line protocol does not support line feeds in
//!   names or values.
//! * Spaces and tabs before the measurement are skipped; a line that is then
//!   empty, or starts with `#`, is skipped (but counted).
//! * Sections are separated by one or more spaces (not tabs). Spaces after
//!   the last section are allowed.
//! * Only space, `,`, `=` and `\` are ever delimiters in names. In
//!   particular a tab or NUL byte is an ordinary character, `=` may appear
//!   unescaped in a measurement or tag value, and `,` may appear unescaped
//!   in a tag key or field key (so `m,a=1,,b=2` has the tag key `,b`). See
//!   [Escape rules](#escape-rules).
//! * The measurement, tag keys, tag values and field keys must not be
//!   empty, and there must be at least one field. Tags and fields keep the
//!   order they are written in; duplicate keys are passed through.
//! * Field values: float `-?\d+(\.\d+)?([eE][+-]?\d+)?` (so no `.5`, `1.`,
//!   `+1`, `NaN` or `inf`, and the result must be finite); integer
//!   `-?\d+i` (`i64`); unsigned `\d+u` (`u64`); string `"..."` (any
//!   characters but a line feed, including spaces, commas and `=`); boolean
//!   `t T true True TRUE f F false False FALSE`. A value must be followed by
//!   `,`, a space or the end of the line.
//! * Timestamp: `-?\d+`, in the parse's [`Precision`], converted to
//!   nanoseconds with an overflow check.
//!
//! # Escape rules
//!
//! | token                                   | `\x` means `x` for `x` in |
//! |-----------------------------------------|---------------------------|
//! | measurement                             | `,` ` ` `\`               |
//! | tag key, tag value, field key           | `,` `=` ` ` `\`           |
//! | string field value (between the quotes) | `"` `\`                   |
//!
//! A backslash followed by any other character is literal and so is that
//! character (`a\b` is the three characters `a\b`); in a measurement this
//! includes `\=`. A backslash also always protects the character after it
//! from being read as a delimiter.
//!
//! Names (measurement, tag keys and values, field keys) whose logical text
//! ends with a backslash are rejected by the parser, which also makes them
//! impossible to write; see [`ErrorKind::TrailingBackslash`].
//!
//! # Differences from the `influxdb-line-protocol` crate
//!
//! The test suite checks this parser against the `influxdb-line-protocol`
//! crate (v2): every line that crate accepts is parsed to the same values,
//! and every line it rejects is rejected, except for these deliberate
//! differences:
//!
//! * **Line feeds always end a line.** That crate keeps a `\n` inside a
//!   double-quoted string, or after a backslash, as part of the line.
//!   Line protocol does not support line feeds in values, and ending lines
//!   only at `\n` lets a bad quote damage one line instead of the rest of
//!   the body and keeps line numbers physical.
//! * **CRLF line endings are accepted** (the `\r` is dropped); that crate
//!   rejects the `\r`.
//! * **Tabs (and NUL bytes) are ordinary characters in names and values.**
//!   That crate ends names at a tab (and measurements at a NUL) and then
//!   rejects the line. There is no escape for a tab, so treating it as a
//!   delimiter would make such names impossible to write; only spaces
//!   separate the sections of a line.
//! * **Trailing spaces after the field set are accepted** when there is no
//!   timestamp (`m f=1 `). That crate accepts them only after a timestamp.
//! * **A trailing comma after the fields is rejected** (`m f=1,` and
//!   `m f=1, 123`, [`ErrorKind::EmptyFieldKey`]). That crate accepts it
//!   after the first field only (and rejects `m f=1,g=2,`), which is an
//!   accident of its list parsing rather than a rule of the format.
//! * **Floats must be finite.** That crate turns `1e400` into infinity;
//!   here it is [`ErrorKind::FloatOutOfRange`].

#![warn(missing_docs)]

mod error;
mod escape;
mod line;
mod parser;
mod precision;

pub use error::{ErrorKind, LineError};
pub use escape::{escape_measurement, escape_string_field, escape_tag, Escaped};
pub use line::{FieldValue, Line};
pub use parser::{parse, ParseOptions, Parsed, Parser};
pub use precision::{Precision, UnknownPrecision};

#[cfg(test)]
mod tests;
