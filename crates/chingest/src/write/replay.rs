//! Replay on open: the log's records past the checkpoint go into the
//! engine before [`Ingestor::open`](crate::Ingestor::open) returns.
//!
//! The log is read twice. The first pass, while it is opened, collects the
//! flush markers and the series rows ([`Scan`]); the second decodes the
//! rows of the `Write` records and inserts them:
//!
//! - rows of a flush the log shows committed are skipped, unless the
//!   engine found broken parts in their table when it opened: then they
//!   are inserted again under the flush's token (the engine ignores an
//!   insert it still holds);
//! - rows of a flush that started but shows no commit are inserted again
//!   as exactly that flush, under its token: the engine ignores the insert
//!   if it had landed before the crash;
//! - the rest are inserted in new flushes, announced in the log like any
//!   other, so a crash during replay is replayed the same way.
//!
//! Series rows go in first: no fact row is stored without its series.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::time::Instant;

use arrow::record_batch::RecordBatch;

use crate::catalog::Catalog;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::layout::schema::FieldType;
use crate::layout::series::SeriesKey;
use crate::stats::IngestStats;
use crate::wal::{self, FlushRange, Lsn, Opened, Record, TableRef, WriteRecord};
use crate::write::flusher::{self, FlushContext};
use crate::write::sink::Facts;

/// What the first pass over the log found past the checkpoint.
#[derive(Debug, Default)]
pub(crate) struct Scan {
    /// Flushes announced, per table: their lsn ranges.
    started: HashMap<TableRef, Vec<(Lsn, Lsn)>>,
    /// Flushes that committed.
    committed: HashSet<(TableRef, Lsn, Lsn)>,
    /// Series rows logged, per database.
    series: BTreeMap<String, Vec<(u64, SeriesKey)>>,
    /// `Write` records with rows.
    writes: usize,
}

impl Scan {
    /// Takes note of one record.
    pub(crate) fn visit(&mut self, _lsn: Lsn, record: Record) {
        match record {
            Record::Write(write) => {
                if !write.tables.is_empty() {
                    self.writes += 1;
                }
                if !write.series.is_empty() {
                    self.series
                        .entry(write.database)
                        .or_default()
                        .extend(write.series);
                }
            }
            Record::FlushStarted(range) => self
                .started
                .entry(range.table)
                .or_default()
                .push((range.first, range.last)),
            Record::FlushCommitted(range) => {
                self.committed
                    .insert((range.table, range.first, range.last));
            }
        }
    }

    /// Per table, the last flush announced without a commit: the insert
    /// a crash may have cut between its two syncs.
    fn newest_uncommitted(&self) -> HashMap<TableRef, (Lsn, Lsn)> {
        self.started
            .iter()
            .filter_map(|(table, ranges)| {
                let newest = ranges
                    .iter()
                    .filter(|(first, last)| {
                        !self.committed.contains(&(table.clone(), *first, *last))
                    })
                    .max()?;
                Some((table.clone(), *newest))
            })
            .collect()
    }

    /// The announced flush whose range holds `lsn` for `table`, and whether
    /// it committed.
    fn flush_of(&self, table: &TableRef, lsn: Lsn) -> Option<((Lsn, Lsn), bool)> {
        let range = *self
            .started
            .get(table)?
            .iter()
            .find(|(first, last)| (*first..=*last).contains(&lsn))?;
        let committed = self.committed.contains(&(table.clone(), range.0, range.1));
        Some((range, committed))
    }
}

/// Rows gathered for one insert.
#[derive(Debug, Default)]
struct Group {
    lsns: Vec<Lsn>,
    chunks: Vec<RecordBatch>,
    rows: usize,
}

/// Which insert a group of rows belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
enum Target {
    /// A flush announced before the crash, without a commit.
    Announced(Lsn, Lsn),
    /// Rows no flush had taken.
    Fresh,
}

/// Inserts the records past the checkpoint, then advances it. In the
/// `broken` tables (the engine set parts of them aside as broken), flushes
/// the log shows committed are inserted again too, under their tokens.
pub(crate) async fn run(
    ctx: &FlushContext,
    catalog: &Catalog,
    opened: &Opened,
    scan: Scan,
    broken: &HashSet<TableRef>,
) -> Result<()> {
    if scan.writes == 0 && scan.series.is_empty() {
        return Ok(());
    }
    let started = Instant::now();
    let engine = &ctx.engine;
    let stats = Arc::clone(&engine.stats);
    for (name, rows) in &scan.series {
        let db = catalog.ensure_database(engine, name).await?;
        let grown = db.series.note_tag_keys(rows);
        db.series.register(0, rows.clone());
        flusher::commit_series(ctx, &db).await?;
        catalog.refresh_views(engine, &db, &grown).await?;
    }

    let (sender, mut receiver) = tokio::sync::mpsc::channel::<(Lsn, WriteRecord)>(8);
    let segments = opened.segments.clone();
    let after = opened.checkpoint.committed;
    let reader = tokio::task::spawn_blocking(move || {
        wal::read_records(&segments, after, |lsn, record| match record {
            Record::Write(write) if !write.tables.is_empty() => {
                sender.blocking_send((lsn, write)).is_ok()
            }
            _ => true,
        })
    });
    let newest_uncommitted = scan.newest_uncommitted();
    let max_rows = ctx.policy.max_rows;
    let mut groups: HashMap<(TableRef, Target), Group> = HashMap::new();
    let (mut records, mut rows, mut skipped) = (0u64, 0u64, 0u64);
    while let Some((lsn, write)) = receiver.recv().await {
        records += 1;
        for table in write.tables {
            let id = TableRef {
                database: write.database.clone(),
                retention_policy: write.retention_policy.clone(),
                measurement: table.measurement.clone(),
            };
            let chunks = table
                .batches()
                .map_err(|e| Error::Internal(format!("replaying lsn {lsn}: {e}")))?;
            let chunk_rows: usize = chunks.iter().map(RecordBatch::num_rows).sum();
            let target = match scan.flush_of(&id, lsn) {
                Some(((first, last), true)) if broken.contains(&id) => {
                    Target::Announced(first, last)
                }
                Some((_, true)) => {
                    skipped += chunk_rows as u64;
                    continue;
                }
                Some(((first, last), false)) => Target::Announced(first, last),
                None => Target::Fresh,
            };
            rows += chunk_rows as u64;
            let key = (id, target);
            let group = groups.entry(key.clone()).or_default();
            group.lsns.push(lsn);
            group.chunks.extend(chunks);
            group.rows += chunk_rows;
            if target == Target::Fresh && group.rows >= max_rows {
                let group = groups.remove(&key).expect("just added");
                insert(ctx, catalog, key, group, &newest_uncommitted).await?;
            }
        }
        // Announced flushes whose range is behind us are complete.
        let done: Vec<_> = groups
            .keys()
            .filter(|(_, target)| matches!(target, Target::Announced(_, last) if *last < lsn))
            .cloned()
            .collect();
        for key in done {
            let group = groups.remove(&key).expect("listed");
            insert(ctx, catalog, key, group, &newest_uncommitted).await?;
        }
    }
    reader
        .await
        .map_err(|e| Error::Internal(format!("log reader failed: {e}")))??;
    for (key, group) in groups {
        insert(ctx, catalog, key, group, &newest_uncommitted).await?;
    }

    let committed = ctx.appender.progress.committed();
    ctx.appender.checkpoint(committed).await?;
    let elapsed = started.elapsed();
    IngestStats::add(&stats.replay_records, records);
    IngestStats::add(&stats.replay_rows, rows);
    IngestStats::add(&stats.replay_skipped_rows, skipped);
    stats.replay_millis.store(
        elapsed.as_millis() as u64,
        std::sync::atomic::Ordering::Relaxed,
    );
    tracing::info!(
        records,
        rows,
        skipped_rows = skipped,
        seconds = elapsed.as_secs_f64(),
        rows_per_second = (rows as f64 / elapsed.as_secs_f64().max(1e-9)) as u64,
        "write-ahead log replayed"
    );
    Ok(())
}

/// Inserts one group into its table (created or extended first), under the
/// token of its announced range or of a newly announced one. The table's
/// newest uncommitted flush is repeated under a new token if the sink says
/// its insert was lost although the engine kept its token.
async fn insert(
    ctx: &FlushContext,
    catalog: &Catalog,
    (id, target): (TableRef, Target),
    group: Group,
    newest_uncommitted: &HashMap<TableRef, (Lsn, Lsn)>,
) -> Result<()> {
    let db = catalog.ensure_database(&ctx.engine, &id.database).await?;
    let mut fields: Vec<(String, FieldType)> = Vec::new();
    for chunk in &group.chunks {
        for field in chunk.schema().fields() {
            if let Some(ty) = FieldType::from_arrow(field.data_type()) {
                if field.name() != "series_id" && !fields.iter().any(|(n, _)| n == field.name()) {
                    fields.push((field.name().clone(), ty));
                }
            }
        }
    }
    let table = catalog
        .ensure_table(
            &ctx.engine,
            &db,
            &id.retention_policy,
            &id.measurement,
            &fields,
        )
        .await?;
    let (first, last) = match target {
        Target::Announced(first, last) => (first, last),
        Target::Fresh => (group.lsns[0], *group.lsns.last().expect("a group has rows")),
    };
    let range = FlushRange {
        table: id,
        first,
        last,
    };
    if target == Target::Fresh {
        ctx.appender.flush_started(range.clone()).await?;
    }
    let mut token = flusher::dedup_token(ctx.appender.log_id(), &range);
    let newest = newest_uncommitted.get(&range.table) == Some(&(first, last));
    if newest
        && ctx
            .sink
            .last_insert_lost(table.schema().names.clone())
            .await?
    {
        tracing::warn!(table = %table.schema().names.storage_table, first, last,
            "the last insert before the crash was lost after its deduplication record was \
             synced; it is inserted again under a new token");
        token = format!("{token}:again:{}", crate::clock::now_ns());
    }
    let facts = Facts::merge(table.schema(), group.chunks).await?;
    flusher::insert(ctx, &db, token, facts).await?;
    ctx.appender.flush_committed(range);
    Ok(())
}

/// The tables in which the engine found broken parts when it opened (new
/// since the last open): each is logged as an error and reported by
/// [`IngestStats::problems`]; [`run`] inserts their committed ranges still
/// in the log again.
pub(crate) async fn broken_tables(engine: &Engine, catalog: &Catalog) -> Result<HashSet<TableRef>> {
    let disk = Arc::clone(&engine.disk);
    let broken = engine.run(move |conn| disk.new_broken_parts(conn)).await?;
    let mut tables = HashSet::new();
    for (quoted, part) in &broken {
        tracing::error!(part = %part, "the engine found a broken part and set it aside; \
            rows the write-ahead log still holds for its table are inserted again");
        for db in catalog.databases() {
            for (_, table) in db.tables() {
                if &table.schema().names.storage_table == quoted {
                    tables.insert(table.id.clone());
                }
            }
        }
    }
    IngestStats::add(&engine.stats.engine_broken_parts, broken.len() as u64);
    engine
        .stats
        .broken_parts
        .lock()
        .unwrap()
        .extend(broken.into_iter().map(|(_, part)| part));
    Ok(tables)
}
