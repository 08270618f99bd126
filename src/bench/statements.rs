//! `bench --per-statement`: the latency of each of the seed's statements, engine and baseline,
//! as `pgbench -r` gives it per script line: txn 1's `BEGIN`, claim insert, the select on
//! conflict, the takeover and `COMMIT`; txn 2's `BEGIN`, completion, label insert and `COMMIT`.
//!
//! The engine's statements are timed by a [`Store`] wrapped around its store ([`TimedStore`]),
//! so the engine runs unchanged; each baseline times its own statements with the same
//! [`StatementTimes`]. Timing costs two clock reads per statement on both sides.

use crate::clock::Millis;
use crate::store::{
    Completion, Invariants, KeyRow, LabelRow, LeaseToken, NewKey, Store, StoreBytes, StoreError, Tx,
};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// One statement of a create, in the order a create runs them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Statement {
    Begin1,
    InsertKey,
    SelectOnConflict,
    TakeOver,
    Commit1,
    Begin2,
    CompleteKey,
    InsertLabel,
    Commit2,
    /// Any other statement (a lease release, a delete, a read outside a transaction).
    Other,
}

impl Statement {
    pub const ALL: [Statement; 10] = [
        Statement::Begin1,
        Statement::InsertKey,
        Statement::SelectOnConflict,
        Statement::TakeOver,
        Statement::Commit1,
        Statement::Begin2,
        Statement::CompleteKey,
        Statement::InsertLabel,
        Statement::Commit2,
        Statement::Other,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Statement::Begin1 => "txn 1 BEGIN",
            Statement::InsertKey => "txn 1 INSERT key ON CONFLICT DO NOTHING",
            Statement::SelectOnConflict => "txn 1 SELECT key (on conflict)",
            Statement::TakeOver => "txn 1 UPDATE take over lease",
            Statement::Commit1 => "txn 1 COMMIT",
            Statement::Begin2 => "txn 2 BEGIN",
            Statement::CompleteKey => "txn 2 UPDATE complete key",
            Statement::InsertLabel => "txn 2 INSERT label",
            Statement::Commit2 => "txn 2 COMMIT",
            Statement::Other => "other statements",
        }
    }

    fn index(self) -> usize {
        Statement::ALL
            .iter()
            .position(|s| *s == self)
            .unwrap_or(Statement::ALL.len() - 1)
    }
}

/// Microseconds up to a minute, 3 significant digits.
fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 60_000_000, 3).expect("static histogram bounds are valid")
}

/// Per-statement latency histograms, shared by every writer of a side.
#[derive(Clone)]
pub struct StatementTimes(Arc<Mutex<Vec<Histogram<u64>>>>);

impl Default for StatementTimes {
    fn default() -> Self {
        Self(Arc::new(Mutex::new(
            Statement::ALL.iter().map(|_| histogram()).collect(),
        )))
    }
}

impl StatementTimes {
    pub fn record(&self, s: Statement, took: Duration) {
        let mut h = self.0.lock().unwrap_or_else(|p| p.into_inner());
        h[s.index()].saturating_record(took.as_micros().max(1) as u64);
    }

    /// Runs `f` and records how long it took as `s`.
    pub fn time<R>(&self, s: Statement, f: impl FnOnce() -> R) -> R {
        let t0 = Instant::now();
        let r = f();
        self.record(s, t0.elapsed());
        r
    }

    /// Forgets everything recorded (after the warm-up).
    pub fn reset(&self) {
        for h in self.0.lock().unwrap_or_else(|p| p.into_inner()).iter_mut() {
            h.reset();
        }
    }

    /// One row per statement that ran.
    pub fn rows(&self) -> Vec<StatementRow> {
        let h = self.0.lock().unwrap_or_else(|p| p.into_inner());
        Statement::ALL
            .iter()
            .zip(h.iter())
            .filter(|(_, h)| !h.is_empty())
            .map(|(s, h)| StatementRow {
                statement: s.name().to_string(),
                count: h.len(),
                mean_us: h.mean(),
                p50_us: h.value_at_quantile(0.5),
                p99_us: h.value_at_quantile(0.99),
            })
            .collect()
    }
}

/// One statement's latency over the measured runs of one side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct StatementRow {
    pub statement: String,
    pub count: u64,
    pub mean_us: f64,
    pub p50_us: u64,
    pub p99_us: u64,
}

/// Both sides' rows, for the report.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PerStatement {
    pub engine: Vec<StatementRow>,
    /// Empty when the baseline does not time its statements (Redis's).
    pub baseline: Vec<StatementRow>,
}

/// The table `bench --per-statement` prints, as `pgbench -r` lists its statements.
pub fn render(p: &PerStatement, out: &mut String) {
    use std::fmt::Write as _;
    let _ = writeln!(
        out,
        "\nper-statement latency over the measured runs (as pgbench -r; timing adds two clock reads per statement)"
    );
    let _ = writeln!(
        out,
        "{:<10} {:<42} {:>9} {:>10} {:>10} {:>10}",
        "side", "statement", "count", "mean", "p50", "p99"
    );
    for (side, rows) in [("engine", &p.engine), ("baseline", &p.baseline)] {
        if rows.is_empty() {
            let _ = writeln!(out, "{side:<10} (not timed on this store)");
        }
        for r in rows {
            let _ = writeln!(
                out,
                "{side:<10} {:<42} {:>9} {:>10} {:>10} {:>10}",
                r.statement,
                crate::format::thousands(r.count as f64),
                crate::format::latency(r.mean_us.round() as u64),
                crate::format::latency(r.p50_us),
                crate::format::latency(r.p99_us),
            );
        }
    }
}

/// A store whose every statement is timed into `times`; otherwise the wrapped store.
pub struct TimedStore {
    inner: Box<dyn Store>,
    times: StatementTimes,
}

impl TimedStore {
    pub fn new(inner: Box<dyn Store>, times: StatementTimes) -> Self {
        Self { inner, times }
    }
}

/// A transaction of a [`TimedStore`]. Which transaction a `BEGIN` opened is known only by what
/// follows it (txn 2 completes a key), so its time is booked when the transaction ends.
struct TimedTx<'a> {
    /// Taken only by [`Tx::commit`], which consumes the transaction.
    inner: Option<Box<dyn Tx + 'a>>,
    times: &'a StatementTimes,
    second: bool,
    begin: Option<Duration>,
}

impl<'a> TimedTx<'a> {
    fn run<R>(
        &mut self,
        s: Statement,
        f: impl FnOnce(&mut (dyn Tx + 'a)) -> Result<R, StoreError>,
    ) -> Result<R, StoreError> {
        if matches!(s, Statement::CompleteKey | Statement::InsertLabel) {
            self.second = true;
        }
        let inner = self
            .inner
            .as_deref_mut()
            .expect("only commit takes the transaction, and it consumes it");
        self.times.time(s, || f(inner))
    }

    fn book_begin(&mut self) {
        if let Some(took) = self.begin.take() {
            let s = if self.second {
                Statement::Begin2
            } else {
                Statement::Begin1
            };
            self.times.record(s, took);
        }
    }
}

impl Drop for TimedTx<'_> {
    /// A transaction dropped without commit (a rollback) still began.
    fn drop(&mut self) {
        self.book_begin();
    }
}

impl Tx for TimedTx<'_> {
    fn insert_key(&mut self, key: &NewKey<'_>) -> Result<bool, StoreError> {
        self.run(Statement::InsertKey, |t| t.insert_key(key))
    }

    fn lock_key(&mut self, caller_id: &str, idem_key: &str) -> Result<Option<KeyRow>, StoreError> {
        self.run(Statement::SelectOnConflict, |t| {
            t.lock_key(caller_id, idem_key)
        })
    }

    fn take_over(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        lease_token: &LeaseToken,
        locked_until_ms: Millis,
    ) -> Result<(), StoreError> {
        self.run(Statement::TakeOver, |t| {
            t.take_over(caller_id, idem_key, lease_token, locked_until_ms)
        })
    }

    fn release_lease(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        lease_token: &LeaseToken,
        locked_until_ms: Millis,
    ) -> Result<bool, StoreError> {
        self.run(Statement::Other, |t| {
            t.release_lease(caller_id, idem_key, lease_token, locked_until_ms)
        })
    }

    fn complete_key(&mut self, done: &Completion<'_>) -> Result<bool, StoreError> {
        self.run(Statement::CompleteKey, |t| t.complete_key(done))
    }

    fn set_response_body(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        response_body: &str,
    ) -> Result<(), StoreError> {
        self.run(Statement::Other, |t| {
            t.set_response_body(caller_id, idem_key, response_body)
        })
    }

    fn insert_label(&mut self, label: &LabelRow) -> Result<Option<LabelRow>, StoreError> {
        self.run(Statement::InsertLabel, |t| t.insert_label(label))
    }

    fn delete_key(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        lease_token: &LeaseToken,
    ) -> Result<(), StoreError> {
        self.run(Statement::Other, |t| {
            t.delete_key(caller_id, idem_key, lease_token)
        })
    }

    fn undo_completion(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        response_body: &str,
    ) -> Result<(), StoreError> {
        self.run(Statement::Other, |t| {
            t.undo_completion(caller_id, idem_key, response_body)
        })
    }

    fn commit(mut self: Box<Self>) -> Result<(), StoreError> {
        self.book_begin();
        let s = if self.second {
            Statement::Commit2
        } else {
            Statement::Commit1
        };
        let inner = self
            .inner
            .take()
            .expect("only commit takes the transaction, and it consumes it");
        self.times.time(s, || inner.commit())
    }
}

impl Store for TimedStore {
    fn begin(&mut self) -> Result<Box<dyn Tx + '_>, StoreError> {
        let Self { inner, times } = self;
        let t0 = Instant::now();
        let tx = inner.begin()?;
        Ok(Box::new(TimedTx {
            inner: Some(tx),
            times,
            second: false,
            begin: Some(t0.elapsed()),
        }))
    }

    fn sweep_batch(
        &mut self,
        now_ms: Millis,
        batch: u32,
    ) -> Result<Vec<(String, String)>, StoreError> {
        self.inner.sweep_batch(now_ms, batch)
    }

    fn count_keys(&mut self) -> Result<u64, StoreError> {
        self.inner.count_keys()
    }

    fn labels(&mut self) -> Result<Vec<LabelRow>, StoreError> {
        self.inner.labels()
    }

    fn count_labels(&mut self) -> Result<u64, StoreError> {
        self.inner.count_labels()
    }

    fn bytes(&mut self) -> Result<StoreBytes, StoreError> {
        self.inner.bytes()
    }

    fn invariants(&mut self) -> Result<Invariants, StoreError> {
        self.inner.invariants()
    }

    fn describe(&self) -> String {
        self.inner.describe()
    }

    fn get_key(&mut self, caller_id: &str, idem_key: &str) -> Result<Option<KeyRow>, StoreError> {
        self.times
            .time(Statement::Other, || self.inner.get_key(caller_id, idem_key))
    }
}

/// A side's statement timer when the run asks for `--per-statement`.
pub fn timer(per_statement: bool) -> Option<StatementTimes> {
    per_statement.then(StatementTimes::default)
}

/// `store` with its statements timed when there is a timer.
pub fn timed(store: Box<dyn Store>, times: &Option<StatementTimes>) -> Box<dyn Store> {
    match times {
        Some(t) => Box::new(TimedStore::new(store, t.clone())),
        None => store,
    }
}

/// Runs `f`, timed as `s` when there is a timer: how a baseline times its own statements.
pub fn timed_if<R>(times: Option<&StatementTimes>, s: Statement, f: impl FnOnce() -> R) -> R {
    match times {
        Some(t) => t.time(s, f),
        None => f(),
    }
}
