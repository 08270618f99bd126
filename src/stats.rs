//! The normal quantiles the crate's intervals and log-normals are built on, written once, and
//! the one type for a value with its 95 % interval.

use serde::{Deserialize, Serialize};

/// A value with its 95 % interval: what a run measured, what a log's rows estimate, what a
/// decision weighs. One type, so every output names its parts alike (`estimate`, `ci95_low`,
/// `ci95_high`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub estimate: f64,
    pub ci95_low: f64,
    pub ci95_high: f64,
}

impl Interval {
    /// Whether `value` lies inside the interval.
    pub fn covers(&self, value: f64) -> bool {
        self.ci95_low <= value && value <= self.ci95_high
    }
}

/// The two-sided 95 % quantile of the standard normal, Φ⁻¹(0.975): every "95 % interval".
pub const Z95: f64 = 1.959_963_985;

/// The 99th percentile of the standard normal, Φ⁻¹(0.99): a p99 is `median · exp(Z_P99 · σ)`.
pub const Z_P99: f64 = 2.326_347_874;

/// σ of the log-normal with this median and 99th percentile (of any unit).
pub fn log_normal_sigma(median: f64, p99: f64) -> f64 {
    (p99 / median).ln() / Z_P99
}
