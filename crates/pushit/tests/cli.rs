//! Runs the real `pushit` binary, each mode on a small load, and checks its
//! JSON rows: every mode runs end to end on the real engine, stores exactly
//! what it inserted (pushit fails otherwise), and reports the documented
//! keys. Each run is its own process with its own data directory.

use std::path::Path;
use std::process::Command;

use serde_json::Value;

/// Runs `pushit --json --quiet ARGS` in `dir`; returns its JSON rows.
fn pushit(dir: &Path, args: &[&str]) -> Vec<Value> {
    let output = Command::new(env!("CARGO_BIN_EXE_pushit"))
        .args(["--json", "--quiet", "--data-dir"])
        .arg(dir.join("data"))
        .args(args)
        .current_dir(dir)
        .output()
        .expect("run pushit");
    assert!(
        output.status.success(),
        "pushit {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout)
        .expect("UTF-8 output")
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{line:?}: {e}")))
        .collect()
}

/// `pushit promql`'s rows: one per query and server, then one per
/// server's memory, whose chingest row (the server in process) is checked
/// here: its private memory, and its index's bytes a series.
fn promql(dir: &Path, args: &[&str]) -> Vec<Value> {
    let (queries, memory): (Vec<Value>, Vec<Value>) = pushit(dir, args)
        .into_iter()
        .partition(|row| row.get("query").is_some());
    assert_eq!(memory.len(), 1, "{memory:?}");
    let chingest = &memory[0];
    assert_eq!(chingest["server"], "chingest");
    assert!(
        chingest["rss_anon_bytes"].as_u64().unwrap() > 0,
        "{chingest}"
    );
    let per_series = chingest["index_bytes_per_series"].as_f64().unwrap();
    assert!((16.0..1_000.0).contains(&per_series), "{chingest}");
    // In process: pushit's own memory, and it says so.
    assert!(chingest["note"].as_str().unwrap().contains("--url"));
    queries
}

/// Each row's answer size: (series, points).
fn answer_sizes(rows: &[Value]) -> Vec<(u64, u64)> {
    rows.iter()
        .map(|row| {
            (
                row["series"].as_u64().unwrap(),
                row["points"].as_u64().unwrap(),
            )
        })
        .collect()
}

fn rate(row: &Value) -> f64 {
    row["rows_per_s"].as_f64().expect("rows_per_s")
}

#[test]
fn layouts_reports_every_layout() {
    let dir = tempfile::tempdir().unwrap();
    let rows = pushit(
        dir.path(),
        &[
            "layouts",
            "--series",
            "50",
            "--timestamps",
            "40",
            "--batch-samples",
            "500",
        ],
    );
    let layouts: Vec<&str> = rows.iter().map(|r| r["layout"].as_str().unwrap()).collect();
    assert_eq!(
        layouts,
        [
            "cols",
            "map",
            "series_id",
            "series_id + long",
            "series_id (Buffer)"
        ]
    );
    for row in &rows {
        assert_eq!(row["mode"], "layouts");
        assert_eq!(row["samples"], 2_000);
        assert!(rate(row) > 0.0);
        let share = row["convert_share"].as_f64().unwrap();
        assert!(share > 0.0, "{row}");
        assert!(row["bytes_on_disk"].as_u64().unwrap() > 0, "{row}");
        assert_eq!(row["run"], "warm");
    }
    // The long layout stores a row per field (5 by default).
    assert_eq!(rows[3]["rows"], 10_000);
}

#[test]
fn batch_sweeps_sizes_and_marks_the_target() {
    let dir = tempfile::tempdir().unwrap();
    let rows = pushit(
        dir.path(),
        &[
            "batch",
            "--series",
            "100",
            "--timestamps",
            "30",
            "--sizes",
            "500,3000",
            "--target",
            "1",
            "--cold",
        ],
    );
    // --cold: the first point's first run is its own row.
    let labels: Vec<(u64, &str)> = rows
        .iter()
        .map(|r| {
            (
                r["batch_rows"].as_u64().unwrap(),
                r["run"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(labels, [(500, "cold"), (500, "warm"), (3000, "warm")]);
    assert_eq!(rows[1]["inserts"], 6);
    assert_eq!(rows[2]["inserts"], 1);
    assert!(rows.iter().all(|r| r["meets_target"] == true));
}

#[test]
fn workers_runs_three_arms_and_draws_a_chart() {
    let dir = tempfile::tempdir().unwrap();
    let rows = pushit(
        dir.path(),
        &[
            "workers",
            "--workers",
            "1,2",
            "--batch-rows",
            "2000",
            "--inserts-per-worker",
            "2",
        ],
    );
    let points: Vec<(&str, u64)> = rows
        .iter()
        .map(|r| (r["arm"].as_str().unwrap(), r["workers"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        points,
        [
            ("shared", 1),
            ("shared", 2),
            ("per_worker_tables", 1),
            ("per_worker_tables", 2),
            ("per_worker_one_table", 1),
            ("per_worker_one_table", 2),
        ]
    );
    for row in &rows {
        let workers = row["workers"].as_f64().unwrap();
        assert_eq!(row["rows"].as_f64().unwrap(), workers * 2.0 * 2000.0);
        let per_worker = row["rows_per_s_per_worker"].as_f64().unwrap();
        assert!((per_worker * workers - rate(row)).abs() < 1e-6 * rate(row));
    }
    assert_eq!(rows[0]["speedup"], 1.0);
    let chart = std::fs::read_to_string(dir.path().join("pushit-workers.svg")).unwrap();
    assert!(chart.starts_with("<svg") && chart.contains("connection per worker"));
}

#[test]
fn ceiling_names_its_peak() {
    let dir = tempfile::tempdir().unwrap();
    let chart = dir.path().join("curve.svg");
    let rows = pushit(
        dir.path(),
        &[
            "ceiling",
            "--workers",
            "1,3",
            "--batch-rows",
            "1000",
            "--inserts-per-worker",
            "1",
            "--chart",
            chart.to_str().unwrap(),
        ],
    );
    assert_eq!(rows.len(), 3);
    let summary = &rows[2];
    assert_eq!(summary["summary"], true);
    let best = rows[..2]
        .iter()
        .max_by(|a, b| rate(a).total_cmp(&rate(b)))
        .unwrap();
    assert_eq!(summary["peak_workers"], best["workers"]);
    assert!(chart.exists());
}

#[test]
fn flush_compares_direct_and_buffer() {
    let dir = tempfile::tempdir().unwrap();
    let rows = pushit(
        dir.path(),
        &["flush", "--flushes", "20", "--flush-rows", "400"],
    );
    let cases: Vec<(&str, &str, u64)> = rows
        .iter()
        .map(|r| {
            (
                r["case"].as_str().unwrap(),
                r["path"].as_str().unwrap(),
                r["tables"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        cases,
        [
            ("one table", "direct", 1),
            ("one table", "buffer", 1),
            ("fan-out", "direct", 8),
            ("fan-out", "buffer", 8),
        ]
    );
    // The Buffer gathers each table's 20 flushes into one part.
    assert_eq!(rows[1]["parts"], 1);
    assert_eq!(rows[3]["parts"], 8);
    assert!(rows[0]["parts"].as_u64().unwrap() > 1);
    assert!(rows.iter().all(|r| r["rows"] == 8_000));
}

/// `pushit <mode>` (http, grpc, replay) with 2,000 rows in 400-line bodies, and
/// `extra` flags.
fn small_load<'a>(mode: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec![
        mode,
        "--hosts",
        "50",
        "--steps",
        "40",
        "--lines-per-body",
        "400",
    ];
    args.extend(extra);
    args
}

#[test]
fn http_reports_e2e_against_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let rows = pushit(dir.path(), &small_load("http", &["--connections", "2"]));
    assert_eq!(rows.len(), 3);
    assert_eq!(rows[0]["path"], "engine");
    assert_eq!(rows[0]["rows"], 2_000);
    let http = &rows[1];
    assert_eq!(http["path"], "http");
    // The first body (400 lines) creates the series before the clock starts.
    assert_eq!(http["rows"], 1_600);
    assert_eq!(http["requests"], 4);
    assert!(http["p50_ms"].as_f64().unwrap() <= http["p99_ms"].as_f64().unwrap());
    // Answered once synced in the log (the default); queryable after that.
    assert_eq!(http["durability"], "fsync");
    let visible = http["visible_rows_per_s"].as_f64().unwrap();
    assert!(visible > 0.0 && visible <= rate(http), "{http}");
    assert!(http["visible_over_engine"].as_f64().unwrap() <= http["over_engine"].as_f64().unwrap());
    // The probe wrote at least its first row, and saw every row it wrote.
    assert!(http["lag_probes"].as_u64().unwrap() >= 1, "{http}");
    let lag = |q: &str| http[q].as_f64().unwrap();
    assert!(0.0 < lag("lag_p50_ms") && lag("lag_p50_ms") <= lag("lag_p99_ms"));
    let summary = &rows[2];
    assert_eq!(summary["summary"], true);
    assert_eq!(summary["durability"], "fsync");
    let ratio = summary["e2e_over_engine"].as_f64().unwrap();
    assert!((ratio - rate(http) / rate(&rows[0])).abs() < 1e-9);
}

#[test]
fn a_query_bomb_runs_each_path_again_and_reports_it_against_the_plain_run() {
    let dir = tempfile::tempdir().unwrap();
    let bomb = "SELECT sleepEachRow(1) FROM numbers(3)";
    let rows = pushit(
        dir.path(),
        &small_load("http", &["--query-bomb", bomb, "--bomb-seconds", "0.2"]),
    );
    assert_eq!(rows.len(), 4);
    let (plain, bombed) = (&rows[1], &rows[2]);
    assert_eq!(plain["path"], "http");
    assert_eq!(bombed["path"], "http + bomb");
    assert_eq!(bombed["rows"], 1_600);
    // Every bomb query outlived its 0.2 s and was abandoned.
    let started = bombed["bomb_queries"].as_u64().unwrap();
    assert!(started >= 1, "{bombed}");
    assert_eq!(bombed["bomb_cancelled"].as_u64().unwrap(), started);
    let ratio = bombed["over_plain"].as_f64().unwrap();
    assert!((ratio - rate(bombed) / rate(plain)).abs() < 1e-9);
    assert_eq!(rows[3]["http_bomb_over_plain"], bombed["over_plain"]);
}

#[test]
fn grpc_measures_every_path_against_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let rows = pushit(
        dir.path(),
        &small_load(
            "grpc",
            &[
                "--batch-rows",
                "500",
                "--connections",
                "2",
                "--durability",
                "visible",
            ],
        ),
    );
    // Each path comes right after an engine run of its own.
    let paths: Vec<&str> = rows[..8]
        .iter()
        .map(|r| r["path"].as_str().unwrap())
        .collect();
    assert_eq!(
        paths,
        [
            "engine",
            "http",
            "engine",
            "grpc-lp",
            "engine",
            "grpc-points",
            "engine",
            "grpc-arrow"
        ]
    );
    // Each path's first request (400 lines, or one 500-row batch) is sent
    // before the clock starts.
    let timed: Vec<u64> = rows[..8]
        .iter()
        .skip(1)
        .step_by(2)
        .map(|r| r["rows"].as_u64().unwrap())
        .collect();
    assert_eq!(timed, [1_600, 1_600, 1_600, 1_500]);
    for pair in rows[..8].chunks(2) {
        let (engine, path) = (&pair[0], &pair[1]);
        assert_eq!(engine["rows"], 2_000);
        let over = path["over_engine"].as_f64().unwrap();
        assert!((over - rate(path) / rate(engine)).abs() < 1e-9, "{path}");
        assert_eq!(path["durability"], "visible");
    }
    let summary = &rows[8];
    assert_eq!(summary["summary"], true);
    assert_eq!(summary["grpc_arrow_over_engine"], rows[7]["over_engine"]);
    let lp_over_http = summary["grpc_lp_over_http"].as_f64().unwrap();
    assert!((lp_over_http - rate(&rows[3]) / rate(&rows[1])).abs() < 1e-9);
}

#[test]
fn edits_times_each_kind_of_edit_and_checks_it() {
    let dir = tempfile::tempdir().unwrap();
    let args = ["edits", "--hosts", "6", "--steps", "400", "--repeats", "2"];
    let rows = pushit(dir.path(), &args);
    let kinds: Vec<&str> = rows.iter().map(|r| r["edit"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "delete (/api/v2/delete)",
            "update (/api/v2/update)",
            "DELETE (InfluxQL)"
        ]
    );
    for row in &rows {
        assert_eq!(row["requests"], 2, "{row}");
        assert_eq!(row["table_rows"], 2_400, "{row}");
        assert!(row["p50_ms"].as_f64().unwrap() <= row["max_ms"].as_f64().unwrap());
    }
}

#[test]
fn prom_sends_remote_write_requests_and_counts_every_sample() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "prom",
        "--targets",
        "3",
        "--series-per-target",
        "20",
        "--scrapes",
        "5",
        "--samples-per-request",
        "25",
    ];
    let rows = pushit(dir.path(), &args);
    let row = &rows[0];
    assert_eq!(row["series"], 60);
    // The first request (25 samples) goes before the clock starts.
    assert_eq!(row["samples"], 275);
    assert_eq!(row["requests"], 11);
    assert!(row["bytes_per_sample"].as_f64().unwrap() > 0.0, "{row}");
    assert!(row["samples_per_s"].as_f64().unwrap() > 0.0, "{row}");
}

#[test]
fn promql_asks_every_query_of_chingest_alone() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "promql",
        "--jobs",
        "1",
        "--instances",
        "2",
        "--cpus",
        "1",
        "--hours",
        "1",
        "--seconds",
        "0.3",
        "--repeat",
        "2",
    ];
    let rows = promql(dir.path(), &args);
    let sizes = answer_sizes(&rows);
    // The panel's hour at 15 s steps and the whole hour at 1 m steps, less
    // the steps with fewer than two samples in their window (the data
    // starts 15 s after the hour); 16 series; 2 instances; 1 name.
    assert_eq!(sizes, [(1, 239), (1, 60), (16, 0), (2, 0), (1, 0)]);
    for row in &rows {
        assert_eq!(row["server"], "chingest");
        assert!(row["qps"].as_f64().unwrap() > 0.0, "{row}");
        // No peer: nothing to compare with.
        assert!(
            row.get("chingest_over").is_none() && row.get("met").is_none(),
            "{row}"
        );
    }
    assert_eq!(rows[1]["queries"], 2);
}

#[test]
fn promql_dashboard_asks_every_panel_of_chingest_alone() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "promql",
        "--dashboard",
        "--hosts",
        "2",
        "--hours",
        "1",
        "--seconds",
        "0.5",
    ];
    let rows = promql(dir.path(), &args);
    let sizes = answer_sizes(&rows);
    // An hour of data: 1 h at 15 s steps, less the first step for a rate;
    // 6 h at 60 s steps, of which the hour's 60 have data; an instant;
    // 2 hosts; 1 host's series; mixed and a refresh, every panel once.
    let panels = [
        (1, 239),
        (1, 240),
        (1, 60),
        (1, 1),
        (1, 239),
        (2, 120),
        (2, 0),
        (1, 0),
    ];
    let every_panel = (10, 899);
    assert_eq!(sizes[..8], panels);
    assert_eq!(sizes[8..], [every_panel, every_panel]);
    for row in &rows {
        assert_eq!(row["server"], "chingest");
        assert!(row["qps"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(row["connections"], 4, "{row}");
        // No peer: nothing to compare with.
        assert!(
            row.get("chingest_over").is_none() && row.get("met").is_none(),
            "{row}"
        );
    }
    // Mixed has no target of its own; the refresh's is VictoriaMetrics'.
    assert!(rows[8].get("target").is_none(), "{}", rows[8]);
    assert_eq!(rows[9]["target"], "≥ 1× victoriametrics (cached)");
}

#[test]
fn promql_cardinality_asks_a_fleet_s_lookups_of_chingest_alone() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "promql",
        "--cardinality",
        "400",
        "--seconds",
        "0.3",
        "--repeat",
        "2",
    ];
    let rows = promql(dir.path(), &args);
    let sizes = answer_sizes(&rows);
    // 200 pods over 100 namespaces: a namespace's 2 pods; a pod's 2
    // series, and their rates (points where a minute's window holds two
    // samples); the 500s summed by each of the 2 paths; 7 label names; 1
    // metric name.
    assert_eq!(sizes[0], (2, 0), "{rows:?}");
    assert_eq!(sizes[1], (2, 0), "{rows:?}");
    assert_eq!(sizes[2].0, 2, "{rows:?}");
    assert!(sizes[2].1 > 0, "{rows:?}");
    assert_eq!(sizes[3].0, 2, "{rows:?}");
    assert_eq!(sizes[4..], [(7, 0), (1, 0)], "{rows:?}");
    for row in &rows {
        assert_eq!(row["server"], "chingest");
        assert!(row["qps"].as_f64().unwrap() > 0.0, "{row}");
        assert_eq!(row["target"], "≥ 1× victoriametrics-uncached", "{row}");
    }
}

#[test]
fn influxql_compares_every_panel_with_influxdb() {
    // The run stops if a panel's first answer differs between the servers.
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "influxql",
        "--hosts",
        "2",
        "--hours",
        "2",
        "--seconds",
        "0.3",
    ];
    let rows = pushit(dir.path(), &args);
    assert_eq!(rows.len(), 10, "five panels on two servers: {rows:?}");
    for pair in rows.chunks(2) {
        assert_eq!(pair[0]["panel"], pair[1]["panel"]);
        assert_eq!(
            (&pair[0]["side"], &pair[1]["side"]),
            (&"chingest".into(), &"influxdb".into())
        );
        for row in pair {
            assert!(row["qps"].as_f64().unwrap() > 0.0, "{row}");
        }
        let ratio = pair[0]["over_influxdb"].as_f64().unwrap();
        let qps = |row: &Value| row["qps"].as_f64().unwrap();
        assert!(
            (ratio - qps(&pair[0]) / qps(&pair[1])).abs() < 1e-9,
            "{pair:?}"
        );
    }
}

#[test]
fn downsampling_compares_rollups_with_rows() {
    // The run stops if a panel's answers differ between the databases.
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "downsampling",
        "--hosts",
        "2",
        "--days",
        "2",
        "--seconds",
        "0.2",
    ];
    let rows = pushit(dir.path(), &args);
    assert_eq!(rows.len(), 12, "six panels on two databases: {rows:?}");
    for pair in rows.chunks(2) {
        assert_eq!(pair[0]["panel"], pair[1]["panel"]);
        assert_eq!(
            (&pair[0]["side"], &pair[1]["side"]),
            (&"rows".into(), &"rollups".into())
        );
        assert!(
            pair.iter().all(|row| row["qps"].as_f64().unwrap() > 0.0),
            "{pair:?}"
        );
    }
    // A fleet's statements read rollups whatever the size; one host's two
    // days are too few rows (docs/influxql.md).
    let read = |panel: &str| {
        let row = rows
            .iter()
            .find(|row| row["panel"] == panel && row["side"] == "rollups");
        row.unwrap()["read_rollups"].as_bool().unwrap()
    };
    assert!(read("fleet, mean, whole range @ 1 h"));
    assert!(!read("one host, mean, 2 days @ 5 m"));
}

#[test]
fn downsampling_disk_reports_each_table_once_the_rows_are_dropped() {
    // Three days, rows kept one: the run waits for the drops itself.
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "downsampling-disk",
        "--jobs",
        "1",
        "--instances",
        "1",
        "--cpus",
        "1",
        "--hours",
        "72",
        "--levels",
        "1d:5m",
        "--levels",
        "1d:5m:last",
    ];
    let rows = pushit(dir.path(), &args);
    let row = |side: &str, table: &str| {
        rows.iter()
            .find(|r| r["database"] == side && r["table"] == table)
            .unwrap_or_else(|| panic!("no {side} {table} in {rows:?}"))
    };
    let (whole, kept) = (
        row("rows kept whole", "prometheus.autogen"),
        row("1d:5m", "prometheus.autogen"),
    );
    let samples = whole["samples"].as_u64().unwrap();
    assert_eq!(whole["rows"].as_u64(), Some(samples), "{whole}");
    // At most the last two days' partitions are left.
    let left = kept["rows"].as_u64().unwrap();
    assert!(left > 0 && left <= samples * 2 / 3, "{kept}");
    let rollup = row("1d:5m", "_rollup.5m.prometheus.autogen");
    // 8 series, a bucket of each every 5 m over 72 h (and one more where
    // the last scrape falls on a bucket's edge).
    let buckets = rollup["rows"].as_u64().unwrap();
    assert!((8 * 864..=8 * 865).contains(&buckets), "{rollup}");
    let ratio = rollup["over_rows"].as_f64().unwrap();
    assert!(ratio > 0.0 && ratio < 1.0, "{rollup}");
    // Keeping the last sample only: as many buckets, fewer bytes.
    let last = row("1d:5m:last", "_rollup.5m_last.prometheus.autogen");
    assert_eq!(last["rows"], rollup["rows"], "{last}");
    assert!(last["bytes"].as_u64() < rollup["bytes"].as_u64(), "{last}");
}

#[test]
fn downsampling_live_reports_each_phase() {
    let dir = tempfile::tempdir().unwrap();
    let args = [
        "downsampling-live",
        "--hosts",
        "50",
        "--seconds",
        "3",
        "--rounds",
        "1",
        "--period-ms",
        "500",
    ];
    let rows = pushit(dir.path(), &args);
    let sides: Vec<&str> = rows
        .iter()
        .map(|r| r["downsampled"].as_str().unwrap())
        .collect();
    assert_eq!(sides, ["off", "on"], "{rows:?}");
    for row in &rows {
        assert!(row["rows"].as_u64().unwrap() >= 100, "{row}");
        assert!(row["cpu_ms_per_k"].as_f64().unwrap() > 0.0, "{row}");
    }
    assert!(rows[1]["passes"].as_u64().unwrap() >= 2, "{rows:?}");
}

#[test]
fn replay_reports_the_log_replayed_on_open() {
    let dir = tempfile::tempdir().unwrap();
    let rows = pushit(dir.path(), &small_load("replay", &[]));
    assert_eq!(rows.len(), 1);
    let replay = &rows[0];
    // Every row came back from the log (pushit checks the stored count).
    assert_eq!(replay["rows"], 2_000);
    assert!(replay["records"].as_u64().unwrap() >= 5, "{replay}");
    assert!(replay["log_mb"].as_f64().unwrap() > 0.0);
    assert!(rate(replay) > 0.0);
    assert!(replay["open_seconds"].as_f64().unwrap() >= replay["replay_seconds"].as_f64().unwrap());
}

#[test]
fn query_measures_each_query_over_each_http_path_and_on_the_engine() {
    let dir = tempfile::tempdir().unwrap();
    let rows = pushit(
        dir.path(),
        &[
            "query",
            "--hosts",
            "20",
            "--steps",
            "30",
            "--lines-per-body",
            "200",
            "--connections",
            "2",
            "--seconds",
            "0.2",
        ],
    );
    // Each built-in query over /sql and the ClickHouse interface, over
    // /query when it has an InfluxQL form, then on the engine unless it reads
    // `last_values`, chingest's own.
    let sides_of: [(&str, &[&str]); 7] = [
        ("select-1", &["sql", "clickhouse", "engine"]),
        ("last-point-by-series-id", &["sql", "clickhouse", "engine"]),
        ("last-point-by-host-tag", &["sql", "clickhouse", "engine"]),
        (
            "last-values-by-host-tag",
            &["sql", "clickhouse", "influxql"],
        ),
        ("last-value-by-host-tag", &["sql", "clickhouse", "influxql"]),
        (
            "1h-avg-per-minute",
            &["sql", "clickhouse", "influxql", "engine"],
        ),
        ("max-per-host", &["sql", "clickhouse", "influxql", "engine"]),
    ];
    assert_eq!(rows.len(), 23, "{rows:?}");
    let mut at = 0;
    for (query, sides) in sides_of {
        let of_query = &rows[at..at + sides.len()];
        at += sides.len();
        let names: Vec<&Value> = of_query.iter().map(|row| &row["side"]).collect();
        assert_eq!(names, sides, "{query}: {of_query:?}");
        let qps_of = |side: &str| {
            let row = of_query.iter().find(|row| row["side"] == side)?;
            row["qps"].as_f64()
        };
        for row in of_query {
            assert_eq!(row["query"], query);
            assert!(row["qps"].as_f64().unwrap() > 0.0, "{row}");
            assert!(row["p50_ms"].as_f64().unwrap() <= row["p99_99_ms"].as_f64().unwrap());
            let qps = row["qps"].as_f64().unwrap();
            for (column, reference) in [("over_sql", "sql"), ("over_engine", "engine")] {
                match qps_of(reference) {
                    Some(reference) => assert!(
                        (row[column].as_f64().unwrap() - qps / reference).abs() < 1e-9,
                        "{row}"
                    ),
                    None => assert!(row[column].is_null(), "{row}"),
                }
            }
        }
    }
    // Each path answers what it should: one row for a last point, 20 hosts,
    // every minute of the hour for InfluxQL's GROUP BY time (fill(null)), the
    // five minutes that have points for SQL's.
    let rows_per_query = |name: &str, side: &str| {
        let row = rows
            .iter()
            .find(|r| r["query"] == name && r["side"] == side)
            .unwrap();
        row["rows_per_s"].as_f64().unwrap() / row["qps"].as_f64().unwrap()
    };
    for (query, side, expected) in [
        ("last-point-by-series-id", "sql", 1.0),
        ("last-point-by-series-id", "clickhouse", 1.0),
        ("last-values-by-host-tag", "sql", 1.0),
        ("last-values-by-host-tag", "influxql", 1.0),
        ("last-value-by-host-tag", "influxql", 1.0),
        ("1h-avg-per-minute", "sql", 5.0),
        ("1h-avg-per-minute", "influxql", 60.0),
        ("max-per-host", "clickhouse", 20.0),
        ("max-per-host", "influxql", 20.0),
    ] {
        let got = rows_per_query(query, side);
        assert!(
            (got - expected).abs() < 1e-9,
            "{query} over {side}: {got} rows"
        );
    }
    let chart = std::fs::read_to_string(dir.path().join("pushit-query.svg")).unwrap();
    assert!(chart.starts_with("<svg") && chart.contains("max-per-host"));
}

#[test]
fn bad_arguments_are_refused() {
    let output = Command::new(env!("CARGO_BIN_EXE_pushit"))
        .args(["batch", "--runs", "0"])
        .output()
        .unwrap();
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stderr).contains("--runs"));
}
