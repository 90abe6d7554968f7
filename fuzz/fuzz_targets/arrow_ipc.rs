//! `WriteArrow`'s Arrow IPC stream, cut into messages as a client may cut
//! it: the server's decoder (arrow's, its panics made errors), then the
//! checks a batch passes before it is stored (time column, tag and field
//! columns and their types). No panic escapes, memory bounded by the
//! stream's size.

#![no_main]

use arrow::buffer::Buffer;
use chingest_codecs::arrow_stream::ArrowStream;
use chingest_fuzz::{bounded, catching, MIB};
use libfuzzer_sys::fuzz_target;

/// The batches' tag columns (the request's `tag_columns`), as the seeds'
/// streams name them.
const TAG_COLUMNS: &[&str] = &["host", "region"];

fuzz_target!(|input: &[u8]| {
    // One byte: the messages' size in 64-byte units (0: one message), then
    // the stream.
    let [size, stream @ ..] = input else { return };
    let size = if *size == 0 {
        stream.len().max(1)
    } else {
        64 * usize::from(*size)
    };
    catching(|| {
        bounded(stream.len(), 256, 4 * MIB, || {
            let mut decoder = ArrowStream::new();
            for message in stream.chunks(size) {
                let mut buffer = Buffer::from(message);
                while !buffer.is_empty() {
                    match decoder.decode(&mut buffer) {
                        Ok(Some(batch)) => {
                            let _ = chingest::fuzzing::arrow_batch(&batch, TAG_COLUMNS);
                        }
                        Ok(None) => {}
                        Err(_) => return,
                    }
                }
            }
            let _ = decoder.finish();
        })
    });
});
