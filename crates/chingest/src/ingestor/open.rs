//! Opening an [`Ingestor`]: the layers wired together bottom up, as a
//! list of steps ([`Ingestor::open`]), each a function below it.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock, Weak};

use crate::backup;
use crate::catalog::learn::{self, Learner, SeriesParts};
use crate::catalog::{Catalog, TableDefaults};
use crate::cluster::Cluster;
use crate::config::{IngestConfig, LastValueConfig, StorageMode};
use crate::continuous::ContinuousQueries;
use crate::downsample::{self, Downsampler};
use crate::durable;
use crate::engine::Engine;
use crate::error::{Error, Result};
use crate::last_value::rebuild::{self, RebuildSource};
use crate::last_value::{LastValues, RebuildQueue};
use crate::read::Reader;
use crate::stats::IngestStats;
use crate::wal::{LogFiles, Opened};
use crate::write::appender::Appender;
use crate::write::flusher::{FlushContext, InsertObserver};
use crate::write::replay;
use crate::write::sink::{ClusterSink, EmbeddedSink, Sink};
use crate::write::{Handoff, Writer};

use super::{Ingestor, Shared};

impl Ingestor {
    /// Opens the engine on `config.data_dir` (created if missing), reads
    /// back the databases, tables and series stored there, and replays the
    /// write-ahead log: rows acknowledged before a crash but not yet in the
    /// engine are inserted before this returns.
    pub async fn open(config: IngestConfig) -> Result<Ingestor> {
        config.validate()?;
        crate::parallel::set_threads(config.query.evaluation_threads);
        let runtime = tokio::runtime::Handle::current();
        let data_dir = data_dir(&config.data_dir)?;
        let config = Arc::new(IngestConfig { data_dir, ..config });
        let (engine, cluster) = open_engine(&config).await?;
        // Before the catalog reads the series: what it reads counts as
        // read, and the learner reads the series stored after.
        let series_parts = match &cluster {
            Some(cluster) => Some(SeriesParts::active(cluster).await?),
            None => None,
        };
        // Tables other nodes made on the shards become readable here.
        engine.mirror_shards().await?;
        let catalog = load_catalog(&config, &engine).await?;
        let (files, opened, scan) = open_log(&config, &engine).await?;
        let (last_values, rebuilds) = LastValues::new(cached(&config), Arc::clone(&engine.stats));
        let last_values = Arc::new(last_values);
        // Before the appender starts: nothing to stop if this fails.
        let reader = Reader::open(
            Arc::clone(&engine),
            Arc::clone(&catalog),
            Arc::clone(&last_values),
        )
        .await?;
        // Statements may downsample any database (in the embedded mode),
        // and in the cluster mode readers learn any shard's rollups.
        let downsampler = Arc::new(Downsampler::new(
            &engine,
            &catalog,
            &last_values,
            &config.downsampling,
        ));
        let layers = (&engine, &catalog, &last_values, &downsampler);
        let writer = start_writer(&config, layers, files, cluster.clone(), &runtime)?;
        let continuous = Arc::new(ContinuousQueries::new(&engine, &catalog));
        let ingestor = Ingestor {
            shared: Arc::new(Shared {
                config,
                engine,
                catalog,
                writer,
                reader,
                learner: Mutex::default(),
                downsampler,
                downsampling: Mutex::default(),
                continuous,
                continuous_task: Mutex::default(),
                leases: Mutex::default(),
            }),
        };
        // From here a failure closes what started.
        if let Err(err) = ingestor.recover(&opened, scan).await {
            let _ = ingestor.close().await;
            return Err(err);
        }
        ingestor.start_tasks(
            &runtime,
            (&last_values, rebuilds),
            cluster.zip(series_parts),
        );
        tracing::info!(data_dir = %ingestor.shared.config.data_dir.display(), "engine open");
        Ok(ingestor)
    }

    /// Replays the log into the engine, then reads back where rows are
    /// gone (readers and rebuilds must know it) and, in the embedded mode
    /// (the only one that runs them), the continuous queries.
    async fn recover(&self, opened: &Opened, scan: replay::Scan) -> Result<()> {
        let Shared {
            engine,
            catalog,
            writer,
            downsampler,
            continuous,
            ..
        } = &*self.shared;
        let broken = replay::broken_tables(engine, catalog).await?;
        replay::run(writer.flush_context(), catalog, opened, scan, &broken).await?;
        match engine.cluster {
            None => {
                downsampler.load().await?;
                continuous.load().await?;
            }
            Some(_) => downsampler.learn().await?,
        }
        for db in catalog.databases() {
            let downsampled = downsampler.policies.is_downsampled(&db.name);
            catalog.set_downsampled(&db.name, downsampled);
        }
        Ok(())
    }

    /// Starts the background tasks: the last-value cache's rebuilds (until
    /// one is done its table answers `None`), the log's checkpoints, the
    /// downsampling passes, and in the `clickhouse` storage mode the
    /// learner of what other nodes create.
    fn start_tasks(
        &self,
        runtime: &tokio::runtime::Handle,
        (last_values, rebuilds): (&Arc<LastValues>, RebuildQueue),
        learning: Option<(Arc<Cluster>, SeriesParts)>,
    ) {
        let shared = &self.shared;
        let tables = shared
            .catalog
            .databases()
            .into_iter()
            .flat_map(|db| db.tables());
        last_values.activate(tables.map(|(_, table)| table));
        let source: Weak<dyn RebuildSource> = Arc::downgrade(&self.shared) as _;
        runtime.spawn(rebuild::run_rebuilds(
            source,
            Arc::downgrade(last_values),
            rebuilds,
        ));
        shared.writer.start_checkpointer();
        let period = shared.config.downsampling.period;
        let passes = downsample::run(Arc::clone(&shared.downsampler), period);
        *shared.downsampling.lock().unwrap() = Some(runtime.spawn(passes));
        if let (StorageMode::ClickHouse(config), Some((cluster, parts))) =
            (&shared.config.storage, learning)
        {
            let learner = Learner::new(&shared.engine, &shared.catalog, cluster, parts);
            let task = runtime.spawn(learn::run(learner, config.refresh));
            *shared.learner.lock().unwrap() = Some(task);
        }
    }
}

/// The data directory `dir`, made if missing, as an absolute path; refused
/// while it holds a restore that did not finish.
fn data_dir(dir: &Path) -> Result<PathBuf> {
    durable::create_dir_all(dir).map_err(|source| Error::Io {
        context: format!("creating data directory {}", dir.display()),
        source,
    })?;
    let data_dir = dir.canonicalize().map_err(|source| Error::Io {
        context: format!("resolving data directory {}", dir.display()),
        source,
    })?;
    if data_dir.join(backup::RESTORING_MARKER).exists() {
        return Err(Error::InvalidBackup(format!(
            "{} holds a restore that did not finish ({} is there): remove the directory and restore again",
            data_dir.display(),
            backup::RESTORING_MARKER
        )));
    }
    Ok(data_dir)
}

/// The engine on the data directory, and in the `clickhouse` storage mode
/// the cluster of shards it writes to.
async fn open_engine(config: &IngestConfig) -> Result<(Arc<Engine>, Option<Arc<Cluster>>)> {
    let stats = Arc::<IngestStats>::default();
    let cluster = match &config.storage {
        StorageMode::Embedded => None,
        StorageMode::ClickHouse(cluster) => {
            Some(Arc::new(Cluster::new(cluster, Arc::clone(&stats))?))
        }
    };
    let engine = Engine::open(
        &config.data_dir,
        config.connections,
        &config.query,
        cluster.clone(),
        stats,
    )
    .await?;
    Ok((Arc::new(engine), cluster))
}

/// The databases, tables and series stored, read back and repaired.
async fn load_catalog(config: &IngestConfig, engine: &Engine) -> Result<Arc<Catalog>> {
    let defaults = TableDefaults {
        view_rp: config.view_retention_policy.clone(),
        duplicates: config.duplicate_policy,
        downsampled: RwLock::new(config.downsampling.databases.keys().cloned().collect()),
    };
    let catalog = Catalog::load(engine, config.cardinality, defaults).await?;
    catalog.repair(engine).await?;
    Ok(Arc::new(catalog))
}

/// The write-ahead log, opened: its files, what opening found (torn tails
/// cut, logged and counted), and the records to replay.
async fn open_log(
    config: &IngestConfig,
    engine: &Engine,
) -> Result<(LogFiles, Opened, replay::Scan)> {
    let wal_dir = config
        .wal
        .dir
        .clone()
        .unwrap_or_else(|| config.data_dir.join("wal"));
    let segment_bytes = config.wal.segment_bytes;
    let (files, opened, scan) = tokio::task::spawn_blocking(move || {
        let mut scan = replay::Scan::default();
        LogFiles::open(&wal_dir, segment_bytes, |lsn, record| {
            scan.visit(lsn, record)
        })
        .map(|(files, opened)| (files, opened, scan))
    })
    .await
    .map_err(|e| Error::Internal(format!("opening the log failed: {e}")))??;
    for cut in &opened.cuts {
        tracing::warn!(segment = %cut.path.display(), offset = cut.offset, dropped_bytes = cut.dropped,
            reason = %cut.reason, "cut the log's torn tail (a write that was never acknowledged)");
        IngestStats::add(&engine.stats.wal_cut_bytes, cut.dropped);
    }
    Ok((files, opened, scan))
}

/// What the last-value cache keeps. In the `clickhouse` mode other nodes
/// write too, and their rows never reach this node's memory: answers from
/// it (last values, the series index, recent samples) could miss them, so
/// the cache is off and those reads go to the shards.
fn cached(config: &IngestConfig) -> LastValueConfig {
    match &config.storage {
        StorageMode::Embedded => config.last_values.clone(),
        // Other nodes change the shards unseen: no block would hold.
        StorageMode::ClickHouse(_) => LastValueConfig {
            measurements: Vec::new(),
            chunk_cache_bytes: 0,
            ..config.last_values.clone()
        },
    }
}

/// The writer over the layers below it: the log's appender, the sink
/// (the engine here, or the shards), and flushers that tell the
/// downsampler of every insert.
fn start_writer(
    config: &Arc<IngestConfig>,
    (engine, catalog, last_values, downsampler): (
        &Arc<Engine>,
        &Arc<Catalog>,
        &Arc<LastValues>,
        &Arc<Downsampler>,
    ),
    files: LogFiles,
    cluster: Option<Arc<Cluster>>,
    runtime: &tokio::runtime::Handle,
) -> Result<Arc<Writer>> {
    let handoff = Arc::new(Handoff::new(Arc::clone(last_values)));
    let appender = Appender::start(files, Arc::clone(&engine.stats), handoff)?;
    let sink: Box<dyn Sink> = match cluster {
        None => Box::new(EmbeddedSink::new(Arc::clone(engine))),
        Some(cluster) => Box::new(ClusterSink::new(cluster)),
    };
    let on_insert = {
        let downsampler = Arc::downgrade(downsampler);
        InsertObserver(Arc::new(move |database: &str, table: &str, span| {
            if let Some(downsampler) = downsampler.upgrade() {
                downsampler.inserting(database, table, span);
            }
        }))
    };
    let flush = FlushContext::new(
        Arc::clone(engine),
        sink,
        appender,
        config.flush.clone(),
        on_insert,
    );
    Ok(Arc::new(Writer::new(
        Arc::clone(config),
        Arc::clone(catalog),
        Arc::clone(last_values),
        flush,
        runtime.clone(),
    )))
}
