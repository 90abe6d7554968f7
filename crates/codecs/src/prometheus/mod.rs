//! Prometheus remote write 1.0 (`prometheus.WriteRequest`) and 2.0
//! (`io.prometheus.write.v2.Request`) as Arrow tables: [`Decoded::v1`] and
//! [`Decoded::v2`] check a request and resolve it to strings, [`tables`]
//! builds one batch per measurement it fills. No I/O: the server reads
//! the snappy-compressed body and stores the tables as one write.
//!
//! Data model: every float sample is a row of one measurement,
//! [`SAMPLES`] (`prometheus`), whose tags are the series' labels (the
//! metric name as `__name__`) and whose field is [`VALUE`] (Float64, stale
//! markers kept as the NaN they are); times are the samples' milliseconds.
//! One table, not one per metric family: a scrape carries hundreds of
//! families with a few samples each, and a table per family would make
//! every flush an insert per family (the fan-out of docs/benchmarks.md
//! §5). 2.0 adds native histograms ([`HISTOGRAMS`]), exemplars
//! ([`EXEMPLARS`]) and created timestamps; metric metadata (type, help,
//! unit) goes to [`METADATA`], one point per family, the newest winning.
//! These names are the contract with readers (PromQL finds remote write's
//! series by them): they are defined here and nowhere else.

mod decode;
mod tables;

pub use decode::Decoded;
pub use tables::{
    tables, EXEMPLARS, HISTOGRAMS, MEASUREMENTS, METADATA, METADATA_FIELDS, METADATA_METRIC,
    SAMPLES, VALUE,
};
