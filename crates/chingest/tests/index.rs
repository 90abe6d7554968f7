//! The series index at scale and under churn, against the real engine:
//! after new series, older samples of known series, deletes, `DROP SERIES`, rows expired by a retention
//! policy and a restart, every selection, tag value and tag key list the
//! index answers is what the engine's series and fact tables say; a
//! million series are indexed within the memory the docs state, never
//! evicted, and the million-and-first is refused by the series limit. Each
//! test runs its phases in child processes on a data directory of its own
//! (see `phases`).

mod phases;

use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Float64Array, TimestampNanosecondArray};
use arrow::record_batch::RecordBatch;
use chingest::clock::now_ns;
use chingest::{
    ArrowTable, IngestConfig, Ingestor, PointFilter, TagMatcher, TagPredicate, TagTest, Tags,
    WriteOptions,
};

fn main() {
    let trials = vec![
        phases::trial("the_index_answers_as_the_engine_under_churn", || {
            phases::run(
                tempfile::tempdir().unwrap().path(),
                &["churn", "churn-reopened"],
            );
        }),
        phases::trial("a_million_series_are_indexed_within_their_bound", || {
            phases::run(tempfile::tempdir().unwrap().path(), &["million"]);
        }),
    ];
    phases::main(
        trials,
        |phase, dir| async move { child(&phase, &dir).await },
    )
}

const SECOND: i64 = 1_000_000_000;
const DB: &str = "ix";

async fn write(ing: &Ingestor, rp: &str, body: &str) {
    let out = ing
        .write_lp(DB, rp, body.as_bytes(), &WriteOptions::default())
        .await
        .unwrap();
    assert!(out.rejected.is_empty(), "{out:?}");
}

/// `count` series of `m` from series `first` on: `host` their own, `dc`
/// one of three, `rack` one of seven (absent on every fifth); field `x`
/// on all of them at `t` and `t + 10 s`, `y` on every other one at `t`.
fn series_lines(first: usize, count: usize, t: i64) -> String {
    let mut body = String::new();
    for i in first..first + count {
        let rack = match i % 5 {
            0 => String::new(),
            _ => format!(",rack=r{}", i % 7),
        };
        let tags = format!("m,dc=d{},host=h{i:04}{rack}", i % 3);
        body.push_str(&format!(
            "{tags} x={i} {t}\n{tags} x={i}.5 {}\n",
            t + 10 * SECOND
        ));
        if i % 2 == 0 {
            body.push_str(&format!("{tags} y={i}i {t}\n"));
        }
    }
    body
}

/// A matcher of the cases below, as the index takes it and as SQL over
/// the series table's `tags` says it.
struct Case {
    key: &'static str,
    value: &'static str,
    kind: Kind,
}

#[derive(Clone, Copy)]
enum Kind {
    Equal,
    NotEqual,
    Prefix,
}

impl Case {
    fn accepts(&self, v: &str) -> bool {
        match self.kind {
            Kind::Equal => v == self.value,
            Kind::NotEqual => v != self.value,
            Kind::Prefix => v.starts_with(self.value),
        }
    }

    fn sql(&self) -> String {
        let tag = format!("tags['{}']", self.key);
        match self.kind {
            Kind::Equal => format!("{tag} = '{}'", self.value),
            Kind::NotEqual => format!("{tag} != '{}'", self.value),
            Kind::Prefix => format!("startsWith({tag}, '{}')", self.value),
        }
    }
}

fn case(key: &'static str, kind: Kind, value: &'static str) -> Case {
    Case { key, value, kind }
}

/// The selections compared: none, values, absent values, predicates,
/// and their conjunctions (few series left and many).
fn cases() -> Vec<Vec<Case>> {
    use Kind::*;
    vec![
        vec![],
        vec![case("dc", Equal, "d1")],
        vec![case("host", Equal, "h0007")],
        vec![case("host", Equal, "nope")],
        vec![case("rack", Equal, "")],
        vec![case("rack", NotEqual, "r3")],
        vec![case("host", Prefix, "h01")],
        vec![case("dc", Equal, "d2"), case("rack", Prefix, "r")],
        vec![case("host", Equal, "h0010"), case("rack", NotEqual, "")],
        vec![case("dc", NotEqual, "d0"), case("host", Prefix, "h00")],
        vec![case("absent", Equal, "")],
    ]
}

/// Sorted values of the first column of `sql`'s answer (TSV).
async fn engine_list(ing: &Ingestor, sql: &str) -> Vec<String> {
    let out = ing.query_trusted(sql, "TSV").await.unwrap();
    let mut list: Vec<String> = String::from_utf8(out)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    list.sort();
    list
}

/// Waits until the index answers for `m` of `rp` (rebuilt after an edit).
async fn indexed(ing: &Ingestor, rp: &str) {
    let started = Instant::now();
    while ing.tag_keys((DB, rp, "m"), &[], None, None).is_none() {
        assert!(started.elapsed() < Duration::from_secs(30), "not rebuilt");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Every case's series (with `x`, in each range), tag values and tag keys,
/// from the index and from the engine, equal.
async fn compare(ing: &Ingestor, rp: &str, ranges: &[Option<(i64, i64)>]) {
    ing.flush().await.unwrap();
    indexed(ing, rp).await;
    let table = (DB, rp, "m");
    let facts = format!("{DB}.`m.{rp}`");
    for matchers in cases() {
        let tests: Vec<_> = matchers
            .iter()
            .map(|c| move |v: &str| c.accepts(v))
            .collect();
        let index_matchers: Vec<TagMatcher<'_>> = matchers
            .iter()
            .zip(&tests)
            .map(|(c, test)| TagMatcher {
                key: c.key,
                test: match c.kind {
                    Kind::Equal => TagTest::Equal(c.value),
                    _ => TagTest::Matches(test),
                },
            })
            .collect();
        let mut condition = vec!["measurement = 'm'".to_owned()];
        condition.extend(matchers.iter().map(Case::sql));
        let series = format!(
            "SELECT series_id, tags FROM {DB}._series FINAL WHERE {}",
            condition.join(" AND ")
        );
        let what = matchers
            .iter()
            .map(Case::sql)
            .collect::<Vec<_>>()
            .join(" AND ");
        for &range in ranges {
            let having = match range {
                Some((start, end)) => format!(
                    " HAVING min(time) <= fromUnixTimestamp64Nano(toInt64({end})) \
                     AND max(time) >= fromUnixTimestamp64Nano(toInt64({start}))"
                ),
                None => String::new(),
            };
            let with_x = format!(
                "SELECT series_id FROM {facts} WHERE x IS NOT NULL GROUP BY series_id{having}"
            );
            let selected = format!("SELECT * FROM ({series}) WHERE series_id IN ({with_x})");
            let mut ids: Vec<String> = ing
                .indexed_series(table, &index_matchers, "x", range)
                .unwrap()
                .iter()
                .map(|s| s.series_id.to_string())
                .collect();
            ids.sort();
            let engine_ids = engine_list(ing, &format!("SELECT series_id FROM ({selected})")).await;
            assert_eq!(ids, engine_ids, "series of {what} in {range:?}");
            for key in ["host", "rack", "dc"] {
                let values = ing
                    .tag_values(table, key, &index_matchers, Some("x"), range)
                    .unwrap();
                let engine_values = engine_list(
                    ing,
                    &format!("SELECT DISTINCT tags['{key}'] AS v FROM ({selected}) WHERE v != ''"),
                )
                .await;
                assert_eq!(values, engine_values, "{key} values of {what} in {range:?}");
            }
            let keys = ing
                .tag_keys(table, &index_matchers, Some("x"), range)
                .unwrap();
            let engine_keys = engine_list(
                ing,
                &format!("SELECT DISTINCT arrayJoin(mapKeys(tags)) FROM ({selected})"),
            )
            .await;
            assert_eq!(keys, engine_keys, "keys of {what} in {range:?}");
        }
        // Of every series, whatever its rows: the series table's (which is
        // the database's: of one retention policy's table only when every
        // series of the measurement was written there).
        if rp != "autogen" {
            continue;
        }
        let values = ing
            .tag_values(table, "rack", &index_matchers, None, None)
            .unwrap();
        let engine_values = engine_list(
            ing,
            &format!("SELECT DISTINCT tags['rack'] AS v FROM ({series}) WHERE v != ''"),
        )
        .await;
        assert_eq!(values, engine_values, "rack values of {what}, any rows");
    }
}

async fn child(phase: &str, dir: &std::path::Path) {
    let mut config = IngestConfig::new(dir);
    if phase == "million" {
        config.cardinality.max_series = 1_000_000;
        // Rows are not what is measured: the index is.
        config.last_values.recent_span = Duration::ZERO;
    }
    let ing = Ingestor::open(config).await.unwrap();
    // The rows' times: a fixed hour ago, so the reopened phase knows them.
    let base = (now_ns() - 3_600 * SECOND) / (3_600 * SECOND) * (3_600 * SECOND);
    let ranges = [
        None,
        Some((base, base)),
        Some((base + 5 * SECOND, base + 6 * SECOND)),
        Some((base + 60 * SECOND, base + 70 * SECOND)),
        Some((base - 25 * SECOND, base - 25 * SECOND)),
        Some((i64::MIN / 2, i64::MAX / 2)),
    ];
    match phase {
        "churn" => {
            ing.create_database(DB).await.unwrap();
            ing.create_retention_policy(DB, "short", Some(Duration::from_secs(3_600)))
                .await
                .unwrap();
            write(&ing, "autogen", &series_lines(0, 300, base)).await;
            compare(&ing, "autogen", &ranges).await;
            // New series, later.
            write(&ing, "autogen", &series_lines(300, 50, base + 60 * SECOND)).await;
            compare(&ing, "autogen", &ranges).await;
            // Older samples of known series: their first times move back as
            // they are written (no rebuild).
            write(&ing, "autogen", &series_lines(100, 20, base - 30 * SECOND)).await;
            compare(&ing, "autogen", &ranges).await;
            // A delete of the first rows of some series: their first times
            // move (the index is rebuilt from the engine).
            let deleted = PointFilter {
                measurement: Some("m".into()),
                tags: TagPredicate::Equals("dc".into(), "d2".into()),
                stop: Some(base + SECOND),
                ..PointFilter::all()
            };
            ing.delete(DB, &deleted).await.unwrap();
            compare(&ing, "autogen", &ranges).await;
            // Dropped series leave the index, tags and all.
            let dropped = PointFilter {
                measurement: Some("m".into()),
                tags: TagPredicate::Matches("host".into(), "^h00[0-4]".into()),
                ..PointFilter::all()
            };
            ing.drop_series(DB, &dropped).await.unwrap();
            compare(&ing, "autogen", &ranges).await;
            // One of them written again is new again.
            write(&ing, "autogen", &series_lines(3, 1, base + 60 * SECOND)).await;
            compare(&ing, "autogen", &ranges).await;
            // A retention policy of an hour: rows written now and rows
            // two hours old, which its TTL removes when the engine merges.
            let old = base - 2 * 3_600 * SECOND;
            write(&ing, "short", &series_lines(0, 40, old)).await;
            write(&ing, "short", &series_lines(20, 40, now_ns())).await;
            ing.flush().await.unwrap();
            ing.query_trusted(&format!("OPTIMIZE TABLE {DB}.`m.short` FINAL"), "TSV")
                .await
                .unwrap();
            let kept = engine_list(&ing, &format!("SELECT count() FROM {DB}.`m.short`")).await;
            assert_eq!(kept, ["100"], "the policy's TTL kept the young rows only");
            // The series of expired rows stay in the series table and in
            // the index, as in InfluxDB's; their times tell which have rows
            // in a range inside the policy's duration. (Over all time they
            // read as having rows until the index is next rebuilt: on open,
            // below, or by an edit; docs/promql.md.)
            compare(
                &ing,
                "short",
                &[Some((now_ns() - 60 * SECOND, i64::MAX / 2))],
            )
            .await;
        }
        "churn-reopened" => {
            // Rebuilt on open, from the engine alone.
            compare(&ing, "autogen", &ranges).await;
            compare(&ing, "short", &[None]).await;
        }
        "million" => million(&ing, base).await,
        other => panic!("unknown phase {other}"),
    }
    ing.close().await.unwrap();
}

/// The issue's shape: six labels a series, a pod and an instance each
/// their own, a million series written in batches of 50,000 as remote
/// write decodes them.
async fn million(ing: &Ingestor, base: i64) {
    const SERIES: usize = 1_000_000;
    const BATCH: usize = 50_000;
    let anon_before = rss_anon();
    let started = Instant::now();
    for first in (0..SERIES).step_by(BATCH) {
        write_fleet(ing, first, BATCH, base).await.unwrap();
    }
    let written = started.elapsed();
    ing.flush().await.unwrap();
    let stats = ing.stats();
    let series = stats.last_value_series.load(Relaxed) as usize;
    let bytes = stats.last_value_bytes.load(Relaxed) as usize;
    assert_eq!(series, SERIES, "every series indexed, none evicted");
    assert_eq!(stats.last_value_evictions.load(Relaxed), 0);
    let per_series = bytes / series;
    let grown = rss_anon().saturating_sub(anon_before) / SERIES;
    eprintln!(
        "a million series written in {:.1} s; the index counts {per_series} bytes a series, \
         the process grew by {grown} bytes a series (RssAnon)",
        written.as_secs_f64()
    );
    // docs/promql.md states ~250: the bound with room for the
    // allocator's rounding.
    assert!(per_series <= 320, "{per_series} bytes a series");
    // Lookups answer from the index at this size.
    let table = (DB, "autogen", "http_requests_total");
    let pod = TagMatcher {
        key: "pod",
        test: TagTest::Equal("pod-0777777"),
    };
    let found = ing.indexed_series(table, &[pod], "value", None).unwrap();
    assert_eq!(found.len(), 1);
    let namespace = TagMatcher {
        key: "namespace",
        test: TagTest::Equal("ns-07"),
    };
    let pods = ing
        .tag_values(table, "pod", &[namespace], Some("value"), None)
        .unwrap();
    assert_eq!(pods.len(), SERIES / 100);
    let keys = ing.tag_keys(table, &[], None, None).unwrap();
    assert_eq!(
        keys,
        ["code", "instance", "job", "namespace", "path", "pod"]
    );
    // The series limit: the million-and-first is refused, with its reason.
    let refused = write_fleet(ing, SERIES, 1, base).await.unwrap_err();
    assert!(
        refused.to_string().contains("series limit reached"),
        "{refused}"
    );
    assert_eq!(stats.last_value_series.load(Relaxed) as usize, SERIES);
}

/// Writes `count` series of the fleet from series `first` on, one sample
/// each.
async fn write_fleet(
    ing: &Ingestor,
    first: usize,
    count: usize,
    base: i64,
) -> chingest::Result<usize> {
    let labels: Vec<[String; 6]> = (first..first + count)
        .map(|i| {
            [
                ["200", "404", "500"][i % 3].to_owned(),
                format!(
                    "10.{}.{}.{}:8080",
                    (i >> 16) & 0xff,
                    (i >> 8) & 0xff,
                    i & 0xff
                ),
                format!("app-{:02}", i % 20),
                format!("ns-{:02}", i % 100),
                ["/api/v1/orders", "/api/v1/users"][i % 2].to_owned(),
                format!("pod-{i:07}"),
            ]
        })
        .collect();
    let keys = ["code", "instance", "job", "namespace", "path", "pod"];
    let tags: Vec<(&str, &str)> = labels
        .iter()
        .flat_map(|values| keys.iter().copied().zip(values.iter().map(String::as_str)))
        .collect();
    let counts = vec![(keys.len(), 1); count];
    let batch = RecordBatch::try_from_iter([
        (
            "time",
            Arc::new(TimestampNanosecondArray::from(vec![base; count])) as _,
        ),
        (
            "value",
            Arc::new(Float64Array::from_iter_values((0..count).map(|i| i as f64))) as _,
        ),
    ])
    .unwrap();
    let table = ArrowTable {
        measurement: "http_requests_total",
        batch: &batch,
        tags: Tags::Series {
            tags: &tags,
            counts: &counts,
        },
        duplicates: None,
    };
    ing.write_arrow_tables(DB, "autogen", &[table], &WriteOptions::default())
        .await
}

/// This process's private resident memory (`RssAnon`), bytes.
fn rss_anon() -> usize {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status
        .lines()
        .find_map(|line| line.strip_prefix("RssAnon:"))
        .unwrap();
    line.trim()
        .strip_suffix("kB")
        .unwrap()
        .trim()
        .parse::<usize>()
        .unwrap()
        * 1024
}
