//! Every simulated figure the docs and the scenario files quote, with the command that
//! produces it: each test runs the command and fails, naming the file to update, when the
//! quoted text is no longer what it prints. Hand derivations beside those figures are checked
//! in `tests/it/sim.rs` and `tests/it/off_path.rs`.

use crate::common;

use std::path::Path;

use idemcalc::format::{human_count, thousands};

/// How a figure is written where it is quoted.
#[derive(Clone, Copy)]
enum Style {
    /// `323,010`
    Thousands,
    /// `1.32M`
    Short,
}

/// A figure at `pointer` in the JSON of `idemcalc ARGS --format json --quiet`.
struct Quote {
    pointer: &'static str,
    style: Style,
}

const fn q(pointer: &'static str, style: Style) -> Quote {
    Quote { pointer, style }
}

/// Runs `args` and checks that `file` quotes each figure as the run prints it.
fn check(file: &str, args: &[&str], quotes: &[Quote]) {
    let v = common::json_of(args);
    let text = std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join(file)).unwrap();
    let mut stale = Vec::new();
    for q in quotes {
        let value = v
            .pointer(q.pointer)
            .and_then(serde_json::Value::as_f64)
            .unwrap_or_else(|| panic!("{args:?} has no {}", q.pointer));
        let written = match q.style {
            Style::Thousands => thousands(value),
            Style::Short => human_count(value),
        };
        if !text.contains(&written) {
            stale.push(format!("{} = {written}", q.pointer));
        }
    }
    assert!(
        stale.is_empty(),
        "{file} quotes figures `idemcalc {}` no longer prints; update it to: {}",
        args.join(" "),
        stale.join(", ")
    );
}

use Style::{Short, Thousands};

fn scenario(file: &str, quotes: &[Quote]) {
    check(file, &["simulate", "--scenario", file], quotes);
}

#[test]
fn failure_carrier_without_key() {
    scenario(
        "scenarios/failure-carrier-without-key.toml",
        &[
            q("/duplicate_labels_per_day/estimate", Thousands),
            q("/duplicate_labels_per_day/ci95_low", Thousands),
            q("/duplicate_labels_per_day/ci95_high", Thousands),
            q("/detection/takeovers_per_day", Thousands),
        ],
    );
}

#[test]
fn failure_new_key_per_attempt() {
    scenario(
        "scenarios/failure-new-key-per-attempt.toml",
        &[
            q("/duplicate_labels_per_day/estimate", Thousands),
            q("/duplicate_labels_per_day/ci95_low", Thousands),
            q("/duplicate_labels_per_day/ci95_high", Thousands),
        ],
    );
}

#[test]
fn failure_separate_store() {
    scenario(
        "scenarios/failure-separate-store.toml",
        &[
            q("/detection/labels_without_completed_key_per_day", Thousands),
            q("/duplicate_labels_per_day/estimate", Thousands),
            q("/duplicate_labels_per_day/ci95_high", Thousands),
        ],
    );
}

#[test]
fn failure_short_lease() {
    scenario(
        "scenarios/failure-short-lease.toml",
        &[
            q("/detection/takeovers_while_running_per_day", Short),
            q("/duplicate_labels_per_day/estimate", Thousands),
        ],
    );
}

#[test]
fn failure_short_retention() {
    scenario(
        "scenarios/failure-short-retention.toml",
        &[
            q("/late_after_purge_per_day/estimate", Thousands),
            q("/late_after_purge_per_day/ci95_low", Thousands),
            q("/late_after_purge_per_day/ci95_high", Thousands),
            q("/duplicate_labels_per_day/estimate", Thousands),
            q("/duplicate_labels_per_day/ci95_low", Thousands),
            q("/duplicate_labels_per_day/ci95_high", Thousands),
            q("/detection/purged_key_requests_per_day", Thousands),
        ],
    );
}

/// The main job's output on the README's front page.
#[test]
fn readme_main_job() {
    check(
        "README.md",
        &["simulate", "--retention", "3d"],
        &[
            q("/replayed_intents", Thousands),
            q("/replayed_requests", Thousands),
            q("/timed_out_per_day/estimate", Thousands),
            q("/timed_out_attempts_per_day/estimate", Thousands),
        ],
    );
}

#[test]
fn full_fidelity_example() {
    check(
        "docs/simulate.md",
        &[
            "simulate",
            "--rate",
            "400",
            "--retention",
            "5m",
            "--duration",
            "10m",
            "--sample",
            "1",
        ],
        &[
            q("/replayed_intents", Thousands),
            q("/timed_out_per_day/estimate", Thousands),
        ],
    );
}

#[test]
fn slow_carrier() {
    check(
        "docs/simulate.md",
        &["simulate", "--retention", "1h"],
        &[q("/timed_out_per_day/estimate", Thousands)],
    );
    check(
        "docs/simulate.md",
        &[
            "simulate",
            "--retention",
            "1h",
            "--carrier-median",
            "300ms",
            "--carrier-p99",
            "1s",
        ],
        &[
            q("/timed_out_per_day/estimate", Short),
            q("/timed_out_attempts_per_day/estimate", Short),
        ],
    );
}

/// docs/fit.md quotes the scenario `fit` writes for the bundled example log: every line it
/// quotes (the histogram's shortened one aside) must be a line `fit` writes today.
#[test]
fn fit_example_scenario() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("example-requests.toml");
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .current_dir(root)
        .args(["fit", "scenarios/logs/example-requests.csv", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let written = std::fs::read_to_string(&out).unwrap();
    let doc = std::fs::read_to_string(root.join("docs/fit.md")).unwrap();
    let start = doc
        .find("```toml\n# Fitted by `idemcalc fit` from scenarios/logs/example-requests.csv")
        .expect("docs/fit.md quotes the example's scenario");
    let block = &doc[start + "```toml\n".len()..];
    let block = &block[..block.find("```").unwrap()];
    let stale: Vec<&str> = block
        .lines()
        .filter(|l| !l.contains('…') && !written.lines().any(|w| w == *l))
        .collect();
    assert!(
        stale.is_empty(),
        "docs/fit.md quotes lines `fit` no longer writes: {stale:#?}\nit writes:\n{written}"
    );
}
