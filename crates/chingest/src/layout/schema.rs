//! Field types and table schemas: what a fact table's columns are, how each
//! maps to ClickHouse and Arrow types, and the DDL that creates or extends the
//! tables.
//!
//! A fact table is `(time DateTime64(9, 'UTC'), series_id UInt64, <field>
//! Nullable(<type>)...)`, `ORDER BY (series_id, time)`. Fields are Nullable so
//! a row that lacks a field stores NULL, never a zero that was not written.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use lineproto::FieldValue;

use crate::config::DuplicatePolicy;
use crate::layout::names::{quote_ident, quote_literal, TableNames};

/// The five InfluxDB field types, and arrays of numbers for the values
/// line protocol cannot carry (histogram buckets and bounds, quantiles)
/// that Arrow writes bring.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FieldType {
    /// 64-bit float.
    Float,
    /// Signed 64-bit integer (`i` suffix).
    Integer,
    /// Unsigned 64-bit integer (`u` suffix).
    UInteger,
    /// UTF-8 string.
    String,
    /// Boolean.
    Boolean,
    /// An array of 64-bit floats.
    FloatArray,
    /// An array of signed 64-bit integers.
    IntegerArray,
    /// An array of unsigned 64-bit integers.
    UIntegerArray,
}

impl FieldType {
    /// The type of a parsed field value.
    pub fn of(value: &FieldValue<'_>) -> FieldType {
        match value {
            FieldValue::Float(_) => FieldType::Float,
            FieldValue::Integer(_) => FieldType::Integer,
            FieldValue::UInteger(_) => FieldType::UInteger,
            FieldValue::String(_) => FieldType::String,
            FieldValue::Boolean(_) => FieldType::Boolean,
        }
    }

    /// The column type in ClickHouse.
    pub fn clickhouse_type(self) -> &'static str {
        match self {
            FieldType::Float => "Nullable(Float64)",
            FieldType::Integer => "Nullable(Int64)",
            FieldType::UInteger => "Nullable(UInt64)",
            FieldType::String => "Nullable(String)",
            FieldType::Boolean => "Nullable(Bool)",
            // Arrays cannot be Nullable: a row without one stores [].
            FieldType::FloatArray => "Array(Float64)",
            FieldType::IntegerArray => "Array(Int64)",
            FieldType::UIntegerArray => "Array(UInt64)",
        }
    }

    /// The column's compression codec, chosen by measuring each on the
    /// TSBS load and on typical values of the other types (bytes per value
    /// after merges, with the default LZ4 beside it; docs/benchmarks.md
    /// §10). Integers: `T64` crops the unused high bits, then ZSTD — 0.54
    /// against 2.3 bytes per value, inserts no slower. Floats: `Delta` (on
    /// the bits, lossless) then ZSTD — counters, most of what Prometheus
    /// sends, store in 0.34 against 1.56 bytes per value (ZSTD alone), and
    /// decimal gauges and noise within 2% of ZSTD alone; `Gorilla` doubles
    /// decimal gauges and `FPC` only wins on noise. Strings and booleans: ZSTD (LowCardinality won
    /// on a 3-value string but lost on free text and made inserts 1.7×
    /// slower; a field's cardinality is not known when it is created).
    /// Arrays: ZSTD (bucket counts and bounds are short and repetitive).
    pub fn codec(self) -> &'static str {
        match self {
            FieldType::Integer | FieldType::UInteger => "CODEC(T64, ZSTD(1))",
            FieldType::Float => "CODEC(Delta, ZSTD(1))",
            FieldType::String
            | FieldType::Boolean
            | FieldType::FloatArray
            | FieldType::IntegerArray
            | FieldType::UIntegerArray => "CODEC(ZSTD(1))",
        }
    }

    /// Parses a column type as the engine's catalog reports it.
    pub fn from_clickhouse(type_name: &str) -> Option<FieldType> {
        Some(match type_name {
            "Nullable(Float64)" => FieldType::Float,
            "Nullable(Int64)" => FieldType::Integer,
            "Nullable(UInt64)" => FieldType::UInteger,
            "Nullable(String)" => FieldType::String,
            "Nullable(Bool)" => FieldType::Boolean,
            "Array(Float64)" => FieldType::FloatArray,
            "Array(Int64)" => FieldType::IntegerArray,
            "Array(UInt64)" => FieldType::UIntegerArray,
            _ => return None,
        })
    }

    /// The field type of a column of batches chingest built (the inverse
    /// of [`arrow_type`](Self::arrow_type)).
    pub fn from_arrow(data_type: &DataType) -> Option<FieldType> {
        Some(match data_type {
            DataType::Float64 => FieldType::Float,
            DataType::Int64 => FieldType::Integer,
            DataType::UInt64 => FieldType::UInteger,
            DataType::Utf8 => FieldType::String,
            DataType::Boolean => FieldType::Boolean,
            DataType::List(item) => match item.data_type() {
                DataType::Float64 => FieldType::FloatArray,
                DataType::Int64 => FieldType::IntegerArray,
                DataType::UInt64 => FieldType::UIntegerArray,
                _ => return None,
            },
            _ => return None,
        })
    }

    /// The Arrow type batches carry for this field.
    pub fn arrow_type(self) -> DataType {
        match self {
            FieldType::Float => DataType::Float64,
            FieldType::Integer => DataType::Int64,
            FieldType::UInteger => DataType::UInt64,
            FieldType::String => DataType::Utf8,
            FieldType::Boolean => DataType::Boolean,
            FieldType::FloatArray => list_type(DataType::Float64),
            FieldType::IntegerArray => list_type(DataType::Int64),
            FieldType::UIntegerArray => list_type(DataType::UInt64),
        }
    }

    /// Whether this is one of the array types.
    pub fn is_array(self) -> bool {
        matches!(
            self,
            FieldType::FloatArray | FieldType::IntegerArray | FieldType::UIntegerArray
        )
    }
}

impl fmt::Display for FieldType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FieldType::Float => "float",
            FieldType::Integer => "integer",
            FieldType::UInteger => "unsigned",
            FieldType::String => "string",
            FieldType::Boolean => "boolean",
            FieldType::FloatArray => "float array",
            FieldType::IntegerArray => "integer array",
            FieldType::UIntegerArray => "unsigned array",
        })
    }
}

/// The Arrow list type of an array field: Arrow's usual `item` child,
/// nullable as list builders make it (the values are never NULL).
pub fn list_type(item: DataType) -> DataType {
    DataType::List(Arc::new(Field::new("item", item, true)))
}

/// The Arrow type of the `time` column: nanoseconds, UTC, exactly what a
/// `DateTime64(9, 'UTC')` column takes (an Int64 would be read as seconds).
pub fn time_type() -> DataType {
    DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
}

/// One fact table's columns, as known to this process. Immutable: a schema
/// change produces a new `TableSchema`.
#[derive(Debug, Clone)]
pub struct TableSchema {
    /// The table's names in the engine.
    pub names: TableNames,
    /// Field columns in table order.
    pub fields: Vec<(String, FieldType)>,
    index: HashMap<String, usize>,
}

impl TableSchema {
    /// A schema with the given field columns.
    pub fn new(names: TableNames, fields: Vec<(String, FieldType)>) -> Self {
        let index = fields
            .iter()
            .enumerate()
            .map(|(i, (name, _))| (name.clone(), i))
            .collect();
        TableSchema {
            names,
            fields,
            index,
        }
    }

    /// Position and type of a field column.
    pub fn field(&self, name: &str) -> Option<(usize, FieldType)> {
        self.index.get(name).map(|&i| (i, self.fields[i].1))
    }

    /// This schema plus new columns (already absent from it).
    pub fn with_fields(&self, added: &[(String, FieldType)]) -> TableSchema {
        let mut fields = self.fields.clone();
        fields.extend(added.iter().cloned());
        TableSchema::new(self.names.clone(), fields)
    }

    /// The Arrow schema of a batch holding the field columns `present`
    /// (positions into `fields`, ascending).
    pub fn arrow_schema(&self, present: &[usize]) -> SchemaRef {
        let mut columns = Vec::with_capacity(present.len() + 2);
        columns.push(Field::new("time", time_type(), false));
        columns.push(Field::new("series_id", DataType::UInt64, false));
        for &i in present {
            let (name, ty) = &self.fields[i];
            columns.push(Field::new(name, ty.arrow_type(), true));
        }
        Arc::new(Schema::new(columns))
    }
}

/// The retention-policy registry of a database: one row per policy,
/// `duration_seconds` 0 meaning forever.
pub fn retention_policies_table_sql(names: &TableNames, keeper_path: Option<&str>) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (name String, duration_seconds UInt64, \
         updated DateTime64(3)) ENGINE = {} ORDER BY name",
        names.retention_table,
        table_engine("ReplacingMergeTree", "updated", keeper_path)
    )
}

/// The engine clause of a table of the `family` (`MergeTree`,
/// `ReplacingMergeTree`, …) with the engine arguments `args`: replicated
/// when a Keeper path is given, registered at
/// `<keeper_path>/{shard}/{database}/{table}` as replica `{replica}` —
/// the macros of every replicated ClickHouse server, so the same statement
/// makes every replica of every shard.
pub fn table_engine(family: &str, args: &str, keeper_path: Option<&str>) -> String {
    match (keeper_path, args) {
        (None, "") => family.to_owned(),
        (None, args) => format!("{family}({args})"),
        (Some(path), args) => {
            let path = quote_literal(&format!("{path}/{{shard}}/{{database}}/{{table}}"));
            let args = if args.is_empty() {
                String::new()
            } else {
                format!(", {args}")
            };
            format!("Replicated{family}({path}, '{{replica}}'{args})")
        }
    }
}

/// The longest retention that still gets daily partitions (InfluxDB's
/// rule for shard groups of one day): 183 days.
pub const DAILY_PARTITIONS_UP_TO_SECONDS: u64 = 183 * 86_400;

/// How a fact table is partitioned by time, chosen from its retention
/// policy's duration when the table is created. A partition is what
/// retention drops whole; an insert makes a part per partition its rows
/// touch. Measured (docs/benchmarks.md §10): live inserts cost the same
/// at any granularity; a backfill whose every 125k-row insert spans 30 days
/// took 2.0× as long with days, 1.45× with weeks, 1.0× with months. So:
/// days for policies up to 183 days (retention is then exact to a day),
/// and in downsampled databases (`daily`: their rows go a day at a time
/// once rolled up), weeks for longer ones, months when nothing expires.
pub fn partition_clause(ttl_seconds: u64, daily: bool) -> &'static str {
    match ttl_seconds {
        _ if daily => "toDate(time)",
        0 => "toYYYYMM(time)",
        s if s <= DAILY_PARTITIONS_UP_TO_SECONDS => "toDate(time)",
        _ => "toMonday(time)",
    }
}

/// The duplicate-policy registry of a database: one row per measurement
/// with a policy of its own, `''` for the database's.
pub fn duplicate_policies_table_sql(names: &TableNames, keeper_path: Option<&str>) -> String {
    format!(
        "CREATE TABLE IF NOT EXISTS {} (measurement String, policy String, \
         updated DateTime64(3)) ENGINE = {} ORDER BY measurement",
        names.duplicate_policies_table,
        table_engine("ReplacingMergeTree", "updated", keeper_path)
    )
}

/// The TTL clause of a storage table whose rows live `seconds` (0: forever).
pub fn ttl_clause(seconds: u64) -> String {
    if seconds == 0 {
        String::new()
    } else {
        format!(" TTL toDateTime(time) + INTERVAL {seconds} SECOND")
    }
}

/// Sets (or, for 0, removes) the TTL of a storage table.
pub fn alter_ttl_sql(names: &TableNames, seconds: u64) -> String {
    if seconds == 0 {
        format!("ALTER TABLE {} REMOVE TTL", names.storage_table)
    } else {
        format!(
            "ALTER TABLE {} MODIFY{}",
            names.storage_table,
            ttl_clause(seconds)
        )
    }
}

/// `CREATE DATABASE`, the series table and the policy registries, their
/// tables replicated if `keeper_path` is given ([`table_engine`]).
pub fn create_database_sql(names: &TableNames, keeper_path: Option<&str>) -> [String; 4] {
    [
        format!("CREATE DATABASE IF NOT EXISTS {}", names.database),
        retention_policies_table_sql(names, keeper_path),
        duplicate_policies_table_sql(names, keeper_path),
        format!(
            "CREATE TABLE IF NOT EXISTS {} (series_id UInt64, measurement String, \
             tags Map(String, String)) ENGINE = {} ORDER BY series_id \
             SETTINGS index_granularity = 256, {PATCHABLE}",
            names.series_table,
            table_engine("ReplacingMergeTree", "", keeper_path)
        ),
    ]
}

fn column_defs(fields: &[(String, FieldType)]) -> String {
    fields
        .iter()
        .map(|(name, ty)| format!(", {}", column_def(name, *ty)))
        .collect()
}

/// A field column's name, type and codec.
fn column_def(name: &str, ty: FieldType) -> String {
    format!(
        "{} {} {}",
        quote_ident(name),
        ty.clickhouse_type(),
        ty.codec()
    )
}

/// The codecs of chingest's own columns: `time` is regular within a
/// series (`DoubleDelta` stores a fixed interval in almost nothing),
/// `series_id` runs long in the sort order.
pub(crate) const TIME_CODEC: &str = "CODEC(DoubleDelta, ZSTD(1))";
pub(crate) const SERIES_ID_CODEC: &str = "CODEC(ZSTD(1))";

/// Inserts per fact table whose deduplication tokens the engine remembers.
/// Replay repeats only the inserts that started but were not logged as
/// committed — at most `flush.concurrency` per table, the most recent — so
/// the window only has to cover a table's last few inserts; 1,000 leaves
/// room for any interleaving.
pub const DEDUP_WINDOW: u32 = 1000;

/// The table settings that let updates and deletes write small patch
/// parts instead of rewriting whole parts (the engine's lightweight
/// updates): each row keeps its block number and offset. Measured on 10 M
/// rows: an update of one series' hour in 0.03 s, a delete in 0.014 s,
/// where a delete as a mutation took 1.8–4 s (docs/benchmarks.md §10).
pub const PATCHABLE: &str = "enable_block_number_column = 1, enable_block_offset_column = 1";

/// Makes an existing table (of an earlier version) [`PATCHABLE`].
pub fn patchable_sql(table: &str) -> String {
    format!("ALTER TABLE {table} MODIFY SETTING {PATCHABLE}")
}

/// Gives an existing storage table the deduplication window replay needs.
pub fn dedup_window_sql(names: &TableNames) -> String {
    format!(
        "ALTER TABLE {} MODIFY SETTING non_replicated_deduplication_window = {DEDUP_WINDOW}",
        names.storage_table
    )
}

/// The fact table: a MergeTree, which inserts and queries both use (rows
/// reach it in large batches from the write-ahead log, so no Buffer table
/// is needed in front; reading through one made lookups 1.7× slower,
/// docs/benchmarks.md §9). Partitioned by time ([`partition_clause`]);
/// retention drops whole parts once all their rows expired
/// (`ttl_only_drop_parts`), never rewriting a part row by row. Rows carry
/// their block number and offset ([`PATCHABLE`]). The engine keeps what
/// `duplicates` says of points written again; it is replicated if
/// `keeper_path` is given ([`table_engine`]).
pub fn create_table_sql(
    schema: &TableSchema,
    ttl_seconds: u64,
    daily: bool,
    duplicates: DuplicatePolicy,
    keeper_path: Option<&str>,
) -> String {
    let names = &schema.names;
    format!(
        "CREATE TABLE IF NOT EXISTS {} (time DateTime64(9, 'UTC') {TIME_CODEC}, \
         series_id UInt64 {SERIES_ID_CODEC}{}) \
         ENGINE = {} PARTITION BY {} ORDER BY (series_id, time){} \
         SETTINGS non_replicated_deduplication_window = {DEDUP_WINDOW}, ttl_only_drop_parts = 1, \
         {PATCHABLE}",
        names.storage_table,
        column_defs(&schema.fields),
        table_engine(duplicates.engine(), "", keeper_path),
        partition_clause(ttl_seconds, daily),
        ttl_clause(ttl_seconds)
    )
}

/// Gives `columns` of a fact table their codecs (tables of earlier versions
/// have none): new parts are written with them, old ones as they merge.
/// Names that are not columns of `schema` are skipped; `None` if none is
/// left.
pub fn add_codecs_sql(schema: &TableSchema, columns: &[String]) -> Option<String> {
    let modify: Vec<String> = columns
        .iter()
        .filter_map(|name| match name.as_str() {
            "time" => Some(format!("time DateTime64(9, 'UTC') {TIME_CODEC}")),
            "series_id" => Some(format!("series_id UInt64 {SERIES_ID_CODEC}")),
            field => schema.field(field).map(|(_, ty)| column_def(field, ty)),
        })
        .map(|column| format!("MODIFY COLUMN {column}"))
        .collect();
    (!modify.is_empty()).then(|| {
        format!(
            "ALTER TABLE {} {}",
            schema.names.storage_table,
            modify.join(", ")
        )
    })
}

/// Adds field columns to the fact table.
pub fn add_columns_sql(names: &TableNames, added: &[(String, FieldType)]) -> String {
    let adds = added
        .iter()
        .map(|(name, ty)| format!("ADD COLUMN IF NOT EXISTS {}", column_def(name, *ty)))
        .collect::<Vec<_>>()
        .join(", ");
    format!("ALTER TABLE {} {adds}", names.storage_table)
}

/// The comment every view carries: which definition made it. A view with
/// another comment was made by an older version and is recreated at open.
pub const VIEW_VERSION: &str = "chingest view 2";

/// The view that shows a measurement with one column per tag and per field:
/// the facts joined with their series' tags. A tag whose key is also a
/// field's name is shown as `<key>_tag`.
///
/// An inner join on the series table read `FINAL` (one row per series
/// while the ReplacingMergeTree still holds duplicates): with it the engine
/// narrows the fact scan to the series a tag filter matched (a join runtime
/// filter, its granules pruned by the primary key), where the earlier
/// `LEFT JOIN` on a grouped subquery read every fact row: the last point of
/// one host by tag went from 10.1 to 5.8 ms for one field, from 15.7 to
/// 12.5 ms for every column (docs/benchmarks.md §9). Every fact row has its
/// series row (series are committed first), so the inner join drops nothing.
pub fn view_sql<'a>(
    schema: &TableSchema,
    measurement: &str,
    tag_keys: impl IntoIterator<Item = &'a String>,
) -> String {
    let names = &schema.names;
    let mut columns = String::from("f.time AS time");
    for key in tag_keys {
        let column = if schema.field(key).is_some() {
            format!("{key}_tag")
        } else {
            key.clone()
        };
        columns.push_str(&format!(
            ", s.tags[{}] AS {}",
            quote_literal(key),
            quote_ident(&column)
        ));
    }
    for (field, _) in &schema.fields {
        let field = quote_ident(field);
        columns.push_str(&format!(", f.{field} AS {field}"));
    }
    format!(
        "CREATE OR REPLACE VIEW {} AS SELECT {columns} FROM {} AS f INNER JOIN \
         (SELECT series_id, tags FROM {} FINAL WHERE measurement = {}) AS s \
         USING series_id COMMENT {}",
        names.view,
        names.storage_table,
        names.series_table,
        quote_literal(measurement),
        quote_literal(VIEW_VERSION),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replicated_engines_name_their_keeper_path_and_replica_by_macros() {
        assert_eq!(table_engine("MergeTree", "", None), "MergeTree");
        assert_eq!(
            table_engine("ReplacingMergeTree", "updated", None),
            "ReplacingMergeTree(updated)"
        );
        assert_eq!(
            table_engine("CoalescingMergeTree", "", Some("/ch/tables")),
            "ReplicatedCoalescingMergeTree('/ch/tables/{shard}/{database}/{table}', '{replica}')"
        );
        assert_eq!(
            table_engine("ReplacingMergeTree", "updated", Some("/it's")),
            "ReplicatedReplacingMergeTree('/it\\'s/{shard}/{database}/{table}', '{replica}', updated)"
        );
    }
}
