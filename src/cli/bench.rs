use super::{EXIT_BUDGET, Format};
use crate::bench::checkpoint::Checkpoints;
use crate::bench::{self, BenchConfig, mix::Mix};
use crate::store::group::GroupPolicy;
use crate::store::{Sweeper, Synchronous};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
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
pub enum SweeperArg {
    Delete,
    Partitions,
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
engine) run on identical pre-filled stores in alternating slices of about a second, each for
--duration. On PostgreSQL (--store postgres://…) each side has --pool connections with one
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
    /// Measured time per side (engine and baseline), e.g. 10s.
    #[arg(long, default_value = "10s", value_parser = crate::duration::clap_parse)]
    pub duration: Duration,
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
    #[arg(long, value_enum, default_value = "delete")]
    pub sweeper: SweeperArg,
    /// With --sweeper partitions: the range of one partition (default a quarter of the
    /// bench's 24 h retention).
    #[arg(long, default_value = "6h", value_parser = crate::duration::clap_parse)]
    pub partition_period: Duration,
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
            sweeper: match self.sweeper {
                SweeperArg::Delete => Sweeper::Delete,
                SweeperArg::Partitions => Sweeper::Partitions {
                    period_ms: crate::duration::ms(self.partition_period),
                },
            },
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
    let report = bench::run(&config)?;
    match args.format {
        Format::Table => super::print(&bench::render_table(&report))?,
        Format::Json => super::print(&(serde_json::to_string_pretty(&report)? + "\n"))?,
    }
    // A failed check outranks the interruption: it is what the user must not miss.
    Ok(if !report.ok {
        EXIT_BUDGET
    } else if report.interrupted {
        EXIT_INTERRUPTED
    } else {
        0
    })
}
