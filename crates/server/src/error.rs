//! The server's errors in one place: [`ServerError`], why it could not
//! start or stopped; and [`ApiError`], one error type for every endpoint,
//! and the one place errors become status codes. The body's shape follows the API the client speaks:
//! InfluxDB 1.x clients read `{"error": "..."}`, 2.x clients
//! `{"code": "...", "message": "..."}`; both get the same status.

use std::net::SocketAddr;

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use serde_json::json;

use crate::config::ConfigError;

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The configuration is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// An address could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Serving HTTP failed.
    #[error("http server: {0}")]
    Serve(std::io::Error),
    /// Serving gRPC failed.
    #[error("grpc server: {0}")]
    Grpc(#[from] tonic::transport::Error),
    /// The engine failed to open or to close.
    #[error("engine: {0}")]
    Engine(#[from] chingest::Error),
    /// The TLS certificate or key could not be used.
    #[error("tls: {0}")]
    Tls(String),
}

/// Which response shape a client expects.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// InfluxDB 1.x: `{"error": message}`.
    V1,
    /// InfluxDB 2.x: `{"code": code, "message": message}`.
    V2,
    /// Prometheus's HTTP API: `{"status": "error", "errorType": type,
    /// "error": message}`.
    Prometheus,
}

/// An error answered to a client.
#[derive(Debug)]
pub struct ApiError {
    /// The HTTP status.
    pub status: StatusCode,
    /// Message for the client.
    pub message: String,
    /// Response shape.
    pub flavor: Flavor,
    /// Extra fields merged into the JSON body.
    pub extra: serde_json::Map<String, serde_json::Value>,
    /// Seconds for a `Retry-After` header.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// An error with a status and a message.
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        ApiError {
            status,
            message: message.into(),
            flavor: Flavor::V1,
            extra: serde_json::Map::new(),
            retry_after: None,
        }
    }

    /// 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    /// The same error in another response shape.
    pub fn flavor(mut self, flavor: Flavor) -> Self {
        self.flavor = flavor;
        self
    }

    /// Adds a field to the JSON body.
    pub fn with(mut self, key: &str, value: serde_json::Value) -> Self {
        self.extra.insert(key.to_owned(), value);
        self
    }

    /// InfluxDB 2.x's code for a status.
    fn v2_code(&self) -> &'static str {
        match self.status {
            StatusCode::BAD_REQUEST => "invalid",
            StatusCode::UNAUTHORIZED => "unauthorized",
            StatusCode::FORBIDDEN => "forbidden",
            StatusCode::NOT_FOUND => "not found",
            StatusCode::PAYLOAD_TOO_LARGE => "request too large",
            StatusCode::UNSUPPORTED_MEDIA_TYPE => "unsupported media type",
            StatusCode::TOO_MANY_REQUESTS => "too many requests",
            StatusCode::SERVICE_UNAVAILABLE => "unavailable",
            _ => "internal error",
        }
    }
}

impl From<chingest::Error> for ApiError {
    fn from(err: chingest::Error) -> Self {
        use chingest::Error as E;
        let status = match &err {
            E::InvalidName { .. }
            | E::InvalidBatch { .. }
            | E::InvalidEdit(_)
            | E::UnknownFormat(_)
            | E::InvalidBackup(_)
            | E::Config(_) => StatusCode::BAD_REQUEST,

            E::NotReadOnly(_) => StatusCode::FORBIDDEN,
            E::QueryLimit { .. } => StatusCode::UNPROCESSABLE_ENTITY,
            E::TooManyQueries { .. } => StatusCode::TOO_MANY_REQUESTS,
            // It waited its turn and the server could not serve it.
            E::QueryQueueTimeout { .. } => StatusCode::SERVICE_UNAVAILABLE,
            E::DatabaseNotFound(_) | E::NotCached { .. } => StatusCode::NOT_FOUND,
            E::Conflict(_) => StatusCode::CONFLICT,
            E::Overloaded { .. } => StatusCode::TOO_MANY_REQUESTS,
            // The log is full or cannot be written (a full disk): retry later.
            E::Closed | E::LogFull { .. } | E::Io { .. } => StatusCode::SERVICE_UNAVAILABLE,
            // A shard of the cluster is down or failing: retry later.
            E::Shard { .. } => StatusCode::SERVICE_UNAVAILABLE,
            _ => StatusCode::INTERNAL_SERVER_ERROR,
        };
        let mut api = ApiError::new(status, err.to_string());
        api.retry_after = match &err {
            E::Overloaded { retry_after, .. }
            | E::LogFull { retry_after, .. }
            | E::TooManyQueries { retry_after, .. }
            | E::QueryQueueTimeout { retry_after, .. } => Some(retry_after.as_secs().max(1)),
            _ if status == StatusCode::SERVICE_UNAVAILABLE => Some(1),
            _ => None,
        };
        api
    }
}

impl From<chingest_codecs::Error> for ApiError {
    fn from(err: chingest_codecs::Error) -> Self {
        use chingest_codecs::Error as E;
        let status = match &err {
            // Nothing of the request is stored; sending it again cannot help.
            E::Invalid(_) | E::Malformed { .. } | E::Arrow(_) => StatusCode::BAD_REQUEST,
        };
        ApiError::new(status, err.to_string())
    }
}

/// What a caller lacks: 403, said of its token.
impl From<chingest::Denied> for ApiError {
    fn from(denied: chingest::Denied) -> Self {
        ApiError::new(StatusCode::FORBIDDEN, format!("this token {denied}"))
    }
}

/// InfluxQL's errors that fail a `/query` request. A statement's own error
/// is answered in its result by the handler; should one come here, it is
/// the client's (400).
impl From<chingest_influxql::Error> for ApiError {
    fn from(err: chingest_influxql::Error) -> Self {
        use chingest_influxql::Error as E;
        match err {
            E::Statement(_) | E::Parse(_) | E::Invalid(_) => ApiError::bad_request(err.to_string()),
            E::Forbidden(denied) => denied.into(),
            E::Request(err) => err.into(),
        }
    }
}

/// PromQL's errors, with Prometheus's `errorType` and status (the
/// library's refusals keep theirs: 429/503 with `Retry-After`).
impl From<chingest_promql::Error> for ApiError {
    fn from(err: chingest_promql::Error) -> Self {
        use chingest_promql::Error as E;
        let error_type = err.error_type();
        let api = match err {
            E::Forbidden(denied) => return ApiError::from(denied).flavor(Flavor::Prometheus),
            E::Engine(err) => return ApiError::from(err).flavor(Flavor::Prometheus),
            E::BadData(_) => ApiError::bad_request(err.to_string()),
            E::Execution(_) => ApiError::new(StatusCode::UNPROCESSABLE_ENTITY, err.to_string()),
            E::Timeout(_) => ApiError::new(StatusCode::SERVICE_UNAVAILABLE, err.to_string()),
        };
        api.flavor(Flavor::Prometheus)
            .with("errorType", serde_json::Value::from(error_type))
    }
}

impl ApiError {
    /// Prometheus's `errorType` for a status this server answers.
    fn prometheus_error_type(&self) -> &'static str {
        match self.status {
            StatusCode::BAD_REQUEST => "bad_data",
            StatusCode::UNPROCESSABLE_ENTITY => "execution",
            StatusCode::NOT_FOUND => "not_found",
            StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN => "unauthorized",
            StatusCode::TOO_MANY_REQUESTS | StatusCode::SERVICE_UNAVAILABLE => "unavailable",
            _ => "internal",
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(status = %self.status, message = %self.message, "request failed");
        } else {
            tracing::debug!(status = %self.status, message = %self.message, "request refused");
        }
        let mut body = match self.flavor {
            Flavor::V1 => json!({ "error": self.message }),
            Flavor::V2 => json!({ "code": self.v2_code(), "message": self.message }),
            Flavor::Prometheus => json!({
                "status": "error",
                "errorType": self.prometheus_error_type(),
                "error": self.message,
            }),
        };
        if let Some(object) = body.as_object_mut() {
            object.extend(self.extra);
        }
        let mut response = (self.status, axum::Json(body)).into_response();
        if let Some(seconds) = self.retry_after {
            response
                .headers_mut()
                .insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        if self.status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Token realm=\"chingest\""),
            );
        }
        response
    }
}
