//! InfluxQL statements parsed into what the planner needs: queries
//! (`SELECT`, `SHOW MEASUREMENTS | TAG KEYS | TAG VALUES | FIELD KEYS |
//! SERIES`, `SHOW … CARDINALITY`), `SELECT … INTO`, `EXPLAIN`, and
//! administrative statements ([`Admin`]), continuous queries' among them;
//! a request's `q` split into its statements, all parsed before any runs.
//! No I/O; `WHERE` clauses go through [`condition`], which also parses
//! `DELETE`'s; statements chingest refuses on purpose are recognised by
//! [`refused`].

use std::time::Duration;

use chingest::TagPredicate;

use crate::condition::{self, Dialect, Selection};
use crate::error::Error;
use crate::lex::{parse_duration, tokenize, Spanned, Token};
use crate::refused;

/// Why a statement cannot be answered.
#[derive(Debug, Clone, PartialEq)]
enum ParseError {
    /// Not InfluxQL: the whole request is refused (400), as InfluxDB does.
    Invalid(String),
    /// InfluxQL that chingest does not answer: the statement's result
    /// carries the error, naming the part.
    Unsupported(String),
}

type Parsed<T> = Result<T, ParseError>;

fn invalid<T>(message: impl Into<String>) -> Parsed<T> {
    Err(ParseError::Invalid(message.into()))
}

fn unsupported<T>(message: impl Into<String>) -> Parsed<T> {
    Err(ParseError::Unsupported(message.into()))
}

/// A statement.
#[derive(Debug, Clone, PartialEq)]
pub enum Statement {
    /// `SELECT …`.
    Select(Box<Select>),
    /// `EXPLAIN [ANALYZE] SELECT …`: how it is answered (`ANALYZE`: run,
    /// with times).
    Explain {
        /// `ANALYZE`: answered, with times.
        analyze: bool,
        /// The statement explained.
        select: Box<Select>,
    },
    /// `SELECT … INTO target FROM …`: the query's points written.
    SelectInto(Box<SelectInto>),
    /// `SHOW MEASUREMENTS`.
    ShowMeasurements {
        /// The common parts (no `FROM`).
        show: Show,
        /// `WITH MEASUREMENT = m` or `=~ /re/`.
        with: Option<Name>,
    },
    /// `SHOW TAG KEYS`.
    ShowTagKeys(Show),
    /// `SHOW TAG VALUES … WITH KEY …`.
    ShowTagValues {
        /// The common parts.
        show: Show,
        /// Which keys.
        keys: KeyFilter,
    },
    /// `SHOW FIELD KEYS`.
    ShowFieldKeys(Show),
    /// `SHOW SERIES`.
    ShowSeries(Show),
    /// `SHOW SERIES | MEASUREMENT | FIELD KEY | TAG KEY | TAG VALUES
    /// [EXACT] CARDINALITY`.
    ShowCardinality(Cardinality),
    /// Everything else chingest answers.
    Admin(Admin),
}

impl Statement {
    /// Whether it is an administrative statement (not a query) whose
    /// series InfluxDB writes with their `values` even when there are
    /// none (`SHOW CONTINUOUS QUERIES` leaves them out, as a query does).
    pub fn is_admin(&self) -> bool {
        matches!(self, Statement::Admin(admin) if *admin != Admin::ShowContinuousQueries)
    }

    /// Whether it changes what is stored: InfluxDB 1.x answers such a
    /// statement sent by `GET` with a warning to use `POST`.
    pub fn writes(&self) -> bool {
        matches!(
            self,
            Statement::SelectInto(_)
                | Statement::Admin(
                    Admin::CreateDatabase(_)
                        | Admin::CreateRetentionPolicy { .. }
                        | Admin::SetDuplicatePolicy { .. }
                        | Admin::SetDownsampling { .. }
                        | Admin::Delete { .. }
                        | Admin::CreateContinuousQuery(_)
                        | Admin::DropContinuousQuery { .. }
                )
        )
    }
}

/// The administrative statements: what agents send on startup, deletes,
/// continuous queries, and chingest's duplicate policies.
#[derive(Debug, Clone, PartialEq)]
pub enum Admin {
    /// `CREATE DATABASE name`.
    CreateDatabase(String),
    /// `SHOW DATABASES`.
    ShowDatabases,
    /// `SHOW RETENTION POLICIES [ON db]`.
    ShowRetentionPolicies(Option<String>),
    /// `CREATE|ALTER RETENTION POLICY name ON db DURATION d …`.
    CreateRetentionPolicy {
        /// The policy.
        name: String,
        /// Its database.
        database: String,
        /// The TTL of its tables; `None`: kept forever.
        duration: Option<Duration>,
    },
    /// `SET DUPLICATE POLICY last [ON db [MEASUREMENT m]]` (chingest's).
    SetDuplicatePolicy {
        /// The policy.
        policy: chingest::DuplicatePolicy,
        /// `ON db`, else the request's.
        database: Option<String>,
        /// `MEASUREMENT m`, else the database's own policy.
        measurement: Option<String>,
    },
    /// `SHOW DUPLICATE POLICIES [ON db]` (chingest's).
    ShowDuplicatePolicies(Option<String>),
    /// `SET DOWNSAMPLING '30d:5m', '180d:1h' | NONE | DEFAULT [ON db]`
    /// (chingest's).
    SetDownsampling {
        /// The levels; `NONE`: off; `DEFAULT`: the configuration file's.
        setting: chingest::DownsamplingSetting,
        /// `ON db`, else the request's.
        database: Option<String>,
    },
    /// `SHOW DOWNSAMPLING [ON db]` (chingest's).
    ShowDownsampling(Option<String>),
    /// `CREATE CONTINUOUS QUERY name ON db [RESAMPLE …] BEGIN … END`.
    CreateContinuousQuery(Box<CreateContinuousQuery>),
    /// `DROP CONTINUOUS QUERY name ON db`.
    DropContinuousQuery {
        /// The query.
        name: String,
        /// Its database.
        database: String,
    },
    /// `SHOW CONTINUOUS QUERIES`.
    ShowContinuousQueries,
    /// `DELETE FROM m WHERE …`: points; `DROP SERIES`: points and series.
    Delete {
        /// Whether the series go too.
        drop_series: bool,
        /// `FROM m`; `None`: every measurement.
        measurement: Option<String>,
        /// The `WHERE` clause's text (parsed when the statement runs).
        condition: String,
    },
}

/// `CREATE CONTINUOUS QUERY`: checked as InfluxDB checks it (an `INTO`,
/// a `GROUP BY time`, a `RESAMPLE FOR` of at least its interval) and an
/// aggregate.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateContinuousQuery {
    pub(crate) name: String,
    pub(crate) database: String,
    /// `RESAMPLE EVERY`, ns.
    pub(crate) resample_every: Option<i64>,
    /// `RESAMPLE FOR`, ns.
    pub(crate) resample_for: Option<i64>,
    /// What runs each period, over the period's window.
    pub(crate) query: SelectInto,
    /// The statement as given (what `SHOW CONTINUOUS QUERIES` shows).
    pub(crate) text: String,
}

/// `SELECT … INTO target FROM …`.
#[derive(Debug, Clone, PartialEq)]
pub struct SelectInto {
    pub(crate) select: Select,
    pub(crate) target: IntoTarget,
}

/// Where `INTO` writes: `m`, `rp.m`, `db.rp.m`, `db..m`, or
/// `:MEASUREMENT` (each source measurement's own name) in place of `m`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IntoTarget {
    pub(crate) database: Option<String>,
    pub(crate) retention_policy: Option<String>,
    /// `None`: `:MEASUREMENT`.
    pub(crate) measurement: Option<String>,
}

/// The parts every `SHOW` of series metadata has.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Show {
    /// `ON db`.
    pub(crate) database: Option<String>,
    /// `FROM …`; empty: every measurement.
    pub(crate) from: Vec<Source>,
    /// `WHERE …` on tags.
    pub(crate) tags: Option<TagPredicate>,
    /// `LIMIT n`.
    pub(crate) limit: Option<u64>,
    /// `OFFSET n`.
    pub(crate) offset: u64,
}

/// `SHOW … [EXACT] CARDINALITY`.
#[derive(Debug, Clone, PartialEq)]
pub struct Cardinality {
    pub(crate) counted: Counted,
    /// `ON`, `FROM`, `WHERE` (on tags), `LIMIT` and `OFFSET`, which apply
    /// to each counted series' one row.
    pub(crate) show: Show,
    /// `GROUP BY` tags: a count per tag set (tags or `*`).
    pub(crate) group_by: GroupBy,
    /// Whether it asks for the database's estimate: `SHOW SERIES |
    /// MEASUREMENT CARDINALITY` with no clause but `ON`, which InfluxDB
    /// answers with one `cardinality estimation` (any other clause, or
    /// `EXACT`, makes it a count per measurement).
    pub(crate) estimate: bool,
}

/// What a `SHOW … CARDINALITY` counts.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Counted {
    /// Series, per measurement.
    Series,
    /// Measurements.
    Measurements,
    /// A measurement's field keys.
    FieldKeys,
    /// Tag keys, per measurement.
    TagKeys,
    /// Values of the keys `WITH KEY` names (each key's apart), per
    /// measurement.
    TagValues(KeyFilter),
}

/// `WITH KEY …` of `SHOW TAG VALUES`.
#[derive(Debug, Clone, PartialEq)]
pub enum KeyFilter {
    /// `= k`.
    Equals(String),
    /// `!= k`.
    NotEquals(String),
    /// `IN (a, b)`.
    In(Vec<String>),
    /// `=~ /re/`.
    Matches(String),
    /// `!~ /re/`.
    NotMatches(String),
}

/// A measurement name or pattern.
#[derive(Debug, Clone, PartialEq)]
pub enum Name {
    /// A name.
    Exact(String),
    /// `/regex/`.
    Regex(String),
}

/// One `FROM` source: `m`, `rp.m`, `db.rp.m`, `db..m`, `/re/`.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Source {
    pub(crate) database: Option<String>,
    pub(crate) retention_policy: Option<String>,
    pub(crate) measurement: Name,
}

/// `SELECT`.
#[derive(Debug, Clone, PartialEq)]
pub struct Select {
    pub(crate) fields: Vec<Field>,
    pub(crate) sources: Vec<Source>,
    /// `FROM (SELECT …), …`: the statements whose answers it reads
    /// instead of measurements.
    pub(crate) subqueries: Vec<Select>,
    /// Tags, and the time range `[start, stop)` in ns.
    pub(crate) condition: Selection,
    /// `GROUP BY time(every[, offset])`, in ns.
    pub(crate) interval: Option<Interval>,
    pub(crate) group_by: GroupBy,
    pub(crate) fill: Fill,
    /// `ORDER BY time DESC`.
    pub(crate) descending: bool,
    pub(crate) limit: Option<u64>,
    pub(crate) offset: u64,
    pub(crate) slimit: Option<u64>,
    pub(crate) soffset: u64,
    /// `tz('…')`.
    pub(crate) time_zone: Option<chrono_tz::Tz>,
}

/// `GROUP BY time(every, offset)`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Interval {
    pub(crate) every: i64,
    pub(crate) offset: i64,
}

/// `GROUP BY` tags.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub(crate) enum GroupBy {
    /// None: series are merged.
    #[default]
    Nothing,
    /// These tag keys.
    Tags(Vec<String>),
    /// `*`: every tag key.
    All,
}

/// `fill(…)`.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub(crate) enum Fill {
    /// `fill(null)`, the default: empty intervals show null.
    #[default]
    Null,
    /// `fill(none)`: empty intervals are left out.
    None,
    /// `fill(previous)`.
    Previous,
    /// `fill(linear)`.
    Linear,
    /// `fill(0)`, any integer.
    Integer(i64),
    /// `fill(1.5)`.
    Float(f64),
}

/// One selected column.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Field {
    pub(crate) expr: Expr,
    /// `AS name`.
    pub(crate) alias: Option<String>,
}

/// What a column computes.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    /// A field or a tag, with `::field` / `::tag` / `::float` … if given.
    Var {
        name: String,
        cast: Option<String>,
    },
    /// `*`.
    Wildcard,
    /// `name(args)`, the name lower-cased.
    Call {
        name: String,
        args: Vec<Expr>,
    },
    Integer(i64),
    Number(f64),
    Duration(i64),
    Str(String),
    /// `left op right`; `-x` is `-1 * x`, as InfluxDB reads it.
    Binary {
        op: BinaryOp,
        left: Box<Expr>,
        right: Box<Expr>,
    },
}

/// An arithmetic or bitwise operator of `SELECT`'s columns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum BinaryOp {
    Add,
    Sub,
    Mul,
    Div,
    Mod,
    BitAnd,
    BitOr,
    BitXor,
}

impl BinaryOp {
    fn from_punct(punct: &str) -> Option<BinaryOp> {
        Some(match punct {
            "+" => BinaryOp::Add,
            "-" => BinaryOp::Sub,
            "*" => BinaryOp::Mul,
            "/" => BinaryOp::Div,
            "%" => BinaryOp::Mod,
            "&" => BinaryOp::BitAnd,
            "|" => BinaryOp::BitOr,
            "^" => BinaryOp::BitXor,
            _ => return None,
        })
    }

    /// InfluxQL's binding: `* / % &` before `+ - | ^`.
    pub(crate) fn precedence(self) -> u8 {
        match self {
            BinaryOp::Add | BinaryOp::Sub | BinaryOp::BitOr | BinaryOp::BitXor => 1,
            _ => 2,
        }
    }

    /// The operator as written.
    pub(crate) fn symbol(self) -> &'static str {
        match self {
            BinaryOp::Add => "+",
            BinaryOp::Sub => "-",
            BinaryOp::Mul => "*",
            BinaryOp::Div => "/",
            BinaryOp::Mod => "%",
            BinaryOp::BitAnd => "&",
            BinaryOp::BitOr => "|",
            BinaryOp::BitXor => "^",
        }
    }
}

/// A request's statements, split at `;` and each parsed before any runs:
/// a statement that is not InfluxQL refuses the whole request
/// ([`Error::Parse`], as InfluxDB refuses it); one chingest does not answer
/// is kept as the error its result carries. `now`: what `now()` means, ns
/// since the epoch.
pub fn parse_query(q: &str, now: i64) -> Result<Vec<Result<Statement, String>>, Error> {
    let mut statements = Vec::new();
    for text in split_statements(q).map_err(Error::Parse)? {
        statements.push(match parse(text, now) {
            Ok(statement) => Ok(statement),
            Err(ParseError::Unsupported(message)) => Err(message),
            Err(ParseError::Invalid(message)) => return Err(Error::Parse(message)),
        });
    }
    Ok(statements)
}

/// A request's `q` split into its statements' texts, as [`parse_query`]
/// splits it (one per statement it answers).
pub fn statement_texts(q: &str) -> Result<Vec<&str>, Error> {
    split_statements(q).map_err(Error::Parse)
}

/// Parses one statement.
fn parse(text: &str, now: i64) -> Parsed<Statement> {
    let tokens = tokenize(text).map_err(ParseError::Invalid)?;
    if let Some(statement) = continuous_query(text, &tokens, now) {
        return statement;
    }
    if let Some(parsed) = query(text, &tokens, now) {
        return parsed;
    }
    if let Some(refusal) = refused::refusal(&tokens) {
        return unsupported(refusal);
    }
    admin(text, &tokens)
        .map(Statement::Admin)
        .map_err(ParseError::Invalid)
}

/// Parses one query statement; `None` if it is not one (an
/// administrative statement, or not InfluxQL chingest knows).
fn query(text: &str, tokens: &[Spanned], now: i64) -> Option<Parsed<Statement>> {
    let mut parser = Parser {
        text,
        tokens,
        at: 0,
        now,
        depth: 0,
    };
    let first = tokens.first()?;
    let statement = if first.token.is("SELECT") {
        parser.at = 1;
        parser.select()
    } else if first.token.is("EXPLAIN") {
        parser.at = 1;
        let analyze = parser.keyword("ANALYZE");
        parser
            .expect("SELECT")
            .and_then(|()| match parser.select()? {
                Statement::Select(select) => Ok(Statement::Explain { analyze, select }),
                _ => unreachable!("select() parses a SELECT"),
            })
    } else if first.token.is("SHOW") {
        parser.at = 1;
        parser.show()?
    } else {
        return None;
    };
    Some(statement.and_then(|statement| match parser.peek() {
        None => Ok(statement),
        Some(extra) => invalid(parser.found(extra, "the end of the statement")),
    }))
}

/// Splits a request's `q` at the semicolons between statements (not those
/// in strings, names or regexes). Each part is trimmed; empty parts are
/// dropped.
fn split_statements(q: &str) -> Result<Vec<&str>, String> {
    let tokens = tokenize(q)?;
    let mut statements = Vec::new();
    let mut start = 0;
    for token in tokens.iter().filter(|t| t.token == Token::Punct(";")) {
        statements.push(q[start..token.at].trim());
        start = token.at + 1;
    }
    statements.push(q[start..].trim());
    statements.retain(|s| !s.is_empty());
    Ok(statements)
}

/// Deepest nesting of parentheses and calls in a column: the parser
/// recurses once per level, and a request must not exhaust its stack.
const MAX_DEPTH: usize = 64;

struct Parser<'a> {
    text: &'a str,
    tokens: &'a [Spanned],
    at: usize,
    now: i64,
    /// Parentheses and calls open at this point.
    depth: usize,
}

/// Keywords that start a clause after `WHERE`: where its text ends.
const CLAUSES: [&str; 7] = [
    "GROUP", "ORDER", "LIMIT", "OFFSET", "SLIMIT", "SOFFSET", "WITH",
];

impl<'a> Parser<'a> {
    fn peek(&self) -> Option<&'a Spanned> {
        self.tokens.get(self.at)
    }

    fn peek_token(&self) -> Option<&'a Token> {
        self.peek().map(|t| &t.token)
    }

    fn next(&mut self) -> Option<&'a Spanned> {
        let token = self.tokens.get(self.at);
        self.at += 1;
        token
    }

    /// InfluxDB's wording: `found X, expected Y at line 1, char N`.
    fn found(&self, token: &Spanned, expected: &str) -> String {
        let (line, char) = position(self.text, token.at);
        format!(
            "found {}, expected {expected} at line {line}, char {char}",
            token.token.describe()
        )
    }

    fn found_next(&mut self, expected: &str) -> String {
        match self.next() {
            Some(token) => self.found(token, expected),
            None => {
                let (line, char) = position(self.text, self.text.len());
                format!("found EOF, expected {expected} at line {line}, char {char}")
            }
        }
    }

    fn keyword(&mut self, word: &str) -> bool {
        let matched = self.peek_token().is_some_and(|t| t.is(word));
        if matched {
            self.at += 1;
        }
        matched
    }

    fn expect(&mut self, word: &str) -> Parsed<()> {
        match self.keyword(word) {
            true => Ok(()),
            false => invalid(self.found_next(word)),
        }
    }

    fn punct(&mut self, p: &'static str) -> bool {
        let matched = self.peek_token() == Some(&Token::Punct(p));
        if matched {
            self.at += 1;
        }
        matched
    }

    fn expect_punct(&mut self, p: &'static str) -> Parsed<()> {
        match self.punct(p) {
            true => Ok(()),
            false => invalid(self.found_next(p)),
        }
    }

    /// A name: bare (not a clause keyword) or quoted.
    fn name(&mut self) -> Parsed<String> {
        match self.peek_token() {
            Some(Token::Quoted(name)) => {
                self.at += 1;
                Ok(name.clone())
            }
            Some(Token::Ident(name)) if !is_reserved(name) => {
                self.at += 1;
                Ok(name.clone())
            }
            _ => invalid(self.found_next("identifier")),
        }
    }

    fn unsigned(&mut self, what: &str) -> Parsed<u64> {
        match self.peek_token() {
            Some(Token::Integer(n)) if *n >= 0 => {
                self.at += 1;
                Ok(*n as u64)
            }
            _ => invalid(self.found_next(&format!("integer for {what}"))),
        }
    }

    fn show(&mut self) -> Option<Parsed<Statement>> {
        if let Some((what, exact)) = self.cardinality_head() {
            return Some(self.cardinality(what, exact));
        }
        let what = if self.keyword("MEASUREMENTS") {
            "MEASUREMENTS"
        } else if self.keyword("SERIES") {
            "SERIES"
        } else if self.keyword("TAG") {
            match (self.keyword("KEYS"), self.keyword("VALUES")) {
                (true, _) => "TAG KEYS",
                (_, true) => "TAG VALUES",
                _ => return Some(invalid(self.found_next("KEYS or VALUES"))),
            }
        } else if self.keyword("FIELD") {
            match self.keyword("KEYS") {
                true => "FIELD KEYS",
                false => return None,
            }
        } else {
            return None;
        };
        Some(self.show_rest(what))
    }

    fn show_rest(&mut self, what: &str) -> Parsed<Statement> {
        let mut show = Show::default();
        if self.keyword("ON") {
            show.database = Some(self.name()?);
        }
        if what != "MEASUREMENTS" && self.keyword("FROM") {
            show.from = self.measurements()?;
        }
        let mut with = None;
        let mut keys = None;
        if what == "MEASUREMENTS" && self.keyword("WITH") {
            self.expect("MEASUREMENT")?;
            with = Some(match self.next().map(|t| &t.token) {
                Some(Token::Punct("=")) => Name::Exact(self.name()?),
                Some(Token::Punct("=~")) => Name::Regex(self.regex()?),
                _ => return invalid(self.found_previous("= or =~")),
            });
        }
        if what == "TAG VALUES" {
            self.expect("WITH")?;
            self.expect("KEY")?;
            keys = Some(self.key_filter()?);
        }
        if self.keyword("WHERE") {
            if what == "FIELD KEYS" {
                return unsupported("SHOW FIELD KEYS … WHERE is not supported");
            }
            let selection = self.condition()?;
            if selection.start.is_some() || selection.stop.is_some() {
                return unsupported(format!(
                    "SHOW {what} with a time condition is not supported"
                ));
            }
            show.tags = Some(selection.tags);
        }
        self.limit_offset(&mut show)?;
        Ok(match what {
            "MEASUREMENTS" => Statement::ShowMeasurements { show, with },
            "TAG KEYS" => Statement::ShowTagKeys(show),
            "TAG VALUES" => Statement::ShowTagValues {
                show,
                keys: keys.unwrap_or(KeyFilter::In(Vec::new())),
            },
            "FIELD KEYS" => Statement::ShowFieldKeys(show),
            _ => Statement::ShowSeries(show),
        })
    }

    /// A `SHOW`'s `LIMIT n` and `OFFSET n`; `LIMIT 0` is no limit, as
    /// InfluxDB reads it.
    fn limit_offset(&mut self, show: &mut Show) -> Parsed<()> {
        if self.keyword("LIMIT") {
            show.limit = Some(self.unsigned("LIMIT")?).filter(|&n| n > 0);
        }
        if self.keyword("OFFSET") {
            show.offset = self.unsigned("OFFSET")?;
        }
        Ok(())
    }

    /// After `SHOW`: `SERIES`, `MEASUREMENT`, `FIELD KEY`, `TAG KEY` or
    /// `TAG VALUES`, then `[EXACT] CARDINALITY`: what is counted, as the
    /// statement names it, and whether `EXACT` was given; `None`, with
    /// nothing read, for the other `SHOW`s.
    fn cardinality_head(&mut self) -> Option<(&'static str, bool)> {
        let is = |i: usize, word: &str| {
            self.tokens
                .get(self.at + i)
                .is_some_and(|t| t.token.is(word))
        };
        let (what, words) = if is(0, "SERIES") {
            ("SERIES", 1)
        } else if is(0, "MEASUREMENT") {
            ("MEASUREMENT", 1)
        } else if is(0, "FIELD") && is(1, "KEY") {
            ("FIELD KEY", 2)
        } else if is(0, "TAG") && is(1, "KEY") {
            ("TAG KEY", 2)
        } else if is(0, "TAG") && is(1, "VALUES") {
            ("TAG VALUES", 2)
        } else {
            return None;
        };
        let exact = is(words, "EXACT");
        let words = words + usize::from(exact);
        if !is(words, "CARDINALITY") {
            return None;
        }
        self.at += words + 1;
        Some((what, exact))
    }

    /// The clauses of `SHOW <what> [EXACT] CARDINALITY`, in InfluxDB's
    /// order: `ON`, `FROM`, `WITH KEY` (of `TAG VALUES`), `WHERE`, `GROUP
    /// BY`, `LIMIT`, `OFFSET`.
    fn cardinality(&mut self, what: &'static str, exact: bool) -> Parsed<Statement> {
        let mut show = Show::default();
        if self.keyword("ON") {
            show.database = Some(self.name()?);
        }
        if self.keyword("FROM") {
            show.from = self.measurements()?;
        }
        let counted = match what {
            "SERIES" => Counted::Series,
            "MEASUREMENT" => Counted::Measurements,
            "FIELD KEY" => Counted::FieldKeys,
            "TAG KEY" => Counted::TagKeys,
            _ => {
                self.expect("WITH")?;
                self.expect("KEY")?;
                Counted::TagValues(self.key_filter()?)
            }
        };
        if self.keyword("WHERE") {
            let selection = self.condition()?;
            // The series table has no times; InfluxDB refuses them too
            // (but for TAG VALUES, where it answers nothing).
            if selection.start.is_some() || selection.stop.is_some() {
                let exact = if exact { " EXACT" } else { "" };
                return unsupported(format!(
                    "SHOW {what}{exact} CARDINALITY doesn't support time in WHERE clause"
                ));
            }
            if let Some(field) = selection.fields.first() {
                return unsupported(format!(
                    "SHOW {what} CARDINALITY counts by tags: the condition on {:?} ({} …) \
                     is not on a tag",
                    field.field, field.op
                ));
            }
            show.tags = Some(selection.tags);
        }
        let group_by = match self.keyword("GROUP") {
            true => {
                self.expect("BY")?;
                self.tag_dimensions()?
            }
            false => GroupBy::Nothing,
        };
        self.limit_offset(&mut show)?;
        let estimate = !exact
            && matches!(counted, Counted::Series | Counted::Measurements)
            && show.from.is_empty()
            && show.tags.is_none()
            && group_by == GroupBy::Nothing
            && show.limit.is_none()
            && show.offset == 0;
        Ok(Statement::ShowCardinality(Cardinality {
            counted,
            show,
            group_by,
            estimate,
        }))
    }

    /// `GROUP BY` of a `SHOW … CARDINALITY`: tag keys, or `*`.
    fn tag_dimensions(&mut self) -> Parsed<GroupBy> {
        let mut tags = Vec::new();
        let mut every = false;
        loop {
            match self.peek_token() {
                Some(Token::Punct("*")) => {
                    self.at += 1;
                    every = true;
                }
                Some(t) if t.is("time") && self.next_is_open() => {
                    return unsupported("GROUP BY time() of a SHOW … CARDINALITY is not supported")
                }
                Some(Token::Regex(_)) => return unsupported("GROUP BY /regex/ is not supported"),
                _ => tags.push(self.name()?),
            }
            if !self.punct(",") {
                break;
            }
        }
        Ok(match every {
            true => GroupBy::All,
            false => GroupBy::Tags(tags),
        })
    }

    fn found_previous(&self, expected: &str) -> String {
        match self.tokens.get(self.at.saturating_sub(1)) {
            Some(token) => self.found(token, expected),
            None => format!("found EOF, expected {expected}"),
        }
    }

    fn regex(&mut self) -> Parsed<String> {
        match self.peek_token() {
            Some(Token::Regex(re)) => {
                self.at += 1;
                Ok(re.clone())
            }
            _ => invalid(self.found_next("regex")),
        }
    }

    fn key_filter(&mut self) -> Parsed<KeyFilter> {
        Ok(match self.next().map(|t| &t.token) {
            Some(Token::Punct("=")) => KeyFilter::Equals(self.name()?),
            Some(Token::Punct("!=" | "<>")) => KeyFilter::NotEquals(self.name()?),
            Some(Token::Punct("=~")) => KeyFilter::Matches(self.regex()?),
            Some(Token::Punct("!~")) => KeyFilter::NotMatches(self.regex()?),
            Some(t) if t.is("IN") => {
                self.expect_punct("(")?;
                let mut keys = vec![self.name()?];
                while self.punct(",") {
                    keys.push(self.name()?);
                }
                self.expect_punct(")")?;
                KeyFilter::In(keys)
            }
            _ => return invalid(self.found_previous("=, !=, =~, !~ or IN")),
        })
    }

    /// The `WHERE` clause up to the next clause keyword, parsed.
    fn condition(&mut self) -> Parsed<Selection> {
        let start = self.peek().map_or(self.text.len(), |t| t.at);
        let mut depth = 0usize;
        while let Some(token) = self.peek() {
            match &token.token {
                Token::Punct("(") => depth += 1,
                Token::Punct(")") if depth == 0 => break,
                Token::Punct(")") => depth -= 1,
                t if depth == 0 && CLAUSES.iter().any(|k| t.is(k)) => break,
                t if depth == 0 && (t.is("fill") || t.is("tz")) && self.next_is_open() => break,
                _ => {}
            }
            self.at += 1;
        }
        let end = self.peek().map_or(self.text.len(), |t| t.at);
        let text = &self.text[start..end];
        if text.trim().is_empty() {
            return invalid(self.found_next("a condition after WHERE"));
        }
        condition::parse(text, Dialect::InfluxQl, self.now)
            .or_else(|err| unsupported(format!("WHERE {}: {err}", text.trim())))
    }

    fn next_is_open(&self) -> bool {
        self.tokens.get(self.at + 1).map(|t| &t.token) == Some(&Token::Punct("("))
    }

    /// A `FROM` of measurements only.
    fn measurements(&mut self) -> Parsed<Vec<Source>> {
        let mut sources = vec![self.source()?];
        while self.punct(",") {
            sources.push(self.source()?);
        }
        Ok(sources)
    }

    /// A `SELECT`'s `FROM`: measurements, or subqueries.
    fn sources(&mut self) -> Parsed<(Vec<Source>, Vec<Select>)> {
        let (mut sources, mut subqueries) = (Vec::new(), Vec::new());
        loop {
            match self.peek_token() {
                Some(Token::Punct("(")) => subqueries.push(self.subquery()?),
                _ => sources.push(self.source()?),
            }
            if !self.punct(",") {
                break;
            }
        }
        if !sources.is_empty() && !subqueries.is_empty() {
            return unsupported("a FROM of measurements and subqueries together is not supported");
        }
        Ok((sources, subqueries))
    }

    /// `(SELECT …)`, nested no deeper than [`MAX_DEPTH`].
    fn subquery(&mut self) -> Parsed<Select> {
        self.expect_punct("(")?;
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return invalid(format!("subqueries nest deeper than {MAX_DEPTH} levels"));
        }
        self.expect("SELECT")?;
        let Statement::Select(select) = self.select()? else {
            unreachable!("select() parses a SELECT")
        };
        self.depth -= 1;
        self.expect_punct(")")?;
        Ok(*select)
    }

    fn source(&mut self) -> Parsed<Source> {
        // Up to three parts separated by dots; the middle one may be empty.
        let mut parts: Vec<Option<Name>> = Vec::new();
        loop {
            let part = match self.peek_token() {
                Some(Token::Regex(re)) => {
                    self.at += 1;
                    Some(Name::Regex(re.clone()))
                }
                Some(Token::Punct(".")) => None,
                _ => Some(Name::Exact(self.name()?)),
            };
            parts.push(part);
            if parts.len() == 3 || !self.punct(".") {
                break;
            }
        }
        let exact = |part: Option<Name>| -> Parsed<Option<String>> {
            match part {
                None => Ok(None),
                Some(Name::Exact(name)) => Ok(Some(name)),
                Some(Name::Regex(_)) => unsupported("only the measurement may be a regex"),
            }
        };
        let mut parts = parts.into_iter().rev();
        let Some(Some(measurement)) = parts.next() else {
            return invalid(self.found_previous("measurement"));
        };
        let retention_policy = exact(parts.next().flatten())?;
        let database = exact(parts.next().flatten())?;
        Ok(Source {
            database,
            retention_policy,
            measurement,
        })
    }

    fn select(&mut self) -> Parsed<Statement> {
        let mut fields = vec![self.field()?];
        while self.punct(",") {
            fields.push(self.field()?);
        }
        let target = match self.keyword("INTO") {
            true => Some(self.target()?),
            false => None,
        };
        self.expect("FROM")?;
        let (sources, subqueries) = self.sources()?;
        let condition = match self.keyword("WHERE") {
            true => self.condition()?,
            false => Selection::everything(),
        };
        let mut select = Select {
            fields,
            sources,
            subqueries,
            condition,
            interval: None,
            group_by: GroupBy::Nothing,
            fill: Fill::Null,
            descending: false,
            limit: None,
            offset: 0,
            slimit: None,
            soffset: 0,
            time_zone: None,
        };
        if self.keyword("GROUP") {
            self.expect("BY")?;
            self.dimensions(&mut select)?;
        }
        if self.peek_token().is_some_and(|t| t.is("fill")) {
            self.at += 1;
            select.fill = self.fill()?;
        }
        if self.keyword("ORDER") {
            self.expect("BY")?;
            if !self.keyword("time") {
                return invalid("only ORDER BY time supported at this time");
            }
            if self.keyword("DESC") {
                select.descending = true;
            } else {
                self.keyword("ASC");
            }
        }
        if self.keyword("LIMIT") {
            select.limit = Some(self.unsigned("LIMIT")?);
        }
        if self.keyword("OFFSET") {
            select.offset = self.unsigned("OFFSET")?;
        }
        if self.keyword("SLIMIT") {
            select.slimit = Some(self.unsigned("SLIMIT")?);
        }
        if self.keyword("SOFFSET") {
            select.soffset = self.unsigned("SOFFSET")?;
        }
        if self.keyword("tz") {
            self.expect_punct("(")?;
            match self.next().map(|t| &t.token) {
                Some(Token::Str(zone)) => match zone.parse() {
                    Ok(zone) => select.time_zone = Some(zone),
                    Err(_) => return invalid(format!("unable to find time zone {zone}")),
                },
                _ => return invalid(self.found_previous("a time zone string")),
            }
            self.expect_punct(")")?;
        }
        Ok(match target {
            Some(target) => Statement::SelectInto(Box::new(SelectInto { select, target })),
            None => Statement::Select(Box::new(select)),
        })
    }

    /// An `INTO` target: up to three names separated by dots (the middle
    /// one may be empty), the last one `:MEASUREMENT` or a name.
    fn target(&mut self) -> Parsed<IntoTarget> {
        let mut parts: Vec<Option<String>> = Vec::new();
        let mut back_reference = false;
        loop {
            let part = if self.punct(":") {
                self.expect("MEASUREMENT")?;
                back_reference = true;
                None
            } else if self.peek_token() == Some(&Token::Punct(".")) {
                None
            } else {
                Some(self.name()?)
            };
            parts.push(part);
            if back_reference || parts.len() == 3 || !self.punct(".") {
                break;
            }
        }
        let mut parts = parts.into_iter().rev();
        let measurement = parts.next().flatten();
        if measurement.is_none() && !back_reference {
            return invalid(self.found_next("measurement"));
        }
        Ok(IntoTarget {
            measurement,
            retention_policy: parts.next().flatten(),
            database: parts.next().flatten(),
        })
    }

    /// `CREATE CONTINUOUS QUERY` after its first two words.
    fn create_continuous_query(&mut self) -> Parsed<Admin> {
        self.expect("QUERY")?;
        let name = self.name()?;
        self.expect("ON")?;
        let database = self.name()?;
        let (mut resample_every, mut resample_for) = (None, None);
        if self.keyword("RESAMPLE") {
            if self.keyword("EVERY") {
                resample_every = Some(self.duration("RESAMPLE EVERY")?);
            }
            if self.keyword("FOR") {
                resample_for = Some(self.duration("RESAMPLE FOR")?);
            }
            if resample_every.is_none() && resample_for.is_none() {
                return invalid(self.found_next("EVERY, FOR"));
            }
            if resample_every.or(resample_for).is_some_and(|d| d <= 0) {
                return invalid("RESAMPLE EVERY and FOR must be positive durations");
            }
        }
        self.expect("BEGIN")?;
        // The query runs up to the statement's last token, `END`.
        let begin = self.at;
        let last = self.tokens.len().saturating_sub(1);
        if last <= begin || !self.tokens[last].token.is("END") {
            self.at = self.tokens.len();
            return invalid(self.found_next("END"));
        }
        let inner = &self.text[self.tokens[begin].at..self.tokens[last].at];
        self.at = self.tokens.len();
        let query = match parse(inner, self.now)? {
            Statement::SelectInto(query) => *query,
            Statement::Select(_) => return invalid("a continuous query's SELECT must have INTO"),
            _ => return invalid(format!("found {}, expected SELECT", inner.trim())),
        };
        let Some(interval) = query.select.interval else {
            return invalid("a continuous query must have GROUP BY time(...)");
        };
        if let Some(covers) = resample_for.filter(|&d| d < interval.every) {
            return invalid(format!(
                "FOR duration must be >= GROUP BY time duration: must be a minimum of {}, got {}",
                duration_text(interval.every),
                duration_text(covers)
            ));
        }
        let aggregated = query
            .select
            .fields
            .iter()
            .any(|field| matches!(field.expr, Expr::Call { .. }));
        if !aggregated {
            return unsupported("continuous queries must be aggregate queries");
        }
        Ok(Admin::CreateContinuousQuery(Box::new(
            CreateContinuousQuery {
                name,
                database,
                resample_every,
                resample_for,
                query,
                text: self.text.trim().to_owned(),
            },
        )))
    }

    fn dimensions(&mut self, select: &mut Select) -> Parsed<()> {
        let mut tags = Vec::new();
        loop {
            match self.peek_token() {
                Some(t) if t.is("time") && self.next_is_open() => {
                    self.at += 2;
                    let every = self.duration("GROUP BY time interval")?;
                    if every <= 0 {
                        return invalid("GROUP BY time interval must be positive");
                    }
                    let mut offset = 0;
                    if self.punct(",") {
                        let negative = self.punct("-");
                        offset = self.duration("GROUP BY time offset")?;
                        if negative {
                            offset = -offset;
                        }
                    }
                    self.expect_punct(")")?;
                    if select.interval.is_some() {
                        return invalid("GROUP BY time given twice");
                    }
                    select.interval = Some(Interval {
                        every,
                        offset: offset.rem_euclid(every),
                    });
                }
                Some(Token::Punct("*")) => {
                    self.at += 1;
                    select.group_by = GroupBy::All;
                }
                Some(Token::Regex(_)) => return unsupported("GROUP BY /regex/ is not supported"),
                _ => tags.push(self.name()?),
            }
            if !self.punct(",") {
                break;
            }
        }
        if !tags.is_empty() && select.group_by != GroupBy::All {
            select.group_by = GroupBy::Tags(tags);
        }
        Ok(())
    }

    fn duration(&mut self, what: &str) -> Parsed<i64> {
        match self.peek_token() {
            Some(Token::Duration(ns)) => {
                self.at += 1;
                Ok(*ns)
            }
            _ => invalid(self.found_next(&format!("duration for {what}"))),
        }
    }

    fn fill(&mut self) -> Parsed<Fill> {
        self.expect_punct("(")?;
        let fill = match self.next().map(|t| &t.token) {
            Some(t) if t.is("null") => Fill::Null,
            Some(t) if t.is("none") => Fill::None,
            Some(t) if t.is("previous") => Fill::Previous,
            Some(t) if t.is("linear") => Fill::Linear,
            Some(Token::Integer(n)) => Fill::Integer(*n),
            Some(Token::Number(n)) => Fill::Float(*n),
            Some(Token::Punct("-")) => match self.next().map(|t| &t.token) {
                Some(Token::Integer(n)) => Fill::Integer(-n),
                Some(Token::Number(n)) => Fill::Float(-n),
                _ => return invalid(self.found_previous("number")),
            },
            _ => return invalid("expected number argument in fill()"),
        };
        self.expect_punct(")")?;
        Ok(fill)
    }

    fn field(&mut self) -> Parsed<Field> {
        let expr = self.expr()?;
        if let Some(word) = self.peek_token().filter(|t| t.is("AND") || t.is("OR")) {
            return invalid(format!(
                "invalid operator {} in SELECT clause; operator is intended for WHERE clause",
                word.describe().to_ascii_uppercase()
            ));
        }
        let alias = match self.keyword("AS") {
            true => Some(self.name()?),
            false => None,
        };
        Ok(Field { expr, alias })
    }

    /// A column: terms joined by operators, by precedence.
    fn expr(&mut self) -> Parsed<Expr> {
        self.nested(|parser| parser.binary(1))
    }

    /// Runs `parse` one level deeper, refusing a column nested past
    /// [`MAX_DEPTH`].
    fn nested(&mut self, parse: impl FnOnce(&mut Self) -> Parsed<Expr>) -> Parsed<Expr> {
        self.depth += 1;
        if self.depth > MAX_DEPTH {
            return invalid(format!("the column nests deeper than {MAX_DEPTH} levels"));
        }
        let expr = parse(self);
        self.depth -= 1;
        expr
    }

    /// Operators binding at least as tightly as `precedence`, left to
    /// right.
    fn binary(&mut self, precedence: u8) -> Parsed<Expr> {
        let mut left = self.unary()?;
        while let Some(op) = match self.peek_token() {
            Some(Token::Punct(p)) => {
                BinaryOp::from_punct(p).filter(|op| op.precedence() >= precedence)
            }
            _ => None,
        } {
            self.at += 1;
            let right = self.nested(|parser| parser.binary(op.precedence() + 1))?;
            left = Expr::Binary {
                op,
                left: Box::new(left),
                right: Box::new(right),
            };
        }
        Ok(left)
    }

    /// A term, or `-` before one: a negative number, or `-1 * term`.
    fn unary(&mut self) -> Parsed<Expr> {
        if !self.punct("-") {
            return self.term();
        }
        Ok(match self.nested(Self::unary)? {
            Expr::Integer(n) => Expr::Integer(n.wrapping_neg()),
            Expr::Number(n) => Expr::Number(-n),
            term => Expr::Binary {
                op: BinaryOp::Mul,
                left: Box::new(Expr::Integer(-1)),
                right: Box::new(term),
            },
        })
    }

    fn term(&mut self) -> Parsed<Expr> {
        let Some(token) = self.peek() else {
            return invalid(self.found_next("field or function"));
        };
        let expr = match &token.token {
            Token::Punct("*") => {
                self.at += 1;
                Expr::Wildcard
            }
            Token::Punct("(") => {
                self.at += 1;
                let inner = self.expr()?;
                self.expect_punct(")")?;
                inner
            }
            Token::Integer(n) => {
                self.at += 1;
                Expr::Integer(*n)
            }
            Token::Number(n) => {
                self.at += 1;
                Expr::Number(*n)
            }
            Token::Duration(ns) => {
                self.at += 1;
                Expr::Duration(*ns)
            }
            Token::Str(s) => {
                self.at += 1;
                Expr::Str(s.clone())
            }
            Token::Ident(name) if self.next_is_open() => {
                self.at += 2;
                let mut args = Vec::new();
                if !self.punct(")") {
                    args.push(self.expr()?);
                    while self.punct(",") {
                        args.push(self.expr()?);
                    }
                    self.expect_punct(")")?;
                }
                Expr::Call {
                    name: name.to_ascii_lowercase(),
                    args,
                }
            }
            Token::Regex(_) => return unsupported("a /regex/ field selector is not supported"),
            Token::Ident(name) if !is_reserved(name) => Expr::Var {
                name: self.name()?,
                cast: None,
            },
            Token::Quoted(_) => Expr::Var {
                name: self.name()?,
                cast: None,
            },
            _ => return invalid(self.found_next("identifier, string, number, bool")),
        };
        if self.punct("::") {
            let cast = match self.next().map(|t| &t.token) {
                Some(Token::Ident(cast)) => cast.to_ascii_lowercase(),
                _ => return invalid(self.found_previous("a type after ::")),
            };
            return match expr {
                Expr::Var { name, .. } => Ok(Expr::Var {
                    name,
                    cast: Some(cast),
                }),
                _ => invalid("only a field or tag takes ::type"),
            };
        }
        Ok(expr)
    }
}

/// `CREATE CONTINUOUS QUERY`, `DROP CONTINUOUS QUERY name ON db` and
/// `SHOW CONTINUOUS QUERIES`; `None` for other statements.
fn continuous_query(text: &str, tokens: &[Spanned], now: i64) -> Option<Parsed<Statement>> {
    let is = |i: usize, word: &str| tokens.get(i).is_some_and(|t| t.token.is(word));
    if !is(1, "CONTINUOUS") {
        return None;
    }
    let mut parser = Parser {
        text,
        tokens,
        at: 2,
        now,
        depth: 0,
    };
    let statement = if is(0, "CREATE") {
        parser.create_continuous_query()
    } else if is(0, "DROP") {
        parser.expect("QUERY").and_then(|()| {
            let name = parser.name()?;
            parser.expect("ON")?;
            let database = parser.name()?;
            Ok(Admin::DropContinuousQuery { name, database })
        })
    } else if is(0, "SHOW") {
        parser
            .expect("QUERIES")
            .map(|()| Admin::ShowContinuousQueries)
    } else {
        return None;
    };
    Some(statement.and_then(|statement| match parser.peek() {
        None => Ok(Statement::Admin(statement)),
        Some(extra) => invalid(parser.found(extra, "the end of the statement")),
    }))
}

/// A duration as InfluxDB writes one: in its largest unit that divides it
/// (`1m`, `90s`).
pub(crate) fn duration_text(ns: i64) -> String {
    const UNITS: [(&str, i64); 8] = [
        ("w", 604_800_000_000_000),
        ("d", 86_400_000_000_000),
        ("h", 3_600_000_000_000),
        ("m", 60_000_000_000),
        ("s", 1_000_000_000),
        ("ms", 1_000_000),
        ("u", 1_000),
        ("ns", 1),
    ];
    let (unit, size) = UNITS
        .iter()
        .find(|(_, size)| ns % size == 0)
        .copied()
        .unwrap_or(("ns", 1));
    format!("{}{unit}", ns / size)
}

/// The levels of `SET DOWNSAMPLING` (its words between `DOWNSAMPLING` and
/// `ON`): `'30d:5m', '180d:1h'`, `NONE` or `DEFAULT`.
fn downsampling_setting(words: &[String]) -> Result<chingest::DownsamplingSetting, String> {
    use chingest::DownsamplingSetting;
    let levels: Vec<&str> = words
        .iter()
        .flat_map(|word| word.split(','))
        .map(|level| level.trim().trim_matches(|c| c == '\'' || c == '"'))
        .filter(|level| !level.is_empty())
        .collect();
    match levels.as_slice() {
        [] => Err("SET DOWNSAMPLING needs levels ('30d:5m', '180d:1h'), NONE or DEFAULT".into()),
        [word] if word.eq_ignore_ascii_case("NONE") => Ok(DownsamplingSetting::Off),
        [word] if word.eq_ignore_ascii_case("DEFAULT") => Ok(DownsamplingSetting::Configured),
        levels => chingest::Downsampling::parse(levels)
            .map(DownsamplingSetting::Levels)
            .map_err(|err| err.to_string()),
    }
}

/// A retention policy's duration: `INF`, or units like `1h30m`, `7d`, `52w`.
fn retention_duration(text: &str) -> Result<Option<Duration>, String> {
    if text.eq_ignore_ascii_case("inf") {
        return Ok(None);
    }
    let nanos = parse_duration(text)
        .map_err(|_| format!("invalid duration {text:?} (e.g. 1h30m, 7d, 52w, INF)"))?;
    // InfluxDB treats a zero duration as infinite.
    Ok((nanos != 0).then(|| Duration::from_nanos(nanos.unsigned_abs())))
}

/// The words of an administrative statement: a `"quoted name"` is one,
/// unquoted; other tokens written together are one, as written (so a bare
/// name may hold `-` or `.`, `CREATE DATABASE my-db`, where InfluxDB wants
/// it quoted).
fn words(text: &str, tokens: &[Spanned]) -> Vec<String> {
    let mut words = Vec::new();
    // The bare word being read, and where the last token ended.
    let mut bare: Option<(usize, usize)> = None;
    for token in tokens {
        if let Token::Quoted(name) = &token.token {
            words.extend(bare.take().map(|(at, end)| text[at..end].to_owned()));
            words.push(name.clone());
            continue;
        }
        bare = match bare {
            Some((at, end)) if end == token.at => Some((at, token.end)),
            other => {
                words.extend(other.map(|(at, end)| text[at..end].to_owned()));
                Some((token.at, token.end))
            }
        };
    }
    words.extend(bare.map(|(at, end)| text[at..end].to_owned()));
    words
}

/// Where an administrative statement's `WHERE` is: the first that stands
/// as a word with a condition after it, a token's index.
fn where_clause(text: &str, tokens: &[Spanned]) -> Option<usize> {
    tokens.iter().position(|t| {
        t.token.is("WHERE")
            && text[..t.at]
                .chars()
                .next_back()
                .is_none_or(char::is_whitespace)
            && text[t.end..].starts_with(char::is_whitespace)
    })
}

/// Parses an administrative statement.
fn admin(statement: &str, tokens: &[Spanned]) -> Result<Admin, String> {
    // The statement before its `WHERE` (text and tokens), and the condition.
    let (head, condition) = match where_clause(statement, tokens) {
        Some(i) => (
            (&statement[..tokens[i].at], &tokens[..i]),
            Some(&statement[tokens[i].end..]),
        ),
        None => ((statement, tokens), None),
    };
    if let Some(delete) = delete(head, condition)? {
        return Ok(delete);
    }
    let words = words(statement, tokens);
    let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
    let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
    match upper.as_slice() {
        ["CREATE", "DATABASE", _, ..] => Ok(Admin::CreateDatabase(words[2].clone())),
        ["SHOW", "DATABASES"] => Ok(Admin::ShowDatabases),
        ["SET", "DUPLICATE", "POLICY", _, rest @ ..] => {
            let policy = words[3].parse()?;
            let (database, measurement) = match rest {
                [] => (None, None),
                ["ON", _] => (Some(words[5].clone()), None),
                ["ON", _, "MEASUREMENT", _] => (Some(words[5].clone()), Some(words[7].clone())),
                _ => {
                    return Err(
                        "expected SET DUPLICATE POLICY append|last [ON db [MEASUREMENT m]]".into(),
                    )
                }
            };
            Ok(Admin::SetDuplicatePolicy {
                policy,
                database,
                measurement,
            })
        }
        ["SET", "DOWNSAMPLING", rest @ ..] => {
            let (levels, database) = match rest.iter().position(|w| *w == "ON") {
                Some(on) if on + 2 == rest.len() => {
                    (&words[2..2 + on], Some(words[3 + on].clone()))
                }
                Some(_) => {
                    return Err("expected SET DOWNSAMPLING '<age>:<interval>', … [ON db]".into())
                }
                None => (&words[2..], None),
            };
            Ok(Admin::SetDownsampling {
                setting: downsampling_setting(levels)?,
                database,
            })
        }
        ["SHOW", "DOWNSAMPLING"] => Ok(Admin::ShowDownsampling(None)),
        ["SHOW", "DOWNSAMPLING", "ON", _] => Ok(Admin::ShowDownsampling(Some(words[3].clone()))),
        ["SHOW", "DUPLICATE", "POLICIES"] => Ok(Admin::ShowDuplicatePolicies(None)),
        ["SHOW", "DUPLICATE", "POLICIES", "ON", _] => {
            Ok(Admin::ShowDuplicatePolicies(Some(words[4].clone())))
        }
        ["SHOW", "RETENTION", "POLICIES"] => Ok(Admin::ShowRetentionPolicies(None)),
        ["SHOW", "RETENTION", "POLICIES", "ON", _] => {
            Ok(Admin::ShowRetentionPolicies(Some(words[4].clone())))
        }
        ["CREATE" | "ALTER", "RETENTION", "POLICY", _, "ON", _, rest @ ..] => {
            let duration = match rest.iter().position(|w| *w == "DURATION") {
                Some(i) => {
                    retention_duration(words.get(6 + i + 1).ok_or("DURATION needs a value")?)?
                }
                None if upper[0] == "CREATE" => {
                    return Err("CREATE RETENTION POLICY needs a DURATION".into())
                }
                None => None,
            };
            Ok(Admin::CreateRetentionPolicy {
                name: words[3].clone(),
                database: words[5].clone(),
                duration,
            })
        }
        _ => Err(format!(
            "statement not supported: {statement:?}. /query answers SELECT, SHOW MEASUREMENTS, \
             SHOW TAG KEYS, SHOW TAG VALUES, SHOW FIELD KEYS, SHOW SERIES, SHOW … CARDINALITY, \
             EXPLAIN, CREATE DATABASE, SHOW DATABASES, SHOW RETENTION POLICIES, CREATE RETENTION \
             POLICY, DELETE, DROP SERIES, DROP MEASUREMENT, CREATE|DROP|SHOW CONTINUOUS QUERY, \
             SET DUPLICATE POLICY, SHOW DUPLICATE POLICIES, SET DOWNSAMPLING and SHOW \
             DOWNSAMPLING; SQL goes to /sql"
        )),
    }
}

/// `DELETE`, `DROP SERIES` and `DROP MEASUREMENT`; `None` for other
/// statements.
fn delete(
    (head, tokens): (&str, &[Spanned]),
    condition: Option<&str>,
) -> Result<Option<Admin>, String> {
    let words = words(head, tokens);
    let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
    let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
    let (drop_series, measurement) = match upper.as_slice() {
        ["DELETE"] if condition.is_some() => (false, None),
        ["DELETE", "FROM", _] => (false, Some(words[2].clone())),
        ["DROP", "SERIES"] if condition.is_some() => (true, None),
        ["DROP", "SERIES", "FROM", _] => (true, Some(words[3].clone())),
        ["DROP", "MEASUREMENT", _] if condition.is_none() => (true, Some(words[2].clone())),
        ["DELETE" | "DROP", ..] => {
            return Err(format!(
                "expected DELETE FROM m [WHERE …], DELETE WHERE …, DROP SERIES [FROM m] [WHERE …] \
                 or DROP MEASUREMENT m, got {head:?}"
            ))
        }
        _ => return Ok(None),
    };
    if measurement.as_deref().is_some_and(|m| m.starts_with('/')) {
        return Err("a measurement given as /regex/ is not supported; name it".into());
    }
    Ok(Some(Admin::Delete {
        drop_series,
        measurement,
        condition: condition.unwrap_or_default().to_owned(),
    }))
}

/// Keywords that cannot stand bare as names.
fn is_reserved(word: &str) -> bool {
    const RESERVED: [&str; 22] = [
        "SELECT", "FROM", "WHERE", "GROUP", "BY", "ORDER", "LIMIT", "OFFSET", "SLIMIT", "SOFFSET",
        "AS", "AND", "OR", "ON", "WITH", "INTO", "SHOW", "FILL", "ASC", "DESC", "KEY", "IN",
    ];
    RESERVED.iter().any(|k| word.eq_ignore_ascii_case(k))
}

/// 1-based line and character of byte offset `at`.
fn position(text: &str, at: usize) -> (usize, usize) {
    let before = &text[..at.min(text.len())];
    let line = before.matches('\n').count() + 1;
    let char = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, char)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn select(text: &str) -> Select {
        match parse(text, 1_000_000_000_000) {
            Ok(Statement::Select(select)) => *select,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn grafana_select() {
        let s = select(
            "SELECT mean(\"usage user\") AS m, last(x) FROM \"db\"..\"cpu\" WHERE \"host\" =~ /^a/ \
             AND time > now() - 1h GROUP BY time(1m, 30s), \"host\" fill(previous) \
             ORDER BY time DESC LIMIT 5 OFFSET 1 SLIMIT 2 tz('Europe/Paris')",
        );
        assert_eq!(s.fields.len(), 2);
        assert_eq!(s.fields[0].alias.as_deref(), Some("m"));
        assert_eq!(
            s.fields[0].expr,
            Expr::Call {
                name: "mean".into(),
                args: vec![Expr::Var {
                    name: "usage user".into(),
                    cast: None
                }]
            }
        );
        assert_eq!(s.sources[0].database.as_deref(), Some("db"));
        assert_eq!(s.sources[0].retention_policy, None);
        assert_eq!(s.sources[0].measurement, Name::Exact("cpu".into()));
        assert_eq!(
            s.condition.tags,
            TagPredicate::Matches("host".into(), "^a".into())
        );
        assert_eq!(
            s.condition.start,
            Some(1_000_000_000_000 - 3_600_000_000_000 + 1)
        );
        assert_eq!(
            s.interval,
            Some(Interval {
                every: 60_000_000_000,
                offset: 30_000_000_000
            })
        );
        assert_eq!(s.group_by, GroupBy::Tags(vec!["host".into()]));
        assert_eq!(s.fill, Fill::Previous);
        assert!(s.descending);
        assert_eq!((s.limit, s.offset, s.slimit), (Some(5), 1, Some(2)));
        assert_eq!(s.time_zone, Some(chrono_tz::Europe::Paris));
    }

    #[test]
    fn show_statements() {
        let parsed = |t| parse(t, 0).unwrap();
        assert_eq!(
            parsed("SHOW TAG VALUES FROM cpu WITH KEY IN (\"a\", b) WHERE c = 'd'"),
            Statement::ShowTagValues {
                show: Show {
                    from: vec![Source {
                        database: None,
                        retention_policy: None,
                        measurement: Name::Exact("cpu".into())
                    }],
                    tags: Some(TagPredicate::Equals("c".into(), "d".into())),
                    ..Show::default()
                },
                keys: KeyFilter::In(vec!["a".into(), "b".into()]),
            }
        );
        assert!(matches!(
            parsed("SHOW MEASUREMENTS WITH MEASUREMENT =~ /c.*/ LIMIT 3"),
            Statement::ShowMeasurements {
                with: Some(Name::Regex(_)),
                show: Show { limit: Some(3), .. }
            }
        ));
        assert!(matches!(
            parsed("show field keys from /x/"),
            Statement::ShowFieldKeys(_)
        ));
        let query = |t| query(t, &tokenize(t).unwrap(), 0);
        assert!(query("SHOW DATABASES").is_none());
        assert!(query("CREATE DATABASE x").is_none());
        assert_eq!(
            parsed("SHOW DATABASES"),
            Statement::Admin(Admin::ShowDatabases)
        );
    }

    #[test]
    fn cardinality_statements() {
        let parsed = |t| match parse(t, 0) {
            Ok(Statement::ShowCardinality(c)) => c,
            other => panic!("{t}: {other:?}"),
        };
        let cpu = |database: Option<&str>| Source {
            database: database.map(str::to_owned),
            retention_policy: None,
            measurement: Name::Exact("cpu".into()),
        };
        // The bare estimates, also ON a database; any other clause or
        // EXACT counts per measurement.
        for (text, counted) in [
            ("SHOW SERIES CARDINALITY", Counted::Series),
            ("show measurement cardinality on db", Counted::Measurements),
            ("SHOW SERIES CARDINALITY LIMIT 0 OFFSET 0", Counted::Series),
        ] {
            let c = parsed(text);
            assert!(c.estimate, "{text}");
            assert_eq!(c.counted, counted, "{text}");
        }
        for text in [
            "SHOW SERIES EXACT CARDINALITY",
            "SHOW SERIES CARDINALITY FROM cpu",
            "SHOW SERIES CARDINALITY WHERE host = 'a'",
            "SHOW MEASUREMENT CARDINALITY GROUP BY host",
            "SHOW MEASUREMENT CARDINALITY LIMIT 1",
            "SHOW MEASUREMENT CARDINALITY OFFSET 1",
            "SHOW TAG KEY CARDINALITY",
            "SHOW FIELD KEY CARDINALITY",
        ] {
            assert!(!parsed(text).estimate, "{text}");
        }
        assert_eq!(
            parsed(
                "SHOW SERIES EXACT CARDINALITY ON db FROM db..cpu WHERE region = 'eu' \
                 GROUP BY host, \"k,comma\" LIMIT 2 OFFSET 1"
            ),
            Cardinality {
                counted: Counted::Series,
                show: Show {
                    database: Some("db".into()),
                    from: vec![cpu(Some("db"))],
                    tags: Some(TagPredicate::Equals("region".into(), "eu".into())),
                    limit: Some(2),
                    offset: 1,
                },
                group_by: GroupBy::Tags(vec!["host".into(), "k,comma".into()]),
                estimate: false,
            }
        );
        assert_eq!(
            parsed("SHOW TAG VALUES EXACT CARDINALITY FROM cpu WITH KEY =~ /^h/ GROUP BY *"),
            Cardinality {
                counted: Counted::TagValues(KeyFilter::Matches("^h".into())),
                show: Show {
                    from: vec![cpu(None)],
                    ..Show::default()
                },
                group_by: GroupBy::All,
                estimate: false,
            }
        );
        assert_eq!(
            parsed("SHOW TAG KEY CARDINALITY FROM /./").counted,
            Counted::TagKeys
        );
        assert_eq!(
            parsed("show field key exact cardinality").counted,
            Counted::FieldKeys
        );
        // Not cardinalities: the other SHOWs read on as before.
        assert!(matches!(
            parse("SHOW SERIES FROM cpu", 0),
            Ok(Statement::ShowSeries(_))
        ));
        assert!(matches!(
            parse("SHOW TAG VALUES WITH KEY = cardinality", 0),
            Ok(Statement::ShowTagValues { .. })
        ));
    }

    #[test]
    fn cardinality_errors_are_influxdbs() {
        let err = |t| parse(t, 1_000_000_000_000).unwrap_err();
        // Not InfluxQL: the request is refused, naming the token.
        for (text, names) in [
            ("SHOW TAG VALUES CARDINALITY FROM cpu", "expected WITH"),
            ("SHOW SERIES EXACT", "EXACT"),
            ("SHOW MEASUREMENT CARDINALITY SLIMIT 1", "SLIMIT"),
            ("SHOW SERIES CARDINALITY GROUP host", "expected BY"),
            ("SHOW TAG KEY CARDINALITY LIMIT x", "LIMIT"),
        ] {
            assert!(
                matches!(err(text), ParseError::Invalid(ref m) if m.contains(names)),
                "{text}: {:?}",
                err(text)
            );
        }
        // InfluxQL chingest does not answer: the statement's error.
        for (text, names) in [
            (
                "SHOW SERIES EXACT CARDINALITY WHERE time > now() - 1h",
                "SHOW SERIES EXACT CARDINALITY doesn't support time in WHERE clause",
            ),
            (
                "SHOW TAG VALUES CARDINALITY WITH KEY = host WHERE time > 0",
                "SHOW TAG VALUES CARDINALITY doesn't support time",
            ),
            ("SHOW SERIES CARDINALITY WHERE usage > 1", "\"usage\" (> …)"),
            (
                "SHOW SERIES CARDINALITY GROUP BY time(1h)",
                "GROUP BY time()",
            ),
            ("SHOW SERIES CARDINALITY GROUP BY /h/", "GROUP BY /regex/"),
        ] {
            assert!(
                matches!(err(text), ParseError::Unsupported(ref m) if m.contains(names)),
                "{text}: {:?}",
                err(text)
            );
        }
    }

    #[test]
    fn refused_statements_are_their_results_error() {
        let parsed = parse_query(
            "SHOW USERS; SHOW STATS; DROP DATABASE db; SHOW DATABASES",
            0,
        )
        .unwrap();
        assert!(parsed[0]
            .as_ref()
            .unwrap_err()
            .starts_with("SHOW USERS is not supported"));
        assert!(parsed[1].as_ref().unwrap_err().contains("/metrics"));
        assert!(parsed[2].as_ref().unwrap_err().contains("DROP DATABASE"));
        assert_eq!(parsed[3], Ok(Statement::Admin(Admin::ShowDatabases)));
        // A statement InfluxQL does not have is still not InfluxQL.
        assert!(matches!(parse_query("SHOW FOO", 0), Err(Error::Parse(_))));
    }

    #[test]
    fn show_limit_zero_is_no_limit() {
        assert!(matches!(
            parse("SHOW MEASUREMENTS LIMIT 0 OFFSET 1", 0),
            Ok(Statement::ShowMeasurements {
                show: Show {
                    limit: None,
                    offset: 1,
                    ..
                },
                ..
            })
        ));
    }

    #[test]
    fn errors_say_what_and_where() {
        let err = |t| parse(t, 0).unwrap_err();
        assert_eq!(
            err("SELECT FROM cpu"),
            ParseError::Invalid(
                "found FROM, expected identifier, string, number, bool at line 1, char 8".into()
            )
        );
        assert!(
            matches!(err("SELECT a AND b FROM cpu"), ParseError::Invalid(m) if m.contains("AND in SELECT"))
        );
        assert!(matches!(
            err("SELECT a FROM (SELECT b FROM c), d"),
            ParseError::Unsupported(_)
        ));
        assert!(matches!(
            err("SELECT a FROM (SELECT b FROM c"),
            ParseError::Invalid(_)
        ));
        let deep = format!(
            "SELECT a FROM {}SELECT a FROM m",
            "(SELECT a FROM ".repeat(100)
        );
        assert!(
            matches!(parse(&deep, 0).unwrap_err(), ParseError::Invalid(m) if m.contains("deeper"))
        );
        assert!(
            matches!(err("SELECT a FROM cpu extra"), ParseError::Invalid(m) if m.contains("extra"))
        );
        assert!(matches!(
            err("SELECT a FROM cpu GROUP BY time(0s)"),
            ParseError::Invalid(_)
        ));
        for nesting in ["(", "- ", "1 + (", "abs("] {
            let deep = format!("SELECT {}a FROM cpu", nesting.repeat(100_000));
            let e = parse(&deep, 0).unwrap_err();
            assert!(
                matches!(&e, ParseError::Invalid(m) if m.contains("deeper")),
                "{nesting}: {e:?}"
            );
        }
        let deep = format!("SELECT a FROM cpu WHERE {}", "(".repeat(100_000));
        assert!(matches!(err(&deep), ParseError::Unsupported(m) if m.contains("deeper")));
    }

    #[test]
    fn arithmetic_binds_as_influxql_does() {
        let column = |q: &str| match parse(&format!("SELECT {q} FROM m"), 0) {
            Ok(Statement::Select(select)) => select.fields[0].expr.clone(),
            other => panic!("{q}: {other:?}"),
        };
        let var = |name: &str| Expr::Var {
            name: name.into(),
            cast: None,
        };
        let op = |op, left, right| Expr::Binary {
            op,
            left: Box::new(left),
            right: Box::new(right),
        };
        assert_eq!(
            column("a + b * c"),
            op(
                BinaryOp::Add,
                var("a"),
                op(BinaryOp::Mul, var("b"), var("c"))
            )
        );
        assert_eq!(
            column("a - b - c"),
            op(
                BinaryOp::Sub,
                op(BinaryOp::Sub, var("a"), var("b")),
                var("c")
            )
        );
        assert_eq!(
            column("(a | b) & c"),
            op(
                BinaryOp::BitAnd,
                op(BinaryOp::BitOr, var("a"), var("b")),
                var("c")
            )
        );
        assert_eq!(column("-2"), Expr::Integer(-2));
        assert_eq!(column("-a"), op(BinaryOp::Mul, Expr::Integer(-1), var("a")));
    }

    fn admin(text: &str) -> Result<Admin, String> {
        super::admin(text, &tokenize(text)?)
    }

    #[test]
    fn statements_parse_with_bare_and_quoted_names() {
        let cases = [
            ("CREATE DATABASE telegraf", Ok(Admin::CreateDatabase("telegraf".into()))),
            ("create database \"my db\"", Ok(Admin::CreateDatabase("my db".into()))),
            ("SHOW DATABASES", Ok(Admin::ShowDatabases)),
            // Bare names run to the next space, as they always have here.
            ("CREATE DATABASE my-db.x", Ok(Admin::CreateDatabase("my-db.x".into()))),
            ("show retention policies on \"a\\\"b\"", Ok(Admin::ShowRetentionPolicies(Some("a\"b".into())))),
            (
                "CREATE RETENTION POLICY \"week\" ON \"telegraf\" DURATION 7d REPLICATION 1 DEFAULT",
                Ok(Admin::CreateRetentionPolicy {
                    name: "week".into(),
                    database: "telegraf".into(),
                    duration: Some(Duration::from_secs(7 * 86_400)),
                }),
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(
                admin(text).map_err(|_| ()),
                expected.map_err(|_: ()| ()),
                "{text}"
            );
        }
        let delete = |drop_series, m: Option<&str>, condition: &str| Admin::Delete {
            drop_series,
            measurement: m.map(str::to_owned),
            condition: condition.to_owned(),
        };
        for (text, expected) in [
            ("DELETE FROM cpu", delete(false, Some("cpu"), "")),
            (
                "delete from \"my where\" where host = 'where'",
                delete(false, Some("my where"), " host = 'where'"),
            ),
            (
                "DELETE WHERE time < now()",
                delete(false, None, " time < now()"),
            ),
            ("DROP SERIES FROM cpu", delete(true, Some("cpu"), "")),
            ("DROP SERIES WHERE a='b'", delete(true, None, " a='b'")),
            (
                "DROP MEASUREMENT \"c p u\"",
                delete(true, Some("c p u"), ""),
            ),
        ] {
            assert_eq!(admin(text), Ok(expected), "{text}");
        }
        for bad in [
            "DELETE",
            "DROP SERIES",
            "DROP MEASUREMENT m WHERE a='b'",
            "DELETE FROM /c/",
            "DELETE FROM m WHERE",
        ] {
            assert!(admin(bad).is_err(), "{bad}");
        }
        let err = admin("UPSERT INTO cpu").unwrap_err();
        assert!(err.contains("/sql"), "{err}");
        assert!(admin("CREATE DATABASE \"open").is_err());
    }

    #[test]
    fn downsampling_statements_parse() {
        use chingest::{Downsampling, DownsamplingSetting};
        let levels = |l: &[&str]| DownsamplingSetting::Levels(Downsampling::parse(l).unwrap());
        let set = |setting, database: Option<&str>| Admin::SetDownsampling {
            setting,
            database: database.map(str::to_owned),
        };
        for (text, expected) in [
            (
                "SET DOWNSAMPLING '30d:5m', '180d:1h' ON telegraf",
                set(levels(&["30d:5m", "180d:1h"]), Some("telegraf")),
            ),
            (
                "set downsampling '1d:5m','2d:1h'",
                set(levels(&["1d:5m", "2d:1h"]), None),
            ),
            (
                "SET DOWNSAMPLING none ON \"my db\"",
                set(DownsamplingSetting::Off, Some("my db")),
            ),
            (
                "SET DOWNSAMPLING DEFAULT",
                set(DownsamplingSetting::Configured, None),
            ),
            ("SHOW DOWNSAMPLING", Admin::ShowDownsampling(None)),
            (
                "show downsampling on db",
                Admin::ShowDownsampling(Some("db".into())),
            ),
        ] {
            assert_eq!(admin(text), Ok(expected), "{text}");
        }
        for (bad, why) in [
            ("SET DOWNSAMPLING", "needs levels"),
            ("SET DOWNSAMPLING ON db", "needs levels"),
            ("SET DOWNSAMPLING '1d:1h', '2d:5m'", "grow"),
            ("SET DOWNSAMPLING '1d:5m' ON a b", "expected"),
            ("SET DOWNSAMPLING '5m'", "<age>:<interval>"),
        ] {
            let err = admin(bad).unwrap_err();
            assert!(err.contains(why), "{bad}: {err}");
        }
    }

    #[test]
    fn retention_durations_parse_like_influxdb() {
        assert_eq!(
            retention_duration("1h30m"),
            Ok(Some(Duration::from_secs(5400)))
        );
        assert_eq!(
            retention_duration("52w"),
            Ok(Some(Duration::from_secs(52 * 604_800)))
        );
        assert_eq!(retention_duration("INF"), Ok(None));
        assert_eq!(retention_duration("0s"), Ok(None));
        assert!(retention_duration("7x").is_err());
        assert!(retention_duration("d").is_err());
    }

    #[test]
    fn requests_parse_whole_before_any_statement_runs() {
        let parsed = parse_query("SHOW DATABASES; SELECT a FROM cpu GROUP BY /b/", 0).unwrap();
        assert_eq!(parsed[0], Ok(Statement::Admin(Admin::ShowDatabases)));
        assert!(parsed[1].as_ref().unwrap_err().contains("regex"));
        let refused = parse_query("SHOW DATABASES; SELECT FROM cpu", 0).unwrap_err();
        assert!(matches!(refused, Error::Parse(m) if m.contains("found FROM")));
        assert!(matches!(parse_query("'open", 0), Err(Error::Parse(_))));
    }

    #[test]
    fn into_targets_name_a_measurement_or_refer_back_to_the_source() {
        let target = |text: &str| match parse(text, 0) {
            Ok(Statement::SelectInto(into)) => into.target,
            other => panic!("{text}: {other:?}"),
        };
        let named = |db: Option<&str>, rp: Option<&str>, m: Option<&str>| IntoTarget {
            database: db.map(str::to_owned),
            retention_policy: rp.map(str::to_owned),
            measurement: m.map(str::to_owned),
        };
        for (text, expected) in [
            ("SELECT * INTO m FROM cpu", named(None, None, Some("m"))),
            (
                "SELECT * INTO \"r p\".m FROM cpu",
                named(None, Some("r p"), Some("m")),
            ),
            (
                "SELECT * INTO d.r.m FROM cpu",
                named(Some("d"), Some("r"), Some("m")),
            ),
            (
                "SELECT * INTO d..m FROM cpu",
                named(Some("d"), None, Some("m")),
            ),
            (
                "SELECT mean(*) INTO :MEASUREMENT FROM /c/ GROUP BY time(1m)",
                named(None, None, None),
            ),
            (
                "SELECT * INTO d..:measurement FROM /c/",
                named(Some("d"), None, None),
            ),
            (
                "SELECT * INTO d.r.:MEASUREMENT FROM cpu",
                named(Some("d"), Some("r"), None),
            ),
        ] {
            assert_eq!(target(text), expected, "{text}");
        }
        let into = match parse("SELECT v INTO m FROM cpu WHERE time > 0", 0) {
            Ok(Statement::SelectInto(into)) => into,
            other => panic!("{other:?}"),
        };
        assert_eq!(
            into.select.sources[0].measurement,
            Name::Exact("cpu".into())
        );
        assert_eq!(into.select.condition.start, Some(1));
        for bad in [
            "SELECT * INTO :measure FROM cpu",
            "SELECT * INTO FROM cpu",
            "SELECT * INTO a.b.c.d FROM cpu",
        ] {
            assert!(
                matches!(parse(bad, 0), Err(ParseError::Invalid(_))),
                "{bad}"
            );
        }
        assert!(parse("SELECT * INTO m FROM cpu", 0).unwrap().writes());
        assert!(!parse("SELECT * FROM cpu", 0).unwrap().writes());
        assert!(parse("CREATE DATABASE x", 0).unwrap().writes());
        assert!(!parse("SHOW DATABASES", 0).unwrap().writes());
    }

    #[test]
    fn continuous_queries_are_checked_as_influxdb_checks_them() {
        let text = "CREATE CONTINUOUS QUERY \"c q\" ON db RESAMPLE EVERY 30s FOR 2m BEGIN \
                    SELECT mean(v) INTO db.autogen.m_1m FROM cpu GROUP BY time(1m, 10s), * END";
        let Ok(Statement::Admin(Admin::CreateContinuousQuery(create))) = parse(text, 0) else {
            panic!("{:?}", parse(text, 0));
        };
        assert_eq!(
            (create.name.as_str(), create.database.as_str()),
            ("c q", "db")
        );
        assert_eq!(create.resample_every, Some(30_000_000_000));
        assert_eq!(create.resample_for, Some(120_000_000_000));
        assert_eq!(create.text, text);
        assert_eq!(create.query.target.measurement.as_deref(), Some("m_1m"));
        assert_eq!(
            create.query.select.interval,
            Some(Interval {
                every: 60_000_000_000,
                offset: 10_000_000_000
            })
        );
        let invalid = |text: &str| match parse(text, 0) {
            Err(ParseError::Invalid(message)) => message,
            other => panic!("{text}: {other:?}"),
        };
        let cq = |middle: &str| format!("CREATE CONTINUOUS QUERY c ON db {middle}");
        for (middle, names) in [
            (
                "BEGIN SELECT mean(v) FROM cpu GROUP BY time(1m) END",
                "INTO",
            ),
            ("BEGIN SELECT mean(v) INTO m FROM cpu END", "GROUP BY time"),
            (
                "RESAMPLE BEGIN SELECT mean(v) INTO m FROM cpu GROUP BY time(1m) END",
                "EVERY, FOR",
            ),
            (
                "RESAMPLE FOR 30s BEGIN SELECT mean(v) INTO m FROM cpu GROUP BY time(1m) END",
                "minimum of 1m, got 30s",
            ),
            (
                "BEGIN SELECT mean(v) INTO m FROM cpu GROUP BY time(1m)",
                "expected END",
            ),
            ("BEGIN SHOW DATABASES END", "expected SELECT"),
            ("BEGIN END", "expected END"),
        ] {
            let message = invalid(&cq(middle));
            assert!(message.contains(names), "{middle}: {message}");
        }
        assert_eq!(
            parse(
                &cq("BEGIN SELECT v INTO m FROM cpu GROUP BY time(1m) END"),
                0
            ),
            Err(ParseError::Unsupported(
                "continuous queries must be aggregate queries".into()
            ))
        );
        assert_eq!(
            parse("drop continuous query \"c q\" on db", 0),
            Ok(Statement::Admin(Admin::DropContinuousQuery {
                name: "c q".into(),
                database: "db".into()
            }))
        );
        let show = parse("SHOW CONTINUOUS QUERIES", 0).unwrap();
        assert_eq!(show, Statement::Admin(Admin::ShowContinuousQueries));
        assert!(!show.is_admin() && !show.writes());
        assert!(invalid("SHOW CONTINUOUS QUERIES ON db").contains("the end of the statement"));
        assert_eq!(duration_text(90_000_000_000), "90s");
        assert_eq!(duration_text(3_600_000_000_000), "1h");
    }

    #[test]
    fn statements_split_outside_quotes() {
        assert_eq!(
            split_statements("SELECT a FROM b WHERE c = 'x;y'; SHOW MEASUREMENTS;").unwrap(),
            vec!["SELECT a FROM b WHERE c = 'x;y'", "SHOW MEASUREMENTS"]
        );
    }
}
