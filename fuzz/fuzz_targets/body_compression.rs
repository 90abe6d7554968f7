//! Request bodies as `Content-Encoding: gzip` and `snappy` arrive: decoded
//! under the body limit, never allocating much past it whatever the input
//! claims, and what is compressed decompresses to itself.

#![no_main]

use chingest_codecs::compression::{decompress, Compression, DecompressError};
use chingest_fuzz::{bounded, MIB};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    // One byte of choices (bit 0: gzip, bit 1: compress rather than
    // receive), two of limit, then the bytes.
    let [choices, l0, l1, bytes @ ..] = input else {
        return;
    };
    let compression = if choices & 1 == 1 {
        Compression::Gzip
    } else {
        Compression::Snappy
    };
    if choices & 2 == 0 {
        let limit = usize::from(u16::from_le_bytes([*l0, *l1]));
        // The decoded bytes, read one past the limit, may double once.
        let decoded = bounded(bytes.len(), 4, 4 * limit + MIB, || {
            decompress(compression, bytes, limit)
        });
        if let Ok(decoded) = decoded {
            assert!(decoded.len() <= limit);
        }
        return;
    }
    let raw = match compression {
        Compression::Gzip => {
            use std::io::Write as _;
            let mut encoder =
                flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
            encoder.write_all(bytes).unwrap();
            encoder.finish().unwrap()
        }
        Compression::Snappy => snap::raw::Encoder::new().compress_vec(bytes).unwrap(),
    };
    assert_eq!(
        decompress(compression, &raw, bytes.len()).as_deref(),
        Ok(bytes)
    );
    if !bytes.is_empty() {
        assert_eq!(
            decompress(compression, &raw, bytes.len() - 1),
            Err(DecompressError::TooLarge {
                limit: bytes.len() - 1
            })
        );
    }
});
