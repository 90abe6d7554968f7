//! Sending alerts to Alertmanager's v2 API, as Prometheus 2.42's
//! `notifier` does: a bounded queue (the oldest alerts dropped, and
//! counted, when it is full), batches of 64 posted to every configured
//! Alertmanager at once, each post bounded by its timeout. A post that
//! fails is counted and not retried: the rules send firing alerts again
//! every resend delay, and resolved ones until they are forgotten, so an
//! Alertmanager that comes back hears of them. Evaluation never waits for
//! an Alertmanager: it only queues.

use std::collections::{BTreeMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{json, Value};

use crate::alert::{Labels, Notification};

/// Alerts posted in one request (Prometheus's `maxBatchSize`).
pub const MAX_BATCH: usize = 64;

/// One Alertmanager and how to reach it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Alertmanager {
    /// Its base URL, `http://host:9093` (alerts go to `/api/v2/alerts`
    /// under it).
    pub url: String,
    /// How long a post may take.
    pub timeout: Duration,
}

/// An Alertmanager's counters, as Prometheus names them per
/// `alertmanager`.
#[derive(Debug, Default)]
pub struct Delivery {
    /// Alerts posted (`…_notifications_sent_total`).
    pub sent: AtomicU64,
    /// Alerts whose post failed (`…_notifications_errors_total`).
    pub errors: AtomicU64,
}

/// An Alertmanager and its counters, shared with the posts to it.
#[derive(Debug)]
struct Target {
    alertmanager: Alertmanager,
    delivery: Delivery,
}

/// The queue and the Alertmanagers it posts to.
pub struct Notifier {
    targets: Vec<Arc<Target>>,
    queue: Mutex<VecDeque<Value>>,
    capacity: usize,
    wake: Arc<tokio::sync::Notify>,
    external_labels: Labels,
    /// Alerts dropped because the queue was full.
    pub dropped: AtomicU64,
    client: reqwest::Client,
}

impl std::fmt::Debug for Notifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Notifier")
            .field("alertmanagers", &self.targets.len())
            .finish_non_exhaustive()
    }
}

impl Notifier {
    /// A notifier posting to `alertmanagers`, queueing at most `capacity`
    /// alerts, adding `external_labels` to alerts that lack them (as
    /// Prometheus does); its sending task runs until the notifier is
    /// dropped by every holder.
    pub fn start(
        alertmanagers: Vec<Alertmanager>,
        capacity: usize,
        external_labels: Labels,
    ) -> Arc<Notifier> {
        let notifier = Arc::new(Notifier {
            targets: alertmanagers
                .into_iter()
                .map(|alertmanager| {
                    Arc::new(Target {
                        alertmanager,
                        delivery: Delivery::default(),
                    })
                })
                .collect(),
            queue: Mutex::new(VecDeque::new()),
            capacity: capacity.max(1),
            wake: Arc::new(tokio::sync::Notify::new()),
            external_labels,
            dropped: AtomicU64::new(0),
            client: reqwest::Client::builder()
                .no_proxy()
                .build()
                .unwrap_or_default(),
        });
        tokio::spawn(run(Arc::downgrade(&notifier), Arc::clone(&notifier.wake)));
        notifier
    }

    /// Each Alertmanager with its counters.
    pub fn alertmanagers(&self) -> impl Iterator<Item = (&Alertmanager, &Delivery)> {
        self.targets.iter().map(|t| (&t.alertmanager, &t.delivery))
    }

    /// Alerts waiting to be sent.
    pub fn queue_length(&self) -> usize {
        self.queue.lock().unwrap().len()
    }

    /// The most alerts that wait.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    fn take_batch(&self) -> Vec<Value> {
        let mut queue = self.queue.lock().unwrap();
        let n = queue.len().min(MAX_BATCH);
        queue.drain(..n).collect()
    }

    /// Posts `batch` to every Alertmanager at once; returns when each
    /// answered or timed out.
    async fn post(&self, batch: Vec<Value>) {
        let n = batch.len() as u64;
        let body = Arc::new(Value::Array(batch));
        let mut posts = tokio::task::JoinSet::new();
        for target in &self.targets {
            let (target, body, client) =
                (Arc::clone(target), Arc::clone(&body), self.client.clone());
            posts.spawn(async move {
                let base = target.alertmanager.url.trim_end_matches('/');
                let url = format!("{base}/api/v2/alerts");
                let sent = client
                    .post(&url)
                    .timeout(target.alertmanager.timeout)
                    .json(&*body)
                    .send()
                    .await;
                let failure = match sent {
                    Ok(r) if r.status().is_success() => None,
                    Ok(r) => Some(format!("bad response status {}", r.status())),
                    Err(err) => Some(err.to_string()),
                };
                let delivery = &target.delivery;
                match failure {
                    None => delivery.sent.fetch_add(n, Ordering::Relaxed),
                    Some(err) => {
                        tracing::warn!(alertmanager = %url, %err, alerts = n,
                            "error sending alerts");
                        delivery.errors.fetch_add(n, Ordering::Relaxed)
                    }
                };
            });
        }
        while posts.join_next().await.is_some() {}
    }
}

impl Notifier {
    /// Queues `alerts` for sending; never waits.
    pub fn send(&self, alerts: Vec<Notification>) {
        if self.targets.is_empty() {
            return;
        }
        let mut queue = self.queue.lock().unwrap();
        for alert in alerts {
            queue.push_back(alert_json(alert, &self.external_labels));
        }
        let over = queue.len().saturating_sub(self.capacity);
        if over > 0 {
            queue.drain(..over);
            self.dropped.fetch_add(over as u64, Ordering::Relaxed);
            tracing::warn!(
                dropped = over,
                "alert queue full; the oldest alerts dropped"
            );
        }
        drop(queue);
        self.wake.notify_one();
    }
}

/// The sending task: batches while the queue has alerts, then waits for
/// more (not holding the notifier, which ends the task once dropped).
async fn run(notifier: std::sync::Weak<Notifier>, wake: Arc<tokio::sync::Notify>) {
    loop {
        let woken = wake.notified();
        let Some(strong) = notifier.upgrade() else {
            return;
        };
        let batch = strong.take_batch();
        if batch.is_empty() {
            drop(strong);
            tokio::select! {
                _ = woken => {}
                _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            }
            continue;
        }
        strong.post(batch).await;
    }
}

/// An alert as Alertmanager's v2 API takes it.
fn alert_json(alert: Notification, external_labels: &Labels) -> Value {
    let mut labels: BTreeMap<String, String> = alert.labels;
    for (name, value) in external_labels {
        labels.entry(name.clone()).or_insert_with(|| value.clone());
    }
    let mut out = json!({
        "labels": labels,
        "annotations": alert.annotations,
        "generatorURL": alert.generator_url,
    });
    if let Some(at) = alert.starts_at.and_then(rfc3339) {
        out["startsAt"] = json!(at);
    }
    if let Some(at) = alert.ends_at.and_then(rfc3339) {
        out["endsAt"] = json!(at);
    }
    out
}

/// A time (ms) in RFC 3339, UTC, to the millisecond.
fn rfc3339(ms: i64) -> Option<String> {
    chrono::DateTime::from_timestamp_millis(ms)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::Millis, true))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_are_rfc3339_in_utc() {
        assert_eq!(rfc3339(0).unwrap(), "1970-01-01T00:00:00.000Z");
        assert_eq!(
            rfc3339(1_795_910_400_123).unwrap(),
            "2026-11-29T00:00:00.123Z"
        );
        assert_eq!(
            rfc3339(951_782_400_000).unwrap(),
            "2000-02-29T00:00:00.000Z"
        );
    }

    #[test]
    fn external_labels_fill_what_an_alert_lacks() {
        let labels = |pairs: &[(&str, &str)]| -> Labels {
            pairs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect()
        };
        let alert = Notification {
            labels: labels(&[("alertname", "A"), ("cluster", "mine")]),
            annotations: labels(&[("summary", "s")]),
            starts_at: Some(0),
            ends_at: None,
            generator_url: "http://x/ui/query".into(),
        };
        let external = labels(&[("cluster", "theirs"), ("region", "eu")]);
        let json = alert_json(alert, &external);
        assert_eq!(json["labels"]["cluster"], "mine");
        assert_eq!(json["labels"]["region"], "eu");
        assert_eq!(json["startsAt"], "1970-01-01T00:00:00.000Z");
        assert!(json.get("endsAt").is_none());
    }
}
