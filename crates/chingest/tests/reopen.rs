//! Data, schemas and known series survive closing the engine and opening the
//! same data directory in a new process (each phase is a child process: see
//! `phases`).

mod phases;

use std::path::Path;
use std::sync::Arc;

use chingest::arrow::array::{ArrayRef, Int64Array, RecordBatch, StringArray};
use chingest::{
    CardinalityLimits, Durability, FieldValue, IngestConfig, Ingestor, PointFilter, TagPredicate,
    WriteOptions,
};

fn main() {
    let trials = vec![
        phases::trial("data_survives_close_and_reopen_in_a_new_process", || {
            phases::run(tempfile::tempdir().unwrap().path(), &["write", "reopen"]);
        }),
        phases::trial(
            "tables_of_the_older_buffered_layout_are_renamed_on_open",
            || {
                phases::run(tempfile::tempdir().unwrap().path(), &["legacy", "migrated"]);
            },
        ),
        phases::trial(
            "deletes_and_updates_hold_across_merges_and_a_restart",
            || {
                phases::run(tempfile::tempdir().unwrap().path(), &["edit", "edited"]);
            },
        ),
        phases::trial(
            "cardinality_limits_hold_for_concurrent_writers_and_across_a_restart",
            || {
                phases::run(
                    tempfile::tempdir().unwrap().path(),
                    &["cardinality", "cardinality-reopened"],
                );
            },
        ),
        phases::trial("writes_beyond_the_memory_budget_are_refused", || {
            phases::run(tempfile::tempdir().unwrap().path(), &["overload"]);
        }),
    ];
    phases::main(
        trials,
        |phase, dir| async move { child(&phase, &dir).await },
    )
}

async fn query(ing: &Ingestor, sql: &str) -> String {
    String::from_utf8(ing.query_trusted(sql, "TabSeparated").await.unwrap()).unwrap()
}

/// What the `edit` phase leaves: host a of `m` without t = 3..5, host b's
/// `f` at -1.25 from t = 8, and `other` without its only series.
async fn assert_edited(ing: &Ingestor) {
    let m = "SELECT host, groupArray(v), groupArray(f) FROM \
             (SELECT host, v, f FROM ed.m ORDER BY time) GROUP BY host ORDER BY host";
    assert_eq!(
        query(ing, m).await,
        "a\t[1,2,6,7,8,9,10]\t[1.5,2.5,6.5,7.5,8.5,9.5,10.5]\n\
         b\t[1,2,3,4,5,6,7,8,9,10]\t[1.5,2.5,3.5,4.5,5.5,6.5,7.5,-1.25,-1.25,-1.25]\n"
    );
    assert_eq!(
        query(ing, "SELECT count() FROM ed.`other.autogen`").await,
        "0\n"
    );
    let series = "SELECT measurement, tags['host'] FROM ed._series FINAL ORDER BY ALL";
    assert_eq!(query(ing, series).await, "m\ta\nm\tb\n");
}

async fn child(phase: &str, dir: &Path) {
    let mut config = IngestConfig::new(dir);
    if phase == "write" {
        // Exercises concurrent flushes of one table.
        config.flush.concurrency = 2;
    }
    if phase.starts_with("cardinality") {
        config.cardinality = CardinalityLimits {
            max_series: 6,
            max_values_per_tag: 4,
        };
    }
    if phase == "overload" {
        config.flush.max_bytes = 256 << 10;
        config.max_buffered_bytes = 512 << 10;
        config.overload_wait = std::time::Duration::from_millis(50);
    }
    let ing = Ingestor::open(config).await.unwrap();
    // Writes are answered once logged; the later phases read what they
    // wrote at once, so they wait for their rows to be queryable.
    let options = WriteOptions {
        durability: match phase {
            "write" => Durability::Fsync,
            _ => Durability::Visible,
        },
        ..WriteOptions::default()
    };
    match phase {
        "write" => {
            // Logged, then inserted by close() at the latest.
            let body = b"m,host=a v=1i,f=0.5 1\nm,host=b v=2i 2\n";
            let out = ing
                .write_lp("keep", "autogen", body, &options)
                .await
                .unwrap();
            assert_eq!(out.accepted, 2);
            // Now: the policy's 7-day TTL must not expire it.
            let other = b"other s=\"x\"\n";
            ing.write_lp("keep", "weekly", other, &options)
                .await
                .unwrap();
            let week = std::time::Duration::from_secs(7 * 86_400);
            ing.create_retention_policy("keep", "weekly", Some(week))
                .await
                .unwrap();
            // Many concurrent writers to one table, two flushes at a time.
            let writers: Vec<_> = (0..8)
                .map(|w| {
                    let ing = ing.clone();
                    tokio::spawn(async move {
                        for i in 0..20 {
                            let body = format!("busy,w={w} v={i}i {}\n", w * 100 + i);
                            let options = WriteOptions::default();
                            ing.write_lp("keep", "autogen", body.as_bytes(), &options)
                                .await
                                .unwrap();
                        }
                    })
                })
                .collect();
            for writer in writers {
                writer.await.unwrap();
            }
        }
        "reopen" => {
            let count = query(&ing, "SELECT count(), sum(v) FROM keep.`m.autogen`").await;
            assert_eq!(count, "2\t3\n");
            let other = query(&ing, "SELECT s FROM keep.`other.weekly`").await;
            assert_eq!(other, "x\n");
            let busy = query(&ing, "SELECT count(), sum(v) FROM keep.busy").await;
            assert_eq!(busy, "160\t1520\n");
            // Retention policies came back with their durations.
            let week = std::time::Duration::from_secs(7 * 86_400);
            assert_eq!(
                ing.retention_policies("keep"),
                vec![
                    ("autogen".to_owned(), None),
                    ("weekly".to_owned(), Some(week))
                ]
            );
            // The schema came back: a conflicting type is refused...
            let body = b"m,host=a v=1.5 4\nm,host=a v=3i 5\n";
            let out = ing
                .write_lp("keep", "autogen", body, &options)
                .await
                .unwrap();
            assert_eq!(out.accepted, 1, "{out:?}");
            assert!(out.rejected[0].reason.contains("integer"), "{out:?}");
            // ...and known series are not stored twice.
            let sql = "SELECT count() FROM keep._series WHERE measurement = 'm'";
            assert_eq!(query(&ing, sql).await, "2\n");
            // Tag keys came back too: a new one extends the view, old ones stay.
            let body = b"m,host=c,dc=x v=7i 6\n";
            ing.write_lp("keep", "autogen", body, &options)
                .await
                .unwrap();
            assert_eq!(
                query(&ing, "SELECT host, dc, v FROM keep.m ORDER BY time").await,
                "a\t\t1\nb\t\t2\na\t\t3\nc\tx\t7\n"
            );
        }
        "overload" => {
            // One write bigger than the whole budget (40k rows × 3 columns
            // of 8 bytes) is refused at once.
            let big: String = (0..40_000).map(|i| format!("m,k=v v={i}i {i}\n")).collect();
            let err = ing
                .write_lp("limits", "autogen", big.as_bytes(), &options)
                .await;
            assert!(
                matches!(err, Err(chingest::Error::Overloaded { .. })),
                "{err:?}"
            );
            // Writes that fit go through, and nothing of the refused one was stored.
            let out = ing
                .write_lp("limits", "autogen", b"m,k=v v=1i 1\n", &options)
                .await
                .unwrap();
            assert_eq!(out.accepted, 1);
            assert_eq!(
                query(&ing, "SELECT count() FROM limits.`m.autogen`").await,
                "1\n"
            );
            // With the whole budget held by the caller (a request body it has
            // parsed), the rows cannot reserve room of their own: refused...
            let body: String = (2..1_002).map(|i| format!("m,k=v v={i}i {i}\n")).collect();
            let held = ing.reserve_memory(512 << 10).await.unwrap();
            let prepared = ing
                .prepare_lp("limits", "autogen", body.as_bytes(), &options)
                .await
                .unwrap();
            let err = ing.commit(prepared, options.durability).await;
            assert!(
                matches!(err, Err(chingest::Error::Overloaded { .. })),
                "{err:?}"
            );
            // ...unless the caller hands its reservation to them; what they
            // do not need goes back to the budget once they are logged.
            let mut prepared = ing
                .prepare_lp("limits", "autogen", body.as_bytes(), &options)
                .await
                .unwrap();
            prepared.hold(held);
            ing.commit(prepared, options.durability).await.unwrap();
            assert!(ing.buffered_bytes() < 512 << 10, "{}", ing.buffered_bytes());
            assert_eq!(
                query(&ing, "SELECT count() FROM limits.`m.autogen`").await,
                "1001\n"
            );
        }
        "legacy" => {
            // Two databases turned into what older versions left: `old`
            // whole (a Buffer named like the fact table in front of
            // `m.autogen.mergetree`, and the LEFT JOIN view), `half` as an
            // open that crashed between dropping the Buffer and renaming.
            for db in ["old", "half"] {
                let body = b"m,host=a v=1i 1\nm,host=b v=2i 2\n";
                ing.write_lp(db, "autogen", body, &options).await.unwrap();
                let legacy = format!("RENAME TABLE {db}.`m.autogen` TO {db}.`m.autogen.mergetree`");
                query(&ing, &legacy).await;
                // Their columns had no codecs.
                let plain = format!(
                    "ALTER TABLE {db}.`m.autogen.mergetree` MODIFY COLUMN time REMOVE CODEC, \
                     MODIFY COLUMN series_id REMOVE CODEC, MODIFY COLUMN v REMOVE CODEC"
                );
                query(&ing, &plain).await;
                // Nor block numbers, for patch parts.
                for table in ["`m.autogen.mergetree`", "_series"] {
                    let unpatchable = format!(
                        "ALTER TABLE {db}.{table} RESET SETTING enable_block_number_column, \
                         enable_block_offset_column"
                    );
                    query(&ing, &unpatchable).await;
                }
            }
            let patchable = "SELECT count() FROM system.tables WHERE database IN ('old', 'half') \
                             AND position(engine_full, 'enable_block_number_column') > 0";
            assert_eq!(query(&ing, patchable).await, "0\n");
            query(
                &ing,
                "CREATE TABLE old.`m.autogen` AS old.`m.autogen.mergetree` ENGINE = \
                 Buffer('old', 'm.autogen.mergetree', 1, 1, 5, 100000, 1000000, 16777216, 268435456)",
            )
            .await;
            query(
                &ing,
                "CREATE OR REPLACE VIEW old.m AS SELECT f.time AS time, s.tags['host'] AS host, \
                 f.v AS v FROM old.`m.autogen` AS f LEFT JOIN (SELECT series_id, any(tags) AS tags \
                 FROM old._series WHERE measurement = 'm' GROUP BY series_id) AS s USING series_id",
            )
            .await;
        }
        "migrated" => {
            let tables = "SELECT database, name, engine, comment FROM system.tables \
                          WHERE database IN ('old', 'half') AND name LIKE 'm%' ORDER BY ALL";
            assert_eq!(
                query(&ing, tables).await,
                "half\tm\tView\tchingest view 2\n\
                 half\tm.autogen\tMergeTree\t\n\
                 old\tm\tView\tchingest view 2\n\
                 old\tm.autogen\tMergeTree\t\n"
            );
            let codecs = "SELECT database, name, compression_codec FROM system.columns \
                          WHERE database IN ('old', 'half') AND table = 'm.autogen' ORDER BY ALL";
            assert_eq!(
                query(&ing, codecs).await,
                "half\tseries_id\tCODEC(ZSTD(1))\n\
                 half\ttime\tCODEC(DoubleDelta, ZSTD(1))\n\
                 half\tv\tCODEC(T64, ZSTD(1))\n\
                 old\tseries_id\tCODEC(ZSTD(1))\n\
                 old\ttime\tCODEC(DoubleDelta, ZSTD(1))\n\
                 old\tv\tCODEC(T64, ZSTD(1))\n"
            );
            let patchable = "SELECT database, name FROM system.tables \
                             WHERE database IN ('old', 'half') AND endsWith(engine, 'MergeTree') \
                             AND name != '_retention_policies' \
                             AND position(engine_full, 'enable_block_offset_column = 1') > 0 \
                             ORDER BY ALL";
            assert_eq!(
                query(&ing, patchable).await,
                "half\t_series\nhalf\tm.autogen\nold\t_series\nold\tm.autogen\n"
            );
            for db in ["old", "half"] {
                // The rows are kept, and new ones go to the renamed table.
                let body = b"m,host=c v=3i 3\n";
                ing.write_lp(db, "autogen", body, &options).await.unwrap();
                // Series rows stored twice (as a replay can leave them until
                // the engine merges) do not repeat rows in the view.
                let again = format!("INSERT INTO {db}._series SELECT * FROM {db}._series");
                query(&ing, &again).await;
                assert_eq!(
                    query(&ing, &format!("SELECT host, v FROM {db}.m ORDER BY time")).await,
                    "a\t1\nb\t2\nc\t3\n",
                    "{db}"
                );
            }
        }
        "edit" => {
            // Two hosts, ten points each (t = 1..=10), and a second measurement.
            let mut body = String::new();
            for t in 1..=10 {
                for host in ["a", "b"] {
                    body.push_str(&format!("m,host={host} v={t}i,f={t}.5 {t}\n"));
                }
                body.push_str(&format!("other,host=a v={t}i {t}\n"));
            }
            // Fsync: the edits must see rows still only in the log.
            let fsync = WriteOptions::default();
            ing.write_lp("ed", "autogen", body.as_bytes(), &fsync)
                .await
                .unwrap();
            // Delete host a's points in [3, 6).
            let host_a = TagPredicate::Equals("host".into(), "a".into());
            let filter = PointFilter {
                measurement: Some("m".into()),
                tags: host_a.clone(),
                start: Some(3),
                stop: Some(6),
                ..PointFilter::all()
            };
            assert_eq!(ing.delete("ed", &filter).await.unwrap(), 1);
            // Correct host b's f from t = 8 on.
            let filter = PointFilter {
                measurement: Some("m".into()),
                tags: TagPredicate::Equals("host".into(), "b".into()),
                start: Some(8),
                ..PointFilter::all()
            };
            let tables = ing
                .update("ed", &filter, "f", &FieldValue::Float(-1.25))
                .await
                .unwrap();
            assert_eq!(tables, 1);
            // Values that do not fit, fields that do not exist, no measurement.
            for (field, value) in [
                ("v", FieldValue::Float(0.5)),
                ("f", FieldValue::String("x".into())),
                ("nope", FieldValue::Integer(1)),
            ] {
                let err = ing.update("ed", &filter, field, &value).await.unwrap_err();
                assert!(matches!(err, chingest::Error::InvalidEdit(_)), "{err:?}");
            }
            let everywhere = PointFilter {
                measurement: None,
                ..filter.clone()
            };
            let err = ing
                .update("ed", &everywhere, "f", &FieldValue::Float(0.0))
                .await
                .unwrap_err();
            assert!(matches!(err, chingest::Error::InvalidEdit(_)), "{err:?}");
            // Drop host a of `other`: its points and its series row.
            let filter = PointFilter {
                measurement: Some("other".into()),
                tags: host_a,
                ..PointFilter::all()
            };
            ing.drop_series("ed", &filter).await.unwrap();
            assert_edited(&ing).await;
            let timed = PointFilter {
                start: Some(1),
                ..filter
            };
            let err = ing.drop_series("ed", &timed).await.unwrap_err();
            assert!(matches!(err, chingest::Error::InvalidEdit(_)), "{err:?}");
        }
        "edited" => {
            assert_edited(&ing).await;
            // Merged into whole parts, the edits are still what queries see.
            for table in ["`m.autogen`", "`other.autogen`", "_series"] {
                query(&ing, &format!("OPTIMIZE TABLE ed.{table} FINAL")).await;
            }
            assert_edited(&ing).await;
            // A dropped series written again comes back, with its series row.
            let body = b"other,host=a v=99i 11\n";
            ing.write_lp("ed", "autogen", body, &options).await.unwrap();
            assert_eq!(query(&ing, "SELECT host, v FROM ed.other").await, "a\t99\n");
        }
        "cardinality" => {
            // Five hosts: the fifth value of `host` is one too many.
            let body: String = (1..=5).map(|i| format!("m,host=h{i} v=1i {i}\n")).collect();
            let out = ing
                .write_lp("card", "autogen", body.as_bytes(), &options)
                .await
                .unwrap();
            assert_eq!(out.accepted, 4, "{out:?}");
            assert_eq!(out.rejected[0].line, 5);
            assert!(
                out.rejected[0]
                    .reason
                    .contains("tag \"host\" of measurement \"m\" has 4 values (limit 4)"),
                "{out:?}"
            );
            // Three racks on top of four series: the third is one too many.
            let body = "n,rack=r1 v=1i 1\nm,host=h1 v=2i 2\nn,rack=r2 v=1i 3\nn,rack=r3 v=1i 4\n";
            let out = ing
                .write_lp("card", "autogen", body.as_bytes(), &options)
                .await
                .unwrap();
            assert_eq!(out.accepted, 3, "{out:?}");
            assert_eq!(out.rejected[0].line, 4);
            assert!(
                out.rejected[0].reason.contains("has 6 series (limit 6)"),
                "{out:?}"
            );
            assert_eq!(
                ing.stats()
                    .lines_refused_by_limits
                    .load(std::sync::atomic::Ordering::Relaxed),
                2
            );
            // Arrow batches are taken whole or not at all: a batch with one
            // series past a limit stores nothing and holds no admission.
            let hosts = |names: &[&str]| {
                let rows = names.len() as i64;
                RecordBatch::try_from_iter([
                    (
                        "time",
                        Arc::new(Int64Array::from_iter_values(1..=rows)) as ArrayRef,
                    ),
                    (
                        "host",
                        Arc::new(StringArray::from(names.to_vec())) as ArrayRef,
                    ),
                    (
                        "v",
                        Arc::new(Int64Array::from_iter_values(1..=rows)) as ArrayRef,
                    ),
                ])
                .unwrap()
            };
            let arrow = |measurement: &'static str, names: &'static [&'static str]| {
                let ing = ing.clone();
                async move {
                    ing.write_arrow(
                        "card_arrow",
                        "autogen",
                        measurement,
                        &hosts(names),
                        &["host"],
                        &options,
                    )
                    .await
                }
            };
            assert_eq!(arrow("m", &["a1", "a2", "a3"]).await.unwrap(), 3);
            let refused = |result: chingest::Result<usize>, limit: &str| match result {
                Err(chingest::Error::InvalidBatch { column, reason }) => {
                    assert_eq!(column, "host");
                    assert!(reason.contains(limit), "{reason}");
                }
                other => panic!("expected a refusal naming {limit:?}, got {other:?}"),
            };
            // The values-per-tag limit is line protocol's: a batch meets
            // the series limit only (a fifth value of `host` is stored).
            assert_eq!(arrow("m", &["a1", "a4", "a5"]).await.unwrap(), 3);
            refused(arrow("n", &["b1", "b2"]).await, "has 6 series (limit 6)");
            assert_eq!(arrow("n", &["b1"]).await.unwrap(), 1);
            assert_eq!(
                query(&ing, "SELECT count() FROM card_arrow._series").await,
                "6\n"
            );
            assert_eq!(
                query(&ing, "SELECT count() FROM card_arrow.`m.autogen`").await,
                "6\n"
            );
            // Twenty writers, each with a series of its own: six get in.
            let writers: Vec<_> = (0..20)
                .map(|w| {
                    let ing = ing.clone();
                    tokio::spawn(async move {
                        // A tag key each: only the series limit applies.
                        let body = format!("c,k{w}=x v=1i 1\n");
                        let options = WriteOptions::default();
                        ing.write_lp("card_race", "autogen", body.as_bytes(), &options)
                            .await
                            .unwrap()
                            .accepted
                    })
                })
                .collect();
            let mut accepted = 0;
            for writer in writers {
                accepted += writer.await.unwrap();
            }
            assert_eq!(accepted, 6);
            ing.flush().await.unwrap();
            assert_eq!(
                query(&ing, "SELECT count() FROM card_race._series").await,
                "6\n"
            );
        }
        "cardinality-reopened" => {
            // The counts came back: no new series, no new host value...
            let out = ing
                .write_lp("card", "autogen", b"o v=1i 1\n", &options)
                .await
                .unwrap();
            assert_eq!(out.accepted, 0, "{out:?}");
            let out = ing
                .write_lp(
                    "card",
                    "autogen",
                    b"m,host=h5 v=1i 1\nm,host=h2 v=3i 9\n",
                    &options,
                )
                .await
                .unwrap();
            assert_eq!((out.accepted, out.rejected.len()), (1, 1), "{out:?}");
            assert_eq!(query(&ing, "SELECT count() FROM card._series").await, "6\n");
            // ...until a series is dropped.
            let filter = PointFilter {
                measurement: Some("n".into()),
                tags: TagPredicate::Equals("rack".into(), "r1".into()),
                ..PointFilter::all()
            };
            ing.drop_series("card", &filter).await.unwrap();
            let out = ing
                .write_lp("card", "autogen", b"o v=1i 1\n", &options)
                .await
                .unwrap();
            assert_eq!(out.accepted, 1, "{out:?}");
        }
        other => panic!("unknown phase {other}"),
    }
    ing.close().await.unwrap();
}
