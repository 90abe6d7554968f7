//! The invariants ARCHITECTURE.md marks as checked, read from the source.
//!
//! Imports are found by reading the text, not by compiling it: comments,
//! strings and `#[cfg(test)] mod … { … }` blocks are set aside, then every
//! `crate::…`, `super::…` and `self::…` path names the module it reaches
//! (the longest module prefix of the path). A re-export (`pub use`) is a
//! declaration, not an import: a parent that re-exports its children does
//! not depend on them.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// The workspace root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The workspace's packages, bottom to top: a package may depend only on
/// packages of a lower rank.
const CRATE_RANKS: &[(&str, &str, u32)] = &[
    ("crates/lineproto", "lineproto", 0),
    ("crates/proto", "chingest-proto", 0),
    ("crates/tsbs", "tsbs", 0),
    ("crates/forgetfs", "forgetfs", 0),
    ("crates/codecs", "chingest-codecs", 1),
    ("crates/chingest", "chingest", 2),
    ("crates/influxql", "chingest-influxql", 3),
    ("crates/promql", "chingest-promql", 3),
    ("crates/server", "chingest-server", 4),
    ("crates/pushit", "pushit", 5),
    ("crates/tidy", "tidy", 5),
    ("benches", "chingest-benches", 6),
    ("examples", "chingest-examples", 6),
];

/// The library's layers, bottom to top: a module may import only modules
/// of a lower layer (and, inside its own top-level module, any module that
/// does not import it back).
const LIBRARY_LAYERS: &[(&str, u32)] = &[
    ("config", 0),
    ("clock", 0),
    ("stats", 0),
    ("durable", 0),
    ("parallel", 0),
    ("layout", 1),
    ("wal", 2),
    ("error", 3),
    ("cluster", 4),
    ("engine", 5),
    ("catalog", 6),
    ("last_value", 7),
    ("write", 8),
    ("read", 8),
    ("downsample", 8),
    ("edit", 9),
    ("backup", 9),
    ("ingestor", 10),
    ("", 11),
];

/// Where chdb-rust may be called (paths from the workspace root): the
/// library's engine, a folder of files by job, and pushit's raw engine for
/// the baselines that measure the engine alone.
const CHDB_RUST_CALLERS: &[&str] = &["crates/chingest/src/engine/", "crates/pushit/src/engine.rs"];

/// Query-language and codec crates: protocols in, plans or tables out,
/// no server.
const FRONT_END_FREE: &[&str] = &["crates/codecs", "crates/influxql", "crates/promql"];

/// What a query-language or codec crate must not name.
const SERVER_NAMES: &[&str] = &["chingest_server", "axum", "tonic", "hyper", "tower"];

#[test]
fn every_source_file_says_what_it_is_for() {
    let mut missing = Vec::new();
    for (dir, _, _) in CRATE_RANKS {
        for file in rust_files(&root().join(dir)) {
            let text = fs::read_to_string(&file).unwrap();
            if !text.starts_with("//!") {
                missing.push(relative(&file));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "these files do not open with a `//!` comment saying what they own and why: {missing:#?}"
    );
}

#[test]
fn only_engine_modules_call_chdb_rust() {
    let mut found = Vec::new();
    for (dir, _, _) in CRATE_RANKS {
        for file in rust_files(&root().join(dir)) {
            let code = code_of(&fs::read_to_string(&file).unwrap());
            let path = relative(&file);
            if names_crate(&code, "chdb_rust") && !may_call_chdb_rust(&path) {
                found.push(path);
            }
        }
    }
    assert!(
        found.is_empty(),
        "chdb-rust is called only from the library's `engine/` folder (and pushit's raw engine, \
         `engine.rs`); also from: {found:#?}"
    );
}

/// The rule's places, on paths: a file named like the engine's elsewhere
/// is not one of them.
#[test]
fn chdb_rust_callers_are_known_by_place_not_by_file_name() {
    for path in [
        "crates/chingest/src/engine/mod.rs",
        "crates/chingest/src/engine/pool.rs",
        "crates/pushit/src/engine.rs",
    ] {
        assert!(may_call_chdb_rust(path), "{path}");
    }
    for path in [
        "crates/chingest/src/engine.rs",
        "crates/chingest/src/read/engine.rs",
        "crates/chingest/tests/engine/pool.rs",
        "crates/pushit/src/modes/engine.rs",
        "crates/server/src/engine/mod.rs",
    ] {
        assert!(!may_call_chdb_rust(path), "{path}");
    }
}

#[test]
fn crates_depend_only_on_crates_below_them() {
    let rank_of: BTreeMap<&str, u32> = CRATE_RANKS.iter().map(|(_, n, r)| (*n, *r)).collect();
    let mut wrong = Vec::new();
    for (dir, name, rank) in CRATE_RANKS {
        let Ok(manifest) = fs::read_to_string(root().join(dir).join("Cargo.toml")) else {
            continue; // a crate still to come
        };
        for dependency in dependencies(&manifest) {
            match rank_of.get(dependency.as_str()) {
                Some(theirs) if theirs >= rank => wrong.push(format!("{name} → {dependency}")),
                _ => {}
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "dependencies that point up or sideways: {wrong:#?}"
    );
}

#[test]
fn query_language_and_codec_crates_know_no_server() {
    let mut found = Vec::new();
    for dir in FRONT_END_FREE {
        let dir = root().join(dir);
        if !dir.exists() {
            continue;
        }
        let manifest = fs::read_to_string(dir.join("Cargo.toml")).unwrap();
        for dependency in dependencies(&manifest) {
            if SERVER_NAMES.contains(&dependency.replace('-', "_").as_str()) {
                found.push(format!("{}: depends on {dependency}", relative(&dir)));
            }
        }
        for file in rust_files(&dir) {
            let code = code_of(&fs::read_to_string(&file).unwrap());
            for name in SERVER_NAMES {
                if names_crate(&code, name) {
                    found.push(format!("{}: names {name}", relative(&file)));
                }
            }
        }
    }
    assert!(
        found.is_empty(),
        "server types in a query-language or codec crate: {found:#?}"
    );
}

#[test]
fn no_two_modules_of_a_crate_import_each_other() {
    let mut cycles = Vec::new();
    for (dir, _, _) in CRATE_RANKS {
        let src = root().join(dir).join("src");
        if !src.exists() {
            continue;
        }
        let graph = module_graph(&src);
        if let Some(cycle) = find_cycle(&graph) {
            cycles.push(format!("{dir}: {}", cycle.join(" → ")));
        }
    }
    assert!(
        cycles.is_empty(),
        "modules that import each other: {cycles:#?}"
    );
}

#[test]
fn library_modules_import_only_layers_below_them() {
    let graph = module_graph(&root().join("crates/chingest/src"));
    let layer = |module: &str| {
        let top = module.split("::").next().unwrap_or("");
        LIBRARY_LAYERS
            .iter()
            .find(|(name, _)| *name == top)
            .map(|(_, rank)| *rank)
            .unwrap_or_else(|| panic!("module {top:?} has no layer: add it to LIBRARY_LAYERS"))
    };
    let mut upward = Vec::new();
    for (module, imports) in &graph {
        for imported in imports {
            let (mine, theirs) = (top_of(module), top_of(imported));
            if mine != theirs && layer(imported) >= layer(module) {
                upward.push(format!("{} → {}", shown(module), shown(imported)));
            }
        }
    }
    assert!(
        upward.is_empty(),
        "imports of a layer not below: {upward:#?}"
    );
}

/// The module graph's own rules, on small sources.
#[test]
fn imports_are_read_from_paths_not_from_comments_strings_or_re_exports() {
    let modules: BTreeSet<String> = ["", "a", "a::b", "c", "d"].map(String::from).into();
    let source = r#"
        //! uses crate::c in a comment
        use crate::a::{b::Thing, Other};
        pub use crate::d::Exported;
        const TEXT: &str = "crate::c";
        fn f() { super::super::c::g(); }
        #[cfg(test)]
        mod tests { use crate::c; }
    "#;
    let imports = imports_of("a::b", &code_of(source), &modules);
    assert_eq!(imports, ["a", "c"].map(String::from).into());
}

// ---------------------------------------------------------------------------

/// Whether the file at `path` (from the workspace root) is one of
/// [`CHDB_RUST_CALLERS`]: inside the folder, or the very file.
fn may_call_chdb_rust(path: &str) -> bool {
    CHDB_RUST_CALLERS
        .iter()
        .any(|place| match place.ends_with('/') {
            true => path.starts_with(place),
            false => path == *place,
        })
}

fn relative(path: &Path) -> String {
    path.strip_prefix(root())
        .unwrap_or(path)
        .display()
        .to_string()
}

fn top_of(module: &str) -> &str {
    module.split("::").next().unwrap_or("")
}

fn shown(module: &str) -> &str {
    if module.is_empty() {
        "lib"
    } else {
        module
    }
}

/// Every `.rs` file under `dir`, outside `target/`.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![dir.to_owned()];
    while let Some(dir) = pending.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries {
            let path = entry.unwrap().path();
            let name = path.file_name().unwrap().to_string_lossy().into_owned();
            if path.is_dir() {
                if name != "target" && !name.starts_with('.') && name != "node_modules" {
                    pending.push(path);
                }
            } else if name.ends_with(".rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}

/// The package names in a manifest's `[dependencies]` (not dev- or build-).
fn dependencies(manifest: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut in_dependencies = false;
    for line in manifest.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_dependencies = line == "[dependencies]";
            continue;
        }
        if !in_dependencies || line.starts_with('#') || line.is_empty() {
            continue;
        }
        if let Some((key, _)) = line.split_once('=') {
            let key = key.trim();
            let name = key
                .strip_suffix(".workspace")
                .unwrap_or(key)
                .trim_matches('"');
            names.push(name.to_owned());
        }
    }
    names
}

/// Whether `code` names the crate `name` (at the start of a path, not as a
/// module of another crate: `opentelemetry_proto::tonic` is not tonic).
fn names_crate(code: &str, name: &str) -> bool {
    code.match_indices(name).any(|(at, _)| {
        let before = code[..at].chars().next_back();
        let after = code[at + name.len()..].chars().next();
        let starts = !matches!(before, Some(c) if c.is_alphanumeric() || c == '_' || c == ':');
        starts && after == Some(':')
    })
}

/// The source without comments, string and character literals, and
/// `#[cfg(test)] mod … { … }` blocks.
fn code_of(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::with_capacity(source.len());
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '/' if chars.get(i + 1).copied() == Some('/') => {
                while i < chars.len() && chars[i] != '\n' {
                    i += 1;
                }
            }
            '/' if chars.get(i + 1).copied() == Some('*') => {
                let mut depth = 0;
                while i < chars.len() {
                    if chars[i] == '/' && chars.get(i + 1).copied() == Some('*') {
                        depth += 1;
                        i += 2;
                    } else if chars[i] == '*' && chars.get(i + 1).copied() == Some('/') {
                        depth -= 1;
                        i += 2;
                        if depth == 0 {
                            break;
                        }
                    } else {
                        i += 1;
                    }
                }
            }
            'r' if matches!(chars.get(i + 1).copied(), Some('"' | '#'))
                && !chars[..i]
                    .last()
                    .is_some_and(|c| c.is_alphanumeric() || *c == '_') =>
            {
                let mut hashes = 0;
                let mut j = i + 1;
                while chars.get(j) == Some(&'#') {
                    hashes += 1;
                    j += 1;
                }
                if chars.get(j) != Some(&'"') {
                    out.push('r');
                    i += 1;
                    continue;
                }
                j += 1;
                loop {
                    match chars.get(j) {
                        None => break,
                        Some('"') if (1..=hashes).all(|k| chars.get(j + k) == Some(&'#')) => {
                            j += 1 + hashes;
                            break;
                        }
                        _ => j += 1,
                    }
                }
                out.push_str("\"\"");
                i = j;
            }
            '"' => {
                i += 1;
                while i < chars.len() && chars[i] != '"' {
                    i += if chars[i] == '\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            '\'' if chars.get(i + 2).copied() == Some('\'')
                || (chars.get(i + 1).copied() == Some('\\')
                    && chars.get(i + 3).copied() == Some('\'')) =>
            {
                i += if chars.get(i + 1).copied() == Some('\\') {
                    4
                } else {
                    3
                };
                out.push_str("' '");
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    strip_test_modules(&out)
}

/// `code` without `#[cfg(test)] mod name { … }` blocks.
fn strip_test_modules(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    while let Some(at) = rest.find("#[cfg(test)]") {
        out.push_str(&rest[..at]);
        let after = rest[at + "#[cfg(test)]".len()..].trim_start();
        let is_module = after.starts_with("mod ") || after.starts_with("pub(crate) mod ");
        match (is_module, after.find('{'), after.find(';')) {
            (true, Some(open), semicolon) if semicolon.is_none_or(|s| s > open) => {
                let mut depth = 0;
                let mut end = after.len();
                for (k, c) in after.char_indices().skip(open) {
                    match c {
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                end = k + 1;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                rest = &after[end..];
            }
            (true, _, Some(semicolon)) => rest = &after[semicolon + 1..],
            _ => {
                out.push_str("#[cfg(test)]");
                rest = after;
            }
        }
    }
    out.push_str(rest);
    out
}

/// Each module of the crate whose root is in `src` (`lib.rs`, else
/// `main.rs`), with the modules it imports.
fn module_graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let has_lib = src.join("lib.rs").exists();
    let mut files = BTreeMap::new();
    for file in rust_files(src) {
        let relative = file.strip_prefix(src).unwrap().with_extension("");
        let mut parts: Vec<String> = relative
            .components()
            .map(|c| c.as_os_str().to_string_lossy().into_owned())
            .collect();
        let last = parts.last().cloned().unwrap_or_default();
        if parts.len() == 1 && last == "main" && has_lib {
            continue; // the binary: a crate of its own over the library
        }
        if last == "mod" || (parts.len() == 1 && (last == "lib" || last == "main")) {
            parts.pop();
        }
        files.insert(parts.join("::"), file);
    }
    let modules: BTreeSet<String> = files.keys().cloned().collect();
    files
        .iter()
        .map(|(module, file)| {
            let code = code_of(&fs::read_to_string(file).unwrap());
            (module.clone(), imports_of(module, &code, &modules))
        })
        .collect()
}

/// The modules `code` (of `module`) imports, among `modules`.
fn imports_of(module: &str, code: &str, modules: &BTreeSet<String>) -> BTreeSet<String> {
    let code = without_re_exports(code);
    let mut imports = BTreeSet::new();
    let here: Vec<&str> = module.split("::").filter(|p| !p.is_empty()).collect();
    for start in ["crate::", "super::", "self::"] {
        for (at, _) in code.match_indices(start) {
            let before = code[..at].chars().next_back();
            if matches!(before, Some(c) if c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let (base, at) = match start {
                "crate::" => (Vec::new(), at + start.len()),
                "self::" => (here.clone(), at + start.len()),
                _ => {
                    let mut base = here.clone();
                    let mut at = at;
                    while code[at..].starts_with("super::") {
                        base.pop();
                        at += "super::".len();
                    }
                    (base, at)
                }
            };
            for path in use_tree(&code[at..]) {
                let mut full: Vec<&str> = base.clone();
                full.extend(path.iter().map(String::as_str));
                imports.insert(longest_module(&full, modules));
            }
        }
    }
    imports.remove(module);
    imports
}

/// `code` without `pub use …;` / `pub(…) use …;` statements.
fn without_re_exports(code: &str) -> String {
    let mut out = String::with_capacity(code.len());
    let mut rest = code;
    loop {
        let found = ["pub use ", "pub(crate) use ", "pub(super) use "]
            .iter()
            .filter_map(|p| rest.find(p))
            .min();
        let Some(at) = found else {
            break;
        };
        out.push_str(&rest[..at]);
        rest = match rest[at..].find(';') {
            Some(end) => &rest[at + end + 1..],
            None => "",
        };
    }
    out.push_str(rest);
    out
}

/// The paths a use tree (or an expression path) starting at `text` names:
/// `a::b::C` → `[a, b, C]`; `a::{b, c::{d, e}}` → `[a, b]`, `[a, c, d]`,
/// `[a, c, e]`.
fn use_tree(text: &str) -> Vec<Vec<String>> {
    fn parse(chars: &[char], i: &mut usize, prefix: &[String], out: &mut Vec<Vec<String>>) {
        let mut path = prefix.to_vec();
        loop {
            while *i < chars.len() && chars[*i].is_whitespace() {
                *i += 1;
            }
            if chars.get(*i) == Some(&'{') {
                *i += 1;
                loop {
                    parse(chars, i, &path, out);
                    while *i < chars.len() && chars[*i].is_whitespace() {
                        *i += 1;
                    }
                    match chars.get(*i) {
                        Some(',') => *i += 1,
                        Some('}') => {
                            *i += 1;
                            return;
                        }
                        _ => return,
                    }
                    while *i < chars.len() && chars[*i].is_whitespace() {
                        *i += 1;
                    }
                    if chars.get(*i) == Some(&'}') {
                        *i += 1;
                        return;
                    }
                }
            }
            let start = *i;
            while *i < chars.len() && (chars[*i].is_alphanumeric() || chars[*i] == '_') {
                *i += 1;
            }
            if *i == start {
                break;
            }
            path.push(chars[start..*i].iter().collect());
            if chars.get(*i) == Some(&':') && chars.get(*i + 1) == Some(&':') {
                *i += 2;
            } else {
                break;
            }
        }
        if path.len() > prefix.len() || !path.is_empty() {
            out.push(path);
        }
    }
    let chars: Vec<char> = text.chars().take(2000).collect();
    let mut out = Vec::new();
    parse(&chars, &mut 0, &[], &mut out);
    out
}

/// The longest prefix of `path` that is a module (the crate root if none).
fn longest_module(path: &[&str], modules: &BTreeSet<String>) -> String {
    (0..=path.len())
        .rev()
        .map(|n| path[..n].join("::"))
        .find(|candidate| modules.contains(candidate))
        .unwrap_or_default()
}

/// A cycle in `graph`, as the modules along it, if there is one.
fn find_cycle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, bool>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_owned(), false);
        stack.push(node.to_owned());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next) {
                Some(false) => {
                    let from = stack.iter().position(|n| n == next).unwrap();
                    let mut cycle: Vec<String> =
                        stack[from..].iter().map(|n| shown(n).to_owned()).collect();
                    cycle.push(shown(next).to_owned());
                    return Some(cycle);
                }
                Some(true) => {}
                None => {
                    if let Some(cycle) = visit(next, graph, state, stack) {
                        return Some(cycle);
                    }
                }
            }
        }
        stack.pop();
        state.insert(node.to_owned(), true);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if !state.contains_key(node) {
            if let Some(cycle) = visit(node, graph, &mut state, &mut Vec::new()) {
                return Some(cycle);
            }
        }
    }
    None
}
