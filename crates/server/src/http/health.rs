//! Liveness and readiness.

use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};

use super::AppState;

/// `GET /health`: the process answers.
pub(super) async fn health() -> Json<Value> {
    Json(json!({ "name": "chingest", "status": "pass", "version": env!("CARGO_PKG_VERSION") }))
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
