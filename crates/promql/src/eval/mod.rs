//! Evaluation of a parsed query over the samples its selectors selected,
//! in memory, with Prometheus 2.x's semantics: an instant query is one
//! evaluation, a range query one per step (a step's answer does not
//! depend on the others', so this is what Prometheus's range evaluation
//! computes). The samples are read beforehand ([`selectors`] says which
//! and over what times), so nothing here waits on the engine.
//!
//! The submodules: `functions` (calls), `aggregate` (`sum by`, `topk`, …),
//! `binary` (operators and vector matching), `rollup` (a range query's
//! range functions and their aggregations, series by series).

mod aggregate;
mod binary;
mod functions;
mod rollup;

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};
use std::borrow::Cow;
use std::cell::{OnceCell, RefCell, RefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use promql_parser::parser::{AtModifier, Expr, Offset, VectorSelector};

use crate::error::Error;
use crate::selected::Selected;
use crate::value::{is_stale, Labels, Sample, Series, Value};

pub(crate) use rollup::Grid;

/// A subquery's step when it names none (Prometheus's default evaluation
/// interval).
const DEFAULT_SUBQUERY_STEP_MS: i64 = 60_000;

/// How many derived label sets the evaluator keeps.
const MAX_DERIVED: usize = 1 << 16;

/// One selector of a query and the times its samples are needed over.
pub(crate) struct Selection<'e> {
    pub(crate) selector: &'e VectorSelector,
    pub(crate) start: i64,
    pub(crate) end: i64,
    /// For the range of a function that a bucket's last (or greatest, or
    /// least) sample answers closely: what may stand for each bucket's
    /// samples, and the range (docs/downsampling.md).
    pub(crate) thin: Option<(Thinned, i64)>,
}

/// What a rollup's bucket gives a range function instead of its samples:
/// one sample at the time of the bucket's last.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Thinned {
    /// The last sample (`rate`, `increase`, `delta`, `last_over_time`).
    Last,
    /// The greatest value (`max_over_time`).
    Max,
    /// The least value (`min_over_time`).
    Min,
}

impl Thinned {
    /// What stands for a bucket in the range of the function `name`;
    /// `None` where the bucket's samples are all needed.
    fn of_function(name: &str) -> Option<Thinned> {
        match name {
            "rate" | "increase" | "delta" | "last_over_time" => Some(Thinned::Last),
            "max_over_time" => Some(Thinned::Max),
            "min_over_time" => Some(Thinned::Min),
            _ => None,
        }
    }
}

/// The selectors of `expr` evaluated at times in `[start, end]` (ms) and
/// the samples each needs: a lookback or range before its evaluation
/// times, moved by `offset`, pinned by `@`, widened by subqueries.
pub(crate) fn selectors(
    expr: &Expr,
    start: i64,
    end: i64,
    query: (i64, i64),
    lookback: i64,
) -> Vec<Selection<'_>> {
    let mut out = Vec::new();
    collect(expr, start, end, query, lookback, &mut out);
    out
}

fn collect<'e>(
    expr: &'e Expr,
    start: i64,
    end: i64,
    query: (i64, i64),
    lookback: i64,
    out: &mut Vec<Selection<'e>>,
) {
    let pinned = |at: &Option<AtModifier>, offset: &Option<Offset>| {
        let (lo, hi) = match at_ms(at, query) {
            Some(t) => (t, t),
            None => (start, end),
        };
        (lo - offset_ms(offset), hi - offset_ms(offset))
    };
    match expr {
        Expr::VectorSelector(vs) => {
            let (lo, hi) = pinned(&vs.at, &vs.offset);
            out.push(Selection {
                selector: vs,
                start: lo - lookback,
                end: hi,
                thin: None,
            });
        }
        Expr::MatrixSelector(ms) => {
            let (lo, hi) = pinned(&ms.vs.at, &ms.vs.offset);
            let range = duration_ms(&ms.range);
            out.push(Selection {
                selector: &ms.vs,
                start: lo - range,
                end: hi,
                thin: None,
            });
        }
        Expr::Subquery(sq) => {
            let (lo, hi) = pinned(&sq.at, &sq.offset);
            let before = out.len();
            collect(
                &sq.expr,
                lo - duration_ms(&sq.range),
                hi,
                query,
                lookback,
                out,
            );
            // Inside a subquery the steps are the subquery's: nothing is thinned.
            for selection in &mut out[before..] {
                selection.thin = None;
            }
        }
        Expr::Aggregate(agg) => {
            if let Some(param) = &agg.param {
                collect(param, start, end, query, lookback, out);
            }
            collect(&agg.expr, start, end, query, lookback, out);
        }
        Expr::Unary(u) => collect(&u.expr, start, end, query, lookback, out),
        Expr::Binary(b) => {
            collect(&b.lhs, start, end, query, lookback, out);
            collect(&b.rhs, start, end, query, lookback, out);
        }
        Expr::Paren(p) => collect(&p.expr, start, end, query, lookback, out),
        Expr::Call(call) => {
            let thinned = Thinned::of_function(call.func.name);
            for arg in &call.args.args {
                let before = out.len();
                collect(arg, start, end, query, lookback, out);
                if let (Some(thinned), Expr::MatrixSelector(ms)) = (thinned, arg.as_ref()) {
                    out[before].thin = Some((thinned, duration_ms(&ms.range)));
                }
            }
        }
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) | Expr::Extension(_) => {}
    }
}

fn duration_ms(d: &std::time::Duration) -> i64 {
    i64::try_from(d.as_millis()).unwrap_or(i64::MAX / 4)
}

fn offset_ms(offset: &Option<Offset>) -> i64 {
    match offset {
        None => 0,
        Some(Offset::Pos(d)) => duration_ms(d),
        Some(Offset::Neg(d)) => -duration_ms(d),
    }
}

fn at_ms(at: &Option<AtModifier>, (start, end): (i64, i64)) -> Option<i64> {
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
    fn kind(&self) -> &'static str {
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
    pub(crate) rollups: RefCell<HashMap<usize, Option<Arc<rollup::Rolled>>>>,
    /// Aggregations of those, folded series by series, by node.
    pub(crate) groupings: RefCell<HashMap<usize, Option<Arc<rollup::Grouped>>>>,
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
    /// `expr` at each of `times`: one value for an instant query, a matrix
    /// of every step's samples for a range query.
    pub(crate) fn run(&self, expr: &Expr, start: i64, end: i64, step: i64) -> Result<Value, Error> {
        if start == end && step == 0 {
            return Ok(match self.eval(expr, start)? {
                Val::Scalar(v) => Value::Scalar(start, v),
                Val::String(s) => Value::String(start, s),
                Val::Vector(samples) => {
                    unique(&samples)?;
                    Value::Vector(start, samples)
                }
                Val::Matrix(windows) => Value::Matrix(
                    windows
                        .into_iter()
                        .map(|w| Series {
                            labels: w.labels,
                            points: w.points.into_owned(),
                        })
                        .collect(),
                ),
            });
        }
        let mut series: HashMap<Labels, Vec<(i64, f64)>> = HashMap::default();
        let mut ts = start;
        while ts <= end {
            self.check_time()?;
            match self.eval(expr, ts)? {
                Val::Scalar(v) => series.entry(Labels::default()).or_default().push((ts, v)),
                Val::Vector(samples) => {
                    for sample in samples {
                        let points = series.entry(sample.labels).or_default();
                        if points.last().is_some_and(|p| p.0 == ts) {
                            return Err(same_labelset());
                        }
                        points.push((ts, sample.value));
                    }
                }
                other => {
                    return Err(Error::BadData(format!(
                        "invalid expression type {:?} for range query, must be Scalar or instant Vector",
                        other.kind()
                    )))
                }
            }
            ts += step;
        }
        let mut out: Vec<Series> = series
            .into_iter()
            .map(|(labels, points)| Series { labels, points })
            .collect();
        crate::value::sort_by_labels(&mut out, |s| &s.labels);
        Ok(Value::Matrix(out))
    }

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
    fn step_of(&self, ts: i64) -> Option<usize> {
        self.grid.and_then(|grid| grid.index(ts))
    }

    fn check_time(&self) -> Result<(), Error> {
        check_time(self.deadline, &self.cancelled)
    }

    /// The time a selector or subquery is evaluated at for `ts`.
    fn reference(&self, at: &Option<AtModifier>, offset: &Option<Offset>, ts: i64) -> i64 {
        at_ms(at, self.query).unwrap_or(ts) - offset_ms(offset)
    }

    pub(crate) fn eval<'d>(&'d self, expr: &Expr, ts: i64) -> Result<Val<'d>, Error> {
        Ok(match expr {
            Expr::NumberLiteral(n) => Val::Scalar(n.val),
            Expr::StringLiteral(s) => Val::String(s.val.clone()),
            Expr::Paren(p) => self.eval(&p.expr, ts)?,
            Expr::Unary(u) => match self.eval(&u.expr, ts)? {
                Val::Scalar(v) => Val::Scalar(-v),
                Val::Vector(samples) => Val::Vector(
                    samples
                        .into_iter()
                        .map(|s| Sample {
                            labels: s.labels.without_name(),
                            time: ts,
                            value: -s.value,
                        })
                        .collect(),
                ),
                other => return Err(Error::BadData(format!("unary minus of a {}", other.kind()))),
            },
            Expr::VectorSelector(vs) => Val::Vector(self.instant(vs, ts)),
            Expr::MatrixSelector(ms) => {
                Val::Matrix(self.windows(&ms.vs, duration_ms(&ms.range), ts))
            }
            Expr::Subquery(sq) => {
                let reference = self.reference(&sq.at, &sq.offset, ts);
                let step = sq
                    .step
                    .as_ref()
                    .map_or(DEFAULT_SUBQUERY_STEP_MS, duration_ms);
                Val::Matrix(self.subquery(&sq.expr, reference, duration_ms(&sq.range), step)?)
            }
            // A range query's rollups first: the same answers, series by
            // series (rollup.rs).
            Expr::Call(call) => match self.step_of(ts) {
                Some(k) if let Some(rolled) = rollup::rolled(self, call)? => {
                    Val::Vector(rolled.at(k, ts))
                }
                _ => functions::call(self, call, ts)?,
            },
            Expr::Aggregate(agg) => match self.step_of(ts) {
                Some(k) if let Some(grouped) = rollup::grouped(self, agg)? => {
                    Val::Vector(grouped.at(k, ts))
                }
                _ => aggregate::run(self, agg, ts)?,
            },
            Expr::Binary(b) => binary::run(self, b, ts)?,
            Expr::Extension(_) => {
                return Err(Error::BadData(
                    "extension expressions are not supported".into(),
                ))
            }
        })
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
    fn instant(&self, vs: &VectorSelector, ts: i64) -> Vec<Sample> {
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
    fn windows<'d>(&'d self, vs: &VectorSelector, range: i64, ts: i64) -> Vec<Window<'d>> {
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

    /// A subquery ending at `reference`: `expr` at the multiples of `step`
    /// within `range` before it (both ends included).
    fn subquery<'d>(
        &'d self,
        expr: &Expr,
        reference: i64,
        range: i64,
        step: i64,
    ) -> Result<Vec<Window<'d>>, Error> {
        let first = reference - range;
        let mut ts = step * (first / step);
        if ts < first {
            ts += step;
        }
        let mut order: Vec<Labels> = Vec::new();
        let mut series: HashMap<Labels, Vec<(i64, f64)>> = HashMap::default();
        while ts <= reference {
            self.check_time()?;
            match self.eval(expr, ts)? {
                Val::Vector(samples) => {
                    for s in samples {
                        let points = series.entry(s.labels.clone()).or_insert_with(|| {
                            order.push(s.labels);
                            Vec::new()
                        });
                        points.push((ts, s.value));
                    }
                }
                Val::Scalar(v) => {
                    let labels = Labels::default();
                    let points = series.entry(labels.clone()).or_insert_with(|| {
                        order.push(labels);
                        Vec::new()
                    });
                    points.push((ts, v));
                }
                other => {
                    return Err(Error::BadData(format!("subquery of a {}", other.kind())));
                }
            }
            ts += step;
        }
        Ok(order
            .into_iter()
            .map(|labels| {
                let points = series.remove(&labels).unwrap_or_default();
                Window {
                    labels,
                    points: Cow::Owned(points),
                }
            })
            .collect())
    }
}

/// A series' samples within `range` before `reference` (both ends
/// included), stale markers left out (if it `may_be_stale`), found from
/// `cursor` (where its last window was), which it moves there.
fn window<'p>(
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

fn same_labelset() -> Error {
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

#[cfg(test)]
mod tests {
    use super::{seek, selectors, Thinned};

    #[test]
    fn only_range_functions_outside_subqueries_may_be_thinned() {
        let expr = crate::parse::parse_query(
            "rate(a[1h]) + max_over_time(rate(b[30m])[2h:5m]) + avg_over_time(c[1h]) + d",
        )
        .unwrap();
        let thin: Vec<(String, Option<(Thinned, i64)>)> = selectors(&expr, 0, 0, (0, 0), 300_000)
            .into_iter()
            .map(|s| (s.selector.name.clone().unwrap_or_default(), s.thin))
            .collect();
        assert_eq!(
            thin,
            [
                ("a".to_owned(), Some((Thinned::Last, 3_600_000))),
                ("b".to_owned(), None),
                ("c".to_owned(), None),
                ("d".to_owned(), None),
            ]
        );
    }

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
