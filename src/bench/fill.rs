//! Pre-filled stores: the bench measures the engine on a store of realistic size, and the mix
//! needs keys in each state (completed for replays, held for 409s, abandoned for takeovers).
//!
//! Rows are written with bulk SQL, in one transaction per call, exactly as the engine would have
//! left them: same key and body format, same request hash, same saved response, a label for every
//! completed key. The criterion benches use the same code for their 1 M-key store.

use crate::clock::Millis;
use crate::engine::request::request_hash;
use crate::store::{SqliteOptions, SqliteStore, StoreError, Synchronous};
use rusqlite::params;
use serde::Serialize;
use std::ops::Range;
use std::path::Path;

/// Every bench request comes from this caller, as the seed's Fulfilment service.
pub const CALLER: &str = "fulfilment";
/// The seed's label price.
pub const COST_CENTS: i64 = 600;
/// The seed's parcel weight; a reused key (422) sends another.
pub const WEIGHT_G: u32 = 1450;
pub const OTHER_WEIGHT_G: u32 = 1500;
/// A held lease outlives any run: runs are capped at an hour a side.
pub const HELD_LEASE_MS: Millis = 7 * crate::duration::DAY_MS;
/// The seed's retention.
pub const RETENTION_MS: Millis = crate::duration::DAY_MS;
/// The largest order id the engine accepts (9 digits).
pub const MAX_ORDER_ID: i64 = 999_999_999;

/// The seed's derived key for parcel 1 of `order_id`, e.g. `label:918273:1:v1`.
pub fn key(order_id: i64) -> String {
    format!("label:{order_id}:1:v1")
}

/// The method and path of every bench request.
pub const METHOD: &str = "POST";
pub const PATH: &str = "/labels";

/// The request hash a pre-filled key holds: that of the seed's body for its order, so a
/// request for it replays (with another weight, it is a reused key).
pub fn filled_hash(order_id: i64) -> [u8; 32] {
    request_hash(METHOD, PATH, &body(order_id, WEIGHT_G))
}

/// The CreateLabel body a client sends, already canonical (keys sorted).
pub fn body(order_id: i64, weight_g: u32) -> String {
    format!(
        r#"{{"label_version":1,"order_id":{order_id},"parcel_no":1,"service":"ground","weight_g":{weight_g}}}"#
    )
}

/// The saved 201 body of a completed key, as the engine writes it (canonical JSON, padded to
/// the seed's saved-response size).
pub fn label_body(label_id: &str, order_id: i64) -> String {
    let row = crate::store::LabelRow {
        label_id: label_id.to_string(),
        order_id,
        parcel_no: 1,
        label_version: 1,
        tracking_no: tracking_no(order_id),
        cost_cents: COST_CENTS,
        created_by_key: key(order_id),
        // The engine's default: callers share one order space.
        order_space: String::new(),
    };
    crate::engine::label_body(&row, &crate::payload::SizeDist::seed_response())
}

/// The carrier's number for the order's first label, as the engine's side stores it.
pub fn tracking_no(order_id: i64) -> String {
    crate::carrier::tracking_no(crate::carrier::Service::Ground, order_id, 1)
}

/// What a pre-filled key looks like.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Prefill {
    /// Completed with its label, retained for a day: replays and 422s hit these.
    Completed,
    /// Claimed by an attempt whose lease lasts past the run: 409s hit these.
    Held,
    /// Claimed by an attempt that died, its lease already expired: each takeover consumes one.
    LeaseExpired,
    /// Completed with its label, past retention: the sweeper's work.
    RecordExpired,
}

/// Order-id ranges of a bench store: completed keys, then held, then abandoned, then the fresh
/// ids that first runs claim.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Layout {
    pub completed: u64,
    pub held: u64,
    pub lease_expired: u64,
}

impl Layout {
    pub fn completed_ids(&self) -> Range<i64> {
        1..1 + self.completed as i64
    }

    pub fn held_ids(&self) -> Range<i64> {
        let start = self.completed_ids().end;
        start..start + self.held as i64
    }

    pub fn lease_expired_ids(&self) -> Range<i64> {
        let start = self.held_ids().end;
        start..start + self.lease_expired as i64
    }

    /// The first order id no pre-filled key uses.
    pub fn fresh_from(&self) -> i64 {
        self.lease_expired_ids().end
    }
}

/// A connection that writes pre-filled rows. `synchronous = OFF`: a fill that dies is rebuilt,
/// not recovered, and the bench reopens the file with the setting it measures.
pub struct Filler {
    store: SqliteStore,
}

impl Filler {
    pub fn open(path: &Path) -> Result<Self, StoreError> {
        // A page cache that holds the whole b-tree being filled (1 M keys is ~300 MB).
        let options = SqliteOptions {
            synchronous: Synchronous::Off,
            cache_kib: 512 * 1024,
            ..SqliteOptions::default()
        };
        Ok(Self {
            store: SqliteStore::open(path, &options)?,
        })
    }

    fn err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            location: self.store.path().display().to_string(),
            source,
        }
    }

    /// Writes one key per order id in `order_ids`, in one transaction, timestamped from `now_ms`.
    pub fn add(
        &mut self,
        what: Prefill,
        order_ids: Range<i64>,
        now_ms: Millis,
    ) -> Result<(), StoreError> {
        if order_ids.end > MAX_ORDER_ID + 1 {
            return Err(StoreError::Corrupt(format!(
                "order id {} is beyond the engine's 9 digits",
                order_ids.end - 1
            )));
        }
        let conn = self.store.connection();
        let tx =
            rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
                .map_err(|e| self.err(e))?;
        let mut insert_key = tx
            .prepare(
                "INSERT INTO idempotency_keys
                   (caller_id, idem_key, request_hash, state, locked_until, lease_token,
                    response_status, response_body, created_at, expires_at)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
            )
            .map_err(|e| self.err(e))?;
        let mut insert_label = tx
            .prepare(
                "INSERT INTO labels (label_id, order_id, parcel_no, label_version, tracking_no,
                                     cost_cents, created_by_key, order_space)
                 VALUES (?1, ?2, 1, 1, ?3, ?4, ?5, '')",
            )
            .map_err(|e| self.err(e))?;
        for id in order_ids {
            let key = key(id);
            let hash = filled_hash(id);
            let token = (id as u128).to_le_bytes();
            let completed = matches!(what, Prefill::Completed | Prefill::RecordExpired);
            let label_id = format!("F-{id}");
            let (state, locked_until, lease_token, status, response) = if completed {
                (
                    1_i64, // completed (the SQLite schema stores the state as 0 or 1)
                    None,
                    None,
                    Some(201),
                    Some(label_body(&label_id, id)),
                )
            } else {
                let until = match what {
                    Prefill::Held => now_ms + HELD_LEASE_MS,
                    _ => now_ms - 1,
                };
                (0_i64, Some(until), Some(&token[..]), None, None)
            };
            let expires_at = match what {
                Prefill::RecordExpired => now_ms - 1,
                _ => now_ms + RETENTION_MS,
            };
            insert_key
                .execute(params![
                    CALLER,
                    key,
                    &hash[..],
                    state,
                    locked_until,
                    lease_token,
                    status,
                    response,
                    now_ms - 1,
                    expires_at
                ])
                .map_err(|e| self.err(e))?;
            if completed {
                insert_label
                    .execute(params![label_id, id, tracking_no(id), COST_CENTS, key])
                    .map_err(|e| self.err(e))?;
            }
        }
        drop(insert_key);
        drop(insert_label);
        tx.commit().map_err(|e| self.err(e))
    }

    /// Fills every range of `layout`.
    pub fn fill(&mut self, layout: &Layout, now_ms: Millis) -> Result<(), StoreError> {
        self.add(Prefill::Completed, layout.completed_ids(), now_ms)?;
        self.add(Prefill::Held, layout.held_ids(), now_ms)?;
        self.add(Prefill::LeaseExpired, layout.lease_expired_ids(), now_ms)
    }

    /// Checkpoints the WAL into the main file and closes, so the file alone can be copied.
    pub fn close(self) -> Result<(), StoreError> {
        self.store
            .connection()
            .execute_batch("PRAGMA wal_checkpoint(TRUNCATE);")
            .map_err(|e| self.err(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::request::canonical_json;

    #[test]
    fn bodies_are_what_the_engine_writes() {
        let v: serde_json::Value = serde_json::from_str(&body(918273, WEIGHT_G)).unwrap();
        assert_eq!(canonical_json(&v), body(918273, WEIGHT_G));
        let saved: serde_json::Value = serde_json::from_str(&label_body("F-7", 7)).unwrap();
        assert_eq!(canonical_json(&saved), label_body("F-7", 7));
        for (field, value) in [
            ("label_id", serde_json::json!("F-7")),
            ("order_id", serde_json::json!(7)),
            ("tracking_no", serde_json::json!("GRD000000007")),
            ("cost_cents", serde_json::json!(600)),
        ] {
            assert_eq!(saved[field], value, "{field}");
        }
        assert_eq!(label_body("F-7", 7).len(), 300);
    }

    #[test]
    fn ranges_do_not_overlap() {
        let l = Layout {
            completed: 10,
            held: 3,
            lease_expired: 4,
        };
        assert_eq!(l.completed_ids(), 1..11);
        assert_eq!(l.held_ids(), 11..14);
        assert_eq!(l.lease_expired_ids(), 14..18);
        assert_eq!(l.fresh_from(), 18);
    }
}
