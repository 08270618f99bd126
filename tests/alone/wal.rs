//! SQLite's write-ahead log under a continuous writer (issue 50, item 3).

use crate::common::{Server, TOKEN, client};
use std::process::{Command, Stdio};
use std::time::Duration;

/// SQLite's write-ahead log stays bounded while `serve` (under `load` at 1,500/s) and the bench
/// (flat out, both its sides) write for a minute on one machine. Before, the log never started
/// again under a continuous writer: 4.2 GB in 40 s beside a 33 MB database, growing ~100 MB/s.
/// The bound (docs/stores.md) is `store::checkpoint::WAL_LIMIT_BYTES` plus what a writer adds
/// while a background checkpoint holds the checkpoint lock; with four writers on two cores that
/// reached 50 MB for serve and 207 MB for a flat-out bench side, so serve's log is held under
/// 64 MiB and each bench side's under 256 MiB.
#[test]
fn sqlite_wal_stays_bounded_while_serve_and_bench_write_for_a_minute() {
    const SERVE_BOUND: u64 = 64 << 20;
    const BENCH_BOUND: u64 = 256 << 20;
    let dir = tempfile::tempdir().unwrap();
    let s = Server::on_sqlite(&dir.path().join("serve.sqlite"), &[]);
    let callers = dir.path().join("load-callers");
    std::fs::write(&callers, format!("{TOKEN} fulfilment\n")).unwrap();
    let bin = env!("CARGO_BIN_EXE_idemcalc");
    let mut load = Command::new(bin)
        .args(["load", &s.base, "--rate", "1500", "--duration", "60s"])
        .args(["--format", "json", "--quiet"])
        .arg("--callers")
        .arg(&callers)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let bench_store = dir.path().join("bench.sqlite");
    let mut bench = Command::new(bin)
        .args([
            "bench",
            "--duration",
            "30s",
            "--runs",
            "1",
            "--format",
            "json",
        ])
        .args(["--prefill", "0", "--mix", "first=100"])
        .arg("--store")
        .arg(format!("sqlite:{}", bench_store.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut largest: std::collections::BTreeMap<String, u64> = Default::default();
    loop {
        for entry in std::fs::read_dir(dir.path()).unwrap().flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.ends_with("-wal") {
                let len = entry.metadata().map_or(0, |m| m.len());
                let max = largest.entry(name).or_default();
                *max = (*max).max(len);
            }
        }
        let load_done = load.try_wait().unwrap().is_some();
        if load_done && bench.try_wait().unwrap().is_some() {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    load.wait().unwrap();
    bench.wait().unwrap();
    let purchases = s.metric(&client(), "idemcalc_carrier_purchases_total");
    assert!(
        purchases > 10_000.0,
        "serve wrote too little to test: {purchases}"
    );
    let err = s.stop_ok();
    assert!(
        largest.keys().any(|n| n.starts_with("serve"))
            && largest.keys().any(|n| n.starts_with("bench")),
        "every store had a WAL: {largest:?}"
    );
    for (name, max) in &largest {
        let bound = if name.starts_with("serve") {
            SERVE_BOUND
        } else {
            BENCH_BOUND
        };
        assert!(
            *max <= bound,
            "{name} reached {max} bytes: {largest:?}\n{err}"
        );
    }
    assert!(err.contains("the WAL at most"), "{err}");
}
