//! Where a request reads ([`Source`]: the database, what the caller may
//! read, the bounds of one query) and what every read of the engine
//! shares: its statements, counted, the time condition in ms, and the
//! strings of an answer's column.

use std::sync::atomic::{AtomicUsize, Ordering};

use arrow::array::{Array, AsArray as _};
use arrow::datatypes::DataType;
use arrow::record_batch::RecordBatch;
use chingest::{Access, Ingestor};

use crate::cache::ResultCache;
use crate::error::Error;

/// How much one query may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Series selected, over all of the query's selectors.
    pub max_series: usize,
    /// Samples read, over all of the query's selectors.
    pub max_samples: usize,
}

impl Default for Limits {
    /// VictoriaMetrics' bound on series (its `-search.maxUniqueTimeseries`):
    /// a fifth of a million-series fleet summed at once; Prometheus's on
    /// samples (its `query.max-samples`).
    fn default() -> Self {
        Limits {
            max_series: 300_000,
            max_samples: 50_000_000,
        }
    }
}

/// Where a request reads: the database and retention policy, with what
/// the caller may do checked.
pub struct Source<'a> {
    /// What is read.
    pub ingestor: &'a Ingestor,
    /// The database.
    pub database: String,
    /// Its retention policy read.
    pub retention_policy: String,
    /// The bounds of one query.
    pub limits: Limits,
    /// Where range queries' settled steps are kept between requests.
    pub cache: Option<&'a ResultCache>,
    /// Engine statements this source has run: a result read wholly from
    /// memory ran none.
    pub(super) statements: AtomicUsize,
}

impl<'a> Source<'a> {
    /// The source of `database` (its `retention_policy`), if the caller
    /// may read it.
    pub fn new(
        ingestor: &'a Ingestor,
        access: &Access,
        database: &str,
        retention_policy: &str,
        limits: Limits,
    ) -> Result<Source<'a>, Error> {
        access.require_read_of(database)?;
        Ok(Source {
            ingestor,
            database: database.to_owned(),
            retention_policy: retention_policy.to_owned(),
            limits,
            cache: None,
            statements: AtomicUsize::new(0),
        })
    }

    /// The same source, keeping range queries' settled steps in `cache`.
    pub fn with_cache(self, cache: &'a ResultCache) -> Source<'a> {
        Source {
            cache: Some(cache),
            ..self
        }
    }

    /// Engine statements run so far.
    pub(crate) fn statements(&self) -> usize {
        self.statements.load(Ordering::Relaxed)
    }

    /// Runs one engine statement (read-only connections, the query
    /// limits), counted.
    pub(super) async fn statement(&self, sql: &str) -> Result<Vec<RecordBatch>, Error> {
        self.statements.fetch_add(1, Ordering::Relaxed);
        Ok(self.ingestor.query_translated(sql).await?)
    }
}

/// `[start, end]` ms as the ns that count as those ms.
pub(super) fn ms_to_ns(start: i64, end: i64) -> (i64, i64) {
    (
        start.saturating_mul(1_000_000),
        end.saturating_mul(1_000_000).saturating_add(999_999),
    )
}

/// `time` in `[start, end]` ms: a time with digits past the ms counts as
/// its ms, as it is read.
pub(super) fn time_condition(start: i64, end: i64) -> String {
    // The span of the `time` column (DateTime64(9): 1900 to 2262).
    const FIRST: i64 = -2_208_988_800_000;
    const LAST: i64 = 9_214_646_400_000;
    let (start, end) = (start.clamp(FIRST, LAST), end.clamp(FIRST - 1, LAST));
    format!(
        "time >= fromUnixTimestamp64Milli(toInt64({start})) AND time < fromUnixTimestamp64Milli(toInt64({}))",
        end.saturating_add(1)
    )
}

/// The strings of an engine list element (`String` columns arrive as
/// binary or UTF-8, depending on the engine's settings).
pub(super) fn strings(array: &dyn Array) -> Vec<String> {
    let n = array.len();
    match array.data_type() {
        DataType::Utf8 => {
            let a = array.as_string::<i32>();
            (0..n).map(|i| a.value(i).to_owned()).collect()
        }
        DataType::LargeUtf8 => {
            let a = array.as_string::<i64>();
            (0..n).map(|i| a.value(i).to_owned()).collect()
        }
        DataType::Binary => {
            let a = array.as_binary::<i32>();
            (0..n)
                .map(|i| String::from_utf8_lossy(a.value(i)).into_owned())
                .collect()
        }
        DataType::LargeBinary => {
            let a = array.as_binary::<i64>();
            (0..n)
                .map(|i| String::from_utf8_lossy(a.value(i)).into_owned())
                .collect()
        }
        _ => Vec::new(),
    }
}
