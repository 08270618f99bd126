//! The bench on Redis: the same mix, slices and checks as on the other stores, with one writer
//! per connection (`--pool`), each a Redis connection for the key records and a SQLite
//! connection to the labels file beside them (see `store::redis`).
//!
//! The raw baseline issues the store's own commands without the engine: the claim script, a
//! read of the record, the takeover's `HSET`, the guarded completion script and the label's
//! SQLite insert, with no hashing, JSON, validation or carrier. Both sides get their own prefix
//! and labels file, filled alike. A run with `?prefix=NAME` keeps `NAME` and `NAME_baseline`
//! (refused if either holds keys); otherwise scratch prefixes are unlinked at the end.

use super::baseline::insert_label;
use super::drive::{Job, Service};
use super::fill::{CALLER, HELD_LEASE_MS, Layout, RETENTION_MS, filled_hash, key, label_body};
use crate::clock::{Clock, Millis, SystemClock};
use crate::engine::Outcome;
use crate::store::redis::{CLAIM, COMPLETE, index_name, record_name};
use crate::store::{RedisStore, Store, StoreError};
use std::ops::Range;
use uuid::Uuid;

/// The engine's default lease, so baseline claims look like the engine's.
const LEASE_MS: Millis = 30_000;
/// The baseline does no hashing: every key it claims gets this request hash.
const NO_HASH: [u8; 32] = [0; 32];
/// Records per pipeline of the fill.
const FILL_CHUNK: i64 = 5_000;

/// Writes every range of `layout` as the engine would have left those keys: records in Redis
/// (pipelined), labels for the completed ones in the SQLite file.
pub fn fill(store: &mut RedisStore, layout: &Layout, now_ms: Millis) -> Result<(), StoreError> {
    let completed = layout.completed_ids();
    let (con, url, prefix, labels) = store.raw();
    let index = index_name(prefix);
    let redis_err = |e: redis::RedisError| StoreError::Open {
        location: url.to_string(),
        message: format!("fill: {e}"),
    };
    for (ids, held_until) in [
        (completed.clone(), None),
        (layout.held_ids(), Some(now_ms + HELD_LEASE_MS)),
        (layout.lease_expired_ids(), Some(now_ms - 1)),
    ] {
        for chunk in chunks(ids) {
            let mut pipe = redis::pipe();
            for id in chunk {
                let name = record_name(prefix, CALLER, &key(id));
                let hash = filled_hash(id);
                let expires = now_ms + RETENTION_MS;
                let cmd = pipe
                    .cmd("HSET")
                    .arg(&name)
                    .arg("h")
                    .arg(&hash[..])
                    .arg("c")
                    .arg(now_ms - 1)
                    .arg("e")
                    .arg(expires);
                match held_until {
                    None => {
                        cmd.arg("s")
                            .arg(1)
                            .arg("rs")
                            .arg(201)
                            .arg("rb")
                            .arg(label_body(&format!("F-{id}"), id));
                    }
                    Some(until) => {
                        cmd.arg("s")
                            .arg(0)
                            .arg("l")
                            .arg(until)
                            .arg("t")
                            .arg(&(id as u128).to_le_bytes()[..]);
                    }
                }
                pipe.ignore();
                pipe.cmd("ZADD")
                    .arg(&index)
                    .arg(expires)
                    .arg(&name)
                    .ignore();
            }
            pipe.query::<()>(con).map_err(redis_err)?;
        }
    }
    let location = labels.path().display().to_string();
    let sqlite_err = |source| StoreError::Sqlite {
        location: location.clone(),
        source,
    };
    let conn = labels.connection();
    let tx = rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
        .map_err(sqlite_err)?;
    for id in completed {
        insert_label(&tx, &format!("F-{id}"), id, &key(id)).map_err(sqlite_err)?;
    }
    tx.commit().map_err(sqlite_err)
}

fn chunks(ids: Range<i64>) -> impl Iterator<Item = Range<i64>> {
    let end = ids.end;
    ids.step_by(FILL_CHUNK as usize)
        .map(move |from| from..(from + FILL_CHUNK).min(end))
}

/// The raw baseline on Redis: the store's commands in the engine's order, issued directly.
pub struct RedisBaseline {
    store: RedisStore,
}

impl RedisBaseline {
    pub fn new(store: RedisStore) -> Self {
        Self { store }
    }

    /// One CreateLabel as bare commands: the claim (or a read and a decision, and the takeover),
    /// then the guarded completion and the label's insert.
    pub fn create(&mut self, order_id: i64, key: &str) -> Result<Outcome, String> {
        let now = SystemClock.now_ms();
        let token = *Uuid::new_v4().as_bytes();
        let (con, _, prefix, labels) = self.store.raw();
        let name = record_name(prefix, CALLER, key);
        let index = index_name(prefix);
        let claimed: i64 = CLAIM
            .key(&name)
            .key(&index)
            .arg(&NO_HASH[..])
            .arg(now + LEASE_MS)
            .arg(&token[..])
            .arg(now)
            .arg(now + RETENTION_MS)
            .invoke(con)
            .map_err(|e| e.to_string())?;
        if claimed != 1 {
            let row: std::collections::HashMap<String, Vec<u8>> = redis::cmd("HGETALL")
                .arg(&name)
                .query(con)
                .map_err(|e| e.to_string())?;
            let int = |k: &str| {
                row.get(k)
                    .and_then(|v| std::str::from_utf8(v).ok())
                    .and_then(|v| v.parse::<i64>().ok())
            };
            match int("s") {
                None => return Ok(Outcome::InProgress),
                Some(1) => return Ok(Outcome::Replayed),
                Some(_) => {}
            }
            if int("l").is_some_and(|until| until > now) {
                return Ok(Outcome::InProgress);
            }
            let _: () = redis::cmd("HSET")
                .arg(&name)
                .arg("t")
                .arg(&token[..])
                .arg("l")
                .arg(now + LEASE_MS)
                .query(con)
                .map_err(|e| e.to_string())?;
        }
        let label_id = format!("B-{order_id}");
        let done: i64 = COMPLETE
            .key(&name)
            .key(&index)
            .arg(&token[..])
            .arg(201)
            .arg(label_body(&label_id, order_id))
            .arg(now + RETENTION_MS)
            .invoke(con)
            .map_err(|e| e.to_string())?;
        if done != 1 {
            return Ok(Outcome::InProgress);
        }
        let conn = labels.connection();
        let tx =
            rusqlite::Transaction::new_unchecked(conn, rusqlite::TransactionBehavior::Immediate)
                .map_err(|e| e.to_string())?;
        insert_label(&tx, &label_id, order_id, key).map_err(|e| e.to_string())?;
        tx.commit().map_err(|e| e.to_string())?;
        Ok(Outcome::Created)
    }
}

impl Service for RedisBaseline {
    fn serve(&mut self, job: Job) -> Result<Outcome, String> {
        self.create(job.order_id, &job.key)
    }

    fn store(&mut self) -> &mut dyn Store {
        &mut self.store
    }
}
