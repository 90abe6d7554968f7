//! A duration written in the file as whole milliseconds (`flush_max_age_ms`).

use std::time::Duration;

use serde::{Deserialize, Deserializer};

pub(super) fn deserialize<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Duration, D::Error> {
    u64::deserialize(deserializer).map(Duration::from_millis)
}
