//! The selected series' samples over a range: from the ingestor's memory
//! (recent samples and the chunk cache, compressed) and from the engine
//! for the part before, thinned to rollups' buckets where a function
//! allows; counted against the query's sample budget.

use std::collections::HashMap;
use std::sync::atomic::Ordering;

use arrow::array::AsArray as _;
use arrow::datatypes::{Float64Type, Int64Type, UInt64Type};
use arrow::record_batch::RecordBatch;
use chingest::layout::names::quote_ident;

use super::candidate::Candidate;
use super::matcher::LabelMatcher;
use super::series::Overflow;
use super::source::{ms_to_ns, time_condition, Source};
use super::thinning::{thin_samples, thinned_sql, ThinLevel, Thinning};
use crate::error::Error;
use crate::selected::{Samples, Selected};
use crate::value::{Labels, Series};

/// Samples (ms, value) by series id, one per ms: the engine may hold
/// several (retried writes under the `append` policy, ns times), of which
/// the last read wins ([`dedup_last`]).
type SamplesById = HashMap<u64, Vec<(i64, f64)>>;

/// Most series ids a statement lists (about 21 bytes each, well inside
/// the engine's statement size); more are selected by a subquery.
const MAX_LISTED_IDS: usize = 5_000;

impl Source<'_> {
    /// The samples of `found`'s series of `candidate` in `[start, end]`
    /// (ms), by id: from the ingestor's memory (recent samples and, unless
    /// rollups answer, the chunk cache, as far back as it answers), and
    /// from the engine for the part before (a statement only then).
    async fn samples(
        &self,
        candidate: &Candidate,
        matchers: &[LabelMatcher],
        found: &HashMap<u64, Labels>,
        (start, end): (i64, i64),
        thin: Option<Thinning>,
        budget: &mut usize,
    ) -> Result<HashMap<u64, Samples>, Error> {
        let table = self.table_of(candidate);
        let ids: Vec<u64> = found.keys().copied().collect();
        let range = ms_to_ns(start, end);
        let level = thin.and_then(|thin| self.thin_level(candidate, thin));
        // Where rollups answer, they are the cheaper read of what memory
        // does not hold (as InfluxQL reads them).
        let in_memory = match level {
            Some(_) => {
                let field = &candidate.field;
                self.ingestor
                    .recent_compressed(table, field, &ids, range, 1_000_000)
            }
            None => {
                self.ingestor
                    .samples_compressed(
                        table,
                        &candidate.field,
                        &ids,
                        range,
                        (1_000_000, self.limits.max_samples),
                    )
                    .await?
            }
        };
        let Some(in_memory) = in_memory else {
            let read = self
                .engine_samples(
                    candidate,
                    matchers,
                    found,
                    (start, end),
                    level.as_ref(),
                    budget,
                )
                .await?;
            return Ok(of_decoded(read));
        };
        // Memory from its first whole ms on; the engine before it. Read
        // from a rollup, the engine's part ends on a bucket's edge, so no
        // row before memory's start is read.
        let mut from = in_memory.from_ns.div_euclid(1_000_000)
            + i64::from(in_memory.from_ns.rem_euclid(1_000_000) > 0);
        let thinned = level
            .as_ref()
            .map(|level| (level.thinned, level.width().as_millis() as i64));
        if let Some((_, width)) = thinned {
            from = from.saturating_add(width - 1).div_euclid(width) * width;
        }
        let mut out = match from > start {
            true => {
                let range = (start, (from - 1).min(end));
                let read = self
                    .engine_samples(candidate, matchers, found, range, level.as_ref(), budget)
                    .await?;
                of_decoded(read)
            }
            false => HashMap::new(),
        };
        // Kept compressed where memory's samples are taken whole.
        let whole = thinned.is_none() && from.checked_mul(1_000_000) == Some(in_memory.from_ns);
        for (id, compressed) in ids.into_iter().zip(in_memory.samples) {
            if compressed.is_empty() {
                continue;
            }
            if whole {
                take(budget, compressed.len(), self.limits.max_samples)?;
                out.entry(id).or_default().push_compressed(compressed);
                continue;
            }
            let mut samples = Vec::new();
            compressed.decode_into(&mut samples);
            samples.drain(..samples.partition_point(|(ms, _)| *ms < from));
            let samples = match thinned {
                Some((kind, width)) => thin_samples(samples, kind, width),
                None => samples,
            };
            take_samples(&mut out, id, samples, budget, self.limits.max_samples)?;
        }
        Ok(out)
    }

    /// The series ids a samples statement reads: `found`'s, listed, when
    /// few enough for a statement (a key lookup each); else the series
    /// table's statement that selects them (and a few the matchers refuse
    /// in memory, whose samples are dropped as they are read).
    fn id_set(
        &self,
        candidate: &Candidate,
        matchers: &[LabelMatcher],
        found: &HashMap<u64, Labels>,
    ) -> String {
        if found.len() <= MAX_LISTED_IDS {
            let ids: Vec<String> = found.keys().map(u64::to_string).collect();
            return ids.join(", ");
        }
        format!(
            "SELECT series_id FROM {} FINAL WHERE {}",
            candidate.names.series_table,
            self.series_condition(candidate, matchers)
        )
    }

    /// The series the matchers select with their samples in `[start, end]`
    /// (ms, both ends included), stale markers included; sorted by labels.
    /// `series_budget` and `sample_budget` are what the query has left.
    pub async fn select(
        &self,
        matchers: &[LabelMatcher],
        start: i64,
        end: i64,
        series_budget: &mut usize,
        sample_budget: &mut usize,
    ) -> Result<Vec<Series>, Error> {
        self.select_thinned(matchers, (start, end), None, series_budget, sample_budget)
            .await
    }

    /// As [`select`](Self::select), where `thin` allows one sample per
    /// rollup bucket in place of the bucket's samples (docs/downsampling.md).
    pub(crate) async fn select_thinned(
        &self,
        matchers: &[LabelMatcher],
        range: (i64, i64),
        thin: Option<Thinning>,
        series_budget: &mut usize,
        sample_budget: &mut usize,
    ) -> Result<Vec<Series>, Error> {
        let selected = self
            .select_compressed(matchers, range, thin, series_budget, sample_budget)
            .await?;
        Ok(Selected::decode_all(selected))
    }

    /// As [`select_thinned`](Self::select_thinned), memory's samples left
    /// compressed until they are used.
    pub(crate) async fn select_compressed(
        &self,
        matchers: &[LabelMatcher],
        (start, end): (i64, i64),
        thin: Option<Thinning>,
        series_budget: &mut usize,
        sample_budget: &mut usize,
    ) -> Result<Vec<Selected>, Error> {
        let mut out = Vec::new();
        for candidate in self.candidates(matchers) {
            let found = self
                .candidate_series(&candidate, matchers, None, series_budget, Overflow::Refuse)
                .await?;
            if found.is_empty() {
                continue;
            }
            let samples = self
                .samples(
                    &candidate,
                    matchers,
                    &found,
                    (start, end),
                    thin,
                    sample_budget,
                )
                .await?;
            out.extend(samples.into_iter().map(|(id, samples)| Selected {
                labels: found[&id].clone(),
                samples,
            }));
        }
        crate::value::sort_by_labels(&mut out, |s| &s.labels);
        Ok(out)
    }

    /// The samples of `found`'s series of `candidate` in `[start, end]`
    /// (ms) from the engine, by id.
    async fn engine_samples(
        &self,
        candidate: &Candidate,
        matchers: &[LabelMatcher],
        found: &HashMap<u64, Labels>,
        (start, end): (i64, i64),
        level: Option<&ThinLevel>,
        sample_budget: &mut usize,
    ) -> Result<SamplesById, Error> {
        let ids = self.id_set(candidate, matchers, found);
        let limit = *sample_budget + 1;
        let batches = match level
            .and_then(|level| thinned_sql(candidate, &ids, (start, end), level))
        {
            Some(samples) => {
                // Unordered: the engine's sort of every sample cost more
                // than sorting each series' few runs here (below).
                let sql = format!("{samples} LIMIT {limit}");
                self.statements.fetch_add(1, Ordering::Relaxed);
                self.ingestor.query_rollups(&sql).await?
            }
            None => {
                let sql = format!(
                    "SELECT series_id, toUnixTimestamp64Milli(time), toFloat64({field}) FROM {facts} \
                     WHERE series_id IN ({ids}) \
                     AND {time} AND {field} IS NOT NULL ORDER BY series_id, time LIMIT {limit}",
                    field = quote_ident(&candidate.field),
                    facts = self.facts(candidate, Some((start, end))),
                    time = time_condition(start, end),
                );
                self.statement(&sql).await?
            }
        };
        let mut points = SamplesById::new();
        for batch in &batches {
            read_samples(
                batch,
                found,
                &mut points,
                sample_budget,
                self.limits.max_samples,
            )?;
        }
        for samples in points.values_mut() {
            // Sorted runs (a stable sort keeps the order of equal times).
            samples.sort_by_key(|sample| sample.0);
            dedup_last(samples);
        }
        Ok(points)
    }
}

fn read_samples(
    batch: &RecordBatch,
    wanted: &HashMap<u64, Labels>,
    points: &mut HashMap<u64, Vec<(i64, f64)>>,
    budget: &mut usize,
    limit: usize,
) -> Result<(), Error> {
    let ids = batch.column(0).as_primitive::<UInt64Type>();
    let times = batch.column(1).as_primitive::<Int64Type>();
    let values = batch.column(2).as_primitive::<Float64Type>();
    // A series' samples come in runs: looked up once a run.
    let mut run: Option<u64> = None;
    let mut list: Option<&mut Vec<(i64, f64)>> = None;
    for row in 0..batch.num_rows() {
        let id = ids.value(row);
        if run != Some(id) {
            run = Some(id);
            list = wanted
                .contains_key(&id)
                .then(|| points.entry(id).or_default());
        }
        let Some(list) = &mut list else {
            continue;
        };
        if *budget == 0 {
            return Err(too_many_samples(limit));
        }
        *budget -= 1;
        list.push((times.value(row), values.value(row)));
    }
    Ok(())
}

/// Adds `samples` to series `id`'s in `out`, counting them against the
/// `budget` of a query whose limit is `limit`.
fn take_samples(
    out: &mut HashMap<u64, Samples>,
    id: u64,
    samples: Vec<(i64, f64)>,
    budget: &mut usize,
    limit: usize,
) -> Result<(), Error> {
    take(budget, samples.len(), limit)?;
    if !samples.is_empty() {
        out.entry(id).or_default().push_decoded(samples);
    }
    Ok(())
}

/// Each series' decoded samples, as selection gives them.
fn of_decoded(samples: SamplesById) -> HashMap<u64, Samples> {
    samples
        .into_iter()
        .map(|(id, decoded)| (id, Samples::decoded(decoded)))
        .collect()
}

/// Counts `samples` against the `budget` of a query whose limit is
/// `limit`.
fn take(budget: &mut usize, samples: usize, limit: usize) -> Result<(), Error> {
    if samples > *budget {
        return Err(too_many_samples(limit));
    }
    *budget -= samples;
    Ok(())
}

/// One sample per time, sorted, the last of equal times kept: what a
/// selection keeps ([`Source::select`]).
fn dedup_last(samples: &mut Vec<(i64, f64)>) {
    // Most lists hold one sample per time: a look, not a rewrite.
    if samples.windows(2).all(|pair| pair[0].0 != pair[1].0) {
        return;
    }
    samples.dedup_by(|later, earlier| {
        let same = later.0 == earlier.0;
        if same {
            *earlier = *later;
        }
        same
    });
}

fn too_many_samples(limit: usize) -> Error {
    Error::Execution(format!(
        "query processing would load too many samples into memory in query execution \
         (more than query.max_samples = {limit})"
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_read_in_runs_go_to_their_series_and_count_against_the_budget() {
        use arrow::array::{Float64Array, Int64Array, UInt64Array};
        use std::sync::Arc;
        let batch = RecordBatch::try_from_iter([
            (
                "id",
                Arc::new(UInt64Array::from(vec![1, 1, 9, 2, 1, 2])) as _,
            ),
            (
                "t",
                Arc::new(Int64Array::from(vec![10, 20, 5, 7, 30, 3])) as _,
            ),
            (
                "v",
                Arc::new(Float64Array::from(vec![1.0, 2.0, 9.0, 7.0, 3.0, 4.0])) as _,
            ),
        ])
        .unwrap();
        // Series 9 is not wanted: its sample neither lands nor counts.
        let wanted: HashMap<u64, Labels> = [(1, Labels::default()), (2, Labels::default())].into();
        let (mut points, mut budget) = (SamplesById::new(), 5);
        read_samples(&batch, &wanted, &mut points, &mut budget, 5).unwrap();
        assert_eq!(budget, 0);
        assert_eq!(points[&1], vec![(10, 1.0), (20, 2.0), (30, 3.0)]);
        assert_eq!(points[&2], vec![(7, 7.0), (3, 4.0)]);
        assert!(!points.contains_key(&9));
        let (mut points, mut budget) = (SamplesById::new(), 4);
        let err = read_samples(&batch, &wanted, &mut points, &mut budget, 4).unwrap_err();
        assert!(err.to_string().contains("max_samples = 4"), "{err}");
    }
}
