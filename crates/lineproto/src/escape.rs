//! Backslash escaping: the borrowed [`Escaped`] text the parser hands out,
//! its lazy unescaping, and the `escape_*` writers that produce canonical
//! line protocol.
//!
//! Both directions live here so that the escape rules of each kind of token
//! are written down exactly once. The parser only *finds* tokens; turning
//! raw text into logical text is deferred to [`Escaped::unescape`], which
//! borrows whenever nothing needs changing, so the hot path never copies.
//!
//! The escape rules are documented at the crate root.

use std::borrow::Cow;
use std::fmt;

/// Which escape rules apply to a piece of raw text (InfluxDB 1.6's, but for
/// `\\`, which InfluxDB 1.6 leaves as two backslashes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) enum Rules {
    /// Measurements and field keys: `\,` `\=` `\ ` `\"` `\\`.
    #[default]
    Name,
    /// Tag keys and tag values: `\,` `\=` `\ ` `\\`.
    Tag,
    /// String field values: `\"` `\\`.
    StringField,
}

impl Rules {
    #[inline]
    fn is_escapable(self, b: u8) -> bool {
        match self {
            Rules::Name => matches!(b, b',' | b'=' | b' ' | b'"' | b'\\'),
            Rules::Tag => matches!(b, b',' | b'=' | b' ' | b'\\'),
            Rules::StringField => matches!(b, b'"' | b'\\'),
        }
    }
}

/// A name or value as written on the line: the raw text (escapes intact)
/// plus whether it contains any backslash.
///
/// Equality ([`PartialEq`] with another `Escaped`, a `str` or a `&str`) and
/// [`Display`](fmt::Display) use the *unescaped* text; [`raw`](Self::raw)
/// gives the text exactly as written.
#[derive(Debug, Clone, Copy, Default)]
pub struct Escaped<'a> {
    raw: &'a str,
    escaped: bool,
    rules: Rules,
}

impl<'a> Escaped<'a> {
    #[inline]
    pub(crate) fn new(raw: &'a str, escaped: bool, rules: Rules) -> Self {
        Escaped {
            raw,
            escaped,
            rules,
        }
    }

    /// Text that holds no escapes, for lines built from typed values
    /// rather than parsed: its raw text is its logical text, backslashes
    /// included.
    #[inline]
    pub fn plain(text: &'a str) -> Self {
        Escaped::new(text, false, Rules::default())
    }

    /// The text exactly as written on the line, escapes intact.
    #[inline]
    pub fn raw(&self) -> &'a str {
        self.raw
    }

    /// Whether the raw text contains a backslash. When false, the raw text
    /// is the logical text and [`unescape`](Self::unescape) borrows it.
    #[inline]
    pub fn has_escapes(&self) -> bool {
        self.escaped
    }

    /// The logical text: escape sequences replaced by the character they
    /// stand for. Borrows the input unless an escape sequence actually
    /// changes the text.
    pub fn unescape(&self) -> Cow<'a, str> {
        if !self.escaped {
            return Cow::Borrowed(self.raw);
        }
        let bytes = self.raw.as_bytes();
        let mut out: Option<String> = None;
        let mut copied = 0;
        let mut i = 0;
        while i < bytes.len() {
            if bytes[i] == b'\\' {
                if i + 1 < bytes.len() && self.rules.is_escapable(bytes[i + 1]) {
                    // Drop the backslash, keep the escaped character.
                    let buf = out.get_or_insert_with(|| String::with_capacity(bytes.len()));
                    buf.push_str(&self.raw[copied..i]);
                    copied = i + 1;
                }
                // The escaped character is never itself the start of an
                // escape sequence, so skip it.
                i += 2;
            } else {
                i += 1;
            }
        }
        match out {
            None => Cow::Borrowed(self.raw),
            Some(mut buf) => {
                buf.push_str(&self.raw[copied..]);
                Cow::Owned(buf)
            }
        }
    }
}

impl PartialEq for Escaped<'_> {
    fn eq(&self, other: &Escaped<'_>) -> bool {
        if !self.escaped && !other.escaped {
            return self.raw == other.raw;
        }
        self.unescape() == other.unescape()
    }
}

impl Eq for Escaped<'_> {}

impl PartialEq<str> for Escaped<'_> {
    fn eq(&self, other: &str) -> bool {
        if !self.escaped {
            return self.raw == other;
        }
        self.unescape() == other
    }
}

impl PartialEq<&str> for Escaped<'_> {
    fn eq(&self, other: &&str) -> bool {
        *self == **other
    }
}

impl fmt::Display for Escaped<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.unescape())
    }
}

/// Appends `s` to `out` with a backslash before every byte for which
/// `needs_escape` is true.
#[inline]
fn escape_into(s: &str, out: &mut String, needs_escape: impl Fn(u8) -> bool) {
    let bytes = s.as_bytes();
    let mut copied = 0;
    for (i, &b) in bytes.iter().enumerate() {
        if needs_escape(b) {
            out.push_str(&s[copied..i]);
            out.push('\\');
            copied = i;
        }
    }
    out.push_str(&s[copied..]);
}

/// Appends `s` escaped as a measurement name: `,`, space and `\` get a
/// backslash.
///
/// Every logical name the parser can produce round-trips, but some names
/// cannot be written at all: the empty name, a name ending in a backslash,
/// a name starting with `#` (the line would be a comment) and a name
/// starting with a tab or NUL byte (leading whitespace is skipped).
pub fn escape_measurement(s: &str, out: &mut String) {
    escape_into(s, out, |b| matches!(b, b',' | b' ' | b'\\'));
}

/// Appends `s` escaped as a tag key, tag value or field key: `,`, `=`,
/// space and `\` get a backslash.
///
/// The empty name and names ending in a backslash cannot be written, nor
/// can the first field key of a line start with a tab or NUL byte (they
/// are skipped after the space before the field set).
pub fn escape_tag(s: &str, out: &mut String) {
    escape_into(s, out, |b| matches!(b, b',' | b'=' | b' ' | b'\\'));
}

/// Appends `s` escaped as the content of a string field value (what goes
/// between the double quotes): `"` and `\` get a backslash. Any string
/// without a line feed can be written.
pub fn escape_string_field(s: &str, out: &mut String) {
    escape_into(s, out, |b| matches!(b, b'"' | b'\\'));
}
