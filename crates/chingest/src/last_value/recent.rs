//! A series' recent samples of one numeric field, as floats (how PromQL
//! reads every numeric field), sorted by time with one sample per time:
//! what lets a dashboard panel over the last hours be answered from memory
//! instead of an engine statement (Prometheus's head block does this).
//!
//! Times are the table's nanoseconds. A sample at a time the series
//! already has replaces it: of two writes of one point the later wins, as
//! the `last` duplicate policy keeps and as a read of the engine's rows
//! in time order keeps last.

/// One sample: time (ns) and value.
pub(super) type Sample = (i64, f64);

/// Bytes of memory one sample's room takes.
pub(super) const SAMPLE_BYTES: usize = std::mem::size_of::<Sample>();

/// Adds a sample in time order; returns whether it is a new time (not a
/// replaced value).
pub(super) fn insert(samples: &mut Vec<Sample>, time: i64, value: f64) -> bool {
    if samples.len() == samples.capacity() {
        // A quarter more, not twice: a million series' lists hold at most
        // a fifth of room unused, not half (samples come one scrape at a
        // time, so the copies stay amortized).
        samples.reserve_exact((samples.len() / 4).max(4));
    }
    match samples.last_mut() {
        None => samples.push((time, value)),
        Some(last) if last.0 < time => samples.push((time, value)),
        Some(last) if last.0 == time => {
            last.1 = value;
            return false;
        }
        // Older than the newest: rare (a late or corrected point).
        Some(_) => match samples.binary_search_by(|s| s.0.cmp(&time)) {
            Ok(at) => {
                samples[at].1 = value;
                return false;
            }
            Err(at) => samples.insert(at, (time, value)),
        },
    }
    true
}

/// Drops the samples before `from`; returns how many.
pub(super) fn trim(samples: &mut Vec<Sample>, from: i64) -> usize {
    let old = samples.partition_point(|s| s.0 < from);
    if old > 0 {
        samples.drain(..old);
        // Room for a span's worth stays; a series gone quiet gives it back.
        if samples.len() < samples.capacity() / 4 {
            samples.shrink_to_fit();
        }
    }
    old
}

/// The samples in `[start, end]`.
pub(super) fn range(samples: &[Sample], start: i64, end: i64) -> &[Sample] {
    let from = samples.partition_point(|s| s.0 < start);
    let to = samples.partition_point(|s| s.0 <= end);
    &samples[from..to.max(from)]
}

/// Merges samples read from the engine (sorted) into those writes brought
/// while they were read: at a time both have, the write's is newer and
/// wins. Returns the newest such time ([`i64::MIN`]: none): there the
/// engine may hold two rows (or the one it read may be the write's own).
pub(super) fn merge_older(samples: &mut Vec<Sample>, engine: &[Sample]) -> i64 {
    let mut both = i64::MIN;
    if samples.is_empty() {
        samples.extend_from_slice(engine);
    } else {
        let written = std::mem::take(samples);
        let mut merged = Vec::with_capacity(written.len() + engine.len());
        let (mut i, mut j) = (0, 0);
        while i < written.len() || j < engine.len() {
            match (written.get(i), engine.get(j)) {
                (Some(w), Some(e)) if e.0 < w.0 => {
                    merged.push(*e);
                    j += 1;
                }
                (Some(w), Some(e)) => {
                    if e.0 == w.0 {
                        both = both.max(e.0);
                        j += 1;
                    }
                    merged.push(*w);
                    i += 1;
                }
                (Some(w), None) => {
                    merged.push(*w);
                    i += 1;
                }
                (None, Some(e)) => {
                    merged.push(*e);
                    j += 1;
                }
                (None, None) => unreachable!("the loop runs while one is left"),
            }
        }
        *samples = merged;
    }
    both
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_stay_sorted_one_per_time_the_later_write_winning() {
        let mut samples = Vec::new();
        for (t, v) in [
            (10, 1.0),
            (20, 2.0),
            (20, 2.5),
            (5, 0.5),
            (15, 1.5),
            (10, 1.1),
        ] {
            insert(&mut samples, t, v);
        }
        assert_eq!(samples, [(5, 0.5), (10, 1.1), (15, 1.5), (20, 2.5)]);
        assert_eq!(range(&samples, 10, 15), [(10, 1.1), (15, 1.5)]);
        assert_eq!(range(&samples, 11, 14), []);
        assert_eq!(range(&samples, 30, 20), []);
        trim(&mut samples, 11);
        assert_eq!(samples, [(15, 1.5), (20, 2.5)]);
    }

    #[test]
    fn engine_samples_merge_under_newer_writes() {
        let mut samples = vec![(20, 9.0), (40, 4.0)];
        merge_older(&mut samples, &[(10, 1.0), (20, 2.0), (30, 3.0)]);
        assert_eq!(samples, [(10, 1.0), (20, 9.0), (30, 3.0), (40, 4.0)]);
        let mut empty = Vec::new();
        merge_older(&mut empty, &[(1, 1.0)]);
        assert_eq!(empty, [(1, 1.0)]);
    }
}
