//! Synthetic traffic replayed against the real engine on a virtual clock (`idemcalc simulate`).
//!
//! # What is simulated
//! Intents (one label for one parcel) arrive as a Poisson process, each from one of `callers`
//! tenants that number their orders alike. Every attempt carries the client's 250 ms deadline: a
//! reply later than that is never heard, so timeouts come from the latencies (1 ms of network
//! each way and the carrier's log-normal latency) and from the network losing a request or its
//! reply (`network_loss`, an input; of the losses, a share `done_fraction` lose the reply after
//! the server ran it). A client that heard nothing retries after a delay drawn from the
//! late-retry distribution (time since the first attempt); a retry answered 409 or 503 is
//! retried with exponential backoff and full jitter, up to `max_attempts` attempts in all. The
//! sweeper runs every `sweep_period_s` in batches. Every request goes through the engine's real
//! transactions on a real store.
//!
//! # Scaling: a stratified, importance-sampled replay
//! Three days at 400/s is over 100 M records; replaying them all would take hours. Two strata:
//!
//! * ordinary intents (no timeout) are replayed with probability `s_o` (`--sample`), each
//!   standing for `1/s_o` intents. They determine the store's size.
//! * timed-out intents (their first attempt is lost, or its carrier latency outlasts the
//!   deadline: drawn from the upper part of the latency distribution), rare (0.1 %) but the
//!   main source of late arrivals and duplicates, are replayed with probability
//!   `s_t = min(1, s_o · boost)`, each standing for `1/s_t`.
//!   Their retry delay is drawn from a mixture that puts half the draws in the tail beyond
//!   `tail_from_s` (the part that outlives retention); each draw then carries the likelihood
//!   ratio `f(d)/g(d)` as an extra weight, which keeps every estimator unbiased.
//!
//! A figure that counts events (late arrivals, duplicates) is estimated as `Σ wᵢ / days` over
//! the replayed events, with variance `Σ wᵢ² / days²` (the events are independent draws);
//! the 95 % interval is the normal one on that variance, or Garwood's exact Poisson interval
//! when all weights are equal and the count is small; with no event at all, a one-sided bound.
//! The store's size is the weighted count of live records, `n_o/s_o + n_t/s_t`, averaged over
//! the steady window (after one retention has passed). Its variance is that of a time average
//! of an M/G/∞ count: the replayed records of each stratum are Poisson at any instant, and two
//! instants `h` apart share the records that live through both, a fraction `(1 - h/L)⁺` for a
//! record life `L` (retention plus the sweeper's mean lag). With `--sample 1` both strata are
//! replayed in full and the delay is drawn without tilting: a full-fidelity run, the ground
//! truth the sampled estimator is checked against (`tests/sim.rs`, `examples/coverage.rs`).

use super::flow::{Flow, Observed, Send};
use crate::carrier::CarrierResult;
use crate::carrier::{Carrier, CarrierConfig, Latency, SEED_CARRIER_LATENCY};
use crate::clock::{Millis, VirtualClock};
use crate::engine::{
    DiePoint, Engine, EngineConfig, EngineError, Outcome, RecordPlacement, Request,
};
use crate::model::{ModelParams, estimate};
use crate::store::{Store, StoreError};
use crate::traffic::{Arrivals, LoadProfile, RetryDelay};
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng};
use serde::{Deserialize, Serialize};
use statrs::distribution::{ChiSquared, ContinuousCDF, StudentsT};
use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// How a client names its intent: the seed's two sound ways, and the bug.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyPolicy {
    /// `label:ORDER:PARCEL:vN`, derived from the parcel: the seed's recommendation.
    #[default]
    Derived,
    /// A random UUID saved with the parcel before the first attempt.
    RandomSaved,
    /// A new random key on every attempt: the seed's first failure mode.
    NewPerAttempt,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct SimConfig {
    /// Label creates per second.
    pub rate_per_s: f64,
    /// How long arrivals run, in simulated seconds. `None`: one retention plus half a retention
    /// (at least 6 h) of steady state to measure.
    pub arrival_s: Option<f64>,
    /// Fraction of ordinary intents replayed; `None` picks one that replays about
    /// `target_ordinary` intents.
    pub sample: Option<f64>,
    /// How many ordinary intents the automatic sample aims for.
    pub target_ordinary: f64,
    /// How much more often timed-out intents are replayed than ordinary ones.
    pub timeout_boost: Option<f64>,
    /// Calls that time out at the seed's latencies ([`SEED_CARRIER_LATENCY`], 1 ms of network
    /// each way, a 250 ms deadline): the seed's 0.1 %. It sets the network-loss default (see
    /// [`SimConfig::network_loss`]); the timeouts themselves come from the latencies and the
    /// losses, so a slower carrier adds its own.
    pub timeout_fraction: f64,
    /// Fraction of calls the network loses (the request, or its reply); `None` calibrates it
    /// from `timeout_fraction`.
    pub network_loss_fraction: Option<f64>,
    /// One-way network delay between the client and the label service.
    pub network_ms: Millis,
    /// Of the calls the network loses, the share whose reply (not request) was lost, so the
    /// server had already run them.
    pub done_fraction: f64,
    pub key_policy: KeyPolicy,
    /// The client's deadline for one attempt.
    pub deadline_ms: Millis,
    /// Attempts per intent in the client's in-process retry loop, the first included.
    pub max_attempts: u32,
    pub backoff_base_ms: Millis,
    pub backoff_cap_ms: Millis,
    pub sweep_period_s: f64,
    pub sweep_batch: u32,
    /// Fraction of attempts killed at `crash_point` (a process crash).
    pub crash_fraction: f64,
    pub crash_point: DiePoint,
    /// Callers that share order numbering (two tenants of one label service). With per-caller
    /// keys they never collide; with global keys they do.
    pub callers: u32,
    pub engine: EngineConfig,
    pub carrier: CarrierConfig,
    pub seed: u64,
    /// Time-series points to record.
    pub series_points: u32,
    /// Keep every replayed request in `Tallies::request_log` (`simulate --request-log`).
    #[serde(skip)]
    pub request_log: bool,
}

impl Default for SimConfig {
    fn default() -> Self {
        let engine = EngineConfig::default();
        Self {
            rate_per_s: 400.0,
            arrival_s: None,
            sample: None,
            target_ordinary: 40_000.0,
            timeout_boost: None,
            timeout_fraction: 0.001,
            network_loss_fraction: None,
            network_ms: SEED_NETWORK_MS,
            done_fraction: 0.6,
            key_policy: KeyPolicy::Derived,
            deadline_ms: SEED_DEADLINE_MS,
            max_attempts: 4,
            backoff_base_ms: 100,
            backoff_cap_ms: 5_000,
            sweep_period_s: 60.0,
            sweep_batch: 10_000,
            crash_fraction: 0.0,
            crash_point: DiePoint::AfterCarrier,
            callers: 1,
            engine,
            carrier: CarrierConfig {
                latency: SEED_CARRIER_LATENCY,
                ..CarrierConfig::default()
            },
            seed: 1,
            series_points: 240,
            request_log: false,
        }
    }
}

/// The seed's client deadline for one call.
pub const SEED_DEADLINE_MS: Millis = 250;
/// One-way network delay between the client and the label service.
pub const SEED_NETWORK_MS: Millis = 1;

/// Share of calls that outlast `deadline_ms` on latency alone: the carrier's latency (rounded to
/// whole ms) above what the deadline leaves after the network's two legs.
pub fn p_slow(latency: &Latency, deadline_ms: Millis, network_ms: Millis) -> f64 {
    latency.p_above_ms(deadline_ms - 2 * network_ms)
}

#[derive(Debug, thiserror::Error)]
pub enum SimError {
    #[error("{field}: {message}")]
    Invalid {
        field: &'static str,
        message: String,
    },
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn invalid(field: &'static str, message: impl Into<String>) -> SimError {
    SimError::Invalid {
        field,
        message: message.into(),
    }
}

impl SimConfig {
    pub fn retention_s(&self) -> f64 {
        self.engine.retention_ms as f64 / 1000.0
    }

    pub fn arrival_s(&self) -> f64 {
        self.arrival_s
            .unwrap_or_else(|| self.retention_s() + (self.retention_s() / 2.0).max(6.0 * 3600.0))
    }

    /// The fraction of calls the network loses, request or reply.
    ///
    /// By default it is calibrated so that, at the seed's latencies, timeouts total
    /// `timeout_fraction`: the deadline leaves the carrier 250 − 2 × 1 = 248 ms; the seed's
    /// carrier is log-normal with median 30 ms and p99 100 ms, so σ = ln(100/30) / 2.326 =
    /// 0.5176, and a call outlasts the deadline when its latency rounds above 248 ms:
    /// P = 1 − Φ(ln(248.5/30) / 0.5176) = 1 − Φ(4.087) ≈ 2.2 × 10⁻⁵. The network then loses
    /// 0.001 − 0.000022 ≈ 0.000978 of calls, and 0.000978 + (1 − 0.000978) × 0.000022 = 0.1 %
    /// time out in all. The same loss with a slower carrier gives more timeouts: that is the
    /// point of deriving them.
    pub fn network_loss(&self) -> f64 {
        self.network_loss_fraction.unwrap_or_else(|| {
            let seed_slow = p_slow(&SEED_CARRIER_LATENCY, SEED_DEADLINE_MS, SEED_NETWORK_MS);
            ((self.timeout_fraction - seed_slow) / (1.0 - seed_slow)).max(0.0)
        })
    }

    /// Share of calls whose carrier latency alone outlasts the client's deadline.
    pub fn p_slow(&self) -> f64 {
        p_slow(&self.carrier.latency, self.deadline_ms, self.network_ms)
    }

    /// Share of first attempts that time out: lost by the network, or too slow. This is the
    /// timed-out stratum; hung carrier calls come on top ([`Self::expected_timeout_fraction`]).
    pub fn p_first_timeout(&self) -> f64 {
        let loss = self.network_loss();
        loss + (1.0 - loss) * self.p_slow()
    }

    /// Share of first attempts that go wrong: time out, or are killed (`crash_fraction`). This
    /// is the boosted stratum: a crash, like a timeout, is rare and is where late retries and
    /// duplicates come from, so it is replayed as often as timeouts are.
    pub fn p_first_bad(&self) -> f64 {
        let p = self.p_first_timeout();
        p + (1.0 - p) * self.crash_fraction
    }

    /// The share of calls expected to time out, for the model beside the simulation.
    pub fn expected_timeout_fraction(&self) -> f64 {
        let p = self.p_first_timeout();
        p + (1.0 - p) * self.carrier.hang_fraction
    }

    /// The ordinary sample fraction and the timed-out one.
    pub fn fractions(&self) -> (f64, f64) {
        let intents = self.rate_per_s * self.arrival_s();
        let s_o = self
            .sample
            .unwrap_or_else(|| (self.target_ordinary / intents).min(1.0));
        let boost = self.timeout_boost.unwrap_or_else(|| {
            // Aim for as many timed-out intents as ordinary ones, the rarer stratum then being
            // as well measured as the common one.
            (1.0 / self.p_first_bad().max(1e-9)).min(1.0 / s_o)
        });
        (s_o, (s_o * boost).min(1.0))
    }

    /// The small world of the ground-truth check (`tests/sim.rs`, `examples/coverage.rs`): cheap
    /// to replay at full fidelity (1 intent/s for 2 h), with every figure the check covers
    /// firing often enough to be measured: 2 % network loss, a 5 min retention and carrier
    /// window, 1 % of attempts killed after the carrier call.
    pub fn coverage_world() -> Self {
        let mut c = SimConfig {
            rate_per_s: 1.0,
            arrival_s: Some(2.0 * 3600.0),
            sample: Some(1.0),
            network_loss_fraction: Some(0.02),
            crash_fraction: 0.01,
            sweep_period_s: 10.0,
            series_points: 60,
            ..SimConfig::default()
        };
        c.engine.retention_ms = 300_000;
        c.carrier.window_ms = 300_000;
        c
    }

    /// Refuses impossible parameters before any work starts, naming the parameter.
    pub fn validate(&self) -> Result<(), SimError> {
        let frac = |v: f64| (0.0..=1.0).contains(&v);
        if !(self.rate_per_s > 0.0 && self.rate_per_s.is_finite()) {
            return Err(invalid(
                "--rate",
                format!("{} is not a positive rate", self.rate_per_s),
            ));
        }
        if !frac(self.timeout_fraction) {
            return Err(invalid(
                "--timeout-fraction",
                "must be a fraction between 0 and 1",
            ));
        }
        if let Some(l) = self.network_loss_fraction
            && !frac(l)
        {
            return Err(invalid(
                "--network-loss",
                "must be a fraction between 0 and 1",
            ));
        }
        if self.network_ms < 0 || self.deadline_ms <= 2 * self.network_ms {
            return Err(invalid(
                "--deadline",
                format!(
                    "{} ms leaves no time after the network's two legs of {} ms",
                    self.deadline_ms, self.network_ms
                ),
            ));
        }
        if !frac(self.done_fraction) {
            return Err(invalid(
                "--done-fraction",
                "must be a fraction between 0 and 1",
            ));
        }
        if !frac(self.crash_fraction) {
            return Err(invalid(
                "--crash-rate",
                "must be a fraction between 0 and 1",
            ));
        }
        if let Some(s) = self.sample
            && !(s > 0.0 && s <= 1.0)
        {
            return Err(invalid("--sample", format!("{s} is outside (0, 1]")));
        }
        if self.engine.retention_ms <= 0 {
            return Err(invalid("--retention", "must be longer than zero"));
        }
        if let Some(a) = self.arrival_s
            && (a.is_nan() || a <= 0.0)
        {
            return Err(invalid("--duration", "must be longer than zero"));
        }
        if self.max_attempts == 0 {
            return Err(invalid("--max-attempts", "must be at least 1"));
        }
        if self.sweep_batch == 0 || self.sweep_period_s.is_nan() || self.sweep_period_s <= 0.0 {
            return Err(invalid(
                "--sweep-batch",
                "the sweeper needs a batch and a period above zero",
            ));
        }
        if self.callers == 0 {
            return Err(invalid("--callers", "must be at least 1"));
        }
        Ok(())
    }
}

/// A figure measured by the simulation, with its 95 % interval and what the model predicts.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Figure {
    pub estimate: f64,
    pub ci95_low: f64,
    pub ci95_high: f64,
    pub analytic: f64,
}

/// Weighted event counts: Σw and Σw², and the raw count, per quantity.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Tally {
    pub n: u64,
    pub w: f64,
    pub w2: f64,
}

/// The one-sided 95 % upper bound on a Poisson mean when no event was seen: −ln 0.05.
const ZERO_EVENTS_BOUND: f64 = 2.995_732_274;

impl Tally {
    fn add(&mut self, w: f64) {
        self.n += 1;
        self.w += w;
        self.w2 += w * w;
    }

    fn merge(&mut self, o: &Tally) {
        self.n += o.n;
        self.w += o.w;
        self.w2 += o.w2;
    }

    /// Rate per day over `days`, with a 95 % interval. `unit_w` is the largest weight one
    /// replayed event of this kind can carry: with no event seen, the interval is the one-sided
    /// bound of about 3 such events, never a certain [0, 0].
    pub fn per_day(&self, days: f64, analytic: f64, unit_w: f64) -> Figure {
        let est = self.w / days;
        let (lo, hi) = if self.n == 0 {
            (0.0, ZERO_EVENTS_BOUND * unit_w / days)
        } else if self.n < 30
            && (self.w2 * self.n as f64 - self.w * self.w).abs() < 1e-6 * self.w * self.w
        {
            let (l, h) = garwood(self.n);
            let unit = self.w / self.n as f64 / days;
            (l * unit, h * unit)
        } else {
            let half = crate::stats::Z95 * self.w2.sqrt() / days;
            ((est - half).max(0.0), est + half)
        };
        Figure {
            estimate: est,
            ci95_low: lo,
            ci95_high: hi,
            analytic,
        }
    }
}

/// Garwood's exact 95 % interval for a Poisson count.
fn garwood(n: u64) -> (f64, f64) {
    let n = n as f64;
    let lo = if n == 0.0 {
        0.0
    } else {
        ChiSquared::new(2.0 * n)
            .map(|c| c.inverse_cdf(0.025) / 2.0)
            .unwrap_or(0.0)
    };
    let hi = ChiSquared::new(2.0 * n + 2.0)
        .map(|c| c.inverse_cdf(0.975) / 2.0)
        .unwrap_or(n);
    (lo, hi)
}

/// One time-series point.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesPoint {
    pub t_s: f64,
    /// Records in the store, scaled to full traffic.
    pub keys_estimated: f64,
    /// Records actually in the simulated store.
    pub keys_replayed: u64,
}

/// Counts by status and code, as replayed (unweighted) and scaled to full traffic.
#[derive(Debug, Clone, Serialize)]
pub struct OutcomeRow {
    pub status: u16,
    pub outcome: Outcome,
    pub code: Option<String>,
    pub replayed: u64,
    pub per_day: f64,
}

/// The signals the seed's "Detection" column asks for, per day at full traffic.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Detection {
    /// Parcels the carrier sold more than one label for.
    pub parcels_with_two_labels_per_day: f64,
    /// Requests that claimed a key the sweeper had purged. The engine flags them from a Bloom
    /// filter (the operator's cheap view, with false positives); this figure counts only the
    /// claims whose key is in the exact set of keys purged in the replay.
    pub purged_key_requests_per_day: f64,
    /// What the engine's Bloom filter flagged: the operator's alert, false positives included.
    pub purged_key_bloom_flags_per_day: f64,
    /// Replays handed to a caller other than the one whose request created the record.
    pub cross_caller_replays_per_day: f64,
    /// Carrier invoice lines with no label row behind them.
    pub invoice_lines_without_label_per_day: f64,
    /// Takeovers while the attempt that held the lease was still running.
    pub takeovers_while_running_per_day: f64,
    /// Every takeover of an expired lease (a dead attempt's, a timed-out carrier call's).
    pub takeovers_per_day: f64,
    /// Reconciliation: label rows committed while their key's completion was not (a crash
    /// between the two writes when they are not one transaction).
    pub labels_without_completed_key_per_day: f64,
    /// Reconciliation: completed 201 records whose label row is missing (a crash inside txn 2
    /// where the record and the label are not one transaction), read back at each crash, per
    /// day. The store's own end-of-run check (`invariants`) sees only those not yet purged.
    pub completed_keys_without_label_per_day: f64,
}

/// One replicate's raw tallies; replicates pool by adding them.
#[derive(Debug, Clone, Default)]
pub struct Tallies {
    pub days: f64,
    pub late: Tally,
    pub duplicates: Tally,
    pub unlabelled: Tally,
    pub purged_key_requests: Tally,
    /// Claims the engine's Bloom filter flagged as purged (false positives included).
    pub purged_key_flags: Tally,
    pub cross_caller: Tally,
    pub takeovers_running: Tally,
    pub takeovers: Tally,
    pub parcels_two_labels: Tally,
    pub invoice_without_label: Tally,
    pub labels_without_completed_key: Tally,
    /// Records a crash inside txn 2 left completed with a 201 whose label row never committed.
    pub completed_without_label: Tally,
    pub timed_out: Tally,
    pub retries: Tally,
    pub outcomes: BTreeMap<(u16, Outcome, Option<String>), Tally>,
    /// Steady-state weighted store size: sum and count of the sampled points, and the mean raw
    /// count for the interval.
    pub steady_keys_sum: f64,
    pub steady_points: u64,
    /// Sum over the steady points of the replayed records per stratum (ordinary, timed out).
    pub steady_raw_sum: [f64; 2],
    /// Spacing of the series points, for the variance of their average.
    pub series_every_s: f64,
    /// The store at the end of the arrivals, when there is no steady window to average.
    pub end_keys: f64,
    pub end_raw: [f64; 2],
    /// Bytes per record measured at points of the steady window (or, failing one, of the
    /// second half of the arrivals).
    pub bytes_per_record_samples: Vec<f64>,
    pub bytes_per_record: f64,
    /// Records in the store at each measurement of bytes per record: a store is measured in
    /// whole pages, which sets the smallest honest interval (see `bytes_per_record_figure`).
    pub bytes_per_record_records: Vec<u64>,
    pub series: Vec<SeriesPoint>,
    pub simulated_s: f64,
    pub replayed_requests: u64,
    pub replayed_intents: u64,
    pub invariant_max_labels_per_parcel: u64,
    pub invariant_replays_identical: bool,
    pub invariant_completed_without_label: u64,
    pub invariant_integrity_ok: bool,
    pub interrupted: bool,
    pub request_log: crate::sim::request_log::RequestLog,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stratum {
    Ordinary = 0,
    TimedOut = 1,
}

struct Intent {
    stratum: Stratum,
    caller: u32,
    order_id: i64,
    /// The key every attempt carries; `None` under [`KeyPolicy::NewPerAttempt`].
    key: Option<String>,
    /// How many intents this one stands for.
    weight: f64,
    /// The same without the likelihood ratio of the tilted delay: what a first-attempt
    /// timeout, which does not depend on the delay, stands for.
    base_weight: f64,
    attempts: u32,
    first_sent_ms: Millis,
    /// The attempt's retry delay from the late-retry distribution (timed-out intents).
    retry_delay_ms: Millis,
}

/// How a first attempt goes, decided by its stratum; later attempts draw theirs.
#[derive(Debug, Clone, Copy)]
enum Fate {
    /// The carrier answers within the deadline.
    InTime,
    /// The carrier's latency outlasts the deadline.
    Slow,
    /// The network loses the request (`ran` false) or the reply (`ran` true).
    Lost { ran: bool },
    /// In time, but the attempt is killed at the crash point.
    Crash,
    /// Whatever the carrier and the network do (retries).
    Drawn,
}

/// What is known about one request on the wire, kept until both the client and the server are
/// done with it (a slow attempt runs on after its client gave up).
struct SendInfo {
    intent: u64,
    /// The record's identity in the store: scoped caller column + NUL + key.
    record: String,
    caller: u32,
    order_id: i64,
    weight: f64,
    attempt: u32,
    first_sent_ms: Millis,
    claimed: bool,
    bought_label: bool,
    client_done: bool,
    server_done: bool,
}

pub struct Progress<'a> {
    /// Called now and then with the fraction of simulated time done.
    pub tick: &'a (dyn Fn(f64) + Sync),
    /// Set by a Ctrl-C handler: the run stops at the next event and reports how far it got.
    pub interrupted: &'a AtomicBool,
}

/// Scales an arrival process by `factor` (the thinning of a Poisson process is Poisson).
fn scaled(arrivals: &Arrivals, factor: f64) -> Arrivals {
    match arrivals {
        Arrivals::Constant { rate_per_s } => Arrivals::Constant {
            rate_per_s: rate_per_s * factor,
        },
        Arrivals::Profile(p) => LoadProfile::new(
            p.steps()
                .iter()
                .map(|s| (s.start_s, s.rate_per_s * factor))
                .collect(),
        )
        .map(Arrivals::Profile)
        .unwrap_or(Arrivals::Constant {
            rate_per_s: p.mean_rate_per_s() * factor,
        }),
    }
}

fn hash64(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

/// The first order number of every tenant: tenants number their orders alike, so with global
/// keys their derived keys meet.
const FIRST_ORDER_ID: i64 = 100_000_001;

/// The simulation of one replicate: the driver, the clients' state and the tallies.
struct Replay<'a> {
    cfg: &'a SimConfig,
    dist: &'a RetryDelay,
    flow: Flow,
    rng: StdRng,
    s_o: f64,
    s_t: f64,
    /// Share of first attempts that time out, of calls the network loses, and of calls whose
    /// carrier latency alone outlasts the deadline.
    p_first_timeout: f64,
    /// Share of first attempts that time out or crash: the boosted stratum.
    p_first_bad: f64,
    network_loss: f64,
    p_slow: f64,
    /// Tilted retry-delay draw: probability of drawing from the tail, where it starts, its mass.
    tilt_q: f64,
    tail_from_s: f64,
    tail_mass: f64,
    intents: HashMap<u64, Intent>,
    sends: HashMap<u64, SendInfo>,
    next_send: u64,
    /// The next order number of each tenant, per stratum (see [`Replay::arrive`]).
    next_order: Vec<[i64; 2]>,
    /// Live records per stratum, mirrored from claims and the sweeper's purged keys, so the
    /// weighted store size needs no query.
    live: HashMap<String, Stratum>,
    live_count: [u64; 2],
    /// Every record the sweeper purged and no request has claimed again: the exact set the
    /// engine's Bloom filter approximates.
    purged: HashSet<String>,
    first_body: HashMap<String, u64>,
    creator: HashMap<String, u32>,
    running: HashMap<String, u32>,
    /// Labels the carrier sold per (caller, order): the seed's "more than one label per parcel".
    sold: HashMap<(u32, i64), u32>,
    /// Label ids the carrier sold, with the weight of the intent that bought them.
    purchases: Vec<(String, f64)>,
    /// Records whose attempt died inside txn 2 after buying a label, to read back from the
    /// store before anything else happens (see [`Replay::inspect_crashes`]).
    crashed_in_txn2: Vec<(String, f64)>,
    /// The label ids that such records were left completed with, and their weights; checked
    /// against the labels table at the end of the run.
    completed_at_crash: Vec<(String, f64)>,
    t: Tallies,
}

impl<'a> Replay<'a> {
    /// Reads back each record whose attempt just died inside txn 2. On a store whose txn 2 is
    /// one transaction the crash rolled the completion back and the record is still started;
    /// where the record and the label are written separately (Redis) the record may already
    /// say 201 with a label that was never stored, and every retry is replayed that label.
    /// Read at once, before a retry or the sweeper touches the record; the labels table,
    /// which nothing purges, is checked at the end of the run.
    fn inspect_crashes(&mut self) -> Result<(), SimError> {
        for (record, w) in std::mem::take(&mut self.crashed_in_txn2) {
            let Some((caller, key)) = record.split_once('\u{0}') else {
                continue;
            };
            let Some(row) = self.flow.engine().store().get_key(caller, key)? else {
                continue;
            };
            if let Some(label_id) = row.replayed_label_id() {
                self.completed_at_crash.push((label_id, w));
            }
        }
        Ok(())
    }

    fn draw_delay(&mut self) -> (Millis, f64) {
        let d = if self.tilt_q > 0.0 && self.rng.random::<f64>() < self.tilt_q {
            let u = 1.0 - self.tail_mass + self.tail_mass * self.rng.random::<f64>();
            self.dist.quantile(u.min(1.0 - 1e-12))
        } else {
            self.dist
                .quantile(self.rng.random::<f64>().min(1.0 - 1e-12))
        };
        // The likelihood ratio f/g of the mixture g = (1 - q) f + q f·1[d > τ] / S(τ).
        let ratio = if self.tilt_q == 0.0 {
            1.0
        } else if d > self.tail_from_s {
            1.0 / ((1.0 - self.tilt_q) + self.tilt_q / self.tail_mass)
        } else {
            1.0 / (1.0 - self.tilt_q)
        };
        ((d * 1000.0).round() as Millis, ratio)
    }

    fn record_of(&mut self, caller: u32, key: &str) -> String {
        let caller = format!("fulfilment-{caller}");
        let scoped = self.flow.engine().scope(&caller).to_string();
        format!("{scoped}\u{0}{key}")
    }

    /// A carrier latency from the part of its distribution within (`slow` false) or beyond
    /// (`slow` true) what the deadline leaves it.
    fn carrier_latency(&mut self, slow: bool) -> Millis {
        let budget = self.cfg.deadline_ms - 2 * self.cfg.network_ms;
        let u: f64 = self.rng.random();
        let latency = &self.cfg.carrier.latency;
        if slow {
            latency
                .quantile_ms(1.0 - self.p_slow + u * self.p_slow)
                .max(budget + 1)
        } else {
            latency.quantile_ms(u * (1.0 - self.p_slow)).min(budget)
        }
    }

    /// Puts the next attempt of `intent_id` on the wire at `at_ms`.
    fn send(&mut self, intent_id: u64, at_ms: Millis, fate: Fate) {
        let Some(mut intent) = self.intents.remove(&intent_id) else {
            return;
        };
        intent.attempts += 1;
        if intent.attempts == 1 {
            intent.first_sent_ms = at_ms;
        } else {
            self.t.retries.add(intent.weight);
        }
        let key = match &intent.key {
            Some(k) => k.clone(),
            None => random_key(&mut self.rng),
        };
        let body = format!(
            r#"{{"order_id":{},"parcel_no":1,"label_version":1,"weight_g":1450,"service":"ground"}}"#,
            intent.order_id
        );
        let caller = format!("fulfilment-{}", intent.caller);
        let record = self.record_of(intent.caller, &key);
        self.next_send += 1;
        let id = self.next_send;
        let mut send = Send::new(id, Request::create_label(&caller, Some(&key), &body));
        self.t
            .request_log
            .sent(id, at_ms, &caller, &key, intent.weight);
        send.network_ms = self.cfg.network_ms;
        send.deadline_ms = Some(self.cfg.deadline_ms);
        let fate = match fate {
            Fate::Drawn if self.rng.random::<f64>() < self.network_loss => Fate::Lost {
                ran: self.rng.random::<f64>() < self.cfg.done_fraction,
            },
            f => f,
        };
        match fate {
            Fate::InTime | Fate::Crash => {
                send.carrier_latency_ms = Some(self.carrier_latency(false))
            }
            Fate::Slow => send.carrier_latency_ms = Some(self.carrier_latency(true)),
            Fate::Lost { ran } => {
                send.lose_request = !ran;
                send.lose_reply = ran;
            }
            Fate::Drawn => {}
        }
        // A first attempt's crash is decided by its stratum; later attempts draw theirs.
        let crash = match fate {
            Fate::Crash => true,
            _ if intent.attempts == 1 => false,
            _ => {
                self.cfg.crash_fraction > 0.0 && self.rng.random::<f64>() < self.cfg.crash_fraction
            }
        };
        if crash {
            send.die = Some(self.cfg.crash_point);
        }
        self.sends.insert(
            id,
            SendInfo {
                intent: intent_id,
                record,
                caller: intent.caller,
                order_id: intent.order_id,
                weight: intent.weight,
                attempt: intent.attempts,
                first_sent_ms: intent.first_sent_ms,
                claimed: false,
                bought_label: false,
                client_done: false,
                // A lost request never reaches the server.
                server_done: send.lose_request,
            },
        );
        self.intents.insert(intent_id, intent);
        self.flow.send(at_ms, send);
    }

    /// Forgets a request once neither its client nor the server has anything more to say.
    fn settle(&mut self, id: u64) {
        if self
            .sends
            .get(&id)
            .is_some_and(|i| i.client_done && i.server_done)
        {
            self.sends.remove(&id);
        }
    }

    /// A client that heard nothing by its deadline retries after a delay from the late-retry
    /// distribution, counted from its first attempt for the first retry and from the attempt
    /// that went silent after that.
    fn retry_after_silence(&mut self, intent_id: u64, sent_ms: Millis, now_ms: Millis) {
        let Some(intent) = self.intents.get(&intent_id) else {
            return;
        };
        if intent.attempts >= self.cfg.max_attempts {
            let w = intent.weight;
            self.t.unlabelled.add(w);
            self.intents.remove(&intent_id);
            return;
        }
        let (from_ms, delay) = if intent.attempts == 1 && intent.stratum == Stratum::TimedOut {
            (intent.first_sent_ms, intent.retry_delay_ms)
        } else {
            let d = self
                .dist
                .quantile(self.rng.random::<f64>().min(1.0 - 1e-12));
            (sent_ms, (d * 1000.0) as Millis)
        };
        self.send(intent_id, (from_ms + delay).max(now_ms), Fate::Drawn);
    }

    fn arrive(&mut self, now_ms: Millis, intent_id: u64) {
        let timed_out_share = {
            let to = self.p_first_bad * self.s_t;
            let or = (1.0 - self.p_first_bad) * self.s_o;
            if to + or > 0.0 { to / (to + or) } else { 0.0 }
        };
        let timed_out = self.rng.random::<f64>() < timed_out_share;
        // Each tenant is its own Poisson stream (a random split of one is), and numbers its own
        // orders: its orders never share an id, while two tenants' do. Numbering runs per
        // stratum (even ids ordinary, odd timed out), so the k-th replayed order of one tenant
        // meets the k-th of another with the same weight, as every order meets its namesake
        // at full traffic; across strata the weights would not match.
        let caller = self.rng.random::<u32>() % self.cfg.callers;
        let stratum_index = usize::from(timed_out);
        let n = &mut self.next_order[caller as usize][stratum_index];
        let order_id = FIRST_ORDER_ID + 2 * *n + stratum_index as i64;
        *n += 1;
        let (stratum, weight, retry_delay_ms) = if timed_out {
            let (d, ratio) = self.draw_delay();
            (Stratum::TimedOut, ratio / self.s_t, d)
        } else {
            (Stratum::Ordinary, 1.0 / self.s_o, 0)
        };
        let base_weight = if timed_out {
            1.0 / self.s_t
        } else {
            1.0 / self.s_o
        };
        let key = match self.cfg.key_policy {
            KeyPolicy::Derived => Some(crate::payload::derived_key(
                order_id,
                &self.cfg.engine.payload.key_bytes,
            )),
            KeyPolicy::RandomSaved => Some(random_key(&mut self.rng)),
            KeyPolicy::NewPerAttempt => None,
        };
        self.intents.insert(
            intent_id,
            Intent {
                stratum,
                caller,
                order_id,
                key,
                weight,
                base_weight,
                attempts: 0,
                first_sent_ms: now_ms,
                retry_delay_ms,
            },
        );
        let u = self.rng.random::<f64>() * self.p_first_bad;
        let fate = if !timed_out {
            Fate::InTime
        } else if u < self.network_loss {
            Fate::Lost {
                ran: self.rng.random::<f64>() < self.cfg.done_fraction,
            }
        } else if u < self.p_first_timeout {
            Fate::Slow
        } else {
            Fate::Crash
        };
        self.send(intent_id, now_ms, fate);
    }

    fn observe(&mut self, o: Observed) {
        match o {
            Observed::Arrived { id, at_ms } => {
                let Some(info) = self.sends.get(&id) else {
                    return;
                };
                // A retry that reaches the engine when its record is gone (purged, or never
                // written because the request was lost) more than one retention after the first
                // attempt: every such retry, not only the first of each call.
                if info.attempt > 1
                    && at_ms - info.first_sent_ms > self.cfg.engine.retention_ms
                    && !self.live.contains_key(&info.record)
                {
                    let w = info.weight;
                    self.t.late.add(w);
                }
            }
            Observed::Claimed { id, took_over, .. } => {
                let Some(info) = self.sends.get_mut(&id) else {
                    return;
                };
                info.claimed = true;
                let record = info.record.clone();
                let w = info.weight;
                let intent = info.intent;
                let runs = self.running.entry(record.clone()).or_insert(0);
                if took_over {
                    self.t.takeovers.add(w);
                    if *runs > 0 {
                        self.t.takeovers_running.add(w);
                    }
                }
                *runs += 1;
                if !took_over {
                    if self.purged.remove(&record) {
                        self.t.purged_key_requests.add(w);
                    }
                    let stratum = self
                        .intents
                        .get(&intent)
                        .map_or(Stratum::Ordinary, |i| i.stratum);
                    if self.live.insert(record, stratum).is_none() {
                        self.live_count[stratum as usize] += 1;
                    }
                }
            }
            Observed::CarrierAnswered { id, reply, .. } => {
                if let CarrierResult::Label {
                    label,
                    replayed: false,
                } = &reply.result
                    && let Some(info) = self.sends.get_mut(&id)
                {
                    info.bought_label = true;
                    let (caller, order_id, w) = (info.caller, info.order_id, info.weight);
                    let n = self.sold.entry((caller, order_id)).or_insert(0);
                    *n += 1;
                    if *n == 2 {
                        self.t.parcels_two_labels.add(w);
                    }
                    if *n >= 2 {
                        self.t.duplicates.add(w);
                    }
                    self.purchases.push((label.label_id.clone(), w));
                } else if let CarrierResult::Label { .. } = &reply.result
                    && let Some(info) = self.sends.get_mut(&id)
                {
                    info.bought_label = true;
                }
            }
            Observed::Died { id, point, .. } => {
                let Some(info) = self.sends.get_mut(&id) else {
                    return;
                };
                info.server_done = true;
                if info.claimed
                    && let Some(r) = self.running.get_mut(&info.record)
                {
                    *r = r.saturating_sub(1);
                }
                if point == DiePoint::InsideTxn2 && info.bought_label {
                    self.crashed_in_txn2
                        .push((info.record.clone(), info.weight));
                }
                // With the label and the record in separate stores, a death between the two
                // writes leaves a label row whose key never completed.
                if point == DiePoint::InsideTxn2
                    && info.bought_label
                    && self.cfg.engine.record_placement == RecordPlacement::SeparateStore
                {
                    let w = info.weight;
                    self.t.labels_without_completed_key.add(w);
                }
                // Its caller hears nothing and retries when its deadline passes.
                self.settle(id);
            }
            Observed::Answered { id, response, .. } => {
                let Some(info) = self.sends.get_mut(&id) else {
                    return;
                };
                info.server_done = true;
                if info.claimed {
                    info.claimed = false;
                    if let Some(r) = self.running.get_mut(&info.record) {
                        *r = r.saturating_sub(1);
                    }
                }
                let record = info.record.clone();
                let (w, caller) = (info.weight, info.caller);
                self.settle(id);
                self.t.replayed_requests += 1;
                self.t
                    .outcomes
                    .entry((response.status, response.outcome, response.code.clone()))
                    .or_default()
                    .add(w);
                if response.key_was_purged {
                    self.t.purged_key_flags.add(w);
                }
                if response.status == 201 {
                    let h = hash64(&response.body);
                    match self.first_body.get(&record) {
                        Some(first) if *first != h && response.replayed => {
                            self.t.invariant_replays_identical = false;
                        }
                        Some(_) => {}
                        None => {
                            self.first_body.insert(record.clone(), h);
                        }
                    }
                    if response.outcome == Outcome::Created {
                        self.creator.insert(record, caller);
                    } else if response.replayed
                        && self.creator.get(&record).is_some_and(|c| *c != caller)
                    {
                        self.t.cross_caller.add(w);
                    }
                }
            }
            Observed::TimedOut { id, sent_ms, at_ms } => {
                let Some(info) = self.sends.get_mut(&id) else {
                    return;
                };
                info.client_done = true;
                let intent_id = info.intent;
                let first = info.attempt == 1;
                self.settle(id);
                let Some(intent) = self.intents.get(&intent_id) else {
                    return;
                };
                let w = if first {
                    intent.base_weight
                } else {
                    intent.weight
                };
                self.t.timed_out.add(w);
                self.retry_after_silence(intent_id, sent_ms, at_ms);
            }
            Observed::Replied {
                id,
                response,
                at_ms,
                ..
            } => {
                self.t.request_log.replied(id, &response);
                let Some(info) = self.sends.get_mut(&id) else {
                    return;
                };
                info.client_done = true;
                let intent_id = info.intent;
                self.settle(id);
                let Some(intent) = self.intents.get_mut(&intent_id) else {
                    return;
                };
                let retryable = matches!(response.status, 409 | 503);
                if retryable && intent.attempts < self.cfg.max_attempts {
                    // Exponential backoff with full jitter, and never sooner than the server's
                    // retry-after hint: a 409 says when the lease ends, so waiting less only
                    // spends an attempt on another 409.
                    let cap = self
                        .cfg
                        .backoff_cap_ms
                        .min(self.cfg.backoff_base_ms << intent.attempts.min(20));
                    let jitter = (self.rng.random::<f64>() * cap as f64) as Millis;
                    let wait = jitter.max(response.retry_after_ms.unwrap_or(0)).max(1);
                    self.send(intent_id, at_ms + wait, Fate::Drawn);
                } else {
                    if response.status != 201 {
                        self.t.unlabelled.add(intent.weight);
                    }
                    self.intents.remove(&intent_id);
                }
            }
            Observed::Swept { purged, .. } => {
                for (caller, key) in purged {
                    let record = format!("{caller}\u{0}{key}");
                    if let Some(s) = self.live.remove(&record) {
                        self.live_count[s as usize] -= 1;
                    }
                    self.purged.insert(record);
                }
            }
        }
    }

    fn estimated_keys(&self) -> f64 {
        self.live_count[0] as f64 / self.s_o + self.live_count[1] as f64 / self.s_t
    }
}

fn random_key(rng: &mut StdRng) -> String {
    uuid::Builder::from_random_bytes(rng.random::<[u8; 16]>())
        .into_uuid()
        .to_string()
}

/// Bytes of the key records (rows and both indexes) per record, from the store's own accounting.
fn bytes_per_record(engine: &mut Engine) -> Result<f64, SimError> {
    Ok(bytes_and_records(engine)?.0)
}

fn bytes_and_records(engine: &mut Engine) -> Result<(f64, u64), SimError> {
    let bytes = engine.store().bytes()?;
    let n = engine.store().count_keys()?;
    Ok(if n == 0 {
        (0.0, 0)
    } else {
        (bytes.keys_bytes() as f64 / n as f64, n)
    })
}

/// The page size both stores allocate in (SQLite's `PAGE_SIZE`, PostgreSQL's block).
const PAGE_BYTES: f64 = 8192.0;
/// The b-trees a key record lives in: SQLite's rowid table, its primary-key index and the
/// `expires_at` index (PostgreSQL's heap is no b-tree, but has the two indexes and a last page).
const KEY_BTREES: f64 = 3.0;

/// Half-width of the 95 % interval of bytes per record measured on one run's store, relative:
/// 1.96 × the spread between runs that differ only in their seed, measured on the bundled
/// scenarios (`report` on the 9 bundled scenarios against the same 9 with seed + 100, store
/// schema 3: relative standard deviation of one run 0.21 %, so ±0.41 %, rounded up). One run's
/// own samples share one b-tree layout and miss that spread; with two or more replicates it is
/// measured instead.
const ONE_LAYOUT_HALF_WIDTH: f64 = 0.005;

/// At most this many measurements of bytes per record in a run: each one reads the store's
/// page accounting, which costs a scan.
const BYTES_PER_RECORD_SAMPLES: u64 = 12;

/// Runs one replicate and returns its tallies.
pub fn run_once(
    cfg: &SimConfig,
    arrivals: &Arrivals,
    dist: &RetryDelay,
    store: Box<dyn Store>,
    replicate: u64,
    progress: &Progress<'_>,
) -> Result<Tallies, SimError> {
    cfg.validate()?;
    let mut store = store;
    let existing = store.count_keys()?;
    if existing > 0 {
        return Err(invalid(
            "--store",
            format!(
                "{} already holds {existing} records; a simulation needs an empty store (a new file or schema)",
                store.describe()
            ),
        ));
    }
    let seed = cfg
        .seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(replicate);
    let clock = VirtualClock::new();
    let carrier = Arc::new(
        Carrier::new(CarrierConfig {
            seed: seed ^ 0x00C0_FFEE,
            ..cfg.carrier.clone()
        })
        .without_ledger(),
    );
    let (s_o, s_t) = cfg.fractions();
    let p_first_timeout = cfg.p_first_timeout();
    let p_first_bad = cfg.p_first_bad();
    let arrival_ms = (cfg.arrival_s() * 1000.0) as Millis;
    let retention_ms = cfg.engine.retention_ms;
    let expected_records = arrivals.mean_rate_per_s() * (s_o + p_first_bad * s_t) * cfg.arrival_s();
    let engine = Engine::new(store, carrier, Arc::new(clock.clone()), cfg.engine.clone())
        .with_purge_filter(expected_records as usize + 1000, 0.001, seed);
    // The tail that matters is the part that outlives the shorter of the two windows; tilting
    // from a quarter of it keeps the ratio f/g close to 1 for the draws that count.
    let tail_from_s = (retention_ms as f64 / 1000.0)
        .min(cfg.carrier.window_ms as f64 / 1000.0)
        .max(1.0)
        / 4.0;
    let tail_mass = dist.survival(tail_from_s);
    let full_fidelity = s_o >= 1.0 && s_t >= 1.0;
    let tilt_q = if !full_fidelity && tail_mass > 0.0 && tail_mass < 0.5 {
        0.5
    } else {
        0.0
    };
    let mut r = Replay {
        cfg,
        dist,
        flow: Flow::new(engine, clock),
        rng: StdRng::seed_from_u64(seed),
        s_o,
        s_t,
        p_first_timeout,
        p_first_bad,
        network_loss: cfg.network_loss(),
        p_slow: cfg.p_slow(),
        tilt_q,
        tail_from_s,
        tail_mass,
        intents: HashMap::new(),
        sends: HashMap::new(),
        next_send: 0,
        next_order: vec![[0, 0]; cfg.callers as usize],
        live: HashMap::new(),
        live_count: [0, 0],
        purged: HashSet::new(),
        first_body: HashMap::new(),
        creator: HashMap::new(),
        running: HashMap::new(),
        sold: HashMap::new(),
        purchases: Vec::new(),
        crashed_in_txn2: Vec::new(),
        completed_at_crash: Vec::new(),
        t: Tallies {
            invariant_replays_identical: true,
            request_log: crate::sim::request_log::RequestLog::new(cfg.request_log),
            ..Tallies::default()
        },
    };
    let sampled = scaled(arrivals, (1.0 - p_first_bad) * s_o + p_first_bad * s_t);
    let sweep_every = ((cfg.sweep_period_s * 1000.0) as Millis).max(1);
    let series_every = (arrival_ms / Millis::from(cfg.series_points.max(1))).max(1000);
    r.t.series_every_s = series_every as f64 / 1000.0;
    let steady_from = retention_ms + sweep_every;
    // Bytes per record is read at a few points of the steady window, or of the second half of
    // the arrivals when the run is too short to have one.
    let bpr_from = if steady_from < arrival_ms {
        steady_from
    } else {
        arrival_ms / 2
    };
    let bpr_every = ((arrival_ms - bpr_from) / series_every / BYTES_PER_RECORD_SAMPLES as Millis)
        .max(1)
        * series_every;
    let mut next_bpr = bpr_from;
    // Arrival times are kept exact (seconds, f64) and only rounded down to the clock's
    // millisecond when scheduled: each gap is drawn from the exact previous arrival, so gaps
    // shorter than a millisecond are not lost (at 400/s, truncating each one inflated the
    // traffic by 23 %).
    let mut next_arrival_s = sampled.next_arrival(0.0, &mut r.rng);
    let mut next_arrival = (next_arrival_s * 1000.0) as Millis;
    let mut next_sweep = sweep_every;
    let mut next_series = series_every;
    let mut intent_seq = 0u64;
    let mut observed = Vec::new();
    let mut last_tick = Instant::now();

    loop {
        if progress.interrupted.load(Ordering::Relaxed) {
            r.t.interrupted = true;
            break;
        }
        if !r.crashed_in_txn2.is_empty() {
            r.inspect_crashes()?;
        }
        let open = next_arrival < arrival_ms;
        let flow_at = r.flow.peek_ms();
        if !open && flow_at.is_none() {
            break;
        }
        // Once arrivals stop only far-apart retries remain; sweep just before each of them.
        let sweep_at = if open {
            next_sweep
        } else {
            next_sweep.max(flow_at.unwrap_or(next_sweep) - 1)
        };
        let arrival_at = if open { next_arrival } else { Millis::MAX };
        let series_at = if next_series <= arrival_ms {
            next_series
        } else {
            Millis::MAX
        };
        let now = arrival_at
            .min(flow_at.unwrap_or(Millis::MAX))
            .min(sweep_at)
            .min(series_at);
        if last_tick.elapsed().as_millis() >= 200 {
            (progress.tick)((now as f64 / arrival_ms as f64).min(1.0));
            last_tick = Instant::now();
        }
        if now == series_at {
            let keys = r.estimated_keys();
            r.t.series.push(SeriesPoint {
                t_s: now as f64 / 1000.0,
                keys_estimated: keys,
                keys_replayed: r.live_count[0] + r.live_count[1],
            });
            if now >= steady_from {
                r.t.steady_keys_sum += keys;
                r.t.steady_raw_sum[0] += r.live_count[0] as f64;
                r.t.steady_raw_sum[1] += r.live_count[1] as f64;
                r.t.steady_points += 1;
            }
            r.t.end_keys = keys;
            r.t.end_raw = [r.live_count[0] as f64, r.live_count[1] as f64];
            if now >= next_bpr {
                let (b, n) = bytes_and_records(r.flow.engine())?;
                if b > 0.0 {
                    r.t.bytes_per_record_samples.push(b);
                    r.t.bytes_per_record_records.push(n);
                }
                next_bpr = now + bpr_every;
            }
            // Bytes per record at the end of the arrivals, when the store is at its steady size.
            if next_series + series_every > arrival_ms {
                r.t.bytes_per_record = bytes_per_record(r.flow.engine())?;
            }
            next_series += series_every;
        } else if now == sweep_at {
            r.flow.sweep_at(now, cfg.sweep_batch, u32::MAX);
            r.flow.step(&mut observed)?;
            for o in observed.drain(..) {
                r.observe(o);
            }
            next_sweep = now + sweep_every;
        } else if now == arrival_at {
            intent_seq += 1;
            r.t.replayed_intents += 1;
            r.arrive(now, intent_seq);
            next_arrival_s = sampled.next_arrival(next_arrival_s, &mut r.rng);
            next_arrival = (next_arrival_s * 1000.0) as Millis;
        } else {
            r.flow.step(&mut observed)?;
            for o in observed.drain(..) {
                r.observe(o);
            }
        }
    }
    r.t.simulated_s = r.flow.now_ms() as f64 / 1000.0;
    r.t.days = cfg.arrival_s() / 86_400.0;
    if r.t.bytes_per_record == 0.0 {
        r.t.bytes_per_record = bytes_per_record(r.flow.engine())?;
    }
    let engine = r.flow.engine();
    let inv = engine.store().invariants()?;
    r.t.invariant_max_labels_per_parcel = inv.max_labels_per_parcel;
    r.t.invariant_completed_without_label = inv.completed_without_label;
    r.t.invariant_integrity_ok = inv.integrity_ok;
    let labels: std::collections::HashSet<String> = engine
        .store()
        .labels()?
        .into_iter()
        .map(|l| l.label_id)
        .collect();
    r.inspect_crashes()?;
    for (label_id, w) in &r.completed_at_crash {
        if !labels.contains(label_id) {
            r.t.completed_without_label.add(*w);
        }
    }
    for (label_id, w) in &r.purchases {
        if !labels.contains(label_id) {
            r.t.invoice_without_label.add(*w);
        }
    }
    Ok(r.t)
}

/// What `idemcalc simulate` reports: the pooled replicates, each figure beside the model's.
#[derive(Debug, Clone, Serialize)]
pub struct SimReport {
    pub schema_version: u32,
    pub seed: u64,
    pub rate: f64,
    pub retention_s: f64,
    pub retention: String,
    pub replicates: u32,
    /// Simulated time per replicate: arrivals plus the late retries still to come after them.
    pub simulated_seconds: f64,
    /// How long arrivals ran, per replicate.
    pub arrival_seconds: f64,
    pub sample_ordinary: f64,
    pub sample_timed_out: f64,
    pub replayed_intents: u64,
    pub replayed_requests: u64,
    pub store: String,
    pub bytes_per_record_measured: Figure,
    pub store_records_steady: Figure,
    pub store_bytes_steady: Figure,
    pub timed_out_per_day: Figure,
    pub late_after_purge_per_day: Figure,
    pub duplicate_labels_per_day: Figure,
    pub duplicate_cost_per_day: Figure,
    pub unlabelled_per_day: Figure,
    /// Attempts after the first, per day.
    pub retries_per_day: f64,
    /// Claims of a key the sweeper had purged (exact, not the Bloom filter's), with interval.
    pub purged_key_requests_per_day: Figure,
    /// Takeovers of an expired lease, with interval.
    pub takeovers_per_day: Figure,
    /// The network-loss fraction the run used (an input, or calibrated from the timeout rate).
    pub network_loss_fraction: f64,
    /// The share of calls expected to time out at these latencies and this loss.
    pub expected_timeout_fraction: f64,
    pub detection: Detection,
    pub outcomes: Vec<OutcomeRow>,
    pub invariants: SimInvariants,
    pub series: Vec<SeriesPoint>,
    /// What the figures cannot say: no steady window, no events seen, an interval that could
    /// not be computed. Shown under the table.
    pub notes: Vec<String>,
    pub interrupted: bool,
    pub wall_seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SimInvariants {
    pub integrity_ok: bool,
    pub max_labels_per_parcel: u64,
    pub completed_without_label: u64,
    pub replays_byte_identical: bool,
    /// All of the above hold.
    pub hold: bool,
}

pub const SCHEMA_VERSION: u32 = 1;

/// Pools replicates: tallies add up (they are independent draws of the same process), the
/// store size and bytes per record average, with an interval from the spread across
/// replicates when there are several.
pub fn pool(
    cfg: &SimConfig,
    arrivals: &Arrivals,
    dist: &RetryDelay,
    runs: &[Tallies],
    store: String,
    wall_seconds: f64,
) -> SimReport {
    let model = estimate(
        &ModelParams {
            rate_per_s: arrivals.mean_rate_per_s(),
            retention_s: cfg.retention_s(),
            timeout_fraction: cfg.expected_timeout_fraction(),
            done_fraction: cfg.done_fraction,
            label_price_usd: cfg.carrier.price_cents as f64 / 100.0,
            carrier_window_s: cfg.carrier.window_ms as f64 / 1000.0,
            bytes_per_record: cfg.engine.payload.record_bytes(),
            ..ModelParams::default()
        },
        dist,
    );
    let mut sum = Tallies::default();
    for t in runs {
        for (k, v) in [
            (&mut sum.late, &t.late),
            (&mut sum.duplicates, &t.duplicates),
            (&mut sum.unlabelled, &t.unlabelled),
            (&mut sum.purged_key_requests, &t.purged_key_requests),
            (&mut sum.purged_key_flags, &t.purged_key_flags),
            (&mut sum.cross_caller, &t.cross_caller),
            (&mut sum.takeovers_running, &t.takeovers_running),
            (&mut sum.takeovers, &t.takeovers),
            (&mut sum.parcels_two_labels, &t.parcels_two_labels),
            (&mut sum.invoice_without_label, &t.invoice_without_label),
            (
                &mut sum.labels_without_completed_key,
                &t.labels_without_completed_key,
            ),
            (&mut sum.completed_without_label, &t.completed_without_label),
            (&mut sum.timed_out, &t.timed_out),
            (&mut sum.retries, &t.retries),
        ] {
            k.merge(v);
        }
        for (key, v) in &t.outcomes {
            sum.outcomes.entry(key.clone()).or_default().merge(v);
        }
        sum.days += t.days;
    }
    let days = sum.days.max(1e-9);
    let price = cfg.carrier.price_cents as f64 / 100.0;
    let (s_o, s_t) = cfg.fractions();

    let mut notes = Vec::new();
    let replayed_intents: u64 = runs.iter().map(|t| t.replayed_intents).sum();
    let bytes_per_record = bytes_per_record_figure(runs, &mut notes);
    // The records model: rate × (retention + the sweeper's mean lag), since an expired record
    // waits for the next sweep, half a period on average.
    let retention_s = cfg.retention_s();
    let life_s = retention_s + cfg.sweep_period_s / 2.0;
    let analytic_records = model.store_bytes / model.params.bytes_per_record * life_s / retention_s;
    let records = records_figure(runs, s_o, s_t, life_s, analytic_records, &mut notes);
    // The store's size multiplies two estimates; their relative errors add in quadrature.
    let rel = |f: &Figure| {
        if f.estimate > 0.0 {
            (f.ci95_high - f.ci95_low) / 2.0 / f.estimate
        } else {
            0.0
        }
    };
    let rel_bytes = if bytes_per_record.ci95_low.is_finite() {
        rel(&bytes_per_record)
    } else {
        0.0
    };
    let rel_store = (rel(&records).powi(2) + rel_bytes.powi(2)).sqrt();
    let store_estimate = records.estimate * bytes_per_record.estimate;
    let store_bytes = Figure {
        estimate: store_estimate,
        ci95_low: (store_estimate * (1.0 - rel_store)).max(0.0),
        ci95_high: store_estimate * (1.0 + rel_store),
        analytic: model.store_bytes,
    };
    // The largest weight one replayed event can carry: events come from timed-out intents
    // (weight ≤ 1/s_t in the tail: timed out or crashed first) unless ordinary ones can also
    // go wrong.
    let ordinary_can_fail =
        cfg.carrier.hang_fraction > 0.0 || cfg.carrier.error_fraction > 0.0 || cfg.callers > 1;
    let unit_w = if ordinary_can_fail {
        1.0 / s_o
    } else {
        1.0 / s_t
    };
    let mut counted = |name: &str, t: &Tally, analytic: f64| {
        let f = t.per_day(days, analytic, unit_w);
        if t.n == 0 {
            notes.push(format!(
                "{name}: none in {} replayed intents, so fewer than {}/day (one-sided 95 %)",
                crate::format::thousands(replayed_intents as f64),
                crate::format::thousands(f.ci95_high.ceil())
            ));
        }
        f
    };
    let timed_out = counted("timed-out calls", &sum.timed_out, model.timed_out_per_day);
    let late = counted(
        "late arrivals after purge",
        &sum.late,
        model.late_after_purge_per_day,
    );
    let duplicates = counted(
        "duplicate labels",
        &sum.duplicates,
        model.duplicate_labels_per_day,
    );
    let purged_key_requests = sum.purged_key_requests.per_day(days, 0.0, unit_w);
    let takeovers = sum.takeovers.per_day(days, 0.0, unit_w);

    let duplicate_cost = Figure {
        estimate: duplicates.estimate * price,
        ci95_low: duplicates.ci95_low * price,
        ci95_high: duplicates.ci95_high * price,
        analytic: model.duplicate_cost_per_day,
    };
    let mut series: Vec<SeriesPoint> = runs.first().map(|t| t.series.clone()).unwrap_or_default();
    if runs.len() > 1 {
        for (i, p) in series.iter_mut().enumerate() {
            let vals: Vec<f64> = runs
                .iter()
                .filter_map(|t| t.series.get(i).map(|q| q.keys_estimated))
                .collect();
            p.keys_estimated = vals.iter().sum::<f64>() / vals.len() as f64;
        }
    }
    let outcomes = sum
        .outcomes
        .iter()
        .map(|((status, outcome, code), t)| OutcomeRow {
            status: *status,
            outcome: *outcome,
            code: code.clone(),
            replayed: t.n,
            per_day: t.w / days,
        })
        .collect();
    let invariants = SimInvariants {
        integrity_ok: runs.iter().all(|t| t.invariant_integrity_ok),
        max_labels_per_parcel: runs
            .iter()
            .map(|t| t.invariant_max_labels_per_parcel)
            .max()
            .unwrap_or(0),
        completed_without_label: runs
            .iter()
            .map(|t| t.invariant_completed_without_label)
            .sum(),
        replays_byte_identical: runs.iter().all(|t| t.invariant_replays_identical),
        hold: false,
    };
    let invariants = SimInvariants {
        hold: invariants.integrity_ok
            && invariants.max_labels_per_parcel <= 1
            && invariants.completed_without_label == 0
            && invariants.replays_byte_identical,
        ..invariants
    };
    SimReport {
        schema_version: SCHEMA_VERSION,
        seed: cfg.seed,
        rate: arrivals.mean_rate_per_s(),
        retention_s: cfg.retention_s(),
        retention: crate::duration::format_secs(cfg.retention_s()),
        replicates: runs.len() as u32,
        simulated_seconds: runs.iter().map(|t| t.simulated_s).fold(0.0, f64::max),
        arrival_seconds: cfg.arrival_s(),
        sample_ordinary: s_o,
        sample_timed_out: s_t,
        replayed_intents,
        replayed_requests: runs.iter().map(|t| t.replayed_requests).sum(),
        store,
        bytes_per_record_measured: bytes_per_record,
        store_records_steady: records,
        store_bytes_steady: store_bytes,
        timed_out_per_day: timed_out,
        late_after_purge_per_day: late,
        duplicate_labels_per_day: duplicates,
        duplicate_cost_per_day: duplicate_cost,
        unlabelled_per_day: sum.unlabelled.per_day(days, 0.0, unit_w),
        retries_per_day: sum.retries.w / days,
        purged_key_requests_per_day: purged_key_requests,
        takeovers_per_day: takeovers,
        network_loss_fraction: cfg.network_loss(),
        expected_timeout_fraction: cfg.expected_timeout_fraction(),
        detection: Detection {
            parcels_with_two_labels_per_day: sum.parcels_two_labels.w / days,
            purged_key_requests_per_day: sum.purged_key_requests.w / days,
            purged_key_bloom_flags_per_day: sum.purged_key_flags.w / days,
            cross_caller_replays_per_day: sum.cross_caller.w / days,
            invoice_lines_without_label_per_day: sum.invoice_without_label.w / days,
            takeovers_while_running_per_day: sum.takeovers_running.w / days,
            takeovers_per_day: sum.takeovers.w / days,
            labels_without_completed_key_per_day: sum.labels_without_completed_key.w / days,
            completed_keys_without_label_per_day: sum.completed_without_label.w / days,
        },
        outcomes,
        invariants,
        series,
        notes,
        interrupted: runs.iter().any(|t| t.interrupted),
        wall_seconds,
    }
}

/// The variance of the mean of `n` counts taken `every_s` apart, relative to the variance of
/// one, for an M/G/∞ count whose items live `life_s`: two counts `h` apart share a fraction
/// `(1 - h/life)⁺` of their items, so their covariance is that fraction of the variance.
pub fn time_average_variance_factor(n: u64, every_s: f64, life_s: f64) -> f64 {
    if n <= 1 || life_s <= 0.0 {
        return 1.0;
    }
    let nf = n as f64;
    let mut sum = nf;
    for m in 1..n {
        let shared = 1.0 - m as f64 * every_s / life_s;
        if shared <= 0.0 {
            break;
        }
        sum += 2.0 * (nf - m as f64) * shared;
    }
    sum / (nf * nf)
}

/// Records in the store: the mean weighted count over the steady window, or, when the run has
/// none, the store at the end of the arrivals with a note saying it is still growing.
fn records_figure(
    runs: &[Tallies],
    s_o: f64,
    s_t: f64,
    life_s: f64,
    analytic: f64,
    notes: &mut Vec<String>,
) -> Figure {
    let steady: Vec<&Tallies> = runs.iter().filter(|t| t.steady_points > 0).collect();
    let k = runs.len().max(1) as f64;
    let (est, var) = if steady.len() == runs.len() && !runs.is_empty() {
        let est = steady
            .iter()
            .map(|t| t.steady_keys_sum / t.steady_points as f64)
            .sum::<f64>()
            / k;
        // Each stratum's replayed count is Poisson at any instant (var = mean), scaled by 1/s²,
        // and averaging over the window divides that by how many independent looks it gets.
        let var = steady
            .iter()
            .map(|t| {
                let n = t.steady_points as f64;
                let instant =
                    t.steady_raw_sum[0] / n / (s_o * s_o) + t.steady_raw_sum[1] / n / (s_t * s_t);
                instant * time_average_variance_factor(t.steady_points, t.series_every_s, life_s)
            })
            .sum::<f64>()
            / (k * k);
        (est, var)
    } else {
        notes.push(format!(
            "no steady window: arrivals end before one retention plus a sweep has passed, so \
             records and store size are the store at the end of the arrivals, still growing \
             (a lower bound of the steady size); run with --duration longer than {}",
            crate::duration::format_secs(life_s.round())
        ));
        let est = runs.iter().map(|t| t.end_keys).sum::<f64>() / k;
        let var = runs
            .iter()
            .map(|t| t.end_raw[0] / (s_o * s_o) + t.end_raw[1] / (s_t * s_t))
            .sum::<f64>()
            / (k * k);
        (est, var)
    };
    let half = crate::stats::Z95 * var.sqrt();
    Figure {
        estimate: est,
        ci95_low: (est - half).max(0.0),
        ci95_high: est + half,
        analytic,
    }
}

/// Bytes per record: the spread across replicates when there are several, else the spread of
/// the measurements over one replicate's steady window. One measurement alone has no interval:
/// it is shown as such (not a number, `null` in JSON) with a note, never as a zero-width one.
fn bytes_per_record_figure(runs: &[Tallies], notes: &mut Vec<String>) -> Figure {
    let figure = bytes_per_record_spread(runs, notes);
    // Within one run the samples share one b-tree layout, so their spread misses how another
    // run's keys would lay out the pages; each b-tree of the key table (the table, its primary
    // key, the `expires_at` index) is measured in whole pages and lands a page or so either
    // way. At least that much, per record, is in the interval.
    let records: Vec<u64> = runs
        .iter()
        .flat_map(|t| t.bytes_per_record_records.iter().copied())
        .collect();
    if records.is_empty() || !figure.ci95_low.is_finite() {
        return figure;
    }
    let mean_records = records.iter().sum::<u64>() as f64 / records.len() as f64;
    let mut floor = KEY_BTREES * PAGE_BYTES / (mean_records * (runs.len() as f64).sqrt());
    if runs.len() == 1 {
        floor = floor.max(ONE_LAYOUT_HALF_WIDTH * figure.estimate);
    }
    Figure {
        ci95_low: figure.ci95_low.min(figure.estimate - floor),
        ci95_high: figure.ci95_high.max(figure.estimate + floor),
        ..figure
    }
}

fn bytes_per_record_spread(runs: &[Tallies], notes: &mut Vec<String>) -> Figure {
    let per_run: Vec<f64> = runs
        .iter()
        .map(|t| {
            if t.bytes_per_record_samples.is_empty() {
                t.bytes_per_record
            } else {
                t.bytes_per_record_samples.iter().sum::<f64>()
                    / t.bytes_per_record_samples.len() as f64
            }
        })
        .collect();
    if per_run.len() >= 2 {
        return spread_figure(&per_run, 512.0);
    }
    let samples = runs
        .first()
        .map(|t| t.bytes_per_record_samples.clone())
        .unwrap_or_default();
    if samples.len() >= 2 {
        return spread_figure(&samples, 512.0);
    }
    notes.push(
        "bytes per record: measured once, so no interval can be given; run longer or with \
         --replicates 2 or more"
            .to_string(),
    );
    Figure {
        estimate: per_run.first().copied().unwrap_or(0.0),
        ci95_low: f64::NAN,
        ci95_high: f64::NAN,
        analytic: 512.0,
    }
}

/// Mean and a t interval over `values` (two or more).
fn spread_figure(values: &[f64], analytic: f64) -> Figure {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n.max(1.0);
    if values.len() < 2 {
        return Figure {
            estimate: mean,
            ci95_low: f64::NAN,
            ci95_high: f64::NAN,
            analytic,
        };
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let t = StudentsT::new(0.0, 1.0, n - 1.0)
        .map(|d| d.inverse_cdf(0.975))
        .unwrap_or(1.96);
    let half = t * (var / n).sqrt();
    Figure {
        estimate: mean,
        ci95_low: mean - half,
        ci95_high: mean + half,
        analytic,
    }
}

/// Runs `replicates` independent replicates in parallel (rayon), each on its own store from
/// `open_store`, and pools them. `store_name` is what the report calls the store: a stable
/// name, not a temporary path, so the same inputs give the same JSON.
pub fn simulate(
    cfg: &SimConfig,
    arrivals: &Arrivals,
    dist: &RetryDelay,
    replicates: u32,
    store_name: &str,
    open_store: &(dyn Fn(u32) -> Result<Box<dyn Store>, StoreError> + Sync),
    progress: &Progress<'_>,
) -> Result<SimReport, SimError> {
    use rayon::prelude::*;
    cfg.validate()?;
    let started = Instant::now();
    let runs: Vec<Tallies> = (0..replicates.max(1))
        .into_par_iter()
        .map(|i| {
            let store = open_store(i)?;
            run_once(cfg, arrivals, dist, store, u64::from(i), progress)
        })
        .collect::<Result<_, _>>()?;
    Ok(pool(
        cfg,
        arrivals,
        dist,
        &runs,
        store_name.to_string(),
        started.elapsed().as_secs_f64(),
    ))
}
