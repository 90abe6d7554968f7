//! Recording and alerting rules in the real `chingest` binary (child
//! processes on the test's directories, as `continuous.rs`), groups
//! evaluated every second:
//!
//! - recording rules write their series back, the second reading the
//!   first's within one evaluation; `/api/v1/rules` shows them with their
//!   health and filters them; a rule a reload removes gets a stale marker
//!   (its series ends at once, not 5 minutes later);
//! - an alert goes pending, fires after its `for` (with its templated
//!   annotation), shows in `/api/v1/alerts` and as `ALERTS`, and resolves;
//! - a reload with a broken file (`POST /-/reload`, `SIGHUP`) is refused
//!   with the file and line, the old rules keep running and `/metrics`
//!   says the last reload failed; a server started with it refuses to
//!   start;
//! - a pending alert killed with -9 keeps the time it has been pending
//!   across the restart (`ALERTS_FOR_STATE`).

#[path = "support/child.rs"]
mod child;

use std::path::Path;
use std::time::{Duration, Instant};

use child::{client, get, start_with, urlencode, wait_ready, Server};
use serde_json::Value;

/// Starts a server whose `[rules]` read `rules/*.yml` in `dir`, with
/// `extra` lines in `[rules]`.
fn start(dir: &Path, extra: &str) -> Server {
    let config = dir.join("chingest.toml");
    std::fs::write(
        &config,
        format!("[rules]\nfiles = [\"rules/*.yml\"]\nevaluation_interval_ms = 1000\n{extra}\n"),
    )
    .unwrap();
    start_with(
        &dir.join("data"),
        &["--config".as_ref(), config.as_os_str()],
    )
}

fn write_rules(dir: &Path, name: &str, text: &str) {
    let rules = dir.join("rules");
    std::fs::create_dir_all(&rules).unwrap();
    std::fs::write(rules.join(name), text).unwrap();
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as i64
}

/// Writes line protocol into `prometheus`, which the rules read.
async fn write(server: &Server, body: &str) {
    let r = client()
        .post(format!("{}/write?db=prometheus", server.url))
        .body(body.to_owned())
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success(), "{}", r.text().await.unwrap());
}

async fn json(server: &Server, path: &str) -> Value {
    let (status, text) = get(server, path).await;
    assert!(status.is_success(), "{path}: {status} {text}");
    serde_json::from_str(&text).unwrap()
}

/// The instant query's samples now.
async fn query(server: &Server, promql: &str) -> Vec<Value> {
    let path = format!("/api/v1/query?query={}", urlencode(promql));
    let answer = json(server, &path).await;
    answer["data"]["result"].as_array().unwrap().clone()
}

/// Polls `check` every 200 ms for up to `limit`, until it gives a value.
async fn until<T, F: std::future::Future<Output = Option<T>>>(
    limit: Duration,
    what: &str,
    mut check: impl FnMut() -> F,
) -> T {
    let started = Instant::now();
    loop {
        if let Some(found) = check().await {
            return found;
        }
        assert!(started.elapsed() < limit, "{what}: not within {limit:?}");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

async fn reload(server: &Server) -> (reqwest::StatusCode, String) {
    let r = client()
        .post(format!("{}/-/reload", server.url))
        .send()
        .await
        .unwrap();
    (r.status(), r.text().await.unwrap())
}

async fn metric(server: &Server, line_start: &str) -> f64 {
    let (_, text) = get(server, "/metrics").await;
    text.lines()
        .find(|l| l.starts_with(line_start))
        .and_then(|l| l.rsplit(' ').next())
        .unwrap_or_else(|| panic!("no {line_start} in /metrics"))
        .parse()
        .unwrap()
}

const RECORDING: &str = "groups:
- name: cpu
  interval: 1s
  rules:
  - record: host:cpu_usage:sum
    expr: sum by (host) (cpu_usage)
    labels:
      source: rules
  - record: host:cpu_usage:double
    expr: host:cpu_usage:sum * 2
";

#[tokio::test]
async fn recording_rules_write_back_chain_and_end_with_a_stale_marker() {
    let tmp = tempfile::tempdir().unwrap();
    write_rules(tmp.path(), "cpu.yml", RECORDING);
    let server = start(tmp.path(), "");
    wait_ready(&server).await;
    let t = now_ns();
    write(
        &server,
        &format!("cpu,host=a usage=3 {t}\ncpu,host=b usage=4 {t}"),
    )
    .await;
    // The second rule reads what the first wrote in the same evaluation.
    let doubled = until(Duration::from_secs(20), "the chained rule", || async {
        let found = query(&server, "host:cpu_usage:double").await;
        (found.len() == 2).then_some(found)
    })
    .await;
    let value = |host: &str| {
        doubled
            .iter()
            .find(|s| s["metric"]["host"] == host)
            .map(|s| s["value"][1].as_str().unwrap().to_owned())
    };
    assert_eq!(
        (value("a"), value("b")),
        (Some("6".into()), Some("8".into()))
    );
    // The first rule's labels are its series', the metric name is the rule's.
    let recorded = query(&server, "host:cpu_usage:sum{host=\"a\"}").await;
    assert_eq!(recorded[0]["metric"]["source"], "rules", "{recorded:?}");

    let rules = json(&server, "/api/v1/rules").await;
    let group = &rules["data"]["groups"][0];
    assert_eq!(group["name"], "cpu");
    assert!(
        group["file"].as_str().unwrap().ends_with("rules/cpu.yml"),
        "{group}"
    );
    assert_eq!(group["interval"], 1.0);
    let listed = group["rules"].as_array().unwrap();
    assert_eq!(listed.len(), 2);
    for rule in listed {
        assert_eq!(rule["type"], "recording", "{rule}");
        assert_eq!(rule["health"], "ok", "{rule}");
        assert!(
            rule["lastEvaluation"].as_str().unwrap().starts_with("20"),
            "{rule}"
        );
    }
    assert_eq!(listed[0]["labels"]["source"], "rules");
    // Filters: no alerting rule here, one rule by name.
    let alerting = json(&server, "/api/v1/rules?type=alert").await;
    assert_eq!(alerting["data"]["groups"], serde_json::json!([]));
    let named = json(&server, "/api/v1/rules?rule_name[]=host:cpu_usage:double").await;
    assert_eq!(
        named["data"]["groups"][0]["rules"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
    let (status, _) = get(&server, "/api/v1/rules?type=nonsense").await;
    assert_eq!(status, 400);
    assert!(metric(&server, "chingest_rule_evaluations_total{").await >= 2.0);
    assert_eq!(
        metric(&server, "chingest_rule_evaluation_failures_total{").await,
        0.0
    );

    // The second rule goes: its series ends with a stale marker, at once.
    write_rules(
        tmp.path(),
        "cpu.yml",
        &RECORDING[..RECORDING.find("  - record: host:cpu_usage:double").unwrap()],
    );
    let (status, text) = reload(&server).await;
    assert_eq!(status, 200, "{text}");
    until(
        Duration::from_secs(10),
        "the removed rule's stale marker",
        || async {
            query(&server, "host:cpu_usage:double")
                .await
                .is_empty()
                .then_some(())
        },
    )
    .await;
    assert_eq!(query(&server, "host:cpu_usage:sum").await.len(), 2);
}

const ALERTING: &str = "groups:
- name: alerts
  interval: 1s
  rules:
  - alert: HighCpu
    expr: cpu_usage > 50
    for: 3s
    labels:
      severity: page
    annotations:
      summary: '{{ $labels.host }} at {{ $value }}'
";

/// The alerts `/api/v1/alerts` lists.
async fn alerts(server: &Server) -> Vec<Value> {
    json(server, "/api/v1/alerts").await["data"]["alerts"]
        .as_array()
        .unwrap()
        .clone()
}

async fn alert_in(server: &Server, state: &str) -> Value {
    until(Duration::from_secs(20), state, || async {
        alerts(server)
            .await
            .into_iter()
            .find(|a| a["state"] == state)
    })
    .await
}

#[tokio::test]
async fn an_alert_goes_pending_fires_and_resolves() {
    let tmp = tempfile::tempdir().unwrap();
    write_rules(tmp.path(), "alerts.yml", ALERTING);
    let server = start(tmp.path(), "");
    wait_ready(&server).await;
    write(&server, &format!("cpu,host=a usage=90 {}", now_ns())).await;
    let pending = alert_in(&server, "pending").await;
    assert_eq!(pending["labels"]["alertname"], "HighCpu");
    assert_eq!(pending["labels"]["severity"], "page");
    assert_eq!(pending["annotations"]["summary"], "a at 90");
    assert_eq!(pending["value"], "9e+01");
    let firing = alert_in(&server, "firing").await;
    assert_eq!(firing["activeAt"], pending["activeAt"]);
    let rules = json(&server, "/api/v1/rules?type=alert").await;
    let rule = &rules["data"]["groups"][0]["rules"][0];
    assert_eq!(
        (&rule["state"], &rule["duration"]),
        (&"firing".into(), &3.0.into()),
        "{rule}"
    );
    assert_eq!(rule["alerts"].as_array().unwrap().len(), 1, "{rule}");
    let state = query(&server, "ALERTS{alertname=\"HighCpu\"}").await;
    assert_eq!(state.len(), 1, "{state:?}");
    assert_eq!(state[0]["metric"]["alertstate"], "firing");
    assert_eq!(
        metric(&server, "chingest_alerts{alertstate=\"firing\"}").await,
        1.0
    );
    // The value drops: resolved, gone from the API.
    write(&server, &format!("cpu,host=a usage=10 {}", now_ns())).await;
    until(Duration::from_secs(20), "resolved", || async {
        alerts(&server).await.is_empty().then_some(())
    })
    .await;
    let rules = json(&server, "/api/v1/rules?type=alert").await;
    assert_eq!(rules["data"]["groups"][0]["rules"][0]["state"], "inactive");
}

#[tokio::test]
async fn a_broken_file_is_refused_and_the_old_rules_keep_running() {
    let tmp = tempfile::tempdir().unwrap();
    write_rules(tmp.path(), "cpu.yml", RECORDING);
    let mut server = start(tmp.path(), "");
    wait_ready(&server).await;
    write_rules(
        tmp.path(),
        "broken.yml",
        "groups:\n- name: broken\n  rules:\n  - record: x:y\n    expr: sum(\n",
    );
    let (status, text) = reload(&server).await;
    assert_eq!(status, 500, "{text}");
    assert!(text.contains("broken.yml: 5:11:"), "{text}");
    let groups = json(&server, "/api/v1/rules").await["data"]["groups"].clone();
    assert_eq!(groups.as_array().unwrap().len(), 1, "{groups}");
    assert_eq!(
        metric(&server, "chingest_rules_config_last_reload_successful").await,
        0.0
    );
    // SIGHUP: refused the same way, then taken once the file is fixed.
    let hangup = |server: &Server| {
        let pid = server.child.id().to_string();
        assert!(std::process::Command::new("kill")
            .args(["-HUP", &pid])
            .status()
            .unwrap()
            .success());
    };
    hangup(&server);
    until(
        Duration::from_secs(10),
        "a refused SIGHUP reload",
        || async {
            (metric(
                &server,
                "chingest_rules_config_reloads_total{outcome=\"failure\"}",
            )
            .await
                >= 2.0)
                .then_some(())
        },
    )
    .await;
    write_rules(
        tmp.path(),
        "broken.yml",
        "groups:\n- name: fixed\n  rules:\n  - record: x:y\n    expr: sum(cpu_usage)\n",
    );
    hangup(&server);
    until(Duration::from_secs(10), "the fixed file", || async {
        let groups = json(&server, "/api/v1/rules").await["data"]["groups"].clone();
        (groups.as_array().unwrap().len() == 2).then_some(())
    })
    .await;
    assert_eq!(
        metric(&server, "chingest_rules_config_last_reload_successful").await,
        1.0
    );
    server.kill();
    // A server does not start on a broken file.
    write_rules(tmp.path(), "broken.yml", "groups:\n- name: [\n");
    let mut refused = start(tmp.path(), "");
    assert!(
        refused.exited_within(Duration::from_secs(30)),
        "started on a broken file"
    );
    assert!(!refused.child.wait().unwrap().success());
}

#[tokio::test]
async fn a_pending_alert_keeps_its_time_across_a_kill() {
    let tmp = tempfile::tempdir().unwrap();
    let alert = "groups:
- name: slow
  interval: 1s
  rules:
  - alert: Slow
    expr: cpu_usage > 50
    for: 1m
";
    write_rules(tmp.path(), "slow.yml", alert);
    let grace = "for_grace_period_ms = 1000";
    let mut server = start(tmp.path(), grace);
    wait_ready(&server).await;
    write(&server, &format!("cpu,host=a usage=90 {}", now_ns())).await;
    let pending = alert_in(&server, "pending").await;
    let active_at = time_of(&pending["activeAt"]);
    // Pending a while, then killed.
    tokio::time::sleep(Duration::from_secs(5)).await;
    server.kill();
    let killed = Instant::now();
    let server = start(tmp.path(), grace);
    wait_ready(&server).await;
    let first = time_of(&alert_in(&server, "pending").await["activeAt"]);
    // Restored after the second evaluation: active from before the kill,
    // shifted by the time the server was down.
    let restored = until(
        Duration::from_secs(20),
        "the restored for state",
        || async {
            let alerts = alerts(&server).await;
            let at = time_of(&alerts.first()?["activeAt"]);
            (at < first).then_some(at)
        },
    )
    .await;
    let pending_before_kill = 5.0;
    let down = killed.elapsed().as_secs_f64();
    assert!(restored - active_at > 0.0, "{restored} {active_at}");
    assert!(
        first - restored >= pending_before_kill - 2.0,
        "pending {pending_before_kill} s before the kill, restored to {restored}, first seen again {first} (down {down} s)"
    );
}

/// An RFC 3339 time in seconds.
fn time_of(text: &Value) -> f64 {
    let text = text.as_str().unwrap();
    let parsed = chrono::DateTime::parse_from_rfc3339(text).unwrap();
    parsed.timestamp_millis() as f64 / 1000.0
}

/// Debian's Alertmanager (0.25) on `port`, its state in `dir`.
fn start_alertmanager(dir: &Path, port: u16) -> std::process::Child {
    let config = dir.join("alertmanager.yml");
    std::fs::write(
        &config,
        "route:\n  receiver: 'null'\nreceivers:\n- name: 'null'\n",
    )
    .unwrap();
    std::process::Command::new("prometheus-alertmanager")
        .arg(format!("--config.file={}", config.display()))
        .arg(format!("--storage.path={}", dir.join("am").display()))
        .arg(format!("--web.listen-address=127.0.0.1:{port}"))
        .arg("--cluster.listen-address=")
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("prometheus-alertmanager (make test-setup installs it)")
}

/// The alerts Alertmanager holds as active.
async fn received(port: u16) -> Option<Vec<Value>> {
    let r = client()
        .get(format!("http://127.0.0.1:{port}/api/v2/alerts"))
        .send()
        .await
        .ok()?;
    r.json::<Vec<Value>>().await.ok()
}

/// The Alertmanager is down when the alert fires: the posts fail and are
/// counted, evaluation goes on; once it is up the alert reaches it on the
/// next resend, then its resolution.
#[tokio::test]
async fn alerts_reach_alertmanager_once_it_is_up_and_then_resolve() {
    let tmp = tempfile::tempdir().unwrap();
    write_rules(tmp.path(), "alerts.yml", ALERTING);
    let port = child::free_port();
    let extra = format!(
        "resend_delay_ms = 1000\n[rules.external_labels]\ncluster = \"test\"\n\
         [[rules.alertmanagers]]\nurl = \"http://127.0.0.1:{port}\"\ntimeout_ms = 2000"
    );
    let server = start(tmp.path(), &extra);
    wait_ready(&server).await;
    write(&server, &format!("cpu,host=a usage=90 {}", now_ns())).await;
    alert_in(&server, "firing").await;
    let errors = format!("chingest_notifications_errors_total{{alertmanager=\"http://127.0.0.1:{port}/api/v2/alerts\"}}");
    until(Duration::from_secs(20), "failed posts counted", || async {
        (metric(&server, &errors).await > 0.0).then_some(())
    })
    .await;
    let mut alertmanager = start_alertmanager(tmp.path(), port);
    let got = until(
        Duration::from_secs(30),
        "the alert at Alertmanager",
        || async {
            let alerts = received(port).await?;
            alerts
                .into_iter()
                .find(|a| a["labels"]["alertname"] == "HighCpu")
        },
    )
    .await;
    assert_eq!(got["labels"]["severity"], "page", "{got}");
    assert_eq!(got["labels"]["cluster"], "test", "{got}");
    assert_eq!(got["annotations"]["summary"], "a at 90", "{got}");
    assert!(
        got["generatorURL"].as_str().unwrap().contains("/ui/query?"),
        "{got}"
    );
    let sent = format!("chingest_notifications_sent_total{{alertmanager=\"http://127.0.0.1:{port}/api/v2/alerts\"}}");
    assert!(metric(&server, &sent).await > 0.0);
    // Resolved: Alertmanager is told, and holds it active no more.
    write(&server, &format!("cpu,host=a usage=10 {}", now_ns())).await;
    until(
        Duration::from_secs(30),
        "the resolution at Alertmanager",
        || async {
            let alerts = received(port).await?;
            alerts.is_empty().then_some(())
        },
    )
    .await;
    let _ = alertmanager.kill();
    let _ = alertmanager.wait();
}

/// The rows of `prometheus`'s samples table: (all, distinct by series
/// and time).
async fn recorded_rows(server: &Server) -> (u64, u64) {
    let text = child::sql(
        server,
        "SELECT count(), uniqExact(series_id, time) FROM prometheus.`prometheus.autogen`",
    )
    .await;
    let mut numbers = text.split_whitespace().map(|n| n.parse::<u64>().unwrap());
    (numbers.next().unwrap(), numbers.next().unwrap())
}

/// Groups evaluated every 100 ms while the server is killed (-9) three
/// times at random moments: after each restart the groups go on from
/// their next slot, so no sample is written twice; and between the kills
/// every slot has its sample (a gap only where the server was down).
#[tokio::test]
async fn kills_during_evaluation_write_no_sample_twice() {
    let tmp = tempfile::tempdir().unwrap();
    let rules = "groups:
- name: fast
  interval: 100ms
  rules:
  - record: host:cpu_usage:sum
    expr: sum by (host) (cpu_usage)
  - record: host:cpu_usage:max
    expr: max by (host) (cpu_usage)
";
    write_rules(tmp.path(), "fast.yml", rules);
    let mut server = start(tmp.path(), "");
    wait_ready(&server).await;
    write(&server, &format!("cpu,host=a usage=1 {}", now_ns())).await;
    let kills = 3;
    for k in 0..kills {
        let wait = 700 + (now_ns() as u64 / 1_000) % 600 + k * 100;
        tokio::time::sleep(Duration::from_millis(wait)).await;
        server.kill();
        server = start(tmp.path(), "");
        wait_ready(&server).await;
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let (rows, distinct) = recorded_rows(&server).await;
    assert!(rows > 10, "{rows} samples recorded");
    assert_eq!(rows, distinct, "a sample written twice");
    // One series' times: steps of 100 ms but where the server was down.
    let text = child::sql(
        &server,
        "SELECT toUnixTimestamp64Milli(time) FROM prometheus.`prometheus.autogen` \
         WHERE series_id = (SELECT any(series_id) FROM prometheus.`prometheus.autogen`) ORDER BY time",
    )
    .await;
    let times: Vec<i64> = text.lines().map(|l| l.parse().unwrap()).collect();
    let gaps = times.windows(2).filter(|w| w[1] - w[0] != 100).count();
    assert!(gaps <= kills as usize, "{gaps} gaps in {times:?}");
}

/// A group slower than its interval skips the slots it missed (counted)
/// instead of piling up, and never holds up another group or a write; a
/// rule whose query fails is marked with its error while the rules after
/// it run.
#[tokio::test]
async fn a_slow_group_misses_slots_and_a_failing_rule_keeps_its_error() {
    let tmp = tempfile::tempdir().unwrap();
    let rules = "groups:
- name: slow
  interval: 100ms
  rules:
  - record: steps
    expr: count_over_time(vector(1)[7d:1s])
- name: quick
  interval: 100ms
  rules:
  - record: clash
    expr: label_replace(cpu_usage, \"host\", \"\", \"host\", \".*\")
  - record: after
    expr: sum(cpu_usage)
";
    write_rules(tmp.path(), "mixed.yml", rules);
    let server = start(tmp.path(), "");
    wait_ready(&server).await;
    let t = now_ns();
    write(
        &server,
        &format!("cpu,host=a usage=1 {t}\ncpu,host=b usage=2 {t}"),
    )
    .await;
    let slow = "chingest_rule_group_iterations_missed_total{rule_group=\"";
    until(Duration::from_secs(30), "missed slots counted", || async {
        let (_, text) = get(&server, "/metrics").await;
        text.lines()
            .find(|l| l.starts_with(slow) && l.contains(";slow\""))
            .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .filter(|&missed| missed > 0.0)
    })
    .await;
    let rules = json(&server, "/api/v1/rules").await;
    let groups = rules["data"]["groups"].as_array().unwrap();
    let quick = groups.iter().find(|g| g["name"] == "quick").unwrap();
    let (clash, after) = (&quick["rules"][0], &quick["rules"][1]);
    assert_eq!(clash["health"], "err", "{clash}");
    assert!(
        clash["lastError"]
            .as_str()
            .unwrap()
            .contains("same labelset"),
        "{clash}"
    );
    assert_eq!(after["health"], "ok", "{after}");
    assert_eq!(query(&server, "after").await[0]["value"][1], "3");
    // The quick group kept its pace beside the slow one, and writes pass.
    let iterations = |name: &'static str| {
        let server = &server;
        async move {
            let (_, text) = get(server, "/metrics").await;
            text.lines()
                .find(|l| {
                    l.starts_with("chingest_rule_group_iterations_total{")
                        && l.contains(&format!(";{name}\""))
                })
                .and_then(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                .unwrap()
        }
    };
    let (quick_before, slow_before) = (iterations("quick").await, iterations("slow").await);
    let started = Instant::now();
    write(&server, &format!("cpu,host=c usage=3 {}", now_ns())).await;
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "a write waited {:?}",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let quick_runs = iterations("quick").await - quick_before;
    let slow_runs = iterations("slow").await - slow_before;
    assert!(quick_runs >= 10.0, "quick ran {quick_runs} times in 2 s");
    assert!(
        slow_runs < quick_runs,
        "slow ran {slow_runs} times, quick {quick_runs}"
    );
    assert!(metric_total(&server, "chingest_rule_evaluation_failures_total{").await > 0.0);
}

/// The sum of every series of `name` in `/metrics`.
async fn metric_total(server: &Server, name: &str) -> f64 {
    let (_, text) = get(server, "/metrics").await;
    text.lines()
        .filter(|l| l.starts_with(name))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// An Alertmanager that accepts connections and never answers: each post
/// times out and is counted, and the group evaluates at its pace all the
/// while (evaluation only queues alerts).
#[tokio::test]
async fn an_alertmanager_that_never_answers_never_holds_up_evaluation() {
    let tmp = tempfile::tempdir().unwrap();
    let rules = "groups:
- name: loud
  interval: 100ms
  rules:
  - alert: Always
    expr: vector(1)
";
    write_rules(tmp.path(), "loud.yml", rules);
    let silent = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = silent.local_addr().unwrap().port();
    // Holds every connection open without a word.
    tokio::spawn(async move {
        let mut held = Vec::new();
        while let Ok((socket, _)) = silent.accept().await {
            held.push(socket);
        }
    });
    let extra = format!(
        "resend_delay_ms = 100\n[[rules.alertmanagers]]\nurl = \"http://127.0.0.1:{port}\"\ntimeout_ms = 300"
    );
    let server = start(tmp.path(), &extra);
    wait_ready(&server).await;
    let errors = format!(
        "chingest_notifications_errors_total{{alertmanager=\"http://127.0.0.1:{port}/api/v2/alerts\"}}"
    );
    until(
        Duration::from_secs(20),
        "timed-out posts counted",
        || async { (metric(&server, &errors).await > 0.0).then_some(()) },
    )
    .await;
    let iterations = "chingest_rule_group_iterations_total{";
    let seconds = "chingest_rule_group_duration_seconds_total{";
    let (runs_before, seconds_before) = (
        metric_total(&server, iterations).await,
        metric_total(&server, seconds).await,
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    let runs = metric_total(&server, iterations).await - runs_before;
    let spent = metric_total(&server, seconds).await - seconds_before;
    assert!(
        runs >= 10.0,
        "the group ran {runs} times in 2 s beside a silent Alertmanager"
    );
    // A post on the evaluation's path would cost each run the 300 ms
    // timeout; a missed slot alone only says the machine was busy.
    assert!(
        spent / runs < 0.3,
        "evaluations took {} s each beside a silent Alertmanager",
        spent / runs
    );
}

/// `chingest rules backfill` writes a past range's recorded series into a
/// running server: a sample per group interval of each recording rule, a
/// rule reading the one before it, the labels set; alerting rules left
/// out; the series then read back by PromQL.
#[tokio::test]
async fn backfill_records_a_past_range_in_order() {
    let tmp = tempfile::tempdir().unwrap();
    let rules = "groups:
- name: past
  interval: 5m
  rules:
  - record: host:cpu_usage:max
    expr: max by (host) (cpu_usage)
    labels:
      source: backfill
  - record: host:cpu_usage:max_doubled
    expr: host:cpu_usage:max * 2
  - alert: Ignored
    expr: cpu_usage > 0
";
    write_rules(tmp.path(), "past.yml", rules);
    // No [rules] in the server: only the backfill writes.
    let server = start_with(&tmp.path().join("data"), &[]);
    wait_ready(&server).await;
    // Two hours of a point a minute, ending three hours ago, on the hour.
    let end_s = (now_ns() / 1_000_000_000 / 3600 - 3) * 3600;
    let start_s = end_s - 2 * 3600;
    let lines: Vec<String> = (0..=120)
        .flat_map(|m| {
            let t = (start_s + m * 60) * 1_000_000_000;
            [
                format!("cpu,host=a usage={} {t}", m % 10),
                format!("cpu,host=b usage={} {t}", 100 + m % 7),
            ]
        })
        .collect();
    write(&server, &lines.join("\n")).await;
    let run = std::process::Command::new(env!("CARGO_BIN_EXE_chingest"))
        .args([
            "rules",
            "backfill",
            "--url",
            &server.url,
            "--database",
            "prometheus",
        ])
        .args([
            "--from",
            &(start_s + 600).to_string(),
            "--to",
            &end_s.to_string(),
        ])
        .arg(tmp.path().join("rules/past.yml"))
        .output()
        .unwrap();
    let printed = String::from_utf8_lossy(&run.stdout).into_owned();
    assert!(
        run.status.success(),
        "{printed}{}",
        String::from_utf8_lossy(&run.stderr)
    );
    // (2 h - 10 min) / 5 min + 1 = 23 steps, for each of 2 hosts.
    assert!(
        printed.contains("host:cpu_usage:max: 2 series, 46 samples"),
        "{printed}"
    );
    assert!(
        printed.contains("host:cpu_usage:max_doubled: 2 series, 46 samples"),
        "{printed}"
    );
    assert!(!printed.contains("Ignored"), "{printed}");
    let path = format!(
        "/api/v1/query_range?query={}&start={}&end={end_s}&step=300",
        urlencode("host:cpu_usage:max_doubled{host=\"b\"} / on (host) host:cpu_usage:max"),
        start_s + 600
    );
    let answer = json(&server, &path).await;
    let values = answer["data"]["result"][0]["values"]
        .as_array()
        .unwrap()
        .clone();
    assert_eq!(values.len(), 23, "{answer}");
    assert!(values.iter().all(|v| v[1] == "2"), "{answer}");
    let labels = query_at(&server, "host:cpu_usage:max", end_s).await;
    assert_eq!(labels[0]["metric"]["source"], "backfill", "{labels:?}");
}

/// The instant query's samples at `time_s`.
async fn query_at(server: &Server, promql: &str, time_s: i64) -> Vec<Value> {
    let path = format!("/api/v1/query?query={}&time={time_s}", urlencode(promql));
    json(server, &path).await["data"]["result"]
        .as_array()
        .unwrap()
        .clone()
}

/// A group naming its own `database` (chingest's key) reads and writes
/// there, beside groups that read the configured one.
#[tokio::test]
async fn a_group_reads_and_writes_its_own_database() {
    let tmp = tempfile::tempdir().unwrap();
    let rules = "groups:
- name: elsewhere
  interval: 1s
  database: telegraf
  rules:
  - record: host:mem_used:sum
    expr: sum by (host) (mem_used)
";
    write_rules(tmp.path(), "own.yml", rules);
    let server = start(tmp.path(), "");
    wait_ready(&server).await;
    let r = client()
        .post(format!("{}/write?db=telegraf", server.url))
        .body(format!("mem,host=a used=7 {}", now_ns()))
        .send()
        .await
        .unwrap();
    assert!(r.status().is_success());
    let path = format!(
        "/api/v1/query?db=telegraf&query={}",
        urlencode("host:mem_used:sum")
    );
    let found = until(
        Duration::from_secs(20),
        "the group's own database",
        || async {
            let answer = json(&server, &path).await;
            let result = answer["data"]["result"].as_array()?.clone();
            (!result.is_empty()).then_some(result)
        },
    )
    .await;
    assert_eq!(found[0]["value"][1], "7", "{found:?}");
    // Not in the configured one.
    assert!(query(&server, "host:mem_used:sum").await.is_empty());
}
