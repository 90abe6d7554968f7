//! `/sql`: one read-only SQL statement, answered in any ClickHouse output
//! format and streamed as the engine produces it; `db` names the database
//! of unqualified tables. The statement runs through `Ingestor::query_untrusted`, so
//! writes, DDL, settings and table functions that reach outside the
//! engine are refused (403, or 400 with the engine's message).

use std::collections::HashMap;

use axum::body::{Body, Bytes};
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use tracing::Instrument as _;

use crate::error::{ApiError, Flavor};
use crate::span;
use crate::state::AppState;
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
    let body = super::extract::read_body(&state, &headers, body, limit, Flavor::V1).await?;
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
    let span = tracing::info_span!("sql", format, bytes = sql.len());
    // Unqualified table names are in `db`, as in the ClickHouse interface's
    // `database`.
    let database = params
        .get("db")
        .map(String::as_str)
        .filter(|db| !db.is_empty());
    if let Some(db) = database {
        span::database(db);
    }
    let body = stream_output(ingestor, sql, format, &grant.read_scope(), database)
        .instrument(span)
        .await
        .map_err(|err| match err {
            // The engine refused the statement: the client's mistake.
            chingest::Error::Engine(message) => ApiError::bad_request(message),
            other => ApiError::from(other),
        })?;
    let mut response = (StatusCode::OK, body).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(format)),
    );
    Ok(response)
}

/// Runs one read-only statement for an untrusted caller and gives its
/// output as a response body, shared by `/sql` and the ClickHouse
/// interface. Errors that stop the statement from starting are returned;
/// later ones can only cut the body short. A small answer (one chunk) is
/// whole, with its length; a larger one is streamed as the engine produces
/// it, and a client that goes away cancels the statement.
pub(crate) async fn stream_output(
    ingestor: &chingest::Ingestor,
    sql: &str,
    format: &str,
    scope: &chingest::ReadScope,
    database: Option<&str>,
) -> Result<Body, chingest::Error> {
    let mut chunks = ingestor
        .query_untrusted_stream(sql, format, scope, database)
        .await?;
    let first = match chunks.next().await {
        Some(chunk) => chunk?,
        None => Vec::new(),
    };
    Ok(match chunks.next().await {
        None => Body::from(first),
        Some(second) => {
            tracing::debug!("streaming");
            let head = [Ok(first), second]
                .map(|chunk| chunk.map(Bytes::from).map_err(std::io::Error::other));
            // The chunks live in the body: dropping it cancels the statement.
            let rest = futures_util::stream::unfold(chunks, |mut chunks| async move {
                let chunk = chunks.next().await?;
                Some((
                    chunk.map(Bytes::from).map_err(std::io::Error::other),
                    chunks,
                ))
            });
            Body::from_stream(futures_util::stream::iter(head).chain(rest))
        }
    })
}

/// The media type of a ClickHouse output format.
pub(crate) fn content_type(format: &str) -> &'static str {
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
