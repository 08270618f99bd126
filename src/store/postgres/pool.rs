//! The connection pool: how a connection is opened (settings, prepared statements), checked out,
//! retired, and how the pool as a whole starts (schema held, migrated, partitions loaded).

use super::config::{MAX_POOL_SIZE, PgOptions, Sweeper, check_schema_name, redact_url};
use super::deadline::{self, Armed, Guard};
use super::errors::explain_connect;
use super::statements::Statements;
use super::{PostgresStore, config::quote_ident};
use crate::clock::Millis;
use crate::store::{StoreError, Synchronous, exclusive, pg_message};
use postgres::Client;
use postgres::error::SqlState;
use std::collections::BTreeSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// One open connection with its prepared statements.
pub(crate) struct Conn {
    pub(super) client: Client,
    pub(super) st: Statements,
    /// The pool generation it was opened in: connections of an older generation (from before
    /// [`PgPool::drop_schema`] or [`PgPool::close_idle`]) are closed instead of reused, since
    /// their prepared statements may name dropped tables.
    pub(super) generation: u64,
    /// Set when a statement found the connection dead: the pool closes it instead of keeping it.
    pub(super) broken: bool,
    /// The client-side deadline of the statement in flight.
    pub(super) guard: Arc<Guard>,
}

impl Drop for Conn {
    fn drop(&mut self) {
        // Fields drop in order: the client first, while the guard still lives.
        self.guard.arm_for_close();
    }
}

impl Conn {
    /// Arms the connection's deadline for one engine statement, `what`.
    pub(super) fn arm(&self, what: &'static str) -> Armed {
        self.guard.arm(what, deadline::STATEMENT_TIMEOUT)
    }
}

/// What the pool crate needs to open, check and retire our connections. Opening one is
/// connect, `search_path`, `synchronous_commit` and the prepared statements.
pub(super) struct PgManager {
    shared: Arc<PoolInner>,
}

impl PoolInner {
    /// `Err` once the schema's hold is lost (see [`exclusive::Held::check`]).
    pub(super) fn check_held(&self) -> Result<(), StoreError> {
        self._exclusive.as_ref().map_or(Ok(()), |h| h.check())
    }

    /// Makes `client` one of the writers of the held schema (see [`exclusive::Fence`]): every
    /// connection that may write joins once, when it opens, instead of proving the hold at
    /// each commit.
    pub(super) fn join_hold(&self, client: &mut Client) -> Result<(), StoreError> {
        self._exclusive
            .as_ref()
            .map_or(Ok(()), |held| held.pg_join(client))
    }
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

pub(super) struct PoolInner {
    pub(super) config: postgres::Config,
    pub(super) options: PgOptions,
    /// The redacted URL and schema, for every message.
    pub(super) location: String,
    /// Bumped to retire every connection open now (see [`Conn::generation`]).
    pub(super) generation: AtomicU64,
    /// Holds the schema for this process while any pool on it lives (see `store::exclusive`).
    pub(super) _exclusive: Option<Arc<exclusive::Held>>,
    /// With partitions: the start of every partition known to exist.
    pub(super) partitions: Mutex<BTreeSet<Millis>>,
    /// With partitions: the connection that creates them.
    pub(super) ddl: Mutex<Option<Client>>,
}

/// A connection pool (the `r2d2` crate) of at most `pool_size` connections, each handed out as
/// a [`PostgresStore`] that gives its connection back when dropped. Cloning shares the pool.
#[derive(Clone)]
pub struct PgPool {
    pub(super) inner: Arc<PoolInner>,
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
        // Migrations wait for the migration lock and create tables: longer deadlines than the
        // engine's, set back to the engine's by `setup` below.
        client
            .batch_execute(&format!(
                "SET statement_timeout = {}; SET lock_timeout = '30s';",
                deadline::BULK_TIMEOUT.as_millis()
            ))
            .map_err(|e| inner.pg_err(e))?;
        if options.exclusive {
            inner._exclusive = Some(match &options.replica {
                None => exclusive::hold_pg_schema(&inner.config, &options.schema, &inner.location)?,
                Some(name) => exclusive::hold_pg_replica(
                    &inner.config,
                    &options.schema,
                    &inner.location,
                    name,
                )?,
            });
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

    pub(super) fn checkout(&self) -> Result<r2d2::PooledConnection<PgManager>, StoreError> {
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

    /// A connection of its own, outside the pool and its hold (no writer): for a session whose
    /// life is the point, such as the sweeping replica's advisory lock (`serve::leader`).
    pub fn session(&self) -> Result<postgres::Client, StoreError> {
        self.inner.raw_connect()
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
            "SET lock_timeout = '10s'; SET statement_timeout = {}; DROP SCHEMA IF EXISTS {schema} CASCADE; {}",
            deadline::BULK_TIMEOUT.as_millis(),
            deadline::engine_settings()
        ));
        drop(store);
        self.close_idle();
        dropped.map_err(|e| self.inner.pg_err(e))
    }
}

impl PoolInner {
    pub(super) fn open_err(&self, message: String) -> StoreError {
        StoreError::Open {
            location: self.location.clone(),
            message,
        }
    }

    pub(super) fn pg_err(&self, e: postgres::Error) -> StoreError {
        StoreError::Postgres {
            location: self.location.clone(),
            error: e,
        }
    }

    /// A statement's failure, saying which statement and which deadline when one ended it: the
    /// client's (no answer at all: the server is stopped or unreachable), `lock_timeout` (a lock
    /// held by another session) or `statement_timeout`.
    pub(super) fn stmt_err(&self, guard: &Guard, e: postgres::Error) -> StoreError {
        let what = guard.what();
        let deadline = |message: String| StoreError::Deadline {
            location: self.location.clone(),
            message,
        };
        if let Some(wait) = guard.fired() {
            return deadline(format!(
                "no answer from the server to {what} within {}: the server is stopped, overloaded or unreachable",
                deadline::secs(wait)
            ));
        }
        match e.code() {
            Some(c) if *c == SqlState::LOCK_NOT_AVAILABLE => deadline(format!(
                "{what} waited longer than lock_timeout ({}) for a lock another session holds (a LOCK TABLE, a long transaction or a migration on this schema): {}",
                deadline::secs(deadline::LOCK_TIMEOUT),
                pg_message(&e)
            )),
            Some(c) if *c == SqlState::QUERY_CANCELED => deadline(format!(
                "{what} ran longer than its statement_timeout ({}): the server is overloaded, or something holds the store's tables: {}",
                deadline::secs(guard.server()),
                pg_message(&e)
            )),
            _ => self.pg_err(e),
        }
    }

    pub(super) fn raw_connect(&self) -> Result<Client, StoreError> {
        crate::store::pg_connect(&self.config).map_err(|e| {
            self.open_err(match &e {
                crate::store::PgConnectError::Failed(e) => explain_connect(e, &self.config),
                silent => silent.message(),
            })
        })
    }

    /// Per-connection settings and prepared statements.
    pub(super) fn setup(&self, mut client: Client) -> Result<Conn, StoreError> {
        let sync = match self.options.synchronous {
            Synchronous::Off => "off",
            Synchronous::Normal | Synchronous::Full => "on",
        };
        client
            .batch_execute(&format!(
                "SET search_path TO {}; SET synchronous_commit TO {sync}; {}",
                quote_ident(&self.options.schema),
                deadline::engine_settings()
            ))
            .map_err(|e| self.pg_err(e))?;
        self.join_hold(&mut client)?;
        let guard = Guard::attach(&mut client);
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
            guard,
        })
    }
}
