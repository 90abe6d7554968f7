//! Go's formatting of strings and floats, as Prometheus's messages and
//! templates print them: `strconv.Quote` (`%q`), and `%e`, `%f`, `%g` and
//! `%v` of a float64 (the shortest digits that read back, or a precision,
//! ties rounded to even, the exponent with two digits at least).

/// `text` quoted as Go's `strconv.Quote` quotes it.
pub fn quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if !is_print(c) => {
                if (c as u32) < 0x10000 {
                    out.push_str(&format!("\\u{:04x}", c as u32));
                } else {
                    out.push_str(&format!("\\U{:08x}", c as u32));
                }
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// Close to Go's `unicode.IsPrint`: no controls, no spaces but ' ', no
/// format characters.
fn is_print(c: char) -> bool {
    !(c.is_control()
        || (c.is_whitespace() && c != ' ')
        || matches!(c, '\u{ad}' | '\u{200b}'..='\u{200f}' | '\u{2060}'..='\u{2064}' | '\u{feff}'))
}

/// The decimal digits of finite `|v|` (no leading or trailing zeros; "0"
/// for zero) and the position of the decimal point: `v = 0.DIGITS × 10^dp`.
/// `significant` rounds to that many digits (ties to even, on the exact
/// binary value, as Go's strconv); `None` gives the shortest digits that
/// read back as `v`.
fn digits(v: f64, significant: Option<usize>) -> (String, i32) {
    let text = match significant {
        Some(n) => format!("{:.*e}", n.max(1) - 1, v.abs()),
        None => format!("{:e}", v.abs()),
    };
    let (mantissa, exponent) = text.split_once('e').expect("Rust's {:e} has an exponent");
    let exponent: i32 = exponent.parse().expect("an integer exponent");
    let mut digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    while digits.len() > 1 && digits.ends_with('0') {
        digits.pop();
    }
    if digits == "0" {
        return (digits, 1);
    }
    (digits, exponent + 1)
}

/// `digits × 10^(dp)` in `%e` form with `decimals` digits after the point.
fn format_e(digits: &str, dp: i32, decimals: usize, upper: bool) -> String {
    let mut out = String::new();
    let mut chars = digits.chars();
    out.push(chars.next().unwrap_or('0'));
    if decimals > 0 {
        out.push('.');
        let rest: String = chars.collect();
        out.push_str(&rest);
        for _ in rest.len()..decimals {
            out.push('0');
        }
    }
    let exp = if digits == "0" { 0 } else { dp - 1 };
    out.push(if upper { 'E' } else { 'e' });
    out.push(if exp < 0 { '-' } else { '+' });
    out.push_str(&format!("{:02}", exp.abs()));
    out
}

/// `digits × 10^(dp)` in `%f` form with `decimals` digits after the point.
fn format_f(digits: &str, dp: i32, decimals: usize) -> String {
    let digit = |i: i32| -> char {
        if i >= 0 && (i as usize) < digits.len() {
            digits.as_bytes()[i as usize] as char
        } else {
            '0'
        }
    };
    let mut out = String::new();
    if dp > 0 {
        for i in 0..dp {
            out.push(digit(i));
        }
    } else {
        out.push('0');
    }
    if decimals > 0 {
        out.push('.');
        for i in 0..decimals as i32 {
            out.push(digit(dp + i));
        }
    }
    out
}

/// Infinities and NaN as Go's fmt prints them.
fn special(v: f64) -> Option<&'static str> {
    if v.is_nan() {
        Some("NaN")
    } else if v == f64::INFINITY {
        Some("+Inf")
    } else if v == f64::NEG_INFINITY {
        Some("-Inf")
    } else {
        None
    }
}

/// `v` formatted as Go's `fmt` formats a float64 with `verb` (`e`, `E`,
/// `f`, `F`, `g`, `G` or `v`) and an optional precision; the sign only
/// when negative (flags are the caller's).
pub fn float(v: f64, verb: char, precision: Option<usize>) -> String {
    if let Some(text) = special(v) {
        return text.to_owned();
    }
    let sign = if v.is_sign_negative() { "-" } else { "" };
    let body = match verb {
        'e' | 'E' => {
            let p = precision.unwrap_or(6);
            let (d, dp) = digits(v, Some(p + 1));
            format_e(&d, dp, p, verb == 'E')
        }
        'f' | 'F' => {
            let p = precision.unwrap_or(6);
            let text = format!("{:.*}", p, v.abs());
            return format!("{sign}{text}");
        }
        _ => {
            // %g, %G and %v: %e past the precision's exponent, %f below.
            let upper = verb == 'G';
            let shortest = precision.is_none();
            let p = match precision {
                Some(0) => 1,
                Some(p) => p,
                None => 0,
            };
            let (d, dp) = digits(v, if shortest { None } else { Some(p) });
            let nd = d.len() as i32;
            let mut eprec = if shortest { 6 } else { p as i32 };
            if !shortest && eprec > nd && nd >= dp {
                eprec = nd;
            }
            let exp = dp - 1;
            if exp < -4 || exp >= eprec {
                format_e(&d, dp, (nd - 1).max(0) as usize, upper)
            } else {
                format_f(&d, dp, (nd - dp).max(0) as usize)
            }
        }
    };
    format!("{sign}{body}")
}

/// `strconv.FormatFloat(v, 'e', -1, 64)`: the fewest digits that read
/// back as `v`, in `e` form (`1e+00`, `8.25e+01`), as Prometheus's APIs
/// give alerts' values.
pub fn float_e(v: f64) -> String {
    if let Some(text) = special(v) {
        return text.to_owned();
    }
    let sign = if v.is_sign_negative() { "-" } else { "" };
    let (d, dp) = digits(v, None);
    let precision = d.len().saturating_sub(1);
    format!("{sign}{}", format_e(&d, dp, precision, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shortest_e_is_strconv_s() {
        // strconv.FormatFloat(x, 'e', -1, 64) in Go.
        for (v, text) in [
            (1.0, "1e+00"),
            (0.0, "0e+00"),
            (82.5, "8.25e+01"),
            (-0.001, "-1e-03"),
            (1.0 / 3.0, "3.333333333333333e-01"),
            (f64::NAN, "NaN"),
        ] {
            assert_eq!(float_e(v), text, "{v}");
        }
    }

    #[test]
    fn floats_print_as_go_prints_them() {
        // fmt.Sprintf("%v", x) and fmt.Sprintf("%.4g", x) in Go.
        for (v, shortest, g4) in [
            (0.0, "0", "0"),
            (1.0, "1", "1"),
            (-1.5, "-1.5", "-1.5"),
            (0.1, "0.1", "0.1"),
            (100.0, "100", "100"),
            (123456.0, "123456", "1.235e+05"),
            (1234567.0, "1.234567e+06", "1.235e+06"),
            (1e6, "1e+06", "1e+06"),
            (1e21, "1e+21", "1e+21"),
            (0.0001, "0.0001", "0.0001"),
            (0.00001, "1e-05", "1e-05"),
            (12345.0, "12345", "1.234e+04"),
            (1234.5, "1234.5", "1234"),
            (1235.5, "1235.5", "1236"),
            (999.99, "999.99", "1000"),
            (99999.0, "99999", "1e+05"),
            (f64::INFINITY, "+Inf", "+Inf"),
            (f64::NEG_INFINITY, "-Inf", "-Inf"),
            (f64::NAN, "NaN", "NaN"),
            (1.0 / 3.0, "0.3333333333333333", "0.3333"),
        ] {
            assert_eq!(float(v, 'v', None), shortest, "%v of {v}");
            assert_eq!(float(v, 'g', Some(4)), g4, "%.4g of {v}");
        }
        assert_eq!(float(1.5, 'e', None), "1.500000e+00");
        assert_eq!(float(123.456, 'e', Some(2)), "1.23e+02");
        assert_eq!(float(0.0, 'e', Some(1)), "0.0e+00");
        assert_eq!(float(1.5, 'f', None), "1.500000");
        assert_eq!(float(0.125, 'f', Some(2)), "0.12");
        assert_eq!(float(-2.5, 'f', Some(0)), "-2");
        assert_eq!(float(1e-7, 'E', Some(3)), "1.000E-07");
        assert_eq!(float(1e100, 'g', None), "1e+100");
    }

    #[test]
    fn strings_quote_as_strconv_quotes_them() {
        assert_eq!(quote("a\"b\\c"), r#""a\"b\\c""#);
        assert_eq!(quote("tab\there\n"), r#""tab\there\n""#);
        assert_eq!(quote("\u{1}\u{7f}"), r#""\x01\x7f""#);
        assert_eq!(quote("é ✓"), "\"é ✓\"");
        assert_eq!(quote("\u{200b}"), r#""\u200b""#);
    }
}
