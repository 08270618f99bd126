//! What a run produces, as numbers: per scenario, per retention, the measured figures beside
//! the model's, and the budget verdicts. Serialised as `summary.json` (field names are its
//! public schema, see [`SCHEMA_VERSION`]); formatted for people only by the report module.
//!
//! Invariant: nothing here holds a wall-clock time or a temporary path, so the same scenarios
//! and seeds give a byte-identical `summary.json` (CI diffs it).

use crate::decision::{Choice, Recommendation, Targets};
use crate::model::{Estimate, Figures, ModelParams};
use crate::scenario::Budgets;
use crate::settings::Budget;
// What a run measured, as the simulator reports it: re-exported so that the outputs read
// results from here alone and know nothing of the simulator (tests/settings.rs).
pub use crate::sim::replay::{Detection, Figure, OutcomeRow, SimConfig, SimInvariants, SimReport};
pub use crate::sim::timeline::{TimelineEvent, TimelineReport};
use crate::traffic::RetryDelay;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// Version of `summary.json`; bump it when a field changes meaning or goes away.
/// 2: `decision` (the report's headline), per-scenario `kind` and `decision`, `comparison`
/// (with `report --baseline`); every field of version 1 kept its name and meaning.
/// 3: the cost optimum is `cheapest_*` (was `recommended_*`, `cost_optimal*`).
/// 4: one name per concept: `config.carrier.price_cents` is `label_price_cents` (the label
/// price is `label_price_*` in flags, files and JSON alike).
pub const SCHEMA_VERSION: u32 = 4;

/// Everything the report shows, as numbers. Serialised as `summary.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub schema_version: u32,
    pub tool: Tool,
    /// The retention decision of the first sizing scenario in file order: the report's headline.
    pub decision: Option<Headline>,
    pub scenarios: Vec<ScenarioResult>,
    /// The change of each figure against `report --baseline`, when one was given.
    pub comparison: Option<Comparison>,
    /// Every broken budget of every scenario, in scenario order: what CI prints and fails on.
    pub broken_budgets: Vec<BrokenBudget>,
    /// The headline scenario measured on each store of `report --compare-store`, beside the
    /// report's own store; empty without it.
    pub stores: Vec<StoreRow>,
    /// `idemcalc bench --format json` results, when `--bench` was given.
    pub bench: Option<BenchResults>,
    /// A run was stopped by Ctrl-C: its figures cover only part of the simulated time.
    pub interrupted: bool,
    /// Where the report's what-if panel starts. Only the page shows it, and it can be rebuilt
    /// from the fields above, so it stays out of the JSON.
    #[serde(skip)]
    pub whatif: WhatIfStart,
}

/// Where the report's "What if?" panel starts, with the model and the decision rule evaluated
/// there once (by [`super::whatif::start`]): the page only formats these, and its script
/// checks at load that it reproduces them.
#[derive(Debug, Clone)]
pub struct WhatIfStart {
    /// The scenario the panel starts from; `None` when nothing was simulated and it starts from
    /// the seed's figures.
    pub scenario: Option<String>,
    /// The model's inputs, at the bytes per record the headline's scenario measured.
    pub params: ModelParams,
    pub retry: RetryDelay,
    pub targets: Targets,
    /// The payload's mean sizes: the panel's size controls move the bytes per record by the
    /// change they make, so at the start the measured figure stands.
    pub key_bytes: f64,
    pub response_bytes: f64,
    pub estimate: Estimate,
    /// `None` when a formula fails at these inputs; the page then shows the inputs alone.
    pub figures: Option<Figures>,
    /// The decision the panel shows at its start: the headline's own (`run::decision`, with
    /// the run's measurements), so the card and the headline give one answer; the model's
    /// decision at these inputs when nothing was decided.
    pub decision: Option<Choice>,
    /// The model's decision alone at these inputs (no measurement, no bytes-per-record
    /// interval): what the page's script computes once a control moves, and checks itself
    /// against at load.
    pub model_decision: Option<Choice>,
}

#[derive(Debug, Clone, Serialize)]
pub struct Tool {
    pub name: &'static str,
    pub version: &'static str,
}

impl Default for Tool {
    fn default() -> Self {
        Tool {
            name: env!("CARGO_PKG_NAME"),
            version: env!("CARGO_PKG_VERSION"),
        }
    }
}

/// One store measured on the headline scenario (at its first retention) and priced at the
/// headline's retention: what choosing that store costs, and how it fails.
#[derive(Debug, Clone, Serialize)]
pub struct StoreRow {
    /// `sqlite`, `postgres` or `redis`.
    pub kind: &'static str,
    pub store: String,
    /// The retention of the run that measured it.
    pub measured_at: String,
    pub bytes_per_record: Figure,
    /// `disk` or `memory`: what one of its GB is priced as.
    pub priced_as: &'static str,
    pub usd_per_gb_month: f64,
    /// The headline's retention, at which the size and cost below are given.
    pub retention: String,
    /// One copy at the measured bytes per record, and at the ends of its interval, bytes.
    pub store_bytes: f64,
    pub store_bytes_ci95: [f64; 2],
    /// Every copy together, USD per day.
    pub storage_cost_per_day: f64,
    /// Measured in the run on this store.
    pub duplicate_labels_per_day: Figure,
    /// How the store gives up one of the seed's guarantees, when it does.
    pub caveat: Option<&'static str>,
}

/// The decision the report leads with, and the scenario it was made for.
#[derive(Debug, Clone, Serialize)]
pub struct Headline {
    pub scenario: String,
    pub recommendation: Recommendation,
}

/// What a scenario is for, which decides where the report shows it: only sizing runs are
/// comparable points on one trade-off; a failure demonstration switches a line of defence off
/// and is shown on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ScenarioKind {
    /// The seed's design, simulated: its figures size a real store.
    Sizing,
    /// Simulated with one or more of the seed's defences removed (see `deviations`).
    Failure,
    /// A scripted timeline only: responses, not sizes.
    Timeline,
}

/// One scenario file's results.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    pub name: String,
    pub kind: ScenarioKind,
    /// The file name, without its directory (which differs between machines).
    pub file: String,
    /// SHA-256 of the validated inputs ([`crate::scenario::Scenario::inputs_sha256`]): the
    /// same hash in two reports means the same scenario ran.
    pub inputs_sha256: String,
    pub description: String,
    pub seed: u64,
    /// The engine switches that differ from the seed's design, e.g. `key_scope = global`.
    pub deviations: Vec<String>,
    pub budgets: Option<Budgets>,
    /// One simulation per retention, in the file's order.
    pub runs: Vec<RunResult>,
    pub timeline: Option<TimelineReport>,
    /// The retention decision at the measured bytes per record (sizing scenarios only).
    pub decision: Option<Recommendation>,
}

/// One simulated retention: measured figures beside the model's, and the budget verdicts.
#[derive(Debug, Clone, Serialize)]
pub struct RunResult {
    pub retention_s: f64,
    pub retention: String,
    /// Mean arrival rate, calls/s.
    pub rate_per_s: f64,
    pub config: SimConfig,
    pub figures: RunFigures,
    pub detection: Detection,
    pub outcomes: Vec<OutcomeRow>,
    pub invariants: SimInvariants,
    pub sampling: Sampling,
    /// The analytic model at the same inputs (assumed bytes per record).
    pub model: Estimate,
    pub verdicts: Vec<Verdict>,
    /// The full simulator output, for the charts and the tables; its series and wall-clock time
    /// stay out of the JSON.
    #[serde(skip)]
    pub sim: SimReport,
}

/// Each figure as low / estimate / high with the model's value (`analytic`) beside it.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct RunFigures {
    pub store_bytes: Figure,
    pub store_records: Figure,
    pub bytes_per_record: Figure,
    /// Calls whose first attempt timed out, comparable with the model's timed-out calls.
    pub timed_out_per_day: Figure,
    /// Every attempt that timed out, retries included.
    pub timed_out_attempts_per_day: Figure,
    pub late_after_purge_per_day: Figure,
    pub duplicate_labels_per_day: Figure,
    pub duplicate_cost_per_day: Figure,
    pub storage_cost_per_day: Figure,
    pub total_cost_per_day: Figure,
    pub unlabelled_per_day: Figure,
}

/// How much of the traffic was replayed, which sets the width of the intervals.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Sampling {
    pub replicates: u32,
    pub sample_ordinary: f64,
    pub sample_timed_out: f64,
    pub replayed_intents: u64,
    pub replayed_requests: u64,
    pub arrival_seconds: f64,
    pub simulated_seconds: f64,
    pub interrupted: bool,
    /// The store was measured in a steady window (`SimReport::steady_window`).
    pub steady_window: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The whole 95 % interval is within the limit.
    Ok,
    /// The estimate is within the limit but the interval reaches past it: not a failure, but
    /// the run cannot promise the budget holds.
    AtRisk,
    /// The estimate is past the limit.
    Broken,
}

/// One budget checked against one run.
#[derive(Debug, Clone, Serialize)]
pub struct Verdict {
    /// The `[budgets]` field, e.g. `max_store_gb`.
    pub budget: Budget,
    pub limit: f64,
    /// The figure in the budget's unit (GB, labels/day, USD/day).
    pub figure: Figure,
    pub unit: &'static str,
    pub status: Status,
}

/// A broken budget as CI lists it.
#[derive(Debug, Clone, Serialize)]
pub struct BrokenBudget {
    pub scenario: String,
    pub retention: String,
    pub budget: Budget,
    pub figure: f64,
    /// The figure's 95 % interval, so a breach reads with its uncertainty.
    pub ci95: [f64; 2],
    pub limit: f64,
    pub unit: &'static str,
}

/// Engine throughput from `idemcalc bench --format json`. Only the fields the report draws are
/// read; anything else in the file is ignored, so the bench may grow without breaking this.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BenchResults {
    pub results: Vec<BenchRow>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BenchRow {
    /// Store or configuration name.
    #[serde(alias = "store")]
    pub name: String,
    pub creates_per_s: Option<f64>,
    /// The same creates without the idempotency layer.
    pub baseline_creates_per_s: Option<f64>,
    pub overhead_ratio: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
}

impl BenchResults {
    /// Reads a bench JSON file: an object with `results`, a list of rows, or a single row.
    pub fn from_path(path: &Path) -> anyhow::Result<Self> {
        use anyhow::Context;
        let text = crate::input::read_limited(path)
            .with_context(|| format!("{}: cannot read the bench results", path.display()))?;
        let value: serde_json::Value =
            serde_json::from_str(&text).with_context(|| format!("{}: not JSON", path.display()))?;
        let rows = match value {
            serde_json::Value::Array(rows) => rows,
            serde_json::Value::Object(ref o) => match o.get("results") {
                Some(serde_json::Value::Array(rows)) => rows.clone(),
                _ => vec![value.clone()],
            },
            _ => anyhow::bail!(
                "{}: expected the JSON of `idemcalc bench --format json`",
                path.display()
            ),
        };
        let results = rows
            .into_iter()
            .enumerate()
            .map(|(i, row)| {
                serde_json::from_value::<BenchRow>(row)
                    .with_context(|| format!("{}: result {}", path.display(), i + 1))
            })
            .collect::<Result<Vec<_>, _>>()?;
        if results.iter().all(|r| r.creates_per_s.is_none()) {
            anyhow::bail!(
                "{}: no result has `creates_per_s`; is this the JSON of `idemcalc bench --format json`?",
                path.display()
            );
        }
        Ok(BenchResults { results })
    }
}

/// `report --baseline`: this run's figures beside a previous run's (computed by `run::compare`).
#[derive(Debug, Clone, Serialize)]
pub struct Comparison {
    /// The baseline file as given on the command line.
    pub baseline: String,
    /// The z a difference must exceed to be marked (after the Bonferroni correction).
    pub z_threshold: f64,
    pub changes: Vec<Change>,
    /// `scenario (retention)` present on one side only.
    pub only_in_baseline: Vec<String>,
    pub only_in_this_run: Vec<String>,
    /// The simulation inputs that differ from the baseline's, run by run.
    pub changed_inputs: Vec<InputChange>,
}

/// One simulation input that differs from the baseline's.
#[derive(Debug, Clone, Serialize)]
pub struct InputChange {
    pub scenario: String,
    pub retention: String,
    /// A dotted path into the run's `config`, e.g. `engine.retention_ms`.
    pub input: String,
    pub before: String,
    pub after: String,
}

/// A figure `report --baseline` compares, by the name `summary.json` gives it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ChangeFigure {
    StoreBytes,
    BytesPerRecord,
    DuplicateLabelsPerDay,
    TotalCostPerDay,
}

impl ChangeFigure {
    /// Every compared figure, in the order a report lists them.
    pub const ALL: [ChangeFigure; 4] = [
        ChangeFigure::StoreBytes,
        ChangeFigure::BytesPerRecord,
        ChangeFigure::DuplicateLabelsPerDay,
        ChangeFigure::TotalCostPerDay,
    ];

    /// The name in `summary.json`'s `figures`.
    pub fn name(self) -> &'static str {
        match self {
            ChangeFigure::StoreBytes => "store_bytes",
            ChangeFigure::BytesPerRecord => "bytes_per_record",
            ChangeFigure::DuplicateLabelsPerDay => "duplicate_labels_per_day",
            ChangeFigure::TotalCostPerDay => "total_cost_per_day",
        }
    }

    pub fn unit(self) -> &'static str {
        match self {
            ChangeFigure::StoreBytes | ChangeFigure::BytesPerRecord => "bytes",
            ChangeFigure::DuplicateLabelsPerDay => "labels/day",
            ChangeFigure::TotalCostPerDay => "USD/day",
        }
    }

    /// The figure of a run.
    pub fn of(self, f: &RunFigures) -> Figure {
        match self {
            ChangeFigure::StoreBytes => f.store_bytes,
            ChangeFigure::BytesPerRecord => f.bytes_per_record,
            ChangeFigure::DuplicateLabelsPerDay => f.duplicate_labels_per_day,
            ChangeFigure::TotalCostPerDay => f.total_cost_per_day,
        }
    }
}

/// One figure before and after.
#[derive(Debug, Clone, Serialize)]
pub struct Change {
    pub scenario: String,
    pub retention: String,
    pub figure: ChangeFigure,
    pub unit: &'static str,
    pub before: Figure,
    pub after: Figure,
    /// `after / before - 1`; NaN when the baseline is zero.
    pub relative: f64,
    /// 95 % interval of `relative` (delta method), when both sides have intervals.
    pub relative_ci95: Option<[f64; 2]>,
    /// The difference is larger than sampling explains (see `run::compare`).
    pub real: bool,
}
