//! What every request carries besides its protocol: credentials, the
//! database and retention policy it writes ([`WriteTarget`], by the rules
//! of its [`Api`]), the durability it asks, and its body, read within the
//! size limit and the memory budget and decompressed.

use std::collections::HashMap;

use axum::body::{Body, Bytes};
use axum::http::{header, HeaderMap, StatusCode};
use bytes::BytesMut;
use chingest::{Durability, MemoryReservation, Precision, WriteOptions};
use chingest_codecs::compression::{self, Compression, DecompressError};
use http_body_util::BodyExt;

use crate::error::{ApiError, Flavor};
use crate::span;
use crate::state::{token_from_authorization, AppState, Grant};
use crate::write::{OTLP_DATABASE_HEADER, OTLP_DEFAULT_DATABASE};

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
pub(super) struct ReceivedBody {
    bytes: Bytes,
    reservation: MemoryReservation,
}

impl ReceivedBody {
    /// The body and its reservation, to pass the reservation over to what
    /// the body becomes (see `crate::write::line_protocol`).
    pub(super) fn into_parts(self) -> (Bytes, MemoryReservation) {
        (self.bytes, self.reservation)
    }
}

impl std::ops::Deref for ReceivedBody {
    type Target = Bytes;

    fn deref(&self) -> &Bytes {
        &self.bytes
    }
}

/// Room reserved before the first bytes of a body without a length.
const UNKNOWN_LENGTH_RESERVATION: usize = 64 << 10;

/// Reads a request body up to `limit` bytes, decompressing gzip or snappy, with its
/// bytes counted in the memory budget as they arrive: many large bodies at
/// once get 429 (with `Retry-After`) instead of growing the process.
pub(super) async fn read_body(
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
            reservation,
        });
    };
    let decode_error = |err: DecompressError| match err {
        DecompressError::TooLarge { .. } => too_large(),
        DecompressError::Invalid { .. } => ApiError::bad_request(err.to_string()).flavor(flavor),
    };
    // The block format states its length first: refused before decoding.
    let declared = compression::declared_len(compression, &raw, limit).map_err(decode_error)?;
    let decode = move || compression::decompress(compression, &raw, limit);
    let decoded = match declared {
        Some(length) if length <= INLINE_DECOMPRESS_MAX => decode(),
        _ => tokio::task::spawn_blocking(decode)
            .await
            .map_err(|e| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?,
    }
    .map_err(decode_error)?;
    reservation
        .grow(decoded.len())
        .await
        .map_err(budget_error)?;
    Ok(ReceivedBody {
        bytes: Bytes::from(decoded),
        reservation,
    })
}

/// Snappy bodies that decompress to at most this many bytes (remote write
/// sends ~20–100 KB) are decompressed where they were read: well under a
/// millisecond, less than handing them to a blocking thread and back.
const INLINE_DECOMPRESS_MAX: usize = 256 << 10;

/// The APIs that write (or edit) a database, by where they name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Api {
    /// InfluxDB 1.x `/write`: `db=` (required), `rp=`; a token or `p=`.
    InfluxV1,
    /// InfluxDB 2.x `/api/v2/write`: `bucket=db[/rp]` (required); a token.
    InfluxV2,
    /// InfluxDB 2.x's delete and chingest's update: `bucket=db[/rp]`; a
    /// token; no durability (an edit is answered once queries see it).
    Edit,
    /// Prometheus remote write: `db=` (default `prometheus`), `rp=`; a token
    /// or `p=`.
    RemoteWrite,
    /// OTLP/HTTP: `db=` or the `X-Chingest-Database` header (default
    /// `otel`), the configured retention policy; a token.
    Otlp,
}

/// The database of remote write requests that name none.
const REMOTE_WRITE_DATABASE: &str = "prometheus";

/// Header naming a write's durability; the `durability` query parameter
/// wins over it.
const DURABILITY_HEADER: &str = "x-chingest-durability";

/// Where a request writes, once its caller is known to be allowed to.
#[derive(Debug)]
pub(super) struct WriteTarget {
    pub(super) db: String,
    /// The retention policy the request names; `None`: the configured
    /// default for writes, every policy for edits.
    pub(super) rp: Option<String>,
    /// The durability the request asks for, if any.
    pub(super) durability: Option<Durability>,
    /// How the API's errors are shaped.
    pub(super) flavor: Flavor,
}

impl WriteTarget {
    /// Authenticates the request, finds its database and retention
    /// policy as `api` names them, checks the caller may write there, and
    /// reads the durability it asks for.
    pub(super) fn of(
        api: Api,
        state: &AppState,
        params: &HashMap<String, String>,
        headers: &HeaderMap,
    ) -> Result<WriteTarget, ApiError> {
        let param = |name: &str| {
            params
                .get(name)
                .map(String::as_str)
                .filter(|v| !v.is_empty())
        };
        let flavor = match api {
            Api::InfluxV2 | Api::Edit => Flavor::V2,
            Api::InfluxV1 | Api::RemoteWrite | Api::Otlp => Flavor::V1,
        };
        let password = match api {
            Api::InfluxV1 | Api::RemoteWrite => params.get("p").map(String::as_str),
            Api::InfluxV2 | Api::Edit | Api::Otlp => None,
        };
        let grant = state.authorize(headers, password, flavor)?;
        let (db, rp) = match api {
            Api::InfluxV1 => (
                param("db")
                    .ok_or_else(|| ApiError::bad_request("database is required (db=...)"))?,
                param("rp"),
            ),
            Api::InfluxV2 | Api::Edit => bucket(params)?,
            Api::RemoteWrite => (param("db").unwrap_or(REMOTE_WRITE_DATABASE), param("rp")),
            Api::Otlp => {
                let header = headers
                    .get(OTLP_DATABASE_HEADER)
                    .and_then(|v| v.to_str().ok());
                let named = params.get("db").map(String::as_str).or(header);
                let named = named.filter(|db| !db.is_empty());
                (named.unwrap_or(OTLP_DEFAULT_DATABASE), None)
            }
        };
        grant.require_write(db).map_err(|e| e.flavor(flavor))?;
        span::database(db);
        let durability = match api {
            Api::Edit => None,
            _ => durability(params, headers, flavor)?,
        };
        Ok(WriteTarget {
            db: db.to_owned(),
            rp: rp.map(str::to_owned),
            durability,
            flavor,
        })
    }

    /// The retention policy rows go to: the named one, else the default.
    pub(super) fn rp_or_default<'a>(&'a self, state: &'a AppState) -> &'a str {
        self.rp
            .as_deref()
            .unwrap_or(&state.config.write.default_retention_policy)
    }

    /// The request's body (see [`read_body`]), within the configured limit.
    pub(super) async fn body(
        &self,
        state: &AppState,
        headers: &HeaderMap,
        body: Body,
    ) -> Result<ReceivedBody, ApiError> {
        let limit = state.config.limits.max_body_bytes;
        read_body(state, headers, body, limit, self.flavor).await
    }

    /// The library's options for this write, timestamps in `precision`.
    pub(super) fn options(&self, state: &AppState, precision: Precision) -> WriteOptions {
        state.write_options(precision, self.durability)
    }
}

/// The database and retention policy an InfluxDB 2 request's
/// `bucket=db[/rp]` names.
fn bucket(params: &HashMap<String, String>) -> Result<(&str, Option<&str>), ApiError> {
    let bucket = params
        .get("bucket")
        .filter(|bucket| !bucket.is_empty())
        .ok_or_else(|| {
            ApiError::bad_request("bucket is required (bucket=db or db/rp)").flavor(Flavor::V2)
        })?;
    Ok(match bucket.split_once('/') {
        Some((db, rp)) => (db, Some(rp)),
        None => (bucket.as_str(), None),
    })
}

/// The durability a write request asks for, if any.
fn durability(
    params: &HashMap<String, String>,
    headers: &HeaderMap,
    flavor: Flavor,
) -> Result<Option<Durability>, ApiError> {
    params
        .get("durability")
        .map(String::as_str)
        .or_else(|| headers.get(DURABILITY_HEADER)?.to_str().ok())
        .filter(|d| !d.is_empty())
        .map(str::parse::<Durability>)
        .transpose()
        .map_err(|e| ApiError::bad_request(e).flavor(flavor))
}
