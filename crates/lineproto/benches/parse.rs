//! Parse throughput on TSBS "cpu-only" lines: this crate's `next_into` loop
//! against the `influxdb-line-protocol` crate's `parse_lines`.
//!
//! The body is generated once (not timed) by the `tsbs` crate: 10 000 lines
//! of measurement `cpu`, 10 tags, 10 integer fields and a 19-digit
//! nanosecond timestamp.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lineproto::{Line, ParseOptions, Parser};

const LINES: usize = 10_000;

/// The project's reference load: 100 hosts × 100 timestamps.
fn tsbs_cpu_body() -> String {
    tsbs::CpuOnly::new(100).lines(0..LINES / 100)
}

/// Parses every line of `bytes` into `line`; returns the fields seen.
fn parse_all<'a>(bytes: &'a [u8], line: &mut Line<'a>) -> usize {
    let mut parser = Parser::new(bytes, ParseOptions::default());
    let mut fields = 0;
    while let Some(result) = parser.next_into(line) {
        result.unwrap();
        fields += line.fields.len();
    }
    fields
}

fn bench(c: &mut Criterion) {
    let body = tsbs_cpu_body();
    eprintln!(
        "TSBS cpu-only body: {} lines, {} bytes, {:.1} bytes/line",
        LINES,
        body.len(),
        body.len() as f64 / LINES as f64
    );
    let bytes = body.as_bytes();

    // Both parsers must agree that every line is good.
    let ours = lineproto::parse(bytes, ParseOptions::default());
    assert_eq!((ours.lines.len(), ours.errors.len()), (LINES, 0));
    let theirs = influxdb_line_protocol::parse_lines(&body).filter(|r| r.is_ok());
    assert_eq!(theirs.count(), LINES);

    let mut group = c.benchmark_group("tsbs_cpu_only");
    group.throughput(Throughput::Bytes(bytes.len() as u64));
    let mut line = Line::default();
    group.bench_function("lineproto_next_into", |b| {
        b.iter(|| parse_all(black_box(bytes), &mut line))
    });
    group.bench_function("influxdb_line_protocol_parse_lines", |b| {
        b.iter(|| {
            let mut fields = 0;
            for result in influxdb_line_protocol::parse_lines(black_box(&body)) {
                fields += result.unwrap().field_set.len();
            }
            fields
        })
    });
    group.finish();

    // The same parse counted in lines, the unit ingest rates are quoted in.
    let mut lines = c.benchmark_group("tsbs_cpu_only_lines");
    lines.throughput(Throughput::Elements(LINES as u64));
    lines.bench_function("lineproto_next_into", |b| {
        b.iter(|| parse_all(black_box(bytes), &mut line))
    });
    lines.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
