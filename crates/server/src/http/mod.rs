//! The HTTP API: one router, one module per protocol. Handlers only
//! translate requests into `chingest::Ingestor` calls and results into
//! responses; every error goes through [`ApiError`].

pub mod clickhouse;
mod edit;
mod health;
mod influx;
mod influxql;
mod otlp;
mod prometheus;
mod sql;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, StatusCode};
use axum::routing::{get, post};
use axum::Router;
use bytes::BytesMut;
use chingest::MemoryReservation;
use http_body_util::BodyExt;

use crate::error::{ApiError, Flavor};
pub use crate::state::AppState;
use crate::state::{token_from_authorization, Grant};

impl AppState {
    /// Checks the request's credentials when tokens are configured: an
    /// `Authorization` header (see [`token_from_authorization`]) or (InfluxDB
    /// 1.x) a `p=<t>` query parameter.
    pub(crate) fn authorize(
        &self,
        headers: &HeaderMap,
        password_param: Option<&str>,
        flavor: Flavor,
    ) -> Result<Grant, ApiError> {
        let from_header = headers
            .get(header::AUTHORIZATION)
            .and_then(|value| value.to_str().ok())
            .and_then(token_from_authorization);
        self.check_token(from_header.as_deref().or(password_param))
            .map_err(|e| e.flavor(flavor))
    }
}

/// A request body, and its reservation in the ingestor's memory budget
/// (held while the body is parsed, released when this is dropped).
struct ReceivedBody {
    bytes: Bytes,
    _reservation: MemoryReservation,
}

impl std::ops::Deref for ReceivedBody {
    type Target = Bytes;

    fn deref(&self) -> &Bytes {
        &self.bytes
    }
}

/// How a request body is compressed (`Content-Encoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Compression {
    Gzip,
    Snappy,
}

/// Room reserved before the first bytes of a body without a length.
const UNKNOWN_LENGTH_RESERVATION: usize = 64 << 10;

/// Reads a request body up to `limit` bytes, decompressing gzip or snappy, with its
/// bytes counted in the memory budget as they arrive: many large bodies at
/// once get 429 (with `Retry-After`) instead of growing the process.
async fn read_body(
    state: &AppState,
    headers: &HeaderMap,
    body: Body,
    limit: usize,
    flavor: Flavor,
) -> Result<ReceivedBody, ApiError> {
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
    let compression = match encoding.as_deref() {
        None | Some("") | Some("identity") => None,
        Some("gzip") | Some("x-gzip") => Some(Compression::Gzip),
        // Snappy's block format, as Prometheus remote write sends it.
        Some("snappy") => Some(Compression::Snappy),
        Some(other) => {
            return Err(ApiError::new(
                StatusCode::UNSUPPORTED_MEDIA_TYPE,
                format!("unsupported Content-Encoding {other:?}: use gzip, snappy or none"),
            )
            .flavor(flavor))
        }
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<usize>().ok());
    if declared.is_some_and(|len| len > limit) {
        return Err(too_large());
    }
    let ingestor = state.ingestor().map_err(|e| e.flavor(flavor))?;
    let budget_error = |err: chingest::Error| ApiError::from(err).flavor(flavor);
    let mut reservation = ingestor
        .reserve_memory(declared.unwrap_or(UNKNOWN_LENGTH_RESERVATION).max(1))
        .await
        .map_err(budget_error)?;
    let mut raw = BytesMut::with_capacity(declared.unwrap_or(0));
    let mut body = body;
    while let Some(frame) = body.frame().await {
        let frame = frame.map_err(|err| {
            ApiError::bad_request(format!("reading the request body: {err}")).flavor(flavor)
        })?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        let needed = raw.len() + data.len();
        if needed > limit {
            return Err(too_large());
        }
        if needed > reservation.bytes() {
            // Doubling keeps a slowly arriving body to a few reservations.
            let target = needed.max(2 * reservation.bytes()).min(limit);
            reservation
                .grow(target - reservation.bytes())
                .await
                .map_err(budget_error)?;
        }
        raw.extend_from_slice(&data);
    }
    let raw = raw.freeze();
    let Some(compression) = compression else {
        return Ok(ReceivedBody {
            bytes: raw,
            _reservation: reservation,
        });
    };
    if compression == Compression::Snappy {
        // The block format states its length first: refuse before decoding.
        let length = snap::raw::decompress_len(&raw).map_err(|err| {
            ApiError::bad_request(format!("invalid snappy body: {err}")).flavor(flavor)
        })?;
        if length > limit {
            return Err(too_large());
        }
    }
    let decoded = tokio::task::spawn_blocking(move || match compression {
        Compression::Gzip => {
            use std::io::Read;
            let mut out = Vec::new();
            let read = flate2::read::MultiGzDecoder::new(&raw[..])
                .take(limit as u64 + 1)
                .read_to_end(&mut out);
            read.map(|_| out)
                .map_err(|err| format!("invalid gzip body: {err}"))
        }
        Compression::Snappy => snap::raw::Decoder::new()
            .decompress_vec(&raw)
            .map_err(|err| format!("invalid snappy body: {err}")),
    })
    .await
    .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?
    .map_err(|err| ApiError::bad_request(err).flavor(flavor))?;
    if decoded.len() > limit {
        return Err(too_large());
    }
    reservation
        .grow(decoded.len())
        .await
        .map_err(budget_error)?;
    Ok(ReceivedBody {
        bytes: Bytes::from(decoded),
        _reservation: reservation,
    })
}

/// The router for `state`.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/write", post(influx::write_v1))
        .route("/api/v2/write", post(influx::write_v2))
        .route("/api/v1/write", post(prometheus::write))
        .route("/api/v1/prom/write", post(prometheus::write))
        .route("/v1/metrics", post(otlp::metrics))
        .route("/api/v2/delete", post(edit::delete))
        .route("/api/v2/update", post(edit::update))
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
