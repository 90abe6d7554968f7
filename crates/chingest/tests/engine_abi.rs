//! The engine's C API as declared by `engine/include/chdb.h` must be what the
//! fetched `libchdb.so` exports, and the linked library must be the pinned
//! release. A version bump that breaks the ABI fails here, by name.

use std::path::PathBuf;
use std::process::Command;

fn engine_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../engine")
}

/// Function names declared in the header: an identifier directly followed by
/// `(` that starts with `chdb_`, outside comments.
fn declared_functions() -> Vec<String> {
    let header = std::fs::read_to_string(engine_dir().join("include/chdb.h")).unwrap();
    let mut code = String::new();
    let mut rest = header.as_str();
    while let Some(start) = rest.find("/*") {
        code.push_str(&rest[..start]);
        let end = rest[start..].find("*/").expect("unterminated comment") + start + 2;
        rest = &rest[end..];
    }
    code.push_str(rest);

    // The identifier right before each `(`.
    let mut names: Vec<String> = code
        .match_indices('(')
        .filter_map(|(at, _)| {
            let before = code[..at].trim_end();
            let start = before
                .rfind(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                .map_or(0, |i| i + 1);
            let name = &before[start..];
            name.starts_with("chdb_").then(|| name.to_owned())
        })
        .collect();
    names.sort();
    names.dedup();
    names
}

fn exported_functions() -> Vec<String> {
    let lib = engine_dir().join("lib/libchdb.so");
    let out = Command::new("nm")
        .args(["-D", "--defined-only"])
        .arg(&lib)
        .output()
        .expect("run nm");
    assert!(out.status.success(), "nm failed on {}", lib.display());
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .filter_map(|line| {
            let mut parts = line.split_whitespace();
            let (_addr, kind, name) = (parts.next()?, parts.next()?, parts.next()?);
            (kind == "T").then(|| name.to_owned())
        })
        .collect()
}

#[test]
fn every_declared_function_is_exported() {
    let declared = declared_functions();
    assert!(
        declared.len() > 40,
        "header parse found too few functions: {declared:?}"
    );
    let exported = exported_functions();
    let missing: Vec<_> = declared
        .iter()
        .filter(|name| !exported.contains(name))
        .collect();
    assert!(
        missing.is_empty(),
        "engine/include/chdb.h declares functions libchdb.so does not export: {missing:?}"
    );
}

#[test]
fn linked_engine_is_the_pinned_release() {
    let version = chingest::engine_version();
    assert_eq!(version, "26.7.3", "unexpected engine release {version}");
}
