//! The hostile-SQL suite: what `/sql` must refuse, by hand and generated
//! from the engine's own catalogue (so a new engine version's functions,
//! table functions and system tables are covered as it lists them), while
//! the server keeps ingesting. A real server on loopback (`support`).

mod support;

use reqwest::StatusCode;

use support::{base, client, run, sql, wait_ready, TOKEN};

fn main() {
    support::main(tests![
        hostile_statements_are_refused,
        the_catalogue_s_table_functions_are_refused_but_generators,
        the_catalogue_s_outside_reaching_functions_are_refused,
        system_tables_outside_the_list_are_refused,
        what_dashboards_read_is_allowed,
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
            "SELECT currentUser()",
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

fn system_tables_outside_the_list_are_refused() {
    run(async {
        let (status, names) = sql(
            "SELECT DISTINCT table FROM system.columns WHERE database = 'system' ORDER BY table",
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{names}");
        let names: Vec<&str> = names.lines().collect();
        assert!(names.len() > 50, "{names:?}");
        for name in names {
            let (status, text) = sql(&format!("SELECT * FROM system.{name} LIMIT 1")).await;
            use chingest::sandbox::{CATALOGUE_SYSTEM_TABLES, UNSCOPED_SYSTEM_TABLES};
            if CATALOGUE_SYSTEM_TABLES.contains(&name) || UNSCOPED_SYSTEM_TABLES.contains(&name) {
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
