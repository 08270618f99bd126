//! Where `idemcalc report --scenarios DIR --out DIR --quiet` spends its time, phase by phase,
//! with the wall, user and system time of each (docs/performance.md, README "Run time").
//!
//! ```text
//! cargo run --release --example report_time                  # scenarios/ into a temporary dir
//! cargo run --release --example report_time -- scenarios/ /tmp/report --runs 3
//! ```
//!
//! It runs what the CLI runs, through the library and in the same order: load the scenarios,
//! make every scenario's plan (its arrivals, retry distribution and one model evaluation per
//! retention), simulate and run the timelines on scratch stores (in memory), then write the
//! page, JSON, Markdown and tables. It also times the work done once per scenario that a report
//! could share (the plans; the decisions, made again here from the runs' figures), to show
//! whether it is worth doing once per report. No figure here is asserted: the machine's load
//! decides the wall time, so each run prints the 1-minute load average beside it.

use clap::Parser;
use idemcalc::report;
use idemcalc::run::{self, Plan};
use idemcalc::sim::replay::Progress;
use idemcalc::store::{StoreOptions, Stores};
use nix::sys::resource::{UsageWho, getrusage};
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

#[derive(Debug, Parser)]
struct Args {
    /// The scenarios directory.
    #[arg(default_value = "scenarios")]
    scenarios: PathBuf,
    /// Where the report goes (default: a temporary directory, removed afterwards).
    out: Option<PathBuf>,
    /// Runs of the whole report, each timed on its own.
    #[arg(long, default_value_t = 1)]
    runs: u32,
}

/// Wall, user and system time since a [`Mark`].
#[derive(Debug, Clone, Copy, Default)]
struct Times {
    wall: Duration,
    user: Duration,
    sys: Duration,
}

/// The process's clocks at one instant.
struct Mark {
    wall: Instant,
    user: Duration,
    sys: Duration,
}

impl Mark {
    fn now() -> Mark {
        let usage = getrusage(UsageWho::RUSAGE_SELF).expect("getrusage(RUSAGE_SELF)");
        let tv = |t: nix::sys::time::TimeVal| {
            Duration::new(t.tv_sec() as u64, t.tv_usec() as u32 * 1000)
        };
        Mark {
            wall: Instant::now(),
            user: tv(usage.user_time()),
            sys: tv(usage.system_time()),
        }
    }

    fn since(&self) -> Times {
        let now = Mark::now();
        Times {
            wall: now.wall - self.wall,
            user: now.user.saturating_sub(self.user),
            sys: now.sys.saturating_sub(self.sys),
        }
    }
}

fn row(what: &str, t: Times) {
    println!(
        "  {what:<34} {:>8.3} s wall {:>8.3} s user {:>8.3} s sys",
        t.wall.as_secs_f64(),
        t.user.as_secs_f64(),
        t.sys.as_secs_f64()
    );
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|s| s.split_whitespace().next().map(str::to_string))
        .unwrap_or_else(|| "?".into())
}

fn main() -> anyhow::Result<()> {
    // SAFETY: as `idemcalc`'s main does, first, before any thread starts or connection opens.
    unsafe {
        idemcalc::store::sqlite::skip_memory_statistics();
    }
    let args = Args::parse();
    let tmp = tempfile::tempdir()?;
    let out = args
        .out
        .clone()
        .unwrap_or_else(|| tmp.path().join("report"));
    for n in 1..=args.runs {
        println!(
            "run {n} of {}: {} ({} cores, load average {} before)",
            args.runs,
            args.scenarios.display(),
            std::thread::available_parallelism().map_or(1, |n| n.get()),
            load_average()
        );
        let total = Mark::now();

        let mark = Mark::now();
        let loaded = report::load_dir(&args.scenarios).map_err(|errors| {
            anyhow::anyhow!(
                "{}",
                errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("\n")
            )
        })?;
        row(&format!("load {} scenarios", loaded.len()), mark.since());

        let mark = Mark::now();
        let plans = run::plans(&loaded)?;
        let jobs: usize = plans.iter().map(|p| p.jobs.len()).sum();
        row(
            &format!("plans and models ({jobs} retentions)"),
            mark.since(),
        );

        let mark = Mark::now();
        let stores = Stores::new(
            None,
            None,
            StoreOptions {
                purpose: "report",
                ..StoreOptions::default()
            },
        )?;
        let stop = AtomicBool::new(false);
        let progress = Progress {
            tick: &|_| {},
            interrupted: &stop,
        };
        let summary = run::scenarios(&loaded, &plans, &stores, &progress)?;
        stores.finish()?;
        row("simulations, timelines, decisions", mark.since());

        let mark = Mark::now();
        let written = report::write_all(&out, &summary, report::RunStamp::now())?;
        row(
            &format!("write the report ({} files)", written.len()),
            mark.since(),
        );
        row("total", total.since());

        // Once per scenario, and could it be once per report? Timed again, apart.
        let mark = Mark::now();
        for l in &loaded {
            Plan::for_scenario(l)?;
        }
        row("  again: every plan", mark.since());
        let mark = Mark::now();
        for (plan, result) in plans.iter().zip(&summary.scenarios) {
            if result.decision.is_some() {
                run::decision(plan, result.budgets.as_ref(), &result.runs)?;
            }
        }
        row("  again: every decision", mark.since());
        println!("  load average after: {}", load_average());
    }
    Ok(())
}
