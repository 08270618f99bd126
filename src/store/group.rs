//! Group commit for SQLite: several logical transactions share one physical commit.
//!
//! SQLite allows one writer at a time, and in WAL mode most of what a small transaction costs is
//! its commit: the WAL frames of every page it touched and, with `synchronous = FULL`, an fsync.
//! [`GroupCommitStore`] owns one connection, opens one outer `BEGIN IMMEDIATE` per batch and runs
//! each logical transaction of the engine inside its own savepoint:
//!
//! - [`Tx::commit`] is `RELEASE`: the logical transaction joins the batch as a whole. Nothing of
//!   it is visible to other connections yet.
//! - dropping a [`Tx`] without commit (an early answer, an error, an attempt that dies) is
//!   `ROLLBACK TO` + `RELEASE`: that transaction is undone, the rest of the batch stays.
//! - [`GroupCommitStore::flush`] is the physical `COMMIT`.
//!
//! Whoever answers callers holds each answer until the batch it depends on has ended
//! ([`GroupCommitStore::ticket`], [`GroupCommitStore::ended_through`],
//! [`GroupCommitStore::take_lost`]), so a crash, which rolls back the open batch, loses only
//! answers that were never given. A logical transaction keeps the durability of the connection's
//! `synchronous` setting, as when it commits on its own: group commit changes when the commit
//! happens, not what it guarantees.
//!
//! Clones share the connection behind a mutex. A thread that holds a live `Tx` of this store must
//! not call another method of it (it would wait on itself): flush between transactions.

use super::{
    Completion, Invariants, KeyRow, LabelRow, LeaseToken, NewKey, SqliteOptions, SqliteStore,
    Store, StoreBytes, StoreError, Tx,
};
use crate::clock::Millis;
use rusqlite::Connection;
use serde::Serialize;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// The largest batch accepted: a bound on how much one failed commit can take with it and on how
/// long the first caller of a batch waits for the last.
pub const MAX_BATCH_LIMIT: u32 = 65_536;
/// The longest maximum wait accepted; a batch held longer only adds latency.
pub const MAX_WAIT_LIMIT: Duration = Duration::from_secs(1);

/// When a batch commits.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct GroupPolicy {
    /// Most logical transactions (committed or rolled back) in one physical commit.
    pub max_batch: u32,
    /// Longest a batch stays open after its first logical transaction began.
    pub max_wait: Duration,
}

impl Default for GroupPolicy {
    /// 256 transactions or 2 ms: at ~40 µs of engine work per create (two logical transactions)
    /// a loaded writer fills about 100 in 2 ms, so the wait bounds latency under load and the size
    /// bounds a batch's WAL write (a few hundred pages at most).
    fn default() -> Self {
        Self {
            max_batch: 256,
            max_wait: Duration::from_millis(2),
        }
    }
}

impl GroupPolicy {
    pub fn validate(&self) -> Result<(), String> {
        if self.max_batch == 0 || self.max_batch > MAX_BATCH_LIMIT {
            return Err(format!(
                "--batch {}: the batch size must be between 1 and {MAX_BATCH_LIMIT} transactions (e.g. --batch 256)",
                self.max_batch
            ));
        }
        if self.max_wait > MAX_WAIT_LIMIT {
            return Err(format!(
                "--max-wait {}: a batch may stay open at most {} ms (e.g. --max-wait 2ms)",
                crate::duration::format_secs(self.max_wait.as_secs_f64()),
                MAX_WAIT_LIMIT.as_millis()
            ));
        }
        Ok(())
    }
}

/// Counts since the store was opened.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct GroupStats {
    /// Physical commits that succeeded.
    pub commits: u64,
    /// Logical transactions released into a batch.
    pub logical_commits: u64,
    /// Logical transactions rolled back to their savepoint (replays, 409s, errors, deaths).
    pub logical_rollbacks: u64,
    /// Batches whose physical commit failed or that SQLite aborted: their answers must not be
    /// given.
    pub lost_batches: u64,
    /// The most logical transactions one batch held.
    pub largest_batch: u32,
}

/// A batch that ended without committing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostBatch {
    pub id: u64,
    pub error: String,
}

struct Batch {
    id: u64,
    opened: Instant,
    members: u32,
}

struct Shared {
    store: SqliteStore,
    policy: GroupPolicy,
    open: Option<Batch>,
    /// The id of the most recent batch; ids start at 1 so ticket 0 means "nothing pending".
    last_id: u64,
    /// Every batch with an id up to this one has ended, committed or lost.
    ended_through: u64,
    lost: Vec<LostBatch>,
    stats: GroupStats,
}

const SAVEPOINT: &str = "SAVEPOINT logical";
const RELEASE: &str = "RELEASE logical";
const ROLLBACK_TO: &str = "ROLLBACK TO logical";

impl Shared {
    fn exec(&self, sql: &str) -> Result<(), StoreError> {
        self.store
            .connection()
            .prepare_cached(sql)
            .and_then(|mut s| s.execute([]).map(|_| ()))
            .map_err(|e| self.err(e))
    }

    fn err(&self, source: rusqlite::Error) -> StoreError {
        StoreError::Sqlite {
            location: self.store.path().display().to_string(),
            source,
        }
    }

    fn is_due(&self) -> bool {
        self.open.as_ref().is_some_and(|b| {
            b.members >= self.policy.max_batch || b.opened.elapsed() >= self.policy.max_wait
        })
    }

    /// The physical COMMIT of the open batch, if any.
    fn commit_open(&mut self) -> Result<(), StoreError> {
        let Some(batch) = self.open.take() else {
            return Ok(());
        };
        self.ended_through = batch.id;
        match self.exec("COMMIT") {
            Ok(()) => {
                self.stats.commits += 1;
                self.stats.largest_batch = self.stats.largest_batch.max(batch.members);
                Ok(())
            }
            Err(e) => {
                if !self.store.connection().is_autocommit() {
                    // Best effort: the batch is lost either way, and the connection must leave the
                    // failed transaction before the next batch can begin.
                    let _ = self.exec("ROLLBACK");
                }
                self.record_lost(batch.id, &e);
                Err(e)
            }
        }
    }

    fn record_lost(&mut self, id: u64, e: &StoreError) {
        self.stats.lost_batches += 1;
        self.lost.push(LostBatch {
            id,
            error: e.to_string(),
        });
    }

    /// SQLite rolls the whole transaction back on some errors (a full disk, an I/O error). Then
    /// the batch is gone, and every answer that depends on it must be withheld.
    fn lose_open_batch(&mut self, e: &StoreError) {
        if let Some(batch) = self.open.take() {
            if !self.store.connection().is_autocommit() {
                let _ = self.exec("ROLLBACK");
            }
            self.ended_through = batch.id;
            self.record_lost(batch.id, e);
        }
    }

    /// A statement must never run outside the batch: after SQLite aborted the outer transaction,
    /// it would commit on its own, unbatched and unguarded.
    fn check_in_batch(&self) -> Result<(), StoreError> {
        if self.open.is_some() && !self.store.connection().is_autocommit() {
            Ok(())
        } else {
            Err(StoreError::Corrupt(format!(
                "{}: the batch this transaction belonged to was rolled back",
                self.store.path().display()
            )))
        }
    }
}

/// A SQLite store whose transactions are logical: savepoints inside a shared physical commit.
/// See the module documentation.
#[derive(Clone)]
pub struct GroupCommitStore {
    shared: Arc<Mutex<Shared>>,
    name: String,
}

impl GroupCommitStore {
    /// Opens (creating if needed) the store at `path` as [`SqliteStore::open`] does.
    pub fn open(
        path: &Path,
        options: &SqliteOptions,
        policy: GroupPolicy,
    ) -> Result<Self, StoreError> {
        policy.validate().map_err(|message| StoreError::Open {
            location: path.display().to_string(),
            message,
        })?;
        let store = SqliteStore::open(path, options)?;
        // The engine's statements, the sweeper's and the five of batching: more than the default
        // cache of 16, and a statement evicted from it is parsed again on every use.
        store.connection().set_prepared_statement_cache_capacity(32);
        Ok(Self {
            name: format!("sqlite+group:{}", path.display()),
            shared: Arc::new(Mutex::new(Shared {
                store,
                policy,
                open: None,
                last_id: 0,
                ended_through: 0,
                lost: Vec::new(),
                stats: GroupStats::default(),
            })),
        })
    }

    fn lock(&self) -> MutexGuard<'_, Shared> {
        // A panic inside a logical transaction unwinds through its Drop, which rolls it back
        // before the guard is released: the shared state is consistent, so take it over.
        self.shared.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn stats(&self) -> GroupStats {
        self.lock().stats
    }

    /// The batch whose commit makes durable everything this store has done so far: the open
    /// batch's id, or 0 when none is open (everything done has already ended).
    pub fn ticket(&self) -> u64 {
        self.lock().open.as_ref().map_or(0, |b| b.id)
    }

    /// Every batch with an id up to this one has ended: committed, unless [`Self::take_lost`]
    /// names it. Batches end in id order.
    pub fn ended_through(&self) -> u64 {
        self.lock().ended_through
    }

    /// The batches that ended without committing since the last call.
    pub fn take_lost(&self) -> Vec<LostBatch> {
        std::mem::take(&mut self.lock().lost)
    }

    /// True when the open batch is full or has waited its maximum.
    pub fn is_due(&self) -> bool {
        self.lock().is_due()
    }

    /// Commits the open batch, if any. On failure the batch is rolled back, reported by
    /// [`Self::take_lost`], and the error returned.
    pub fn flush(&self) -> Result<(), StoreError> {
        self.lock().commit_open()
    }

    /// [`Self::flush`] when [`Self::is_due`].
    pub fn flush_if_due(&self) -> Result<(), StoreError> {
        let mut shared = self.lock();
        if shared.is_due() {
            shared.commit_open()
        } else {
            Ok(())
        }
    }

    /// Starts a logical transaction in the open batch, opening one if needed. A batch that is
    /// already full or too old commits first, so no batch outgrows its policy; if that commit
    /// fails, its loss is recorded for [`Self::take_lost`] and this transaction starts a new one.
    pub fn begin_logical(&self) -> Result<GroupTx<'_>, StoreError> {
        let mut shared = self.lock();
        if shared.is_due() {
            let _ = shared.commit_open();
        }
        if shared.open.is_none() {
            shared.exec("BEGIN IMMEDIATE")?;
            shared.last_id += 1;
            shared.open = Some(Batch {
                id: shared.last_id,
                opened: Instant::now(),
                members: 0,
            });
        }
        if let Err(e) = shared.exec(SAVEPOINT) {
            shared.lose_open_batch(&e);
            return Err(e);
        }
        if let Some(batch) = shared.open.as_mut() {
            batch.members += 1;
        }
        Ok(GroupTx {
            shared,
            done: false,
        })
    }
}

/// One logical transaction: a savepoint in the open batch. Dropping it without commit rolls back
/// to the savepoint, which is what a crash of this attempt alone does.
pub struct GroupTx<'a> {
    shared: MutexGuard<'a, Shared>,
    done: bool,
}

impl GroupTx<'_> {
    /// The connection, for statements other than the engine's (the bench's raw-SQL baseline).
    pub fn connection(&self) -> &Connection {
        self.shared.store.connection()
    }

    /// `RELEASE`: the transaction becomes part of the batch; it is durable once the batch commits.
    pub fn commit_logical(mut self) -> Result<(), StoreError> {
        self.done = true;
        let result = self
            .shared
            .check_in_batch()
            .and_then(|()| self.shared.exec(RELEASE));
        match result {
            Ok(()) => {
                self.shared.stats.logical_commits += 1;
                Ok(())
            }
            Err(e) => {
                self.shared.lose_open_batch(&e);
                Err(e)
            }
        }
    }

    fn in_batch(&self) -> Result<&SqliteStore, StoreError> {
        self.shared.check_in_batch()?;
        Ok(&self.shared.store)
    }
}

impl Drop for GroupTx<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        let undone = self
            .shared
            .check_in_batch()
            .and_then(|()| self.shared.exec(ROLLBACK_TO))
            .and_then(|()| self.shared.exec(RELEASE));
        match undone {
            Ok(()) => self.shared.stats.logical_rollbacks += 1,
            // The savepoint cannot be undone alone: the batch is in an unknown state, so none of
            // it may commit.
            Err(e) => self.shared.lose_open_batch(&e),
        }
    }
}

impl Tx for GroupTx<'_> {
    fn insert_key(&mut self, key: &NewKey<'_>) -> Result<bool, StoreError> {
        self.in_batch()?.enclosed_tx().insert_key(key)
    }

    fn lock_key(&mut self, caller_id: &str, idem_key: &str) -> Result<Option<KeyRow>, StoreError> {
        self.in_batch()?.enclosed_tx().lock_key(caller_id, idem_key)
    }

    fn take_over(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        lease_token: &LeaseToken,
        locked_until_ms: Millis,
    ) -> Result<(), StoreError> {
        self.in_batch()?
            .enclosed_tx()
            .take_over(caller_id, idem_key, lease_token, locked_until_ms)
    }

    fn release_lease(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        lease_token: &LeaseToken,
        locked_until_ms: Millis,
    ) -> Result<bool, StoreError> {
        self.in_batch()?.enclosed_tx().release_lease(
            caller_id,
            idem_key,
            lease_token,
            locked_until_ms,
        )
    }

    fn complete_key(&mut self, done: &Completion<'_>) -> Result<bool, StoreError> {
        self.in_batch()?.enclosed_tx().complete_key(done)
    }

    fn set_response_body(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        response_body: &str,
    ) -> Result<(), StoreError> {
        self.in_batch()?
            .enclosed_tx()
            .set_response_body(caller_id, idem_key, response_body)
    }

    fn insert_label(&mut self, label: &LabelRow) -> Result<Option<LabelRow>, StoreError> {
        self.in_batch()?.enclosed_tx().insert_label(label)
    }

    fn delete_key(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        lease_token: &LeaseToken,
    ) -> Result<(), StoreError> {
        self.in_batch()?
            .enclosed_tx()
            .delete_key(caller_id, idem_key, lease_token)
    }

    fn commit(self: Box<Self>) -> Result<(), StoreError> {
        (*self).commit_logical()
    }
}

/// Reads run on the batching connection, so they see the open batch's logical transactions as
/// committed, as the next logical transaction would.
impl Store for GroupCommitStore {
    fn begin(&mut self) -> Result<Box<dyn Tx + '_>, StoreError> {
        Ok(Box::new(self.begin_logical()?))
    }

    /// The sweep is already one transaction over `batch` records: it commits on its own, after
    /// the open batch, rather than hold that batch's answers for its deletes.
    fn sweep_batch(
        &mut self,
        now_ms: Millis,
        batch: u32,
    ) -> Result<Vec<(String, String)>, StoreError> {
        let mut shared = self.lock();
        shared.commit_open()?;
        shared.store.sweep_batch(now_ms, batch)
    }

    fn count_keys(&mut self) -> Result<u64, StoreError> {
        self.lock().store.count_keys()
    }

    fn labels(&mut self) -> Result<Vec<LabelRow>, StoreError> {
        self.lock().store.labels()
    }

    fn count_labels(&mut self) -> Result<u64, StoreError> {
        self.lock().store.count_labels()
    }

    fn bytes(&mut self) -> Result<StoreBytes, StoreError> {
        self.lock().store.bytes()
    }

    fn invariants(&mut self) -> Result<Invariants, StoreError> {
        self.lock().store.invariants()
    }

    fn describe(&self) -> String {
        self.name.clone()
    }

    fn get_key(&mut self, caller_id: &str, idem_key: &str) -> Result<Option<KeyRow>, StoreError> {
        self.lock().store.get_key(caller_id, idem_key)
    }
}
