//! The HTTP API: one router, one module per protocol. Handlers only
//! translate requests into `chingest::Ingestor` calls and results into
//! responses; every error goes through [`ApiError`].

mod health;
mod influx;
mod influxql;
mod sql;

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use base64::Engine as _;
use chingest::Ingestor;
use tokio::sync::OnceCell;

use crate::config::ServerConfig;
use crate::error::{ApiError, Flavor};

/// What every handler can reach.
#[derive(Debug, Clone)]
pub struct AppState {
    /// Set once the engine is open; until then the data endpoints answer 503.
    pub ingestor: Arc<OnceCell<Ingestor>>,
    /// The configuration in force.
    pub config: Arc<ServerConfig>,
    /// The HTTP layer's own counters.
    pub metrics: Arc<crate::metrics::HttpMetrics>,
}

impl AppState {
    /// The ingestor, or 503 while the engine is starting.
    fn ingestor(&self) -> Result<&Ingestor, ApiError> {
        self.ingestor.get().ok_or_else(|| {
            let mut err = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the engine is starting");
            err.retry_after = Some(1);
            err
        })
    }

    /// Checks the request's credentials when tokens are configured: an
    /// `Authorization: Token <t>` or `Bearer <t>` header, Basic auth with the
    /// token as password, or (InfluxDB 1.x) a `p=<t>` query parameter.
    fn authorize(
        &self,
        headers: &HeaderMap,
        password_param: Option<&str>,
        flavor: Flavor,
    ) -> Result<(), ApiError> {
        let tokens = &self.config.auth_tokens;
        if tokens.is_empty() {
            return Ok(());
        }
        let from_header = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(|value| {
                let (scheme, credentials) = value.split_once(' ')?;
                match scheme.to_ascii_lowercase().as_str() {
                    "token" | "bearer" => Some(credentials.trim().to_owned()),
                    "basic" => {
                        let decoded = base64::engine::general_purpose::STANDARD
                            .decode(credentials.trim())
                            .ok()?;
                        let decoded = String::from_utf8(decoded).ok()?;
                        Some(decoded.split_once(':')?.1.to_owned())
                    }
                    _ => None,
                }
            });
        let offered = from_header.as_deref().or(password_param);
        match offered {
            Some(token) if tokens.iter().any(|t| t == token) => Ok(()),
            Some(_) => {
                Err(ApiError::new(StatusCode::UNAUTHORIZED, "authorization failed").flavor(flavor))
            }
            None => Err(
                ApiError::new(StatusCode::UNAUTHORIZED, "authorization required").flavor(flavor),
            ),
        }
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
