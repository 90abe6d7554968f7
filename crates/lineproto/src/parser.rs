//! The parser: splitting a body into physical lines and parsing each line
//! in one forward pass.
//!
//! Owns [`Parser`], [`ParseOptions`], [`parse`] and [`Parsed`], and every
//! syntax decision. The input is validated as UTF-8 in large regions (the
//! whole rest of the input at once, unless it holds an invalid byte), so a
//! line needs no validation of its own. Each line is then scanned once,
//! byte by byte, with a lookup table of the bytes that end a token; the line
//! ending is discovered by the same scan, so there is no separate newline
//! pass (a rejected line's end is found by a second, cold scan:
//! [`logical_line_end`]). Tokens are handed out as borrowed slices and
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
    /// Start of the next physical line.
    pos: usize,
    line_number: usize,
    options: ParseOptions,
    last: Range<usize>,
    /// `input[region_start..region_start + region.len()]`, known to be UTF-8.
    region: &'a str,
    region_start: usize,
    /// Tag and field keys of the previous line, by position.
    guesses: Guesses<'a>,
    /// Whether the last line ran to the end of the input inside a string.
    open_string: bool,
}

/// The keys of the previous line, by position: lines of one kind repeat
/// their keys, and comparing against a guess is cheaper than scanning for
/// the end of a key. A guess is only used when the input matches it byte
/// for byte and is followed by `=`, and only keys without backslashes are
/// remembered, so guessing never changes a result.
#[derive(Debug, Clone, Default)]
struct Guesses<'a> {
    tag_keys: Vec<&'a str>,
    field_keys: Vec<&'a str>,
    /// How many fields the last line whose field set was parsed had.
    field_count: usize,
}

/// If the key at `i` is `guess` (followed by `=`), its end.
#[inline(always)]
fn guessed_key(b: &[u8], i: usize, guess: Option<&&str>) -> Option<usize> {
    let guess = guess?.as_bytes();
    let end = i + guess.len();
    if !guess.is_empty() && b.get(i..end) == Some(guess) && b.get(end) == Some(&b'=') {
        Some(end)
    } else {
        None
    }
}

/// Remembers `key` as the guess for position `n`; a key with a backslash
/// is remembered as the empty guess, which never matches.
#[inline(always)]
fn remember<'a>(guesses: &mut Vec<&'a str>, n: usize, key: &'a str, escaped: bool) {
    let key = if escaped { "" } else { key };
    match guesses.get_mut(n) {
        Some(slot) => *slot = key,
        None => guesses.push(key),
    }
}

impl<'a> Parser<'a> {
    /// A parser over `input`, which need not be UTF-8 as a whole: a line
    /// with invalid UTF-8 is rejected on its own.
    pub fn new(input: &'a [u8], options: ParseOptions) -> Self {
        Parser {
            input,
            pos: 0,
            line_number: 0,
            options,
            last: 0..0,
            region: "",
            region_start: 0,
            guesses: Guesses::default(),
            open_string: false,
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
            self.line_number += 1;

            // Indentation, blank lines and comments.
            let first = skip_whitespace(input, start);
            match input.get(first) {
                None => {
                    self.pos = first;
                    continue;
                }
                Some(b'\n') => {
                    self.pos = first + 1;
                    continue;
                }
                Some(b'\r') if matches!(input.get(first + 1), None | Some(b'\n')) => {
                    self.pos = (first + 2).min(input.len());
                    continue;
                }
                Some(b'#') => {
                    self.pos = line_end(input, start, first).1;
                    continue;
                }
                Some(_) => {}
            }

            // Make sure the line starts inside the validated region.
            let region_end = self.region_start + self.region.len();
            if first < self.region_start || first >= region_end {
                self.validate_from(first);
            }
            let region_start = self.region_start;
            let region_end = region_start + self.region.len();

            line.line_number = self.line_number;
            line.tags.clear();
            line.fields.clear();
            line.same_field_keys = false;
            // Parse within a window that ends at the end of the valid region
            // or just past the longest allowed line, whichever comes first
            // (and not before the line's first character: indentation alone
            // can be longer than the longest line).
            let mut limit = start
                .saturating_add(self.options.max_line_len)
                .saturating_add(2)
                .max(first)
                .min(region_end);
            // The window ends on a character boundary: a cut inside a
            // character (only ever in a line that is too long anyway) would
            // split the text there.
            while limit > region_start && !self.region.is_char_boundary(limit - region_start) {
                limit -= 1;
            }
            // Line feeds inside string values: physical lines this line
            // takes beyond its first.
            let mut line_feeds = 0;
            let result = if first < region_end {
                parse_line(
                    self.region,
                    limit - region_start,
                    first - region_start,
                    &self.options,
                    &mut self.guesses,
                    &mut line_feeds,
                    line,
                )
            } else {
                // The line starts with an invalid byte (the region is empty
                // and starts at `first`).
                Err(Fail::new(0, ErrorKind::InvalidUtf8))
            };

            // Where the line really ends, and what to report.
            self.open_string = false;
            let (content_end, next, fail) = match result {
                Ok(end) => {
                    let end = end + region_start;
                    match input.get(end) {
                        None => (end, end, None),
                        Some(b'\n') => (end, end + 1, None),
                        Some(b'\r') if input.get(end + 1).is_none() => (end, end + 1, None),
                        Some(b'\r') if input.get(end + 1) == Some(&b'\n') => (end, end + 2, None),
                        // The window cut the line: too long or invalid UTF-8.
                        _ => {
                            let (content_end, next, open) = logical_line_end(input, start);
                            self.open_string = open;
                            line_feeds = count_line_feeds(&input[start..content_end]);
                            (content_end, next, None)
                        }
                    }
                }
                Err(Fail { at, kind }) => {
                    let at = at + region_start;
                    let (content_end, next, open) = logical_line_end(input, start);
                    self.open_string = open;
                    line_feeds = count_line_feeds(&input[start..content_end]);
                    (content_end, next, Some((at, kind)))
                }
            };
            self.pos = next;
            self.last = start..content_end;
            let line_number = self.line_number;
            self.line_number += line_feeds;
            let error = |at: usize, kind: ErrorKind| LineError {
                line_number,
                column: at - start + 1,
                kind,
            };
            let limit = self.options.max_line_len;
            return Some(if content_end - start > limit {
                Err(error(start + limit, ErrorKind::LineTooLong { limit }))
            } else if content_end > region_end {
                // The region ends at the line's first invalid byte.
                Err(error(region_end, ErrorKind::InvalidUtf8))
            } else if let Some((at, kind)) = fail {
                Err(error(at, kind))
            } else {
                Ok(())
            });
        }
    }

    /// Validates as much of the input from `from` on as is valid UTF-8.
    #[inline(never)]
    fn validate_from(&mut self, from: usize) {
        let rest = &self.input[from..];
        self.region_start = from;
        self.region = match std::str::from_utf8(rest) {
            Ok(text) => text,
            Err(e) => std::str::from_utf8(&rest[..e.valid_up_to()]).unwrap_or_default(),
        };
    }

    /// Byte range in the input of the line last returned by
    /// [`next_into`](Self::next_into) or [`next`](Iterator::next), accepted
    /// or rejected, without its line ending. Empty before the first line.
    ///
    /// A new parser over just this range parses an accepted line to the
    /// same result (as line 1).
    pub fn last_line_range(&self) -> Range<usize> {
        self.last.clone()
    }

    /// Number of physical lines consumed so far (the last physical line of
    /// the line last returned, or of the last blank line or comment skipped
    /// after it).
    pub fn lines_consumed(&self) -> usize {
        self.line_number
    }

    /// Whether the line last returned ran to the end of the input inside a
    /// string value, looking for its closing quote (it was rejected).
    ///
    /// A parser over a piece of a body cut after a line feed sees this when
    /// the cut fell inside a string value, whose line feeds do not end the
    /// line: the piece does not end at a line's end, and its results differ
    /// from the whole body's.
    pub fn ended_in_string(&self) -> bool {
        self.open_string
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

/// End of the line that starts at `start`, searching for its `\n` from
/// `from`: the end of its content (a `\r` before the `\n`, or at the end of
/// the input, is not content) and the start of the next line.
#[cold]
fn line_end(input: &[u8], start: usize, from: usize) -> (usize, usize) {
    let (mut content_end, next) = match find_newline(&input[from..]) {
        Some(k) => (from + k, from + k + 1),
        None => (input.len(), input.len()),
    };
    if content_end > start && input[content_end - 1] == b'\r' {
        content_end -= 1;
    }
    (content_end, next)
}

/// End of the line that starts at `start`, found without parsing it (for
/// rejected lines, and lines cut by the parse window): the end of its
/// content, the start of the next line, and whether the line runs to the
/// end of the input inside a string value.
///
/// A line ends at the first line feed outside a string field value. In the
/// field set (after the first space that follows the measurement and tags
/// and is not escaped by a backslash), a `"` right after an unescaped `=`
/// opens a string value, which ends at the next `"` not escaped by a
/// backslash, or with the input: that is where InfluxDB ends the lines it
/// accepts, and for these rejected ones the same rule keeps the lines
/// after them where InfluxDB sees them. A backslash never escapes a line
/// feed outside a string (InfluxDB's would continue the line). The line
/// feed that ends the input ends the line, also inside a string.
#[cold]
fn logical_line_end(input: &[u8], start: usize) -> (usize, usize, bool) {
    #[derive(PartialEq)]
    enum Section {
        SeriesKey,
        FieldSet,
        Rest,
    }
    let mut section = Section::SeriesKey;
    let mut open_string = false;
    let mut i = skip_whitespace(input, start);
    let end = 'line: loop {
        match input.get(i) {
            None | Some(b'\n') => break i,
            Some(b'\\') => {
                i += if input.get(i + 1) == Some(&b'\n') {
                    1
                } else {
                    2
                }
            }
            Some(b' ') => {
                section = match section {
                    Section::SeriesKey => Section::FieldSet,
                    _ => Section::Rest,
                };
                i = skip_whitespace(input, i + 1);
            }
            Some(b'=') if section == Section::FieldSet && input.get(i + 1) == Some(&b'"') => {
                i += 2;
                loop {
                    match input.get(i) {
                        None => {
                            open_string = true;
                            break 'line input.len();
                        }
                        Some(b'"') => break,
                        Some(b'\\') => i += 2,
                        Some(_) => i += 1,
                    }
                }
                i += 1;
            }
            Some(_) => i += 1,
        }
    };
    let mut end = end.min(input.len());
    let next = if end < input.len() { end + 1 } else { end };
    if open_string && end > start && input[end - 1] == b'\n' {
        end -= 1;
    }
    let content_end = if end > start && input[end - 1] == b'\r' {
        end - 1
    } else {
        end
    };
    (content_end, next, open_string)
}

/// Number of line feeds in `text`: how many lines a string value spans,
/// or (with the last line) how many a body holds.
///
/// Counted per 255 bytes into a byte, which the compiler vectorizes; a
/// count into a `usize` is a scalar loop (a third of chingest's
/// `prepare_lp` when it counted a body's lines that way). Never inlined:
/// the parser calls it only for the rare value that spans lines.
#[inline(never)]
pub fn count_line_feeds(text: &[u8]) -> usize {
    text.chunks(255)
        .map(|chunk| {
            let feeds = chunk
                .iter()
                .fold(0u8, |n, &byte| n + u8::from(byte == b'\n'));
            usize::from(feeds)
        })
        .sum()
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// Offset of the first `\n` in `hay`, eight bytes at a time.
#[inline]
pub(crate) fn find_newline(hay: &[u8]) -> Option<usize> {
    let mut chunks = hay.chunks_exact(8);
    let mut base = 0;
    for chunk in &mut chunks {
        let word = u64::from_le_bytes(chunk.try_into().expect("chunk of 8"));
        let x = word ^ (LO * u64::from(b'\n'));
        // The lowest set bit marks the first zero byte of `x` exactly (bits
        // above it may be false positives).
        let found = x.wrapping_sub(LO) & !x & HI;
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

/// Why and where (byte offset in the parsed text) a line failed.
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
const NEWLINE: u8 = 32;
/// A carriage return ends a token only if it ends the line.
const CR: u8 = 64;
/// Bytes that end every unquoted token (line endings).
const EOL: u8 = NEWLINE | CR;

/// Bytes that end (or, for a backslash, interrupt) a measurement.
const MEASUREMENT_STOP: u8 = SPACE | COMMA | BACKSLASH | EOL;
/// Bytes that end a tag key, tag value or field key (an unescaped `=` or
/// `,` is an error where it does not end the token, as in InfluxDB).
const PAIR_STOP: u8 = SPACE | COMMA | EQUALS | BACKSLASH | EOL;
/// Bytes a string field value's scan stops at: its end, an escape, and line
/// feeds, which are content but counted (a `\r` in a string is content).
const STRING_STOP: u8 = QUOTE | BACKSLASH | NEWLINE;
/// Bytes that end an unquoted field value or a timestamp.
const VALUE_STOP: u8 = SPACE | COMMA | EOL;

static CLASS: [u8; 256] = {
    let mut table = [0u8; 256];
    table[b' ' as usize] = SPACE;
    table[b',' as usize] = COMMA;
    table[b'=' as usize] = EQUALS;
    table[b'\\' as usize] = BACKSLASH;
    table[b'"' as usize] = QUOTE;
    table[b'\n' as usize] = NEWLINE;
    table[b'\r' as usize] = CR;
    table
};

/// Whether the line ends at `i`: the end of the text, a `\n`, or a `\r`
/// before either.
#[inline(always)]
fn is_eol(b: &[u8], i: usize) -> bool {
    match b.get(i) {
        None | Some(b'\n') => true,
        Some(b'\r') => matches!(b.get(i + 1), None | Some(b'\n')),
        _ => false,
    }
}

/// Scans from `i` to the first byte in class `STOP` that is not protected by
/// a backslash (or to the end). Returns the stop offset and whether a
/// backslash was seen. `STOP` must include [`BACKSLASH`] and [`NEWLINE`].
///
/// A backslash protects the next byte unless that byte ends the line; a
/// `\r` that does not end the line is content.
#[inline(always)]
fn scan<const STOP: u8>(b: &[u8], mut i: usize) -> (usize, bool) {
    let mut escaped = false;
    loop {
        while let Some(&c) = b.get(i) {
            if CLASS[c as usize] & STOP != 0 {
                break;
            }
            i += 1;
        }
        match b.get(i) {
            Some(b'\\') => {
                escaped = true;
                i += if is_eol(b, i + 1) { 1 } else { 2 };
            }
            Some(b'\r') if !is_eol(b, i) => i += 1,
            _ => return (i, escaped),
        }
    }
}

/// End of the unquoted token (value or timestamp) starting at `i`.
#[inline]
fn token_end(b: &[u8], mut i: usize) -> usize {
    while let Some(&c) = b.get(i) {
        if CLASS[c as usize] & VALUE_STOP != 0 && (c != b'\r' || is_eol(b, i)) {
            break;
        }
        i += 1;
    }
    i
}

#[inline(always)]
fn skip_spaces(b: &[u8], mut i: usize) -> usize {
    while b.get(i) == Some(&b' ') {
        i += 1;
    }
    i
}

/// Skips what InfluxDB skips before a line and before its field set and
/// timestamp: spaces, tabs and NUL bytes.
#[inline(always)]
fn skip_whitespace(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\0')) {
        i += 1;
    }
    i
}

/// Scans a string field value's content from `i` (after the opening quote)
/// to its closing quote, across line feeds (counted into `line_feeds`).
/// Returns the closing quote's offset, if any, and whether a backslash was
/// seen. A backslash protects the byte after it.
#[inline(always)]
fn scan_string(b: &[u8], mut i: usize, line_feeds: &mut usize) -> (Option<usize>, bool) {
    let mut escaped = false;
    loop {
        while let Some(&c) = b.get(i) {
            if CLASS[c as usize] & STRING_STOP != 0 {
                break;
            }
            i += 1;
        }
        match b.get(i) {
            Some(b'"') => return (Some(i), escaped),
            Some(b'\\') => {
                escaped = true;
                if b.get(i + 1) == Some(&b'\n') {
                    *line_feeds += 1;
                }
                i += 2;
            }
            Some(_) => {
                *line_feeds += 1;
                i += 1;
            }
            None => return (None, escaped),
        }
    }
}

/// Whether a field value ending at `i` is properly delimited: by a comma,
/// a space or the end of the line.
#[inline(always)]
fn at_value_end(b: &[u8], i: usize) -> bool {
    matches!(b.get(i), Some(b',' | b' ')) || is_eol(b, i)
}

/// Result of a digit run: the value (if it fits in `u64`) and the offset
/// after the last digit.
struct Digits {
    value: Option<u64>,
    end: usize,
}

/// Reads the decimal digits starting at `start`.
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

/// Offset after the run of ASCII digits starting at `i`.
#[inline]
fn digits_only(b: &[u8], mut i: usize) -> usize {
    while matches!(b.get(i), Some(b'0'..=b'9')) {
        i += 1;
    }
    i
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

/// Builds the error for a bad unquoted value starting at `at`.
#[cold]
fn bad_value(text: &str, b: &[u8], at: usize, key: &str) -> Fail {
    bad_value_until(text, b, at, token_end(b, at), key)
}

/// Builds the error for the bad value `text[at..end]`.
#[cold]
fn bad_value_until(text: &str, b: &[u8], at: usize, end: usize, key: &str) -> Fail {
    let value = &text[at..end];
    let looks_integer =
        matches!(b[at], b'-' | b'.' | b'0'..=b'9') && matches!(b[end - 1], b'i' | b'u');
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

#[cold]
fn missing_tag_value(key: &str, at: usize) -> Fail {
    Fail::new(at, ErrorKind::MissingTagValue { key: excerpt(key) })
}

#[cold]
fn equals_in_tag_value(key: &str, at: usize) -> Fail {
    Fail::new(at, ErrorKind::EqualsInTagValue { key: excerpt(key) })
}

#[cold]
fn missing_field_value(key: &str, at: usize) -> Fail {
    Fail::new(at, ErrorKind::MissingFieldValue { key: excerpt(key) })
}

/// Parses the line whose measurement starts at `i` in `text`, looking no
/// further than `limit`, into `out` (whose vectors are empty), counting the
/// line feeds inside its string values into `line_feeds`. Returns the
/// offset where the line ends: at `limit`, a `\n`, or a `\r` before either.
#[inline]
fn parse_line<'a>(
    text: &'a str,
    limit: usize,
    mut i: usize,
    options: &ParseOptions,
    guesses: &mut Guesses<'a>,
    line_feeds: &mut usize,
    out: &mut Line<'a>,
) -> Result<usize, Fail> {
    let b = &text.as_bytes()[..limit];

    // Measurement. It is not empty unless it starts with a comma: the
    // caller skipped blank lines.
    let m_start = i;
    let (end, escaped) = scan::<MEASUREMENT_STOP>(b, i);
    if end == m_start {
        return Err(Fail::new(i, ErrorKind::MissingMeasurement));
    }
    let raw = &text[m_start..end];
    if b[end - 1] == b'\\' {
        return Err(trailing_backslash(raw, end - 1));
    }
    out.measurement = Escaped::new(raw, escaped, Rules::Name);
    i = end;

    // Tag set.
    if b.get(i) == Some(&b',') {
        loop {
            i += 1;
            let n = out.tags.len();
            let (end, escaped) = match guessed_key(b, i, guesses.tag_keys.get(n)) {
                Some(end) => (end, false),
                None => {
                    let (end, escaped) = scan::<PAIR_STOP>(b, i);
                    if end == i {
                        return Err(Fail::new(i, ErrorKind::EmptyTagKey));
                    }
                    if b[end - 1] == b'\\' {
                        return Err(trailing_backslash(&text[i..end], end - 1));
                    }
                    if b.get(end) != Some(&b'=') {
                        return Err(missing_tag_value(&text[i..end], end));
                    }
                    (end, escaped)
                }
            };
            let raw_key = &text[i..end];
            remember(&mut guesses.tag_keys, n, raw_key, escaped);
            let key = Escaped::new(raw_key, escaped, Rules::Tag);
            i = end + 1;
            // InfluxDB does not look for an `=` in a tag value's first byte
            // (`k==v` is the value `=v`), only after it.
            let from = if b.get(i) == Some(&b'=') { i + 1 } else { i };
            let (end, escaped) = scan::<PAIR_STOP>(b, from);
            if end == i {
                return Err(missing_tag_value(raw_key, end));
            }
            let raw_value = &text[i..end];
            if b[end - 1] == b'\\' {
                return Err(trailing_backslash(raw_value, end - 1));
            }
            if b.get(end) == Some(&b'=') {
                return Err(equals_in_tag_value(raw_key, end));
            }
            out.tags
                .push((key, Escaped::new(raw_value, escaped, Rules::Tag)));
            i = end;
            if b.get(i) != Some(&b',') {
                break;
            }
        }
    }
    out.series_key = &text[m_start..i];

    // Field set. Here `i` is at a space or the end of the line.
    i = skip_whitespace(b, i);
    if is_eol(b, i) {
        return Err(Fail::new(i, ErrorKind::MissingFields));
    }
    // Whether every key so far matched the previous field set's key at the
    // same position, byte for byte.
    let mut all_guessed = true;
    loop {
        let n = out.fields.len();
        let (end, escaped) = match guessed_key(b, i, guesses.field_keys.get(n)) {
            Some(end) => (end, false),
            None => {
                all_guessed = false;
                let (end, escaped) = scan::<PAIR_STOP>(b, i);
                if end == i {
                    return Err(Fail::new(i, ErrorKind::EmptyFieldKey));
                }
                if b[end - 1] == b'\\' {
                    return Err(trailing_backslash(&text[i..end], end - 1));
                }
                if b.get(end) != Some(&b'=') {
                    return Err(missing_field_value(&text[i..end], end));
                }
                (end, escaped)
            }
        };
        let raw_key = &text[i..end];
        remember(&mut guesses.field_keys, n, raw_key, escaped);
        let key = Escaped::new(raw_key, escaped, Rules::Name);
        i = end + 1;
        let value;
        (value, i) = parse_value(text, b, i, raw_key, line_feeds)?;
        out.fields.push((key, value));
        if b.get(i) == Some(&b',') {
            i += 1;
        } else {
            break;
        }
    }
    out.same_field_keys = all_guessed && out.fields.len() == guesses.field_count;
    guesses.field_count = out.fields.len();

    // Timestamp. Here `i` is at a space or the end of the line.
    i = skip_whitespace(b, i);
    if is_eol(b, i) {
        out.timestamp = options.default_time;
        out.timestamp_given = false;
        return Ok(i);
    }
    let t_start = i;
    let negative = b[i] == b'-';
    let digits_start = t_start + usize::from(negative);
    let d = digits(text, b, digits_start);
    if d.end == digits_start || !(b.get(d.end) == Some(&b' ') || is_eol(b, d.end)) {
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
        .and_then(|v| options.precision.to_nanos(v))
        .filter(|t| TIMESTAMP_RANGE.contains(t));
    let Some(timestamp) = timestamp else {
        return Err(Fail::new(
            t_start,
            ErrorKind::TimestampOutOfRange {
                value: excerpt(&text[t_start..d.end]),
            },
        ));
    };
    i = skip_spaces(b, d.end);
    if !is_eol(b, i) {
        return Err(trailing_garbage(text, b, i));
    }
    out.timestamp = timestamp;
    out.timestamp_given = true;
    Ok(i)
}

/// The timestamps InfluxDB accepts, in nanoseconds: `i64::MIN` and
/// `i64::MIN + 1` are its "no time" and "minimum time" markers, `i64::MAX`
/// its "maximum time" marker.
const TIMESTAMP_RANGE: std::ops::RangeInclusive<i64> = i64::MIN + 2..=i64::MAX - 1;

#[cold]
fn trailing_garbage(text: &str, b: &[u8], at: usize) -> Fail {
    let mut end = at;
    while !is_eol(b, end) {
        end += 1;
    }
    Fail::new(
        at,
        ErrorKind::TrailingGarbage {
            text: excerpt(&text[at..end]),
        },
    )
}

/// Parses the field value starting at `i`; returns it and the offset just
/// after it (at a comma, a space or the end of the line).
#[inline(always)]
fn parse_value<'a>(
    text: &'a str,
    b: &[u8],
    i: usize,
    key: &str,
    line_feeds: &mut usize,
) -> Result<(FieldValue<'a>, usize), Fail> {
    match b.get(i) {
        Some(b'0'..=b'9' | b'-' | b'.') => parse_number(text, b, i, key),
        Some(b'"') => {
            let (close, escaped) = scan_string(b, i + 1, line_feeds);
            let Some(end) = close else {
                return Err(Fail::new(
                    i,
                    ErrorKind::UnterminatedString { key: excerpt(key) },
                ));
            };
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
            if !at_value_end(b, end) {
                return Err(bad_value(text, b, i, key));
            }
            Ok((FieldValue::Boolean(value), end))
        }
        _ if at_value_end(b, i) => Err(missing_field_value(key, i)),
        _ => Err(bad_value(text, b, i, key)),
    }
}

/// Parses a float, integer or unsigned value starting at `start` (a digit,
/// `-` or `.`).
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
    let mut i = d.end;
    // Only a float may have no digits before its point (`.5`).
    if d.end == digits_start && b.get(i) != Some(&b'.') {
        return Err(bad_value(text, b, start, key));
    }
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
        Some(b'.' | b'e' | b'E') => {
            if b[i] == b'.' {
                // `1.`, `.5` and `1.5`, but not `.`
                let frac = digits_only(b, i + 1);
                if frac == i + 1 && d.end == digits_start {
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
        _ if at_value_end(b, i) => {
            // An integer-looking float: convert directly when it fits (the
            // conversion rounds to nearest, as parsing the text would).
            let value = match d.value {
                Some(v) if negative => -(v as f64),
                Some(v) => v as f64,
                None => parse_float(text, b, start, i, key)?,
            };
            Ok((FieldValue::Float(value), i))
        }
        _ => Err(bad_value(text, b, start, key)),
    }
}

/// Parses `text[start..end]`, already known to match the float grammar.
fn parse_float(text: &str, b: &[u8], start: usize, end: usize, key: &str) -> Result<f64, Fail> {
    match text[start..end].parse::<f64>() {
        Ok(v) if v.is_finite() => Ok(v),
        Ok(_) => Err(out_of_range(text, b, start, key, true)),
        Err(_) => Err(bad_value(text, b, start, key)),
    }
}
