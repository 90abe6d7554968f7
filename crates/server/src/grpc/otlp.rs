//! OTLP/gRPC metrics: `opentelemetry.proto.collector.metrics.v1.MetricsService/Export`
//! on the gRPC port, with the same authentication, limits and gzip as
//! `chingest.v1.Ingest`. The database is the `x-chingest-database`
//! metadata (default `otel`); [`crate::write::export_otlp`] stores the
//! request, and refused points come back in `partial_success`, as over
//! HTTP.

use std::time::Instant;

use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_server::{
    MetricsService, MetricsServiceServer,
};
use opentelemetry_proto::tonic::collector::metrics::v1::{
    ExportMetricsServiceRequest, ExportMetricsServiceResponse,
};
use tonic::codec::CompressionEncoding;
use tonic::{Request, Response, Status};

use super::{authenticated, granted};
use crate::state::AppState;
use crate::write::{export_otlp, OTLP_DATABASE_HEADER, OTLP_DEFAULT_DATABASE};

/// The OTLP metrics service.
#[derive(Debug, Clone)]
pub struct OtlpMetricsService {
    state: AppState,
}

/// The service with its limits, compression and authentication, ready to be
/// added to a tonic server.
pub fn otlp_metrics_service(
    state: AppState,
) -> tonic::service::interceptor::InterceptedService<
    MetricsServiceServer<OtlpMetricsService>,
    impl tonic::service::Interceptor + Clone,
> {
    let limit = state.config.limits.max_grpc_message_bytes;
    let server = MetricsServiceServer::new(OtlpMetricsService {
        state: state.clone(),
    })
    .max_decoding_message_size(limit)
    .accept_compressed(CompressionEncoding::Gzip)
    .send_compressed(CompressionEncoding::Gzip);
    authenticated(server, state)
}

#[tonic::async_trait]
impl MetricsService for OtlpMetricsService {
    async fn export(
        &self,
        request: Request<ExportMetricsServiceRequest>,
    ) -> Result<Response<ExportMetricsServiceResponse>, Status> {
        let started = Instant::now();
        let result = self.export_inner(request).await;
        let code = result
            .as_ref()
            .map_or_else(Status::code, |_| tonic::Code::Ok);
        self.state.metrics.observe_grpc("OtlpExport", code, started);
        result
    }
}

impl OtlpMetricsService {
    async fn export_inner(
        &self,
        request: Request<ExportMetricsServiceRequest>,
    ) -> Result<Response<ExportMetricsServiceResponse>, Status> {
        let grant = granted(&request)?;
        let db = request
            .metadata()
            .get(OTLP_DATABASE_HEADER)
            .and_then(|v| v.to_str().ok())
            .filter(|db| !db.is_empty())
            .unwrap_or(OTLP_DEFAULT_DATABASE)
            .to_owned();
        grant.require_write(&db)?;
        let request = request.into_inner();
        let response = export_otlp(&self.state, &db, &request, None).await?;
        Ok(Response::new(response))
    }
}
