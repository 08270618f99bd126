//! Where idempotency records and labels live.
//!
//! The engine's algorithm is written once, in `engine`, against the [`Store`] and [`Tx`] traits;
//! each store supplies only its SQL. A [`Tx`] method is one statement of the seed's two
//! transactions, so the engine reads like the seed's SQL listing.
//!
//! Two stores: SQLite (embedded, the default) and PostgreSQL (the seed's design, the server an
//! architect sizes in production). [`open`] and [`StorePool`] pick one from a spec string, the
//! `--store` flag: `sqlite:PATH`, a bare path, or `postgres://…`.

pub mod checkpoint;
pub mod exclusive;
pub mod group;
pub mod postgres;
pub mod redis;
pub mod sqlite;
mod stores;

use crate::clock::Millis;
use serde::Serialize;
use std::fmt;
use std::path::{Path, PathBuf};

pub use postgres::{PgOptions, PgPool, PostgresStore, Sweeper, SweeperPlan};
pub use redis::RedisStore;
pub use sqlite::{SqliteOptions, SqliteStore, Synchronous};
pub use stores::{Slot, StoreOptions, Stores, reachable};

/// The `state` column: a record is claimed (`started`) before the carrier call and `completed`
/// with the saved response after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyState {
    Started,
    Completed,
}

impl KeyState {
    pub fn as_str(self) -> &'static str {
        match self {
            KeyState::Started => "started",
            KeyState::Completed => "completed",
        }
    }

    pub fn parse(text: &str) -> Result<Self, StoreError> {
        match text {
            "started" => Ok(KeyState::Started),
            "completed" => Ok(KeyState::Completed),
            other => Err(StoreError::Corrupt(format!("unknown key state `{other}`"))),
        }
    }
}

/// A lease token: which attempt holds the lease. 16 bytes, stored as a UUID.
pub type LeaseToken = [u8; 16];

/// The first insert of txn 1.
#[derive(Debug, Clone)]
pub struct NewKey<'a> {
    pub caller_id: &'a str,
    pub idem_key: &'a str,
    pub request_hash: &'a [u8; 32],
    pub lease_token: &'a LeaseToken,
    pub now_ms: Millis,
    pub locked_until_ms: Millis,
    pub expires_at_ms: Millis,
}

/// What `SELECT … FOR UPDATE` reads back for a key that already exists.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeyRow {
    pub request_hash: Vec<u8>,
    pub state: KeyState,
    pub locked_until_ms: Option<Millis>,
    pub lease_token: Option<LeaseToken>,
    pub response_status: Option<u16>,
    pub response_body: Option<String>,
    pub created_at_ms: Millis,
    pub expires_at_ms: Millis,
}

impl KeyRow {
    /// The label id a completed 201 record replays, `None` for any other record (or a body
    /// without one): what a reconciliation checks against the labels table.
    pub fn replayed_label_id(&self) -> Option<String> {
        if self.state != KeyState::Completed || self.response_status != Some(201) {
            return None;
        }
        let body: serde_json::Value = serde_json::from_str(self.response_body.as_deref()?).ok()?;
        body["label_id"].as_str().map(str::to_string)
    }
}

/// The `UPDATE … SET state = 'completed'` of txn 2, guarded by the lease token.
#[derive(Debug, Clone)]
pub struct Completion<'a> {
    pub caller_id: &'a str,
    pub idem_key: &'a str,
    pub lease_token: &'a LeaseToken,
    pub response_status: u16,
    pub response_body: &'a str,
    pub expires_at_ms: Millis,
}

/// A row of `labels`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct LabelRow {
    pub label_id: String,
    pub order_id: i64,
    pub parcel_no: i64,
    pub label_version: i64,
    pub tracking_no: String,
    pub cost_cents: i64,
    pub created_by_key: String,
    /// Whose order `order_id` is: empty when every caller shares the order space (the seed's
    /// `UNIQUE (order_id, parcel_no)` across callers), the tenant when tenants number their
    /// own orders ([`crate::engine::OrderSpace`]).
    pub order_space: String,
}

/// Bytes the key records occupy: what a retention costs. The labels table, which no sweep
/// empties and which a label service keeps whatever the retention, is not counted (nor read:
/// on SQLite it is most of the file, and `dbstat` walks every page it is asked about).
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct StoreBytes {
    /// The key records themselves (the primary-key b-tree, which holds the rows).
    pub keys_table_bytes: u64,
    /// The `expires_at` index the sweeper scans.
    pub keys_index_bytes: u64,
}

impl StoreBytes {
    pub fn keys_bytes(&self) -> u64 {
        self.keys_table_bytes + self.keys_index_bytes
    }
}

/// Checks that must hold after any run of the correct design.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize)]
pub struct Invariants {
    /// `PRAGMA integrity_check` (or the server's equivalent) said ok.
    pub integrity_ok: bool,
    /// Completed keys with a 201 whose label row is missing: each is a "completed" record with no
    /// label behind it, the failure the seed's txn 2 exists to prevent.
    pub completed_without_label: u64,
    /// The most label rows any (caller, order_id, parcel_no, label_version) has; 1 when the second line
    /// of defence holds.
    pub max_labels_per_parcel: u64,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("{location}: {source}")]
    Sqlite {
        location: String,
        #[source]
        source: rusqlite::Error,
    },
    /// A statement failed on the server. The message carries the server's text and SQLSTATE;
    /// `error.code()` gives the SQLSTATE to code that must tell failures apart.
    #[error("{location}: {}", pg_message(error))]
    Postgres {
        location: String,
        error: ::postgres::Error,
    },
    #[error("{0}")]
    Corrupt(String),
    #[error("{location}: {message}")]
    Open { location: String, message: String },
    /// A `--store` value that names no store.
    #[error("store `{spec}`: {message}")]
    Spec { spec: String, message: String },
    /// The run's hold on its store is gone (the server ended the holding session, or the Redis
    /// hold key expired or was taken): another run may write into it now.
    #[error("{location}: {message}")]
    Lost { location: String, message: String },
    /// A statement outlived its deadline: the server's `statement_timeout` or `lock_timeout`,
    /// or the client's own when the server answered nothing at all (stopped, unreachable).
    #[error("{location}: {message}")]
    Deadline { location: String, message: String },
}

/// What `store` already holds ("12 records and 3 labels"), or `None` when it is empty. A run
/// that counts what it writes needs an empty store, and a labels table filled by an earlier run
/// would fail it half-way on a unique violation, so every table is counted, not the keys alone.
pub fn existing_contents(store: &mut dyn Store) -> Result<Option<String>, StoreError> {
    let keys = store.count_keys()?;
    let labels = store.count_labels()?;
    Ok(match (keys, labels) {
        (0, 0) => None,
        (k, 0) => Some(format!("{k} records")),
        (0, l) => Some(format!("{l} labels")),
        (k, l) => Some(format!("{k} records and {l} labels")),
    })
}

/// The text of a PostgreSQL error with what the driver's own `Display` leaves out: the server's
/// message, SQLSTATE, detail and hint, or the I/O cause. Here beside [`StoreError`], whose
/// `Postgres` variant prints with it, so that `exclusive` and the PostgreSQL store both take it
/// from below them rather than from each other.
pub fn pg_message(e: &::postgres::Error) -> String {
    if let Some(db) = e.as_db_error() {
        let mut text = format!(
            "{}: {} (SQLSTATE {})",
            db.severity(),
            db.message(),
            db.code().code()
        );
        if let Some(detail) = db.detail() {
            text.push_str(&format!("; detail: {detail}"));
        }
        if let Some(hint) = db.hint() {
            text.push_str(&format!("; hint: {hint}"));
        }
        return text;
    }
    let mut text = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        text.push_str(&format!(": {s}"));
        source = s.source();
    }
    text
}

/// How long opening a connection to a server may take, startup and authentication included.
/// The drivers' own connect timeouts cover the socket only, so a listener that accepts and
/// never answers (a wrong port, a hung server) would hold a run forever. A local or regional
/// server answers in milliseconds; a run opens a store at most twice before its first write,
/// so a silent one fails it in well under 15 s.
pub const CONNECT_DEADLINE: std::time::Duration = std::time::Duration::from_secs(6);

/// A PostgreSQL connection that could not be opened.
pub enum PgConnectError {
    /// The server or the driver said why.
    Failed(::postgres::Error),
    /// Nothing answered within [`CONNECT_DEADLINE`].
    Silent,
}

impl PgConnectError {
    /// The reason, for a message that names the store.
    pub fn message(&self) -> String {
        match self {
            PgConnectError::Failed(e) => pg_message(e),
            PgConnectError::Silent => format!(
                "the server accepted the connection but did not answer within {} s: is a PostgreSQL server listening on that port?",
                CONNECT_DEADLINE.as_secs()
            ),
        }
    }
}

/// Connects with `config`, giving up after [`CONNECT_DEADLINE`]. The connection is opened on a
/// thread of its own so that a silent server cannot block the caller; such a thread is left
/// waiting on its socket, and the run fails with a message instead of hanging.
pub fn pg_connect(config: &::postgres::Config) -> Result<::postgres::Client, PgConnectError> {
    let mut config = config.clone();
    // A server that vanishes mid-run (a host gone, a network cut) leaves a statement waiting
    // for an answer that never comes: keepalive probes find a silent peer within about 25 s,
    // and unacknowledged writes fail after 30 s, so the run ends with the store named instead
    // of hanging.
    config
        .keepalives(true)
        .keepalives_idle(std::time::Duration::from_secs(10))
        .keepalives_interval(std::time::Duration::from_secs(5))
        .keepalives_retries(3)
        .tcp_user_timeout(std::time::Duration::from_secs(30));
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(config.connect(::postgres::NoTls));
    });
    match rx.recv_timeout(CONNECT_DEADLINE) {
        Ok(Ok(client)) => Ok(client),
        Ok(Err(e)) => Err(PgConnectError::Failed(e)),
        Err(_) => Err(PgConnectError::Silent),
    }
}

/// One transaction. Dropping it without [`Tx::commit`] rolls it back, which is what a crash does.
pub trait Tx {
    /// `INSERT … ON CONFLICT (caller_id, idem_key) DO NOTHING`; true when this call inserted.
    fn insert_key(&mut self, key: &NewKey<'_>) -> Result<bool, StoreError>;
    /// `SELECT … FOR UPDATE`: the row, locked against other writers until this transaction ends.
    fn lock_key(&mut self, caller_id: &str, idem_key: &str) -> Result<Option<KeyRow>, StoreError>;
    /// Takes over an expired lease with a fresh token.
    fn take_over(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        lease_token: &LeaseToken,
        locked_until_ms: Millis,
    ) -> Result<(), StoreError>;
    /// Sets `locked_until` of a started key, only while `lease_token` still holds it; true when it
    /// did. Used to hand the lease back early when the carrier timed out.
    fn release_lease(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        lease_token: &LeaseToken,
        locked_until_ms: Millis,
    ) -> Result<bool, StoreError>;
    /// Marks the key completed with its response, only while the lease token is ours; true when a
    /// row was updated.
    fn complete_key(&mut self, done: &Completion<'_>) -> Result<bool, StoreError>;
    /// Replaces the saved body of a key completed in this transaction (used when the label insert
    /// finds the parcel already labelled and the existing label becomes the answer).
    fn set_response_body(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        response_body: &str,
    ) -> Result<(), StoreError>;
    /// Inserts a label unless (order_space, order_id, parcel_no, label_version) already has one,
    /// or its label id is already stored (the carrier replayed a label another order space's
    /// request bought, as under global key scoping); returns the existing label on either
    /// conflict, the parcel's first.
    fn insert_label(&mut self, label: &LabelRow) -> Result<Option<LabelRow>, StoreError>;
    /// Undoes a completion this transaction's caller wrote and then abandoned (txn 2 dropped
    /// without commit): deletes the record only while it is completed with exactly
    /// `response_body`. A transactional store needs nothing (dropping the transaction rolled the
    /// completion back, and the default does nothing); Redis, whose completion is a write of its
    /// own that no rollback reaches, deletes it.
    fn undo_completion(
        &mut self,
        _caller_id: &str,
        _idem_key: &str,
        _response_body: &str,
    ) -> Result<(), StoreError> {
        Ok(())
    }
    /// Deletes a started key still held by `lease_token` (the 400 validation path).
    fn delete_key(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        lease_token: &LeaseToken,
    ) -> Result<(), StoreError>;
    fn commit(self: Box<Self>) -> Result<(), StoreError>;
}

/// A connection to a store. One per worker thread: a `Store` is `Send` but not shared.
pub trait Store: Send {
    /// Starts a write transaction that serialises against other writers of the same key (SQLite:
    /// `BEGIN IMMEDIATE`; PostgreSQL: row locks from `FOR UPDATE`).
    fn begin(&mut self) -> Result<Box<dyn Tx + '_>, StoreError>;
    /// Deletes up to `batch` records with `expires_at <= now_ms`, oldest first, over the
    /// `expires_at` index, in one short transaction; returns the (caller_id, idem_key) of each,
    /// so the sweeper can remember what it purged and flag a request that carries such a key.
    fn sweep_batch(
        &mut self,
        now_ms: Millis,
        batch: u32,
    ) -> Result<Vec<(String, String)>, StoreError>;
    fn count_keys(&mut self) -> Result<u64, StoreError>;
    fn labels(&mut self) -> Result<Vec<LabelRow>, StoreError>;
    fn count_labels(&mut self) -> Result<u64, StoreError>;
    fn bytes(&mut self) -> Result<StoreBytes, StoreError>;
    fn invariants(&mut self) -> Result<Invariants, StoreError>;
    /// A human name for errors and reports, e.g. `sqlite:/tmp/x.db`.
    fn describe(&self) -> String;
    /// Reads one key without locking it, for inspection and tests.
    fn get_key(&mut self, caller_id: &str, idem_key: &str) -> Result<Option<KeyRow>, StoreError>;
}

impl fmt::Debug for dyn Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.describe())
    }
}

/// A parsed `--store` value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreSpec {
    /// `sqlite:PATH` or a bare path.
    Sqlite(PathBuf),
    /// `postgres://…` or `postgresql://…`, with `?schema=NAME` taken out of the URL (the driver
    /// does not know it) and kept here.
    Postgres { url: String, schema: Option<String> },
    /// `redis://HOST:PORT[/DB][?prefix=NAME]`: key records in Redis under a key prefix, labels
    /// in a SQLite file beside them (the seed's rejected "separate store").
    Redis { url: String, prefix: Option<String> },
}

impl StoreSpec {
    /// Parses `sqlite:PATH`, `sqlite://PATH`, a bare path, or a PostgreSQL URL.
    pub fn parse(spec: &str) -> Result<Self, StoreError> {
        let fail = |message: &str| StoreError::Spec {
            spec: postgres::redact_url(spec),
            message: message.to_string(),
        };
        let spec_trimmed = spec.trim();
        if spec_trimmed.is_empty() {
            return Err(fail(
                "empty; use sqlite:PATH, a file path, or postgres://USER@HOST:PORT/DATABASE",
            ));
        }
        if let Some(path) = spec_trimmed.strip_prefix("sqlite:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err(fail(
                    "no file after `sqlite:`; e.g. sqlite:/tmp/idem.sqlite",
                ));
            }
            return Ok(StoreSpec::Sqlite(PathBuf::from(path)));
        }
        let lower = spec_trimmed.to_ascii_lowercase();
        if lower.starts_with("postgres://") || lower.starts_with("postgresql://") {
            let (url, schema) = split_schema_param(spec_trimmed);
            if let Some(s) = &schema {
                postgres::check_schema_name(s).map_err(|m| fail(&m))?;
            }
            check_database(&url).map_err(|m| fail(&m))?;
            return Ok(StoreSpec::Postgres { url, schema });
        }
        if lower.starts_with("redis://") {
            let (url, prefix) = match spec_trimmed.split_once('?') {
                None => (spec_trimmed.to_string(), None),
                Some((url, query)) => {
                    let mut prefix = None;
                    for pair in query.split('&') {
                        match pair.split_once('=') {
                            Some(("prefix", v)) if !v.is_empty() => prefix = Some(v.to_string()),
                            _ => {
                                return Err(fail(&format!(
                                    "unknown parameter `{pair}`; a Redis store takes only ?prefix=NAME"
                                )));
                            }
                        }
                    }
                    (url.to_string(), prefix)
                }
            };
            if let Some(p) = &prefix {
                redis::check_prefix_name(p).map_err(|m| fail(&m))?;
            }
            return Ok(StoreSpec::Redis { url, prefix });
        }
        if let Some((scheme, _)) = spec_trimmed.split_once("://") {
            return Err(fail(&format!(
                "unknown store kind `{scheme}`; use sqlite:PATH, postgres://USER@HOST:PORT/DATABASE or redis://HOST:PORT"
            )));
        }
        Ok(StoreSpec::Sqlite(PathBuf::from(spec_trimmed)))
    }

    /// The spec as messages and reports show it: PostgreSQL passwords redacted.
    pub fn describe(&self) -> String {
        match self {
            StoreSpec::Sqlite(p) => format!("sqlite:{}", p.display()),
            StoreSpec::Postgres { url, schema } => match schema {
                Some(s) => format!("{} (schema {s})", postgres::redact_url(url)),
                None => postgres::redact_url(url),
            },
            StoreSpec::Redis { url, prefix } => match prefix {
                Some(p) => redis::location(url, p),
                None => postgres::redact_url(url),
            },
        }
    }
}

/// Refuses a PostgreSQL URL whose database is one a run must not write into: `template0` and
/// `template1` (every `CREATE DATABASE` copies template1, so tables left there appear in every
/// new database), and `postgres`, the maintenance database, when the URL names no database and
/// the driver falls back to it (the user `postgres`); `…/postgres` written out is allowed.
/// The database is read as the driver reads it (`/DB`, `?dbname=DB`, percent-escapes); a URL
/// the driver cannot read is left for it to refuse.
fn check_database(url: &str) -> Result<(), String> {
    let Ok(config) = url.parse::<::postgres::Config>() else {
        return Ok(());
    };
    match config.get_dbname() {
        Some(db @ ("template0" | "template1")) => {
            Err(format!(
                "the database `{db}` is a template every new database is copied from; name a database of your own (…/DATABASE)"
            ))
        }
        Some(_) => Ok(()),
        None if config.get_user() == Some("postgres") => Err(
            "names no database, so it would write into `postgres`, the server's maintenance database; name one (…/DATABASE), or write …/postgres if you mean it".into(),
        ),
        None => Ok(()),
    }
}

/// Takes `schema=NAME` out of a URL's query string; the rest of the query goes to the driver.
fn split_schema_param(url: &str) -> (String, Option<String>) {
    let Some((base, query)) = url.split_once('?') else {
        return (url.to_string(), None);
    };
    let mut schema = None;
    let rest: Vec<&str> = query
        .split('&')
        .filter(|p| match p.split_once('=') {
            Some(("schema", v)) => {
                schema = Some(v.to_string());
                false
            }
            _ => !p.is_empty(),
        })
        .collect();
    if rest.is_empty() {
        (base.to_string(), schema)
    } else {
        (format!("{base}?{}", rest.join("&")), schema)
    }
}

/// How to open either store. Each store reads its own part.
#[derive(Debug, Clone, Default)]
pub struct OpenOptions {
    pub sqlite: SqliteOptions,
    /// The PostgreSQL pool and schema; a `?schema=` in the URL overrides `postgres.schema`.
    pub postgres: PgOptions,
}

impl OpenOptions {
    /// Sets how hard commits wait for the disk on both stores.
    pub fn with_synchronous(mut self, synchronous: Synchronous) -> Self {
        self.sqlite.synchronous = synchronous;
        self.postgres.synchronous = synchronous;
        self
    }

    /// Sets the PostgreSQL pool size (`--pool`).
    pub fn with_pool_size(mut self, pool_size: u32) -> Self {
        self.postgres.pool_size = pool_size;
        self
    }
}

/// Where workers get their stores: one connection each. For PostgreSQL a bounded pool; for SQLite
/// a new connection to the same file per call (SQLite serialises writers on the file's lock, so
/// a pool would add nothing).
#[derive(Debug, Clone)]
pub enum StorePool {
    Sqlite {
        path: PathBuf,
        options: SqliteOptions,
    },
    Postgres(PgPool),
    /// Each connection is a new Redis connection with the same prefix and labels file.
    Redis {
        url: String,
        prefix: String,
        labels_path: PathBuf,
        /// How the labels file is opened.
        labels: SqliteOptions,
        /// The prefix's hold, kept between connections.
        _hold: std::sync::Arc<exclusive::Held>,
    },
}

impl StorePool {
    /// Parses `spec` and connects: for PostgreSQL this reaches the server, creates or migrates the
    /// schema and fails with a message naming the server if it cannot.
    pub fn open(spec: &str, options: &OpenOptions) -> Result<Self, StoreError> {
        match StoreSpec::parse(spec)? {
            StoreSpec::Sqlite(path) => {
                // Open once now so a bad path fails here, not in the first worker.
                SqliteStore::open(&path, &options.sqlite)?;
                Ok(StorePool::Sqlite {
                    path,
                    options: options.sqlite.clone(),
                })
            }
            StoreSpec::Postgres { url, schema } => {
                let mut pg = options.postgres.clone();
                if let Some(s) = schema {
                    pg.schema = s;
                }
                Ok(StorePool::Postgres(PgPool::connect(&url, &pg)?))
            }
            StoreSpec::Redis { url, prefix } => {
                // Named by the prefix, so the same spec finds the same labels again.
                let prefix = prefix.unwrap_or_else(|| "idemcalc".to_string());
                let labels_path = redis::named_labels_path(&prefix)?;
                let first = RedisStore::open_with(&url, &prefix, &labels_path, &options.sqlite)?;
                Ok(StorePool::Redis {
                    url,
                    prefix,
                    labels_path,
                    labels: options.sqlite.clone(),
                    _hold: first.hold(),
                })
            }
        }
    }

    /// One connection as a [`Store`].
    pub fn get(&self) -> Result<Box<dyn Store>, StoreError> {
        match self {
            StorePool::Sqlite { path, options } => Ok(Box::new(SqliteStore::open(path, options)?)),
            StorePool::Postgres(pool) => Ok(Box::new(pool.get()?)),
            StorePool::Redis { .. } => {
                let store = self.redis().expect("a Redis pool opens a Redis store")?;
                Ok(Box::new(store))
            }
        }
    }

    /// The store as messages and reports name it (passwords redacted).
    pub fn describe(&self) -> String {
        match self {
            StorePool::Sqlite { path, .. } => format!("sqlite:{}", path.display()),
            StorePool::Postgres(pool) => pool.describe(),
            StorePool::Redis {
                url,
                prefix,
                labels_path,
                ..
            } => format!(
                "{} (prefix {prefix}, labels in sqlite:{})",
                postgres::redact_url(url),
                labels_path.display()
            ),
        }
    }

    /// The file of an SQLite store, for code that works on the file itself (the bench's bulk
    /// fill, copy and WAL checkpoints).
    pub fn sqlite_path(&self) -> Option<&Path> {
        match self {
            StorePool::Sqlite { path, .. } => Some(path),
            _ => None,
        }
    }

    /// The pool of a PostgreSQL store.
    pub fn postgres(&self) -> Option<&PgPool> {
        match self {
            StorePool::Postgres(pool) => Some(pool),
            _ => None,
        }
    }

    /// One connection as the Redis store itself, for code that needs its raw commands (the
    /// bench's fill and baseline); `None` for the other stores.
    pub fn redis(&self) -> Option<Result<RedisStore, StoreError>> {
        match self {
            StorePool::Redis {
                url,
                prefix,
                labels_path,
                labels,
                ..
            } => Some(RedisStore::open_with(url, prefix, labels_path, labels)),
            _ => None,
        }
    }

    /// `sqlite`, `postgres` or `redis`, for report columns.
    pub fn kind(&self) -> &'static str {
        match self {
            StorePool::Sqlite { .. } => "sqlite",
            StorePool::Postgres(_) => "postgres",
            StorePool::Redis { .. } => "redis",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_name_a_store() {
        assert_eq!(
            StoreSpec::parse("sqlite:/tmp/a.db").unwrap(),
            StoreSpec::Sqlite("/tmp/a.db".into())
        );
        assert_eq!(
            StoreSpec::parse("sqlite:///tmp/a.db").unwrap(),
            StoreSpec::Sqlite("/tmp/a.db".into())
        );
        assert_eq!(
            StoreSpec::parse("store.sqlite").unwrap(),
            StoreSpec::Sqlite("store.sqlite".into())
        );
        assert_eq!(
            StoreSpec::parse("postgres://postgres@127.0.0.1/test").unwrap(),
            StoreSpec::Postgres {
                url: "postgres://postgres@127.0.0.1/test".into(),
                schema: None
            }
        );
        assert_eq!(
            StoreSpec::parse("postgresql://u:pw@h:5433/db?sslmode=disable&schema=idem_a").unwrap(),
            StoreSpec::Postgres {
                url: "postgresql://u:pw@h:5433/db?sslmode=disable".into(),
                schema: Some("idem_a".into())
            }
        );
        assert_eq!(
            StoreSpec::parse("postgres://h/db?schema=s1").unwrap(),
            StoreSpec::Postgres {
                url: "postgres://h/db".into(),
                schema: Some("s1".into())
            }
        );
    }

    #[test]
    fn redis_specs_carry_their_prefix() {
        assert_eq!(
            StoreSpec::parse("redis://127.0.0.1:6379/2?prefix=capacity").unwrap(),
            StoreSpec::Redis {
                url: "redis://127.0.0.1:6379/2".into(),
                prefix: Some("capacity".into()),
            }
        );
        assert_eq!(
            StoreSpec::parse("redis://127.0.0.1:6379").unwrap(),
            StoreSpec::Redis {
                url: "redis://127.0.0.1:6379".into(),
                prefix: None,
            }
        );
        for bad in ["../t/evil", "a*", "a b", "a?b", "a/b", &"p".repeat(65)] {
            let e = StoreSpec::parse(&format!("redis://h:1?prefix={bad}")).unwrap_err();
            assert!(e.to_string().contains("prefix"), "{bad}: {e}");
        }
        let e = StoreSpec::parse("redis://h:1?ttl=5")
            .unwrap_err()
            .to_string();
        assert!(e.contains("ttl=5") && e.contains("prefix"), "{e}");
    }

    #[test]
    fn bad_specs_say_what_to_type() {
        for bad in [
            "",
            "sqlite:",
            "mysql://h/db",
            "postgres://h/db?schema=Robert;drop",
        ] {
            let e = StoreSpec::parse(bad).unwrap_err().to_string();
            assert!(e.contains("store `"), "{bad:?}: {e}");
        }
        let e = StoreSpec::parse("mysql://u:secret@h/db")
            .unwrap_err()
            .to_string();
        assert!(!e.contains("secret"), "{e}");
        assert!(e.contains("sqlite:PATH"), "{e}");
    }
}
