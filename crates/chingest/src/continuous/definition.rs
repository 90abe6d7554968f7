//! What a continuous query is, as created: where it lives, the statement
//! its runner runs, and its [`Schedule`].

use super::schedule::Schedule;

/// One continuous query, as created.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinuousQuery {
    /// The database it was created on (`ON db`).
    pub database: String,
    /// Its name, one of a kind in its database.
    pub name: String,
    /// The statement that created it, as given: what its runner runs and
    /// `SHOW CONTINUOUS QUERIES` shows.
    pub statement: String,
    /// When it runs.
    pub schedule: Schedule,
}
