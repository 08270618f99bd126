//! `report --baseline PREVIOUS/summary.json`: each figure of this run beside the same figure of
//! a previous run, and whether the two differ by more than sampling explains.
//!
//! A report on every change is only useful if it says which differences are real: two runs
//! with different seeds always differ a little. A change is marked when a two-sided z-test on
//! the difference (each side's standard error read off its 95 % interval) rejects "no change"
//! at a 5 % family-wise error rate over every figure compared (Bonferroni), so a rerun with
//! another seed marks nothing in 19 reports out of 20, while a doubled response size marks the
//! store at once. Figures without an interval (exact counts) change when they differ at all.
//!
//! The baseline is read as plain JSON, field by field, so a summary of any schema version (1 to 4)
//! compares (a field renamed since is read under its new name); a scenario or retention missing on either side is listed, not guessed.

use super::results::{
    BrokenBudget, Change, ChangeFigure, Comparison, InputChange, Status, Summary, Verdict,
};
use crate::settings::Budget;
use crate::sim::replay::Figure;
use statrs::distribution::{ContinuousCDF, Normal};
use std::path::Path;

/// Family-wise false-alarm rate of the "real change" marks.
const FAMILY_ALPHA: f64 = 0.05;

/// Reads a previous `summary.json` and compares `summary` with it. Errors name the file.
pub fn compare(summary: &Summary, baseline: &Path) -> anyhow::Result<Comparison> {
    use anyhow::Context;
    let text = crate::input::read_limited_bytes(baseline, 256 << 20)
        .with_context(|| format!("{}: cannot read the baseline", baseline.display()))?;
    let value: serde_json::Value = serde_json::from_slice(&text).with_context(|| {
        format!(
            "{}: not JSON; --baseline takes a previous report's summary.json",
            baseline.display()
        )
    })?;
    let before = runs_of(&value).ok_or_else(|| {
        anyhow::anyhow!(
            "{}: no `scenarios` with `runs`; --baseline takes a previous report's summary.json",
            baseline.display()
        )
    })?;
    let mut pairs = Vec::new();
    let mut only_in_this_run = Vec::new();
    let mut changed_inputs = Vec::new();
    for s in &summary.scenarios {
        for r in &s.runs {
            match before
                .iter()
                .find(|b| b.scenario == s.name && b.retention == r.retention)
            {
                Some(b) => {
                    if let (Some(old), Ok(new)) = (&b.config, serde_json::to_value(&r.config)) {
                        changed_inputs.extend(input_changes(&s.name, &r.retention, old, &new));
                    }
                    pairs.push((s.name.clone(), r.retention.clone(), b, &r.figures))
                }
                None => only_in_this_run.push(format!("{} ({})", s.name, r.retention)),
            }
        }
    }
    let only_in_baseline = before
        .iter()
        .filter(|b| {
            !summary
                .scenarios
                .iter()
                .any(|s| s.name == b.scenario && s.runs.iter().any(|r| r.retention == b.retention))
        })
        .map(|b| format!("{} ({})", b.scenario, b.retention))
        .collect();
    let tests = (pairs.len() * ChangeFigure::ALL.len()).max(1) as f64;
    let z_threshold = normal().inverse_cdf(1.0 - FAMILY_ALPHA / (2.0 * tests));
    let mut changes = Vec::new();
    for (scenario, retention, b, after) in pairs {
        for name in ChangeFigure::ALL {
            let Some((_, before)) = b.figures.iter().find(|(f, _)| *f == name) else {
                continue;
            };
            changes.push(change(
                scenario.clone(),
                retention.clone(),
                name,
                *before,
                name.of(after),
                z_threshold,
            ));
        }
    }
    Ok(Comparison {
        baseline: baseline.display().to_string(),
        z_threshold,
        changes,
        only_in_baseline,
        only_in_this_run,
        changed_inputs,
    })
}

/// Checks each scenario's `max_store_growth` against the comparison: a verdict on every
/// compared run (the run's Budgets show it like any other budget, and it counts among the
/// checks), broken on a real growth of the store above the limit, at risk when only the growth's
/// interval reaches past it. Broken ones join `summary.broken_budgets`.
pub fn add_growth_verdicts(summary: &mut Summary, comparison: &Comparison) {
    for s in &mut summary.scenarios {
        let Some(limit) = s.budgets.as_ref().and_then(|b| b.max_store_growth) else {
            continue;
        };
        for r in &mut s.runs {
            let Some(c) = comparison.changes.iter().find(|c| {
                c.scenario == s.name
                    && c.retention == r.retention
                    && c.figure == ChangeFigure::StoreBytes
            }) else {
                continue;
            };
            let ci95 = c.relative_ci95.unwrap_or([c.relative, c.relative]);
            let status = if c.real && c.relative > limit {
                Status::Broken
            } else if ci95[1] > limit {
                Status::AtRisk
            } else {
                Status::Ok
            };
            r.verdicts.push(Verdict {
                budget: Budget::MaxStoreGrowth,
                limit,
                figure: Figure {
                    estimate: c.relative,
                    ci95_low: ci95[0],
                    ci95_high: ci95[1],
                    analytic: f64::NAN,
                },
                unit: Budget::MaxStoreGrowth.unit(),
                status,
            });
            if status == Status::Broken {
                summary.broken_budgets.push(BrokenBudget {
                    scenario: s.name.clone(),
                    retention: c.retention.clone(),
                    budget: Budget::MaxStoreGrowth,
                    figure: c.relative,
                    ci95,
                    limit,
                    unit: Budget::MaxStoreGrowth.unit(),
                });
            }
        }
    }
}

fn normal() -> Normal {
    Normal::new(0.0, 1.0).expect("the standard normal is valid")
}

/// A standard error read off a 95 % interval; 0 for a figure without one.
fn se(f: &Figure) -> f64 {
    let z = normal().inverse_cdf(0.975);
    let w = f.ci95_high - f.ci95_low;
    if w.is_finite() && w > 0.0 {
        w / (2.0 * z)
    } else {
        0.0
    }
}

fn change(
    scenario: String,
    retention: String,
    figure: ChangeFigure,
    before: Figure,
    after: Figure,
    z_threshold: f64,
) -> Change {
    let diff = after.estimate - before.estimate;
    let (sb, sa) = (se(&before), se(&after));
    let s = (sb * sb + sa * sa).sqrt();
    let real = if s > 0.0 {
        (diff / s).abs() > z_threshold
    } else {
        diff.abs() > 1e-9 * before.estimate.abs().max(after.estimate.abs())
    };
    let relative = if before.estimate != 0.0 {
        after.estimate / before.estimate - 1.0
    } else {
        f64::NAN
    };
    // Delta method on the ratio a/b: var ≈ (a/b)² (σa²/a² + σb²/b²).
    let relative_ci95 = (s > 0.0 && before.estimate > 0.0 && after.estimate > 0.0).then(|| {
        let ratio = after.estimate / before.estimate;
        let rel_se =
            ratio * ((sa / after.estimate).powi(2) + (sb / before.estimate).powi(2)).sqrt();
        let z = normal().inverse_cdf(0.975);
        [ratio - 1.0 - z * rel_se, ratio - 1.0 + z * rel_se]
    });
    Change {
        scenario,
        retention,
        figure,
        unit: figure.unit(),
        before,
        after,
        relative,
        relative_ci95,
        real,
    }
}

/// One run of the baseline, read field by field.
struct BaselineRun {
    scenario: String,
    retention: String,
    figures: Vec<(ChangeFigure, Figure)>,
    /// The run's simulation inputs (schema 2 and later).
    config: Option<serde_json::Value>,
}

/// The simulation inputs that differ between a baseline run and this one, as dotted paths of the
/// run's `config` (`engine.retention_ms`, `carrier.label_price_cents`): what changed, so a reader of the
/// figures' changes knows why.
fn input_changes(
    scenario: &str,
    retention: &str,
    before: &serde_json::Value,
    after: &serde_json::Value,
) -> Vec<InputChange> {
    let (mut old, mut new) = (Vec::new(), Vec::new());
    flatten("", before, &mut old);
    flatten("", after, &mut new);
    for (path, _) in &mut old {
        if let Some((_, now)) = RENAMED_CONFIG_PATHS.iter().find(|(was, _)| was == path) {
            *path = (*now).to_string();
        }
    }
    let mut out = Vec::new();
    for (path, value) in &new {
        let was = old.iter().find(|(p, _)| p == path).map(|(_, v)| v.clone());
        if was.as_ref() != Some(value) {
            out.push(InputChange {
                scenario: scenario.to_string(),
                retention: retention.to_string(),
                input: path.clone(),
                before: was.unwrap_or_else(|| "(absent)".into()),
                after: value.clone(),
            });
        }
    }
    out
}

/// Inputs of a run's `config` renamed since an older schema, with their names now: a baseline
/// written before reads as the same input, not as one gone and one new.
const RENAMED_CONFIG_PATHS: &[(&str, &str)] =
    &[("carrier.price_cents", "carrier.label_price_cents")];

/// A JSON value as `(dotted path, value text)` leaves.
fn flatten(prefix: &str, v: &serde_json::Value, out: &mut Vec<(String, String)>) {
    match v {
        serde_json::Value::Object(map) => {
            for (k, x) in map {
                let path = if prefix.is_empty() {
                    k.clone()
                } else {
                    format!("{prefix}.{k}")
                };
                flatten(&path, x, out);
            }
        }
        other => out.push((prefix.to_string(), other.to_string())),
    }
}

fn runs_of(v: &serde_json::Value) -> Option<Vec<BaselineRun>> {
    let mut out = Vec::new();
    for s in v.get("scenarios")?.as_array()? {
        let name = s.get("name")?.as_str()?;
        for r in s.get("runs")?.as_array()? {
            let retention = r.get("retention")?.as_str()?;
            let mut figures = Vec::new();
            for f in ChangeFigure::ALL {
                let Some(x) = r.get("figures").and_then(|fs| fs.get(f.name())) else {
                    continue;
                };
                let num = |k: &str| x.get(k).and_then(serde_json::Value::as_f64);
                // A non-finite bound is written as null: treat it as "no interval".
                let Some(estimate) = num("estimate") else {
                    continue;
                };
                figures.push((
                    f,
                    Figure {
                        estimate,
                        ci95_low: num("ci95_low").unwrap_or(estimate),
                        ci95_high: num("ci95_high").unwrap_or(estimate),
                        analytic: num("analytic").unwrap_or(f64::NAN),
                    },
                ));
            }
            out.push(BaselineRun {
                scenario: name.to_string(),
                retention: retention.to_string(),
                figures,
                config: r.get("config").cloned(),
            });
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(estimate: f64, half: f64) -> Figure {
        Figure {
            estimate,
            ci95_low: estimate - half,
            ci95_high: estimate + half,
            analytic: estimate,
        }
    }

    #[test]
    fn a_change_inside_the_noise_is_not_marked_and_a_doubling_is() {
        let z = 3.0;
        let same = change(
            "s".into(),
            "24h".into(),
            ChangeFigure::StoreBytes,
            fig(100.0, 2.0),
            fig(101.5, 2.0),
            z,
        );
        assert!(!same.real);
        let doubled = change(
            "s".into(),
            "24h".into(),
            ChangeFigure::StoreBytes,
            fig(100.0, 2.0),
            fig(200.0, 4.0),
            z,
        );
        assert!(doubled.real);
        assert!((doubled.relative - 1.0).abs() < 1e-12);
        let [lo, hi] = doubled.relative_ci95.unwrap();
        assert!(lo < 1.0 && 1.0 < hi && lo > 0.8);
    }

    #[test]
    fn exact_figures_change_when_they_differ() {
        let exact = |v| fig(v, 0.0);
        assert!(
            !change(
                "s".into(),
                "1h".into(),
                ChangeFigure::TotalCostPerDay,
                exact(3.0),
                exact(3.0),
                3.0
            )
            .real
        );
        assert!(
            change(
                "s".into(),
                "1h".into(),
                ChangeFigure::TotalCostPerDay,
                exact(3.0),
                exact(4.0),
                3.0
            )
            .real
        );
    }

    /// A schema-3 baseline's `carrier.price_cents` is the same input as `label_price_cents`
    /// now: unchanged when the price is, and named by its new name when it changed.
    #[test]
    fn a_renamed_input_reads_as_the_same_input() {
        let before = serde_json::json!({ "carrier": { "price_cents": 600 } });
        let same = serde_json::json!({ "carrier": { "label_price_cents": 600 } });
        assert!(input_changes("s", "24h", &before, &same).is_empty());
        let dearer = serde_json::json!({ "carrier": { "label_price_cents": 480 } });
        let changes = input_changes("s", "24h", &before, &dearer);
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].input, "carrier.label_price_cents");
        assert_eq!(changes[0].before, "600");
    }
}
