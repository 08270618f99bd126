//! The retention decision against hand derivations from the seed's figures: 400/s, the seed's
//! late-retry table, 512 B a record, a 24 h carrier window, $6 labels, two copies of the store.

use std::path::Path;
use std::process::Command;

use idemcalc::decision::{self, DecisionInputs, Targets};
use idemcalc::model::{ModelParams, SEED};
use idemcalc::scenario::Scenario;
use idemcalc::traffic::RetryDelay;
use idemcalc::traffic::RetryEvidence;

const DAY_S: f64 = 86_400.0;
/// Timed-out calls a day at 400/s and 0.1 %: 34,560 (the seed's "34,560 retried calls a day").
const TIMED_OUT_PER_DAY: f64 = 34_560.0;
/// Of those, already done server-side (60 %): a retry of one of these can buy a second label.
const DONE_PER_DAY: f64 = TIMED_OUT_PER_DAY * 0.6;

fn close(actual: f64, expected: f64, what: &str) {
    assert!(
        (actual - expected).abs() <= 1e-9 * expected.abs().max(1.0),
        "{what}: expected {expected}, got {actual}"
    );
}

/// The seed's CDF between 6 h (97.5 %) and 24 h (99.2 %), linear in log-time, by hand.
fn seed_cdf_between_6h_and_24h(t_s: f64) -> f64 {
    0.975 + (0.992 - 0.975) * (t_s / 21_600.0).ln() / (86_400.0 / 21_600.0_f64).ln()
}

fn decide(params: &ModelParams, inputs: &DecisionInputs) -> decision::Recommendation {
    decision::decide(params, &RetryDelay::seed(), inputs).unwrap()
}

#[test]
fn late_after_purge_counts_are_the_seeds_table() {
    let r = decide(&SEED, &DecisionInputs::default());
    let at = |s: f64| r.candidates.iter().find(|c| c.retention_s == s).unwrap();
    // "0.8% is 276 that arrive after a 24 h purge; a 3-day window cuts that to 35."
    close(
        at(DAY_S).late_after_purge_per_day,
        TIMED_OUT_PER_DAY * 0.008,
        "24h late",
    );
    close(
        at(3.0 * DAY_S).late_after_purge_per_day,
        TIMED_OUT_PER_DAY * 0.001,
        "3d late",
    );
    // Real duplicates: done server-side and later than both our 24 h and the carrier's 24 h.
    close(
        at(DAY_S).duplicate_labels_per_day,
        DONE_PER_DAY * 0.008,
        "24h duplicates",
    );
    // Below the carrier's window the carrier's key catches every retry our purge missed.
    close(
        at(3_600.0).duplicate_labels_per_day,
        DONE_PER_DAY * 0.008,
        "1h duplicates",
    );
    // "34.56M × 512 B ≈ 17.7 GB", per copy; two copies are paid for.
    close(at(DAY_S).store_bytes, 34.56e6 * 512.0, "24h store");
    close(
        at(DAY_S).store_bytes_all_replicas,
        2.0 * 34.56e6 * 512.0,
        "24h, 2 copies",
    );
    close(
        at(DAY_S).storage_cost_per_day,
        17.694_72 * 2.0 * 0.10 * 12.0 / 365.0,
        "storage counts both copies",
    );
}

#[test]
fn one_duplicate_a_month_needs_the_whole_horizon_under_the_seed_tail() {
    // 21 d: the tail is linear in log-time from 3 d (99.9 %) to 30 d, so 0.1 % × (1 − log₁₀ 7)
    // of 20,736 is about 3.2 a day, far above 1/30; only the 30 d horizon reaches 0.
    let r = decide(&SEED, &DecisionInputs::default());
    let at21 = r
        .candidates
        .iter()
        .find(|c| c.retention_s == 21.0 * DAY_S)
        .unwrap();
    close(
        at21.duplicate_labels_per_day,
        DONE_PER_DAY * 0.001 * (1.0 - 7.0_f64.log10()),
        "21d duplicates",
    );
    assert!(!at21.meets_duplicates);
    let rec = r.recommended.as_ref().unwrap();
    assert_eq!(rec.retention_s, 30.0 * DAY_S);
    assert!(
        r.notes[0].contains("Recommended retention: 30d"),
        "{:?}",
        r.notes
    );
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("rests on the assumed horizon"))
    );
    assert!(r.cheapest_is_assumption);
}

#[test]
fn baseline_scenario_gets_a_retention_below_the_horizon_within_its_budgets() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/baseline-400.toml");
    let scenario = Scenario::load(&path).unwrap();
    let budgets = scenario.budgets.clone().unwrap();
    let params = scenario.model_params(scenario.settings.retentions()[0]);
    let dist = RetryDelay::seed();
    let inputs = DecisionInputs {
        targets: budgets.targets(),
        ..DecisionInputs::default()
    };
    let r = decision::decide(&params, &dist, &inputs).unwrap();
    assert_eq!(r.targets.max_duplicates_per_day, 300.0);
    assert_eq!(r.targets.max_store_gb, Some(25.0));

    // Counting on the carrier's 24 h window (the model's real duplicates), 1 h already holds:
    // 165.9 duplicates a day ≤ 300, a 0.74 GB store ≤ 25 GB, $995/day ≤ $2,000.
    let rec = r.recommended.as_ref().unwrap();
    assert_eq!(rec.retention_s, 3_600.0);
    close(
        rec.duplicate_labels_per_day,
        DONE_PER_DAY * 0.008,
        "1h duplicates",
    );
    close(rec.store_bytes, 400.0 * 3_600.0 * 512.0, "1h store");
    assert!(rec.relies_on_carrier_window);
    assert!(r.notes.iter().any(|n| n.contains("carrier's 24h window")));

    // The cheapest is the 30 d horizon, 531 GB a copy against the 25 GB budget: labelled as an
    // assumption, never recommended.
    assert_eq!(r.cheapest.retention_s, 30.0 * DAY_S);
    close(r.cheapest.store_bytes, 30.0 * 34.56e6 * 512.0, "30d store");
    assert!(!r.cheapest.meets_store);
    assert!(r.cheapest_is_assumption);
    assert!(
        r.notes
            .iter()
            .any(|n| n.contains("an assumption, not a measurement")),
        "{:?}",
        r.notes
    );

    // On our keys alone: 12 h leaves 1.65 % of 20,736 = 342 > 300; 18 h leaves
    // 1 − (97.5 % + 1.7 % × ln 3 / ln 4) of them, 239 ≤ 300, in a 13.3 GB store; 24 h leaves
    // 0.8 %, 166, in 17.7 GB, $438 a day of labels less for a few cents of storage: the
    // cheapest within 25 GB (36 h needs 26.5 GB).
    let own = decision::decide(
        &params,
        &dist,
        &DecisionInputs {
            count_carrier_window: false,
            ..inputs.clone()
        },
    )
    .unwrap();
    let at12 = own
        .candidates
        .iter()
        .find(|c| c.retention_s == 12.0 * 3_600.0)
        .unwrap();
    close(
        at12.duplicate_labels_per_day,
        DONE_PER_DAY * (1.0 - seed_cdf_between_6h_and_24h(43_200.0)),
        "12h own duplicates",
    );
    assert!(!at12.meets_duplicates);
    let at18 = own
        .candidates
        .iter()
        .find(|c| c.retention_s == 18.0 * 3_600.0)
        .unwrap();
    close(
        at18.duplicate_labels_per_day,
        DONE_PER_DAY * (1.0 - seed_cdf_between_6h_and_24h(64_800.0)),
        "18h own duplicates",
    );
    assert!(at18.meets_all());
    let rec = own.recommended.as_ref().unwrap();
    assert_eq!(rec.retention_s, DAY_S);
    close(
        rec.duplicate_labels_per_day,
        DONE_PER_DAY * 0.008,
        "24h own duplicates",
    );
    close(rec.store_bytes, 400.0 * DAY_S * 512.0, "24h store");
    assert!(rec.store_bytes <= 25e9 && rec.total_cost_per_day <= 2_000.0);
    assert!(rec.retention_s < own.horizon_s);
    assert!(!rec.relies_on_carrier_window);
}

#[test]
fn the_store_budget_is_checked_at_the_top_of_the_measured_interval() {
    // On our keys alone, 200/day needs 24 h (18 h leaves 239). At 512 B the 24 h store is
    // 17.69 GB, inside 18 GB; at the interval's 530 B it is 18.32 GB, outside.
    let base = DecisionInputs {
        targets: Targets {
            max_duplicates_per_day: 200.0,
            max_store_gb: Some(18.0),
            max_cost_per_day: None,
        },
        count_carrier_window: false,
        ..DecisionInputs::default()
    };
    let point = decide(&SEED, &base);
    assert_eq!(point.recommended.as_ref().unwrap().retention_s, DAY_S);
    let wide = decide(
        &SEED,
        &DecisionInputs {
            bytes_per_record_ci95: Some([498.0, 530.0]),
            ..base
        },
    );
    assert!(wide.recommended.is_none());
    let at24 = wide
        .candidates
        .iter()
        .find(|c| c.retention_s == DAY_S)
        .unwrap();
    let [lo, hi] = at24.store_bytes_ci95.unwrap();
    close(lo, 34.56e6 * 498.0, "low store");
    close(hi, 34.56e6 * 530.0, "high store");
    assert!(!at24.meets_store);
    // The fewest duplicates that still fit: 18 h.
    assert_eq!(wide.closest.as_ref().unwrap().retention_s, 18.0 * 3_600.0);
    assert!(wide.notes[1].starts_with("No retention up to the horizon meets"));
}

#[test]
fn an_assumed_horizon_says_how_much_data_supports_it() {
    let r = decide(
        &SEED,
        &DecisionInputs {
            evidence: Some(RetryEvidence {
                retries: 1_234,
                latest_retry_s: 2.0 * DAY_S,
                log_span_s: 7.0 * DAY_S,
            }),
            ..DecisionInputs::default()
        },
    );
    let note = r
        .notes
        .iter()
        .find(|n| n.contains("an assumption"))
        .unwrap();
    assert!(note.contains("1,234 retries over 7d"), "{note}");
    assert!(note.contains("beyond 2d the tail is not data"), "{note}");
}

#[test]
fn more_replicas_cost_more_but_store_the_same_per_copy() {
    let one = decide(
        &ModelParams {
            replicas: 1.0,
            ..SEED
        },
        &DecisionInputs::default(),
    );
    let three = decide(
        &ModelParams {
            replicas: 3.0,
            ..SEED
        },
        &DecisionInputs::default(),
    );
    for (a, b) in one.candidates.iter().zip(&three.candidates) {
        assert_eq!(a.store_bytes, b.store_bytes);
        close(
            b.storage_cost_per_day,
            3.0 * a.storage_cost_per_day,
            "3 copies",
        );
        close(
            b.store_bytes_all_replicas,
            3.0 * a.store_bytes,
            "3 copies' bytes",
        );
    }
}

fn estimate(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .arg("estimate")
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn estimate_shows_the_decision_in_json_and_table() {
    let out = estimate(&[
        "--format",
        "json",
        "--max-duplicates-per-day",
        "300",
        "--max-store-gb",
        "25",
        "--max-cost-per-day",
        "2000",
        "--without-carrier-window",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let d = &json["decision"];
    // The cheapest within the 25 GB store (36 h needs 26.5 GB): 24 h, 166 duplicates a day.
    assert_eq!(d["recommended"]["retention_s"], DAY_S);
    assert_eq!(d["cheapest"]["retention_s"], 30.0 * DAY_S);
    assert_eq!(d["cheapest_is_assumption"], true);
    assert_eq!(d["replicas"], 2.0);
    // The model's figures are still at the top level.
    assert_eq!(json["keys_per_day"], 34_560_000.0);

    let out = estimate(&["--max-duplicates-per-day", "1/week", "--replicas", "3"]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("Decision"), "{text}");
    assert!(text.contains("an assumption, not a measurement"), "{text}");
    assert!(text.contains("for 3 copies"), "{text}");
}

#[test]
fn bad_decision_flags_name_the_flag() {
    for (flag, value) in [
        ("--replicas", "0.5"),
        ("--max-duplicates-per-day", "1/fortnight"),
        ("--max-store-gb", "lots"),
    ] {
        let out = estimate(&[flag, value]);
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag), "{err}");
    }
}

/// Issue 21: the model was evaluated three times per `simulate` job with different inputs.
/// Now the plan evaluates it once: `simulate`'s model column, `estimate` at the same inputs and
/// the decision's candidate at the run's retention agree to the last digit, and no JSON field
/// called "recommended" means the cheapest.
#[test]
fn the_model_column_the_estimate_and_the_decision_are_one_evaluation() {
    let flags = ["--retention", "1h", "--format", "json"];
    let out = estimate(&flags);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let model: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert!(model.get("recommended_retention_s").is_none(), "{model}");
    assert_eq!(model["cheapest_retention_s"], 30.0 * 86_400.0);

    let out = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(["simulate", "--duration", "2h", "--quiet"])
        .args(flags)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let sim: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for figure in [
        "timed_out_per_day",
        "late_after_purge_per_day",
        "duplicate_labels_per_day",
        "duplicate_cost_per_day",
    ] {
        assert_eq!(sim[figure]["analytic"], model[figure], "{figure}");
    }
    let decision = &sim["decision"];
    assert!(decision.get("cost_optimal").is_none(), "{decision}");
    let at_run = decision["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["retention_s"] == 3_600.0)
        .expect("the run's retention is a candidate");
    // The decision goes by what the run measured there (the table's figure), the model's
    // beside it.
    assert_eq!(
        at_run["model_duplicate_labels_per_day"], model["duplicate_labels_per_day"],
        "{at_run}"
    );
    assert_eq!(
        at_run["duplicate_labels_per_day"], sim["duplicate_labels_per_day"]["estimate"],
        "{at_run}"
    );
    assert_eq!(
        at_run["late_after_purge_per_day"],
        sim["late_after_purge_per_day"]["estimate"]
    );
}

/// Issue 51, item 4: the decision is the cheapest retention that meets the target and every
/// budget. By hand at the seed's inputs: every retention up to the carrier's 24 h window has
/// the same 165.9 real duplicates a day ($995 of labels); past it they fall with the retry
/// tail (3 d: 20,736 × 0.1 % = 20.7/day) while storage grows 400/s × 512 B × 2 copies at
/// $0.10/GB-month, so within a 100 GB store the cost falls to its least near 5 d, not at 1 h.
#[test]
fn the_recommendation_is_the_cheapest_retention_that_meets_every_target() {
    let inputs = DecisionInputs {
        targets: Targets {
            max_duplicates_per_day: 300.0,
            max_store_gb: Some(100.0),
            max_cost_per_day: Some(2_000.0),
        },
        ..DecisionInputs::default()
    };
    let r = decide(&SEED, &inputs);
    let rec = r.recommended.as_ref().unwrap();
    let cheapest_feasible = r
        .candidates
        .iter()
        .filter(|c| c.meets_all())
        .min_by(|a, b| a.total_cost_per_day.total_cmp(&b.total_cost_per_day))
        .unwrap();
    assert_eq!(rec.retention_s, cheapest_feasible.retention_s);
    assert!(rec.retention_s > DAY_S, "{}", rec.retention);
    let one_hour = r
        .candidates
        .iter()
        .find(|c| c.retention_s == 3_600.0)
        .unwrap();
    assert!(one_hour.meets_all());
    assert!(rec.total_cost_per_day < one_hour.total_cost_per_day / 5.0);
    assert!(
        r.notes[0].contains("the cheapest that meets"),
        "{:?}",
        r.notes
    );
}

/// Where the cheapest retention overall breaks a budget, the decision says what raising that
/// budget would save: the 25 GB store keeps the 30 d horizon out.
#[test]
fn a_budget_that_keeps_the_cheapest_out_says_what_raising_it_would_save() {
    let inputs = DecisionInputs {
        targets: Targets {
            max_duplicates_per_day: 300.0,
            max_store_gb: Some(25.0),
            max_cost_per_day: Some(2_000.0),
        },
        ..DecisionInputs::default()
    };
    let r = decide(&SEED, &inputs);
    assert!(!r.cheapest.meets_store);
    let rec = r.recommended.as_ref().unwrap();
    assert!(rec.store_bytes <= 25e9);
    let note = r
        .notes
        .iter()
        .find(|n| n.starts_with("A store budget of"))
        .unwrap_or_else(|| panic!("{:?}", r.notes));
    assert!(note.contains(&format!(
        "would cut {}/day to {}/day",
        idemcalc::format::usd(rec.total_cost_per_day),
        idemcalc::format::usd(r.cheapest.total_cost_per_day)
    )));
}

/// Ties inside the intervals go to the shorter retention, and the decision says so.
#[test]
fn a_cost_tie_inside_the_intervals_goes_to_the_shorter_retention() {
    use idemcalc::decision::Measured;
    use idemcalc::stats::Interval;
    let base = decide(&SEED, &DecisionInputs::default());
    // Every retention measured with the model's figures, duplicates ±60 %: wide enough that
    // the cheapest's cost interval reaches a shorter retention's.
    let measured: Vec<Measured> = base
        .candidates
        .iter()
        .map(|c| Measured {
            retention_s: c.retention_s,
            duplicates_per_day: Interval {
                estimate: c.duplicate_labels_per_day.max(1.0),
                ci95_low: 0.4 * c.duplicate_labels_per_day.max(1.0),
                ci95_high: 1.6 * c.duplicate_labels_per_day.max(1.0),
            },
            records: Interval {
                estimate: c.store_records,
                ci95_low: c.store_records,
                ci95_high: c.store_records,
            },
            late_after_purge_per_day: Interval {
                estimate: c.late_after_purge_per_day,
                ci95_low: c.late_after_purge_per_day,
                ci95_high: c.late_after_purge_per_day,
            },
        })
        .collect();
    let targets = Targets {
        max_duplicates_per_day: 1e9,
        max_store_gb: None,
        max_cost_per_day: None,
    };
    let point = decide(
        &SEED,
        &DecisionInputs {
            targets,
            ..DecisionInputs::default()
        },
    );
    let wide = decide(
        &SEED,
        &DecisionInputs {
            targets,
            measured,
            ..DecisionInputs::default()
        },
    );
    let rec = wide.recommended.as_ref().unwrap();
    let tied = wide.tied_with.as_ref().unwrap();
    assert!(rec.retention_s < tied.retention_s);
    assert!(rec.total_cost_per_day_ci95.unwrap()[0] <= tied.total_cost_per_day_ci95.unwrap()[1]);
    assert!(
        wide.notes
            .iter()
            .any(|n| n.contains("the tie goes to the shorter retention"))
    );
    assert!(point.tied_with.is_none());
}
