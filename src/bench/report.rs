//! What a bench run reports: a JSON document with a schema version, and a table for people.

use super::BenchConfig;
use super::checkpoint::{CheckpointStats, Checkpoints};
use super::fill::Layout;
use super::mix::{Kind, PerKind};
use super::serve::Tally;
use crate::format::{latency, thousands};
use crate::store::group::GroupStats;
use crate::store::{Invariants, Synchronous};
use hdrhistogram::Histogram;
use serde::Serialize;
use std::fmt::Write as _;

/// Bumped when a field changes meaning or goes away; new fields do not bump it.
pub const SCHEMA_VERSION: u32 = 1;

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

/// The machine the run shared: a load average above the core count means other work competed.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    pub cores: usize,
    pub load_avg_1m_before: Option<f64>,
    pub load_avg_1m_after: Option<f64>,
}

impl Machine {
    pub fn now(load_before: Option<f64>) -> Self {
        Self {
            cores: std::thread::available_parallelism().map_or(1, |n| n.get()),
            load_avg_1m_before: load_before,
            load_avg_1m_after: load_average(),
        }
    }
}

/// The 1-minute load average, where the system reports one (Linux).
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
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
    /// Measured time per side; the two sides alternate in `slices` slices each.
    pub duration_s: f64,
    pub slices: u32,
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
    /// CreateLabel calls answered per second (every kind of the mix).
    pub creates_per_s: f64,
    pub baseline_creates_per_s: f64,
    /// Writer time per create, engine over baseline: 1.25 means the engine costs 25 % more than
    /// the bare SQL it runs. Meaningful at any rate, unlike a ratio of rates at a target rate.
    pub overhead_ratio: f64,
    /// `creates_per_s / baseline_creates_per_s`: the share of the baseline's rate reached (flat
    /// out; at a target rate both sides run at the target).
    pub rate_vs_baseline: f64,
    /// `sqlite:per_transaction`, `sqlite:group` or `postgres:per_transaction`.
    pub commit_mode: String,
    /// Ctrl-C stopped the run early: the figures cover `slices_run` of `config.slices` slices.
    pub interrupted: bool,
    pub slices_run: u32,
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
    pub slices: u32,
    pub slices_run: u32,
    pub fill_s: f64,
    pub engine: SideParts<'a>,
    pub baseline: SideParts<'a>,
    pub machine: Machine,
    pub store: StoreParts,
    pub wal_checkpointed: Option<bool>,
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
        let interrupted = p.slices_run < p.slices;
        Self {
            schema_version: SCHEMA_VERSION,
            // Checks only: an interrupted run whose checks passed is ok, and says it was
            // interrupted.
            ok: engine.ok() && baseline.ok(),
            creates_per_s: per_s(et),
            baseline_creates_per_s: per_s(bt),
            overhead_ratio: ratio(busy_us(et), busy_us(bt)),
            rate_vs_baseline: ratio(per_s(et), per_s(bt)),
            commit_mode: match c.group {
                None => format!("{kind}:per_transaction"),
                Some(_) => format!("{kind}:group"),
            },
            interrupted,
            slices_run: p.slices_run,
            measured_s_per_side: c.duration.as_secs_f64() * f64::from(p.slices_run)
                / f64::from(p.slices.max(1)),
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
                slices: p.slices,
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
            machine: p.machine,
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
    write_latencies(&mut out, r);
    let _ = writeln!(out);
    write_figures(&mut out, r);
    write_side_notes(&mut out, r);
    write_pgbench(&mut out, r);
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
        "{} workers, {rate}, {:.1} s per side in {} alternating slices, mix {}",
        c.workers, c.duration_s, c.slices, c.mix
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

/// Engine and baseline in aligned columns, so the two can be compared figure by figure.
fn write_latencies(out: &mut String, r: &Report) {
    let _ = writeln!(
        out,
        "{:<18}{:>11}{:>11}{:>11}{:>11}{:>11}{:>13}",
        "", "creates/s", "p50", "p99", "p99.9", "max", "busy/create"
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
    let _ = writeln!(
        out,
        "machine: {} cores, 1-minute load average {} before the run, {} after",
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
        "interrupted: measured {:.1} s of {:.1} s per side ({} of {} slices); the figures above cover only that part",
        r.measured_s_per_side, c.duration_s, r.slices_run, c.slices
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
