//! A request's text read as PromQL: the query (parsed by `promql-parser`,
//! bounded, and held to the language of Prometheus 2.x, whose answers ours
//! follow), and the API's times and durations.

use std::sync::Once;
use std::time::Duration;

use promql_parser::parser::value::ValueType;
use promql_parser::parser::{self, Expr, Function};

use crate::error::Error;

/// The longest query accepted, in bytes.
pub const MAX_QUERY_LEN: usize = 64 * 1024;

/// How deeply a query's expressions may nest (parentheses, calls, operators
/// chained): evaluation recurses once per level.
pub const MAX_DEPTH: usize = 200;

/// The functions of Prometheus 2.x (2.42, the version the answers are
/// compared with). The parser knows Prometheus 3's; those are refused as
/// 2.x refuses them, as unknown.
const FUNCTIONS: &[&str] = &[
    "abs",
    "absent",
    "absent_over_time",
    "acos",
    "acosh",
    "asin",
    "asinh",
    "atan",
    "atanh",
    "avg_over_time",
    "ceil",
    "changes",
    "clamp",
    "clamp_max",
    "clamp_min",
    "cos",
    "cosh",
    "count_over_time",
    "day_of_month",
    "day_of_week",
    "day_of_year",
    "days_in_month",
    "deg",
    "delta",
    "deriv",
    "exp",
    "floor",
    "histogram_count",
    "histogram_fraction",
    "histogram_quantile",
    "histogram_sum",
    "holt_winters",
    "hour",
    "idelta",
    "increase",
    "irate",
    "label_join",
    "label_replace",
    "last_over_time",
    "ln",
    "log10",
    "log2",
    "max_over_time",
    "min_over_time",
    "minute",
    "month",
    "pi",
    "predict_linear",
    "present_over_time",
    "quantile_over_time",
    "rad",
    "rate",
    "resets",
    "round",
    "scalar",
    "sgn",
    "sin",
    "sinh",
    "sort",
    "sort_desc",
    "sqrt",
    "stddev_over_time",
    "stdvar_over_time",
    "sum_over_time",
    "tan",
    "tanh",
    "time",
    "timestamp",
    "vector",
    "year",
];

/// A parsed query, checked: the API's parameter, its errors named as
/// Prometheus's HTTP API names them (`invalid parameter "query": …`).
pub fn parse_query(query: &str) -> Result<Expr, Error> {
    parse_expr(query)
        .map_err(|reason| Error::BadData(format!("invalid parameter \"query\": {reason}")))
}

/// An expression parsed and checked as [`parse_query`] does, its error the
/// bare reason: for callers that name where the expression came from
/// themselves (a rule file's line, as promtool does).
pub fn parse_expr(query: &str) -> Result<Expr, String> {
    if query.len() > MAX_QUERY_LEN {
        return Err(format!(
            "the query is {} bytes long, more than the {MAX_QUERY_LEN} accepted",
            query.len()
        ));
    }
    static HOLT_WINTERS: Once = Once::new();
    HOLT_WINTERS.call_once(|| {
        // Prometheus 3 renamed it double_exponential_smoothing; 2.x's name.
        let f = Function::new(
            "holt_winters",
            vec![ValueType::Matrix, ValueType::Scalar, ValueType::Scalar],
            0,
            ValueType::Vector,
            false,
        );
        parser::register_extra_functions(vec![f]).expect("holt_winters is not a built-in");
    });
    // The parser's tree is built and dropped recursively: a query nested
    // past the bound is refused from its text before it is parsed.
    if text_nesting(query) > 4 * MAX_DEPTH {
        return Err(too_deep());
    }
    // The grammar's actions panic on some literals (a number written as a
    // duration too large for one, found by the `promql` fuzz target): a
    // query that cannot be parsed, not a panic of the request's task.
    let expr = match std::panic::catch_unwind(|| parser::parse(query)) {
        Ok(parsed) => parsed?,
        Err(panic) => {
            let why = chingest_codecs::panic_message(&*panic).unwrap_or("the parser failed");
            return Err(format!("the query cannot be parsed: {why}"));
        }
    };
    check(&expr, 0)?;
    Ok(expr)
}

fn too_deep() -> String {
    format!("the query nests more than {MAX_DEPTH} levels deep")
}

/// How deeply `query` nests brackets, counting a run of binary operators
/// as nesting too (each is a level of the tree).
fn text_nesting(query: &str) -> usize {
    let (mut depth, mut deepest, mut operators) = (0usize, 0usize, 0usize);
    let mut in_string: Option<char> = None;
    let mut chars = query.chars();
    while let Some(c) = chars.next() {
        if let Some(quote) = in_string {
            match c {
                '\\' => {
                    chars.next();
                }
                _ if c == quote => in_string = None,
                _ => {}
            }
            continue;
        }
        match c {
            '"' | '\'' | '`' => in_string = Some(c),
            '(' | '[' | '{' => depth += 1,
            ')' | ']' | '}' => depth = depth.saturating_sub(1),
            '+' | '-' | '*' | '/' | '%' | '^' | '<' | '>' | '=' | '!' => operators += 1,
            _ => {}
        }
        deepest = deepest.max(depth);
    }
    deepest + operators / 2
}

/// Refuses what Prometheus 2.x does not have and bounds the tree's depth.
fn check(expr: &Expr, depth: usize) -> Result<(), String> {
    if depth > MAX_DEPTH {
        return Err(too_deep());
    }
    let unsupported = |what: &str| Err(format!("{what} is not supported"));
    match expr {
        Expr::Aggregate(agg) => {
            let op = agg.op.to_string();
            if op == "limitk" || op == "limit_ratio" {
                return unsupported(&op);
            }
            if let Some(param) = &agg.param {
                check(param, depth + 1)?;
            }
            check(&agg.expr, depth + 1)
        }
        Expr::Unary(unary) => check(&unary.expr, depth + 1),
        Expr::Binary(binary) => {
            if let Some(modifier) = &binary.modifier {
                let fill = &modifier.fill_values;
                if fill.lhs.is_some() || fill.rhs.is_some() {
                    return unsupported("fill()");
                }
            }
            check(&binary.lhs, depth + 1)?;
            check(&binary.rhs, depth + 1)
        }
        Expr::Paren(paren) => check(&paren.expr, depth + 1),
        Expr::Subquery(sub) => {
            check_offset(sub.offset.as_ref())?;
            check_duration(Some(sub.range))?;
            check_duration(sub.step)?;
            check(&sub.expr, depth + 1)
        }
        Expr::NumberLiteral(_) | Expr::StringLiteral(_) => Ok(()),
        Expr::VectorSelector(vs) => check_selector(vs),
        Expr::MatrixSelector(ms) => {
            check_duration(Some(ms.range))?;
            check_selector(&ms.vs)
        }
        Expr::Call(call) => {
            let name = call.func.name;
            if !FUNCTIONS.contains(&name) {
                return Err(format!("unknown function with name {name:?}"));
            }
            for arg in &call.args.args {
                check(arg, depth + 1)?;
            }
            Ok(())
        }
        Expr::Extension(_) => unsupported("an extension expression"),
    }
}

fn check_selector(vs: &parser::VectorSelector) -> Result<(), String> {
    check_offset(vs.offset.as_ref())?;
    if vs.matchers.or_matchers.is_empty() {
        Ok(())
    } else {
        Err("`or` between label matchers is not supported".into())
    }
}

/// Refuses a zero duration (an offset, a range, a subquery's step), which
/// the parser takes written as a number (`offset 0`, `x[0]`) but not as a
/// duration (`0s`), and prints as the duration: a query that read would be
/// formatted as one that does not (Prometheus 2 refuses both).
///
/// Also refuses a duration past Prometheus's range (`i64` nanoseconds,
/// some 292 years), which the parser reads without complaint but prints
/// in days it reads back wrong (found by the `promql` fuzz target).
fn check_duration(duration: Option<std::time::Duration>) -> Result<(), String> {
    match duration {
        Some(d) if d.is_zero() => Err("duration must be greater than 0".into()),
        Some(d) if d > std::time::Duration::from_nanos(i64::MAX as u64) => {
            Err("duration out of range".into())
        }
        _ => Ok(()),
    }
}

fn check_offset(offset: Option<&parser::Offset>) -> Result<(), String> {
    check_duration(offset.map(|(parser::Offset::Pos(d) | parser::Offset::Neg(d))| *d))
}

/// A time parameter (`time`, `start`, `end`): RFC 3339 or Unix seconds
/// with a fraction; in ms (finer digits are dropped, as Prometheus does).
pub fn parse_time(name: &str, text: &str) -> Result<i64, Error> {
    let bad = || {
        Error::BadData(format!(
            "invalid parameter {name:?}: cannot parse {text:?} to a valid timestamp"
        ))
    };
    if let Ok(seconds) = text.parse::<f64>() {
        if !seconds.is_finite() || seconds.abs() > 9.2e15 {
            return Err(bad());
        }
        // Rounded to ms as Prometheus does (`math.Modf` and rounding of the
        // fraction to three digits).
        let whole = seconds.trunc();
        let millis = ((seconds - whole) * 1000.0).round();
        return Ok(whole as i64 * 1000 + millis as i64);
    }
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp_millis())
        .map_err(|_| bad())
}

/// A duration parameter (`step`, `timeout`, a lookback): Prometheus's
/// duration (`1h30m`, `15s`, `500ms`) or seconds with a fraction.
pub fn parse_duration(name: &str, text: &str) -> Result<Duration, Error> {
    let bad = || {
        Error::BadData(format!(
            "invalid parameter {name:?}: cannot parse {text:?} to a valid duration"
        ))
    };
    if let Ok(seconds) = text.parse::<f64>() {
        if !seconds.is_finite() || !(0.0..=9.2e9).contains(&seconds) {
            return Err(bad());
        }
        return Ok(Duration::from_millis((seconds * 1000.0).round() as u64));
    }
    prometheus_duration(text).ok_or_else(bad)
}

/// `1y2w3d4h5m6s7ms` (each unit at most once, in this order).
fn prometheus_duration(text: &str) -> Option<Duration> {
    const UNITS: [(&str, u64); 8] = [
        ("y", 365 * 86_400_000),
        ("w", 7 * 86_400_000),
        ("d", 86_400_000),
        ("h", 3_600_000),
        ("ms", 1),
        ("m", 60_000),
        ("s", 1000),
        ("", 0),
    ];
    const ORDER: [&str; 7] = ["y", "w", "d", "h", "m", "s", "ms"];
    if text.is_empty() {
        return None;
    }
    let (mut rest, mut total, mut last) = (text, 0u64, 0usize);
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        if digits == 0 {
            return None;
        }
        let n: u64 = rest[..digits].parse().ok()?;
        rest = &rest[digits..];
        let (unit, ms) = UNITS
            .iter()
            .find(|(u, _)| !u.is_empty() && rest.starts_with(u))?;
        let place = ORDER.iter().position(|u| u == unit)? + 1;
        if place <= last {
            return None;
        }
        last = place;
        total = total.checked_add(n.checked_mul(*ms)?)?;
        rest = &rest[unit.len()..];
    }
    Some(Duration::from_millis(total))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn queries_of_prometheus_3_and_deep_nesting_are_refused() {
        assert!(parse_query("rate(x[5m])").is_ok());
        assert!(parse_query("holt_winters(x[5m], 0.5, 0.5)").is_ok());
        for query in [
            "mad_over_time(x[5m])",
            "limitk(2, x)",
            "sort_by_label(x, \"a\")",
        ] {
            let err = parse_query(query).unwrap_err();
            assert_eq!(err.error_type(), "bad_data", "{query}");
        }
        let deep = format!("{}1{}", "(".repeat(20_000), ")".repeat(20_000));
        let err = parse_query(&deep).unwrap_err().to_string();
        assert!(err.contains("nests"), "{err}");
        let chain = vec!["1"; 30_000].join("+");
        assert!(parse_query(&chain)
            .unwrap_err()
            .to_string()
            .contains("nests"));
        // Operators inside strings are no nesting.
        assert!(parse_query(&format!("x{{a=\"{}\"}}", "+".repeat(1000))).is_ok());
    }

    /// Found by the `promql` fuzz target (fuzz/seeds/promql/regression-zero-*):
    /// `offset 0` and `x[0]` read, and printed as `0s`, which does not.
    #[test]
    fn a_zero_duration_is_refused_however_it_is_written() {
        for query in [
            "x offset 0",
            "x offset 0s",
            "x[5m] offset -0",
            "x[5m:1m] offset 0",
            "x[0]",
            "x[0s]",
            "x[0:1m]",
            "rate(x[5m])[5m:0]",
        ] {
            let err = parse_query(query).unwrap_err().to_string();
            assert!(err.contains("greater than 0"), "{query}: {err}");
        }
        let formatted = crate::format_query("x offset 5").unwrap();
        assert_eq!(parse_query(&formatted).unwrap().to_string(), "x offset 5s");
    }

    /// fuzz/seeds/promql/regression-huge-duration: the parser panicked.
    #[test]
    fn a_duration_too_large_for_one_is_an_error() {
        let query = format!("rate(x[{}:1m])", "1".repeat(80));
        let err = parse_query(&query).unwrap_err().to_string();
        assert!(err.contains("cannot be parsed"), "{err}");
        // The parser still works after the panic it had.
        assert!(parse_query("rate(x[5m])").is_ok());
        // fuzz/seeds/promql/regression-days-out-of-range: read, and printed
        // in days that read back as hours.
        for query in [
            "rate(x[9000000000000000:1m])",
            "rate(x[5m:924097086y])",
            "x offset 300y",
        ] {
            let err = parse_query(query).unwrap_err().to_string();
            assert!(err.contains("out of range"), "{query}: {err}");
        }
        assert!(parse_query("x offset 290y").is_ok());
    }

    #[test]
    fn times_and_durations_read_as_prometheus_reads_them() {
        assert_eq!(
            parse_time("time", "1700000000.5").unwrap(),
            1_700_000_000_500
        );
        assert_eq!(
            parse_time("time", "2023-11-14T22:13:20.123456Z").unwrap(),
            1_700_000_000_123
        );
        assert!(parse_time("time", "abc").is_err());
        assert_eq!(
            parse_duration("step", "1h30m").unwrap(),
            Duration::from_secs(5400)
        );
        assert_eq!(
            parse_duration("step", "0.5").unwrap(),
            Duration::from_millis(500)
        );
        assert_eq!(
            parse_duration("step", "500ms").unwrap(),
            Duration::from_millis(500)
        );
        assert!(parse_duration("timeout", "1ns").is_err());
        assert!(parse_duration("step", "5s1m").is_err());
    }
}
