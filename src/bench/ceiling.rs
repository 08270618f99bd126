//! The ceiling a store puts on any client, measured before the runs: how many flushes (SQLite),
//! commits (PostgreSQL) or round trips (Redis) it does per second, divided by how many of those
//! one create needs. An engine near it has nothing left to gain; one far below it does.
//!
//! SQLite: a loop of small writes, each followed by `fdatasync`, on a file in the store's
//! directory (as `pg_test_fsync` does). PostgreSQL: one-row autocommit inserts into a scratch
//! table of the bench's schema, on `--pool` connections at once, dropped afterwards. Redis:
//! `PING` on `--pool` connections at once.

use crate::store::{PgPool, RedisStore, StoreError, Synchronous};
use serde::Serialize;
use std::io::{Seek, SeekFrom, Write};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::thread;
use std::time::{Duration, Instant};

/// How long each ceiling loop runs, at most; a short run gets its own duration.
pub const CEILING_TIME: Duration = Duration::from_secs(1);
/// The size of each flushed write: one page.
const WRITE_BYTES: usize = 8192;

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Ceiling {
    /// `flushes`, `commits` or `round trips`.
    pub unit: String,
    /// Connections the loop ran on at once.
    pub connections: u32,
    pub per_s: f64,
    /// Units one create needs: 2 (two transactions, or two scripts); with group commit the
    /// measured physical commits per create.
    pub per_create: f64,
    pub creates_per_s: f64,
    /// The engine's mean creates/s over this ceiling.
    pub engine_share: f64,
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

/// Flushes per second of small writes with `fdatasync` on a temporary file in `dir`.
pub fn sqlite_flushes(dir: &Path, length: Duration) -> Result<f64, String> {
    let mut file = tempfile::NamedTempFile::new_in(dir)
        .map_err(|e| format!("{}: cannot create the flush test file: {e}", dir.display()))?;
    let page = vec![0x5au8; WRITE_BYTES];
    rate(&mut [file.as_file_mut()], length, |f| {
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
/// connections at once; the table is dropped afterwards.
pub fn postgres_commits(
    pool: &PgPool,
    conns: u32,
    synchronous: Synchronous,
    length: Duration,
) -> Result<f64, StoreError> {
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
    let measured = rate(&mut stores, length, |s| {
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

/// Round trips (`PING`) per second on each of `stores` at once.
pub fn redis_round_trips(mut stores: Vec<RedisStore>, length: Duration) -> Result<f64, String> {
    rate(&mut stores, length, |s| {
        let (con, ..) = s.raw();
        redis::cmd("PING")
            .query::<String>(con)
            .map(|_| ())
            .map_err(|e| format!("ceiling, PING: {e}"))
    })
}

impl Ceiling {
    pub fn new(
        unit: &str,
        connections: u32,
        per_s: f64,
        per_create: f64,
        engine_creates_per_s: f64,
        note: Option<String>,
    ) -> Self {
        let creates_per_s = if per_create > 0.0 {
            per_s / per_create
        } else {
            0.0
        };
        Self {
            unit: unit.to_string(),
            connections,
            per_s,
            per_create,
            creates_per_s,
            engine_share: if creates_per_s > 0.0 {
                engine_creates_per_s / creates_per_s
            } else {
                0.0
            },
            note,
        }
    }
}
