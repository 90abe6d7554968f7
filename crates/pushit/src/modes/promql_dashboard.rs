//! `pushit promql --dashboard`: the data and the requests of a refreshing
//! Grafana node-exporter dashboard. The data: `--hosts` hosts
//! `host-NN:9100` (`job="node"`), each with 66 of the series node-exporter
//! gives for a 4-CPU Linux box with two disks, three file systems, a
//! network interface and loopback (CPU seconds by mode, memory, file systems, network
//! and disk counters, load, boot time, uname), scraped every 15 s and
//! generated deterministically; the second host reboots halfway. The
//! requests: each panel and variable asked for a moving range, its request
//! k asking host k mod hosts with the range ending k steps of the panel
//! (15 s, or 60 s) before the data's end, round and round over the last
//! hour, so consecutive requests differ and every range ends in the data;
//! then all of them mixed, and whole refreshes. Every request is built
//! here, before any clock starts.

use super::promql_data::{Counter, Data, Kind, Labels, SplitMix, INTERVAL_MS, MODES};
use super::promql_query::{Load, Query, Request, Target};

/// CPUs of each host, a series per CPU and mode.
const CPUS: usize = 4;
/// Memory gauges that vary (of `/proc/meminfo`, less the totals): name,
/// mean and spread as shares of the host's memory.
const MEMORY: [(&str, f64, f64); 5] = [
    ("node_memory_MemAvailable_bytes", 0.5, 0.2),
    ("node_memory_MemFree_bytes", 0.2, 0.1),
    ("node_memory_Buffers_bytes", 0.03, 0.01),
    ("node_memory_Cached_bytes", 0.3, 0.1),
    ("node_memory_Active_bytes", 0.35, 0.1),
];
/// File systems: mount point, device, size in bytes.
const FILE_SYSTEMS: [(&str, &str, f64); 3] = [
    ("/", "/dev/sda1", 100e9),
    ("/home", "/dev/sda2", 500e9),
    ("/var", "/dev/sdb1", 200e9),
];
/// Network devices and the bytes a second each receives.
const NETWORK: [(&str, f64); 2] = [("eth0", 2e6), ("lo", 5e4)];
/// Disks and the bytes a second each reads.
const DISKS: [(&str, f64); 2] = [("sda", 1e6), ("sdb", 4e5)];
/// Positions of a moving range: an hour of scrapes.
const POSITIONS: usize = 240;

/// Host `host`'s `instance` label.
pub(super) fn instance(host: usize) -> String {
    format!("host-{host:02}:9100")
}

/// `hours` of 15 s scrapes of `hosts` hosts before the last full hour
/// before `now_ms`; host 1 reboots halfway (its counters restart from 0,
/// its boot time moves).
pub(super) fn generate(hosts: usize, hours: usize, now_ms: i64) -> Data {
    let mut data = Data::empty(hours, now_ms);
    let reboot = data.scrapes / 2;
    let (first_s, reboot_s) = (data.time_ms(0) / 1000, data.time_ms(reboot) / 1000);
    for host in 0..hosts {
        let rebooted = host == 1;
        let mut scraped = Host {
            data: &mut data,
            instance: instance(host),
            reboot: rebooted.then_some(reboot),
        };
        for cpu in 0..CPUS {
            for (mode, share) in MODES {
                let cpu = cpu.to_string();
                let labels = [("cpu", cpu.as_str()), ("mode", mode)];
                scraped.counter("node_cpu_seconds_total", &labels, share, 100.0);
            }
        }
        // 8, 16, 24 or 32 GiB.
        let memory = (8u64 << 30) as f64 * (1 + host % 4) as f64;
        let swap = (2u64 << 30) as f64;
        scraped.series("node_memory_MemTotal_bytes", &[], Kind::Gauge, |_| memory);
        scraped.series("node_memory_SwapTotal_bytes", &[], Kind::Gauge, |_| swap);
        for (name, mean, spread) in MEMORY {
            scraped.wandering(name, &[], memory * mean, memory * spread, 4096.0);
        }
        let name = "node_memory_SwapFree_bytes";
        scraped.wandering(name, &[], swap * 0.9, swap * 0.1, 4096.0);
        for (mountpoint, device, size) in FILE_SYSTEMS {
            let labels = [
                ("device", device),
                ("fstype", "ext4"),
                ("mountpoint", mountpoint),
            ];
            let name = "node_filesystem_size_bytes";
            scraped.series(name, &labels, Kind::Gauge, |_| size);
            let name = "node_filesystem_avail_bytes";
            scraped.wandering(name, &labels, size * 0.5, size * 0.2, 4096.0);
            let name = "node_filesystem_free_bytes";
            scraped.wandering(name, &labels, size * 0.55, size * 0.2, 4096.0);
        }
        for (device, received) in NETWORK {
            let labels = [("device", device)];
            for (name, per_second) in [
                ("node_network_receive_bytes_total", received),
                ("node_network_transmit_bytes_total", received / 2.0),
                ("node_network_receive_packets_total", received / 800.0),
                ("node_network_transmit_packets_total", received / 1_600.0),
            ] {
                scraped.counter(name, &labels, per_second, 1.0);
            }
        }
        for (device, read) in DISKS {
            let labels = [("device", device)];
            scraped.counter("node_disk_read_bytes_total", &labels, read, 1.0);
            scraped.counter("node_disk_written_bytes_total", &labels, read * 3.0, 1.0);
        }
        for (name, spread) in [
            ("node_load1", 1.0),
            ("node_load5", 0.6),
            ("node_load15", 0.3),
        ] {
            scraped.wandering(name, &[], 1.2, spread, 0.01);
        }
        // Up a day per host number before the first scrape; after its
        // reboot, since 30 s before the scrape that finds it restarted.
        let booted = (first_s - 86_400 * (host as i64 + 1)) as f64;
        let name = "node_boot_time_seconds";
        scraped.series(name, &[], Kind::Gauge, |scrape| {
            match rebooted && scrape >= reboot {
                true => (reboot_s - 30) as f64,
                false => booted,
            }
        });
        let nodename = format!("host-{host:02}");
        let uname = [
            ("machine", "x86_64"),
            ("nodename", nodename.as_str()),
            ("release", "6.1.0-18-amd64"),
            ("sysname", "Linux"),
        ];
        scraped.series("node_uname_info", &uname, Kind::Gauge, |_| 1.0);
    }
    data
}

/// Adds one host's series to the data.
struct Host<'a> {
    data: &'a mut Data,
    instance: String,
    /// The scrape at which it reboots.
    reboot: Option<usize>,
}

impl Host<'_> {
    /// A series of `kind` named `name` with the host's labels and `labels`,
    /// `value` giving its value at each scrape.
    fn series(
        &mut self,
        name: &str,
        labels: &[(&'static str, &str)],
        kind: Kind,
        value: impl FnMut(usize) -> f64,
    ) {
        let mut all: Labels = labels
            .iter()
            .map(|(label, value)| (*label, (*value).to_owned()))
            .chain([
                ("instance", self.instance.clone()),
                ("job", "node".to_owned()),
            ])
            .collect();
        all.sort();
        all.insert(0, ("__name__", name.to_owned()));
        self.data.push(all, kind, value);
    }

    /// A counter rising `per_second` a second on average, in steps of
    /// 1 / `ticks_per_unit`, restarting from 0 when the host reboots.
    fn counter(
        &mut self,
        name: &str,
        labels: &[(&'static str, &str)],
        per_second: f64,
        ticks_per_unit: f64,
    ) {
        let seconds_per_scrape = (INTERVAL_MS / 1000) as f64;
        let mut counter = Counter::new(
            self.data.series.len() as u64,
            per_second * seconds_per_scrape * ticks_per_unit,
            ticks_per_unit,
            self.reboot,
        );
        self.series(name, labels, Kind::Counter, |scrape| counter.at(scrape));
    }

    /// A gauge wandering within `mean` ± `spread`, in multiples of
    /// `quantum`.
    fn wandering(
        &mut self,
        name: &str,
        labels: &[(&'static str, &str)],
        mean: f64,
        spread: f64,
        quantum: f64,
    ) {
        let mut random = SplitMix(self.data.series.len() as u64);
        let mut at = 2.0 * random.next_unit() - 1.0;
        let per_unit = 1.0 / quantum;
        self.series(name, labels, Kind::Gauge, |_| {
            // A step of up to a fifth of the way to either edge: stays in
            // [-1, 1].
            at = 0.8 * at + 0.2 * (2.0 * random.next_unit() - 1.0);
            ((mean + spread * at) * per_unit).round() / per_unit
        });
    }
}

/// What a panel's request asks of: its range (`seconds` before `end`,
/// every `step`) and the window of its `rate`s (`$__rate_interval`).
pub(super) struct Window {
    pub(super) end: i64,
    pub(super) seconds: i64,
    pub(super) step: i64,
    pub(super) rate: String,
}

/// What a panel sends.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Shape {
    /// `query_range` over its window.
    Range,
    /// An instant query at the window's end.
    Instant,
    /// Series or label values over the window (Grafana sends the
    /// dashboard's range with its variables).
    Variable,
}

/// One panel or variable of the dashboard.
pub(super) struct Panel {
    /// What it shows, e.g. `cpu busy: 1 host`.
    pub(super) name: &'static str,
    pub(super) target: Target,
    pub(super) shape: Shape,
    /// Its range on the dashboard, s.
    seconds: i64,
    /// Seconds between the points of its range (the scrape interval for an
    /// instant query or a variable); its request k's range ends k steps
    /// before the data's end, round and round over the last hour. Grafana
    /// moves a range's ends to multiples of its step before it asks, and
    /// VictoriaMetrics does so itself when it may cache the answer: ends
    /// 15 s apart would be answered 60 s apart there, on a different
    /// number of points.
    step: i64,
    /// Its request for an instance over a window.
    pub(super) ask: fn(&str, &Window) -> Request,
}

impl Panel {
    /// Its name with its range and step, e.g. `cpu busy: 1 host, 1 h @ 15 s`.
    pub(super) fn title(&self, seconds: i64, step: i64) -> String {
        match self.shape {
            Shape::Range => format!("{}, {} @ {}", self.name, span(seconds), span(step)),
            Shape::Instant => format!("{}, instant", self.name),
            Shape::Variable => format!("{}, {}", self.name, span(seconds)),
        }
    }

    /// Its request k, of [`rotation`] before they repeat: host k mod
    /// `hosts`, the range ending k steps back in the hour that ends
    /// `back_s` before the end of `data`.
    fn request(&self, data: &Data, hosts: usize, back_s: i64, k: usize) -> Request {
        let back = back_s + (k as i64 * self.step) % 3_600;
        let window = Window {
            end: data.end_ms() / 1000 - back,
            seconds: self.seconds,
            step: self.step,
            rate: "5m".to_owned(),
        };
        (self.ask)(&instance(k % hosts), &window)
    }
}

/// `seconds` as a panel's title says it: `15 s`, `6 h`, `7 d`.
pub(super) fn span(seconds: i64) -> String {
    match seconds {
        s if s < 3_600 => format!("{s} s"),
        s if s % 86_400 == 0 && s > 86_400 => format!("{} d", s / 86_400),
        s => format!("{} h", s / 3_600),
    }
}

/// The dashboard's panels and variables.
pub(super) const PANELS: [Panel; 8] = [
    Panel {
        name: "cpu busy: 1 host",
        target: Target::UncachedPanel,
        shape: Shape::Range,
        seconds: 3_600,
        step: 15,
        ask: |instance, window| {
            let selector =
                format!("node_cpu_seconds_total{{mode=\"idle\",instance=\"{instance}\"}}");
            let rate = &window.rate;
            let query = format!("100 - avg by (instance)(rate({selector}[{rate}]))*100");
            range(query, window)
        },
    },
    Panel {
        name: "memory used: 1 host",
        target: Target::UncachedPanel,
        shape: Shape::Range,
        seconds: 3_600,
        step: 15,
        ask: |instance, window| {
            let of = |metric: &str| format!("{metric}{{instance=\"{instance}\"}}");
            let query = format!(
                "{} - {}",
                of("node_memory_MemTotal_bytes"),
                of("node_memory_MemAvailable_bytes")
            );
            range(query, window)
        },
    },
    Panel {
        name: "gauge node_load1: 1 host",
        target: Target::UncachedPanel,
        shape: Shape::Range,
        seconds: 6 * 3_600,
        step: 60,
        ask: |instance, window| {
            let query = format!("node_load1{{instance=\"{instance}\"}}");
            range(query, window)
        },
    },
    Panel {
        name: "stat: / available share",
        target: Target::UncachedPanel,
        shape: Shape::Instant,
        seconds: 0,
        step: 15,
        ask: |instance, window| {
            let of = |metric: &str| format!("{metric}{{instance=\"{instance}\",mountpoint=\"/\"}}");
            let query = format!(
                "{} / {}",
                of("node_filesystem_avail_bytes"),
                of("node_filesystem_size_bytes")
            );
            Request {
                path: "/api/v1/query",
                params: vec![("query", query), ("time", window.end.to_string())],
            }
        },
    },
    Panel {
        name: "network received: 1 host",
        target: Target::UncachedPanel,
        shape: Shape::Range,
        seconds: 3_600,
        step: 15,
        ask: |instance, window| {
            let selector = format!(
                "node_network_receive_bytes_total{{instance=\"{instance}\",device!=\"lo\"}}"
            );
            range(format!("rate({selector}[{}])", window.rate), window)
        },
    },
    Panel {
        name: "fleet: cpu by host",
        target: Target::VictoriaMetricsUncached,
        shape: Shape::Range,
        seconds: 6 * 3_600,
        step: 60,
        ask: |_, window| {
            let query = format!(
                "sum by (instance)(rate(node_cpu_seconds_total{{mode!=\"idle\"}}[{}]))",
                window.rate
            );
            range(query, window)
        },
    },
    Panel {
        name: "variable: instance values",
        target: Target::Prometheus,
        shape: Shape::Variable,
        seconds: 3_600,
        step: 15,
        ask: |_, window| {
            let uname = "node_uname_info{job=\"node\"}".to_owned();
            variable("/api/v1/label/instance/values", uname, window)
        },
    },
    Panel {
        name: "variable: series of 1 host",
        target: Target::Prometheus,
        shape: Shape::Variable,
        seconds: 3_600,
        step: 15,
        ask: |instance, window| {
            let uname = format!("node_uname_info{{instance=\"{instance}\"}}");
            variable("/api/v1/series", uname, window)
        },
    },
];

/// `query_range` of `query` over `window` (its step as Grafana sends it:
/// a number of seconds).
fn range(query: String, window: &Window) -> Request {
    Request {
        path: "/api/v1/query_range",
        params: vec![
            ("query", query),
            ("start", (window.end - window.seconds).to_string()),
            ("end", window.end.to_string()),
            ("step", window.step.to_string()),
        ],
    }
}

/// `path` (series or label values) of `selector` over `window`: the
/// dashboard's range, which Grafana sends with its variables.
fn variable(path: &'static str, selector: String, window: &Window) -> Request {
    Request {
        path,
        params: vec![
            ("match[]", selector),
            ("start", (window.end - window.seconds).to_string()),
            ("end", window.end.to_string()),
        ],
    }
}

/// Requests a panel has before they repeat: every host at each of the 240
/// scrapes of an hour.
pub(super) fn rotation(hosts: usize) -> usize {
    let gcd = |mut a: usize, mut b: usize| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    POSITIONS / gcd(POSITIONS, hosts) * hosts
}

/// The dashboard's queries over `data` of `hosts` hosts, their ranges
/// moved `back_hours` back from its end: each panel and variable by
/// `--connections` clients; all of them mixed (request k is panel k mod
/// 8's request k / 8); whole refreshes (refresh r asks every panel's
/// request r at once).
pub(super) fn queries(data: &Data, hosts: usize, back_hours: usize) -> Vec<Query> {
    let back_s = back_hours as i64 * 3_600;
    let rotation = rotation(hosts);
    let mut queries: Vec<Query> = PANELS
        .iter()
        .map(|panel| Query {
            name: panel.title(panel.seconds, panel.step),
            requests: (0..rotation)
                .map(|k| panel.request(data, hosts, back_s, k))
                .collect(),
            round: 1,
            load: Load::Concurrent,
            target: Some(panel.target),
        })
        .collect();
    let every_panel = || {
        (0..rotation)
            .flat_map(|k| {
                PANELS
                    .iter()
                    .map(move |panel| panel.request(data, hosts, back_s, k))
            })
            .collect()
    };
    queries.push(Query {
        name: format!("mixed: the {} above in turn", PANELS.len()),
        requests: every_panel(),
        round: PANELS.len(),
        load: Load::Concurrent,
        target: None,
    });
    queries.push(Query {
        name: format!("refresh: the {} above at once, per refresh", PANELS.len()),
        requests: every_panel(),
        round: PANELS.len(),
        load: Load::Rounds,
        target: Some(Target::VictoriaMetrics),
    });
    queries
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW_MS: i64 = 1_700_000_123_456;

    fn label<'a>(labels: &'a Labels, name: &str) -> &'a str {
        labels
            .iter()
            .find(|(label, _)| *label == name)
            .map_or("", |(_, value)| value.as_str())
    }

    #[test]
    fn every_host_has_66_series() {
        let data = generate(3, 1, NOW_MS);
        assert_eq!(data.series.len(), 3 * 66);
        for host in 0..3 {
            let of_host = data
                .series
                .iter()
                .filter(|labels| label(labels, "instance") == instance(host))
                .count();
            assert_eq!(of_host, 66);
        }
        let cpu = |labels: &Labels| label(labels, "__name__") == "node_cpu_seconds_total";
        assert_eq!(data.series.iter().filter(|l| cpu(l)).count(), 3 * 32);
        assert_eq!(data.samples(), 3 * 66 * 240);
        // Labels sorted by name after `__name__`.
        for labels in &data.series {
            assert_eq!(labels[0].0, "__name__");
            assert!(
                labels[1..].windows(2).all(|w| w[0].0 < w[1].0),
                "{labels:?}"
            );
        }
    }

    #[test]
    fn counters_only_fall_when_the_second_host_reboots() {
        let data = generate(3, 2, NOW_MS);
        let counters: Vec<&str> = data
            .metrics
            .iter()
            .filter(|(_, kind)| *kind == Kind::Counter)
            .map(|(metric, _)| metric.as_str())
            .collect();
        assert_eq!(counters.len(), 7);
        for (series, labels) in data.series.iter().enumerate() {
            if !counters.contains(&label(labels, "__name__")) {
                continue;
            }
            let rebooted = label(labels, "instance") == instance(1);
            for scrape in 1..data.scrapes {
                let rises = data.value(series, scrape) > data.value(series, scrape - 1);
                let reboot = rebooted && scrape == data.scrapes / 2;
                assert_eq!(rises, !reboot, "{labels:?} {scrape}");
            }
        }
    }

    #[test]
    fn the_same_shape_makes_the_same_requests() {
        let one = generate(2, 2, NOW_MS);
        let two = generate(2, 2, NOW_MS);
        assert_eq!(one.requests(), two.requests());
        let texts = |data: &Data| -> Vec<String> {
            queries(data, 2, 0)
                .iter()
                .flat_map(|query| query.requests.iter().map(Request::text))
                .collect()
        };
        assert_eq!(texts(&one), texts(&two));
    }

    #[test]
    fn moving_ends_stay_in_the_data_and_take_turns() {
        let data = generate(7, 3, NOW_MS);
        let (first_s, last_s) = (data.time_ms(0) / 1000, data.end_ms() / 1000);
        assert_eq!(
            queries(&data, 7, 2)[2].requests[0].params[1].1,
            (last_s - 2 * 3_600 - 6 * 3_600).to_string(),
            "moved back 2 h"
        );
        let queries = queries(&data, 7, 0);
        assert_eq!(queries.len(), 10);
        let names: Vec<&str> = queries.iter().map(|query| query.name.as_str()).collect();
        assert_eq!(
            names[..8],
            [
                "cpu busy: 1 host, 1 h @ 15 s",
                "memory used: 1 host, 1 h @ 15 s",
                "gauge node_load1: 1 host, 6 h @ 60 s",
                "stat: / available share, instant",
                "network received: 1 host, 1 h @ 15 s",
                "fleet: cpu by host, 6 h @ 60 s",
                "variable: instance values, 1 h",
                "variable: series of 1 host, 1 h",
            ],
            "the names benchmarks.md reports under"
        );
        for (query, panel) in queries.iter().zip(&PANELS) {
            // Every host at every position.
            assert_eq!(query.requests.len(), 240 * 7);
            let ends: Vec<i64> = query
                .requests
                .iter()
                .map(|request| {
                    let (_, end) = request
                        .params
                        .iter()
                        .find(|(name, _)| *name == "end" || *name == "time")
                        .expect("an end");
                    end.parse().expect("seconds")
                })
                .collect();
            assert!(ends.iter().all(|end| (first_s..=last_s).contains(end)));
            assert!(
                ends.iter().all(|end| end % panel.step == 0),
                "{}",
                panel.name
            );
            assert!(ends.windows(2).all(|w| w[0] != w[1]), "{}", panel.name);
            assert_eq!((ends[0], ends[1]), (last_s, last_s - panel.step));
            assert_eq!(ends[240], last_s);
        }
        // The cpu panel asks host k mod 7.
        let cpu = &queries[0].requests;
        assert!(
            cpu[9].params[0].1.contains("host-02:9100"),
            "{}",
            cpu[9].text()
        );
        // Mixed and refreshes: request r × 8 + p is panel p's request r.
        for query in &queries[8..] {
            assert_eq!(query.round, 8);
            assert_eq!(
                query.requests[3 * 8 + 5].text(),
                queries[5].requests[3].text()
            );
        }
    }
}
