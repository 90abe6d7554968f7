//! Aggregation operators (`sum`, `avg`, `topk`, `count_values`, …) over
//! the groups `by`/`without` make, as Prometheus 2.x computes them.

use rustc_hash::FxHashMap as HashMap;

use promql_parser::parser::{AggregateExpr, LabelModifier};

use super::evaluator::{Evaluator, Val};
use super::functions::vector;
use super::range_functions::{average, quantile};
use crate::error::Error;
use crate::value::{format_value, Labels, Sample, METRIC_NAME};

/// One group: its labels and its samples, in order.
struct Group {
    labels: Labels,
    members: Vec<Sample>,
}

impl Group {
    fn values(&self) -> impl Iterator<Item = f64> + '_ {
        self.members.iter().map(|s| s.value)
    }
}

/// The labels of the group a sample with `labels` is in (made once per
/// set and node, shared by the group's members).
pub(super) fn group_labels(ev: &Evaluator, agg: &AggregateExpr, labels: &Labels) -> Labels {
    let node = agg as *const AggregateExpr as usize;
    ev.derive(node, labels, |labels| group_of(agg, labels))
}

fn group_of(agg: &AggregateExpr, labels: &Labels) -> Labels {
    match &agg.modifier {
        None => Labels::default(),
        Some(LabelModifier::Include(by)) => labels.filter(|n| by.labels.iter().any(|l| l == n)),
        Some(LabelModifier::Exclude(without)) => {
            labels.filter(|n| n != METRIC_NAME && !without.labels.iter().any(|l| l == n))
        }
    }
}

pub(super) fn run<'d>(ev: &'d Evaluator, agg: &AggregateExpr, ts: i64) -> Result<Val<'d>, Error> {
    let op = agg.op.to_string();
    let samples = vector(ev, &agg.expr, ts)?;
    let param = match &agg.param {
        Some(p) => Some(ev.eval(p, ts)?),
        None => None,
    };
    let scalar_param = || match &param {
        Some(Val::Scalar(v)) => Ok(*v),
        _ => Err(Error::BadData(format!(
            "expected a scalar parameter for {op}"
        ))),
    };
    let mut samples = samples;
    if op == "count_values" {
        let Some(Val::String(label)) = &param else {
            return Err(Error::BadData(
                "expected a string parameter for count_values".into(),
            ));
        };
        if !crate::naming::is_label_name(label) {
            return Err(Error::Execution(format!("invalid label name {label:?}")));
        }
        for s in &mut samples {
            s.labels = s.labels.with(label, &format_value(s.value));
        }
        // The value's label is a grouping label too.
        let label = label.clone();
        let by_value = |labels: &Labels| {
            let group = group_of(agg, labels);
            group.with(&label, labels.get(&label))
        };
        return Ok(Val::Vector(finish_groups(
            group(&samples, by_value),
            |g| g.members.len() as f64,
            ts,
        )));
    }
    let k = if op == "topk" || op == "bottomk" {
        let k = scalar_param()?;
        if k < 1.0 || k.is_nan() {
            return Ok(Val::Vector(Vec::new()));
        }
        Some(if k >= 9.2e18 { usize::MAX } else { k as usize })
    } else {
        None
    };
    let groups = group(&samples, |labels| group_labels(ev, agg, labels));
    let out = match op.as_str() {
        "sum" => finish_groups(
            groups,
            |g| g.values().skip(1).fold(g.members[0].value, |a, v| a + v),
            ts,
        ),
        "avg" => finish_groups(groups, |g| average(g.values()), ts),
        "count" => finish_groups(groups, |g| g.members.len() as f64, ts),
        "group" => finish_groups(groups, |_| 1.0, ts),
        "min" => finish_groups(
            groups,
            |g| {
                g.members.iter().skip(1).fold(g.members[0].value, |m, s| {
                    if m > s.value || m.is_nan() {
                        s.value
                    } else {
                        m
                    }
                })
            },
            ts,
        ),
        "max" => finish_groups(
            groups,
            |g| {
                g.members.iter().skip(1).fold(g.members[0].value, |m, s| {
                    if m < s.value || m.is_nan() {
                        s.value
                    } else {
                        m
                    }
                })
            },
            ts,
        ),
        "stdvar" => finish_groups(groups, variance, ts),
        "stddev" => finish_groups(groups, |g| variance(g).sqrt(), ts),
        "quantile" => {
            let q = scalar_param()?;
            finish_groups(groups, |g| quantile(q, g.values().collect()), ts)
        }
        "topk" | "bottomk" => {
            let k = k.unwrap_or(0);
            let top = op == "topk";
            let mut out = Vec::new();
            for g in groups {
                out.extend(
                    select_k(g.members, k, top)
                        .into_iter()
                        .map(|s| Sample { time: ts, ..s }),
                );
            }
            out
        }
        other => {
            return Err(Error::BadData(format!(
                "aggregation {other:?} is not supported"
            )))
        }
    };
    Ok(Val::Vector(out))
}

/// The groups of `samples`, in order of first appearance.
fn group(samples: &[Sample], key: impl Fn(&Labels) -> Labels) -> Vec<Group> {
    let mut index: HashMap<Labels, usize> = HashMap::default();
    let mut groups: Vec<Group> = Vec::new();
    for s in samples {
        let labels = key(&s.labels);
        match index.get(&labels) {
            Some(&i) => groups[i].members.push(s.clone()),
            None => {
                index.insert(labels.clone(), groups.len());
                groups.push(Group {
                    labels,
                    members: vec![s.clone()],
                });
            }
        }
    }
    groups
}

/// The population variance as Prometheus computes it (Welford's method,
/// from the first value).
fn variance(g: &Group) -> f64 {
    let mut values = g.values();
    let Some(first) = values.next() else {
        return f64::NAN;
    };
    let (mut count, mut mean, mut aux) = (1.0, first, 0.0);
    for v in values {
        count += 1.0;
        let delta = v - mean;
        mean += delta / count;
        aux += delta * (v - mean);
    }
    aux / count
}

fn finish_groups(groups: Vec<Group>, value: impl Fn(&Group) -> f64, ts: i64) -> Vec<Sample> {
    groups
        .iter()
        .map(|g| Sample {
            labels: g.labels.clone(),
            time: ts,
            value: value(g),
        })
        .collect()
}

/// The `k` largest (`top`) or smallest samples, largest (smallest) first,
/// chosen as Prometheus 2.x chooses them: a binary heap of the `k` kept so
/// far with the least wanted on top (NaN least of all), whose top a later
/// sample replaces when it is wanted more — or when the top is NaN. Which of
/// equal values is kept therefore depends on the order samples arrive in.
fn select_k(members: Vec<Sample>, k: usize, top: bool) -> Vec<Sample> {
    // Whether `a` belongs above `b` in the heap (is less wanted).
    let less = |a: &Sample, b: &Sample| {
        a.value.is_nan()
            || if top {
                a.value < b.value
            } else {
                a.value > b.value
            }
    };
    let mut heap: Vec<Sample> = Vec::with_capacity(k.min(members.len()));
    for s in members {
        if heap.len() < k {
            heap.push(s);
            let mut j = heap.len() - 1;
            while j > 0 {
                let i = (j - 1) / 2;
                if !less(&heap[j], &heap[i]) {
                    break;
                }
                heap.swap(i, j);
                j = i;
            }
        } else {
            let replace = heap[0].value.is_nan()
                || if top {
                    heap[0].value < s.value
                } else {
                    heap[0].value > s.value
                };
            if replace {
                heap[0] = s;
                sift_down(&mut heap, &less);
            }
        }
    }
    heap.sort_by(|a, b| {
        if less(b, a) {
            std::cmp::Ordering::Less
        } else if less(a, b) {
            std::cmp::Ordering::Greater
        } else {
            std::cmp::Ordering::Equal
        }
    });
    heap
}

/// Moves the heap's top down to its place (Go's `heap.Fix(h, 0)`).
fn sift_down(heap: &mut [Sample], less: &impl Fn(&Sample, &Sample) -> bool) {
    let mut i = 0;
    loop {
        let left = 2 * i + 1;
        if left >= heap.len() {
            break;
        }
        let mut j = left;
        if left + 1 < heap.len() && less(&heap[left + 1], &heap[left]) {
            j = left + 1;
        }
        if !less(&heap[j], &heap[i]) {
            break;
        }
        heap.swap(i, j);
        i = j;
    }
}
