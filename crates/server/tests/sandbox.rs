//! The hostile-SQL suite: what `/sql` and the ClickHouse HTTP interface
//! must refuse, by hand and generated from the engine's own catalogue (so a
//! new engine version's functions, table functions and system tables are
//! covered as it lists them), while the server keeps ingesting. A real
//! server on loopback (`support`); the `sandbox_cluster` target runs the
//! same suite against one in the `clickhouse` storage mode, whose reads go
//! through `Distributed` tables to a ClickHouse node.

#[macro_use]
mod support;

use reqwest::StatusCode;

use support::{base, clickhouse_base, client, run, sql, wait_ready, TOKEN};

pub(crate) fn main() {
    support::main(tests![
        hostile_statements_are_refused,
        the_catalogue_s_table_functions_are_refused_but_generators,
        the_catalogue_s_outside_reaching_functions_are_refused,
        system_tables_outside_the_list_are_refused,
        what_dashboards_read_is_allowed,
        the_clickhouse_interface_s_current_database_opens_no_system_table,
        what_clickhouse_clients_read_on_connect_is_allowed,
    ]);
}

/// Asserts `statement` gets `status`; returns the body.
async fn refused(statement: &str, status: StatusCode) -> String {
    let (got, text) = sql(statement).await;
    assert_eq!(got, status, "{statement}: {text}");
    text
}

/// One line of data in and out: the server still ingests and answers.
async fn still_ingesting(db: &str) {
    let r = client()
        .post(format!("{}/write?db={db}&durability=visible", base()))
        .bearer_auth(TOKEN)
        .body("m v=1i 1\n")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), StatusCode::NO_CONTENT);
    let (status, text) = sql(&format!("SELECT count() FROM {db}.m")).await;
    assert_eq!((status, text.trim()), (StatusCode::OK, "1"));
}

fn hostile_statements_are_refused() {
    run(async {
        wait_ready().await;
        let forbidden = StatusCode::FORBIDDEN;
        for statement in [
            // The file system.
            "SELECT file('/etc/passwd')",
            "SELECT FILE('/etc/passwd')",
            "SELECT substring(file('/etc/passwd'), 1, 10) AS f",
            "SELECT * FROM file('/etc/passwd', 'LineAsString')",
            "SELECT * FROM view(SELECT file('/etc/passwd'))",
            "SELECT 1 WHERE 1 IN (SELECT length(file('/etc/passwd')))",
            "WITH x AS (SELECT file('/etc/hostname') AS f) SELECT * FROM x",
            "SELECT filesystemAvailable()",
            "SELECT * FROM filesystem('/')",
            "SELECT catboostEvaluate('/etc/passwd', 1)",
            // The network and other servers.
            "SELECT * FROM url('http://127.0.0.1:1/', CSV, 'a String')",
            "SELECT * FROM s3('http://127.0.0.1:1/b/k', CSV, 'a String')",
            "SELECT * FROM remote('127.0.0.1', system.one)",
            "SELECT * FROM remoteSecure('127.0.0.1', system.one)",
            "SELECT * FROM cluster('default', system.one)",
            "SELECT * FROM mysql('127.0.0.1:1', 'd', 't', 'u', 'p')",
            "SELECT * FROM postgresql('127.0.0.1:1', 'd', 't', 'u', 'p')",
            "SELECT * FROM hdfs('hdfs://127.0.0.1:1/x', CSV, 'a String')",
            "SELECT aiGenerate('hello')",
            // Processes.
            "SELECT * FROM executable('id', TSV, 'a String')",
            // Tables by name, past the table checks.
            "SELECT * FROM merge('system', 'disks')",
            "SELECT * FROM loop(system.disks)",
            "SELECT joinGet('system.disks', 'path', 'default')",
            "SELECT * FROM dictionary('d')",
            "SELECT dictGet('d', 'a', 1)",
            // The server: paths, other callers, users, configuration.
            "SELECT * FROM system.disks",
            "SELECT path FROM `system`.`disks`",
            "SELECT query FROM system.processes",
            "SELECT * FROM system.query_log",
            "SELECT data_paths FROM system.tables",
            "SELECT * FROM system.databases",
            "SELECT * FROM system.users",
            "SELECT * FROM system.grants",
            "SELECT * FROM system.server_settings",
            "SELECT * FROM system.parts",
            "SELECT * FROM view(SELECT * FROM system.processes)",
            "SELECT getServerSetting('path')",
            "SELECT hostName()",
            "SELECT FQDN()",
            "SELECT currentProfiles()",
            "SELECT currentRoles()",
            "SELECT getMacro('x')",
            // Not a read.
            "INSERT INTO h.t VALUES (1)",
            "CREATE TABLE t (a Int8) ENGINE = Memory",
            "DROP DATABASE system",
            "SET max_execution_time = 1000",
            "SELECT 1 INTO OUTFILE '/tmp/x'",
            "SELECT 1; SELECT 2",
        ] {
            refused(statement, forbidden).await;
        }
        // A statement that passed is remembered; one refused stays refused,
        // however often it comes.
        for _ in 0..3 {
            assert_eq!(sql("SELECT 1").await.0, StatusCode::OK);
            refused("SELECT file('/etc/passwd')", forbidden).await;
        }
        // Raising a limit in the statement: the engine refuses it.
        let text = refused(
            "SELECT 1 SETTINGS max_execution_time = 1000",
            StatusCode::BAD_REQUEST,
        )
        .await;
        assert!(text.contains("readonly"), "{text}");
        still_ingesting("sb_hostile").await;
    })
}

/// Every table function the engine lists, called with no arguments: the
/// generators run (or fail on their arguments: 400), the rest are refused.
fn the_catalogue_s_table_functions_are_refused_but_generators() {
    run(async {
        let (status, names) = sql("SELECT name FROM system.table_functions ORDER BY name").await;
        assert_eq!(status, StatusCode::OK);
        let names: Vec<&str> = names.lines().collect();
        assert!(names.len() > 50, "{names:?}");
        let allowed = chingest::sandbox::ALLOWED_TABLE_FUNCTIONS;
        for name in names {
            let (status, text) = sql(&format!("SELECT * FROM {name}() LIMIT 1")).await;
            if allowed.contains(&name) {
                assert_ne!(status, StatusCode::FORBIDDEN, "{name}: {text}");
            } else if text.contains("SYNTAX_ERROR") {
                // A table function with its own syntax (viewIfPermitted)
                // does not parse without arguments: 400, nothing ran.
                assert_eq!(status, StatusCode::BAD_REQUEST, "{name}: {text}");
            } else {
                assert_eq!(status, StatusCode::FORBIDDEN, "{name}: {text}");
                assert!(text.contains(&format!("{name}()")), "{text}");
            }
        }
        still_ingesting("sb_tf").await;
    })
}

/// Every function of the engine's `AI`, `Dictionary` and `Introspection`
/// categories, and every denied function and its aliases.
fn the_catalogue_s_outside_reaching_functions_are_refused() {
    run(async {
        let denied = chingest::sandbox::DENIED_FUNCTIONS
            .iter()
            .map(|f| format!("'{f}'"))
            .collect::<Vec<_>>()
            .join(",");
        let (status, names) = sql(&format!(
            "SELECT name FROM system.functions \
             WHERE categories IN ('AI', 'Dictionary', 'Introspection') \
                OR name IN ({denied}) OR alias_to IN ({denied}) ORDER BY name"
        ))
        .await;
        assert_eq!(status, StatusCode::OK);
        let names: Vec<&str> = names.lines().collect();
        assert!(names.len() > 20, "{names:?}");
        for name in names {
            let text = refused(&format!("SELECT {name}()"), StatusCode::FORBIDDEN).await;
            assert!(text.contains("not allowed"), "{name}: {text}");
        }
        still_ingesting("sb_functions").await;
    })
}

/// Every `system` table of the engine (more than 50), and whether the
/// sandbox lets a caller with every database read it.
async fn system_tables() -> Vec<(String, bool)> {
    use chingest::sandbox::{CATALOGUE_SYSTEM_TABLES, UNSCOPED_SYSTEM_TABLES};
    let (status, names) =
        sql("SELECT DISTINCT table FROM system.columns WHERE database = 'system' ORDER BY table")
            .await;
    assert_eq!(status, StatusCode::OK, "{names}");
    let names: Vec<(String, bool)> = names
        .lines()
        .map(|name| {
            let allowed =
                CATALOGUE_SYSTEM_TABLES.contains(&name) || UNSCOPED_SYSTEM_TABLES.contains(&name);
            (name.to_owned(), allowed)
        })
        .collect();
    assert!(names.len() > 50, "{names:?}");
    names
}

fn system_tables_outside_the_list_are_refused() {
    run(async {
        for (name, allowed) in system_tables().await {
            let (status, text) = sql(&format!("SELECT * FROM system.{name} LIMIT 1")).await;
            if allowed {
                assert_eq!(status, StatusCode::OK, "system.{name}: {text}");
            } else {
                assert_eq!(status, StatusCode::FORBIDDEN, "system.{name}: {text}");
            }
        }
    })
}

/// What dashboards and tools send is not caught by the sandbox.
fn what_dashboards_read_is_allowed() {
    run(async {
        still_ingesting("sb_reads").await;
        for statement in [
            "SELECT count() FROM sb_reads.m",
            "SELECT time, v FROM sb_reads.`m.autogen` ORDER BY time",
            "SELECT s.tags, f.v FROM sb_reads.`m.autogen` AS f \
             JOIN (SELECT series_id, tags FROM sb_reads._series FINAL) AS s USING series_id",
            "SHOW TABLES FROM sb_reads",
            "SHOW DATABASES",
            "SELECT name, type FROM system.columns WHERE database = 'sb_reads'",
            "SELECT table_name FROM information_schema.tables WHERE table_schema = 'sb_reads'",
            "SELECT sum(number) FROM numbers(1000)",
            "SELECT toStartOfMinute(now()), version(), uptime(), currentDatabase()",
            "EXPLAIN SELECT 1",
        ] {
            let (status, text) = sql(statement).await;
            assert_eq!(status, StatusCode::OK, "{statement}: {text}");
        }
    })
}

/// One statement through the ClickHouse interface with `database` current:
/// the status and the `X-ClickHouse-Exception-Code`.
async fn clickhouse(statement: &str, database: &str) -> (StatusCode, Option<String>, String) {
    let r = client()
        .post(format!("{}/?database={database}", clickhouse_base()))
        .basic_auth("default", Some(TOKEN))
        .body(statement.to_owned())
        .send()
        .await
        .unwrap();
    let code = r
        .headers()
        .get("x-clickhouse-exception-code")
        .map(|v| v.to_str().unwrap().to_owned());
    (r.status(), code, r.text().await.unwrap())
}

/// `database=system` makes `system` tables nameable without their
/// database: every one outside the allow-list stays refused, and a
/// connection's current database does not outlive its statement.
fn the_clickhouse_interface_s_current_database_opens_no_system_table() {
    run(async {
        for (name, allowed) in system_tables().await {
            let statement = format!("SELECT * FROM {name} LIMIT 1");
            let (status, code, text) = clickhouse(&statement, "system").await;
            if allowed {
                assert_eq!(status, StatusCode::OK, "{name}: {text}");
            } else {
                assert_eq!(status, StatusCode::FORBIDDEN, "{name}: {text}");
                assert_eq!(code.as_deref(), Some("164"), "{name}: {text}");
            }
        }
        for statement in [
            "SELECT * FROM view(SELECT * FROM disks)",
            "SELECT * FROM merge(currentDatabase(), 'disks')",
            "SELECT path FROM disks AS d",
            "INSERT INTO one VALUES (1)",
            "USE default",
        ] {
            let (status, _, text) = clickhouse(statement, "system").await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{statement}: {text}");
        }
        let (status, _, text) = clickhouse("SELECT currentDatabase()", "default").await;
        assert_eq!((status, text.as_str()), (StatusCode::OK, "default\n"));
        still_ingesting("sb_clickhouse").await;
    })
}

/// The statements clickhouse-connect, `@clickhouse/client` and Grafana's
/// data source send on connect.
fn what_clickhouse_clients_read_on_connect_is_allowed() {
    run(async {
        wait_ready().await;
        for statement in [
            "SELECT version(), timezone()",
            "SELECT name, value, readonly FROM system.settings LIMIT 10000",
            "SELECT 1 AS check FORMAT Native",
            // ClickHouse's JDBC driver (DBeaver).
            "select currentUser(), timezone(), version(), getSetting('readonly') readonly \
             FORMAT RowBinaryWithNamesAndTypes",
            "SELECT name FROM system.databases",
        ] {
            let (status, code, text) = clickhouse(statement, "default").await;
            match statement.contains("system.databases") {
                // Every database's engine and path: refused.
                true => assert_eq!(code.as_deref(), Some("164"), "{text}"),
                false => assert_eq!(status, StatusCode::OK, "{statement}: {text}"),
            }
        }
    })
}
