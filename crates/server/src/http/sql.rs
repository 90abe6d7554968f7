//! `/sql`: one read-only SQL statement, answered in any ClickHouse output
//! format and streamed as the engine produces it. The statement runs through `Ingestor::query_read_only`, so
//! writes, DDL, settings and table functions that reach outside the
//! engine are refused (403, or 400 with the engine's message).

use std::collections::HashMap;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;

use super::AppState;
use crate::error::{ApiError, Flavor};
use crate::state::Grant;

/// `GET /sql?query=...&format=...`.
pub(super) async fn sql_get(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let grant = authorize(&state, &params, &headers)?;
    let query = params
        .get("query")
        .filter(|q| !q.trim().is_empty())
        .ok_or_else(|| ApiError::bad_request("query is required (?query=SELECT ...)"))?;
    run(&state, &params, &grant, query).await
}

/// `POST /sql?format=...` with the statement as the body.
pub(super) async fn sql_post(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    // Before the body is read: an unknown caller costs nothing.
    let grant = authorize(&state, &params, &headers)?;
    let limit = state.config.limits.max_body_bytes;
    let body = super::read_body(&state, &headers, body, limit, Flavor::V1).await?;
    let query = match params.get("query") {
        Some(query) => query.clone(),
        None => String::from_utf8(body.to_vec())
            .map_err(|_| ApiError::bad_request("the SQL body is not UTF-8"))?,
    };
    if query.trim().is_empty() {
        return Err(ApiError::bad_request("the request has no SQL"));
    }
    run(&state, &params, &grant, &query).await
}

/// The caller's token, which must allow reading.
fn authorize(
    state: &AppState,
    params: &HashMap<String, String>,
    headers: &HeaderMap,
) -> Result<Grant, ApiError> {
    let grant = state.authorize(headers, params.get("p").map(String::as_str), Flavor::V1)?;
    grant.require_read()?;
    Ok(grant)
}

async fn run(
    state: &AppState,
    params: &HashMap<String, String>,
    grant: &Grant,
    sql: &str,
) -> Result<Response, ApiError> {
    let ingestor = state.ingestor()?;
    let format = params.get("format").map_or("JSON", String::as_str);
    let span = tracing::info_span!("sql", protocol = "sql", format, bytes = sql.len());
    let engine_error = |err| match err {
        // The engine refused the statement: the client's mistake.
        chingest::Error::Engine(message) => ApiError::bad_request(message),
        other => ApiError::from(other),
    };
    let mut chunks = ingestor
        .query_read_only_stream(sql, format, &grant.read_scope())
        .await
        .map_err(engine_error)?;
    // The first chunk decides the status: errors that stop the statement
    // from starting are a 400; later ones can only cut the body short.
    let first = match chunks.next().await {
        Some(chunk) => chunk.map_err(engine_error)?,
        None => Vec::new(),
    };
    // A small answer (one chunk) goes out whole, with its length, in one
    // write; a larger one is streamed as the engine produces it.
    let body = match chunks.next().await {
        None => Body::from(first),
        Some(second) => {
            span.in_scope(|| tracing::debug!("streaming"));
            let head = [Ok(first), second]
                .map(|chunk| chunk.map(Bytes::from).map_err(std::io::Error::other));
            // The chunks live in the body: a client that goes away drops
            // them, which cancels the statement.
            let rest = futures_util::stream::unfold(chunks, |mut chunks| async move {
                let chunk = chunks.next().await?;
                Some((
                    chunk.map(Bytes::from).map_err(std::io::Error::other),
                    chunks,
                ))
            });
            Body::from_stream(futures_util::stream::iter(head).chain(rest))
        }
    };
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(format)),
    );
    Ok(response)
}

/// The media type of a ClickHouse output format.
fn content_type(format: &str) -> &'static str {
    let format = format.to_ascii_lowercase();
    if format.starts_with("json") && !format.contains("eachrow") {
        "application/json"
    } else if format.contains("eachrow") {
        "application/x-ndjson"
    } else if format.starts_with("csv") {
        "text/csv; charset=utf-8"
    } else if format.starts_with("tabseparated") || format == "tsv" {
        "text/tab-separated-values; charset=utf-8"
    } else if format.starts_with("pretty") || format == "markdown" || format == "vertical" {
        "text/plain; charset=utf-8"
    } else if format.starts_with("arrow") {
        "application/vnd.apache.arrow.stream"
    } else {
        "application/octet-stream"
    }
}
