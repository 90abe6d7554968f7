//! An alerting rule's alerts and how each evaluation moves them, as
//! Prometheus 2.42's `rules/alerting.go` does: a series in the result
//! starts a pending alert, which fires once it has been active for the
//! rule's `for`; an alert whose series left the result is dropped while
//! pending, resolved while firing (kept 15 minutes so Alertmanager hears
//! of it) unless `keep_firing_for` keeps it firing; and which alerts are
//! sent when (`needsSending`, the resend delay, `ValidUntil`).
//!
//! Pure: the caller evaluates the expression, hands over its samples and
//! the time, and writes the `ALERTS` / `ALERTS_FOR_STATE` samples and sends
//! the notifications this returns. Times are ms since the epoch.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::duration::millis;
use crate::file::{Rule, RuleKind};
use crate::template::{self, AlertData, Limits, Query};

/// A label set, sorted by name.
pub type Labels = BTreeMap<String, String>;

/// How long a resolved alert is kept (and sent) after it resolved.
pub const RESOLVED_RETENTION: Duration = Duration::from_secs(15 * 60);

/// The series name of the alerts' state samples.
pub const ALERTS_METRIC: &str = "ALERTS";
/// The series name of the alerts' `ActiveAt` samples (restored after a
/// restart).
pub const ALERTS_FOR_STATE_METRIC: &str = "ALERTS_FOR_STATE";

/// Where an alert is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum State {
    /// Resolved (kept a while to be sent as such).
    Inactive,
    /// Active for less than the rule's `for`.
    Pending,
    /// Active for the rule's `for` at least.
    Firing,
}

impl State {
    /// The name the APIs and `ALERTS{alertstate}` use.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Inactive => "inactive",
            State::Pending => "pending",
            State::Firing => "firing",
        }
    }
}

/// One alert of a rule: one label set of its result.
#[derive(Debug, Clone, PartialEq)]
pub struct Alert {
    /// The series' labels without `__name__`, the rule's labels
    /// (expanded), and `alertname`.
    pub labels: Labels,
    /// The rule's annotations, expanded.
    pub annotations: Labels,
    /// Where it is.
    pub state: State,
    /// The series' value at the last evaluation it was in the result.
    pub value: f64,
    /// When it became active (pending).
    pub active_at: i64,
    /// When it fired.
    pub fired_at: Option<i64>,
    /// When it resolved.
    pub resolved_at: Option<i64>,
    /// When it was last handed over for sending.
    pub last_sent_at: Option<i64>,
    /// Until when Alertmanager should hold it firing without hearing again.
    pub valid_until: Option<i64>,
    /// Since when `keep_firing_for` keeps it firing without its series.
    pub keep_firing_since: Option<i64>,
}

impl Alert {
    /// Prometheus's `needsSending`.
    fn needs_sending(&self, ts: i64, resend_delay: Duration) -> bool {
        if self.state == State::Pending {
            return false;
        }
        if self.resolved_at > self.last_sent_at {
            return true;
        }
        match self.last_sent_at {
            None => true,
            Some(sent) => sent + millis(resend_delay) < ts,
        }
    }
}

/// An alert as Alertmanager's API takes it (Prometheus's `notifier.Alert`).
#[derive(Debug, Clone, PartialEq)]
pub struct Notification {
    /// The alert's labels.
    pub labels: Labels,
    /// The alert's annotations.
    pub annotations: Labels,
    /// When it fired (`startsAt`).
    pub starts_at: Option<i64>,
    /// When it resolved, else until when it is valid (`endsAt`).
    pub ends_at: Option<i64>,
    /// Where its rule's expression is shown (`generatorURL`); the caller,
    /// which knows the server's address, sets it.
    pub generator_url: String,
}

/// A sample of the rule's expression.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// Its labels, `__name__` included when it has one.
    pub labels: Labels,
    /// Its value.
    pub value: f64,
}

/// What templates see besides the alert: Prometheus's configured external
/// labels and URL, and a `query` hook.
#[derive(Default)]
pub struct Context<'a> {
    /// `$externalLabels`.
    pub external_labels: Labels,
    /// `$externalURL`.
    pub external_url: String,
    /// What answers templates' `query`.
    pub query: Option<&'a dyn Query>,
    /// Bounds of each expansion.
    pub limits: Limits,
}

/// Why an evaluation failed (the alerts are then as Prometheus leaves
/// them).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EvalError {
    /// Two series became the same alert.
    #[error("vector contains metrics with the same labelset after applying alert labels")]
    SameLabelSet,
    /// More alerts than the group's `limit`: every alert is dropped.
    #[error("exceeded limit of {limit} with {active} alerts")]
    Limit {
        /// The group's limit.
        limit: i64,
        /// The alerts that were active or pending.
        active: usize,
    },
}

/// An alerting rule's alerts between evaluations.
#[derive(Debug, Clone)]
pub struct AlertingRule {
    name: String,
    hold: Duration,
    keep_firing_for: Duration,
    labels: Vec<(String, String)>,
    annotations: Vec<(String, String)>,
    active: BTreeMap<Labels, Alert>,
    /// Whether its `for` state is restored (or needs no restoring): until
    /// then it writes no `ALERTS` / `ALERTS_FOR_STATE` samples, which would
    /// hide the ones a restore reads, as in Prometheus.
    restored: bool,
}

impl AlertingRule {
    /// The state of `rule`, `None` for a recording rule.
    pub fn new(rule: &Rule) -> Option<AlertingRule> {
        let RuleKind::Alerting(alerting) = &rule.kind else {
            return None;
        };
        Some(AlertingRule {
            name: rule.name.clone(),
            hold: alerting.hold,
            keep_firing_for: alerting.keep_firing_for,
            labels: rule.labels.clone(),
            annotations: alerting.annotations.clone(),
            active: BTreeMap::new(),
            restored: true,
        })
    }

    /// The alert's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The alerts held: pending, firing, and resolved ones still kept.
    pub fn alerts(&self) -> impl Iterator<Item = &Alert> {
        self.active.values()
    }

    /// The rule's state: the highest of its alerts'.
    pub fn state(&self) -> State {
        self.active
            .values()
            .map(|a| a.state)
            .max()
            .unwrap_or(State::Inactive)
    }

    /// One evaluation at `ts` over the expression's `result`: the alerts
    /// move, and the samples to write come back (`ALERTS` with
    /// `alertstate`, value 1, and `ALERTS_FOR_STATE`, value `ActiveAt` in
    /// seconds) for every pending or firing alert.
    pub fn eval(
        &mut self,
        ts: i64,
        result: &[Sample],
        context: &Context<'_>,
        limit: i64,
    ) -> Result<Vec<Sample>, EvalError> {
        let mut current: BTreeMap<Labels, Alert> = BTreeMap::new();
        for sample in result {
            let data = AlertData {
                labels: sample.labels.clone(),
                external_labels: context.external_labels.clone(),
                external_url: context.external_url.clone(),
                value: sample.value,
            };
            let expand = |text: &str| {
                template::expand_alert_template(
                    &self.name,
                    text,
                    &data,
                    context.query,
                    context.limits,
                )
                .unwrap_or_else(|err| template::expansion_failure(&err))
            };
            let mut labels = sample.labels.clone();
            labels.remove("__name__");
            for (name, text) in &self.labels {
                labels.insert(name.clone(), expand(text));
            }
            labels.insert("alertname".into(), self.name.clone());
            let annotations = self
                .annotations
                .iter()
                .map(|(name, text)| (name.clone(), expand(text)))
                .collect();
            if current.contains_key(&labels) {
                return Err(EvalError::SameLabelSet);
            }
            current.insert(
                labels.clone(),
                Alert {
                    labels,
                    annotations,
                    state: State::Pending,
                    value: sample.value,
                    active_at: ts,
                    fired_at: None,
                    resolved_at: None,
                    last_sent_at: None,
                    valid_until: None,
                    keep_firing_since: None,
                },
            );
        }
        for (labels, alert) in &current {
            match self.active.get_mut(labels) {
                Some(held) if held.state != State::Inactive => {
                    held.value = alert.value;
                    held.annotations = alert.annotations.clone();
                }
                _ => {
                    self.active.insert(labels.clone(), alert.clone());
                }
            }
        }
        let (hold, keep_for) = (millis(self.hold), millis(self.keep_firing_for));
        let retention = millis(RESOLVED_RETENTION);
        let mut out = Vec::new();
        let mut active_or_pending = 0;
        let mut gone = Vec::new();
        for (labels, alert) in self.active.iter_mut() {
            if !current.contains_key(labels) {
                let mut keep_firing = false;
                if alert.state == State::Firing && keep_for > 0 {
                    let since = *alert.keep_firing_since.get_or_insert(ts);
                    keep_firing = ts - since < keep_for;
                }
                let expired = alert.resolved_at.is_some_and(|at| ts - at > retention);
                if alert.state == State::Pending || expired {
                    gone.push(labels.clone());
                }
                if alert.state != State::Inactive && !keep_firing {
                    alert.state = State::Inactive;
                    alert.resolved_at = Some(ts);
                }
                if !keep_firing {
                    continue;
                }
            } else {
                alert.keep_firing_since = None;
            }
            active_or_pending += 1;
            if alert.state == State::Pending && ts - alert.active_at >= hold {
                alert.state = State::Firing;
                alert.fired_at = Some(ts);
            }
            if !self.restored {
                continue;
            }
            let mut state_labels = alert.labels.clone();
            state_labels.insert("__name__".into(), ALERTS_METRIC.into());
            state_labels.insert("alertstate".into(), alert.state.as_str().into());
            out.push(Sample {
                labels: state_labels,
                value: 1.0,
            });
            let mut for_labels = alert.labels.clone();
            for_labels.insert("__name__".into(), ALERTS_FOR_STATE_METRIC.into());
            out.push(Sample {
                labels: for_labels,
                value: alert.active_at.div_euclid(1000) as f64,
            });
        }
        for labels in gone {
            self.active.remove(&labels);
        }
        if limit > 0 && active_or_pending > limit as usize {
            self.active.clear();
            return Err(EvalError::Limit {
                limit,
                active: active_or_pending,
            });
        }
        Ok(out)
    }

    /// The alerts to send at `ts` (Prometheus's `sendAlerts`): firing ones
    /// not sent for `resend_delay`, and resolved ones not sent since they
    /// resolved; each is marked sent and valid for four evaluations or
    /// resends, whichever is longer.
    pub fn to_send(
        &mut self,
        ts: i64,
        resend_delay: Duration,
        interval: Duration,
    ) -> Vec<Notification> {
        let delta = millis(resend_delay.max(interval));
        let mut out = Vec::new();
        for alert in self.active.values_mut() {
            if !alert.needs_sending(ts, resend_delay) {
                continue;
            }
            alert.last_sent_at = Some(ts);
            alert.valid_until = Some(ts + 4 * delta);
            out.push(Notification {
                labels: alert.labels.clone(),
                annotations: alert.annotations.clone(),
                starts_at: alert.fired_at,
                ends_at: alert.resolved_at.or(alert.valid_until),
                generator_url: String::new(),
            });
        }
        out
    }

    /// Marks its `for` state as waiting for a restore (`false`) or
    /// restored; see [`restore_active_at`](Self::restore_active_at).
    pub fn set_restored(&mut self, restored: bool) {
        self.restored = restored;
    }

    /// Takes the alerts `old` (this rule before a reload) held.
    pub fn keep_alerts_of(&mut self, old: AlertingRule) {
        self.active = old.active;
    }

    /// Sets when an alert became active, from its `ALERTS_FOR_STATE`
    /// sample after a restart (the caller decides the time, as
    /// Prometheus's restore does with its grace period): `false` when the
    /// rule holds no such alert.
    pub fn restore_active_at(&mut self, labels: &Labels, active_at: i64) -> bool {
        match self.active.get_mut(labels) {
            Some(alert) if alert.state != State::Inactive => {
                alert.active_at = active_at;
                true
            }
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::file::Alerting;

    const MIN: i64 = 60_000;

    fn rule(hold_min: u64, keep_min: u64) -> AlertingRule {
        let rule = Rule {
            name: "HighLoad".into(),
            expr: "load > 1".into(),
            labels: vec![
                ("severity".into(), "page".into()),
                (
                    "level".into(),
                    "{{ if gt $value 5.0 }}high{{ else }}low{{ end }}".into(),
                ),
            ],
            kind: RuleKind::Alerting(Alerting {
                hold: Duration::from_secs(hold_min * 60),
                keep_firing_for: Duration::from_secs(keep_min * 60),
                annotations: vec![(
                    "summary".into(),
                    "{{ $labels.host }} at {{ $value }}".into(),
                )],
            }),
            line: 1,
        };
        AlertingRule::new(&rule).unwrap()
    }

    fn sample(host: &str, value: f64) -> Sample {
        Sample {
            labels: [("__name__", "load"), ("host", host)]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
            value,
        }
    }

    fn states(rule: &AlertingRule) -> Vec<(String, State)> {
        rule.alerts()
            .map(|a| (a.labels["host"].clone(), a.state))
            .collect()
    }

    fn eval(rule: &mut AlertingRule, minute: i64, result: &[Sample]) -> Vec<Sample> {
        rule.eval(minute * MIN, result, &Context::default(), 0)
            .unwrap()
    }

    #[test]
    fn a_rule_waiting_for_its_restore_writes_no_state_samples() {
        let mut rule = rule(10, 0);
        rule.set_restored(false);
        assert!(eval(&mut rule, 0, &[sample("a", 7.0)]).is_empty());
        assert_eq!(states(&rule), [("a".to_owned(), State::Pending)]);
        rule.set_restored(true);
        assert_eq!(eval(&mut rule, 1, &[sample("a", 7.0)]).len(), 2);
    }

    #[test]
    fn an_alert_is_pending_until_its_for_then_fires() {
        let mut r = rule(5, 0);
        for minute in 0..5 {
            eval(&mut r, minute, &[sample("a", 2.0)]);
            assert_eq!(
                states(&r),
                vec![("a".into(), State::Pending)],
                "minute {minute}"
            );
        }
        let out = eval(&mut r, 5, &[sample("a", 3.0)]);
        let alert = r.alerts().next().unwrap();
        assert_eq!(alert.state, State::Firing);
        assert_eq!(alert.fired_at, Some(5 * MIN));
        assert_eq!(alert.active_at, 0);
        assert_eq!(alert.value, 3.0);
        assert_eq!(alert.annotations["summary"], "a at 3");
        assert_eq!(alert.labels["level"], "low");
        assert_eq!(alert.labels["alertname"], "HighLoad");
        assert!(!alert.labels.contains_key("__name__"));
        assert_eq!(out.len(), 2);
        assert_eq!(out[0].labels["__name__"], "ALERTS");
        assert_eq!(out[0].labels["alertstate"], "firing");
        assert_eq!(out[0].value, 1.0);
        assert_eq!(out[1].labels["__name__"], "ALERTS_FOR_STATE");
        assert_eq!(out[1].value, 0.0);
        // A label templated from the value makes another alert when the
        // value moves it, as in Prometheus: that one starts pending.
        eval(&mut r, 6, &[sample("a", 7.0)]);
        let alerts: Vec<_> = r
            .alerts()
            .map(|a| (a.labels["level"].as_str(), a.state))
            .collect();
        assert_eq!(
            alerts,
            vec![("high", State::Pending), ("low", State::Inactive)]
        );
    }

    #[test]
    fn an_alert_without_for_fires_at_once() {
        let mut r = rule(0, 0);
        eval(&mut r, 0, &[sample("a", 2.0)]);
        assert_eq!(states(&r), vec![("a".into(), State::Firing)]);
    }

    #[test]
    fn a_pending_alert_whose_series_leaves_is_dropped() {
        let mut r = rule(5, 0);
        eval(&mut r, 0, &[sample("a", 2.0)]);
        let out = eval(&mut r, 1, &[]);
        assert!(out.is_empty());
        assert_eq!(states(&r), vec![]);
        // Back: it starts over.
        eval(&mut r, 2, &[sample("a", 2.0)]);
        assert_eq!(r.alerts().next().unwrap().active_at, 2 * MIN);
    }

    #[test]
    fn a_firing_alert_resolves_and_is_kept_fifteen_minutes() {
        let mut r = rule(0, 0);
        eval(&mut r, 0, &[sample("a", 2.0)]);
        let out = eval(&mut r, 1, &[]);
        assert!(out.is_empty(), "no ALERTS sample once resolved");
        let alert = r.alerts().next().unwrap();
        assert_eq!(alert.state, State::Inactive);
        assert_eq!(alert.resolved_at, Some(MIN));
        eval(&mut r, 16, &[]);
        assert_eq!(r.alerts().count(), 1, "15 minutes are kept");
        eval(&mut r, 17, &[]);
        assert_eq!(r.alerts().count(), 0);
    }

    #[test]
    fn a_resolved_alert_that_comes_back_starts_anew() {
        let mut r = rule(5, 0);
        for minute in 0..6 {
            eval(&mut r, minute, &[sample("a", 2.0)]);
        }
        eval(&mut r, 6, &[]);
        eval(&mut r, 7, &[sample("a", 2.0)]);
        let alert = r.alerts().next().unwrap();
        assert_eq!(alert.state, State::Pending);
        assert_eq!(alert.active_at, 7 * MIN);
        assert_eq!(alert.resolved_at, None);
    }

    #[test]
    fn keep_firing_for_holds_a_firing_alert_after_its_series_leaves() {
        let mut r = rule(0, 3);
        eval(&mut r, 0, &[sample("a", 2.0)]);
        for minute in 1..4 {
            let out = eval(&mut r, minute, &[]);
            assert_eq!(
                states(&r),
                vec![("a".into(), State::Firing)],
                "minute {minute}"
            );
            assert_eq!(out.len(), 2);
        }
        eval(&mut r, 4, &[]);
        let alert = r.alerts().next().unwrap();
        assert_eq!(alert.state, State::Inactive);
        assert_eq!(alert.resolved_at, Some(4 * MIN));
        // Back while kept firing: the countdown starts over.
        let mut r = rule(0, 3);
        eval(&mut r, 0, &[sample("a", 2.0)]);
        eval(&mut r, 1, &[]);
        eval(&mut r, 2, &[sample("a", 2.0)]);
        assert_eq!(r.alerts().next().unwrap().keep_firing_since, None);
        eval(&mut r, 3, &[]);
        eval(&mut r, 5, &[]);
        assert_eq!(states(&r), vec![("a".into(), State::Firing)]);
        eval(&mut r, 6, &[]);
        assert_eq!(states(&r), vec![("a".into(), State::Inactive)]);
    }

    #[test]
    fn keep_firing_for_does_not_hold_a_pending_alert() {
        let mut r = rule(5, 10);
        eval(&mut r, 0, &[sample("a", 2.0)]);
        eval(&mut r, 1, &[]);
        assert_eq!(states(&r), vec![]);
    }

    #[test]
    fn series_that_become_one_alert_fail_the_evaluation() {
        let mut r = rule(0, 0);
        let mut other = sample("a", 1.0);
        other.labels.insert("__name__".into(), "load2".into());
        let err = r.eval(0, &[sample("a", 2.0), other], &Context::default(), 0);
        assert_eq!(err, Err(EvalError::SameLabelSet));
    }

    #[test]
    fn past_the_limit_every_alert_is_dropped() {
        let mut r = rule(0, 0);
        let err = r
            .eval(
                0,
                &[sample("a", 2.0), sample("b", 2.0)],
                &Context::default(),
                1,
            )
            .unwrap_err();
        assert_eq!(err.to_string(), "exceeded limit of 1 with 2 alerts");
        assert_eq!(r.alerts().count(), 0);
        assert!(r
            .eval(0, &[sample("a", 2.0)], &Context::default(), 1)
            .is_ok());
    }

    #[test]
    fn firing_alerts_are_sent_then_resent_after_the_delay_and_resolved_ones_once() {
        let (resend, interval) = (Duration::from_secs(60), Duration::from_secs(30));
        let mut r = rule(1, 0);
        eval(&mut r, 0, &[sample("a", 2.0)]);
        assert!(
            r.to_send(0, resend, interval).is_empty(),
            "pending is not sent"
        );
        eval(&mut r, 1, &[sample("a", 2.0)]);
        let sent = r.to_send(MIN, resend, interval);
        assert_eq!(sent.len(), 1);
        assert_eq!(sent[0].starts_at, Some(MIN));
        assert_eq!(sent[0].ends_at, Some(MIN + 4 * MIN));
        assert!(r.to_send(MIN + 30_000, resend, interval).is_empty());
        assert!(
            r.to_send(2 * MIN, resend, interval).is_empty(),
            "not past the delay"
        );
        assert_eq!(r.to_send(2 * MIN + 1, resend, interval).len(), 1);
        eval(&mut r, 3, &[]);
        let sent = r.to_send(3 * MIN, resend, interval);
        assert_eq!(sent.len(), 1);
        assert_eq!(
            sent[0].ends_at,
            Some(3 * MIN),
            "resolved: ends when it resolved"
        );
        assert_eq!(r.state(), State::Inactive);
    }

    #[test]
    fn a_restored_active_at_counts_toward_for() {
        let mut r = rule(10, 0);
        eval(&mut r, 100, &[sample("a", 2.0)]);
        let labels = r.alerts().next().unwrap().labels.clone();
        assert!(r.restore_active_at(&labels, 91 * MIN));
        eval(&mut r, 101, &[sample("a", 2.0)]);
        assert_eq!(states(&r), vec![("a".into(), State::Firing)]);
    }
}
