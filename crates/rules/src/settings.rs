//! How a server evaluates its rules: the defaults a group may override,
//! where rules read and write, and the alerting knobs Prometheus has as
//! flags. The server's `[rules]` section fills it (config/chingest.toml).

use std::time::Duration;

use crate::alert::Labels;

/// How rules are evaluated.
#[derive(Debug, Clone, PartialEq)]
pub struct Settings {
    /// A group's interval when it has none (Prometheus's
    /// `evaluation_interval`).
    pub evaluation_interval: Duration,
    /// How far back a group's queries look when it says nothing
    /// (Prometheus's `rule_query_offset`): room for late samples.
    pub query_offset: Duration,
    /// The database rules' expressions read.
    pub read_database: String,
    /// The database recorded series and `ALERTS` are written to.
    pub write_database: String,
    /// The retention policy both are read and written in.
    pub retention_policy: String,
    /// How queries are evaluated (lookback, timeout).
    pub options: chingest_promql::Options,
    /// How much one rule's query may read.
    pub limits: chingest_promql::Limits,
    /// Most groups evaluated at once; the others wait (and count the
    /// iterations they miss).
    pub max_concurrent_groups: usize,
    /// How often a firing alert is sent again (Prometheus's
    /// `--rules.alert.resend-delay`).
    pub resend_delay: Duration,
    /// An alert whose `for` ends within this after a restart waits this
    /// long (Prometheus's `--rules.alert.for-grace-period`).
    pub for_grace_period: Duration,
    /// How long a restart may have taken for `for` state to be restored
    /// (Prometheus's `--rules.alert.for-outage-tolerance`).
    pub for_outage_tolerance: Duration,
    /// In the cluster mode, the term of the lease that lets one node
    /// evaluate the rules: its death is noticed within two terms.
    pub lease_term: Duration,
    /// Templates' `$externalLabels`.
    pub external_labels: Labels,
    /// Templates' `$externalURL`, and alerts' `generatorURL` base.
    pub external_url: String,
}

impl Default for Settings {
    /// Prometheus's defaults; recorded series go to `prometheus`, where
    /// remote write puts Prometheus's own.
    fn default() -> Self {
        Settings {
            evaluation_interval: Duration::from_secs(60),
            query_offset: Duration::ZERO,
            read_database: "prometheus".into(),
            write_database: "prometheus".into(),
            retention_policy: "autogen".into(),
            options: chingest_promql::Options::default(),
            limits: chingest_promql::Limits::default(),
            max_concurrent_groups: 4,
            resend_delay: Duration::from_secs(60),
            for_grace_period: Duration::from_secs(600),
            for_outage_tolerance: Duration::from_secs(3600),
            lease_term: Duration::from_secs(30),
            external_labels: Labels::new(),
            external_url: String::new(),
        }
    }
}
