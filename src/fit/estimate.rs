//! What the requests say, apart from the late retries (`super::retries`): the arrival rate and
//! its daily profile, the timeout and done fractions, the key and response sizes, the callers;
//! with 95 % intervals where they mean something.

use serde::Serialize;

use super::FitError;
use super::aggregates::{Aggregates, SizeCount, Spans};
use crate::duration::DAY_S;
use crate::payload::SizeDist;
use crate::stats::{Interval, Z95, none_seen_share_bound};

/// At most this many points in a fitted size histogram: enough for a long tail, small enough
/// for a scenario file a person reads.
const MAX_HISTOGRAM_POINTS: usize = 40;

/// A weighted share `Σ w·x / Σ w`, with a delta-method interval that treats each row's weight
/// as a Poisson count: exact for unweighted rows (it is then the binomial normal interval) and
/// right for the simulator's stratified samples, whose strata carry different weights.
///
/// A share of none (or of all) has no spread to take a normal interval from, and used to read
/// `0% (95% 0% – 0%)`: as if a few hundred calls proved that no retry ever comes later. Its
/// open end is then the exact one-sided bound ([`none_seen_share_bound`]) at the effective
/// count of rows, `(Σw)² / Σw²`.
pub(super) fn share(yes: (f64, f64), no: (f64, f64)) -> Option<Interval> {
    let (a, var_a) = yes;
    let (b, var_b) = no;
    let n = a + b;
    if n <= 0.0 {
        return None;
    }
    let p = a / n;
    let var = (b * b * var_a + a * a * var_b) / n.powi(4);
    let half = Z95 * var.sqrt();
    let (mut low, mut high) = ((p - half).max(0.0), (p + half).min(1.0));
    let rows = n * n / (var_a + var_b);
    if a == 0.0 {
        high = none_seen_share_bound(rows);
    }
    if b == 0.0 {
        low = 1.0 - none_seen_share_bound(rows);
    }
    Some(Interval {
        estimate: p,
        ci95_low: low,
        ci95_high: high,
    })
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

/// The arrival rate, its daily profile and the timeout fraction, from the first requests.
pub(super) struct Arrivals {
    pub(super) rate_per_s: Interval,
    pub(super) hourly_rate_per_s: Vec<Option<f64>>,
    pub(super) peak_hour_rate_per_s: Option<f64>,
    pub(super) timeout_fraction: Option<Interval>,
}

/// Refuses a log whose first requests all share one time: it has no window to count arrivals
/// in.
pub(super) fn arrivals(a: &Aggregates) -> Result<Arrivals, FitError> {
    let arrival_span_s = a.spans.arrival_s();
    if arrival_span_s.is_nan() || arrival_span_s <= 0.0 {
        return Err(FitError::Data(
            "every key's first request has the same time: the log covers no time to count arrivals in".into(),
        ));
    }
    let rate = a.intents.0 / arrival_span_s;
    let rate_half = Z95 * a.intents.1.sqrt() / arrival_span_s;
    let rate_per_s = Interval {
        estimate: rate,
        ci95_low: (rate - rate_half).max(0.0),
        ci95_high: rate + rate_half,
    };
    let hourly_rate_per_s = hourly_rates(&a.hourly, &a.spans);
    let peak_hour_rate_per_s = (arrival_span_s >= DAY_S)
        .then(|| {
            hourly_rate_per_s
                .iter()
                .flatten()
                .copied()
                .fold(f64::NEG_INFINITY, f64::max)
        })
        .filter(|v| v.is_finite());
    Ok(Arrivals {
        rate_per_s,
        hourly_rate_per_s,
        peak_hour_rate_per_s,
        timeout_fraction: share(a.timed_out.pair(), a.intents.minus(a.timed_out).pair()),
    })
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

/// A fitted size distribution from the sizes' counts.
pub(super) fn sizes(counts: &[SizeCount]) -> Option<SizeFit> {
    size_fit(counts.iter().map(|c| (c.bytes, c.weight)).collect()).map(|mut f| {
        f.samples = counts.iter().map(|c| c.keys).sum();
        f
    })
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

/// The largest callers' shares of the weight of first requests.
pub(super) fn callers(a: &Aggregates) -> Vec<CallerShare> {
    a.top_callers
        .iter()
        .map(|(c, w)| CallerShare {
            caller: c.clone(),
            share: w / a.intents.0,
        })
        .collect()
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

    /// Issue 51, item 6: "later than 1.634d 0% (95% 0% – 0%)".
    #[test]
    fn a_share_of_none_keeps_a_one_sided_bound() {
        let none = share((0.0, 0.0), (300.0, 300.0)).unwrap();
        assert_eq!((none.estimate, none.ci95_low), (0.0, 0.0));
        // Clopper–Pearson's one-sided 95 %: 1 − 0.05^(1/300), about 3/300.
        assert!((none.ci95_high - 0.009_936).abs() < 1e-5, "{none:?}");
        let all = share((300.0, 300.0), (0.0, 0.0)).unwrap();
        assert_eq!((all.estimate, all.ci95_high), (1.0, 1.0));
        assert!((all.ci95_low - (1.0 - none.ci95_high)).abs() < 1e-12);
        // Weighted rows count as their effective number: 100 rows of weight 3 are 100, not 300.
        let weighted = share((0.0, 0.0), (300.0, 900.0)).unwrap();
        assert!((weighted.ci95_high - (1.0 - 0.05f64.powf(0.01))).abs() < 1e-12);
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
