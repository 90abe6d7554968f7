//! chingest's gRPC API, generated at build time from
//! `proto/chingest/v1/ingest.proto` (which documents every message and
//! field): the messages, the `Ingest` client (`v1::ingest_client`) and the
//! server trait (`v1::ingest_server`), with `v1::Point` and its
//! `FieldValue` written by hand (`point.rs`: its maps decode as entry
//! lists of `Bytes`); and the
//! Prometheus remote write messages (`prometheus`).

/// Version 1 of the API, package `chingest.v1`.
pub mod v1 {
    #![allow(missing_docs, unreachable_pub, clippy::all)]
    tonic::include_proto!("chingest.v1");
    pub use crate::point::{field_value, Field, FieldValue, Point, Points, Tag};
}

mod point;

/// The encoded `FileDescriptorSet` of the API, for gRPC server reflection.
pub const FILE_DESCRIPTOR_SET: &[u8] =
    include_bytes!(concat!(env!("OUT_DIR"), "/chingest_v1_descriptor.bin"));

pub mod prometheus;
