//! Sweeps in scripted timelines: the seed's last transition, "Purged: row deleted; a repeat
//! after this is treated as brand new", against hand timings.
//!
//! Every script sends at 0 s with 0.2 s of network each way and 0.3 s of processing: the key
//! is claimed at 0.2 s, the carrier called at 0.5 s and answers at 1.0 s (its latency 0.5 s),
//! and txn 2 commits 0.5 s later, at 1.5 s: the record expires at 1.5 s + 24 h.

use std::process::Command;

const HEAD: &str = r#"
name = "purge"
description = "A completed key, a sweep, a repeat."
[engine]
retention = "24h"
[carrier]
latency = "500ms"
window = "24h"
[timeline]
network = "0.2s"
processing = "0.3s"
body = { order_id = 918273, parcel_no = 1, label_version = 1, weight_g = 1450, service = "ground" }
"#;

fn run(script: &str) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("purge.toml");
    std::fs::write(&path, format!("{HEAD}{script}")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(["scenario", path.to_str().unwrap(), "--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The last response's status and whether it was a replay.
fn last(v: &serde_json::Value) -> (u64, bool) {
    let r = v["responses"].as_array().unwrap().last().unwrap().clone();
    (
        r["status"].as_u64().unwrap(),
        r["replayed"].as_bool().unwrap(),
    )
}

fn purged(v: &serde_json::Value) -> usize {
    v["sweeps"][0]["purged"].as_array().unwrap().len()
}

const FIRST: &str = r#"
[[timeline.request]]
lane = "Attempt 1"
sent = "0s"
carrier_latency = "500ms"
finish = "500ms"
"#;

/// Completed at 1.5 s, so it expires at 24 h 1.5 s: a sweep at 24 h leaves it, and the retry
/// arriving at 24 h 1.2 s is replayed (the peers' behaviour: a key is kept for its whole
/// retention counted from completion).
#[test]
fn a_key_swept_before_its_expiry_is_still_replayed() {
    let v = run(&format!(
        r#"{FIRST}
[[timeline.sweep]]
at = "24h"

[[timeline.request]]
lane = "Retry"
sent = "86401s"
"#
    ));
    assert_eq!(purged(&v), 0);
    assert_eq!(last(&v), (201, true));
    assert!(
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["kind"] == "sweep" && e["lane"] == "Sweeper")
    );
}

/// Completed at 12 h (sent at 12 h − 1.5 s), it expires at 36 h: a sweep at 24 h 1 m keeps it.
#[test]
fn a_key_completed_at_12h_survives_a_sweep_at_24h_1m() {
    let v = run(r#"
[[timeline.request]]
lane = "Attempt 1"
sent = "43198.5s"
carrier_latency = "500ms"
finish = "500ms"

[[timeline.sweep]]
at = "86460s"
batch = 1

[[timeline.request]]
lane = "Retry"
sent = "86520s"
"#);
    assert_eq!(purged(&v), 0);
    assert_eq!(last(&v), (201, true));
}

/// Swept at 25 h, past its expiry at 24 h 1.5 s: the record is gone and the same key runs as
/// new, a second label bought (the carrier's 24 h window has passed too).
#[test]
fn after_a_sweep_past_its_expiry_the_key_runs_as_new() {
    let v = run(&format!(
        r#"{FIRST}
[[timeline.sweep]]
at = "25h"

[[timeline.request]]
lane = "Retry"
sent = "90001s"
carrier_latency = "500ms"
"#
    ));
    assert_eq!(purged(&v), 1);
    assert_eq!(last(&v), (201, false));
    assert_eq!(v["carrier_purchases"].as_array().unwrap().len(), 2);
}

#[test]
fn a_sweep_batch_of_zero_is_refused_naming_the_field() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.toml");
    std::fs::write(
        &path,
        format!("{HEAD}{FIRST}\n[[timeline.sweep]]\nat = \"1h\"\nbatch = 0\n"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(["scenario", path.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("timeline.sweep[0].batch"), "{err}");
}
