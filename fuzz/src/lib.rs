//! What the fuzz targets share: an allocator that counts, so a target can
//! check that what it decodes never allocates beyond a bound set by its
//! input's size (a length field that makes a decoder reserve gigabytes is
//! an outage, not a panic, and libFuzzer without a sanitizer would not see
//! it).
//!
//! The harness is a workspace of its own, built only by `cargo fuzz`
//! (`make fuzz`, `make fuzz-smoke`): nothing here is part of the server.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

/// The system allocator, counting the bytes live and the most live at once.
pub struct Counting;

static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(bytes: usize) {
    let live = LIVE.fetch_add(bytes, Ordering::Relaxed) + bytes;
    PEAK.fetch_max(live, Ordering::Relaxed);
}

// SAFETY: every call is passed to `System` unchanged; only counters move.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let ptr = System.alloc(layout);
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let ptr = System.alloc_zeroed(layout);
        if !ptr.is_null() {
            grew(layout.size());
        }
        ptr
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        System.dealloc(ptr, layout);
        LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let new = System.realloc(ptr, layout, new_size);
        if !new.is_null() {
            LIVE.fetch_sub(layout.size(), Ordering::Relaxed);
            grew(new_size);
        }
        new
    }
}

/// Runs `f` and asserts that the bytes it had allocated at any one time
/// stayed under `per_input_byte * input_len + fixed`. The bound is loose on
/// purpose (a decoded row is larger than its encoding); what it catches is
/// an allocation sized by what the input claims rather than by what it is.
pub fn bounded<T>(
    input_len: usize,
    per_input_byte: usize,
    fixed: usize,
    f: impl FnOnce() -> T,
) -> T {
    let base = LIVE.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let out = f();
    let peak = PEAK.load(Ordering::Relaxed).saturating_sub(base);
    let bound = per_input_byte
        .saturating_mul(input_len)
        .saturating_add(fixed);
    assert!(
        peak <= bound,
        "{peak} bytes allocated at once for {input_len} bytes of input (bound {bound})"
    );
    out
}

/// One mebibyte: the fixed part of most bounds.
pub const MIB: usize = 1 << 20;

/// What the two OTLP targets check alike.
pub mod otlp {
    use chingest_codecs::otlp::{convert, Request, ResourceTags, METADATA};
    use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
    use opentelemetry_proto::tonic::metrics::v1::metric::Data;
    use prost::Message as _;

    /// Converts `message`; when it converts, asserts that its data points
    /// (as prost counts them, a metric without data as one) are the rows
    /// stored plus those refused.
    pub fn convert_and_count(message: &[u8]) {
        let Ok(request) = Request::decode(message) else {
            return;
        };
        let resources = ResourceTags::of(&request);
        let Ok(converted) = convert(&request, &resources) else {
            return;
        };
        let stored: usize = converted
            .tables
            .iter()
            .filter(|t| t.measurement != METADATA)
            .map(|t| t.batch.num_rows())
            .sum();
        // chingest's reader skips what it does not store, so it may read a
        // message prost refuses (a string not UTF-8 in a field never read).
        let Ok(generated) = ExportMetricsServiceRequest::decode(message) else {
            return;
        };
        let points: usize = generated
            .resource_metrics
            .iter()
            .flat_map(|r| &r.scope_metrics)
            .flat_map(|s| &s.metrics)
            .map(|metric| match &metric.data {
                Some(Data::Gauge(g)) => g.data_points.len(),
                Some(Data::Sum(s)) => s.data_points.len(),
                Some(Data::Histogram(h)) => h.data_points.len(),
                Some(Data::ExponentialHistogram(h)) => h.data_points.len(),
                Some(Data::Summary(s)) => s.data_points.len(),
                // Refused as one point, so that the sender hears of it.
                None => 1,
            })
            .sum();
        assert_eq!(stored + converted.rejected as usize, points);
    }
}

/// Runs `f` for code that catches panics of a third party's (arrow's IPC
/// reader, PromQL's grammar) and makes them errors. libfuzzer-sys's panic
/// hook aborts at once, before such a catch; this replaces it with a quiet
/// one, and a panic that nothing caught is said here and still ends the
/// run as a crash.
pub fn catching<T>(f: impl FnOnce() -> T + std::panic::UnwindSafe) -> T {
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| std::panic::set_hook(Box::new(|_| {})));
    match std::panic::catch_unwind(f) {
        Ok(value) => value,
        Err(panic) => {
            let why = chingest_codecs::panic_message(&*panic);
            eprintln!("panicked: {}", why.unwrap_or("(no message)"));
            std::panic::resume_unwind(panic)
        }
    }
}

/// The engine's data directory for this process of `target` (the engine
/// is process-global: one per process), under `target/` where
/// `fuzz/run.sh` runs; those of processes that have ended are removed.
pub fn engine_dir(target: &str) -> std::path::PathBuf {
    use std::path::PathBuf;
    let parent = PathBuf::from("target").join(target);
    for old in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
        let pid = old.file_name().to_string_lossy().parse::<u32>().ok();
        if pid.is_some_and(|pid| !PathBuf::from(format!("/proc/{pid}")).exists()) {
            let _ = std::fs::remove_dir_all(old.path());
        }
    }
    let dir = parent.join(std::process::id().to_string());
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::canonicalize(dir).unwrap()
}

/// What a target opens on the engine, once for the process (the engine is
/// process-global): opened by the first input, closed when the process
/// exits. libFuzzer ends a run with `exit`, whose handlers include the
/// engine library's destructors, and those deadlock while the engine's
/// threads still run (seen: a `sql_gate` run that printed its last
/// statistics and never exited). So the first input also registers a
/// handler, which runs before the engine's (registered after them): it
/// hands the world to `close`, which closes its ingestor, and stops the
/// engine (`chingest::shutdown_engine`), on a thread of its own. An `exit` from inside an input
/// finds the world in use and leaves it, for libFuzzer to report.
pub struct EngineWorld<W: 'static> {
    world: Mutex<Option<W>>,
    open: fn() -> W,
    close: fn(W),
}

/// The handler's work, set by the first world opened (a process has one).
static CLOSE_WORLD: OnceLock<Box<dyn Fn() + Send + Sync>> = OnceLock::new();

extern "C" fn close_engine() {
    if let Some(close) = CLOSE_WORLD.get() {
        close();
    }
}

impl<W: Send + 'static> EngineWorld<W> {
    /// A world `open` makes and `close` ends.
    pub const fn new(open: fn() -> W, close: fn(W)) -> EngineWorld<W> {
        EngineWorld {
            world: Mutex::new(None),
            open,
            close,
        }
    }

    /// Runs `f` on the world, opening it first if it is not yet.
    pub fn with<T>(&'static self, f: impl FnOnce(&W) -> T) -> T {
        let mut world = self.world.lock().unwrap_or_else(PoisonError::into_inner);
        if world.is_none() {
            *world = Some((self.open)());
            let registered = CLOSE_WORLD.set(Box::new(move || {
                let Ok(mut world) = self.world.try_lock() else {
                    return;
                };
                if let Some(world) = world.take() {
                    // On a thread of its own: the exiting thread's
                    // thread-locals (the async runtime's) are gone.
                    let close = self.close;
                    let _ = std::thread::spawn(move || {
                        close(world);
                        let _ = chingest::shutdown_engine();
                    })
                    .join();
                }
            }));
            assert!(registered.is_ok(), "one engine world a process");
            // SAFETY: `close_engine` is a plain function that unwinds
            // nowhere (it only locks, closes and drops).
            assert_eq!(unsafe { libc::atexit(close_engine) }, 0);
        }
        f(world.as_ref().expect("opened above"))
    }
}

/// The engine a target runs on: an ingestor over [`engine_dir`]`(target)`
/// as `configure` sets it, on an async runtime of its own, with each
/// `(database, line protocol)` of `writes` written in `precision` and
/// visible to reads before it returns.
pub fn open_engine(
    target: &str,
    configure: impl FnOnce(&mut chingest::IngestConfig),
    precision: chingest::Precision,
    writes: &[(&str, &str)],
) -> Engine {
    use chingest::{Durability, IngestConfig, Ingestor, WriteOptions};
    let dir = engine_dir(target);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    let ingestor = runtime.block_on(async {
        let mut config = IngestConfig::new(&dir);
        configure(&mut config);
        let ingestor = Ingestor::open(config).await.expect("the engine opens");
        let options = WriteOptions {
            precision,
            durability: Durability::Visible,
            ..WriteOptions::default()
        };
        for (db, lines) in writes {
            let outcome = ingestor
                .write_lp(db, "autogen", lines.as_bytes(), &options)
                .await
                .unwrap();
            assert!(outcome.rejected.is_empty(), "{:?}", outcome.rejected);
        }
        ingestor
    });
    Engine {
        dir,
        runtime,
        ingestor,
    }
}

/// An ingestor on the engine, and the runtime its calls run on.
pub struct Engine {
    /// Its data directory.
    pub dir: std::path::PathBuf,
    /// Where its calls run.
    pub runtime: tokio::runtime::Runtime,
    /// The ingestor.
    pub ingestor: chingest::Ingestor,
}

impl Engine {
    /// Closes the ingestor, then drops it and the runtime.
    pub fn close(self) {
        let _ = self.runtime.block_on(self.ingestor.close());
    }
}

/// The memory of the targets that compare reads from memory with the
/// engine's: database `mem` only, its recent samples of the last hour and
/// the chunk cache of older blocks; `eng` is read from the engine alone.
pub fn memory_for_mem(config: &mut chingest::IngestConfig) {
    config.last_values.measurements = vec!["mem.*".to_owned()];
    config.last_values.recent_span = std::time::Duration::from_secs(3600);
    config.last_values.chunk_cache_bytes = 64 << 20;
}

/// The choices a structured target reads from its input, a byte each;
/// past the input's end, the first of each.
pub struct Choices<'a>(pub &'a [u8]);

impl Choices<'_> {
    /// One of `options`.
    pub fn pick<'b, T: ?Sized>(&mut self, options: &[&'b T]) -> &'b T {
        options[self.index(options.len())]
    }

    /// A number below `n`.
    pub fn index(&mut self, n: usize) -> usize {
        let Some((&byte, rest)) = self.0.split_first() else {
            return 0;
        };
        self.0 = rest;
        byte as usize % n
    }
}
