//! The rule files a server evaluates: its patterns expanded (globs,
//! relative to the configuration's directory), each file read and checked
//! as `chingest rules check` checks it. One invalid file refuses the whole
//! set, with every problem found (file, line, reason): a reload that fails
//! leaves the rules that ran running, as Prometheus's does.

use std::path::{Path, PathBuf};

use crate::check::{self, Outcome};
use crate::file::Group;

/// One rule file as loaded: where it is and its groups.
#[derive(Debug, Clone, PartialEq)]
pub struct LoadedFile {
    /// The path, as the pattern that found it gives it (the APIs' `file`).
    pub path: String,
    /// Its groups, in the file's order.
    pub groups: Vec<Group>,
}

/// Why a set of rule files was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LoadError {
    /// A pattern that is not a glob.
    #[error("rule files: pattern {pattern:?}: {reason}")]
    Pattern {
        /// The pattern as configured.
        pattern: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Files that do not parse or check: each problem, `FILE: LINE:COL: …`.
    #[error("rule files refused:\n{}", .0.join("\n"))]
    Invalid(Vec<String>),
}

/// The files `patterns` name (a relative one from `base`), each once, in
/// the patterns' order and each pattern's matches sorted; a pattern
/// matching nothing names nothing (as in Prometheus).
pub fn expand(patterns: &[String], base: &Path) -> Result<Vec<PathBuf>, LoadError> {
    let mut paths: Vec<PathBuf> = Vec::new();
    for pattern in patterns {
        let full = match Path::new(pattern).is_absolute() {
            true => PathBuf::from(pattern),
            false => base.join(pattern),
        };
        let refused = |reason: String| LoadError::Pattern {
            pattern: pattern.clone(),
            reason,
        };
        let text = full.to_str().ok_or_else(|| refused("not UTF-8".into()))?;
        let matches = glob::glob(text).map_err(|err| refused(err.to_string()))?;
        let mut found: Vec<PathBuf> = matches
            .filter_map(Result::ok)
            .filter(|path| path.is_file())
            .collect();
        found.sort();
        for path in found {
            if !paths.contains(&path) {
                paths.push(path);
            }
        }
    }
    Ok(paths)
}

/// Every file `patterns` name, read and checked; refused whole when one
/// is invalid.
pub fn load(patterns: &[String], base: &Path) -> Result<Vec<LoadedFile>, LoadError> {
    let mut loaded = Vec::new();
    let mut problems = Vec::new();
    for path in expand(patterns, base)? {
        // Not linted: rules with the same name and labels run, as in
        // Prometheus (`rules check` reports them).
        let options = check::Options {
            duplicate_rules: false,
            lint_fatal: false,
        };
        match check::check_file(&path, options) {
            Outcome::Valid(file) => loaded.push(LoadedFile {
                path: path.display().to_string(),
                groups: file.groups,
            }),
            Outcome::Invalid(found) => problems.extend(found),
            Outcome::Lint(_) => unreachable!("linting is off"),
        }
    }
    match problems.is_empty() {
        true => Ok(loaded),
        false => Err(LoadError::Invalid(problems)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const GOOD: &str = "groups:\n- name: g\n  rules:\n  - record: a:b\n    expr: up\n";

    #[test]
    fn patterns_are_globs_from_the_base_and_each_file_counts_once() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("rules")).unwrap();
        for name in ["b.yml", "a.yml", "c.txt"] {
            std::fs::write(dir.path().join("rules").join(name), GOOD).unwrap();
        }
        let patterns = vec![
            "rules/*.yml".to_owned(),
            "rules/a.yml".to_owned(),
            "none/*".to_owned(),
        ];
        let loaded = load(&patterns, dir.path()).unwrap();
        let names: Vec<&str> = loaded
            .iter()
            .map(|f| f.path.rsplit('/').next().unwrap())
            .collect();
        assert_eq!(names, ["a.yml", "b.yml"]);
        assert_eq!(loaded[0].groups[0].rules[0].name, "a:b");
    }

    #[test]
    fn one_invalid_file_refuses_the_set_with_its_line() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("good.yml"), GOOD).unwrap();
        std::fs::write(
            dir.path().join("bad.yml"),
            "groups:\n- name: g\n  rules:\n  - record: a:b\n    expr: sum(\n",
        )
        .unwrap();
        let err = load(&["*.yml".to_owned()], dir.path()).unwrap_err();
        let text = err.to_string();
        assert!(text.contains("bad.yml: 5:11:"), "{text}");
        assert!(!text.contains("good.yml"), "{text}");
        let bad = load(&["[".to_owned()], dir.path()).unwrap_err();
        assert!(matches!(bad, LoadError::Pattern { .. }), "{bad}");
    }
}
