//! The `idemcalc` command line: argument parsing and output only. Every subcommand is a thin
//! layer over a library module, so what the CLI prints is what the library computes.
//!
//! Exit codes: 0 success; 1 a budget was broken (`report`) or an invariant failed; 2 bad input
//! (a flag, a file, a store that cannot be opened).

pub mod bench;
pub(crate) mod carrier;
pub(crate) mod estimate;
pub(crate) mod fit;
pub(crate) mod load;
pub(crate) mod report;
pub(crate) mod scenario;
pub(crate) mod serve;
pub(crate) mod simulate;

use clap::{Parser, Subcommand};

#[derive(Debug, Parser)]
#[command(
    name = "idemcalc",
    version,
    about = "Size and price idempotency-key stores",
    long_about = "Size and price idempotency-key stores.\n\n\
        idemcalc embeds a reference idempotency engine (the seed design: a record per \
        (caller, key), two short transactions around the carrier call, a lease with a lease \
        token, a batched sweeper) over SQLite or PostgreSQL, and measures it: scripted timelines, an analytic \
        capacity and cost model, synthetic traffic on a virtual clock, reports and benches."
)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

/// The subcommands and, for each, its long flags (`--retention`, …), for checking text that
/// names them (`tests/it/doc_commands.rs`).
pub fn subcommands() -> Vec<(String, Vec<String>)> {
    use clap::CommandFactory as _;
    Cli::command()
        .get_subcommands()
        .map(|c| {
            let flags = c
                .get_arguments()
                .flat_map(|a| {
                    let mut names: Vec<String> =
                        a.get_long().map(|l| format!("--{l}")).into_iter().collect();
                    names.extend(
                        a.get_all_aliases()
                            .unwrap_or_default()
                            .into_iter()
                            .map(|l| format!("--{l}")),
                    );
                    names
                })
                .collect();
            (c.get_name().to_string(), flags)
        })
        .collect()
}

/// Whether `args` (the program name first) is a command line `idemcalc` accepts: every
/// subcommand and flag exists and every value clap checks itself is valid. The documentation's
/// commands are held to it (`tests/it/doc_commands.rs`), so a renamed flag cannot leave them stale.
pub fn parses(args: &[String]) -> Result<(), String> {
    use clap::Parser as _;
    match Cli::try_parse_from(args) {
        Ok(_) => Ok(()),
        Err(e) => match e.kind() {
            clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => Ok(()),
            _ => Err(e.render().to_string()),
        },
    }
}

/// Parsed once at startup, so the size of the largest variant does not matter.
#[allow(clippy::large_enum_variant)]
#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Run a scripted timeline (a scenario file's [timeline]) against the engine and show what
    /// each caller got back, the labels stored and what the carrier billed.
    Scenario(scenario::ScenarioArgs),
    /// The analytic model: store size, what the keys save, how late retries arrive, and the
    /// retention that costs least (the seed's "In practice" tables).
    Estimate(estimate::EstimateArgs),
    /// Replay synthetic traffic against the real engine on a virtual clock and measure store
    /// size, bytes per record, late arrivals and duplicate labels beside the model's figures.
    Simulate(simulate::SimulateArgs),
    /// Run a directory of scenarios and write the capacity report: index.html (one
    /// self-contained page), summary.json, summary.md and the CSV/Parquet tables. Exits 1 when
    /// a budget is broken, after writing everything.
    Report(report::ReportArgs),
    /// Measure the engine's creates per second and latency against a raw-SQL baseline, with or
    /// without group commit, and check the store invariants afterwards.
    Bench(bench::BenchArgs),
    /// Read request logs (CSV, Parquet, NDJSON) and derive this system's inputs: arrival rate,
    /// timeout fraction, late-retry distribution, key and response sizes; write them as a
    /// scenario file.
    Fit(fit::FitArgs),
    /// Run the seed's Label service over HTTP (POST /labels with Idempotency-Key, /metrics,
    /// /healthz) on the engine and a store, with a sweeper on the wall clock.
    Serve(serve::ServeArgs),
    /// Send the seed's client (open-model arrivals, a key per intent, deadlines, backoff, late
    /// retries from the retry distribution) against a live idempotent HTTP API; report speed
    /// per outcome and, checked from outside, duplicate labels, unexpected 422s and stuck
    /// intents. Exits 1 when a budget is broken.
    Load(load::LoadArgs),
    /// Run the simulated carrier (its own key store, latency, hangs, refusals, billing ledger)
    /// over HTTP, for `idemcalc serve --carrier-url`: the carrier call as a real network hop.
    Carrier(carrier::CarrierArgs),
}

/// Exit code for bad input.
pub const EXIT_USAGE: i32 = 2;
/// Exit code for a broken budget or invariant.
pub const EXIT_BUDGET: i32 = 1;
/// The store failed mid-run (a server gone, a lost connection or hold): the input was fine, and
/// the store holds a partial run.
pub const EXIT_STORE_FAILED: i32 = 3;

/// Parses the arguments, runs the subcommand and returns the process exit code.
pub fn main() -> i32 {
    let cli = Cli::parse();
    let result = match &cli.command {
        Command::Scenario(args) => scenario::run(args),
        Command::Estimate(args) => estimate::run(args).map(|()| 0),
        Command::Simulate(args) => simulate::run(args),
        Command::Report(args) => report::run(args),
        Command::Bench(args) => bench::run(args),
        Command::Fit(args) => fit::run(args),
        Command::Serve(args) => serve::run(args),
        Command::Load(args) => load::run(args),
        Command::Carrier(args) => carrier::run(args),
    };
    match result {
        Ok(code) => code,
        // The reader of stdout went away (`| head`): nothing to say, and no one to say it to.
        Err(e) if e.chain().any(|c| c.is::<StdoutClosed>()) => 0,
        Err(e) => {
            eprintln!("error: {}", error_chain(&e));
            let store_failed = e.chain().any(|c| {
                matches!(
                    c.downcast_ref::<crate::sim::replay::SimError>(),
                    Some(crate::sim::replay::SimError::StoreFailed { .. })
                )
            });
            if store_failed {
                EXIT_STORE_FAILED
            } else {
                EXIT_USAGE
            }
        }
    }
}

/// The error and its causes, each said once: a cause whose text its parent already quotes (a
/// store error quoting SQLite's, an I/O error quoting the OS's) is not repeated.
fn error_chain(e: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in e.chain() {
        let line = cause.to_string();
        if text.contains(&line) {
            continue;
        }
        if !text.is_empty() {
            text.push_str(": ");
        }
        text.push_str(&line);
    }
    text
}

/// Standard output was closed by its reader (`idemcalc simulate | head`, `| true`): not an
/// error. [`print`] returns it and [`main`] ends the program quietly with exit 0.
#[derive(Debug, thiserror::Error)]
#[error("standard output was closed")]
pub(crate) struct StdoutClosed;

/// Prints `text` to standard output; every subcommand prints through here, never `print!`,
/// which panics ("failed printing to stdout: Broken pipe", exit 101) when the reader has gone.
///
/// Why not restore SIGPIPE's default disposition at start-up, as C tools run with it, so a
/// closed pipe kills the process (exit 141)? Rust starts with SIGPIPE ignored, and the store
/// clients rely on that: `postgres` (over tokio) writes its socket with `writev` and Unix-socket
/// connections with `write`, neither of which takes `MSG_NOSIGNAL`, so with the default
/// disposition a server that closes the connection mid-run would kill `idemcalc` by SIGPIPE,
/// silently, instead of the named error and exit 3 a lost store gives. So SIGPIPE stays
/// ignored, a write to a closed pipe fails with `BrokenPipe`, and that one error on stdout
/// becomes [`StdoutClosed`]: everything the run writes to files is written before it prints.
pub(crate) fn print(text: &str) -> anyhow::Result<()> {
    use std::io::Write as _;
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Err(StdoutClosed.into()),
        Err(e) => Err(anyhow::Error::new(e).context("cannot write to standard output")),
        Ok(()) => Ok(()),
    }
}

/// How a subcommand prints its result.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    Table,
    Json,
}

/// How a long run shows its progress: a bar on a terminal; outside one (a CI log) a line every
/// [`PROGRESS_LINE_EVERY`], since a report that prints nothing for minutes looks hung; nothing
/// with `--quiet`.
pub(crate) struct ProgressOut {
    bar: indicatif::ProgressBar,
    /// Outside a terminal: what the lines say, and when the last one was printed.
    lines: Option<(String, std::sync::Mutex<std::time::Instant>)>,
    started: std::time::Instant,
}

/// How often a run outside a terminal says how far it got.
const PROGRESS_LINE_EVERY: std::time::Duration = std::time::Duration::from_secs(10);

impl ProgressOut {
    /// Positions run from 0 to 1000.
    pub(crate) fn set_position(&self, position: u64) {
        self.bar.set_position(position);
        let Some((what, last)) = &self.lines else {
            return;
        };
        let mut last = last.lock().unwrap_or_else(|p| p.into_inner());
        if last.elapsed() < PROGRESS_LINE_EVERY || position == 0 {
            return;
        }
        *last = std::time::Instant::now();
        // No time left is estimated: the position is how far the run's own clock got (simulated
        // time, a load's schedule), not work done, and a straight line through it was off by
        // 2–3× (a simulation's late retries come after its arrivals, fast; a load's drain
        // after its schedule).
        let done = position.min(1000) as f64 / 1000.0;
        eprintln!(
            "{what}: {:.0}% after {}",
            done * 100.0,
            crate::format::approx_duration(self.started.elapsed().as_secs_f64()),
        );
    }

    pub(crate) fn set_message(&self, message: String) {
        if let Some((what, _)) = &self.lines {
            eprintln!("{what}: {message}");
        }
        self.bar.set_message(message);
    }

    pub(crate) fn finish_and_clear(&self) {
        self.bar.finish_and_clear();
    }
}

/// The progress of a long run (see [`ProgressOut`]).
pub(crate) fn progress_bar(quiet: bool, what: &str) -> ProgressOut {
    use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
    use std::io::IsTerminal as _;
    let started = std::time::Instant::now();
    if quiet || !std::io::stderr().is_terminal() {
        return ProgressOut {
            bar: ProgressBar::hidden(),
            lines: (!quiet).then(|| (what.to_string(), std::sync::Mutex::new(started))),
            started,
        };
    }
    let b = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stderr());
    b.set_style(
        ProgressStyle::with_template(&format!(
            "{{spinner}} {what} {{msg:<12}} {{wide_bar}} {{percent:>3}}% {{elapsed}}"
        ))
        .unwrap_or_else(|_| ProgressStyle::default_bar()),
    );
    ProgressOut {
        bar: b,
        lines: None,
        started,
    }
}
