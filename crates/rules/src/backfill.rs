//! `chingest rules backfill`: recording rules' results for a past range,
//! as `promtool tsdb create-blocks-from rules` makes them, written into a
//! running server. Each group's recording rules run in the file's order,
//! each as range queries of the server's PromQL over `[from, to]` at the
//! group's interval (in pieces of at most 11,000 steps, the API's bound),
//! renamed and labelled as an evaluation labels them, and written back by
//! remote write, visible before the next rule asks: a rule that reads an
//! earlier one's output sees it (promtool's does not). Alerting rules are
//! left out, as promtool leaves them. Reads may use rollups where the
//! database is downsampled, as any range query does.

use std::collections::BTreeMap;
use std::time::Duration;

use chingest_proto::prometheus::{Label, Sample, TimeSeries, WriteRequest};
use prost::Message as _;
use serde_json::Value;

use crate::duration::millis;
use crate::file::{Group, RuleKind};
use crate::load::LoadedFile;

/// Steps one range query asks for (the query API's bound).
const MAX_STEPS: i64 = 11_000;

/// Samples in one remote-write request.
const SAMPLES_PER_WRITE: usize = 10_000;

/// Where the backfill reads and writes: a server's HTTP API.
#[derive(Debug, Clone)]
pub struct Remote {
    /// `http://host:8086`.
    pub url: String,
    /// A token that may read and write the database, when the server asks.
    pub token: Option<String>,
    /// The database the rules read and their results are written to.
    pub database: String,
}

/// What one rule's backfill wrote.
#[derive(Debug, Clone, PartialEq)]
pub struct Filled {
    /// The file and the group.
    pub group: String,
    /// The rule's name.
    pub rule: String,
    /// Series written.
    pub series: usize,
    /// Samples written.
    pub samples: usize,
}

/// Backfills every recording rule of `files` over `[from, to]` (ms); a
/// group without an interval takes `default_interval`. Stops at the first
/// failure, naming the rule.
pub async fn backfill(
    remote: &Remote,
    files: &[LoadedFile],
    (from, to): (i64, i64),
    default_interval: Duration,
) -> Result<Vec<Filled>, String> {
    if to < from {
        return Err("--to is before --from".into());
    }
    let client = reqwest::Client::builder()
        .no_proxy()
        .timeout(Duration::from_secs(300))
        .build()
        .map_err(|err| err.to_string())?;
    let mut out = Vec::new();
    for file in files {
        for group in &file.groups {
            let step = millis(group.interval.unwrap_or(default_interval)).max(1);
            for rule in &group.rules {
                if !matches!(rule.kind, RuleKind::Recording) {
                    continue;
                }
                let name = format!("{};{}", file.path, group.name);
                // The group's own database, if it names one.
                let remote = &Remote {
                    database: group
                        .database
                        .clone()
                        .unwrap_or_else(|| remote.database.clone()),
                    ..remote.clone()
                };
                let filled = backfill_rule(&client, remote, group, rule, (from, to), step)
                    .await
                    .map_err(|err| format!("group {name:?}, rule {:?}: {err}", rule.name))?;
                out.push(Filled {
                    group: name,
                    rule: rule.name.clone(),
                    series: filled.0,
                    samples: filled.1,
                });
            }
        }
    }
    Ok(out)
}

/// One rule over the range: (series, samples) written.
async fn backfill_rule(
    client: &reqwest::Client,
    remote: &Remote,
    group: &Group,
    rule: &crate::file::Rule,
    (from, to): (i64, i64),
    step: i64,
) -> Result<(usize, usize), String> {
    // The rule's labels over the group's, as an evaluation sets them.
    let mut labels: Vec<(String, String)> = group.labels.clone();
    for (name, value) in &rule.labels {
        labels.retain(|(n, _)| n != name);
        labels.push((name.clone(), value.clone()));
    }
    // Aligned on the step, as evaluations are.
    let mut start = from.div_euclid(step) * step;
    if start < from {
        start += step;
    }
    let mut series: BTreeMap<BTreeMap<String, String>, Vec<(i64, f64)>> = BTreeMap::new();
    while start <= to {
        let end = (start + (MAX_STEPS - 1) * step).min(to);
        let answer = query_range(client, remote, &rule.expr, (start, end), step).await?;
        for item in answer {
            let mut set: BTreeMap<String, String> = item["metric"]
                .as_object()
                .into_iter()
                .flatten()
                .map(|(k, v)| (k.clone(), v.as_str().unwrap_or_default().to_owned()))
                .collect();
            set.insert("__name__".into(), rule.name.clone());
            for (name, value) in &labels {
                match value.is_empty() {
                    true => set.remove(name),
                    false => set.insert(name.clone(), value.clone()),
                };
            }
            let points = series.entry(set).or_default();
            for point in item["values"].as_array().into_iter().flatten() {
                let (Some(t), Some(v)) = (point[0].as_f64(), point[1].as_str()) else {
                    return Err(format!(
                        "an answer's point is not [time, \"value\"]: {point}"
                    ));
                };
                // Go's float texts (`NaN`, `+Inf`) parse as Rust's.
                let value = v
                    .parse::<f64>()
                    .map_err(|_| format!("an answer's value is not a number: {v:?}"))?;
                let t = (t * 1000.0).round() as i64;
                // Two series of the answer made one by the labels.
                if points.last().is_some_and(|&(last, _)| last >= t) {
                    return Err(
                        "vector contains metrics with the same labelset after applying rule labels"
                            .into(),
                    );
                }
                points.push((t, value));
            }
        }
        start = end + step;
    }
    let samples: usize = series.values().map(Vec::len).sum();
    write(client, remote, &series).await?;
    Ok((series.len(), samples))
}

/// The matrix of `expr` over `[start, end]` (ms) at `step` ms.
async fn query_range(
    client: &reqwest::Client,
    remote: &Remote,
    expr: &str,
    (start, end): (i64, i64),
    step: i64,
) -> Result<Vec<Value>, String> {
    let url = format!("{}/api/v1/query_range", remote.url.trim_end_matches('/'));
    let seconds = |ms: i64| format!("{}.{:03}", ms.div_euclid(1000), ms.rem_euclid(1000));
    let params = [
        ("db", remote.database.clone()),
        ("query", expr.to_owned()),
        ("start", seconds(start)),
        ("end", seconds(end)),
        ("step", seconds(step)),
    ];
    let mut request = client.post(&url).form(&params);
    if let Some(token) = &remote.token {
        request = request.bearer_auth(token);
    }
    let response = request.send().await.map_err(|err| err.to_string())?;
    let status = response.status();
    let answer: Value = response.json().await.map_err(|err| err.to_string())?;
    if !status.is_success() {
        return Err(format!(
            "query_range: {status}: {}",
            answer["error"].as_str().unwrap_or_default()
        ));
    }
    match answer["data"]["resultType"].as_str() {
        Some("matrix") => Ok(answer["data"]["result"]
            .as_array()
            .cloned()
            .unwrap_or_default()),
        _ => Err("rule result is not a vector or scalar".into()),
    }
}

/// Writes `series` by remote write, visible when each request returns.
async fn write(
    client: &reqwest::Client,
    remote: &Remote,
    series: &BTreeMap<BTreeMap<String, String>, Vec<(i64, f64)>>,
) -> Result<(), String> {
    let url = format!(
        "{}/api/v1/write?db={}&durability=visible",
        remote.url.trim_end_matches('/'),
        crate::template::query_escape(&remote.database)
    );
    let mut request = WriteRequest::default();
    let mut pending = 0;
    let mut encoder = snap::raw::Encoder::new();
    let mut send = async |request: &mut WriteRequest| -> Result<(), String> {
        let body = encoder
            .compress_vec(&std::mem::take(request).encode_to_vec())
            .map_err(|err| err.to_string())?;
        let mut post = client
            .post(&url)
            .header("Content-Encoding", "snappy")
            .header("Content-Type", "application/x-protobuf")
            .header("X-Prometheus-Remote-Write-Version", "0.1.0")
            .body(body);
        if let Some(token) = &remote.token {
            post = post.bearer_auth(token);
        }
        let response = post.send().await.map_err(|err| err.to_string())?;
        match response.status().is_success() {
            true => Ok(()),
            false => Err(format!(
                "writing: {}: {}",
                response.status(),
                response.text().await.unwrap_or_default()
            )),
        }
    };
    for (labels, points) in series {
        for chunk in points.chunks(SAMPLES_PER_WRITE) {
            request.timeseries.push(TimeSeries {
                labels: labels
                    .iter()
                    .map(|(k, v)| Label {
                        name: k.clone().into(),
                        value: v.clone().into(),
                    })
                    .collect(),
                samples: chunk
                    .iter()
                    .map(|&(timestamp, value)| Sample { value, timestamp })
                    .collect(),
            });
            pending += chunk.len();
            if pending >= SAMPLES_PER_WRITE {
                send(&mut request).await?;
                pending = 0;
            }
        }
    }
    if pending > 0 {
        send(&mut request).await?;
    }
    Ok(())
}
