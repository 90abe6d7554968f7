//! The queries `pushit promql` asks: each a list of requests asked in
//! turn, how it is measured (clients for a time, one at a time, or whole
//! rounds), and what its speed on chingest must be. Shared by the default
//! query set (promql.rs), the dashboard's (promql_dashboard.rs) and the
//! age load's (promql_age.rs).

use super::server::Endpoints;

/// What a query's speed on chingest must be.
#[derive(Debug, Clone, Copy)]
pub(super) enum Target {
    /// QPS ≥ 0.5× the faster peer's, and p99 ≤ 20 ms.
    Panel,
    /// QPS ≥ 1× the faster peer without a response cache's (prometheus,
    /// victoriametrics-uncached), and p99 ≤ 10 ms.
    UncachedPanel,
    /// Speed ≥ 1× the faster peer's.
    FasterPeer,
    /// Speed ≥ 1× the faster peer's without a response cache
    /// (prometheus, victoriametrics-uncached).
    UncachedPeer,
    /// Speed ≥ 1× Prometheus's.
    Prometheus,
    /// Speed ≥ 1× VictoriaMetrics', its response cache on.
    VictoriaMetrics,
    /// Speed ≥ 1× VictoriaMetrics' without its response cache.
    VictoriaMetricsUncached,
}

impl Target {
    pub(super) fn text(self) -> &'static str {
        match self {
            Target::Panel => "≥ 0.5× faster peer, p99 ≤ 20 ms",
            Target::UncachedPanel => "≥ 1× faster peer with cache off, p99 ≤ 10 ms",
            Target::FasterPeer => "≥ 1× faster peer",
            Target::UncachedPeer => "≥ 1× faster peer with cache off",
            Target::Prometheus => "≥ 1× prometheus",
            Target::VictoriaMetrics => "≥ 1× victoriametrics (cached)",
            Target::VictoriaMetricsUncached => "≥ 1× victoriametrics-uncached",
        }
    }

    /// The peers whose speed it is measured against (the faster one
    /// present counts); `None`: every peer.
    pub(super) fn peers(self) -> Option<&'static [&'static str]> {
        match self {
            Target::Panel | Target::FasterPeer => None,
            Target::UncachedPanel | Target::UncachedPeer => {
                Some(&["prometheus", "victoriametrics-uncached"])
            }
            Target::Prometheus => Some(&["prometheus"]),
            Target::VictoriaMetrics => Some(&["victoriametrics"]),
            Target::VictoriaMetricsUncached => Some(&["victoriametrics-uncached"]),
        }
    }

    /// Whether chingest's `ratio` to those peers' speed and its `p99` meet
    /// it.
    pub(super) fn met(self, ratio: f64, p99_ms: f64) -> bool {
        match self {
            Target::Panel => ratio >= 0.5 && p99_ms <= 20.0,
            Target::UncachedPanel => ratio >= 1.0 && p99_ms <= 10.0,
            _ => ratio >= 1.0,
        }
    }
}

/// How a query is measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Load {
    /// By `--connections` clients for `--seconds`, each taking the query's
    /// next request (QPS).
    Concurrent,
    /// `--repeat` times one at a time (median latency).
    Repeated,
    /// Rounds of its requests one after another for `--seconds`, a round's
    /// at once on up to `--connections` connections (rounds per second,
    /// and each round's latency).
    Rounds,
}

/// One HTTP GET of a query.
#[derive(Clone)]
pub(super) struct Request {
    /// Under the server's root, e.g. `/api/v1/query_range`.
    pub(super) path: &'static str,
    pub(super) params: Vec<(&'static str, String)>,
}

impl Request {
    /// Its URL on `endpoints`, in chingest's database `db` if given.
    pub(super) fn url(
        &self,
        endpoints: &Endpoints,
        db: Option<&str>,
    ) -> anyhow::Result<reqwest::Url> {
        let params = self
            .params
            .iter()
            .map(|(name, value)| (*name, value.as_str()));
        let url = format!("{}{}", endpoints.http, self.path);
        Ok(reqwest::Url::parse_with_params(
            &url,
            params.chain(db.map(|db| ("db", db))),
        )?)
    }

    /// Its path and parameters, for the JSON rows.
    pub(super) fn text(&self) -> String {
        let mut text = self.path.to_owned();
        for (name, value) in &self.params {
            text.push_str(&format!(" {name}={value}"));
        }
        text
    }
}

/// One query of the set: requests asked in turn.
#[derive(Clone)]
pub(super) struct Query {
    pub(super) name: String,
    /// Request k of a measurement is `requests[k % len]`.
    pub(super) requests: Vec<Request>,
    /// Requests whose answers' sizes are checked before it is measured
    /// (the first ones), and under [`Load::Rounds`] the requests of a round.
    pub(super) round: usize,
    pub(super) load: Load,
    /// `None`: compared with the peers, with no target.
    pub(super) target: Option<Target>,
}

impl Query {
    /// One query of a single request, asked the way `load` says.
    pub(super) fn single(name: String, request: Request, load: Load, target: Target) -> Query {
        Query {
            name,
            requests: vec![request],
            round: 1,
            load,
            target: Some(target),
        }
    }

    /// The requests of its first round, for the JSON rows.
    pub(super) fn text(&self) -> String {
        let texts: Vec<String> = self
            .requests
            .iter()
            .take(self.round)
            .map(Request::text)
            .collect();
        texts.join(" ; ")
    }
}
