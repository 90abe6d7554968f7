//! InfluxQL's read planner: a generated `SELECT` over generated data
//! answers the same wherever its points come from. The same points are
//! written to two databases of one engine: `mem`, whose aggregates the
//! planner may answer from memory (the recent samples of the last hour,
//! the chunk cache of older blocks, the last-value cache for `last()`),
//! and `eng`, which memory holds nothing of, read from the engine alone.
//! Both answers must be equal (floats to rounding: sums in another order),
//! or both refuse.
//!
//! The input is not text: its bytes choose a statement from a small
//! grammar over the data (aggregates memory answers and some it does not,
//! tag conditions, time ranges across memory's edge, `GROUP BY time` and
//! tags, `fill()`, limits, raw points).

#![no_main]

use chingest::{Access, DuplicatePolicy, Precision};
use chingest_fuzz::{Choices, Engine, EngineWorld};
use chingest_influxql::{execute, parse_query, Answer, Context, Value};
use libfuzzer_sys::fuzz_target;

/// The data's span back from the world's `now`, and its points' interval.
const SPAN_NS: i64 = 6 * 3_600_000_000_000;
const INTERVAL_NS: i64 = 30_000_000_000;

struct World {
    engine: Engine,
    /// The last point's time, ns, on the minute.
    now: i64,
}

static WORLD: EngineWorld<World> = EngineWorld::new(open, |world| world.engine.close());

/// The engine with the generated points written to `mem` and `eng`.
fn open() -> World {
    let now = chingest::clock::now_ns() / 60_000_000_000 * 60_000_000_000;
    let body = generated(now);
    let engine = chingest_fuzz::open_engine(
        "influxql_plan",
        chingest_fuzz::memory_for_mem,
        Precision::Nanoseconds,
        &[("mem", &body), ("eng", &body)],
    );
    let world = World { engine, now };
    // Both databases hold every point, also those past memory's edge.
    let count = "SELECT count(up) FROM m";
    let (mem, eng) = (world.answer("mem", count), world.answer("eng", count));
    assert_eq!(mem, eng);
    let points = body.lines().filter(|l| l.contains("up=")).count() as i64;
    let counted = match mem.unwrap().series[0].values[0][1] {
        Value::Unsigned(n) => n as i64,
        Value::Integer(n) => n,
        ref other => panic!("count(up) is {other:?}"),
    };
    assert_eq!(counted, points);
    world
}

impl World {
    /// The answer to `statement` in database `db`.
    fn answer(&self, db: &str, statement: &str) -> Result<Answer, String> {
        let ctx = Context {
            ingestor: &self.engine.ingestor,
            access: &Access::ALL,
            database: Some(db),
            retention_policy: "autogen",
            default_retention_policy: "autogen",
            default_duplicate_policy: DuplicatePolicy::default(),
            now: self.now,
        };
        let mut parsed = parse_query(statement, self.now).map_err(|e| e.to_string())?;
        let parsed = parsed.pop().ok_or("no statement")??;
        self.engine
            .runtime
            .block_on(execute(&ctx, &parsed))
            .map_err(|e| e.to_string())
    }
}

/// Measurement `m`: `up` (a float) and `req` (an integer) of three hosts
/// every 30 s over the span; `c` starts an hour in and pauses for twenty
/// minutes around memory's edge.
fn generated(now: i64) -> String {
    let mut body = String::new();
    for (h, host) in ["a", "b", "c"].iter().enumerate() {
        let h = h as i64;
        for i in 0..=SPAN_NS / INTERVAL_NS {
            let t = now - SPAN_NS + i * INTERVAL_NS;
            let paused = (now - 3_900_000_000_000..now - 2_700_000_000_000).contains(&t);
            if *host == "c" && (t < now - SPAN_NS + 3_600_000_000_000 || paused) {
                continue;
            }
            let up = ((i * 7 + h * 13) % 50) as f64 / 4.0;
            let req = (i + h) % 5 * 1000 + i;
            body += &format!("m,host={host} up={up:?},req={req}i {t}\n");
        }
    }
    body
}

/// A statement over `m`, times relative to `now` (ns).
fn statement(c: &mut Choices, now: i64) -> String {
    let field = |c: &mut Choices| c.pick(&["up", "req"]).to_owned();
    let columns = match c.index(4) {
        // Raw points.
        0 => format!("{}, host", field(c)),
        _ => {
            let n = 1 + c.index(3);
            (0..n)
                .map(|_| {
                    let aggregate = c.pick(&[
                        "count", "sum", "mean", "min", "max", "first", "last", "median", "spread",
                    ]);
                    format!("{aggregate}({})", field(c))
                })
                .collect::<Vec<_>>()
                .join(", ")
        }
    };
    let raw = !columns.contains('(');
    let mut q = format!("SELECT {columns} FROM m");
    let mut conditions = Vec::new();
    match c.pick(&[
        "",
        "host = 'a'",
        "host =~ /a|c/",
        "host != 'b'",
        "host = 'c'",
    ]) {
        "" => {}
        tags => conditions.push(tags.to_owned()),
    }
    // From a whole number of ten minutes back (up to the span, and a
    // little before it), to another or to now.
    let minute = 60_000_000_000i64;
    let start = now - c.index(38) as i64 * 10 * minute;
    conditions.push(format!("time >= {start}"));
    match c.index(3) {
        0 => {}
        _ => {
            let end = (start + (1 + c.index(36)) as i64 * 10 * minute).min(now + minute);
            conditions.push(format!("time < {end}"));
        }
    }
    if raw {
        q += &format!(
            " WHERE {} LIMIT {}",
            conditions.join(" AND "),
            1 + c.index(50)
        );
        return q;
    }
    q += &format!(" WHERE {}", conditions.join(" AND "));
    let by_host = c.index(2) == 1;
    match c.pick(&["", "1m", "5m", "17m", "1h"]) {
        "" if by_host => q += " GROUP BY host",
        "" => {}
        interval => {
            q += &format!(" GROUP BY time({interval})");
            if by_host {
                q += ", host";
            }
            q += c.pick(&[
                "",
                " fill(none)",
                " fill(0)",
                " fill(previous)",
                " fill(linear)",
            ]);
        }
    }
    if c.index(4) == 0 {
        q += c.pick(&[" LIMIT 3", " ORDER BY time DESC LIMIT 2", " SLIMIT 1"]);
    }
    q
}

/// Whether two answers are equal, floats to rounding.
fn same_answer(a: &Answer, b: &Answer) -> bool {
    let same_value = |x: &Value, y: &Value| match (x, y) {
        (Value::Float(x), Value::Float(y)) => {
            x.to_bits() == y.to_bits() || (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)
        }
        (x, y) => x == y,
    };
    a.series.len() == b.series.len()
        && a.series.iter().zip(&b.series).all(|(s, t)| {
            s.name == t.name
                && s.tags == t.tags
                && s.columns == t.columns
                && s.values.len() == t.values.len()
                && s.values.iter().zip(&t.values).all(|(r, q)| {
                    r.len() == q.len() && r.iter().zip(q).all(|(x, y)| same_value(x, y))
                })
        })
}

fuzz_target!(|input: &[u8]| WORLD.with(|world| check(world, input)));

/// Asks the statement `input` chooses of both databases and compares.
fn check(world: &World, input: &[u8]) {
    let q = statement(&mut Choices(input), world.now);
    match (world.answer("mem", &q), world.answer("eng", &q)) {
        (Ok(mem), Ok(eng)) => assert!(
            same_answer(&mem, &eng),
            "{q} (now {}):\nfrom memory {mem:?}\nfrom the engine {eng:?}",
            world.now
        ),
        (Err(_), Err(_)) => {}
        (mem, eng) => panic!(
            "{q} (now {}):\nfrom memory {mem:?}\nfrom the engine {eng:?}",
            world.now
        ),
    }
}
