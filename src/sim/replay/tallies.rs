//! What one replicate counts, and how a count becomes a figure: weighted event tallies
//! ([`Tally`]: Σw, Σw² and the raw count) turned into a rate per day with its 95 % interval,
//! and [`Tallies`], everything one replicate measured, which replicates pool by adding.

use crate::engine::Outcome;
use serde::Serialize;
use statrs::distribution::{ChiSquared, ContinuousCDF};
use std::collections::BTreeMap;

/// A figure measured by the simulation, with its 95 % interval and what the model predicts.
#[derive(Debug, Clone, Copy, Serialize)]
pub struct Figure {
    pub estimate: f64,
    pub ci95_low: f64,
    pub ci95_high: f64,
    /// The model's value of the same figure. The simulator measures only and leaves it NaN;
    /// `run` fills it from the run's plan (`run::with_model`, the plan's one
    /// `model::estimate` per job), so a figure read straight from [`super::simulate`] or
    /// [`super::pool`] has no model value.
    pub analytic: f64,
}

impl Figure {
    /// The measured value and its interval, without the model's.
    pub fn interval(&self) -> crate::stats::Interval {
        crate::stats::Interval {
            estimate: self.estimate,
            ci95_low: self.ci95_low,
            ci95_high: self.ci95_high,
        }
    }
}

/// Weighted event counts: Σw and Σw², and the raw count, per quantity.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Tally {
    pub n: u64,
    pub w: f64,
    pub w2: f64,
}

/// The one-sided 95 % upper bound on a Poisson mean when no event was seen: −ln 0.05.
const ZERO_EVENTS_BOUND: f64 = 2.995_732_274;

impl Tally {
    pub(super) fn add(&mut self, w: f64) {
        self.n += 1;
        self.w += w;
        self.w2 += w * w;
    }

    pub(super) fn merge(&mut self, o: &Tally) {
        self.n += o.n;
        self.w += o.w;
        self.w2 += o.w2;
    }

    /// Rate per day over `days`, with a 95 % interval. `unit_w` is the largest weight one
    /// replayed event of this kind can carry: with no event seen, the interval is the one-sided
    /// bound of about 3 such events, never a certain [0, 0]. The model's value is left NaN.
    pub fn per_day(&self, days: f64, unit_w: f64) -> Figure {
        let est = self.w / days;
        let (lo, hi) = if self.n == 0 {
            (0.0, ZERO_EVENTS_BOUND * unit_w / days)
        } else if self.n < 30
            && (self.w2 * self.n as f64 - self.w * self.w).abs() < 1e-6 * self.w * self.w
        {
            let (l, h) = garwood(self.n);
            let unit = self.w / self.n as f64 / days;
            (l * unit, h * unit)
        } else {
            let half = crate::stats::Z95 * self.w2.sqrt() / days;
            ((est - half).max(0.0), est + half)
        };
        Figure {
            estimate: est,
            ci95_low: lo,
            ci95_high: hi,
            analytic: f64::NAN,
        }
    }
}

/// Garwood's exact 95 % interval for a Poisson count.
fn garwood(n: u64) -> (f64, f64) {
    let n = n as f64;
    let lo = if n == 0.0 {
        0.0
    } else {
        ChiSquared::new(2.0 * n)
            .map(|c| c.inverse_cdf(0.025) / 2.0)
            .unwrap_or(0.0)
    };
    let hi = ChiSquared::new(2.0 * n + 2.0)
        .map(|c| c.inverse_cdf(0.975) / 2.0)
        .unwrap_or(n);
    (lo, hi)
}

/// What one replicate counted at one candidate retention.
#[derive(Debug, Clone, Copy, Default)]
pub struct CandidateTally {
    pub retention_s: f64,
    pub duplicates: Tally,
    pub late: Tally,
    /// Σ w·life over the records created, in record-seconds: by Little's law, divided by the
    /// arrivals' span, the mean number of records in the store.
    pub record_seconds: f64,
    /// Σ (w·life)²: the variance of that sum, each record a Poisson draw.
    pub record_seconds_sq: f64,
}

/// One time-series point.
#[derive(Debug, Clone, Serialize)]
pub struct SeriesPoint {
    pub t_s: f64,
    /// Records in the store, scaled to full traffic.
    pub keys_estimated: f64,
    /// Records actually in the simulated store.
    pub keys_replayed: u64,
}

/// One replicate's raw tallies; replicates pool by adding them.
#[derive(Debug, Clone, Default)]
pub struct Tallies {
    pub days: f64,
    pub late: Tally,
    pub duplicates: Tally,
    pub unlabelled: Tally,
    pub purged_key_requests: Tally,
    /// Claims the engine's Bloom filter flagged as purged (false positives included).
    pub purged_key_flags: Tally,
    pub cross_caller: Tally,
    pub takeovers_running: Tally,
    pub takeovers: Tally,
    pub parcels_two_labels: Tally,
    pub invoice_without_label: Tally,
    pub labels_without_completed_key: Tally,
    /// Records a crash inside txn 2 left completed with a 201 whose label row never committed.
    pub completed_without_label: Tally,
    /// Every attempt whose deadline passed without a reply, retries included.
    pub timed_out: Tally,
    /// First attempts only: the model's "timed-out calls", one per intent at most.
    pub timed_out_first: Tally,
    pub retries: Tally,
    pub outcomes: BTreeMap<(u16, Outcome, Option<String>), Tally>,
    /// Steady-state weighted store size: sum and count of the sampled points, and the mean raw
    /// count for the interval.
    pub steady_keys_sum: f64,
    pub steady_points: u64,
    /// Sum over the steady points of Σw² over the live records: each record's presence is a
    /// Poisson count scaled by its weight, so Σw² is the weighted count's variance at a point.
    pub steady_weight_sq_sum: f64,
    /// Spacing of the series points, for the variance of their average.
    pub series_every_s: f64,
    /// The store at the end of the arrivals, when there is no steady window to average.
    pub end_keys: f64,
    pub end_weight_sq: f64,
    /// Bytes per record measured at points of the steady window (or, failing one, of the
    /// second half of the arrivals).
    pub bytes_per_record_samples: Vec<f64>,
    pub bytes_per_record: f64,
    /// Records in the store at each measurement of bytes per record: a store is measured in
    /// whole pages, which sets the smallest honest interval (see `bytes_per_record_figure`).
    pub bytes_per_record_records: Vec<u64>,
    pub series: Vec<SeriesPoint>,
    /// Each candidate retention counted from the replay's log of requests.
    pub candidates: Vec<CandidateTally>,
    pub simulated_s: f64,
    pub replayed_requests: u64,
    pub replayed_intents: u64,
    pub invariant_max_labels_per_parcel: u64,
    pub invariant_replays_identical: bool,
    pub invariant_completed_without_label: u64,
    pub invariant_integrity_ok: bool,
    pub interrupted: bool,
    pub request_log: crate::sim::request_log::RequestLog,
}
