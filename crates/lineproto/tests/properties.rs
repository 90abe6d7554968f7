//! Property tests.
//!
//! * Escaping round trips: any names and string values (any characters but
//!   line breaks), written with the `escape_*` helpers, parse back to the
//!   same unescaped text, and numbers to the same values.
//! * Streaming equals isolation: parsing a whole body gives, for every line
//!   (split here independently: at line feeds, but for those in string
//!   values), what parsing that line on its own gives, with line length
//!   limits and invalid UTF-8 decided independently here. This checks the
//!   parser's line splitting, its UTF-8 regions, its line length window and
//!   its guesses of repeated keys.
//!   Also, an accepted line's [`Parser::last_line_range`] parsed on its own
//!   gives the same line.
//! * Arbitrary bytes never panic, and every error points inside its line.

use lineproto::{
    escape_measurement, escape_string_field, escape_tag, ErrorKind, FieldValue, Line, LineError,
    ParseOptions, Parser,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Value {
    Float(f64),
    FloatExp(f64),
    Integer(i64),
    UInteger(u64),
    String(String),
    Boolean(bool),
}

/// Any text without line breaks.
fn text(max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(
        prop_oneof![
            4 => any::<char>(),
            1 => proptest::sample::select(vec![',', ' ', '=', '\\', '"', '#', '\t', '\0', 'é']),
        ],
        0..max,
    )
    .prop_map(|chars| {
        chars
            .into_iter()
            .filter(|c| *c != '\n' && *c != '\r')
            .collect()
    })
}

/// A name the format can represent: not empty and not ending with a
/// backslash.
fn name() -> impl Strategy<Value = String> {
    text(12).prop_map(|mut s| {
        if s.is_empty() || s.ends_with('\\') {
            s.push('x');
        }
        s
    })
}

/// A measurement the format can represent: a name that does not start
/// with `#` (a comment), a tab or a NUL byte (indentation).
fn measurement() -> impl Strategy<Value = String> {
    name().prop_map(|s| {
        if s.starts_with(['#', '\t', '\0']) {
            format!("m{s}")
        } else {
            s
        }
    })
}

/// A field set the format can represent: the first key does not start
/// with a tab or NUL byte (skipped after the space before the field set).
fn fields() -> impl Strategy<Value = Vec<(String, Value)>> {
    proptest::collection::vec((name(), value()), 1..5).prop_map(|mut fields| {
        if fields[0].0.starts_with(['\t', '\0']) {
            fields[0].0.insert(0, 'x');
        }
        fields
    })
}

fn value() -> impl Strategy<Value = Value> {
    let finite = any::<f64>().prop_filter("finite", |f| f.is_finite());
    prop_oneof![
        finite.clone().prop_map(Value::Float),
        finite.prop_map(Value::FloatExp),
        any::<i64>().prop_map(Value::Integer),
        any::<u64>().prop_map(Value::UInteger),
        text(20).prop_map(Value::String),
        any::<bool>().prop_map(Value::Boolean),
    ]
}

fn write_value(value: &Value, out: &mut String) {
    match value {
        Value::Float(f) => out.push_str(&f.to_string()),
        Value::FloatExp(f) => out.push_str(&format!("{f:e}")),
        Value::Integer(i) => out.push_str(&format!("{i}i")),
        Value::UInteger(u) => out.push_str(&format!("{u}u")),
        Value::String(s) => {
            out.push('"');
            escape_string_field(s, out);
            out.push('"');
        }
        Value::Boolean(b) => out.push_str(if *b { "true" } else { "false" }),
    }
}

fn same_value(parsed: &FieldValue<'_>, want: &Value) -> bool {
    match (parsed, want) {
        (FieldValue::Float(a), Value::Float(b) | Value::FloatExp(b)) => a.to_bits() == b.to_bits(),
        (FieldValue::Integer(a), Value::Integer(b)) => a == b,
        (FieldValue::UInteger(a), Value::UInteger(b)) => a == b,
        (FieldValue::String(a), Value::String(b)) => a == b.as_str(),
        (FieldValue::Boolean(a), Value::Boolean(b)) => a == b,
        _ => false,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn escaping_round_trips(
        m in measurement(),
        tags in proptest::collection::vec((name(), name()), 0..4),
        fields in fields(),
        timestamp in proptest::option::of(i64::MIN + 2..=i64::MAX - 1),
    ) {
        let mut line = String::new();
        escape_measurement(&m, &mut line);
        for (k, v) in &tags {
            line.push(',');
            escape_tag(k, &mut line);
            line.push('=');
            escape_tag(v, &mut line);
        }
        for (n, (k, v)) in fields.iter().enumerate() {
            line.push(if n == 0 { ' ' } else { ',' });
            escape_tag(k, &mut line);
            line.push('=');
            write_value(v, &mut line);
        }
        if let Some(ts) = timestamp {
            line.push(' ');
            line.push_str(&ts.to_string());
        }

        let mut results: Vec<_> = Parser::new(line.as_bytes(), ParseOptions::default()).collect();
        prop_assert_eq!(results.len(), 1, "{:?}", line);
        let parsed = results.pop().unwrap();
        let parsed = match parsed {
            Ok(parsed) => parsed,
            Err(e) => return Err(TestCaseError::fail(format!("{line:?}: {e}"))),
        };
        prop_assert_eq!(parsed.measurement.unescape(), m.as_str());
        prop_assert_eq!(parsed.tags.len(), tags.len());
        for ((pk, pv), (k, v)) in parsed.tags.iter().zip(&tags) {
            prop_assert_eq!(pk.unescape(), k.as_str());
            prop_assert_eq!(pv.unescape(), v.as_str());
        }
        prop_assert_eq!(parsed.fields.len(), fields.len());
        for ((pk, pv), (k, v)) in parsed.fields.iter().zip(&fields) {
            prop_assert_eq!(pk.unescape(), k.as_str());
            prop_assert!(same_value(pv, v), "{:?} != {:?} in {:?}", pv, v, line);
        }
        prop_assert_eq!(parsed.timestamp_given, timestamp.is_some());
        prop_assert_eq!(parsed.timestamp, timestamp.unwrap_or(0));
        // The series key is the raw measurement and tag set.
        prop_assert!(line.starts_with(parsed.series_key));
        prop_assert!(line[parsed.series_key.len()..].starts_with(' '));
    }
}

/// What a parsed line yields: its rendering, or the error column and kind.
type Parsed = Result<String, (usize, ErrorKind)>;

/// What one physical line yields: `None` for blank lines and comments.
type Outcome = Option<Parsed>;

fn render(line: &Line<'_>) -> String {
    format!(
        "{:?} {:?} {:?} {:?} {} {}",
        line.series_key,
        line.measurement.raw(),
        line.tags
            .iter()
            .map(|(k, v)| (k.raw(), v.raw()))
            .collect::<Vec<_>>(),
        line.fields
            .iter()
            .map(|(k, v)| (k.raw(), format!("{v:?}")))
            .collect::<Vec<_>>(),
        line.timestamp,
        line.timestamp_given,
    )
}

/// Streams `body` through one parser: outcome per line number.
fn streamed(body: &[u8], options: ParseOptions) -> Vec<(usize, Parsed)> {
    let mut parser = Parser::new(body, options);
    let mut line = Line::default();
    let mut out = Vec::new();
    while let Some(result) = parser.next_into(&mut line) {
        let range = parser.last_line_range();
        out.push(match result {
            Ok(()) => {
                // The line's range, parsed on its own, gives the same line.
                let mut alone: Vec<_> = Parser::new(&body[range.clone()], options).collect();
                assert_eq!(alone.len(), 1, "{range:?}");
                let alone = alone.pop().unwrap().expect("accepted line alone");
                assert_eq!(alone.line_number, 1);
                assert_eq!(render(&alone), render(&line));
                (line.line_number, Ok(render(&line)))
            }
            Err(LineError {
                line_number,
                column,
                kind,
            }) => {
                assert!(
                    column >= 1 && column <= range.len() + 1,
                    "column {column} in {range:?}"
                );
                (line_number, Err((column, kind)))
            }
        });
    }
    out
}

/// The outcome of one line (`raw`, with its line ending), decided on its
/// own.
fn isolated(raw: &[u8], options: ParseOptions) -> Outcome {
    let mut content = raw.strip_suffix(b"\n").unwrap_or(raw);
    content = content.strip_suffix(b"\r").unwrap_or(content);
    let first = content
        .iter()
        .position(|&b| !matches!(b, b' ' | b'\t' | b'\0'))?;
    if content[first] == b'#' {
        return None;
    }
    if content.len() > options.max_line_len {
        let limit = options.max_line_len;
        return Some(Err((limit + 1, ErrorKind::LineTooLong { limit })));
    }
    if let Err(e) = std::str::from_utf8(content) {
        return Some(Err((e.valid_up_to() + 1, ErrorKind::InvalidUtf8)));
    }
    let unlimited = ParseOptions {
        max_line_len: usize::MAX,
        ..options
    };
    let mut results = streamed(raw, unlimited);
    assert_eq!(results.len(), 1);
    Some(results.pop().unwrap().1)
}

/// The lines of `body`, each with its line ending, as a state machine over
/// the documented rule: a line ends at a line feed, but not inside a string
/// value, which starts with a `"` after an unescaped `=` in the field set
/// (after the first unescaped space past leading whitespace; a comment has
/// none) and ends at the next unescaped `"`. A backslash before a line feed
/// escapes it only inside a string. A string still open at the end of the
/// body ends with it, the body's last line feed ending the line.
fn lines(body: &[u8]) -> Vec<&[u8]> {
    let mut lines = Vec::new();
    let mut start = 0;
    while start < body.len() {
        let mut i = start;
        while matches!(body.get(i), Some(b' ' | b'\t' | b'\0')) {
            i += 1;
        }
        let comment = body.get(i) == Some(&b'#');
        let (mut spaces, mut in_string) = (0, false);
        while i < body.len() {
            match (body[i], in_string) {
                (b'\n', false) => break,
                (b'\\', true) => i += 1,
                (b'\\', false) if body.get(i + 1) != Some(&b'\n') => i += 1,
                (b'"', true) => in_string = false,
                (b'=', false) if !comment && spaces == 1 && body.get(i + 1) == Some(&b'"') => {
                    in_string = true;
                    i += 1;
                }
                (b' ', false) if spaces < 2 => {
                    spaces += 1;
                    while matches!(body.get(i + 1), Some(b' ' | b'\t' | b'\0')) {
                        i += 1;
                    }
                }
                _ => {}
            }
            i += 1;
        }
        let end = (i + 1).min(body.len());
        lines.push(&body[start..end]);
        start = end;
    }
    lines
}

fn check_streaming(body: &[u8], options: ParseOptions) -> Result<(), TestCaseError> {
    let streamed = streamed(body, options);
    let mut expected = Vec::new();
    let mut line_number = 1;
    for raw in lines(body) {
        if let Some(outcome) = isolated(raw, options) {
            expected.push((line_number, outcome));
        }
        line_number += raw.iter().filter(|&&b| b == b'\n').count();
    }
    prop_assert_eq!(
        streamed,
        expected,
        "body {:?}",
        String::from_utf8_lossy(body)
    );
    Ok(())
}

/// Bodies of plausible lines, with damage: random bytes (including invalid
/// UTF-8, `\r` and `\n`) spliced in.
fn body() -> impl Strategy<Value = Vec<u8>> {
    let piece = prop_oneof![
        6 => proptest::sample::select(vec![
            "cpu,host=a,region=b usage=1i,idle=2.5 17\n",
            "cpu,host=a,region=b usage=1i,idle=2.5 17\r\n",
            "cpu,host=a usage=1i\n",
            "cpu,host=a,reg\\ion=b usage=1i,id\\=le=2.5 17\n",
            "mem,host=a free=\"x y\",used=3u\n",
            "# comment\n",
            "\n",
            "  \t\r\n",
            "m f=t",
            "m,k=v\\",
            "m f=\"open",
        ])
        .prop_map(|s| s.as_bytes().to_vec()),
        2 => proptest::collection::vec(
            prop_oneof![
                4 => proptest::sample::select(b"abc ,=\\\"#\r\n\t019ie-.".to_vec()),
                1 => any::<u8>(),
            ],
            0..12,
        ),
    ];
    proptest::collection::vec(piece, 0..12).prop_map(|pieces| pieces.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn streaming_equals_isolated(body in body(), max in prop_oneof![Just(usize::MAX), 0usize..64]) {
        let options = ParseOptions {
            max_line_len: max,
            default_time: 3,
            ..ParseOptions::default()
        };
        check_streaming(&body, options)?;
    }

    #[test]
    fn arbitrary_bytes_never_panic(body in proptest::collection::vec(any::<u8>(), 0..200)) {
        check_streaming(&body, ParseOptions::default())?;
    }
}

/// A line limit that falls inside a multi-byte character cuts the line
/// before it, and the line is reported too long (it used to panic).
#[test]
fn a_line_limit_inside_a_character_is_not_a_panic() {
    for body in ["a\u{80}", "m f=1 \u{e9}\u{e9}\u{e9}", "m,t=\u{1f600} f=1"] {
        for max in 0..body.len() {
            let options = ParseOptions {
                max_line_len: max,
                ..ParseOptions::default()
            };
            let mut parser = Parser::new(body.as_bytes(), options);
            let mut line = Line::default();
            let Some(Err(err)) = parser.next_into(&mut line) else {
                panic!("{body:?} is longer than {max} bytes");
            };
            assert!(
                matches!(err.kind, ErrorKind::LineTooLong { limit } if limit == max),
                "{body:?}, {max}: {err:?}"
            );
        }
    }
}

#[test]
fn streaming_edge_cases() {
    let bodies: &[&[u8]] = &[
        b"",
        b"\r",
        b"\r\r\n",
        b"m f=1\r",
        b"m f=1\r\r",
        b"m f=1\r\r\n",
        b"m f=1\rx\n",
        b"m,k=v\\\r\nm f=1",
        b"m f=\"\\\r\n\"",
        b"\xffm f=1\nm f=1",
        b"m f=1\n\xff\nm f=1 \xff\nm f=2",
        b"m f=\"\xe6\x97\n\" 1",
        b"# \xff\nm f=1",
        b"m f=1 12345678901234567890\nm f=1",
    ];
    for body in bodies {
        for max in [usize::MAX, 0, 3, 4, 5, 6, 7, 8, 9, 10, 20] {
            let options = ParseOptions {
                max_line_len: max,
                ..ParseOptions::default()
            };
            check_streaming(body, options).unwrap();
        }
    }
}
