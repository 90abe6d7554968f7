//! `pushit promql --rules`: what recording rules cost, on the dashboard's
//! node-exporter data. The rules are the node-exporter mixin's
//! `node-exporter.rules` group, those whose metrics the data has (the
//! mixin's `{job="node"}` selectors kept). Each rule's expression is asked
//! as the instant query a rule evaluation makes, at the data's end, of
//! chingest and the peers; and chingest evaluates the group itself (as
//! `[rules]` does, its queries looking back to the data with
//! `query_offset`), its rules' evaluation times read from `/api/v1/rules`:
//! the query and the write of the recorded series.

use std::time::Duration;

use anyhow::{bail, Context as _};
use serde_json::Value;

use super::promql_data::Data;
use super::promql_query::{Load, Query, Request, Target};
use super::server::{authorized, http_client, Endpoints};

/// The rules: name and expression. One reads another's output in the
/// mixin (`instance:node_num_cpu:sum`); asked as a query, it reads the
/// expression instead.
pub(super) const RULES: [(&str, &str); 7] = [
    (
        "instance:node_num_cpu:sum",
        r#"count without (cpu, mode) (node_cpu_seconds_total{job="node",mode="idle"})"#,
    ),
    (
        "instance:node_cpu_utilisation:rate5m",
        r#"1 - avg without (cpu) (sum without (mode) (rate(node_cpu_seconds_total{job="node", mode=~"idle|iowait|steal"}[5m])))"#,
    ),
    (
        "instance:node_load1_per_cpu:ratio",
        r#"node_load1{job="node"} / instance:node_num_cpu:sum{job="node"}"#,
    ),
    (
        "instance:node_memory_utilisation:ratio",
        r#"1 - ((node_memory_MemAvailable_bytes{job="node"} or (node_memory_Buffers_bytes{job="node"} + node_memory_Cached_bytes{job="node"} + node_memory_MemFree_bytes{job="node"})) / node_memory_MemTotal_bytes{job="node"})"#,
    ),
    (
        "instance_device:node_disk_read_bytes:rate5m",
        r#"rate(node_disk_read_bytes_total{job="node"}[5m])"#,
    ),
    (
        "instance:node_network_receive_bytes_excluding_lo:rate5m",
        r#"sum without (device) (rate(node_network_receive_bytes_total{job="node", device!="lo"}[5m]))"#,
    ),
    (
        "instance:node_network_transmit_bytes_excluding_lo:rate5m",
        r#"sum without (device) (rate(node_network_transmit_bytes_total{job="node", device!="lo"}[5m]))"#,
    ),
];

/// The rule file chingest evaluates: the group every `interval_s`, its
/// queries `offset_s` back (where the data is).
pub(super) fn rule_file(interval_s: u64, offset_s: i64) -> String {
    let mut out = format!(
        "groups:\n- name: node-exporter.rules\n  interval: {interval_s}s\n  query_offset: {offset_s}s\n  rules:\n"
    );
    for (record, expr) in RULES {
        out.push_str(&format!("  - record: {record}\n    expr: '{expr}'\n"));
    }
    out
}

/// Each rule's expression as an instant query at the data's end (the
/// recorded series one reads replaced by its expression).
pub(super) fn queries(data: &Data) -> Vec<Query> {
    let time = (data.end_ms() / 1000).to_string();
    let inline = |expr: &str| {
        expr.replace(
            r#"instance:node_num_cpu:sum{job="node"}"#,
            &format!("on (instance) ({})", RULES[0].1),
        )
    };
    RULES
        .iter()
        .map(|(record, expr)| {
            let request = Request {
                path: "/api/v1/query",
                params: vec![("query", inline(expr)), ("time", time.clone())],
            };
            Query::single(
                format!("rule: {record}"),
                request,
                Load::Repeated,
                Target::Prometheus,
            )
        })
        .collect()
}

/// chingest's own evaluation of the group: each rule's evaluation time,
/// the median of `polls` evaluations read from `/api/v1/rules` (an
/// evaluation every `interval`), and the series it recorded.
pub(super) async fn evaluated(
    endpoints: &Endpoints,
    interval: Duration,
    polls: usize,
) -> anyhow::Result<Vec<(String, f64, usize)>> {
    let client = http_client()?;
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); RULES.len()];
    let mut last_seen = String::new();
    let give_up = std::time::Instant::now() + interval * (polls as u32 * 3 + 10);
    while times[0].len() < polls {
        if std::time::Instant::now() > give_up {
            bail!(
                "the rules were evaluated {} times, not {polls}",
                times[0].len()
            );
        }
        tokio::time::sleep(interval / 4).await;
        let url = format!("{}/api/v1/rules", endpoints.http);
        let answer: Value = authorized(endpoints, client.get(url))
            .send()
            .await?
            .json()
            .await
            .context("/api/v1/rules")?;
        let group = &answer["data"]["groups"][0];
        let at = group["lastEvaluation"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        if at == last_seen || at.starts_with("0001") {
            continue;
        }
        last_seen = at;
        for (i, rule) in group["rules"].as_array().into_iter().flatten().enumerate() {
            if rule["health"] != "ok" {
                bail!("rule {}: {}", rule["name"], rule["lastError"]);
            }
            times[i].push(rule["evaluationTime"].as_f64().unwrap_or(0.0));
        }
    }
    let mut out = Vec::new();
    for ((record, _), mut taken) in RULES.iter().zip(times) {
        taken.sort_by(f64::total_cmp);
        // Recorded where the queries looked: the data's last hours.
        let query = format!("count(last_over_time({record}[3h]))");
        let url = format!("{}/api/v1/query", endpoints.http);
        let answer: Value = authorized(endpoints, client.get(url).query(&[("query", &query)]))
            .send()
            .await?
            .json()
            .await?;
        let series = answer["data"]["result"][0]["value"][1]
            .as_str()
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(0.0) as usize;
        out.push((record.to_string(), taken[taken.len() / 2], series));
    }
    Ok(out)
}
