//! What every room of downsampling shares: a table's progress ([`State`]),
//! the levels and cuts it is kept at ([`Kept`], [`Cuts`]), and the bucket
//! arithmetic over `[from, to)` spans in ns. No I/O.

use std::collections::HashMap;
use std::time::Duration;

use crate::config::Downsampling;
use crate::layout::names::TableNames;
use crate::layout::rollup::{Resolution, Rollup};
use crate::layout::schema::FieldType;

/// No mark.
pub(super) const CLEAN: i64 = i64::MAX;

/// The most of the finest level's time one statement rebuilds.
pub(super) const CHUNK_NS: i64 = 86_400 * 1_000_000_000;

/// The resolutions a fact table's data is kept at: its levels (finest
/// first; which may still be a database's earlier levels, until a pass
/// moves the table to its new ones) and where each begins.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Kept {
    pub(super) levels: Vec<Resolution>,
    pub(super) cuts: Cuts,
}

/// Where each resolution of a fact table begins (ns, `None`: nothing
/// removed): a multiple of a day and of every level's width.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct Cuts {
    /// Before it the rows are removed (or being removed).
    pub(super) rows_from: Option<i64>,
    /// Per level: before it its buckets are removed.
    pub(super) kept_from: Vec<Option<i64>>,
}

impl Cuts {
    pub(super) fn rows_from(&self) -> i64 {
        self.rows_from.unwrap_or(i64::MIN)
    }

    pub(super) fn kept_from(&self, level: usize) -> i64 {
        self.kept_from
            .get(level)
            .copied()
            .flatten()
            .unwrap_or(i64::MIN)
    }

    /// Where level `level`'s source (the rows, or the level finer) begins.
    pub(super) fn source_from(&self, level: usize) -> i64 {
        match level {
            0 => self.rows_from(),
            _ => self.kept_from(level - 1),
        }
    }

    /// The cuts `policy` and a retention of `retention_s` (0: forever) ask
    /// for at `now`, never moved back.
    pub(super) fn at(&self, policy: &Downsampling, retention_s: u64, now: i64) -> Cuts {
        let levels = policy.levels();
        let day = Duration::from_secs(86_400);
        let coarsest = levels.last().map_or(day, |level| level.interval);
        let align = Duration::from_secs(lcm(day.as_secs(), coarsest.as_secs()));
        let cut = |age: Duration| floor_to(now.saturating_sub(age.as_nanos() as i64), align);
        let retained = (retention_s > 0).then(|| cut(Duration::from_secs(retention_s)));
        // `None` (nothing removed) is less than any cut.
        Cuts {
            rows_from: self.rows_from.max(levels.first().map(|l| cut(l.after))),
            kept_from: (0..levels.len())
                .map(|i| {
                    let aged = levels.get(i + 1).map(|next| cut(next.after));
                    self.kept_from
                        .get(i)
                        .copied()
                        .flatten()
                        .max(aged)
                        .max(retained)
                })
                .collect(),
        }
    }
}

pub(super) fn lcm(a: u64, b: u64) -> u64 {
    let gcd = |mut a: u64, mut b: u64| {
        while b != 0 {
            (a, b) = (b, a % b);
        }
        a
    };
    a / gcd(a, b) * b
}

/// A time span, `[from, to)` in ns.
pub(super) type Span = (i64, i64);

pub(super) fn union(a: Option<Span>, b: Span) -> Span {
    a.map_or(b, |a| (a.0.min(b.0), a.1.max(b.1)))
}

/// Widens `table`'s span in `spans` to cover `span`.
pub(super) fn widen(spans: &mut HashMap<String, Span>, table: &str, span: Span) {
    let widened = union(spans.get(table).copied(), span);
    spans.insert(table.to_owned(), widened);
}

/// A fact table's progress: the last block rolled up, the range an
/// edit marked and no pass rebuilt yet, its levels and its cuts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct State {
    /// The last block number of the fact table rolled up.
    pub(super) seen_block: u64,
    /// The start of the marked range (ns), or [`CLEAN`].
    pub(super) dirty_from: i64,
    /// Its end (ns, excluded).
    pub(super) dirty_to: i64,
    /// The levels its rollups hold; empty before a first pass (and in
    /// registries of earlier versions, whose levels never changed: the
    /// database's).
    pub(super) levels: Vec<Resolution>,
    pub(super) cuts: Cuts,
    /// When the cuts were last moved (ns; 0: never).
    pub(super) cuts_at: i64,
}

impl State {
    /// Its levels, or `policy`'s when it records none.
    pub(super) fn levels_or(&self, policy: &Downsampling) -> Vec<Resolution> {
        match self.levels.is_empty() {
            true => resolutions(policy),
            false => self.levels.clone(),
        }
    }
}

impl Default for State {
    fn default() -> Self {
        State {
            seen_block: 0,
            dirty_from: CLEAN,
            dirty_to: i64::MIN,
            levels: Vec::new(),
            cuts: Cuts::default(),
            cuts_at: 0,
        }
    }
}

/// `policy`'s levels, finest first.
pub(super) fn resolutions(policy: &Downsampling) -> Vec<Resolution> {
    policy.levels().iter().map(Resolution::of).collect()
}

pub(super) fn floor_to(t: i64, interval: Duration) -> i64 {
    let step = interval.as_nanos() as i64;
    t.div_euclid(step).saturating_mul(step)
}

/// The end of the bucket holding `t - 1`: `[from, to)` in whole buckets
/// is `[floor_to(from), ceil_to(to))`.
pub(super) fn ceil_to(t: i64, interval: Duration) -> i64 {
    floor_to(t.saturating_sub(1), interval).saturating_add(interval.as_nanos() as i64)
}

/// The rollups of the fact table `names` with `fields`, one per level.
pub(super) fn rollups(
    names: &TableNames,
    fields: &[(String, FieldType)],
    levels: &[Resolution],
) -> Vec<Rollup> {
    levels
        .iter()
        .map(|level| Rollup::new(names, fields, *level))
        .collect()
}

/// A time (ns) as the UTC date it falls on, `YYYY-MM-DD`.
pub(super) fn date(ns: i64) -> String {
    chrono::DateTime::from_timestamp_nanos(ns)
        .format("%Y-%m-%d")
        .to_string()
}

/// The span `[from, to)` (ns) in whole buckets of `interval`, about a day
/// of them at a time: the spans one statement rebuilds.
pub(super) fn chunks(interval: Duration, from: i64, to: i64) -> impl Iterator<Item = Span> {
    let step = interval.as_nanos() as i64;
    let chunk = (CHUNK_NS / step).max(1) * step;
    std::iter::successors(Some(from), move |s| Some(s.saturating_add(chunk)))
        .take_while(move |s| *s < to)
        .map(move |s| (s, s.saturating_add(chunk).min(to)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cuts_follow_the_ages_and_the_retention_and_never_move_back() {
        let policy = Downsampling::parse(&["1d:5m", "2d:1h"]).unwrap();
        let day = 86_400_000_000_000_i64;
        let now = 10 * day + 5 * 3_600_000_000_000;
        let cuts = Cuts::default().at(&policy, 0, now);
        assert_eq!(cuts.rows_from, Some(9 * day));
        assert_eq!(cuts.kept_from, vec![Some(8 * day), None]);
        let retained = Cuts::default().at(&policy, 7 * 86_400 + 60, now);
        assert_eq!(retained.kept_from, vec![Some(8 * day), Some(3 * day)]);
        let later = Cuts {
            rows_from: Some(12 * day),
            ..cuts.clone()
        };
        assert_eq!(later.at(&policy, 0, now).rows_from, Some(12 * day));
        assert_eq!(cuts.source_from(0), 9 * day);
        assert_eq!(cuts.source_from(1), 8 * day);
        assert_eq!(lcm(86_400, 3600), 86_400);
        assert_eq!(lcm(86_400, 7 * 3600), 7 * 86_400);
    }
}
