//! The capacity report: formats a run's results ([`crate::run::results`]) as one
//! self-contained `index.html`, `summary.json`, `summary.md` and the simulator's CSV/Parquet
//! tables.
//!
//! The module is split like hyperfine's exporters: [`export`] turns a [`Summary`] into bytes, one
//! [`Exporter`] per format, [`charts`] draws the SVGs and [`html`] formats numbers for people.
//! Invariants (what it must not know):
//! * no store: the report never opens or names one; `run` did the work;
//! * no scheduling and no simulation: it receives finished results;
//! * no figure of its own: every model figure was computed by [`crate::model`] in `run`; the
//!   page only re-evaluates the same formula strings in the browser;
//! * no polars: tables go through [`crate::tables`].

pub mod charts;
pub mod export;
pub mod html;
pub mod live;
pub mod text;
pub mod vocabulary;

use crate::settings::Budget;
use std::path::{Path, PathBuf};

pub use crate::run::results::{
    BenchResults, BenchRow, BrokenBudget, RunFigures, RunResult, SCHEMA_VERSION, Sampling,
    ScenarioResult, Status, Summary, Tool, Verdict,
};
pub use crate::scenario::{Loaded, load_dir};
pub use export::{Exporter, HtmlExporter, JsonExporter, MarkdownExporter};

impl BrokenBudget {
    /// `baseline-400 (30d): max_store_gb: 531 GB (95%: 520 GB – 540 GB) > 25 GB, over by 506 GB
    /// (2024% of the limit)`.
    pub fn describe(&self) -> String {
        describe_limit(
            &self.scenario,
            &self.retention,
            self.budget,
            self.figure,
            self.ci95,
            self.limit,
        )
    }
}

/// Every broken budget, one line each: the scenarios' (with interval and margin), then the
/// load results'. One list for the page's verdict, `summary.md` and the report's stderr.
pub fn broken_lines(summary: &Summary) -> Vec<String> {
    summary
        .broken_budgets
        .iter()
        .map(BrokenBudget::describe)
        .chain(summary.load.iter().flat_map(live::broken))
        .collect()
}

impl Verdict {
    /// The verdict as one line, with the interval and the margin to the limit.
    pub fn describe(&self, scenario: &str, retention: &str) -> String {
        describe_limit(
            scenario,
            retention,
            self.budget,
            self.figure.estimate,
            [self.figure.ci95_low, self.figure.ci95_high],
            self.limit,
        )
    }
}

/// A figure against its limit, with its 95 % interval and how far it is from the limit.
fn describe_limit(
    scenario: &str,
    retention: &str,
    budget: Budget,
    figure: f64,
    ci95: [f64; 2],
    limit: f64,
) -> String {
    let f = |v: f64| vocabulary::budget_value(budget, v);
    let budget_name = budget.name();
    let interval = if ci95[0].is_finite() && ci95[1].is_finite() && ci95[0] < ci95[1] {
        format!(
            " (95%: {})",
            crate::format::estimate_interval(figure, ci95[0], ci95[1], f)
        )
    } else {
        String::new()
    };
    let gap = (figure - limit).abs();
    let growth = budget == Budget::MaxStoreGrowth;
    let gap_text = if growth {
        format!("{:.1} points", gap * 100.0)
    } else {
        f(gap)
    };
    let share = if limit > 0.0 && !growth {
        format!(" ({:.0}% of the limit)", gap / limit * 100.0)
    } else {
        String::new()
    };
    if figure > limit {
        format!(
            "{scenario} ({retention}): {budget_name}: {}{interval} > {}, over by {gap_text}{share}",
            f(figure),
            f(limit),
        )
    } else {
        format!(
            "{scenario} ({retention}): {budget_name}: {}{interval} ≤ {}, margin {gap_text}{share}",
            f(figure),
            f(limit),
        )
    }
}

/// What the page says about the run that wrote it, at its foot: when, by which command, and
/// the tables beside it. Kept out of `summary.json`, which stays byte-identical whenever the
/// inputs are (the version and each scenario's inputs hash are in it).
#[derive(Debug, Clone, Default, serde::Serialize)]
pub struct RunStamp {
    /// UTC, to the second.
    pub date: String,
    /// The command line, quoted so it can be pasted into a shell.
    pub command_line: String,
    /// The tables written beside the page, relative to it.
    pub tables: Vec<String>,
}

impl RunStamp {
    /// This process: the time now and its own arguments.
    pub fn now() -> RunStamp {
        let args: Vec<String> = std::env::args().collect();
        let mut words = args.iter().map(String::as_str);
        // The program as it is known, not the path it was started from.
        let program = words.next().map(|_| "idemcalc");
        RunStamp {
            date: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
            command_line: shlex::try_join(program.into_iter().chain(words))
                .unwrap_or_else(|_| args.join(" ")),
            tables: Vec::new(),
        }
    }
}

/// Writes the tables, `summary.json`, `summary.md` and `index.html` into `out` (created if
/// needed) and returns the files written. Everything is written even when budgets are broken:
/// the exit code is the caller's business.
pub fn write_all(out: &Path, summary: &Summary, stamp: RunStamp) -> anyhow::Result<Vec<PathBuf>> {
    use anyhow::Context;
    std::fs::create_dir_all(out)
        .with_context(|| format!("{}: cannot create the output directory", out.display()))?;
    let mut written = Vec::new();
    let tables = out.join("tables");
    for s in &summary.scenarios {
        for r in &s.runs {
            let prefix = if s.runs.len() > 1 {
                format!("{}-retention-{}-", s.name, r.retention)
            } else {
                format!("{}-", s.name)
            };
            written.extend(crate::tables::write_all(&tables, &prefix, &r.sim)?);
        }
    }
    let page = HtmlExporter {
        stamp: RunStamp {
            tables: written
                .iter()
                .filter_map(|p| p.strip_prefix(out).ok())
                .map(|p| p.display().to_string())
                .collect(),
            ..stamp
        },
    };
    let exporters: [&dyn Exporter; 3] = [&JsonExporter, &MarkdownExporter, &page];
    for e in exporters {
        let path = out.join(e.file_name());
        let bytes = e.serialize(summary)?;
        crate::output::write(&path, &bytes)
            .with_context(|| format!("{}: cannot write", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{self, ModelParams};
    use crate::run::results::Figure;
    use crate::run::verdicts;
    use crate::scenario::Budgets;
    use crate::traffic::RetryDelay;

    #[test]
    fn storage_cost_uses_the_model_formula() {
        let v = model::formula(
            "storage_cost_per_day",
            &[
                ("store_bytes", 17.694_72e9),
                ("replicas", 2.0),
                ("storage_usd_per_gb_month", 0.1),
            ],
        )
        .unwrap();
        let e = model::estimate(&ModelParams::default(), &RetryDelay::seed());
        assert!((v - e.storage_cost_per_day).abs() < 1e-12);
        assert!(model::formula("nope", &[]).is_err());
        assert!(model::formula("storage_cost_per_day", &[]).is_err());
    }

    fn fig(estimate: f64, lo: f64, hi: f64) -> Figure {
        Figure {
            estimate,
            ci95_low: lo,
            ci95_high: hi,
            analytic: estimate,
        }
    }

    #[test]
    fn a_budget_breaks_on_the_estimate_and_warns_on_the_interval() {
        let f = RunFigures {
            store_bytes: fig(20e9, 19e9, 21e9),
            store_records: fig(1.0, 1.0, 1.0),
            bytes_per_record: fig(300.0, 300.0, 300.0),
            timed_out_per_day: fig(1.0, 1.0, 1.0),
            timed_out_attempts_per_day: fig(1.0, 1.0, 1.0),
            late_after_purge_per_day: fig(1.0, 1.0, 1.0),
            duplicate_labels_per_day: fig(100.0, 80.0, 120.0),
            duplicate_cost_per_day: fig(600.0, 480.0, 720.0),
            storage_cost_per_day: fig(0.1, 0.1, 0.1),
            total_cost_per_day: fig(600.1, 480.1, 720.1),
            unlabelled_per_day: fig(0.0, 0.0, 0.0),
        };
        let b = Budgets {
            max_store_gb: Some(19.5),
            max_duplicates_per_day: Some(110.0),
            max_cost_per_day: Some(1000.0),
            ..Budgets::default()
        };
        let v = verdicts(&b, &f);
        let statuses: Vec<Status> = v.iter().map(|v| v.status).collect();
        assert_eq!(statuses, [Status::Broken, Status::AtRisk, Status::Ok]);
        assert_eq!(v[0].figure.estimate, 20.0);
    }
}
