//! A `SELECT` written back as InfluxQL (its `Display`) parses to the same
//! statement: every query of the planner's golden files, and statements
//! whose names, strings, regexes, numbers and conditions need their
//! escapes and parentheses.

use std::path::Path;

use chingest_influxql::{parse_query, Statement};

const NOW: i64 = 1_700_000_000_000_000_000;

/// The `SELECT`s of `q` (statements that fail to parse are skipped: the
/// golden files hold refusals too).
fn selects(q: &str) -> Vec<chingest_influxql::Select> {
    let Ok(statements) = parse_query(q, NOW) else {
        return Vec::new();
    };
    statements
        .into_iter()
        .filter_map(|s| match s {
            Ok(Statement::Select(select)) => Some(*select),
            _ => None,
        })
        .collect()
}

fn assert_round_trip(q: &str) -> usize {
    let found = selects(q);
    for select in &found {
        let printed = select.to_string();
        let again = selects(&printed);
        assert_eq!(
            again.len(),
            1,
            "{q}\nprinted as\n{printed}\nwhich does not parse"
        );
        assert_eq!(&again[0], select, "{q}\nprinted as\n{printed}");
        // Printing is stable.
        assert_eq!(again[0].to_string(), printed);
    }
    found.len()
}

#[test]
fn every_golden_query_prints_as_itself() {
    let golden = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden");
    let mut selects = 0;
    for entry in std::fs::read_dir(golden).unwrap() {
        let text = std::fs::read_to_string(entry.unwrap().path()).unwrap();
        for line in text.lines() {
            if let Some(q) = line.strip_prefix("query ") {
                selects += assert_round_trip(q);
            }
        }
    }
    assert!(selects > 50, "only {selects} SELECTs in the golden files");
}

/// Found by the `influxql` fuzz target (a long chain of `*`): printed
/// with a parenthesis per operator, a statement the parser took nested
/// past its limit. Printed with only the parentheses it needs, it reads.
#[test]
fn a_long_chain_prints_no_deeper_than_it_was_parsed() {
    let chain = vec!["x"; 200].join(" * ");
    let conditions = vec!["h = 'a'"; 200].join(" OR ");
    for q in [
        format!("SELECT {chain} FROM m"),
        format!("SELECT v FROM m WHERE {conditions}"),
        format!("SELECT v FROM m WHERE time > 0 AND ({conditions})"),
    ] {
        assert_eq!(assert_round_trip(&q), 1, "{q}");
    }
    let printed = selects(&format!("SELECT {chain} FROM m"))[0].to_string();
    assert!(!printed.contains('('), "{printed}");
}

#[test]
fn names_strings_and_regexes_keep_their_escapes() {
    for q in [
        r#"SELECT "us\"age" AS "a\\b", 'it''s' FROM "my db".."c p\"u" WHERE "ho st" = 'a\'b' AND "x" =~ /a\/b\\/"#,
        r#"SELECT "select" FROM /cpu.*/, "rp"."from" WHERE "where" !~ /^\d+$/ AND "v" != ''"#,
        "SELECT usage::float, host::tag FROM cpu GROUP BY \"group\", time(1h, -15m) fill(-1)",
        "SELECT mean(v) FROM (SELECT max(v) AS v FROM cpu GROUP BY time(1m), *) GROUP BY time(5m) fill(-2.5)",
        "SELECT * FROM cpu WHERE (a = 'x' OR (b = 'y' AND c =~ /z/)) AND time > now() - 1h AND v <= -2.5 AND ok = true",
        "SELECT -v, -(-3), - - 4.5, 2 * -x, (a + b) * c % 7 & 3 | 1 ^ 2, 1e300, 1e999, 10s FROM cpu",
        "SELECT v FROM cpu ORDER BY time DESC LIMIT 5 OFFSET 2 SLIMIT 3 SOFFSET 1 tz('Europe/Paris')",
        "SELECT v FROM cpu WHERE time = '2023-11-14T22:13:20Z' OR time = 5",
        "SELECT a - (b - c), (a + b) * c, a * b + c, -x * y, 2 - -x, -(a + b), a / (b * c) FROM m",
        "SELECT v FROM m WHERE a = 'x' AND b = 'y' OR c = 'z' AND (d = 'w' OR e = 'v')",
        "SELECT v FROM m WHERE (a = 'x' OR b = 'y') OR c = 'z'",
        "SELECT v FROM m WHERE ((a = 'x' AND b = 'y') AND c = 'z') AND time > 0",
    ] {
        assert_round_trip(q);
    }
    assert_eq!(
        selects("SELECT usage AS u FROM telegraf.autogen.cpu WHERE host = 'a' AND time >= 10 AND time <= 20")[0]
            .to_string(),
        r#"SELECT "usage" AS "u" FROM "telegraf"."autogen"."cpu" WHERE time >= 10 AND time < 21 AND "host" = 'a'"#
    );
}
