//! The server store: the seed's schema and SQL on PostgreSQL, nearly verbatim.
//!
//! Txn 1 is the seed's `INSERT … ON CONFLICT (caller_id, idem_key) DO NOTHING` followed, when the
//! key exists, by `SELECT … FOR UPDATE`: row locks, not a database-wide write lock as in SQLite,
//! so attempts on different keys never wait for each other and attempts on one key queue on its
//! row. Transactions run at PostgreSQL's default READ COMMITTED: a statement that waited for a row
//! lock re-reads the row's latest committed version, which is what makes txn 2's
//! `WHERE lease_token = $mine` see a takeover that committed while it waited.
//!
//! Everything lives in one schema named by the user (default `idemcalc`), created or migrated on
//! first use, so the store never touches other tables. Each connection sets `search_path` to that
//! schema only, so the statements below read like the seed's listing.
//!
//! Column types are the seed's: `bytea` hash, `timestamptz` times, `uuid` lease token, an enum
//! for the state. Two deliberate departures, each explained where it is made: the
//! response body is `text`, not `jsonb` (replays must be byte-identical), and the label's numbers
//! are `bigint` (the engine accepts any positive 64-bit order, parcel and version).
//!
//! Timestamps come from the engine's injected clock as integer milliseconds and travel as
//! `timestamptz` through `std::time::SystemTime` (exact: PostgreSQL keeps microseconds). The SQL
//! never calls `now()`, so a virtual clock drives the server as it drives SQLite.

use super::{
    Completion, Invariants, KeyRow, KeyState, LabelRow, LeaseToken, NewKey, Store, StoreBytes,
    StoreError, Synchronous, Tx,
};
use crate::clock::Millis;
use postgres::error::SqlState;
use postgres::{Client, NoTls, Row, Statement};
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use uuid::Uuid;

/// Bumped whenever the schema changes; each version's DDL is applied once, in order, and a schema
/// written by a newer idemcalc is refused rather than misread.
pub const SCHEMA_VERSION: i32 = 1;

/// The schema used when neither `?schema=` nor an option names one.
pub const DEFAULT_SCHEMA: &str = "idemcalc";

/// Upper bound on `--pool`: PostgreSQL's default `max_connections` is 100, and a pool bigger than
/// the server allows only turns into connection errors under load.
pub const MAX_POOL_SIZE: u32 = 256;

/// PostgreSQL identifiers are at most 63 bytes (NAMEDATALEN - 1); longer ones are truncated
/// silently by the server, which would make two schema names one.
const MAX_SCHEMA_NAME_BYTES: usize = 63;

/// Version 1 of the schema. `{s}` is the quoted schema name; `{key}` (the key table's primary
/// key), `{partitioning}` and `{expires_index}` depend on the sweeper (see [`schema_v1`]). Columns are
/// ordered for the heap tuple's alignment (8-byte timestamps first, then 4-byte, then
/// byte-aligned and variable width): in the seed's order each `timestamptz` after a text column
/// costs up to 7 bytes of padding. The state is the seed's enum: 4 bytes where `text`
/// 'completed' takes 10.
const SCHEMA_V1: &str = "
CREATE TYPE {s}.key_state AS ENUM ('started', 'completed');
CREATE TABLE {s}.idempotency_keys (
    created_at      timestamptz    NOT NULL,
    expires_at      timestamptz    NOT NULL,
    locked_until    timestamptz,
    response_status int4,
    state           {s}.key_state NOT NULL,
    lease_token     uuid,
    request_hash    bytea          NOT NULL,
    caller_id       text           NOT NULL,
    idem_key        text           NOT NULL,
    -- text, not the seed's jsonb: jsonb re-renders JSON (spaces after ':' and ',', keys reordered
    -- by length), and a replay must return the saved body byte for byte.
    response_body   text,
    {key}
){partitioning};
{expires_index}
CREATE TABLE {s}.labels (
    -- Insertion order, as SQLite's rowid gives it, so both stores list labels alike.
    label_seq      bigserial NOT NULL,
    order_id       bigint    NOT NULL,
    parcel_no      bigint    NOT NULL,
    label_version  bigint    NOT NULL,
    cost_cents     bigint    NOT NULL,
    label_id       text      NOT NULL,
    tracking_no    text      NOT NULL,
    created_by_key text      NOT NULL,
    caller_id      text      NOT NULL DEFAULT '',
    CONSTRAINT labels_pkey PRIMARY KEY (label_id),
    CONSTRAINT labels_parcel_version UNIQUE (caller_id, order_id, parcel_no, label_version)
);
";

/// Version 1's DDL for a sweeper. With partitions, the key table is partitioned by range of
/// `expires_at`, and a primary key on a partitioned table must contain the partition key: the
/// seed's `UNIQUE (caller_id, idem_key)` cannot be declared, so claims serialise on a per-key
/// advisory lock instead (see [`Statements`]). No `expires_at` index: a partition is dropped
/// whole, never searched by expiry.
fn schema_v1(sweeper: Sweeper) -> String {
    let (key, partitioning, expires_index) = match sweeper {
        Sweeper::Delete => (
            "CONSTRAINT idempotency_keys_pkey PRIMARY KEY (caller_id, idem_key)",
            "",
            "CREATE INDEX idempotency_keys_expires_at ON {s}.idempotency_keys (expires_at);",
        ),
        Sweeper::Partitions { .. } => (
            "CONSTRAINT idempotency_keys_pkey PRIMARY KEY (caller_id, idem_key, expires_at)",
            " PARTITION BY RANGE (expires_at)",
            "",
        ),
    };
    SCHEMA_V1
        .replace("{key}", key)
        .replace("{partitioning}", partitioning)
        .replace("{expires_index}", expires_index)
}

/// How expired key records leave the store (`--sweeper`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sweeper {
    /// The seed's: batched `DELETE … WHERE expires_at <= now` over an index on `expires_at`.
    /// Every purged row leaves a dead tuple for vacuum, and its WAL.
    #[default]
    Delete,
    /// The key table partitioned by `expires_at`, one partition per `period_ms`; a partition
    /// whose whole range has expired is detached and dropped. No dead tuples and almost no WAL,
    /// but a record lives until its partition ends: up to one period past its retention.
    Partitions { period_ms: Millis },
}

impl Sweeper {
    /// Whether the key table is partitioned: no unique index then spans it.
    pub fn partitioned(self) -> bool {
        matches!(self, Sweeper::Partitions { .. })
    }
}

/// How to reach the server and what to create there.
#[derive(Debug, Clone, PartialEq)]
pub struct PgOptions {
    /// The schema that holds the store's tables.
    pub schema: String,
    /// At most this many connections open at once (`--pool`).
    pub pool_size: u32,
    /// `Off` sets `synchronous_commit = off` (a commit returns before its WAL reaches disk; a
    /// server crash may lose the last few hundred milliseconds of commits, never consistency);
    /// `Normal` and `Full` keep the server's `on`.
    pub synchronous: Synchronous,
    /// How long to wait for the server to accept a connection.
    pub connect_timeout: Duration,
    /// How long [`PgPool::get`] waits for a connection when all `pool_size` are in use.
    pub checkout_timeout: Duration,
    /// Hold the schema for this process while the pool lives (a session advisory lock), so a
    /// second process that names it is refused instead of writing into a run's rows.
    pub exclusive: bool,
    /// How expired records go; a schema keeps the layout it was created with.
    pub sweeper: Sweeper,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            schema: DEFAULT_SCHEMA.to_string(),
            pool_size: 8,
            synchronous: Synchronous::Normal,
            connect_timeout: Duration::from_secs(5),
            checkout_timeout: Duration::from_secs(30),
            exclusive: true,
            sweeper: Sweeper::Delete,
        }
    }
}

/// Checks a schema name: lower-case letters, digits and `_`, not starting with a digit, at most
/// 63 bytes. Restrictive on purpose: such a name needs no quoting rules to be safe in DDL and
/// means the same thing quoted or not.
pub fn check_schema_name(name: &str) -> Result<(), String> {
    let ok_start = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let ok_rest = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !ok_start || !ok_rest || name.len() > MAX_SCHEMA_NAME_BYTES {
        return Err(format!(
            "schema name `{name}` is not allowed: use 1 to {MAX_SCHEMA_NAME_BYTES} lower-case letters, digits and `_`, not starting with a digit (e.g. `idemcalc`)"
        ));
    }
    if name.starts_with("pg_") {
        return Err(format!(
            "schema name `{name}` is reserved: names starting with `pg_` belong to PostgreSQL"
        ));
    }
    Ok(())
}

/// The URL with any password replaced by `***`, for messages and reports.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let (scheme, rest) = url.split_at(scheme_end + 3);
    // The user information ends at the last '@' before the query: a password may itself hold
    // '@' or '/' (unescaped), and every character of it must go.
    let query_start = rest.find('?').unwrap_or(rest.len());
    let (before_query, tail) = rest.split_at(query_start);
    let before_query = match before_query.rfind('@') {
        Some(at) => {
            let (userinfo, host_and_path) = before_query.split_at(at);
            match userinfo.find(':') {
                Some(colon) => format!("{}:***{host_and_path}", &userinfo[..colon]),
                None => before_query.to_string(),
            }
        }
        None => before_query.to_string(),
    };
    // A password may also travel as a query parameter.
    let tail = match tail.strip_prefix('?') {
        Some(query) => {
            let params: Vec<String> = query
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => p.to_string(),
                })
                .collect();
            format!("?{}", params.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}{before_query}{tail}")
}

/// The text of a PostgreSQL error with what the driver's own `Display` leaves out: the server's
/// message, SQLSTATE, detail and hint, or the I/O cause.
pub fn pg_message(e: &postgres::Error) -> String {
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

/// The statements of the two transactions and the store's queries, prepared once per connection:
/// each then costs one round trip instead of a parse and a round trip more.
struct Statements {
    /// With partitions only: the per-key advisory lock a claim takes first (see `insert_key`).
    claim_lock: Option<Statement>,
    insert_key: Statement,
    lock_key: Statement,
    get_key: Statement,
    take_over: Statement,
    release_lease: Statement,
    complete_key: Statement,
    set_response_body: Statement,
    insert_label: Statement,
    select_label: Statement,
    delete_key: Statement,
    sweep: Statement,
    count_keys: Statement,
    count_labels: Statement,
    labels: Statement,
}

/// `state::text`: the driver reads an enum only as text.
macro_rules! key_columns {
    () => {
        "request_hash, state::text, locked_until, lease_token, response_status, response_body, created_at, expires_at"
    };
}
const KEY_COLUMNS: &str = key_columns!();

macro_rules! label_columns {
    () => {
        "label_id, order_id, parcel_no, label_version, tracking_no, cost_cents, created_by_key, caller_id"
    };
}
const LABEL_COLUMNS: &str = label_columns!();

/// The statements of the engine's two transactions, as text. The store prepares them, and the
/// bench's raw-SQL baseline (`bench::pg`) prepares the very same text, so the baseline runs the
/// engine's SQL and nothing else.
pub(crate) mod sql {
    /// A claim's per-key lock on a partitioned key table, where no unique index can serialise
    /// two claims of one key.
    pub const CLAIM_LOCK: &str =
        "SELECT pg_advisory_xact_lock(hashtextextended($1 || chr(31) || $2, 0))";
    pub const INSERT_KEY: &str = "INSERT INTO idempotency_keys
           (caller_id, idem_key, request_hash, state, locked_until, lease_token, created_at, expires_at)
         VALUES ($1, $2, $3, 'started', $4, $5, $6, $7)
         ON CONFLICT (caller_id, idem_key) DO NOTHING";
    /// [`INSERT_KEY`] after [`CLAIM_LOCK`]: inserts only if no record of the key exists.
    pub const INSERT_KEY_PARTITIONED: &str = "INSERT INTO idempotency_keys
           (caller_id, idem_key, request_hash, state, locked_until, lease_token, created_at, expires_at)
         SELECT $1::text, $2::text, $3::bytea, 'started', $4::timestamptz, $5::uuid,
                $6::timestamptz, $7::timestamptz
          WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys
                             WHERE caller_id = $1 AND idem_key = $2)";
    pub const LOCK_KEY: &str = concat!(
        "SELECT ",
        key_columns!(),
        " FROM idempotency_keys WHERE caller_id = $1 AND idem_key = $2 FOR UPDATE"
    );
    pub const TAKE_OVER: &str = "UPDATE idempotency_keys SET locked_until = $3, lease_token = $4
          WHERE caller_id = $1 AND idem_key = $2";
    pub const COMPLETE_KEY: &str = "UPDATE idempotency_keys
            SET state = 'completed', locked_until = NULL, lease_token = NULL,
                response_status = $3, response_body = $4, expires_at = $5
          WHERE caller_id = $1 AND idem_key = $2
            AND state = 'started' AND lease_token = $6";
    pub const INSERT_LABEL: &str = concat!(
        "INSERT INTO labels (",
        label_columns!(),
        ") VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
         ON CONFLICT (caller_id, order_id, parcel_no, label_version) DO NOTHING"
    );
}

impl Statements {
    /// With `partitioned`, no unique index can span the partitions, so a claim is two
    /// statements: a transaction-scoped advisory lock on a hash of (caller, key), then an insert
    /// that checks no record exists. The check runs after the lock is granted, so under READ
    /// COMMITTED it sees any claim of the same key that committed meanwhile; a concurrent claim
    /// waits for the lock until this transaction ends, then sees this row.
    fn prepare(client: &mut Client, partitioned: bool) -> Result<Self, postgres::Error> {
        let (claim_lock, insert_key) = if partitioned {
            (
                Some(client.prepare(sql::CLAIM_LOCK)?),
                client.prepare(sql::INSERT_KEY_PARTITIONED)?,
            )
        } else {
            (None, client.prepare(sql::INSERT_KEY)?)
        };
        Ok(Self {
            claim_lock,
            insert_key,
            lock_key: client.prepare(sql::LOCK_KEY)?,
            get_key: client.prepare(&format!(
                "SELECT {KEY_COLUMNS} FROM idempotency_keys WHERE caller_id = $1 AND idem_key = $2"
            ))?,
            take_over: client.prepare(sql::TAKE_OVER)?,
            release_lease: client.prepare(
                "UPDATE idempotency_keys SET locked_until = $3
                  WHERE caller_id = $1 AND idem_key = $2 AND state = 'started' AND lease_token = $4",
            )?,
            complete_key: client.prepare(sql::COMPLETE_KEY)?,
            set_response_body: client.prepare(
                "UPDATE idempotency_keys SET response_body = $3
                  WHERE caller_id = $1 AND idem_key = $2",
            )?,
            insert_label: client.prepare(sql::INSERT_LABEL)?,
            select_label: client.prepare(&format!(
                "SELECT {LABEL_COLUMNS} FROM labels
                  WHERE order_id = $1 AND parcel_no = $2 AND label_version = $3
                    AND caller_id = $4"
            ))?,
            delete_key: client.prepare(
                "DELETE FROM idempotency_keys
                  WHERE caller_id = $1 AND idem_key = $2 AND state = 'started' AND lease_token = $3",
            )?,
            // SKIP LOCKED: a record that an attempt holds locked right now is left for the next
            // batch instead of making the sweeper wait behind it.
            sweep: client.prepare(
                "DELETE FROM idempotency_keys WHERE (caller_id, idem_key) IN (
                    SELECT caller_id, idem_key FROM idempotency_keys
                     WHERE expires_at <= $1 ORDER BY expires_at LIMIT $2
                       FOR UPDATE SKIP LOCKED)
                 RETURNING caller_id, idem_key",
            )?,
            count_keys: client.prepare("SELECT count(*) FROM idempotency_keys")?,
            count_labels: client.prepare("SELECT count(*) FROM labels")?,
            labels: client.prepare(&format!(
                "SELECT {LABEL_COLUMNS} FROM labels ORDER BY label_seq"
            ))?,
        })
    }
}

/// One open connection with its prepared statements.
pub(crate) struct Conn {
    client: Client,
    st: Statements,
    /// The pool generation it was opened in: connections of an older generation (from before
    /// [`PgPool::drop_schema`] or [`PgPool::close_idle`]) are closed instead of reused, since
    /// their prepared statements may name dropped tables.
    generation: u64,
    /// Set when a statement found the connection dead: the pool closes it instead of keeping it.
    broken: bool,
}

/// What the pool crate needs to open, check and retire our connections. Opening one is
/// connect, `search_path`, `synchronous_commit` and the prepared statements.
struct PgManager {
    shared: Arc<PoolInner>,
}

impl r2d2::ManageConnection for PgManager {
    type Connection = Conn;
    type Error = StoreError;

    fn connect(&self) -> Result<Conn, StoreError> {
        let client = self.shared.raw_connect()?;
        self.shared.setup(client)
    }

    /// Checked on every checkout without a round trip: only what the client already knows.
    fn is_valid(&self, conn: &mut Conn) -> Result<(), StoreError> {
        if self.has_broken(conn) {
            return Err(self.shared.open_err("connection closed or retired".into()));
        }
        Ok(())
    }

    fn has_broken(&self, conn: &mut Conn) -> bool {
        conn.broken
            || conn.client.is_closed()
            || conn.generation != self.shared.generation.load(Ordering::Acquire)
    }
}

struct PoolInner {
    config: postgres::Config,
    options: PgOptions,
    /// The redacted URL and schema, for every message.
    location: String,
    /// Bumped to retire every connection open now (see [`Conn::generation`]).
    generation: AtomicU64,
    /// Holds the schema for this process while any pool on it lives (see `store::exclusive`).
    _exclusive: Option<Arc<super::exclusive::Held>>,
    /// With partitions: the start of every partition known to exist.
    partitions: Mutex<BTreeSet<Millis>>,
    /// With partitions: the connection that creates them.
    ddl: Mutex<Option<Client>>,
}

/// A partition's name: the start of its range in milliseconds since the Unix epoch.
fn partition_name(from_ms: Millis) -> String {
    if from_ms < 0 {
        format!("idempotency_keys_m{}", from_ms.unsigned_abs())
    } else {
        format!("idempotency_keys_p{from_ms}")
    }
}

/// The start of a partition's range from its name, for the sweeper.
fn partition_start(name: &str) -> Option<Millis> {
    if let Some(n) = name.strip_prefix("idempotency_keys_p") {
        n.parse().ok()
    } else {
        name.strip_prefix("idempotency_keys_m")?
            .parse::<Millis>()
            .ok()
            .map(|n| -n)
    }
}

/// A connection pool (the `r2d2` crate) of at most `pool_size` connections, each handed out as
/// a [`PostgresStore`] that gives its connection back when dropped. Cloning shares the pool.
#[derive(Clone)]
pub struct PgPool {
    inner: Arc<PoolInner>,
    pool: r2d2::Pool<PgManager>,
}

impl std::fmt::Debug for PgPool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.inner.location)
    }
}

impl PgPool {
    /// Connects to `url`, creates or migrates the schema named in `options`, and sets up the
    /// pool. Fails early, with a message that names the server (password redacted) and says
    /// what to check, if the server cannot be reached or refuses us, or if another process
    /// holds the schema (`options.exclusive`).
    pub fn connect(url: &str, options: &PgOptions) -> Result<Self, StoreError> {
        let location = format!("{} (schema {})", redact_url(url), options.schema);
        let fail = |message: String| StoreError::Open {
            location: location.clone(),
            message,
        };
        check_schema_name(&options.schema).map_err(&fail)?;
        if let Sweeper::Partitions { period_ms } = options.sweeper
            && period_ms < 1_000
        {
            return Err(fail(format!(
                "a partition period of {period_ms} ms is not allowed: use 1s or more"
            )));
        }
        if options.pool_size == 0 || options.pool_size > MAX_POOL_SIZE {
            return Err(fail(format!(
                "a pool of {} connections is not allowed: use 1 to {MAX_POOL_SIZE}",
                options.pool_size
            )));
        }
        let mut config: postgres::Config = url.parse().map_err(|e: postgres::Error| {
            fail(format!(
                "not a PostgreSQL URL ({}); expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE",
                pg_message(&e)
            ))
        })?;
        if config.get_connect_timeout().is_none() {
            config.connect_timeout(options.connect_timeout);
        }
        if config.get_application_name().is_none() {
            config.application_name("idemcalc");
        }
        let mut inner = PoolInner {
            config,
            options: options.clone(),
            location,
            generation: AtomicU64::new(0),
            _exclusive: None,
            partitions: Mutex::new(BTreeSet::new()),
            ddl: Mutex::new(None),
        };
        // The first connection reports a refused or unreachable server with its own message;
        // then the schema is held (before anything touches it), then created or migrated before
        // any statement is prepared against its tables.
        let mut client = inner.raw_connect()?;
        if options.exclusive {
            inner._exclusive = Some(super::exclusive::hold_pg_schema(
                &inner.config,
                &options.schema,
                &inner.location,
            )?);
        }
        inner.migrate(&mut client)?;
        if options.sweeper.partitioned() {
            inner.load_partitions(&mut client)?;
        }
        drop(inner.setup(client)?);
        let inner = Arc::new(inner);
        let pool = r2d2::Pool::builder()
            .max_size(options.pool_size)
            // Connections open on demand: a pool of 64 for a test that uses 2 opens 2.
            .min_idle(Some(0))
            .connection_timeout(options.checkout_timeout)
            .error_handler(Box::new(r2d2::NopErrorHandler))
            .build_unchecked(PgManager {
                shared: inner.clone(),
            });
        Ok(Self { inner, pool })
    }

    /// A store on one of the pool's connections, opening one if fewer than `pool_size` are open,
    /// else waiting up to `checkout_timeout` for one to come back.
    pub fn get(&self) -> Result<PostgresStore, StoreError> {
        let conn = self.checkout()?;
        Ok(PostgresStore {
            conn: Some(conn),
            pool: self.clone(),
        })
    }

    fn checkout(&self) -> Result<r2d2::PooledConnection<PgManager>, StoreError> {
        self.pool.get().map_err(|e| {
            let state = self.pool.state();
            if state.connections >= self.inner.options.pool_size {
                self.inner.open_err(format!(
                    "all {} connections of the pool stayed in use for {:?}; raise --pool or use fewer workers ({e})",
                    self.inner.options.pool_size, self.inner.options.checkout_timeout
                ))
            } else {
                self.inner
                    .open_err(format!("cannot open another connection: {e}"))
            }
        })
    }

    /// With partitions: creates every partition a record expiring between `from_ms` and
    /// `until_ms` needs, ahead of the writes (the bench's fill); nothing with `Sweeper::Delete`.
    pub fn create_partitions(&self, from_ms: Millis, until_ms: Millis) -> Result<(), StoreError> {
        let Sweeper::Partitions { period_ms } = self.inner.options.sweeper else {
            return Ok(());
        };
        let mut at = from_ms;
        while at <= until_ms {
            self.inner.ensure_partitions(period_ms, at)?;
            at += period_ms;
        }
        Ok(())
    }

    /// Whether the key table is partitioned (`--sweeper partitions`): no unique index spans it.
    pub fn partitioned(&self) -> bool {
        self.inner.options.sweeper.partitioned()
    }

    /// The redacted URL and schema.
    pub fn describe(&self) -> String {
        self.inner.location.clone()
    }

    pub fn schema(&self) -> &str {
        &self.inner.options.schema
    }

    /// Closes the connections nobody is using. A session's statistics (`pg_stat_user_tables`)
    /// are flushed when it ends, so measurements call this before reading them; the pool opens
    /// new connections on demand afterwards.
    pub fn close_idle(&self) {
        self.inner.generation.fetch_add(1, Ordering::AcqRel);
        // Every idle connection now fails its checkout check and is closed; none is handed out.
        while let Some(mut c) = self.pool.try_get() {
            c.broken = true;
        }
    }

    /// Drops the pool's schema with everything in it, for scratch schemas (tests, scenario runs)
    /// only. Waits at most 10 s for other sessions' locks rather than hang behind a stuck one.
    /// Every connection open now is retired: their prepared statements name the dropped tables.
    pub fn drop_schema(&self) -> Result<(), StoreError> {
        let mut store = self.get()?;
        let schema = quote_ident(self.schema());
        let dropped = store.client()?.batch_execute(&format!(
            "SET lock_timeout = '10s'; DROP SCHEMA IF EXISTS {schema} CASCADE; RESET lock_timeout;"
        ));
        drop(store);
        self.close_idle();
        dropped.map_err(|e| self.inner.pg_err(e))
    }
}

impl PoolInner {
    fn open_err(&self, message: String) -> StoreError {
        StoreError::Open {
            location: self.location.clone(),
            message,
        }
    }

    fn pg_err(&self, e: postgres::Error) -> StoreError {
        StoreError::Postgres {
            location: self.location.clone(),
            error: e,
        }
    }

    fn raw_connect(&self) -> Result<Client, StoreError> {
        self.config
            .connect(NoTls)
            .map_err(|e| self.open_err(explain_connect(&e, &self.config)))
    }

    /// Per-connection settings and prepared statements.
    fn setup(&self, mut client: Client) -> Result<Conn, StoreError> {
        let sync = match self.options.synchronous {
            Synchronous::Off => "off",
            Synchronous::Normal | Synchronous::Full => "on",
        };
        client
            .batch_execute(&format!(
                "SET search_path TO {}; SET synchronous_commit TO {sync};",
                quote_ident(&self.options.schema)
            ))
            .map_err(|e| self.pg_err(e))?;
        let st = Statements::prepare(&mut client, self.options.sweeper.partitioned()).map_err(|e| {
            let text = pg_message(&e);
            self.open_err(format!(
                "the schema's tables do not have the expected shape ({text}); was schema `{}` created by another program? Name another with ?schema=NAME",
                self.options.schema
            ))
        })?;
        Ok(Conn {
            client,
            st,
            generation: self.generation.load(Ordering::Acquire),
            broken: false,
        })
    }

    /// A transaction holding the schema's catalog lock: `CREATE … IF NOT EXISTS` alone is not
    /// safe against a concurrent identical create.
    fn catalog_tx<'c>(
        &self,
        client: &'c mut Client,
    ) -> Result<postgres::Transaction<'c>, StoreError> {
        let mut tx = client.transaction().map_err(|e| self.pg_err(e))?;
        tx.execute(
            "SELECT pg_advisory_xact_lock($1)",
            &[&migration_lock_key(&self.options.schema)],
        )
        .map_err(|e| self.pg_err(e))?;
        Ok(tx)
    }

    /// Creates the schema and applies every missing version, under a transaction-scoped advisory
    /// lock so two processes opening a new schema at once do not race on the catalog (`CREATE …
    /// IF NOT EXISTS` alone is not safe against a concurrent identical create).
    fn migrate(&self, client: &mut Client) -> Result<(), StoreError> {
        let schema = quote_ident(&self.options.schema);
        let mut tx = self.catalog_tx(client)?;
        tx.batch_execute(&format!(
            "CREATE SCHEMA IF NOT EXISTS {schema};
             CREATE TABLE IF NOT EXISTS {schema}.schema_version (version int4 NOT NULL PRIMARY KEY);"
        ))
        .map_err(|e| {
            let text = pg_message(&e);
            self.open_err(format!(
                "cannot create schema `{}` ({text}); the user needs CREATE on the database, or an administrator can create the schema and grant it",
                self.options.schema
            ))
        })?;
        let version: i32 = tx
            .query_one(
                &format!("SELECT COALESCE(MAX(version), 0) FROM {schema}.schema_version"),
                &[],
            )
            .and_then(|r| r.try_get(0))
            .map_err(|e| self.pg_err(e))?;
        if version > SCHEMA_VERSION {
            return Err(self.open_err(format!(
                "the schema has version {version}, newer than this idemcalc understands ({SCHEMA_VERSION}); use a newer idemcalc or another schema (?schema=NAME)"
            )));
        }
        let migrations: [String; 1] = [schema_v1(self.options.sweeper)];
        for (i, ddl) in migrations.iter().enumerate() {
            let v = i as i32 + 1;
            if v <= version {
                continue;
            }
            tx.batch_execute(&ddl.replace("{s}", &schema))
                .map_err(|e| {
                    if e.code() == Some(&SqlState::DUPLICATE_TABLE)
                        || e.code() == Some(&SqlState::DUPLICATE_OBJECT)
                    {
                        self.open_err(format!(
                            "schema `{}` already holds tables idemcalc did not create ({}); name another schema with ?schema=NAME",
                            self.options.schema,
                            pg_message(&e)
                        ))
                    } else {
                        self.pg_err(e)
                    }
                })?;
            tx.execute(
                &format!("INSERT INTO {schema}.schema_version (version) VALUES ($1)"),
                &[&v],
            )
            .map_err(|e| self.pg_err(e))?;
        }
        let partitioned: bool = tx
            .query_one(
                "SELECT EXISTS (SELECT 1 FROM pg_partitioned_table
                                 WHERE partrelid = to_regclass($1))",
                &[&format!("{schema}.idempotency_keys")],
            )
            .and_then(|r| r.try_get(0))
            .map_err(|e| self.pg_err(e))?;
        let wanted = self.options.sweeper.partitioned();
        if let (true, Sweeper::Partitions { period_ms }) = (partitioned, self.options.sweeper) {
            // Partitions of two lengths would overlap: a schema keeps the period it began with.
            tx.batch_execute(&format!(
                "CREATE TABLE IF NOT EXISTS {schema}.partitioning (period_ms int8 NOT NULL)"
            ))
            .map_err(|e| self.pg_err(e))?;
            let kept: Option<i64> = tx
                .query_opt(&format!("SELECT period_ms FROM {schema}.partitioning"), &[])
                .and_then(|r| r.map(|r| r.try_get(0)).transpose())
                .map_err(|e| self.pg_err(e))?;
            match kept {
                None => {
                    tx.execute(
                        &format!("INSERT INTO {schema}.partitioning (period_ms) VALUES ($1)"),
                        &[&period_ms],
                    )
                    .map_err(|e| self.pg_err(e))?;
                }
                Some(p) if p != period_ms => {
                    return Err(self.open_err(format!(
                        "schema `{}` is partitioned by periods of {p} ms, not {period_ms} ms; give that --partition-period or name another schema with ?schema=NAME",
                        self.options.schema
                    )));
                }
                Some(_) => {}
            }
        }
        if partitioned != wanted {
            let made_for = if partitioned { "partitions" } else { "delete" };
            return Err(self.open_err(format!(
                "schema `{}` was created for --sweeper {made_for}, and a schema keeps its layout; name another schema with ?schema=NAME",
                self.options.schema
            )));
        }
        tx.commit().map_err(|e| self.pg_err(e))
    }

    /// The partitions that exist now, by name.
    fn partition_names(&self, client: &mut Client) -> Result<Vec<String>, StoreError> {
        let schema = quote_ident(&self.options.schema);
        let rows = client
            .query(
                "SELECT c.relname::text FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
                  WHERE i.inhparent = to_regclass($1)",
                &[&format!("{schema}.idempotency_keys")],
            )
            .map_err(|e| self.pg_err(e))?;
        rows.iter()
            .map(|r| r.try_get(0).map_err(|e| self.pg_err(e)))
            .collect()
    }

    fn load_partitions(&self, client: &mut Client) -> Result<(), StoreError> {
        let names = self.partition_names(client)?;
        let mut known = self.partitions.lock().unwrap_or_else(|p| p.into_inner());
        known.extend(names.iter().filter_map(|n| partition_start(n)));
        Ok(())
    }

    /// The partition holding `expires_at_ms` and the next one, created if missing, on a
    /// connection of their own, so the caller's transaction holds no lock of the DDL's and the
    /// DDL none of the caller's. Once per period per pool.
    fn ensure_partitions(
        &self,
        period_ms: Millis,
        expires_at_ms: Millis,
    ) -> Result<(), StoreError> {
        let start = expires_at_ms.div_euclid(period_ms) * period_ms;
        let wanted = [start, start + period_ms];
        let mut known = self.partitions.lock().unwrap_or_else(|p| p.into_inner());
        if wanted.iter().all(|s| known.contains(s)) {
            return Ok(());
        }
        let mut ddl = self.ddl.lock().unwrap_or_else(|p| p.into_inner());
        if ddl.as_ref().is_none_or(|c| c.is_closed()) {
            *ddl = Some(self.raw_connect()?);
        }
        let client = ddl.as_mut().expect("connected above");
        let schema = quote_ident(&self.options.schema);
        // Two pools creating the same partition at once would race on the catalog.
        let mut tx = self.catalog_tx(client)?;
        tx.batch_execute("SET LOCAL lock_timeout = '30s'")
            .map_err(|e| self.pg_err(e))?;
        for from in wanted {
            let name = format!("{schema}.{}", quote_ident(&partition_name(from)));
            let exists: bool = tx
                .query_one("SELECT to_regclass($1) IS NOT NULL", &[&name])
                .and_then(|r| r.try_get(0))
                .map_err(|e| self.pg_err(e))?;
            if !exists {
                // Created apart, then attached: ATTACH takes only a SHARE UPDATE EXCLUSIVE lock
                // on the key table, so claims and lookups go on meanwhile (CREATE TABLE …
                // PARTITION OF would take an ACCESS EXCLUSIVE one).
                tx.batch_execute(&format!(
                    "CREATE TABLE {name} (LIKE {schema}.idempotency_keys INCLUDING DEFAULTS);
                     ALTER TABLE {schema}.idempotency_keys ATTACH PARTITION {name}
                       FOR VALUES FROM (to_timestamp({from}::float8 / 1000))
                                    TO (to_timestamp({to}::float8 / 1000));",
                    to = from + period_ms,
                ))
                .map_err(|e| self.pg_err(e))?;
            }
            known.insert(from);
        }
        tx.commit().map_err(|e| self.pg_err(e))
    }
}

/// `"name"`: the schema name is already restricted by [`check_schema_name`]; quoting keeps it
/// exact even so.
fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// A stable 64-bit key for the schema's migration lock (FNV-1a of a prefix and the name), so
/// different schemas migrate independently.
fn migration_lock_key(schema: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in "idemcalc-migrate:".bytes().chain(schema.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h as i64
}

/// Turns a failed connection into a message that says what to check.
fn explain_connect(e: &postgres::Error, config: &postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("(the OS user)");
    let dbname = config.get_dbname().unwrap_or(user);
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        return if *code == SqlState::INVALID_PASSWORD {
            format!(
                "password authentication failed for user `{user}`: check the user and password in the URL ({})",
                db.message()
            )
        } else if *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION {
            format!(
                "the server refused user `{user}` ({}): check the user name, and that pg_hba.conf lets it in from this host",
                db.message()
            )
        } else if *code == SqlState::INVALID_CATALOG_NAME {
            format!(
                "database `{dbname}` does not exist on {host}:{port}: create it (createdb -h {host} -p {port} -U {user} {dbname}) or name an existing one in the URL"
            )
        } else if *code == SqlState::TOO_MANY_CONNECTIONS {
            format!(
                "the server has no free connection slots ({}): lower --pool or raise max_connections",
                db.message()
            )
        } else {
            format!("the server refused the connection: {}", pg_message(e))
        };
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => format!(
                    "connection refused by {host}:{port}: is PostgreSQL running there and listening on TCP? (e.g. pg_ctlcluster <version> main start), or fix the host and port in the URL"
                ),
                std::io::ErrorKind::TimedOut => format!(
                    "no answer from {host}:{port} within the connect timeout: check the host, port and any firewall"
                ),
                _ => format!("cannot reach {host}:{port}: {io}"),
            };
        }
        source = s.source();
    }
    let text = pg_message(e);
    if text.contains("password missing") {
        format!(
            "the server asks user `{user}` for a password and the URL has none: use postgres://{user}:PASSWORD@{host}:{port}/{dbname}"
        )
    } else if text.contains("timeout") {
        format!("no answer from {host}:{port} within the connect timeout ({text})")
    } else {
        format!("cannot connect to {host}:{port}: {text}")
    }
}

fn to_time(ms: Millis) -> SystemTime {
    if ms >= 0 {
        UNIX_EPOCH + Duration::from_millis(ms as u64)
    } else {
        UNIX_EPOCH - Duration::from_millis(ms.unsigned_abs())
    }
}

fn to_millis(t: SystemTime) -> Millis {
    match t.duration_since(UNIX_EPOCH) {
        Ok(d) => d.as_millis() as Millis,
        Err(before) => -(before.duration().as_millis() as Millis),
    }
}

fn key_row(r: &Row) -> Result<KeyRow, StoreError> {
    let corrupt = |e: postgres::Error| StoreError::Corrupt(format!("idempotency_keys row: {e}"));
    let status: Option<i32> = r.try_get(4).map_err(corrupt)?;
    let response_status = status
        .map(|s| {
            u16::try_from(s).map_err(|_| {
                StoreError::Corrupt(format!("response_status {s} is not an HTTP status"))
            })
        })
        .transpose()?;
    let state: String = r.try_get(1).map_err(corrupt)?;
    Ok(KeyRow {
        request_hash: r.try_get(0).map_err(corrupt)?,
        state: KeyState::parse(&state)?,
        locked_until_ms: r
            .try_get::<_, Option<SystemTime>>(2)
            .map_err(corrupt)?
            .map(to_millis),
        lease_token: r
            .try_get::<_, Option<Uuid>>(3)
            .map_err(corrupt)?
            .map(|u| *u.as_bytes()),
        response_status,
        response_body: r.try_get(5).map_err(corrupt)?,
        created_at_ms: to_millis(r.try_get(6).map_err(corrupt)?),
        expires_at_ms: to_millis(r.try_get(7).map_err(corrupt)?),
    })
}

fn label_row(r: &Row) -> Result<LabelRow, StoreError> {
    let corrupt = |e: postgres::Error| StoreError::Corrupt(format!("labels row: {e}"));
    Ok(LabelRow {
        label_id: r.try_get(0).map_err(corrupt)?,
        order_id: r.try_get(1).map_err(corrupt)?,
        parcel_no: r.try_get(2).map_err(corrupt)?,
        label_version: r.try_get(3).map_err(corrupt)?,
        tracking_no: r.try_get(4).map_err(corrupt)?,
        cost_cents: r.try_get(5).map_err(corrupt)?,
        created_by_key: r.try_get(6).map_err(corrupt)?,
        caller_id: r.try_get(7).map_err(corrupt)?,
    })
}

fn count(r: &Row) -> Result<u64, StoreError> {
    r.try_get::<_, i64>(0)
        .map(|n| n.max(0) as u64)
        .map_err(|e| StoreError::Corrupt(format!("count: {e}")))
}

/// One connection of a [`PgPool`], as a [`Store`]. Given back to the pool when dropped.
///
/// A connection can die while idle (a server restart, `pg_terminate_backend`), and the client
/// learns it only from its next statement. Statements that are safe to repeat (`BEGIN`, reads)
/// are then retried once on a fresh connection; a statement that may have done its work (a
/// commit, the sweeper's `DELETE`) reports the error, and the next call reconnects.
pub struct PostgresStore {
    conn: Option<r2d2::PooledConnection<PgManager>>,
    pool: PgPool,
}

/// The server closed this session or the socket is gone: a new connection is the only way on.
fn connection_lost(e: &postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.code() {
        Some(code) => {
            let c = code.code();
            // 57P01 admin_shutdown (pg_terminate_backend), 57P02 crash_shutdown, 57P03
            // cannot_connect_now; class 08 is "connection exception".
            c == "57P01" || c == "57P02" || c == "57P03" || c.starts_with("08")
        }
        // No SQLSTATE: lost only if the cause is an I/O failure on the socket.
        None => {
            let mut source = std::error::Error::source(e);
            while let Some(s) = source {
                if s.is::<std::io::Error>() {
                    return true;
                }
                source = s.source();
            }
            false
        }
    }
}

impl PostgresStore {
    /// A single connection: a pool of one, for callers that need no more.
    pub fn connect(url: &str, options: &PgOptions) -> Result<Self, StoreError> {
        PgPool::connect(url, options)?.get()
    }

    fn err(&self, e: postgres::Error) -> StoreError {
        self.pool.inner.pg_err(e)
    }

    /// The live connection, replacing one already known to be closed.
    fn conn(&mut self) -> Result<&mut Conn, StoreError> {
        if self
            .conn
            .as_ref()
            .is_none_or(|c| c.broken || c.client.is_closed())
        {
            // A dead connection given back is closed by the pool, not reused.
            self.conn = None;
            self.conn = Some(self.pool.checkout()?);
        }
        self.conn
            .as_deref_mut()
            .ok_or_else(|| StoreError::Corrupt("no connection".into()))
    }

    /// Runs `f`, which must be safe to repeat, once more on a fresh connection if the first
    /// found the connection dead.
    fn retrying<T>(
        &mut self,
        f: impl Fn(&mut Conn) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        match f(self.conn()?) {
            Err(e) if connection_lost(&e) => {
                if let Some(dead) = self.conn.as_mut() {
                    dead.broken = true;
                }
                f(self.conn()?).map_err(|e| self.err(e))
            }
            other => other.map_err(|e| self.err(e)),
        }
    }

    /// The partition sweeper: every partition whose range ended by `now_ms` holds only expired
    /// records, so it is detached (`CONCURRENTLY`: lookups and claims on the other partitions
    /// do not wait for it) and dropped. Its keys are read first for the caller's purge record,
    /// as the `DELETE`'s `RETURNING` gives them; production would skip that read.
    fn drop_expired_partitions(
        &mut self,
        now_ms: Millis,
        period_ms: Millis,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let inner = self.pool.inner.clone();
        let names = {
            let conn = self.conn()?;
            inner.partition_names(&mut conn.client)?
        };
        let schema = quote_ident(&inner.options.schema);
        let mut purged = Vec::new();
        let mut expired: Vec<(Millis, String)> = names
            .into_iter()
            .filter_map(|n| partition_start(&n).map(|s| (s, n)))
            .filter(|(start, _)| start + period_ms <= now_ms)
            .collect();
        expired.sort();
        for (start, name) in expired {
            let part = format!("{schema}.{}", quote_ident(&name));
            let conn = self.conn()?;
            let rows = conn
                .client
                .query(&format!("SELECT caller_id, idem_key FROM {part}"), &[])
                .map_err(|e| inner.pg_err(e))?;
            for r in &rows {
                purged.push((
                    r.try_get(0).map_err(|e| inner.pg_err(e))?,
                    r.try_get(1).map_err(|e| inner.pg_err(e))?,
                ));
            }
            conn.client
                .batch_execute(&format!(
                    "ALTER TABLE {schema}.idempotency_keys DETACH PARTITION {part} CONCURRENTLY"
                ))
                .map_err(|e| inner.pg_err(e))?;
            conn.client
                .batch_execute(&format!("DROP TABLE {part}"))
                .map_err(|e| inner.pg_err(e))?;
            inner
                .partitions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&start);
        }
        Ok(purged)
    }

    /// Whether the key table is partitioned (`--sweeper partitions`).
    pub fn partitioned(&self) -> bool {
        self.pool.partitioned()
    }

    /// The server process id of this store's connection, e.g. for `pg_terminate_backend`.
    pub fn backend_pid(&mut self) -> Result<i32, StoreError> {
        self.retrying(|c| {
            c.client
                .query_one("SELECT pg_backend_pid()", &[])?
                .try_get(0)
        })
    }

    /// The underlying client, for measurements and tests that need SQL the [`Store`] trait does
    /// not offer (statistics views, `VACUUM`). Its `search_path` is the store's schema.
    pub fn client(&mut self) -> Result<&mut Client, StoreError> {
        Ok(&mut self.conn()?.client)
    }

    pub fn schema(&self) -> &str {
        self.pool.schema()
    }

    /// Runs amcheck's `bt_index_check` (with `heapallindexed`) on the store's four indexes if the
    /// `amcheck` extension is installed in the database; `None` when it is not (the store never
    /// installs an extension itself: extensions are database-wide, and the store touches only its
    /// schema).
    fn amcheck(&mut self) -> Result<Option<bool>, StoreError> {
        let ns: Option<String> = self.retrying(|c| {
            c.client
                .query_opt(
                    "SELECT n.nspname FROM pg_extension e
                       JOIN pg_namespace n ON n.oid = e.extnamespace
                      WHERE e.extname = 'amcheck'",
                    &[],
                )?
                .map(|r| r.try_get(0))
                .transpose()
        })?;
        let Some(ns) = ns else { return Ok(None) };
        let sql = format!(
            "SELECT {}.bt_index_check(i.indexrelid, true) FROM pg_index i
              WHERE i.indrelid IN (SELECT relid FROM pg_partition_tree('idempotency_keys'::regclass)
                                    WHERE isleaf
                                   UNION ALL SELECT 'idempotency_keys'::regclass
                                   UNION ALL SELECT 'labels'::regclass)
                AND i.indisvalid AND NOT EXISTS (SELECT 1 FROM pg_partitioned_table p
                                                  WHERE p.partrelid = i.indrelid)",
            quote_ident(&ns)
        );
        match self.retrying(|c| c.client.execute(sql.as_str(), &[])) {
            Ok(_) => Ok(Some(true)),
            Err(StoreError::Postgres { error, location }) => match error.code() {
                Some(c) if *c == SqlState::INDEX_CORRUPTED || *c == SqlState::DATA_CORRUPTED => {
                    Ok(Some(false))
                }
                // Installed but not ours to call (amcheck is superuser-only unless granted).
                Some(c) if *c == SqlState::INSUFFICIENT_PRIVILEGE => Ok(None),
                _ => Err(StoreError::Postgres { error, location }),
            },
            Err(other) => Err(other),
        }
    }
}

/// A transaction on one connection: `BEGIN` was sent by [`Store::begin`]; `COMMIT` by
/// [`Tx::commit`]; dropping it unfinished sends `ROLLBACK`, as a crash would make the server do.
/// (Written by hand rather than with `postgres::Transaction` so that `begin` can retry a `BEGIN`
/// that found the connection dead.)
struct PgTx<'c> {
    conn: &'c mut Conn,
    pool: &'c PoolInner,
    finished: bool,
}

impl PgTx<'_> {
    fn err(&self, e: postgres::Error) -> StoreError {
        self.pool.pg_err(e)
    }
}

impl Drop for PgTx<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // On a dead connection this fails, and the server has rolled back already.
            let _ = self.conn.client.batch_execute("ROLLBACK");
        }
    }
}

impl PgTx<'_> {
    /// With partitions: makes sure the partition for a record expiring at `expires_at_ms`
    /// exists before a statement of this transaction touches the key table.
    fn ensure_partition(&self, expires_at_ms: Millis) -> Result<(), StoreError> {
        match self.pool.options.sweeper {
            Sweeper::Delete => Ok(()),
            Sweeper::Partitions { period_ms } => {
                self.pool.ensure_partitions(period_ms, expires_at_ms)
            }
        }
    }
}

impl Tx for PgTx<'_> {
    fn insert_key(&mut self, k: &NewKey<'_>) -> Result<bool, StoreError> {
        self.ensure_partition(k.expires_at_ms)?;
        let Conn { client, st, .. } = &mut *self.conn;
        if let Some(lock) = &st.claim_lock {
            client
                .execute(lock, &[&k.caller_id, &k.idem_key])
                .map_err(|e| self.pool.pg_err(e))?;
        }
        let n = client
            .execute(
                &st.insert_key,
                &[
                    &k.caller_id,
                    &k.idem_key,
                    &&k.request_hash[..],
                    &to_time(k.locked_until_ms),
                    &Uuid::from_bytes(*k.lease_token),
                    &to_time(k.now_ms),
                    &to_time(k.expires_at_ms),
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(n == 1)
    }

    fn lock_key(&mut self, caller_id: &str, idem_key: &str) -> Result<Option<KeyRow>, StoreError> {
        let Conn { client, st, .. } = &mut *self.conn;
        let row = client
            .query_opt(&st.lock_key, &[&caller_id, &idem_key])
            .map_err(|e| self.err(e))?;
        row.as_ref().map(key_row).transpose()
    }

    fn take_over(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        lease_token: &LeaseToken,
        locked_until_ms: Millis,
    ) -> Result<(), StoreError> {
        let Conn { client, st, .. } = &mut *self.conn;
        client
            .execute(
                &st.take_over,
                &[
                    &caller_id,
                    &idem_key,
                    &to_time(locked_until_ms),
                    &Uuid::from_bytes(*lease_token),
                ],
            )
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
        let Conn { client, st, .. } = &mut *self.conn;
        let n = client
            .execute(
                &st.release_lease,
                &[
                    &caller_id,
                    &idem_key,
                    &to_time(locked_until_ms),
                    &Uuid::from_bytes(*lease_token),
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(n == 1)
    }

    fn complete_key(&mut self, d: &Completion<'_>) -> Result<bool, StoreError> {
        // The new expiry may fall in a later partition: the row moves there.
        self.ensure_partition(d.expires_at_ms)?;
        let Conn { client, st, .. } = &mut *self.conn;
        let n = client
            .execute(
                &st.complete_key,
                &[
                    &d.caller_id,
                    &d.idem_key,
                    &i32::from(d.response_status),
                    &d.response_body,
                    &to_time(d.expires_at_ms),
                    &Uuid::from_bytes(*d.lease_token),
                ],
            )
            .map_err(|e| self.err(e))?;
        Ok(n == 1)
    }

    fn set_response_body(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        response_body: &str,
    ) -> Result<(), StoreError> {
        let Conn { client, st, .. } = &mut *self.conn;
        client
            .execute(
                &st.set_response_body,
                &[&caller_id, &idem_key, &response_body],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    fn insert_label(&mut self, l: &LabelRow) -> Result<Option<LabelRow>, StoreError> {
        let Conn { client, st, .. } = &mut *self.conn;
        let n = client
            .execute(
                &st.insert_label,
                &[
                    &l.label_id,
                    &l.order_id,
                    &l.parcel_no,
                    &l.label_version,
                    &l.tracking_no,
                    &l.cost_cents,
                    &l.created_by_key,
                    &l.caller_id,
                ],
            )
            .map_err(|e| self.err(e))?;
        if n == 1 {
            return Ok(None);
        }
        // READ COMMITTED: this statement sees the row whose commit made the insert conflict.
        let Conn { client, st, .. } = &mut *self.conn;
        let row = client
            .query_one(
                &st.select_label,
                &[&l.order_id, &l.parcel_no, &l.label_version, &l.caller_id],
            )
            .map_err(|e| self.err(e))?;
        label_row(&row).map(Some)
    }

    fn delete_key(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        lease_token: &LeaseToken,
    ) -> Result<(), StoreError> {
        let Conn { client, st, .. } = &mut *self.conn;
        client
            .execute(
                &st.delete_key,
                &[&caller_id, &idem_key, &Uuid::from_bytes(*lease_token)],
            )
            .map_err(|e| self.err(e))?;
        Ok(())
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        // Whatever COMMIT answers, the transaction is over: no ROLLBACK on drop.
        self.finished = true;
        self.conn
            .client
            .batch_execute("COMMIT")
            .map_err(|e| self.err(e))
    }
}

impl Store for PostgresStore {
    fn begin(&mut self) -> Result<Box<dyn Tx + '_>, StoreError> {
        // Retrying BEGIN is safe: nothing has run in the transaction yet.
        self.retrying(|c| c.client.batch_execute("BEGIN"))?;
        let pool: &PoolInner = &self.pool.inner;
        let conn = self
            .conn
            .as_deref_mut()
            .ok_or_else(|| StoreError::Corrupt("no connection".into()))?;
        Ok(Box::new(PgTx {
            conn,
            pool,
            finished: false,
        }))
    }

    fn sweep_batch(
        &mut self,
        now_ms: Millis,
        batch: u32,
    ) -> Result<Vec<(String, String)>, StoreError> {
        if let Sweeper::Partitions { period_ms } = self.pool.inner.options.sweeper {
            return self.drop_expired_partitions(now_ms, period_ms);
        }
        // One statement outside an explicit transaction is its own short transaction. Not
        // retried: a DELETE whose answer was lost may have committed.
        let conn = self.conn()?;
        let rows = conn
            .client
            .query(&conn.st.sweep, &[&to_time(now_ms), &i64::from(batch)]);
        let rows = rows.map_err(|e| self.err(e))?;
        rows.iter()
            .map(|r| {
                Ok((
                    r.try_get(0).map_err(|e| self.err(e))?,
                    r.try_get(1).map_err(|e| self.err(e))?,
                ))
            })
            .collect()
    }

    fn count_keys(&mut self) -> Result<u64, StoreError> {
        let row = self.retrying(|c| c.client.query_one(&c.st.count_keys, &[]))?;
        count(&row)
    }

    fn labels(&mut self) -> Result<Vec<LabelRow>, StoreError> {
        let rows = self.retrying(|c| c.client.query(&c.st.labels, &[]))?;
        rows.iter().map(label_row).collect()
    }

    fn count_labels(&mut self) -> Result<u64, StoreError> {
        let row = self.retrying(|c| c.client.query_one(&c.st.count_labels, &[]))?;
        count(&row)
    }

    /// Sizes of the relation files: heap with its TOAST table, free-space and visibility maps,
    /// and each index. The primary-key index is counted with the table, as SQLite counts its
    /// own.
    fn bytes(&mut self) -> Result<StoreBytes, StoreError> {
        let sql = match self.pool.inner.options.sweeper {
            Sweeper::Delete => {
                "SELECT pg_table_size('idempotency_keys'::regclass)
                        + pg_relation_size('idempotency_keys_pkey'::regclass),
                        pg_relation_size('idempotency_keys_expires_at'::regclass),
                        pg_total_relation_size('labels'::regclass)"
            }
            // A partitioned table has no storage of its own: its leaves hold the rows, each
            // with its share of the primary key, and there is no expires_at index.
            Sweeper::Partitions { .. } => {
                "SELECT (SELECT COALESCE(sum(pg_table_size(t.relid)), 0)::int8
                          FROM pg_partition_tree('idempotency_keys'::regclass) t WHERE t.isleaf)
                        + (SELECT COALESCE(sum(pg_relation_size(t.relid)), 0)::int8
                             FROM pg_partition_tree('idempotency_keys_pkey'::regclass) t
                            WHERE t.isleaf),
                        0::int8,
                        pg_total_relation_size('labels'::regclass)"
            }
        };
        let row = self.retrying(|c| c.client.query_one(sql, &[]))?;
        let get = |i: usize| -> Result<u64, StoreError> {
            row.try_get::<_, i64>(i)
                .map(|n| n.max(0) as u64)
                .map_err(|e| StoreError::Corrupt(format!("relation size: {e}")))
        };
        Ok(StoreBytes {
            keys_table_bytes: get(0)?,
            keys_index_bytes: get(1)?,
            labels_bytes: get(2)?,
        })
    }

    /// `integrity_ok` is amcheck's verdict on the four indexes when the extension is installed
    /// (and callable); otherwise PostgreSQL has no `PRAGMA integrity_check`, and it means that
    /// the invariant queries below ran.
    fn invariants(&mut self) -> Result<Invariants, StoreError> {
        let integrity_ok = self.amcheck()?.unwrap_or(true);
        let row = self.retrying(|c| {
            c.client.query_one(
                "SELECT
                   (SELECT count(*) FROM idempotency_keys k
                     WHERE k.state = 'completed' AND k.response_status = 201
                       AND NOT EXISTS (SELECT 1 FROM labels l
                                        WHERE l.label_id = (k.response_body::jsonb ->> 'label_id'))),
                   (SELECT COALESCE(MAX(n), 0) FROM (SELECT count(*) AS n FROM labels
                      GROUP BY caller_id, order_id, parcel_no, label_version) AS per_parcel)",
                &[],
            )
        })?;
        let get = |i: usize| -> Result<u64, StoreError> {
            row.try_get::<_, i64>(i)
                .map(|n| n.max(0) as u64)
                .map_err(|e| StoreError::Corrupt(format!("invariants: {e}")))
        };
        Ok(Invariants {
            integrity_ok,
            completed_without_label: get(0)?,
            max_labels_per_parcel: get(1)?,
        })
    }

    fn describe(&self) -> String {
        self.pool.inner.location.clone()
    }

    fn get_key(&mut self, caller_id: &str, idem_key: &str) -> Result<Option<KeyRow>, StoreError> {
        let row = self.retrying(|c| c.client.query_opt(&c.st.get_key, &[&caller_id, &idem_key]))?;
        row.as_ref().map(key_row).transpose()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_a_message() {
        assert_eq!(
            redact_url("postgres://alice:s3cret@db.example:5433/prod?sslmode=disable"),
            "postgres://alice:***@db.example:5433/prod?sslmode=disable"
        );
        assert_eq!(
            redact_url("postgresql://bob@127.0.0.1/test?password=hunter2&schema=x"),
            "postgresql://bob@127.0.0.1/test?password=***&schema=x"
        );
        assert_eq!(
            redact_url("postgres://postgres@127.0.0.1:5432/test"),
            "postgres://postgres@127.0.0.1:5432/test"
        );
        // A password holding '@' or '/' still disappears whole.
        assert_eq!(
            redact_url("postgres://u:p@ss@h/db"),
            "postgres://u:***@h/db"
        );
        assert_eq!(
            redact_url("postgres://u:p/ss@h/db"),
            "postgres://u:***@h/db"
        );
    }

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(check_schema_name("idemcalc").is_ok());
        assert!(check_schema_name("t_0123abcd").is_ok());
        for bad in [
            "",
            "1abc",
            "Upper",
            "a-b",
            "a;drop",
            "pg_x",
            &"a".repeat(64),
        ] {
            assert!(check_schema_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn millis_round_trip_through_system_time() {
        for ms in [0, 1, 1_767_225_600_050, -1_500] {
            assert_eq!(to_millis(to_time(ms)), ms);
        }
    }
}
