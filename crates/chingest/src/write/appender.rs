//! The appender: the one thread that writes the log.
//!
//! Writers queue their records here; the thread takes everything queued at
//! once (a group), numbers each record, encodes the group into one buffer,
//! writes it with one `write`, and syncs it with one `fdatasync` if any
//! record of the group asked for it. Writers that arrive while a group is
//! being written form the next group, so a sync covers more writes as the
//! load grows (group commit).
//!
//! After a group is in the log, the thread hands each write's rows on
//! through its [`WriteNotifier`] (the last-value cache, then the tables'
//! batchers), in log order — which is what lets a flush name its rows by a
//! range of lsns — and answers the writers.
//!
//! Series are registered here too, in log order: a record carries the
//! series rows that no earlier record carries, so a fact row in the log is
//! never ahead of its series row.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::Instant;

use arrow::array::AsArray;
use arrow::datatypes::TimestampNanosecondType;
use arrow::record_batch::RecordBatch;
use tokio::sync::oneshot;

use crate::catalog::{Admission, Database};
use crate::error::{Error, Result};
use crate::layout::series::SeriesKey;
use crate::stats::IngestStats;
use crate::wal::{self, FlushRange, LogFiles, Lsn};
use crate::write::batcher::TablePart;

/// What the appender hands each write to, on its thread and in log order:
/// the layers that take a write's rows once it is logged (InfluxDB 3's
/// WAL notifier, in shape). The appender knows nothing of them.
pub(crate) trait WriteNotifier: Send + Sync {
    /// Before the write's record is encoded: the series `tables` bring that
    /// are new to their database (a series' tags are the same whether the
    /// write lands or not).
    fn registering(&self, tables: &[TablePart], series: &[(u64, SeriesKey)]);
    /// The write numbered `lsn` is in the log (acknowledged): its rows go
    /// on. Its writer is answered after this returns.
    fn logged(&self, lsn: Lsn, tables: Vec<TablePart>);
}

/// A write waiting to be logged.
#[derive(Debug)]
pub(crate) struct PendingWrite {
    pub(crate) db: Arc<Database>,
    pub(crate) rp: String,
    pub(crate) tables: Vec<TablePart>,
    /// Series the write met that were new to the database when it was
    /// parsed; those still new when it is logged go into its record.
    pub(crate) series: Vec<(u64, SeriesKey)>,
    /// Raw series keys → ids, for the database's lookup cache.
    pub(crate) raw_keys: Vec<(u128, u64)>,
    /// The write's new series, admitted under the cardinality limits:
    /// released when this is dropped, after they are registered.
    pub(crate) _admission: Admission,
    /// The earliest row time (ns) of `tables` ([`earliest_time`];
    /// `i64::MAX`: none), computed by the writer, off the log's thread.
    pub(crate) earliest: i64,
    /// Sync the log before answering.
    pub(crate) sync: bool,
    /// Answered once the record is written (and synced, with `sync`).
    pub(crate) logged: Option<oneshot::Sender<Result<()>>>,
}

/// Something for the appender to do, in queue order.
#[derive(Debug)]
enum Entry {
    Write(PendingWrite),
    /// A flush marker; `done` is answered once it is synced.
    Flush {
        range: FlushRange,
        committed: bool,
        done: Option<oneshot::Sender<Result<()>>>,
    },
    /// Answered once everything queued before it has been handed on.
    Barrier(oneshot::Sender<()>),
    /// Write a checkpoint at this lsn and delete the segments below it.
    Checkpoint(Lsn, oneshot::Sender<Result<()>>),
}

/// Which lsns are done: a write's record is done once each of its tables'
/// rows is committed; markers are done when written. The checkpoint may
/// advance to the last lsn before the first one not done.
#[derive(Debug)]
pub(crate) struct Progress {
    inner: Mutex<ProgressInner>,
}

#[derive(Debug)]
struct ProgressInner {
    /// The lsn of `remaining[0]`.
    base: Lsn,
    /// Table parts not yet committed, per lsn from `base` on.
    remaining: std::collections::VecDeque<u32>,
    /// The earliest row time (ns) of each of those lsns (`i64::MAX`: no
    /// rows).
    earliest: std::collections::VecDeque<i64>,
}

impl Progress {
    fn new(next_lsn: Lsn) -> Progress {
        Progress {
            inner: Mutex::new(ProgressInner {
                base: next_lsn,
                remaining: Default::default(),
                earliest: Default::default(),
            }),
        }
    }

    /// Records that `lsn` (the next lsn handed out) waits for `parts`
    /// table parts, whose earliest row time is `earliest` (ns).
    fn assign(&self, lsn: Lsn, parts: u32, earliest: i64) {
        let mut inner = self.inner.lock().unwrap();
        debug_assert_eq!(lsn, inner.base + inner.remaining.len() as u64);
        inner.remaining.push_back(parts);
        inner.earliest.push_back(earliest);
        inner.pop_done();
    }

    /// Records that one table part of `lsn` is committed.
    pub(crate) fn complete(&self, lsn: Lsn) {
        let mut inner = self.inner.lock().unwrap();
        let Some(index) = lsn.checked_sub(inner.base) else {
            return;
        };
        if let Some(parts) = inner.remaining.get_mut(index as usize) {
            *parts = parts.saturating_sub(1);
        }
        inner.pop_done();
    }

    /// Every lsn up to this one is done.
    pub(crate) fn committed(&self) -> Lsn {
        self.inner.lock().unwrap().base - 1
    }

    /// The earliest row time (ns) of the records numbered and not yet
    /// done: every row acknowledged with an earlier time is in the engine.
    /// `i64::MAX` when none is on its way.
    pub(crate) fn earliest_in_flight(&self) -> i64 {
        let inner = self.inner.lock().unwrap();
        inner.earliest.iter().copied().min().unwrap_or(i64::MAX)
    }
}

impl ProgressInner {
    fn pop_done(&mut self) {
        while self.remaining.front() == Some(&0) {
            self.remaining.pop_front();
            self.earliest.pop_front();
            self.base += 1;
        }
    }
}

#[derive(Debug, Default)]
struct Queue {
    entries: Mutex<(Vec<Entry>, bool)>,
    ready: Condvar,
}

/// The handle to the appender thread.
#[derive(Debug)]
pub(crate) struct Appender {
    queue: Arc<Queue>,
    thread: Mutex<Option<JoinHandle<()>>>,
    /// Which lsns are committed.
    pub(crate) progress: Arc<Progress>,
    log_id: u64,
    stats: Arc<IngestStats>,
    stopped: AtomicBool,
}

impl Appender {
    /// Starts the thread that appends to `files`.
    pub(crate) fn start(
        files: LogFiles,
        stats: Arc<IngestStats>,
        notifier: Arc<dyn WriteNotifier>,
    ) -> Result<Appender> {
        let queue = Arc::new(Queue::default());
        let progress = Arc::new(Progress::new(files.next_lsn()));
        stats.wal_size_bytes.store(files.bytes(), Ordering::Relaxed);
        stats
            .wal_checkpoint_lsn
            .store(files.committed(), Ordering::Relaxed);
        let log_id = files.log_id();
        let thread = {
            let (queue, progress, stats) = (
                Arc::clone(&queue),
                Arc::clone(&progress),
                Arc::clone(&stats),
            );
            std::thread::Builder::new()
                .name("chingest-wal".to_owned())
                .spawn(move || {
                    let mut worker = Worker {
                        files,
                        progress,
                        stats,
                        buffer: Vec::new(),
                        carried_series: Vec::new(),
                        notifier,
                    };
                    while let Some(group) = queue.take() {
                        worker.write_group(group);
                    }
                })
                .map_err(|source| Error::Io {
                    context: "starting the log appender".to_owned(),
                    source,
                })?
        };
        Ok(Appender {
            queue,
            thread: Mutex::new(Some(thread)),
            progress,
            log_id,
            stats,
            stopped: AtomicBool::new(false),
        })
    }

    /// The log's id, part of every deduplication token.
    pub(crate) fn log_id(&self) -> u64 {
        self.log_id
    }

    /// Bytes in the log's segments.
    pub(crate) fn bytes(&self) -> u64 {
        self.stats.wal_size_bytes.load(Ordering::Relaxed)
    }

    fn push(&self, entry: Entry) -> Result<()> {
        let mut entries = self.queue.entries.lock().unwrap();
        if entries.1 {
            return Err(Error::Closed);
        }
        entries.0.push(entry);
        drop(entries);
        self.queue.ready.notify_one();
        Ok(())
    }

    /// Queues a write; its `logged` sender is answered when it is in the log.
    pub(crate) fn write(&self, write: PendingWrite) -> Result<()> {
        self.push(Entry::Write(write))
    }

    /// Logs, durably, that an insert of `range` is about to start.
    pub(crate) async fn flush_started(&self, range: FlushRange) -> Result<()> {
        let (done, answer) = oneshot::channel();
        self.push(Entry::Flush {
            range,
            committed: false,
            done: Some(done),
        })?;
        answer.await.unwrap_or(Err(Error::Closed))
    }

    /// Logs that the insert of `range` committed (not waited for: a lost
    /// marker only makes replay repeat an insert the engine deduplicates).
    pub(crate) fn flush_committed(&self, range: FlushRange) {
        let _ = self.push(Entry::Flush {
            range,
            committed: true,
            done: None,
        });
    }

    /// Returns once every write queued before the call is in the log and
    /// with its batchers.
    pub(crate) async fn barrier(&self) {
        let (done, answer) = oneshot::channel();
        if self.push(Entry::Barrier(done)).is_ok() {
            let _ = answer.await;
        }
    }

    /// Writes a checkpoint at `lsn` (everything up to it is committed) and
    /// deletes the segments it makes unnecessary.
    pub(crate) async fn checkpoint(&self, lsn: Lsn) -> Result<()> {
        let (done, answer) = oneshot::channel();
        self.push(Entry::Checkpoint(lsn, done))?;
        answer.await.unwrap_or(Err(Error::Closed))
    }

    /// Writes what is queued, then stops the thread.
    pub(crate) fn stop(&self) {
        if self.stopped.swap(true, Ordering::SeqCst) {
            return;
        }
        self.queue.entries.lock().unwrap().1 = true;
        self.queue.ready.notify_one();
        if let Some(thread) = self.thread.lock().unwrap().take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Appender {
    fn drop(&mut self) {
        self.stop();
    }
}

impl Queue {
    /// Waits for entries and takes them all; `None` once stopped and empty.
    fn take(&self) -> Option<Vec<Entry>> {
        let mut entries = self.entries.lock().unwrap();
        loop {
            if !entries.0.is_empty() {
                return Some(std::mem::take(&mut entries.0));
            }
            if entries.1 {
                return None;
            }
            entries = self.ready.wait(entries).unwrap();
        }
    }
}

/// The appender thread's state.
struct Worker {
    files: LogFiles,
    progress: Arc<Progress>,
    stats: Arc<IngestStats>,
    /// Reused for every group's frames.
    buffer: Vec<u8>,
    /// Series registered by records whose group failed to be written: other
    /// writes may already rely on them, so the next group logs them first.
    carried_series: Vec<DatabaseSeries>,
    /// Takes each write's rows once it is in the log.
    notifier: Arc<dyn WriteNotifier>,
}

/// Series rows (id, key) of one database, to be logged.
type DatabaseSeries = (Arc<Database>, Vec<(u64, Arc<SeriesKey>)>);

/// A group entry, encoded, waiting for the write to answer it.
enum Encoded {
    Write(Lsn, PendingWrite),
    Flush(Option<oneshot::Sender<Result<()>>>),
    Barrier(oneshot::Sender<()>),
    Checkpoint(Lsn, oneshot::Sender<Result<()>>),
}

impl Worker {
    fn write_group(&mut self, group: Vec<Entry>) {
        self.buffer.clear();
        let mut first_lsn = None;
        let mut sync = false;
        let carried = std::mem::take(&mut self.carried_series);
        for (db, series) in &carried {
            let lsn = self.next_lsn(0, i64::MAX);
            first_lsn.get_or_insert(lsn);
            let empty: [(&str, &[RecordBatch]); 0] = [];
            let encoded = wal::encode_write(
                &mut self.buffer,
                lsn,
                &db.name,
                "",
                series,
                empty.into_iter(),
            );
            encoded.expect("series rows always encode");
        }
        let mut encoded = Vec::with_capacity(group.len());
        let mut fresh_series: Vec<DatabaseSeries> = Vec::new();
        for entry in group {
            let before = self.buffer.len();
            match entry {
                Entry::Write(mut write) => {
                    let lsn = self.next_lsn(write.tables.len() as u32, write.earliest);
                    first_lsn.get_or_insert(lsn);
                    self.notifier.registering(&write.tables, &write.series);
                    let series = write
                        .db
                        .series
                        .register(lsn, std::mem::take(&mut write.series));
                    let tables = write
                        .tables
                        .iter()
                        .map(|part| (part.table.id.measurement.as_str(), part.chunks.as_slice()));
                    let result = wal::encode_write(
                        &mut self.buffer,
                        lsn,
                        &write.db.name,
                        &write.rp,
                        &series,
                        tables,
                    );
                    match result {
                        Ok(()) => {
                            if !series.is_empty() {
                                fresh_series.push((Arc::clone(&write.db), series));
                            }
                            sync |= write.sync;
                            encoded.push(Encoded::Write(lsn, write));
                        }
                        Err(err) => {
                            self.buffer.truncate(before);
                            if !series.is_empty() {
                                self.carried_series.push((Arc::clone(&write.db), series));
                            }
                            let err = std::io::Error::new(std::io::ErrorKind::InvalidData, err);
                            self.fail_write(lsn, write, log_error(&err));
                        }
                    }
                }
                Entry::Flush {
                    range,
                    committed,
                    done,
                } => {
                    let lsn = self.next_lsn(0, i64::MAX);
                    first_lsn.get_or_insert(lsn);
                    wal::encode_flush(&mut self.buffer, lsn, &range, committed)
                        .expect("flush markers always encode");
                    sync |= done.is_some();
                    encoded.push(Encoded::Flush(done));
                }
                Entry::Barrier(done) => encoded.push(Encoded::Barrier(done)),
                Entry::Checkpoint(lsn, done) => encoded.push(Encoded::Checkpoint(lsn, done)),
            }
        }
        let written = match first_lsn {
            Some(first_lsn) => self.append(first_lsn, sync),
            None => Ok(()),
        };
        if first_lsn.is_some() {
            self.stats
                .wal_failing
                .store(written.is_err(), Ordering::Relaxed);
        }
        if let Err(err) = &written {
            tracing::error!(%err, "writing the log failed");
            IngestStats::add(&self.stats.wal_errors, 1);
            // Other writes may rely on these series being logged.
            self.carried_series.extend(carried);
            self.carried_series.extend(fresh_series);
        }
        for entry in encoded {
            match (entry, &written) {
                (Encoded::Write(lsn, write), Ok(())) => hand_on(lsn, write, &*self.notifier),
                (Encoded::Write(lsn, write), Err(err)) => {
                    self.fail_write(lsn, write, log_error(err));
                }
                (Encoded::Flush(done), written) => {
                    if let Some(done) = done {
                        let _ = done.send(written.as_ref().map(|_| ()).map_err(log_error));
                    }
                }
                (Encoded::Barrier(done), _) => {
                    let _ = done.send(());
                }
                (Encoded::Checkpoint(lsn, done), _) => {
                    let result = self.files.checkpoint(lsn).map_err(|source| Error::Io {
                        context: "writing the log checkpoint".to_owned(),
                        source,
                    });
                    self.stats
                        .wal_checkpoint_lsn
                        .store(self.files.committed(), Ordering::Relaxed);
                    let _ = done.send(result);
                }
            }
        }
        self.stats
            .wal_size_bytes
            .store(self.files.bytes(), Ordering::Relaxed);
        self.stats
            .wal_segments
            .store(self.files.segment_count() as u64, Ordering::Relaxed);
    }

    /// Numbers the next record, which waits for `parts` table parts whose
    /// earliest row time is `earliest` (ns).
    fn next_lsn(&mut self, parts: u32, earliest: i64) -> Lsn {
        let lsn = self.files.take_lsn();
        self.progress.assign(lsn, parts, earliest);
        lsn
    }

    /// Writes the group's frames and syncs them if asked.
    fn append(&mut self, first_lsn: Lsn, sync: bool) -> std::io::Result<()> {
        self.files.append(first_lsn, &self.buffer)?;
        IngestStats::add(&self.stats.wal_bytes, self.buffer.len() as u64);
        if sync {
            let started = Instant::now();
            if let Err(err) = self.files.sync() {
                // Whether the group reached the disk is unknown; its writers
                // are told it failed, so it must not come back on replay.
                if let Err(cut) = self.files.cut_back(self.buffer.len() as u64) {
                    tracing::error!(%cut, "cutting a group whose sync failed off the log");
                }
                return Err(err);
            }
            IngestStats::add(&self.stats.wal_syncs, 1);
            self.stats
                .wal_sync_seconds
                .observe(started.elapsed().as_secs_f64());
        }
        Ok(())
    }

    /// Answers a write that did not reach the log; its lsn is done.
    fn fail_write(&self, lsn: Lsn, write: PendingWrite, err: Error) {
        for _ in &write.tables {
            self.progress.complete(lsn);
        }
        if let Some(logged) = write.logged {
            let _ = logged.send(Err(err));
        }
    }
}

/// The earliest row time (ns) of `tables`' chunks; `i64::MAX` for none.
pub(crate) fn earliest_time(tables: &[TablePart]) -> i64 {
    tables
        .iter()
        .flat_map(|part| &part.chunks)
        .filter_map(|chunk| {
            let times = chunk
                .column_by_name("time")?
                .as_primitive_opt::<TimestampNanosecondType>()?;
            arrow::compute::min(times)
        })
        .min()
        .unwrap_or(i64::MAX)
}

/// A write is in the log (acknowledged): its series go to the lookup
/// cache, its rows to the notifier, and the writer is answered.
fn hand_on(lsn: Lsn, write: PendingWrite, notifier: &dyn WriteNotifier) {
    let PendingWrite {
        db,
        tables,
        raw_keys,
        logged,
        ..
    } = write;
    db.series.cache_raw_keys(raw_keys);
    notifier.logged(lsn, tables);
    if let Some(logged) = logged {
        let _ = logged.send(Ok(()));
    }
}

fn log_error(err: &std::io::Error) -> Error {
    Error::Io {
        context: "writing the write-ahead log".to_owned(),
        source: std::io::Error::new(err.kind(), err.to_string()),
    }
}
