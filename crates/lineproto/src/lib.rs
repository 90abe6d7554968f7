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
//! The syntax is InfluxDB 1.6's: every line InfluxDB stores is accepted
//! here with the same values, and every line it rejects is rejected, but for
//! the differences listed in the repository's `docs/lineproto.md` (which a
//! test runs against InfluxDB itself). In short:
//!
//! * Lines end at `\n`, except inside a string field value (see
//!   [Line ends](#line-ends)); a `\r` just before it (or at the end of the
//!   input) is dropped.
//! * Spaces, tabs and NUL bytes before the measurement are skipped; a line
//!   that is then empty, or starts with `#`, is skipped (but counted).
//! * Sections are separated by one or more spaces (not tabs), after which
//!   tabs and NUL bytes are skipped too. Spaces after the last section are
//!   allowed.
//! * Only space, `,`, `=` and `\` are ever delimiters in names. A tab or
//!   NUL byte is an ordinary character in a name, and `=` may appear
//!   unescaped in a measurement and as the first byte of a tag value. An
//!   unescaped `,` in a tag key or field key, and an unescaped `=` later in
//!   a tag value, are errors. See [Escape rules](#escape-rules).
//! * The measurement, tag keys, tag values and field keys must not be
//!   empty, and there must be at least one field. Tags and fields keep the
//!   order they are written in; duplicate keys are passed through.
//! * Field values: float `-?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?` (so `.5`,
//!   `5.` and `1.e5`, but no `.`, `+1`, `NaN` or `inf`, and the result must
//!   be finite); integer `-?\d+i` (`i64`); unsigned `\d+u` (`u64`, which
//!   InfluxDB 1.6 refuses); string `"..."` (any characters, including line
//!   feeds, spaces, commas and `=`); boolean `t T true True TRUE f F false
//!   False FALSE`. A value must be followed by `,`, a space or the end of
//!   the line.
//! * Timestamp: `-?\d+`, in the parse's [`Precision`], converted to
//!   nanoseconds with an overflow check; InfluxDB's range, `i64::MIN + 2`
//!   to `i64::MAX - 1` nanoseconds.
//!
//! # Line ends
//!
//! A line ends at the first line feed outside a string field value. In the
//! field set (after the first space that ends the measurement and tags), a
//! `"` right after an unescaped `=` opens a string value, which ends at the
//! next `"` not escaped by a backslash; one without a closing quote runs to
//! the end of the input (a line feed ending the input still ends it). So a
//! stray quote can join lines, as it does in InfluxDB. [`Line::line_number`]
//! is the physical line a line starts on; the line numbers after it count
//! the line feeds in its strings.
//!
//! Unlike InfluxDB, a backslash never escapes a line feed outside a string
//! (InfluxDB continues the line, putting the line feed into a name), and a
//! comment ends at its line feed whatever quotes it holds.
//!
//! # Escape rules
//!
//! | token                                   | `\x` means `x` for `x` in |
//! |-----------------------------------------|---------------------------|
//! | measurement, field key                  | `,` `=` ` ` `"` `\`       |
//! | tag key, tag value                      | `,` `=` ` ` `\`           |
//! | string field value (between the quotes) | `"` `\`                   |
//!
//! A backslash followed by any other character is literal and so is that
//! character (`a\b` is the three characters `a\b`). A backslash also always
//! protects the character after it from being read as a delimiter.
//!
//! `\\` is one backslash, which InfluxDB 1.6 reads as two (it never lets a
//! backslash escape a backslash); InfluxDB 3 and clients that escape names
//! (such as Python's `influxdb`) mean one. Names (measurement, tag keys and
//! values, field keys) whose logical text ends with a backslash are
//! rejected by the parser, which also makes them impossible to write; see
//! [`ErrorKind::TrailingBackslash`].
//!
//! # Differences from the `influxdb-line-protocol` crate
//!
//! The test suite checks this parser against the `influxdb-line-protocol`
//! crate (v2, InfluxDB 3's parser): every line that crate accepts is parsed
//! to the same values, and every line it rejects is rejected, except for
//! these differences (most are where that crate and InfluxDB 1.6 differ):
//!
//! * **CRLF line endings are accepted** (the `\r` is dropped); that crate
//!   rejects the `\r`.
//! * **A line feed after a backslash ends the line** outside string values;
//!   that crate (like InfluxDB 1.6) continues the line.
//! * **Tabs (and NUL bytes) are ordinary characters in names and values**,
//!   and are skipped after the spaces that end the tags and the fields.
//!   That crate ends names at a tab (and measurements at a NUL) and then
//!   rejects the line. There is no escape for a tab, so treating it as a
//!   delimiter would make such names impossible to write.
//! * **Trailing spaces after the field set are accepted** when there is no
//!   timestamp (`m f=1 `). That crate accepts them only after a timestamp.
//! * **A trailing comma after the fields is rejected** (`m f=1,` and
//!   `m f=1, 123`, [`ErrorKind::EmptyFieldKey`]). That crate accepts it
//!   after the first field only (and rejects `m f=1,g=2,`).
//! * **Floats must be finite.** That crate turns `1e400` into infinity;
//!   here it is [`ErrorKind::FloatOutOfRange`].
//! * **Floats may lack digits on one side of the point** (`.5`, `5.`,
//!   `1.e5`), as InfluxDB 1.6 takes them; that crate rejects them.
//! * **Unescaped commas in tag keys and field keys, and unescaped `=` in
//!   tag values past their first byte, are rejected**, as InfluxDB 1.6
//!   rejects them; that crate makes them part of the key or value.
//! * **`\=` and `\"` in measurements, and `\"` in field keys, are escapes**,
//!   as in InfluxDB 1.6; that crate keeps the backslash.
//! * **Timestamps `i64::MIN`, `i64::MIN + 1` and `i64::MAX` are rejected**,
//!   as InfluxDB 1.6 rejects them.

#![warn(missing_docs)]

mod error;
mod escape;
mod line;
mod parser;
mod precision;

pub use error::{ErrorKind, LineError};
pub use escape::{escape_measurement, escape_string_field, escape_tag, Escaped};
pub use line::{FieldValue, Line};
pub use parser::{count_line_feeds, parse, ParseOptions, Parsed, Parser};
pub use precision::{Precision, UnknownPrecision};

#[cfg(test)]
mod tests;
