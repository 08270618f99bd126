//! The late-retry distribution: per timed-out call (a key whose first request heard nothing in
//! time), how long after that first request its first retry came, counted only over calls the
//! log watched long enough (the horizon rule, [`super::aggregates::Spans`]); as a CDF with
//! intervals, the calls retried later than each retention, and the points the model and the
//! simulator take. It is the seed's "of 34,560 retried calls a day, 0.8 % arrive after a 24 h
//! purge", and what the simulator draws for a timed-out call's first retry; re-sends on a 409
//! while the first attempt holds its lease follow from that retry's answer, and counting them
//! would pile the head up and thin the tail that decides the retention.

use serde::Serialize;

use super::aggregates::Aggregates;
pub use super::aggregates::CDF_POINTS_S;
use super::estimate::share;
use crate::duration::DAY_S;
use crate::format::human_duration;
use crate::model::SWEEP_RETENTIONS_S;
use crate::stats::Interval;
use crate::traffic::{DEFAULT_MAX_HORIZON_S, DEFAULT_MIN_DELAY_S};

/// One point of the fitted late-retry CDF.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CdfPoint {
    pub delay_s: f64,
    pub delay: String,
    pub arrived: Interval,
}

/// Timed-out calls whose first retry came later than a retention, in the log and per day: the
/// late arrivals a store keeping keys that long would see.
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
    pub(super) beyond_horizon: Option<Interval>,
    pub(super) beyond: Vec<Beyond>,
    pub(super) points: Option<Vec<(f64, f64)>>,
    pub(super) min_delay_s: f64,
    pub(super) max_horizon_s: f64,
}

pub(super) fn retries(a: &Aggregates) -> Retries {
    let supported_horizon_s = a.supported_horizon_s();
    let cdf = cdf(a);
    let beyond_horizon = share(
        a.after(supported_horizon_s).pair(),
        a.within(supported_horizon_s).pair(),
    );
    let days = a.spans.arrival_s() / DAY_S;
    let beyond = SWEEP_RETENTIONS_S
        .iter()
        .filter(|&&t| t <= supported_horizon_s)
        .map(|&t| {
            let n = a.after(t).0;
            Beyond {
                retention_s: t,
                retention: human_duration(t),
                retries: n,
                per_day: n / days,
            }
        })
        .collect();
    let min_delay_s = a.counted_min_positive_s.unwrap_or(DEFAULT_MIN_DELAY_S);
    let (points, max_horizon_s) = distribution(a, &cdf, beyond_horizon, min_delay_s);
    Retries {
        retries: a.retries,
        retried_keys: a.retried_keys,
        supported_horizon_s,
        latest_retry_s: a.latest_retry_s,
        cdf,
        beyond_horizon,
        beyond,
        points,
        min_delay_s,
        max_horizon_s,
    }
}

/// The CDF at [`CDF_POINTS_S`] up to the supported horizon.
fn cdf(a: &Aggregates) -> Vec<CdfPoint> {
    CDF_POINTS_S
        .iter()
        .filter(|&&t| t <= a.supported_horizon_s())
        .filter_map(|&t| {
            share(a.within(t).pair(), a.after(t).pair()).map(|arrived| CdfPoint {
                delay_s: t,
                delay: human_duration(t),
                arrived,
            })
        })
        .collect()
}

/// The distribution for the model and the simulator, and its horizon: the CDF at the points
/// below the latest counted retry, then that retry at 100 % if nothing lay beyond the
/// supported horizon, or the supported horizon's value and the default tail after it.
fn distribution(
    a: &Aggregates,
    cdf: &[CdfPoint],
    beyond_horizon: Option<Interval>,
    min_delay_s: f64,
) -> (Option<Vec<(f64, f64)>>, f64) {
    let supported_horizon_s = a.supported_horizon_s();
    let mut retry_max_horizon_s = DEFAULT_MAX_HORIZON_S;
    let retry_points = a.counted_max_s.filter(|l| *l > 0.0).map(|latest| {
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
            let within = a.within(supported_horizon_s);
            let f =
                share(within.pair(), a.counted.minus(within).pair()).map_or(0.0, |e| e.estimate);
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
