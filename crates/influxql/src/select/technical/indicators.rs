//! The moving averages and oscillators, fed one value at a time, as
//! InfluxDB 1.x's vendored `gota` package computes them: the same warm-up
//! rules, the same order of floating-point operations, the same zeros
//! before the first values (so the first outputs carry the same bias).

/// How an exponential average behaves before it has seen `period` values.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Warmup {
    /// An exponential average whose weight starts at 1 and shrinks to the
    /// period's (`'exponential'`, the default).
    Exponential,
    /// A plain mean of the values so far (`'simple'`).
    Simple,
    /// `chande_momentum_oscillator` only (`'none'`, its default): the
    /// oscillator over plain sums of the period's rises and falls rather
    /// than over smoothed ones.
    Unsmoothed,
}

/// An exponential moving average.
#[derive(Debug, Clone)]
struct Ema {
    period: u64,
    alpha: f64,
    warmup: Warmup,
    /// Values seen, up to `period`.
    count: u64,
    last: f64,
}

impl Ema {
    fn new(period: u64, warmup: Warmup) -> Ema {
        Ema::with_alpha(period, warmup, 2.0 / (period + 1) as f64)
    }

    fn with_alpha(period: u64, warmup: Warmup, alpha: f64) -> Ema {
        Ema {
            period,
            alpha,
            warmup,
            count: 0,
            last: 0.0,
        }
    }

    fn warmed(&self) -> bool {
        self.count == self.period
    }

    fn add(&mut self, v: f64) -> f64 {
        let last = self.last;
        self.last = if self.count == 0 {
            v
        } else if self.warmed() {
            (v - last) * self.alpha + last
        } else if self.warmup == Warmup::Simple {
            (last * self.count as f64 + v) / (self.count + 1) as f64
        } else {
            // A weight of 2/(n+1) over the n values so far, so that the
            // first value does not outweigh the next ones.
            (v - last) * (2.0 / (self.count + 2) as f64) + last
        };
        if self.count < self.period {
            self.count += 1;
        }
        self.last
    }

    /// Whether an average fed by this one takes its values yet: with a
    /// simple warm-up, only once this one has its full period.
    fn feeds_next(&self) -> bool {
        self.warmup == Warmup::Exponential || self.warmed()
    }
}

/// The smoothed mean rise and mean fall from one value to the next,
/// which `relative_strength_index` and the smoothed
/// `chande_momentum_oscillator` compare.
#[derive(Debug, Clone)]
struct RisesAndFalls {
    rises: Ema,
    falls: Ema,
    /// The previous value; 0 before the first, so the first counts as a
    /// rise or fall from 0 as in InfluxDB.
    previous: f64,
}

impl RisesAndFalls {
    fn new(period: u64, warmup: Warmup) -> RisesAndFalls {
        // Wilder's smoothing: a weight of 1/period, over period + 1 values.
        let ema = Ema::with_alpha(period + 1, warmup, 1.0 / period as f64);
        RisesAndFalls {
            rises: ema.clone(),
            falls: ema,
            previous: 0.0,
        }
    }

    /// The mean rise and mean fall after `v`.
    fn add(&mut self, v: f64) -> (f64, f64) {
        let (rise, fall) = if v > self.previous {
            (v - self.previous, 0.0)
        } else if v < self.previous {
            (0.0, self.previous - v)
        } else {
            (0.0, 0.0)
        };
        self.previous = v;
        (self.rises.add(rise), self.falls.add(fall))
    }
}

/// A value and how far it moved from the one before.
#[derive(Debug, Clone, Copy, Default)]
struct Move {
    value: f64,
    change: f64,
}

/// Kaufman's efficiency ratio: the net move over `period` values divided
/// by the sum of the moves between them. Before `period` values, InfluxDB
/// compares with zeros.
#[derive(Debug, Clone)]
struct EfficiencyRatio {
    period: usize,
    history: Vec<Move>,
    /// The sum of the absolute moves over the last `period` values.
    noise: f64,
}

impl EfficiencyRatio {
    fn new(period: usize) -> EfficiencyRatio {
        EfficiencyRatio {
            period,
            history: Vec::new(),
            noise: 0.0,
        }
    }

    /// The value before the next one (0 before the first).
    fn previous(&self) -> f64 {
        self.history.last().map_or(0.0, |p| p.value)
    }

    /// Whether `period` + 1 values are in.
    fn warmed(&self) -> bool {
        self.history.len() > self.period
    }

    fn add(&mut self, v: f64) -> f64 {
        let n = self.history.len();
        let oldest = n
            .checked_sub(self.period)
            .map_or_else(Move::default, |i| self.history[i]);
        let signal = (v - oldest.value).abs();
        let change = (v - self.previous()).abs();
        self.noise -= oldest.change;
        self.noise += change;
        self.history.push(Move { value: v, change });
        if signal == 0.0 || self.noise == 0.0 {
            0.0
        } else {
            signal / self.noise
        }
    }
}

/// The fastest and slowest smoothing constants' part of Kaufman's adaptive
/// moving average: 2/(2+1) − 2/(30+1) and 2/(30+1), each rounded once, as
/// Go folds constant expressions exactly.
const KAMA_SPAN: f64 = 56.0 / 93.0;
const KAMA_SLOWEST: f64 = 2.0 / 31.0;

/// The Chande momentum oscillator over plain sums: 100 × (rises − falls) /
/// (rises + falls) over the moves of the last `period` values.
#[derive(Debug, Clone)]
struct ChandeMomentum {
    /// `period` − 1: how far back a move leaves the sums.
    span: usize,
    history: Vec<Move>,
    rises: f64,
    falls: f64,
}

impl ChandeMomentum {
    fn add(&mut self, v: f64) -> f64 {
        let change = self.history.last().map_or(0.0, |p| v - p.value);
        if change > 0.0 {
            self.rises += change;
        } else if change < 0.0 {
            self.falls -= change;
        }
        let out = if self.rises != 0.0 || self.falls != 0.0 {
            100.0 * ((self.rises - self.falls) / (self.rises + self.falls))
        } else {
            0.0
        };
        let leaving = self
            .history
            .len()
            .checked_sub(self.span)
            .map_or(0.0, |i| self.history[i].change);
        if leaving > 0.0 {
            self.rises -= leaving;
        } else if leaving < 0.0 {
            self.falls += leaving;
        }
        self.history.push(Move { value: v, change });
        out
    }
}

/// One of the indicators and its state over a series so far.
#[derive(Debug, Clone)]
pub(super) struct Indicator(State);

#[derive(Debug, Clone)]
enum State {
    Ema(Ema),
    Dema([Ema; 2]),
    Tema([Ema; 3]),
    Rsi(RisesAndFalls),
    /// The triple-smoothed average and its previous value (0 at first).
    Trix([Ema; 3], f64),
    Ker(EfficiencyRatio),
    /// The efficiency ratio and the average so far.
    Kama(EfficiencyRatio, f64),
    Cmo(ChandeMomentum),
    SmoothedCmo(RisesAndFalls),
}

/// Which indicator (besides its period and warm-up).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Ema,
    Dema,
    Tema,
    Rsi,
    Trix,
    Ker,
    Kama,
    Cmo,
}

impl Indicator {
    /// `kind` over `period` (at least 1; at least 2 for `Cmo` without a
    /// warm-up) values.
    pub(super) fn new(kind: Kind, period: u64, warmup: Warmup) -> Indicator {
        let ema = || Ema::new(period, warmup);
        let span = period as usize;
        Indicator(match kind {
            Kind::Ema => State::Ema(ema()),
            Kind::Dema => State::Dema([ema(), ema()]),
            Kind::Tema => State::Tema([ema(), ema(), ema()]),
            Kind::Rsi => State::Rsi(RisesAndFalls::new(period, warmup)),
            Kind::Trix => State::Trix([ema(), ema(), ema()], 0.0),
            Kind::Ker => State::Ker(EfficiencyRatio::new(span)),
            Kind::Kama => State::Kama(EfficiencyRatio::new(span), 0.0),
            Kind::Cmo if warmup == Warmup::Unsmoothed => State::Cmo(ChandeMomentum {
                span: span - 1,
                history: Vec::new(),
                rises: 0.0,
                falls: 0.0,
            }),
            Kind::Cmo => State::SmoothedCmo(RisesAndFalls::new(period, warmup)),
        })
    }

    /// How many values InfluxDB holds back by default: those the indicator
    /// needs before it is "warmed".
    pub(super) fn default_hold(kind: Kind, period: u64, warmup: Warmup) -> u64 {
        let short = period - 1;
        let exponential = warmup == Warmup::Exponential;
        match kind {
            Kind::Ema => short,
            Kind::Dema | Kind::Tema if exponential => short,
            Kind::Dema => short.wrapping_mul(2),
            Kind::Tema => short.wrapping_mul(3),
            Kind::Trix if exponential => period,
            Kind::Trix => short.wrapping_mul(3).wrapping_add(1),
            Kind::Cmo if warmup == Warmup::Unsmoothed => short,
            Kind::Rsi | Kind::Ker | Kind::Kama | Kind::Cmo => period,
        }
    }

    /// Its value once `v` is in.
    pub(super) fn add(&mut self, v: f64) -> f64 {
        match &mut self.0 {
            State::Ema(ema) => ema.add(v),
            State::Dema([first, second]) => {
                let a1 = first.add(v);
                let a2 = if first.feeds_next() {
                    second.add(a1)
                } else {
                    a1
                };
                2.0 * a1 - a2
            }
            State::Tema([first, second, third]) => {
                let a1 = first.add(v);
                let a2 = if first.feeds_next() {
                    second.add(a1)
                } else {
                    a1
                };
                let a3 = if second.feeds_next() {
                    third.add(a2)
                } else {
                    a2
                };
                3.0 * a1 - 3.0 * a2 + a3
            }
            State::Rsi(moves) => {
                let (rises, falls) = moves.add(v);
                100.0 - (100.0 / (1.0 + rises / falls))
            }
            State::Trix([first, second, third], previous) => {
                let mut average = first.add(v);
                if first.feeds_next() {
                    average = second.add(average);
                    if second.feeds_next() {
                        average = third.add(average);
                    }
                }
                let rate = ((average / *previous) - 1.0) * 100.0;
                *previous = average;
                rate
            }
            State::Ker(ratio) => ratio.add(v),
            State::Kama(ratio, average) => {
                // Until warmed, the average restarts from the previous value.
                if !ratio.warmed() {
                    *average = ratio.previous();
                }
                let smoothing = ratio.add(v) * KAMA_SPAN + KAMA_SLOWEST;
                *average += smoothing * smoothing * (v - *average);
                *average
            }
            State::Cmo(momentum) => momentum.add(v),
            State::SmoothedCmo(moves) => {
                let (rises, falls) = moves.add(v);
                100.0 * ((rises - falls) / (rises + falls))
            }
        }
    }
}
