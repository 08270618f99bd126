//! One validated [`Settings`] value, whichever way the parameters came in.
//!
//! Command-line flags ([`flags`]) and scenario files ([`crate::scenario::file`]) only *record* raw values
//! (ripgrep's low-level args); [`Settings::from_values`] is the one place they are checked
//! against the one table of defaults and limits ([`knobs::KNOBS`]) and cross-checked. After it,
//! only valid values travel: `run`, `sim` and `model` take a `Settings` (or what it converts
//! to: [`SimConfig`], [`ModelParams`], [`Arrivals`]) and never re-parse; `run::Plan` resolves
//! them, the retry distribution's file included, once per run.
//!
//! Errors name the knob; the caller says where it came from: the real flag (`--retention`) or
//! `file:line:field`.

pub mod flags;
pub mod knobs;

use crate::carrier::{CarrierConfig, Latency};
use crate::decision::{DEFAULT_MAX_DUPLICATES_PER_DAY, Targets};
use crate::duration::{self, ms};
use crate::engine::{CarrierKey, DiePoint, EngineConfig, KeyScope, OrderSpace, RecordPlacement};
use crate::model::ModelParams;
use crate::sim::replay::{KeyPolicy, SimConfig};
use crate::sweeper::SweeperPlan;
use crate::traffic::{Arrivals, Head, LoadProfile, Tail};
use knobs::{KNOBS, KnobId as K, Raw, Value, knob};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

/// A knob whose value was refused. `knob` names the row; flags and files turn it into the
/// flag or the `file:line:field` the user wrote.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("{}: {message}", knobs::knob(*knob).flag)]
pub struct SettingsError {
    pub knob: K,
    /// A file field more precise than the knob's own (e.g. `traffic.rush` for the whole rush).
    pub field: Option<&'static str>,
    pub message: String,
    /// The value is not of the right form (vs. out of range): a file error then has a column.
    pub unreadable: bool,
}

impl SettingsError {
    fn new(knob: K, message: String) -> Self {
        SettingsError {
            knob,
            field: None,
            message,
            unreadable: false,
        }
    }
}

/// Checked values by knob, and whether each was given (rather than defaulted).
#[derive(Debug, Clone, Default)]
pub struct Values {
    values: BTreeMap<K, (Value, bool)>,
}

impl Values {
    /// Checks every raw value and fills every default from the table: the one validator.
    /// `raw` yields the values given, by knob.
    pub fn check(raw: impl IntoIterator<Item = (K, Raw)>) -> Result<Values, SettingsError> {
        let mut values = BTreeMap::new();
        for (id, r) in raw {
            let k = knob(id);
            let v = k.check(&r).map_err(|refusal| SettingsError {
                knob: id,
                field: None,
                message: refusal.message,
                unreadable: refusal.unreadable,
            })?;
            values.insert(id, (v, true));
        }
        for k in KNOBS {
            if values.contains_key(&k.id) {
                continue;
            }
            if let Some(d) = k.default {
                let v = k
                    .check(&Raw::Text(d.to_string()))
                    .unwrap_or_else(|r| panic!("the default of {} is refused: {r:?}", k.name));
                values.insert(k.id, (v, false));
            }
        }
        Ok(Values { values })
    }

    fn get(&self, id: K) -> Option<&Value> {
        self.values.get(&id).map(|(v, _)| v)
    }

    fn given(&self, id: K) -> bool {
        self.values.get(&id).is_some_and(|(_, g)| *g)
    }

    fn duration(&self, id: K) -> Option<Duration> {
        match self.get(id)? {
            Value::Duration(d) => Some(*d),
            _ => None,
        }
    }

    fn number(&self, id: K) -> Option<f64> {
        match self.get(id)? {
            Value::Number(v) => Some(*v),
            _ => None,
        }
    }

    fn switch(&self, id: K) -> bool {
        matches!(self.get(id), Some(Value::Switch(true)))
    }

    fn count(&self, id: K) -> Option<u64> {
        match self.get(id)? {
            Value::Count(v) => Some(*v),
            _ => None,
        }
    }

    /// `--sweeper` and `--partition-period` as one plan; the knob's words are
    /// `SweeperPlan::NAMES`, so every word it lets through names a plan.
    fn sweeper(&self) -> SweeperPlan {
        let word = match self.get(K::Sweeper) {
            Some(Value::Choice(w)) => *w,
            other => panic!("sweeper: not a choice: {other:?}"),
        };
        let period_s = self.duration(K::PartitionPeriod).map(|d| d.as_secs_f64());
        SweeperPlan::named(word, period_s)
            .unwrap_or_else(|| panic!("sweeper: the table's `{word}` is not a plan"))
    }

    fn choice<T: serde::de::DeserializeOwned>(&self, id: K) -> T {
        let word = match self.get(id) {
            Some(Value::Choice(w)) => *w,
            other => panic!("{}: not a choice: {other:?}", knob(id).name),
        };
        serde_json::from_value(serde_json::Value::String(word.to_string())).unwrap_or_else(|e| {
            panic!(
                "{}: the table's `{word}` is not a variant: {e}",
                knob(id).name
            )
        })
    }

    /// Knobs that always have a default: the table guarantees them.
    fn req_duration(&self, id: K) -> Duration {
        self.duration(id)
            .unwrap_or_else(|| panic!("{} has no default", knob(id).name))
    }
    fn req_number(&self, id: K) -> f64 {
        self.number(id)
            .unwrap_or_else(|| panic!("{} has no default", knob(id).name))
    }
    fn req_count(&self, id: K) -> u64 {
        self.count(id)
            .unwrap_or_else(|| panic!("{} has no default", knob(id).name))
    }
}

/// Synthetic traffic: how intents arrive and how clients retry.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Traffic {
    pub rate_per_s: f64,
    pub rush: Option<Rush>,
    /// How long arrivals run; `None`: one retention plus half a retention (at least 6 h).
    pub arrival_s: Option<f64>,
    pub sample: Option<f64>,
    pub target_intents: f64,
    pub replicates: u32,
    pub timeout_fraction: f64,
    /// `None`: calibrated from `timeout_fraction` (see `SimConfig::network_loss`).
    pub network_loss_fraction: Option<f64>,
    pub done_fraction: f64,
    pub key_policy: KeyPolicy,
    pub callers: u32,
    pub crash_fraction: f64,
    pub crash_point: DiePoint,
    pub max_attempts: u32,
    pub deadline_ms: i64,
    pub backoff_base_ms: i64,
    pub backoff_cap_ms: i64,
    pub sweep_period_s: f64,
    pub sweep_batch: u32,
    /// `--sweeper` with `--partition-period` (a quarter of each retention when not given).
    pub sweeper: SweeperPlan,
    pub series_points: u32,
    /// Also write the replayed requests here (`--request-log`), for `idemcalc fit`.
    pub request_log: Option<PathBuf>,
}

/// A daily rush in place of the base rate for part of each day: the seed's pre-holiday packing rush.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Rush {
    pub rate_per_s: f64,
    pub start_s: f64,
    pub duration_s: f64,
}

/// The engine's switches; one simulation per retention.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Engine {
    pub retentions_s: Vec<f64>,
    pub lease_ms: i64,
    pub carrier_timeout_ms: i64,
    pub key_scope: KeyScope,
    pub order_space: OrderSpace,
    pub record_placement: RecordPlacement,
    pub carrier_key: CarrierKey,
    /// Key and saved-response sizes: the engine pads its saved body to them, the model's bytes
    /// per record follow them.
    pub payload: crate::payload::PayloadSizes,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Carrier {
    pub latency: Latency,
    pub window_ms: i64,
    pub label_price_usd: f64,
    pub hang_fraction: f64,
    pub error_fraction: f64,
}

/// Model inputs that neither the traffic nor the engine determine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Model {
    /// Sizes the worst-case store; already at least the traffic's own peak.
    pub peak_rate_per_s: f64,
    pub bytes_per_record: f64,
    /// Full copies of the store paid for (primary plus standbys).
    pub replicas: f64,
    pub storage_usd_per_gb_month: f64,
    /// What a GB of RAM costs a month: a store in memory is priced at this, not at disk.
    pub memory_usd_per_gb_month: f64,
    pub unlabelled_parcel_usd: f64,
}

/// The late-retry distribution: the seed's table or a measured CSV, with its head and tail.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Retry {
    pub cdf: Option<PathBuf>,
    /// A distribution fitted from request logs (`[traffic] retry_delay` in a scenario file);
    /// wins over `cdf` and the seed's table.
    pub fitted: Option<crate::traffic::RetrySpec>,
    pub head: Head,
    pub tail: Tail,
}

/// One budget of `[budgets]`, by the name its field, flag and JSON share.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Budget {
    MaxStoreGb,
    MaxDuplicatesPerDay,
    MaxCostPerDay,
    MaxStoreGrowth,
}

impl Budget {
    /// The field's name, as in the scenario file and `summary.json`.
    pub fn name(self) -> &'static str {
        knob(self.knob()).name
    }

    /// The knob that sets it.
    pub fn knob(self) -> K {
        match self {
            Budget::MaxStoreGb => K::MaxStoreGb,
            Budget::MaxDuplicatesPerDay => K::MaxDuplicatesPerDay,
            Budget::MaxCostPerDay => K::MaxCostPerDay,
            Budget::MaxStoreGrowth => K::MaxStoreGrowth,
        }
    }

    /// The unit the limit and the checked figure are in.
    pub fn unit(self) -> &'static str {
        match self {
            Budget::MaxStoreGb => "GB",
            Budget::MaxDuplicatesPerDay => "labels/day",
            Budget::MaxCostPerDay => "USD/day",
            Budget::MaxStoreGrowth => "fraction",
        }
    }
}

/// Limits on the simulated figures. Each applies to every retention the scenario runs.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Budgets {
    /// Steady-state store size, decimal GB (10⁹ bytes), at the measured bytes per record.
    pub max_store_gb: Option<f64>,
    /// Real duplicate labels per day at full traffic.
    pub max_duplicates_per_day: Option<f64>,
    /// Storage plus duplicate labels, USD per day.
    pub max_cost_per_day: Option<f64>,
    /// Growth of the store size against a baseline run (`report --baseline`), as a fraction.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_store_growth: Option<f64>,
    /// Decide on our keys alone: a retry after our purge counts as a duplicate even while the
    /// carrier would still recognise its derived key (a carrier that may forget sooner).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub without_carrier_window: bool,
}

impl Budgets {
    /// The decision's targets; without a duplicates budget the default risk target applies.
    pub fn targets(&self) -> Targets {
        Targets {
            max_duplicates_per_day: self
                .max_duplicates_per_day
                .unwrap_or(DEFAULT_MAX_DUPLICATES_PER_DAY),
            max_store_gb: self.max_store_gb,
            max_cost_per_day: self.max_cost_per_day,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.max_store_gb.is_none()
            && self.max_duplicates_per_day.is_none()
            && self.max_cost_per_day.is_none()
            && self.max_store_growth.is_none()
    }
}

/// SHA-256 of a value's JSON, in hex: the inputs' fingerprint `summary.json` and the page
/// carry.
pub fn sha256_of(value: &impl Serialize) -> String {
    use sha2::{Digest as _, Sha256};
    let json = serde_json::to_vec(value).expect("settings serialise to JSON");
    hex::encode(Sha256::digest(&json))
}

/// Everything a run needs, validated.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Settings {
    pub seed: u64,
    pub traffic: Traffic,
    pub engine: Engine,
    pub carrier: Carrier,
    pub model: Model,
    pub retry: Retry,
    pub budgets: Budgets,
}

impl Default for Settings {
    /// The table's defaults: the seed's design.
    fn default() -> Self {
        Settings::from_values(&Values::check([]).expect("defaults check"))
            .expect("the defaults are consistent")
    }
}

fn to_u32(v: u64) -> u32 {
    // Every u32 knob has a table limit far below u32::MAX.
    u32::try_from(v).unwrap_or(u32::MAX)
}

impl Settings {
    /// Builds the settings from checked values and checks what one value alone cannot.
    pub fn from_values(v: &Values) -> Result<Settings, SettingsError> {
        let rate_per_s = v.req_number(K::RatePerS);
        let rush = v.number(K::RushRatePerS).map(|rate| Rush {
            rate_per_s: rate,
            start_s: v.req_duration(K::RushStart).as_secs_f64(),
            duration_s: v.req_duration(K::RushDuration).as_secs_f64(),
        });
        let retentions: Vec<Duration> = match v.get(K::Retention) {
            Some(Value::List(items)) => items
                .iter()
                .filter_map(|i| match i {
                    Value::Duration(d) => Some(*d),
                    _ => None,
                })
                .collect(),
            _ => Vec::new(),
        };
        let latency = match v.duration(K::CarrierLatency) {
            Some(d) => Latency::Fixed { ms: ms(d) },
            None => {
                let median = v.req_duration(K::CarrierLatencyMedian);
                let p99 = v.req_duration(K::CarrierLatencyP99);
                if p99 < median {
                    return Err(SettingsError {
                        field: Some("carrier.latency"),
                        ..SettingsError::new(
                            K::CarrierLatencyP99,
                            format!(
                                "the 99th percentile ({}) is below the median ({})",
                                duration::format_secs(p99.as_secs_f64()),
                                duration::format_secs(median.as_secs_f64())
                            ),
                        )
                    });
                }
                Latency::LogNormal {
                    median_ms: median.as_secs_f64() * 1e3,
                    p99_ms: p99.as_secs_f64() * 1e3,
                }
            }
        };
        let head = match v.choice::<String>(K::RetryHead).as_str() {
            "at_first_point" => Head::AtFirstPoint,
            _ => Head::LogUniform {
                min_delay_s: v.req_duration(K::RetryMinDelay).as_secs_f64(),
            },
        };
        let max_horizon_s = v.req_duration(K::RetryHorizon).as_secs_f64();
        let tail = match v.choice::<String>(K::RetryTail).as_str() {
            "at_horizon" => Tail::AtHorizon { max_horizon_s },
            _ => Tail::LogLinear { max_horizon_s },
        };
        let size = |id: K| match v.get(id) {
            Some(Value::Size(d)) => d.clone(),
            _ => unreachable!("{} has a default", knob(id).name),
        };
        let payload = crate::payload::PayloadSizes {
            key_bytes: size(K::KeyBytes),
            response_bytes: size(K::ResponseBytes),
        };
        let s = Settings {
            seed: v.req_count(K::Seed),
            traffic: Traffic {
                rate_per_s,
                rush,
                arrival_s: v.duration(K::Arrival).map(|d| d.as_secs_f64()),
                sample: v.number(K::Sample),
                target_intents: v.req_number(K::TargetIntents),
                replicates: to_u32(v.req_count(K::Replicates)),
                timeout_fraction: v.req_number(K::TimeoutFraction),
                network_loss_fraction: v.number(K::NetworkLossFraction),
                done_fraction: v.req_number(K::DoneFraction),
                key_policy: v.choice(K::KeyPolicy),
                callers: to_u32(v.req_count(K::Callers)),
                crash_fraction: v.req_number(K::CrashFraction),
                crash_point: v.choice(K::CrashPoint),
                max_attempts: to_u32(v.req_count(K::MaxAttempts)),
                deadline_ms: ms(v.req_duration(K::Deadline)),
                backoff_base_ms: ms(v.req_duration(K::BackoffBase)),
                backoff_cap_ms: ms(v.req_duration(K::BackoffCap)),
                sweep_period_s: v.req_duration(K::SweepPeriod).as_secs_f64(),
                sweep_batch: to_u32(v.req_count(K::SweepBatch)),
                sweeper: v.sweeper(),
                series_points: to_u32(v.req_count(K::SeriesPoints)),
                request_log: match v.get(K::RequestLog) {
                    Some(Value::Path(p)) => Some(p.clone()),
                    _ => None,
                },
            },
            engine: Engine {
                retentions_s: retentions.iter().map(Duration::as_secs_f64).collect(),
                lease_ms: ms(v.req_duration(K::Lease)),
                carrier_timeout_ms: ms(v.req_duration(K::CarrierTimeout)),
                key_scope: v.choice(K::KeyScope),
                order_space: v.choice(K::OrderSpace),
                record_placement: v.choice(K::RecordPlacement),
                carrier_key: v.choice(K::CarrierKey),
                payload: payload.clone(),
            },
            carrier: Carrier {
                latency,
                window_ms: ms(v.req_duration(K::CarrierWindow)),
                label_price_usd: v.req_number(K::LabelPriceUsd),
                hang_fraction: v.req_number(K::HangFraction),
                error_fraction: v.req_number(K::ErrorFraction),
            },
            model: Model {
                peak_rate_per_s: v.req_number(K::PeakRatePerS),
                bytes_per_record: v
                    .number(K::BytesPerRecord)
                    .unwrap_or_else(|| payload.record_bytes()),
                replicas: v.req_number(K::Replicas),
                storage_usd_per_gb_month: v.req_number(K::StorageUsdPerGbMonth),
                memory_usd_per_gb_month: v.req_number(K::MemoryUsdPerGbMonth),
                unlabelled_parcel_usd: v.req_number(K::UnlabelledParcelUsd),
            },
            retry: Retry {
                cdf: match v.get(K::RetryCdf) {
                    Some(Value::Path(p)) => Some(p.clone()),
                    _ => None,
                },
                fitted: None,
                head,
                tail,
            },
            budgets: Budgets {
                max_store_gb: v.number(K::MaxStoreGb),
                max_duplicates_per_day: v.number(K::MaxDuplicatesPerDay),
                max_cost_per_day: v.number(K::MaxCostPerDay),
                max_store_growth: v.number(K::MaxStoreGrowth),
                without_carrier_window: v.switch(K::WithoutCarrierWindow),
            },
        };
        s.cross_check(v)
    }

    /// The checks that involve more than one knob.
    fn cross_check(mut self, v: &Values) -> Result<Settings, SettingsError> {
        let arrivals = self.arrivals().map_err(|e| SettingsError {
            field: Some("traffic.rush"),
            ..SettingsError::new(K::RushRatePerS, e)
        })?;
        let traffic_peak = match &arrivals {
            Arrivals::Profile(p) => p.peak_rate_per_s(),
            Arrivals::Constant { rate_per_s } => *rate_per_s,
        };
        let mean = arrivals.mean_rate_per_s();
        if v.given(K::PeakRatePerS) && self.model.peak_rate_per_s < mean {
            return Err(SettingsError::new(
                K::PeakRatePerS,
                format!(
                    "{} is below the average rate ({}); the peak cannot be below the average --rate",
                    self.model.peak_rate_per_s, mean
                ),
            ));
        }
        // The engine's clock ticks in milliseconds: a shorter retention rounds to none.
        if let Some(r) = self.engine.retentions_s.iter().find(|r| **r < 1e-3) {
            return Err(SettingsError::new(
                K::Retention,
                format!(
                    "{} is shorter than a millisecond, the engine's clock tick; give at least 1ms",
                    duration::format_secs(*r)
                ),
            ));
        }
        // A started record must outlive its attempt: the lease, and the carrier call a takeover
        // at the lease's end may still make. The sweeper never deletes a live lease, but a
        // retention this short would purge records whose retries are still arriving seconds
        // later, and answer them as new keys.
        let attempt_ms = self.engine.lease_ms + self.engine.carrier_timeout_ms;
        if let Some(r) = self
            .engine
            .retentions_s
            .iter()
            .find(|r| **r * 1e3 <= attempt_ms as f64)
        {
            return Err(SettingsError::new(
                K::Retention,
                format!(
                    "{} does not outlast {} {} plus {} {}: a record could expire while an attempt still runs; give a retention longer than {}",
                    duration::format_secs(*r),
                    knob(K::Lease).flag,
                    duration::format_secs(self.engine.lease_ms as f64 / 1e3),
                    knob(K::CarrierTimeout).flag,
                    duration::format_secs(self.engine.carrier_timeout_ms as f64 / 1e3),
                    duration::format_secs(attempt_ms as f64 / 1e3),
                ),
            ));
        }
        if self.traffic.sample == Some(0.0) {
            return Err(SettingsError::new(
                K::Sample,
                "0 replays nothing; give a share above 0, e.g. 0.01".to_string(),
            ));
        }
        let network_ms = crate::sim::replay::SEED_NETWORK_MS;
        if self.traffic.deadline_ms <= 2 * network_ms {
            return Err(SettingsError::new(
                K::Deadline,
                format!(
                    "{} ms leaves no time after the network's two legs of {network_ms} ms",
                    self.traffic.deadline_ms
                ),
            ));
        }
        if v.given(K::PartitionPeriod)
            && !matches!(self.traffic.sweeper, SweeperPlan::Partitions { .. })
        {
            return Err(SettingsError::new(
                K::PartitionPeriod,
                "sets the range of a partition, so it needs --sweeper partitions".to_string(),
            ));
        }
        // Under a daily profile a per-day figure divides by the days simulated, which is right
        // only when every hour of the day is simulated equally often (36 h holds one rush in
        // 1.5 days and reads 14 % low): refuse a duration that is not whole days.
        if let (Some(_), Some(arrival_s)) = (&self.traffic.rush, self.traffic.arrival_s) {
            let day = duration::DAY_S;
            let days = arrival_s / day;
            if (days - days.round()).abs() > 1e-9 {
                return Err(SettingsError::new(
                    K::Arrival,
                    format!(
                        "{} is not a whole number of days, and a daily rush needs whole days so that every hour of the day is simulated equally often; give {} (or leave it out: the default is whole days)",
                        duration::format_secs(arrival_s),
                        duration::format_secs((days.ceil() * day).max(day)),
                    ),
                ));
            }
        }
        // The seed's 2,000/s sizes the worst case unless the traffic itself peaks higher.
        self.model.peak_rate_per_s = self.model.peak_rate_per_s.max(traffic_peak);
        for cfg in self.sim_configs() {
            if cfg.arrival_s() > knobs::MAX_SIMULATED_S {
                return Err(SettingsError::new(
                    K::Retention,
                    format!(
                        "{} gives {} of simulated arrivals, longer than the 90d limit; set {}",
                        duration::format_secs(cfg.retention_s()),
                        duration::format_secs(cfg.arrival_s().round()),
                        knob(K::Arrival).flag,
                    ),
                ));
            }
        }
        Ok(self)
    }

    /// The arrival process: Poisson at the rate, with the daily rush if there is one.
    pub fn arrivals(&self) -> Result<Arrivals, String> {
        let t = &self.traffic;
        let base = Arrivals::constant(t.rate_per_s).map_err(|e| e.to_string())?;
        match &t.rush {
            None => Ok(base),
            Some(r) => LoadProfile::rush(t.rate_per_s, r.rate_per_s, r.start_s, r.duration_s)
                .map(Arrivals::Profile)
                .map_err(|e| e.to_string()),
        }
    }

    pub fn retentions(&self) -> &[f64] {
        &self.engine.retentions_s
    }

    pub fn engine_config(&self, retention_s: f64) -> EngineConfig {
        EngineConfig {
            lease_ms: self.engine.lease_ms,
            carrier_timeout_ms: self.engine.carrier_timeout_ms,
            retention_ms: (retention_s * 1000.0).round() as i64,
            key_scope: self.engine.key_scope,
            order_space: self.engine.order_space,
            record_placement: self.engine.record_placement,
            carrier_key: self.engine.carrier_key,
            payload: self.engine.payload.clone(),
        }
    }

    pub fn carrier_config(&self) -> CarrierConfig {
        let c = &self.carrier;
        CarrierConfig {
            latency: c.latency,
            window_ms: c.window_ms,
            label_price_cents: (c.label_price_usd * 100.0).round() as i64,
            hang_fraction: c.hang_fraction,
            error_fraction: c.error_fraction,
            seed: self.seed,
            ..CarrierConfig::default()
        }
    }

    /// The simulation at one retention. Its rate is the mean over the arrivals it replays, rush
    /// included: the automatic sample aims at a number of intents, and a rush counted as base
    /// traffic replayed a hundred times more intents than aimed at.
    pub fn sim_config(&self, retention_s: f64) -> SimConfig {
        let t = &self.traffic;
        let arrival_s = t.arrival_s.or_else(|| {
            t.rush
                .map(|_| crate::sim::replay::whole_days_arrival_s(retention_s))
        });
        let window_s =
            arrival_s.unwrap_or_else(|| crate::sim::replay::default_arrival_s(retention_s));
        let rate_per_s = self
            .arrivals()
            .map(|a| a.window_mean_rate_per_s(window_s))
            .unwrap_or(t.rate_per_s);
        SimConfig {
            rate_per_s,
            arrival_s,
            sample: t.sample,
            target_ordinary: t.target_intents,
            request_log: false,
            carrier_ledger: None,
            candidates: Vec::new(),
            timeout_boost: None,
            timeout_fraction: t.timeout_fraction,
            network_loss_fraction: t.network_loss_fraction,
            network_ms: crate::sim::replay::SEED_NETWORK_MS,
            done_fraction: t.done_fraction,
            key_policy: t.key_policy,
            deadline_ms: t.deadline_ms,
            max_attempts: t.max_attempts,
            backoff_base_ms: t.backoff_base_ms,
            backoff_cap_ms: t.backoff_cap_ms,
            sweep_period_s: t.sweep_period_s,
            sweep_batch: t.sweep_batch,
            // The seed's `DELETE`; the run's plan sets the store's own (`--sweeper`).
            sweeper: Default::default(),
            crash_fraction: t.crash_fraction,
            crash_point: t.crash_point,
            callers: t.callers,
            engine: self.engine_config(retention_s),
            carrier: self.carrier_config(),
            seed: self.seed,
            series_points: t.series_points,
        }
    }

    /// One simulation per retention, in the order given.
    pub fn sim_configs(&self) -> Vec<SimConfig> {
        self.retentions()
            .iter()
            .map(|r| self.sim_config(*r))
            .collect()
    }

    /// What the analytic model is asked at `retention_s`: the very inputs the simulation runs
    /// with (mean rate, fractions, the carrier's price and window) plus the model's own.
    pub fn model_params(&self, retention_s: f64) -> ModelParams {
        let mean = self
            .arrivals()
            .map(|a| a.mean_rate_per_s())
            .unwrap_or(self.traffic.rate_per_s);
        let sim = self.sim_config(retention_s);
        ModelParams {
            rate_per_s: mean,
            peak_rate_per_s: self.model.peak_rate_per_s,
            retention_s,
            bytes_per_record: self.model.bytes_per_record,
            // The shares the simulated calls time out at and had run at: the asked ones at the
            // seed's latencies, more with a slower carrier or hung calls, so model and run
            // describe one system.
            timeout_fraction: sim.expected_timeout_fraction(),
            done_fraction: sim.expected_done_fraction(),
            label_price_usd: self.carrier.label_price_usd,
            carrier_window_s: self.carrier.window_ms as f64 / 1000.0,
            storage_usd_per_gb_month: self.model.storage_usd_per_gb_month,
            unlabelled_parcel_usd: self.model.unlabelled_parcel_usd,
            replicas: self.model.replicas,
        }
    }
}
