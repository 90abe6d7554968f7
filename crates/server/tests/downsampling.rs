//! Downsampling through the real server binary (docs/downsampling.md): a
//! database configured in `[downsampling]` gets rollups that follow its
//! writes, late writes and deletes within a few passes, equal to the same
//! aggregates over its rows; InfluxQL reading them answers as the rows
//! alone do; a kill -9 or a power cut in the middle of a pass loses
//! nothing (the next server's passes finish the work); rows and buckets
//! past their age go while every reader answers as before from the
//! rollups; and levels that cannot work are refused at startup, saying
//! why.

#[path = "support/aged.rs"]
mod aged;
#[path = "support/child.rs"]
mod child;

use std::path::Path;
use std::process::Command;
use std::time::{Duration, Instant};

use aged::{same, Aged};
use child::{client, sql, start_with, urlencode, wait_ready, Server};

const DB: &str = "down";
/// 2026-01-01T00:00:00Z in seconds.
const START_S: i64 = 1_767_225_600;

/// A configuration file downsampling `DB` at `levels` with a pass every
/// 200 ms.
fn config(dir: &Path, levels: &str) -> std::path::PathBuf {
    let path = dir.join("chingest.toml");
    std::fs::write(
        &path,
        format!("[downsampling]\nperiod_ms = 200\n[downsampling.databases]\n{DB} = {levels}\n"),
    )
    .unwrap();
    path
}

fn start_downsampling(dir: &Path) -> Server {
    start_downsampling_in(dir, &dir.join("data"))
}

/// As [`start_downsampling`], its configuration file in `dir` and its data
/// in `data_dir`. Levels of 5 m and 1 h whose ages (3000 and 6000 days)
/// keep every row these tests write, to compare the rollups with them.
fn start_downsampling_in(dir: &Path, data_dir: &Path) -> Server {
    let config = config(dir, r#"["3000d:5m", "6000d:1h"]"#);
    start_with(data_dir, &["--config".as_ref(), config.as_os_str()])
}

/// `hosts` series, a point every `every_s` seconds for `points` points.
fn body(hosts: usize, points: i64, every_s: i64) -> String {
    let mut lines = Vec::new();
    for host in 0..hosts {
        for i in 0..points {
            let usage = (i * 7 + host as i64 * 13) % 101;
            lines.push(format!(
                "cpu,host=h{host} usage={usage}.5 {}",
                (START_S + i * every_s) * 1_000_000_000
            ));
        }
    }
    lines.join("\n")
}

async fn post(server: &Server, path: &str, body: String) {
    let r = client()
        .post(format!("{}{path}", server.url))
        .body(body)
        .send()
        .await
        .unwrap();
    let status = r.status();
    assert!(
        status.is_success(),
        "{path}: {status} {}",
        r.text().await.unwrap()
    );
}

/// The answer to `query`, or `None` when it is refused (a rollup not made yet).
async fn answer(server: &Server, query: &str) -> Option<String> {
    child::try_sql(server, query).await.ok()
}

/// The rollup at `interval` (`5m`, `1h`), if made yet, and the same
/// aggregates over the rows, each as text.
async fn rollup_and_rows(
    server: &Server,
    interval: &str,
    seconds: u64,
) -> (Option<String>, String) {
    let rollup = answer(
        server,
        &format!(
            "SELECT series_id, time, `usage@count`, `usage@sum`, `usage@min`, `usage@max`, \
             `usage@first`, `usage@last` FROM {DB}.`_rollup.{interval}.cpu.autogen` FINAL \
             ORDER BY series_id, time"
        ),
    )
    .await;
    let rows = sql(
        server,
        &format!(
            "SELECT series_id, toDateTime64(toStartOfInterval(time, INTERVAL {seconds} SECOND), 9, 'UTC') AS b, \
             count(usage), sum(usage), min(usage), max(usage), argMin(usage, time), argMax(usage, time) \
             FROM {DB}.`cpu.autogen` GROUP BY series_id, b ORDER BY series_id, b"
        ),
    )
    .await;
    (rollup, rows)
}

/// Waits until both levels equal the rows and the passes that built them
/// have finished; fails with the difference after `limit`.
async fn until_rolled_up(server: &Server, after: &str, limit: Duration) {
    let started = Instant::now();
    loop {
        let mut equal = true;
        let mut last = None;
        for (interval, seconds) in [("5m", 300), ("1h", 3600)] {
            let (rollup, rows) = rollup_and_rows(server, interval, seconds).await;
            if rollup.as_ref() != Some(&rows) || rows.is_empty() {
                equal = false;
                last = Some((interval, rollup, rows));
            }
        }
        if equal {
            // The pass that built them may still be running: readers trust
            // its span once it has finished, and one more pass ends after.
            two_passes(server).await;
            return;
        }
        if started.elapsed() > limit {
            let (interval, rollup, rows) = last.unwrap();
            panic!(
                "after {after}, the {interval} rollup is not the rows' aggregates:\n\
                 rollup ({} lines):\n{}\nrows ({} lines):\n{}",
                rollup.as_deref().map_or(0, |r| r.lines().count()),
                rollup
                    .as_deref()
                    .unwrap_or("(no table)")
                    .lines()
                    .take(5)
                    .collect::<Vec<_>>()
                    .join("\n"),
                rows.lines().count(),
                rows.lines().take(5).collect::<Vec<_>>().join("\n"),
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn rollups_follow_writes_late_writes_and_deletes() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let server = start_downsampling(tmp.path());
    runtime.block_on(async {
        wait_ready(&server).await;
        post(&server, &format!("/write?db={DB}"), body(3, 540, 20)).await;
        until_rolled_up(&server, "the first writes", Duration::from_secs(20)).await;
        // Late points into built buckets, a new series.
        let late = format!(
            "cpu,host=h0 usage=1000 {}\ncpu,host=h7 usage=3 {}",
            (START_S + 70) * 1_000_000_000,
            (START_S + 5000) * 1_000_000_000
        );
        post(&server, &format!("/write?db={DB}"), late).await;
        until_rolled_up(&server, "late writes", Duration::from_secs(20)).await;
        // Part of one bucket and several whole ones of one host.
        let delete = "DELETE FROM cpu WHERE host = 'h1' AND time >= '2026-01-01T01:02:00Z' \
                      AND time < '2026-01-01T02:01:00Z'";
        post(
            &server,
            &format!("/query?db={DB}&q={}", urlencode(delete)),
            String::new(),
        )
        .await;
        until_rolled_up(&server, "a delete", Duration::from_secs(20)).await;
        let (_, metrics) = child::get(&server, "/metrics").await;
        assert!(
            metrics.contains("chingest_downsampling_passes_total "),
            "{metrics}"
        );
        assert!(
            metrics.contains("chingest_downsampling_errors_total 0"),
            "{metrics}"
        );
    });
}

/// The database with the same points as `DB`, not downsampled.
const RAW: &str = "plain";

/// `points` of a float, an integer and a string field for `hosts` hosts,
/// every `every_s` seconds from `START_S + offset_s`.
fn mixed_body(hosts: usize, points: i64, every_s: i64, offset_s: i64) -> String {
    let mut lines = Vec::new();
    for host in 0..hosts {
        for i in 0..points {
            let t = START_S + offset_s + i * every_s;
            let v = (i * 7 + host as i64 * 13) % 101;
            lines.push(format!(
                "cpu,host=h{host} usage={v}.25,n={}i,state=\"s{}\" {}",
                v - 50,
                v % 3,
                t * 1_000_000_000
            ));
        }
    }
    lines.join("\n")
}

/// Writes `body` into both databases, visible to queries on return.
async fn write_both(server: &Server, body: &str) {
    for db in [DB, RAW] {
        post(
            server,
            &format!("/write?db={db}&durability=visible"),
            body.to_owned(),
        )
        .await;
    }
}

/// The InfluxQL answer to `query` in `db`, as JSON.
async fn influxql(server: &Server, db: &str, query: &str) -> serde_json::Value {
    let (status, text) = child::get(
        server,
        &format!("/query?db={db}&epoch=ns&q={}", urlencode(query)),
    )
    .await;
    assert!(status.is_success(), "{query}: {status} {text}");
    serde_json::from_str(&text).unwrap()
}

/// Statements that read rollups (a `GROUP BY time` of whole 5 m or 1 h
/// buckets, ranges cut in the middle of buckets, tags, offsets) and some
/// that cannot (a median, a time zone), over two days of points.
const DIFFERENTIAL: &[&str] = &[
    "SELECT mean(usage), max(usage), min(usage), count(usage), sum(usage), first(usage), last(usage) \
     FROM cpu WHERE time >= '2026-01-01T00:00:00Z' AND time < '2026-01-03T00:00:00Z' GROUP BY time(1h)",
    "SELECT mean(usage), count(usage) FROM cpu WHERE time >= '2026-01-01T00:00:00Z' \
     AND time < '2026-01-03T00:00:00Z' GROUP BY time(15m), host",
    "SELECT mean(usage), max(usage), first(usage), last(usage) FROM cpu \
     WHERE time >= '2026-01-01T00:07:30Z' AND time < '2026-01-02T13:31:00Z' GROUP BY time(1h), host fill(none)",
    "SELECT mean(n), sum(n), min(n), count(state), first(state), last(state) FROM cpu \
     WHERE time >= '2025-12-31T00:00:00Z' AND time < '2026-01-04T00:00:00Z' GROUP BY time(1d)",
    "SELECT max(usage) FROM cpu WHERE host = 'h1' AND time >= '2026-01-01T10:00:00Z' \
     AND time < '2026-01-02T10:00:00Z' GROUP BY time(30m)",
    "SELECT mean(usage) FROM cpu WHERE time >= '2026-01-01T00:00:00Z' AND time < '2026-01-03T00:00:00Z' \
     GROUP BY time(1h, 25m)",
    "SELECT derivative(mean(usage), 1h) FROM cpu WHERE time >= '2026-01-01T00:00:00Z' \
     AND time < '2026-01-02T00:00:00Z' GROUP BY time(1h)",
    "SELECT median(usage) FROM cpu WHERE time >= '2026-01-01T00:00:00Z' AND time < '2026-01-02T00:00:00Z' \
     GROUP BY time(1h)",
    "SELECT mean(usage) FROM cpu WHERE time >= '2026-01-01T00:00:00Z' AND time < '2026-01-02T00:00:00Z' \
     GROUP BY time(1h) tz('Europe/Paris')",
];

/// Every statement of `DIFFERENTIAL` answers the same in both databases.
async fn answers_agree(server: &Server, after: &str) {
    statements_agree(server, DIFFERENTIAL, after).await;
}

fn rollup_queries(metrics: &str) -> u64 {
    metrics
        .lines()
        .find_map(|line| line.strip_prefix("chingest_rollup_queries_total "))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no chingest_rollup_queries_total in {metrics}"))
}

#[test]
fn influxql_reads_rollups_and_rows_and_answers_as_the_rows_alone() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let server = start_downsampling(tmp.path());
    runtime.block_on(async {
        wait_ready(&server).await;
        write_both(&server, &mixed_body(3, 2880, 60, 0)).await;
        until_rolled_up(&server, "the first writes", Duration::from_secs(30)).await;
        let before = rollup_queries(&child::get(&server, "/metrics").await.1);
        answers_agree(&server, "the first writes").await;
        let read = rollup_queries(&child::get(&server, "/metrics").await.1) - before;
        assert!(read >= 6, "only {read} statements read rollups");
        // Late points into rolled-up buckets and a new series, queried at
        // once: whether a pass has rolled them up yet or not, the answers
        // are the rows'.
        for round in 0..4 {
            let late = format!(
                "cpu,host=h0 usage=1000.5,n=7i,state=\"late\" {}\ncpu,host=h9 usage=-3.5 {}",
                (START_S + 3_600 * (round * 11 + 3) + 17) * 1_000_000_000,
                (START_S + 86_400 + round * 1_234) * 1_000_000_000
            );
            write_both(&server, &late).await;
            answers_agree(&server, &format!("late writes, round {round}")).await;
        }
        // A delete of part of one host's range, queried at once.
        let delete = "DELETE FROM cpu WHERE host = 'h2' AND time >= '2026-01-01T05:02:00Z' \
                      AND time < '2026-01-01T09:31:00Z'";
        for db in [DB, RAW] {
            post(
                &server,
                &format!("/query?db={db}&q={}", urlencode(delete)),
                String::new(),
            )
            .await;
        }
        answers_agree(&server, "a delete").await;
        until_rolled_up(&server, "the delete", Duration::from_secs(30)).await;
        answers_agree(&server, "the delete rolled up").await;
    });
}

/// A counter rising steadily and a gauge, per host, every 15 s from 7 s
/// past `START_S` (no sample on a bucket's edge) for two days.
fn node_body(hosts: i64) -> String {
    let mut lines = Vec::new();
    for host in 0..hosts {
        for i in 0..11_520 {
            let t = START_S + 7 + i * 15;
            lines.push(format!(
                "node,host=h{host} bytes={}i,load={}.5 {}",
                i * 1_000 + host * 7,
                (i * 31 + host * 17) % 97,
                t * 1_000_000_000
            ));
        }
    }
    lines.join("\n")
}

/// The values of a counter of `/metrics`.
async fn counter(server: &Server, name: &str) -> u64 {
    let (_, metrics) = child::get(server, "/metrics").await;
    metrics
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|n| n.trim().parse().ok())
        .unwrap_or_else(|| panic!("no {name} in {metrics}"))
}

/// Waits for two more passes (after `passes`): every row written before
/// is rolled up.
async fn two_passes(server: &Server) {
    let first = counter(server, "chingest_downsampling_passes_total").await;
    while counter(server, "chingest_downsampling_passes_total").await < first + 2 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A PromQL range query's answer in `db`: per series, its labels and
/// `(t, value)`s.
async fn promql(
    server: &Server,
    db: &str,
    query: &str,
    step_s: i64,
) -> Vec<(String, Vec<(f64, f64)>)> {
    let (start, end) = (START_S + 6 * 3600, START_S + 42 * 3600);
    let (status, text) = child::get(
        server,
        &format!(
            "/api/v1/query_range?db={db}&query={}&start={start}&end={end}&step={step_s}",
            urlencode(query)
        ),
    )
    .await;
    assert!(status.is_success(), "{query}: {status} {text}");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    json["data"]["result"]
        .as_array()
        .unwrap()
        .iter()
        .map(|series| {
            let values = series["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| {
                    (
                        v[0].as_f64().unwrap(),
                        v[1].as_str().unwrap().parse().unwrap(),
                    )
                })
                .collect();
            (series["metric"].to_string(), values)
        })
        .collect()
}

/// Range functions that a bucket's last, greatest or least sample answers
/// (at steps of a bucket at least, over ranges of two): on a steady
/// counter and a gauge whose samples are never on a bucket's edge, equal
/// to the rows' answers; and ones that read the rows.
const PROMQL: &[(&str, i64, bool)] = &[
    ("rate(node_bytes[30m])", 3600, true),
    ("increase(node_bytes[2h])", 3600, true),
    ("sum by (host) (rate(node_bytes[1h]))", 1800, true),
    ("max_over_time(node_load[1h])", 3600, true),
    ("min_over_time(node_load[1h])", 3600, true),
    ("last_over_time(node_load[1h])", 3600, true),
    ("rate(node_bytes[5m])", 3600, false),
    ("avg_over_time(node_load[1h])", 3600, false),
    ("node_load", 3600, false),
];

#[test]
fn promql_range_functions_read_rollups_and_answer_as_the_rows() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let server = start_downsampling(tmp.path());
    runtime.block_on(async {
        wait_ready(&server).await;
        write_both(&server, &node_body(3)).await;
        two_passes(&server).await;
        for &(query, step, thinned) in PROMQL {
            let before = counter(&server, "chingest_rollup_queries_total").await;
            let down = promql(&server, DB, query, step).await;
            let read = counter(&server, "chingest_rollup_queries_total").await > before;
            assert_eq!(read, thinned, "{query}: read rollups");
            let plain = promql(&server, RAW, query, step).await;
            assert!(!plain.is_empty(), "{query}: no series");
            let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
            let equal = down.len() == plain.len()
                && down.iter().zip(&plain).all(|((la, va), (lb, vb))| {
                    la == lb
                        && va.len() == vb.len()
                        && va
                            .iter()
                            .zip(vb)
                            .all(|(a, b)| a.0 == b.0 && close(a.1, b.1))
                });
            assert!(equal, "{query}\ndownsampled: {down:?}\nplain: {plain:?}");
        }
        // A late sample into a rolled-up bucket, asked at once: read from
        // the rows until a pass has rolled it up.
        let late = format!(
            "node,host=h0 load=1000.5 {}",
            (START_S + 10 * 3600 + 38) * 1_000_000_000
        );
        write_both(&server, &late).await;
        let query = "max_over_time(node_load[1h])";
        let (down, plain) = (
            promql(&server, DB, query, 3600).await,
            promql(&server, RAW, query, 3600).await,
        );
        assert_eq!(down, plain, "{query} after a late sample");
        assert!(format!("{down:?}").contains("1000.5"), "{down:?}");
        // Up to now: memory holds the last hours, the rollups the rest,
        // split on a bucket's edge.
        let now_s = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let first = (now_s - 40 * 3600) / 15 * 15 + 7;
        let lines: Vec<String> = (0..)
            .map(|i| first + i * 15)
            .take_while(|t| *t <= now_s)
            .enumerate()
            .map(|(i, t)| format!("live,host=h0 bytes={}i {}", i * 500, t * 1_000_000_000))
            .collect();
        write_both(&server, &lines.join("\n")).await;
        two_passes(&server).await;
        let end = now_s / 3600 * 3600;
        let query = "rate(live_bytes[1h])";
        let before = counter(&server, "chingest_rollup_queries_total").await;
        let ask = |db: &'static str| {
            let path = format!(
                "/api/v1/query_range?db={db}&query={}&start={}&end={end}&step=3600",
                urlencode(query),
                end - 36 * 3600
            );
            let server = &server;
            async move { child::get(server, &path).await.1 }
        };
        let down = ask(DB).await;
        assert!(
            counter(&server, "chingest_rollup_queries_total").await > before,
            "{down}"
        );
        let plain = ask(RAW).await;
        let values = |text: &str| {
            let json: serde_json::Value = serde_json::from_str(text).unwrap();
            json["data"]["result"][0]["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| {
                    (
                        v[0].as_f64().unwrap(),
                        v[1].as_str().unwrap().parse::<f64>().unwrap(),
                    )
                })
                .collect::<Vec<_>>()
        };
        let (down, plain) = (values(&down), values(&plain));
        assert_eq!(down.len(), 37, "{down:?}");
        for (a, b) in down.iter().zip(&plain) {
            assert!(
                a.0 == b.0 && (a.1 - b.1).abs() <= 1e-9 * b.1.abs(),
                "{down:?}\n{plain:?}"
            );
        }
    });
}

/// Hosts and days of [`month_until_first_pass`]'s points, one a minute.
const MONTH: (i64, i64) = (20, 30);

/// Writes a month of a point a minute for 20 hosts, and returns once the
/// first pass has made its tables: it has a month of buckets to build in
/// some sixty statements, and the caller interrupts it.
async fn month_until_first_pass(server: &Server) {
    let (hosts, days) = MONTH;
    for day in 0..days {
        let mut lines = Vec::new();
        for host in 0..hosts {
            for i in 0..1440 {
                let t = START_S + day * 86_400 + i * 60;
                lines.push(format!(
                    "cpu,host=h{host} usage={}.5 {}",
                    (i + host) % 97,
                    t * 1_000_000_000
                ));
            }
        }
        post(server, &format!("/write?db={DB}"), lines.join("\n")).await;
    }
    let made = format!("SELECT count() FROM {DB}.`_rollup.1h.cpu.autogen`");
    while answer(server, &made).await.is_none() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// After the restart: every acknowledged point is there once, and the
/// rollups equal the rows.
async fn nothing_lost(server: &Server, after: &str) {
    let (hosts, days) = MONTH;
    let rows = sql(server, &format!("SELECT count() FROM {DB}.`cpu.autogen`")).await;
    assert_eq!(
        rows.trim(),
        (hosts * days * 1440).to_string(),
        "after {after}"
    );
    until_rolled_up(server, after, Duration::from_secs(60)).await;
}

#[test]
fn a_kill_during_a_pass_loses_nothing() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut server = start_downsampling(tmp.path());
    runtime.block_on(async {
        wait_ready(&server).await;
        month_until_first_pass(&server).await;
    });
    server.kill();
    let server = start_downsampling(tmp.path());
    runtime.block_on(async {
        wait_ready(&server).await;
        nothing_lost(&server, "a kill -9 during a pass").await;
    });
}

#[test]
fn a_power_cut_during_a_pass_loses_nothing() {
    // The data directory is on forgetfs, which forgets every write not
    // synced when the disk is cut (crates/forgetfs).
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let (config, backing, mountpoint) = (
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
        tempfile::tempdir().unwrap(),
    );
    let data_dir = mountpoint.path().join("data");
    let disk = forgetfs::mount(backing.path(), mountpoint.path())
        .expect("mounting forgetfs needs root and /dev/fuse");
    let mut server = start_downsampling_in(config.path(), &data_dir);
    runtime.block_on(async {
        wait_ready(&server).await;
        month_until_first_pass(&server).await;
    });
    server.kill();
    disk.cut();
    let _disk = forgetfs::mount(backing.path(), mountpoint.path()).unwrap();
    let server = start_downsampling_in(config.path(), &data_dir);
    runtime.block_on(async {
        wait_ready(&server).await;
        nothing_lost(&server, "a power cut during a pass").await;
    });
}

/// A server downsampling `DB` with its rows kept a day and its 5 m buckets
/// two (1 h ones for ever): its rows and buckets past those ages go.
fn start_aged(dir: &Path) -> Server {
    let config = config(dir, r#"["1d:5m", "2d:1h"]"#);
    start_with(
        &dir.join("data"),
        &["--config".as_ref(), config.as_os_str()],
    )
}

/// Every statement of `aged` answers the same in both databases.
async fn aged_answers_agree(server: &Server, aged: &Aged, after: &str) {
    statements_agree(server, &aged.statements(), after).await;
}

/// Each of `statements` answers the same in both databases.
async fn statements_agree(server: &Server, statements: &[impl AsRef<str>], after: &str) {
    statements_agree_in(server, (DB, RAW), statements, after).await;
}

/// Each of `statements` answers the same in the databases `down` and
/// `plain`.
async fn statements_agree_in(
    server: &Server,
    (down_db, plain_db): (&str, &str),
    statements: &[impl AsRef<str>],
    after: &str,
) {
    for query in statements {
        let query = query.as_ref();
        let (down, plain) = (
            influxql(server, down_db, query).await,
            influxql(server, plain_db, query).await,
        );
        assert!(
            same(&down, &plain),
            "after {after}, {query}\n{down_db}: {down}\n{plain_db}: {plain}"
        );
    }
}

/// Range functions over the three days, at 1 h steps, of the series
/// `selector` picks: from rollups (1 h buckets, then rows and memory) as
/// from the rows.
async fn aged_promql_agrees(server: &Server, aged: &Aged, selector: &str, after: &str) {
    let queries = [
        format!("max_over_time(cpu_usage{selector}[1h])"),
        format!("min_over_time(cpu_usage{selector}[1h])"),
        format!("last_over_time(cpu_usage{selector}[1h])"),
        format!("rate(cpu_requests{selector}[2h])"),
    ];
    promql_agrees(server, aged, (DB, RAW), &queries, after).await;
}

/// The answer of PromQL `query` in `db` over `aged`'s days at 1 h steps,
/// its values as numbers.
async fn aged_range(server: &Server, aged: &Aged, db: &str, query: &str) -> serde_json::Value {
    let path = format!(
        "/api/v1/query_range?db={db}&query={}&start={}&end={}&step=3600",
        urlencode(query),
        aged.day0 + 7200,
        aged.end
    );
    let (status, text) = child::get(server, &path).await;
    assert!(status.is_success(), "{query}: {status} {text}");
    let mut result =
        serde_json::from_str::<serde_json::Value>(&text).unwrap()["data"]["result"].clone();
    // Values as numbers: a rate added up in another order.
    for series in result.as_array_mut().unwrap() {
        for point in series["values"].as_array_mut().unwrap() {
            point[1] = point[1].as_str().unwrap().parse::<f64>().unwrap().into();
        }
    }
    result
}

/// Each of `queries` over `aged`'s days answers the same in the databases
/// `down` and `plain`.
async fn promql_agrees(
    server: &Server,
    aged: &Aged,
    (down_db, plain_db): (&str, &str),
    queries: &[String],
    after: &str,
) {
    for query in queries {
        let query = query.as_str();
        let (down, plain) = (
            aged_range(server, aged, down_db, query).await,
            aged_range(server, aged, plain_db, query).await,
        );
        let points = plain[0]["values"].as_array().map_or(0, Vec::len) as i64;
        assert_eq!(
            points,
            (aged.end - aged.day0 - 7200) / 3600 + 1,
            "{query}: {plain}"
        );
        if !same(&down, &plain) {
            // The points that differ, not three days of them.
            let differ: Vec<String> = (0..plain.as_array().unwrap().len())
                .flat_map(|i| {
                    let (d, p) = (&down[i]["values"], &plain[i]["values"]);
                    let points = p.as_array().unwrap().len();
                    (0..points)
                        .filter(|&j| !same(&d[j], &p[j]))
                        .map(|j| format!("{}: {} against {}", plain[i]["metric"], d[j], p[j]))
                        .collect::<Vec<_>>()
                })
                .collect();
            panic!("after {after}, {query} in {down_db}: {differ:?}\n{down}");
        }
    }
}

#[test]
fn rows_past_the_first_age_go_and_every_reader_answers_from_the_rollups() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut server = start_aged(tmp.path());
    let aged = Aged::now();
    runtime.block_on(async {
        wait_ready(&server).await;
        write_both(&server, &aged.body()).await;
        // The rows before the first age go, a day's part at a time.
        until_rows_gone(&server, DB, &aged).await;
        let kept = format!(
            "SELECT count() FROM {RAW}.`cpu.autogen` WHERE time < toDateTime({})",
            aged.rows_from
        );
        assert!(sql(&server, &kept).await.trim().parse::<u64>().unwrap() > 4000);
        // And the 5 m buckets before their age.
        let fine = format!(
            "SELECT count() FROM {DB}.`_rollup.5m.cpu.autogen` WHERE time < toDateTime({})",
            aged.fine_from
        );
        assert_eq!(sql(&server, &fine).await.trim(), "0");
        aged_answers_agree(&server, &aged, "the rows went").await;
        aged_promql_agrees(&server, &aged, "", "the rows went").await;
        // A raw read where the rows are gone: each 5 m bucket's last point.
        let hour = format!(
            "SELECT usage FROM cpu WHERE host = 'h0' AND time >= {} AND time < {}",
            aged.fine_from * 1_000_000_000,
            (aged.fine_from + 3600) * 1_000_000_000
        );
        let (down, plain) = (
            influxql(&server, DB, &hour).await,
            influxql(&server, RAW, &hour).await,
        );
        let points = |v: &serde_json::Value| {
            v["results"][0]["series"][0]["values"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        };
        let (down, plain) = (points(&down), points(&plain));
        assert_eq!((down.len(), plain.len()), (12, 60), "{down:?}");
        assert!(down.iter().all(|p| plain.contains(p)), "{down:?}");
        // Edits where the rows are gone change the buckets; a point written
        // there is merged into its bucket, once.
        let delete = format!(
            "DELETE FROM cpu WHERE host = 'h1' AND time >= {} AND time < {}",
            (aged.day0 + 5 * 3600) * 1_000_000_000,
            (aged.fine_from + 7 * 3600) * 1_000_000_000
        );
        let late = format!(
            "cpu,host=h0 usage=5000.5 {}",
            (aged.day0 + 3 * 3600 + 30) * 1_000_000_000
        );
        for db in [DB, RAW] {
            let query = format!("/query?db={db}&q={}", urlencode(&delete));
            post(&server, &query, String::new()).await;
            let query = format!(
                "/query?db={db}&q={}",
                urlencode("DROP SERIES FROM cpu WHERE host = 'h9'")
            );
            post(&server, &query, String::new()).await;
        }
        aged_answers_agree(&server, &aged, "a delete and a dropped series").await;
        write_both(&server, &late).await;
        two_passes(&server).await;
        aged_answers_agree(&server, &aged, "a point written where the rows are gone").await;
        two_passes(&server).await;
        aged_answers_agree(&server, &aged, "more passes").await;
        // (Not h1: next to the range deleted, a window holds one bucket's
        // sample where it held an hour of the rows', too few for a rate.)
        aged_promql_agrees(&server, &aged, "{host=\"h0\"}", "edits").await;
        let failed = counter(&server, "chingest_downsampling_errors_total").await;
        assert_eq!(failed, 0, "passes failed");
    });
    // After a restart the cuts are read back, and the last values are
    // rebuilt from the rollups where the rows are gone.
    server.kill();
    let server = start_aged(tmp.path());
    runtime.block_on(async {
        wait_ready(&server).await;
        aged_answers_agree(&server, &aged, "a restart").await;
        aged_promql_agrees(&server, &aged, "{host=\"h0\"}", "a restart").await;
        let (down, plain) = (
            influxql(&server, DB, "SELECT last(usage) FROM cpu GROUP BY host").await,
            influxql(&server, RAW, "SELECT last(usage) FROM cpu GROUP BY host").await,
        );
        assert!(same(&down, &plain), "{down}\n{plain}");
    });
}

/// Memory keeping 50 h of samples reaches past the rows' cut (at most
/// 48 h back) at any hour: an edit empties it, and the rebuild reads the
/// engine, whose rows before the cut are gone. Memory must then start at
/// the cut, not claim the samples before it (reads there would find none
/// in memory and never ask the rollups). Before the fix this held only in
/// the first two hours of a UTC day, with the default 26 h.
#[test]
fn memory_rebuilt_after_an_edit_starts_at_the_rows_cut() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let config = config(tmp.path(), r#"["1d:5m", "2d:1h"]"#);
    let text = std::fs::read_to_string(&config).unwrap();
    std::fs::write(
        &config,
        format!("[last_values]\nrecent_span_ms = 180000000\n{text}"),
    )
    .unwrap();
    let data = tmp.path().join("data");
    let server = start_with(&data, &["--config".as_ref(), config.as_os_str()]);
    let aged = Aged::now();
    runtime.block_on(async {
        wait_ready(&server).await;
        write_both(&server, &aged.body()).await;
        until_rows_gone(&server, DB, &aged).await;
        aged_promql_agrees(&server, &aged, "", "the rows went").await;
        let rebuilds = "chingest_last_value_rebuilds_total";
        let before = counter(&server, rebuilds).await;
        let delete = format!(
            "DELETE FROM cpu WHERE host = 'h1' AND time < {}",
            (aged.day0 + 3600) * 1_000_000_000
        );
        for db in [DB, RAW] {
            let (status, text) = admin(&server, db, &delete).await;
            assert!(status.is_success(), "{text}");
        }
        let started = Instant::now();
        while counter(&server, rebuilds).await < before + 2 {
            assert!(started.elapsed() < Duration::from_secs(60), "no rebuild");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        aged_promql_agrees(&server, &aged, "{host=\"h0\"}", "memory was rebuilt").await;
        // The hour before the cut, raw: each 5 m bucket's last sample.
        let window = format!(
            "/api/v1/query?db={DB}&time={}&query={}",
            aged.rows_from,
            urlencode("cpu_usage{host=\"h0\"}[1h]")
        );
        let (status, text) = child::get(&server, &window).await;
        assert!(status.is_success(), "{text}");
        let answer: serde_json::Value = serde_json::from_str(&text).unwrap();
        let points = answer["data"]["result"][0]["values"]
            .as_array()
            .map_or(0, Vec::len);
        assert_eq!(points, 12, "{text}");
    });
}

/// Waits until the rows of `db` before `aged.rows_from` are gone (a pass's
/// drops all done).
async fn until_rows_gone(server: &Server, db: &str, aged: &Aged) {
    let left = format!(
        "SELECT count() FROM {db}.`cpu.autogen` WHERE time < toDateTime({})",
        aged.rows_from
    );
    let started = Instant::now();
    let dropped = "chingest_downsampling_parts_dropped_total";
    while sql(server, &left).await.trim() != "0" || counter(server, dropped).await < 2 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "rows stay: {left}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Measurements with levels of their own (`[downsampling.measurements]`)
/// in a database downsampled at `1d:5m`, `2d:1h`: `mem` kept whole, `disk`
/// at `1d:1h` alone. Once passes ran, the rows of `cpu` and `disk` past a
/// day are gone and all of `mem`'s kept; `disk` has its one level's rollup
/// and no other; InfluxQL by the hour answers for each as the plain twin.
#[test]
fn measurements_with_levels_of_their_own_keep_them() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("chingest.toml");
    std::fs::write(
        &config,
        format!(
            "[downsampling]\nperiod_ms = 200\n[downsampling.databases]\n\
             {DB} = [\"1d:5m\", \"2d:1h\"]\n[downsampling.measurements.{DB}]\n\
             mem = []\ndisk = [\"1d:1h\"]\n"
        ),
    )
    .unwrap();
    let server = start_with(
        &tmp.path().join("data"),
        &["--config".as_ref(), config.as_os_str()],
    );
    let aged = Aged::now();
    runtime.block_on(async {
        wait_ready(&server).await;
        for measurement in ["cpu", "mem", "disk"] {
            let body = aged.body().replace("cpu,", &format!("{measurement},"));
            write_both(&server, &body).await;
        }
        until_rows_gone(&server, DB, &aged).await;
        let before_cut = |db: &str, measurement: &str| {
            format!(
                "SELECT count() FROM {db}.`{measurement}.autogen` WHERE time < toDateTime({})",
                aged.rows_from
            )
        };
        let started = Instant::now();
        while sql(&server, &before_cut(DB, "disk")).await.trim() != "0" {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "disk's rows stay"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        assert_eq!(
            sql(&server, &before_cut(DB, "mem")).await,
            sql(&server, &before_cut(RAW, "mem")).await,
            "mem is kept whole"
        );
        let buckets = format!("SELECT count() FROM {DB}.`_rollup.1h.disk.autogen`");
        assert_ne!(sql(&server, &buckets).await.trim(), "0");
        for missing in ["_rollup.5m.disk.autogen", "_rollup.1h.mem.autogen"] {
            let r = client()
                .post(format!("{}/sql", server.url))
                .body(format!("SELECT count() FROM {DB}.`{missing}`"))
                .send()
                .await
                .unwrap();
            let (status, text) = (r.status(), r.text().await.unwrap());
            assert!(
                !status.is_success() && text.contains("UNKNOWN_TABLE"),
                "{missing}: {text}"
            );
        }
        for measurement in ["cpu", "mem", "disk"] {
            // By the hour and coarser: `disk` keeps no 5 m buckets.
            let statements: Vec<String> = aged
                .statements()
                .into_iter()
                .filter(|q| !q.contains("time(5m)"))
                .map(|q| q.replace("FROM cpu", &format!("FROM {measurement}")))
                .collect();
            statements_agree(&server, &statements, measurement).await;
        }
    });
}

/// A database whose levels keep the last sample only.
const LAST: &str = "lastonly";

#[test]
fn levels_keeping_the_last_sample_answer_reads_of_last_samples_as_the_rows() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let server = start_aged(tmp.path());
    let aged = Aged::now();
    runtime.block_on(async {
        wait_ready(&server).await;
        post(&server, "/query?q=CREATE+DATABASE+lastonly", String::new()).await;
        let set = "SET DOWNSAMPLING '1d:5m:last', '2d:1h:last'";
        let (status, text) = admin(&server, LAST, set).await;
        assert!(status.is_success(), "{status} {text}");
        let (_, shown) = admin(&server, LAST, "SHOW DOWNSAMPLING").await;
        assert!(
            shown.contains(r#"["1d","5m","last","statement"],["2d","1h","last","statement"]"#),
            "{shown}"
        );
        // An aggregate level cannot follow one keeping the last sample.
        let (status, text) = admin(&server, LAST, "SET DOWNSAMPLING '1d:5m:last', '2d:1h'").await;
        assert!(
            status.as_u16() == 400 && text.contains("keeps the last sample only"),
            "{status} {text}"
        );
        write_both(&server, &aged.body()).await;
        post(
            &server,
            "/write?db=lastonly&durability=visible",
            aged.body(),
        )
        .await;
        until_rows_gone(&server, DB, &aged).await;
        until_rows_gone(&server, LAST, &aged).await;
        assert!(has_rollup(&server, LAST, "5m_last").await);
        assert!(!has_rollup(&server, LAST, "5m").await);
        // What reads the last sample of a bucket, or counts, answers as
        // the rows: PromQL's rate, increase and last_over_time, InfluxQL's
        // count and last (by the hour, across the cuts).
        let selectors = ["", "{host=\"h0\"}"];
        let queries: Vec<String> = selectors
            .iter()
            .flat_map(|s| {
                [
                    format!("last_over_time(cpu_usage{s}[1h])"),
                    format!("rate(cpu_requests{s}[2h])"),
                    format!("increase(cpu_requests{s}[2h])"),
                ]
            })
            .collect();
        promql_agrees(&server, &aged, (LAST, RAW), &queries, "the rows went").await;
        let (day0, end) = (aged.day0 * 1_000_000_000, aged.end * 1_000_000_000);
        let counted = [
            format!(
                "SELECT count(usage), last(usage), count(requests), last(requests) FROM cpu \
                 WHERE time >= {day0} AND time < {end} GROUP BY time(1h), host"
            ),
            format!(
                "SELECT last(requests) FROM cpu WHERE time >= {day0} AND time < {end} \
                 GROUP BY time(1d)"
            ),
        ];
        statements_agree_in(&server, (LAST, RAW), &counted, "the rows went").await;
        // Where the rows are gone, a bucket's other samples are not kept:
        // a maximum is that of the last samples, a mean their mean.
        let max = "max_over_time(cpu_usage{host=\"h0\"}[1h])";
        let (last, raw) = (
            aged_range(&server, &aged, LAST, max).await,
            aged_range(&server, &aged, RAW, max).await,
        );
        let values = |v: &serde_json::Value| -> Vec<f64> {
            v[0]["values"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p[1].as_f64().unwrap())
                .collect()
        };
        let (last, raw) = (values(&last), values(&raw));
        assert_eq!(last.len(), raw.len());
        assert!(
            last.iter().zip(&raw).all(|(l, r)| l <= r),
            "{last:?}\n{raw:?}"
        );
        assert!(last.iter().zip(&raw).any(|(l, r)| l < r), "{last:?}");
        let mean = format!(
            "SELECT mean(usage) FROM cpu WHERE time >= {day0} AND time < {} GROUP BY time(1h)",
            aged.fine_from * 1_000_000_000
        );
        let answered = influxql(&server, LAST, &mean).await;
        let hours = answered["results"][0]["series"][0]["values"]
            .as_array()
            .map(Vec::len);
        assert_eq!(hours, Some(24), "{answered}");
        // A database keeping every aggregate moves to the last sample
        // (built from its buckets where the rows are gone), and answers
        // alike; back is refused: the aggregates are gone.
        let (status, text) = admin(&server, DB, set).await;
        assert!(status.is_success(), "{status} {text}");
        let started = Instant::now();
        while has_rollup(&server, DB, "5m").await || !has_rollup(&server, DB, "1h_last").await {
            assert!(started.elapsed() < Duration::from_secs(60), "no migration");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        promql_agrees(
            &server,
            &aged,
            (DB, RAW),
            &queries,
            "a move to the last sample",
        )
        .await;
        statements_agree_in(&server, (DB, LAST), &counted, "a move to the last sample").await;
        let (status, text) = admin(&server, DB, "SET DOWNSAMPLING DEFAULT").await;
        assert!(
            status.as_u16() == 409 && text.contains("5m:last, 1h:last"),
            "{status} {text}"
        );
        let failed = counter(&server, "chingest_downsampling_errors_total").await;
        assert_eq!(failed, 0, "passes failed");
    });
}

/// Runs an administrative statement on `db`: its status and answer.
async fn admin(server: &Server, db: &str, statement: &str) -> (reqwest::StatusCode, String) {
    let r = client()
        .post(format!(
            "{}/query?db={db}&q={}",
            server.url,
            urlencode(statement)
        ))
        .send()
        .await
        .unwrap();
    (r.status(), r.text().await.unwrap())
}

/// Whether `db` has a rollup of `cpu` at `width` (`/sql` reads it).
async fn has_rollup(server: &Server, db: &str, width: &str) -> bool {
    let query = format!("SELECT count() FROM {db}.`_rollup.{width}.cpu.autogen`");
    answer(server, &query).await.is_some()
}

#[test]
fn levels_set_by_a_statement_take_over_existing_data_and_outlive_a_restart() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let mut server = start_aged(tmp.path());
    let aged = Aged::now();
    // Windows of 1 h and more, and days: exact at every level set below.
    let mut statements = aged.statements();
    statements.retain(|s| !s.contains("time(5m)"));
    statements.push(format!(
        "SELECT count(usage), max(usage), last(usage) FROM cpu WHERE time >= {} AND time < {} \
         GROUP BY time(1d)",
        aged.day0 * 1_000_000_000,
        aged.end * 1_000_000_000
    ));
    runtime.block_on(async {
        wait_ready(&server).await;
        write_both(&server, &aged.body()).await;
        until_rows_gone(&server, DB, &aged).await;
        let (_, shown) = admin(&server, DB, "SHOW DOWNSAMPLING").await;
        assert!(
            shown.contains(r#"["1d","5m","aggregates","configuration"],["2d","1h","aggregates","configuration"]"#),
            "{shown}"
        );
        // What would lose data is refused (409), and changes nothing; an
        // unknown database is the statement's error, as InfluxDB's.
        for (statement, status, why) in [
            (
                "SET DOWNSAMPLING '1d:5m', '2d:10m'",
                409,
                "none of the new levels",
            ),
            ("SET DOWNSAMPLING NONE", 409, "stays downsampled"),
            (
                "SET DOWNSAMPLING DEFAULT ON nowhere",
                200,
                "database not found",
            ),
        ] {
            let answer = admin(&server, DB, statement).await;
            assert!(
                answer.0.as_u16() == status && answer.1.contains(why),
                "{statement}: {answer:?}"
            );
        }
        statements_agree(&server, &statements, "refused changes").await;
        // 15 m buckets for the 5 m ones (built from them where the rows
        // are gone), the hour's kept, and days (from all three).
        let (status, text) =
            admin(&server, DB, "SET DOWNSAMPLING '1d:15m', '3d:1h', '60d:1d'").await;
        assert!(status.is_success(), "{status} {text}");
        // Killed while the passes move the tables (a pass every 200 ms).
        tokio::time::sleep(Duration::from_millis(300)).await;
    });
    server.kill();
    // The statement's levels outlive the kill and a restart with the
    // file's; until the move is done readers read the levels recorded.
    let mut server = start_aged(tmp.path());
    runtime.block_on(async {
        wait_ready(&server).await;
        statements_agree(&server, &statements, "a kill while moving").await;
        let started = Instant::now();
        while has_rollup(&server, DB, "5m").await || !has_rollup(&server, DB, "1d").await {
            assert!(started.elapsed() < Duration::from_secs(60), "no migration");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        two_passes(&server).await;
        statements_agree(&server, &statements, "new levels").await;
        aged_promql_agrees(&server, &aged, "", "new levels").await;
        let (_, shown) = admin(&server, DB, "SHOW DOWNSAMPLING").await;
        assert!(
            shown.contains(concat!(
                r#"["1d","15m","aggregates","statement"],["3d","1h","aggregates","statement"],"#,
                r#"["60d","1d","aggregates","statement"]"#
            )),
            "{shown}"
        );
        two_passes(&server).await;
        assert!(!has_rollup(&server, DB, "5m").await);
        let fine = format!(
            "SELECT count() FROM {DB}.`_rollup.15m.cpu.autogen` WHERE time < toDateTime({})",
            aged.rows_from
        );
        assert!(sql(&server, &fine).await.trim().parse::<u64>().unwrap() > 0);
        // A database downsampled by a statement: its rows are rolled up;
        // off again (no row went), its rollups go.
        post(&server, "/query?q=CREATE+DATABASE+late", String::new()).await;
        post(&server, "/write?db=late", aged.body()).await;
        let (status, text) = admin(&server, "late", "SET DOWNSAMPLING '3000d:5m'").await;
        assert!(status.is_success(), "{status} {text}");
        let count = "SELECT count() FROM late.`_rollup.5m.cpu.autogen`";
        let started = Instant::now();
        while answer(&server, count).await.is_none_or(|n| n.trim() == "0") {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "late is not rolled up"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (status, text) = admin(&server, "late", "SET DOWNSAMPLING NONE").await;
        assert!(status.is_success(), "{status} {text}");
        assert!(!has_rollup(&server, "late", "5m").await);
        let (_, shown) = admin(&server, "late", "SHOW DOWNSAMPLING").await;
        assert!(
            shown.contains(r#""columns":["age","interval","keeps","set_by"]"#),
            "{shown}"
        );
        assert!(!shown.contains("5m"), "{shown}");
        // Back to the file's levels: where the rows went, the hour's
        // buckets hold what the 15 m ones did.
        let (status, text) = admin(&server, DB, "SET DOWNSAMPLING DEFAULT").await;
        assert!(status.is_success(), "{status} {text}");
        let started = Instant::now();
        while !has_rollup(&server, DB, "5m").await || has_rollup(&server, DB, "1d").await {
            assert!(started.elapsed() < Duration::from_secs(60), "no migration");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        statements_agree(&server, &statements, "the file's levels again").await;
        // Every move went through at its first attempt.
        let failed = counter(&server, "chingest_downsampling_errors_total").await;
        assert_eq!(failed, 0, "passes failed");
    });
    // Files that would lose data are refused at startup.
    server.kill();
    let data_dir = tmp.path().join("data");
    for (levels, why) in [
        (Some(r#"["1d:5m", "2d:10m"]"#), "none of the new levels"),
        (None, "stays downsampled"),
    ] {
        let config = match levels {
            Some(levels) => config(tmp.path(), levels),
            None => {
                let path = tmp.path().join("chingest.toml");
                std::fs::write(&path, "[downsampling]\nperiod_ms = 200\n").unwrap();
                path
            }
        };
        let stderr = refused_at_startup(&data_dir, &config);
        assert!(stderr.contains(why), "{levels:?}: {stderr}");
    }
    let server = start_aged(tmp.path());
    runtime.block_on(async {
        wait_ready(&server).await;
        statements_agree(&server, &statements, "refused starts").await;
    });
}

#[test]
fn statements_that_cannot_downsample_are_refused() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let tmp = tempfile::tempdir().unwrap();
    let config = tmp.path().join("chingest.toml");
    std::fs::write(&config, "[ingest]\nflush_concurrency = 2\n").unwrap();
    let server = start_with(
        &tmp.path().join("data"),
        &["--config".as_ref(), config.as_os_str()],
    );
    runtime.block_on(async {
        wait_ready(&server).await;
        post(&server, "/query?q=CREATE+DATABASE+db", String::new()).await;
        for (statement, status, why) in [
            // Passes find new rows by block number: one insert at a time.
            ("SET DOWNSAMPLING '30d:5m'", 400, "flush.concurrency = 1"),
            // Levels are checked as the file's are; the request is refused.
            ("SET DOWNSAMPLING '30d:5m', '10d:1h'", 400, "must grow"),
            ("SET DOWNSAMPLING '30d:7m', '60d:1h'", 400, "not a multiple"),
            // Off needs nothing: accepted.
            ("SET DOWNSAMPLING NONE", 200, ""),
        ] {
            let answer = admin(&server, "db", statement).await;
            assert!(
                answer.0.as_u16() == status && answer.1.contains(why),
                "{statement}: {answer:?}"
            );
        }
        let (_, shown) = admin(&server, "db", "SHOW DOWNSAMPLING").await;
        assert!(!shown.contains("30d"), "{shown}");
    });
}

/// Starts the server on `data_dir` with the configuration file `config`,
/// which it must refuse: what it printed.
fn refused_at_startup(data_dir: &Path, config: &Path) -> String {
    let out = Command::new(env!("CARGO_BIN_EXE_chingest"))
        .args([
            "serve",
            "--http-addr",
            "127.0.0.1:0",
            "--grpc-addr",
            "127.0.0.1:0",
        ])
        .args(["--clickhouse-http-addr", "off", "--data-dir"])
        .arg(data_dir)
        .arg("--config")
        .arg(config)
        .output()
        .unwrap();
    assert!(!out.status.success(), "{} was accepted", config.display());
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[test]
fn levels_that_cannot_work_are_refused_at_startup() {
    for (levels, why) in [
        (r#"["30d:5m", "10d:1h"]"#, "must grow"),
        (r#"["30d:5m", "180d:7m"]"#, "not a multiple"),
        (r#"["30d"]"#, "<age>:<interval>"),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let config = config(tmp.path(), levels);
        let stderr = refused_at_startup(&tmp.path().join("data"), &config);
        assert!(
            stderr.contains(&format!("downsampling.databases.{DB}")) && stderr.contains(why),
            "{levels}: {stderr}"
        );
    }
}
