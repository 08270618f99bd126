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

/// The one-sided 95 % upper bound of a share when none of `n` was seen: the exact
/// (Clopper–Pearson) `1 − 0.05^(1/n)`, about 3/n (the rule of three). With nothing counted a
/// normal interval collapses to a certain-looking `0 – 0`; this is the bound the count still
/// leaves, the share's counterpart of a zero count's `none seen, ≤ …`. `n` may be an effective
/// count of weighted rows, `(Σw)² / Σw²`; below one row it bounds nothing (1).
pub fn none_seen_share_bound(n: f64) -> f64 {
    if n.is_finite() && n >= 1.0 {
        1.0 - 0.05f64.powf(1.0 / n)
    } else {
        1.0
    }
}

/// σ of the log-normal with this median and 99th percentile (of any unit).
pub fn log_normal_sigma(median: f64, p99: f64) -> f64 {
    (p99 / median).ln() / Z_P99
}

/// The spread of one figure over repeated runs (the bench's sides), as hyperfine reports it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct Spread {
    pub n: usize,
    pub mean: f64,
    /// Sample standard deviation (n − 1); 0 with one run.
    pub sd: f64,
    pub min: f64,
    pub median: f64,
    pub max: f64,
}

impl Spread {
    pub fn of(xs: &[f64]) -> Self {
        let n = xs.len();
        if n == 0 {
            return Self {
                n,
                mean: 0.0,
                sd: 0.0,
                min: 0.0,
                median: 0.0,
                max: 0.0,
            };
        }
        let mean = xs.iter().sum::<f64>() / n as f64;
        let sd = if n > 1 {
            (xs.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt()
        } else {
            0.0
        };
        let mut sorted = xs.to_vec();
        sorted.sort_by(f64::total_cmp);
        let median = if n % 2 == 1 {
            sorted[n / 2]
        } else {
            (sorted[n / 2 - 1] + sorted[n / 2]) / 2.0
        };
        Self {
            n,
            mean,
            sd,
            min: sorted[0],
            median,
            max: sorted[n - 1],
        }
    }

    /// σ over the mean; 0 when the mean is 0.
    pub fn relative_sd(&self) -> f64 {
        if self.mean.abs() > 0.0 {
            self.sd / self.mean.abs()
        } else {
            0.0
        }
    }
}

/// A mean with its 95 % interval; the interval is absent with fewer than two samples.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct MeanInterval {
    pub n: usize,
    pub mean: f64,
    pub low: Option<f64>,
    pub high: Option<f64>,
}

impl MeanInterval {
    /// `(low, high)` when the runs gave one and it is a real interval.
    pub fn bounds(&self) -> Option<(f64, f64)> {
        match (self.low, self.high) {
            (Some(l), Some(h)) if l.is_finite() && h.is_finite() && l <= h => Some((l, h)),
            _ => None,
        }
    }
}
