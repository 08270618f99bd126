//! One simulated retention as its scenario's tab shows it: how it was sampled, each measured
//! figure beside the model's, the budget verdicts, the detection signals against what the
//! seed's design expects, the invariants and the run's two charts.

use super::{DataTable, bar_charts, not_reached, rough_duration, steady_reached, svg_or_note};
use crate::format::{human_count, percent, plural, rate_per_s, thousands};
use crate::report::charts::{self, Bar, KeyLine, RatePalette};
use crate::report::vocabulary::{
    Quantity, budget_label, budget_value, interval, model_value, show, store_window,
};
use crate::run::results::Figure;
use crate::run::results::{RunResult, Status};
use serde::Serialize;

/// A measured figure: estimate, 95 % interval and the model's value, as text.
#[derive(Debug, Clone, Serialize)]
struct FigureView {
    label: String,
    estimate: String,
    interval: String,
    model: String,
}

#[derive(Debug, Clone, Serialize)]
struct VerdictView {
    budget: crate::settings::Budget,
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
pub(super) struct RunView {
    title: String,
    sampling: String,
    figures: Vec<FigureView>,
    verdicts: Vec<VerdictView>,
    signals: Vec<Signal>,
    /// What the figures cannot say (no steady window, nothing seen, no interval), from the
    /// simulator: the page says it under the table, as the terminal does.
    notes: Vec<String>,
    invariants: String,
    invariants_hold: bool,
    outcomes_svg: String,
    keys_svg: String,
    outcomes_table: DataTable,
    keys_table: DataTable,
}

/// The run's view: a recipe of one step per part of it.
pub(super) fn run_view(r: &RunResult, palette: &RatePalette) -> RunView {
    let (outcomes_svg, outcomes_table) = outcomes(r);
    let (keys_svg, keys_table) = keys(r, palette);
    RunView {
        title: format!("{} · retention {}", rate_per_s(r.rate_per_s), r.retention),
        sampling: sampling(r),
        figures: figures(r),
        verdicts: verdict_views(r),
        signals: signals(r),
        notes: notes(r),
        invariants: invariants(r),
        invariants_hold: r.invariants.hold,
        outcomes_svg,
        keys_svg,
        outcomes_table,
        keys_table,
    }
}

/// How much was replayed, which sets how wide the intervals below are.
fn sampling(r: &RunResult) -> String {
    let s = &r.sampling;
    format!(
        "{} of arrivals ({} simulated, following the late retries), {}; replayed {} ({}), ordinary calls sampled at {}, timed-out calls at {}.",
        rough_duration(s.arrival_seconds),
        rough_duration(s.simulated_seconds),
        plural(u64::from(s.replicates), "replicate", "replicates"),
        plural(s.replayed_intents, "intent", "intents"),
        plural(s.replayed_requests, "request", "requests"),
        percent(s.sample_ordinary),
        percent(s.sample_timed_out),
    )
}

/// The simulator's notes on this run, and, without a steady window, why its store figures
/// are the ones at the end.
fn notes(r: &RunResult) -> Vec<String> {
    let mut out = Vec::new();
    if !steady_reached(r) {
        out.push(format!(
            "Store figures are {} of the arrivals: {}.",
            store_window(false),
            not_reached(r)
        ));
    }
    out.extend(r.sim.notes.iter().cloned());
    out
}

fn figures(r: &RunResult) -> Vec<FigureView> {
    let f = &r.figures;
    vec![
        steady_view("Store size", Quantity::Bytes, &f.store_bytes, r),
        steady_view("Records in the store", Quantity::Count, &f.store_records, r),
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
    ]
}

fn figure_view(label: &str, kind: Quantity, f: &Figure) -> FigureView {
    FigureView {
        label: label.to_string(),
        estimate: show(kind, f.estimate),
        interval: interval(kind, f),
        model: model_value(kind, f.analytic),
    }
}

/// A store figure, labelled with where it was read: the steady window, or the end of the
/// arrivals when the run has none ([`store_window`], the terminal's label too).
fn steady_view(label: &str, kind: Quantity, f: &Figure, r: &RunResult) -> FigureView {
    figure_view(
        &format!("{label} ({})", store_window(steady_reached(r))),
        kind,
        f,
    )
}

fn verdict_views(r: &RunResult) -> Vec<VerdictView> {
    r.verdicts
        .iter()
        .map(|v| VerdictView {
            budget: v.budget,
            label: budget_label(v.budget),
            estimate: budget_value(v.budget, v.figure.estimate),
            interval: crate::format::estimate_interval(
                v.figure.estimate,
                v.figure.ci95_low,
                v.figure.ci95_high,
                |x| budget_value(v.budget, x),
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

/// The detection signals. A signal warns only above what the seed's design expects at this
/// run's inputs (the model's figure): the healthy baseline has a few late retries and
/// duplicates by design.
fn signals(r: &RunResult) -> Vec<Signal> {
    let d = &r.detection;
    let m = &r.model;
    let signal = |label, value: f64, expected: f64, detects| Signal {
        label,
        value: show(Quantity::PerDay, value),
        expected: show(Quantity::PerDay, expected),
        detects,
        lit: value > 2.0 * expected + 1e-9,
    };
    vec![
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
    ]
}

fn invariants(r: &RunResult) -> String {
    let inv = &r.invariants;
    format!(
        "integrity {}, most labels per parcel {}, completed keys without a label {}, replays byte-identical {}",
        if inv.integrity_ok { "ok" } else { "FAILED" },
        inv.max_labels_per_parcel,
        inv.completed_without_label,
        if inv.replays_byte_identical {
            "yes"
        } else {
            "NO"
        }
    )
}

/// Responses per day by status, coloured by what they mean to the caller, with their table.
fn outcomes(r: &RunResult) -> (String, DataTable) {
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
    let table = DataTable {
        head: vec!["Response", "Per day at full traffic"],
        rows: outcome_bars
            .iter()
            .map(|b| vec![b.label.clone(), b.text.clone()])
            .collect(),
    };
    let svg = bar_charts(&charts::BarChart {
        chart: "outcomes",
        bars: &outcome_bars,
        x_desc: "Responses per day at full traffic (log scale)",
        log: true,
        fmt: &|v| human_count(v),
        reference: None,
        width: 520,
    });
    (svg, table)
}

/// Keys in the store over simulated time, with the table behind the chart.
fn keys(r: &RunResult, palette: &RatePalette) -> (String, DataTable) {
    let points: Vec<(f64, f64)> = r
        .sim
        .series
        .iter()
        .map(|p| (p.t_s, p.keys_estimated))
        .collect();
    let table = DataTable {
        head: vec!["Simulated time", "Keys in the store"],
        rows: charts::downsample(&points, 13)
            .iter()
            .map(|(t, k)| vec![rough_duration(*t), human_count(*k)])
            .collect(),
    };
    let svg = svg_or_note(charts::keys_over_time(
        &[KeyLine {
            label: rate_per_s(r.rate_per_s),
            colour: palette.colour(r.rate_per_s),
            points,
            retention_s: r.retention_s,
        }],
        false,
        (520, 260),
    ));
    (svg, table)
}
