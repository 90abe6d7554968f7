//! `GET /metrics` and the middleware that observes every request: counted
//! under its route (and listener) and status, and answered inside its span
//! (`crate::span`), which names its protocol (by its route, or its
//! listener's) and its outcome; the handler records its database.

use std::time::Instant;

use axum::extract::{MatchedPath, Request, State};
use axum::http::{header, HeaderMap, HeaderValue};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tracing::Instrument;

use crate::error::Flavor;
use crate::span::{self, Outcome};
use crate::state::AppState;

/// A request extension naming the listener of a router other than the main
/// HTTP API's, so that its routes count apart (`clickhouse /ping` is not
/// `/ping`) and its requests are of its protocol.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ListenerName(pub(crate) &'static str);

/// Middleware: each request answered inside its span, then counted under
/// its route (and listener, when not the main one) and status, and timed.
pub(crate) async fn track(State(state): State<AppState>, request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str);
    let listener = request.extensions().get::<ListenerName>().map(|l| l.0);
    let (endpoint, protocol) = match listener {
        Some(listener) => (format!("{listener} {route}"), listener),
        None => (route.to_owned(), protocol(route)),
    };
    let bytes = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok())
        .unwrap_or(0);
    let span = span::request(protocol, &endpoint);
    let started = Instant::now();
    let response = next.run(request).instrument(span.clone()).await;
    let status = response.status();
    span::answered(&span, status.as_u16(), Outcome::of_http(status));
    state
        .metrics
        .observe_http(endpoint, status.as_u16(), bytes, started);
    response
}

/// The protocol of a route of the main HTTP API (`http/mod.rs`'s router;
/// its Prometheus API also under `/db/{db}`).
fn protocol(route: &str) -> &'static str {
    match route.strip_prefix("/db/{db}").unwrap_or(route) {
        "/write" | "/api/v2/write" | "/ping" => "influxdb",
        "/api/v1/write" | "/api/v1/prom/write" => "remote_write",
        "/api/v1/read" => "remote_read",
        "/v1/metrics" => "otlp",
        "/query" => "influxql",
        "/api/v2/delete" | "/api/v2/update" => "edit",
        "/sql" => "sql",
        "/health" | "/ready" | "/metrics" => "operations",
        "/api/v1/access" => "ui",
        admin if admin.starts_with("/api/v1/admin/") => "admin",
        promql if promql.starts_with("/api/v1/") => "promql",
        ui if ui == "/" || ui.starts_with("/ui") => "ui",
        _ => "http",
    }
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
    let mut text = state
        .metrics
        .exposition(ingestor, &state.promql_cache, parts);
    if let Some(rules) = state.rules.get() {
        crate::metrics::rules_metrics(&mut text, rules);
    }
    let mut response = text.into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("text/plain; version=0.0.4; charset=utf-8"),
    );
    response
}
