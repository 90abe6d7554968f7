//! Prometheus remote write 1.0: `POST /api/v1/write` (and InfluxDB 1.x's
//! path, `/api/v1/prom/write`), a snappy-compressed protobuf
//! `WriteRequest`, into the database `?db=` names (default `prometheus`).
//!
//! Data model: every sample is a row of one measurement, `prometheus`, whose
//! tags are the series' labels (the metric name as `__name__`) and whose one
//! field is `value` (Float64, stale markers kept as the NaN they are); times
//! are the samples' milliseconds. One table, not one per metric family: a
//! scrape carries hundreds of families with a few samples each, and a table
//! per family would make every flush an insert per family (the fan-out of
//! docs/benchmarks.md §5). Metric metadata (type, help, unit) goes to the
//! measurement `prometheus_metadata`, one point per family (tag
//! `metric`, time 0, duplicate policy `last`: the newest wins).
//!
//! The decoded samples go straight into an Arrow batch (dictionary-encoded
//! label columns), the same write as `WriteArrow`, never through line
//! protocol. Statuses follow the specification: 204 when stored; 400 for a
//! request that is not a valid `WriteRequest` (with what is wrong; nothing
//! of it is stored); 415 for another encoding or remote write 2.0; 429 and
//! 503 only when a retry can succeed.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, StatusCode};
use chingest::arrow::array::{
    ArrayRef, Float64Builder, Int64Array, Int64Builder, RecordBatch, StringBuilder,
    StringDictionaryBuilder,
};
use chingest::arrow::datatypes::Int32Type;
use chingest::DuplicatePolicy;
use chingest_proto::prometheus::{MetricType, WriteRequest};
use prost::Message;

use super::{influx, read_body, AppState};
use crate::error::{ApiError, Flavor};

/// The measurement samples are stored in.
pub(crate) const MEASUREMENT: &str = "prometheus";
/// The measurement metric metadata is stored in.
pub(crate) const METADATA_MEASUREMENT: &str = "prometheus_metadata";
/// The database of requests that name none.
const DEFAULT_DATABASE: &str = "prometheus";

/// `POST /api/v1/write?db=&rp=`.
pub(super) async fn write(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
    headers: HeaderMap,
    body: Body,
) -> Result<StatusCode, ApiError> {
    let flavor = Flavor::V1;
    let grant = state.authorize(&headers, params.get("p").map(String::as_str), flavor)?;
    let db = params
        .get("db")
        .filter(|db| !db.is_empty())
        .map_or(DEFAULT_DATABASE, String::as_str);
    grant.require_write(db)?;
    check_content_type(&headers)?;
    if !headers
        .get(header::CONTENT_ENCODING)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("snappy"))
    {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "remote write bodies are snappy-compressed: Content-Encoding: snappy",
        ));
    }
    let limit = state.config.limits.max_body_bytes;
    let body = read_body(&state, &headers, body, limit, flavor).await?;
    // Decoded from the shared buffer: labels are slices of it.
    let request = WriteRequest::decode(body.clone())
        .map_err(|e| ApiError::bad_request(format!("not a remote write WriteRequest: {e}")))?;
    drop(body);
    let samples = samples_batch(&request).map_err(ApiError::bad_request)?;
    let metadata = metadata_batch(&request);
    let ingestor = state.ingestor()?;
    let rp = params
        .get("rp")
        .filter(|rp| !rp.is_empty())
        .unwrap_or(&state.config.write.default_retention_policy);
    let durability = influx::durability(&params, &headers, flavor)?;
    let options = state.write_options(chingest::Precision::Nanoseconds, durability);
    // Metadata first: it is idempotent (the newest point per family wins),
    // so a sender that retries after the samples failed adds nothing twice.
    if let Some(batch) = metadata {
        // One point per family: the newest metadata wins. The policy is
        // recorded once, before the measurement's first write.
        ingestor.create_database(db).await?;
        let has_policy = ingestor
            .duplicate_policies(db)
            .iter()
            .any(|(m, _)| m.as_deref() == Some(METADATA_MEASUREMENT));
        if !has_policy {
            match ingestor
                .set_duplicate_policy(db, Some(METADATA_MEASUREMENT), DuplicatePolicy::Last)
                .await
            {
                Ok(()) | Err(chingest::Error::Conflict(_)) => {}
                Err(other) => return Err(other.into()),
            }
        }
        ingestor
            .write_arrow(db, rp, METADATA_MEASUREMENT, &batch, &["metric"], &options)
            .await?;
    }
    if let Some((batch, tags)) = samples {
        let tags: Vec<&str> = tags.iter().map(String::as_str).collect();
        ingestor
            .write_arrow(db, rp, MEASUREMENT, &batch, &tags, &options)
            .await?;
    }
    Ok(StatusCode::NO_CONTENT)
}

/// Remote write 1.0 is `application/x-protobuf` (no `proto=` parameter, or
/// 1.0's own); 2.0 names `io.prometheus.write.v2.Request`.
fn check_content_type(headers: &HeaderMap) -> Result<(), ApiError> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/x-protobuf")
        .to_ascii_lowercase();
    let mut parts = content_type.split(';').map(str::trim);
    let media = parts.next().unwrap_or_default();
    let proto = parts.find_map(|p| p.strip_prefix("proto="));
    match (media, proto) {
        ("application/x-protobuf", None | Some("prometheus.writerequest")) => Ok(()),
        (_, Some(proto)) if proto.contains("v2") => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("remote write 2.0 ({proto}) is not supported yet: send 1.0 (prometheus.WriteRequest)"),
        )),
        _ => Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            format!("unsupported Content-Type {content_type:?}: remote write sends application/x-protobuf"),
        )),
    }
}

/// Every sample as a row: `time` (ns), one dictionary-encoded column per
/// label name, `value`. `None` without samples.
fn samples_batch<'a>(
    request: &'a WriteRequest,
) -> Result<Option<(RecordBatch, Vec<String>)>, String> {
    let rows: usize = request.timeseries.iter().map(|s| s.samples.len()).sum();
    if rows == 0 {
        return Ok(None);
    }
    let text = |bytes: &'a [u8], what: &str| {
        std::str::from_utf8(bytes).map_err(|_| format!("a label {what} is not UTF-8"))
    };
    let mut names = BTreeSet::new();
    for series in &request.timeseries {
        for label in &series.labels {
            names.insert(text(&label.name, "name")?);
        }
    }
    if let Some(bad) = names.iter().find(|n| matches!(**n, "" | "time" | "value")) {
        return Err(format!(
            "label name {bad:?} is not supported (empty, or a name of the stored columns)"
        ));
    }
    let column: HashMap<&str, usize> = names.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let mut times = Int64Builder::with_capacity(rows);
    let mut values = Float64Builder::with_capacity(rows);
    let mut labels: Vec<StringDictionaryBuilder<Int32Type>> = names
        .iter()
        .map(|_| StringDictionaryBuilder::new())
        .collect();
    let mut series_values: Vec<Option<&str>> = vec![None; names.len()];
    for (i, series) in request.timeseries.iter().enumerate() {
        if !series.labels.iter().any(|l| l.name == "__name__") && !series.samples.is_empty() {
            return Err(format!("series {i} has no __name__ label"));
        }
        series_values.iter_mut().for_each(|v| *v = None);
        for label in &series.labels {
            series_values[column[text(&label.name, "name")?]] = Some(text(&label.value, "value")?);
        }
        for sample in &series.samples {
            let ns = sample.timestamp.checked_mul(1_000_000).ok_or_else(|| {
                format!(
                    "series {i}: timestamp {} ms is out of range",
                    sample.timestamp
                )
            })?;
            times.append_value(ns);
            values.append_value(sample.value);
            for (builder, value) in labels.iter_mut().zip(&series_values) {
                builder.append_option(*value);
            }
        }
    }
    let mut columns: Vec<(String, ArrayRef)> = vec![("time".into(), Arc::new(times.finish()))];
    for (name, mut builder) in names.iter().zip(labels) {
        columns.push(((*name).to_owned(), Arc::new(builder.finish())));
    }
    columns.push(("value".into(), Arc::new(values.finish())));
    let batch = RecordBatch::try_from_iter(columns).map_err(|e| e.to_string())?;
    Ok(Some((
        batch,
        names.iter().map(|n| (*n).to_owned()).collect(),
    )))
}

/// The request's metric metadata as points of [`METADATA_MEASUREMENT`]:
/// tag `metric`, fields `type`, `help`, `unit`, time 0.
fn metadata_batch(request: &WriteRequest) -> Option<RecordBatch> {
    if request.metadata.is_empty() {
        return None;
    }
    let n = request.metadata.len();
    let mut metric = StringDictionaryBuilder::<Int32Type>::new();
    let (mut kind, mut help, mut unit) = (
        StringBuilder::new(),
        StringBuilder::new(),
        StringBuilder::new(),
    );
    for entry in &request.metadata {
        metric.append_value(&entry.metric_family_name);
        let name = MetricType::try_from(entry.r#type).map_or("unknown", MetricType::name);
        kind.append_value(name);
        help.append_value(&entry.help);
        unit.append_value(&entry.unit);
    }
    let columns: Vec<(&str, ArrayRef)> = vec![
        ("time", Arc::new(Int64Array::from(vec![0; n]))),
        ("metric", Arc::new(metric.finish())),
        ("type", Arc::new(kind.finish())),
        ("help", Arc::new(help.finish())),
        ("unit", Arc::new(unit.finish())),
    ];
    RecordBatch::try_from_iter(columns).ok()
}
