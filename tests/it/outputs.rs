//! Outputs never replace an input, a file idemcalc did not write (without `--force`) or what a
//! symbolic link points to; a damaged Parquet file is bad input (exit 2), not a panic; a closed
//! stdout ends a run quietly. Every file is made in a temporary directory of the test's own.

use crate::common;

use common::idemcalc;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

const BIN: &str = env!("CARGO_BIN_EXE_idemcalc");

fn manifest_path(rel: &str) -> String {
    format!("{}/{rel}", env!("CARGO_MANIFEST_DIR"))
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

/// A copy of the bundled example log in `dir`.
fn example_log(dir: &Path) -> PathBuf {
    let log = dir.join("ex2.csv");
    std::fs::copy(manifest_path("scenarios/logs/example-requests.csv"), &log).unwrap();
    log
}

/// A refusal: exit 2, the flag and the path named, no panic.
fn refused(args: &[&str], flag: &str, path: &Path, words: &str) {
    let (code, _, err) = idemcalc(args);
    assert_eq!(code, Some(2), "{args:?}: {err}");
    assert!(
        err.contains(&format!("{flag} {}", path.display())),
        "{args:?}: {err}"
    );
    assert!(err.contains(words), "{args:?}: {err}");
    assert!(!err.contains("panicked"), "{err}");
}

#[test]
fn fit_out_never_replaces_its_input_a_foreign_file_or_a_links_target() {
    let dir = tempfile::tempdir().unwrap();
    let log = example_log(dir.path());
    let before = std::fs::read(&log).unwrap();
    refused(&["fit", s(&log), "--out", s(&log)], "--out", &log, "LOG");
    refused(
        &["fit", s(&log), "--out", s(&log), "--force"],
        "--out",
        &log,
        "LOG",
    );
    assert_eq!(std::fs::read(&log).unwrap(), before, "the log is unchanged");

    let foreign = dir.path().join("notes.toml");
    std::fs::write(&foreign, "my own notes\n").unwrap();
    refused(
        &["fit", s(&log), "--out", s(&foreign)],
        "--out",
        &foreign,
        "--force",
    );
    assert_eq!(std::fs::read(&foreign).unwrap(), b"my own notes\n");

    // A planted link: its target stays as it was, --force or not.
    let victim = dir.path().join("passwd");
    std::fs::write(&victim, "root:x:0:0\n").unwrap();
    let link = dir.path().join("fitted.toml");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    for force in [false, true] {
        let mut args = vec!["fit", s(&log), "--out", s(&link)];
        if force {
            args.push("--force");
        }
        refused(&args, "--out", &link, "symbolic link");
        assert_eq!(std::fs::read(&victim).unwrap(), b"root:x:0:0\n");
        assert!(link.is_symlink());
    }

    // --force replaces a foreign file; a file fit wrote is replaced without it.
    let (code, _, err) = idemcalc(&["fit", s(&log), "--out", s(&foreign), "--force"]);
    assert_eq!(code, Some(0), "{err}");
    let fitted = std::fs::read_to_string(&foreign).unwrap();
    assert!(fitted.starts_with("# Fitted by `idemcalc fit`"), "{fitted}");
    let (code, _, err) = idemcalc(&["fit", s(&log), "--out", s(&foreign), "--name", "again"]);
    assert_eq!(code, Some(0), "{err}");
    assert!(
        std::fs::read_to_string(&foreign)
            .unwrap()
            .contains("\"again\"")
    );
    // No temporary file is left beside the outputs.
    let names: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.starts_with('.')), "{names:?}");
}

#[test]
fn report_out_refuses_a_foreign_directory() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("docs");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("index.html"), "my site\n").unwrap();
    let scenarios = dir.path().join("scenarios");
    std::fs::create_dir(&scenarios).unwrap();
    std::fs::copy(
        manifest_path("scenarios/lease-takeover.toml"),
        scenarios.join("lease-takeover.toml"),
    )
    .unwrap();
    let args = [
        "report",
        "--scenarios",
        s(&scenarios),
        "--out",
        s(&out),
        "--quiet",
    ];
    refused(&args, "--out", &out, "--force");
    assert_eq!(std::fs::read(out.join("index.html")).unwrap(), b"my site\n");
    // A link to a directory is not written through either.
    let link = dir.path().join("reports");
    std::os::unix::fs::symlink(&out, &link).unwrap();
    refused(
        &[
            "report",
            "--scenarios",
            s(&scenarios),
            "--out",
            s(&link),
            "--force",
        ],
        "--out",
        &link,
        "symbolic link",
    );
    assert_eq!(std::fs::read(out.join("index.html")).unwrap(), b"my site\n");
    // A directory that holds an input is never written into.
    refused(
        &[
            "report",
            "--scenarios",
            s(&scenarios),
            "--out",
            s(dir.path()),
            "--force",
        ],
        "--out",
        dir.path(),
        "--scenarios",
    );
}

#[test]
fn simulate_outputs_refuse_foreign_files_and_directories() {
    let dir = tempfile::tempdir().unwrap();
    let run = |extra: &[&str]| {
        let mut args = vec![
            "simulate",
            "--rate",
            "5",
            "--duration",
            "1h",
            "--retention",
            "1h",
        ];
        args.extend_from_slice(&["--quiet", "--format", "json"]);
        args.extend_from_slice(extra);
        idemcalc(&args)
    };
    let out = dir.path().join("tables");
    std::fs::create_dir(&out).unwrap();
    std::fs::write(out.join("series.csv"), "mine\n").unwrap();
    let (code, _, err) = run(&["--out", s(&out)]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains(&format!("--out {}", out.display())) && err.contains("--force"));
    assert_eq!(std::fs::read(out.join("series.csv")).unwrap(), b"mine\n");

    let page = dir.path().join("page.html");
    std::fs::write(&page, "<p>mine</p>\n").unwrap();
    let (code, _, err) = run(&["--report", s(&page)]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("--report {}", page.display())),
        "{err}"
    );
    assert_eq!(std::fs::read(&page).unwrap(), b"<p>mine</p>\n");

    let log = dir.path().join("requests.csv");
    std::fs::write(&log, "a,b\n1,2\n").unwrap();
    let (code, _, err) = run(&["--request-log", s(&log)]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("--request-log {}", log.display())),
        "{err}"
    );
    assert_eq!(std::fs::read(&log).unwrap(), b"a,b\n1,2\n");

    let ledger = dir.path().join("invoices.csv");
    std::fs::write(&ledger, "invoice,amount\n1,600\n").unwrap();
    let (code, _, err) = run(&["--carrier-ledger", s(&ledger)]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains(&format!("--carrier-ledger {}", ledger.display())) && err.contains("--force"),
        "{err}"
    );
    assert_eq!(std::fs::read(&ledger).unwrap(), b"invoice,amount\n1,600\n");
    // Written in place, but never through a link, --force or not; never over the store.
    let victim = dir.path().join("victim.csv");
    std::fs::write(&victim, "keep\n").unwrap();
    let link = dir.path().join("ledger-link.csv");
    std::os::unix::fs::symlink(&victim, &link).unwrap();
    let (code, _, err) = run(&["--carrier-ledger", s(&link), "--force"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("symbolic link"), "{err}");
    assert_eq!(std::fs::read(&victim).unwrap(), b"keep\n");
    let db = dir.path().join("store.sqlite");
    let (code, _, err) = run(&["--db", s(&db), "--carrier-ledger", s(&db), "--force"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("--carrier-ledger") && err.contains("store"),
        "{err}"
    );

    // What simulate wrote itself it replaces on the next run, without --force.
    let fresh = dir.path().join("fresh");
    let page = dir.path().join("run.html");
    let log = dir.path().join("run.parquet");
    let ledger = dir.path().join("run-ledger.csv");
    let outputs = [
        "--out",
        s(&fresh),
        "--report",
        s(&page),
        "--request-log",
        s(&log),
        "--carrier-ledger",
        s(&ledger),
    ];
    for _ in 0..2 {
        let (code, _, err) = run(&outputs);
        assert_eq!(code, Some(0), "{err}");
    }
    // One line per purchase after the header, each purchase once: the run's carrier bought
    // at least one label at 5/s for an hour.
    let text = std::fs::read_to_string(&ledger).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("at_ms,carrier_key,order_id,parcel_no,label_version,label_id,tracking_no,cost_cents")
    );
    let ids: Vec<&str> = lines.map(|l| l.split(',').nth(5).unwrap()).collect();
    assert!(!ids.is_empty(), "{text}");
    let distinct: std::collections::HashSet<&&str> = ids.iter().collect();
    assert_eq!(distinct.len(), ids.len(), "a label id twice: {text}");
}

/// A ledger that cannot take a line fails the run at once, naming --carrier-ledger, with no
/// panic and only whole lines left: here the file size limit (RLIMIT_FSIZE, 2 KiB, SIGXFSZ
/// ignored so the write fails with EFBIG) stops it after a few dozen purchases of an hour's
/// thousands.
#[test]
fn a_carrier_ledger_that_cannot_be_written_fails_the_run() {
    use std::os::unix::process::CommandExt as _;
    let dir = tempfile::tempdir().unwrap();
    let ledger = dir.path().join("ledger.csv");
    let mut command = Command::new(BIN);
    command.args([
        "simulate",
        "--rate",
        "5",
        "--duration",
        "1h",
        "--retention",
        "1h",
        "--quiet",
        "--format",
        "json",
        "--carrier-ledger",
        s(&ledger),
    ]);
    // SAFETY: between fork and exec only setrlimit(2) and sigaction(2), both async-signal-safe;
    // an ignored signal stays ignored across exec.
    unsafe {
        command.pre_exec(|| {
            use nix::sys::resource::{Resource, setrlimit};
            use nix::sys::signal::{SigHandler, Signal, signal};
            setrlimit(Resource::RLIMIT_FSIZE, 2048, 2048)?;
            signal(Signal::SIGXFSZ, SigHandler::SigIgn)?;
            Ok(())
        });
    }
    let out = command.output().expect("run idemcalc");
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains(&format!("--carrier-ledger {}", ledger.display()))
            && err.contains("cannot write an invoice line"),
        "{err}"
    );
    assert!(!err.contains("panicked"), "{err}");
    let text = std::fs::read_to_string(&ledger).unwrap();
    assert!(text.len() <= 2048 && text.ends_with('\n'), "{text:?}");
    assert!(text.lines().count() > 10, "{text}");
}

/// A small request log in Parquet, written by `simulate --request-log`.
fn parquet_log(dir: &Path) -> PathBuf {
    let log = dir.join("requests.parquet");
    let (code, _, err) = idemcalc(&[
        "simulate",
        "--rate",
        "1",
        "--duration",
        "1h",
        "--retention",
        "1h",
        "--request-log",
        s(&log),
        "--quiet",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    log
}

/// Flips one bit at each of `offsets` in a copy of `file` and runs `fit` (with `before` ahead
/// of the file): never a panic, and every failure is exit 2 naming the file.
fn sweep(file: &Path, before: &[&str], offsets: &[usize]) -> usize {
    let bytes = std::fs::read(file).unwrap();
    let dir = file.parent().unwrap();
    let mut refused = 0;
    for &at in offsets {
        let at = at % bytes.len();
        let mut flipped = bytes.clone();
        flipped[at] ^= 1 << (at % 8);
        let copy = dir.join(format!("flipped-{at}.parquet"));
        std::fs::write(&copy, &flipped).unwrap();
        let mut args = vec!["fit"];
        args.extend_from_slice(before);
        args.extend_from_slice(&[s(&copy), "--format", "json"]);
        let (code, _, err) = idemcalc(&args);
        assert!(!err.contains("panicked"), "byte {at}: {err}");
        match code {
            Some(0) => {}
            Some(2) => {
                assert!(err.contains(s(&copy)), "byte {at}: {err}");
                refused += 1;
            }
            other => panic!("byte {at}: exit {other:?}: {err}"),
        }
        std::fs::remove_file(&copy).unwrap();
    }
    refused
}

/// Offsets spread over the file, byte 5200, and bytes `from_end` before its end: where polars
/// 0.55 panicked on these very files (a thrift field or a column chunk's range in the footer;
/// found by flipping every byte of the footer). Another polars may not panic there; the sweep
/// still asserts that nothing does.
fn offsets(len: usize, from_end: &[usize]) -> Vec<usize> {
    let mut v: Vec<usize> = (0..18).map(|i| 4 + i * (len - 8) / 18).collect();
    v.push(5200);
    v.extend(from_end.iter().map(|d| len - d));
    v
}

#[test]
fn a_bit_flipped_parquet_log_is_bad_input_not_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let log = parquet_log(dir.path());
    let len = std::fs::metadata(&log).unwrap().len() as usize;
    assert!(len > 5300, "a log of {len} bytes");
    let from_end = [1209, 1203, 1129, 1094, 1041, 1035, 992, 900, 822, 747, 687];
    let refused = sweep(&log, &[], &offsets(len, &from_end));
    assert!(refused > 0, "some flipped file was refused");
}

#[test]
fn a_bit_flipped_parquet_result_is_bad_input_not_a_panic() {
    use polars::prelude::*;
    use polars_io::prelude::ParquetWriter;
    let dir = tempfile::tempdir().unwrap();
    let n = 3000;
    let mut df = DataFrame::new_infer_height(vec![
        Series::new(
            "stat".into(),
            (0..n).map(|i| format!("stat{}", i % 7)).collect::<Vec<_>>(),
        )
        .into(),
        Series::new(
            "label".into(),
            (0..n).map(|i| format!("l{i}")).collect::<Vec<_>>(),
        )
        .into(),
        Series::new("at".into(), (0..n).map(f64::from).collect::<Vec<_>>()).into(),
        Series::new(
            "n".into(),
            (0..n).map(|i| f64::from(i % 13)).collect::<Vec<_>>(),
        )
        .into(),
        Series::new(
            "w".into(),
            (0..n).map(|i| f64::from(i) * 0.5).collect::<Vec<_>>(),
        )
        .into(),
        Series::new(
            "w2".into(),
            (0..n).map(|i| f64::from(i) * 0.25).collect::<Vec<_>>(),
        )
        .into(),
    ])
    .unwrap();
    let result = dir.path().join("result.parquet");
    ParquetWriter::new(std::fs::File::create(&result).unwrap())
        .finish(&mut df)
        .unwrap();
    let len = std::fs::metadata(&result).unwrap().len() as usize;
    let from_end = [901, 884, 877, 769, 768, 717, 624, 573, 568, 524, 145];
    sweep(&result, &["--aggregates"], &offsets(len, &from_end));
}

/// Runs `args` with stdout a pipe whose read end is closed at once: the run ends quietly, never
/// with a panic (exit 101).
fn with_closed_stdout(args: &[&str]) {
    let mut child = Command::new(BIN)
        .args(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run idemcalc");
    drop(child.stdout.take());
    let o = child.wait_with_output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(!err.contains("panicked"), "{args:?}: {err}");
    assert!(
        matches!(o.status.code(), Some(0) | Some(141)),
        "{args:?}: {:?}: {err}",
        o.status
    );
}

#[test]
fn a_closed_stdout_ends_every_subcommand_quietly() {
    let dir = tempfile::tempdir().unwrap();
    let log = example_log(dir.path());
    let out = dir.path().join("report");
    let scenarios = dir.path().join("scenarios");
    std::fs::create_dir(&scenarios).unwrap();
    std::fs::copy(
        manifest_path("scenarios/lease-takeover.toml"),
        scenarios.join("lease-takeover.toml"),
    )
    .unwrap();
    let timeline = manifest_path("scenarios/lease-takeover.toml");
    let sim = [
        "simulate",
        "--rate",
        "5",
        "--duration",
        "1h",
        "--retention",
        "1h",
        "--quiet",
    ];
    for format in ["table", "json"] {
        with_closed_stdout(&[&sim[..], &["--format", format]].concat());
        with_closed_stdout(&["estimate", "--format", format]);
        with_closed_stdout(&["fit", s(&log), "--format", format]);
        with_closed_stdout(&["scenario", &timeline, "--format", format]);
    }
    with_closed_stdout(&[&sim[..], &["--dry-run"]].concat());
    with_closed_stdout(&["fit", "--emit-sql", "postgres", "--table", "t"]);
    with_closed_stdout(&["report", "--scenarios", s(&scenarios), "--out", s(&out)]);
}
