//! The engine's statements inside one transaction on one connection.

use super::Sweeper;
use super::pool::{Conn, PoolInner};
use super::rows::{key_row, label_row, to_time};
use crate::clock::Millis;
use crate::store::{Completion, KeyRow, LabelRow, LeaseToken, NewKey, StoreError, Tx};
use uuid::Uuid;

/// A transaction on one connection: `BEGIN` was sent by [`Store::begin`](crate::store::Store::begin); `COMMIT` by
/// [`Tx::commit`]; dropping it unfinished sends `ROLLBACK`, as a crash would make the server do.
/// (Written by hand rather than with `postgres::Transaction` so that `begin` can retry a `BEGIN`
/// that found the connection dead.)
pub(super) struct PgTx<'c> {
    pub(super) conn: &'c mut Conn,
    pub(super) pool: &'c PoolInner,
    pub(super) finished: bool,
}

impl PgTx<'_> {
    fn err(&self, e: postgres::Error) -> StoreError {
        self.pool.stmt_err(&self.conn.guard, e)
    }
}

impl Drop for PgTx<'_> {
    fn drop(&mut self) {
        if !self.finished {
            // On a dead connection this fails, and the server has rolled back already.
            let _armed = self.conn.arm("the ROLLBACK");
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
        let _armed = self.conn.arm("the claim (INSERT … ON CONFLICT DO NOTHING)");
        self.ensure_partition(k.expires_at_ms)?;
        let pool = self.pool;
        let Conn {
            client, st, guard, ..
        } = &mut *self.conn;
        if let Some(lock) = &st.claim_lock {
            client
                .execute(lock, &[&k.caller_id, &k.idem_key])
                .map_err(|e| pool.stmt_err(guard, e))?;
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
        let _armed = self.conn.arm("the read of the key (SELECT … FOR UPDATE)");
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
        let _armed = self.conn.arm("the takeover of an expired lease (UPDATE)");
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
        let _armed = self.conn.arm("the release of a lease (UPDATE)");
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
        let _armed = self
            .conn
            .arm("the completion of the key (UPDATE … WHERE lease_token)");
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
        let _armed = self.conn.arm("the update of a saved response (UPDATE)");
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
        let _armed = self.conn.arm("the label insert (INSERT INTO labels)");
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
                    &l.order_space,
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
                &[
                    &l.order_id,
                    &l.parcel_no,
                    &l.label_version,
                    &l.order_space,
                    &l.label_id,
                ],
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
        let _armed = self.conn.arm("the delete of a failed key (DELETE)");
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
        let _armed = self.conn.arm("the COMMIT");
        let committed = self.conn.client.batch_execute("COMMIT");
        committed.map_err(|e| self.pool.stmt_err(&self.conn.guard, e))
    }
}
