//! Scenario files: one TOML schema for scripted timelines (`idemcalc scenario`) and, as the
//! simulator and report grow, for traffic, retentions and budgets. The schema is documented in
//! `scenarios/README.md`; unknown fields are refused so a typo never silently means a default.

use crate::carrier::{CarrierConfig, Latency};
use crate::clock::Millis;
use crate::duration;
use crate::engine::{CarrierKey, DiePoint, EngineConfig, KeyScope, RecordPlacement};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    #[error("{path}: cannot read the scenario file: {source}")]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{path}: {message}")]
    Parse { path: PathBuf, message: String },
    #[error("{path}: field `{field}`: {message}")]
    Invalid {
        path: PathBuf,
        field: String,
        message: String,
    },
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
}

fn default_seed() -> u64 {
    1
}

#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineSection {
    #[serde(with = "duration::serde_str")]
    pub lease: Duration,
    #[serde(with = "duration::serde_str")]
    pub carrier_timeout: Duration,
    #[serde(with = "duration::serde_str")]
    pub retention: Duration,
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
            retention: Duration::from_millis(d.retention_ms as u64),
            key_scope: d.key_scope,
            record_placement: d.record_placement,
            carrier_key: d.carrier_key,
        }
    }
}

impl EngineSection {
    pub fn to_config(&self) -> EngineConfig {
        EngineConfig {
            lease_ms: ms(self.lease),
            carrier_timeout_ms: ms(self.carrier_timeout),
            retention_ms: ms(self.retention),
            key_scope: self.key_scope,
            record_placement: self.record_placement,
            carrier_key: self.carrier_key,
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

impl Scenario {
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Read {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &text)
    }

    pub fn parse(path: &Path, text: &str) -> Result<Self, ScenarioError> {
        let scenario: Scenario = toml::from_str(text).map_err(|e| ScenarioError::Parse {
            path: path.to_path_buf(),
            message: e.to_string().trim_end().to_string(),
        })?;
        scenario.validate(path)?;
        Ok(scenario)
    }

    fn validate(&self, path: &Path) -> Result<(), ScenarioError> {
        let invalid = |field: &str, message: String| ScenarioError::Invalid {
            path: path.to_path_buf(),
            field: field.to_string(),
            message,
        };
        let e = &self.engine;
        if e.lease.is_zero() {
            return Err(invalid("engine.lease", "must be longer than zero".into()));
        }
        if e.retention.is_zero() {
            return Err(invalid(
                "engine.retention",
                "must be longer than zero".into(),
            ));
        }
        if e.carrier_timeout.is_zero() {
            return Err(invalid(
                "engine.carrier_timeout",
                "must be longer than zero".into(),
            ));
        }
        self.carrier
            .to_config(self.seed)
            .map_err(|(field, message)| invalid(&field, message))?;
        if let Some(t) = &self.timeline {
            if t.requests.is_empty() {
                return Err(invalid(
                    "timeline.request",
                    "needs at least one request".into(),
                ));
            }
            for (i, r) in t.requests.iter().enumerate() {
                if r.body.is_none() && r.raw_body.is_none() && t.body.is_none() {
                    return Err(invalid(
                        &format!("timeline.request[{i}].body"),
                        "no body here and no timeline.body to default to".into(),
                    ));
                }
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
}

/// Converts a TOML body to the JSON text a client would send.
pub fn body_text(v: &toml::Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}
