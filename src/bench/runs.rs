//! Repeated runs and what they say together: per side the spread of each figure, the
//! engine/baseline ratio with a 95 % interval from the paired runs, when the spread is too wide
//! to trust, and whether a later run differs from a saved one beyond both runs' noise.
//!
//! Pure arithmetic on per-run samples, so the rules are tested on synthetic samples
//! (`tests/it/bench.rs`), not on a machine's noise.

use serde::{Deserialize, Serialize};

pub use crate::stats::{MeanInterval, Spread};
use statrs::distribution::{ContinuousCDF, StudentsT};

/// The two-sided 97.5 % quantile of Student's t with `df` degrees of freedom.
fn t975(df: f64) -> Option<f64> {
    if !(df > 0.0 && df.is_finite()) {
        return None;
    }
    StudentsT::new(0.0, 1.0, df)
        .ok()
        .map(|t| t.inverse_cdf(0.975))
}

/// The engine/baseline ratio of paired runs (run i of each side): the mean of the ratios with
/// a Student t interval on them.
pub fn paired_ratio(engine: &[f64], baseline: &[f64]) -> MeanInterval {
    let ratios: Vec<f64> = engine
        .iter()
        .zip(baseline)
        .filter(|(_, b)| **b > 0.0)
        .map(|(e, b)| e / b)
        .collect();
    mean_interval(&ratios)
}

/// `95 % interval L to H (N paired runs)` of a paired ratio; `None` without an interval (one
/// run), where each caller says what to give for one.
pub fn ratio_interval_text(q: &MeanInterval) -> Option<String> {
    match (q.low, q.high) {
        (Some(l), Some(h)) => Some(format!(
            "95 % interval {l:.2} to {h:.2} ({} paired runs)",
            q.n
        )),
        _ => None,
    }
}

/// The mean of `xs` with a Student t 95 % interval: what a report draws as a side's whisker,
/// so a reader sees how far the next run's mean may fall, not the single run's noise.
pub fn mean_interval(xs: &[f64]) -> MeanInterval {
    let s = Spread::of(xs);
    let half = t975(s.n as f64 - 1.0).map(|t| t * s.sd / (s.n as f64).sqrt());
    MeanInterval {
        n: s.n,
        mean: s.mean,
        low: half.map(|h| s.mean - h),
        high: half.map(|h| s.mean + h),
    }
}

/// Why a run's figures should not be trusted yet, each with what to do, as hyperfine says it.
pub fn noise_warnings(
    engine_creates: &Spread,
    baseline_creates: &Spread,
    load_1m: Option<f64>,
    cores: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    let wide: Vec<String> = [("engine", engine_creates), ("baseline", baseline_creates)]
        .iter()
        .filter(|(_, s)| s.n > 1 && s.relative_sd() > NOISY_RELATIVE_SD)
        .map(|(name, s)| format!("{name} σ {:.0} % of its mean", s.relative_sd() * 100.0))
        .collect();
    if !wide.is_empty() {
        out.push(format!(
            "warning: the runs spread widely ({}); close other programs, give more --runs or a longer --duration",
            wide.join(", ")
        ));
    }
    if let Some(load) = load_1m
        && load > cores as f64
    {
        out.push(format!(
            "warning: the 1-minute load average ({load:.2}) is above the {cores} cores: other work competed with the run; close other programs and rerun"
        ));
    }
    out
}

/// σ above this share of the mean makes a side's figures noisy.
pub const NOISY_RELATIVE_SD: f64 = 0.10;

/// The verdict of a run against a saved one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    Regressed,
    Improved,
    NoChange,
}

impl Verdict {
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Regressed => "regressed",
            Verdict::Improved => "improved",
            Verdict::NoChange => "no change",
        }
    }
}

/// This run's engine creates/s against a saved run's: the difference of the means with a
/// Welch t interval, as shares of the saved mean.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub baseline_file: String,
    pub baseline: Spread,
    pub current: Spread,
    /// (current − saved) / saved mean, and its 95 % interval; `None` without two runs a side.
    pub change: f64,
    pub change_low: Option<f64>,
    pub change_high: Option<f64>,
    pub verdict: Verdict,
    /// `--fail-on-regression PCT` as a share, when given.
    pub fail_on_regression: Option<f64>,
    /// A regression larger than `fail_on_regression`: the command exits 1.
    pub fails: bool,
}

/// Compares two sides' samples. "regressed" or "improved" only when the difference's 95 %
/// interval excludes 0; anything within both runs' noise is "no change".
pub fn compare(
    baseline_file: &str,
    saved: &[f64],
    current: &[f64],
    fail_on_regression: Option<f64>,
) -> Comparison {
    let (b, c) = (Spread::of(saved), Spread::of(current));
    let base = if b.mean > 0.0 { b.mean } else { 1.0 };
    let diff = c.mean - b.mean;
    let (vb, vc) = (
        b.sd.powi(2) / b.n.max(1) as f64,
        c.sd.powi(2) / c.n.max(1) as f64,
    );
    let se = (vb + vc).sqrt();
    let half = if b.n < 2 || c.n < 2 {
        None
    } else if se == 0.0 {
        Some(0.0)
    } else {
        // Welch–Satterthwaite degrees of freedom.
        let df =
            (vb + vc).powi(2) / (vb.powi(2) / (b.n - 1) as f64 + vc.powi(2) / (c.n - 1) as f64);
        t975(df).map(|t| t * se)
    };
    let (low, high) = (half.map(|h| diff - h), half.map(|h| diff + h));
    let verdict = match (low, high) {
        (Some(_), Some(h)) if h < 0.0 => Verdict::Regressed,
        (Some(l), Some(_)) if l > 0.0 => Verdict::Improved,
        _ => Verdict::NoChange,
    };
    let change = diff / base;
    let fails = verdict == Verdict::Regressed && fail_on_regression.is_some_and(|p| -change > p);
    Comparison {
        baseline_file: baseline_file.to_string(),
        baseline: b,
        current: c,
        change,
        change_low: low.map(|l| l / base),
        change_high: high.map(|h| h / base),
        verdict,
        fail_on_regression,
        fails,
    }
}

/// The engine's creates/s of every run in a saved `bench --format json`.
pub fn saved_engine_creates(json: &serde_json::Value) -> Result<Vec<f64>, String> {
    let runs = json["runs"]["engine"]
        .as_array()
        .ok_or("no `runs.engine` list: save it with `idemcalc bench --save-baseline FILE` (bench JSON of schema 2 or later)")?;
    runs.iter()
        .map(|r| {
            r["creates_per_s"]
                .as_f64()
                .ok_or_else(|| "a run in `runs.engine` has no `creates_per_s`".to_string())
        })
        .collect()
}
