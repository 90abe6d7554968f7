//! Conditions on series and time, as two APIs write them, parsed into the
//! library's [`PointFilter`] parts (InfluxQL's `WHERE` and `DELETE`, and
//! the front end's InfluxDB 2 delete endpoint):
//!
//! - InfluxQL `WHERE` clauses: `host = 'a' AND (dc =~ /^eu/ OR rack != '')
//!   AND time >= '2026-01-01T00:00:00Z' AND time < now() - 1h` (strings in
//!   single quotes, names bare or in double quotes);
//! - InfluxDB 2 delete predicates: `_measurement="cpu" AND host="a"`
//!   (values in double quotes, `AND` only, `=` and `!=`).
//!
//! Time conditions must be joined to the rest by `AND` at the top level;
//! they narrow the time range, which is `[start, stop)` in nanoseconds.

use chingest::{PointFilter, TagPredicate};

use crate::lex::{parse_duration, quoted};

/// Which syntax a condition is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Dialect {
    /// InfluxQL's `WHERE`.
    InfluxQl,
    /// InfluxDB 2's delete predicate.
    DeletePredicate,
}

/// A token of a condition.
#[derive(Debug, Clone, PartialEq)]
enum Token {
    /// A bare word: a name, `AND`, `OR`, a number with its unit, `now()`.
    Word(String),
    /// `"…"`.
    DoubleQuoted(String),
    /// `'…'`.
    SingleQuoted(String),
    /// `/…/`.
    Regex(String),
    /// `=`, `!=`, `<>`, `=~`, `!~`, `<`, `<=`, `>`, `>=`, `+`, `-`.
    Operator(&'static str),
    Open,
    Close,
}

const OPERATORS: [&str; 11] = ["!=", "<>", "=~", "!~", "<=", ">=", "=", "<", ">", "+", "-"];

fn tokenize(text: &str) -> Result<Vec<Token>, String> {
    let mut tokens = Vec::new();
    let mut rest = text.trim_start();
    while let Some(c) = rest.chars().next() {
        let (token, len) = match c {
            '(' => (Token::Open, 1),
            ')' => (Token::Close, 1),
            '"' | '\'' | '/' => {
                let (body, len) = quoted(rest, c, c == '/')
                    .ok_or_else(|| format!("unterminated {c}…{c} in the condition"))?;
                let token = match c {
                    '"' => Token::DoubleQuoted(body),
                    '\'' => Token::SingleQuoted(body),
                    _ => Token::Regex(body),
                };
                (token, len)
            }
            _ => match OPERATORS.iter().find(|op| rest.starts_with(**op)) {
                // A sign directly before a digit belongs to the number.
                Some(&op)
                    if !(op == "-"
                        && rest[1..].starts_with(|d: char| d.is_ascii_digit())
                        && !matches!(tokens.last(), Some(Token::Word(_) | Token::Close))) =>
                {
                    (Token::Operator(op), op.len())
                }
                _ => {
                    let len = rest
                        .char_indices()
                        .skip(1)
                        .find(|&(_, c)| c.is_whitespace() || "()\"'=!<>~+".contains(c))
                        .map_or(rest.len(), |(i, _)| i);
                    let mut word = &rest[..len];
                    // `now()` is one word.
                    let mut len = len;
                    if word.eq_ignore_ascii_case("now") && rest[len..].starts_with("()") {
                        len += 2;
                        word = &rest[..len];
                    }
                    (Token::Word(word.to_owned()), len)
                }
            },
        };
        tokens.push(token);
        rest = rest[len..].trim_start();
    }
    Ok(tokens)
}

/// A parsed condition.
#[derive(Debug, Clone, PartialEq)]
enum Expr {
    And(Vec<Expr>),
    Or(Vec<Expr>),
    Compare {
        name: String,
        op: &'static str,
        value: Value,
    },
}

#[derive(Debug, Clone, PartialEq)]
enum Value {
    String(String),
    Regex(String),
    /// A time, in ns since the epoch.
    Time(i64),
    /// A number or a boolean: the field comparisons of InfluxQL.
    Literal(FieldLiteral),
}

/// What a field is compared with.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum FieldLiteral {
    Number(f64),
    Boolean(bool),
}

/// `field <op> literal`, an InfluxQL condition on points.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FieldCondition {
    pub(crate) field: String,
    /// `=`, `!=`, `<`, `<=`, `>`, `>=`.
    pub(crate) op: &'static str,
    pub(crate) value: FieldLiteral,
}

/// Deepest nesting of parentheses a condition may have: the parser
/// recurses once per level, and a request must not exhaust its stack.
const MAX_DEPTH: usize = 64;

struct Parser<'a> {
    tokens: &'a [Token],
    at: usize,
    dialect: Dialect,
    now: i64,
    /// Parentheses open at this point.
    depth: usize,
}

impl Parser<'_> {
    fn peek(&self) -> Option<&Token> {
        self.tokens.get(self.at)
    }

    fn next(&mut self) -> Option<Token> {
        let token = self.tokens.get(self.at).cloned();
        self.at += 1;
        token
    }

    fn keyword(&mut self, keyword: &str) -> bool {
        match self.peek() {
            Some(Token::Word(w)) if w.eq_ignore_ascii_case(keyword) => {
                self.at += 1;
                true
            }
            _ => false,
        }
    }

    fn or(&mut self) -> Result<Expr, String> {
        let mut any = vec![self.and()?];
        while self.keyword("OR") {
            if self.dialect == Dialect::DeletePredicate {
                return Err("OR is not supported in delete predicates (only AND)".into());
            }
            any.push(self.and()?);
        }
        Ok(if any.len() == 1 {
            any.remove(0)
        } else {
            Expr::Or(any)
        })
    }

    fn and(&mut self) -> Result<Expr, String> {
        let mut all = vec![self.primary()?];
        while self.keyword("AND") {
            all.push(self.primary()?);
        }
        Ok(if all.len() == 1 {
            all.remove(0)
        } else {
            Expr::And(all)
        })
    }

    fn primary(&mut self) -> Result<Expr, String> {
        if self.peek() == Some(&Token::Open) {
            self.at += 1;
            self.depth += 1;
            if self.depth > MAX_DEPTH {
                return Err(format!(
                    "the condition nests parentheses deeper than {MAX_DEPTH}"
                ));
            }
            let inner = self.or()?;
            self.depth -= 1;
            return match self.next() {
                Some(Token::Close) => Ok(inner),
                _ => Err("missing ) in the condition".into()),
            };
        }
        let name = match (self.next(), self.dialect) {
            (Some(Token::Word(w)), _) => w,
            (Some(Token::DoubleQuoted(w)), Dialect::InfluxQl) => w,
            (other, _) => return Err(format!("expected a tag name, found {}", describe(&other))),
        };
        let op = match self.next() {
            Some(Token::Operator(op)) if !matches!(op, "+" | "-") => op,
            other => {
                return Err(format!(
                    "expected a comparison after {name:?}, found {}",
                    describe(&other)
                ))
            }
        };
        let op = if op == "<>" { "!=" } else { op };
        let value = if name.eq_ignore_ascii_case("time") {
            Value::Time(self.time()?)
        } else {
            match (self.next(), self.dialect) {
                (Some(Token::SingleQuoted(v)), Dialect::InfluxQl)
                | (Some(Token::DoubleQuoted(v)), Dialect::DeletePredicate) => Value::String(v),
                (Some(Token::Regex(r)), Dialect::InfluxQl) => Value::Regex(r),
                (Some(Token::Word(w)), Dialect::InfluxQl) => match w.to_ascii_lowercase().as_str() {
                    "true" => Value::Literal(FieldLiteral::Boolean(true)),
                    "false" => Value::Literal(FieldLiteral::Boolean(false)),
                    _ => match w.parse::<f64>() {
                        Ok(number) if number.is_finite() => Value::Literal(FieldLiteral::Number(number)),
                        _ => {
                            return Err(format!(
                                "expected a 'string', /regex/, number or boolean after {name} {op}, found {w:?}"
                            ))
                        }
                    },
                },
                (other, Dialect::InfluxQl) => {
                    return Err(format!(
                        "expected a 'string' or /regex/ after {name} {op}, found {}",
                        describe(&other)
                    ))
                }
                (other, Dialect::DeletePredicate) => {
                    return Err(format!(
                        "expected a \"string\" after {name}{op}, found {}",
                        describe(&other)
                    ))
                }
            }
        };
        Ok(Expr::Compare { name, op, value })
    }

    /// A time: an RFC 3339 string, an integer (ns, or with a duration
    /// unit), `now()`, each optionally plus or minus durations.
    fn time(&mut self) -> Result<i64, String> {
        let mut time = match self.next() {
            Some(Token::SingleQuoted(s) | Token::DoubleQuoted(s)) => parse_time(&s)?,
            Some(Token::Word(w)) if w.eq_ignore_ascii_case("now()") => self.now,
            Some(Token::Word(w)) => parse_duration_or_ns(&w)?,
            other => return Err(format!("expected a time, found {}", describe(&other))),
        };
        while let Some(Token::Operator(op @ ("+" | "-"))) = self.peek() {
            let sign = if *op == "+" { 1 } else { -1 };
            self.at += 1;
            let amount = match self.next() {
                Some(Token::Word(w)) => parse_duration_or_ns(&w)?,
                other => return Err(format!("expected a duration, found {}", describe(&other))),
            };
            time = time
                .checked_add(sign * amount)
                .ok_or("the time is out of range")?;
        }
        Ok(time)
    }
}

fn describe(token: &Option<Token>) -> String {
    match token {
        None => "the end".into(),
        Some(Token::Word(w)) => format!("{w:?}"),
        Some(Token::DoubleQuoted(w)) => format!("\"{w}\""),
        Some(Token::SingleQuoted(w)) => format!("'{w}'"),
        Some(Token::Regex(w)) => format!("/{w}/"),
        Some(Token::Operator(op)) => (*op).to_owned(),
        Some(Token::Open) => "(".into(),
        Some(Token::Close) => ")".into(),
    }
}

/// An RFC 3339 time, or `YYYY-MM-DD[ HH:MM:SS[.f]]` in UTC (InfluxQL takes
/// both), in ns since the epoch.
pub fn parse_time(text: &str) -> Result<i64, String> {
    let parsed = chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.to_utc())
        .or_else(|_| {
            chrono::NaiveDateTime::parse_from_str(text, "%Y-%m-%d %H:%M:%S%.f").map(|t| t.and_utc())
        })
        .or_else(|_| {
            chrono::NaiveDate::parse_from_str(text, "%Y-%m-%d")
                .map(|d| d.and_hms_opt(0, 0, 0).unwrap_or_default().and_utc())
        })
        .map_err(|_| format!("invalid time {text:?} (RFC 3339, e.g. 2026-01-01T00:00:00Z)"))?;
    parsed
        .timestamp_nanos_opt()
        .ok_or_else(|| format!("time {text:?} is out of range"))
}

/// An integer of nanoseconds, or a duration like `1h`, `90m`, `1h30m`.
fn parse_duration_or_ns(text: &str) -> Result<i64, String> {
    if let Ok(ns) = text.parse::<i64>() {
        return Ok(ns);
    }
    parse_duration(text).map_err(|_| {
        format!("invalid time or duration {text:?} (e.g. 1h, 30m, 1700000000000000000)")
    })
}

/// What a condition selects.
#[derive(Debug, Clone, PartialEq)]
pub struct Selection {
    /// The measurement a delete predicate names (`_measurement="m"`).
    pub(crate) measurement: Option<String>,
    pub(crate) tags: TagPredicate,
    pub(crate) start: Option<i64>,
    pub(crate) stop: Option<i64>,
    /// InfluxQL's conditions on field values, joined to the rest by `AND`.
    pub(crate) fields: Vec<FieldCondition>,
}

impl Selection {
    /// Every series, all time.
    pub(crate) fn everything() -> Selection {
        Selection {
            measurement: None,
            tags: TagPredicate::Any,
            start: None,
            stop: None,
            fields: Vec::new(),
        }
    }

    /// Applies the selection to `filter` (whose other parts stay). Deletes
    /// select whole points: conditions on field values are refused.
    pub fn apply(self, filter: &mut PointFilter) -> Result<(), String> {
        if let Some(condition) = self.fields.first() {
            return Err(format!(
                "{} {} …: deletes select points by tags and time, not by field values",
                condition.field, condition.op
            ));
        }
        if self.measurement.is_some() {
            filter.measurement = self.measurement;
        }
        filter.tags = self.tags;
        filter.start = self.start;
        filter.stop = self.stop;
        Ok(())
    }
}

/// Parses `text` (empty: everything) in `dialect`; `now` is what `now()`
/// means, in ns since the epoch.
pub fn parse(text: &str, dialect: Dialect, now: i64) -> Result<Selection, String> {
    let mut selection = Selection::everything();
    let tokens = tokenize(text)?;
    if tokens.is_empty() {
        return Ok(selection);
    }
    let mut parser = Parser {
        tokens: &tokens,
        at: 0,
        dialect,
        now,
        depth: 0,
    };
    let expr = parser.or()?;
    if let Some(extra) = parser.peek() {
        return Err(format!(
            "unexpected {} in the condition",
            describe(&Some(extra.clone()))
        ));
    }
    let terms = match expr {
        Expr::And(all) => all,
        other => vec![other],
    };
    let mut tags = Vec::new();
    for term in terms {
        match term {
            Expr::Compare {
                op,
                value: Value::Time(t),
                ..
            } => narrow(&mut selection, op, t).map_err(|e| format!("time {op} …: {e}"))?,
            Expr::Compare {
                name,
                op,
                value: Value::Literal(value),
            } => {
                if matches!(op, "=~" | "!~") {
                    return Err(format!(
                        "{name} {op} …: a field compares with =, !=, <, <=, >, >="
                    ));
                }
                selection.fields.push(FieldCondition {
                    field: name,
                    op,
                    value,
                });
            }
            Expr::Compare { name, op, value }
                if name == "_measurement" && dialect == Dialect::DeletePredicate =>
            {
                match (op, value) {
                    ("=", Value::String(m)) => selection.measurement = Some(m),
                    _ => return Err("_measurement takes = \"name\"".into()),
                }
            }
            other => tags.push(tag_predicate(other, dialect)?),
        }
    }
    selection.tags = match tags.len() {
        0 => TagPredicate::Any,
        1 => tags.remove(0),
        _ => TagPredicate::And(tags),
    };
    Ok(selection)
}

/// Narrows the time range by `time <op> t`.
fn narrow(selection: &mut Selection, op: &str, t: i64) -> Result<(), String> {
    let start = |s: &mut Selection, v: i64| s.start = Some(s.start.map_or(v, |old| old.max(v)));
    let stop = |s: &mut Selection, v: i64| s.stop = Some(s.stop.map_or(v, |old| old.min(v)));
    match op {
        ">" => start(selection, t.saturating_add(1)),
        ">=" => start(selection, t),
        "<" => stop(selection, t),
        "<=" => stop(selection, t.saturating_add(1)),
        "=" => {
            start(selection, t);
            stop(selection, t.saturating_add(1));
        }
        _ => return Err(format!("{op} is not a time comparison")),
    }
    Ok(())
}

fn tag_predicate(expr: Expr, dialect: Dialect) -> Result<TagPredicate, String> {
    Ok(match expr {
        Expr::And(all) => TagPredicate::And(
            all.into_iter()
                .map(|e| tag_predicate(e, dialect))
                .collect::<Result<_, _>>()?,
        ),
        Expr::Or(any) => TagPredicate::Or(
            any.into_iter()
                .map(|e| tag_predicate(e, dialect))
                .collect::<Result<_, _>>()?,
        ),
        Expr::Compare {
            value: Value::Time(_),
            ..
        } => return Err("time conditions must be joined to the rest with AND".into()),
        Expr::Compare {
            value: Value::Literal(_),
            name,
            ..
        } => {
            return Err(format!(
                "the condition on field {name:?} must be joined to the rest with AND"
            ))
        }
        Expr::Compare { name, .. }
            if name.starts_with('_') && dialect == Dialect::DeletePredicate =>
        {
            return Err(format!(
                "{name} is not supported in delete predicates (points are deleted whole, \
                 by _measurement and tags)"
            ))
        }
        Expr::Compare { name, op, value } => match (op, value) {
            ("=", Value::String(v)) => TagPredicate::Equals(name, v),
            ("!=", Value::String(v)) => TagPredicate::NotEquals(name, v),
            ("=~", Value::Regex(r)) => TagPredicate::Matches(name, r),
            ("!~", Value::Regex(r)) => TagPredicate::NotMatches(name, r),
            (op, _) => {
                return Err(format!(
                    "{name} {op} …: tags compare with =, != ('string') and =~, !~ (/regex/)"
                ))
            }
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_700_000_000_000_000_000;

    fn influxql(text: &str) -> Result<Selection, String> {
        parse(text, Dialect::InfluxQl, NOW)
    }

    fn eq(k: &str, v: &str) -> TagPredicate {
        TagPredicate::Equals(k.into(), v.into())
    }

    #[test]
    fn influxql_conditions_on_tags() {
        let s = influxql(r#"host = 'a' AND ("dc" =~ /^eu\/w/ OR rack <> 'it\'s') AND os !~ /x\d/"#)
            .unwrap();
        assert_eq!(
            s.tags,
            TagPredicate::And(vec![
                eq("host", "a"),
                TagPredicate::Or(vec![
                    TagPredicate::Matches("dc".into(), "^eu/w".into()),
                    TagPredicate::NotEquals("rack".into(), "it's".into()),
                ]),
                TagPredicate::NotMatches("os".into(), "x\\d".into()),
            ])
        );
        assert_eq!((s.start, s.stop), (None, None));
        assert_eq!(influxql("").unwrap().tags, TagPredicate::Any);
    }

    #[test]
    fn time_conditions_narrow_the_range() {
        let s = influxql("time >= '2023-11-14T22:13:20Z' AND host = 'a' AND time < now() - 1h")
            .unwrap();
        assert_eq!(s.tags, eq("host", "a"));
        assert_eq!(s.start, Some(NOW));
        assert_eq!(s.stop, Some(NOW - 3_600_000_000_000));
        let s = influxql("time > 10 AND time <= 20 AND time > 5").unwrap();
        assert_eq!((s.start, s.stop), (Some(11), Some(21)));
        let s = influxql("time = '2023-11-14 22:13:20'").unwrap();
        assert_eq!((s.start, s.stop), (Some(NOW), Some(NOW + 1)));
        let s = influxql("time > -5 AND time < 1h30m").unwrap();
        assert_eq!((s.start, s.stop), (Some(-4), Some(5_400_000_000_000)));
    }

    #[test]
    fn delete_predicates_use_double_quotes_and_and_only() {
        let s = parse(
            r#"_measurement="cpu" AND host="a" AND region!="eu""#,
            Dialect::DeletePredicate,
            NOW,
        )
        .unwrap();
        assert_eq!(s.measurement.as_deref(), Some("cpu"));
        assert_eq!(
            s.tags,
            TagPredicate::And(vec![
                eq("host", "a"),
                TagPredicate::NotEquals("region".into(), "eu".into())
            ])
        );
        for (bad, says) in [
            (r#"host="a" OR host="b""#, "OR"),
            (r#"_field="usage""#, "_field"),
            ("host='a'", "\"string\""),
            (r#"host=~"a""#, "tags compare"),
        ] {
            let err = parse(bad, Dialect::DeletePredicate, NOW).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }

    #[test]
    fn field_conditions_join_by_and() {
        let selection = influxql("usage > 5 AND host = 'a' AND ok = true").unwrap();
        assert_eq!(
            selection.tags,
            TagPredicate::Equals("host".into(), "a".into())
        );
        assert_eq!(
            selection.fields,
            vec![
                FieldCondition {
                    field: "usage".into(),
                    op: ">",
                    value: FieldLiteral::Number(5.0)
                },
                FieldCondition {
                    field: "ok".into(),
                    op: "=",
                    value: FieldLiteral::Boolean(true)
                },
            ]
        );
        let mut filter = PointFilter::all();
        assert!(selection
            .apply(&mut filter)
            .unwrap_err()
            .contains("not by field values"));
    }

    #[test]
    fn errors_say_what_was_expected() {
        for (bad, says) in [
            ("host = 'a", "unterminated"),
            ("host = 'a' AND", "expected a tag name"),
            ("(host = 'a'", "missing )"),
            ("host 'a'", "expected a comparison"),
            ("host = 5x", "'string'"),
            ("usage > 5 OR host = 'a'", "joined to the rest with AND"),
            ("usage =~ 5", "a field compares with"),
            ("host > 'a'", "tags compare"),
            ("host = 'a' OR time > 5", "joined to the rest with AND"),
            ("time > 'yesterday'", "invalid time"),
            ("time > 5x", "invalid time or duration"),
            ("time =~ /x/", "expected a time"),
            ("host = 'a' 'b'", "unexpected"),
            (&"(".repeat(100_000), "deeper than"),
        ] {
            let err = influxql(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
