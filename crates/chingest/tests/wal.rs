//! The write-ahead log against the real engine, across crashes: each phase
//! is a child process, and `-crash` phases end killed (see `phases`).

mod phases;

use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use chingest::{
    DuplicatePolicy, Durability, Error, IngestConfig, Ingestor, WriteOptions, WriteOutcome,
};
use phases::crash;

const DB: &str = "waldb";
/// Writes per phase, and lines per write in each of two measurements.
const WRITES: usize = 10;
const LINES: usize = 100;
const ROWS: usize = WRITES * LINES;

fn main() {
    let trials = vec![
        phases::trial(
            "synced_writes_survive_a_crash_and_are_replayed_once",
            || {
                let dir = tempfile::tempdir().unwrap();
                phases::run(dir.path(), &["logged-crash", "replayed", "nothing-left"]);
            },
        ),
        phases::trial(
            "an_insert_redone_after_a_crash_before_its_checkpoint_is_stored_once",
            || {
                let dir = tempfile::tempdir().unwrap();
                phases::run(dir.path(), &["inserted-crash"]);
                let stripped = strip_commit_markers(&dir.path().join("wal"));
                assert!(stripped > 0, "the inserts were logged as committed");
                phases::run(dir.path(), &["deduplicated"]);
            },
        ),
        phases::trial(
            "an_insert_whose_part_was_lost_after_its_deduplication_record_is_stored_again",
            || {
                // A power cut between the sync of an insert's deduplication
                // record and the sync of its part leaves the record and not
                // the part. Made here by hand: the inserts land (merges
                // stopped, so each flush is a part of its own), the log
                // forgets their commits, and the newest part of each table
                // goes while its record stays.
                let dir = tempfile::tempdir().unwrap();
                phases::run(dir.path(), &["inserted-unmerged-crash"]);
                assert!(strip_commit_markers(&dir.path().join("wal")) > 0);
                for table in ["cpu%2Eautogen", "mem%2Eautogen"] {
                    remove_newest_part(&dir.path().join("data").join(DB).join(table));
                }
                phases::run(dir.path(), &["deduplicated"]);
            },
        ),
        phases::trial(
            "a_failing_insert_keeps_its_rows_in_the_log_until_the_fault_clears",
            || {
                let dir = tempfile::tempdir().unwrap();
                phases::run(dir.path(), &["fault-crash", "fault-cleared"]);
            },
        ),
        phases::trial("a_full_disk_is_an_error_the_writer_sees", || {
            // The log on a 1 MiB file system of its own (mounting needs
            // root, as the tests have in CI).
            let dir = tempfile::tempdir().unwrap();
            let small = dir.path().join("small-disk");
            std::fs::create_dir(&small).unwrap();
            let mounted = std::process::Command::new("mount")
                .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
                .arg(&small)
                .status()
                .unwrap();
            assert!(mounted.success(), "mounting a tmpfs for the log");
            let result = std::panic::catch_unwind(|| phases::run(dir.path(), &["disk-full"]));
            let _ = std::process::Command::new("umount").arg(&small).status();
            if let Err(panic) = result {
                std::panic::resume_unwind(panic);
            }
        }),
        phases::trial(
            "the_last_policy_keeps_influxdbs_answer_through_a_crash_and_a_retry",
            || {
                let dir = tempfile::tempdir().unwrap();
                phases::run(dir.path(), &["dup-crash", "dup-replayed"]);
            },
        ),
        phases::trial("a_full_log_refuses_writes_until_inserts_drain_it", || {
            phases::run(tempfile::tempdir().unwrap().path(), &["log-full"]);
        }),
    ];
    phases::main(
        trials,
        |phase, dir| async move { child(&phase, &dir).await },
    )
}

/// Removes every `FlushCommitted` frame (kind 3) from the log's segments:
/// the log of a crash after inserts landed but before they were marked.
/// Returns how many were removed.
/// Removes the part the table's deduplication log names last (the newest
/// insert's), keeping its record.
fn remove_newest_part(table_dir: &Path) {
    let logs = table_dir.join("deduplication_logs");
    let mut files: Vec<_> = std::fs::read_dir(&logs)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    files.sort_by_key(|path| {
        let stem = path.file_stem().unwrap().to_str().unwrap().to_owned();
        stem.rsplit('_').next().unwrap().parse::<u64>().unwrap()
    });
    let last = std::fs::read_to_string(files.last().unwrap()).unwrap();
    let part = last
        .lines()
        .last()
        .unwrap()
        .split('\t')
        .nth(1)
        .unwrap()
        .to_owned();
    let path = table_dir.join(&part);
    assert!(path.is_dir(), "part {part} is not on disk");
    std::fs::remove_dir_all(path).unwrap();
}

fn strip_commit_markers(wal: &Path) -> usize {
    const MAGIC_LEN: usize = 8;
    const KIND_FLUSH_COMMITTED: u8 = 3;
    let mut stripped = 0;
    for entry in std::fs::read_dir(wal).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_none_or(|e| e != "wal") {
            continue;
        }
        let bytes = std::fs::read(&path).unwrap();
        let mut kept = bytes[..MAGIC_LEN].to_vec();
        let mut at = MAGIC_LEN;
        while at + 8 <= bytes.len() {
            let len = u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()) as usize;
            let frame = &bytes[at..at + 8 + len];
            if frame[8] == KIND_FLUSH_COMMITTED {
                stripped += 1;
            } else {
                kept.extend_from_slice(frame);
            }
            at += 8 + len;
        }
        std::fs::write(&path, kept).unwrap();
    }
    stripped
}

/// Write `n`: `LINES` lines into each of `cpu` and `mem`, over 7 hosts.
/// Field `k` numbers the lines of a measurement 0, 1, 2, … across writes.
fn body(n: usize) -> String {
    let mut body = String::new();
    for measurement in ["cpu", "mem"] {
        for i in 0..LINES {
            let k = n * LINES + i;
            body.push_str(&format!(
                "{measurement},host=h{} k={k}i {}\n",
                k % 7,
                1_700_000_000_000_000_000 + k as i64
            ));
        }
    }
    body
}

/// Points written twice in one request (t = 1) and across two (t = 2),
/// each time with some fields, for the `last` duplicate policy.
const DUP_FIRST: &str = "m,h=a x=1i,y=1i 1\nm,h=a x=2i 1\nm,h=a x=3i 2\n";
const DUP_SECOND: &str = "m,h=a y=9i 2\nm,h=b x=1i 1\n";
/// InfluxDB's answer: per point, each field's newest written value.
const DUP_ANSWER: &str = "a\t1\t2\t1\na\t2\t3\t9\nb\t1\t1\t\\N\n";

/// The points of `db`'s `m`: host, time, x, y.
async fn dup_points(ing: &Ingestor, db: &str) -> String {
    let sql = format!("SELECT h, toUnixTimestamp64Nano(time), x, y FROM {db}.m ORDER BY h, time");
    String::from_utf8(ing.query_trusted(&sql, "TabSeparated").await.unwrap()).unwrap()
}

/// Writes `body(n)` in `durability`.
async fn write(ing: &Ingestor, n: usize, durability: Durability) -> chingest::Result<WriteOutcome> {
    let options = WriteOptions {
        durability,
        ..WriteOptions::default()
    };
    ing.write_lp(DB, "autogen", body(n).as_bytes(), &options)
        .await
}

async fn scalar(ing: &Ingestor, sql: &str) -> u64 {
    let text = ing.query_trusted(sql, "TabSeparated").await.unwrap();
    let text = String::from_utf8(text).unwrap();
    text.trim()
        .parse()
        .unwrap_or_else(|_| panic!("{sql}: {text:?}"))
}

/// Each measurement holds exactly the rows of the first `writes` writes,
/// once each, and every fact row has its series row.
async fn assert_stored_once(ing: &Ingestor, writes: usize) {
    let rows = (writes * LINES) as u64;
    for m in ["cpu", "mem"] {
        let table = format!("{DB}.`{m}.autogen`");
        assert_eq!(
            scalar(ing, &format!("SELECT count() FROM {table}")).await,
            rows,
            "{m}"
        );
        let distinct = format!("SELECT uniqExact(k) FROM {table}");
        assert_eq!(scalar(ing, &distinct).await, rows, "{m}");
        let orphans = format!(
            "SELECT count() FROM {table} WHERE series_id NOT IN (SELECT series_id FROM {DB}._series)"
        );
        assert_eq!(
            scalar(ing, &orphans).await,
            0,
            "{m}: fact rows without a series"
        );
    }
    let series = format!("SELECT count() FROM {DB}._series FINAL");
    assert_eq!(
        scalar(ing, &series).await,
        14,
        "7 hosts in each of two measurements"
    );
}

/// Polls until `done` or ten seconds have passed.
async fn wait_for(what: &str, done: impl Fn() -> bool) {
    let give_up = Instant::now() + Duration::from_secs(10);
    while !done() {
        assert!(Instant::now() < give_up, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Makes inserts into `m`'s MergeTree fail while `check` is false (a
/// constraint the engine checks on every insert), or, with `None`, no more.
async fn set_fault(ing: &Ingestor, m: &str, check: Option<&str>) {
    let alter = match check {
        Some(check) => format!("ADD CONSTRAINT chingest_fault CHECK {check}"),
        None => "DROP CONSTRAINT chingest_fault".to_owned(),
    };
    ing.query_trusted(
        &format!("ALTER TABLE {DB}.`{m}.autogen` {alter}"),
        "TabSeparated",
    )
    .await
    .unwrap();
}

/// Where the fault phases keep the time (Unix seconds) their fault ends.
fn fault_end_file(dir: &Path) -> std::path::PathBuf {
    dir.join("fault-ends-at")
}

/// Unix time in seconds.
fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

async fn child(phase: &str, dir: &Path) {
    if phase == "fault-cleared" {
        // Opens (and replays) once the fault has ended.
        let ends: u64 = std::fs::read_to_string(fault_end_file(dir))
            .unwrap()
            .parse()
            .unwrap();
        while unix_now() <= ends {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let mut config = IngestConfig::new(dir);
    // Checkpoints only where a phase takes them (on close, after replay).
    config.wal.checkpoint_interval = Duration::from_secs(3600);
    match phase {
        // Nothing is inserted before the crash: every row must come back
        // from the log.
        "logged-crash" => {
            config.flush.max_age = Duration::from_secs(3600);
            config.flush.max_rows = usize::MAX;
        }
        "fault-crash" | "fault-cleared" => {
            config.flush.max_age = Duration::from_millis(50);
            config.wal.checkpoint_interval = Duration::from_millis(100);
        }
        "disk-full" => {
            config.wal.dir = Some(dir.join("small-disk"));
            config.wal.segment_bytes = 64 << 10;
            config.wal.checkpoint_interval = Duration::from_millis(50);
            // Nothing is inserted, so nothing is checkpointed, until asked.
            config.flush.max_age = Duration::from_secs(3600);
            config.flush.max_rows = usize::MAX;
        }
        // Logged, never inserted before the crash.
        "dup-crash" => {
            config.duplicate_policy = DuplicatePolicy::Last;
            config.flush.max_age = Duration::from_secs(3600);
            config.flush.max_rows = usize::MAX;
        }
        "dup-replayed" => config.duplicate_policy = DuplicatePolicy::Last,
        "log-full" => {
            config.flush.max_age = Duration::from_millis(50);
            config.wal.max_bytes = 256 << 10;
            config.wal.segment_bytes = 64 << 10;
            config.overload_wait = Duration::from_millis(100);
            config.wal.checkpoint_interval = Duration::from_millis(100);
        }
        _ => {}
    }
    let ing = Ingestor::open(config).await.unwrap();
    let stats = ing.stats();
    match phase {
        "logged-crash" => {
            for n in 0..WRITES {
                let outcome = write(&ing, n, Durability::Fsync).await.unwrap();
                assert_eq!(outcome.accepted, 2 * LINES);
            }
            let count = format!("SELECT count() FROM {DB}.`cpu.autogen`");
            assert_eq!(scalar(&ing, &count).await, 0, "nothing inserted yet");
            crash();
        }
        "replayed" => {
            assert_eq!(stats.replay_rows.load(Ordering::Relaxed), 2 * ROWS as u64);
            assert!(stats.replay_records.load(Ordering::Relaxed) >= WRITES as u64);
            assert_stored_once(&ing, WRITES).await;
        }
        "nothing-left" => {
            // The replay's checkpoint covered everything it inserted.
            assert_eq!(stats.replay_rows.load(Ordering::Relaxed), 0);
            assert_stored_once(&ing, WRITES).await;
        }
        "inserted-crash" => {
            for n in 0..WRITES {
                write(&ing, n, Durability::Visible).await.unwrap();
            }
            assert_stored_once(&ing, WRITES).await;
            crash();
        }
        "inserted-unmerged-crash" => {
            write(&ing, 0, Durability::Visible).await.unwrap();
            for table in ["cpu.autogen", "mem.autogen"] {
                ing.query_trusted(&format!("SYSTEM STOP MERGES {DB}.`{table}`"), "TSV")
                    .await
                    .unwrap();
            }
            for n in 1..WRITES {
                write(&ing, n, Durability::Visible).await.unwrap();
            }
            assert_stored_once(&ing, WRITES).await;
            crash();
        }
        "deduplicated" => {
            // The log no longer shows the inserts committed: replay does
            // them again, under their tokens, and the engine ignores them.
            assert!(stats.replay_rows.load(Ordering::Relaxed) > 0);
            assert_stored_once(&ing, WRITES).await;
        }
        "fault-crash" => {
            write(&ing, 0, Durability::Visible).await.unwrap();
            // The fault holds for the rest of this process (a few seconds
            // at most), and has ended when the next opens.
            let ends = unix_now() + 8;
            std::fs::write(fault_end_file(dir), ends.to_string()).unwrap();
            let check = format!("now() > toDateTime({ends})");
            set_fault(&ing, "cpu", Some(&check)).await;
            for n in 1..WRITES {
                // Answered: the rows are in the log, whatever the engine does.
                write(&ing, n, Durability::Fsync).await.unwrap();
            }
            wait_for("failed inserts", || {
                stats.flush_errors.load(Ordering::Relaxed) >= 2
            })
            .await;
            let cpu = format!("SELECT count() FROM {DB}.`cpu.autogen`");
            assert_eq!(
                scalar(&ing, &cpu).await,
                LINES as u64,
                "only the first write is in"
            );
            // The other table is not held back by the failing one.
            let mem = format!("SELECT count() FROM {DB}.`mem.autogen`");
            wait_for_count(&ing, &mem, ROWS as u64).await;
            // Checkpoints pass meanwhile; they must keep the failed rows.
            tokio::time::sleep(Duration::from_millis(500)).await;
            crash();
        }
        "fault-cleared" => {
            // The failed rows came back from the log.
            let replayed = stats.replay_rows.load(Ordering::Relaxed);
            assert!(
                replayed >= ((WRITES - 1) * LINES) as u64,
                "{replayed} rows replayed"
            );
            set_fault(&ing, "cpu", None).await;
            assert_stored_once(&ing, WRITES).await;
            // A fault that clears while the process runs: the rows land by
            // the flusher's retries.
            set_fault(&ing, "cpu", Some("0")).await;
            for n in WRITES..2 * WRITES {
                write(&ing, n, Durability::Fsync).await.unwrap();
            }
            let errors = stats.flush_errors.load(Ordering::Relaxed);
            wait_for("failed inserts", || {
                stats.flush_errors.load(Ordering::Relaxed) > errors
            })
            .await;
            set_fault(&ing, "cpu", None).await;
            ing.flush().await.unwrap();
            assert_stored_once(&ing, 2 * WRITES).await;
            ing.close().await.unwrap();
        }
        "disk-full" => {
            let mut answered = 0;
            let refused = loop {
                match write(&ing, answered, Durability::Fsync).await {
                    Ok(_) => answered += 1,
                    Err(err) => break err,
                }
                assert!(answered < 1000, "a 1 MiB disk never filled");
            };
            assert!(answered > 0);
            let Error::Io { source, .. } = &refused else {
                panic!("a full disk is an I/O error, not {refused:?}")
            };
            assert_eq!(source.kind(), std::io::ErrorKind::StorageFull, "{refused}");
            // What was answered is kept and inserted; the refused write left
            // nothing behind.
            ing.flush().await.unwrap();
            let cpu = format!("SELECT count() FROM {DB}.`cpu.autogen`");
            assert_eq!(scalar(&ing, &cpu).await, (answered * LINES) as u64);
            // Inserted rows are checkpointed away: the disk has room again.
            wait_for("the checkpoint", || {
                stats.wal_segments.load(Ordering::Relaxed) <= 1
            })
            .await;
            write(&ing, answered, Durability::Visible).await.unwrap();
            assert_eq!(scalar(&ing, &cpu).await, ((answered + 1) * LINES) as u64);
            ing.close().await.unwrap();
        }
        "log-full" => {
            write(&ing, 0, Durability::Visible).await.unwrap();
            set_fault(&ing, "cpu", Some("0")).await;
            let mut refused = None;
            for n in 1..1000 {
                match write(&ing, n, Durability::Fsync).await {
                    Ok(_) => {}
                    Err(err) => {
                        refused = Some(err);
                        break;
                    }
                }
            }
            let refused = refused.expect("writes are refused once the log is full");
            assert!(
                matches!(refused, Error::LogFull { limit, .. } if limit == 256 << 10),
                "{refused}"
            );
            set_fault(&ing, "cpu", None).await;
            ing.flush().await.unwrap();
            // Inserted, then checkpointed and truncated: room again.
            let limit = 256 << 10;
            wait_for("the checkpoint", || {
                stats.wal_size_bytes.load(Ordering::Relaxed) < limit / 2
            })
            .await;
            write(&ing, 0, Durability::Visible).await.unwrap();
            ing.close().await.unwrap();
        }
        "dup-crash" => {
            // Visible: one table merges what one request and two carry.
            let options = |durability| WriteOptions {
                durability,
                ..WriteOptions::default()
            };
            let visible = options(Durability::Visible);
            ing.write_lp("dupv", "autogen", DUP_FIRST.as_bytes(), &visible)
                .await
                .unwrap();
            ing.write_lp("dupv", "autogen", DUP_SECOND.as_bytes(), &visible)
                .await
                .unwrap();
            assert_eq!(dup_points(&ing, "dupv").await, DUP_ANSWER);
            // Logged only, then a crash: replay must give the same answer.
            let fsync = options(Durability::Fsync);
            for body in [DUP_FIRST, DUP_SECOND] {
                ing.write_lp("dup", "autogen", body.as_bytes(), &fsync)
                    .await
                    .unwrap();
            }
            crash();
        }
        "dup-replayed" => {
            assert_eq!(dup_points(&ing, "dup").await, DUP_ANSWER);
            // A sender's retry of the second request changes nothing.
            let visible = WriteOptions {
                durability: Durability::Visible,
                ..WriteOptions::default()
            };
            ing.write_lp("dup", "autogen", DUP_SECOND.as_bytes(), &visible)
                .await
                .unwrap();
            ing.query_trusted("OPTIMIZE TABLE dup.`m.autogen` FINAL", "CSV")
                .await
                .unwrap();
            assert_eq!(dup_points(&ing, "dup").await, DUP_ANSWER);
            let stored = "SELECT count() FROM dup.`m.autogen` SETTINGS final = 0";
            assert_eq!(scalar(&ing, stored).await, 3, "merged to one row per point");
        }
        other => panic!("unknown phase {other}"),
    }
}

async fn wait_for_count(ing: &Ingestor, sql: &str, expected: u64) {
    let give_up = Instant::now() + Duration::from_secs(10);
    while scalar(ing, sql).await != expected {
        assert!(Instant::now() < give_up, "{sql}: never reached {expected}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
