//! The statements InfluxDB 1.x answers that chingest refuses on purpose,
//! each with an error that names it and says what to use instead: users
//! and grants (access here is the configuration's tokens), InfluxDB's own
//! statistics, queries, shards and subscriptions, and dropping databases
//! and retention policies. Such a statement's result carries the error (the
//! request answers 200 and the statements after it run), as InfluxDB
//! answers a statement it cannot run. They are known by their leading
//! keywords: the rest would not run either, so it is not read.

use crate::lex::Spanned;

const USERS: &str = "chingest has no users: access goes by the tokens of its configuration \
                     file (`auth_tokens`, and `[[tokens]]` limited to reading or writing and \
                     to some databases)";
const SHARDS: &str = "chingest keeps no shards: a measurement's points are one table per \
                      retention policy, partitioned by time (docs/sql.md), and `GET /metrics` \
                      counts the engine's parts";
const SUBSCRIPTIONS: &str = "chingest copies no writes to other servers";

/// Each refused statement's leading keywords, and what to use instead.
const REFUSED: &[(&[&str], &str)] = &[
    (&["SHOW", "USERS"], USERS),
    (&["CREATE", "USER"], USERS),
    (&["DROP", "USER"], USERS),
    (&["SET", "PASSWORD"], USERS),
    (&["GRANT"], USERS),
    (&["REVOKE"], USERS),
    (&["SHOW", "GRANTS"], USERS),
    (
        &["SHOW", "STATS"],
        "the server's counters are on `GET /metrics` (Prometheus text)",
    ),
    (
        &["SHOW", "DIAGNOSTICS"],
        "`GET /health` says whether the server is well, with its version, and `GET /metrics` \
         has its counters",
    ),
    (
        &["SHOW", "QUERIES"],
        "`GET /metrics` counts the statements running and waiting \
         (`chingest_queries_running`, `chingest_queries_waiting`)",
    ),
    (
        &["KILL", "QUERY"],
        "a statement stops when its client closes the connection, and at the `[query]` \
         `max_execution_time_ms` limit",
    ),
    (&["SHOW", "SHARDS"], SHARDS),
    (&["SHOW", "SHARD", "GROUPS"], SHARDS),
    (
        &["DROP", "SHARD"],
        "chingest keeps no shards: `DELETE WHERE time < '…'` removes the points of a time range",
    ),
    (&["SHOW", "SUBSCRIPTIONS"], SUBSCRIPTIONS),
    (&["CREATE", "SUBSCRIPTION"], SUBSCRIPTIONS),
    (&["DROP", "SUBSCRIPTION"], SUBSCRIPTIONS),
    (
        &["DROP", "DATABASE"],
        "chingest keeps its databases: `DROP MEASUREMENT m` removes a measurement's points \
         and series",
    ),
    (
        &["DROP", "RETENTION", "POLICY"],
        "chingest keeps its retention policies: `ALTER RETENTION POLICY rp ON db DURATION d` \
         shortens how long its points are kept",
    ),
];

/// The error of a statement chingest refuses on purpose, `None` for any
/// other.
pub(crate) fn refusal(tokens: &[Spanned]) -> Option<String> {
    REFUSED
        .iter()
        .find(|(words, _)| {
            words.len() <= tokens.len()
                && words.iter().zip(tokens).all(|(word, t)| t.token.is(word))
        })
        .map(|(words, instead)| format!("{} is not supported: {instead}", words.join(" ")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::lex::tokenize;

    fn refused(text: &str) -> Option<String> {
        refusal(&tokenize(text).unwrap())
    }

    #[test]
    fn refusals_name_the_statement_and_what_to_use_instead() {
        for (text, names, instead) in [
            ("SHOW USERS", "SHOW USERS", "[[tokens]]"),
            (
                "create user bob with password 'x'",
                "CREATE USER",
                "auth_tokens",
            ),
            ("GRANT ALL TO bob", "GRANT", "tokens"),
            ("SET PASSWORD FOR bob = 'y'", "SET PASSWORD", "tokens"),
            ("show stats for 'httpd'", "SHOW STATS", "/metrics"),
            ("SHOW DIAGNOSTICS", "SHOW DIAGNOSTICS", "/health"),
            ("SHOW QUERIES", "SHOW QUERIES", "chingest_queries_running"),
            (
                "KILL QUERY 36 ON \"host\"",
                "KILL QUERY",
                "closes the connection",
            ),
            (
                "SHOW SHARD GROUPS",
                "SHOW SHARD GROUPS",
                "partitioned by time",
            ),
            ("DROP SHARD 1", "DROP SHARD", "DELETE WHERE time"),
            (
                "DROP DATABASE telegraf",
                "DROP DATABASE",
                "DROP MEASUREMENT",
            ),
            (
                "DROP RETENTION POLICY rp ON db",
                "DROP RETENTION POLICY",
                "DURATION",
            ),
            (
                "SHOW SUBSCRIPTIONS",
                "SHOW SUBSCRIPTIONS",
                "copies no writes",
            ),
        ] {
            let message = refused(text).unwrap_or_else(|| panic!("{text}: not refused"));
            assert!(
                message.starts_with(&format!("{names} is not supported: ")),
                "{text}: {message}"
            );
            assert!(message.contains(instead), "{text}: {message}");
        }
    }

    #[test]
    fn other_statements_are_not_refused() {
        for text in [
            "SHOW DATABASES",
            "DROP MEASUREMENT m",
            "DROP SERIES FROM m",
            "SHOW SERIES",
            "SHOW",
            "DROP \"DATABASE\"",
            "SHOW CONTINUOUS QUERIES",
        ] {
            assert_eq!(refused(text), None, "{text}");
        }
    }
}
