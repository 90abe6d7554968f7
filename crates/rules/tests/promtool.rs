//! `chingest_rules::check` against promtool 2.42 on the rule files in
//! `tests/data/`: each file's `.stdout`, `.stderr` and `.code` are what
//! `promtool check rules FILE` printed and returned, run in that folder
//! (made again in that folder with
//! `for f in *.yml; do promtool check rules $f > ${f%.yml}.stdout 2> ${f%.yml}.stderr; echo $? > ${f%.yml}.code; done`).
//! Where promtool is installed (Debian's `prometheus` package), the test
//! also runs it, so the recorded answers stay promtool's.
//!
//! One deliberate difference: the reason after `could not parse
//! expression:` is chingest's PromQL parser's own wording (file, line,
//! column and rule are promtool's).

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

use chingest_rules::check::{check_files, Options};

fn data() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data")
}

fn files() -> Vec<String> {
    let mut names: Vec<String> = fs::read_dir(data())
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .filter(|n| n.ends_with(".yml"))
        .collect();
    names.sort();
    names
}

/// What promtool answered for `name`: stdout, stderr, exit code.
fn recorded(name: &str) -> (String, String, i32) {
    let stem = name.trim_end_matches(".yml");
    let read = |ext: &str| fs::read_to_string(data().join(format!("{stem}.{ext}"))).unwrap();
    (
        read("stdout"),
        read("stderr"),
        read("code").trim().parse().unwrap(),
    )
}

/// Our answer for `name`, with paths shown as promtool was given them.
fn ours(name: &str) -> (String, String, i32) {
    let (mut out, mut err) = (Vec::new(), Vec::new());
    let path = data().join(name);
    let code = check_files(&[&path], Options::default(), &mut out, &mut err).unwrap();
    let shown = |bytes: Vec<u8>| {
        String::from_utf8(bytes)
            .unwrap()
            .replace(&format!("{}/", data().display()), "")
    };
    (shown(out), shown(err), code)
}

/// A line of standard error as compared: an expression's parse error up
/// to its reason.
fn comparable(line: &str) -> &str {
    const MARK: &str = "could not parse expression: ";
    match line.find(MARK) {
        Some(at) => &line[..at + MARK.len()],
        None => line,
    }
}

#[test]
fn every_file_checks_as_promtool_checks_it() {
    let mut differences = Vec::new();
    for name in files() {
        let (want_out, want_err, want_code) = recorded(&name);
        let (out, err, code) = ours(&name);
        if out != want_out || code != want_code {
            differences.push(format!(
                "{name}: stdout {out:?} exit {code}, promtool: {want_out:?} exit {want_code}"
            ));
        }
        let lines: Vec<&str> = err.lines().map(comparable).collect();
        let want: Vec<&str> = want_err.lines().map(comparable).collect();
        if lines != want {
            differences.push(format!("{name}: stderr\n{err}promtool's:\n{want_err}"));
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("\n\n"));
}

#[test]
fn the_recorded_answers_are_promtool_s() {
    let promtool = Path::new("/usr/bin/promtool");
    if !promtool.exists() {
        eprintln!("promtool is not installed: the recorded answers are not checked again");
        return;
    }
    for name in files() {
        let output = Command::new(promtool)
            .args(["check", "rules", &name])
            .current_dir(data())
            .output()
            .unwrap();
        let (out, err, code) = recorded(&name);
        assert_eq!(String::from_utf8_lossy(&output.stdout), out, "{name}");
        assert_eq!(String::from_utf8_lossy(&output.stderr), err, "{name}");
        assert_eq!(output.status.code(), Some(code), "{name}");
    }
}

#[test]
fn lint_is_fatal_only_when_asked_and_off_with_none() {
    let path = data().join("lint_duplicate.yml");
    let run = |options: Options| {
        let (mut out, mut err) = (Vec::new(), Vec::new());
        let code = check_files(&[&path], options, &mut out, &mut err).unwrap();
        (code, String::from_utf8(out).unwrap())
    };
    let fatal = Options {
        duplicate_rules: true,
        lint_fatal: true,
    };
    assert_eq!(run(fatal).0, 3);
    let none = Options {
        duplicate_rules: false,
        lint_fatal: true,
    };
    let (code, out) = run(none);
    assert_eq!(code, 0);
    assert!(out.contains("SUCCESS: 4 rules found"), "{out}");
}
