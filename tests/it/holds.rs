//! Issue 24: a store is held by one run, the hold lives in the store's server, and a run that
//! loses its hold or its server mid-run stops with its own exit code (3), saying how far it got.
//! Also: a store holding labels but no keys is not taken for empty.

use crate::common;

use common::{long_run, wait_within};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

const EXIT_STORE_FAILED: i32 = 3;

fn unique(what: &str) -> String {
    format!(
        "{what}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
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
    let Some(url) = common::server_url("IDEMCALC_REDIS_URL") else {
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

/// How many times each lost-hold test stops a run, takes its hold and lets it go on.
const TRIALS: usize = 20;

/// Stops `child` (SIGSTOP) after 0 to 63 ms more of its writing, so that over the trials it is
/// caught at every point of its transactions, then waits for what it had sent to be done.
fn pause(child: &Child) {
    let jitter = u64::from(uuid::Uuid::new_v4().as_bytes()[0] % 64);
    std::thread::sleep(Duration::from_millis(jitter));
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGSTOP) }, 0);
    std::thread::sleep(Duration::from_millis(300));
}

fn resume(child: &Child) {
    assert_eq!(unsafe { libc::kill(child.id() as i32, libc::SIGCONT) }, 0);
}

/// Everything stored under `prefix` but the hold key: every record with its fields, and the
/// expiry index with its scores.
fn redis_contents(con: &mut redis::Connection, prefix: &str) -> Vec<String> {
    let mut names: Vec<String> = redis::cmd("KEYS")
        .arg(format!("{prefix}:k:*"))
        .query(con)
        .unwrap();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let mut fields: Vec<(String, Vec<u8>)> =
            redis::cmd("HGETALL").arg(&name).query(con).unwrap();
        fields.sort();
        out.push(format!("{name} {fields:?}"));
    }
    let index: Vec<(String, f64)> = redis::cmd("ZRANGE")
        .arg(format!("{prefix}:exp"))
        .arg(0)
        .arg(-1)
        .arg("WITHSCORES")
        .query(con)
        .unwrap();
    out.push(format!("{index:?}"));
    out
}

/// A run whose Redis hold key is taken from under it while the run is stopped (SIGSTOP)
/// writes nothing more once resumed: every write script checks the token first. It stops with
/// exit 3, saying how far it got. 20 trials, each stopped at a random point of its writes.
#[test]
fn a_run_that_loses_its_redis_hold_writes_nothing_more_and_stops_with_exit_code_3() {
    let Some(url) = common::server_url("IDEMCALC_REDIS_URL") else {
        return;
    };
    let mut con = redis_con(&url);
    for trial in 0..TRIALS {
        let prefix = unique("lost");
        let tmp = tempfile::tempdir().unwrap();
        let mut run = long_run(&format!("{url}?prefix={prefix}"), tmp.path());
        let key = format!("{prefix}:hold");
        wait_for_key(&mut con, &key, &mut run);
        wait_for_key(&mut con, &format!("{prefix}:exp"), &mut run);
        pause(&run);
        let _: () = redis::cmd("SET")
            .arg(&key)
            .arg("someone else")
            .query(&mut con)
            .unwrap();
        let before = redis_contents(&mut con, &prefix);
        resume(&run);
        let (code, err) = wait_within(run, Duration::from_secs(60));
        let after = redis_contents(&mut con, &prefix);
        drop_prefix(&mut con, &prefix);
        assert_eq!(code, Some(EXIT_STORE_FAILED), "trial {trial}: {err}");
        // A socket read with a timeout that SIGSTOP interrupted fails with EINTR on SIGCONT
        // (Linux does not restart it); the run then stops on that, before any write.
        let interrupted = err.contains("Interrupted system call");
        assert!(
            err.contains(&key) || interrupted,
            "trial {trial}: names the hold key: {err}"
        );
        eprintln!(
            "trial {trial}: {} records and index entries before the loss, {} after; {}",
            before.len() - 1,
            after.len() - 1,
            if interrupted {
                "stopped by EINTR"
            } else {
                "stopped by the fence or the watcher"
            }
        );
        assert!(
            err.contains("the store failed after"),
            "trial {trial}: {err}"
        );
        assert!(err.contains("simulated"), "trial {trial}: {err}");
        assert_eq!(
            before.len(),
            after.len(),
            "trial {trial}: records written after the hold was lost"
        );
        assert!(
            before == after,
            "trial {trial}: records changed after the hold was lost"
        );
    }
}

/// Every key record and label of `schema`, as one text per table (a count and a digest).
fn pg_contents(admin: &mut postgres::Client, schema: &str) -> (String, String) {
    let row = admin
        .query_one(
            &format!(
                "SELECT (SELECT count(*) || ' ' || coalesce(md5(string_agg(k::text, ',' ORDER BY caller_id, idem_key)), '')
                           FROM {schema}.idempotency_keys k),
                        (SELECT count(*) || ' ' || coalesce(md5(string_agg(l::text, ',' ORDER BY label_id)), '')
                           FROM {schema}.labels l)"
            ),
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

/// Whether a session could take advisory key `key` exclusively now (and gives it back).
fn pg_key_free(admin: &mut postgres::Client, key: i64) -> bool {
    let got: bool = admin
        .query_one("SELECT pg_try_advisory_lock($1)", &[&key])
        .unwrap()
        .get(0);
    if got {
        admin
            .execute("SELECT pg_advisory_unlock($1)", &[&key])
            .unwrap();
    }
    got
}

/// The session that holds a PostgreSQL schema ended by the server (`pg_terminate_backend`)
/// while the run is stopped (SIGSTOP). Every connection the run writes on holds the schema's
/// writers key, so while any of them lives no other run can take the schema: a second run is
/// refused, naming a connection of the first, however long the first stays stopped. Once
/// resumed, the first run stops with exit 3 instead of finishing holding nothing, and its
/// connections close, after which the schema can be taken. Trials stop the run at random
/// points of its writes.
#[test]
fn a_run_whose_postgres_hold_session_ends_keeps_others_out_and_stops_with_exit_code_3() {
    let Some(url) = common::server_url("IDEMCALC_PG_URL") else {
        return;
    };
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    for trial in 0..PG_TRIALS {
        let schema = unique("t_lost");
        let tmp = tempfile::tempdir().unwrap();
        let mut run = long_run(&format!("{url}?schema={schema}"), tmp.path());
        let app = format!("idemcalc pid {}", run.id());
        // Until the run has claimed a key (its tables exist and it is writing).
        let started = Instant::now();
        loop {
            let keys = admin
                .query_one(
                    &format!("SELECT count(*) FROM {schema}.idempotency_keys"),
                    &[],
                )
                .map_or(0, |r| r.get::<_, i64>(0));
            if keys > 0 {
                break;
            }
            assert!(
                run.try_wait().unwrap().is_none(),
                "trial {trial}: the run ended before writing"
            );
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "trial {trial}: no key after 60 s"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        pause(&run);
        let ended = admin
            .query(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = $1",
                &[&app],
            )
            .unwrap();
        assert_eq!(ended.len(), 1, "trial {trial}: one hold session");
        // Termination is asynchronous: wait until the session is gone.
        let started = Instant::now();
        while !admin
            .query(
                "SELECT 1 FROM pg_stat_activity WHERE application_name = $1",
                &[&app],
            )
            .unwrap()
            .is_empty()
        {
            assert!(started.elapsed() < Duration::from_secs(10));
            std::thread::sleep(Duration::from_millis(10));
        }
        // The schema's own lock is free now, but its writers still hold theirs.
        assert!(pg_key_free(
            &mut admin,
            idemcalc::store::exclusive::schema_lock_key(&schema)
        ));
        let writers = idemcalc::store::exclusive::schema_writers_key(&schema);
        assert!(!pg_key_free(&mut admin, writers), "trial {trial}");
        let before = pg_contents(&mut admin, &schema);
        let second = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
            .args(["bench", "--duration", "100ms", "--store"])
            .arg(format!("{url}?schema={schema}"))
            .output()
            .unwrap();
        let second_err = String::from_utf8_lossy(&second.stderr);
        assert_eq!(second.status.code(), Some(2), "trial {trial}: {second_err}");
        assert!(
            second_err.contains("is still written by another idemcalc run's connection"),
            "trial {trial}: {second_err}"
        );
        assert_eq!(
            before,
            pg_contents(&mut admin, &schema),
            "trial {trial}: (keys, labels) changed while the first run was stopped"
        );
        resume(&run);
        let (code, err) = wait_within(run, Duration::from_secs(60));
        assert_eq!(code, Some(EXIT_STORE_FAILED), "trial {trial}: {err}");
        assert!(
            err.contains("the session holding schema"),
            "trial {trial}: {err}"
        );
        assert!(
            err.contains("the store failed after"),
            "trial {trial}: {err}"
        );
        // Its connections are closed with the process: the schema is free for the next run.
        let started = Instant::now();
        while !pg_key_free(&mut admin, writers) {
            assert!(
                started.elapsed() < Duration::from_secs(10),
                "trial {trial}: the writers key is still held after the run ended"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    }
}

/// Each PostgreSQL trial waits out the second run's refusal (a few seconds).
const PG_TRIALS: usize = 5;

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
