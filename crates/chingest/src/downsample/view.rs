//! What readers see: where a read may take buckets from a rollup and
//! where it must read the rows ([`RollupView`], [`RollupView::split`]),
//! and the spans inserts and edits report until a pass has rolled them
//! up.

use std::time::Duration;

use crate::config::{Downsampling, Keeps};
use crate::layout::names::{quote_ident, TableNames};
use crate::layout::rollup::{time_in_sql, Aggregate, Resolution, Rollup};
use crate::layout::schema::FieldType;

use super::downsampler::{Downsampler, Mode};
use super::state::{ceil_to, floor_to, resolutions, rollups, union, widen, Cuts, Kept, Span};

/// What a reader may take from the rollups of one fact table
/// ([`crate::Ingestor::rollups`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollupView {
    /// The levels, finest first, and their tables' quoted names.
    pub levels: Vec<(Resolution, String)>,
    /// The fields whose columns (`Rollup::column`) every level has.
    pub fields: Vec<(String, FieldType)>,
    /// The span `[from, to)` (ns) where the rollups may lack rows or keep
    /// some an edit removed: read the rows there, in whole buckets.
    pub unsettled: Option<(i64, i64)>,
    /// Before it (ns) the rows are gone; `i64::MIN` when all are kept.
    pub rows_from: i64,
    /// Per level: before it (ns) its buckets are gone.
    pub kept_from: Vec<i64>,
}

/// A range split between rollups and the rows ([`RollupView::split`]):
/// `[from, to)` spans in ns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RollupSplit {
    /// Per level's table (quoted), finest first, the spans of bucket
    /// starts to read from it.
    pub rollups: Vec<(String, Vec<(i64, i64)>)>,
    /// The rest of the range, from the rows.
    pub rows: Vec<(i64, i64)>,
}

impl RollupView {
    /// The coarsest level whose bucket width `fits` and that keeps what a
    /// reader `reads` (an index into [`levels`](Self::levels)).
    pub fn level(&self, reads: Keeps, fits: impl Fn(Duration) -> bool) -> Option<usize> {
        self.levels
            .iter()
            .rposition(|(level, _)| level.keeps.provides(reads) && fits(level.interval))
    }

    /// Splits `[start, end)` (ns) for a read at the buckets of `level`:
    /// where the rows are kept, the spans whose buckets the level holds
    /// whole (inside the range, outside what it may lack), and the rest,
    /// to be read from the rows; where the rows are gone, the buckets
    /// whose start is in the range, from `level` or, where its buckets are
    /// gone too, the coarser levels. `None` when no bucket is left to a
    /// rollup, or when a coarser level it needs does not keep what the
    /// reader `reads` (read the rows, [`rows_sql`](Self::rows_sql), instead).
    pub fn split(&self, level: usize, start: i64, end: i64, reads: Keeps) -> Option<RollupSplit> {
        let keep = |spans: &[Span]| -> Vec<Span> {
            spans.iter().copied().filter(|(a, b)| a < b).collect()
        };
        let interval = self.levels[level].0.interval;
        let mut rollups: Vec<(usize, Vec<Span>)> = Vec::new();
        let mut rows = Vec::new();
        // Where the rows are kept: whole buckets, but where unsettled.
        let (first, last) = (
            ceil_to(start.max(self.rows_from), interval),
            floor_to(end, interval),
        );
        if first < last {
            let (skip_from, skip_to) = self.unsettled.map_or((last, last), |(from, to)| {
                (
                    floor_to(from, interval).clamp(first, last),
                    ceil_to(to, interval).clamp(first, last),
                )
            });
            rollups.push((level, keep(&[(first, skip_from), (skip_to, last)])));
            rows = keep(&[
                (start.max(self.rows_from), first),
                (skip_from, skip_to),
                (last, end),
            ]);
        } else if end > self.rows_from {
            rows.push((start.max(self.rows_from), end));
        }
        // Where the rows are gone: each level from its cut, finest first.
        let mut upto = end.min(self.rows_from);
        for coarser in level..self.levels.len() {
            let from = start.max(self.kept_from[coarser]);
            if from < upto {
                if !self.levels[coarser].0.keeps.provides(reads) {
                    return None;
                }
                match rollups.iter_mut().find(|(l, _)| *l == coarser) {
                    Some((_, spans)) => spans.insert(0, (from, upto)),
                    None => rollups.push((coarser, vec![(from, upto)])),
                }
            }
            upto = upto.min(self.kept_from[coarser]);
        }
        let rollups: Vec<(String, Vec<Span>)> = rollups
            .into_iter()
            .filter(|(_, spans)| !spans.is_empty())
            .map(|(level, spans)| (self.levels[level].1.clone(), merge_adjacent(spans)))
            .collect();
        let rows = merge_adjacent(rows);
        (!rollups.is_empty()).then_some(RollupSplit { rollups, rows })
    }

    /// The rows of `facts` (a fact table's quoted name, whose fields are
    /// `fields`) a read of `[start, end)` (ns) needs, as a statement with
    /// their columns, where some of them are gone: the rows kept, and
    /// before them each bucket of the finest level left as a row
    /// ([`Rollup::as_rows_sql`]). `None` when the rows cover the range:
    /// read the table.
    pub fn rows_sql(
        &self,
        facts: &str,
        fields: &[(String, FieldType)],
        start: i64,
        end: i64,
    ) -> Option<String> {
        if start >= self.rows_from {
            return None;
        }
        let columns: String = fields
            .iter()
            .map(|(f, _)| format!(", {}", quote_ident(f)))
            .collect();
        let mut sides = vec![format!(
            "SELECT time, series_id{columns} FROM {facts} WHERE {}",
            time_in_sql("time", &[(self.rows_from, end)]),
        )];
        sides.extend(self.gone_rows_sql(fields, start, end, Aggregate::Last));
        Some(format!("({})", sides.join(" UNION ALL ")))
    }

    /// Where the rows of `[start, end)` (ns) are gone, statements giving
    /// each bucket of the finest level left as a row of the fact table
    /// with `fields`, at its `at` sample (`Last` or `First`):
    /// [`Rollup::as_rows_sql`].
    pub fn gone_rows_sql(
        &self,
        fields: &[(String, FieldType)],
        start: i64,
        end: i64,
        at: Aggregate,
    ) -> Vec<String> {
        let mut sides = Vec::new();
        let mut upto = end.min(self.rows_from);
        for (level, (resolution, table)) in self.levels.iter().enumerate() {
            // The bucket holding `start` may have its sample in range.
            let from = floor_to(start, resolution.interval).max(self.kept_from[level]);
            if from < upto {
                let rollup = Rollup::named(table, *resolution, &self.fields);
                sides.push(rollup.as_rows_sql(fields, from, upto, at));
            }
            upto = upto.min(self.kept_from[level]);
        }
        sides
    }
}

/// What a reader may take from the rollups of the fact table `names`,
/// kept at `levels` from `cuts`, with columns for `fields`.
pub(super) fn view_of(
    names: &TableNames,
    Kept { levels, cuts }: Kept,
    fields: Vec<(String, FieldType)>,
    unsettled: Option<Span>,
) -> RollupView {
    RollupView {
        rows_from: cuts.rows_from(),
        kept_from: (0..levels.len()).map(|i| cuts.kept_from(i)).collect(),
        // Their names only: no field's columns are needed here.
        levels: rollups(names, &[], &levels)
            .into_iter()
            .map(|rollup| (rollup.resolution(), rollup.table))
            .collect(),
        fields: fields
            .into_iter()
            .filter(|(_, ty)| Aggregate::Count.applies_to(*ty))
            .collect(),
        unsettled,
    }
}

/// `spans` (sorted) with touching ones joined.
pub(super) fn merge_adjacent(spans: Vec<Span>) -> Vec<Span> {
    let mut out: Vec<Span> = Vec::new();
    for (from, to) in spans {
        match out.last_mut() {
            Some(last) if last.1 == from => last.1 = to,
            _ => out.push((from, to)),
        }
    }
    out
}

impl Downsampler {
    /// Whether this node downsamples `database`, or, in the cluster mode,
    /// another node did (its rollups were learnt); in the embedded mode,
    /// [`Policies::is_downsampled`](super::policy::Policies::is_downsampled).
    pub(crate) fn is_downsampled_anywhere(&self, database: &str) -> bool {
        let prefix = format!("{}.", TableNames::new(database, "", "").database);
        self.policies.is_downsampled(database)
            || matches!(self.mode, Mode::Cluster { .. }) && {
                let readers = self.readers.lock().unwrap();
                let mut learnt = readers.known.learnt.keys();
                learnt.any(|table| table.starts_with(&prefix))
            }
    }

    /// Notes rows of `table` (a storage table of `database`) over `span`
    /// being inserted: readers read them from the rows until a pass has
    /// rolled them up. Tables of other databases are not kept.
    pub(crate) fn inserting(&self, database: &str, table: &str, span: Span) {
        match self.mode {
            Mode::Cluster { .. } => {
                // Any database: another node may downsample it.
                let known = &mut self.readers.lock().unwrap().known;
                known.reports += 1;
                let widened = union(known.pending.get(table).map(|p| p.0), span);
                let report = known.reports;
                known.pending.insert(table.to_owned(), (widened, report));
            }
            Mode::Embedded if self.policies.is_downsampled(database) => {
                widen(
                    &mut self.readers.lock().unwrap().unsettled.pending,
                    table,
                    span,
                );
            }
            Mode::Embedded => {}
        }
    }

    /// What a reader may take from the rollups of the fact table `names`;
    /// `None` when its database is not downsampled or its rollups were
    /// not made (or found) since the process started.
    pub(crate) fn view(&self, names: &TableNames) -> Option<RollupView> {
        let table = &names.storage_table;
        if let Mode::Cluster { .. } = self.mode {
            let (learnt, pending) = {
                let known = &self.readers.lock().unwrap().known;
                let pending = known.pending.get(table).map(|p| p.0);
                (known.learnt.get(table)?.clone(), pending)
            };
            let unsettled = match (learnt.unsettled, pending) {
                (None, None) => None,
                (a, Some(b)) | (Some(b), a) => Some(union(a, b)),
            };
            return Some(view_of(names, learnt.kept, learnt.fields, unsettled));
        }
        if !self.policies.is_downsampled(&names.database_name) {
            return None;
        }
        let (unsettled, kept, fields) = {
            let readers = self.readers.lock().unwrap();
            let unsettled = &readers.unsettled;
            let unsettled = match unsettled.known.contains(table) {
                // No pass yet: they may lack anything.
                false => Some((i64::MIN, i64::MAX)),
                true => match (unsettled.pending.get(table), unsettled.passing.get(table)) {
                    (None, None) => None,
                    (a, Some(b)) | (Some(b), a) => Some(union(a.copied(), *b)),
                },
            };
            let kept = readers.kept.get(table).cloned();
            (unsettled, kept, readers.made.get(table)?.clone())
        };
        let kept = match kept {
            Some(kept) => kept,
            None => Kept {
                levels: resolutions(&self.policies.policy_of(names)?),
                cuts: Cuts::default(),
            },
        };
        Some(view_of(names, kept, fields, unsettled))
    }

    /// Tells readers the levels the rollups of the fact table `names` hold
    /// and the cuts they are kept from (in the embedded mode: in the
    /// cluster mode readers learn them from every shard).
    pub(super) fn keep(&self, names: &TableNames, levels: Vec<Resolution>, cuts: Cuts) {
        let kept = Kept { levels, cuts };
        let table = names.storage_table.clone();
        self.readers.lock().unwrap().kept.insert(table, kept);
    }

    /// The levels the rollups of the fact table `names` hold, as far as
    /// this process knows: `policy`'s until a pass or the registry said.
    pub(super) fn levels_of(&self, names: &TableNames, policy: &Downsampling) -> Vec<Resolution> {
        match self.readers.lock().unwrap().kept.get(&names.storage_table) {
            Some(kept) => kept.levels.clone(),
            None => resolutions(policy),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: i64 = i64::MIN;
    const ALL: Keeps = Keeps::Aggregates;

    fn width(nanos: u64) -> Resolution {
        Resolution::aggregates(Duration::from_nanos(nanos))
    }

    fn view(unsettled: Option<Span>) -> RollupView {
        RollupView {
            levels: vec![(width(10), "t".to_owned())],
            fields: Vec::new(),
            unsettled,
            rows_from: MIN,
            kept_from: vec![MIN],
        }
    }

    fn spans(split: &RollupSplit) -> Vec<(&str, Vec<Span>)> {
        split
            .rollups
            .iter()
            .map(|(table, spans)| (table.as_str(), spans.clone()))
            .collect()
    }

    #[test]
    fn a_range_splits_into_whole_buckets_and_the_rest() {
        // Cut ends go to the rows.
        let split = view(None).split(0, 5, 47, ALL).unwrap();
        assert_eq!(spans(&split), vec![("t", vec![(10, 40)])]);
        assert_eq!(split.rows, vec![(5, 10), (40, 47)]);
        // What the rollups may lack too, in whole buckets.
        let split = view(Some((23, 27))).split(0, 0, 50, ALL).unwrap();
        assert_eq!(spans(&split), vec![("t", vec![(0, 20), (30, 50)])]);
        assert_eq!(split.rows, vec![(20, 30)]);
        // Unsettled past the end, an unbounded start.
        let split = view(Some((45, 90))).split(0, MIN, 50, ALL).unwrap();
        assert_eq!(split.rows.last(), Some(&(40, 50)));
        assert_eq!(split.rows[0].0, MIN);
        // No whole bucket: nothing for the rollup.
        assert_eq!(view(None).split(0, 11, 19, ALL), None);
        assert_eq!(view(Some((MIN, i64::MAX))).split(0, 0, 50, ALL), None);
    }

    #[test]
    fn where_rows_are_gone_buckets_count_by_their_start_from_the_finest_level_left() {
        let view = RollupView {
            levels: vec![
                (width(10), "fine".to_owned()),
                (width(20), "coarse".to_owned()),
            ],
            fields: Vec::new(),
            // Unknown after a restart: the rows where they are kept.
            unsettled: Some((MIN, i64::MAX)),
            rows_from: 40,
            kept_from: vec![20, MIN],
        };
        let split = view.split(0, 5, 67, ALL).unwrap();
        assert_eq!(
            spans(&split),
            vec![("fine", vec![(20, 40)]), ("coarse", vec![(5, 20)])]
        );
        assert_eq!(split.rows, vec![(40, 67)]);
        let settled = RollupView {
            unsettled: None,
            ..view.clone()
        };
        let split = settled.split(0, 25, 67, ALL).unwrap();
        assert_eq!(spans(&split), vec![("fine", vec![(25, 60)])]);
        assert_eq!(split.rows, vec![(60, 67)]);
        // The coarse level is asked for: the fine one is never read.
        let split = settled.split(1, 5, 90, ALL).unwrap();
        assert_eq!(spans(&split), vec![("coarse", vec![(5, 80)])]);
        assert_eq!(split.rows, vec![(80, 90)]);
        // Rows read where kept; the facts stand in for themselves there.
        assert_eq!(settled.rows_sql("f", &[], 40, 90), None);
        let rows = settled.rows_sql("f", &[], 0, 90).unwrap();
        assert!(
            rows.contains("FROM f WHERE") && rows.contains("FROM fine FINAL"),
            "{rows}"
        );
        assert!(rows.contains("FROM coarse FINAL"), "{rows}");
        // A coarse level keeping the last sample only: chosen and split
        // into for a reader of last samples, never for one of aggregates.
        let mut last = settled.clone();
        last.levels[1].0.keeps = Keeps::Last;
        assert_eq!(last.level(ALL, |_| true), Some(0));
        assert_eq!(last.level(Keeps::Last, |_| true), Some(1));
        assert_eq!(last.split(0, 5, 67, ALL), None);
        assert_eq!(
            spans(&last.split(0, 5, 67, Keeps::Last).unwrap())[1].0,
            "coarse"
        );
        // Nor where the fine level alone answers.
        assert!(last.split(0, 25, 67, ALL).is_some());
    }
}
