//! What every front end (HTTP and gRPC) reaches: the ingestor once the
//! engine is open, the configuration, the counters, and the two rules the
//! front ends share — who may call, and with which write options.

use std::sync::Arc;

use axum::http::StatusCode;
use base64::Engine as _;
use chingest::{Durability, Ingestor, Precision, WriteOptions};
use tokio::sync::OnceCell;

use crate::config::ServerConfig;
use crate::error::ApiError;

/// Rejected lines listed in a partial-write reply, by either API; the count
/// covers all of them.
pub(crate) const MAX_LISTED_REJECTIONS: usize = 1000;

/// Shared by every handler of both APIs.
#[derive(Debug, Clone)]
pub struct AppState {
    /// Set once the engine is open; until then the data endpoints answer 503.
    pub ingestor: Arc<OnceCell<Ingestor>>,
    /// The configuration in force.
    pub config: Arc<ServerConfig>,
    /// The HTTP and gRPC layers' own counters.
    pub metrics: Arc<crate::metrics::ServerMetrics>,
}

impl AppState {
    /// The ingestor, or 503 (UNAVAILABLE) while the engine is starting.
    pub(crate) fn ingestor(&self) -> Result<&Ingestor, ApiError> {
        self.ingestor.get().ok_or_else(|| {
            let mut err = ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the engine is starting");
            err.retry_after = Some(1);
            err
        })
    }

    /// Accepts `offered` when it is one of the configured tokens, or when
    /// none are configured; otherwise 401 (UNAUTHENTICATED).
    pub(crate) fn check_token(&self, offered: Option<&str>) -> Result<(), ApiError> {
        let tokens = &self.config.auth_tokens;
        if tokens.is_empty() {
            return Ok(());
        }
        match offered {
            Some(token) if tokens.iter().any(|t| t == token) => Ok(()),
            Some(_) => Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "authorization failed",
            )),
            None => Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "authorization required",
            )),
        }
    }

    /// The options of a client's write: its precision, the durability it
    /// asked for (else the configured one), and the configured limits and
    /// database creation.
    pub(crate) fn write_options(
        &self,
        precision: Precision,
        durability: Option<Durability>,
    ) -> WriteOptions {
        let config = &self.config;
        WriteOptions {
            precision,
            durability: durability
                .unwrap_or_else(|| config.write.durability.parse().unwrap_or_default()),
            max_line_len: config.limits.max_line_bytes,
            max_tags_per_line: config.limits.max_tags_per_line,
            max_fields_per_line: config.limits.max_fields_per_line,
            max_name_len: config.limits.max_name_bytes,
            create_database: config.write.auto_create_databases,
        }
    }
}

/// The token in an `Authorization` value (HTTP header or gRPC metadata):
/// `Token <t>`, `Bearer <t>`, or Basic auth with the token as password.
pub(crate) fn token_from_authorization(value: &str) -> Option<String> {
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
}
