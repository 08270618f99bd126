//! Scenario files: one TOML schema for scripted timelines (`idemcalc scenario`), simulated
//! traffic and the budgets a report checks (`idemcalc report`). The schema is documented in
//! `scenarios/README.md`.
//!
//! A scenario with only `[timeline]` is a timeline scenario; one with `[traffic]` is simulated
//! once per retention of `[engine] retention`; a file may have both. Unknown fields are refused
//! so a typo never silently means a default, and every error names the file, the line and the
//! field, because a scenario directory is edited by hand and checked by CI.

use crate::carrier::{CarrierConfig, Latency};
use crate::clock::Millis;
use crate::duration;
use crate::engine::{CarrierKey, DiePoint, EngineConfig, KeyScope, RecordPlacement};
use crate::model::ModelParams;
use crate::payload::{PayloadSizes, SizeDist};
use crate::sim::replay::{KeyPolicy, SimConfig};
use crate::traffic::{Arrivals, LoadProfile, RetryDelay};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A scenario that cannot be used. `line` is 1-based; it is absent only when the file could not
/// be read or the field does not appear in the file (a required field that is missing).
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{}: cannot read the scenario file: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: cannot read the scenario directory: {source}", path.display())]
    ReadDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}{}: field `{field}`: {message}", path.display(), at(*line, *column))]
    Invalid {
        path: PathBuf,
        line: Option<usize>,
        column: Option<usize>,
        field: String,
        message: String,
    },
}

fn at(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(":{l}:{c}"),
        (Some(l), None) => format!(":{l}"),
        _ => String::new(),
    }
}

impl ScenarioError {
    /// The dotted field the error is about (`traffic.timeout_fraction`), if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            ScenarioError::Read { .. } | ScenarioError::ReadDir { .. } => None,
            ScenarioError::Invalid { field, .. } => Some(field),
        }
    }

    pub fn line(&self) -> Option<usize> {
        match self {
            ScenarioError::Read { .. } | ScenarioError::ReadDir { .. } => None,
            ScenarioError::Invalid { line, .. } => *line,
        }
    }
}

fn ms(d: Duration) -> Millis {
    d.as_millis() as Millis
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Scenario {
    pub name: String,
    #[serde(default)]
    pub description: String,
    /// Every random choice of the run flows from this.
    #[serde(default = "default_seed")]
    pub seed: u64,
    #[serde(default)]
    pub engine: EngineSection,
    #[serde(default)]
    pub carrier: CarrierSection,
    pub timeline: Option<Timeline>,
    /// Synthetic traffic: present means the scenario is simulated.
    pub traffic: Option<TrafficSection>,
    /// Model inputs that neither the traffic nor the engine determine.
    #[serde(default)]
    pub model: ModelSection,
    /// Limits the report checks; a broken one makes `idemcalc report` exit 1.
    pub budgets: Option<Budgets>,
}

fn default_seed() -> u64 {
    1
}

/// One retention, or a list of them: a list runs one simulation per retention (a sweep).
#[derive(Debug, Clone, PartialEq)]
pub struct Retentions(pub Vec<Duration>);

impl Retentions {
    /// The first retention: what a timeline runs with.
    pub fn first(&self) -> Duration {
        self.0.first().copied().unwrap_or(Duration::ZERO)
    }
}

impl Serialize for Retentions {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let text: Vec<String> = self
            .0
            .iter()
            .map(|d| duration::format_secs(d.as_secs_f64()))
            .collect();
        match text.as_slice() {
            [one] => s.serialize_str(one),
            _ => text.serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for Retentions {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Retentions;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a duration like \"24h\" or a list of them like [\"24h\", \"3d\"]")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> Result<Retentions, E> {
                duration::parse(v)
                    .map(|d| Retentions(vec![d]))
                    .map_err(E::custom)
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(
                self,
                mut seq: A,
            ) -> Result<Retentions, A::Error> {
                let mut out = Vec::new();
                while let Some(text) = seq.next_element::<String>()? {
                    out.push(duration::parse(&text).map_err(serde::de::Error::custom)?);
                }
                Ok(Retentions(out))
            }
        }
        d.deserialize_any(V)
    }
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineSection {
    #[serde(with = "duration::serde_str")]
    pub lease: Duration,
    #[serde(with = "duration::serde_str")]
    pub carrier_timeout: Duration,
    /// How long completed records are kept: `"24h"`, or `["24h", "3d"]` to simulate each.
    pub retention: Retentions,
    pub key_scope: KeyScope,
    pub record_placement: RecordPlacement,
    pub carrier_key: CarrierKey,
}

impl Default for EngineSection {
    fn default() -> Self {
        let d = EngineConfig::default();
        Self {
            lease: Duration::from_millis(d.lease_ms as u64),
            carrier_timeout: Duration::from_millis(d.carrier_timeout_ms as u64),
            retention: Retentions(vec![Duration::from_millis(d.retention_ms as u64)]),
            key_scope: d.key_scope,
            record_placement: d.record_placement,
            carrier_key: d.carrier_key,
        }
    }
}

impl EngineSection {
    /// The engine at the first retention.
    pub fn to_config(&self) -> EngineConfig {
        self.config_with(self.retention.first())
    }

    pub fn config_with(&self, retention: Duration) -> EngineConfig {
        EngineConfig {
            lease_ms: ms(self.lease),
            carrier_timeout_ms: ms(self.carrier_timeout),
            retention_ms: ms(retention),
            key_scope: self.key_scope,
            record_placement: self.record_placement,
            carrier_key: self.carrier_key,
            ..EngineConfig::default()
        }
    }
}

/// The carrier's latency in a file: a fixed `"9s"`, or a `{ median = "40ms", p99 = "200ms" }`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(untagged)]
pub enum LatencySpec {
    Fixed(String),
    LogNormal { median: String, p99: String },
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CarrierSection {
    pub latency: LatencySpec,
    #[serde(with = "duration::serde_str")]
    pub window: Duration,
    pub price_usd: f64,
    pub hang_fraction: f64,
    pub error_fraction: f64,
}

impl Default for CarrierSection {
    fn default() -> Self {
        Self {
            latency: LatencySpec::LogNormal {
                median: "40ms".into(),
                p99: "200ms".into(),
            },
            window: Duration::from_secs(86_400),
            price_usd: 6.0,
            hang_fraction: 0.0,
            error_fraction: 0.0,
        }
    }
}

impl CarrierSection {
    pub fn to_config(&self, seed: u64) -> Result<CarrierConfig, (String, String)> {
        let dur = |field: &str, text: &str| {
            duration::parse(text).map_err(|e| (field.to_string(), e.to_string()))
        };
        let latency = match &self.latency {
            LatencySpec::Fixed(t) => Latency::Fixed {
                ms: ms(dur("carrier.latency", t)?),
            },
            LatencySpec::LogNormal { median, p99 } => {
                let median = dur("carrier.latency.median", median)?.as_secs_f64() * 1e3;
                let p99 = dur("carrier.latency.p99", p99)?.as_secs_f64() * 1e3;
                if median <= 0.0 || p99 < median {
                    return Err(("carrier.latency".into(), "needs 0 < median <= p99".into()));
                }
                Latency::LogNormal {
                    median_ms: median,
                    p99_ms: p99,
                }
            }
        };
        for (field, v) in [
            ("carrier.hang_fraction", self.hang_fraction),
            ("carrier.error_fraction", self.error_fraction),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err((
                    field.into(),
                    format!("{v} is not a fraction between 0 and 1"),
                ));
            }
        }
        if !(self.price_usd >= 0.0 && self.price_usd.is_finite()) {
            return Err((
                "carrier.price_usd".into(),
                "must be a price of 0 or more".into(),
            ));
        }
        if self.window.is_zero() {
            return Err(("carrier.window".into(), "must be longer than zero".into()));
        }
        Ok(CarrierConfig {
            latency,
            window_ms: ms(self.window),
            price_cents: (self.price_usd * 100.0).round() as i64,
            hang_fraction: self.hang_fraction,
            error_fraction: self.error_fraction,
            seed,
            ..CarrierConfig::default()
        })
    }
}

/// A daily rush on top of `traffic.rate`: the seed's pre-holiday packing rush at 2,000/s.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rush {
    /// Label creates per second during the rush.
    pub rate: f64,
    /// Time after midnight the rush starts, e.g. `"16h"`.
    #[serde(with = "duration::serde_str")]
    pub start: Duration,
    #[serde(with = "duration::serde_str")]
    pub duration: Duration,
}

/// Synthetic traffic, as `idemcalc simulate` takes it on its command line. Defaults are the
/// seed's (and `simulate`'s).
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TrafficSection {
    /// Label creates per second.
    pub rate: f64,
    pub rush: Option<Rush>,
    /// How long traffic arrives, in simulated time; default one retention plus half a retention
    /// (at least 6 h) of steady state.
    #[serde(with = "duration::serde_opt")]
    pub duration: Option<Duration>,
    /// Fraction of ordinary calls replayed, in (0, 1]; default: about `target` intents.
    pub sample: Option<f64>,
    /// How many ordinary intents the automatic sample aims for: the knob that trades run time
    /// against the width of the intervals.
    pub target: f64,
    /// Independent replicates, pooled into the intervals.
    pub replicates: u32,
    pub timeout_fraction: f64,
    pub done_fraction: f64,
    pub key_policy: KeyPolicy,
    /// Callers (tenants) sharing order numbering.
    pub callers: u32,
    /// Fraction of attempts killed at `crash_point`.
    pub crash_rate: f64,
    pub crash_point: DiePoint,
    /// Attempts per intent in the client's in-process retry loop, the first included.
    pub max_attempts: u32,
    #[serde(with = "duration::serde_str")]
    pub deadline: Duration,
    #[serde(with = "duration::serde_str")]
    pub backoff_base: Duration,
    #[serde(with = "duration::serde_str")]
    pub backoff_cap: Duration,
    /// How often the sweeper runs.
    #[serde(with = "duration::serde_str")]
    pub sweep_period: Duration,
    /// Records the sweeper deletes per batch.
    pub sweep_batch: u32,
    /// Points of the keys-in-the-store time series; raise it to see the sweeper's saw-tooth.
    pub series_points: u32,
    /// Idempotency-key length (default the seed's 36 B); see `payload::SizeDist` for the forms.
    pub key_bytes: Option<SizeDist>,
    /// Saved 201 response size (default the seed's 300 B).
    pub response_bytes: Option<SizeDist>,
    /// A measured late-retry distribution (what `idemcalc fit` writes); default the seed's.
    pub retry_delay: Option<crate::fit::RetrySpec>,
}

impl Default for TrafficSection {
    fn default() -> Self {
        let d = SimConfig::default();
        Self {
            rate: d.rate_per_s,
            rush: None,
            duration: None,
            sample: None,
            target: d.target_ordinary,
            replicates: 1,
            timeout_fraction: d.timeout_fraction,
            done_fraction: d.done_fraction,
            key_policy: d.key_policy,
            callers: d.callers,
            crash_rate: d.crash_fraction,
            crash_point: d.crash_point,
            max_attempts: d.max_attempts,
            deadline: Duration::from_millis(d.deadline_ms as u64),
            backoff_base: Duration::from_millis(d.backoff_base_ms as u64),
            backoff_cap: Duration::from_millis(d.backoff_cap_ms as u64),
            sweep_period: Duration::from_secs_f64(d.sweep_period_s),
            sweep_batch: d.sweep_batch,
            series_points: d.series_points,
            key_bytes: None,
            response_bytes: None,
            retry_delay: None,
        }
    }
}

/// Model inputs that neither the traffic nor the engine set. Absent values are the seed's.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ModelSection {
    /// Sizes the worst-case store, calls/s; default the traffic's peak (its rush, or its rate).
    pub peak_rate: Option<f64>,
    /// The assumed record size the model uses, bytes (the simulator measures its own).
    pub bytes_per_record: Option<f64>,
    pub storage_usd_per_gb_month: Option<f64>,
    pub unlabelled_parcel_usd: Option<f64>,
    /// Full copies of the store paid for (primary plus standbys); default 2.
    pub replicas: Option<f64>,
}

/// Limits on the simulated figures. Each applies to every retention the scenario runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Budgets {
    /// Steady-state store size, decimal GB (10⁹ bytes), at the measured bytes per record.
    pub max_store_gb: Option<f64>,
    /// Real duplicate labels per day at full traffic.
    pub max_duplicates_per_day: Option<f64>,
    /// Storage plus duplicate labels, USD per day.
    pub max_cost_per_day: Option<f64>,
}

/// A scripted timeline: requests sent at fixed virtual times.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Timeline {
    /// One-way network delay.
    #[serde(default = "default_network", with = "duration::serde_str")]
    pub network: Duration,
    /// Server time from txn 1 to the carrier call.
    #[serde(default = "default_processing", with = "duration::serde_str")]
    pub processing: Duration,
    /// The body requests send unless they name their own.
    pub body: Option<toml::Value>,
    #[serde(rename = "request")]
    pub requests: Vec<TimelineRequest>,
}

fn default_network() -> Duration {
    Duration::from_millis(200)
}
fn default_processing() -> Duration {
    Duration::from_millis(300)
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TimelineRequest {
    /// A name for the lane this request is drawn in ("Attempt 1", "Retries").
    pub lane: Option<String>,
    #[serde(with = "duration::serde_str")]
    pub sent: Duration,
    #[serde(default = "default_caller")]
    pub caller: String,
    /// The idempotency key; absent means the body's derived key (`label:ORDER:PARCEL:vN`).
    pub key: Option<String>,
    /// Send no key at all (the 400 idempotency_key_missing case).
    #[serde(default)]
    pub no_key: bool,
    pub body: Option<toml::Value>,
    /// A body sent verbatim, for malformed input.
    pub raw_body: Option<String>,
    #[serde(default, with = "duration::serde_opt")]
    pub carrier_latency: Option<Duration>,
    /// Server time from the carrier's answer to txn 2.
    #[serde(default, with = "duration::serde_opt")]
    pub finish: Option<Duration>,
    pub die: Option<DiePoint>,
}

fn default_caller() -> String {
    "fulfilment".to_string()
}

/// Bounds on what a scenario may ask for, so a typo cannot start a week-long run: a limit on
/// everything, as TIGER_STYLE asks.
const MAX_REPLICATES: u32 = 64;
const MAX_CALLERS: u32 = 10_000;
const MAX_SERIES_POINTS: u32 = 100_000;
const MAX_ATTEMPTS: u32 = 100;
/// 90 days of simulated arrivals; the late-retry distribution's horizon is 30 days.
const MAX_SIMULATED_S: f64 = 90.0 * 86_400.0;
const MAX_RETENTIONS: usize = 32;

impl Scenario {
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses and validates `text`; `path` names the file in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ScenarioError> {
        let scenario: Scenario = toml::from_str(text).map_err(|e| {
            let (line, column, field) = match e.span() {
                Some(span) => {
                    let (line, column) = line_col(text, span.start);
                    (Some(line), Some(column), field_at(text, span.start))
                }
                None => (None, None, String::new()),
            };
            let message = e.message().trim_end().to_string();
            // A missing required field has no span of its own; the message names it.
            let field = if field.is_empty() {
                missing_field(&message).unwrap_or_default()
            } else {
                field
            };
            ScenarioError::Invalid {
                path: path.to_path_buf(),
                line,
                column,
                field,
                message,
            }
        })?;
        scenario
            .validate()
            .map_err(|(field, message)| ScenarioError::Invalid {
                path: path.to_path_buf(),
                line: locate(text, &field),
                column: None,
                field,
                message,
            })?;
        Ok(scenario)
    }

    /// Range and consistency checks that one field's type cannot express; returns the dotted
    /// field and what is wrong with it.
    fn validate(&self) -> Result<(), (String, String)> {
        let fail = |field: &str, message: String| Err((field.to_string(), message));
        let e = &self.engine;
        // The name becomes part of output file names (tables/<name>-series.csv), so it must not
        // be able to climb out of the output directory.
        let name_ok = !self.name.is_empty()
            && !self.name.starts_with('.')
            && self.name.len() <= 100
            && self
                .name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !name_ok {
            return fail(
                "name",
                format!(
                    "{:?}: use up to 100 letters, digits, '-', '_' or '.', not starting with '.' (it names output files)",
                    self.name
                ),
            );
        }
        if e.lease.is_zero() {
            return fail("engine.lease", "must be longer than zero".into());
        }
        if e.retention.0.is_empty() {
            return fail("engine.retention", "give at least one retention".into());
        }
        if e.retention.0.len() > MAX_RETENTIONS {
            return fail(
                "engine.retention",
                format!("at most {MAX_RETENTIONS} retentions per scenario"),
            );
        }
        if e.retention.0.iter().any(|r| r.is_zero()) {
            return fail("engine.retention", "must be longer than zero".into());
        }
        if e.carrier_timeout.is_zero() {
            return fail("engine.carrier_timeout", "must be longer than zero".into());
        }
        self.carrier.to_config(self.seed)?;
        if let Some(t) = &self.timeline {
            if t.requests.is_empty() {
                return fail("timeline.request", "needs at least one request".into());
            }
            for (i, r) in t.requests.iter().enumerate() {
                if r.body.is_none() && r.raw_body.is_none() && t.body.is_none() {
                    return fail(
                        &format!("timeline.request[{i}].body"),
                        "no body here and no timeline.body to default to".into(),
                    );
                }
            }
        }
        if let Some(t) = &self.traffic {
            t.validate(&e.retention)?;
        }
        let m = &self.model;
        for (field, value) in [
            ("model.peak_rate", m.peak_rate),
            ("model.bytes_per_record", m.bytes_per_record),
        ] {
            if let Some(v) = value
                && !(v > 0.0 && v.is_finite())
            {
                return fail(field, format!("{v} must be a number above 0"));
            }
        }
        for (field, value) in [
            ("model.storage_usd_per_gb_month", m.storage_usd_per_gb_month),
            ("model.unlabelled_parcel_usd", m.unlabelled_parcel_usd),
        ] {
            if let Some(v) = value
                && !(v >= 0.0 && v.is_finite())
            {
                return fail(field, format!("{v} must be a price of 0 or more"));
            }
        }
        if let Some(b) = &self.budgets {
            if self.traffic.is_none() {
                return fail(
                    "budgets",
                    "budgets apply to simulated figures; add a [traffic] section".into(),
                );
            }
            if b.max_store_gb.is_some() {
                // The store is measured once it is steady, after one retention and a sweep.
                for cfg in self.sim_configs() {
                    let steady_from = cfg.retention_s() + cfg.sweep_period_s;
                    if cfg.arrival_s() <= steady_from {
                        return fail(
                            "budgets.max_store_gb",
                            format!(
                                "the store is measured in its steady state, after one retention ({}) and a sweep; traffic.duration ({}) must be longer",
                                duration::format_secs(cfg.retention_s()),
                                duration::format_secs(cfg.arrival_s())
                            ),
                        );
                    }
                }
            }
            for (field, value) in [
                ("budgets.max_store_gb", b.max_store_gb),
                ("budgets.max_duplicates_per_day", b.max_duplicates_per_day),
                ("budgets.max_cost_per_day", b.max_cost_per_day),
            ] {
                if let Some(v) = value
                    && !(v >= 0.0 && v.is_finite())
                {
                    return fail(field, format!("{v} must be a limit of 0 or more"));
                }
            }
        }
        if self.timeline.is_none() && self.traffic.is_none() {
            return fail(
                "traffic",
                "nothing to run: add a [traffic] section (simulated) or a [timeline] (scripted)"
                    .into(),
            );
        }
        // The model must accept what the scenario implies, e.g. a peak below the average.
        if self.traffic.is_some() {
            for r in &e.retention.0 {
                let p = self
                    .model_params(*r)
                    .map_err(|e| ("traffic".to_string(), e))?;
                p.validate().map_err(|err| {
                    let field = match err.name {
                        "peak_rate_per_s" => "model.peak_rate",
                        "bytes_per_record" => "model.bytes_per_record",
                        "rate_per_s" => "traffic.rate",
                        _ => "model",
                    };
                    (field.to_string(), err.to_string())
                })?;
            }
        }
        Ok(())
    }

    pub fn engine_config(&self) -> EngineConfig {
        self.engine.to_config()
    }

    pub fn carrier_config(&self) -> CarrierConfig {
        // Validated on load, so the fallback is never taken for a loaded scenario.
        self.carrier.to_config(self.seed).unwrap_or_default()
    }

    /// The arrival process of `[traffic]`: Poisson at `rate`, with the daily rush if given.
    /// `None` for a timeline-only scenario.
    pub fn arrivals(&self) -> Option<Result<Arrivals, String>> {
        let t = self.traffic.as_ref()?;
        Some(t.arrivals())
    }

    /// One simulation per retention, in the order the file lists them. Empty for a
    /// timeline-only scenario.
    pub fn sim_configs(&self) -> Vec<SimConfig> {
        let Some(t) = &self.traffic else {
            return Vec::new();
        };
        self.engine
            .retention
            .0
            .iter()
            .map(|r| {
                t.sim_config(
                    self.seed,
                    self.engine.config_with(*r),
                    self.carrier_config(),
                )
            })
            .collect()
    }

    /// The late-retry distribution: `[traffic] retry_delay` if given (validated on load), else
    /// the seed's.
    pub fn retry_delay(&self) -> RetryDelay {
        self.traffic
            .as_ref()
            .and_then(|t| t.retry_delay.as_ref())
            .and_then(|r| r.to_retry_delay().ok())
            .unwrap_or_default()
    }

    /// What the analytic model is asked for this scenario at `retention`: the traffic's rate and
    /// fractions, the carrier's price and window, and `[model]` for the rest.
    pub fn model_params(&self, retention: Duration) -> Result<ModelParams, String> {
        let seed = ModelParams::default();
        let t = self.traffic.clone().unwrap_or_default();
        let arrivals = t.arrivals()?;
        let peak = match &t.rush {
            Some(r) => r.rate.max(t.rate),
            None => t.rate,
        };
        Ok(ModelParams {
            rate_per_s: arrivals.mean_rate_per_s(),
            peak_rate_per_s: self.model.peak_rate.unwrap_or(peak),
            retention_s: retention.as_secs_f64(),
            bytes_per_record: self
                .model
                .bytes_per_record
                .unwrap_or_else(|| t.payload().record_bytes()),
            timeout_fraction: t.timeout_fraction,
            done_fraction: t.done_fraction,
            label_price_usd: self.carrier.price_usd,
            carrier_window_s: self.carrier.window.as_secs_f64(),
            storage_usd_per_gb_month: self
                .model
                .storage_usd_per_gb_month
                .unwrap_or(seed.storage_usd_per_gb_month),
            unlabelled_parcel_usd: self
                .model
                .unlabelled_parcel_usd
                .unwrap_or(seed.unlabelled_parcel_usd),
            replicas: self.model.replicas.unwrap_or(seed.replicas),
        })
    }
}

impl TrafficSection {
    pub fn arrivals(&self) -> Result<Arrivals, String> {
        let base = Arrivals::constant(self.rate).map_err(|e| e.to_string())?;
        match &self.rush {
            None => Ok(base),
            Some(r) => LoadProfile::rush(
                self.rate,
                r.rate,
                r.start.as_secs_f64(),
                r.duration.as_secs_f64(),
            )
            .map(Arrivals::Profile)
            .map_err(|e| e.to_string()),
        }
    }

    /// The payload sizes the traffic carries, the seed's where not given.
    pub fn payload(&self) -> PayloadSizes {
        let d = PayloadSizes::default();
        PayloadSizes {
            key_bytes: self.key_bytes.clone().unwrap_or(d.key_bytes),
            response_bytes: self.response_bytes.clone().unwrap_or(d.response_bytes),
        }
    }

    fn sim_config(&self, seed: u64, engine: EngineConfig, carrier: CarrierConfig) -> SimConfig {
        let engine = EngineConfig {
            payload: self.payload(),
            ..engine
        };
        SimConfig {
            rate_per_s: self.rate,
            arrival_s: self.duration.map(|d| d.as_secs_f64()),
            sample: self.sample,
            target_ordinary: self.target,
            timeout_boost: None,
            timeout_fraction: self.timeout_fraction,
            done_fraction: self.done_fraction,
            key_policy: self.key_policy,
            deadline_ms: ms(self.deadline),
            max_attempts: self.max_attempts,
            backoff_base_ms: ms(self.backoff_base),
            backoff_cap_ms: ms(self.backoff_cap),
            sweep_period_s: self.sweep_period.as_secs_f64(),
            sweep_batch: self.sweep_batch,
            crash_fraction: self.crash_rate,
            crash_point: self.crash_point,
            callers: self.callers,
            engine,
            carrier,
            seed,
            series_points: self.series_points,
            request_log: false,
        }
    }

    fn validate(&self, retentions: &Retentions) -> Result<(), (String, String)> {
        let fail = |field: &str, message: String| Err((format!("traffic.{field}"), message));
        let fraction = |v: f64| (0.0..=1.0).contains(&v);
        if let Some(r) = &self.retry_delay
            && let Err(e) = r.to_retry_delay()
        {
            return fail("retry_delay", e);
        }
        if !(self.rate > 0.0 && self.rate.is_finite()) {
            return fail(
                "rate",
                format!("{} must be a rate above 0 calls/s", self.rate),
            );
        }
        if let Some(r) = &self.rush {
            if !(r.rate >= 0.0 && r.rate.is_finite()) {
                return fail("rush", format!("rate {} must be 0 calls/s or more", r.rate));
            }
            if let Err(e) = self.arrivals() {
                return fail("rush", e);
            }
        }
        for (field, v) in [
            ("timeout_fraction", self.timeout_fraction),
            ("done_fraction", self.done_fraction),
            ("crash_rate", self.crash_rate),
        ] {
            if !fraction(v) {
                return fail(field, format!("{v} is not a fraction between 0 and 1"));
            }
        }
        if let Some(s) = self.sample
            && !(s > 0.0 && s <= 1.0)
        {
            return fail("sample", format!("{s} is outside (0, 1]"));
        }
        if !(self.target >= 1.0 && self.target.is_finite()) {
            return fail(
                "target",
                format!("{} must be at least 1 intent", self.target),
            );
        }
        if !(1..=MAX_REPLICATES).contains(&self.replicates) {
            return fail(
                "replicates",
                format!("{} is outside 1..={MAX_REPLICATES}", self.replicates),
            );
        }
        if !(1..=MAX_CALLERS).contains(&self.callers) {
            return fail(
                "callers",
                format!("{} is outside 1..={MAX_CALLERS}", self.callers),
            );
        }
        if !(1..=MAX_ATTEMPTS).contains(&self.max_attempts) {
            return fail(
                "max_attempts",
                format!("{} is outside 1..={MAX_ATTEMPTS}", self.max_attempts),
            );
        }
        if !(2..=MAX_SERIES_POINTS).contains(&self.series_points) {
            return fail(
                "series_points",
                format!("{} is outside 2..={MAX_SERIES_POINTS}", self.series_points),
            );
        }
        if self.sweep_batch == 0 {
            return fail("sweep_batch", "must be at least 1".into());
        }
        for (field, d) in [
            ("deadline", self.deadline),
            ("backoff_base", self.backoff_base),
            ("backoff_cap", self.backoff_cap),
            ("sweep_period", self.sweep_period),
        ] {
            if d.is_zero() {
                return fail(field, "must be longer than zero".into());
            }
        }
        if let Some(d) = self.duration {
            if d.is_zero() {
                return fail("duration", "must be longer than zero".into());
            }
            if d.as_secs_f64() > MAX_SIMULATED_S {
                return fail(
                    "duration",
                    format!(
                        "{} is longer than the 90d limit",
                        duration::format_secs(d.as_secs_f64())
                    ),
                );
            }
        }
        for r in &retentions.0 {
            let cfg = self.sim_config(1, EngineConfig::default(), CarrierConfig::default());
            let cfg = SimConfig {
                engine: EngineConfig {
                    retention_ms: ms(*r),
                    ..cfg.engine
                },
                ..cfg
            };
            if cfg.arrival_s() > MAX_SIMULATED_S {
                return Err((
                    "engine.retention".into(),
                    format!(
                        "{} gives {} of simulated arrivals, longer than the 90d limit; set traffic.duration",
                        duration::format_secs(r.as_secs_f64()),
                        duration::format_secs(cfg.arrival_s().round())
                    ),
                ));
            }
        }
        Ok(())
    }
}

/// 1-based line and column of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.chars().count(), |i| before[i + 1..].chars().count())
        + 1;
    (line, column)
}

/// The table a line belongs to, if the line is a `[table]` or `[[table]]` header.
fn header(line: &str) -> Option<&str> {
    let t = line.trim();
    let t = t.split('#').next().unwrap_or("").trim();
    if let Some(inner) = t.strip_prefix("[[").and_then(|s| s.strip_suffix("]]")) {
        return Some(inner.trim());
    }
    t.strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .map(str::trim)
}

/// The key a `key = value` line sets.
fn key_of(line: &str) -> Option<&str> {
    let t = line.trim();
    if t.starts_with('#') || t.starts_with('[') {
        return None;
    }
    let (key, _) = t.split_once('=')?;
    Some(key.trim().trim_matches('"'))
}

/// The dotted field at byte `offset`: the enclosing table plus the key of that line.
fn field_at(text: &str, offset: usize) -> String {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let line = &text[line_start..line_end];
    if let Some(h) = header(line) {
        return h.to_string();
    }
    let table = text[..line_start].lines().rev().find_map(header);
    // For an inline table (`rush = { rate = -1 }`) name the key nearest before the offset.
    let in_line = &text[line_start..offset];
    let key = match key_of(line) {
        Some(outer) => {
            let inner = in_line
                .rsplit(['{', ','])
                .next()
                .and_then(key_of)
                .filter(|k| *k != outer);
            match inner {
                Some(k) if in_line.contains('{') => format!("{outer}.{k}"),
                _ => outer.to_string(),
            }
        }
        None => in_line.split_whitespace().next().unwrap_or("").to_string(),
    };
    match table {
        Some(t) if !key.is_empty() => format!("{t}.{key}"),
        Some(t) => t.to_string(),
        None => key,
    }
}

/// "missing field `name`" → `name`.
fn missing_field(message: &str) -> Option<String> {
    let rest = message.split("missing field `").nth(1)?;
    Some(rest.split('`').next()?.to_string())
}

/// The 1-based line where the dotted `field` is set, or its table's header, or none.
/// `timeline.request[2].body` finds the third `[[timeline.request]]`.
fn locate(text: &str, field: &str) -> Option<usize> {
    let parts: Vec<&str> = field.split('.').collect();
    // Longest prefix first: the key itself, then its table.
    for n in (1..=parts.len()).rev() {
        let (table_parts, key) = parts[..n].split_at(n - 1);
        let key = key[0];
        let (key, index) = match key.split_once('[') {
            Some((k, i)) => (k, i.trim_end_matches(']').parse::<usize>().ok()),
            None => (key, None),
        };
        let table = table_parts.join(".");
        let mut current = String::new();
        let mut seen = 0usize;
        for (i, line) in text.lines().enumerate() {
            if let Some(h) = header(line) {
                current = h.to_string();
                let full = if table.is_empty() {
                    key.to_string()
                } else {
                    format!("{table}.{key}")
                };
                if h == full {
                    if index.is_none_or(|want| want == seen) {
                        return Some(i + 1);
                    }
                    seen += 1;
                }
                continue;
            }
            if current == table && key_of(line) == Some(key) {
                return Some(i + 1);
            }
        }
    }
    None
}

/// Converts a TOML body to the JSON text a client would send.
pub fn body_text(v: &toml::Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse(Path::new("x.toml"), text)
    }

    fn err(text: &str) -> (Option<usize>, String, String) {
        let e = parse(text).unwrap_err();
        let shown = e.to_string();
        (e.line(), e.field().unwrap_or("").to_string(), shown)
    }

    /// Lines 1-4; a test's own lines start at line 5.
    const TRAFFIC: &str = "name = \"t\"\n[engine]\nretention = [\"24h\", \"3d\"]\n[traffic]\n";

    #[test]
    fn a_sweep_gives_one_sim_config_per_retention() {
        let s = parse(&format!("{TRAFFIC}rate = 400\n")).unwrap();
        let configs = s.sim_configs();
        assert_eq!(configs.len(), 2);
        assert_eq!(configs[1].engine.retention_ms, 259_200_000);
        assert_eq!(configs[0].rate_per_s, 400.0);
        let p = s.model_params(Duration::from_secs(86_400)).unwrap();
        assert_eq!(p.rate_per_s, 400.0);
        assert_eq!(p.peak_rate_per_s, 400.0);
    }

    #[test]
    fn a_rush_sets_the_peak_and_the_mean() {
        let s = parse(&format!(
            "{TRAFFIC}rate = 400\nrush = {{ rate = 2000, start = \"16h\", duration = \"4h\" }}\n"
        ))
        .unwrap();
        let p = s.model_params(Duration::from_secs(86_400)).unwrap();
        assert_eq!(p.peak_rate_per_s, 2000.0);
        assert!((p.rate_per_s - (400.0 * 20.0 + 2000.0 * 4.0) / 24.0).abs() < 1e-9);
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let cases = [
            // unknown field
            (
                format!("{TRAFFIC}rate = 400\nsampel = 0.1\n"),
                6,
                "traffic.sampel",
            ),
            // bad duration in a list
            (
                "name = \"t\"\n[engine]\nretention = [\"24h\", \"3 parsecs\"]\n[traffic]\n"
                    .to_string(),
                3,
                "engine.retention",
            ),
            // out of range, caught after parsing
            (
                format!("{TRAFFIC}rate = 400\ntimeout_fraction = 1.5\n"),
                6,
                "traffic.timeout_fraction",
            ),
            (format!("{TRAFFIC}rate = -3\n"), 5, "traffic.rate"),
            (
                format!("{TRAFFIC}rate = 400\n[budgets]\nmax_store_gb = -1\n"),
                7,
                "budgets.max_store_gb",
            ),
            (
                format!(
                    "{TRAFFIC}rate = 400\nrush = {{ rate = 2000, start = \"23h\", duration = \"4h\" }}\n"
                ),
                6,
                "traffic.rush",
            ),
            (
                "name = \"t\"\n[traffic]\n[budgets]\nmax_cost = 3\n".to_string(),
                4,
                "budgets.max_cost",
            ),
            (
                "name = \"t\"\n[trafic]\nrate = 3\n".to_string(),
                2,
                "trafic",
            ),
        ];
        for (text, line, field) in cases {
            let (got_line, got_field, shown) = err(&text);
            assert_eq!(got_field, field, "{shown}");
            assert_eq!(got_line, Some(line), "{shown}");
            assert!(shown.starts_with(&format!("x.toml:{line}")), "{shown}");
            assert!(shown.contains(field), "{shown}");
        }
    }

    #[test]
    fn nothing_to_run_and_budgets_without_traffic_are_refused() {
        let (_, field, _) = err("name = \"t\"\n");
        assert_eq!(field, "traffic");
        let (line, field, _) = err(
            "name = \"t\"\n[budgets]\nmax_store_gb = 3\n[timeline]\nbody = {a = 1}\n[[timeline.request]]\nsent = \"0s\"\n",
        );
        assert_eq!((line, field.as_str()), (Some(2), "budgets"));
    }

    #[test]
    fn names_cannot_leave_the_output_directory() {
        for bad in ["../x", "a/b", ".hidden", "", "tab\there"] {
            let text = format!("name = {bad:?}\n[traffic]\n");
            let (line, field, shown) = err(&text);
            assert_eq!((line, field.as_str()), (Some(1), "name"), "{shown}");
        }
        assert!(parse("name = \"ok-1.2_x\"\n[traffic]\n").is_ok());
    }

    #[test]
    fn retention_round_trips_as_one_or_many() {
        let s = parse(TRAFFIC).unwrap();
        let text = toml::to_string(&s.engine).unwrap();
        assert!(text.contains("retention = [\"1d\", \"3d\"]"), "{text}");
    }
}
