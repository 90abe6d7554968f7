//! The CPU side of a line-protocol write: parse, series ids, Arrow columns —
//! `Ingestor::prepare_lp`, exactly as `write_lp` runs it, without the insert
//! — and each of its three steps on its own; and the same rows as typed
//! points (`Ingestor::prepare_points`).
//!
//! Throughput is in input bytes. `known series` is the steady state (every
//! series already seen, so each costs one hash lookup); `new series` is a
//! body whose series are all new to the database (canonicalized and hashed).
//!
//! The allocator is the server's (jemalloc), so allocation costs what it
//! costs there.

use criterion::{Criterion, Throughput};

use chingest::{IngestConfig, Ingestor, WriteOptions};

#[global_allocator]
static ALLOCATOR: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

fn main() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let ingestor = runtime
        .block_on(Ingestor::open(IngestConfig::new(dir.path())))
        .unwrap();
    let mut criterion = Criterion::default().configure_from_args();

    // 1,000 hosts × 10 timestamps: 10,000 lines, ~3.4 MB.
    let body = tsbs::CpuOnly::new(1_000).lines(0..10);
    let options = WriteOptions::default();
    runtime
        .block_on(ingestor.write_lp("bench", "autogen", body.as_bytes(), &options))
        .unwrap();

    let mut group = criterion.benchmark_group("prepare_lp");
    group.throughput(Throughput::Bytes(body.len() as u64));
    group.bench_function("tsbs cpu, known series", |b| {
        b.iter(|| {
            let prepared = runtime
                .block_on(ingestor.prepare_lp("bench", "autogen", body.as_bytes(), &options))
                .unwrap();
            assert_eq!(prepared.rows(), 10_000);
            prepared
        })
    });
    // A database whose `cpu` table exists but whose series table is empty:
    // prepare_lp does not record series, so every iteration meets 1,000 new
    // ones (canonicalized, hashed, queued).
    runtime
        .block_on(ingestor.write_arrow(
            "bench_new",
            "autogen",
            "cpu",
            &empty_cpu_batch(),
            &[],
            &options,
        ))
        .unwrap();
    group.bench_function("tsbs cpu, new series", |b| {
        b.iter(|| {
            runtime
                .block_on(ingestor.prepare_lp("bench_new", "autogen", body.as_bytes(), &options))
                .unwrap()
        })
    });
    // The same rows as typed points (`write_points`' first half): lines
    // built from values, no text.
    let parsed = lineproto::parse(body.as_bytes(), lineproto::ParseOptions::default());
    let points: Vec<chingest::Point<'_>> = parsed
        .lines
        .iter()
        .map(|line| chingest::Point {
            measurement: line.measurement.raw(),
            tags: line.tags.iter().map(|(k, v)| (k.raw(), v.raw())).collect(),
            fields: line
                .fields
                .iter()
                .map(|(k, v)| {
                    let value = match v {
                        lineproto::FieldValue::Integer(i) => chingest::PointValue::Integer(*i),
                        other => panic!("TSBS fields are integers, not {other:?}"),
                    };
                    (k.raw(), value)
                })
                .collect(),
            timestamp: Some(line.timestamp),
        })
        .collect();
    group.bench_function("tsbs cpu as typed points, known series", |b| {
        b.iter(|| {
            let prepared = runtime
                .block_on(ingestor.prepare_points("bench", "autogen", &points, &options))
                .unwrap();
            assert_eq!(prepared.rows(), 10_000);
            prepared
        })
    });
    group.finish();

    let mut parse = criterion.benchmark_group("parse only");
    parse.throughput(Throughput::Bytes(body.len() as u64));
    parse.bench_function("lineproto next_into", |b| {
        b.iter(|| {
            let mut parser =
                lineproto::Parser::new(body.as_bytes(), lineproto::ParseOptions::default());
            let mut line = lineproto::Line::default();
            let mut fields = 0;
            while let Some(result) = parser.next_into(&mut line) {
                result.unwrap();
                fields += line.fields.len();
            }
            fields
        })
    });
    parse.finish();

    // Series identity, per line: the raw-key fingerprint recognizes a known
    // series; a new one is canonicalized (tags sorted) and hashed to its id.
    let parsed = lineproto::parse(body.as_bytes(), lineproto::ParseOptions::default());
    assert!(parsed.errors.is_empty());
    let lines = parsed.lines;
    let mut series = criterion.benchmark_group("series key + hash");
    series.throughput(Throughput::Elements(lines.len() as u64));
    series.bench_function("raw-key fingerprint (known series)", |b| {
        b.iter(|| {
            lines
                .iter()
                .map(|line| {
                    chingest::layout::series::raw_key_fingerprint(line.series_key.as_bytes())
                })
                .fold(0u128, |acc, f| acc ^ f)
        })
    });
    series.bench_function("SeriesKey + series_id (new series)", |b| {
        b.iter(|| {
            lines
                .iter()
                .map(|line| {
                    let tags = line.tags.iter().map(|(k, v)| (k.unescape(), v.unescape()));
                    chingest::layout::series::SeriesKey::new(line.measurement.unescape(), tags)
                        .unwrap()
                        .series_id()
                })
                .fold(0u64, |acc, id| acc ^ id)
        })
    });
    series.finish();

    // Arrow columns from parsed points: chingest's ChunkBuilder, as a write
    // fills it, given each line's series id.
    let schema = std::sync::Arc::new(pushit::engine::tsbs_fact_schema("bench"));
    let mut arrow = criterion.benchmark_group("arrow build");
    arrow.throughput(Throughput::Elements(lines.len() as u64));
    arrow.bench_function("ChunkBuilder, 10 integer fields", |b| {
        b.iter(|| {
            let mut chunk = chingest::chunk::ChunkBuilder::new(schema.clone());
            for (i, line) in lines.iter().enumerate() {
                chunk.push_row(
                    line.timestamp,
                    i as u64,
                    line.fields.iter().map(|(_, v)| v).enumerate(),
                );
            }
            chunk.finish()
        })
    });
    arrow.finish();

    criterion.final_summary();
    runtime.block_on(ingestor.close()).unwrap();
}

/// A one-row batch that creates `cpu`'s ten integer columns.
fn empty_cpu_batch() -> chingest::arrow::array::RecordBatch {
    use chingest::arrow::array::{ArrayRef, Int64Array, RecordBatch};
    use std::sync::Arc;
    let mut columns: Vec<(&str, ArrayRef)> = vec![("time", Arc::new(Int64Array::from(vec![0])))];
    for field in tsbs::FIELDS {
        columns.push((field, Arc::new(Int64Array::from(vec![0]))));
    }
    RecordBatch::try_from_iter(columns).unwrap()
}
