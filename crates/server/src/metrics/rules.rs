//! The rules' metrics, named as Prometheus names its own
//! (`prometheus_rule_…` becomes `chingest_rule_…`), per group as
//! `rule_group="FILE;NAME"`.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

use chingest_rules::alert::State;
use chingest_rules::manager::{GroupCounters, Manager};
use chingest_rules::notify::{Delivery, Notifier};

use super::format::{by_label, header};

/// Appends the rules' metrics to `out`.
pub(crate) fn rules_metrics(out: &mut String, manager: &Manager) {
    let reload = manager.reload_status();
    header(
        out,
        "chingest_rules_config_last_reload_successful",
        "gauge",
        "Whether the last load of the rule files worked (1) or was refused (0).",
    );
    let _ = writeln!(
        out,
        "chingest_rules_config_last_reload_successful {}",
        u8::from(reload.last_successful)
    );
    header(
        out,
        "chingest_rules_config_reloads_total",
        "counter",
        "Loads of the rule files, by outcome.",
    );
    let _ = writeln!(
        out,
        "chingest_rules_config_reloads_total{{outcome=\"success\"}} {}\n\
         chingest_rules_config_reloads_total{{outcome=\"failure\"}} {}",
        reload.successes, reload.failures
    );
    header(
        out,
        "chingest_rules_leader",
        "gauge",
        "Whether this node evaluates the rules (1; in a cluster, the holder of their lease).",
    );
    let _ = writeln!(
        out,
        "chingest_rules_leader {}",
        u8::from(manager.is_leader())
    );
    let groups = manager.groups();
    let keys: Vec<String> = groups
        .iter()
        .map(|g| {
            let state = g.state.read().unwrap();
            format!("{};{}", state.file, state.name)
        })
        .collect();
    type Counter = fn(&GroupCounters) -> f64;
    let counters: [(&str, &str, Counter); 6] = [
        (
            "chingest_rule_group_iterations_total",
            "Evaluations of the group that ran.",
            |c| load(&c.iterations),
        ),
        (
            "chingest_rule_group_iterations_missed_total",
            "Evaluations skipped because the group was still evaluating or waiting for its turn.",
            |c| load(&c.missed),
        ),
        (
            "chingest_rule_evaluations_total",
            "Rule evaluations.",
            |c| load(&c.evaluations),
        ),
        (
            "chingest_rule_evaluation_failures_total",
            "Rule evaluations that failed (the rule's lastError says why).",
            |c| load(&c.failures),
        ),
        (
            "chingest_rule_samples_written_total",
            "Samples rules wrote, stale markers included.",
            |c| load(&c.samples),
        ),
        (
            "chingest_rule_group_duration_seconds_total",
            "Time spent evaluating the group.",
            |c| load(&c.duration_us) / 1e6,
        ),
    ];
    for (name, help, counter) in counters {
        let each = keys
            .iter()
            .zip(&groups)
            .map(|(k, g)| (k.clone(), counter(&g.counters)));
        by_label(out, (name, "counter", help), "rule_group", each);
    }
    type Gauge = fn(&chingest_rules::group::GroupState) -> f64;
    let gauges: [(&str, &str, Gauge); 4] = [
        (
            "chingest_rule_group_last_duration_seconds",
            "How long the group's last evaluation took.",
            |g| g.evaluation_time.as_secs_f64(),
        ),
        (
            "chingest_rule_group_last_evaluation_timestamp_seconds",
            "When the group was last evaluated (0: never).",
            |g| g.last_evaluation.unwrap_or(0) as f64 / 1000.0,
        ),
        (
            "chingest_rule_group_interval_seconds",
            "The group's interval.",
            |g| g.interval.as_secs_f64(),
        ),
        ("chingest_rule_group_rules", "Rules in the group.", |g| {
            g.rules.len() as f64
        }),
    ];
    for (name, help, gauge) in gauges {
        let each = keys
            .iter()
            .zip(&groups)
            .map(|(k, g)| (k.clone(), gauge(&g.state.read().unwrap())));
        by_label(out, (name, "gauge", help), "rule_group", each);
    }
    header(
        out,
        "chingest_alerts",
        "gauge",
        "Alerts pending or firing, by state.",
    );
    let mut by_state = [0u64; 2];
    for group in &groups {
        let state = group.state.read().unwrap();
        for alert in state
            .rules
            .iter()
            .flat_map(|r| r.alerts.iter().flat_map(|a| a.alerts()))
        {
            match alert.state {
                State::Pending => by_state[0] += 1,
                State::Firing => by_state[1] += 1,
                State::Inactive => {}
            }
        }
    }
    let _ = writeln!(
        out,
        "chingest_alerts{{alertstate=\"pending\"}} {}\nchingest_alerts{{alertstate=\"firing\"}} {}",
        by_state[0], by_state[1]
    );
    if let Some(notifier) = manager.notifier() {
        notifier_metrics(out, notifier);
    }
}

/// Appends the notifier's metrics, named as Prometheus's
/// (`prometheus_notifications_…`).
fn notifier_metrics(out: &mut String, notifier: &Notifier) {
    let targets: Vec<(String, &Delivery)> = notifier
        .alertmanagers()
        .map(|(am, d)| (format!("{}/api/v2/alerts", am.url.trim_end_matches('/')), d))
        .collect();
    type Counter = fn(&Delivery) -> &AtomicU64;
    let per: [(&str, &str, Counter); 2] = [
        (
            "chingest_notifications_sent_total",
            "Alerts posted to each Alertmanager.",
            |d| &d.sent,
        ),
        (
            "chingest_notifications_errors_total",
            "Alerts whose post to the Alertmanager failed (not retried: firing alerts are sent again every resend delay).",
            |d| &d.errors,
        ),
    ];
    for (name, help, counter) in per {
        let each = targets
            .iter()
            .map(|(url, d)| (url.clone(), load(counter(d))));
        by_label(out, (name, "counter", help), "alertmanager", each);
    }
    for (name, kind, help, value) in [
        (
            "chingest_notifications_dropped_total",
            "counter",
            "Alerts dropped because the queue was full.",
            notifier.dropped.load(Ordering::Relaxed),
        ),
        (
            "chingest_notifications_queue_length",
            "gauge",
            "Alerts waiting to be sent.",
            notifier.queue_length() as u64,
        ),
        (
            "chingest_notifications_queue_capacity",
            "gauge",
            "The most alerts that wait (rules.notification_queue_capacity).",
            notifier.capacity() as u64,
        ),
    ] {
        header(out, name, kind, help);
        let _ = writeln!(out, "{name} {value}");
    }
}

/// A counter's value, as the exposition writes numbers.
fn load(counter: &AtomicU64) -> f64 {
    counter.load(Ordering::Relaxed) as f64
}
