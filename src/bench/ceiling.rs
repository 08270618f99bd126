//! The ceiling a store puts on any client, measured before the runs: how many flushes (SQLite),
//! commits (PostgreSQL) or round trips (Redis) it does per second, divided by how many of those
//! one create needs. An engine near it has nothing left to gain; one far below it does.
//!
//! SQLite: a loop of small writes, each followed by `fdatasync`, on a file in the store's
//! directory (as `pg_test_fsync` does). PostgreSQL: one-row autocommit inserts into a scratch
//! table of the bench's schema, on `--pool` connections at once, dropped afterwards. Redis:
//! `PING` on `--pool` connections at once.
//!
//! A fsync rate on a shared disk moves from one second to the next (3,542 then 569 flushes/s
//! in two runs of issue 53), so each is measured as [`CEILING_SLICES`] back-to-back slices and
//! reported with their spread; the engine's share of it gets an interval on the log scale, and
//! is called noise when the slices spread more than the runs may.

use super::runs::{MeanInterval, NOISY_RELATIVE_SD, Spread};
use crate::stats::LogSamples;
use crate::store::{PgPool, RedisStore, StoreError, Synchronous};
use serde::Serialize;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// How long each slice of a ceiling runs, at most; a short run's slices get its own duration.
pub const CEILING_SLICE: Duration = Duration::from_millis(400);
/// Slices per ceiling: enough for a spread (σ, min, max) and a t interval, 2 s at most in all.
pub const CEILING_SLICES: usize = 5;
/// The size of each flushed write: one page.
const WRITE_BYTES: usize = 8192;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ceiling {
    /// `flushes`, `commits` or `round trips`.
    pub unit: String,
    /// Connections the loop ran on at once.
    pub connections: u32,
    /// The mean of the slices' rates.
    pub per_s: f64,
    /// The slices' rates: how far the ceiling moved while it was measured.
    pub per_s_spread: Spread,
    /// Units one create needs: 2 (two transactions, or two scripts); with group commit the
    /// measured physical commits per create.
    pub per_create: f64,
    pub creates_per_s: f64,
    /// The engine's creates/s over this ceiling's: the ratio of the geometric means of the
    /// engine's runs and the ceiling's slices (the estimate of `engine_share_ci95`).
    pub engine_share: f64,
    /// That share with its Welch t 95 % interval on the logs; no interval with one run.
    pub engine_share_ci95: MeanInterval,
    /// The slices spread more than [`NOISY_RELATIVE_SD`] of their mean: the share says more
    /// about the disk's (server's) moment than about the engine.
    pub share_is_noise: bool,
    /// What qualifies the figure, e.g. that commits at synchronous=normal do not flush.
    pub note: Option<String>,
}

/// Loops `op` on `conns` threads for `length`; returns operations per second, or the first error.
fn rate<C: Send>(
    conns: &mut [C],
    length: Duration,
    op: impl Fn(&mut C) -> Result<(), String> + Sync,
) -> Result<f64, String> {
    let done = AtomicU64::new(0);
    let start = Instant::now();
    let errors: Vec<String> = thread::scope(|s| {
        let handles: Vec<_> = conns
            .iter_mut()
            .map(|c| {
                let (done, op) = (&done, &op);
                s.spawn(move || -> Result<(), String> {
                    while start.elapsed() < length {
                        op(c)?;
                        done.fetch_add(1, Ordering::Relaxed);
                    }
                    Ok(())
                })
            })
            .collect();
        handles
            .into_iter()
            .filter_map(|h| match h.join() {
                Ok(Ok(())) => None,
                Ok(Err(e)) => Some(e),
                Err(_) => Some("a ceiling thread panicked".into()),
            })
            .collect()
    });
    if let Some(e) = errors.into_iter().next() {
        return Err(e);
    }
    let s = start.elapsed().as_secs_f64();
    Ok(if s > 0.0 {
        done.load(Ordering::Relaxed) as f64 / s
    } else {
        0.0
    })
}

/// [`CEILING_SLICES`] back-to-back slices of [`rate`], each `length` long.
fn rates<C: Send>(
    conns: &mut [C],
    length: Duration,
    op: impl Fn(&mut C) -> Result<(), String> + Sync,
) -> Result<Vec<f64>, String> {
    (0..CEILING_SLICES)
        .map(|_| rate(conns, length, &op))
        .collect()
}

/// Flushes per second of small writes with `fdatasync` on a temporary file in `dir`, per slice.
pub fn sqlite_flushes(dir: &Path, length: Duration) -> Result<Vec<f64>, String> {
    let mut file = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| format!("{}: cannot create the flush test file: {e}", dir.display()))?;
    let page = vec![0x5au8; WRITE_BYTES];
    rates(&mut [file.as_file_mut()], length, |f| {
        f.seek(SeekFrom::Start(0))
            .and_then(|_| f.write_all(&page))
            .and_then(|_| f.sync_data())
            .map_err(|e| format!("flush test: {e}"))
    })
}

pub fn sqlite_note(synchronous: Synchronous) -> Option<String> {
    match synchronous {
        Synchronous::Full => None,
        Synchronous::Normal => Some(
            "synchronous=normal: WAL commits do not flush (only checkpoints do), so the engine can pass it; it binds with --sync full".into(),
        ),
        Synchronous::Off => Some("synchronous=off: nothing flushes, so the engine can pass it".into()),
    }
}

/// One-row autocommit inserts per second into a scratch table of `pool`'s schema, on `conns`
/// connections at once, per slice; the table is dropped afterwards.
pub fn postgres_commits(
    pool: &PgPool,
    conns: u32,
    synchronous: Synchronous,
    length: Duration,
) -> Result<Vec<f64>, StoreError> {
    let table = format!("\"{}\".bench_ceiling", pool.schema().replace('"', "\"\""));
    let sync = if synchronous == Synchronous::Off {
        "off"
    } else {
        "on"
    };
    let corrupt = |what: &str, e: postgres::Error| {
        StoreError::Corrupt(format!(
            "ceiling, {what}: {}",
            crate::store::postgres::pg_message(&e)
        ))
    };
    // Every connection of the pool loops; the first also creates and drops the table.
    let mut stores = Vec::new();
    for _ in 0..conns.max(1) {
        let mut s = pool.get()?;
        s.client()?
            .batch_execute(&format!("SET synchronous_commit = {sync}"))
            .map_err(|e| corrupt("set synchronous_commit", e))?;
        stores.push(s);
    }
    stores[0]
        .client()?
        .batch_execute(&format!("CREATE TABLE {table} (id int8)"))
        .map_err(|e| corrupt("create its table", e))?;
    let insert = format!("INSERT INTO {table} VALUES (1)");
    let measured = rates(&mut stores, length, |s| {
        s.client()
            .map_err(|e| e.to_string())?
            .batch_execute(&insert)
            .map_err(|e| crate::store::postgres::pg_message(&e))
    });
    let dropped = stores[0]
        .client()?
        .batch_execute(&format!("DROP TABLE {table}"))
        .map_err(|e| corrupt("drop its table", e));
    let per_s = measured.map_err(StoreError::Corrupt)?;
    dropped?;
    Ok(per_s)
}

pub fn postgres_note(synchronous: Synchronous, conns: u32) -> Option<String> {
    match synchronous {
        Synchronous::Off => Some(
            "synchronous_commit=off: commits do not wait for the flush, so this is the server's commit rate".into(),
        ),
        _ if conns > 1 => Some(format!(
            "{conns} connections at once, as the bench's pool: PostgreSQL flushes their commits together"
        )),
        _ => None,
    }
}

/// Round trips (`PING`) per second on each of `stores` at once, per slice.
pub fn redis_round_trips(
    mut stores: Vec<RedisStore>,
    length: Duration,
) -> Result<Vec<f64>, String> {
    rates(&mut stores, length, |s| {
        let (con, ..) = s.raw();
        redis::cmd("PING")
            .query::<String>(con)
            .map(|_| ())
            .map_err(|e| format!("ceiling, PING: {e}"))
    })
}

impl Ceiling {
    /// `slices`: the ceiling's rate per slice; `engine_runs`: the engine's creates/s per run.
    pub fn new(
        unit: &str,
        connections: u32,
        slices: &[f64],
        per_create: f64,
        engine_runs: &[f64],
        note: Option<String>,
    ) -> Self {
        let spread = Spread::of(slices);
        let per_create_ok = per_create > 0.0 && per_create.is_finite();
        let creates: Vec<f64> = slices
            .iter()
            .filter(|_| per_create_ok)
            .map(|x| x / per_create)
            .collect();
        let (engine, ceiling) = (LogSamples::of(engine_runs), LogSamples::of(&creates));
        // No positive sample on either side: no share to speak of, rather than exp(0) = 1.
        let share = if engine.n == 0 || ceiling.n == 0 {
            MeanInterval::default()
        } else {
            engine.ratio_interval(&ceiling)
        };
        Self {
            unit: unit.to_string(),
            connections,
            per_s: spread.mean,
            per_s_spread: spread,
            per_create,
            creates_per_s: if per_create_ok {
                spread.mean / per_create
            } else {
                0.0
            },
            engine_share: share.mean,
            engine_share_ci95: share,
            share_is_noise: spread.n > 1 && spread.relative_sd() > NOISY_RELATIVE_SD,
            note,
        }
    }
}
