//! The normal quantiles the crate's intervals and log-normals are built on, written once.

/// The two-sided 95 % quantile of the standard normal, Φ⁻¹(0.975): every "95 % interval".
pub const Z95: f64 = 1.959_963_985;

/// The 99th percentile of the standard normal, Φ⁻¹(0.99): a p99 is `median · exp(Z_P99 · σ)`.
pub const Z_P99: f64 = 2.326_347_874;

/// σ of the log-normal with this median and 99th percentile (of any unit).
pub fn log_normal_sigma(median: f64, p99: f64) -> f64 {
    (p99 / median).ln() / Z_P99
}
