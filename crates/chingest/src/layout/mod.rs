//! The storage format, public: how names become tables and columns
//! ([`names`]), how a tag set becomes a `series_id` ([`series`]), and the
//! tables' columns and DDL ([`schema`]). Pure: no engine, no I/O.

pub mod names;
pub mod rollup;
pub mod schema;
pub mod series;
