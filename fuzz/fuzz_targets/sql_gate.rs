//! The `/sql` gate, as the server runs a statement from a caller whose
//! token reads one database: the sandbox's checks (the engine's own parse),
//! then the engine on a read-only connection under the query limits. The
//! property is the sandbox's promise: whatever a statement answers holds
//! nothing from outside that database: not another database's rows, not a
//! file beside the data, not the data directory's path.
//!
//! A second property holds on what the gate admits: the engine's analyzer
//! (`EXPLAIN QUERY TREE`, which resolves aliases, CTEs and views to what
//! runs) finds in it no table outside that database and the catalogue's
//! `system` tables, no table function outside the generators the gate
//! allows, and no function it refuses. The gate reads the parser's tree;
//! this reads the analyzer's.
//!
//! One engine for the process (it is process-global), opened on the first
//! input with a `public` database the caller reads and a `secret` one it
//! may not, each statement run in turn.

#![no_main]

use std::collections::HashSet;
use std::path::PathBuf;

use chingest::{sandbox, IngestConfig, Ingestor, Precision, ReadScope};
use chingest_fuzz::{Engine, EngineWorld};
use libfuzzer_sys::fuzz_target;

/// What no answer may contain: the secret database's tag and field value,
/// the text of the files beside the data, and the data directory's path.
/// The values are random and found by their hashes, never compared as
/// text: libFuzzer learns the bytes a target compares, and a statement
/// that only quotes a canary back (`SELECT 'CANARY…'`) is no leak.
struct Canaries {
    /// (length, hash) of each.
    hashes: Vec<(usize, u64)>,
}

impl Canaries {
    fn of(texts: &[&str]) -> Canaries {
        Canaries {
            hashes: texts
                .iter()
                .map(|t| (t.len(), hash(t.as_bytes())))
                .collect(),
        }
    }

    /// Whether `answer` holds one of them.
    fn in_answer(&self, answer: &[u8]) -> bool {
        self.hashes
            .iter()
            .any(|&(len, want)| answer.windows(len).any(|window| hash(window) == want))
    }
}

fn hash(bytes: &[u8]) -> u64 {
    use std::hash::{BuildHasher, BuildHasherDefault, DefaultHasher};
    BuildHasherDefault::<DefaultHasher>::default().hash_one(bytes)
}

/// A value no statement can guess: random for each process.
fn random_text(prefix: &str) -> String {
    use std::hash::BuildHasher;
    let random = std::collections::hash_map::RandomState::new().hash_one(std::process::id());
    format!("{prefix}{random:016x}")
}

struct World {
    engine: Engine,
    canaries: Canaries,
    /// What the gate refuses, lower-cased: the functions of
    /// `sandbox::DENIED_FUNCTIONS`, of the engine's `AI`, `Dictionary` and
    /// `Introspection` categories, and their aliases.
    denied_functions: HashSet<String>,
}

static WORLD: EngineWorld<World> = EngineWorld::new(open, |world| world.engine.close());

/// The engine with `public` and `secret` written, the canaries beside it,
/// and what the gate refuses.
fn open() -> World {
    let (tag, field, file) = (random_text("t"), random_text("f"), random_text("x"));
    let secret = format!("vault,key={tag} code=\"{field}\" 1700000000");
    let public = "cpu,host=a usage=1 1700000000\ncpu,host=b usage=2 1700000060";
    let configure = |config: &mut IngestConfig| {
        // Under libFuzzer's 10 s per input, and small: a statement that
        // runs into a limit is refused, which is not a finding.
        config.query.max_execution_time = std::time::Duration::from_secs(2);
        config.query.max_rows_to_read = 10_000_000;
        config.query.max_result_bytes = 16 << 20;
    };
    let engine = chingest_fuzz::open_engine(
        "sql_gate",
        configure,
        Precision::Seconds,
        &[("public", public), ("secret", &secret)],
    );
    let dir = &engine.dir;
    for beside in [dir.clone(), dir.join("user_files"), PathBuf::from("/tmp")] {
        let _ = std::fs::create_dir_all(&beside);
        std::fs::write(beside.join("chingest-fuzz-canary.txt"), format!("{file}\n")).unwrap();
    }
    let canaries = Canaries::of(&[&tag, &field, &file, &dir.display().to_string()]);
    // The detector sees the secret where a caller may read it.
    let trusted = engine
        .runtime
        .block_on(
            engine
                .ingestor
                .query_untrusted("SELECT * FROM secret.vault", "TSV"),
        )
        .expect("the secret reads");
    assert!(
        canaries.in_answer(&trusted),
        "the canaries are not found where they are"
    );
    let denied_functions = engine.runtime.block_on(denied_functions(&engine.ingestor));
    World {
        engine,
        canaries,
        denied_functions,
    }
}

async fn denied_functions(ingestor: &Ingestor) -> HashSet<String> {
    let listed = sandbox::DENIED_FUNCTIONS
        .iter()
        .map(|f| format!("'{f}'"))
        .collect::<Vec<_>>()
        .join(",");
    let sql = format!(
        "SELECT lower(name) FROM system.functions \
         WHERE categories IN ('AI', 'Dictionary', 'Introspection') OR name IN ({listed}) \
            OR alias_to IN (SELECT name FROM system.functions \
                            WHERE categories IN ('AI', 'Dictionary', 'Introspection') \
                               OR name IN ({listed}))"
    );
    let names = ingestor.query_trusted(&sql, "TSVRaw").await.unwrap();
    let names: HashSet<String> = String::from_utf8(names)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert!(
        names.contains("file") && names.contains("dictget"),
        "{names:?}"
    );
    names
}

/// What the analyzer finds in an admitted `sql` that the gate refuses:
/// `None` when there is nothing, or when the analyzer cannot resolve it
/// without the caller's current database (a table named without one).
fn refused_in_resolved(world: &World, sql: &str) -> Option<String> {
    let explain = format!(
        "EXPLAIN QUERY TREE {}",
        sql.trim_end().trim_end_matches(';')
    );
    let tree = world
        .engine
        .runtime
        .block_on(world.engine.ingestor.query_trusted(&explain, "TSVRaw"))
        .ok()?;
    let tree = String::from_utf8_lossy(&tree);
    for node in tree.lines().map(str::trim) {
        let attribute = |key: &str| {
            node.split(", ")
                .find_map(|part| part.split_once(": ").filter(|(k, _)| k.ends_with(key)))
                .map(|(_, v)| v)
        };
        if node.starts_with("TABLE_FUNCTION ") {
            let name = attribute("table_function_name")?;
            if !sandbox::ALLOWED_TABLE_FUNCTIONS.contains(&name) {
                return Some(format!("table function {name}"));
            }
        } else if node.starts_with("TABLE ") {
            let name = attribute("table_name")?;
            let allowed = match name.split_once('.') {
                Some(("public", _)) => true,
                Some(("system", table)) => sandbox::CATALOGUE_SYSTEM_TABLES.contains(&table),
                _ => false,
            };
            if !allowed {
                return Some(format!("table {name}"));
            }
        } else if node.starts_with("FUNCTION ") {
            let name = attribute("function_name")?;
            if world.denied_functions.contains(&name.to_lowercase()) {
                return Some(format!("function {name}"));
            }
        }
    }
    None
}

fuzz_target!(|sql: &str| WORLD.with(|world| check(world, sql)));

/// Runs `sql` as the server runs a scoped caller's, and checks both properties.
fn check(world: &World, sql: &str) {
    let scope = ReadScope::Databases(vec!["public".to_owned()]);
    let answer = world.engine.runtime.block_on(async {
        let mut chunks = world
            .engine
            .ingestor
            .query_untrusted_stream(sql, "TSV", &scope, Some("public"))
            .await
            .ok()?;
        let mut answer = Vec::new();
        while let Some(chunk) = chunks.next().await {
            answer.extend(chunk.ok()?);
        }
        Some(answer)
    });
    let Some(answer) = answer else { return };
    assert!(
        !world.canaries.in_answer(&answer),
        "{sql:?} answered what lies outside its database:\n{}",
        String::from_utf8_lossy(&answer)
    );
    if let Some(refused) = refused_in_resolved(world, sql) {
        panic!("{sql:?} was admitted, yet the engine's analyzer finds in it {refused}");
    }
}
