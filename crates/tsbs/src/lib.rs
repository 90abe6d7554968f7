//! The reference load: TSBS-style "cpu-only" line protocol.
//!
//! Measurement `cpu`, ten tags per host (hostname, region, datacenter, rack,
//! os, arch, team, service, service_version, service_environment) and ten
//! integer fields (usage_user … usage_guest_nice), one point per host every
//! 10 s. Each field of each host is TSBS's clamped random walk: it starts
//! anywhere in 0..100 and moves by a normal step (mean 0, deviation 1)
//! every point, kept within 0..=100, written truncated to an integer. (How
//! well the values compress depends on this shape: uniformly random values
//! would need ~0.83 bytes each whatever the codec.) Values come from a
//! fixed-seed generator, so a body is the same on every machine and every
//! run. No dependencies: benches, tests and load generators all use this
//! one definition.

use std::fmt::Write as _;

/// Field names of the cpu measurement, in TSBS order.
pub const FIELDS: [&str; 10] = [
    "usage_user",
    "usage_system",
    "usage_idle",
    "usage_nice",
    "usage_iowait",
    "usage_irq",
    "usage_softirq",
    "usage_steal",
    "usage_guest",
    "usage_guest_nice",
];

/// Tag keys of the cpu measurement, in TSBS order.
pub const TAGS: [&str; 10] = [
    "hostname",
    "region",
    "datacenter",
    "rack",
    "os",
    "arch",
    "team",
    "service",
    "service_version",
    "service_environment",
];

const REGIONS: [&str; 9] = [
    "us-east-1",
    "us-west-1",
    "us-west-2",
    "eu-west-1",
    "eu-central-1",
    "ap-southeast-1",
    "ap-southeast-2",
    "ap-northeast-1",
    "sa-east-1",
];
const OS: [&str; 3] = ["Ubuntu16.10", "Ubuntu16.04LTS", "Ubuntu15.10"];
const ARCH: [&str; 2] = ["x64", "x86"];
const TEAMS: [&str; 4] = ["SF", "NYC", "LON", "CHI"];
const ENVIRONMENTS: [&str; 3] = ["production", "staging", "test"];

/// 2016-01-01T00:00:00Z, where TSBS starts, in nanoseconds.
pub const START_NS: i64 = 1_451_606_400_000_000_000;
/// The interval between two points of one host: 10 s.
pub const INTERVAL_NS: i64 = 10_000_000_000;

/// A splitmix64 generator: tiny, fast, and the same everywhere. Every
/// generated value in the benchmarks comes from it, so a load is the same on
/// every machine.
#[derive(Debug, Clone)]
pub struct SplitMix(pub u64);

impl SplitMix {
    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A value in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        self.next_u64() % n
    }

    /// A value in `[0, 1)`.
    pub fn unit(&mut self) -> f64 {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64
    }

    /// A standard normal value (Box–Muller).
    pub fn normal(&mut self) -> f64 {
        let u = 1.0 - self.unit();
        let v = self.unit();
        (-2.0 * u.ln()).sqrt() * (2.0 * std::f64::consts::PI * v).cos()
    }
}

/// One host's series key: `cpu,hostname=host_N,...` (tags in TSBS order).
pub fn series_key(host: usize) -> String {
    let mut rng = SplitMix(host as u64 ^ 0x5EED);
    let region = REGIONS[rng.below(REGIONS.len() as u64) as usize];
    let mut key = String::with_capacity(200);
    let _ = write!(
        key,
        "cpu,hostname=host_{host},region={region},datacenter={region}{},rack={},os={},arch={},team={},service={},service_version={},service_environment={}",
        ['a', 'b', 'c'][rng.below(3) as usize],
        rng.below(100),
        OS[rng.below(OS.len() as u64) as usize],
        ARCH[rng.below(ARCH.len() as u64) as usize],
        TEAMS[rng.below(TEAMS.len() as u64) as usize],
        rng.below(20),
        rng.below(2),
        ENVIRONMENTS[rng.below(ENVIRONMENTS.len() as u64) as usize],
    );
    key
}

/// Generates TSBS cpu-only points for `hosts` hosts.
#[derive(Debug, Clone)]
pub struct CpuOnly {
    keys: Vec<String>,
    /// Each host's fields, where their random walks are.
    values: Vec<[f64; FIELDS.len()]>,
    rng: SplitMix,
}

impl CpuOnly {
    /// A generator for hosts `0..hosts`.
    pub fn new(hosts: usize) -> Self {
        let mut rng = SplitMix(42);
        let values = (0..hosts)
            .map(|_| std::array::from_fn(|_| rng.unit() * 100.0))
            .collect();
        CpuOnly {
            keys: (0..hosts).map(series_key).collect(),
            values,
            rng,
        }
    }

    /// Number of hosts.
    pub fn hosts(&self) -> usize {
        self.keys.len()
    }

    /// Appends one line per host for the timestamp with index `step`
    /// (`START_NS + step * INTERVAL_NS`).
    pub fn write_step(&mut self, step: usize, out: &mut String) {
        let time = START_NS + step as i64 * INTERVAL_NS;
        for (key, values) in self.keys.iter().zip(&mut self.values) {
            out.push_str(key);
            for (i, (field, value)) in FIELDS.iter().zip(values.iter_mut()).enumerate() {
                *value = (*value + self.rng.normal()).clamp(0.0, 100.0);
                out.push(if i == 0 { ' ' } else { ',' });
                let _ = write!(out, "{field}={}i", *value as i64);
            }
            let _ = writeln!(out, " {time}");
        }
    }

    /// Lines for timestamps `steps` (every host at each), in time order.
    pub fn lines(&mut self, steps: std::ops::Range<usize>) -> String {
        let mut out = String::with_capacity(steps.len() * self.keys.len() * 360);
        for step in steps {
            self.write_step(step, &mut out);
        }
        out
    }

    /// The whole load, `hosts × steps` lines, cut into bodies of
    /// `lines_per_body` lines each (built body by body: the load is never
    /// held twice).
    pub fn bodies(&mut self, steps: usize, lines_per_body: usize) -> Vec<String> {
        let mut bodies = Vec::new();
        let mut body = String::new();
        let mut in_body = 0;
        let mut step_lines = String::new();
        for step in 0..steps {
            step_lines.clear();
            self.write_step(step, &mut step_lines);
            for line in step_lines.lines() {
                body.push_str(line);
                body.push('\n');
                in_body += 1;
                if in_body == lines_per_body {
                    bodies.push(std::mem::take(&mut body));
                    in_body = 0;
                }
            }
        }
        if !body.is_empty() {
            bodies.push(body);
        }
        bodies
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_have_the_tsbs_shape() {
        let mut gen = CpuOnly::new(3);
        let body = gen.lines(0..2);
        let lines: Vec<&str> = body.lines().collect();
        assert_eq!(lines.len(), 6);
        for line in &lines {
            let parts: Vec<&str> = line.split(' ').collect();
            assert_eq!(parts.len(), 3, "{line}");
            assert_eq!(parts[0].split(',').count(), 11);
            assert_eq!(parts[1].split(',').count(), 10);
            assert!(parts[1].split(',').all(|f| f.ends_with('i')));
        }
        assert!(lines[0].starts_with("cpu,hostname=host_0,region="));
        assert!(lines[3].ends_with(&format!(" {}", START_NS + INTERVAL_NS)));
        let mean = body.len() / lines.len();
        assert!((300..400).contains(&mean), "{mean} bytes per line");
    }

    #[test]
    fn fields_walk_in_small_steps_within_0_to_100() {
        let mut gen = CpuOnly::new(1);
        let body = gen.lines(0..1000);
        let user: Vec<i64> = body
            .lines()
            .map(|line| {
                let fields = line.split(' ').nth(1).unwrap();
                let first = fields.split(',').next().unwrap();
                first["usage_user=".len()..first.len() - 1].parse().unwrap()
            })
            .collect();
        assert!(user.iter().all(|v| (0..=100).contains(v)));
        // A normal step of deviation 1, truncated: rarely more than 4.
        let big = user.windows(2).filter(|w| (w[1] - w[0]).abs() > 4).count();
        assert!(big < 5, "{big} large steps");
        assert!(user.iter().max() > user.iter().min());
    }

    #[test]
    fn generation_is_deterministic() {
        assert_eq!(CpuOnly::new(5).lines(0..3), CpuOnly::new(5).lines(0..3));
        let bodies = CpuOnly::new(10).bodies(3, 7);
        assert_eq!(
            bodies.iter().map(|b| b.lines().count()).collect::<Vec<_>>(),
            [7, 7, 7, 7, 2]
        );
    }
}
