//! Range-vector functions over one series' window (`rate`, `deriv`,
//! `avg_over_time`, …), as Prometheus 2.x computes them: plain functions
//! of the window's points and the range it covers, so the per-step
//! evaluation (`functions`) and the series-by-series one (`rollup`) call
//! the same code; and the mean and quantile the aggregations share with
//! them.

/// The range a window covers: its start and end (ms) and its length in
/// seconds.
pub(super) struct Span {
    pub(super) start: i64,
    pub(super) end: i64,
    pub(super) range_seconds: f64,
}

/// Prometheus's `quantile` of a set of values (φ-quantile, linear between
/// the two nearest ranks).
pub(super) fn quantile(q: f64, mut values: Vec<f64>) -> f64 {
    if values.is_empty() || q.is_nan() {
        return f64::NAN;
    }
    if q < 0.0 {
        return f64::NEG_INFINITY;
    }
    if q > 1.0 {
        return f64::INFINITY;
    }
    values.sort_by(|a, b| match (a.is_nan(), b.is_nan()) {
        (true, true) => std::cmp::Ordering::Equal,
        (true, false) => std::cmp::Ordering::Less,
        (false, true) => std::cmp::Ordering::Greater,
        _ => a.total_cmp(b),
    });
    let n = values.len() as f64;
    let rank = q * (n - 1.0);
    let lower = rank.floor().max(0.0);
    let upper = (lower + 1.0).min(n - 1.0);
    let weight = rank - rank.floor();
    values[lower as usize] * (1.0 - weight) + values[upper as usize] * weight
}

/// A range-vector function's value of one series' window (its points
/// and the range it covers), if it has one.
pub(super) type WindowFunction<'a> = dyn Fn(&[(i64, f64)], &Span) -> Option<f64> + Send + Sync + 'a;

/// The range-vector functions that take nothing but the window: the same
/// function of a series' window at every step (what [`super::rollup`]
/// computes series by series).
pub(super) fn window_function(name: &str) -> Option<Box<WindowFunction<'static>>> {
    Some(match name {
        "rate" => Box::new(|p, s| extrapolated_rate(p, s, true, true)),
        "increase" => Box::new(|p, s| extrapolated_rate(p, s, true, false)),
        "delta" => Box::new(|p, s| extrapolated_rate(p, s, false, false)),
        "irate" => Box::new(|p, _| instant_value(p, true)),
        "idelta" => Box::new(|p, _| instant_value(p, false)),
        "deriv" => Box::new(|p, _| (p.len() >= 2).then(|| linear_regression(p, p[0].0).0)),
        "changes" => Box::new(|p, _| {
            Some(
                p.windows(2)
                    .filter(|w| w[1].1 != w[0].1 && !(w[1].1.is_nan() && w[0].1.is_nan()))
                    .count() as f64,
            )
        }),
        "resets" => Box::new(|p, _| Some(p.windows(2).filter(|w| w[1].1 < w[0].1).count() as f64)),
        "avg_over_time" => Box::new(|p, _| Some(average(p.iter().map(|x| x.1)))),
        "sum_over_time" => Box::new(|p, _| Some(p.iter().map(|x| x.1).sum())),
        "count_over_time" => Box::new(|p, _| Some(p.len() as f64)),
        "min_over_time" => Box::new(|p, _| {
            Some(p[1..].iter().fold(
                p[0].1,
                |min, x| if x.1 < min || min.is_nan() { x.1 } else { min },
            ))
        }),
        "max_over_time" => Box::new(|p, _| {
            Some(p[1..].iter().fold(
                p[0].1,
                |max, x| if x.1 > max || max.is_nan() { x.1 } else { max },
            ))
        }),
        "last_over_time" => Box::new(|p, _| p.last().map(|x| x.1)),
        "present_over_time" => Box::new(|_, _| Some(1.0)),
        "stddev_over_time" => Box::new(|p, _| Some(variance(p).sqrt())),
        "stdvar_over_time" => Box::new(|p, _| Some(variance(p))),
        _ => return None,
    })
}

/// `rate`, `increase` and `delta`: the change over the window,
/// extrapolated to its ends (counters: resets added back, not below zero).
fn extrapolated_rate(points: &[(i64, f64)], m: &Span, counter: bool, rate: bool) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let mut change = points[points.len() - 1].1 - points[0].1;
    if counter {
        for w in points.windows(2) {
            if w[1].1 < w[0].1 {
                change += w[0].1;
            }
        }
    }
    Some(extrapolated(points, m, change, counter, rate))
}

/// The counter rates (`rate`, `increase`) of `points` in the windows
/// `windows` gives (their ranges of indices and spans), without a stale
/// marker among them: each window's resets found among the series' own,
/// not by a look at every pair again, and added in the same order.
pub(super) fn counter_rates(
    points: &[(i64, f64)],
    rate: bool,
    windows: impl Iterator<Item = (usize, usize, Span)>,
) -> Vec<Option<f64>> {
    let resets: Vec<usize> = (1..points.len())
        .filter(|&i| points[i].1 < points[i - 1].1)
        .collect();
    // The last window's times and what they gave: scrapes at a regular
    // interval, read at steps of a multiple of it, give every window the
    // same, and its divisions are made once.
    let mut last: Option<(WindowTimes, Extrapolation, f64)> = None;
    windows
        .map(|(from, to, span)| {
            if to < from + 2 {
                return None;
            }
            let mut change = points[to - 1].1 - points[from].1;
            let first = resets.partition_point(|&i| i <= from);
            for &i in resets[first..].iter().take_while(|&&i| i < to) {
                change += points[i - 1].1;
            }
            let times = WindowTimes::of(&points[from..to], &span);
            let (extrapolation, factor) = match last {
                Some((seen, extrapolation, factor)) if seen == times => (extrapolation, factor),
                _ => {
                    let extrapolation = Extrapolation::of(&points[from..to], &span);
                    let factor = extrapolation.factor(extrapolation.to_start, rate, &span);
                    last = Some((times, extrapolation, factor));
                    (extrapolation, factor)
                }
            };
            let first_value = points[from].1;
            Some(
                match extrapolation.may_reach_zero_first(change, first_value) {
                    false => change * factor,
                    true => extrapolation.extrapolate(change, first_value, true, rate, &span),
                },
            )
        })
        .collect()
}

/// What a window's extrapolation depends on besides its values: its
/// first and last sample's distances to its edges, and its sample count.
#[derive(Clone, Copy, PartialEq)]
struct WindowTimes {
    to_start: i64,
    to_end: i64,
    sampled: i64,
    count: usize,
    range_seconds: u64,
}

impl WindowTimes {
    fn of(points: &[(i64, f64)], m: &Span) -> WindowTimes {
        let (first, last) = (points[0].0, points[points.len() - 1].0);
        WindowTimes {
            to_start: first - m.start,
            to_end: m.end - last,
            sampled: last - first,
            count: points.len(),
            range_seconds: m.range_seconds.to_bits(),
        }
    }
}

/// Prometheus's extrapolation of a window's change to the window's
/// edges: the times (s) it is made of.
#[derive(Clone, Copy)]
struct Extrapolation {
    to_start: f64,
    to_end: f64,
    sampled: f64,
    average: f64,
}

impl Extrapolation {
    /// Of `points` (two or more) in the window `m`.
    fn of(points: &[(i64, f64)], m: &Span) -> Extrapolation {
        let (first, last) = (points[0], points[points.len() - 1]);
        let sampled = (last.0 - first.0) as f64 / 1000.0;
        Extrapolation {
            to_start: (first.0 - m.start) as f64 / 1000.0,
            to_end: (m.end - last.0) as f64 / 1000.0,
            sampled,
            average: sampled / (points.len() - 1) as f64,
        }
    }

    /// The `change` of a counter whose window starts at `first`,
    /// extrapolated (`rate`: per second).
    fn extrapolate(&self, result: f64, first: f64, counter: bool, rate: bool, m: &Span) -> f64 {
        let mut to_start = self.to_start;
        if counter && result > 0.0 && first >= 0.0 {
            let to_zero = self.sampled * (first / result);
            if to_zero < to_start {
                to_start = to_zero;
            }
        }
        result * self.factor(to_start, rate, m)
    }

    /// What the change is multiplied by, the first sample `to_start` (s)
    /// after the window's start.
    fn factor(&self, to_start: f64, rate: bool, m: &Span) -> f64 {
        let threshold = self.average * 1.1;
        let mut interval = self.sampled;
        interval += if to_start < threshold {
            to_start
        } else {
            self.average / 2.0
        };
        interval += if self.to_end < threshold {
            self.to_end
        } else {
            self.average / 2.0
        };
        let mut factor = interval / self.sampled;
        if rate {
            factor /= m.range_seconds;
        }
        factor
    }

    /// Whether a counter's `result` from `first` may be extrapolated to
    /// zero before the window's start ([`extrapolate`](Self::extrapolate)
    /// then tells); `false` only where that is certain without its
    /// division: `first × sampled` past `to_start × result` by far more
    /// than their rounding.
    fn may_reach_zero_first(&self, result: f64, first: f64) -> bool {
        if !(result > 0.0 && first >= 0.0) {
            return false;
        }
        if self.to_start == 0.0 {
            // A time to zero is never below 0.
            return false;
        }
        let (reach, start) = (first * self.sampled, self.to_start * result);
        !(reach.is_normal() && start.is_normal() && reach > start * (1.0 + 1e-9))
    }
}

/// Prometheus's extrapolation of the `change` over `points` (two or more)
/// to the window `m`.
fn extrapolated(points: &[(i64, f64)], m: &Span, result: f64, counter: bool, rate: bool) -> f64 {
    Extrapolation::of(points, m).extrapolate(result, points[0].1, counter, rate, m)
}

/// `irate` and `idelta`: from the last two samples.
fn instant_value(points: &[(i64, f64)], rate: bool) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let (previous, last) = (points[points.len() - 2], points[points.len() - 1]);
    let mut result = if rate && last.1 < previous.1 {
        last.1
    } else {
        last.1 - previous.1
    };
    let interval = last.0 - previous.0;
    if interval == 0 {
        return None;
    }
    if rate {
        result /= interval as f64 / 1000.0;
    }
    Some(result)
}

/// Least squares over `(seconds since intercept_time, value)`: the slope
/// and the value at `intercept_time`.
pub(super) fn linear_regression(points: &[(i64, f64)], intercept_time: i64) -> (f64, f64) {
    let (mut n, mut sum_x, mut sum_y, mut sum_xy, mut sum_x2) = (0.0, 0.0, 0.0, 0.0, 0.0);
    let first = points[0].1;
    let mut constant = true;
    for &(t, v) in points {
        if v != first {
            constant = false;
        }
        n += 1.0;
        let x = (t - intercept_time) as f64 / 1000.0;
        sum_x += x;
        sum_y += v;
        sum_xy += x * v;
        sum_x2 += x * x;
    }
    if constant {
        if first.is_infinite() {
            return (f64::NAN, f64::NAN);
        }
        return (0.0, first);
    }
    let cov_xy = sum_xy - sum_x * sum_y / n;
    let var_x = sum_x2 - sum_x * sum_x / n;
    let slope = cov_xy / var_x;
    (slope, sum_y / n - slope * sum_x / n)
}

/// The mean as Prometheus computes it: incrementally (no overflow to
/// infinity on large values), infinities kept.
pub(super) fn average(values: impl Iterator<Item = f64>) -> f64 {
    let (mut mean, mut count) = (0.0f64, 0.0f64);
    for v in values {
        count += 1.0;
        if mean.is_infinite() {
            if v.is_infinite() && (mean > 0.0) == (v > 0.0) {
                continue;
            }
            if !v.is_infinite() && !v.is_nan() {
                continue;
            }
        }
        mean += v / count - mean / count;
    }
    mean
}

/// The population variance (Welford's method).
fn variance(points: &[(i64, f64)]) -> f64 {
    let (mut count, mut mean, mut aux) = (0.0, 0.0, 0.0);
    for &(_, v) in points {
        count += 1.0;
        let delta = v - mean;
        mean += delta / count;
        aux += delta * (v - mean);
    }
    aux / count
}

pub(super) fn holt_winters(points: &[(i64, f64)], smoothing: f64, trend: f64) -> Option<f64> {
    if points.len() < 2 {
        return None;
    }
    let (mut s0, mut s1, mut b) = (0.0, points[0].1, points[1].1 - points[0].1);
    for (i, &(_, v)) in points.iter().enumerate().skip(1) {
        let x = smoothing * v;
        if i > 1 {
            b = trend * (s1 - s0) + (1.0 - trend) * b;
        }
        let y = (1.0 - smoothing) * (s1 + b);
        s0 = s1;
        s1 = x + y;
    }
    Some(s1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// The bits of [`counter_rates`] of `windows` over `points`, and of
    /// each window's own [`extrapolated_rate`].
    fn rates_both_ways(
        points: &[(i64, f64)],
        windows: Vec<(usize, usize, Span)>,
        rate: bool,
    ) -> (Vec<Option<u64>>, Vec<Option<u64>>) {
        let want = windows
            .iter()
            .map(|(from, to, span)| {
                extrapolated_rate(&points[*from..*to], span, true, rate).map(f64::to_bits)
            })
            .collect();
        let got = counter_rates(points, rate, windows.into_iter())
            .into_iter()
            .map(|v| v.map(f64::to_bits))
            .collect();
        (got, want)
    }

    proptest! {
        /// Regular scrapes read at regular steps, the windows' divisions
        /// made once and the time to zero looked at only when it may
        /// matter: still, to the bit, each window's own extrapolation, for
        /// counters of any scale, starting anywhere (at 0 too), with resets.
        #[test]
        fn counter_rates_of_regular_windows_are_each_windows_own(
            rises in prop::collection::vec(0u32..6, 2..150),
            first in prop_oneof![Just(0.0), 0.0f64..2.0, 1e6f64..1e7],
            scale in prop_oneof![Just(1e-300), Just(1e-3), Just(1.0), Just(0.37), Just(1e300)],
            phase in 0i64..15_000,
            step_scrapes in 1i64..6,
            range_scrapes in 2i64..25,
            rate in any::<bool>(),
        ) {
            let mut value = first * scale;
            let points: Vec<(i64, f64)> = rises
                .iter()
                .enumerate()
                .map(|(i, &rise)| {
                    // A rise of 0 restarts the counter.
                    value = if rise == 0 { 0.0 } else { value + f64::from(rise) * scale };
                    (i as i64 * 15_000, value)
                })
                .collect();
            let range = range_scrapes * 15_000;
            let span = |reference: i64| Span {
                start: reference - range,
                end: reference,
                range_seconds: range as f64 / 1000.0,
            };
            let windows: Vec<(usize, usize, Span)> = (0..)
                .map(|k| phase + k * step_scrapes * 15_000)
                .take_while(|&reference| reference <= points.len() as i64 * 15_000 + range)
                .map(|reference| {
                    let from = points.partition_point(|p| p.0 < reference - range);
                    let to = points.partition_point(|p| p.0 <= reference);
                    (from, to, span(reference))
                })
                .collect();
            let (got, want) = rates_both_ways(&points, windows, rate);
            prop_assert_eq!(got, want);
        }

        /// Counter rates found window by window from the series' resets
        /// are, to the bit, what a look at each window's pairs gives.
        #[test]
        fn counter_rates_of_windows_are_each_windows_own(
            values in prop::collection::vec(0u32..50, 0..80),
            windows in prop::collection::vec((0usize..80, 0usize..20), 1..30),
            rate in any::<bool>(),
        ) {
            let points: Vec<(i64, f64)> = values
                .iter()
                .enumerate()
                .map(|(i, &v)| (i as i64 * 15_000, f64::from(v) * 1.37))
                .collect();
            let windows: Vec<(usize, usize, Span)> = windows
                .into_iter()
                .map(|(from, len)| {
                    let from = from.min(points.len());
                    let to = (from + len).min(points.len());
                    let span = Span {
                        start: from as i64 * 15_000 - 7_000,
                        end: to as i64 * 15_000 + 3_000,
                        range_seconds: 300.0,
                    };
                    (from, to, span)
                })
                .collect();
            let (got, want) = rates_both_ways(&points, windows, rate);
            prop_assert_eq!(got, want);
        }
    }

    #[test]
    fn a_counter_reaching_zero_just_at_the_window_start_is_extrapolated_as_prometheus_does() {
        // A window of 20 scrapes 15 s apart, its first 7 s after its start:
        // a counter from `first` rising by `change` reaches zero about
        // `285 × first / change` s before its first sample.
        let span = || Span {
            start: -7_000,
            end: 300_000,
            range_seconds: 300.0,
        };
        for (first, change) in [
            (7.0, 285.0),
            (7.0 + 1e-12, 285.0),
            (7.0, 285.0 + 1e-12),
            (0.7, 28.5),
        ] {
            let points: Vec<(i64, f64)> = (0..20)
                .map(|i| (i * 15_000, first + change * f64::from(i as i32) / 19.0))
                .collect();
            let want = extrapolated_rate(&points, &span(), true, true).map(f64::to_bits);
            let windows = std::iter::once((0, points.len(), span()));
            let got = counter_rates(&points, true, windows)[0].map(f64::to_bits);
            assert_eq!(got, want, "first {first}, change {change}");
        }
    }

    #[test]
    fn counter_increase_adds_resets_back() {
        let m = Span {
            start: 0,
            end: 60_000,
            range_seconds: 60.0,
        };
        let points = [
            (0, 1.0),
            (15_000, 5.0),
            (30_000, 2.0),
            (45_000, 6.0),
            (60_000, 10.0),
        ];
        // 4 + (2 after a reset from 5) + 4 + 4 = 14 over the whole window.
        assert_eq!(extrapolated_rate(&points, &m, true, false), Some(14.0));
    }

    #[test]
    fn quantiles_are_linear_between_the_nearest_ranks() {
        assert_eq!(quantile(0.5, vec![1.0, 3.0, 2.0, 4.0]), 2.5);
    }
}
