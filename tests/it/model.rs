//! Golden figures from the seed's "In practice" section, the retry distribution's properties,
//! `--retry-cdf` files good and bad, and the `estimate` command end to end.

use std::io::Write as _;
use std::path::Path;
use std::process::Command;

use idemcalc::model::{self, ModelParams, SEED};
use idemcalc::traffic::{Arrivals, Head, LoadProfile, RetryCdfError, RetryDelay, Tail};
use rand::SeedableRng as _;
use rand::rngs::StdRng;

fn seed_estimate(retention_s: f64) -> model::Estimate {
    let params = ModelParams {
        retention_s,
        ..SEED
    };
    model::estimate(&params, &RetryDelay::seed())
}

fn close(actual: f64, expected: f64) {
    assert!(
        (actual - expected).abs() < 1e-6,
        "expected {expected}, got {actual}"
    );
}

// ---- golden figures -------------------------------------------------------------------------

#[test]
fn store_size_matches_the_seed() {
    let e = seed_estimate(86_400.0);
    assert_eq!(e.keys_per_day, 34_560_000.0);
    assert_eq!(e.store_bytes, 17_694_720_000.0);
    assert_eq!(e.peak_keys_per_day, 172_800_000.0);
    assert_eq!(e.peak_store_bytes, 88_473_600_000.0);
}

#[test]
fn savings_match_the_seed() {
    let e = seed_estimate(86_400.0);
    assert_eq!(e.timed_out_per_day, 34_560.0);
    assert_eq!(e.duplicates_without_keys_per_day, 20_736.0);
    assert_eq!(e.duplicate_cost_without_keys_per_day, 124_416.0);
    assert_eq!(e.stuck_without_retry_per_day, 13_824.0);
}

#[test]
fn late_arrivals_match_the_seed() {
    let e = seed_estimate(86_400.0);
    close(e.late_after_purge_per_day, 276.48);
    close(e.late_after_purge_fraction, 0.008);

    let e3 = seed_estimate(3.0 * 86_400.0);
    close(e3.late_after_purge_per_day, 34.56);
    assert_eq!(e3.store_bytes, 53_084_160_000.0);
}

/// The seed counts every late arrival as a possible duplicate; only those whose first attempt
/// ran (60 %) and that also miss the carrier's 24 h window are.
#[test]
fn real_duplicates_need_done_first_attempt_and_missed_carrier_window() {
    let e = seed_estimate(86_400.0);
    close(e.duplicate_labels_per_day, 34_560.0 * 0.6 * 0.008);
    close(e.duplicate_cost_per_day, 34_560.0 * 0.6 * 0.008 * 6.0);

    // A shorter retention than the carrier's window gains nothing on duplicates...
    let e1h = seed_estimate(3_600.0);
    close(e1h.duplicate_labels_per_day, e.duplicate_labels_per_day);
    // ...although far more retries arrive after our purge.
    close(e1h.late_after_purge_per_day, 34_560.0 * 0.06);

    // Without a carrier window, duplicates are the done share of late arrivals.
    let params = ModelParams {
        retention_s: 3_600.0,
        carrier_window_s: 0.0,
        ..SEED
    };
    let e0 = model::estimate(&params, &RetryDelay::seed());
    close(
        e0.duplicate_labels_per_day,
        e0.late_after_purge_per_day * 0.6,
    );
}

#[test]
fn storage_cost_is_a_twelfth_of_a_year_per_gb_month() {
    let e = seed_estimate(86_400.0);
    // Two copies (primary and standby) are paid for.
    close(e.storage_cost_per_day, 17.69472 * 2.0 * 0.10 * 12.0 / 365.0);
    close(
        e.total_cost_per_day,
        e.storage_cost_per_day + e.duplicate_cost_per_day,
    );
    close(e.saving_per_day, 124_416.0 - e.total_cost_per_day);
    close(e.stuck_cost_without_retry_per_day, 13_824.0 * 10.0);
}

#[test]
fn sweep_covers_1h_to_30d_and_recommends_the_cheapest() {
    let e = seed_estimate(86_400.0);
    let sweep = &e.retention_sweep;
    assert_eq!(sweep.first().unwrap().retention_s, 3_600.0);
    assert_eq!(sweep.last().unwrap().retention_s, 30.0 * 86_400.0);
    assert!(
        sweep
            .windows(2)
            .all(|w| w[0].retention_s < w[1].retention_s)
    );
    assert!(sweep.iter().any(|r| r.retention_s == 86_400.0));
    let cheapest = sweep
        .iter()
        .min_by(|a, b| a.total_cost_per_day.total_cmp(&b.total_cost_per_day))
        .unwrap();
    assert_eq!(e.cheapest_retention_s, cheapest.retention_s);
    for r in sweep {
        close(
            r.total_cost_per_day,
            r.storage_cost_per_day + r.duplicate_cost_per_day,
        );
        let single = seed_estimate(r.retention_s);
        assert_eq!(r.store_bytes, single.store_bytes);
        assert_eq!(r.duplicate_labels_per_day, single.duplicate_labels_per_day);
    }
    // With $6 labels and $0.10/GB-month, keys are worth keeping until the last retry: 30 d.
    assert_eq!(e.cheapest_retention_s, 30.0 * 86_400.0);
}

#[test]
fn expensive_storage_moves_the_recommendation_earlier() {
    let params = ModelParams {
        storage_usd_per_gb_month: 1_000.0,
        ..SEED
    };
    let e = model::estimate(&params, &RetryDelay::seed());
    assert!(e.cheapest_retention_s < 30.0 * 86_400.0);
}

#[test]
fn a_user_retention_outside_the_grid_is_swept_too() {
    let e = seed_estimate(5_400.0);
    assert!(e.retention_sweep.iter().any(|r| r.retention_s == 5_400.0));
}

// ---- formula table --------------------------------------------------------------------------

#[test]
fn formulas_json_carries_formulas_inputs_and_defaults() {
    let json = model::formulas_json();
    let formulas = json["formulas"].as_array().unwrap();
    assert_eq!(formulas.len(), model::FORMULAS.len());
    assert_eq!(formulas[0]["name"], "keys_per_day");
    assert_eq!(formulas[0]["expr"], "rate_per_s * 86400");
    assert_eq!(json["defaults"]["rate_per_s"], 400.0);
    assert_eq!(
        json["inputs"].as_array().unwrap().len(),
        model::INPUTS.len()
    );
    let names: Vec<&str> = formulas
        .iter()
        .map(|f| f["name"].as_str().unwrap())
        .collect();
    for required in [
        "keys_per_day",
        "store_bytes",
        "peak_keys_per_day",
        "peak_store_bytes",
        "timed_out_per_day",
        "duplicates_without_keys_per_day",
        "duplicate_cost_without_keys_per_day",
        "stuck_without_retry_per_day",
        "late_after_purge_per_day",
        "duplicate_labels_per_day",
        "duplicate_cost_per_day",
    ] {
        assert!(names.contains(&required), "{required}");
    }
}

#[test]
fn figures_are_evaluated_from_the_formula_strings() {
    let values = model::figures(&SEED, &RetryDelay::seed()).unwrap();
    assert_eq!(values.keys_per_day, 34_560_000.0);
    assert_eq!(values.duplicate_window_s, 86_400.0);
    // The figures are typed; the page still reads them by formula name.
    assert_eq!(values.get("keys_per_day"), Some(34_560_000.0));
    assert_eq!(values.get("no_such_figure"), None);
    assert!(SEED.values().contains(&("rate_per_s", 400.0)));
}

#[test]
fn params_read_durations_as_text_or_seconds() {
    let p: ModelParams =
        serde_json::from_str(r#"{"retention_s": "3d", "carrier_window_s": 3600}"#).unwrap();
    assert_eq!(p.retention_s, 259_200.0);
    assert_eq!(p.carrier_window_s, 3_600.0);
    assert_eq!(p.rate_per_s, 400.0);
    assert!(serde_json::from_str::<ModelParams>(r#"{"retention_s": "soon"}"#).is_err());
}

/// The model's inputs are checked once, by the settings table (issue 10: `ModelParams` had a
/// validator of its own with its own limits). Every input names a real flag of `estimate`, and
/// values the model cannot mean are refused there, naming that flag.
#[test]
fn every_input_is_a_knob_and_bad_values_are_refused_naming_its_flag() {
    use idemcalc::settings::flags::Flags;
    use idemcalc::settings::knobs::{ESTIMATE, KNOBS};
    for input in model::INPUTS {
        assert!(
            KNOBS
                .iter()
                .any(|k| k.flag == input.flag && k.commands & ESTIMATE != 0),
            "{} names {}, which is not a flag of estimate",
            input.name,
            input.flag
        );
    }
    for (knob, bad, flag) in [
        ("rate_per_s", "0", "--rate"),
        ("timeout_fraction", "1.5", "--timeout-fraction"),
        ("retention", "-1s", "--retention"),
        ("label_price_usd", "nan", "--label-price"),
    ] {
        let e = Flags::<ESTIMATE>::from_pairs(&[(knob, bad)])
            .settings()
            .unwrap_err()
            .to_string();
        assert!(e.contains(flag), "{knob} = {bad}: {e}");
    }
}

// ---- the retry distribution -----------------------------------------------------------------

#[test]
fn cdf_is_monotone_and_bounded() {
    for dist in [
        RetryDelay::seed(),
        RetryDelay::seed_with(
            Head::AtFirstPoint,
            Tail::AtHorizon {
                max_horizon_s: 7.0 * 86_400.0,
            },
        )
        .unwrap(),
    ] {
        let mut previous = 0.0;
        // 10 ms to 100 days, 2,000 steps on a log scale.
        for i in 0..=2_000 {
            let t = 0.01 * 10f64.powf(i as f64 * 9.0 / 2_000.0);
            let f = dist.cdf(t);
            assert!((0.0..=1.0).contains(&f), "cdf({t}) = {f}");
            assert!(f >= previous, "cdf fell from {previous} to {f} at {t}");
            close(dist.survival(t), 1.0 - f);
            previous = f;
        }
        assert_eq!(dist.cdf(dist.max_horizon_s()), 1.0);
    }
}

#[test]
fn seed_distribution_passes_through_the_table() {
    let d = RetryDelay::seed();
    for (t, f) in [
        (10.0, 0.62),
        (60.0, 0.85),
        (86_400.0, 0.992),
        (259_200.0, 0.999),
    ] {
        assert_eq!(d.cdf(t), f);
    }
    // Halfway between 10 s and 1 m in log-time is halfway between 62 % and 85 %.
    close(d.cdf((10.0f64 * 60.0).sqrt()), (0.62 + 0.85) / 2.0);
    assert_eq!(d.max_horizon_s(), 30.0 * 86_400.0);
    assert_eq!(d.cdf(0.25), 0.0);
}

/// Kolmogorov–Smirnov: the largest gap between the sample's empirical CDF and the model's is
/// below the 5 % critical value 1.36/√n.
#[test]
fn sampling_matches_the_cdf() {
    let dist = RetryDelay::seed();
    let mut rng = StdRng::seed_from_u64(2026);
    let n = 20_000;
    let mut samples: Vec<f64> = (0..n).map(|_| dist.sample(&mut rng)).collect();
    samples.sort_by(f64::total_cmp);
    let d = samples
        .iter()
        .enumerate()
        .map(|(i, &x)| {
            let f = dist.cdf(x);
            (f - i as f64 / n as f64)
                .abs()
                .max(((i + 1) as f64 / n as f64 - f).abs())
        })
        .fold(0.0, f64::max);
    assert!(d < 1.36 / (n as f64).sqrt(), "KS distance {d}");
    assert!(
        samples
            .iter()
            .all(|&s| (0.25..=30.0 * 86_400.0).contains(&s))
    );
}

#[test]
fn sampling_is_reproducible() {
    let dist = RetryDelay::seed();
    let draw = |seed| {
        let mut rng = StdRng::seed_from_u64(seed);
        (0..100)
            .map(|_| dist.sample(&mut rng))
            .collect::<Vec<f64>>()
    };
    assert_eq!(draw(1), draw(1));
    assert_ne!(draw(1), draw(2));
}

// ---- arrivals -------------------------------------------------------------------------------

#[test]
fn constant_arrivals_average_the_rate() {
    let arrivals = Arrivals::constant(400.0).unwrap();
    let mut rng = StdRng::seed_from_u64(3);
    let (mut t, mut n) = (0.0, 0u32);
    while t < 100.0 {
        t = arrivals.next_arrival(t, &mut rng);
        n += 1;
    }
    // 40,000 expected, sd 200.
    assert!((n as f64 - 40_000.0).abs() < 1_000.0, "{n}");
    assert_eq!(arrivals.mean_rate_per_s(), 400.0);
    assert!(Arrivals::constant(0.0).is_err());
}

#[test]
fn load_profile_mean_and_reproducibility() {
    let profile = LoadProfile::rush(400.0, 2_000.0, 16.0 * 3_600.0, 2.0 * 3_600.0).unwrap();
    close(
        profile.mean_rate_per_s(),
        (400.0 * 22.0 + 2_000.0 * 2.0) / 24.0,
    );
    assert_eq!(profile.rate_at(17.0 * 3_600.0), 2_000.0);
    assert_eq!(profile.rate_at(86_400.0 + 17.0 * 3_600.0), 2_000.0);
    assert_eq!(profile.rate_at(3.0 * 3_600.0), 400.0);
    let arrivals = Arrivals::Profile(profile);
    let run = || {
        let mut rng = StdRng::seed_from_u64(9);
        let mut t = 0.0;
        (0..1_000)
            .map(|_| {
                t = arrivals.next_arrival(t, &mut rng);
                t
            })
            .collect::<Vec<f64>>()
    };
    assert_eq!(run(), run());
    assert!(LoadProfile::new(vec![(10.0, 1.0)]).is_err());
    assert!(LoadProfile::new(vec![(0.0, 0.0)]).is_err());
    assert!(LoadProfile::rush(400.0, 2_000.0, 23.0 * 3_600.0, 2.0 * 3_600.0).is_err());
}

/// A profile that is silent most of the day still delivers its arrivals in the open window.
#[test]
fn sparse_profile_skips_the_quiet_hours() {
    let profile = LoadProfile::rush(0.0, 10.0, 3_600.0, 60.0).unwrap();
    let arrivals = Arrivals::Profile(profile);
    let mut rng = StdRng::seed_from_u64(5);
    let mut t = 0.0;
    for _ in 0..5_000 {
        t = arrivals.next_arrival(t, &mut rng);
        let time_of_day_s = t.rem_euclid(86_400.0);
        assert!((3_600.0..=3_660.0).contains(&time_of_day_s), "{t}");
    }
}

// ---- --retry-cdf files ----------------------------------------------------------------------

fn write_csv(text: &str) -> tempfile::NamedTempFile {
    let mut file = tempfile::Builder::new().suffix(".csv").tempfile().unwrap();
    file.write_all(text.as_bytes()).unwrap();
    file
}

#[test]
fn user_cdf_round_trips() {
    let mut text = String::from("# measured 2026-09\ndelay,cdf\n");
    for v in RetryDelay::seed().points() {
        text.push_str(&format!(
            "{},{}\n",
            idemcalc::duration::format_secs(v.0),
            v.1
        ));
    }
    let file = write_csv(&text);
    let read = RetryDelay::from_csv_path(file.path()).unwrap();
    assert_eq!(read, RetryDelay::seed());

    let file = write_csv("90s, 50%\n6h,0.9\n\n3d,1\n");
    let read = RetryDelay::from_csv_path(file.path()).unwrap();
    assert_eq!(
        read.points(),
        &[(90.0, 0.5), (21_600.0, 0.9), (259_200.0, 1.0)]
    );
    assert_eq!(read.max_horizon_s(), 259_200.0);
    assert_eq!(read.survival(259_200.0), 0.0);
}

/// Every bad file is refused with the file name and the line that is wrong.
#[test]
fn bad_cdf_files_name_the_file_and_line() {
    let cases = [
        ("10s,0.5\n1m,0.4\n", 2, "below the previous"),
        ("10s,0.5\n10s,0.6\n", 2, "not after the previous"),
        ("10s,0.5\n1m,1.2\n", 2, "outside 0..1"),
        ("10s,0.5\n1m,62\n", 2, "outside 0..1"),
        ("delay,cdf\n10s,0.5\n", 2, "at least two points"),
        ("10s,0.5\n1m,0.6\n10 parsecs,0.7\n", 3, "not a duration"),
        ("10s,0.5\n1m,most\n", 2, "not a cumulative fraction"),
        ("10s,0.5\n1m;0.6\n", 2, "two fields"),
        ("10s,0.5\n40d,0.9\n", 2, "--retry-horizon"),
    ];
    for (text, line, problem) in cases {
        let file = write_csv(text);
        let err = RetryDelay::from_csv_path(file.path()).unwrap_err();
        let message = err.to_string();
        let name = file.path().display().to_string();
        assert!(
            message.contains(&format!("{name}:{line}:")),
            "{text:?}: {message}"
        );
        assert!(message.contains(problem), "{text:?}: {message}");
        assert!(matches!(err, RetryCdfError::Line { .. }));
    }
}

#[test]
fn empty_and_missing_cdf_files_are_named() {
    let file = write_csv("# nothing here\n");
    let message = RetryDelay::from_csv_path(file.path())
        .unwrap_err()
        .to_string();
    assert!(
        message.contains(&file.path().display().to_string()),
        "{message}"
    );
    assert!(message.contains("at least two points"), "{message}");

    let missing = Path::new("/nonexistent/retries.csv");
    let err = RetryDelay::from_csv_path(missing).unwrap_err();
    assert!(matches!(err, RetryCdfError::Io { .. }));
    assert!(err.to_string().contains("/nonexistent/retries.csv"));
}

#[test]
fn points_are_validated_without_a_file_too() {
    let (head, tail) = (Head::default(), Tail::default());
    assert!(RetryDelay::from_points(vec![(10.0, 0.5)], head, tail).is_err());
    assert!(RetryDelay::from_points(vec![(0.0, 0.0), (10.0, 0.5)], head, tail).is_err());
    assert!(
        RetryDelay::from_points(
            vec![(10.0, 0.5), (60.0, 0.6)],
            Head::LogUniform { min_delay_s: 20.0 },
            tail
        )
        .is_err()
    );
}

// ---- the binary -----------------------------------------------------------------------------

fn idemcalc(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(args)
        .output()
        .unwrap()
}

fn estimate_json(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["estimate", "--format", "json"];
    all.extend_from_slice(args);
    let out = idemcalc(&all);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn estimate_json_has_the_golden_fields() {
    let j = estimate_json(&["--retention", "24h"]);
    let f = |name: &str| j[name].as_f64().unwrap_or_else(|| panic!("missing {name}"));
    assert_eq!(f("keys_per_day"), 34_560_000.0);
    assert_eq!(f("store_bytes"), 17_694_720_000.0);
    assert_eq!(f("peak_keys_per_day"), 172_800_000.0);
    assert_eq!(f("peak_store_bytes"), 88_473_600_000.0);
    assert_eq!(f("timed_out_per_day"), 34_560.0);
    assert_eq!(f("duplicates_without_keys_per_day"), 20_736.0);
    assert_eq!(f("duplicate_cost_without_keys_per_day"), 124_416.0);
    assert_eq!(f("stuck_without_retry_per_day"), 13_824.0);
    close(f("late_after_purge_per_day"), 276.48);
    close(f("duplicate_labels_per_day"), 165.888);
    close(f("duplicate_cost_per_day"), 995.328);
    assert!(j["retention_sweep"].as_array().unwrap().len() >= 19);
    assert_eq!(f("cheapest_retention_s"), 2_592_000.0);
    assert_eq!(j["retry_delay"]["points"][0]["delay"], "10s");

    let j3 = estimate_json(&["--retention", "3d"]);
    close(j3["late_after_purge_per_day"].as_f64().unwrap(), 34.56);
    assert_eq!(j3["store_bytes"].as_f64().unwrap(), 53_084_160_000.0);
}

#[test]
fn estimate_table_shows_the_seed_figures() {
    let out = idemcalc(&["estimate"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    for figure in [
        "34.56M",
        "≈ 17.7 GB",
        "172.8M",
        "≈ 88.5 GB",
        "34,560",
        "20,736/day",
        "$124,416/day",
        "13,824/day",
        "276",
        "◀ retention",
        "Cheapest retention: 30d",
    ] {
        assert!(text.contains(figure), "missing {figure} in\n{text}");
    }
    // Issue 21: "recommended" is the decision's answer alone, said once.
    assert_eq!(
        text.matches("Recommended retention").count(),
        1,
        "one recommendation in\n{text}"
    );
}

#[test]
fn estimate_reads_a_retry_cdf_file() {
    let file = write_csv("1m,0.5\n1h,0.9\n24h,1\n");
    let path = file.path().to_str().unwrap();
    let j = estimate_json(&["--retry-cdf", path, "--retention", "1h"]);
    close(
        j["late_after_purge_per_day"].as_f64().unwrap(),
        34_560.0 * 0.1,
    );
    // Every retry lands within the carrier's 24 h window, so the shortest retention is enough.
    assert_eq!(j["cheapest_retention_s"].as_f64().unwrap(), 3_600.0);
    // Without the carrier's help, keys must outlast the last retry.
    let j = estimate_json(&["--retry-cdf", path, "--carrier-window", "0s"]);
    assert_eq!(j["cheapest_retention_s"].as_f64().unwrap(), 86_400.0);
}

#[test]
fn estimate_refuses_bad_input_naming_it() {
    let cases: [(&[&str], &[&str]); 4] = [
        (&["--retention", "3 parsecs"], &["--retention", "3 parsecs"]),
        (&["--timeout-fraction", "2"], &["--timeout-fraction", "2"]),
        (
            &["--retry-cdf", "/nonexistent/r.csv"],
            &["/nonexistent/r.csv"],
        ),
        (&["--rate", "500", "--peak-rate", "450"], &["--peak-rate"]),
    ];
    for (args, wanted) in cases {
        let mut all = vec!["estimate"];
        all.extend_from_slice(args);
        let out = idemcalc(&all);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        for w in wanted {
            assert!(stderr.contains(w), "{args:?}: {stderr}");
        }
    }
    let bad = write_csv("10s,0.9\n1m,0.5\n");
    let out = idemcalc(&["estimate", "--retry-cdf", bad.path().to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("{}:2:", bad.path().display())),
        "{stderr}"
    );
}

/// Issue 34, item 1: one cheapest retention per output. The sweep and the decision weigh the
/// same retentions (up to and including the horizon), so `estimate --retry-horizon 45d` names
/// 45d once, in the text and in the JSON. By hand at the seed's 400/s and 512 B: 45 days hold
/// 400 × 86,400 × 45 = 1.5552 G records = 796.26 GB per copy; 2 copies at $0.10 × 12 / 365
/// per GB-day = $5.2357/day, and no duplicate is left past the horizon. At a 20d horizon:
/// 353.89 GB × 2 × $0.0032877 = $2.327/day, below 21d's $2.44.
#[test]
fn cheapest_retention_has_one_answer() {
    for (horizon, want_s, want_usd) in [
        ("45d", 45.0 * 86_400.0, 5.2357),
        ("20d", 20.0 * 86_400.0, 2.327),
    ] {
        let j = estimate_json(&["--retry-horizon", horizon]);
        let sweep_s = j["cheapest_retention_s"].as_f64().unwrap();
        let decision_s = j["decision"]["cheapest"]["retention_s"].as_f64().unwrap();
        assert_eq!(sweep_s, want_s, "{horizon}: the sweep's cheapest");
        assert_eq!(decision_s, want_s, "{horizon}: the decision's cheapest");
        let usd = j["cheapest_total_cost_per_day"].as_f64().unwrap();
        assert!((usd - want_usd).abs() < 0.001, "{horizon}: {usd}");
        let out = idemcalc(&["estimate", "--retry-horizon", horizon]);
        let text = String::from_utf8(out.stdout).unwrap();
        assert_eq!(
            text.matches("Cheapest retention").count(),
            1,
            "{horizon}: one cheapest in\n{text}"
        );
        assert!(
            text.contains(&format!("Cheapest retention: {horizon}")),
            "{text}"
        );
    }
}
