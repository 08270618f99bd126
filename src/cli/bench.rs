use super::{EXIT_BUDGET, Format};
use crate::bench::{self, BenchConfig, mix::Mix};
use crate::store::checkpoint::Checkpoints;
use crate::store::group::GroupPolicy;
use crate::store::{SweeperPlan, Synchronous};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum SyncArg {
    /// WAL's usual setting: a commit survives a crash of the process, not a power cut.
    Normal,
    /// Every commit waits for fsync of the WAL: survives a power cut.
    Full,
    /// No fsync at all, not even at checkpoints.
    Off,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum CheckpointArg {
    Background,
    Inline,
    Deferred,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OnOff {
    Off,
    On,
}

#[derive(Debug, clap::Args)]
#[command(after_help = "\
The mix (--mix) gives relative weights to kinds of CreateLabel call, e.g.
  first=80,replay=10,conflict=5,takeover=5
  first     a new key: claim, carrier, complete (201)
  replay    a completed key with the same body: the saved response (201, replayed)
  conflict  a key whose lease another attempt holds: 409 (also written 409)
  takeover  a key whose holder died and whose lease expired: take over and complete (201)
  reused    a completed key with another body: 422 (also written 422)
Omitted kinds get weight 0.

With --group-commit on, a batch commits when it holds --batch logical transactions, when its
first has waited --max-wait, or as soon as no request is waiting (holding it open then would
only delay the answers already in it). Answers are sent only after their batch has committed.

The engine and the raw-SQL baseline (the same statements in the same transactions, without the
engine) run on identical pre-filled stores: after a warm-up of each (half a run, at most 1 s),
--runs runs of --duration each, alternating engine, baseline, engine, …. Each figure is given
as mean ± σ with min, median and max over the runs, the engine/baseline ratio with a 95 %
interval from the paired runs (on the log scale, so above 0; when wider than ±5 % the report
says so and how many runs would narrow it). creates/s counts 201s that created a label;
replays, 409s, 422s and errors per second are given beside it. Before the runs the store's
ceiling is measured in 5 slices (SQLite: write + fdatasync in the store's directory;
PostgreSQL: one-row commits; Redis: PING), shown with their spread, and the engine's rate given
as a share of it. --save-baseline FILE keeps the run's JSON; --baseline FILE compares with it
and says regressed or improved only when the change's 95 % interval excludes 0, no change when
it lies within ±5 % (or ±--fail-on-regression), else cannot tell. On PostgreSQL (--store postgres://…) each side has --pool connections with one
writer each, and pgbench then runs the seed's statements as a custom script on a third schema
for a ratio against a C client (pgbench must be installed; the report says when it was not).
On Redis (--store redis://HOST:PORT[?prefix=NAME]) each side has --pool writers, each with its
own Redis connection and a SQLite connection to the side's labels file.

Ctrl-C stops measuring: the run checks both stores, checkpoints SQLite's WAL into the database
files, prints the figures of what it measured and how far it got, and exits 130.
Exit codes: 0 ok; 1 an answer or an invariant was wrong; 2 bad input (also a store another run
holds); 130 interrupted.")]
pub struct BenchArgs {
    /// Client threads, each with one request outstanding: flat out, the most requests one
    /// group commit can hold; at a target rate, the most that can queue.
    #[arg(long, default_value_t = BenchConfig::default().workers)]
    pub workers: u32,
    /// Target rate in creates per second, open loop (latency counts from when a request was due,
    /// so it includes queueing). Default: flat out.
    #[arg(long)]
    pub rate: Option<f64>,
    /// Measured time of each run of each side (engine and baseline), e.g. 10s.
    #[arg(long, default_value = "10s", value_parser = crate::duration::clap_parse)]
    pub duration: Duration,
    /// Runs per side, alternating engine and baseline after a warm-up.
    #[arg(long, default_value_t = BenchConfig::default().runs)]
    pub runs: u32,
    /// Writes this run's JSON (every run's samples) to FILE, for a later --baseline.
    #[arg(long, value_name = "FILE")]
    pub save_baseline: Option<PathBuf>,
    /// Compares the engine's creates/s with a run saved by --save-baseline FILE.
    #[arg(long, value_name = "FILE")]
    pub baseline: Option<PathBuf>,
    /// With --baseline: exit 1 when the engine regressed by more than PCT percent.
    #[arg(long, value_name = "PCT", requires = "baseline")]
    pub fail_on_regression: Option<f64>,
    /// Relative weights of first, replay, conflict, takeover and reused requests (see below).
    #[arg(long, default_value = "first=80,replay=10,conflict=5,takeover=5")]
    pub mix: Mix,
    /// The engine's store, created new and kept: an SQLite file (the baseline's goes beside it
    /// as NAME_baseline.EXT), or postgres://USER@HOST:PORT/DATABASE (scratch schemas dropped
    /// afterwards; with ?schema=NAME the schemas NAME, NAME_baseline and NAME_pgbench are
    /// created and kept), or redis://HOST:PORT[/DB] (scratch prefixes deleted afterwards; with
    /// ?prefix=NAME the prefixes NAME and NAME_baseline are kept, their labels files in the
    /// temporary directory). Default: SQLite in a temporary directory removed afterwards.
    #[arg(long, value_name = "SPEC")]
    pub store: Option<String>,
    /// PostgreSQL or Redis connections per side (engine, baseline), one writer each; ignored for
    /// SQLite.
    #[arg(long, value_name = "CONNECTIONS", default_value_t = BenchConfig::default().pool_size)]
    pub pool: u32,
    /// How hard each commit waits for the disk: SQLite's PRAGMA synchronous (on Redis, the
    /// labels file's); on PostgreSQL `off` is synchronous_commit=off and the others keep it on.
    #[arg(long, value_enum, default_value = "normal")]
    pub sync: SyncArg,
    /// Group commit: logical transactions share one physical commit. Off: each commits alone.
    #[arg(long, value_enum, default_value = "off")]
    pub group_commit: OnOff,
    /// With group commit: most logical transactions per physical commit.
    #[arg(long, default_value_t = GroupPolicy::default().max_batch)]
    pub batch: u32,
    /// With group commit: longest a batch stays open after its first transaction, e.g. 2ms.
    #[arg(long, default_value = "2ms", value_parser = crate::duration::clap_parse)]
    pub max_wait: Duration,
    /// Who runs WAL checkpoints: a background connection every 100 ms (as a server would);
    /// SQLite inside the commit that fills the WAL to 1,000 pages (its default); or nobody until
    /// the run is over (a diagnostic: the engine's latency without checkpoint fsyncs).
    #[arg(long, value_enum, default_value = "background")]
    pub checkpoint: CheckpointArg,
    /// On PostgreSQL: the key table as `delete` leaves it (the seed's) or partitioned by
    /// expiry (`partitions`): claims then take a per-key advisory lock, lookups probe every
    /// partition. The bench runs no sweeper; it measures what the layout costs the requests.
    #[arg(long, default_value = SweeperPlan::NAMES[0],
          value_parser = clap::builder::PossibleValuesParser::new(SweeperPlan::NAMES))]
    pub sweeper: String,
    /// With --sweeper partitions: the range of one partition (default a quarter of the
    /// bench's 24 h retention, as in `simulate`).
    #[arg(long, value_parser = crate::duration::clap_parse)]
    pub partition_period: Option<Duration>,
    /// Time each statement of both sides and print their latencies (as `pgbench -r`): txn 1's
    /// BEGIN, claim insert, select on conflict, takeover and COMMIT; txn 2's BEGIN, completion,
    /// label insert and COMMIT. Adds two clock reads per statement to both sides.
    #[arg(long)]
    pub per_statement: bool,
    /// Completed keys (with their labels) in each store before the run.
    #[arg(long, default_value_t = BenchConfig::default().prefill_keys)]
    pub prefill: u64,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

impl BenchArgs {
    pub fn config(&self) -> BenchConfig {
        BenchConfig {
            workers: self.workers,
            rate_per_s: self.rate,
            duration: self.duration,
            runs: self.runs,
            mix: self.mix,
            store: self.store.clone(),
            synchronous: match self.sync {
                SyncArg::Normal => Synchronous::Normal,
                SyncArg::Full => Synchronous::Full,
                SyncArg::Off => Synchronous::Off,
            },
            group: (self.group_commit == OnOff::On).then_some(GroupPolicy {
                max_batch: self.batch,
                max_wait: self.max_wait,
            }),
            checkpoints: match self.checkpoint {
                CheckpointArg::Background => Checkpoints::Background,
                CheckpointArg::Inline => Checkpoints::Inline,
                CheckpointArg::Deferred => Checkpoints::Deferred,
            },
            prefill_keys: self.prefill,
            pool_size: self.pool,
            per_statement: self.per_statement,
            // The parser lets through only `SweeperPlan::NAMES`.
            sweeper: SweeperPlan::named(
                &self.sweeper,
                self.partition_period.map(|d| d.as_secs_f64()),
            )
            .unwrap_or_default()
            .at(crate::bench::fill::RETENTION_MS as f64 / 1000.0),
            ..BenchConfig::default()
        }
    }
}

/// Exit code of a run stopped by Ctrl-C (128 + SIGINT, as shells report it).
pub const EXIT_INTERRUPTED: i32 = 130;

pub fn run(args: &BenchArgs) -> anyhow::Result<i32> {
    let config = args.config();
    let interrupted: Arc<AtomicBool> = config.interrupted.clone();
    // Without a handler Ctrl-C kills the process mid-commit: no report, and a WAL of hundreds
    // of MB left for the next open to replay. A handler that cannot be installed (one already
    // is) leaves the default, which is no worse.
    let _ = ctrlc::set_handler(move || {
        if interrupted.swap(true, Ordering::SeqCst) {
            eprintln!("interrupted again: finishing the checks, then the report");
        } else {
            eprintln!("interrupted: stopping the measurement, checking the stores");
        }
    });
    if let Some(pct) = args.fail_on_regression
        && !(pct >= 0.0 && pct.is_finite())
    {
        anyhow::bail!("--fail-on-regression must be a percentage of 0 or more, not {pct}");
    }
    // Read before the run: a missing or wrong file should not cost a whole run.
    let saved = args
        .baseline
        .as_deref()
        .map(|path| -> anyhow::Result<Vec<f64>> {
            let text = crate::input::read_limited(path)
                .map_err(|e| anyhow::anyhow!("--baseline {}: {e}", path.display()))?;
            let json: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| anyhow::anyhow!("--baseline {}: not JSON: {e}", path.display()))?;
            bench::runs::saved_engine_creates(&json)
                .map_err(|e| anyhow::anyhow!("--baseline {}: {e}", path.display()))
        })
        .transpose()?;
    let mut config = config;
    let progress = Progress::start();
    config.progress = Some(progress.hook());
    let result = bench::run(&config);
    progress.finish();
    let mut report = result?;
    if let (Some(path), Some(saved)) = (&args.baseline, &saved) {
        let current: Vec<f64> = report.runs.engine.iter().map(|r| r.creates_per_s).collect();
        report.comparison = Some(bench::runs::compare(
            &path.display().to_string(),
            saved,
            &current,
            args.fail_on_regression.map(|p| p / 100.0),
        ));
    }
    if let Some(path) = &args.save_baseline {
        let json = serde_json::to_string_pretty(&report)? + "\n";
        crate::output::write(path, json.as_bytes())
            .map_err(|e| anyhow::anyhow!("--save-baseline {}: {e}", path.display()))?;
    }
    match args.format {
        Format::Table => super::print(&bench::render_table(&report))?,
        Format::Json => super::print(&(serde_json::to_string_pretty(&report)? + "\n"))?,
    }
    // A failed check outranks the interruption: it is what the user must not miss.
    let regressed = report.comparison.as_ref().is_some_and(|c| c.fails);
    Ok(if !report.ok || regressed {
        EXIT_BUDGET
    } else if report.interrupted {
        EXIT_INTERRUPTED
    } else {
        0
    })
}

/// How often a run outside a terminal says where it is (as `pgbench -P`).
const PROGRESS_EVERY: Duration = Duration::from_secs(5);

/// The run's progress on stderr: a bar on a terminal, a line every [`PROGRESS_EVERY`] outside
/// one, driven by the bench's phases and the time since the last one.
struct Progress {
    state: Arc<Mutex<Option<(bench::ProgressEvent, std::time::Instant)>>>,
    stop: Arc<AtomicBool>,
    ticker: Option<std::thread::JoinHandle<()>>,
}

impl Progress {
    fn start() -> Self {
        use std::io::IsTerminal as _;
        let state: Arc<Mutex<Option<(bench::ProgressEvent, std::time::Instant)>>> =
            Arc::new(Mutex::new(None));
        let stop = Arc::new(AtomicBool::new(false));
        let terminal = std::io::stderr().is_terminal();
        let (st, sp) = (state.clone(), stop.clone());
        let ticker = std::thread::Builder::new()
            .name("bench-progress".into())
            .spawn(move || {
                let bar = terminal.then(|| {
                    let b = indicatif::ProgressBar::new(1000);
                    b.set_style(
                        indicatif::ProgressStyle::with_template(
                            "{spinner} bench {wide_bar} {percent:>3}% {msg}",
                        )
                        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
                    );
                    b
                });
                let started = std::time::Instant::now();
                let mut last_line = started;
                while !sp.load(Ordering::Relaxed) {
                    std::thread::sleep(Duration::from_millis(200));
                    let Some((e, at)) = st.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
                        continue;
                    };
                    // Within a phase, time runs on; never past the next phase's start.
                    let measured = (e.measured_s + at.elapsed().as_secs_f64()).min(e.total_s);
                    let share = if e.total_s > 0.0 {
                        measured / e.total_s
                    } else {
                        0.0
                    };
                    match &bar {
                        Some(b) => {
                            b.set_position((share * 1000.0) as u64);
                            b.set_message(e.message.clone());
                        }
                        None if last_line.elapsed() >= PROGRESS_EVERY => {
                            last_line = std::time::Instant::now();
                            eprintln!(
                                "progress: {:.0} s, {:.0} % of the measuring: {}",
                                started.elapsed().as_secs_f64(),
                                share * 100.0,
                                e.message
                            );
                        }
                        None => {}
                    }
                }
                if let Some(b) = bar {
                    b.finish_and_clear();
                }
            })
            .ok();
        Self {
            state,
            stop,
            ticker,
        }
    }

    fn hook(&self) -> bench::ProgressHook {
        let state = self.state.clone();
        bench::ProgressHook(Arc::new(move |e: &bench::ProgressEvent| {
            *state.lock().unwrap_or_else(|p| p.into_inner()) =
                Some((e.clone(), std::time::Instant::now()));
        }))
    }

    fn finish(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.ticker.take() {
            let _ = t.join();
        }
    }
}
