//! Shared by the test binaries that use the engine.
//!
//! The engine is process-global, so each test binary opens one ingestor on
//! one temporary directory, on one runtime, and every test uses databases of
//! its own. The engine must also be closed before the process exits: its
//! threads would otherwise race the exit-time destructors and abort the
//! process. libtest has no "after all tests" hook, so these binaries use
//! `harness = false` and [`run_tests`] (libtest-mimic: same flags, same
//! output), which closes the ingestor once every test has run.

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

/// The binary's ingestor, opened on first use with the default config on a
/// temporary directory that lives as long as the process.
pub async fn ingestor() -> Ingestor {
    ingestor_with(|config| config).await
}

/// The binary's ingestor, opened on first use with the default config
/// changed by `configure` (every caller in one binary must pass the same).
pub async fn ingestor_with(configure: fn(IngestConfig) -> IngestConfig) -> Ingestor {
    let _open = OPEN.lock().await;
    if let Some(ingestor) = INGESTOR.lock().unwrap().as_ref() {
        return ingestor.clone();
    }
    let dir = tempfile::tempdir().expect("temp dir").keep();
    let ingestor = Ingestor::open(configure(IngestConfig::new(dir)))
        .await
        .expect("open ingestor");
    *INGESTOR.lock().unwrap() = Some(ingestor.clone());
    ingestor
}

/// Runs the named tests like libtest would, then closes the engine.
pub fn run_tests(tests: &[(&'static str, fn())]) -> ! {
    let args = libtest_mimic::Arguments::from_args();
    let trials = tests
        .iter()
        .map(|&(name, test)| {
            libtest_mimic::Trial::test(name, move || {
                test();
                Ok(())
            })
        })
        .collect();
    let conclusion = libtest_mimic::run(&args, trials);
    let ingestor = INGESTOR.lock().unwrap().take();
    if let Some(ingestor) = ingestor {
        run(ingestor.close()).expect("close the engine");
    }
    conclusion.exit()
}

/// `fn main` running the listed test functions through [`run_tests`].
#[macro_export]
macro_rules! test_main {
    ($($test:ident),* $(,)?) => {
        fn main() {
            support::run_tests(&[$((stringify!($test), $test as fn())),*])
        }
    };
}

/// Runs `sql` and returns its TabSeparated output as a string.
pub async fn tsv(ingestor: &Ingestor, sql: &str) -> String {
    let out = ingestor
        .query_trusted(sql, "TabSeparated")
        .await
        .unwrap_or_else(|e| panic!("{sql}: {e}"));
    String::from_utf8(out).expect("utf-8 output")
}

/// Write options that return once the rows are queryable, so a test can
/// read what it just wrote.
pub fn visible() -> chingest::WriteOptions {
    chingest::WriteOptions {
        durability: chingest::Durability::Visible,
        ..chingest::WriteOptions::default()
    }
}
