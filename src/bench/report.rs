//! What a bench run reports: a JSON document with a schema version, and a table for people.

use super::BenchConfig;
use super::ceiling::Ceiling;
use super::checkpoint::{CheckpointStats, Checkpoints};
use super::drive::Tally;
use super::fill::Layout;
use super::machine::Machine;
use super::mix::{Kind, PerKind};
use super::runs::{self, Comparison, MeanInterval, Resolution, Spread};
use crate::format::{latency, plural, thousands};
use crate::store::group::GroupStats;
use crate::store::{Invariants, Synchronous};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::fmt::Write as _;

/// Bumped when a field changes meaning or goes away; new fields do not bump it. 2: figures are
/// means over `--runs` runs, `creates_per_s` counts 201s that created a label only (not
/// replays, 409s or 422s), `config.slices`/`slices_run` became `config.runs`/`runs_done`.
/// 3: `ratio` is the geometric mean of the paired ratios with its interval on the log scale,
/// `comparison.change` the ratio of the geometric means − 1, `comparison.verdict` may be
/// `too_wide`, `ceiling.engine_share` the ratio of geometric means (issue 53).
pub const SCHEMA_VERSION: u32 = 3;

/// One run of one side.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunSample {
    /// 1 for the first run after the warm-up.
    pub run: u32,
    pub elapsed_s: f64,
    pub requests: u64,
    /// 201s that created a label (first runs and takeovers): what `creates_per_s` counts.
    pub creates: u64,
    pub replays: u64,
    pub conflicts: u64,
    pub reused: u64,
    pub errors: u64,
    pub creates_per_s: f64,
    pub replays_per_s: f64,
    /// 409s per second.
    pub conflicts_per_s: f64,
    /// 422s per second.
    pub reused_per_s: f64,
    pub errors_per_s: f64,
    pub p50_us: u64,
    pub p99_us: u64,
}

impl RunSample {
    pub(super) fn of(run: u32, t: &Tally) -> Self {
        let s = t.elapsed.as_secs_f64();
        let per_s = |n: u64| if s > 0.0 { n as f64 / s } else { 0.0 };
        Self {
            run,
            elapsed_s: s,
            requests: t.requests(),
            creates: t.created,
            replays: t.replayed,
            conflicts: t.conflicts,
            reused: t.reused,
            errors: t.errors,
            creates_per_s: per_s(t.created),
            replays_per_s: per_s(t.replayed),
            conflicts_per_s: per_s(t.conflicts),
            reused_per_s: per_s(t.reused),
            errors_per_s: per_s(t.errors),
            p50_us: t.latency_us.value_at_quantile(0.50),
            p99_us: t.latency_us.value_at_quantile(0.99),
        }
    }
}

/// A side's runs together: the spread of creates/s and of p50/p99, and the mean rates of the
/// other answers.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideSummary {
    pub creates_per_s: Spread,
    /// The mean creates/s with its 95 % interval (Student t over the runs); no interval from
    /// one run.
    pub creates_per_s_ci95: MeanInterval,
    pub p50_us: Spread,
    pub p99_us: Spread,
    pub replays_per_s: f64,
    pub conflicts_per_s: f64,
    pub reused_per_s: f64,
    pub errors_per_s: f64,
}

impl SideSummary {
    pub fn of(samples: &[RunSample]) -> Self {
        let spread =
            |f: &dyn Fn(&RunSample) -> f64| Spread::of(&samples.iter().map(f).collect::<Vec<_>>());
        Self {
            creates_per_s: spread(&|r| r.creates_per_s),
            creates_per_s_ci95: runs::mean_interval(
                &samples.iter().map(|r| r.creates_per_s).collect::<Vec<_>>(),
            ),
            p50_us: spread(&|r| r.p50_us as f64),
            p99_us: spread(&|r| r.p99_us as f64),
            replays_per_s: spread(&|r| r.replays_per_s).mean,
            conflicts_per_s: spread(&|r| r.conflicts_per_s).mean,
            reused_per_s: spread(&|r| r.reused_per_s).mean,
            errors_per_s: spread(&|r| r.errors_per_s).mean,
        }
    }
}

/// Every run's samples, in the order they ran (engine run i just before baseline run i).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunsView {
    pub warmup_s: f64,
    pub engine: Vec<RunSample>,
    pub baseline: Vec<RunSample>,
}

#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    pub p50: u64,
    pub p99: u64,
    pub p99_9: u64,
    pub max: u64,
    pub mean: f64,
}

impl Percentiles {
    fn of(h: &Histogram<u64>) -> Self {
        Self {
            p50: h.value_at_quantile(0.50),
            p99: h.value_at_quantile(0.99),
            p99_9: h.value_at_quantile(0.999),
            max: h.max(),
            mean: h.mean(),
        }
    }
}

/// The checks made on a store at the end of a run.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InvariantCheck {
    pub integrity_ok: bool,
    pub completed_without_label: u64,
    pub max_labels_per_parcel: u64,
    /// Labels in the store: the pre-filled ones plus one per 201 given to a client.
    pub labels_stored: u64,
    pub labels_expected: u64,
    pub ok: bool,
}

impl InvariantCheck {
    pub fn new(inv: Invariants, labels_stored: u64, labels_expected: u64) -> Self {
        let ok = inv.integrity_ok
            && inv.completed_without_label == 0
            && inv.max_labels_per_parcel <= 1
            && labels_stored == labels_expected;
        Self {
            integrity_ok: inv.integrity_ok,
            completed_without_label: inv.completed_without_label,
            max_labels_per_parcel: inv.max_labels_per_parcel,
            labels_stored,
            labels_expected,
            ok,
        }
    }
}

/// One side of the comparison.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SideReport {
    pub store: String,
    pub requests: u64,
    pub by_kind: PerKind<u64>,
    pub elapsed_s: f64,
    /// Writer time (serving and committing, not waiting) per request.
    pub busy_us_per_create: f64,
    /// Answers that were not what the kind of request must get.
    pub unexpected_answers: u64,
    /// Requests answered with an error (including answers withheld because a batch was lost).
    pub error_answers: u64,
    pub lost_answers: u64,
    pub first_problem: Option<String>,
    /// Takeovers sent as first runs because the pool of abandoned keys ran out.
    pub takeovers_short: u64,
    pub group_commit: Option<GroupStats>,
    /// The background checkpointer's work; `null` when checkpoints ran inline.
    pub checkpoints: Option<CheckpointStats>,
    pub invariants: InvariantCheck,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct GroupPolicyView {
    pub max_batch: u32,
    pub max_wait_us: u64,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ConfigView {
    pub workers: u32,
    /// `null`: flat out.
    pub rate_per_s: Option<f64>,
    /// Measured time of each run of each side; the sides alternate, `runs` runs each.
    pub duration_s: f64,
    pub runs: u32,
    pub mix: String,
    pub synchronous: Synchronous,
    /// `null`: every transaction commits on its own.
    pub group_commit: Option<GroupPolicyView>,
    pub checkpoints: Checkpoints,
    pub layout: Layout,
    pub fill_s: f64,
    /// True when the stores were kept (`--store`); false for a temp dir removed afterwards.
    pub stores_kept: bool,
    /// `sqlite`, `postgres` or `redis`.
    pub store_kind: String,
    /// PostgreSQL or Redis connections per side, one writer each; `null` on SQLite (one writer).
    pub pool_size: Option<u32>,
    /// PostgreSQL: the key table's partition range in ms with `--sweeper partitions`; `null`
    /// for the seed's table.
    pub partition_period_ms: Option<i64>,
}

/// The result of a run. The headline figures come first.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Report {
    pub schema_version: u32,
    /// Every check passed: expected answers, no errors, invariants on both stores.
    pub ok: bool,
    /// 201s that created a label per second (first runs and takeovers; not replays, 409s or
    /// 422s), the mean over the runs.
    pub creates_per_s: f64,
    pub baseline_creates_per_s: f64,
    /// Engine creates/s over the baseline's: the geometric mean of the paired runs' ratios with
    /// a Student t 95 % interval on their logs, exponentiated (so above 0).
    pub ratio: MeanInterval,
    /// Whether `ratio`'s interval is narrow enough to tell a 5 % difference, and the paired
    /// runs that would make it so; `None` with one run.
    pub ratio_resolution: Option<Resolution>,
    pub engine_summary: SideSummary,
    pub baseline_summary: SideSummary,
    /// The store's own limit, measured before the runs.
    pub ceiling: Option<Ceiling>,
    /// Why there is no ceiling, when there is none.
    pub ceiling_note: Option<String>,
    /// Why the figures should not be trusted yet (wide spread, a loaded machine).
    pub warnings: Vec<String>,
    /// `--baseline FILE`: this run against a saved one.
    pub comparison: Option<Comparison>,
    pub runs: RunsView,
    /// Writer time per create, engine over baseline: 1.25 means the engine costs 25 % more than
    /// the bare SQL it runs. Meaningful at any rate, unlike a ratio of rates at a target rate.
    pub overhead_ratio: f64,
    /// `ratio.mean`: the share of the baseline's rate reached (flat out; at a target rate both
    /// sides run at the target).
    pub rate_vs_baseline: f64,
    /// `sqlite:per_transaction`, `sqlite:group` or `postgres:per_transaction`.
    pub commit_mode: String,
    /// Ctrl-C stopped the run early: the figures cover `runs_done` of `config.runs` runs.
    pub interrupted: bool,
    pub runs_done: u32,
    /// Measured time per side that the figures cover (all of `config.duration_s` unless
    /// interrupted).
    pub measured_s_per_side: f64,
    /// SQLite: both WALs were checkpointed into their database files (TRUNCATE) at the end.
    pub wal_checkpointed: Option<bool>,
    /// PostgreSQL: `pgbench` running the seed's statements on a third store with `--pool`
    /// clients, for `duration` rounded up to whole seconds.
    pub pgbench: Option<super::pg::PgbenchReport>,
    /// Why there is no pgbench figure, when there is none on PostgreSQL.
    pub pgbench_note: Option<String>,
    pub latency_us: Percentiles,
    pub baseline_latency_us: Percentiles,
    /// How late the clients sent requests (part of the latencies above): when its p99 nears
    /// theirs, the load generator was starved and the tail says more about the machine.
    pub client_send_lag_us: Percentiles,
    pub config: ConfigView,
    pub engine: SideReport,
    pub baseline: SideReport,
    pub machine: Machine,
    /// `--per-statement`: each statement's latency over the measured runs, per side.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub per_statement: Option<super::statements::PerStatement>,
}

pub(super) type SideParts<'a> = (
    &'a Tally,
    Option<GroupStats>,
    Option<CheckpointStats>,
    InvariantCheck,
);

/// What the store kind adds to a run.
pub(super) enum StoreParts {
    Sqlite,
    Postgres(PgParts),
    Redis { pool_size: u32 },
}

/// What a PostgreSQL run adds.
pub(super) struct PgParts {
    pub pool_size: u32,
    /// (clients, seconds, creates/s, failed, scripts), or why pgbench did not run.
    pub pgbench: Result<(u32, u64, f64, u64, String), String>,
}

pub(super) struct Parts<'a> {
    pub config: &'a BenchConfig,
    pub layout: &'a Layout,
    pub engine_store: String,
    pub baseline_store: String,
    pub kept: bool,
    pub runs: u32,
    pub runs_done: u32,
    pub warmup_s: f64,
    pub engine_runs: Vec<RunSample>,
    pub baseline_runs: Vec<RunSample>,
    pub ceiling: Option<Ceiling>,
    pub ceiling_note: Option<String>,
    pub fill_s: f64,
    pub engine: SideParts<'a>,
    pub baseline: SideParts<'a>,
    pub machine: Machine,
    pub store: StoreParts,
    pub wal_checkpointed: Option<bool>,
    pub per_statement: Option<super::statements::PerStatement>,
}

fn per_s(t: &Tally) -> f64 {
    match t.elapsed.as_secs_f64() {
        s if s > 0.0 => t.requests() as f64 / s,
        _ => 0.0,
    }
}

fn busy_us(t: &Tally) -> f64 {
    match t.requests() {
        0 => 0.0,
        n => t.busy.as_secs_f64() * 1e6 / n as f64,
    }
}

fn ratio(a: f64, b: f64) -> f64 {
    if b > 0.0 { a / b } else { 0.0 }
}

fn side(store: String, (t, group, checkpoints, inv): SideParts<'_>) -> SideReport {
    SideReport {
        store,
        requests: t.requests(),
        by_kind: t.by_kind,
        elapsed_s: t.elapsed.as_secs_f64(),
        busy_us_per_create: busy_us(t),
        unexpected_answers: t.unexpected,
        error_answers: t.errors,
        lost_answers: t.lost_answers,
        first_problem: t.first_problem.clone(),
        takeovers_short: t.takeovers_short,
        group_commit: group,
        checkpoints,
        invariants: inv,
    }
}

impl SideReport {
    fn ok(&self) -> bool {
        self.unexpected_answers == 0
            && self.error_answers == 0
            && self.first_problem.is_none()
            && self.invariants.ok
    }
}

impl Report {
    pub(super) fn build(p: Parts<'_>) -> Self {
        let (et, bt) = (p.engine.0, p.baseline.0);
        let engine = side(p.engine_store, p.engine);
        let baseline = side(p.baseline_store, p.baseline);
        let c = p.config;
        let (kind, pool_size) = match &p.store {
            StoreParts::Sqlite => ("sqlite", None),
            StoreParts::Postgres(pg) => ("postgres", Some(pg.pool_size)),
            StoreParts::Redis { pool_size } => ("redis", Some(*pool_size)),
        };
        let (pgbench, pgbench_note) = match &p.store {
            StoreParts::Sqlite | StoreParts::Redis { .. } => (None, None),
            StoreParts::Postgres(pg) => match &pg.pgbench {
                Ok((clients, duration_s, tps, failed, scripts)) => (
                    Some(super::pg::PgbenchReport {
                        clients: *clients,
                        duration_s: *duration_s,
                        creates_per_s: *tps,
                        failed: *failed,
                        engine_vs_pgbench: ratio(per_s(et), *tps),
                        baseline_vs_pgbench: ratio(per_s(bt), *tps),
                        scripts: scripts.clone(),
                    }),
                    None,
                ),
                Err(why) => (None, Some(why.clone())),
            },
        };
        let interrupted = p.runs_done < p.runs;
        let engine_summary = SideSummary::of(&p.engine_runs);
        let baseline_summary = SideSummary::of(&p.baseline_runs);
        let creates = |v: &[RunSample]| v.iter().map(|r| r.creates_per_s).collect::<Vec<_>>();
        let (engine_creates, baseline_creates) =
            (creates(&p.engine_runs), creates(&p.baseline_runs));
        let paired = runs::paired_ratio(&engine_creates, &baseline_creates);
        let ratio_resolution = Resolution::of(
            &paired,
            &[runs::paired_logs(&engine_creates, &baseline_creates).sd],
            runs::RESOLUTION,
        );
        let machine = p.machine;
        let warnings = runs::noise_warnings(
            &engine_summary.creates_per_s,
            &baseline_summary.creates_per_s,
            &machine.before(),
        );
        Self {
            schema_version: SCHEMA_VERSION,
            // Checks only: an interrupted run whose checks passed is ok, and says it was
            // interrupted.
            ok: engine.ok() && baseline.ok(),
            creates_per_s: engine_summary.creates_per_s.mean,
            baseline_creates_per_s: baseline_summary.creates_per_s.mean,
            ratio: paired,
            ratio_resolution,
            engine_summary,
            baseline_summary,
            ceiling: p.ceiling,
            ceiling_note: p.ceiling_note,
            warnings,
            comparison: None,
            runs: RunsView {
                warmup_s: p.warmup_s,
                engine: p.engine_runs,
                baseline: p.baseline_runs,
            },
            overhead_ratio: ratio(busy_us(et), busy_us(bt)),
            rate_vs_baseline: paired.mean,
            commit_mode: match c.group {
                None => format!("{kind}:per_transaction"),
                Some(_) => format!("{kind}:group"),
            },
            interrupted,
            runs_done: p.runs_done,
            measured_s_per_side: c.duration.as_secs_f64() * f64::from(p.runs_done),
            wal_checkpointed: p.wal_checkpointed,
            pgbench,
            pgbench_note,
            latency_us: Percentiles::of(&et.latency_us),
            baseline_latency_us: Percentiles::of(&bt.latency_us),
            client_send_lag_us: {
                let mut lag = et.send_lag_us.clone();
                let _ = lag.add(&bt.send_lag_us);
                Percentiles::of(&lag)
            },
            config: ConfigView {
                workers: c.workers,
                rate_per_s: c.rate_per_s,
                duration_s: c.duration.as_secs_f64(),
                runs: p.runs,
                mix: c.mix.to_string(),
                synchronous: c.synchronous,
                group_commit: c.group.map(|g| GroupPolicyView {
                    max_batch: g.max_batch,
                    max_wait_us: g.max_wait.as_micros() as u64,
                }),
                checkpoints: c.checkpoints,
                layout: *p.layout,
                fill_s: p.fill_s,
                stores_kept: p.kept,
                store_kind: kind.to_string(),
                pool_size,
                partition_period_ms: match c.sweeper {
                    crate::store::Sweeper::Partitions { period_ms } => Some(period_ms),
                    crate::store::Sweeper::Delete => None,
                },
            },
            engine,
            baseline,
            machine,
            per_statement: p.per_statement,
        }
    }
}

fn sync_name(s: Synchronous) -> &'static str {
    match s {
        Synchronous::Off => "off",
        Synchronous::Normal => "normal",
        Synchronous::Full => "full",
    }
}

fn check_line(c: &InvariantCheck) -> String {
    format!(
        "integrity {}, completed without label {}, max labels per parcel {}, labels {} of {} expected: {}",
        if c.integrity_ok { "ok" } else { "FAILED" },
        c.completed_without_label,
        c.max_labels_per_parcel,
        thousands(c.labels_stored as f64),
        thousands(c.labels_expected as f64),
        if c.ok { "ok" } else { "FAILED" }
    )
}

/// The report as a table for a terminal. Written in the order a reader checks a run: what ran,
/// how fast, what went wrong, whether the stores hold, so each part below is one of those.
pub fn render_table(r: &Report) -> String {
    let mut out = String::new();
    write_setup(&mut out, &r.config);
    let _ = writeln!(out);
    write_runs(&mut out, r);
    let _ = writeln!(out);
    write_latencies(&mut out, r);
    let _ = writeln!(out);
    write_figures(&mut out, r);
    write_side_notes(&mut out, r);
    write_pgbench(&mut out, r);
    if let Some(p) = &r.per_statement {
        super::statements::render(p, &mut out);
    }
    let _ = writeln!(out);
    write_checks(&mut out, r);
    write_interruption(&mut out, r);
    let _ = writeln!(out, "result: {}", if r.ok { "ok" } else { "FAILED" });
    out
}

/// The store, its durability and commit policy first: a figure means nothing without them.
fn write_setup(out: &mut String, c: &ConfigView) {
    let rate = c.rate_per_s.map_or("flat out".to_string(), |x| {
        format!("{}/s open loop", thousands(x))
    });
    let commit = match &c.group_commit {
        None => "each transaction commits on its own".to_string(),
        Some(g) => format!(
            "group commit (batch {}, max wait {})",
            g.max_batch,
            latency(g.max_wait_us)
        ),
    };
    let checkpoints = match c.checkpoints {
        Checkpoints::Background => "checkpoints in the background",
        Checkpoints::Inline => "checkpoints inline",
        Checkpoints::Deferred => "checkpoints deferred until after the run (diagnostic)",
    };
    match (c.store_kind.as_str(), c.pool_size) {
        ("redis", Some(pool)) => {
            let _ = writeln!(
                out,
                "idemcalc bench: Redis key records, labels in SQLite WAL (synchronous={}), {pool} connections (one writer each), {commit}",
                sync_name(c.synchronous)
            );
        }
        (_, Some(pool)) => {
            let _ = writeln!(
                out,
                "idemcalc bench: PostgreSQL{}, synchronous_commit={}, pool of {pool} connections (one writer each), {commit}",
                match c.partition_period_ms {
                    Some(ms) => format!(
                        " (key table partitioned by expiry, {} per partition)",
                        crate::duration::format_secs(ms as f64 / 1000.0)
                    ),
                    None => String::new(),
                },
                if c.synchronous == Synchronous::Off {
                    "off"
                } else {
                    "on"
                }
            );
        }
        (_, None) => {
            let _ = writeln!(
                out,
                "idemcalc bench: SQLite WAL, synchronous={}, {checkpoints}, {commit}",
                sync_name(c.synchronous)
            );
        }
    }
    let _ = writeln!(
        out,
        "{}, {rate}, {} of {:.1} s per side alternating engine and baseline, mix {}",
        plural(u64::from(c.workers), "worker", "workers"),
        plural(u64::from(c.runs), "run", "runs"),
        c.duration_s,
        c.mix
    );
    let _ = writeln!(
        out,
        "stores pre-filled with {} completed keys, {} held, {} abandoned ({:.1} s)",
        thousands(c.layout.completed as f64),
        thousands(c.layout.held as f64),
        thousands(c.layout.lease_expired as f64),
        c.fill_s
    );
}

/// `x ± σ` for a rate.
fn rate_pm(s: &Spread) -> String {
    format!("{} ± {}", thousands(s.mean), thousands(s.sd))
}

fn latency_pm(s: &Spread) -> String {
    format!(
        "{} ± {}",
        latency(s.mean.round() as u64),
        latency(s.sd.round() as u64)
    )
}

/// Units per create, whole when it is.
fn per_create(k: f64) -> String {
    if (k - k.round()).abs() < 1e-9 {
        format!("{k:.0}")
    } else {
        format!("{k:.2}")
    }
}

/// The runs: each figure's spread per side, the paired ratio with its interval, the other
/// answers per second, the store's ceiling, and what makes the figures untrustworthy.
fn write_runs(out: &mut String, r: &Report) {
    let _ = writeln!(
        out,
        "{} of {} per side after a {:.1} s warm-up of each",
        r.runs_done,
        plural(u64::from(r.config.runs), "run", "runs"),
        r.runs.warmup_s
    );
    let _ = writeln!(
        out,
        "{:<20}{:>24}{:>11}{:>11}{:>11}",
        "", "mean ± σ", "min", "median", "max"
    );
    for (name, s) in [
        ("engine", &r.engine_summary),
        ("baseline", &r.baseline_summary),
    ] {
        let c = &s.creates_per_s;
        let _ = writeln!(
            out,
            "{:<20}{:>24}{:>11}{:>11}{:>11}",
            format!("{name} creates/s"),
            rate_pm(c),
            thousands(c.min),
            thousands(c.median),
            thousands(c.max)
        );
        for (what, l) in [("p50", &s.p50_us), ("p99", &s.p99_us)] {
            let us = |x: f64| latency(x.round() as u64);
            let _ = writeln!(
                out,
                "{:<20}{:>24}{:>11}{:>11}{:>11}",
                format!("{name} {what}"),
                latency_pm(l),
                us(l.min),
                us(l.median),
                us(l.max)
            );
        }
    }
    let q = &r.ratio;
    let interval = match runs::ratio_interval_text(q) {
        Some(text) => format!(
            ", {text}{}",
            r.ratio_resolution
                .map_or(String::new(), |res| res.advice("paired runs"))
        ),
        None => " (one run: no interval; give --runs 2 or more)".to_string(),
    };
    let _ = writeln!(out, "engine / baseline creates/s: {:.2}{interval}", q.mean);
    for (name, s) in [
        ("engine", &r.engine_summary),
        ("baseline", &r.baseline_summary),
    ] {
        let _ = writeln!(
            out,
            "{name} per second: {} creates, beside them {} replays, {} in progress (409), {} key reused (422), {} errors",
            thousands(s.creates_per_s.mean),
            thousands(s.replays_per_s),
            thousands(s.conflicts_per_s),
            thousands(s.reused_per_s),
            thousands(s.errors_per_s)
        );
    }
    match (&r.ceiling, &r.ceiling_note) {
        (Some(c), _) => write_ceiling(out, c),
        (None, Some(note)) => {
            let _ = writeln!(out, "ceiling: {note}");
        }
        (None, None) => {}
    }
    for w in &r.warnings {
        let _ = writeln!(out, "{w}");
    }
    if let Some(c) = &r.comparison {
        write_comparison(out, c);
    }
}

/// The ceiling with the spread of its slices, and the engine's share of it with its interval,
/// called noise when the slices moved more than the runs may.
fn write_ceiling(out: &mut String, c: &Ceiling) {
    let per = if c.unit == "round trips" {
        "round trips"
    } else {
        "commits"
    };
    let conns = if c.connections > 1 {
        format!(", {} connections", c.connections)
    } else {
        String::new()
    };
    let s = &c.per_s_spread;
    let pct = |x: f64| format!("{:.0} %", x * 100.0);
    let share = match c.engine_share_ci95.bounds() {
        Some((l, h)) => format!(" (95 % interval {} to {})", pct(l), pct(h)),
        None => String::new(),
    };
    let _ = writeln!(
        out,
        "ceiling: {} {}/s ({} slices{conns}, min {}, max {}) ÷ {} {per} per create = {} creates/s; the engine reaches {} of it{share}",
        rate_pm(s),
        c.unit,
        s.n,
        thousands(s.min),
        thousands(s.max),
        per_create(c.per_create),
        thousands(c.creates_per_s),
        pct(c.engine_share)
    );
    if c.share_is_noise {
        let _ = writeln!(
            out,
            "  (the ceiling's slices spread σ {} of their mean: the engine's share of it is noise; rerun on a quieter machine)",
            pct(s.relative_sd())
        );
    }
    if let Some(note) = &c.note {
        let _ = writeln!(out, "  ({note})");
    }
}

/// This run against a saved one: the change with its interval (never below −100 %), the
/// verdict, and when the interval cannot tell, the runs that would.
fn write_comparison(out: &mut String, c: &Comparison) {
    let pct = runs::change_text;
    let interval = match (c.change_low, c.change_high) {
        (Some(l), Some(h)) => format!("95 % interval {} to {}", pct(l), pct(h)),
        _ => "no interval with one run a side".to_string(),
    };
    let advice = c
        .resolution
        .map_or(String::new(), |res| res.advice("runs a side"));
    let _ = writeln!(
        out,
        "against {}: engine creates/s {} now, {} then: {} ({interval}): {}{advice}",
        c.baseline_file,
        rate_pm(&c.current),
        rate_pm(&c.baseline),
        pct(c.change),
        c.verdict.words()
    );
    if let Some(limit) = c.fail_on_regression
        && c.fails
    {
        let _ = writeln!(
            out,
            "the regression is beyond --fail-on-regression {:.1} %: exit 1",
            limit * 100.0
        );
    }
}

/// Engine and baseline in aligned columns over all runs together, so the two can be compared
/// figure by figure, tail included.
fn write_latencies(out: &mut String, r: &Report) {
    let _ = writeln!(
        out,
        "{:<18}{:>11}{:>11}{:>11}{:>11}{:>11}{:>13}",
        "all runs together", "creates/s", "p50", "p99", "p99.9", "max", "busy/create"
    );
    for (name, per_s, l, s) in [
        ("engine", r.creates_per_s, &r.latency_us, &r.engine),
        (
            "raw SQL baseline",
            r.baseline_creates_per_s,
            &r.baseline_latency_us,
            &r.baseline,
        ),
    ] {
        let _ = writeln!(
            out,
            "{name:<18}{:>11}{:>11}{:>11}{:>11}{:>11}{:>13}",
            thousands(per_s),
            latency(l.p50),
            latency(l.p99),
            latency(l.p99_9),
            latency(l.max),
            format!("{:.1} µs", s.busy_us_per_create)
        );
    }
}

/// What qualifies the table: the overhead at any rate, how starved the clients were, and what
/// the engine actually served.
fn write_figures(out: &mut String, r: &Report) {
    let _ = writeln!(
        out,
        "overhead ratio {:.2} (engine writer time per create over the baseline's); rate {:.0} % of the baseline's",
        r.overhead_ratio,
        r.rate_vs_baseline * 100.0
    );
    let lag = &r.client_send_lag_us;
    let _ = writeln!(
        out,
        "client send lag (part of latency): p50 {}, p99 {}, max {}",
        latency(lag.p50),
        latency(lag.p99),
        latency(lag.max)
    );
    let kinds: Vec<String> = Kind::ALL
        .iter()
        .filter(|k| r.engine.by_kind.get(**k) > 0)
        .map(|k| {
            format!(
                "{} {}",
                k.name(),
                thousands(r.engine.by_kind.get(*k) as f64)
            )
        })
        .collect();
    let _ = writeln!(out, "engine requests: {}", kinds.join(", "));
    if let Some(g) = &r.engine.group_commit {
        let per = if g.commits > 0 {
            (g.logical_commits + g.logical_rollbacks) as f64 / g.commits as f64
        } else {
            0.0
        };
        let _ = writeln!(
            out,
            "engine batches: {} commits, {per:.1} logical transactions each on average, largest {}, lost {}",
            thousands(g.commits as f64),
            g.largest_batch,
            g.lost_batches
        );
    }
}

/// Lines only when a side went wrong or ran short, so a clean run stays short.
fn write_side_notes(out: &mut String, r: &Report) {
    for (name, s) in [("engine", &r.engine), ("baseline", &r.baseline)] {
        if s.takeovers_short > 0 {
            let _ = writeln!(
                out,
                "note: {name} ran out of abandoned keys; {} takeovers were sent as first runs",
                thousands(s.takeovers_short as f64)
            );
        }
        if s.unexpected_answers > 0 || s.error_answers > 0 {
            let _ = writeln!(
                out,
                "{name}: {} unexpected answers, {} errors",
                s.unexpected_answers, s.error_answers
            );
        }
        if let Some(p) = &s.first_problem {
            let _ = writeln!(out, "{name}: first problem: {p}");
        }
    }
}

/// PostgreSQL only: pgbench's figure, or why there is none, since a missing figure must not
/// read as a skipped check.
fn write_pgbench(out: &mut String, r: &Report) {
    if let Some(pg) = &r.pgbench {
        let _ = writeln!(
            out,
            "pgbench, the seed's statements as a custom script ({}), {} clients, {} s: {} creates/s; engine {:.2} of it, raw SQL baseline {:.2}{}",
            pg.scripts,
            pg.clients,
            pg.duration_s,
            thousands(pg.creates_per_s),
            pg.engine_vs_pgbench,
            pg.baseline_vs_pgbench,
            if pg.failed > 0 {
                format!(" ({} failed script runs)", pg.failed)
            } else {
                String::new()
            }
        );
    }
    if let Some(note) = &r.pgbench_note {
        let _ = writeln!(out, "pgbench: {note}");
    }
}

/// The stores' invariants and the machine's load: a fast run that broke a store, or shared the
/// machine, is not a result.
fn write_checks(out: &mut String, r: &Report) {
    let _ = writeln!(
        out,
        "invariants, engine store:   {}",
        check_line(&r.engine.invariants)
    );
    let _ = writeln!(
        out,
        "invariants, baseline store: {}",
        check_line(&r.baseline.invariants)
    );
    let m = &r.machine;
    let load = |x: Option<f64>| x.map_or("?".to_string(), |v| format!("{v:.2}"));
    let busy = m.cpu_busy_before.map_or(String::new(), |b| {
        format!(" ({:.0} % of the cores busy)", b * 100.0)
    });
    let _ = writeln!(
        out,
        "machine: {} cores, 1-minute load average {} before the run{busy}, {} after (the run's own load included)",
        m.cores,
        load(m.load_avg_1m_before),
        load(m.load_avg_1m_after),
    );
    if r.config.stores_kept {
        let _ = writeln!(out, "stores kept: {}, {}", r.engine.store, r.baseline.store);
    }
}

/// After Ctrl-C, says how much the figures cover and whether the stores were still checked.
fn write_interruption(out: &mut String, r: &Report) {
    if !r.interrupted {
        return;
    }
    let c = &r.config;
    let _ = writeln!(
        out,
        "interrupted: measured {:.1} s of {:.1} s per side ({} of {}); the figures above cover only that part",
        r.measured_s_per_side,
        c.duration_s * f64::from(c.runs),
        r.runs_done,
        plural(u64::from(c.runs), "run", "runs")
    );
    let _ = writeln!(
        out,
        "the stores were checked after the interruption{}",
        match r.wal_checkpointed {
            Some(true) => " and their WAL checkpointed into the database files",
            Some(false) => "; a WAL checkpoint was blocked",
            None => "",
        }
    );
}
