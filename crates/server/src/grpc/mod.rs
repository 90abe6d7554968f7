//! The gRPC API: `chingest.v1.Ingest` (`proto/chingest/v1/ingest.proto`),
//! standard health checking and server reflection, on `grpc_addr`.
//!
//! Like the HTTP handlers, the service only translates: requests become
//! `Ingestor` calls, results and errors become responses and statuses
//! (every error goes through [`ApiError`](crate::error::ApiError), as over
//! HTTP, mapped once in `service.rs`, which both services share).

mod otlp;
pub(crate) mod points;
mod service;

pub use otlp::{otlp_metrics_service, OtlpMetricsService};

use std::collections::VecDeque;
use std::sync::Arc;

use arrow::buffer::Buffer;
use arrow::record_batch::RecordBatch;
use chingest::{Durability, LineRejection, Precision, WriteOutcome};
use chingest_codecs::arrow_stream::ArrowStream;
use chingest_proto::v1::ingest_server::{Ingest, IngestServer};
use chingest_proto::v1::{
    write_request, ArrowTarget, Rejection, WriteArrowRequest, WriteArrowResponse, WriteRequest,
    WriteResponse,
};
use prost::Message as _;
use tokio::task::JoinHandle;
use tonic::codec::CompressionEncoding;
use tonic::{Request, Response, Status, Streaming};
use tracing::Instrument;

use crate::metrics::Protocol;
use crate::span;
use crate::state::{AppState, MAX_LISTED_REJECTIONS};
use crate::write;
use service::{authenticated, engine_status, granted, observed, reserve_message};

/// Record batches of one WriteArrow stream being committed at once: the
/// next batch is decoded and hashed while the previous one is inserted.
const ARROW_BATCHES_IN_FLIGHT: usize = 2;

/// The `chingest.v1.Ingest` service.
#[derive(Debug, Clone)]
pub struct IngestService {
    state: AppState,
}

/// The service with its limits, compression and authentication, ready to be
/// added to a tonic server.
pub fn ingest_service(
    state: AppState,
) -> tonic::service::interceptor::InterceptedService<
    IngestServer<IngestService>,
    impl tonic::service::Interceptor + Clone,
> {
    let limit = state.config.limits.max_grpc_message_bytes;
    let server = IngestServer::new(IngestService {
        state: state.clone(),
    })
    .max_decoding_message_size(limit)
    .accept_compressed(CompressionEncoding::Gzip)
    .send_compressed(CompressionEncoding::Gzip);
    authenticated(server, state)
}

/// The retention policy a request names, or the configured default.
fn retention_policy<'a>(state: &'a AppState, requested: &'a str) -> &'a str {
    if requested.is_empty() {
        &state.config.write.default_retention_policy
    } else {
        requested
    }
}

fn precision(value: i32) -> Result<Precision, Status> {
    use chingest_proto::v1::Precision as P;
    Ok(match P::try_from(value) {
        Ok(P::Unspecified | P::Nanoseconds) => Precision::Nanoseconds,
        Ok(P::Microseconds) => Precision::Microseconds,
        Ok(P::Milliseconds) => Precision::Milliseconds,
        Ok(P::Seconds) => Precision::Seconds,
        Ok(P::Minutes) => Precision::Minutes,
        Ok(P::Hours) => Precision::Hours,
        Err(_) => {
            return Err(Status::invalid_argument(format!(
                "unknown precision {value}"
            )))
        }
    })
}

/// The durability a request asked for; `None`: the server's default.
fn durability(value: i32) -> Result<Option<Durability>, Status> {
    use chingest_proto::v1::Durability as D;
    Ok(match D::try_from(value) {
        Ok(D::Unspecified) => None,
        Ok(D::Fsync) => Some(Durability::Fsync),
        Ok(D::Os) => Some(Durability::Os),
        Ok(D::None) => Some(Durability::None),
        Ok(D::Visible) => Some(Durability::Visible),
        Err(_) => {
            return Err(Status::invalid_argument(format!(
                "unknown durability {value}"
            )))
        }
    })
}

fn response(accepted: usize, rejected: &[LineRejection]) -> WriteResponse {
    WriteResponse {
        accepted: accepted as u64,
        rejected: rejected.len() as u64,
        rejections: rejected
            .iter()
            .take(MAX_LISTED_REJECTIONS)
            .map(|r| Rejection {
                line: r.line as u64,
                column: r.column.unwrap_or(0) as u64,
                reason: r.reason.clone(),
            })
            .collect(),
    }
}

#[tonic::async_trait]
impl Ingest for IngestService {
    async fn write(
        &self,
        request: Request<WriteRequest>,
    ) -> Result<Response<WriteResponse>, Status> {
        let result = observed(&self.state, "grpc", "Write", self.write_inner(request)).await;
        if let Ok(response) = &result {
            let rows = response.get_ref().accepted as usize;
            self.state.metrics.count_rows(Protocol::Grpc, rows);
        }
        result
    }

    async fn write_arrow(
        &self,
        request: Request<Streaming<WriteArrowRequest>>,
    ) -> Result<Response<WriteArrowResponse>, Status> {
        let call = self.write_arrow_inner(request);
        let result = observed(&self.state, "grpc", "WriteArrow", call).await;
        if let Ok(response) = &result {
            let rows = response.get_ref().rows as usize;
            self.state.metrics.count_rows(Protocol::Arrow, rows);
        }
        result
    }
}

impl IngestService {
    async fn write_inner(
        &self,
        request: Request<WriteRequest>,
    ) -> Result<Response<WriteResponse>, Status> {
        let grant = granted(&request)?;
        let request = request.into_inner();
        let ingestor = self.state.ingestor()?;
        if request.database.is_empty() {
            return Err(Status::invalid_argument("database is required"));
        }
        let db = request.database.as_str();
        span::database(db);
        grant.require_write(db)?;
        let rp = retention_policy(&self.state, &request.retention_policy);
        let options = self.state.write_options(
            precision(request.precision)?,
            durability(request.durability)?,
        );
        let span = tracing::info_span!("write", rp);
        let reservation = reserve_message(ingestor, request.encoded_len()).await?;
        match request.data {
            Some(write_request::Data::LineProtocol(body)) => {
                let committed = write::line_protocol(ingestor, db, rp, body, reservation, &options);
                let WriteOutcome { accepted, rejected } =
                    committed.instrument(span).await.map_err(engine_status)?;
                Ok(Response::new(response(accepted, &rejected)))
            }
            Some(write_request::Data::Points(points)) => {
                // The points are read until the answer (their rejections
                // name them): their reservation is held until then too.
                let _reservation = reservation;
                let converted = points::convert(&points.points);
                let outcome = ingestor
                    .write_points(db, rp, &converted.points, &options)
                    .instrument(span)
                    .await
                    .map_err(engine_status)?;
                let rejected = points::rejections(&converted, outcome.rejected);
                Ok(Response::new(response(outcome.accepted, &rejected)))
            }
            None => Err(Status::invalid_argument(
                "one of line_protocol or points is required",
            )),
        }
    }

    async fn write_arrow_inner(
        &self,
        request: Request<Streaming<WriteArrowRequest>>,
    ) -> Result<Response<WriteArrowResponse>, Status> {
        let grant = granted(&request)?;
        let ingestor = self.state.ingestor()?.clone();
        let mut stream = request.into_inner();
        let first = stream.message().await?.ok_or_else(|| {
            Status::invalid_argument("empty stream: the first message must carry the target")
        })?;
        let target = first
            .target
            .clone()
            .ok_or_else(|| Status::invalid_argument("the first message must carry the target"))?;
        let target = Arc::new(ArrowWrite::new(&self.state, target)?);
        span::database(&target.database);
        grant.require_write(&target.database)?;
        let span = tracing::info_span!(
            "write_arrow",
            rp = target.rp,
            measurement = target.measurement
        );
        let mut decoder = ArrowStream::new();
        let mut in_flight: VecDeque<JoinHandle<Result<usize, chingest::Error>>> = VecDeque::new();
        let (mut rows, mut batches) = (0usize, 0u64);
        let mut message = Some(first);
        let result: Result<(), Status> = async {
            while let Some(WriteArrowRequest { ipc, .. }) = message {
                let mut buffer = Buffer::from(ipc);
                while !buffer.is_empty() {
                    let decoded = decoder
                        .decode(&mut buffer)
                        .map_err(|e| Status::invalid_argument(e.to_string()))?;
                    let Some(batch) = decoded else { continue };
                    batches += 1;
                    if in_flight.len() == ARROW_BATCHES_IN_FLIGHT {
                        if let Some(oldest) = in_flight.pop_front() {
                            rows += committed(oldest).await?;
                        }
                    }
                    in_flight.push_back(target.spawn(&ingestor, batch));
                }
                message = stream.message().await?;
            }
            decoder
                .finish()
                .map_err(|e| Status::invalid_argument(e.to_string()))?;
            // A stream without batches still has its schema checked.
            if batches == 0 {
                if let Some(schema) = decoder.schema() {
                    in_flight.push_back(target.spawn(&ingestor, RecordBatch::new_empty(schema)));
                }
            }
            while let Some(task) = in_flight.pop_front() {
                rows += committed(task).await?;
            }
            Ok(())
        }
        .instrument(span)
        .await;
        match result {
            Ok(()) => Ok(Response::new(WriteArrowResponse {
                rows: rows as u64,
                batches,
            })),
            Err(status) => {
                // Batches already handed over are committed or failed on
                // their own; say how many rows were stored before the error.
                for task in in_flight {
                    if let Ok(Ok(n)) = task.await {
                        rows += n;
                    }
                }
                Err(Status::new(
                    status.code(),
                    format!(
                        "{} ({rows} rows of this stream were stored)",
                        status.message()
                    ),
                ))
            }
        }
    }
}

/// The rows of a finished batch write, or its error as a status.
async fn committed(task: JoinHandle<Result<usize, chingest::Error>>) -> Result<usize, Status> {
    task.await
        .map_err(|e| Status::internal(format!("write task failed: {e}")))?
        .map_err(engine_status)
}

/// Where a WriteArrow stream's batches go.
#[derive(Debug)]
struct ArrowWrite {
    database: String,
    rp: String,
    measurement: String,
    tag_columns: Vec<String>,
    options: chingest::WriteOptions,
}

impl ArrowWrite {
    fn new(state: &AppState, target: ArrowTarget) -> Result<ArrowWrite, Status> {
        if target.database.is_empty() {
            return Err(Status::invalid_argument("target.database is required"));
        }
        if target.measurement.is_empty() {
            return Err(Status::invalid_argument("target.measurement is required"));
        }
        Ok(ArrowWrite {
            rp: retention_policy(state, &target.retention_policy).to_owned(),
            database: target.database,
            measurement: target.measurement,
            tag_columns: target.tag_columns,
            options: state.write_options(Precision::Nanoseconds, durability(target.durability)?),
        })
    }

    /// Writes `batch` on its own task, committed before the task ends.
    fn spawn(
        self: &Arc<Self>,
        ingestor: &chingest::Ingestor,
        batch: RecordBatch,
    ) -> JoinHandle<Result<usize, chingest::Error>> {
        let (ingestor, target) = (ingestor.clone(), Arc::clone(self));
        tokio::spawn(
            async move {
                let tags: Vec<&str> = target.tag_columns.iter().map(String::as_str).collect();
                ingestor
                    .write_arrow(
                        &target.database,
                        &target.rp,
                        &target.measurement,
                        &batch,
                        &tags,
                        &target.options,
                    )
                    .await
            }
            .in_current_span(),
        )
    }
}
