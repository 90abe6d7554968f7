//! The gRPC `Write` request (`chingest.v1.WriteRequest`): prost's decoding,
//! with the hand-written `Points`/`Point` messages, then the points'
//! conversion (or the line protocol's parse). No panic, memory bounded by
//! the message's size, every point converted or refused once, and a
//! request that decodes encodes to bytes that decode to the same.

#![no_main]

use chingest_fuzz::{bounded, MIB};
use chingest_proto::v1::{write_request::Data, WriteRequest};
use libfuzzer_sys::fuzz_target;
use lineproto::ParseOptions;
use prost::Message as _;

fuzz_target!(|message: &[u8]| {
    bounded(message.len(), 256, MIB, || {
        let Ok(request) = WriteRequest::decode(message) else {
            return;
        };
        let encoded = request.encode_to_vec();
        let again = WriteRequest::decode(&encoded[..]).expect("what was encoded decodes");
        assert_eq!(again.encode_to_vec(), encoded);
        match &request.data {
            Some(Data::Points(points)) => {
                chingest_server::fuzzing::grpc_points(&points.points);
            }
            Some(Data::LineProtocol(body)) => {
                let _ = lineproto::parse(body, ParseOptions::default());
            }
            None => {}
        }
    });
});
