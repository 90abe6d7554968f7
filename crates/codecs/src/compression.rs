//! Request bodies as their senders compress them: snappy's block format
//! (Prometheus remote write) and gzip (InfluxDB clients, OTLP/HTTP),
//! decoded under a limit on what they may decode to. Neither can make the
//! decoder allocate more than about the limit, whatever the input claims:
//! a snappy block states its length first and is refused on it; gzip is
//! read until one byte past the limit.

use std::io::Read;

/// How a body is compressed (`Content-Encoding`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Compression {
    /// gzip (`gzip`, `x-gzip`); several members are read one after another.
    Gzip,
    /// Snappy's block format (`snappy`), as Prometheus remote write sends it.
    Snappy,
}

/// Why a body cannot be decompressed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DecompressError {
    /// It decodes, or says it decodes, to more than the limit.
    #[error("decompressed, the body is larger than {limit} bytes")]
    TooLarge {
        /// The limit it passes.
        limit: usize,
    },
    /// It is not what its encoding says.
    #[error("invalid {encoding} body: {why}")]
    Invalid {
        /// `snappy` or `gzip`.
        encoding: &'static str,
        /// Where it breaks.
        why: String,
    },
}

/// The length a snappy block says it decodes to, refused past `limit`
/// before anything is decoded; `None` for gzip, whose length is known once
/// it is decoded.
pub fn declared_len(
    compression: Compression,
    raw: &[u8],
    limit: usize,
) -> Result<Option<usize>, DecompressError> {
    match compression {
        Compression::Gzip => Ok(None),
        Compression::Snappy => {
            let length = snap::raw::decompress_len(raw).map_err(|err| snappy_error(&err))?;
            if length > limit {
                return Err(DecompressError::TooLarge { limit });
            }
            Ok(Some(length))
        }
    }
}

/// `raw` decompressed, at most `limit` bytes of it.
pub fn decompress(
    compression: Compression,
    raw: &[u8],
    limit: usize,
) -> Result<Vec<u8>, DecompressError> {
    let decoded = match declared_len(compression, raw, limit)? {
        Some(length) => unsnappy(raw, length)?,
        None => {
            let mut out = Vec::new();
            flate2::read::MultiGzDecoder::new(raw)
                .take(limit as u64 + 1)
                .read_to_end(&mut out)
                .map_err(|err| DecompressError::Invalid {
                    encoding: "gzip",
                    why: err.to_string(),
                })?;
            out
        }
    };
    if decoded.len() > limit {
        return Err(DecompressError::TooLarge { limit });
    }
    Ok(decoded)
}

/// Decompresses a snappy block of `length` bytes. Not `decompress_vec`: its
/// zeroed buffer made jemalloc purge and fault in fresh pages for every
/// body (2.5% of the server's CPU under remote write, docs/benchmarks.md
/// §11); the decoder overwrites every byte anyway.
fn unsnappy(raw: &[u8], length: usize) -> Result<Vec<u8>, DecompressError> {
    // `vec![0; length]` is the zeroed allocation this avoids.
    #[allow(clippy::slow_vector_initialization)]
    let mut out = Vec::with_capacity(length);
    out.resize(length, 0);
    let written = snap::raw::Decoder::new()
        .decompress(raw, &mut out)
        .map_err(|err| snappy_error(&err))?;
    out.truncate(written);
    Ok(out)
}

fn snappy_error(err: &snap::Error) -> DecompressError {
    DecompressError::Invalid {
        encoding: "snappy",
        why: err.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(data: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        encoder.write_all(data).unwrap();
        encoder.finish().unwrap()
    }

    #[test]
    fn both_encodings_round_trip_up_to_the_limit() {
        let data = b"cpu usage=1 1\n".repeat(100);
        let snappy = snap::raw::Encoder::new().compress_vec(&data).unwrap();
        for (compression, raw) in [
            (Compression::Snappy, snappy),
            (Compression::Gzip, gzip(&data)),
        ] {
            assert_eq!(decompress(compression, &raw, data.len()).unwrap(), data);
            assert_eq!(
                decompress(compression, &raw, data.len() - 1),
                Err(DecompressError::TooLarge {
                    limit: data.len() - 1
                })
            );
        }
    }

    #[test]
    fn a_snappy_block_claiming_too_much_is_refused_before_decoding() {
        // A varint length of 2^32 - 1 and nothing after it.
        let claim = [0xff, 0xff, 0xff, 0xff, 0x0f];
        assert_eq!(
            declared_len(Compression::Snappy, &claim, 1 << 20),
            Err(DecompressError::TooLarge { limit: 1 << 20 })
        );
    }

    #[test]
    fn two_gzip_members_are_one_body_and_garbage_is_invalid() {
        let mut raw = gzip(b"a=1 ");
        raw.extend(gzip(b"b=2"));
        assert_eq!(
            decompress(Compression::Gzip, &raw, 100).unwrap(),
            b"a=1 b=2"
        );
        let err = decompress(Compression::Gzip, b"not gzip", 100).unwrap_err();
        assert!(
            matches!(
                err,
                DecompressError::Invalid {
                    encoding: "gzip",
                    ..
                }
            ),
            "{err}"
        );
        let err = decompress(Compression::Snappy, b"\x05ab", 100).unwrap_err();
        assert!(
            matches!(
                err,
                DecompressError::Invalid {
                    encoding: "snappy",
                    ..
                }
            ),
            "{err}"
        );
    }
}
