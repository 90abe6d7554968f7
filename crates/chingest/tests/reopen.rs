//! Data, schemas and known series survive closing the engine and opening the
//! same data directory in a new process. The engine allows one data path per
//! process, so each phase runs in a child process: this binary re-executed
//! with `CHINGEST_REOPEN_PHASE` set.

use std::path::Path;
use std::process::Command;

use chingest::{IngestConfig, Ingestor, WriteOptions};

const PHASE: &str = "CHINGEST_REOPEN_PHASE";

fn main() {
    if let Ok(phase) = std::env::var(PHASE) {
        let dir = std::env::args().nth(1).expect("data dir argument");
        let runtime = tokio::runtime::Runtime::new().unwrap();
        runtime.block_on(child(&phase, Path::new(&dir)));
        return;
    }
    let args = libtest_mimic::Arguments::from_args();
    let trials = vec![libtest_mimic::Trial::test(
        "data_survives_close_and_reopen_in_a_new_process",
        || {
            data_survives_close_and_reopen_in_a_new_process();
            Ok(())
        },
    )];
    libtest_mimic::run(&args, trials).exit()
}

fn data_survives_close_and_reopen_in_a_new_process() {
    let dir = tempfile::tempdir().unwrap();
    for phase in ["write", "reopen"] {
        let out = Command::new(std::env::current_exe().unwrap())
            .arg(dir.path())
            .env(PHASE, phase)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(
            out.status.success(),
            "phase {phase} failed: {}\n{stderr}",
            out.status
        );
    }
}

async fn query(ing: &Ingestor, sql: &str) -> String {
    String::from_utf8(ing.query(sql, "TabSeparated").await.unwrap()).unwrap()
}

async fn child(phase: &str, dir: &Path) {
    let ing = Ingestor::open(IngestConfig::new(dir)).await.unwrap();
    let options = WriteOptions::default();
    match phase {
        "write" => {
            // Small writes land in the Buffer table; close() must persist them.
            let out = ing
                .write_lp(
                    "keep",
                    "autogen",
                    b"m,host=a v=1i,f=0.5 1\nm,host=b v=2i 2\n",
                    &options,
                )
                .await
                .unwrap();
            assert_eq!(out.accepted, 2);
            ing.write_lp("keep", "weekly", b"other s=\"x\" 3\n", &options)
                .await
                .unwrap();
        }
        "reopen" => {
            assert_eq!(
                query(&ing, "SELECT count(), sum(v) FROM keep.`m.autogen`").await,
                "2\t3\n"
            );
            assert_eq!(
                query(&ing, "SELECT s FROM keep.`other.weekly`").await,
                "x\n"
            );
            // The schema came back: a conflicting type is refused...
            let out = ing
                .write_lp(
                    "keep",
                    "autogen",
                    b"m,host=a v=1.5 4\nm,host=a v=3i 5\n",
                    &options,
                )
                .await
                .unwrap();
            assert_eq!(out.accepted, 1, "{out:?}");
            assert!(out.rejected[0].reason.contains("integer"), "{out:?}");
            // ...and known series are not stored twice.
            assert_eq!(query(&ing, "SELECT count() FROM keep._series").await, "3\n");
        }
        other => panic!("unknown phase {other}"),
    }
    ing.close().await.unwrap();
}
