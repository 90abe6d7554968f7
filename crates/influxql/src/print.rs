//! A `SELECT` written back as InfluxQL, as it was understood: names
//! quoted, times resolved to ns since the epoch (`now()` is gone), the
//! `WHERE` clause as its selection (the time range, the tags' condition,
//! the fields'), parentheses only where the grammar needs them (so the
//! text nests no deeper than what was parsed), defaults left out.
//! Parsing what it writes gives the same statement (checked by the
//! `influxql` fuzz target and `tests/print.rs`).

use std::fmt::{self, Display, Formatter, Write as _};

use chingest::TagPredicate;

use crate::condition::{FieldCondition, FieldLiteral, Selection};
use crate::parse::{duration_text, Expr, Fill, GroupBy, Name, Select, Source};

impl Display for Select {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        f.write_str("SELECT ")?;
        for (i, field) in self.fields.iter().enumerate() {
            if i > 0 {
                f.write_str(", ")?;
            }
            write!(f, "{}", ExprText(&field.expr))?;
            if let Some(alias) = &field.alias {
                write!(f, " AS {}", Quoted(alias))?;
            }
        }
        f.write_str(" FROM ")?;
        let subqueries = self.subqueries.iter().map(|s| format!("({s})"));
        let sources = self.sources.iter().map(source_text);
        f.write_str(&subqueries.chain(sources).collect::<Vec<_>>().join(", "))?;
        write_condition(f, &self.condition)?;
        let mut dimensions = Vec::new();
        if let Some(interval) = self.interval {
            let offset = match interval.offset {
                0 => String::new(),
                offset => format!(", {}", duration_text(offset)),
            };
            dimensions.push(format!("time({}{offset})", duration_text(interval.every)));
        }
        match &self.group_by {
            GroupBy::Nothing => {}
            GroupBy::All => dimensions.push("*".to_owned()),
            GroupBy::Tags(tags) => dimensions.extend(tags.iter().map(|t| Quoted(t).to_string())),
        }
        if !dimensions.is_empty() {
            write!(f, " GROUP BY {}", dimensions.join(", "))?;
        }
        match self.fill {
            Fill::Null => {}
            Fill::None => f.write_str(" fill(none)")?,
            Fill::Previous => f.write_str(" fill(previous)")?,
            Fill::Linear => f.write_str(" fill(linear)")?,
            Fill::Integer(n) => write!(f, " fill({n})")?,
            Fill::Float(n) => write!(f, " fill({})", NumberText(n))?,
        }
        if self.descending {
            f.write_str(" ORDER BY time DESC")?;
        }
        if let Some(limit) = self.limit {
            write!(f, " LIMIT {limit}")?;
        }
        if self.offset > 0 {
            write!(f, " OFFSET {}", self.offset)?;
        }
        if let Some(slimit) = self.slimit {
            write!(f, " SLIMIT {slimit}")?;
        }
        if self.soffset > 0 {
            write!(f, " SOFFSET {}", self.soffset)?;
        }
        if let Some(zone) = self.time_zone {
            write!(f, " tz({})", StringText(zone.name()))?;
        }
        Ok(())
    }
}

/// `"db"."rp"."m"`, `"db".."m"`, `"rp"."m"`, `"m"` or `/re/`.
fn source_text(source: &Source) -> String {
    let mut text = String::new();
    if let Some(database) = &source.database {
        write!(text, "{}.", Quoted(database)).unwrap();
    }
    match &source.retention_policy {
        Some(policy) => write!(text, "{}.", Quoted(policy)).unwrap(),
        None if source.database.is_some() => text.push('.'),
        None => {}
    }
    match &source.measurement {
        Name::Exact(name) => write!(text, "{}", Quoted(name)).unwrap(),
        Name::Regex(re) => write!(text, "{}", RegexText(re)).unwrap(),
    }
    text
}

/// ` WHERE` and the selection's terms joined by `AND`, or nothing.
fn write_condition(f: &mut Formatter<'_>, selection: &Selection) -> fmt::Result {
    let mut terms = Vec::new();
    if let Some(start) = selection.start {
        terms.push(format!("time >= {start}"));
    }
    if let Some(stop) = selection.stop {
        terms.push(format!("time < {stop}"));
    }
    terms.extend(selection.fields.iter().map(field_condition_text));
    match &selection.tags {
        TagPredicate::Any => {}
        // Among other terms joined by `AND`, an `OR` needs parentheses.
        TagPredicate::Or(_) if !terms.is_empty() => {
            terms.push(format!("({})", TagText(&selection.tags)))
        }
        tags => terms.push(TagText(tags).to_string()),
    }
    if terms.is_empty() {
        return Ok(());
    }
    write!(f, " WHERE {}", terms.join(" AND "))
}

fn field_condition_text(condition: &FieldCondition) -> String {
    let value = match condition.value {
        FieldLiteral::Number(n) => format!("{n:?}"),
        FieldLiteral::Boolean(b) => b.to_string(),
    };
    format!("{} {} {value}", Quoted(&condition.field), condition.op)
}

/// A tag condition. `AND` binds before `OR`, and each joins its parts
/// flat: a part that is an `OR` inside an `AND`, or the same operator
/// inside itself (which only parentheses make), is in parentheses.
struct TagText<'a>(&'a TagPredicate);

impl Display for TagText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        let joined = |f: &mut Formatter<'_>, parts: &[TagPredicate], word: &str| {
            for (i, part) in parts.iter().enumerate() {
                if i > 0 {
                    write!(f, " {word} ")?;
                }
                let enclosed = match part {
                    TagPredicate::Or(_) => true,
                    TagPredicate::And(_) => word == "AND",
                    _ => false,
                };
                match enclosed {
                    true => write!(f, "({})", TagText(part))?,
                    false => write!(f, "{}", TagText(part))?,
                }
            }
            Ok(())
        };
        match self.0 {
            // Only inside `AND` and `OR`, which the parser never leaves
            // empty; as a whole condition it is no `WHERE` at all.
            TagPredicate::Any => f.write_str("true"),
            TagPredicate::Equals(k, v) => write!(f, "{} = {}", Quoted(k), StringText(v)),
            TagPredicate::NotEquals(k, v) => write!(f, "{} != {}", Quoted(k), StringText(v)),
            TagPredicate::Matches(k, re) => write!(f, "{} =~ {}", Quoted(k), RegexText(re)),
            TagPredicate::NotMatches(k, re) => write!(f, "{} !~ {}", Quoted(k), RegexText(re)),
            TagPredicate::And(all) => joined(f, all, "AND"),
            TagPredicate::Or(any) => joined(f, any, "OR"),
        }
    }
}

/// A column. Operators bind by precedence, left to right: an operand in
/// parentheses is a left one that binds looser than its operator, or a
/// right one that binds no tighter.
struct ExprText<'a>(&'a Expr);

impl Display for ExprText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.0 {
            Expr::Var { name, cast } => {
                write!(f, "{}", Quoted(name))?;
                match cast {
                    Some(cast) => write!(f, "::{cast}"),
                    None => Ok(()),
                }
            }
            Expr::Wildcard => f.write_str("*"),
            Expr::Call { name, args } => {
                write!(f, "{name}(")?;
                for (i, arg) in args.iter().enumerate() {
                    if i > 0 {
                        f.write_str(", ")?;
                    }
                    write!(f, "{}", ExprText(arg))?;
                }
                f.write_str(")")
            }
            Expr::Integer(n) => write!(f, "{n}"),
            Expr::Number(n) => write!(f, "{}", NumberText(*n)),
            Expr::Duration(ns) => f.write_str(&duration_text(*ns)),
            Expr::Str(s) => write!(f, "{}", StringText(s)),
            Expr::Binary { op, left, right } => {
                let binds = |operand: &Expr| match operand {
                    Expr::Binary { op, .. } => Some(op.precedence()),
                    _ => None,
                };
                match binds(left) {
                    Some(p) if p < op.precedence() => write!(f, "({})", ExprText(left))?,
                    _ => write!(f, "{}", ExprText(left))?,
                }
                write!(f, " {} ", op.symbol())?;
                match binds(right) {
                    Some(p) if p <= op.precedence() => write!(f, "({})", ExprText(right)),
                    _ => write!(f, "{}", ExprText(right)),
                }
            }
        }
    }
}

/// A number that reads back as one (`1.0`, not `1`, which is an integer;
/// past `f64`'s range, as the lexer reads a literal too large).
struct NumberText(f64);

impl Display for NumberText {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        match self.0 {
            n if n == f64::INFINITY => f.write_str("1e999"),
            n if n == f64::NEG_INFINITY => f.write_str("-1e999"),
            n => write!(f, "{n:?}"),
        }
    }
}

/// A `"name"`: backslashes and quotes escaped.
struct Quoted<'a>(&'a str);

impl Display for Quoted<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "\"{}\"",
            self.0.replace('\\', "\\\\").replace('"', "\\\"")
        )
    }
}

/// A `'string'`: backslashes and quotes escaped.
struct StringText<'a>(&'a str);

impl Display for StringText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "'{}'", self.0.replace('\\', "\\\\").replace('\'', "\\'"))
    }
}

/// A `/regex/`: its `/` escaped (its other escapes are the regex's own).
struct RegexText<'a>(&'a str);

impl Display for RegexText<'_> {
    fn fmt(&self, f: &mut Formatter<'_>) -> fmt::Result {
        write!(f, "/{}/", self.0.replace('/', "\\/"))
    }
}
