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
    /// Later requests of keys first seen by [`Spans::counted_cutoff_s`], weighted by their
    /// key's first request: all of them, those within each of [`thresholds`], the earliest
    /// after 0 s and the latest.
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

/// Statistics of a set of keys, before the log's end is known: the late requests are kept
/// (time of their key's first request, delay, weight) until [`Tally::finish`] knows which
/// keys were watched long enough. Retries are a small share of a log's rows.
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
            // Whether it had run: the next answer that says replayed or not, within the hour.
            if let Some(next) = g[1..].iter().find(|r| r.status != 0 && r.replayed != 2)
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
        if g.len() > 1 {
            self.retried_keys += 1;
            self.retries += g.len() as u64 - 1;
            self.late
                .extend(g[1..].iter().map(|r| (t0, r.time_s - t0, w)));
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
            latest_retry_s: self
                .late
                .iter()
                .map(|l| l.1)
                .fold(None, |m: Option<f64>, d| Some(m.map_or(d, |m| m.max(d)))),
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

/// One row of a warehouse query's result (`fit --emit-sql`): which statistic, and its values.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct StatRow {
    pub stat: String,
    pub label: Option<String>,
    pub at: Option<f64>,
    pub n: Option<f64>,
    pub w: Option<f64>,
    pub w2: Option<f64>,
}

/// Which fields a statistic's row must have.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Need {
    /// Always a number.
    Always,
    /// A number when the row's `n` is above 0 (SQL's `SUM` and `MAX` of no rows are empty).
    WhenAny,
    /// Not read.
    Unused,
}

/// A statistic's row: what `at`, `n`, `w`, `w2` hold.
struct Shape {
    stat: &'static str,
    at: Need,
    n: Need,
    w: Need,
    w2: Need,
}

const fn shape(stat: &'static str, fields: [Need; 4]) -> Shape {
    let [at, n, w, w2] = fields;
    Shape { stat, at, n, w, w2 }
}

use Need::{Always, Unused, WhenAny};

/// Every row the query `fit --emit-sql` prints gives (`fit::sql`'s `STATS`).
const SHAPES: [Shape; 20] = [
    shape("rows", [Unused, Always, Unused, Unused]),
    shape("left_out", [Unused, Always, Unused, Unused]),
    shape("keys", [Unused, Always, Unused, Unused]),
    shape("span", [Always, Unused, Unused, Unused]),
    shape("weighted", [Unused, Always, Unused, Unused]),
    shape("intents", [Unused, Always, WhenAny, WhenAny]),
    shape("timed_out", [Unused, Always, WhenAny, WhenAny]),
    shape("hour", [Always, Always, Always, Unused]),
    shape("callers", [Unused, Always, Unused, Unused]),
    shape("caller", [Unused, Unused, Always, Unused]),
    shape("done", [Unused, Always, WhenAny, WhenAny]),
    shape("not_done", [Unused, Always, WhenAny, WhenAny]),
    shape("retries", [WhenAny, Always, Unused, Unused]),
    shape("retried_keys", [Unused, Always, Unused, Unused]),
    shape("supported_horizon", [Always, Unused, Unused, Unused]),
    shape("counted", [WhenAny, Always, WhenAny, WhenAny]),
    shape("counted_min_positive", [WhenAny, Always, Unused, Unused]),
    shape("counted_within", [Always, Always, Always, Always]),
    shape("key_bytes", [Always, Always, Always, Unused]),
    shape("response_bytes", [Always, Always, Always, Unused]),
];

/// The labels of the `span` rows.
const SPAN_LABELS: [&str; 4] = ["first_min", "first_max", "log_min", "log_max"];

/// How far sums of the same weights added in another order may differ, relative.
const SUM_TOLERANCE: f64 = 1e-6;

/// `a` is above `b` by more than rounding.
fn above(a: f64, b: f64) -> bool {
    a > b + SUM_TOLERANCE * b.abs().max(1.0)
}

/// `a` and `b` differ by more than rounding.
fn differ(a: f64, b: f64) -> bool {
    above(a, b) || above(b, a)
}

/// One row of the result with its number (the first data row is row 1, as the file reader
/// numbers rows), once its fields have been checked against its [`Shape`].
#[derive(Clone, Copy)]
struct Row<'a> {
    line: usize,
    r: &'a StatRow,
}

impl Row<'_> {
    /// `row 12 (`timed_out`)`, with the label when the statistic has one.
    fn name(&self) -> String {
        match &self.r.label {
            Some(l) if self.r.stat == "span" || self.r.stat == "caller" => {
                format!("row {} (`{} {l}`)", self.line, self.r.stat)
            }
            _ => format!("row {} (`{}`)", self.line, self.r.stat),
        }
    }

    fn fail(&self, what: impl std::fmt::Display) -> String {
        format!("{}: {what}", self.name())
    }

    fn n(&self) -> u64 {
        self.r.n.unwrap_or(0.0) as u64
    }

    fn w(&self) -> f64 {
        self.r.w.unwrap_or(0.0)
    }

    fn sum(&self) -> Sum {
        Sum(self.w(), self.r.w2.unwrap_or(0.0))
    }

    /// Its fields against its statistic's shape: every number finite, counts whole and not
    /// negative, weights not negative, required fields there.
    fn check_fields(&self) -> Result<(), String> {
        let r = self.r;
        let Some(shape) = SHAPES.iter().find(|s| s.stat == r.stat) else {
            return Err(self.fail(
                "not a statistic the query `idemcalc fit --emit-sql` prints; is this its result?",
            ));
        };
        let any = r.n.is_some_and(|n| n > 0.0);
        for (field, value, need) in [
            ("at", r.at, shape.at),
            ("n", r.n, shape.n),
            ("w", r.w, shape.w),
            ("w2", r.w2, shape.w2),
        ] {
            match value {
                Some(v) if !v.is_finite() => {
                    return Err(self.fail(format!("{field} is {v}, not a finite number")));
                }
                None if need == Always || (need == WhenAny && any) => {
                    return Err(self.fail(format!("{field} is empty")));
                }
                Some(v) if need != Unused && field != "at" && v < 0.0 => {
                    return Err(self.fail(format!("{field} is {v}, below 0")));
                }
                Some(v) if field == "n" && need != Unused && v.fract() != 0.0 => {
                    return Err(self.fail(format!("n is {v}, not a whole count")));
                }
                _ => {}
            }
        }
        if r.stat == "span" && !SPAN_LABELS.contains(&r.label.as_deref().unwrap_or("")) {
            return Err(self.fail(format!(
                "label {:?}, not one of {}",
                r.label.as_deref().unwrap_or(""),
                SPAN_LABELS.join(", ")
            )));
        }
        Ok(())
    }

    /// A weighted count: `w` and `w2` are Σw and Σw² of `n` weights, each above 0 (and 1 each
    /// in a log with no weighted row).
    fn check_sum(&self, weighted: bool) -> Result<Sum, String> {
        let (n, s) = (self.n() as f64, self.sum());
        if n == 0.0 {
            if s.0 != 0.0 || s.1 != 0.0 {
                return Err(self.fail(format!("n is 0 but w is {} and w2 {}", s.0, s.1)));
            }
            return Ok(s);
        }
        if s.0 <= 0.0 {
            return Err(self.fail(format!("w is {} for {n} rows; weights are above 0", s.0)));
        }
        if !weighted && (differ(s.0, n) || differ(s.1, n)) {
            return Err(self.fail(format!(
                "w is {} and w2 {} but no row is weighted (`weighted` is 0): both must be n, {n}",
                s.0, s.1
            )));
        }
        // Cauchy–Schwarz: n Σw² ≥ (Σw)²; and weights above 0 give Σw² ≤ (Σw)².
        if above(s.0 * s.0 / n, s.1) || above(s.1, s.0 * s.0) {
            return Err(self.fail(format!(
                "w2 is {}, outside what {n} weights summing to w {} can give ({} to {})",
                s.1,
                s.0,
                s.0 * s.0 / n,
                s.0 * s.0
            )));
        }
        Ok(s)
    }
}

/// The result's rows, each checked on its own.
struct Rows<'a> {
    rows: Vec<Row<'a>>,
}

impl<'a> Rows<'a> {
    fn new(rows: &'a [StatRow]) -> Result<Rows<'a>, String> {
        let rows: Vec<Row<'a>> = rows
            .iter()
            .enumerate()
            .map(|(i, r)| Row { line: i + 1, r })
            .collect();
        for r in &rows {
            r.check_fields()?;
        }
        Ok(Rows { rows })
    }

    fn all(&self, stat: &str) -> impl Iterator<Item = Row<'a>> + '_ {
        let stat = stat.to_string();
        self.rows.iter().copied().filter(move |r| r.r.stat == stat)
    }

    /// The one row of a statistic (with this label, for `span`).
    fn one(&self, stat: &str, label: Option<&str>) -> Result<Row<'a>, String> {
        let mut found = self
            .all(stat)
            .filter(|r| label.is_none() || r.r.label.as_deref() == label);
        let first = found.next().ok_or_else(|| {
            format!(
                "no `{stat}{}` row; is this the result of the query `idemcalc fit --emit-sql` prints?",
                label.map(|l| format!(" {l}")).unwrap_or_default()
            )
        })?;
        if let Some(second) = found.next() {
            return Err(second.fail(format!(
                "a second row for it (the first is row {}); the query gives one",
                first.line
            )));
        }
        Ok(first)
    }
}

impl Aggregates {
    /// The statistics from a query's result rows. Every row is checked as the file reader
    /// checks a log's rows, and the statistics against each other (a part never above its
    /// whole, counts that must agree agreeing); an error names the row, its statistic and the
    /// field that is missing or does not make sense.
    pub fn from_rows(rows: &[StatRow]) -> Result<Aggregates, String> {
        let rows = Rows::new(rows)?;
        let weighted_row = rows.one("weighted", None)?;
        if weighted_row.n() > 1 {
            return Err(weighted_row.fail("n is above 1; it says whether any row is weighted"));
        }
        let weighted = weighted_row.n() == 1;
        let spans = spans(&rows)?;
        let counts = Counts::check(&rows, weighted)?;
        let hourly = hourly(&rows, &counts, weighted)?;
        let (callers, top_callers) = callers(&rows, &counts)?;
        let key_bytes = sizes(&rows, "key_bytes", &counts, weighted)?;
        let response_bytes = sizes(&rows, "response_bytes", &counts, weighted)?;
        let late = Late::check(&rows, &spans, &counts, weighted)?;
        Ok(Aggregates {
            rows: counts.rows,
            keys: counts.keys,
            weighted,
            spans,
            intents: counts.intents,
            timed_out: counts.timed_out,
            hourly,
            callers,
            top_callers,
            done: counts.done,
            not_done: counts.not_done,
            retries: counts.retries,
            retried_keys: counts.retried_keys,
            latest_retry_s: late.latest_retry_s,
            counted: late.counted,
            counted_within: late.counted_within,
            counted_min_positive_s: late.counted_min_positive_s,
            counted_max_s: late.counted_max_s,
            key_bytes,
            response_bytes,
        })
    }
}

/// The four spans, in order and within the times the file reader accepts, and the supported
/// horizon the query derived from them.
fn spans(rows: &Rows) -> Result<Spans, String> {
    let [first_min, first_max, log_min, log_max] = SPAN_LABELS.map(|l| rows.one("span", Some(l)));
    let [first_min, first_max, log_min, log_max] = [first_min?, first_max?, log_min?, log_max?];
    for r in [first_min, first_max, log_min, log_max] {
        let t = r.r.at.unwrap_or(f64::NAN);
        if t.abs() > MAX_TIME_S {
            return Err(r.fail(format!(
                "at is {t}, more than 3,000 years from 1970 (is the time column's unit right?)"
            )));
        }
    }
    let at = |r: Row| r.r.at.unwrap_or(f64::NAN);
    for (early, late) in [
        (log_min, first_min),
        (first_min, first_max),
        (first_max, log_max),
    ] {
        if at(early) > at(late) {
            return Err(late.fail(format!(
                "at is {}, before {}'s {}",
                at(late),
                early.name(),
                at(early)
            )));
        }
    }
    let spans = Spans {
        first_min: at(first_min),
        first_max: at(first_max),
        log_min: at(log_min),
        log_max: at(log_max),
    };
    let h = rows.one("supported_horizon", None)?;
    let mine = spans.supported_horizon_s();
    let given = h.r.at.unwrap_or(f64::NAN);
    if (given - mine).abs() > 1e-6 * mine.abs().max(1.0) {
        return Err(h.fail(format!(
            "at is {given} s but the spans give {mine} s; the result was not made by this version's query"
        )));
    }
    Ok(spans)
}

/// The single-row counts, each a part of the one it must not exceed.
struct Counts {
    rows: u64,
    keys: u64,
    intents: Sum,
    timed_out: Sum,
    done: Sum,
    not_done: Sum,
    retries: u64,
    retried_keys: u64,
}

impl Counts {
    fn check(rows: &Rows, weighted: bool) -> Result<Counts, String> {
        let one = |stat: &str| rows.one(stat, None);
        let (all, left_out, keys) = (one("rows")?, one("left_out")?, one("keys")?);
        let (retries, retried_keys) = (one("retries")?, one("retried_keys")?);
        let intents = one("intents")?;
        if left_out.n() > all.n() {
            return Err(left_out.fail(format!("n {} is above `rows`' {}", left_out.n(), all.n())));
        }
        // Every usable row is a key's first request or one of its later ones.
        let usable = all.n() - left_out.n();
        if keys.n().checked_add(retries.n()) != Some(usable) {
            return Err(keys.fail(format!(
                "n {} plus `retries`' {} is not the {usable} usable rows (`rows` {} less `left_out` {})",
                keys.n(),
                retries.n(),
                all.n(),
                left_out.n()
            )));
        }
        if intents.n() != keys.n() {
            return Err(intents.fail(format!("n {} is not `keys`' {}", intents.n(), keys.n())));
        }
        if retried_keys.n() > retries.n().min(keys.n()) {
            return Err(retried_keys.fail(format!(
                "n {} is above `retries`' {} or `keys`' {}",
                retried_keys.n(),
                retries.n(),
                keys.n()
            )));
        }
        let whole = intents.check_sum(weighted)?;
        let timed_out = one("timed_out")?;
        let t = timed_out.check_sum(weighted)?;
        part_of(timed_out, (timed_out.n(), t), intents, (intents.n(), whole))?;
        let (done, not_done) = (one("done")?, one("not_done")?);
        let (d, nd) = (done.check_sum(weighted)?, not_done.check_sum(weighted)?);
        // Done and not done are timed-out keys whose next answer said which.
        part_of(
            not_done,
            (done.n() + not_done.n(), d.plus(nd)),
            timed_out,
            (timed_out.n(), t),
        )
        .map_err(|e| format!("{e}, counted with {}", done.name()))?;
        Ok(Counts {
            rows: all.n(),
            keys: keys.n(),
            intents: whole,
            timed_out: t,
            done: d,
            not_done: nd,
            retries: retries.n(),
            retried_keys: retried_keys.n(),
        })
    }
}

/// `part` (`row`'s, or `row`'s and its sibling's) is no more than `whole` (`of`'s), in count
/// and in weight.
fn part_of(row: Row, part: (u64, Sum), of: Row, whole: (u64, Sum)) -> Result<(), String> {
    if part.0 > whole.0 {
        return Err(row.fail(format!(
            "n {} is above {}'s n {}",
            part.0,
            of.name(),
            whole.0
        )));
    }
    if above(part.1.0, whole.1.0) || above(part.1.1, whole.1.1) {
        return Err(row.fail(format!(
            "w {} (w2 {}) is above {}'s w {} (w2 {})",
            part.1.0,
            part.1.1,
            of.name(),
            whole.1.0,
            whole.1.1
        )));
    }
    Ok(())
}

/// The weight of first requests per hour of the day: each hour once, the hours adding up to
/// the intents.
fn hourly(rows: &Rows, counts: &Counts, weighted: bool) -> Result<[f64; 24], String> {
    let mut hourly = [0.0; 24];
    let mut seen: [Option<usize>; 24] = [None; 24];
    let (mut n, mut w) = (0u64, 0.0);
    let mut last = None;
    for r in rows.all("hour") {
        let h = r.r.at.unwrap_or(f64::NAN);
        if !(0.0..24.0).contains(&h) || h.fract() != 0.0 {
            return Err(r.fail(format!("at is {h}, not an hour from 0 to 23")));
        }
        let hour = h as usize;
        if let Some(line) = seen[hour] {
            return Err(r.fail(format!("hour {hour} again (row {line} has it)")));
        }
        seen[hour] = Some(r.line);
        check_group(r, weighted)?;
        hourly[hour] = r.w();
        n += r.n();
        w += r.w();
        last = Some(r);
    }
    if let Some(r) = last
        && (n != counts.keys || differ(w, counts.intents.0))
    {
        return Err(r.fail(format!(
            "the `hour` rows add up to n {n} and w {w}, not `intents`' n {} and w {}",
            counts.keys, counts.intents.0
        )));
    }
    if last.is_none() && counts.keys > 0 {
        return Err(format!(
            "no `hour` row for {} intents; is this the result of the query `idemcalc fit --emit-sql` prints?",
            counts.keys
        ));
    }
    Ok(hourly)
}

/// A grouped row (an hour, a size): at least one key, weights above 0, and `w` its count when
/// no row is weighted.
fn check_group(r: Row, weighted: bool) -> Result<(), String> {
    if r.n() == 0 {
        return Err(r.fail("n is 0; the query gives a row only for what some key has"));
    }
    if r.w() <= 0.0 {
        return Err(r.fail(format!("w is {}; weights are above 0", r.w())));
    }
    if !weighted && differ(r.w(), r.n() as f64) {
        return Err(r.fail(format!(
            "w is {} but no row is weighted (`weighted` is 0): it must be n, {}",
            r.w(),
            r.n()
        )));
    }
    Ok(())
}

/// The number of callers and the ten with the most weight, ties by name.
fn callers(rows: &Rows, counts: &Counts) -> Result<(u64, Vec<(String, f64)>), String> {
    let all = rows.one("callers", None)?;
    let callers = all.n();
    if callers > counts.keys || (callers == 0 && counts.keys > 0) {
        return Err(all.fail(format!(
            "n {callers} callers for {} keys; each key has one caller",
            counts.keys
        )));
    }
    let top: Vec<Row> = rows.all("caller").collect();
    if top.len() as u64 != callers.min(10) {
        return Err(all.fail(format!(
            "n {callers} callers but {} `caller` rows; the query gives the {} with the most weight",
            top.len(),
            callers.min(10)
        )));
    }
    let mut total = 0.0;
    let mut top_callers: Vec<(String, f64)> = Vec::with_capacity(top.len());
    for r in &top {
        let name = r.r.label.clone().unwrap_or_default();
        if r.w() <= 0.0 {
            return Err(r.fail(format!("w is {}; weights are above 0", r.w())));
        }
        if top_callers.iter().any(|(c, _)| *c == name) {
            return Err(r.fail("the same caller again"));
        }
        total += r.w();
        top_callers.push((name, r.w()));
    }
    if let Some(r) = top.last()
        && above(total, counts.intents.0)
    {
        return Err(r.fail(format!(
            "the `caller` rows' w add up to {total}, above `intents`' w {}",
            counts.intents.0
        )));
    }
    top_callers.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    Ok((callers, top_callers))
}

/// Key lengths (every key has one) or first 2xx response sizes (keys that had one), sorted:
/// whole bytes, each size once, no more keys or weight than the intents.
fn sizes(
    rows: &Rows,
    stat: &str,
    counts: &Counts,
    weighted: bool,
) -> Result<Vec<SizeCount>, String> {
    let mut v: Vec<(Row, SizeCount)> = Vec::new();
    let (mut n, mut w) = (0u64, 0.0);
    for r in rows.all(stat) {
        let bytes = r.r.at.unwrap_or(f64::NAN);
        if !(0.0..f64::from(u32::MAX)).contains(&bytes) || bytes.fract() != 0.0 {
            return Err(r.fail(format!("at is {bytes}, not a size in bytes")));
        }
        check_group(r, weighted)?;
        n += r.n();
        w += r.w();
        v.push((
            r,
            SizeCount {
                bytes,
                keys: r.n(),
                weight: r.w(),
            },
        ));
    }
    v.sort_by(|a, b| a.1.bytes.total_cmp(&b.1.bytes));
    if let Some(pair) = v.windows(2).find(|p| p[0].1.bytes == p[1].1.bytes) {
        return Err(pair[1].0.fail(format!(
            "size {} again (row {} has it)",
            pair[1].1.bytes, pair[0].0.line
        )));
    }
    let every_key = stat == "key_bytes";
    let wrong = if every_key {
        n != counts.keys || differ(w, counts.intents.0)
    } else {
        n > counts.keys || above(w, counts.intents.0)
    };
    if wrong {
        return Err(format!(
            "the `{stat}` rows add up to n {n} and w {w}; `intents` has n {} and w {}{}",
            counts.keys,
            counts.intents.0,
            if every_key {
                " and every key has a length"
            } else {
                ", no fewer"
            }
        ));
    }
    Ok(v.into_iter().map(|(_, s)| s).collect())
}

/// The retries' delays: the latest, and those of keys watched long enough (`counted`), split
/// at each threshold.
struct Late {
    latest_retry_s: Option<f64>,
    counted: Sum,
    counted_within: Vec<(f64, Sum)>,
    counted_min_positive_s: Option<f64>,
    counted_max_s: Option<f64>,
}

impl Late {
    fn check(rows: &Rows, spans: &Spans, counts: &Counts, weighted: bool) -> Result<Late, String> {
        let retries = rows.one("retries", None)?;
        let latest = retries.r.at.filter(|_| retries.n() > 0);
        if let Some(d) = latest
            && !(0.0..=spans.log_s() * (1.0 + SUM_TOLERANCE)).contains(&d)
        {
            return Err(retries.fail(format!(
                "at is {d} s, not a delay within the log's {} s",
                spans.log_s()
            )));
        }
        let counted = rows.one("counted", None)?;
        let total = counted.check_sum(weighted)?;
        if counted.n() > counts.retries {
            return Err(counted.fail(format!(
                "n {} is above `retries`' {}",
                counted.n(),
                counts.retries
            )));
        }
        let max = counted.r.at.filter(|_| counted.n() > 0);
        if let Some(d) = max
            && (d < 0.0 || latest.is_some_and(|l| above(d, l)))
        {
            return Err(counted.fail(format!(
                "at is {d} s, not a delay up to `retries`' latest, {} s",
                latest.unwrap_or(0.0)
            )));
        }
        let min_positive = rows.one("counted_min_positive", None)?;
        let min = min_positive.r.at.filter(|_| min_positive.n() > 0);
        if min_positive.n() > counted.n()
            || min.is_some_and(|m| m <= 0.0 || max.is_some_and(|x| above(m, x)))
        {
            return Err(min_positive.fail(format!(
                "n {} and at {:?}: not the delays above 0 of `counted` (n {}, latest {:?})",
                min_positive.n(),
                min,
                counted.n(),
                max
            )));
        }
        Ok(Late {
            latest_retry_s: latest,
            counted: total,
            counted_within: within(rows, spans, counted, total, weighted)?,
            counted_min_positive_s: min,
            counted_max_s: max,
        })
    }
}

/// The counted weight within each threshold: one row per threshold (none when nothing was
/// counted), growing with the delay, never above `counted`, and all of it past the latest
/// counted delay.
fn within(
    rows: &Rows,
    spans: &Spans,
    counted: Row,
    total: Sum,
    weighted: bool,
) -> Result<Vec<(f64, Sum)>, String> {
    let mut v: Vec<(Row, f64, Sum)> = Vec::new();
    for r in rows.all("counted_within") {
        let s = r.check_sum(weighted)?;
        part_of(r, (r.n(), s), counted, (counted.n(), total))?;
        v.push((r, r.r.at.unwrap_or(f64::NAN), s));
    }
    v.sort_by(|a, b| a.1.total_cmp(&b.1));
    let expected = thresholds(spans.supported_horizon_s());
    let matches = |at: f64, t: f64| (at - t).abs() <= 1e-9 * t.abs().max(1.0);
    if counted.n() == 0 {
        if let Some((r, _, _)) = v.first() {
            return Err(r.fail("a row though `counted` has n 0; the query gives none"));
        }
        return Ok(Vec::new());
    }
    if let Some(pair) = v.windows(2).find(|p| p[0].1 == p[1].1) {
        return Err(pair[1].0.fail(format!(
            "at {} s again (row {} has it)",
            pair[1].1, pair[0].0.line
        )));
    }
    let missing: Vec<f64> = expected
        .iter()
        .copied()
        .filter(|t| !v.iter().any(|r| matches(r.1, *t)))
        .collect();
    let extra: Vec<f64> = v
        .iter()
        .map(|r| r.1)
        .filter(|at| !expected.iter().any(|t| matches(*at, *t)))
        .collect();
    if !missing.is_empty() || !extra.is_empty() {
        return Err(counted.fail(format!(
            "n is {} but the `counted_within` rows miss the thresholds {missing:?} s and are at \
             {extra:?} s, which this version's query does not use (one row per threshold)",
            counted.n()
        )));
    }
    for pair in v.windows(2) {
        let ((_, _, a), (r, at, b)) = (&pair[0], &pair[1]);
        if pair[0].0.n() > r.n() || above(a.0, b.0) || above(a.1, b.1) {
            return Err(r.fail(format!(
                "n {}, w {} at {at} s is below {}'s n {}, w {} at a shorter delay",
                r.n(),
                b.0,
                pair[0].0.name(),
                pair[0].0.n(),
                a.0
            )));
        }
    }
    let max = counted.r.at.unwrap_or(f64::INFINITY);
    if let Some((r, at, s)) = v.iter().find(|(r, at, s)| {
        *at >= max && (r.n() != counted.n() || differ(s.0, total.0) || differ(s.1, total.1))
    }) {
        return Err(r.fail(format!(
            "n {}, w {} at {at} s, past the latest counted delay ({max} s), is not all of {} (n {}, w {})",
            r.n(),
            s.0,
            counted.name(),
            counted.n(),
            total.0
        )));
    }
    Ok(v.into_iter().map(|(_, at, s)| (at, s)).collect())
}
