//! The HTTP API: one router, one module per protocol. Handlers only
//! translate requests into `chingest::Ingestor` calls and results into
//! responses; every error goes through [`ApiError`].

mod health;
mod influx;
mod influxql;
mod sql;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::Router;

use crate::error::{ApiError, Flavor};
use crate::state::token_from_authorization;
pub use crate::state::AppState;

impl AppState {
    /// Checks the request's credentials when tokens are configured: an
    /// `Authorization` header (see [`token_from_authorization`]) or (InfluxDB
    /// 1.x) a `p=<t>` query parameter.
    fn authorize(
        &self,
        headers: &HeaderMap,
        password_param: Option<&str>,
        flavor: Flavor,
    ) -> Result<(), ApiError> {
        let from_header = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(token_from_authorization);
        self.check_token(from_header.as_deref().or(password_param))
            .map_err(|e| e.flavor(flavor))
    }
}

/// Reads a request body up to `limit` bytes, decompressing gzip.
async fn read_body(
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    flavor: Flavor,
) -> Result<Bytes, ApiError> {
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("request body is larger than {limit} bytes"),
        )
        .flavor(flavor)
    };
    let encoding = headers
        .get(header::CONTENT_ENCODING)
        .map(|value| value.to_str().unwrap_or("?").trim().to_ascii_lowercase());
    let gzip = match encoding.as_deref() {
        None | Some("") | Some("identity") => false,
        Some("gzip") | Some("x-gzip") => true,
        Some(other) => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("unsupported Content-Encoding {other:?}: use gzip or none"),
            )
            .flavor(flavor))
        }
    };
    let raw = axum::body::to_bytes(body, limit).await.map_err(|err| {
        if std::error::Error::source(&err)
            .is_some_and(|e| e.is::<http_body_util::LengthLimitError>())
        {
            too_large()
        } else {
            ApiError::bad_request(format!("reading the request body: {err}")).flavor(flavor)
        }
    })?;
    if !gzip {
        return Ok(raw);
    }
    let decoded = tokio::task::spawn_blocking(move || {
        use std::io::Read;
        let mut out = Vec::new();
        let read = flate2::read::MultiGzDecoder::new(&raw[..])
            .take(limit as u64 + 1)
            .read_to_end(&mut out);
        read.map(|_| out)
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
    .map_err(|err| ApiError::bad_request(format!("invalid gzip body: {err}")).flavor(flavor))?;
    if decoded.len() > limit {
        return Err(too_large());
    }
    Ok(Bytes::from(decoded))
}

/// The router for `state`.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/write", post(influx::write_v1))
        .route("/api/v2/write", post(influx::write_v2))
        .route("/ping", get(influx::ping).head(influx::ping))
        .route("/query", get(influxql::query).post(influxql::query))
        .route("/health", get(health::health))
        .route("/ready", get(health::ready))
        .route("/sql", get(sql::sql_get).post(sql::sql_post))
        .route("/metrics", get(crate::metrics::render))
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            crate::metrics::track,
        ))
        // Bodies are read with the configured limit by the handlers.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(state)
}
