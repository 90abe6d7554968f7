//! The end-to-end load in each path's shape, built before any clock
//! starts: line-protocol bodies, typed points, and Arrow IPC streams, all
//! of the same TSBS cpu rows.

use std::sync::Arc;

use arrow::array::{
    ArrayRef, Int64Builder, RecordBatch, StringDictionaryBuilder, TimestampNanosecondArray,
};
use arrow::datatypes::Int16Type;
use arrow::ipc::writer::StreamWriter;
use chingest_proto::v1::{field_value, ArrowTarget, Durability, Point, Points, WriteArrowRequest};

/// The size and shape of the TSBS cpu-only load, as flags.
#[derive(Debug, clap::Args)]
pub(super) struct LoadArgs {
    /// Hosts (series), one row each per timestamp.
    #[arg(long, default_value_t = 1_000)]
    pub(super) hosts: usize,
    /// Timestamps per host.
    #[arg(long, default_value_t = 1_000)]
    pub(super) steps: usize,
    /// Lines (or points) per request.
    #[arg(long, default_value_t = 5_000)]
    pub(super) lines_per_body: usize,
}

/// Posts the whole load to `/write` into `db`, a body at a time; returns
/// once every row is queryable (the last body asks for `visible`).
pub(super) async fn post_all(
    load: &LoadArgs,
    endpoints: &super::server::Endpoints,
    db: &str,
) -> anyhow::Result<()> {
    let client = super::server::http_client()?;
    let bodies = bodies(load.hosts, load.steps, load.lines_per_body);
    let last = bodies.len().saturating_sub(1);
    for (i, body) in bodies.into_iter().enumerate() {
        let durability = if i == last { "visible" } else { "fsync" };
        let url = format!("{}/write?db={db}&durability={durability}", endpoints.http);
        super::server::authorized(endpoints, client.post(url).body(body))
            .send()
            .await?
            .error_for_status()?;
    }
    Ok(())
}

/// The load, `hosts × steps` lines, in bodies of `lines_per_body` lines.
pub(super) fn bodies(hosts: usize, steps: usize, lines_per_body: usize) -> Vec<String> {
    tsbs::CpuOnly::new(hosts).bodies(steps, lines_per_body.max(1))
}

/// The load as line protocol in chunks of about `rows` rows (whole
/// timestamps), in time order.
pub(super) fn row_chunks(hosts: usize, steps: usize, rows: usize) -> impl Iterator<Item = String> {
    let mut generator = tsbs::CpuOnly::new(hosts);
    let steps_per_chunk = (rows / hosts.max(1)).max(1);
    (0..steps)
        .step_by(steps_per_chunk)
        .map(move |first| generator.lines(first..(first + steps_per_chunk).min(steps)))
}

/// The lines of `body`, generated and therefore all valid.
fn parse(body: &str) -> impl Iterator<Item = lineproto::Line<'_>> {
    lineproto::Parser::new(body.as_bytes(), lineproto::ParseOptions::default())
        .map(|line| line.expect("generated lines parse"))
}

/// The lines of `body` as typed points.
pub(super) fn points(body: &str) -> Points {
    let points = parse(body)
        .map(|line| {
            let mut point = Point::new(&line.measurement.unescape(), Some(line.timestamp));
            for (k, v) in &line.tags {
                point = point.tag(&k.unescape(), &v.unescape());
            }
            for (k, v) in &line.fields {
                let lineproto::FieldValue::Integer(v) = v else {
                    panic!("TSBS cpu fields are integers")
                };
                point = point.field(&k.unescape(), field_value::Value::Integer(*v));
            }
            point
        })
        .collect();
    Points { points }
}

/// One WriteArrow call: its messages and the rows they carry.
pub(super) struct ArrowStream {
    pub(super) rows: usize,
    pub(super) requests: Vec<WriteArrowRequest>,
}

/// The lines of `body` as an Arrow batch: `time`, the tags
/// dictionary-encoded with 16-bit keys (TSBS has at most 1,000 values per
/// tag by default; the smallest keys that fit, as a columnar producer would
/// choose), the fields as Int64.
fn arrow_batch(body: &str) -> RecordBatch {
    let mut time = Vec::new();
    let mut tags: Vec<StringDictionaryBuilder<Int16Type>> = tsbs::TAGS
        .iter()
        .map(|_| StringDictionaryBuilder::new())
        .collect();
    let mut fields: Vec<Int64Builder> = tsbs::FIELDS.iter().map(|_| Int64Builder::new()).collect();
    for line in parse(body) {
        time.push(line.timestamp);
        for (builder, (_, value)) in tags.iter_mut().zip(&line.tags) {
            builder.append_value(value.raw());
        }
        for (builder, (_, value)) in fields.iter_mut().zip(&line.fields) {
            let lineproto::FieldValue::Integer(v) = value else {
                panic!("TSBS cpu fields are integers")
            };
            builder.append_value(*v);
        }
    }
    let mut columns: Vec<(&str, ArrayRef)> = vec![(
        "time",
        Arc::new(TimestampNanosecondArray::from(time).with_timezone("UTC")),
    )];
    for (name, mut builder) in tsbs::TAGS.iter().zip(tags) {
        columns.push((name, Arc::new(builder.finish())));
    }
    for (name, mut builder) in tsbs::FIELDS.iter().zip(fields) {
        columns.push((name, Arc::new(builder.finish())));
    }
    RecordBatch::try_from_iter(columns).expect("columns of equal length")
}

/// The load as Arrow batches of `batch_rows` rows: the first batch alone
/// (the warm-up stream), then the rest split over `streams` streams, each
/// one IPC stream cut into messages.
pub(super) fn arrow_streams(
    hosts: usize,
    steps: usize,
    batch_rows: usize,
    streams: usize,
    database: &str,
    durability: Durability,
) -> anyhow::Result<Vec<ArrowStream>> {
    let batches: Vec<RecordBatch> = row_chunks(hosts, steps, batch_rows)
        .map(|b| arrow_batch(&b))
        .collect();
    let target = ArrowTarget {
        database: database.to_owned(),
        measurement: "cpu".to_owned(),
        tag_columns: tsbs::TAGS.iter().map(|t| t.to_string()).collect(),
        durability: durability.into(),
        ..Default::default()
    };
    let (first, rest) = batches.split_first().expect("at least one batch");
    let per_stream = rest.len().div_ceil(streams.max(1)).max(1);
    std::iter::once(std::slice::from_ref(first))
        .chain(rest.chunks(per_stream))
        .map(|group| ipc_stream(group, &target))
        .collect()
}

fn ipc_stream(batches: &[RecordBatch], target: &ArrowTarget) -> anyhow::Result<ArrowStream> {
    // One gRPC message per IPC message (the schema, then each batch): the
    // server decodes each from one contiguous buffer.
    let mut writer = StreamWriter::try_new(Vec::new(), &batches[0].schema())?;
    let mut requests = vec![WriteArrowRequest {
        target: Some(target.clone()),
        ipc: std::mem::take(writer.get_mut()).into(),
    }];
    for batch in batches {
        writer.write(batch)?;
        requests.push(WriteArrowRequest {
            target: None,
            ipc: std::mem::take(writer.get_mut()).into(),
        });
    }
    writer.finish()?;
    requests.push(WriteArrowRequest {
        target: None,
        ipc: writer.into_inner()?.into(),
    });
    Ok(ArrowStream {
        rows: batches.iter().map(RecordBatch::num_rows).sum(),
        requests,
    })
}
