//! What arrives and when: the late-retry distribution and the arrival process.
//!
//! The model, the simulator and the report all read retries and arrivals from here, so that
//! "how late do retries arrive?" has one answer across the tool. This module does no IO except
//! [`RetryDelay::from_csv_path`], and all sampling is deterministic given the caller's rng.

use std::path::{Path, PathBuf};

use rand::RngExt as _;
use rand::distr::Distribution as _;
use serde::{Deserialize, Serialize};
use statrs::distribution::Exp;

use crate::duration;

use crate::duration::DAY_S;

/// The seed's illustrative table, "time since the first attempt" → fraction of retries arrived
/// (10 s 62 %, 1 m 85 %, 10 m 91 %, 1 h 94 %, 6 h 97.5 %, 24 h 99.2 %, 3 d 99.9 %).
pub const SEED_POINTS: [(f64, f64); 7] = [
    (10.0, 0.62),
    (60.0, 0.85),
    (600.0, 0.91),
    (3_600.0, 0.94),
    (21_600.0, 0.975),
    (DAY_S, 0.992),
    (259_200.0, 0.999),
];

/// Default earliest retry: a retry follows a timeout, and the seed's caller gives up after a
/// 250 ms deadline, so nothing retries sooner than that.
pub const DEFAULT_MIN_DELAY_S: f64 = 0.25;

/// Default tail horizon, 30 days: the latest a retry plausibly comes, e.g. a monthly
/// reconciliation re-running a failed batch. Beyond it the model assumes no retries at all.
pub const DEFAULT_MAX_HORIZON_S: f64 = 30.0 * DAY_S;

/// How the mass below the first point (62 % below 10 s in the seed) is spread. A table only
/// says how much arrived by its first delay, not when, so this is a stated assumption.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Head {
    /// Spread log-uniformly from `min_delay_s` to the first point: the same shape as between
    /// the points (linear in log-time), starting at the earliest possible retry.
    LogUniform { min_delay_s: f64 },
    /// All of it at the first point's delay: the latest it could be, hence the conservative
    /// choice when the first point is already a lower bound you trust.
    AtFirstPoint,
}

impl Default for Head {
    fn default() -> Self {
        Head::LogUniform {
            min_delay_s: DEFAULT_MIN_DELAY_S,
        }
    }
}

/// How the mass beyond the last point (0.1 % after 3 d in the seed) is spread. Only matters
/// when the last point's fraction is below 1.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Tail {
    /// Linear in log-time from the last point up to 1 at `max_horizon_s`: the shape the seed's
    /// table already has between points.
    LogLinear { max_horizon_s: f64 },
    /// All of it at `max_horizon_s`: the survival stays flat until the horizon, a pessimistic
    /// bound that makes every retention short of the horizon pay for the whole tail.
    AtHorizon { max_horizon_s: f64 },
}

impl Tail {
    pub fn max_horizon_s(&self) -> f64 {
        match *self {
            Tail::LogLinear { max_horizon_s } | Tail::AtHorizon { max_horizon_s } => max_horizon_s,
        }
    }
}

impl Default for Tail {
    fn default() -> Self {
        Tail::LogLinear {
            max_horizon_s: DEFAULT_MAX_HORIZON_S,
        }
    }
}

/// A list of points that cannot be a retry-delay CDF. `index` counts points from 0 so a file
/// reader can turn it into a line number.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PointsError {
    #[error("needs at least two points (delay, cumulative fraction), found {found}")]
    TooFewPoints { found: usize },
    #[error(
        "delay {delay} must be above 0 (delays are interpolated in log-time; start at e.g. 250ms)"
    )]
    DelayNotPositive { index: usize, delay: String },
    #[error(
        "delay {delay} is not after the previous point's {previous}; list delays in increasing order"
    )]
    DelayNotIncreasing {
        index: usize,
        delay: String,
        previous: String,
    },
    #[error("cumulative fraction {cdf} is outside 0..1 (write fractions like 0.62 or 62%)")]
    CdfOutOfRange { index: usize, cdf: f64 },
    #[error(
        "cumulative fraction {cdf} is below the previous point's {previous}; a CDF never decreases"
    )]
    CdfDecreasing {
        index: usize,
        cdf: f64,
        previous: f64,
    },
    #[error(
        "the head's minimum delay {min_delay} must be above 0 and before the first point {first}; pass a smaller --retry-min-delay"
    )]
    BadHead {
        index: usize,
        min_delay: String,
        first: String,
    },
    #[error(
        "the last point {last} is at {cdf}, so the tail needs a horizon after it, not {horizon}; pass a later --retry-horizon"
    )]
    BadTail {
        index: usize,
        last: String,
        cdf: f64,
        horizon: String,
    },
}

impl PointsError {
    /// The point the problem is about, if it is about one.
    pub fn index(&self) -> Option<usize> {
        match *self {
            PointsError::TooFewPoints { .. } => None,
            PointsError::DelayNotPositive { index, .. }
            | PointsError::DelayNotIncreasing { index, .. }
            | PointsError::CdfOutOfRange { index, .. }
            | PointsError::CdfDecreasing { index, .. }
            | PointsError::BadHead { index, .. }
            | PointsError::BadTail { index, .. } => Some(index),
        }
    }
}

/// A `--retry-cdf` file that cannot be used; every variant names the file, and the line when
/// there is one, so the user can go straight to it.
#[derive(Debug, thiserror::Error)]
pub enum RetryCdfError {
    // Not `source`, so that `{:#}` chains do not print the cause twice.
    #[error("cannot read retry CDF file {}: {io}", path.display())]
    Io { path: PathBuf, io: std::io::Error },
    #[error("{}:{line}: {problem}", path.display())]
    Line {
        path: PathBuf,
        line: usize,
        problem: String,
    },
    #[error("{}: {problem}", path.display())]
    File { path: PathBuf, problem: String },
}

/// The late-retry distribution: time from a call's first attempt to a retry of it, in seconds.
///
/// Between the given points the CDF is linear in log-time, because retry delays span seven
/// orders of magnitude (in-process backoff in seconds, queue redelivery in hours, manual
/// re-runs in days) and a log axis is where the seed's table reads as a smooth curve. Below the
/// first point and beyond the last, [`Head`] and [`Tail`] say what is assumed.
#[derive(Debug, Clone, PartialEq)]
pub struct RetryDelay {
    points: Vec<(f64, f64)>,
    head: Head,
    tail: Tail,
}

/// One point as it is serialised for the report: seconds for computing, text for showing.
#[derive(Serialize)]
struct PointView {
    delay_s: f64,
    delay: String,
    cdf: f64,
}

#[derive(Serialize)]
struct RetryDelayView {
    points: Vec<PointView>,
    head: Head,
    tail: Tail,
    max_horizon_s: f64,
}

/// Serialised as `{points: [{delay_s, delay, cdf}], head, tail, max_horizon_s}` so the HTML
/// report can embed the distribution as data and redo the interpolation in the browser.
impl Serialize for RetryDelay {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        RetryDelayView {
            points: self
                .points
                .iter()
                .map(|&(delay_s, cdf)| PointView {
                    delay_s,
                    delay: crate::format::human_duration(delay_s),
                    cdf,
                })
                .collect(),
            head: self.head,
            tail: self.tail,
            max_horizon_s: self.max_horizon_s(),
        }
        .serialize(serializer)
    }
}

impl Default for RetryDelay {
    fn default() -> Self {
        RetryDelay::seed()
    }
}

impl RetryDelay {
    /// The seed's table with the default head (log-uniform from 250 ms) and tail (log-linear
    /// to 30 d).
    pub fn seed() -> Self {
        RetryDelay {
            points: SEED_POINTS.to_vec(),
            head: Head::default(),
            tail: Tail::default(),
        }
    }

    /// The seed's table with another head and tail, e.g. from the command line.
    pub fn seed_with(head: Head, tail: Tail) -> Result<Self, PointsError> {
        RetryDelay::from_points(SEED_POINTS.to_vec(), head, tail)
    }

    /// Checks that `points` (delay in seconds, cumulative fraction) can be a CDF: at least two,
    /// delays above 0 and strictly increasing, fractions in 0..=1 and never decreasing, and a
    /// head and tail that fit around them.
    pub fn from_points(
        points: Vec<(f64, f64)>,
        head: Head,
        tail: Tail,
    ) -> Result<Self, PointsError> {
        if points.len() < 2 {
            return Err(PointsError::TooFewPoints {
                found: points.len(),
            });
        }
        for (index, &(delay_s, cdf)) in points.iter().enumerate() {
            if !(delay_s > 0.0 && delay_s.is_finite()) {
                return Err(PointsError::DelayNotPositive {
                    index,
                    delay: duration::format_secs(delay_s),
                });
            }
            if !(0.0..=1.0).contains(&cdf) {
                return Err(PointsError::CdfOutOfRange { index, cdf });
            }
            if index > 0 {
                let (previous_s, previous_cdf) = points[index - 1];
                if delay_s <= previous_s {
                    return Err(PointsError::DelayNotIncreasing {
                        index,
                        delay: duration::format_secs(delay_s),
                        previous: duration::format_secs(previous_s),
                    });
                }
                if cdf < previous_cdf {
                    return Err(PointsError::CdfDecreasing {
                        index,
                        cdf,
                        previous: previous_cdf,
                    });
                }
            }
        }
        let (first_s, first_cdf) = points[0];
        if let Head::LogUniform { min_delay_s } = head
            && first_cdf > 0.0
            && !(min_delay_s > 0.0 && min_delay_s < first_s)
        {
            return Err(PointsError::BadHead {
                index: 0,
                min_delay: duration::format_secs(min_delay_s),
                first: duration::format_secs(first_s),
            });
        }
        let last = points.len() - 1;
        let (last_s, last_cdf) = points[last];
        let horizon_s = tail.max_horizon_s();
        if last_cdf < 1.0 && !(horizon_s > last_s && horizon_s.is_finite()) {
            return Err(PointsError::BadTail {
                index: last,
                last: duration::format_secs(last_s),
                cdf: last_cdf,
                horizon: duration::format_secs(horizon_s),
            });
        }
        Ok(RetryDelay { points, head, tail })
    }

    /// Reads a measured distribution with the default head and tail; see [`Self::from_csv_str`].
    pub fn from_csv_path(path: &Path) -> Result<Self, RetryCdfError> {
        RetryDelay::from_csv_path_with(path, Head::default(), Tail::default())
    }

    /// Reads a measured distribution with the given head and tail.
    pub fn from_csv_path_with(path: &Path, head: Head, tail: Tail) -> Result<Self, RetryCdfError> {
        let text = crate::input::read_limited(path).map_err(|io| RetryCdfError::Io {
            path: path.to_path_buf(),
            io,
        })?;
        RetryDelay::from_csv_str(&text, path, head, tail)
    }

    /// Parses CSV lines of `delay,cumulative fraction`, e.g. `90s,0.85` or `6h,97.5%`.
    ///
    /// Blank lines and lines starting with `#` are skipped, and so is a first line that is a
    /// header (neither field parses). `path` is only used to name the source in errors.
    pub fn from_csv_str(
        text: &str,
        path: &Path,
        head: Head,
        tail: Tail,
    ) -> Result<Self, RetryCdfError> {
        let line_error = |line: usize, problem: String| RetryCdfError::Line {
            path: path.to_path_buf(),
            line,
            problem,
        };
        let mut points = Vec::new();
        let mut lines_of_points = Vec::new();
        let mut seen_content = false;
        for (i, raw) in text.lines().enumerate() {
            let line_no = i + 1;
            let line = raw.trim().trim_start_matches('\u{feff}');
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let first_content = !seen_content;
            seen_content = true;
            let fields: Vec<&str> = line.split(',').map(str::trim).collect();
            if fields.len() != 2 {
                return Err(line_error(
                    line_no,
                    format!(
                        "expected two fields `delay,cumulative fraction` (e.g. `90s,0.85`), found {}",
                        fields.len()
                    ),
                ));
            }
            let delay = duration::parse(fields[0]);
            let cdf = parse_fraction(fields[1]);
            match (delay, cdf) {
                (Ok(delay), Ok(cdf)) => {
                    points.push((delay.as_secs_f64(), cdf));
                    lines_of_points.push(line_no);
                }
                (Err(_), Err(_)) if first_content => continue, // a header such as `delay,cdf`
                (Err(e), _) => return Err(line_error(line_no, e.to_string())),
                (_, Err(e)) => return Err(line_error(line_no, e)),
            }
        }
        RetryDelay::from_points(points, head, tail).map_err(|e| match e.index() {
            Some(index) => line_error(lines_of_points[index], e.to_string()),
            None => match lines_of_points.last() {
                Some(&line) => line_error(line, e.to_string()),
                None => RetryCdfError::File {
                    path: path.to_path_buf(),
                    problem: e.to_string(),
                },
            },
        })
    }

    /// The points as given: (delay in seconds, cumulative fraction).
    pub fn points(&self) -> &[(f64, f64)] {
        &self.points
    }

    pub fn head(&self) -> Head {
        self.head
    }

    pub fn tail(&self) -> Tail {
        self.tail
    }

    /// How the distribution is drawn between and beyond its points, in one sentence: which
    /// table it is (the seed's illustrative one, or one given by `--retry-cdf` or fitted from
    /// logs), its head and its tail as they are, for every caption that describes it.
    pub fn shape_text(&self) -> String {
        // For people: a fitted point or horizon (121996.8 s) reads as 1.412d.
        let fmt = crate::duration::format_readable;
        let source = if self.points[..] == SEED_POINTS[..] {
            "The seed's illustrative table"
        } else {
            "The given distribution (a --retry-cdf file or a fitted scenario)"
        };
        let (first_s, _) = self.points[0];
        let head = match self.head {
            Head::LogUniform { min_delay_s } => format!(
                "below {} the mass is spread log-uniformly from {}",
                fmt(first_s),
                fmt(min_delay_s)
            ),
            Head::AtFirstPoint => {
                format!("the mass below {} is all at {}", fmt(first_s), fmt(first_s))
            }
        };
        let &(last_s, last_cdf) = self.points.last().expect("at least two points");
        let tail = if last_cdf >= 1.0 {
            format!("every retry has arrived by {}", fmt(last_s))
        } else {
            match self.tail {
                Tail::LogLinear { max_horizon_s } => format!(
                    "after {} it runs out linearly in log-time at {}",
                    fmt(last_s),
                    fmt(max_horizon_s)
                ),
                Tail::AtHorizon { max_horizon_s } => format!(
                    "after {} the rest arrives at {}",
                    fmt(last_s),
                    fmt(max_horizon_s)
                ),
            }
        };
        format!("{source} as points, interpolated linearly in log-time; {head}, {tail}.")
    }

    /// The delay by which every retry has arrived: the tail's horizon, or the last point if it
    /// already reaches 1.
    pub fn max_horizon_s(&self) -> f64 {
        let &(last_s, last_cdf) = self.points.last().expect("at least two points");
        if last_cdf >= 1.0 {
            last_s
        } else {
            self.tail.max_horizon_s()
        }
    }

    /// Fraction of retries that have arrived `delay_s` seconds after the first attempt.
    pub fn cdf(&self, delay_s: f64) -> f64 {
        if delay_s.is_nan() {
            return f64::NAN;
        }
        let (first_s, first_cdf) = self.points[0];
        if delay_s < first_s {
            return match self.head {
                Head::AtFirstPoint => 0.0,
                Head::LogUniform { min_delay_s } if delay_s > min_delay_s => {
                    first_cdf * (delay_s / min_delay_s).ln() / (first_s / min_delay_s).ln()
                }
                Head::LogUniform { .. } => 0.0,
            };
        }
        let &(last_s, last_cdf) = self.points.last().expect("at least two points");
        if delay_s > last_s {
            let horizon_s = self.tail.max_horizon_s();
            if last_cdf >= 1.0 || delay_s >= horizon_s {
                return 1.0;
            }
            return match self.tail {
                Tail::LogLinear { .. } => {
                    last_cdf
                        + (1.0 - last_cdf) * (delay_s / last_s).ln() / (horizon_s / last_s).ln()
                }
                Tail::AtHorizon { .. } => last_cdf,
            };
        }
        // Exact hits return the point itself, so survival(24h) is exactly 1 - 0.992.
        match self.points.binary_search_by(|p| p.0.total_cmp(&delay_s)) {
            Ok(i) => self.points[i].1,
            Err(i) => {
                let (t0, f0) = self.points[i - 1];
                let (t1, f1) = self.points[i];
                f0 + (f1 - f0) * (delay_s / t0).ln() / (t1 / t0).ln()
            }
        }
    }

    /// Fraction of retries still to come `delay_s` seconds after the first attempt: the share
    /// that a store purging keys at that age no longer recognises.
    pub fn survival(&self, delay_s: f64) -> f64 {
        1.0 - self.cdf(delay_s)
    }

    /// The delay by which a fraction `p` of retries has arrived (the smallest such delay).
    /// `p` is clamped to 0..=1.
    pub fn quantile(&self, p: f64) -> f64 {
        if p.is_nan() {
            return f64::NAN;
        }
        let p = p.clamp(0.0, 1.0);
        let (first_s, first_cdf) = self.points[0];
        if p <= first_cdf {
            return match self.head {
                Head::LogUniform { min_delay_s } if first_cdf > 0.0 => {
                    min_delay_s * (first_s / min_delay_s).powf(p / first_cdf)
                }
                _ => first_s,
            };
        }
        for pair in self.points.windows(2) {
            let ((t0, f0), (t1, f1)) = (pair[0], pair[1]);
            if p <= f1 {
                // p > f0 here, so f1 > f0 and the segment is not flat.
                return t0 * (t1 / t0).powf((p - f0) / (f1 - f0));
            }
        }
        let &(last_s, last_cdf) = self.points.last().expect("at least two points");
        let horizon_s = self.tail.max_horizon_s();
        match self.tail {
            Tail::LogLinear { .. } => {
                last_s * (horizon_s / last_s).powf((p - last_cdf) / (1.0 - last_cdf))
            }
            Tail::AtHorizon { .. } => horizon_s,
        }
    }

    /// One retry delay in seconds, by inverse-CDF sampling: one uniform draw per sample, so a
    /// seeded rng gives the same delays on every machine.
    pub fn sample<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> f64 {
        let u: f64 = rng.random();
        self.quantile(u)
    }
}

/// Parses `0.85` or `85%` as a fraction; anything outside 0..=1 is reported by the caller.
fn parse_fraction(text: &str) -> Result<f64, String> {
    let (number, scale) = match text.strip_suffix('%') {
        Some(n) => (n.trim(), 0.01),
        None => (text, 1.0),
    };
    number
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .map(|v| v * scale)
        .ok_or_else(|| format!("`{text}` is not a cumulative fraction (write it like 0.85 or 85%)"))
}

/// An arrival process that cannot be built; says which value to change.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ArrivalsError {
    #[error("rate {rate_per_s}/s must be a finite number above 0")]
    RateNotPositive { rate_per_s: f64 },
    #[error("step {index} has rate {rate_per_s}/s; rates must be finite and not negative")]
    StepRateNegative { index: usize, rate_per_s: f64 },
    #[error("a load profile needs at least one step, and its first must start at 0s")]
    FirstStepNotAtMidnight,
    #[error(
        "step {index} starts at {start}, which is not after the previous step and within the day (0s..24h)"
    )]
    StepOutOfOrder { index: usize, start: String },
    #[error("every step has rate 0, so nothing would ever arrive; give one step a rate above 0")]
    NothingArrives,
    #[error(
        "the rush window {start} + {duration} must lie within one day (0s..24h) and last more than 0s"
    )]
    RushOutsideDay { start: String, duration: String },
}

/// One step of a [`LoadProfile`]: from `start_s` (seconds after midnight) until the next step's
/// start, calls arrive at `rate_per_s`.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct RateStep {
    pub start_s: f64,
    pub rate_per_s: f64,
}

/// A daily load shape: piecewise-constant rates that repeat every 24 h, e.g. 400/s all day with
/// a rush window at the 2,000/s peak.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoadProfile {
    steps: Vec<RateStep>,
}

impl LoadProfile {
    /// Steps as `(start_s, rate_per_s)`; the first must start at 0 and starts must increase
    /// within the day.
    pub fn new(steps: Vec<(f64, f64)>) -> Result<Self, ArrivalsError> {
        if steps.first().is_none_or(|s| s.0 != 0.0) {
            return Err(ArrivalsError::FirstStepNotAtMidnight);
        }
        for (index, &(start_s, rate_per_s)) in steps.iter().enumerate() {
            if !(rate_per_s >= 0.0 && rate_per_s.is_finite()) {
                return Err(ArrivalsError::StepRateNegative { index, rate_per_s });
            }
            if index > 0 && !(start_s > steps[index - 1].0 && start_s < DAY_S) {
                return Err(ArrivalsError::StepOutOfOrder {
                    index,
                    start: duration::format_secs(start_s),
                });
            }
        }
        if steps.iter().all(|s| s.1 == 0.0) {
            return Err(ArrivalsError::NothingArrives);
        }
        Ok(LoadProfile {
            steps: steps
                .into_iter()
                .map(|(start_s, rate_per_s)| RateStep {
                    start_s,
                    rate_per_s,
                })
                .collect(),
        })
    }

    /// `base_rate_per_s` all day except a window of `rush_duration_s` from `rush_start_s` at
    /// `rush_rate_per_s` (the seed's pre-holiday packing rush runs at 2,000/s).
    pub fn rush(
        base_rate_per_s: f64,
        rush_rate_per_s: f64,
        rush_start_s: f64,
        rush_duration_s: f64,
    ) -> Result<Self, ArrivalsError> {
        let rush_end_s = rush_start_s + rush_duration_s;
        if !(rush_start_s >= 0.0 && rush_duration_s > 0.0 && rush_end_s <= DAY_S) {
            return Err(ArrivalsError::RushOutsideDay {
                start: duration::format_secs(rush_start_s),
                duration: duration::format_secs(rush_duration_s),
            });
        }
        let mut steps = Vec::with_capacity(3);
        if rush_start_s > 0.0 {
            steps.push((0.0, base_rate_per_s));
        }
        steps.push((rush_start_s, rush_rate_per_s));
        if rush_end_s < DAY_S {
            steps.push((rush_end_s, base_rate_per_s));
        }
        LoadProfile::new(steps)
    }

    pub fn steps(&self) -> &[RateStep] {
        &self.steps
    }

    /// When step `index` ends, in seconds after midnight.
    fn step_end_s(&self, index: usize) -> f64 {
        self.steps.get(index + 1).map_or(DAY_S, |s| s.start_s)
    }

    /// The rate in force `t_s` seconds after the simulation's midnight.
    pub fn rate_at(&self, t_s: f64) -> f64 {
        self.steps[self.step_index(t_s.rem_euclid(DAY_S))].rate_per_s
    }

    fn step_index(&self, time_of_day_s: f64) -> usize {
        self.steps
            .partition_point(|s| s.start_s <= time_of_day_s)
            .saturating_sub(1)
    }

    /// Expected arrivals in one day.
    pub fn arrivals_per_day(&self) -> f64 {
        (0..self.steps.len())
            .map(|i| self.steps[i].rate_per_s * (self.step_end_s(i) - self.steps[i].start_s))
            .sum()
    }

    pub fn mean_rate_per_s(&self) -> f64 {
        self.arrivals_per_day() / DAY_S
    }

    pub fn peak_rate_per_s(&self) -> f64 {
        self.steps.iter().map(|s| s.rate_per_s).fold(0.0, f64::max)
    }

    /// The most arrivals any window of `window_s` holds. The rate is a step function, so the
    /// window's count is piecewise linear in its start and peaks where the window's start or
    /// end meets a step's start: only those starts are tried.
    pub fn max_arrivals_in(&self, window_s: f64) -> f64 {
        if !(window_s > 0.0 && window_s.is_finite()) {
            return 0.0;
        }
        let in_window =
            |from: f64| self.expected_arrivals(from + window_s) - self.expected_arrivals(from);
        self.steps
            .iter()
            .flat_map(|s| {
                // A day later, so a start before a step stays at or after the first midnight.
                let at = s.start_s + DAY_S;
                [at, (at - window_s.rem_euclid(DAY_S)).max(0.0)]
            })
            .map(in_window)
            .fold(0.0, f64::max)
    }

    /// Expected arrivals in the first `until_s` seconds from midnight.
    pub fn expected_arrivals(&self, until_s: f64) -> f64 {
        let days = (until_s / DAY_S).floor();
        let rest = until_s - days * DAY_S;
        let partial: f64 = (0..self.steps.len())
            .map(|i| {
                let from = self.steps[i].start_s;
                let to = self.step_end_s(i).min(rest);
                self.steps[i].rate_per_s * (to - from).max(0.0)
            })
            .sum();
        days * self.arrivals_per_day() + partial
    }
}

/// When calls arrive: a Poisson process, at a constant rate or following a daily profile.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Arrivals {
    Constant { rate_per_s: f64 },
    Profile(LoadProfile),
}

/// A standard exponential: gaps are drawn as `Exp(1) / rate`, which is exactly `Exp(rate)` and
/// lets a piecewise rate consume one draw across steps.
fn unit_exp() -> Exp {
    Exp::new(1.0).expect("rate 1 is valid")
}

impl Arrivals {
    pub fn constant(rate_per_s: f64) -> Result<Self, ArrivalsError> {
        if !(rate_per_s > 0.0 && rate_per_s.is_finite()) {
            return Err(ArrivalsError::RateNotPositive { rate_per_s });
        }
        Ok(Arrivals::Constant { rate_per_s })
    }

    pub fn mean_rate_per_s(&self) -> f64 {
        match self {
            Arrivals::Constant { rate_per_s } => *rate_per_s,
            Arrivals::Profile(profile) => profile.mean_rate_per_s(),
        }
    }

    /// The most arrivals any window of `window_s` holds, expected: the records a store keeps
    /// for that long peaks at this many. A store budget is a peak, not a mean: under a daily
    /// rush the day's average store is far below what the store holds at the rush's end.
    pub fn max_arrivals_in(&self, window_s: f64) -> f64 {
        match self {
            Arrivals::Constant { rate_per_s } => rate_per_s * window_s,
            Arrivals::Profile(profile) => profile.max_arrivals_in(window_s),
        }
    }

    /// The mean rate over the first `until_s` seconds: what a run of that length replays, which
    /// for a short run inside a rush is the rush's rate, not the day's mean.
    pub fn window_mean_rate_per_s(&self, until_s: f64) -> f64 {
        match self {
            Arrivals::Constant { rate_per_s } => *rate_per_s,
            Arrivals::Profile(profile) if until_s > 0.0 => {
                profile.expected_arrivals(until_s) / until_s
            }
            Arrivals::Profile(profile) => profile.mean_rate_per_s(),
        }
    }

    /// The time of the next arrival after `now_s`.
    ///
    /// For a profile this integrates the rate exactly, step by step: one `Exp(1)` draw is the
    /// number of expected arrivals to wait for, spent at each step's rate. Unlike thinning it
    /// takes one random number per arrival, so changing a profile's shape does not reshuffle
    /// every later draw.
    pub fn next_arrival<R: rand::Rng + ?Sized>(&self, now_s: f64, rng: &mut R) -> f64 {
        let draw = unit_exp().sample(rng);
        match self {
            Arrivals::Constant { rate_per_s } => now_s + draw / rate_per_s,
            Arrivals::Profile(profile) => next_in_profile(profile, now_s, draw),
        }
    }
}

/// Walks the profile from `now_s` until `expected` arrivals' worth of rate has passed.
fn next_in_profile(profile: &LoadProfile, now_s: f64, mut expected: f64) -> f64 {
    let per_day = profile.arrivals_per_day();
    let mut t_s = now_s;
    // Whole days first, so a tiny rate does not walk the steps for thousands of days.
    if expected >= per_day {
        let days = (expected / per_day).floor();
        t_s += days * DAY_S;
        expected -= days * per_day;
    }
    // Within a day every step is visited at most once, plus one wrap past midnight and one for
    // rounding: a bound, not an expectation.
    for _ in 0..2 * profile.steps.len() + 2 {
        let time_of_day_s = t_s.rem_euclid(DAY_S);
        let day_start_s = t_s - time_of_day_s;
        let index = profile.step_index(time_of_day_s);
        let rate_per_s = profile.steps[index].rate_per_s;
        let step_end_s = day_start_s + profile.step_end_s(index);
        let capacity = rate_per_s * (step_end_s - t_s);
        if rate_per_s > 0.0 && expected < capacity {
            return t_s + expected / rate_per_s;
        }
        expected -= capacity;
        t_s = step_end_s.max(t_s);
    }
    t_s
}

/// A scenario's fitted late-retry distribution (`[traffic] retry_delay`), with the evidence
/// behind it so the decision can say how much data supports its horizon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RetrySpec {
    /// `[delay, cumulative fraction]` pairs, e.g. `["10s", 0.62]`.
    pub points: Vec<(String, f64)>,
    /// Earliest retry (the log-uniform head's start).
    #[serde(default = "default_min_delay")]
    pub min_delay: String,
    /// Latest retry assumed; the tail runs linear in log-time to it.
    #[serde(default = "default_horizon")]
    pub horizon: String,
    /// How many retries the points came from, if fitted.
    pub retries: Option<u64>,
    /// The latest retry seen, if fitted.
    pub latest_retry: Option<String>,
    /// How long the fitted log covered.
    pub log_span: Option<String>,
}

fn default_min_delay() -> String {
    crate::duration::format_secs(DEFAULT_MIN_DELAY_S)
}

fn default_horizon() -> String {
    crate::duration::format_secs(DEFAULT_MAX_HORIZON_S)
}

fn secs(text: &str) -> Result<f64, String> {
    crate::duration::parse(text)
        .map(|d| d.as_secs_f64())
        .map_err(|e| e.to_string())
}

impl RetrySpec {
    /// The distribution it describes; an error names the problem.
    pub fn to_retry_delay(&self) -> Result<RetryDelay, String> {
        let points = self
            .points
            .iter()
            .map(|(d, f)| secs(d).map(|s| (s, *f)))
            .collect::<Result<Vec<_>, _>>()?;
        RetryDelay::from_points(
            points,
            Head::LogUniform {
                min_delay_s: secs(&self.min_delay)?,
            },
            Tail::LogLinear {
                max_horizon_s: secs(&self.horizon)?,
            },
        )
        .map_err(|e| e.to_string())
    }

    /// The data behind it, when it was fitted.
    pub fn evidence(&self) -> Option<RetryEvidence> {
        Some(RetryEvidence {
            retries: self.retries?,
            latest_retry_s: secs(self.latest_retry.as_deref()?).ok()?,
            log_span_s: secs(self.log_span.as_deref()?).ok()?,
        })
    }
}

/// How much data stands behind a fitted retry distribution (from `idemcalc fit`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryEvidence {
    /// Later requests for an already-seen key: the retries the CDF was built from.
    pub retries: u64,
    /// The latest delay observed from a key's first request to a later one, seconds.
    pub latest_retry_s: f64,
    /// Time the log covers, seconds: no delay longer than this could have been seen.
    pub log_span_s: f64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    #[test]
    fn seed_points_are_exact() {
        let d = RetryDelay::seed();
        for &(t, f) in &SEED_POINTS {
            assert_eq!(d.cdf(t), f);
        }
        assert_eq!(d.cdf(0.1), 0.0);
        assert_eq!(d.cdf(DEFAULT_MAX_HORIZON_S), 1.0);
        assert!((d.quantile(0.62) - 10.0).abs() < 1e-9);
    }

    #[test]
    fn quantile_inverts_cdf() {
        let d = RetryDelay::seed();
        for i in 1..1000 {
            let p = i as f64 / 1000.0;
            let t = d.quantile(p);
            assert!((d.cdf(t) - p).abs() < 1e-9, "p={p} t={t}");
        }
    }

    #[test]
    fn profile_next_arrival_is_within_the_rush_rate() {
        let profile = LoadProfile::rush(400.0, 2000.0, 3600.0, 60.0).unwrap();
        let arrivals = Arrivals::Profile(profile);
        let mut rng = StdRng::seed_from_u64(7);
        let (mut t, mut in_rush, mut before) = (3000.0, 0u32, 0u32);
        while t < 3660.0 {
            t = arrivals.next_arrival(t, &mut rng);
            if (3600.0..3660.0).contains(&t) {
                in_rush += 1;
            } else if t < 3600.0 {
                before += 1;
            }
        }
        // 120,000 expected in the rush (sd ≈ 350) and 240,000 in the 600 s before (sd ≈ 490).
        assert!((in_rush as f64 - 120_000.0).abs() < 2_000.0, "{in_rush}");
        assert!((before as f64 - 240_000.0).abs() < 3_000.0, "{before}");
    }
}
