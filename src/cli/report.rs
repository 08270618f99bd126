//! `idemcalc report`: runs a directory of scenarios and writes the capacity report.
//!
//! Exit codes: 0 every budget holds; 1 a budget is broken (everything is still written, and
//! each broken budget is listed with its figure and limit); 2 bad input (a scenario file, an
//! unwritable directory); 130 interrupted by Ctrl-C (what was simulated so far is written).

use crate::format::plural;
use crate::output::{Input, Kind, Target};
use crate::report::{self, BenchResults};
use crate::run::results::LoadResults;
use crate::sim::replay::Progress;
use crate::store::{StoreOptions, Stores};
use anyhow::bail;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

#[derive(Debug, clap::Args)]
pub struct ReportArgs {
    /// Directory of scenario files (*.toml), run in file-name order, e.g. scenarios/.
    #[arg(long, value_name = "DIR")]
    pub scenarios: PathBuf,
    /// Directory to write index.html, summary.json, summary.md and tables/ into (created if
    /// needed).
    #[arg(long, value_name = "DIR", default_value = "reports")]
    pub out: PathBuf,
    /// Write into an existing, non-empty --out directory that holds no summary.json (files of
    /// the same names are replaced, others left alone). An input of the run (a scenario,
    /// --baseline, --bench) inside it and a symbolic link are refused even so.
    #[arg(long)]
    pub force: bool,
    /// A previous report's summary.json: each figure's change is shown with its interval,
    /// marked only when larger than sampling explains, and `[budgets] max_store_growth` fails
    /// the job on a real growth of the store above it.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// Engine throughput to show, with each side's 95 % interval: the JSON written by
    /// `idemcalc bench --format json`; repeat for each store (SQLite, PostgreSQL, Redis).
    #[arg(long, value_name = "FILE")]
    pub bench: Vec<PathBuf>,
    /// A live service's run to show: the JSON written by `idemcalc load --format json` (or
    /// `load --out`); repeat for several. A broken load budget fails the report (exit 1).
    #[arg(long, value_name = "FILE")]
    pub load: Vec<PathBuf>,
    /// Where the simulations' stores go: `sqlite:PATH`, a file path, or
    /// `postgres://USER@HOST:PORT/DATABASE[?schema=NAME]` (default: SQLite in memory, the same
    /// figures as a file's). Each simulation gets its own suffixed file or schema; scratch
    /// schemas are dropped.
    #[arg(long, value_name = "SPEC")]
    pub store: Option<String>,
    /// Also measure the headline scenario (at its first retention) on this store, for the
    /// report's store comparison: `sqlite:PATH`, `postgres://…` or `redis://HOST:PORT`; repeat
    /// for each (at most 4). Scratch schemas and prefixes are dropped afterwards.
    #[arg(long = "compare-store", value_name = "SPEC")]
    pub compare_store: Vec<String>,
    /// No progress bar and no summary table on stdout (broken budgets still go to stderr).
    #[arg(long)]
    pub quiet: bool,
}

/// Each compared store runs the headline scenario once more: a handful is a comparison, more
/// is a typo.
const MAX_COMPARED_STORES: usize = 4;

/// Set by the Ctrl-C handler; every running simulation stops at its next event.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

pub fn run(args: &ReportArgs) -> anyhow::Result<i32> {
    let started = Instant::now();
    let loaded = match report::load_dir(&args.scenarios) {
        Ok(l) => l,
        Err(errors) => {
            for e in &errors {
                eprintln!("error: {e}");
            }
            bail!(
                "nothing was run: {} with the scenarios above",
                plural(errors.len() as u64, "problem", "problems")
            );
        }
    };
    if loaded.is_empty() {
        bail!(
            "{}: no scenario files (*.toml) found",
            args.scenarios.display()
        );
    }
    check_out(args)?;
    if args.compare_store.len() > MAX_COMPARED_STORES {
        bail!(
            "--compare-store: at most {MAX_COMPARED_STORES} stores, not {}",
            args.compare_store.len()
        );
    }
    for spec in &args.compare_store {
        // Checked now, not after the scenarios have run: a store that cannot be reached fails
        // the report before any work.
        crate::store::StoreSpec::parse(spec)
            .and_then(|s| crate::store::reachable(&s))
            .map_err(|e| anyhow::anyhow!("--compare-store {spec}: {e}"))?;
    }
    if let Some(path) = &args.baseline {
        if path.is_dir() && path.join("summary.json").is_file() {
            bail!(
                "--baseline {}: a directory; give the earlier run's summary file: --baseline {}",
                path.display(),
                path.join("summary.json").display()
            );
        }
        crate::input::check_regular(path).map_err(|e| {
            anyhow::anyhow!(
                "--baseline {}: {e} (an earlier report's summary.json)",
                path.display()
            )
        })?;
    }
    let plans = crate::run::plans(&loaded)?;
    let bench = if args.bench.is_empty() {
        None
    } else {
        Some(BenchResults::from_paths(&args.bench)?)
    };
    let load = if args.load.is_empty() {
        None
    } else {
        Some(LoadResults::from_paths(&args.load)?)
    };
    let stores = Stores::new(
        args.store.as_deref(),
        None,
        StoreOptions {
            purpose: "report",
            ..StoreOptions::default()
        },
    )?;
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
    let bar = super::progress_bar(args.quiet, "running");
    bar.set_message(plural(loaded.len() as u64, "scenario", "scenarios"));
    let tick = |f: f64| bar.set_position((f.clamp(0.0, 1.0) * 1000.0) as u64);
    let progress = Progress {
        tick: &tick,
        interrupted: &INTERRUPTED,
    };
    let summary = crate::run::scenarios(&loaded, &plans, &stores, &progress);
    bar.finish_and_clear();
    stores.finish()?;
    let mut summary = summary?;
    if !args.compare_store.is_empty() && !summary.interrupted {
        let bar = super::progress_bar(args.quiet, "comparing stores");
        bar.set_message(format!(
            "{} more",
            plural(args.compare_store.len() as u64, "store", "stores")
        ));
        let tick = |f: f64| bar.set_position((f.clamp(0.0, 1.0) * 1000.0) as u64);
        let progress = Progress {
            tick: &tick,
            interrupted: &INTERRUPTED,
        };
        summary.stores =
            crate::run::compare_stores(&summary, &plans, &stores, &args.compare_store, &progress)?;
        bar.finish_and_clear();
    }
    summary.bench = bench;
    summary.load = load;
    if let Some(path) = &args.baseline {
        let comparison = crate::run::compare::compare(&summary, path)?;
        crate::run::compare::add_growth_verdicts(&mut summary, &comparison);
        summary.comparison = Some(comparison);
    }
    let written = report::write_all(&args.out, &summary, report::RunStamp::now())?;
    if !args.quiet {
        print_summary(&summary, written.len(), &args.out, started)?;
    }
    if summary.interrupted {
        eprintln!("interrupted: the report covers only the simulated time reached before Ctrl-C:");
        for s in &summary.scenarios {
            for r in s.runs.iter().filter(|r| r.sampling.interrupted) {
                // Both in one unit: "20.11h of 108h", not "72406s of 108h".
                let (done, planned) = crate::duration::format_approx_pair(
                    r.sampling.simulated_seconds,
                    r.sampling.arrival_seconds,
                );
                eprintln!(
                    "  {} ({}): {done} of {planned} simulated",
                    s.name, r.retention
                );
            }
        }
        return Ok(130);
    }
    let broken = report::broken_lines(&summary);
    if !broken.is_empty() {
        eprintln!(
            "{} broken:",
            plural(broken.len() as u64, "budget", "budgets")
        );
        for b in &broken {
            eprintln!("  {b}");
        }
        return Ok(super::EXIT_BUDGET);
    }
    Ok(0)
}

/// What a run says on stdout: a terminal gets a few lines, a pipe (a CI job's log) the Markdown
/// summary; then where the files went.
fn print_summary(
    summary: &crate::run::results::Summary,
    files: usize,
    out: &std::path::Path,
    started: Instant,
) -> anyhow::Result<()> {
    if std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        super::print(&report::text::report_summary(summary))?;
    } else {
        use report::Exporter as _;
        super::print(&String::from_utf8_lossy(
            &report::MarkdownExporter.serialize(summary)?,
        ))?;
    }
    super::print(&format!(
        "\nWrote {} to {} in {:.1} s: {}\n",
        plural(files as u64, "file", "files"),
        out.display(),
        started.elapsed().as_secs_f64(),
        out.join("index.html").display()
    ))?;
    Ok(())
}

/// Checks `--out` (`crate::output`) before any work: a directory a report was written to
/// (it holds a `summary.json` with a `schema_version`), a new or an empty one, or with
/// `--force` any directory; never a link, and never one holding an input of the run.
fn check_out(args: &ReportArgs) -> anyhow::Result<()> {
    let ours = |dir: &Path| {
        let summary = crate::output::head(&dir.join("summary.json"), 256);
        summary.starts_with(b"{") && crate::output::contains(&summary, b"\"schema_version\"")
    };
    let target = Target {
        flag: "--out",
        path: &args.out,
        kind: Kind::Dir,
        ours: &ours,
        mark: "no summary.json of an earlier report in it",
    };
    let mut inputs = vec![Input {
        what: "--scenarios",
        path: &args.scenarios,
    }];
    if let Some(path) = &args.baseline {
        inputs.push(Input {
            what: "--baseline",
            path,
        });
    }
    for path in &args.bench {
        inputs.push(Input {
            what: "--bench",
            path,
        });
    }
    for path in &args.load {
        inputs.push(Input {
            what: "--load",
            path,
        });
    }
    Ok(crate::output::check(&target, args.force, &inputs)?)
}
