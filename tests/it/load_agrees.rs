//! Issue 39: `load` and `simulate` agree. The seed's client is run twice on the same settings:
//! once from outside against `idemcalc serve` on a clock 3,600 times faster (a 1 h retention
//! purges in a second of wall time) with the carrier as a real hop that does not dedupe
//! (`idemcalc carrier --carrier-window 0s`), and once by `simulate` on its virtual clock
//! (`load --retention`, which runs it). Simulate's estimate of the labels bought twice falls
//! inside the 95 % interval of what the carrier's invoice shows for the run's orders, their
//! difference inside its own 95 % interval (`load::predict::agree`), and both intervals cover
//! the hand derivation below. (The count is not required to fall inside simulate's interval,
//! which is a few percent wide: a 40 s run cannot be that precise.)
//!
//! The clients never see those duplicates: the service's second line of defence,
//! `UNIQUE (order_id, parcel_no)` on `labels`, answers a second execution with the label it
//! already holds ("our records look right; the carrier bills twice"). So the invoice is where
//! they are counted, as the seed's detection column says.
//!
//! Hand derivation, beside both. A lost reply is a call the server finished; its late retry
//! comes back after the 1 h retention with probability 0.5 (the retry distribution below puts
//! half its mass before 20 min and half between 65 and 70 min, nothing near the purge), and
//! every such retry buys a second label (the carrier keeps no key). A retry's reply is lost too
//! with probability L, and its own retry is again a purchase with probability 0.5, up to the
//! 4 attempts: per intent L · 0.5 · (1 + L + L²) purchases twice. At 400/s with L = 0.1:
//! 400 × 86,400 × 0.1 × 0.5 × 1.11 = 1,918,080 a day. (The model's first-retry-only figure,
//! 1,728,000, leaves the chained retries out.) The load misses the late retries of the intents
//! started in its last ~1.2 s (about 2 % of the late retries, counted as not sent), well inside
//! its ±7 % interval. Measured with seeds 1, 2 and 3 (`--first-order` apart): 852, 888 and 860
//! labels bought twice, 1.86, 1.93 and 1.85 million a day against simulate's 1.93, 1.93 and
//! 1.90 million; all three agree and every interval covers 1,918,080.

use crate::common;

use common::spawn_listening as start;
use std::process::Command;

#[test]
fn load_counts_the_duplicates_simulate_predicts() {
    let dir = tempfile::tempdir().unwrap();
    let callers = dir.path().join("callers");
    std::fs::write(&callers, "tok-agree fulfilment\n").unwrap();
    let cdf = dir.path().join("retries.csv");
    std::fs::write(&cdf, "delay,cumulative\n20m,0.5\n65m,0.5\n70m,1\n").unwrap();
    let (_carrier, carrier) = start(&[
        "carrier",
        "--listen",
        "127.0.0.1:0",
        "--time-scale",
        "3600",
        "--carrier-window",
        "0s",
    ]);
    let store = format!("sqlite:{}", dir.path().join("store.sqlite").display());
    // Every wall-clock bound is several times the slowest loopback call seen on a loaded CI
    // machine (per-second p99s of 25 to 270 ms, against 4 ms on a quiet one): the carrier
    // timeout and the lease, divided by 3,600 like every engine duration, are 333 ms and
    // 583 ms of wall time, and the client's deadline (wall time) is 1 s. A call slower than
    // them is a timeout the run did not ask for, whose late retry buys a label the prediction
    // does not count. None of them changes the lost replies' retries, which are timed from
    // the first attempt by the distribution (20 min to 70 min, 0.33 s to 1.17 s of wall time).
    // Together (55 min) they stay inside the 1 h retention, as `serve` requires: a record
    // must outlive the attempt that started it.
    let (_serve, base) = start(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--store",
        &store,
        "--time-scale",
        "3600",
        "--retention",
        "1h",
        "--lease",
        "35m",
        "--carrier-timeout",
        "20m",
        "--carrier-url",
        &carrier,
        "--callers",
        callers.to_str().unwrap(),
    ]);
    let invoice = format!("{}/v1/invoice", carrier.trim_end_matches('/'));
    let out = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args([
            "load",
            &base,
            "--rate",
            "400",
            "--duration",
            "40s",
            "--seed",
            "1",
        ])
        .args(["--time-scale", "3600", "--lose-replies", "0.1"])
        .args(["--deadline", "1s"])
        .args(["--retention", "1h", "--carrier-window", "0s"])
        .args(["--carrier-invoice", &invoice])
        .args(["--first-order", "4000000", "--format", "json", "--quiet"])
        .arg("--retry-cdf")
        .arg(&cdf)
        .arg("--callers")
        .arg(&callers)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    // Labels bought twice break the duplicates budget (0): exit 1, on purpose.
    assert_eq!(out.status.code(), Some(1), "{json}");
    assert_eq!(json["unexpected_422"], 0, "{json}");
    assert_eq!(json["errors"], serde_json::json!({}), "{json}");
    // The second line of defence: every client saw one label per intent.
    assert_eq!(json["duplicate_labels"], 0, "{json}");
    let bought_twice = json["invoice"]["duplicate_purchases"].as_u64().unwrap();
    assert!(bought_twice > 100, "{json}");
    let counted = &json["invoice"]["duplicates_per_day"];
    let predicted = &json["prediction"]["duplicates_per_day"];
    let f = |v: &serde_json::Value, k: &str| v[k].as_f64().unwrap();
    let inside = |x: f64, v: &serde_json::Value| f(v, "ci95_low") <= x && x <= f(v, "ci95_high");
    assert!(
        inside(f(predicted, "estimate"), counted),
        "simulate's {predicted} outside the invoice's {counted}"
    );
    assert_eq!(json["prediction"]["agrees"], true, "{json}");
    let truth = 400.0 * 86_400.0 * 0.1 * 0.5 * (1.0 + 0.1 + 0.01);
    assert!(
        inside(truth, predicted),
        "{truth} outside simulate's {predicted}"
    );
    assert!(
        inside(truth, counted),
        "{truth} outside the invoice's {counted}"
    );

    // The same result in the capacity report (`report --load`): its own panel on the page, its
    // tables in summary.md, and the broken budget fails the report as it failed the load.
    let result = dir.path().join("load.json");
    std::fs::write(&result, &out.stdout).unwrap();
    let scenarios = dir.path().join("scenarios");
    std::fs::create_dir(&scenarios).unwrap();
    std::fs::write(scenarios.join("a.toml"), common::tiny_scenario("a", 5, "")).unwrap();
    let report_dir = dir.path().join("report");
    let r = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(["report", "--quiet", "--scenarios"])
        .arg(&scenarios)
        .arg("--out")
        .arg(&report_dir)
        .arg("--load")
        .arg(&result)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&r.stderr);
    assert_eq!(r.status.code(), Some(1), "{stderr}");
    assert!(stderr.contains("(load): duplicate_purchases:"), "{stderr}");
    let html = std::fs::read_to_string(report_dir.join("index.html")).unwrap();
    assert!(html.contains("Against a live service"), "the load panel");
    assert!(html.contains("labels bought twice"), "the invoice's row");
    assert!(html.contains("agrees with the count"));
    let md = std::fs::read_to_string(report_dir.join("summary.md")).unwrap();
    assert!(md.contains("| first_run |"), "{md}");
    assert!(md.contains("| duplicate_purchases | 0 |"), "{md}");
    assert!(md.contains("❌"), "{md}");
}

/// Issue 51, item 8: at ordinary settings (the seed's lost replies, 200/s, a 24 h retention)
/// a run of seconds sees no duplicate, "none seen, ≤ 12772" a day, beside a prediction of
/// about 85 a day, and said "agrees with the count": a check that could not have disagreed.
/// The count's interval is over a hundred times the prediction
/// (`load::predict::MAX_INTERVAL_OVER_PREDICTION` allows 1), so the run is too short to test,
/// and says how much longer it would have to be: long enough for the prediction to expect the
/// 18 events whose interval is no wider than themselves.
#[test]
fn a_short_run_at_ordinary_settings_is_too_short_to_test() {
    let dir = tempfile::tempdir().unwrap();
    let callers = dir.path().join("callers");
    std::fs::write(&callers, "tok-short fulfilment\n").unwrap();
    let store = format!("sqlite:{}", dir.path().join("store.sqlite").display());
    let (_serve, base) = start(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--store",
        &store,
        "--callers",
        callers.to_str().unwrap(),
    ]);
    let result = dir.path().join("short.json");
    let out = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(["load", &base, "--rate", "200", "--duration", "10s"])
        .args(["--retention", "24h", "--first-order", "6000000", "--quiet"])
        .arg("--callers")
        .arg(&callers)
        .arg("--out")
        .arg(&result)
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&result).unwrap()).unwrap();
    let p = &json["prediction"];
    assert_eq!(p["agreement"], "too_short", "{p}");
    assert_eq!(p["agrees"], false, "{p}");
    assert_eq!(p["max_interval_over_prediction"], 1.0, "{p}");
    assert!(
        p["interval_over_prediction"].as_f64().unwrap() > 50.0,
        "{p}"
    );
    // N: the prediction's expected count over a run N times longer is the 18 events a test
    // needs (N is rounded up to two figures, so at most 10 % more).
    let predicted = p["duplicates_per_day"]["estimate"].as_f64().unwrap();
    let intents = json["counts"]["intents_started"].as_f64().unwrap();
    let days = intents / (200.0 * 86_400.0);
    let n = p["run_longer"].as_f64().unwrap();
    let expected = predicted * days * n;
    assert!((18.0..=19.8).contains(&expected), "{expected} from {p}");
    assert!((300.0..20_000.0).contains(&n), "{n}");
    // The words, with units and separators.
    let row = text
        .lines()
        .find(|l| l.contains("simulate's prediction"))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(row.contains("/day ("), "{row}");
    assert!(row.contains("too short to test:"), "{row}");
    let n_text = idemcalc::format::human_count(n);
    assert!(
        row.contains(&format!("run {n_text}× longer (about ")),
        "{row}"
    );
    assert!(!row.contains("agrees"), "{row}");
    let bound = text
        .lines()
        .find(|l| l.contains("duplicates per day at the asked rate"))
        .unwrap();
    assert!(
        bound.contains("none seen, ≤ ") && bound.contains(",") && bound.ends_with("/day"),
        "{bound}"
    );
}
