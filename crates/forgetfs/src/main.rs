//! `forgetfs BACKING MOUNTPOINT`: serves the durable state of BACKING at
//! MOUNTPOINT until unmounted. `kill -9` is the power cut: then
//! `umount -l MOUNTPOINT`, and the next mount shows only what was synced.

use std::path::Path;
use std::process::ExitCode;

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [backing, mountpoint] = &args[..] else {
        eprintln!("usage: forgetfs BACKING MOUNTPOINT");
        return ExitCode::from(2);
    };
    match forgetfs::serve(Path::new(backing), Path::new(mountpoint)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("forgetfs: {e}");
            ExitCode::FAILURE
        }
    }
}
