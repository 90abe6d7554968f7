//! Shared by the test binaries. The engine is process-global, so each test
//! binary opens one ingestor on one temporary directory, on one runtime, and
//! every test uses databases of its own.
//!
//! The engine's threads must be gone before the process runs its exit-time
//! destructors, or the engine aborts. libtest has no "after all tests" hook,
//! so an `atexit` handler drops the shared ingestor (closing its connections)
//! first.

#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::sync::{LazyLock, Mutex};

use chingest::{IngestConfig, Ingestor};

static RUNTIME: LazyLock<tokio::runtime::Runtime> = LazyLock::new(|| {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("test runtime")
});

static INGESTOR: Mutex<Option<Ingestor>> = Mutex::new(None);
static OPEN: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Runs a test body on the shared runtime.
pub fn run<F: Future>(future: F) -> F::Output {
    RUNTIME.block_on(future)
}

extern "C" fn drop_ingestor_at_exit() {
    // Dropping the last handle closes every engine connection.
    drop(INGESTOR.lock().map(|mut slot| slot.take()));
}

/// The binary's ingestor, opened on first use with the default config on a
/// temporary directory that lives as long as the process.
pub async fn ingestor() -> Ingestor {
    let _open = OPEN.lock().await;
    if let Some(ingestor) = INGESTOR.lock().unwrap().as_ref() {
        return ingestor.clone();
    }
    let dir = tempfile::tempdir().expect("temp dir").keep();
    let ingestor = Ingestor::open(IngestConfig::new(dir)).await.expect("open ingestor");
    *INGESTOR.lock().unwrap() = Some(ingestor.clone());
    // SAFETY: registers a plain `extern "C" fn` with no arguments, as atexit
    // requires; it only touches a Rust static guarded by a mutex.
    #[allow(unsafe_code)]
    let registered = unsafe { libc::atexit(drop_ingestor_at_exit) };
    assert_eq!(registered, 0, "atexit registration failed");
    ingestor
}

/// Runs `sql` and returns its TabSeparated output as a string.
pub async fn tsv(ingestor: &Ingestor, sql: &str) -> String {
    let out = ingestor
        .query(sql, "TabSeparated")
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    String::from_utf8(out).expect("utf-8 output")
}
