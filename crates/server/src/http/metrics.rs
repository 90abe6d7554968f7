//! `GET /metrics` and the middleware that counts every request.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use crate::error::Flavor;
use crate::state::AppState;

/// A request extension naming the listener of a router other than the main
/// HTTP API's, so that its routes count apart (`clickhouse /ping` is not
/// `/ping`).
#[derive(Debug, Clone, Copy)]
pub(crate) struct ListenerName(pub(crate) &'static str);

/// Middleware: counts each request under its route (and listener, when not
/// the main one) and status, and times it.
pub(crate) async fn track(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str);
    let endpoint = match request.extensions().get::<ListenerName>() {
        Some(ListenerName(listener)) => format!("{listener} {route}"),
        None => route.to_owned(),
    };
    let bytes = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .unwrap_or(0);
    let started = Instant::now();
    let response = next.run(request).await;
    let status = response.status().as_u16();
    state.metrics.observe_http(endpoint, status, bytes, started);
    response
}

/// How long a scrape waits for the engine's parts.
const PARTS_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// `GET /metrics`: the exposition, behind a token if configured.
pub(crate) async fn render(State(state): State<AppState>, headers: HeaderMap) -> Response {
    if state.config.metrics_require_token {
        if let Err(err) = state.authorize(&headers, None, Flavor::V1) {
            return err.into_response();
        }
    }
    let ingestor = state.ingestor.get();
    // The engine's parts are a query: a busy engine leaves them out of this
    // scrape rather than holding it.
    let parts = match ingestor {
        Some(ingestor) => tokio::time::timeout(PARTS_TIMEOUT, ingestor.parts())
            .await
            .ok()
            .and_then(Result::ok)
            .flatten(),
        None => None,
    };
    let mut response = state
        .metrics
        .exposition(ingestor, &state.promql_cache, parts)
        .into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}
