//! Literals in a template's actions, read as Go reads them: numbers
//! (decimal, hex, octal, binary, floats, character constants, each with
//! every type it can take) and quoted strings with Go's escapes.

use super::lex::{Item, Tok};

/// A number literal, with every type it can be (Go's `NumberNode`).
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Number {
    pub(crate) text: String,
    pub(crate) int: Option<i64>,
    pub(crate) float: Option<f64>,
    /// Written as a float (`.`, `e`), not a hex or rune integer.
    pub(crate) float_syntax: bool,
}

/// A number token's value (Go's `newNumber`).
pub(crate) fn number(item: &Item) -> Option<Number> {
    let text = item.val.clone();
    if item.tok == Tok::CharConstant {
        let inner = unquote_char(&text)?;
        let v = i64::from(inner as u32);
        return Some(Number {
            text,
            int: Some(v),
            float: Some(v as f64),
            float_syntax: false,
        });
    }
    let clean = text.replace('_', "");
    let (negative, body) = match clean.as_bytes().first() {
        Some(b'-') => (true, &clean[1..]),
        Some(b'+') => (false, &clean[1..]),
        _ => (false, clean.as_str()),
    };
    let lower = body.to_ascii_lowercase();
    let int = if let Some(hex) = lower.strip_prefix("0x") {
        i64::from_str_radix(hex, 16).ok()
    } else if let Some(oct) = lower.strip_prefix("0o") {
        i64::from_str_radix(oct, 8).ok()
    } else if let Some(bin) = lower.strip_prefix("0b") {
        i64::from_str_radix(bin, 2).ok()
    } else if lower.len() > 1 && lower.starts_with('0') && lower.bytes().all(|b| b.is_ascii_digit())
    {
        i64::from_str_radix(&lower[1..], 8).ok()
    } else {
        lower.parse::<i64>().ok()
    }
    .map(|v| if negative { -v } else { v });
    let is_hex = lower.starts_with("0x");
    let float = if is_hex {
        int.map(|v| v as f64)
    } else {
        clean.parse::<f64>().ok().filter(|f| f.is_finite())
    };
    let int = int.or_else(|| {
        float
            .filter(|f| f.fract() == 0.0 && f.abs() < 9.2e18)
            .map(|f| f as i64)
    });
    if int.is_none() && float.is_none() {
        return None;
    }
    let float_syntax = !is_hex && clean.contains(['.', 'e', 'E', 'p', 'P']);
    Some(Number {
        text,
        int,
        float,
        float_syntax,
    })
}

/// A Go string literal's value: `"…"` with escapes, or `` `…` ``.
pub(crate) fn unquote(text: &str) -> Result<String, ()> {
    if let Some(raw) = text.strip_prefix('`').and_then(|t| t.strip_suffix('`')) {
        return Ok(raw.replace('\r', ""));
    }
    let inner = text
        .strip_prefix('"')
        .and_then(|t| t.strip_suffix('"'))
        .ok_or(())?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        out.push(escape(&mut chars, '"')?);
    }
    Ok(out)
}

fn escape(chars: &mut std::str::Chars<'_>, quote: char) -> Result<char, ()> {
    let c = chars.next().ok_or(())?;
    let hex = |chars: &mut std::str::Chars<'_>, n: usize| -> Result<char, ()> {
        let digits: String = chars.take(n).collect();
        if digits.len() != n {
            return Err(());
        }
        char::from_u32(u32::from_str_radix(&digits, 16).map_err(|_| ())?).ok_or(())
    };
    Ok(match c {
        'a' => '\u{7}',
        'b' => '\u{8}',
        'f' => '\u{c}',
        'n' => '\n',
        'r' => '\r',
        't' => '\t',
        'v' => '\u{b}',
        '\\' => '\\',
        'x' => hex(chars, 2)?,
        'u' => hex(chars, 4)?,
        'U' => hex(chars, 8)?,
        '0'..='7' => {
            let rest: String = chars.take(2).collect();
            let digits = format!("{c}{rest}");
            char::from_u32(u32::from_str_radix(&digits, 8).map_err(|_| ())?).ok_or(())?
        }
        c if c == quote => c,
        _ => return Err(()),
    })
}

fn unquote_char(text: &str) -> Option<char> {
    let inner = text.strip_prefix('\'')?.strip_suffix('\'')?;
    let mut chars = inner.chars();
    let c = match chars.next()? {
        '\\' => escape(&mut chars, '\'').ok()?,
        c => c,
    };
    chars.next().is_none().then_some(c)
}
