//! The writes the protocols share: [`line_protocol`] (HTTP `/write` and
//! gRPC `Write`), the one write of tables a protocol decoded
//! (`chingest_codecs`), and OTLP's export around it. [`tables`] stores
//! every table of a request at once; a table whose newest point wins (a protocol's metadata, sent
//! again every minute and in retries) asks for the `last` duplicate
//! policy, unless its measurement has one; [`export_otlp`] is shared by
//! OTLP/HTTP (`http/otlp.rs`) and OTLP/gRPC (`grpc/otlp.rs`), with the
//! header that names its database. The codecs build the tables without
//! I/O; storing them is the server's, here.

use bytes::Bytes;
use chingest::{
    ArrowTable, DuplicatePolicy, Ingestor, MemoryReservation, Tags, WriteOptions, WriteOutcome,
};
use chingest_codecs::{otlp, Table};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsPartialSuccess, ExportMetricsServiceResponse,
};

use crate::error::ApiError;
use crate::metrics::Protocol;
use crate::state::AppState;

/// The header (OTLP/HTTP) or metadata (OTLP/gRPC) that names the database
/// of an OTLP export (over HTTP, the query parameter `db` wins).
pub(crate) const OTLP_DATABASE_HEADER: &str = "x-chingest-database";
/// The database of OTLP exports that name none.
pub(crate) const OTLP_DEFAULT_DATABASE: &str = "otel";

/// Writes line protocol, `body`, held under `reservation` until its rows are
/// built: then the body goes and its reservation passes over to the rows
/// (smaller than their text), so a request never waits for room while
/// holding memory the budget does not count, and bodies that fill the
/// budget cannot keep every request from its rows.
pub(crate) async fn line_protocol(
    ingestor: &Ingestor,
    db: &str,
    rp: &str,
    body: Bytes,
    reservation: MemoryReservation,
    options: &WriteOptions,
) -> chingest::Result<WriteOutcome> {
    let mut prepared = ingestor.prepare_lp(db, rp, &body, options).await?;
    drop(body);
    prepared.hold(reservation);
    ingestor.commit(prepared, options.durability).await
}

/// Writes `tables` as one write: every table is stored or none is.
pub(crate) async fn tables(
    ingestor: &Ingestor,
    db: &str,
    rp: &str,
    tables: &[Table<'_>],
    options: &WriteOptions,
) -> chingest::Result<usize> {
    let tags: Vec<Vec<(&str, &str)>> = tables
        .iter()
        .map(|t| t.tags.iter().map(|(k, v)| (*k, v.as_ref())).collect())
        .collect();
    let tables: Vec<ArrowTable<'_>> = tables
        .iter()
        .zip(&tags)
        .map(|(table, tags)| ArrowTable {
            measurement: table.measurement,
            batch: &table.batch,
            tags: Tags::Series {
                tags,
                counts: &table.series,
            },
            duplicates: table.newest_wins.then_some(DuplicatePolicy::Last),
        })
        .collect();
    ingestor.write_arrow_tables(db, rp, &tables, options).await
}

/// Stores the `ExportMetricsServiceRequest` encoded in `message` in `db`
/// and answers it: the points that could not be stored are counted in
/// `partial_success`, the rest are one write.
pub(crate) async fn export_otlp(
    state: &AppState,
    db: &str,
    message: &[u8],
    durability: Option<chingest::Durability>,
) -> Result<ExportMetricsServiceResponse, ApiError> {
    let request = otlp::Request::decode(message)?;
    let resources = otlp::ResourceTags::of(&request);
    let converted = otlp::convert(&request, &resources)?;
    let ingestor = state.ingestor()?;
    if !converted.tables.is_empty() {
        let rp = &state.config.write.default_retention_policy;
        let options = state.write_options(chingest::Precision::Nanoseconds, durability);
        let rows = tables(ingestor, db, rp, &converted.tables, &options).await?;
        state.metrics.count_rows(Protocol::Otlp, rows);
    }
    let partial_success = (converted.rejected > 0).then_some(ExportMetricsPartialSuccess {
        rejected_data_points: converted.rejected,
        error_message: converted.message,
    });
    Ok(ExportMetricsServiceResponse { partial_success })
}
