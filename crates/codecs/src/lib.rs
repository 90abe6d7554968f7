//! Protocol payloads as Arrow tables: what a Prometheus remote write
//! request ([`prometheus`]) or an OTLP metrics export ([`otlp`]) becomes
//! before it is stored, one [`Table`] per measurement it fills.
//!
//! [`compression`] decodes the gzip and snappy bodies they arrive in, and
//! [`arrow_stream`] the Arrow IPC streams clients write whole batches in.
//!
//! Decoding is a pure function of the message: no I/O, no async runtime,
//! no engine. The server reads the bytes and stores the tables
//! (`chingest::Ingestor::write_arrow_tables`); keeping the data models
//! here lets them be tested as "payload in, table out" and lets any front
//! end reuse them.

pub mod arrow_stream;
pub mod compression;
mod error;
pub mod otlp;
pub mod prometheus;
mod table;
mod wire;

pub use error::{panic_message, Error, Result};
pub use table::{Table, Tag};
