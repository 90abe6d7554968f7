//! What every gRPC service of the server shares (`chingest.v1.Ingest` in
//! `mod.rs`, OTLP's `MetricsService` in `otlp.rs`): the token check in
//! front of each and the [`Grant`] it leaves on the request, the one
//! mapping of [`ApiError`]s to statuses, a message's reservation in the
//! memory budget, and the span and counts of a call. Below both services,
//! so that each imports it and neither the other.

use std::future::Future;
use std::time::Instant;

use chingest::{Ingestor, MemoryReservation};
use tonic::{Request, Status};
use tracing::Instrument;

use crate::error::ApiError;
use crate::span::{self, Outcome};
use crate::state::{token_from_authorization, AppState, Grant};

/// `service` behind the token check every gRPC service shares: the
/// request's `authorization` metadata (`Token <t>` or `Bearer <t>`) gives
/// the [`Grant`] the handlers read with [`granted`].
pub(super) fn authenticated<S>(
    service: S,
    state: AppState,
) -> tonic::service::interceptor::InterceptedService<S, impl tonic::service::Interceptor + Clone> {
    tonic::service::interceptor::InterceptedService::new(service, move |request: Request<()>| {
        let offered = request
            .metadata()
            .get("authorization")
            .and_then(|value| value.to_str().ok())
            .and_then(token_from_authorization);
        match state.check_token(offered.as_deref()) {
            Ok(grant) => {
                let mut request = request;
                request.extensions_mut().insert(grant);
                Ok(request)
            }
            Err(err) => {
                let status = Status::from(err);
                state
                    .metrics
                    .observe_grpc("*", status.code(), Instant::now());
                Err(status)
            }
        }
    })
}

impl From<ApiError> for Status {
    fn from(err: ApiError) -> Self {
        use axum::http::StatusCode as S;
        use tonic::Code;
        let code = match err.status {
            S::BAD_REQUEST | S::UNSUPPORTED_MEDIA_TYPE => Code::InvalidArgument,
            S::UNAUTHORIZED => Code::Unauthenticated,
            S::FORBIDDEN => Code::PermissionDenied,
            S::NOT_FOUND => Code::NotFound,
            S::PAYLOAD_TOO_LARGE | S::TOO_MANY_REQUESTS => Code::ResourceExhausted,
            S::SERVICE_UNAVAILABLE => Code::Unavailable,
            _ => Code::Internal,
        };
        if code == Code::Internal {
            tracing::error!(message = %err.message, "gRPC request failed");
        }
        Status::new(code, err.message)
    }
}

pub(super) fn engine_status(err: chingest::Error) -> Status {
    ApiError::from(err).into()
}

/// Runs a call of `method` inside its request span (`crate::span`), then
/// logs how it ended and counts it under its code.
pub(super) async fn observed<T>(
    state: &AppState,
    protocol: &'static str,
    method: &'static str,
    call: impl Future<Output = Result<T, Status>>,
) -> Result<T, Status> {
    let started = Instant::now();
    let span = span::request(protocol, method);
    let result = call.instrument(span.clone()).await;
    let code = result
        .as_ref()
        .map_or_else(Status::code, |_| tonic::Code::Ok);
    span::answered(&span, format_args!("{code:?}"), Outcome::of_grpc(code));
    state.metrics.observe_grpc(method, code, started);
    result
}

/// Counts a message tonic has decoded whole in the memory budget, as an
/// HTTP body is, so that many large ones at once are refused
/// (RESOURCE_EXHAUSTED) rather than all handled at once.
pub(super) async fn reserve_message(
    ingestor: &Ingestor,
    bytes: usize,
) -> Result<MemoryReservation, Status> {
    ingestor.reserve_memory(bytes).await.map_err(engine_status)
}

/// What the request's token may do, as the interceptor found it.
pub(super) fn granted<T>(request: &Request<T>) -> Result<Grant, Status> {
    request
        .extensions()
        .get::<Grant>()
        .cloned()
        .ok_or_else(|| Status::internal("the request passed no authentication"))
}
