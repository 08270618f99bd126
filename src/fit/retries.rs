//! The late-retry distribution: per timed-out call (a key whose first request heard nothing in
//! time), how long after that first request its first retry came, counted only over calls the
//! log watched long enough ([`super::aggregates::Spans::supported_horizon_s`]); as a CDF with
//! intervals, the calls retried later than each retention, and the points the model and the
//! simulator take. It is the seed's "of 34,560 retried calls a day, 0.8 % arrive after a 24 h
//! purge", and what the simulator draws for a timed-out call's first retry; re-sends on a 409
//! while the first attempt holds its lease follow from that retry's answer, and counting them
//! would pile the head up and thin the tail that decides the retention.

use serde::Serialize;

use super::aggregates::Aggregates;
pub use super::aggregates::CDF_POINTS_S;
use super::estimate::share;
use crate::duration::{DAY_S, round_up_approx};
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
    pub(super) watched_s: f64,
    pub(super) latest_retry_s: Option<f64>,
    pub(super) cdf: Vec<CdfPoint>,
    pub(super) later_than_watched: Option<Interval>,
    pub(super) beyond: Vec<Beyond>,
    pub(super) points: Option<Vec<(f64, f64)>>,
    pub(super) min_delay_s: f64,
    pub(super) horizon_s: f64,
}

pub(super) fn retries(a: &Aggregates) -> Retries {
    let watched_s = a.supported_horizon_s();
    let cdf = cdf(a);
    let later_than_watched = share(a.after(watched_s).pair(), a.within(watched_s).pair());
    let days = a.spans.arrival_s() / DAY_S;
    let beyond = SWEEP_RETENTIONS_S
        .iter()
        .filter(|&&t| t <= watched_s)
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
    let (points, horizon_s) = distribution(a, &cdf, later_than_watched, min_delay_s);
    Retries {
        retries: a.retries,
        retried_keys: a.retried_keys,
        watched_s,
        latest_retry_s: a.latest_retry_s,
        cdf,
        later_than_watched,
        beyond,
        points,
        min_delay_s,
        horizon_s,
    }
}

/// The CDF at [`CDF_POINTS_S`] up to the delay every counted call was watched for.
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

/// The distribution for the model and the simulator, and its one horizon.
///
/// When no counted call was first retried later than the log watched them: the CDF at the
/// points below the latest counted first retry, then 100 % at the latest request the log holds
/// for any key (`latest_retry`: a re-send after a retry that heard nothing again, or a caller
/// asking again about a call it had been answered, can come later than every first retry). A
/// distribution ending at the latest first retry said no retry comes after 1.366d beside a log
/// holding one at 1.412d, and a store sized to it purges keys the log shows asked for again.
/// Otherwise the watched delay's value, and the default tail after it to the longer of 30 d
/// and twice the watched delay (never short of a retry the log holds: the log spans at most
/// twice the watched delay). Either horizon is rounded up to the four figures the scenario
/// file writes, so the written horizon is never a few seconds short of the retry it covers.
fn distribution(
    a: &Aggregates,
    cdf: &[CdfPoint],
    later_than_watched: Option<Interval>,
    min_delay_s: f64,
) -> (Option<Vec<(f64, f64)>>, f64) {
    let watched_s = a.supported_horizon_s();
    let latest_seen_s = a
        .latest_retry_s
        .into_iter()
        .chain(a.counted_max_s)
        .fold(0.0, f64::max);
    let mut horizon_s = round_up_approx(
        DEFAULT_MAX_HORIZON_S
            .max(2.0 * watched_s)
            .max(latest_seen_s),
    );
    let retry_points = a.counted_max_s.filter(|l| *l > 0.0).map(|latest_counted| {
        let mut pts: Vec<(f64, f64)> = cdf
            .iter()
            .filter(|p| p.delay_s < latest_counted && p.delay_s > min_delay_s)
            .map(|p| (p.delay_s, p.arrived.estimate))
            .collect();
        if later_than_watched.map_or(0.0, |b| b.estimate) == 0.0 {
            horizon_s = round_up_approx(latest_seen_s);
            pts.push((horizon_s, 1.0));
        } else {
            let within = a.within(watched_s);
            let f =
                share(within.pair(), a.counted.minus(within).pair()).map_or(0.0, |e| e.estimate);
            if pts.last().is_none_or(|p| p.0 < watched_s) {
                pts.push((watched_s, f));
            }
        }
        // A CDF needs two points; a single one gets the earliest retry in front of it.
        if pts.len() < 2 {
            pts.insert(0, (min_delay_s.min(pts[0].0 / 2.0), 0.0));
        }
        pts
    });
    (retry_points, horizon_s)
}
