//! Go's `fmt.Sprintf`, `Sprint` and `Sprintln` over template values: the
//! verbs templates use (`%s %v %d %f %e %g %x %X %o %b %q %t %c %%`) with
//! flags (`-+ #0`), width and precision, and Go's markers for what does not
//! fit (`%!d(string=x)`, `%!s(MISSING)`, `%!(EXTRA …)`).

use super::value::Value;
use crate::gofmt;

/// `fmt.Sprintf(format, args...)`.
pub(crate) fn sprintf(format: &str, args: &[Value]) -> String {
    let mut out = String::new();
    let mut next = 0;
    let mut chars = format.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let mut spec = Spec::default();
        while let Some(&f) = chars.peek() {
            match f {
                '-' => spec.minus = true,
                '+' => spec.plus = true,
                '#' => spec.sharp = true,
                ' ' => spec.space = true,
                '0' => spec.zero = true,
                _ => break,
            }
            chars.next();
        }
        spec.width = digits(&mut chars);
        if chars.peek() == Some(&'.') {
            chars.next();
            spec.precision = Some(digits(&mut chars).unwrap_or(0));
        }
        let Some(verb) = chars.next() else {
            out.push_str("%!(NOVERB)");
            break;
        };
        if verb == '%' {
            out.push('%');
            continue;
        }
        let Some(arg) = args.get(next) else {
            out.push_str(&format!("%!{verb}(MISSING)"));
            continue;
        };
        next += 1;
        out.push_str(&spec.format(verb, arg));
    }
    if next < args.len() {
        let extra: Vec<String> = args[next..]
            .iter()
            .map(|a| match a {
                Value::Nil => "<nil>".to_owned(),
                a => format!("{}={}", a.type_name(), a.sprint()),
            })
            .collect();
        out.push_str(&format!("%!(EXTRA {})", extra.join(", ")));
    }
    out
}

fn digits(chars: &mut std::iter::Peekable<std::str::Chars<'_>>) -> Option<usize> {
    let mut n: Option<usize> = None;
    while let Some(d) = chars.peek().and_then(|c| c.to_digit(10)) {
        // Bounded: a width past 10^6 is Go's `%!(BADWIDTH)`; here capped.
        n = Some((n.unwrap_or(0) * 10 + d as usize).min(1_000_000));
        chars.next();
    }
    n
}

/// `fmt.Sprint(args...)`: spaces between operands when neither is a string.
pub(crate) fn sprint(args: &[Value]) -> String {
    let mut out = String::new();
    for (i, arg) in args.iter().enumerate() {
        let is_string = matches!(arg, Value::Str(_));
        if i > 0 && !is_string && !matches!(args[i - 1], Value::Str(_)) {
            out.push(' ');
        }
        out.push_str(&arg.sprint());
    }
    out
}

/// `fmt.Sprintln(args...)`: spaces always, and a newline.
pub(crate) fn sprintln(args: &[Value]) -> String {
    let items: Vec<String> = args.iter().map(Value::sprint).collect();
    format!("{}\n", items.join(" "))
}

#[derive(Default)]
struct Spec {
    minus: bool,
    plus: bool,
    sharp: bool,
    space: bool,
    zero: bool,
    width: Option<usize>,
    precision: Option<usize>,
}

impl Spec {
    fn format(&self, verb: char, arg: &Value) -> String {
        let bad = || format!("%!{verb}({}={})", arg.type_name(), arg.sprint());
        let body = match (verb, arg) {
            (_, Value::Nil) if verb == 'v' || verb == 's' => "<nil>".to_owned(),
            (_, Value::Nil) => format!("%!{verb}(<nil>)"),
            ('v' | 't', Value::Bool(b)) => b.to_string(),
            (_, Value::Bool(_)) => bad(),
            (_, Value::Int(i)) => match self.int(verb, *i) {
                Some(text) => text,
                None => bad(),
            },
            (_, Value::Float(f)) => match self.float(verb, *f) {
                Some(text) => text,
                None => bad(),
            },
            ('s' | 'v', Value::Str(s)) => match self.precision {
                Some(p) => s.chars().take(p).collect(),
                None => s.clone(),
            },
            ('q', Value::Str(s)) => gofmt::quote(s),
            ('x' | 'X', Value::Str(s)) => {
                let hex: String = s.bytes().map(|b| format!("{b:02x}")).collect();
                if verb == 'X' {
                    hex.to_uppercase()
                } else {
                    hex
                }
            }
            (_, Value::Str(_)) => bad(),
            ('v' | 's', other) => other.sprint(),
            _ => bad(),
        };
        if body.starts_with("%!") {
            return body;
        }
        self.pad(body, matches!(arg, Value::Int(_) | Value::Float(_)))
    }

    fn sign(&self, negative: bool) -> &'static str {
        if negative {
            "-"
        } else if self.plus {
            "+"
        } else if self.space {
            " "
        } else {
            ""
        }
    }

    fn int(&self, verb: char, i: i64) -> Option<String> {
        let magnitude = i.unsigned_abs();
        let digits = match verb {
            'd' | 'v' => magnitude.to_string(),
            'x' => format!("{}{magnitude:x}", if self.sharp { "0x" } else { "" }),
            'X' => format!("{}{magnitude:X}", if self.sharp { "0X" } else { "" }),
            'o' => format!("{}{magnitude:o}", if self.sharp { "0" } else { "" }),
            'O' => format!("0o{magnitude:o}"),
            'b' => format!("{magnitude:b}"),
            'c' => return char::from_u32(i as u32).map(String::from),
            'q' => return char::from_u32(i as u32).map(|c| format!("'{c}'")),
            'U' => return Some(format!("U+{i:04X}")),
            _ => return None,
        };
        let digits = match self.precision {
            Some(p) if digits.len() < p => format!("{}{digits}", "0".repeat(p - digits.len())),
            _ => digits,
        };
        Some(format!("{}{digits}", self.sign(i < 0)))
    }

    fn float(&self, verb: char, f: f64) -> Option<String> {
        let text = match verb {
            'e' | 'E' | 'f' | 'F' | 'g' | 'G' => gofmt::float(f, verb, self.precision),
            'v' => gofmt::float(f, 'g', self.precision),
            _ => return None,
        };
        if f.is_nan() {
            return Some(match (self.plus, self.space) {
                (true, _) => "+NaN".into(),
                (_, true) => " NaN".into(),
                _ => text,
            });
        }
        Some(match text.strip_prefix(['-', '+']) {
            Some(rest) => format!("{}{rest}", self.sign(f.is_sign_negative())),
            None => format!("{}{text}", self.sign(false)),
        })
    }

    fn pad(&self, body: String, numeric: bool) -> String {
        let Some(width) = self.width else {
            return body;
        };
        let len = body.chars().count();
        if len >= width {
            return body;
        }
        let fill = width - len;
        if self.minus {
            return format!("{body}{}", " ".repeat(fill));
        }
        if self.zero && numeric && !body.contains("Inf") && !body.contains("NaN") {
            let (sign, rest) = match body.strip_prefix(['-', '+', ' ']) {
                Some(rest) => (&body[..1], rest),
                None => ("", body.as_str()),
            };
            return format!("{sign}{}{rest}", "0".repeat(fill));
        }
        format!("{}{body}", " ".repeat(fill))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_as_go_s_sprintf() {
        let f = |format: &str, args: &[Value]| sprintf(format, args);
        assert_eq!(f("%.2f", &[Value::Float(1.005)]), "1.00");
        assert_eq!(f("%.1f%%", &[Value::Float(99.95)]), "100.0%");
        assert_eq!(f("%d items", &[Value::Int(3)]), "3 items");
        assert_eq!(
            f(
                "%5.1f|%-5d|%05d",
                &[Value::Float(1.26), Value::Int(42), Value::Int(-42)]
            ),
            "  1.3|42   |-0042"
        );
        assert_eq!(
            f("%s=%v", &[Value::Str("a".into()), Value::Float(0.5)]),
            "a=0.5"
        );
        assert_eq!(f("%q", &[Value::Str("x\"y".into())]), "\"x\\\"y\"");
        assert_eq!(
            f(
                "%x %X %o %b",
                &[
                    Value::Int(255),
                    Value::Int(255),
                    Value::Int(8),
                    Value::Int(5)
                ]
            ),
            "ff FF 10 101"
        );
        assert_eq!(
            f("%+d %+.1e", &[Value::Int(5), Value::Float(12345.0)]),
            "+5 +1.2e+04"
        );
        assert_eq!(f("%d", &[Value::Str("x".into())]), "%!d(string=x)");
        assert_eq!(f("%d", &[Value::Float(1.5)]), "%!d(float64=1.5)");
        assert_eq!(f("%s %s", &[Value::Str("a".into())]), "a %!s(MISSING)");
        assert_eq!(
            f("%s", &[Value::Str("a".into()), Value::Int(1)]),
            "a%!(EXTRA int=1)"
        );
        assert_eq!(f("%g", &[Value::Float(1e21)]), "1e+21");
        assert_eq!(f("%t", &[Value::Bool(true)]), "true");
        assert_eq!(f("100%", &[]), "100%!(NOVERB)");
    }

    #[test]
    fn sprint_spaces_only_between_non_strings() {
        assert_eq!(
            sprint(&[
                Value::Int(1),
                Value::Int(2),
                Value::Str("a".into()),
                Value::Int(3)
            ]),
            "1 2a3"
        );
        assert_eq!(sprintln(&[Value::Str("a".into()), Value::Int(1)]), "a 1\n");
    }
}
