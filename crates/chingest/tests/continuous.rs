//! Continuous queries run each period once, on their schedule, across
//! restarts and a kill -9: periods missed while the process was down run
//! when it is back (up to `max_catch_up_periods`, the older ones skipped
//! and counted), none twice after a clean stop, at most the one under way
//! after a crash. The queries and their progress outlive the process.
//!
//! The runner here is the smallest that writes through the real write
//! path: a point per period into a table that keeps every duplicate
//! (`append`), stamped with its window, so that any period run twice or
//! missed shows. (InfluxQL's runner, which gives its targets the `last`
//! policy that makes a repeated period harmless, is tested through the
//! server: `crates/server/tests/continuous.rs`.) Each phase is a child
//! process on the test's data directory (see `phases`).

mod phases;

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use chingest::{
    ContinuousQuery, ContinuousQueryRunner, Durability, IngestConfig, Ingestor, PeriodError,
    PeriodFuture, Point, PointValue, Schedule, Window, WriteOptions,
};

const DB: &str = "cq";
const SECOND: i64 = 1_000_000_000;

fn main() {
    let trials = vec![
        phases::trial("periods_run_once_across_a_restart_and_a_kill", || {
            let dir = tempfile::tempdir().unwrap();
            phases::run(
                dir.path(),
                &[
                    "create",
                    "resume",
                    "down",
                    "resume-crash",
                    "down",
                    "resume",
                    "check",
                ],
            );
        }),
        phases::trial("catching_up_is_bounded_and_the_rest_counted", || {
            let dir = tempfile::tempdir().unwrap();
            phases::run(dir.path(), &["create-bounded", "down", "bounded"]);
        }),
    ];
    phases::main(
        trials,
        |phase, dir| async move { child(&phase, &dir).await },
    )
}

/// Writes one point per period: its window, at the window's start.
struct PeriodWriter;

impl ContinuousQueryRunner for PeriodWriter {
    fn run_period<'a>(
        &'a self,
        ingestor: &'a Ingestor,
        query: &'a ContinuousQuery,
        window: Window,
    ) -> PeriodFuture<'a> {
        Box::pin(async move {
            let point = Point {
                measurement: "periods",
                tags: vec![("cq", query.name.as_str())],
                fields: vec![
                    ("start", PointValue::Integer(window.start)),
                    ("end", PointValue::Integer(window.end)),
                ],
                timestamp: Some(window.start),
            };
            let options = WriteOptions {
                durability: Durability::Fsync,
                ..WriteOptions::default()
            };
            ingestor
                .write_points(&query.database, "autogen", &[point], &options)
                .await
                .map_err(|err| PeriodError::Unavailable(err.to_string()))?;
            Ok(1)
        })
    }
}

fn every_second(name: &str) -> ContinuousQuery {
    ContinuousQuery {
        database: DB.to_owned(),
        name: name.to_owned(),
        statement: format!("a query named {name}"),
        schedule: Schedule {
            interval: Duration::from_secs(1),
            offset: Duration::ZERO,
            resample_every: None,
            resample_for: None,
        },
    }
}

/// The windows written, oldest first.
async fn windows(ing: &Ingestor) -> Vec<(i64, i64)> {
    ing.flush().await.unwrap();
    let sql = format!("SELECT start, end FROM {DB}.`periods.autogen` ORDER BY start, end");
    let text = String::from_utf8(ing.query_trusted(&sql, "TabSeparated").await.unwrap()).unwrap();
    text.lines()
        .map(|line| {
            let (start, end) = line.split_once('\t').unwrap();
            (start.parse().unwrap(), end.parse().unwrap())
        })
        .collect()
}

/// Waits until the query's last completed period is `at_least`.
async fn wait_for_period(ing: &Ingestor, at_least: i64) {
    for _ in 0..200 {
        let done = ing
            .stats()
            .continuous_queries
            .lock()
            .unwrap()
            .iter()
            .any(|s| s.last_period_ns >= at_least);
        if done {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("no period at {at_least} within 10 s");
}

async fn child(phase: &str, dir: &Path) {
    if phase == "down" {
        // The process is down for a few periods.
        tokio::time::sleep(Duration::from_millis(3_500)).await;
        return;
    }
    let mut config = IngestConfig::new(dir);
    config.continuous_queries.run_interval = Duration::from_millis(50);
    if phase.ends_with("bounded") {
        config.continuous_queries.max_catch_up_periods = 1;
    }
    let ing = Ingestor::open(config).await.unwrap();
    let now = chingest::clock::now_ns();
    let boundary = now - now.rem_euclid(SECOND);
    match phase {
        "create" | "create-bounded" => {
            ing.create_database(DB).await.unwrap();
            ing.create_continuous_query(every_second("each"))
                .await
                .unwrap();
            // Again, the same: no change; another of its name: refused.
            ing.create_continuous_query(every_second("each"))
                .await
                .unwrap();
            let mut other = every_second("each");
            other.statement = "another".into();
            assert!(matches!(
                ing.create_continuous_query(other).await,
                Err(chingest::Error::Conflict(_))
            ));
            let gone = every_second("gone");
            ing.create_continuous_query(gone).await.unwrap();
            assert!(ing.drop_continuous_query(DB, "gone").await.unwrap());
            assert!(!ing.drop_continuous_query(DB, "gone").await.unwrap());
            ing.run_continuous_queries(Arc::new(PeriodWriter)).unwrap();
            wait_for_period(&ing, boundary + 2 * SECOND).await;
        }
        "resume" | "resume-crash" => {
            assert_eq!(ing.continuous_queries(), vec![every_second("each")]);
            ing.run_continuous_queries(Arc::new(PeriodWriter)).unwrap();
            // The periods missed while down, then the next one.
            wait_for_period(&ing, boundary + SECOND).await;
            if phase == "resume-crash" {
                // Somewhere in a period, maybe between its write and mark.
                tokio::time::sleep(Duration::from_millis(1_300)).await;
                phases::crash();
            }
        }
        "check" => {
            let windows = windows(&ing).await;
            assert!(windows.len() >= 12, "{windows:?}");
            let mut repeated = 0;
            for pair in windows.windows(2) {
                let ((start, end), (next_start, next_end)) = (pair[0], pair[1]);
                assert_eq!(end - start, SECOND, "{windows:?}");
                if (next_start, next_end) == (start, end) {
                    repeated += 1;
                } else {
                    assert_eq!(next_start, end, "a period missed: {windows:?}");
                }
            }
            // A clean stop repeats none; the kill at most the one under way.
            assert!(repeated <= 1, "{windows:?}");
        }
        "bounded" => {
            ing.run_continuous_queries(Arc::new(PeriodWriter)).unwrap();
            wait_for_period(&ing, boundary).await;
            let skipped = ing.stats().continuous_queries.lock().unwrap()[0].periods_skipped;
            assert!(skipped >= 2, "{skipped} periods skipped");
            let windows = windows(&ing).await;
            let gaps = windows
                .windows(2)
                .filter(|pair| pair[1].0 != pair[0].1)
                .count();
            assert_eq!(gaps, 1, "the periods skipped: {windows:?}");
        }
        other => panic!("unknown phase {other}"),
    }
    ing.close().await.unwrap();
}
