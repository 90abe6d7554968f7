//! ClickHouse's HTTP interface, on its own listener
//! (`clickhouse_http_addr`), so ClickHouse clients and tools
//! (clickhouse-connect, `@clickhouse/client`, Grafana's ClickHouse data
//! source, DBeaver) read chingest's tables as they would a ClickHouse
//! server's.
//!
//! `GET`/`POST /` with the statement in `query=`, the body, or both (the
//! parameter first, then a line feed and the body); `/ping`. Every
//! statement runs as `/sql`'s do (the shared
//! [`stream_output`](super::sql::stream_output): one read-only statement
//! in the sandbox and under the query limits, the grant's databases), so
//! this module only translates: credentials onto tokens, `database` onto
//! the statement's current database, `default_format` (else
//! TabSeparated, as ClickHouse), errors into ClickHouse's shape
//! ([`error`]), and the response headers clients read. Settings passed
//! as parameters are checked against the engine's own values: unchanged
//! ones are accepted, as the engine accepts them in read-only mode; a
//! change is refused with the engine's read-only error (164), an unknown
//! name with 115.

mod error;
mod request;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use axum::body::Body;
use axum::extract::{RawQuery, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;
use tokio::sync::OnceCell;
use tracing::Instrument as _;

use self::error::{code, ClickHouseError};
use self::request::{trailing_format, ClickHouseRequest};
use super::extract::read_body;
use super::sql::{content_type, stream_output};
use crate::error::Flavor;
use crate::span;
use crate::state::AppState;

/// The longest statement taken, in bytes: the engine's own parser limit
/// (`max_query_size`), so a longer one is refused before it is read whole.
const MAX_QUERY_BYTES: usize = 256 << 10;

/// ClickHouse's default output format for the HTTP interface.
const DEFAULT_FORMAT: &str = "TabSeparated";

/// What the handlers share: the server's state and the engine's settings,
/// read once, the first time a request passes a setting.
#[derive(Debug, Clone)]
struct ClickHouseState {
    app: AppState,
    settings: Arc<OnceCell<HashMap<String, String>>>,
}

/// The router of the ClickHouse interface for `state`. Answers are
/// compressed as `Accept-Encoding` asks (gzip, deflate, br, zstd) unless
/// the request says `enable_http_compression=0`: the engine's value of
/// that setting is 1.
pub fn router(state: AppState) -> Router {
    let clickhouse = ClickHouseState {
        app: state.clone(),
        settings: Arc::default(),
    };
    Router::new()
        .route("/", get(query).post(query))
        .route("/ping", get(ping).head(ping))
        .layer(tower_http::compression::CompressionLayer::new())
        .layer(axum::middleware::map_request(without_compression))
        .layer(axum::middleware::from_fn_with_state(
            state,
            crate::http::metrics::track,
        ))
        .layer(axum::Extension(crate::http::metrics::ListenerName(
            "clickhouse",
        )))
        // Bodies are read with the configured limit by the handler.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(clickhouse)
}

/// `enable_http_compression=0`: the answer is not compressed, whatever the
/// client accepts.
async fn without_compression(mut request: Request) -> Request {
    let off = request.uri().query().is_some_and(|query| {
        query
            .split('&')
            .any(|pair| pair == "enable_http_compression=0")
    });
    if off {
        request.headers_mut().remove(header::ACCEPT_ENCODING);
    }
    request
}

/// `GET /ping`: `Ok.`, as ClickHouse.
async fn ping() -> &'static str {
    "Ok.\n"
}

/// `GET` or `POST /`: one read-only statement.
async fn query(
    State(state): State<ClickHouseState>,
    method: Method,
    RawQuery(raw): RawQuery,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let started = Instant::now();
    let request = parse_request(raw.as_deref().unwrap_or(""), &headers);
    let query_id = request
        .as_ref()
        .ok()
        .and_then(|request| request.query_id.clone())
        .unwrap_or_else(|| uuid::Uuid::new_v4().to_string());
    let span = tracing::info_span!("clickhouse", %query_id);
    let answered = match request {
        Ok(request) => {
            if let Some(db) = &request.database {
                span::database(db);
            }
            answer(&state, request, method, &headers, body, started)
                .instrument(span)
                .await
        }
        Err(err) => Err(err),
    };
    let mut response = answered.unwrap_or_else(IntoResponse::into_response);
    let headers = response.headers_mut();
    if let Ok(value) = HeaderValue::from_str(&query_id) {
        headers.insert("x-clickhouse-query-id", value);
    }
    headers.insert("x-clickhouse-timezone", HeaderValue::from_static("UTC"));
    headers.insert(
        "x-clickhouse-server-display-name",
        HeaderValue::from_static("chingest"),
    );
    response
}

/// Reads a request's URL parameters (`raw`, its query string) and headers.
fn parse_request(raw: &str, headers: &HeaderMap) -> Result<ClickHouseRequest, ClickHouseError> {
    let params = serde_urlencoded::from_str::<Vec<(String, String)>>(raw).map_err(|err| {
        ClickHouseError::new(
            code::BAD_ARGUMENTS,
            format!("invalid URL parameters: {err}"),
        )
    })?;
    ClickHouseRequest::parse(&params, headers)
}

/// What the fuzz target `clickhouse_params` checks of [`parse_request`] on
/// any query string and headers: no panic; every parameter is the
/// interface's own or a setting to check, never both; one way of
/// credentials; and a statement's `FORMAT` is a name taken from its end.
#[cfg(fuzzing)]
pub(crate) fn check_request(raw: &str, headers: &HeaderMap) {
    let Ok(request) = parse_request(raw, headers) else {
        return;
    };
    let params: Vec<(String, String)> = serde_urlencoded::from_str(raw).unwrap();
    assert!(request.settings.len() <= params.len());
    for (name, _) in &request.settings {
        assert!(
            !request::is_interface_param(name) && !name.starts_with("param_"),
            "{name} taken as a setting"
        );
    }
    assert!(!request.user.is_empty());
    let last_query = params.iter().rev().find(|(name, _)| name == "query");
    assert_eq!(request.query.as_ref(), last_query.map(|(_, value)| value));
    if let Some(format) = request.query.as_deref().and_then(trailing_format) {
        let sql = request.query.as_deref().unwrap();
        assert!(!format.is_empty() && sql.contains(format), "{sql:?}");
    }
}

async fn answer(
    state: &ClickHouseState,
    request: ClickHouseRequest,
    method: Method,
    headers: &HeaderMap,
    body: Body,
    started: Instant,
) -> Result<Response, ClickHouseError> {
    if method == Method::GET && request.query.is_none() {
        return Ok("Ok.\n".into_response());
    }
    // Before the body is read: an unknown caller costs nothing.
    let grant = state
        .app
        .check_token(request.password.as_deref())
        .map_err(|_| ClickHouseError::authentication_failed(&request.user))?;
    let denied = |what: String| {
        ClickHouseError::new(
            code::ACCESS_DENIED,
            format!("{}: Not enough privileges: {what}", request.user),
        )
    };
    grant
        .require_read()
        .map_err(|_| denied("this token may not read".to_owned()))?;
    if let Some(database) = &request.database {
        if !grant.covers(database) {
            return Err(denied(format!(
                "this token may not read database {database}"
            )));
        }
    }
    if !request.settings.is_empty() {
        check_settings(state, &request.settings).await?;
    }
    let mut sql = request.query.unwrap_or_default();
    if method == Method::POST {
        let limit = state.app.config.limits.max_body_bytes.min(MAX_QUERY_BYTES);
        let body = read_body(&state.app, headers, body, limit, Flavor::V1).await?;
        let text = std::str::from_utf8(&body)
            .map_err(|_| ClickHouseError::new(code::BAD_ARGUMENTS, "the query is not UTF-8"))?;
        if !sql.is_empty() && !text.is_empty() {
            sql.push('\n');
        }
        sql.push_str(text);
    }
    if sql.len() > MAX_QUERY_BYTES {
        return Err(ClickHouseError::new(
            code::QUERY_IS_TOO_LARGE,
            format!("the query is longer than {MAX_QUERY_BYTES} bytes"),
        ));
    }
    if sql.trim().is_empty() {
        return Err(ClickHouseError::new(code::BAD_ARGUMENTS, "Empty query"));
    }
    let format = request.format.as_deref().unwrap_or(DEFAULT_FORMAT);
    let answered_format = trailing_format(&sql).unwrap_or(format).to_owned();
    let ingestor = state.app.ingestor()?;
    let body = stream_output(
        ingestor,
        &sql,
        format,
        &grant.read_scope(),
        request.database.as_deref(),
    )
    .await?;
    let result_bytes = axum::body::HttpBody::size_hint(&body).exact();
    let mut response = (StatusCode::OK, body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(content_type(&answered_format)),
    );
    if let Ok(value) = HeaderValue::from_str(&answered_format) {
        headers.insert("x-clickhouse-format", value);
    }
    if let Ok(value) = HeaderValue::from_str(&summary(result_bytes, started)) {
        headers.insert("x-clickhouse-summary", value);
    }
    Ok(response)
}

/// `X-ClickHouse-Summary`, as ClickHouse writes it (every number a string),
/// with what is known when the answer starts: the result's size when it
/// is one piece, and the time to the first piece.
fn summary(result_bytes: Option<u64>, started: Instant) -> String {
    format!(
        "{{\"read_rows\":\"0\",\"read_bytes\":\"0\",\"written_rows\":\"0\",\"written_bytes\":\"0\",\
         \"total_rows_to_read\":\"0\",\"result_rows\":\"0\",\"result_bytes\":\"{}\",\"elapsed_ns\":\"{}\"}}",
        result_bytes.unwrap_or(0),
        started.elapsed().as_nanos()
    )
}

/// Accepts settings whose value is the engine's already (clients send
/// them as a matter of course); refuses changes with the engine's own
/// read-only error, and unknown names.
async fn check_settings(
    state: &ClickHouseState,
    settings: &[(String, String)],
) -> Result<(), ClickHouseError> {
    let current = state
        .settings
        .get_or_try_init(|| engine_settings(&state.app))
        .await?;
    for (name, value) in settings {
        match current.get(name) {
            None => {
                return Err(ClickHouseError::new(
                    code::UNKNOWN_SETTING,
                    format!("Unknown setting '{name}'"),
                ))
            }
            Some(current) if same_setting_value(current, value) => {}
            Some(_) => {
                return Err(ClickHouseError::new(
                    code::READONLY,
                    format!("Cannot modify '{name}' setting in readonly mode"),
                ))
            }
        }
    }
    Ok(())
}

/// The settings of the read-only connections, by name (aliases too).
async fn engine_settings(app: &AppState) -> Result<HashMap<String, String>, ClickHouseError> {
    let output = app
        .ingestor()?
        .query_untrusted(
            "SELECT name, value FROM system.settings \
             UNION ALL SELECT alias_for, value FROM system.settings WHERE alias_for != ''",
            "JSONCompactEachRow",
        )
        .await?;
    let text = String::from_utf8_lossy(&output);
    text.lines()
        .map(serde_json::from_str::<(String, String)>)
        .collect::<Result<_, _>>()
        .map_err(|err| {
            ClickHouseError::new(
                code::STD_EXCEPTION,
                format!("reading system.settings: {err}"),
            )
        })
}

/// Whether a setting's value as sent equals the engine's (`true` is 1,
/// quotes do not count).
fn same_setting_value(current: &str, sent: &str) -> bool {
    fn normal(value: &str) -> String {
        let value = value.trim();
        let value = value
            .strip_prefix('\'')
            .and_then(|v| v.strip_suffix('\''))
            .unwrap_or(value);
        match value.to_ascii_lowercase().as_str() {
            "true" => "1".to_owned(),
            "false" => "0".to_owned(),
            other => other.to_owned(),
        }
    }
    normal(current) == normal(sent)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setting_values_compare_as_the_engine_reads_them() {
        assert!(same_setting_value("1", "true"));
        assert!(same_setting_value("best_effort", "'best_effort'"));
        assert!(same_setting_value("0", " 0 "));
        assert!(!same_setting_value("1", "2"));
    }
}
