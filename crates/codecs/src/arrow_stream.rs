//! Arrow IPC streams as clients send them (gRPC `WriteArrow`): arrow's
//! stream decoder behind a boundary that turns its panics into errors.
//! arrow's reader trusts some of a message's offsets (a dictionary batch
//! whose buffer lies past the body panics in `Buffer::slice_with_length`,
//! found by the `arrow_ipc` fuzz target), and a panic would end the
//! request's task with nothing said to the client; here it is a malformed
//! stream, and the decoder is not used again.

use std::panic::{catch_unwind, AssertUnwindSafe};

use arrow::buffer::Buffer;
use arrow::datatypes::SchemaRef;
use arrow::ipc::reader::StreamDecoder;
use arrow::record_batch::RecordBatch;

use crate::error::{panic_message, Error, Result};

/// A client's Arrow IPC stream, decoded as its messages arrive.
#[derive(Debug, Default)]
pub struct ArrowStream {
    decoder: StreamDecoder,
    /// Set once the decoder failed or panicked: it is not asked again.
    broken: bool,
}

impl ArrowStream {
    /// A stream that has not begun.
    pub fn new() -> ArrowStream {
        ArrowStream::default()
    }

    /// Decodes from `buffer` (advancing it past what was read) until a
    /// record batch is complete, or the buffer is used up (`None`).
    pub fn decode(&mut self, buffer: &mut Buffer) -> Result<Option<RecordBatch>> {
        self.guarded(|decoder| decoder.decode(buffer))
    }

    /// Checks that the stream ended where a message ends.
    pub fn finish(&mut self) -> Result<()> {
        self.guarded(StreamDecoder::finish)
    }

    /// The stream's schema, once its first message is read.
    pub fn schema(&self) -> Option<SchemaRef> {
        self.decoder.schema()
    }

    fn guarded<T>(
        &mut self,
        step: impl FnOnce(&mut StreamDecoder) -> std::result::Result<T, arrow::error::ArrowError>,
    ) -> Result<T> {
        if self.broken {
            return Err(malformed("it failed to decode before"));
        }
        let decoder = &mut self.decoder;
        let outcome = catch_unwind(AssertUnwindSafe(|| step(decoder)));
        let error = match outcome {
            Ok(Ok(value)) => return Ok(value),
            Ok(Err(error)) => malformed(&error.to_string()),
            Err(panic) => {
                malformed(panic_message(&*panic).unwrap_or("a message arrow cannot read"))
            }
        };
        self.broken = true;
        Err(error)
    }
}

fn malformed(why: &str) -> Error {
    Error::Invalid(format!("Arrow IPC stream: {why}"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use arrow::array::Int64Array;
    use arrow::ipc::writer::StreamWriter;
    use std::sync::Arc;

    fn stream() -> Vec<u8> {
        let batch =
            RecordBatch::try_from_iter([("v", Arc::new(Int64Array::from(vec![1, 2])) as _)])
                .unwrap();
        let mut writer = StreamWriter::try_new(Vec::new(), &batch.schema()).unwrap();
        writer.write(&batch).unwrap();
        writer.finish().unwrap();
        writer.into_inner().unwrap()
    }

    #[test]
    fn a_stream_decodes_in_pieces_of_any_size() {
        let bytes = stream();
        for size in [1, 7, bytes.len()] {
            let mut decoder = ArrowStream::new();
            let mut rows = 0;
            for piece in bytes.chunks(size) {
                let mut buffer = Buffer::from(piece);
                while !buffer.is_empty() {
                    if let Some(batch) = decoder.decode(&mut buffer).unwrap() {
                        rows += batch.num_rows();
                    }
                }
            }
            decoder.finish().unwrap();
            assert_eq!(rows, 2, "pieces of {size}");
        }
    }

    /// The input the `arrow_ipc` fuzz target found
    /// (fuzz/seeds/arrow_ipc/regression-dictionary-offset): arrow panics
    /// on it; here it is an error, and the stream stays refused.
    #[test]
    fn a_panic_of_arrow_is_a_malformed_stream() {
        let input = include_bytes!("../../../fuzz/seeds/arrow_ipc/regression-dictionary-offset");
        // The target's first byte is its message size; 0: one message.
        assert_eq!(input[0], 0, "one message");
        let mut decoder = ArrowStream::new();
        let mut buffer = Buffer::from(&input[1..]);
        let mut failed = None;
        while !buffer.is_empty() {
            match decoder.decode(&mut buffer) {
                Ok(_) => {}
                Err(error) => {
                    failed = Some(error.to_string());
                    break;
                }
            }
        }
        let failed = failed.expect("the stream is refused");
        assert!(failed.starts_with("Arrow IPC stream: "), "{failed}");
        assert!(decoder.decode(&mut Buffer::from(&[0u8; 8][..])).is_err());
    }
}
