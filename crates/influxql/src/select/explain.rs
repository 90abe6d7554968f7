//! `EXPLAIN` and `EXPLAIN ANALYZE`: how a statement is answered,
//! measurement by measurement — the store chosen (the last-value cache,
//! the recent samples, rollups, the engine's rows, points aggregated here,
//! subqueries' answers) and the SQL sent — noted by the path that answers
//! it ([`Trace`]); `ANALYZE` runs it and adds times and row counts.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::answer::{Series, Value};

/// Where a measurement's answer came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Store {
    /// No series selected: nothing read.
    Nothing,
    LastValues,
    Recent,
    /// The recent samples' points, aggregated here.
    RecentPoints,
    Rollups,
    /// The engine's aggregate.
    Engine,
    /// The engine's raw points.
    Raw,
    /// The engine's points, aggregated here.
    Points,
    /// Subqueries' answers, in memory.
    Subqueries,
}

impl Store {
    fn describe(self) -> &'static str {
        match self {
            Store::Nothing => "none (no series selected)",
            Store::LastValues => "last-value cache (memory)",
            Store::Recent => "recent samples (memory)",
            Store::RecentPoints => "recent samples (memory), aggregated by chingest",
            Store::Rollups => "rollups (engine)",
            Store::Engine => "rows (engine aggregate)",
            Store::Raw => "rows (engine, raw points)",
            Store::Points => "rows (engine points, aggregated by chingest)",
            Store::Subqueries => "subqueries' answers (memory)",
        }
    }
}

/// One measurement's answer, as noted.
struct Step {
    measurement: String,
    store: Store,
    sql: Option<String>,
    rows: usize,
    took: Duration,
}

/// How a statement was answered; `dry` (`EXPLAIN` without `ANALYZE`):
/// the engine is asked nothing.
#[derive(Default)]
pub(super) struct Trace {
    pub(super) dry: bool,
    steps: Mutex<Vec<Step>>,
}

impl Trace {
    pub(super) fn planning() -> Trace {
        Trace {
            dry: true,
            ..Trace::default()
        }
    }

    /// Notes one measurement's answer, begun at `started`.
    pub(super) fn note(
        &self,
        measurement: &str,
        store: Store,
        sql: Option<&str>,
        series: &[Series],
        started: Instant,
    ) {
        let step = Step {
            measurement: measurement.to_owned(),
            store,
            sql: sql.map(str::to_owned),
            rows: series.iter().map(|s| s.values.len()).sum(),
            took: started.elapsed(),
        };
        self.steps
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push(step);
    }

    /// `EXPLAIN`'s answer: `QUERY PLAN` lines per measurement.
    pub(super) fn plan(self) -> Series {
        let mut lines = Vec::new();
        for step in self.into_steps() {
            lines.push(format!("MEASUREMENT: {}", step.measurement));
            lines.push(format!("STORE: {}", step.store.describe()));
            if let Some(sql) = step.sql {
                lines.push(format!("SQL: {sql}"));
            }
        }
        column("QUERY PLAN", lines)
    }

    /// `EXPLAIN ANALYZE`'s answer: the statement's tree, with times.
    pub(super) fn analyzed(self, total: Duration, rows: usize) -> Series {
        let steps = self.into_steps();
        let mut lines = vec![
            ".".to_owned(),
            "└── select".to_owned(),
            format!("    ├── total_time: {total:?}"),
            format!("    ├── rows: {rows}"),
        ];
        lines.push(format!("    └── measurements: {}", steps.len()));
        for (i, step) in steps.iter().enumerate() {
            let last = i + 1 == steps.len();
            let (branch, indent) = match last {
                true => ("        └── ", "            "),
                false => ("        ├── ", "        │   "),
            };
            lines.push(format!("{branch}{}", step.measurement));
            lines.push(format!("{indent}├── store: {}", step.store.describe()));
            if let Some(sql) = &step.sql {
                lines.push(format!("{indent}├── sql: {sql}"));
            }
            lines.push(format!("{indent}├── rows: {}", step.rows));
            lines.push(format!("{indent}└── time: {:?}", step.took));
        }
        column("EXPLAIN ANALYZE", lines)
    }

    fn into_steps(self) -> Vec<Step> {
        self.steps
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// A series of one text column, unnamed, as InfluxDB answers `EXPLAIN`.
fn column(name: &str, lines: Vec<String>) -> Series {
    Series {
        name: None,
        tags: None,
        columns: vec![name.to_owned()],
        values: lines.into_iter().map(|l| vec![Value::String(l)]).collect(),
    }
}
