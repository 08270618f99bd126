//! One run per store: a named SQLite file or PostgreSQL schema is held by one process at a time.
//!
//! Two runs writing into one store at once corrupt each other's figures (each counts the other's
//! rows) and, worse, fail half-way with a raw unique violation when both fill the same ids. So
//! the first process to open a store holds it until its last connection closes, and a second
//! process is refused at open with a message naming the holder:
//!
//! - SQLite: an exclusive `flock` on a lock file beside the database (`FILE.idemcalc-lock`),
//!   holding the holder's pid. Not on the database file itself: closing any other descriptor of
//!   that file would drop SQLite's own POSIX locks. The file is removed on release; a process
//!   that dies releases its lock with its descriptors, so a crash never leaves the store held.
//! - PostgreSQL: a session-level advisory lock, keyed by the schema, on a connection of its own
//!   whose `application_name` carries the holder's pid. The server releases it when that session
//!   ends, including when the process dies. A watcher asks that session for a `SELECT 1` every
//!   second: a session the server has ended (`pg_terminate_backend`, a restart) no longer holds
//!   anything, and the run stops at its next transaction. Its writing connections still keep
//!   every other run out until they close (see [`Fence`]).
//! - Redis: a key `PREFIX:hold` in the server itself, set only when absent, holding a token that
//!   names the holder, with a 15 s expiry that a watcher renews every 3 s while its token is
//!   still there. A lock file would hold the prefix only among runs that share a temporary
//!   directory; the key holds it among every process that reaches the server. A process that
//!   dies leaves the key to expire; a renewal that finds another token, or none, means the hold
//!   is lost, and the run stops at its next transaction.
//!
//! Within one process any number of connections and pools share the hold (a registry counts
//! them), since one run opens several connections to its own store.
//!
//! The one exception to "one process": replicas of `serve` (`--replica`) on one PostgreSQL
//! schema hold its run key *shared* ([`hold_pg_replica`]), so they serve it together while a run
//! that measures alone is refused, and the reverse.

use super::StoreError;
use std::collections::HashMap;
use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read as _, Seek as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// A store held by this process; released when the last clone is dropped.
pub struct Held {
    what: Holding,
    /// What a write proves inside its own transaction or script (see [`Fence`]); `None` for a
    /// SQLite lock file, whose write lock already serialises every writer on the machine.
    fence: Option<Fence>,
    /// The thread that keeps a server-side hold alive and notices its loss (PostgreSQL, Redis).
    watch: Option<Watch>,
}

enum Holding {
    File {
        path: PathBuf,
        _file: File,
    },
    /// The advisory lock's session lives in the watcher thread, which closes it on release.
    Session,
    /// A hold kept on the store's server (the Redis hold key), given back on release.
    Server {
        release: Mutex<Option<Release>>,
    },
}

/// What keeps a run's writes from landing beside another run's once its hold is lost while the
/// client was stopped (SIGSTOP, a long pause): the watcher only stops the next transaction the
/// client begins after it noticed, so the server itself must refuse the rest.
///
/// - PostgreSQL: the proof is the writing session itself. Every connection that writes holds a
///   *shared* session lock on the schema's writers key ([`schema_writers_key`]), taken when it
///   opens ([`Held::pg_join`]) and held until it closes; a run takes the schema only once no
///   session holds that key ([`hold_pg_schema`]). So while any connection of a run lives, no
///   other run can start writing in its schema, however long the run was stopped and whatever
///   became of its hold session; and a connection the server ended commits nothing. A
///   connection joins only while the hold session still holds the run's own fence key (random,
///   64 bits, which no other session ever takes), so a run that lost its hold cannot open a
///   new writer after another run took the schema. Nothing is checked per transaction: the
///   fence this replaced, a try-lock sent with every `COMMIT`, cost PostgreSQL about 13 % of
///   its creates flat out (docs/bench.md, "PostgreSQL, flat out: the fence is the gap").
/// - Redis: the hold key's token; every write script first compares `GET P:hold` with it and
///   refuses with an error otherwise, atomically with the write.
#[derive(Clone, Debug)]
pub enum Fence {
    Pg {
        /// The hold session's server process, for messages.
        pid: i32,
        /// The run's own key, held exclusively by the hold session for as long as it lives.
        fence_key: i64,
        /// The schema's writers key, held shared by every writing connection of the run.
        writers_key: i64,
        schema: String,
    },
    Redis {
        key: String,
        token: String,
    },
}

/// A watcher thread and what it found.
struct Watch {
    stop: Arc<AtomicBool>,
    /// Why the hold was lost; `None` while it holds.
    lost: Arc<Mutex<Option<String>>>,
    thread: Option<JoinHandle<()>>,
    location: String,
}

impl Watch {
    /// Runs `beat` every `every` until stopped or until it returns why the hold was lost.
    fn start(
        location: &str,
        every: Duration,
        mut beat: impl FnMut() -> Result<(), String> + Send + 'static,
    ) -> Watch {
        let stop = Arc::new(AtomicBool::new(false));
        let lost = Arc::new(Mutex::new(None));
        let (stop2, lost2) = (stop.clone(), lost.clone());
        let thread = std::thread::spawn(move || {
            loop {
                // Short naps, so a release does not wait out a whole period.
                let until = Instant::now() + every;
                while Instant::now() < until {
                    if stop2.load(Ordering::Acquire) {
                        return;
                    }
                    std::thread::sleep(Duration::from_millis(50));
                }
                if let Err(why) = beat() {
                    *lost2.lock().unwrap_or_else(|p| p.into_inner()) = Some(why);
                    return;
                }
            }
        });
        Watch {
            stop,
            lost,
            thread: Some(thread),
            location: location.to_string(),
        }
    }
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let what = match &self.what {
            Holding::File { path, .. } => format!("lock file {}", path.display()),
            Holding::Session => "PostgreSQL session".to_string(),
            Holding::Server { .. } => "a hold on the server".to_string(),
        };
        f.debug_struct("Held").field("what", &what).finish()
    }
}

impl Held {
    /// What each write proves inside its transaction or script; see [`Fence`].
    pub fn fence(&self) -> Option<&Fence> {
        self.fence.as_ref()
    }

    /// With a PostgreSQL hold: makes `client` one of the run's writers (see [`Fence`]). It takes
    /// the schema's writers key shared, for as long as the session lives, and checks in the
    /// same statement that the hold session still holds the run's fence key (a shared try-lock
    /// on it is refused only while that session lives). `Err` ([`StoreError::Lost`]) when the
    /// hold is gone or another run is taking the schema; the caller then closes the session,
    /// which releases whatever it took. Without a PostgreSQL hold, nothing to do.
    pub fn pg_join(&self, client: &mut postgres::Client) -> Result<(), StoreError> {
        let Some(Fence::Pg {
            fence_key,
            writers_key,
            ..
        }) = &self.fence
        else {
            return Ok(());
        };
        let row = client
            .query_one(
                "SELECT pg_catalog.pg_try_advisory_lock_shared($1),
                        pg_catalog.pg_try_advisory_xact_lock_shared($2)",
                &[writers_key, fence_key],
            )
            .map_err(|e| StoreError::Open {
                location: self.location(),
                message: format!(
                    "cannot join the schema's writers: {}",
                    super::pg_message(&e)
                ),
            })?;
        let joined: bool = row.get(0);
        let hold_gone: bool = row.get(1);
        if joined && !hold_gone {
            Ok(())
        } else {
            Err(self.refused())
        }
    }

    fn location(&self) -> String {
        self.watch
            .as_ref()
            .map(|w| w.location.clone())
            .unwrap_or_default()
    }

    /// The error of a write (or, on PostgreSQL, a new connection) its fence refused.
    pub fn refused(&self) -> StoreError {
        StoreError::Lost {
            location: self.location(),
            message: match &self.fence {
                Some(Fence::Pg { pid, schema, .. }) => format!(
                    "the session holding schema `{schema}` (server process {pid}) no longer holds its lock: a new connection found it so and wrote nothing; another run may take the schema once this run's connections close"
                ),
                Some(Fence::Redis { key, .. }) => format!(
                    "the hold key {key} expired or was taken by another process: a write script found it so and wrote nothing; another run may be writing under this prefix now"
                ),
                None => "the hold is lost".to_string(),
            },
        }
    }

    /// `Err` once the hold is lost: what holds a `Held` checks this before each transaction, so
    /// a run that no longer holds its store stops before its next write.
    pub fn check(&self) -> Result<(), StoreError> {
        let Some(w) = &self.watch else {
            return Ok(());
        };
        match &*w.lost.lock().unwrap_or_else(|p| p.into_inner()) {
            None => Ok(()),
            Some(why) => Err(StoreError::Lost {
                location: w.location.clone(),
                message: why.clone(),
            }),
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        if let Some(w) = &mut self.watch {
            w.stop.store(true, Ordering::Release);
            if let Some(t) = w.thread.take() {
                let _ = t.join();
            }
        }
        match &self.what {
            Holding::File { path, .. } => {
                // Removed while still locked: a process that opens the old file after this finds
                // it unlinked and tries again (see `lock_file`).
                let _ = std::fs::remove_file(path);
            }
            Holding::Server { release } => {
                if let Some(release) = release.lock().unwrap_or_else(|p| p.into_inner()).take() {
                    release();
                }
            }
            Holding::Session => {}
        }
    }
}

/// Stores this process holds, by a key naming the file or the schema.
static REGISTRY: Mutex<Option<HashMap<String, Weak<Held>>>> = Mutex::new(None);

/// The hold on `key`, shared if this process has one already, else made by `acquire`.
fn hold(
    key: String,
    acquire: impl FnOnce() -> Result<Held, StoreError>,
) -> Result<Arc<Held>, StoreError> {
    let mut registry = REGISTRY.lock().unwrap_or_else(|p| p.into_inner());
    let map = registry.get_or_insert_with(HashMap::new);
    if let Some(held) = map.get(&key).and_then(Weak::upgrade) {
        return Ok(held);
    }
    let held = Arc::new(acquire()?);
    map.retain(|_, w| w.strong_count() > 0);
    map.insert(key, Arc::downgrade(&held));
    Ok(held)
}

/// The lock file of the SQLite database at `db`.
pub fn lock_path(db: &Path) -> PathBuf {
    let mut name = db.file_name().unwrap_or_default().to_os_string();
    name.push(".idemcalc-lock");
    db.with_file_name(name)
}

/// Holds the SQLite database at `db` (which exists: SQLite has opened it) for this process, or
/// says which process holds it. In-memory databases need no hold.
pub fn hold_sqlite(db: &Path) -> Result<Option<Arc<Held>>, StoreError> {
    let text = db.as_os_str();
    if text.is_empty() || text == ":memory:" {
        return Ok(None);
    }
    let canonical = std::fs::canonicalize(db).map_err(|e| StoreError::Open {
        location: db.display().to_string(),
        message: format!("cannot resolve the path: {e}"),
    })?;
    let key = format!("sqlite:{}", canonical.display());
    hold(key, || lock_file(db, &lock_path(&canonical))).map(Some)
}

/// Tries a few times: each retry means the holder released and removed the file between our
/// open and our lock, which cannot keep happening.
const LOCK_FILE_TRIES: usize = 5;

fn lock_file(db: &Path, path: &Path) -> Result<Held, StoreError> {
    let fail = |message: String| StoreError::Open {
        location: db.display().to_string(),
        message,
    };
    for _ in 0..LOCK_FILE_TRIES {
        // Never through a link: a planted symlink would have us truncate its target and write
        // a pid into it.
        let mut file = OpenOptions::new()
            .read(true)
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(libc::O_NOFOLLOW)
            .open(path)
            .map_err(|e| {
                fail(format!(
                    "cannot create the lock file {}: {e}",
                    path.display()
                ))
            })?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                let mut holder = String::new();
                let _ = file.read_to_string(&mut holder);
                let holder = holder.trim();
                let who = if holder.is_empty() {
                    "another process".to_string()
                } else {
                    format!("process {holder}")
                };
                return Err(fail(format!(
                    "the store is in use by another idemcalc run ({who} holds {}); wait for it to finish, or name another file",
                    path.display()
                )));
            }
            Err(TryLockError::Error(e)) => {
                return Err(fail(format!("cannot lock {}: {e}", path.display())));
            }
        }
        if !same_file(&file, path) {
            continue;
        }
        let _ = file.set_len(0);
        let _ = file.rewind();
        let _ = write!(file, "{}", std::process::id());
        return Ok(Held {
            what: Holding::File {
                path: path.to_path_buf(),
                _file: file,
            },
            watch: None,
            fence: None,
        });
    }
    Err(fail(format!(
        "the lock file {} kept changing while we tried to lock it",
        path.display()
    )))
}

/// True when `path` still names the file we locked (not unlinked by a holder that was leaving).
fn same_file(file: &File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (file.metadata(), std::fs::metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// The advisory-lock key of a schema: FNV-1a of a prefix and the name, so the key of one schema
/// never depends on another's and never meets the migration lock's.
pub fn schema_lock_key(schema: &str) -> i64 {
    fnv_key("idemcalc-run:", schema)
}

/// The key every writing connection of the run holding `schema` holds shared (see [`Fence`]).
pub fn schema_writers_key(schema: &str) -> i64 {
    fnv_key("idemcalc-writers:", schema)
}

/// The key every writing connection of a *replica* of `schema` holds shared (see
/// [`hold_pg_replica`]): apart from [`schema_writers_key`], so a replica can tell a run's
/// leftover writers (which keep it out) from its fellow replicas' (which do not).
pub fn schema_replica_writers_key(schema: &str) -> i64 {
    fnv_key("idemcalc-replica-writers:", schema)
}

/// The key the one sweeping replica of `schema` holds (`serve --replica`, `serve::leader`).
pub fn schema_sweeper_key(schema: &str) -> i64 {
    fnv_key("idemcalc-sweeper:", schema)
}

fn fnv_key(prefix: &str, schema: &str) -> i64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in prefix.bytes().chain(schema.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h as i64
}

/// How long a new hold waits for the writers of the schema's last run to go: a closed
/// connection's server process ends (and releases its locks) a little after the client has
/// closed it, so a run that follows another at once would otherwise be refused.
const WRITERS_GONE_WITHIN: Duration = Duration::from_secs(3);

/// The first session holding advisory key `lock_key` (any mode), as `application_name, server
/// process N` for messages.
fn pg_lock_holder(client: &mut postgres::Client, lock_key: i64) -> String {
    let (high, low) = lock_key_halves(lock_key);
    let holder: Option<(String, i32)> = client
        .query_opt(
            "SELECT a.application_name, a.pid FROM pg_locks l
               JOIN pg_stat_activity a ON a.pid = l.pid
              WHERE l.locktype = 'advisory' AND l.granted AND l.objsubid = 1
                AND l.classid::int8 = $1 AND l.objid::int8 = $2
                AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
              LIMIT 1",
            &[&high, &low],
        )
        .ok()
        .flatten()
        .and_then(|r| Some((r.try_get(0).ok()?, r.try_get(1).ok()?)));
    match holder {
        Some((app, pid)) if !app.is_empty() => format!("{app}, server process {pid}"),
        Some((_, pid)) => format!("server process {pid}"),
        None => "another session".to_string(),
    }
}

/// Waits until no session holds `schema`'s writers key (see [`Fence`]), or says whose session
/// still does. Takes the key exclusively for an instant to know, then gives it back for this
/// run's own writers to take shared.
fn pg_writers_gone(
    client: &mut postgres::Client,
    schema: &str,
    key: i64,
    whose: &str,
) -> Result<(), String> {
    let started = Instant::now();
    loop {
        let got: bool = client
            .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
            .and_then(|r| r.try_get(0))
            .map_err(|e| super::pg_message(&e))?;
        if got {
            client
                .execute("SELECT pg_advisory_unlock($1)", &[&key])
                .map_err(|e| super::pg_message(&e))?;
            return Ok(());
        }
        if started.elapsed() >= WRITERS_GONE_WITHIN {
            let who = pg_lock_holder(client, key);
            return Err(format!(
                "schema `{schema}` is still written by {whose} connection ({who}) whose hold has ended; wait for it to stop"
            ));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Holds `schema` on the server of `config` for this process, or says who holds it.
pub fn hold_pg_schema(
    config: &postgres::Config,
    schema: &str,
    location: &str,
) -> Result<Arc<Held>, StoreError> {
    hold_pg(config, schema, location, None)
}

/// Holds `schema` *shared*, as replica `replica` of a service that runs as several processes on
/// one schema (`serve --replica`): any number of replicas hold the schema's run key shared at
/// once, and a run that must measure alone (`simulate`, `bench`), which takes it exclusively,
/// is refused while one does, and the reverse. Each replica's writers hold the replica writers'
/// key ([`schema_replica_writers_key`]) shared: a run waits until none does, as it waits for a
/// previous run's; a replica waits only for a previous run's writers, not its fellows'. The
/// fence is the replica's own (its hold session's random key), so a replica that lost its hold
/// opens no new writer, whatever the others do.
pub fn hold_pg_replica(
    config: &postgres::Config,
    schema: &str,
    location: &str,
    replica: &str,
) -> Result<Arc<Held>, StoreError> {
    hold_pg(config, schema, location, Some(replica))
}

fn hold_pg(
    config: &postgres::Config,
    schema: &str,
    location: &str,
    replica: Option<&str>,
) -> Result<Arc<Held>, StoreError> {
    let fail = |message: String| StoreError::Open {
        location: location.to_string(),
        message,
    };
    let hosts: Vec<String> = config
        .get_hosts()
        .iter()
        .map(|h| match h {
            postgres::config::Host::Tcp(t) => t.clone(),
            postgres::config::Host::Unix(p) => p.display().to_string(),
        })
        .collect();
    let key = format!(
        "pg:{}:{:?}/{}/{schema}",
        hosts.join(","),
        config.get_ports(),
        config.get_dbname().unwrap_or_default()
    );
    hold(key, || {
        let mut config = config.clone();
        config.application_name(&match replica {
            None => format!("idemcalc pid {}", std::process::id()),
            Some(name) => format!("idemcalc serve replica {name} pid {}", std::process::id()),
        });
        let mut client = super::pg_connect(&config).map_err(|e| {
            fail(format!(
                "cannot open the session that holds the schema: {}",
                e.message()
            ))
        })?;
        let lock_key = schema_lock_key(schema);
        let take = match replica {
            None => "SELECT pg_try_advisory_lock($1)",
            Some(_) => "SELECT pg_try_advisory_lock_shared($1)",
        };
        let got: bool = client
            .query_one(take, &[&lock_key])
            .and_then(|r| r.try_get(0))
            .map_err(|e| fail(super::pg_message(&e)))?;
        if !got {
            let who = pg_lock_holder(&mut client, lock_key);
            return Err(fail(match replica {
                None => format!(
                    "schema `{schema}` is in use by another idemcalc run ({who}); a run that measures (simulate, bench) holds its schema alone, so wait for it to finish (or stop the serve replicas), or name another schema with ?schema=NAME"
                ),
                Some(_) => format!(
                    "schema `{schema}` is held alone by another idemcalc run ({who}): simulate and bench measure alone, so replicas wait for it to finish; or name another schema with ?schema=NAME"
                ),
            }));
        }
        pg_writers_gone(
            &mut client,
            schema,
            schema_writers_key(schema),
            "another idemcalc run's",
        )
        .map_err(fail)?;
        if replica.is_none() {
            pg_writers_gone(
                &mut client,
                schema,
                schema_replica_writers_key(schema),
                "a serve replica's",
            )
            .map_err(fail)?;
        }
        // The run's own fence key (see `Fence`): random, so no other run's session holds it.
        // It is not part of any output, so it need not follow `--seed`.
        let fence_key = uuid::Uuid::new_v4().as_u64_pair().0 as i64;
        let pid: i32 = client
            .query_one(
                "SELECT pg_backend_pid() FROM (SELECT pg_advisory_lock($1)) AS fence",
                &[&fence_key],
            )
            .and_then(|r| r.try_get(0))
            .map_err(|e| fail(super::pg_message(&e)))?;
        // The session moves into the watcher, which closes it (releasing the lock) when stopped;
        // its guard keeps that close from waiting for ever on a stopped server.
        let schema_name = schema.to_string();
        let client = GuardedClient {
            guard: super::postgres::deadline::Guard::attach(&mut client),
            client,
        };
        let mut client = client;
        let watch = Watch::start(location, PG_WATCH_EVERY, move || {
            let client = &mut client.client;
            // A deadline of its own: a stopped server answers nothing, and a check that waits
            // for ever would never say so.
            client.is_valid(PG_WATCH_DEADLINE).map_err(|e| {
                if e.is_closed() || e.as_db_error().is_some() {
                    format!(
                        "the session holding schema `{schema_name}` ended ({}); another run may take the schema now",
                        super::pg_message(&e)
                    )
                } else {
                    format!(
                        "the session holding schema `{schema_name}` did not answer its check within {} s ({}): the server is stopped, overloaded or unreachable",
                        PG_WATCH_DEADLINE.as_secs(),
                        super::pg_message(&e)
                    )
                }
            })
        });
        Ok(Held {
            what: Holding::Session,
            watch: Some(watch),
            fence: Some(Fence::Pg {
                pid,
                fence_key,
                writers_key: match replica {
                    None => schema_writers_key(schema),
                    Some(_) => schema_replica_writers_key(schema),
                },
                schema: schema.to_string(),
            }),
        })
    })
}

/// A bigint advisory key as pg_locks shows it: its high and low 32 bits.
fn lock_key_halves(lock_key: i64) -> (i64, i64) {
    (
        ((lock_key as u64) >> 32) as i64,
        ((lock_key as u64) & 0xffff_ffff) as i64,
    )
}

/// The hold's session with the guard that cuts its socket if closing it gets no answer.
struct GuardedClient {
    client: postgres::Client,
    guard: std::sync::Arc<super::postgres::deadline::Guard>,
}

impl Drop for GuardedClient {
    fn drop(&mut self) {
        self.guard.arm_for_close();
    }
}

/// How often the PostgreSQL hold's session is asked whether it is still there.
const PG_WATCH_EVERY: Duration = Duration::from_secs(1);

/// How long that check may go unanswered: longer than an engine statement's deadline (so a
/// stopped server is reported by the statement it stopped), short enough to end a run soon.
const PG_WATCH_DEADLINE: Duration = Duration::from_secs(10);

/// Why a server-side hold ended, from its watcher's periodic check; `Ok` while it holds.
pub type Beat = Box<dyn FnMut() -> Result<(), String> + Send>;

/// Gives a server-side hold back (deletes a key that still holds our token).
pub type Release = Box<dyn FnOnce() + Send + Sync>;

/// Holds the store named by `key` for this process through a hold kept on its server: `acquire`
/// takes it (or says who has it) and returns the check a watcher runs every `every`, how to
/// give it back when the last clone is dropped, and the fence each write proves.
pub fn hold_on_server(
    key: String,
    location: &str,
    every: Duration,
    acquire: impl FnOnce() -> Result<(Beat, Release, Fence), StoreError>,
) -> Result<Arc<Held>, StoreError> {
    hold(key, || {
        let (beat, release, fence) = acquire()?;
        Ok(Held {
            what: Holding::Server {
                release: Mutex::new(Some(release)),
            },
            watch: Some(Watch::start(location, every, beat)),
            fence: Some(fence),
        })
    })
}
