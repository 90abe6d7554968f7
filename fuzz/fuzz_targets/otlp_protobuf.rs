//! OTLP metrics as protobuf (OTLP/gRPC, and OTLP/HTTP's
//! `application/x-protobuf`): chingest's in-place reader, the resource
//! tags and the conversion into tables. No panic, memory bounded by the
//! message's size, every data point either stored or counted as refused
//! (checked against prost's decoding of the same message).

#![no_main]

use chingest_fuzz::{bounded, MIB};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|message: &[u8]| {
    bounded(message.len(), 256, MIB, || {
        chingest_fuzz::otlp::convert_and_count(message)
    });
});
