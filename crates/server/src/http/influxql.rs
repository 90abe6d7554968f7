//! `/query`: InfluxDB 1.x's query endpoint. Queries (`SELECT`, `SHOW
//! MEASUREMENTS | TAG KEYS | TAG VALUES | FIELD KEYS | SERIES`) are answered
//! by [`crate::influxql`]; this module parses and runs the rest, and writes
//! every answer in InfluxDB's JSON shape (whole, or chunked).
//!
//! Administrative statements: `CREATE DATABASE`, `SHOW DATABASES`, `SHOW RETENTION
//! POLICIES [ON db]`, `CREATE|ALTER RETENTION POLICY name ON db DURATION d
//! …` (the duration becomes the TTL of the policy's tables; replication,
//! shard duration and DEFAULT are accepted and ignored), and on the `db=`
//! database `DELETE FROM m [WHERE …]`, `DELETE WHERE …`, `DROP SERIES [FROM
//! m] [WHERE …]` and `DROP MEASUREMENT m` (conditions on tags and time, see
//! `condition`; every retention policy); and chingest's own `SET DUPLICATE
//! POLICY append|last [ON db [MEASUREMENT m]]` and `SHOW DUPLICATE POLICIES
//! [ON db]`. Names may be bare or double-quoted.

use std::collections::HashMap;
use std::time::Duration;

use axum::extract::{Query, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse as _, Response};
use axum::Json;
use serde_json::{json, Value};

use chingest::PointFilter;

use super::condition::{self, Dialect};
use super::AppState;
use crate::error::{ApiError, Flavor};

/// The database a statement names, else the request's `db=`.
fn database_param(
    named: Option<String>,
    params: &HashMap<String, String>,
) -> Result<String, ApiError> {
    named
        .or_else(|| params.get("db").filter(|db| !db.is_empty()).cloned())
        .ok_or_else(|| ApiError::bad_request("database name required (ON db, or db=)"))
}

/// Now, in ns since the epoch: what `now()` means in a condition.
fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
}

/// One recognised statement.
#[derive(Debug, PartialEq, Eq)]
enum Statement {
    CreateDatabase(String),
    ShowDatabases,
    ShowRetentionPolicies(Option<String>),
    CreateRetentionPolicy {
        name: String,
        database: String,
        duration: Option<Duration>,
    },
    /// `SET DUPLICATE POLICY last [ON db [MEASUREMENT m]]` (chingest's).
    SetDuplicatePolicy {
        policy: chingest::DuplicatePolicy,
        database: Option<String>,
        measurement: Option<String>,
    },
    /// `SHOW DUPLICATE POLICIES [ON db]` (chingest's).
    ShowDuplicatePolicies(Option<String>),
    /// `DELETE FROM m WHERE …`: points; `DROP SERIES`: points and series.
    Delete {
        drop_series: bool,
        measurement: Option<String>,
        condition: String,
    },
}

/// A retention policy's duration: `INF`, or units like `1h30m`, `7d`, `52w`.
fn parse_duration(text: &str) -> Result<Option<Duration>, String> {
    if text.eq_ignore_ascii_case("inf") {
        return Ok(None);
    }
    let nanos = condition::parse_duration(text)
        .map_err(|_| format!("invalid duration {text:?} (e.g. 1h30m, 7d, 52w, INF)"))?;
    // InfluxDB treats a zero duration as infinite.
    Ok((nanos != 0).then(|| Duration::from_nanos(nanos.unsigned_abs())))
}

/// A duration as InfluxDB shows it: `168h0m0s`, `0s` for infinite.
fn format_duration(duration: Option<Duration>) -> String {
    let Some(duration) = duration else {
        return "0s".to_owned();
    };
    let seconds = duration.as_secs();
    format!(
        "{}h{}m{}s",
        seconds / 3600,
        seconds % 3600 / 60,
        seconds % 60
    )
}

/// Splits an InfluxQL statement into words, keeping double-quoted names
/// (with `\"` escapes) whole and unquoted.
fn words(statement: &str) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut chars = statement.chars().peekable();
    while let Some(&c) = chars.peek() {
        if c.is_whitespace() {
            chars.next();
        } else if c == '"' {
            chars.next();
            let mut word = String::new();
            loop {
                match chars.next() {
                    Some('\\') => word.extend(chars.next()),
                    Some('"') => break,
                    Some(c) => word.push(c),
                    None => return Err("unterminated quoted name".into()),
                }
            }
            words.push(word);
        } else {
            let mut word = String::new();
            while let Some(&c) = chars.peek() {
                if c.is_whitespace() {
                    break;
                }
                word.push(c);
                chars.next();
            }
            words.push(word);
        }
    }
    Ok(words)
}

/// Splits a statement at its first `WHERE` outside quotes: the part before
/// it, and the condition after it.
fn split_where(statement: &str) -> (&str, Option<&str>) {
    let mut quote = None;
    let mut word_start = 0;
    for (i, c) in statement.char_indices() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '"' | '\'') => quote = Some(c),
            (None, c) if c.is_whitespace() => {
                if statement[word_start..i].eq_ignore_ascii_case("where") {
                    return (&statement[..word_start], Some(&statement[i..]));
                }
                word_start = i + 1;
            }
            _ => {}
        }
    }
    (statement, None)
}

fn parse(statement: &str) -> Result<Statement, String> {
    let (head, condition) = split_where(statement);
    if let Some(delete) = parse_delete(head, condition)? {
        return Ok(delete);
    }
    let words = words(statement)?;
    let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
    let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
    match upper.as_slice() {
        ["CREATE", "DATABASE", _, ..] => Ok(Statement::CreateDatabase(words[2].clone())),
        ["SHOW", "DATABASES"] => Ok(Statement::ShowDatabases),
        ["SET", "DUPLICATE", "POLICY", _, rest @ ..] => {
            let policy = words[3].parse()?;
            let (database, measurement) = match rest {
                [] => (None, None),
                ["ON", _] => (Some(words[5].clone()), None),
                ["ON", _, "MEASUREMENT", _] => (Some(words[5].clone()), Some(words[7].clone())),
                _ => {
                    return Err(
                        "expected SET DUPLICATE POLICY append|last [ON db [MEASUREMENT m]]".into(),
                    )
                }
            };
            Ok(Statement::SetDuplicatePolicy {
                policy,
                database,
                measurement,
            })
        }
        ["SHOW", "DUPLICATE", "POLICIES"] => Ok(Statement::ShowDuplicatePolicies(None)),
        ["SHOW", "DUPLICATE", "POLICIES", "ON", _] => {
            Ok(Statement::ShowDuplicatePolicies(Some(words[4].clone())))
        }
        ["SHOW", "RETENTION", "POLICIES"] => Ok(Statement::ShowRetentionPolicies(None)),
        ["SHOW", "RETENTION", "POLICIES", "ON", _] => {
            Ok(Statement::ShowRetentionPolicies(Some(words[4].clone())))
        }
        ["CREATE" | "ALTER", "RETENTION", "POLICY", _, "ON", _, rest @ ..] => {
            let duration = match rest.iter().position(|w| *w == "DURATION") {
                Some(i) => parse_duration(words.get(6 + i + 1).ok_or("DURATION needs a value")?)?,
                None if upper[0] == "CREATE" => {
                    return Err("CREATE RETENTION POLICY needs a DURATION".into())
                }
                None => None,
            };
            Ok(Statement::CreateRetentionPolicy {
                name: words[3].clone(),
                database: words[5].clone(),
                duration,
            })
        }
        _ => Err(format!(
            "statement not supported: {statement:?}. /query answers SELECT, SHOW MEASUREMENTS, \
             SHOW TAG KEYS, SHOW TAG VALUES, SHOW FIELD KEYS, SHOW SERIES, CREATE DATABASE, \
             SHOW DATABASES, SHOW RETENTION POLICIES, CREATE RETENTION POLICY, DELETE, DROP \
             SERIES, DROP MEASUREMENT, SET DUPLICATE POLICY and SHOW DUPLICATE POLICIES; SQL \
             goes to /sql"
        )),
    }
}

/// `DELETE`, `DROP SERIES` and `DROP MEASUREMENT`; `None` for other
/// statements.
fn parse_delete(head: &str, condition: Option<&str>) -> Result<Option<Statement>, String> {
    let words = words(head)?;
    let upper: Vec<String> = words.iter().map(|w| w.to_ascii_uppercase()).collect();
    let upper: Vec<&str> = upper.iter().map(String::as_str).collect();
    let (drop_series, measurement) = match upper.as_slice() {
        ["DELETE"] if condition.is_some() => (false, None),
        ["DELETE", "FROM", _] => (false, Some(words[2].clone())),
        ["DROP", "SERIES"] if condition.is_some() => (true, None),
        ["DROP", "SERIES", "FROM", _] => (true, Some(words[3].clone())),
        ["DROP", "MEASUREMENT", _] if condition.is_none() => (true, Some(words[2].clone())),
        ["DELETE" | "DROP", ..] if upper.get(1) != Some(&"DATABASE") => {
            return Err(format!(
                "expected DELETE FROM m [WHERE …], DELETE WHERE …, DROP SERIES [FROM m] [WHERE …] \
                 or DROP MEASUREMENT m, got {head:?}"
            ))
        }
        _ => return Ok(None),
    };
    if measurement.as_deref().is_some_and(|m| m.starts_with('/')) {
        return Err("a measurement given as /regex/ is not supported; name it".into());
    }
    Ok(Some(Statement::Delete {
        drop_series,
        measurement,
        condition: condition.unwrap_or_default().to_owned(),
    }))
}

/// A statement of a request, parsed before any runs.
enum Parsed {
    /// Startup, retention, duplicate-policy and delete statements.
    Admin(Statement),
    /// `SELECT` and `SHOW` of series, answered by [`crate::influxql`].
    Query(crate::influxql::Statement),
    /// InfluxQL chingest does not answer: the statement's error.
    Unsupported(String),
}

/// What one statement answered.
enum Outcome {
    /// An administrative statement's result object.
    Admin(Value),
    Query(crate::influxql::Answer),
    Error(String),
}

/// `GET|POST /query?q=...&db=...`: every statement is parsed first (a
/// parse error answers 400 and runs nothing), then each runs in order.
/// `epoch=` writes times as integers; `chunked=true` answers one JSON
/// object per line, a series (or `chunk_size` rows of one) at a time.
pub(super) async fn query(
    State(state): State<AppState>,
    Query(mut params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: axum::body::Body,
) -> Result<Response, ApiError> {
    let grant = state.authorize(&headers, params.get("p").map(String::as_str), Flavor::V1)?;
    let ingestor = state.ingestor()?;
    // Clients also send q as a form field in a POST body.
    let form = super::read_body(
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
    let now = now_ns();
    let parse_error =
        |message: String| ApiError::bad_request(format!("error parsing query: {message}"));
    // `params={"name": value}` binds `$name`.
    let bound;
    let q = match params.get("params").filter(|p| !p.trim().is_empty()) {
        Some(json) => {
            let values: serde_json::Map<String, Value> =
                serde_json::from_str(json).map_err(|err| {
                    ApiError::bad_request(format!("error parsing query parameters: {err}"))
                })?;
            bound = crate::influxql::bind(q, &values).map_err(parse_error)?;
            &bound
        }
        None => q,
    };
    let mut statements = Vec::new();
    for text in crate::influxql::split_statements(q).map_err(parse_error)? {
        statements.push(match crate::influxql::parse(text, now) {
            Some(Ok(query)) => Parsed::Query(query),
            Some(Err(crate::influxql::ParseError::Unsupported(message))) => {
                Parsed::Unsupported(message)
            }
            Some(Err(crate::influxql::ParseError::Invalid(message))) => {
                return Err(parse_error(message))
            }
            None => Parsed::Admin(parse(text).map_err(parse_error)?),
        });
    }
    let retention_policy = params
        .get("rp")
        .filter(|rp| !rp.is_empty())
        .unwrap_or(&state.config.write.default_retention_policy);
    let context = crate::influxql::Context {
        ingestor,
        grant: &grant,
        database: params.get("db").map(String::as_str),
        retention_policy,
        default_retention_policy: &state.config.write.default_retention_policy,
        now,
    };
    let mut outcomes = Vec::new();
    for statement in statements {
        outcomes.push(match statement {
            Parsed::Admin(statement) => {
                Outcome::Admin(admin(&state, &params, &grant, statement).await?)
            }
            Parsed::Query(query) => match crate::influxql::execute(&context, &query).await {
                Ok(answer) => Outcome::Query(answer),
                Err(crate::influxql::Failure::Statement(message)) => Outcome::Error(message),
                Err(crate::influxql::Failure::Request(err)) => return Err(err),
            },
            Parsed::Unsupported(message) => Outcome::Error(message),
        });
    }
    let epoch = params
        .get("epoch")
        .and_then(|e| crate::influxql::epoch_unit(e));
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
                .map(|(id, outcome)| outcome_json(id, outcome, epoch))
                .collect();
            Json(json!({ "results": results })).into_response()
        }
        Some(rows) => {
            let mut lines = String::new();
            for (id, outcome) in outcomes.iter().enumerate() {
                for chunk in chunks(id, outcome, epoch, rows) {
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

/// One statement's result object.
fn outcome_json(id: usize, outcome: &Outcome, epoch: Option<i64>) -> Value {
    match outcome {
        Outcome::Admin(result) => {
            let mut result = result.clone();
            result["statement_id"] = json!(id);
            result
        }
        Outcome::Error(message) => json!({ "statement_id": id, "error": message }),
        Outcome::Query(answer) => {
            let format = crate::influxql::TimeFormat {
                epoch,
                zone: answer.zone,
            };
            let series: Vec<Value> = answer
                .series
                .iter()
                .map(|s| s.to_json(&s.values, format, false))
                .collect();
            match series.is_empty() {
                true => json!({ "statement_id": id }),
                false => json!({ "statement_id": id, "series": series }),
            }
        }
    }
}

/// A statement's result in chunks of at most `rows` rows of one series,
/// each but the last marked `partial`.
fn chunks(id: usize, outcome: &Outcome, epoch: Option<i64>, rows: usize) -> Vec<Value> {
    let Outcome::Query(answer) = outcome else {
        return vec![outcome_json(id, outcome, epoch)];
    };
    let format = crate::influxql::TimeFormat {
        epoch,
        zone: answer.zone,
    };
    let mut pieces = Vec::new();
    for series in &answer.series {
        let parts: Vec<&[Vec<crate::influxql::Value>]> = match series.values.is_empty() {
            true => vec![&[]],
            false => series.values.chunks(rows).collect(),
        };
        let last = parts.len() - 1;
        for (i, part) in parts.into_iter().enumerate() {
            pieces.push(series.to_json(part, format, i < last));
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

/// Runs one administrative statement; its result object (without
/// `statement_id`).
async fn admin(
    state: &AppState,
    params: &HashMap<String, String>,
    grant: &crate::state::Grant,
    statement: Statement,
) -> Result<Value, ApiError> {
    let ingestor = state.ingestor()?;
    let mut result = json!({});
    match statement {
        Statement::CreateDatabase(name) => {
            grant.require_write(&name)?;
            ingestor.create_database(&name).await?
        }
        Statement::ShowDatabases => {
            grant.require_read()?;
            let values: Vec<Value> = ingestor
                .databases()
                .into_iter()
                .filter(|d| grant.covers(d))
                .map(|d| json!([d]))
                .collect();
            result["series"] =
                json!([{ "name": "databases", "columns": ["name"], "values": values }]);
        }
        Statement::ShowRetentionPolicies(db) => {
            let db = db
                .or_else(|| params.get("db").cloned())
                .ok_or_else(|| ApiError::bad_request("database name required (ON db, or db=)"))?;
            grant.require_read_of(&db)?;
            if !ingestor.databases().contains(&db) {
                result["error"] = json!(format!("database not found: {db}"));
            } else {
                let default_rp = &state.config.write.default_retention_policy;
                let mut policies = ingestor.retention_policies(&db);
                if !policies.iter().any(|(name, _)| name == default_rp) {
                    policies.insert(0, (default_rp.clone(), None));
                }
                let values: Vec<Value> = policies
                    .iter()
                    .map(|(rp, duration)| {
                        json!([
                            rp,
                            format_duration(*duration),
                            "168h0m0s",
                            1,
                            rp == default_rp
                        ])
                    })
                    .collect();
                result["series"] = json!([{
                    "columns": ["name", "duration", "shardGroupDuration", "replicaN", "default"],
                    "values": values,
                }]);
            }
        }
        Statement::CreateRetentionPolicy {
            name,
            database,
            duration,
        } => match grant
            .require_write(&database)
            .map(|()| ingestor)?
            .create_retention_policy(&database, &name, duration)
            .await
        {
            Ok(()) => {}
            Err(chingest::Error::DatabaseNotFound(db)) => {
                result["error"] = json!(format!("database not found: {db}"));
            }
            Err(other) => return Err(other.into()),
        },
        Statement::SetDuplicatePolicy {
            policy,
            database,
            measurement,
        } => {
            let db = database_param(database, params)?;
            grant.require_write(&db)?;
            match ingestor
                .set_duplicate_policy(&db, measurement.as_deref(), policy)
                .await
            {
                Ok(()) => {}
                Err(chingest::Error::DatabaseNotFound(db)) => {
                    result["error"] = json!(format!("database not found: {db}"));
                }
                Err(other) => return Err(other.into()),
            }
        }
        Statement::ShowDuplicatePolicies(database) => {
            let db = database_param(database, params)?;
            grant.require_read_of(&db)?;
            if !ingestor.databases().contains(&db) {
                result["error"] = json!(format!("database not found: {db}"));
                return Ok(result);
            }
            let policies = ingestor.duplicate_policies(&db);
            let default: chingest::DuplicatePolicy = state
                .config
                .write
                .duplicate_policy
                .parse()
                .unwrap_or_default();
            let own = policies.iter().find(|(m, _)| m.is_none()).map(|(_, p)| *p);
            let mut values = vec![json!(["", own.unwrap_or(default).as_str()])];
            values.extend(
                policies
                    .iter()
                    .filter_map(|(m, p)| Some(json!([m.as_deref()?, p.as_str()]))),
            );
            result["series"] = json!([{
                "name": "duplicate policies",
                "columns": ["measurement", "policy"],
                "values": values,
            }]);
        }
        Statement::Delete {
            drop_series,
            measurement,
            condition,
        } => {
            let db = params
                .get("db")
                .filter(|db| !db.is_empty())
                .ok_or_else(|| ApiError::bad_request("database name required (db=)"))?;
            grant.require_write(db)?;
            let mut filter = PointFilter {
                measurement,
                ..PointFilter::all()
            };
            condition::parse(&condition, Dialect::InfluxQl, now_ns())
                .map_err(ApiError::bad_request)?
                .apply(&mut filter)
                .map_err(ApiError::bad_request)?;
            let done = match drop_series {
                true => ingestor.drop_series(db, &filter).await,
                false => ingestor.delete(db, &filter).await,
            };
            match done {
                Ok(_) => {}
                Err(chingest::Error::DatabaseNotFound(db)) => {
                    result["error"] = json!(format!("database not found: {db}"));
                }
                Err(other) => return Err(other.into()),
            }
        }
    }
    Ok(result)
}

/// `application/x-www-form-urlencoded` pairs (empty for other bodies).
fn url_decoded_pairs(body: &[u8]) -> Vec<(String, String)> {
    serde_urlencoded::from_bytes(body).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_parse_with_bare_and_quoted_names() {
        let cases = [
            ("CREATE DATABASE telegraf", Ok(Statement::CreateDatabase("telegraf".into()))),
            ("create database \"my db\"", Ok(Statement::CreateDatabase("my db".into()))),
            ("SHOW DATABASES", Ok(Statement::ShowDatabases)),
            ("show retention policies on \"a\\\"b\"", Ok(Statement::ShowRetentionPolicies(Some("a\"b".into())))),
            (
                "CREATE RETENTION POLICY \"week\" ON \"telegraf\" DURATION 7d REPLICATION 1 DEFAULT",
                Ok(Statement::CreateRetentionPolicy {
                    name: "week".into(),
                    database: "telegraf".into(),
                    duration: Some(Duration::from_secs(7 * 86_400)),
                }),
            ),
        ];
        for (text, expected) in cases {
            assert_eq!(
                parse(text).map_err(|_| ()),
                expected.map_err(|_: ()| ()),
                "{text}"
            );
        }
        let delete = |drop_series, m: Option<&str>, condition: &str| Statement::Delete {
            drop_series,
            measurement: m.map(str::to_owned),
            condition: condition.to_owned(),
        };
        for (text, expected) in [
            ("DELETE FROM cpu", delete(false, Some("cpu"), "")),
            (
                "delete from \"my where\" where host = 'where'",
                delete(false, Some("my where"), " host = 'where'"),
            ),
            (
                "DELETE WHERE time < now()",
                delete(false, None, " time < now()"),
            ),
            ("DROP SERIES FROM cpu", delete(true, Some("cpu"), "")),
            ("DROP SERIES WHERE a='b'", delete(true, None, " a='b'")),
            (
                "DROP MEASUREMENT \"c p u\"",
                delete(true, Some("c p u"), ""),
            ),
        ] {
            assert_eq!(parse(text), Ok(expected), "{text}");
        }
        for bad in [
            "DELETE",
            "DROP SERIES",
            "DROP MEASUREMENT m WHERE a='b'",
            "DELETE FROM /c/",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
        let err = parse("GRANT ALL TO someone").unwrap_err();
        assert!(err.contains("/sql"), "{err}");
        assert!(parse("CREATE DATABASE \"open").is_err());
    }

    #[test]
    fn durations_parse_and_format_like_influxdb() {
        assert_eq!(parse_duration("1h30m"), Ok(Some(Duration::from_secs(5400))));
        assert_eq!(
            parse_duration("52w"),
            Ok(Some(Duration::from_secs(52 * 604_800)))
        );
        assert_eq!(parse_duration("INF"), Ok(None));
        assert_eq!(parse_duration("0s"), Ok(None));
        assert!(parse_duration("7x").is_err());
        assert!(parse_duration("d").is_err());
        assert_eq!(
            format_duration(Some(Duration::from_secs(7 * 86_400))),
            "168h0m0s"
        );
        assert_eq!(format_duration(None), "0s");
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
