//! `[rules]`: Prometheus rule files evaluated here, where recorded series
//! go, and the Alertmanagers alerts are sent to (docs/rules.md), as
//! `chingest_rules::Settings` takes them.

use std::path::PathBuf;
use std::time::Duration;

use serde::Deserialize;

use super::millis;

/// Prometheus's recording and alerting rules: which files, and how they
/// are evaluated (docs/rules.md; `chingest_rules::Settings`).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RulesSection {
    /// Rule files, as globs (`rules/*.yml`); a relative one is read from
    /// the configuration file's directory (`base_dir`).
    pub files: Vec<String>,
    /// Where relative `files` are: the configuration file's directory
    /// (the working directory without one). Not a key.
    #[serde(skip)]
    pub base_dir: PathBuf,
    /// A group's interval when it has none, in ms.
    #[serde(rename = "evaluation_interval_ms", with = "millis")]
    pub evaluation_interval: Duration,
    /// How far back a group's queries look when it says nothing, in ms.
    #[serde(rename = "query_offset_ms", with = "millis")]
    pub query_offset: Duration,
    /// The database recorded series and `ALERTS` are written to (rules
    /// read `[promql] default_database`).
    pub database: String,
    /// Most groups evaluated at once.
    pub max_concurrent_groups: usize,
    /// How often a firing alert is sent again, in ms.
    #[serde(rename = "resend_delay_ms", with = "millis")]
    pub resend_delay: Duration,
    /// An alert whose `for` would end within this after a restart waits
    /// this long, in ms.
    #[serde(rename = "for_grace_period_ms", with = "millis")]
    pub for_grace_period: Duration,
    /// The longest outage after which `for` state is restored, in ms.
    #[serde(rename = "for_outage_tolerance_ms", with = "millis")]
    pub for_outage_tolerance: Duration,
    /// In the `clickhouse` storage mode, the term of the lease that lets
    /// one node evaluate the rules, in ms: a dead node's rules are taken
    /// over within two terms.
    #[serde(rename = "lease_term_ms", with = "millis")]
    pub lease_term: Duration,
    /// Templates' `$externalURL` and the base of alerts' links; empty:
    /// `http://` and the HTTP address.
    pub external_url: String,
    /// Templates' `$externalLabels`, also added to alerts sent that lack
    /// them.
    pub external_labels: std::collections::BTreeMap<String, String>,
    /// Alertmanagers alerts are sent to (`[[rules.alertmanagers]]`).
    pub alertmanagers: Vec<AlertmanagerSection>,
    /// Most alerts waiting to be sent; past it the oldest are dropped.
    pub notification_queue_capacity: usize,
}

/// An Alertmanager: `url` (`http://host:9093`) and `timeout_ms` (10 s).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlertmanagerSection {
    /// Its base URL; alerts are posted to `/api/v2/alerts` under it.
    pub url: String,
    /// How long a post may take, in ms.
    #[serde(
        rename = "timeout_ms",
        with = "millis",
        default = "alertmanager_timeout"
    )]
    pub timeout: Duration,
}

/// Prometheus's default for a post to an Alertmanager.
fn alertmanager_timeout() -> Duration {
    Duration::from_secs(10)
}

impl Default for RulesSection {
    fn default() -> Self {
        let settings = chingest_rules::Settings::default();
        RulesSection {
            files: Vec::new(),
            base_dir: PathBuf::from("."),
            evaluation_interval: settings.evaluation_interval,
            query_offset: settings.query_offset,
            database: settings.write_database,
            max_concurrent_groups: settings.max_concurrent_groups,
            resend_delay: settings.resend_delay,
            for_grace_period: settings.for_grace_period,
            for_outage_tolerance: settings.for_outage_tolerance,
            lease_term: settings.lease_term,
            external_url: String::new(),
            external_labels: Default::default(),
            alertmanagers: Vec::new(),
            // Prometheus's --alertmanager.notification-queue-capacity.
            notification_queue_capacity: 10_000,
        }
    }
}

impl RulesSection {
    /// Checks the values and reads every rule file, as Prometheus refuses
    /// to start on one that does not check.
    pub(super) fn validate(&self) -> Result<(), String> {
        let r = self;
        let invalid = |msg: &str| Err(msg.to_owned());
        if r.evaluation_interval.is_zero() || r.max_concurrent_groups == 0 || r.lease_term.is_zero()
        {
            return invalid(
                "rules.evaluation_interval_ms, rules.max_concurrent_groups and rules.lease_term_ms \
                 must be positive",
            );
        }
        if r.database.is_empty() {
            return invalid("rules.database must not be empty");
        }
        for am in &r.alertmanagers {
            if !(am.url.starts_with("http://") || am.url.starts_with("https://")) {
                return Err(format!(
                    "rules.alertmanagers: url {:?} must start with http:// or https://",
                    am.url
                ));
            }
            if am.timeout.is_zero() {
                return invalid("rules.alertmanagers: timeout_ms must be positive");
            }
        }
        // As Prometheus refuses to start: every file read and checked.
        chingest_rules::load::load(&r.files, &r.base_dir).map_err(|err| err.to_string())?;
        Ok(())
    }
}
