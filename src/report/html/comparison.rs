//! The change of every figure against `report --baseline`, as `run::compare` judged it: the
//! page marks only what that judged larger than sampling explains.

use crate::report::vocabulary::{self, show};
use crate::run::results::Comparison;
use serde::Serialize;

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
pub(super) struct ComparisonView {
    baseline: String,
    summary: String,
    rows: Vec<ChangeRow>,
    /// `a (24h): engine.response_bytes 300 → 1200`, one per changed input.
    inputs: Vec<String>,
}

pub(super) fn view(c: &Comparison) -> ComparisonView {
    let kind = vocabulary::change_quantity;
    let real = c.changes.iter().filter(|x| x.real).count();
    ComparisonView {
        baseline: c.baseline.clone(),
        summary: format!(
            "{} compared; {real} changed by more than sampling explains (|z| > {:.2}, a 5% family-wise false-alarm rate).",
            crate::format::plural(c.changes.len() as u64, "figure", "figures"),
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
        inputs: c
            .changed_inputs
            .iter()
            .map(|x| {
                format!(
                    "{} ({}): {} {} → {}",
                    x.scenario, x.retention, x.input, x.before, x.after
                )
            })
            .collect(),
    }
}
