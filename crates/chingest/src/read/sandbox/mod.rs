//! What SQL from untrusted callers may touch: the server's databases and
//! nothing else.
//!
//! Three layers, the engine's own first:
//!
//! 1. The connection is `readonly = 1`: the engine refuses writes, DDL,
//!    settings changes (so the limits of [`QueryLimits`](crate::QueryLimits)
//!    cannot be raised) and table functions that read outside (`url`, `s3`,
//!    `remote`, `file`, `executable`, …).
//! 2. [`Sandbox::check`] reads the statement's syntax tree as the engine's
//!    parser prints it (`EXPLAIN AST`) and refuses
//!    - table functions outside [`ALLOWED_TABLE_FUNCTIONS`] (generators
//!      only: `merge`, `loop`, `dictionary` and friends read tables by
//!      name, past the checks below);
//!    - scalar functions that reach the file system, the network, the
//!      server's configuration or other tables by name
//!      ([`DENIED_FUNCTIONS`], plus every function the engine files under
//!      the `AI`, `Dictionary` and `Introspection` categories, and their
//!      aliases: new engine versions are covered as they list them);
//!    - `system` tables outside [`CATALOGUE_SYSTEM_TABLES`] and
//!      [`UNSCOPED_SYSTEM_TABLES`]: the others show
//!      paths, other callers' queries, users, grants or server internals.
//! 3. The engine enforces the limits on every statement.
//!
//! One table function is chingest's own: `last_values('db', 'measurement'
//! [, 'rp'])` reads the last-value cache. Its arguments must be string
//! literals, and its database one the caller may read. The check finds
//! each call in the text with a small tokenizer (`find_last_values`, over
//! `tokens.rs`) and requires the calls it found to be exactly those of the
//! engine's parse.
//! The statement's runner (`read/stream.rs`) then copies each call's
//! snapshot into a table of its own in [`SNAPSHOT_DATABASE`] (an in-memory
//! database), replaces the
//! call's text by that table's name and parses the result again, which
//! must read exactly those tables and call `last_values` no more
//! (`Sandbox::check_rewritten`). Callers cannot name those tables
//! themselves, and `ArrowStream` (which a read-only connection refuses
//! anyway) is refused like any table function outside the list.
//!
//! The tree is the engine's parse, not the text: quoting, comments, case
//! and aliases cannot hide a name.

use std::collections::{HashMap, HashSet};
use std::ops::Range;
use std::sync::{Arc, Mutex};

use crate::engine::{query_rows, syntax_tree, Connection};
use crate::error::{Error, Result};

mod tokens;

use tokens::{string_literal, tokens, Token};

/// Table functions that only generate rows.
pub const ALLOWED_TABLE_FUNCTIONS: &[&str] = &[
    "numbers",
    "numbers_mt",
    "zeros",
    "zeros_mt",
    "generateRandom",
    "generateSeries",
    "generate_series",
    "primes",
    "values",
    "null",
    "view",
];

/// The table function served from the last-value cache (see the module
/// documentation).
pub const LAST_VALUES_FUNCTION: &str = "last_values";

/// The in-memory database that holds the snapshots `last_values` calls
/// read, one table per call, dropped once its statement ends. A leading
/// `_` no user database has (see [`names`](crate::layout::names)).
pub const SNAPSHOT_DATABASE: &str = "_chingest_last_values";

/// Scalar functions refused besides the engine's `AI`, `Dictionary` and
/// `Introspection` categories.
pub const DENIED_FUNCTIONS: &[&str] = &[
    // The file system.
    "file",
    "filesystemAvailable",
    "filesystemCapacity",
    "filesystemUnreserved",
    "catboostEvaluate",
    // Tables by name, past the table checks.
    "joinGet",
    "joinGetOrNull",
    "hasColumnInTable",
    "getSubcolumn",
    // The server: its configuration, identity, network and users.
    "getServerSetting",
    "getMergeTreeSetting",
    "getServerPort",
    "tcpPort",
    "hostName",
    "fqdn",
    "displayName",
    "serverUUID",
    "buildId",
    "getMacro",
    "getOSKernelVersion",
    "showCertificate",
    "getClientHTTPHeader",
    // Not `currentUser` (and its aliases): the engine has one user,
    // `default`, and ClickHouse's JDBC driver (DBeaver) asks for it on
    // connect.
    "currentProfiles",
    "currentRoles",
    "enabledRoles",
    "defaultRoles",
    "zookeeperSessionUptime",
    "initialQueryID",
    "queryID",
];

/// `system` tables every caller may read: catalogues of the engine's
/// features and generators, which show nothing of any database.
pub const CATALOGUE_SYSTEM_TABLES: &[&str] = &[
    "one",
    "numbers",
    "numbers_mt",
    "zeros",
    "zeros_mt",
    "functions",
    "table_functions",
    "aggregate_function_combinators",
    "data_type_families",
    "formats",
    "collations",
    "time_zones",
    "keywords",
    "settings",
];

/// `system` tables a caller who may read every database may also read:
/// `columns` (names and types of every table, no paths).
pub const UNSCOPED_SYSTEM_TABLES: &[&str] = &["columns"];

/// The databases a caller may read.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub enum ReadScope {
    /// Every database.
    #[default]
    All,
    /// Only these. Such a caller runs only `SELECT`s (not `SHOW`,
    /// `DESCRIBE`, `EXPLAIN`), which name every table they read, and reads
    /// only the `system` tables of [`CATALOGUE_SYSTEM_TABLES`]. A table named
    /// without its database is in `default`.
    Databases(Vec<String>),
}

/// The checks of one engine, with the denied functions read from its
/// catalogue.
#[derive(Debug)]
pub(crate) struct Sandbox {
    /// Lower-cased: some function names are case-insensitive.
    denied_functions: HashSet<String>,
    allowed_table_functions: HashSet<String>,
    /// Statements that passed, by scope, current database and text:
    /// dashboards send the same few again and again, and each check costs
    /// two parses by the engine.
    passed: Mutex<HashMap<Context, HashMap<String, Checked>>>,
}

/// What a statement's check depends on besides its text: the caller's
/// scope and the current database.
type Context = (ReadScope, Option<String>);

/// Statements remembered as passed; past it the memory starts afresh.
const PASSED_CAPACITY: usize = 4096;
/// Longer statements are checked every time: the memory stays under
/// `PASSED_CAPACITY` × this many bytes (16 MiB).
const PASSED_MAX_LEN: usize = 4096;

impl Sandbox {
    /// Reads the engine's catalogue for the categories refused whole and
    /// the aliases of every refused function.
    pub(crate) fn load(conn: &Connection) -> Result<Sandbox> {
        let names = DENIED_FUNCTIONS
            .iter()
            .map(|f| format!("'{f}'"))
            .collect::<Vec<_>>()
            .join(",");
        let rows = query_rows(
            conn,
            &format!(
                "WITH denied AS (SELECT name FROM system.functions \
                    WHERE categories IN ('AI', 'Dictionary', 'Introspection') \
                       OR name IN ({names})) \
                 SELECT name FROM system.functions \
                 WHERE name IN (SELECT name FROM denied) \
                    OR alias_to IN (SELECT name FROM denied)"
            ),
        )?;
        let denied_functions = rows
            .into_iter()
            .filter_map(|row| row.into_iter().next())
            .chain(DENIED_FUNCTIONS.iter().map(|f| f.to_string()))
            .map(|name| name.to_lowercase())
            .collect();
        let allowed_table_functions = ALLOWED_TABLE_FUNCTIONS
            .iter()
            .map(|f| f.to_lowercase())
            .collect();
        Ok(Sandbox {
            denied_functions,
            allowed_table_functions,
            passed: Mutex::default(),
        })
    }

    /// How `sql` fared when it passed before, under `scope`, with
    /// `database` current.
    pub(crate) fn passed(
        &self,
        sql: &str,
        scope: &ReadScope,
        database: Option<&str>,
    ) -> Option<Checked> {
        let passed = self.passed.lock().expect("passed statements");
        let key = (scope.clone(), database.map(str::to_owned));
        passed.get(&key)?.get(sql).cloned()
    }

    /// Refuses `sql` if its syntax tree names a function or table outside
    /// the sandbox. `sql` is one read-only statement (already classified);
    /// its unqualified table names are in `database` (else `default`).
    pub(crate) fn check(
        &self,
        conn: &Connection,
        sql: &str,
        scope: &ReadScope,
        database: Option<&str>,
    ) -> Result<Checked> {
        let lines = syntax_tree(conn, sql)?;
        let found = self.check_tree(&lines, scope, database.unwrap_or("default"), &[])?;
        let last_values = last_values_calls(sql, found.last_values, scope)?;
        let root = lines
            .first()
            .map_or("", |line| first_word(line.trim_start()));
        let select = root.starts_with("Select");
        if !select && matches!(scope, ReadScope::Databases(_)) {
            return Err(Error::NotReadOnly(
                "only SELECT statements are allowed with this token".to_owned(),
            ));
        }
        // A SELECT of no table (`SELECT 1`, `SELECT version()`: what
        // clients ask when they connect) is answered whole: streaming
        // costs its handoffs between threads, a fifth of such a
        // statement's CPU (docs/benchmarks.md §13.4). Its output is bounded
        // by the result limits as a streamed one is.
        let reads_tables = lines
            .iter()
            .any(|line| line.trim_start().starts_with("TableExpression"));
        let checked = Checked {
            streams: select && reads_tables,
            last_values: last_values.into(),
        };
        if sql.len() > PASSED_MAX_LEN {
            return Ok(checked);
        }
        let mut passed = self.passed.lock().expect("passed statements");
        if passed.values().map(HashMap::len).sum::<usize>() >= PASSED_CAPACITY {
            passed.clear();
        }
        let in_scope = passed
            .entry((scope.clone(), database.map(str::to_owned)))
            .or_default();
        in_scope.insert(sql.to_owned(), checked.clone());
        Ok(checked)
    }

    /// Checks a statement whose `last_values` calls were replaced by the
    /// snapshot tables `snapshots` (`database.table`, unquoted): it must
    /// pass as the original did, read each of those tables once, and call
    /// `last_values` no more.
    pub(crate) fn check_rewritten(
        &self,
        conn: &Connection,
        sql: &str,
        scope: &ReadScope,
        database: Option<&str>,
        snapshots: &[String],
    ) -> Result<()> {
        let lines = syntax_tree(conn, sql)?;
        let mut found = self.check_tree(&lines, scope, database.unwrap_or("default"), snapshots)?;
        let mut expected = snapshots.to_vec();
        found.snapshots.sort();
        expected.sort();
        if !found.last_values.is_empty() || found.snapshots != expected {
            return Err(Error::NotReadOnly(format!(
                "{LAST_VALUES_FUNCTION}(): the statement could not be rewritten to read the cache"
            )));
        }
        Ok(())
    }

    /// Refuses what the tree names outside the sandbox; returns the calls
    /// of `last_values`, for the caller to judge, and the reads of the
    /// snapshot tables `snapshots` (the only ones of [`SNAPSHOT_DATABASE`]
    /// allowed). Unqualified table names are in `current`.
    fn check_tree(
        &self,
        lines: &[String],
        scope: &ReadScope,
        current: &str,
        snapshots: &[String],
    ) -> Result<Found> {
        let refuse = |what: String| Err(Error::NotReadOnly(what));
        let mut found = Found::default();
        for (i, line) in lines.iter().enumerate() {
            let node = line.trim_start();
            if let Some(rest) = node.strip_prefix("Function ") {
                let name = first_word(rest);
                let table_function = parent(lines, i).is_some_and(|p| p == "TableExpression");
                let lower = name.to_lowercase();
                if table_function && lower == LAST_VALUES_FUNCTION {
                    found.last_values.push(call_args(lines, i));
                } else if table_function {
                    if !self.allowed_table_functions.contains(&lower) {
                        return refuse(format!("table function {name}() is not allowed here"));
                    }
                } else if self.denied_functions.contains(&name.to_lowercase()) {
                    return refuse(format!("function {name}() is not allowed here"));
                }
            } else if let Some(rest) = node.strip_prefix("TableIdentifier ") {
                let table = unquote(first_word(rest));
                let (database, name) = table.split_once('.').unwrap_or((current, &table));
                if database == SNAPSHOT_DATABASE {
                    if !snapshots.contains(&table) {
                        return refuse(format!("table {table} is not allowed here"));
                    }
                    found.snapshots.push(table);
                    continue;
                }
                let allowed = match (database, scope) {
                    ("system", ReadScope::All) => {
                        CATALOGUE_SYSTEM_TABLES.contains(&name)
                            || UNSCOPED_SYSTEM_TABLES.contains(&name)
                    }
                    ("system", ReadScope::Databases(_)) => CATALOGUE_SYSTEM_TABLES.contains(&name),
                    (_, ReadScope::All) => true,
                    (database, ReadScope::Databases(list)) => list.iter().any(|d| d == database),
                };
                if !allowed {
                    return refuse(format!("table {table} is not allowed here"));
                }
            }
        }
        Ok(found)
    }
}

/// What [`Sandbox::check_tree`] found for its caller to judge.
#[derive(Debug, Default)]
struct Found {
    /// The arguments of each `last_values` call: a string literal's value,
    /// or `None` for anything else.
    last_values: Vec<Vec<Option<String>>>,
    /// The snapshot tables read, as `database.table`.
    snapshots: Vec<String>,
}

/// A `last_values` call the check let through.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct LastValuesCall {
    /// Its database.
    pub(crate) database: String,
    /// Its measurement.
    pub(crate) measurement: String,
    /// Its retention policy (`autogen` unless given).
    pub(crate) retention_policy: String,
    /// Where the call (name through closing parenthesis) is in the text.
    pub(crate) span: Range<usize>,
}

/// The `last_values` calls of `sql`, given the arguments of those of its
/// tree: each with string literals, on a database the caller may read, and
/// found by the tokenizer exactly as the engine parsed them.
fn last_values_calls(
    sql: &str,
    calls: Vec<Vec<Option<String>>>,
    scope: &ReadScope,
) -> Result<Vec<LastValuesCall>> {
    let refuse = |what: String| Err(Error::NotReadOnly(what));
    let mut parsed = Vec::new();
    for args in calls {
        let args: Option<Vec<String>> = args.into_iter().collect();
        let Some(args) = args.filter(|args| (2..=3).contains(&args.len())) else {
            return refuse(format!(
                "{LAST_VALUES_FUNCTION}() takes two or three string literals: \
                 database, measurement[, retention policy]"
            ));
        };
        let database = &args[0];
        if let ReadScope::Databases(allowed) = scope {
            if !allowed.contains(database) {
                return refuse(format!("database {database:?} is not allowed here"));
            }
        }
        parsed.push(args);
    }
    if parsed.is_empty() {
        return Ok(Vec::new());
    }
    let mut found = find_last_values(sql);
    let mut in_text: Vec<&Vec<String>> = found.iter().map(|(_, args)| args).collect();
    in_text.sort();
    parsed.sort();
    if in_text != parsed.iter().collect::<Vec<_>>() {
        return refuse(format!(
            "{LAST_VALUES_FUNCTION}(): its calls could not be located in the statement's text \
             (write them plainly: last_values('db', 'measurement'))"
        ));
    }
    found.sort_by_key(|(span, _)| span.start);
    Ok(found
        .into_iter()
        .map(|(span, mut args)| {
            let retention_policy = if args.len() == 3 {
                args.pop().unwrap_or_default()
            } else {
                "autogen".to_owned()
            };
            let measurement = args.pop().unwrap_or_default();
            let database = args.pop().unwrap_or_default();
            LastValuesCall {
                database,
                measurement,
                retention_policy,
                span,
            }
        })
        .collect())
}

/// The arguments of the function call on line `i` of a tree: its
/// `ExpressionList`'s children, string literals by value.
fn call_args(lines: &[String], i: usize) -> Vec<Option<String>> {
    let depth = |line: &str| line.len() - line.trim_start().len();
    let own = depth(&lines[i]);
    let mut args = Vec::new();
    for line in lines[i + 1..].iter().take_while(|line| depth(line) > own) {
        if depth(line) != own + 2 {
            continue;
        }
        let literal = line
            .trim_start()
            .strip_prefix("Literal ")
            .filter(|value| value.starts_with('\''))
            .and_then(|value| string_literal(value.as_bytes()))
            .filter(|(_, len)| *len == line.trim_start().len() - "Literal ".len());
        args.push(literal.map(|(value, _)| value));
    }
    args
}

/// Every `last_values(<string>, <string>[, <string>])` in `sql` outside
/// strings, quoted names and comments: the span from the name through the
/// closing parenthesis, and the arguments' values. The name may be quoted
/// (`` `last_values` ``) and any case; whitespace and comments may sit
/// between the tokens.
pub(crate) fn find_last_values(sql: &str) -> Vec<(Range<usize>, Vec<String>)> {
    let tokens = tokens(sql.as_bytes());
    let mut calls = Vec::new();
    for (start, token) in tokens.iter().enumerate() {
        let named = match &token.kind {
            Token::Word(word) | Token::Quoted(word) => {
                word.eq_ignore_ascii_case(LAST_VALUES_FUNCTION)
            }
            _ => false,
        };
        let qualified = start > 0 && tokens[start - 1].kind == Token::Punct(b'.');
        if !named || qualified {
            continue;
        }
        let mut args = Vec::new();
        let mut next = start + 1;
        let expect = |i: usize, c: u8| tokens.get(i).is_some_and(|t| t.kind == Token::Punct(c));
        if !expect(next, b'(') {
            continue;
        }
        next += 1;
        let end = loop {
            let Some(Token::String(value)) = tokens.get(next).map(|t| &t.kind) else {
                break None;
            };
            args.push(value.clone());
            next += 1;
            if expect(next, b')') {
                break Some(tokens[next].span.end);
            }
            if !expect(next, b',') {
                break None;
            }
            next += 1;
        };
        if let Some(end) = end {
            calls.push((token.span.start..end, args));
        }
    }
    calls
}

/// What the check learned of a statement it let through.
#[derive(Debug, Clone)]
pub(crate) struct Checked {
    /// A `SELECT` of a table (the engine streams its output); `SHOW`,
    /// `EXPLAIN`, `DESCRIBE`, a `SELECT` of no table and the like are
    /// answered whole.
    pub(crate) streams: bool,
    /// Its `last_values` calls, in text order.
    pub(crate) last_values: Arc<[LastValuesCall]>,
}

/// The first word of an `EXPLAIN AST` node's text (before ` (alias …)` or
/// ` (children …)`).
fn first_word(text: &str) -> &str {
    text.split(' ').next().unwrap_or_default()
}

/// The node kind of line `i`'s parent (the nearest line above it that is
/// indented less).
fn parent(lines: &[String], i: usize) -> Option<&str> {
    let depth = |line: &str| line.len() - line.trim_start().len();
    let own = depth(&lines[i]);
    lines[..i]
        .iter()
        .rev()
        .find(|line| depth(line) < own)
        .map(|line| first_word(line.trim_start()))
}

/// `` `system`.`disks` `` → `system.disks`.
fn unquote(name: &str) -> String {
    name.replace('`', "")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox() -> Sandbox {
        Sandbox {
            denied_functions: ["file".to_owned()].into(),
            allowed_table_functions: ["numbers".to_owned()].into(),
            passed: Mutex::default(),
        }
    }

    fn tree(text: &str) -> Vec<String> {
        text.lines().map(str::to_owned).collect()
    }

    #[test]
    fn table_functions_are_told_from_scalar_functions_by_their_parent() {
        let numbers = tree(
            "SelectQuery (children 2)\n \
             TablesInSelectQuery (children 1)\n  \
             TableExpression (children 1)\n   \
             Function numbers (children 1)",
        );
        assert!(sandbox()
            .check_tree(&numbers, &ReadScope::All, "default", &[])
            .is_ok());
        let url = tree(
            "SelectQuery (children 2)\n \
             TableExpression (children 1)\n  \
             Function url (children 1)",
        );
        let err = sandbox()
            .check_tree(&url, &ReadScope::All, "default", &[])
            .unwrap_err()
            .to_string();
        assert!(err.contains("table function url()"), "{err}");
        let file = tree("SelectQuery (children 1)\n ExpressionList\n  Function FILE (alias f)");
        assert!(
            sandbox()
                .check_tree(&file, &ReadScope::All, "default", &[])
                .is_err(),
            "names are compared without case"
        );
    }

    #[test]
    fn system_tables_outside_the_list_are_refused() {
        let disks =
            tree("TableExpression (children 1)\n TableIdentifier `system`.`disks` (alias d)");
        assert!(sandbox()
            .check_tree(&disks, &ReadScope::All, "default", &[])
            .is_err());
        let one = tree("TableExpression (children 1)\n TableIdentifier system.one");
        assert!(sandbox()
            .check_tree(&one, &ReadScope::All, "default", &[])
            .is_ok());
        let ours = tree("TableExpression (children 1)\n TableIdentifier db.`cpu.autogen`");
        assert!(sandbox()
            .check_tree(&ours, &ReadScope::All, "default", &[])
            .is_ok());
    }

    #[test]
    fn a_scoped_caller_reads_only_its_databases() {
        let scope = ReadScope::Databases(vec!["db1".to_owned()]);
        let table = |name: &str| tree(&format!("TableExpression\n TableIdentifier {name}"));
        assert!(sandbox()
            .check_tree(&table("db1.`m.autogen`"), &scope, "default", &[])
            .is_ok());
        assert!(sandbox()
            .check_tree(&table("db2.m"), &scope, "default", &[])
            .is_err());
        assert!(
            sandbox()
                .check_tree(&table("m"), &scope, "default", &[])
                .is_err(),
            "`default`.m"
        );
        assert!(sandbox()
            .check_tree(&table("system.one"), &scope, "default", &[])
            .is_ok());
        assert!(sandbox()
            .check_tree(&table("system.columns"), &scope, "default", &[])
            .is_err());
    }

    #[test]
    fn unqualified_names_are_in_the_current_database() {
        let scope = ReadScope::Databases(vec!["db1".to_owned()]);
        let table = |name: &str| tree(&format!("TableExpression\n TableIdentifier {name}"));
        assert!(sandbox()
            .check_tree(&table("m"), &scope, "db1", &[])
            .is_ok());
        assert!(sandbox()
            .check_tree(&table("m"), &scope, "db2", &[])
            .is_err());
        let disks = table("disks");
        assert!(sandbox()
            .check_tree(&disks, &ReadScope::All, "system", &[])
            .is_err());
        assert!(sandbox()
            .check_tree(&table("one"), &ReadScope::All, "system", &[])
            .is_ok());
    }

    #[test]
    fn last_values_calls_are_found_outside_strings_and_comments() {
        let calls = |sql: &str| -> Vec<(String, Vec<String>)> {
            find_last_values(sql)
                .into_iter()
                .map(|(span, args)| (sql[span].to_owned(), args))
                .collect()
        };
        let args = |a: &[&str]| a.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(
            calls("SELECT * FROM last_values('db', 'cpu') WHERE x = 1"),
            [("last_values('db', 'cpu')".to_owned(), args(&["db", "cpu"]))]
        );
        assert_eq!(
            calls("SELECT * FROM `LAST_VALUES` /* c */ ( 'd\\'b' , -- c\n 'c''pu', 'rp')"),
            [(
                "`LAST_VALUES` /* c */ ( 'd\\'b' , -- c\n 'c''pu', 'rp')".to_owned(),
                args(&["d'b", "c'pu", "rp"])
            )]
        );
        for hidden in [
            "SELECT 'last_values(''a'', ''b'')'",
            "SELECT 1 -- last_values('a', 'b')",
            "SELECT 1 /* /* nested */ last_values('a', 'b') */",
            "SELECT 1 # last_values('a', 'b')",
            "SELECT `last_values('a', 'b')`",
            "SELECT * FROM db.last_values('a', 'b')",
            "SELECT * FROM last_values(a, 'b')",
            "SELECT * FROM last_values('a' || 'x', 'b')",
            "SELECT * FROM last_values('a\\q', 'b')",
        ] {
            assert!(calls(hidden).is_empty(), "{hidden}: {:?}", calls(hidden));
        }
    }

    #[test]
    fn last_values_must_be_called_with_literals_found_in_the_text() {
        let tree = |args: &[Option<&str>]| -> Vec<Vec<Option<String>>> {
            vec![args.iter().map(|a| a.map(str::to_owned)).collect()]
        };
        let sql = "SELECT * FROM last_values('db', 'cpu')";
        let ok = last_values_calls(sql, tree(&[Some("db"), Some("cpu")]), &ReadScope::All).unwrap();
        assert_eq!(ok[0].retention_policy, "autogen");
        assert_eq!(&sql[ok[0].span.clone()], "last_values('db', 'cpu')");
        let scoped = ReadScope::Databases(vec!["other".to_owned()]);
        for (tree, scope) in [
            (tree(&[Some("db"), None]), &ReadScope::All),
            (tree(&[Some("db")]), &ReadScope::All),
            (tree(&[Some("db"), Some("cpu")]), &scoped),
            // The parse and the text disagree: never guessed.
            (tree(&[Some("db2"), Some("cpu")]), &ReadScope::All),
        ] {
            assert!(
                last_values_calls(sql, tree.clone(), scope).is_err(),
                "{tree:?}"
            );
        }
    }
}
