//! Rebuilding a table's cache from the engine: the first time and the
//! newest non-NULL value of each field per series, the recent samples of
//! its numeric fields, and the series' tags from the series table, merged
//! by time into what writes brought meanwhile.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};
use std::time::Duration;

use arrow::array::{Array, ArrayRef, AsArray, MapArray};
use arrow::datatypes::{DataType, Float64Type, Int64Type, TimestampNanosecondType, UInt64Type};
use arrow::record_batch::RecordBatch;

use crate::catalog::Table;
use crate::clock::now_ns;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::last_value::answers::LastField;
use crate::last_value::engine_last::{EngineLast, EngineSamples, SeriesNewest, SeriesTags};
use crate::last_value::postings::TAG_BYTES;
use crate::last_value::recent::PLANNED_SAMPLE_BYTES;
use crate::last_value::table::{Status, Values, NO_RECENT, SERIES_BYTES, VALUE_BYTES};
use crate::last_value::{LastValues, RebuildQueue, MIN_RECENT_SPAN_NS};
use crate::layout::names::{quote_ident, quote_literal};
use crate::layout::schema::FieldType;
use crate::stats::IngestStats;

/// What rebuilds need from the layers above the cache: the engine to
/// read, and a flush of everything logged before they read it.
pub(crate) trait RebuildSource: Send + Sync {
    /// The engine the table's rows are read from.
    fn engine(&self) -> &Engine;
    /// Inserts every row logged so far into the engine.
    fn flush_all(&self) -> BoxFuture<'_, Result<()>>;
    /// Whether the ingestor is closing: rebuilds stop.
    fn is_closed(&self) -> bool;
    /// Where a downsampled table's rows are gone, statements giving each
    /// bucket of its rollups as a row (`time`, `series_id`, then `fields`)
    /// at its first and at its last sample; none elsewhere.
    fn gone_rows(&self, table: &Table, fields: &[(String, FieldType)]) -> Vec<String>;
    /// Before it (ns) a downsampled table's rows are gone; `i64::MIN`
    /// where all are kept.
    fn rows_from(&self, table: &Table) -> i64;
}

/// A boxed future: [`RebuildSource`] is used as a trait object.
pub(crate) type BoxFuture<'a, T> =
    std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send + 'a>>;

/// Rebuilds the tables queued by [`LastValues::invalidate`], one batch at a
/// time, until the ingestor is gone.
pub(crate) async fn run_rebuilds(
    source: Weak<dyn RebuildSource>,
    cache: Weak<LastValues>,
    mut queue: RebuildQueue,
) {
    while let Some(first) = queue.recv().await {
        let mut tables = vec![first];
        while let Ok(table) = queue.try_recv() {
            tables.push(table);
        }
        let (Some(source), Some(cache)) = (source.upgrade(), cache.upgrade()) else {
            return;
        };
        if source.is_closed() {
            return;
        }
        // The generation is taken before the flush: everything written
        // before the cache was emptied is in the engine when it is read.
        let jobs: Vec<(Arc<Table>, u64, i64)> = tables
            .into_iter()
            .map(|table| {
                let last = cache.cache(&table);
                last.queued.store(false, Ordering::Release);
                let state = last.state.read().unwrap();
                (Arc::clone(&table), state.generation, state.recent_from)
            })
            .collect();
        let flushed = source.flush_all().await;
        for (table, generation, recent_from) in jobs {
            let rebuilt = match &flushed {
                Ok(()) => rebuild(&*source, &cache, &table, (generation, recent_from)).await,
                Err(err) => Err(Error::Engine(err.to_string())),
            };
            match rebuilt {
                Ok(()) => IngestStats::add(&cache.stats.last_value_rebuilds, 1),
                Err(_) if source.is_closed() => return,
                Err(err) => {
                    tracing::warn!(table = ?table.id, %err, "last-value cache: rebuild failed; retrying in 5 s");
                    let weak = Arc::downgrade(&cache);
                    tokio::spawn(async move {
                        tokio::time::sleep(Duration::from_secs(5)).await;
                        if let Some(cache) = weak.upgrade() {
                            if !cache.cache(&table).queued.swap(true, Ordering::AcqRel) {
                                let _ = cache.rebuilds.send(table);
                            }
                        }
                    });
                }
            }
        }
    }
}

/// Reads a table's newest values, its recent samples from `recent_from`
/// on (from the rows' cut, where they are gone) and its series' tags from
/// the engine and merges them into its cache.
async fn rebuild(
    source: &dyn RebuildSource,
    cache: &LastValues,
    table: &Arc<Table>,
    (generation, recent_from): (u64, i64),
) -> Result<()> {
    let engine = source.engine();
    let schema = table.schema();
    let gone = source.gone_rows(table, &schema.fields);
    let names = &schema.names;
    let tags_sql = format!(
        "SELECT series_id, tags FROM {} FINAL WHERE measurement = {}",
        names.series_table,
        quote_literal(&table.id.measurement)
    );
    let tags = read_tags(&engine.query_arrow(tags_sql).await?)?;
    let fields: Vec<(String, FieldType)> = schema
        .fields
        .iter()
        .filter(|(_, ty)| Values::new(*ty, 0).is_some())
        .cloned()
        .collect();
    // Past the hard cap, if one is set, before reading a value (at most:
    // texts are counted per series, the index keeps each once): evicted
    // without the scan.
    let estimate: usize = tags
        .iter()
        .map(|(_, t)| {
            SERIES_BYTES
                + VALUE_BYTES * fields.len()
                + t.iter()
                    .map(|(k, v)| TAG_BYTES + k.len() + v.len())
                    .sum::<usize>()
        })
        .sum();
    let total = cache.stats.last_value_bytes.load(Ordering::Relaxed) as usize;
    if cache.config.max_bytes > 0 && total + estimate > cache.config.max_bytes {
        let last = cache.cache(table);
        let mut state = last.state.write().unwrap();
        if state.generation == generation && state.status == Status::Building {
            cache.evict(table, &last, &mut state);
        }
        return Ok(());
    }
    let mut values = Vec::new();
    if !fields.is_empty() {
        let mut columns = vec!["series_id".to_owned()];
        for (i, (name, _)) in fields.iter().enumerate() {
            let field = quote_ident(name);
            columns.push(format!("maxIf(time, {field} IS NOT NULL) AS t{i}"));
            columns.push(format!("minIf(time, {field} IS NOT NULL) AS f{i}"));
            // Equal times: the row inserted last (block number and offset).
            columns.push(format!(
                "argMaxIf({field}, (time, _block_number, _block_offset), {field} IS NOT NULL) AS v{i}"
            ));
        }
        let sql = format!(
            "SELECT {} FROM {} GROUP BY series_id",
            columns.join(", "),
            rows_and_rollups(&names.storage_table, &schema.fields, &gone)
        );
        for batch in engine.query_arrow(sql).await? {
            read_values(&batch, &fields, &mut values)?;
        }
    }
    // Memory reaching back past the rows' cut would claim samples the
    // engine no longer has (readers would not ask the rollups there): it
    // starts at the cut, as a pass that dropped rows meanwhile left it.
    let recent_from = recent_from.max(source.rows_from(table));
    let (recent_from, recent) = read_recent(engine, cache, table, &fields, recent_from).await?;
    let recent_from = recent_from.max(source.rows_from(table));
    let from_engine = EngineLast {
        tags,
        fields,
        values,
        recent_from,
        recent,
    };
    cache.finish_rebuild(table, generation, from_engine);
    Ok(())
}

/// The rows of the fact table `facts` (with `fields`), and where they
/// are gone, the buckets standing for them (`gone`), as rows (their block
/// numbers 0).
fn rows_and_rollups(facts: &str, fields: &[(String, FieldType)], gone: &[String]) -> String {
    if gone.is_empty() {
        return facts.to_owned();
    }
    let columns: String = fields
        .iter()
        .map(|(f, _)| format!(", {}", quote_ident(f)))
        .collect();
    let mut sides = vec![format!(
        "SELECT time, series_id{columns}, _block_number, _block_offset FROM {facts}"
    )];
    sides.extend(
        gone.iter()
            .map(|rows| format!("SELECT *, toUInt64(0), toUInt64(0) FROM ({rows})")),
    );
    format!("({})", sides.join(" UNION ALL "))
}

/// The table's recent samples of its numeric `fields` (series, index in
/// `fields`, samples), from `from` on, or from later if those would pass
/// the recent samples' memory bound (each try halving the span), with
/// where they start.
async fn read_recent(
    engine: &Engine,
    cache: &LastValues,
    table: &Table,
    fields: &[(String, FieldType)],
    mut from: i64,
) -> Result<(i64, Vec<EngineSamples>)> {
    let numeric: Vec<usize> = (0..fields.len())
        .filter(|&i| Values::new(fields[i].1, 0).is_some_and(|v| v.is_numeric()))
        .collect();
    if numeric.is_empty() || from == NO_RECENT {
        return Ok((from, Vec::new()));
    }
    let storage = &table.schema().names.storage_table;
    let since = |from: i64| format!("time >= fromUnixTimestamp64Nano(toInt64({from}))");
    let room = cache
        .config
        .recent_max_bytes
        .saturating_sub(cache.stats.recent_bytes.load(Ordering::Relaxed) as usize);
    let counts: Vec<String> = numeric
        .iter()
        .map(|&i| format!("count({})", quote_ident(&fields[i].0)))
        .collect();
    let count_sql = format!(
        "SELECT toUInt64({}) FROM {storage} WHERE {{since}}",
        counts.join(" + ")
    );
    loop {
        let sql = count_sql.replace("{since}", &since(from));
        let samples: u64 = engine
            .query_arrow(sql)
            .await?
            .iter()
            .find(|batch| batch.num_rows() > 0)
            .and_then(|batch| Some(batch.column(0).as_primitive_opt::<UInt64Type>()?.value(0)))
            .unwrap_or(0);
        if samples as usize * PLANNED_SAMPLE_BYTES <= room {
            break;
        }
        let kept = (now_ns() - from) / 2;
        if kept < MIN_RECENT_SPAN_NS {
            return Ok((NO_RECENT, Vec::new()));
        }
        from = now_ns() - kept;
    }
    let values: Vec<String> = numeric
        .iter()
        .map(|&i| format!("toFloat64({})", quote_ident(&fields[i].0)))
        .collect();
    let sql = format!(
        "SELECT series_id, {} FROM {storage} WHERE {} \
         ORDER BY series_id, time, _block_number, _block_offset",
        std::iter::once("time".to_owned())
            .chain(values)
            .collect::<Vec<_>>()
            .join(", "),
        since(from),
    );
    let mut out: Vec<EngineSamples> = Vec::new();
    // The list of each field for the series being read.
    let mut current: Vec<Option<usize>> = vec![None; numeric.len()];
    let mut series = None;
    for batch in engine.query_arrow(sql).await? {
        let ids = batch.column(0);
        let ids = ids
            .as_primitive_opt::<UInt64Type>()
            .ok_or_else(|| unexpected("series_id", ids))?;
        let times = batch.column(1);
        let times = times
            .as_primitive_opt::<TimestampNanosecondType>()
            .ok_or_else(|| unexpected("a time", times))?;
        let columns = (0..numeric.len())
            .map(|c| {
                let column = batch.column(2 + c);
                column
                    .as_primitive_opt::<Float64Type>()
                    .ok_or_else(|| unexpected("a float", column))
            })
            .collect::<Result<Vec<_>>>()?;
        for row in 0..batch.num_rows() {
            let id = ids.value(row);
            if series != Some(id) {
                series = Some(id);
                current.fill(None);
            }
            for (c, column) in columns.iter().enumerate() {
                if column.is_null(row) {
                    continue;
                }
                let list = *current[c].get_or_insert_with(|| {
                    out.push(EngineSamples {
                        series: id,
                        field: numeric[c],
                        samples: Vec::new(),
                        repeated: i64::MIN,
                    });
                    out.len() - 1
                });
                let read = &mut out[list];
                let sample = (times.value(row), column.value(row));
                // Equal times (the `append` policy): the row inserted
                // last wins, as writes do here.
                match read.samples.last_mut() {
                    Some(last) if last.0 == sample.0 => {
                        *last = sample;
                        read.repeated = sample.0;
                    }
                    _ => read.samples.push(sample),
                }
            }
        }
    }
    Ok((from, out))
}

fn unexpected(what: &str, column: &ArrayRef) -> Error {
    Error::Engine(format!(
        "last-value rebuild: {what} came back as {}",
        column.data_type()
    ))
}

/// `(series_id, tags)` rows of the series table.
fn read_tags(batches: &[RecordBatch]) -> Result<Vec<SeriesTags>> {
    let mut rows = Vec::new();
    for batch in batches {
        let ids = batch.column(0);
        let ids = ids
            .as_primitive_opt::<UInt64Type>()
            .ok_or_else(|| unexpected("series_id", ids))?;
        let maps = batch.column(1);
        let maps: &MapArray = maps.as_map_opt().ok_or_else(|| unexpected("tags", maps))?;
        let keys = strings(maps.keys())?;
        let values = strings(maps.values())?;
        let offsets = maps.value_offsets();
        for row in 0..batch.num_rows() {
            let (start, end) = (offsets[row] as usize, offsets[row + 1] as usize);
            let tags = (start..end)
                .map(|i| (keys[i].clone(), values[i].clone()))
                .collect();
            rows.push((ids.value(row), tags));
        }
    }
    Ok(rows)
}

/// A string column as strings (the engine sends String as Utf8 or Binary).
fn strings(column: &ArrayRef) -> Result<Vec<String>> {
    let text = |i: usize, bytes: &[u8]| match column.is_null(i) {
        true => String::new(),
        false => String::from_utf8_lossy(bytes).into_owned(),
    };
    match column.data_type() {
        DataType::Utf8 => {
            let c = column.as_string::<i32>();
            Ok((0..c.len())
                .map(|i| text(i, c.value(i).as_bytes()))
                .collect())
        }
        DataType::LargeUtf8 => {
            let c = column.as_string::<i64>();
            Ok((0..c.len())
                .map(|i| text(i, c.value(i).as_bytes()))
                .collect())
        }
        DataType::Binary => {
            let c = column.as_binary::<i32>();
            Ok((0..c.len()).map(|i| text(i, c.value(i))).collect())
        }
        DataType::LargeBinary => {
            let c = column.as_binary::<i64>();
            Ok((0..c.len()).map(|i| text(i, c.value(i))).collect())
        }
        _ => Err(unexpected("a string", column)),
    }
}

/// The rows of the rebuild's values query: `series_id`, then `t<i>`,
/// `f<i>`, `v<i>` per field.
fn read_values(
    batch: &RecordBatch,
    fields: &[(String, FieldType)],
    out: &mut Vec<SeriesNewest>,
) -> Result<()> {
    let ids = batch.column(0);
    let ids = ids
        .as_primitive_opt::<UInt64Type>()
        .ok_or_else(|| unexpected("series_id", ids))?;
    let mut columns = Vec::with_capacity(fields.len());
    for (i, (_, ty)) in fields.iter().enumerate() {
        let time = |c: usize| {
            let times = batch.column(c);
            times
                .as_primitive_opt::<TimestampNanosecondType>()
                .ok_or_else(|| unexpected("a time", times))
        };
        let (times, firsts) = (time(1 + 3 * i)?, time(2 + 3 * i)?);
        let values = batch.column(3 + 3 * i);
        let strings = match ty {
            FieldType::String => Some(strings(values)?),
            _ => None,
        };
        columns.push((times, firsts, values, strings));
    }
    for row in 0..batch.num_rows() {
        let mut newest = Vec::with_capacity(fields.len());
        for ((times, firsts, values, strings), (_, ty)) in columns.iter().zip(fields) {
            // NULL: no row of the series has the field.
            if values.is_null(row) {
                newest.push(None);
                continue;
            }
            let value = match (ty, strings) {
                (FieldType::String, Some(strings)) => LastField::String(strings[row].clone()),
                (FieldType::Float, _) => LastField::Float(
                    values
                        .as_primitive_opt::<Float64Type>()
                        .ok_or_else(|| unexpected("a float", values))?
                        .value(row),
                ),
                (FieldType::Integer, _) => LastField::Integer(
                    values
                        .as_primitive_opt::<Int64Type>()
                        .ok_or_else(|| unexpected("an integer", values))?
                        .value(row),
                ),
                (FieldType::UInteger, _) => LastField::UInteger(
                    values
                        .as_primitive_opt::<UInt64Type>()
                        .ok_or_else(|| unexpected("an unsigned integer", values))?
                        .value(row),
                ),
                (FieldType::Boolean, _) => LastField::Boolean(
                    values
                        .as_boolean_opt()
                        .ok_or_else(|| unexpected("a boolean", values))?
                        .value(row),
                ),
                _ => return Err(unexpected("a field", values)),
            };
            newest.push(Some((firsts.value(row), times.value(row), value)));
        }
        out.push((ids.value(row), newest));
    }
    Ok(())
}
