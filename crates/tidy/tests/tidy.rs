//! The invariants ARCHITECTURE.md marks as checked, read from the source.
//!
//! Imports are found by reading the text, not by compiling it: comments,
//! strings and `#[cfg(test)] mod … { … }` blocks are set aside, then every
//! path — in a `use` (a re-export too) or in an expression — that starts
//! with `crate::`, `super::`, `self::` or the name of a child module names
//! the module it reaches: the longest module prefix of the path, followed
//! through re-exports (`crate::Ingestor` reaches `ingestor`, which the root
//! re-exports it from). A re-export under another name (`as`) is not
//! followed: its path reaches the re-exporting module.

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
    ("crates/rules", "chingest-rules", 4),
    ("crates/server", "chingest-server", 5),
    ("crates/pushit", "pushit", 6),
    ("crates/tidy", "tidy", 6),
    ("benches", "chingest-benches", 7),
    ("examples", "chingest-examples", 7),
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
    ("lease", 5),
    ("catalog", 6),
    ("last_value", 7),
    ("write", 8),
    ("read", 8),
    ("downsample", 8),
    ("continuous", 8),
    ("edit", 9),
    ("backup", 9),
    ("ingestor", 10),
    ("fuzzing", 10),
    ("", 11),
];

/// Where chdb-rust may be called (paths from the workspace root): the
/// library's engine, a folder of files by job, and pushit's raw engine for
/// the baselines that measure the engine alone.
const CHDB_RUST_CALLERS: &[&str] = &["crates/chingest/src/engine/", "crates/pushit/src/engine.rs"];

/// Query-language, rules and codec crates: protocols in, plans or tables
/// out, no server.
const FRONT_END_FREE: &[&str] = &[
    "crates/codecs",
    "crates/influxql",
    "crates/promql",
    "crates/rules",
];

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

/// A source file longer than this (its tests apart) holds one job and
/// ARCHITECTURE.md says which: past it a file is split by job.
const LONG_FILE_LINES: usize = 700;

#[test]
fn long_source_files_are_one_job_and_say_which() {
    let architecture = fs::read_to_string(root().join("ARCHITECTURE.md")).unwrap();
    let heading = "### Files over 700 lines";
    let listed = architecture
        .split(heading)
        .nth(1)
        .unwrap_or_else(|| panic!("ARCHITECTURE.md has no {heading:?} section"));
    // Each entry a bullet opening with its path.
    let listed: Vec<&str> = listed
        .split("\n#")
        .next()
        .unwrap_or_default()
        .lines()
        .filter_map(|line| line.strip_prefix("- `")?.split('`').next())
        .collect();
    let (mut unexplained, mut long) = (Vec::new(), Vec::new());
    for (dir, _, _) in CRATE_RANKS {
        for file in rust_files(&root().join(dir).join("src")) {
            if file.file_name().is_some_and(|name| name == "tests.rs") {
                continue;
            }
            let text = fs::read_to_string(&file).unwrap();
            let lines = strip_test_modules(&text).lines().count();
            if lines > LONG_FILE_LINES {
                let path = relative(&file);
                if !listed.contains(&path.as_str()) {
                    unexplained.push(format!("{path} ({lines} lines)"));
                }
                long.push(path);
            }
        }
    }
    assert!(
        unexplained.is_empty(),
        "split these by job, or name each in ARCHITECTURE.md's {heading:?} with why it is one: \
         {unexplained:#?}"
    );
    let stale: Vec<&&str> = listed
        .iter()
        .filter(|path| !long.iter().any(|long| long == *path))
        .collect();
    assert!(
        stale.is_empty(),
        "ARCHITECTURE.md's {heading:?} names files no longer that long: {stale:#?}"
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
        for knot in knots(&graph) {
            cycles.push(format!("{dir}: {}", knot.join(" ↔ ")));
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

/// The module graph's own rules, on small sources: paths in code count,
/// comments, strings and tests do not; a re-export is followed to where
/// its name is defined.
#[test]
fn imports_are_read_from_paths_not_from_comments_strings_or_tests() {
    let graph = graph_of(&crate_of(&[
        ("", "mod a; mod c; mod d; pub use a::b::Thing;"),
        ("a", "mod b;"),
        (
            "a::b",
            r#"
            //! uses crate::c in a comment
            use crate::a::{b::Thing, Other};
            pub use crate::d::Exported;
            const TEXT: &str = "crate::c";
            fn f() { super::super::c::g(); }
            #[cfg(test)]
            mod tests { use crate::c; }
            "#,
        ),
        ("c", "fn f() -> crate::Thing { todo!() }"),
        ("d", ""),
    ]));
    let set = |modules: &[&str]| {
        modules
            .iter()
            .map(|m| m.to_string())
            .collect::<BTreeSet<_>>()
    };
    assert_eq!(graph["a::b"], set(&["a", "c", "d"]));
    assert_eq!(graph["c"], set(&["a::b"]), "through the root's re-export");
    assert_eq!(graph[""], set(&["a::b"]), "a re-export is an import");
}

/// A cycle of every form an import can take is found, and none where the
/// imports go one way.
#[test]
fn a_planted_cycle_of_each_form_is_found() {
    let child_back = ("p::k", "use super::Shared;");
    let cycles = [
        (
            "a parent's use of a child",
            [("p", "mod k; use k::X;"), child_back],
        ),
        (
            "a parent's re-export of a child",
            [("p", "mod k; pub use k::X;"), child_back],
        ),
        (
            "a path to a child in an expression",
            [("p", "mod k; fn f() { k::g() }"), child_back],
        ),
        (
            "a crate path",
            [("p", "fn f() { crate::p::k::g() }"), child_back],
        ),
    ];
    for (form, modules) in cycles {
        let mut sources = vec![("", "mod p;")];
        sources.extend(modules);
        assert!(!knots(&graph_of(&crate_of(&sources))).is_empty(), "{form}");
    }
    let through_re_export = crate_of(&[
        ("", "mod a; mod b; pub use a::A;"),
        ("a", "use crate::b::B;"),
        ("b", "fn f(_: crate::A) {}"),
    ]);
    assert!(!knots(&graph_of(&through_re_export)).is_empty());
    let one_way = crate_of(&[("", "mod p;"), ("p", "mod k; use k::X;"), ("p::k", "")]);
    assert!(knots(&graph_of(&one_way)).is_empty());
}

/// A crate of `modules` (name, source), as [`module_graph`] reads one.
fn crate_of(modules: &[(&str, &str)]) -> BTreeMap<String, String> {
    modules
        .iter()
        .map(|(module, source)| (module.to_string(), code_of(source)))
        .collect()
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
    let mut sources = BTreeMap::new();
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
        sources.insert(
            parts.join("::"),
            code_of(&fs::read_to_string(&file).unwrap()),
        );
    }
    graph_of(&sources)
}

/// The import graph of a crate's modules, given each one's code.
fn graph_of(sources: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeSet<String> = sources.keys().cloned().collect();
    let mut names = Names {
        modules,
        re_exports: BTreeMap::new(),
    };
    for (module, code) in sources {
        let exported = re_exports(code)
            .iter()
            .flat_map(|statement| paths_in(module, statement, &names.modules))
            .filter_map(|path| Some((path.last()?.clone(), path)))
            .collect();
        names.re_exports.insert(module.clone(), exported);
    }
    sources
        .iter()
        .map(|(module, code)| (module.clone(), imports_of(module, code, &names)))
        .collect()
}

/// What a crate's paths can reach: its modules, and the names each module
/// re-exports, with the paths (from the crate root) they stand for.
struct Names {
    modules: BTreeSet<String>,
    re_exports: BTreeMap<String, BTreeMap<String, Vec<String>>>,
}

impl Names {
    /// The module `path` (from the crate root) reaches: its longest module
    /// prefix, through the re-exports it goes by.
    fn module_of(&self, path: &[String]) -> String {
        let mut path = path.to_vec();
        // A few re-exports deep at most; more would be a loop of them.
        for _ in 0..8 {
            let borrowed: Vec<&str> = path.iter().map(String::as_str).collect();
            let module = longest_module(&borrowed, &self.modules);
            let depth = module.split("::").filter(|p| !p.is_empty()).count();
            let target = path
                .get(depth)
                .and_then(|name| self.re_exports.get(&module)?.get(name));
            match target {
                Some(target) if *target != path[..=depth] => {
                    path = target.iter().chain(&path[depth + 1..]).cloned().collect();
                }
                _ => return module,
            }
        }
        longest_module(
            &path.iter().map(String::as_str).collect::<Vec<_>>(),
            &self.modules,
        )
    }
}

/// The modules `code` (of `module`) imports, among `names`' modules.
fn imports_of(module: &str, code: &str, names: &Names) -> BTreeSet<String> {
    let mut imports: BTreeSet<String> = paths_in(module, code, &names.modules)
        .iter()
        .map(|path| names.module_of(path))
        .collect();
    imports.remove(module);
    imports
}

/// Every path in `code` (of `module`) that starts with `crate::`,
/// `super::`, `self::` or a child module's name, from the crate root.
fn paths_in(module: &str, code: &str, modules: &BTreeSet<String>) -> Vec<Vec<String>> {
    let here: Vec<&str> = module.split("::").filter(|p| !p.is_empty()).collect();
    let children: Vec<String> = modules
        .iter()
        .filter_map(|m| {
            let rest = match module {
                "" => m.as_str(),
                _ => m.strip_prefix(module)?.strip_prefix("::")?,
            };
            (!rest.is_empty() && !rest.contains("::")).then(|| format!("{rest}::"))
        })
        .collect();
    let starts = ["crate::", "super::", "self::"]
        .into_iter()
        .chain(children.iter().map(String::as_str));
    let mut paths = Vec::new();
    for start in starts {
        for (at, _) in code.match_indices(start) {
            let before = code[..at].chars().next_back();
            if matches!(before, Some(c) if c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let (base, at) = match start {
                "crate::" => (Vec::new(), at + start.len()),
                "self::" => (here.clone(), at + start.len()),
                "super::" => {
                    let mut base = here.clone();
                    let mut at = at;
                    while code[at..].starts_with("super::") {
                        base.pop();
                        at += "super::".len();
                    }
                    (base, at)
                }
                // A child's name: the path starts here.
                _ => (here.clone(), at),
            };
            for path in use_tree(&code[at..]) {
                let mut full: Vec<String> = base.iter().map(|p| p.to_string()).collect();
                full.extend(path);
                paths.push(full);
            }
        }
    }
    paths
}

/// The text of each `pub use …;` / `pub(…) use …;` statement of `code`,
/// from its `use`.
fn re_exports(code: &str) -> Vec<&str> {
    let mut found = Vec::new();
    for prefix in ["pub use ", "pub(crate) use ", "pub(super) use "] {
        for (at, _) in code.match_indices(prefix) {
            let statement = &code[at + prefix.len() - "use ".len()..];
            found.push(&statement[..statement.find(';').unwrap_or(statement.len())]);
        }
    }
    found
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

/// The knots of `graph`: each set of two or more modules that reach
/// one another through imports (its strongly connected components,
/// Tarjan's algorithm), as their shown names, sorted.
fn knots(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    #[derive(Default)]
    struct Walk<'g> {
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        stack: Vec<&'g str>,
        knots: Vec<Vec<String>>,
    }
    fn visit<'g>(
        node: &'g str,
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        walk: &mut Walk<'g>,
    ) {
        let index = walk.index.len();
        walk.index.insert(node, index);
        walk.low.insert(node, index);
        walk.stack.push(node);
        for next in graph.get(node).into_iter().flatten() {
            let next = next.as_str();
            if !walk.index.contains_key(next) {
                visit(next, graph, walk);
                let low = walk.low[node].min(walk.low[next]);
                walk.low.insert(node, low);
            } else if walk.stack.contains(&next) {
                let low = walk.low[node].min(walk.index[next]);
                walk.low.insert(node, low);
            }
        }
        if walk.low[node] == index {
            let from = walk.stack.iter().position(|n| *n == node).unwrap();
            let mut knot: Vec<String> = walk
                .stack
                .drain(from..)
                .map(|n| shown(n).to_owned())
                .collect();
            if knot.len() > 1 {
                knot.sort();
                walk.knots.push(knot);
            }
        }
    }
    let mut walk = Walk::default();
    for node in graph.keys() {
        if !walk.index.contains_key(node.as_str()) {
            visit(node, graph, &mut walk);
        }
    }
    walk.knots.sort();
    walk.knots
}
