//! How InfluxDB names (database, retention policy, measurement, field) become
//! ClickHouse identifiers, and how those are quoted in SQL.
//!
//! The mapping must be injective and leave room for chingest's own tables, so
//! every user-supplied component goes through [`encode`], which percent-escapes
//! `%`, `.`, control characters and a leading `_`. Encoded components therefore
//! contain no raw `.` and never start with `_`, which gives three disjoint
//! namespaces inside one ClickHouse database:
//!
//! | what                          | name                              |
//! |-------------------------------|-----------------------------------|
//! | fact table (MergeTree)        | `enc(measurement).enc(rp)`         |
//! | series dimension table        | `_series`                          |
//! | policy registries             | `_retention_policies`, `_duplicate_policies` |
//! | view with tags as columns     | `enc(measurement)`                 |
//!
//! (Versions before the read-path work kept the facts in
//! `enc(measurement).enc(rp).mergetree` behind a Buffer table named like
//! today's fact table; opening such a data directory renames them, see
//! `Catalog::load`.)
//!
//! Ordinary names (`cpu`, `autogen`, `telegraf`) encode to themselves, so the
//! common case reads as `telegraf.\`cpu.autogen\``. Field names become column
//! names unencoded (they are only ever quoted); `time` and `series_id` are
//! reserved for chingest's own columns.

use std::fmt;

/// Longest a database or field name may be once the engine escapes it into a
/// file name (`<database>.sql`, `<column>.null.bin`, ...; file systems stop at
/// 255 bytes).
pub const MAX_FILE_NAME_LEN: usize = 200;

/// The same limit for a measurement and a retention policy, which share one
/// table file name (`<measurement>.<rp>.sql`, and the older
/// `<measurement>.<rp>.mergetree.sql`).
pub const MAX_TABLE_PART_LEN: usize = 100;

/// Databases the engine owns; writing into them is refused.
const RESERVED_DATABASES: [&str; 3] = ["system", "information_schema", "INFORMATION_SCHEMA"];

/// Column names chingest uses itself in every fact table.
pub const RESERVED_COLUMNS: [&str; 2] = ["time", "series_id"];

/// The series table's name inside every managed database.
pub const SERIES_TABLE: &str = "_series";

/// The retention-policy registry's name inside every managed database.
pub const RETENTION_POLICIES_TABLE: &str = "_retention_policies";

/// The duplicate-policy registry's name inside every managed database.
pub const DUPLICATE_POLICIES_TABLE: &str = "_duplicate_policies";

/// What older versions appended to a fact table's name (the name without it
/// was a Buffer table in front).
pub const LEGACY_STORAGE_SUFFIX: &str = ".mergetree";

/// Which kind of name a value is, for error messages.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameKind {
    /// An InfluxDB database.
    Database,
    /// A retention policy.
    RetentionPolicy,
    /// A measurement.
    Measurement,
    /// A tag key.
    Tag,
    /// A field key.
    Field,
}

impl fmt::Display for NameKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            NameKind::Database => "database",
            NameKind::RetentionPolicy => "retention policy",
            NameKind::Measurement => "measurement",
            NameKind::Tag => "tag key",
            NameKind::Field => "field key",
        })
    }
}

/// Percent-escapes a user-supplied name component (see the module docs).
pub fn encode(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for (i, c) in name.char_indices() {
        let escape = matches!(c, '%' | '.') || c.is_ascii_control() || (i == 0 && c == '_');
        if escape {
            out.push_str(&format!("%{:02X}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// Inverse of [`encode`]; `None` for text `encode` cannot have produced.
pub fn decode(encoded: &str) -> Option<String> {
    let bytes = encoded.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = encoded.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// Quotes an identifier for ClickHouse SQL: backticks, with `\` and `` ` ``
/// escaped by a backslash.
pub fn quote_ident(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push('`');
    for c in name.chars() {
        if c == '`' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('`');
    out
}

/// Quotes a string literal for ClickHouse SQL.
pub fn quote_literal(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('\'');
    for c in value.chars() {
        if c == '\'' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('\'');
    out
}

/// An insert's column list: the quoted names of `schema`'s columns.
pub fn column_list(schema: &arrow::datatypes::Schema) -> String {
    schema
        .fields()
        .iter()
        .map(|field| quote_ident(field.name()))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The setting that makes an insert count once per `token` in a table
/// with a deduplication window.
pub fn dedup_setting(token: &str) -> String {
    format!("insert_deduplication_token = {}", quote_literal(token))
}

/// Length of `name` once the engine turns it into a file name: bytes outside
/// `[A-Za-z0-9_]` become `%XX`.
fn file_name_len(name: &str) -> usize {
    name.bytes()
        .map(|b| {
            if b.is_ascii_alphanumeric() || b == b'_' {
                1
            } else {
                3
            }
        })
        .sum()
}

/// A name that cannot be used, and why (the library's
/// [`Error::InvalidName`](crate::Error::InvalidName)).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid {kind} name {name:?}: {reason}")]
pub struct InvalidName {
    /// What the name is for.
    pub kind: NameKind,
    /// The name as given.
    pub name: String,
    /// Why it is refused.
    pub reason: String,
}

fn invalid(kind: NameKind, name: &str, reason: impl Into<String>) -> InvalidName {
    InvalidName {
        kind,
        name: name.to_owned(),
        reason: reason.into(),
    }
}

/// Checks a database, retention policy or measurement name.
pub fn validate(kind: NameKind, name: &str) -> Result<(), InvalidName> {
    if name.is_empty() {
        return Err(invalid(kind, name, "must not be empty"));
    }
    if kind == NameKind::Database && RESERVED_DATABASES.contains(&name) {
        return Err(invalid(kind, name, "is reserved by the engine"));
    }
    if kind == NameKind::Field && RESERVED_COLUMNS.contains(&name) {
        return Err(invalid(kind, name, "is reserved for chingest's own column"));
    }
    if kind == NameKind::Tag && name == "time" {
        return Err(invalid(kind, name, "is reserved"));
    }
    let limit = match kind {
        NameKind::Measurement | NameKind::RetentionPolicy => MAX_TABLE_PART_LEN,
        NameKind::Database | NameKind::Field => MAX_FILE_NAME_LEN,
        // Tags live in the series table's values, not in file names.
        NameKind::Tag => usize::MAX,
    };
    if file_name_len(&encode(name)) > limit {
        return Err(invalid(
            kind,
            name,
            format!("is too long (at most {limit} bytes once escaped for file names)"),
        ));
    }
    Ok(())
}

/// The ClickHouse names of one InfluxDB database's tables.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct TableNames {
    /// `` `db` `` quoted.
    pub database: String,
    /// `` `db`.`m.rp` ``: the MergeTree that stores the rows.
    pub storage_table: String,
    /// `` `db`.`_series` ``.
    pub series_table: String,
    /// `` `db`.`_retention_policies` ``.
    pub retention_table: String,
    /// `` `db`.`_duplicate_policies` ``.
    pub duplicate_policies_table: String,
    /// `` `db`.`m` ``: the view with tags as columns (kept for the view
    /// retention policy only, see `IngestConfig::view_retention_policy`).
    pub view: String,
    /// The unquoted database name, as the engine's catalog reports it.
    pub database_name: String,
    /// The unquoted storage table name, as the engine's catalog reports it.
    pub storage_name: String,
}

impl TableNames {
    /// Names for (database, retention policy, measurement). The components
    /// must have passed [`validate`].
    pub fn new(database: &str, rp: &str, measurement: &str) -> Self {
        let db = encode(database);
        let table = format!("{}.{}", encode(measurement), encode(rp));
        let qdb = quote_ident(&db);
        TableNames {
            storage_table: format!("{qdb}.{}", quote_ident(&table)),
            series_table: format!("{qdb}.{}", quote_ident(SERIES_TABLE)),
            retention_table: format!("{qdb}.{}", quote_ident(RETENTION_POLICIES_TABLE)),
            duplicate_policies_table: format!("{qdb}.{}", quote_ident(DUPLICATE_POLICIES_TABLE)),
            view: format!("{qdb}.{}", quote_ident(&encode(measurement))),
            database: qdb,
            database_name: db,
            storage_name: table,
        }
    }
}

/// Recovers (retention policy, measurement) from a storage table's name, or
/// `None` when the table is not one of chingest's storage tables.
pub fn parse_storage_name(name: &str) -> Option<(String, String)> {
    let (measurement, rp) = name.split_once('.')?;
    if rp.contains('.') || measurement.starts_with('_') {
        return None;
    }
    Some((decode(rp)?, decode(measurement)?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_names_encode_to_themselves() {
        for name in [
            "cpu",
            "autogen",
            "telegraf",
            "disk-io",
            "température",
            "a`b'c\"d",
        ] {
            assert_eq!(encode(name), name);
        }
    }

    #[test]
    fn encoding_is_injective_and_reversible() {
        let hostile = [
            "a.b",
            "a%2Eb",
            "_series",
            "__x",
            "x_",
            "%",
            "..",
            "tab\there",
            "new\nline",
            "🦀.🦀",
            "`",
            "\\",
            "a\\`b",
        ];
        let mut seen = std::collections::HashSet::new();
        for name in hostile {
            let enc = encode(name);
            assert!(!enc.contains('.'), "{enc}");
            assert!(!enc.starts_with('_'), "{enc}");
            assert!(enc.chars().all(|c| !c.is_ascii_control()), "{enc}");
            assert_eq!(decode(&enc).as_deref(), Some(name));
            assert!(seen.insert(enc), "collision for {name}");
        }
    }

    #[test]
    fn storage_names_round_trip() {
        for (rp, m) in [
            ("autogen", "cpu"),
            ("a.b", "c.d"),
            ("_x", "%y"),
            ("rp", "`m`"),
        ] {
            let names = TableNames::new("db", rp, m);
            assert_eq!(
                parse_storage_name(&names.storage_name),
                Some((rp.to_owned(), m.to_owned()))
            );
        }
        assert_eq!(parse_storage_name(SERIES_TABLE), None);
        assert_eq!(parse_storage_name("cpu"), None);
        assert_eq!(parse_storage_name("cpu.autogen.mergetree"), None);
    }

    #[test]
    fn quoting_escapes_backticks_and_backslashes() {
        assert_eq!(quote_ident("a`b\\c"), "`a\\`b\\\\c`");
        assert_eq!(quote_literal("it's \\"), "'it\\'s \\\\'");
    }

    #[test]
    fn validation_rejects_reserved_empty_and_long_names() {
        assert!(validate(NameKind::Database, "").is_err());
        assert!(validate(NameKind::Database, "system").is_err());
        assert!(validate(NameKind::Field, "time").is_err());
        assert!(validate(NameKind::Field, "series_id").is_err());
        assert!(validate(NameKind::Tag, "series_id").is_ok());
        assert!(validate(NameKind::Measurement, &"m".repeat(100)).is_ok());
        assert!(validate(NameKind::Measurement, &"m".repeat(101)).is_err());
        assert!(validate(NameKind::Database, &"d".repeat(200)).is_ok());
        assert!(validate(NameKind::Database, &"d".repeat(201)).is_err());
        // Non-ASCII bytes count three times on disk.
        assert!(validate(NameKind::Field, &"é".repeat(33)).is_ok());
        assert!(validate(NameKind::Field, &"é".repeat(34)).is_err());
    }
}
