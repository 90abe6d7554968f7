//! Prometheus remote write 1.0, as `/api/v1/write` reads a decompressed
//! body: chingest's in-place reader, then the tables it becomes. No panic,
//! memory bounded by the body's size, and the reader agrees with prost's
//! decoding of the same message on the samples it holds.

#![no_main]

use chingest_codecs::prometheus::{tables, Decoded};
use chingest_fuzz::{bounded, MIB};
use libfuzzer_sys::fuzz_target;
use prost::Message as _;

fuzz_target!(|message: &[u8]| {
    bounded(message.len(), 256, MIB, || {
        let Ok(decoded) = Decoded::v1(message) else {
            return;
        };
        if let Ok(generated) = chingest_proto::prometheus::WriteRequest::decode(message) {
            let samples: usize = generated.timeseries.iter().map(|s| s.samples.len()).sum();
            assert_eq!(decoded.sample_count(), samples);
        }
        let _ = tables(&decoded);
    });
});
