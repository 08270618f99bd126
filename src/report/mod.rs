//! The capacity report (`idemcalc report`): runs a directory of scenarios, checks their budgets
//! and writes one self-contained `index.html`, `summary.json`, `summary.md` and the simulator's
//! CSV/Parquet tables.
//!
//! The module is split like hyperfine's exporters: this file holds the run and the summary
//! model (numbers only), [`export`] turns a [`Summary`] into bytes, one [`Exporter`] per format,
//! [`charts`] draws the SVGs and [`html`] formats numbers for people. Invariants:
//! * the summary holds no wall-clock time and no temporary path, so the same scenarios and
//!   seeds give a byte-identical `summary.json` (CI diffs it);
//! * every figure is computed from the formula strings of [`crate::model::FORMULAS`]; the page
//!   evaluates the same strings in the browser;
//! * the report never draws with polars: tables go through [`crate::tables`].

pub mod charts;
pub mod export;
pub mod html;

use crate::engine::{CarrierKey, KeyScope, RecordPlacement};
use crate::model::{self, Estimate, ModelParams};
use crate::scenario::{Budgets, Scenario, ScenarioError};
use crate::sim::replay::{
    self, Detection, Figure, OutcomeRow, Progress, SimConfig, SimInvariants, SimReport,
};
use crate::sim::timeline::{self, TimelineReport};
use crate::store::{SqliteOptions, SqliteStore, Store, Synchronous};
use crate::traffic::{Arrivals, RetryDelay};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

pub use export::{Exporter, HtmlExporter, JsonExporter, MarkdownExporter};

/// Version of `summary.json`; bump it when a field changes meaning or goes away.
pub const SCHEMA_VERSION: u32 = 1;

/// What the report calls the simulator's store: stable, so the JSON does not change with the
/// temporary directory a run happened to use.
pub const STORE_NAME: &str = "sqlite (temporary file)";

/// Everything the report shows, as numbers. Serialised as `summary.json`.
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    pub schema_version: u32,
    pub tool: Tool,
    pub scenarios: Vec<ScenarioResult>,
    /// Every broken budget of every scenario, in scenario order: what CI prints and fails on.
    pub broken_budgets: Vec<BrokenBudget>,
    /// `idemcalc bench --format json` results, when `--bench` was given.
    pub bench: Option<BenchResults>,
    /// A run was stopped by Ctrl-C: its figures cover only part of the simulated time.
    pub interrupted: bool,
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

/// One scenario file's results.
#[derive(Debug, Clone, Serialize)]
pub struct ScenarioResult {
    pub name: String,
    /// The file name, without its directory (which differs between machines).
    pub file: String,
    pub description: String,
    pub seed: u64,
    /// The engine switches that differ from the seed's design, e.g. `key_scope = global`.
    pub deviations: Vec<String>,
    pub budgets: Option<Budgets>,
    /// One simulation per retention, in the file's order.
    pub runs: Vec<RunResult>,
    pub timeline: Option<TimelineReport>,
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
    pub timed_out_per_day: Figure,
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
    pub budget: &'static str,
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
    pub budget: &'static str,
    pub figure: f64,
    pub limit: f64,
    pub unit: &'static str,
}

impl BrokenBudget {
    /// `baseline-400 (24h): max_store_gb: 31.7 GB > 25 GB`.
    pub fn describe(&self) -> String {
        let f = |v: f64| html::budget_value(self.budget, v);
        format!(
            "{} ({}): {}: {} > {}",
            self.scenario,
            self.retention,
            self.budget,
            f(self.figure),
            f(self.limit)
        )
    }
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
        let text = std::fs::read_to_string(path)
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

/// A scenario file and what it says.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: PathBuf,
    pub scenario: Scenario,
}

impl Loaded {
    pub fn file_name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// Loads every `*.toml` of `dir` in file-name order. All bad files are reported together, so a
/// CI log shows every mistake at once.
pub fn load_dir(dir: &Path) -> Result<Vec<Loaded>, Vec<ScenarioError>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(source) => {
            return Err(vec![ScenarioError::ReadDir {
                path: dir.to_path_buf(),
                source,
            }]);
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml") && p.is_file())
        .collect();
    paths.sort();
    let mut loaded = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        match Scenario::load(&path) {
            Ok(scenario) => loaded.push(Loaded { path, scenario }),
            Err(e) => errors.push(e),
        }
    }
    let mut names: Vec<&str> = loaded.iter().map(|l| l.scenario.name.as_str()).collect();
    names.sort();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        let dup = w[0].to_string();
        for l in loaded.iter().filter(|l| l.scenario.name == dup).skip(1) {
            errors.push(ScenarioError::Invalid {
                path: l.path.clone(),
                line: Some(1),
                column: None,
                field: "name".into(),
                message: format!("another scenario is already called `{dup}`"),
            });
        }
    }
    if errors.is_empty() {
        Ok(loaded)
    } else {
        Err(errors)
    }
}

/// How the runs report progress and learn they should stop.
pub struct RunOptions<'a> {
    /// Called with the fraction of all simulated work done, from any thread.
    pub tick: &'a (dyn Fn(f64) + Sync),
    pub interrupted: &'a AtomicBool,
    /// Where the temporary SQLite stores go (removed by the caller).
    pub scratch: &'a Path,
}

/// One simulation to run: a scenario at one retention.
struct Job<'a> {
    scenario: usize,
    retention: usize,
    cfg: SimConfig,
    arrivals: Arrivals,
    replicates: u32,
    /// Expected replayed intents: the run time is about proportional to it.
    cost: f64,
    loaded: &'a Loaded,
}

/// Runs every scenario: timelines at once, simulations in parallel, longest first so two
/// cores finish together. Returns the summary without bench results.
pub fn run(loaded: &[Loaded], options: &RunOptions<'_>) -> anyhow::Result<Summary> {
    // Each scenario's own late-retry distribution (the seed's unless it gives one).
    let dists: Vec<RetryDelay> = loaded.iter().map(|l| l.scenario.retry_delay()).collect();
    let mut jobs = Vec::new();
    for (si, l) in loaded.iter().enumerate() {
        let Some(traffic) = &l.scenario.traffic else {
            continue;
        };
        let arrivals = traffic
            .arrivals()
            .map_err(|e| anyhow::anyhow!("{}: traffic: {e}", l.path.display()))?;
        for (ri, cfg) in l.scenario.sim_configs().into_iter().enumerate() {
            let (s_o, s_t) = cfg.fractions();
            let per_s = arrivals.mean_rate_per_s()
                * ((1.0 - cfg.timeout_fraction) * s_o + cfg.timeout_fraction * s_t);
            let cost = per_s * cfg.arrival_s() * f64::from(traffic.replicates);
            jobs.push(Job {
                scenario: si,
                retention: ri,
                cfg,
                arrivals: arrivals.clone(),
                replicates: traffic.replicates,
                cost,
                loaded: l,
            });
        }
    }
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|a, b| jobs[*b].cost.total_cmp(&jobs[*a].cost));
    let total_cost: f64 = jobs.iter().map(|j| j.cost).sum::<f64>().max(1.0);
    let done = Mutex::new(vec![0.0f64; jobs.len()]);
    let results: Mutex<Vec<Option<Result<SimReport, String>>>> =
        Mutex::new((0..jobs.len()).map(|_| None).collect());
    let next = AtomicUsize::new(0);
    let workers = rayon::current_num_threads().clamp(1, jobs.len().max(1));
    rayon::scope(|s| {
        for _ in 0..workers {
            s.spawn(|_| {
                loop {
                    let i = next.fetch_add(1, Ordering::SeqCst);
                    let Some(&j) = order.get(i) else { break };
                    let job = &jobs[j];
                    let tick = |f: f64| {
                        let mut d = done.lock().unwrap_or_else(|p| p.into_inner());
                        d[j] = f * job.cost;
                        (options.tick)(d.iter().sum::<f64>() / total_cost);
                    };
                    let progress = Progress {
                        tick: &tick,
                        interrupted: options.interrupted,
                    };
                    let scratch = options.scratch;
                    let open = |r: u32| -> Result<Box<dyn Store>, crate::store::StoreError> {
                        let path = scratch
                            .join(format!("s{}-p{}-r{r}.sqlite", job.scenario, job.retention));
                        let opts = SqliteOptions {
                            // The simulator measures sizes and counts, not durability.
                            synchronous: Synchronous::Off,
                            ..SqliteOptions::default()
                        };
                        Ok(Box::new(SqliteStore::open(&path, &opts)?))
                    };
                    let r = replay::simulate(
                        &job.cfg,
                        &job.arrivals,
                        &dists[job.scenario],
                        job.replicates,
                        STORE_NAME,
                        &open,
                        &progress,
                    )
                    .map_err(|e| format!("{}: {e}", job.loaded.path.display()));
                    tick(1.0);
                    results.lock().unwrap_or_else(|p| p.into_inner())[j] = Some(r);
                }
            });
        }
    });
    let mut sims: Vec<Option<SimReport>> = Vec::with_capacity(jobs.len());
    for r in results.into_inner().unwrap_or_else(|p| p.into_inner()) {
        match r {
            Some(Ok(report)) => sims.push(Some(report)),
            Some(Err(e)) => anyhow::bail!(e),
            None => sims.push(None),
        }
    }

    let mut scenarios = Vec::new();
    for (si, l) in loaded.iter().enumerate() {
        let s = &l.scenario;
        let mut runs = Vec::new();
        for (j, job) in jobs.iter().enumerate() {
            if job.scenario != si {
                continue;
            }
            let Some(sim) = sims[j].take() else { continue };
            let retention = s.engine.retention.0[job.retention];
            let params = s
                .model_params(retention)
                .map_err(|e| anyhow::anyhow!("{}: {e}", l.path.display()))?;
            runs.push(run_result(
                job.cfg.clone(),
                params,
                sim,
                &dists[si],
                s.budgets.as_ref(),
            )?);
        }
        let timeline = match &s.timeline {
            None => None,
            Some(_) => {
                let path = options.scratch.join(format!("s{si}-timeline.sqlite"));
                let store = SqliteStore::open(&path, &SqliteOptions::default())?;
                let mut t = timeline::run(s, Box::new(store)).map_err(|e| {
                    anyhow::anyhow!("{}: running the timeline: {e}", l.path.display())
                })?;
                t.store = STORE_NAME.to_string();
                Some(t)
            }
        };
        scenarios.push(ScenarioResult {
            name: s.name.clone(),
            file: l.file_name(),
            description: s.description.trim().to_string(),
            seed: s.seed,
            deviations: deviations(s),
            budgets: s.budgets.clone(),
            runs,
            timeline,
        });
    }
    Ok(summarise(scenarios, None))
}

/// Assembles the summary and collects the broken budgets.
pub fn summarise(scenarios: Vec<ScenarioResult>, bench: Option<BenchResults>) -> Summary {
    let broken_budgets = scenarios
        .iter()
        .flat_map(|s| {
            s.runs.iter().flat_map(move |r| {
                r.verdicts
                    .iter()
                    .filter(|v| v.status == Status::Broken)
                    .map(move |v| BrokenBudget {
                        scenario: s.name.clone(),
                        retention: r.retention.clone(),
                        budget: v.budget,
                        figure: v.figure.estimate,
                        limit: v.limit,
                        unit: v.unit,
                    })
            })
        })
        .collect();
    let interrupted = scenarios
        .iter()
        .any(|s| s.runs.iter().any(|r| r.sampling.interrupted));
    Summary {
        schema_version: SCHEMA_VERSION,
        tool: Tool::default(),
        scenarios,
        broken_budgets,
        bench,
        interrupted,
    }
}

/// The non-default engine and traffic switches, named like the scenario file names them, so a
/// failure scenario says at a glance which line of defence it removes.
fn deviations(s: &Scenario) -> Vec<String> {
    let mut out = Vec::new();
    let e = &s.engine;
    if e.key_scope == KeyScope::Global {
        out.push("key_scope = global".into());
    }
    if e.record_placement == RecordPlacement::SeparateStore {
        out.push("record_placement = separate_store".into());
    }
    if e.carrier_key == CarrierKey::None {
        out.push("carrier_key = none".into());
    }
    if let Some(t) = &s.traffic {
        if t.key_policy == replay::KeyPolicy::NewPerAttempt {
            out.push("key_policy = new_per_attempt".into());
        }
        if t.crash_rate > 0.0 {
            out.push(format!(
                "crash_rate = {} at {}",
                t.crash_rate,
                serde_json::to_value(t.crash_point)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            ));
        }
        if t.callers > 1 {
            out.push(format!("callers = {}", t.callers));
        }
    }
    if s.carrier.hang_fraction > 0.0 {
        out.push(format!(
            "carrier.hang_fraction = {}",
            s.carrier.hang_fraction
        ));
    }
    if e.lease < std::time::Duration::from_secs(30) {
        out.push(format!(
            "lease = {}",
            crate::duration::format_secs(e.lease.as_secs_f64())
        ));
    }
    out
}

/// Evaluates one of [`model::FORMULAS`] with the given variables: how a simulated figure (the
/// measured store size) is priced with the very formula the model uses.
pub fn eval_formula(name: &str, vars: &[(&str, f64)]) -> Result<f64, String> {
    let formula = model::FORMULAS
        .iter()
        .find(|f| f.name == name)
        .ok_or_else(|| format!("no formula called {name}"))?;
    let mut env = minijinja::Environment::new();
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    env.add_function("max", |a: f64, b: f64| a.max(b));
    env.add_function("min", |a: f64, b: f64| a.min(b));
    let expr = env
        .compile_expression(formula.expr)
        .map_err(|e| format!("{name}: {e}"))?;
    let ctx: std::collections::BTreeMap<&str, f64> = vars.iter().copied().collect();
    let value = expr
        .eval(minijinja::Value::from(minijinja::value::Serde(&ctx)))
        .map_err(|e| format!("{name}: {e}"))?;
    f64::try_from(value).map_err(|e| format!("{name}: {e}"))
}

/// Maps a figure's three values through a function that grows with its input.
fn map_figure(
    f: &Figure,
    analytic: f64,
    g: impl Fn(f64) -> Result<f64, String>,
) -> Result<Figure, String> {
    Ok(Figure {
        estimate: g(f.estimate)?,
        ci95_low: g(f.ci95_low)?,
        ci95_high: g(f.ci95_high)?,
        analytic,
    })
}

/// A run's figures, verdicts and model, from one simulator report.
pub fn run_result(
    config: SimConfig,
    params: ModelParams,
    sim: SimReport,
    dist: &RetryDelay,
    budgets: Option<&Budgets>,
) -> anyhow::Result<RunResult> {
    let model = model::estimate(&params, dist);
    let price = params.storage_usd_per_gb_month;
    let storage = map_figure(&sim.store_bytes_steady, model.storage_cost_per_day, |b| {
        eval_formula(
            "storage_cost_per_day",
            &[
                ("store_bytes", b),
                ("replicas", params.replicas),
                ("storage_usd_per_gb_month", price),
            ],
        )
    })
    .map_err(anyhow::Error::msg)?;
    let d = &sim.duplicate_cost_per_day;
    let total = |s: f64, d: f64| {
        eval_formula(
            "total_cost_per_day",
            &[("storage_cost_per_day", s), ("duplicate_cost_per_day", d)],
        )
    };
    let total_cost = Figure {
        estimate: total(storage.estimate, d.estimate).map_err(anyhow::Error::msg)?,
        ci95_low: total(storage.ci95_low, d.ci95_low).map_err(anyhow::Error::msg)?,
        ci95_high: total(storage.ci95_high, d.ci95_high).map_err(anyhow::Error::msg)?,
        analytic: model.total_cost_per_day,
    };
    let figures = RunFigures {
        store_bytes: sim.store_bytes_steady,
        store_records: sim.store_records_steady,
        bytes_per_record: Figure {
            analytic: params.bytes_per_record,
            ..sim.bytes_per_record_measured
        },
        timed_out_per_day: sim.timed_out_per_day,
        late_after_purge_per_day: sim.late_after_purge_per_day,
        duplicate_labels_per_day: sim.duplicate_labels_per_day,
        duplicate_cost_per_day: sim.duplicate_cost_per_day,
        storage_cost_per_day: storage,
        total_cost_per_day: total_cost,
        unlabelled_per_day: sim.unlabelled_per_day,
    };
    let verdicts = budgets.map(|b| verdicts(b, &figures)).unwrap_or_default();
    Ok(RunResult {
        retention_s: sim.retention_s,
        retention: crate::format::human_duration(sim.retention_s),
        rate_per_s: sim.rate,
        config,
        figures,
        detection: sim.detection,
        outcomes: sim.outcomes.clone(),
        invariants: sim.invariants.clone(),
        sampling: Sampling {
            replicates: sim.replicates,
            sample_ordinary: sim.sample_ordinary,
            sample_timed_out: sim.sample_timed_out,
            replayed_intents: sim.replayed_intents,
            replayed_requests: sim.replayed_requests,
            arrival_seconds: sim.arrival_seconds,
            simulated_seconds: sim.simulated_seconds,
            interrupted: sim.interrupted,
        },
        model,
        verdicts,
        sim,
    })
}

/// Checks each budget against the estimate, and flags an interval that reaches past it.
pub fn verdicts(b: &Budgets, f: &RunFigures) -> Vec<Verdict> {
    let gb = |v: f64| v / 1e9;
    let checks = [
        (
            "max_store_gb",
            b.max_store_gb,
            Figure {
                estimate: gb(f.store_bytes.estimate),
                ci95_low: gb(f.store_bytes.ci95_low),
                ci95_high: gb(f.store_bytes.ci95_high),
                analytic: gb(f.store_bytes.analytic),
            },
            "GB",
        ),
        (
            "max_duplicates_per_day",
            b.max_duplicates_per_day,
            f.duplicate_labels_per_day,
            "labels/day",
        ),
        (
            "max_cost_per_day",
            b.max_cost_per_day,
            f.total_cost_per_day,
            "USD/day",
        ),
    ];
    checks
        .into_iter()
        .filter_map(|(budget, limit, figure, unit)| {
            let limit = limit?;
            let status = if figure.estimate > limit {
                Status::Broken
            } else if figure.ci95_high > limit {
                Status::AtRisk
            } else {
                Status::Ok
            };
            Some(Verdict {
                budget,
                limit,
                figure,
                unit,
                status,
            })
        })
        .collect()
}

/// The summary of a single `idemcalc simulate` run, for `simulate --report`.
pub fn from_simulation(
    description: String,
    configs: &[SimConfig],
    arrivals: &Arrivals,
    dist: &RetryDelay,
    reports: Vec<SimReport>,
) -> anyhow::Result<Summary> {
    let mut runs = Vec::new();
    for (cfg, sim) in configs.iter().zip(reports) {
        let peak = match arrivals {
            Arrivals::Profile(p) => p.peak_rate_per_s(),
            Arrivals::Constant { rate_per_s } => *rate_per_s,
        };
        let params = ModelParams {
            rate_per_s: arrivals.mean_rate_per_s(),
            peak_rate_per_s: peak.max(arrivals.mean_rate_per_s()),
            retention_s: cfg.retention_s(),
            timeout_fraction: cfg.timeout_fraction,
            done_fraction: cfg.done_fraction,
            label_price_usd: cfg.carrier.price_cents as f64 / 100.0,
            carrier_window_s: cfg.carrier.window_ms as f64 / 1000.0,
            bytes_per_record: cfg.engine.payload.record_bytes(),
            ..ModelParams::default()
        };
        runs.push(run_result(cfg.clone(), params, sim, dist, None)?);
    }
    let scenario = ScenarioResult {
        name: "simulate".into(),
        file: String::new(),
        description,
        seed: configs.first().map_or(1, |c| c.seed),
        deviations: Vec::new(),
        budgets: None,
        runs,
        timeline: None,
    };
    Ok(summarise(vec![scenario], None))
}

/// Writes the tables, `summary.json`, `summary.md` and `index.html` into `out` (created if
/// needed) and returns the files written. Everything is written even when budgets are broken:
/// the exit code is the caller's business.
pub fn write_all(out: &Path, summary: &Summary) -> anyhow::Result<Vec<PathBuf>> {
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
    let exporters: [&dyn Exporter; 3] = [&JsonExporter, &MarkdownExporter, &HtmlExporter];
    for e in exporters {
        let path = out.join(e.file_name());
        let bytes = e.serialize(summary)?;
        std::fs::write(&path, bytes)
            .with_context(|| format!("{}: cannot write", path.display()))?;
        written.push(path);
    }
    Ok(written)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_cost_uses_the_model_formula() {
        let v = eval_formula(
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
        assert!(eval_formula("nope", &[]).is_err());
        assert!(eval_formula("storage_cost_per_day", &[]).is_err());
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
        };
        let v = verdicts(&b, &f);
        let statuses: Vec<Status> = v.iter().map(|v| v.status).collect();
        assert_eq!(statuses, [Status::Broken, Status::AtRisk, Status::Ok]);
        assert_eq!(v[0].figure.estimate, 20.0);
    }
}
