//! The kill harness (issue 15, item 4): the real `idemcalc simulate` is killed with SIGKILL at a
//! moment drawn from each seed, on a SQLite file and on a PostgreSQL schema, and the store it
//! leaves is checked from outside with SQL of its own: the database's own integrity check, no
//! parcel with two labels, no completed 201 without its label, and no label without its completed
//! key (the seed's record placement: label and record in one transaction). SIGINT must stop the
//! run with exit 130, say how far it got, and leave the same consistent store.
//!
//! Sized for the suite: a few seconds per store, the two stores in parallel.

mod common;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng};
use std::io::Write as _;
use std::os::unix::process::ExitStatusExt as _;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

/// Seeds per store. Each run is killed within its window or finishes first; either way its store
/// is checked.
const SQLITE_SEEDS: u64 = 8;
const PG_SEEDS: u64 = 5;

/// A run is stopped after this long whatever happens, so a hung child cannot hang the suite.
const RUN_LIMIT: Duration = Duration::from_secs(60);

/// A small simulation that writes from its first second: 50 creates/s for an hour of simulated
/// arrivals, sampled. Retention (60 d) outlives the late-retry horizon (30 d), so the sweeper
/// never purges a key and every label's key must still be there.
fn simulate(seed: u64, sample: &str, store: &[&str]) -> Child {
    let seed = seed.to_string();
    Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args([
            "simulate",
            "--rate",
            "50",
            "--duration",
            "1h",
            "--retention",
            "60d",
            "--sample",
            sample,
            "--seed",
            &seed,
            "--quiet",
            "--format",
            "json",
        ])
        .args(store)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start idemcalc")
}

/// How a run ended.
#[derive(Debug, PartialEq, Eq)]
enum Ending {
    /// It had already finished when the signal was due.
    Finished,
    /// The signal reached a live process.
    Signalled,
}

/// Sends `signal` once `ready` says so (unless the run finished first) and waits for the end, at
/// most [`RUN_LIMIT`] in all.
fn signal_when(mut child: Child, signal: Signal, ready: impl Fn() -> bool) -> (Ending, Output) {
    let start = Instant::now();
    let mut ending = Ending::Finished;
    while !ready() && start.elapsed() < RUN_LIMIT {
        if child.try_wait().expect("poll the child").is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    if child.try_wait().expect("poll the child").is_none() {
        kill(Pid::from_raw(child.id() as i32), signal).expect("signal the child");
        ending = Ending::Signalled;
    }
    while child.try_wait().expect("poll the child").is_none() {
        if start.elapsed() > RUN_LIMIT {
            let _ = child.kill();
            panic!("idemcalc did not stop within {RUN_LIMIT:?} of its start after {signal}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let out = child.wait_with_output().expect("collect the output");
    // The child can finish between the last poll and the signal: the signal then lands on a
    // process that has already exited 0, and the run counts as finished.
    if ending == Ending::Signalled && out.status.signal().is_none() && out.status.success() {
        ending = Ending::Finished;
    }
    (ending, out)
}

/// What the checks found in one store.
#[derive(Debug, Default)]
struct Found {
    /// The store had its tables (a kill before they were made leaves nothing to check).
    has_tables: bool,
    labels: i64,
    completed: i64,
    integrity: String,
    /// Parcels (order, parcel, version) with more than one label.
    parcels_with_two_labels: i64,
    /// Completed 201 keys whose saved label is not in `labels`.
    completed_without_label: i64,
    /// Labels whose creating key is not completed.
    labels_without_completed_key: i64,
}

impl Found {
    fn assert_consistent(&self, what: &str) {
        assert_eq!(self.integrity, "ok", "{what}: integrity check");
        assert_eq!(
            self.parcels_with_two_labels, 0,
            "{what}: a parcel with two labels"
        );
        assert_eq!(
            self.completed_without_label, 0,
            "{what}: a completed key without its label"
        );
        assert_eq!(
            self.labels_without_completed_key, 0,
            "{what}: a label without its completed key"
        );
        assert!(self.completed >= self.labels, "{what}: {self:?}");
    }
}

/// The checks, in SQL written here rather than the store's own `invariants()`, so the harness
/// does not trust the code it checks.
/// SQLite stores the state as 0 (started) or 1 (completed); PostgreSQL by name.
const SQLITE_CHECKS: &str = "
SELECT
  (SELECT count(*) FROM labels),
  (SELECT count(*) FROM idempotency_keys WHERE state = 1),
  (SELECT count(*) FROM (SELECT 1 FROM labels GROUP BY order_id, parcel_no, label_version
                          HAVING count(*) > 1)),
  (SELECT count(*) FROM idempotency_keys k
    WHERE k.state = 1 AND k.response_status = 201
      AND NOT EXISTS (SELECT 1 FROM labels l
                       WHERE l.label_id = json_extract(k.response_body, '$.label_id'))),
  (SELECT count(*) FROM labels l
    WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys k
                       WHERE k.idem_key = l.created_by_key AND k.state = 1))";

fn check_sqlite(path: &Path) -> Found {
    // Opening replays the WAL the killed process left, as the next run's open would.
    let conn = rusqlite::Connection::open(path).expect("open the killed run's store");
    let integrity: String = conn
        .query_row("PRAGMA integrity_check", [], |r| r.get(0))
        .expect("integrity_check");
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table'
              AND name IN ('labels', 'idempotency_keys')",
            [],
            |r| r.get(0),
        )
        .expect("list tables");
    if tables < 2 {
        return Found {
            integrity,
            ..Found::default()
        };
    }
    conn.query_row(SQLITE_CHECKS, [], |r| {
        Ok(Found {
            has_tables: true,
            integrity,
            labels: r.get(0)?,
            completed: r.get(1)?,
            parcels_with_two_labels: r.get(2)?,
            completed_without_label: r.get(3)?,
            labels_without_completed_key: r.get(4)?,
        })
    })
    .expect("consistency queries")
}

const PG_CHECKS: &str = "
SELECT
  (SELECT count(*) FROM labels),
  (SELECT count(*) FROM idempotency_keys WHERE state = 'completed'),
  (SELECT count(*) FROM (SELECT 1 FROM labels GROUP BY order_id, parcel_no, label_version
                          HAVING count(*) > 1) AS twice),
  (SELECT count(*) FROM idempotency_keys k
    WHERE k.state = 'completed' AND k.response_status = 201
      AND NOT EXISTS (SELECT 1 FROM labels l
                       WHERE l.label_id = (k.response_body::jsonb ->> 'label_id'))),
  (SELECT count(*) FROM labels l
    WHERE NOT EXISTS (SELECT 1 FROM idempotency_keys k
                       WHERE k.idem_key = l.created_by_key AND k.state = 'completed'))";

/// Whether amcheck can be used; says once (on the real stderr) when it cannot.
fn amcheck_available(client: &mut postgres::Client) -> bool {
    // The test database is ours to set up (tests/common does the same).
    let _ = client.batch_execute("CREATE EXTENSION IF NOT EXISTS amcheck");
    let ok = client
        .query_opt("SELECT 1 FROM pg_extension WHERE extname = 'amcheck'", &[])
        .map(|r| r.is_some())
        .unwrap_or(false);
    if !ok {
        let _ = writeln!(
            std::io::stderr(),
            "note: amcheck is not available: the b-tree check of the killed runs' indexes was SKIPPED"
        );
    }
    ok
}

fn check_postgres(url: &str, schema: &str) -> Found {
    let mut client = postgres::Client::connect(url, postgres::NoTls).expect("connect");
    let tables: i64 = client
        .query_one(
            "SELECT count(*) FROM information_schema.tables
              WHERE table_schema = $1 AND table_name IN ('labels', 'idempotency_keys')",
            &[&schema],
        )
        .expect("list tables")
        .get(0);
    // amcheck's bt_index_check on every b-tree index of the schema: it raises on a corrupt one.
    let integrity = if amcheck_available(&mut client) {
        let checked = client.query(
            "SELECT bt_index_check(c.oid)
               FROM pg_index i
               JOIN pg_class c ON c.oid = i.indexrelid
               JOIN pg_namespace n ON n.oid = c.relnamespace
               JOIN pg_am am ON am.oid = c.relam
              WHERE n.nspname = $1 AND am.amname = 'btree'",
            &[&schema],
        );
        match checked {
            Ok(_) => "ok".to_string(),
            Err(e) => format!("bt_index_check: {e}"),
        }
    } else {
        "ok".to_string()
    };
    if tables < 2 {
        return Found {
            integrity,
            ..Found::default()
        };
    }
    client
        .batch_execute(&format!("SET search_path TO \"{schema}\""))
        .expect("search_path");
    let row = client
        .query_one(PG_CHECKS, &[])
        .expect("consistency queries");
    Found {
        has_tables: true,
        integrity,
        labels: row.get(0),
        completed: row.get(1),
        parcels_with_two_labels: row.get(2),
        completed_without_label: row.get(3),
        labels_without_completed_key: row.get(4),
    }
}

/// Labels committed so far by a running simulation (0 before its tables exist).
fn sqlite_labels(path: &Path) -> i64 {
    if !path.exists() {
        return 0;
    }
    rusqlite::Connection::open_with_flags(path, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .and_then(|c| c.query_row("SELECT count(*) FROM labels", [], |r| r.get(0)))
        .unwrap_or(0)
}

fn postgres_labels(url: &str, schema: &str) -> i64 {
    postgres::Client::connect(url, postgres::NoTls)
        .and_then(|mut c| c.query_one(&format!("SELECT count(*) FROM \"{schema}\".labels"), &[]))
        .map(|r| r.get(0))
        .unwrap_or(0)
}

fn drop_schema(url: &str, schema: &str) {
    if let Ok(mut c) = postgres::Client::connect(url, postgres::NoTls) {
        let _ = c.batch_execute(&format!("DROP SCHEMA IF EXISTS \"{schema}\" CASCADE"));
    }
}

/// The PostgreSQL URL, or `None` (said loudly) when it is not set outside CI; as tests/common.
fn pg_url() -> Option<String> {
    match std::env::var(common::PG_URL_VAR) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but {} is not", common::PG_URL_VAR)
        }
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "*** {} is not set: the PostgreSQL kill harness was SKIPPED",
                common::PG_URL_VAR
            );
            None
        }
    }
}

fn with_schema(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("--store={url}{sep}schema={schema}")
}

/// A schema name no other test (or earlier run) uses.
fn fresh_schema(tag: &str, seed: u64) -> String {
    format!(
        "kill_{tag}_{seed}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..10]
    )
}

/// Tallies the seeds so the harness cannot pass without having killed a run that was writing.
fn assert_some_killed_mid_run(store: &str, killed_with_rows: u32, seeds: u64) {
    assert!(
        killed_with_rows > 0,
        "{store}: none of {seeds} seeds was killed while it had written labels; \
         the kill window no longer fits the run"
    );
}

#[test]
fn sigkill_leaves_a_consistent_sqlite_store() {
    let mut killed_with_rows = 0;
    for seed in 1..=SQLITE_SEEDS {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("killed.sqlite");
        let mut rng = StdRng::seed_from_u64(seed);
        // Runs take 1-4 s here (~3,800 intents); kill anywhere from startup to past the middle.
        let after = Duration::from_millis(rng.random_range(20..1500));
        let child = simulate(seed, "0.02", &["--db", db.to_str().unwrap()]);
        // Odd seeds die at a random moment; even ones at a random moment after the first
        // label committed, so a loaded machine cannot make every kill land before any write.
        let start = Instant::now();
        let (ending, out) = signal_when(child, Signal::SIGKILL, || {
            start.elapsed() >= after && (seed % 2 == 1 || sqlite_labels(&db) > 0)
        });
        if ending == Ending::Signalled {
            assert_eq!(
                out.status.signal(),
                Some(9),
                "seed {seed}: {:?}",
                out.status
            );
        } else {
            assert!(out.status.success(), "seed {seed}: {out:?}");
        }
        if !db.exists() {
            continue; // killed before the store was created: nothing to be inconsistent
        }
        let found = check_sqlite(&db);
        found.assert_consistent(&format!("sqlite seed {seed}, {ending:?} at {after:?}"));
        if ending == Ending::Signalled && found.labels > 0 {
            killed_with_rows += 1;
        }
        eprintln!("sqlite seed {seed}: {ending:?} at {after:?}: {found:?}");
    }
    assert_some_killed_mid_run("sqlite", killed_with_rows, SQLITE_SEEDS);
}

#[test]
fn sigkill_leaves_a_consistent_postgres_schema() {
    let Some(url) = pg_url() else { return };
    let mut killed_with_rows = 0;
    for seed in 1..=PG_SEEDS {
        let schema = fresh_schema("sigkill", seed);
        let mut rng = StdRng::seed_from_u64(seed);
        // ~1,900 intents take a few seconds on PostgreSQL here (a round trip per statement).
        let after = Duration::from_millis(rng.random_range(50..1500));
        let child = simulate(seed, "0.01", &[&with_schema(&url, &schema)]);
        // As for SQLite: even seeds wait for a committed label before their random moment.
        let start = Instant::now();
        let (ending, out) = signal_when(child, Signal::SIGKILL, || {
            start.elapsed() >= after && (seed % 2 == 1 || postgres_labels(&url, &schema) > 0)
        });
        if ending == Ending::Signalled {
            assert_eq!(
                out.status.signal(),
                Some(9),
                "seed {seed}: {:?}",
                out.status
            );
        } else {
            assert!(out.status.success(), "seed {seed}: {out:?}");
        }
        let found = check_postgres(&url, &schema);
        drop_schema(&url, &schema);
        found.assert_consistent(&format!("postgres seed {seed}, {ending:?} at {after:?}"));
        if ending == Ending::Signalled && found.labels > 0 {
            killed_with_rows += 1;
        }
        eprintln!("postgres seed {seed}: {ending:?} at {after:?}: {found:?}");
    }
    assert_some_killed_mid_run("postgres", killed_with_rows, PG_SEEDS);
}

/// Ctrl-C stops the run at its next event: exit 130, a line saying how far it got, the figures
/// of that part marked interrupted, and a consistent store.
fn assert_interrupted(what: &str, out: &Output) {
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{what}: {stderr}");
    assert_eq!(out.status.code(), Some(130), "{what}: {stderr}");
    assert!(
        stderr.contains("interrupted: stopped after") && stderr.contains(" of "),
        "{what}: the run must say how far it got: {stderr}"
    );
    let report: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("the JSON of the part that ran");
    assert_eq!(report["interrupted"], true, "{what}");
}

#[test]
fn sigint_stops_a_sqlite_run_and_says_how_far_it_got() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("interrupted.sqlite");
    // A run of ~30 s (sampled at 20 %), interrupted once its first labels are committed: after
    // the Ctrl-C handler is installed, well before the end.
    let child = simulate(1, "0.2", &["--db", db.to_str().unwrap()]);
    let (ending, out) = signal_when(child, Signal::SIGINT, || sqlite_labels(&db) > 0);
    assert_eq!(ending, Ending::Signalled, "the run ended before Ctrl-C");
    assert_interrupted("sqlite", &out);
    let found = check_sqlite(&db);
    assert!(found.has_tables, "{found:?}");
    found.assert_consistent("sqlite after Ctrl-C");
    assert!(
        found.labels > 0,
        "nothing was written in the first second: {found:?}"
    );
}

#[test]
fn sigint_stops_a_postgres_run_and_says_how_far_it_got() {
    let Some(url) = pg_url() else { return };
    let schema = fresh_schema("sigint", 1);
    let child = simulate(1, "0.02", &[&with_schema(&url, &schema)]);
    let (ending, out) = signal_when(child, Signal::SIGINT, || postgres_labels(&url, &schema) > 0);
    let found = check_postgres(&url, &schema);
    drop_schema(&url, &schema);
    assert_eq!(ending, Ending::Signalled, "the run ended before Ctrl-C");
    assert_interrupted("postgres", &out);
    assert!(found.has_tables, "{found:?}");
    found.assert_consistent("postgres after Ctrl-C");
}
