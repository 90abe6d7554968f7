//! The rollups of a downsampled fact table ([`crate::Downsampling`]): one
//! table per level, one row per series and bucket, keeping for each field
//! what every query language needs of the bucket — its `count`, `sum`,
//! `min`, `max`, and its `first` and `last` values with their times — so
//! that a mean over buckets is exact (`sum(sum) / sum(count)`), not a mean
//! of means. A bucket is rebuilt whole from what it rolls up, or, where
//! that is gone, merged with the rows written into it since; the table
//! keeps the newest build of each (`ReplacingMergeTree`, read with
//! `final`), and each build the last block of the fact table it holds
//! (`_through`), so a merge repeated after a crash adds nothing twice.
//! A level that keeps the last sample only ([`Keeps::Last`]) has its
//! `count`, `last` and `last_time` columns alone.
//! Pure: the statements only.

use std::time::Duration;

use super::names::{quote_ident, TableNames};
use super::schema::{FieldType, DEDUP_WINDOW, SERIES_ID_CODEC, TIME_CODEC};
use crate::config::{DownsamplingLevel, Keeps};

/// What a rollup keeps of each field per bucket, and the name suffix of
/// its column (`usage_user@sum`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Aggregate {
    /// Values present in the bucket.
    Count,
    /// Their sum (numbers only).
    Sum,
    /// The least (numbers only).
    Min,
    /// The greatest (numbers only).
    Max,
    /// The value of the earliest time.
    First,
    /// The time of `First`.
    FirstTime,
    /// The value of the latest time.
    Last,
    /// The time of `Last`.
    LastTime,
}

impl Aggregate {
    const ALL: [Aggregate; 8] = [
        Aggregate::Count,
        Aggregate::Sum,
        Aggregate::Min,
        Aggregate::Max,
        Aggregate::First,
        Aggregate::FirstTime,
        Aggregate::Last,
        Aggregate::LastTime,
    ];

    fn suffix(self) -> &'static str {
        match self {
            Aggregate::Count => "count",
            Aggregate::Sum => "sum",
            Aggregate::Min => "min",
            Aggregate::Max => "max",
            Aggregate::First => "first",
            Aggregate::FirstTime => "first_time",
            Aggregate::Last => "last",
            Aggregate::LastTime => "last_time",
        }
    }

    /// Whether a level keeping `keeps` keeps it.
    pub fn kept_by(self, keeps: Keeps) -> bool {
        match keeps {
            Keeps::Aggregates => true,
            Keeps::Last => matches!(
                self,
                Aggregate::Count | Aggregate::Last | Aggregate::LastTime
            ),
        }
    }

    /// What a level must keep for a reader of `read` (the columns it reads).
    pub fn needs(read: impl IntoIterator<Item = Aggregate>) -> Keeps {
        match read.into_iter().all(|a| a.kept_by(Keeps::Last)) {
            true => Keeps::Last,
            false => Keeps::Aggregates,
        }
    }

    /// Whether a field of type `ty` keeps it: numbers keep all; strings
    /// and booleans their count, first and last; arrays nothing.
    pub fn applies_to(self, ty: FieldType) -> bool {
        match ty {
            FieldType::Float | FieldType::Integer | FieldType::UInteger => true,
            FieldType::String | FieldType::Boolean => {
                !matches!(self, Aggregate::Sum | Aggregate::Min | Aggregate::Max)
            }
            FieldType::FloatArray | FieldType::IntegerArray | FieldType::UIntegerArray => false,
        }
    }

    /// The column's type and codec for a field of type `ty`. Measured on
    /// 90 days of node-exporter counters' 5 m buckets (docs/benchmarks.md
    /// §20): 40 MiB with these, 152 MiB with the engine's default; the
    /// times regular per series, the values as the field's own.
    fn column_type(self, ty: FieldType) -> String {
        match (self, ty) {
            (Aggregate::Count, _) => format!("UInt64 {COUNT_CODEC}"),
            (Aggregate::FirstTime | Aggregate::LastTime, _) => {
                format!("Nullable(DateTime64(9, 'UTC')) {TIME_CODEC}")
            }
            _ => format!("{} {}", ty.clickhouse_type(), ty.codec()),
        }
    }

    /// Its value over the raw rows of a bucket, for field column `f`.
    fn of_rows(self, f: &str) -> String {
        match self {
            Aggregate::Count => format!("count({f})"),
            Aggregate::Sum => format!("sum({f})"),
            Aggregate::Min => format!("min({f})"),
            Aggregate::Max => format!("max({f})"),
            Aggregate::First => format!("argMinIf({f}, time, {f} IS NOT NULL)"),
            // NULL, not 1970, for a bucket without a value of the field: a
            // coarser level's `min` of these skips it.
            Aggregate::FirstTime => {
                format!("if(count({f}) = 0, NULL, minIf(time, {f} IS NOT NULL))")
            }
            Aggregate::Last => format!("argMaxIf({f}, time, {f} IS NOT NULL)"),
            Aggregate::LastTime => {
                format!("if(count({f}) = 0, NULL, maxIf(time, {f} IS NOT NULL))")
            }
        }
    }

    /// Its value over the finer buckets a bucket holds, whose columns are
    /// `column(field, aggregate)`.
    fn of_buckets(self, column: impl Fn(Aggregate) -> String) -> String {
        let (own, first, last) = (
            column(self),
            column(Aggregate::FirstTime),
            column(Aggregate::LastTime),
        );
        match self {
            Aggregate::Count | Aggregate::Sum => format!("sum({own})"),
            Aggregate::Min => format!("min({own})"),
            Aggregate::Max => format!("max({own})"),
            Aggregate::First => format!("argMinIf({own}, {first}, {first} IS NOT NULL)"),
            Aggregate::FirstTime => format!("min({own})"),
            Aggregate::Last => format!("argMaxIf({own}, {last}, {last} IS NOT NULL)"),
            Aggregate::LastTime => format!("max({own})"),
        }
    }
}

/// A bucket width as names show it: `5m`, `1h`, `1d`, else seconds.
pub fn interval_name(interval: Duration) -> String {
    let seconds = interval.as_secs();
    match seconds {
        s if s % 86_400 == 0 => format!("{}d", s / 86_400),
        s if s % 3600 == 0 => format!("{}h", s / 3600),
        s if s % 60 == 0 => format!("{}m", s / 60),
        s => format!("{s}s"),
    }
}

/// `column` (a `DateTime64`) in any of `spans` (`[from, to)`, ns;
/// `i64::MIN` and `i64::MAX` unbounded); `0` for none. Each span is a
/// range the primary key prunes.
pub fn time_in_sql(column: &str, spans: &[(i64, i64)]) -> String {
    let at = |ns: i64| format!("fromUnixTimestamp64Nano(toInt64({ns}))");
    let spans: Vec<String> = spans
        .iter()
        .map(|&(from, to)| {
            let mut bounds = Vec::new();
            if from != i64::MIN {
                bounds.push(format!("{column} >= {}", at(from)));
            }
            if to != i64::MAX {
                bounds.push(format!("{column} < {}", at(to)));
            }
            match bounds.is_empty() {
                true => "1".to_owned(),
                false => format!("({})", bounds.join(" AND ")),
            }
        })
        .collect();
    match spans.is_empty() {
        true => "0".to_owned(),
        false => format!("({})", spans.join(" OR ")),
    }
}

/// A rollup level: the width of its buckets and what it keeps of each.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Resolution {
    /// The width of its buckets.
    pub interval: Duration,
    /// What it keeps of each.
    pub keeps: Keeps,
}

impl Resolution {
    /// A level keeping every aggregate.
    pub fn aggregates(interval: Duration) -> Resolution {
        Resolution {
            interval,
            keeps: Keeps::Aggregates,
        }
    }

    /// The resolution of a configured level.
    pub fn of(level: &DownsamplingLevel) -> Resolution {
        Resolution {
            interval: level.interval,
            keeps: level.keeps,
        }
    }
}

/// As levels are written: `5m`, `1h:last`.
impl std::fmt::Display for Resolution {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}{}", interval_name(self.interval), self.keeps.suffix())
    }
}

/// A fact table's rows of blocks after `seen`, read from the parts that
/// hold any: a part's name holds its last block (`<partition>_<first>_<last>_<level>`),
/// and a condition on the name prunes the parts read before any is
/// opened (a condition on `_block_number` alone reads every part). Each
/// statement judges the parts it reads itself, so a merge between two
/// statements hides nothing.
pub fn blocks_after_sql(seen: u64) -> String {
    format!("toUInt64(splitByChar('_', _part)[3]) > {seen} AND _block_number > {seen}")
}

/// The (unquoted) name of the rollup at `resolution` of the fact table
/// `storage_name`: `_rollup.5m.cpu.autogen`, `_rollup.5m_last.cpu.autogen`.
/// The storage name is encoded already; `_` and `.` are not encoded
/// names' characters, so this cannot meet a measurement's.
pub fn rollup_name(storage_name: &str, resolution: Resolution) -> String {
    let keeps = match resolution.keeps {
        Keeps::Aggregates => "",
        Keeps::Last => "_last",
    };
    format!(
        "_rollup.{}{keeps}.{storage_name}",
        interval_name(resolution.interval)
    )
}

/// Whether `name` is the name of a rollup of the fact table `storage_name`
/// (at any width).
pub fn is_rollup_of(name: &str, storage_name: &str) -> bool {
    name.strip_prefix("_rollup.")
        .and_then(|rest| rest.split_once('.'))
        .is_some_and(|(_, table)| table == storage_name)
}

/// The column of a rollup holding the last block of the fact table its
/// bucket's build holds.
const THROUGH: &str = "_through";

/// The codec of counts and block numbers: small integers that T64 packs.
const COUNT_CODEC: &str = "CODEC(T64, ZSTD(1))";

/// One rollup table: the fact table it rolls up, its bucket width and
/// what it keeps.
#[derive(Debug, Clone)]
pub struct Rollup {
    /// `` `db`.`_rollup.5m.cpu.autogen` `` (a name starting with `_`, which
    /// the catalog never takes for a measurement's table).
    pub table: String,
    /// The width of its buckets.
    pub interval: Duration,
    /// What it keeps of each bucket.
    pub keeps: Keeps,
    fields: Vec<(String, FieldType)>,
}

/// The settings of a statement building buckets: points written again
/// read merged (also on a shard, whose connections do not set it), and
/// its threads at the lowest priority (nice 19), so that at full ingest
/// the inserts and queries keep the cores and passes take the idle time
/// (readers read the rows the rollups lack meanwhile).
const BUILD_SETTINGS: &str = "final = 1, os_thread_priority = 19";

impl Rollup {
    /// The rollup of the fact table `names` with `fields` at `resolution`.
    pub fn new(
        names: &TableNames,
        fields: &[(String, FieldType)],
        resolution: Resolution,
    ) -> Rollup {
        let name = rollup_name(&names.storage_name, resolution);
        let table = format!("{}.{}", names.database, quote_ident(&name));
        Rollup::named(&table, resolution, fields)
    }

    /// The level of `table` (quoted) at `resolution`, keeping what
    /// `fields` allow.
    pub fn named(table: &str, resolution: Resolution, fields: &[(String, FieldType)]) -> Rollup {
        Rollup {
            table: table.to_owned(),
            interval: resolution.interval,
            keeps: resolution.keeps,
            fields: fields
                .iter()
                .filter(|(_, ty)| Aggregate::Count.applies_to(*ty))
                .cloned()
                .collect(),
        }
    }

    /// Whether it keeps any field (array fields are not kept).
    pub fn keeps_fields(&self) -> bool {
        !self.fields.is_empty()
    }

    /// The name of the column keeping `aggregate` of `field`.
    pub fn column(field: &str, aggregate: Aggregate) -> String {
        quote_ident(&format!("{field}@{}", aggregate.suffix()))
    }

    /// `(quoted column, aggregate, field)` of every column but the key.
    fn columns(&self) -> impl Iterator<Item = (String, Aggregate, &(String, FieldType))> {
        self.fields.iter().flat_map(|field| {
            self.kept(field.1)
                .map(move |a| (Rollup::column(&field.0, a), a, field))
        })
    }

    /// Its level.
    pub fn resolution(&self) -> Resolution {
        Resolution {
            interval: self.interval,
            keeps: self.keeps,
        }
    }

    /// What it keeps of a field of type `ty`.
    fn kept(&self, ty: FieldType) -> impl Iterator<Item = Aggregate> {
        let keeps = self.keeps;
        Aggregate::ALL
            .into_iter()
            .filter(move |a| a.applies_to(ty) && a.kept_by(keeps))
    }

    /// Creates the table (and, with `IF NOT EXISTS`, leaves an existing
    /// one as it is; columns of new fields come from [`add_columns_sql`](Self::add_columns_sql)).
    pub fn create_sql(&self) -> String {
        let columns: String = self
            .columns()
            .map(|(column, a, (_, ty))| format!(", {column} {}", a.column_type(*ty)))
            .collect();
        format!(
            "CREATE TABLE IF NOT EXISTS {} (series_id UInt64 {SERIES_ID_CODEC}, \
             time DateTime64(9, 'UTC') {TIME_CODEC}{columns}, {THROUGH} UInt64 {COUNT_CODEC}) \
             ENGINE = ReplacingMergeTree ORDER BY (series_id, time) \
             SETTINGS non_replicated_deduplication_window = {DEDUP_WINDOW}",
            self.table
        )
    }

    /// Adds the columns of `added` fields, and `_through` (which tables of
    /// earlier versions lack), if missing.
    pub fn add_columns_sql(&self, added: &[(String, FieldType)]) -> String {
        let mut clauses: Vec<String> = added
            .iter()
            .flat_map(|(field, ty)| {
                self.kept(*ty).map(move |a| {
                    format!(
                        "ADD COLUMN IF NOT EXISTS {} {}",
                        Rollup::column(field, a),
                        a.column_type(*ty)
                    )
                })
            })
            .collect();
        clauses.push(format!(
            "ADD COLUMN IF NOT EXISTS {THROUGH} UInt64 {COUNT_CODEC}"
        ));
        format!("ALTER TABLE {} {}", self.table, clauses.join(", "))
    }

    /// Rebuilds the buckets of `[from, to)` (ns, multiples of the interval)
    /// from `source`: the fact table itself (its rows up to block
    /// `through`), or the rollup one level finer (whose buckets divide
    /// these, all holding the rows up to `through`); [`BUILD_SETTINGS`].
    pub fn rebuild_sql(
        &self,
        source: Source<'_>,
        from_ns: i64,
        to_ns: i64,
        through: u64,
    ) -> String {
        let (values, table, blocks) = match source {
            Source::Facts(table) => (
                self.values(|a, field| a.of_rows(&quote_ident(field))),
                table.to_owned(),
                format!(" AND _block_number <= {through}"),
            ),
            // Its newest builds only: older ones may be unmerged yet.
            Source::Rollup(finer) => (
                self.values(|a, field| a.of_buckets(|b| Rollup::column(field, b))),
                format!("{} FINAL", finer.table),
                String::new(),
            ),
        };
        let bucket = self.bucket_sql();
        format!(
            "INSERT INTO {} (series_id, time, {}, {THROUGH}) SELECT series_id, {bucket}, {}, {through} \
             FROM {table} WHERE {}{blocks} GROUP BY series_id, {bucket} SETTINGS {BUILD_SETTINGS}",
            self.table,
            self.column_list(),
            values.join(", "),
            time_in_sql("time", &[(from_ns, to_ns)]),
        )
    }

    /// Merges into the buckets of `[from, to)` (ns, multiples of the
    /// interval) the rows of `facts` (its quoted name) that they do not
    /// hold yet: those of blocks after `seen` (the last block every bucket
    /// holds) and after the bucket's own `_through`, up to `through`. For
    /// buckets whose rows are gone, so a rebuild would lose them; repeated
    /// (a crash before the pass is recorded) it adds nothing twice.
    pub fn merge_sql(
        &self,
        facts: &str,
        from_ns: i64,
        to_ns: i64,
        seen: u64,
        through: u64,
    ) -> String {
        let bucket = self.bucket_sql();
        let range = time_in_sql("time", &[(from_ns, to_ns)]);
        let fields: Vec<String> = self.fields.iter().map(|(f, _)| quote_ident(f)).collect();
        // The rows no bucket holds, each with its bucket.
        let new_rows = format!(
            "SELECT n.* FROM (SELECT series_id, {bucket} AS bucket, time, {} , _block_number AS block \
             FROM {facts} WHERE {range} AND {} AND _block_number <= {through}) AS n \
             LEFT JOIN (SELECT series_id, time AS bucket, {THROUGH} AS held FROM {} FINAL WHERE {range}) AS b \
             USING (series_id, bucket) WHERE n.block > b.held",
            fields.join(", "),
            blocks_after_sql(seen),
            self.table,
        );
        let of_rows = self.values(|a, field| a.of_rows(&quote_ident(field)));
        let of_buckets = self.values(|a, field| a.of_buckets(|b| Rollup::column(field, b)));
        format!(
            "INSERT INTO {table} (series_id, time, {columns}, {THROUGH}) \
             WITH new AS ({new_rows}) \
             SELECT series_id, time, {}, {through} FROM ( \
               SELECT series_id, time, {columns} FROM {table} FINAL WHERE {range} \
                 AND (series_id, time) IN (SELECT series_id, bucket FROM new) \
               UNION ALL SELECT series_id, bucket, {} FROM new GROUP BY series_id, bucket) \
             GROUP BY series_id, time SETTINGS {BUILD_SETTINGS}",
            of_buckets.join(", "),
            of_rows.join(", "),
            table = self.table,
            columns = self.column_list(),
        )
    }

    /// The bucket of a row's `time`.
    fn bucket_sql(&self) -> String {
        format!(
            "toStartOfInterval(time, INTERVAL {} SECOND)",
            self.interval.as_secs()
        )
    }

    /// The kept columns' names, in order.
    fn column_list(&self) -> String {
        let columns: Vec<String> = self.columns().map(|(column, _, _)| column).collect();
        columns.join(", ")
    }

    /// Each kept column's value, in order, as `value(aggregate, field)`.
    // Positions, not aliases, map the values onto the columns: an alias
    // named like a source column would be read inside the other
    // aggregates in its place.
    fn values(&self, value: impl Fn(Aggregate, &str) -> String) -> Vec<String> {
        self.columns()
            .map(|(_, a, (field, _))| value(a, field))
            .collect()
    }

    /// The buckets of `[from, to)` (ns) as rows of the fact table (`time`,
    /// `series_id`, then `facts`' fields in order): one per bucket, each
    /// field at its `at` value (`Last` or `First`; `Last` where the level
    /// keeps no other), at the latest (or earliest) of their times; fields
    /// the rollup does not keep are NULL (arrays empty). What a read of
    /// the rows gets where they are gone.
    pub fn as_rows_sql(
        &self,
        facts: &[(String, FieldType)],
        from_ns: i64,
        to_ns: i64,
        at: Aggregate,
    ) -> String {
        let at = match at.kept_by(self.keeps) {
            true => at,
            false => Aggregate::Last,
        };
        // A field without a value in the bucket takes no part in the pick.
        let (at_time, pick, absent) = match at {
            Aggregate::First => (
                Aggregate::FirstTime,
                "least",
                format!("time + toIntervalSecond({})", self.interval.as_secs()),
            ),
            _ => (Aggregate::LastTime, "greatest", "time".to_owned()),
        };
        let mut times = Vec::new();
        let mut values = Vec::new();
        for (field, ty) in facts {
            let kept = self.fields.iter().any(|(f, t)| f == field && t == ty);
            values.push(match (kept, ty.clickhouse_type()) {
                (true, _) => Rollup::column(field, at),
                (false, name) if ty.is_array() => format!("CAST([], '{name}')"),
                (false, name) => format!("CAST(NULL, '{name}')"),
            });
            if kept {
                times.push(format!(
                    "ifNull({}, {absent})",
                    Rollup::column(field, at_time)
                ));
            }
        }
        let time = match times.len() {
            0 => "time".to_owned(),
            1 => times.remove(0),
            _ => format!("{pick}({})", times.join(", ")),
        };
        let mut columns = vec![time, "series_id".to_owned()];
        columns.extend(values);
        format!(
            "SELECT {} FROM (SELECT * FROM {} FINAL WHERE {})",
            columns.join(", "),
            self.table,
            time_in_sql("time", &[(from_ns, to_ns)])
        )
    }
}

impl Rollup {
    /// Deletes the buckets of `[from, to)` (ns) that no bucket of `finer`
    /// falls in: after they were rebuilt from it following an edit, which
    /// can leave a bucket with nothing to replace it. (Where readers read
    /// a level, it is rebuilt first and emptied buckets deleted after, so
    /// that a reader never sees a bucket missing that is still there.)
    pub fn delete_emptied_sql(&self, finer: &Rollup, from_ns: i64, to_ns: i64) -> String {
        let range = time_in_sql("time", &[(from_ns, to_ns)]);
        format!(
            "DELETE FROM {} WHERE {range} AND (series_id, time) NOT IN \
             (SELECT series_id, {} FROM {} FINAL WHERE {range})",
            self.table,
            self.bucket_sql(),
            finer.table
        )
    }

    /// Deletes the buckets of `[from, to)` (ns): before they are rebuilt
    /// after an edit, which can leave a bucket with no row to replace it.
    pub fn delete_sql(&self, from_ns: i64, to_ns: i64) -> String {
        format!(
            "DELETE FROM {} WHERE {}",
            self.table,
            time_in_sql("time", &[(from_ns, to_ns)])
        )
    }
}

/// What a rollup is rebuilt from.
#[derive(Debug, Clone, Copy)]
pub enum Source<'a> {
    /// The fact table (its quoted name).
    Facts(&'a str),
    /// The rollup one level finer.
    Rollup(&'a Rollup),
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cpu() -> (TableNames, Vec<(String, FieldType)>) {
        let names = TableNames::new("db", "autogen", "cpu");
        let fields = vec![
            ("usage".to_owned(), FieldType::Float),
            ("state".to_owned(), FieldType::String),
            ("buckets".to_owned(), FieldType::FloatArray),
        ];
        (names, fields)
    }

    #[test]
    fn a_rollup_keeps_what_each_field_type_can_give() {
        let (names, fields) = cpu();
        let rollup = Rollup::new(
            &names,
            &fields,
            Resolution::aggregates(Duration::from_secs(300)),
        );
        assert_eq!(rollup.table, "`db`.`_rollup.5m.cpu.autogen`");
        let sql = rollup.create_sql();
        for column in [
            "`usage@sum`",
            "`usage@max`",
            "`usage@last_time`",
            "`state@first`",
        ] {
            assert!(sql.contains(column), "{column}: {sql}");
        }
        for absent in ["`state@sum`", "buckets"] {
            assert!(!sql.contains(absent), "{absent}: {sql}");
        }
        assert_eq!(
            crate::layout::names::parse_storage_name("_rollup.5m.cpu.autogen"),
            None,
            "the catalog must never take a rollup for a measurement's table"
        );
    }

    #[test]
    fn a_level_keeping_the_last_sample_has_its_columns_alone() {
        let (names, fields) = cpu();
        let last = Resolution {
            interval: Duration::from_secs(300),
            keeps: Keeps::Last,
        };
        let rollup = Rollup::new(&names, &fields, last);
        assert_eq!(rollup.table, "`db`.`_rollup.5m_last.cpu.autogen`");
        assert!(is_rollup_of("_rollup.5m_last.cpu.autogen", "cpu.autogen"));
        let sql = rollup.create_sql();
        for column in [
            "`usage@count`",
            "`usage@last`",
            "`usage@last_time`",
            "`state@last`",
        ] {
            assert!(sql.contains(column), "{column}: {sql}");
        }
        for absent in ["@sum`", "@min`", "@max`", "@first`", "@first_time`"] {
            assert!(!sql.contains(absent), "{absent}: {sql}");
        }
        // A read of its buckets as rows takes the last sample, whatever it asks.
        let rows = rollup.as_rows_sql(&fields, 0, 1, Aggregate::First);
        assert!(
            rows.contains("`usage@last`") && !rows.contains("@first"),
            "{rows}"
        );
        // What a reader needs follows from the columns it reads.
        let needs = Aggregate::needs;
        assert_eq!(needs([Aggregate::Count, Aggregate::LastTime]), Keeps::Last);
        assert_eq!(needs([Aggregate::Last, Aggregate::Max]), Keeps::Aggregates);
    }

    #[test]
    fn time_spans_leave_out_unbounded_ends() {
        assert_eq!(time_in_sql("t", &[]), "0");
        assert_eq!(
            time_in_sql("t", &[(i64::MIN, 3), (4, 5)]),
            "((t < fromUnixTimestamp64Nano(toInt64(3))) OR \
             (t >= fromUnixTimestamp64Nano(toInt64(4)) AND t < fromUnixTimestamp64Nano(toInt64(5))))"
        );
    }

    #[test]
    fn interval_names_are_short() {
        for (seconds, name) in [
            (300, "5m"),
            (3600, "1h"),
            (86_400, "1d"),
            (90, "90s"),
            (7200, "2h"),
        ] {
            assert_eq!(interval_name(Duration::from_secs(seconds)), name);
        }
    }
}
