//! OTLP metrics in OTLP/HTTP's JSON encoding (`application/json`): made
//! protobuf, then read like `otlp_protobuf`. No panic, memory bounded by
//! the body's size, every data point stored or counted as refused.

#![no_main]

use chingest_fuzz::{bounded, MIB};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|json: &[u8]| {
    bounded(json.len(), 256, MIB, || {
        if let Ok(message) = chingest_codecs::otlp::protobuf_from_json(json) {
            chingest_fuzz::otlp::convert_and_count(&message);
        }
    });
});
