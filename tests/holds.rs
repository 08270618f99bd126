//! Issue 24: a store is held by one run, the hold lives in the store's server, and a run that
//! loses its hold or its server mid-run stops with its own exit code (3), saying how far it got.
//! Also: a store holding labels but no keys is not taken for empty.

mod common;

use common::wait_within;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const EXIT_STORE_FAILED: i32 = 3;

fn env_url(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ => {
            assert!(
                std::env::var_os("CI").is_none(),
                "CI is set but {var} is not: these tests must run in CI"
            );
            eprintln!("*** {var} is not set: SKIPPED");
            None
        }
    }
}

fn unique(what: &str) -> String {
    format!(
        "{what}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

/// A simulation that runs for minutes unless stopped: every intent replayed at 400/s for 12 h.
fn long_run(store: &str, tmpdir: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(["simulate", "--store", store, "--retention", "1h"])
        .args(["--duration", "12h", "--sample", "1", "--quiet"])
        .env("TMPDIR", tmpdir)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run idemcalc")
}

fn redis_con(url: &str) -> redis::Connection {
    redis::Client::open(url).unwrap().get_connection().unwrap()
}

/// Waits until `key` exists on the server: the run has taken its hold.
fn wait_for_key(con: &mut redis::Connection, key: &str, child: &mut Child) {
    let started = Instant::now();
    while !redis::cmd("EXISTS").arg(key).query::<bool>(con).unwrap() {
        assert!(
            child.try_wait().unwrap().is_none(),
            "the first run ended before taking its hold"
        );
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no hold key {key} after 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn drop_prefix(con: &mut redis::Connection, prefix: &str) {
    let names: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:*"))
        .query(con)
        .unwrap_or_default();
    if !names.is_empty() {
        let _: Result<u64, _> = redis::cmd("DEL").arg(names).query(con);
    }
}

/// Two runs on one Redis prefix, each with a temporary directory of its own (as on two
/// machines): the second is refused, naming the first, by the hold key in Redis itself.
#[test]
fn a_redis_prefix_is_held_in_redis_not_in_a_temporary_directory() {
    let Some(url) = env_url("IDEMCALC_REDIS_URL") else {
        return;
    };
    let prefix = unique("hold");
    let store = format!("{url}?prefix={prefix}");
    let (tmp_a, tmp_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let mut con = redis_con(&url);
    let mut first = long_run(&store, tmp_a.path());
    wait_for_key(&mut con, &format!("{prefix}:hold"), &mut first);
    let second = long_run(&store, tmp_b.path());
    let (code, err) = wait_within(second, Duration::from_secs(30));
    let _ = first.kill();
    let _ = first.wait();
    drop_prefix(&mut con, &prefix);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("in use by another idemcalc run"), "{err}");
    assert!(
        err.contains(&format!("pid {}", first.id())),
        "names the holder: {err}"
    );
}

/// A run whose Redis hold key is taken from under it stops within a renewal period, exit 3,
/// saying how far it got, instead of writing beside the new holder.
#[test]
fn a_run_that_loses_its_redis_hold_stops_with_exit_code_3() {
    let Some(url) = env_url("IDEMCALC_REDIS_URL") else {
        return;
    };
    let prefix = unique("lost");
    let tmp = tempfile::tempdir().unwrap();
    let mut con = redis_con(&url);
    let mut run = long_run(&format!("{url}?prefix={prefix}"), tmp.path());
    let key = format!("{prefix}:hold");
    wait_for_key(&mut con, &key, &mut run);
    let _: () = redis::cmd("SET")
        .arg(&key)
        .arg("someone else")
        .query(&mut con)
        .unwrap();
    let (code, err) = wait_within(run, Duration::from_secs(60));
    drop_prefix(&mut con, &prefix);
    assert_eq!(code, Some(EXIT_STORE_FAILED), "{err}");
    assert!(err.contains(&key), "names the hold key: {err}");
    assert!(err.contains("the store failed after"), "{err}");
    assert!(err.contains("simulated"), "{err}");
}

/// The session that holds a PostgreSQL schema ended by the server (`pg_terminate_backend`):
/// the run stops, exit 3, instead of finishing with exit 0 holding nothing.
#[test]
fn a_run_whose_postgres_hold_session_ends_stops_with_exit_code_3() {
    let Some(url) = env_url("IDEMCALC_PG_URL") else {
        return;
    };
    let schema = unique("t_lost");
    let tmp = tempfile::tempdir().unwrap();
    let run = long_run(&format!("{url}?schema={schema}"), tmp.path());
    let pid = run.id();
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let started = Instant::now();
    let mut terminated = false;
    while started.elapsed() < Duration::from_secs(60) {
        let rows = admin
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                &[&format!("idemcalc pid {pid}")],
            )
            .unwrap();
        if !rows.is_empty() {
            terminated = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let (code, err) = wait_within(run, Duration::from_secs(60));
    let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    assert!(terminated, "the hold's session never appeared: {err}");
    assert_eq!(code, Some(EXIT_STORE_FAILED), "{err}");
    assert!(err.contains("the session holding schema"), "{err}");
    assert!(err.contains("the store failed after"), "{err}");
}

/// A SQLite store holding labels but no keys is not empty: the run refuses it up front, naming
/// what it holds, instead of failing half-way on a unique violation.
#[test]
fn a_store_holding_labels_but_no_keys_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("labels-only.sqlite");
    let args = [
        "simulate",
        "--db",
        db.to_str().unwrap(),
        "--retention",
        "1h",
        "--duration",
        "2h",
        "--quiet",
    ];
    let o = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(args)
        .output()
        .unwrap();
    assert!(o.status.success() || o.status.code() == Some(1));
    let c = rusqlite::Connection::open(&db).unwrap();
    let labels: i64 = c
        .query_row("SELECT count(*) FROM labels", [], |r| r.get(0))
        .unwrap();
    assert!(labels > 0);
    c.execute("DELETE FROM idempotency_keys", []).unwrap();
    drop(c);
    let o = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(args)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains(&format!("{labels} labels")), "{err}");
    assert!(err.contains("needs an empty store"), "{err}");
}

/// A symbolic link planted at a SQLite store's lock file is refused, and its target is left
/// byte for byte as it was (the lock file is opened with O_NOFOLLOW).
#[test]
fn a_symlink_at_the_lock_file_is_refused_and_its_target_untouched() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.sqlite");
    let target = dir.path().join("precious.txt");
    std::fs::write(&target, b"do not touch\n").unwrap();
    std::os::unix::fs::symlink(&target, dir.path().join("store.sqlite.idemcalc-lock")).unwrap();
    let o = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(["simulate", "--db", db.to_str().unwrap()])
        .args(["--retention", "1h", "--duration", "2h", "--quiet"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("idemcalc-lock"), "{err}");
    assert_eq!(std::fs::read(&target).unwrap(), b"do not touch\n");
}
