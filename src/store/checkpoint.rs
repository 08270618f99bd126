//! WAL checkpoints on a thread of their own.
//!
//! In WAL mode a commit appends to the WAL; a checkpoint copies the WAL back into the database
//! file and, unless `synchronous = OFF`, fsyncs both files. By default SQLite runs it inside the
//! commit that takes the WAL past 1,000 pages, so that commit, and every request queued behind
//! it, waits for two fsyncs (4 to 8 ms each on this machine's disk): at 2,000 creates/s of about
//! 8 pages each, that is 16 stalls a second. A server keeps checkpoints off the commit path by
//! setting `wal_autocheckpoint = 0` on its writer and checkpointing from another connection with
//! `PASSIVE`, which never blocks the writer (the writer still syncs the WAL header when it
//! restarts the WAL after a complete checkpoint; that fsync has little to write and took under a
//! millisecond when traced).
//!
//! `PASSIVE` alone does not bound the WAL. SQLite starts the log again from its beginning only
//! when a writer begins while every frame is already back in the database file, and under a
//! continuous writer some frames always arrived during the last checkpoint: the file grew about
//! 70 KB a create (4.2 GB in 40 s at 1,500/s). A `TRUNCATE` from this thread does not help: it
//! needs the write lock, which a busy writer takes back between its polls. So the writer keeps a
//! backstop (`SqliteOptions::bounded_wal`): `wal_autocheckpoint` at [`WAL_LIMIT_BYTES`], so the
//! commit that takes the log past it checkpoints inline. Being the only writer, it copies every
//! frame (few: this thread's last `PASSIVE` copied the rest), its next transaction starts the
//! log again, and `journal_size_limit` cuts the file back to the limit. The bound: about
//! [`WAL_LIMIT_BYTES`] plus one transaction (docs/stores.md).

use super::{SqliteOptions, SqliteStore, StoreError, Synchronous};
use serde::Serialize;
use std::path::Path;
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

/// Time between background checkpoints. Each checkpoint writes back and fsyncs what the WAL
/// gained since the last, and while it does, the writer's own WAL writes stall at times (10 to
/// 30 ms on this machine's disk). Small, frequent checkpoints keep those bursts short: at
/// 2,000 creates/s, p99 was 5 to 20 ms with one every 100 ms, 50 to 180 ms with one a second.
pub const CHECKPOINT_INTERVAL: Duration = Duration::from_millis(100);

/// The WAL past which the writer checkpoints in its own commit, and the size the file is cut
/// back to when the log starts again. 16 MiB: at 1,500 creates/s (about 100 MB/s of log) one
/// such commit every 0.15 s, copying only what the background `PASSIVE` before it left.
pub const WAL_LIMIT_BYTES: u64 = 16 << 20;

/// Who runs checkpoints.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Checkpoints {
    /// A thread with its own connection, every [`CHECKPOINT_INTERVAL`] (the bench's default,
    /// and how `idemcalc serve` runs an SQLite store).
    #[default]
    Background,
    /// SQLite's default: the commit that fills the WAL to 1,000 pages.
    Inline,
    /// None while measuring (the WAL grows; the last connection to close checkpoints it). Not a
    /// way to run a server: a diagnostic that separates what the engine costs from what
    /// checkpoint fsyncs do to the tail on this disk.
    Deferred,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize)]
pub struct CheckpointStats {
    pub checkpoints: u64,
    /// The longest the WAL was at a checkpoint, in frames (a page each): how far behind the
    /// database file the log got.
    pub wal_frames_max: u64,
    /// The largest the WAL file was on disk, in bytes, read at each checkpoint: the space the
    /// log adds to the store.
    pub wal_bytes_max: u64,
    /// The slowest checkpoint: the copy and both fsyncs, none of which the writer waits for.
    pub longest_ms: f64,
    pub errors: u64,
}

pub struct Checkpointer {
    stop: Sender<()>,
    thread: JoinHandle<CheckpointStats>,
}

impl Checkpointer {
    /// Opens a connection of its own to `path` and checkpoints every `interval` until stopped.
    /// Its `synchronous` setting decides whether the checkpoint fsyncs, so it gets the writer's.
    pub fn start(
        path: &Path,
        synchronous: Synchronous,
        interval: Duration,
    ) -> Result<Self, StoreError> {
        let store = SqliteStore::open(
            path,
            &SqliteOptions {
                synchronous,
                ..SqliteOptions::default()
            },
        )?;
        let wal = wal_path(path);
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = thread::Builder::new()
            .name("sqlite-checkpointer".into())
            .spawn(move || {
                let mut stats = CheckpointStats::default();
                while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(interval) {
                    checkpoint_once(&store, &wal, &mut stats);
                }
                stats
            })
            .map_err(|e| StoreError::Open {
                location: path.display().to_string(),
                message: format!("cannot start the checkpoint thread: {e}"),
            })?;
        Ok(Self { stop, thread })
    }

    pub fn stop(self) -> CheckpointStats {
        let _ = self.stop.send(());
        self.thread.join().unwrap_or_default()
    }
}

/// The WAL file beside a database: SQLite's own name for it.
pub fn wal_path(db: &Path) -> std::path::PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    name.into()
}

/// One round: a `PASSIVE` checkpoint, and the WAL's size read after it.
fn checkpoint_once(store: &SqliteStore, wal: &Path, stats: &mut CheckpointStats) {
    let t0 = Instant::now();
    // Returns (busy, frames in the WAL, frames checkpointed so far).
    let done = store
        .connection()
        .query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| r.get::<_, i64>(1));
    match done {
        Ok(frames) => {
            stats.checkpoints += 1;
            stats.wal_frames_max = stats.wal_frames_max.max(frames.max(0) as u64);
            let ms = t0.elapsed().as_secs_f64() * 1e3;
            stats.longest_ms = stats.longest_ms.max(ms);
        }
        Err(_) => stats.errors += 1,
    }
    let bytes = std::fs::metadata(wal).map_or(0, |m| m.len());
    stats.wal_bytes_max = stats.wal_bytes_max.max(bytes);
}
