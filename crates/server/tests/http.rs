//! End-to-end tests: a real server on a loopback port, real HTTP requests.
//!
//! The server comes from `support` (one per binary, token `secret`, small
//! limits); every test uses databases of its own.

mod support;

use std::io::Write as _;

use reqwest::StatusCode;
use serde_json::Value;

use support::{base, client, run, sql, wait_ready, TOKEN};

async fn write_v1(query: &str, body: impl Into<reqwest::Body>) -> (StatusCode, String) {
    wait_ready().await;
    let r = client()
        .post(format!("{}/write?{query}", base()))
        .header("Authorization", format!("Token {TOKEN}"))
        .body(body)
        .send()
        .await
        .unwrap();
    (r.status(), r.text().await.unwrap())
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    encoder.write_all(data).unwrap();
    encoder.finish().unwrap()
}

fn main() {
    support::main(tests![
        writes_are_stored_and_queryable,
        partial_writes_store_the_good_lines,
        v2_writes_use_bucket_and_token,
        credentials_are_required,
        gzip_bodies_and_encoding_errors,
        limits_answer_413_and_reject_long_lines,
        bad_parameters_are_400,
        sql_refuses_writes_and_reports_engine_errors,
        ping_health_ready,
        concurrent_writes_have_exact_counts,
        influxql_startup_statements,
        influxql_aggregates_from_memory_are_the_engines,
        metrics_count_requests_lines_and_flushes,
        hostile_input_gets_its_error_and_the_server_keeps_serving,
        per_line_limits_reject_only_their_line,
        large_sql_results_stream,
        a_sequential_client_is_never_refused,
        a_burst_past_the_slots_waits_its_turn,
    ]);
}

fn writes_are_stored_and_queryable() {
    run(async {
        let (status, body) = write_v1(
            "db=h_basic&precision=s",
            "cpu,host=a usage=0.5 1700000000\n",
        )
        .await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{body}");
        let (status, rows) = sql(
            "SELECT toUnixTimestamp(time), s.tags['host'], usage FROM h_basic.`cpu.autogen` \
             JOIN h_basic._series AS s USING series_id",
        )
        .await;
        assert_eq!(
            (status, rows.as_str()),
            (StatusCode::OK, "1700000000\ta\t0.5\n")
        );
    })
}

fn partial_writes_store_the_good_lines() {
    run(async {
        let body = "m v=1i 1\nm v=oops 2\nm v=3i 3\nm v=4.5 4\n";
        let (status, text) = write_v1("db=h_partial", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        let json: Value = serde_json::from_str(&text).unwrap();
        let error = json["error"].as_str().unwrap();
        assert!(
            error.starts_with("partial write: line 2, column 5:"),
            "{error}"
        );
        assert!(error.ends_with("dropped=2"), "{error}");
        assert_eq!(json["rejected"][1]["line"], 4);
        assert_eq!(json["accepted"], 2);
        let (_, rows) = sql("SELECT v FROM h_partial.`m.autogen` ORDER BY time").await;
        assert_eq!(rows, "1\n3\n");
    })
}

fn v2_writes_use_bucket_and_token() {
    run(async {
        wait_ready().await;
        let send = |bucket: &str, body: &'static str| {
            client()
                .post(format!(
                    "{}/api/v2/write?org=any&bucket={bucket}&precision=ms",
                    base()
                ))
                .header("Authorization", format!("Token {TOKEN}"))
                .body(body)
                .send()
        };
        let r = send("h_v2/weekly", "m v=1i 1000\n").await.unwrap();
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        let r = send("h_v2", "m v=2i 2000\nm v=x 3\n").await.unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let json: Value = r.json().await.unwrap();
        assert_eq!(json["code"], "invalid");
        assert!(
            json["message"].as_str().unwrap().contains("line 2"),
            "{json}"
        );
        let (_, rows) = sql(
            "SELECT * FROM (SELECT 'weekly', toUnixTimestamp64Milli(time), v FROM h_v2.`m.weekly` \
             UNION ALL SELECT 'autogen', toUnixTimestamp64Milli(time), v FROM h_v2.`m.autogen`) ORDER BY 1",
        )
        .await;
        assert_eq!(rows, "autogen\t2000\t2\nweekly\t1000\t1\n");
    })
}

fn credentials_are_required() {
    run(async {
        wait_ready().await;
        let url = format!("{}/write?db=h_auth", base());
        let r = client().post(&url).body("m v=1i\n").send().await.unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let r = client()
            .post(&url)
            .header("Authorization", "Token wrong")
            .body("m v=1i\n")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let json: Value = r.json().await.unwrap();
        assert_eq!(json["error"], "authorization failed");
        let r = client()
            .post(&url)
            .basic_auth("user", Some(TOKEN))
            .body("m v=1i\n")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        let r = client()
            .post(format!("{url}&u=user&p={TOKEN}"))
            .body("m v=2i\n")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        let r = client()
            .get(format!("{}/sql?query=SELECT%201", base()))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let r = client()
            .post(format!("{}/api/v2/write?bucket=h_auth", base()))
            .body("m v=1i\n")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let json: Value = r.json().await.unwrap();
        assert_eq!(json["code"], "unauthorized");
    })
}

fn gzip_bodies_and_encoding_errors() {
    run(async {
        wait_ready().await;
        let post = |encoding: &'static str, body: Vec<u8>| {
            client()
                .post(format!("{}/write?db=h_gzip", base()))
                .bearer_auth(TOKEN)
                .header("Content-Encoding", encoding)
                .body(body)
                .send()
        };
        let r = post("gzip", gzip(b"m v=1i 1\nm v=2i 2\n")).await.unwrap();
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        let mut corrupt = gzip(b"m v=3i 3\n");
        let n = corrupt.len();
        corrupt[n / 2] ^= 0xff;
        corrupt.truncate(n - 3);
        let r = post("gzip", corrupt).await.unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        assert!(r.text().await.unwrap().contains("gzip"));
        let r = post("br", b"m v=4i 4\n".to_vec()).await.unwrap();
        assert_eq!(r.status(), StatusCode::UNSUPPORTED_MEDIA_TYPE);
        let (_, rows) = sql("SELECT sum(v) FROM h_gzip.`m.autogen`").await;
        assert_eq!(rows, "3\n");
    })
}

fn limits_answer_413_and_reject_long_lines() {
    run(async {
        let big = "m v=1i 1\n".repeat(200_000); // 1.8 MB > 1 MiB
        wait_ready().await;
        let r = client()
            .post(format!("{}/write?db=h_limits", base()))
            .bearer_auth(TOKEN)
            .body(big.clone())
            .send()
            .await;
        // 413, or the close that follows it seen first by a client still sending.
        match r {
            Ok(r) => assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE),
            Err(err) => assert!(err.is_request(), "{err:?}"),
        }
        // Small on the wire, too large once decompressed.
        let (status, _) = {
            wait_ready().await;
            let r = client()
                .post(format!("{}/write?db=h_limits", base()))
                .bearer_auth(TOKEN)
                .header("Content-Encoding", "gzip")
                .body(gzip(big.as_bytes()))
                .send()
                .await
                .unwrap();
            (r.status(), ())
        };
        assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE);
        let long = format!("m s=\"{}\" 2\n", "x".repeat(5_000));
        let (status, text) = write_v1("db=h_limits", format!("m v=1i 1\n{long}m v=3i 3\n")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
        assert!(text.contains("line 2"), "{text}");
        let (_, rows) = sql("SELECT count() FROM h_limits.`m.autogen`").await;
        assert_eq!(rows, "2\n");
    })
}

fn bad_parameters_are_400() {
    run(async {
        let (status, text) = write_v1("precision=s", "m v=1i\n").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(text.contains("database is required"), "{text}");
        let (status, text) = write_v1("db=h_params&precision=fortnights", "m v=1i\n").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(text.contains("unknown precision"), "{text}");
        let (status, text) = write_v1("db=system", "m v=1i\n").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(text.contains("reserved"), "{text}");
    })
}

fn sql_refuses_writes_and_reports_engine_errors() {
    run(async {
        write_v1("db=h_sql", "m v=1i 1\n").await;
        for statement in [
            "DROP DATABASE h_sql",
            "INSERT INTO h_sql.`m.autogen` (v) VALUES (1)",
            "SELECT 1; SELECT 2",
        ] {
            let (status, text) = sql(statement).await;
            assert_eq!(status, StatusCode::FORBIDDEN, "{statement}: {text}");
        }
        // The sandbox's own suite is tests/sandbox.rs.
        let (status, text) = sql("SELECT * FROM file('/etc/passwd', 'LineAsString')").await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{text}");
        let (status, text) = sql("SELECT nope FROM h_sql.`m.autogen`").await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        assert!(text.contains("nope"), "{text}");
        let r = client()
            .get(format!("{}/sql", base()))
            .query(&[
                ("query", "SELECT v FROM h_sql.`m.autogen`"),
                ("format", "CSVWithNames"),
            ])
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert!(r.headers()["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/csv"));
        // A small answer goes out whole, with its length.
        assert_eq!(r.headers()["content-length"], "6");
        assert_eq!(r.text().await.unwrap(), "\"v\"\n1\n");
        let r = client()
            .get(format!("{}/sql", base()))
            .query(&[("query", "SELECT 1"), ("format", "Nope")])
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
    })
}

fn ping_health_ready() {
    run(async {
        wait_ready().await;
        let r = client()
            .get(format!("{}/ping", base()))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        assert!(r.headers().contains_key("x-influxdb-version"));
        let r = client()
            .head(format!("{}/ping", base()))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::NO_CONTENT);
        let r = client()
            .get(format!("{}/health", base()))
            .send()
            .await
            .unwrap();
        let json: Value = r.json().await.unwrap();
        assert_eq!(json["status"], "pass");
    })
}

fn concurrent_writes_have_exact_counts() {
    run(async {
        wait_ready().await;
        let tasks: Vec<_> = (0..8)
            .map(|t| {
                tokio::spawn(async move {
                    for w in 0..20 {
                        let body: String = (0..100)
                            .map(|l| format!("c,t={t} v={l}i {}\n", w * 100 + l))
                            .collect();
                        let (status, text) = write_v1("db=h_concurrent", body).await;
                        assert_eq!(status, StatusCode::NO_CONTENT, "{text}");
                    }
                })
            })
            .collect();
        for task in tasks {
            task.await.unwrap();
        }
        let (_, rows) =
            sql("SELECT count(), sum(v), uniqExact(series_id) FROM h_concurrent.`c.autogen`").await;
        assert_eq!(rows, format!("{}\t{}\t8\n", 8 * 20 * 100, 8 * 20 * 4950));
    })
}

fn influxql_startup_statements() {
    run(async {
        wait_ready().await;
        let query = |q: &str| {
            client()
                .post(format!("{}/query", base()))
                .bearer_auth(TOKEN)
                .form(&[("q", q)])
                .send()
        };
        let r = query("CREATE DATABASE \"h_ql\"").await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let r = query("SHOW DATABASES; SHOW RETENTION POLICIES ON h_ql")
            .await
            .unwrap();
        let json: Value = r.json().await.unwrap();
        let names = &json["results"][0]["series"][0]["values"];
        assert!(
            names
                .as_array()
                .unwrap()
                .contains(&serde_json::json!(["h_ql"])),
            "{json}"
        );
        assert_eq!(json["results"][1]["series"][0]["values"][0][0], "autogen");
        assert_eq!(json["results"][1]["series"][0]["values"][0][4], true);
        let r = query("CREATE RETENTION POLICY \"week\" ON h_ql DURATION 7d REPLICATION 1 DEFAULT")
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let json: Value = query("SHOW RETENTION POLICIES ON h_ql")
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            json["results"][0]["series"][0]["values"][1],
            serde_json::json!(["week", "168h0m0s", "168h0m0s", 1, false])
        );
        let json: Value = query("CREATE RETENTION POLICY x ON h_absent DURATION 1h REPLICATION 1")
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert!(
            json["results"][0]["error"]
                .as_str()
                .unwrap()
                .contains("not found"),
            "{json}"
        );
        // A query without a database is the statement's error, as in InfluxDB.
        let r = query("SELECT * FROM cpu").await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let json: Value = r.json().await.unwrap();
        assert_eq!(
            json["results"][0]["error"], "database name required",
            "{json}"
        );
        // A statement chingest refuses on purpose is the statement's
        // error, naming what to use instead, and the next one runs.
        let r = query("GRANT ALL TO someone; SHOW DATABASES").await.unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        let json: Value = r.json().await.unwrap();
        let error = json["results"][0]["error"].as_str().unwrap();
        assert!(error.starts_with("GRANT is not supported"), "{json}");
        assert!(error.contains("tokens"), "{json}");
        assert!(json["results"][1]["series"].is_array(), "{json}");
        // A statement InfluxQL does not have refuses the request, saying
        // where SQL goes.
        let r = query("SHOW FOO").await.unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        let json: Value = r.json().await.unwrap();
        assert!(json["error"].as_str().unwrap().contains("/sql"), "{json}");
    })
}

/// InfluxQL aggregates over recent points (answered from the ingestor's
/// memory) and over the same points three days earlier (older than the
/// recent samples' 26 h: read from the engine into the chunk cache, then
/// answered from it) equal the engine's own aggregates of the older
/// points (a condition always true on a field keeps memory out), times
/// shifted by the days: every supported function, intervals, groups,
/// fill, a transformation, lone selectors' times; and points written twice
/// into an `append` table, which memory keeps once, are still counted
/// twice.
fn influxql_aggregates_from_memory_are_the_engines() {
    const DAY_MS: i64 = 3 * 86_400_000;
    run(async {
        let db = "h_recent";
        let now_ms = chingest::clock::now_ms();
        // Memory's copy: the hour before the last whole hour's start.
        let recent = now_ms / 3_600_000 * 3_600_000 - 2 * 3_600_000;
        let body = |t0: i64| {
            let mut lines = String::new();
            let mut seed = 7u64;
            for i in 0..360i64 {
                let t = t0 + i * 10_000;
                for host in ["a", "b", "c"] {
                    seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
                    let n = (seed >> 40) as i64 % 21 - 10;
                    let x = (seed >> 20) as f64 / 1e6 - 500.0;
                    // Host c lacks `x` on every third point.
                    match host == "c" && i % 3 == 0 {
                        true => lines.push_str(&format!("m,host={host} n={n}i {t}\n")),
                        false => lines.push_str(&format!("m,host={host} n={n}i,x={x} {t}\n")),
                    }
                }
                lines.push_str(&format!("dup,host=a n={}i {t}\n", i % 7));
            }
            // A point written again: the table keeps both rows.
            lines.push_str(&format!("dup,host=a n=100i {}\n", t0 + 600_000));
            lines
        };
        for t0 in [recent - DAY_MS, recent] {
            let (status, text) = write_v1(
                &format!("db={db}&precision=ms&durability=visible"),
                body(t0),
            )
            .await;
            assert_eq!(status, StatusCode::NO_CONTENT, "{text}");
        }
        let metric = |name: &'static str| async move {
            support::metric(&support::metrics().await, name) as u64
        };
        let ask = |q: String| async move {
            let r = client()
                .get(format!("{}/query", base()))
                .bearer_auth(TOKEN)
                .query(&[("db", db), ("q", q.as_str()), ("epoch", "ms")])
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::OK);
            let answer: Value = r.json().await.unwrap();
            assert!(answer["results"][0]["error"].is_null(), "{q}: {answer}");
            answer["results"][0].clone()
        };
        // (query, whether memory answers it)
        let queries = [
            ("SELECT mean(x) FROM m WHERE host = 'a' AND {range} GROUP BY time(1m)", true),
            ("SELECT mean(n), sum(n), count(n), min(n), max(n), first(n), last(n) FROM m WHERE {range} GROUP BY time(5m), host fill(null)", true),
            ("SELECT sum(x), count(x), min(x), max(x) FROM m WHERE host =~ /a|c/ AND {range} GROUP BY time(10m) fill(0)", true),
            ("SELECT max(n) FROM m WHERE {range}", true),
            ("SELECT first(x) FROM m WHERE host != 'b' AND {range} GROUP BY host", true),
            ("SELECT min(x), max(x) FROM m WHERE {range}", true),
            ("SELECT derivative(mean(x), 1m) FROM m WHERE host = 'b' AND {range} GROUP BY time(1m)", true),
            ("SELECT mean(x) FROM m WHERE {range} GROUP BY time(8m) fill(previous)", true),
            ("SELECT count(x) FROM m WHERE host = 'c' AND {range} GROUP BY time(90s, 20s)", true),
            ("SELECT count(n), sum(n) FROM dup WHERE {range} GROUP BY time(10m)", false),
            // Not answered from memory: a condition on a field, a median.
            ("SELECT count(n) FROM m WHERE n > 0 AND {range} GROUP BY time(10m)", false),
            ("SELECT median(n) FROM m WHERE {range} GROUP BY time(10m), host", false),
        ];
        let shifted = |mut answer: Value| {
            for series in answer["series"].as_array_mut().into_iter().flatten() {
                for row in series["values"].as_array_mut().unwrap() {
                    row[0] = serde_json::json!(row[0].as_i64().unwrap() - DAY_MS);
                }
            }
            answer
        };
        for (template, from_memory) in queries {
            let range =
                |t0: i64| format!("time >= {}ms AND time < {}ms", t0 + 120_000, t0 + 3_300_000);
            let older = range(recent - DAY_MS);
            let engine = ask(template.replace("{range}", &format!("{older} AND n > -1000"))).await;
            let old = ask(template.replace("{range}", &older)).await;
            // Asked again, from the chunk cache: once the engine holds
            // every row in flight as old as these (other tests write old
            // rows too), a fill keeps the blocks.
            let mut again = Vec::new();
            for _ in 0..100 {
                let hits = metric("chingest_chunk_cache_hits_total").await;
                again.push(ask(template.replace("{range}", &older)).await);
                if !from_memory || metric("chingest_chunk_cache_hits_total").await > hits {
                    break;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
            assert!(
                again.len() < 100,
                "{template}: never read from the chunk cache"
            );
            let reads = metric("chingest_recent_reads_total").await;
            let new = ask(template.replace("{range}", &range(recent))).await;
            let read_memory = metric("chingest_recent_reads_total").await > reads;
            assert_eq!(read_memory, from_memory, "{template}: read from memory");
            assert!(
                engine["series"].as_array().is_some_and(|s| !s.is_empty()),
                "{template}: {engine}"
            );
            assert_same(&old, &engine, template);
            for again in &again {
                assert_same(again, &engine, template);
            }
            assert_same(&shifted(new), &engine, template);
        }
        // `last()` alone over a range reaching back past memory (a stat
        // panel): each series' newest point, as the engine's.
        let since = format!("time >= {}ms", recent - DAY_MS);
        for stat in [
            "SELECT last(x), last(n) FROM m WHERE {since} GROUP BY host",
            "SELECT last(x) FROM m WHERE host = 'c' AND {since}",
        ] {
            let from_memory = ask(stat.replace("{since}", &since)).await;
            let engine = ask(stat.replace("{since}", &format!("{since} AND n > -1000"))).await;
            assert!(
                engine["series"].as_array().is_some_and(|s| !s.is_empty()),
                "{stat}: {engine}"
            );
            assert_same(&from_memory, &engine, stat);
        }
        // A Grafana variable's tag values come from the index.
        let reads = metric("chingest_index_reads_total").await;
        let values = ask("SHOW TAG VALUES WITH KEY = \"host\" WHERE host != 'b'".to_owned()).await;
        assert!(metric("chingest_index_reads_total").await > reads);
        assert_eq!(
            values["series"],
            serde_json::json!([
                {"name": "dup", "columns": ["key", "value"], "values": [["host", "a"]]},
                {"name": "m", "columns": ["key", "value"], "values": [["host", "a"], ["host", "c"]]}
            ])
        );
        // The point written twice counts twice, from either side.
        let dup = ask(format!(
            "SELECT count(n) FROM dup WHERE time >= {}ms AND time < {}ms",
            recent + 600_000,
            recent + 600_001
        ))
        .await;
        assert_eq!(dup["series"][0]["values"][0][1], 2, "{dup}");
    })
}

/// JSON equal but for floats, equal within a relative 1e-12: the engine
/// and memory sum in different orders.
fn assert_same(a: &Value, b: &Value, what: &str) {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.is_f64() || y.is_f64() => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            assert!(
                (x - y).abs() <= 1e-12 * x.abs().max(y.abs()),
                "{what}: {x} != {y}"
            );
        }
        (Value::Array(x), Value::Array(y)) => {
            assert_eq!(x.len(), y.len(), "{what}: {a} != {b}");
            x.iter().zip(y).for_each(|(x, y)| assert_same(x, y, what));
        }
        (Value::Object(x), Value::Object(y)) => {
            assert_eq!(
                x.keys().collect::<Vec<_>>(),
                y.keys().collect::<Vec<_>>(),
                "{what}"
            );
            x.values()
                .zip(y.values())
                .for_each(|(x, y)| assert_same(x, y, what));
        }
        _ => assert_eq!(a, b, "{what}"),
    }
}

fn metrics_count_requests_lines_and_flushes() {
    run(async {
        write_v1("db=h_metrics", "m v=1i 1\nm v=x 2\n").await;
        let text = support::metrics().await;
        let value = |name: &str| support::metric(&text, name);
        assert!(value("chingest_http_requests_total{endpoint=\"/write\",status=\"400\"}") >= 1.0);
        assert!(value("chingest_lines_accepted_total") >= 1.0);
        assert!(value("chingest_rows_written_total{protocol=\"line_protocol\"}") >= 1.0);
        assert!(value("chingest_lines_rejected_total") >= 1.0);
        assert!(value("chingest_flushes_total") >= 1.0);
        assert!(value("chingest_engine_parts") >= 1.0);
        assert!(value("chingest_engine_bytes_on_disk") > 0.0);
        assert!(value("chingest_series_created_total") >= 1.0);
        assert!(value("chingest_flush_rows_count") >= 1.0);
        assert!(text.contains(
            "chingest_http_request_duration_seconds_bucket{endpoint=\"/write\",le=\"+Inf\"}"
        ));
        assert!(text.contains("# TYPE chingest_buffered_bytes gauge"));
        // This test process's own memory: more than the engine's code alone.
        let rss = value("process_resident_memory_bytes");
        assert!(rss > 10e6, "{rss}");
        assert!(value("chingest_process_resident_memory_peak_bytes") >= rss);
    })
}

fn hostile_input_gets_its_error_and_the_server_keeps_serving() {
    run(async {
        // Invalid UTF-8 in one line: that line only.
        let mut body = b"m v=1i 1\nm,t=\xff\xfe v=2i 2\nm v=3i 3\n".to_vec();
        body.extend_from_slice(b"\x00\x01 garbage\n");
        let (status, text) = write_v1("db=h_hostile", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
        let json: Value = serde_json::from_str(&text).unwrap();
        assert_eq!(json["rejected"][0]["line"], 2);
        assert!(
            json["rejected"][0]["reason"]
                .as_str()
                .unwrap()
                .contains("UTF-8"),
            "{json}"
        );
        // 100 MB body: refused without reading it all. The server answers
        // 413 and closes the connection; a client still sending may see the
        // close (broken pipe) before it reads the 413.
        let r = client()
            .post(format!("{}/write?db=h_hostile", base()))
            .bearer_auth(TOKEN)
            .body(vec![b'x'; 100 << 20])
            .send()
            .await;
        match r {
            Ok(r) => assert_eq!(r.status(), StatusCode::PAYLOAD_TOO_LARGE),
            Err(err) => assert!(err.is_request(), "{err:?}"),
        }
        // A single long line, and one with 10,000 tags: past the line limit.
        let long_line = format!("m s=\"{}\" 4\n", "y".repeat(900_000));
        let (status, text) = write_v1("db=h_hostile", long_line).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
        let tags: String = (0..10_000).map(|i| format!(",t{i}=v")).collect();
        let (status, text) = write_v1("db=h_hostile", format!("m{tags} v=1i 5\n")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
        // Header abuse: an enormous header is refused by the HTTP layer.
        let r = client()
            .post(format!("{}/write?db=h_hostile", base()))
            .bearer_auth(TOKEN)
            .header("X-Junk", "z".repeat(1 << 20))
            .body("m v=9i 9\n")
            .send()
            .await;
        assert!(r.map_or(true, |r| r.status().is_client_error()));
        // Still serving, and only the good lines were stored.
        let (_, rows) = sql("SELECT v FROM h_hostile.`m.autogen` ORDER BY v").await;
        assert_eq!(rows, "1\n3\n");
    })
}

fn per_line_limits_reject_only_their_line() {
    run(async {
        let tags: String = (0..257).map(|i| format!(",t{i}=v")).collect();
        let fields: String = (0..1025).map(|i| format!("f{i}=1i,")).collect();
        let long_key = "k".repeat(257);
        let body = format!(
            "m v=1i 1\nm{tags} v=2i 2\nm {} 3\nm,{long_key}=x v=4i 4\nm {long_key}=5i 5\nm v=6i 6\n",
            fields.trim_end_matches(',')
        );
        // Lines here are longer than the test server's 4 kB line limit, so
        // these run against a body of short lines where possible.
        let (status, text) = write_v1("db=h_line_limits", body).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{text}");
        let json: Value = serde_json::from_str(&text).unwrap();
        let reasons: Vec<(u64, String)> = json["rejected"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| {
                (
                    r["line"].as_u64().unwrap(),
                    r["reason"].as_str().unwrap().to_owned(),
                )
            })
            .collect();
        assert_eq!(reasons.len(), 4, "{reasons:?}");
        assert!(
            reasons[0].1.contains("too many tags: 257 (limit 256)"),
            "{reasons:?}"
        );
        // 1,025 fields do not fit the test server's 4 kB lines: the line
        // limit answers first (the field limit is tested in the library).
        assert!(
            reasons[1].1.contains("longer than the limit"),
            "{reasons:?}"
        );
        assert!(
            reasons[2].1.contains("tag key is 257 bytes long"),
            "{reasons:?}"
        );
        assert!(
            reasons[3].1.contains("field key is 257 bytes long"),
            "{reasons:?}"
        );
        let (_, rows) = sql("SELECT v FROM h_line_limits.`m.autogen` ORDER BY v").await;
        assert_eq!(rows, "1\n6\n");
    })
}

fn large_sql_results_stream() {
    run(async {
        wait_ready().await;
        let mut r = client()
            .get(format!("{}/sql", base()))
            .query(&[
                ("query", "SELECT number FROM system.numbers LIMIT 3000000"),
                ("format", "CSV"),
            ])
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        // Several chunks arrive, and together they are the whole result.
        let (mut chunks, mut lines, mut last) = (0, 0usize, Vec::new());
        while let Some(chunk) = r.chunk().await.unwrap() {
            chunks += 1;
            lines += chunk.iter().filter(|&&b| b == b'\n').count();
            last = chunk.to_vec();
        }
        assert!(chunks > 1, "{chunks} chunk(s)");
        assert_eq!(lines, 3_000_000);
        assert!(last.ends_with(b"2999999\n"));
    })
}

/// One keep-alive client asking one-series lookups back to back, as fast
/// as it can, is never refused: a statement's slot is free again before
/// its answer ends, and one that found the slots busy would wait its turn.
fn a_sequential_client_is_never_refused() {
    run(async {
        let (status, text) = write_v1(
            "db=h_sequential&precision=s",
            "cpu,host=a usage=0.5 1700000000\n",
        )
        .await;
        assert_eq!(status, StatusCode::NO_CONTENT, "{text}");
        let (_, id) = sql("SELECT series_id FROM h_sequential._series").await;
        let lookup = format!(
            "SELECT usage FROM h_sequential.`cpu.autogen` WHERE series_id = {} \
             ORDER BY time DESC LIMIT 1",
            id.trim()
        );
        let client = client();
        let mut statuses = std::collections::BTreeMap::new();
        for _ in 0..500 {
            let r = client
                .post(format!("{}/sql?format=TabSeparated", base()))
                .bearer_auth(TOKEN)
                .body(lookup.clone())
                .send()
                .await
                .unwrap();
            let status = r.status().as_u16();
            let text = r.text().await.unwrap();
            if status == 200 {
                assert_eq!(text, "0.5\n");
            }
            *statuses.entry(status).or_insert(0) += 1;
        }
        assert_eq!(statuses, [(200, 500)].into());
    })
}

/// A burst of statements past `query.max_concurrent` (4) and within
/// `query.max_queued` (64), as a dashboard's panels ask at once: those
/// that find every slot busy wait, and every one is answered.
fn a_burst_past_the_slots_waits_its_turn() {
    run(async {
        wait_ready().await;
        let queued = || async {
            support::metric(&support::metrics().await, "chingest_queries_queued_total")
        };
        let before = queued().await;
        let burst: Vec<_> = (0..24)
            .map(|i| {
                tokio::spawn(async move {
                    let r = client()
                        .post(format!("{}/sql?format=TabSeparated", base()))
                        .bearer_auth(TOKEN)
                        .body(format!("SELECT {i}, sleepEachRow(0.1) FROM numbers(2)"))
                        .send()
                        .await
                        .unwrap();
                    (i, r.status(), r.text().await.unwrap())
                })
            })
            .collect();
        for panel in burst {
            let (i, status, text) = panel.await.unwrap();
            assert_eq!(
                (status, text),
                (StatusCode::OK, format!("{i}\t0\n{i}\t0\n"))
            );
        }
        assert!(
            queued().await > before,
            "some of the burst waited for a slot"
        );
    })
}
