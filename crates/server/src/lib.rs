//! The chingest server: InfluxDB-compatible writes and SQL over HTTP, the
//! `chingest.v1.Ingest` gRPC API, and ClickHouse's HTTP interface on its own
//! listener, on an embedded chDB engine (the `chingest` library).
//!
//! [`start`] binds the listeners and answers at once (`/ready` says 503,
//! gRPC health says NOT_SERVING) while the engine opens. Shutdown is
//! ordered: stop accepting, finish the requests in flight (each waits for
//! its rows to be committed), then close the engine, which flushes every
//! batcher.

pub mod config;
pub mod error;
#[cfg(fuzzing)]
pub mod fuzzing;
pub mod grpc;
pub mod http;
pub mod metrics;
mod span;
pub mod state;
mod tls;
mod write;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use axum::serve::ListenerExt as _;
use chingest::Ingestor;
use std::future::Future;
use tokio::net::TcpListener;

use tokio::sync::{oneshot, watch, OnceCell};
use tokio::task::JoinHandle;

use crate::config::ServerConfig;
pub use crate::error::ServerError;
use crate::state::AppState;

/// HTTP/2 flow-control windows of the gRPC server: how many bytes a client
/// may send on one stream, and on one connection, before the server
/// acknowledges them.
const GRPC_STREAM_WINDOW: u32 = 32 << 20;
const GRPC_CONNECTION_WINDOW: u32 = 64 << 20;
/// Largest HTTP/2 frame a client may send (the default is 16 KiB).
const GRPC_MAX_FRAME: u32 = 1 << 20;

/// A running server.
#[derive(Debug)]
pub struct RunningServer {
    /// The address of the HTTP API (useful with port 0).
    pub addr: SocketAddr,
    /// The address of the gRPC API.
    pub grpc_addr: SocketAddr,
    /// The address of the ClickHouse HTTP interface, when served.
    pub clickhouse_addr: Option<SocketAddr>,
    shutdown: Option<oneshot::Sender<()>>,
    task: JoinHandle<Result<(), ServerError>>,
}

impl RunningServer {
    /// Stops accepting, answers the requests in flight, closes the engine.
    pub async fn shutdown(mut self) -> Result<(), ServerError> {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        self.wait().await
    }

    /// Waits until the server stops (after [`shutdown`](Self::shutdown), or
    /// when the engine fails to open).
    pub async fn wait(&mut self) -> Result<(), ServerError> {
        (&mut self.task)
            .await
            .unwrap_or_else(|e| Err(ServerError::Serve(std::io::Error::other(e))))
    }

    /// A handle that triggers shutdown, for signal handlers.
    pub fn shutdown_trigger(&mut self) -> Option<oneshot::Sender<()>> {
        self.shutdown.take()
    }
}

/// Binds `config.http_addr`, `config.grpc_addr` and (unless off)
/// `config.clickhouse_http_addr`, opens the engine in the background and
/// serves.
pub async fn start(config: ServerConfig) -> Result<RunningServer, ServerError> {
    config.validate()?;
    let tls = match (&config.tls.cert, &config.tls.key) {
        (Some(cert), Some(key)) => Some(tls::Identity::load(cert, key)?),
        _ => None,
    };
    let bind = |addr: SocketAddr| async move {
        TcpListener::bind(addr)
            .await
            .map_err(|source| ServerError::Bind { addr, source })
    };
    let listener = bind(config.http_addr).await?;
    let grpc_listener = bind(config.grpc_addr).await?;
    let clickhouse_listener = match config.clickhouse_http_addr {
        Some(addr) => Some(bind(addr).await?),
        None => None,
    };
    let addr = listener.local_addr().map_err(ServerError::Serve)?;
    let grpc_addr = grpc_listener.local_addr().map_err(ServerError::Serve)?;
    let clickhouse_addr = clickhouse_listener
        .as_ref()
        .map(TcpListener::local_addr)
        .transpose()
        .map_err(ServerError::Serve)?;
    let promql_cache = chingest_promql::ResultCache::new(config.promql.result_cache_max_bytes);
    let state = AppState {
        ingestor: Arc::new(OnceCell::new()),
        config: Arc::new(config),
        metrics: Arc::default(),
        promql_cache: Arc::new(promql_cache),
        rules: Arc::new(OnceCell::new()),
    };
    let (shutdown, shutdown_rx) = oneshot::channel();
    let listeners = Listeners {
        http: listener,
        grpc: grpc_listener,
        clickhouse: clickhouse_listener,
    };
    let task = tokio::spawn(serve(listeners, tls, state, shutdown_rx));
    tracing::info!(%addr, %grpc_addr, clickhouse_addr = ?clickhouse_addr, "listening");
    Ok(RunningServer {
        addr,
        grpc_addr,
        clickhouse_addr,
        shutdown: Some(shutdown),
        task,
    })
}

/// The bound listeners, one per API.
struct Listeners {
    http: TcpListener,
    grpc: TcpListener,
    clickhouse: Option<TcpListener>,
}

async fn serve(
    listeners: Listeners,
    tls: Option<tls::Identity>,
    state: AppState,
    shutdown: oneshot::Receiver<()>,
) -> Result<(), ServerError> {
    let (health, health_service) = tonic_health::server::health_reporter();
    // Not serving until the engine is open.
    report_health(&health, tonic_health::ServingStatus::NotServing).await;
    let open_error: Arc<Mutex<Option<chingest::Error>>> = Arc::default();
    let (failed_tx, failed_rx) = oneshot::channel::<()>();
    let opener = {
        let cell = Arc::clone(&state.ingestor);
        let config = state.config.ingest_config();
        let write = &state.config.write;
        let continuous_queries = Arc::new(chingest_influxql::ContinuousQueryRunner::new(
            &write.default_retention_policy,
            write.duplicate_policy,
        ));
        let open_error = Arc::clone(&open_error);
        let health = health.clone();
        let (rules, rules_cell) = (Arc::clone(&state.config), Arc::clone(&state.rules));
        tokio::spawn(async move {
            match Ingestor::open(config).await {
                Ok(ingestor) => {
                    if let Err(err) = ingestor.run_continuous_queries(continuous_queries) {
                        tracing::warn!(%err, "continuous queries do not run");
                    }
                    let _ = cell.set(ingestor);
                    start_rules(&rules, cell, &rules_cell).await;
                    report_health(&health, tonic_health::ServingStatus::Serving).await;
                    tracing::info!("ready");
                }
                Err(err) => {
                    *open_error.lock().unwrap() = Some(err);
                    // Stops the server: there is nothing to serve.
                    let _ = failed_tx.send(());
                }
            }
        })
    };
    // Both APIs stop on the same signal.
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        tokio::select! {
            _ = shutdown => tracing::info!("shutting down"),
            // Only a sent failure matches; a dropped sender (success)
            // disables this branch.
            Ok(()) = failed_rx => {}
        }
        let _ = stop_tx.send(true);
    });
    let stopped = |mut rx: watch::Receiver<bool>| async move {
        let _ = rx.wait_for(|stop| *stop).await;
    };
    // Reflection in both versions: generic clients still speak v1alpha
    // (Python's grpcio-reflection, older grpcurl).
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(chingest_proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let reflection_error = |e| ServerError::Serve(std::io::Error::other(e));
    let reflection_v1 = reflection().build_v1().map_err(reflection_error)?;
    let reflection_v1alpha = reflection().build_v1alpha().map_err(reflection_error)?;
    // Writes are large messages one way: HTTP/2's default 64 KiB windows
    // would stall the sender every 64 KiB, waiting for a round trip.
    let mut grpc = tonic::transport::Server::builder();
    if let Some(identity) = &tls {
        let identity = tonic::transport::Identity::from_pem(&identity.cert_pem, &identity.key_pem);
        grpc = grpc.tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))?;
    }
    let grpc = grpc
        .initial_stream_window_size(GRPC_STREAM_WINDOW)
        .initial_connection_window_size(GRPC_CONNECTION_WINDOW)
        .max_frame_size(GRPC_MAX_FRAME)
        .add_service(health_service)
        .add_service(reflection_v1)
        .add_service(reflection_v1alpha)
        .add_service(grpc::ingest_service(state.clone()))
        .add_service(grpc::otlp_metrics_service(state.clone()))
        .serve_with_incoming_shutdown(
            // Replies are small: without TCP_NODELAY, Nagle's algorithm holds
            // them back until the client's delayed ACK (tens of ms). The
            // builder's own setting does not apply to a given listener.
            tokio_stream::StreamExt::map(
                tokio_stream::wrappers::TcpListenerStream::new(listeners.grpc),
                |stream| stream.and_then(|s| s.set_nodelay(true).map(|()| s)),
            ),
            stopped(stop_rx.clone()),
        );
    let rustls = tls.map(|identity| identity.rustls);
    let http = serve_http(
        listeners.http,
        http::router(state.clone()),
        rustls.clone(),
        stopped(stop_rx.clone()),
    );
    let clickhouse = async {
        match listeners.clickhouse {
            Some(listener) => {
                let router = http::clickhouse::router(state.clone());
                serve_http(listener, router, rustls, stopped(stop_rx)).await
            }
            None => Ok(()),
        }
    };
    let (served, clickhouse_served, grpc_served) = tokio::join!(http, clickhouse, grpc);
    let _ = opener.await;
    if let Some(err) = open_error.lock().unwrap().take() {
        return Err(ServerError::Engine(err));
    }
    if let Some(rules) = state.rules.get() {
        rules.stop().await;
    }
    if let Some(ingestor) = state.ingestor.get() {
        ingestor.close().await?;
    }
    served.map_err(ServerError::Serve)?;
    clickhouse_served.map_err(ServerError::Serve)?;
    grpc_served.map_err(ServerError::Grpc)
}

/// Starts evaluating the configured rule files (none configured: nothing
/// runs), and reloads them on `SIGHUP` as Prometheus does.
async fn start_rules(
    config: &ServerConfig,
    ingestor: Arc<OnceCell<Ingestor>>,
    cell: &Arc<OnceCell<chingest_rules::manager::Manager>>,
) {
    let r = &config.rules;
    let notifier = (!r.alertmanagers.is_empty()).then(|| {
        let alertmanagers = r
            .alertmanagers
            .iter()
            .map(|am| chingest_rules::notify::Alertmanager {
                url: am.url.clone(),
                timeout: am.timeout,
            })
            .collect();
        let capacity = r.notification_queue_capacity;
        chingest_rules::notify::Notifier::start(alertmanagers, capacity, r.external_labels.clone())
    });
    let started = chingest_rules::manager::Manager::start(
        ingestor,
        config.rules_settings(),
        r.files.clone(),
        r.base_dir.clone(),
        notifier,
    )
    .await;
    let manager = match started {
        Ok(manager) => manager,
        // Checked when the server started: a file changed since.
        Err(err) => {
            tracing::error!(%err, "rules do not run");
            return;
        }
    };
    let _ = cell.set(manager);
    #[cfg(unix)]
    {
        let cell = Arc::clone(cell);
        let hangup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
        match hangup {
            Ok(mut hangup) => {
                tokio::spawn(async move {
                    while hangup.recv().await.is_some() {
                        if let Some(manager) = cell.get() {
                            // A refusal is logged and counted by the manager.
                            let _ = manager.reload().await;
                        }
                    }
                });
            }
            Err(err) => tracing::warn!(%err, "SIGHUP does not reload the rules"),
        }
    }
}

/// Serves `router` on `listener` until `stopped`, over TLS when given.
async fn serve_http(
    listener: TcpListener,
    router: axum::Router,
    tls: Option<Arc<tokio_rustls::rustls::ServerConfig>>,
    stopped: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    match tls {
        Some(config) => {
            axum::serve(tls::TlsListener::new(listener, config), router)
                .with_graceful_shutdown(stopped)
                .await
        }
        None => {
            // Over keep-alive, the last chunk of every streamed answer
            // would otherwise wait for the client's delayed ACK (~40 ms a
            // request).
            let listener = listener.tap_io(|tcp| {
                if let Err(err) = tcp.set_nodelay(true) {
                    tracing::warn!(%err, "setting TCP_NODELAY on an HTTP connection");
                }
            });
            axum::serve(listener, router)
                .with_graceful_shutdown(stopped)
                .await
        }
    }
}

/// Reports the server as a whole (`""`), `chingest.v1.Ingest` and OTLP's
/// `MetricsService` to gRPC health checks as `status`.
async fn report_health(
    health: &tonic_health::server::HealthReporter,
    status: tonic_health::ServingStatus,
) {
    use tonic::server::NamedService as _;
    type Ingest = chingest_proto::v1::ingest_server::IngestServer<grpc::IngestService>;
    for service in ["", Ingest::NAME, grpc::OtlpMetricsService::NAME] {
        health.set_service_status(service, status).await;
    }
}
