//! Reads: statements (trusted, untrusted, translated), and what memory
//! answers without the engine (schemas, last values, the series index,
//! samples), handed to the reader.

use arrow::record_batch::RecordBatch;

use crate::config::DuplicatePolicy;
use crate::downsample::RollupView;
use crate::error::Result;
use crate::last_value::{
    CompressedSamples, IndexedSeries, LastSeries, RecentSamples, TagMatcher, Taken,
};
use crate::layout::names::TableNames;
use crate::read::samples::{WholeRows, AGGREGATE_FILL_SAMPLES};
use crate::read::sandbox::ReadScope;
use crate::read::stream::QueryChunks;
use crate::read::{MeasurementSchema, TableAddress};
use crate::stats::IngestStats;

use super::Ingestor;

impl Ingestor {
    /// Runs a statement the program itself wrote (trusted: no sandbox, no
    /// limits, any statement the engine runs) and returns its output in the
    /// named ClickHouse output format (`"JSON"`, `"CSV"`, `"Parquet"`,
    /// `"ArrowStream"`, …). SQL from callers goes to
    /// [`query_untrusted`](Self::query_untrusted).
    pub async fn query_trusted(&self, sql: &str, format: &str) -> Result<Vec<u8>> {
        self.shared.open()?.reader.query(sql, format).await
    }

    /// [`query_trusted`](Self::query_trusted), its result as Arrow record
    /// batches.
    pub async fn query_trusted_arrow(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        self.shared.open()?.reader.query_arrow(sql).await
    }

    /// Runs one read-only statement, for SQL from untrusted callers: writes,
    /// DDL, settings changes, several statements, `INTO OUTFILE` and table
    /// functions that reach outside the engine (`file`, `url`, `remote`, …)
    /// are refused ([`Error::NotReadOnly`], or the engine's own error).
    ///
    /// At most [`QueryLimits::max_concurrent`](crate::QueryLimits::max_concurrent)
    /// such statements (with those of [`query_translated`](Self::query_translated))
    /// run at once; the next wait for a slot in arrival order, up to
    /// `max_queued` of them for up to `queue_timeout` each: past those,
    /// [`Error::TooManyQueries`] or [`Error::QueryQueueTimeout`]. Dropping
    /// the future while it waits leaves the queue.
    pub async fn query_untrusted(&self, sql: &str, format: &str) -> Result<Vec<u8>> {
        let mut chunks = self
            .query_untrusted_stream(sql, format, &ReadScope::All, None)
            .await?;
        let mut output = Vec::new();
        while let Some(chunk) = chunks.next().await {
            output.extend(chunk?);
        }
        Ok(output)
    }

    /// [`query_untrusted`](Self::query_untrusted), streamed: the output
    /// arrives chunk by chunk as the engine produces it, so a large result
    /// is never held whole. Dropping the chunks cancels the query. `scope`:
    /// the databases the caller may read; `database`: the one unqualified
    /// table names are in (else `default`), as ClickHouse's current
    /// database.
    ///
    /// The statement may read the last-value cache as a table:
    /// `last_values('db', 'measurement'[, 'rp'])` with string literals has
    /// the columns `series_id`, `time` (the newest of its fields' times),
    /// one per tag and one per field (NULL where the series has no value),
    /// like the measurement's view; a measurement the cache does not hold
    /// is [`Error::NotCached`].
    pub async fn query_untrusted_stream(
        &self,
        sql: &str,
        format: &str,
        scope: &ReadScope,
        database: Option<&str>,
    ) -> Result<QueryChunks> {
        self.shared
            .open()?
            .reader
            .query_read_only_stream(sql, format, scope, database)
            .await
    }

    /// Runs a read statement the caller wrote itself from an untrusted
    /// query (every name and literal quoted), on a read-only connection
    /// under the query limits, without the sandbox's parses; its result as
    /// Arrow batches. For translators such as InfluxQL's, never for SQL
    /// text that a caller sent (that is [`query_untrusted`](Self::query_untrusted)).
    /// It waits for a slot in the same queue.
    pub async fn query_translated(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        self.shared.open()?.reader.query_translated(sql).await
    }

    /// As [`query_translated`](Self::query_translated), for a statement
    /// that reads rollups ([`rollups`](Self::rollups)); counted in
    /// [`IngestStats::rollup_queries`].
    pub async fn query_rollups(&self, sql: &str) -> Result<Vec<RecordBatch>> {
        let shared = self.shared.open()?;
        IngestStats::add(&shared.engine.stats.rollup_queries, 1);
        shared.reader.query_translated(sql).await
    }

    /// The measurements of retention policy `rp` of `db` that have a
    /// table, with their fields (sorted by name) and the tag keys their
    /// series carry (sorted): what InfluxQL's `SHOW FIELD KEYS` and source
    /// resolution need, from memory.
    pub fn measurements(&self, db: &str, rp: &str) -> Vec<MeasurementSchema> {
        self.shared.reader.measurements(db, rp)
    }

    /// One measurement of [`measurements`](Self::measurements), if it has
    /// a table.
    pub fn measurement(&self, (db, rp, name): TableAddress<'_>) -> Option<MeasurementSchema> {
        self.shared.reader.measurement(db, rp, name)
    }

    /// What the table of `measurement` keeps of a point written again, if
    /// it exists (a table keeps the policy it was created with).
    pub fn table_duplicate_policy(
        &self,
        (db, rp, name): TableAddress<'_>,
    ) -> Option<DuplicatePolicy> {
        let table = self.shared.catalog.database(db)?.table(rp, name)?;
        Some(table.duplicates)
    }

    /// What a reader may take from the rollups of `measurement` in `db` /
    /// `rp` (docs/downsampling.md): `None` when the database is not
    /// downsampled, or no pass has finished over the table since the
    /// ingestor opened (then every row is to be read).
    pub fn rollups(&self, (db, rp, measurement): TableAddress<'_>) -> Option<RollupView> {
        self.shared
            .downsampler
            .view(&TableNames::new(db, rp, measurement))
    }

    /// The newest value of each field of the series of `measurement` in
    /// `db` / `rp` whose tags `keep` accepts (tags sorted by key), from
    /// memory. `None` if the measurement is not cached — left out by
    /// [`IngestConfig::last_values`], evicted for the memory bound, or not
    /// yet rebuilt after an open or an edit: the caller must ask the engine.
    /// Holds a read lock on the measurement's cache while `keep` runs;
    /// series `keep` refuses are not copied.
    pub fn last_values(
        &self,
        (db, rp, measurement): TableAddress<'_>,
        keep: impl FnMut(&[(&str, &str)]) -> bool,
    ) -> Option<Vec<LastSeries>> {
        self.shared.reader.last_values(db, rp, measurement, keep)
    }

    /// The series of `measurement` in `db` / `rp` whose tags the matchers
    /// accept and that have a value of `field` in `range` (ns, judged by
    /// each series' first and newest value), from the in-memory index (a
    /// few list intersections, no engine statement); in no particular
    /// order. `None` when the measurement is not indexed now (as
    /// [`last_values`](Self::last_values): not cached, evicted, or being
    /// rebuilt): the caller must ask the engine.
    pub fn indexed_series(
        &self,
        (db, rp, measurement): TableAddress<'_>,
        matchers: &[TagMatcher<'_>],
        field: &str,
        range: Option<(i64, i64)>,
    ) -> Option<Vec<IndexedSeries>> {
        let table = (db, rp, measurement);
        self.shared
            .reader
            .indexed_series(table, matchers, field, range)
    }

    /// The values of tag `key` among the series of `measurement` in `db` /
    /// `rp` the matchers accept (all when there are none) that have a
    /// value of `field` if given (any field, with a `range`), between their
    /// first and newest value in `range` (ns) if given; sorted, from the
    /// in-memory index, which holds every series (no engine statement).
    /// With neither `field` nor `range`, every series of the series table
    /// counts, rows or not. `None` as for
    /// [`indexed_series`](Self::indexed_series).
    pub fn tag_values(
        &self,
        (db, rp, measurement): TableAddress<'_>,
        key: &str,
        matchers: &[TagMatcher<'_>],
        field: Option<&str>,
        range: Option<(i64, i64)>,
    ) -> Option<Vec<String>> {
        let table = (db, rp, measurement);
        self.shared
            .reader
            .tag_values(table, key, matchers, field, range)
    }

    /// The tag keys of the series of `measurement` in `db` / `rp` the
    /// matchers select (with a value of `field` if given, in `range` (ns)
    /// if given), sorted, from the in-memory index; `None` when the
    /// measurement is not indexed now.
    pub fn tag_keys(
        &self,
        (db, rp, measurement): TableAddress<'_>,
        matchers: &[TagMatcher<'_>],
        field: Option<&str>,
        range: Option<(i64, i64)>,
    ) -> Option<Vec<String>> {
        let table = (db, rp, measurement);
        self.shared.reader.tag_keys(table, matchers, field, range)
    }

    /// A number that grows whenever an answer about `database`'s times
    /// more than [`SETTLED_AFTER`](crate::SETTLED_AFTER) ago may have
    /// changed: an
    /// acknowledged write of a sample that old (counted before the writer
    /// is answered), a delete, a correction, a dropped series. A result
    /// computed from memory ([`recent_samples`](Self::recent_samples),
    /// [`indexed_series`](Self::indexed_series)) about such times holds
    /// while the number is what it was before the result was read. In the
    /// `clickhouse` storage mode other nodes may change any time, unseen
    /// here: the number grows at every call, so no result is kept.
    pub fn settled_version(&self, database: &str) -> u64 {
        self.shared.reader.settled_version(database)
    }

    /// The time (ns) before which the engine holds every acknowledged row:
    /// none with an earlier time is on its way to it (`i64::MAX` when none
    /// at all is). A result the engine gives about earlier times that are
    /// settled holds, as one from memory does, while
    /// [`settled_version`](Self::settled_version) — read before this —
    /// stays what it was.
    pub fn engine_complete_before(&self) -> i64 {
        self.shared.writer.earliest_in_flight()
    }

    /// Each of `ids`' samples of numeric field `field` of `measurement` in
    /// `db` / `rp` in `[start, end]` (ns), as
    /// [`recent_samples`](Self::recent_samples) gives them, reaching back
    /// past the recent window through the chunk cache: blocks of older
    /// samples read from the engine on a miss and kept
    /// ([`LastValueConfig::chunk_cache_bytes`](crate::LastValueConfig::chunk_cache_bytes)).
    /// They start later than `start` ([`RecentSamples::from_ns`]; the
    /// caller reads the rest from the engine) where its rows are not whole
    /// there: downsampled or past retention, not settled, not all in the
    /// engine yet, or more than a fill may read. With no `ids`, it tells
    /// where they would start.
    ///
    /// For a reader that aggregates: a fill reads at most
    /// [`AGGREGATE_FILL_SAMPLES`],
    /// past which the engine's own aggregation is the cheaper read.
    pub async fn samples(
        &self,
        table: TableAddress<'_>,
        field: &str,
        ids: &[u64],
        range: (i64, i64),
    ) -> Result<Option<RecentSamples>> {
        let most = AGGREGATE_FILL_SAMPLES;
        self.samples_as(table, field, ids, range, (1, most)).await
    }

    /// [`samples`](Self::samples), each series' samples compressed as
    /// memory keeps them, to be decoded where they are used, their times
    /// in units of `per` ns (1,000,000: ms), floored as they are decoded,
    /// the last sample of equal times kept. For a reader that reads the
    /// rest's rows anyway: a fill reads up to `most` samples (the reader's
    /// own bound), or as many as half the chunk cache holds.
    pub async fn samples_compressed(
        &self,
        table: TableAddress<'_>,
        field: &str,
        ids: &[u64],
        range: (i64, i64),
        (per, most): (i64, usize),
    ) -> Result<Option<RecentSamples<CompressedSamples>>> {
        assert!(per > 0, "a unit of time is 1 ns or more");
        self.samples_as(table, field, ids, range, (per, most)).await
    }

    /// [`samples`](Self::samples) as `S` takes them, times in units of
    /// `per` ns, a fill of at most `most` samples.
    async fn samples_as<S: Taken>(
        &self,
        table: TableAddress<'_>,
        field: &str,
        ids: &[u64],
        range: (i64, i64),
        (per, most): (i64, usize),
    ) -> Result<Option<RecentSamples<S>>> {
        let whole = self.whole_rows(table);
        self.shared
            .reader
            .samples(table, field, ids, range, (per, most), whole)
            .await
    }

    /// Where the rows of `measurement` in `db` / `rp` are whole now, for a
    /// reader to keep what it reads of them in the chunk cache.
    pub fn whole_rows(&self, (db, rp, measurement): TableAddress<'_>) -> WholeRows {
        // The version first: a change from here on leaves what is kept
        // stale. Then how far the engine is whole.
        let version = self.settled_version(db);
        let complete = self.engine_complete_before();
        let now = crate::clock::now_ns();
        let settled = now - crate::last_value::SETTLED_AFTER.as_nanos() as i64;
        let retained_from = self
            .retention_policies(db)
            .into_iter()
            .find(|(name, _)| name == rp)
            .and_then(|(_, duration)| duration)
            .map_or(i64::MIN, |d| {
                now - i64::try_from(d.as_nanos()).unwrap_or(i64::MAX)
            });
        WholeRows {
            version,
            retained_from,
            downsampled_from: self
                .rollups((db, rp, measurement))
                .map_or(i64::MIN, |view| view.rows_from),
            settled_before: settled.min(complete),
        }
    }

    /// Each of `ids`' samples of numeric field `field` of `measurement` in
    /// `db` / `rp` with a time in `[start, end]` (ns), as floats, in time
    /// order with one sample per time (of two writes of one time, the
    /// later), in `ids`' order; from memory, which holds every
    /// acknowledged sample of the last
    /// [`recent_span`](crate::LastValueConfig::recent_span). When memory
    /// does not reach back to `start`, the samples start later
    /// ([`RecentSamples::from_ns`]) and the caller asks the engine for the
    /// rest; `None` when memory holds no part of the range (or the
    /// measurement is not cached now). Acknowledged samples are here
    /// before the engine has them. With no `ids`, it tells where memory
    /// starts and whether its samples are one row each
    /// ([`RecentSamples::one_row_each`]), without counting a read.
    pub fn recent_samples(
        &self,
        table: TableAddress<'_>,
        field: &str,
        ids: &[u64],
        range: (i64, i64),
    ) -> Option<RecentSamples> {
        self.shared
            .reader
            .recent_samples(table, field, ids, range, 1)
    }

    /// [`recent_samples`](Self::recent_samples), each series' samples
    /// compressed as memory keeps them (as
    /// [`samples_compressed`](Self::samples_compressed) gives them, without
    /// reaching past memory: for a reader whose older part rollups answer
    /// cheaper).
    pub fn recent_compressed(
        &self,
        table: TableAddress<'_>,
        field: &str,
        ids: &[u64],
        range: (i64, i64),
        per: i64,
    ) -> Option<RecentSamples<CompressedSamples>> {
        assert!(per > 0, "a unit of time is 1 ns or more");
        self.shared
            .reader
            .recent_samples(table, field, ids, range, per)
    }
}
