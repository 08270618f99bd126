//! The simulator's mechanics on small, fast runs: the correct design keeps its invariants, each
//! failure mode shows its impact and its detection signal, a seed fixes the output, and the
//! sampled estimator agrees with a full-fidelity replay.

use idemcalc::carrier::{Carrier, CarrierConfig, Latency};
use idemcalc::clock::VirtualClock;
use idemcalc::engine::{
    CarrierKey, DiePoint, Engine, EngineConfig, KeyScope, OrderSpace, Outcome, RecordPlacement,
    Request,
};
use idemcalc::model::{self, ModelParams};
use idemcalc::run::{self, JobPlan, Plan};
use idemcalc::scenario::Scenario;
use idemcalc::settings::Settings;
use idemcalc::sim::replay::{self, Figure, KeyPolicy, Progress, SimConfig, SimReport};
use idemcalc::store::{
    SqliteOptions, SqliteStore, Store, StoreOptions, Stores, Sweeper, Synchronous,
};
use idemcalc::traffic::{Arrivals, RetryDelay};
use std::path::Path;
use std::sync::Arc;
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

/// `cfg` run the way `idemcalc simulate` runs it, through `run::simulate`: the simulator
/// measures only (its figures' `analytic` is NaN), and the run puts its plan's model beside the
/// measurements. The plan's model is asked at the very inputs the simulation runs with.
fn run_with_model(cfg: &SimConfig, replicates: u32) -> SimReport {
    let mut settings = Settings::default();
    settings.traffic.replicates = replicates;
    let retry = RetryDelay::seed();
    let params = ModelParams {
        rate_per_s: cfg.rate_per_s,
        retention_s: cfg.retention_s(),
        timeout_fraction: cfg.expected_timeout_fraction(),
        done_fraction: cfg.done_fraction,
        label_price_usd: cfg.carrier.label_price_cents as f64 / 100.0,
        carrier_window_s: cfg.carrier.window_ms as f64 / 1000.0,
        bytes_per_record: cfg.engine.payload.record_bytes(),
        ..ModelParams::default()
    };
    let plan = Plan {
        settings,
        arrivals: Arrivals::constant(cfg.rate_per_s).unwrap(),
        jobs: vec![JobPlan {
            config: cfg.clone(),
            params,
            model: model::estimate(&params, &retry),
            sweeper: Sweeper::Delete,
        }],
        retry,
    };
    let stores = Stores::scratch(StoreOptions {
        purpose: "test",
        synchronous: Synchronous::Off,
        ..StoreOptions::default()
    })
    .unwrap();
    let stop = AtomicBool::new(false);
    let progress = Progress {
        tick: &|_| {},
        interrupted: &stop,
    };
    let mut reports = run::simulate(&plan, &stores, &progress).unwrap();
    stores.finish().unwrap();
    reports.remove(0)
}

/// Whether the model's value (filled by `run`: see [`run_with_model`]) is in the interval.
fn within(f: &Figure, slack: f64) -> bool {
    f.analytic >= f.ci95_low * (1.0 - slack) && f.analytic <= f.ci95_high * (1.0 + slack)
}

#[test]
fn correct_design_keeps_its_invariants_and_agrees_with_the_model() {
    let r = run_with_model(&small(), 1);
    assert!(r.invariants.hold, "{:?}", r.invariants);
    assert!(r.replayed_intents > 1000);
    // The model's rate × retention, plus up to one sweep period that an expired record waits
    // for the sweeper (60 s of 3,600 s): the store really holds that much more.
    assert!(
        within(&r.store_records_steady, 0.02),
        "{:?}",
        r.store_records_steady
    );
    // Seed 1 draws late arrivals 2.5 sd below the model here (1,852, 1,681 – 2,023, against
    // 2,074); six other seeds at `simulate --retention 1h --duration 3h` read 2,029 – 2,144.
    assert!(
        within(&r.late_after_purge_per_day, 0.05),
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

/// One source of truth for the model column: the simulator measures only, and `run` puts the
/// plan's one model evaluation beside every figure it has one for (`null` in JSON otherwise).
#[test]
fn the_simulator_measures_only_and_the_run_adds_the_model() {
    let cfg = SimConfig {
        arrival_s: Some(2.0 * 3600.0),
        ..small()
    };
    let figures = |r: &SimReport| {
        [
            r.bytes_per_record_measured,
            r.store_records_steady,
            r.store_bytes_steady,
            r.timed_out_per_day,
            r.late_after_purge_per_day,
            r.duplicate_labels_per_day,
            r.duplicate_cost_per_day,
            r.unlabelled_per_day,
            r.takeovers_per_day,
        ]
    };
    let measured = run(&cfg, 1);
    let with_model = run_with_model(&cfg, 1);
    for (m, w) in figures(&measured).iter().zip(figures(&with_model).iter()) {
        assert!(m.analytic.is_nan(), "{m:?}");
        assert!(w.analytic.is_finite(), "{w:?}");
    }
    // Issue 34, item 11: the model has no figure for requests carrying a purged key (it
    // counts late arrivals, not every request that carries one), so it shows none, not 0.
    assert!(with_model.purged_key_requests_per_day.analytic.is_nan());
    // The same seed measures the same traffic either way; only the model column is added.
    assert_eq!(
        measured.store_records_steady.estimate,
        with_model.store_records_steady.estimate
    );
    assert_eq!(
        measured.late_after_purge_per_day.estimate,
        with_model.late_after_purge_per_day.estimate
    );
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
    let r = run_with_model(&cfg, 1);
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
    // Two tenants that number their own orders: their order ids collide.
    let mut cfg = SimConfig {
        callers: 2,
        ..small()
    };
    cfg.engine.order_space = OrderSpace::PerTenant;
    let per_caller = run(&cfg, 1);
    assert_eq!(per_caller.detection.cross_caller_replays_per_day, 0.0);
    cfg.engine.key_scope = KeyScope::Global;
    let global = run(&cfg, 1);
    assert!(global.detection.cross_caller_replays_per_day > 1_000_000.0);
    // Callers of one order space (the seed's) never send one key for two parcels.
    cfg.engine.order_space = OrderSpace::Shared;
    let shared = run(&cfg, 1);
    assert_eq!(shared.detection.cross_caller_replays_per_day, 0.0);
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
    // Over half the calls outlast the deadline with this carrier: no need to boost them.
    let mut cfg = SimConfig {
        timeout_boost: Some(1.0),
        ..small()
    };
    cfg.engine.lease_ms = 1_000;
    cfg.carrier.latency = idemcalc::carrier::Latency::LogNormal {
        median_ms: 300.0,
        p99_ms: 3_000.0,
    };
    let r = run(&cfg, 1);
    assert!(r.detection.takeovers_while_running_per_day > 0.0);
    // The derived carrier key still prevents a second label: every duplicate left is a late
    // retry (over half the calls outlast the deadline with this carrier, so there are many).
    assert!(
        r.duplicate_labels_per_day.ci95_low <= r.late_after_purge_per_day.ci95_high,
        "{:?}",
        r.duplicate_labels_per_day
    );
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
            "rate_per_s",
        ),
        (
            SimConfig {
                done_fraction: 1.5,
                ..small()
            },
            "done_fraction",
        ),
        (
            SimConfig {
                sample: Some(0.0),
                ..small()
            },
            "sample",
        ),
        (
            SimConfig {
                sample: Some(1.5),
                ..small()
            },
            "sample",
        ),
        (
            SimConfig {
                arrival_s: Some(0.0),
                ..small()
            },
            "arrival_s",
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

fn contains(f: &Figure, v: f64) -> bool {
    f.ci95_low <= v && v <= f.ci95_high
}

fn per_day_of(r: &SimReport, status: u16) -> f64 {
    r.outcomes
        .iter()
        .filter(|o| o.status == status)
        .map(|o| o.per_day)
        .sum()
}

/// Issue 11, defect 1: arrival times were truncated to whole milliseconds, each gap drawn from
/// the truncated instant, so gaps under a millisecond collapsed and 400/s replayed as 492/s.
#[test]
fn arrival_times_keep_sub_millisecond_gaps() {
    let mut cfg = SimConfig {
        rate_per_s: 400.0,
        arrival_s: Some(60.0),
        sample: Some(1.0),
        series_points: 10,
        ..SimConfig::default()
    };
    cfg.engine.retention_ms = 60_000;
    let r = run(&cfg, 1);
    // 24,000 expected, Poisson sd 155: ±4 sd. The defect gave about 29,500.
    let n = r.replayed_intents as f64;
    assert!((n - 24_000.0).abs() < 620.0, "{n}");
}

/// Issue 11, defect 2: with the label and the record in separate stores, a crash between the
/// label's commit and the key's completion leaves a label with no completed key, and the
/// reconciliation must see it; in one transaction the crash rolls both back.
#[test]
fn separate_store_crash_leaves_labels_without_a_completed_key() {
    let mut cfg = SimConfig {
        crash_fraction: 0.01,
        crash_point: DiePoint::InsideTxn2,
        ..small()
    };
    let same = run(&cfg, 1);
    cfg.engine.record_placement = RecordPlacement::SeparateStore;
    let separate = run(&cfg, 1);
    assert_eq!(same.detection.labels_without_completed_key_per_day, 0.0);
    // Hand derivation: every attempt that reaches txn 2 has bought a label, and 1 % of them
    // die there: 34.56 M × 0.01 = 345,600 a day (the retries that follow add 1 % of 1 %).
    let got = separate.detection.labels_without_completed_key_per_day;
    assert!((got - 345_600.0).abs() < 0.25 * 345_600.0, "{got}");
    assert_eq!(separate.detection.completed_keys_without_label_per_day, 0.0);
    assert!(separate.invariants.hold && same.invariants.hold);
}

/// Issue 11, defect 3: callers were drawn at random while consecutive sampled arrivals shared
/// order ids, so one tenant's distinct intents collided, and two tenants' equal order numbers
/// met in the labels' unique key: 8 M replays and invoice lines without a label a day.
#[test]
fn tenants_keep_their_callers_and_their_own_parcels() {
    let one = run(&small(), 1);
    let cfg = SimConfig {
        callers: 2,
        ..small()
    };
    let two = run_with_model(&cfg, 1);
    let replays = |r: &SimReport| {
        r.outcomes
            .iter()
            .filter(|o| o.outcome == Outcome::Replayed)
            .map(|o| o.per_day)
            .sum::<f64>()
    };
    // Replays are only the retries of timed-out calls (≈ 34,560 × 0.61 a day), with one tenant
    // or two.
    assert!(replays(&two) < 50_000.0, "{}", replays(&two));
    assert!(
        two.detection.invoice_lines_without_label_per_day
            <= 2.0 * one.detection.invoice_lines_without_label_per_day + 500.0,
        "{:?}",
        two.detection
    );
    assert_eq!(two.detection.cross_caller_replays_per_day, 0.0);
    assert!(
        within(&two.store_records_steady, 0.02),
        "{:?}",
        two.store_records_steady
    );
    // 409s do not depend on how the traffic is sampled.
    let other_sample = run(
        &SimConfig {
            sample: Some(0.003),
            ..cfg
        },
        1,
    );
    let (a, b) = (per_day_of(&two, 409), per_day_of(&other_sample, 409));
    assert!(a < 20_000.0 && b < 20_000.0, "409s: {a} vs {b}");
    assert!(two.invariants.hold, "{:?}", two.invariants);
}

/// Issue 11, defect 4: timeouts were a fixed input fraction, so a slow carrier changed nothing.
/// Now every call carries the client's 250 ms deadline.
#[test]
fn a_slower_carrier_raises_timeouts_retries_409s_and_takeovers() {
    // The seed's latencies with the calibrated network loss land on the seed's 0.1 %.
    let d = SimConfig::default();
    assert!((d.expected_timeout_fraction() - 0.001).abs() < 1e-12);
    assert!(
        (d.network_loss() - 0.000_978).abs() < 0.000_002,
        "{}",
        d.network_loss()
    );
    let base = run(&small(), 1);
    let mut cfg = SimConfig {
        timeout_boost: Some(1.0),
        ..small()
    };
    cfg.carrier.latency = Latency::LogNormal {
        median_ms: 300.0,
        p99_ms: 30_000.0,
    };
    let slow = run(&cfg, 1);
    // Hand derivation: σ = ln(100)/2.326 = 1.98, P(latency > 248 ms) = Φ(ln(300/248.5)/1.98)
    // = Φ(0.095) = 0.538, so 0.001 + 0.999 × 0.538 of 34.56 M calls time out.
    let expected = 34_560_000.0 * cfg.expected_timeout_fraction();
    assert!(
        (slow.timed_out_per_day.estimate - expected).abs() < 0.1 * expected,
        "{:?} vs {expected}",
        slow.timed_out_per_day
    );
    assert!(slow.timed_out_per_day.estimate > 100.0 * base.timed_out_per_day.estimate);
    assert!(slow.retries_per_day > 100.0 * base.retries_per_day);
    assert!(per_day_of(&slow, 409) > 100.0 * (per_day_of(&base, 409) + 1.0));
    // Calls over the 20 s carrier timeout (1.7 %) hand their lease back: the retry takes over.
    assert!(
        slow.detection.takeovers_per_day > 100_000.0,
        "{:?}",
        slow.detection
    );
    assert_eq!(base.detection.takeovers_per_day, 0.0);
}

/// Issue 11, defect 5: "requests carrying a purged key" counted Bloom-filter false positives,
/// each weighted by 1/sample.
#[test]
fn purged_key_requests_count_only_really_purged_keys() {
    let mut cfg = small();
    cfg.carrier.window_ms = 3_600_000;
    let r = run(&cfg, 1);
    // Hand derivation: the retries later than 1 h (6 % of 34,560) of calls that had run (60 %:
    // the reply lost, or too slow) find their record purged: 34,560 × 0.6 × 0.06 = 1,244.
    let got = r.detection.purged_key_requests_per_day;
    assert!((got - 1_244.0).abs() < 0.2 * 1_244.0, "{got}");
    assert!(contains(&r.purged_key_requests_per_day, got));
    // Every claim of a purged key is a late arrival; the Bloom filter can only over-count.
    assert!(got <= r.late_after_purge_per_day.estimate);
    assert!(r.detection.purged_key_bloom_flags_per_day >= got);
}

/// Issue 11, defect 6: late arrivals counted only the first retry of each timed-out call; a
/// crashed attempt's later retries reached the engine after the purge uncounted.
#[test]
fn late_arrivals_count_every_retry_after_the_purge() {
    let cfg = SimConfig {
        crash_fraction: 0.05,
        crash_point: DiePoint::AfterCarrier,
        sample: Some(0.005),
        timeout_boost: Some(10.0),
        ..small()
    };
    let r = run(&cfg, 1);
    // Hand derivation: 5 % of 34.56 M attempts die, their callers retry after a delay from the
    // late-retry distribution, 6 % of them after the 1 h purge: 103,680 a day, besides the
    // 34,560 × 0.06 = 2,074 of timed-out calls.
    let late = &r.late_after_purge_per_day;
    assert!(
        contains(late, 105_754.0) || (late.estimate - 105_754.0).abs() < 0.35 * 105_754.0,
        "{late:?}"
    );
    assert!(late.estimate >= r.detection.purged_key_requests_per_day);
}

/// Issue 11, defect 7: zero events printed as a certain [0, 0], a zero-width bytes-per-record
/// interval, and "records 0 (0–0)" with no warning for a run shorter than the retention.
#[test]
fn degenerate_intervals_are_never_certain() {
    let mut cfg = SimConfig {
        arrival_s: Some(2.0 * 3600.0),
        ..small()
    };
    cfg.engine.retention_ms = 30 * 86_400_000;
    cfg.carrier.window_ms = 30 * 86_400_000;
    let r = run(&cfg, 1);
    for f in [&r.late_after_purge_per_day, &r.duplicate_labels_per_day] {
        assert_eq!(f.estimate, 0.0);
        assert!(f.ci95_high > 0.0, "a one-sided bound, not [0, 0]: {f:?}");
    }
    assert!(
        r.notes.iter().any(|n| n.contains("no steady window")),
        "{:?}",
        r.notes
    );
    assert!(
        r.notes.iter().any(|n| n.contains("late arrivals")),
        "{:?}",
        r.notes
    );
    assert!(r.store_records_steady.estimate > 0.0);
    let b = &r.bytes_per_record_measured;
    assert!(!(b.ci95_low == b.ci95_high), "{b:?}");
    // The records model includes the sweeper's mean lag: half a 60 s period on 1 h, +0.8 %.
    let steady = run_with_model(&small(), 1);
    assert!(
        (steady.store_records_steady.analytic / 1_440_000.0 - 1.0 - 30.0 / 3600.0).abs() < 1e-9
    );
}

/// The variance of a time average of an M/G/∞ count, against the closed form for a
/// continuous window W ≥ L: (L/W)(1 − L/(3W)).
#[test]
fn store_size_interval_uses_the_time_average_variance() {
    use idemcalc::sim::replay::time_average_variance_factor as g;
    assert_eq!(g(1, 1.0, 10.0), 1.0);
    assert!(
        (g(10, 20.0, 10.0) - 0.1).abs() < 1e-12,
        "independent points"
    );
    let (life, window, n) = (3600.0, 6.0 * 3600.0, 20_000u64);
    let exact = life / window * (1.0 - life / (3.0 * window));
    assert!((g(n, window / n as f64, life) / exact - 1.0).abs() < 0.01);
}

/// Issue 11, defect 8: caller `acme` with key `eu:order-1` and caller `acme:eu` with key
/// `order-1` made one carrier key, so the carrier replayed the first caller's label for the
/// second caller's parcel and txn 2 failed on the label's primary key.
#[test]
fn derived_carrier_key_is_unambiguous_across_callers() {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("k.sqlite"), &SqliteOptions::default()).unwrap();
    let carrier = Arc::new(Carrier::new(CarrierConfig {
        latency: Latency::Fixed { ms: 50 },
        ..CarrierConfig::default()
    }));
    // Two tenants, each with its own order 918273: two parcels.
    let mut engine = Engine::new(
        Box::new(store),
        carrier.clone(),
        Arc::new(VirtualClock::new()),
        EngineConfig {
            order_space: OrderSpace::PerTenant,
            ..EngineConfig::default()
        },
    );
    let body =
        r#"{"order_id":918273,"parcel_no":1,"label_version":1,"weight_g":1450,"service":"ground"}"#;
    let a = engine
        .handle(&Request::create_label("acme", Some("eu:order-1"), body))
        .unwrap();
    let b = engine
        .handle(&Request::create_label("acme:eu", Some("order-1"), body))
        .unwrap();
    assert_eq!((a.status, a.outcome), (201, Outcome::Created));
    assert_eq!((b.status, b.outcome), (201, Outcome::Created));
    assert_ne!(a.body, b.body);
    assert_eq!(carrier.stats().purchases, 2);
    assert_eq!(carrier.stats().replays, 0);
    // A 255-byte key, the most the label service takes, still reaches the carrier.
    let long = "k".repeat(255);
    let c = engine
        .handle(&Request::create_label(
            "acme",
            Some(&long),
            body.replace("918273", "918274").as_str(),
        ))
        .unwrap();
    assert_eq!((c.status, c.outcome), (201, Outcome::Created), "{}", c.body);
    assert!(engine.store().invariants().unwrap().integrity_ok);
}

/// The ground truth as a standing check: sampled runs of a small world across many seeds
/// against full-fidelity replays of the same world. Each sampled 95 % interval should cover
/// the full-fidelity mean about 95 % of the time; `examples/coverage.rs` is the larger version.
#[test]
fn sampled_intervals_cover_the_full_fidelity_truth() {
    let world = SimConfig::coverage_world();
    let full: Vec<SimReport> = (0..8u64)
        .map(|i| {
            run(
                &SimConfig {
                    seed: 1_000 + i,
                    ..world.clone()
                },
                1,
            )
        })
        .collect();
    // Full fidelity replays the rate asked for: 7,200 intents a run, Poisson sd 85.
    let per_run = full.iter().map(|r| r.replayed_intents as f64).sum::<f64>() / 8.0;
    assert!(
        (per_run - 7_200.0).abs() < 4.0 * 85.0 / 8f64.sqrt(),
        "{per_run}"
    );
    type Pick = fn(&SimReport) -> Figure;
    let picks: [(&str, Pick); 5] = [
        ("records", |r| r.store_records_steady),
        ("late", |r| r.late_after_purge_per_day),
        ("duplicates", |r| r.duplicate_labels_per_day),
        ("purged-key", |r| r.purged_key_requests_per_day),
        ("takeovers", |r| r.takeovers_per_day),
    ];
    // The truth is the mean of the full-fidelity runs, itself known only to its standard
    // error; a sampled interval covers it when the two agree within their combined 95 %.
    let truth: Vec<(f64, f64)> = picks
        .iter()
        .map(|(_, pick)| {
            let v: Vec<f64> = full.iter().map(|r| pick(r).estimate).collect();
            let n = v.len() as f64;
            let mean = v.iter().sum::<f64>() / n;
            let se = (v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1.0) / n).sqrt();
            (mean, se)
        })
        .collect();
    let seeds = 40u64;
    let mut covered = [0u32; 5];
    for seed in 0..seeds {
        let s = run(
            &SimConfig {
                sample: Some(0.25),
                timeout_boost: Some(4.0),
                seed,
                ..world.clone()
            },
            1,
        );
        for (i, (_, pick)) in picks.iter().enumerate() {
            let f = pick(&s);
            let (t, se) = truth[i];
            let half = if f.estimate >= t {
                f.estimate - f.ci95_low
            } else {
                f.ci95_high - f.estimate
            };
            let allowed = (half.powi(2) + (1.959_963_985 * se).powi(2)).sqrt();
            covered[i] += u32::from((f.estimate - t).abs() <= allowed);
        }
    }
    // Binomial(40, 0.95): 38 on average; 33 or fewer happens with probability below 1 %.
    for (i, (name, _)) in picks.iter().enumerate() {
        assert!(
            covered[i] >= 34,
            "{name}: {} of {seeds} cover {:?}",
            covered[i],
            truth[i]
        );
    }
    // Intervals that are right miss now and then; ones that never miss are too wide.
    let total: u32 = covered.iter().sum();
    assert!(total < 5 * seeds as u32, "every interval covered: too wide");
}

/// A hand derivation rounds its inputs (6 %): it agrees when it falls in the interval
/// widened by 5 %.
fn within_hand(f: &Figure, hand: f64) -> bool {
    f.ci95_low * 0.95 <= hand && hand <= f.ci95_high * 1.05
}

/// A failure scenario, shortened to run in the suite.
fn scenario_run(file: &str, target: f64) -> SimReport {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(file);
    let s = Scenario::load(&path).unwrap();
    let mut cfg = s.sim_configs().remove(0);
    cfg.target_ordinary = target;
    run(&cfg, 1)
}

/// Each failure switch moves the figures it is about by what a hand derivation gives; the
/// derivations are written out in each scenario's description.
#[test]
fn failure_scenarios_agree_with_their_hand_derivations() {
    // Share of timed-out calls that had run: --done-fraction, 60 %. The losses' split is set so
    // that lost replies (0.591 of the network's 0.0978 %) and calls too slow for the deadline
    // (0.0022 %, all run) make it: (0.000978 × 0.591 + 0.000022) / 0.001 = 0.6.
    let ran = 0.6;
    let timed_out = 34_560.0;
    let seed = RetryDelay::seed();

    let r = scenario_run("failure-new-key-per-attempt.toml", 3_000.0);
    let hand = timed_out * ran; // 20,736: every timed-out call that ran buys a second label
    assert!(
        within_hand(&r.duplicate_labels_per_day, hand),
        "{:?}",
        r.duplicate_labels_per_day
    );

    let r = scenario_run("failure-short-retention.toml", 3_000.0);
    let hand = timed_out * ran * seed.survival(3600.0); // 1,244
    assert!(
        within_hand(&r.duplicate_labels_per_day, hand),
        "{:?}",
        r.duplicate_labels_per_day
    );
    let hand = timed_out * seed.survival(3600.0); // 2,074
    assert!(
        within_hand(&r.late_after_purge_per_day, hand),
        "{:?}",
        r.late_after_purge_per_day
    );

    let r = scenario_run("failure-global-keys.toml", 3_000.0);
    // Two tenants number orders alike: every order number is sent twice, the second replays.
    let hand = 34_560_000.0 / 2.0;
    let got = r.detection.cross_caller_replays_per_day;
    assert!((got - hand).abs() < 0.1 * hand, "{got}");

    let r = scenario_run("failure-separate-store.toml", 3_000.0);
    let hand = 34_560_000.0 * 0.01; // every attempt reaching txn 2 bought a label; 1 % die there
    let got = r.detection.labels_without_completed_key_per_day;
    assert!((got - hand).abs() < 0.25 * hand, "{got}");

    // Hangs strike ordinary calls, replayed at the ordinary sample: more of them, for fewer
    // and lighter-weighted events.
    let r = scenario_run("failure-carrier-without-key.toml", 12_000.0);
    // 1 % of carrier calls hang after buying; each is retried and, with no key, bought again.
    let hand = 34_560_000.0 * 0.01;
    assert!(
        within_hand(&r.duplicate_labels_per_day, hand),
        "{:?}",
        r.duplicate_labels_per_day
    );

    let r = scenario_run("failure-short-lease.toml", 3_000.0);
    let hand = short_lease_takeovers_per_day(&seed);
    let got = r.detection.takeovers_while_running_per_day;
    assert!(got > hand / 2.0 && got < hand * 2.0, "{got} vs {hand}");
    assert!(r.invariants.hold);
}

/// Takeovers while the owner runs, with a 1 s lease before a carrier of median 300 ms and p99
/// 3 s: a call slower than the deadline (248 ms) is retried after a delay d from the late-retry
/// distribution; if the call is still running after the lease (1 s) when a retry comes (the
/// retry at d, or just after the lease when d came early and got a 409), it takes over. So
/// P ≈ ∫ P(L > max(d, 1 s)) over d, each intent weighing 34.56 M a day.
fn short_lease_takeovers_per_day(delay: &RetryDelay) -> f64 {
    let sigma = (3_000.0f64 / 300.0).ln() / 2.326_347_874;
    let above = |ms: f64| {
        let z = (ms / 300.0).ln() / sigma;
        0.5 * statrs::function::erf::erfc(z / std::f64::consts::SQRT_2)
    };
    let steps = 4_000;
    let mut p = 0.0;
    for i in 0..steps {
        let (u0, u1) = (i as f64 / steps as f64, (i + 1) as f64 / steps as f64);
        let d_ms = delay.quantile((u0 + u1) / 2.0) * 1000.0;
        p += (u1 - u0) * above(d_ms.max(1_000.0));
    }
    34_560_000.0 * p
}

/// Issue 34 item 6: at the seed's own scale the intervals cover about as often as they say.
/// Seeds 1–12 (fixed, so the count is too): timed-out calls a day at the defaults against the
/// hand 400/s × 86,400 s × 0.1 % = 34,560, and duplicate labels of the separate-store failure
/// against its hand derivation, each covered by at least 10 of 12 intervals (at a true 95 %,
/// 10 or more happen 98 % of the time). The 40-seed counts are in docs/simulate.md.
#[test]
fn intervals_cover_the_hand_derivations_at_the_seeds_scale() {
    let seed_table = RetryDelay::seed();
    let day = 86_400.0;
    // Crashed intents (1 % of 34.56 M) and the baseline's timed-out calls that ran (60 % of
    // 34,560) buy a second label when retried after the carrier's 24 h window.
    let separate_hand = (34_560_000.0 * 0.01 + 34_560.0 * 0.6) * seed_table.survival(day);
    let separate = Scenario::load(
        &Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/failure-separate-store.toml"),
    )
    .unwrap();
    let (mut timed_out, mut duplicates) = (0, 0);
    for seed in 1..=12u64 {
        let mut cfg = Settings::default().sim_config(day);
        cfg.target_ordinary = 10_000.0;
        cfg.seed = seed;
        let r = run(&cfg, 1);
        timed_out += u32::from(r.timed_out_per_day.interval().covers(34_560.0));
        let mut cfg = separate.sim_configs().remove(0);
        cfg.target_ordinary = 5_000.0;
        cfg.seed = seed;
        let r = run(&cfg, 1);
        duplicates += u32::from(r.duplicate_labels_per_day.interval().covers(separate_hand));
    }
    assert!(timed_out >= 10, "timed-out calls: {timed_out} of 12 cover");
    assert!(
        duplicates >= 10,
        "separate store: {duplicates} of 12 cover {separate_hand:.0}"
    );
}

/// `small()` with the decision's candidate retentions set, as a run's plan sets them.
fn with_candidates(mut cfg: SimConfig, retentions_s: &[f64]) -> SimConfig {
    cfg.candidates = retentions_s
        .iter()
        .map(|&r| replay::Candidate {
            retention_ms: (r * 1000.0) as i64,
            sweeper: Sweeper::Delete,
        })
        .collect();
    cfg
}

fn overlap(a: &Figure, b: &Figure) -> bool {
    a.ci95_low <= b.ci95_high && b.ci95_low <= a.ci95_high
}

/// Issue 51, item 1: every candidate retention is counted from the replay's log of requests.
/// At the retention the replay ran, the log's count is the replay's own (the same requests
/// through the same two windows); at another, it agrees with a replay run there.
#[test]
fn each_candidate_counted_from_the_log_agrees_with_a_replay_at_that_retention() {
    let candidates = [3_600.0, 86_400.0 + 7_200.0];
    let mut at_1h = with_candidates(small(), &candidates);
    at_1h.crash_fraction = 0.01;
    let mut at_26h = at_1h.clone();
    at_26h.engine.retention_ms = (candidates[1] * 1000.0) as i64;
    let short = run(&at_1h, 2);
    let long = run(&at_26h, 2);
    for (r, own) in [(&short, 0), (&long, 1)] {
        let c = &r.candidates[own];
        assert_eq!(c.retention_s, r.retention_s);
        // The same sample: the log reproduces the replay's counts up to the rare request the
        // two see differently (a counted call completing at once).
        let (a, b) = (
            c.duplicate_labels_per_day.estimate,
            r.duplicate_labels_per_day.estimate,
        );
        assert!(
            a > 0.0 && (a - b).abs() <= 0.02 * b,
            "{}: log {a}, replay {b}",
            r.retention
        );
        let (a, b) = (
            c.late_after_purge_per_day.estimate,
            r.late_after_purge_per_day.estimate,
        );
        assert!(
            (a - b).abs() <= 0.02 * b.max(1.0),
            "{}: late {a} vs {b}",
            r.retention
        );
        // The replay's store is a steady one only once a retention has passed within the
        // arrivals; the log's counts each record's whole life (Little's law) either way.
        if r.steady_window {
            assert!(
                overlap(&c.store_records, &r.store_records_steady),
                "{}: records {:?} vs {:?}",
                r.retention,
                c.store_records,
                r.store_records_steady
            );
        }
    }
    // Across replays: what the 1 h replay counts at 26 h, the 26 h replay measures.
    for j in 0..2 {
        let (a, b) = (&short.candidates[j], &long.candidates[j]);
        assert!(
            overlap(&a.duplicate_labels_per_day, &b.duplicate_labels_per_day),
            "{}: {:?} vs {:?}",
            a.retention,
            a.duplicate_labels_per_day,
            b.duplicate_labels_per_day
        );
        assert!(
            overlap(&a.store_records, &b.store_records),
            "{}: {:?} vs {:?}",
            a.retention,
            a.store_records,
            b.store_records
        );
    }
    // Crashes after the carrier call buy again at any retention once the carrier has
    // forgotten: the 26 h retention does not make them go away.
    assert!(long.candidates[1].duplicate_labels_per_day.estimate > 0.0);
}
