use super::Format;
use crate::carrier::Latency;
use crate::duration::{self, clap_parse};
use crate::engine::{CarrierKey, DiePoint, EngineConfig, KeyScope, RecordPlacement};
use crate::sim::replay::{self, KeyPolicy, Progress, SimConfig, SimReport};
use crate::store::{
    PgOptions, PgPool, SqliteOptions, SqliteStore, Store, StoreError, StoreSpec, Synchronous,
};
use crate::traffic::{Arrivals, LoadProfile, RetryDelay};
use anyhow::{Context, bail};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

#[derive(Debug, clap::Args)]
pub struct SimulateArgs {
    /// Label creates per second (the seed's average is 400, its peak 2000).
    #[arg(long, default_value_t = 400.0)]
    pub rate: f64,
    /// A daily rush at this rate (creates/s) on top of --rate, e.g. 2000 (see --rush-start,
    /// --rush-for).
    #[arg(long)]
    pub rush_rate: Option<f64>,
    /// When the daily rush starts (time after midnight, e.g. 16h).
    #[arg(long, value_parser = clap_parse, default_value = "16h")]
    pub rush_start: Duration,
    /// How long the daily rush lasts (e.g. 4h).
    #[arg(long, value_parser = clap_parse, default_value = "4h")]
    pub rush_for: Duration,
    /// Retention after completion (e.g. 24h, 3d); a comma-separated list (1h,24h,3d,7d) runs a
    /// sweep whose points run in parallel.
    #[arg(long, default_value = "24h", value_delimiter = ',', value_parser = clap_parse)]
    pub retention: Vec<Duration>,
    /// How long traffic arrives, in simulated time (default: one retention plus half a
    /// retention, at least 6 h, of steady state). Late retries are followed past it.
    #[arg(long, value_parser = clap_parse)]
    pub duration: Option<Duration>,
    /// Fraction of ordinary calls replayed, in (0, 1]; 1 is full fidelity. Default: enough for
    /// about 40,000 replayed intents.
    #[arg(long)]
    pub sample: Option<f64>,
    /// Independent replicates, run in parallel and pooled into the intervals.
    #[arg(long, default_value_t = 1)]
    pub replicates: u32,
    /// Seed for every random choice; the same seed and inputs give the same JSON.
    #[arg(long, default_value_t = 1)]
    pub seed: u64,
    /// Fraction of calls that time out (seed: 0.001).
    #[arg(long, default_value_t = 0.001)]
    pub timeout_rate: f64,
    /// Fraction of timed-out calls already done server-side (seed: 0.6).
    #[arg(long, default_value_t = 0.6)]
    pub done_fraction: f64,
    /// How clients make keys: derived (the seed's), random-saved, or new-per-attempt (the bug).
    #[arg(long, value_enum, default_value = "derived")]
    pub key_policy: KeyPolicyArg,
    /// Key scope: per-caller (correct) or global (the seed's collision failure).
    #[arg(long, value_enum, default_value = "per-caller")]
    pub key_scope: KeyScopeArg,
    /// Key record and label in one transaction (same-transaction) or separate-store (not atomic).
    #[arg(long, value_enum, default_value = "same-transaction")]
    pub record_placement: RecordPlacementArg,
    /// What the carrier call carries: the derived key, or none.
    #[arg(long, value_enum, default_value = "derived")]
    pub carrier_key: CarrierKeyArg,
    /// Lease length (seed: 30s).
    #[arg(long, value_parser = clap_parse, default_value = "30s")]
    pub lease: Duration,
    /// Carrier call timeout (seed: 20s).
    #[arg(long, value_parser = clap_parse, default_value = "20s")]
    pub carrier_timeout: Duration,
    /// Median carrier latency.
    #[arg(long, value_parser = clap_parse, default_value = "30ms")]
    pub carrier_median: Duration,
    /// 99th-percentile carrier latency.
    #[arg(long, value_parser = clap_parse, default_value = "100ms")]
    pub carrier_p99: Duration,
    /// The carrier's own dedupe window for a repeated key.
    #[arg(long, value_parser = clap_parse, default_value = "24h")]
    pub carrier_window: Duration,
    /// Fraction of carrier calls that hang past the timeout after buying the label.
    #[arg(long, default_value_t = 0.0)]
    pub carrier_hang_rate: f64,
    /// Price of one label, USD (seed: 6.00).
    #[arg(long, default_value_t = 6.0)]
    pub label_price: f64,
    /// Fraction of attempts killed mid-flight (at --crash-point).
    #[arg(long, default_value_t = 0.0)]
    pub crash_rate: f64,
    /// Where a killed attempt dies: after-txn1, after-carrier or inside-txn2.
    #[arg(long, value_enum, default_value = "after-carrier")]
    pub crash_point: CrashPointArg,
    /// Callers sharing order numbering (tenants); with global keys they collide.
    #[arg(long, default_value_t = 1)]
    pub callers: u32,
    /// How often the sweeper runs.
    #[arg(long, value_parser = clap_parse, default_value = "60s")]
    pub sweep_period: Duration,
    /// Records the sweeper deletes per batch.
    #[arg(long, default_value_t = 10_000)]
    pub sweep_batch: u32,
    /// Idempotency-key length: a size (36, 36B) or median=SIZE,p99=SIZE (seed: 36 B).
    #[arg(long, value_name = "SIZE", default_value = "36B", value_parser = crate::payload::SizeDist::parse)]
    pub key_bytes: crate::payload::SizeDist,
    /// Saved 201 response size: a size (300B, 2kB) or median=SIZE,p99=SIZE (seed: 300 B).
    #[arg(long, value_name = "SIZE", default_value = "300B", value_parser = crate::payload::SizeDist::parse)]
    pub response_bytes: crate::payload::SizeDist,
    /// Your own late-retry distribution: CSV of delay,cumulative fraction (e.g. 90s,0.85).
    #[arg(long)]
    pub retry_cdf: Option<PathBuf>,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Write the time series and outcome tables (CSV and Parquet) into this directory.
    #[arg(long)]
    pub out: Option<PathBuf>,
    /// Also write the one-page HTML report of this run to this file.
    #[arg(long, value_name = "FILE")]
    pub report: Option<PathBuf>,
    /// Keep the SQLite store in this file (replicates and sweep points get a suffix).
    #[arg(long, conflicts_with = "store")]
    pub db: Option<PathBuf>,
    /// The store: `sqlite:PATH`, a file path, or `postgres://USER@HOST:PORT/DATABASE`
    /// (default: temporary SQLite files). Each replicate and sweep point gets its own file or
    /// schema; PostgreSQL runs without `?schema=NAME` use scratch schemas dropped afterwards.
    #[arg(long, value_name = "SPEC")]
    pub store: Option<String>,
    /// Also write the requests the simulator replays (replicate 1 of the first retention) to
    /// this .parquet, .csv or .ndjson file, in the columns `idemcalc fit` reads. Runs that
    /// replicate once more, with the log on.
    #[arg(long, value_name = "FILE")]
    pub request_log: Option<PathBuf>,
    /// No progress bar.
    #[arg(long)]
    pub quiet: bool,
}

macro_rules! arg_enum {
    ($name:ident => $target:ty { $($variant:ident => $value:expr),* $(,)? }) => {
        #[derive(Debug, Clone, Copy, clap::ValueEnum)]
        pub enum $name { $($variant),* }
        impl From<$name> for $target {
            fn from(v: $name) -> Self {
                match v { $($name::$variant => $value),* }
            }
        }
    };
}

arg_enum!(KeyPolicyArg => KeyPolicy {
    Derived => KeyPolicy::Derived,
    RandomSaved => KeyPolicy::RandomSaved,
    NewPerAttempt => KeyPolicy::NewPerAttempt,
});
arg_enum!(KeyScopeArg => KeyScope { PerCaller => KeyScope::PerCaller, Global => KeyScope::Global });
arg_enum!(RecordPlacementArg => RecordPlacement {
    SameTransaction => RecordPlacement::SameTransaction,
    SeparateStore => RecordPlacement::SeparateStore,
});
arg_enum!(CarrierKeyArg => CarrierKey { Derived => CarrierKey::Derived, None => CarrierKey::None });
arg_enum!(CrashPointArg => DiePoint {
    AfterTxn1 => DiePoint::AfterTxn1,
    AfterCarrier => DiePoint::AfterCarrier,
    InsideTxn2 => DiePoint::InsideTxn2,
});

fn ms(d: Duration) -> i64 {
    d.as_millis() as i64
}

impl SimulateArgs {
    /// The simulation's configuration for one retention.
    pub fn config(&self, retention: Duration) -> SimConfig {
        let d = SimConfig::default();
        SimConfig {
            rate_per_s: self.rate,
            arrival_s: self.duration.map(|x| x.as_secs_f64()),
            sample: self.sample,
            timeout_fraction: self.timeout_rate,
            done_fraction: self.done_fraction,
            key_policy: self.key_policy.into(),
            sweep_period_s: self.sweep_period.as_secs_f64(),
            sweep_batch: self.sweep_batch,
            crash_fraction: self.crash_rate,
            crash_point: self.crash_point.into(),
            callers: self.callers,
            engine: EngineConfig {
                lease_ms: ms(self.lease),
                carrier_timeout_ms: ms(self.carrier_timeout),
                retention_ms: ms(retention),
                key_scope: self.key_scope.into(),
                record_placement: self.record_placement.into(),
                carrier_key: self.carrier_key.into(),
                payload: crate::payload::PayloadSizes {
                    key_bytes: self.key_bytes.clone(),
                    response_bytes: self.response_bytes.clone(),
                },
            },
            carrier: crate::carrier::CarrierConfig {
                latency: Latency::LogNormal {
                    median_ms: self.carrier_median.as_secs_f64() * 1e3,
                    p99_ms: self.carrier_p99.as_secs_f64() * 1e3,
                },
                window_ms: ms(self.carrier_window),
                price_cents: (self.label_price * 100.0).round() as i64,
                hang_fraction: self.carrier_hang_rate,
                ..d.carrier.clone()
            },
            seed: self.seed,
            ..d
        }
    }

    pub fn arrivals(&self) -> anyhow::Result<Arrivals> {
        let base = Arrivals::constant(self.rate).context("--rate")?;
        match self.rush_rate {
            None => Ok(base),
            Some(rush) => Ok(Arrivals::Profile(
                LoadProfile::rush(
                    self.rate,
                    rush,
                    self.rush_start.as_secs_f64(),
                    self.rush_for.as_secs_f64(),
                )
                .context("--rush-rate/--rush-start/--rush-for")?,
            )),
        }
    }
}

/// Set by the Ctrl-C handler; every running replicate stops at its next event.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

/// Where each replicate of each sweep point keeps its records: an empty store of its own.
struct SimStores {
    spec: StoreSpec,
    /// Holds the scratch SQLite files until the run ends.
    _tmp: Option<tempfile::TempDir>,
    /// A name for reports that does not change between runs (no temporary paths).
    name: String,
    /// Scratch PostgreSQL schemas to drop at the end.
    scratch: Mutex<Vec<PgPool>>,
}

impl SimStores {
    fn new(args: &SimulateArgs) -> anyhow::Result<Self> {
        let (spec, tmp, name) = match (&args.store, &args.db) {
            (Some(spec), _) => {
                let spec = StoreSpec::parse(spec)?;
                let name = match &spec {
                    StoreSpec::Postgres { schema: None, .. } => {
                        format!("{} (scratch schemas)", spec.describe())
                    }
                    _ => spec.describe(),
                };
                (spec, None, name)
            }
            (None, Some(path)) => (
                StoreSpec::Sqlite(path.clone()),
                None,
                format!("sqlite:{}", path.display()),
            ),
            (None, None) => {
                let tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
                let spec = StoreSpec::Sqlite(tmp.path().join("store.sqlite"));
                (spec, Some(tmp), "sqlite (temporary file)".to_string())
            }
        };
        Ok(Self {
            spec,
            _tmp: tmp,
            name,
            scratch: Mutex::new(Vec::new()),
        })
    }

    /// The store for replicate `i` of sweep point `point`; the first keeps the name given.
    fn open(&self, point: usize, i: u32) -> Result<Box<dyn Store>, StoreError> {
        let suffix = match (point, i) {
            (0, 0) => String::new(),
            (p, i) => format!("_p{p}_r{i}"),
        };
        match &self.spec {
            StoreSpec::Sqlite(path) => {
                let path = PathBuf::from(format!("{}{suffix}", path.display()));
                let options = SqliteOptions {
                    // The simulator measures sizes and counts, not durability.
                    synchronous: Synchronous::Off,
                    ..SqliteOptions::default()
                };
                Ok(Box::new(SqliteStore::open(&path, &options)?))
            }
            StoreSpec::Postgres { url, schema } => {
                let scratch = schema.is_none();
                let schema = match schema {
                    Some(s) => format!("{s}{suffix}"),
                    None => format!(
                        "idemcalc_sim_{}_p{point}_r{i}",
                        &uuid::Uuid::new_v4().simple().to_string()[..12]
                    ),
                };
                let options = PgOptions {
                    schema,
                    pool_size: 1,
                    synchronous: Synchronous::Off,
                    ..PgOptions::default()
                };
                let pool = PgPool::connect(url, &options)?;
                let store = pool.get()?;
                if scratch {
                    self.scratch
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .push(pool);
                }
                Ok(Box::new(store))
            }
        }
    }

    fn drop_scratch(&self) -> anyhow::Result<()> {
        let pools: Vec<PgPool> = self
            .scratch
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect();
        for pool in pools {
            pool.drop_schema()?;
        }
        Ok(())
    }
}

/// Runs the simulation for every retention asked for, in parallel.
pub fn simulate_all(args: &SimulateArgs, quiet: bool) -> anyhow::Result<Vec<SimReport>> {
    let dist = match &args.retry_cdf {
        Some(p) => RetryDelay::from_csv_path(p)?,
        None => RetryDelay::seed(),
    };
    let arrivals = args.arrivals()?;
    if args.retention.is_empty() {
        bail!("--retention: give at least one retention");
    }
    let configs: Vec<SimConfig> = args.retention.iter().map(|r| args.config(*r)).collect();
    for c in &configs {
        c.validate()?;
    }
    if args.replicates == 0 {
        bail!("--replicates: must be at least 1");
    }
    let _ = ctrlc::set_handler(|| INTERRUPTED.store(true, Ordering::SeqCst));
    let stores = SimStores::new(args)?;
    let bar = if quiet || !std::io::stderr().is_terminal() {
        ProgressBar::hidden()
    } else {
        let b = ProgressBar::with_draw_target(Some(1000), ProgressDrawTarget::stderr());
        b.set_style(
            ProgressStyle::with_template("{spinner} simulating {wide_bar} {percent:>3}% {elapsed}")
                .unwrap_or_else(|_| ProgressStyle::default_bar()),
        );
        b
    };
    let tick = |f: f64| bar.set_position((f * 1000.0) as u64);
    let progress = Progress {
        tick: &tick,
        interrupted: &INTERRUPTED,
    };
    use rayon::prelude::*;
    let reports = configs
        .par_iter()
        .enumerate()
        .map(|(point, cfg)| {
            let open = |i: u32| stores.open(point, i);
            replay::simulate(
                cfg,
                &arrivals,
                &dist,
                args.replicates,
                &stores.name,
                &open,
                &progress,
            )
        })
        .collect::<Result<Vec<_>, _>>();
    bar.finish_and_clear();
    stores.drop_scratch()?;
    Ok(reports?)
}

/// Replays the first retention's first replicate again with the request log on and writes it.
fn write_request_log(args: &SimulateArgs, path: &Path) -> anyhow::Result<()> {
    let retention = *args
        .retention
        .first()
        .context("--retention: give at least one retention")?;
    let cfg = SimConfig {
        request_log: true,
        ..args.config(retention)
    };
    let dist = match &args.retry_cdf {
        Some(p) => RetryDelay::from_csv_path(p)?,
        None => RetryDelay::seed(),
    };
    let tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
    let store = SqliteStore::open(
        &tmp.path().join("log.sqlite"),
        &SqliteOptions {
            synchronous: Synchronous::Off,
            ..SqliteOptions::default()
        },
    )?;
    let progress = Progress {
        tick: &|_| {},
        interrupted: &INTERRUPTED,
    };
    let tallies = replay::run_once(
        &cfg,
        &args.arrivals()?,
        &dist,
        Box::new(store),
        0,
        &progress,
    )?;
    crate::fit::write_log(path, &tallies.request_log.rows())?;
    Ok(())
}

pub fn run(args: &SimulateArgs) -> anyhow::Result<i32> {
    if let Some(path) = &args.request_log {
        // Refuse an unknown extension before the simulation runs, not after.
        crate::fit::log_kind(path)?;
    }
    let reports = simulate_all(args, args.quiet)?;
    if let Some(path) = &args.request_log {
        write_request_log(args, path)?;
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
    if let Some(path) = &args.report {
        write_report(args, path, &reports)?;
    }
    match args.format {
        Format::Json => {
            let text = if reports.len() == 1 {
                serde_json::to_string_pretty(&reports[0])?
            } else {
                serde_json::to_string_pretty(&serde_json::json!({ "sweep": reports }))?
            };
            println!("{text}");
        }
        Format::Table => {
            for r in &reports {
                print!("{}", render(r));
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

/// Writes the single-page report of this run (`--report FILE`).
fn write_report(args: &SimulateArgs, path: &Path, reports: &[SimReport]) -> anyhow::Result<()> {
    use crate::report::Exporter as _;
    let dist = match &args.retry_cdf {
        Some(p) => RetryDelay::from_csv_path(p)?,
        None => RetryDelay::seed(),
    };
    let configs: Vec<SimConfig> = args.retention.iter().map(|r| args.config(*r)).collect();
    let description = format!(
        "idemcalc simulate at {}/s{}, seed {}.",
        crate::format::human_count(args.rate),
        args.rush_rate
            .map(|r| format!(" with a daily rush at {}/s", crate::format::human_count(r)))
            .unwrap_or_default(),
        args.seed
    );
    let summary = crate::report::from_simulation(
        description,
        &configs,
        &args.arrivals()?,
        &dist,
        reports.to_vec(),
    )?;
    let html = crate::report::HtmlExporter.serialize(&summary)?;
    std::fs::write(path, html)
        .with_context(|| format!("{}: cannot write the report", path.display()))?;
    Ok(())
}

/// The human summary: each figure with its interval and the model's value beside it.
pub fn render(r: &SimReport) -> String {
    use crate::format::{human_bytes, human_count, usd};
    let mut out = format!(
        "Simulation at {}/s, retention {} (seed {}, {} replicate{}, {} simulated, {:.1} s wall)\n",
        human_count(r.rate),
        r.retention,
        r.seed,
        r.replicates,
        if r.replicates == 1 { "" } else { "s" },
        duration::format_secs(r.arrival_seconds.round()),
        r.wall_seconds
    );
    out.push_str(&format!(
        "Replayed {} intents ({} requests) on {}; ordinary calls sampled at {:.3} %, timed-out calls at {:.1} %\n\n",
        human_count(r.replayed_intents as f64),
        human_count(r.replayed_requests as f64),
        r.store,
        r.sample_ordinary * 100.0,
        r.sample_timed_out * 100.0
    ));
    out.push_str(&format!(
        "{:<32} {:>14} {:>27} {:>14}\n",
        "figure", "measured", "95% interval", "model"
    ));
    let row = |name: &str, f: &replay::Figure, fmt: &dyn Fn(f64) -> String| {
        format!(
            "{:<32} {:>14} {:>27} {:>14}\n",
            name,
            fmt(f.estimate),
            format!("{} – {}", fmt(f.ci95_low), fmt(f.ci95_high)),
            fmt(f.analytic)
        )
    };
    let bytes = |v: f64| format!("{v:.0} B");
    let count = |v: f64| human_count(v);
    let gb = |v: f64| human_bytes(v);
    let per_day = |v: f64| {
        if v >= 100.0 {
            format!("{}/day", crate::format::thousands(v))
        } else {
            format!("{v:.1}/day")
        }
    };
    let money = |v: f64| format!("{}/day", usd(v));
    out.push_str(&row(
        "bytes per record",
        &r.bytes_per_record_measured,
        &bytes,
    ));
    out.push_str(&row(
        "records in the store (steady)",
        &r.store_records_steady,
        &count,
    ));
    out.push_str(&row("store size (steady)", &r.store_bytes_steady, &gb));
    out.push_str(&row("timed-out calls", &r.timed_out_per_day, &per_day));
    out.push_str(&row(
        "late arrivals after purge",
        &r.late_after_purge_per_day,
        &per_day,
    ));
    out.push_str(&row(
        "duplicate labels",
        &r.duplicate_labels_per_day,
        &per_day,
    ));
    out.push_str(&row(
        "money on duplicates",
        &r.duplicate_cost_per_day,
        &money,
    ));
    out.push_str(&row(
        "parcels left unlabelled",
        &r.unlabelled_per_day,
        &per_day,
    ));
    out.push_str("\nDetection signals (per day at full traffic)\n");
    let d = &r.detection;
    for (name, v) in [
        ("parcels with two labels", d.parcels_with_two_labels_per_day),
        (
            "requests carrying a purged key",
            d.purged_key_requests_per_day,
        ),
        ("replays to another caller", d.cross_caller_replays_per_day),
        (
            "invoice lines without a label",
            d.invoice_lines_without_label_per_day,
        ),
        (
            "takeovers while the owner runs",
            d.takeovers_while_running_per_day,
        ),
    ] {
        out.push_str(&format!("  {name:<34} {v:>12.1}\n"));
    }
    out.push_str("\nResponses (replayed, and per day at full traffic)\n");
    for o in &r.outcomes {
        out.push_str(&format!(
            "  {} {:<28} {:>10} {:>16}\n",
            o.status,
            o.code
                .clone()
                .unwrap_or_else(|| format!("{:?}", o.outcome).to_lowercase()),
            o.replayed,
            human_count(o.per_day)
        ));
    }
    let inv = &r.invariants;
    out.push_str(&format!(
        "\nInvariants: {} (integrity {}, most labels per parcel {}, completed keys without label {}, replays byte-identical {})\n\n",
        if inv.hold { "hold" } else { "BROKEN" },
        if inv.integrity_ok { "ok" } else { "FAILED" },
        inv.max_labels_per_parcel,
        inv.completed_without_label,
        if inv.replays_byte_identical { "yes" } else { "NO" }
    ));
    out
}
