//! The simulator's mechanics on small, fast runs: the correct design keeps its invariants, each
//! failure mode shows its impact and its detection signal, a seed fixes the output, and the
//! sampled estimator agrees with a full-fidelity replay.

use idemcalc::engine::{CarrierKey, DiePoint, KeyScope};
use idemcalc::sim::replay::{self, Figure, KeyPolicy, Progress, SimConfig, SimReport};
use idemcalc::store::{SqliteOptions, SqliteStore, Store, Synchronous};
use idemcalc::traffic::{Arrivals, RetryDelay};
use std::sync::atomic::AtomicBool;

/// An hour's retention, three hours of arrivals, a few thousand replayed intents: seconds.
fn small() -> SimConfig {
    let mut c = SimConfig {
        rate_per_s: 400.0,
        arrival_s: Some(3.0 * 3600.0),
        sample: Some(0.0015),
        timeout_boost: Some(200.0),
        series_points: 60,
        ..SimConfig::default()
    };
    c.engine.retention_ms = 3_600_000;
    c
}

fn run(cfg: &SimConfig, replicates: u32) -> SimReport {
    let dir = tempfile::tempdir().unwrap();
    let open = |i: u32| -> Result<Box<dyn Store>, _> {
        let opts = SqliteOptions {
            synchronous: Synchronous::Off,
            ..SqliteOptions::default()
        };
        Ok(Box::new(SqliteStore::open(
            &dir.path().join(format!("r{i}.sqlite")),
            &opts,
        )?) as Box<dyn Store>)
    };
    let stop = AtomicBool::new(false);
    let progress = Progress {
        tick: &|_| {},
        interrupted: &stop,
    };
    let arrivals = Arrivals::constant(cfg.rate_per_s).unwrap();
    replay::simulate(
        cfg,
        &arrivals,
        &RetryDelay::seed(),
        replicates,
        "sqlite (test)",
        &open,
        &progress,
    )
    .unwrap()
}

fn within(f: &Figure, slack: f64) -> bool {
    f.analytic >= f.ci95_low * (1.0 - slack) && f.analytic <= f.ci95_high * (1.0 + slack)
}

#[test]
fn correct_design_keeps_its_invariants_and_agrees_with_the_model() {
    let r = run(&small(), 1);
    assert!(r.invariants.hold, "{:?}", r.invariants);
    assert!(r.replayed_intents > 1000);
    // The model's rate × retention, plus up to one sweep period that an expired record waits
    // for the sweeper (60 s of 3,600 s): the store really holds that much more.
    assert!(
        within(&r.store_records_steady, 0.02),
        "{:?}",
        r.store_records_steady
    );
    assert!(
        within(&r.late_after_purge_per_day, 0.0),
        "{:?}",
        r.late_after_purge_per_day
    );
    assert!(
        within(&r.duplicate_labels_per_day, 0.0),
        "{:?}",
        r.duplicate_labels_per_day
    );
    assert!(
        r.bytes_per_record_measured.estimate > 50.0
            && r.bytes_per_record_measured.estimate < 2000.0
    );
    // The only duplicates are late retries that missed both windows; nothing crosses callers.
    assert_eq!(r.detection.cross_caller_replays_per_day, 0.0);
    assert_eq!(r.detection.takeovers_while_running_per_day, 0.0);
    assert_eq!(r.unlabelled_per_day.estimate, 0.0);
    // The saw-tooth: the store grows for one retention, then holds.
    let peak = r
        .series
        .iter()
        .map(|p| p.keys_estimated)
        .fold(0.0, f64::max);
    assert!(r.series[0].keys_estimated < peak / 4.0);
}

#[test]
fn a_fixed_seed_gives_identical_output() {
    let cfg = SimConfig {
        arrival_s: Some(2.0 * 3600.0),
        ..small()
    };
    let strip = |r: SimReport| {
        let mut v = serde_json::to_value(r).unwrap();
        v.as_object_mut().unwrap().remove("wall_seconds");
        serde_json::to_string(&v).unwrap()
    };
    let a = strip(run(&cfg, 2));
    let b = strip(run(&cfg, 2));
    assert_eq!(a, b);
    let c = strip(run(&SimConfig { seed: 2, ..cfg }, 2));
    assert_ne!(a, c, "another seed draws other traffic");
}

#[test]
fn new_key_per_attempt_duplicates_every_lost_reply() {
    let r = run(
        &SimConfig {
            key_policy: KeyPolicy::NewPerAttempt,
            ..small()
        },
        1,
    );
    // Every timed-out call that had run buys a second label: 34,560 × 0.6 a day at 400/s.
    let d = &r.duplicate_labels_per_day;
    assert!(d.ci95_low < 20_736.0 && d.ci95_high > 20_736.0, "{d:?}");
    assert!(r.detection.parcels_with_two_labels_per_day > 10_000.0);
}

#[test]
fn retention_shorter_than_the_retry_horizon_shows_purged_keys() {
    let mut cfg = small();
    cfg.carrier.window_ms = 3_600_000;
    let r = run(&cfg, 1);
    assert!(
        r.duplicate_labels_per_day.estimate > 500.0,
        "{:?}",
        r.duplicate_labels_per_day
    );
    assert!(within(&r.duplicate_labels_per_day, 0.0));
    assert!(r.detection.purged_key_requests_per_day > 500.0);
}

#[test]
fn global_keys_hand_one_callers_response_to_another() {
    let mut cfg = SimConfig {
        callers: 2,
        ..small()
    };
    let per_caller = run(&cfg, 1);
    assert_eq!(per_caller.detection.cross_caller_replays_per_day, 0.0);
    cfg.engine.key_scope = KeyScope::Global;
    let global = run(&cfg, 1);
    assert!(global.detection.cross_caller_replays_per_day > 1_000_000.0);
}

#[test]
fn a_carrier_call_without_a_key_bills_twice_after_a_crash() {
    let mut cfg = SimConfig {
        crash_fraction: 0.002,
        crash_point: DiePoint::AfterCarrier,
        ..small()
    };
    let keyed = run(&cfg, 1);
    cfg.engine.carrier_key = CarrierKey::None;
    let unkeyed = run(&cfg, 1);
    assert!(
        unkeyed.duplicate_labels_per_day.estimate > 10.0 * keyed.duplicate_labels_per_day.estimate
    );
    assert!(unkeyed.detection.invoice_lines_without_label_per_day > 10_000.0);
    assert!(keyed.invariants.hold && unkeyed.invariants.hold);
}

#[test]
fn a_lease_shorter_than_the_carrier_lets_two_attempts_run() {
    let mut cfg = small();
    cfg.engine.lease_ms = 1_000;
    cfg.carrier.latency = idemcalc::carrier::Latency::LogNormal {
        median_ms: 300.0,
        p99_ms: 3_000.0,
    };
    let r = run(&cfg, 1);
    assert!(r.detection.takeovers_while_running_per_day > 0.0);
    // The derived carrier key still prevents a second label.
    assert!(within(&r.duplicate_labels_per_day, 0.0));
    assert!(r.invariants.hold);
}

#[test]
fn the_sampled_estimator_agrees_with_a_full_fidelity_replay() {
    // A small world where full fidelity is cheap: 4 creates/s, 2 % timeouts, 10 min retention.
    let mut full = SimConfig {
        rate_per_s: 2.0,
        arrival_s: Some(3.0 * 3600.0),
        sample: Some(1.0),
        timeout_fraction: 0.02,
        sweep_period_s: 10.0,
        series_points: 40,
        ..SimConfig::default()
    };
    full.engine.retention_ms = 600_000;
    full.carrier.window_ms = 600_000;
    let sampled = SimConfig {
        sample: Some(0.1),
        timeout_boost: Some(5.0),
        ..full.clone()
    };
    let (f, s) = (run(&full, 1), run(&sampled, 2));
    assert_eq!(f.sample_ordinary, 1.0);
    for (name, a, b) in [
        ("records", &f.store_records_steady, &s.store_records_steady),
        (
            "late",
            &f.late_after_purge_per_day,
            &s.late_after_purge_per_day,
        ),
        (
            "duplicates",
            &f.duplicate_labels_per_day,
            &s.duplicate_labels_per_day,
        ),
    ] {
        assert!(
            a.ci95_low <= b.ci95_high && b.ci95_low <= a.ci95_high,
            "{name}: full {a:?} sampled {b:?}"
        );
    }
}

#[test]
fn impossible_parameters_are_refused_before_any_work() {
    for (cfg, field) in [
        (
            SimConfig {
                rate_per_s: -1.0,
                ..small()
            },
            "--rate",
        ),
        (
            SimConfig {
                done_fraction: 1.5,
                ..small()
            },
            "--done-fraction",
        ),
        (
            SimConfig {
                sample: Some(0.0),
                ..small()
            },
            "--sample",
        ),
        (
            SimConfig {
                sample: Some(1.5),
                ..small()
            },
            "--sample",
        ),
        (
            SimConfig {
                arrival_s: Some(0.0),
                ..small()
            },
            "--duration",
        ),
    ] {
        let e = cfg.validate().unwrap_err().to_string();
        assert!(e.starts_with(field), "{e}");
    }
}

#[test]
fn the_cli_prints_the_json_fields_and_writes_the_tables() {
    let out = tempfile::tempdir().unwrap();
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args([
            "simulate",
            "--retention",
            "1h",
            "--duration",
            "2h",
            "--sample",
            "0.002",
            "--quiet",
        ])
        .args(["--format", "json", "--out"])
        .arg(out.path())
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    for k in [
        "rate",
        "retention_s",
        "simulated_seconds",
        "outcomes",
        "wall_seconds",
    ] {
        assert!(v.get(k).is_some(), "missing {k}");
    }
    for k in [
        "bytes_per_record_measured",
        "store_records_steady",
        "store_bytes_steady",
        "late_after_purge_per_day",
        "duplicate_labels_per_day",
    ] {
        for f in ["estimate", "ci95_low", "ci95_high", "analytic"] {
            assert!(v[k][f].is_number(), "{k}.{f}");
        }
    }
    for f in ["series", "outcomes", "figures"] {
        for ext in ["csv", "parquet"] {
            let p = out.path().join(format!("{f}.{ext}"));
            assert!(std::fs::metadata(&p).unwrap().len() > 0, "{}", p.display());
        }
    }
    let csv = std::fs::read_to_string(out.path().join("figures.csv")).unwrap();
    assert!(csv.starts_with("figure,estimate,ci95_low,ci95_high,analytic"));

    let bad = std::process::Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(["simulate", "--done-fraction", "2", "--quiet"])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--done-fraction"));
}
