//! The shards of a ClickHouse cluster, for the `clickhouse` storage mode
//! ([`StorageMode::ClickHouse`](crate::StorageMode::ClickHouse)): where a
//! series lives ([`shard_of`]), and the requests chingest sends a shard
//! over its HTTP interface — DDL, small queries, and inserts of Arrow
//! batches (`FORMAT ArrowStream`) under a deduplication token.
//!
//! Reads do not come here: the embedded engine's `Distributed` tables
//! reach the shards over the native protocol, through the cluster this
//! module describes in the engine's configuration ([`Cluster::engine_config`]).

use std::sync::Arc;
use std::time::Duration;

use arrow::array::{Array, UInt32Array, UInt64Array};
use arrow::record_batch::RecordBatch;

use crate::config::ClusterConfig;
use crate::error::{Error, Result};
use crate::layout::names::{column_list, dedup_setting};
use crate::stats::{IngestStats, ShardStats};

/// The cluster's name in the engine's `remote_servers`, as `Distributed`
/// tables name it.
pub(crate) const CLUSTER_NAME: &str = "chingest";

/// The shard, of `shards`, that stores series `series_id`: its series
/// row and every fact row of it. The id modulo the number of shards: ids
/// are hashes, so shards get equal shares, and it is what a `Distributed`
/// table with sharding key `series_id` and equal weights computes, so rows
/// inserted through one land where chingest puts them. A storage format:
/// changing it, or the number of shards, moves series.
pub(crate) fn shard_of(series_id: u64, shards: usize) -> usize {
    (series_id % shards as u64) as usize
}

/// Splits `batch` by the shard of its `series_id` column: one batch per
/// shard (`None` where no row goes), rows in their order.
pub(crate) fn split_by_shard(
    batch: &RecordBatch,
    shards: usize,
) -> Result<Vec<Option<RecordBatch>>> {
    if shards == 1 {
        return Ok(vec![(batch.num_rows() > 0).then(|| batch.clone())]);
    }
    let ids = batch
        .column_by_name("series_id")
        .and_then(|c| c.as_any().downcast_ref::<UInt64Array>())
        .ok_or_else(|| Error::Internal("a sharded batch has no UInt64 series_id".into()))?;
    let mut rows: Vec<Vec<u32>> = vec![Vec::new(); shards];
    for (row, id) in ids.values().iter().enumerate() {
        rows[shard_of(*id, shards)].push(row as u32);
    }
    rows.into_iter()
        .map(|rows| {
            if rows.is_empty() {
                return Ok(None);
            }
            let indices = UInt32Array::from(rows);
            let columns = batch
                .columns()
                .iter()
                .map(|column| arrow::compute::take(column.as_ref(), &indices, None))
                .collect::<std::result::Result<Vec<_>, _>>()
                .map_err(|e| Error::Internal(format!("splitting a batch by shard: {e}")))?;
            RecordBatch::try_new(batch.schema(), columns)
                .map(Some)
                .map_err(|e| Error::Internal(format!("splitting a batch by shard: {e}")))
        })
        .collect()
}

/// One shard's share of a batch, ready to send: its rows as an Arrow IPC
/// stream and the insert's column list.
#[derive(Debug)]
pub(crate) struct ShardInsert {
    pub(crate) shard: usize,
    columns: String,
    rows: usize,
    /// Shared, not copied, by an attempt at each replica.
    body: bytes::Bytes,
}

/// Splits `batch` by the shard of its series ([`split_by_shard`]) and
/// encodes each shard's share: work for the blocking pool.
pub(crate) fn encode_by_shard(batch: &RecordBatch, shards: usize) -> Result<Vec<ShardInsert>> {
    let columns = column_list(&batch.schema());
    let mut inserts = Vec::new();
    for (shard, part) in split_by_shard(batch, shards)?.into_iter().enumerate() {
        let Some(part) = part else { continue };
        let body = arrow_stream(&part)
            .map_err(|e| Error::Internal(format!("encoding an insert for shard {shard}: {e}")))?;
        inserts.push(ShardInsert {
            shard,
            columns: columns.clone(),
            rows: part.num_rows(),
            body: body.into(),
        });
    }
    Ok(inserts)
}

/// `batch` as an Arrow IPC stream.
fn arrow_stream(batch: &RecordBatch) -> std::result::Result<Vec<u8>, arrow::error::ArrowError> {
    let mut body = Vec::new();
    let mut writer = arrow::ipc::writer::StreamWriter::try_new(&mut body, &batch.schema())?;
    writer.write(batch)?;
    writer.finish()?;
    drop(writer);
    Ok(body)
}

/// What a statement on the shards' tables does, which decides the
/// replicas it runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum StatementKind {
    /// Creates databases or tables: on every replica, for a table is made
    /// replica by replica (replication carries rows and changes, not the
    /// table itself).
    Create,
    /// Changes tables or their rows (`ALTER`, `DELETE`, `UPDATE`): on
    /// every replica of unreplicated tables, each of which holds rows of
    /// its own; on one replica (the first that answers) of replicated
    /// ones, whose replication carries it to the others.
    Change,
}

/// One replica of a shard.
#[derive(Debug)]
struct Replica {
    /// Its HTTP interface, without the `native_port` parameter.
    url: reqwest::Url,
    host: String,
    native_port: u16,
    secure: bool,
}

impl Replica {
    fn parse(text: &str) -> Result<Replica> {
        let invalid = |why: &str| Error::Config(format!("shard replica {text:?}: {why}"));
        let mut url = reqwest::Url::parse(text).map_err(|e| invalid(&e.to_string()))?;
        let secure = match url.scheme() {
            "http" => false,
            "https" => true,
            _ => return Err(invalid("the scheme must be http or https")),
        };
        let host = url.host_str().ok_or_else(|| invalid("no host"))?.to_owned();
        let mut native_port = if secure { 9440 } else { 9000 };
        let mut rest = Vec::new();
        for (key, value) in url.query_pairs() {
            if key == "native_port" {
                native_port = value
                    .parse()
                    .map_err(|_| invalid("native_port is not a port number"))?;
            } else {
                rest.push((key.into_owned(), value.into_owned()));
            }
        }
        if !rest.is_empty() {
            return Err(invalid(
                "the only query parameter understood is native_port",
            ));
        }
        url.set_query(None);
        Ok(Replica {
            url,
            host,
            native_port,
            secure,
        })
    }
}

/// The cluster's shards and an HTTP client for them.
#[derive(Debug)]
pub(crate) struct Cluster {
    shards: Vec<Vec<Replica>>,
    user: String,
    password: String,
    client: reqwest::Client,
    /// Where each shard's requests are counted (`IngestStats::shards`).
    stats: Arc<IngestStats>,
    /// Set when the shards' tables are replicated
    /// ([`ClusterConfig::keeper_path`]).
    keeper_path: Option<String>,
}

impl Cluster {
    /// The cluster `config` describes, counting into `stats`; nothing is
    /// contacted yet.
    pub(crate) fn new(config: &ClusterConfig, stats: Arc<IngestStats>) -> Result<Cluster> {
        let shards = config
            .shards
            .iter()
            .map(|replicas| replicas.iter().map(|r| Replica::parse(r)).collect())
            .collect::<Result<Vec<Vec<Replica>>>>()?;
        let mut client = reqwest::Client::builder()
            .no_proxy()
            .timeout(config.timeout)
            .connect_timeout(Duration::from_secs(5));
        if let Some(file) = &config.ca_file {
            let pem = std::fs::read(file).map_err(|source| Error::Io {
                context: format!("reading {}", file.display()),
                source,
            })?;
            for certificate in reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| Error::Config(format!("{}: {e}", file.display())))?
            {
                client = client.add_root_certificate(certificate);
            }
        }
        let client = client
            .build()
            .map_err(|e| Error::Config(format!("the shards' HTTP client: {e}")))?;
        *stats.shards.lock().unwrap() = config
            .shards
            .iter()
            .map(|replicas| ShardStats {
                url: replicas.join(" | "),
                ..ShardStats::default()
            })
            .collect();
        Ok(Cluster {
            shards,
            user: config.user.clone(),
            password: config.password.clone(),
            client,
            stats,
            keeper_path: config.keeper_path.clone(),
        })
    }

    /// Where the shards' replicated tables are registered, if they are.
    pub(crate) fn keeper_path(&self) -> Option<&str> {
        self.keeper_path.as_deref()
    }

    /// How many shards there are.
    pub(crate) fn shards(&self) -> usize {
        self.shards.len()
    }

    /// The engine configuration that defines the cluster for
    /// `Distributed` tables (`remote_servers`).
    pub(crate) fn engine_config(&self) -> String {
        let escape = |s: &str| {
            s.replace('&', "&amp;")
                .replace('<', "&lt;")
                .replace('>', "&gt;")
        };
        let mut xml = format!("    <remote_servers>\n        <{CLUSTER_NAME}>\n");
        for replicas in &self.shards {
            xml.push_str("            <shard>\n");
            for replica in replicas {
                xml.push_str(&format!(
                    "                <replica><host>{}</host><port>{}</port><secure>{}</secure>\
                     <user>{}</user><password>{}</password></replica>\n",
                    escape(&replica.host),
                    replica.native_port,
                    u8::from(replica.secure),
                    escape(&self.user),
                    escape(&self.password),
                ));
            }
            xml.push_str("            </shard>\n");
        }
        xml.push_str(&format!(
            "        </{CLUSTER_NAME}>\n    </remote_servers>\n"
        ));
        xml
    }

    /// Sends `body` to shard `shard` with `query` (the statement, when the
    /// body is its data); the first replica that answers 200 wins, the
    /// last failure is the error.
    async fn post(
        &self,
        shard: usize,
        query: Option<&str>,
        body: bytes::Bytes,
    ) -> Result<bytes::Bytes> {
        self.post_to(shard, &self.shards[shard], query, body).await
    }

    /// [`post`](Self::post) to `replicas`, some of shard `shard`'s, in
    /// order; counted in the shard's stats.
    async fn post_to(
        &self,
        shard: usize,
        replicas: &[Replica],
        query: Option<&str>,
        body: bytes::Bytes,
    ) -> Result<bytes::Bytes> {
        let mut answer = None;
        for replica in replicas {
            let attempt = self
                .post_to_replica(replica, query, body.clone())
                .await
                .map_err(|message| Error::Shard {
                    shard,
                    url: replica.url.to_string(),
                    message,
                });
            let answered = attempt.is_ok();
            answer = Some(attempt);
            if answered {
                break;
            }
        }
        let answer = answer.expect("every shard has a replica");
        let mut stats = self.stats.shards.lock().unwrap();
        let shard = &mut stats[shard];
        match &answer {
            Ok(_) => shard.failing = 0,
            Err(err) => {
                shard.errors += 1;
                shard.failing += 1;
                shard.last_error = Some(err.to_string());
            }
        }
        answer
    }

    /// One attempt at `replica`: the body of its 200 answer, or what went
    /// wrong.
    async fn post_to_replica(
        &self,
        replica: &Replica,
        query: Option<&str>,
        body: bytes::Bytes,
    ) -> std::result::Result<bytes::Bytes, String> {
        let mut request = self
            .client
            .post(replica.url.clone())
            .header("X-ClickHouse-User", &self.user)
            .header("X-ClickHouse-Key", &self.password)
            .body(body);
        if let Some(query) = query {
            request = request.query(&[("query", query)]);
        }
        let response = request.send().await.map_err(|e| e.to_string())?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| e.to_string())?;
        if status.is_success() {
            Ok(body)
        } else {
            Err(format!(
                "{status}: {}",
                String::from_utf8_lossy(&body).trim()
            ))
        }
    }

    /// Runs `sql`, a statement of the `kind`, on every shard, in order:
    /// on each replica or on the first that answers, as `kind` says.
    pub(crate) async fn execute_everywhere(&self, sql: &str, kind: StatementKind) -> Result<()> {
        for shard in 0..self.shards.len() {
            self.execute_on(shard, sql, kind).await?;
        }
        Ok(())
    }

    /// Runs `sql`, a statement of the `kind`, on shard `shard`: on each
    /// replica or on the first that answers, as `kind` says.
    pub(crate) async fn execute_on(
        &self,
        shard: usize,
        sql: &str,
        kind: StatementKind,
    ) -> Result<()> {
        let every_replica = match kind {
            StatementKind::Create => true,
            StatementKind::Change => self.keeper_path.is_none(),
        };
        let body = bytes::Bytes::from(sql.to_owned());
        let replicas = &self.shards[shard];
        if every_replica {
            for replica in replicas {
                self.post_to(shard, std::slice::from_ref(replica), None, body.clone())
                    .await?;
            }
        } else {
            self.post_to(shard, replicas, None, body).await?;
        }
        Ok(())
    }

    /// The rows `sql` returns on shard `shard`, as text fields (unescaped:
    /// for names and types, which hold no tabs or newlines).
    pub(crate) async fn query_rows(&self, shard: usize, sql: &str) -> Result<Vec<Vec<String>>> {
        let body = self
            .post(shard, None, format!("{sql} FORMAT TSVRaw").into())
            .await?;
        Ok(String::from_utf8_lossy(&body)
            .lines()
            .map(|line| line.split('\t').map(str::to_owned).collect())
            .collect())
    }

    /// The rows `sql` (a query without `SETTINGS`) returns on shard
    /// `shard`, as Arrow batches (for values that may hold any character:
    /// tags), strings as strings and uncompressed.
    pub(crate) async fn query_arrow(&self, shard: usize, sql: &str) -> Result<Vec<RecordBatch>> {
        let sql = format!(
            "{sql} SETTINGS output_format_arrow_string_as_string = 1, \
             output_format_arrow_compression_method = 'none' FORMAT ArrowStream"
        );
        let body = self.post(shard, None, sql.into()).await?;
        if body.is_empty() {
            return Ok(Vec::new());
        }
        let invalid = |e: arrow::error::ArrowError| Error::Shard {
            shard,
            url: self.shards[shard][0].url.to_string(),
            message: format!("reading its ArrowStream answer: {e}"),
        };
        arrow::ipc::reader::StreamReader::try_new(std::io::Cursor::new(body), None)
            .map_err(invalid)?
            .collect::<std::result::Result<Vec<_>, _>>()
            .map_err(invalid)
    }

    /// Inserts one shard's share of a batch into `table` (quoted), once
    /// per `dedup_token` (the table's deduplication window remembers it).
    pub(crate) async fn insert(
        &self,
        table: &str,
        insert: &ShardInsert,
        dedup_token: Option<&str>,
    ) -> Result<()> {
        let token =
            dedup_token.map_or(String::new(), |token| format!(", {}", dedup_setting(token)));
        let statement = format!(
            "INSERT INTO {table} ({}) SETTINGS async_insert = 0{token} FORMAT ArrowStream",
            insert.columns
        );
        let shard = insert.shard;
        self.post(shard, Some(&statement), insert.body.clone())
            .await?;
        let mut stats = self.stats.shards.lock().unwrap();
        stats[shard].inserts += 1;
        stats[shard].rows += insert.rows as u64;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The placement of series is a storage format: these ids must stay
    /// on these shards.
    #[test]
    fn shards_of_fixed_ids() {
        let cases: [(u64, usize, usize); 8] = [
            (0, 1, 0),
            (u64::MAX, 1, 0),
            (0, 2, 0),
            (1, 2, 1),
            (0x9e37_79b9_7f4a_7c15, 2, 1),
            (0x9e37_79b9_7f4a_7c15, 3, 1),
            (u64::MAX, 3, 0),
            (12_345_678_901_234_567_890, 5, 0),
        ];
        for (id, shards, shard) in cases {
            assert_eq!(
                shard_of(id, shards),
                shard,
                "series {id:#x} of {shards} shards"
            );
        }
    }

    #[test]
    fn a_batch_splits_by_the_shard_of_each_row() {
        let ids = UInt64Array::from(vec![4, 7, 10, 2, 5]);
        let values = arrow::array::Float64Array::from(vec![0.0, 1.0, 2.0, 3.0, 4.0]);
        let batch = RecordBatch::try_from_iter([
            ("series_id", Arc::new(ids) as _),
            ("value", Arc::new(values) as _),
        ])
        .unwrap();
        let split = split_by_shard(&batch, 3).unwrap();
        let ids_of = |b: &Option<RecordBatch>| -> Vec<u64> {
            b.as_ref().map_or(Vec::new(), |b| {
                let ids = b.column(0).as_any().downcast_ref::<UInt64Array>().unwrap();
                ids.values().to_vec()
            })
        };
        assert_eq!(ids_of(&split[0]), Vec::<u64>::new());
        assert_eq!(ids_of(&split[1]), vec![4, 7, 10]);
        assert_eq!(ids_of(&split[2]), vec![2, 5]);
        let values = split[2].as_ref().unwrap().column(1);
        let values = values
            .as_any()
            .downcast_ref::<arrow::array::Float64Array>()
            .unwrap();
        assert_eq!(values.values().to_vec(), vec![3.0, 4.0]);
    }

    #[test]
    fn replicas_parse_with_their_native_ports() {
        let replica = Replica::parse("http://ch-1:8123?native_port=19000").unwrap();
        assert_eq!(replica.url.as_str(), "http://ch-1:8123/");
        assert_eq!(
            (replica.host.as_str(), replica.native_port),
            ("ch-1", 19000)
        );
        let replica = Replica::parse("https://ch-2").unwrap();
        assert_eq!((replica.native_port, replica.secure), (9440, true));
        for bad in [
            "ftp://x",
            "http://x?user=a",
            "http://x?native_port=none",
            "x",
        ] {
            assert!(Replica::parse(bad).is_err(), "{bad}");
        }
    }
}
