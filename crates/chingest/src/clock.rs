//! The wall clock, read one way by the library, the query languages and the
//! server: what `now` means in a query, where recent samples start, when a
//! backup was made. Before the epoch reads as 0 and past what an `i64` of
//! nanoseconds holds (2262) as `i64::MAX`, so no caller handles a clock
//! error: times compare and subtract as the stored timestamps do.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// Now, in ns since the epoch.
pub fn now_ns() -> i64 {
    since_epoch(Duration::as_nanos)
}

/// Now, in ms since the epoch.
pub fn now_ms() -> i64 {
    since_epoch(Duration::as_millis)
}

fn since_epoch(unit: fn(&Duration) -> u128) -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(unit(&d)).unwrap_or(i64::MAX))
}
