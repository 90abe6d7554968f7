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
//! The tree is the engine's parse, not the text: quoting, comments, case
//! and aliases cannot hide a name.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use chdb_rust::connection::Connection;

use crate::engine::query_rows;
use crate::{Error, Result};

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
        passed.get(&key)?.get(sql).copied()
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
        let tree = query_rows(conn, &format!("EXPLAIN AST {sql}"))?;
        let lines: Vec<String> = tree.into_iter().map(|row| row.join("\t")).collect();
        self.check_tree(&lines, scope, database.unwrap_or("default"))?;
        let root = lines
            .first()
            .map_or("", |line| first_word(line.trim_start()));
        let streams = root.starts_with("Select");
        if !streams && matches!(scope, ReadScope::Databases(_)) {
            return Err(Error::NotReadOnly(
                "only SELECT statements are allowed with this token".to_owned(),
            ));
        }
        let checked = Checked { streams };
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
        in_scope.insert(sql.to_owned(), checked);
        Ok(checked)
    }

    fn check_tree(&self, lines: &[String], scope: &ReadScope, current: &str) -> Result<()> {
        let refuse = |what: String| Err(Error::NotReadOnly(what));
        for (i, line) in lines.iter().enumerate() {
            let node = line.trim_start();
            if let Some(rest) = node.strip_prefix("Function ") {
                let name = first_word(rest);
                let table_function = parent(lines, i).is_some_and(|p| p == "TableExpression");
                if table_function {
                    if !self.allowed_table_functions.contains(&name.to_lowercase()) {
                        return refuse(format!("table function {name}() is not allowed here"));
                    }
                } else if self.denied_functions.contains(&name.to_lowercase()) {
                    return refuse(format!("function {name}() is not allowed here"));
                }
            } else if let Some(rest) = node.strip_prefix("TableIdentifier ") {
                let table = unquote(first_word(rest));
                let (database, name) = table.split_once('.').unwrap_or((current, &table));
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
        Ok(())
    }
}

/// What the check learned of a statement it let through.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Checked {
    /// A `SELECT` (the engine streams its output); `SHOW`, `EXPLAIN`,
    /// `DESCRIBE` and the like are answered whole.
    pub(crate) streams: bool,
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
            .check_tree(&numbers, &ReadScope::All, "default")
            .is_ok());
        let url = tree(
            "SelectQuery (children 2)\n \
             TableExpression (children 1)\n  \
             Function url (children 1)",
        );
        let err = sandbox()
            .check_tree(&url, &ReadScope::All, "default")
            .unwrap_err()
            .to_string();
        assert!(err.contains("table function url()"), "{err}");
        let file = tree("SelectQuery (children 1)\n ExpressionList\n  Function FILE (alias f)");
        assert!(
            sandbox()
                .check_tree(&file, &ReadScope::All, "default")
                .is_err(),
            "names are compared without case"
        );
    }

    #[test]
    fn system_tables_outside_the_list_are_refused() {
        let disks =
            tree("TableExpression (children 1)\n TableIdentifier `system`.`disks` (alias d)");
        assert!(sandbox()
            .check_tree(&disks, &ReadScope::All, "default")
            .is_err());
        let one = tree("TableExpression (children 1)\n TableIdentifier system.one");
        assert!(sandbox()
            .check_tree(&one, &ReadScope::All, "default")
            .is_ok());
        let ours = tree("TableExpression (children 1)\n TableIdentifier db.`cpu.autogen`");
        assert!(sandbox()
            .check_tree(&ours, &ReadScope::All, "default")
            .is_ok());
    }

    #[test]
    fn a_scoped_caller_reads_only_its_databases() {
        let scope = ReadScope::Databases(vec!["db1".to_owned()]);
        let table = |name: &str| tree(&format!("TableExpression\n TableIdentifier {name}"));
        assert!(sandbox()
            .check_tree(&table("db1.`m.autogen`"), &scope, "default")
            .is_ok());
        assert!(sandbox()
            .check_tree(&table("db2.m"), &scope, "default")
            .is_err());
        assert!(
            sandbox()
                .check_tree(&table("m"), &scope, "default")
                .is_err(),
            "`default`.m"
        );
        assert!(sandbox()
            .check_tree(&table("system.one"), &scope, "default")
            .is_ok());
        assert!(sandbox()
            .check_tree(&table("system.columns"), &scope, "default")
            .is_err());
    }

    #[test]
    fn unqualified_names_are_in_the_current_database() {
        let scope = ReadScope::Databases(vec!["db1".to_owned()]);
        let table = |name: &str| tree(&format!("TableExpression\n TableIdentifier {name}"));
        assert!(sandbox().check_tree(&table("m"), &scope, "db1").is_ok());
        assert!(sandbox().check_tree(&table("m"), &scope, "db2").is_err());
        let disks = table("disks");
        assert!(sandbox()
            .check_tree(&disks, &ReadScope::All, "system")
            .is_err());
        assert!(sandbox()
            .check_tree(&table("one"), &ReadScope::All, "system")
            .is_ok());
    }
}
