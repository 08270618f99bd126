//! The top of the page, what a reader acts on: the verdict over every budget, the decision
//! card, every sizing run and failure demonstration in one table each, and the stores
//! compared. Everything here was decided in `run`; this only words it.

use super::{not_reached, slug, steady_reached};
use crate::decision::{Choice, Recommendation};
use crate::format::{count_per_day, human_bytes, human_duration, plural, usd};
use crate::report::vocabulary::{
    Quantity, budget_label, budget_value, interval, show, store_window,
};
use crate::run::results::{RunResult, ScenarioKind, ScenarioResult, Status, StoreRow, Summary};
use serde::Serialize;

/// The line under the title: how many budget checks broke, or that all hold.
pub(super) fn verdict(summary: &Summary) -> (String, &'static str) {
    let load = summary.load.as_ref();
    let checked: usize = summary
        .scenarios
        .iter()
        .map(|s| s.runs.iter().map(|r| r.verdicts.len()).sum::<usize>())
        .sum::<usize>()
        + load.map_or(0, |l| l.checked());
    let broken = crate::report::broken_lines(summary).len();
    if broken > 0 {
        (
            format!("{broken} of {checked} budget checks broken"),
            "broken",
        )
    } else if checked > 0 {
        (format!("All {checked} budget checks hold"), "ok")
    } else {
        ("No budgets to check".to_string(), "none")
    }
}

#[derive(Debug, Clone, Serialize)]
struct Card {
    label: &'static str,
    value: String,
    interval: String,
    model: String,
}

/// The decision the page leads with.
#[derive(Debug, Clone, Serialize)]
pub(super) struct DecisionView {
    scenario: String,
    anchor: String,
    title: String,
    met: bool,
    cards: Vec<Card>,
    notes: Vec<String>,
    cheapest: String,
    cheapest_is_assumption: bool,
}

/// The headline decision's card, when a sizing scenario was decided.
pub(super) fn decision(summary: &Summary) -> Option<DecisionView> {
    let d = summary.decision.as_ref()?;
    let scenario = summary.scenarios.iter().find(|s| s.name == d.scenario)?;
    Some(decision_view(scenario, &d.recommendation))
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
    let mut cards = vec![
        retention_card(r, c, met),
        store_card(r, c),
        duplicates_card(r, c),
        cost_card(r, c),
    ];
    if !met {
        cards[0].label = "Closest retention";
    }
    DecisionView {
        scenario: scenario.name.clone(),
        anchor: slug(&scenario.name),
        title,
        met,
        cards,
        notes: r.notes.clone(),
        cheapest: cheapest(r),
        cheapest_is_assumption: r.cheapest_is_assumption,
    }
}

fn retention_card(r: &Recommendation, c: &Choice, met: bool) -> Card {
    Card {
        label: "Retention",
        value: c.retention.clone(),
        interval: if met {
            "the cheapest that meets every target".into()
        } else {
            "the fewest duplicates inside the budgets".into()
        },
        model: format!(
            "horizon of the retry distribution: {}",
            human_duration(r.horizon_s)
        ),
    }
}

fn store_card(r: &Recommendation, c: &Choice) -> Card {
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
    Card {
        label: "Store size, one copy",
        value: human_bytes(c.store_bytes),
        interval: store_interval,
        model: format!(
            "{}{}: {}; {bpr}{}",
            // Under a daily profile the budget is checked on the peak, so the card says it.
            if c.peak_store_bytes > c.store_bytes * 1.005 {
                format!(
                    "peaks at {} (the budget's figure); ",
                    human_bytes(c.peak_store_bytes)
                )
            } else {
                String::new()
            },
            plural(r.replicas as u64, "copy", "copies"),
            human_bytes(c.store_bytes_all_replicas),
            r.targets
                .max_store_gb
                .map(|gb| format!("; budget {}", human_bytes(gb * 1e9)))
                .unwrap_or_default()
        ),
    }
}

fn duplicates_card(r: &Recommendation, c: &Choice) -> Card {
    Card {
        label: "Real duplicate labels",
        value: count_per_day(c.duplicate_labels_per_day),
        interval: format!(
            "target at most {}",
            count_per_day(r.targets.max_duplicates_per_day)
        ),
        model: format!(
            "{} retries arrive after the purge{}",
            count_per_day(c.late_after_purge_per_day),
            if c.relies_on_carrier_window {
                "; the carrier's key window catches most"
            } else {
                ""
            }
        ),
    }
}

fn cost_card(r: &Recommendation, c: &Choice) -> Card {
    Card {
        label: "Daily cost",
        value: show(Quantity::UsdPerDay, c.total_cost_per_day),
        interval: format!(
            "storage {} + duplicates {}",
            usd(c.storage_cost_per_day),
            usd(c.total_cost_per_day - c.storage_cost_per_day)
        ),
        model: r
            .targets
            .max_cost_per_day
            .map(|m| format!("budget {}", show(Quantity::UsdPerDay, m)))
            .unwrap_or_else(|| "no cost budget".into()),
    }
}

/// The cheapest retention under the card, flagged when it only repeats the distribution's horizon.
fn cheapest(r: &Recommendation) -> String {
    let o = &r.cheapest;
    // Beside a recommendation, the budgets the cheaper retention breaks (the CLI's and
    // summary.md's line).
    let budgets = crate::report::text::cheapest_budgets(r)
        .map(|b| format!("; {b}"))
        .unwrap_or_default();
    format!(
        "Cheapest retention: {} at {} ({} real duplicates, {} per copy{budgets}){}",
        o.retention,
        show(Quantity::UsdPerDay, o.total_cost_per_day),
        count_per_day(o.duplicate_labels_per_day),
        human_bytes(o.store_bytes),
        if r.cheapest_is_assumption {
            format!(
                ", which is the retry distribution's horizon ({}): an assumption, not a measurement.",
                human_duration(r.horizon_s)
            )
        } else {
            ".".to_string()
        }
    )
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
pub(super) const PAGE_LEGEND: &str = "✓ holds: the whole 95% interval is within the limit · ⚠ at risk: the estimate is within the limit, the interval reaches past it · ✗ broken: the estimate is past the limit";

/// One budget's verdict in a table cell.
#[derive(Debug, Clone, Serialize)]
struct Mark {
    status: Status,
    mark: &'static str,
    text: String,
}

/// One row of the at-a-glance tables: a scenario at one retention.
#[derive(Debug, Clone, Serialize)]
pub(super) struct GlanceRow {
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

/// Every run of the scenarios of one kind, in file order.
pub(super) fn rows(summary: &Summary, kind: ScenarioKind) -> Vec<GlanceRow> {
    summary
        .scenarios
        .iter()
        .filter(|s| s.kind == kind)
        .flat_map(|s| s.runs.iter().map(move |r| glance_row(s, r)))
        .collect()
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
        // Without a steady window the store is the one at the end of the arrivals, labelled
        // so, as the run's own table and the terminal label it.
        store: if steady {
            show(Quantity::Bytes, f.store_bytes.estimate)
        } else {
            format!(
                "{} ({})",
                show(Quantity::Bytes, f.store_bytes.estimate),
                store_window(false)
            )
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
        marks: marks(r),
        recommended,
    }
}

fn marks(r: &RunResult) -> Vec<Mark> {
    r.verdicts
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
        .collect()
}

/// One store of the comparison (`report --compare-store`), formatted.
#[derive(Debug, Clone, Serialize)]
pub(super) struct StoreView {
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

pub(super) fn store_views(rows: &[StoreRow]) -> Vec<StoreView> {
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

/// The retention the store comparison measured at and the one it prices at (every row shares
/// them); empty without a comparison.
pub(super) fn stores_at(rows: &[StoreRow]) -> (String, String) {
    (
        rows.first()
            .map(|r| r.measured_at.clone())
            .unwrap_or_default(),
        rows.first()
            .map(|r| r.retention.clone())
            .unwrap_or_default(),
    )
}
