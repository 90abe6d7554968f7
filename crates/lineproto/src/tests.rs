//! Data-driven unit tests: each table row is an input and the exact
//! expected result (a rendering of the accepted line, or the error with its
//! column).

use std::borrow::Cow;
use std::fmt::Write as _;

use crate::*;

/// A compact, unambiguous rendering of an accepted line: measurement, tags
/// and field keys as Rust string literals (unescaped), values typed.
fn render(line: &Line<'_>) -> String {
    let mut s = format!("{:?}", line.measurement.unescape());
    for (k, v) in &line.tags {
        write!(s, ",{:?}={:?}", k.unescape(), v.unescape()).unwrap();
    }
    s.push(' ');
    for (n, (k, v)) in line.fields.iter().enumerate() {
        if n > 0 {
            s.push(',');
        }
        write!(s, "{:?}=", k.unescape()).unwrap();
        match v {
            FieldValue::Float(f) => write!(s, "{f:?}"),
            FieldValue::Integer(i) => write!(s, "{i}i"),
            FieldValue::UInteger(u) => write!(s, "{u}u"),
            FieldValue::String(e) => write!(s, "s{:?}", e.unescape()),
            FieldValue::Boolean(b) => write!(s, "{b}"),
        }
        .unwrap();
    }
    if line.timestamp_given {
        write!(s, " {}", line.timestamp).unwrap();
    } else {
        write!(s, " default:{}", line.timestamp).unwrap();
    }
    s
}

/// What a single-line input must produce.
enum Want {
    /// Accepted, rendering as given.
    Ok(&'static str),
    /// Rejected at this 1-based column with this kind.
    Err(usize, ErrorKind),
}

fn parse_one(input: &str, options: ParseOptions) -> Result<String, (usize, usize, ErrorKind)> {
    let mut results: Vec<_> = Parser::new(input.as_bytes(), options).collect();
    assert_eq!(
        results.len(),
        1,
        "expected exactly one result for {input:?}"
    );
    match results.pop().unwrap() {
        Ok(line) => Ok(render(&line)),
        Err(e) => Err((e.line_number, e.column, e.kind)),
    }
}

#[track_caller]
fn check_with(options: ParseOptions, cases: &[(&str, Want)]) {
    let mut failures = String::new();
    for (input, want) in cases {
        let got = parse_one(input, options);
        let ok = match (want, &got) {
            (Want::Ok(w), Ok(g)) => w == g,
            (Want::Err(col, kind), Err((1, c, k))) => col == c && kind == k,
            _ => false,
        };
        if !ok {
            let want = match want {
                Want::Ok(w) => format!("Ok({w})"),
                Want::Err(c, k) => format!("Err(col {c}, {k:?})"),
            };
            writeln!(failures, "input {input:?}\n  want {want}\n  got  {got:?}").unwrap();
        }
    }
    assert!(failures.is_empty(), "mismatches:\n{failures}");
}

#[track_caller]
fn check(cases: &[(&str, Want)]) {
    check_with(ParseOptions::default(), cases);
}

fn s(x: &str) -> String {
    x.to_owned()
}

fn invalid(key: &str, value: &str) -> ErrorKind {
    ErrorKind::InvalidFieldValue {
        key: s(key),
        value: s(value),
    }
}

use Want::{Err as E, Ok as O};

#[test]
fn field_types() {
    check(&[
        // Floats.
        ("m f=1", O(r#""m" "f"=1.0 default:0"#)),
        ("m f=-1", O(r#""m" "f"=-1.0 default:0"#)),
        ("m f=-0", O(r#""m" "f"=-0.0 default:0"#)),
        ("m f=1.5", O(r#""m" "f"=1.5 default:0"#)),
        ("m f=-1.5e10", O(r#""m" "f"=-15000000000.0 default:0"#)),
        ("m f=1E5", O(r#""m" "f"=100000.0 default:0"#)),
        ("m f=1e+5", O(r#""m" "f"=100000.0 default:0"#)),
        ("m f=1.5E-3", O(r#""m" "f"=0.0015 default:0"#)),
        ("m f=00.5", O(r#""m" "f"=0.5 default:0"#)),
        // Floats without digits on one side of the point, as InfluxDB
        // takes them.
        ("m f=.5", O(r#""m" "f"=0.5 default:0"#)),
        ("m f=-.5", O(r#""m" "f"=-0.5 default:0"#)),
        ("m f=5.", O(r#""m" "f"=5.0 default:0"#)),
        ("m f=-5.", O(r#""m" "f"=-5.0 default:0"#)),
        ("m f=0.", O(r#""m" "f"=0.0 default:0"#)),
        ("m f=1.e5", O(r#""m" "f"=100000.0 default:0"#)),
        ("m f=1.E+5", O(r#""m" "f"=100000.0 default:0"#)),
        ("m f=.5e3", O(r#""m" "f"=500.0 default:0"#)),
        ("m f=-.5E-3", O(r#""m" "f"=-0.0005 default:0"#)),
        ("m f=.5,g=5. 7", O(r#""m" "f"=0.5,"g"=5.0 7"#)),
        ("m f=1e-400", O(r#""m" "f"=0.0 default:0"#)),
        ("m f=99999999999999999999", O(r#""m" "f"=1e20 default:0"#)),
        (
            "m f=9007199254740993",
            O(r#""m" "f"=9007199254740992.0 default:0"#),
        ),
        // Integers.
        ("m f=1i", O(r#""m" "f"=1i default:0"#)),
        ("m f=-0i", O(r#""m" "f"=0i default:0"#)),
        ("m f=007i", O(r#""m" "f"=7i default:0"#)),
        (
            "m f=9223372036854775807i",
            O(r#""m" "f"=9223372036854775807i default:0"#),
        ),
        (
            "m f=-9223372036854775808i",
            O(r#""m" "f"=-9223372036854775808i default:0"#),
        ),
        (
            "m f=000000000000000000000000001i",
            O(r#""m" "f"=1i default:0"#),
        ),
        // Unsigned.
        ("m f=0u", O(r#""m" "f"=0u default:0"#)),
        (
            "m f=18446744073709551615u",
            O(r#""m" "f"=18446744073709551615u default:0"#),
        ),
        // Strings.
        ("m f=\"\"", O(r#""m" "f"=s"" default:0"#)),
        ("m f=\"a b,c=d\"", O(r#""m" "f"=s"a b,c=d" default:0"#)),
        ("m f=\"日本\"", O(r#""m" "f"=s"日本" default:0"#)),
        ("m f=\"tab\there\"", O(r#""m" "f"=s"tab\there" default:0"#)),
        // Several, of mixed types, duplicates passed through.
        (
            "m a=1,b=2i,c=3u,d=\"x\",e=t,a=2",
            O(r#""m" "a"=1.0,"b"=2i,"c"=3u,"d"=s"x","e"=true,"a"=2.0 default:0"#),
        ),
    ]);
}

#[test]
fn field_value_errors() {
    check(&[
        ("m f=.", E(5, invalid("f", "."))),
        ("m f=-.", E(5, invalid("f", "-."))),
        ("m f=.e5", E(5, invalid("f", ".e5"))),
        ("m f=-e5", E(5, invalid("f", "-e5"))),
        ("m f=..5", E(5, invalid("f", "..5"))),
        ("m f=1.5.5", E(5, invalid("f", "1.5.5"))),
        ("m f=.5.", E(5, invalid("f", ".5."))),
        ("m f=1e", E(5, invalid("f", "1e"))),
        ("m f=1e+", E(5, invalid("f", "1e+"))),
        ("m f=1.5e", E(5, invalid("f", "1.5e"))),
        ("m f=+1", E(5, invalid("f", "+1"))),
        ("m f=-", E(5, invalid("f", "-"))),
        ("m f=--1", E(5, invalid("f", "--1"))),
        ("m f=NaN", E(5, invalid("f", "NaN"))),
        ("m f=nan", E(5, invalid("f", "nan"))),
        ("m f=inf", E(5, invalid("f", "inf"))),
        ("m f=-inf", E(5, invalid("f", "-inf"))),
        ("m f=Infinity", E(5, invalid("f", "Infinity"))),
        ("m f=abc", E(5, invalid("f", "abc"))),
        ("m f=1x", E(5, invalid("f", "1x"))),
        ("m f=1=2", E(5, invalid("f", "1=2"))),
        ("m f=1\t2", E(5, invalid("f", "1\t2"))),
        ("m f=0x10", E(5, invalid("f", "0x10"))),
        ("m f=1_000", E(5, invalid("f", "1_000"))),
        ("m f=1ix", E(5, invalid("f", "1ix"))),
        ("m f=1i2", E(5, invalid("f", "1i2"))),
        (
            "m f=1uu",
            E(
                5,
                ErrorKind::InvalidInteger {
                    key: s("f"),
                    value: s("1uu"),
                },
            ),
        ),
        ("m f=\"a\"x", E(5, invalid("f", "\"a\"x"))),
        ("m f=\"a b\"x y", E(5, invalid("f", "\"a b\"x"))),
        ("m f='a'", E(5, invalid("f", "'a'"))),
        (
            "m f=1.5i",
            E(
                5,
                ErrorKind::InvalidInteger {
                    key: s("f"),
                    value: s("1.5i"),
                },
            ),
        ),
        (
            "m f=.5i",
            E(
                5,
                ErrorKind::InvalidInteger {
                    key: s("f"),
                    value: s(".5i"),
                },
            ),
        ),
        (
            "m f=1e5i",
            E(
                5,
                ErrorKind::InvalidInteger {
                    key: s("f"),
                    value: s("1e5i"),
                },
            ),
        ),
        (
            "m f=-1u",
            E(
                5,
                ErrorKind::InvalidInteger {
                    key: s("f"),
                    value: s("-1u"),
                },
            ),
        ),
        (
            "m f=9223372036854775808i",
            E(
                5,
                ErrorKind::IntegerOutOfRange {
                    key: s("f"),
                    value: s("9223372036854775808i"),
                },
            ),
        ),
        (
            "m f=-9223372036854775809i",
            E(
                5,
                ErrorKind::IntegerOutOfRange {
                    key: s("f"),
                    value: s("-9223372036854775809i"),
                },
            ),
        ),
        (
            "m f=99999999999999999999i",
            E(
                5,
                ErrorKind::IntegerOutOfRange {
                    key: s("f"),
                    value: s("99999999999999999999i"),
                },
            ),
        ),
        (
            "m f=18446744073709551616u",
            E(
                5,
                ErrorKind::IntegerOutOfRange {
                    key: s("f"),
                    value: s("18446744073709551616u"),
                },
            ),
        ),
        (
            "m x=1,f=1e400",
            E(
                9,
                ErrorKind::FloatOutOfRange {
                    key: s("f"),
                    value: s("1e400"),
                },
            ),
        ),
        (
            "m f=-1.5e400",
            E(
                5,
                ErrorKind::FloatOutOfRange {
                    key: s("f"),
                    value: s("-1.5e400"),
                },
            ),
        ),
        (
            "m f=\"abc",
            E(5, ErrorKind::UnterminatedString { key: s("f") }),
        ),
        (
            "m f=\"abc\\\"",
            E(5, ErrorKind::UnterminatedString { key: s("f") }),
        ),
        (
            "m a=1,f=\"",
            E(9, ErrorKind::UnterminatedString { key: s("f") }),
        ),
    ]);
}

#[test]
fn booleans() {
    let mut cases = Vec::new();
    for t in ["t", "T", "true", "True", "TRUE"] {
        cases.push((format!("m f={t}"), O(r#""m" "f"=true default:0"#)));
    }
    for f in ["f", "F", "false", "False", "FALSE"] {
        cases.push((format!("m f={f}"), O(r#""m" "f"=false default:0"#)));
    }
    for bad in ["tRUE", "tru", "truee", "yes", "TrUe", "fals", "F0", "ff"] {
        cases.push((format!("m f={bad}"), E(5, invalid("f", bad))));
    }
    let cases: Vec<(&str, Want)> = cases
        .iter()
        .map(|(i, w)| (i.as_str(), clone_want(w)))
        .collect();
    check(&cases);
    // Booleans as non-final fields and before a timestamp.
    check(&[(
        "m a=t,b=FALSE,c=True 5",
        O(r#""m" "a"=true,"b"=false,"c"=true 5"#),
    )]);
}

fn clone_want(w: &Want) -> Want {
    match w {
        Want::Ok(s) => Want::Ok(s),
        Want::Err(c, k) => Want::Err(*c, k.clone()),
    }
}

#[test]
fn escapes_in_every_position() {
    check(&[
        // Measurement: `\,` `\ ` `\=` `\"` `\\` unescape; others are literal.
        (r"a\,b f=1", O(r#""a,b" "f"=1.0 default:0"#)),
        (r"a\ b f=1", O(r#""a b" "f"=1.0 default:0"#)),
        (r"a\\b f=1", O(r#""a\\b" "f"=1.0 default:0"#)),
        (r"a\=b f=1", O(r#""a=b" "f"=1.0 default:0"#)),
        (r#"a\"b f=1"#, O(r#""a\"b" "f"=1.0 default:0"#)),
        (r"a\\=b f=1", O(r#""a\\=b" "f"=1.0 default:0"#)),
        (r"a\xb f=1", O(r#""a\\xb" "f"=1.0 default:0"#)),
        (r"a\éb f=1", O(r#""a\\éb" "f"=1.0 default:0"#)),
        (r"a=b f=1", O(r#""a=b" "f"=1.0 default:0"#)),
        ("a\"b f=1", O(r#""a\"b" "f"=1.0 default:0"#)),
        (r"\#a f=1", O(r#""\\#a" "f"=1.0 default:0"#)),
        (r"\ a f=1", O(r#"" a" "f"=1.0 default:0"#)),
        // Tag keys.
        (r"m,a\,b=v f=1", O(r#""m","a,b"="v" "f"=1.0 default:0"#)),
        (r"m,a\=b=v f=1", O(r#""m","a=b"="v" "f"=1.0 default:0"#)),
        (r"m,a\ b=v f=1", O(r#""m","a b"="v" "f"=1.0 default:0"#)),
        (r"m,a\\b=v f=1", O(r#""m","a\\b"="v" "f"=1.0 default:0"#)),
        (r"m,a\xb=v f=1", O(r#""m","a\\xb"="v" "f"=1.0 default:0"#)),
        (
            r#"m,a\"b=v f=1"#,
            O(r#""m","a\\\"b"="v" "f"=1.0 default:0"#),
        ),
        // Tag values.
        (r"m,k=a\,b f=1", O(r#""m","k"="a,b" "f"=1.0 default:0"#)),
        (r"m,k=a\=b f=1", O(r#""m","k"="a=b" "f"=1.0 default:0"#)),
        (r"m,k=a\ b f=1", O(r#""m","k"="a b" "f"=1.0 default:0"#)),
        (r"m,k=a\\b f=1", O(r#""m","k"="a\\b" "f"=1.0 default:0"#)),
        (
            r#"m,k=a\"b f=1"#,
            O(r#""m","k"="a\\\"b" "f"=1.0 default:0"#),
        ),
        (r#"m,k="v" f=1"#, O(r#""m","k"="\"v\"" "f"=1.0 default:0"#)),
        // An unescaped `=` may start a tag value (InfluxDB looks for one
        // only after the first byte).
        (r"m,k==v f=1", O(r#""m","k"="=v" "f"=1.0 default:0"#)),
        (r"m,k== f=1", O(r#""m","k"="=" "f"=1.0 default:0"#)),
        (r"m,k=\=v f=1", O(r#""m","k"="=v" "f"=1.0 default:0"#)),
        // Field keys.
        (r"m a\,b=1", O(r#""m" "a,b"=1.0 default:0"#)),
        (r"m a\=b=1", O(r#""m" "a=b"=1.0 default:0"#)),
        (r"m a\ b=1", O(r#""m" "a b"=1.0 default:0"#)),
        (r"m a\\b=1", O(r#""m" "a\\b"=1.0 default:0"#)),
        (r#"m a\"b=1"#, O(r#""m" "a\"b"=1.0 default:0"#)),
        (r"m a\xb=1", O(r#""m" "a\\xb"=1.0 default:0"#)),
        (r#"m "f"=1"#, O(r#""m" "\"f\""=1.0 default:0"#)),
        // String field values: `\"` and `\\` unescape, other backslashes are literal.
        (r#"m f="a\"b""#, O(r#""m" "f"=s"a\"b" default:0"#)),
        (r#"m f="a\\b""#, O(r#""m" "f"=s"a\\b" default:0"#)),
        (r#"m f="a\nb""#, O(r#""m" "f"=s"a\\nb" default:0"#)),
        (
            r#"m f="a\""#,
            E(5, ErrorKind::UnterminatedString { key: s("f") }),
        ),
        (r#"m f="a\\""#, O(r#""m" "f"=s"a\\" default:0"#)),
        (r#"m f="\\\"""#, O(r#""m" "f"=s"\\\"" default:0"#)),
        (
            r#"m f="a\b\\c\"d""#,
            O(r#""m" "f"=s"a\\b\\c\"d" default:0"#),
        ),
        // Tabs and NUL bytes are ordinary characters.
        (
            "m\tx,k\t=v\t f\t=1",
            O(r#""m\tx","k\t"="v\t" "f\t"=1.0 default:0"#),
        ),
        (
            "m\0,k\0=v\0 f\0=1",
            O(r#""m\0","k\0"="v\0" "f\0"=1.0 default:0"#),
        ),
        // Unicode everywhere.
        (
            "mé,ключ=значение 字段=\"值\" 1",
            O(r#""mé","ключ"="значение" "字段"=s"值" 1"#),
        ),
    ]);
}

#[test]
fn whitespace_and_timestamps() {
    let opts = ParseOptions {
        default_time: 42,
        ..ParseOptions::default()
    };
    check_with(
        opts,
        &[
            ("m f=1", O(r#""m" "f"=1.0 default:42"#)),
            ("m f=1 ", O(r#""m" "f"=1.0 default:42"#)),
            ("m f=1   ", O(r#""m" "f"=1.0 default:42"#)),
            ("m f=1 123", O(r#""m" "f"=1.0 123"#)),
            ("m f=1 123  ", O(r#""m" "f"=1.0 123"#)),
            ("m   f=1   123", O(r#""m" "f"=1.0 123"#)),
            ("m,k=v   f=1", O(r#""m","k"="v" "f"=1.0 default:42"#)),
            ("  m f=1", O(r#""m" "f"=1.0 default:42"#)),
            ("\t \tm f=1", O(r#""m" "f"=1.0 default:42"#)),
            // Tabs and NUL bytes are skipped like spaces before a line and
            // after the spaces before the field set and the timestamp.
            ("\0m f=1", O(r#""m" "f"=1.0 default:42"#)),
            ("\0\t m f=1", O(r#""m" "f"=1.0 default:42"#)),
            ("m \tf=1", O(r#""m" "f"=1.0 default:42"#)),
            ("m,k=v \0\t f=1", O(r#""m","k"="v" "f"=1.0 default:42"#)),
            ("m f=1 \t5", O(r#""m" "f"=1.0 5"#)),
            ("m f=1 \t", O(r#""m" "f"=1.0 default:42"#)),
            ("m f=1 \0 ", O(r#""m" "f"=1.0 default:42"#)),
            ("m f=1 -5", O(r#""m" "f"=1.0 -5"#)),
            ("m f=1 -0", O(r#""m" "f"=1.0 0"#)),
            ("m f=1 0", O(r#""m" "f"=1.0 0"#)),
            (
                "m f=1 0000000000000000000000000123",
                O(r#""m" "f"=1.0 123"#),
            ),
            (
                "m f=1 9223372036854775806",
                O(r#""m" "f"=1.0 9223372036854775806"#),
            ),
            (
                "m f=1 -9223372036854775806",
                O(r#""m" "f"=1.0 -9223372036854775806"#),
            ),
            ("m f=\"a b\" 1", O(r#""m" "f"=s"a b" 1"#)),
        ],
    );
}

#[test]
fn precisions() {
    let cases: &[(&str, Precision, i64)] = &[
        ("ns", Precision::Nanoseconds, 7),
        ("n", Precision::Nanoseconds, 7),
        ("us", Precision::Microseconds, 7_000),
        ("u", Precision::Microseconds, 7_000),
        ("µs", Precision::Microseconds, 7_000),
        ("µ", Precision::Microseconds, 7_000),
        ("ms", Precision::Milliseconds, 7_000_000),
        ("s", Precision::Seconds, 7_000_000_000),
        ("m", Precision::Minutes, 420_000_000_000),
        ("h", Precision::Hours, 25_200_000_000_000),
    ];
    for &(name, precision, nanos) in cases {
        assert_eq!(Precision::parse(name), Ok(precision), "{name}");
        assert_eq!(name.parse::<Precision>(), Ok(precision), "{name}");
        assert_eq!(precision.to_nanos(7), Some(nanos));
        assert_eq!(precision.nanos_per_unit() * 7, nanos);
        assert_eq!(Precision::parse(precision.as_str()), Ok(precision));
        let opts = ParseOptions {
            precision,
            default_time: 9,
            ..ParseOptions::default()
        };
        let parsed = parse(b"m f=1 7\nm f=1\nm f=1 -7", opts);
        assert!(parsed.errors.is_empty());
        let got: Vec<_> = parsed
            .lines
            .iter()
            .map(|l| (l.timestamp, l.timestamp_given))
            .collect();
        assert_eq!(got, [(nanos, true), (9, false), (-nanos, true)], "{name}");

        // Overflow in the conversion.
        if precision != Precision::Nanoseconds {
            let limit = i64::MAX / precision.nanos_per_unit();
            let ok = format!("m f=1 {limit}");
            let too_big = format!("m f=1 {}", limit + 1);
            let too_small = format!("m f=1 -{}", limit + 2);
            check_with(
                opts,
                &[
                    (
                        ok.as_str(),
                        O(Box::leak(
                            format!(r#""m" "f"=1.0 {}"#, limit * precision.nanos_per_unit())
                                .into_boxed_str(),
                        )),
                    ),
                    (
                        too_big.as_str(),
                        E(
                            7,
                            ErrorKind::TimestampOutOfRange {
                                value: (limit + 1).to_string(),
                            },
                        ),
                    ),
                    (
                        too_small.as_str(),
                        E(
                            7,
                            ErrorKind::TimestampOutOfRange {
                                value: format!("-{}", limit + 2),
                            },
                        ),
                    ),
                ],
            );
        }
    }
    assert_eq!(Precision::default(), Precision::Nanoseconds);
    assert_eq!(Precision::Hours.to_nanos(i64::MAX), None);
    assert_eq!(Precision::Nanoseconds.to_nanos(i64::MIN), Some(i64::MIN));
    for bad in ["", "NS", "Ms", "sec", "d", "ns ", "x"] {
        let err = Precision::parse(bad).unwrap_err();
        assert_eq!(err, UnknownPrecision(bad.to_owned()));
        assert_eq!(
            err.to_string(),
            format!("unknown precision '{bad}' (expected one of ns, us, ms, s, m, h)")
        );
    }
    let long = "x".repeat(100);
    let msg = Precision::parse(&long).unwrap_err().to_string();
    assert!(msg.contains(&format!("'{}...'", "x".repeat(61))), "{msg}");
    assert_eq!(Precision::Minutes.to_string(), "m");
}

#[test]
fn structural_errors_with_columns() {
    check(&[
        (",k=v f=1", E(1, ErrorKind::MissingMeasurement)),
        ("  ,k=v f=1", E(3, ErrorKind::MissingMeasurement)),
        ("m", E(2, ErrorKind::MissingFields)),
        ("m ", E(3, ErrorKind::MissingFields)),
        ("m   ", E(5, ErrorKind::MissingFields)),
        ("m,k=v", E(6, ErrorKind::MissingFields)),
        ("m,k=v ", E(7, ErrorKind::MissingFields)),
        ("m\tf=1", E(6, ErrorKind::MissingFields)),
        (r"m\ f=1", E(7, ErrorKind::MissingFields)),
        ("m,", E(3, ErrorKind::EmptyTagKey)),
        ("m,=v f=1", E(3, ErrorKind::EmptyTagKey)),
        ("m, f=1", E(3, ErrorKind::EmptyTagKey)),
        ("m,k=v,=w f=1", E(7, ErrorKind::EmptyTagKey)),
        ("m,k=v, f=1", E(7, ErrorKind::EmptyTagKey)),
        ("m,k f=1", E(4, ErrorKind::MissingTagValue { key: s("k") })),
        ("m,k", E(4, ErrorKind::MissingTagValue { key: s("k") })),
        ("m,k= f=1", E(5, ErrorKind::MissingTagValue { key: s("k") })),
        (
            "m,k=,j=v f=1",
            E(5, ErrorKind::MissingTagValue { key: s("k") }),
        ),
        ("m,k=", E(5, ErrorKind::MissingTagValue { key: s("k") })),
        // Unescaped commas in keys and `=` in tag values, which InfluxDB
        // rejects.
        (
            "m,a,b=v f=1",
            E(4, ErrorKind::MissingTagValue { key: s("a") }),
        ),
        ("m,a=1,,b=2 f=1", E(7, ErrorKind::EmptyTagKey)),
        (
            "m,k=a=b f=1",
            E(6, ErrorKind::EqualsInTagValue { key: s("k") }),
        ),
        (
            "m,k=v= f=1",
            E(6, ErrorKind::EqualsInTagValue { key: s("k") }),
        ),
        (
            "m,k==v= f=1",
            E(7, ErrorKind::EqualsInTagValue { key: s("k") }),
        ),
        (
            "m a,b=1",
            E(4, ErrorKind::MissingFieldValue { key: s("a") }),
        ),
        ("m f=1,,g=2", E(7, ErrorKind::EmptyFieldKey)),
        ("m =1", E(3, ErrorKind::EmptyFieldKey)),
        ("m f=1,", E(7, ErrorKind::EmptyFieldKey)),
        ("m f=1, 5", E(7, ErrorKind::EmptyFieldKey)),
        ("m f=1,=2", E(7, ErrorKind::EmptyFieldKey)),
        ("m f", E(4, ErrorKind::MissingFieldValue { key: s("f") })),
        ("m f 1", E(4, ErrorKind::MissingFieldValue { key: s("f") })),
        ("m f=", E(5, ErrorKind::MissingFieldValue { key: s("f") })),
        ("m f= 1", E(5, ErrorKind::MissingFieldValue { key: s("f") })),
        (
            "m f=,g=1",
            E(5, ErrorKind::MissingFieldValue { key: s("f") }),
        ),
        (
            "m f=1,g",
            E(8, ErrorKind::MissingFieldValue { key: s("g") }),
        ),
        (
            "m f=1,g 5",
            E(8, ErrorKind::MissingFieldValue { key: s("g") }),
        ),
        // Trailing backslashes, lone or escaped, in every name.
        (r"m\", E(2, ErrorKind::TrailingBackslash { name: s(r"m\") })),
        (
            r"m\\ f=1",
            E(3, ErrorKind::TrailingBackslash { name: s(r"m\\") }),
        ),
        (
            r"m\\,k=v f=1",
            E(3, ErrorKind::TrailingBackslash { name: s(r"m\\") }),
        ),
        (
            r"m,k\\=v f=1",
            E(5, ErrorKind::TrailingBackslash { name: s(r"k\\") }),
        ),
        (
            r"m,k=v\\ f=1",
            E(7, ErrorKind::TrailingBackslash { name: s(r"v\\") }),
        ),
        (
            r"m,k=v\",
            E(6, ErrorKind::TrailingBackslash { name: s(r"v\") }),
        ),
        (
            r"m f\\=1",
            E(5, ErrorKind::TrailingBackslash { name: s(r"f\\") }),
        ),
        (
            r"m f\",
            E(4, ErrorKind::TrailingBackslash { name: s(r"f\") }),
        ),
        // Timestamps.
        (
            "m f=1 x",
            E(7, ErrorKind::InvalidTimestamp { value: s("x") }),
        ),
        (
            "m f=1 12x",
            E(7, ErrorKind::InvalidTimestamp { value: s("12x") }),
        ),
        (
            "m f=1 -",
            E(7, ErrorKind::InvalidTimestamp { value: s("-") }),
        ),
        (
            "m f=1 +5",
            E(7, ErrorKind::InvalidTimestamp { value: s("+5") }),
        ),
        (
            "m f=1 1.5",
            E(7, ErrorKind::InvalidTimestamp { value: s("1.5") }),
        ),
        (
            "m f=1 5,6",
            E(7, ErrorKind::InvalidTimestamp { value: s("5") }),
        ),
        (
            "m f=1 5\t",
            E(7, ErrorKind::InvalidTimestamp { value: s("5\t") }),
        ),
        (
            "m f=1 9223372036854775808",
            E(
                7,
                ErrorKind::TimestampOutOfRange {
                    value: s("9223372036854775808"),
                },
            ),
        ),
        (
            "m f=1 -9223372036854775809",
            E(
                7,
                ErrorKind::TimestampOutOfRange {
                    value: s("-9223372036854775809"),
                },
            ),
        ),
        (
            "m f=1 9223372036854775807",
            E(
                7,
                ErrorKind::TimestampOutOfRange {
                    value: s("9223372036854775807"),
                },
            ),
        ),
        (
            "m f=1 -9223372036854775807",
            E(
                7,
                ErrorKind::TimestampOutOfRange {
                    value: s("-9223372036854775807"),
                },
            ),
        ),
        (
            "m f=1 -9223372036854775808",
            E(
                7,
                ErrorKind::TimestampOutOfRange {
                    value: s("-9223372036854775808"),
                },
            ),
        ),
        (
            "m f=1 99999999999999999999999",
            E(
                7,
                ErrorKind::TimestampOutOfRange {
                    value: s("99999999999999999999999"),
                },
            ),
        ),
        (
            "m f=1 5 6",
            E(9, ErrorKind::TrailingGarbage { text: s("6") }),
        ),
        (
            "m f=1 5  x y",
            E(10, ErrorKind::TrailingGarbage { text: s("x y") }),
        ),
    ]);
}

#[test]
fn comments_blank_lines_crlf_and_line_numbers() {
    let body =
        b"# header\n\n   \n\t\nm f=1 1\r\n  # indented comment\r\n\r\nm f=2 2\r\nm f=3\n#last";
    let parsed = parse(body, ParseOptions::default());
    assert!(parsed.errors.is_empty(), "{:?}", parsed.errors);
    let got: Vec<_> = parsed
        .lines
        .iter()
        .map(|l| (l.line_number, render(l)))
        .collect();
    assert_eq!(
        got,
        [
            (5, s(r#""m" "f"=1.0 1"#)),
            (8, s(r#""m" "f"=2.0 2"#)),
            (9, s(r#""m" "f"=3.0 default:0"#)),
        ]
    );

    // CRLF with an error: the column ignores nothing before it.
    let parsed = parse(b"m f=1\r\nm f=x\r\n", ParseOptions::default());
    assert_eq!(parsed.lines.len(), 1);
    assert_eq!(
        parsed.errors,
        [LineError {
            line_number: 2,
            column: 5,
            kind: invalid("f", "x"),
        }]
    );

    // A final CR without LF is dropped too; a CR elsewhere is data.
    check(&[
        ("m f=1 5\r", O(r#""m" "f"=1.0 5"#)),
        ("m f=\"a\rb\"", O(r#""m" "f"=s"a\rb" default:0"#)),
        ("m f=1\r\r", E(5, invalid("f", "1\r"))),
    ]);

    // Empty input, only newlines, only comments.
    for body in [&b""[..], b"\n", b"\n\n\r\n", b"# a\n#b", b"   "] {
        let mut parser = Parser::new(body, ParseOptions::default());
        let mut line = Line::default();
        assert!(parser.next_into(&mut line).is_none(), "{body:?}");
        assert!(parser.next_into(&mut line).is_none(), "{body:?}");
    }
}

#[test]
fn line_feeds_in_string_values_continue_the_line() {
    // (body, accepted lines as (line number, rendering), rejected lines as
    // (line number, column, kind), physical lines).
    type Case = (
        &'static [u8],
        &'static [(usize, &'static str)],
        Vec<(usize, usize, ErrorKind)>,
        usize,
    );
    let cases: Vec<Case> = vec![
        // A string value may hold line feeds; the line numbers after it
        // count them.
        (
            b"m f=\"a\nb\" 1\nm g=2 2",
            &[(1, r#""m" "f"=s"a\nb" 1"#), (3, r#""m" "g"=2.0 2"#)],
            vec![],
            3,
        ),
        (
            b"m f=\"\r\n\\\n\",g=t\r\nm h=1",
            &[
                (1, r#""m" "f"=s"\r\n\\\n","g"=true default:0"#),
                (4, r#""m" "h"=1.0 default:0"#),
            ],
            vec![],
            4,
        ),
        // Outside string values, a line feed ends the line, after a
        // backslash too.
        (
            b"m,k=v\\\nx f=1\nm f=2",
            &[
                (2, r#""x" "f"=1.0 default:0"#),
                (3, r#""m" "f"=2.0 default:0"#),
            ],
            vec![(1, 6, ErrorKind::TrailingBackslash { name: s("v\\") })],
            3,
        ),
        // A rejected line ends where InfluxDB ends it: after its string
        // values, wherever the error is.
        (
            b"m f=x,g=\"a\nb\" 1\nm f=2 2",
            &[(3, r#""m" "f"=2.0 2"#)],
            vec![(1, 5, invalid("f", "x"))],
            3,
        ),
        (
            b"m,k= f=\"a\n\nb\" 1\nm f=2 2",
            &[(4, r#""m" "f"=2.0 2"#)],
            vec![(1, 5, ErrorKind::MissingTagValue { key: s("k") })],
            4,
        ),
        (
            b"m f=1 x=\"a\nb\"\nm f=2 2",
            &[(3, r#""m" "f"=2.0 2"#)],
            vec![
                (1, 7, ErrorKind::InvalidTimestamp { value: s("x=\"a") }),
                (2, 3, ErrorKind::MissingFields),
            ],
            3,
        ),
        // An unterminated string takes the rest of the body.
        (
            b"m f=\"abc\nm f=1\nm f=2\n",
            &[],
            vec![(1, 5, ErrorKind::UnterminatedString { key: s("f") })],
            3,
        ),
        // A quote on a later line closes it: the lines between are one.
        (
            b"m f=\"abc\nm f=1 1\nm g=\"x\" 2\nm h=3 3",
            &[(4, r#""m" "h"=3.0 3"#)],
            vec![(1, 5, invalid("f", "\"abc\nm f=1 1\nm g=\"x\""))],
            4,
        ),
        // Comments end at their line feed, quotes or not.
        (
            b"# a=\"b\nm f=1",
            &[(2, r#""m" "f"=1.0 default:0"#)],
            vec![],
            2,
        ),
    ];
    for (body, good, bad, physical) in cases {
        let mut parser = Parser::new(body, ParseOptions::default());
        let (mut accepted, mut rejected) = (Vec::new(), Vec::new());
        let mut line = Line::default();
        while let Some(result) = parser.next_into(&mut line) {
            match result {
                Ok(()) => accepted.push((line.line_number, render(&line))),
                Err(e) => rejected.push((e.line_number, e.column, e.kind)),
            }
        }
        let body = String::from_utf8_lossy(body);
        let want: Vec<_> = good.iter().map(|&(n, r)| (n, s(r))).collect();
        assert_eq!(accepted, want, "{body:?}");
        assert_eq!(rejected, bad, "{body:?}");
        assert_eq!(parser.lines_consumed(), physical, "{body:?}");
    }

    // The range of a line with a line feed in a string spans it.
    let body = b"m f=\"a\nb\" 1\r\nn g=1";
    let mut parser = Parser::new(body, ParseOptions::default());
    let mut line = Line::default();
    parser.next_into(&mut line).unwrap().unwrap();
    assert_eq!(&body[parser.last_line_range()], b"m f=\"a\nb\" 1");
}

#[test]
fn bad_lines_in_the_middle_do_not_stop_the_others() {
    let body = "\
cpu,host=a usage=1 1
cpu,host=b usage=2 2
cpu,host= usage=3 3
# comment
cpu,host=c usage=4 4
cpu,host=d usage=x 5

cpu,host=e usage=6 6
cpu,host=f usage=7 99999999999999999999
cpu,host=g usage=1.2.3 8
cpu,host=h usage=9 9
,host=i usage=10 10
cpu,host=j usage=11 11
cpu,host=k
cpu,host=l usage=13 13";
    let parsed = parse(body.as_bytes(), ParseOptions::default());
    let good: Vec<_> = parsed
        .lines
        .iter()
        .map(|l| (l.line_number, l.tag("host").unwrap().raw(), l.timestamp))
        .collect();
    assert_eq!(
        good,
        [
            (1, "a", 1),
            (2, "b", 2),
            (5, "c", 4),
            (8, "e", 6),
            (11, "h", 9),
            (13, "j", 11),
            (15, "l", 13),
        ]
    );
    let bad: Vec<_> = parsed
        .errors
        .iter()
        .map(|e| (e.line_number, e.column, e.kind.clone()))
        .collect();
    assert_eq!(
        bad,
        [
            (3, 10, ErrorKind::MissingTagValue { key: s("host") }),
            (6, 18, invalid("usage", "x")),
            (
                9,
                20,
                ErrorKind::TimestampOutOfRange {
                    value: s("99999999999999999999"),
                }
            ),
            (10, 18, invalid("usage", "1.2.3")),
            (12, 1, ErrorKind::MissingMeasurement),
            (14, 11, ErrorKind::MissingFields),
        ]
    );
    assert_eq!(
        parsed.errors[1].to_string(),
        "line 6, column 18: invalid field value 'x' for field 'usage'"
    );
}

#[test]
fn invalid_utf8_rejects_only_its_line() {
    let mut body = b"m f=1 1\nm,k=\xff f=2 2\nm f=\"\xc3\" 3\nm f=4 4\n".to_vec();
    body.extend_from_slice("m,k=é f=5 5".as_bytes());
    let parsed = parse(&body, ParseOptions::default());
    let good: Vec<_> = parsed.lines.iter().map(|l| l.timestamp).collect();
    assert_eq!(good, [1, 4, 5]);
    assert_eq!(
        parsed.errors,
        [
            LineError {
                line_number: 2,
                column: 5,
                kind: ErrorKind::InvalidUtf8,
            },
            LineError {
                line_number: 3,
                column: 6,
                kind: ErrorKind::InvalidUtf8,
            },
        ]
    );
    // An invalid comment line is just skipped.
    let parsed = parse(b"# \xff\xfe\nm f=1", ParseOptions::default());
    assert!(parsed.errors.is_empty());
    assert_eq!(parsed.lines.len(), 1);
}

#[test]
fn max_line_len() {
    let opts = ParseOptions {
        max_line_len: 8,
        ..ParseOptions::default()
    };
    // Exactly at the limit is fine, the line ending does not count, and
    // blank or comment lines are never too long.
    let body = b"m f=1 12\r\nm f=1 123\n# a long comment line\n              \nm f=2";
    let parsed = parse(body, opts);
    let good: Vec<_> = parsed.lines.iter().map(|l| l.line_number).collect();
    assert_eq!(good, [1, 5]);
    assert_eq!(
        parsed.errors,
        [LineError {
            line_number: 2,
            column: 9,
            kind: ErrorKind::LineTooLong { limit: 8 },
        }]
    );
    assert_eq!(
        parsed.errors[0].to_string(),
        "line 2, column 9: line is longer than the limit of 8 bytes"
    );
    // Indentation longer than the window a line may take (found by the
    // streaming property): the line is too long, not a panic.
    let tight = ParseOptions {
        max_line_len: 0,
        ..ParseOptions::default()
    };
    let parsed = parse(b"\t\t\t,", tight);
    assert!(parsed.lines.is_empty());
    let kinds: Vec<_> = parsed
        .errors
        .iter()
        .map(|e| (e.line_number, &e.kind))
        .collect();
    assert_eq!(kinds, [(1, &ErrorKind::LineTooLong { limit: 0 })]);
}

#[test]
fn next_into_reuses_and_reports_ranges() {
    let body = b"  a,t=1,u=2 f=1,g=2 10\n\nb f=\"x\" 20\r\nbad\nc,t=3 h=t";
    let mut parser = Parser::new(body, ParseOptions::default());
    assert_eq!(parser.last_line_range(), 0..0);
    let mut line = Line::default();

    parser.next_into(&mut line).unwrap().unwrap();
    assert_eq!(line.line_number, 1);
    assert_eq!(line.series_key, "a,t=1,u=2");
    assert_eq!(line.tags.len(), 2);
    assert_eq!(line.fields.len(), 2);
    assert_eq!(parser.last_line_range(), 0..22);
    let (tags_cap, fields_cap) = (line.tags.capacity(), line.fields.capacity());
    let tags_ptr = line.tags.as_ptr();

    parser.next_into(&mut line).unwrap().unwrap();
    assert_eq!(line.line_number, 3);
    assert_eq!(line.series_key, "b");
    assert!(line.tags.is_empty());
    assert_eq!(line.fields.len(), 1);
    assert_eq!(line.timestamp, 20);
    assert_eq!(&body[parser.last_line_range()], b"b f=\"x\" 20");

    let err = parser.next_into(&mut line).unwrap().unwrap_err();
    assert_eq!(err.line_number, 4);
    assert_eq!(&body[parser.last_line_range()], b"bad");

    parser.next_into(&mut line).unwrap().unwrap();
    assert_eq!(line.line_number, 5);
    assert_eq!(line.series_key, "c,t=3");
    assert_eq!(line.field("h"), Some(FieldValue::Boolean(true)));
    assert_eq!(line.field("nope"), None);
    assert_eq!(line.tag("t").unwrap(), "3");
    assert_eq!(line.tags.capacity(), tags_cap);
    assert_eq!(line.fields.capacity(), fields_cap);
    assert_eq!(line.tags.as_ptr(), tags_ptr);
    assert_eq!(&body[parser.last_line_range()], b"c,t=3 h=t");
    assert_eq!(parser.lines_consumed(), 5);

    assert!(parser.next_into(&mut line).is_none());
    assert!(parser.next_into(&mut line).is_none());

    // The iterator gives the same results.
    let via_iter: Vec<_> = Parser::new(body, ParseOptions::default())
        .map(|r| r.map(|l| l.line_number).map_err(|e| e.line_number))
        .collect();
    assert_eq!(via_iter, [Ok(1), Ok(3), Err(4), Ok(5)]);
}

#[test]
fn series_key_is_raw() {
    let parsed = parse(br"  m\ 1,k\,=v\ x,j=w   f=1", ParseOptions::default());
    assert_eq!(parsed.lines[0].series_key, r"m\ 1,k\,=v\ x,j=w");
    assert_eq!(parsed.lines[0].measurement, "m 1");
    assert_eq!(parsed.lines[0].measurement.raw(), r"m\ 1");
}

#[test]
fn escaped_api() {
    let parsed = parse(
        br#"plain,k\ 1=v\=x,w=a\b f="q\"",g="a\b" 1"#,
        ParseOptions::default(),
    );
    let line = &parsed.lines[0];
    let m = line.measurement;
    assert!(!m.has_escapes());
    assert!(matches!(m.unescape(), Cow::Borrowed("plain")));

    let (k, v) = line.tags[0];
    assert!(k.has_escapes());
    assert_eq!(k.raw(), r"k\ 1");
    assert!(matches!(k.unescape(), Cow::Owned(ref o) if o == "k 1"));
    assert_eq!(v, "v=x");
    assert_eq!(v, *"v=x");
    assert_ne!(v, r"v\=x");
    assert_eq!(v.to_string(), "v=x");

    // A backslash that escapes nothing: has_escapes, but still borrowed.
    let (_, w) = line.tags[1];
    assert!(w.has_escapes());
    assert!(matches!(w.unescape(), Cow::Borrowed(r"a\b")));

    let FieldValue::String(q) = line.fields[0].1 else {
        panic!()
    };
    assert_eq!(q.raw(), r#"q\""#);
    assert_eq!(q, "q\"");
    let FieldValue::String(g) = line.fields[1].1 else {
        panic!()
    };
    assert!(matches!(g.unescape(), Cow::Borrowed(r"a\b")));

    // Equality between Escaped values compares unescaped text, across rules.
    let other = parse(br#"x,k=plain f="k 1""#, ParseOptions::default());
    let other = &other.lines[0];
    assert_eq!(other.tags[0].1, m);
    let FieldValue::String(k1) = other.fields[0].1 else {
        panic!()
    };
    assert_eq!(k1, k);
    assert_ne!(k1, m);
    assert_eq!(
        line.fields[0].1,
        FieldValue::String(Escaped::new(
            "q\"",
            false,
            crate::escape::Rules::StringField
        ))
    );
    assert_eq!(Escaped::default(), "");
}

#[test]
fn escape_helpers() {
    type Escape = fn(&str, &mut String);
    let cases: &[(Escape, &str, &str)] = &[
        (escape_measurement, "a, b=c\\d\"", r#"a\,\ b=c\\d""#),
        (escape_tag, "a, b=c\\d\"", r#"a\,\ b\=c\\d""#),
        (escape_string_field, "a, b=c\\d\"", r#"a, b=c\\d\""#),
        (escape_tag, "plain", "plain"),
        (escape_tag, "", ""),
        (escape_measurement, "日本 語", r"日本\ 語"),
    ];
    for (f, input, want) in cases {
        let mut out = String::from(">");
        f(input, &mut out);
        assert_eq!(out, format!(">{want}"), "{input:?}");
    }
}

#[test]
fn error_messages_are_short() {
    let long_value = format!("x{}", "é".repeat(100));
    let input = format!("m f={long_value}");
    let err = parse(input.as_bytes(), ParseOptions::default())
        .errors
        .remove(0);
    let ErrorKind::InvalidFieldValue { value, .. } = &err.kind else {
        panic!("{err:?}")
    };
    assert!(value.len() <= 64, "{value}");
    assert!(value.ends_with("..."));
    assert!(long_value.starts_with(value.trim_end_matches("...")));
    let msg = err.to_string();
    assert!(
        msg.starts_with("line 1, column 5: invalid field value 'xé"),
        "{msg}"
    );

    // Every kind displays a reason.
    let kinds = [
        ErrorKind::InvalidUtf8,
        ErrorKind::LineTooLong { limit: 1 },
        ErrorKind::MissingMeasurement,
        ErrorKind::TrailingBackslash { name: s("a") },
        ErrorKind::EmptyTagKey,
        ErrorKind::MissingTagValue { key: s("a") },
        ErrorKind::MissingFields,
        ErrorKind::EmptyFieldKey,
        ErrorKind::MissingFieldValue { key: s("a") },
        invalid("a", "b"),
        ErrorKind::InvalidInteger {
            key: s("a"),
            value: s("b"),
        },
        ErrorKind::IntegerOutOfRange {
            key: s("a"),
            value: s("b"),
        },
        ErrorKind::FloatOutOfRange {
            key: s("a"),
            value: s("b"),
        },
        ErrorKind::UnterminatedString { key: s("a") },
        ErrorKind::InvalidTimestamp { value: s("a") },
        ErrorKind::TimestampOutOfRange { value: s("a") },
        ErrorKind::TrailingGarbage { text: s("a") },
    ];
    for kind in kinds {
        let text = kind.to_string();
        assert!(!text.is_empty() && text.len() < 80, "{text}");
    }
    let e: &dyn std::error::Error = &LineError {
        line_number: 1,
        column: 1,
        kind: ErrorKind::EmptyTagKey,
    };
    assert_eq!(e.to_string(), "line 1, column 1: empty tag key");
}

#[test]
fn newline_search_finds_every_offset() {
    let fillers = [b'a', 0x0b, 0x09, 0x8a, 0xff, 0x00, 0x0a ^ 0x01];
    for len in 0..40 {
        for at in 0..=len {
            for (n, &filler) in fillers.iter().enumerate() {
                let mut hay: Vec<u8> = (0..len)
                    .map(|k| if k % 3 == n % 3 { filler } else { b'x' })
                    .collect();
                if at < len {
                    hay[at] = b'\n';
                    if at + 3 < len {
                        hay[at + 3] = b'\n';
                    }
                }
                let want = hay.iter().position(|&b| b == b'\n');
                assert_eq!(crate::parser::find_newline(&hay), want, "{hay:?}");
            }
        }
    }
}

#[test]
fn same_field_keys_flags_lines_repeating_the_previous_keys() {
    let body = b"m a=1,b=2\nm a=3,b=4\nn a=5,b=6 7\nm a=1\nm a=1,b=2\nm a=1,b=2\nm a\\ x=1,b=2\nm a\\ x=1,b=2\nbad\nm a\\ x=1,b=2\n";
    let flags: Vec<Option<bool>> = Parser::new(body, ParseOptions::default())
        .map(|line| line.ok().map(|l| l.same_field_keys))
        .collect();
    assert_eq!(
        flags,
        [
            Some(false), // first line
            Some(true),  // same keys, other values
            Some(true),  // other measurement, same keys
            Some(false), // fewer fields
            Some(false), // more fields than the line before
            Some(true),
            Some(false), // escaped keys are never remembered
            Some(false),
            None, // a line without fields
            Some(false),
        ]
    );
}
