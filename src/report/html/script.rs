//! The data the page's script reads: the model's formulas exactly as Rust evaluates them, the
//! retry distribution, the what-if panel's starting inputs, and values to check its own
//! formatting and arithmetic against at load. The checked values are the ones `run` evaluated
//! ([`WhatIfStart`]), so a script that drifts from Rust says so instead of showing other
//! numbers.

use super::HtmlError;
use super::whatif::{
    CONTROLS, COST_BUDGET, KEY, OUTPUTS, RESPONSE, STORE_BUDGET, TARGET, control_steps, no_budget,
};
use crate::decision::Choice;
use crate::model;
use crate::report::charts::{self, SimPoint};
use crate::report::vocabulary::{Quantity, show};
use crate::run::results::WhatIfStart;

/// The script's data as JSON that is safe inside a `<script>` element.
pub(super) fn data(start: &WhatIfStart, sims: &[SimPoint]) -> Result<String, HtmlError> {
    let mut json = model::formulas_json();
    let base = &start.params;
    let dist = &start.retry;
    if let Some(o) = json.as_object_mut() {
        o.insert("base".into(), serde_json::to_value(base)?);
        o.insert("distribution".into(), serde_json::to_value(dist)?);
        o.insert("controls".into(), controls(start));
        o.insert("outputs".into(), outputs());
        o.insert("fragment".into(), serde_json::to_value(FRAGMENT)?);
        // Simulated runs at the page's starting inputs: still comparable while only the
        // retention moves, since each sits at its own retention.
        o.insert("sim_points".into(), sim_points(sims));
        // The share of the panel the cost's smaller part must reach to be drawn: the same rule
        // as the chart drawn in Rust.
        o.insert(
            "parts_min_share".into(),
            serde_json::to_value(charts::PARTS_MIN_SHARE)?,
        );
        o.insert("check_formats".into(), format_checks(start));
        o.insert("check_figures".into(), serde_json::to_value(start.figures)?);
        o.insert(
            "check_cheapest_s".into(),
            serde_json::to_value(start.estimate.cheapest_retention_s)?,
        );
        o.insert("targets".into(), serde_json::to_value(start.targets)?);
        o.insert(
            "payload".into(),
            serde_json::json!({ "key_bytes": start.key_bytes, "response_bytes": start.response_bytes }),
        );
        o.insert(
            "horizon_s".into(),
            serde_json::to_value(dist.max_horizon_s())?,
        );
        // The decision the script must reproduce at the starting inputs: the headline's, from
        // its evidence, or without one the model's.
        let evidence: Vec<EvidencePoint> = start.weighed.iter().map(EvidencePoint::of).collect();
        o.insert("evidence".into(), serde_json::to_value(&evidence)?);
        let decision = if evidence.is_empty() {
            start.model_decision.as_ref()
        } else {
            start.decision.as_ref()
        };
        o.insert(
            "check_decision_s".into(),
            serde_json::to_value(decision.map(|c| c.retention_s))?,
        );
        o.insert(
            "check_decision".into(),
            serde_json::to_value(decision.map(|c| {
                serde_json::json!({
                    "store_bytes": c.store_bytes,
                    "duplicate_labels_per_day": c.duplicate_labels_per_day,
                    "total_cost_per_day": c.total_cost_per_day,
                })
            }))?,
        );
    }
    // Nothing in a script element may look like `</script>` or `<!--`; `<` only occurs inside
    // JSON strings, where `\u003c` reads the same.
    Ok(serde_json::to_string(&json)?.replace('<', "\\u003c"))
}

/// One retention the headline's decision weighed, in the parts the page's script scales.
#[derive(Debug, Clone, Copy, serde::Serialize)]
struct EvidencePoint {
    retention_s: f64,
    records: f64,
    /// The ends of the store's 95 % interval over the store (records and bytes per record
    /// together).
    store_ci95_rel: [f64; 2],
    /// The day's peak over its mean.
    peak_ratio: f64,
    duplicates: f64,
    duplicates_ci95: [f64; 2],
}

impl EvidencePoint {
    fn of(c: &Choice) -> Self {
        let ratio = |x: f64| {
            if c.store_bytes > 0.0 {
                x / c.store_bytes
            } else {
                1.0
            }
        };
        EvidencePoint {
            retention_s: c.retention_s,
            records: c.store_records,
            store_ci95_rel: c
                .store_bytes_ci95
                .map_or([1.0, 1.0], |[low, high]| [ratio(low), ratio(high)]),
            peak_ratio: ratio(c.peak_store_bytes),
            duplicates: c.duplicate_labels_per_day,
            duplicates_ci95: c
                .duplicates_measured
                .map_or([c.duplicate_labels_per_day; 2], |m| {
                    [m.ci95_low, m.ci95_high]
                }),
        }
    }
}

/// The short names of the URL fragment (`#retention=259200`), each with the control it sets: the
/// page writes a control's first name and reads any of them.
const FRAGMENT: &[(&str, &str)] = &[
    ("bytes_per_record", "bytes_per_record"),
    ("carrier_window", "carrier_window_s"),
    ("replicas", "replicas"),
    ("max_duplicates", TARGET),
    ("max_store_gb", STORE_BUDGET),
    ("max_cost_per_day", COST_BUDGET),
    ("key_bytes", KEY),
    ("response_bytes", RESPONSE),
    ("retention", "retention_s"),
    ("rate", "rate_per_s"),
    ("label_price", "label_price_usd"),
    ("storage_price", "storage_usd_per_gb_month"),
    ("timeout_fraction", "timeout_fraction"),
    // Links made before the knob had one name.
    ("timeout_rate", "timeout_fraction"),
    ("done_fraction", "done_fraction"),
];

fn controls(start: &WhatIfStart) -> serde_json::Value {
    let controls: Vec<serde_json::Value> = CONTROLS
        .iter()
        .map(|(name, label, _, kind, values)| {
            let (min, max) = control_range(name);
            serde_json::json!({
                "name": name, "label": label, "kind": kind,
                "values": control_steps(start, name, values),
                "min": min, "max": max, "none": no_budget(name),
            })
        })
        .collect();
    serde_json::Value::Array(controls)
}

/// What a control may be set to from a link: the range its knob takes from a flag or a file
/// (the one table of limits), so `#rate=99999999` or `#max_duplicates=-5` is refused as
/// `--rate 99999999` would be.
fn control_range(control: &str) -> (f64, f64) {
    let knob = match control {
        "retention_s" => "retention",
        "carrier_window_s" => "carrier_window",
        other => other,
    };
    crate::settings::knobs::by_name(knob)
        .and_then(|k| k.numeric_range())
        .unwrap_or((0.0, f64::MAX))
}

fn outputs() -> serde_json::Value {
    let outputs: Vec<serde_json::Value> = OUTPUTS
        .iter()
        .map(|(name, _, kind, _)| serde_json::json!({"name": name, "kind": kind}))
        .collect();
    serde_json::Value::Array(outputs)
}

fn sim_points(sims: &[SimPoint]) -> serde_json::Value {
    let sims: Vec<serde_json::Value> = sims
        .iter()
        .map(|p| {
            serde_json::json!({
                "retention_s": p.retention_s,
                "store_bytes": [p.store.0, p.store.1, p.store.2],
                "duplicates_per_day": [p.duplicates.0, p.duplicates.1, p.duplicates.2],
                "total_cost_per_day": [p.cost.0, p.cost.1, p.cost.2],
            })
        })
        .collect();
    serde_json::Value::Array(sims)
}

/// Values whose formatting the script must reproduce exactly: the run's figures, and the edge
/// cases of rounding (exact ties, unit boundaries).
fn format_checks(start: &WhatIfStart) -> serde_json::Value {
    let mut checks: Vec<(Quantity, f64)> = Vec::new();
    for (name, _, kind, _) in OUTPUTS {
        checks.push((
            *kind,
            start.figures.and_then(|f| f.get(name)).unwrap_or(f64::NAN),
        ));
    }
    for r in &start.estimate.retention_sweep {
        checks.push((Quantity::Bytes, r.store_bytes));
        checks.push((Quantity::UsdPerDay, r.total_cost_per_day));
        checks.push((Quantity::PerDay, r.duplicate_labels_per_day));
        checks.push((Quantity::Duration, r.retention_s));
    }
    for v in ROUNDING_EDGES {
        for kind in [
            Quantity::Bytes,
            Quantity::Count,
            Quantity::Usd,
            Quantity::Percent,
            Quantity::Rate,
        ] {
            checks.push((kind, v));
        }
    }
    for v in DURATION_EDGES {
        checks.push((Quantity::Duration, v));
    }
    let checks: Vec<serde_json::Value> = checks
        .into_iter()
        .filter(|(_, v)| v.is_finite())
        .map(|(k, v)| serde_json::json!([k, v, show(k, v)]))
        .collect();
    serde_json::Value::Array(checks)
}

/// Ties and unit boundaries where JavaScript's rounding and Rust's could part.
const ROUNDING_EDGES: [f64; 14] = [
    0.0,
    0.125,
    2.5,
    17.75,
    999.5,
    999_999.0,
    17_694_720_000.0,
    124_416.0,
    6.0,
    0.0583,
    99.995,
    0.005,
    1.5e12,
    -1234.4,
];

/// Durations at each unit's boundary and in between (`1.5d`, `36h`), and fitted horizons no
/// unit divides (`1.366d`).
const DURATION_EDGES: [f64; 12] = [
    118_022.4,
    121_996.8,
    0.25,
    10.0,
    600.0,
    5_400.0,
    86_400.0,
    129_600.0,
    172_800.0,
    259_200.0,
    2_592_000.0,
    1.5,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn embedded_json_cannot_close_the_script() {
        let j = data(&crate::run::whatif::start(&[], None), &[]).unwrap();
        assert!(!j.contains('<'));
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(
            v["formulas"].as_array().unwrap().len(),
            model::FORMULAS.len()
        );
    }
}
