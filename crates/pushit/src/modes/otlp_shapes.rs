//! `pushit otlp --shapes`: the same OTLP gauge points inserted straight
//! into the engine in two shapes, to choose how OTLP is stored: the
//! OpenTelemetry Collector's ClickHouse exporter's `otel_metrics_gauge`
//! (a wide row per point: resource and point attributes as Maps, names as
//! strings) and chingest's series_id layout (a narrow fact row per point,
//! the tags once per series in the series table). One connection, the same
//! batches of `BATCH_POINTS` points; rows/s and bytes per point after
//! merging.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::Instant;

use chingest::arrow::array::{
    ArrayRef, Float64Array, Int64Array, MapBuilder, RecordBatch, StringArray, StringBuilder,
    TimestampNanosecondArray, UInt32Array, UInt64Array,
};
use chingest::layout::names::TableNames;
use chingest::layout::schema::{FieldType, TableSchema};
use chingest::layout::series::SeriesKey;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use opentelemetry_proto::tonic::common::v1::{any_value, KeyValue};
use opentelemetry_proto::tonic::metrics::v1::{metric::Data, number_data_point};
use pushit::report::{column, Format};
use serde_json::json;

use super::per_second;
use crate::Context;

const DATABASE: &str = "pushit_otlp_shapes";
/// Points per insert: about what the write-ahead log's flushes insert.
const BATCH_POINTS: usize = 100_000;

/// One gauge point, flattened out of its request.
struct FlatPoint<'a> {
    resource: &'a [KeyValue],
    scope: &'a str,
    metric: &'a str,
    attributes: &'a [KeyValue],
    start: u64,
    time: u64,
    value: f64,
    flags: u32,
}

fn text(value: &KeyValue) -> &str {
    match value.value.as_ref().and_then(|v| v.value.as_ref()) {
        Some(any_value::Value::StringValue(s)) => s,
        _ => "",
    }
}

fn flatten(requests: &[ExportMetricsServiceRequest]) -> Vec<FlatPoint<'_>> {
    let mut points = Vec::new();
    for rm in requests.iter().flat_map(|r| &r.resource_metrics) {
        let resource = rm.resource.as_ref().map_or(&[][..], |r| &r.attributes[..]);
        for sm in &rm.scope_metrics {
            let scope = sm.scope.as_ref().map_or("", |s| s.name.as_str());
            for metric in &sm.metrics {
                let Some(Data::Gauge(gauge)) = &metric.data else {
                    continue;
                };
                for p in &gauge.data_points {
                    let value = match p.value {
                        Some(number_data_point::Value::AsDouble(v)) => v,
                        Some(number_data_point::Value::AsInt(v)) => v as f64,
                        None => continue,
                    };
                    points.push(FlatPoint {
                        resource,
                        scope,
                        metric: &metric.name,
                        attributes: &p.attributes,
                        start: p.start_time_unix_nano,
                        time: p.time_unix_nano,
                        value,
                        flags: p.flags,
                    });
                }
            }
        }
    }
    points
}

/// The exporter's gauge table (its columns that a gauge point fills;
/// exemplars left out), with its sort key and codecs.
const EXPORTER_TABLE: &str = "CREATE TABLE pushit_otlp_shapes.exporter_gauge (
    ResourceAttributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    ScopeName String CODEC(ZSTD(1)),
    ServiceName LowCardinality(String) CODEC(ZSTD(1)),
    MetricName String CODEC(ZSTD(1)),
    Attributes Map(LowCardinality(String), String) CODEC(ZSTD(1)),
    StartTimeUnix DateTime64(9, 'UTC') CODEC(Delta, ZSTD(1)),
    TimeUnix DateTime64(9, 'UTC') CODEC(Delta, ZSTD(1)),
    Value Float64 CODEC(ZSTD(1)),
    Flags UInt32 CODEC(ZSTD(1))
) ENGINE = MergeTree PARTITION BY toDate(TimeUnix)
ORDER BY (ServiceName, MetricName, Attributes, toUnixTimestamp64Nano(TimeUnix))
SETTINGS allow_suspicious_types_in_order_by = 1";

fn map_column<'a>(
    rows: &[FlatPoint<'a>],
    attributes: impl Fn(&FlatPoint<'a>) -> &'a [KeyValue],
) -> ArrayRef {
    let mut map = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    for row in rows {
        for kv in attributes(row) {
            map.keys().append_value(&kv.key);
            map.values().append_value(text(kv));
        }
        map.append(true).expect("keys and values in step");
    }
    Arc::new(map.finish())
}

fn exporter_batch(rows: &[FlatPoint<'_>]) -> RecordBatch {
    let service = |p: &FlatPoint<'_>| {
        p.resource
            .iter()
            .find(|kv| kv.key == "service.name")
            .map_or("", text)
            .to_owned()
    };
    let times = |f: &dyn Fn(&FlatPoint<'_>) -> u64| {
        Arc::new(
            TimestampNanosecondArray::from(rows.iter().map(|p| f(p) as i64).collect::<Vec<_>>())
                .with_timezone("UTC"),
        ) as ArrayRef
    };
    RecordBatch::try_from_iter(vec![
        ("ResourceAttributes", map_column(rows, |p| p.resource)),
        (
            "ScopeName",
            Arc::new(StringArray::from_iter_values(rows.iter().map(|p| p.scope))) as ArrayRef,
        ),
        (
            "ServiceName",
            Arc::new(StringArray::from_iter_values(rows.iter().map(service))),
        ),
        (
            "MetricName",
            Arc::new(StringArray::from_iter_values(rows.iter().map(|p| p.metric))),
        ),
        ("Attributes", map_column(rows, |p| p.attributes)),
        ("StartTimeUnix", times(&|p| p.start)),
        ("TimeUnix", times(&|p| p.time)),
        (
            "Value",
            Arc::new(Float64Array::from_iter_values(rows.iter().map(|p| p.value))),
        ),
        (
            "Flags",
            Arc::new(UInt32Array::from_iter_values(rows.iter().map(|p| p.flags))),
        ),
    ])
    .expect("columns of one length")
}

/// A point's series as chingest keys it (otlp.rs's tags, less what the
/// load does not have).
fn series_key(p: &FlatPoint<'_>) -> SeriesKey {
    let mut tags: Vec<(Cow<'_, str>, Cow<'_, str>)> = p
        .resource
        .iter()
        .map(|kv| {
            (
                Cow::Owned(format!("resource.{}", kv.key)),
                Cow::Borrowed(text(kv)),
            )
        })
        .collect();
    tags.push((Cow::Borrowed("scope.name"), Cow::Borrowed(p.scope)));
    tags.push((Cow::Borrowed("metric_name"), Cow::Borrowed(p.metric)));
    tags.extend(
        p.attributes
            .iter()
            .map(|kv| (Cow::Borrowed(kv.key.as_str()), Cow::Borrowed(text(kv)))),
    );
    SeriesKey::new("otel_metrics_gauge", tags).expect("distinct tag keys")
}

/// Rows per second and bytes per point of each shape.
pub(super) fn run(ctx: &Context, requests: &[ExportMetricsServiceRequest]) -> anyhow::Result<()> {
    let points = flatten(requests);
    ctx.progress(format!(
        "otlp --shapes: {} points, two shapes",
        points.len()
    ));
    let conn = ctx.connect()?;
    let schema = TableSchema::new(
        TableNames::new(DATABASE, "autogen", "otel_metrics_gauge"),
        vec![
            ("value".into(), FieldType::Float),
            ("start_time_unix_nano".into(), FieldType::Integer),
            ("flags".into(), FieldType::UInteger),
        ],
    );
    let names = &schema.names;
    conn.execute(&[&format!("DROP DATABASE IF EXISTS {DATABASE}")])?;
    for statement in chingest::layout::schema::create_database_sql(names, None) {
        conn.execute(&[&statement])?;
    }
    conn.execute(&[
        &chingest::layout::schema::create_table_sql(
            &schema,
            0,
            false,
            chingest::DuplicatePolicy::Append,
            None,
        ),
        EXPORTER_TABLE,
    ])?;

    // Batches are built before the clock starts, as in every raw arm.
    let exporter: Vec<RecordBatch> = points.chunks(BATCH_POINTS).map(exporter_batch).collect();
    let mut known = std::collections::HashSet::new();
    let mut series_rows: Vec<(u64, SeriesKey)> = Vec::new();
    let facts: Vec<RecordBatch> = points
        .chunks(BATCH_POINTS)
        .map(|rows| {
            let ids: Vec<u64> = rows
                .iter()
                .map(|p| {
                    let key = series_key(p);
                    let id = key.series_id();
                    if known.insert(id) {
                        series_rows.push((id, key));
                    }
                    id
                })
                .collect();
            let present: Vec<usize> = vec![0, 1, 2];
            RecordBatch::try_new(
                schema.arrow_schema(&present),
                vec![
                    Arc::new(
                        TimestampNanosecondArray::from(
                            rows.iter().map(|p| p.time as i64).collect::<Vec<_>>(),
                        )
                        .with_timezone("UTC"),
                    ),
                    Arc::new(UInt64Array::from(ids)),
                    Arc::new(Float64Array::from_iter_values(rows.iter().map(|p| p.value))),
                    Arc::new(Int64Array::from_iter_values(
                        rows.iter().map(|p| p.start as i64),
                    )),
                    Arc::new(UInt64Array::from_iter_values(
                        rows.iter().map(|p| u64::from(p.flags)),
                    )),
                ],
            )
            .expect("the fact schema's columns")
        })
        .collect();
    let series = series_batch(&series_rows);

    let mut report = ctx.report(
        "otlp shapes",
        vec![
            column("shape", "shape", Format::Text),
            column("points", "points", Format::Count),
            column("points/s", "points_per_s", Format::Count),
            column("B/point", "bytes_per_point", Format::Ratio),
        ],
    );
    let timed = |inserts: &mut dyn FnMut() -> anyhow::Result<()>| -> anyhow::Result<f64> {
        let started = Instant::now();
        inserts()?;
        Ok(per_second(points.len(), started.elapsed()))
    };
    let rate = timed(&mut || {
        for batch in &exporter {
            conn.insert("pushit_otlp_shapes.exporter_gauge", batch.clone())?;
        }
        Ok(())
    })?;
    conn.execute(&["OPTIMIZE TABLE pushit_otlp_shapes.exporter_gauge FINAL"])?;
    let (_, bytes) = conn.parts(DATABASE, "exporter_gauge")?;
    report.push(json!({
        "shape": "exporter (otel_metrics_gauge)",
        "points": points.len(),
        "points_per_s": rate,
        "bytes_per_point": bytes as f64 / points.len() as f64,
    }));
    let rate = timed(&mut || {
        // The series rows are written once, before their facts.
        conn.insert(&names.series_table, series.clone())?;
        for batch in &facts {
            conn.insert(&names.storage_table, batch.clone())?;
        }
        Ok(())
    })?;
    conn.execute(&[&format!("OPTIMIZE TABLE {} FINAL", names.storage_table)])?;
    conn.execute(&[&format!("OPTIMIZE TABLE {} FINAL", names.series_table)])?;
    let (_, fact_bytes) = conn.parts(&names.database_name, &names.storage_name)?;
    let (_, series_bytes) = conn.parts(&names.database_name, "_series")?;
    report.push(json!({
        "shape": "series_id (facts + series table)",
        "points": points.len(),
        "points_per_s": rate,
        "bytes_per_point": (fact_bytes + series_bytes) as f64 / points.len() as f64,
    }));
    report.finish();
    Ok(())
}

/// The series table's rows: id, measurement, tags.
fn series_batch(rows: &[(u64, SeriesKey)]) -> RecordBatch {
    let mut tags = MapBuilder::new(None, StringBuilder::new(), StringBuilder::new());
    for (_, key) in rows {
        for (k, v) in &key.tags {
            tags.keys().append_value(k);
            tags.values().append_value(v);
        }
        tags.append(true).expect("keys and values in step");
    }
    RecordBatch::try_from_iter(vec![
        (
            "series_id",
            Arc::new(UInt64Array::from_iter_values(
                rows.iter().map(|(id, _)| *id),
            )) as ArrayRef,
        ),
        (
            "measurement",
            Arc::new(StringArray::from_iter_values(
                rows.iter().map(|(_, k)| k.measurement.as_str()),
            )),
        ),
        ("tags", Arc::new(tags.finish())),
    ])
    .expect("columns of one length")
}
