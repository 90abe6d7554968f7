//! Aggregates from rollups (docs/downsampling.md): `GROUP BY time` of
//! whole buckets over a downsampled measurement reads one row per series
//! and bucket where a rollup holds every row, and the rows elsewhere — the
//! partial buckets at the range's ends, and the span the rollups may lack
//! ([`RollupView::unsettled`]) — in one statement whose outer aggregates
//! combine the two exactly: a count is a sum of counts, a mean a sum of
//! sums over a sum of counts, `first` and `last` the earliest and latest
//! by time. Each bucket comes from one side only, so none is counted
//! twice or missed.

use chingest::layout::names::quote_ident;
use chingest::layout::rollup::{time_in_sql, Aggregate as Kept, Rollup};
use chingest::layout::schema::FieldType;
use chingest::{Keeps, RollupView};

use super::aggregate::Aggregate;
use super::model::{aggregate_of, Operand};
use super::sql::{group_sql, window_sql, Plan};
use crate::parse::Select;
use crate::plan::{fact_source, Target};

/// One output's values in a row of either side: one or two partial
/// columns, and the outer aggregate that combines them.
struct Partial {
    func: Aggregate,
    /// (rollup side, rows side) of each partial column.
    columns: Vec<(String, String)>,
    /// What a level must keep to give them.
    reads: Keeps,
}

impl Partial {
    /// The partials of `func` over `field`; `None` when the rollup keeps
    /// nothing that gives it exactly.
    fn new(func: Aggregate, field: &str, ty: FieldType) -> Option<Partial> {
        let row = format!("f.{}", quote_ident(field));
        let number = Kept::Sum.applies_to(ty);
        let kept = match func {
            Aggregate::Count => vec![(Kept::Count, format!("toUInt64({row} IS NOT NULL)"))],
            Aggregate::Sum if number => vec![(Kept::Sum, row)],
            Aggregate::Min if number => vec![(Kept::Min, row)],
            Aggregate::Max if number => vec![(Kept::Max, row)],
            Aggregate::Mean if number => vec![
                (Kept::Sum, row.clone()),
                (Kept::Count, format!("toUInt64({row} IS NOT NULL)")),
            ],
            Aggregate::First => vec![(Kept::First, row), (Kept::FirstTime, "f.time".to_owned())],
            Aggregate::Last => vec![(Kept::Last, row), (Kept::LastTime, "f.time".to_owned())],
            _ => return None,
        };
        Some(Partial {
            func,
            reads: Kept::needs(kept.iter().map(|(k, _)| *k)),
            columns: kept
                .into_iter()
                .map(|(k, row)| (format!("f.{}", Rollup::column(field, k)), row))
                .collect(),
        })
    }

    /// The outer aggregate over partial columns `p` (and `q`).
    fn combined(&self, p: &str, q: &str) -> String {
        let t = format!("toUnixTimestamp64Nano({q})");
        match self.func {
            Aggregate::Count | Aggregate::Sum => format!("sum({p})"),
            Aggregate::Min => format!("min({p})"),
            Aggregate::Max => format!("max({p})"),
            Aggregate::Mean => format!("sum({p}) / sum({q})"),
            // As `Aggregate::at_selected`: the earliest (latest) time, and
            // among equal times the greatest value.
            Aggregate::First => format!("argMaxIf({p}, (-{t}, {p}), {p} IS NOT NULL)"),
            _ => format!("argMaxIf({p}, ({t}, {p}), {p} IS NOT NULL)"),
        }
    }
}

/// A rollup statement reads two tables where the rows are one: it pays
/// once the rows would be at least this many series × days (measured,
/// docs/benchmarks.md §19: one series at 10 s over 2 days read 1.6× faster
/// from its rows than through rollups, over 30 days 1.55× slower; 40
/// series over 30 days 14.5× slower). A statement whose series are not
/// listed counts as this many.
const MIN_SERIES_DAYS: i64 = 14;

impl Plan {
    /// The statement's SQL reading the rollups `view` offers, ending at
    /// `stop` (the aggregation's); `None` when no rollup answers it
    /// exactly: no `GROUP BY time` of whole buckets of a level, a time
    /// zone, a condition on field values, an output that is not `count`,
    /// `sum`, `mean`, `min`, `max`, `first` or `last` of a rolled-up
    /// field, no whole bucket in the range, or too few rows to pay for a
    /// second table ([`MIN_SERIES_DAYS`]).
    pub(super) fn rollup_sql(
        &self,
        select: &Select,
        target: &Target,
        view: &RollupView,
        stop: i64,
    ) -> Option<String> {
        let interval = select.interval?;
        if select.time_zone.is_some() || !self.filter.points.is_empty() {
            return None;
        }
        let mut partials = Vec::new();
        for output in &self.outputs {
            let (Some(func), Operand::Field(field, ty)) =
                (aggregate_of(&output.column), &output.operand)
            else {
                return None;
            };
            if !view.fields.iter().any(|(f, t)| f == field && t == ty) {
                return None;
            }
            partials.push(Partial::new(func, field, *ty)?);
        }
        // The coarsest level whose buckets tile the statement's and that
        // keeps what its outputs read.
        let reads = match partials.iter().all(|p| p.reads == Keeps::Last) {
            true => Keeps::Last,
            false => Keeps::Aggregates,
        };
        let level = view.level(reads, |width| {
            let width = width.as_nanos() as i64;
            interval.every % width == 0 && interval.offset.rem_euclid(width) == 0
        })?;
        // Whole buckets inside the range, but those the rollups may lack;
        // the rows elsewhere in it.
        let start = select.condition.start.unwrap_or(i64::MIN);
        let series = self
            .filter
            .series
            .as_ref()
            .map_or(MIN_SERIES_DAYS, |ids| ids.len() as i64);
        let days = stop.saturating_sub(start) / 86_400_000_000_000;
        // Where the rows are gone, only rollups answer.
        if series.saturating_mul(days) < MIN_SERIES_DAYS && start >= view.rows_from {
            return None;
        }
        let split = view.split(level, start, stop, reads)?;

        let join = !self.keys.is_empty();
        let ids = self.filter.series.as_deref();
        // One side of the union: `source` as `f` over `spans`, reading the
        // rows' columns or the rollup's.
        let side = |source: &str, rows: bool, spans: &[(i64, i64)]| {
            let (from, series) = fact_source(source, target, &self.filter.tags, ids, join);
            let mut columns = vec!["f.time AS time".to_owned()];
            columns.extend(group_sql(&self.keys));
            for (i, partial) in partials.iter().enumerate() {
                for (j, (kept, row)) in partial.columns.iter().enumerate() {
                    let value = if rows { row } else { kept };
                    columns.push(format!("{value} AS __p{i}_{j}"));
                }
            }
            let mut conditions: Vec<String> = series.into_iter().collect();
            conditions.push(time_in_sql("f.time", spans));
            format!(
                "SELECT {} FROM {from} WHERE {}",
                columns.join(", "),
                conditions.join(" AND ")
            )
        };
        let mut sides: Vec<String> = split
            .rollups
            .iter()
            .map(|(table, spans)| side(&format!("{table} AS f FINAL"), false, spans))
            .collect();
        if !split.rows.is_empty() {
            let facts = format!("{} AS f", target.names.storage_table);
            sides.push(side(&facts, true, &split.rows));
        }

        // The outer columns in the aggregation's places: the window, the
        // group keys, then per output its value and, for a selector, its
        // point's time (unused with `GROUP BY time`: NULL).
        let mut columns = vec![format!("{} AS __t", window_sql(interval, None))];
        let keys: Vec<String> = (0..self.keys.len()).map(|i| format!("__g{i}")).collect();
        columns.extend(keys.iter().cloned());
        for (i, partial) in partials.iter().enumerate() {
            columns.push(partial.combined(&format!("__p{i}_0"), &format!("__p{i}_1")));
            if partial.func.is_selector() {
                columns.push("NULL".to_owned());
            }
        }
        let mut group = vec!["__t".to_owned()];
        group.extend(keys);
        Some(format!(
            "SELECT {} FROM ({}) AS f GROUP BY {}",
            columns.join(", "),
            sides.join(" UNION ALL "),
            group.join(", ")
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::super::sql::field_sql;
    use super::*;

    #[test]
    fn a_field_is_named_alike_in_rows_and_rollups() {
        let operand = Operand::Field("usage user".to_owned(), FieldType::Float);
        let partial = Partial::new(Aggregate::Mean, "usage user", FieldType::Float).unwrap();
        assert_eq!(partial.columns[0].1, field_sql(&operand));
        assert_eq!(partial.columns[0].0, "f.`usage user@sum`");
        assert!(Partial::new(Aggregate::Mean, "state", FieldType::String).is_none());
        assert!(Partial::new(Aggregate::Median, "usage", FieldType::Float).is_none());
    }
}
