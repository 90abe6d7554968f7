//! Leases: work that one node of a cluster does at a time.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;
use std::time::Duration;

use crate::clock::now_ns;
use crate::cluster::{Cluster, StatementKind};
use crate::error::Result;
use crate::layout::names::{quote_ident, TableNames};

/// The right to do work one node of a cluster does at a time (a
/// database's downsampling passes, the rules' evaluation), held by one
/// node per term (a stretch of time the same on every node whose clock
/// agrees). A node claims a term by inserting its id into the lease's
/// table in the database, on the first shard, under the deduplication
/// token of the term: the first insert of a token is stored, later ones
/// are dropped as duplicates, so every node reads the same holder back.
/// The holder of a term also claims the next one, so a live holder keeps
/// the lease; when it dies, another node takes it from the term after the
/// next.
#[derive(Debug)]
pub(crate) struct Lease {
    /// This node's id, random per process.
    pub(crate) node: u64,
    term: Duration,
    /// The lease's table in each database it is held on.
    table: &'static str,
    /// Databases whose lease table this process made.
    made: Mutex<HashSet<String>>,
    /// By database, the last term read and whether this node holds it
    /// (a term's holder never changes once read).
    read: Mutex<HashMap<String, (u64, bool)>>,
}

impl Lease {
    /// A lease whose terms last `term`, kept in each database's `table`,
    /// for a node new to the cluster.
    pub(crate) fn new(term: Duration, table: &'static str) -> Lease {
        let seed = format!("{}:{}:{table}", std::process::id(), now_ns());
        Lease {
            node: xxhash_rust::xxh3::xxh3_64(seed.as_bytes()),
            term,
            table,
            made: Mutex::default(),
            read: Mutex::default(),
        }
    }

    /// Whether this node holds the lease on `database` (encoded names as
    /// [`TableNames`]) now: read once per term.
    pub(crate) async fn holds(&self, cluster: &Cluster, database: &TableNames) -> Result<bool> {
        let table = format!("{}.{}", database.database, quote_ident(self.table));
        if !self.made.lock().unwrap().contains(&database.database_name) {
            let create = format!(
                "CREATE TABLE IF NOT EXISTS {table} (term UInt64, node UInt64) \
                 ENGINE = MergeTree ORDER BY term \
                 SETTINGS non_replicated_deduplication_window = 1000"
            );
            // On every shard, as the tables a `Distributed` one is made
            // over; used on the first.
            cluster
                .execute_everywhere(&create, StatementKind::Create)
                .await?;
            self.made
                .lock()
                .unwrap()
                .insert(database.database_name.clone());
        }
        let term = (now_ns().max(0) as u64) / self.term.as_nanos().max(1) as u64;
        if let Some((read, holds)) = self.read.lock().unwrap().get(&database.database_name) {
            if *read == term {
                return Ok(*holds);
            }
        }
        let holders = |rows: Vec<Vec<String>>| -> HashMap<u64, u64> {
            let mut holders = HashMap::new();
            // The first row of a term is its holder (only one is stored
            // unless a claim came more than 1,000 terms late).
            for row in rows {
                if let (Some(Ok(term)), Some(Ok(node))) = (
                    row.first().map(|t| t.parse()),
                    row.get(1).map(|n| n.parse()),
                ) {
                    holders.entry(term).or_insert(node);
                }
            }
            holders
        };
        let read = format!(
            "SELECT term, node FROM {table} WHERE term IN ({term}, {}) ORDER BY term, _block_number",
            term + 1
        );
        let mut held = holders(cluster.query_rows(0, &read).await?);
        if !held.contains_key(&term) {
            self.claim(cluster, &table, term).await?;
            held = holders(cluster.query_rows(0, &read).await?);
        }
        let holds = held.get(&term) == Some(&self.node);
        if holds && !held.contains_key(&(term + 1)) {
            self.claim(cluster, &table, term + 1).await?;
        }
        self.read
            .lock()
            .unwrap()
            .insert(database.database_name.clone(), (term, holds));
        Ok(holds)
    }

    async fn claim(&self, cluster: &Cluster, table: &str, term: u64) -> Result<()> {
        let sql = format!(
            "INSERT INTO {table} (term, node) SETTINGS insert_deduplication_token = \
             'term-{term}' VALUES ({term}, {})",
            self.node
        );
        cluster.execute_on(0, &sql, StatementKind::Change).await
    }
}
