//! Reading rollups in place of samples (docs/downsampling.md): where a
//! range function's answer is close with one sample per bucket
//! ([`Thinned`]), the level whose buckets fit, the engine statement that
//! reads them (and the rows thinned alike where the level lacks them),
//! and memory's samples thinned the same way.

use std::time::Duration;

use chingest::layout::names::quote_ident;
use chingest::layout::rollup::{time_in_sql, Aggregate as Kept, Rollup};
use chingest::{Keeps, RollupView};

use super::candidate::Candidate;
use super::source::{ms_to_ns, Source};
use crate::eval::Thinned;

/// What a selection may read from rollups: the sample that stands for a
/// bucket's samples, and the widest bucket (ms) that keeps its answer
/// close (docs/downsampling.md).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Thinning {
    pub(crate) thinned: Thinned,
    pub(crate) widest_ms: i64,
}

/// The rollup level a thinned selection reads ([`Source::thin_level`]).
pub(super) struct ThinLevel {
    pub(super) thinned: Thinned,
    view: RollupView,
    /// An index into the view's levels.
    level: usize,
}

impl ThinLevel {
    /// The width of its buckets.
    pub(super) fn width(&self) -> Duration {
        self.view.levels[self.level].0.interval
    }
}

impl Thinned {
    /// The rollup column whose value stands for a bucket.
    fn kept(self) -> Kept {
        match self {
            Thinned::Last => Kept::Last,
            Thinned::Max => Kept::Max,
            Thinned::Min => Kept::Min,
        }
    }

    /// What a level must keep to give it ([`thinned_sql`]'s columns).
    fn reads(self) -> Keeps {
        Kept::needs([self.kept(), Kept::Count, Kept::LastTime])
    }
}

impl Source<'_> {
    /// The rollup level `thin` reads for `candidate` (its view and level),
    /// if its field is rolled up and a level fits.
    pub(super) fn thin_level(&self, candidate: &Candidate, thin: Thinning) -> Option<ThinLevel> {
        let (database, rp, measurement) = self.table_of(candidate);
        let view = self.ingestor.rollups((database, rp, measurement))?;
        let rolled = view
            .fields
            .iter()
            .any(|(f, ty)| *f == candidate.field && Kept::Sum.applies_to(*ty));
        let level = view.level(thin.thinned.reads(), |width| {
            width.as_millis() as i64 <= thin.widest_ms
        })?;
        rolled.then_some(ThinLevel {
            thinned: thin.thinned,
            view,
            level,
        })
    }
}

/// The samples of `ids` in `[start, end]` (ms) of `candidate` as
/// `(series_id, t, v)` rows, with one sample per bucket where a rollup
/// holds the bucket whole (`level`); `None` when no whole bucket is left to it.
pub(super) fn thinned_sql(
    candidate: &Candidate,
    ids: &str,
    (start, end): (i64, i64),
    level: &ThinLevel,
) -> Option<String> {
    let (start_ns, end_ns) = ms_to_ns(start, end);
    // The first bucket whole: one sample stands for a bucket anyway,
    // and it spares reading the rows before its edge.
    let width = level.width();
    let step = width.as_nanos() as i64;
    let split = level.view.split(
        level.level,
        start_ns.div_euclid(step) * step,
        end_ns.saturating_add(1),
        level.thinned.reads(),
    )?;
    let field = &candidate.field;
    let value = Rollup::column(field, level.thinned.kept());
    let (count, last_time) = (
        Rollup::column(field, Kept::Count),
        Rollup::column(field, Kept::LastTime),
    );
    // Each level's buckets; coarser ones where the finer are gone.
    let mut sides: Vec<String> = split
        .rollups
        .iter()
        .map(|(table, spans)| {
            format!(
                "SELECT series_id, {last_time} AS t, toFloat64({value}) AS v FROM {table} FINAL \
                 WHERE series_id IN ({ids}) AND {} AND {count} > 0",
                time_in_sql("time", spans),
            )
        })
        .collect();
    if !split.rows.is_empty() {
        // The rows thinned alike, a sample per bucket: a window whose
        // samples were half a bucket's and half each sample's would
        // be extrapolated by neither's spacing.
        let field = quote_ident(field);
        let v = match level.thinned {
            Thinned::Last => format!("argMax({field}, time)"),
            Thinned::Max => format!("max({field})"),
            Thinned::Min => format!("min({field})"),
        };
        sides.push(format!(
            "SELECT series_id, max(time) AS t, toFloat64({v}) AS v FROM {} \
             WHERE series_id IN ({ids}) AND {} AND {field} IS NOT NULL \
             GROUP BY series_id, toStartOfInterval(time, INTERVAL {} SECOND)",
            candidate.names.storage_table,
            time_in_sql("time", &split.rows),
            width.as_secs(),
        ));
    }
    Some(format!(
        "SELECT series_id, toUnixTimestamp64Milli(t), v FROM ({})",
        sides.join(" UNION ALL ")
    ))
}

/// One sample per bucket of `width` ms, at the time of its last: the last
/// value, or the greatest or least (what a rollup gives for `kind`).
pub(super) fn thin_samples(samples: Vec<(i64, f64)>, kind: Thinned, width: i64) -> Vec<(i64, f64)> {
    let mut out: Vec<(i64, f64)> = Vec::new();
    let mut bucket = None;
    for (t, v) in samples {
        let this = t.div_euclid(width);
        match out.last_mut() {
            Some(last) if bucket == Some(this) => {
                last.1 = match kind {
                    Thinned::Last => v,
                    Thinned::Max => last.1.max(v),
                    Thinned::Min => last.1.min(v),
                };
                last.0 = t;
            }
            _ => out.push((t, v)),
        }
        bucket = Some(this);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn thinning_keeps_a_sample_per_bucket_at_its_last_time() {
        let samples = vec![
            (1, 5.0),
            (4, 9.0),
            (9, 2.0),
            (10, 7.0),
            (25, 1.0),
            (29, 3.0),
        ];
        let thin = |kind| thin_samples(samples.clone(), kind, 10);
        assert_eq!(thin(Thinned::Last), vec![(9, 2.0), (10, 7.0), (29, 3.0)]);
        assert_eq!(thin(Thinned::Max), vec![(9, 9.0), (10, 7.0), (29, 3.0)]);
        assert_eq!(thin(Thinned::Min), vec![(9, 2.0), (10, 7.0), (29, 1.0)]);
        assert_eq!(thin_samples(Vec::new(), Thinned::Last, 10), Vec::new());
    }
}
