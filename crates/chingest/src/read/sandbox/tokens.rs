//! A small SQL tokenizer: words, quoted names, string literals (with
//! ClickHouse's escapes) and punctuation, whitespace and comments left
//! out. Only enough to find `last_values(…)` calls in a statement's text,
//! which the sandbox then matches against the engine's own parse.

use std::ops::Range;

/// A single-quoted string literal at the start of `text`, with ClickHouse's
/// escapes (backslash sequences and a doubled quote): its value and the
/// bytes it spans. `None` if it is not closed or holds an escape this does
/// not know (such calls are then refused, never guessed).
pub(super) fn string_literal(text: &[u8]) -> Option<(String, usize)> {
    if text.first() != Some(&b'\'') {
        return None;
    }
    let mut value = Vec::new();
    let mut i = 1;
    while i < text.len() {
        match text[i] {
            b'\'' if text.get(i + 1) == Some(&b'\'') => {
                value.push(b'\'');
                i += 2;
            }
            b'\'' => return Some((String::from_utf8(value).ok()?, i + 1)),
            b'\\' => {
                let escaped = match *text.get(i + 1)? {
                    b'n' => b'\n',
                    b't' => b'\t',
                    b'r' => b'\r',
                    b'0' => 0,
                    b'b' => 8,
                    b'f' => 12,
                    c @ (b'\\' | b'\'' | b'"' | b'`' | b'?') => c,
                    _ => return None,
                };
                value.push(escaped);
                i += 2;
            }
            c => {
                value.push(c);
                i += 1;
            }
        }
    }
    None
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum Token {
    /// A bare word (name, keyword, number).
    Word(String),
    /// A name in backquotes or double quotes.
    Quoted(String),
    /// A string literal's value.
    String(String),
    Punct(u8),
    /// Something this tokenizer does not read (an unknown escape, a
    /// heredoc): only ever stops a match.
    Other,
}

pub(super) struct Spanned {
    pub(super) kind: Token,
    pub(super) span: Range<usize>,
}

/// The tokens of `sql`, without whitespace and comments (`--` and `#` to
/// the end of the line, nested `/* */`).
pub(super) fn tokens(sql: &[u8]) -> Vec<Spanned> {
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < sql.len() {
        let start = i;
        let c = sql[i];
        let kind = match c {
            c if c.is_ascii_whitespace() => {
                i += 1;
                continue;
            }
            b'-' if sql.get(i + 1) == Some(&b'-') => {
                i = line_end(sql, i);
                continue;
            }
            b'#' => {
                i = line_end(sql, i);
                continue;
            }
            b'/' if sql.get(i + 1) == Some(&b'*') => {
                let mut depth = 0;
                while i < sql.len() {
                    if sql[i..].starts_with(b"/*") {
                        depth += 1;
                        i += 2;
                    } else if sql[i..].starts_with(b"*/") {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
                continue;
            }
            b'\'' => match string_literal(&sql[i..]) {
                Some((value, len)) => {
                    i += len;
                    Token::String(value)
                }
                None => {
                    i = quoted_end(sql, i, b'\'');
                    Token::Other
                }
            },
            b'`' | b'"' => {
                i = quoted_end(sql, i, c);
                let inner = &sql[start + 1..i.saturating_sub(1).max(start + 1)];
                match inner.contains(&b'\\') || inner.windows(2).any(|w| w == [c, c]) {
                    true => Token::Other,
                    false => Token::Quoted(String::from_utf8_lossy(inner).into_owned()),
                }
            }
            c if c.is_ascii_alphanumeric() || c == b'_' || c >= 0x80 => {
                while i < sql.len()
                    && (sql[i].is_ascii_alphanumeric()
                        || sql[i] == b'_'
                        || sql[i] == b'$'
                        || sql[i] >= 0x80)
                {
                    i += 1;
                }
                Token::Word(String::from_utf8_lossy(&sql[start..i]).into_owned())
            }
            b'$' => {
                i += 1;
                Token::Other
            }
            c => {
                i += 1;
                Token::Punct(c)
            }
        };
        tokens.push(Spanned {
            kind,
            span: start..i,
        });
    }
    tokens
}

/// The index past the end of the line at `i`.
fn line_end(sql: &[u8], i: usize) -> usize {
    sql[i..]
        .iter()
        .position(|&c| c == b'\n')
        .map_or(sql.len(), |n| i + n + 1)
}

/// The index past the closing `quote` of the quoted text at `i` (backslash
/// escapes and doubled quotes skipped), or the end.
fn quoted_end(sql: &[u8], i: usize, quote: u8) -> usize {
    let mut j = i + 1;
    while j < sql.len() {
        match sql[j] {
            b'\\' => j += 2,
            c if c == quote && sql.get(j + 1) == Some(&quote) => j += 2,
            c if c == quote => return j + 1,
            _ => j += 1,
        }
    }
    sql.len()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_literals_unescape_as_the_engine_prints_them() {
        assert_eq!(string_literal(b"'a\\'b' x"), Some(("a'b".to_owned(), 6)));
        assert_eq!(string_literal(b"'a''b'"), Some(("a'b".to_owned(), 6)));
        assert_eq!(string_literal(b"'tab\\t'"), Some(("tab\t".to_owned(), 7)));
        assert_eq!(string_literal(b"'open"), None);
        assert_eq!(string_literal(b"'\\q'"), None);
    }
}
