//! `promtool check rules`, as Prometheus 2.42's promtool prints it: per
//! file `Checking FILE` and `  SUCCESS: N rules found` on standard output,
//! or `  FAILED:` and each problem as `FILE: reason` on standard error,
//! then an empty line; the duplicate-rules lint (on by default) reported
//! the same way without the file's name. Exit codes as promtool's: 1 when
//! a file has errors, 3 when only lint found something and lint is fatal,
//! else 0.

use std::io::{self, Write};
use std::path::Path;

use crate::file::{self, RuleFile};

/// The exit code of a failed check.
pub const FAILURE: i32 = 1;
/// The exit code when lint found something and `--lint-fatal` was given.
pub const LINT_FAILURE: i32 = 3;

/// The largest rule file read, in bytes: a rule file is text a person
/// writes; past this it is refused rather than held in memory.
pub const MAX_FILE_BYTES: u64 = 64 << 20;

/// Which checks run beside the file's own validity.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// promtool's `--lint=duplicate-rules` (its default).
    pub duplicate_rules: bool,
    /// promtool's `--lint-fatal`.
    pub lint_fatal: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            duplicate_rules: true,
            lint_fatal: false,
        }
    }
}

/// What checking one file found.
#[derive(Debug, Clone, PartialEq)]
pub enum Outcome {
    /// Valid: its rules.
    Valid(RuleFile),
    /// Valid, but lint found something: the message.
    Lint(String),
    /// Invalid: every problem, each line as promtool prints it.
    Invalid(Vec<String>),
}

/// Reads and checks one file.
pub fn check_file(path: &Path, options: Options) -> Outcome {
    let name = path.display().to_string();
    let text = match read(path) {
        Ok(text) => text,
        Err(err) => return Outcome::Invalid(vec![format!("{name}: {err}")]),
    };
    match file::parse(&text) {
        Err(problems) => Outcome::Invalid(
            problems
                .into_iter()
                .map(|p| format!("{name}: {}", p.message))
                .collect(),
        ),
        Ok(rules) => match options
            .duplicate_rules
            .then(|| duplicates(&rules))
            .flatten()
        {
            Some(lint) => Outcome::Lint(lint),
            None => Outcome::Valid(rules),
        },
    }
}

/// A rule file's text, as Go reads it: bytes that are not UTF-8 are
/// yaml.v3's error.
pub fn read(path: &Path) -> io::Result<String> {
    let name = path.display();
    let metadata = std::fs::metadata(path)
        .map_err(|err| io::Error::new(err.kind(), format!("open {name}: {}", os_reason(&err))))?;
    if metadata.len() > MAX_FILE_BYTES {
        return Err(io::Error::other(format!(
            "the file is {} bytes long, more than the {MAX_FILE_BYTES} read",
            metadata.len()
        )));
    }
    let bytes = std::fs::read(path)
        .map_err(|err| io::Error::new(err.kind(), format!("read {name}: {}", os_reason(&err))))?;
    String::from_utf8(bytes)
        .map_err(|_| io::Error::other("yaml: invalid leading UTF-8 octet".to_owned()))
}

/// The operating system's reason without Rust's " (os error N)".
fn os_reason(err: &io::Error) -> String {
    let text = err.to_string();
    let text = match text.find(" (os error") {
        Some(at) => text[..at].to_owned(),
        None => text,
    };
    // Go writes the C library's message in lower case.
    let mut chars = text.chars();
    match chars.next() {
        Some(first) => first.to_lowercase().chain(chars).collect(),
        None => text,
    }
}

/// promtool's duplicate-rules lint: rules with the same name and labels
/// (their labels' text, templates unexpanded), each reported once.
fn duplicates(file: &RuleFile) -> Option<String> {
    let mut rules: Vec<(&str, Vec<(&str, &str)>)> = file
        .groups
        .iter()
        .flat_map(|g| &g.rules)
        .map(|rule| {
            let mut labels: Vec<(&str, &str)> = rule
                .labels
                .iter()
                .map(|(k, v)| (k.as_str(), v.as_str()))
                .collect();
            labels.sort();
            (rule.name.as_str(), labels)
        })
        .collect();
    rules.sort();
    let mut found: Vec<&(&str, Vec<(&str, &str)>)> = Vec::new();
    for pair in rules.windows(2) {
        if pair[0] == pair[1] && found.last().is_none_or(|last| **last != pair[1]) {
            found.push(&pair[1]);
        }
    }
    if found.is_empty() {
        return None;
    }
    let mut message = format!("lint error {} duplicate rule(s) found.\n", found.len());
    for (metric, labels) in found {
        message.push_str(&format!("Metric: {metric}\nLabel(s):\n"));
        for (k, v) in labels {
            message.push_str(&format!("\t{k}: {v}\n"));
        }
    }
    message.push_str("Might cause inconsistency while recording expressions");
    Some(message)
}

/// Checks every file in order, printing as promtool prints; the exit code.
pub fn check_files(
    paths: &[impl AsRef<Path>],
    options: Options,
    out: &mut dyn Write,
    err: &mut dyn Write,
) -> io::Result<i32> {
    let (mut failed, mut errors) = (false, false);
    for path in paths {
        let path = path.as_ref();
        writeln!(out, "Checking {}", path.display())?;
        match check_file(path, options) {
            Outcome::Valid(rules) => {
                let count: usize = rules.groups.iter().map(|g| g.rules.len()).sum();
                writeln!(out, "  SUCCESS: {count} rules found")?;
            }
            Outcome::Lint(message) => {
                out.flush()?;
                writeln!(err, "  FAILED:\n{message}")?;
                failed = true;
            }
            Outcome::Invalid(problems) => {
                out.flush()?;
                writeln!(err, "  FAILED:")?;
                for problem in problems {
                    writeln!(err, "{problem}")?;
                }
                err.flush()?;
                failed = true;
                errors = true;
            }
        }
        writeln!(out)?;
    }
    Ok(if failed && errors {
        FAILURE
    } else if failed && options.lint_fatal {
        LINT_FAILURE
    } else {
        0
    })
}

/// A path as promtool's argument check refuses it before checking
/// anything: missing, or a directory (`None`: it may be checked).
pub fn refuse_argument(path: &Path) -> Option<String> {
    match std::fs::metadata(path) {
        Err(_) => Some(format!("path '{}' does not exist", path.display())),
        Ok(m) if m.is_dir() => Some(format!("'{}' is a directory", path.display())),
        Ok(_) => None,
    }
}
