//! The attack sweeps, bounded for CI, all through the real binary and inside temporary
//! directories the tests create.
//!
//! Issue 35's bad-input sweep (this file): every kind of file a user hands idemcalc (a request
//! log as CSV and as Parquet, `fit --aggregates` results, a retry CDF, a scenario file),
//! corrupted at byte positions drawn from a fixed seed. Every run must end on its own within
//! its limit (no hang), never with a panic (exit 101) or a signal, and every refusal (exit 2)
//! must name the file it could not use. (Flags and scenario fields are swept value by value in
//! tests/it/settings.rs; closed pipes in tests/it/outputs.rs.)
//!
//! Issue 50's sweep of the HTTP surfaces, in the modules below: crafted requests against
//! `serve` and `carrier` (`http`), hostile servers against `load` (`hostile`), and signals
//! (`signals`). Same rules: no panic, no hang, every refusal a documented error body or one
//! clear line.

use crate::common;
#[path = "attack/crafted.rs"]
mod crafted;
#[path = "attack/hostile.rs"]
mod hostile;
#[path = "attack/http.rs"]
mod http;
#[path = "attack/signals.rs"]
mod signals;
#[path = "attack/wire.rs"]
mod wire;

use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// Variants of each file: a few seconds of runs in all.
const VARIANTS: usize = 12;
/// A run that takes longer than this hangs.
const LIMIT: Duration = Duration::from_secs(60);

/// `bytes` with one to three of its bytes changed: flipped bits, a NUL, a quote or a newline,
/// or the file cut short, at positions drawn from `rng`.
fn corrupt(bytes: &[u8], rng: &mut StdRng) -> Vec<u8> {
    let mut out = bytes.to_vec();
    if out.is_empty() {
        return out;
    }
    match rng.random_range(0..5u8) {
        0 => out.truncate(rng.random_range(0..out.len())),
        _ => {
            for _ in 0..rng.random_range(1..=3) {
                let i = rng.random_range(0..out.len());
                out[i] = match rng.random_range(0..4u8) {
                    0 => out[i] ^ (1 << rng.random_range(0..8)),
                    1 => 0,
                    2 => b'"',
                    _ => b'\n',
                };
            }
        }
    }
    out
}

/// Runs `args` (with `file` among them) and checks how it ended; returns the exit code.
fn run_on(args: &[String], file: &Path, what: &str) -> Option<i32> {
    let child = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (code, err) = common::wait_within(child, LIMIT);
    assert!(
        code.is_some(),
        "{what}: killed by a signal: {args:?}\n{err}"
    );
    assert_ne!(code, Some(101), "{what}: a panic: {args:?}\n{err}");
    assert!(
        matches!(code, Some(0..=2)),
        "{what}: exit {code:?}: {args:?}\n{err}"
    );
    if code == Some(2) {
        let name = file.file_name().unwrap().to_string_lossy();
        assert!(
            err.contains(name.as_ref()),
            "{what}: the refusal does not name {name}: {err}"
        );
    }
    code
}

/// Every corrupted variant of `original` through `args_for(path)`; the counts of exit codes.
fn sweep(
    dir: &Path,
    name: &str,
    original: &[u8],
    seed: u64,
    args_for: impl Fn(&Path) -> Vec<String>,
) -> [usize; 3] {
    let mut rng = StdRng::seed_from_u64(seed);
    let mut codes = [0usize; 3];
    for i in 0..VARIANTS {
        let path = dir.join(format!("{i}-{name}"));
        std::fs::write(&path, corrupt(original, &mut rng)).unwrap();
        let code = run_on(&args_for(&path), &path, &format!("{name} variant {i}"));
        codes[code.unwrap_or(2) as usize] += 1;
    }
    codes
}

fn s(p: &Path) -> String {
    p.to_str().unwrap().to_string()
}

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).to_path_buf()
}

#[test]
fn corrupted_logs_and_aggregates_are_refused_by_name_never_a_panic_or_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let log = std::fs::read(root().join("scenarios/logs/example-requests.csv")).unwrap();
    let csv = sweep(dir.path(), "requests.csv", &log, 1, |p| {
        vec!["fit".into(), s(p), "--name".into(), "x".into()]
    });
    // The same log as Parquet, written by the tool's own tables (`simulate --out`): the
    // series table is a Parquet file of the tool's own making.
    let out = dir.path().join("tables");
    let (code, _, err) = common::idemcalc(&[
        "simulate",
        "--retention",
        "1h",
        "--duration",
        "2h",
        "--target",
        "2000",
        "--quiet",
        "--out",
        &s(&out),
    ]);
    assert_eq!(code, Some(0), "{err}");
    let parquet = std::fs::read_dir(&out)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|e| e == "parquet"))
        .expect("simulate --out writes Parquet tables");
    let parquet = std::fs::read(parquet).unwrap();
    let pq = sweep(dir.path(), "requests.parquet", &parquet, 2, |p| {
        vec!["fit".into(), s(p), "--name".into(), "x".into()]
    });
    let agg = sweep(dir.path(), "result.csv", &log, 3, |p| {
        vec!["fit".into(), "--aggregates".into(), s(p)]
    });
    eprintln!("exit codes 0/1/2: CSV log {csv:?}, Parquet {pq:?}, aggregates {agg:?}");
}

#[test]
fn corrupted_retry_cdfs_and_scenarios_are_refused_by_name_never_a_panic_or_a_hang() {
    let dir = tempfile::tempdir().unwrap();
    let cdf = b"10s,0.59\n1m,0.84\n10m,0.9\n1h,0.92\n6h,0.95\n1d,0.97\n30d,1\n";
    let cdfs = sweep(dir.path(), "cdf.csv", cdf, 4, |p| {
        vec![
            "simulate".into(),
            "--dry-run".into(),
            "--retry-cdf".into(),
            s(p),
        ]
    });
    let scenario = std::fs::read(root().join("scenarios/baseline-400.toml")).unwrap();
    let scenarios = sweep(dir.path(), "scenario.toml", &scenario, 5, |p| {
        vec![
            "simulate".into(),
            "--dry-run".into(),
            "--scenario".into(),
            s(p),
        ]
    });
    eprintln!("exit codes 0/1/2: retry CDF {cdfs:?}, scenario {scenarios:?}");
}
