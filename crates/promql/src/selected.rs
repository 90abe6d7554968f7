//! A selected series' samples as selection reads them and evaluation
//! uses them: those read from the engine or the chunk cache, decoded,
//! then memory's, compressed until a range function decodes the series
//! where it reads it.

use chingest::CompressedSamples;

use crate::value::{Labels, Series};

/// A selected series: its labels and its samples as read.
#[derive(Debug)]
pub(crate) struct Selected {
    pub(crate) labels: Labels,
    pub(crate) samples: Samples,
}

impl Selected {
    pub(crate) fn decode(self) -> Series {
        Series {
            labels: self.labels,
            points: self.samples.decode(),
        }
    }
}

/// A series' samples (ms, value) as selection reads them: those read
/// from the engine or the chunk cache, decoded, then memory's, after them
/// and compressed until used (a range function decodes each series where
/// it reads it: no list of every selected sample is written out first).
#[derive(Debug, Default)]
pub(crate) struct Samples {
    pub(crate) decoded: Vec<(i64, f64)>,
    pub(crate) recent: Option<CompressedSamples>,
}

impl Samples {
    /// Only decoded samples.
    pub(crate) fn decoded(decoded: Vec<(i64, f64)>) -> Samples {
        Samples {
            decoded,
            recent: None,
        }
    }

    /// How many there are.
    pub(crate) fn len(&self) -> usize {
        self.decoded.len() + self.recent.as_ref().map_or(0, CompressedSamples::len)
    }

    /// Them all, in time order, in place of what `out` held.
    pub(crate) fn decode_into(&self, out: &mut Vec<(i64, f64)>) {
        out.clear();
        out.reserve(self.len());
        out.extend_from_slice(&self.decoded);
        if let Some(recent) = &self.recent {
            recent.decode_into(out);
        }
    }

    /// Them all, in time order, in a list of their own.
    pub(crate) fn to_vec(&self) -> Vec<(i64, f64)> {
        let mut out = Vec::new();
        self.decode_into(&mut out);
        out
    }

    /// Them all, in time order.
    pub(crate) fn decode(self) -> Vec<(i64, f64)> {
        let Some(recent) = self.recent else {
            return self.decoded;
        };
        let mut out = self.decoded;
        out.reserve(recent.len());
        recent.decode_into(&mut out);
        out
    }
}
