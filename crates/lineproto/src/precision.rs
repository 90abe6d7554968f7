//! Timestamp precision of a write request.
//!
//! Owns [`Precision`] (the unit a request's timestamps are written in, as
//! named by the `precision` query parameter of the InfluxDB write API) and
//! the checked conversion of a timestamp in that unit to nanoseconds. It lives
//! apart from the parser because HTTP front ends parse the precision long
//! before any line is seen.

use std::fmt;
use std::str::FromStr;

use crate::error::excerpt;

/// Timestamp precision of a write request.
///
/// Every timestamp in a body is written in this unit; the parser converts it
/// to nanoseconds since the Unix epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Hash)]
pub enum Precision {
    /// Nanoseconds (`ns`, `n`); the default.
    #[default]
    Nanoseconds,
    /// Microseconds (`us`, `u`, `µs`, `µ`).
    Microseconds,
    /// Milliseconds (`ms`).
    Milliseconds,
    /// Seconds (`s`).
    Seconds,
    /// Minutes (`m`).
    Minutes,
    /// Hours (`h`).
    Hours,
}

impl Precision {
    /// Parses a precision name as InfluxDB spells it, case-sensitively:
    /// `ns` or `n`, `us`, `u`, `µs` or `µ` (micro sign or Greek mu), `ms`,
    /// `s`, `m` (minutes) and `h`.
    pub fn parse(s: &str) -> Result<Precision, UnknownPrecision> {
        Ok(match s {
            "ns" | "n" => Precision::Nanoseconds,
            "us" | "u" | "\u{b5}s" | "\u{b5}" | "\u{3bc}s" | "\u{3bc}" => Precision::Microseconds,
            "ms" => Precision::Milliseconds,
            "s" => Precision::Seconds,
            "m" => Precision::Minutes,
            "h" => Precision::Hours,
            other => return Err(UnknownPrecision(other.to_owned())),
        })
    }

    /// Number of nanoseconds in one unit of this precision.
    pub fn nanos_per_unit(self) -> i64 {
        match self {
            Precision::Nanoseconds => 1,
            Precision::Microseconds => 1_000,
            Precision::Milliseconds => 1_000_000,
            Precision::Seconds => 1_000_000_000,
            Precision::Minutes => 60_000_000_000,
            Precision::Hours => 3_600_000_000_000,
        }
    }

    /// Converts `value` units of this precision to nanoseconds, or `None`
    /// when the result does not fit in an `i64`.
    #[inline]
    pub fn to_nanos(self, value: i64) -> Option<i64> {
        value.checked_mul(self.nanos_per_unit())
    }

    /// The canonical short name: `ns`, `us`, `ms`, `s`, `m` or `h`.
    pub fn as_str(self) -> &'static str {
        match self {
            Precision::Nanoseconds => "ns",
            Precision::Microseconds => "us",
            Precision::Milliseconds => "ms",
            Precision::Seconds => "s",
            Precision::Minutes => "m",
            Precision::Hours => "h",
        }
    }
}

impl FromStr for Precision {
    type Err = UnknownPrecision;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Precision::parse(s)
    }
}

impl fmt::Display for Precision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error of [`Precision::parse`]: the name that was not recognised.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownPrecision(pub String);

impl fmt::Display for UnknownPrecision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown precision '{}' (expected one of ns, us, ms, s, m, h)",
            excerpt(&self.0)
        )
    }
}

impl std::error::Error for UnknownPrecision {}
