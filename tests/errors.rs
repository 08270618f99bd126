//! Bad input gets a clear error naming the file, flag or field, exits 2, and never panics.

use idemcalc::store::{SqliteOptions, SqliteStore};
use std::process::Command;
use std::time::Duration;

fn idemcalc(args: &[&str]) -> (Option<i32>, String, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(args)
        .output()
        .expect("run idemcalc");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

const TIMELINE: &str = "scenarios/lease-takeover.toml";

fn manifest_path(rel: &str) -> String {
    format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn a_file_that_is_not_a_database_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("notes.txt");
    std::fs::write(
        &db,
        "these are not the pages you are looking for ".repeat(200),
    )
    .unwrap();
    let (code, _, err) = idemcalc(&[
        "scenario",
        &manifest_path(TIMELINE),
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(db.to_str().unwrap()), "{err}");
    assert!(err.contains("not an SQLite database"), "{err}");
    assert!(!err.contains("panicked"));
    // Nothing was lost: the file is as it was.
    assert!(
        std::fs::read_to_string(&db)
            .unwrap()
            .starts_with("these are not")
    );
}

#[test]
fn a_path_that_cannot_be_opened_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("no/such/dir/store.sqlite");
    let (code, _, err) = idemcalc(&[
        "scenario",
        &manifest_path(TIMELINE),
        "--db",
        db.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(db.to_str().unwrap()), "{err}");
    let (code, _, err) = idemcalc(&[
        "scenario",
        &manifest_path(TIMELINE),
        "--db",
        dir.path().to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(dir.path().to_str().unwrap()), "{err}");
}

#[test]
fn a_store_locked_past_the_timeout_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    drop(SqliteStore::open(&path, &SqliteOptions::default()).unwrap());
    let holder = rusqlite::Connection::open(&path).unwrap();
    holder.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let options = SqliteOptions {
        busy_timeout: Duration::from_millis(100),
        ..SqliteOptions::default()
    };
    let err = SqliteStore::open(&path, &options)
        .err()
        .expect("locked")
        .to_string();
    assert!(err.contains(path.to_str().unwrap()), "{err}");
    assert!(err.contains("locked"), "{err}");
    holder.execute_batch("ROLLBACK").unwrap();
}

#[test]
fn a_scenario_with_an_unknown_field_or_a_bad_duration_is_refused_with_file_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let text = std::fs::read_to_string(manifest_path(TIMELINE)).unwrap();
    let unknown = dir.path().join("unknown.toml");
    std::fs::write(
        &unknown,
        text.replace("[engine]\n", "[engine]\nleese = \"30s\"\n"),
    )
    .unwrap();
    let (code, _, err) = idemcalc(&["scenario", unknown.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(unknown.to_str().unwrap()) && err.contains("leese"),
        "{err}"
    );
    // file:line:col, then the field.
    let at = format!("{}:", unknown.display());
    let rest = &err[err.find(&at).expect("names the file") + at.len()..];
    assert!(
        rest.starts_with(|c: char| c.is_ascii_digit()),
        "names the line: {err}"
    );
    assert!(err.contains("engine.leese"), "{err}");

    let bad = dir.path().join("bad-duration.toml");
    std::fs::write(
        &bad,
        text.replace("lease = \"30s\"", "lease = \"30 parsecs\""),
    )
    .unwrap();
    let (code, _, err) = idemcalc(&["scenario", bad.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(bad.to_str().unwrap()) && err.contains("30 parsecs"),
        "{err}"
    );
    assert!(err.contains("lease"), "{err}");

    let (code, _, err) = idemcalc(&["scenario", "/no/such/scenario.toml"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("/no/such/scenario.toml"), "{err}");
}

#[test]
fn bad_flags_name_the_flag_and_the_value() {
    let (code, _, err) = idemcalc(&["simulate", "--retention", "3 fortnights"]);
    assert_eq!(code, Some(2));
    assert!(
        err.contains("--retention") && err.contains("3 fortnights"),
        "{err}"
    );
    let (code, _, err) = idemcalc(&["simulate", "--sample", "0", "--quiet"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--sample"), "{err}");
    let (code, _, err) = idemcalc(&["simulate", "--rate=-5", "--quiet"]);
    assert_eq!(code, Some(2));
    assert!(err.contains("--rate"), "{err}");
}

/// `--sweeper partitions` is PostgreSQL's; elsewhere, and a period without it, are refused by name.
#[test]
fn the_partition_sweeper_is_refused_where_it_cannot_run() {
    let (code, _, err) = idemcalc(&[
        "simulate",
        "--sweeper",
        "partitions",
        "--retention",
        "1h",
        "--duration",
        "2h",
        "--quiet",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--sweeper partitions needs a PostgreSQL store"),
        "{err}"
    );
    let (code, _, err) = idemcalc(&["simulate", "--partition-period", "1h", "--quiet"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--partition-period") && err.contains("--sweeper partitions"),
        "{err}"
    );
    let (code, _, err) = idemcalc(&["simulate", "--sweeper", "drop", "--quiet"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--sweeper") && err.contains("drop"), "{err}");
}
