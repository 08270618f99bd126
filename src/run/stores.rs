//! Store lifecycles for every run, in one place: open, name, suffix, and drop what was scratch.
//!
//! A run asks for one empty store per job ([`Slot`]): a sweep point's replicate, a scenario's
//! timeline. `--store` names where they go (`sqlite:PATH`, a path, `postgres://…[?schema=NAME]`);
//! without it they are scratch SQLite files in a temporary directory. A PostgreSQL URL without
//! a schema gets scratch schemas, dropped at the end; a named file or schema is kept. Every job
//! after the first gets a suffix, so two jobs never share a store. Reports name the store with
//! [`Stores::name`], which never contains a temporary path or a random schema name, so the same
//! inputs give the same JSON.

use crate::store::{
    PgOptions, PgPool, RedisStore, SqliteOptions, SqliteStore, Store, StoreError, StorePool,
    StoreSpec, Sweeper, Synchronous,
};
use anyhow::Context as _;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

/// Which job a store is for. `Slot::default()` is the first job: it keeps the name given.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Slot {
    /// The scenario, in a run of several (`report`).
    pub scenario: usize,
    /// The sweep point (retention).
    pub point: usize,
    pub replicate: u32,
    /// A scripted timeline rather than a simulation.
    pub timeline: bool,
}

impl Slot {
    /// `""` for the first job, else e.g. `_p1_r0`, `_s2_p0_r0`, `_s3_timeline`.
    fn suffix(&self) -> String {
        if *self == Slot::default() {
            return String::new();
        }
        let scenario = if self.scenario > 0 {
            format!("_s{}", self.scenario)
        } else {
            String::new()
        };
        if self.timeline {
            format!("{scenario}_timeline")
        } else {
            format!("{scenario}_p{}_r{}", self.point, self.replicate)
        }
    }
}

/// How the stores of a run are made.
#[derive(Debug, Clone, Copy)]
pub struct StoreOptions {
    /// What scratch schemas are called after `idemcalc_`, e.g. `sim`.
    pub purpose: &'static str,
    /// `Off` for simulations, which measure sizes and counts, not durability.
    pub synchronous: Synchronous,
    /// PostgreSQL connections per store.
    pub pool_size: u32,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            purpose: "run",
            synchronous: Synchronous::Off,
            pool_size: 1,
        }
    }
}

/// Where a run's stores go, and what to clean up afterwards.
pub struct Stores {
    spec: StoreSpec,
    options: StoreOptions,
    /// Holds the scratch SQLite files until the run ends.
    _tmp: Option<tempfile::TempDir>,
    name: String,
    /// Scratch PostgreSQL schemas and Redis prefixes to drop at the end.
    scratch: Mutex<Vec<Scratch>>,
}

/// What a run made and must remove.
enum Scratch {
    Schema(PgPool),
    /// A Redis prefix, by URL and prefix.
    Prefix(String, String),
}

impl Stores {
    /// From `--store SPEC`, or the `--db FILE` shorthand, or neither (scratch SQLite files).
    pub fn new(
        store: Option<&str>,
        db: Option<&Path>,
        options: StoreOptions,
    ) -> anyhow::Result<Self> {
        let (spec, tmp, name) = match (store, db) {
            (Some(text), _) => {
                let spec = StoreSpec::parse(text)?;
                let name = match &spec {
                    StoreSpec::Postgres { schema: None, .. } => {
                        format!("{} (scratch schemas)", spec.describe())
                    }
                    StoreSpec::Redis { prefix: None, .. } => {
                        format!("{} (scratch prefixes)", spec.describe())
                    }
                    _ => spec.describe(),
                };
                // A Redis store keeps its labels in SQLite files, which live here.
                let tmp = match spec {
                    StoreSpec::Redis { .. } => {
                        Some(tempfile::tempdir().context("cannot create a temporary directory")?)
                    }
                    _ => None,
                };
                (spec, tmp, name)
            }
            (None, Some(path)) => {
                let spec = StoreSpec::Sqlite(path.to_path_buf());
                let name = spec.describe();
                (spec, None, name)
            }
            (None, None) => {
                let tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
                let spec = StoreSpec::Sqlite(tmp.path().join("store.sqlite"));
                (spec, Some(tmp), "sqlite (temporary file)".to_string())
            }
        };
        Ok(Stores {
            spec,
            options,
            _tmp: tmp,
            name,
            scratch: Mutex::new(Vec::new()),
        })
    }

    /// Scratch SQLite files only: what a run without `--store` uses.
    pub fn scratch(options: StoreOptions) -> anyhow::Result<Self> {
        Stores::new(None, None, options)
    }

    /// `sqlite`, `postgres` or `redis`.
    pub fn kind(&self) -> &'static str {
        match self.spec {
            StoreSpec::Sqlite(_) => "sqlite",
            StoreSpec::Postgres { .. } => "postgres",
            StoreSpec::Redis { .. } => "redis",
        }
    }

    /// The stores as reports show them: stable across runs.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Opens the store of `slot`. It must be empty: a run never replays into an existing store
    /// (the simulator and the timeline both check, and refuse with the store's name).
    pub fn open(&self, slot: Slot) -> Result<Box<dyn Store>, StoreError> {
        self.open_with(slot, Sweeper::Delete)
    }

    /// [`Stores::open`] with a sweeper other than the seed's batched `DELETE` (`--sweeper`),
    /// which only PostgreSQL offers.
    pub fn open_with(&self, slot: Slot, sweeper: Sweeper) -> Result<Box<dyn Store>, StoreError> {
        match self.pool_with(slot, sweeper)? {
            // `pool` opened the file once already; a second connection costs nothing here.
            pool @ (StorePool::Sqlite { .. } | StorePool::Redis { .. }) => pool.get(),
            StorePool::Postgres(pool) => Ok(Box::new(pool.get()?)),
        }
    }

    /// The store of `slot` as a pool, one connection per worker (`StoreOptions::pool_size` for
    /// PostgreSQL): what a multi-threaded run such as the bench needs.
    pub fn pool(&self, slot: Slot) -> Result<StorePool, StoreError> {
        self.pool_with(slot, Sweeper::Delete)
    }

    fn pool_with(&self, slot: Slot, sweeper: Sweeper) -> Result<StorePool, StoreError> {
        let suffix = slot.suffix();
        if sweeper.partitioned() && !matches!(self.spec, StoreSpec::Postgres { .. }) {
            return Err(StoreError::Spec {
                spec: self.name.clone(),
                message: "--sweeper partitions needs a PostgreSQL store (--store postgres://…); SQLite and Redis sweep by delete".into(),
            });
        }
        match &self.spec {
            StoreSpec::Sqlite(path) => {
                let path = PathBuf::from(format!("{}{suffix}", path.display()));
                let options = SqliteOptions {
                    synchronous: self.options.synchronous,
                    ..SqliteOptions::default()
                };
                // Open once now so a bad path fails here, naming it.
                SqliteStore::open(&path, &options)?;
                Ok(StorePool::Sqlite { path, options })
            }
            StoreSpec::Postgres { url, schema } => {
                let scratch = schema.is_none();
                let schema = match schema {
                    Some(s) => format!("{s}{suffix}"),
                    None => format!(
                        "idemcalc_{}_{}{suffix}",
                        self.options.purpose,
                        &uuid::Uuid::new_v4().simple().to_string()[..12]
                    ),
                };
                let options = PgOptions {
                    schema,
                    pool_size: self.options.pool_size,
                    synchronous: self.options.synchronous,
                    sweeper,
                    ..PgOptions::default()
                };
                let pool = PgPool::connect(url, &options)?;
                if scratch {
                    self.scratch
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(Scratch::Schema(pool.clone()));
                }
                Ok(StorePool::Postgres(pool))
            }
            StoreSpec::Redis { url, prefix } => {
                let scratch = prefix.is_none();
                let prefix = match prefix {
                    Some(p) => format!("{p}{suffix}"),
                    None => format!(
                        "idemcalc_{}_{}{suffix}",
                        self.options.purpose,
                        &uuid::Uuid::new_v4().simple().to_string()[..12]
                    ),
                };
                let dir = self
                    ._tmp
                    .as_ref()
                    .map_or_else(std::env::temp_dir, |t| t.path().to_path_buf());
                let labels_path = dir.join(format!("{prefix}-labels.sqlite"));
                RedisStore::open(url, &prefix, &labels_path)?;
                if scratch {
                    self.scratch
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(Scratch::Prefix(url.clone(), prefix.clone()));
                }
                Ok(StorePool::Redis {
                    url: url.clone(),
                    prefix,
                    labels_path,
                })
            }
        }
    }

    /// Drops the scratch schemas and Redis prefixes; scratch SQLite files go with the temporary
    /// directory.
    pub fn finish(&self) -> Result<(), StoreError> {
        let scratch: Vec<Scratch> = self
            .scratch
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect();
        let mut first_error = None;
        for s in scratch {
            let done = match s {
                Scratch::Schema(pool) => pool.drop_schema(),
                Scratch::Prefix(url, prefix) => {
                    crate::store::redis::drop_prefix(&url, &prefix).map(|_| ())
                }
            };
            if let Err(e) = done {
                first_error.get_or_insert(e);
            }
        }
        first_error.map_or(Ok(()), Err)
    }
}

impl Drop for Stores {
    /// A run that failed half-way still drops its scratch schemas (errors are moot then).
    fn drop(&mut self) {
        let _ = self.finish();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_slot_keeps_the_name_and_others_get_a_suffix() {
        assert_eq!(Slot::default().suffix(), "");
        let s = |scenario, point, replicate, timeline| Slot {
            scenario,
            point,
            replicate,
            timeline,
        };
        assert_eq!(s(0, 1, 0, false).suffix(), "_p1_r0");
        assert_eq!(s(0, 0, 2, false).suffix(), "_p0_r2");
        assert_eq!(s(2, 0, 0, false).suffix(), "_s2_p0_r0");
        assert_eq!(s(3, 0, 0, true).suffix(), "_s3_timeline");
    }

    #[test]
    fn scratch_sqlite_stores_are_named_stably_and_kept_apart() {
        let stores = Stores::scratch(StoreOptions::default()).unwrap();
        assert_eq!(stores.name(), "sqlite (temporary file)");
        let mut a = stores.open(Slot::default()).unwrap();
        let mut b = stores
            .open(Slot {
                replicate: 1,
                ..Slot::default()
            })
            .unwrap();
        assert_ne!(a.describe(), b.describe());
        assert_eq!(a.count_keys().unwrap(), 0);
        assert_eq!(b.count_keys().unwrap(), 0);
    }
}
