//! A warehouse query's result read back (`fit --aggregates`): its rows ([`StatRow`]) turned
//! into [`Aggregates`], every row checked as the file reader checks a log's rows (fields,
//! sums, parts against their wholes), so impossible statistics are refused naming the row and
//! field instead of becoming a scenario.

use std::path::Path;

use super::aggregates::{Aggregates, MAX_TIME_S, SizeCount, Spans, Sum, thresholds};
#[cfg(feature = "tables")]
use super::read::{csv_message, kind, polars_read};
use super::{FitError, file_err};
#[cfg(feature = "tables")]
use polars::prelude::DataType;

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

/// The rows of a warehouse query's result (`fit --emit-sql`), from CSV (`psql --csv`, every
/// warehouse's download) or Parquet. Numbers may come as text or as any numeric type.
#[cfg(feature = "tables")]
pub(super) fn read_stat_rows(path: &Path) -> Result<Vec<StatRow>, FitError> {
    use polars_io::prelude::{CsvReadOptions, ParquetReader, SerReader as _};
    crate::input::check_regular(path).map_err(|e| file_err(path, e.to_string()))?;
    let df = match kind(path)? {
        "csv" => polars_read(path, "CSV", || {
            CsvReadOptions::default()
                .with_has_header(true)
                .with_infer_schema_length(Some(0))
                .try_into_reader_with_file_path(Some(path.to_path_buf()))
                .and_then(|r| r.finish())
                .map_err(|e| file_err(path, csv_message(&e.to_string())))
        })?,
        "parquet" => {
            let file = std::fs::File::open(path).map_err(|e| file_err(path, e.to_string()))?;
            polars_read(path, "Parquet", || {
                ParquetReader::new(file)
                    .finish()
                    .map_err(|e| file_err(path, e.to_string()))
            })?
        }
        _ => {
            return Err(file_err(
                path,
                "aggregates are read from .csv or .parquet (the query's result)",
            ));
        }
    };
    let text = |name: &str| -> Result<Vec<Option<String>>, FitError> {
        let col = df.column(name).map_err(|_| {
            file_err(
                path,
                format!("no column `{name}`; the query's result has stat, label, at, n, w, w2"),
            )
        })?;
        let s = col
            .as_materialized_series()
            .cast(&DataType::String)
            .map_err(|e| file_err(path, e.to_string()))?;
        Ok(s.str()
            .map_err(|e| file_err(path, e.to_string()))?
            .iter()
            .map(|v| v.map(str::to_string))
            .collect())
    };
    let number = |name: &str| -> Result<Vec<Option<f64>>, FitError> {
        text(name)?
            .into_iter()
            .enumerate()
            .map(|(i, v)| match v.as_deref().map(str::trim) {
                None | Some("") => Ok(None),
                Some(t) => t.parse::<f64>().map(Some).map_err(|_| {
                    file_err(path, format!("row {}: {name} {t:?} is not a number", i + 1))
                }),
            })
            .collect()
    };
    let (stat, label) = (text("stat")?, text("label")?);
    let (at, n, w, w2) = (number("at")?, number("n")?, number("w")?, number("w2")?);
    // A damaged file can give columns of different lengths (one read as empty).
    let rows = df.height();
    if [
        stat.len(),
        label.len(),
        at.len(),
        n.len(),
        w.len(),
        w2.len(),
    ]
    .iter()
    .any(|&len| len != rows)
    {
        return Err(file_err(
            path,
            format!(
                "columns of different lengths where the file says {rows} rows: the file is damaged"
            ),
        ));
    }
    Ok((0..rows)
        .map(|i| StatRow {
            stat: stat[i].clone().unwrap_or_default(),
            label: label[i].clone(),
            at: at[i],
            n: n[i],
            w: w[i],
            w2: w2[i],
        })
        .collect())
}

#[cfg(not(feature = "tables"))]
pub(super) fn read_stat_rows(path: &Path) -> Result<Vec<StatRow>, FitError> {
    Err(file_err(
        path,
        "this build has no CSV or Parquet reader (the `tables` feature is off)",
    ))
}
