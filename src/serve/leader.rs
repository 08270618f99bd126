//! One sweeper among replicas (`serve --replica`): the replica whose session holds the schema's
//! sweeper key (a PostgreSQL session advisory lock, `exclusive::schema_sweeper_key`) sweeps;
//! the others try for the key every [`RETRY`].
//!
//! Why a lock and not every replica sweeping: the seed's batched `DELETE … SKIP LOCKED` is safe
//! to run twice at once, but N replicas sweeping the same expired rows each period is N times
//! the scans for one set of deletions, and their batches queue behind each other's row locks.
//! Sweeping twice for a moment is harmless, so the election needs no fencing: a leader that
//! lost its session stops at its next check, at most [`RETRY`] plus [`CHECK_DEADLINE`] later.
//!
//! Handover: the server ends a session whose client died (a killed process's socket is closed
//! by its kernel, so the server sees it at once; a vanished host is found by the keepalives of
//! `store::pg_connect`, within about 25 s), and with the session goes its advisory lock. Another
//! replica takes the key at its next try: within [`RETRY`] of the leader's death.

use crate::store::PgPool;
use crate::store::exclusive::schema_sweeper_key;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often a replica that does not sweep tries for the sweeper key, and how often the sweeping
/// one checks that its session still lives.
pub const RETRY: Duration = Duration::from_secs(2);

/// How long the leader's check of its session may go unanswered before it stops sweeping.
const CHECK_DEADLINE: Duration = Duration::from_secs(5);

/// The election thread of one replica; dropping it ends the session, handing the key over.
pub struct Leader {
    leading: Arc<AtomicBool>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl Leader {
    /// Starts trying for `pool`'s sweeper key at once, as replica `replica`; `changed` is told
    /// each time this replica starts (`true`) or stops (`false`) sweeping.
    pub fn start(
        pool: PgPool,
        replica: &str,
        changed: impl Fn(bool) + Send + 'static,
    ) -> std::io::Result<Leader> {
        let leading = Arc::new(AtomicBool::new(false));
        let stop = Arc::new(AtomicBool::new(false));
        let (leading2, stop2) = (leading.clone(), stop.clone());
        let name = format!("idemcalc serve replica {replica} sweeper");
        let thread = std::thread::Builder::new()
            .name("serve-leader".into())
            .spawn(move || {
                let key = schema_sweeper_key(pool.schema());
                let mut session: Option<postgres::Client> = None;
                let set = |now: bool| {
                    if leading2.swap(now, Ordering::AcqRel) != now {
                        changed(now);
                    }
                };
                while !stop2.load(Ordering::Acquire) {
                    if session.is_none() {
                        session = connect(&pool, &name);
                    }
                    let alive = match &mut session {
                        None => false,
                        Some(c) if leading2.load(Ordering::Acquire) => {
                            c.is_valid(CHECK_DEADLINE).is_ok()
                        }
                        Some(c) => match c
                            .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
                            .and_then(|r| r.try_get::<_, bool>(0))
                        {
                            Ok(got) => {
                                set(got);
                                true
                            }
                            Err(_) => false,
                        },
                    };
                    if !alive {
                        // A dead session holds nothing: tried again on a new one next round.
                        session = None;
                        set(false);
                    }
                    nap(&stop2, RETRY);
                }
                set(false);
                // Dropping the session ends it, and with it the key.
                drop(session);
            })?;
        Ok(Leader {
            leading,
            stop,
            thread: Some(thread),
        })
    }

    /// True while this replica sweeps.
    pub fn leading(&self) -> bool {
        self.leading.load(Ordering::Acquire)
    }
}

/// A session of its own for the election, named so `pg_stat_activity` shows whose it is, whose
/// statements end within [`CHECK_DEADLINE`] on the server's side (a stopped server is found by
/// the connection's keepalives, `store::pg_connect`).
fn connect(pool: &PgPool, name: &str) -> Option<postgres::Client> {
    let mut c = pool.session().ok()?;
    let deadline = format!("{}ms", CHECK_DEADLINE.as_millis());
    c.execute(
        "SELECT set_config('application_name', $1, false), set_config('statement_timeout', $2, false)",
        &[&name, &deadline],
    )
    .ok()?;
    Some(c)
}

/// Sleeps `period` in short naps, returning early once `stop` is raised.
fn nap(stop: &AtomicBool, period: Duration) {
    let until = Instant::now() + period;
    while Instant::now() < until && !stop.load(Ordering::Acquire) {
        std::thread::sleep(Duration::from_millis(50));
    }
}

impl Drop for Leader {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}
