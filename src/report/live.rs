//! A live service's run (`report --load`, the JSON `idemcalc load` wrote) in words, written
//! once for the page and `summary.md`: what was sent, what was checked from outside, the
//! latency per outcome and the budgets.

use super::vocabulary::{Quantity, with_interval};
use crate::format::{approx_duration, human_count, percent, rate_per_s, significant, thousands};
use crate::run::results::{LoadFigure, LoadLatency, LoadResults, LoadRow};
use serde::Serialize;

/// The outcomes in the order a reader looks for them.
pub const OUTCOMES: [&str; 5] = ["first_run", "replay", "conflict", "error", "timeout"];

/// One load result as rows of text.
#[derive(Debug, Clone, Serialize)]
pub struct LiveRows {
    /// `POST http://…/labels at 400/s (poisson) for 1m`.
    pub title: String,
    pub file: String,
    pub ok: bool,
    /// (check, value).
    pub checks: Vec<(String, String)>,
    /// outcome, count, p50, p90, p99, p99.9, max (ms).
    pub latency: Vec<Vec<String>>,
    /// budget, limit, measured, verdict.
    pub budgets: Vec<Vec<String>>,
}

/// A per-day figure as the report writes every other one (`vocabulary::with_interval`).
fn per_day(f: &LoadFigure) -> String {
    with_interval(Quantity::PerDay, &f.figure())
}

/// One outcome's latency row in milliseconds, under [`LATENCY_HEAD`]: what `load` prints and
/// what the report shows of its JSON.
pub fn latency_row(outcome: &str, count: u64, ms: [f64; 5]) -> Vec<String> {
    let mut row = vec![outcome.to_string(), thousands(count as f64)];
    row.extend(ms.iter().map(|v| significant(*v, 3)));
    row
}

/// How much a count too short to test the prediction falls short: its 95 % interval over the
/// prediction, the most that still tests something, and how many times longer to run.
#[derive(Debug, Clone, Copy)]
pub struct TooShort {
    pub interval_over_prediction: f64,
    pub max_interval_over_prediction: f64,
    pub run_longer: f64,
    pub run_s: f64,
}

/// The count's verdict on `simulate`'s prediction (`load::predict::Agreement`, by its JSON
/// name), in words: once for `load`'s own output and the report's.
pub fn agreement(agreement: &str, too_short: Option<TooShort>) -> String {
    match (agreement, too_short) {
        ("agrees", _) => "agrees with the count".to_string(),
        ("too_short", Some(t)) => format!(
            "too short to test: the count's 95 % interval is {}× the prediction, more than {}×; run {}× longer (about {})",
            human_count(t.interval_over_prediction),
            human_count(t.max_interval_over_prediction),
            human_count(t.run_longer),
            approx_duration(t.run_s * t.run_longer),
        ),
        ("too_short", None) => "too short to test".to_string(),
        _ => "does not agree with the count: their difference is wider than both intervals allow"
            .to_string(),
    }
}

/// A result's outcomes that were seen, in [`OUTCOMES`] order, with their latency.
pub fn outcomes_seen(r: &LoadRow) -> impl Iterator<Item = (&'static str, &LoadLatency)> {
    OUTCOMES
        .iter()
        .filter_map(|o| r.latency_ms.get(*o).map(|p| (*o, p)))
        .filter(|(_, p)| p.count > 0)
}

pub fn rows(r: &LoadRow) -> LiveRows {
    let run = &r.run;
    let mut title = format!(
        "{} {}{} at {} ({} arrivals) for {}",
        run.method,
        run.url.trim_end_matches('/'),
        run.path,
        rate_per_s(run.rate_per_s),
        run.arrivals,
        crate::format::human_duration(run.duration_s)
    );
    if run.time_scale != 1.0 {
        title.push_str(&format!(", time scale {}", significant(run.time_scale, 4)));
    }
    let mut checks = vec![
        (
            "duplicate labels".to_string(),
            format!(
                "{}: {} at the asked rate (95%)",
                thousands(r.duplicate_labels as f64),
                per_day(&r.duplicates_per_day)
            ),
        ),
        ("unexpected 422".into(), thousands(r.unexpected_422 as f64)),
        (
            "stuck intents (no 2xx)".into(),
            thousands(r.stuck_intents as f64),
        ),
        ("replays".into(), thousands(r.replays as f64)),
        (
            "rate achieved".into(),
            format!(
                "{} of {} asked ({} dropped); {} first runs",
                rate_per_s(r.achieved_rate_per_s),
                rate_per_s(run.rate_per_s),
                thousands(r.dropped_intents as f64),
                rate_per_s(r.creates_per_s)
            ),
        ),
        ("error share".into(), percent(r.error_share)),
        (
            "retry distribution covered".into(),
            percent(r.retry_distribution_covered),
        ),
    ];
    if let Some(i) = &r.invoice {
        checks.push((
            "labels bought twice (the carrier's invoice)".into(),
            format!(
                "{} of {} lines: {} at the asked rate (95%)",
                thousands(i.duplicate_purchases as f64),
                thousands(i.lines as f64),
                per_day(&i.duplicates_per_day)
            ),
        ));
    }
    if let Some(p) = &r.prediction {
        checks.push((
            format!(
                "simulate's prediction (retention {}, carrier window {})",
                p.retention, p.carrier_window
            ),
            format!(
                "{}: {}",
                per_day(&p.duplicates_per_day),
                agreement(
                    p.agreement(),
                    p.run_longer.map(|n| TooShort {
                        interval_over_prediction: p
                            .interval_over_prediction
                            .unwrap_or(f64::INFINITY),
                        max_interval_over_prediction: p.max_interval_over_prediction,
                        run_longer: n,
                        run_s: run.duration_s,
                    })
                )
            ),
        ));
    }
    if let Some(after) = run.interrupted_after_s {
        checks.push((
            "interrupted".into(),
            format!(
                "Ctrl-C after {}: the figures cover that part",
                crate::format::human_duration(after)
            ),
        ));
    }
    let latency = outcomes_seen(r)
        .map(|(o, p)| latency_row(o, p.count, [p.p50, p.p90, p.p99, p.p999, p.max]))
        .collect();
    let budgets = r
        .budgets
        .iter()
        .map(|v| {
            vec![
                v.budget.clone(),
                significant(v.limit, 3),
                significant(v.measured, 3),
                if v.ok { "ok" } else { "broken" }.to_string(),
            ]
        })
        .collect();
    LiveRows {
        title,
        file: r.file.clone(),
        ok: r.ok,
        checks,
        latency,
        budgets,
    }
}

/// The latency table's head.
pub const LATENCY_HEAD: [&str; 7] = ["outcome", "count", "p50", "p90", "p99", "p99.9", "max"];
/// The budgets table's head.
pub const BUDGETS_HEAD: [&str; 4] = ["budget", "limit", "measured", "verdict"];

/// `file (load): budget: measured > limit` for every broken load budget, in file order: what
/// the page's verdict, `summary.md` and the report's stderr list.
pub fn broken(load: &LoadResults) -> Vec<String> {
    load.results
        .iter()
        .flat_map(|r| {
            r.budgets.iter().filter(|v| !v.ok).map(move |v| {
                format!(
                    "{} (load): {}: {} > {}",
                    r.file,
                    v.budget,
                    significant(v.measured, 3),
                    significant(v.limit, 3)
                )
            })
        })
        .collect()
}
