//! The partition sweeper (`Sweeper::Partitions`): partitions made ahead of the writes that need
//! them, and whole expired partitions detached and dropped instead of rows deleted. Their whole
//! life, from name to drop, reads in one place; the partitioned layout itself is in `schema`
//! and the claim lock that stands in for a unique index in `sql`.

use super::config::quote_ident;
use super::deadline::{SWEEP_TIMEOUT, engine_settings};
use super::pool::{PgPool, PoolInner};
use super::rows::to_time;
use super::{PostgresStore, Sweeper};
use crate::clock::Millis;
use crate::store::StoreError;
use postgres::Client;
use postgres::error::SqlState;

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

impl PgPool {
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
}

impl PoolInner {
    /// The partitions that exist now, by name.
    pub(super) fn partition_names(&self, client: &mut Client) -> Result<Vec<String>, StoreError> {
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

    pub(super) fn load_partitions(&self, client: &mut Client) -> Result<(), StoreError> {
        let names = self.partition_names(client)?;
        let mut known = self.partitions.lock().unwrap_or_else(|p| p.into_inner());
        known.extend(names.iter().filter_map(|n| partition_start(n)));
        Ok(())
    }

    /// The partition holding `expires_at_ms` and the next one, created if missing, on a
    /// connection of their own, so the caller's transaction holds no lock of the DDL's and the
    /// DDL none of the caller's. Once per period per pool.
    pub(super) fn ensure_partitions(
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
            let mut client = self.raw_connect()?;
            self.join_hold(&mut client)?;
            *ddl = Some(client);
        }
        let client = ddl.as_mut().expect("connected above");
        let schema = quote_ident(&self.options.schema);
        // Two pools creating the same partition at once would race on the catalog.
        let mut tx = self.catalog_tx(client)?;
        tx.batch_execute(&format!(
            "SET LOCAL lock_timeout = '30s'; SET LOCAL statement_timeout = {}",
            super::deadline::SWEEP_TIMEOUT.as_millis()
        ))
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

impl PostgresStore {
    /// The partition sweeper: every partition whose range ended by `now_ms` holds only expired
    /// records, so it is detached and dropped. Its keys are read first for the caller's purge
    /// record, as the `DELETE`'s `RETURNING` gives them; production would skip that read.
    ///
    /// Read, detach and drop are one transaction on a connection of the run's writers (see
    /// `exclusive::Fence`), so no other run can be writing in the schema meanwhile, however long
    /// this one was stopped between two statements. That rules out `DETACH … CONCURRENTLY` (it
    /// cannot run in a transaction), so the detach takes its brief `ACCESS EXCLUSIVE` lock on
    /// the key table; waiting for it is bounded by the engine's `lock_timeout`, and a detach
    /// that times out is left for the next sweep rather than queue every claim behind it.
    pub(super) fn drop_expired_partitions(
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
            let guard = conn.guard.clone();
            let _armed = guard.arm("the partition sweeper's detach and drop", SWEEP_TIMEOUT);
            let rows = conn
                .client
                .batch_execute(&format!(
                    "SET statement_timeout = {}; BEGIN",
                    SWEEP_TIMEOUT.as_millis()
                ))
                .and_then(|()| {
                    conn.client.query(
                        &format!(
                            "SELECT caller_id, idem_key, state = 'started' AND locked_until > $1
                               FROM {part}"
                        ),
                        &[&to_time(now_ms)],
                    )
                })
                .and_then(|rows| {
                    // A started record whose lease is live outlives its partition's range: an
                    // attempt is at the carrier and txn 2 must find the row. The partition
                    // waits for the next sweep (at most one lease).
                    if rows
                        .iter()
                        .any(|r| r.get::<_, Option<bool>>(2) == Some(true))
                    {
                        return conn.client.batch_execute("ROLLBACK").map(|()| None);
                    }
                    conn.client
                        .batch_execute(&format!(
                            "ALTER TABLE {schema}.idempotency_keys DETACH PARTITION {part};
                             DROP TABLE {part}; COMMIT"
                        ))
                        .map(|()| Some(rows))
                });
            if rows.as_ref().is_err_and(|e| e.code().is_some()) {
                let _ = conn.client.batch_execute("ROLLBACK");
            }
            let restored = conn.client.batch_execute(&engine_settings());
            let rows = match rows {
                Ok(Some(rows)) => rows,
                Ok(None) => {
                    restored.map_err(|e| inner.stmt_err(&guard, e))?;
                    break;
                }
                // Busy: the next sweep tries again.
                Err(e) if e.code() == Some(&SqlState::LOCK_NOT_AVAILABLE) => break,
                Err(e) => return Err(inner.stmt_err(&guard, e)),
            };
            restored.map_err(|e| inner.stmt_err(&guard, e))?;
            for r in &rows {
                purged.push((
                    r.try_get(0).map_err(|e| inner.pg_err(e))?,
                    r.try_get(1).map_err(|e| inner.pg_err(e))?,
                ));
            }
            inner
                .partitions
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&start);
        }
        Ok(purged)
    }
}
