//! A series' recent samples of one numeric field, as floats (how PromQL
//! reads every numeric field), sorted by time with one sample per time:
//! what lets a dashboard panel over the last hours be answered from memory
//! instead of an engine statement (Prometheus's head block does this).
//!
//! Times are the table's nanoseconds. A sample at a time the series
//! already has replaces it: of two writes of one point the later wins, as
//! the `last` duplicate policy keeps and as a read of the engine's rows
//! in time order keeps last.
//!
//! They are kept compressed ([`SeriesSamples`], `chunk.rs`): about two
//! bytes a scraped sample in place of sixteen.

use crate::last_value::chunk::{Chunk, Open, View};

/// One sample: time (ns) and value.
pub(super) type Sample = (i64, f64);

/// Bytes a rebuild plans a sample at, to choose the span it reads back:
/// decimals (counters, byte counts) take about two, XORed floats more; a
/// table the plan misjudges meets the bound afterwards, as after writes.
pub(super) const PLANNED_SAMPLE_BYTES: usize = 3;

/// Samples a chunk takes before it is full: an hour of 15 s scrapes, its
/// bookkeeping a sixth of a byte a sample.
const CHUNK_SAMPLES: usize = 240;

/// One series' samples of one field, compressed (`chunk.rs`): full chunks
/// in time order, each before the next, then the one appended to.
#[derive(Debug, Clone, Default)]
pub(crate) struct SeriesSamples {
    full: Vec<Chunk>,
    open: Option<Box<Open>>,
}

impl SeriesSamples {
    /// Sorted samples, one per time, compressed.
    pub(super) fn of_sorted(samples: &[Sample]) -> SeriesSamples {
        let mut chunks = samples.chunks(CHUNK_SAMPLES).map(Open::encode).peekable();
        let mut full = Vec::new();
        while let Some(open) = chunks.next() {
            match chunks.peek() {
                Some(_) => full.push(open.close()),
                None => {
                    return SeriesSamples {
                        full,
                        open: Some(Box::new(open)),
                    }
                }
            }
        }
        SeriesSamples::default()
    }

    fn chunks(&self) -> impl Iterator<Item = View<'_>> + Clone {
        let full = self.full.iter().map(Chunk::view);
        full.chain(self.open.iter().map(|open| open.view()))
    }

    /// Samples held.
    pub(super) fn len(&self) -> usize {
        self.chunks().map(|chunk| chunk.len()).sum()
    }

    /// Bytes of memory they take, besides the struct.
    pub(super) fn bytes(&self) -> usize {
        self.shell() + self.full.iter().map(Chunk::bytes).sum::<usize>()
    }

    /// [`bytes`](Self::bytes) but the full chunks' streams.
    fn shell(&self) -> usize {
        self.full.capacity() * std::mem::size_of::<Chunk>()
            + self
                .open
                .as_ref()
                .map_or(0, |open| std::mem::size_of::<Open>() + open.bytes())
    }

    /// Adds a sample in time order; returns whether it is a new time (not
    /// a replaced value), and the bytes of memory they grew by.
    pub(super) fn insert(&mut self, time: i64, value: f64) -> (bool, isize) {
        let before = self.shell() as isize;
        let appended = match &mut self.open {
            Some(open) => open.push(time, value),
            None if self
                .full
                .last()
                .is_none_or(|chunk| chunk.view().last() < time) =>
            {
                self.open = Some(Box::new(Open::encode(&[(time, value)])));
                true
            }
            None => false,
        };
        let (new, mut streams) = match appended {
            true => (true, 0),
            // Older than the newest, or a value or time the open chunk's
            // encoding cannot hold: rare (a late or corrected point, a
            // change of precision), the chunk is encoded again.
            false => self.rewrite(time, value),
        };
        if let Some(open) = self.open.take_if(|open| open.view().len() >= CHUNK_SAMPLES) {
            let chunk = open.close();
            streams += chunk.bytes() as isize;
            self.full.push(chunk);
        }
        (new, self.shell() as isize - before + streams)
    }

    /// Puts a sample in the chunk it belongs in, encoding that again;
    /// returns whether it is a new time and how many bytes the full
    /// chunks' streams grew by.
    fn rewrite(&mut self, time: i64, value: f64) -> (bool, isize) {
        let at = self
            .full
            .partition_point(|chunk| chunk.view().last() < time);
        let mut samples = match self.full.get(at) {
            Some(chunk) => chunk.view().decode(),
            None => self
                .open
                .as_ref()
                .map_or_else(Vec::new, |open| open.view().decode()),
        };
        let new = match samples.binary_search_by(|s| s.0.cmp(&time)) {
            Ok(i) => {
                samples[i].1 = value;
                false
            }
            Err(i) => {
                samples.insert(i, (time, value));
                true
            }
        };
        let encoded = Open::encode(&samples);
        match self.full.get_mut(at) {
            Some(chunk) => {
                let old = chunk.bytes() as isize;
                *chunk = encoded.close();
                (new, chunk.bytes() as isize - old)
            }
            None => {
                self.open = Some(Box::new(encoded));
                (new, 0)
            }
        }
    }

    /// Drops the chunks whose samples are all before `from` (the rest
    /// keep theirs: readers ask for a range); returns how many samples.
    pub(super) fn trim(&mut self, from: i64) -> usize {
        let old = self
            .full
            .partition_point(|chunk| chunk.view().last() < from);
        let mut dropped: usize = self.full.drain(..old).map(|c| c.view().len()).sum();
        if self
            .open
            .as_ref()
            .is_some_and(|open| open.view().last() < from)
        {
            dropped += self.open.take().map_or(0, |open| open.view().len());
        }
        if old > 0 && self.full.len() < self.full.capacity() / 2 {
            self.full.shrink_to_fit();
        }
        dropped
    }

    /// The samples in `[start, end]`.
    pub(super) fn range(&self, start: i64, end: i64) -> Vec<Sample> {
        let mut samples = Vec::new();
        self.range_into(start, end, 1, &mut samples);
        samples
    }

    /// Adds the samples in `[start, end]` (ns) to `samples`, their times in
    /// units of `per` ns (floored), the last of equal times kept.
    pub(super) fn range_into(&self, start: i64, end: i64, per: i64, samples: &mut Vec<Sample>) {
        let skipped = self
            .full
            .partition_point(|chunk| chunk.view().last() < start);
        range_into(self.chunks().skip(skipped), (start, end), per, samples);
    }

    /// A copy of the chunks holding samples of `[start, end]`, the one
    /// appended to closed.
    fn within(&self, start: i64, end: i64) -> Vec<Chunk> {
        let skipped = self
            .full
            .partition_point(|chunk| chunk.view().last() < start);
        let mut chunks: Vec<Chunk> = self.full[skipped..]
            .iter()
            .take_while(|chunk| chunk.view().first() <= end)
            .cloned()
            .collect();
        let open = self.open.as_ref().filter(|open| {
            let view = open.view();
            view.len() > 0 && view.first() <= end && view.last() >= start
        });
        chunks.extend(open.map(|open| Open::clone(open).close()));
        chunks
    }

    /// Merges samples read from the engine (sorted) into those writes
    /// brought while they were read: at a time both have, the write's is
    /// newer and wins. Returns the newest such time ([`i64::MIN`]: none):
    /// there the engine may hold two rows (or the one it read may be the
    /// write's own).
    pub(super) fn merge_older(&mut self, engine: &[Sample]) -> i64 {
        let written = self.range(i64::MIN, i64::MAX);
        let mut both = i64::MIN;
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
        *self = SeriesSamples::of_sorted(&merged);
        both
    }
}

/// Adds the samples of `chunks` (in time order) in `[start, end]` (ns)
/// to `samples`, their times in units of `per` ns (floored), the last of
/// equal times kept.
fn range_into<'a>(
    chunks: impl Iterator<Item = View<'a>> + Clone,
    (start, end): (i64, i64),
    per: i64,
    samples: &mut Vec<Sample>,
) {
    let within = chunks
        .skip_while(|chunk| chunk.len() == 0 || chunk.last() < start)
        .take_while(|chunk| chunk.first() <= end);
    // Room for them all at once: a list grown by doubling passes the
    // allocator's threshold for pages of its own, faulted in afresh at
    // every read.
    samples.reserve(within.clone().map(|chunk| chunk.len()).sum());
    let mut push = |time: i64, value: f64| match samples.last_mut() {
        Some(last) if last.0 == time => last.1 = value,
        _ => samples.push((time, value)),
    };
    for chunk in within {
        match start <= chunk.first() && chunk.last() <= end {
            true => chunk.for_each_in(per, &mut push),
            false => chunk.for_each(|time, value| {
                if (start..=end).contains(&time) {
                    push(time.div_euclid(per), value);
                }
            }),
        }
    }
}

/// How many samples [`range_into`] gives: a chunk wholly inside whose
/// unit is a multiple of `per` counted by its length (its times stay
/// apart), the others decoded.
fn count<'a>(chunks: impl Iterator<Item = View<'a>>, (start, end): (i64, i64), per: i64) -> usize {
    // Samples counted, and the last one's time in `per`s.
    let (mut count, mut last) = (0, None);
    for chunk in chunks.filter(|chunk| chunk.len() > 0) {
        let inside = start <= chunk.first() && chunk.last() <= end;
        if inside && chunk.unit_ns() % per == 0 {
            let first = chunk.first().div_euclid(per);
            count += chunk.len() - usize::from(last == Some(first));
            last = Some(chunk.last().div_euclid(per));
            continue;
        }
        chunk.for_each(|time, _| {
            let time = match (start..=end).contains(&time) {
                true => time.div_euclid(per),
                false => return,
            };
            if last != Some(time) {
                count += 1;
                last = Some(time);
            }
        });
    }
    count
}

/// A series' samples of `[start, end]` (ns) as a read takes them, times
/// in units of `per` ns, the last of equal times kept.
pub(crate) trait Taken: Default + Send {
    fn taken(samples: &SeriesSamples, start: i64, end: i64, per: i64) -> Self;

    /// `later`'s samples after these: taken of the same range and unit
    /// from later chunks.
    fn join(&mut self, later: Self);
}

/// Decoded.
impl Taken for Vec<Sample> {
    fn taken(samples: &SeriesSamples, start: i64, end: i64, per: i64) -> Self {
        let mut taken = Vec::new();
        samples.range_into(start, end, per, &mut taken);
        taken
    }

    fn join(&mut self, later: Self) {
        // The last of equal times kept, as within one series' chunks.
        if let (Some(last), Some(first)) = (self.last(), later.first()) {
            if last.0 == first.0 {
                self.pop();
            }
        }
        self.extend(later);
    }
}

/// Compressed, decoded where used.
impl Taken for CompressedSamples {
    fn taken(samples: &SeriesSamples, start: i64, end: i64, per: i64) -> Self {
        let chunks = samples.within(start, end);
        let len = count(chunks.iter().map(Chunk::view), (start, end), per);
        CompressedSamples {
            parts: vec![Part { chunks, start, end }],
            per,
            len,
        }
    }

    fn join(&mut self, later: Self) {
        if later.len == 0 {
            return;
        }
        let (Some(last), Some(first)) = (self.last_time(), later.first_time()) else {
            *self = later;
            return;
        };
        // Equal once floored to the unit: counted once.
        let repeated = last.div_euclid(self.per) == first.div_euclid(self.per);
        self.len = self.len + later.len - usize::from(repeated);
        for part in later.parts {
            match self.parts.last_mut() {
                Some(last) if (last.start, last.end) == (part.start, part.end) => {
                    last.chunks.extend(part.chunks)
                }
                _ => self.parts.push(part),
            }
        }
    }
}

/// One series' samples of a range as memory keeps them, compressed: a
/// copy of their chunks, decoded where they are used (a range function's
/// loop reads them from the processor's cache, not from a list of every
/// sample written out first).
#[derive(Debug, Clone, Default)]
pub struct CompressedSamples {
    /// In time order, each part's samples before the next's.
    parts: Vec<Part>,
    per: i64,
    len: usize,
}

/// Chunks whose samples of `[start, end]` (ns) are taken: memory's, or a
/// run of the chunk cache's blocks.
#[derive(Debug, Clone)]
struct Part {
    chunks: Vec<Chunk>,
    start: i64,
    end: i64,
}

impl Part {
    /// The views of its chunks with samples in its range.
    fn views(&self) -> impl DoubleEndedIterator<Item = View<'_>> + Clone {
        let (start, end) = (self.start, self.end);
        self.chunks
            .iter()
            .map(Chunk::view)
            .filter(move |chunk| chunk.len() > 0 && chunk.last() >= start && chunk.first() <= end)
    }

    /// The time of its first sample in range, or its last.
    fn edge(&self, last: bool) -> Option<i64> {
        let within = |time: &i64| (self.start..=self.end).contains(time);
        let mut views = self.views();
        let chunk = match last {
            true => views.next_back()?,
            false => views.next()?,
        };
        let edge = match last {
            true => chunk.last(),
            false => chunk.first(),
        };
        if within(&edge) {
            return Some(edge);
        }
        // A chunk across the range's edge: its samples inside.
        let mut inside = None;
        chunk.for_each(|time, _| {
            if within(&time) && (last || inside.is_none()) {
                inside = Some(time);
            }
        });
        inside
    }
}

impl CompressedSamples {
    /// How many samples [`decode_into`](Self::decode_into) adds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Adds the samples to `out`, in time order, as
    /// [`Ingestor::samples_compressed`](crate::Ingestor::samples_compressed)
    /// gives them.
    pub fn decode_into(&self, out: &mut Vec<(i64, f64)>) {
        for part in &self.parts {
            range_into(part.views(), (part.start, part.end), self.per, out);
        }
    }

    /// The time (ns) of the first sample, and of the last.
    fn first_time(&self) -> Option<i64> {
        self.parts.iter().find_map(|part| part.edge(false))
    }

    fn last_time(&self) -> Option<i64> {
        self.parts.iter().rev().find_map(|part| part.edge(true))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn inserted(samples: &[Sample]) -> SeriesSamples {
        let mut series = SeriesSamples::default();
        for &(t, v) in samples {
            series.insert(t, v);
        }
        series
    }

    #[test]
    fn samples_stay_sorted_one_per_time_the_later_write_winning() {
        let mut samples = inserted(&[
            (10, 1.0),
            (20, 2.0),
            (20, 2.5),
            (5, 0.5),
            (15, 1.5),
            (10, 1.1),
        ]);
        let all = samples.range(i64::MIN, i64::MAX);
        assert_eq!(all, [(5, 0.5), (10, 1.1), (15, 1.5), (20, 2.5)]);
        assert_eq!(samples.range(10, 15), [(10, 1.1), (15, 1.5)]);
        assert_eq!(samples.range(11, 14), []);
        assert_eq!(samples.range(30, 20), []);
        assert_eq!(samples.trim(21), 4);
        assert_eq!(samples.len(), 0);
    }

    #[test]
    fn times_in_a_coarser_unit_are_floored_the_last_of_equal_times_kept() {
        let ms = |samples: &SeriesSamples, start| {
            let mut out = Vec::new();
            samples.range_into(start, i64::MAX, 1_000_000, &mut out);
            out
        };
        // Times in ns: each floored by a division.
        let ns = SeriesSamples::of_sorted(&[
            (-1, 5.0),
            (1_000_000, 1.0),
            (1_400_000, 2.0),
            (2_999_999, 3.0),
            (3_000_000, 4.0),
        ]);
        assert_eq!(ms(&ns, i64::MIN), [(-1, 5.0), (1, 2.0), (2, 3.0), (3, 4.0)]);
        assert_eq!(ms(&ns, 1_200_000), [(1, 2.0), (2, 3.0), (3, 4.0)]);
        // Times in whole seconds: a multiplication.
        let seconds = SeriesSamples::of_sorted(&[(-2_000_000_000, 1.0), (5_000_000_000, 2.0)]);
        assert_eq!(ms(&seconds, i64::MIN), [(-2_000, 1.0), (5_000, 2.0)]);
    }

    #[test]
    fn engine_samples_merge_under_newer_writes() {
        let mut samples = inserted(&[(20, 9.0), (40, 4.0)]);
        assert_eq!(samples.merge_older(&[(10, 1.0), (20, 2.0), (30, 3.0)]), 20);
        let all = samples.range(i64::MIN, i64::MAX);
        assert_eq!(all, [(10, 1.0), (20, 9.0), (30, 3.0), (40, 4.0)]);
        let mut empty = SeriesSamples::default();
        empty.merge_older(&[(1, 1.0)]);
        assert_eq!(empty.range(0, 1), [(1, 1.0)]);
    }

    proptest! {
        /// Compressed samples decode to the decoded read's samples, and
        /// count them, whatever the chunks' units, the range and the unit
        /// asked for.
        #[test]
        fn compressed_samples_decode_and_count_as_the_decoded_read(
            steps in prop::collection::vec((1i64..4, 0usize..4), 1..800),
            (start, end) in (-1i64..3_000, -1i64..3_000),
            per in prop_oneof![Just(1i64), Just(1_000), Just(1_000_000), Just(1_000_000_000)],
            split in any::<prop::sample::Index>(),
        ) {
            // Times of several precisions: whole s, ms, µs and ns.
            let mut time = 0;
            let samples: Vec<Sample> = steps
                .iter()
                .enumerate()
                .map(|(i, &(step, precision))| {
                    time += step * [1_000_000_000, 1_000_000, 1_000, 1][precision] * 997;
                    (time, i as f64)
                })
                .collect();
            let series = SeriesSamples::of_sorted(&samples);
            let (start, end) = (start * 1_000_000_000, end * 1_000_000_000);
            let decoded: Vec<Sample> = Taken::taken(&series, start, end, per);
            let compressed: CompressedSamples = Taken::taken(&series, start, end, per);
            let mut out = Vec::new();
            compressed.decode_into(&mut out);
            prop_assert_eq!(&out, &decoded);
            prop_assert_eq!(compressed.len(), decoded.len());

            // Split in two (as blocks of the chunk cache), taken and joined.
            let cut = split.index(samples.len() + 1);
            let (before, after) = samples.split_at(cut);
            let (before, after) = (SeriesSamples::of_sorted(before), SeriesSamples::of_sorted(after));
            let mut joined: CompressedSamples = Taken::taken(&before, start, end, per);
            joined.join(Taken::taken(&after, start, end, per));
            let mut out = Vec::new();
            joined.decode_into(&mut out);
            prop_assert_eq!(&out, &decoded);
            prop_assert_eq!(joined.len(), decoded.len());
            let mut joined: Vec<Sample> = Taken::taken(&before, start, end, per);
            joined.join(Taken::taken(&after, start, end, per));
            prop_assert_eq!(&joined, &decoded);

            // Parts of different ranges (the chunk cache's before memory's,
            // cut at any time): each taken of its own, as one.
            let at = start + (end - start).max(0) * split.index(8) as i64 / 8;
            let mut joined: CompressedSamples = Taken::taken(&series, start, at - 1, per);
            joined.join(Taken::taken(&series, at, end, per));
            let mut out = Vec::new();
            joined.decode_into(&mut out);
            prop_assert_eq!(&out, &decoded);
            prop_assert_eq!(joined.len(), decoded.len());
        }

        #[test]
        fn series_samples_answer_as_a_sorted_map(
            writes in prop::collection::vec((0i64..2_000, -50i64..50), 0..1_500),
            engine in prop::collection::btree_map(0i64..2_000, -50i64..50, 0..300),
            (start, end) in (0i64..2_100, 0i64..2_100),
            trim in 0i64..2_100,
        ) {
            let mut model = BTreeMap::new();
            let mut series = SeriesSamples::default();
            let mut bytes = 0isize;
            for (i, &(t, v)) in writes.iter().enumerate() {
                // Mostly in order, some late, some with a fraction.
                let time = match i % 7 { 0 => t, _ => i as i64 * 2 } * 1_000_000;
                let value = match i % 5 { 0 => v as f64 / 3.0, _ => v as f64 };
                let (new, grown) = series.insert(time, value);
                prop_assert_eq!(new, model.insert(time, value).is_none());
                bytes += grown;
            }
            prop_assert_eq!(bytes as usize, series.bytes());
            prop_assert_eq!(series.len(), model.len());
            let want: Vec<Sample> = model.iter()
                .filter(|(&t, _)| (start * 1_000_000..=end * 1_000_000).contains(&t))
                .map(|(&t, &v)| (t, v)).collect();
            prop_assert_eq!(series.range(start * 1_000_000, end * 1_000_000), want);

            let engine: Vec<Sample> = engine.into_iter()
                .map(|(t, v)| (t * 1_000_000 + 1, v as f64)).collect();
            series.merge_older(&engine);
            for (t, v) in engine {
                model.entry(t).or_insert(v);
            }
            let kept_from = series.range(i64::MIN, i64::MAX).len() - series.trim(trim * 1_000_000);
            let all = series.range(i64::MIN, i64::MAX);
            prop_assert_eq!(all.len(), kept_from);
            prop_assert_eq!(series.len(), kept_from);
            let want: Vec<Sample> = model.range(trim * 1_000_000..).map(|(&t, &v)| (t, v)).collect();
            prop_assert!(all.ends_with(&want), "every sample from the cut on is kept");
            prop_assert!(all.iter().all(|s| model.get(&s.0) == Some(&s.1)));
        }
    }
}
