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
// results from here alone and know nothing of the simulator (tests/it/settings.rs).
pub use crate::sim::replay::{Detection, Figure, OutcomeRow, SimConfig, SimInvariants, SimReport};
pub use crate::sim::timeline::{TimelineEvent, TimelineReport};
use crate::stats::{MeanInterval, Spread};
use crate::traffic::RetryDelay;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

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
    /// `idemcalc load --format json` results, when `--load` was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub load: Option<LoadResults>,
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
    /// interval): what the page's script computes when no run decided.
    pub model_decision: Option<Choice>,
    /// The headline's decision at every retention it weighed (empty when no run decided): what
    /// the page's script re-weighs when a control moves, so at the card's inputs it computes the
    /// card's numbers.
    pub weighed: Vec<Choice>,
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

/// Engine throughput from `idemcalc bench --format json`, one row per bench file (SQLite,
/// PostgreSQL, Redis side by side). Only the fields the report draws are read; anything else in
/// a file is ignored, so the bench may grow without breaking this.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BenchResults {
    pub results: Vec<BenchRow>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct BenchRow {
    /// Store or configuration name; a bench file names itself by its `commit_mode`
    /// (`sqlite:per_transaction`), read in its place when this is empty.
    #[serde(alias = "store")]
    pub name: String,
    /// The engine's creates/s, the mean over the bench's runs.
    pub creates_per_s: Option<f64>,
    /// The same creates without the idempotency layer.
    pub baseline_creates_per_s: Option<f64>,
    pub overhead_ratio: Option<f64>,
    pub p50_us: Option<f64>,
    pub p99_us: Option<f64>,
    #[serde(skip_serializing_if = "String::is_empty")]
    pub commit_mode: String,
    /// Each side's spread over the runs, with the mean's 95 % interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub engine_summary: Option<BenchSide>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub baseline_summary: Option<BenchSide>,
    /// Engine over baseline from the paired runs, with its 95 % interval.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ratio: Option<MeanInterval>,
    /// The store's physical limit measured before the runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ceiling: Option<BenchCeiling>,
    /// Why the bench's own figures should not be trusted yet (wide spread, a loaded machine).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The engine's latency over all runs, when the row gives no `p50_us`/`p99_us`.
    #[serde(skip_serializing)]
    pub latency_us: Option<BenchLatency>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BenchSide {
    pub creates_per_s: Spread,
    pub creates_per_s_ci95: Option<MeanInterval>,
}

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BenchCeiling {
    /// `flushes`, `commits` or `round trips`.
    pub unit: String,
    pub per_s: f64,
    pub per_create: f64,
    pub creates_per_s: f64,
    pub engine_share: f64,
    /// What qualifies the figure, e.g. that commits at synchronous=normal do not flush.
    pub note: Option<String>,
}

#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct BenchLatency {
    pub p50: f64,
    pub p99: f64,
}

impl BenchRow {
    /// Fills what a bench file gives under other names: its name from the commit mode, the
    /// latency from `latency_us`.
    fn settle(mut self) -> Self {
        if self.name.is_empty() {
            self.name = self.commit_mode.clone();
        }
        if let Some(l) = self.latency_us {
            self.p50_us = self.p50_us.or(Some(l.p50));
            self.p99_us = self.p99_us.or(Some(l.p99));
        }
        self
    }
}

impl BenchResults {
    /// Reads bench JSON files, each an object with `results`, a list of rows, or a single
    /// row (what `idemcalc bench --format json` writes), in the order given.
    pub fn from_paths(paths: &[PathBuf]) -> anyhow::Result<Self> {
        let mut results = Vec::new();
        for p in paths {
            results.extend(Self::from_path(p)?.results);
        }
        Ok(BenchResults { results })
    }

    /// Reads one bench JSON file.
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
                    .map(BenchRow::settle)
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

/// What `idemcalc load --format json` (or `load --out`) wrote, one row per file: a live
/// service's speed and its idempotency checked from outside. Only the fields the report shows
/// are read; the rest of a file is ignored.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct LoadResults {
    pub results: Vec<LoadRow>,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LoadRow {
    /// The file as given on the command line.
    pub file: String,
    pub run: LoadRunEcho,
    pub achieved_rate_per_s: f64,
    pub creates_per_s: f64,
    pub duplicate_labels: u64,
    pub duplicates_per_day: LoadFigure,
    pub unexpected_422: u64,
    pub stuck_intents: u64,
    pub dropped_intents: u64,
    pub replays: u64,
    pub error_share: f64,
    pub retry_distribution_covered: f64,
    /// Per outcome (`first_run`, `replay`, `conflict`, `error`, `timeout`), in ms from each
    /// attempt's intended start.
    pub latency_ms: std::collections::BTreeMap<String, LoadLatency>,
    pub budgets: Vec<LoadVerdict>,
    pub ok: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invoice: Option<LoadInvoice>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prediction: Option<LoadPrediction>,
}

/// `load --carrier-invoice`: labels the carrier billed twice for the run's orders.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LoadInvoice {
    pub lines: u64,
    pub duplicate_purchases: u64,
    pub duplicates_per_day: LoadFigure,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LoadRunEcho {
    pub url: String,
    pub method: String,
    pub path: String,
    pub rate_per_s: f64,
    pub arrivals: String,
    pub duration_s: f64,
    pub interrupted_after_s: Option<f64>,
    pub time_scale: f64,
    pub seed: u64,
}

/// A figure with its 95 % interval as a JSON file holds it: an end that could not be computed
/// was written as `null` and reads as NaN, which the report says rather than prints.
#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LoadFigure {
    pub estimate: Option<f64>,
    pub ci95_low: Option<f64>,
    pub ci95_high: Option<f64>,
}

impl LoadFigure {
    /// The figure as every other figure of the report, NaN where the file had none (so it is
    /// written without an interval rather than with a made-up one).
    pub fn figure(&self) -> Figure {
        let v = |x: Option<f64>| x.unwrap_or(f64::NAN);
        Figure {
            estimate: v(self.estimate),
            ci95_low: v(self.ci95_low),
            ci95_high: v(self.ci95_high),
            analytic: f64::NAN,
        }
    }
}

#[derive(Debug, Clone, Copy, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LoadLatency {
    pub count: u64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LoadVerdict {
    pub budget: String,
    pub limit: f64,
    pub measured: f64,
    pub ok: bool,
}

#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(default)]
pub struct LoadPrediction {
    pub retention: String,
    pub carrier_window: String,
    pub duplicates_per_day: LoadFigure,
    pub agrees: bool,
    /// `agrees`, `disagrees` or `too_short` (absent from results written before it).
    #[serde(default)]
    pub agreement: Option<String>,
    #[serde(default)]
    pub interval_over_prediction: Option<f64>,
    #[serde(default)]
    pub max_interval_over_prediction: f64,
    #[serde(default)]
    pub run_longer: Option<f64>,
    pub command: String,
}

impl LoadPrediction {
    /// The verdict's JSON name; from `agrees` for a result written before there were three.
    pub fn agreement(&self) -> &str {
        match (&self.agreement, self.agrees) {
            (Some(a), _) => a,
            (None, true) => "agrees",
            (None, false) => "disagrees",
        }
    }
}

impl LoadResults {
    /// Reads `load` JSON files in the order given; each error names its file.
    pub fn from_paths(paths: &[PathBuf]) -> anyhow::Result<Self> {
        use anyhow::Context;
        let mut results = Vec::new();
        for path in paths {
            let text = crate::input::read_limited(path)
                .with_context(|| format!("{}: cannot read the load result", path.display()))?;
            let value: serde_json::Value = serde_json::from_str(&text)
                .with_context(|| format!("{}: not JSON", path.display()))?;
            if value.get("achieved_rate_per_s").is_none() {
                anyhow::bail!(
                    "{}: no `achieved_rate_per_s`; is this the JSON of `idemcalc load --format json`?",
                    path.display()
                );
            }
            let mut row: LoadRow = serde_json::from_value(value)
                .with_context(|| format!("{}: not the JSON of `idemcalc load`", path.display()))?;
            row.file = path.display().to_string();
            results.push(row);
        }
        Ok(LoadResults { results })
    }

    /// Budget checks the load results hold.
    pub fn checked(&self) -> usize {
        self.results.iter().map(|r| r.budgets.len()).sum()
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
