//! The analytic model: how big the key store is, what the keys save, and what each retention
//! costs, from the seed's "In practice" section.
//!
//! Every figure is defined once, as data, in [`FORMULAS`]: plain arithmetic strings that Rust
//! evaluates with minijinja and the HTML report evaluates in the browser, so the two can never
//! disagree. The model does no IO and no sampling; the late-retry distribution comes in as a
//! [`RetryDelay`] and is only ever asked for `survival(t)`.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::duration;
use crate::duration::DAY_S;
use crate::traffic::RetryDelay;

/// Version of the [`Estimate`] JSON; bump it when a field changes meaning or goes away.
pub const SCHEMA_VERSION: u32 = 2;

/// The model's inputs. `Default` is [`SEED`], the seed's figures plus stated assumptions for
/// what the seed leaves out.
///
/// In a scenario file the `_s` fields take either seconds or a duration such as `"24h"`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelParams {
    /// Average label creates, calls per second (seed: 400/s, a large warehouse network).
    pub rate_per_s: f64,
    /// Peak label creates, calls per second (seed: 2,000/s, the pre-holiday packing rush).
    pub peak_rate_per_s: f64,
    /// How long a key is kept after completion, seconds (seed: 24 h).
    #[serde(deserialize_with = "secs_or_text")]
    pub retention_s: f64,
    /// Stored size of one key record including index overhead, bytes (seed: ~512 B; pass a
    /// measured figure when you have one).
    pub bytes_per_record: f64,
    /// Share of calls whose reply never reaches the caller in time, 0..=1 (seed: 0.1 %).
    pub timeout_fraction: f64,
    /// Share of timed-out calls that had already run server-side (the reply was slow or lost,
    /// not the request), 0..=1 (seed: 60 %).
    pub done_fraction: f64,
    /// What one label costs, USD (seed: $6.00). A duplicate label costs this much.
    pub label_price_usd: f64,
    /// How long the carrier recognises our derived key, seconds. Default 24 h, like Stripe,
    /// which may prune keys once they are 24 h old. A late retry only buys a second label if
    /// it misses both our window and the carrier's.
    #[serde(deserialize_with = "secs_or_text")]
    pub carrier_window_s: f64,
    /// Storage price, USD per GB-month (decimal GB). Default $0.10, a typical managed-database
    /// storage price (e.g. RDS gp3 at about $0.115, a bare EBS gp3 volume at $0.08).
    pub storage_usd_per_gb_month: f64,
    /// What one parcel left without a label costs, USD. Default $10.00, illustrative: a missed
    /// dispatch means a support contact and often a shipping refund.
    pub unlabelled_parcel_usd: f64,
    /// Full copies of the store that are paid for. Default 2, a primary and a standby: the
    /// smallest setup a store that must not forget keys runs on.
    pub replicas: f64,
}

/// The seed's values, and the stated defaults for what it does not give.
pub const SEED: ModelParams = ModelParams {
    rate_per_s: 400.0,
    peak_rate_per_s: 2_000.0,
    retention_s: DAY_S,
    bytes_per_record: 512.0,
    timeout_fraction: 0.001,
    done_fraction: 0.6,
    label_price_usd: 6.0,
    carrier_window_s: DAY_S,
    storage_usd_per_gb_month: 0.10,
    unlabelled_parcel_usd: 10.0,
    replicas: 2.0,
};

impl Default for ModelParams {
    fn default() -> Self {
        SEED
    }
}

/// Bytes of the request hash a record keeps (SHA-256).
pub const HASH_BYTES: f64 = 32.0;

/// Row and index overhead of one record beyond its key, hash and saved response, bytes: what
/// the seed's ~512 B leaves once its ~36 B key, 32 B hash and ~300 B response are taken out
/// (512 − 36 − 32 − 300 = 144). A measured figure (`idemcalc simulate`) replaces the whole sum.
pub const RECORD_OVERHEAD_BYTES: f64 = 144.0;

/// The seed's key length, bytes ("a key of up to ~36 B": a UUID's text).
pub const SEED_KEY_BYTES: f64 = 36.0;

/// The seed's saved response, bytes ("~300 B saved response").
pub const SEED_RESPONSE_BYTES: f64 = 300.0;

/// Bytes per record from its parts, so that "bytes per record" means the same thing in the
/// model, the simulator and the seed: the mean key, the hash, the mean saved response and the
/// row and index overhead. The seed's parts give its 512 B.
pub fn record_bytes(key_bytes_mean: f64, response_bytes_mean: f64) -> f64 {
    key_bytes_mean + HASH_BYTES + response_bytes_mean + RECORD_OVERHEAD_BYTES
}

/// Accepts `86400` or `"24h"`, so scenario files can be written the way people think.
fn secs_or_text<'de, D: serde::Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Secs(f64),
        Text(String),
    }
    match Raw::deserialize(d)? {
        Raw::Secs(s) => Ok(s),
        Raw::Text(t) => duration::parse(&t)
            .map(|d| d.as_secs_f64())
            .map_err(serde::de::Error::custom),
    }
}

/// One model input as the report and error messages describe it.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Input {
    /// Field of [`ModelParams`] and variable name in [`FORMULAS`].
    pub name: &'static str,
    /// The `idemcalc estimate` flag that sets it.
    pub flag: &'static str,
    pub unit: &'static str,
    pub label: &'static str,
}

/// The inputs in [`ModelParams`] order, with the seed's wording.
pub const INPUTS: &[Input] = &[
    Input {
        name: "rate_per_s",
        flag: "--rate",
        unit: "calls/s",
        label: "Average label creates",
    },
    Input {
        name: "peak_rate_per_s",
        flag: "--peak-rate",
        unit: "calls/s",
        label: "Peak label creates",
    },
    Input {
        name: "retention_s",
        flag: "--retention",
        unit: "s",
        label: "Retention after completion",
    },
    Input {
        name: "bytes_per_record",
        flag: "--bytes-per-record",
        unit: "B",
        label: "Bytes per record",
    },
    Input {
        name: "timeout_fraction",
        flag: "--timeout-fraction",
        unit: "fraction",
        label: "Calls that time out",
    },
    Input {
        name: "done_fraction",
        flag: "--done-fraction",
        unit: "fraction",
        label: "Of those, already done server-side",
    },
    Input {
        name: "label_price_usd",
        flag: "--label-price",
        unit: "USD",
        label: "Average label price",
    },
    Input {
        name: "carrier_window_s",
        flag: "--carrier-window",
        unit: "s",
        label: "Carrier's key window",
    },
    Input {
        name: "storage_usd_per_gb_month",
        flag: "--storage-price",
        unit: "USD/GB-month",
        label: "Storage price",
    },
    Input {
        name: "unlabelled_parcel_usd",
        flag: "--unlabelled-cost",
        unit: "USD",
        label: "Cost of a parcel left unlabelled",
    },
    Input {
        name: "replicas",
        flag: "--replicas",
        unit: "copies",
        label: "Copies of the store paid for",
    },
];

impl ModelParams {
    /// The inputs by name, in [`INPUTS`] order: what the formulas see.
    pub fn values(&self) -> [(&'static str, f64); 11] {
        [
            ("rate_per_s", self.rate_per_s),
            ("peak_rate_per_s", self.peak_rate_per_s),
            ("retention_s", self.retention_s),
            ("bytes_per_record", self.bytes_per_record),
            ("timeout_fraction", self.timeout_fraction),
            ("done_fraction", self.done_fraction),
            ("label_price_usd", self.label_price_usd),
            ("carrier_window_s", self.carrier_window_s),
            ("storage_usd_per_gb_month", self.storage_usd_per_gb_month),
            ("unlabelled_parcel_usd", self.unlabelled_parcel_usd),
            ("replicas", self.replicas),
        ]
    }
}

/// One figure of the model, defined as an expression over inputs and earlier figures.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Formula {
    /// Variable name, and the field of [`Estimate`] it fills.
    pub name: &'static str,
    /// Arithmetic in the common subset of minijinja and JavaScript: numbers, names, `+ - * /`,
    /// parentheses and calls of `max(a, b)`, `min(a, b)`, `survival(t)`.
    pub expr: &'static str,
    pub unit: &'static str,
    /// What the seed calls it.
    pub label: &'static str,
    /// The inputs and figures it is computed from, for "from X and Y" in the tables.
    pub from: &'static [&'static str],
}

/// Every figure of the model, in evaluation order. The one place the arithmetic lives.
pub const FORMULAS: &[Formula] = &[
    // How big is the key store?
    Formula {
        name: "keys_per_day",
        expr: "rate_per_s * 86400",
        unit: "keys/day",
        label: "Keys per day",
        from: &["rate_per_s"],
    },
    Formula {
        name: "store_bytes",
        expr: "keys_per_day * (retention_s / 86400) * bytes_per_record",
        unit: "B",
        label: "Store size at average load",
        from: &["keys_per_day", "retention_s", "bytes_per_record"],
    },
    Formula {
        name: "peak_keys_per_day",
        expr: "peak_rate_per_s * 86400",
        unit: "keys/day",
        label: "Keys if the peak lasted all day",
        from: &["peak_rate_per_s"],
    },
    Formula {
        name: "peak_store_bytes",
        expr: "peak_keys_per_day * (retention_s / 86400) * bytes_per_record",
        unit: "B",
        label: "Worst-case store size",
        from: &["peak_keys_per_day", "retention_s", "bytes_per_record"],
    },
    // What the keys save
    Formula {
        name: "timed_out_per_day",
        expr: "keys_per_day * timeout_fraction",
        unit: "calls/day",
        label: "Timed-out calls per day",
        from: &["keys_per_day", "timeout_fraction"],
    },
    Formula {
        name: "duplicates_without_keys_per_day",
        expr: "timed_out_per_day * done_fraction",
        unit: "labels/day",
        label: "Duplicate labels if retried without keys",
        from: &["timed_out_per_day", "done_fraction"],
    },
    Formula {
        name: "duplicate_cost_without_keys_per_day",
        expr: "duplicates_without_keys_per_day * label_price_usd",
        unit: "USD/day",
        label: "Money spent on duplicates",
        from: &["duplicates_without_keys_per_day", "label_price_usd"],
    },
    Formula {
        name: "stuck_without_retry_per_day",
        expr: "timed_out_per_day * (1 - done_fraction)",
        unit: "parcels/day",
        label: "Parcels left unlabelled if never retried",
        from: &["timed_out_per_day", "done_fraction"],
    },
    Formula {
        name: "stuck_cost_without_retry_per_day",
        expr: "stuck_without_retry_per_day * unlabelled_parcel_usd",
        unit: "USD/day",
        label: "Cost of parcels left unlabelled",
        from: &["stuck_without_retry_per_day", "unlabelled_parcel_usd"],
    },
    // With keys, at this retention
    Formula {
        name: "late_after_purge_fraction",
        expr: "survival(retention_s)",
        unit: "fraction",
        label: "Retries that arrive after the purge",
        from: &["retention_s"],
    },
    Formula {
        name: "late_after_purge_per_day",
        expr: "timed_out_per_day * survival(retention_s)",
        unit: "calls/day",
        label: "Late arrivals after the purge",
        from: &["timed_out_per_day", "retention_s"],
    },
    Formula {
        name: "duplicate_window_s",
        expr: "max(retention_s, carrier_window_s)",
        unit: "s",
        label: "Window a retry must miss to duplicate",
        from: &["retention_s", "carrier_window_s"],
    },
    Formula {
        name: "late_after_both_windows_per_day",
        expr: "timed_out_per_day * survival(duplicate_window_s)",
        unit: "calls/day",
        label: "Late arrivals after our purge and the carrier's window",
        from: &["timed_out_per_day", "duplicate_window_s"],
    },
    Formula {
        name: "duplicate_labels_per_day",
        expr: "late_after_both_windows_per_day * done_fraction",
        unit: "labels/day",
        label: "Real duplicates with keys",
        from: &["late_after_both_windows_per_day", "done_fraction"],
    },
    Formula {
        name: "duplicate_cost_per_day",
        expr: "duplicate_labels_per_day * label_price_usd",
        unit: "USD/day",
        label: "Money spent on duplicates with keys",
        from: &["duplicate_labels_per_day", "label_price_usd"],
    },
    Formula {
        // A GB-month is a twelfth of a year; storage is billed on the average store, not the peak,
        // once for every copy kept.
        name: "storage_cost_per_day",
        expr: "store_bytes * replicas / 1000000000 * storage_usd_per_gb_month * 12 / 365",
        unit: "USD/day",
        label: "Storage cost",
        from: &["store_bytes", "replicas", "storage_usd_per_gb_month"],
    },
    Formula {
        // Parcels left unlabelled are 0 here: with keys every timed-out call is retried.
        name: "total_cost_per_day",
        expr: "storage_cost_per_day + duplicate_cost_per_day",
        unit: "USD/day",
        label: "Total daily cost with keys",
        from: &["storage_cost_per_day", "duplicate_cost_per_day"],
    },
    Formula {
        name: "saving_per_day",
        expr: "duplicate_cost_without_keys_per_day - total_cost_per_day",
        unit: "USD/day",
        label: "What the keys save, net",
        from: &["duplicate_cost_without_keys_per_day", "total_cost_per_day"],
    },
];

/// The functions a formula may call; the browser defines the same three.
pub const FUNCTIONS: &[&str] = &["max", "min", "survival"];

/// Retentions the sweep tries, seconds: 1 h to 30 d in the steps people actually configure.
pub const SWEEP_RETENTIONS_S: &[f64] = &[
    3_600.0,
    2.0 * 3_600.0,
    3.0 * 3_600.0,
    4.0 * 3_600.0,
    6.0 * 3_600.0,
    8.0 * 3_600.0,
    12.0 * 3_600.0,
    18.0 * 3_600.0,
    DAY_S,
    36.0 * 3_600.0,
    2.0 * DAY_S,
    3.0 * DAY_S,
    4.0 * DAY_S,
    5.0 * DAY_S,
    7.0 * DAY_S,
    10.0 * DAY_S,
    14.0 * DAY_S,
    21.0 * DAY_S,
    30.0 * DAY_S,
];

/// A formula that failed to compile or evaluate: a bug in [`FORMULAS`], caught by the tests.
#[derive(Debug, thiserror::Error)]
#[error("formula `{name}` ({expr}): {source}")]
pub struct FormulaError {
    pub name: &'static str,
    pub expr: &'static str,
    pub source: minijinja::Error,
}

/// The formulas compiled once, evaluated for as many parameter sets as a sweep needs.
struct Evaluator<'env> {
    compiled: Vec<(&'static Formula, minijinja::Expression<'env, 'static>)>,
}

/// An environment with the three functions the formulas may call, `survival` bound to `dist`
/// (without one, a formula that calls `survival` fails to evaluate).
fn formula_env(dist: Option<&RetryDelay>) -> minijinja::Environment<'static> {
    let mut env = minijinja::Environment::new();
    // A misspelt name must fail, not quietly become 0.
    env.set_undefined_behavior(minijinja::UndefinedBehavior::Strict);
    if let Some(dist) = dist {
        let dist = dist.clone();
        env.add_function("survival", move |t_s: f64| dist.survival(t_s));
    }
    env.add_function("max", |a: f64, b: f64| a.max(b));
    env.add_function("min", |a: f64, b: f64| a.min(b));
    env
}

/// The formulas that need no retry distribution, compiled once for the process.
fn pricing() -> &'static Evaluator<'static> {
    static ENV: std::sync::OnceLock<minijinja::Environment<'static>> = std::sync::OnceLock::new();
    static EVALUATOR: std::sync::OnceLock<Evaluator<'static>> = std::sync::OnceLock::new();
    EVALUATOR.get_or_init(|| {
        let env = ENV.get_or_init(|| formula_env(None));
        Evaluator::new(env).unwrap_or_else(|e| broken(e))
    })
}

/// Evaluates the formula `name` of [`FORMULAS`] with the given variables: how a simulated
/// figure (the measured store size) is priced with the very formula the model uses. The
/// expression is compiled once per process, not per call.
pub fn formula(name: &str, vars: &[(&str, f64)]) -> Result<f64, String> {
    let (f, expr) = pricing()
        .compiled
        .iter()
        .find(|(f, _)| f.name == name)
        .ok_or_else(|| format!("no formula called {name}"))?;
    let ctx: BTreeMap<&str, f64> = vars.iter().copied().collect();
    let value = expr
        .eval(minijinja::Value::from(minijinja::value::Serde(&ctx)))
        .map_err(|e| format!("{}: {e}", f.name))?;
    f64::try_from(value).map_err(|e| format!("{}: {e}", f.name))
}

impl<'env> Evaluator<'env> {
    fn new(env: &'env minijinja::Environment<'static>) -> Result<Self, FormulaError> {
        let compiled = FORMULAS
            .iter()
            .map(|f| {
                env.compile_expression(f.expr)
                    .map(|e| (f, e))
                    .map_err(|source| FormulaError {
                        name: f.name,
                        expr: f.expr,
                        source,
                    })
            })
            .collect::<Result<_, _>>()?;
        Ok(Evaluator { compiled })
    }

    /// Inputs and every figure, by name.
    fn eval(&self, params: &ModelParams) -> Result<BTreeMap<&'static str, f64>, FormulaError> {
        let mut values: BTreeMap<&'static str, f64> = params.values().into_iter().collect();
        for (formula, expr) in &self.compiled {
            let context: BTreeMap<String, f64> =
                values.iter().map(|(k, v)| (k.to_string(), *v)).collect();
            let err = |source| FormulaError {
                name: formula.name,
                expr: formula.expr,
                source,
            };
            let value = expr.eval(minijinja::Value::from(context)).map_err(err)?;
            let number = f64::try_from(value).map_err(err)?;
            values.insert(formula.name, number);
        }
        Ok(values)
    }
}

/// Every figure of [`FORMULAS`] for one parameter set, one field per formula (a test keeps
/// the two lists equal), so a misspelt figure is a compile error, not a run-time panic.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Figures {
    pub keys_per_day: f64,
    pub store_bytes: f64,
    pub peak_keys_per_day: f64,
    pub peak_store_bytes: f64,
    pub timed_out_per_day: f64,
    pub duplicates_without_keys_per_day: f64,
    pub duplicate_cost_without_keys_per_day: f64,
    pub stuck_without_retry_per_day: f64,
    pub stuck_cost_without_retry_per_day: f64,
    pub late_after_purge_fraction: f64,
    pub late_after_purge_per_day: f64,
    pub duplicate_window_s: f64,
    pub late_after_both_windows_per_day: f64,
    pub duplicate_labels_per_day: f64,
    pub duplicate_cost_per_day: f64,
    pub storage_cost_per_day: f64,
    pub total_cost_per_day: f64,
    pub saving_per_day: f64,
}

impl Figures {
    /// From the evaluator's values by name; every formula is evaluated, so every name is there.
    fn from_values(v: &BTreeMap<&'static str, f64>) -> Figures {
        Figures {
            keys_per_day: v["keys_per_day"],
            store_bytes: v["store_bytes"],
            peak_keys_per_day: v["peak_keys_per_day"],
            peak_store_bytes: v["peak_store_bytes"],
            timed_out_per_day: v["timed_out_per_day"],
            duplicates_without_keys_per_day: v["duplicates_without_keys_per_day"],
            duplicate_cost_without_keys_per_day: v["duplicate_cost_without_keys_per_day"],
            stuck_without_retry_per_day: v["stuck_without_retry_per_day"],
            stuck_cost_without_retry_per_day: v["stuck_cost_without_retry_per_day"],
            late_after_purge_fraction: v["late_after_purge_fraction"],
            late_after_purge_per_day: v["late_after_purge_per_day"],
            duplicate_window_s: v["duplicate_window_s"],
            late_after_both_windows_per_day: v["late_after_both_windows_per_day"],
            duplicate_labels_per_day: v["duplicate_labels_per_day"],
            duplicate_cost_per_day: v["duplicate_cost_per_day"],
            storage_cost_per_day: v["storage_cost_per_day"],
            total_cost_per_day: v["total_cost_per_day"],
            saving_per_day: v["saving_per_day"],
        }
    }

    /// The figure called `name`: for the page, whose tables and script key figures by their
    /// formula's name.
    pub fn get(&self, name: &str) -> Option<f64> {
        serde_json::to_value(self).ok()?.get(name)?.as_f64()
    }
}

/// Every figure for one parameter set: what [`estimate`] is made of, for the decision and the
/// report to read without a sweep.
pub fn figures(params: &ModelParams, dist: &RetryDelay) -> Result<Figures, FormulaError> {
    let env = formula_env(Some(dist));
    Ok(Figures::from_values(&Evaluator::new(&env)?.eval(params)?))
}

/// One retention of the sweep: what keeping keys that long costs per day.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SweepRow {
    pub retention_s: f64,
    /// The retention as a duration people read, e.g. `36h`.
    pub retention: String,
    pub store_bytes: f64,
    pub peak_store_bytes: f64,
    pub late_after_purge_per_day: f64,
    pub duplicate_labels_per_day: f64,
    pub storage_cost_per_day: f64,
    pub duplicate_cost_per_day: f64,
    pub total_cost_per_day: f64,
}

/// How many retries are still to come at one point of the distribution.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct LatePoint {
    pub delay_s: f64,
    pub delay: String,
    pub arrived_fraction: f64,
    /// Timed-out calls per day whose retry comes later than `delay_s`.
    pub later_per_day: f64,
}

/// The seed's three "In practice" tables and the retention sweep, as numbers. Field names are
/// the public JSON schema (see [`SCHEMA_VERSION`]); money is USD.
#[derive(Debug, Clone, Serialize)]
pub struct Estimate {
    pub schema_version: u32,
    pub params: ModelParams,
    // How big is the key store?
    pub keys_per_day: f64,
    pub store_bytes: f64,
    pub peak_keys_per_day: f64,
    pub peak_store_bytes: f64,
    // What the keys save
    pub timed_out_per_day: f64,
    pub duplicates_without_keys_per_day: f64,
    pub duplicate_cost_without_keys_per_day: f64,
    pub stuck_without_retry_per_day: f64,
    pub stuck_cost_without_retry_per_day: f64,
    // With keys at this retention: late arrivals next to the real duplicates among them.
    pub late_after_purge_fraction: f64,
    pub late_after_purge_per_day: f64,
    pub duplicate_window_s: f64,
    pub late_after_both_windows_per_day: f64,
    pub duplicate_labels_per_day: f64,
    pub duplicate_cost_per_day: f64,
    pub storage_cost_per_day: f64,
    pub total_cost_per_day: f64,
    pub saving_per_day: f64,
    // How late do retries arrive?
    pub retry_delay: RetryDelay,
    pub late_arrivals: Vec<LatePoint>,
    pub retention_sweep: Vec<SweepRow>,
    /// The cheapest retention of the sweep (the shorter one on a tie): the decision's
    /// `cheapest` too, since both weigh [`candidate_retentions_s`].
    pub cheapest_retention_s: f64,
    pub cheapest_total_cost_per_day: f64,
}

/// The formula table is static and tested; failing it is a bug, not bad input.
fn broken(e: FormulaError) -> ! {
    panic!("the formula table is broken: {e}")
}

/// The retentions weighed against each other, by the sweep and by the decision alike, so that
/// "cheapest" has one answer: the standard ones people configure ([`SWEEP_RETENTIONS_S`]), the
/// current one and the retry distribution's horizon, none beyond the horizon (past it a longer
/// retention only adds storage). Sorted, shortest first.
pub fn candidate_retentions_s(retention_s: f64, dist: &RetryDelay) -> Vec<f64> {
    let horizon_s = dist.max_horizon_s();
    let mut out: Vec<f64> = SWEEP_RETENTIONS_S.to_vec();
    out.push(retention_s);
    out.push(horizon_s);
    out.retain(|r| r.is_finite() && *r > 0.0 && *r <= horizon_s);
    out.sort_by(f64::total_cmp);
    out.dedup();
    out
}

/// Evaluates the model for `params` and, for the sweep, at each of
/// [`candidate_retentions_s`].
///
/// Inputs are not validated here (see [`ModelParams::validate`]): out-of-range values give
/// meaningless but finite-or-NaN figures, never a panic. The only failure would be a broken
/// formula table, which the tests rule out.
pub fn estimate(params: &ModelParams, dist: &RetryDelay) -> Estimate {
    let env = formula_env(Some(dist));
    let evaluator = Evaluator::new(&env).unwrap_or_else(|e| broken(e));
    let eval =
        |p: &ModelParams| Figures::from_values(&evaluator.eval(p).unwrap_or_else(|e| broken(e)));
    let v = eval(params);

    let retention_sweep: Vec<SweepRow> = candidate_retentions_s(params.retention_s, dist)
        .into_iter()
        .map(|retention_s| {
            let row = eval(&ModelParams {
                retention_s,
                ..*params
            });
            SweepRow {
                retention_s,
                retention: crate::format::human_duration(retention_s),
                store_bytes: row.store_bytes,
                peak_store_bytes: row.peak_store_bytes,
                late_after_purge_per_day: row.late_after_purge_per_day,
                duplicate_labels_per_day: row.duplicate_labels_per_day,
                storage_cost_per_day: row.storage_cost_per_day,
                duplicate_cost_per_day: row.duplicate_cost_per_day,
                total_cost_per_day: row.total_cost_per_day,
            }
        })
        .collect();
    // `min_by` keeps the first of equal minima, and rows are sorted: a tie keeps the shorter.
    let cheapest = retention_sweep
        .iter()
        .min_by(|a, b| a.total_cost_per_day.total_cmp(&b.total_cost_per_day));

    let late_arrivals = dist
        .points()
        .iter()
        .map(|&(delay_s, cdf)| LatePoint {
            delay_s,
            delay: crate::format::human_duration(delay_s),
            arrived_fraction: cdf,
            later_per_day: v.timed_out_per_day * dist.survival(delay_s),
        })
        .collect();

    Estimate {
        schema_version: SCHEMA_VERSION,
        params: *params,
        keys_per_day: v.keys_per_day,
        store_bytes: v.store_bytes,
        peak_keys_per_day: v.peak_keys_per_day,
        peak_store_bytes: v.peak_store_bytes,
        timed_out_per_day: v.timed_out_per_day,
        duplicates_without_keys_per_day: v.duplicates_without_keys_per_day,
        duplicate_cost_without_keys_per_day: v.duplicate_cost_without_keys_per_day,
        stuck_without_retry_per_day: v.stuck_without_retry_per_day,
        stuck_cost_without_retry_per_day: v.stuck_cost_without_retry_per_day,
        late_after_purge_fraction: v.late_after_purge_fraction,
        late_after_purge_per_day: v.late_after_purge_per_day,
        duplicate_window_s: v.duplicate_window_s,
        late_after_both_windows_per_day: v.late_after_both_windows_per_day,
        duplicate_labels_per_day: v.duplicate_labels_per_day,
        duplicate_cost_per_day: v.duplicate_cost_per_day,
        storage_cost_per_day: v.storage_cost_per_day,
        total_cost_per_day: v.total_cost_per_day,
        saving_per_day: v.saving_per_day,
        retry_delay: dist.clone(),
        late_arrivals,
        cheapest_retention_s: cheapest.map_or(f64::NAN, |r| r.retention_s),
        cheapest_total_cost_per_day: cheapest.map_or(f64::NAN, |r| r.total_cost_per_day),
        retention_sweep,
    }
}

/// The formula table, inputs and defaults as one JSON value, for the report to embed and
/// evaluate in the browser with the same definitions.
pub fn formulas_json() -> serde_json::Value {
    let inputs: Vec<serde_json::Value> = INPUTS
        .iter()
        .zip(SEED.values())
        .map(|(input, (_, default))| {
            serde_json::json!({
                "name": input.name,
                "flag": input.flag,
                "unit": input.unit,
                "label": input.label,
                "default": default,
            })
        })
        .collect();
    serde_json::json!({
        "schema_version": SCHEMA_VERSION,
        "inputs": inputs,
        "formulas": FORMULAS,
        "functions": FUNCTIONS,
        "defaults": SEED,
        "sweep_retentions_s": SWEEP_RETENTIONS_S,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The browser evaluates these strings with `new Function`, so they must stay inside the
    /// shared subset: numbers, known names, `+ - * /`, parentheses, commas.
    #[test]
    fn formulas_use_only_tokens_valid_in_js_and_minijinja() {
        let mut known: Vec<&str> = INPUTS.iter().map(|i| i.name).collect();
        for f in FORMULAS {
            let chars: Vec<char> = f.expr.chars().collect();
            let mut used = Vec::new();
            let mut i = 0;
            while i < chars.len() {
                let c = chars[i];
                if c.is_ascii_digit() {
                    while i < chars.len() && (chars[i].is_ascii_digit() || chars[i] == '.') {
                        i += 1;
                    }
                    continue;
                }
                if c.is_ascii_lowercase() || c == '_' {
                    let start = i;
                    while i < chars.len()
                        && (chars[i].is_ascii_lowercase()
                            || chars[i].is_ascii_digit()
                            || chars[i] == '_')
                    {
                        i += 1;
                    }
                    let name: String = chars[start..i].iter().collect();
                    let called = chars[i..].iter().find(|c| !c.is_whitespace()) == Some(&'(');
                    if called {
                        assert!(
                            FUNCTIONS.contains(&name.as_str()),
                            "{}: unknown function {name}",
                            f.name
                        );
                    } else {
                        assert!(
                            known.contains(&name.as_str()),
                            "{}: unknown or later name {name}",
                            f.name
                        );
                        used.push(name);
                    }
                    continue;
                }
                assert!(
                    "+-*/(), ".contains(c),
                    "{}: character {c:?} is outside the shared subset",
                    f.name
                );
                i += 1;
            }
            let mut from: Vec<&str> = f.from.to_vec();
            from.sort();
            used.sort();
            used.dedup();
            assert_eq!(
                from, used,
                "{}: `from` must list exactly the names the expression uses",
                f.name
            );
            assert!(!known.contains(&f.name), "{} defined twice", f.name);
            known.push(f.name);
        }
    }

    #[test]
    fn inputs_match_the_params_fields() {
        let json = serde_json::to_value(SEED).unwrap();
        let fields: Vec<&String> = json.as_object().unwrap().keys().collect();
        let mut names: Vec<&str> = INPUTS.iter().map(|i| i.name).collect();
        let mut from_values: Vec<&str> = SEED.values().iter().map(|v| v.0).collect();
        assert_eq!(names, from_values);
        names.sort();
        from_values.sort();
        let mut fields: Vec<&str> = fields.iter().map(|s| s.as_str()).collect();
        fields.sort();
        assert_eq!(names, fields);
        for (name, value) in SEED.values() {
            assert_eq!(json[name].as_f64(), Some(value), "{name}");
        }
    }

    #[test]
    fn every_figure_lands_in_the_estimate() {
        let dist = RetryDelay::seed();
        let values = figures(&SEED, &dist).unwrap();
        let json = serde_json::to_value(estimate(&SEED, &dist)).unwrap();
        for f in FORMULAS {
            assert_eq!(json[f.name].as_f64(), values.get(f.name), "{}", f.name);
        }
        // One field per formula, no more: the typed figures and the table cannot drift.
        let fields = serde_json::to_value(values).unwrap();
        let mut fields: Vec<&str> = fields
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        let mut names: Vec<&str> = FORMULAS.iter().map(|f| f.name).collect();
        fields.sort_unstable();
        names.sort_unstable();
        assert_eq!(fields, names);
    }
}
