//! Line protocol, as `/write` and `/api/v2/write` parse it: no panic; a
//! body's errors name lines that exist; every accepted line, written out
//! again in canonical form, parses to the same point; `same_field_keys`
//! is only claimed when it is true.

#![no_main]

use std::fmt::Write as _;

use chingest_fuzz::{bounded, MIB};
use libfuzzer_sys::fuzz_target;
use lineproto::{
    escape_measurement, escape_string_field, escape_tag, FieldValue, Line, ParseOptions, Parser,
};

fuzz_target!(|body: &[u8]| {
    let options = ParseOptions {
        max_line_len: 4096,
        ..ParseOptions::default()
    };
    let lines = lineproto::count_line_feeds(body) + 1;
    bounded(body.len(), 64, MIB, || {
        let mut parser = Parser::new(body, options);
        let mut line = Line::default();
        let mut last_keys: Option<Vec<String>> = None;
        while let Some(result) = parser.next_into(&mut line) {
            match result {
                Ok(()) => {
                    assert!(
                        line.line_number >= 1 && line.line_number <= lines,
                        "{line:?}"
                    );
                    assert!(!line.fields.is_empty());
                    let keys: Vec<String> = line
                        .fields
                        .iter()
                        .map(|(k, _)| k.raw().to_owned())
                        .collect();
                    // The claim compares with the last field set parsed,
                    // which may be an error's: a consumer forgets what it
                    // resolved on an error, so only claims since count.
                    if let (true, Some(last)) = (line.same_field_keys, &last_keys) {
                        assert_eq!(last, &keys, "same_field_keys claimed");
                    }
                    last_keys = Some(keys);
                    round_trip(&line);
                }
                Err(error) => {
                    assert!(
                        error.line_number >= 1 && error.line_number <= lines,
                        "{error}"
                    );
                    // A consumer forgets what it resolved after an error.
                    last_keys = None;
                }
            }
        }
    });
});

/// Writes `line` out canonically and parses it back.
fn round_trip(line: &Line<'_>) {
    let measurement = line.measurement.to_string();
    let tags: Vec<(String, String)> = line
        .tags
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    let fields: Vec<String> = line.fields.iter().map(|(k, _)| k.to_string()).collect();
    // What escaping cannot write (see `escape_tag`): skipped.
    let names = tags.iter().flat_map(|(k, v)| [k, v]).chain(&fields);
    if names.clone().any(|n| n.ends_with('\\'))
        || measurement.ends_with('\\')
        || measurement.starts_with(['#', ' ', '\t', '\0'])
        || fields[0].starts_with(['\t', '\0'])
    {
        return;
    }
    let mut text = String::new();
    escape_measurement(&measurement, &mut text);
    for (k, v) in &tags {
        text.push(',');
        escape_tag(k, &mut text);
        text.push('=');
        escape_tag(v, &mut text);
    }
    for (i, ((_, value), key)) in line.fields.iter().zip(&fields).enumerate() {
        text.push(if i == 0 { ' ' } else { ',' });
        escape_tag(key, &mut text);
        text.push('=');
        match value {
            FieldValue::Float(v) => write!(text, "{v:?}").unwrap(),
            FieldValue::Integer(v) => write!(text, "{v}i").unwrap(),
            FieldValue::UInteger(v) => write!(text, "{v}u").unwrap(),
            FieldValue::Boolean(v) => write!(text, "{v}").unwrap(),
            FieldValue::String(s) => {
                text.push('"');
                escape_string_field(&s.to_string(), &mut text);
                text.push('"');
            }
        }
    }
    write!(text, " {}", line.timestamp).unwrap();
    let parsed = lineproto::parse(text.as_bytes(), ParseOptions::default());
    assert!(parsed.errors.is_empty(), "{text:?}: {:?}", parsed.errors);
    assert_eq!(parsed.lines.len(), 1, "{text:?}");
    let again = &parsed.lines[0];
    assert_eq!(again.measurement.to_string(), measurement, "{text:?}");
    let tags_again: Vec<(String, String)> = again
        .tags
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    assert_eq!(tags_again, tags, "{text:?}");
    assert_eq!(again.fields.len(), line.fields.len(), "{text:?}");
    for ((k, v), (k0, v0)) in again.fields.iter().zip(&line.fields) {
        assert_eq!(k.to_string(), k0.to_string(), "{text:?}");
        assert_eq!(v, v0, "{text:?}");
    }
    assert_eq!(again.timestamp, line.timestamp, "{text:?}");
}
