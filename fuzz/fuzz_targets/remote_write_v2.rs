//! Prometheus remote write 2.0, as `/api/v1/write` reads a decompressed
//! body sent as `io.prometheus.write.v2.Request`: prost's decoding, the
//! symbol table's checks, then the tables. No panic, memory bounded by the
//! body's size.

#![no_main]

use chingest_codecs::prometheus::{tables, Decoded};
use chingest_fuzz::{bounded, MIB};
use chingest_proto::prometheus::v2;
use libfuzzer_sys::fuzz_target;
use prost::Message as _;

fuzz_target!(|message: &[u8]| {
    bounded(message.len(), 256, MIB, || {
        let Ok(request) = v2::Request::decode(message) else {
            return;
        };
        let Ok(decoded) = Decoded::v2(&request) else {
            return;
        };
        let _ = tables(&decoded);
    });
});
