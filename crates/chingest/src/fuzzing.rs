//! What the fuzz targets (`fuzz/` at the repository's root) reach that is
//! not the library's API: compiled only into their builds (`cargo fuzz`
//! passes `--cfg fuzzing`), never into the server.

use arrow::record_batch::RecordBatch;

use crate::backup::manifest::Manifest;
use crate::write::arrow_input::ArrowInput;
use crate::write::request::Tags;

/// Reads `text` as a backup's manifest (as `restore` does); one that reads
/// must read back the same after it is written again.
pub fn backup_manifest(text: &str) {
    if let Ok(manifest) = Manifest::parse(text) {
        let rendered = manifest.render();
        let again = Manifest::parse(&rendered)
            .unwrap_or_else(|e| panic!("{text:?} was written as {rendered:?}: {e}"));
        assert_eq!(again, manifest, "{text:?} was written as {rendered:?}");
    }
}

/// `body` with the seal a manifest ends with, so that what the fuzzer
/// writes gets past the check that a manifest was not cut or altered.
pub fn seal_manifest(body: &str) -> String {
    format!(
        "{body}end {:016x}\n",
        xxhash_rust::xxh3::xxh3_64(body.as_bytes())
    )
}

/// Checks an Arrow batch a client sent as `WriteArrow` does before storing
/// it, its tags in `tag_columns`.
pub fn arrow_batch(batch: &RecordBatch, tag_columns: &[&str]) -> crate::Result<()> {
    ArrowInput::new(batch, Tags::Columns(tag_columns)).map(drop)
}
