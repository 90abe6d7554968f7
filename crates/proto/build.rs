//! Compiles `proto/chingest/v1/ingest.proto` with protox (no protoc needed)
//! into Rust messages, a tonic client and server, and the encoded file
//! descriptor set that server reflection serves.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../proto");
    let proto = root.join("chingest/v1/ingest.proto");
    println!("cargo:rerun-if-changed={}", proto.display());
    let descriptors = protox::compile([&proto], [&root])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("chingest_v1_descriptor.bin"),
        prost::Message::encode_to_vec(&descriptors),
    )?;
    tonic_prost_build::configure()
        // IPC and line-protocol bytes stay `Bytes`: no copy on receipt.
        .bytes(".")
        // Written by hand (src/point.rs): maps as entry lists of `Bytes`,
        // decoded without hashing or copying each string.
        .extern_path(".chingest.v1.Points", "crate::point::Points")
        .extern_path(".chingest.v1.Point", "crate::point::Point")
        .extern_path(".chingest.v1.FieldValue", "crate::point::FieldValue")
        .compile_fds(descriptors)?;
    Ok(())
}
