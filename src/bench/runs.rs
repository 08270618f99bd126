//! Repeated runs and what they say together: per side the spread of each figure, the
//! engine/baseline ratio with a 95 % interval from the paired runs, when the spread is too wide
//! to trust, and whether a later run differs from a saved one beyond both runs' noise.
//!
//! Pure arithmetic on per-run samples, so the rules are tested on synthetic samples
//! (`tests/it/bench.rs`), not on a machine's noise.

use serde::{Deserialize, Serialize};

use super::machine::MachineBefore;
use crate::stats::{LogSamples, samples_to_resolve};
pub use crate::stats::{MeanInterval, Spread};

/// The change a ratio's interval must resolve unless `--fail-on-regression` names another: an
/// interval wider than ×/÷ 1.05 around its estimate cannot tell a 5 % change from noise.
pub const RESOLUTION: f64 = 0.05;

/// Whether an interval of a ratio of rates is narrow enough to call, and if not how many runs
/// would make it so at the spread observed.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Resolution {
    /// X, as a share: the interval must lie within ×/÷ (1 + X) of its estimate, ±X % for short.
    pub within: f64,
    /// Its half-width on the log scale exceeds ln(1 + X): too wide to tell a change of X.
    pub too_wide: bool,
    /// Runs (a side, for a comparison) whose interval would be ±X % at this spread, from
    /// n = (t·s / ln(1 + X))²; `None` when not too wide, or when more than `MAX_RUNS` would be
    /// needed (then a longer `--duration`, which averages each run over more, is the way).
    pub runs_needed: Option<u32>,
}

impl Resolution {
    /// `sd_logs`: the standard deviation of the logs of the paired ratios (one) or of each
    /// side's rates (two, for a comparison). `None` without an interval.
    pub fn of(q: &MeanInterval, sd_logs: &[f64], within: f64) -> Option<Self> {
        let (low, high) = q.bounds()?;
        if low <= 0.0 || low.is_nan() {
            return None;
        }
        // A hair of slack, so an interval exactly ±X is not called too wide by rounding.
        let too_wide = (high / low).ln() / 2.0 > (1.0 + within).ln() * (1.0 + 1e-9);
        let runs_needed = if too_wide {
            samples_to_resolve(sd_logs, within, super::MAX_RUNS as usize).map(|n| n as u32)
        } else {
            None
        };
        Some(Self {
            within,
            too_wide,
            runs_needed,
        })
    }

    /// What a reader does about a too-wide interval: `; too wide to tell ±5 %: about 19 paired
    /// runs would narrow it to that (--runs 19)`. Empty when it is narrow enough.
    pub fn advice(&self, runs_word: &str) -> String {
        if !self.too_wide {
            return String::new();
        }
        let x = percent_text(self.within);
        match self.runs_needed {
            Some(n) => format!(
                ": too wide to tell a change of ±{x}; about {n} {runs_word} would narrow it to ±{x} at this spread (--runs {n})"
            ),
            None => format!(
                ": too wide to tell a change of ±{x}; more than {} {runs_word} would be needed at this spread: a longer --duration averages each run over more",
                super::MAX_RUNS
            ),
        }
    }
}

/// `5 %`, `2.5 %`: a share as the percentage a user typed.
fn percent_text(share: f64) -> String {
    let p = share * 100.0;
    if (p - p.round()).abs() < 1e-9 {
        format!("{p:.0} %")
    } else {
        format!("{p:.1} %")
    }
}

/// The engine/baseline ratio of paired runs (run i of each side): the geometric mean of the
/// ratios with a Student t interval on their logs, exponentiated, so both bounds are above 0.
/// A pair in which a side created nothing has no ratio to take the log of and is left out.
pub fn paired_ratio(engine: &[f64], baseline: &[f64]) -> MeanInterval {
    paired_logs(engine, baseline).geometric_interval()
}

/// The logs of the paired runs' ratios: their spread is what the runs-needed figure uses.
pub fn paired_logs(engine: &[f64], baseline: &[f64]) -> LogSamples {
    let ratios: Vec<f64> = engine
        .iter()
        .zip(baseline)
        .filter(|(e, b)| **e > 0.0 && **b > 0.0)
        .map(|(e, b)| e / b)
        .collect();
    LogSamples::of(&ratios)
}

/// `95 % interval L to H (N paired runs)` of a paired ratio; `None` without an interval (one
/// run), where each caller says what to give for one.
pub fn ratio_interval_text(q: &MeanInterval) -> Option<String> {
    match (q.low, q.high) {
        (Some(l), Some(h)) => Some(format!(
            "95 % interval {} to {} ({} paired runs)",
            ratio_text(l),
            ratio_text(h),
            q.n
        )),
        _ => None,
    }
}

/// A ratio to two decimals, or to two significant digits below 0.1, so a bound above 0 is
/// never printed as `0.00`.
pub fn ratio_text(x: f64) -> String {
    if x >= 0.1 {
        format!("{x:.2}")
    } else {
        crate::format::significant(x, 2)
    }
}

/// A change as a signed percentage to one decimal, with more decimals near −100 % so a bound
/// above −100 % is never printed as `-100.0 %`.
pub fn change_text(x: f64) -> String {
    let p = x * 100.0;
    let left = 100.0 + p;
    let decimals = if left > 0.0 && left < 0.1 {
        (-left.log10()).ceil() as usize + 1
    } else {
        1
    };
    format!("{p:+.decimals$} %")
}

/// The mean of `xs` with a Student t 95 % interval: what a report draws as a side's whisker,
/// so a reader sees how far the next run's mean may fall, not the single run's noise.
pub fn mean_interval(xs: &[f64]) -> MeanInterval {
    let s = Spread::of(xs);
    let half = crate::stats::t975(s.n as f64 - 1.0).map(|t| t * s.sd / (s.n as f64).sqrt());
    MeanInterval {
        n: s.n,
        mean: s.mean,
        low: half.map(|h| s.mean - h),
        high: half.map(|h| s.mean + h),
    }
}

/// Above this share of all cores busy before the run, other work is taking what a run needs.
pub const BUSY_BEFORE_LIMIT: f64 = 0.5;

/// Why a run's figures should not be trusted yet, each with what to do, as hyperfine says it:
/// the runs' own spread, and the machine as it was before the run started.
pub fn noise_warnings(
    engine_creates: &Spread,
    baseline_creates: &Spread,
    before: &MachineBefore,
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
    let cores = before.cores.max(1);
    let mut busy = Vec::new();
    if let Some(load) = before.load_1m
        && load > cores as f64
    {
        busy.push(format!(
            "the 1-minute load average before the run ({load:.2}) was above the {cores} cores"
        ));
    }
    if let Some(share) = before.cpu_busy
        && share > BUSY_BEFORE_LIMIT
    {
        busy.push(format!(
            "{:.0} % of the {cores} cores were busy just before the run",
            share * 100.0
        ));
    }
    if !busy.is_empty() {
        out.push(format!(
            "warning: {}: other work competed with the run; close other programs and rerun",
            busy.join(", and ")
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
    /// The interval holds 0 and lies within ±X % of its estimate.
    NoChange,
    /// The interval holds 0 but is wider than ±X %: these runs cannot tell.
    TooWide,
}

impl Verdict {
    pub fn words(self) -> &'static str {
        match self {
            Verdict::Regressed => "regressed",
            Verdict::Improved => "improved",
            Verdict::NoChange => "no change",
            Verdict::TooWide => "cannot tell",
        }
    }
}

/// This run's engine creates/s against a saved run's: the ratio of the two sides' geometric
/// means with a Welch t interval on the logs (the runs are not paired across files), as a
/// change: ratio − 1, so never below −100 %.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Comparison {
    pub baseline_file: String,
    pub baseline: Spread,
    pub current: Spread,
    /// (current / saved) − 1 of the geometric means, and its 95 % interval; `None` without two
    /// runs a side.
    pub change: f64,
    pub change_low: Option<f64>,
    pub change_high: Option<f64>,
    pub verdict: Verdict,
    /// How wide the interval is against ±X % (X: `--fail-on-regression`, else 5 %), and the
    /// runs a side that would narrow it; `None` without an interval.
    pub resolution: Option<Resolution>,
    /// `--fail-on-regression PCT` as a share, when given.
    pub fail_on_regression: Option<f64>,
    /// A regression larger than `fail_on_regression`: the command exits 1.
    pub fails: bool,
}

/// Compares two sides' samples. "regressed" or "improved" only when the change's 95 % interval
/// excludes 0; one that holds 0 is "no change" when it lies within ±X % (X: the
/// `--fail-on-regression` limit, else [`RESOLUTION`]), else "cannot tell", with the runs that
/// would tell.
pub fn compare(
    baseline_file: &str,
    saved: &[f64],
    current: &[f64],
    fail_on_regression: Option<f64>,
) -> Comparison {
    let (b, c) = (Spread::of(saved), Spread::of(current));
    let (lb, lc) = (LogSamples::of(saved), LogSamples::of(current));
    let q = lc.ratio_interval(&lb);
    let within = fail_on_regression
        .filter(|p| *p > 0.0)
        .unwrap_or(RESOLUTION);
    let resolution = Resolution::of(&q, &[lb.sd, lc.sd], within);
    let verdict = match (q.bounds(), resolution) {
        (Some((_, h)), _) if h < 1.0 => Verdict::Regressed,
        (Some((l, _)), _) if l > 1.0 => Verdict::Improved,
        (_, Some(r)) if r.too_wide => Verdict::TooWide,
        (Some(_), _) => Verdict::NoChange,
        (None, _) => Verdict::TooWide,
    };
    let change = q.mean - 1.0;
    let fails = verdict == Verdict::Regressed && fail_on_regression.is_some_and(|p| -change > p);
    Comparison {
        baseline_file: baseline_file.to_string(),
        baseline: b,
        current: c,
        change,
        change_low: q.low.map(|l| l - 1.0),
        change_high: q.high.map(|h| h - 1.0),
        verdict,
        resolution,
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
