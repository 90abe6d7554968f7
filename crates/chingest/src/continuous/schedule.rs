//! When a continuous query runs and what each run covers, as InfluxDB
//! 1.x's continuous query service computes it
//! (`services/continuous_querier`): a run at every boundary of
//! `RESAMPLE EVERY` (else the `GROUP BY time` interval) plus the
//! interval's offset, over the intervals that closed since the previous
//! run — or, with `RESAMPLE FOR`, over that much time before the boundary.
//! Pure arithmetic on ns since the epoch; InfluxDB reads the clock once
//! per run where this reads the boundary, so a period repeated after a
//! crash covers the same window.

use std::time::Duration;

/// When a continuous query runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Schedule {
    /// `GROUP BY time(interval, …)`.
    pub interval: Duration,
    /// `GROUP BY time(…, offset)`, less than the interval.
    pub offset: Duration,
    /// `RESAMPLE EVERY`; `None`: every interval.
    pub resample_every: Option<Duration>,
    /// `RESAMPLE FOR`; `None`: one interval (or `RESAMPLE EVERY`, when
    /// longer).
    pub resample_for: Option<Duration>,
}

/// The time range one run of a continuous query covers: `[start, end)`,
/// ns since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window {
    /// The first ns covered.
    pub start: i64,
    /// The first ns after it.
    pub end: i64,
}

fn nanos(duration: Duration) -> i64 {
    i64::try_from(duration.as_nanos()).unwrap_or(i64::MAX)
}

/// `t` rounded down to `offset` plus a multiple of `step` (> 0).
fn floor_to(t: i64, step: i64, offset: i64) -> i64 {
    let from = t.saturating_sub(offset);
    from.saturating_sub(from.rem_euclid(step))
        .saturating_add(offset)
}

impl Schedule {
    fn interval_ns(&self) -> i64 {
        nanos(self.interval).max(1)
    }

    fn offset_ns(&self) -> i64 {
        nanos(self.offset)
    }

    /// Time between two runs, ns.
    pub fn every_ns(&self) -> i64 {
        self.resample_every.map_or(self.interval_ns(), nanos).max(1)
    }

    /// The last run boundary at or before `t`.
    pub fn boundary_at_or_before(&self, t: i64) -> i64 {
        floor_to(t, self.every_ns(), self.offset_ns())
    }

    /// What the run at `boundary` covers; `None` when that is nothing
    /// (InfluxDB skips such a run).
    pub fn window(&self, boundary: i64) -> Option<Window> {
        let (interval, offset, every) = (self.interval_ns(), self.offset_ns(), self.every_ns());
        let covers = self
            .resample_for
            .map_or(interval.max(every), nanos)
            .max(interval);
        // A run more often than the interval also covers the interval
        // still open; less often, the intervals that closed.
        let behind = every.min(interval);
        let start = floor_to(
            boundary
                .saturating_add(interval)
                .saturating_sub(covers)
                .saturating_sub(1),
            interval,
            offset,
        );
        let end = floor_to(
            boundary.saturating_add(interval).saturating_sub(behind),
            interval,
            offset,
        );
        (end > start).then_some(Window { start, end })
    }

    /// The boundaries after `last` up to `now`, oldest first, at most the
    /// newest `most` (the newest one always); and how many older ones that
    /// leaves out.
    pub fn due(&self, last: i64, now: i64, most: u64) -> (Vec<i64>, u64) {
        let every = self.every_ns();
        let newest = self.boundary_at_or_before(now);
        let first = self.boundary_at_or_before(last).saturating_add(every);
        if newest < first {
            return (Vec::new(), 0);
        }
        let count = ((newest - first) / every) as u64 + 1;
        let skipped = count.saturating_sub(most.max(1));
        let kept = count - skipped;
        let from = newest - (kept as i64 - 1) * every;
        let due = (0..kept as i64).map(|i| from + i * every).collect();
        (due, skipped)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: i64 = 1_000_000_000;
    const M: i64 = 60 * S;
    const H: i64 = 60 * M;

    fn schedule(interval: i64, offset: i64, every: Option<i64>, covers: Option<i64>) -> Schedule {
        let d = |ns: i64| Duration::from_nanos(ns as u64);
        Schedule {
            interval: d(interval),
            offset: d(offset),
            resample_every: every.map(d),
            resample_for: covers.map(d),
        }
    }

    fn window(start: i64, end: i64) -> Option<Window> {
        Some(Window { start, end })
    }

    #[test]
    fn windows_are_influxdbs() {
        let day = 1_700_000_000 / 86_400 * 86_400 * S;
        let at = |h: i64, m: i64| day + h * H + m * M;
        // Every interval: the interval that just closed.
        let hourly = schedule(H, 0, None, None);
        assert_eq!(hourly.boundary_at_or_before(at(10, 17)), at(10, 0));
        assert_eq!(hourly.window(at(10, 0)), window(at(9, 0), at(10, 0)));
        // An offset moves the boundaries and the intervals with it.
        let offset = schedule(H, 15 * M, None, None);
        assert_eq!(offset.boundary_at_or_before(at(10, 14)), at(9, 15));
        assert_eq!(offset.window(at(10, 15)), window(at(9, 15), at(10, 15)));
        // RESAMPLE EVERY 30m: the open interval too, every half hour.
        let often = schedule(H, 0, Some(30 * M), None);
        assert_eq!(often.boundary_at_or_before(at(10, 40)), at(10, 30));
        assert_eq!(often.window(at(10, 30)), window(at(10, 0), at(11, 0)));
        assert_eq!(often.window(at(11, 0)), window(at(10, 0), at(11, 0)));
        // RESAMPLE FOR 2h: the two intervals before the boundary.
        let long = schedule(H, 0, None, Some(2 * H));
        assert_eq!(long.window(at(10, 0)), window(at(8, 0), at(10, 0)));
        // RESAMPLE EVERY 2h: the two intervals that closed.
        let rare = schedule(H, 0, Some(2 * H), None);
        assert_eq!(rare.window(at(10, 0)), window(at(8, 0), at(10, 0)));
        // Both, as InfluxDB's documentation's example.
        let both = schedule(H, 0, Some(30 * M), Some(90 * M));
        assert_eq!(both.window(at(10, 30)), window(at(9, 0), at(11, 0)));
    }

    #[test]
    fn due_periods_are_those_missed_oldest_first_and_bounded() {
        let second = schedule(S, 0, None, None);
        assert_eq!(second.due(10 * S, 10 * S + S / 2, 100), (vec![], 0));
        assert_eq!(
            second.due(10 * S, 13 * S + 1, 100),
            (vec![11 * S, 12 * S, 13 * S], 0)
        );
        assert_eq!(second.due(10 * S, 13 * S, 2), (vec![12 * S, 13 * S], 1));
        assert_eq!(second.due(10 * S, 13 * S, 0), (vec![13 * S], 2));
        // Times before the epoch round down too.
        assert_eq!(second.boundary_at_or_before(-1), -S);
        assert_eq!(second.window(0), window(-S, 0));
    }
}
