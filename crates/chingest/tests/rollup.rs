//! Downsampling against the real engine: the rollup statements
//! (`chingest::layout::rollup`) build buckets from the facts, and coarser
//! ones from those, holding exactly what the same aggregates over the raw
//! rows give (sparse fields and strings included); and the ingestor's
//! passes keep a downsampled database's rollups equal to its rows after
//! writes, late writes, new fields, deletes, corrections and dropped
//! series.

mod support;

use std::time::Duration;

use chingest::layout::names::TableNames;
use chingest::layout::rollup::{Resolution, Rollup, Source};
use chingest::layout::schema::FieldType;
use chingest::{
    Downsampling, FieldValue, IngestConfig, Ingestor, Keeps, PointFilter, TagPredicate,
};
use support::{run, tsv, visible};

test_main!(
    rollups_hold_what_the_raw_rows_give,
    a_rebuilt_bucket_replaces_the_old_one,
    passes_keep_the_rollups_equal_to_the_rows,
    an_edit_before_the_first_pass_rebuilds_only_where_rows_are,
    a_merge_adds_new_rows_once_where_the_rows_are_gone,
    points_written_again_under_the_last_policy_count_once,
    rows_of_the_newest_bucket_wait_for_it_to_close_and_are_read_from_the_rows,
);

/// The database the passes keep rolled up: 5 m and 1 h, at ages that keep
/// the rows these tests write (2026-01-01) so that the rollups can be
/// compared with them.
const DOWNSAMPLED: &str = "rollup_passes";
/// Downsampled alike, its points kept once (the `last` duplicate policy).
const DOWNSAMPLED_LAST: &str = "rollup_last";

/// Every test's ingestor: `DOWNSAMPLED` downsampled, passes only when a
/// test asks (the background task's period is a day).
async fn ingestor() -> Ingestor {
    support::ingestor_with(|mut config: IngestConfig| {
        let levels = Downsampling::parse(&["3000d:5m", "6000d:1h"]).unwrap();
        for db in [DOWNSAMPLED, DOWNSAMPLED_LAST] {
            config
                .downsampling
                .databases
                .insert(db.to_owned(), levels.clone());
        }
        config.downsampling.period = Duration::from_secs(86_400);
        config
    })
    .await
}

const MINUTE_NS: i64 = 60_000_000_000;
/// 2026-01-01T00:00:00Z.
const START_NS: i64 = 1_767_225_600_000_000_000;

fn fields() -> Vec<(String, FieldType)> {
    vec![
        ("usage".to_owned(), FieldType::Float),
        ("count".to_owned(), FieldType::Integer),
        ("state".to_owned(), FieldType::String),
    ]
}

/// Three hosts, a point every 40 s for 3 hours; `count` only on every third
/// point and `state` on every fifth, so buckets have fields with no value.
fn body() -> String {
    let mut lines = Vec::new();
    for host in 0..3 {
        for i in 0..270i64 {
            let mut fields = vec![format!("usage={}.25", (i * 7 + host * 13) % 101)];
            if i % 3 == 0 {
                fields.push(format!("count={}i", i - 100 * host));
            }
            if i % 5 == 0 {
                fields.push(format!("state=\"s{}\"", (i / 5) % 4));
            }
            let t = START_NS + i * 40_000_000_000;
            lines.push(format!("cpu,host=h{host} {} {t}", fields.join(",")));
        }
    }
    lines.join("\n")
}

/// The aggregates of each (series, bucket) over the raw rows, as the
/// rollup's columns are named, in one comparable text.
fn raw_sql(table: &str, interval_s: u64) -> String {
    format!(
        "SELECT series_id, toDateTime64(toStartOfInterval(time, INTERVAL {interval_s} SECOND), 9, 'UTC') AS b, \
         count(usage), sum(usage), min(usage), max(usage), argMinIf(usage, time, usage IS NOT NULL), \
         argMaxIf(usage, time, usage IS NOT NULL), count(count), sum(count), min(count), max(count), \
         argMinIf(count, time, count IS NOT NULL), if(count(count) = 0, NULL, minIf(time, count IS NOT NULL)), \
         argMaxIf(count, time, count IS NOT NULL), if(count(count) = 0, NULL, maxIf(time, count IS NOT NULL)), \
         count(state), argMinIf(state, time, state IS NOT NULL), argMaxIf(state, time, state IS NOT NULL) \
         FROM {table} GROUP BY series_id, b ORDER BY series_id, b"
    )
}

fn rollup_sql(table: &str) -> String {
    format!(
        "SELECT series_id, time, `usage@count`, `usage@sum`, `usage@min`, `usage@max`, `usage@first`, \
         `usage@last`, `count@count`, `count@sum`, `count@min`, `count@max`, `count@first`, \
         `count@first_time`, `count@last`, `count@last_time`, `state@count`, `state@first`, `state@last` \
         FROM {table} ORDER BY series_id, time"
    )
}

fn rollups_hold_what_the_raw_rows_give() {
    run(async {
        let ing = ingestor().await;
        ing.write_lp("rollup_exact", "autogen", body().as_bytes(), &visible())
            .await
            .unwrap();
        let names = TableNames::new("rollup_exact", "autogen", "cpu");
        let five = Rollup::new(
            &names,
            &fields(),
            Resolution::aggregates(Duration::from_secs(300)),
        );
        let hour = Rollup::new(
            &names,
            &fields(),
            Resolution::aggregates(Duration::from_secs(3600)),
        );
        let end = START_NS + 180 * MINUTE_NS;
        for rollup in [&five, &hour] {
            tsv(&ing, &rollup.create_sql()).await;
        }
        tsv(
            &ing,
            &five.rebuild_sql(Source::Facts(&names.storage_table), START_NS, end, u64::MAX),
        )
        .await;
        tsv(
            &ing,
            &hour.rebuild_sql(Source::Rollup(&five), START_NS, end, u64::MAX),
        )
        .await;
        for (rollup, seconds) in [(&five, 300), (&hour, 3600)] {
            let raw = tsv(&ing, &raw_sql(&names.storage_table, seconds)).await;
            let rolled = tsv(&ing, &rollup_sql(&rollup.table)).await;
            assert_eq!(rolled.lines().count(), 3 * (10_800 / seconds) as usize);
            assert_eq!(rolled, raw, "the {seconds} s rollup");
        }
        // A mean over buckets is the mean of the rows, not a mean of means.
        let exact = tsv(
            &ing,
            &format!("SELECT avg(count) FROM {}", names.storage_table),
        )
        .await;
        let rolled = tsv(
            &ing,
            &format!(
                "SELECT sum(`count@sum`) / sum(`count@count`) FROM {}",
                hour.table
            ),
        )
        .await;
        assert_eq!(rolled, exact);
        // A level keeping the last sample only, built from the rows or
        // from a level keeping every aggregate, holds their last values.
        let last = Rollup::new(
            &names,
            &fields(),
            Resolution {
                interval: Duration::from_secs(3600),
                keeps: Keeps::Last,
            },
        );
        tsv(&ing, &last.create_sql()).await;
        let kept = |table: &str| {
            format!(
                "SELECT series_id, time, `usage@count`, `usage@last`, `usage@last_time`, \
                 `state@count`, `state@last`, `state@last_time` FROM {table} FINAL \
                 ORDER BY series_id, time"
            )
        };
        let whole = tsv(&ing, &kept(&hour.table)).await;
        for source in [Source::Facts(&names.storage_table), Source::Rollup(&five)] {
            tsv(&ing, &last.rebuild_sql(source, START_NS, end, u64::MAX)).await;
            assert_eq!(tsv(&ing, &kept(&last.table)).await, whole, "{source:?}");
            tsv(&ing, &last.delete_sql(START_NS, end)).await;
        }
    })
}

fn a_rebuilt_bucket_replaces_the_old_one() {
    run(async {
        let ing = ingestor().await;
        let db = "rollup_rebuilt";
        ing.write_lp(
            db,
            "autogen",
            b"cpu,host=a usage=1,count=1i 1767225600000000000",
            &visible(),
        )
        .await
        .unwrap();
        let names = TableNames::new(db, "autogen", "cpu");
        let written = &fields()[..2];
        let five = Rollup::new(
            &names,
            written,
            Resolution::aggregates(Duration::from_secs(300)),
        );
        tsv(&ing, &five.create_sql()).await;
        let rebuild = five.rebuild_sql(
            Source::Facts(&names.storage_table),
            START_NS,
            START_NS + 5 * MINUTE_NS,
            u64::MAX,
        );
        tsv(&ing, &rebuild).await;
        // A late row in the same bucket, then the bucket built again.
        ing.write_lp(
            db,
            "autogen",
            b"cpu,host=a usage=3,count=5i 1767225660000000000",
            &visible(),
        )
        .await
        .unwrap();
        tsv(&ing, &rebuild).await;
        let row = tsv(
            &ing,
            &format!(
                "SELECT `usage@count`, `usage@sum`, `count@last` FROM {}",
                five.table
            ),
        )
        .await;
        assert_eq!(row, "2\t4\t5\n");
        // New fields get their columns.
        let added = [("temp".to_owned(), FieldType::Float)];
        tsv(&ing, &five.add_columns_sql(&added)).await;
        let columns = tsv(
            &ing,
            &format!(
                "SELECT count() FROM system.columns WHERE database = '{db}' AND name LIKE 'temp@%'"
            ),
        )
        .await;
        assert_eq!(columns, "8\n");
    })
}

/// Where a bucket's rows are gone, rows written into it later are merged
/// into it, and merging again (a pass repeated after a crash) adds nothing.
fn a_merge_adds_new_rows_once_where_the_rows_are_gone() {
    run(async {
        let ing = ingestor().await;
        let db = "rollup_merge";
        ing.write_lp(db, "autogen", body().as_bytes(), &visible())
            .await
            .unwrap();
        let names = TableNames::new(db, "autogen", "cpu");
        let five = Rollup::new(
            &names,
            &fields(),
            Resolution::aggregates(Duration::from_secs(300)),
        );
        tsv(&ing, &five.create_sql()).await;
        let last_block = || {
            let sql = format!("SELECT max(_block_number) FROM {}", names.storage_table);
            let ing = ing.clone();
            async move { tsv(&ing, &sql).await.trim().parse::<u64>().unwrap() }
        };
        let seen = last_block().await;
        let end = START_NS + 180 * MINUTE_NS;
        tsv(
            &ing,
            &five.rebuild_sql(Source::Facts(&names.storage_table), START_NS, end, seen),
        )
        .await;
        let before = tsv(&ing, &rollup_sql(&five.table)).await;
        // The rows go; then a late row into h0's first bucket, its last.
        tsv(
            &ing,
            &format!("DELETE FROM {} WHERE 1", names.storage_table),
        )
        .await;
        ing.write_lp(
            db,
            "autogen",
            format!(
                "cpu,host=h0 usage=1000,count=3i {}",
                START_NS + 290_000_000_000
            )
            .as_bytes(),
            &visible(),
        )
        .await
        .unwrap();
        let through = last_block().await;
        let merge = five.merge_sql(&names.storage_table, START_NS, end, seen, through);
        let h0_first = format!(
            "series_id = (SELECT series_id FROM {} FINAL WHERE tags['host'] = 'h0') \
             AND time = '2026-01-01 00:00:00'",
            names.series_table
        );
        let first_bucket = format!(
            "SELECT `usage@count`, `usage@sum`, `usage@max`, `count@count`, `count@last`, \
             `usage@last_time` FROM {} FINAL WHERE {h0_first}",
            five.table
        );
        let old = tsv(&ing, &first_bucket).await;
        tsv(&ing, &merge).await;
        let merged = tsv(&ing, &first_bucket).await;
        let number = |row: &str, i: usize| row.trim_end().split('\t').nth(i).unwrap().to_owned();
        let count: u64 = number(&old, 0).parse().unwrap();
        let sum: f64 = number(&old, 1).parse().unwrap();
        assert_eq!(
            number(&merged, 0),
            (count + 1).to_string(),
            "{old} -> {merged}"
        );
        assert_eq!(number(&merged, 1).parse::<f64>().unwrap(), sum + 1000.0);
        assert_eq!(number(&merged, 2), "1000");
        assert_eq!(
            number(&merged, 4),
            "3",
            "the late row is the bucket's last count"
        );
        assert_eq!(number(&merged, 5), "2026-01-01 00:04:50.000000000");
        // Again, as after a crash before the pass was recorded: the same.
        tsv(&ing, &merge).await;
        assert_eq!(tsv(&ing, &first_bucket).await, merged);
        // Every other bucket is as it was.
        let after = tsv(
            &ing,
            &format!(
                "SELECT * FROM ({}) WHERE NOT ({h0_first})",
                rollup_sql(&format!("{} FINAL", five.table)),
            ),
        )
        .await;
        assert_eq!(after.lines().count(), before.lines().count() - 1);
        assert!(before.contains(after.lines().next().unwrap()));
    })
}

/// Points written again under the `last` policy replace the earlier ones
/// (a field not written again keeps its value): each counts once in the
/// rollups, whether the engine merged them yet or not.
fn points_written_again_under_the_last_policy_count_once() {
    run(async {
        let ing = ingestor().await;
        ing.create_database(DOWNSAMPLED_LAST).await.unwrap();
        ing.set_duplicate_policy(DOWNSAMPLED_LAST, None, chingest::DuplicatePolicy::Last)
            .await
            .unwrap();
        let write = |body: String| write_to(&ing, DOWNSAMPLED_LAST, body);
        write(body()).await;
        assert_rolled_up_in(&ing, DOWNSAMPLED_LAST, "the first pass").await;
        // Every fourth point of h1 again, `usage` only, new values.
        let again: Vec<String> = (0..270i64)
            .step_by(4)
            .map(|i| {
                format!(
                    "cpu,host=h1 usage={}.75 {}",
                    500 + i,
                    START_NS + i * 40_000_000_000
                )
            })
            .collect();
        write(again.join("\n")).await;
        assert_rolled_up_in(&ing, DOWNSAMPLED_LAST, "points written again").await;
        let names = TableNames::new(DOWNSAMPLED_LAST, "autogen", "cpu");
        let count = format!("SELECT count() FROM {}", names.storage_table);
        assert_eq!(tsv(&ing, &count).await, "810\n", "one row a point");
    })
}

/// Both levels of `DOWNSAMPLED`'s cpu table equal the raw rows' aggregates.
async fn assert_rolled_up(ing: &Ingestor, after: &str) {
    assert_rolled_up_in(ing, DOWNSAMPLED, after).await
}

/// Both levels of `db`'s cpu table equal the raw rows' aggregates.
async fn assert_rolled_up_in(ing: &Ingestor, db: &str, after: &str) {
    ing.downsample().await.unwrap();
    let names = TableNames::new(db, "autogen", "cpu");
    for (interval, seconds) in [("5m", 300), ("1h", 3600)] {
        let table = format!("`{db}`.`_rollup.{interval}.cpu.autogen`");
        let raw = tsv(ing, &raw_sql(&names.storage_table, seconds)).await;
        let rolled = tsv(ing, &rollup_sql(&table)).await;
        assert_eq!(rolled, raw, "the {interval} rollup after {after}");
    }
}

/// Writes line protocol into `db`, visible on return.
async fn write_to(ing: &Ingestor, db: &str, body: String) {
    ing.write_lp(db, "autogen", body.as_bytes(), &visible())
        .await
        .unwrap();
}

fn passes_keep_the_rollups_equal_to_the_rows() {
    run(async {
        let ing = ingestor().await;
        let write = |body: String| write_to(&ing, DOWNSAMPLED, body);
        write(body()).await;
        assert_rolled_up(&ing, "the first pass").await;
        // Late rows into built buckets, and a series that is new.
        write(format!(
            "cpu,host=h0 usage=1000.5,count=7i {}\ncpu,host=h9 usage=3 {}",
            START_NS + 7 * MINUTE_NS,
            START_NS + 95 * MINUTE_NS
        ))
        .await;
        assert_rolled_up(&ing, "late writes").await;
        // A correction, a delete of part of a bucket and of whole buckets.
        let host = |h: &str| PointFilter {
            measurement: Some("cpu".to_owned()),
            tags: TagPredicate::Equals("host".to_owned(), h.to_owned()),
            start: Some(START_NS + 62 * MINUTE_NS),
            stop: Some(START_NS + 121 * MINUTE_NS),
            ..PointFilter::all()
        };
        ing.update(DOWNSAMPLED, &host("h1"), "usage", &FieldValue::Float(-1.0))
            .await
            .unwrap();
        assert_rolled_up(&ing, "an update").await;
        ing.delete(DOWNSAMPLED, &host("h2")).await.unwrap();
        assert_rolled_up(&ing, "a delete").await;
        ing.drop_series(
            DOWNSAMPLED,
            &PointFilter {
                start: None,
                stop: None,
                ..host("h9")
            },
        )
        .await
        .unwrap();
        assert_rolled_up(&ing, "a dropped series").await;
        // Nothing changed: a pass rebuilds nothing and answers the same.
        assert_rolled_up(&ing, "a pass with nothing new").await;
    })
}

fn an_edit_before_the_first_pass_rebuilds_only_where_rows_are() {
    run(async {
        let ing = ingestor().await;
        let body = format!(
            "mem,host=a used=1i {START_NS}\nmem,host=b used=2i {}",
            START_NS + MINUTE_NS
        );
        ing.write_lp(DOWNSAMPLED, "autogen", body.as_bytes(), &visible())
            .await
            .unwrap();
        // No time range, and the rollups still empty: the mark's open ends
        // are bounded by the rows (not by an empty table's zero time, 1970).
        let filter = PointFilter {
            measurement: Some("mem".to_owned()),
            tags: TagPredicate::Equals("host".to_owned(), "a".to_owned()),
            ..PointFilter::all()
        };
        ing.delete(DOWNSAMPLED, &filter).await.unwrap();
        let started = std::time::Instant::now();
        ing.downsample().await.unwrap();
        // Not a speed test: bounded by 1970 the pass runs some 40,000
        // statements (minutes); bounded by the rows, a few (milliseconds).
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "the pass rebuilt decades"
        );
        let table = format!("`{DOWNSAMPLED}`.`_rollup.5m.mem.autogen`");
        let rows = tsv(
            &ing,
            &format!("SELECT time, `used@count`, `used@sum` FROM {table}"),
        )
        .await;
        assert_eq!(rows, "2026-01-01 00:00:00.000000000\t1\t2\n");
    })
}

fn rows_of_the_newest_bucket_wait_for_it_to_close_and_are_read_from_the_rows() {
    run(async {
        let ing = ingestor().await;
        let write = |body: String| write_to(&ing, DOWNSAMPLED, body);
        let now_ns = chingest::clock::now_ns;
        const BUCKET_NS: i64 = 300 * 1_000_000_000;
        // Not in a 5 m bucket's last two seconds: it stays open throughout.
        while now_ns().rem_euclid(BUCKET_NS) > BUCKET_NS - 2_000_000_000 {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        write(format!("live,host=a v=1 {START_NS}")).await;
        ing.downsample().await.unwrap();
        let t = now_ns();
        write(format!("live,host=a v=2 {t}")).await;
        ing.downsample().await.unwrap();
        let held = format!(
            "SELECT count() FROM `{DOWNSAMPLED}`.`_rollup.5m.live.autogen` \
             WHERE time >= fromUnixTimestamp64Nano(toInt64({}))",
            t - t.rem_euclid(BUCKET_NS)
        );
        assert_eq!(tsv(&ing, &held).await, "0\n", "the open bucket waits");
        let view = ing.rollups((DOWNSAMPLED, "autogen", "live")).unwrap();
        assert!(
            view.unsettled.is_some_and(|(from, to)| from <= t && t < to),
            "readers read its rows: {view:?}"
        );
        // A late row in a closed bucket: that pass takes the open one too.
        write(format!("live,host=a v=3 {}", START_NS + MINUTE_NS)).await;
        ing.downsample().await.unwrap();
        assert_eq!(tsv(&ing, &held).await, "1\n");
        let view = ing.rollups((DOWNSAMPLED, "autogen", "live")).unwrap();
        assert_eq!(view.unsettled, None);
        // A row stamped an hour ahead (a clock ahead) is not waited for.
        write(format!("live,host=a v=4 {}", t + 3600 * 1_000_000_000)).await;
        ing.downsample().await.unwrap();
        assert_eq!(tsv(&ing, &held).await, "2\n");
        let view = ing.rollups((DOWNSAMPLED, "autogen", "live")).unwrap();
        assert_eq!(view.unsettled, None);
    })
}
