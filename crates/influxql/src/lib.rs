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
//! `fill()`, `derivative`/`difference` over the intervals or points,
//! `LIMIT`/`SLIMIT` per series, `tz()`. `last()` with no time condition is
//! answered from the ingestor's last-value cache when the measurement is
//! cached. docs/influxql.md lists what is supported and where answers
//! differ from InfluxDB's on purpose.
//!
//! The modules, each importing only those listed before it: `error`,
//! `answer` (the model), `lex` (tokens, `$name` binding), `condition`
//! (`WHERE` and delete predicates), `parse` (statements), `plan` (what every
//! plan shares), `show`, `select`, `admin`. `select` in turn: `model` (what
//! a statement asks), `sql` (its SQL, pure: [`select_sql`]), `after` (what
//! the rows still need: `fill()`, transformations, order, limits),
//! `recent` (aggregates from memory), `mod.rs` running them.

mod admin;
mod answer;
pub mod condition;
mod error;
mod lex;
mod parse;
mod plan;
mod select;
mod show;

pub use answer::{epoch_unit, Answer, Series, TimeFormat, Value};
pub use error::Error;
pub use lex::{bind, Param};
pub use parse::{parse_query, Admin, KeyFilter, Name, Select, Show, Statement};
pub use plan::Context;
pub use select::select_sql;

/// Answers one parsed statement.
pub async fn execute(ctx: &Context<'_>, statement: &Statement) -> Result<Answer, Error> {
    match statement {
        Statement::Select(select) => select::run(ctx, select).await,
        Statement::Admin(admin) => Ok(Answer {
            series: admin::run(ctx, admin).await?,
            zone: None,
        }),
        other => Ok(Answer {
            series: show::run(ctx, other).await?,
            zone: None,
        }),
    }
}
