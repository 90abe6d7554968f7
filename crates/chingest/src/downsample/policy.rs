//! Which databases and tables are downsampled, at which levels: the
//! configuration file's, overridden by what statements set.

use std::collections::BTreeMap;
use std::sync::RwLock;

use crate::config::Downsampling;
use crate::layout::names::TableNames;

/// How `SET DOWNSAMPLING` sets a database's levels
/// ([`crate::Ingestor::set_downsampling`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DownsamplingSetting {
    /// These levels, whatever the configuration file says.
    Levels(Downsampling),
    /// Not downsampled, whatever the configuration file says.
    Off,
    /// The configuration file's levels, if it names the database.
    Configured,
}

/// Which tables are downsampled, at which levels (asked on every insert
/// and read).
#[derive(Debug)]
pub(crate) struct Policies {
    /// The configuration file's levels, by database.
    pub(super) configured: BTreeMap<String, Downsampling>,
    /// The file's levels of single measurements (`None`: kept whole), by
    /// database and measurement: they override their database's.
    pub(super) measurements: BTreeMap<String, BTreeMap<String, Option<Downsampling>>>,
    /// The levels statements set (recorded in each database's registry,
    /// they outlive the file's); `None`: not downsampled.
    pub(super) set: RwLock<BTreeMap<String, Option<Downsampling>>>,
}

impl Policies {
    /// The levels of `database`, if it is downsampled: a statement's, else
    /// the configuration file's.
    pub(crate) fn policy(&self, database: &str) -> Option<Downsampling> {
        match self.set.read().unwrap().get(database) {
            Some(set) => set.clone(),
            None => self.configured.get(database).cloned(),
        }
    }

    /// The levels of `measurement`'s tables in `database`, if they are
    /// downsampled: the file's for the measurement, else the database's.
    pub(super) fn table_policy(&self, database: &str, measurement: &str) -> Option<Downsampling> {
        match self
            .measurements
            .get(database)
            .and_then(|m| m.get(measurement))
        {
            Some(own) => own.clone(),
            None => self.policy(database),
        }
    }

    /// [`table_policy`](Self::table_policy) of the fact table `names`.
    pub(super) fn policy_of(&self, names: &TableNames) -> Option<Downsampling> {
        let (measurement, _) = names.storage_name.split_once('.')?;
        self.table_policy(
            &names.database_name,
            &crate::layout::names::decode(measurement)?,
        )
    }

    /// Whether any table of `database` is downsampled (asked on every
    /// insert and read).
    pub(crate) fn is_downsampled(&self, database: &str) -> bool {
        let own = match self.set.read().unwrap().get(database) {
            Some(set) => set.is_some(),
            None => self.configured.contains_key(database),
        };
        own || self
            .measurements
            .get(database)
            .is_some_and(|m| m.values().any(Option::is_some))
    }

    /// Whether a statement set the levels of `database`.
    pub(crate) fn is_set(&self, database: &str) -> bool {
        self.set.read().unwrap().contains_key(database)
    }

    /// Every database with a downsampled table.
    pub(super) fn downsampled(&self) -> Vec<String> {
        let set = self.set.read().unwrap();
        let mut all: Vec<String> = self
            .configured
            .keys()
            .chain(set.keys())
            .chain(self.measurements.keys())
            .cloned()
            .collect();
        drop(set);
        all.sort();
        all.dedup();
        all.retain(|name| self.is_downsampled(name));
        all
    }
}
