//! Tests that open the engine on one data directory more than once. The
//! engine allows one data path per process, so each phase runs in a child
//! process: the test binary re-executed with `CHINGEST_TEST_PHASE` set and
//! the data directory as its argument. A phase whose name ends in `-crash`
//! ends by sending itself SIGKILL ([`crash`]), as `kill -9` would: no
//! destructor runs, nothing is closed.

// Each test binary compiles this module on its own and uses part of it.
#![allow(dead_code, unreachable_pub)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::Command;

const PHASE: &str = "CHINGEST_TEST_PHASE";

/// The test binary's `main`: in a phase child, runs `child(phase, dir)` on
/// a runtime; otherwise runs `trials`.
pub fn main<F, Fut>(trials: Vec<libtest_mimic::Trial>, child: F)
where
    F: FnOnce(String, PathBuf) -> Fut,
    Fut: Future<Output = ()>,
{
    if let Ok(phase) = std::env::var(PHASE) {
        let dir = std::env::args().nth(1).expect("data dir argument");
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(child(phase, PathBuf::from(dir)));
        return;
    }
    let args = libtest_mimic::Arguments::from_args();
    libtest_mimic::run(&args, trials).exit()
}

/// A trial that runs `test`.
pub fn trial(name: &'static str, test: fn()) -> libtest_mimic::Trial {
    libtest_mimic::Trial::test(name, move || {
        test();
        Ok(())
    })
}

/// Runs each of `phases` in a child process on `dir`, in order; each must
/// succeed, or be killed if its name ends in `-crash`.
pub fn run(dir: &Path, phases: &[&str]) {
    for &phase in phases {
        let out = Command::new(std::env::current_exe().unwrap())
            .arg(dir)
            .env(PHASE, phase)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if phase.ends_with("-crash") {
            use std::os::unix::process::ExitStatusExt;
            assert_eq!(
                out.status.signal(),
                Some(9),
                "phase {phase} should end killed: {}\n{stderr}",
                out.status
            );
        } else {
            assert!(
                out.status.success(),
                "phase {phase} failed: {}\n{stderr}",
                out.status
            );
        }
    }
}

/// Ends this process with SIGKILL. (Not `abort()`: the engine handles
/// SIGABRT itself and takes minutes to exit.)
pub fn crash() -> ! {
    let pid = std::process::id().to_string();
    let _ = Command::new("kill").args(["-KILL", &pid]).status();
    unreachable!("SIGKILL ends the process");
}
