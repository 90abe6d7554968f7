//! Administration over HTTP, for a token of `auth_tokens`:
//!
//! - `POST /api/v1/admin/backup`, body `{"to": "/dir" | "s3://bucket/prefix",
//!   "base": optional earlier backup, "databases": optional list, "s3":
//!   {"endpoint", "access_key_id", "secret_access_key"} for s3:// ones}`:
//!   writes a backup (docs/backup.md) and answers what it wrote;
//! - `POST /api/v1/admin/snapshots`: takes a snapshot, answers its name
//!   and directory; `GET` lists them; `DELETE /api/v1/admin/snapshots/{name}`
//!   deletes one (204, or 404).

use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::Json;
use chingest::backup::{BackupLocation, BackupReport, BackupRequest, S3Credentials, Snapshot};
use serde::{Deserialize, Serialize};

use super::AppState;
use crate::error::{ApiError, Flavor};

/// Largest body of an administrative request.
const MAX_BODY_BYTES: usize = 64 * 1024;

/// `POST /api/v1/admin/backup`'s body.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct BackupBody {
    /// A new absolute directory on the server's machine, or
    /// `s3://bucket/prefix`.
    to: String,
    /// An earlier backup this one adds to.
    #[serde(default)]
    base: Option<String>,
    /// The databases; none: every one.
    #[serde(default)]
    databases: Vec<String>,
    /// For `s3://` locations.
    #[serde(default)]
    s3: Option<S3Body>,
}

/// The endpoint and credentials of `s3://` locations.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct S3Body {
    /// `http://host:port` or `https://…`.
    endpoint: String,
    /// The access key id.
    access_key_id: String,
    /// The secret access key.
    secret_access_key: String,
}

/// What a backup wrote, as answered.
#[derive(Debug, Serialize)]
struct BackupAnswer {
    location: String,
    databases: Vec<String>,
    base: Option<String>,
    files: usize,
    bytes_written: u64,
    total_bytes: u64,
    inserts_held_ms: u64,
    elapsed_ms: u64,
}

impl From<BackupReport> for BackupAnswer {
    fn from(r: BackupReport) -> Self {
        BackupAnswer {
            location: r.location,
            databases: r.databases,
            base: r.base,
            files: r.files,
            bytes_written: r.bytes_written,
            total_bytes: r.total_bytes,
            inserts_held_ms: r.inserts_held.as_millis() as u64,
            elapsed_ms: r.elapsed.as_millis() as u64,
        }
    }
}

#[derive(Debug, Serialize)]
struct SnapshotAnswer {
    name: String,
    path: String,
}

impl From<Snapshot> for SnapshotAnswer {
    fn from(s: Snapshot) -> Self {
        SnapshotAnswer {
            name: s.name,
            path: s.path.display().to_string(),
        }
    }
}

fn admin(state: &AppState, headers: &HeaderMap) -> Result<(), ApiError> {
    state
        .authorize(headers, None, Flavor::V2)?
        .require_admin()
        .map_err(|e| e.flavor(Flavor::V2))
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::new(StatusCode::BAD_REQUEST, message).flavor(Flavor::V2)
}

fn v2(err: chingest::Error) -> ApiError {
    ApiError::from(err).flavor(Flavor::V2)
}

/// `POST /api/v1/admin/backup`.
pub(super) async fn backup(
    State(state): State<AppState>,
    headers: HeaderMap,
    body: Body,
) -> Result<Json<serde_json::Value>, ApiError> {
    admin(&state, &headers)?;
    let body = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|e| {
            bad(format!(
                "the body could not be read (at most {MAX_BODY_BYTES} bytes): {e}"
            ))
        })?;
    let body: BackupBody = serde_json::from_slice(&body)
        .map_err(|e| bad(format!("the body is not a backup request: {e}")))?;
    let credentials = body.s3.map(|s3| S3Credentials {
        endpoint: s3.endpoint,
        access_key_id: s3.access_key_id,
        secret_access_key: s3.secret_access_key,
    });
    let location = BackupLocation::parse(&body.to, credentials.clone()).map_err(v2)?;
    let base = body
        .base
        .map(|base| BackupLocation::parse(&base, credentials))
        .transpose()
        .map_err(v2)?;
    let report = state
        .ingestor()?
        .backup(BackupRequest {
            location,
            base,
            databases: body.databases,
        })
        .await
        .map_err(v2)?;
    Ok(Json(
        serde_json::to_value(BackupAnswer::from(report)).expect("serializable"),
    ))
}

/// `POST /api/v1/admin/snapshots`.
pub(super) async fn create_snapshot(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<serde_json::Value>, ApiError> {
    admin(&state, &headers)?;
    let snapshot = state.ingestor()?.create_snapshot().await.map_err(v2)?;
    Ok(Json(
        serde_json::to_value(SnapshotAnswer::from(snapshot)).expect("serializable"),
    ))
}

/// `GET /api/v1/admin/snapshots`.
pub(super) async fn snapshots(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<serde_json::Value>, ApiError> {
    admin(&state, &headers)?;
    let listed: Vec<SnapshotAnswer> = state
        .ingestor()?
        .snapshots()
        .map_err(v2)?
        .into_iter()
        .map(SnapshotAnswer::from)
        .collect();
    Ok(Json(serde_json::json!({ "snapshots": listed })))
}

/// `DELETE /api/v1/admin/snapshots/{name}`.
pub(super) async fn delete_snapshot(
    State(state): State<AppState>,
    headers: HeaderMap,
    Path(name): Path<String>,
) -> Result<StatusCode, ApiError> {
    admin(&state, &headers)?;
    match state.ingestor()?.delete_snapshot(&name).map_err(v2)? {
        true => Ok(StatusCode::NO_CONTENT),
        false => Err(
            ApiError::new(StatusCode::NOT_FOUND, format!("no snapshot named {name}"))
                .flavor(Flavor::V2),
        ),
    }
}
