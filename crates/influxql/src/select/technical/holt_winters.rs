//! `holt_winters` and `holt_winters_with_fit` as InfluxDB 1.x computes
//! them: the points are put on the interval's grid, a damped Holt-Winters
//! model (multiplicative seasons when the season is at least 2 intervals)
//! is fitted by Nelder-Mead from each guess of a small grid, and the best
//! fit is run forward.
//!
//! InfluxDB's quirks are kept, since its answers are the reference: each
//! step of the model is fed its own previous forecast rather than the
//! observed value (so only the first value and the initial guesses shape
//! the fit), the damping sum grows over the fit as well as the forecast,
//! and evaluating the model clamps the parameters and overwrites the
//! seasonal ones in the optimizer's simplex.

/// Starting guesses for alpha, beta, gamma and phi: from 0.3 while below
/// 1.0, in steps of 0.4 (0.3 and 0.7), each combination tried.
const GUESS_LOWER: f64 = 0.3;
const GUESS_UPPER: f64 = 1.0;
const GUESS_STEP: f64 = 0.4;

/// The weight of the first value (level) and first change (trend) in the
/// initial guess of a model without seasons.
const FIRST_WEIGHT: f64 = 0.5;

/// The optimizer stops once its values' standard deviation is below this.
const EPSILON: f64 = 1.0e-4;
const MAX_ITERATIONS: usize = 1000;

/// Where the model's parameters sit in the optimizer's vector: alpha,
/// beta, gamma, phi, then the initial level and trend, then the seasons.
const LEVEL: usize = 4;
const TREND: usize = 5;
const SEASONS: usize = 6;

/// The forecast (`with_fit`: the fitted values too) of `points` (time ns,
/// value; in time order) `horizon` intervals ahead, over a season of
/// `season` intervals (below 2: none).
pub(super) fn holt_winters(
    points: &[(i64, f64)],
    interval: i64,
    horizon: usize,
    season: usize,
    with_fit: bool,
) -> Vec<(i64, f64)> {
    let seasonal = season >= 2;
    if points.len() < 2 || (seasonal && points.len() < season) || horizon == 0 || interval <= 0 {
        return Vec::new();
    }
    let Some(model) = Model::new(points, interval, seasonal.then_some(season)) else {
        return Vec::new();
    };
    let mut best = model.fit();
    let forecast = model.forecast(horizon, &mut best);
    // Times count from the first or last point as it was, not as rounded.
    let (from, values, first_step) = if with_fit {
        (points[0].0, &forecast[..], 0)
    } else {
        (points[points.len() - 1].0, &forecast[model.y.len()..], 1)
    };
    values
        .iter()
        .zip(first_step..)
        .filter(|(v, _)| !v.is_nan())
        .map(|(&v, step)| (from.wrapping_add(interval.wrapping_mul(step)), v))
        .collect()
}

/// The series on the interval's grid and the model's shape.
struct Model {
    /// One value per interval from the first point's to the last's: the
    /// first point of each, NaN where none.
    y: Vec<f64>,
    /// The season's length in intervals, if seasonal.
    season: Option<usize>,
}

impl Model {
    /// `None` when the points span less than an interval, or when a
    /// seasonal series has fewer intervals than a season (which
    /// InfluxDB's code does not survive).
    fn new(points: &[(i64, f64)], interval: i64, season: Option<usize>) -> Option<Model> {
        // The nearest multiple of the interval (halves round down),
        // truncating towards zero before 1970 as Go's division does.
        let round = |t: i64| {
            let whole = t / interval;
            let whole = if t % interval > interval / 2 {
                whole + 1
            } else {
                whole
            };
            whole.wrapping_mul(interval)
        };
        let start = round(points[0].0);
        let stop = round(points[points.len() - 1].0);
        if stop.wrapping_sub(start) / interval <= 0 {
            return None;
        }
        let mut y = vec![points[0].1];
        let mut t = start;
        for &(time, value) in &points[1..] {
            let rounded = round(time);
            if rounded <= t {
                continue;
            }
            t += interval;
            while rounded != t {
                y.push(f64::NAN);
                t += interval;
            }
            y.push(value);
        }
        if season.is_some_and(|m| y.len() < m) {
            return None;
        }
        Some(Model { y, season })
    }

    /// The initial level, trend and seasons guessed from the first
    /// values, missing ones left out.
    fn initial_guess(&self) -> Vec<f64> {
        let y = &self.y;
        let mut params = vec![0.0; SEASONS];
        let Some(m) = self.season else {
            params[LEVEL] = FIRST_WEIGHT * y[0];
            if !y[1].is_nan() {
                params[TREND] = FIRST_WEIGHT * (y[1] - y[0]);
            }
            return params;
        };
        let mut level = 0.0;
        for &v in y[..m].iter().filter(|v| !v.is_nan()) {
            level += (1.0 / m as f64) * v;
        }
        let mut trend = 0.0;
        for (&earlier, &later) in y[..m].iter().zip(&y[m..]) {
            if !earlier.is_nan() && !later.is_nan() {
                trend += 1.0 / (m * m) as f64 * (later - earlier);
            }
        }
        params[LEVEL] = level;
        params[TREND] = trend;
        params.extend(
            y[..m]
                .iter()
                .map(|&v| if v.is_nan() { 0.0 } else { v / level }),
        );
        params
    }

    /// The parameters fitting best from InfluxDB's grid of starting guesses.
    fn fit(&self) -> Vec<f64> {
        let guesses: Vec<f64> = std::iter::successors(Some(GUESS_LOWER), |g| Some(g + GUESS_STEP))
            .take_while(|&g| g < GUESS_UPPER)
            .collect();
        let mut start = self.initial_guess();
        let mut best: Option<(f64, Vec<f64>)> = None;
        for &alpha in &guesses {
            for &beta in &guesses {
                for &gamma in &guesses {
                    for &phi in &guesses {
                        start[..LEVEL].copy_from_slice(&[alpha, beta, gamma, phi]);
                        let (sse, params) = minimize(|p| self.sse(p), &start);
                        if best.as_ref().is_none_or(|(least, _)| sse < *least) {
                            best = Some((sse, params));
                        }
                    }
                }
            }
        }
        best.map_or(start, |(_, params)| params)
    }

    /// The sum of squared errors of the fit by `params` (clamped and their
    /// seasons overwritten in place, as in InfluxDB).
    fn sse(&self, params: &mut [f64]) -> f64 {
        let fitted = self.forecast(0, params);
        let mut sse = 0.0;
        for (&actual, &fit) in self.y.iter().zip(&fitted) {
            if actual.is_nan() {
                continue;
            }
            if fit.is_nan() {
                return f64::INFINITY;
            }
            let diff = fit - actual;
            sse += diff * diff;
        }
        sse
    }

    /// The model by `params` over the series and `horizon` intervals past
    /// it. Clamps alpha, beta, gamma and phi to [0, 1] and leaves the last
    /// seasons in `params`, as InfluxDB does to its optimizer's points.
    fn forecast(&self, horizon: usize, params: &mut [f64]) -> Vec<f64> {
        for p in &mut params[..LEVEL] {
            *p = p.clamp(0.0, 1.0);
        }
        let (alpha, beta, gamma, phi) = (params[0], params[1], params[2], params[3]);
        let mut level = params[LEVEL];
        let mut trend = params[TREND];
        let seasons = &mut params[SEASONS..];
        let m = seasons.len();
        // The seasons are a ring; `offset` turns with each step.
        let mut offset = m.saturating_sub(1);
        let mut damping = phi;
        let mut value = self.y[0];
        let mut out = Vec::with_capacity(self.y.len() + horizon);
        out.push(value);
        for t in 1..self.y.len() + horizon {
            let (season_now, season_ahead) = match self.season {
                Some(_) => (
                    seasons[(t + offset - m) % m],
                    seasons[(t + t % m + offset - m) % m],
                ),
                None => (1.0, 1.0),
            };
            let (level_before, trend_before) = (level, trend);
            level =
                alpha * (value / season_now) + (1.0 - alpha) * (level_before + phi * trend_before);
            trend = beta * (level - level_before) + (1.0 - beta) * phi * trend_before;
            let season_next =
                gamma * (value / (level_before + phi * trend_before)) + (1.0 - gamma) * season_now;
            value = (level + damping * trend) * season_ahead;
            damping += pow_by_squaring(phi, t);
            if self.season.is_some() {
                seasons[(t + offset) % m] = season_next;
                offset += 1;
            }
            out.push(value);
        }
        out
    }
}

/// `x` to the power `n` as Go's `math.Pow` computes an integer power:
/// multiplying in the repeated squares of `x` for the bits of `n`, from
/// the lowest, which may round differently from `powf`.
fn pow_by_squaring(x: f64, mut n: usize) -> f64 {
    let (mut power, mut square) = (1.0, x);
    while n != 0 {
        if n & 1 == 1 {
            power *= square;
        }
        square *= square;
        n >>= 1;
    }
    power
}

/// The least value of `objective` found by the Nelder-Mead simplex method
/// from `start` (InfluxDB's port of M. F. Hutt's: reflection 1,
/// expansion 2, contraction 0.5, a regular initial simplex of side 1), and
/// where. `objective` may rewrite the point it is given; the rewrite
/// stays in the simplex.
fn minimize(mut objective: impl FnMut(&mut [f64]) -> f64, start: &[f64]) -> (f64, Vec<f64>) {
    let n = start.len();
    let dims = n as f64;
    let far = ((dims + 1.0).sqrt() - 1.0 + dims) / (dims * 2f64.sqrt());
    let near = ((dims + 1.0).sqrt() - 1.0) / (dims * 2f64.sqrt());
    let mut simplex = vec![start.to_vec()];
    simplex.extend((0..n).map(|vertex| {
        let shift = |j: usize| if j == vertex { far } else { near };
        start
            .iter()
            .enumerate()
            .map(|(j, &s)| shift(j) + s)
            .collect::<Vec<f64>>()
    }));
    let mut values: Vec<f64> = simplex.iter_mut().map(|v| objective(v)).collect();

    for _ in 0..MAX_ITERATIONS {
        let (mut worst, mut best) = (0, 0);
        for i in 0..=n {
            if values[i] > values[worst] {
                worst = i;
            }
            if values[i] < values[best] {
                best = i;
            }
        }
        let mut second = best;
        for i in 0..=n {
            if values[i] > values[second] && values[i] < values[worst] {
                second = i;
            }
        }

        let centroid: Vec<f64> = (0..n)
            .map(|j| {
                let mut sum = 0.0;
                for (_, vertex) in simplex.iter().enumerate().filter(|(i, _)| *i != worst) {
                    sum += vertex[j];
                }
                sum / dims
            })
            .collect();
        let toward = |from: &[f64], factor: f64| -> Vec<f64> {
            centroid
                .iter()
                .zip(from)
                .map(|(&c, &f)| c + factor * (f - c))
                .collect()
        };

        let mut reflected: Vec<f64> = centroid
            .iter()
            .zip(&simplex[worst])
            .map(|(&c, &w)| c + (c - w))
            .collect();
        let reflected_value = objective(&mut reflected);
        if reflected_value < values[second] && reflected_value >= values[best] {
            simplex[worst].clone_from(&reflected);
            values[worst] = reflected_value;
        }
        if reflected_value < values[best] {
            let mut expanded = toward(&reflected, 2.0);
            let expanded_value = objective(&mut expanded);
            if expanded_value < reflected_value {
                simplex[worst] = expanded;
                values[worst] = expanded_value;
            } else {
                simplex[worst].clone_from(&reflected);
                values[worst] = reflected_value;
            }
        }
        if reflected_value >= values[second] {
            let mut contracted = if reflected_value < values[worst] {
                toward(&reflected, 0.5)
            } else {
                centroid
                    .iter()
                    .zip(&simplex[worst])
                    .map(|(&c, &w)| c - 0.5 * (c - w))
                    .collect()
            };
            let contracted_value = objective(&mut contracted);
            if contracted_value < values[worst] {
                simplex[worst] = contracted;
                values[worst] = contracted_value;
            } else {
                // Shrink towards the best vertex; as in InfluxDB, only the
                // worst and second worst are evaluated again.
                let anchor = simplex[best].clone();
                for (_, vertex) in simplex.iter_mut().enumerate().filter(|(i, _)| *i != best) {
                    for (x, &a) in vertex.iter_mut().zip(&anchor) {
                        *x = a + (*x - a) / 2.0;
                    }
                }
                values[worst] = objective(&mut simplex[worst]);
                values[second] = objective(&mut simplex[second]);
            }
        }

        let mean = values.iter().sum::<f64>() / (n + 1) as f64;
        let mut variance = 0.0;
        for v in &values {
            variance += (v - mean) * (v - mean) / dims;
        }
        if variance.sqrt() < EPSILON {
            break;
        }
    }

    let mut best = 0;
    for i in 0..=n {
        if values[i] < values[best] {
            best = i;
        }
    }
    let params = simplex[best].clone();
    // Evaluated once more, as InfluxDB does: the seasons this vertex left
    // make the value differ from the one it had.
    (objective(&mut simplex[best]), params)
}
