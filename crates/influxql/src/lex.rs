//! InfluxQL's tokens: names bare or `"quoted"`, `'strings'`, `/regexes/`,
//! numbers and durations, operators and punctuation, each with where it
//! starts and ends in the text (so a clause can be handed on as the text it
//! is); and `$name` parameters bound before a query is parsed. Every
//! statement is split and parsed from these tokens; conditions, whose words
//! are laxer, are read by their own scanner (`condition`) with the quoting
//! and duration rules defined here.

use std::collections::HashMap;

use crate::error::Error;

/// One token.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Token {
    /// A bare name or keyword (keywords are compared case-insensitively).
    Ident(String),
    /// A `"quoted name"`, unescaped: never a keyword.
    Quoted(String),
    /// A `'string'`, unescaped.
    Str(String),
    /// A `/regex/` (only where a regex may stand: after `=~`, `!~`, `FROM`
    /// or a comma in a `FROM` list, `WITH KEY`, `GROUP BY`), its escapes
    /// but `\/` kept.
    Regex(String),
    /// An integer.
    Integer(i64),
    /// A number with a fraction or an exponent.
    Number(f64),
    /// A duration (`10m`, `1h30m`, `1700000000s`), in nanoseconds.
    Duration(i64),
    /// An operator or punctuation: `= != <> < <= > >= =~ !~ + - * / % & | ^ ( ) , ; . ::
    /// :` (`:` before `MEASUREMENT` in an `INTO` target).
    Punct(&'static str),
    /// A bound parameter, `$name` (see [`bind`]).
    Param(String),
}

impl Token {
    /// Whether this is the bare keyword `word`.
    pub(crate) fn is(&self, word: &str) -> bool {
        matches!(self, Token::Ident(w) if w.eq_ignore_ascii_case(word))
    }

    /// The token as the user wrote it, roughly: for error messages.
    pub(crate) fn describe(&self) -> String {
        match self {
            Token::Ident(w) => w.clone(),
            Token::Quoted(w) => format!("\"{w}\""),
            Token::Str(w) => format!("'{w}'"),
            Token::Regex(w) => format!("/{w}/"),
            Token::Integer(n) => n.to_string(),
            Token::Number(n) => n.to_string(),
            Token::Duration(ns) => format!("{ns}ns"),
            Token::Punct(p) => (*p).to_owned(),
            Token::Param(name) => format!("${name}"),
        }
    }
}

/// A token and the byte offsets where it starts and ends.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Spanned {
    pub(crate) token: Token,
    pub(crate) at: usize,
    pub(crate) end: usize,
}

const PUNCTUATION: [&str; 23] = [
    "::", ":", "!=", "<>", "=~", "!~", "<=", ">=", "=", "<", ">", "+", "-", "*", "/", "%", "&",
    "|", "^", "(", ")", ",", ";",
];

/// Splits `text` into tokens. Errors name the offset.
pub(crate) fn tokenize(text: &str) -> Result<Vec<Spanned>, String> {
    let mut tokens: Vec<Spanned> = Vec::new();
    let bytes = text.as_bytes();
    let mut at = 0;
    while at < bytes.len() {
        let c = text[at..].chars().next().unwrap_or(' ');
        if c.is_whitespace() {
            at += c.len_utf8();
            continue;
        }
        // `-- comment` to the end of the line.
        if text[at..].starts_with("--") {
            at = text[at..].find('\n').map_or(text.len(), |n| at + n);
            continue;
        }
        let start = at;
        let token = match c {
            '"' | '\'' => {
                let (body, len) = quoted(&text[at..], c, false)
                    .ok_or_else(|| format!("found unterminated {c}…{c} at char {at}"))?;
                at += len;
                if c == '"' {
                    Token::Quoted(body)
                } else {
                    Token::Str(body)
                }
            }
            '/' if regex_may_follow(&tokens) => {
                let (body, len) = quoted(&text[at..], '/', true)
                    .ok_or_else(|| format!("found unterminated regex at char {at}"))?;
                at += len;
                Token::Regex(body)
            }
            '0'..='9' => {
                let (token, len) = number(&text[at..])
                    .ok_or_else(|| format!("found invalid number at char {at}"))?;
                at += len;
                token
            }
            '.' if text[at + 1..].starts_with(|d: char| d.is_ascii_digit()) => {
                let (token, len) = number(&text[at..])
                    .ok_or_else(|| format!("found invalid number at char {at}"))?;
                at += len;
                token
            }
            '.' => {
                at += 1;
                Token::Punct(".")
            }
            '$' => {
                let len = text[at + 1..]
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(text.len() - at - 1);
                at += 1 + len;
                Token::Param(text[start + 1..at].to_owned())
            }
            c if c.is_alphabetic() || c == '_' => {
                let len = text[at..]
                    .find(|c: char| !(c.is_alphanumeric() || c == '_'))
                    .unwrap_or(text.len() - at);
                at += len;
                Token::Ident(text[start..at].to_owned())
            }
            _ => match PUNCTUATION.iter().find(|p| text[at..].starts_with(**p)) {
                Some(p) => {
                    at += p.len();
                    Token::Punct(p)
                }
                None => {
                    return Err(format!(
                        "found {c}, expected a name, value or operator at char {at}"
                    ))
                }
            },
        };
        tokens.push(Spanned {
            token,
            at: start,
            end: at,
        });
    }
    Ok(tokens)
}

/// A value for `$name` (a request's `params`).
#[derive(Debug, Clone, PartialEq)]
pub enum Param {
    /// A string: bound as a quoted `'string'`.
    String(String),
    /// A number or a boolean, bound as written.
    Literal(String),
    /// A value InfluxQL has no literal for (null, a list, an object), as
    /// written: binding it is an error.
    Unsupported(String),
}

/// `q` with each `$name` replaced by the InfluxQL text of `params`'
/// value of that name: a string becomes a quoted string, numbers and
/// booleans stay as they are. A name `params` lacks is an error.
pub fn bind(q: &str, params: &HashMap<String, Param>) -> Result<String, Error> {
    let mut bound = String::with_capacity(q.len());
    let mut copied = 0;
    for token in tokenize(q).map_err(Error::Parse)? {
        let Token::Param(name) = &token.token else {
            continue;
        };
        let literal = match params.get(name) {
            Some(Param::String(s)) => {
                format!("'{}'", s.replace('\\', "\\\\").replace('\'', "\\'"))
            }
            Some(Param::Literal(text)) => text.clone(),
            Some(Param::Unsupported(text)) => {
                return Err(Error::Parse(format!(
                    "unable to bind parameter {name}: {text}"
                )))
            }
            None => return Err(Error::Parse(format!("missing parameter: {name}"))),
        };
        bound.push_str(&q[copied..token.at]);
        bound.push_str(&literal);
        copied = token.at + 1 + name.len();
    }
    bound.push_str(&q[copied..]);
    Ok(bound)
}

/// A regex is possible after `=~`/`!~`, after `FROM`, `KEY` or `BY`, and
/// after a comma in a `FROM` or `GROUP BY` list; elsewhere `/` divides.
fn regex_may_follow(tokens: &[Spanned]) -> bool {
    let clause = || {
        tokens
            .iter()
            .rev()
            .find(|t| matches!(&t.token, Token::Ident(_)) && is_clause_keyword(&t.token))
    };
    match tokens.last().map(|t| &t.token) {
        Some(Token::Punct("=~" | "!~")) => true,
        Some(t) if t.is("FROM") || t.is("BY") || t.is("SELECT") => true,
        // In a SELECT's columns no division follows `(` or `,`: a regex
        // of fields (`SELECT /usage/`, `mean(/usage/)`) may.
        Some(Token::Punct(",")) => {
            clause().is_some_and(|t| t.token.is("FROM") || t.token.is("BY") || t.token.is("SELECT"))
        }
        Some(Token::Punct("(")) => clause().is_some_and(|t| t.token.is("SELECT")),
        _ => false,
    }
}

fn is_clause_keyword(token: &Token) -> bool {
    [
        "SELECT", "FROM", "WHERE", "BY", "ORDER", "LIMIT", "OFFSET", "SLIMIT", "SOFFSET",
    ]
    .iter()
    .any(|k| token.is(k))
}

/// The body of a token quoted by `quote` at the start of `text`, and the
/// token's length. A backslash escapes the next character; in a regex
/// only `\/` loses its backslash (the others mean something there).
pub(crate) fn quoted(text: &str, quote: char, regex: bool) -> Option<(String, usize)> {
    let mut body = String::new();
    let mut chars = text.char_indices().skip(1);
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                let (_, next) = chars.next()?;
                if regex && next != '/' {
                    body.push('\\');
                }
                body.push(next);
            }
            c if c == quote => return Some((body, i + 1)),
            c => body.push(c),
        }
    }
    None
}

/// An integer, a number or a duration at the start of `text`.
fn number(text: &str) -> Option<(Token, usize)> {
    let digits = |s: &str| s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let mut len = digits(text);
    let rest = &text[len..];
    // A duration: digits and units, repeated (`1h30m`).
    if rest.starts_with(|c: char| c.is_alphabetic()) && !rest.starts_with(['e', 'E']) {
        let len = text
            .find(|c: char| !(c.is_ascii_digit() || c.is_alphabetic()))
            .unwrap_or(text.len());
        return Some((Token::Duration(parse_duration(&text[..len]).ok()?), len));
    }
    let mut float = false;
    if text[len..].starts_with('.') {
        float = true;
        len += 1 + digits(&text[len + 1..]);
    }
    if text[len..].starts_with(['e', 'E']) {
        let sign = usize::from(text[len + 1..].starts_with(['+', '-']));
        let exponent = digits(&text[len + 1 + sign..]);
        if exponent > 0 {
            float = true;
            len += 1 + sign + exponent;
        }
    }
    let literal = &text[..len];
    if float {
        Some((Token::Number(literal.parse().ok()?), len))
    } else {
        match literal.parse() {
            Ok(n) => Some((Token::Integer(n), len)),
            Err(_) => Some((Token::Number(literal.parse().ok()?), len)),
        }
    }
}

/// An InfluxQL duration (`1h30m`, `7d`, `52w`, units `ns` to `w`), in ns.
pub(crate) fn parse_duration(text: &str) -> Result<i64, String> {
    let bad = || format!("invalid duration {text:?} (e.g. 1h30m, 7d, 52w)");
    if text.is_empty() {
        return Err(bad());
    }
    let mut total: i64 = 0;
    let mut rest = text;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let value: i64 = rest[..digits].parse().map_err(|_| bad())?;
        rest = &rest[digits..];
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit())
            .unwrap_or(rest.len());
        let unit = unit_nanos(&rest[..unit_len]).ok_or_else(bad)?;
        rest = &rest[unit_len..];
        total = value
            .checked_mul(unit)
            .and_then(|v| total.checked_add(v))
            .ok_or_else(bad)?;
    }
    Ok(total)
}

/// Nanoseconds in one InfluxQL duration unit (`ns`, `u`/`µ`/`us`, `ms`,
/// `s`, `m`, `h`, `d`, `w`).
fn unit_nanos(unit: &str) -> Option<i64> {
    Some(match unit {
        "ns" => 1,
        "u" | "µ" | "us" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60_000_000_000,
        "h" => 3_600_000_000_000,
        "d" => 86_400_000_000_000,
        "w" => 604_800_000_000_000,
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tokens(text: &str) -> Vec<Token> {
        tokenize(text)
            .unwrap()
            .into_iter()
            .map(|t| t.token)
            .collect()
    }

    #[test]
    fn names_strings_regexes_and_durations() {
        use Token::*;
        assert_eq!(
            tokens(r#"SELECT mean("a b") FROM /^c\/d/ WHERE h =~ /x\.y/ GROUP BY time(1h30m)"#)
                [..6],
            [
                Ident("SELECT".into()),
                Ident("mean".into()),
                Punct("("),
                Quoted("a b".into()),
                Punct(")"),
                Ident("FROM".into()),
            ]
        );
        let all = tokens(r#"FROM /^c\/d/ WHERE h =~ /x\.y/ GROUP BY time(1h30m) LIMIT 10"#);
        assert_eq!(all[1], Regex("^c/d".into()));
        assert_eq!(all[5], Regex(r"x\.y".into()));
        assert_eq!(all[10], Duration(5_400_000_000_000));
        assert_eq!(all[13], Integer(10));
        assert_eq!(tokens("a / 2")[1], Punct("/"));
        assert_eq!(tokens("SELECT /u/, mean(/v/) / 2")[1], Regex("u".into()));
        assert_eq!(tokens("SELECT /u/, mean(/v/) / 2")[5], Regex("v".into()));
        assert_eq!(tokens("SELECT /u/, mean(/v/) / 2")[7], Punct("/"));
        assert_eq!(
            tokens("1.5e3 .5 7")[..],
            [Number(1500.0), Number(0.5), Integer(7)]
        );
        assert_eq!(
            tokens("1700000000s")[0],
            Duration(1_700_000_000_000_000_000)
        );
        assert_eq!(tokens("x::field")[1], Punct("::"));
        assert_eq!(tokens(r"'a\'b'")[0], Str("a'b".into()));
    }

    #[test]
    fn parameters_bind_as_literals() {
        let params: HashMap<String, Param> = [
            ("h", Param::String("it's".into())),
            ("n", Param::Literal("5".into())),
            ("b", Param::Literal("true".into())),
            ("z", Param::Unsupported("null".into())),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v))
        .collect();
        assert_eq!(
            bind(
                "SELECT a FROM m WHERE h = $h AND n > $n AND ok = $b AND s = '$h'",
                &params
            )
            .unwrap(),
            r"SELECT a FROM m WHERE h = 'it\'s' AND n > 5 AND ok = true AND s = '$h'"
        );
        assert_eq!(
            bind("SELECT $x", &params).unwrap_err().to_string(),
            "error parsing query: missing parameter: x"
        );
        assert_eq!(
            bind("SELECT $z", &params).unwrap_err().to_string(),
            "error parsing query: unable to bind parameter z: null"
        );
    }

    #[test]
    fn bad_input_is_an_error_not_a_panic() {
        for bad in ["'open", "\"open", "FROM /open", "1x", "#", "é\u{0}"] {
            let _ = tokenize(bad);
        }
        assert!(tokenize("'open").is_err());
        assert!(tokenize("10x").is_err());
    }
}
