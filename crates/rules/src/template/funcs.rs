//! The functions a template may call: Go's built-ins (`and`, `or`, `not`,
//! `len`, `index`, `print*`, comparisons, escapers) and Prometheus 2.42's
//! (`humanize*`, `printf`, `reReplaceAll`, `match`, `title`, `toUpper`,
//! `query`, …), each with the parameter types Go checks its arguments
//! against, and the humanize formats to the character.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::printf::{sprint, sprintf, sprintln};
use super::value::Value;
use crate::gofmt;

/// A parameter's Go type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Ty {
    /// `interface{}` or `reflect.Value`: anything.
    Any,
    Str,
    Samples,
    Sample,
}

impl Ty {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Ty::Any => "interface {}",
            Ty::Str => "string",
            Ty::Samples => "template.queryResult",
            Ty::Sample => "*template.sample",
        }
    }

    /// Whether `value` may be passed as this type.
    pub(crate) fn accepts(self, value: &Value) -> bool {
        matches!(
            (self, value),
            (Ty::Any, _)
                | (Ty::Str, Value::Str(_))
                | (Ty::Samples, Value::Samples(_))
                | (Ty::Sample, Value::Sample(_))
        )
    }
}

/// A function's signature: fixed parameters, then a variadic one.
pub(crate) struct Signature {
    pub(crate) params: &'static [Ty],
    pub(crate) variadic: Option<Ty>,
}

/// What a call needs besides its arguments: the external URL and the
/// query hook.
pub(crate) struct CallContext<'a> {
    pub(crate) external_url: &'a str,
    pub(crate) query: Option<&'a dyn super::value::Query>,
}

const ANY1: &[Ty] = &[Ty::Any];
const STR1: &[Ty] = &[Ty::Str];

/// The signature of `name`, `None` when it is not defined. `and` and `or`
/// are the executor's (they evaluate their arguments lazily).
pub(crate) fn signature(name: &str) -> Option<Signature> {
    let (params, variadic): (&'static [Ty], Option<Ty>) = match name {
        "and" | "or" => (ANY1, Some(Ty::Any)),
        "not" | "len" => (ANY1, None),
        "index" => (ANY1, Some(Ty::Any)),
        "slice" | "call" => (ANY1, Some(Ty::Any)),
        "print" | "println" | "html" | "js" | "urlquery" | "args" => (&[], Some(Ty::Any)),
        "printf" => (STR1, Some(Ty::Any)),
        "eq" => (ANY1, Some(Ty::Any)),
        "ne" | "lt" | "le" | "gt" | "ge" => (&[Ty::Any, Ty::Any], None),
        "query" | "safeHtml" | "title" | "toUpper" | "toLower" | "graphLink" | "tableLink"
        | "stripPort" | "stripDomain" | "parseDuration" => (STR1, None),
        "first" => (&[Ty::Samples], None),
        "label" => (&[Ty::Str, Ty::Sample], None),
        "value" | "strvalue" => (&[Ty::Sample], None),
        "reReplaceAll" => (&[Ty::Str, Ty::Str, Ty::Str], None),
        "match" => (&[Ty::Str, Ty::Str], None),
        "sortByLabel" => (&[Ty::Str, Ty::Samples], None),
        "humanize" | "humanize1024" | "humanizeDuration" | "humanizePercentage"
        | "humanizeTimestamp" | "toTime" => (ANY1, None),
        "pathPrefix" | "externalURL" => (&[], None),
        _ => return None,
    };
    Some(Signature { params, variadic })
}

/// Whether a template may name `name` (parse-time check).
pub(crate) fn is_defined(name: &str) -> bool {
    signature(name).is_some()
}

/// Calls `name` (not `and`/`or`) with arguments already checked against
/// its signature.
pub(crate) fn call(name: &str, args: Vec<Value>, ctx: &CallContext<'_>) -> Result<Value, String> {
    let str_arg = |i: usize| match &args[i] {
        Value::Str(s) => s.clone(),
        other => other.sprint(),
    };
    Ok(match name {
        "not" => Value::Bool(!args[0].truth()),
        "len" => Value::Int(match &args[0] {
            Value::Str(s) => s.len(),
            Value::Labels(m) => m.len(),
            Value::Samples(v) => v.len(),
            Value::Args(m) => m.len(),
            other => return Err(format!("len of type {}", other.type_name())),
        } as i64),
        "index" => index(&args[0], &args[1..])?,
        "slice" | "call" => return Err(format!("{name} is not supported in chingest's templates")),
        "print" => Value::Str(sprint(&args)),
        "println" => Value::Str(sprintln(&args)),
        "printf" => Value::Str(sprintf(&str_arg(0), &args[1..])),
        "html" => Value::Str(html_escape(&escaper_text(&args))),
        "js" => Value::Str(js_escape(&escaper_text(&args))),
        "urlquery" => Value::Str(query_escape(&escaper_text(&args))),
        "eq" => Value::Bool(eq(&args[0], &args[1..])?),
        "ne" => Value::Bool(!eq(&args[0], &args[1..])?),
        "lt" => Value::Bool(less(&args[0], &args[1])?),
        "le" => Value::Bool(less(&args[0], &args[1])? || eq(&args[0], &args[1..])?),
        "gt" => Value::Bool(!(less(&args[0], &args[1])? || eq(&args[0], &args[1..])?)),
        "ge" => Value::Bool(!less(&args[0], &args[1])?),
        "query" => match ctx.query {
            Some(query) => Value::Samples(Arc::new(query.query(&str_arg(0))?)),
            None => return Err("query is not available here: no rules are evaluated".into()),
        },
        "first" => match &args[0] {
            Value::Samples(v) if !v.is_empty() => Value::Sample(Arc::new(v[0].clone())),
            _ => return Err("first() called on vector with no elements".into()),
        },
        "label" => match &args[1] {
            Value::Sample(s) => Value::Str(s.labels.get(&str_arg(0)).cloned().unwrap_or_default()),
            _ => Value::Str(String::new()),
        },
        "value" => match &args[0] {
            Value::Sample(s) => Value::Float(s.value),
            _ => Value::Float(0.0),
        },
        "strvalue" => match &args[0] {
            Value::Sample(s) => Value::Str(s.labels.get("__value__").cloned().unwrap_or_default()),
            _ => Value::Str(String::new()),
        },
        "args" => Value::Args(Arc::new(
            args.into_iter()
                .enumerate()
                .map(|(i, v)| (format!("arg{i}"), v))
                .collect::<BTreeMap<_, _>>(),
        )),
        "reReplaceAll" => {
            // Go's regexp.MustCompile panics on a bad pattern; Prometheus
            // turns the panic into the expansion's error.
            let re = regex::Regex::new(&str_arg(0))
                .map_err(|e| format!("regexp: Compile({}): {e}", gofmt::quote(&str_arg(0))))?;
            Value::Str(
                re.replace_all(&str_arg(2), str_arg(1).as_str())
                    .into_owned(),
            )
        }
        "match" => {
            let re = regex::Regex::new(&str_arg(0)).map_err(|e| e.to_string())?;
            Value::Bool(re.is_match(&str_arg(1)))
        }
        "safeHtml" => Value::Str(str_arg(0)),
        "title" => Value::Str(title(&str_arg(0))),
        "toUpper" => Value::Str(str_arg(0).to_uppercase()),
        "toLower" => Value::Str(str_arg(0).to_lowercase()),
        "graphLink" => Value::Str(format!(
            "/graph?g0.expr={}&g0.tab=0",
            query_escape(&str_arg(0))
        )),
        "tableLink" => Value::Str(format!(
            "/graph?g0.expr={}&g0.tab=1",
            query_escape(&str_arg(0))
        )),
        "sortByLabel" => match &args[1] {
            Value::Samples(v) => {
                let label = str_arg(0);
                let mut sorted = (**v).clone();
                sorted.sort_by(|a, b| a.labels.get(&label).cmp(&b.labels.get(&label)));
                Value::Samples(Arc::new(sorted))
            }
            other => other.clone(),
        },
        "stripPort" => Value::Str(strip_port(&str_arg(0))),
        "stripDomain" => Value::Str(strip_domain(&str_arg(0))),
        "humanize" => Value::Str(humanize(to_float(&args[0])?)),
        "humanize1024" => Value::Str(humanize1024(to_float(&args[0])?)),
        "humanizeDuration" => Value::Str(humanize_duration(to_float(&args[0])?)),
        "humanizePercentage" => Value::Str(format!(
            "{}%",
            gofmt::float(to_float(&args[0])? * 100.0, 'g', Some(4))
        )),
        "humanizeTimestamp" => {
            let v = to_float(&args[0])?;
            match to_time(v)? {
                Some(ms) => Value::Str(super::value::format_time(ms)),
                None => Value::Str(gofmt::float(v, 'g', Some(4))),
            }
        }
        "toTime" => match to_time(to_float(&args[0])?)? {
            Some(ms) => Value::Time(ms),
            None => return Err("value is NaN or Inf".into()),
        },
        "parseDuration" => {
            let d = crate::duration::parse(&str_arg(0))?;
            Value::Float(d.as_secs_f64())
        }
        "pathPrefix" => Value::Str(url_path(ctx.external_url)),
        "externalURL" => Value::Str(ctx.external_url.to_owned()),
        _ => return Err(format!("function {} not defined", gofmt::quote(name))),
    })
}

/// Prometheus's `convertToFloat`.
fn to_float(value: &Value) -> Result<f64, String> {
    match value {
        Value::Float(f) => Ok(*f),
        Value::Int(i) => Ok(*i as f64),
        Value::Str(s) => s
            .trim_start_matches('+')
            .parse::<f64>()
            .ok()
            .filter(|_| !s.is_empty() && !s.contains(char::is_whitespace))
            .or_else(|| go_special_float(s))
            .ok_or_else(|| {
                format!(
                    "strconv.ParseFloat: parsing {}: invalid syntax",
                    gofmt::quote(s)
                )
            }),
        other => Err(format!("can't convert {} to float", other.type_name())),
    }
}

/// The spellings Go's `ParseFloat` accepts that Rust's does not, and the
/// other way round.
fn go_special_float(s: &str) -> Option<f64> {
    match s.to_ascii_lowercase().as_str() {
        "inf" | "+inf" | "infinity" | "+infinity" => Some(f64::INFINITY),
        "-inf" | "-infinity" => Some(f64::NEG_INFINITY),
        "nan" => Some(f64::NAN),
        _ => None,
    }
}

/// A timestamp in seconds as ms, `None` for NaN or infinite (Prometheus's
/// `floatToTime`).
fn to_time(v: f64) -> Result<Option<i64>, String> {
    if v.is_nan() || v.is_infinite() {
        return Ok(None);
    }
    let ns = v * 1e9;
    if ns > i64::MAX as f64 || ns < i64::MIN as f64 {
        return Err(format!(
            "{} cannot be represented as a nanoseconds timestamp since it overflows int64",
            gofmt::float(v, 'v', None)
        ));
    }
    // model.TimeFromUnixNano: whole ms, truncated.
    Ok(Some((ns as i64) / 1_000_000))
}

const SI_UP: [&str; 8] = ["k", "M", "G", "T", "P", "E", "Z", "Y"];
const SI_DOWN: [&str; 8] = ["m", "u", "n", "p", "f", "a", "z", "y"];

/// Prometheus's `humanize`: SI prefixes, 4 significant digits.
pub fn humanize(mut v: f64) -> String {
    if v == 0.0 || v.is_nan() || v.is_infinite() {
        return gofmt::float(v, 'g', Some(4));
    }
    let mut prefix = "";
    if v.abs() >= 1.0 {
        for p in SI_UP {
            if v.abs() < 1000.0 {
                break;
            }
            prefix = p;
            v /= 1000.0;
        }
    } else {
        for p in SI_DOWN {
            if v.abs() >= 1.0 {
                break;
            }
            prefix = p;
            v *= 1000.0;
        }
    }
    format!("{}{prefix}", gofmt::float(v, 'g', Some(4)))
}

/// Prometheus's `humanize1024`: binary prefixes.
pub fn humanize1024(mut v: f64) -> String {
    if v.abs() <= 1.0 || v.is_nan() || v.is_infinite() {
        return gofmt::float(v, 'g', Some(4));
    }
    let mut prefix = "";
    for p in ["ki", "Mi", "Gi", "Ti", "Pi", "Ei", "Zi", "Yi"] {
        if v.abs() < 1024.0 {
            break;
        }
        prefix = p;
        v /= 1024.0;
    }
    format!("{}{prefix}", gofmt::float(v, 'g', Some(4)))
}

/// Prometheus's `humanizeDuration`: `1d 2h 3m 4s`, seconds with 4
/// significant digits below a minute, SI prefixes below a second.
pub fn humanize_duration(mut v: f64) -> String {
    if v.is_nan() || v.is_infinite() {
        return gofmt::float(v, 'g', Some(4));
    }
    if v == 0.0 {
        return format!("{}s", gofmt::float(v, 'g', Some(4)));
    }
    if v.abs() >= 1.0 {
        let sign = if v < 0.0 { "-" } else { "" };
        v = v.abs();
        let whole = v as i64;
        let (seconds, minutes, hours, days) = (
            whole % 60,
            whole / 60 % 60,
            whole / 3600 % 24,
            whole / 86_400,
        );
        if days != 0 {
            return format!("{sign}{days}d {hours}h {minutes}m {seconds}s");
        }
        if hours != 0 {
            return format!("{sign}{hours}h {minutes}m {seconds}s");
        }
        if minutes != 0 {
            return format!("{sign}{minutes}m {seconds}s");
        }
        return format!("{sign}{}s", gofmt::float(v, 'g', Some(4)));
    }
    let mut prefix = "";
    for p in SI_DOWN {
        if v.abs() >= 1.0 {
            break;
        }
        prefix = p;
        v *= 1000.0;
    }
    format!("{}{prefix}s", gofmt::float(v, 'g', Some(4)))
}

/// `cases.Title(language.AmericanEnglish, cases.NoLower)`: the first
/// letter of each word upper-cased, the rest left as they are.
fn title(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut start = true;
    for c in text.chars() {
        if start && c.is_alphabetic() {
            out.extend(c.to_uppercase());
        } else {
            out.push(c);
        }
        start = !(c.is_alphanumeric() || c == '\'' || c == '_');
    }
    out
}

fn split_host_port(host_port: &str) -> Option<(&str, &str)> {
    if let Some(rest) = host_port.strip_prefix('[') {
        let (host, port) = rest.split_once("]:")?;
        return (!port.contains(':')).then_some((host, port));
    }
    let (host, port) = host_port.rsplit_once(':')?;
    (!host.contains(':')).then_some((host, port))
}

fn strip_port(host_port: &str) -> String {
    match split_host_port(host_port) {
        Some((host, _)) => host.to_owned(),
        None => host_port.to_owned(),
    }
}

fn strip_domain(host_port: &str) -> String {
    let (host, port) = split_host_port(host_port).unwrap_or((host_port, ""));
    if host.parse::<std::net::IpAddr>().is_ok() {
        return host_port.to_owned();
    }
    let host = host.split('.').next().unwrap_or(host);
    if port.is_empty() {
        host.to_owned()
    } else {
        format!("{host}:{port}")
    }
}

fn url_path(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    match rest.find('/') {
        Some(at) => rest[at..].split(['?', '#']).next().unwrap_or("").to_owned(),
        None => String::new(),
    }
}

/// The escapers' argument: a lone string as it is, else `fmt.Sprint`.
fn escaper_text(args: &[Value]) -> String {
    match args {
        [Value::Str(s)] => s.clone(),
        _ => sprint(args),
    }
}

fn html_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '"' => out.push_str("&#34;"),
            '\'' => out.push_str("&#39;"),
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '\0' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

fn js_escape(s: &str) -> String {
    let mut out = String::new();
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\'' => out.push_str("\\'"),
            '"' => out.push_str("\\\""),
            '<' => out.push_str("\\u003C"),
            '>' => out.push_str("\\u003E"),
            '&' => out.push_str("\\u0026"),
            '=' => out.push_str("\\u003D"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out
}

/// Go's `url.QueryEscape`.
/// Go's `url.QueryEscape`.
pub(crate) fn query_escape(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                out.push(b as char)
            }
            b' ' => out.push('+'),
            b => out.push_str(&format!("%{b:02X}")),
        }
    }
    out
}

fn index(item: &Value, indexes: &[Value]) -> Result<Value, String> {
    let mut item = item.clone();
    for i in indexes {
        item = match (&item, i) {
            (Value::Labels(m), Value::Str(k)) => Value::Str(m.get(k).cloned().unwrap_or_default()),
            (Value::Args(m), Value::Str(k)) => m.get(k).cloned().unwrap_or(Value::Nil),
            (Value::Samples(v), Value::Int(n)) => {
                match usize::try_from(*n).ok().and_then(|n| v.get(n)) {
                    Some(s) => Value::Sample(Arc::new(s.clone())),
                    None => return Err(format!("error calling index: index out of range: {n}")),
                }
            }
            (Value::Str(s), Value::Int(n)) => {
                match usize::try_from(*n).ok().and_then(|n| s.as_bytes().get(n)) {
                    Some(b) => Value::Int(i64::from(*b)),
                    None => return Err(format!("error calling index: index out of range: {n}")),
                }
            }
            (Value::Nil, _) => return Err("index of untyped nil".into()),
            (Value::Labels(_) | Value::Args(_), other) => {
                return Err(format!(
                    "value has type {}; should be string",
                    other.type_name()
                ))
            }
            (other, _) => return Err(format!("can't index item of type {}", other.type_name())),
        };
    }
    Ok(item)
}

/// The kinds Go's comparisons compare.
#[derive(PartialEq)]
enum Kind {
    Bool,
    Int,
    Float,
    Str,
}

fn kind(v: &Value) -> Result<Kind, String> {
    Ok(match v {
        Value::Bool(_) => Kind::Bool,
        Value::Int(_) => Kind::Int,
        Value::Float(_) => Kind::Float,
        Value::Str(_) => Kind::Str,
        _ => return Err("invalid type for comparison".into()),
    })
}

fn eq(a: &Value, others: &[Value]) -> Result<bool, String> {
    if others.is_empty() {
        return Err("missing argument for comparison".into());
    }
    for b in others {
        let same = match (a, b) {
            (Value::Nil, Value::Nil) => true,
            (Value::Nil, _) | (_, Value::Nil) => false,
            (Value::Bool(x), Value::Bool(y)) => x == y,
            (Value::Int(x), Value::Int(y)) => x == y,
            (Value::Float(x), Value::Float(y)) => x == y,
            (Value::Str(x), Value::Str(y)) => x == y,
            (x, y) if kind(x).is_ok() && kind(y).is_ok() => {
                return Err("incompatible types for comparison".into())
            }
            (x, y) => {
                return Err(format!(
                    "non-comparable types {}: {}, {}: {}",
                    x.sprint(),
                    x.type_name(),
                    y.type_name(),
                    y.sprint()
                ))
            }
        };
        if same {
            return Ok(true);
        }
    }
    Ok(false)
}

fn less(a: &Value, b: &Value) -> Result<bool, String> {
    let (ka, kb) = (kind(a)?, kind(b)?);
    if ka != kb {
        return Err("incompatible types for comparison".into());
    }
    Ok(match (a, b) {
        (Value::Int(x), Value::Int(y)) => x < y,
        (Value::Float(x), Value::Float(y)) => x < y,
        (Value::Str(x), Value::Str(y)) => x < y,
        _ => return Err("invalid type for comparison".into()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn humanize_formats_as_prometheus() {
        for (v, text) in [
            (0.0, "0"),
            (1.0, "1"),
            (1234.0, "1.234k"),
            (1234567.0, "1.235M"),
            (12345678912.0, "12.35G"),
            (0.1234, "123.4m"),
            (0.000012, "12u"),
            (-1500.0, "-1.5k"),
            (1e30, "1e+06Y"),
            (f64::INFINITY, "+Inf"),
            (f64::NAN, "NaN"),
        ] {
            assert_eq!(humanize(v), text, "{v}");
        }
        for (v, text) in [
            (0.0, "0"),
            (1.0, "1"),
            (1024.0, "1ki"),
            (1_048_576.0, "1Mi"),
            (1_500_000_000.0, "1.397Gi"),
            (-2048.0, "-2ki"),
        ] {
            assert_eq!(humanize1024(v), text, "{v}");
        }
        for (v, text) in [
            (0.0, "0s"),
            (1.0, "1s"),
            (1.5, "1.5s"),
            (60.0, "1m 0s"),
            (3600.0, "1h 0m 0s"),
            (86_400.0, "1d 0h 0m 0s"),
            (90061.5, "1d 1h 1m 1s"),
            (-75.0, "-1m 15s"),
            (0.25, "250ms"),
            (0.000_001_5, "1.5us"),
        ] {
            assert_eq!(humanize_duration(v), text, "{v}");
        }
    }

    #[test]
    fn helpers_behave_as_go_s() {
        assert_eq!(title("hello wORLD foo-bar"), "Hello WORLD Foo-Bar");
        assert_eq!(strip_port("host:9100"), "host");
        assert_eq!(strip_port("[::1]:9100"), "::1");
        assert_eq!(strip_port("host"), "host");
        assert_eq!(strip_domain("node1.example.com:9100"), "node1:9100");
        assert_eq!(strip_domain("10.0.0.1:9100"), "10.0.0.1:9100");
        assert_eq!(query_escape("rate(x[5m]) > 0"), "rate%28x%5B5m%5D%29+%3E+0");
        assert_eq!(url_path("http://host:9090/prometheus/"), "/prometheus/");
    }
}
