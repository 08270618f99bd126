//! `idemcalc bench`: how fast the engine creates labels, and what it costs against the bare SQL.
//!
//! A run fills two identical stores (one for the engine, one for the raw-SQL baseline), measures
//! the store's own ceiling (`ceiling`), warms both sides up, then measures `--runs` runs of each
//! side alternately (engine, baseline, engine, …) so that drift in a shared machine's load falls
//! on both alike, and reports each figure's spread and the engine/baseline ratio with its 95 %
//! interval from the paired runs (`runs`). Each slice drives the writers (one
//! on SQLite, one per pooled connection on PostgreSQL) with `workers` clients, flat out or open
//! loop at a target rate (see `serve`). At the end the store invariants are checked on both
//! stores, and every 201 handed to a client must have its label stored. On PostgreSQL `pgbench`
//! then runs the seed's statements as a custom script on a third store, for a ratio against a
//! C client (see `pg`).
//!
//! Ctrl-C (`BenchConfig::interrupted`) ends the slice under way: the run stops measuring, checks
//! the stores, checkpoints SQLite's WAL into the database file and reports how far it got.

mod baseline;
pub mod ceiling;
/// Where the bench's checkpoint settings live: the store, which `idemcalc serve` shares.
pub use crate::store::checkpoint;
pub mod creates;
mod drive;
pub mod fill;
pub mod machine;
pub mod mix;
pub mod pg;
pub mod redis;
mod report;
pub mod runs;
pub mod statements;

pub use baseline::{Baseline, SqliteWriter};
pub use machine::Machine;
pub use report::{
    InvariantCheck, Percentiles, Report, RunSample, SideReport, SideSummary, render_table,
};

use crate::carrier::{Carrier, CarrierConfig, Latency};
use crate::clock::{Clock, SystemClock};
use crate::engine::{Engine, EngineConfig};
use crate::store::group::{GroupCommitStore, GroupPolicy};
use crate::store::{
    PgPool, RedisStore, Slot, SqliteOptions, SqliteStore, Store, StoreError, StoreOptions,
    StorePool, StoreSpec, Stores, Sweeper, Synchronous,
};
use checkpoint::{CHECKPOINT_INTERVAL, Checkpointer, Checkpoints};
use drive::{Commits, Counters, Plan, Service, Tally};
use fill::{Filler, Layout};
use mix::{Kind, Mix};
use statements::{PerStatement, StatementTimes, timed, timer};
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// Bounds on what a run may ask for: each keeps a typo from filling a disk or running all day.
pub const MAX_WORKERS: u32 = 1024;
pub const MAX_RATE_PER_S: f64 = 1_000_000.0;
pub const MIN_DURATION: Duration = Duration::from_millis(10);
pub const MAX_DURATION: Duration = Duration::from_secs(3600);
pub const MAX_PREFILL_KEYS: u64 = 50_000_000;
/// Keys held by a live lease, for 409s: enough that 409s do not all hit one row.
pub const HELD_KEYS: u64 = 1000;
/// The rate the pool of abandoned keys (one per takeover) is planned for when running flat out:
/// well above the ~25,000/s two cores reach with group commit. A run that outruns it sends the
/// rest of its takeovers as first runs and reports how many.
pub const FLAT_OUT_PLANNING_RATE: f64 = 100_000.0;
/// At most this many abandoned keys are written, whatever the plan: ~1 GB of store.
pub const MAX_PLANNED_TAKEOVERS: u64 = 2_000_000;
/// At most this many runs per side.
pub const MAX_RUNS: u32 = 100;
/// The warm-up of each side before the runs: half a run, at most this long.
pub const MAX_WARMUP: Duration = Duration::from_secs(1);

/// Where a run is, for a progress display: `measured_s` of `total_s` seconds of measuring
/// (warm-up and runs, both sides) done, and what is under way.
#[derive(Debug, Clone)]
pub struct ProgressEvent {
    pub measured_s: f64,
    pub total_s: f64,
    pub message: String,
}

/// Called as a run moves from one phase to the next (the command line draws it).
#[derive(Clone)]
pub struct ProgressHook(pub Arc<dyn Fn(&ProgressEvent) + Send + Sync>);

impl std::fmt::Debug for ProgressHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ProgressHook")
    }
}

/// A validated bench run.
#[derive(Debug, Clone)]
pub struct BenchConfig {
    /// Client threads, each with one request outstanding.
    pub workers: u32,
    /// Creates per second, open loop; `None` runs flat out (closed loop).
    pub rate_per_s: Option<f64>,
    /// How long each run of each side (engine, baseline) is measured.
    pub duration: Duration,
    /// Runs per side, alternating engine and baseline after a warm-up (`--runs`).
    pub runs: u32,
    /// Measure the store's flush (commit, round-trip) ceiling before the runs.
    pub ceiling: bool,
    /// Told of each phase; `None` runs silently.
    pub progress: Option<ProgressHook>,
    pub mix: Mix,
    /// Where the engine's store goes, a `--store` spec: an SQLite file (the baseline's sits
    /// beside it) or a PostgreSQL URL (see `pg`); `None` is SQLite in a temp dir.
    pub store: Option<String>,
    /// PostgreSQL connections per side, one writer each (`--pool`).
    pub pool_size: u32,
    pub synchronous: Synchronous,
    /// `None`: each transaction commits on its own.
    pub group: Option<GroupPolicy>,
    pub checkpoints: Checkpoints,
    /// Completed keys (with labels) in each store before the run.
    pub prefill_keys: u64,
    pub seed: u64,
    /// Set (by a Ctrl-C handler) to stop measuring; the run still checks and reports.
    pub interrupted: Arc<AtomicBool>,
    /// On PostgreSQL, also run `pgbench` with the seed's statements.
    pub pgbench: bool,
    /// On PostgreSQL, the key table's layout (`--sweeper`); no sweeper runs during a bench.
    pub sweeper: Sweeper,
    /// Time each statement of both sides (`--per-statement`, as `pgbench -r`).
    pub per_statement: bool,
}

impl Default for BenchConfig {
    fn default() -> Self {
        Self {
            // Flat out, each client has one request in flight, so a group commit can hold at
            // most this many: 64 lets batches reach ~100 transactions.
            workers: 64,
            rate_per_s: None,
            duration: Duration::from_secs(10),
            runs: 5,
            ceiling: true,
            progress: None,
            mix: Mix::default(),
            store: None,
            synchronous: Synchronous::Normal,
            group: None,
            checkpoints: Checkpoints::Background,
            prefill_keys: 100_000,
            seed: 1,
            interrupted: Arc::new(AtomicBool::new(false)),
            pool_size: 8,
            pgbench: true,
            sweeper: Sweeper::Delete,
            per_statement: false,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum BenchError {
    /// The run asks for something it cannot have; the message says what to give instead.
    #[error("{0}")]
    Invalid(String),
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("{path}: {source}")]
    Io {
        path: String,
        #[source]
        source: std::io::Error,
    },
}

impl BenchConfig {
    pub fn validate(&self) -> Result<(), BenchError> {
        let bad = |m: String| Err(BenchError::Invalid(m));
        if self.workers == 0 || self.workers > MAX_WORKERS {
            return bad(format!(
                "--workers must be between 1 and {MAX_WORKERS}, not {}",
                self.workers
            ));
        }
        if let Some(rate) = self.rate_per_s
            && !(rate > 0.0 && rate <= MAX_RATE_PER_S)
        {
            return bad(format!(
                "--rate must be above 0 and at most {MAX_RATE_PER_S} creates per second, not {rate}"
            ));
        }
        if self.duration < MIN_DURATION || self.duration > MAX_DURATION {
            return bad(format!(
                "--duration must be between {} ms and {} s, not {:?}",
                MIN_DURATION.as_millis(),
                MAX_DURATION.as_secs(),
                self.duration
            ));
        }
        if self.runs == 0 || self.runs > MAX_RUNS {
            return bad(format!(
                "--runs must be between 1 and {MAX_RUNS}, not {}",
                self.runs
            ));
        }
        if self.prefill_keys > MAX_PREFILL_KEYS {
            return bad(format!(
                "--prefill must be at most {MAX_PREFILL_KEYS} keys, not {}",
                self.prefill_keys
            ));
        }
        let reads_completed =
            self.mix.weights.get(Kind::Replay) + self.mix.weights.get(Kind::Reused);
        if reads_completed > 0 && self.prefill_keys == 0 {
            return bad(
                "replays and reused keys need completed keys to hit: give --prefill 1 or more, or drop them from --mix"
                    .into(),
            );
        }
        if let Some(g) = &self.group {
            g.validate().map_err(BenchError::Invalid)?;
        }
        if self.pool_size == 0 || self.pool_size > crate::store::postgres::MAX_POOL_SIZE {
            return bad(format!(
                "--pool must be between 1 and {}, not {}",
                crate::store::postgres::MAX_POOL_SIZE,
                self.pool_size
            ));
        }
        if self.sweeper.partitioned() && !matches!(self.spec()?, Some(StoreSpec::Postgres { .. })) {
            return bad("--sweeper partitions is PostgreSQL's: give --store postgres://…".into());
        }
        if self.is_pooled()? && self.group.is_some() {
            return bad(
                "--group-commit is for SQLite's single writer; PostgreSQL and Redis commit each transaction and run --pool writers in parallel"
                    .into(),
            );
        }
        Ok(())
    }

    fn spec(&self) -> Result<Option<StoreSpec>, BenchError> {
        self.store
            .as_deref()
            .map(|s| StoreSpec::parse(s).map_err(|e| BenchError::Invalid(format!("--store: {e}"))))
            .transpose()
    }

    /// PostgreSQL and Redis run one writer per pooled connection; SQLite has one writer.
    fn is_pooled(&self) -> Result<bool, BenchError> {
        Ok(matches!(
            self.spec()?,
            Some(StoreSpec::Postgres { .. } | StoreSpec::Redis { .. })
        ))
    }

    /// How many abandoned keys to write: one per takeover the run can send, with 10 % to spare.
    fn planned_takeovers(&self) -> u64 {
        let share = self.mix.share(Kind::Takeover);
        if share == 0.0 {
            return 0;
        }
        let rate = self.rate_per_s.unwrap_or(FLAT_OUT_PLANNING_RATE);
        let n = (share * rate * self.measured_per_side().as_secs_f64() * 1.1).ceil() as u64 + 100;
        n.min(MAX_PLANNED_TAKEOVERS)
    }

    /// Each side's warm-up: half a run, at most [`MAX_WARMUP`].
    pub fn warmup(&self) -> Duration {
        (self.duration / 2).min(MAX_WARMUP)
    }

    /// Warm-up and runs of one side.
    fn measured_per_side(&self) -> Duration {
        self.warmup() + self.duration * self.runs
    }

    fn tell(&self, measured: Duration, message: String) {
        if let Some(hook) = &self.progress {
            (hook.0)(&ProgressEvent {
                measured_s: measured.as_secs_f64(),
                total_s: 2.0 * self.measured_per_side().as_secs_f64(),
                message,
            });
        }
    }

    fn layout(&self) -> Layout {
        Layout {
            completed: self.prefill_keys,
            held: if self.mix.weights.get(Kind::Conflict) > 0 {
                HELD_KEYS
            } else {
                0
            },
            lease_expired: self.planned_takeovers(),
        }
    }
}

/// One side of the run: what serves (one service per writer), how it commits, what it sent.
struct Side {
    services: Vec<Box<dyn Service>>,
    commits: Commits,
    counters: Counters,
    /// The runs, summed (the warm-up is not in it).
    tally: Tally,
    /// The warm-up: not measured, but its labels and problems count in the checks.
    warm: Tally,
    baseline: bool,
    /// `--per-statement`: where its statements' latencies go.
    times: Option<StatementTimes>,
}

impl Side {
    fn new(
        services: Vec<Box<dyn Service>>,
        commits: Commits,
        layout: &Layout,
        baseline: bool,
        times: Option<StatementTimes>,
    ) -> Self {
        Self {
            services,
            commits,
            counters: Counters::new(layout),
            tally: Tally::new(),
            warm: Tally::new(),
            baseline,
            times,
        }
    }

    /// Runs one slice; `run` 0 is the warm-up, else the run's number, whose sample it returns.
    fn slice(
        &mut self,
        config: &BenchConfig,
        layout: &Layout,
        length: Duration,
        slice_no: u64,
    ) -> Option<RunSample> {
        let plan = Plan {
            workers: config.workers as usize,
            rate_per_s: config.rate_per_s,
            length,
            mix: &config.mix,
            layout,
            counters: &self.counters,
            seed: config.seed.wrapping_add(slice_no.wrapping_mul(0x1000_0001)),
            baseline: self.baseline,
            interrupted: &config.interrupted,
        };
        let t = drive::run_slice(&mut self.services, &self.commits, &plan);
        if slice_no == 0 {
            if let Some(times) = &self.times {
                times.reset();
            }
            self.warm.absorb(t);
            return None;
        }
        let sample = RunSample::of(slice_no as u32, &t);
        self.tally.absorb(t);
        Some(sample)
    }

    /// Every 201 of the warm-up and the runs.
    fn created(&self) -> u64 {
        self.tally.created + self.warm.created
    }

    /// The warm-up's problems join the runs': a wrong answer is wrong whenever it came.
    fn absorb_warmup_problems(&mut self) {
        let w = &self.warm;
        self.tally.unexpected += w.unexpected;
        self.tally.errors += w.errors;
        self.tally.lost_answers += w.lost_answers;
        self.tally.takeovers_short += w.takeovers_short;
        if self.tally.first_problem.is_none() {
            self.tally.first_problem = w.first_problem.clone();
        }
    }

    /// The invariants of its store, and every 201 it gave checked against the labels.
    fn check(&mut self, layout: &Layout) -> Result<InvariantCheck, BenchError> {
        let created = self.created();
        check(self.services[0].store(), layout, created)
    }
}

/// What the runs measured: the samples of each complete pair of runs.
struct Samples {
    runs_done: u32,
    engine: Vec<RunSample>,
    baseline: Vec<RunSample>,
}

/// Warms both sides up, then measures `runs` runs of each, alternating engine and baseline,
/// until done or Ctrl-C. Only complete pairs are kept: an interrupted run is not a sample.
fn measure(
    config: &BenchConfig,
    layout: &Layout,
    engine: &mut Side,
    baseline: &mut Side,
) -> Samples {
    let warm = config.warmup();
    let mut done = Duration::ZERO;
    config.tell(done, format!("warm-up, {:.1} s a side", warm.as_secs_f64()));
    engine.slice(config, layout, warm, 0);
    baseline.slice(config, layout, warm, 0);
    done += warm * 2;
    let mut samples = Samples {
        runs_done: 0,
        engine: Vec::new(),
        baseline: Vec::new(),
    };
    let last = |s: &Samples| match (s.engine.last(), s.baseline.last()) {
        (Some(e), Some(b)) => format!(
            " (last: engine {} creates/s, baseline {})",
            crate::format::thousands(e.creates_per_s),
            crate::format::thousands(b.creates_per_s)
        ),
        _ => String::new(),
    };
    for n in 1..=u64::from(config.runs) {
        if config.interrupted.load(Ordering::Relaxed) {
            break;
        }
        // Both sides get the same seed for a run, so the same draws.
        config.tell(
            done,
            format!("run {n}/{} engine{}", config.runs, last(&samples)),
        );
        let e = engine.slice(config, layout, config.duration, n);
        done += config.duration;
        config.tell(
            done,
            format!("run {n}/{} baseline{}", config.runs, last(&samples)),
        );
        let b = baseline.slice(config, layout, config.duration, n);
        done += config.duration;
        if config.interrupted.load(Ordering::Relaxed) {
            break;
        }
        if let (Some(e), Some(b)) = (e, b) {
            samples.engine.push(e);
            samples.baseline.push(b);
            samples.runs_done += 1;
        }
    }
    samples
}

/// The carrier answers at once and keeps no ledger and no keys (a window of 0): the bench
/// measures the engine and its store, not a network call, and a ledger or a key map holding
/// every purchase grows for the whole run on the writer's thread. The key map alone, kept for
/// the default 24 h window, cost the SQLite writer ~4 % of its time per create flat out (writer
/// time per create over the baseline's 1.07, 1.03 without it; docs/bench.md, "The request
/// digest off the writer, and a carrier with no key map"). No bench request needs the carrier
/// to dedupe: a takeover's key was never sent to this run's carrier.
fn carrier(config: &BenchConfig) -> Arc<Carrier> {
    Arc::new(
        Carrier::new(CarrierConfig {
            latency: Latency::Fixed { ms: 0 },
            window_ms: 0,
            seed: config.seed,
            ..CarrierConfig::default()
        })
        .without_ledger(),
    )
}

/// Runs the bench. Errors are for runs that could not be made (bad input, a store that cannot be
/// opened); a run whose answers or invariants are wrong returns a report with `ok == false`.
///
/// The stores come from [`Stores`], as every run's do: the engine's store is the one `--store`
/// names, the baseline's (and on PostgreSQL `pgbench`'s) sit beside it as `NAME_baseline` and
/// `NAME_pgbench`, all new, and scratch ones are dropped at the end however the run ends.
pub fn run(config: &BenchConfig) -> Result<Report, BenchError> {
    config.validate()?;
    let stores = Stores::new(
        config.store.as_deref(),
        None,
        StoreOptions {
            purpose: "bench",
            synchronous: config.synchronous,
            pool_size: config.pool_size,
            // The bench measures the disk: its scratch stores are files, as a named one is.
            scratch_in_memory: false,
        },
    )
    .map_err(|e| match e {
        StoreError::Spec { .. } => BenchError::Invalid(format!("--store: {e}")),
        e => BenchError::Store(e),
    })?;
    let report = match stores.spec() {
        StoreSpec::Sqlite(_) => run_sqlite(config, &stores),
        StoreSpec::Postgres { url, .. } => run_postgres(config, &stores, url),
        StoreSpec::Redis { .. } => run_redis(config, &stores),
    }?;
    // Every connection is back: the sides were dropped with the run.
    stores.finish()?;
    Ok(report)
}

/// The engine's and the baseline's stores, plus `extra` more parts, all new.
fn create(
    stores: &Stores,
    config: &BenchConfig,
    extra: &[&'static str],
) -> Result<Vec<StorePool>, BenchError> {
    let mut slots = vec![Slot::default(), Slot::part("baseline")];
    slots.extend(extra.iter().map(|&p| Slot::part(p)));
    for path in stores.replace_own_sqlite(&slots)? {
        let note = format!("replacing {}, left by a previous bench", path.display());
        config.tell(Duration::ZERO, note);
    }
    Ok(stores.create(&slots, config.sweeper)?)
}

fn run_sqlite(config: &BenchConfig, stores: &Stores) -> Result<Report, BenchError> {
    let before = machine::machine_before();
    let pools = create(stores, config, &[])?;
    let [engine_path, baseline_path] = [0, 1].map(|i| {
        pools[i]
            .sqlite_path()
            .expect("an SQLite spec gives SQLite stores")
            .to_path_buf()
    });
    let layout = config.layout();

    let fill_started = Instant::now();
    let mut filler = Filler::open(&engine_path)?;
    filler.fill(&layout, SystemClock.now_ms())?;
    filler.close()?;
    // The baseline's store is a copy of the engine's: the same pages, in the same order.
    std::fs::copy(&engine_path, &baseline_path).map_err(|source| BenchError::Io {
        path: baseline_path.display().to_string(),
        source,
    })?;
    let fill_s = fill_started.elapsed().as_secs_f64();
    let ceiling = config.ceiling.then(|| {
        config.tell(Duration::ZERO, "measuring the disk's flush rate".into());
        let dir = engine_path
            .parent()
            .filter(|d| !d.as_os_str().is_empty())
            .unwrap_or(Path::new("."));
        ceiling::sqlite_flushes(dir, ceiling_time(config)).map(|slices| CeilingMeasure {
            unit: "flushes",
            connections: 1,
            slices,
            note: ceiling::sqlite_note(config.synchronous),
        })
    });

    let options = SqliteOptions {
        synchronous: config.synchronous,
        ..SqliteOptions::default()
    };
    let (engine_store, engine_commits): (Box<dyn Store>, Commits) =
        match open(&engine_path, &options, config)? {
            SqliteWriter::PerTransaction(s) => (Box::new(s), Commits::PerTransaction),
            SqliteWriter::Group(g) => (Box::new(g.clone()), Commits::Group(g)),
        };
    let (baseline_store, baseline_commits) = match open(&baseline_path, &options, config)? {
        SqliteWriter::PerTransaction(s) => {
            (SqliteWriter::PerTransaction(s), Commits::PerTransaction)
        }
        SqliteWriter::Group(g) => (SqliteWriter::Group(g.clone()), Commits::Group(g)),
    };
    let checkpointers = match config.checkpoints {
        Checkpoints::Inline | Checkpoints::Deferred => None,
        Checkpoints::Background => Some((
            Checkpointer::start(&engine_path, config.synchronous, CHECKPOINT_INTERVAL)?,
            Checkpointer::start(&baseline_path, config.synchronous, CHECKPOINT_INTERVAL)?,
        )),
    };
    let (engine_times, baseline_times) = (timer(config.per_statement), timer(config.per_statement));
    let engine = Engine::new(
        timed(engine_store, &engine_times),
        carrier(config),
        Arc::new(SystemClock),
        EngineConfig::default(),
    );
    let mut engine_side = Side::new(
        vec![Box::new(engine)],
        engine_commits,
        &layout,
        false,
        engine_times,
    );
    let mut baseline_side = Side::new(
        vec![Box::new(
            Baseline::new(baseline_store).timed(baseline_times.clone()),
        )],
        baseline_commits,
        &layout,
        true,
        baseline_times,
    );
    let samples = measure(config, &layout, &mut engine_side, &mut baseline_side);

    let (engine_ckpt, baseline_ckpt) = match checkpointers {
        Some((e, b)) => (Some(e.stop()), Some(b.stop())),
        None => (None, None),
    };
    // Whatever happened, the WAL goes back into the database file before the report: an
    // interrupted or deferred run leaves no log behind to replay.
    let mut wal_ok = true;
    for path in [&engine_path, &baseline_path] {
        wal_ok &= truncate_wal(path, &options).is_ok();
    }
    let measured = Measured {
        before,
        fill_s,
        samples,
        ceiling,
        wal_checkpointed: Some(wal_ok),
    };
    finish(
        config,
        &layout,
        stores,
        &pools,
        measured,
        [
            (&mut engine_side, engine_ckpt),
            (&mut baseline_side, baseline_ckpt),
        ],
        report::StoreParts::Sqlite,
    )
}

/// `PRAGMA wal_checkpoint(TRUNCATE)` on a connection of its own.
fn truncate_wal(path: &Path, options: &SqliteOptions) -> Result<(), StoreError> {
    let store = SqliteStore::open(path, options)?;
    store
        .connection()
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |r| {
            r.get::<_, i64>(0)
        })
        .map_err(|source| StoreError::Sqlite {
            location: path.display().to_string(),
            source,
        })
        .and_then(|busy| {
            if busy == 0 {
                Ok(())
            } else {
                Err(StoreError::Corrupt(format!(
                    "{}: the WAL checkpoint was blocked by another connection",
                    path.display()
                )))
            }
        })
}

fn run_postgres(config: &BenchConfig, stores: &Stores, url: &str) -> Result<Report, BenchError> {
    let before = machine::machine_before();
    let extra: &[&str] = if config.pgbench { &["pgbench"] } else { &[] };
    let pools = create(stores, config, extra)?;
    let pg_pools: Vec<&PgPool> = pools
        .iter()
        .map(|p| {
            p.postgres()
                .expect("a PostgreSQL spec gives PostgreSQL stores")
        })
        .collect();
    let (engine_pool, baseline_pool, pgbench_pool) =
        (pg_pools[0], pg_pools[1], pg_pools.get(2).copied());
    let layout = config.layout();

    let fill_started = Instant::now();
    let now = SystemClock.now_ms();
    // Every record a run writes expires within a day and the run's length of now: the
    // partitions for that span exist before the fill, so neither side creates one mid-run.
    let until = now + fill::RETENTION_MS + crate::duration::ms(config.duration) * 2 + 60_000;
    for pool in &pg_pools {
        pool.create_partitions(now, until)?;
        pg::fill(&mut pool.get()?, &layout, now)?;
    }
    let fill_s = fill_started.elapsed().as_secs_f64();
    let ceiling = if config.ceiling {
        config.tell(Duration::ZERO, "measuring PostgreSQL's commit rate".into());
        Some(
            ceiling::postgres_commits(
                engine_pool,
                config.pool_size,
                config.synchronous,
                ceiling_time(config),
            )
            .map(|slices| CeilingMeasure {
                unit: "commits",
                connections: config.pool_size,
                slices,
                note: ceiling::postgres_note(config.synchronous, config.pool_size),
            })
            .map_err(|e| e.to_string()),
        )
    } else {
        None
    };

    let (mut engine_side, mut baseline_side) = pooled_sides(
        config,
        &layout,
        || Ok(Box::new(engine_pool.get()?)),
        true,
        |times| {
            Ok(Box::new(
                pg::PgBaseline::new(baseline_pool.get()?)?.timed(times),
            ))
        },
    )?;
    let samples = measure(config, &layout, &mut engine_side, &mut baseline_side);

    let pgbench = match pgbench_pool {
        Some(_) if config.interrupted.load(Ordering::Relaxed) => {
            Err("skipped: the run was interrupted".to_string())
        }
        Some(pgbench_pool) => {
            let dir = tempfile::tempdir().map_err(|source| BenchError::Io {
                path: std::env::temp_dir().display().to_string(),
                source,
            })?;
            pg::run_pgbench(url, pgbench_pool.schema(), config, &layout, dir.path())
        }
        None => Err("not asked for".to_string()),
    };
    let measured = Measured {
        before,
        fill_s,
        samples,
        ceiling,
        wal_checkpointed: None,
    };
    finish(
        config,
        &layout,
        stores,
        &pools,
        measured,
        [(&mut engine_side, None), (&mut baseline_side, None)],
        report::StoreParts::Postgres(report::PgParts {
            pool_size: config.pool_size,
            pgbench,
        }),
    )
}

fn run_redis(config: &BenchConfig, stores: &Stores) -> Result<Report, BenchError> {
    let before = machine::machine_before();
    let pools = create(stores, config, &[])?;
    let open = |i: usize| -> Result<RedisStore, BenchError> {
        Ok(pools[i].redis().expect("a Redis spec gives Redis stores")?)
    };
    let layout = config.layout();

    let fill_started = Instant::now();
    let now = SystemClock.now_ms();
    for i in 0..pools.len() {
        redis::fill(&mut open(i)?, &layout, now)?;
    }
    let fill_s = fill_started.elapsed().as_secs_f64();
    let ceiling = if config.ceiling {
        config.tell(Duration::ZERO, "measuring Redis's round-trip rate".into());
        let conns = (0..config.pool_size)
            .map(|_| open(0))
            .collect::<Result<Vec<_>, _>>()?;
        Some(
            ceiling::redis_round_trips(conns, ceiling_time(config)).map(|slices| CeilingMeasure {
                unit: "round trips",
                connections: config.pool_size,
                slices,
                note: None,
            }),
        )
    } else {
        None
    };

    let (mut engine_side, mut baseline_side) = pooled_sides(
        config,
        &layout,
        || Ok(Box::new(open(0)?)),
        // The Redis baseline's commands are not timed one by one.
        false,
        |_| Ok(Box::new(redis::RedisBaseline::new(open(1)?))),
    )?;
    let samples = measure(config, &layout, &mut engine_side, &mut baseline_side);
    let measured = Measured {
        before,
        fill_s,
        samples,
        ceiling,
        wal_checkpointed: None,
    };
    finish(
        config,
        &layout,
        stores,
        &pools,
        measured,
        [(&mut engine_side, None), (&mut baseline_side, None)],
        report::StoreParts::Redis {
            pool_size: config.pool_size,
        },
    )
}

/// How long each slice of the ceiling runs: [`ceiling::CEILING_SLICE`], or for a short run its
/// duration spread over the slices, so the ceiling never takes longer than one run.
fn ceiling_time(config: &BenchConfig) -> Duration {
    (config.duration / ceiling::CEILING_SLICES as u32).min(ceiling::CEILING_SLICE)
}

/// A store's ceiling as measured, before it is divided by the units per create.
struct CeilingMeasure {
    unit: &'static str,
    connections: u32,
    /// The rate of each slice.
    slices: Vec<f64>,
    note: Option<String>,
}

/// What any store's run has once it has measured, for the report.
struct Measured {
    /// The machine before the bench added its own work.
    before: machine::MachineBefore,
    fill_s: f64,
    samples: Samples,
    /// `None` when not asked for; `Err` says why it could not be measured.
    ceiling: Option<Result<CeilingMeasure, String>>,
    /// SQLite only: whether both WALs went back into their database files.
    wal_checkpointed: Option<bool>,
}

/// Checks both sides' stores and builds the report: the same ending for every store. `pools`
/// are the run's stores, the engine's first and the baseline's second.
fn finish(
    config: &BenchConfig,
    layout: &Layout,
    stores: &Stores,
    pools: &[StorePool],
    m: Measured,
    sides: [(&mut Side, Option<checkpoint::CheckpointStats>); 2],
    store: report::StoreParts,
) -> Result<Report, BenchError> {
    let [(engine, engine_ckpt), (baseline, baseline_ckpt)] = sides;
    let engine_check = engine.check(layout)?;
    let baseline_check = baseline.check(layout)?;
    engine.absorb_warmup_problems();
    baseline.absorb_warmup_problems();
    // Two transactions per create (two scripts on Redis); with group commit, as measured.
    let per_create = match group_stats(&engine.commits) {
        Some(g) if engine.created() > 0 => g.commits as f64 / engine.created() as f64,
        _ => 2.0,
    };
    let engine_runs: Vec<f64> = m.samples.engine.iter().map(|r| r.creates_per_s).collect();
    let (ceiling, ceiling_note) = match m.ceiling {
        None => (None, Some("not asked for".to_string())),
        Some(Err(e)) => (None, Some(format!("could not be measured: {e}"))),
        Some(Ok(c)) => (
            Some(ceiling::Ceiling::new(
                c.unit,
                c.connections,
                &c.slices,
                per_create,
                &engine_runs,
                c.note,
            )),
            None,
        ),
    };
    Ok(Report::build(report::Parts {
        config,
        layout,
        engine_store: pools[0].describe(),
        baseline_store: pools[1].describe(),
        kept: stores.kept(),
        runs: config.runs,
        runs_done: m.samples.runs_done,
        warmup_s: config.warmup().as_secs_f64(),
        engine_runs: m.samples.engine,
        baseline_runs: m.samples.baseline,
        ceiling,
        ceiling_note,
        fill_s: m.fill_s,
        engine: (
            &engine.tally,
            group_stats(&engine.commits),
            engine_ckpt,
            engine_check,
        ),
        baseline: (
            &baseline.tally,
            group_stats(&baseline.commits),
            baseline_ckpt,
            baseline_check,
        ),
        machine: Machine::now(m.before),
        store,
        wal_checkpointed: m.wal_checkpointed,
        per_statement: engine.times.as_ref().map(|t| PerStatement {
            engine: t.rows(),
            baseline: baseline
                .times
                .as_ref()
                .map(|t| t.rows())
                .unwrap_or_default(),
        }),
    }))
}

/// The two sides of a pooled store (PostgreSQL, Redis): one engine and one baseline per
/// writer, each on a connection of its own, every transaction committing alone.
fn pooled_sides(
    config: &BenchConfig,
    layout: &Layout,
    mut engine_store: impl FnMut() -> Result<Box<dyn Store>, BenchError>,
    baseline_timed: bool,
    mut baseline: impl FnMut(Option<StatementTimes>) -> Result<Box<dyn Service>, BenchError>,
) -> Result<(Side, Side), BenchError> {
    let carrier = carrier(config);
    let engine_times = timer(config.per_statement);
    let baseline_times = timer(config.per_statement).filter(|_| baseline_timed);
    let mut engines: Vec<Box<dyn Service>> = Vec::new();
    let mut baselines = Vec::new();
    for _ in 0..config.pool_size {
        engines.push(Box::new(Engine::new(
            timed(engine_store()?, &engine_times),
            carrier.clone(),
            Arc::new(SystemClock),
            EngineConfig::default(),
        )));
        baselines.push(baseline(baseline_times.clone())?);
    }
    Ok((
        Side::new(
            engines,
            Commits::PerTransaction,
            layout,
            false,
            engine_times,
        ),
        Side::new(
            baselines,
            Commits::PerTransaction,
            layout,
            true,
            baseline_times,
        ),
    ))
}

/// Opens one side's store as the run asks: commits on their own or grouped, checkpoints inline or
/// left to a background checkpointer.
fn open(
    path: &Path,
    options: &SqliteOptions,
    config: &BenchConfig,
) -> Result<SqliteWriter, StoreError> {
    let options = &SqliteOptions {
        inline_checkpoints: config.checkpoints == Checkpoints::Inline,
        bounded_wal: config.checkpoints != Checkpoints::Deferred,
        ..options.clone()
    };
    Ok(match config.group {
        None => SqliteWriter::PerTransaction(SqliteStore::open(path, options)?),
        Some(policy) => SqliteWriter::Group(GroupCommitStore::open(path, options, policy)?),
    })
}

fn group_stats(commits: &Commits) -> Option<crate::store::group::GroupStats> {
    match commits {
        Commits::PerTransaction => None,
        Commits::Group(g) => Some(g.stats()),
    }
}

/// The store invariants, plus: every 201 handed to a client has its label stored, and no label
/// was stored whose 201 was withheld.
fn check(
    store: &mut dyn Store,
    layout: &Layout,
    created: u64,
) -> Result<InvariantCheck, BenchError> {
    let inv = store.invariants()?;
    let labels_stored = store.count_labels()?;
    let labels_expected = layout.completed + created;
    Ok(InvariantCheck::new(inv, labels_stored, labels_expected))
}
