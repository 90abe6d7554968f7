//! Classic histograms' quantiles (`histogram_quantile`), as Prometheus 2.x
//! computes them: the series of one histogram (its labels but `le`) are
//! its buckets, each bucket's bound parsed as Go parses it.

use crate::value::{Labels, Sample, METRIC_NAME};

/// A classic histogram's buckets: (upper bound, cumulative count).
type Buckets = Vec<(f64, f64)>;

/// `histogram_quantile` over classic buckets: the series of a histogram
/// (same labels but `le`, same metric name) are its buckets.
pub(super) fn histogram_quantile(q: f64, samples: Vec<Sample>, ts: i64) -> Vec<Sample> {
    // (labels but `le`, the answer's labels, the buckets' (bound, count))
    let mut groups: Vec<(Labels, Labels, Buckets)> = Vec::new();
    for s in samples {
        let Ok(bound) = parse_go_float(s.labels.get("le")) else {
            continue;
        };
        let key = s.labels.filter(|n| n != "le");
        match groups.iter_mut().find(|g| g.0 == key) {
            Some(group) => group.2.push((bound, s.value)),
            None => {
                let labels = s.labels.filter(|n| n != "le" && n != METRIC_NAME);
                groups.push((key, labels, vec![(bound, s.value)]));
            }
        }
    }
    groups
        .into_iter()
        .map(|(_, labels, buckets)| Sample {
            labels,
            time: ts,
            value: bucket_quantile(q, buckets),
        })
        .collect()
}

/// Go's `strconv.ParseFloat` for a bucket bound (`+Inf`, `1e3`, `0.5`).
fn parse_go_float(text: &str) -> Result<f64, ()> {
    match text.to_ascii_lowercase().as_str() {
        "+inf" | "inf" | "+infinity" | "infinity" => Ok(f64::INFINITY),
        "-inf" | "-infinity" => Ok(f64::NEG_INFINITY),
        "nan" => Ok(f64::NAN),
        _ => text.parse().map_err(|_| ()),
    }
}

fn bucket_quantile(q: f64, mut buckets: Vec<(f64, f64)>) -> f64 {
    if q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    buckets.sort_by(|a, b| a.0.total_cmp(&b.0));
    if buckets.last().is_none_or(|b| b.0 != f64::INFINITY) {
        return f64::NAN;
    }
    // Buckets of the same bound add up (a series with `le="1"` and
    // another with `le="1.0"`).
    let mut merged: Vec<(f64, f64)> = Vec::with_capacity(buckets.len());
    for b in buckets {
        match merged.last_mut() {
            Some(last) if last.0 == b.0 => last.1 += b.1,
            _ => merged.push(b),
        }
    }
    let mut max = f64::NEG_INFINITY;
    for b in &mut merged {
        if b.1 > max {
            max = b.1;
        } else if b.1 < max {
            b.1 = max;
        }
    }
    if merged.len() < 2 {
        return f64::NAN;
    }
    let observations = merged[merged.len() - 1].1;
    if observations == 0.0 {
        return f64::NAN;
    }
    let mut rank = q * observations;
    let b = merged[..merged.len() - 1].partition_point(|b| b.1 < rank);
    if b == merged.len() - 1 {
        return merged[merged.len() - 2].0;
    }
    if b == 0 && merged[0].0 <= 0.0 {
        return merged[0].0;
    }
    let (mut start, end, mut count) = (0.0, merged[b].0, merged[b].1);
    if b > 0 {
        start = merged[b - 1].0;
        count -= merged[b - 1].1;
        rank -= merged[b - 1].1;
    }
    start + (end - start) * (rank / count)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bucket_quantiles_follow_prometheus() {
        let buckets = vec![(0.1, 10.0), (0.5, 30.0), (1.0, 40.0), (f64::INFINITY, 40.0)];
        assert_eq!(bucket_quantile(0.5, buckets.clone()), 0.1 + 0.4 * 0.5);
        assert_eq!(bucket_quantile(1.0, buckets.clone()), 1.0);
        assert_eq!(bucket_quantile(2.0, buckets.clone()), f64::INFINITY);
        assert!(bucket_quantile(0.5, vec![(1.0, 1.0)]).is_nan());
    }
}
