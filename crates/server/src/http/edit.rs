//! Deletes and corrections over HTTP, in InfluxDB 2's shape:
//!
//! - `POST /api/v2/delete?bucket=db[/rp]`, body `{"start": RFC 3339,
//!   "stop": RFC 3339, "predicate": "_measurement=\"cpu\" AND host=\"a\""}`
//!   (InfluxDB's own API: start and stop required, the predicate optional);
//! - `POST /api/v2/update?bucket=db[/rp]` (chingest's), the same body with
//!   the predicate naming `_measurement`, start and stop optional, and
//!   `"set": {"field": value, …}`: the new values of the matching points.
//!
//! Both answer 204 once queries see the change. Without `/rp` they apply
//! to every retention policy of the database.

use std::collections::HashMap;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode};
use chingest::{FieldValue, PointFilter};
use chingest_influxql::condition::{self, Dialect};
use serde::Deserialize;

use super::extract::{Api, WriteTarget};
use super::AppState;
use crate::error::{ApiError, Flavor};

/// The body of a delete or an update.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EditRequest {
    start: Option<String>,
    stop: Option<String>,
    #[serde(default)]
    predicate: String,
    /// Updates only.
    set: Option<serde_json::Map<String, serde_json::Value>>,
}

/// `POST /api/v2/delete`.
pub(super) async fn delete(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let (db, request, filter) = edit_request(&state, &params, &headers, body).await?;
    if request.set.is_some() {
        return Err(bad(
            "a delete takes no \"set\"; POST /api/v2/update changes values",
        ));
    }
    if request.start.is_none() || request.stop.is_none() {
        return Err(bad("start and stop are required (RFC 3339 times)"));
    }
    let ingestor = state.ingestor().map_err(v2)?;
    ingestor
        .delete(&db, &filter)
        .await
        .map_err(|e| v2(e.into()))?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /api/v2/update`.
pub(super) async fn update(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let (db, request, filter) = edit_request(&state, &params, &headers, body).await?;
    let set = request
        .set
        .filter(|set| !set.is_empty())
        .ok_or_else(|| bad("\"set\" names the fields to change and their new values"))?;
    if filter.measurement.is_none() {
        return Err(bad(
            "the predicate must name the measurement (_measurement=\"m\")",
        ));
    }
    let ingestor = state.ingestor().map_err(v2)?;
    for (field, value) in &set {
        let value = field_value(field, value)?;
        ingestor
            .update(&db, &filter, field, &value)
            .await
            .map_err(|e| v2(e.into()))?;
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Authorizes an edit of the request's bucket, reads its body and parses
/// its times and predicate.
async fn edit_request(
    state: &AppState,
    params: &HashMap<String, String>,
    headers: &HeaderMap,
    body: Body,
) -> Result<(String, EditRequest, PointFilter), ApiError> {
    let target = WriteTarget::of(Api::Edit, state, params, headers)?;
    let body = target.body(state, headers, body).await?;
    let request: EditRequest = serde_json::from_slice(&body)
        .map_err(|e| bad(format!("the body is not a delete or update request: {e}")))?;
    let time = |t: &Option<String>| {
        t.as_deref()
            .map(condition::parse_time)
            .transpose()
            .map_err(bad)
    };
    let (start, stop) = (time(&request.start)?, time(&request.stop)?);
    let mut filter = PointFilter {
        retention_policy: target.rp.clone(),
        ..PointFilter::all()
    };
    condition::parse(&request.predicate, Dialect::DeletePredicate, 0)
        .map_err(|e| bad(format!("predicate: {e}")))?
        .apply(&mut filter)
        .map_err(|e| bad(format!("predicate: {e}")))?;
    // InfluxDB's stop is inclusive.
    filter.start = start;
    filter.stop = stop.map(|t| t.saturating_add(1));
    Ok((target.db, request, filter))
}

/// A JSON value as the new value of `field` (its exact type is checked
/// against the field by the ingestor).
fn field_value(field: &str, value: &serde_json::Value) -> Result<FieldValue, ApiError> {
    use serde_json::Value as J;
    Ok(match value {
        J::Bool(b) => FieldValue::Boolean(*b),
        J::String(s) => FieldValue::String(s.clone()),
        J::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
            (Some(i), _, _) => FieldValue::Integer(i),
            (None, Some(u), _) => FieldValue::UInteger(u),
            (_, _, Some(f)) => FieldValue::Float(f),
            _ => return Err(bad(format!("{field}: {n} is out of range"))),
        },
        other => {
            return Err(bad(format!(
                "{field}: {other} cannot be a field value (a number, string or boolean)"
            )))
        }
    })
}

fn bad(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(message).flavor(Flavor::V2)
}

fn v2(err: ApiError) -> ApiError {
    err.flavor(Flavor::V2)
}
