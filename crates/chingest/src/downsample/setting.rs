//! What outlives a process: the levels a statement sets
//! ([`Downsampler::set`]) and, on open, each table's levels and cuts read
//! back from the registries ([`Downsampler::load`]).

use crate::engine::query_rows;
use crate::error::{Error, Result};
use crate::layout::names::{quote_literal, TableNames};

use super::downsampler::Downsampler;
use super::moves::{check_move, no_longer_downsampled, rows_went};
use super::policy::DownsamplingSetting;
use super::registry::{read_registry, save_state, state_table, state_table_sql, OFF, STATE_TABLE};
use super::state::{rollups, Cuts, State, CLEAN};
use super::store::Store;
use crate::clock::now_ns;

impl Downsampler {
    /// Reads back, on open, the levels statements set and each table's
    /// levels and cuts (readers must not read rows before them), makes
    /// the rollups of tables with cuts (readers need their fields before a
    /// pass), and has each table's first pass drop the rollups of levels
    /// it left. Fails where the levels asked for cannot take over a
    /// table's data ([`plan_migration`]), or a database whose rows went
    /// is no longer downsampled.
    pub(crate) async fn load(&self) -> Result<()> {
        let (Some(engine), Some(catalog)) = (self.engine.upgrade(), self.catalog.upgrade()) else {
            return Ok(());
        };
        let sql = format!(
            "SELECT database FROM system.tables WHERE name = {}",
            quote_literal(STATE_TABLE)
        );
        let registered = engine.run(move |conn| query_rows(conn, &sql)).await?;
        for row in registered {
            let Some(database) = catalog.database(&row[0]) else {
                continue;
            };
            let name = &row[0];
            let names = TableNames::new(name, "", "");
            // Registries of earlier versions lack the later columns.
            engine.execute_all(state_table_sql(&names)).await?;
            let mut registry = read_registry(Store::Here(&engine), &names, None).await?;
            if let Some(set) = registry.set {
                self.policies.set.write().unwrap().insert(name.clone(), set);
            }
            for ((rp, measurement), table) in database.tables() {
                let names = TableNames::new(name, &rp, &measurement);
                let Some(state) = registry.tables.remove(&names.storage_name) else {
                    continue;
                };
                let policy = self.policies.table_policy(name, &measurement);
                let refused = |why: String| {
                    Error::Config(format!(
                        "downsampling of database {name:?}, measurement {measurement:?} in {rp:?}: {why}"
                    ))
                };
                let Some(policy) = &policy else {
                    if rows_went(Store::Here(&engine), &names, &state).await? {
                        return Err(refused(no_longer_downsampled(&state.cuts)));
                    }
                    continue;
                };
                check_move(&engine, &names, &state, (policy, policy), refused).await?;
                let levels = state.levels_or(policy);
                if state.cuts != Cuts::default() {
                    let fields = table.schema().fields.clone();
                    self.make_tables(&engine, &names, &rollups(&names, &fields, &levels), &fields)
                        .await?;
                }
                self.keep(&names, levels, state.cuts);
            }
        }
        Ok(())
    }

    /// Sets the levels of `database` ([`DownsamplingSetting`]), durably:
    /// passes move its tables to them. Refused ([`Error::Conflict`]) where
    /// they cannot take over a table's data ([`plan_migration`]), and off
    /// where rows went (they are kept only in the rollups). Off, its
    /// rollups are dropped.
    pub(crate) async fn set(&self, database: &str, setting: DownsamplingSetting) -> Result<()> {
        let (Some(engine), Some(catalog)) = (self.engine.upgrade(), self.catalog.upgrade()) else {
            return Err(Error::Closed);
        };
        let db = catalog
            .database(database)
            .ok_or_else(|| Error::DatabaseNotFound(database.to_owned()))?;
        let _pass = self.passes.lock().await;
        let wanted = match &setting {
            DownsamplingSetting::Levels(levels) => Some(levels.clone()),
            DownsamplingSetting::Off => None,
            DownsamplingSetting::Configured => self.policies.configured.get(database).cloned(),
        };
        let names = TableNames::new(database, "", "");
        engine.execute_all(state_table_sql(&names)).await?;
        let mut registry = read_registry(Store::Here(&engine), &names, None).await?;
        let current = self.policies.policy(database);
        let mut tables = Vec::new();
        for ((rp, measurement), _) in db.tables() {
            // Its levels are its own, not the database's.
            if self
                .policies
                .measurements
                .get(database)
                .is_some_and(|m| m.contains_key(&measurement))
            {
                continue;
            }
            let names = TableNames::new(database, &rp, &measurement);
            let state = registry.tables.remove(&names.storage_name);
            tables.push(names.clone());
            let Some(state) = state else {
                continue;
            };
            let refused = |why: String| {
                Error::Conflict(format!("measurement {measurement:?} in {rp:?}: {why}"))
            };
            match (&wanted, &current) {
                (None, _) if rows_went(Store::Here(&engine), &names, &state).await? => {
                    return Err(refused(no_longer_downsampled(&state.cuts)));
                }
                (Some(wanted), Some(current)) => {
                    check_move(&engine, &names, &state, (current, wanted), refused).await?;
                }
                _ => {}
            }
        }
        let stored: Vec<String> = match &setting {
            DownsamplingSetting::Levels(levels) => {
                levels.levels().iter().map(|l| l.to_seconds()).collect()
            }
            DownsamplingSetting::Off => vec![OFF.to_owned()],
            DownsamplingSetting::Configured => Vec::new(),
        };
        let stored: Vec<String> = stored.iter().map(|s| quote_literal(s)).collect();
        engine
            .execute(format!(
                "INSERT INTO {} (table, seen_block, dirty_from, dirty_to, version, policy) \
                 VALUES ('', 0, {CLEAN}, {}, {}, [{}])",
                state_table(&names),
                i64::MIN,
                now_ns(),
                stored.join(", ")
            ))
            .await?;
        {
            let mut set = self.policies.set.write().unwrap();
            match setting {
                DownsamplingSetting::Configured => set.remove(database),
                _ => set.insert(database.to_owned(), wanted.clone()),
            };
        }
        if wanted.is_none() {
            // Its rollups go; set again, they are built anew.
            for names in tables {
                self.drop_retired(Store::Here(&engine), &names, &[]).await?;
                save_state(Store::Here(&engine), &names, &State::default()).await?;
                let table = &names.storage_table;
                self.readers.lock().unwrap().made.remove(table);
                self.readers.lock().unwrap().kept.remove(table);
                self.book.lock().unwrap().removed.remove(table);
                let mut readers = self.readers.lock().unwrap();
                let unsettled = &mut readers.unsettled;
                unsettled.known.remove(table);
                unsettled.pending.remove(table);
            }
        }
        self.unsettle(database);
        Ok(())
    }
}
