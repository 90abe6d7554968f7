//! InfluxQL (InfluxDB 1.x's query language) over chingest's public read
//! API: statements parsed with no I/O, queries translated to SQL over a
//! database's series table and fact tables and run on the engine's
//! read-only connections under the query limits, administrative statements
//! run on the ingestor, every answer in InfluxDB's model. A front end (the
//! server's `/query`) reads the request's parameters and credentials, hands
//! them over as a [`Context`], and writes the [`Answer`]s out; it maps
//! [`Error`] to its own errors.
//!
//! What SQL cannot say the way InfluxDB means it is done here, on the
//! engine's (small) grouped result: empty `GROUP BY time` intervals and
//! `fill()`, transformations over the intervals or points, arithmetic,
//! `LIMIT`/`SLIMIT` per series, `tz()`; and over the points the engine
//! reads, the aggregates whose InfluxDB rules SQL does not have (`mode`,
//! `integral`, `top`, …) and statements over subqueries' answers. `last()`
//! with no time condition is answered from the ingestor's last-value cache
//! when the measurement is cached. docs/influxql.md lists what is supported and where answers
//! differ from InfluxDB's on purpose.
//!
//! `SELECT … INTO` writes the answer back through the ingestor's write
//! path (`into`), and the continuous queries the library stores and
//! schedules run through [`ContinuousQueryRunner`], which the server hands
//! to the ingestor.
//!
//! The modules, each importing only those listed before it: `error`,
//! `answer` (the model), `lex` (tokens, `$name` binding), `condition`
//! (`WHERE` and delete predicates), `refused` (the statements chingest
//! refuses on purpose, and what to use instead), `parse` (statements),
//! `print` (a `SELECT` written back as InfluxQL), `plan` (what every plan shares), `show`, `cardinality` (`SHOW …
//! CARDINALITY`), `select`, `into`, `admin`, `continuous`. `select` in turn: `math` (arithmetic
//! over a row's cells), `technical` (technical analysis and Holt-Winters),
//! `transform` (functions of consecutive points),
//! `aggregate` (aggregates and selectors, their arguments), `model` (what a
//! statement asks), `reduce` (aggregates over points, in memory), `sql`
//! (its SQL, pure: [`select_sql`]), `rollup`, `after` (what the rows still
//! need: `fill()`, transformations, order, limits, the columns' formulas),
//! `recent` (aggregates from memory), `points` (the aggregates computed
//! from the points the engine reads), `subquery` (statements over other
//! statements' answers), `mod.rs` running them.

mod admin;
mod answer;
mod cardinality;
pub mod condition;
mod continuous;
mod error;
mod into;
mod lex;
mod parse;
mod plan;
mod print;
mod refused;
mod select;
mod show;

pub use answer::{epoch_unit, Answer, Series, TimeFormat, Value};
pub use continuous::ContinuousQueryRunner;
pub use error::Error;
pub use lex::{bind, Param};
pub use parse::{
    parse_query, statement_texts, Admin, Cardinality, CreateContinuousQuery, KeyFilter, Name,
    Select, SelectInto, Show, Statement,
};
pub use plan::Context;
pub use select::select_sql;

/// Answers one parsed statement.
pub async fn execute(ctx: &Context<'_>, statement: &Statement) -> Result<Answer, Error> {
    match statement {
        Statement::Select(select) => select::run(ctx, select).await,
        Statement::Explain { analyze, select } => select::explain(ctx, select, *analyze).await,
        Statement::SelectInto(statement) => into::run(ctx, statement).await,
        Statement::Admin(admin) => Ok(Answer {
            series: admin::run(ctx, admin).await?,
            zone: None,
        }),
        Statement::ShowCardinality(cardinality) => Ok(Answer {
            series: cardinality::run(ctx, cardinality).await?,
            zone: None,
        }),
        other => Ok(Answer {
            series: show::run(ctx, other).await?,
            zone: None,
        }),
    }
}
