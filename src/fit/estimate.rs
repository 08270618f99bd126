//! What the requests say, apart from the late retries (`super::retries`): the arrival rate and
//! its daily profile, the timeout and done fractions, the key and response sizes, the callers;
//! with 95 % intervals where they mean something.

use std::collections::HashMap;

use serde::Serialize;

use super::FitError;
use super::read::Req;
use crate::duration::DAY_S;
use crate::payload::SizeDist;
use crate::stats::Z95;

/// Retries answered within this long of the first request tell whether it had run: the
/// record is surely still there, so a replay means done and a fresh 201 means not.
const DONE_WITHIN_S: f64 = 3_600.0;

/// At most this many points in a fitted size histogram: enough for a long tail, small enough
/// for a scenario file a person reads.
const MAX_HISTOGRAM_POINTS: usize = 40;

/// A value with its 95 % interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    pub estimate: f64,
    pub ci95_low: f64,
    pub ci95_high: f64,
}

impl Estimate {
    pub fn contains(&self, v: f64) -> bool {
        self.ci95_low <= v && v <= self.ci95_high
    }
}

/// A weighted share `Σ w·x / Σ w`, with a delta-method interval that treats each row's weight
/// as a Poisson count: exact for unweighted rows (it is then the binomial normal interval) and
/// right for the simulator's stratified samples, whose strata carry different weights.
pub(super) fn share(yes: (f64, f64), no: (f64, f64)) -> Option<Estimate> {
    let (a, var_a) = yes;
    let (b, var_b) = no;
    let n = a + b;
    if n <= 0.0 {
        return None;
    }
    let p = a / n;
    let var = (b * b * var_a + a * a * var_b) / n.powi(4);
    let half = Z95 * var.sqrt();
    Some(Estimate {
        estimate: p,
        ci95_low: (p - half).max(0.0),
        ci95_high: (p + half).min(1.0),
    })
}

/// Weighted sum and the sum of squared weights: a count and its Poisson variance.
#[derive(Debug, Clone, Copy, Default)]
pub(super) struct Sum(pub(super) f64, pub(super) f64);

impl Sum {
    pub(super) fn add(&mut self, w: f64) {
        self.0 += w;
        self.1 += w * w;
    }
    pub(super) fn pair(self) -> (f64, f64) {
        (self.0, self.1)
    }
}

/// A fitted size distribution with its summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeFit {
    pub samples: u64,
    pub mean_bytes: f64,
    pub median_bytes: f64,
    pub p99_bytes: f64,
    pub max_bytes: f64,
    pub dist: SizeDist,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallerShare {
    pub caller: String,
    pub share: f64,
}

/// One group per (caller, key) of requests sorted by key, then time: an intent and its
/// retries, the first request first.
pub(super) fn groups(reqs: &[Req]) -> Vec<&[Req]> {
    let mut starts: Vec<usize> = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        if i == 0 || reqs[i - 1].key != r.key {
            starts.push(i);
        }
    }
    starts
        .iter()
        .enumerate()
        .map(|(g, &s)| {
            let e = starts.get(g + 1).copied().unwrap_or(reqs.len());
            &reqs[s..e]
        })
        .collect()
}

/// When the log's first requests and all its rows begin and end, seconds.
pub(super) struct Spans {
    pub(super) first_min: f64,
    pub(super) first_max: f64,
    pub(super) log_min: f64,
    pub(super) log_max: f64,
}

impl Spans {
    /// Refuses a log whose first requests all share one time: it has no window to count
    /// arrivals in.
    pub(super) fn of(reqs: &[Req], groups: &[&[Req]]) -> Result<Spans, FitError> {
        let first_min = groups
            .iter()
            .map(|g| g[0].time_s)
            .fold(f64::INFINITY, f64::min);
        let first_max = groups
            .iter()
            .map(|g| g[0].time_s)
            .fold(f64::NEG_INFINITY, f64::max);
        let log_min = reqs.iter().map(|r| r.time_s).fold(f64::INFINITY, f64::min);
        let log_max = reqs
            .iter()
            .map(|r| r.time_s)
            .fold(f64::NEG_INFINITY, f64::max);
        let spans = Spans {
            first_min,
            first_max,
            log_min,
            log_max,
        };
        if spans.arrival_s() <= 0.0 {
            return Err(FitError::Data(
                "every key's first request has the same time: the log covers no time to count arrivals in".into(),
            ));
        }
        Ok(spans)
    }

    /// From the first to the last first request: the window arrivals are counted in.
    pub(super) fn arrival_s(&self) -> f64 {
        self.first_max - self.first_min
    }

    /// From the first to the last row.
    pub(super) fn log_s(&self) -> f64 {
        self.log_max - self.log_min
    }
}

/// Every key's first request, by weight: the rate, its daily profile, the timeout fraction
/// and each caller's weight.
pub(super) struct Arrivals {
    pub(super) intents: Sum,
    pub(super) rate_per_s: Estimate,
    pub(super) hourly_rate_per_s: Vec<Option<f64>>,
    pub(super) peak_hour_rate_per_s: Option<f64>,
    pub(super) timeout_fraction: Option<Estimate>,
    /// Caller id → weight of its first requests.
    pub(super) caller_weights: HashMap<u32, f64>,
}

pub(super) fn arrivals(groups: &[&[Req]], spans: &Spans) -> Arrivals {
    let arrival_span_s = spans.arrival_s();
    let mut intents = Sum::default();
    let mut timed_out = Sum::default();
    let mut answered = Sum::default();
    let mut hourly = [0.0f64; 24];
    let mut caller_weights: HashMap<u32, f64> = HashMap::new();
    for g in groups {
        let r = g[0];
        let w = f64::from(r.weight);
        intents.add(w);
        if r.status == 0 {
            timed_out.add(w);
        } else {
            answered.add(w);
        }
        let hour = ((r.time_s.rem_euclid(DAY_S)) / 3_600.0) as usize;
        hourly[hour.min(23)] += w;
        *caller_weights.entry(r.caller).or_insert(0.0) += w;
    }
    let rate = intents.0 / arrival_span_s;
    let rate_half = Z95 * intents.1.sqrt() / arrival_span_s;
    let rate_per_s = Estimate {
        estimate: rate,
        ci95_low: (rate - rate_half).max(0.0),
        ci95_high: rate + rate_half,
    };
    let hourly_rate_per_s = hourly_rates(&hourly, spans);
    let peak_hour_rate_per_s = (arrival_span_s >= DAY_S)
        .then(|| {
            hourly_rate_per_s
                .iter()
                .flatten()
                .copied()
                .fold(f64::NEG_INFINITY, f64::max)
        })
        .filter(|v| v.is_finite());
    Arrivals {
        intents,
        rate_per_s,
        hourly_rate_per_s,
        peak_hour_rate_per_s,
        timeout_fraction: share(timed_out.pair(), answered.pair()),
        caller_weights,
    }
}

/// Arrivals per hour of the day turned into rates: `None` for an hour the arrival window
/// covers less than a minute of.
fn hourly_rates(hourly: &[f64; 24], spans: &Spans) -> Vec<Option<f64>> {
    let (first_min, first_max) = (spans.first_min, spans.first_max);
    // Seconds of the arrival window falling in each hour of the day, to turn counts into rates.
    let mut covered = [0.0f64; 24];
    let mut t = first_min;
    // Bounded: one step per hour boundary, at most ten years of log.
    let mut steps = 0;
    while t < first_max && steps < 24 * 3_660 {
        let next = ((t / 3_600.0).floor() + 1.0) * 3_600.0;
        let end = next.min(first_max);
        let hour = ((t.rem_euclid(DAY_S)) / 3_600.0) as usize;
        covered[hour.min(23)] += end - t;
        t = end;
        steps += 1;
    }
    (0..24)
        .map(|h| (covered[h] >= 60.0).then(|| hourly[h] / covered[h]))
        .collect()
}

/// Done fraction: of timed-out first requests answered within an hour, those answered by a
/// replay. A later retry may find the record purged and run as new, so it says nothing about
/// the first attempt; an hour is shorter than any retention worth running.
pub(super) fn done_fraction(groups: &[&[Req]], has_replayed: bool) -> Option<Estimate> {
    let mut done = Sum::default();
    let mut not_done = Sum::default();
    if has_replayed {
        for g in groups {
            if g[0].status != 0 {
                continue;
            }
            if let Some(next) = g[1..].iter().find(|r| r.status != 0 && r.replayed != 2)
                && next.time_s - g[0].time_s <= DONE_WITHIN_S
            {
                let w = f64::from(g[0].weight);
                if next.replayed == 1 && (200..300).contains(&next.status) {
                    done.add(w);
                } else {
                    not_done.add(w);
                }
            }
        }
    }
    share(done.pair(), not_done.pair())
}

/// Each key's length, once per key.
pub(super) fn key_bytes(groups: &[&[Req]]) -> Option<SizeFit> {
    size_fit(
        groups
            .iter()
            .map(|g| (f64::from(g[0].key_bytes), f64::from(g[0].weight)))
            .collect(),
    )
}

/// Each key's first 2xx response, once per key.
pub(super) fn response_bytes(groups: &[&[Req]]) -> Option<SizeFit> {
    size_fit(
        groups
            .iter()
            .filter_map(|g| {
                g.iter()
                    .find(|r| (200..300).contains(&r.status) && r.response_bytes != u32::MAX)
                    .map(|r| (f64::from(r.response_bytes), f64::from(g[0].weight)))
            })
            .collect(),
    )
}

/// Weighted quantile of sorted `(value, weight)` pairs.
fn weighted_quantile(sorted: &[(f64, f64)], total: f64, p: f64) -> f64 {
    let mut acc = 0.0;
    for (v, w) in sorted {
        acc += w;
        if acc >= p * total {
            return *v;
        }
    }
    sorted.last().map_or(f64::NAN, |x| x.0)
}

/// A size distribution from `(bytes, weight)` samples: fixed when every sample has one size,
/// otherwise a histogram of at most [`MAX_HISTOGRAM_POINTS`] points, each the weighted mean of
/// an equal-weight slice of the sorted samples (so the histogram keeps the mean exactly).
fn size_fit(mut samples: Vec<(f64, f64)>) -> Option<SizeFit> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = samples.iter().map(|s| s.1).sum();
    let mean = samples.iter().map(|(v, w)| v * w).sum::<f64>() / total;
    let min = samples[0].0;
    let max = samples[samples.len() - 1].0;
    let dist = if min == max {
        SizeDist::Fixed {
            bytes: min.max(1.0),
        }
    } else {
        let mut points: Vec<(f64, f64)> = Vec::new();
        let slice = total / MAX_HISTOGRAM_POINTS as f64;
        let (mut sum_vw, mut sum_w) = (0.0, 0.0);
        for (v, w) in &samples {
            sum_vw += v * w;
            sum_w += w;
            if sum_w >= slice {
                points.push(((sum_vw / sum_w).max(1.0), sum_w));
                (sum_vw, sum_w) = (0.0, 0.0);
            }
        }
        if sum_w > 0.0 {
            points.push(((sum_vw / sum_w).max(1.0), sum_w));
        }
        // Rounded for a readable file: a byte and four significant weights are plenty.
        let points = points
            .into_iter()
            .map(|(v, w)| ((v * 10.0).round() / 10.0, round_sig(w, 6)))
            .collect();
        SizeDist::Histogram { points }
    };
    Some(SizeFit {
        samples: samples.len() as u64,
        mean_bytes: mean,
        median_bytes: weighted_quantile(&samples, total, 0.5),
        p99_bytes: weighted_quantile(&samples, total, 0.99),
        max_bytes: max,
        dist,
    })
}

pub(super) fn round_sig(v: f64, digits: i32) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(digits - 1 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// How many callers there are, and the ten largest by their share of the `total` weight of
/// first requests (ties by name).
pub(super) fn callers(
    caller_weights: HashMap<u32, f64>,
    caller_names: &[String],
    total: f64,
) -> (u64, Vec<CallerShare>) {
    let mut by_caller: Vec<(String, f64)> = caller_weights
        .into_iter()
        .map(|(id, w)| (caller_names[id as usize].clone(), w))
        .collect();
    by_caller.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let top = by_caller
        .iter()
        .take(10)
        .map(|(c, w)| CallerShare {
            caller: c.clone(),
            share: w / total,
        })
        .collect();
    (by_caller.len() as u64, top)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unweighted_share_has_the_binomial_interval() {
        let e = share((100.0, 100.0), (900.0, 900.0)).unwrap();
        assert!((e.estimate - 0.1).abs() < 1e-12);
        let half = Z95 * (0.1f64 * 0.9 / 1000.0).sqrt();
        assert!((e.ci95_high - 0.1 - half).abs() < 1e-12);
    }

    #[test]
    fn a_histogram_keeps_the_mean() {
        let samples: Vec<(f64, f64)> = (1..=1000).map(|i| (f64::from(i), 1.0)).collect();
        let f = size_fit(samples).unwrap();
        assert!((f.mean_bytes - 500.5).abs() < 1e-9);
        assert!((f.dist.mean_bytes() - 500.5).abs() < 0.1);
        assert_eq!(f.median_bytes, 500.0);
        let fixed = size_fit(vec![(36.0, 1.0), (36.0, 2.0)]).unwrap();
        assert_eq!(fixed.dist, SizeDist::Fixed { bytes: 36.0 });
    }
}
