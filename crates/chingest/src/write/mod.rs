//! The write path, as stages: prepare (line protocol [`lp`], typed
//! [`points`], Arrow [`arrow_input`], rows built by [`chunk`]) → memory
//! [`budget`] → the log's [`appender`] → a table's [`batcher`] → its
//! [`flusher`]; [`replay`] runs the same rules on open.

pub(crate) mod appender;
pub(crate) mod arrow_input;
pub(crate) mod batcher;
pub(crate) mod budget;
pub mod chunk;
pub(crate) mod flusher;
pub(crate) mod lp;
pub(crate) mod points;
pub(crate) mod replay;
