//! Store lifecycles for every run, in one place: open, name, suffix, and drop what was scratch.
//!
//! A run asks for one store per job ([`Slot`]): a sweep point's replicate, a scenario's
//! timeline, a bench side. `--store` names where they go (`sqlite:PATH`, a path,
//! `postgres://…[?schema=NAME]`, `redis://…[?prefix=NAME]`); without it they are scratch SQLite
//! stores, in memory for the simulator and the timelines ([`StoreOptions::scratch_in_memory`]:
//! no figure depends on the disk, and a file store's system calls were most of a report's run
//! time) and files in a temporary directory for the bench, which measures the disk. A
//! PostgreSQL URL without a schema gets scratch schemas and a
//! Redis URL without a prefix scratch prefixes, dropped at the end; a named file, schema or
//! prefix is kept. Every job after the first gets a suffix (before a file's extension), so two
//! jobs never share a store. Reports name the store with [`Stores::name`], which never contains
//! a temporary path or a random schema name, so the same inputs give the same JSON.

use super::postgres::{check_schema_name, explain_connect, pg_message, redact_url};
use super::{
    PgOptions, PgPool, RedisStore, SqliteOptions, SqliteStore, Store, StoreError, StorePool,
    StoreSpec, Sweeper, Synchronous,
};
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
    /// A second store of the same job, e.g. the bench's `baseline` beside its engine's store.
    pub part: Option<&'static str>,
}

impl Slot {
    /// The store named `part` beside the first job's (`_baseline`, `_pgbench`).
    pub fn part(part: &'static str) -> Self {
        Slot {
            part: Some(part),
            ..Slot::default()
        }
    }

    /// `""` for the first job, else e.g. `_p1_r0`, `_s2_p0_r0`, `_s3_timeline`, `_baseline`.
    fn suffix(&self) -> String {
        let part = self.part.map(|p| format!("_{p}")).unwrap_or_default();
        let job = Slot {
            part: None,
            ..*self
        };
        if job == Slot::default() {
            return part;
        }
        let scenario = if self.scenario > 0 {
            format!("_s{}", self.scenario)
        } else {
            String::new()
        };
        if self.timeline {
            format!("{scenario}_timeline{part}")
        } else {
            format!("{scenario}_p{}_r{}{part}", self.point, self.replicate)
        }
    }
}

/// `store.sqlite` with `_p1_r0` is `store_p1_r0.sqlite`: the suffix goes before the extension,
/// so every job's file still opens as what it is.
fn suffixed(path: &Path, suffix: &str) -> PathBuf {
    if suffix.is_empty() {
        return path.to_path_buf();
    }
    let stem = path.file_stem().unwrap_or_default().to_string_lossy();
    match path.extension() {
        Some(ext) => path.with_file_name(format!("{stem}{suffix}.{}", ext.to_string_lossy())),
        None => path.with_file_name(format!("{stem}{suffix}")),
    }
}

/// How the stores of a run are made.
#[derive(Debug, Clone, Copy)]
pub struct StoreOptions {
    /// What scratch schemas and prefixes are called after `idemcalc_`, e.g. `sim`.
    pub purpose: &'static str,
    /// `Off` for simulations, which measure sizes and counts, not durability.
    pub synchronous: Synchronous,
    /// PostgreSQL connections per store.
    pub pool_size: u32,
    /// Without `--store`, each job's SQLite store lives in memory
    /// ([`SqliteStore::open_memory`]: the file's page size and layout, so the same figures to
    /// the byte, without a system call per transaction) rather than in a temporary file. The
    /// simulator's and the timelines' default; the bench, which measures the disk, says false.
    /// A named store is always the durable file, schema or prefix it names.
    pub scratch_in_memory: bool,
}

impl Default for StoreOptions {
    fn default() -> Self {
        StoreOptions {
            purpose: "run",
            synchronous: Synchronous::Off,
            pool_size: 1,
            scratch_in_memory: true,
        }
    }
}

/// Where a run's stores go, and what to clean up afterwards.
pub struct Stores {
    spec: StoreSpec,
    options: StoreOptions,
    /// Holds the scratch SQLite files (and scratch Redis prefixes' labels) until the run ends.
    tmp: Option<tempfile::TempDir>,
    /// Scratch SQLite stores in memory, one per job: `spec` names no file then.
    memory: bool,
    name: String,
    /// `idemcalc_PURPOSE_ID`: every scratch schema or prefix of the run starts with it, so one
    /// run's stores sort together and a leftover names the run that left it.
    scratch_base: String,
    /// Scratch PostgreSQL schemas and Redis prefixes to drop at the end.
    scratch: Mutex<Vec<Scratch>>,
    /// `serve --replica NAME`: the store is held shared, as one replica of several.
    replica: Option<String>,
}

/// What a run made and must remove.
enum Scratch {
    Schema(PgPool),
    /// A Redis prefix, by URL and prefix.
    Prefix(String, String),
}

fn tempdir() -> Result<tempfile::TempDir, StoreError> {
    tempfile::tempdir().map_err(|e| StoreError::Open {
        location: std::env::temp_dir().display().to_string(),
        message: format!("cannot create a temporary directory: {e}"),
    })
}

/// Fails at once, naming the store, when its server cannot be reached: a run asks before it
/// simulates anything, not when its first job opens a store (a report would wait once per
/// job, and hold its work until then).
pub fn reachable(spec: &StoreSpec) -> Result<(), StoreError> {
    let fail = |message: String| StoreError::Open {
        location: spec.describe(),
        message,
    };
    match spec {
        StoreSpec::Sqlite(_) => Ok(()),
        StoreSpec::Postgres { url, .. } => {
            let config: postgres::Config = url
                .parse()
                .map_err(|e: postgres::Error| fail(pg_message(&e)))?;
            super::pg_connect(&config)
                .map(drop)
                .map_err(|e| fail(connect_message(&e, &config)))
        }
        StoreSpec::Redis { url, .. } => super::redis::ping(url),
    }
}

/// A failed connection as docs/postgres.md shows it: what to check (is the server running,
/// `createdb …`, the password), not the driver's bare text.
fn connect_message(e: &super::PgConnectError, config: &postgres::Config) -> String {
    match e {
        super::PgConnectError::Failed(e) => explain_connect(e, config),
        silent => silent.message(),
    }
}

impl Stores {
    /// From `--store SPEC`, or the `--db FILE` shorthand, or neither (scratch SQLite stores, in
    /// memory or in temporary files as `options.scratch_in_memory` says).
    pub fn new(
        store: Option<&str>,
        db: Option<&Path>,
        options: StoreOptions,
    ) -> Result<Self, StoreError> {
        let memory = store.is_none() && db.is_none() && options.scratch_in_memory;
        let (spec, tmp, name) = match (store, db) {
            (Some(text), _) => {
                let spec = StoreSpec::parse(text)?;
                reachable(&spec)?;
                let (name, tmp) = match &spec {
                    StoreSpec::Postgres { schema: None, .. } => {
                        (format!("{} (scratch schemas)", spec.describe()), None)
                    }
                    // A scratch prefix's labels files go with the run; a named one's are kept
                    // in the system's temporary directory, where the same prefix finds them.
                    StoreSpec::Redis { prefix: None, .. } => (
                        format!("{} (scratch prefixes)", spec.describe()),
                        Some(tempdir()?),
                    ),
                    _ => (spec.describe(), None),
                };
                (spec, tmp, name)
            }
            (None, Some(path)) => {
                let spec = StoreSpec::Sqlite(path.to_path_buf());
                let name = spec.describe();
                (spec, None, name)
            }
            (None, None) if memory => (
                // Never opened as a file: `open_with` opens each job's store in memory.
                StoreSpec::Sqlite(PathBuf::from(":memory:")),
                None,
                super::sqlite::MEMORY_NAME.to_string(),
            ),
            (None, None) => {
                let tmp = tempdir()?;
                let spec = StoreSpec::Sqlite(tmp.path().join("store.sqlite"));
                (spec, Some(tmp), "sqlite (temporary file)".to_string())
            }
        };
        Ok(Stores {
            spec,
            options,
            tmp,
            memory,
            name,
            scratch_base: format!(
                "idemcalc_{}_{}",
                options.purpose,
                &uuid::Uuid::new_v4().simple().to_string()[..12]
            ),
            scratch: Mutex::new(Vec::new()),
            replica: None,
        })
    }

    /// Opens the store from now on as replica `name` of a service that runs as several
    /// processes on it (`serve --replica`): held shared, not alone (see
    /// `exclusive::hold_pg_replica`). Only a named PostgreSQL schema can be: a SQLite file
    /// lives on one host, where one server with one writer is already all its write lock lets
    /// through, and a scratch schema is one process's own, dropped when it stops.
    pub fn as_replica(&mut self, name: &str) -> Result<(), StoreError> {
        let refuse = |message: &str| {
            Err(StoreError::Spec {
                spec: self.name.clone(),
                message: message.to_string(),
            })
        };
        match &self.spec {
            StoreSpec::Postgres {
                schema: Some(_), ..
            } => {}
            StoreSpec::Postgres { schema: None, .. } => {
                return refuse(
                    "--replica needs a named schema (?schema=NAME) that every replica names: a scratch schema is one process's own, dropped when it stops",
                );
            }
            StoreSpec::Sqlite(_) => {
                return refuse(
                    "--replica needs PostgreSQL: SQLite stays one server, since a file store lives on one host and one writer already gets everything its write lock lets through (a second process would only queue on that lock)",
                );
            }
            StoreSpec::Redis { .. } => {
                return refuse(
                    "--replica needs PostgreSQL: a Redis store keeps its labels in a SQLite file beside the process, which replicas on other hosts cannot share",
                );
            }
        }
        self.replica = Some(name.to_string());
        Ok(())
    }

    /// Scratch SQLite stores only: what a run without `--store` uses.
    pub fn scratch(options: StoreOptions) -> Result<Self, StoreError> {
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

    /// What `--store` named (the server's URL for `pgbench`, say).
    pub fn spec(&self) -> &StoreSpec {
        &self.spec
    }

    /// True when the stores outlive the run: a named file, schema or prefix.
    pub fn kept(&self) -> bool {
        match &self.spec {
            StoreSpec::Sqlite(_) => self.tmp.is_none() && !self.memory,
            StoreSpec::Postgres { schema, .. } => schema.is_some(),
            StoreSpec::Redis { prefix, .. } => prefix.is_some(),
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
        if self.memory {
            self.check_sweeper(sweeper)?;
            // A new database per call: every job's store is its own, as the files' suffixes
            // keep them apart, and is freed when the job drops it.
            return Ok(Box::new(SqliteStore::open_memory()?));
        }
        self.pool_with(slot, sweeper)?.get()
    }

    /// Refuses a sweeper the store cannot run.
    fn check_sweeper(&self, sweeper: Sweeper) -> Result<(), StoreError> {
        if sweeper.partitioned() && !matches!(self.spec, StoreSpec::Postgres { .. }) {
            return Err(StoreError::Spec {
                spec: self.name.clone(),
                message: "--sweeper partitions needs a PostgreSQL store (--store postgres://…); SQLite and Redis sweep by delete".into(),
            });
        }
        Ok(())
    }

    /// The store of `slot` as a pool, one connection per worker (`StoreOptions::pool_size` for
    /// PostgreSQL): what a multi-threaded run such as the bench needs. Scratch stores in memory
    /// have one connection each and no pool: runs that need one (the bench) set
    /// `StoreOptions::scratch_in_memory` to false.
    pub fn pool_with(&self, slot: Slot, sweeper: Sweeper) -> Result<StorePool, StoreError> {
        self.check_sweeper(sweeper)?;
        if self.memory {
            return Err(StoreError::Spec {
                spec: self.name.clone(),
                message: "a scratch store in memory has one connection, not a pool; open it with Stores::open, or use scratch files (StoreOptions::scratch_in_memory false)".into(),
            });
        }
        let sqlite = SqliteOptions {
            synchronous: self.options.synchronous,
            ..SqliteOptions::default()
        };
        match &self.spec {
            StoreSpec::Sqlite(path) => {
                let path = suffixed(path, &slot.suffix());
                // Open once now so a bad path fails here, naming it.
                SqliteStore::open(&path, &sqlite)?;
                Ok(StorePool::Sqlite {
                    path,
                    options: sqlite,
                })
            }
            StoreSpec::Postgres { url, schema } => {
                let options = PgOptions {
                    schema: self.schema_or_prefix(schema.as_deref(), slot),
                    pool_size: self.options.pool_size,
                    synchronous: self.options.synchronous,
                    sweeper,
                    replica: self.replica.clone(),
                    ..PgOptions::default()
                };
                let pool = PgPool::connect(url, &options)?;
                if schema.is_none() {
                    self.remember(Scratch::Schema(pool.clone()));
                }
                Ok(StorePool::Postgres(pool))
            }
            StoreSpec::Redis { url, prefix } => {
                let name = self.schema_or_prefix(prefix.as_deref(), slot);
                let labels_path = self.labels_path(&name)?;
                let first = RedisStore::open_with(url, &name, &labels_path, &sqlite)?;
                if prefix.is_none() {
                    self.remember(Scratch::Prefix(url.clone(), name.clone()));
                }
                Ok(StorePool::Redis {
                    url: url.clone(),
                    prefix: name,
                    labels_path,
                    labels: sqlite,
                    _hold: first.hold(),
                })
            }
        }
    }

    /// [`Stores::pool_with`] for the stores of `slots`, which this run must create: if any
    /// exists already (a file, a schema, a prefix holding keys, a labels file) none is opened
    /// and the first is refused, naming it, because a run that fills its own stores (the bench)
    /// would measure and count what was there. A store another process is using is refused
    /// with that process's pid first.
    pub fn create(&self, slots: &[Slot], sweeper: Sweeper) -> Result<Vec<StorePool>, StoreError> {
        // Held until the pools below hold their stores themselves.
        let mut held = Vec::new();
        if self.memory {
            // Refused by `pool_with`, before anything is checked or held.
            return slots.iter().map(|&s| self.pool_with(s, sweeper)).collect();
        }
        for &slot in slots {
            held.push(self.refuse_existing(slot)?);
        }
        slots.iter().map(|&s| self.pool_with(s, sweeper)).collect()
    }

    /// Removes the SQLite files a previous run of the same `slots` left, so that rerunning an
    /// identical bench replaces its own stores as hyperfine and criterion reruns do: only when
    /// every slot's file is there (the store and its `_baseline` sibling: a lone file may be
    /// someone's store, and is refused by [`Stores::create`] as before), each is an idemcalc
    /// store, and no process holds any of them. Returns the files removed.
    pub fn replace_own_sqlite(&self, slots: &[Slot]) -> Result<Vec<PathBuf>, StoreError> {
        let StoreSpec::Sqlite(path) = &self.spec else {
            return Ok(Vec::new());
        };
        let paths: Vec<PathBuf> = slots.iter().map(|s| suffixed(path, &s.suffix())).collect();
        let ours = |p: &PathBuf| {
            rusqlite::Connection::open_with_flags(p, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
                .and_then(|c| {
                    c.query_row(
                        "SELECT count(*) FROM sqlite_master WHERE name IN ('idempotency_keys', 'labels')",
                        [],
                        |r| r.get::<_, i64>(0),
                    )
                })
                .is_ok_and(|n| n == 2)
        };
        if self.memory || slots.len() < 2 || !paths.iter().all(|p| p.is_file() && ours(p)) {
            return Ok(Vec::new());
        }
        // Held while the files go, so a run that opens one meanwhile is refused, not emptied.
        let _held = paths
            .iter()
            .map(|p| super::exclusive::hold_sqlite(p))
            .collect::<Result<Vec<_>, _>>()?;
        for p in &paths {
            for suffix in ["", "-wal", "-shm"] {
                let file = PathBuf::from(format!("{}{suffix}", p.display()));
                match std::fs::remove_file(&file) {
                    Ok(()) => {}
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                    Err(e) => {
                        return Err(StoreError::Open {
                            location: file.display().to_string(),
                            message: format!("cannot replace it: {e}"),
                        });
                    }
                }
            }
        }
        Ok(paths)
    }

    fn refuse_existing(
        &self,
        slot: Slot,
    ) -> Result<Option<std::sync::Arc<super::exclusive::Held>>, StoreError> {
        let exists = |location: String, remedy: String| StoreError::Open {
            location,
            message: format!("exists already; this run fills new stores every time, so {remedy}"),
        };
        match &self.spec {
            StoreSpec::Sqlite(path) => {
                let path = suffixed(path, &slot.suffix());
                if path.exists() {
                    // Another run's file says whose it is, rather than only that it exists.
                    super::exclusive::hold_sqlite(&path)?;
                    return Err(exists(
                        path.display().to_string(),
                        "remove it or name another file".into(),
                    ));
                }
                Ok(None)
            }
            StoreSpec::Postgres { url, schema } => {
                let name = self.schema_or_prefix(schema.as_deref(), slot);
                check_schema_name(&name).map_err(|message| StoreError::Spec {
                    spec: self.name.clone(),
                    message,
                })?;
                let location = format!("{} (schema {name})", redact_url(url));
                let open_err = |e: postgres::Error| StoreError::Open {
                    location: location.clone(),
                    message: pg_message(&e),
                };
                let config: postgres::Config = url.parse().map_err(open_err)?;
                let held = super::exclusive::hold_pg_schema(&config, &name, &location)?;
                let mut client = super::pg_connect(&config).map_err(|e| StoreError::Open {
                    location: location.clone(),
                    message: connect_message(&e, &config),
                })?;
                let found = client
                    .query_opt("SELECT 1 FROM pg_namespace WHERE nspname = $1", &[&name])
                    .map_err(open_err)?;
                if found.is_some() {
                    return Err(exists(
                        location,
                        format!(
                            "drop it (DROP SCHEMA {name} CASCADE) or name another with ?schema=NAME"
                        ),
                    ));
                }
                Ok(Some(held))
            }
            StoreSpec::Redis { url, prefix } => {
                let name = self.schema_or_prefix(prefix.as_deref(), slot);
                let location = super::redis::location(url, &name);
                let held = super::redis::hold_prefix(url, &name, &location)?;
                if super::redis::holds_keys(url, &name)? {
                    return Err(exists(
                        location,
                        "delete its keys or name another with ?prefix=NAME".into(),
                    ));
                }
                let labels = self.labels_path(&name)?;
                if labels.exists() {
                    return Err(exists(
                        labels.display().to_string(),
                        "remove it or name another prefix".into(),
                    ));
                }
                Ok(Some(held))
            }
        }
    }

    /// The schema or prefix of `slot`: the named one with the slot's suffix, else a scratch name.
    fn schema_or_prefix(&self, named: Option<&str>, slot: Slot) -> String {
        format!("{}{}", named.unwrap_or(&self.scratch_base), slot.suffix())
    }

    /// Where a Redis prefix's labels go: a scratch prefix's with the run's temporary directory,
    /// a named one's where the same prefix finds them again.
    fn labels_path(&self, prefix: &str) -> Result<PathBuf, StoreError> {
        match &self.tmp {
            Some(t) => Ok(t.path().join(format!("{prefix}-labels.sqlite"))),
            None => super::redis::named_labels_path(prefix),
        }
    }

    fn remember(&self, scratch: Scratch) {
        self.scratch
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(scratch);
    }

    /// Drops the scratch schemas and Redis prefixes; scratch SQLite files go with the temporary
    /// directory, and stores in memory with their jobs. Every connection to them must be back
    /// by now.
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
                    super::redis::drop_prefix(&url, &prefix).map(|_| ())
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
    /// A run that failed half-way still drops its scratch schemas and prefixes.
    fn drop(&mut self) {
        if let Err(e) = self.finish() {
            eprintln!("warning: could not drop a scratch store: {e}");
        }
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
            part: None,
        };
        assert_eq!(s(0, 1, 0, false).suffix(), "_p1_r0");
        assert_eq!(s(0, 0, 2, false).suffix(), "_p0_r2");
        assert_eq!(s(2, 0, 0, false).suffix(), "_s2_p0_r0");
        assert_eq!(s(3, 0, 0, true).suffix(), "_s3_timeline");
        assert_eq!(Slot::part("baseline").suffix(), "_baseline");
        assert_eq!(
            suffixed(Path::new("/x/run.sqlite"), "_p1_r0"),
            Path::new("/x/run_p1_r0.sqlite")
        );
        assert_eq!(
            suffixed(Path::new("/x/run"), "_baseline"),
            Path::new("/x/run_baseline")
        );
        assert_eq!(
            suffixed(Path::new("/x/run.sqlite"), ""),
            Path::new("/x/run.sqlite")
        );
    }

    /// One key in `store`, so a test can see which store holds it.
    fn insert_one(store: &mut dyn Store) {
        let mut tx = store.begin().unwrap();
        assert!(
            tx.insert_key(&crate::store::NewKey {
                caller_id: "c",
                idem_key: "k",
                request_hash: &[0; 32],
                lease_token: &[1; 16],
                now_ms: 0,
                locked_until_ms: 1,
                expires_at_ms: 2,
            })
            .unwrap()
        );
        tx.commit().unwrap();
    }

    #[test]
    fn scratch_sqlite_stores_are_named_stably_and_kept_apart() {
        for (in_memory, name) in [
            (true, "sqlite (in memory)"),
            (false, "sqlite (temporary file)"),
        ] {
            let stores = Stores::scratch(StoreOptions {
                scratch_in_memory: in_memory,
                ..StoreOptions::default()
            })
            .unwrap();
            assert_eq!(stores.name(), name);
            assert!(!stores.kept(), "{name}");
            let mut a = stores.open(Slot::default()).unwrap();
            let mut b = stores
                .open(Slot {
                    replicate: 1,
                    ..Slot::default()
                })
                .unwrap();
            if !in_memory {
                assert_ne!(a.describe(), b.describe());
            }
            insert_one(a.as_mut());
            assert_eq!(a.count_keys().unwrap(), 1, "{name}");
            assert_eq!(b.count_keys().unwrap(), 0, "{name}");
        }
    }

    #[test]
    fn a_named_file_is_never_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("named.sqlite");
        let stores = Stores::new(None, Some(&path), StoreOptions::default()).unwrap();
        assert!(stores.kept());
        let mut a = stores.open(Slot::default()).unwrap();
        insert_one(a.as_mut());
        drop(a);
        assert!(path.exists());
        let mut again = SqliteStore::open(&path, &SqliteOptions::default()).unwrap();
        assert_eq!(again.count_keys().unwrap(), 1);
    }

    #[test]
    fn scratch_stores_in_memory_have_no_pool() {
        let stores = Stores::scratch(StoreOptions::default()).unwrap();
        let e = stores
            .create(&[Slot::default()], Sweeper::Delete)
            .unwrap_err()
            .to_string();
        assert!(e.contains("in memory"), "{e}");
    }
}
