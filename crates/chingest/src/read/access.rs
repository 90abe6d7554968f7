//! What a caller may do, as plain data a front end derives from its
//! credentials ([`Access`]: read, write, and the databases of its
//! [`ReadScope`]), and what it lacks when refused ([`Denied`]). Every front
//! end and query language checks a request against the same rules.

use crate::read::sandbox::ReadScope;

/// What a caller may do: plain data its front end derives from its
/// credentials.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Access {
    /// It may read, in the databases of `scope`.
    pub read: bool,
    /// It may write (and create databases and policies, and delete), in
    /// the databases of `scope`.
    pub write: bool,
    /// The databases it may use.
    pub scope: ReadScope,
}

impl Access {
    /// Everything, everywhere.
    pub const ALL: Access = Access {
        read: true,
        write: true,
        scope: ReadScope::All,
    };

    /// Whether `db` is one of its databases.
    pub fn covers(&self, db: &str) -> bool {
        match &self.scope {
            ReadScope::All => true,
            ReadScope::Databases(list) => list.iter().any(|d| d == db),
        }
    }

    /// It may read (in its databases).
    pub fn require_read(&self) -> Result<(), Denied> {
        match self.read {
            true => Ok(()),
            false => Err(Denied::Read),
        }
    }

    /// It may read `db`.
    pub fn require_read_of(&self, db: &str) -> Result<(), Denied> {
        self.require_read()?;
        self.require_database(db)
    }

    /// It may write `db` (and create it, and its retention policies).
    pub fn require_write(&self, db: &str) -> Result<(), Denied> {
        if !self.write {
            return Err(Denied::Write);
        }
        self.require_database(db)
    }

    fn require_database(&self, db: &str) -> Result<(), Denied> {
        match self.covers(db) {
            true => Ok(()),
            false => Err(Denied::Database(db.to_owned())),
        }
    }
}

/// What the caller lacks; the front end says who "the caller" is (`this
/// token may not read`).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Denied {
    /// It may not read.
    #[error("may not read")]
    Read,
    /// It may not write (nor create databases and policies, nor delete).
    #[error("may not write")]
    Write,
    /// The database is not one of its own.
    #[error("may not use database {0:?}")]
    Database(String),
}
