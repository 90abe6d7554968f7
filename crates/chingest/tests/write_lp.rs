//! Line-protocol writes through the library, checked by reading the rows back
//! from the real engine. Each test writes into databases of its own.

mod support;

use chingest::{Durability, Error, Ingestor, Point, PointValue, Precision, WriteOptions};
use support::{ingestor, run, tsv, visible};

test_main!(
    every_field_type_round_trips_exactly,
    missing_fields_are_null_not_zero,
    interleaved_measurements_each_keep_their_rows,
    timestamps_honour_every_precision_and_the_storable_range,
    missing_timestamp_uses_the_server_time,
    bad_lines_are_reported_and_good_lines_kept,
    schema_evolves_and_conflicts_reject_only_their_line,
    hostile_names_map_to_distinct_tables,
    many_databases_and_measurements_at_once,
    concurrent_writers_from_threads_get_exact_counts,
    every_durability_mode_is_visible_after_flush,
    fsync_writes_sync_the_log_and_os_writes_do_not,
    visible_writes_are_readable_at_once,
    large_bodies_parse_in_pieces_with_exact_line_numbers,
    long_lines_are_rejected_by_the_configured_limit,
    tag_field_and_name_limits_reject_their_line,
    measurement_views_show_tags_and_fields_as_columns,
    retention_policy_durations_expire_old_rows,
    tsbs_values_take_under_a_byte_each_after_merges,
    queries_answer_in_any_format_and_report_engine_errors,
    a_failed_statement_leaves_nothing_in_the_next_answer,
    read_only_queries_refuse_everything_but_one_read,
    a_translated_query_whose_caller_goes_away_is_killed,
    writes_to_unknown_databases_can_be_refused,
    typed_points_follow_the_line_protocol_rules,
);

async fn write(ing: &Ingestor, db: &str, body: &str) -> chingest::WriteOutcome {
    ing.write_lp(db, "autogen", body.as_bytes(), &visible())
        .await
        .unwrap_or_else(|e| panic!("write to {db}: {e}"))
}

/// Facts of `db`.`m.autogen` joined with their tags, one TSV line per row.
async fn rows(ing: &Ingestor, db: &str, measurement: &str, columns: &str) -> String {
    let sql = format!(
        "SELECT {columns} FROM {db}.`{measurement}.autogen` AS f \
         INNER JOIN (SELECT series_id, measurement, tags FROM {db}._series FINAL) AS s USING series_id \
         ORDER BY time, series_id"
    );
    tsv(ing, &sql).await
}

fn every_field_type_round_trips_exactly() {
    run(async {
        let ing = ingestor().await;
        let body = "\
types f=1.5,i=-9223372036854775808i,u=18446744073709551615u,s=\"quote \\\" backslash \\\\ done\",b=true 1
types f=-0.0,i=9223372036854775807i,u=0u,s=\"\",b=F 2
types f=1e300,i=0i,u=1u,s=\"ünïcødé 🦀\",b=TRUE 3
";
        let out = write(&ing, "lp_types", body).await;
        assert_eq!((out.accepted, out.rejected.len()), (3, 0), "{out:?}");
        assert_eq!(
            rows(&ing, "lp_types", "types", "toUnixTimestamp64Nano(time), f, i, u, s, b").await,
            "1\t1.5\t-9223372036854775808\t18446744073709551615\tquote \" backslash \\\\ done\ttrue\n\
             2\t-0\t9223372036854775807\t0\t\tfalse\n\
             3\t1e300\t0\t1\tünïcødé 🦀\ttrue\n"
        );
        let types = tsv(
            &ing,
            "SELECT name, type FROM system.columns WHERE database = 'lp_types' \
             AND table = 'types.autogen' ORDER BY position",
        )
        .await;
        assert_eq!(
            types,
            "time\tDateTime64(9, \\'UTC\\')\nseries_id\tUInt64\nf\tNullable(Float64)\n\
             i\tNullable(Int64)\nu\tNullable(UInt64)\ns\tNullable(String)\nb\tNullable(Bool)\n"
        );
    })
}

fn missing_fields_are_null_not_zero() {
    run(async {
        let ing = ingestor().await;
        let out = write(&ing, "lp_nulls", "m a=1i 1\nm b=2.5 2\nm a=3i,b=4.5 3\n").await;
        assert_eq!(out.accepted, 3);
        assert_eq!(
            rows(&ing, "lp_nulls", "m", "a, b, isNull(a), isNull(b)").await,
            "1\t\\N\t0\t1\n\\N\t2.5\t1\t0\n3\t4.5\t0\t0\n"
        );
    })
}

fn interleaved_measurements_each_keep_their_rows() {
    run(async {
        let ing = ingestor().await;
        // The tables exist, then lines switch between them, back and forth
        // and in runs, in one body.
        write(&ing, "lp_interleaved", "a v=1i 1\nb w=1.5 1\n").await;
        let out = write(
            &ing,
            "lp_interleaved",
            "a v=2i 2\nb w=2.5 2\na v=3i 3\na v=4i 4\nb w=3.5 3\nc x=true 1\na v=5i 5\n",
        )
        .await;
        assert_eq!((out.accepted, out.rejected.len()), (7, 0), "{out:?}");
        assert_eq!(
            rows(&ing, "lp_interleaved", "a", "v").await,
            "1\n2\n3\n4\n5\n"
        );
        assert_eq!(
            rows(&ing, "lp_interleaved", "b", "w").await,
            "1.5\n2.5\n3.5\n"
        );
        assert_eq!(rows(&ing, "lp_interleaved", "c", "x").await, "true\n");
    })
}

fn timestamps_honour_every_precision_and_the_storable_range() {
    run(async {
        let ing = ingestor().await;
        let cases = [
            (Precision::Nanoseconds, "1", 1i128),
            (Precision::Microseconds, "1", 1_000),
            (Precision::Milliseconds, "1", 1_000_000),
            (Precision::Seconds, "1", 1_000_000_000),
            (Precision::Minutes, "1", 60_000_000_000),
            (Precision::Hours, "1", 3_600_000_000_000),
            // The edges: 1900-01-01 (DateTime64(9)'s) and the largest time
            // InfluxDB accepts, i64::MAX - 1.
            (
                Precision::Seconds,
                "-2208988800",
                -2_208_988_800_000_000_000,
            ),
            (
                Precision::Nanoseconds,
                "9223372036854775806",
                i64::MAX as i128 - 1,
            ),
        ];
        for (i, (precision, ts, _)) in cases.iter().enumerate() {
            let body = format!("p,case={i} v=1i {ts}\n");
            let options = WriteOptions {
                precision: *precision,
                ..visible()
            };
            let out = ing
                .write_lp("lp_precision", "autogen", body.as_bytes(), &options)
                .await
                .unwrap();
            assert_eq!(out.accepted, 1, "{precision:?}: {out:?}");
        }
        let got = rows(
            &ing,
            "lp_precision",
            "p",
            "s.tags['case'], toUnixTimestamp64Nano(time)",
        )
        .await;
        let mut expected: Vec<(i128, usize)> = cases
            .iter()
            .enumerate()
            .map(|(i, (_, _, ns))| (*ns, i))
            .collect();
        expected.sort();
        let expected: String = expected
            .iter()
            .map(|(ns, i)| format!("{i}\t{ns}\n"))
            .collect();
        assert_eq!(got, expected);

        // Before 1900 cannot be stored: that line is rejected, the other kept.
        let out = write(
            &ing,
            "lp_precision",
            "p,case=old v=1i -2208988800000000001\np,case=ok v=1i 5\n",
        )
        .await;
        assert_eq!(out.accepted, 1);
        assert_eq!(out.rejected.len(), 1);
        assert_eq!(out.rejected[0].line, 1);
        assert!(
            out.rejected[0].reason.contains("1900"),
            "{:?}",
            out.rejected[0]
        );
    })
}

fn missing_timestamp_uses_the_server_time() {
    run(async {
        let ing = ingestor().await;
        let before = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        write(&ing, "lp_now", "m v=1i\n").await;
        let after = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        let stored: u128 = rows(&ing, "lp_now", "m", "toUnixTimestamp64Nano(time)")
            .await
            .trim()
            .parse()
            .unwrap();
        assert!(
            before <= stored && stored <= after,
            "{before} <= {stored} <= {after}"
        );
    })
}

fn bad_lines_are_reported_and_good_lines_kept() {
    run(async {
        let ing = ingestor().await;
        let body = "\
good,host=a v=1i 1
bad,host=a v= 2
good,host=b v=2i 3
good,host=c v=\"text\" 4
good,host=d v=4i,v=5.5 5
good,host=e,host=f v=6i 6
good,time=x v=7i 7
good,host=g time=8i 8
good,host=h v=9i 9
";
        let out = write(&ing, "lp_bad", body).await;
        assert_eq!(out.accepted, 3, "{out:?}");
        let lines: Vec<usize> = out.rejected.iter().map(|r| r.line).collect();
        assert_eq!(lines, [2, 4, 5, 6, 7, 8]);
        let reasons: Vec<&str> = out.rejected.iter().map(|r| r.reason.as_str()).collect();
        assert!(
            reasons[1].contains("type conflict") && reasons[1].contains("integer"),
            "{reasons:?}"
        );
        assert!(reasons[2].contains("type conflict"), "{reasons:?}");
        assert!(reasons[3].contains("duplicate tag"), "{reasons:?}");
        assert!(reasons[4].contains("time"), "{reasons:?}");
        assert!(reasons[5].contains("reserved"), "{reasons:?}");
        assert_eq!(out.rejected[0].column, Some(14), "{:?}", out.rejected[0]);
        assert_eq!(
            rows(&ing, "lp_bad", "good", "s.tags['host'], v").await,
            "a\t1\nb\t2\nh\t9\n"
        );
    })
}

fn schema_evolves_and_conflicts_reject_only_their_line() {
    run(async {
        let ing = ingestor().await;
        write(&ing, "lp_evolve", "m,k=1 a=1i 1\n").await;
        // A new field in a later write adds a column; earlier rows read NULL.
        let out = write(
            &ing,
            "lp_evolve",
            "m,k=1 a=2i,b=true 2\nm,k=1 a=3.5 3\nm,k=1 c=\"x\" 4\n",
        )
        .await;
        assert_eq!(out.accepted, 2, "{out:?}");
        assert_eq!(out.rejected.len(), 1);
        assert_eq!(out.rejected[0].line, 2);
        assert!(
            out.rejected[0].reason.contains("float"),
            "{:?}",
            out.rejected[0]
        );
        // Within one request, the first type seen for a new field wins.
        let out = write(&ing, "lp_evolve", "m,k=1 d=1u 5\nm,k=1 d=2i 6\n").await;
        assert_eq!((out.accepted, out.rejected.len()), (1, 1), "{out:?}");
        assert_eq!(out.rejected[0].line, 2);
        assert_eq!(
            rows(&ing, "lp_evolve", "m", "a, b, c, d").await,
            "1\t\\N\t\\N\t\\N\n2\ttrue\t\\N\t\\N\n\\N\t\\N\tx\t\\N\n\\N\t\\N\t\\N\t1\n"
        );
    })
}

fn hostile_names_map_to_distinct_tables() {
    run(async {
        let ing = ingestor().await;
        let measurements = [
            "a.b",
            "a%2Eb",
            "_series",
            "back`tick",
            "quote'\"",
            "back\\\\slash",
            "ünï\\ 🦀",
            "space\\ and\\,comma",
            "x.mergetree",
        ];
        let mut body = String::new();
        for (i, m) in measurements.iter().enumerate() {
            body.push_str(&format!("{m},tag=t field.with.dots={i}i,`f`=1i {i}\n"));
        }
        let db = "lp `hostile`.db";
        let out = ing
            .write_lp(db, "my.rp", body.as_bytes(), &visible())
            .await
            .unwrap();
        assert_eq!(
            (out.accepted, out.rejected.len()),
            (measurements.len(), 0),
            "{out:?}"
        );
        let quoted_db = chingest::layout::names::quote_ident(&chingest::layout::names::encode(db));
        let got = tsv(
            &ing,
            &format!(
                "SELECT s.measurement, f.`field.with.dots` FROM merge({}, '^[^_].*[.]my%2Erp$') AS f \
                 INNER JOIN {quoted_db}._series AS s USING series_id ORDER BY 2",
                chingest::layout::names::quote_literal(&chingest::layout::names::encode(db))
            ),
        )
        .await;
        // As stored (unescaped), then as TabSeparated prints it.
        let stored = [
            "a.b",
            "a%2Eb",
            "_series",
            "back`tick",
            "quote\\'\"",
            "back\\\\slash",
            "ünï 🦀",
            "space and,comma",
            "x.mergetree",
        ];
        let expected: String = stored
            .iter()
            .enumerate()
            .map(|(i, m)| format!("{m}\t{i}\n"))
            .collect();
        assert_eq!(got, expected);

        // Names the engine cannot hold are refused with the reason.
        let too_long = "m".repeat(101);
        let out = write(
            &ing,
            "lp_hostile2",
            &format!("{too_long} v=1i 1\nok v=1i 1\n"),
        )
        .await;
        assert_eq!(out.accepted, 1);
        assert!(
            out.rejected[0].reason.contains("too long"),
            "{:?}",
            out.rejected
        );
        for bad_db in ["", "system", &"d".repeat(201)] {
            let err = ing
                .write_lp(bad_db, "autogen", b"m v=1i\n", &visible())
                .await;
            assert!(
                matches!(err, Err(Error::InvalidName { .. })),
                "{bad_db:?}: {err:?}"
            );
        }
        let err = ing
            .write_lp("lp_hostile2", "", b"m v=1i\n", &visible())
            .await;
        assert!(matches!(err, Err(Error::InvalidName { .. })), "{err:?}");
    })
}

fn many_databases_and_measurements_at_once() {
    run(async {
        let ing = ingestor().await;
        let mut writes = Vec::new();
        for db in 0..4 {
            let ing = ing.clone();
            writes.push(tokio::spawn(async move {
                let mut body = String::new();
                for m in 0..5 {
                    for host in 0..20 {
                        body.push_str(&format!(
                            "m{m},host=h{host} v={host}i,db={db}i {}\n",
                            m * 100 + host
                        ));
                    }
                }
                ing.write_lp(
                    &format!("lp_many_{db}"),
                    "autogen",
                    body.as_bytes(),
                    &visible(),
                )
                .await
                .unwrap()
            }));
        }
        for write in writes {
            assert_eq!(write.await.unwrap().accepted, 100);
        }
        for db in 0..4 {
            for m in 0..5 {
                let got = tsv(
                    &ing,
                    &format!("SELECT count(), sum(v), min(db), max(db), uniqExact(series_id) FROM lp_many_{db}.`m{m}.autogen`"),
                )
                .await;
                assert_eq!(got, format!("20\t190\t{db}\t{db}\t20\n"));
            }
            let series = tsv(&ing, &format!("SELECT count() FROM lp_many_{db}._series")).await;
            assert_eq!(series, "100\n");
        }
    })
}

fn concurrent_writers_from_threads_get_exact_counts() {
    const THREADS: usize = 4;
    const WRITES: usize = 25;
    const LINES: usize = 200;
    let ing = run(ingestor());
    let handles: Vec<_> = (0..THREADS)
        .map(|t| {
            let ing = ing.clone();
            std::thread::spawn(move || {
                let rt = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .unwrap();
                for w in 0..WRITES {
                    let body: String = (0..LINES)
                        .map(|l| {
                            format!(
                                "load,thread={t},host=h{} v={l}i {}\n",
                                l % 10,
                                (w * LINES + l) as i64
                            )
                        })
                        .collect();
                    let out = rt
                        .block_on(ing.write_lp(
                            "lp_concurrent",
                            "autogen",
                            body.as_bytes(),
                            &visible(),
                        ))
                        .unwrap();
                    assert_eq!(out.accepted, LINES);
                }
            })
        })
        .collect();
    for handle in handles {
        handle.join().unwrap();
    }
    run(async {
        let got = tsv(
            &ing,
            "SELECT count(), sum(v), uniqExact(series_id) FROM lp_concurrent.`load.autogen`",
        )
        .await;
        let per_write: usize = (0..LINES).sum();
        assert_eq!(
            got,
            format!(
                "{}\t{}\t{}\n",
                THREADS * WRITES * LINES,
                THREADS * WRITES * per_write,
                THREADS * 10
            )
        );
        let series = tsv(
            &ing,
            "SELECT count(), uniqExact(series_id) FROM lp_concurrent._series",
        )
        .await;
        assert_eq!(
            series,
            format!("{0}\t{0}\n", THREADS * 10),
            "each series stored once"
        );
    })
}

fn every_durability_mode_is_visible_after_flush() {
    run(async {
        let ing = ingestor().await;
        for (i, durability) in [Durability::Fsync, Durability::Os, Durability::None]
            .into_iter()
            .enumerate()
        {
            let options = WriteOptions {
                durability,
                ..WriteOptions::default()
            };
            for j in 0..50 {
                let body = format!(
                    "modes,mode={durability},k={} v={j}i {}\n",
                    j % 3,
                    i * 100 + j
                );
                ing.write_lp("lp_modes", "autogen", body.as_bytes(), &options)
                    .await
                    .unwrap();
            }
        }
        ing.flush().await.unwrap();
        let got = tsv(
            &ing,
            "SELECT mode, count(), sum(v) FROM lp_modes.modes GROUP BY mode ORDER BY mode",
        )
        .await;
        assert_eq!(got, "fsync\t50\t1225\nnone\t50\t1225\nos\t50\t1225\n");
    })
}

fn fsync_writes_sync_the_log_and_os_writes_do_not() {
    run(async {
        let ing = ingestor().await;
        let stats = ing.stats();
        let syncs = || stats.wal_syncs.load(std::sync::atomic::Ordering::Relaxed);
        let write = |durability, i: usize| {
            let ing = ing.clone();
            async move {
                let options = WriteOptions {
                    durability,
                    ..WriteOptions::default()
                };
                let body = format!("syncs v={i}i {i}\n");
                ing.write_lp("lp_syncs", "autogen", body.as_bytes(), &options)
                    .await
                    .unwrap();
            }
        };
        // The first write creates the table, whose flusher may sync a marker.
        write(Durability::Os, 0).await;
        ing.flush().await.unwrap();
        let before = syncs();
        for i in 1..20 {
            write(Durability::Fsync, i).await;
        }
        let after_fsync = syncs();
        assert!(
            after_fsync >= before + 19,
            "19 sequential fsync writes synced the log {} times",
            after_fsync - before
        );
        for i in 20..40 {
            write(Durability::Os, i).await;
        }
        // Flushes of the table may sync their markers meanwhile, but not
        // once per write.
        assert!(syncs() - after_fsync < 10, "os writes synced the log");
        ing.flush().await.unwrap();
        assert_eq!(
            tsv(&ing, "SELECT count() FROM lp_syncs.syncs").await,
            "40\n"
        );
    })
}

fn visible_writes_are_readable_at_once() {
    run(async {
        let ing = ingestor().await;
        for i in 0..20 {
            let body = format!("seen,h=a v={i}i {i}\n");
            ing.write_lp("lp_visible", "autogen", body.as_bytes(), &visible())
                .await
                .unwrap();
            let got = tsv(&ing, "SELECT count() FROM lp_visible.seen").await;
            assert_eq!(got, format!("{}\n", i + 1));
        }
    })
}

fn large_bodies_parse_in_pieces_with_exact_line_numbers() {
    run(async {
        let ing = ingestor().await;
        // ~10 MB: parsed in one piece per core (4 MiB at least each). Bad lines and a line that
        // needs a new column sit in every part of the body.
        let good = tsbs::CpuOnly::new(1_000).lines(0..30);
        let mut lines: Vec<String> = good.lines().map(str::to_owned).collect();
        let total = lines.len();
        let bad_at = [0, total / 3, total / 2, total - 1];
        for &i in &bad_at {
            lines[i] = "cpu,hostname=x usage_user=".to_owned();
        }
        let new_field_at = total * 3 / 4;
        lines[new_field_at] = "cpu,hostname=y extra=1.5 1".to_owned();
        let body = lines.join("\n") + "\n";
        assert!(body.len() > 8 << 20, "{} bytes", body.len());

        let out = write(&ing, "lp_pieces", &body).await;
        assert_eq!(out.accepted, total - bad_at.len());
        let rejected: Vec<usize> = out.rejected.iter().map(|r| r.line).collect();
        let expected: Vec<usize> = bad_at.iter().map(|i| i + 1).collect();
        assert_eq!(rejected, expected);
        let got = tsv(
            &ing,
            "SELECT count(), countIf(extra = 1.5), sum(usage_idle) > 0 FROM lp_pieces.`cpu.autogen`",
        )
        .await;
        assert_eq!(got, format!("{}\t1\t1\n", total - bad_at.len()));
    })
}

fn tag_field_and_name_limits_reject_their_line() {
    run(async {
        let ing = ingestor().await;
        let options = WriteOptions {
            max_tags_per_line: 2,
            max_fields_per_line: 2,
            max_name_len: 8,
            ..visible()
        };
        let body = "m,a=1,b=2 v=1i 1\nm,a=1,b=2,c=3 v=2i 2\nm a=1i,b=2i,c=3i 3\n\
                    m,longer_key=1 v=4i 4\nm longer_fld=5i 5\nmeasurement v=6i 6\n";
        let out = ing
            .write_lp("lp_line_limits", "autogen", body.as_bytes(), &options)
            .await
            .unwrap();
        assert_eq!(out.accepted, 1, "{out:?}");
        let reasons: Vec<&str> = out.rejected.iter().map(|r| r.reason.as_str()).collect();
        assert_eq!(
            reasons,
            [
                "too many tags: 3 (limit 2)",
                "too many fields: 3 (limit 2)",
                "tag key is 10 bytes long (limit 8)",
                "field key is 10 bytes long (limit 8)",
                "measurement is 11 bytes long (limit 8)",
            ]
        );
        // No table was created for the refused measurement.
        let tables = tsv(
            &ing,
            "SELECT name FROM system.tables WHERE database = 'lp_line_limits' ORDER BY name",
        )
        .await;
        assert_eq!(
            tables,
            "_duplicate_policies\n_retention_policies\n_series\nm\nm.autogen\n"
        );
    })
}

fn long_lines_are_rejected_by_the_configured_limit() {
    run(async {
        let ing = ingestor().await;
        let long = format!("m,k=v s=\"{}\" 2\n", "x".repeat(1_000));
        let body = format!("m,k=v s=\"short\" 1\n{long}m,k=v s=\"short\" 3\n");
        let options = WriteOptions {
            max_line_len: 100,
            ..visible()
        };
        let out = ing
            .write_lp("lp_limits", "autogen", body.as_bytes(), &options)
            .await
            .unwrap();
        assert_eq!(out.accepted, 2);
        assert_eq!(out.rejected.len(), 1);
        assert_eq!(out.rejected[0].line, 2);
        assert!(
            out.rejected[0].reason.contains("100"),
            "{:?}",
            out.rejected[0]
        );
    })
}

fn queries_answer_in_any_format_and_report_engine_errors() {
    run(async {
        let ing = ingestor().await;
        write(&ing, "lp_query", "m,k=a v=1i 1\nm,k=b v=2i 2\n").await;
        let sql = "SELECT v FROM lp_query.`m.autogen` ORDER BY v";
        let json = ing.query_trusted(sql, "JSONEachRow").await.unwrap();
        assert_eq!(String::from_utf8(json).unwrap(), "{\"v\":1}\n{\"v\":2}\n");
        let csv = ing.query_trusted(sql, "csv").await.unwrap();
        assert_eq!(csv, b"1\n2\n");
        let parquet = ing.query_trusted(sql, "Parquet").await.unwrap();
        assert_eq!(&parquet[..4], b"PAR1");
        let batches = ing.query_trusted_arrow(sql).await.unwrap();
        assert_eq!(batches.iter().map(|b| b.num_rows()).sum::<usize>(), 2);

        let err = ing.query_trusted(sql, "NoSuchFormat").await.unwrap_err();
        assert!(
            matches!(err, Error::UnknownFormat(ref name) if name == "NoSuchFormat"),
            "{err:?}"
        );
        let err = ing
            .query_trusted("SELECT nope FROM lp_query.`m.autogen`", "CSV")
            .await
            .unwrap_err();
        match err {
            Error::Engine(message) => assert!(message.contains("nope"), "{message}"),
            other => panic!("expected an engine error, got {other:?}"),
        }
    })
}

/// A statement that fails after its output began leaves nothing for the
/// statements after it: the engine would prepend what it had written (here
/// JSON's header) to the next answer on that connection, so that connection
/// is closed. Every pooled connection is used by the checks after it.
fn a_failed_statement_leaves_nothing_in_the_next_answer() {
    run(async {
        let ing = ingestor().await;
        let failing = "SELECT count() FROM numbers(10) WHERE throwIf(number = 5)";
        // Once passed by the sandbox, `SELECT 1` runs without its checks,
        // which would otherwise run first on the connection.
        assert_eq!(
            ing.query_untrusted("SELECT 1", "CSV").await.unwrap(),
            b"1\n"
        );
        for _ in 0..4 {
            ing.query_trusted(failing, "JSON").await.unwrap_err();
            ing.query_untrusted(failing, "JSON").await.unwrap_err();
        }
        for _ in 0..16 {
            assert_eq!(ing.query_trusted("SELECT 1", "CSV").await.unwrap(), b"1\n");
            assert_eq!(
                ing.query_untrusted("SELECT 1", "CSV").await.unwrap(),
                b"1\n"
            );
        }
    })
}

fn read_only_queries_refuse_everything_but_one_read() {
    run(async {
        let ing = ingestor().await;
        write(&ing, "lp_ro", "m v=1i 1\n").await;
        let ok = ing
            .query_untrusted("SELECT count() FROM lp_ro.`m.autogen`", "CSV")
            .await
            .unwrap();
        assert_eq!(ok, b"1\n");
        let path = std::env::temp_dir().join(format!("chingest-outfile-{}", std::process::id()));
        let refused = [
            "INSERT INTO lp_ro.`m.autogen` (time, series_id) VALUES (1, 1)",
            "DROP TABLE lp_ro.`m.autogen`",
            "CREATE DATABASE lp_ro_2",
            "SET max_threads = 2",
            "SELECT 1; SELECT 2",
            &format!("SELECT 1 INTO OUTFILE '{}'", path.display()),
            "SELECT * FROM file('/etc/passwd', 'LineAsString')",
            "SELECT * FROM url('http://127.0.0.1:9/', 'CSV', 'a String')",
            "SELECT * FROM remote('127.0.0.1', system.one)",
            "SELECT 1 SETTINGS max_threads = 2",
        ];
        for sql in refused {
            let err = ing.query_untrusted(sql, "CSV").await.unwrap_err();
            assert!(
                matches!(&err, Error::NotReadOnly(_))
                    || matches!(&err, Error::Engine(m) if m.contains("readonly")),
                "{sql}: {err:?}"
            );
        }
        assert!(!path.exists(), "INTO OUTFILE wrote a file");
        assert_eq!(
            tsv(&ing, "SELECT count() FROM lp_ro.`m.autogen`").await,
            "1\n"
        );
        let err = ing.query_untrusted("SELECT (1", "CSV").await.unwrap_err();
        assert!(
            matches!(&err, Error::Engine(m) if m.contains("Syntax")),
            "{err:?}"
        );
    })
}

/// A query-language translator's statement (InfluxQL, PromQL) is killed
/// when its caller drops it: a client that hangs up frees the engine.
fn a_translated_query_whose_caller_goes_away_is_killed() {
    run(async {
        let ing = ingestor().await;
        // Seconds of work, read block by block (where a KILL is seen).
        let slow = "SELECT count() FROM numbers(3000000000) WHERE sipHash64(number) = 12345";
        let running = "SELECT count() FROM system.processes \
                       WHERE query LIKE '%sipHash64(number) = 12345%' AND query NOT LIKE '%system.processes%'";
        let started = std::time::Instant::now();
        let dropped = tokio::time::timeout(
            std::time::Duration::from_millis(500),
            ing.query_translated(slow),
        )
        .await;
        assert!(
            dropped.is_err(),
            "the statement takes many seconds: {dropped:?}"
        );
        // Killed within moments, long before it would have ended.
        loop {
            let count = tsv(&ing, running).await;
            if count == "0\n" {
                break;
            }
            assert!(
                started.elapsed() < std::time::Duration::from_millis(2500),
                "still running: {count}"
            );
            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        }
        // The slot and a connection are free again.
        let batches = ing.query_translated("SELECT 1").await.unwrap();
        assert_eq!(batches[0].num_rows(), 1);
    })
}

fn writes_to_unknown_databases_can_be_refused() {
    run(async {
        let ing = ingestor().await;
        let options = WriteOptions {
            create_database: false,
            ..visible()
        };
        let err = ing
            .write_lp("lp_absent", "autogen", b"m v=1i\n", &options)
            .await
            .unwrap_err();
        assert!(
            matches!(err, Error::DatabaseNotFound(ref db) if db == "lp_absent"),
            "{err:?}"
        );
        assert!(!ing.databases().contains(&"lp_absent".to_owned()));
        ing.create_database("lp_absent").await.unwrap();
        assert!(ing.databases().contains(&"lp_absent".to_owned()));
        let out = ing
            .write_lp("lp_absent", "autogen", b"m v=1i\n", &options)
            .await
            .unwrap();
        assert_eq!(out.accepted, 1);
    })
}

fn measurement_views_show_tags_and_fields_as_columns() {
    run(async {
        let ing = ingestor().await;
        write(
            &ing,
            "lp_view",
            "cpu,host=a,region=eu usage=0.5 1\ncpu,host=b usage=1.5 2\n",
        )
        .await;
        assert_eq!(
            tsv(&ing, "SELECT toUnixTimestamp64Nano(time), host, region, usage FROM lp_view.cpu ORDER BY time").await,
            "1\ta\teu\t0.5\n2\tb\t\t1.5\n"
        );
        // New tag keys and fields become columns; a tag named like a field
        // is shown as <key>_tag.
        write(
            &ing,
            "lp_view",
            "cpu,host=c,rack=r1,usage=t usage=2.5,idle=9i 3\n",
        )
        .await;
        assert_eq!(
            tsv(
                &ing,
                "SELECT host, rack, usage_tag, usage, idle FROM lp_view.cpu WHERE toUnixTimestamp64Nano(time) = 3"
            )
            .await,
            "c\tr1\tt\t2.5\t9\n"
        );
        // Other retention policies have no view; their tables are queried directly.
        ing.write_lp("lp_view", "weekly", b"mem,host=a used=1i 1\n", &visible())
            .await
            .unwrap();
        let views = tsv(
            &ing,
            "SELECT name FROM system.tables WHERE database = 'lp_view' AND engine = 'View'",
        )
        .await;
        assert_eq!(views, "cpu\n");
    })
}

/// The TSBS load after merges takes well under the 2.3 bytes per value of
/// the engine's default compression (0.54 on 1 M rows: a benchmark,
/// docs/benchmarks.md §10; this bound is generous for 100k rows).
fn tsbs_values_take_under_a_byte_each_after_merges() {
    run(async {
        let ing = ingestor().await;
        let body = tsbs::CpuOnly::new(1_000).lines(0..100);
        let out = ing
            .write_lp("lp_size", "autogen", body.as_bytes(), &visible())
            .await
            .unwrap();
        assert_eq!(out.accepted, 100_000);
        ing.query_trusted("OPTIMIZE TABLE lp_size.`cpu.autogen` FINAL", "CSV")
            .await
            .unwrap();
        let per_value = tsv(
            &ing,
            "SELECT sum(bytes_on_disk) / (sum(rows) * 10) FROM system.parts \
             WHERE database = 'lp_size' AND table = 'cpu.autogen' AND active",
        )
        .await;
        let per_value: f64 = per_value.trim().parse().unwrap();
        assert!(per_value < 1.0, "{per_value} bytes per value");
    })
}

fn retention_policy_durations_expire_old_rows() {
    run(async {
        let ing = ingestor().await;
        let day = std::time::Duration::from_secs(86_400);
        let err = ing
            .create_retention_policy("lp_rp", "day", Some(day))
            .await
            .unwrap_err();
        assert!(matches!(err, Error::DatabaseNotFound(_)), "{err:?}");
        ing.create_database("lp_rp").await.unwrap();
        // A table that exists before its policy gets the TTL too.
        ing.write_lp("lp_rp", "later", b"m v=1i 1\n", &visible())
            .await
            .unwrap();
        ing.create_retention_policy("lp_rp", "day", Some(day))
            .await
            .unwrap();
        ing.create_retention_policy("lp_rp", "later", Some(day))
            .await
            .unwrap();
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos();
        for rp in ["day", "later"] {
            let body = format!("m v=2i 2\nm v=3i {now}\n");
            ing.write_lp("lp_rp", rp, body.as_bytes(), &visible())
                .await
                .unwrap();
            // Merge: the TTL drops expired rows.
            ing.query_trusted(
                &format!("OPTIMIZE TABLE lp_rp.`m.{rp}` FINAL"),
                "TabSeparated",
            )
            .await
            .unwrap();
            assert_eq!(
                tsv(&ing, &format!("SELECT v FROM lp_rp.`m.{rp}`")).await,
                "3\n",
                "{rp}"
            );
            // The expired rows' part was dropped whole (the engine may keep
            // an empty part for a while): the rows left are in the one part
            // of the partition that holds `now`.
            let parts = format!(
                "SELECT partition, rows FROM system.parts \
                 WHERE database = 'lp_rp' AND table = 'm.{rp}' AND active AND rows > 0"
            );
            let now_partition = match rp {
                "day" => "toString(toDate(now()))",
                _ => "toString(toYYYYMM(now()))",
            };
            let expected = tsv(&ing, &format!("SELECT {now_partition}, 1")).await;
            assert_eq!(tsv(&ing, &parts).await, expected, "{rp}");
        }
        // Partitions follow the policy's duration when the table was made:
        // days for `day`, months for `later` (it had no duration then).
        let keys = tsv(
            &ing,
            "SELECT name, partition_key FROM system.tables WHERE database = 'lp_rp' \
             AND engine = 'MergeTree' ORDER BY name",
        )
        .await;
        assert_eq!(keys, "m.day\ttoDate(time)\nm.later\ttoYYYYMM(time)\n");
        assert_eq!(
            ing.retention_policies("lp_rp"),
            vec![
                ("day".to_owned(), Some(day)),
                ("later".to_owned(), Some(day))
            ]
        );
        // Forever again: the TTL is removed.
        ing.create_retention_policy("lp_rp", "day", None)
            .await
            .unwrap();
        let create = tsv(&ing, "SHOW CREATE TABLE lp_rp.`m.day`").await;
        assert!(!create.contains("TTL"), "{create}");
        assert_eq!(ing.retention_policies("lp_rp")[0], ("day".to_owned(), None));
    })
}

/// Typed points take the line path's rules without being text: the same
/// series ids as the same lines, new tables and columns created on the way,
/// type conflicts and limits refusing only their point, by position.
fn typed_points_follow_the_line_protocol_rules() {
    run(async {
        let ing = ingestor().await;
        write(&ing, "points_lp", "cpu,host=a,dc=eu load=0.5,n=1i 1\n").await;
        let point = |tags: Vec<(&'static str, &'static str)>, fields, timestamp| Point {
            measurement: "cpu",
            tags,
            fields,
            timestamp: Some(timestamp),
        };
        let points = vec![
            // The series line protocol wrote, tags in another order.
            point(
                vec![("dc", "eu"), ("host", "a")],
                vec![("load", PointValue::Float(0.75))],
                2,
            ),
            // A new column, and a new series.
            point(
                vec![("host", "b")],
                vec![
                    ("note", PointValue::String("say \"hi\"")),
                    ("up", PointValue::Boolean(true)),
                ],
                3,
            ),
            // A field of another type than its column.
            point(vec![("host", "a")], vec![("n", PointValue::Float(1.0))], 4),
            // A new table: the point waits for its DDL.
            Point {
                measurement: "mem",
                tags: vec![],
                fields: vec![("free", PointValue::UInteger(u64::MAX))],
                timestamp: Some(5),
            },
            // Past the tag limit of the write.
            point(
                vec![("a", "1"), ("b", "2"), ("c", "3")],
                vec![("load", PointValue::Float(1.0))],
                6,
            ),
        ];
        let options = WriteOptions {
            precision: Precision::Nanoseconds,
            max_tags_per_line: 2,
            ..visible()
        };
        let outcome = ing
            .write_points("points_lp", "autogen", &points, &options)
            .await
            .unwrap();
        assert_eq!(outcome.accepted, 3);
        let rejected: Vec<(usize, &str)> = outcome
            .rejected
            .iter()
            .map(|r| (r.line, r.reason.as_str()))
            .collect();
        assert_eq!(rejected.len(), 2, "{rejected:?}");
        assert_eq!(rejected[0].0, 3);
        assert!(rejected[0].1.contains("type conflict"), "{rejected:?}");
        assert_eq!(rejected[1].0, 5);
        assert!(rejected[1].1.contains("too many tags"), "{rejected:?}");
        assert_eq!(
            tsv(&ing, "SELECT uniqExact(series_id), count() FROM points_lp.`cpu.autogen` WHERE toUnixTimestamp64Nano(time) <= 2").await,
            "1\t2\n"
        );
        assert_eq!(
            tsv(
                &ing,
                "SELECT host, note, up FROM points_lp.cpu WHERE toUnixTimestamp64Nano(time) = 3"
            )
            .await,
            "b\tsay \"hi\"\ttrue\n"
        );
        assert_eq!(
            tsv(&ing, "SELECT free FROM points_lp.mem").await,
            "18446744073709551615\n"
        );
    })
}
