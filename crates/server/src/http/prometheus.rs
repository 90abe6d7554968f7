//! Prometheus remote write 1.0 and 2.0: `POST /api/v1/write` (and InfluxDB
//! 1.x's path, `/api/v1/prom/write`), a snappy-compressed protobuf message,
//! into the database `?db=` names (default `prometheus`). The
//! `Content-Type`'s `proto=` parameter tells the versions apart: 1.0's
//! `prometheus.WriteRequest` (or none), 2.0's
//! `io.prometheus.write.v2.Request`.
//!
//! The request becomes tables in [`chingest_codecs::prometheus`] (its
//! data model is documented there), and the tables of every measurement
//! are one write ([`crate::write::tables`]): a request is stored whole or
//! not at all, never through line protocol. Statuses follow the
//! specifications: 204 when stored (2.0: with the
//! `X-Prometheus-Remote-Write-*-Written` counts); 400 for a request that
//! is not valid (with what is wrong; nothing of it is stored); 415 for
//! another encoding or message; 429 and 503 only when a retry can succeed.

use std::collections::HashMap;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use chingest_codecs::prometheus::{self as codec, Decoded};
use chingest_proto::prometheus::v2;
use prost::Message;

use super::extract::{Api, WriteTarget};
use super::AppState;
use crate::error::ApiError;
use crate::metrics::Protocol;
use crate::write;

/// The two messages a sender may post.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Version {
    /// `prometheus.WriteRequest`.
    V1,
    /// `io.prometheus.write.v2.Request`.
    V2,
}

/// `POST /api/v1/write?db=&rp=`.
pub(super) async fn write(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let target = WriteTarget::of(Api::RemoteWrite, &state, &params, &headers)?;
    let version = version(&headers)?;
    if !headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("snappy"))
    {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "remote write bodies are snappy-compressed: Content-Encoding: snappy",
        ));
    }
    let body = target.body(&state, &headers, body).await?;
    // Labels and symbols are slices of the body: 1.0 is read in place, 2.0
    // decoded from the shared buffer.
    let v2_request;
    let decoded = match version {
        Version::V1 => Decoded::v1(&body),
        Version::V2 => {
            v2_request = v2::Request::decode(Bytes::clone(&body)).map_err(|e| {
                ApiError::bad_request(format!("not a remote write 2.0 Request: {e}"))
            })?;
            Decoded::v2(&v2_request)
        }
    }?;
    let tables = codec::tables(&decoded)?;
    let written = [
        (
            "x-prometheus-remote-write-samples-written",
            decoded.sample_count(),
        ),
        (
            "x-prometheus-remote-write-histograms-written",
            decoded.histogram_count(),
        ),
        (
            "x-prometheus-remote-write-exemplars-written",
            decoded.exemplar_count(),
        ),
    ];
    // The tables' tags are slices of the body: it stays, and with it its
    // reservation in the memory budget, until the write is logged.
    drop(decoded);
    let ingestor = state.ingestor()?;
    let (db, rp) = (&target.db, target.rp_or_default(&state));
    let options = target.options(&state, chingest::Precision::Nanoseconds);
    let rows = write::tables(ingestor, db, rp, &tables, &options).await?;
    state.metrics.count_rows(Protocol::RemoteWrite, rows);
    let mut response = StatusCode::NO_CONTENT.into_response();
    if version == Version::V2 {
        for (name, count) in written {
            response
                .headers_mut()
                .insert(name, HeaderValue::from(count));
        }
    }
    Ok(response)
}

/// The message `Content-Type` names: `application/x-protobuf`, with no
/// `proto=` or 1.0's (`prometheus.WriteRequest`), or 2.0's
/// (`io.prometheus.write.v2.Request`).
fn version(headers: &HeaderMap) -> Result<Version, ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/x-protobuf")
        .to_ascii_lowercase();
    let mut parts = content_type.split(';').map(str::trim);
    let media = parts.next().unwrap_or_default();
    let proto = parts.find_map(|p| p.strip_prefix("proto="));
    match (media, proto) {
        ("application/x-protobuf", None | Some("prometheus.writerequest")) => Ok(Version::V1),
        ("application/x-protobuf", Some("io.prometheus.write.v2.request")) => Ok(Version::V2),
        _ => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!(
                "unsupported Content-Type {content_type:?}: remote write sends application/x-protobuf, \
                 with proto=prometheus.WriteRequest (1.0) or proto=io.prometheus.write.v2.Request (2.0)"
            ),
        )),
    }
}
