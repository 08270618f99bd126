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

/// The two-sided 97.5 % quantile of Student's t with `df` degrees of freedom: the half-width
/// factor of every t interval here. `None` without a degree of freedom.
pub fn t975(df: f64) -> Option<f64> {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    if !(df > 0.0 && df.is_finite()) {
        return None;
    }
    StudentsT::new(0.0, 1.0, df)
        .ok()
        .map(|t| t.inverse_cdf(0.975))
}

/// Positive samples on the log scale: a ratio of rates is multiplicative, so its interval is
/// built on logs and exponentiated, and can never reach 0 (or a change below −100 %), as a t
/// interval on the ratios themselves does with a few noisy runs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LogSamples {
    pub n: usize,
    /// Mean of the logs: the log of the geometric mean.
    pub mean: f64,
    /// Sample standard deviation of the logs (n − 1); 0 with one sample.
    pub sd: f64,
}

impl LogSamples {
    /// The logs of the positive, finite samples; others (a run that created nothing) have no
    /// log and are left out.
    pub fn of(xs: &[f64]) -> Self {
        let logs: Vec<f64> = xs
            .iter()
            .filter(|x| x.is_finite() && **x > 0.0)
            .map(|x| x.ln())
            .collect();
        let s = Spread::of(&logs);
        Self {
            n: s.n,
            mean: s.mean,
            sd: s.sd,
        }
    }

    /// The geometric mean of one sample of ratios (paired runs) with its Student t 95 %
    /// interval on the logs, exponentiated; no interval from fewer than two.
    pub fn geometric_interval(&self) -> MeanInterval {
        let half = t975(self.n as f64 - 1.0).map(|t| t * self.sd / (self.n as f64).sqrt());
        MeanInterval {
            n: self.n,
            mean: self.mean.exp(),
            low: half.map(|h| (self.mean - h).exp()),
            high: half.map(|h| (self.mean + h).exp()),
        }
    }

    /// `self` over `other`, two independent samples: the ratio of their geometric means with a
    /// Welch t 95 % interval on the difference of the mean logs, exponentiated. `n` is this
    /// sample's; no interval without two samples a side.
    pub fn ratio_interval(&self, other: &LogSamples) -> MeanInterval {
        let diff = self.mean - other.mean;
        let half = if self.n < 2 || other.n < 2 {
            None
        } else {
            let (va, vb) = (
                self.sd.powi(2) / self.n as f64,
                other.sd.powi(2) / other.n as f64,
            );
            welch_t975(va, self.n, vb, other.n).map(|t| t * (va + vb).sqrt())
        };
        MeanInterval {
            n: self.n,
            mean: diff.exp(),
            low: half.map(|h| (diff - h).exp()),
            high: half.map(|h| (diff + h).exp()),
        }
    }
}

/// Student's t quantile at the Welch–Satterthwaite degrees of freedom of two samples' variances
/// of the mean; with no variance at all any quantile gives a half-width of 0.
fn welch_t975(va: f64, na: usize, vb: f64, nb: usize) -> Option<f64> {
    if va + vb == 0.0 {
        return Some(0.0);
    }
    let df = (va + vb).powi(2) / (va.powi(2) / (na - 1) as f64 + vb.powi(2) / (nb - 1) as f64);
    t975(df)
}

/// The fewest samples `n` (each side, for two) whose 95 % interval on the log scale has a
/// half-width of at most `ln(1 + change)`: the solution of `n = (t·s / ln(1 + change))²`, where
/// t depends on n, found by counting up. `sd_logs` are the observed standard deviations of the
/// logs, one for a single sample of ratios (t with n − 1 degrees of freedom), two for two
/// independent samples (Welch's degrees of freedom at n a side). `None` when more than `limit`
/// would be needed, or the spread or the change is not a positive number.
pub fn samples_to_resolve(sd_logs: &[f64], change: f64, limit: usize) -> Option<usize> {
    let target = (1.0 + change).ln();
    if !(target > 0.0 && target.is_finite()) || sd_logs.iter().any(|s| !s.is_finite()) {
        return None;
    }
    (2..=limit).find(|&n| {
        let var: Vec<f64> = sd_logs.iter().map(|s| s.powi(2) / n as f64).collect();
        let half = match var.as_slice() {
            [v] => t975(n as f64 - 1.0).map(|t| t * v.sqrt()),
            [va, vb] => welch_t975(*va, n, *vb, n).map(|t| t * (va + vb).sqrt()),
            _ => None,
        };
        half.is_some_and(|h| h <= target)
    })
}
