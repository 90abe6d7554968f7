//! How a fact table's rollups move from one set of levels to another
//! ([`plan_migration`]): levels kept keep their buckets, new ones are
//! built from what holds their data, and nothing whose rows are gone may
//! be left without a level.

use super::state::{date, Cuts, Span};
use crate::layout::rollup::{interval_name, Resolution};

/// One span of a new level to build.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Build {
    /// The new level (an index into the new levels).
    pub level: usize,
    /// What it is built from: the rows (`None`), or an old level.
    pub source: Option<usize>,
    /// The span of bucket starts, `[from, to)` in ns (unbounded ends are
    /// bounded by the source's data).
    pub span: Span,
}

/// What moving a table's rollups takes ([`plan_migration`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Migration {
    pub builds: Vec<Build>,
    /// The cuts by the new levels.
    pub cuts: Cuts,
    /// The span `[from, to)` (ns) the old levels keep and the new ones
    /// could not: the migration loses the buckets there, if any.
    pub uncovered: Option<Span>,
}

impl Migration {
    /// Why it may not lose what the old levels (`old`) hold in its
    /// uncovered span.
    pub(super) fn loses(&self, old: &[Resolution]) -> String {
        let widths: Vec<String> = old.iter().map(ToString::to_string).collect();
        format!(
            "its data before {} is kept only at widths ({}) none of the new levels can be built \
             from: keep one of them, or add a level whose width is a multiple of one of theirs \
             and that keeps no more than it does",
            date(self.uncovered.map_or(i64::MIN, |span| span.1)),
            widths.join(", ")
        )
    }
}

/// How the rollups of a table whose levels are `old` (finest first,
/// `cuts` by them) become `new`'s. A level in both keeps its buckets. A
/// new level is built from the rows where they are kept and, before, from
/// the finest old level whose buckets divide its own and keep what it
/// keeps (each old level holds every bucket from its cut on), which sets
/// where it begins. What old levels keep that no new one can be built
/// from is [`Migration::uncovered`]. Refused (why) where a cut falls
/// inside a new level's bucket.
pub(super) fn plan_migration(
    old: &[Resolution],
    cuts: &Cuts,
    new: &[Resolution],
) -> Result<Migration, String> {
    let rows_from = cuts.rows_from();
    let mut builds = Vec::new();
    let mut kept_from = Vec::new();
    for (level, resolution) in new.iter().enumerate() {
        if let Some(same) = old.iter().position(|old| old == resolution) {
            kept_from.push(cuts.kept_from.get(same).copied().flatten());
            continue;
        }
        let interval = resolution.interval;
        let name = interval_name(interval);
        let step = interval.as_nanos() as i64;
        let on_edge = |cut: i64, what: &str| match cut == i64::MIN || cut.rem_euclid(step) == 0 {
            true => Ok(()),
            false => Err(format!(
                "{what} from {} on, inside a {name} bucket: a new level's buckets must start there",
                date(cut)
            )),
        };
        on_edge(rows_from, "its rows are kept")?;
        builds.push(Build {
            level,
            source: None,
            span: (rows_from, i64::MAX),
        });
        let mut upto = rows_from;
        for (source, finer) in old.iter().enumerate() {
            let from = cuts.kept_from(source);
            if from >= upto
                || !interval
                    .as_nanos()
                    .is_multiple_of(finer.interval.as_nanos())
                || !finer.keeps.provides(resolution.keeps)
            {
                continue;
            }
            on_edge(from, &format!("its {finer} buckets are kept"))?;
            builds.push(Build {
                level,
                source: Some(source),
                span: (from, upto),
            });
            upto = from;
        }
        kept_from.push((upto != i64::MIN).then_some(upto));
    }
    let reach = |cuts: &mut dyn Iterator<Item = i64>| cuts.fold(rows_from, i64::min);
    let old_reach = reach(&mut (0..old.len()).map(|level| cuts.kept_from(level)));
    let new_reach = reach(&mut kept_from.iter().map(|cut| cut.unwrap_or(i64::MIN)));
    Ok(Migration {
        builds,
        cuts: Cuts {
            rows_from: cuts.rows_from,
            kept_from,
        },
        uncovered: (new_reach > old_reach).then_some((old_reach, new_reach)),
    })
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::config::Keeps;

    const DAY: i64 = 86_400_000_000_000;
    const MIN: i64 = i64::MIN;

    fn minutes(n: u64) -> Resolution {
        Resolution::aggregates(Duration::from_secs(60 * n))
    }

    fn last(n: u64) -> Resolution {
        Resolution {
            keeps: Keeps::Last,
            ..minutes(n)
        }
    }

    /// Rows kept from day 9, 5 m buckets from day 8, 1 h ones for ever.
    fn cut() -> Cuts {
        Cuts {
            rows_from: Some(9 * DAY),
            kept_from: vec![Some(8 * DAY), None],
        }
    }

    #[test]
    fn levels_kept_keep_their_buckets_and_new_ones_build_from_what_divides_them() {
        let old = [minutes(5), minutes(60)];
        // Nothing new: nothing built.
        let same = plan_migration(&old, &cut(), &old).unwrap();
        assert_eq!(
            (same.builds, same.cuts, same.uncovered),
            (Vec::new(), cut(), None)
        );
        // A 15 m level between: from the rows, then the 5 m buckets, and
        // not the hour's.
        let plan = plan_migration(&old, &cut(), &[minutes(5), minutes(15), minutes(60)]).unwrap();
        assert_eq!(
            plan.builds,
            vec![
                Build {
                    level: 1,
                    source: None,
                    span: (9 * DAY, i64::MAX)
                },
                Build {
                    level: 1,
                    source: Some(0),
                    span: (8 * DAY, 9 * DAY)
                },
            ]
        );
        assert_eq!(
            plan.cuts.kept_from,
            vec![Some(8 * DAY), Some(8 * DAY), None]
        );
        // A day level instead of the hour's: from each, for ever.
        let plan = plan_migration(&old, &cut(), &[minutes(5), minutes(1440)]).unwrap();
        assert_eq!(plan.builds.len(), 3);
        assert_eq!(
            plan.builds[2],
            Build {
                level: 1,
                source: Some(1),
                span: (MIN, 8 * DAY)
            }
        );
        assert_eq!(plan.cuts.kept_from, vec![Some(8 * DAY), None]);
        // No rows gone: everything from the rows.
        let whole = plan_migration(&old, &Cuts::default(), &[minutes(10)]).unwrap();
        assert_eq!(
            whole.builds,
            vec![Build {
                level: 0,
                source: None,
                span: (MIN, i64::MAX)
            }]
        );
    }

    #[test]
    fn what_no_new_level_can_hold_is_uncovered_and_cut_buckets_refused() {
        let old = [minutes(5), minutes(60)];
        // 10 m buckets cannot be built from hours: the data before day 8
        // would go with them.
        let plan = plan_migration(&old, &cut(), &[minutes(5), minutes(10)]).unwrap();
        assert_eq!(plan.uncovered, Some((MIN, 8 * DAY)));
        let why = plan.loses(&old);
        assert!(
            why.contains("before 1970-01-09") && why.contains("5m, 1h"),
            "{why}"
        );
        // Finer than what is left where the rows went, alone.
        let plan = plan_migration(&old, &cut(), &[minutes(1)]).unwrap();
        assert_eq!(plan.uncovered, Some((MIN, 9 * DAY)));
        // With the hour's kept, that keeps what the 5 m buckets held.
        let plan = plan_migration(&old, &cut(), &[minutes(1), minutes(60)]).unwrap();
        assert_eq!(plan.uncovered, None);
        // A 7 h bucket would straddle the rows' cut.
        let why = plan_migration(&old, &cut(), &[minutes(5), minutes(420)]).unwrap_err();
        assert!(why.contains("inside a 7h bucket"), "{why}");
    }

    #[test]
    fn a_level_keeping_the_last_sample_builds_from_any_and_feeds_only_its_kind() {
        let old = [minutes(5), minutes(60)];
        // The same widths keeping the last sample only: new tables, from
        // the rows, then from the old levels of each width.
        let plan = plan_migration(&old, &cut(), &[last(5), last(60)]).unwrap();
        let sources: Vec<_> = plan.builds.iter().map(|b| (b.level, b.source)).collect();
        assert_eq!(
            sources,
            [
                (0, None),
                (0, Some(0)),
                (1, None),
                (1, Some(0)),
                (1, Some(1))
            ]
        );
        assert_eq!(plan.uncovered, None);
        // Back to every aggregate: nothing keeps them where rows are gone.
        let plan = plan_migration(&[last(5), last(60)], &cut(), &old).unwrap();
        assert_eq!(plan.uncovered, Some((MIN, 9 * DAY)));
        assert!(plan
            .loses(&[last(5), last(60)])
            .contains("5m:last, 1h:last"));
    }
}
