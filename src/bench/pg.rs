//! The bench on PostgreSQL: the same mix, slices and checks as on SQLite, with one writer per
//! pooled connection, the raw-SQL baseline written with the `postgres` client, and `pgbench`
//! running the seed's statements as a custom script on a third, identically filled schema.
//!
//! Each run writes new schemas (`store::Stores` makes them): `NAME`, `NAME_baseline` and
//! `NAME_pgbench` when the URL names `?schema=NAME` (kept afterwards, refused if any exists),
//! else scratch schemas dropped at the end, as SQLite's temporary directory is.

use super::BenchConfig;
use super::drive::{Job, Service};
use super::fill::{
    CALLER, COST_CENTS, HELD_LEASE_MS, Layout, Prefill, RETENTION_MS, filled_hash, key, label_body,
    tracking_no,
};
use super::mix::Kind;
use super::statements::{Statement as Step, StatementTimes, timed_if as timed};
use crate::clock::{Clock, Millis, SystemClock};
use crate::engine::Outcome;
use crate::store::postgres::{deadline, sql};
use crate::store::{PostgresStore, Store, StoreError};
use postgres::Statement;
use serde::Serialize;
use std::path::Path;
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};
use uuid::Uuid;

/// The engine's default lease, so baseline claims look like the engine's.
const LEASE_MS: Millis = 30_000;
/// Rows per `INSERT … SELECT FROM unnest(…)` of the fill: a few MB of parameters per statement.
const FILL_CHUNK: i64 = 10_000;

fn to_time(ms: Millis) -> SystemTime {
    UNIX_EPOCH + Duration::from_millis(ms.max(0) as u64)
}

fn pg_err(store: &PostgresStore, e: postgres::Error) -> StoreError {
    StoreError::Postgres {
        location: store.describe(),
        error: e,
    }
}

/// Writes every range of `layout` into the store's schema, exactly as the engine would have
/// left those keys (the SQLite filler's rows, in bulk through `unnest`).
pub fn fill(store: &mut PostgresStore, layout: &Layout, now_ms: Millis) -> Result<(), StoreError> {
    for (what, ids) in [
        (Prefill::Completed, layout.completed_ids()),
        (Prefill::Held, layout.held_ids()),
        (Prefill::LeaseExpired, layout.lease_expired_ids()),
    ] {
        let mut from = ids.start;
        while from < ids.end {
            let to = (from + FILL_CHUNK).min(ids.end);
            fill_chunk(store, what, from..to, now_ms)?;
            from = to;
        }
    }
    let client = store.client()?;
    client
        .batch_execute(&format!(
            "SET statement_timeout = {}; ANALYZE idempotency_keys; ANALYZE labels; {}",
            deadline::BULK_TIMEOUT.as_millis(),
            deadline::engine_settings()
        ))
        .map_err(|e| StoreError::Corrupt(format!("ANALYZE after the fill: {e}")))
}

fn fill_chunk(
    store: &mut PostgresStore,
    what: Prefill,
    ids: std::ops::Range<i64>,
    now_ms: Millis,
) -> Result<(), StoreError> {
    let completed = matches!(what, Prefill::Completed | Prefill::RecordExpired);
    let mut keys = Vec::new();
    let mut hashes = Vec::new();
    let mut tokens: Vec<Option<Uuid>> = Vec::new();
    let mut bodies: Vec<Option<String>> = Vec::new();
    let mut label_ids = Vec::new();
    let mut order_ids = Vec::new();
    let mut trackings = Vec::new();
    for id in ids {
        keys.push(key(id));
        hashes.push(filled_hash(id).to_vec());
        let label_id = format!("F-{id}");
        if completed {
            tokens.push(None);
            bodies.push(Some(label_body(&label_id, id)));
        } else {
            tokens.push(Some(Uuid::from_bytes((id as u128).to_le_bytes())));
            bodies.push(None);
        }
        label_ids.push(label_id);
        order_ids.push(id);
        trackings.push(tracking_no(id));
    }
    let (state, locked_until, status) = if completed {
        ("completed", None, Some(201i32))
    } else {
        let until = match what {
            Prefill::Held => now_ms + HELD_LEASE_MS,
            _ => now_ms - 1,
        };
        ("started", Some(to_time(until)), None)
    };
    let expires_at = match what {
        Prefill::RecordExpired => now_ms - 1,
        _ => now_ms + RETENTION_MS,
    };
    let created_at = to_time(now_ms - 1);
    let expires_at = to_time(expires_at);
    let client = store.client()?;
    let mut tx = client
        .transaction()
        .map_err(|e| StoreError::Corrupt(format!("fill: {e}")))?;
    // A chunk of the fill is one big INSERT: its own deadline, not the engine's.
    tx.batch_execute(&format!(
        "SET LOCAL statement_timeout = {}",
        deadline::BULK_TIMEOUT.as_millis()
    ))
    .map_err(|e| StoreError::Corrupt(format!("fill: {e}")))?;
    tx.execute(
        "INSERT INTO idempotency_keys
           (caller_id, idem_key, request_hash, state, locked_until, lease_token,
            response_status, response_body, created_at, expires_at)
         SELECT $1, k, h, $2::text::key_state, $3, t, $4, b, $5, $6
           FROM unnest($7::text[], $8::bytea[], $9::uuid[], $10::text[]) AS u(k, h, t, b)",
        &[
            &CALLER,
            &state,
            &locked_until,
            &status,
            &created_at,
            &expires_at,
            &keys,
            &hashes,
            &tokens,
            &bodies,
        ],
    )
    .map_err(|e| {
        StoreError::Corrupt(format!("fill: {}", crate::store::postgres::pg_message(&e)))
    })?;
    if completed {
        tx.execute(
            "INSERT INTO labels (label_id, order_id, parcel_no, label_version, tracking_no,
                                 cost_cents, created_by_key, order_space)
             SELECT l, o, 1, 1, t, $1, k, ''
               FROM unnest($2::text[], $3::int8[], $4::text[], $5::text[]) AS u(l, o, t, k)",
            &[&COST_CENTS, &label_ids, &order_ids, &trackings, &keys],
        )
        .map_err(|e| {
            StoreError::Corrupt(format!("fill: {}", crate::store::postgres::pg_message(&e)))
        })?;
    }
    tx.commit()
        .map_err(|e| StoreError::Corrupt(format!("fill: {e}")))
}

/// The raw-SQL baseline on PostgreSQL: the store's statements, in the same transactions, issued
/// directly with the client (no hashing, JSON, validation or carrier), as `Baseline` does on
/// SQLite.
pub struct PgBaseline {
    store: PostgresStore,
    st: BaselineStatements,
    times: Option<StatementTimes>,
}

struct BaselineStatements {
    /// With partitions: the claim's per-key advisory lock, as the store takes it.
    claim_lock: Option<Statement>,
    insert_key: Statement,
    lock_key: Statement,
    take_over: Statement,
    complete_key: Statement,
    insert_label: Statement,
}

impl PgBaseline {
    pub fn new(mut store: PostgresStore) -> Result<Self, StoreError> {
        let partitioned = store.partitioned();
        let client = store.client()?;
        let prepared = (|| -> Result<BaselineStatements, postgres::Error> {
            Ok(BaselineStatements {
                claim_lock: if partitioned {
                    Some(client.prepare(sql::CLAIM_LOCK)?)
                } else {
                    None
                },
                insert_key: client.prepare(if partitioned {
                    sql::INSERT_KEY_PARTITIONED
                } else {
                    sql::INSERT_KEY
                })?,
                lock_key: client.prepare(sql::LOCK_KEY)?,
                take_over: client.prepare(sql::TAKE_OVER)?,
                complete_key: client.prepare(sql::COMPLETE_KEY)?,
                insert_label: client.prepare(sql::INSERT_LABEL)?,
            })
        })();
        let st = prepared.map_err(|e| pg_err(&store, e))?;
        Ok(Self {
            store,
            st,
            times: None,
        })
    }

    /// The same baseline with its statements timed into `times` (`--per-statement`).
    pub fn timed(self, times: Option<StatementTimes>) -> Self {
        Self { times, ..self }
    }

    /// One CreateLabel as bare SQL: txn 1 (claim, or read and decide), then txn 2 (complete the
    /// key and insert the label) when the key was claimed or taken over.
    pub fn create(&mut self, order_id: i64, key: &str) -> Result<Outcome, String> {
        let client = self.store.client().map_err(|e| e.to_string())?;
        create(client, &self.st, self.times.as_ref(), order_id, key)
            .map_err(|e| crate::store::postgres::pg_message(&e))
    }
}

fn create(
    client: &mut postgres::Client,
    st: &BaselineStatements,
    times: Option<&StatementTimes>,
    order_id: i64,
    key: &str,
) -> Result<Outcome, postgres::Error> {
    let now = SystemClock.now_ms();
    let token = Uuid::new_v4();
    let mut tx = timed(times, Step::Begin1, || client.transaction())?;
    // With partitions the claim's advisory lock is part of the claim, as in the store.
    let inserted = timed(times, Step::InsertKey, || {
        if let Some(lock) = &st.claim_lock {
            tx.execute(lock, &[&CALLER, &key])?;
        }
        tx.execute(
            &st.insert_key,
            &[
                &CALLER,
                &key,
                &&[0u8; 32][..],
                &to_time(now + LEASE_MS),
                &token,
                &to_time(now),
                &to_time(now + RETENTION_MS),
            ],
        )
    })?;
    if inserted != 1 {
        let row = timed(times, Step::SelectOnConflict, || {
            tx.query_opt(&st.lock_key, &[&CALLER, &key])
        })?;
        let Some(row) = row else {
            return Ok(Outcome::InProgress);
        };
        // Every column read, as the engine does.
        let _hash: Vec<u8> = row.try_get(0)?;
        let state: String = row.try_get(1)?;
        let locked_until: Option<SystemTime> = row.try_get(2)?;
        let _token: Option<Uuid> = row.try_get(3)?;
        let _status: Option<i32> = row.try_get(4)?;
        let _body: Option<String> = row.try_get(5)?;
        let _created: SystemTime = row.try_get(6)?;
        let _expires: SystemTime = row.try_get(7)?;
        if state == "completed" {
            return Ok(Outcome::Replayed);
        }
        if locked_until.is_some_and(|until| until > to_time(now)) {
            return Ok(Outcome::InProgress);
        }
        timed(times, Step::TakeOver, || {
            tx.execute(
                &st.take_over,
                &[&CALLER, &key, &to_time(now + LEASE_MS), &token],
            )
        })?;
    }
    timed(times, Step::Commit1, || tx.commit())?;
    let label_id = format!("B-{order_id}");
    let body = label_body(&label_id, order_id);
    let mut tx = timed(times, Step::Begin2, || client.transaction())?;
    let done = timed(times, Step::CompleteKey, || {
        tx.execute(
            &st.complete_key,
            &[
                &CALLER,
                &key,
                &201i32,
                &body,
                &to_time(now + RETENTION_MS),
                &token,
            ],
        )
    })?;
    if done != 1 {
        return Ok(Outcome::InProgress);
    }
    timed(times, Step::InsertLabel, || {
        tx.execute(
            &st.insert_label,
            &[
                &label_id,
                &order_id,
                &1i64,
                &1i64,
                &tracking_no(order_id),
                &COST_CENTS,
                &key,
                &CALLER,
            ],
        )
    })?;
    timed(times, Step::Commit2, || tx.commit())?;
    Ok(Outcome::Created)
}

impl Service for PgBaseline {
    fn serve(&mut self, job: Job) -> Result<Outcome, String> {
        self.create(job.order_id, &job.key)
    }

    fn store(&mut self) -> &mut dyn Store {
        &mut self.store
    }
}

/// What `pgbench` reached with the seed's statements as custom scripts.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct PgbenchReport {
    /// Client connections, the bench's `--pool`.
    pub clients: u32,
    pub duration_s: u64,
    /// Script runs per second: each run is one CreateLabel of the mix's kind.
    pub creates_per_s: f64,
    /// Script runs that failed (pgbench's count); a non-zero count taints the figure.
    pub failed: u64,
    /// Engine creates/s over pgbench's: the share of a C client's rate the engine reaches.
    pub engine_vs_pgbench: f64,
    pub baseline_vs_pgbench: f64,
    /// The scripts and their weights, e.g. `first@85,replay@10,conflict@5`.
    pub scripts: String,
}

/// The pgbench scripts for a mix (no literal holds a colon: pgbench would read `:1` or `:v1` in
/// a literal as a variable): `first` (txn 1 claims, txn 2 completes and inserts the label;
/// takeovers run as firsts, as pgbench cannot hand out each abandoned key once), `replay` (txn 1
/// finds a completed key and rolls back; reused keys do the same statements) and `conflict`
/// (txn 1 finds a held key and rolls back).
fn scripts(config: &BenchConfig, layout: &Layout) -> Vec<(&'static str, u32, String)> {
    let w = |k: Kind| config.mix.weights.get(k);
    let insert = claim_sql(config.sweeper.partitioned());
    let claim = |id_range: String| {
        format!(
            "\\set id {id_range}
BEGIN;
{insert};
SELECT request_hash, state, locked_until, lease_token, response_status, response_body, created_at, expires_at
  FROM idempotency_keys WHERE caller_id = '{CALLER}' AND idem_key = concat_ws(chr(58), 'label', :id::int8, 1, 'v1') FOR UPDATE;
ROLLBACK;
"
        )
    };
    let first = format!(
        "\\set id random(2000000000, 9000000000000)
BEGIN;
{insert}
  RETURNING lease_token AS token \\gset
COMMIT;
BEGIN;
UPDATE idempotency_keys
   SET state = 'completed', locked_until = NULL, lease_token = NULL, response_status = 201,
       response_body = json_build_object('cost_cents', {COST_CENTS}, 'label_id', 'P-' || :id::int8, 'label_version', 1, 'order_id', :id::int8, 'parcel_no', 1, 'tracking_no', 'GRD' || :id::int8)::text,
       expires_at = now() + interval '24 h'
 WHERE caller_id = '{CALLER}' AND idem_key = concat_ws(chr(58), 'label', :id::int8, 1, 'v1')
   AND state = 'started' AND lease_token = :token::uuid;
INSERT INTO labels (label_id, order_id, parcel_no, label_version, tracking_no, cost_cents, created_by_key, order_space)
  VALUES ('P-' || :id::int8, :id::int8, 1, 1, 'GRD' || :id::int8, {COST_CENTS}, concat_ws(chr(58), 'label', :id::int8, 1, 'v1'), '')
  ON CONFLICT (order_space, order_id, parcel_no, label_version) DO NOTHING;
COMMIT;
"
    );
    let completed = layout.completed_ids();
    let held = layout.held_ids();
    let mut out = vec![("first", w(Kind::First) + w(Kind::Takeover), first)];
    if layout.completed > 0 {
        out.push((
            "replay",
            w(Kind::Replay) + w(Kind::Reused),
            claim(format!(
                "random({}, {})",
                completed.start,
                completed.end - 1
            )),
        ));
    }
    if layout.held > 0 {
        out.push((
            "conflict",
            w(Kind::Conflict),
            claim(format!("random({}, {})", held.start, held.end - 1)),
        ));
    }
    out.retain(|(_, weight, _)| *weight > 0);
    out
}

/// The claim as pgbench runs it: `ON CONFLICT` on the seed's table; on a partitioned one the
/// store's per-key advisory lock, then an insert only if no record exists.
fn claim_sql(partitioned: bool) -> String {
    let key = "concat_ws(chr(58), 'label', :id::int8, 1, 'v1')";
    let columns = "caller_id, idem_key, request_hash, state, locked_until, lease_token, created_at, expires_at";
    let values = format!(
        "'{CALLER}', {key}, '\\x{zeros}'::bytea, 'started', now() + interval '30 s', gen_random_uuid(), now(), now() + interval '24 h'",
        zeros = "00".repeat(32)
    );
    if partitioned {
        format!(
            "SELECT pg_advisory_xact_lock(hashtextextended('{CALLER}' || chr(31) || {key}, 0));
INSERT INTO idempotency_keys ({columns})
  SELECT {values}
   WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys WHERE caller_id = '{CALLER}' AND idem_key = {key})"
        )
    } else {
        format!(
            "INSERT INTO idempotency_keys ({columns})
  VALUES ({values})
  ON CONFLICT (caller_id, idem_key) DO NOTHING"
        )
    }
}

/// Runs `pgbench` for the run's duration against `schema` with the run's pool size as clients.
/// `Err` says why it could not run (not installed, failed); the bench reports that and goes on.
pub fn run_pgbench(
    url: &str,
    schema: &str,
    config: &BenchConfig,
    layout: &Layout,
    dir: &Path,
) -> Result<(u32, u64, f64, u64, String), String> {
    let duration_s = config.duration.as_secs_f64().ceil().max(1.0) as u64;
    let clients = config.pool_size;
    let mut cmd = Command::new("pgbench");
    cmd.args(["-n", "-M", "prepared", "-c", &clients.to_string()])
        .args(["-j", &clients.min(2).to_string()])
        .args(["-T", &duration_s.to_string()]);
    let mut names = Vec::new();
    for (name, weight, text) in scripts(config, layout) {
        let path = dir.join(format!("{name}.sql"));
        std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
        cmd.arg("-f").arg(format!("{}@{weight}", path.display()));
        names.push(format!("{name}@{weight}"));
    }
    let sync = match config.synchronous {
        crate::store::Synchronous::Off => "off",
        _ => "on",
    };
    cmd.env(
        "PGOPTIONS",
        format!("-c search_path={schema} -c synchronous_commit={sync}"),
    )
    .arg(url);
    let out = cmd.output().map_err(|e| {
        if e.kind() == std::io::ErrorKind::NotFound {
            "pgbench is not installed (Debian: apt-get install postgresql-client)".to_string()
        } else {
            format!("cannot run pgbench: {e}")
        }
    })?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let tps = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("tps = "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<f64>().ok());
    let failed = stdout
        .lines()
        .find_map(|l| l.trim().strip_prefix("number of failed transactions: "))
        .and_then(|rest| rest.split_whitespace().next())
        .and_then(|n| n.parse::<u64>().ok())
        .unwrap_or(0);
    match tps {
        Some(tps) if out.status.success() => {
            Ok((clients, duration_s, tps, failed, names.join(",")))
        }
        _ => Err(format!(
            "pgbench failed ({}): {}",
            out.status,
            stderr.lines().last().unwrap_or("no output").trim()
        )),
    }
}
