//! The raw-SQL baseline: the statements of the engine's two transactions, issued directly with
//! rusqlite, without the engine (no key checks, no hashing, no JSON, no validation, no carrier).
//!
//! It runs the same statements in the same transactions with the same commit mode as the engine
//! (its own transaction each, or a savepoint each in a group commit), so the ratio of the two is
//! what the engine adds. The statements are the very text `store::sqlite::sql` holds; the test
//! `baseline_leaves_the_rows_the_engine_leaves` in `tests/it/bench.rs` holds the two together.

use super::drive::{Job, Service};
use super::fill::{CALLER, COST_CENTS, RETENTION_MS, label_body, tracking_no};
use super::statements::{Statement, StatementTimes, timed_if as timed};
use crate::clock::{Clock, Millis, SystemClock};
use crate::engine::Outcome;
use crate::store::group::GroupCommitStore;
use crate::store::sqlite::OwnTx;
use crate::store::sqlite::sql::{COMPLETE_KEY, INSERT_KEY, INSERT_LABEL, SELECT_KEY, TAKE_OVER};
use crate::store::{SqliteStore, Store, StoreError};
use rusqlite::{Connection, OptionalExtension, params};

/// The engine's default lease, so baseline claims look like the engine's.
const LEASE_MS: Millis = 30_000;
/// The baseline does no hashing: every key it claims gets this request hash.
const NO_HASH: [u8; 32] = [0; 32];

/// The label row of parcel 1 of `order_id`, as the engine writes it (also the Redis bench's
/// labels file and its fill).
pub(super) fn insert_label(
    c: &Connection,
    label_id: &str,
    order_id: i64,
    key: &str,
) -> rusqlite::Result<usize> {
    c.prepare_cached(INSERT_LABEL)?.execute(params![
        label_id,
        order_id,
        1,
        1,
        tracking_no(order_id),
        COST_CENTS,
        key,
        CALLER
    ])
}

/// A side's writer connection: each transaction commits on its own, or joins a group commit.
pub enum SqliteWriter {
    PerTransaction(SqliteStore),
    Group(GroupCommitStore),
}

impl SqliteWriter {
    pub fn as_store(&mut self) -> &mut dyn Store {
        match self {
            SqliteWriter::PerTransaction(s) => s,
            SqliteWriter::Group(g) => g,
        }
    }
}

enum End {
    Commit,
    Rollback,
}

enum Claim {
    Owned,
    Answered(Outcome),
}

pub struct Baseline {
    store: SqliteWriter,
    next_token: u128,
    /// `--per-statement`: where each statement's latency goes.
    times: Option<StatementTimes>,
}

impl Baseline {
    pub fn new(store: SqliteWriter) -> Self {
        Self {
            store,
            next_token: 1,
            times: None,
        }
    }

    /// The same baseline with its statements timed into `times`.
    pub fn timed(self, times: Option<StatementTimes>) -> Self {
        Self { times, ..self }
    }

    pub fn store(&mut self) -> &mut dyn Store {
        self.store.as_store()
    }

    /// Runs `f` in one transaction (or logical transaction), ending it as `f` says; `second`
    /// for txn 2, whose `BEGIN` and `COMMIT` are timed as its own.
    fn tx<R>(
        &mut self,
        second: bool,
        f: impl FnOnce(&Connection, Option<&StatementTimes>) -> rusqlite::Result<(R, End)>,
    ) -> Result<R, StoreError> {
        let times = self.times.as_ref();
        let (begin, commit) = if second {
            (Statement::Begin2, Statement::Commit2)
        } else {
            (Statement::Begin1, Statement::Commit1)
        };
        match &mut self.store {
            SqliteWriter::PerTransaction(s) => {
                // The location is written out only for an error, as the engine's store does.
                let path = s.path();
                let err = |source| StoreError::Sqlite {
                    location: path.display().to_string(),
                    source,
                };
                // The store's own transaction: cached BEGIN IMMEDIATE and COMMIT, as the engine's.
                let tx = timed(times, begin, || OwnTx::begin(s.connection())).map_err(err)?;
                let (r, end) = f(&tx, times).map_err(err)?;
                if let End::Commit = end {
                    timed(times, commit, || tx.commit()).map_err(err)?;
                }
                Ok(r)
            }
            SqliteWriter::Group(g) => {
                let tx = timed(times, begin, || g.begin_logical())?;
                let (r, end) = f(tx.connection(), times).map_err(|source| StoreError::Sqlite {
                    location: g.describe(),
                    source,
                })?;
                if let End::Commit = end {
                    timed(times, commit, || tx.commit_logical())?;
                }
                Ok(r)
            }
        }
    }

    /// One CreateLabel as bare SQL: txn 1 (claim, or read and decide), then txn 2 (complete the
    /// key and insert the label) when the key was claimed or taken over.
    pub fn create(&mut self, order_id: i64, key: &str) -> Result<Outcome, StoreError> {
        let now = SystemClock.now_ms();
        let token = self.next_token.to_le_bytes();
        self.next_token += 1;
        let claim = self.tx(false, |c, times| {
            let inserted = timed(times, Statement::InsertKey, || {
                c.prepare_cached(INSERT_KEY)?.execute(params![
                    CALLER,
                    key,
                    &NO_HASH[..],
                    now + LEASE_MS,
                    &token[..],
                    now,
                    now + RETENTION_MS
                ])
            })?;
            if inserted == 1 {
                return Ok((Claim::Owned, End::Commit));
            }
            let row = timed(times, Statement::SelectOnConflict, || {
                c.prepare_cached(SELECT_KEY)?
                    .query_row(params![CALLER, key], read_key_row)
                    .optional()
            })?;
            let Some((state, locked_until)) = row else {
                return Ok((Claim::Answered(Outcome::InProgress), End::Rollback));
            };
            if state == 1 {
                return Ok((Claim::Answered(Outcome::Replayed), End::Rollback));
            }
            if locked_until.is_some_and(|until| until > now) {
                return Ok((Claim::Answered(Outcome::InProgress), End::Rollback));
            }
            timed(times, Statement::TakeOver, || {
                c.prepare_cached(TAKE_OVER)?.execute(params![
                    CALLER,
                    key,
                    now + LEASE_MS,
                    &token[..]
                ])
            })?;
            Ok((Claim::Owned, End::Commit))
        })?;
        if let Claim::Answered(outcome) = claim {
            return Ok(outcome);
        }
        let label_id = format!("B-{order_id}");
        let body = label_body(&label_id, order_id);
        self.tx(true, |c, times| {
            let done = timed(times, Statement::CompleteKey, || {
                c.prepare_cached(COMPLETE_KEY)?.execute(params![
                    CALLER,
                    key,
                    201,
                    body,
                    now + RETENTION_MS,
                    &token[..]
                ])
            })?;
            if done != 1 {
                return Ok((Outcome::InProgress, End::Rollback));
            }
            timed(times, Statement::InsertLabel, || {
                insert_label(c, &label_id, order_id, key)
            })?;
            Ok((Outcome::Created, End::Commit))
        })
    }
}

/// Reads every column, as the engine does, and keeps what the decision needs.
fn read_key_row(r: &rusqlite::Row<'_>) -> rusqlite::Result<(i64, Option<Millis>)> {
    let _hash: Vec<u8> = r.get(0)?;
    let _token: Option<Vec<u8>> = r.get(3)?;
    let _status: Option<u16> = r.get(4)?;
    let _body: Option<String> = r.get(5)?;
    let _created: Millis = r.get(6)?;
    let _expires: Millis = r.get(7)?;
    Ok((r.get(1)?, r.get(2)?))
}

impl Service for Baseline {
    fn serve(&mut self, job: Job) -> Result<Outcome, String> {
        self.create(job.order_id, &job.key)
            .map_err(|e| e.to_string())
    }

    fn store(&mut self) -> &mut dyn Store {
        Baseline::store(self)
    }
}
