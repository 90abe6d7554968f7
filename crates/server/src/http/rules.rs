//! The rules' state in Prometheus's API format, for Grafana, `amtool` and
//! the UI: `GET /api/v1/rules` (groups, rules, health, alerts; filters
//! `type`, `rule_name[]`, `rule_group[]` (or `group_name[]`), `file[]`,
//! `exclude_alerts`), `GET /api/v1/alerts` (every pending or firing alert),
//! and `POST|PUT /-/reload` (reads the rule files again; a file that does
//! not check is refused with its line and the old rules keep running).

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use chingest_rules::alert::{Alert, Labels, State as AlertState};
use chingest_rules::group::{GroupState, RuleState};
use chingest_rules::manager::Manager;
use chingest_rules::RuleKind;
use serde_json::{json, Value};

use super::promql::{bad_data, success, PromRequest};
use super::AppState;
use crate::error::{ApiError, Flavor};

/// The rules, or 503 while the engine (and so the rules) is starting.
fn manager(state: &AppState) -> Result<&Manager, ApiError> {
    state.ingestor().map_err(|e| e.flavor(Flavor::Prometheus))?;
    state.rules.get().ok_or_else(|| {
        ApiError::new(StatusCode::SERVICE_UNAVAILABLE, "the rules are starting")
            .flavor(Flavor::Prometheus)
    })
}

/// Which rules a `/api/v1/rules` request asks for.
struct Filter {
    alerting: bool,
    recording: bool,
    names: Vec<String>,
    groups: Vec<String>,
    files: Vec<String>,
    exclude_alerts: bool,
}

impl Filter {
    fn of(request: &PromRequest) -> Result<Filter, ApiError> {
        let params = &request.params;
        let (alerting, recording) = match params.get("type") {
            None => (true, true),
            Some("alert") => (true, false),
            Some("record") => (false, true),
            Some(other) => return Err(bad_data(format!("unsupported type {other:?}"))),
        };
        let exclude_alerts = match params.get("exclude_alerts") {
            None | Some("false") => false,
            Some("true") => true,
            Some(other) => {
                return Err(bad_data(format!(
                    "parameter \"exclude_alerts\": invalid boolean {other:?}"
                )))
            }
        };
        let mut groups = params.all("rule_group[]");
        groups.extend(params.all("group_name[]"));
        Ok(Filter {
            alerting,
            recording,
            names: params.all("rule_name[]"),
            groups,
            files: params.all("file[]"),
            exclude_alerts,
        })
    }

    fn group(&self, group: &GroupState) -> bool {
        (self.groups.is_empty() || self.groups.contains(&group.name))
            && (self.files.is_empty() || self.files.contains(&group.file))
    }

    fn rule(&self, rule: &RuleState) -> bool {
        let kind = match rule.alerts {
            Some(_) => self.alerting,
            None => self.recording,
        };
        kind && (self.names.is_empty() || self.names.contains(&rule.rule.name))
    }

    /// Whether a group left without rules is left out: only when rules
    /// were filtered, as Prometheus does.
    fn drops_empty(&self) -> bool {
        !(self.alerting && self.recording && self.names.is_empty())
    }
}

/// `GET /api/v1/rules`.
pub(super) async fn rules(request: PromRequest) -> Result<Response, ApiError> {
    request.grant.require_read()?;
    let filter = Filter::of(&request)?;
    let manager = manager(&request.state)?;
    let mut groups = Vec::new();
    for view in manager.groups() {
        let group = view.state.read().unwrap();
        if !filter.group(&group) {
            continue;
        }
        let rules: Vec<Value> = group
            .rules
            .iter()
            .filter(|r| filter.rule(r))
            .map(|r| rule_json(r, filter.exclude_alerts))
            .collect();
        if rules.is_empty() && filter.drops_empty() {
            continue;
        }
        groups.push(json!({
            "name": group.name,
            "file": group.file,
            "rules": rules,
            "interval": group.interval.as_secs_f64(),
            "limit": group.limit,
            "evaluationTime": group.evaluation_time.as_secs_f64(),
            "lastEvaluation": time(group.last_evaluation),
        }));
    }
    Ok(success(json!({ "groups": groups })))
}

/// `GET /api/v1/alerts`.
pub(super) async fn alerts(request: PromRequest) -> Result<Response, ApiError> {
    request.grant.require_read()?;
    let manager = manager(&request.state)?;
    let mut alerts = Vec::new();
    for view in manager.groups() {
        let group = view.state.read().unwrap();
        for rule in &group.rules {
            if let Some(held) = &rule.alerts {
                alerts.extend(active(held.alerts()).map(alert_json));
            }
        }
    }
    Ok(success(json!({ "alerts": alerts })))
}

/// `POST|PUT /-/reload`: for a token of `auth_tokens`, as other
/// administration.
pub(super) async fn reload(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let grant = state.authorize(&headers, None, Flavor::V1)?;
    grant.require_admin()?;
    let manager = manager(&state)?;
    match manager.reload().await {
        Ok(()) => Ok(StatusCode::OK.into_response()),
        Err(err) => Err(ApiError::new(
            StatusCode::INTERNAL_SERVER_ERROR,
            format!("failed to reload config: {err}"),
        )),
    }
}

/// Pending and firing alerts (not the resolved ones still kept to be sent).
fn active<'a>(alerts: impl Iterator<Item = &'a Alert>) -> impl Iterator<Item = &'a Alert> {
    alerts.filter(|a| a.state != AlertState::Inactive)
}

fn rule_json(state: &RuleState, exclude_alerts: bool) -> Value {
    let rule = &state.rule;
    let status = &state.status;
    let labels: Labels = rule.labels.iter().cloned().collect();
    let mut out = json!({
        "name": rule.name,
        "query": rule.expr,
        "labels": labels,
        "health": status.health.as_str(),
        "evaluationTime": status.evaluation_time.as_secs_f64(),
        "lastEvaluation": time(status.last_evaluation),
    });
    if let Some(err) = &status.last_error {
        out["lastError"] = json!(err);
    }
    match (&rule.kind, &state.alerts) {
        (RuleKind::Alerting(alerting), Some(held)) => {
            let annotations: Labels = alerting.annotations.iter().cloned().collect();
            out["type"] = json!("alerting");
            out["state"] = json!(held.state().as_str());
            out["duration"] = json!(alerting.hold.as_secs_f64());
            out["keepFiringFor"] = json!(alerting.keep_firing_for.as_secs_f64());
            out["annotations"] = json!(annotations);
            if !exclude_alerts {
                out["alerts"] = active(held.alerts()).map(alert_json).collect();
            }
        }
        _ => out["type"] = json!("recording"),
    }
    out
}

fn alert_json(alert: &Alert) -> Value {
    let mut out = json!({
        "labels": alert.labels,
        "annotations": alert.annotations,
        "state": alert.state.as_str(),
        "activeAt": time(Some(alert.active_at)),
        "value": chingest_rules::gofmt::float_e(alert.value),
    });
    if let Some(since) = alert.keep_firing_since {
        out["keepFiringSince"] = json!(time(Some(since)));
    }
    out
}

/// A time (ms) as Go writes a `time.Time` in JSON (RFC 3339, UTC); never:
/// Go's zero time.
fn time(ms: Option<i64>) -> String {
    ms.and_then(chrono::DateTime::from_timestamp_millis)
        .map(|t| t.to_rfc3339_opts(chrono::SecondsFormat::AutoSi, true))
        .unwrap_or_else(|| "0001-01-01T00:00:00Z".to_owned())
}
