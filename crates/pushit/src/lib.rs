//! pushit: measures every lever of embedded chDB ingest, and chingest end to
//! end, on the machine it runs on.
//!
//! The binary (`src/main.rs`, one module per mode under `src/modes/`) runs
//! the sweeps; this library holds what the criterion benches share with it:
//! raw engine connections ([`engine`]), the five storage layouts and their
//! batches ([`layouts`]), the result tables ([`report`]), the scaling
//! charts ([`chart`]) and the OTLP host-metrics load ([`otlp_load`]).

pub mod chart;
pub mod engine;
pub mod layouts;
pub mod otlp_load;
pub mod report;

/// What can go wrong in a sweep.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The engine refused a statement.
    #[error("engine: {0}")]
    Engine(String),
    /// Generated data could not be built.
    #[error("data: {0}")]
    Data(String),
    /// A run stored a different number of rows than it inserted.
    #[error("{table}: inserted {expected} rows but {stored} are stored")]
    Verify {
        /// The table counted.
        table: String,
        /// Rows inserted.
        expected: u64,
        /// Rows counted.
        stored: u64,
    },
    /// A chart could not be drawn.
    #[error("chart {0}")]
    Chart(String),
}
