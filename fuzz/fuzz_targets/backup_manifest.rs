//! A backup's manifest, as `restore` reads it before the engine reads any
//! file: sealed (so the fuzzer's text gets past the check that it was not
//! cut or altered) or as given. No panic, and a manifest that reads is
//! written back as one that reads the same.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|input: &[u8]| {
    // One byte: whether to seal; then the text.
    let [seal, text @ ..] = input else { return };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    if seal & 1 == 1 {
        chingest::fuzzing::backup_manifest(&chingest::fuzzing::seal_manifest(text));
    } else {
        chingest::fuzzing::backup_manifest(text);
    }
});
