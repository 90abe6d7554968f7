//! Prometheus's HTTP API on the real server: the requests Grafana's
//! Prometheus data source sends when it connects, browses and draws a
//! panel, answered in the shapes it parses; line-protocol data read as
//! metrics; exemplars, metadata and cardinality; remote read's messages;
//! errors with Prometheus's types; and hostile queries, each refused with
//! its error while the server keeps ingesting.
//!
//! The server comes from `support` (one per binary, token `secret`); every
//! test uses databases of its own. The differential test against a real
//! Prometheus is tests/promql.rs.

mod support;

use prost::Message as _;
use reqwest::StatusCode;
use serde_json::{json, Value};

use support::{base, client, post_snappy, run, wait_ready, TOKEN};

fn main() {
    support::main(tests![
        grafana_connects_browses_and_draws_a_panel,
        line_protocol_measurements_are_metrics,
        exemplars_metadata_and_cardinality,
        remote_read_answers_samples_by_matchers,
        errors_have_prometheus_types_and_statuses,
        hostile_queries_get_their_errors_while_writes_go_on,
        cached_and_recent_answers_hold_after_late_writes_and_edits,
        cached_answers_from_the_engine_hold_after_late_writes_and_edits,
    ]);
}

/// Minutes-aligned "now" minus an hour, in ms: the data's first sample.
fn origin() -> i64 {
    let now = chingest::clock::now_ms();
    now / 60_000 * 60_000 - 3_600_000
}

/// A series to write: its labels and its samples as (ms, value).
type SeriesData<'a> = (&'a [(&'a str, &'a str)], Vec<(i64, f64)>);

/// Remote-writes `series` (labels, samples as (ms, value)) and `metadata`
/// (family, type, help) into `db`, visible when answered.
async fn remote_write(db: &str, series: &[SeriesData<'_>], metadata: &[(&str, i32, &str)]) {
    use chingest_proto::prometheus::{Label, MetricMetadata, Sample, TimeSeries, WriteRequest};
    wait_ready().await;
    let request = WriteRequest {
        timeseries: series
            .iter()
            .map(|(labels, samples)| TimeSeries {
                labels: labels
                    .iter()
                    .map(|(n, v)| Label {
                        name: n.to_string().into(),
                        value: v.to_string().into(),
                    })
                    .collect(),
                samples: samples
                    .iter()
                    .map(|&(timestamp, value)| Sample { value, timestamp })
                    .collect(),
            })
            .collect(),
        metadata: metadata
            .iter()
            .map(|(family, kind, help)| MetricMetadata {
                r#type: *kind,
                metric_family_name: family.to_string(),
                help: help.to_string(),
                unit: String::new(),
            })
            .collect(),
    };
    let url = format!("{}/api/v1/write?db={db}&durability=visible", base());
    let r = post_snappy(&url, "application/x-protobuf", &request)
        .send()
        .await
        .unwrap();
    assert_eq!(
        r.status(),
        StatusCode::NO_CONTENT,
        "{}",
        r.text().await.unwrap()
    );
}

/// GET `path` (with its query string) as Grafana does: the token as
/// Basic auth's password.
async fn get(path: &str) -> (StatusCode, Value) {
    let r = client()
        .get(format!("{}{path}", base()))
        .basic_auth("grafana", Some(TOKEN))
        .send()
        .await
        .unwrap();
    let status = r.status();
    let text = r.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or_else(|_| json!(text)),
    )
}

/// POST a form, as Grafana sends `query_range` and `series`.
async fn post_form(path: &str, form: &[(&str, String)]) -> (StatusCode, Value) {
    let r = client()
        .post(format!("{}{path}", base()))
        .header("Authorization", format!("Bearer {TOKEN}"))
        .form(form)
        .send()
        .await
        .unwrap();
    let status = r.status();
    (status, r.json().await.unwrap())
}

fn seconds(ms: i64) -> String {
    format!("{}", ms as f64 / 1000.0)
}

/// A time as the answers write it: seconds, a JSON number.
fn time(ms: i64) -> Value {
    serde_json::from_str(&seconds(ms)).unwrap()
}

/// A counter rising 1/s, sampled every 15 s for an hour from `t0`,
/// starting at `base`.
fn counter(t0: i64, base: f64) -> Vec<(i64, f64)> {
    (0..240)
        .map(|i| (t0 + i * 15_000, base + (i * 15) as f64))
        .collect()
}

fn grafana_connects_browses_and_draws_a_panel() {
    run(async {
        let t0 = origin();
        let end = t0 + 239 * 15_000;
        remote_write(
            "pa_grafana",
            &[
                (
                    &[
                        ("__name__", "http_requests_total"),
                        ("job", "api"),
                        ("instance", "a"),
                    ],
                    counter(t0, 0.0),
                ),
                (
                    &[
                        ("__name__", "http_requests_total"),
                        ("job", "api"),
                        ("instance", "b"),
                    ],
                    counter(t0, 1000.0),
                ),
                (
                    &[("__name__", "up"), ("job", "api"), ("instance", "a")],
                    vec![(end, 1.0)],
                ),
            ],
            &[("http_requests_total", 1, "Requests served.")],
        )
        .await;
        let db = "db=pa_grafana";
        // Save & test.
        let (status, info) = get("/api/v1/status/buildinfo").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(info["status"], "success");
        assert_eq!(info["data"]["version"], "2.42.0");
        let (_, answer) = get(&format!(
            "/api/v1/query?{db}&query=1%2B1&time={}",
            seconds(end)
        ))
        .await;
        assert_eq!(
            answer["data"],
            json!({"resultType": "scalar", "result": [time(end), "2"]})
        );
        // The metric browser.
        let range = format!("start={}&end={}", seconds(t0), seconds(end));
        let (_, labels) = get(&format!("/api/v1/labels?{db}&{range}")).await;
        assert_eq!(labels["data"], json!(["__name__", "instance", "job"]));
        let (_, names) = get(&format!("/api/v1/label/__name__/values?{db}&{range}")).await;
        assert_eq!(names["data"], json!(["http_requests_total", "up"]));
        let (_, instances) = get(&format!(
            "/api/v1/label/instance/values?{db}&{range}&match[]=http_requests_total"
        ))
        .await;
        assert_eq!(instances["data"], json!(["a", "b"]));
        let (_, series) = post_form(
            "/api/v1/series",
            &[
                ("db", "pa_grafana".into()),
                ("match[]", "{__name__=~\"http.*\", instance!=\"b\"}".into()),
                ("start", seconds(t0)),
                ("end", seconds(end)),
            ],
        )
        .await;
        assert_eq!(
            series["data"],
            json!([{"__name__": "http_requests_total", "instance": "a", "job": "api"}])
        );
        let (_, metadata) = get(&format!("/api/v1/metadata?{db}")).await;
        assert_eq!(
            metadata["data"],
            json!({"http_requests_total": [{"type": "counter", "help": "Requests served.", "unit": ""}]})
        );
        // A panel: the range aligned to the step, as Grafana sends it.
        let step = 60_000;
        let (start, stop) = ((t0 + 600_000) / step * step, end / step * step);
        let (status, panel) = post_form(
            "/api/v1/query_range",
            &[
                ("db", "pa_grafana".into()),
                (
                    "query",
                    "sum by (job) (rate(http_requests_total[5m]))".into(),
                ),
                ("start", seconds(start)),
                ("end", seconds(stop)),
                ("step", "60".into()),
            ],
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{panel}");
        assert_eq!(panel["data"]["resultType"], "matrix");
        let result = panel["data"]["result"].as_array().unwrap();
        assert_eq!(result.len(), 1);
        assert_eq!(result[0]["metric"], json!({"job": "api"}));
        let values = result[0]["values"].as_array().unwrap();
        assert_eq!(values.len() as i64, (stop - start) / step + 1);
        for (i, point) in values.iter().enumerate() {
            assert_eq!(
                point[0].as_f64().unwrap(),
                (start + i as i64 * step) as f64 / 1000.0
            );
            // Two counters of 1/s each: their rate, summed, is 2.
            let value: f64 = point[1].as_str().unwrap().parse().unwrap();
            assert!((value - 2.0).abs() < 1e-9, "{point}");
        }
        // The same under the path prefix instead of db=.
        let (_, prefixed) = get(&format!(
            "/db/pa_grafana/api/v1/query?query=up&time={}",
            seconds(end)
        ))
        .await;
        assert_eq!(
            prefixed["data"]["result"],
            json!([{"metric": {"__name__": "up", "instance": "a", "job": "api"}, "value": [time(end), "1"]}])
        );
    });
}

fn line_protocol_measurements_are_metrics() {
    run(async {
        wait_ready().await;
        let t0 = origin();
        let mut body = String::new();
        for i in 0..20i64 {
            let t = (t0 + i * 15_000) * 1_000_000;
            body.push_str(&format!(
                "cpu,host=a,dc.name=eu usage_idle={}.5,cores=4i {t}\n",
                90 - i
            ));
            body.push_str(&format!("cpu,host=b usage_idle=50 {t}\n"));
        }
        let r = client()
            .post(format!("{}/write?db=pa_lp&durability=visible", base()))
            .header("Authorization", format!("Token {TOKEN}"))
            .body(body)
            .send()
            .await
            .unwrap();
        assert_eq!(
            r.status(),
            StatusCode::NO_CONTENT,
            "{}",
            r.text().await.unwrap()
        );
        let at = seconds(t0 + 19 * 15_000);
        let (_, idle) = get(&format!(
            "/api/v1/query?db=pa_lp&query=cpu_usage_idle&time={at}"
        ))
        .await;
        assert_eq!(
            idle["data"]["result"],
            json!([
                {"metric": {"__name__": "cpu_usage_idle", "dc_name": "eu", "host": "a"}, "value": [time(t0 + 285_000), "71.5"]},
                {"metric": {"__name__": "cpu_usage_idle", "host": "b"}, "value": [time(t0 + 285_000), "50"]},
            ])
        );
        // A label renamed from its tag key is matched by its new name.
        let (_, eu) = get(&format!(
            "/api/v1/query?db=pa_lp&query=cpu_cores{{dc_name=\"eu\"}}&time={at}"
        ))
        .await;
        assert_eq!(eu["data"]["result"][0]["value"][1], "4");
        // Only the series with values of a field are that field's metric.
        let (_, cores) = get("/api/v1/series?db=pa_lp&match[]=cpu_cores").await;
        assert_eq!(
            cores["data"],
            json!([{"__name__": "cpu_cores", "dc_name": "eu", "host": "a"}])
        );
        let (_, names) = get("/api/v1/label/__name__/values?db=pa_lp").await;
        assert_eq!(names["data"], json!(["cpu_cores", "cpu_usage_idle"]));
    });
}

fn exemplars_metadata_and_cardinality() {
    use chingest_proto::prometheus::v2::{Exemplar, Request, TimeSeries};
    use chingest_proto::prometheus::Sample;
    run(async {
        wait_ready().await;
        let t0 = origin();
        let symbols = [
            "",
            "__name__",
            "rpc_seconds_sum",
            "job",
            "api",
            "trace_id",
            "abc123",
        ]
        .map(|s| prost::bytes::Bytes::from(s.to_owned()))
        .to_vec();
        let request = Request {
            symbols,
            timeseries: vec![TimeSeries {
                labels_refs: vec![1, 2, 3, 4],
                samples: vec![
                    Sample {
                        value: 1.0,
                        timestamp: t0,
                    },
                    Sample {
                        value: 2.0,
                        timestamp: t0 + 15_000,
                    },
                ],
                exemplars: vec![Exemplar {
                    labels_refs: vec![5, 6],
                    value: 0.25,
                    timestamp: t0 + 7_500,
                }],
                ..TimeSeries::default()
            }],
        };
        let url = format!("{}/api/v1/write?db=pa_exemplars&durability=visible", base());
        let v2 = "application/x-protobuf;proto=io.prometheus.write.v2.Request";
        let r = post_snappy(&url, v2, &request).send().await.unwrap();
        assert_eq!(
            r.status(),
            StatusCode::NO_CONTENT,
            "{}",
            r.text().await.unwrap()
        );
        let (status, exemplars) = get(&format!(
            "/api/v1/query_exemplars?db=pa_exemplars&query=rate(rpc_seconds_sum[5m])&start={}&end={}",
            seconds(t0),
            seconds(t0 + 60_000)
        ))
        .await;
        assert_eq!(status, StatusCode::OK, "{exemplars}");
        assert_eq!(
            exemplars["data"],
            json!([{
                "seriesLabels": {"__name__": "rpc_seconds_sum", "job": "api"},
                "exemplars": [{"labels": {"trace_id": "abc123"}, "value": "0.25", "timestamp": time(t0 + 7_500)}],
            }])
        );
        remote_write(
            "pa_exemplars",
            &[
                (&[("__name__", "up"), ("job", "api")], vec![(t0, 1.0)]),
                (
                    &[("__name__", "up"), ("job", "db")],
                    vec![(t0 + 30_000, 1.0)],
                ),
            ],
            &[],
        )
        .await;
        let (_, tsdb) = get("/api/v1/status/tsdb?db=pa_exemplars").await;
        let data = &tsdb["data"];
        assert_eq!(data["headStats"]["numSeries"], 3, "{tsdb}");
        assert_eq!(data["headStats"]["minTime"], t0);
        assert_eq!(data["headStats"]["maxTime"], t0 + 30_000);
        assert_eq!(
            data["seriesCountByMetricName"],
            json!([{"name": "up", "value": 2}, {"name": "rpc_seconds_sum", "value": 1}])
        );
        assert_eq!(
            data["seriesCountByLabelValuePair"][0],
            json!({"name": "__name__=up", "value": 2})
        );
        assert_eq!(
            data["labelValueCountByLabelName"][0],
            json!({"name": "__name__", "value": 2})
        );
    });
}

fn remote_read_answers_samples_by_matchers() {
    use chingest_proto::prometheus::read::{
        LabelMatcher, MatchType, Query, ReadRequest, ReadResponse,
    };
    run(async {
        let t0 = origin();
        let stale = f64::from_bits(0x7ff0_0000_0000_0002);
        remote_write(
            "pa_read",
            &[
                (
                    &[("__name__", "up"), ("job", "api")],
                    vec![(t0, 1.0), (t0 + 15_000, stale)],
                ),
                (&[("__name__", "up"), ("job", "db")], vec![(t0, 0.0)]),
                (&[("__name__", "down"), ("job", "api")], vec![(t0, 5.0)]),
            ],
            &[],
        )
        .await;
        let matcher = |r#type: MatchType, name: &str, value: &str| LabelMatcher {
            r#type: r#type as i32,
            name: name.into(),
            value: value.into(),
        };
        let request = ReadRequest {
            queries: vec![
                Query {
                    start_timestamp_ms: t0,
                    end_timestamp_ms: t0 + 60_000,
                    matchers: vec![
                        matcher(MatchType::Eq, "__name__", "up"),
                        matcher(MatchType::Nre, "job", "d.*"),
                    ],
                },
                Query {
                    start_timestamp_ms: t0 + 1,
                    end_timestamp_ms: t0 + 60_000,
                    matchers: vec![matcher(MatchType::Re, "__name__", "up|down")],
                },
            ],
            accepted_response_types: vec![],
        };
        let url = format!("{}/api/v1/read?db=pa_read", base());
        let r = post_snappy(&url, "application/x-protobuf", &request)
            .header("X-Prometheus-Remote-Read-Version", "0.1.0")
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::OK);
        assert_eq!(r.headers()["content-encoding"], "snappy");
        let bytes = r.bytes().await.unwrap();
        let raw = snap::raw::Decoder::new().decompress_vec(&bytes).unwrap();
        let response = ReadResponse::decode(raw.as_slice()).unwrap();
        assert_eq!(response.results.len(), 2);
        let first = &response.results[0].timeseries;
        assert_eq!(first.len(), 1);
        let names: Vec<(&[u8], &[u8])> = first[0]
            .labels
            .iter()
            .map(|l| (&l.name[..], &l.value[..]))
            .collect();
        assert_eq!(
            names,
            [(&b"__name__"[..], &b"up"[..]), (&b"job"[..], &b"api"[..])]
        );
        assert_eq!(first[0].samples.len(), 2);
        assert_eq!(
            (first[0].samples[0].timestamp, first[0].samples[0].value),
            (t0, 1.0)
        );
        // The stale marker is returned as stored.
        assert_eq!(first[0].samples[1].value.to_bits(), stale.to_bits());
        // The second query starts after every series' first sample.
        let second = &response.results[1].timeseries;
        assert_eq!(
            second.len(),
            1,
            "only up{{job=\"api\"}} has a sample after t0"
        );
        // Streamed chunks only: refused with what is answered instead.
        let request = ReadRequest {
            queries: vec![],
            accepted_response_types: vec![1],
        };
        let r = post_snappy(&url, "application/x-protobuf", &request)
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::BAD_REQUEST);
        assert!(r.text().await.unwrap().contains("SAMPLES"));
    });
}

/// `(status, errorType)` of a GET.
async fn error_of(path: &str) -> (StatusCode, String) {
    let (status, body) = get(path).await;
    assert_eq!(body["status"], "error", "{path}: {body}");
    (
        status,
        body["errorType"].as_str().unwrap_or_default().to_owned(),
    )
}

fn errors_have_prometheus_types_and_statuses() {
    run(async {
        let t0 = origin();
        remote_write(
            "pa_errors",
            &[
                (
                    &[("__name__", "x"), ("job", "a"), ("i", "1")],
                    vec![(t0, 1.0)],
                ),
                (
                    &[("__name__", "x"), ("job", "a"), ("i", "2")],
                    vec![(t0, 2.0)],
                ),
                (&[("__name__", "y"), ("job", "a")], vec![(t0, 3.0)]),
            ],
            &[],
        )
        .await;
        let at = format!("db=pa_errors&time={}", seconds(t0));
        let bad = (StatusCode::BAD_REQUEST, "bad_data".to_owned());
        let execution = (StatusCode::UNPROCESSABLE_ENTITY, "execution".to_owned());
        for (path, expected) in [
            (format!("/api/v1/query?{at}&query=sum(x"), &bad),
            (format!("/api/v1/query?{at}&query=nope(x)"), &bad),
            (format!("/api/v1/query?{at}&query=rate(x)"), &bad),
            (format!("/api/v1/query?{at}&query=%7Bjob%3D%22%22%7D"), &bad),
            (
                format!("/api/v1/query?{at}&query=mad_over_time(x[5m])"),
                &bad,
            ),
            ("/api/v1/query?query=x&time=abc".to_owned(), &bad),
            ("/api/v1/query?query=x&timeout=1ns".to_owned(), &bad),
            (
                "/api/v1/query_range?query=x[5m]&start=0&end=60&step=15".to_owned(),
                &bad,
            ),
            (
                "/api/v1/query_range?query=x&start=60&end=0&step=15".to_owned(),
                &bad,
            ),
            (
                "/api/v1/query_range?query=x&start=0&end=60&step=0".to_owned(),
                &bad,
            ),
            (
                "/api/v1/query_range?query=x&start=0&end=11001&step=1ms".to_owned(),
                &bad,
            ),
            ("/api/v1/series?db=pa_errors".to_owned(), &bad),
            ("/api/v1/label/bad-name/values".to_owned(), &bad),
            // Vector matching.
            (format!("/api/v1/query?{at}&query=x%2Bon(job)x"), &execution),
            (format!("/api/v1/query?{at}&query=y%2Bon(job)x"), &execution),
            (
                format!("/api/v1/query?{at}&query=label_replace(x,\"i\",\"\",\"i\",\".*\")"),
                &execution,
            ),
        ] {
            assert_eq!(&error_of(&path).await, expected, "{path}");
        }
        // group_left makes the last one explicit.
        let (status, body) = get(&format!(
            "/api/v1/query?{at}&query=x%2Bon(job)group_left%20y"
        ))
        .await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["data"]["result"].as_array().unwrap().len(), 2);
        // Without credentials: 401 in Prometheus's shape.
        let r = client()
            .get(format!("{}/api/v1/query?query=1", base()))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), StatusCode::UNAUTHORIZED);
        let body: Value = r.json().await.unwrap();
        assert_eq!(body["status"], "error");
    });
}

fn hostile_queries_get_their_errors_while_writes_go_on() {
    run(async {
        let t0 = origin();
        remote_write(
            "pa_hostile",
            &[(
                &[("__name__", "x"), ("job", &"a".repeat(5000))],
                vec![(t0, 1.0)],
            )],
            &[],
        )
        .await;
        // Writes go on meanwhile; each must be stored.
        let writer = tokio::spawn(async move {
            let mut written = 0;
            for i in 0..50 {
                let r = client()
                    .post(format!("{}/write?db=pa_hostile_writes", base()))
                    .header("Authorization", format!("Token {TOKEN}"))
                    .body(format!("m,i={i} v=1 {}\n", t0 * 1_000_000))
                    .send()
                    .await
                    .unwrap();
                assert_eq!(r.status(), StatusCode::NO_CONTENT);
                written += 1;
            }
            written
        });
        let at = format!("db=pa_hostile&time={}", seconds(t0));
        let deep = format!("{}x{}", "(".repeat(5000), ")".repeat(5000));
        let chain = vec!["x"; 5000].join("+");
        let long = "x+".repeat(40_000) + "x";
        let encode = |q: &str| -> String { q.bytes().map(|b| format!("%{b:02X}")).collect() };
        for query in [deep.as_str(), chain.as_str(), long.as_str()] {
            let (status, body) = post_form(
                "/api/v1/query",
                &[("db", "pa_hostile".into()), ("query", query.into())],
            )
            .await;
            assert_eq!(
                (status, body["errorType"].as_str()),
                (StatusCode::BAD_REQUEST, Some("bad_data")),
                "{body}"
            );
        }
        // A pattern that backtracks in other engines: linear here, answered.
        let pattern = encode("x{job=~\"(a*)*b\"}");
        let (status, body) = get(&format!("/api/v1/query?{at}&query={pattern}")).await;
        assert_eq!(status, StatusCode::OK, "{body}");
        assert_eq!(body["data"]["result"], json!([]));
        // A year at 1 ms steps: refused before anything runs.
        let (status, _) =
            error_of("/api/v1/query_range?db=pa_hostile&query=x&start=0&end=31536000&step=0.001")
                .await;
        assert_eq!(status, StatusCode::BAD_REQUEST);
        // A subquery of ten years at 1 ms steps runs into the time limit.
        let sub = encode("count_over_time(x[3650d:1ms])");
        let (status, body) = get(&format!("/api/v1/query?{at}&timeout=2s&query={sub}")).await;
        assert_eq!(
            (status, body["errorType"].as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, Some("timeout")),
            "{body}"
        );
        assert_eq!(writer.await.unwrap(), 50);
    });
}

/// The counter `name` of `/metrics` now.
async fn metric(name: &str) -> u64 {
    let r = client()
        .get(format!("{}/metrics", base()))
        .basic_auth("grafana", Some(TOKEN))
        .send()
        .await
        .unwrap();
    let text = r.text().await.unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("{name} is counted"))
}

/// `chingest_promql_cache_hits_total` now.
async fn cache_hits() -> u64 {
    metric("chingest_promql_cache_hits_total").await
}

/// A range query's answer (from the result cache and the recent samples
/// where they hold it) is what instant queries (never cached) answer at
/// its steps, after every kind of change to the data it reads.
fn cached_and_recent_answers_hold_after_late_writes_and_edits() {
    run(cached_answers_hold("promql_cache", origin()))
}

/// The same three days back, before the recent samples: the answers are
/// read from the engine, and then from the chunk cache.
fn cached_answers_from_the_engine_hold_after_late_writes_and_edits() {
    run(cached_answers_hold(
        "promql_cache_engine",
        origin() - 3 * 86_400_000,
    ))
}

/// The cache's answers over an hour of samples from `t0` in `db` after a
/// late write, a delete and an update.
async fn cached_answers_hold(db: &'static str, t0: i64) {
    {
        let (x, y) = (counter(t0, 0.0), counter(t0, 100.0));
        remote_write(
            db,
            &[
                (&[("__name__", "m"), ("job", "x")], x),
                (&[("__name__", "m"), ("job", "y")], y),
            ],
            &[],
        )
        .await;
        // Settled steps: 10 to 45 minutes after t0 (an hour ago).
        let (start, end) = (t0 + 600_000, t0 + 2_700_000);
        let query = "sum by (job) (rate(m[2m])) * 60";
        let check = |what: &'static str| async move {
            let (status, range) = get(&format!(
                "/api/v1/query_range?db={db}&query={}&start={}&end={}&step=15",
                urlencode(query),
                seconds(start),
                seconds(end)
            ))
            .await;
            assert_eq!(status, StatusCode::OK, "{what}: {range}");
            let mut steps = 0;
            for t in (start..=end).step_by(150_000) {
                let (_, instant) = get(&format!(
                    "/api/v1/query?db={db}&query={}&time={}",
                    urlencode(query),
                    seconds(t)
                ))
                .await;
                for sample in instant["data"]["result"].as_array().unwrap() {
                    let job = &sample["metric"]["job"];
                    let series = range["data"]["result"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|s| &s["metric"]["job"] == job)
                        .unwrap_or_else(|| panic!("{what}: no {job} at {t} in {range}"));
                    let point = series["values"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .find(|p| p[0] == time(t))
                        .unwrap_or_else(|| panic!("{what}: no {job} point at {t}"));
                    assert_eq!(point[1], sample["value"][1], "{what}: {job} at {t}");
                    steps += 1;
                }
            }
            assert!(steps >= 20, "{what}: {steps} steps compared");
        };
        // Label values over all time come from the postings; with a
        // `match[]` from the series: the same.
        for label in ["job", "__name__", "absent"] {
            let (_, all) = get(&format!("/api/v1/label/{label}/values?db={db}")).await;
            let (_, matched) = get(&format!(
                "/api/v1/label/{label}/values?db={db}&match[]={}",
                urlencode("{__name__=~\".+\"}")
            ))
            .await;
            assert_eq!(all, matched, "{label}");
        }
        let (_, jobs) = get(&format!("/api/v1/label/job/values?db={db}")).await;
        assert_eq!(jobs["data"], json!(["x", "y"]));
        // One series' value at `t` (ms), by an instant query.
        let value_at = |job: &'static str, t: i64| async move {
            let (_, at) = get(&format!(
                "/api/v1/query?db={db}&query={}&time={}",
                urlencode(&format!("m{{job=\"{job}\"}}")),
                seconds(t)
            ))
            .await;
            at["data"]["result"][0]["value"][1]
                .as_str()
                .map(str::to_owned)
        };
        let chunk_hits = metric("chingest_chunk_cache_hits_total").await;
        check("first").await;
        let hits = cache_hits().await;
        check("again").await;
        assert!(
            cache_hits().await > hits,
            "the second ask is answered from the cache"
        );
        assert_eq!(value_at("x", t0 + 1_342_500).await.as_deref(), Some("1335"));
        if t0 < origin() - 86_400_000 {
            assert!(
                metric("chingest_chunk_cache_hits_total").await > chunk_hits,
                "older samples are read again from the chunk cache"
            );
        }

        // A late write: a sample 38 minutes old, between two others, in
        // the window of the step at 22.5 minutes.
        remote_write(
            db,
            &[(
                &[("__name__", "m"), ("job", "x")],
                vec![(t0 + 1_342_500, 1e6)],
            )],
            &[],
        )
        .await;
        check("late write").await;
        assert_eq!(
            value_at("x", t0 + 1_342_500).await.as_deref(),
            Some("1000000")
        );

        let edit = |path: &'static str, body: String| async move {
            let r = client()
                .post(format!("{}/api/v2/{path}?bucket={db}", base()))
                .header("Authorization", format!("Bearer {TOKEN}"))
                .body(body)
                .send()
                .await
                .unwrap();
            assert_eq!(r.status(), StatusCode::NO_CONTENT, "{path}");
        };
        edit(
            "delete",
            format!(
                r#"{{"start": "{}", "stop": "{}", "predicate": "_measurement=\"prometheus\" AND job=\"y\""}}"#,
                rfc3339(t0 + 1_800_000),
                rfc3339(t0 + 2_100_000)
            ),
        )
        .await;
        check("delete").await;
        // Inside the deleted span the lookback (5 min) finds the sample
        // before it (1,885 at 29:45), not the one deleted (2,170 at 34:30).
        assert_eq!(value_at("y", t0 + 2_070_000).await.as_deref(), Some("1885"));
        edit(
            "update",
            format!(
                r#"{{"start": "{}", "predicate": "_measurement=\"prometheus\" AND job=\"x\"", "set": {{"value": 5}}}}"#,
                rfc3339(t0 + 2_400_000),
            ),
        )
        .await;
        check("update").await;
        assert_eq!(value_at("x", t0 + 2_415_000).await.as_deref(), Some("5"));
    }
}

/// `ms` as an RFC 3339 time in UTC (the civil date by Howard Hinnant's
/// `civil_from_days`).
fn rfc3339(ms: i64) -> String {
    let (days, rest) = (ms.div_euclid(86_400_000), ms.rem_euclid(86_400_000));
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    let (h, m, s, milli) = (
        rest / 3_600_000,
        rest / 60_000 % 60,
        rest / 1000 % 60,
        rest % 1000,
    );
    format!("{year:04}-{month:02}-{day:02}T{h:02}:{m:02}:{s:02}.{milli:03}Z")
}

fn urlencode(text: &str) -> String {
    text.bytes()
        .map(|b| match b {
            b'a'..=b'z' | b'A'..=b'Z' | b'0'..=b'9' | b'-' | b'_' | b'.' => (b as char).to_string(),
            _ => format!("%{b:02X}"),
        })
        .collect()
}
