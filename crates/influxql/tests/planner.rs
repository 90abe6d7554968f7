//! Golden SQL of InfluxQL's planner, engine-free: each case in
//! `tests/golden/*.txt` is a `SELECT` over measurement schemas given in the
//! file, and the SQL [`select_sql`] plans for it — the text the real path
//! sends the engine (the server's parity suite checks the answers it gets).
//!
//! A file is lines of:
//!
//! ```text
//! # a comment (the case's title)
//! schema cpu: fields usage_user=integer, usage_system=float; tags host, region
//! series cpu: 1, 2            (the ids the last-value cache lists; next query only)
//! query SELECT mean(usage_user) FROM cpu GROUP BY time(1m)
//! sql cpu: SELECT …           (one per measurement read; `-`: no statement;
//!                             `sql -`: no measurement read)
//! error …                     (the statement cannot be planned)
//! ```
//!
//! `schema` lines hold for the rest of the file. The sources that name no
//! database read `telegraf`, retention policy `autogen`; `now()` is
//! 1700007200s. `UPDATE_GOLDEN=1 cargo test -p chingest-influxql --test
//! planner` rewrites the `sql`/`error` lines with what the planner says.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use chingest::layout::schema::FieldType;
use chingest::MeasurementSchema;
use chingest_influxql::{parse_query, select_sql, Statement};

/// What `now()` means in every case, ns.
const NOW: i64 = 1_700_007_200_000_000_000;

#[test]
fn planner_sql_matches_the_golden_files() {
    let update = std::env::var_os("UPDATE_GOLDEN").is_some();
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("tests/golden")
        .map(|entry| entry.expect("a golden file").path())
        .filter(|path| path.extension().is_some_and(|ext| ext == "txt"))
        .collect();
    files.sort();
    assert!(!files.is_empty(), "no golden files in {}", dir.display());
    let mut failures = Vec::new();
    let mut cases = 0;
    for path in files {
        let text = std::fs::read_to_string(&path).expect("a readable golden file");
        let checked = check_file(&text);
        cases += checked.cases;
        if update {
            if checked.rewritten != text {
                std::fs::write(&path, &checked.rewritten).expect("a writable golden file");
            }
        } else {
            let name = path.file_name().unwrap_or_default().to_string_lossy();
            failures.extend(checked.failures.iter().map(|f| format!("{name}:{f}")));
        }
    }
    assert!(cases >= 40, "only {cases} golden cases");
    assert!(
        failures.is_empty(),
        "{} golden case(s) differ (UPDATE_GOLDEN=1 rewrites them):\n\n{}",
        failures.len(),
        failures.join("\n\n")
    );
}

/// A golden file checked: how many cases, each differing case as
/// `line: query` and a diff, and the file with the planner's answers.
struct Checked {
    cases: usize,
    failures: Vec<String>,
    rewritten: String,
}

fn check_file(text: &str) -> Checked {
    let mut schemas: BTreeMap<String, MeasurementSchema> = BTreeMap::new();
    let mut listed: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    let mut checked = Checked {
        cases: 0,
        failures: Vec::new(),
        rewritten: String::new(),
    };
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        i += 1;
        if let Some(rest) = line.strip_prefix("schema ") {
            let schema = schema(rest);
            schemas.insert(schema.name.clone(), schema);
        } else if let Some(rest) = line.strip_prefix("series ") {
            let (name, ids) = rest.split_once(':').expect("series m: id, id");
            let ids = ids.split(',').filter(|id| !id.trim().is_empty());
            let ids = ids.map(|id| id.trim().parse().expect("a series id"));
            listed.insert(name.trim().to_owned(), ids.collect());
        } else if let Some(query) = line.strip_prefix("query ") {
            let line_number = i;
            checked.rewritten.push_str(line);
            checked.rewritten.push('\n');
            let mut expected = Vec::new();
            while i < lines.len() && is_answer(lines[i]) {
                expected.push(lines[i]);
                i += 1;
            }
            let schemas: Vec<MeasurementSchema> = schemas.values().cloned().collect();
            let actual = plan(query, &schemas, &std::mem::take(&mut listed));
            for answer in &actual {
                checked.rewritten.push_str(answer);
                checked.rewritten.push('\n');
            }
            checked.cases += 1;
            if expected != actual {
                let mut diff = format!("{line_number}: {query}");
                diff.extend(expected.iter().map(|l| format!("\n  - {l}")));
                diff.extend(actual.iter().map(|l| format!("\n  + {l}")));
                checked.failures.push(diff);
            }
            continue;
        }
        checked.rewritten.push_str(line);
        checked.rewritten.push('\n');
    }
    checked
}

/// Whether a line is the planner's answer to the query before it.
fn is_answer(line: &str) -> bool {
    line.starts_with("sql ") || line.starts_with("error ")
}

/// The answer lines for `query`: per measurement read, its SQL, or the
/// error.
fn plan(
    query: &str,
    schemas: &[MeasurementSchema],
    listed: &BTreeMap<String, Vec<u64>>,
) -> Vec<String> {
    let statement = match parse_query(query, NOW) {
        Ok(mut statements) if statements.len() == 1 => statements.remove(0),
        Ok(statements) => panic!("{query}: {} statements, one expected", statements.len()),
        Err(err) => return vec![error(err)],
    };
    let select = match statement {
        Ok(Statement::Select(select)) => select,
        Ok(other) => panic!("{query}: not a SELECT: {other:?}"),
        Err(err) => return vec![error(err)],
    };
    match select_sql(
        &select,
        "telegraf",
        "autogen",
        schemas,
        |m| listed.get(m).cloned(),
        NOW,
    ) {
        Ok(statements) if statements.is_empty() => vec!["sql -".to_owned()],
        Ok(statements) => statements
            .into_iter()
            .map(|(name, sql)| format!("sql {name}: {}", sql.as_deref().unwrap_or("-")))
            .collect(),
        Err(err) => vec![error(err)],
    }
}

/// An error's answer line (its line breaks as `\n`).
fn error(err: impl std::fmt::Display) -> String {
    format!("error {}", err.to_string().replace('\n', "\\n"))
}

/// `cpu: fields a=float, b=integer; tags host, region` as a schema.
fn schema(line: &str) -> MeasurementSchema {
    let (name, rest) = line.split_once(':').expect("schema m: fields …; tags …");
    let mut schema = MeasurementSchema {
        name: name.trim().to_owned(),
        fields: Vec::new(),
        tag_keys: Vec::new(),
    };
    for part in rest.split(';') {
        let part = part.trim();
        let list = |prefix| {
            part.strip_prefix(prefix)
                .into_iter()
                .flat_map(|list: &str| list.split(','))
                .map(str::trim)
                .filter(|item| !item.is_empty())
        };
        for field in list("fields") {
            let (field, ty) = field.split_once('=').expect("field=type");
            schema.fields.push((field.to_owned(), field_type(ty)));
        }
        schema.tag_keys.extend(list("tags").map(str::to_owned));
    }
    schema.fields.sort_by(|a, b| a.0.cmp(&b.0));
    schema.tag_keys.sort();
    schema
}

fn field_type(name: &str) -> FieldType {
    match name {
        "float" => FieldType::Float,
        "integer" => FieldType::Integer,
        "unsigned" => FieldType::UInteger,
        "string" => FieldType::String,
        "boolean" => FieldType::Boolean,
        "floats" => FieldType::FloatArray,
        other => panic!("unknown field type {other}"),
    }
}
