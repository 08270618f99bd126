//! The "What if?" panel as the page shows it before any script runs: its controls at the
//! run's own values, the figures they give and the trade-off over retentions, all formatted
//! from the start `run` evaluated ([`WhatIfStart`]). The script then moves the same controls
//! (see [`super::script`]).

use super::{DataTable, svg_or_note};
use crate::format::{human_bytes, human_count, human_duration, rate_per_s};
use crate::model::{self, ModelParams};
use crate::report::charts::{self, RatePalette, SimPoint, TradeoffRow};
use crate::report::vocabulary::{Quantity, show};
use crate::run::results::Figure;
use crate::run::results::{ScenarioKind, Summary, WhatIfStart};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
struct Control {
    name: &'static str,
    label: &'static str,
    unit: &'static str,
    max_index: usize,
    index: usize,
    text: String,
}

#[derive(Debug, Clone, Serialize)]
struct Output {
    name: &'static str,
    label: &'static str,
    text: String,
    value: f64,
    big: bool,
}

#[derive(Debug, Clone, Serialize)]
pub(super) struct WhatIf {
    context: String,
    controls: Vec<Control>,
    outputs: Vec<Output>,
    cheapest: String,
    cheapest_cost: String,
    /// The decision rule at the panel's starting inputs (no bytes-per-record interval).
    decision: String,
    decision_note: String,
    tradeoff_svg: String,
    /// What the trade-off draws, in words: only what is drawn.
    tradeoff_legend: String,
    tradeoff_table: DataTable,
}

/// The controls of the "What if?" panel: each steps through values people configure, plus the
/// run's own value. `name` is the model input it sets; the page reads `#retention=259200`
/// style URL fragments with the `param` names below.
pub(super) const CONTROLS: &[(&str, &str, &str, Quantity, &[f64])] = &[
    (
        "retention_s",
        "Retention",
        "",
        Quantity::Duration,
        model::SWEEP_RETENTIONS_S,
    ),
    (
        "rate_per_s",
        "Average rate",
        "calls/s",
        Quantity::Rate,
        &[
            50.0, 100.0, 200.0, 400.0, 800.0, 1_000.0, 1_500.0, 2_000.0, 3_000.0, 5_000.0, 10_000.0,
        ],
    ),
    (
        "label_price_usd",
        "Label price",
        "per label",
        Quantity::Usd,
        &[1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 8.0, 10.0, 15.0, 20.0],
    ),
    (
        "storage_usd_per_gb_month",
        "Storage price",
        "per GB-month",
        Quantity::Usd,
        &[0.02, 0.05, 0.08, 0.10, 0.115, 0.15, 0.20, 0.25, 0.50, 1.00],
    ),
    (
        "timeout_fraction",
        "Calls that time out",
        "",
        Quantity::Percent,
        &[
            0.0001, 0.0002, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05,
        ],
    ),
    (
        "done_fraction",
        "Of those, already done",
        "",
        Quantity::Percent,
        &[0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0],
    ),
    (
        "bytes_per_record",
        "Bytes per record",
        "measured by default",
        Quantity::Bytes,
        &[
            150.0, 200.0, 300.0, 400.0, 512.0, 600.0, 800.0, 1_000.0, 1_500.0, 2_000.0, 4_000.0,
            5_000.0,
        ],
    ),
    (
        "carrier_window_s",
        "Carrier's key window",
        "",
        Quantity::Duration,
        &[0.0, 3_600.0, 21_600.0, 86_400.0, 259_200.0, 604_800.0],
    ),
    (
        "replicas",
        "Copies of the store",
        "primary + standbys",
        Quantity::Count,
        &[1.0, 2.0, 3.0, 4.0, 5.0],
    ),
    (
        KEY,
        "Key size",
        "mean",
        Quantity::Bytes,
        &[16.0, 36.0, 64.0, 128.0, 255.0],
    ),
    (
        RESPONSE,
        "Saved response size",
        "mean",
        Quantity::Bytes,
        &[100.0, 300.0, 600.0, 1_000.0, 2_000.0, 4_000.0],
    ),
    (
        TARGET,
        "Duplicates target",
        "at most",
        Quantity::PerDay,
        &[
            1.0 / 365.0,
            1.0 / 30.0,
            1.0 / 7.0,
            1.0,
            10.0,
            100.0,
            300.0,
            1_000.0,
        ],
    ),
    (
        STORE_BUDGET,
        "Store budget",
        "per copy",
        Quantity::Gigabytes,
        &[1.0, 2.0, 5.0, 10.0, 25.0, 50.0, 100.0, 250.0, 1_000.0],
    ),
    (
        COST_BUDGET,
        "Cost budget",
        "per day",
        Quantity::UsdPerDay,
        &[
            10.0, 50.0, 100.0, 500.0, 1_000.0, 2_000.0, 5_000.0, 10_000.0,
        ],
    ),
];

/// The decision's store and cost budgets: controls too, since either can be what blocks a
/// recommendation. A budget that is not set sits at the top of its flag's range, shown as
/// "none": `--max-store-gb` and `--max-cost-per-day` take nothing larger.
pub(super) const STORE_BUDGET: &str = "max_store_gb";
pub(super) const COST_BUDGET: &str = "max_cost_per_day";

/// The value at which a budget control means "no budget", if the control is a budget.
pub(super) fn no_budget(name: &str) -> Option<f64> {
    match name {
        STORE_BUDGET | COST_BUDGET => crate::settings::knobs::by_name(name)?
            .numeric_range()
            .map(|(_, max)| max),
        _ => None,
    }
}

/// A control's value as the page writes it: "none" for an unset budget.
pub(super) fn control_text(name: &str, kind: Quantity, v: f64) -> String {
    match no_budget(name) {
        Some(none) if v >= none => "none".to_string(),
        _ => show(kind, v),
    }
}

/// The one control that is a decision target, not a model input.
pub(super) const TARGET: &str = "max_duplicates_per_day";

/// The controls that are payload sizes, not model inputs: the page moves the bytes per record by
/// the change they make to `model::record_bytes` (key + hash + response + overhead), starting
/// from the run's own sizes, so at the start the measured bytes per record stands unchanged.
pub(super) const KEY: &str = "key_bytes";
pub(super) const RESPONSE: &str = "response_bytes";

/// The figures the panel recomputes, in the order shown.
pub(super) const OUTPUTS: &[(&str, &str, Quantity, bool)] = &[
    (
        "bytes_per_record",
        "Bytes per record used",
        Quantity::Bytes,
        false,
    ),
    (
        "store_bytes",
        "Store size at average load",
        Quantity::Bytes,
        true,
    ),
    (
        "duplicate_labels_per_day",
        "Duplicate labels with keys",
        Quantity::PerDay,
        true,
    ),
    (
        "total_cost_per_day",
        "Total daily cost with keys",
        Quantity::UsdPerDay,
        true,
    ),
    (
        "peak_store_bytes",
        "Worst case, peak all day",
        Quantity::Bytes,
        false,
    ),
    (
        "late_after_purge_per_day",
        "Retries after the purge",
        Quantity::PerDay,
        false,
    ),
    (
        "storage_cost_per_day",
        "Storage cost",
        Quantity::UsdPerDay,
        false,
    ),
    (
        "duplicate_cost_per_day",
        "Duplicate labels cost",
        Quantity::UsdPerDay,
        false,
    ),
    (
        "duplicates_without_keys_per_day",
        "Duplicates without keys",
        Quantity::PerDay,
        false,
    ),
    (
        "duplicate_cost_without_keys_per_day",
        "Cost without keys",
        Quantity::UsdPerDay,
        false,
    ),
    (
        "saving_per_day",
        "What the keys save",
        Quantity::UsdPerDay,
        false,
    ),
];

/// A control's starting value: a model input, or the decision's duplicates target.
pub(super) fn own_value(start: &WhatIfStart, name: &str) -> f64 {
    match name {
        TARGET => start.targets.max_duplicates_per_day,
        STORE_BUDGET => start
            .targets
            .max_store_gb
            .or(no_budget(name))
            .unwrap_or(f64::NAN),
        COST_BUDGET => start
            .targets
            .max_cost_per_day
            .or(no_budget(name))
            .unwrap_or(f64::NAN),
        KEY => start.key_bytes,
        RESPONSE => start.response_bytes,
        _ => param(&start.params, name),
    }
}

fn param(p: &ModelParams, name: &str) -> f64 {
    p.values()
        .iter()
        .find(|(n, _)| *n == name)
        .map_or(f64::NAN, |v| v.1)
}

/// A control's steps: its values, "no budget" for a budget, and the run's own value, sorted.
pub(super) fn control_steps(start: &WhatIfStart, name: &str, values: &[f64]) -> Vec<f64> {
    let mut v = control_values(values, own_value(start, name));
    if let Some(none) = no_budget(name) {
        v = control_values(&v, none);
    }
    v
}

/// A control's values with the run's own merged in, sorted.
pub(super) fn control_values(values: &[f64], own: f64) -> Vec<f64> {
    let mut v: Vec<f64> = values.to_vec();
    if own.is_finite() && !v.iter().any(|x| (x - own).abs() <= own.abs() * 1e-12) {
        v.push(own);
    }
    v.sort_by(f64::total_cmp);
    v
}

/// The panel at its start: controls at the run's values, the figures there, the decision and
/// the trade-off chart with the simulated runs on it.
pub(super) fn panel(start: &WhatIfStart, palette: &RatePalette, sim_points: &[SimPoint]) -> WhatIf {
    let base = &start.params;
    let estimate = &start.estimate;
    let (tradeoff_svg, tradeoff_legend) = tradeoff(start, palette, sim_points);
    WhatIf {
        context: format!(
            "Starting from {}: {}, {} per record, carrier window {}.",
            start
                .scenario
                .clone()
                .unwrap_or_else(|| "the seed's figures".to_string()),
            rate_per_s(base.rate_per_s),
            human_bytes(base.bytes_per_record),
            human_duration(base.carrier_window_s)
        ),
        controls: controls(start),
        outputs: outputs(start),
        cheapest: human_duration(estimate.cheapest_retention_s),
        cheapest_cost: show(Quantity::UsdPerDay, estimate.cheapest_total_cost_per_day),
        decision: start
            .decision
            .as_ref()
            .map_or_else(|| "none".to_string(), |c| c.retention.clone()),
        decision_note: start.decision.as_ref().map_or_else(
            || why_none(start),
            |c| {
                format!(
                    "{} per copy, {} duplicates/day, {}",
                    human_bytes(c.store_bytes),
                    human_count(c.duplicate_labels_per_day),
                    show(Quantity::UsdPerDay, c.total_cost_per_day)
                )
            },
        ),
        tradeoff_table: tradeoff_table(estimate),
        tradeoff_svg,
        tradeoff_legend,
    }
}

/// Why no retention is recommended, naming the budget that blocks it: the sentence the page's
/// script writes (`whyNone`) once a control moves, from the same figures.
fn why_none(start: &WhatIfStart) -> String {
    let t = &start.targets;
    let Some(under) = start.weighed.iter().find(|c| c.meets_duplicates) else {
        return format!(
            "no retention up to {} keeps duplicates under {}/day (the duplicates target blocks it)",
            human_duration(start.retry.max_horizon_s()),
            human_count(t.max_duplicates_per_day)
        );
    };
    let mut broken = Vec::new();
    if let Some(gb) = t.max_store_gb.filter(|_| !under.meets_store) {
        broken.push(format!(
            "the store budget of {} (it needs {} per copy)",
            human_bytes(gb * 1e9),
            human_bytes(under.store_checked_bytes())
        ));
    }
    if let Some(usd) = t.max_cost_per_day.filter(|_| !under.meets_cost) {
        broken.push(format!(
            "the cost budget of {}/day (it costs {}/day)",
            crate::format::usd(usd),
            crate::format::usd(under.cost_checked_per_day)
        ));
    }
    format!(
        "{} is the shortest retention under {} duplicates/day, and every one that is breaks {}",
        under.retention,
        human_count(t.max_duplicates_per_day),
        broken.join(" and ")
    )
}

/// The trade-off chart at the start, and the caption of what it draws.
fn tradeoff(
    start: &WhatIfStart,
    palette: &RatePalette,
    sim_points: &[SimPoint],
) -> (String, String) {
    let base = &start.params;
    let estimate = &start.estimate;
    let rows = sweep_rows(estimate);
    let limits = charts::Limits {
        store_bytes: start.targets.max_store_gb.map(|gb| gb * 1e9),
        duplicates_per_day: Some(start.targets.max_duplicates_per_day),
        cost_per_day: start.targets.max_cost_per_day,
    };
    match charts::tradeoff(&charts::Tradeoff {
        rows: &rows,
        current_s: base.retention_s,
        cheapest_s: estimate.cheapest_retention_s,
        // The model's own decision at these inputs, as the script draws it (it weighs no
        // bytes-per-record interval).
        recommended_s: start.model_decision.as_ref().map(|c| c.retention_s),
        colour: palette.colour(base.rate_per_s),
        sims: sim_points,
        limits: &limits,
    }) {
        Ok(d) => (d.svg, d.legend),
        Err(e) => (svg_or_note(Err(e)), String::new()),
    }
}

/// Each control with the run's own value selected.
fn controls(start: &WhatIfStart) -> Vec<Control> {
    CONTROLS
        .iter()
        .map(|(name, label, unit, kind, values)| {
            let own = own_value(start, name);
            let values = control_steps(start, name, values);
            let index = values
                .iter()
                .position(|v| (v - own).abs() <= own.abs() * 1e-12)
                .unwrap_or(0);
            Control {
                name,
                label,
                unit,
                max_index: values.len().saturating_sub(1),
                index,
                text: control_text(name, *kind, own),
            }
        })
        .collect()
}

/// The model's figures at the start, or the input of the same name (bytes per record).
fn outputs(start: &WhatIfStart) -> Vec<Output> {
    OUTPUTS
        .iter()
        .map(|(name, label, kind, big)| {
            let v = start
                .figures
                .and_then(|f| f.get(name))
                .unwrap_or_else(|| param(&start.params, name));
            Output {
                name,
                label,
                text: show(*kind, v),
                value: v,
                big: *big,
            }
        })
        .collect()
}

fn tradeoff_table(e: &model::Estimate) -> DataTable {
    DataTable {
        head: vec!["Retention", "Store size", "Duplicate labels", "Daily cost"],
        rows: sweep_rows(e)
            .iter()
            .map(|r| {
                vec![
                    human_duration(r.retention_s),
                    human_bytes(r.store_bytes),
                    show(Quantity::PerDay, r.duplicates_per_day),
                    show(Quantity::UsdPerDay, r.total_cost_per_day),
                ]
            })
            .collect(),
    }
}

fn sweep_rows(e: &model::Estimate) -> Vec<TradeoffRow> {
    e.retention_sweep
        .iter()
        .map(|r| TradeoffRow {
            retention_s: r.retention_s,
            store_bytes: r.store_bytes,
            duplicates_per_day: r.duplicate_labels_per_day,
            storage_cost_per_day: r.storage_cost_per_day,
            duplicate_cost_per_day: r.duplicate_cost_per_day,
            total_cost_per_day: r.total_cost_per_day,
        })
        .collect()
}

/// The simulated runs to put on the trade-off. Only sizing runs (no line of defence switched
/// off: `sim::deviations`, decided in `run`) at the panel's starting traffic are comparable
/// points: a failure demonstration (a short lease, say) would sit on the line while measuring
/// something else.
pub(super) fn sim_points(summary: &Summary, base: &ModelParams) -> Vec<SimPoint> {
    summary
        .scenarios
        .iter()
        .filter(|s| s.kind == ScenarioKind::Sizing)
        .flat_map(|s| s.runs.iter())
        .filter(|r| {
            let p = &r.model.params;
            p.rate_per_s == base.rate_per_s
                && p.timeout_fraction == base.timeout_fraction
                && p.done_fraction == base.done_fraction
                && p.carrier_window_s == base.carrier_window_s
        })
        .map(|r| SimPoint {
            retention_s: r.retention_s,
            store: triple(&r.figures.store_bytes),
            duplicates: triple(&r.figures.duplicate_labels_per_day),
            cost: triple(&r.figures.total_cost_per_day),
        })
        .collect()
}

fn triple(f: &Figure) -> (f64, f64, f64) {
    (f.ci95_low, f.estimate, f.ci95_high)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_include_the_runs_own_value() {
        let v = control_values(&[1.0, 3.0], 2.0);
        assert_eq!(v, vec![1.0, 2.0, 3.0]);
        assert_eq!(control_values(&[1.0, 3.0], 3.0), vec![1.0, 3.0]);
    }
}
