//! Runs: validated settings (or scenarios) → a [`Plan`] each, before any store opens → jobs →
//! measurements, with the plan's one model evaluation per job beside them → [`results`] and
//! budget verdicts.
//!
//! This is the only layer that schedules work and opens stores ([`stores::Stores`], one place
//! for every store's lifecycle). It knows no output format: the report's exporters and
//! the CLI turn its results into text.

pub mod compare;
pub mod plan;
pub mod results;
pub mod whatif;

use crate::settings::Budget;
use crate::store::{Slot, StoreOptions, Stores, Sweeper};
pub use plan::{JobPlan, Plan};
pub use results::*;

use crate::decision::{DecisionInputs, Measured, MeasuredTimeouts, Recommendation, decide};
use crate::model;
use crate::scenario::{Budgets, Loaded, Scenario};
use crate::sim::replay::{self, Progress};
use anyhow::Context as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

/// Runs the simulation of every retention of `plan` in parallel, each replicate on its own
/// store from `stores`, and puts the plan's model figures beside each.
pub fn simulate(
    plan: &Plan,
    stores: &Stores,
    progress: &Progress<'_>,
) -> anyhow::Result<Vec<SimReport>> {
    use rayon::prelude::*;
    plan.jobs
        .par_iter()
        .enumerate()
        .map(|(point, job)| {
            let slot = Slot {
                point,
                ..Slot::default()
            };
            Ok(measure(plan, job, stores, slot, job.sweeper, progress)?)
        })
        .collect()
}

/// Simulates `job` on `stores` (replicate `r` in `slot` with `replicate: r`) and puts the
/// plan's model beside the measurements: every simulation `run` starts goes through here, so
/// none reaches a caller without its model column.
fn measure(
    plan: &Plan,
    job: &JobPlan,
    stores: &Stores,
    slot: Slot,
    sweeper: Sweeper,
    progress: &Progress<'_>,
) -> Result<SimReport, replay::SimError> {
    let open = |replicate: u32| stores.open_with(Slot { replicate, ..slot }, sweeper);
    let config = SimConfig {
        sweeper,
        ..job.config.clone()
    };
    let mut sim = replay::simulate(
        &config,
        &plan.arrivals,
        &plan.retry,
        plan.settings.traffic.replicates,
        stores.name(),
        &open,
        progress,
    )?;
    with_model(&mut sim, job, &config);
    Ok(sim)
}

/// Puts the job's one model evaluation beside the simulator's measurements (the simulator
/// measures only and leaves every `analytic` NaN: each one is set here), and says when
/// records outlive their retention by design.
///
/// The model's records and store are `rate × the record's life` (`SimConfig::record_life_s`:
/// its retention plus the sweeper's mean lag), `config` being what the run replayed.
fn with_model(sim: &mut SimReport, job: &JobPlan, config: &SimConfig) {
    let e = &job.model;
    let p = &job.params;
    let retention_s = job.retention_s();
    let life = if retention_s > 0.0 {
        config.record_life_s() / retention_s
    } else {
        1.0
    };
    sim.bytes_per_record_measured.analytic = p.bytes_per_record;
    sim.store_records_steady.analytic = e.store_bytes / p.bytes_per_record * life;
    sim.store_bytes_steady.analytic = e.store_bytes * life;
    sim.timed_out_per_day.analytic = e.timed_out_per_day;
    sim.late_after_purge_per_day.analytic = e.late_after_purge_per_day;
    sim.duplicate_labels_per_day.analytic = e.duplicate_labels_per_day;
    // The duplicates priced by the model's formula at the label price in dollars, the
    // measured figure and its interval as well as the model's (the formula table is static and
    // tested: failing it is a bug, as in `model::estimate`).
    sim.duplicate_cost_per_day = map_figure(&sim.duplicate_labels_per_day, |n| {
        model::formula(
            "duplicate_cost_per_day",
            &[
                ("duplicate_labels_per_day", n),
                ("label_price_usd", p.label_price_usd),
            ],
        )
    })
    .unwrap_or_else(|e| panic!("the formula table is broken: {e}"));
    // With keys the model retries every timed-out call, so it leaves no parcel unlabelled (see
    // `total_cost_per_day` in `model::FORMULAS`). It has no lease to take over: 0. It has no
    // figure for claims of a purged key (it counts late arrivals, not every request that
    // carries one): NaN, shown as "no model" and null in JSON, not a 0 it never computed.
    sim.unlabelled_per_day.analytic = 0.0;
    sim.purged_key_requests_per_day.analytic = f64::NAN;
    sim.takeovers_per_day.analytic = 0.0;
    let mut notes = Vec::new();
    if let Sweeper::Partitions { period_ms } = config.sweeper {
        notes.push(format!(
            "sweeper: the key table is partitioned by expiry in ranges of {}, each dropped once its range has passed, so a record stays up to that long past its retention (on average half of it); the model's records count that half",
            crate::duration::format_secs(period_ms as f64 / 1000.0)
        ));
    }
    for note in notes {
        if !sim.notes.contains(&note) {
            sim.notes.push(note);
        }
    }
}

/// Runs a scenario's scripted timeline on the store of `slot`, which must be empty: replaying a
/// timeline into a store that already holds its keys would answer from the old records.
pub fn timeline(
    scenario: &Scenario,
    stores: &Stores,
    slot: Slot,
) -> anyhow::Result<TimelineReport> {
    let mut store = stores.open(slot)?;
    if let Some(what) = crate::store::existing_contents(store.as_mut())? {
        anyhow::bail!(
            "{} already holds {what}; a timeline needs an empty store (a new file or schema)",
            store.describe()
        );
    }
    let mut report = scenario.run_timeline(store)?;
    report.store = stores.name().to_string();
    Ok(report)
}

/// One simulation to run: a scenario at one retention.
struct Job<'a> {
    scenario: usize,
    retention: usize,
    plan: &'a Plan,
    job: &'a JobPlan,
    /// Expected replayed intents: the run time is about proportional to it.
    cost: f64,
    loaded: &'a Loaded,
}

/// Every scenario's plan, in order, before any store opens: a scenario whose retry CDF
/// cannot be read fails the report before anything runs.
pub fn plans(loaded: &[Loaded]) -> anyhow::Result<Vec<Plan>> {
    loaded.iter().map(Plan::for_scenario).collect()
}

/// Runs every scenario (`plans[i]` is `loaded[i]`'s): timelines at once, simulations in
/// parallel, longest first so two cores finish together. Returns the summary without bench
/// results. `progress.tick` gets the fraction of all simulated work done.
pub fn scenarios(
    loaded: &[Loaded],
    plans: &[Plan],
    stores: &Stores,
    progress: &Progress<'_>,
) -> anyhow::Result<Summary> {
    let mut jobs = Vec::new();
    for (si, (l, plan)) in loaded.iter().zip(plans).enumerate() {
        for (ri, job) in plan.jobs.iter().enumerate() {
            let cfg = &job.config;
            let (s_o, s_t) = cfg.fractions();
            let per_s = plan.arrivals.mean_rate_per_s()
                * ((1.0 - cfg.timeout_fraction) * s_o + cfg.timeout_fraction * s_t);
            let cost = per_s * cfg.arrival_s() * f64::from(plan.settings.traffic.replicates);
            jobs.push(Job {
                scenario: si,
                retention: ri,
                plan,
                job,
                cost,
                loaded: l,
            });
        }
    }
    let mut order: Vec<usize> = (0..jobs.len()).collect();
    order.sort_by(|a, b| jobs[*b].cost.total_cmp(&jobs[*a].cost));
    let total_cost: f64 = jobs.iter().map(|j| j.cost).sum::<f64>().max(1.0);
    let done = Mutex::new(vec![0.0f64; jobs.len()]);
    let results: Mutex<Vec<Option<anyhow::Result<SimReport>>>> =
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
                        (progress.tick)(d.iter().sum::<f64>() / total_cost);
                    };
                    let job_progress = Progress {
                        tick: &tick,
                        interrupted: progress.interrupted,
                    };
                    let slot = Slot {
                        scenario: job.scenario,
                        point: job.retention,
                        ..Slot::default()
                    };
                    let r = measure(
                        job.plan,
                        job.job,
                        stores,
                        slot,
                        job.job.sweeper,
                        &job_progress,
                    )
                    .with_context(|| job.loaded.path.display().to_string());
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
            Some(Err(e)) => return Err(e),
            None => sims.push(None),
        }
    }

    let mut scenarios = Vec::new();
    for (si, (l, plan)) in loaded.iter().zip(plans).enumerate() {
        let s = &l.scenario;
        let mut runs = Vec::new();
        for (j, job) in jobs.iter().enumerate() {
            if job.scenario != si {
                continue;
            }
            let Some(sim) = sims[j].take() else { continue };
            runs.push(run_result(job.job, sim, s.budgets.as_ref())?);
        }
        let timeline = match &s.timeline {
            None => None,
            Some(_) => {
                let slot = Slot {
                    scenario: si,
                    timeline: true,
                    ..Slot::default()
                };
                Some(timeline(s, stores, slot).map_err(|e| {
                    anyhow::anyhow!("{}: running the timeline: {e:#}", l.path.display())
                })?)
            }
        };
        let deviations = deviations(s);
        let kind = if runs.is_empty() {
            ScenarioKind::Timeline
        } else if deviations.is_empty() {
            ScenarioKind::Sizing
        } else {
            ScenarioKind::Failure
        };
        let decision = match kind {
            ScenarioKind::Sizing => decision(plan, s.budgets.as_ref(), &runs)
                .map_err(|e| anyhow::anyhow!("{}: the decision: {e:#}", l.path.display()))?,
            _ => None,
        };
        scenarios.push(ScenarioResult {
            name: s.name.clone(),
            kind,
            file: l.file_name(),
            inputs_sha256: plan.inputs_sha256(s.timeline.as_ref(), s.budgets.as_ref()),
            description: s.description.trim().to_string(),
            seed: s.settings.seed,
            deviations,
            budgets: s.budgets.clone(),
            runs,
            timeline,
            decision,
        });
    }
    Ok(summarise(scenarios, None))
}

/// What Redis gives up, in the comparison's words (`tests/it/redis_store.rs` makes both happen).
const REDIS_CAVEAT: &str = "the key record and the label are in two stores: a crash between their writes loses or doubles a label, and eviction under maxmemory forgets keys inside their retention, each retry of which buys again";

/// Measures the headline scenario on each store of `specs` at its first retention, and puts
/// the report's own store (`main`, already measured in `summary`) first. Each is sized at the
/// headline's retention from the decision's records (its store over its bytes per record) at
/// the store's own bytes per record, and priced through the formula table; a store in memory
/// (Redis) at `memory_usd_per_gb_month`. Empty when no scenario was sized.
pub fn compare_stores(
    summary: &Summary,
    plans: &[Plan],
    main: &Stores,
    specs: &[String],
    progress: &Progress<'_>,
) -> anyhow::Result<Vec<StoreRow>> {
    let Some(head) = &summary.decision else {
        return Ok(Vec::new());
    };
    let Some((plan, result)) = plans
        .iter()
        .zip(&summary.scenarios)
        .find(|(_, s)| s.name == head.scenario)
    else {
        return Ok(Vec::new());
    };
    let (Some(first), Some(job)) = (result.runs.first(), plan.jobs.first()) else {
        return Ok(Vec::new());
    };
    let settings = &plan.settings;
    let rec = &head.recommendation;
    let choice = rec
        .recommended
        .as_ref()
        .or(rec.closest.as_ref())
        .unwrap_or(&rec.cheapest);
    // Records the decision's store holds at the headline's retention.
    let records = choice.store_bytes / rec.bytes_per_record.max(f64::MIN_POSITIVE);
    let row = |stores: &Stores, store: String, bytes: Figure, duplicates: Figure| {
        let memory = matches!(stores.spec(), crate::store::StoreSpec::Redis { .. });
        let price = if memory {
            settings.model.memory_usd_per_gb_month
        } else {
            settings.model.storage_usd_per_gb_month
        };
        let store_bytes = records * bytes.estimate;
        let storage_cost_per_day = model::formula(
            "storage_cost_per_day",
            &[
                ("store_bytes", store_bytes),
                ("replicas", rec.replicas),
                ("storage_usd_per_gb_month", price),
            ],
        )?;
        Ok::<_, String>(StoreRow {
            kind: stores.kind(),
            store,
            measured_at: first.retention.clone(),
            bytes_per_record: bytes,
            priced_as: if memory { "memory" } else { "disk" },
            usd_per_gb_month: price,
            retention: choice.retention.clone(),
            store_bytes,
            store_bytes_ci95: [records * bytes.ci95_low, records * bytes.ci95_high],
            storage_cost_per_day,
            duplicate_labels_per_day: duplicates,
            caveat: memory.then_some(REDIS_CAVEAT),
        })
    };
    // The scenario's sweeper wherever it can run (partitions: PostgreSQL only), named in the
    // row, so each store is measured with the layout the scenario asks for.
    let sweeper = |stores: &Stores| match stores.spec() {
        crate::store::StoreSpec::Postgres { .. } => job.sweeper,
        _ => Sweeper::Delete,
    };
    let name = |stores: &Stores| {
        if sweeper(stores).partitioned() {
            format!("{} (partitions sweeper)", stores.name())
        } else {
            stores.name().to_string()
        }
    };
    let mut rows = vec![
        row(
            main,
            name(main),
            first.figures.bytes_per_record,
            first.figures.duplicate_labels_per_day,
        )
        .map_err(anyhow::Error::msg)?,
    ];
    for spec in specs {
        let stores = Stores::new(
            Some(spec),
            None,
            StoreOptions {
                purpose: "compare",
                ..StoreOptions::default()
            },
        )
        .map_err(|e| anyhow::anyhow!("--compare-store {spec}: {e:#}"))?;
        let sim = measure(
            plan,
            job,
            &stores,
            Slot::default(),
            sweeper(&stores),
            progress,
        );
        stores.finish()?;
        let sim = sim.with_context(|| format!("--compare-store {spec}"))?;
        rows.push(
            row(
                &stores,
                name(&stores),
                sim.bytes_per_record_measured,
                sim.duplicate_labels_per_day,
            )
            .map_err(anyhow::Error::msg)?,
        );
    }
    Ok(rows)
}

/// Assembles the summary, collects the broken budgets and evaluates where the report's what-if
/// panel starts.
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
                        ci95: [v.figure.ci95_low, v.figure.ci95_high],
                        limit: v.limit,
                        unit: v.unit,
                    })
            })
        })
        .collect();
    let interrupted = scenarios
        .iter()
        .any(|s| s.runs.iter().any(|r| r.sampling.interrupted));
    let decision = scenarios.iter().find_map(|s| {
        s.decision.as_ref().map(|d| Headline {
            scenario: s.name.clone(),
            recommendation: d.clone(),
        })
    });
    let whatif = whatif::start(&scenarios, decision.as_ref());
    Summary {
        schema_version: SCHEMA_VERSION,
        tool: Tool::default(),
        stores: Vec::new(),
        decision,
        scenarios,
        comparison: None,
        broken_budgets,
        bench,
        load: None,
        interrupted,
        whatif,
    }
}

/// The retention decision for a sizing scenario, at the bytes per record its runs measured
/// (with their interval) rather than the model's assumed 512 B, so the recommendation sizes
/// the store the engine really writes. Budgets are the decision's targets; without a
/// duplicates budget the default risk target (fewer than one a month) applies.
///
/// An interrupted run decides nothing (`None`): it measured only part of its arrivals, and
/// the late retries of the last of them never came, so its duplicates say too little.
pub fn decision(
    plan: &Plan,
    budgets: Option<&Budgets>,
    runs: &[RunResult],
) -> anyhow::Result<Option<Recommendation>> {
    if runs.iter().any(|r| r.sampling.interrupted) {
        return Ok(None);
    }
    let settings = &plan.settings;
    let mut params = plan.first_params();
    // The longest run reached the most representative steady state; any run measured the
    // record size, and all of them measured the same schema and payloads.
    let measured = longest_first(runs)
        .map(|r| r.figures.bytes_per_record)
        .find(|f| f.estimate.is_finite() && f.estimate > 0.0);
    let mut ci95 = None;
    if let Some(f) = measured {
        params.bytes_per_record = f.estimate;
        if f.ci95_low.is_finite() && f.ci95_high.is_finite() && f.ci95_low > 0.0 {
            ci95 = Some([f.ci95_low, f.ci95_high]);
        }
    }
    let inputs = DecisionInputs {
        targets: budgets.map(Budgets::targets).unwrap_or_default(),
        bytes_per_record_ci95: ci95,
        evidence: settings.retry.fitted.as_ref().and_then(|f| f.evidence()),
        count_carrier_window: !settings.budgets.without_carrier_window,
        measured: measured_at_each_retention(runs),
        measured_timeouts: measured_timeouts(runs),
        sweeper: Some((settings.traffic.sweeper, settings.traffic.sweep_period_s)),
        arrivals: Some(plan.arrivals.clone()),
    };
    decide(&params, &plan.retry, &inputs)
        .map(Some)
        .map_err(|e| anyhow::anyhow!("the decision's formulas: {e}"))
}

/// Runs by how much they simulated, the longest first (the last given on a tie): "the longest
/// run" is the one with the most arrivals, not the last one given.
fn longest_first(runs: &[RunResult]) -> impl Iterator<Item = &RunResult> {
    let mut sorted: Vec<&RunResult> = runs.iter().rev().collect();
    sorted.sort_by(|a, b| {
        b.sampling
            .arrival_seconds
            .total_cmp(&a.sampling.arrival_seconds)
    });
    sorted.into_iter()
}

/// The first-attempt timeouts the longest run measured, beside the model's at the asked share.
fn measured_timeouts(runs: &[RunResult]) -> Option<MeasuredTimeouts> {
    longest_first(runs).find_map(|r| {
        let f = r.figures.timed_out_per_day;
        (f.estimate.is_finite() && f.ci95_high > 0.0 && r.model.timed_out_per_day > 0.0).then(
            || MeasuredTimeouts {
                per_day: Figure::interval(&f),
                modelled_per_day: r.model.timed_out_per_day,
            },
        )
    })
}

/// What the runs counted at each retention the decision weighs: a run's own figures at the
/// retention it replayed (its store only once it reached a steady window; before that it was
/// still growing), elsewhere the longest run's counts from its log of requests
/// (`sim::replay::candidates`), so every retention named is decided on the same evidence.
fn measured_at_each_retention(runs: &[RunResult]) -> Vec<Measured> {
    let counted = longest_first(runs)
        .next()
        .map(|r| r.sim.candidates.as_slice())
        .unwrap_or_default();
    let counted_at = |retention_s: f64| {
        counted
            .iter()
            .find(|c| (c.retention_s - retention_s).abs() < 0.5)
    };
    let mut out: Vec<Measured> = runs
        .iter()
        .filter_map(|r| {
            let d = r.figures.duplicate_labels_per_day;
            let records = if r.sampling.steady_window {
                r.figures.store_records
            } else {
                counted_at(r.retention_s)?.store_records
            };
            (d.estimate.is_finite() && d.ci95_high.is_finite()).then(|| Measured {
                retention_s: r.retention_s,
                duplicates_per_day: Figure::interval(&d),
                records: Figure::interval(&records),
                late_after_purge_per_day: Figure::interval(&r.figures.late_after_purge_per_day),
            })
        })
        .collect();
    for c in counted {
        if !out
            .iter()
            .any(|m| (m.retention_s - c.retention_s).abs() < 0.5)
        {
            out.push(Measured {
                retention_s: c.retention_s,
                duplicates_per_day: Figure::interval(&c.duplicate_labels_per_day),
                records: Figure::interval(&c.store_records),
                late_after_purge_per_day: Figure::interval(&c.late_after_purge_per_day),
            });
        }
    }
    out
}

/// The scenario's switched-off lines of defence, by the one check (`sim::deviations`).
fn deviations(s: &Scenario) -> Vec<String> {
    let first = s.settings.retentions().first().copied().unwrap_or(0.0);
    crate::sim::deviations::deviations(&s.settings.sim_config(first), s.simulated)
}

/// Maps a figure's values, the model's among them, through a function that grows with its
/// input.
fn map_figure(f: &Figure, g: impl Fn(f64) -> Result<f64, String>) -> Result<Figure, String> {
    Ok(Figure {
        estimate: g(f.estimate)?,
        ci95_low: g(f.ci95_low)?,
        ci95_high: g(f.ci95_high)?,
        analytic: g(f.analytic)?,
    })
}

/// A run's figures, verdicts and model, from one simulator report whose model column
/// [`simulate`] or [`scenarios`] filled from `job`.
pub fn run_result(
    job: &JobPlan,
    sim: SimReport,
    budgets: Option<&Budgets>,
) -> anyhow::Result<RunResult> {
    let params = &job.params;
    let price = params.storage_usd_per_gb_month;
    let storage = map_figure(&sim.store_bytes_steady, |b| {
        model::formula(
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
        model::formula(
            "total_cost_per_day",
            &[("storage_cost_per_day", s), ("duplicate_cost_per_day", d)],
        )
        .map_err(anyhow::Error::msg)
    };
    let total_cost = Figure {
        estimate: total(storage.estimate, d.estimate)?,
        ci95_low: total(storage.ci95_low, d.ci95_low)?,
        ci95_high: total(storage.ci95_high, d.ci95_high)?,
        analytic: total(storage.analytic, d.analytic)?,
    };
    let figures = RunFigures {
        store_bytes: sim.store_bytes_steady,
        store_records: sim.store_records_steady,
        bytes_per_record: sim.bytes_per_record_measured,
        timed_out_per_day: sim.timed_out_per_day,
        timed_out_attempts_per_day: sim.timed_out_attempts_per_day,
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
        retention: crate::duration::format_secs(sim.retention_s),
        rate_per_s: sim.rate,
        config: job.config.clone(),
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
            steady_window: sim.steady_window,
        },
        model: job.model.clone(),
        verdicts,
        sim,
    })
}

/// Checks each budget against the estimate, and flags an interval that reaches past it.
pub fn verdicts(b: &Budgets, f: &RunFigures) -> Vec<Verdict> {
    let gb = |v: f64| v / 1e9;
    let checks = [
        (
            Budget::MaxStoreGb,
            b.max_store_gb,
            Figure {
                estimate: gb(f.store_bytes.estimate),
                ci95_low: gb(f.store_bytes.ci95_low),
                ci95_high: gb(f.store_bytes.ci95_high),
                analytic: gb(f.store_bytes.analytic),
            },
        ),
        (
            Budget::MaxDuplicatesPerDay,
            b.max_duplicates_per_day,
            f.duplicate_labels_per_day,
        ),
        (
            Budget::MaxCostPerDay,
            b.max_cost_per_day,
            f.total_cost_per_day,
        ),
    ];
    checks
        .into_iter()
        .filter_map(|(budget, limit, figure)| {
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
                unit: budget.unit(),
                status,
            })
        })
        .collect()
}

/// The summary of a single `idemcalc simulate` run (`reports[i]` is `plan.jobs[i]`'s): what
/// `simulate --report` draws and where its decision comes from.
pub fn simulation_summary(
    description: String,
    plan: &Plan,
    reports: Vec<SimReport>,
) -> anyhow::Result<Summary> {
    let runs = plan
        .jobs
        .iter()
        .zip(reports)
        .map(|(job, sim)| run_result(job, sim, None))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let decision = decision(plan, Some(&plan.settings.budgets), &runs)?;
    let scenario = ScenarioResult {
        name: "simulate".into(),
        kind: ScenarioKind::Sizing,
        file: String::new(),
        inputs_sha256: plan.inputs_sha256(None, None),
        description,
        seed: plan.settings.seed,
        deviations: Vec::new(),
        budgets: None,
        runs,
        timeline: None,
        decision,
    };
    Ok(summarise(vec![scenario], None))
}
