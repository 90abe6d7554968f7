//! Prometheus's HTTP API (`/api/v1/query`, `query_range`, `series`,
//! `labels`, `label/<name>/values`, `format_query`, `status/buildinfo`):
//! the request's parameters (query string and form body alike, `match[]`
//! repeated) handed to [`chingest_promql`], the answer written in
//! Prometheus's JSON shapes. The database is `?db=`, a `/db/<name>` path
//! prefix, or `[promql] default_database`.

use axum::extract::{FromRequest, Path, Request};
use axum::http::header::CONTENT_TYPE;
use axum::http::{HeaderMap, Uri};
use axum::response::{IntoResponse as _, Response};
use axum::Json;
use chingest::clock::now_ms;
use chingest_promql::{self as promql, Labels, Options, Source, Value};
use serde_json::{json, Map};

use crate::error::{ApiError, Flavor};
use crate::span;
use crate::state::{AppState, Grant};

/// The version reported to clients, which pick features by it (Grafana):
/// the Prometheus whose language and answers PromQL here follows.
pub(super) const PROMETHEUS_VERSION: &str = "2.42.0";

/// A request's parameters, from the query string and a form body.
pub(super) struct Params(Vec<(String, String)>);

impl Params {
    async fn read(
        state: &AppState,
        headers: &HeaderMap,
        query: Option<String>,
        body: axum::body::Body,
    ) -> Result<Params, ApiError> {
        let mut pairs: Vec<(String, String)> = query
            .map(|q| serde_urlencoded::from_str(&q).unwrap_or_default())
            .unwrap_or_default();
        let form = super::extract::read_body(
            state,
            headers,
            body,
            state.config.limits.max_body_bytes,
            Flavor::Prometheus,
        )
        .await?;
        if !form.is_empty() {
            let decoded: Vec<(String, String)> = serde_urlencoded::from_bytes(&form)
                .map_err(|err| bad_data(format!("invalid form body: {err}")))?;
            pairs.extend(decoded);
        }
        Ok(Params(pairs))
    }

    pub(super) fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
            .filter(|v| !v.is_empty())
    }

    pub(super) fn all(&self, name: &str) -> Vec<String> {
        self.0
            .iter()
            .filter(|(k, _)| k == name)
            .map(|(_, v)| v.clone())
            .collect()
    }

    fn time(&self, name: &str) -> Result<Option<i64>, ApiError> {
        self.get(name)
            .map(|t| promql::parse_time(name, t))
            .transpose()
            .map_err(Into::into)
    }

    /// `start`/`end` of a lookup: `None` when neither is given (all time).
    fn range(&self) -> Result<Option<(i64, i64)>, ApiError> {
        let (start, end) = (self.time("start")?, self.time("end")?);
        Ok(match (start, end) {
            (None, None) => None,
            (s, e) => Some((s.unwrap_or(i64::MIN / 4), e.unwrap_or(i64::MAX / 4))),
        })
    }

    /// `limit`: at most this many results (0 or none: all).
    fn limit(&self) -> Result<usize, ApiError> {
        match self.get("limit") {
            None => Ok(usize::MAX),
            Some(text) => match text.parse::<usize>() {
                Ok(0) => Ok(usize::MAX),
                Ok(n) => Ok(n),
                Err(_) => Err(bad_data(format!(
                    "invalid parameter \"limit\": cannot parse {text:?} to a valid limit"
                ))),
            },
        }
    }
}

pub(super) fn bad_data(message: impl Into<String>) -> ApiError {
    ApiError::bad_request(message).flavor(Flavor::Prometheus)
}

pub(super) fn success(data: serde_json::Value) -> Response {
    Json(json!({ "status": "success", "data": data })).into_response()
}

/// A listing's answer: cut at the request's `limit`, with Prometheus 3's
/// warning when it was.
fn listed(data: serde_json::Value, truncated: bool) -> Response {
    if !truncated {
        return success(data);
    }
    let warnings = ["results truncated due to limit"];
    Json(json!({ "status": "success", "data": data, "warnings": warnings })).into_response()
}

/// A Prometheus API request as every handler takes it: the caller
/// checked, the parameters read (query string and form body), the path
/// (which may name the database).
pub(super) struct PromRequest {
    pub(super) state: AppState,
    pub(super) grant: Grant,
    uri: Uri,
    pub(super) params: Params,
}

impl FromRequest<AppState> for PromRequest {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &AppState) -> Result<Self, ApiError> {
        let (parts, body) = request.into_parts();
        let grant = state.authorize(&parts.headers, None, Flavor::Prometheus)?;
        let query = parts.uri.query().map(str::to_owned);
        let params = Params::read(state, &parts.headers, query, body).await?;
        Ok(PromRequest {
            state: state.clone(),
            grant,
            uri: parts.uri,
            params,
        })
    }
}

impl PromRequest {
    /// The database read, under the `[promql]` limits.
    fn source(&self) -> Result<Source<'_>, ApiError> {
        source(
            &self.state,
            self.grant.access(),
            &self.uri,
            self.params.get("db"),
        )
    }

    /// How its query is evaluated: `[promql]`'s lookback and timeout, the
    /// request's `timeout` if shorter.
    fn options(&self) -> Result<Options, ApiError> {
        let mut options = self.state.config.promql.options;
        if let Some(timeout) = self.params.get("timeout") {
            options.timeout = options
                .timeout
                .min(promql::parse_duration("timeout", timeout)?);
        }
        Ok(options)
    }
}

/// The database a Prometheus API request reads (`?db=`, the `/db/<name>`
/// prefix, or the default) under the `[promql]` limits, if the caller may.
pub(super) fn source<'s>(
    state: &'s AppState,
    access: &chingest::Access,
    uri: &Uri,
    db_param: Option<&str>,
) -> Result<Source<'s>, ApiError> {
    let ingestor = state.ingestor().map_err(|e| e.flavor(Flavor::Prometheus))?;
    let config = &state.config.promql;
    let from_path = uri
        .path()
        .strip_prefix("/db/")
        .and_then(|rest| rest.split('/').next());
    let database = db_param.or(from_path).unwrap_or(&config.default_database);
    span::database(database);
    let retention_policy = &state.config.write.default_retention_policy;
    let source = Source::new(ingestor, access, database, retention_policy, config.limits)?;
    Ok(match config.result_cache_max_bytes {
        0 => source,
        _ => source.with_cache(&state.promql_cache),
    })
}

fn required<'p>(params: &'p Params, name: &str) -> Result<&'p str, ApiError> {
    params.get(name).ok_or_else(|| {
        bad_data(format!(
            "invalid parameter {name:?}: cannot parse \"\" to a valid {}",
            if name == "step" {
                "duration"
            } else {
                "timestamp"
            }
        ))
    })
}

/// `GET|POST /api/v1/query`: the query at `time` (default now).
pub(super) async fn query(request: PromRequest) -> Result<Response, ApiError> {
    let (params, source, options) = (&request.params, request.source()?, request.options()?);
    let query = params.get("query").unwrap_or_default();
    let time = params.time("time")?.unwrap_or_else(now_ms);
    let value = promql::instant_query(&source, query, time, options).await?;
    Ok(answer(&value))
}

/// `GET|POST /api/v1/query_range`: the query at every `step` from `start`
/// to `end`.
pub(super) async fn query_range(request: PromRequest) -> Result<Response, ApiError> {
    let (params, source, options) = (&request.params, request.source()?, request.options()?);
    let query = params.get("query").unwrap_or_default();
    let start = promql::parse_time("start", required(params, "start")?)?;
    let end = promql::parse_time("end", required(params, "end")?)?;
    let step = promql::parse_duration("step", required(params, "step")?)?;
    let value = promql::range_query(&source, query, start, end, step, options).await?;
    Ok(answer(&value))
}

/// `GET|POST /api/v1/series?match[]=…`.
pub(super) async fn series(request: PromRequest) -> Result<Response, ApiError> {
    let (params, source) = (&request.params, request.source()?);
    let selectors = params.all("match[]");
    if selectors.is_empty() {
        return Err(bad_data("no match[] parameter provided"));
    }
    let listing = promql::series(&source, &selectors, params.range()?, params.limit()?).await?;
    let data: Vec<serde_json::Value> = listing.items.iter().map(labels_json).collect();
    Ok(listed(json!(data), listing.truncated))
}

/// `GET|POST /api/v1/labels`.
pub(super) async fn labels(request: PromRequest) -> Result<Response, ApiError> {
    let (params, source) = (&request.params, request.source()?);
    let (selectors, range, limit) = (params.all("match[]"), params.range()?, params.limit()?);
    let listing = promql::label_names(&source, &selectors, range, limit).await?;
    Ok(listed(json!(listing.items), listing.truncated))
}

/// `GET /api/v1/label/<name>/values`.
pub(super) async fn label_values(
    Path(path): Path<Vec<(String, String)>>,
    request: Result<PromRequest, ApiError>,
) -> Result<Response, ApiError> {
    let name = path
        .iter()
        .find(|(k, _)| k == "name")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    if !promql::naming::is_label_name(&name) {
        return Err(bad_data(format!("invalid label name: {name:?}")));
    }
    // The name is judged first, whatever the credentials (as it was).
    let request = request?;
    let (params, source) = (&request.params, request.source()?);
    let (selectors, range, limit) = (params.all("match[]"), params.range()?, params.limit()?);
    let listing = promql::label_values(&source, &name, &selectors, range, limit).await?;
    Ok(listed(json!(listing.items), listing.truncated))
}

/// `GET|POST /api/v1/format_query?query=…`.
pub(super) async fn format_query(request: PromRequest) -> Result<Response, ApiError> {
    // Refused as every other endpoint refuses the caller (a token that may
    // not read the database, an engine not yet open).
    request.source()?;
    let params = &request.params;
    let formatted = promql::format_query(params.get("query").unwrap_or_default())?;
    Ok(success(json!(formatted)))
}

/// `GET /api/v1/metadata[?metric=&limit=]`: each family's type, help and
/// unit, from what remote write sent.
pub(super) async fn metadata(request: PromRequest) -> Result<Response, ApiError> {
    let (params, source) = (&request.params, request.source()?);
    let families = promql::metadata(&source, params.get("metric"), params.limit()?).await?;
    let data: Map<String, serde_json::Value> = families
        .into_iter()
        .map(|m| {
            (
                m.metric,
                json!([{ "type": m.kind, "help": m.help, "unit": m.unit }]),
            )
        })
        .collect();
    Ok(success(serde_json::Value::Object(data)))
}

/// `GET|POST /api/v1/query_exemplars?query=&start=&end=`.
pub(super) async fn query_exemplars(request: PromRequest) -> Result<Response, ApiError> {
    let (params, source) = (&request.params, request.source()?);
    let query = params.get("query").unwrap_or_default();
    let now = now_ms();
    let start = params.time("start")?.unwrap_or(i64::MIN / 4);
    let end = params.time("end")?.unwrap_or(now);
    let found = promql::exemplars(&source, query, start, end).await?;
    let data: Vec<serde_json::Value> = found
        .iter()
        .map(|(labels, exemplars)| {
            json!({
                "seriesLabels": labels_json(labels),
                "exemplars": exemplars.iter().map(|e| json!({
                    "labels": labels_json(&e.labels),
                    "value": promql::format_value(e.value),
                    "timestamp": time_json(e.time),
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    Ok(success(json!(data)))
}

/// `GET /api/v1/status/tsdb[?limit=]`: series and label cardinality, the
/// top 10 (or `limit`) of each list.
pub(super) async fn tsdb_status(request: PromRequest) -> Result<Response, ApiError> {
    let (params, source) = (&request.params, request.source()?);
    let limit = match params.limit()? {
        usize::MAX => 10,
        n => n,
    };
    let status = promql::tsdb_status(&source, limit).await?;
    let list = |counts: &[(String, usize)]| -> serde_json::Value {
        json!(counts
            .iter()
            .map(|(name, value)| json!({ "name": name, "value": value }))
            .collect::<Vec<_>>())
    };
    let (min_time, max_time) = status.time_bounds.unwrap_or((0, 0));
    Ok(success(json!({
        "headStats": {
            "numSeries": status.series,
            "numLabelPairs": status.label_pairs,
            "chunkCount": 0,
            "minTime": min_time,
            "maxTime": max_time,
        },
        "seriesCountByMetricName": list(&status.series_by_metric),
        "labelValueCountByLabelName": list(&status.values_by_label),
        "memoryInBytesByLabelName": list(&status.bytes_by_label),
        "seriesCountByLabelValuePair": list(&status.series_by_pair),
    })))
}

/// `GET /api/v1/status/buildinfo`: what Grafana asks first.
pub(super) async fn buildinfo() -> Response {
    success(json!({
        "version": PROMETHEUS_VERSION,
        "revision": env!("CARGO_PKG_VERSION"),
        "branch": "chingest",
        "buildUser": "chingest",
        "buildDate": "",
        "goVersion": "",
    }))
}

fn labels_json(labels: &Labels) -> serde_json::Value {
    let map: Map<String, serde_json::Value> = labels
        .pairs()
        .iter()
        .map(|(k, v)| (k.clone(), json!(v)))
        .collect();
    serde_json::Value::Object(map)
}

/// A time as a JSON number of seconds (ms digits).
fn time_json(time: i64) -> serde_json::Value {
    serde_json::from_str(&promql::format_time(time)).unwrap_or(json!(0))
}

/// A query's answer, written straight into the response body (a range
/// query's answer has a point per series and step: no JSON tree is built
/// for it), keys in the order `serde_json`'s maps write them.
fn answer(value: &Value) -> Response {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"{\"data\":{\"result\":");
    match value {
        Value::Scalar(t, v) => write_sample(&mut out, *t, *v),
        Value::String(t, s) => write_point(&mut out, *t, s),
        Value::Vector(t, samples) => {
            out.push(b'[');
            for (i, sample) in samples.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_labels(&mut out, &sample.labels);
                out.extend_from_slice(b",\"value\":");
                write_sample(&mut out, *t, sample.value);
                out.push(b'}');
            }
            out.push(b']');
        }
        Value::Matrix(series) => {
            out.push(b'[');
            for (i, s) in series.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                write_labels(&mut out, &s.labels);
                out.extend_from_slice(b",\"values\":[");
                for (j, (t, v)) in s.points.iter().enumerate() {
                    if j > 0 {
                        out.push(b',');
                    }
                    write_sample(&mut out, *t, *v);
                }
                out.extend_from_slice(b"]}");
            }
            out.push(b']');
        }
    }
    out.extend_from_slice(b",\"resultType\":\"");
    out.extend_from_slice(value.result_type().as_bytes());
    out.extend_from_slice(b"\"},\"status\":\"success\"}");
    ([(CONTENT_TYPE, "application/json")], out).into_response()
}

/// `{"metric":{…}` of a series (the caller closes the object).
fn write_labels(out: &mut Vec<u8>, labels: &Labels) {
    out.extend_from_slice(b"{\"metric\":{");
    for (i, (name, value)) in labels.pairs().iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_string(out, name);
        out.push(b':');
        write_string(out, value);
    }
    out.push(b'}');
}

/// `[time, "value"]`: the time a JSON number of seconds (ms digits).
fn write_point(out: &mut Vec<u8>, time: i64, value: &str) {
    out.push(b'[');
    promql::write_time(out, time);
    out.push(b',');
    write_string(out, value);
    out.push(b']');
}

/// [`write_point`] of a number, its text written in place (a number's
/// text needs no escaping).
fn write_sample(out: &mut Vec<u8>, time: i64, value: f64) {
    out.push(b'[');
    promql::write_time(out, time);
    out.extend_from_slice(b",\"");
    promql::write_value(out, value);
    out.extend_from_slice(b"\"]");
}

/// A JSON string, escaped as `serde_json` escapes it.
fn write_string(out: &mut Vec<u8>, text: &str) {
    serde_json::to_writer(out, text).expect("writing to a Vec does not fail");
}
