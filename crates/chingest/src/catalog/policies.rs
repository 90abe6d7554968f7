//! What a database's registries record of its policies (retention and
//! duplicates), read in one statement, and what every new table gets
//! unless its database says otherwise.

use arrow::array::AsArray;

use crate::config::DuplicatePolicy;
use crate::engine;
use crate::error::Result;
use crate::layout::names::{self, quote_literal, TableNames};

/// What every new table gets unless its database says otherwise.
#[derive(Debug, Default)]
pub(crate) struct TableDefaults {
    /// The retention policy whose tables get a view named after the
    /// measurement ([`IngestConfig::view_retention_policy`](crate::IngestConfig::view_retention_policy)).
    pub(crate) view_rp: Option<String>,
    /// The duplicate policy of tables whose database and measurement set
    /// none.
    pub(crate) duplicates: DuplicatePolicy,
    /// The downsampled databases: their tables get daily partitions
    /// (tables made before a database is downsampled keep theirs).
    pub(crate) downsampled: std::sync::RwLock<std::collections::BTreeSet<String>>,
}

/// A policy recorded in a database's registries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Policy {
    /// A retention policy and the seconds its rows live (0: forever).
    Retention(String, u64),
    /// The duplicate policy of a measurement (`""`: of the database).
    Duplicates(String, DuplicatePolicy),
}

/// The policies the registries of `databases` (encoded names) record, by
/// database: one statement (on open, and on each refresh of the
/// `clickhouse` storage mode, where another node may have set them).
pub(crate) fn read_policies(
    conn: &engine::Connection,
    databases: &[String],
) -> Result<Vec<(String, Policy)>> {
    if databases.is_empty() {
        return Ok(Vec::new());
    }
    let selects: Vec<String> = databases
        .iter()
        .filter_map(|encoded| {
            let names = TableNames::new(&names::decode(encoded)?, "", "");
            let db = quote_literal(encoded);
            Some(format!(
                "SELECT {db} AS db, 'retention' AS kind, name AS key, \
                 toString(duration_seconds) AS value FROM {} FINAL \
                 UNION ALL SELECT {db}, 'duplicates', measurement, policy FROM {} FINAL",
                names.retention_table, names.duplicate_policies_table
            ))
        })
        .collect();
    let mut policies = Vec::new();
    // Through Arrow: measurement names may hold tabs and newlines.
    for batch in engine::query_arrow(conn, &selects.join(" UNION ALL "))? {
        let column = |i: usize| batch.column(i).as_string::<i32>().clone();
        let (db, kind, key, value) = (column(0), column(1), column(2), column(3));
        for row in 0..batch.num_rows() {
            let key = key.value(row).to_owned();
            let policy = match kind.value(row) {
                "retention" => Policy::Retention(key, value.value(row).parse().unwrap_or(0)),
                _ => match value.value(row).parse::<DuplicatePolicy>() {
                    Ok(policy) => Policy::Duplicates(key, policy),
                    Err(_) => continue,
                },
            };
            policies.push((db.value(row).to_owned(), policy));
        }
    }
    Ok(policies)
}
