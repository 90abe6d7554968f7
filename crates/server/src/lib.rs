//! The chingest server: InfluxDB-compatible writes and SQL over HTTP, on an
//! embedded chDB engine (the `chingest` library).
//!
//! [`start`] binds the listener and answers at once (`/ready` says 503)
//! while the engine opens. Shutdown is ordered: stop accepting, finish the
//! requests in flight (each waits for its rows to be committed), then close
//! the engine, which flushes every batcher and Buffer table.

pub mod config;
pub mod error;
pub mod http;
pub mod metrics;

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use chingest::Ingestor;
use tokio::net::TcpListener;
use tokio::sync::{oneshot, OnceCell};
use tokio::task::JoinHandle;

use crate::config::{ConfigError, ServerConfig};
use crate::http::AppState;

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// The configuration is unusable.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The HTTP address could not be bound.
    #[error("binding {addr}: {source}")]
    Bind {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// Serving HTTP failed.
    #[error("http server: {0}")]
    Serve(std::io::Error),
    /// The engine failed to open or to close.
    #[error("engine: {0}")]
    Engine(#[from] chingest::Error),
}

/// A running server.
#[derive(Debug)]
pub struct RunningServer {
    /// The address it listens on (useful with port 0).
    pub addr: SocketAddr,
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

/// Binds `config.http_addr`, opens the engine in the background and serves.
pub async fn start(config: ServerConfig) -> Result<RunningServer, ServerError> {
    config.validate()?;
    let listener = TcpListener::bind(config.http_addr)
        .await
        .map_err(|source| ServerError::Bind {
            addr: config.http_addr,
            source,
        })?;
    let addr = listener.local_addr().map_err(ServerError::Serve)?;
    let state = AppState {
        ingestor: Arc::new(OnceCell::new()),
        config: Arc::new(config),
        metrics: Arc::default(),
    };
    let (shutdown, shutdown_rx) = oneshot::channel();
    let task = tokio::spawn(serve(listener, state, shutdown_rx));
    tracing::info!(%addr, "listening");
    Ok(RunningServer {
        addr,
        shutdown: Some(shutdown),
        task,
    })
}

async fn serve(
    listener: TcpListener,
    state: AppState,
    shutdown: oneshot::Receiver<()>,
) -> Result<(), ServerError> {
    let open_error: Arc<Mutex<Option<chingest::Error>>> = Arc::default();
    let (failed_tx, failed_rx) = oneshot::channel::<()>();
    let opener = {
        let cell = Arc::clone(&state.ingestor);
        let config = state.config.ingest_config();
        let open_error = Arc::clone(&open_error);
        tokio::spawn(async move {
            match Ingestor::open(config).await {
                Ok(ingestor) => {
                    let _ = cell.set(ingestor);
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
    let stop = async move {
        tokio::select! {
            _ = shutdown => tracing::info!("shutting down"),
            // Only a sent failure matches; a dropped sender (success)
            // disables this branch.
            Ok(()) = failed_rx => {}
        }
    };
    let served = axum::serve(listener, http::router(state.clone()))
        .with_graceful_shutdown(stop)
        .await;
    let _ = opener.await;
    if let Some(err) = open_error.lock().unwrap().take() {
        return Err(ServerError::Engine(err));
    }
    if let Some(ingestor) = state.ingestor.get() {
        ingestor.close().await?;
    }
    served.map_err(ServerError::Serve)
}
