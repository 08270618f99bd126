//! What one simulation is asked: [`SimConfig`] with the seed's client as its default, the
//! shares derived from it (network loss, slow calls, the two strata's sample fractions), and
//! the one validation that refuses an impossible parameter before any work starts.

use crate::carrier::{CarrierConfig, Latency, SEED_CARRIER_LATENCY};
use crate::clock::Millis;
use crate::engine::{DiePoint, EngineConfig, EngineError};
use crate::store::StoreError;
use serde::{Deserialize, Serialize};

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

impl KeyPolicy {
    /// The name the knob, a scenario file and JSON use: serde's, so it is spelled once.
    pub fn name(self) -> String {
        serde_json::to_value(self)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default()
    }
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
    /// Of the calls that time out at the seed's latencies, the share the server had already
    /// run (the seed's "done"): the network's losses are split between request and reply so
    /// that, with the seed's few slow calls (all run), this share results
    /// ([`SimConfig::loss_done_fraction`]). A slower carrier adds calls that ran.
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
    /// The store's sweeper (set by the run's plan from `--sweeper`), for how long a record
    /// lives: [`SimConfig::record_life_s`].
    #[serde(skip)]
    pub sweeper: crate::store::Sweeper,
    /// The retentions the decision weighs, each counted from this replay's log of requests
    /// (`candidates`; set by the run's plan). Empty: none counted.
    #[serde(skip)]
    pub candidates: Vec<super::candidates::Candidate>,
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
    /// Where replicate 0's carrier writes its invoice lines as it books them (`simulate
    /// --carrier-ledger`, given to the first job only: replicate 0 of the first job runs on
    /// the store the run names).
    #[serde(skip)]
    pub carrier_ledger: Option<std::sync::Arc<crate::carrier::LedgerFile>>,
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
            sweeper: crate::store::Sweeper::Delete,
            candidates: Vec::new(),
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
            carrier_ledger: None,
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

/// Arrivals long enough to fill the store and measure it: one retention, then half a
/// retention (at least 6 h) of steady state.
pub fn default_arrival_s(retention_s: f64) -> f64 {
    retention_s + (retention_s / 2.0).max(6.0 * 3600.0)
}

/// [`default_arrival_s`] rounded up to whole days: under a daily profile every per-day figure
/// divides by the days simulated, which is only right when each hour of the day is simulated
/// equally often (36 h holds one 16:00 rush in 1.5 days).
pub fn whole_days_arrival_s(retention_s: f64) -> f64 {
    let day = crate::duration::DAY_S;
    (default_arrival_s(retention_s) / day).ceil() * day
}

/// Share of calls the seed's carrier answers too late for the seed's deadline.
fn p_slow_at_seed() -> f64 {
    p_slow(&SEED_CARRIER_LATENCY, SEED_DEADLINE_MS, SEED_NETWORK_MS)
}

/// Why a simulation could not run: a parameter refused, or the engine or the store failed.
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
    /// The store failed after the run had started writing into it: the server went away, a
    /// connection or the run's hold on the store was lost. Its own exit code, since the input
    /// was fine and the store now holds a partial run.
    #[error(
        "the store failed after {} of {} simulated (it holds that part of the run: rerun on a new store, a new file, ?schema= or ?prefix=)",
        crate::duration::format_secs(simulated_s.round()),
        crate::duration::format_secs(arrival_s.round())
    )]
    StoreFailed {
        source: StoreError,
        simulated_s: f64,
        arrival_s: f64,
    },
    /// The carrier's ledger file stopped taking lines: the run stops, since a ledger missing a
    /// purchase would read as a purchase the carrier never made.
    #[error(
        "--carrier-ledger {}: cannot write an invoice line ({message}); the file holds the purchases before it",
        path.display()
    )]
    CarrierLedger {
        path: std::path::PathBuf,
        message: String,
    },
}

/// A [`SimError::Invalid`] naming the parameter.
pub(super) fn invalid(field: &'static str, message: impl Into<String>) -> SimError {
    SimError::Invalid {
        field,
        message: message.into(),
    }
}

impl SimConfig {
    /// How long a record stays in the store: its retention plus the sweeper's mean lag.
    pub fn record_life_s(&self) -> f64 {
        self.retention_s() + self.sweeper.mean_lag_s(self.sweep_period_s)
    }

    pub fn retention_s(&self) -> f64 {
        self.engine.retention_ms as f64 / 1000.0
    }

    pub fn arrival_s(&self) -> f64 {
        self.arrival_s
            .unwrap_or_else(|| default_arrival_s(self.retention_s()))
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
            let seed_slow = p_slow_at_seed();
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
        let p_slow = self.p_slow();
        let seed_slow = p_slow_at_seed();
        if self.network_loss_fraction.is_none()
            && p_slow == seed_slow
            && self.timeout_fraction >= seed_slow
        {
            // Calibrated at the seed's latencies: exactly the share asked, without the
            // rounding of going through the loss and back.
            return self.timeout_fraction;
        }
        let loss = self.network_loss();
        loss + (1.0 - loss) * p_slow
    }

    /// Of the calls the network loses, the share whose reply (not request) was lost, so the
    /// server had run them. Calibrated like [`Self::network_loss`]: at the seed's latencies the
    /// timed-out calls are the losses plus the slow calls, and every slow call ran, so the
    /// losses' share is `(done × p − (1 − loss) × slow) / loss` for the whole to be `done`. At
    /// the seed's 0.1 %: (0.6 × 0.001 − 0.999022 × 0.000022) / 0.000978 ≈ 0.591.
    pub fn loss_done_fraction(&self) -> f64 {
        let loss = self.network_loss();
        if loss <= 0.0 {
            return self.done_fraction;
        }
        let seed_slow = p_slow_at_seed();
        let p = loss + (1.0 - loss) * seed_slow;
        ((self.done_fraction * p - (1.0 - loss) * seed_slow) / loss).clamp(0.0, 1.0)
    }

    /// Of the calls expected to time out, the share the server had run, for the model beside
    /// the simulation: lost replies, slow calls and hung calls all ran.
    pub fn expected_done_fraction(&self) -> f64 {
        let p_slow = self.p_slow();
        if p_slow == p_slow_at_seed() && self.carrier.hang_fraction == 0.0 {
            // At the seed's latencies the losses are split to give exactly the share asked.
            return self.done_fraction;
        }
        let loss = self.network_loss();
        let first = self.p_first_timeout();
        let ran = loss * self.loss_done_fraction()
            + (1.0 - loss) * p_slow
            + (1.0 - first) * self.carrier.hang_fraction;
        let total = self.expected_timeout_fraction();
        if total > 0.0 {
            (ran / total).min(1.0)
        } else {
            self.done_fraction
        }
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

    /// The small world of the ground-truth check (`tests/it/sim.rs`, `examples/coverage.rs`): cheap
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

    /// Refuses impossible parameters before any work starts, naming the `SimConfig` field. The
    /// command line's values were checked against the knob table already (`settings`), so this
    /// guards only a `SimConfig` a library user built by hand; it names fields, not flags.
    pub fn validate(&self) -> Result<(), SimError> {
        let frac = |v: f64| (0.0..=1.0).contains(&v);
        if !(self.rate_per_s > 0.0 && self.rate_per_s.is_finite()) {
            return Err(invalid(
                "rate_per_s",
                format!("{} is not a positive rate", self.rate_per_s),
            ));
        }
        if !frac(self.timeout_fraction) {
            return Err(invalid(
                "timeout_fraction",
                "must be a fraction between 0 and 1",
            ));
        }
        if let Some(l) = self.network_loss_fraction
            && !frac(l)
        {
            return Err(invalid(
                "network_loss_fraction",
                "must be a fraction between 0 and 1",
            ));
        }
        if self.network_ms < 0 || self.deadline_ms <= 2 * self.network_ms {
            return Err(invalid(
                "deadline_ms",
                format!(
                    "{} ms leaves no time after the network's two legs of {} ms",
                    self.deadline_ms, self.network_ms
                ),
            ));
        }
        if !frac(self.done_fraction) {
            return Err(invalid(
                "done_fraction",
                "must be a fraction between 0 and 1",
            ));
        }
        if !frac(self.crash_fraction) {
            return Err(invalid(
                "crash_fraction",
                "must be a fraction between 0 and 1",
            ));
        }
        if let Some(s) = self.sample
            && !(s > 0.0 && s <= 1.0)
        {
            return Err(invalid("sample", format!("{s} is outside (0, 1]")));
        }
        if self.engine.retention_ms <= 0 {
            return Err(invalid("engine.retention_ms", "must be longer than zero"));
        }
        if let Some(a) = self.arrival_s
            && (a.is_nan() || a <= 0.0)
        {
            return Err(invalid("arrival_s", "must be longer than zero"));
        }
        if self.max_attempts == 0 {
            return Err(invalid("max_attempts", "must be at least 1"));
        }
        if self.sweep_batch == 0 || self.sweep_period_s.is_nan() || self.sweep_period_s <= 0.0 {
            return Err(invalid(
                "sweep_batch",
                "the sweeper needs a batch and a period above zero",
            ));
        }
        if self.callers == 0 {
            return Err(invalid("callers", "must be at least 1"));
        }
        Ok(())
    }
}
