//! The late-retry distribution: how long after a key's first request its later requests came,
//! counted only over keys the log watched long enough (the horizon rule), as a CDF with
//! intervals, the retries later than each retention, and the points the model and the
//! simulator take.

use serde::Serialize;

use super::estimate::{Estimate, Spans, Sum, share};
use super::read::Req;
use crate::duration::DAY_S;
use crate::format::human_duration;
use crate::model::SWEEP_RETENTIONS_S;
use crate::traffic::{DEFAULT_MAX_HORIZON_S, DEFAULT_MIN_DELAY_S};

/// The delays the seed's table gives, where a fitted CDF is reported, plus a week, two and a
/// month for logs that are long enough.
pub const CDF_POINTS_S: [f64; 10] = [
    10.0,
    60.0,
    600.0,
    3_600.0,
    21_600.0,
    86_400.0,
    259_200.0,
    604_800.0,
    1_209_600.0,
    2_592_000.0,
];

/// One point of the fitted late-retry CDF.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CdfPoint {
    pub delay_s: f64,
    pub delay: String,
    pub arrived: Estimate,
}

/// Retries later than a retention, in the log and per day.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Beyond {
    pub retention_s: f64,
    pub retention: String,
    pub retries: f64,
    pub per_day: f64,
}

/// Everything the log says about late retries, as [`super::Fit`] holds it.
pub(super) struct Retries {
    pub(super) retries: u64,
    pub(super) retried_keys: u64,
    pub(super) supported_horizon_s: f64,
    pub(super) latest_retry_s: Option<f64>,
    pub(super) cdf: Vec<CdfPoint>,
    pub(super) beyond_horizon: Option<Estimate>,
    pub(super) beyond: Vec<Beyond>,
    pub(super) points: Option<Vec<(f64, f64)>>,
    pub(super) min_delay_s: f64,
    pub(super) max_horizon_s: f64,
}

pub(super) fn retries(groups: &[&[Req]], spans: &Spans) -> Retries {
    let seen = Delays::of(groups, spans);
    let supported_horizon_s = seen.supported_horizon_s;
    let cdf = seen.cdf();
    let beyond_horizon = {
        let (yes, no) = seen.split_at(supported_horizon_s);
        share(no.pair(), yes.pair())
    };
    let beyond = seen.beyond(spans.arrival_s() / DAY_S);
    let min_delay_s = seen.min_delay_s();
    let (points, max_horizon_s) = seen.distribution(&cdf, beyond_horizon, min_delay_s);
    Retries {
        retries: seen.retries,
        retried_keys: seen.retried_keys,
        supported_horizon_s,
        latest_retry_s: seen.latest_retry_s,
        cdf,
        beyond_horizon,
        beyond,
        points,
        min_delay_s,
        max_horizon_s,
    }
}

/// The delays of later requests after their key's first, over the keys watched long enough.
struct Delays {
    /// The delay up to which every key counted was watched for retries, seconds.
    supported_horizon_s: f64,
    /// `(delay, weight of the key's first request)`, sorted by delay.
    counted: Vec<(f64, f64)>,
    /// Every later request and every key with one, counted or not.
    retries: u64,
    retried_keys: u64,
    latest_retry_s: Option<f64>,
}

impl Delays {
    /// A key is watched for retries from its first request to the end of the log; counting
    /// only keys watched for at least `supported` seconds keeps the CDF free of the bias toward
    /// short delays that a log ending mid-retry would give.
    fn of(groups: &[&[Req]], spans: &Spans) -> Delays {
        let (first_min, first_max, log_max) = (spans.first_min, spans.first_max, spans.log_max);
        let supported_horizon_s = (log_max - first_max).max((log_max - first_min) / 2.0);
        let cutoff = log_max - supported_horizon_s;
        let mut counted: Vec<(f64, f64)> = Vec::new();
        let mut retries = 0u64;
        let mut retried_keys = 0u64;
        let mut latest_retry_s: Option<f64> = None;
        for g in groups {
            if g.len() > 1 {
                retried_keys += 1;
            }
            let first = g[0].time_s;
            for r in &g[1..] {
                retries += 1;
                let d = r.time_s - first;
                latest_retry_s = Some(latest_retry_s.map_or(d, |l: f64| l.max(d)));
                if first <= cutoff {
                    counted.push((d, f64::from(g[0].weight)));
                }
            }
        }
        counted.sort_by(|a, b| a.0.total_cmp(&b.0));
        Delays {
            supported_horizon_s,
            counted,
            retries,
            retried_keys,
            latest_retry_s,
        }
    }

    /// The counted weight arrived by `t` and the weight arrived later.
    fn split_at(&self, t: f64) -> (Sum, Sum) {
        let (mut yes, mut no) = (Sum::default(), Sum::default());
        for &(d, w) in &self.counted {
            if d <= t {
                yes.add(w);
            } else {
                no.add(w);
            }
        }
        (yes, no)
    }

    /// The CDF at [`CDF_POINTS_S`] up to the supported horizon.
    fn cdf(&self) -> Vec<CdfPoint> {
        CDF_POINTS_S
            .iter()
            .filter(|&&t| t <= self.supported_horizon_s)
            .filter_map(|&t| {
                let (yes, no) = self.split_at(t);
                share(yes.pair(), no.pair()).map(|arrived| CdfPoint {
                    delay_s: t,
                    delay: human_duration(t),
                    arrived,
                })
            })
            .collect()
    }

    /// Retries later than each swept retention up to the supported horizon, over `days` of
    /// arrivals.
    fn beyond(&self, days: f64) -> Vec<Beyond> {
        SWEEP_RETENTIONS_S
            .iter()
            .filter(|&&t| t <= self.supported_horizon_s)
            .map(|&t| {
                let n: f64 = self.counted.iter().filter(|d| d.0 > t).map(|d| d.1).sum();
                Beyond {
                    retention_s: t,
                    retention: human_duration(t),
                    retries: n,
                    per_day: n / days,
                }
            })
            .collect()
    }

    /// The earliest counted retry after 0 s, or the default.
    fn min_delay_s(&self) -> f64 {
        self.counted
            .iter()
            .map(|d| d.0)
            .find(|d| *d > 0.0)
            .unwrap_or(DEFAULT_MIN_DELAY_S)
    }

    /// The distribution for the model and the simulator, and its horizon: the CDF at the
    /// points below the latest counted retry, then that retry at 100 % if nothing lay beyond
    /// the supported horizon, or the supported horizon's value and the default tail after it.
    fn distribution(
        &self,
        cdf: &[CdfPoint],
        beyond_horizon: Option<Estimate>,
        min_delay_s: f64,
    ) -> (Option<Vec<(f64, f64)>>, f64) {
        let supported_horizon_s = self.supported_horizon_s;
        let latest_counted = self.counted.last().map(|d| d.0);
        let mut retry_max_horizon_s = DEFAULT_MAX_HORIZON_S;
        let retry_points = latest_counted.filter(|l| *l > 0.0).map(|latest| {
            let mut pts: Vec<(f64, f64)> = cdf
                .iter()
                .filter(|p| p.delay_s < latest && p.delay_s > min_delay_s)
                .map(|p| (p.delay_s, p.arrived.estimate))
                .collect();
            let beyond = beyond_horizon.map_or(0.0, |b| b.estimate);
            if beyond == 0.0 {
                pts.push((latest, 1.0));
                retry_max_horizon_s = latest;
            } else {
                let (yes, no) = self.split_at(supported_horizon_s);
                let f = share(yes.pair(), no.pair()).map_or(0.0, |e| e.estimate);
                if pts.last().is_none_or(|p| p.0 < supported_horizon_s) {
                    pts.push((supported_horizon_s, f));
                }
                retry_max_horizon_s = DEFAULT_MAX_HORIZON_S.max(2.0 * supported_horizon_s);
            }
            // A CDF needs two points; a single one gets the earliest retry in front of it.
            if pts.len() < 2 {
                pts.insert(0, (min_delay_s.min(pts[0].0 / 2.0), 0.0));
            }
            pts
        });
        (retry_points, retry_max_horizon_s)
    }
}
