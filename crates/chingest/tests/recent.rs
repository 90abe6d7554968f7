//! The in-memory index and recent samples against the real engine: after
//! writes (late, repeated, of every numeric type), deletes, corrections,
//! `DROP SERIES`, a restart, writes racing rebuilds, and the memory bound,
//! what `indexed_series` and `recent_samples` answer is what the engine
//! holds. Each test runs its phases in child processes on a data directory
//! of its own (see `phases`).

mod phases;

use std::path::Path;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

use chingest::clock::now_ns;
use chingest::{
    FieldValue, IndexedSeries, IngestConfig, Ingestor, PointFilter, TagMatcher, TagPredicate,
    TagTest, WriteOptions,
};

fn main() {
    let trials = vec![
        phases::trial("recent_samples_are_what_the_engine_holds", || {
            phases::run(
                tempfile::tempdir().unwrap().path(),
                &["edits", "edits-reopened"],
            );
        }),
        phases::trial("the_index_selects_as_the_engine_does", || {
            phases::run(tempfile::tempdir().unwrap().path(), &["index"]);
        }),
        phases::trial("writes_racing_rebuilds_keep_every_sample", || {
            phases::run(tempfile::tempdir().unwrap().path(), &["racing"]);
        }),
        phases::trial(
            "older_samples_come_through_the_chunk_cache_as_the_engine_holds_them",
            || {
                phases::run(tempfile::tempdir().unwrap().path(), &["older"]);
            },
        ),
        phases::trial("a_span_of_zero_keeps_no_sample", || {
            phases::run(tempfile::tempdir().unwrap().path(), &["off"]);
        }),
        phases::trial("past_the_memory_bound_a_shorter_span_is_kept", || {
            phases::run(
                tempfile::tempdir().unwrap().path(),
                &["bound", "bound-reopened"],
            );
        }),
    ];
    phases::main(
        trials,
        |phase, dir| async move { child(&phase, &dir).await },
    )
}

const SECOND: i64 = 1_000_000_000;

async fn write(ing: &Ingestor, db: &str, body: &str) {
    let out = ing
        .write_lp(db, "autogen", body.as_bytes(), &WriteOptions::default())
        .await
        .unwrap();
    assert!(out.rejected.is_empty(), "{out:?}");
}

/// Every series of `db`.`m` with a value of `field`, from the index,
/// waiting while it is rebuilt.
async fn all_series(ing: &Ingestor, db: &str, field: &str) -> Vec<IndexedSeries> {
    let started = Instant::now();
    loop {
        if let Some(mut found) = ing.indexed_series((db, "autogen", "m"), &[], field, None) {
            found.sort_by_key(|s| s.series_id);
            return found;
        }
        assert!(started.elapsed() < Duration::from_secs(20), "not rebuilt");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The recent samples of `field` in `db`.`m` from `from` on, rendered one
/// line per series with a sample: `id: time=value …`; waiting while the
/// table is rebuilt.
async fn recent(ing: &Ingestor, db: &str, field: &str, from: i64) -> String {
    let ids: Vec<u64> = all_series(ing, db, field)
        .await
        .iter()
        .map(|s| s.series_id)
        .collect();
    let started = Instant::now();
    loop {
        let table = (db, "autogen", "m");
        if let Some(recent) = ing.recent_samples(table, field, &ids, (from, i64::MAX)) {
            assert_eq!(recent.from_ns, from, "memory does not reach back to {from}");
            return rendered(&ids, recent.samples);
        }
        assert!(started.elapsed() < Duration::from_secs(20), "not rebuilt");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Each series' samples, one line per series with a sample: `id: time=value
/// …`.
fn rendered(ids: &[u64], samples: Vec<Vec<(i64, f64)>>) -> String {
    let lines: Vec<String> = ids
        .iter()
        .zip(samples)
        .filter(|(_, s)| !s.is_empty())
        .map(|(id, samples)| {
            let points: Vec<String> = samples.iter().map(|(t, v)| format!("{t}={v}")).collect();
            format!("{id}: {}", points.join(" "))
        })
        .collect();
    lines.join("\n")
}

/// What the engine holds of `field` in `db`.`m` from `from` on, rendered
/// like [`recent`]: of rows at one time the last inserted.
async fn engine(ing: &Ingestor, db: &str, field: &str, from: i64) -> String {
    ing.flush().await.unwrap();
    let sql = format!(
        "SELECT series_id, toUnixTimestamp64Nano(time), toFloat64({field}) FROM {db}.`m.autogen` \
         WHERE {field} IS NOT NULL AND time >= fromUnixTimestamp64Nano(toInt64({from})) \
         AND series_id IN (SELECT series_id FROM {db}._series FINAL) \
         ORDER BY series_id, time, _block_number, _block_offset"
    );
    let out = String::from_utf8(ing.query_trusted(&sql, "TSVRaw").await.unwrap()).unwrap();
    let mut rows: Vec<(u64, i64, String)> = Vec::new();
    for line in out.lines() {
        let cols: Vec<&str> = line.split('\t').collect();
        let row = (
            cols[0].parse().unwrap(),
            cols[1].parse().unwrap(),
            format!("{}", cols[2].parse::<f64>().unwrap()),
        );
        match rows.last_mut() {
            Some(last) if last.0 == row.0 && last.1 == row.1 => *last = row,
            _ => rows.push(row),
        }
    }
    let mut lines: Vec<String> = Vec::new();
    let mut current = None;
    for (id, time, value) in rows {
        if current != Some(id) {
            current = Some(id);
            lines.push(format!("{id}:"));
        }
        lines
            .last_mut()
            .unwrap()
            .push_str(&format!(" {time}={value}"));
    }
    lines.join("\n")
}

/// Memory and the engine agree on every numeric field from `from` on;
/// where memory says its samples are one row each, the engine holds no
/// two rows of a point.
async fn agree(ing: &Ingestor, db: &str, from: i64) {
    for field in ["x", "y", "u", "b"] {
        let memory = recent(ing, db, field, from).await;
        assert_eq!(memory, engine(ing, db, field, from).await, "field {field}");
        if one_row_each(ing, db, field, from) {
            let sql = format!(
                "SELECT count() = uniqExact(series_id, time) FROM {db}.`m.autogen` \
                 WHERE {field} IS NOT NULL AND time >= fromUnixTimestamp64Nano(toInt64({from}))"
            );
            let distinct = ing.query_trusted(&sql, "TSVRaw").await.unwrap();
            assert_eq!(distinct, b"1\n", "field {field}: two rows of a point");
        }
    }
}

/// Whether memory says its samples of `field` from `from` on are one row
/// each.
fn one_row_each(ing: &Ingestor, db: &str, field: &str, from: i64) -> bool {
    ing.recent_samples((db, "autogen", "m"), field, &[], (from, i64::MAX))
        .expect("memory holds the range")
        .one_row_each
}

/// Lines of `m` at `time` (ns) for hosts `hosts`, with a value `v` of
/// each numeric type.
fn lines(hosts: &[&str], time: i64, v: i64) -> String {
    hosts
        .iter()
        .map(|h| {
            format!(
                "m,host={h} x={v}.5,y={v}i,u={}u,b={},s=\"s{v}\" {time}\n",
                v.unsigned_abs(),
                v % 2 == 0
            )
        })
        .collect()
}

async fn child(phase: &str, dir: &Path) {
    let mut config = IngestConfig::new(dir);
    // A span the phases' times are placed against (9 h ago is older).
    config.last_values.recent_span = Duration::from_secs(8 * 3600);
    if phase.starts_with("bound") {
        config.last_values.recent_max_bytes = 64 << 10;
    }
    if phase == "off" {
        config.last_values.recent_span = Duration::ZERO;
    }
    let ing = Ingestor::open(config).await.unwrap();
    // An hour ago, on the second: the data of the edits phases.
    let base = (now_ns() - 3600 * SECOND) / SECOND * SECOND;
    let window = now_ns() - 5 * 3600 * SECOND;
    match phase {
        "edits" => edits(&ing, base, window).await,
        "edits-reopened" => {
            // Rebuilt from the engine on open, with a write racing it.
            write(&ing, "rs", &lines(&["a", "d"], now_ns(), 7)).await;
            agree(&ing, "rs", window).await;
            // The rebuild found the point the engine holds twice.
            assert!(!one_row_each(&ing, "rs", "x", window));
            assert!(ing.stats().last_value_rebuilds.load(Relaxed) >= 1);
        }
        "index" => index(&ing, base).await,
        "older" => older(&ing).await,
        "racing" => racing(&ing, base).await,
        "bound" => {
            // 5 series × 2,640 samples over 5.5 h of floats that are no
            // decimals (each XOR ~8 bytes compressed): ~110 KB, past the
            // 64 KiB bound.
            let start = now_ns() - 5 * 3600 * SECOND - 1800 * SECOND;
            let body: String = (0..2640)
                .map(|k| {
                    let hosts: String = (0..5)
                        .map(|h| {
                            let x = (k * 7919 + h * 104_729) as f64 / 7.0;
                            format!("m,host=h{h} x={x} {}\n", start + k * 7_500_000_000)
                        })
                        .collect();
                    hosts
                })
                .collect();
            write(&ing, "rs", &body).await;
            bounded(&ing).await;
            assert!(ing.stats().recent_shrinks.load(Relaxed) >= 1);
        }
        "bound-reopened" => bounded(&ing).await,
        "off" => {
            // A table made now, and one rebuilt: neither keeps samples,
            // while the index still answers.
            write(&ing, "rs", &lines(&["a", "b"], base, 1)).await;
            let ids: Vec<u64> = all_series(&ing, "rs", "x")
                .await
                .iter()
                .map(|s| s.series_id)
                .collect();
            assert_eq!(ids.len(), 2);
            let everything = (i64::MIN, i64::MAX);
            assert!(ing
                .recent_samples(("rs", "autogen", "m"), "x", &ids, everything)
                .is_none());
            assert_eq!(ing.stats().recent_samples.load(Relaxed), 0);
        }
        other => panic!("unknown phase {other}"),
    }
    ing.close().await.unwrap();
}

/// Under the 64 KiB bound: the last hour from memory, as the engine has
/// it; 4 h back is not answered from memory (a write past the bound keeps
/// 1.5 h, counting the room its lists grew; a rebuild 3 h).
async fn bounded(ing: &Ingestor) {
    let hour_ago = now_ns() - 3600 * SECOND;
    let memory = recent(ing, "rs", "x", hour_ago).await;
    assert_eq!(memory, engine(ing, "rs", "x", hour_ago).await);
    assert_eq!(memory.lines().count(), 5);
    let ids: Vec<u64> = all_series(ing, "rs", "x")
        .await
        .iter()
        .map(|s| s.series_id)
        .collect();
    // Asked from further back, memory answers from where it holds all.
    let earlier = (now_ns() - 4 * 3600 * SECOND, i64::MAX);
    let partial = ing
        .recent_samples(("rs", "autogen", "m"), "x", &ids, earlier)
        .unwrap();
    assert!(partial.from_ns > earlier.0 && partial.from_ns < hour_ago);
    let memory = recent(ing, "rs", "x", partial.from_ns).await;
    assert_eq!(memory, engine(ing, "rs", "x", partial.from_ns).await);
    assert!(ing.stats().recent_bytes.load(Relaxed) <= 64 << 10);
}

/// Samples older than memory's span come through the chunk cache as the
/// engine holds them (of a time written twice, the later write's value):
/// read from the engine the first time, from the cache the second.
async fn older(ing: &Ingestor) {
    let base = (now_ns() - 3 * 86_400 * SECOND) / SECOND * SECOND;
    let at = |k: i64| base + k * 15 * SECOND;
    let body: String = (0..100).map(|k| lines(&["a", "b"], at(k), k)).collect();
    write(ing, "old", &body).await;
    let again: String = (10..20).map(|k| lines(&["a"], at(k), 1000 + k)).collect();
    write(ing, "old", &again).await;
    let want = engine(ing, "old", "x", base).await;
    assert!(want.contains(&format!("{}=1010.5", at(10))), "{want}");
    let ids: Vec<u64> = all_series(ing, "old", "x")
        .await
        .iter()
        .map(|s| s.series_id)
        .collect();
    for read in ["from the engine", "from the cache"] {
        let older = ing
            .samples(("old", "autogen", "m"), "x", &ids, (base, now_ns()))
            .await
            .unwrap()
            .expect("memory knows the table");
        assert_eq!(older.from_ns, base, "{read}");
        assert!(!older.one_row_each, "{read}: a time has two rows");
        assert_eq!(rendered(&ids, older.samples), want, "{read}");
    }
    let stats = ing.stats();
    assert_eq!(stats.chunk_cache_misses.load(Relaxed), 2);
    assert_eq!(stats.chunk_cache_hits.load(Relaxed), 2);
}

async fn edits(ing: &Ingestor, base: i64, window: i64) {
    let body: String = (0..30)
        .map(|k| lines(&["a", "b", "c"], base + k * 10 * SECOND, k))
        .collect();
    write(ing, "rs", &body).await;
    agree(ing, "rs", window).await;

    // Late samples: before every other, between two, at a time already
    // written (the later write wins), and one older than the span (the
    // engine has it; memory is not asked about it).
    let late = [
        lines(&["a"], base - 5 * SECOND, -1),
        lines(&["a"], base + 15 * SECOND, 100),
        lines(&["b"], base + 20 * SECOND, 200),
        lines(&["c"], now_ns() - 9 * 3600 * SECOND, 300),
    ];
    for body in late {
        write(ing, "rs", &body).await;
    }
    agree(ing, "rs", window).await;
    // The point written twice: memory holds one sample, the table two rows.
    assert!(!one_row_each(ing, "rs", "x", window));
    assert!(one_row_each(ing, "rs", "x", base + 21 * SECOND));
    let ids: Vec<u64> = all_series(ing, "rs", "x")
        .await
        .iter()
        .map(|s| s.series_id)
        .collect();
    let too_old = (
        now_ns() - 10 * 3600 * SECOND,
        now_ns() - 9 * 3600 * SECOND + SECOND,
    );
    assert!(ing
        .recent_samples(("rs", "autogen", "m"), "x", &ids, too_old)
        .is_none());
    let misses = ing.stats().recent_misses.load(Relaxed);
    assert!(misses >= 1, "{misses}");

    // A delete of host a's newest points.
    let host = |h: &str| TagPredicate::Equals("host".into(), h.into());
    let filter = PointFilter {
        measurement: Some("m".into()),
        tags: host("a"),
        start: Some(base + 100 * SECOND),
        ..PointFilter::all()
    };
    ing.delete("rs", &filter).await.unwrap();
    agree(ing, "rs", window).await;

    // A correction.
    let filter = PointFilter {
        measurement: Some("m".into()),
        tags: host("b"),
        start: Some(base + 200 * SECOND),
        ..PointFilter::all()
    };
    ing.update("rs", &filter, "x", &FieldValue::Float(-1.0))
        .await
        .unwrap();
    agree(ing, "rs", window).await;

    // DROP SERIES: gone from the index and the samples.
    let filter = PointFilter {
        measurement: Some("m".into()),
        tags: host("c"),
        ..PointFilter::all()
    };
    ing.drop_series("rs", &filter).await.unwrap();
    agree(ing, "rs", window).await;
    assert_eq!(all_series(ing, "rs", "x").await.len(), 2);
    // Written again, it comes back.
    write(ing, "rs", &lines(&["c"], base + 500 * SECOND, 5)).await;
    agree(ing, "rs", window).await;
    assert_eq!(all_series(ing, "rs", "x").await.len(), 3);
}

/// The series the index selects for `matchers`, as `host` values.
fn hosts(ing: &Ingestor, matchers: &[TagMatcher<'_>], range: Option<(i64, i64)>) -> Vec<String> {
    let mut found: Vec<String> = ing
        .indexed_series(("ix", "autogen", "m"), matchers, "x", range)
        .unwrap()
        .into_iter()
        .map(|s| {
            let tags: Vec<String> = s.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
            tags.join(",")
        })
        .collect();
    found.sort();
    found
}

async fn index(ing: &Ingestor, base: i64) {
    write(
        ing,
        "ix",
        &format!(
            "m,host=a,dc=east x=1 {t0}\nm,host=a,dc=east x=2 {t1}\n\
             m,host=b,dc=west x=3 {t1}\nm,host=c x=4 {t2}\nm,host=d y=5i {t2}\n",
            t0 = base,
            t1 = base + 10 * SECOND,
            t2 = base + 20 * SECOND,
        ),
    )
    .await;
    all_series(ing, "ix", "x").await;
    let eq = |key, value| TagMatcher {
        key,
        test: TagTest::Equal(value),
    };
    let not_east = |v: &str| v != "east";
    let ab = |v: &str| v == "a" || v == "b";
    let m = |key, test| TagMatcher {
        key,
        test: TagTest::Matches(test),
    };
    // Only series with a value of x: d has none.
    assert_eq!(
        hosts(ing, &[], None),
        ["dc=east,host=a", "dc=west,host=b", "host=c"]
    );
    assert_eq!(hosts(ing, &[eq("dc", "west")], None), ["dc=west,host=b"]);
    // A series without the tag reads as "".
    assert_eq!(hosts(ing, &[eq("dc", "")], None), ["host=c"]);
    assert_eq!(
        hosts(ing, &[m("dc", &not_east)], None),
        ["dc=west,host=b", "host=c"]
    );
    assert_eq!(
        hosts(ing, &[m("host", &ab), m("dc", &not_east)], None),
        ["dc=west,host=b"]
    );
    // By time: a series is in a range between its first and newest value.
    let at = |t: i64| Some((base + t * SECOND, base + t * SECOND));
    assert_eq!(hosts(ing, &[], at(0)), ["dc=east,host=a"]);
    assert_eq!(hosts(ing, &[], at(20)), ["host=c"]);
    assert!(hosts(ing, &[], at(30)).is_empty());
    let a = ing
        .indexed_series(("ix", "autogen", "m"), &[eq("host", "a")], "x", None)
        .unwrap();
    assert_eq!((a[0].first_ns, a[0].last_ns), (base, base + 10 * SECOND));
    // Tag values, all or among selected series.
    let table = ("ix", "autogen", "m");
    assert_eq!(
        ing.tag_values(table, "host", &[], None, None).unwrap(),
        ["a", "b", "c", "d"]
    );
    // Of the series with a value of x: not d.
    assert_eq!(
        ing.tag_values(table, "host", &[], Some("x"), None).unwrap(),
        ["a", "b", "c"]
    );
    assert!(ing
        .tag_values(table, "host", &[], Some("nope"), None)
        .unwrap()
        .is_empty());
    assert_eq!(
        ing.tag_values(table, "dc", &[eq("host", "b")], None, None)
            .unwrap(),
        ["west"]
    );
    // Of the series with a value in a range; keys alike.
    assert_eq!(
        ing.tag_values(table, "host", &[], Some("x"), at(20))
            .unwrap(),
        ["c"]
    );
    assert_eq!(
        ing.tag_keys(table, &[], None, None).unwrap(),
        ["dc", "host"]
    );
    assert_eq!(
        ing.tag_keys(table, &[eq("dc", "")], Some("x"), None)
            .unwrap(),
        ["host"]
    );
    assert!(ing
        .tag_keys(table, &[], Some("x"), at(30))
        .unwrap()
        .is_empty());
    assert!(ing
        .indexed_series(("ix", "autogen", "nope"), &[], "x", None)
        .is_none());
    assert!(ing.stats().index_reads.load(Relaxed) > 0);
}

/// Writes from several tasks while deletes run (each a rebuild):
/// afterwards memory holds what the engine holds.
async fn racing(ing: &Ingestor, base: i64) {
    ing.create_database("race").await.unwrap();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let ing = ing.clone();
            tokio::spawn(async move {
                for k in 0..60 {
                    let hosts = ["h0", "h1", "h2", "h3", "h4"];
                    let body = lines(&hosts, base + (k * 4 + w) * SECOND, k);
                    write(&ing, "race", &body).await;
                }
            })
        })
        .collect();
    for round in 0..5 {
        tokio::time::sleep(Duration::from_millis(30)).await;
        let filter = PointFilter {
            measurement: Some("m".into()),
            tags: TagPredicate::Equals("host".into(), format!("h{round}")),
            start: Some(base + 20 * round * SECOND),
            ..PointFilter::all()
        };
        ing.delete("race", &filter).await.unwrap();
    }
    for writer in writers {
        writer.await.unwrap();
    }
    agree(ing, "race", base - SECOND).await;
}
