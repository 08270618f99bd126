//! The statements each connection prepares once: the engine's (`sql`, shared with the bench)
//! and the store's own queries, which only the store runs and so stay here as text.

use super::sql::{self, KEY_COLUMNS, LABEL_COLUMNS};
use postgres::{Client, Statement};

/// The statements of the two transactions and the store's queries, prepared once per connection:
/// each then costs one round trip instead of a parse and a round trip more.
pub(super) struct Statements {
    /// With partitions only: the per-key advisory lock a claim takes first (see `insert_key`).
    pub(super) claim_lock: Option<Statement>,
    pub(super) insert_key: Statement,
    pub(super) lock_key: Statement,
    pub(super) get_key: Statement,
    pub(super) take_over: Statement,
    pub(super) release_lease: Statement,
    pub(super) complete_key: Statement,
    pub(super) set_response_body: Statement,
    pub(super) insert_label: Statement,
    pub(super) select_label: Statement,
    pub(super) delete_key: Statement,
    pub(super) sweep: Statement,
    pub(super) count_keys: Statement,
    pub(super) count_labels: Statement,
    pub(super) labels: Statement,
}

impl Statements {
    /// With `partitioned`, no unique index can span the partitions, so a claim is two
    /// statements: a transaction-scoped advisory lock on a hash of (caller, key), then an insert
    /// that checks no record exists. The check runs after the lock is granted, so under READ
    /// COMMITTED it sees any claim of the same key that committed meanwhile; a concurrent claim
    /// waits for the lock until this transaction ends, then sees this row.
    pub(super) fn prepare(client: &mut Client, partitioned: bool) -> Result<Self, postgres::Error> {
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
                    AND order_space = $4
                    OR label_id = $5
                  ORDER BY label_id = $5
                  LIMIT 1"
            ))?,
            delete_key: client.prepare(
                "DELETE FROM idempotency_keys
                  WHERE caller_id = $1 AND idem_key = $2 AND state = 'started' AND lease_token = $3",
            )?,
            // SKIP LOCKED: a record that an attempt holds locked right now is left for the next
            // batch instead of making the sweeper wait behind it.
            sweep: client.prepare(sql::SWEEP)?,
            count_keys: client.prepare("SELECT count(*) FROM idempotency_keys")?,
            count_labels: client.prepare("SELECT count(*) FROM labels")?,
            labels: client.prepare(&format!(
                "SELECT {LABEL_COLUMNS} FROM labels ORDER BY label_seq"
            ))?,
        })
    }
}
