//! The InfluxDB write API: `/write` (1.x), `/api/v2/write` (2.x) and `/ping`.
//!
//! Good lines are stored even when others are not; the reply is then 400
//! naming each rejected line (InfluxDB's partial-write behaviour), with the
//! list also as structured JSON under `rejected`.

use std::collections::HashMap;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use chingest::{Precision, WriteOutcome};
use serde_json::json;
use tracing::Instrument;

use super::extract::{Api, WriteTarget};
use super::AppState;
use crate::error::ApiError;
use crate::metrics::Protocol;
use crate::state::MAX_LISTED_REJECTIONS;
use crate::write;

/// Rejections spelled out in the error message; all of them (up to
/// [`MAX_LISTED_REJECTIONS`]) are in the `rejected` array.
const MAX_IN_MESSAGE: usize = 10;

/// `GET|HEAD /ping`: 204 with the version headers InfluxDB clients look for.
pub(super) async fn ping() -> Response {
    let mut response = StatusCode::NO_CONTENT.into_response();
    let version = HeaderValue::from_static(concat!("chingest-", env!("CARGO_PKG_VERSION")));
    response
        .headers_mut()
        .insert("X-Influxdb-Version", version.clone());
    response
        .headers_mut()
        .insert("X-Influxdb-Build", HeaderValue::from_static("OSS"));
    response.headers_mut().insert("X-Chingest-Version", version);
    response
}

/// `POST /write?db=&rp=&precision=&u=&p=`.
pub(super) async fn write_v1(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let target = WriteTarget::of(Api::InfluxV1, &state, &params, &headers)?;
    write(&state, target, &params, &headers, body).await
}

/// `POST /api/v2/write?bucket=db[/rp]&org=&precision=`.
pub(super) async fn write_v2(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let target = WriteTarget::of(Api::InfluxV2, &state, &params, &headers)?;
    write(&state, target, &params, &headers, body).await
}

async fn write(
    state: &AppState,
    target: WriteTarget,
    params: &HashMap<String, String>,
    headers: &HeaderMap,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let flavor = target.flavor;
    let precision = match params.get("precision").map(String::as_str) {
        None | Some("") => Precision::Nanoseconds,
        Some(p) => {
            Precision::parse(p).map_err(|e| ApiError::bad_request(e.to_string()).flavor(flavor))?
        }
    };
    let ingestor = state.ingestor().map_err(|e| e.flavor(flavor))?;
    let body = target.body(state, headers, body).await?;
    let (db, rp) = (target.db.as_str(), target.rp_or_default(state));
    let options = target.options(state, precision);
    let span = tracing::info_span!("write", rp, bytes = body.len());
    let (body, reservation) = body.into_parts();
    let outcome = write::line_protocol(ingestor, db, rp, body, reservation, &options)
        .instrument(span)
        .await
        .map_err(|e| ApiError::from(e).flavor(flavor))?;
    state.metrics.count_rows(Protocol::Influx, outcome.accepted);
    if outcome.rejected.is_empty() {
        return Ok(StatusCode::NO_CONTENT);
    }
    Err(partial_write(&outcome).flavor(flavor))
}

/// The 400 for a write where some lines were rejected.
fn partial_write(outcome: &WriteOutcome) -> ApiError {
    let rejected = &outcome.rejected;
    let mut message = String::from("partial write: ");
    for (i, rejection) in rejected.iter().take(MAX_IN_MESSAGE).enumerate() {
        if i > 0 {
            message.push_str("; ");
        }
        message.push_str(&rejection.to_string());
    }
    if rejected.len() > MAX_IN_MESSAGE {
        message.push_str(&format!("; and {} more", rejected.len() - MAX_IN_MESSAGE));
    }
    message.push_str(&format!(" dropped={}", rejected.len()));
    let listed: Vec<_> = rejected
        .iter()
        .take(MAX_LISTED_REJECTIONS)
        .map(|r| json!({ "line": r.line, "column": r.column, "reason": r.reason }))
        .collect();
    ApiError::bad_request(message)
        .with("accepted", json!(outcome.accepted))
        .with("dropped", json!(rejected.len()))
        .with("line", json!(rejected[0].line))
        .with("rejected", json!(listed))
}
