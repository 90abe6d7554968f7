//! What Grafana asks with: its time picker's ranges, the step
//! (`$__interval`) it chooses for a range, and its `$__rate_interval`.
//! Shared by the age loads of `pushit promql` and `pushit influxql`.

use super::promql_data::INTERVAL_MS;

/// The time picker's ranges, s.
pub(super) const RANGES: [i64; 3] = [6 * 3_600, 86_400, 7 * 86_400];
/// Hours a group is moved back by default: past the recent samples.
pub(super) const BACK_HOURS: usize = 48;

/// Grafana's step (`$__interval`) for a panel over `seconds`, about 1,000
/// points wide (`kbn.roundInterval` of the range ÷ 1,000), at least 15 s.
pub(super) fn step(seconds: i64) -> i64 {
    // The range in ms ÷ 1,000 points.
    let raw_ms = seconds;
    const ROUNDED: [(i64, i64); 10] = [
        (17_500, 15),
        (25_000, 20),
        (45_000, 30),
        (90_000, 60),
        (180_000, 120),
        (450_000, 300),
        (750_000, 600),
        (1_050_000, 900),
        (1_500_000, 1_200),
        (2_700_000, 1_800),
    ];
    ROUNDED
        .iter()
        .find(|(below_ms, _)| raw_ms < *below_ms)
        .map_or(3_600, |(_, step)| *step)
}

/// Grafana's `$__rate_interval` at `step`: the step plus a scrape, at least
/// four scrapes.
pub(super) fn rate_interval(step: i64) -> String {
    let scrape = INTERVAL_MS / 1000;
    format!("{}s", (step + scrape).max(4 * scrape))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn steps_and_rate_windows_as_grafana_chooses_them() {
        let chosen: Vec<(i64, String)> = RANGES
            .iter()
            .map(|&seconds| (step(seconds), rate_interval(step(seconds))))
            .collect();
        let expected = [(20, "60s"), (60, "75s"), (600, "615s")];
        let expected: Vec<(i64, String)> = expected
            .iter()
            .map(|(step, rate)| (*step, (*rate).to_owned()))
            .collect();
        assert_eq!(chosen, expected);
        assert_eq!(step(3_600), 15, "an hour: a scrape");
        assert_eq!(step(30 * 86_400), 1_800, "a month: half an hour");
        assert_eq!(step(90 * 86_400), 3_600, "a quarter: an hour");
    }
}
