//! Bad input gets a clear error naming the file, flag or field, exits 2, and never panics.

use crate::common;

use common::idemcalc;
use idemcalc::store::{SqliteOptions, SqliteStore};
use std::process::Command;
use std::time::Duration;

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

/// A listener on a free port that accepts every connection and never answers: a hung server,
/// or a store URL naming the wrong service's port. Lives until the test ends.
fn silent_listener() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming().flatten() {
            held.push(stream);
        }
    });
    port
}

/// Runs idemcalc, killing it if it is still running after `limit`: a hang fails the test
/// instead of blocking the suite.
fn idemcalc_within(args: &[&str], limit: Duration) -> (Option<i32>, String) {
    let child = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(args)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run idemcalc");
    common::wait_within(child, limit)
}

/// Issue 24: against a listener that accepts and never answers, `simulate`, `bench`,
/// `scenario`, `report --store` and `report --compare-store` hung for good. Each now gives up
/// after the store's connect deadline, naming the store.
#[test]
fn a_server_that_never_answers_is_named_not_waited_for() {
    let port = silent_listener();
    let scenarios = manifest_path("scenarios");
    let timeline = manifest_path(TIMELINE);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    let out = out.to_str().unwrap();
    let urls = [
        format!("postgres://postgres@127.0.0.1:{port}/test"),
        format!("redis://127.0.0.1:{port}"),
    ];
    let mut runs: Vec<Vec<&str>> = Vec::new();
    for url in &urls {
        let store = ["--store", url.as_str()];
        runs.push(
            [
                &[
                    "simulate",
                    "--retention",
                    "1h",
                    "--duration",
                    "1h",
                    "--quiet",
                ][..],
                &store,
            ]
            .concat(),
        );
        runs.push([&["bench", "--duration", "1s"][..], &store].concat());
        runs.push([&["scenario", timeline.as_str()][..], &store].concat());
        let report = [
            "report",
            "--scenarios",
            scenarios.as_str(),
            "--out",
            out,
            "--quiet",
        ];
        runs.push([&report[..], &store].concat());
        runs.push([&report[..], &["--compare-store", url.as_str()]].concat());
    }
    // All at once: each waits on a silent socket, not on the machine.
    std::thread::scope(|s| {
        for args in &runs {
            s.spawn(move || {
                // Far above the two 6 s deadlines a run can meet before its first write; a
                // hang is what this catches, not a speed.
                let (code, err) = idemcalc_within(args, Duration::from_secs(90));
                assert_eq!(code, Some(2), "{args:?}: {err}");
                assert!(
                    err.contains(&format!("127.0.0.1:{port}")),
                    "{args:?}: {err}"
                );
                assert!(
                    err.contains("did not answer") || err.contains("no answer"),
                    "{args:?}: {err}"
                );
            });
        }
    });
}

/// Issue 24: `simulate --store '…?schema=public'` created its tables in the database's default
/// schema (and `information_schema`, the server's catalogue) and exited 0. Every subcommand
/// refuses both, before connecting.
#[test]
fn reserved_schemas_are_refused_by_every_subcommand() {
    let scenarios = manifest_path("scenarios");
    let timeline = manifest_path(TIMELINE);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("report");
    for schema in ["public", "information_schema"] {
        // No server is needed: the spec is refused as written.
        let url = format!("postgres://postgres@127.0.0.1:1/test?schema={schema}");
        let runs: Vec<Vec<&str>> = vec![
            vec![
                "simulate",
                "--retention",
                "1h",
                "--duration",
                "1h",
                "--quiet",
                "--store",
                &url,
            ],
            vec!["bench", "--duration", "1s", "--store", &url],
            vec!["scenario", &timeline, "--store", &url],
            vec![
                "report",
                "--scenarios",
                &scenarios,
                "--out",
                out.to_str().unwrap(),
                "--quiet",
                "--store",
                &url,
            ],
        ];
        for args in runs {
            let (code, _, err) = idemcalc(&args);
            assert_eq!(code, Some(2), "{args:?}: {err}");
            assert!(
                err.contains(&format!("`{schema}` is reserved")),
                "{args:?}: {err}"
            );
        }
    }
}

/// Issue 24: input files that are not regular files are refused at once, naming the file and
/// what it is, instead of blocking on a FIFO or reading `/dev/zero` until memory runs out.
#[test]
fn inputs_that_are_not_regular_files_are_refused_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let p = |name: &str| dir.path().join(name);
    std::os::unix::fs::symlink("/dev/zero", p("zero.ndjson")).unwrap();
    std::fs::create_dir(p("logs.csv")).unwrap();
    let fifo = p("pipe.toml");
    assert!(
        Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success()
    );
    let s = |path: std::path::PathBuf| path.to_str().unwrap().to_string();
    let cases: Vec<(Vec<String>, &str)> = vec![
        (vec!["fit".into(), s(p("zero.ndjson"))], "is a device"),
        (vec!["fit".into(), s(p("logs.csv"))], "is a directory"),
        (vec!["scenario".into(), s(fifo.clone())], "named pipe"),
        (
            vec!["simulate".into(), "--scenario".into(), s(fifo.clone())],
            "named pipe",
        ),
        (
            vec!["simulate".into(), "--retry-cdf".into(), s(fifo.clone())],
            "named pipe",
        ),
    ];
    for (args, what) in cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let (code, err) = idemcalc_within(&args, Duration::from_secs(20));
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(what), "{args:?}: {err}");
        assert!(
            err.contains(dir.path().to_str().unwrap()),
            "{args:?}: {err}"
        );
    }
}

/// Issue 24: `fit f.csv f.csv` (or the same file under a second name) counted every request
/// twice without a word.
#[test]
fn fit_refuses_the_same_log_twice() {
    let dir = tempfile::tempdir().unwrap();
    let log = manifest_path("scenarios/logs/example-requests.csv");
    let link = dir.path().join("again.csv");
    std::os::unix::fs::symlink(&log, &link).unwrap();
    let out = dir.path().join("fitted.toml");
    let (code, _, err) = idemcalc(&[
        "fit",
        &log,
        link.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("the same file as"), "{err}");
    assert!(!out.exists());
}

/// Issue 24: a time of 1e308 or a weight of 1e300 made `rate = NaN` or an infinite tally; such
/// rows are now bad rows, named, and the rest of the log is fitted.
#[test]
fn fit_takes_absurd_times_and_weights_as_bad_rows() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("absurd.ndjson");
    let mut text = String::new();
    for i in 0..200 {
        text.push_str(&format!(
            "{{\"time\":{},\"idempotency_key\":\"k{i}\",\"status\":201}}\n",
            1_700_000_000 + i
        ));
    }
    text.push_str("{\"time\":1e308,\"idempotency_key\":\"far\",\"status\":201}\n");
    text.push_str(
        "{\"time\":1700000100,\"idempotency_key\":\"heavy\",\"status\":201,\"weight\":1e300}\n",
    );
    std::fs::write(&log, text).unwrap();
    let out = dir.path().join("fitted.toml");
    let (code, stdout, err) =
        idemcalc(&["fit", log.to_str().unwrap(), "--out", out.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{err}");
    let all = format!("{stdout}{err}");
    assert!(all.contains("3,000 years"), "{all}");
    assert!(all.contains("weight"), "{all}");
    let fitted = std::fs::read_to_string(&out).unwrap();
    assert!(
        !fitted.contains("NaN") && !fitted.contains("inf"),
        "{fitted}"
    );
}

/// Issue 24, item 10: messages that did not name the flag or field, or named the wrong thing.
#[test]
fn unclear_messages_name_the_flag_field_or_file_and_the_fix() {
    let (code, _, err) = idemcalc(&[
        "bench",
        "--group-commit",
        "on",
        "--batch",
        "0",
        "--duration",
        "1s",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--batch 0"), "{err}");
    let (code, _, err) = idemcalc(&[
        "bench",
        "--group-commit",
        "on",
        "--max-wait",
        "3d",
        "--duration",
        "1s",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--max-wait 3d"), "{err}");

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("rush.toml");
    std::fs::write(&file, "name = \"r\"\n[traffic]\nrush = 5\n").unwrap();
    let (code, _, err) = idemcalc(&["simulate", "--scenario", file.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("traffic.rush") && err.contains("a rush is a table"),
        "{err}"
    );
    assert!(!err.contains("unknown field"), "{err}");

    std::fs::write(dir.path().join("summary.json"), "{}").unwrap();
    let (code, _, err) = idemcalc(&[
        "report",
        "--scenarios",
        &manifest_path("scenarios"),
        "--baseline",
        dir.path().to_str().unwrap(),
        "--out",
        dir.path().join("out").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("summary.json"), "{err}");

    let (code, _, err) = idemcalc(&[
        "simulate",
        "--store",
        "sqlite:/dev/null",
        "--retention",
        "1h",
        "--quiet",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("/dev/null") && err.contains("is a device"),
        "{err}"
    );
}

/// Issue 22: an output that cannot be written is refused before any simulation (a report to a
/// read-only place failed after 25-49 s of work); `report` writes to reports/ by default.
#[test]
fn outputs_are_checked_before_any_work() {
    let (code, out, err) = idemcalc(&[
        "simulate",
        "--report",
        "/nonexistent-dir/run.html",
        "--retention",
        "1h",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--report") && err.contains("does not exist"),
        "{err}"
    );
    assert!(out.is_empty(), "nothing was simulated: {out}");
    let (code, _, err) = idemcalc(&[
        "report",
        "--scenarios",
        &manifest_path("scenarios"),
        "--out",
        "/proc/idemcalc-report",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--out /proc/idemcalc-report"), "{err}");
    let (_, help, _) = idemcalc(&["report", "--help"]);
    assert!(help.contains("[default: reports]"), "{help}");
}

/// A bad value exits 2 naming `what`, and nothing panics.
fn refused(args: &[&str], what: &str) -> String {
    let (code, _, err) = idemcalc(args);
    assert_eq!(code, Some(2), "{args:?}: {err}");
    assert!(err.contains(what), "{args:?} should name {what}: {err}");
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    err
}

/// `--sweep-period 1ns` ran for over an hour: the knob has a lower bound, with its reason, the
/// same from a flag and from a file.
#[test]
fn a_sweep_period_below_a_second_is_refused_with_the_reason() {
    let err = refused(
        &["simulate", "--dry-run", "--sweep-period", "1ns"],
        "--sweep-period",
    );
    assert!(
        err.contains("1s limit") && err.contains("simulated time"),
        "{err}"
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.toml");
    std::fs::write(&file, "name = \"s\"\n[traffic]\nsweep_period = \"1ns\"\n").unwrap();
    let err = refused(
        &[
            "simulate",
            "--dry-run",
            "--scenario",
            file.to_str().unwrap(),
        ],
        "traffic.sweep_period",
    );
    assert!(err.contains("1s limit"), "{err}");
    let (code, _, err) = idemcalc(&["simulate", "--dry-run", "--sweep-period", "1s"]);
    assert_eq!(code, Some(0), "{err}");
}

/// `simulate --dry-run` makes every check a run makes: it accepted what a run then refused.
#[test]
fn a_dry_run_refuses_what_a_run_refuses() {
    let dir = tempfile::tempdir().unwrap();
    let cdf = dir.path().join("cdf.csv");
    std::fs::write(&cdf, "garbage\n").unwrap();
    refused(
        &[
            "simulate",
            "--dry-run",
            "--retry-cdf",
            cdf.to_str().unwrap(),
        ],
        "cdf.csv",
    );
    for (flag, value) in [
        ("--deadline", "0.5ms"),
        ("--retention", "1ns"),
        ("--retry-horizon", "0.5ms"),
    ] {
        refused(&["simulate", "--dry-run", flag, value], flag);
    }
    refused(
        &["simulate", "--dry-run", "--request-log", "x.xlsx"],
        "x.xlsx",
    );
}

/// `--rate 1e-320` passed "> 0" and sized a store of 0 B.
#[test]
fn subnormal_and_absurdly_small_numbers_are_refused() {
    for (flag, value) in [
        ("--rate", "1e-320"),
        ("--rate", "1e-9"),
        ("--peak-rate", "5e-324"),
        ("--rush-rate", "1e-320"),
        ("--timeout-fraction", "1e-320"),
        ("--storage-price", "1e-310"),
    ] {
        refused(&["simulate", "--dry-run", flag, value], flag);
    }
    refused(
        &["estimate", "--format", "json", "--rate", "1e-320"],
        "--rate",
    );
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("s.toml");
    std::fs::write(&file, "name = \"s\"\n[traffic]\nrate = 1e-320\n").unwrap();
    refused(
        &[
            "simulate",
            "--dry-run",
            "--scenario",
            file.to_str().unwrap(),
        ],
        "traffic.rate",
    );
}

/// `rate = {}` silently meant the default 400/s.
#[test]
fn an_empty_table_for_a_knob_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    for (body, field) in [
        ("[traffic]\nrate = {}\n", "traffic.rate"),
        ("[carrier]\nlatency = {}\n", "carrier.latency"),
        ("[traffic]\nrush = {}\n", "traffic.rush"),
    ] {
        let file = dir.path().join("s.toml");
        std::fs::write(&file, format!("name = \"s\"\n{body}")).unwrap();
        let err = refused(
            &[
                "simulate",
                "--dry-run",
                "--scenario",
                file.to_str().unwrap(),
            ],
            field,
        );
        assert!(err.contains("s.toml"), "{err}");
    }
}

/// A PostgreSQL store in a template database (or the maintenance database by default) would
/// put our tables into every database created after it.
#[test]
fn template_databases_are_refused_as_stores() {
    use idemcalc::store::StoreSpec;
    for url in [
        "postgres://postgres@127.0.0.1:5432/template1",
        "postgres://postgres@127.0.0.1:5432/template0",
        "postgres://postgres@127.0.0.1:5432/test?dbname=template1",
        "postgresql://u@h/x?dbname=template0&schema=s",
        "postgres://postgres@127.0.0.1:5432",
    ] {
        let e = StoreSpec::parse(url).expect_err(url).to_string();
        assert!(
            e.contains("template") || e.contains("maintenance database"),
            "{url}: {e}"
        );
    }
    for url in [
        "postgres://postgres@127.0.0.1:5432/test",
        "postgres://postgres@127.0.0.1:5432/postgres",
        "postgres://h/db?schema=s1",
    ] {
        StoreSpec::parse(url).unwrap_or_else(|e| panic!("{url}: {e}"));
    }
    refused(
        &[
            "simulate",
            "--dry-run",
            "--store",
            "postgres://postgres@127.0.0.1:5432/template1",
        ],
        "template1",
    );
}

const LOG_HEADER: &str = "time,caller,idempotency_key,status,response_bytes";

/// `fit --out "my system.toml"` fitted the whole log and then called the name a bug in fit.
#[test]
fn fit_checks_the_scenario_name_before_fitting() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("ex.csv");
    std::fs::write(
        &log,
        format!("{LOG_HEADER}\n0,a,k1,201,300\n5,a,k2,201,300\n"),
    )
    .unwrap();
    let out = dir.path().join("my system.toml");
    let err = refused(
        &["fit", log.to_str().unwrap(), "--out", out.to_str().unwrap()],
        "--name",
    );
    assert!(err.contains("--out") && !err.contains("bug"), "{err}");
    assert!(!out.exists());
    refused(
        &[
            "fit",
            log.to_str().unwrap(),
            "--out",
            out.to_str().unwrap(),
            "--name",
            "a/b",
        ],
        "--name",
    );
    let (code, _, err) = idemcalc(&[
        "fit",
        log.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--name",
        "my-system",
    ]);
    assert_eq!(code, Some(0), "{err}");
}

/// One Latin-1 byte gave "invalid utf-8 sequence" with no row; a duplicate header column was
/// reported as "same time"; a BOM dropped an NDJSON log's first row; a key given twice in a
/// JSON row was read as its last value.
#[test]
fn fit_names_the_row_or_column_of_a_malformed_log() {
    let dir = tempfile::tempdir().unwrap();
    let latin1 = dir.path().join("latin1.csv");
    let mut bytes = format!("{LOG_HEADER}\n0,a,k1,201,300\n1,a,").into_bytes();
    bytes.extend_from_slice(b"k\xe92,201,300\n60,a,k2,201,300\n");
    std::fs::write(&latin1, bytes).unwrap();
    let err = refused(&["fit", latin1.to_str().unwrap()], "latin1.csv");
    assert!(err.contains("row 2") && err.contains("UTF-8"), "{err}");

    let dup = dir.path().join("dup.csv");
    std::fs::write(
        &dup,
        "time,caller,idempotency_key,status,time\n0,a,k1,201,3\n5,a,k2,201,3\n",
    )
    .unwrap();
    let err = refused(&["fit", dup.to_str().unwrap()], "dup.csv");
    assert!(err.contains("column `time` appears twice"), "{err}");

    let row = |t: u32, k: &str| {
        format!(
            "{{\"time\":{t},\"caller\":\"a\",\"idempotency_key\":\"{k}\",\"status\":201,\"response_bytes\":3}}\n"
        )
    };
    let bom = dir.path().join("bom.ndjson");
    std::fs::write(&bom, format!("\u{feff}{}{}", row(0, "k1"), row(5, "k2"))).unwrap();
    let (code, out, err) = idemcalc(&["fit", bom.to_str().unwrap(), "--format", "json"]);
    assert_eq!(code, Some(0), "{err}");
    let f: serde_json::Value = serde_json::from_str(&out).unwrap();
    assert_eq!(f["rows"], 2, "{out}");
    assert_eq!(f["bad_rows"]["total"], 0, "{out}");

    let twice = dir.path().join("twice.ndjson");
    std::fs::write(
        &twice,
        format!(
            "{}{{\"time\":5,\"caller\":\"a\",\"idempotency_key\":\"k1\",\"status\":500,\"status\":201,\"response_bytes\":3}}\n",
            row(0, "k1")
        ),
    )
    .unwrap();
    let err = refused(&["fit", twice.to_str().unwrap()], "twice.ndjson");
    assert!(err.contains("row 2") && err.contains("`status`"), "{err}");
}
