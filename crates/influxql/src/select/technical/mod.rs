//! InfluxQL's technical-analysis and predictor functions, computed as
//! InfluxDB 1.x (1.6) computes them, in the same floating-point steps so
//! that the answers agree to the bit: the moving averages and oscillators
//! (`exponential_moving_average`, `double_…`, `triple_…`,
//! `relative_strength_index`, `triple_exponential_derivative`,
//! `kaufmans_efficiency_ratio`, `kaufmans_adaptive_moving_average`,
//! `chande_momentum_oscillator`: [`indicators`]) and the Holt-Winters
//! forecasts (`holt_winters`, `holt_winters_with_fit`: [`holt_winters`]).
//! Their arguments are checked with InfluxDB's messages.

mod holt_winters;
mod indicators;

use indicators::{Indicator, Kind, Warmup};

use crate::parse::Expr;

/// Most intervals `holt_winters` forecasts: a bound on what one query can
/// make the server allocate (InfluxDB has none and runs out of memory).
const MAX_HORIZON: i64 = 1_000_000;

/// The indicators, by name.
const INDICATORS: [(&str, Kind); 8] = [
    ("exponential_moving_average", Kind::Ema),
    ("double_exponential_moving_average", Kind::Dema),
    ("triple_exponential_moving_average", Kind::Tema),
    ("relative_strength_index", Kind::Rsi),
    ("triple_exponential_derivative", Kind::Trix),
    ("kaufmans_efficiency_ratio", Kind::Ker),
    ("kaufmans_adaptive_moving_average", Kind::Kama),
    ("chande_momentum_oscillator", Kind::Cmo),
];

/// What the function needs besides its input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Parameters {
    Indicator {
        kind: Kind,
        period: u64,
        /// How many points give no output first.
        hold: u32,
        warmup: Warmup,
    },
    HoltWinters {
        /// How many intervals to forecast.
        horizon: usize,
        /// The season's length in intervals (below 2: no seasons).
        season: usize,
        /// Whether the fitted values come before the forecast.
        with_fit: bool,
    },
}

/// One technical-analysis or predictor call, its arguments checked.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Technical {
    name: &'static str,
    parameters: Parameters,
}

impl Technical {
    /// `None` when `name` is not one of these functions; else the call
    /// with its arguments (`args`: all of them) after the first (the field
    /// or aggregate, which the caller handles) checked, erroring with
    /// InfluxDB's messages. `holt_winters`' first argument must be a call,
    /// as InfluxDB requires.
    pub(super) fn named(name: &str, args: &[Expr]) -> Option<Result<Technical, String>> {
        let known = INDICATORS.iter().find(|(known, _)| *known == name);
        let (name, parameters) = if let Some(&(name, kind)) = known {
            (name, indicator(name, kind, args))
        } else {
            let (name, with_fit) = match name {
                "holt_winters" => ("holt_winters", false),
                "holt_winters_with_fit" => ("holt_winters_with_fit", true),
                _ => return None,
            };
            (name, holt_winters_parameters(name, with_fit, args))
        };
        Some(parameters.map(|parameters| Technical { name, parameters }))
    }

    /// The function's name as written.
    pub(super) fn name(&self) -> &'static str {
        self.name
    }

    /// Whether, over `GROUP BY time`, InfluxDB feeds it the interval
    /// before the range too: the indicators, not `holt_winters`.
    pub(super) fn reads_previous_interval(&self) -> bool {
        matches!(self.parameters, Parameters::Indicator { .. })
    }

    /// Its output over one series' points (time ns, value; nulls left
    /// out) in the order InfluxDB feeds them, the statement's: the
    /// indicators give a value per point once the hold period is past,
    /// NaN where InfluxDB answers null (a 0/0); `holt_winters` forecasts
    /// on `interval` (the `GROUP BY time` interval, ns), the points being
    /// its aggregate's windows, and gives nothing without one.
    pub(super) fn apply(&self, points: &[(i64, f64)], interval: Option<i64>) -> Vec<(i64, f64)> {
        match self.parameters {
            Parameters::Indicator {
                kind,
                period,
                hold,
                warmup,
            } => {
                let mut indicator = Indicator::new(kind, period, warmup);
                // These three leave out infinite values (a division by 0).
                let finite_only = matches!(kind, Kind::Trix | Kind::Ker | Kind::Kama);
                let mut out = Vec::new();
                for (count, &(time, v)) in (1u32..).zip(points) {
                    let value = indicator.add(v);
                    if count > hold && !(finite_only && value.is_infinite()) {
                        out.push((time, value));
                    }
                }
                out
            }
            Parameters::HoltWinters {
                horizon,
                season,
                with_fit,
            } => match interval {
                Some(interval) => {
                    holt_winters::holt_winters(points, interval, horizon, season, with_fit)
                }
                None => Vec::new(),
            },
        }
    }
}

/// The period, hold period and warm-up of an indicator's call.
fn indicator(name: &str, kind: Kind, args: &[Expr]) -> Result<Parameters, String> {
    let has_warmup = !matches!(kind, Kind::Ker | Kind::Kama);
    let most = if has_warmup { 4 } else { 3 };
    if !(2..=most).contains(&args.len()) {
        return Err(format!(
            "invalid number of arguments for {name}, expected at least 2 but no more than {most}, got {}",
            args.len()
        ));
    }
    let period = match args[1] {
        Expr::Integer(period) if period >= 1 => period as u64,
        Expr::Integer(_) => {
            return Err(format!("{name} period must be greater than or equal to 1"))
        }
        _ => return Err(format!("{name} period must be an integer")),
    };
    // -1 asks for the default, which depends on the warm-up.
    let hold = match args.get(2) {
        None | Some(Expr::Integer(-1)) => None,
        Some(Expr::Integer(hold)) if kind == Kind::Trix && *hold < 1 => {
            return Err(format!(
                "{name} hold period must be greater than or equal to 1"
            ))
        }
        Some(Expr::Integer(hold)) if *hold < 0 => {
            return Err(format!(
                "{name} hold period must be greater than or equal to 0"
            ))
        }
        Some(Expr::Integer(hold)) => Some(*hold as u64),
        Some(_) => return Err(format!("{name} hold period must be an integer")),
    };
    let warmup = match (kind, args.get(3)) {
        (Kind::Cmo, None) => Warmup::Unsmoothed,
        (_, None) => Warmup::Exponential,
        (_, Some(Expr::Str(warmup))) => match warmup.as_str() {
            "exponential" => Warmup::Exponential,
            "simple" => Warmup::Simple,
            "none" if kind == Kind::Cmo => Warmup::Unsmoothed,
            _ if kind == Kind::Cmo => {
                return Err(format!(
                    "{name} warmup type must be one of: 'none' 'exponential' 'simple'"
                ))
            }
            _ => {
                return Err(format!(
                    "{name} warmup type must be one of: 'exponential' 'simple'"
                ))
            }
        },
        (_, Some(_)) => return Err(format!("{name} warmup type must be a string")),
    };
    if kind == Kind::Cmo && warmup == Warmup::Unsmoothed && period == 1 {
        // InfluxDB accepts it, then fails on the first point (an index
        // out of range): say why up front instead.
        return Err(format!(
            "{name} period must be greater than or equal to 2 without a warmup type"
        ));
    }
    let hold = hold.unwrap_or_else(|| Indicator::default_hold(kind, period, warmup));
    Ok(Parameters::Indicator {
        kind,
        period,
        // InfluxDB keeps the hold period, and counts points, in 32 bits.
        hold: hold as u32,
        warmup,
    })
}

/// The horizon and season of a `holt_winters` call.
fn holt_winters_parameters(
    name: &str,
    with_fit: bool,
    args: &[Expr],
) -> Result<Parameters, String> {
    if args.len() != 3 {
        return Err(format!(
            "invalid number of arguments for {name}, expected 3, got {}",
            args.len()
        ));
    }
    let horizon = match args[1] {
        Expr::Integer(n) if n > MAX_HORIZON => {
            return Err(format!(
                "{name} forecasts at most {MAX_HORIZON} intervals, got {n}"
            ))
        }
        Expr::Integer(n) if n > 0 => n as usize,
        Expr::Integer(n) => {
            return Err(format!(
                "second arg to {name} must be greater than 0, got {n}"
            ))
        }
        _ => return Err(format!("expected integer argument as second arg in {name}")),
    };
    let season = match args[2] {
        Expr::Integer(s) if s >= 0 => s as usize,
        Expr::Integer(s) => return Err(format!("third arg to {name} cannot be negative, got {s}")),
        _ => return Err(format!("expected integer argument as third arg in {name}")),
    };
    if !matches!(args[0], Expr::Call { .. }) {
        return Err(format!("must use aggregate function with {name}"));
    }
    Ok(Parameters::HoltWinters {
        horizon,
        season,
        with_fit,
    })
}

#[cfg(test)]
mod tests {
    //! Expected values are InfluxDB 1.6.7's answers (the query that gave
    //! each is above it), over the series in the constants: times in
    //! seconds, values as InfluxDB read them (nulls left out).

    use super::*;

    /// The call `name(x, args)`, `args` written as in InfluxQL (integers
    /// and quoted strings).
    fn technical(name: &str, args: &str) -> Result<Technical, String> {
        let mut exprs = vec![Expr::Call {
            name: "mean".into(),
            args: vec![Expr::Var {
                name: "x".into(),
                cast: None,
            }],
        }];
        for arg in args.split(',').map(str::trim).filter(|a| !a.is_empty()) {
            exprs.push(if let Some(text) = arg.strip_prefix('\'') {
                Expr::Str(text.trim_end_matches('\'').into())
            } else if let Ok(n) = arg.parse() {
                Expr::Integer(n)
            } else {
                Expr::Number(arg.parse().unwrap())
            });
        }
        Technical::named(name, &exprs).expect("one of these functions")
    }

    /// Asserts that `name(x, args)` over `input` (GROUP BY `interval`, in
    /// seconds) answers `expected` to 1e-9 relative, NaN for null.
    fn check(
        name: &str,
        args: &str,
        input: &[(i64, f64)],
        interval: Option<i64>,
        expected: &[(i64, f64)],
    ) {
        const SECOND: i64 = 1_000_000_000;
        let input: Vec<(i64, f64)> = input.iter().map(|&(t, v)| (t * SECOND, v)).collect();
        let got = technical(name, args)
            .unwrap()
            .apply(&input, interval.map(|i| i * SECOND));
        let got: Vec<(i64, f64)> = got.into_iter().map(|(t, v)| (t / SECOND, v)).collect();
        let alike = got.len() == expected.len()
            && got.iter().zip(expected).all(|(&(t, v), &(want_t, want))| {
                t == want_t
                    && (v == want
                        || (v.is_nan() && want.is_nan())
                        || (v - want).abs() <= 1e-9 * want.abs().max(v.abs()))
            });
        assert!(alike, "{name}(x, {args}):\n got {got:?}\nwant {expected:?}");
    }

    /// `SELECT x FROM a`
    #[rustfmt::skip]
    const A: &[(i64, f64)] = &[(1000, 10.5), (1010, 11.25), (1020, 11.25), (1030, 9.75), (1050, 12.0), (1060, 13.5), (1070, 13.5), (1090, 13.5), (1100, 12.25), (1110, 14.0), (1120, 15.75), (1150, 15.0), (1160, 16.5), (1170, 14.25), (1180, 17.0), (1200, 18.5), (1210, 18.0), (1220, 19.25)];
    /// `SELECT i FROM b`
    #[rustfmt::skip]
    const B: &[(i64, f64)] = &[(1000, 3.0), (1010, 5.0), (1020, 4.0), (1030, 4.0), (1040, 8.0), (1050, 10.0), (1060, 7.0), (1070, 7.0), (1080, 12.0), (1090, 11.0), (1100, 15.0), (1110, 14.0), (1120, 9.0), (1130, 16.0)];
    /// `SELECT x FROM s`
    #[rustfmt::skip]
    const SHORT: &[(i64, f64)] = &[(1000, 2.5), (1010, 3.0), (1020, 1.0)];
    /// `SELECT x FROM zero`
    #[rustfmt::skip]
    const ZERO: &[(i64, f64)] = &[(1000, 0.0), (1010, 0.0), (1020, 0.0), (1030, 0.0), (1040, 0.0)];
    /// `SELECT mean(x) FROM a WHERE time >= 1000s AND time < 1240s GROUP BY time(20s)`
    #[rustfmt::skip]
    const A_MEAN_20S: &[(i64, f64)] = &[(1000, 10.875), (1020, 10.5), (1040, 12.0), (1060, 13.5), (1080, 13.5), (1100, 13.125), (1120, 15.75), (1140, 15.0), (1160, 15.375), (1180, 17.0), (1200, 18.25), (1220, 19.25)];
    /// `SELECT mean(x) FROM hw WHERE time >= 1000s AND time < 1280s GROUP BY time(10s)`
    #[rustfmt::skip]
    const HW_MEAN_10S: &[(i64, f64)] = &[(1000, 23.539), (1010, 19.381), (1020, 17.781), (1030, 23.887), (1040, 26.243), (1050, 23.589), (1060, 20.27), (1070, 27.609), (1080, 28.845), (1100, 24.67), (1110, 30.284), (1120, 32.109), (1130, 29.309), (1140, 27.592), (1150, 34.299), (1160, 35.468), (1190, 37.353), (1200, 40.287), (1210, 35.893), (1220, 33.476), (1230, 40.972), (1240, 41.656), (1250, 40.18), (1260, 36.548), (1270, 43.173)];
    /// `SELECT mean(x) FROM hw WHERE time >= 1000s AND time < 1280s GROUP BY time(20s, 5s)`
    #[rustfmt::skip]
    const HW_MEAN_20S_OFFSET_5S: &[(i64, f64)] = &[(985, 23.539), (1005, 18.581), (1025, 25.064999999999998), (1045, 22.482666666666663), (1065, 28.227), (1085, 24.67), (1105, 31.1965), (1125, 28.450499999999998), (1145, 34.68866666666667), (1185, 39.309), (1205, 34.6845), (1225, 41.314), (1245, 38.96933333333333), (1265, 43.173)];
    /// `SELECT max(i) FROM hwi WHERE time >= 1000s AND time < 1100s GROUP BY time(10s)`
    #[rustfmt::skip]
    const HWI_MAX_10S: &[(i64, f64)] = &[(1000, 5.0), (1010, 7.0), (1020, 6.0), (1030, 9.0), (1040, 11.0), (1050, 10.0), (1060, 13.0), (1070, 15.0), (1080, 14.0), (1090, 17.0)];

    /// The exponential averages, RSI and TRIX: defaults, each hold period and warm-up form, integers, too few points, 0/0 (null), over `mean(x)`.
    #[test]
    #[rustfmt::skip]
    fn moving_averages_answer_as_influxdb() {
    // SELECT exponential_moving_average(x, 3) FROM a
    check("exponential_moving_average", "3", A, None, &[(1020, 11.125), (1030, 10.4375), (1050, 11.21875), (1060, 12.359375), (1070, 12.9296875), (1090, 13.21484375), (1100, 12.732421875), (1110, 13.3662109375), (1120, 14.55810546875), (1150, 14.779052734375), (1160, 15.6395263671875), (1170, 14.94476318359375), (1180, 15.972381591796875), (1200, 17.236190795898438), (1210, 17.61809539794922), (1220, 18.43404769897461)]);
    // SELECT exponential_moving_average(x, 4, 0) FROM a
    check("exponential_moving_average", "4, 0", A, None, &[(1000, 10.5), (1010, 11.0), (1020, 11.125), (1030, 10.575), (1050, 11.145), (1060, 12.087), (1070, 12.6522), (1090, 12.99132), (1100, 12.694792), (1110, 13.2168752), (1120, 14.23012512), (1150, 14.538075072), (1160, 15.3228450432), (1170, 14.89370702592), (1180, 15.736224215552), (1200, 16.841734529331198), (1210, 17.305040717598718), (1220, 18.08302443055923)]);
    // SELECT exponential_moving_average(x, 3, -1, 'simple') FROM a
    check("exponential_moving_average", "3, -1, 'simple'", A, None, &[(1020, 11.0), (1030, 10.375), (1050, 11.1875), (1060, 12.34375), (1070, 12.921875), (1090, 13.2109375), (1100, 12.73046875), (1110, 13.365234375), (1120, 14.5576171875), (1150, 14.77880859375), (1160, 15.639404296875), (1170, 14.9447021484375), (1180, 15.97235107421875), (1200, 17.236175537109375), (1210, 17.618087768554688), (1220, 18.434043884277344)]);
    // SELECT exponential_moving_average(x, 3, 5, 'exponential') FROM a
    check("exponential_moving_average", "3, 5, 'exponential'", A, None, &[(1060, 12.359375), (1070, 12.9296875), (1090, 13.21484375), (1100, 12.732421875), (1110, 13.3662109375), (1120, 14.55810546875), (1150, 14.779052734375), (1160, 15.6395263671875), (1170, 14.94476318359375), (1180, 15.972381591796875), (1200, 17.236190795898438), (1210, 17.61809539794922), (1220, 18.43404769897461)]);
    // SELECT exponential_moving_average(x, 4, 1, 'simple') FROM a
    check("exponential_moving_average", "4, 1, 'simple'", A, None, &[(1010, 10.875), (1020, 11.0), (1030, 10.6875), (1050, 11.2125), (1060, 12.1275), (1070, 12.676499999999999), (1090, 13.005899999999999), (1100, 12.703539999999998), (1110, 13.222123999999999), (1120, 14.233274399999999), (1150, 14.539964639999999), (1160, 15.323978784), (1170, 14.8943872704), (1180, 15.73663236224), (1200, 16.841979417344), (1210, 17.3051876504064), (1220, 18.08311259024384)]);
    // SELECT exponential_moving_average(i, 3) FROM b
    check("exponential_moving_average", "3", B, None, &[(1020, 4.166666666666666), (1030, 4.083333333333333), (1040, 6.041666666666666), (1050, 8.020833333333332), (1060, 7.510416666666666), (1070, 7.255208333333333), (1080, 9.627604166666666), (1090, 10.313802083333332), (1100, 12.656901041666666), (1110, 13.328450520833332), (1120, 11.164225260416666), (1130, 13.582112630208332)]);
    // SELECT exponential_moving_average(x, 5, 1) FROM s
    check("exponential_moving_average", "5, 1", SHORT, None, &[(1010, 2.8333333333333335), (1020, 1.9166666666666667)]);
    // SELECT exponential_moving_average(x, 5) FROM s
    check("exponential_moving_average", "5", SHORT, None, &[]);
    // SELECT exponential_moving_average(x, 2, 1) FROM zero
    check("exponential_moving_average", "2, 1", ZERO, None, &[(1010, 0.0), (1020, 0.0), (1030, 0.0), (1040, 0.0)]);
    // SELECT exponential_moving_average(mean(x), 3) FROM a WHERE time >= 1000s AND time < 1240s GROUP BY time(20s)
    check("exponential_moving_average", "3", A_MEAN_20S, Some(20), &[(1040, 11.3125), (1060, 12.40625), (1080, 12.953125), (1100, 13.0390625), (1120, 14.39453125), (1140, 14.697265625), (1160, 15.0361328125), (1180, 16.01806640625), (1200, 17.134033203125), (1220, 18.1920166015625)]);
    // SELECT exponential_moving_average(mean(x), 4, 2, 'simple') FROM hw WHERE time >= 1000s AND time < 1280s GROUP BY time(10s)
    check("exponential_moving_average", "4, 2, 'simple'", HW_MEAN_10S, Some(10), &[(1020, 20.233666666666668), (1030, 21.147000000000002), (1040, 23.1854), (1050, 23.34684), (1060, 22.116104), (1070, 24.3132624), (1080, 26.12595744), (1100, 25.543574464000002), (1110, 27.4397446784), (1120, 29.30744680704), (1130, 29.308068084224), (1140, 28.6216408505344), (1150, 30.892584510320642), (1160, 32.722750706192386), (1190, 34.57485042371543), (1200, 36.859710254229256), (1210, 36.47302615253756), (1220, 35.274215691522535), (1230, 37.55332941491352), (1240, 39.19439764894811), (1250, 39.58863858936887), (1260, 38.37238315362132), (1270, 40.29262989217279)]);
    // SELECT double_exponential_moving_average(x, 3) FROM a
    check("double_exponential_moving_average", "3", A, None, &[(1020, 11.270833333333332), (1030, 10.166666666666666), (1050, 11.473958333333332), (1060, 13.057291666666666), (1070, 13.563802083333332), (1090, 13.674479166666666), (1100, 12.721028645833332), (1110, 13.677408854166666), (1120, 15.309651692708332), (1150, 15.265299479166666), (1160, 16.312886555989582), (1170, 14.934061686197916), (1180, 16.48084004720052), (1200, 18.12232462565104), (1210, 18.25211461385091), (1220, 19.15903345743815)]);
    // SELECT double_exponential_moving_average(x, 4, 0) FROM a
    check("double_exponential_moving_average", "4, 0", A, None, &[(1000, 10.5), (1010, 11.166666666666666), (1020, 11.270833333333332), (1030, 10.332499999999998), (1050, 11.341499999999998), (1060, 12.7701), (1070, 13.40118), (1090, 13.644179999999999), (1100, 12.908591199999998), (1110, 13.65840464), (1120, 15.102992736000001), (1150, 15.2465656128), (1160, 16.2188013504), (1170, 15.173797999871999), (1180, 16.4097891137024), (1200, 17.90917965648896), (1210, 18.223491506853886), (1220, 19.10088513188864)]);
    // SELECT double_exponential_moving_average(x, 3, -1, 'simple') FROM a
    check("double_exponential_moving_average", "3, -1, 'simple'", A, None, &[(1050, 11.520833333333334), (1060, 13.088541666666668), (1070, 13.583333333333334), (1090, 13.686197916666668), (1100, 12.727864583333334), (1110, 13.681315104166668), (1120, 15.311848958333334), (1150, 15.266520182291668), (1160, 16.313557942708336), (1170, 14.934427897135418), (1180, 16.481038411458336), (1200, 18.12243143717448), (1210, 18.252171834309898), (1220, 19.159063975016277)]);
    // SELECT double_exponential_moving_average(x, 3, 5, 'exponential') FROM a
    check("double_exponential_moving_average", "3, 5, 'exponential'", A, None, &[(1060, 13.057291666666666), (1070, 13.563802083333332), (1090, 13.674479166666666), (1100, 12.721028645833332), (1110, 13.677408854166666), (1120, 15.309651692708332), (1150, 15.265299479166666), (1160, 16.312886555989582), (1170, 14.934061686197916), (1180, 16.48084004720052), (1200, 18.12232462565104), (1210, 18.25211461385091), (1220, 19.15903345743815)]);
    // SELECT double_exponential_moving_average(x, 4, 1, 'simple') FROM a
    check("double_exponential_moving_average", "4, 1, 'simple'", A, None, &[(1010, 10.875), (1020, 11.0), (1030, 10.6875), (1050, 11.475000000000001), (1060, 12.9125), (1070, 13.677), (1090, 13.80384), (1100, 13.000887999999998), (1110, 13.7116832), (1120, 15.13370016), (1150, 15.26423424), (1160, 16.228949030400003), (1170, 15.17961451008), (1180, 16.413115761152), (1200, 17.9110776897536), (1210, 18.2245715536896), (1220, 19.101497896116225)]);
    // SELECT double_exponential_moving_average(i, 3) FROM b
    check("double_exponential_moving_average", "3", B, None, &[(1020, 4.305555555555555), (1030, 4.111111111111111), (1040, 7.034722222222221), (1050, 9.506944444444443), (1060, 7.998263888888888), (1070, 7.371527777777778), (1080, 10.871961805555555), (1090, 11.27907986111111), (1100, 14.311089409722221), (1110, 14.491319444444443), (1120, 10.66354709201389), (1130, 14.540717230902777)]);
    // SELECT double_exponential_moving_average(x, 5, 1) FROM s
    check("double_exponential_moving_average", "5, 1", SHORT, None, &[(1010, 2.9444444444444446), (1020, 1.5138888888888888)]);
    // SELECT double_exponential_moving_average(x, 5) FROM s
    check("double_exponential_moving_average", "5", SHORT, None, &[]);
    // SELECT double_exponential_moving_average(x, 2, 1) FROM zero
    check("double_exponential_moving_average", "2, 1", ZERO, None, &[(1010, 0.0), (1020, 0.0), (1030, 0.0), (1040, 0.0)]);
    // SELECT double_exponential_moving_average(mean(x), 3) FROM a WHERE time >= 1000s AND time < 1240s GROUP BY time(20s)
    check("double_exponential_moving_average", "3", A_MEAN_20S, Some(20), &[(1040, 11.614583333333332), (1060, 13.104166666666666), (1080, 13.575520833333332), (1100, 13.393229166666666), (1120, 15.249348958333332), (1140, 15.276041666666666), (1160, 15.494954427083332), (1180, 16.738444010416664), (1200, 18.052205403645832), (1220, 19.180094401041664)]);
    // SELECT double_exponential_moving_average(mean(x), 4, 2, 'simple') FROM hw WHERE time >= 1000s AND time < 1280s GROUP BY time(10s)
    check("double_exponential_moving_average", "4, 2, 'simple'", HW_MEAN_10S, Some(10), &[(1020, 20.233666666666668), (1030, 21.147000000000002), (1040, 24.2046), (1050, 24.13393333333333), (1060, 21.783372), (1070, 25.431918239999998), (1080, 27.884767968000002), (1100, 26.249430995200004), (1110, 29.00096072576), (1120, 31.36479771264), (1130, 30.5428513938944), (1140, 28.95065449612288), (1150, 32.45255889354547), (1160, 34.756835053650335), (1190, 36.906560862704026), (1200, 39.62965241593071), (1210, 37.902980988543405), (1220, 35.412902316517034), (1230, 39.00400962394481), (1240, 41.04944671478764), (1250, 40.938212593125044), (1260, 38.4523742944265), (1270, 41.49277261978678)]);
    // SELECT triple_exponential_moving_average(x, 3) FROM a
    check("triple_exponential_moving_average", "3", A, None, &[(1020, 11.288194444444446), (1030, 9.96701388888889), (1050, 11.637152777777779), (1060, 13.360243055555557), (1070, 13.683376736111112), (1090, 13.647026909722223), (1100, 12.471788194444446), (1110, 13.71408420138889), (1120, 15.548163519965279), (1150, 15.251905653211807), (1160, 16.399746365017364), (1170, 14.635460747612848), (1180, 16.591119554307728), (1200, 18.36630206637912), (1210, 18.248046027289497), (1220, 19.202482435438363)]);
    // SELECT triple_exponential_moving_average(x, 4, 0) FROM a
    check("triple_exponential_moving_average", "4, 0", A, None, &[(1000, 10.5), (1010, 11.222222222222223), (1020, 11.288194444444446), (1030, 10.109916666666665), (1050, 11.471350000000003), (1060, 13.139969999999996), (1070, 13.662630000000004), (1090, 13.743377999999993), (1100, 12.70467352), (1110, 13.672692175999998), (1120, 15.370368163200009), (1150, 15.308364624), (1160, 16.36836021696), (1170, 14.894014119859198), (1180, 16.478003140213755), (1200, 18.18643620980019), (1210, 18.30044883609908), (1220, 19.20670547668029)]);
    // SELECT triple_exponential_moving_average(x, 3, -1, 'simple') FROM a
    check("triple_exponential_moving_average", "3, -1, 'simple'", A, None, &[(1070, 13.555555555555555), (1090, 13.579210069444443), (1100, 12.435438368055554), (1110, 13.694444444444443), (1120, 15.537489149305554), (1150, 15.246080186631943), (1160, 16.396558973524304), (1170, 14.633714463975693), (1180, 16.590162489149304), (1200, 18.365777757432724), (1210, 18.247759077284076), (1220, 19.202325608995224)]);
    // SELECT triple_exponential_moving_average(x, 3, 5, 'exponential') FROM a
    check("triple_exponential_moving_average", "3, 5, 'exponential'", A, None, &[(1060, 13.360243055555557), (1070, 13.683376736111112), (1090, 13.647026909722223), (1100, 12.471788194444446), (1110, 13.71408420138889), (1120, 15.548163519965279), (1150, 15.251905653211807), (1160, 16.399746365017364), (1170, 14.635460747612848), (1180, 16.591119554307728), (1200, 18.36630206637912), (1210, 18.248046027289497), (1220, 19.202482435438363)]);
    // SELECT triple_exponential_moving_average(x, 4, 1, 'simple') FROM a
    check("triple_exponential_moving_average", "4, 1, 'simple'", A, None, &[(1010, 10.875), (1020, 11.0), (1030, 10.6875), (1050, 11.737500000000008), (1060, 13.697500000000003), (1070, 14.677500000000006), (1090, 14.335800000000003), (1100, 12.98876133333333), (1110, 13.724356799999997), (1120, 15.387824255999996), (1150, 15.311015001599996), (1160, 16.365437875200005), (1170, 14.889662012927998), (1180, 16.4738979584), (1200, 18.183115932200963), (1210, 18.29796587768218), (1220, 19.204935332065283)]);
    // SELECT triple_exponential_moving_average(i, 3) FROM b
    check("triple_exponential_moving_average", "3", B, None, &[(1020, 4.226851851851852), (1030, 4.016203703703704), (1040, 7.469907407407408), (1050, 9.971064814814813), (1060, 7.73119212962963), (1070, 7.052228009259261), (1080, 11.276331018518523), (1090, 11.341724537037038), (1100, 14.686867042824078), (1110, 14.433548538773149), (1120, 9.8028880931713), (1130, 14.840029116030093)]);
    // SELECT triple_exponential_moving_average(x, 5, 1) FROM s
    check("triple_exponential_moving_average", "5, 1", SHORT, None, &[(1010, 2.9814814814814805), (1020, 1.2754629629629628)]);
    // SELECT triple_exponential_moving_average(x, 5) FROM s
    check("triple_exponential_moving_average", "5", SHORT, None, &[]);
    // SELECT triple_exponential_moving_average(x, 2, 1) FROM zero
    check("triple_exponential_moving_average", "2, 1", ZERO, None, &[(1010, 0.0), (1020, 0.0), (1030, 0.0), (1040, 0.0)]);
    // SELECT triple_exponential_moving_average(mean(x), 3) FROM a WHERE time >= 1000s AND time < 1240s GROUP BY time(20s)
    check("triple_exponential_moving_average", "3", A_MEAN_20S, Some(20), &[(1040, 11.793402777777779), (1060, 13.391493055555557), (1080, 13.681423611111112), (1100, 13.312065972222223), (1120, 15.459092881944446), (1140, 15.24289279513889), (1160, 15.418402777777779), (1180, 16.830946180555557), (1200, 18.197353786892364), (1220, 19.287621392144093)]);
    // SELECT triple_exponential_moving_average(mean(x), 4, 2, 'simple') FROM hw WHERE time >= 1000s AND time < 1280s GROUP BY time(10s)
    check("triple_exponential_moving_average", "4, 2, 'simple'", HW_MEAN_10S, Some(10), &[(1020, 20.233666666666668), (1030, 21.147000000000002), (1040, 25.223799999999997), (1050, 24.921026666666663), (1060, 21.450639999999993), (1070, 26.17768879999999), (1080, 28.613294741333323), (1100, 25.82964644480001), (1110, 29.26230570521599), (1120, 31.8192856152576), (1130, 30.32200357790719), (1140, 28.274684008081394), (1150, 32.7855530433024), (1160, 35.241097522044356), (1190, 37.37569399865883), (1200, 40.1740713311313), (1210, 37.4256399422464), (1220, 34.35173676213203), (1230, 39.154506441735876), (1240, 41.38236611954722), (1250, 40.83467919873078), (1260, 37.62850454001936), (1270, 41.67054171922778)]);
    // SELECT relative_strength_index(x, 3) FROM a
    check("relative_strength_index", "3", A, None, &[(1030, 66.66666666666666), (1050, 79.48717948717947), (1060, 85.18518518518518), (1070, 85.18518518518518), (1090, 85.18518518518518), (1100, 47.82326185834958), (1110, 72.8395061728395), (1120, 84.20146574197038), (1150, 66.35657111847587), (1160, 79.43295182578612), (1170, 42.375085525390574), (1180, 68.94046726293516), (1200, 77.44710430345522), (1210, 68.11885151882436), (1220, 78.03837581089704)]);
    // SELECT relative_strength_index(x, 4, 0) FROM a
    check("relative_strength_index", "4, 0", A, None, &[(1000, 100.0), (1010, 100.0), (1020, 100.0), (1030, 66.66666666666666), (1050, 79.48717948717947), (1060, 83.67346938775509), (1070, 83.67346938775509), (1090, 83.67346938775509), (1100, 59.633686478721486), (1110, 73.72501655822651), (1120, 82.07034677112043), (1150, 69.46317534371929), (1160, 78.33711420478429), (1170, 49.542952585747564), (1180, 68.44459492151324), (1200, 75.20092051000168), (1210, 68.66660819497636), (1220, 75.70373017276565)]);
    // SELECT relative_strength_index(x, 3, -1, 'simple') FROM a
    check("relative_strength_index", "3, -1, 'simple'", A, None, &[(1030, 88.23529411764706), (1050, 91.30434782608695), (1060, 93.10344827586206), (1070, 93.10344827586206), (1090, 93.10344827586206), (1100, 58.855585831062676), (1110, 76.78708685626441), (1120, 85.96328143155938), (1150, 68.54442694338924), (1160, 80.43678690791748), (1170, 43.46397851554899), (1180, 69.31879867270189), (1200, 77.67288153829601), (1210, 68.36538871305198), (1220, 78.17339522149958)]);
    // SELECT relative_strength_index(x, 3, 5, 'exponential') FROM a
    check("relative_strength_index", "3, 5, 'exponential'", A, None, &[(1060, 85.18518518518518), (1070, 85.18518518518518), (1090, 85.18518518518518), (1100, 47.82326185834958), (1110, 72.8395061728395), (1120, 84.20146574197038), (1150, 66.35657111847587), (1160, 79.43295182578612), (1170, 42.375085525390574), (1180, 68.94046726293516), (1200, 77.44710430345522), (1210, 68.11885151882436), (1220, 78.03837581089704)]);
    // SELECT relative_strength_index(x, 4, 1, 'simple') FROM a
    check("relative_strength_index", "4, 1, 'simple'", A, None, &[(1010, 100.0), (1020, 100.0), (1030, 88.23529411764706), (1050, 90.0), (1060, 91.42857142857143), (1070, 91.42857142857143), (1090, 91.42857142857143), (1100, 71.30674002751032), (1110, 79.66200844978876), (1120, 85.34998049161139), (1150, 73.58945031285744), (1160, 80.68620536958983), (1170, 52.48162490265732), (1180, 69.72679966945219), (1200, 76.04852455751661), (1210, 69.58988758891846), (1220, 76.29936636954068)]);
    // SELECT relative_strength_index(i, 3) FROM b
    check("relative_strength_index", "3", B, None, &[(1030, 70.0), (1040, 90.0), (1050, 93.33333333333333), (1060, 53.33333333333334), (1070, 53.33333333333334), (1080, 82.10045662100457), (1090, 69.28709055876686), (1100, 84.13930348258707), (1110, 71.22341545588546), (1120, 33.10722850291195), (1130, 68.50391160577466)]);
    // SELECT relative_strength_index(x, 5, 1) FROM s
    check("relative_strength_index", "5, 1", SHORT, None, &[(1010, 100.0), (1020, 36.8421052631579)]);
    // SELECT relative_strength_index(x, 5) FROM s
    check("relative_strength_index", "5", SHORT, None, &[]);
    // SELECT relative_strength_index(x, 2, 1) FROM zero
    check("relative_strength_index", "2, 1", ZERO, None, &[(1010, f64::NAN), (1020, f64::NAN), (1030, f64::NAN), (1040, f64::NAN)]);
    // SELECT relative_strength_index(mean(x), 3) FROM a WHERE time >= 1000s AND time < 1240s GROUP BY time(20s)
    check("relative_strength_index", "3", A_MEAN_20S, Some(20), &[(1060, 96.61016949152543), (1080, 96.61016949152543), (1100, 85.71428571428572), (1120, 93.45955249569707), (1140, 75.83798882681563), (1160, 78.83144692566535), (1180, 88.27416758451241), (1200, 92.2586419062535), (1220, 94.50095359186268)]);
    // SELECT relative_strength_index(mean(x), 4, 2, 'simple') FROM hw WHERE time >= 1000s AND time < 1280s GROUP BY time(10s)
    check("relative_strength_index", "4, 2, 'simple'", HW_MEAN_10S, Some(10), &[(1020, 80.34611052326176), (1030, 83.73584159534502), (1040, 84.7506554728674), (1050, 75.863513161118), (1060, 64.57296853735586), (1070, 75.37709402171119), (1080, 76.95524065603544), (1100, 59.71731309536779), (1110, 71.25964662160561), (1120, 74.43472762684243), (1130, 60.71378589464287), (1140, 52.76174718399601), (1150, 71.91814142775041), (1160, 74.33670393371256), (1190, 78.34628862992898), (1200, 83.64826962271465), (1210, 56.180215123305175), (1220, 45.27600174435483), (1230, 69.64173717285095), (1240, 71.2017666709807), (1250, 62.03048442636985), (1260, 43.60336308457269), (1270, 67.25863307100381)]);
    // SELECT triple_exponential_derivative(x, 3) FROM a
    check("triple_exponential_derivative", "3", A, None, &[(1030, -0.6560000000000121), (1050, 0.8535996134643398), (1060, 3.633024592781875), (1070, 4.566992834578931), (1090, 4.134507340615623), (1100, 1.9387421172266883), (1110, 2.1951325322111748), (1120, 4.0141996009678715), (1150, 3.75852587222798), (1160, 4.252108649210751), (1170, 2.002128875742315), (1180, 2.714690146500831), (1200, 4.262360896396222), (1210, 4.062209327912902), (1220, 4.169443686345331)]);
    // SELECT triple_exponential_derivative(x, 4, 1) FROM a
    check("triple_exponential_derivative", "4, 1", A, None, &[(1010, 2.1164021164021163), (1020, 1.1981865284974136), (1030, -0.12236800000000603), (1050, 0.4099993079531572), (1060, 1.918975174258053), (1070, 2.9305713721533566), (1090, 3.2333393776460273), (1100, 2.363026672158486), (1110, 2.3611159844878937), (1120, 3.2690157445011803), (1150, 3.3809255090830437), (1160, 3.7745758362720983), (1170, 2.728336976975343), (1180, 2.871600110415451), (1200, 3.6437790930493374), (1210, 3.7439393022910883), (1220, 3.9113742754642633)]);
    // SELECT triple_exponential_derivative(x, 3, -1, 'simple') FROM a
    check("triple_exponential_derivative", "3, -1, 'simple'", A, None, &[(1090, 5.031882970742685), (1100, 2.3846936771244387), (1110, 2.434664318041113), (1120, 4.147051562539894), (1150, 3.827943322121463), (1160, 4.289015133995733), (1170, 2.0205732640040663), (1180, 2.724690548443509), (1200, 4.267825886916277), (1210, 4.0650436999422945), (1220, 4.170922699212221)]);
    // SELECT triple_exponential_derivative(x, 3, 5, 'exponential') FROM a
    check("triple_exponential_derivative", "3, 5, 'exponential'", A, None, &[(1060, 3.633024592781875), (1070, 4.566992834578931), (1090, 4.134507340615623), (1100, 1.9387421172266883), (1110, 2.1951325322111748), (1120, 4.0141996009678715), (1150, 3.75852587222798), (1160, 4.252108649210751), (1170, 2.002128875742315), (1180, 2.714690146500831), (1200, 4.262360896396222), (1210, 4.062209327912902), (1220, 4.169443686345331)]);
    // SELECT triple_exponential_derivative(x, 4, 1, 'simple') FROM a
    check("triple_exponential_derivative", "4, 1, 'simple'", A, None, &[(1010, 3.571428571428581), (1020, 1.1494252873563315), (1030, -2.840909090909094), (1050, 2.4561403508771784), (1060, 3.584474885844746), (1070, 2.940268900154286), (1090, 2.278006166495361), (1100, 1.295742693701829), (1110, 1.3140909412559187), (1120, 3.5156580795620007), (1150, 3.560143090585921), (1160, 3.8994739962112), (1170, 2.809072163057613), (1180, 2.9248114874064868), (1200, 3.6787377549901246), (1210, 3.766024236871801), (1220, 3.9251772255950224)]);
    // SELECT triple_exponential_derivative(i, 3) FROM b
    check("triple_exponential_derivative", "3", B, None, &[(1030, 3.2199270959902826), (1040, 14.18481459682166), (1050, 22.75773195876287), (1060, 13.694100356917893), (1070, 6.95027930381793), (1080, 12.531025403060458), (1090, 11.96609064232148), (1100, 15.136481208674502), (1110, 12.552467385138954), (1120, 3.289015492930991), (1130, 5.8319082667724675)]);
    // SELECT triple_exponential_derivative(x, 5, 1) FROM s
    check("triple_exponential_derivative", "5, 1", SHORT, None, &[(1010, 5.9259259259259345), (1020, -6.206293706293698)]);
    // SELECT triple_exponential_derivative(x, 5) FROM s
    check("triple_exponential_derivative", "5", SHORT, None, &[]);
    // SELECT triple_exponential_derivative(x, 2, 1) FROM zero
    check("triple_exponential_derivative", "2, 1", ZERO, None, &[(1010, f64::NAN), (1020, f64::NAN), (1030, f64::NAN), (1040, f64::NAN)]);
    // SELECT triple_exponential_derivative(mean(x), 3) FROM a WHERE time >= 1000s AND time < 1240s GROUP BY time(20s)
    check("triple_exponential_derivative", "3", A_MEAN_20S, Some(20), &[(1060, 3.771328336788393), (1080, 4.571648098348047), (1100, 3.684790595150611), (1120, 5.26609502887716), (1140, 4.745575872834196), (1160, 3.963800396058703), (1180, 4.471430061702875), (1200, 5.269486379135624), (1220, 5.702001502762899)]);
    // SELECT triple_exponential_derivative(mean(x), 4, 2, 'simple') FROM hw WHERE time >= 1000s AND time < 1280s GROUP BY time(10s)
    check("triple_exponential_derivative", "4, 2, 'simple'", HW_MEAN_10S, Some(10), &[(1020, -5.714507611059327), (1030, 4.513928930330646), (1040, 4.819596160211859), (1050, 1.7754358738379494), (1060, -0.4916308161852956), (1070, 1.6610450537390742), (1080, 2.2572437504299048), (1100, 1.6078154606171458), (1110, 3.6545964209463433), (1120, 4.347574038886037), (1130, 3.7837249510716653), (1140, 2.5170867096610428), (1150, 2.9976455649692424), (1160, 3.6761837039520184), (1190, 4.261384499611309), (1200, 4.8836559739821706), (1210, 3.990462018937335), (1220, 2.414011570386787), (1230, 2.5542113993362925), (1240, 2.915750604543965), (1250, 2.7046719276069275), (1260, 1.6380542364870854), (1270, 1.8229719071822137)]);
    }

    /// The efficiency ratio and adaptive average: defaults, hold periods, period 1, integers, too few points, over `mean(x)`.
    #[test]
    #[rustfmt::skip]
    fn kaufmans_answer_as_influxdb() {
    // SELECT kaufmans_efficiency_ratio(x, 3) FROM a
    check("kaufmans_efficiency_ratio", "3", A, None, &[(1030, 0.3333333333333333), (1050, 0.2), (1060, 0.42857142857142855), (1070, 1.0), (1090, 1.0), (1100, 1.0), (1110, 0.16666666666666666), (1120, 0.47368421052631576), (1150, 0.6470588235294118), (1160, 0.625), (1170, 0.3333333333333333), (1180, 0.3076923076923077), (1200, 0.3076923076923077), (1210, 0.7894736842105263), (1220, 0.6923076923076923)]);
    // SELECT kaufmans_efficiency_ratio(x, 4, 0) FROM a
    check("kaufmans_efficiency_ratio", "4, 0", A, None, &[(1000, 1.0), (1010, 1.0), (1020, 1.0), (1030, 0.7647058823529411), (1050, 0.3333333333333333), (1060, 0.42857142857142855), (1070, 0.42857142857142855), (1090, 1.0), (1100, 0.09090909090909091), (1110, 0.16666666666666666), (1120, 0.47368421052631576), (1150, 0.2727272727272727), (1160, 0.7391304347826086), (1170, 0.04), (1180, 0.1724137931034483), (1200, 0.4375), (1210, 0.21428571428571427), (1220, 0.8333333333333334)]);
    // SELECT kaufmans_efficiency_ratio(x, 1) FROM a
    check("kaufmans_efficiency_ratio", "1", A, None, &[(1010, 1.0), (1020, 0.0), (1030, 1.0), (1050, 1.0), (1060, 1.0), (1070, 0.0), (1090, 0.0), (1100, 1.0), (1110, 1.0), (1120, 1.0), (1150, 1.0), (1160, 1.0), (1170, 1.0), (1180, 1.0), (1200, 1.0), (1210, 1.0), (1220, 1.0)]);
    // SELECT kaufmans_efficiency_ratio(i, 3, -1) FROM b
    check("kaufmans_efficiency_ratio", "3, -1", B, None, &[(1030, 0.3333333333333333), (1040, 0.6), (1050, 1.0), (1060, 0.3333333333333333), (1070, 0.2), (1080, 0.25), (1090, 0.6666666666666666), (1100, 0.8), (1110, 0.3333333333333333), (1120, 0.2), (1130, 0.07692307692307693)]);
    // SELECT kaufmans_efficiency_ratio(x, 5, 0) FROM s
    check("kaufmans_efficiency_ratio", "5, 0", SHORT, None, &[(1000, 1.0), (1010, 1.0), (1020, 0.2)]);
    // SELECT kaufmans_efficiency_ratio(x, 2) FROM zero
    check("kaufmans_efficiency_ratio", "2", ZERO, None, &[(1020, 0.0), (1030, 0.0), (1040, 0.0)]);
    // SELECT kaufmans_efficiency_ratio(mean(x), 3) FROM a WHERE time >= 1000s AND time < 1240s GROUP BY time(20s)
    check("kaufmans_efficiency_ratio", "3", A_MEAN_20S, Some(20), &[(1060, 0.7777777777777778), (1080, 1.0), (1100, 0.6), (1120, 0.75), (1140, 0.4), (1160, 0.6), (1180, 0.45454545454545453), (1200, 1.0), (1220, 1.0)]);
    // SELECT kaufmans_efficiency_ratio(mean(x), 4, 2) FROM hw WHERE time >= 1000s AND time < 1280s GROUP BY time(10s)
    check("kaufmans_efficiency_ratio", "4, 2", HW_MEAN_10S, Some(10), &[(1020, 0.6069222104652352), (1030, 0.6747168319069005), (1040, 0.19015471167369877), (1050, 0.33092167348222695), (1060, 0.1724281260824386), (1070, 0.237554250702068), (1080, 0.17885620016497117), (1100, 0.06727238782749415), (1110, 0.5453060335438904), (1120, 0.350194552529183), (1130, 0.03219092548910797), (1140, 0.24439611910337875), (1150, 0.3076864127519349), (1160, 0.271040103284112), (1190, 0.7008189580066211), (1200, 1.0), (1210, 0.15353496436139485), (1220, 0.17128116938951032), (1230, 0.2099066179455948), (1240, 0.09132145954239208), (1250, 0.3550898699577569), (1260, 0.23118603251053607), (1270, 0.17725698638962725)]);
    // SELECT kaufmans_adaptive_moving_average(x, 3) FROM a
    check("kaufmans_adaptive_moving_average", "3", A, None, &[(1030, 11.144477203530274), (1050, 11.173740455248115), (1060, 11.415807005170267), (1070, 12.34211500287237), (1090, 12.856730557151318), (1100, 12.587072531750731), (1110, 12.62548101215072), (1120, 13.00767778827085), (1150, 13.418585910088826), (1160, 14.017482555382003), (1170, 14.03383981603806), (1180, 14.218918279408703), (1200, 14.486043443685181), (1210, 15.51032661709002), (1220, 16.376943291284185)]);
    // SELECT kaufmans_adaptive_moving_average(x, 4, 0) FROM a
    check("kaufmans_adaptive_moving_average", "4, 0", A, None, &[(1000, 4.666666666666668), (1010, 10.833333333333334), (1020, 11.25), (1030, 10.836587404748274), (1050, 9.90828419470459), (1060, 10.282031937191105), (1070, 10.616888135194111), (1090, 11.89827118621895), (1100, 11.90327356232541), (1110, 11.96027017262229), (1120, 12.423836733754653), (1150, 12.558625541142247), (1160, 13.582104985441106), (1170, 13.587348189110953), (1180, 13.684051600027187), (1200, 14.202034719355979), (1210, 14.344310213740146), (1220, 15.917589588673549)]);
    // SELECT kaufmans_adaptive_moving_average(x, 1) FROM a
    check("kaufmans_adaptive_moving_average", "1", A, None, &[(1010, 10.833333333333334), (1020, 10.835067637877211), (1030, 10.352815354376228), (1050, 11.084897419097905), (1060, 12.15827634394328), (1070, 12.163861041783266), (1090, 12.169422494262836), (1100, 12.205234719034909), (1110, 13.002908177241617), (1120, 14.223837876245343), (1150, 14.568798820136301), (1160, 15.42711045563128), (1170, 14.903950253128489), (1180, 15.835527918404717), (1200, 17.019737732447066), (1210, 17.45540985135948), (1220, 18.253005472977488)]);
    // SELECT kaufmans_adaptive_moving_average(i, 3, -1) FROM b
    check("kaufmans_adaptive_moving_average", "3, -1", B, None, &[(1030, 4.0), (1040, 4.725244536940687), (1050, 7.069580298300382), (1060, 7.064685426529812), (1070, 7.062472854372964), (1080, 7.29082420808447), (1090, 8.096120528575888), (1100, 10.15606127538314), (1110, 10.42647671783637), (1120, 10.377683924194942), (1130, 10.446751188158252)]);
    // SELECT kaufmans_adaptive_moving_average(x, 5, 0) FROM s
    check("kaufmans_adaptive_moving_average", "5, 0", SHORT, None, &[(1000, 1.1111111111111114), (1010, 2.7222222222222223), (1020, 2.9315897791652215)]);
    // SELECT kaufmans_adaptive_moving_average(x, 2) FROM zero
    check("kaufmans_adaptive_moving_average", "2", ZERO, None, &[(1020, 0.0), (1030, 0.0), (1040, 0.0)]);
    // SELECT kaufmans_adaptive_moving_average(mean(x), 3) FROM a WHERE time >= 1000s AND time < 1240s GROUP BY time(20s)
    check("kaufmans_adaptive_moving_average", "3", A_MEAN_20S, Some(20), &[(1060, 12.425902373641996), (1080, 12.903279096467775), (1100, 12.94347956497085), (1120, 13.691106236529084), (1140, 13.813166746861505), (1160, 14.096344505474253), (1180, 14.428503500765013), (1200, 16.126946389313897), (1220, 17.514970216285498)]);
    // SELECT kaufmans_adaptive_moving_average(mean(x), 4, 2) FROM hw WHERE time >= 1000s AND time < 1280s GROUP BY time(10s)
    check("kaufmans_adaptive_moving_average", "4, 2", HW_MEAN_10S, Some(10), &[(1020, 19.085194860805128), (1030, 19.13439510618784), (1040, 23.96250368679819), (1050, 23.93651518576841), (1060, 23.83260746164468), (1070, 23.995298101333248), (1080, 24.13912973205966), (1100, 24.144985278696243), (1110, 25.092534602115002), (1120, 25.624645311773605), (1130, 25.650580203809607), (1140, 25.73757165541831), (1150, 26.2717609340802), (1160, 26.748657641475624), (1190, 29.258668323064704), (1200, 34.16014906836928), (1210, 34.202844315029424), (1220, 34.182414474593166), (1230, 34.42987589260652), (1240, 34.533076068990376), (1250, 34.97054123462158), (1260, 35.036011837405546), (1270, 35.27464596179106)]);
    }

    /// The oscillator without warm-up (the default and `'none'`) and smoothed (`'exponential'`, `'simple'`).
    #[test]
    #[rustfmt::skip]
    fn chande_momentum_oscillator_answers_as_influxdb() {
    // SELECT chande_momentum_oscillator(x, 3) FROM a
    check("chande_momentum_oscillator", "3", A, None, &[(1020, 100.0), (1030, -33.33333333333333), (1050, 20.0), (1060, 42.857142857142854), (1070, 100.0), (1090, 100.0), (1100, -100.0), (1110, 16.666666666666664), (1120, 47.368421052631575), (1150, 64.70588235294117), (1160, 62.5), (1170, -33.33333333333333), (1180, 30.76923076923077), (1200, 30.76923076923077), (1210, 78.94736842105263), (1220, 69.23076923076923)]);
    // SELECT chande_momentum_oscillator(x, 4, 0) FROM a
    check("chande_momentum_oscillator", "4, 0", A, None, &[(1000, 0.0), (1010, 100.0), (1020, 100.0), (1030, -33.33333333333333), (1050, 33.33333333333333), (1060, 42.857142857142854), (1070, 42.857142857142854), (1090, 100.0), (1100, 9.090909090909092), (1110, 16.666666666666664), (1120, 47.368421052631575), (1150, 27.27272727272727), (1160, 73.91304347826086), (1170, 4.0), (1180, 17.24137931034483), (1200, 43.75), (1210, 21.428571428571427), (1220, 83.33333333333334)]);
    // SELECT chande_momentum_oscillator(x, 2) FROM a
    check("chande_momentum_oscillator", "2", A, None, &[(1010, 100.0), (1020, 100.0), (1030, -100.0), (1050, 20.0), (1060, 100.0), (1070, 100.0), (1090, 0.0), (1100, -100.0), (1110, 16.666666666666664), (1120, 100.0), (1150, 40.0), (1160, 33.33333333333333), (1170, -20.0), (1180, 10.0), (1200, 100.0), (1210, 50.0), (1220, 42.857142857142854)]);
    // SELECT chande_momentum_oscillator(x, 3, -1, 'none') FROM a
    check("chande_momentum_oscillator", "3, -1, 'none'", A, None, &[(1020, 100.0), (1030, -33.33333333333333), (1050, 20.0), (1060, 42.857142857142854), (1070, 100.0), (1090, 100.0), (1100, -100.0), (1110, 16.666666666666664), (1120, 47.368421052631575), (1150, 64.70588235294117), (1160, 62.5), (1170, -33.33333333333333), (1180, 30.76923076923077), (1200, 30.76923076923077), (1210, 78.94736842105263), (1220, 69.23076923076923)]);
    // SELECT chande_momentum_oscillator(x, 3, 2, 'exponential') FROM a
    check("chande_momentum_oscillator", "3, 2, 'exponential'", A, None, &[(1020, 100.0), (1030, 33.33333333333333), (1050, 58.974358974358964), (1060, 70.37037037037037), (1070, 70.37037037037037), (1090, 70.37037037037037), (1100, -4.353476283300845), (1110, 45.679012345679006), (1120, 68.40293148394078), (1150, 32.713142236951754), (1160, 58.865903651572225), (1170, -15.249828949218843), (1180, 37.880934525870316), (1200, 54.89420860691043), (1210, 36.237703037648714), (1220, 56.07675162179409)]);
    // SELECT chande_momentum_oscillator(x, 3, -1, 'simple') FROM a
    check("chande_momentum_oscillator", "3, -1, 'simple'", A, None, &[(1030, 76.47058823529412), (1050, 82.6086956521739), (1060, 86.20689655172416), (1070, 86.20689655172413), (1090, 86.20689655172413), (1100, 17.711171662125352), (1110, 53.574173712528825), (1120, 71.92656286311876), (1150, 37.08885388677847), (1160, 60.87357381583496), (1170, -13.072042968902025), (1180, 38.63759734540377), (1200, 55.345763076592014), (1210, 36.73077742610397), (1220, 56.34679044299915)]);
    // SELECT chande_momentum_oscillator(i, 4) FROM b
    check("chande_momentum_oscillator", "4", B, None, &[(1030, 33.33333333333333), (1040, 71.42857142857143), (1050, 71.42857142857143), (1060, 33.33333333333333), (1070, 33.33333333333333), (1080, 40.0), (1090, 11.11111111111111), (1100, 80.0), (1110, 63.63636363636363), (1120, -27.27272727272727), (1130, 29.411764705882355)]);
    // SELECT chande_momentum_oscillator(x, 5, 0) FROM s
    check("chande_momentum_oscillator", "5, 0", SHORT, None, &[(1000, 0.0), (1010, 100.0), (1020, -60.0)]);
    // SELECT chande_momentum_oscillator(x, 2, 0, 'exponential') FROM zero
    check("chande_momentum_oscillator", "2, 0, 'exponential'", ZERO, None, &[(1000, f64::NAN), (1010, f64::NAN), (1020, f64::NAN), (1030, f64::NAN), (1040, f64::NAN)]);
    // SELECT chande_momentum_oscillator(mean(x), 3) FROM a WHERE time >= 1000s AND time < 1240s GROUP BY time(20s)
    check("chande_momentum_oscillator", "3", A_MEAN_20S, Some(20), &[(1040, 60.0), (1060, 77.77777777777779), (1080, 100.0), (1100, 60.0), (1120, 75.0), (1140, 40.0), (1160, 60.0), (1180, 45.45454545454545), (1200, 100.0), (1220, 100.0)]);
    // SELECT chande_momentum_oscillator(mean(x), 4, 2, 'simple') FROM hw WHERE time >= 1000s AND time < 1280s GROUP BY time(10s)
    check("chande_momentum_oscillator", "4, 2, 'simple'", HW_MEAN_10S, Some(10), &[(1020, 60.69222104652352), (1030, 67.47168319069004), (1040, 69.50131094573477), (1050, 51.72702632223599), (1060, 29.145937074711725), (1070, 50.75418804342237), (1080, 53.91048131207089), (1100, 19.43462619073559), (1110, 42.51929324321122), (1120, 48.86945525368484), (1130, 21.42757178928574), (1140, 5.523494367992024), (1150, 43.83628285550081), (1160, 48.6734078674251), (1190, 56.69257725985797), (1200, 67.2965392454293), (1210, 12.360430246610354), (1220, -9.44799651129035), (1230, 39.283474345701926), (1240, 42.40353334196143), (1250, 24.06096885273971), (1260, -12.793273830854607), (1270, 34.51726614200763)]);
    }

    /// Forecasts with and without the fit, with seasons (S >= 2) and without (S = 0, 1), over missing intervals, an offset grid, integers, and a season longer than the series (nothing).
    #[test]
    #[rustfmt::skip]
    fn holt_winters_answers_as_influxdb() {
    // SELECT holt_winters(mean(x), 5, 4) FROM hw WHERE time >= 1000s AND time < 1280s GROUP BY time(10s)
    check("holt_winters", "5, 4", HW_MEAN_10S, Some(10), &[(1280, 45.1658324786124), (1290, 40.27247765844534), (1300, 37.642698128162145), (1310, 45.206939515909355), (1320, 46.500758899317574)]);
    // SELECT holt_winters_with_fit(mean(x), 5, 4) FROM hw WHERE time >= 1000s AND time < 1280s GROUP BY time(10s)
    check("holt_winters_with_fit", "5, 4", HW_MEAN_10S, Some(10), &[(1000, 23.539), (1010, 20.465698038781934), (1020, 18.977873611504357), (1030, 24.209009718574077), (1040, 25.003762655402014), (1050, 23.113359725061194), (1060, 21.47176313368218), (1070, 27.124516822224905), (1080, 28.22334766937744), (1090, 26.139823504453634), (1100, 24.383992691443446), (1110, 30.603063080303883), (1120, 31.9265477055833), (1130, 29.444659257044474), (1140, 27.5570221338741), (1150, 34.34098203159584), (1160, 35.82180796383952), (1170, 32.803028006909415), (1180, 30.748881906621826), (1190, 37.999118804340235), (1200, 39.558170412913356), (1210, 35.91743357605779), (1220, 33.671186964785655), (1230, 41.22591853877792), (1240, 42.77702232682571), (1250, 38.48979244337718), (1260, 36.04462950994048), (1270, 43.706935582942265), (1280, 45.1658324786124), (1290, 40.27247765844534), (1300, 37.642698128162145), (1310, 45.206939515909355), (1320, 46.500758899317574)]);
    // SELECT holt_winters(mean(x), 3, 0) FROM hw WHERE time >= 1000s AND time < 1280s GROUP BY time(10s)
    check("holt_winters", "3, 0", HW_MEAN_10S, Some(10), &[(1280, 42.104371583561644), (1290, 42.74736130154787), (1300, 43.379767624273434)]);
    // SELECT holt_winters_with_fit(mean(x), 3, 1) FROM hw WHERE time >= 1000s AND time < 1280s GROUP BY time(10s)
    check("holt_winters_with_fit", "3, 1", HW_MEAN_10S, Some(10), &[(1000, 23.539), (1010, 18.923451006090716), (1020, 20.593620099353323), (1030, 21.80566650414306), (1040, 22.87917907700778), (1050, 23.887217859910006), (1060, 24.855882141685292), (1070, 25.79685569665183), (1080, 26.71604093533448), (1090, 27.6166469703137), (1100, 28.500519043286108), (1110, 29.368778437994678), (1120, 30.222151376358443), (1130, 31.061144613117715), (1140, 31.886141265171076), (1150, 32.6974537799221), (1160, 33.495353434763985), (1170, 34.280086844885936), (1180, 35.05188523376616), (1190, 35.810969657212155), (1200, 36.5575539601348), (1210, 37.291846461272804), (1220, 38.01405092357784), (1230, 38.72436712312476), (1240, 39.4229911921658), (1250, 40.11011583494425), (1260, 40.785930471657075), (1270, 41.45062134168317), (1280, 42.104371583561644), (1290, 42.74736130154787), (1300, 43.379767624273434)]);
    // SELECT holt_winters(mean(x), 4, 2) FROM a WHERE time >= 1000s AND time < 1240s GROUP BY time(20s)
    check("holt_winters", "4, 2", A_MEAN_20S, Some(20), &[(1240, 20.096590632371775), (1260, 20.4537799467825), (1280, 21.673144782158676), (1300, 22.00545744417912)]);
    // SELECT holt_winters_with_fit(mean(x), 4, 3) FROM a WHERE time >= 1000s AND time < 1240s GROUP BY time(20s)
    check("holt_winters_with_fit", "4, 3", A_MEAN_20S, Some(20), &[(1000, 10.875), (1020, 11.778946952093232), (1040, 12.24224648060469), (1060, 12.776166942154365), (1080, 13.656308038808737), (1100, 14.194466410757139), (1120, 14.838634606402639), (1140, 16.000613598357916), (1160, 16.803905000003244), (1180, 17.73911271576698), (1200, 19.410384401555056), (1220, 20.673544663913287), (1240, 22.11410007036207), (1260, 24.681048180801586), (1280, 26.712640485101623), (1300, 29.000098990268157)]);
    // SELECT holt_winters_with_fit(mean(x), 3, 2) FROM hw WHERE time >= 1000s AND time < 1280s GROUP BY time(20s, 5s)
    check("holt_winters_with_fit", "3, 2", HW_MEAN_20S_OFFSET_5S, Some(20), &[(985, 23.539), (1005, 18.672278550579232), (1025, 24.09016324028083), (1045, 21.825454071124515), (1065, 27.112692942497606), (1085, 25.15893232358774), (1105, 30.9326750135436), (1125, 28.673654854725342), (1145, 35.07852723061419), (1165, 32.19999630017817), (1185, 39.13881819514341), (1205, 35.38329086924761), (1225, 42.43601527186474), (1245, 37.54027543703255), (1265, 43.74425374715861), (1285, 37.40396004507623), (1305, 40.87391856064037), (1325, 32.58684281361275)]);
    // SELECT holt_winters(mean(x), 2, 0) FROM hw WHERE time >= 1000s AND time < 1280s GROUP BY time(20s, 5s)
    check("holt_winters", "2, 0", HW_MEAN_20S_OFFSET_5S, Some(20), &[(1285, 44.18992178993537), (1305, 45.80904226512541)]);
    // SELECT holt_winters_with_fit(max(i), 3, 0) FROM hwi WHERE time >= 1000s AND time < 1100s GROUP BY time(10s)
    check("holt_winters_with_fit", "3, 0", HWI_MAX_10S, Some(10), &[(1000, 5.0), (1010, 6.010218699018706), (1020, 7.318506567839916), (1030, 8.661498308441047), (1040, 9.996490151272152), (1050, 11.319084122785249), (1060, 12.633038987901418), (1070, 13.942996857937738), (1080, 15.25281569984203), (1090, 16.565369947414677), (1100, 17.882710370129804), (1110, 19.206273341447684), (1120, 20.537058977925163)]);
    // SELECT holt_winters(max(i), 4, 3) FROM hwi WHERE time >= 1000s AND time < 1100s GROUP BY time(10s)
    check("holt_winters", "4, 3", HWI_MAX_10S, Some(10), &[(1100, 17.785414435372154), (1110, 17.668142634662694), (1120, 17.796170155158116), (1130, 19.059064979713153)]);
    // SELECT holt_winters(mean(x), 2, 30) FROM hw WHERE time >= 1000s AND time < 1280s GROUP BY time(10s)
    check("holt_winters", "2, 30", HW_MEAN_10S, Some(10), &[]);
    }

    /// In the statement's order: `ORDER BY time DESC` feeds the points
    /// latest first.
    #[test]
    fn descending_points_are_taken_as_they_come() {
        // SELECT exponential_moving_average(x, 3) FROM s ORDER BY time DESC
        let reversed: Vec<(i64, f64)> = SHORT.iter().rev().copied().collect();
        check(
            "exponential_moving_average",
            "3",
            &reversed,
            None,
            &[(1000, 2.4166666666666665)],
        );
        // SELECT holt_winters(mean(x), 2, 0) FROM hw WHERE time >= 1000s
        // AND time < 1280s GROUP BY time(10s) ORDER BY time DESC
        let reversed: Vec<(i64, f64)> = HW_MEAN_10S.iter().rev().copied().collect();
        check("holt_winters", "2, 0", &reversed, Some(10), &[]);
    }

    #[test]
    fn arguments_are_checked_with_influxdbs_messages() {
        // Each message is InfluxDB 1.6.7's for `SELECT name(mean(x), args)
        // FROM a … GROUP BY time(20s)`.
        for (name, args, message) in [
            ("exponential_moving_average", "", "invalid number of arguments for exponential_moving_average, expected at least 2 but no more than 4, got 1"),
            ("exponential_moving_average", "2, 1, 'simple', 5", "invalid number of arguments for exponential_moving_average, expected at least 2 but no more than 4, got 5"),
            ("exponential_moving_average", "2.5", "exponential_moving_average period must be an integer"),
            ("exponential_moving_average", "0", "exponential_moving_average period must be greater than or equal to 1"),
            ("exponential_moving_average", "-3", "exponential_moving_average period must be greater than or equal to 1"),
            ("exponential_moving_average", "2, -2", "exponential_moving_average hold period must be greater than or equal to 0"),
            ("exponential_moving_average", "2, 'a'", "exponential_moving_average hold period must be an integer"),
            ("triple_exponential_derivative", "2, 0", "triple_exponential_derivative hold period must be greater than or equal to 1"),
            ("exponential_moving_average", "2, 1, 'none'", "exponential_moving_average warmup type must be one of: 'exponential' 'simple'"),
            ("exponential_moving_average", "2, 1, 3", "exponential_moving_average warmup type must be a string"),
            ("kaufmans_efficiency_ratio", "2, 1, 'simple'", "invalid number of arguments for kaufmans_efficiency_ratio, expected at least 2 but no more than 3, got 4"),
            ("chande_momentum_oscillator", "2, 1, 'bad'", "chande_momentum_oscillator warmup type must be one of: 'none' 'exponential' 'simple'"),
            ("holt_winters", "2", "invalid number of arguments for holt_winters, expected 3, got 2"),
            ("holt_winters", "0, 1", "second arg to holt_winters must be greater than 0, got 0"),
            ("holt_winters", "2.0, 1", "expected integer argument as second arg in holt_winters"),
            ("holt_winters", "2, -1", "third arg to holt_winters cannot be negative, got -1"),
            ("holt_winters", "2, 1.5", "expected integer argument as third arg in holt_winters"),
            // Not InfluxDB's: it accepts these, then fails on the first
            // point (an index out of range) or runs out of memory.
            ("chande_momentum_oscillator", "1", "chande_momentum_oscillator period must be greater than or equal to 2 without a warmup type"),
            ("holt_winters", "1000001, 1", "holt_winters forecasts at most 1000000 intervals, got 1000001"),
        ] {
            assert_eq!(technical(name, args), Err(message.to_string()), "{name}({args})");
        }
        let field = Expr::Var {
            name: "x".into(),
            cast: None,
        };
        let args = [field, Expr::Integer(2), Expr::Integer(1)];
        assert_eq!(
            Technical::named("holt_winters", &args),
            Some(Err(
                "must use aggregate function with holt_winters".to_string()
            ))
        );
        assert_eq!(Technical::named("moving_average", &args), None);
        let ema = technical("double_exponential_moving_average", "2, -1, 'simple'").unwrap();
        assert_eq!(ema.name(), "double_exponential_moving_average");
        let cmo = technical("chande_momentum_oscillator", "1, 0, 'simple'").unwrap();
        assert_eq!(cmo.name(), "chande_momentum_oscillator");
        let forecast = technical("holt_winters_with_fit", "1, 0").unwrap();
        assert_eq!(forecast.name(), "holt_winters_with_fit");
    }
}
