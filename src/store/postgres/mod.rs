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
//! schema only, so the statements (`sql`, `statements`) read like the seed's listing.
//!
//! Column types are the seed's: `bytea` hash, `timestamptz` times, `uuid` lease token, an enum
//! for the state. Two deliberate departures, each explained where it is made: the
//! response body is `text`, not `jsonb` (replays must be byte-identical), and the label's numbers
//! are `bigint` (the engine accepts any positive 64-bit order, parcel and version).
//!
//! Timestamps come from the engine's injected clock as integer milliseconds and travel as
//! `timestamptz` through `std::time::SystemTime` (exact: PostgreSQL keeps microseconds). The SQL
//! never calls `now()`, so a virtual clock drives the server as it drives SQLite.

mod config;
pub mod deadline;
mod errors;
mod partitions;
mod pool;
mod rows;
mod schema;
pub(crate) mod sql;
mod statements;
mod tx;

use super::{Invariants, KeyRow, LabelRow, Store, StoreBytes, StoreError, Tx};
use crate::clock::Millis;
use config::quote_ident;
use errors::connection_lost;
use pool::{Conn, PgManager, PoolInner};
use postgres::Client;
use postgres::error::SqlState;
use rows::{count, key_row, label_row, to_time};
use std::time::Duration;
use tx::PgTx;

// The paths callers have always used: the rest of the crate names these as
// `store::postgres::NAME`, whichever file now holds them.
pub use super::pg_message;
pub use config::{
    DEFAULT_SCHEMA, MAX_POOL_SIZE, PgOptions, Sweeper, SweeperPlan, check_schema_name, redact_url,
};
pub(in crate::store) use errors::explain_connect;
pub use pool::PgPool;
pub use schema::SCHEMA_VERSION;

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
    /// found the connection dead (but not when the connection was cut for want of an answer:
    /// a stopped server would not answer the new one either). `what` names the statement in
    /// messages; `timeout` is its server-side deadline, set around it when it is not the
    /// engine's.
    fn retrying<T>(
        &mut self,
        what: &'static str,
        timeout: Duration,
        f: impl Fn(&mut Conn) -> Result<T, postgres::Error>,
    ) -> Result<T, StoreError> {
        let run = |c: &mut Conn| -> Result<T, postgres::Error> {
            let _armed = c.guard.arm(what, timeout);
            if timeout == deadline::STATEMENT_TIMEOUT {
                return f(c);
            }
            c.client
                .batch_execute(&format!("SET statement_timeout = {}", timeout.as_millis()))?;
            let out = f(c);
            let restored = c.client.batch_execute(&deadline::engine_settings());
            let out = out?;
            restored?;
            Ok(out)
        };
        match run(self.conn()?) {
            Err(e) if connection_lost(&e) => {
                let dead = self.conn.as_mut().map(|c| {
                    c.broken = true;
                    c.guard.clone()
                });
                if let Some(guard) = dead.filter(|g| g.fired().is_some()) {
                    return Err(self.pool.inner.stmt_err(&guard, e));
                }
                let c = self.conn()?;
                let guard = c.guard.clone();
                run(c).map_err(|e| self.pool.inner.stmt_err(&guard, e))
            }
            Err(e) => {
                let guard = self.conn.as_ref().map(|c| c.guard.clone());
                Err(match guard {
                    Some(g) => self.pool.inner.stmt_err(&g, e),
                    None => self.err(e),
                })
            }
            Ok(v) => Ok(v),
        }
    }

    /// Whether the key table is partitioned (`--sweeper partitions`).
    pub fn partitioned(&self) -> bool {
        self.pool.partitioned()
    }

    /// The server process id of this store's connection, e.g. for `pg_terminate_backend`.
    pub fn backend_pid(&mut self) -> Result<i32, StoreError> {
        self.retrying(
            "SELECT pg_backend_pid()",
            deadline::STATEMENT_TIMEOUT,
            |c| {
                c.client
                    .query_one("SELECT pg_backend_pid()", &[])?
                    .try_get(0)
            },
        )
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
        let ns: Option<String> =
            self.retrying("the look-up of amcheck", deadline::STATEMENT_TIMEOUT, |c| {
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
        match self.retrying("amcheck's index checks", deadline::BULK_TIMEOUT, |c| {
            c.client.execute(sql.as_str(), &[])
        }) {
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

impl Store for PostgresStore {
    fn begin(&mut self) -> Result<Box<dyn Tx + '_>, StoreError> {
        self.pool.inner.check_held()?;
        // Retrying BEGIN is safe: nothing has run in the transaction yet.
        self.retrying("the BEGIN", deadline::STATEMENT_TIMEOUT, |c| {
            c.client.batch_execute("BEGIN")
        })?;
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
        self.pool.inner.check_held()?;
        if let Sweeper::Partitions { period_ms } = self.pool.inner.options.sweeper {
            return self.drop_expired_partitions(now_ms, period_ms);
        }
        // Its own short transaction. Not retried: a DELETE whose answer was lost may have
        // committed.
        let conn = self.conn()?;
        let guard = conn.guard.clone();
        let _armed = guard.arm("the sweeper's DELETE", deadline::SWEEP_TIMEOUT);
        let rows = conn
            .client
            .batch_execute(&format!(
                "SET statement_timeout = {}; BEGIN",
                deadline::SWEEP_TIMEOUT.as_millis()
            ))
            .and_then(|()| {
                conn.client
                    .query(&conn.st.sweep, &[&to_time(now_ms), &i64::from(batch)])
            })
            .and_then(|rows| conn.client.batch_execute("COMMIT").map(|()| rows));
        if rows.as_ref().is_err_and(|e| e.code().is_some()) {
            let _ = conn.client.batch_execute("ROLLBACK");
        }
        let restored = conn.client.batch_execute(&deadline::engine_settings());
        let rows = rows.map_err(|e| self.pool.inner.stmt_err(&guard, e))?;
        restored.map_err(|e| self.pool.inner.stmt_err(&guard, e))?;
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
        let row = self.retrying("the count of key records", deadline::BULK_TIMEOUT, |c| {
            c.client.query_one(&c.st.count_keys, &[])
        })?;
        count(&row)
    }

    fn labels(&mut self) -> Result<Vec<LabelRow>, StoreError> {
        let rows = self.retrying("the read of every label", deadline::BULK_TIMEOUT, |c| {
            c.client.query(&c.st.labels, &[])
        })?;
        rows.iter().map(label_row).collect()
    }

    fn count_labels(&mut self) -> Result<u64, StoreError> {
        let row = self.retrying("the count of labels", deadline::BULK_TIMEOUT, |c| {
            c.client.query_one(&c.st.count_labels, &[])
        })?;
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
                        pg_relation_size('idempotency_keys_expires_at'::regclass)"
            }
            // A partitioned table has no storage of its own: its leaves hold the rows, each
            // with its share of the primary key, and there is no expires_at index.
            Sweeper::Partitions { .. } => {
                "SELECT (SELECT COALESCE(sum(pg_table_size(t.relid)), 0)::int8
                          FROM pg_partition_tree('idempotency_keys'::regclass) t WHERE t.isleaf)
                        + (SELECT COALESCE(sum(pg_relation_size(t.relid)), 0)::int8
                             FROM pg_partition_tree('idempotency_keys_pkey'::regclass) t
                            WHERE t.isleaf),
                        0::int8"
            }
        };
        let row = self.retrying("the store's sizes", deadline::STATEMENT_TIMEOUT, |c| {
            c.client.query_one(sql, &[])
        })?;
        let get = |i: usize| -> Result<u64, StoreError> {
            row.try_get::<_, i64>(i)
                .map(|n| n.max(0) as u64)
                .map_err(|e| StoreError::Corrupt(format!("relation size: {e}")))
        };
        Ok(StoreBytes {
            keys_table_bytes: get(0)?,
            keys_index_bytes: get(1)?,
        })
    }

    /// `integrity_ok` is amcheck's verdict on the four indexes when the extension is installed
    /// (and callable); otherwise PostgreSQL has no `PRAGMA integrity_check`, and it means that
    /// the invariant queries below ran.
    fn invariants(&mut self) -> Result<Invariants, StoreError> {
        let integrity_ok = self.amcheck()?.unwrap_or(true);
        let row = self.retrying("the invariant checks", deadline::BULK_TIMEOUT, |c| {
            c.client.query_one(
                "SELECT
                   (SELECT count(*) FROM idempotency_keys k
                     WHERE k.state = 'completed' AND k.response_status = 201
                       AND NOT EXISTS (SELECT 1 FROM labels l
                                        WHERE l.label_id = (k.response_body::jsonb ->> 'label_id'))),
                   (SELECT COALESCE(MAX(n), 0) FROM (SELECT count(*) AS n FROM labels
                      GROUP BY order_space, order_id, parcel_no, label_version) AS per_parcel)",
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
        let row = self.retrying("the read of one key", deadline::STATEMENT_TIMEOUT, |c| {
            c.client.query_opt(&c.st.get_key, &[&caller_id, &idem_key])
        })?;
        row.as_ref().map(key_row).transpose()
    }
}
