//! Parse throughput on TSBS "cpu-only" lines: this crate's `next_into` loop
//! against the `influxdb-line-protocol` crate's `parse_lines`.
//!
//! The body is generated once (not timed): 10 000 lines of measurement
//! `cpu`, 10 tags, 10 integer fields and a 19-digit nanosecond timestamp.

// `criterion_group!` generates an undocumented public function.
#![allow(missing_docs)]

use std::hint::black_box;

use criterion::{criterion_group, criterion_main, Criterion, Throughput};
use lineproto::{Line, ParseOptions, Parser};

const LINES: usize = 10_000;

/// Small deterministic generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, items: &[&'a str]) -> &'a str {
        items[self.below(items.len() as u64) as usize]
    }
}

/// A TSBS cpu-only body: `hosts` hosts reporting every 10 s.
fn tsbs_cpu_body(lines: usize) -> String {
    const REGIONS: &[&str] = &[
        "us-east-1",
        "us-west-1",
        "us-west-2",
        "eu-west-1",
        "eu-central-1",
        "ap-southeast-1",
        "ap-southeast-2",
        "ap-northeast-1",
        "sa-east-1",
    ];
    const OS: &[&str] = &["Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"];
    const ARCH: &[&str] = &["x64", "x86"];
    const TEAM: &[&str] = &["SF", "NYC", "LON", "CHI"];
    const ENV: &[&str] = &["production", "staging", "test"];
    const FIELDS: &[&str] = &[
        "usage_user",
        "usage_system",
        "usage_idle",
        "usage_nice",
        "usage_iowait",
        "usage_irq",
        "usage_softirq",
        "usage_steal",
        "usage_guest",
        "usage_guest_nice",
    ];
    let hosts = 100;
    let mut rng = Rng(7);
    let tags: Vec<String> = (0..hosts)
        .map(|h| {
            let region = rng.pick(REGIONS);
            let dc = ["a", "b", "c"][rng.below(3) as usize];
            format!(
                "cpu,hostname=host_{h},region={region},datacenter={region}{dc},rack={},os={},arch={},team={},service={},service_version={},service_environment={}",
                rng.below(100),
                rng.pick(OS),
                rng.pick(ARCH),
                rng.pick(TEAM),
                rng.below(20),
                rng.below(2),
                rng.pick(ENV),
            )
        })
        .collect();
    let mut body = String::with_capacity(lines * 360);
    let start: i64 = 1_451_606_400_000_000_000;
    for n in 0..lines {
        body.push_str(&tags[n % hosts]);
        for (k, field) in FIELDS.iter().enumerate() {
            body.push(if k == 0 { ' ' } else { ',' });
            body.push_str(field);
            body.push('=');
            body.push_str(&rng.below(101).to_string());
            body.push('i');
        }
        let ts = start + (n / hosts) as i64 * 10_000_000_000;
        body.push(' ');
        body.push_str(&ts.to_string());
        body.push('\n');
    }
    body
}

fn bench(c: &mut Criterion) {
    let body = tsbs_cpu_body(LINES);
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
        b.iter(|| {
            let mut parser = Parser::new(black_box(bytes), ParseOptions::default());
            let mut fields = 0;
            while let Some(result) = parser.next_into(&mut line) {
                result.unwrap();
                fields += line.fields.len();
            }
            fields
        })
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
}

criterion_group!(benches, bench);
criterion_main!(benches);
