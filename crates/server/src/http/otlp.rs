//! OTLP/HTTP metrics: `POST /v1/metrics`, an `ExportMetricsServiceRequest`
//! as protobuf (`application/x-protobuf`) or OTLP's JSON
//! (`application/json`: lowerCamelCase keys, 64-bit integers as strings or
//! numbers), optionally gzip-compressed, into the database `?db=` or the
//! `X-Chingest-Database` header names (default `otel`).
//! [`crate::write::export_otlp`] stores it; this module only speaks HTTP.
//!
//! The answer is in the request's content type, as the specification asks:
//! 200 with an `ExportMetricsServiceResponse` (its `partial_success` counts
//! the points refused and says why), or the error status with a
//! `google.rpc.Status` (`code`, `message`) — 400 for a body that does not
//! decode, 415 for another content type, 429/503 with `Retry-After` when a
//! retry can succeed.

use std::collections::HashMap;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use prost::Message;

use super::extract::{Api, WriteTarget};
use super::AppState;
use crate::error::ApiError;
use crate::write::export_otlp;

/// The two encodings OTLP/HTTP defines.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Encoding {
    Protobuf,
    Json,
}

impl Encoding {
    fn content_type(self) -> &'static str {
        match self {
            Encoding::Protobuf => "application/x-protobuf",
            Encoding::Json => "application/json",
        }
    }
}

/// `google.rpc.Status`, the body of an OTLP/HTTP error: the gRPC code and a
/// message (details are not sent).
#[derive(Clone, PartialEq, prost::Message)]
struct RpcStatus {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

/// `POST /v1/metrics?db=`.
pub(super) async fn metrics(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    // Errors are answered in the request's encoding too (JSON when unknown).
    let encoding = encoding(&headers);
    match export(&state, &params, &headers, body, encoding).await {
        Ok(response) => response,
        Err(err) => error_response(err, encoding.unwrap_or(Encoding::Json)),
    }
}

async fn export(
    state: &AppState,
    params: &HashMap<String, String>,
    headers: &HeaderMap,
    body: Body,
    encoding: Option<Encoding>,
) -> Result<Response, ApiError> {
    let target = WriteTarget::of(Api::Otlp, state, params, headers)?;
    let encoding = encoding.ok_or_else(|| {
        ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "OTLP/HTTP bodies are application/x-protobuf or application/json",
        )
    })?;
    let body = target.body(state, headers, body).await?;
    let response = match encoding {
        Encoding::Protobuf => export_otlp(state, &target.db, &body, target.durability).await?,
        Encoding::Json => {
            let message = chingest_codecs::otlp::protobuf_from_json(&body)?;
            drop(body);
            export_otlp(state, &target.db, &message, target.durability).await?
        }
    };
    let bytes = match encoding {
        Encoding::Protobuf => response.encode_to_vec(),
        Encoding::Json => serde_json::to_vec(&response).expect("responses serialize"),
    };
    Ok(([(header::CONTENT_TYPE, encoding.content_type())], bytes).into_response())
}

/// The encoding `Content-Type` names, if OTLP/HTTP has it.
fn encoding(headers: &HeaderMap) -> Option<Encoding> {
    let content_type = headers.get(header::CONTENT_TYPE)?.to_str().ok()?;
    let media = content_type.split(';').next()?.trim();
    if media.eq_ignore_ascii_case("application/x-protobuf") {
        Some(Encoding::Protobuf)
    } else if media.eq_ignore_ascii_case("application/json") {
        Some(Encoding::Json)
    } else {
        None
    }
}

/// An error as OTLP/HTTP answers it: its status, `Retry-After` when a retry
/// can succeed, and a `google.rpc.Status` body.
fn error_response(err: ApiError, encoding: Encoding) -> Response {
    let status = err.status;
    let retry_after = err.retry_after;
    let code = tonic::Status::from(err);
    let body = RpcStatus {
        code: code.code() as i32,
        message: code.message().to_owned(),
    };
    let bytes = match encoding {
        Encoding::Protobuf => body.encode_to_vec(),
        Encoding::Json => serde_json::json!({"code": body.code, "message": body.message})
            .to_string()
            .into_bytes(),
    };
    let mut response = (
        status,
        [(header::CONTENT_TYPE, encoding.content_type())],
        bytes,
    )
        .into_response();
    if let Some(seconds) = retry_after {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
    }
    response
}
