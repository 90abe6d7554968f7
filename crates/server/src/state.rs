//! What every front end (HTTP and gRPC) reaches: the ingestor once the
//! engine is open, the configuration, the counters, and the two rules the
//! front ends share — who may call, and with which write options.

use std::sync::Arc;

use axum::http::StatusCode;
use base64::Engine as _;
use chingest::Access;
use chingest::{Durability, Ingestor, Precision, ReadScope, WriteOptions};
use tokio::sync::OnceCell;

use crate::config::ServerConfig;
use crate::error::ApiError;

/// What a request's token lets it do. 403 (PERMISSION_DENIED) otherwise.
/// The rules are the library's [`Access`], which `/query` hands its
/// statements; the other endpoints ask here.
/// The flag: whether it may administer the server (backups, snapshots).
#[derive(Debug, Clone)]
pub(crate) struct Grant(Access, bool);

impl Grant {
    /// No auth configured, or a token of `auth_tokens`.
    pub(crate) const ALL: Grant = Grant(Access::ALL, true);

    /// May administer the server: back it up, take snapshots. Only
    /// `auth_tokens` (or no auth configured) may.
    pub(crate) fn require_admin(&self) -> Result<(), ApiError> {
        match self.1 {
            true => Ok(()),
            false => Err(ApiError::new(
                StatusCode::FORBIDDEN,
                "this token may not administer the server (backups and snapshots need a token of auth_tokens)",
            )),
        }
    }

    /// May write `db` (and create it, and its retention policies).
    pub(crate) fn require_write(&self, db: &str) -> Result<(), ApiError> {
        Ok(self.0.require_write(db)?)
    }

    /// May read, in the databases of [`read_scope`](Self::read_scope).
    pub(crate) fn require_read(&self) -> Result<(), ApiError> {
        Ok(self.0.require_read()?)
    }

    /// Whether `db` is in the token's databases.
    pub(crate) fn covers(&self, db: &str) -> bool {
        self.0.covers(db)
    }

    /// The databases its queries may read.
    pub(crate) fn read_scope(&self) -> chingest::ReadScope {
        self.0.scope.clone()
    }

    /// What it may do, for InfluxQL's statements.
    pub(crate) fn access(&self) -> &Access {
        &self.0
    }
}

/// Compares two secrets without stopping at the first difference, so the
/// time taken does not tell how much of a guess was right.
fn same_secret(a: &[u8], b: &[u8]) -> bool {
    let differences = a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y));
    std::hint::black_box(differences) == 0 && a.len() == b.len()
}

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
    /// PromQL range queries' settled steps (`[promql]
    /// result_cache_max_bytes`).
    pub promql_cache: Arc<chingest_promql::ResultCache>,
    /// The rules evaluated here, set once the engine is open.
    pub rules: Arc<OnceCell<chingest_rules::manager::Manager>>,
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

    /// What `offered` may do: everything when no tokens are configured,
    /// else its configured scope; 401 (UNAUTHENTICATED) when it is missing
    /// or matches no token. Every token is compared, in constant time.
    pub(crate) fn check_token(&self, offered: Option<&str>) -> Result<Grant, ApiError> {
        let config = &self.config;
        if config.auth_tokens.is_empty() && config.tokens.is_empty() {
            return Ok(Grant::ALL);
        }
        let Some(offered) = offered else {
            return Err(ApiError::new(
                StatusCode::UNAUTHORIZED,
                "authorization required",
            ));
        };
        let full = config.auth_tokens.iter().map(|t| (t.as_str(), Grant::ALL));
        let scoped = config.tokens.iter().map(|t| {
            let grant = Grant(
                Access {
                    read: t.read,
                    write: t.write,
                    scope: match t.databases.is_empty() {
                        true => ReadScope::All,
                        false => ReadScope::Databases(t.databases.clone()),
                    },
                },
                false,
            );
            (t.token.as_str(), grant)
        });
        // No early exit: the time taken does not tell which token matched.
        let mut found = None;
        for (token, grant) in full.chain(scoped) {
            if same_secret(token.as_bytes(), offered.as_bytes()) && found.is_none() {
                found = Some(grant);
            }
        }
        found.ok_or_else(|| ApiError::new(StatusCode::UNAUTHORIZED, "authorization failed"))
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
            durability: durability.unwrap_or(config.write.durability),
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
