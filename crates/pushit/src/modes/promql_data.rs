//! The data `pushit promql` serves: scrapes 15 s apart ending on the hour,
//! each series' values generated deterministically ([`Data`], with the
//! counter both generators use), the remote-write requests that carry them
//! (to chingest and VictoriaMetrics alike), and the default data set: a day
//! of `node_cpu_seconds_total{cpu,instance,job,mode}` counters.
//! `--dashboard`'s richer node-exporter set is made in promql_dashboard.rs.

use chingest_proto::prometheus::{Label, Sample, TimeSeries, WriteRequest};
use prost::Message;

/// Every series' metric.
pub(super) const METRIC: &str = "node_cpu_seconds_total";
/// Scrape interval, ms.
pub(super) const INTERVAL_MS: i64 = 15_000;
pub(super) const HOUR_MS: i64 = 3_600_000;
/// Connections the loads are written over.
pub(super) const LOAD_CONNECTIONS: usize = 4;
/// Series per remote-write request (an hour of samples each).
const SERIES_PER_REQUEST: usize = 50;
const JOBS: [&str; 8] = [
    "web", "api", "db", "cache", "batch", "queue", "auth", "search",
];
/// node-exporter's CPU modes on Linux, each with its share of the time.
pub(super) const MODES: [(&str, f64); 8] = [
    ("idle", 0.6),
    ("iowait", 0.02),
    ("irq", 0.005),
    ("nice", 0.01),
    ("softirq", 0.015),
    ("steal", 0.01),
    ("system", 0.08),
    ("user", 0.26),
];

/// Remote-write requests: snappy-compressed body, samples.
pub(super) type Requests = Vec<(Vec<u8>, usize)>;

/// A series' labels, `__name__` first, then by name.
pub(super) type Labels = Vec<(&'static str, String)>;

/// What a metric is, for the `# TYPE` lines of OpenMetrics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Counter,
    Gauge,
}

/// The generated scrapes.
pub(super) struct Data {
    pub(super) series: Vec<Labels>,
    /// Each metric (`__name__`) and its kind, in the order first pushed.
    pub(super) metrics: Vec<(String, Kind)>,
    /// Scrapes of every series.
    pub(super) scrapes: usize,
    end_ms: i64,
    /// `values[series * scrapes + scrape]`.
    values: Vec<f64>,
}

impl Data {
    /// No series yet: `hours` of scrapes before the last full hour before
    /// `now_ms`.
    pub(super) fn empty(hours: usize, now_ms: i64) -> Data {
        Data {
            series: Vec::new(),
            metrics: Vec::new(),
            scrapes: hours * (HOUR_MS / INTERVAL_MS) as usize,
            end_ms: now_ms / HOUR_MS * HOUR_MS,
            values: Vec::new(),
        }
    }

    /// No series yet: `scrapes` scrapes, the last at `end_ms`.
    pub(super) fn ending(scrapes: usize, end_ms: i64) -> Data {
        Data {
            scrapes,
            end_ms,
            ..Data::empty(0, 0)
        }
    }

    /// Adds a series of `kind` with `labels`; `value` gives its value at
    /// each scrape, in order.
    pub(super) fn push(&mut self, labels: Labels, kind: Kind, value: impl FnMut(usize) -> f64) {
        let name = labels.first().map_or("", |(_, name)| name.as_str());
        if !self.metrics.iter().any(|(metric, _)| metric == name) {
            self.metrics.push((name.to_owned(), kind));
        }
        self.values.extend((0..self.scrapes).map(value));
        self.series.push(labels);
    }

    /// `jobs` × `instances` × `cpus` × 8 modes series over `hours` before
    /// the last full hour before `now_ms`. Counters of CPU seconds: each
    /// scrape adds 15 s × the mode's share × a pseudo-random 0.5–1.5, in
    /// ticks of 10 ms; every job's second instance reboots (its counters
    /// restart from 0) halfway.
    pub(super) fn generate(
        jobs: usize,
        instances: usize,
        cpus: usize,
        hours: usize,
        now_ms: i64,
    ) -> Data {
        let mut data = Data::empty(hours, now_ms);
        let reboot = data.scrapes / 2;
        for job in &JOBS[..jobs.min(JOBS.len())] {
            for instance in 0..instances {
                for cpu in 0..cpus {
                    for (mode, share) in MODES {
                        let mut counter = Counter::new(
                            data.series.len() as u64,
                            1_500.0 * share,
                            100.0,
                            (instance == 1).then_some(reboot),
                        );
                        let labels = vec![
                            ("__name__", METRIC.to_owned()),
                            ("cpu", cpu.to_string()),
                            ("instance", format!("{job}-{instance}:9100")),
                            ("job", (*job).to_owned()),
                            ("mode", mode.to_owned()),
                        ];
                        data.push(labels, Kind::Counter, |scrape| counter.at(scrape));
                    }
                }
            }
        }
        data
    }

    /// The time of the last scrape, ms: on the hour.
    pub(super) fn end_ms(&self) -> i64 {
        self.end_ms
    }

    /// The time of `scrape`, ms.
    pub(super) fn time_ms(&self, scrape: usize) -> i64 {
        self.end_ms - (self.scrapes - 1 - scrape) as i64 * INTERVAL_MS
    }

    pub(super) fn value(&self, series: usize, scrape: usize) -> f64 {
        self.values[series * self.scrapes + scrape]
    }

    pub(super) fn samples(&self) -> usize {
        self.values.len()
    }

    /// Remote write 1.0 requests of an hour of [`SERIES_PER_REQUEST`]
    /// series each, hour by hour.
    pub(super) fn requests(&self) -> Requests {
        let per_hour = (HOUR_MS / INTERVAL_MS) as usize;
        let mut encoder = snap::raw::Encoder::new();
        let mut requests = Vec::new();
        for hour in (0..self.scrapes).step_by(per_hour) {
            let scrapes = hour..(hour + per_hour).min(self.scrapes);
            let all: Vec<usize> = (0..self.series.len()).collect();
            for chunk in all.chunks(SERIES_PER_REQUEST) {
                let timeseries: Vec<TimeSeries> = chunk
                    .iter()
                    .map(|&series| TimeSeries {
                        labels: self.series[series]
                            .iter()
                            .map(|(name, value)| Label {
                                name: (*name).into(),
                                value: value.clone().into(),
                            })
                            .collect(),
                        samples: scrapes
                            .clone()
                            .map(|scrape| Sample {
                                value: self.value(series, scrape),
                                timestamp: self.time_ms(scrape),
                            })
                            .collect(),
                    })
                    .collect();
                let samples = timeseries.len() * scrapes.len();
                let request = WriteRequest {
                    timeseries,
                    metadata: Vec::new(),
                };
                let body = encoder
                    .compress_vec(&request.encode_to_vec())
                    .expect("snappy compresses any input");
                requests.push((body, samples));
            }
        }
        requests
    }
}

/// A counter that rises each scrape by its rate × a pseudo-random 0.5–1.5
/// (at least a tick), in whole ticks, from up to 30 days' worth of ticks;
/// after a reboot it starts again from 0.
pub(super) struct Counter {
    random: SplitMix,
    ticks: u64,
    ticks_per_scrape: f64,
    ticks_per_unit: f64,
    reboot: Option<usize>,
}

impl Counter {
    /// Seeded by `seed`; rising `ticks_per_scrape` on average, its value
    /// in units of `ticks_per_unit` ticks; rebooting at scrape `reboot`.
    pub(super) fn new(
        seed: u64,
        ticks_per_scrape: f64,
        ticks_per_unit: f64,
        reboot: Option<usize>,
    ) -> Counter {
        let mut random = SplitMix(seed);
        let scrapes_in_30_days = (30 * 24 * HOUR_MS / INTERVAL_MS) as f64;
        let ticks = (random.next_unit() * scrapes_in_30_days * ticks_per_scrape) as u64;
        Counter {
            random,
            ticks,
            ticks_per_scrape,
            ticks_per_unit,
            reboot,
        }
    }

    /// Its value at `scrape`; asked for every scrape in order.
    pub(super) fn at(&mut self, scrape: usize) -> f64 {
        if self.reboot == Some(scrape) {
            self.ticks = 0;
        }
        let rise = (self.ticks_per_scrape * (0.5 + self.random.next_unit())) as u64;
        self.ticks += rise.max(1);
        self.ticks as f64 / self.ticks_per_unit
    }
}

/// SplitMix64: a deterministic stream of pseudo-random numbers per seed.
pub(super) struct SplitMix(pub(super) u64);

impl SplitMix {
    /// The next number, in [0, 1).
    pub(super) fn next_unit(&mut self) -> f64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        (z ^ (z >> 31)) as f64 / (u64::MAX as f64 + 1.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrapes_end_on_the_hour_15_s_apart() {
        let data = Data::generate(1, 2, 1, 1, 1_700_000_123_456);
        assert_eq!((data.series.len(), data.scrapes), (16, 240));
        assert_eq!(data.end_ms() % HOUR_MS, 0);
        assert_eq!(data.time_ms(239), data.end_ms());
        assert_eq!(data.time_ms(0), data.end_ms() - HOUR_MS + INTERVAL_MS);
        assert_eq!(data.series[7][4], ("mode", "user".to_owned()));
        assert_eq!(data.series[8][2], ("instance", "web-1:9100".to_owned()));
    }

    #[test]
    fn counters_only_fall_when_the_second_instance_reboots() {
        let data = Data::generate(2, 2, 2, 1, 1_700_000_123_456);
        for (series, labels) in data.series.iter().enumerate() {
            let rebooted = labels[2].1.ends_with("-1:9100");
            for scrape in 1..data.scrapes {
                let falls = data.value(series, scrape) < data.value(series, scrape - 1);
                assert_eq!(
                    falls,
                    rebooted && scrape == data.scrapes / 2,
                    "{labels:?} {scrape}"
                );
            }
        }
    }

    #[test]
    fn the_same_shape_makes_the_same_requests() {
        let one = Data::generate(1, 3, 3, 2, 1_700_000_123_456);
        let two = Data::generate(1, 3, 3, 2, 1_700_000_123_456);
        assert_eq!(one.values, two.values);
        let requests = one.requests();
        assert_eq!(requests, two.requests());
        let samples: usize = requests.iter().map(|(_, samples)| samples).sum();
        assert_eq!(samples, one.samples());
        // 72 series in requests of 50, for each of 2 hours.
        assert_eq!(requests.len(), 4);
    }
}
