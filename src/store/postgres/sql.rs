//! The statements of the engine's two transactions, as text. The store prepares them, and the
//! bench's raw-SQL baseline (`bench::pg`) prepares the very same text, so the baseline runs the
//! engine's SQL and nothing else.

/// `state::text`: the driver reads an enum only as text. The column lists are macros so that the
/// statements below can `concat!` them at compile time; `rows` reads columns in this order.
macro_rules! key_columns {
    () => {
        "request_hash, state::text, locked_until, lease_token, response_status, response_body, created_at, expires_at"
    };
}
pub(super) const KEY_COLUMNS: &str = key_columns!();

macro_rules! label_columns {
    () => {
        "label_id, order_id, parcel_no, label_version, tracking_no, cost_cents, created_by_key, order_space"
    };
}
pub(super) const LABEL_COLUMNS: &str = label_columns!();

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
     ON CONFLICT DO NOTHING"
);
/// The sweeper's batch: expired records the seed purges (completed ones) and started ones no
/// attempt can still be running (the lease is over, so the attempt died or timed out and a
/// retry would take over anyway). A started record whose lease is live is never deleted: its
/// attempt is at the carrier and txn 2 must find the row.
pub const SWEEP: &str = "DELETE FROM idempotency_keys WHERE (caller_id, idem_key) IN (
        SELECT caller_id, idem_key FROM idempotency_keys
         WHERE expires_at <= $1
           AND (state = 'completed' OR locked_until IS NULL OR locked_until <= $1)
         ORDER BY expires_at LIMIT $2
           FOR UPDATE SKIP LOCKED)
     RETURNING caller_id, idem_key";
