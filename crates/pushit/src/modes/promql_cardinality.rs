//! `pushit promql --cardinality N`: what Grafana asks of a Kubernetes-sized
//! fleet. The data: `N` series of one metric,
//! `http_requests_total{code,instance,job,namespace,path,pod}` — two
//! paths per pod (so `N / 2` pods, each its own `instance`), 20 jobs, 100
//! namespaces, codes mostly `200` and a fifth `500` — scraped every 15 s
//! for the last five minutes and generated deterministically. The
//! requests: a Grafana variable (the pods of a namespace), a series
//! lookup and a panel of one pod, a fleet-wide `sum by (path)` of the
//! `500`s, and the metric browser's `labels` and `__name__` values; the
//! variable, lookup and panel each rotate over namespaces or pods, so
//! consecutive requests differ. Every request is built here, before any
//! clock starts.

use super::promql_data::{Counter, Data, Kind, Labels, INTERVAL_MS};
use super::promql_query::{Load, Query, Request, Target};

/// The metric.
pub(super) const METRIC: &str = "http_requests_total";
/// Scrapes of every series, 15 s apart: five minutes.
const SCRAPES: usize = 20;
const PATHS: [&str; 2] = ["/api/v1/orders", "/api/v1/users"];
/// A series' code, by a hash of its pod and path: a fifth are `500`.
const CODES: [&str; 5] = ["200", "200", "200", "404", "500"];
const NAMESPACES: usize = 100;
const JOBS: usize = 20;
/// Pods a rotating request takes turns over before it repeats.
const ROTATION: usize = 1_000;

fn pod(p: usize) -> String {
    // A ReplicaSet's hash and a pod's suffix, as Kubernetes names them.
    let hash = (p as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 28;
    format!("app-{:02}-{:09x}-{p:06}", p % JOBS, hash & 0xf_ffff_ffff)
}

fn namespace(n: usize) -> String {
    format!("ns-{n:03}")
}

/// `series` series (rounded up to whole pods) of five minutes of scrapes
/// ending at the last multiple of 15 s before `now_ms`.
pub(super) fn generate(series: usize, now_ms: i64) -> Data {
    let mut data = Data::ending(SCRAPES, now_ms / INTERVAL_MS * INTERVAL_MS);
    for p in 0..series.div_ceil(PATHS.len()) {
        let instance = format!(
            "10.{}.{}.{}:8080",
            (p >> 16) & 0xff,
            (p >> 8) & 0xff,
            p & 0xff
        );
        for (i, path) in PATHS.iter().enumerate() {
            let hash = (p * PATHS.len() + i) as u64;
            let code =
                CODES[(hash.wrapping_mul(0x2545_f491_4f6c_dd1d) >> 61) as usize % CODES.len()];
            let labels: Labels = vec![
                ("__name__", METRIC.to_owned()),
                ("code", code.to_owned()),
                ("instance", instance.clone()),
                ("job", format!("app-{:02}", p % JOBS)),
                ("namespace", namespace(p % NAMESPACES)),
                ("path", (*path).to_owned()),
                ("pod", pod(p)),
            ];
            let mut counter = Counter::new(data.series.len() as u64, 30.0, 1.0, None);
            data.push(labels, Kind::Counter, |scrape| counter.at(scrape));
        }
    }
    data
}

/// A request over the last hour before the data's end (as Grafana sends
/// a variable's or a lookup's range).
fn last_hour(path: &'static str, params: Vec<(&'static str, String)>, end: i64) -> Request {
    let mut params = params;
    params.push(("start", (end - 3_600).to_string()));
    params.push(("end", end.to_string()));
    Request { path, params }
}

/// A range query of the data's last four minutes at 15 s.
fn panel(query: String, end: i64) -> Request {
    Request {
        path: "/api/v1/query_range",
        params: vec![
            ("query", query),
            ("start", (end - 240).to_string()),
            ("end", end.to_string()),
            ("step", "15".to_owned()),
        ],
    }
}

/// The pods a rotating request takes turns over: spread over the fleet.
fn rotation(data: &Data) -> Vec<String> {
    let pods = data.series.len() / PATHS.len();
    (0..ROTATION.min(pods))
        .map(|k| pod(k * pods / ROTATION.min(pods)))
        .collect()
}

/// The requests Grafana sends over such a fleet.
pub(super) fn queries(data: &Data) -> Vec<Query> {
    let end = data.end_ms() / 1000;
    let pods = rotation(data);
    let rotating = |name: &str, requests: Vec<Request>, target| Query {
        name: name.to_owned(),
        round: 1,
        requests,
        load: Load::Concurrent,
        target: Some(target),
    };
    let variable = (0..NAMESPACES)
        .map(|n| {
            let selector = format!("{METRIC}{{namespace=\"{}\"}}", namespace(n));
            last_hour("/api/v1/label/pod/values", vec![("match[]", selector)], end)
        })
        .collect();
    let lookups = pods
        .iter()
        .map(|pod| {
            let selector = format!("{METRIC}{{pod=\"{pod}\"}}");
            last_hour("/api/v1/series", vec![("match[]", selector)], end)
        })
        .collect();
    let panels = pods
        .iter()
        .map(|pod| panel(format!("rate({METRIC}{{pod=\"{pod}\"}}[1m])"), end))
        .collect();
    let uncached = Target::VictoriaMetricsUncached;
    vec![
        rotating("variable: pods of a namespace", variable, uncached),
        rotating("series: one pod", lookups, uncached),
        rotating("panel: one pod's rate, 4 min @ 15 s", panels, uncached),
        Query::single(
            "sum by (path) (rate) of the 500s, 4 min @ 15 s".to_owned(),
            panel(
                format!("sum by (path) (rate({METRIC}{{code=\"500\"}}[1m]))"),
                end,
            ),
            Load::Repeated,
            uncached,
        ),
        Query::single(
            "labels".to_owned(),
            last_hour("/api/v1/labels", Vec::new(), end),
            Load::Repeated,
            uncached,
        ),
        Query::single(
            "label values: __name__".to_owned(),
            last_hour("/api/v1/label/__name__/values", Vec::new(), end),
            Load::Repeated,
            uncached,
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pods_carry_two_series_of_distinct_labels() {
        let data = generate(1_000, 1_700_000_000_000);
        assert_eq!(data.series.len(), 1_000);
        assert_eq!(data.samples(), 1_000 * SCRAPES);
        let mut all: Vec<&Labels> = data.series.iter().collect();
        all.sort();
        all.dedup();
        assert_eq!(all.len(), 1_000, "every series its own labels");
        let pods: std::collections::HashSet<&str> = data
            .series
            .iter()
            .map(|labels| labels[6].1.as_str())
            .collect();
        assert_eq!(pods.len(), 500);
        let errors = data.series.iter().filter(|l| l[1].1 == "500").count();
        assert!((100..300).contains(&errors), "{errors} series of 500s");
    }

    #[test]
    fn rotating_requests_differ() {
        let data = generate(10_000, 1_700_000_000_000);
        for query in &queries(&data)[..3] {
            let first = query.requests[0].text();
            assert!(query.requests.len() > 1);
            assert!(query.requests[1..].iter().all(|r| r.text() != first));
        }
    }
}
