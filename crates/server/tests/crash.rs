//! Crashes under load: the real `chingest` binary, in its default
//! durability mode (fsync), takes concurrent writes and is stopped at a
//! random moment, then restarted on the same data directory — over and
//! over. Two kinds of crash:
//!
//! - kill -9: the process dies, the machine's page cache keeps what it
//!   wrote;
//! - a power cut: the data directory is on [`forgetfs`], which forgets every
//!   write that was not fsynced (file contents, and names in directories
//!   that were not synced) when the server is killed. Half the cuts come
//!   during the load, half a few seconds after it, when flushes have
//!   committed and the checkpoint has deleted log segments. Deletes and
//!   updates run beside the writes (each one syncs every table's directory
//!   while inserts into them are half done), some cut off by the crash.
//!
//! After every restart:
//!
//! - every request that was answered 204 is stored, exactly once, in the
//!   fact tables and in the views;
//! - no request is torn: each one's rows (in two tables) are all there or
//!   none;
//! - every fact row has its series row;
//! - an acknowledged delete or update holds (one the crash cut off may
//!   hold or not, but leaves no request torn);
//! - after a power cut: the engine found no broken part, and `/health`
//!   passes.
//!
//! The server runs as a child process (the engine is process-global), so
//! this test binary does not open an engine itself.

#[path = "support/child.rs"]
mod child;

use std::collections::{BTreeMap, HashSet};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use child::{client, get, sql, start, start_with, wait_ready, Server};

const TRIALS: usize = 10;
const WRITERS: usize = 4;
/// Lines per request in each of the two measurements.
const LINES: usize = 200;
const DB: &str = "crash";
const MEASUREMENTS: [&str; 2] = ["crash_a", "crash_b"];

/// The body of request `id`: `LINES` lines in each of two measurements,
/// on series new to the database every few requests. Line `l` of request
/// `id` is at `id * LINES + l` ns.
fn body(writer: usize, id: u64) -> String {
    let mut body = String::new();
    for m in MEASUREMENTS {
        for line in 0..LINES {
            let ts = id * LINES as u64 + line as u64;
            body.push_str(&format!(
                "{m},w={writer},s={} req={id}i,line={line}i {ts}\n",
                // New series every third request, within the default
                // limit of 100,000 values per tag however many requests a
                // fast machine gets through (they wrap after 27,000).
                (id / 3 % 9_000) * 10 + (line % 10) as u64
            ));
        }
    }
    body
}

/// What the server acknowledged.
#[derive(Debug, Default, Clone)]
struct Acked {
    writes: Vec<u64>,
    /// Requests deleted whole (in both measurements).
    deleted: HashSet<u64>,
    /// Requests whose `line` field was set to -1 (in both measurements).
    updated: HashSet<u64>,
    /// Requests an edit was sent for but not answered (the server was
    /// killed): deleted, updated or neither, but not torn.
    uncertain: HashSet<u64>,
}

/// Posts requests until told to stop or the server dies; records the ids
/// answered 204.
async fn writer(
    url: String,
    writer: usize,
    next: Arc<Mutex<u64>>,
    acked: Arc<Mutex<Acked>>,
    stop: Arc<AtomicBool>,
) {
    let client = client();
    while !stop.load(Ordering::Relaxed) {
        let id = {
            let mut next = next.lock().unwrap();
            *next += 1;
            *next
        };
        let sent = client
            .post(format!("{url}/write?db={DB}"))
            .body(body(writer, id))
            .send()
            .await;
        match sent {
            Ok(r) if r.status() == reqwest::StatusCode::NO_CONTENT => {
                acked.lock().unwrap().writes.push(id)
            }
            Ok(r) => {
                let status = r.status();
                let text = r.text().await.unwrap_or_default();
                panic!(
                    "request {id}: {status} {}",
                    &text[..text.floor_char_boundary(500)]
                )
            }
            // The server was killed.
            Err(_) => return,
        }
    }
}

/// Request `id`'s time range, as an edit's body (both ends inclusive).
fn edit_body(id: u64, measurement: &str, set: &str) -> String {
    let time = |ns: u64| format!("1970-01-01T00:00:00.{ns:09}Z");
    let first = id * LINES as u64;
    format!(
        r#"{{"start": "{}", "stop": "{}", "predicate": "_measurement=\"{measurement}\""{set}}}"#,
        time(first),
        time(first + LINES as u64 - 1)
    )
}

/// Deletes request `delete` and sets `line = -1` in request `update`, in
/// both measurements; records each once it is answered 204. Returns false
/// if the server died first: the edit in flight then leaves its request
/// uncertain.
async fn edit(url: &str, acked: &Mutex<Acked>, delete: u64, update: u64) -> bool {
    for (id, path, set) in [
        (delete, "delete", ""),
        (update, "update", r#", "set": {"line": -1}"#),
    ] {
        acked.lock().unwrap().uncertain.insert(id);
        for measurement in MEASUREMENTS {
            let sent = client()
                .post(format!("{url}/api/v2/{path}?bucket={DB}"))
                .body(edit_body(id, measurement, set))
                .send()
                .await;
            let Ok(r) = sent else { return false };
            assert_eq!(r.status(), reqwest::StatusCode::NO_CONTENT, "{path} {id}");
        }
        let mut acked = acked.lock().unwrap();
        acked.uncertain.remove(&id);
        match path {
            "delete" => acked.deleted.insert(id),
            _ => acked.updated.insert(id),
        };
    }
    true
}

/// Two acknowledged requests never edited before, to delete and to
/// update.
fn pick_edits(acked: &Acked) -> Option<(u64, u64)> {
    let fresh: Vec<u64> = acked
        .writes
        .iter()
        .copied()
        .filter(|id| {
            *id != 0
                && !acked.deleted.contains(id)
                && !acked.updated.contains(id)
                && !acked.uncertain.contains(id)
        })
        .collect();
    (fresh.len() >= 3).then(|| (fresh[fresh.len() / 3], fresh[2 * fresh.len() / 3]))
}

/// Edits (see [`pick_edits`]) one delete and one update at a time, until
/// told to stop or the server dies. Each edit syncs every table's
/// directory and deduplication log while the writers' inserts run.
async fn editor(url: String, acked: Arc<Mutex<Acked>>, stop: Arc<AtomicBool>) {
    while !stop.load(Ordering::Relaxed) {
        let picked = pick_edits(&acked.lock().unwrap());
        let Some((delete, update)) = picked else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        if !edit(&url, &acked, delete, update).await {
            return;
        }
    }
}

/// Rows per request id in a table or view, and how many of them were
/// updated.
async fn counts(server: &Server, table: &str) -> BTreeMap<u64, (u64, u64)> {
    let text = sql(
        server,
        &format!("SELECT req, count(), countIf(line = -1) FROM {DB}.{table} GROUP BY req"),
    )
    .await;
    text.lines()
        .map(|line| {
            let mut columns = line.split('\t').map(|c| c.parse().unwrap());
            let mut next = || columns.next().unwrap();
            (next(), (next(), next()))
        })
        .collect()
}

async fn check(server: &Server, acked: &Acked, trial: usize) {
    let lines = LINES as u64;
    // Every acknowledged request whose rows are not what they should be,
    // in every table and view, before failing: the pattern says more
    // than the first one.
    let mut wrong = Vec::new();
    for measurement in MEASUREMENTS {
        // The fact table, then the view (tags joined from the series
        // table): a request found in the first and not the second lost
        // series rows.
        for table in [format!("`{measurement}.autogen`"), measurement.to_owned()] {
            let stored = counts(server, &table).await;
            for id in acked
                .writes
                .iter()
                .filter(|id| !acked.uncertain.contains(id))
            {
                let want = if acked.deleted.contains(id) {
                    None
                } else if acked.updated.contains(id) {
                    Some(&(lines, lines))
                } else {
                    Some(&(lines, 0))
                };
                if stored.get(id) != want {
                    wrong.push(format!(
                        "request {id} in {table}: (rows, updated rows) {:?}, want {want:?} \
                         (deleted: {}, updated: {})",
                        stored.get(id),
                        acked.deleted.contains(id),
                        acked.updated.contains(id)
                    ));
                }
            }
            for (id, (rows, _)) in &stored {
                if *rows != lines {
                    wrong.push(format!(
                        "request {id} in {table} is torn or duplicated: {rows} rows"
                    ));
                }
            }
        }
    }
    if !wrong.is_empty() {
        let (_, metrics) = get(server, "/metrics").await;
        let replay: Vec<_> = metrics
            .lines()
            .filter(|l| l.starts_with("chingest_replay") || l.starts_with("chingest_wal_cut"))
            .collect();
        panic!(
            "trial {trial}: {} wrong (of {} acknowledged requests):\n{}\nreplay: {replay:#?}",
            wrong.len(),
            acked.writes.len(),
            wrong[..wrong.len().min(40)].join("\n")
        );
    }
    for measurement in MEASUREMENTS {
        let orphans = sql(
            server,
            &format!(
                "SELECT count() FROM {DB}.`{measurement}.autogen` \
                 WHERE series_id NOT IN (SELECT series_id FROM {DB}._series)"
            ),
        )
        .await;
        assert_eq!(orphans, "0\n", "trial {trial}: facts without series rows");
    }
}

/// Starts `WRITERS` writers on `server`.
fn start_writers(
    server: &Server,
    next: &Arc<Mutex<u64>>,
    acked: &Arc<Mutex<Acked>>,
    stop: &Arc<AtomicBool>,
) -> Vec<tokio::task::JoinHandle<()>> {
    (0..WRITERS)
        .map(|w| {
            tokio::spawn(writer(
                server.url.clone(),
                w,
                Arc::clone(next),
                Arc::clone(acked),
                Arc::clone(stop),
            ))
        })
        .collect()
}

/// Request 0 creates the tables, so that every check can read them.
async fn first_request(server: &Server, acked: &Mutex<Acked>) {
    let r = client()
        .post(format!("{}/write?db={DB}&durability=visible", server.url))
        .body(body(0, 0))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), reqwest::StatusCode::NO_CONTENT);
    acked.lock().unwrap().writes.push(0);
}

/// A deterministic spread of moments: `from` plus up to `spread`.
struct Moments(u64);

impl Moments {
    fn next(&mut self, from: u64, spread: u64) -> Duration {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        Duration::from_millis(from + self.0 % spread)
    }
}

#[test]
fn acknowledged_writes_survive_kill_9_exactly_once() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let acked = Arc::new(Mutex::new(Acked::default()));
    let next = Arc::new(Mutex::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let mut moments = Moments(0x2545_f491_4f6c_dd1d);
    for trial in 0..TRIALS {
        let mut server = start(dir.path());
        runtime.block_on(async {
            wait_ready(&server).await;
            if trial == 0 {
                first_request(&server, &acked).await;
            }
            let so_far = acked.lock().unwrap().clone();
            check(&server, &so_far, trial).await;
            let writers = start_writers(&server, &next, &acked, &stop);
            // 150 ms to 1.2 s into the load.
            tokio::time::sleep(moments.next(150, 1050)).await;
            server.kill();
            for writer in writers {
                writer.await.unwrap();
            }
        });
    }
    let server = start(dir.path());
    runtime.block_on(async {
        wait_ready(&server).await;
        let acked = acked.lock().unwrap().clone();
        assert!(
            acked.writes.len() >= TRIALS,
            "only {} requests were acknowledged",
            acked.writes.len()
        );
        check(&server, &acked, TRIALS).await;
    });
}

/// Parts the engine set aside (`detached/`) anywhere in the data
/// directory: after a power cut, the ones it found broken.
fn detached_parts(data_dir: &Path) -> Vec<String> {
    let mut found = Vec::new();
    let mut dirs = vec![data_dir.join("store")];
    while let Some(dir) = dirs.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if !entry.file_type().is_ok_and(|t| t.is_dir()) {
                continue;
            }
            if path.file_name().is_some_and(|n| n == "detached") {
                found.extend(
                    std::fs::read_dir(&path)
                        .unwrap()
                        .flatten()
                        .map(|e| e.path().display().to_string()),
                );
            } else if path.strip_prefix(data_dir).unwrap().components().count() < 4 {
                // store/<prefix>/<table uuid>/detached
                dirs.push(path);
            }
        }
    }
    found
}

#[test]
fn acknowledged_writes_edits_survive_power_cuts_exactly_once() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let backing = tempfile::tempdir().unwrap();
    let mountpoint = tempfile::tempdir().unwrap();
    let data_dir = mountpoint.path().join("data");
    let acked = Arc::new(Mutex::new(Acked::default()));
    let next = Arc::new(Mutex::new(0));
    let mut moments = Moments(0x9e37_79b9_7f4a_7c15);
    for trial in 0..=TRIALS {
        let disk = forgetfs::mount(backing.path(), mountpoint.path())
            .expect("mounting forgetfs needs root and /dev/fuse");
        let mut server = start(&data_dir);
        runtime.block_on(async {
            wait_ready(&server).await;
            if trial == 0 {
                first_request(&server, &acked).await;
            }
            // Broken parts first: rows they held would be missed below.
            let detached = detached_parts(&data_dir);
            assert!(
                detached.is_empty(),
                "trial {trial}: broken parts {detached:?}"
            );
            let (status, health) = get(&server, "/health").await;
            assert_eq!(status, reqwest::StatusCode::OK, "trial {trial}: {health:?}");
            let so_far = acked.lock().unwrap().clone();
            check(&server, &so_far, trial).await;
            if trial == TRIALS {
                return;
            }
            let stop = Arc::new(AtomicBool::new(false));
            let writers = start_writers(&server, &next, &acked, &stop);
            tokio::time::sleep(moments.next(300, 700)).await;
            // A delete and an update acknowledged before the crash, then
            // more of them beside the writes.
            let picked = pick_edits(&acked.lock().unwrap());
            let (delete, update) = picked.expect("requests to edit");
            assert!(edit(&server.url, &acked, delete, update).await);
            let editor = tokio::spawn(editor(
                server.url.clone(),
                Arc::clone(&acked),
                Arc::clone(&stop),
            ));
            if trial % 2 == 0 {
                // During the load and the edits.
                tokio::time::sleep(moments.next(100, 1000)).await;
            } else {
                // After them: flushes committed, the checkpoint has moved
                // and log segments are gone.
                tokio::time::sleep(moments.next(500, 500)).await;
                stop.store(true, Ordering::Relaxed);
                for writer in writers {
                    writer.await.unwrap();
                }
                editor.await.unwrap();
                tokio::time::sleep(moments.next(2500, 1500)).await;
                server.kill();
                return;
            }
            server.kill();
            for writer in writers {
                writer.await.unwrap();
            }
            editor.await.unwrap();
        });
        server.kill();
        disk.cut();
    }
    let acked = acked.lock().unwrap();
    assert!(
        acked.writes.len() >= TRIALS * 10,
        "only {} requests were acknowledged",
        acked.writes.len()
    );
    assert!(
        acked.deleted.len() >= TRIALS && acked.updated.len() >= TRIALS,
        "only {} deletes and {} updates were acknowledged",
        acked.deleted.len(),
        acked.updated.len()
    );
}

/// The data files of every part of the fact tables (those with a `req`
/// column) are cut to nothing: the engine will find them broken.
fn break_fact_parts(data_dir: &Path) -> usize {
    let mut broken = 0;
    for prefix in std::fs::read_dir(data_dir.join("store")).unwrap().flatten() {
        for table in std::fs::read_dir(prefix.path()).unwrap().flatten() {
            let Ok(parts) = std::fs::read_dir(table.path()) else {
                continue;
            };
            for part in parts.flatten() {
                let columns = std::fs::read_to_string(part.path().join("columns.txt"));
                if !columns.is_ok_and(|c| c.contains("`req`")) {
                    continue;
                }
                for file in std::fs::read_dir(part.path()).unwrap().flatten() {
                    if file.path().extension().is_some_and(|e| e == "bin") {
                        std::fs::write(file.path(), b"").unwrap();
                    }
                }
                broken += 1;
            }
        }
    }
    broken
}

/// A part the engine finds broken when it opens is never a silent loss:
/// the start logs it, `/health` fails naming it and `/metrics` counts it;
/// reported once, the next start is healthy again. (Its rows are inserted
/// again from the log only where the engine's deduplication log forgot
/// them: here it remembers them, so they stay lost, and loudly.)
#[test]
fn broken_parts_are_reported() {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let data_dir = dir.path().join("data");
    // The checkpoint does not move: the log keeps every committed flush.
    let config = dir.path().join("chingest.toml");
    std::fs::write(&config, "[wal]\ncheckpoint_interval_ms = 3600000\n").unwrap();
    let start_configured = || start_with(&data_dir, &["--config".as_ref(), config.as_os_str()]);
    let acked = Mutex::new(Acked::default());
    let mut server = start_configured();
    runtime.block_on(async {
        wait_ready(&server).await;
        first_request(&server, &acked).await;
        for id in 1..5 {
            let r = client()
                .post(format!("{}/write?db={DB}&durability=visible", server.url))
                .body(body(1, id))
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), reqwest::StatusCode::NO_CONTENT);
            acked.lock().unwrap().writes.push(id);
        }
        assert_eq!(get(&server, "/health").await.0, reqwest::StatusCode::OK);
    });
    server.kill();
    assert!(
        break_fact_parts(&data_dir) >= 2,
        "no fact parts found to break"
    );

    let mut server = start_configured();
    runtime.block_on(async {
        wait_ready(&server).await;
        let (status, text) = get(&server, "/health").await;
        assert_eq!(status, reqwest::StatusCode::SERVICE_UNAVAILABLE, "{text}");
        assert!(text.contains("broken part"), "{text}");
        let (_, metrics) = get(&server, "/metrics").await;
        let broken = metrics
            .lines()
            .find_map(|l| l.strip_prefix("chingest_engine_broken_parts_total "))
            .expect("the metric is there");
        assert_ne!(broken, "0", "{metrics}");
    });
    server.kill();

    // Reported once: the next start is healthy.
    let server = start_configured();
    runtime.block_on(async {
        wait_ready(&server).await;
        assert_eq!(get(&server, "/health").await.0, reqwest::StatusCode::OK);
    });
}
