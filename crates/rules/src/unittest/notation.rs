//! The series of a test file in PromQL's notation: `name{label="value"}`
//! and promtool's values (`1+1x3`, `_x2`, `stale`).

use crate::alert::Labels;
use crate::gofmt::quote;

/// Most samples one input series may expand to (`1+1x100000000` would
/// otherwise be a request for gigabytes).
const MAX_SAMPLES: u64 = 10_000_000;

/// A series in PromQL's notation, `name{label="value", …}`, as labels
/// (the name as `__name__`).
pub(super) fn parse_metric(text: &str) -> Result<Labels, String> {
    let text = text.trim();
    let (name, rest) = match text.find('{') {
        Some(at) => (text[..at].trim(), Some(&text[at + 1..])),
        None => (text, None),
    };
    let mut labels = Labels::new();
    if !name.is_empty() {
        if !crate::file::is_valid_metric_name(name) {
            return Err(format!("invalid metric name {}", quote(name)));
        }
        labels.insert("__name__".into(), name.into());
    }
    let Some(mut rest) = rest else {
        return Ok(labels);
    };
    loop {
        rest = rest.trim_start();
        if let Some(after) = rest.strip_prefix('}') {
            if !after.trim().is_empty() {
                return Err(format!(
                    "unexpected {} after the labels",
                    quote(after.trim())
                ));
            }
            return Ok(labels);
        }
        let eq = rest.find('=').ok_or("expected a label")?;
        let key = rest[..eq].trim();
        if !crate::file::is_valid_label_name(key) {
            return Err(format!("invalid label name {}", quote(key)));
        }
        let (value, after) = unquote(rest[eq + 1..].trim_start())?;
        // A label with an empty value is no label, in PromQL's model.
        if !value.is_empty() {
            labels.insert(key.into(), value);
        }
        rest = after.trim_start();
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

/// A Go string literal (`"…"`, `'…'` or a raw `` `…` ``) at the start of
/// `text`: its value and what follows.
fn unquote(text: &str) -> Result<(String, &str), String> {
    let quote_char = text.chars().next().ok_or("expected a quoted value")?;
    if !matches!(quote_char, '"' | '\'' | '`') {
        return Err(format!("expected a quoted value at {}", quote(text)));
    }
    let mut value = String::new();
    let mut chars = text[1..].char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            c if c == quote_char => return Ok((value, &text[1 + i + 1..])),
            '\\' if quote_char != '`' => match chars.next().map(|(_, c)| c) {
                Some('n') => value.push('\n'),
                Some('t') => value.push('\t'),
                Some('r') => value.push('\r'),
                Some(c @ ('\\' | '"' | '\'')) => value.push(c),
                other => return Err(format!("unknown escape {other:?}")),
            },
            c => value.push(c),
        }
    }
    Err("unterminated quoted value".into())
}

/// A series' values in promtool's notation, `None` where omitted: numbers
/// (`Inf`, `NaN`), `stale`, `_`, and the expansions `a+bxn` / `a-bxn`
/// (n+1 values from a in steps of b), `axn` (a, n+1 times) and `_xn` (n
/// omitted).
pub(super) fn expand_values(text: &str) -> Result<Vec<Option<f64>>, String> {
    let mut out = Vec::new();
    for item in text.split_whitespace() {
        let (head, times) = match item.rsplit_once('x') {
            Some((head, n))
                if !head.is_empty() && n.chars().all(|c| c.is_ascii_digit()) && !n.is_empty() =>
            {
                (head, Some(n.parse::<u64>().map_err(|e| e.to_string())?))
            }
            _ => (item, None),
        };
        let count = times.map_or(1, |n| n + 1);
        if out.len() as u64 + count > MAX_SAMPLES {
            return Err(format!("more than {MAX_SAMPLES} values"));
        }
        if head == "_" {
            out.extend((0..times.unwrap_or(1)).map(|_| None));
            continue;
        }
        if head == "stale" {
            out.push(Some(chingest_promql::STALE_NAN));
            continue;
        }
        // a+b or a-b: the sign after the first character splits them.
        let split = head[1..]
            .find(['+', '-'])
            .map(|at| at + 1)
            .filter(|&at| !head[..at].ends_with(['e', 'E']));
        let (start, delta) = match (split, times) {
            (Some(at), Some(_)) => (number(&head[..at])?, number(&head[at..])?),
            (Some(_), None) => {
                return Err(format!("unexpected {} without a repetition", quote(item)))
            }
            (None, _) => (number(head)?, 0.0),
        };
        let mut value = start;
        for _ in 0..count {
            out.push(Some(value));
            value += delta;
        }
    }
    Ok(out)
}

pub(super) fn number(text: &str) -> Result<f64, String> {
    let unsigned = text.trim_start_matches(['+', '-']);
    let negative = text.starts_with('-');
    let value = match unsigned.to_ascii_lowercase().as_str() {
        "inf" => f64::INFINITY,
        "nan" => f64::NAN,
        _ => unsigned
            .parse::<f64>()
            .map_err(|_| format!("invalid number {}", quote(text)))?,
    };
    Ok(if negative { -value } else { value })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_expand_as_promtool_expands_them() {
        let v = |text: &str| expand_values(text).unwrap();
        let some = |xs: &[f64]| xs.iter().map(|&x| Some(x)).collect::<Vec<_>>();
        assert_eq!(v("1+1x3"), some(&[1.0, 2.0, 3.0, 4.0]));
        assert_eq!(v("10-2x2 7"), some(&[10.0, 8.0, 6.0, 7.0]));
        assert_eq!(v("-1+1x1"), some(&[-1.0, 0.0]));
        assert_eq!(v("5x2"), some(&[5.0, 5.0, 5.0]));
        assert_eq!(v("1 _ 3 _x2"), vec![Some(1.0), None, Some(3.0), None, None]);
        assert_eq!(v("1e3+1e2x1"), some(&[1000.0, 1100.0]));
        assert!(chingest_promql::is_stale(v("1 stale")[1].unwrap()));
        assert!(v("Inf -Inf")[1].unwrap().is_infinite());
        assert!(expand_values("1+1").is_err());
        assert!(expand_values("1x99999999999").is_err());
    }

    #[test]
    fn series_read_as_promql_writes_them() {
        let labels = parse_metric(r#"up{job="api", path="/a\"b", empty=""}"#).unwrap();
        assert_eq!(labels["__name__"], "up");
        assert_eq!(labels["path"], "/a\"b");
        assert_eq!(labels.len(), 3);
        assert!(parse_metric("up{job=api}").is_err());
        assert!(!parse_metric("{a=\"1\"}").unwrap().contains_key("__name__"));
    }
}
