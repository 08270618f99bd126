//! The embedded store: the seed's schema on SQLite, in WAL mode.
//!
//! SQLite has no `SELECT … FOR UPDATE`; txn 1 and txn 2 begin with `BEGIN IMMEDIATE`, which takes
//! the database's single write lock up front, so the read-then-decide of txn 1 cannot race
//! another writer. Timestamps are INTEGER milliseconds from the injected clock.

use super::{
    Completion, Invariants, KeyRow, KeyState, LabelRow, LeaseToken, NewKey, Store, StoreBytes,
    StoreError, Tx,
};
use crate::clock::Millis;
use rusqlite::{Connection, OptionalExtension, TransactionBehavior, params};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Bumped whenever the schema changes; a store written by a newer version is refused rather than
/// misread.
/// 2: `state` is an INTEGER (0 started, 1 completed), which SQLite stores in the record header
/// alone, instead of the 7–9 bytes of its name in every record.
/// 3: `idempotency_keys` is a rowid table with its primary key as an index, no longer
/// `WITHOUT ROWID`: a saved response of 2 kB or more no longer takes a whole overflow page, the
/// `expires_at` index holds a rowid instead of the whole key, and the sweeper's oldest-first
/// deletes empty whole table pages (docs/stores.md, "Bytes per record").
/// 4: the labels table's tenant column is `order_space`, empty when callers share one order
/// space (the seed's `UNIQUE (order_id, parcel_no)`), so one parcel gets one label across
/// callers by default.
pub const SCHEMA_VERSION: i64 = 4;

/// SQLite page size for new stores, bytes.
pub const PAGE_SIZE: u32 = 8192;

/// The most an in-memory store may hold: 1 GiB of [`PAGE_SIZE`] pages. A store that would grow
/// past it fails with SQLite's "database or disk is full" rather than taking the machine's
/// memory; a run that needs more names a file (`--db FILE`).
pub const MEMORY_MAX_BYTES: u64 = 1 << 30;

/// What an in-memory store is called in messages and reports.
pub const MEMORY_NAME: &str = "sqlite (in memory)";

/// Turns off SQLite's memory statistics (`SQLITE_CONFIG_MEMSTATUS`, on by default in the
/// bundled build), which every allocation and free inside SQLite updates under one
/// process-wide mutex: with a store per rayon thread, the threads queue on that mutex (91,802
/// futex calls in one report, 586 without; docs/performance.md) for counters nothing here
/// reads. Without them `sqlite3_memory_used` and `sqlite3_status` report nothing and a soft
/// heap limit is not enforced; idemcalc uses none of them, and every store behaves the same.
///
/// Returns false, changing nothing, if SQLite was initialised already (the statistics then
/// stay on: correct, only slower).
///
/// # Safety
///
/// `sqlite3_config` is not thread-safe: no other thread may call into SQLite (open a
/// connection, run a statement) while it runs. Call this first thing in `main`, before any
/// thread starts, as `idemcalc`'s main does.
pub unsafe fn skip_memory_statistics() -> bool {
    // SAFETY: the caller guarantees that no other thread uses SQLite meanwhile (see above).
    // Called before `sqlite3_initialize` (which the first connection runs) it sets the flag;
    // after it, SQLite returns SQLITE_MISUSE without touching anything. SQLITE_CONFIG_MEMSTATUS
    // takes one `int`, which is what goes through the variadic call.
    let rc = unsafe {
        rusqlite::ffi::sqlite3_config(
            rusqlite::ffi::SQLITE_CONFIG_MEMSTATUS,
            std::ffi::c_int::from(0u8),
        )
    };
    rc == rusqlite::ffi::SQLITE_OK
}

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS idempotency_keys (
    caller_id       TEXT    NOT NULL,
    idem_key        TEXT    NOT NULL,
    request_hash    BLOB    NOT NULL,
    state           INTEGER NOT NULL CHECK (state IN (0, 1)), -- 0 started, 1 completed
    locked_until    INTEGER,
    lease_token     BLOB,
    response_status INTEGER,
    response_body   TEXT,
    created_at      INTEGER NOT NULL,
    expires_at      INTEGER NOT NULL,
    PRIMARY KEY (caller_id, idem_key)
) STRICT;
CREATE INDEX IF NOT EXISTS idempotency_keys_expires_at ON idempotency_keys (expires_at);
CREATE TABLE IF NOT EXISTS labels (
    label_id       TEXT    NOT NULL PRIMARY KEY,
    order_id       INTEGER NOT NULL,
    parcel_no      INTEGER NOT NULL,
    label_version  INTEGER NOT NULL,
    tracking_no    TEXT    NOT NULL,
    cost_cents     INTEGER NOT NULL,
    created_by_key TEXT    NOT NULL,
    order_space    TEXT    NOT NULL DEFAULT '',
    UNIQUE (order_space, order_id, parcel_no, label_version)
) STRICT;
";

/// How hard each commit waits for the disk. The bench measures `Normal` (WAL's usual setting: a
/// commit survives a process crash, the last ones may be lost on power loss) and `Full`; the
/// simulator, which measures sizes and counts rather than durability, uses `Off`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Synchronous {
    Off,
    #[default]
    Normal,
    Full,
}

#[derive(Debug, Clone)]
pub struct SqliteOptions {
    pub synchronous: Synchronous,
    /// How long a writer waits for the write lock before the store reports the file as locked.
    pub busy_timeout: Duration,
    /// Page cache per connection, in KiB.
    pub cache_kib: u32,
    /// Hold the file for this process while any connection to it is open (a lock file beside
    /// it), so a second process that names it is refused instead of writing into a run's rows.
    pub exclusive: bool,
    /// SQLite's default: the commit that takes the WAL past 1,000 pages checkpoints it, fsyncs
    /// and all, while every request queued behind it waits. False leaves checkpoints to another
    /// connection ([`super::checkpoint::Checkpointer`]), as a server runs SQLite.
    pub inline_checkpoints: bool,
    /// With checkpoints left to another connection: the writer still checkpoints in the commit
    /// that takes the WAL past [`super::checkpoint::WAL_LIMIT_BYTES`], and the log is cut back
    /// to that size when it starts again, so the WAL stays bounded under a continuous writer
    /// (see `store::checkpoint`). False only for the bench's diagnostic that defers every
    /// checkpoint to the end of the run.
    pub bounded_wal: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            synchronous: Synchronous::Normal,
            busy_timeout: Duration::from_secs(5),
            cache_kib: 64 * 1024,
            exclusive: true,
            inline_checkpoints: true,
            bounded_wal: true,
        }
    }
}

pub struct SqliteStore {
    conn: Connection,
    /// The file; [`MEMORY_NAME`] for a store in memory.
    path: PathBuf,
    /// Opened by [`SqliteStore::open_memory`].
    in_memory: bool,
    /// Declared last so it is released after the connection closes.
    _exclusive: Option<std::sync::Arc<super::exclusive::Held>>,
}

impl SqliteStore {
    /// Opens (creating if needed) the store at `path`, sets WAL mode and creates the schema.
    /// Every error names the file.
    pub fn open(path: &Path, options: &SqliteOptions) -> Result<Self, StoreError> {
        let location = path.display().to_string();
        let open_err = |e: rusqlite::Error| StoreError::Open {
            location: location.clone(),
            message: explain(&e),
        };
        // A device or a pipe opens as an empty database that then fails on its first table.
        if path.exists() {
            crate::input::check_regular(path).map_err(|e| StoreError::Open {
                location: location.clone(),
                message: format!("{e} (a new path creates a store there)"),
            })?;
        }
        let conn = Connection::open(path).map_err(open_err)?;
        // Before any statement: a store another process holds is not touched at all.
        let exclusive = if options.exclusive {
            super::exclusive::hold_sqlite(path)?
        } else {
            None
        };
        conn.busy_timeout(options.busy_timeout).map_err(open_err)?;
        let sync = match options.synchronous {
            Synchronous::Off => "OFF",
            Synchronous::Normal => "NORMAL",
            Synchronous::Full => "FULL",
        };
        // 8 KiB pages, set before WAL mode writes the header (a no-op on an existing file): a
        // key record is ~420 B, so a 4 KiB page holds 9 and wastes most of a tenth; on 8 KiB
        // pages that tail waste halves (measured: 629.9 → 600.7 B per record under churn, see
        // the bytes-per-record table in docs/stores.md).
        conn.execute_batch(&format!(
            "PRAGMA page_size = {PAGE_SIZE}; PRAGMA journal_mode = WAL; PRAGMA synchronous = {sync}; PRAGMA cache_size = -{};",
            options.cache_kib
        ))
        .map_err(open_err)?;
        stable_plans(&conn).map_err(open_err)?;
        if !options.inline_checkpoints {
            let pages = if options.bounded_wal {
                super::checkpoint::WAL_LIMIT_BYTES / u64::from(PAGE_SIZE)
            } else {
                0
            };
            conn.execute_batch(&format!(
                "PRAGMA wal_autocheckpoint = {pages}; PRAGMA journal_size_limit = {};",
                super::checkpoint::WAL_LIMIT_BYTES
            ))
            .map_err(open_err)?;
        }
        let mut store = Self {
            conn,
            path: path.to_path_buf(),
            in_memory: false,
            _exclusive: exclusive,
        };
        store.migrate().map_err(|e| match e {
            StoreError::Sqlite { source, .. } => open_err(source),
            other => other,
        })?;
        Ok(store)
    }

    /// A new, empty store in this process's memory, for a run's scratch stores: the same page
    /// size, schema and statements as [`SqliteStore::open`]'s file, so the same operations lay
    /// out the same b-tree pages and every figure (bytes per record included, which `dbstat`
    /// reads from those pages) is the file's to the byte; but no file, journal file, lock or
    /// sync, so a transaction makes no system call. Its rollback journal is in memory, so a
    /// dropped transaction still rolls back. It holds at most [`MEMORY_MAX_BYTES`], and it is
    /// gone when it is dropped: the bench and the kill harness, which need durability, open
    /// files.
    pub fn open_memory() -> Result<Self, StoreError> {
        Self::open_memory_capped(MEMORY_MAX_BYTES)
    }

    /// [`SqliteStore::open_memory`] holding at most `max_bytes` (whole pages).
    fn open_memory_capped(max_bytes: u64) -> Result<Self, StoreError> {
        let open_err = |e: rusqlite::Error| StoreError::Open {
            location: MEMORY_NAME.to_string(),
            message: explain(&e),
        };
        let conn = Connection::open_in_memory().map_err(open_err)?;
        conn.execute_batch(&format!(
            "PRAGMA page_size = {PAGE_SIZE}; PRAGMA journal_mode = MEMORY; PRAGMA max_page_count = {};",
            max_bytes / u64::from(PAGE_SIZE)
        ))
        .map_err(open_err)?;
        stable_plans(&conn).map_err(open_err)?;
        let mut store = Self {
            conn,
            path: PathBuf::from(MEMORY_NAME),
            in_memory: true,
            _exclusive: None,
        };
        store.migrate().map_err(|e| match e {
            StoreError::Sqlite { source, .. } => open_err(source),
            other => other,
        })?;
        let page_size: u32 = store
            .conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .map_err(open_err)?;
        if page_size != PAGE_SIZE {
            return Err(StoreError::Open {
                location: MEMORY_NAME.to_string(),
                message: format!("page size {page_size}, not {PAGE_SIZE}"),
            });
        }
        Ok(store)
    }

    fn migrate(&mut self) -> Result<(), StoreError> {
        let location = self.path.display().to_string();
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)
            .map_err(|e| self_err(&location, e))?;
        let version: i64 = tx
            .query_row("PRAGMA user_version", [], |r| r.get(0))
            .map_err(|e| self_err(&location, e))?;
        if version > 0 && version < SCHEMA_VERSION {
            return Err(StoreError::Open {
                location,
                message: format!(
                    "the store has schema version {version}, written by an older idemcalc (this one writes {SCHEMA_VERSION}); key stores here are scratch data, so use a new file"
                ),
            });
        }
        if version > SCHEMA_VERSION {
            return Err(StoreError::Open {
                location,
                message: format!(
                    "the store has schema version {version}, newer than this idemcalc understands ({SCHEMA_VERSION}); use a newer idemcalc or another file"
                ),
            });
        }
        tx.execute_batch(SCHEMA)
            .map_err(|e| self_err(&location, e))?;
        tx.execute_batch(&format!("PRAGMA user_version = {SCHEMA_VERSION}"))
            .map_err(|e| self_err(&location, e))?;
        tx.commit().map_err(|e| self_err(&location, e))
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The connection, for group commit (which runs its own `BEGIN IMMEDIATE`, savepoints and
    /// `COMMIT` on it) and for the bench's raw-SQL baseline.
    pub(crate) fn connection(&self) -> &Connection {
        &self.conn
    }

    /// The engine's statements inside a transaction or savepoint that the caller opened on this
    /// connection and will end itself: `commit` does nothing and dropping rolls nothing back.
    pub(crate) fn enclosed_tx(&self) -> impl Tx + '_ {
        SqliteTx {
            tx: Scope::Enclosed(&self.conn),
            location: self.path.as_path(),
        }
    }

    fn err(&self, e: rusqlite::Error) -> StoreError {
        self_err(&self.path.display().to_string(), e)
    }
}

/// One query plan per statement, whatever is bound to it. The bundled SQLite is built with
/// STAT4, under which a parameter in a `LIMIT` or in a range on an indexed column marks the
/// statement to be compiled again after every new binding: the sweep's `… WHERE expires_at <=
/// ?1 … LIMIT ?2` was parsed and planned anew on each pass, 8 % of `simulate --retention 3d`
/// (perf). No store is `ANALYZE`d, so no value could choose another plan.
fn stable_plans(conn: &Connection) -> rusqlite::Result<()> {
    conn.set_db_config(
        rusqlite::config::DbConfig::SQLITE_DBCONFIG_ENABLE_QPSG,
        true,
    )
    .map(|_| ())
}

fn self_err(location: &str, source: rusqlite::Error) -> StoreError {
    // A store in memory that reached its cap says so, and what to do, beside SQLite's words.
    let full = source.sqlite_error_code() == Some(rusqlite::ErrorCode::DiskFull);
    let location = if full && location == MEMORY_NAME {
        format!(
            "{MEMORY_NAME}, which holds at most {} MiB (keep a larger store in a file: --db FILE or --store sqlite:FILE)",
            MEMORY_MAX_BYTES >> 20
        )
    } else {
        location.to_string()
    };
    StoreError::Sqlite { location, source }
}

/// Turns SQLite's terse messages into ones that say what to do.
fn explain(e: &rusqlite::Error) -> String {
    let text = e.to_string();
    if text.contains("not a database") {
        "the file exists but is not an SQLite database; pass a new path or an idemcalc store"
            .to_string()
    } else if text.contains("locked") || text.contains("busy") {
        format!("{text}: another process holds the write lock past the busy timeout")
    } else if text.contains("unable to open") {
        format!("{text}: check that the directory exists and is writable")
    } else {
        text
    }
}

/// What a [`SqliteTx`]'s statements run inside: a transaction of its own, or one that the caller
/// opened and will end itself (group commit's savepoints, `store::group`), so both run the very
/// same statements.
enum Scope<'c> {
    Own(OwnTx<'c>),
    Enclosed(&'c Connection),
}

/// A write transaction of its own: `BEGIN IMMEDIATE`, then `COMMIT`, or `ROLLBACK` when dropped
/// unfinished, as `rusqlite::Transaction` does, but through cached statements: rusqlite's own
/// parses and compiles `BEGIN` and `COMMIT` anew each time (`execute_batch`), four compilations
/// per create that the seed's SQL does not need.
pub struct OwnTx<'c> {
    conn: &'c Connection,
    finished: bool,
}

impl<'c> OwnTx<'c> {
    pub fn begin(conn: &'c Connection) -> rusqlite::Result<Self> {
        conn.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
        Ok(Self {
            conn,
            finished: false,
        })
    }

    pub fn commit(mut self) -> rusqlite::Result<()> {
        self.conn.prepare_cached("COMMIT")?.execute([])?;
        self.finished = true;
        Ok(())
    }
}

impl std::ops::Deref for OwnTx<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        self.conn
    }
}

impl Drop for OwnTx<'_> {
    /// A transaction dropped without commit, or whose commit failed, is rolled back, unless
    /// SQLite already ended it (an error that rolls back by itself).
    fn drop(&mut self) {
        if !self.finished && !self.conn.is_autocommit() {
            let _ = self
                .conn
                .prepare_cached("ROLLBACK")
                .and_then(|mut s| s.execute([]));
        }
    }
}

impl std::ops::Deref for Scope<'_> {
    type Target = Connection;

    fn deref(&self) -> &Connection {
        match self {
            Scope::Own(tx) => tx.conn,
            Scope::Enclosed(conn) => conn,
        }
    }
}

struct SqliteTx<'c> {
    tx: Scope<'c>,
    location: &'c Path,
}

impl SqliteTx<'_> {
    fn err(&self, e: rusqlite::Error) -> StoreError {
        self_err(&self.location.display().to_string(), e)
    }
}

fn token_from(bytes: Option<Vec<u8>>) -> Result<Option<LeaseToken>, StoreError> {
    bytes
        .map(|b| {
            <[u8; 16]>::try_from(b.as_slice())
                .map_err(|_| StoreError::Corrupt("lease_token is not 16 bytes".into()))
        })
        .transpose()
}

macro_rules! label_columns {
    () => {
        "label_id, order_id, parcel_no, label_version, tracking_no, cost_cents, created_by_key, order_space"
    };
}

macro_rules! key_columns {
    () => {
        "request_hash, state, locked_until, lease_token, response_status, response_body, created_at, expires_at"
    };
}

/// The statements of the engine's two transactions, as text. The store prepares them, and the
/// bench's raw-SQL baseline (`bench::baseline`) prepares the very same text, so the baseline
/// runs the engine's SQL and nothing else.
pub(crate) mod sql {
    pub const INSERT_KEY: &str = "INSERT INTO idempotency_keys
           (caller_id, idem_key, request_hash, state, locked_until, lease_token, created_at, expires_at)
         VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6, ?7)
         ON CONFLICT (caller_id, idem_key) DO NOTHING";
    /// Inside `BEGIN IMMEDIATE`, which already holds the write lock: a plain `SELECT` is the
    /// `FOR UPDATE` here.
    pub const SELECT_KEY: &str = concat!(
        "SELECT ",
        key_columns!(),
        " FROM idempotency_keys WHERE caller_id = ?1 AND idem_key = ?2"
    );
    pub const TAKE_OVER: &str = "UPDATE idempotency_keys SET locked_until = ?3, lease_token = ?4
          WHERE caller_id = ?1 AND idem_key = ?2";
    pub const COMPLETE_KEY: &str = "UPDATE idempotency_keys
            SET state = 1, locked_until = NULL, lease_token = NULL,
                response_status = ?3, response_body = ?4, expires_at = ?5
          WHERE caller_id = ?1 AND idem_key = ?2
            AND state = 0 AND lease_token = ?6";
    pub const INSERT_LABEL: &str = concat!(
        "INSERT INTO labels (",
        label_columns!(),
        ") VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)
         ON CONFLICT DO NOTHING"
    );
}

fn key_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<RawKey> {
    Ok((
        KeyRowRaw {
            request_hash: r.get(0)?,
            state: r.get(1)?,
            locked_until_ms: r.get(2)?,
            response_status: r.get(4)?,
            response_body: r.get(5)?,
            created_at_ms: r.get(6)?,
            expires_at_ms: r.get(7)?,
        },
        r.get(3)?,
    ))
}

type RawKey = (KeyRowRaw, Option<Vec<u8>>);

/// Reads one key row; inside a transaction (a `Transaction` derefs to its connection) or not.
fn select_key(
    conn: &Connection,
    caller_id: &str,
    idem_key: &str,
) -> rusqlite::Result<Option<RawKey>> {
    conn.prepare_cached(sql::SELECT_KEY)?
        .query_row(params![caller_id, idem_key], key_row)
        .optional()
}

struct KeyRowRaw {
    request_hash: Vec<u8>,
    state: i64,
    locked_until_ms: Option<Millis>,
    response_status: Option<u16>,
    response_body: Option<String>,
    created_at_ms: Millis,
    expires_at_ms: Millis,
}

fn finish_row(raw: Option<RawKey>) -> Result<Option<KeyRow>, StoreError> {
    raw.map(|(raw, token)| {
        Ok(KeyRow {
            request_hash: raw.request_hash,
            state: match raw.state {
                0 => KeyState::Started,
                1 => KeyState::Completed,
                other => return Err(StoreError::Corrupt(format!("state {other} is not 0 or 1"))),
            },
            locked_until_ms: raw.locked_until_ms,
            lease_token: token_from(token)?,
            response_status: raw.response_status,
            response_body: raw.response_body,
            created_at_ms: raw.created_at_ms,
            expires_at_ms: raw.expires_at_ms,
        })
    })
    .transpose()
}

fn label_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<LabelRow> {
    Ok(LabelRow {
        label_id: r.get(0)?,
        order_id: r.get(1)?,
        parcel_no: r.get(2)?,
        label_version: r.get(3)?,
        tracking_no: r.get(4)?,
        cost_cents: r.get(5)?,
        created_by_key: r.get(6)?,
        order_space: r.get(7)?,
    })
}

const LABEL_COLUMNS: &str = label_columns!();

impl Tx for SqliteTx<'_> {
    fn insert_key(&mut self, k: &NewKey<'_>) -> Result<bool, StoreError> {
        let n = self
            .tx
            .prepare_cached(sql::INSERT_KEY)
            .and_then(|mut s| {
                s.execute(params![
                    k.caller_id,
                    k.idem_key,
                    &k.request_hash[..],
                    k.locked_until_ms,
                    &k.lease_token[..],
                    k.now_ms,
                    k.expires_at_ms
                ])
            })
            .map_err(|e| self.err(e))?;
        Ok(n == 1)
    }

    fn lock_key(&mut self, caller_id: &str, idem_key: &str) -> Result<Option<KeyRow>, StoreError> {
        // BEGIN IMMEDIATE already holds the write lock: a plain SELECT is the FOR UPDATE here.
        let raw = select_key(&self.tx, caller_id, idem_key).map_err(|e| self.err(e))?;
        finish_row(raw)
    }

    fn take_over(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        lease_token: &LeaseToken,
        locked_until_ms: Millis,
    ) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(sql::TAKE_OVER)
            .and_then(|mut s| {
                s.execute(params![
                    caller_id,
                    idem_key,
                    locked_until_ms,
                    &lease_token[..]
                ])
            })
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    fn release_lease(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        lease_token: &LeaseToken,
        locked_until_ms: Millis,
    ) -> Result<bool, StoreError> {
        let n = self
            .tx
            .prepare_cached(
                "UPDATE idempotency_keys SET locked_until = ?3
                  WHERE caller_id = ?1 AND idem_key = ?2 AND state = 0 AND lease_token = ?4",
            )
            .and_then(|mut s| {
                s.execute(params![
                    caller_id,
                    idem_key,
                    locked_until_ms,
                    &lease_token[..]
                ])
            })
            .map_err(|e| self.err(e))?;
        Ok(n == 1)
    }

    fn complete_key(&mut self, d: &Completion<'_>) -> Result<bool, StoreError> {
        let n = self
            .tx
            .prepare_cached(sql::COMPLETE_KEY)
            .and_then(|mut s| {
                s.execute(params![
                    d.caller_id,
                    d.idem_key,
                    d.response_status,
                    d.response_body,
                    d.expires_at_ms,
                    &d.lease_token[..]
                ])
            })
            .map_err(|e| self.err(e))?;
        Ok(n == 1)
    }

    fn set_response_body(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        response_body: &str,
    ) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "UPDATE idempotency_keys SET response_body = ?3
                  WHERE caller_id = ?1 AND idem_key = ?2",
            )
            .and_then(|mut s| s.execute(params![caller_id, idem_key, response_body]))
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    fn insert_label(&mut self, l: &LabelRow) -> Result<Option<LabelRow>, StoreError> {
        let n = self
            .tx
            .prepare_cached(sql::INSERT_LABEL)
            .and_then(|mut s| {
                s.execute(params![
                    l.label_id,
                    l.order_id,
                    l.parcel_no,
                    l.label_version,
                    l.tracking_no,
                    l.cost_cents,
                    l.created_by_key,
                    l.order_space
                ])
            })
            .map_err(|e| self.err(e))?;
        if n == 1 {
            return Ok(None);
        }
        self.tx
            .prepare_cached(&format!(
                "SELECT {LABEL_COLUMNS} FROM labels
                  WHERE order_id = ?1 AND parcel_no = ?2 AND label_version = ?3 AND order_space = ?4
                     OR label_id = ?5
                  ORDER BY label_id = ?5
                  LIMIT 1"
            ))
            .and_then(|mut s| {
                s.query_row(
                    params![
                        l.order_id,
                        l.parcel_no,
                        l.label_version,
                        l.order_space,
                        l.label_id
                    ],
                    label_row,
                )
            })
            .map(Some)
            .map_err(|e| self.err(e))
    }

    fn delete_key(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        lease_token: &LeaseToken,
    ) -> Result<(), StoreError> {
        self.tx
            .prepare_cached(
                "DELETE FROM idempotency_keys
                  WHERE caller_id = ?1 AND idem_key = ?2 AND state = 0 AND lease_token = ?3",
            )
            .and_then(|mut s| s.execute(params![caller_id, idem_key, &lease_token[..]]))
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    fn commit(self: Box<Self>) -> Result<(), StoreError> {
        // The location is written out only for an error: a commit allocates nothing.
        let location = self.location;
        match self.tx {
            Scope::Own(tx) => tx
                .commit()
                .map_err(|e| self_err(&location.display().to_string(), e)),
            // The caller that opened the enclosing transaction ends it.
            Scope::Enclosed(_) => Ok(()),
        }
    }
}

impl Store for SqliteStore {
    fn begin(&mut self) -> Result<Box<dyn Tx + '_>, StoreError> {
        let location = self.path.as_path();
        let tx =
            OwnTx::begin(&self.conn).map_err(|e| self_err(&location.display().to_string(), e))?;
        Ok(Box::new(SqliteTx {
            tx: Scope::Own(tx),
            location,
        }))
    }

    fn sweep_batch(
        &mut self,
        now_ms: Millis,
        batch: u32,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let tx =
            OwnTx::begin(&self.conn).map_err(|e| self_err(&self.path.display().to_string(), e))?;
        let purged = tx
            .prepare_cached(
                // As PostgreSQL's (`store::postgres::sql::SWEEP`): never a live lease.
                "DELETE FROM idempotency_keys WHERE (caller_id, idem_key) IN (
                    SELECT caller_id, idem_key FROM idempotency_keys
                     WHERE expires_at <= ?1
                       AND (state = 1 OR locked_until IS NULL OR locked_until <= ?1)
                     ORDER BY expires_at LIMIT ?2)
                 RETURNING caller_id, idem_key",
            )
            .and_then(|mut s| {
                s.query_map(params![now_ms, batch], |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect::<Result<Vec<(String, String)>, _>>()
            })
            .and_then(|purged| tx.commit().map(|_| purged))
            .map_err(|e| self_err(&self.path.display().to_string(), e))?;
        Ok(purged)
    }

    fn count_keys(&mut self) -> Result<u64, StoreError> {
        self.conn
            .query_row("SELECT COUNT(*) FROM idempotency_keys", [], |r| {
                r.get::<_, i64>(0)
            })
            .map(|n| n as u64)
            .map_err(|e| self.err(e))
    }

    fn labels(&mut self) -> Result<Vec<LabelRow>, StoreError> {
        let mut stmt = self
            .conn
            .prepare(&format!(
                "SELECT {LABEL_COLUMNS} FROM labels ORDER BY rowid"
            ))
            .map_err(|e| self.err(e))?;
        let rows = stmt
            .query_map([], label_row)
            .and_then(|rows| rows.collect::<Result<Vec<_>, _>>());
        drop(stmt);
        rows.map_err(|e| self.err(e))
    }

    fn count_labels(&mut self) -> Result<u64, StoreError> {
        self.conn
            .query_row("SELECT COUNT(*) FROM labels", [], |r| r.get::<_, i64>(0))
            .map(|n| n as u64)
            .map_err(|e| self.err(e))
    }

    fn bytes(&mut self) -> Result<StoreBytes, StoreError> {
        // One b-tree per query: `dbstat` walks only the b-tree its `name =` names, where a
        // `GROUP BY name` over everything walked the labels table too, the larger part of the
        // file (4 % of `simulate --retention 3d`). The primary key's index counts with the
        // table, as PostgreSQL's does.
        let size = |name: &str| -> Result<u64, StoreError> {
            self.conn
                .prepare_cached("SELECT COALESCE(SUM(pgsize), 0) FROM dbstat WHERE name = ?1")
                .and_then(|mut s| s.query_row([name], |r| r.get::<_, i64>(0)))
                .map(|n| n.max(0) as u64)
                .map_err(|e| self.err(e))
        };
        Ok(StoreBytes {
            keys_table_bytes: size("idempotency_keys")?
                + size("sqlite_autoindex_idempotency_keys_1")?,
            keys_index_bytes: size("idempotency_keys_expires_at")?,
        })
    }

    fn invariants(&mut self) -> Result<Invariants, StoreError> {
        let integrity: String = self
            .conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .map_err(|e| self.err(e))?;
        let completed_without_label: i64 = self
            .conn
            .query_row(
                "SELECT COUNT(*) FROM idempotency_keys k
                  WHERE k.state = 1 AND k.response_status = 201
                    AND NOT EXISTS (SELECT 1 FROM labels l
                                     WHERE l.label_id = json_extract(k.response_body, '$.label_id'))",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        let max_labels_per_parcel: i64 = self
            .conn
            .query_row(
                "SELECT COALESCE(MAX(n), 0) FROM (SELECT COUNT(*) AS n FROM labels
                  GROUP BY order_space, order_id, parcel_no, label_version)",
                [],
                |r| r.get(0),
            )
            .map_err(|e| self.err(e))?;
        Ok(Invariants {
            integrity_ok: integrity == "ok",
            completed_without_label: completed_without_label as u64,
            max_labels_per_parcel: max_labels_per_parcel as u64,
        })
    }

    fn describe(&self) -> String {
        if self.in_memory {
            return MEMORY_NAME.to_string();
        }
        format!("sqlite:{}", self.path.display())
    }

    fn get_key(&mut self, caller_id: &str, idem_key: &str) -> Result<Option<KeyRow>, StoreError> {
        let raw = select_key(&self.conn, caller_id, idem_key).map_err(|e| self.err(e))?;
        finish_row(raw)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::NewKey;

    fn insert(store: &mut SqliteStore, i: u32) -> Result<(), StoreError> {
        let key = format!("{i:0200}");
        let mut tx = store.begin()?;
        tx.insert_key(&NewKey {
            caller_id: "c",
            idem_key: &key,
            request_hash: &[7; 32],
            lease_token: &[1; 16],
            now_ms: 0,
            locked_until_ms: 1,
            expires_at_ms: 2,
        })?;
        tx.commit()
    }

    /// A writer opened for a background checkpointer never checkpoints in its commits; by
    /// default it does, as SQLite does.
    #[test]
    fn a_writer_leaves_checkpoints_to_another_connection_when_asked() {
        let dir = tempfile::tempdir().unwrap();
        // Left to another connection, the writer still checkpoints past the WAL's bound.
        let bound = (super::super::checkpoint::WAL_LIMIT_BYTES / u64::from(PAGE_SIZE)) as i64;
        for (inline, bounded, pages) in
            [(true, true, 1000), (false, true, bound), (false, false, 0)]
        {
            let path = dir.path().join(format!("c{inline}{bounded}.sqlite"));
            let options = SqliteOptions {
                inline_checkpoints: inline,
                bounded_wal: bounded,
                ..SqliteOptions::default()
            };
            let store = SqliteStore::open(&path, &options).unwrap();
            let got: i64 = store
                .connection()
                .query_row("PRAGMA wal_autocheckpoint", [], |r| r.get(0))
                .unwrap();
            assert_eq!(got, pages, "inline_checkpoints {inline}, bounded {bounded}");
        }
    }

    #[test]
    fn a_store_in_memory_has_the_files_page_size_and_rolls_back() {
        let mut store = SqliteStore::open_memory().unwrap();
        assert_eq!(store.describe(), MEMORY_NAME);
        let page_size: u32 = store
            .conn
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .unwrap();
        assert_eq!(page_size, PAGE_SIZE);
        insert(&mut store, 1).unwrap();
        // A transaction dropped without commit leaves nothing behind, as the engine's answers
        // (and its simulated crashes) need.
        {
            let mut tx = store.begin().unwrap();
            let key = "dropped";
            tx.insert_key(&NewKey {
                caller_id: "c",
                idem_key: key,
                request_hash: &[7; 32],
                lease_token: &[1; 16],
                now_ms: 0,
                locked_until_ms: 1,
                expires_at_ms: 2,
            })
            .unwrap();
        }
        assert_eq!(store.count_keys().unwrap(), 1);
        assert!(store.get_key("c", "dropped").unwrap().is_none());
    }

    #[test]
    fn a_full_store_in_memory_says_how_to_keep_a_larger_one() {
        let mut store = SqliteStore::open_memory_capped(16 * u64::from(PAGE_SIZE)).unwrap();
        let e = (0..10_000)
            .find_map(|i| insert(&mut store, i).err())
            .expect("16 pages fill up")
            .to_string();
        assert!(e.contains("in memory") && e.contains("--db FILE"), "{e}");
    }
}
