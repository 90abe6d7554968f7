//! `/query`: InfluxDB 1.x's query endpoint. The statements are InfluxQL,
//! parsed and answered by [`chingest_influxql`]; this module reads the
//! request (`q`, also as a form field of a POST body, `db`, `rp`, `params`,
//! `epoch`, `chunked`, `chunk_size`; credentials), hands the statements
//! what the caller may do, and writes every answer in InfluxDB's JSON
//! shape (whole, or chunked). A statement that writes (`SELECT … INTO`,
//! `CREATE …`, deletes) runs on `GET` too, its result carrying InfluxDB
//! 1.x's warning to use `POST`.

use std::collections::HashMap;

use axum::extract::{Query, State};
use axum::http::{HeaderMap, Method};
use axum::response::{IntoResponse as _, Response};
use axum::Json;
use chingest_influxql::{self as influxql, Answer, Param, Series, TimeFormat};
use serde_json::{json, Map, Value};

use crate::error::{ApiError, Flavor};
use crate::span;
use crate::state::AppState;

/// What one statement answered, and the warning its result carries.
struct Answered {
    outcome: Outcome,
    warning: Option<String>,
}

/// What one statement answered.
enum Outcome {
    /// An administrative statement's answer: written whole, its values
    /// listed even when there are none.
    Admin(Answer),
    Query(Answer),
    Error(String),
}

/// `GET|POST /query?q=...&db=...`: every statement is parsed first (a
/// parse error answers 400 and runs nothing), then each runs in order.
/// `epoch=` writes times as integers; `chunked=true` answers one JSON
/// object per line, a series (or `chunk_size` rows of one) at a time.
pub(super) async fn query(
    State(state): State<AppState>,
    Query(mut params): Query<HashMap<String, String>>,
    method: Method,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let grant = state.authorize(&headers, params.get("p").map(String::as_str), Flavor::V1)?;
    let ingestor = state.ingestor()?;
    // Clients also send q as a form field in a POST body.
    let form = super::extract::read_body(
        &state,
        &headers,
        body,
        state.config.limits.max_body_bytes,
        Flavor::V1,
    )
    .await?;
    for (key, value) in url_decoded_pairs(&form) {
        params.entry(key).or_insert(value);
    }
    let q = params
        .get("q")
        .filter(|q| !q.trim().is_empty())
        .ok_or_else(|| ApiError::bad_request("missing required parameter \"q\""))?;
    let now = chingest::clock::now_ns();
    // `params={"name": value}` binds `$name`.
    let bound;
    let q = match params.get("params").filter(|p| !p.trim().is_empty()) {
        Some(json) => {
            let values: Map<String, Value> = serde_json::from_str(json).map_err(|err| {
                ApiError::bad_request(format!("error parsing query parameters: {err}"))
            })?;
            let values = values
                .into_iter()
                .map(|(name, value)| (name, param(value)))
                .collect();
            bound = influxql::bind(q, &values)?;
            &bound
        }
        None => q,
    };
    let statements = influxql::parse_query(q, now)?;
    // InfluxDB 1.x runs a statement that writes on GET, with a warning.
    let texts = influxql::statement_texts(q)?;
    let warnings = statements.iter().zip(texts).map(|(statement, text)| {
        let writes = statement.as_ref().is_ok_and(influxql::Statement::writes);
        (writes && method == Method::GET).then(|| {
            format!(
                "deprecated use of '{text}' in a read only context, please use a POST request \
                 instead"
            )
        })
    });
    let warnings: Vec<Option<String>> = warnings.collect();
    let retention_policy = params
        .get("rp")
        .filter(|rp| !rp.is_empty())
        .unwrap_or(&state.config.write.default_retention_policy);
    let database = params.get("db").map(String::as_str);
    if let Some(db) = database {
        span::database(db);
    }
    let context = influxql::Context {
        ingestor,
        access: grant.access(),
        database,
        retention_policy,
        default_retention_policy: &state.config.write.default_retention_policy,
        default_duplicate_policy: state.config.write.duplicate_policy,
        now,
    };
    let mut outcomes = Vec::new();
    for (statement, warning) in statements.into_iter().zip(warnings) {
        let outcome = match statement {
            Ok(statement) => match influxql::execute(&context, &statement).await {
                Ok(answer) if statement.is_admin() => Outcome::Admin(answer),
                Ok(answer) => Outcome::Query(answer),
                Err(influxql::Error::Statement(message)) => Outcome::Error(message),
                Err(err) => return Err(err.into()),
            },
            Err(message) => Outcome::Error(message),
        };
        outcomes.push(Answered { outcome, warning });
    }
    let epoch = params.get("epoch").and_then(|e| influxql::epoch_unit(e));
    let chunk_rows = match params.get("chunked").map(String::as_str) {
        Some("true") => Some(
            params
                .get("chunk_size")
                .and_then(|n| n.parse::<usize>().ok())
                .filter(|&n| n > 0)
                .unwrap_or(10_000),
        ),
        _ => None,
    };
    let mut response = match chunk_rows {
        None => {
            let results: Vec<Value> = outcomes
                .iter()
                .enumerate()
                .map(|(id, answered)| {
                    let mut result = outcome_json(id, &answered.outcome, epoch);
                    warn(&mut result, answered.warning.as_deref());
                    result
                })
                .collect();
            Json(json!({ "results": results })).into_response()
        }
        Some(rows) => {
            let mut lines = String::new();
            for (id, answered) in outcomes.iter().enumerate() {
                let mut chunks = chunks(id, &answered.outcome, epoch, rows);
                if let Some(first) = chunks.first_mut() {
                    warn(first, answered.warning.as_deref());
                }
                for chunk in chunks {
                    lines.push_str(&json!({ "results": [chunk] }).to_string());
                    lines.push('\n');
                }
            }
            lines.into_response()
        }
    };
    response.headers_mut().insert(
        axum::http::header::CONTENT_TYPE,
        axum::http::HeaderValue::from_static("application/json"),
    );
    Ok(response)
}

/// Adds `warning` to a statement's result as InfluxDB writes its
/// messages.
fn warn(result: &mut Value, warning: Option<&str>) {
    if let (Some(text), false) = (warning, result.get("error").is_some()) {
        result["messages"] = json!([{ "level": "warning", "text": text }]);
    }
}

/// A `params` value as InfluxQL binds it.
fn param(value: Value) -> Param {
    match value {
        Value::String(s) => Param::String(s),
        v @ (Value::Number(_) | Value::Bool(_)) => Param::Literal(v.to_string()),
        other => Param::Unsupported(other.to_string()),
    }
}

/// One statement's result object.
fn outcome_json(id: usize, outcome: &Outcome, epoch: Option<i64>) -> Value {
    let (answer, admin) = match outcome {
        Outcome::Error(message) => return json!({ "statement_id": id, "error": message }),
        Outcome::Admin(answer) => (answer, true),
        Outcome::Query(answer) => (answer, false),
    };
    let format = TimeFormat {
        epoch,
        zone: answer.zone,
    };
    let series: Vec<Value> = answer
        .series
        .iter()
        .map(|s| {
            let mut json = series_json(s, &s.values, format, false);
            if admin && s.values.is_empty() {
                json["values"] = json!([]);
            }
            json
        })
        .collect();
    match series.is_empty() {
        true => json!({ "statement_id": id }),
        false => json!({ "statement_id": id, "series": series }),
    }
}

/// A statement's result in chunks of at most `rows` rows of one series,
/// each but the last marked `partial`.
fn chunks(id: usize, outcome: &Outcome, epoch: Option<i64>, rows: usize) -> Vec<Value> {
    let Outcome::Query(answer) = outcome else {
        return vec![outcome_json(id, outcome, epoch)];
    };
    let format = TimeFormat {
        epoch,
        zone: answer.zone,
    };
    let mut pieces = Vec::new();
    for series in &answer.series {
        let parts: Vec<&[Vec<influxql::Value>]> = match series.values.is_empty() {
            true => vec![&[]],
            false => series.values.chunks(rows).collect(),
        };
        let last = parts.len() - 1;
        for (i, part) in parts.into_iter().enumerate() {
            pieces.push(series_json(series, part, format, i < last));
        }
    }
    if pieces.is_empty() {
        return vec![json!({ "statement_id": id })];
    }
    let last = pieces.len() - 1;
    pieces
        .into_iter()
        .enumerate()
        .map(|(i, piece)| {
            let mut chunk = json!({ "statement_id": id, "series": [piece] });
            if i < last {
                chunk["partial"] = json!(true);
            }
            chunk
        })
        .collect()
}

/// A series as InfluxDB writes it, with `rows` of its values; `partial`
/// when more of its rows follow in the next chunk.
fn series_json(
    series: &Series,
    rows: &[Vec<influxql::Value>],
    format: TimeFormat,
    partial: bool,
) -> Value {
    let mut object = Map::new();
    if let Some(name) = &series.name {
        object.insert("name".into(), json!(name));
    }
    if let Some(tags) = &series.tags {
        let tags: Map<String, Value> = tags.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        object.insert("tags".into(), Value::Object(tags));
    }
    object.insert("columns".into(), json!(series.columns));
    if !rows.is_empty() {
        let values: Vec<Value> = rows
            .iter()
            .map(|row| Value::Array(row.iter().map(|v| cell(v, format)).collect()))
            .collect();
        object.insert("values".into(), Value::Array(values));
    }
    if partial {
        object.insert("partial".into(), json!(true));
    }
    Value::Object(object)
}

/// One value in JSON; a float JSON cannot write (NaN, infinite) is null.
fn cell(value: &influxql::Value, format: TimeFormat) -> Value {
    use influxql::Value as V;
    match value {
        V::Null => Value::Null,
        V::Time(ns) => cell(&format.time(*ns), format),
        V::Float(v) if v.is_finite() => json!(v),
        V::Float(_) => Value::Null,
        V::Integer(v) => json!(v),
        V::Unsigned(v) => json!(v),
        V::String(v) => json!(v),
        V::Boolean(v) => json!(v),
    }
}

/// `application/x-www-form-urlencoded` pairs (empty for other bodies).
fn url_decoded_pairs(body: &[u8]) -> Vec<(String, String)> {
    serde_urlencoded::from_bytes(body).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn epochs() {
        let format = TimeFormat {
            epoch: influxql::epoch_unit("ms"),
            zone: None,
        };
        assert_eq!(cell(&influxql::Value::Time(1_999_999), format), json!(1));
        assert_eq!(cell(&influxql::Value::Float(f64::NAN), format), Value::Null);
    }

    #[test]
    fn params_bind_as_influxql_literals() {
        assert_eq!(param(json!("it's")), Param::String("it's".into()));
        assert_eq!(param(json!(5)), Param::Literal("5".into()));
        assert_eq!(param(json!(true)), Param::Literal("true".into()));
        assert_eq!(param(json!(null)), Param::Unsupported("null".into()));
    }

    #[test]
    fn form_bodies_decode() {
        assert_eq!(
            url_decoded_pairs(b"q=CREATE+DATABASE+%22x%22&db=a"),
            vec![
                ("q".into(), "CREATE DATABASE \"x\"".into()),
                ("db".into(), "a".into())
            ]
        );
        // Malformed escapes beside multi-byte text must not panic.
        url_decoded_pairs("q=%aé&x=%".as_bytes());
        assert!(url_decoded_pairs(b"\xff\xfe=1").len() <= 1);
    }
}
