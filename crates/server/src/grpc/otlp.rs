//! OTLP/gRPC metrics: `opentelemetry.proto.collector.metrics.v1.MetricsService/Export`
//! on the gRPC port, with the same authentication, limits and gzip as
//! `chingest.v1.Ingest`. The database is the `x-chingest-database`
//! metadata (default `otel`); [`crate::write::export_otlp`] stores the
//! request, and refused points come back in `partial_success`, as over
//! HTTP.
//!
//! The service is written out here rather than generated: a generated one
//! decodes the request into `opentelemetry-proto`'s structs before the
//! handler runs, and the codec reads it in place from its bytes instead
//! (`chingest_codecs::otlp::read`, docs/benchmarks.md §12). Its codec
//! hands the handler the message's bytes and encodes the response.

use std::convert::Infallible;
use std::task::{Context, Poll};

use bytes::{Buf, Bytes};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::SERVICE_NAME;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceResponse;
use prost::Message;
use tonic::codec::{
    Codec, CompressionEncoding, DecodeBuf, Decoder, EnabledCompressionEncodings, EncodeBuf, Encoder,
};
use tonic::codegen::{http, Body, BoxFuture, Service, StdError};
use tonic::server::{NamedService, UnaryService};
use tonic::{Request, Response, Status};

use super::service::{authenticated, granted, observed, reserve_message};
use crate::span;
use crate::state::AppState;
use crate::write::{export_otlp, OTLP_DATABASE_HEADER, OTLP_DEFAULT_DATABASE};

/// `Export`'s full path.
const EXPORT_PATH: &str = "/opentelemetry.proto.collector.metrics.v1.MetricsService/Export";

/// The OTLP metrics service.
#[derive(Debug, Clone)]
pub struct OtlpMetricsService {
    state: AppState,
    compression: EnabledCompressionEncodings,
    max_message_bytes: usize,
}

/// The service with its limits, compression and authentication, ready to be
/// added to a tonic server.
pub fn otlp_metrics_service(
    state: AppState,
) -> tonic::service::interceptor::InterceptedService<
    OtlpMetricsService,
    impl tonic::service::Interceptor + Clone,
> {
    let mut compression = EnabledCompressionEncodings::default();
    compression.enable(CompressionEncoding::Gzip);
    let service = OtlpMetricsService {
        max_message_bytes: state.config.limits.max_grpc_message_bytes,
        state: state.clone(),
        compression,
    };
    authenticated(service, state)
}

impl NamedService for OtlpMetricsService {
    const NAME: &'static str = SERVICE_NAME;
}

impl<B> Service<http::Request<B>> for OtlpMetricsService
where
    B: Body + Send + 'static,
    B::Error: Into<StdError> + Send + 'static,
{
    type Response = http::Response<tonic::body::Body>;
    type Error = Infallible;
    type Future = BoxFuture<Self::Response, Infallible>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: http::Request<B>) -> Self::Future {
        if request.uri().path() != EXPORT_PATH {
            return Box::pin(async { Ok(Status::unimplemented("").into_http()) });
        }
        let this = self.clone();
        Box::pin(async move {
            let mut grpc = tonic::server::Grpc::new(ExportCodec)
                .apply_compression_config(this.compression, this.compression)
                .apply_max_message_size_config(Some(this.max_message_bytes), None);
            Ok(grpc.unary(Export(this.state), request).await)
        })
    }
}

/// `Export`, on the request's bytes.
struct Export(AppState);

impl UnaryService<Bytes> for Export {
    type Response = ExportMetricsServiceResponse;
    type Future = BoxFuture<Response<ExportMetricsServiceResponse>, Status>;

    fn call(&mut self, request: Request<Bytes>) -> Self::Future {
        let state = self.0.clone();
        Box::pin(
            async move { observed(&state, "otlp", "OtlpExport", export(&state, request)).await },
        )
    }
}

async fn export(
    state: &AppState,
    request: Request<Bytes>,
) -> Result<Response<ExportMetricsServiceResponse>, Status> {
    let grant = granted(&request)?;
    let db = request
        .metadata()
        .get(OTLP_DATABASE_HEADER)
        .and_then(|v| v.to_str().ok())
        .filter(|db| !db.is_empty())
        .unwrap_or(OTLP_DEFAULT_DATABASE)
        .to_owned();
    span::database(&db);
    grant.require_write(&db)?;
    let message = request.into_inner();
    // Held until the rows, which borrow from the message, are written.
    let _reservation = reserve_message(state.ingestor()?, message.len()).await?;
    let response = export_otlp(state, &db, &message, None).await?;
    Ok(Response::new(response))
}

/// Requests as their bytes, responses encoded by prost.
#[derive(Debug, Clone, Copy, Default)]
struct ExportCodec;

impl Codec for ExportCodec {
    type Encode = ExportMetricsServiceResponse;
    type Decode = Bytes;
    type Encoder = ExportCodec;
    type Decoder = ExportCodec;

    fn encoder(&mut self) -> ExportCodec {
        ExportCodec
    }

    fn decoder(&mut self) -> ExportCodec {
        ExportCodec
    }
}

impl Encoder for ExportCodec {
    type Item = ExportMetricsServiceResponse;
    type Error = Status;

    fn encode(&mut self, item: Self::Item, buf: &mut EncodeBuf<'_>) -> Result<(), Status> {
        item.encode(buf)
            .map_err(|e| Status::internal(format!("encoding the response: {e}")))
    }
}

impl Decoder for ExportCodec {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(buf.copy_to_bytes(buf.remaining())))
    }
}
