//! InfluxQL as `/query` reads it: the statements split, each parsed, and
//! every `SELECT` translated to the engine's SQL over a fixed schema. No
//! panic, no stack overflow, memory bounded by the query's size, the
//! statement splitter agrees with the parser on how many there are, and a
//! `SELECT` written back as InfluxQL parses to the same statement.

#![no_main]

use chingest::layout::schema::FieldType;
use chingest::MeasurementSchema;
use chingest_fuzz::{bounded, MIB};
use chingest_influxql::{parse_query, select_sql, statement_texts, Select, Statement};
use libfuzzer_sys::fuzz_target;

/// 2026-11-30T00:00:00Z.
const NOW: i64 = 1_796_000_000_000_000_000;

fuzz_target!(|query: &str| {
    bounded(query.len(), 4096, 4 * MIB, || {
        let Ok(statements) = parse_query(query, NOW) else {
            return;
        };
        if let Ok(texts) = statement_texts(query) {
            assert_eq!(texts.len(), statements.len(), "{query:?}");
        }
        let schemas = schemas();
        for statement in statements.into_iter().flatten() {
            if let Statement::Select(select) = statement {
                round_trip(query, &select);
                let _ = select_sql(
                    &select,
                    "telegraf",
                    "autogen",
                    &schemas,
                    |_| Some(vec![1, 2]),
                    NOW,
                );
            }
        }
    });
});

/// `select` printed, parsed again: the same statement, printed the same.
fn round_trip(query: &str, select: &Select) {
    let printed = select.to_string();
    let again = match parse_query(&printed, NOW).map(|mut s| s.pop()) {
        Ok(Some(Ok(Statement::Select(again)))) => again,
        other => panic!("{query:?} printed as {printed:?}, which parses as {other:?}"),
    };
    assert_eq!(&*again, select, "{query:?} printed as {printed:?}");
    assert_eq!(again.to_string(), printed, "{query:?}");
}

/// `cpu` (every field type, two tags) and `mem`.
fn schemas() -> Vec<MeasurementSchema> {
    let fields =
        |list: &[(&str, FieldType)]| list.iter().map(|(n, t)| (n.to_string(), *t)).collect();
    vec![
        MeasurementSchema {
            name: "cpu".into(),
            fields: fields(&[
                ("active", FieldType::Boolean),
                ("count", FieldType::Integer),
                ("note", FieldType::String),
                ("seen", FieldType::UInteger),
                ("usage", FieldType::Float),
            ]),
            tag_keys: vec!["host".into(), "region".into()],
        },
        MeasurementSchema {
            name: "mem".into(),
            fields: fields(&[("free", FieldType::Integer), ("used", FieldType::Float)]),
            tag_keys: vec!["host".into()],
        },
    ]
}
