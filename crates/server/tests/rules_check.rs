//! `chingest rules check` prints and exits as `promtool check rules`: the
//! binary run on the rule files of `crates/rules/tests/data/`, its output
//! compared with what promtool 2.42 printed for each (recorded there; the
//! reason after `could not parse expression:` is our parser's wording).
//! No engine: the subcommand reads files only.

use std::path::{Path, PathBuf};
use std::process::Command;

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../rules/tests/data")
}

fn comparable(line: &str) -> &str {
    const MARK: &str = "could not parse expression: ";
    match line.find(MARK) {
        Some(at) => &line[..at + MARK.len()],
        None => line,
    }
}

fn run(args: &[&str]) -> (String, String, i32) {
    let output = Command::new(env!("CARGO_BIN_EXE_chingest"))
        .args(["rules", "check"])
        .args(args)
        .current_dir(data())
        .output()
        .unwrap();
    (
        String::from_utf8(output.stdout).unwrap(),
        String::from_utf8(output.stderr).unwrap(),
        output.status.code().unwrap(),
    )
}

#[test]
fn each_file_prints_and_exits_as_promtool() {
    for stem in [
        "node_exporter_recording",
        "node_exporter_alerts",
        "bad_expr",
        "bad_yaml",
        "duplicate_group",
        "for_on_recording",
        "invalid_label_name",
        "bad_template",
        "lint_duplicate",
    ] {
        let read =
            |ext: &str| std::fs::read_to_string(data().join(format!("{stem}.{ext}"))).unwrap();
        let (out, err, code) = run(&[&format!("{stem}.yml")]);
        assert_eq!(out, read("stdout"), "{stem}");
        assert_eq!(code.to_string(), read("code").trim(), "{stem}");
        let ours: Vec<&str> = err.lines().map(comparable).collect();
        let want = read("stderr");
        let want: Vec<&str> = want.lines().map(comparable).collect();
        assert_eq!(ours, want, "{stem}");
    }
}

#[test]
fn several_files_fail_together_and_missing_ones_are_refused_first() {
    let (out, err, code) = run(&["node_exporter_recording.yml", "bad_yaml.yml", "empty.yml"]);
    assert_eq!(code, 1);
    assert_eq!(
        out,
        "Checking node_exporter_recording.yml\n  SUCCESS: 11 rules found\n\nChecking bad_yaml.yml\n\nChecking empty.yml\n  SUCCESS: 0 rules found\n\n"
    );
    assert!(
        err.starts_with("  FAILED:\nbad_yaml.yml: yaml: line 6"),
        "{err}"
    );
    let (out, err, code) = run(&["node_exporter_recording.yml", "missing.yml"]);
    assert_eq!((out.as_str(), code), ("", 1));
    assert_eq!(
        err,
        "chingest: error: path 'missing.yml' does not exist, try --help\n"
    );
    let (_, _, code) = run(&["--lint-fatal", "lint_duplicate.yml"]);
    assert_eq!(code, 3);
    let (_, _, code) = run(&["--lint=none", "--lint-fatal", "lint_duplicate.yml"]);
    assert_eq!(code, 0);
}
