//! Prometheus's durations (`model.Duration`): `1y2w3d4h5m6s7ms`, each unit
//! at most once and in that order, or `0`; read and written as Prometheus
//! reads and writes them, in whole milliseconds.

use std::time::Duration;

/// Units, largest first, in ms.
const UNITS: [(&str, u64); 7] = [
    ("y", 365 * 86_400_000),
    ("w", 7 * 86_400_000),
    ("d", 86_400_000),
    ("h", 3_600_000),
    ("m", 60_000),
    ("s", 1000),
    ("ms", 1),
];

/// The largest duration Go's `time.Duration` holds, in ms.
const MAX_MS: u64 = (i64::MAX as u64) / 1_000_000;

/// `text` as a duration, or Prometheus's error for it.
pub fn parse(text: &str) -> Result<Duration, String> {
    match text {
        "0" => return Ok(Duration::ZERO),
        "" => return Err("empty duration string".into()),
        _ => {}
    }
    let invalid = || format!("not a valid duration string: {}", crate::gofmt::quote(text));
    let (mut rest, mut next_unit, mut total, mut overflow) = (text, 0usize, 0u64, false);
    while !rest.is_empty() {
        let digits = rest.bytes().take_while(u8::is_ascii_digit).count();
        if digits == 0 {
            return Err(invalid());
        }
        let number = &rest[..digits];
        rest = &rest[digits..];
        // `ms` before `m`: the longest unit that matches, among those still allowed.
        let found = UNITS[next_unit..]
            .iter()
            .enumerate()
            .filter(|(_, (unit, _))| rest.starts_with(unit))
            .max_by_key(|(_, (unit, _))| unit.len());
        let Some((offset, (unit, ms))) = found else {
            return Err(invalid());
        };
        next_unit += offset + 1;
        rest = &rest[unit.len()..];
        match number.parse::<u64>() {
            Ok(n) if n <= MAX_MS / ms => {
                total = total.saturating_add(n * ms);
                overflow |= total > MAX_MS;
            }
            _ => overflow = true,
        }
    }
    if overflow {
        return Err("duration out of range".into());
    }
    Ok(Duration::from_millis(total))
}

/// `duration` in ms, as times are reckoned (ms since the epoch): past
/// `i64::MAX / 4` it stays there, so that sums of a few never overflow.
pub fn millis(duration: Duration) -> i64 {
    i64::try_from(duration.as_millis()).unwrap_or(i64::MAX / 4)
}

/// `duration` as Prometheus writes it: `0s`, `1h30m`, `90d` (years and
/// weeks only when they divide it whole).
pub fn format(duration: Duration) -> String {
    let mut ms = duration.as_millis() as u64;
    if ms == 0 {
        return "0s".into();
    }
    let mut out = String::new();
    for (i, (unit, mult)) in UNITS.iter().enumerate() {
        let exact = i < 2;
        if exact && !ms.is_multiple_of(*mult) {
            continue;
        }
        let v = ms / mult;
        if v > 0 {
            out.push_str(&format!("{v}{unit}"));
            ms -= v * mult;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_read_as_prometheus_reads_them() {
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        assert_eq!(parse("0s"), Ok(Duration::ZERO));
        assert_eq!(parse("1h30m"), Ok(Duration::from_secs(5400)));
        assert_eq!(parse("1m500ms"), Ok(Duration::from_millis(60_500)));
        assert_eq!(parse("2w"), Ok(Duration::from_secs(14 * 86400)));
        assert_eq!(parse("").unwrap_err(), "empty duration string");
        for bad in ["5", "-1m", "1.5h", "5m1h", "1m1m", "5x", "m", " 5m"] {
            assert_eq!(
                parse(bad).unwrap_err(),
                format!("not a valid duration string: \"{bad}\""),
                "{bad}"
            );
        }
        assert_eq!(
            parse("99999999999999999y").unwrap_err(),
            "duration out of range"
        );
        assert_eq!(parse("293y").unwrap_err(), "duration out of range");
        assert!(parse("292y").is_ok());
    }

    #[test]
    fn durations_write_as_prometheus_writes_them() {
        for (ms, text) in [
            (0, "0s"),
            (1, "1ms"),
            (90_000, "1m30s"),
            (5_400_000, "1h30m"),
            (90 * 86_400_000, "90d"),
            (14 * 86_400_000, "2w"),
            (365 * 86_400_000, "1y"),
            (366 * 86_400_000, "366d"),
        ] {
            assert_eq!(format(Duration::from_millis(ms)), text);
            assert_eq!(parse(text).unwrap().as_millis() as u64, ms);
        }
    }
}
