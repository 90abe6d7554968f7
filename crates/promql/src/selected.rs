//! A selected series' samples as selection reads them and evaluation
//! uses them: those read from the engine or the chunk cache, decoded,
//! then memory's, compressed until a range function decodes the series
//! where it reads it.

use chingest::{parallel, CompressedSamples};

use crate::value::{Labels, Series};

/// A selected series: its labels and its samples as read.
#[derive(Debug)]
pub(crate) struct Selected {
    pub(crate) labels: Labels,
    pub(crate) samples: Samples,
}

/// Series worth a core of their own when their samples are decoded
/// (`parallel::map`).
const SERIES_PER_TASK: usize = 32;

impl Selected {
    /// Each series decoded, on every core when they are many.
    pub(crate) fn decode_all(selected: Vec<Selected>) -> Vec<Series> {
        parallel::map(selected, SERIES_PER_TASK, Selected::decode)
    }

    /// Each series decoded into a list of its own, the selection kept.
    pub(crate) fn decode_each(selected: &[Selected]) -> Vec<Series> {
        parallel::map(selected.iter().collect(), SERIES_PER_TASK, |s| Series {
            labels: s.labels.clone(),
            points: s.samples.to_vec(),
        })
    }

    fn decode(self) -> Series {
        Series {
            labels: self.labels,
            points: self.samples.decode(),
        }
    }
}

/// A series' samples (ms, value) as selection reads them, in time order:
/// parts read from the engine, decoded, and parts memory or the chunk
/// cache holds, compressed until used (a range function decodes each
/// series where it reads it: no list of every selected sample is written
/// out first).
#[derive(Debug, Default)]
pub(crate) struct Samples {
    parts: Vec<Part>,
}

#[derive(Debug)]
enum Part {
    Decoded(Vec<(i64, f64)>),
    Compressed(CompressedSamples),
}

impl Samples {
    /// Only decoded samples.
    pub(crate) fn decoded(decoded: Vec<(i64, f64)>) -> Samples {
        let mut samples = Samples::default();
        samples.push_decoded(decoded);
        samples
    }

    /// Adds decoded samples after these.
    pub(crate) fn push_decoded(&mut self, decoded: Vec<(i64, f64)>) {
        match self.parts.last_mut() {
            _ if decoded.is_empty() => {}
            Some(Part::Decoded(last)) => last.extend(decoded),
            _ => self.parts.push(Part::Decoded(decoded)),
        }
    }

    /// Adds compressed samples after these.
    pub(crate) fn push_compressed(&mut self, compressed: CompressedSamples) {
        if !compressed.is_empty() {
            self.parts.push(Part::Compressed(compressed));
        }
    }

    /// How many there are.
    pub(crate) fn len(&self) -> usize {
        let len = |part: &Part| match part {
            Part::Decoded(decoded) => decoded.len(),
            Part::Compressed(compressed) => compressed.len(),
        };
        self.parts.iter().map(len).sum()
    }

    /// Them all, in time order, in place of what `out` held.
    pub(crate) fn decode_into(&self, out: &mut Vec<(i64, f64)>) {
        out.clear();
        out.reserve(self.len());
        for part in &self.parts {
            match part {
                Part::Decoded(decoded) => out.extend_from_slice(decoded),
                Part::Compressed(compressed) => compressed.decode_into(out),
            }
        }
    }

    /// Them all, in time order, in a list of their own.
    pub(crate) fn to_vec(&self) -> Vec<(i64, f64)> {
        let mut out = Vec::new();
        self.decode_into(&mut out);
        out
    }

    /// Them all, in time order.
    pub(crate) fn decode(mut self) -> Vec<(i64, f64)> {
        match self.parts.as_mut_slice() {
            [Part::Decoded(decoded)] => std::mem::take(decoded),
            _ => self.to_vec(),
        }
    }
}
