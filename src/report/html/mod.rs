//! The single-page HTML report: view structs with every value already formatted for people
//! (criterion's split between numbers for analysis and text for reading), rendered with the
//! embedded minijinja template.
//!
//! The page is self-contained: CSS, SVG, script and data are inline and nothing is fetched.
//! Without script it shows every figure of the run; with script the "What if?" panel
//! re-evaluates [`crate::model::FORMULAS`] in the browser (the strings are embedded, not
//! copied into the script), so moving a control gives what `idemcalc estimate` would print.

use super::charts::{self, Bar, KeyLine, RatePalette, SimPoint, TradeoffRow, Window};
use super::vocabulary::{self, Quantity, budget_label, budget_value, show};
use super::{RunResult, ScenarioResult, Status, Summary};
use crate::decision::{Choice, Recommendation};
use crate::format::{
    human_bytes, human_count, human_duration, latency, percent, rate_per_s, significant, thousands,
    usd,
};
use crate::model::{self, ModelParams};
use crate::run::results::{ScenarioKind, WhatIfStart};
use crate::sim::replay::Figure;
use serde::Serialize;

const TEMPLATE: &str = include_str!("../templates/report.html.j2");
const CSS: &str = include_str!("../templates/report.css");
const SCRIPT: &str = include_str!("../templates/report.js");

#[derive(Debug, thiserror::Error)]
pub enum HtmlError {
    #[error("the report template: {0}")]
    Template(#[from] minijinja::Error),
    #[error("embedding the model as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// A measured figure: estimate, 95 % interval and the model's value, as text.
#[derive(Debug, Clone, Serialize)]
struct FigureView {
    label: &'static str,
    estimate: String,
    interval: String,
    model: String,
}

fn interval(kind: Quantity, f: &Figure) -> String {
    format!("{} – {}", show(kind, f.ci95_low), show(kind, f.ci95_high))
}

fn figure_view(label: &'static str, kind: Quantity, f: &Figure) -> FigureView {
    FigureView {
        label,
        estimate: show(kind, f.estimate),
        interval: interval(kind, f),
        model: show(kind, f.analytic),
    }
}

/// A steady-state figure, or why the run has none.
fn steady_view(label: &'static str, kind: Quantity, f: &Figure, r: &RunResult) -> FigureView {
    if steady_reached(r) {
        figure_view(label, kind, f)
    } else {
        FigureView {
            label,
            estimate: "not reached".into(),
            interval: not_reached(r),
            model: show(kind, f.analytic),
        }
    }
}

#[derive(Debug, Clone, Serialize)]
struct Card {
    label: &'static str,
    value: String,
    interval: String,
    model: String,
}

#[derive(Debug, Clone, Serialize)]
struct VerdictView {
    budget: &'static str,
    label: &'static str,
    estimate: String,
    interval: String,
    limit: String,
    status: Status,
    status_text: &'static str,
}

#[derive(Debug, Clone, Serialize)]
struct Signal {
    label: &'static str,
    value: String,
    /// What the seed's design expects at the run's inputs.
    expected: String,
    /// The seed's failure row this signal detects.
    detects: &'static str,
    lit: bool,
}

#[derive(Debug, Clone, Serialize)]
struct RunView {
    title: String,
    sampling: String,
    figures: Vec<FigureView>,
    verdicts: Vec<VerdictView>,
    signals: Vec<Signal>,
    invariants: String,
    invariants_hold: bool,
    outcomes_svg: String,
    keys_svg: String,
    outcomes_table: DataTable,
    keys_table: DataTable,
}

#[derive(Debug, Clone, Serialize)]
struct EventRow {
    when: String,
    lane: String,
    text: String,
}

#[derive(Debug, Clone, Serialize)]
struct TimelineView {
    svg: String,
    events: Vec<EventRow>,
    responses: Vec<EventRow>,
    summary: String,
}

#[derive(Debug, Clone, Serialize)]
struct ScenarioView {
    id: String,
    kind: ScenarioKind,
    name: String,
    file: String,
    description: String,
    deviations: Vec<String>,
    badge: &'static str,
    badge_text: String,
    runs: Vec<RunView>,
    timeline: Option<TimelineView>,
}

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
struct WhatIf {
    context: String,
    controls: Vec<Control>,
    outputs: Vec<Output>,
    cheapest: String,
    cheapest_cost: String,
    /// The decision rule at the panel's starting inputs (no bytes-per-record interval).
    decision: String,
    decision_note: String,
    tradeoff_svg: String,
    tradeoff_table: DataTable,
}

#[derive(Debug, Clone, Serialize)]
struct ChartView {
    id: &'static str,
    title: String,
    svg: String,
    note: String,
    table: Option<DataTable>,
}

/// The values behind a chart, as a table: what a keyboard or screen-reader user reads instead
/// of hovering over points.
#[derive(Debug, Clone, Serialize)]
struct DataTable {
    head: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

#[derive(Debug, Clone, Serialize)]
struct Page {
    title: String,
    subtitle: String,
    verdict: String,
    verdict_class: &'static str,
    broken: Vec<String>,
    decision: Option<DecisionView>,
    legend: &'static str,
    sizing_rows: Vec<GlanceRow>,
    failure_rows: Vec<GlanceRow>,
    stores: Vec<StoreView>,
    /// The retention the store comparison measured at and the one it prices at.
    stores_measured_at: String,
    stores_priced_at: String,
    comparison: Option<ComparisonView>,
    whatif: WhatIf,
    charts: Vec<ChartView>,
    scenarios: Vec<ScenarioView>,
    formulas: Vec<(String, String, String)>,
}

/// A chart, or the reason it could not be drawn, as the page shows it.
fn svg_or_note(r: Result<String, charts::ChartError>) -> String {
    r.unwrap_or_else(|e| {
        format!(
            "<p class=\"note\">Chart not drawn: {}</p>",
            charts::escape(&e.to_string())
        )
    })
}

fn slug(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!("sc-{}", s.trim_matches('-'))
}

/// The controls of the "What if?" panel: each steps through values people configure, plus the
/// run's own value. `name` is the model input it sets; the page reads `#retention=259200`
/// style URL fragments with the `param` names below.
const CONTROLS: &[(&str, &str, &str, Quantity, &[f64])] = &[
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
];

/// The one control that is a decision target, not a model input.
const TARGET: &str = "max_duplicates_per_day";

/// The controls that are payload sizes, not model inputs: the page moves the bytes per record by
/// the change they make to `model::record_bytes` (key + hash + response + overhead), starting
/// from the run's own sizes, so at the start the measured bytes per record stands unchanged.
const KEY: &str = "key_bytes";
const RESPONSE: &str = "response_bytes";

/// The figures the panel recomputes, in the order shown.
const OUTPUTS: &[(&str, &str, Quantity, bool)] = &[
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
fn own_value(start: &WhatIfStart, name: &str) -> f64 {
    match name {
        TARGET => start.targets.max_duplicates_per_day,
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

/// A control's values with the run's own merged in, sorted.
fn control_values(values: &[f64], own: f64) -> Vec<f64> {
    let mut v: Vec<f64> = values.to_vec();
    if own.is_finite() && !v.iter().any(|x| (x - own).abs() <= own.abs() * 1e-12) {
        v.push(own);
    }
    v.sort_by(f64::total_cmp);
    v
}

/// The data the page's script needs: the model's formulas exactly as Rust evaluates them, the
/// distribution, the starting inputs, and values to check its own formatting and arithmetic
/// against at load (the ones `run` evaluated at the start).
fn model_json(start: &WhatIfStart, sims: &[SimPoint]) -> Result<String, HtmlError> {
    let base = &start.params;
    let dist = &start.retry;
    let mut json = model::formulas_json();
    let controls: Vec<serde_json::Value> = CONTROLS
        .iter()
        .map(|(name, label, _, kind, values)| {
            serde_json::json!({
                "name": name, "label": label, "kind": kind,
                "values": control_values(values, own_value(start, name)),
            })
        })
        .collect();
    // The decision the script must reproduce at the starting inputs (without the
    // bytes-per-record interval, which the panel does not move).
    let decided = start.decision.as_ref().map(|c| c.retention_s);
    let targets = &start.targets;
    let outputs: Vec<serde_json::Value> = OUTPUTS
        .iter()
        .map(|(name, _, kind, _)| serde_json::json!({"name": name, "kind": kind}))
        .collect();
    let figures = start.figures;
    let estimate = &start.estimate;
    // Values whose formatting the script must reproduce exactly: the run's figures, and the
    // edge cases of rounding (exact ties, unit boundaries).
    let mut checks: Vec<(Quantity, f64)> = Vec::new();
    for (name, _, kind, _) in OUTPUTS {
        checks.push((*kind, figures.and_then(|f| f.get(name)).unwrap_or(f64::NAN)));
    }
    for r in &estimate.retention_sweep {
        checks.push((Quantity::Bytes, r.store_bytes));
        checks.push((Quantity::UsdPerDay, r.total_cost_per_day));
        checks.push((Quantity::PerDay, r.duplicate_labels_per_day));
        checks.push((Quantity::Duration, r.retention_s));
    }
    for v in [
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
    ] {
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
    for v in [
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
    ] {
        checks.push((Quantity::Duration, v));
    }
    let checks: Vec<serde_json::Value> = checks
        .into_iter()
        .filter(|(_, v)| v.is_finite())
        .map(|(k, v)| serde_json::json!([k, v, show(k, v)]))
        .collect();
    let fragment: Vec<(&str, &str)> = vec![
        ("bytes_per_record", "bytes_per_record"),
        ("carrier_window", "carrier_window_s"),
        ("replicas", "replicas"),
        ("max_duplicates", TARGET),
        ("key_bytes", KEY),
        ("response_bytes", RESPONSE),
        ("retention", "retention_s"),
        ("rate", "rate_per_s"),
        ("label_price", "label_price_usd"),
        ("storage_price", "storage_usd_per_gb_month"),
        ("timeout_rate", "timeout_fraction"),
        ("timeout_fraction", "timeout_fraction"),
        ("done_fraction", "done_fraction"),
    ];
    if let Some(o) = json.as_object_mut() {
        o.insert("base".into(), serde_json::to_value(base)?);
        o.insert("distribution".into(), serde_json::to_value(dist)?);
        o.insert("controls".into(), serde_json::Value::Array(controls));
        o.insert("outputs".into(), serde_json::Value::Array(outputs));
        o.insert("fragment".into(), serde_json::to_value(fragment)?);
        // Simulated runs at the page's starting inputs: still comparable while only the
        // retention moves, since each sits at its own retention.
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
        o.insert("sim_points".into(), serde_json::Value::Array(sims));
        o.insert("check_formats".into(), serde_json::Value::Array(checks));
        o.insert("check_figures".into(), serde_json::to_value(figures)?);
        o.insert(
            "check_cheapest_s".into(),
            serde_json::to_value(estimate.cheapest_retention_s)?,
        );
        o.insert("targets".into(), serde_json::to_value(targets)?);
        o.insert(
            "payload".into(),
            serde_json::json!({ "key_bytes": start.key_bytes, "response_bytes": start.response_bytes }),
        );
        o.insert(
            "horizon_s".into(),
            serde_json::to_value(dist.max_horizon_s())?,
        );
        o.insert("check_decision_s".into(), serde_json::to_value(decided)?);
    }
    // Nothing in a script element may look like `</script>` or `<!--`; `<` only occurs inside
    // JSON strings, where `\u003c` reads the same.
    Ok(serde_json::to_string(&json)?.replace('<', "\\u003c"))
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

fn triple(f: &Figure) -> (f64, f64, f64) {
    (f.ci95_low, f.estimate, f.ci95_high)
}

/// The store is measured from one retention (and a sweep) after the start; a run whose arrivals
/// stop before that has no steady store to show.
fn steady_reached(r: &RunResult) -> bool {
    r.sampling.arrival_seconds > r.retention_s + r.config.sweep_period_s
}

fn not_reached(r: &RunResult) -> String {
    format!(
        "arrivals ({}) stop before one retention ({}) has passed",
        rough_duration(r.sampling.arrival_seconds),
        r.retention
    )
}

fn verdict_views(r: &RunResult) -> Vec<VerdictView> {
    r.verdicts
        .iter()
        .map(|v| VerdictView {
            budget: v.budget,
            label: budget_label(v.budget),
            estimate: budget_value(v.budget, v.figure.estimate),
            interval: format!(
                "{} – {}",
                budget_value(v.budget, v.figure.ci95_low),
                budget_value(v.budget, v.figure.ci95_high)
            ),
            limit: budget_value(v.budget, v.limit),
            status: v.status,
            status_text: match v.status {
                Status::Ok => "holds",
                Status::AtRisk => "holds, but the interval reaches past the limit",
                Status::Broken => "BROKEN",
            },
        })
        .collect()
}

fn run_view(r: &RunResult, palette: &RatePalette) -> RunView {
    let f = &r.figures;
    let colour = palette.colour(r.rate_per_s);
    let d = &r.detection;
    // A signal warns only above what the seed's design expects at this run's inputs (the
    // model's figure): the healthy baseline has a few late retries and duplicates by design.
    let m = &r.model;
    let signal = |label, value: f64, expected: f64, detects| Signal {
        label,
        value: show(Quantity::PerDay, value),
        expected: show(Quantity::PerDay, expected),
        detects,
        lit: value > 2.0 * expected + 1e-9,
    };
    let signals = vec![
        signal(
            "Parcels with two labels",
            d.parcels_with_two_labels_per_day,
            m.duplicate_labels_per_day,
            "a new key per attempt; retention shorter than the retry horizon",
        ),
        signal(
            "Requests carrying a purged key",
            d.purged_key_requests_per_day,
            m.late_after_purge_per_day,
            "retention shorter than the retry horizon",
        ),
        signal(
            "Replays to another caller",
            d.cross_caller_replays_per_day,
            0.0,
            "keys scoped globally, not per caller",
        ),
        signal(
            "Carrier invoice lines without a label",
            d.invoice_lines_without_label_per_day,
            m.duplicate_labels_per_day,
            "downstream call without a key; effect and record in different stores",
        ),
        signal(
            "Takeovers while the owner still runs",
            d.takeovers_while_running_per_day,
            0.0,
            "lease shorter than the slowest downstream call",
        ),
    ];
    let status_colour = |status: u16| match status {
        200..=299 => charts::OK,
        409 => charts::WARN,
        _ => charts::BAD,
    };
    let outcome_bars: Vec<Bar> = r
        .outcomes
        .iter()
        .map(|o| {
            let name = o.code.clone().unwrap_or_else(|| {
                serde_json::to_value(o.outcome)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            });
            Bar {
                label: format!("{} {name}", o.status),
                value: o.per_day,
                interval: None,
                colour: status_colour(o.status),
                hover: format!(
                    "{} {name}: {} at full traffic ({} replayed)",
                    o.status,
                    show(Quantity::PerDay, o.per_day),
                    thousands(o.replayed as f64)
                ),
                text: show(Quantity::PerDay, o.per_day),
            }
        })
        .collect();
    let outcomes_table = DataTable {
        head: vec!["Response", "Per day at full traffic"],
        rows: outcome_bars
            .iter()
            .map(|b| vec![b.label.clone(), b.text.clone()])
            .collect(),
    };
    let outcomes_svg = svg_or_note(charts::bars(
        "outcomes",
        &outcome_bars,
        "Responses per day at full traffic (log scale)",
        true,
        &|v| human_count(v),
        None,
        520,
    ));
    let points: Vec<(f64, f64)> = r
        .sim
        .series
        .iter()
        .map(|p| (p.t_s, p.keys_estimated))
        .collect();
    let keys_table = DataTable {
        head: vec!["Simulated time", "Keys in the store"],
        rows: charts::downsample(&points, 13)
            .iter()
            .map(|(t, k)| vec![rough_duration(*t), human_count(*k)])
            .collect(),
    };
    let keys_svg = svg_or_note(charts::keys_over_time(
        &[KeyLine {
            label: rate_per_s(r.rate_per_s),
            colour,
            points,
            retention_s: r.retention_s,
        }],
        false,
        (520, 260),
    ));
    let s = &r.sampling;
    let inv = &r.invariants;
    RunView {
        title: format!("{} · retention {}", rate_per_s(r.rate_per_s), r.retention),
        sampling: format!(
            "{} of arrivals ({} simulated, following the late retries), {} replicate{}; replayed {} intents ({} requests), ordinary calls sampled at {}, timed-out calls at {}.",
            rough_duration(s.arrival_seconds),
            rough_duration(s.simulated_seconds),
            s.replicates,
            if s.replicates == 1 { "" } else { "s" },
            thousands(s.replayed_intents as f64),
            thousands(s.replayed_requests as f64),
            percent(s.sample_ordinary),
            percent(s.sample_timed_out),
        ),
        figures: vec![
            steady_view("Store size (steady)", Quantity::Bytes, &f.store_bytes, r),
            steady_view(
                "Records in the store (steady)",
                Quantity::Count,
                &f.store_records,
                r,
            ),
            figure_view("Bytes per record", Quantity::Bytes, &f.bytes_per_record),
            figure_view(
                "Timed-out calls (first attempts)",
                Quantity::PerDay,
                &f.timed_out_per_day,
            ),
            figure_view(
                "Timed-out attempts (retries too)",
                Quantity::PerDay,
                &f.timed_out_attempts_per_day,
            ),
            figure_view(
                "Retries after the purge",
                Quantity::PerDay,
                &f.late_after_purge_per_day,
            ),
            figure_view(
                "Duplicate labels",
                Quantity::PerDay,
                &f.duplicate_labels_per_day,
            ),
            figure_view(
                "Money on duplicates",
                Quantity::UsdPerDay,
                &f.duplicate_cost_per_day,
            ),
            figure_view("Storage cost", Quantity::UsdPerDay, &f.storage_cost_per_day),
            figure_view(
                "Total daily cost",
                Quantity::UsdPerDay,
                &f.total_cost_per_day,
            ),
            figure_view(
                "Parcels left unlabelled",
                Quantity::PerDay,
                &f.unlabelled_per_day,
            ),
        ],
        verdicts: verdict_views(r),
        signals,
        invariants: format!(
            "integrity {}, most labels per parcel {}, completed keys without a label {}, replays byte-identical {}",
            if inv.integrity_ok { "ok" } else { "FAILED" },
            inv.max_labels_per_parcel,
            inv.completed_without_label,
            if inv.replays_byte_identical {
                "yes"
            } else {
                "NO"
            }
        ),
        invariants_hold: inv.hold,
        outcomes_svg,
        keys_svg,
        outcomes_table,
        keys_table,
    }
}

/// `2_692_336 s` → `31.2d`, `129_600 s` → `36h`: a simulated span to three figures.
fn rough_duration(s: f64) -> String {
    if s >= 2.0 * 86_400.0 {
        format!("{}d", significant(s / 86_400.0, 3))
    } else if s >= 3_600.0 {
        format!("{}h", significant(s / 3_600.0, 3))
    } else if s >= 60.0 {
        format!("{}m", significant(s / 60.0, 3))
    } else {
        secs(s)
    }
}

fn secs(v: f64) -> String {
    format!("{} s", significant(v, 3))
}

fn timeline_view(t: &crate::sim::timeline::TimelineReport) -> TimelineView {
    let mut lanes: Vec<String> = vec!["Caller".into()];
    for e in &t.events {
        if e.lane != "Carrier" && !lanes.contains(&e.lane) {
            lanes.push(e.lane.clone());
        }
    }
    lanes.push("Carrier".into());
    let events = t
        .events
        .iter()
        .map(|e| EventRow {
            when: match e.end_s {
                Some(end) => format!("{}–{}", significant(e.start_s, 3), secs(end)),
                None => secs(e.start_s),
            },
            lane: e.lane.clone(),
            text: e.text.clone(),
        })
        .collect();
    let responses = t
        .responses
        .iter()
        .map(|r| EventRow {
            when: format!("sent {}, answered {}", secs(r.sent_s), secs(r.arrived_s)),
            lane: r.lane.clone(),
            text: format!(
                "{} {}{}",
                r.status,
                r.tracking_no
                    .clone()
                    .or_else(|| r.code.clone())
                    .unwrap_or_default(),
                if r.replayed {
                    " (Idempotent-Replayed: true)"
                } else {
                    ""
                }
            ),
        })
        .collect();
    TimelineView {
        svg: svg_or_note(charts::timeline(&t.events, &lanes)),
        events,
        responses,
        summary: format!(
            "{} label{} stored, {} carrier purchase{}, {} carrier replay{}; integrity {}, most labels per parcel {}.",
            t.labels.len(),
            if t.labels.len() == 1 { "" } else { "s" },
            t.carrier_purchases.len(),
            if t.carrier_purchases.len() == 1 {
                ""
            } else {
                "s"
            },
            t.carrier_replays,
            if t.carrier_replays == 1 { "" } else { "s" },
            if t.invariants.integrity_ok {
                "ok"
            } else {
                "FAILED"
            },
            t.invariants.max_labels_per_parcel
        ),
    }
}

fn scenario_view(s: &ScenarioResult, palette: &RatePalette) -> ScenarioView {
    let statuses: Vec<Status> = s
        .runs
        .iter()
        .flat_map(|r| r.verdicts.iter().map(|v| v.status))
        .collect();
    let broken = statuses.iter().filter(|s| **s == Status::Broken).count();
    let (badge, badge_text) = if statuses.is_empty() {
        (
            "none",
            if s.runs.is_empty() {
                "timeline".to_string()
            } else {
                "no budgets".to_string()
            },
        )
    } else if broken > 0 {
        ("broken", format!("{broken} broken"))
    } else if statuses.contains(&Status::AtRisk) {
        ("at_risk", "at risk".to_string())
    } else {
        ("ok", "budgets hold".to_string())
    };
    ScenarioView {
        id: slug(&s.name),
        kind: s.kind,
        name: s.name.clone(),
        file: s.file.clone(),
        description: s.description.clone(),
        deviations: s.deviations.clone(),
        badge,
        badge_text,
        runs: s.runs.iter().map(|r| run_view(r, palette)).collect(),
        timeline: s.timeline.as_ref().map(timeline_view),
    }
}

/// The decision the page leads with.
#[derive(Debug, Clone, Serialize)]
struct DecisionView {
    scenario: String,
    anchor: String,
    title: String,
    met: bool,
    cards: Vec<Card>,
    notes: Vec<String>,
    optimum: String,
    optimum_is_assumption: bool,
}

fn decision_view(scenario: &ScenarioResult, r: &Recommendation) -> DecisionView {
    let (title, met, c): (String, bool, &Choice) = match (&r.recommended, &r.closest) {
        (Some(c), _) => (format!("Keep keys for {}", c.retention), true, c),
        (None, Some(c)) => (
            format!("No retention meets every target; closest: {}", c.retention),
            false,
            c,
        ),
        (None, None) => (
            "No retention meets the targets or fits the budgets".to_string(),
            false,
            &r.cheapest,
        ),
    };
    let t = &r.targets;
    let store_interval = match c.store_bytes_ci95 {
        Some([lo, hi]) => format!("95% interval {} – {}", human_bytes(lo), human_bytes(hi)),
        None => "no interval: bytes per record not measured".into(),
    };
    let bpr = match r.bytes_per_record_ci95 {
        Some([lo, hi]) => format!(
            "{} per record measured ({} – {})",
            human_bytes(r.bytes_per_record.round()),
            human_bytes(lo.round()),
            human_bytes(hi.round())
        ),
        None => format!("{} per record", human_bytes(r.bytes_per_record.round())),
    };
    let mut cards = vec![
        Card {
            label: "Retention",
            value: c.retention.clone(),
            interval: if met {
                "the shortest that meets every target".into()
            } else {
                "the fewest duplicates inside the budgets".into()
            },
            model: format!(
                "horizon of the retry distribution: {}",
                human_duration(r.horizon_s)
            ),
        },
        Card {
            label: "Store size, one copy",
            value: human_bytes(c.store_bytes),
            interval: store_interval,
            model: format!(
                "{} copies: {}; {bpr}{}",
                r.replicas,
                human_bytes(c.store_bytes_all_replicas),
                t.max_store_gb
                    .map(|gb| format!("; budget {}", human_bytes(gb * 1e9)))
                    .unwrap_or_default()
            ),
        },
        Card {
            label: "Real duplicate labels",
            value: crate::format::count_per_day(c.duplicate_labels_per_day),
            interval: format!(
                "target at most {}",
                crate::format::count_per_day(t.max_duplicates_per_day)
            ),
            model: format!(
                "{} retries arrive after the purge{}",
                crate::format::count_per_day(c.late_after_purge_per_day),
                if c.relies_on_carrier_window {
                    "; the carrier's key window catches most"
                } else {
                    ""
                }
            ),
        },
        Card {
            label: "Daily cost",
            value: show(Quantity::UsdPerDay, c.total_cost_per_day),
            interval: format!(
                "storage {} + duplicates {}",
                usd(c.storage_cost_per_day),
                usd(c.total_cost_per_day - c.storage_cost_per_day)
            ),
            model: t
                .max_cost_per_day
                .map(|m| format!("budget {}", show(Quantity::UsdPerDay, m)))
                .unwrap_or_else(|| "no cost budget".into()),
        },
    ];
    if !met {
        cards[0].label = "Closest retention";
    }
    let o = &r.cheapest;
    let optimum = format!(
        "Cheapest retention: {} at {} ({} real duplicates, {} per copy){}",
        o.retention,
        show(Quantity::UsdPerDay, o.total_cost_per_day),
        crate::format::count_per_day(o.duplicate_labels_per_day),
        human_bytes(o.store_bytes),
        if r.cheapest_is_assumption {
            format!(
                ", which is the retry distribution's horizon ({}): an assumption, not a measurement.",
                human_duration(r.horizon_s)
            )
        } else {
            ".".to_string()
        }
    );
    DecisionView {
        scenario: scenario.name.clone(),
        anchor: slug(&scenario.name),
        title,
        met,
        cards,
        notes: r.notes.clone(),
        optimum,
        optimum_is_assumption: r.cheapest_is_assumption,
    }
}

/// The verdict marks on the page: text symbols every font has (the Markdown's emoji render as
/// empty boxes where no emoji font is installed); the colour and the words carry the rest.
fn page_mark(status: Status) -> &'static str {
    match status {
        Status::Ok => "✓",
        Status::AtRisk => "⚠",
        Status::Broken => "✗",
    }
}

/// The legend of [`page_mark`].
const PAGE_LEGEND: &str = "✓ holds: the whole 95% interval is within the limit · ⚠ at risk: the estimate is within the limit, the interval reaches past it · ✗ broken: the estimate is past the limit";

/// One budget's verdict in a table cell.
#[derive(Debug, Clone, Serialize)]
struct Mark {
    status: Status,
    mark: &'static str,
    text: String,
}

/// One row of the at-a-glance tables: a scenario at one retention.
#[derive(Debug, Clone, Serialize)]
struct GlanceRow {
    scenario: String,
    anchor: String,
    retention: String,
    deviations: String,
    store: String,
    store_interval: String,
    bytes_per_record: String,
    duplicates: String,
    duplicates_interval: String,
    unlabelled: String,
    cost: String,
    cost_interval: String,
    marks: Vec<Mark>,
    recommended: bool,
}

fn glance_row(s: &ScenarioResult, r: &RunResult) -> GlanceRow {
    let f = &r.figures;
    let steady = steady_reached(r);
    let recommended = s
        .decision
        .as_ref()
        .and_then(|d| d.recommended.as_ref())
        .is_some_and(|c| (c.retention_s - r.retention_s).abs() < 1e-6);
    GlanceRow {
        scenario: s.name.clone(),
        anchor: slug(&s.name),
        retention: r.retention.clone(),
        deviations: s.deviations.join(", "),
        store: if steady {
            show(Quantity::Bytes, f.store_bytes.estimate)
        } else {
            "not reached".into()
        },
        store_interval: if steady {
            interval(Quantity::Bytes, &f.store_bytes)
        } else {
            not_reached(r)
        },
        bytes_per_record: human_bytes(f.bytes_per_record.estimate.round()),
        duplicates: show(Quantity::PerDay, f.duplicate_labels_per_day.estimate),
        duplicates_interval: interval(Quantity::PerDay, &f.duplicate_labels_per_day),
        unlabelled: show(Quantity::PerDay, f.unlabelled_per_day.estimate),
        cost: show(Quantity::UsdPerDay, f.total_cost_per_day.estimate),
        cost_interval: interval(Quantity::UsdPerDay, &f.total_cost_per_day),
        marks: r
            .verdicts
            .iter()
            .map(|v| Mark {
                status: v.status,
                mark: page_mark(v.status),
                text: format!(
                    "{} {} ≤ {}",
                    budget_label(v.budget),
                    budget_value(v.budget, v.figure.estimate),
                    budget_value(v.budget, v.limit)
                ),
            })
            .collect(),
        recommended,
    }
}

/// One store of the comparison (`report --compare-store`), formatted.
#[derive(Debug, Clone, Serialize)]
struct StoreView {
    store: String,
    bytes_per_record: String,
    bytes_interval: String,
    store_size: String,
    store_interval: String,
    priced_as: String,
    cost: String,
    duplicates: String,
    duplicates_interval: String,
    caveat: Option<&'static str>,
}

fn store_views(rows: &[crate::run::StoreRow]) -> Vec<StoreView> {
    rows.iter()
        .map(|r| StoreView {
            store: r.store.clone(),
            bytes_per_record: human_bytes(r.bytes_per_record.estimate.round()),
            bytes_interval: interval(Quantity::Bytes, &r.bytes_per_record),
            store_size: show(Quantity::Bytes, r.store_bytes),
            store_interval: format!(
                "{} – {}",
                show(Quantity::Bytes, r.store_bytes_ci95[0]),
                show(Quantity::Bytes, r.store_bytes_ci95[1])
            ),
            priced_as: format!(
                "{} at {}/GB-month",
                r.priced_as,
                show(Quantity::Usd, r.usd_per_gb_month)
            ),
            cost: show(Quantity::UsdPerDay, r.storage_cost_per_day),
            duplicates: show(Quantity::PerDay, r.duplicate_labels_per_day.estimate),
            duplicates_interval: interval(Quantity::PerDay, &r.duplicate_labels_per_day),
            caveat: r.caveat,
        })
        .collect()
}

fn glance_rows(summary: &Summary, kind: ScenarioKind) -> Vec<GlanceRow> {
    summary
        .scenarios
        .iter()
        .filter(|s| s.kind == kind)
        .flat_map(|s| s.runs.iter().map(move |r| glance_row(s, r)))
        .collect()
}

/// A row of the comparison with a baseline.
#[derive(Debug, Clone, Serialize)]
struct ChangeRow {
    scenario: String,
    retention: String,
    figure: &'static str,
    before: String,
    after: String,
    change: String,
    real: bool,
}

#[derive(Debug, Clone, Serialize)]
struct ComparisonView {
    baseline: String,
    summary: String,
    rows: Vec<ChangeRow>,
}

fn comparison_view(c: &crate::run::Comparison) -> ComparisonView {
    let kind = vocabulary::change_quantity;
    let real = c.changes.iter().filter(|x| x.real).count();
    ComparisonView {
        baseline: c.baseline.clone(),
        summary: format!(
            "{} figures compared; {real} changed by more than sampling explains (|z| > {:.2}, a 5% family-wise false-alarm rate).",
            c.changes.len(),
            c.z_threshold
        ),
        rows: c
            .changes
            .iter()
            .map(|x| ChangeRow {
                scenario: x.scenario.clone(),
                retention: x.retention.clone(),
                figure: vocabulary::change_label(x.figure),
                before: show(kind(x.figure), x.before.estimate),
                after: show(kind(x.figure), x.after.estimate),
                change: vocabulary::relative_text(x),
                real: x.real,
            })
            .collect(),
    }
}

/// Renders the page.
pub fn render(summary: &Summary) -> Result<String, HtmlError> {
    let palette = RatePalette::new(
        summary
            .scenarios
            .iter()
            .flat_map(|s| s.runs.iter().map(|r| r.rate_per_s)),
    );
    let decided = summary.decision.as_ref().and_then(|d| {
        summary
            .scenarios
            .iter()
            .find(|s| s.name == d.scenario)
            .map(|s| (s, &d.recommendation))
    });
    // The what-if panel starts where `run::whatif` evaluated the model and the decision: the
    // decision's scenario at the bytes per record it measured, so the panel and the headline
    // size the same store.
    let start = &summary.whatif;
    let base = start.params;
    let dist = &start.retry;
    let base_estimate = &start.estimate;
    let base_figures = start.figures;

    // What if?
    let controls = CONTROLS
        .iter()
        .map(|(name, label, unit, kind, values)| {
            let own = own_value(start, name);
            let values = control_values(values, own);
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
                text: show(*kind, own),
            }
        })
        .collect();
    let outputs = OUTPUTS
        .iter()
        .map(|(name, label, kind, big)| {
            let v = base_figures
                .and_then(|f| f.get(name))
                .unwrap_or_else(|| param(&base, name));
            Output {
                name,
                label,
                text: show(*kind, v),
                value: v,
                big: *big,
            }
        })
        .collect();
    let primary_colour = palette.colour(base.rate_per_s);
    // Only sizing runs are comparable points on the trade-off: a failure demonstration (a
    // short lease, say) would sit on the line while measuring something else.
    let sim_points: Vec<SimPoint> = summary
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
                && r.deviations_free()
        })
        .map(|r| SimPoint {
            retention_s: r.retention_s,
            store: triple(&r.figures.store_bytes),
            duplicates: triple(&r.figures.duplicate_labels_per_day),
            cost: triple(&r.figures.total_cost_per_day),
        })
        .collect();
    let start_decision = &start.decision;
    let whatif = WhatIf {
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
        controls,
        outputs,
        cheapest: human_duration(base_estimate.cheapest_retention_s),
        cheapest_cost: show(
            Quantity::UsdPerDay,
            base_estimate.cheapest_total_cost_per_day,
        ),
        decision: start_decision
            .as_ref()
            .map_or_else(|| "none".to_string(), |c| c.retention.clone()),
        decision_note: start_decision.as_ref().map_or_else(
            || "no retention up to the horizon meets the target and the budgets".to_string(),
            |c| {
                format!(
                    "{} per copy, {} duplicates/day, {}",
                    human_bytes(c.store_bytes),
                    human_count(c.duplicate_labels_per_day),
                    show(Quantity::UsdPerDay, c.total_cost_per_day)
                )
            },
        ),
        tradeoff_table: DataTable {
            head: vec!["Retention", "Store size", "Duplicate labels", "Daily cost"],
            rows: sweep_rows(base_estimate)
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
        },
        tradeoff_svg: svg_or_note(charts::tradeoff(
            &sweep_rows(base_estimate),
            base.retention_s,
            base_estimate.cheapest_retention_s,
            primary_colour,
            &sim_points,
        )),
    };

    // Charts across scenarios.
    let mut charts_out = Vec::new();
    let mut windows: Vec<Window> = Vec::new();
    for s in &summary.scenarios {
        for r in &s.runs {
            if !windows.iter().any(|w| w.seconds == r.retention_s) {
                windows.push(Window {
                    seconds: r.retention_s,
                    label: format!("{} purge", human_duration(r.retention_s)),
                    colour: if windows.is_empty() {
                        charts::BAD
                    } else {
                        charts::MUTED
                    },
                });
            }
        }
    }
    windows.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
    if windows.is_empty() {
        windows.push(Window {
            seconds: base.retention_s,
            label: format!("{} purge", human_duration(base.retention_s)),
            colour: charts::BAD,
        });
    }
    let retry_table = DataTable {
        head: vec!["Delay after the first attempt", "Share of retries arrived"],
        rows: dist
            .points()
            .iter()
            .map(|(t, c)| vec![human_duration(*t), percent(*c)])
            .collect(),
    };
    charts_out.push(ChartView {
        table: Some(retry_table),
        id: "chart-retry",
        title: "How late do retries arrive?".into(),
        svg: svg_or_note(charts::retry_cdf(dist, &windows)),
        note: format!(
            "The seed's illustrative table as points, interpolated linearly in log-time; below {} the mass is spread log-uniformly from {}, after {} it runs out at {}. A retry later than a purge line finds its key gone: at {} that is {} of timed-out calls, {} a day.",
            human_duration(dist.points()[0].0),
            match dist.head() {
                crate::traffic::Head::LogUniform { min_delay_s } => human_duration(min_delay_s),
                crate::traffic::Head::AtFirstPoint => human_duration(dist.points()[0].0),
            },
            human_duration(dist.points().last().map_or(0.0, |p| p.0)),
            human_duration(dist.max_horizon_s()),
            human_duration(base.retention_s),
            percent(base_estimate.late_after_purge_fraction),
            human_count(base_estimate.late_after_purge_per_day),
        ),
    });
    let mut seen_rates: Vec<f64> = Vec::new();
    let mut lines = Vec::new();
    for s in &summary.scenarios {
        for r in s.runs.iter().take(1) {
            if seen_rates.contains(&r.rate_per_s) {
                continue;
            }
            seen_rates.push(r.rate_per_s);
            lines.push(KeyLine {
                label: format!("{} ({})", rate_per_s(r.rate_per_s), s.name),
                colour: palette.colour(r.rate_per_s),
                points: r
                    .sim
                    .series
                    .iter()
                    .map(|p| (p.t_s, p.keys_estimated))
                    .collect(),
                retention_s: r.retention_s,
            });
        }
    }
    if !lines.is_empty() {
        let rows = lines
            .iter()
            .flat_map(|l| {
                charts::downsample(&l.points, 9)
                    .into_iter()
                    .map(|(t, k)| vec![l.label.clone(), rough_duration(t), human_count(k)])
                    .collect::<Vec<_>>()
            })
            .collect();
        charts_out.push(ChartView {
            table: Some(DataTable {
                head: vec!["Run", "Simulated time", "Keys in the store"],
                rows,
            }),
            id: "chart-keys",
            title: "Keys in the store over simulated time".into(),
            svg: svg_or_note(charts::keys_over_time(&lines, true, (1000, 300))),
            note: "Records in the store, scaled to full traffic, one line per rate (the first scenario at that rate). The store fills for one retention, then the sweeper purges what expired and it levels off; the zooms show two hours of that steady state, where keys pile up between sweeps and each sweep cuts them back.".into(),
        });
    }
    let bpr: Vec<Bar> = summary
        .scenarios
        .iter()
        .flat_map(|s| s.runs.iter().map(move |r| (s, r)))
        .map(|(s, r)| {
            let f = &r.figures.bytes_per_record;
            let label = if s.runs.len() > 1 {
                format!("{} ({})", s.name, r.retention)
            } else {
                s.name.clone()
            };
            Bar {
                label: label.clone(),
                value: f.estimate,
                interval: (f.ci95_high > f.ci95_low).then_some((f.ci95_low, f.ci95_high)),
                colour: palette.colour(r.rate_per_s),
                hover: format!(
                    "{label}: {} per record measured (model assumes {})",
                    human_bytes(f.estimate.round()),
                    human_bytes(f.analytic)
                ),
                text: human_bytes(f.estimate.round()),
            }
        })
        .collect();
    if !bpr.is_empty() {
        charts_out.push(ChartView {
            table: Some(DataTable {
                head: vec!["Run", "Bytes per record"],
                rows: bpr.iter().map(|b| vec![b.label.clone(), b.text.clone()]).collect(),
            }),
            id: "chart-bytes",
            title: "Measured against assumed bytes per record".into(),
            svg: svg_or_note(charts::bars(
                "bytes_per_record",
                &bpr,
                "Bytes per key record, rows and both indexes (SQLite)",
                false,
                &|v| human_bytes(v),
                Some((base.bytes_per_record, format!("assumed {}", human_bytes(base.bytes_per_record)))),
                1000,
            )),
            note: "What one key record takes in the simulated SQLite store (row plus primary-key and expires_at indexes, from dbstat) at the end of the arrivals, against the seed's ~512 B assumption. Pass the measured figure to `idemcalc estimate --bytes-per-record` to size a store like this one; a PostgreSQL row carries more overhead.".into(),
        });
    }
    if let Some(bench) = &summary.bench {
        let mut bars = Vec::new();
        for row in &bench.results {
            if let Some(v) = row.creates_per_s {
                bars.push(Bar {
                    label: format!("{} with keys", row.name),
                    value: v,
                    interval: None,
                    colour: primary_colour,
                    hover: format!(
                        "{}: {} creates/s with keys{}{}",
                        row.name,
                        thousands(v),
                        row.p50_us
                            .map(|p| format!(", p50 {}", latency(p.round() as u64)))
                            .unwrap_or_default(),
                        row.p99_us
                            .map(|p| format!(", p99 {}", latency(p.round() as u64)))
                            .unwrap_or_default()
                    ),
                    text: format!(
                        "{}/s{}",
                        thousands(v),
                        row.overhead_ratio
                            .map(|o| format!(" (×{} overhead)", significant(o, 3)))
                            .unwrap_or_default()
                    ),
                });
            }
            if let Some(v) = row.baseline_creates_per_s {
                bars.push(Bar {
                    label: format!("{} without keys", row.name),
                    value: v,
                    interval: None,
                    colour: charts::MUTED,
                    hover: format!(
                        "{}: {} creates/s without the idempotency layer",
                        row.name,
                        thousands(v)
                    ),
                    text: format!("{}/s", thousands(v)),
                });
            }
        }
        charts_out.push(ChartView {
            table: Some(DataTable {
                head: vec!["Run", "Creates per second"],
                rows: bars.iter().map(|b| vec![b.label.clone(), b.text.clone()]).collect(),
            }),
            id: "chart-bench",
            title: "Engine throughput (from idemcalc bench)".into(),
            svg: svg_or_note(charts::bars("bench", &bars, "Label creates per second", false, &|v| thousands(v), Some((base.peak_rate_per_s, format!("peak {}", rate_per_s(base.peak_rate_per_s)))), 1000)),
            note: "Creates per second the engine sustained in `idemcalc bench`, with the idempotency layer and without it; the red line is the peak rate the store must take.".into(),
        });
    }

    let scenarios: Vec<ScenarioView> = summary
        .scenarios
        .iter()
        .map(|s| scenario_view(s, &palette))
        .collect();
    let checked: usize = summary
        .scenarios
        .iter()
        .map(|s| s.runs.iter().map(|r| r.verdicts.len()).sum::<usize>())
        .sum();
    let (verdict, verdict_class) = if !summary.broken_budgets.is_empty() {
        (
            format!(
                "{} of {} budget checks broken",
                summary.broken_budgets.len(),
                checked
            ),
            "broken",
        )
    } else if checked > 0 {
        (format!("All {checked} budget checks hold"), "ok")
    } else {
        ("No budgets to check".to_string(), "none")
    };
    let simulated = summary
        .scenarios
        .iter()
        .filter(|s| !s.runs.is_empty())
        .count();
    let timelines = summary
        .scenarios
        .iter()
        .filter(|s| s.timeline.is_some())
        .count();
    let page = Page {
        title: "Idempotency-key store: capacity report".into(),
        subtitle: format!(
            "{} {} · {} scenario{} ({} simulated, {} timeline{}) · figures per day at full traffic · same scenarios and seeds, same numbers",
            summary.tool.name,
            summary.tool.version,
            summary.scenarios.len(),
            if summary.scenarios.len() == 1 {
                ""
            } else {
                "s"
            },
            simulated,
            timelines,
            if timelines == 1 { "" } else { "s" }
        ),
        verdict,
        verdict_class,
        broken: summary
            .broken_budgets
            .iter()
            .map(|b| b.describe())
            .collect(),
        decision: decided.map(|(s, r)| decision_view(s, r)),
        legend: PAGE_LEGEND,
        sizing_rows: glance_rows(summary, ScenarioKind::Sizing),
        failure_rows: glance_rows(summary, ScenarioKind::Failure),
        stores: store_views(&summary.stores),
        stores_measured_at: summary
            .stores
            .first()
            .map(|r| r.measured_at.clone())
            .unwrap_or_default(),
        stores_priced_at: summary
            .stores
            .first()
            .map(|r| r.retention.clone())
            .unwrap_or_default(),
        comparison: summary.comparison.as_ref().map(comparison_view),
        whatif,
        charts: charts_out,
        scenarios,
        formulas: model::FORMULAS
            .iter()
            .map(|f| (f.label.to_string(), f.name.to_string(), f.expr.to_string()))
            .collect(),
    };

    let mut env = minijinja::Environment::new();
    env.add_template("report.html.j2", TEMPLATE)?;
    let template = env.get_template("report.html.j2")?;
    let html = template.render(minijinja::context! {
        page => minijinja::Value::from(minijinja::value::Serde(&page)),
        css => minijinja::Value::from_safe_string(CSS.to_string()),
        script => minijinja::Value::from_safe_string(SCRIPT.to_string()),
        model_json => minijinja::Value::from_safe_string(model_json(start, &sim_points)?),
    })?;
    Ok(html)
}

impl RunResult {
    /// No failure switch is on: the run is the seed's design, comparable with the model.
    fn deviations_free(&self) -> bool {
        crate::sim::deviations::deviations(&self.config, true).is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn budget_values_read_in_their_unit() {
        assert_eq!(budget_value("max_store_gb", 17.69472), "17.7 GB");
        assert_eq!(budget_value("max_duplicates_per_day", 20.736), "20.7/day");
        assert_eq!(budget_value("max_cost_per_day", 124_416.0), "$124,416/day");
    }

    #[test]
    fn controls_include_the_runs_own_value() {
        let v = control_values(&[1.0, 3.0], 2.0);
        assert_eq!(v, vec![1.0, 2.0, 3.0]);
        assert_eq!(control_values(&[1.0, 3.0], 3.0), vec![1.0, 3.0]);
    }

    #[test]
    fn embedded_json_cannot_close_the_script() {
        let j = model_json(&crate::run::whatif::start(&[], None), &[]).unwrap();
        assert!(!j.contains('<'));
        let v: serde_json::Value = serde_json::from_str(&j).unwrap();
        assert_eq!(
            v["formulas"].as_array().unwrap().len(),
            model::FORMULAS.len()
        );
    }
}
