//! The last-value cache against the real engine: what writes leave in it,
//! what edits, a restart and the memory bound do to it. Each test runs its
//! phases in child processes on a data directory of its own (see
//! `phases`), so each can open the engine with its own configuration.

mod phases;

use std::path::Path;
use std::time::{Duration, Instant};

use chingest::{
    FieldValue, IngestConfig, Ingestor, LastField, LastSeries, LastValueConfig, PointFilter,
    TagPredicate, WriteOptions,
};

fn main() {
    let trials = vec![
        phases::trial(
            "the_newest_value_per_field_wins_and_survives_a_restart",
            || {
                phases::run(
                    tempfile::tempdir().unwrap().path(),
                    &["newest", "newest-reopened"],
                );
            },
        ),
        phases::trial("edits_rebuild_the_cache_from_the_engine", || {
            phases::run(tempfile::tempdir().unwrap().path(), &["edits"]);
        }),
        phases::trial("writes_during_rebuilds_are_not_lost", || {
            phases::run(tempfile::tempdir().unwrap().path(), &["racing"]);
        }),
        phases::trial(
            "a_measurement_past_the_memory_bound_is_evicted_whole",
            || {
                phases::run(
                    tempfile::tempdir().unwrap().path(),
                    &["bound", "bound-reopened"],
                );
            },
        ),
        phases::trial(
            "measurements_left_out_of_the_configuration_are_not_cached",
            || {
                phases::run(tempfile::tempdir().unwrap().path(), &["off"]);
            },
        ),
    ];
    phases::main(
        trials,
        |phase, dir| async move { child(&phase, &dir).await },
    )
}

async fn write(ing: &Ingestor, db: &str, body: &str) {
    let out = ing
        .write_lp(db, "autogen", body.as_bytes(), &WriteOptions::default())
        .await
        .unwrap();
    assert!(out.rejected.is_empty(), "{out:?}");
}

/// The cache of `db`.`m` as text: one line per series,
/// `tags: field=value@time …`.
fn render(series: &[LastSeries]) -> String {
    let mut lines: Vec<String> = series
        .iter()
        .map(|s| {
            let tags: Vec<String> = s.tags.iter().map(|(k, v)| format!("{k}={v}")).collect();
            let fields: Vec<String> = s
                .fields
                .iter()
                .map(|(name, last)| {
                    let value = match &last.value {
                        LastField::Float(v) => format!("{v}"),
                        LastField::Integer(v) => format!("{v}i"),
                        LastField::UInteger(v) => format!("{v}u"),
                        LastField::String(v) => format!("{v:?}"),
                        LastField::Boolean(v) => format!("{v}"),
                    };
                    format!("{name}={value}@{}", last.time_ns)
                })
                .collect();
            format!("{}: {}", tags.join(","), fields.join(" "))
        })
        .collect();
    lines.sort();
    lines.join("\n")
}

fn all(_: &[(&str, &str)]) -> bool {
    true
}

/// The cache of `db`.`m`, waiting while it is being rebuilt.
async fn cached(ing: &Ingestor, db: &str, m: &str) -> String {
    let started = Instant::now();
    loop {
        if let Some(series) = ing.last_values((db, "autogen", m), all) {
            return render(&series);
        }
        assert!(
            started.elapsed() < Duration::from_secs(20),
            "{db}.{m} not rebuilt"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What the engine says the cache should hold (the same query shape the
/// rebuild uses, written out independently): rendered like [`render`].
async fn from_engine(ing: &Ingestor, db: &str, m: &str, fields: &[&str]) -> String {
    let mut lines = Vec::new();
    let sql = format!(
        "SELECT series_id, arrayStringConcat(arrayMap((k, v) -> concat(k, '=', v), \
         mapKeys(tags), mapValues(tags)), ',') FROM {db}._series FINAL WHERE measurement = '{m}'"
    );
    let series = String::from_utf8(ing.query_trusted(&sql, "TSVRaw").await.unwrap()).unwrap();
    for line in series.lines() {
        let (id, tags) = line.split_once('\t').unwrap();
        let mut parts = Vec::new();
        for field in fields {
            let sql = format!(
                "SELECT toString(argMax({field}, (time, _block_number, _block_offset))), \
                 toUnixTimestamp64Nano(max(time)), toTypeName(any({field})) \
                 FROM {db}.`{m}.autogen` WHERE series_id = {id} AND {field} IS NOT NULL"
            );
            let out = String::from_utf8(ing.query_trusted(&sql, "TSVRaw").await.unwrap()).unwrap();
            let cols: Vec<&str> = out.trim_end().split('\t').collect();
            if cols[1] == "0" {
                continue;
            }
            let value = match cols[2] {
                "Nullable(Int64)" => format!("{}i", cols[0]),
                "Nullable(String)" => format!("{:?}", cols[0]),
                _ => cols[0].to_owned(),
            };
            parts.push(format!("{field}={value}@{}", cols[1]));
        }
        if !parts.is_empty() {
            lines.push(format!("{tags}: {}", parts.join(" ")));
        }
    }
    lines.sort();
    lines.join("\n")
}

const NEWEST: &str = "\
host=a: s=\"str\"@90 x=1@100 y=20i@100
host=b: x=5@10
host=c: x=2@5";

async fn child(phase: &str, dir: &Path) {
    let mut config = IngestConfig::new(dir);
    match phase {
        "bound" | "bound-reopened" => config.last_values.max_bytes = 64 << 10,
        "off" => {
            config.last_values = LastValueConfig {
                measurements: vec!["lv.kept".to_owned()],
                ..LastValueConfig::default()
            }
        }
        _ => {}
    }
    let ing = Ingestor::open(config).await.unwrap();
    match phase {
        "newest" => {
            write(&ing, "lv", "m,host=a x=1,y=10i 100\nm,host=b x=5 10\n").await;
            // Older: does not regress x.
            write(&ing, "lv", "m,host=a x=2 50\n").await;
            // The same time again: the later write wins; x, absent, stays.
            write(&ing, "lv", "m,host=a y=20i 100\n").await;
            write(&ing, "lv", "m,host=a s=\"str\" 90\n").await;
            // Equal times in one write: the later line wins.
            write(&ing, "lv", "m,host=c x=1 5\nm,host=c x=2 5\n").await;
            assert_eq!(cached(&ing, "lv", "m").await, NEWEST);
            // A tag filter sees only its series, fields sorted by name.
            let a = ing
                .last_values(("lv", "autogen", "m"), |tags| {
                    tags.iter().any(|(k, v)| *k == "host" && *v == "a")
                })
                .unwrap();
            assert_eq!(a.len(), 1);
            let names: Vec<&str> = a[0].fields.iter().map(|(n, _)| n.as_str()).collect();
            assert_eq!(names, ["s", "x", "y"]);
            assert!(ing.last_values(("lv", "autogen", "nope"), all).is_none());
            assert!(ing.last_values(("lv", "other_rp", "m"), all).is_none());
            ing.flush().await.unwrap();
            assert_eq!(from_engine(&ing, "lv", "m", &["s", "x", "y"]).await, NEWEST);
        }
        "newest-reopened" => {
            // Written before the rebuild from the engine may have finished:
            // a known series without its tags in the write, and a new one.
            write(&ing, "lv", "m,host=b x=6 11\nm,host=d x=7 1\n").await;
            assert_eq!(
                cached(&ing, "lv", "m").await,
                "host=a: s=\"str\"@90 x=1@100 y=20i@100\nhost=b: x=6@11\nhost=c: x=2@5\nhost=d: x=7@1"
            );
            assert!(
                ing.stats()
                    .last_value_rebuilds
                    .load(std::sync::atomic::Ordering::Relaxed)
                    >= 1
            );
            // The engine agrees.
            ing.flush().await.unwrap();
            assert_eq!(
                cached(&ing, "lv", "m").await,
                from_engine(&ing, "lv", "m", &["s", "x", "y"]).await
            );
        }
        "edits" => edits(&ing).await,
        "racing" => racing(&ing).await,
        "bound" => {
            write(&ing, "lv", "small,host=a x=1 1\n").await;
            assert_eq!(cached(&ing, "lv", "small").await, "host=a: x=1@1");
            // ~200 bytes a series: 1,000 of them pass 64 KiB.
            let body: String = (0..1000)
                .map(|i| format!("big,host=h{i},rack=r{i} x={i},y={i}i 1\n"))
                .collect();
            write(&ing, "lv", &body).await;
            assert!(ing.last_values(("lv", "autogen", "big"), all).is_none());
            // Evicted whole: later writes do not bring part of it back.
            write(&ing, "lv", "big,host=h1,rack=r1 x=2 2\n").await;
            assert!(ing.last_values(("lv", "autogen", "big"), all).is_none());
            assert_eq!(cached(&ing, "lv", "small").await, "host=a: x=1@1");
            let stats = ing.stats();
            let relaxed = std::sync::atomic::Ordering::Relaxed;
            assert_eq!(stats.last_value_evictions.load(relaxed), 1);
            assert!(stats.last_value_bytes.load(relaxed) < 64 << 10);
            assert_eq!(stats.last_value_series.load(relaxed), 1);
        }
        "bound-reopened" => {
            // Rebuilt on open: the small one again, the large one evicted
            // before its rows are read.
            assert_eq!(cached(&ing, "lv", "small").await, "host=a: x=1@1");
            let relaxed = std::sync::atomic::Ordering::Relaxed;
            let started = Instant::now();
            while ing.stats().last_value_evictions.load(relaxed) == 0 {
                assert!(started.elapsed() < Duration::from_secs(20), "not evicted");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            assert!(ing.last_values(("lv", "autogen", "big"), all).is_none());
            assert_eq!(ing.stats().last_value_series.load(relaxed), 1);
        }
        "off" => {
            write(&ing, "lv", "kept,host=a x=1 1\nskipped,host=a x=1 1\n").await;
            assert_eq!(cached(&ing, "lv", "kept").await, "host=a: x=1@1");
            assert!(ing.last_values(("lv", "autogen", "skipped"), all).is_none());
        }
        other => panic!("unknown phase {other}"),
    }
    ing.close().await.unwrap();
}

async fn edits(ing: &Ingestor) {
    let body: String = (1..=10)
        .map(|t| format!("m,host=a x={t}.5,y={t}i {t}\nm,host=b x={t}.5 {t}\nm,host=c x=0 {t}\n"))
        .collect();
    write(ing, "ed", &body).await;
    write(ing, "ed", "other,host=a v=1 1\n").await;
    let fields = ["x", "y"];
    let check = |expected: &'static str| async move {
        let got = cached(ing, "ed", "m").await;
        assert_eq!(got, expected);
        ing.flush().await.unwrap();
        assert_eq!(from_engine(ing, "ed", "m", &fields).await, expected);
    };
    check("host=a: x=10.5@10 y=10i@10\nhost=b: x=10.5@10\nhost=c: x=0@10").await;

    // A delete of host a's newest points: back to its older values.
    let host = |h: &str| TagPredicate::Equals("host".into(), h.into());
    let filter = PointFilter {
        measurement: Some("m".into()),
        tags: host("a"),
        start: Some(8),
        ..PointFilter::all()
    };
    ing.delete("ed", &filter).await.unwrap();
    // Never the deleted values, not even right after.
    if let Some(now) = ing.last_values(("ed", "autogen", "m"), all) {
        assert!(!render(&now).contains("@10 y"), "{}", render(&now));
    }
    check("host=a: x=7.5@7 y=7i@7\nhost=b: x=10.5@10\nhost=c: x=0@10").await;

    // A correction.
    let filter = PointFilter {
        measurement: Some("m".into()),
        tags: host("b"),
        start: Some(9),
        ..PointFilter::all()
    };
    ing.update("ed", &filter, "x", &FieldValue::Float(-1.0))
        .await
        .unwrap();
    check("host=a: x=7.5@7 y=7i@7\nhost=b: x=-1@10\nhost=c: x=0@10").await;

    // DROP SERIES.
    let filter = PointFilter {
        measurement: Some("m".into()),
        tags: host("c"),
        ..PointFilter::all()
    };
    ing.drop_series("ed", &filter).await.unwrap();
    check("host=a: x=7.5@7 y=7i@7\nhost=b: x=-1@10").await;
    // Written again, it comes back.
    write(ing, "ed", "m,host=c x=3 20\n").await;
    check("host=a: x=7.5@7 y=7i@7\nhost=b: x=-1@10\nhost=c: x=3@20").await;

    // DROP MEASUREMENT; the other measurement keeps its values.
    let filter = PointFilter {
        measurement: Some("m".into()),
        ..PointFilter::all()
    };
    ing.drop_series("ed", &filter).await.unwrap();
    check("").await;
    assert_eq!(cached(ing, "ed", "other").await, "host=a: v=1@1");
}

/// Writes from several tasks while deletes run: afterwards the cache is
/// what the engine holds.
async fn racing(ing: &Ingestor) {
    // The deletes race the writes, not the database's creation (which
    // syncs the engine's catalog and may outlast the first sleep).
    ing.create_database("race").await.unwrap();
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let ing = ing.clone();
            tokio::spawn(async move {
                for t in 1..=60 {
                    let body: String = (0..5)
                        .map(|h| format!("m,host=h{h},w=w{w} x={t},n={}i {t}\n", t * 10 + w))
                        .collect();
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
            start: Some(5 * round as i64),
            ..PointFilter::all()
        };
        ing.delete("race", &filter).await.unwrap();
    }
    for writer in writers {
        writer.await.unwrap();
    }
    let got = cached(ing, "race", "m").await;
    ing.flush().await.unwrap();
    assert_eq!(got, from_engine(ing, "race", "m", &["n", "x"]).await);
    assert_eq!(got.lines().count(), 20);
}
