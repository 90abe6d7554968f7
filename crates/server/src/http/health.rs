//! Liveness and readiness.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use crate::state::AppState;

/// `GET /health`: 200 and `"status": "pass"` when nothing is wrong; 503,
/// `"fail"` and one check per problem while the log cannot be written,
/// inserts keep failing, or the engine found broken parts when it opened.
pub(super) async fn health(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    let problems = state
        .ingestor
        .get()
        .map(|ingestor| ingestor.stats().problems())
        .unwrap_or_default();
    let (status, word) = match problems.is_empty() {
        true => (StatusCode::OK, "pass"),
        false => (StatusCode::SERVICE_UNAVAILABLE, "fail"),
    };
    let checks: Vec<Value> = problems
        .iter()
        .map(|message| json!({ "status": "fail", "message": message }))
        .collect();
    (
        status,
        Json(json!({
            "name": "chingest",
            "status": word,
            "checks": checks,
            "version": env!("CARGO_PKG_VERSION"),
        })),
    )
}

/// `GET /ready`: 200 once the engine is open, 503 before.
pub(super) async fn ready(State(state): State<AppState>) -> (StatusCode, Json<Value>) {
    match state.ingestor.get() {
        Some(_) => (StatusCode::OK, Json(json!({ "status": "ready" }))),
        None => (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({ "status": "starting" })),
        ),
    }
}
