//! The evaluator against expectations written by hand, without the engine:
//! series loaded from text, queries evaluated over them by
//! `chingest_promql::evaluate_in_memory` (the selectors' matchers and the
//! evaluation the server's queries use), answers compared with the cases'.
//! The differential test against a real Prometheus (`crates/server/tests/
//! promql.rs`) covers generated queries over generated data; these cases
//! say what each function, operator and aggregation answers on data small
//! enough to work out by hand, and run with `cargo test -p chingest-promql`.
//!
//! The format of `testdata/*.test`, in the spirit of Prometheus's own test
//! files (the cases are ours):
//!
//! ```text
//! # A comment.
//! load 1m
//!   http_requests_total{job="api",instance="a"} 0+10x10
//!   gauge{x="1"} 1 -2.5 _ NaN Inf stale 3
//!
//! eval instant at 5m sum by (job) (rate(http_requests_total[5m]))
//!   {job="api"} 0.16666666666666666
//!
//! eval range from 0 to 10m step 5m http_requests_total{instance="a"}
//!   http_requests_total{job="api",instance="a"} 0 50 100
//!
//! eval_fail instant at 1m foo(
//!   expected_fail_message unexpected
//! ```
//!
//! - `load <interval>`: each following indented line is a series and its
//!   values, the first at 0, then one per interval: numbers (`NaN`, `Inf`,
//!   `-Inf` too), `a+bxN` or `a-bxN` (N + 1 values from `a` by `b`), `axN`
//!   (`a` N + 1 times), `_` (no sample), `_xN` (N without), `stale` (a stale
//!   marker). Loads add to what is loaded; `clear` forgets it all.
//! - `eval instant at <time>` / `eval range from <time> to <time> step <d>`,
//!   then the query; times and durations as the HTTP API reads them (`5m`,
//!   `90s`, `0`). The expected answer follows, a line per series: its labels
//!   (`{}` for none) and its value; a range's values one per step (`_` where
//!   a step has none; expansions as in `load`); a range vector of an instant
//!   query as `value@time` pairs; a scalar or a string (`"…"`) as a bare
//!   value. No lines: an empty answer. Series compare as a set, values
//!   within 1e-9 relative (1e-12 absolute near zero), NaN equal to NaN;
//!   `eval_ordered` also checks the series' order.
//! - `eval_fail …`: the query fails; an `expected_fail_message <text>`
//!   line asks that the error contain the text.
//! - `eval_skip …`: a case where we knowingly answer otherwise than
//!   Prometheus 2.42 (a `# differs:` comment above it says how); its
//!   expectation is Prometheus's, and it must still fail, so a fix shows.
//!
//! A blank line ends a case. Every failure is reported with its file and
//! line.

use std::fmt::Write as _;
use std::time::Duration;

use chingest_promql::{evaluate_in_memory, parse_duration, Labels, Options, Series, Value};

/// Relative tolerance of values.
const TOLERANCE: f64 = 1e-9;
/// Absolute tolerance: values this close to zero are zero.
const NEAR_ZERO: f64 = 1e-12;

/// Prometheus's stale marker.
const STALE_NAN: u64 = 0x7ff0_0000_0000_0002;

#[test]
fn selectors() {
    run("selectors.test");
}

#[test]
fn operators() {
    run("operators.test");
}

#[test]
fn aggregations() {
    run("aggregations.test");
}

#[test]
fn functions() {
    run("functions.test");
}

/// Runs every case of `testdata/<file>`; panics listing those that failed.
fn run(file: &str) {
    let path = format!("{}/tests/testdata/{file}", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{path}: {err}"));
    let mut failures = String::new();
    let mut cases = 0;
    let mut loaded: Vec<Series> = Vec::new();
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i].trim();
        let number = i + 1;
        i += 1;
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        // The indented lines under a command, up to a blank line.
        let mut body = Vec::new();
        while i < lines.len() && !lines[i].trim().is_empty() {
            if !lines[i].trim_start().starts_with('#') {
                body.push((i + 1, lines[i].trim()));
            }
            i += 1;
        }
        let outcome = if line == "clear" {
            loaded.clear();
            Ok(())
        } else if let Some(interval) = line.strip_prefix("load ") {
            load(&mut loaded, interval, &body)
        } else if line.starts_with("eval") {
            cases += 1;
            Case::parse(line, &body).and_then(|case| case.check(&loaded))
        } else {
            Err(format!("unknown command {line:?}"))
        };
        if let Err(err) = outcome {
            let _ = writeln!(failures, "{file}:{number}: {line}\n    {err}");
        }
    }
    assert!(cases > 0, "{file}: no cases");
    assert!(failures.is_empty(), "failed cases:\n{failures}");
}

/// Adds the series of a `load` to `loaded`.
fn load(loaded: &mut Vec<Series>, interval: &str, body: &[(usize, &str)]) -> Result<(), String> {
    let interval = ms(interval)?;
    for &(number, line) in body {
        let (labels, rest) = labels(line).map_err(|err| format!("line {number}: {err}"))?;
        let values = values(rest).map_err(|err| format!("line {number}: {err}"))?;
        let points = values
            .into_iter()
            .zip((0..).map(|k| k * interval))
            .filter_map(|(v, t)| v.map(|v| (t, v)));
        match loaded.iter_mut().find(|s| s.labels == labels) {
            Some(series) => {
                series.points.extend(points);
                series.points.sort_by_key(|p| p.0);
            }
            None => loaded.push(Series {
                labels,
                points: points.collect(),
            }),
        }
    }
    Ok(())
}

/// A time or duration in ms, as the HTTP API reads it.
fn ms(text: &str) -> Result<i64, String> {
    parse_duration("time", text.trim())
        .map(|d| d.as_millis() as i64)
        .map_err(|err| err.to_string())
}

/// A label set at the start of `line` (`name{a="1"}`, `name`, `{a="1"}`,
/// `{}`) and what follows it.
fn labels(line: &str) -> Result<(Labels, &str), String> {
    let name_end = line
        .find(|c: char| c == '{' || c.is_whitespace())
        .unwrap_or(line.len());
    let mut pairs = Vec::new();
    if name_end > 0 {
        pairs.push(("__name__".to_owned(), line[..name_end].to_owned()));
    }
    let mut rest = &line[name_end..];
    if let Some(inner) = rest.strip_prefix('{') {
        rest = inner.trim_start();
        loop {
            if let Some(after) = rest.strip_prefix('}') {
                rest = after;
                break;
            }
            let eq = rest.find('=').ok_or("a label without `=`")?;
            let name = rest[..eq].trim().to_owned();
            let (value, after) = quoted(rest[eq + 1..].trim_start())?;
            pairs.push((name, value));
            rest = after.trim_start();
            rest = rest.strip_prefix(',').unwrap_or(rest).trim_start();
        }
    }
    Ok((Labels::new(pairs), rest))
}

/// A double-quoted string with Go's escapes (`\"`, `\\`, `\n`) at the start
/// of `text`, and what follows it.
fn quoted(text: &str) -> Result<(String, &str), String> {
    let mut chars = text
        .strip_prefix('"')
        .ok_or("a value not in quotes")?
        .char_indices();
    let mut out = String::new();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return Ok((out, &text[i + 2..])),
            '\\' => match chars.next() {
                Some((_, 'n')) => out.push('\n'),
                Some((_, c)) => out.push(c),
                None => break,
            },
            c => out.push(c),
        }
    }
    Err(format!("unterminated string in {text:?}"))
}

/// Space-separated values and expansions; `None` where there is none.
fn values(text: &str) -> Result<Vec<Option<f64>>, String> {
    let mut out = Vec::new();
    for token in text.split_whitespace() {
        match token.split_once('x') {
            Some(("_", n)) => out.extend(std::iter::repeat_n(None, count(n)?)),
            Some((from, n)) => {
                // `a+b`, `a-b`, or `a`: the sign after the first character
                // that is not an exponent's.
                let at = from
                    .char_indices()
                    .skip(1)
                    .find(|&(i, c)| (c == '+' || c == '-') && !from[..i].ends_with(['e', 'E']))
                    .map(|(i, _)| i);
                let (start, by) = match at {
                    Some(i) => (number(&from[..i])?, number(&from[i..])?),
                    None => (number(from)?, 0.0),
                };
                out.extend((0..=count(n)?).map(|k| Some(start + by * k as f64)));
            }
            None if token == "_" => out.push(None),
            None if token == "stale" => out.push(Some(f64::from_bits(STALE_NAN))),
            None => out.push(Some(number(token)?)),
        }
    }
    Ok(out)
}

fn count(text: &str) -> Result<usize, String> {
    text.parse().map_err(|_| format!("bad count {text:?}"))
}

fn number(text: &str) -> Result<f64, String> {
    match text {
        "NaN" => Ok(f64::NAN),
        "Inf" | "+Inf" => Ok(f64::INFINITY),
        "-Inf" => Ok(f64::NEG_INFINITY),
        _ => text.parse().map_err(|_| format!("bad number {text:?}")),
    }
}

/// A series as a case writes it: its labels, its values (`None`: a step
/// without one), and their times when they are an instant query's range
/// vector's (else none).
type Written = (Labels, Vec<Option<f64>>, Vec<i64>);

/// One `eval` and what it should answer.
struct Case {
    query: String,
    /// (start, end, step) in ms; step 0 for an instant query.
    times: (i64, i64, i64),
    expected: Expected,
    ordered: bool,
    /// An `eval_skip`: Prometheus's answer, which ours is known not to be.
    differs: bool,
}

enum Expected {
    /// An error containing the text.
    Fail(Option<String>),
    Scalar(f64),
    String(String),
    Series(Vec<Written>),
}

impl Case {
    fn parse(line: &str, body: &[(usize, &str)]) -> Result<Case, String> {
        let (command, rest) = line.split_once(' ').ok_or("an eval without a query")?;
        let (ordered, differs, fail) = match command {
            "eval" => (false, false, false),
            "eval_ordered" => (true, false, false),
            "eval_fail" => (false, false, true),
            "eval_skip" => (false, true, false),
            other => return Err(format!("unknown command {other:?}")),
        };
        let words: Vec<&str> = rest.splitn(8, ' ').collect();
        let (times, query) = match words.as_slice() {
            ["instant", "at", at, query @ ..] => {
                let at = ms(at)?;
                ((at, at, 0), query.join(" "))
            }
            ["range", "from", from, "to", to, "step", step, query] => {
                ((ms(from)?, ms(to)?, ms(step)?), query.to_string())
            }
            _ => return Err("expected `instant at <time> <query>` or `range from <time> to <time> step <duration> <query>`".into()),
        };
        let expected = if fail {
            let message = match body {
                [] => None,
                [(_, line)] => Some(
                    line.strip_prefix("expected_fail_message ")
                        .ok_or("expected `expected_fail_message <text>`")?
                        .to_owned(),
                ),
                _ => return Err("more than one line under an eval_fail".into()),
            };
            Expected::Fail(message)
        } else {
            match body {
                [(_, line)] if line.starts_with('"') => Expected::String(quoted(line)?.0),
                [(_, line)] if number(line).is_ok() => Expected::Scalar(number(line)?),
                _ => {
                    let mut series = Vec::new();
                    for &(number, line) in body {
                        let (labels, rest) =
                            labels(line).map_err(|err| format!("line {number}: {err}"))?;
                        let (values, times) = expected_values(rest, times)
                            .map_err(|err| format!("line {number}: {err}"))?;
                        series.push((labels, values, times));
                    }
                    Expected::Series(series)
                }
            }
        };
        Ok(Case {
            query,
            times,
            expected,
            ordered,
            differs,
        })
    }

    /// Evaluates the case; the error says how the answer differs.
    fn check(&self, loaded: &[Series]) -> Result<(), String> {
        let outcome = self.compare(evaluate_in_memory(
            &self.query,
            loaded,
            self.times,
            Options {
                lookback: Duration::from_secs(300),
                timeout: Duration::from_secs(10),
            },
        ));
        match (self.differs, outcome) {
            (false, outcome) => outcome,
            (true, Err(_)) => Ok(()),
            (true, Ok(())) => Err("eval_skip: answers as Prometheus now; make it an eval".into()),
        }
    }

    fn compare(&self, answer: Result<Value, chingest_promql::Error>) -> Result<(), String> {
        let answer = match (&self.expected, answer) {
            (Expected::Fail(message), Err(err)) => {
                let err = err.to_string();
                return match message {
                    Some(m) if !err.contains(m.as_str()) => {
                        Err(format!("failed with {err:?}, not with {m:?}"))
                    }
                    _ => Ok(()),
                };
            }
            (_, Err(err)) => return Err(format!("failed: {err}")),
            (Expected::Fail(_), Ok(answer)) => {
                return Err(format!("answered {answer:?} instead of failing"))
            }
            (_, Ok(answer)) => answer,
        };
        let series: Vec<Written> = match (&self.expected, answer) {
            (Expected::Scalar(expected), Value::Scalar(_, v)) => {
                return close(v, *expected)
                    .then_some(())
                    .ok_or_else(|| format!("answered {v}, expected {expected}"));
            }
            (Expected::String(expected), Value::String(_, s)) => {
                return (s == *expected)
                    .then_some(())
                    .ok_or_else(|| format!("answered {s:?}, expected {expected:?}"));
            }
            (Expected::Series(_), Value::Vector(_, samples)) => samples
                .into_iter()
                .map(|s| (s.labels, vec![Some(s.value)], Vec::new()))
                .collect(),
            (Expected::Series(_), Value::Matrix(series)) => {
                series.into_iter().map(|s| self.points(s)).collect()
            }
            (_, answer) => return Err(format!("answered a {}", answer.result_type())),
        };
        let Expected::Series(expected) = &self.expected else {
            unreachable!("scalars and strings are compared above");
        };
        let show = |series: &[Written]| {
            series
                .iter()
                .map(|(l, v, t)| format!("\n      {l} {}", show_values(v, t)))
                .collect::<String>()
        };
        let differ = || {
            format!(
                "answered:{}\n    expected:{}",
                show(&series),
                show(expected)
            )
        };
        if series.len() != expected.len() {
            return Err(differ());
        }
        for (k, (labels, values, times)) in expected.iter().enumerate() {
            // By their pairs: an empty set made by `Labels::default()` is
            // not `==` one made by `Labels::new`.
            let found = match self.ordered {
                true => Some(&series[k]).filter(|s| s.0.pairs() == labels.pairs()),
                false => series.iter().find(|s| s.0.pairs() == labels.pairs()),
            };
            let Some((_, answered, answered_times)) = found else {
                return Err(differ());
            };
            let same = answered.len() == values.len()
                && answered.iter().zip(values).all(|(a, e)| match (a, e) {
                    (Some(a), Some(e)) => close(*a, *e),
                    (a, e) => a.is_none() && e.is_none(),
                })
                && answered_times == times;
            if !same {
                return Err(differ());
            }
        }
        Ok(())
    }

    /// A series of a matrix answer as the case writes it: a value per step
    /// of a range query, the points with their times of an instant one.
    fn points(&self, series: Series) -> Written {
        let (start, end, step) = self.times;
        if step == 0 {
            let (times, values) = series.points.into_iter().map(|(t, v)| (t, Some(v))).unzip();
            return (series.labels, values, times);
        }
        let mut values = vec![None; ((end - start) / step) as usize + 1];
        for (t, v) in series.points {
            values[((t - start) / step) as usize] = Some(v);
        }
        (series.labels, values, Vec::new())
    }
}

/// The values expected of a series: one per step of a range query (or the
/// instant query's one), or `value@time` pairs of a range vector.
fn expected_values(
    text: &str,
    (start, end, step): (i64, i64, i64),
) -> Result<(Vec<Option<f64>>, Vec<i64>), String> {
    if text.contains('@') {
        let mut values = Vec::new();
        let mut times = Vec::new();
        for pair in text.split_whitespace() {
            let (v, t) = pair
                .split_once('@')
                .ok_or(format!("{pair:?} is not value@time"))?;
            values.push(Some(number(v)?));
            times.push(ms(t)?);
        }
        return Ok((values, times));
    }
    let values = values(text)?;
    let steps = if step == 0 {
        1
    } else {
        (end - start) / step + 1
    };
    if values.len() as i64 != steps {
        return Err(format!("{} values for {steps} steps", values.len()));
    }
    Ok((values, Vec::new()))
}

fn show_values(values: &[Option<f64>], times: &[i64]) -> String {
    let mut out = String::new();
    for (k, v) in values.iter().enumerate() {
        match (v, times.get(k)) {
            (Some(v), Some(t)) => write!(out, " {v}@{}s", *t as f64 / 1000.0),
            (Some(v), None) => write!(out, " {v}"),
            (None, _) => write!(out, " _"),
        }
        .expect("a String takes writes");
    }
    out
}

/// Whether `a` is `b` within the tolerance (NaN is NaN).
fn close(a: f64, b: f64) -> bool {
    a == b
        || (a.is_nan() && b.is_nan())
        || (a - b).abs() <= TOLERANCE * a.abs().max(b.abs())
        || (a - b).abs() <= NEAR_ZERO
}
