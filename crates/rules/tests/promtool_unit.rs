//! `chingest_rules::unittest` against promtool 2.42's `test rules` on the
//! test files in `tests/data/unit/`: each `NAME.test.yml`'s `NAME.stdout`,
//! `NAME.stderr` and `NAME.code` are what promtool printed and returned,
//! run from this crate's directory (made again with
//! `for f in passing failing; do promtool test rules tests/data/unit/$f.test.yml > tests/data/unit/$f.stdout 2> tests/data/unit/$f.stderr; echo $? > tests/data/unit/$f.code; done`).
//! Where promtool is installed (Debian's `prometheus` package), the test
//! also runs it, so the recorded answers stay promtool's.
//!
//! The passing file's assertions (alerts pending and firing at their
//! times, `keep_firing_for`, templated labels and annotations, recorded
//! series read by the next rule, `rate` over a stale marker, `ALERTS` and
//! `ALERTS_FOR_STATE`) hold for both evaluations: where they pass, chingest
//! and Prometheus agree. The failing file's output is compared line by
//! line. One deliberate difference: a query that does not parse gives
//! chingest's parser's reason, without promtool's line and column.

use std::fs;
use std::path::Path;
use std::process::Command;

use chingest_rules::unittest::test_files;

const FILES: [&str; 2] = ["passing", "failing"];

fn path(name: &str) -> String {
    format!("tests/data/unit/{name}.test.yml")
}

/// What promtool answered for `name`: stdout, stderr, exit code.
fn recorded(name: &str) -> (String, String, i32) {
    let read = |ext: &str| {
        let file =
            Path::new(env!("CARGO_MANIFEST_DIR")).join(format!("tests/data/unit/{name}.{ext}"));
        fs::read_to_string(file).unwrap()
    };
    (
        read("stdout"),
        read("stderr"),
        read("code").trim().parse().unwrap(),
    )
}

/// `text` with a parse error's position left out (the one difference).
fn without_positions(text: &str) -> String {
    text.lines()
        .map(|line| match line.split_once("err: ") {
            Some((head, reason)) if reason.contains("parse error: ") => {
                let reason = &reason[reason.find("parse error: ").unwrap()..];
                format!("{head}err: {reason}")
            }
            _ => line.to_owned(),
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn unit_tests_run_as_promtool_runs_them() {
    std::env::set_current_dir(env!("CARGO_MANIFEST_DIR")).unwrap();
    for name in FILES {
        let (stdout, stderr, code) = recorded(name);
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let ours = test_files(&[path(name)], &mut out, &mut err).unwrap();
        let (out, err) = (
            String::from_utf8(out).unwrap(),
            String::from_utf8(err).unwrap(),
        );
        assert_eq!(ours, code, "{name}: exit code\n{out}{err}");
        assert_eq!(out, stdout, "{name}: standard output");
        assert_eq!(
            without_positions(&err),
            without_positions(&stderr),
            "{name}: standard error"
        );
    }
}

#[test]
fn the_recorded_answers_are_promtools() {
    let Ok(version) = Command::new("promtool").arg("--version").output() else {
        return; // Not installed: the recorded answers stand.
    };
    let version = String::from_utf8_lossy(&version.stdout).into_owned()
        + &String::from_utf8_lossy(&version.stderr);
    if !version.contains("version 2.42.") {
        return;
    }
    for name in FILES {
        let run = Command::new("promtool")
            .args(["test", "rules", &path(name)])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        let (stdout, stderr, code) = recorded(name);
        assert_eq!(run.status.code(), Some(code), "{name}");
        assert_eq!(String::from_utf8_lossy(&run.stdout), stdout, "{name}");
        assert_eq!(String::from_utf8_lossy(&run.stderr), stderr, "{name}");
    }
}
