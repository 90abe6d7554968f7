//! A group's rules between evaluations and one evaluation of them, as
//! Prometheus 2.42's `rules/group.go` runs it: each rule in order, its
//! expression an instant query of chingest's PromQL at the evaluation's
//! time; a recording rule's result renamed, labelled and written; an
//! alerting rule's alerts moved and their `ALERTS` / `ALERTS_FOR_STATE`
//! samples written; series a rule wrote last time and not now get a stale
//! marker; each rule's health, error and time kept for the APIs. Writes go
//! through the ingestor's write path: durable in the write-ahead log when
//! the write returns, readable by the next rule at once.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use arrow::array::{Float64Array, Int64Array, RecordBatch};
use chingest::{Access, ArrowTable, Ingestor, Tags, WriteOptions};
use chingest_codecs::prometheus::{SAMPLES, VALUE};
use chingest_promql::{LabelMatcher, MatchKind, Source, Value, METRIC_NAME};

use crate::alert::{AlertingRule, Context, Labels, Notification, Sample, ALERTS_FOR_STATE_METRIC};
use crate::duration::millis;
use crate::file::{Group, Rule, RuleKind};
use crate::settings::Settings;
use crate::template;

/// A rule's health after its last evaluation, as the APIs name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Health {
    /// Not evaluated yet.
    Unknown,
    /// Its last evaluation worked.
    Ok,
    /// Its last evaluation failed (`last_error` says why).
    Err,
}

impl Health {
    /// `unknown`, `ok` or `err`.
    pub fn as_str(self) -> &'static str {
        match self {
            Health::Unknown => "unknown",
            Health::Ok => "ok",
            Health::Err => "err",
        }
    }
}

/// How a rule's last evaluation went.
#[derive(Debug, Clone, PartialEq)]
pub struct RuleStatus {
    /// Its health.
    pub health: Health,
    /// Why it failed, when it did.
    pub last_error: Option<String>,
    /// When it was last evaluated (wall clock, ms).
    pub last_evaluation: Option<i64>,
    /// How long that took.
    pub evaluation_time: Duration,
}

/// A rule and what it keeps between evaluations.
#[derive(Debug, Clone)]
pub struct RuleState {
    /// The rule as its file says it, the group's labels merged in.
    pub rule: Rule,
    /// Its alerts, for an alerting rule.
    pub alerts: Option<AlertingRule>,
    /// How its last evaluation went.
    pub status: RuleStatus,
    /// The series it wrote at its last evaluation (a stale marker for
    /// those it does not write next time).
    written: HashSet<Labels>,
}

/// A group of a rule file and its rules' state.
#[derive(Debug, Clone)]
pub struct GroupState {
    /// The file it is in.
    pub file: String,
    /// Its name.
    pub name: String,
    /// How often it is evaluated.
    pub interval: Duration,
    /// How far back its queries look.
    pub query_offset: Duration,
    /// Its `limit`.
    pub limit: i64,
    /// The database its rules read and write, when not the configured.
    pub database: Option<String>,
    /// Its rules, in order.
    pub rules: Vec<RuleState>,
    /// When its last evaluation started (wall clock, ms).
    pub last_evaluation: Option<i64>,
    /// How long that took.
    pub evaluation_time: Duration,
    /// Series of rules a reload removed, marked stale at the next
    /// evaluation.
    stale: HashSet<Labels>,
}

/// What one evaluation of a group did.
#[derive(Debug, Default)]
pub struct Evaluated {
    /// Rules evaluated.
    pub rules: u64,
    /// Rules whose evaluation failed.
    pub failures: u64,
    /// Samples written (stale markers included).
    pub samples: usize,
    /// Alerts to send to the Alertmanagers.
    pub notifications: Vec<Notification>,
}

/// What a group's rules read and write: the ingestor
/// ([`IngestorStorage`]), or a unit test's series in memory
/// (`unittest.rs`).
pub trait Storage: Sync {
    /// `expr`'s samples at `ts` (ms), as a rule's query gives them: a
    /// scalar is one sample without labels.
    fn query(
        &self,
        expr: &str,
        ts: i64,
    ) -> impl std::future::Future<Output = Result<Vec<Sample>, String>> + Send;
    /// Writes `samples` at `ts` (ms), as one write.
    fn write(
        &self,
        ts: i64,
        samples: &[&Sample],
    ) -> impl std::future::Future<Output = Result<(), String>> + Send;
    /// [`query`](Self::query), answered before it returns: what alert
    /// templates' `query` calls in the middle of an expansion.
    fn query_blocking(&self, expr: &str, ts: i64) -> Result<Vec<Sample>, String>;
}

/// A template's `query` at an evaluation's time.
struct QueryAt<'a, S> {
    storage: &'a S,
    ts: i64,
}

impl<S: Storage> template::Query for QueryAt<'_, S> {
    fn query(&self, expr: &str) -> Result<Vec<template::Sample>, String> {
        let samples = self.storage.query_blocking(expr, self.ts)?;
        Ok(samples
            .into_iter()
            .map(|s| template::Sample {
                labels: s.labels,
                value: s.value,
            })
            .collect())
    }
}

/// The ingestor as rules read and write it: `settings`' databases, its
/// PromQL, its write path.
pub struct IngestorStorage<'a> {
    /// What is read and written.
    pub ingestor: &'a Ingestor,
    /// Which databases, with which limits.
    pub settings: &'a Settings,
}

impl Storage for IngestorStorage<'_> {
    async fn query(&self, expr: &str, ts: i64) -> Result<Vec<Sample>, String> {
        query(self.ingestor, self.settings, expr, ts).await
    }

    async fn write(&self, ts: i64, samples: &[&Sample]) -> Result<(), String> {
        write(self.ingestor, self.settings, ts, samples).await
    }

    /// On the server's runtime (several threads), the worker waits for
    /// the query while the others go on.
    fn query_blocking(&self, expr: &str, ts: i64) -> Result<Vec<Sample>, String> {
        let handle = tokio::runtime::Handle::try_current().map_err(|err| err.to_string())?;
        if handle.runtime_flavor() != tokio::runtime::RuntimeFlavor::MultiThread {
            return Err("query needs a runtime of several threads".into());
        }
        tokio::task::block_in_place(|| handle.block_on(self.query(expr, ts)))
    }
}

impl GroupState {
    /// The group `group` of `file`, never evaluated, with `settings`' defaults.
    pub fn new(file: &str, group: &Group, settings: &Settings) -> GroupState {
        let rules = group
            .rules
            .iter()
            .map(|rule| {
                let mut rule = rule.clone();
                // A group's labels go to each rule; the rule's own win.
                for (name, value) in group.labels.iter().rev() {
                    if !rule.labels.iter().any(|(n, _)| n == name) {
                        rule.labels.insert(0, (name.clone(), value.clone()));
                    }
                }
                RuleState {
                    alerts: AlertingRule::new(&rule),
                    rule,
                    status: RuleStatus {
                        health: Health::Unknown,
                        last_error: None,
                        last_evaluation: None,
                        evaluation_time: Duration::ZERO,
                    },
                    written: HashSet::new(),
                }
            })
            .collect();
        GroupState {
            file: file.to_owned(),
            name: group.name.clone(),
            interval: group.interval.unwrap_or(settings.evaluation_interval),
            query_offset: group.query_offset.unwrap_or(settings.query_offset),
            limit: group.limit,
            database: group.database.clone(),
            rules,
            last_evaluation: None,
            evaluation_time: Duration::ZERO,
            stale: HashSet::new(),
        }
    }

    /// Holds back its alerting rules' `ALERTS` samples (`false`) until
    /// [`restore_for_state`](Self::restore_for_state) ran (a server that
    /// just started), or lets them go.
    pub fn set_restored(&mut self, restored: bool) {
        for alerts in self.rules.iter_mut().filter_map(|r| r.alerts.as_mut()) {
            alerts.set_restored(restored);
        }
    }

    /// `settings` with the group's own database, if it has one, read and
    /// written.
    pub fn settings(&self, settings: &Settings) -> Settings {
        match &self.database {
            Some(db) => Settings {
                read_database: db.clone(),
                write_database: db.clone(),
                ..settings.clone()
            },
            None => settings.clone(),
        }
    }

    /// Forgets the alerts and written series this node kept: another
    /// node evaluated the group meanwhile (a cluster's lease moved).
    pub fn forget(&mut self) {
        for rule in &mut self.rules {
            rule.written.clear();
            rule.alerts = AlertingRule::new(&rule.rule);
        }
        self.stale.clear();
    }

    /// Takes over what `old` (the same group before a reload) kept, as
    /// Prometheus's `CopyState`: a rule with the name and labels of one of
    /// `old`'s keeps the series it wrote, its status and, both alerting,
    /// its alerts; the series of `old`'s rules that have no such twin get
    /// a stale marker at the next evaluation.
    pub fn take_over(&mut self, old: GroupState) {
        let same = |a: &Rule, b: &Rule| a.name == b.name && a.labels == b.labels;
        let mut old_rules = old.rules;
        for state in &mut self.rules {
            let Some(at) = old_rules.iter().position(|o| same(&o.rule, &state.rule)) else {
                continue;
            };
            let old = old_rules.remove(at);
            state.written = old.written;
            state.status = old.status;
            if let (Some(alerts), Some(before)) = (&mut state.alerts, old.alerts) {
                alerts.keep_alerts_of(before);
            }
        }
        self.stale = old.stale;
        self.stale
            .extend(old_rules.into_iter().flat_map(|r| r.written));
    }

    /// Writes a stale marker at `ts` (ms) for every series the group's
    /// rules wrote at their last evaluation: a group that was removed.
    pub async fn write_stale(&self, storage: &impl Storage, ts: i64) -> Result<(), String> {
        let stale: Vec<Sample> = self
            .rules
            .iter()
            .flat_map(|r| &r.written)
            .chain(&self.stale)
            .map(stale_marker)
            .collect();
        storage.write(ts, &stale.iter().collect::<Vec<_>>()).await
    }

    /// Evaluates every rule in order at `eval_ts` (ms; the queries look
    /// `query_offset` further back, where the samples are written).
    pub async fn evaluate(
        &mut self,
        storage: &impl Storage,
        settings: &Settings,
        eval_ts: i64,
    ) -> Evaluated {
        let ts = eval_ts - millis(self.query_offset);
        let started = Instant::now();
        self.last_evaluation = Some(chingest::clock::now_ms());
        let mut out = Evaluated::default();
        if !self.stale.is_empty() {
            let stale: Vec<Sample> = self.stale.iter().map(stale_marker).collect();
            match storage.write(ts, &stale.iter().collect::<Vec<_>>()).await {
                Ok(()) => {
                    out.samples += stale.len();
                    self.stale.clear();
                }
                Err(err) => tracing::warn!(group = %self.name, %err,
                    "stale markers of removed rules not written; trying again next time"),
            }
        }
        let limit = self.limit;
        let interval = self.interval;
        for state in &mut self.rules {
            let rule_started = Instant::now();
            state.status.last_evaluation = Some(chingest::clock::now_ms());
            out.rules += 1;
            let result = evaluate_rule(storage, settings, state, ts, limit).await;
            let failed = match result {
                Ok(samples) => {
                    if let Some(alerts) = &mut state.alerts {
                        let sent = alerts.to_send(ts, settings.resend_delay, interval);
                        if !sent.is_empty() {
                            let url = generator_url(settings, &state.rule.expr);
                            out.notifications
                                .extend(sent.into_iter().map(|n| Notification {
                                    generator_url: url.clone(),
                                    ..n
                                }));
                        }
                    }
                    // Series written last time and not now end here.
                    let now: HashSet<Labels> = samples.iter().map(|s| s.labels.clone()).collect();
                    let stale: Vec<Sample> = state
                        .written
                        .iter()
                        .filter(|labels| !now.contains(*labels))
                        .map(stale_marker)
                        .collect();
                    let all: Vec<&Sample> = samples.iter().chain(&stale).collect();
                    match storage.write(ts, &all).await {
                        Ok(()) => {
                            out.samples += all.len();
                            state.written = now;
                            None
                        }
                        Err(err) => Some(format!("writing the rule's samples: {err}")),
                    }
                }
                Err(err) => Some(err),
            };
            state.status.evaluation_time = rule_started.elapsed();
            match failed {
                None => {
                    state.status.health = Health::Ok;
                    state.status.last_error = None;
                }
                Some(err) => {
                    tracing::warn!(group = %self.name, rule = %state.rule.name, %err,
                        "rule evaluation failed");
                    state.status.health = Health::Err;
                    state.status.last_error = Some(err);
                    out.failures += 1;
                }
            }
        }
        self.evaluation_time = started.elapsed();
        out
    }

    /// Restores when each alert of the group's rules became active from
    /// the `ALERTS_FOR_STATE` samples written before a restart, as
    /// Prometheus's `RestoreForState` does at `now` (ms): an alert that
    /// was pending or firing keeps its time, shifted by how long the
    /// server was down, and one whose `for` would end within the grace
    /// period waits that period. Alerts that the outage tolerance does
    /// not reach, and rules whose `for` is under the grace period, start
    /// afresh. Returns the alerts restored.
    pub async fn restore_for_state(
        &mut self,
        ingestor: &Ingestor,
        settings: &Settings,
        now: i64,
    ) -> Result<usize, String> {
        // Restored or not (an error is logged), their samples are written
        // from now on.
        self.set_restored(true);
        let source = source(ingestor, settings, &settings.write_database)?;
        let from = now - millis(settings.for_outage_tolerance);
        let grace = millis(settings.for_grace_period);
        let mut restored = 0;
        for state in &mut self.rules {
            let Some(alerts) = &mut state.alerts else {
                continue;
            };

            let RuleKind::Alerting(alerting) = &state.rule.kind else {
                continue;
            };
            let hold = millis(alerting.hold);
            if hold < grace {
                continue;
            }
            let held: Vec<Labels> = alerts.alerts().map(|a| a.labels.clone()).collect();
            for labels in held {
                let mut matchers = vec![equal(METRIC_NAME, ALERTS_FOR_STATE_METRIC)?];
                for (name, value) in &labels {
                    matchers.push(equal(name, value)?);
                }
                let (mut series_budget, mut sample_budget) =
                    (settings.limits.max_series, settings.limits.max_samples);
                let found = source
                    .select(&matchers, from, now, &mut series_budget, &mut sample_budget)
                    .await
                    .map_err(|err| err.to_string())?;
                // The series with exactly these labels (a selector also
                // finds ones with more).
                let Some(series) = found
                    .iter()
                    .find(|s| s.labels.pairs().len() == labels.len() + 1)
                else {
                    continue;
                };
                let Some(&(down_at, value)) = series.points.last() else {
                    continue;
                };
                if chingest_promql::is_stale(value) {
                    continue;
                }
                // Prometheus reads both in whole seconds.
                let down_at = down_at.div_euclid(1000) * 1000;
                let mut active_at = value as i64 * 1000;
                let remaining = hold - (down_at - active_at);
                if remaining <= 0 {
                    // It was firing: the next evaluation says whether it is.
                } else if remaining < grace {
                    active_at = now + grace - hold;
                } else {
                    active_at += now - down_at;
                }
                if alerts.restore_active_at(&labels, active_at) {
                    restored += 1;
                }
            }
        }
        Ok(restored)
    }
}

/// The stale marker of the series `labels`.
fn stale_marker(labels: &Labels) -> Sample {
    Sample {
        labels: labels.clone(),
        value: chingest_promql::STALE_NAN,
    }
}

/// What rules read of `database`: everything there, under the query
/// limits of `settings`.
fn source<'a>(
    ingestor: &'a Ingestor,
    settings: &Settings,
    database: &str,
) -> Result<Source<'a>, String> {
    let (rp, limits) = (&settings.retention_policy, settings.limits);
    Source::new(ingestor, &Access::ALL, database, rp, limits).map_err(|err| err.to_string())
}

/// The link an alert carries to its rule's expression: the Query page of
/// the server's UI, as Prometheus links to its graph page.
fn generator_url(settings: &Settings, expr: &str) -> String {
    use crate::template::query_escape;
    format!(
        "{}/ui/query?lang=promql&db={}&q={}",
        settings.external_url.trim_end_matches('/'),
        query_escape(&settings.read_database),
        query_escape(expr)
    )
}

fn equal(name: &str, value: &str) -> Result<LabelMatcher, String> {
    LabelMatcher::new(name, MatchKind::Equal, value).map_err(|err| err.to_string())
}

/// One rule's samples to write at `ts`, its alerts moved; or why it
/// failed (its alerts then as they were).
async fn evaluate_rule(
    storage: &impl Storage,
    settings: &Settings,
    state: &mut RuleState,
    ts: i64,
    limit: i64,
) -> Result<Vec<Sample>, String> {
    let result = storage.query(&state.rule.expr, ts).await?;
    match &mut state.alerts {
        None => record(&state.rule, result, limit),
        Some(alerts) => {
            let query = QueryAt { storage, ts };
            let context = Context {
                external_labels: settings.external_labels.clone(),
                external_url: settings.external_url.clone(),
                query: Some(&query),
                ..Context::default()
            };
            alerts
                .eval(ts, &result, &context, limit)
                .map_err(|err| err.to_string())
        }
    }
}

/// The samples of `expr` at `ts`, as Prometheus's rule query gives them:
/// a scalar is one sample without labels.
async fn query(
    ingestor: &Ingestor,
    settings: &Settings,
    expr: &str,
    ts: i64,
) -> Result<Vec<Sample>, String> {
    let source = source(ingestor, settings, &settings.read_database)?;
    let value = chingest_promql::instant_query(&source, expr, ts, settings.options)
        .await
        .map_err(|err| err.to_string())?;
    samples_of(value)
}

/// A query's answer as a rule takes it: a vector's samples, a scalar as
/// one sample without labels; anything else is an error.
pub fn samples_of(value: Value) -> Result<Vec<Sample>, String> {
    match value {
        Value::Vector(_, samples) => Ok(samples
            .into_iter()
            .map(|s| Sample {
                labels: s.labels.pairs().iter().cloned().collect(),
                value: s.value,
            })
            .collect()),
        Value::Scalar(_, value) => Ok(vec![Sample {
            labels: Labels::new(),
            value,
        }]),
        _ => Err("rule result is not a vector or scalar".into()),
    }
}

/// A recording rule's result as the series it writes: named after the
/// rule, its labels set (an empty one removed), at most `limit` (when
/// positive), no two the same.
fn record(rule: &Rule, result: Vec<Sample>, limit: i64) -> Result<Vec<Sample>, String> {
    let mut seen = HashSet::with_capacity(result.len());
    let mut out = Vec::with_capacity(result.len());
    for mut sample in result {
        sample
            .labels
            .insert(METRIC_NAME.to_owned(), rule.name.clone());
        for (name, value) in &rule.labels {
            match value.is_empty() {
                true => sample.labels.remove(name),
                false => sample.labels.insert(name.clone(), value.clone()),
            };
        }
        if !seen.insert(sample.labels.clone()) {
            return Err(
                "vector contains metrics with the same labelset after applying rule labels".into(),
            );
        }
        out.push(sample);
    }
    if limit > 0 && out.len() > limit as usize {
        return Err(format!(
            "exceeded limit of {limit} with {} series",
            out.len()
        ));
    }
    Ok(out)
}

/// Writes `samples` at `ts` (ms) into the rules' database, as remote
/// write stores Prometheus's samples: one write, durable when it returns.
async fn write(
    ingestor: &Ingestor,
    settings: &Settings,
    ts: i64,
    samples: &[&Sample],
) -> Result<(), String> {
    if samples.is_empty() {
        return Ok(());
    }
    let time_ns = ts.saturating_mul(1_000_000);
    let times = Int64Array::from(vec![time_ns; samples.len()]);
    let values = Float64Array::from_iter_values(samples.iter().map(|s| s.value));
    let batch = RecordBatch::try_from_iter([
        ("time", Arc::new(times) as _),
        (VALUE, Arc::new(values) as _),
    ])
    .map_err(|err| err.to_string())?;
    let tags: Vec<(&str, &str)> = samples
        .iter()
        .flat_map(|s| s.labels.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .collect();
    let counts: Vec<(usize, usize)> = samples.iter().map(|s| (s.labels.len(), 1)).collect();
    let table = ArrowTable {
        measurement: SAMPLES,
        batch: &batch,
        tags: Tags::Series {
            tags: &tags,
            counts: &counts,
        },
        duplicates: None,
    };
    let options = WriteOptions::default();
    ingestor
        .write_arrow_tables(
            &settings.write_database,
            &settings.retention_policy,
            &[table],
            &options,
        )
        .await
        .map(drop)
        .map_err(|err| err.to_string())
}
