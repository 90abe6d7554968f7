//! `SELECT … INTO` and continuous queries with the real `chingest`
//! binary (child processes on the test's directories, as `crash.rs`):
//!
//! - what `INTO` writes is logged before it is answered: it is there
//!   after a kill -9 right after the answer, tags kept as tags where the
//!   query grouped by them, fields otherwise; a continuous query into a
//!   table that keeps duplicates is refused;
//! - a continuous query runs on its schedule (`GROUP BY time(1s)`) while
//!   points arrive; the server is stopped, killed (-9) at a random moment
//!   and started again, and every interval with points is in the target,
//!   counted once and right — the periods missed while it was down caught
//!   up, none lost to the kill — and `/metrics` counts its periods; the
//!   query is still there after each restart.

#[path = "support/child.rs"]
mod child;

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use child::{client, get, start_with, wait_ready, Server};

const DB: &str = "cq";
const SECOND: i64 = 1_000_000_000;

fn start(dir: &Path) -> Server {
    start_with(
        dir,
        &[
            "--continuous-queries-run-interval-ms".as_ref(),
            "100".as_ref(),
        ],
    )
}

/// A statement's result (the first) as POST `/query` answers it.
async fn query(server: &Server, q: &str) -> serde_json::Value {
    let r = client()
        .post(format!("{}/query?db={DB}", server.url))
        .form(&[("q", q)])
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{q}");
    let answer: serde_json::Value = r.json().await.unwrap();
    let result = answer["results"][0].clone();
    assert!(result.get("error").is_none(), "{q}: {result}");
    result
}

async fn write(server: &Server, body: &str) -> reqwest::Result<reqwest::StatusCode> {
    let r = client()
        .post(format!("{}/write?db={DB}&durability=visible", server.url))
        .body(body.to_owned())
        .send()
        .await?;
    Ok(r.status())
}

/// Stops the server as a service manager does (SIGTERM), which must end
/// it cleanly.
fn stop(mut server: Server) {
    let pid = server.child.id().to_string();
    let sent = std::process::Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap();
    assert!(sent.success());
    assert!(server.exited_within(Duration::from_secs(60)));
    assert!(server.child.wait().unwrap().success());
}

#[test]
fn into_writes_are_logged_before_they_are_answered() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let mut server = start(dir.path());
    runtime.block_on(async {
        wait_ready(&server).await;
        query(&server, &format!("CREATE DATABASE {DB}")).await;
        let body = "cpu,host=a,dc=eu v=1,s=\"x\" 10\ncpu,host=b v=2 20\ncpu,host=a,dc=eu v=3 30\n";
        assert_eq!(write(&server, body).await.unwrap(), 204);
        // Written through the log, answered once queryable.
        for q in [
            "SELECT * INTO flat FROM cpu",
            "SELECT * INTO grouped FROM cpu GROUP BY *",
        ] {
            let result = query(&server, q).await;
            assert_eq!(
                result["series"][0],
                serde_json::json!({"name": "result", "columns": ["time", "written"],
                                   "values": [["1970-01-01T00:00:00Z", 3]]}),
                "{q}"
            );
        }
        let result = query(
            &server,
            "SELECT max(v) INTO cq..:MEASUREMENT FROM /cp/ WHERE time < 40 GROUP BY time(20ns), host",
        )
        .await;
        assert_eq!(result["series"][0]["values"][0][1], 3, "{result}");
        server.kill();
    });
    let server = start(dir.path());
    runtime.block_on(async {
        wait_ready(&server).await;
        let values = |result: serde_json::Value| result["series"].clone();
        assert_eq!(
            values(query(&server, "SHOW TAG KEYS FROM flat").await),
            serde_json::Value::Null,
            "columns became fields"
        );
        assert_eq!(
            values(query(&server, "SHOW FIELD KEYS FROM flat").await)[0]["values"],
            serde_json::json!([
                ["dc", "string"],
                ["host", "string"],
                ["s", "string"],
                ["v", "float"]
            ])
        );
        assert_eq!(
            values(query(&server, "SHOW TAG KEYS FROM grouped").await)[0]["values"],
            serde_json::json!([["dc"], ["host"]])
        );
        let grouped = values(query(&server, "SELECT v, s FROM grouped GROUP BY * ").await);
        assert_eq!(grouped.as_array().unwrap().len(), 2, "{grouped}");
        // A continuous query into a table that keeps every duplicate would
        // add a period's points again if it ran twice: refused.
        let create = "CREATE CONTINUOUS QUERY into_cpu ON cq BEGIN SELECT max(v) INTO cpu \
                      FROM cpu GROUP BY time(1m) END";
        let r = client()
            .post(format!("{}/query?db={DB}", server.url))
            .form(&[("q", create)])
            .send()
            .await
            .unwrap();
        let text = r.text().await.unwrap();
        assert!(text.contains("duplicate policy append"), "{text}");
        // One into a measurement INTO made (`last`) is taken.
        let create = create.replace("INTO cpu", "INTO flat");
        query(&server, &create).await;
        // :MEASUREMENT: into cpu itself, a point per interval and host.
        let max = values(query(&server, "SELECT max FROM cpu WHERE max > 0 GROUP BY host").await);
        assert_eq!(
            max,
            serde_json::json!([
                {"name": "cpu", "tags": {"host": "a"}, "columns": ["time", "max"],
                 "values": [["1970-01-01T00:00:00Z", 1.0], ["1970-01-01T00:00:00.00000002Z", 3.0]]},
                {"name": "cpu", "tags": {"host": "b"}, "columns": ["time", "max"],
                 "values": [["1970-01-01T00:00:00.00000002Z", 2.0]]},
            ])
        );
    });
}

/// Writes a point per host every 50 ms until stopped, each stamped 300 ms
/// ahead of the clock: every point of an interval is acknowledged before
/// the period after it runs. Retries while the server is down.
async fn feed(url: String, stop: Arc<AtomicBool>) {
    let mut value = 0;
    while !stop.load(Ordering::Relaxed) {
        value += 1;
        let at = now() + 300_000_000;
        let body = format!("m,host=a v={value}i {at}\nm,host=b v={}i {at}\n", value * 2);
        let sent = client()
            .post(format!("{url}/write?db={DB}"))
            .body(body)
            .send()
            .await;
        if !matches!(sent, Ok(r) if r.status() == 204) {
            // Down: it comes back on another port, with another url.
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

fn now() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

/// A metric of the query `each` from `/metrics`.
async fn metric(server: &Server, name: &str) -> f64 {
    let (_, text) = get(server, "/metrics").await;
    let line = format!("{name}{{database=\"{DB}\",name=\"each\"}} ");
    text.lines()
        .find_map(|l| l.strip_prefix(&line))
        .map_or(0.0, |v| v.parse().unwrap())
}

/// Per (interval start, host): the count of points.
fn counts(series: &serde_json::Value, column: usize) -> BTreeMap<(String, String), i64> {
    let mut counts = BTreeMap::new();
    for one in series.as_array().into_iter().flatten() {
        let host = one["tags"]["host"].as_str().unwrap().to_owned();
        for row in one["values"].as_array().unwrap() {
            let time = row[0].as_str().unwrap().to_owned();
            counts.insert((time, host.clone()), row[column].as_i64().unwrap());
        }
    }
    counts
}

#[test]
fn continuous_queries_resume_after_restarts_and_kills() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let create = format!(
        "CREATE CONTINUOUS QUERY each ON {DB} BEGIN SELECT count(v) AS n, sum(v) AS total \
         INTO per_second FROM m GROUP BY time(1s), host END"
    );
    let mut created = 0;
    // Runs 4 s, is stopped; down 2 s; runs, is killed at a random moment
    // of a period; down 2 s; runs to the end.
    let mut moments = now() as u64 % 1_000;
    for (round, end) in ["stop", "kill", "last"].into_iter().enumerate() {
        let mut server = start(dir.path());
        let stopping = Arc::new(AtomicBool::new(false));
        runtime.block_on(async {
            wait_ready(&server).await;
            if round == 0 {
                query(&server, &format!("CREATE DATABASE {DB}")).await;
                created = now();
                query(&server, &create).await;
            }
            let shown = query(&server, "SHOW CONTINUOUS QUERIES").await;
            assert_eq!(
                shown["series"][0]["values"],
                serde_json::json!([["each", create]])
            );
            let feeding = tokio::spawn(feed(server.url.clone(), Arc::clone(&stopping)));
            match end {
                "stop" => tokio::time::sleep(Duration::from_secs(4)).await,
                "kill" => {
                    moments = moments * 7 % 1_000;
                    tokio::time::sleep(Duration::from_millis(3_000 + moments)).await;
                }
                _ => {
                    tokio::time::sleep(Duration::from_secs(3)).await;
                    stopping.store(true, Ordering::Relaxed);
                    feeding.await.unwrap();
                    // Until the period after the last point's interval ran.
                    let last_point = now() + 300_000_000;
                    let done = (last_point / SECOND + 1) as f64;
                    let mut waited = 0;
                    while metric(&server, "chingest_continuous_query_last_period_seconds").await
                        < done
                    {
                        waited += 1;
                        assert!(waited < 300, "the query's periods stopped");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                    }
                }
            }
        });
        match end {
            "stop" => stop(server),
            "kill" => server.kill(),
            _ => {
                runtime.block_on(check(&server, created));
                stop(server);
            }
        }
        stopping.store(true, Ordering::Relaxed);
        std::thread::sleep(Duration::from_secs(2));
    }
}

/// Every whole interval since the query was created is in the target as
/// the source counts it.
async fn check(server: &Server, created: i64) {
    let from = (created / SECOND + 1) * SECOND;
    let range = format!(
        "time >= {from} AND time < {}",
        (now() / SECOND - 1) * SECOND
    );
    let source = query(
        server,
        &format!("SELECT count(v), sum(v) FROM m WHERE {range} GROUP BY time(1s), host fill(none)"),
    )
    .await;
    let target = query(
        server,
        &format!("SELECT n, total FROM per_second WHERE {range} GROUP BY host"),
    )
    .await;
    let (expected, got) = (counts(&source["series"], 1), counts(&target["series"], 1));
    assert!(
        expected.len() >= 16,
        "too few intervals with points: {expected:?}"
    );
    assert_eq!(got, expected, "intervals counted");
    let (expected, got) = (counts(&source["series"], 2), counts(&target["series"], 2));
    assert_eq!(got, expected, "intervals summed");
    let runs = metric(server, "chingest_continuous_query_runs_total").await;
    let written = metric(server, "chingest_continuous_query_points_written_total").await;
    assert!(
        runs >= 3.0 && written >= 6.0,
        "{runs} runs, {written} points"
    );
}
