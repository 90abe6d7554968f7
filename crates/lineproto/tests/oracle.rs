//! Cross-check against the `influxdb-line-protocol` crate.
//!
//! A generated corpus (deterministic, tens of thousands of lines with
//! escapes, unicode, every value type and some malformed lines) and a fixed
//! list of edge cases are parsed by both, line by line. Every line that
//! crate accepts must parse to the same measurement, tags, fields and
//! timestamp here, and every line it rejects must be rejected here, except
//! for the differences listed in the crate documentation (mostly where this
//! parser follows InfluxDB 1.6 and that crate does not), which [`allowed`]
//! checks precisely.

use influxdb_line_protocol as oracle;
use lineproto::{
    escape_measurement, escape_string_field, escape_tag, parse, ErrorKind, FieldValue, Line,
    ParseOptions, Parser,
};

/// A parsed line in a form both parsers can be compared in.
#[derive(Debug, Clone, PartialEq)]
struct Point {
    measurement: String,
    tags: Vec<(String, String)>,
    fields: Vec<(String, Value)>,
    timestamp: Option<i64>,
}

#[derive(Debug, Clone, PartialEq)]
enum Value {
    F(f64),
    I(i64),
    U(u64),
    S(String),
    B(bool),
}

fn from_ours(line: &Line<'_>) -> Point {
    Point {
        measurement: line.measurement.unescape().into_owned(),
        tags: line
            .tags
            .iter()
            .map(|(k, v)| (k.unescape().into_owned(), v.unescape().into_owned()))
            .collect(),
        fields: line
            .fields
            .iter()
            .map(|(k, v)| {
                let v = match v {
                    FieldValue::Float(f) => Value::F(*f),
                    FieldValue::Integer(i) => Value::I(*i),
                    FieldValue::UInteger(u) => Value::U(*u),
                    FieldValue::String(s) => Value::S(s.unescape().into_owned()),
                    FieldValue::Boolean(b) => Value::B(*b),
                };
                (k.unescape().into_owned(), v)
            })
            .collect(),
        timestamp: line.timestamp_given.then_some(line.timestamp),
    }
}

/// The oracle's verdict on one line: `None` if it skips it (blank or
/// comment), else the point or the error text.
fn from_oracle(line: &str) -> Option<Result<Point, String>> {
    let mut results = oracle::parse_lines(line);
    let result = results.next()?;
    assert!(results.next().is_none(), "oracle split {line:?}");
    Some(result.map_err(|e| e.to_string()).map(|p| {
        Point {
            measurement: p.series.measurement.to_string(),
            tags: p
                .series
                .tag_set
                .iter()
                .flatten()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            fields: p
                .field_set
                .iter()
                .map(|(k, v)| {
                    let v = match v {
                        oracle::FieldValue::F64(f) => Value::F(*f),
                        oracle::FieldValue::I64(i) => Value::I(*i),
                        oracle::FieldValue::U64(u) => Value::U(*u),
                        oracle::FieldValue::String(s) => Value::S(s.to_string()),
                        oracle::FieldValue::Boolean(b) => Value::B(*b),
                    };
                    (k.to_string(), v)
                })
                .collect(),
            timestamp: p.timestamp,
        }
    }))
}

type Ours = Result<Point, (usize, ErrorKind)>;

/// Whether a disagreement on `line` is one of the documented differences.
fn allowed(line: &str, oracle: &Result<Point, String>, ours: &Ours) -> bool {
    let byte = |column: usize| line.as_bytes().get(column.wrapping_sub(1)).copied();
    match (oracle, ours) {
        (Err(_), Ok(point)) => {
            // Tabs and NUL bytes are ordinary characters here (and skipped
            // like spaces before the field set and the timestamp).
            if line.contains('\t') || line.contains('\0') {
                return true;
            }
            // Trailing spaces after the fields (no timestamp) are accepted.
            if point.timestamp.is_none() && line.ends_with(' ') {
                let trimmed = line.trim_end_matches(' ');
                return matches!(from_oracle(trimmed), Some(Ok(p)) if p == *point);
            }
            // Floats without digits on one side of the point are accepted:
            // written with them, that crate reads the same line.
            let fixed = with_full_floats(line);
            fixed != line && matches!(from_oracle(&fixed), Some(Ok(p)) if p == *point)
        }
        (Ok(point), Err((column, kind))) => match kind {
            // Floats must be finite.
            ErrorKind::FloatOutOfRange { .. } => point
                .fields
                .iter()
                .any(|(_, v)| matches!(v, Value::F(f) if f.is_infinite())),
            // A trailing comma after the single field is rejected, and so
            // are unescaped commas in keys.
            ErrorKind::EmptyFieldKey => {
                (byte(column - 1) == Some(b',') && point.fields.len() == 1)
                    || (byte(*column) == Some(b',')
                        && point.fields.iter().any(|(k, _)| k.starts_with(',')))
                    // (A first key of tabs and NUL bytes is skipped.)
                    || point.fields[0].0.trim_start_matches(['\t', '\0']).is_empty()
            }
            // (A key ending in `\\` before an unescaped comma ends there.)
            ErrorKind::TrailingBackslash { .. } => byte(column + 1) == Some(b','),
            ErrorKind::MissingFieldValue { .. } => {
                byte(*column) == Some(b',') && point.fields.iter().any(|(k, _)| k.contains(','))
            }
            ErrorKind::EmptyTagKey => {
                byte(*column) == Some(b',') && point.tags.iter().any(|(k, _)| k.starts_with(','))
            }
            ErrorKind::MissingTagValue { .. } => {
                byte(*column) == Some(b',') && point.tags.iter().any(|(k, _)| k.contains(','))
            }
            // So is an unescaped `=` in a tag value.
            ErrorKind::EqualsInTagValue { .. } => {
                byte(*column) == Some(b'=') && point.tags.iter().any(|(_, v)| v.contains('='))
            }
            // InfluxDB's time range.
            ErrorKind::TimestampOutOfRange { .. } => matches!(
                point.timestamp,
                Some(i64::MIN | -9_223_372_036_854_775_807 | i64::MAX)
            ),
            _ => false,
        },
        // `\=` and `\"` in measurements and `\"` in field keys unescape,
        // and tabs and NUL bytes before the first field key are skipped.
        (Ok(theirs), Ok(mine)) => {
            let unescape = |s: &str| s.replace("\\=", "=").replace("\\\"", "\"");
            let fields = theirs.fields.iter().enumerate().map(|(n, (k, v))| {
                let k = if n == 0 {
                    k.trim_start_matches(['\t', '\0'])
                } else {
                    k
                };
                (unescape(k), v.clone())
            });
            let theirs = Point {
                measurement: unescape(&theirs.measurement),
                fields: fields.collect(),
                ..theirs.clone()
            };
            theirs == *mine
        }
        _ => false,
    }
}

/// `line` with each float field value written without digits on one side of
/// its point (`.5`, `-5.`, `1.e5`) given a `0` there, as our parser reads
/// it; `line` itself if we reject it.
fn with_full_floats(line: &str) -> String {
    let parsed = parse(line.as_bytes(), ParseOptions::default());
    let Some(point) = parsed.lines.first() else {
        return line.to_owned();
    };
    // Walk the field set: the series key, whitespace, then `key=value`
    // pairs, a string value's length known from its raw text.
    let b = line.as_bytes();
    let mut i = line.find(point.series_key).expect("series key") + point.series_key.len();
    while matches!(b.get(i), Some(b' ' | b'\t' | b'\0')) {
        i += 1;
    }
    let mut out = line[..i].to_owned();
    for (key, value) in &point.fields {
        i += key.raw().len() + 1;
        let len = match value {
            FieldValue::String(s) => s.raw().len() + 2,
            _ => b[i..]
                .iter()
                .position(|&c| c == b',' || c == b' ')
                .unwrap_or(b.len() - i),
        };
        let token = &line[i..i + len];
        out.push_str(&line[i - key.raw().len() - 1..i]);
        if matches!(value, FieldValue::Float(_)) {
            let token = token.replacen("-.", "-0.", 1);
            let token = if token.starts_with('.') {
                format!("0{token}")
            } else {
                token
            };
            let point_at = token.find('.');
            let bare =
                point_at.filter(|&p| !token[p + 1..].starts_with(|c: char| c.is_ascii_digit()));
            match bare {
                Some(p) => out.push_str(&format!("{}.0{}", &token[..p], &token[p + 1..])),
                None => out.push_str(&token),
            }
        } else {
            out.push_str(token);
        }
        i += len;
        if b.get(i) == Some(&b',') {
            out.push(',');
            i += 1;
        }
    }
    out.push_str(&line[i..]);
    out
}

/// Compares both parsers on `lines`, each parsed on its own by ours (some
/// with CRLF endings); returns a description of each mismatch and counts of
/// (both accepted, both rejected, allowed differences).
fn compare(lines: &[String], crlf_every: usize) -> (Vec<String>, [usize; 3]) {
    let mut mismatches = Vec::new();
    let mut counts = [0; 3];
    for (n, text) in lines.iter().enumerate() {
        let mut body = text.as_bytes().to_vec();
        if crlf_every > 0 && n % crlf_every == 0 {
            body.push(b'\r');
        }
        body.push(b'\n');
        let mut parser = Parser::new(&body, ParseOptions::default());
        let mut line = Line::default();
        let mine: Option<Ours> = parser.next_into(&mut line).map(|result| match result {
            Ok(()) => Ok(from_ours(&line)),
            Err(e) => Err((e.column, e.kind)),
        });
        assert!(
            parser.next_into(&mut line).is_none(),
            "{text:?} is one line"
        );
        let theirs = from_oracle(text);
        match (&theirs, &mine) {
            (None, None) => {}
            (Some(Ok(a)), Some(Ok(b))) if a == b => counts[0] += 1,
            (Some(Err(_)), Some(Err(_))) => counts[1] += 1,
            (Some(t), Some(m)) if allowed(text, t, m) => counts[2] += 1,
            _ => mismatches.push(format!(
                "line {}: {text:?}\n  oracle: {theirs:?}\n  ours:   {mine:?}",
                n + 1
            )),
        }
    }
    (mismatches, counts)
}

/// SplitMix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    /// True with probability `percent`%.
    fn chance(&mut self, percent: usize) -> bool {
        self.below(100) < percent
    }

    fn pick<T: Copy>(&mut self, items: &[T]) -> T {
        items[self.below(items.len())]
    }
}

const PLAIN: &[char] = &[
    'a', 'b', 'c', 'x', 'y', 'z', 'A', 'Q', '0', '1', '9', '_', '-', '.', '/', ':',
];
const SPECIAL: &[char] = &[
    ',', ' ', '=', '\\', '"', '#', '\'', 'é', 'ß', '日', '本', '🦀', '\u{7f}', '\u{a0}',
];
/// Characters where the two parsers deliberately differ, or that are
/// delimiters only at the end of a line: kept rare.
const RARE: &[char] = &['\t', '\0', '\r'];

fn gen_text(rng: &mut Rng, max_len: usize, special_percent: usize) -> String {
    let len = 1 + rng.below(max_len);
    (0..len)
        .map(|_| {
            if rng.below(1000) < 3 {
                rng.pick(RARE)
            } else if rng.chance(special_percent) {
                rng.pick(SPECIAL)
            } else {
                rng.pick(PLAIN)
            }
        })
        .collect()
}

fn gen_name(rng: &mut Rng, escape: fn(&str, &mut String)) -> String {
    let name = gen_text(rng, 10, 10);
    let mut out = String::new();
    escape(&name, &mut out);
    out
}

fn gen_float(rng: &mut Rng) -> String {
    let sign = if rng.chance(30) { "-" } else { "" };
    let int = rng.next() % 100_000;
    match rng.below(10) {
        0 => format!("{sign}{int}"),
        1 => format!("{sign}{int}.{}", rng.next() % 1000),
        2 => format!("{sign}{int}e{}", rng.below(40)),
        3 => format!("{sign}{int}.{}E-{}", rng.below(100), rng.below(40)),
        4 => format!("{sign}{int}.5e+{}", rng.below(300)),
        5 => format!("{sign}000{int}.0"),
        6 => format!("{sign}{}{}", rng.next(), rng.next()),
        7 => format!("{sign}1e{}", 290 + rng.below(30)),
        8 => format!("{sign}{}", rng.next()),
        _ => format!("{sign}0.{:020}", rng.next()),
    }
}

fn gen_value(rng: &mut Rng) -> String {
    // Malformed values (the last arm) are rarer than the others.
    let kinds = if rng.chance(4) { 12 } else { 11 };
    match rng.below(kinds) {
        0..=2 => gen_float(rng),
        3 | 4 => match rng.below(8) {
            0 => "9223372036854775808i".to_owned(),
            1 => "-9223372036854775809i".to_owned(),
            2 => "-9223372036854775808i".to_owned(),
            _ => format!("{}i", rng.next() as i64 >> rng.below(64)),
        },
        5 => match rng.below(8) {
            0 => "18446744073709551616u".to_owned(),
            1 => "-1u".to_owned(),
            _ => format!("{}u", rng.next() >> rng.below(64)),
        },
        6..=8 => {
            let mut s = String::from("\"");
            if !rng.chance(10) {
                escape_string_field(&gen_text(rng, 16, 25), &mut s);
            }
            s.push('"');
            s
        }
        9 | 10 => rng
            .pick(&[
                "t", "T", "true", "True", "TRUE", "f", "F", "false", "False", "FALSE",
            ])
            .to_owned(),
        _ => rng
            .pick(&[
                ".5",
                "1.",
                "+1",
                "NaN",
                "inf",
                "-inf",
                "tru",
                "1.5i",
                "0x1",
                "",
                "1e",
                "-",
                "1i2",
                "\"unterminated",
                "\"a\"b",
                "tRUE",
                "1_0",
            ])
            .to_owned(),
    }
}

fn gen_line(rng: &mut Rng) -> String {
    match rng.below(100) {
        0 => return String::new(),
        1 => return format!("# {}", gen_text(rng, 20, 30)),
        2 => return format!("  \t# {}", gen_text(rng, 20, 30)),
        3 => return " \t ".to_owned(),
        _ => {}
    }
    let sep = |rng: &mut Rng| {
        if rng.chance(90) {
            " "
        } else {
            rng.pick(&["  ", "   "])
        }
    };
    let mut line = String::new();
    if rng.chance(5) {
        line.push_str(rng.pick(&[" ", "\t", "  "]));
    }
    line.push_str(&gen_name(rng, escape_measurement));
    for _ in 0..rng.below(5) {
        line.push(',');
        line.push_str(&gen_name(rng, escape_tag));
        line.push('=');
        line.push_str(&gen_name(rng, escape_tag));
    }
    line.push_str(sep(rng));
    for n in 0..1 + rng.below(5) {
        if n > 0 {
            line.push(',');
        }
        line.push_str(&gen_name(rng, escape_tag));
        line.push('=');
        line.push_str(&gen_value(rng));
    }
    if rng.chance(60) {
        line.push_str(sep(rng));
        match rng.below(20) {
            0 => line.push_str(rng.pick(&["12a", "-", "+5", "1.5", "99999999999999999999"])),
            1 => line.push_str("-9223372036854775808"),
            _ => line.push_str(&(rng.next() as i64 >> rng.below(64)).to_string()),
        }
    }
    if rng.chance(3) {
        line.push_str(rng.pick(&[" ", "  ", ",", ", 5", " 5 6"]));
    }
    if rng.chance(12) {
        mutate(rng, &mut line);
    }
    line
}

/// Damages `line` at a random character boundary.
fn mutate(rng: &mut Rng, line: &mut String) {
    let boundaries: Vec<usize> = line
        .char_indices()
        .map(|(i, _)| i)
        .chain([line.len()])
        .collect();
    let at = boundaries[rng.below(boundaries.len())];
    match rng.below(4) {
        0 if at < line.len() => {
            line.remove(at);
        }
        1 => line.truncate(at),
        _ => line.insert(
            at,
            rng.pick(&[',', ' ', '=', '\\', '"', 't', '1', '#', 'i']),
        ),
    }
}

#[test]
fn generated_corpus_matches_oracle() {
    let mut rng = Rng(0x5eed);
    let lines: Vec<String> = (0..40_000).map(|_| gen_line(&mut rng)).collect();
    let (mismatches, [agree_ok, agree_err, differ]) = compare(&lines, 7);
    println!("both accepted {agree_ok}, both rejected {agree_err}, allowed differences {differ}");
    assert!(
        mismatches.is_empty(),
        "{} mismatches, first ones:\n{}",
        mismatches.len(),
        mismatches[..mismatches.len().min(20)].join("\n")
    );
    // The corpus must exercise both outcomes substantially.
    assert!(agree_ok > 20_000, "{agree_ok}");
    assert!(agree_err > 4_000, "{agree_err}");
}

#[test]
fn edge_cases_match_oracle() {
    let cases = [
        "m f=1",
        "m f=1 ",
        "m f=1 123 ",
        "m  f=1   123",
        " m f=1",
        "\t m f=1",
        "m\tx f=1",
        "m,t=a\tb f=1",
        "m,a,b=c f=1",
        "m,a=b,,c=d f=1",
        "m a,b=1",
        "m,a=b=c f=1",
        "m=1 f=1",
        r"m\ f=1",
        r"m\\ f=1",
        r"m\\\\ f=1",
        r"m\\a f=1",
        r"m\=a f=1",
        r"m\a f=1",
        r"\ m f=1",
        r"\#m f=1",
        r"m,a\=b=c f=1",
        r"m,a=b\\ f=1",
        r"m,a=b\\\\ f=1",
        r"m,a=b\ c f=1",
        r"m,a=b\,c f=1",
        r"m,a\ b=c f=1",
        r"m,a=\=b f=1",
        r"m f\ x=1",
        r"m f\,x=1",
        r"m f\=x=1",
        r"m f\\=1",
        r"m f\a=1",
        r"m\",
        r"m f=1 \",
        "m f=.5",
        "m f=1.",
        "m f=1e400",
        "m f=-1e400",
        "m f=1E+05",
        "m f=1e-05",
        "m f=+1",
        "m f=-1u",
        "m f=99999999999999999999",
        "m f=99999999999999999999i",
        "m f=1.5i",
        "m f=1e5i",
        "m f=tru",
        "m f=t",
        "m f=tRUE",
        r#"m f="a\"b\\c\d""#,
        r#"m f="abc\""#,
        r#"m f="""#,
        r#"m f="a"x"#,
        r#"m f="a\\""#,
        r#"m f="\"#,
        r#"m f="a b,c=d" 1"#,
        "m f=1 123abc",
        "m f=1 99999999999999999999",
        "m f=1 -9223372036854775808",
        "m f=1 9223372036854775807",
        "m f=1 -5",
        "m f=1 -0",
        "m f=1 +5",
        "m f=-0i",
        "m\0x f=1",
        "m,t\0=v f=1",
        "m f=\"a\tb\"",
        "m,\"t\"=v \"f\"=1",
        "m f=1,f=2",
        "m,a=b,a=c f=1",
        "m f=1,",
        "m f=1,g=2,",
        "m f=1, 5",
        "m f=1,,g=2",
        "m, f=1",
        "m,=v f=1",
        "m,k= f=1",
        "m,k f=1",
        "m,k=v, f=1",
        ",a=b f=1",
        "m f=1 123\t",
        "#m f=1",
        " #m f=1",
        "m f=1 1 2",
        "m f=00.5",
        "m f=-.5",
        "m f=1.5e",
        "m f=1i2",
        "m f=12u",
        "m f=18446744073709551616u",
        "m f=18446744073709551615u",
        "m f=-9223372036854775808i",
        "m f=-9223372036854775809i",
        "m f=9223372036854775807i",
        "m f=9223372036854775808i",
        "m",
        "m ",
        "m,a=b",
        "m,a=b ",
        "m f",
        "m f=",
        "m =1",
        "m f= 1",
        "m f=1 =",
        "m\u{a0}x f=1",
        "日本,語=値 フィールド=\"値\" 1",
        "m,k=v f=\"a\rb\"",
        "m\rx f=1",
    ];
    let lines: Vec<String> = cases.iter().map(|s| s.to_string()).collect();
    let (mismatches, _) = compare(&lines, 0);
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
    // The same with CRLF line endings.
    let (mismatches, _) = compare(&lines, 1);
    assert!(mismatches.is_empty(), "{}", mismatches.join("\n"));
}
