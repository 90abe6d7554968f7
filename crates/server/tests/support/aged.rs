//! Points of the last three days and the InfluxQL statements over them
//! that tests of downsampled databases compare with a plain twin.

/// The times (s) tests of rows past their first downsampling age (levels
/// `1d:5m`, `2d:1h`) work with: 00:00 three days ago (its points start
/// there), the end of the last whole hour, and the cuts (where the rows
/// start, where the 5 m buckets start).
pub(crate) struct Aged {
    pub(crate) day0: i64,
    pub(crate) end: i64,
    pub(crate) rows_from: i64,
    pub(crate) fine_from: i64,
}

impl Aged {
    pub(crate) fn now() -> Aged {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs() as i64;
        let today = now / 86_400 * 86_400;
        Aged {
            day0: today - 3 * 86_400,
            end: now / 3600 * 3600,
            rows_from: (now - 86_400) / 86_400 * 86_400,
            fine_from: (now - 2 * 86_400) / 86_400 * 86_400,
        }
    }

    /// A gauge and a steady counter for two hosts, a point a minute 7 s past
    /// it (never on a bucket's edge), from `day0` to now; and a host seen
    /// only on the first day, for an hour.
    pub(crate) fn body(&self) -> String {
        let mut lines = Vec::new();
        let now = self.end + 3600;
        for host in 0..2 {
            for (i, t) in (self.day0 + 7..now).step_by(60).enumerate() {
                let i = i as i64;
                lines.push(format!(
                    "cpu,host=h{host} usage={}.5,requests={}i {}",
                    (i * 31 + host * 17) % 97,
                    i * 60 + host,
                    t * 1_000_000_000
                ));
            }
        }
        for i in 0..60 {
            let t = self.day0 + 10 * 3600 + 7 + i * 60;
            lines.push(format!("cpu,host=h9 usage={i}.5 {}", t * 1_000_000_000));
        }
        lines.join("\n")
    }

    /// InfluxQL statements over whole hours, across the cuts: exact from
    /// rollups where the rows are gone (a bucket counts by its start).
    pub(crate) fn statements(&self) -> Vec<String> {
        let (day0, end, fine) = (
            self.day0 * 1_000_000_000,
            self.end * 1_000_000_000,
            self.fine_from,
        );
        vec![
            format!(
                "SELECT mean(usage), max(usage), min(usage), count(usage), sum(usage), first(usage), \
                 last(usage) FROM cpu WHERE time >= {day0} AND time < {end} GROUP BY time(1h)"
            ),
            format!(
                "SELECT mean(usage), count(requests), last(requests) FROM cpu WHERE time >= {day0} \
                 AND time < {end} GROUP BY time(1h), host"
            ),
            format!(
                "SELECT max(usage), sum(requests) FROM cpu WHERE time >= {day0} AND time < {end} \
                 GROUP BY time(6h), host"
            ),
            format!(
                "SELECT mean(usage), count(usage) FROM cpu WHERE time >= {} AND time < {end} \
                 GROUP BY time(5m)",
                fine * 1_000_000_000
            ),
            "SELECT last(usage) FROM cpu WHERE host = 'h9'".to_owned(),
        ]
    }
}

/// Whether two answers are equal, numbers within a relative 1e-9 (a mean
/// is a sum over a count in both, added up in another order).
pub(crate) fn same(a: &serde_json::Value, b: &serde_json::Value) -> bool {
    use serde_json::Value as J;
    match (a, b) {
        (J::Number(x), J::Number(y)) => {
            let (x, y) = (x.as_f64().unwrap(), y.as_f64().unwrap());
            (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0)
        }
        (J::Array(x), J::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (J::Object(x), J::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        (x, y) => x == y,
    }
}
