//! What every part of evaluation shares: the [`Evaluator`] (the samples
//! each selector read, the query's times, and what it derives and keeps
//! as it goes: label sets, cursors, the rollups' tables), the values its
//! parts pass each other ([`Val`], [`Window`]), and the reading of a
//! selector's series at one time. Nothing here evaluates an expression:
//! `mod.rs` dispatches on the expression's kind to its parts, which build
//! on this.

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::borrow::Cow;
use std::cell::{OnceCell, RefCell, RefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use promql_parser::parser::{AtModifier, Offset, VectorSelector};

use crate::error::Error;
use crate::selected::Selected;
use crate::value::{is_stale, Labels, Sample, Series};

/// How many derived label sets the evaluator keeps.
const MAX_DERIVED: usize = 1 << 16;

pub(super) fn duration_ms(d: &std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 4)
}

pub(super) fn offset_ms(offset: &Option<Offset>) -> i64 {
    match offset {
        None => 0,
        Some(Offset::Pos(d)) => duration_ms(d),
        Some(Offset::Neg(d)) => -duration_ms(d),
    }
}

pub(super) fn at_ms(at: &Option<AtModifier>, (start, end): (i64, i64)) -> Option<i64> {
    Some(match at.as_ref()? {
        AtModifier::Start => start,
        AtModifier::End => end,
        AtModifier::At(t) => match t.duration_since(SystemTime::UNIX_EPOCH) {
            Ok(d) => duration_ms(&d),
            Err(before) => -duration_ms(&before.duration()),
        },
    })
}

/// A series' samples within a range selector's window: borrowed from what
/// was read when no stale marker had to be left out.
#[derive(Debug, Clone)]
pub(crate) struct Window<'d> {
    pub(crate) labels: Labels,
    pub(crate) points: Cow<'d, [(i64, f64)]>,
}

/// What an expression evaluates to at one time.
pub(crate) enum Val<'d> {
    Scalar(f64),
    String(String),
    Vector(Vec<Sample>),
    Matrix(Vec<Window<'d>>),
}

impl Val<'_> {
    pub(super) fn kind(&self) -> &'static str {
        match self {
            Val::Scalar(_) => "scalar",
            Val::String(_) => "string",
            Val::Vector(_) => "instant vector",
            Val::Matrix(_) => "range vector",
        }
    }
}

/// The samples each selector read (by the selector's address in the
/// query's tree) and how to evaluate.
pub(crate) struct Evaluator {
    pub(crate) data: HashMap<usize, ReadSeries>,
    pub(crate) lookback: i64,
    /// The query's start and end (what `@ start()` and `@ end()` mean).
    pub(crate) query: (i64, i64),
    pub(crate) deadline: Instant,
    /// Set when the caller went away.
    pub(crate) cancelled: Arc<AtomicBool>,
    /// Label sets derived from others by a node (an aggregation's group, a
    /// binary operator's match), by node and input set: a series' sets are
    /// the same at every step, so each is derived once.
    pub(crate) derived: RefCell<HashMap<(usize, usize), (Labels, Labels)>>,
    /// One copy of each derived set, so the series of one group share it
    /// (and grouping compares them by address).
    pub(crate) interned: RefCell<HashSet<Labels>>,
    /// Where each selector's series were last read (`from`, `to`): a range
    /// query's next step reads a little further on, found from there.
    pub(crate) cursors: RefCell<HashMap<usize, Vec<Cursor>>>,
    /// A range query's steps (`None` for an instant query).
    pub(crate) grid: Option<Grid>,
    /// Range-function calls evaluated series by series, by node (`None`:
    /// evaluated step by step).
    pub(crate) rollups: RefCell<HashMap<usize, Option<Arc<Rolled>>>>,
    /// Aggregations of those, folded series by series, by node.
    pub(crate) groupings: RefCell<HashMap<usize, Option<Arc<Grouped>>>>,
}

/// An error once the query is past its `deadline` or its caller went away
/// (`cancelled`).
pub(crate) fn check_time(deadline: Instant, cancelled: &AtomicBool) -> Result<(), Error> {
    if cancelled.load(Ordering::Relaxed) {
        return Err(Error::Timeout(
            "query cancelled: the client went away".into(),
        ));
    }
    if Instant::now() > deadline {
        return Err(Error::Timeout(
            "query timed out in expression evaluation".into(),
        ));
    }
    Ok(())
}

/// A selector's series: as selection read them, decoded on first use. A
/// rollup decodes each series where it rolls it up ([`ReadSeries::pending`]),
/// so the selection is never written out whole.
pub(crate) struct ReadSeries {
    selected: Vec<Selected>,
    decoded: OnceCell<Vec<Series>>,
}

impl ReadSeries {
    pub(crate) fn new(selected: Vec<Selected>) -> ReadSeries {
        ReadSeries {
            selected,
            decoded: OnceCell::new(),
        }
    }

    /// The series, decoded.
    pub(crate) fn series(&self) -> &[Series] {
        self.decoded
            .get_or_init(|| Selected::decode_each(&self.selected))
    }

    /// The series as read, unless they were decoded already.
    pub(crate) fn pending(&self) -> Option<&[Selected]> {
        self.decoded.get().is_none().then_some(&self.selected)
    }
}

/// Where a series was last read: the first and the one-past-last index
/// of its last window (an instant selector uses the second).
pub(crate) type Cursor = (usize, usize);

/// The key of a selector's samples.
pub(crate) fn key(selector: &VectorSelector) -> usize {
    selector as *const VectorSelector as usize
}

impl Evaluator {
    /// `derive(labels)` for the expression node at `node`, made once per
    /// input set (which the cache holds, so its address stays its own).
    pub(crate) fn derive(
        &self,
        node: usize,
        labels: &Labels,
        derive: impl FnOnce(&Labels) -> Labels,
    ) -> Labels {
        let key = (node, labels.address());
        if let Some((_, derived)) = self.derived.borrow().get(&key) {
            return derived.clone();
        }
        let derived = derive(labels);
        let derived = {
            let mut interned = self.interned.borrow_mut();
            match interned.get(&derived) {
                Some(shared) => shared.clone(),
                None => {
                    interned.insert(derived.clone());
                    derived
                }
            }
        };
        let mut cache = self.derived.borrow_mut();
        // Sets made anew at every step (by label_replace, say) would fill it.
        if cache.len() >= MAX_DERIVED {
            cache.clear();
            self.interned.borrow_mut().clear();
        }
        cache.insert(key, (labels.clone(), derived.clone()));
        derived
    }

    /// Which of a range query's steps `ts` is, if it is one.
    pub(super) fn step_of(&self, ts: i64) -> Option<usize> {
        self.grid.and_then(|grid| grid.index(ts))
    }

    pub(super) fn check_time(&self) -> Result<(), Error> {
        check_time(self.deadline, &self.cancelled)
    }

    /// The time a selector or subquery is evaluated at for `ts`.
    pub(super) fn reference(
        &self,
        at: &Option<AtModifier>,
        offset: &Option<Offset>,
        ts: i64,
    ) -> i64 {
        at_ms(at, self.query).unwrap_or(ts) - offset_ms(offset)
    }

    /// A selector's series, and where each was last read.
    fn selected(&self, vs: &VectorSelector) -> Option<(&[Series], RefMut<'_, [Cursor]>)> {
        let series = self.data.get(&key(vs))?.series();
        let cursors = RefMut::map(self.cursors.borrow_mut(), |cursors| {
            cursors
                .entry(key(vs))
                .or_insert_with(|| vec![(0, 0); series.len()])
                .as_mut_slice()
        });
        Some((series, cursors))
    }

    /// An instant selector at `ts`: each series' newest sample within the
    /// lookback (both ends included), unless it is a stale marker.
    pub(super) fn instant(&self, vs: &VectorSelector, ts: i64) -> Vec<Sample> {
        let reference = self.reference(&vs.at, &vs.offset, ts);
        let Some((series, mut cursors)) = self.selected(vs) else {
            return Vec::new();
        };
        series
            .iter()
            .zip(cursors.iter_mut())
            .filter_map(|(s, cursor)| {
                let i = seek(&s.points, cursor.1, |t| t <= reference);
                cursor.1 = i;
                let (time, value) = *s.points.get(i.checked_sub(1)?)?;
                (time >= reference - self.lookback && !is_stale(value)).then(|| Sample {
                    labels: s.labels.clone(),
                    time,
                    value,
                })
            })
            .collect()
    }

    /// A range selector at `ts`: each series' samples within `range`
    /// before it (both ends included), stale markers left out; series
    /// without any are left out.
    pub(super) fn windows<'d>(
        &'d self,
        vs: &VectorSelector,
        range: i64,
        ts: i64,
    ) -> Vec<Window<'d>> {
        let reference = self.reference(&vs.at, &vs.offset, ts);
        let Some((series, mut cursors)) = self.selected(vs) else {
            return Vec::new();
        };
        series
            .iter()
            .zip(cursors.iter_mut())
            .filter_map(|(s, cursor)| {
                let points = window(&s.points, cursor, reference, range, true);
                (!points.is_empty()).then(|| Window {
                    labels: s.labels.clone(),
                    points,
                })
            })
            .collect()
    }
}

/// A series' samples within `range` before `reference` (both ends
/// included), stale markers left out (if it `may_be_stale`), found from
/// `cursor` (where its last window was), which it moves there.
pub(super) fn window<'p>(
    points: &'p [(i64, f64)],
    cursor: &mut Cursor,
    reference: i64,
    range: i64,
    may_be_stale: bool,
) -> Cow<'p, [(i64, f64)]> {
    let from = seek(points, cursor.0, |t| t < reference - range);
    let to = seek(points, cursor.1, |t| t <= reference);
    *cursor = (from, to);
    let points = &points[from..to];
    match may_be_stale && points.iter().any(|p| is_stale(p.1)) {
        true => Cow::Owned(points.iter().copied().filter(|p| !is_stale(p.1)).collect()),
        false => Cow::Borrowed(points),
    }
}

/// The first index of `points` whose time `before` refuses (`before` holds
/// for a prefix), found from `hint` (where it was for a nearby time):
/// a few steps on from there, else by bisection.
fn seek(points: &[(i64, f64)], hint: usize, before: impl Fn(i64) -> bool) -> usize {
    let hint = hint.min(points.len());
    if hint == 0 || before(points[hint - 1].0) {
        // At or past the hint.
        let mut i = hint;
        for _ in 0..8 {
            if i == points.len() || !before(points[i].0) {
                return i;
            }
            i += 1;
        }
        i + points[i..].partition_point(|p| before(p.0))
    } else {
        points[..hint].partition_point(|p| before(p.0))
    }
}

pub(super) fn same_labelset() -> Error {
    Error::Execution("vector cannot contain metrics with the same labelset".into())
}

/// Refuses a vector in which two samples have the same labels (after a
/// function dropped the metric name or rewrote labels).
pub(crate) fn unique(samples: &[Sample]) -> Result<(), Error> {
    if samples.len() < 2 {
        return Ok(());
    }
    let mut seen = HashSet::with_capacity_and_hasher(samples.len(), Default::default());
    for s in samples {
        if !seen.insert(&s.labels) {
            return Err(same_labelset());
        }
    }
    Ok(())
}

/// The steps of a range query.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Grid {
    pub(crate) start: i64,
    pub(crate) step: i64,
    pub(crate) steps: usize,
}

impl Grid {
    /// The step `ts` is, if it is one.
    pub(crate) fn index(&self, ts: i64) -> Option<usize> {
        let offset = ts.checked_sub(self.start)?;
        let k = usize::try_from(offset / self.step).ok()?;
        (offset % self.step == 0 && k < self.steps).then_some(k)
    }

    pub(super) fn time(&self, k: usize) -> i64 {
        self.start + k as i64 * self.step
    }
}

/// A range function's value for each series at each step.
pub(crate) struct Rolled {
    /// The answer's labels of each series, and its value at each step.
    pub(super) series: Vec<(Labels, Vec<Option<f64>>)>,
}

impl Rolled {
    /// The samples at step `k` (time `ts`), in the selector's series order.
    pub(crate) fn at(&self, k: usize, ts: i64) -> Vec<Sample> {
        self.series
            .iter()
            .filter_map(|(labels, values)| {
                Some(Sample {
                    labels: labels.clone(),
                    time: ts,
                    value: values[k]?,
                })
            })
            .collect()
    }
}

/// An aggregation's groups and, per step, the groups with a value there
/// (in the order the per-step grouping meets them) and that value.
pub(crate) struct Grouped {
    pub(super) groups: Vec<Labels>,
    pub(super) steps: Vec<Vec<(u32, f64)>>,
}

impl Grouped {
    pub(crate) fn at(&self, k: usize, ts: i64) -> Vec<Sample> {
        self.steps[k]
            .iter()
            .map(|&(g, value)| Sample {
                labels: self.groups[g as usize].clone(),
                time: ts,
                value,
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::seek;

    #[test]
    fn seeking_from_any_hint_finds_what_bisection_finds() {
        let points: Vec<(i64, f64)> = (0..100).map(|i| (i * 10, 0.0)).collect();
        for bound in [-5, 0, 5, 10, 95, 500, 990, 1000, 2000] {
            let expected = points.partition_point(|p| p.0 <= bound);
            for hint in [0, 1, 3, 9, 10, 50, 99, 100, 150] {
                assert_eq!(
                    seek(&points, hint, |t| t <= bound),
                    expected,
                    "{bound} from {hint}"
                );
            }
        }
        assert_eq!(seek(&[], 3, |t| t < 0), 0);
    }
}
