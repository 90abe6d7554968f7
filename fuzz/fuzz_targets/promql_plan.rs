//! PromQL's read planner: a generated query over generated data answers
//! the same wherever its samples come from. The same series are written to
//! two databases of one engine: `mem`, whose reads the planner serves from
//! memory (the index, the recent samples of the last hour, the chunk cache
//! of older blocks) and the engine for what memory lacks, and `eng`, which
//! memory holds nothing of (`last_values.measurements` names `mem` only),
//! read from the engine alone. Both answers must equal
//! `evaluate_in_memory`'s over the series as written: same series, same
//! times, values equal to rounding; or all three refuse.
//!
//! The input is not text: its bytes choose a query from a small grammar
//! over the data's metrics (selectors, range functions with their ranges
//! and offsets across the memory's edge, aggregations, binary operators,
//! subqueries), and an instant or a range query's times.

#![no_main]

use std::time::Duration;

use chingest::{Access, Precision};
use chingest_fuzz::{Choices, Engine, EngineWorld};
use chingest_promql::{
    evaluate_in_memory, instant_query, range_query, Labels, Limits, Options, Series, Source, Value,
};
use libfuzzer_sys::fuzz_target;

/// The data's span, back from the world's `now`, and its samples' interval.
const SPAN_MS: i64 = 6 * 3_600_000;
const INTERVAL_MS: i64 = 30_000;
const HOSTS: [&str; 3] = ["a", "b", "c"];

struct World {
    engine: Engine,
    /// The series as written (both databases hold them).
    series: Vec<Series>,
    /// The last sample's time, ms, on the minute.
    now: i64,
}

static WORLD: EngineWorld<World> = EngineWorld::new(open, |world| world.engine.close());

/// The engine with the generated series written to `mem` and `eng`.
fn open() -> World {
    let now = chingest::clock::now_ms() / 60_000 * 60_000;
    let series = generated(now);
    let body = line_protocol(&series);
    let engine = chingest_fuzz::open_engine(
        "promql_plan",
        chingest_fuzz::memory_for_mem,
        Precision::Nanoseconds,
        &[("mem", &body), ("eng", &body)],
    );
    let world = World {
        engine,
        series,
        now,
    };
    // Both databases answer with every sample, also those past the
    // memory's edge: the comparisons are not of empty answers.
    let written: usize = world.series.iter().map(|s| s.points.len()).sum();
    let count = format!(
        "sum(count_over_time(m_up[{0}ms])) + sum(count_over_time(m_req[{0}ms]))",
        SPAN_MS + 1
    );
    for db in ["mem", "eng"] {
        let answer = world.read(db, &count, (now, now, 0)).unwrap();
        let Value::Vector(_, samples) = answer else {
            panic!("{answer:?}")
        };
        assert_eq!(samples.len(), 1, "{db}: {samples:?}");
        assert_eq!(samples[0].value, written as f64, "{db}");
    }
    world
}

impl World {
    /// `promql` over database `db`: an instant query at `start` when
    /// `step` is 0, else a range query.
    fn read(
        &self,
        db: &str,
        promql: &str,
        (start, end, step): (i64, i64, i64),
    ) -> Result<Value, chingest_promql::Error> {
        let source = Source::new(
            &self.engine.ingestor,
            &Access::ALL,
            db,
            "autogen",
            Limits::default(),
        )
        .unwrap();
        let options = Options::default();
        self.engine.runtime.block_on(async {
            match step {
                0 => instant_query(&source, promql, start, options).await,
                _ => {
                    let step = Duration::from_millis(step as u64);
                    range_query(&source, promql, start, end, step, options).await
                }
            }
        })
    }
}

/// `m_up` (a gauge) and `m_req` (a counter, reset once) of three hosts,
/// every 30 s over the span; `c` starts an hour in and pauses for twenty
/// minutes around the memory's edge.
fn generated(now: i64) -> Vec<Series> {
    let mut series = Vec::new();
    for (h, host) in HOSTS.iter().enumerate() {
        let h = h as i64;
        let times = (0..=SPAN_MS / INTERVAL_MS)
            .map(|i| (i, now - SPAN_MS + i * INTERVAL_MS))
            .filter(|&(_, t)| {
                *host != "c"
                    || (t >= now - SPAN_MS + 3_600_000
                        && !(now - 3_900_000..now - 2_700_000).contains(&t))
            });
        let (mut up, mut req) = (Vec::new(), Vec::new());
        let mut total = 0.0;
        for (i, t) in times {
            up.push((t, ((i * 7 + h * 13) % 50) as f64 / 4.0));
            total = if i == 400 + h * 50 {
                0.0
            } else {
                total + ((i + h) % 5) as f64
            };
            req.push((t, total));
        }
        for (metric, points) in [("m_up", up), ("m_req", req)] {
            series.push(Series {
                labels: Labels::new(vec![
                    ("__name__".to_owned(), metric.to_owned()),
                    ("host".to_owned(), host.to_string()),
                ]),
                points,
            });
        }
    }
    series
}

/// Each sample a line of measurement `m`, fields `up` and `req` (the
/// metrics `m_up`, `m_req`), ns.
fn line_protocol(series: &[Series]) -> String {
    let mut body = String::new();
    for s in series {
        let name = s.labels.get("__name__");
        let field = name.strip_prefix("m_").unwrap();
        let host = s.labels.get("host");
        for (t, v) in &s.points {
            body += &format!("m,host={host} {field}={v:?} {}\n", t * 1_000_000);
        }
    }
    body
}

/// A query of at most `depth` more levels.
fn query(c: &mut Choices, depth: u32) -> String {
    let kinds = if depth == 0 { 2 } else { 7 };
    match c.index(kinds) {
        0 => selector(c),
        1 => {
            let function = c.pick(&[
                "rate",
                "increase",
                "delta",
                "irate",
                "idelta",
                "deriv",
                "changes",
                "resets",
                "avg_over_time",
                "sum_over_time",
                "min_over_time",
                "max_over_time",
                "count_over_time",
                "last_over_time",
                "stddev_over_time",
                "present_over_time",
            ]);
            format!("{function}({}{})", selector(c), range(c))
        }
        2 => {
            let aggregation = c.pick(&["sum", "avg", "max", "min", "count", "group"]);
            let grouping = c.pick(&["", " by (host)", " without (host)", " by (__name__)"]);
            format!("{aggregation}{grouping} ({})", query(c, depth - 1))
        }
        3 => {
            let operator = c.pick(&[
                "+",
                "-",
                "*",
                "/",
                ">",
                "<=",
                "and",
                "or",
                "unless",
                "+ on(host)",
                "/ ignoring(__name__)",
            ]);
            format!(
                "({}) {operator} ({})",
                query(c, depth - 1),
                query(c, depth - 1)
            )
        }
        4 => {
            let function = c.pick(&["max_over_time", "avg_over_time", "count_over_time"]);
            let window = c.pick(&["[30m:5m]", "[2h:10m]", "[10m:1m]", "[1h:7m]"]);
            format!("{function}(({}){window})", query(c, depth - 1))
        }
        5 => {
            let function = c.pick(&["abs", "ceil", "timestamp", "sgn", "-"]);
            format!("{function}({})", query(c, depth - 1))
        }
        _ => {
            let k = c.pick(&["1", "2"]);
            let function = c.pick(&["topk", "bottomk"]);
            format!("{function}({k}, {})", query(c, depth - 1))
        }
    }
}

fn selector(c: &mut Choices) -> String {
    let metric = c.pick(&[
        "m_up",
        "m_req",
        "{__name__=~\"m_.*\"}",
        "m_up{host=\"c\"}",
        "m_req{host!=\"a\"}",
        "m_up{host=~\"a|c\"}",
        "nothing",
    ]);
    let offset = c.pick(&[
        "",
        " offset 10m",
        " offset 50m",
        " offset 2h",
        " offset -30m",
    ]);
    format!("{metric}{offset}")
}

fn range(c: &mut Choices) -> String {
    c.pick(&["[1m]", "[5m]", "[30m]", "[1h]", "[3h]"])
        .to_owned()
}

/// How two answers' numbers may differ: by rounding (sums in another
/// order, rates over the same samples).
fn same_number(a: f64, b: f64) -> bool {
    a.to_bits() == b.to_bits()
        || (a.is_nan() && b.is_nan())
        || (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0)
}

/// The answer as comparable data: series by labels, each with its points.
fn normalized(value: Value) -> Vec<(Labels, Vec<(i64, f64)>)> {
    let mut out: Vec<(Labels, Vec<(i64, f64)>)> = match value {
        Value::Scalar(t, v) => vec![(Labels::default(), vec![(t, v)])],
        Value::String(t, _) => vec![(Labels::default(), vec![(t, f64::NAN)])],
        Value::Vector(_, samples) => samples
            .into_iter()
            .map(|s| (s.labels, vec![(s.time, s.value)]))
            .collect(),
        Value::Matrix(series) => series.into_iter().map(|s| (s.labels, s.points)).collect(),
    };
    out.sort_by(|a, b| a.0.cmp(&b.0));
    out
}

fn same_answer(a: &[(Labels, Vec<(i64, f64)>)], b: &[(Labels, Vec<(i64, f64)>)]) -> bool {
    a.len() == b.len()
        && a.iter().zip(b).all(|((la, pa), (lb, pb))| {
            la == lb
                && pa.len() == pb.len()
                && pa
                    .iter()
                    .zip(pb)
                    .all(|(x, y)| x.0 == y.0 && same_number(x.1, y.1))
        })
}

fuzz_target!(|input: &[u8]| WORLD.with(|world| check(world, input)));

/// Reads the query `input` chooses from both databases and compares.
fn check(world: &World, input: &[u8]) {
    let mut c = Choices(input);
    let promql = query(&mut c, 3);
    // An instant query at a minute of the span, or a range query over a
    // part of it, its step one of a few.
    let at = world.now - c.index(361) as i64 * 60_000;
    let range_of = match c.index(3) {
        0 => None,
        _ => {
            let step = *c.pick(&[&60_000i64, &300_000, &1_020_000]);
            let start = at - c.index(25) as i64 * 900_000;
            Some((start, at, step))
        }
    };
    let (start, end, step) = range_of.unwrap_or((at, at, 0));
    let expected = evaluate_in_memory(
        &promql,
        &world.series,
        (start, end, step),
        Options::default(),
    );
    let times = match range_of {
        None => format!("at {at}"),
        Some(range) => format!("over {range:?}"),
    };
    for db in ["mem", "eng"] {
        match (world.read(db, &promql, (start, end, step)), &expected) {
            (Ok(got), Ok(want)) => {
                let (got, want) = (normalized(got), normalized(want.clone()));
                assert!(
                    same_answer(&got, &want),
                    "{promql} {times} (now {}) in {db}:\n{got:?}\nin memory as written:\n{want:?}",
                    world.now
                );
            }
            (Err(_), Err(_)) => {}
            (got, want) => panic!(
                "{promql} {times} (now {}) in {db}: {got:?}, as written: {want:?}",
                world.now
            ),
        }
    }
}
