//! Synthetic traffic replayed against the real engine on a virtual clock (`idemcalc simulate`).
//!
//! # What is simulated
//! Intents (one label for one parcel) arrive as a Poisson process. Each client sends attempt 1
//! with a 250 ms deadline. A fraction `timeout_fraction` of first attempts time out: with
//! probability `done_fraction` the server ran it and the reply was lost, otherwise the request
//! was lost. The client's retry arrives after a delay drawn from the late-retry distribution
//! (time since the first attempt); a retry answered 409 or 503 is retried with exponential
//! backoff and full jitter, up to `max_attempts` attempts in all. The sweeper runs every
//! `sweep_period_s` in batches. Every request goes through the engine's real transactions on a
//! real store.
//!
//! # Scaling: a stratified, importance-sampled replay
//! Three days at 400/s is over 100 M records; replaying them all would take hours. Two strata:
//!
//! * ordinary intents (no timeout) are replayed with probability `s_o` (`--sample`), each
//!   standing for `1/s_o` intents. They determine the store's size.
//! * timed-out intents, rare (0.1 %) but the only source of late arrivals and duplicates, are
//!   replayed with probability `s_t = min(1, s_o · boost)`, each standing for `1/s_t`.
//!   Their retry delay is drawn from a mixture that puts half the draws in the tail beyond
//!   `tail_from_s` (the part that outlives retention); each draw then carries the likelihood
//!   ratio `f(d)/g(d)` as an extra weight, which keeps every estimator unbiased.
//!
//! A figure that counts events (late arrivals, duplicates) is estimated as `Σ wᵢ / days` over
//! the replayed events, with variance `Σ wᵢ² / days²` (the events are independent draws);
//! the 95 % interval is the normal one on that variance, or Garwood's exact Poisson interval
//! when all weights are equal and the count is small. The store's size is the weighted count of
//! live records, `n_o/s_o + n_t/s_t`, averaged over the steady window (after one retention has
//! passed), with a Poisson interval on the count. With `--sample 1` both strata are replayed in
//! full and the delay is drawn without tilting: a full-fidelity run.

use super::flow::{Flow, Observed, Send};
use crate::carrier::CarrierResult;
use crate::carrier::{Carrier, CarrierConfig};
use crate::clock::{Millis, VirtualClock};
use crate::engine::{DiePoint, Engine, EngineConfig, EngineError, Outcome, Request};
use crate::model::{ModelParams, estimate};
use crate::store::{Store, StoreError};
use crate::traffic::{Arrivals, LoadProfile, RetryDelay};
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng};
use serde::{Deserialize, Serialize};
use statrs::distribution::{ChiSquared, ContinuousCDF, StudentsT};
use std::collections::{BTreeMap, HashMap};
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
    pub timeout_fraction: f64,
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
            done_fraction: 0.6,
            key_policy: KeyPolicy::Derived,
            deadline_ms: 250,
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
                latency: crate::carrier::Latency::LogNormal {
                    median_ms: 30.0,
                    p99_ms: 100.0,
                },
                ..CarrierConfig::default()
            },
            seed: 1,
            series_points: 240,
            request_log: false,
        }
    }
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

    /// The ordinary sample fraction and the timed-out one.
    pub fn fractions(&self) -> (f64, f64) {
        let intents = self.rate_per_s * self.arrival_s();
        let s_o = self
            .sample
            .unwrap_or_else(|| (self.target_ordinary / intents).min(1.0));
        let boost = self.timeout_boost.unwrap_or_else(|| {
            // Aim for as many timed-out intents as ordinary ones, the rarer stratum then being
            // as well measured as the common one.
            (1.0 / self.timeout_fraction.max(1e-9)).min(1.0 / s_o)
        });
        (s_o, (s_o * boost).min(1.0))
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
                "--timeout-rate",
                "must be a fraction between 0 and 1",
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
                "--crash-fraction",
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

    /// Rate per day over `days`, with a 95 % interval.
    pub fn per_day(&self, days: f64, analytic: f64) -> Figure {
        let est = self.w / days;
        let (lo, hi) = if self.n == 0 {
            // No event seen: the exact upper bound for a zero count, at the mean weight of the
            // stratum that produces such events is unknown; report [0, 0].
            (0.0, 0.0)
        } else if self.n < 30
            && (self.w2 * self.n as f64 - self.w * self.w).abs() < 1e-6 * self.w * self.w
        {
            let (l, h) = garwood(self.n);
            let unit = self.w / self.n as f64 / days;
            (l * unit, h * unit)
        } else {
            let half = 1.959_963_985 * self.w2.sqrt() / days;
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
    /// Requests whose key the sweeper had purged (from the Bloom filter of purged keys).
    pub purged_key_requests_per_day: f64,
    /// Replays handed to a caller other than the one whose request created the record.
    pub cross_caller_replays_per_day: f64,
    /// Carrier invoice lines with no label row behind them.
    pub invoice_lines_without_label_per_day: f64,
    /// Takeovers while the attempt that held the lease was still running.
    pub takeovers_while_running_per_day: f64,
}

/// One replicate's raw tallies; replicates pool by adding them.
#[derive(Debug, Clone, Default)]
pub struct Tallies {
    pub days: f64,
    pub late: Tally,
    pub duplicates: Tally,
    pub unlabelled: Tally,
    pub purged_key_requests: Tally,
    pub cross_caller: Tally,
    pub takeovers_running: Tally,
    pub parcels_two_labels: Tally,
    pub invoice_without_label: Tally,
    pub timed_out: Tally,
    pub outcomes: BTreeMap<(u16, Outcome, Option<String>), Tally>,
    /// Steady-state weighted store size: sum and count of the sampled points, and the mean raw
    /// count for the interval.
    pub steady_keys_sum: f64,
    pub steady_points: u64,
    /// Sum over the steady points of the replayed records per stratum (ordinary, timed out).
    pub steady_raw_sum: [f64; 2],
    pub bytes_per_record: f64,
    pub series: Vec<SeriesPoint>,
    pub simulated_s: f64,
    pub replayed_requests: u64,
    pub replayed_intents: u64,
    pub invariant_max_labels_per_parcel: u64,
    pub invariant_replays_identical: bool,
    pub invariant_completed_without_label: u64,
    pub invariant_integrity_ok: bool,
    pub interrupted: bool,
    pub request_log: crate::fit::RequestLog,
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
    attempts: u32,
    /// The attempt's retry delay from the late-retry distribution (timed-out intents).
    retry_delay_ms: Millis,
}

/// What is known about one request on the wire.
struct SendInfo {
    intent: u64,
    /// The record's identity in the store: scoped caller column + NUL + key.
    record: String,
    claimed: bool,
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

/// The simulation of one replicate: the driver, the clients' state and the tallies.
struct Replay<'a> {
    cfg: &'a SimConfig,
    dist: &'a RetryDelay,
    flow: Flow,
    rng: StdRng,
    s_o: f64,
    s_t: f64,
    /// Tilted retry-delay draw: probability of drawing from the tail, where it starts, its mass.
    tilt_q: f64,
    tail_from_s: f64,
    tail_mass: f64,
    intents: HashMap<u64, Intent>,
    sends: HashMap<u64, SendInfo>,
    next_send: u64,
    /// Live records per stratum, mirrored from claims and the sweeper's purged keys, so the
    /// weighted store size needs no query.
    live: HashMap<String, Stratum>,
    live_count: [u64; 2],
    first_body: HashMap<String, u64>,
    creator: HashMap<String, u32>,
    running: HashMap<String, u32>,
    /// Labels the carrier sold per (caller, order): the seed's "more than one label per parcel".
    sold: HashMap<(u32, i64), u32>,
    /// Label ids the carrier sold, with the weight of the intent that bought them.
    purchases: Vec<(String, f64)>,
    t: Tallies,
}

impl<'a> Replay<'a> {
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

    fn record_of(&mut self, intent: &Intent, key: &str) -> String {
        let caller = format!("fulfilment-{}", intent.caller);
        let scoped = self.flow.engine().scope(&caller).to_string();
        format!("{scoped}\u{0}{key}")
    }

    /// Puts the next attempt of `intent_id` on the wire at `at_ms`.
    fn send(&mut self, intent_id: u64, at_ms: Millis, lose_request: bool, lose_reply: bool) {
        let Some(mut intent) = self.intents.remove(&intent_id) else {
            return;
        };
        intent.attempts += 1;
        let key = match &intent.key {
            Some(k) => k.clone(),
            None => random_key(&mut self.rng),
        };
        let body = format!(
            r#"{{"order_id":{},"parcel_no":1,"label_version":1,"weight_g":1450,"service":"ground"}}"#,
            intent.order_id
        );
        let caller = format!("fulfilment-{}", intent.caller);
        let record = self.record_of(&intent, &key);
        self.next_send += 1;
        let id = self.next_send;
        let mut send = Send::new(id, Request::create_label(&caller, Some(&key), &body));
        self.t
            .request_log
            .sent(id, at_ms, &caller, &key, intent.weight);
        send.network_ms = 1;
        send.lose_request = lose_request;
        send.lose_reply = lose_reply;
        if self.cfg.crash_fraction > 0.0 && self.rng.random::<f64>() < self.cfg.crash_fraction {
            send.die = Some(self.cfg.crash_point);
        }
        self.sends.insert(
            id,
            SendInfo {
                intent: intent_id,
                record,
                claimed: false,
            },
        );
        self.intents.insert(intent_id, intent);
        self.flow.send(at_ms, send);
        if lose_request {
            self.sends.remove(&id);
        }
    }

    /// A client that heard nothing retries after a delay from the late-retry distribution.
    fn retry_after_silence(&mut self, intent_id: u64, from_ms: Millis) {
        let Some(intent) = self.intents.get(&intent_id) else {
            return;
        };
        if intent.attempts >= self.cfg.max_attempts {
            let w = intent.weight;
            self.t.unlabelled.add(w);
            self.intents.remove(&intent_id);
            return;
        }
        let delay = if intent.attempts == 1 && intent.stratum == Stratum::TimedOut {
            intent.retry_delay_ms
        } else {
            (self
                .dist
                .quantile(self.rng.random::<f64>().min(1.0 - 1e-12))
                * 1000.0) as Millis
        };
        if intent.attempts == 1 && intent.stratum == Stratum::TimedOut {
            let w = intent.weight;
            if delay as f64 / 1000.0 > self.cfg.retention_s() {
                self.t.late.add(w);
            }
        }
        let at = from_ms + delay.max(self.cfg.deadline_ms);
        self.send(intent_id, at, false, false);
    }

    fn arrive(&mut self, now_ms: Millis, intent_id: u64, order_id: i64) {
        let timed_out_share = {
            let to = self.cfg.timeout_fraction * self.s_t;
            let or = (1.0 - self.cfg.timeout_fraction) * self.s_o;
            if to + or > 0.0 { to / (to + or) } else { 0.0 }
        };
        let timed_out = self.rng.random::<f64>() < timed_out_share;
        let caller = self.rng.random::<u32>() % self.cfg.callers;
        let (stratum, weight, retry_delay_ms) = if timed_out {
            let (d, ratio) = self.draw_delay();
            (Stratum::TimedOut, ratio / self.s_t, d)
        } else {
            (Stratum::Ordinary, 1.0 / self.s_o, 0)
        };
        if timed_out {
            self.t.timed_out.add(1.0 / self.s_t);
        }
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
                attempts: 0,
                retry_delay_ms,
            },
        );
        if timed_out {
            // Lost reply (the server ran it) or lost request, in the done fraction's proportion.
            let ran = self.rng.random::<f64>() < self.cfg.done_fraction;
            self.send(intent_id, now_ms, !ran, ran);
            self.retry_after_silence(intent_id, now_ms);
        } else {
            self.send(intent_id, now_ms, false, false);
        }
    }

    fn observe(&mut self, o: Observed) {
        match o {
            Observed::Arrived { .. } => {}
            Observed::Claimed { id, took_over, .. } => {
                let Some(info) = self.sends.get_mut(&id) else {
                    return;
                };
                info.claimed = true;
                let record = info.record.clone();
                let intent = info.intent;
                let runs = self.running.entry(record.clone()).or_insert(0);
                let w = self.intents.get(&intent).map_or(0.0, |i| i.weight);
                if took_over && *runs > 0 {
                    self.t.takeovers_running.add(w);
                }
                *runs += 1;
                if !took_over {
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
                    && let Some(info) = self.sends.get(&id)
                    && let Some(intent) = self.intents.get(&info.intent)
                {
                    let n = self
                        .sold
                        .entry((intent.caller, intent.order_id))
                        .or_insert(0);
                    *n += 1;
                    if *n == 2 {
                        self.t.parcels_two_labels.add(intent.weight);
                    }
                    if *n >= 2 {
                        self.t.duplicates.add(intent.weight);
                    }
                    self.purchases.push((label.label_id.clone(), intent.weight));
                }
            }
            Observed::Died { id, at_ms, .. } => {
                let Some(info) = self.sends.remove(&id) else {
                    return;
                };
                if info.claimed
                    && let Some(r) = self.running.get_mut(&info.record)
                {
                    *r = r.saturating_sub(1);
                }
                // Its caller hears nothing, and retries like any caller that heard nothing.
                self.retry_after_silence(info.intent, at_ms);
            }
            Observed::Answered { id, response, .. } => {
                let Some(info) = self.sends.get_mut(&id) else {
                    return;
                };
                if info.claimed {
                    info.claimed = false;
                    if let Some(r) = self.running.get_mut(&info.record) {
                        *r = r.saturating_sub(1);
                    }
                }
                let record = info.record.clone();
                let Some(intent) = self.intents.get(&info.intent) else {
                    return;
                };
                let (w, caller) = (intent.weight, intent.caller);
                self.t.replayed_requests += 1;
                self.t
                    .outcomes
                    .entry((response.status, response.outcome, response.code.clone()))
                    .or_default()
                    .add(w);
                if response.key_was_purged {
                    self.t.purged_key_requests.add(w);
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
            Observed::Replied {
                id,
                response,
                at_ms,
                ..
            } => {
                self.t.request_log.replied(id, &response);
                let Some(info) = self.sends.remove(&id) else {
                    return;
                };
                let Some(intent) = self.intents.get_mut(&info.intent) else {
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
                    let intent_id = info.intent;
                    self.send(intent_id, at_ms + wait, false, false);
                } else {
                    if response.status != 201 {
                        self.t.unlabelled.add(intent.weight);
                    }
                    self.intents.remove(&info.intent);
                }
            }
            Observed::Swept { purged, .. } => {
                for (caller, key) in purged {
                    if let Some(s) = self.live.remove(&format!("{caller}\u{0}{key}")) {
                        self.live_count[s as usize] -= 1;
                    }
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
    let bytes = engine.store().bytes()?;
    let n = engine.store().count_keys()?;
    Ok(if n == 0 {
        0.0
    } else {
        bytes.keys_bytes() as f64 / n as f64
    })
}

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
    let arrival_ms = (cfg.arrival_s() * 1000.0) as Millis;
    let retention_ms = cfg.engine.retention_ms;
    let expected_records =
        arrivals.mean_rate_per_s() * (s_o + cfg.timeout_fraction * s_t) * cfg.arrival_s();
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
        tilt_q,
        tail_from_s,
        tail_mass,
        intents: HashMap::new(),
        sends: HashMap::new(),
        next_send: 0,
        live: HashMap::new(),
        live_count: [0, 0],
        first_body: HashMap::new(),
        creator: HashMap::new(),
        running: HashMap::new(),
        sold: HashMap::new(),
        purchases: Vec::new(),
        t: Tallies {
            invariant_replays_identical: true,
            request_log: crate::fit::RequestLog::new(cfg.request_log),
            ..Tallies::default()
        },
    };
    let sampled = scaled(
        arrivals,
        (1.0 - cfg.timeout_fraction) * s_o + cfg.timeout_fraction * s_t,
    );
    let sweep_every = ((cfg.sweep_period_s * 1000.0) as Millis).max(1);
    let series_every = (arrival_ms / Millis::from(cfg.series_points.max(1))).max(1000);
    let steady_from = retention_ms + sweep_every;
    let mut next_arrival = (sampled.next_arrival(0.0, &mut r.rng) * 1000.0) as Millis;
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
            // Tenants share order numbering: with several callers each order id, and so each
            // derived key, is used by every one of them.
            let order_id = 100_000_000 + (intent_seq as i64 - 1) / i64::from(cfg.callers) + 1;
            r.arrive(now, intent_seq, order_id);
            next_arrival =
                (sampled.next_arrival(now as f64 / 1000.0, &mut r.rng) * 1000.0) as Millis;
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
    pub detection: Detection,
    pub outcomes: Vec<OutcomeRow>,
    pub invariants: SimInvariants,
    pub series: Vec<SeriesPoint>,
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
            timeout_fraction: cfg.timeout_fraction,
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
            (&mut sum.cross_caller, &t.cross_caller),
            (&mut sum.takeovers_running, &t.takeovers_running),
            (&mut sum.parcels_two_labels, &t.parcels_two_labels),
            (&mut sum.invoice_without_label, &t.invoice_without_label),
            (&mut sum.timed_out, &t.timed_out),
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

    let bpr: Vec<f64> = runs.iter().map(|t| t.bytes_per_record).collect();
    let bytes_per_record = spread_figure(&bpr, 512.0);
    // Store size: the mean weighted count over the steady window. Its interval treats the
    // replayed records of each stratum at one instant as Poisson counts, var = n_o/s_o² +
    // n_t/s_t² (conservative: the average over the window is smoother than one instant).
    let steady_runs: Vec<&Tallies> = runs.iter().filter(|t| t.steady_points > 0).collect();
    let analytic_records = model.store_bytes / model.params.bytes_per_record;
    let records = if steady_runs.is_empty() {
        Figure {
            estimate: 0.0,
            ci95_low: 0.0,
            ci95_high: 0.0,
            analytic: analytic_records,
        }
    } else {
        let k = steady_runs.len() as f64;
        let est = steady_runs
            .iter()
            .map(|t| t.steady_keys_sum / t.steady_points as f64)
            .sum::<f64>()
            / k;
        let var = steady_runs
            .iter()
            .map(|t| {
                let n = t.steady_points as f64;
                t.steady_raw_sum[0] / n / (s_o * s_o) + t.steady_raw_sum[1] / n / (s_t * s_t)
            })
            .sum::<f64>()
            / (k * k);
        let half = 1.959_963_985 * var.sqrt();
        Figure {
            estimate: est,
            ci95_low: (est - half).max(0.0),
            ci95_high: est + half,
            analytic: analytic_records,
        }
    };
    let store_bytes = Figure {
        estimate: records.estimate * bytes_per_record.estimate,
        ci95_low: records.ci95_low * bytes_per_record.ci95_low,
        ci95_high: records.ci95_high * bytes_per_record.ci95_high,
        analytic: model.store_bytes,
    };
    let duplicates = sum.duplicates.per_day(days, model.duplicate_labels_per_day);
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
        replayed_intents: runs.iter().map(|t| t.replayed_intents).sum(),
        replayed_requests: runs.iter().map(|t| t.replayed_requests).sum(),
        store,
        bytes_per_record_measured: bytes_per_record,
        store_records_steady: records,
        store_bytes_steady: store_bytes,
        timed_out_per_day: sum.timed_out.per_day(days, model.timed_out_per_day),
        late_after_purge_per_day: sum.late.per_day(days, model.late_after_purge_per_day),
        duplicate_labels_per_day: duplicates,
        duplicate_cost_per_day: duplicate_cost,
        unlabelled_per_day: sum.unlabelled.per_day(days, 0.0),
        detection: Detection {
            parcels_with_two_labels_per_day: sum.parcels_two_labels.w / days,
            purged_key_requests_per_day: sum.purged_key_requests.w / days,
            cross_caller_replays_per_day: sum.cross_caller.w / days,
            invoice_lines_without_label_per_day: sum.invoice_without_label.w / days,
            takeovers_while_running_per_day: sum.takeovers_running.w / days,
        },
        outcomes,
        invariants,
        series,
        interrupted: runs.iter().any(|t| t.interrupted),
        wall_seconds,
    }
}

/// Mean and a t interval across replicates; a single replicate has no spread to show.
fn spread_figure(values: &[f64], analytic: f64) -> Figure {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n.max(1.0);
    if values.len() < 2 {
        return Figure {
            estimate: mean,
            ci95_low: mean,
            ci95_high: mean,
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
