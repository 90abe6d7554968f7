//! The parser: splitting a body into physical lines and parsing each line
//! in one forward pass.
//!
//! Owns [`Parser`], [`ParseOptions`], [`parse`] and [`Parsed`], and every
//! syntax decision. Lines are found with a word-at-a-time newline search,
//! validated as UTF-8 once, then scanned byte by byte with a lookup table of
//! the bytes that end a token. Tokens are handed out as borrowed slices;
//! numbers are converted on the fly. Nothing is allocated per line unless
//! the line is rejected.
//!
//! The syntax accepted is documented at the crate root.

use std::ops::Range;

use crate::error::{excerpt, ErrorKind, LineError};
use crate::escape::{Escaped, Rules};
use crate::line::{FieldValue, Line};
use crate::precision::Precision;

/// Options for a parse.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ParseOptions {
    /// Unit of the timestamps in the body.
    pub precision: Precision,
    /// Timestamp (nanoseconds since the epoch) of lines that have none.
    pub default_time: i64,
    /// Longest accepted line in bytes, not counting its line ending. Longer
    /// lines are rejected with [`ErrorKind::LineTooLong`] and the rest of
    /// the input keeps parsing.
    pub max_line_len: usize,
}

impl Default for ParseOptions {
    /// Nanosecond precision, default time 0, no line length limit.
    fn default() -> Self {
        ParseOptions {
            precision: Precision::Nanoseconds,
            default_time: 0,
            max_line_len: usize::MAX,
        }
    }
}

/// Everything a parse of a whole body produced.
#[derive(Debug, Clone, Default)]
pub struct Parsed<'a> {
    /// Every accepted line, in input order.
    pub lines: Vec<Line<'a>>,
    /// Every rejected line, in input order.
    pub errors: Vec<LineError>,
}

/// Parses a whole body: every accepted line and every rejected line.
///
/// Allocates per line; use [`Parser::next_into`] on hot paths.
pub fn parse(input: &[u8], options: ParseOptions) -> Parsed<'_> {
    let mut parsed = Parsed::default();
    for result in Parser::new(input, options) {
        match result {
            Ok(line) => parsed.lines.push(line),
            Err(error) => parsed.errors.push(error),
        }
    }
    parsed
}

/// A streaming parser over one body.
///
/// Each call to [`next_into`](Self::next_into) parses the next line that is
/// not blank or a comment. A rejected line never stops the parse: the next
/// call continues with the following line.
#[derive(Debug, Clone)]
pub struct Parser<'a> {
    input: &'a [u8],
    pos: usize,
    line_number: usize,
    options: ParseOptions,
    last: Range<usize>,
}

impl<'a> Parser<'a> {
    /// A parser over `input`, which need not be UTF-8 as a whole: each line
    /// is validated on its own.
    pub fn new(input: &'a [u8], options: ParseOptions) -> Self {
        Parser {
            input,
            pos: 0,
            line_number: 0,
            options,
            last: 0..0,
        }
    }

    /// Parses the next line that is not blank or a comment into `line`,
    /// reusing its vectors (they are cleared first). Returns `None` at the
    /// end of the input.
    ///
    /// After an error, `line` holds an unspecified partial result.
    pub fn next_into(&mut self, line: &mut Line<'a>) -> Option<Result<(), LineError>> {
        let input = self.input;
        loop {
            let start = self.pos;
            if start >= input.len() {
                return None;
            }
            let (end, next) = match find_newline(&input[start..]) {
                Some(k) => (start + k, start + k + 1),
                None => (input.len(), input.len()),
            };
            self.pos = next;
            self.line_number += 1;
            let content_end = if end > start && input[end - 1] == b'\r' {
                end - 1
            } else {
                end
            };
            let bytes = &input[start..content_end];
            let Some(indent) = bytes.iter().position(|&b| b != b' ' && b != b'\t') else {
                continue; // blank
            };
            if bytes[indent] == b'#' {
                continue; // comment
            }
            self.last = start..content_end;
            let line_number = self.line_number;
            let fail = |offset: usize, kind: ErrorKind| {
                Some(Err(LineError {
                    line_number,
                    column: offset + 1,
                    kind,
                }))
            };
            if bytes.len() > self.options.max_line_len {
                let limit = self.options.max_line_len;
                return fail(limit, ErrorKind::LineTooLong { limit });
            }
            let text = match std::str::from_utf8(bytes) {
                Ok(text) => text,
                Err(e) => return fail(e.valid_up_to(), ErrorKind::InvalidUtf8),
            };
            line.line_number = line_number;
            line.tags.clear();
            line.fields.clear();
            return match parse_line(text, indent, &self.options, line) {
                Ok(()) => Some(Ok(())),
                Err(Fail { at, kind }) => fail(at, kind),
            };
        }
    }

    /// Byte range in the input of the line last returned by
    /// [`next_into`](Self::next_into) or [`next`](Iterator::next), accepted
    /// or rejected, without its line ending. Empty before the first line.
    pub fn last_line_range(&self) -> Range<usize> {
        self.last.clone()
    }

    /// Number of physical lines consumed so far (the line number of the line
    /// last returned, or of the last blank line or comment skipped after it).
    pub fn lines_consumed(&self) -> usize {
        self.line_number
    }
}

impl<'a> Iterator for Parser<'a> {
    type Item = Result<Line<'a>, LineError>;

    /// Convenience over [`Parser::next_into`]; allocates a new [`Line`] for
    /// every line.
    fn next(&mut self) -> Option<Self::Item> {
        let mut line = Line::default();
        self.next_into(&mut line).map(|r| r.map(|()| line))
    }
}

/// Offset of the first `\n` in `hay`, eight bytes at a time.
#[inline]
pub(crate) fn find_newline(hay: &[u8]) -> Option<usize> {
    let mut chunks = hay.chunks_exact(8);
    let mut base = 0;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("chunk of 8"));
        let found = bytes_equal(word, b'\n');
        if found != 0 {
            return Some(base + (found.trailing_zeros() / 8) as usize);
        }
        base += 8;
    }
    chunks
        .remainder()
        .iter()
        .position(|&b| b == b'\n')
        .map(|k| base + k)
}

/// Why and where (byte offset in the line) a line failed.
struct Fail {
    at: usize,
    kind: ErrorKind,
}

impl Fail {
    #[cold]
    fn new(at: usize, kind: ErrorKind) -> Self {
        Fail { at, kind }
    }
}

// Byte classes: which bytes end which tokens.
const SPACE: u8 = 1;
const COMMA: u8 = 2;
const EQUALS: u8 = 4;
const BACKSLASH: u8 = 8;
const QUOTE: u8 = 16;

/// Bytes that end (or, for a backslash, interrupt) a measurement.
const MEASUREMENT_STOP: u8 = SPACE | COMMA | BACKSLASH;
/// Bytes that end a tag key or field key.
const KEY_STOP: u8 = SPACE | EQUALS | BACKSLASH;
/// Bytes that end a tag value.
const TAG_VALUE_STOP: u8 = SPACE | COMMA | BACKSLASH;
/// Bytes that end a string field value.
const STRING_STOP: u8 = QUOTE | BACKSLASH;
/// Bytes that end an unquoted field value or a timestamp.
const VALUE_STOP: u8 = SPACE | COMMA;

static CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    table[b' ' as usize] = SPACE;
    table[b',' as usize] = COMMA;
    table[b'=' as usize] = EQUALS;
    table[b'\\' as usize] = BACKSLASH;
    table[b'"' as usize] = QUOTE;
    table
};

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// High bit set in each byte of `word` equal to `byte`. The lowest set bit
/// is exact; bits above it may be false positives, so only the first match
/// (lowest address, as words are loaded little-endian) may be used.
#[inline(always)]
fn bytes_equal(word: u64, byte: u8) -> u64 {
    let x = word ^ (LO * byte as u64);
    x.wrapping_sub(LO) & !x & HI
}

/// Marks the bytes of `word` in class `STOP` (see [`bytes_equal`]).
#[inline(always)]
fn stop_mask<const STOP: u8>(word: u64) -> u64 {
    let mut mask = 0;
    if STOP & SPACE != 0 {
        mask |= bytes_equal(word, b' ');
    }
    if STOP & COMMA != 0 {
        mask |= bytes_equal(word, b',');
    }
    if STOP & EQUALS != 0 {
        mask |= bytes_equal(word, b'=');
    }
    if STOP & BACKSLASH != 0 {
        mask |= bytes_equal(word, b'\\');
    }
    if STOP & QUOTE != 0 {
        mask |= bytes_equal(word, b'"');
    }
    mask
}

/// Offset of the first byte in class `STOP` at or after `i`, or `b.len()`.
/// Eight bytes at a time while eight remain.
#[inline(always)]
fn find_stop<const STOP: u8>(b: &[u8], mut i: usize) -> usize {
    while let Some(chunk) = b.get(i..i + 8) {
        let word = u64::from_le_bytes(chunk.try_into().expect("chunk of 8"));
        let mask = stop_mask::<STOP>(word);
        if mask != 0 {
            return i + (mask.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    while let Some(&c) = b.get(i) {
        if CLASS[c as usize] & STOP != 0 {
            break;
        }
        i += 1;
    }
    i
}

/// Scans from `i` to the first byte in class `STOP` that is not protected by
/// a backslash (or to the end). Returns the stop offset and whether a
/// backslash was seen. `STOP` must include [`BACKSLASH`].
#[inline(always)]
fn scan<const STOP: u8>(b: &[u8], mut i: usize) -> (usize, bool) {
    let mut escaped = false;
    loop {
        let stop = find_stop::<STOP>(b, i);
        if b.get(stop) == Some(&b'\\') {
            escaped = true;
            i = (stop + 2).min(b.len());
        } else {
            return (stop, escaped);
        }
    }
}

/// End of the unquoted token (value or timestamp) starting at `i`.
#[inline]
fn token_end(b: &[u8], mut i: usize) -> usize {
    while let Some(&c) = b.get(i) {
        if CLASS[c as usize] & VALUE_STOP != 0 {
            break;
        }
        i += 1;
    }
    i
}

#[inline]
fn skip_spaces(b: &[u8], mut i: usize) -> usize {
    while b.get(i) == Some(&b' ') {
        i += 1;
    }
    i
}

/// Whether a value ending at `i` is properly delimited.
#[inline]
fn at_value_end(b: &[u8], i: usize) -> bool {
    matches!(b.get(i), None | Some(b',') | Some(b' '))
}

/// Result of a digit run: the value (if it fits in `u64`) and the offset
/// after the last digit.
struct Digits {
    value: Option<u64>,
    end: usize,
}

/// Reads the decimal digits starting at `i`.
#[inline(always)]
fn digits(text: &str, b: &[u8], start: usize) -> Digits {
    let mut i = start;
    let mut value: u64 = 0;
    while let Some(&c) = b.get(i) {
        let d = c.wrapping_sub(b'0');
        if d > 9 {
            break;
        }
        // Up to 19 digits always fit in a u64; longer runs are rechecked.
        value = value.wrapping_mul(10).wrapping_add(u64::from(d));
        i += 1;
    }
    let value = if i - start > 19 {
        text[start..i].parse::<u64>().ok()
    } else {
        Some(value)
    };
    Digits { value, end: i }
}

/// Builds the error for a bad unquoted value starting at `at`.
#[cold]
fn bad_value(text: &str, b: &[u8], at: usize, key: &str) -> Fail {
    bad_value_until(text, b, at, token_end(b, at), key)
}

/// Builds the error for the bad value `text[at..end]`.
#[cold]
fn bad_value_until(text: &str, b: &[u8], at: usize, end: usize, key: &str) -> Fail {
    let value = &text[at..end];
    let looks_integer = matches!(b[at], b'-' | b'0'..=b'9') && matches!(b[end - 1], b'i' | b'u');
    let (key, value) = (excerpt(key), excerpt(value));
    let kind = if looks_integer {
        ErrorKind::InvalidInteger { key, value }
    } else {
        ErrorKind::InvalidFieldValue { key, value }
    };
    Fail::new(at, kind)
}

#[cold]
fn out_of_range(text: &str, b: &[u8], at: usize, key: &str, float: bool) -> Fail {
    let key = excerpt(key);
    let value = excerpt(&text[at..token_end(b, at)]);
    let kind = if float {
        ErrorKind::FloatOutOfRange { key, value }
    } else {
        ErrorKind::IntegerOutOfRange { key, value }
    };
    Fail::new(at, kind)
}

#[cold]
fn trailing_backslash(name: &str, at: usize) -> Fail {
    Fail::new(
        at,
        ErrorKind::TrailingBackslash {
            name: excerpt(name),
        },
    )
}

/// Parses one line (`text`, without its line ending; the measurement starts
/// at `i`) into `out`, whose vectors are empty.
#[inline]
fn parse_line<'a>(
    text: &'a str,
    mut i: usize,
    options: &ParseOptions,
    out: &mut Line<'a>,
) -> Result<(), Fail> {
    let b = text.as_bytes();
    let n = b.len();

    // Measurement.
    let m_start = i;
    let (end, escaped) = scan::<MEASUREMENT_STOP>(b, i);
    if end == m_start {
        return Err(Fail::new(i, ErrorKind::MissingMeasurement));
    }
    let raw = &text[m_start..end];
    if b[end - 1] == b'\\' {
        return Err(trailing_backslash(raw, end - 1));
    }
    out.measurement = Escaped::new(raw, escaped, Rules::Measurement);
    i = end;

    // Tag set.
    if b.get(i) == Some(&b',') {
        loop {
            i += 1;
            let (end, escaped) = scan::<KEY_STOP>(b, i);
            if end == i {
                return Err(Fail::new(i, ErrorKind::EmptyTagKey));
            }
            let raw_key = &text[i..end];
            if b[end - 1] == b'\\' {
                return Err(trailing_backslash(raw_key, end - 1));
            }
            if b.get(end) != Some(&b'=') {
                return Err(missing_tag_value(raw_key, end));
            }
            let key = Escaped::new(raw_key, escaped, Rules::Name);
            i = end + 1;
            let (end, escaped) = scan::<TAG_VALUE_STOP>(b, i);
            if end == i {
                return Err(missing_tag_value(raw_key, end));
            }
            let raw_value = &text[i..end];
            if b[end - 1] == b'\\' {
                return Err(trailing_backslash(raw_value, end - 1));
            }
            out.tags
                .push((key, Escaped::new(raw_value, escaped, Rules::Name)));
            i = end;
            if b.get(i) != Some(&b',') {
                break;
            }
        }
    }
    out.series_key = &text[m_start..i];

    // Field set. Here `i` is at the end or at a space.
    i = skip_spaces(b, i);
    if i >= n {
        return Err(Fail::new(i, ErrorKind::MissingFields));
    }
    loop {
        let (end, escaped) = scan::<KEY_STOP>(b, i);
        if end == i {
            return Err(Fail::new(i, ErrorKind::EmptyFieldKey));
        }
        let raw_key = &text[i..end];
        if b[end - 1] == b'\\' {
            return Err(trailing_backslash(raw_key, end - 1));
        }
        if b.get(end) != Some(&b'=') {
            return Err(missing_field_value(raw_key, end));
        }
        let key = Escaped::new(raw_key, escaped, Rules::Name);
        i = end + 1;
        let value;
        (value, i) = parse_value(text, b, i, raw_key)?;
        out.fields.push((key, value));
        match b.get(i) {
            Some(b',') => i += 1,
            _ => break,
        }
    }

    // Timestamp. Here `i` is at the end or at a space.
    i = skip_spaces(b, i);
    if i >= n {
        out.timestamp = options.default_time;
        out.timestamp_given = false;
        return Ok(());
    }
    let t_start = i;
    let negative = b[i] == b'-';
    let d = digits(text, b, t_start + usize::from(negative));
    let digits_start = t_start + usize::from(negative);
    if d.end == digits_start || !matches!(b.get(d.end), None | Some(b' ')) {
        let end = token_end(b, t_start);
        return Err(Fail::new(
            t_start,
            ErrorKind::InvalidTimestamp {
                value: excerpt(&text[t_start..end]),
            },
        ));
    }
    let timestamp = d
        .value
        .and_then(|v| signed(v, negative))
        .and_then(|v| options.precision.to_nanos(v));
    let Some(timestamp) = timestamp else {
        return Err(Fail::new(
            t_start,
            ErrorKind::TimestampOutOfRange {
                value: excerpt(&text[t_start..d.end]),
            },
        ));
    };
    i = skip_spaces(b, d.end);
    if i < n {
        return Err(Fail::new(
            i,
            ErrorKind::TrailingGarbage {
                text: excerpt(&text[i..]),
            },
        ));
    }
    out.timestamp = timestamp;
    out.timestamp_given = true;
    Ok(())
}

#[cold]
fn missing_tag_value(key: &str, at: usize) -> Fail {
    Fail::new(at, ErrorKind::MissingTagValue { key: excerpt(key) })
}

#[cold]
fn missing_field_value(key: &str, at: usize) -> Fail {
    Fail::new(at, ErrorKind::MissingFieldValue { key: excerpt(key) })
}

/// `magnitude` with the sign applied, if it fits in an `i64`.
#[inline]
fn signed(magnitude: u64, negative: bool) -> Option<i64> {
    if negative {
        if magnitude <= 1u64 << 63 {
            Some((magnitude as i64).wrapping_neg())
        } else {
            None
        }
    } else {
        i64::try_from(magnitude).ok()
    }
}

/// Parses the field value starting at `i`; returns it and the offset just
/// after it (at the end, a comma or a space).
#[inline(always)]
fn parse_value<'a>(
    text: &'a str,
    b: &[u8],
    i: usize,
    key: &str,
) -> Result<(FieldValue<'a>, usize), Fail> {
    match b.get(i) {
        None | Some(b',') | Some(b' ') => Err(missing_field_value(key, i)),
        Some(b'0'..=b'9') | Some(b'-') => parse_number(text, b, i, key),
        Some(b'"') => {
            let (end, escaped) = scan::<STRING_STOP>(b, i + 1);
            if end >= b.len() {
                return Err(Fail::new(
                    i,
                    ErrorKind::UnterminatedString { key: excerpt(key) },
                ));
            }
            if !at_value_end(b, end + 1) {
                return Err(bad_value_until(text, b, i, token_end(b, end + 1), key));
            }
            let raw = &text[i + 1..end];
            Ok((
                FieldValue::String(Escaped::new(raw, escaped, Rules::StringField)),
                end + 1,
            ))
        }
        Some(b't' | b'T' | b'f' | b'F') => {
            let end = token_end(b, i);
            let value = match &b[i..end] {
                b"t" | b"T" | b"true" | b"True" | b"TRUE" => true,
                b"f" | b"F" | b"false" | b"False" | b"FALSE" => false,
                _ => return Err(bad_value(text, b, i, key)),
            };
            Ok((FieldValue::Boolean(value), end))
        }
        Some(_) => Err(bad_value(text, b, i, key)),
    }
}

/// Parses a float, integer or unsigned value starting at `start` (a digit
/// or `-`).
#[inline(always)]
fn parse_number<'a>(
    text: &'a str,
    b: &[u8],
    start: usize,
    key: &str,
) -> Result<(FieldValue<'a>, usize), Fail> {
    let negative = b[start] == b'-';
    let digits_start = start + usize::from(negative);
    let d = digits(text, b, digits_start);
    if d.end == digits_start {
        return Err(bad_value(text, b, start, key));
    }
    let mut i = d.end;
    match b.get(i) {
        Some(b'i') => {
            i += 1;
            if !at_value_end(b, i) {
                return Err(bad_value(text, b, start, key));
            }
            match d.value.and_then(|v| signed(v, negative)) {
                Some(v) => Ok((FieldValue::Integer(v), i)),
                None => Err(out_of_range(text, b, start, key, false)),
            }
        }
        Some(b'u') => {
            i += 1;
            if negative || !at_value_end(b, i) {
                return Err(bad_value(text, b, start, key));
            }
            match d.value {
                Some(v) => Ok((FieldValue::UInteger(v), i)),
                None => Err(out_of_range(text, b, start, key, false)),
            }
        }
        None | Some(b',') | Some(b' ') => {
            // An integer-looking float: convert directly when it fits (the
            // conversion rounds to nearest, as parsing the text would).
            let value = match d.value {
                Some(v) if negative => -(v as f64),
                Some(v) => v as f64,
                None => parse_float(text, b, start, i, key)?,
            };
            Ok((FieldValue::Float(value), i))
        }
        Some(b'.' | b'e' | b'E') => {
            if b[i] == b'.' {
                let frac = digits_only(b, i + 1);
                if frac == i + 1 {
                    return Err(bad_value(text, b, start, key));
                }
                i = frac;
            }
            if matches!(b.get(i), Some(b'e' | b'E')) {
                i += 1;
                if matches!(b.get(i), Some(b'+' | b'-')) {
                    i += 1;
                }
                let exp = digits_only(b, i);
                if exp == i {
                    return Err(bad_value(text, b, start, key));
                }
                i = exp;
            }
            if !at_value_end(b, i) {
                return Err(bad_value(text, b, start, key));
            }
            Ok((FieldValue::Float(parse_float(text, b, start, i, key)?), i))
        }
        Some(_) => Err(bad_value(text, b, start, key)),
    }
}

/// Offset after the run of ASCII digits starting at `i`.
#[inline]
fn digits_only(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b'0'..=b'9')) {
        i += 1;
    }
    i
}

/// Parses `text[start..end]`, already known to match the float grammar.
fn parse_float(text: &str, b: &[u8], start: usize, end: usize, key: &str) -> Result<f64, Fail> {
    match text[start..end].parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err(out_of_range(text, b, start, key, true)),
        Err(_) => Err(bad_value(text, b, start, key)),
    }
}
