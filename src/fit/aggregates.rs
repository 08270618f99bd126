//! The sufficient statistics of a request log: every figure `fit` reports is a function of
//! these sums and nothing else, so a log read here, a log read in partitions, and a warehouse
//! query's result (`fit --emit-sql`, then `fit --aggregates`) all end in the same
//! [`Aggregates`] and go through the same estimators (`estimate.rs`, `retries.rs`).
//!
//! [`Tally`] builds them from requests grouped by (caller, key); tallies of disjoint key sets
//! merge, which is what lets `fit` read a log larger than memory one partition at a time.

use std::collections::{BTreeMap, HashMap};

use super::request::Req;
use crate::duration::DAY_S;
use crate::model::SWEEP_RETENTIONS_S;

/// The furthest a request's time may be from 1970, in seconds (about 3,170 years): a time past
/// it is a unit mistake or garbage, and would make the log's span, and every rate, meaningless.
/// The file reader refuses such a row; a query's result with such a span is refused.
pub(super) const MAX_TIME_S: f64 = 1e11;

/// Retries answered within this long of the first request tell whether it had run: the
/// record is surely still there, so a replay means done and a fresh 201 means not.
pub const DONE_WITHIN_S: f64 = 3_600.0;

/// The status that says the key's first attempt still holds its lease: neither done nor not.
pub const IN_PROGRESS: u16 = 409;

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

/// Weighted sum and the sum of squared weights: a count and its Poisson variance.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sum(pub f64, pub f64);

impl Sum {
    pub fn add(&mut self, w: f64) {
        self.0 += w;
        self.1 += w * w;
    }
    pub fn pair(self) -> (f64, f64) {
        (self.0, self.1)
    }
    pub fn plus(self, o: Sum) -> Sum {
        Sum(self.0 + o.0, self.1 + o.1)
    }
    /// What is left of `self` without its part `o`; never below 0 (rounding).
    pub fn minus(self, o: Sum) -> Sum {
        Sum((self.0 - o.0).max(0.0), (self.1 - o.1).max(0.0))
    }
}

/// When the log's first requests and all its rows begin and end, seconds since 1970.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Spans {
    pub first_min: f64,
    pub first_max: f64,
    pub log_min: f64,
    pub log_max: f64,
}

impl Spans {
    /// From the first to the last first request: the window arrivals are counted in.
    pub fn arrival_s(&self) -> f64 {
        self.first_max - self.first_min
    }

    /// From the first to the last row.
    pub fn log_s(&self) -> f64 {
        self.log_max - self.log_min
    }

    /// The delay up to which every key counted for the late-retry CDF was watched: a key is
    /// watched from its first request to the end of the log, and counting only keys watched
    /// this long keeps the CDF free of the bias toward short delays that a log ending
    /// mid-retry would give. At least half the log, so a log with late first requests still
    /// says something.
    pub fn supported_horizon_s(&self) -> f64 {
        (self.log_max - self.first_max).max((self.log_max - self.first_min) / 2.0)
    }

    /// Keys whose first request came at or before this time are counted for the CDF.
    pub fn counted_cutoff_s(&self) -> f64 {
        self.log_max - self.supported_horizon_s()
    }
}

/// The delays the counted weight is split at: the CDF's points, the swept retentions and the
/// supported horizon, the only places the estimators look.
pub fn thresholds(supported_horizon_s: f64) -> Vec<f64> {
    let mut t = fixed_thresholds();
    t.push(supported_horizon_s);
    t.sort_by(f64::total_cmp);
    t.dedup();
    t
}

/// The thresholds known before the log is read.
pub(super) fn fixed_thresholds() -> Vec<f64> {
    let mut t: Vec<f64> = CDF_POINTS_S
        .iter()
        .chain(SWEEP_RETENTIONS_S)
        .copied()
        .collect();
    t.sort_by(f64::total_cmp);
    t.dedup();
    t
}

/// One size, in bytes, with how many keys had it and their weight.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SizeCount {
    pub bytes: f64,
    pub keys: u64,
    pub weight: f64,
}

/// A log's sufficient statistics. Weights are of each key's first request (a sampled log's
/// rows stand for several requests); `Sum`s carry Σw and Σw², the Poisson variance.
#[derive(Debug, Clone, PartialEq)]
pub struct Aggregates {
    /// Rows read, bad ones included.
    pub rows: u64,
    /// Distinct (caller, key) pairs: intents.
    pub keys: u64,
    /// Some row stands for other than one request.
    pub weighted: bool,
    pub spans: Spans,
    /// First requests, and those the caller heard nothing for in time.
    pub intents: Sum,
    pub timed_out: Sum,
    /// Weight of first requests per hour of the day (UTC).
    pub hourly: [f64; 24],
    pub callers: u64,
    /// The ten callers with the most weight of first requests, ties by name.
    pub top_callers: Vec<(String, f64)>,
    /// Timed-out first requests whose next answer, within [`DONE_WITHIN_S`], was a 2xx
    /// replay (done) or anything else (not done).
    pub done: Sum,
    pub not_done: Sum,
    /// Every later request, the keys with one, and the latest delay.
    pub retries: u64,
    pub retried_keys: u64,
    pub latest_retry_s: Option<f64>,
    /// The late-retry distribution's sample: of each timed-out call (a key whose first request
    /// heard nothing) first seen by [`Spans::counted_cutoff_s`], the delay from its first
    /// request to its first retry, weighted by the first request: all of them, those within
    /// each of [`thresholds`], the earliest after 0 s and the latest.
    pub counted: Sum,
    pub counted_within: Vec<(f64, Sum)>,
    pub counted_min_positive_s: Option<f64>,
    pub counted_max_s: Option<f64>,
    /// Each key's length, and each key's first 2xx response size, sorted by size.
    pub key_bytes: Vec<SizeCount>,
    pub response_bytes: Vec<SizeCount>,
}

impl Aggregates {
    pub fn supported_horizon_s(&self) -> f64 {
        self.spans.supported_horizon_s()
    }

    /// The counted weight with a delay of at most `t`, for `t` one of [`thresholds`].
    pub fn within(&self, t: f64) -> Sum {
        let tol = 1e-9 * t.abs().max(1.0);
        self.counted_within
            .iter()
            .find(|(at, _)| (at - t).abs() <= tol)
            .map_or(Sum::default(), |(_, s)| *s)
    }

    /// The counted weight with a delay over `t`.
    pub fn after(&self, t: f64) -> Sum {
        self.counted.minus(self.within(t))
    }
}

/// Statistics of a set of keys, before the log's end is known: the timed-out calls' first
/// retries are kept (time of their key's first request, delay, weight) until
/// [`Tally::finish`] knows which keys were watched long enough. They are a small share of a
/// log's rows.
#[derive(Debug, Default)]
pub(super) struct Tally {
    keys: u64,
    weighted: bool,
    first_min: f64,
    first_max: f64,
    log_min: f64,
    log_max: f64,
    intents: Sum,
    timed_out: Sum,
    hourly: [f64; 24],
    caller_weights: HashMap<u32, f64>,
    done: Sum,
    not_done: Sum,
    retries: u64,
    retried_keys: u64,
    latest_retry_s: Option<f64>,
    late: Vec<(f64, f64, f64)>,
    key_bytes: BTreeMap<u32, (u64, f64)>,
    response_bytes: BTreeMap<u32, (u64, f64)>,
}

impl Tally {
    pub(super) fn empty() -> Tally {
        Tally {
            first_min: f64::INFINITY,
            first_max: f64::NEG_INFINITY,
            log_min: f64::INFINITY,
            log_max: f64::NEG_INFINITY,
            ..Tally::default()
        }
    }

    /// Tallies requests sorted by key, then time (see [`super::request::order`]), in parallel.
    pub(super) fn of_sorted(reqs: &[Req]) -> Tally {
        use rayon::prelude::*;
        let groups = groups(reqs);
        groups
            .par_chunks(1 << 14)
            .fold(Tally::empty, |mut t, chunk| {
                for g in chunk {
                    t.add(g);
                }
                t
            })
            .reduce(Tally::empty, Tally::merge)
    }

    /// One key: its first request and its later ones.
    fn add(&mut self, g: &[Req]) {
        let first = &g[0];
        let t0 = first.time_s;
        let w = f64::from(first.weight);
        self.keys += 1;
        self.first_min = self.first_min.min(t0);
        self.first_max = self.first_max.max(t0);
        for r in g {
            self.log_min = self.log_min.min(r.time_s);
            self.log_max = self.log_max.max(r.time_s);
            self.weighted |= r.weight != 1.0;
        }
        self.intents.add(w);
        if first.status == 0 {
            self.timed_out.add(w);
            // Whether it had run: the next answer that says replayed or not, within the hour. A
            // 409 says only that the first attempt still holds its lease: the answer after it
            // tells.
            if let Some(next) = g[1..]
                .iter()
                .find(|r| r.status != 0 && r.status != IN_PROGRESS && r.replayed != 2)
                && next.time_s - t0 <= DONE_WITHIN_S
            {
                if next.replayed == 1 && (200..300).contains(&next.status) {
                    self.done.add(w);
                } else {
                    self.not_done.add(w);
                }
            }
        }
        let hour = (t0.rem_euclid(DAY_S) / 3_600.0) as usize;
        self.hourly[hour.min(23)] += w;
        *self.caller_weights.entry(first.caller).or_insert(0.0) += w;
        if let Some(last) = g.last().filter(|_| g.len() > 1) {
            self.retried_keys += 1;
            self.retries += g.len() as u64 - 1;
            let d = last.time_s - t0;
            self.latest_retry_s = Some(self.latest_retry_s.map_or(d, |l| l.max(d)));
        }
        // The late-retry distribution counts timed-out calls, one delay each: to the call's
        // first retry, the one the caller sent because it heard nothing. The requests after it
        // (re-sends on 409 while the first attempt holds its lease, backoff after a 503) follow
        // from that retry's answer, and the simulator makes them itself.
        if first.status == 0
            && let Some(retry) = g.get(1)
        {
            self.late.push((t0, retry.time_s - t0, w));
        }
        let k = self
            .key_bytes
            .entry(u32::from(first.key_bytes))
            .or_default();
        k.0 += 1;
        k.1 += w;
        if let Some(r) = g
            .iter()
            .find(|r| (200..300).contains(&r.status) && r.response_bytes != u32::MAX)
        {
            let s = self.response_bytes.entry(r.response_bytes).or_default();
            s.0 += 1;
            s.1 += w;
        }
    }

    /// No key was tallied: the log held no usable row.
    pub(super) fn is_empty(&self) -> bool {
        self.keys == 0
    }

    /// The statistics of both key sets (which must not share a key).
    pub(super) fn merge(mut self, other: Tally) -> Tally {
        self.keys += other.keys;
        self.weighted |= other.weighted;
        self.first_min = self.first_min.min(other.first_min);
        self.first_max = self.first_max.max(other.first_max);
        self.log_min = self.log_min.min(other.log_min);
        self.log_max = self.log_max.max(other.log_max);
        self.intents = self.intents.plus(other.intents);
        self.timed_out = self.timed_out.plus(other.timed_out);
        for (h, w) in self.hourly.iter_mut().zip(other.hourly) {
            *h += w;
        }
        for (c, w) in other.caller_weights {
            *self.caller_weights.entry(c).or_insert(0.0) += w;
        }
        self.done = self.done.plus(other.done);
        self.not_done = self.not_done.plus(other.not_done);
        self.retries += other.retries;
        self.retried_keys += other.retried_keys;
        self.latest_retry_s = match (self.latest_retry_s, other.latest_retry_s) {
            (Some(a), Some(b)) => Some(a.max(b)),
            (a, b) => a.or(b),
        };
        self.late.extend(other.late);
        for (b, (n, w)) in other.key_bytes {
            let e = self.key_bytes.entry(b).or_default();
            e.0 += n;
            e.1 += w;
        }
        for (b, (n, w)) in other.response_bytes {
            let e = self.response_bytes.entry(b).or_default();
            e.0 += n;
            e.1 += w;
        }
        self
    }

    /// The statistics, now that the log's span is known. `caller_names` is indexed by
    /// [`Req::caller`].
    pub(super) fn finish(self, rows: u64, caller_names: &[String]) -> Aggregates {
        let spans = Spans {
            first_min: self.first_min,
            first_max: self.first_max,
            log_min: self.log_min,
            log_max: self.log_max,
        };
        let cutoff = spans.counted_cutoff_s();
        let mut counted: Vec<(f64, f64)> = self
            .late
            .iter()
            .filter(|(t0, _, _)| *t0 <= cutoff)
            .map(|&(_, d, w)| (d, w))
            .collect();
        counted.sort_by(|a, b| a.0.total_cmp(&b.0));
        let mut total = Sum::default();
        for &(_, w) in &counted {
            total.add(w);
        }
        let counted_within = thresholds(spans.supported_horizon_s())
            .into_iter()
            .map(|t| {
                let mut s = Sum::default();
                for &(_, w) in counted.iter().take_while(|(d, _)| *d <= t) {
                    s.add(w);
                }
                (t, s)
            })
            .collect();
        let mut by_caller: Vec<(String, f64)> = self
            .caller_weights
            .iter()
            .map(|(&id, &w)| (caller_names[id as usize].clone(), w))
            .collect();
        by_caller.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        let callers = by_caller.len() as u64;
        by_caller.truncate(10);
        let sizes = |m: BTreeMap<u32, (u64, f64)>| {
            m.into_iter()
                .map(|(b, (keys, weight))| SizeCount {
                    bytes: f64::from(b),
                    keys,
                    weight,
                })
                .collect()
        };
        Aggregates {
            rows,
            keys: self.keys,
            weighted: self.weighted,
            spans,
            intents: self.intents,
            timed_out: self.timed_out,
            hourly: self.hourly,
            callers,
            top_callers: by_caller,
            done: self.done,
            not_done: self.not_done,
            retries: self.retries,
            retried_keys: self.retried_keys,
            latest_retry_s: self.latest_retry_s,
            counted: total,
            counted_within,
            counted_min_positive_s: counted.iter().map(|c| c.0).find(|d| *d > 0.0),
            counted_max_s: counted.last().map(|c| c.0),
            key_bytes: sizes(self.key_bytes),
            response_bytes: sizes(self.response_bytes),
        }
    }
}

/// One group per (caller, key) of requests sorted by key, then time: an intent and its
/// retries, the first request first.
fn groups(reqs: &[Req]) -> Vec<&[Req]> {
    reqs.chunk_by(|a, b| a.key == b.key).collect()
}
