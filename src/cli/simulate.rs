use super::Format;
use crate::duration;
use crate::output::{Input, Kind, Target};
use crate::run::Plan;
use crate::settings::Settings;
use crate::settings::flags::Flags;
use crate::settings::knobs::SIMULATE;
use crate::sim::replay::{self, Progress, SimReport};
use crate::store::{StoreOptions, Stores};
use anyhow::Context;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// Every simulation knob, from the settings table (the same as a scenario file's fields).
    #[command(flatten)]
    pub knobs: Flags<SIMULATE>,
    /// Take the knobs from this scenario file's [engine], [carrier], [traffic] and [model]; flags
    /// given as well override the file's values.
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    /// Print the validated settings as JSON and exit without simulating.
    #[arg(long)]
    pub dry_run: bool,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Write the time series and outcome tables (CSV and Parquet) into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Replace outputs idemcalc did not write.
    ///
    /// An existing --report, --request-log or --carrier-ledger file, or files of the same names
    /// in a non-empty --out directory without idemcalc's figures.csv. An input of the run and a
    /// symbolic link are refused even so.
    #[arg(long)]
    pub force: bool,
    /// Also write the one-page HTML report of this run to this file.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Write the carrier's invoice lines to this CSV file, each as the purchase is booked.
    ///
    /// Columns at_ms, carrier_key, order_id, parcel_no, label_version, label_id, tracking_no,
    /// cost_cents; one line per purchase, written before the carrier answers, so a run killed
    /// even with SIGKILL leaves every purchase it made. It is the carrier of the run's named
    /// store: the first retention's first replicate (the store --db or --store names; the first
    /// scratch store when none is named). Written in place as the run goes, not replaced at the
    /// end like the other outputs.
    #[arg(long, value_name = "FILE")]
    pub carrier_ledger: Option<PathBuf>,
    /// Keep the SQLite store in this file (replicates and sweep points get a suffix).
    #[arg(long, conflicts_with = "store")]
    pub db: Option<PathBuf>,
    /// The store: `sqlite:PATH`, a file path, `postgres://USER@HOST:PORT/DATABASE` or
    /// `redis://HOST:PORT[/DB]` (the seed's rejected separate store: records in Redis, labels
    /// in a SQLite file) (default: SQLite in memory, the same figures as a file's). Each
    /// replicate and sweep point gets its own file, schema or prefix; PostgreSQL and Redis runs
    /// without `?schema=NAME` / `?prefix=NAME` use scratch ones removed afterwards.
    #[arg(long, value_name = "SPEC")]
    pub store: Option<String>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

/// Set by the Ctrl-C handler; every running replicate stops at its next event.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

impl SimulateArgs {
    /// The one validated settings value: the flags, over the `--scenario` file if there is one.
    pub fn settings(&self) -> anyhow::Result<Settings> {
        let Some(path) = &self.scenario else {
            return Ok(self.knobs.settings()?);
        };
        let scenario = crate::scenario::Scenario::load(path)?;
        if !scenario.simulated {
            anyhow::bail!(
                "{}: no [traffic] to simulate; a [timeline] runs with `idemcalc scenario FILE`",
                path.display()
            );
        }
        Ok(scenario.settings_under(&self.knobs)?)
    }
}

fn simulate_plan(args: &SimulateArgs, plan: &Plan, quiet: bool) -> anyhow::Result<Vec<SimReport>> {
    let stores = Stores::new(
        args.store.as_deref(),
        args.db.as_deref(),
        StoreOptions {
            purpose: "sim",
            ..StoreOptions::default()
        },
    )?;
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
    let bar = super::progress_bar(quiet, "simulating");
    let tick = |f: f64| bar.set_position((f.clamp(0.0, 1.0) * 1000.0) as u64);
    let progress = Progress {
        tick: &tick,
        interrupted: &INTERRUPTED,
    };
    let reports = crate::run::simulate(plan, &stores, &progress);
    bar.finish_and_clear();
    stores.finish()?;
    reports
}

pub fn run(args: &SimulateArgs) -> anyhow::Result<i32> {
    let settings = args.settings()?;
    if args.dry_run {
        // Every check a run makes before it opens a store, so that a dry run accepts exactly
        // what a run accepts (only the outputs, which a dry run does not write, are left out).
        checked_plan(args, &settings)?;
        super::print(&(serde_json::to_string_pretty(&settings)? + "\n"))?;
        return Ok(0);
    }
    // Every output is checked before the simulation runs, not after it.
    if let Some(path) = &settings.traffic.request_log {
        crate::fit::log_kind(path)?;
    }
    check_outputs(args, &settings)?;
    let mut plan = checked_plan(args, &settings)?;
    if let Some(path) = &args.carrier_ledger {
        attach_carrier_ledger(&mut plan, path)?;
    }
    let reports = simulate_plan(args, &plan, args.quiet)?;
    if let Some(path) = &settings.traffic.request_log {
        write_request_log(&plan, path)?;
    }
    if let Some(dir) = &args.out {
        for r in &reports {
            let prefix = if reports.len() > 1 {
                format!("retention-{}-", r.retention)
            } else {
                String::new()
            };
            crate::tables::write_all(dir, &prefix, r)?;
        }
    }
    // The decision at the bytes per record this run measured, under the budget flags.
    let summary = simulation_summary(&plan, &reports)?;
    // No decision from an interrupted run (`run::decision`): say why instead.
    let decision = summary.decision.as_ref().map(|d| &d.recommendation);
    if let Some(path) = &args.report {
        use crate::report::Exporter as _;
        let html = crate::report::HtmlExporter {
            stamp: crate::report::RunStamp::now(),
        }
        .serialize(&summary)?;
        crate::output::write(path, &html)
            .with_context(|| format!("--report {}: cannot write the report", path.display()))?;
    }
    match args.format {
        Format::Json => {
            let mut value = if reports.len() == 1 {
                serde_json::to_value(&reports[0])?
            } else {
                serde_json::json!({ "sweep": reports })
            };
            if let Some(o) = value.as_object_mut() {
                o.insert("decision".into(), serde_json::to_value(decision)?);
                if decision.is_none() {
                    o.insert("no_decision".into(), no_decision(&reports).into());
                }
            }
            super::print(&(serde_json::to_string_pretty(&value)? + "\n"))?;
        }
        Format::Table => {
            // The answer to the question asked leads; the figures behind it follow.
            if let Some(d) = decision {
                let asked: Vec<(f64, String)> = reports
                    .iter()
                    .map(|r| (r.retention_s, r.retention.clone()))
                    .collect();
                let lead = crate::report::text::verdict(&asked, d);
                if !lead.is_empty() {
                    super::print(&(lead + "\n"))?;
                }
            }
            for r in &reports {
                super::print(&crate::report::text::simulation(r))?;
            }
            match decision {
                Some(d) => super::print(&crate::report::text::decision(d))?,
                None => super::print(&crate::report::text::no_decision(&no_decision(&reports)))?,
            }
        }
    }
    if reports.iter().any(|r| r.interrupted) {
        let r = &reports[0];
        eprintln!(
            "interrupted: stopped after {} of {} simulated; the store is consistent and the figures above cover only that part",
            duration::format_secs(r.simulated_seconds.round()),
            duration::format_secs(r.arrival_seconds.round()),
        );
        return Ok(130);
    }
    Ok(if reports.iter().all(|r| r.invariants.hold) {
        0
    } else {
        super::EXIT_BUDGET
    })
}

/// The run's plan with every check a run makes before the first store opens: the request
/// log's format, the store's spec, the plan (the `--retry-cdf` file read, the retry
/// distribution fitted to `--retry-min-delay`/`--retry-horizon`) and each job's simulator
/// configuration (`--deadline`, `--retention` in whole milliseconds, …), which the replay
/// would otherwise refuse only once it starts.
fn checked_plan(args: &SimulateArgs, settings: &Settings) -> anyhow::Result<Plan> {
    if let Some(path) = &settings.traffic.request_log {
        crate::fit::log_kind(path)?;
    }
    if let Some(spec) = &args.store {
        crate::store::StoreSpec::parse(spec)?;
    }
    let plan = Plan::new(settings)?;
    for job in &plan.jobs {
        job.config.validate()?;
    }
    Ok(plan)
}

/// Opens `--carrier-ledger` (already through `check_outputs`) and gives it to the first job,
/// whose first replicate runs on the store the run names. Unlike every other output it is
/// opened in place (`output::create_in_place`) rather than written to a temporary file renamed
/// at the end: it must hold the purchases of a run killed with SIGKILL, which never gets to a
/// rename.
fn attach_carrier_ledger(plan: &mut Plan, path: &Path) -> anyhow::Result<()> {
    let context = || format!("--carrier-ledger {}: cannot write it", path.display());
    let file = crate::output::create_in_place(path).with_context(context)?;
    let ledger = crate::carrier::LedgerFile::new(file, path).with_context(context)?;
    if let Some(job) = plan.jobs.first_mut() {
        job.config.carrier_ledger = Some(std::sync::Arc::new(ledger));
    }
    Ok(())
}

/// Why an interrupted run recommends no retention.
fn no_decision(reports: &[SimReport]) -> String {
    let r = &reports[0];
    format!(
        "No recommendation: the run was interrupted after {} of {} simulated. The figures above are per day of the time simulated, but the late retries of its last intents never came, so it cannot say which retention meets the targets; rerun to the end.",
        crate::format::approx_duration(r.simulated_seconds),
        crate::format::human_duration(r.arrival_seconds),
    )
}

/// What marks a page `--report` (or `report`) wrote: the generator tag in its head.
const PAGE_MARK: &[u8] = br#"<meta name="generator" content="idemcalc report">"#;

/// Checks `--out`, `--report`, `--request-log` and `--carrier-ledger` (`crate::output`): none
/// is an input of the run (the scenario, the retry CDF, the SQLite store) or another of these
/// outputs, none is a link, and none replaces what idemcalc did not write unless `--force`.
fn check_outputs(args: &SimulateArgs, settings: &Settings) -> anyhow::Result<()> {
    let store = match &args.store {
        Some(spec) => match crate::store::StoreSpec::parse(spec) {
            Ok(crate::store::StoreSpec::Sqlite(path)) => Some(path),
            _ => None,
        },
        None => args.db.clone(),
    };
    // The run's inputs, which the --out directory may not hold either. It may hold the SQLite
    // store, the --report page or the request log (state and outputs, not inputs): the files
    // are only checked not to be any of them.
    let mut inputs: Vec<Input> = Vec::new();
    if let Some(path) = &args.scenario {
        inputs.push(Input {
            what: "--scenario",
            path,
        });
    }
    if let Some(path) = &settings.retry.cdf {
        inputs.push(Input {
            what: "--retry-cdf",
            path,
        });
    }
    // The directory first: it is created here, and the files may go into it.
    if let Some(dir) = &args.out {
        let target = Target {
            flag: "--out",
            path: dir,
            kind: Kind::Dir,
            ours: &crate::tables::is_tables_dir,
            mark: "no figures.csv with idemcalc's header in it",
        };
        crate::output::check(&target, args.force, &inputs)?;
    }
    if let Some(path) = &store {
        inputs.push(Input {
            what: "store",
            path,
        });
    }
    if let Some(path) = &settings.traffic.request_log {
        let target = Target {
            flag: "--request-log",
            path,
            kind: Kind::File,
            ours: &crate::fit::is_request_log,
            mark: "a request log idemcalc wrote has exactly the columns time, caller, \
                   idempotency_key, status, response_bytes, replayed, weight",
        };
        crate::output::check(&target, args.force, &inputs)?;
    }
    if let Some(path) = &args.report {
        let ours = |p: &Path| crate::output::contains(&crate::output::head(p, 1024), PAGE_MARK);
        let target = Target {
            flag: "--report",
            path,
            kind: Kind::File,
            ours: &ours,
            mark: "a page idemcalc wrote carries <meta name=\"generator\" content=\"idemcalc \
                   report\"> in its head",
        };
        // Not the same file as the request log either.
        let mut others = inputs.clone();
        if let Some(log) = &settings.traffic.request_log {
            others.push(Input {
                what: "--request-log",
                path: log,
            });
        }
        crate::output::check(&target, args.force, &others)?;
    }
    if let Some(path) = &args.carrier_ledger {
        check_carrier_ledger(args, settings, path, inputs)?;
    }
    Ok(())
}

/// Checks `--carrier-ledger` against the run's inputs (`inputs`, the store among them) and the
/// other file outputs. What marks it as idemcalc's is its CSV header line.
fn check_carrier_ledger<'a>(
    args: &'a SimulateArgs,
    settings: &'a Settings,
    path: &Path,
    mut others: Vec<Input<'a>>,
) -> anyhow::Result<()> {
    let header = crate::carrier::LEDGER_HEADER.as_bytes();
    let ours = |p: &Path| crate::output::head(p, header.len() as u64) == header;
    let mark = format!(
        "a carrier ledger idemcalc wrote starts with the line {}",
        crate::carrier::LEDGER_HEADER.trim_end()
    );
    let target = Target {
        flag: "--carrier-ledger",
        path,
        kind: Kind::File,
        ours: &ours,
        mark: &mark,
    };
    if let Some(log) = &settings.traffic.request_log {
        others.push(Input {
            what: "--request-log",
            path: log,
        });
    }
    if let Some(page) = &args.report {
        others.push(Input {
            what: "--report",
            path: page,
        });
    }
    crate::output::check(&target, args.force, &others)?;
    Ok(())
}

/// Replays the first retention's first replicate again, on a scratch store, with the request
/// log on, and writes the log: same seed, so the same requests the first replicate replayed.
fn write_request_log(plan: &Plan, path: &Path) -> anyhow::Result<()> {
    let Some(job) = plan.jobs.first() else {
        return Ok(());
    };
    let cfg = replay::SimConfig {
        request_log: true,
        // A second run of the same purchases: not the named store's, not in its ledger.
        carrier_ledger: None,
        ..job.config.clone()
    };
    let stores = Stores::scratch(StoreOptions {
        purpose: "log",
        ..StoreOptions::default()
    })?;
    let store = stores.open(crate::store::Slot::default())?;
    let progress = Progress {
        tick: &|_| {},
        interrupted: &INTERRUPTED,
    };
    let tallies = replay::run_once(&cfg, &plan.arrivals, &plan.retry, store, 0, &progress)?;
    crate::fit::write_log(path, &tallies.request_log.rows())?;
    stores.finish()?;
    Ok(())
}

/// The run as a one-scenario summary: what `--report` draws and where the decision comes from.
fn simulation_summary(plan: &Plan, reports: &[SimReport]) -> anyhow::Result<crate::run::Summary> {
    let settings = &plan.settings;
    let description = format!(
        "idemcalc simulate at {}/s{}, seed {}.",
        crate::format::human_count(settings.traffic.rate_per_s),
        settings
            .traffic
            .rush
            .map(|r| format!(
                " with a daily rush at {}/s",
                crate::format::human_count(r.rate_per_s)
            ))
            .unwrap_or_default(),
        settings.seed
    );
    crate::run::simulation_summary(description, plan, reports.to_vec())
}
