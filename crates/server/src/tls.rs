//! TLS for both listeners, from a PEM certificate chain and private key
//! (`[tls]` in the config). gRPC's is tonic's; HTTP's is [`TlsListener`],
//! which axum serves like a plain listener.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::rustls;
use tokio_rustls::rustls::pki_types::pem::PemObject as _;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::error::ServerError;

/// A handshake not done by then is dropped: a client that connects and
/// says nothing holds nothing for long.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The certificate chain and key files, read and checked.
#[derive(Clone)]
pub(crate) struct Identity {
    /// For tonic, which parses them itself.
    pub(crate) cert_pem: Vec<u8>,
    pub(crate) key_pem: Vec<u8>,
    /// For the HTTP listener.
    pub(crate) rustls: Arc<rustls::ServerConfig>,
}

impl Identity {
    /// Reads `cert` (PEM, the server's certificate first) and `key` (PEM,
    /// PKCS#8, PKCS#1 or SEC1).
    pub(crate) fn load(cert: &Path, key: &Path) -> Result<Identity, ServerError> {
        let read = |path: &Path| {
            std::fs::read(path).map_err(|e| tls_error(format!("reading {}: {e}", path.display())))
        };
        let (cert_pem, key_pem) = (read(cert)?, read(key)?);
        let chain = CertificateDer::pem_slice_iter(&cert_pem)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| tls_error(format!("{}: {e}", cert.display())))?;
        if chain.is_empty() {
            return Err(tls_error(format!("{}: no certificate", cert.display())));
        }
        let private_key = PrivateKeyDer::from_pem_slice(&key_pem)
            .map_err(|e| tls_error(format!("{}: {e}", key.display())))?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .map_err(|e| tls_error(e.to_string()))?
            .with_no_client_auth()
            .with_single_cert(chain, private_key)
            .map_err(|e| tls_error(format!("the certificate and key: {e}")))?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(Identity {
            cert_pem,
            key_pem,
            rustls: Arc::new(config),
        })
    }
}

fn tls_error(message: String) -> ServerError {
    ServerError::Tls(message)
}

/// HTTP connections over TLS. A task accepts TCP connections and runs each
/// handshake on its own task, so a slow or silent client does not hold up
/// the others; finished handshakes are handed to axum in order of
/// completion.
pub(crate) struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local_addr: SocketAddr,
}

impl TlsListener {
    pub(crate) fn new(listener: TcpListener, config: Arc<rustls::ServerConfig>) -> TlsListener {
        let local_addr = listener
            .local_addr()
            .expect("a bound listener has an address");
        let (sender, ready) = mpsc::channel(64);
        let acceptor = TlsAcceptor::from(config);
        tokio::spawn(async move {
            loop {
                let accepted = tokio::select! {
                    // The server stopped: release the port.
                    _ = sender.closed() => return,
                    accepted = listener.accept() => accepted,
                };
                let (tcp, peer) = match accepted {
                    Ok(accepted) => accepted,
                    Err(err) => {
                        // Out of file descriptors and the like: wait, retry.
                        tracing::warn!(%err, "accepting an HTTPS connection");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                };
                // Small answers are not held back for the client's ACK.
                let _ = tcp.set_nodelay(true);
                let (acceptor, sender) = (acceptor.clone(), sender.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = sender.send((tls, peer)).await;
                        }
                        Ok(Err(err)) => tracing::debug!(%err, %peer, "TLS handshake failed"),
                        Err(_) => tracing::debug!(%peer, "TLS handshake timed out"),
                    }
                });
            }
        });
        TlsListener { ready, local_addr }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accepting task only ends once this listener is gone.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<SocketAddr> {
        Ok(self.local_addr)
    }
}
