//! The retention decision: the shortest retention that keeps real duplicate labels under a
//! target and fits the budgets, with the cheapest retention beside it.
//!
//! "Cheapest" alone is not a decision: a duplicate label costs dollars and a GB-month cents, so
//! the cheapest retention is almost always the last delay the retry distribution allows, and
//! that horizon is an assumption (`--retry-horizon`), not a measurement. The question an
//! architect asks is "how short can I keep keys and still stay under N duplicates a day, inside
//! the store I can afford?", so that is what [`decide`] answers first.
//!
//! Pure: no IO, no sampling. Every figure comes from [`model::figures`], so the decision uses
//! the same formulas as `estimate`, the simulator's model column and the report.

use serde::{Deserialize, Serialize};

use crate::format::{count_per_day as per_day, human_bytes, human_count, human_duration, usd};
use crate::model::{self, FormulaError, ModelParams};
use crate::stats::Interval;
use crate::sweeper::SweeperPlan;
use crate::traffic::{Arrivals, RetryDelay, RetryEvidence};

/// Default target: fewer than one real duplicate label a month (1/30 per day). A duplicate is
/// a customer-visible double charge; a risk target people can state ("less than once a month")
/// is easier to agree on than a price trade-off.
pub const DEFAULT_MAX_DUPLICATES_PER_DAY: f64 = 1.0 / 30.0;

/// A duplicates target as people say it: `1/month` (30 days), `2/week`, `0.5/day`, `3/year`
/// (365 days) or a bare number per day.
pub fn parse_per_day(text: &str) -> Result<f64, String> {
    let t = text.trim();
    let (count, days) = match t.split_once('/') {
        None => (t, 1.0),
        Some((count, per)) => {
            let days = match per.trim() {
                "day" | "d" => 1.0,
                "week" | "w" => 7.0,
                "month" => 30.0,
                "year" | "y" => 365.0,
                other => {
                    return Err(format!(
                        "`{other}` in `{text}` is not a period; write day, week, month or year"
                    ));
                }
            };
            (count, days)
        }
    };
    let n: f64 = count
        .trim()
        .parse()
        .ok()
        .filter(|v: &f64| v.is_finite() && *v >= 0.0)
        .ok_or_else(|| {
            format!("`{text}` is not a rate; write a count per period like 1/month or 0.5/day")
        })?;
    Ok(n / days)
}

/// What the retention must meet.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Targets {
    /// Expected real duplicate labels per day, at most.
    pub max_duplicates_per_day: f64,
    /// Size of one copy of the store, decimal GB, at most (every replica holds all of it).
    pub max_store_gb: Option<f64>,
    /// Storage for every copy plus duplicate labels, USD per day, at most.
    pub max_cost_per_day: Option<f64>,
}

impl Default for Targets {
    fn default() -> Self {
        Targets {
            max_duplicates_per_day: DEFAULT_MAX_DUPLICATES_PER_DAY,
            max_store_gb: None,
            max_cost_per_day: None,
        }
    }
}

/// One candidate retention with what it costs.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Choice {
    pub retention_s: f64,
    pub retention: String,
    /// Records in one copy of the store on average: the replay's count where it counted them,
    /// else the model's at the record's lifetime.
    pub store_records: f64,
    /// One copy of the store at the point bytes per record, bytes: its average over the day,
    /// with records living their retention plus the sweeper's lag. Storage is billed on this.
    pub store_bytes: f64,
    /// One copy at its peak over the day (under a daily rush, the rush's end), bytes: what the
    /// store budget is checked on. Equal to `store_bytes` at a constant rate.
    pub peak_store_bytes: f64,
    /// One copy at the ends of its interval (records and bytes per record), when either has one.
    pub store_bytes_ci95: Option<[f64; 2]>,
    /// Every copy together (`replicas` × one copy), bytes.
    pub store_bytes_all_replicas: f64,
    /// Retries arriving after our purge, a day: the replay's count where it counted them, else
    /// the model's.
    pub late_after_purge_per_day: f64,
    /// The model's share of those after the carrier's window too: its derived key no longer
    /// catches them, and those that had already run become duplicates.
    pub late_after_both_windows_per_day: f64,
    /// What the duplicates target is checked on and priced at: what the replay counted at this
    /// retention when it saw any; when it saw none, the model's figure up to the replay's
    /// one-sided bound; the model's figure where nothing was counted.
    pub duplicate_labels_per_day: f64,
    /// The run's measurement at this retention, when there is one.
    pub duplicates_measured: Option<Interval>,
    /// The model's figure, beside the measurement.
    pub model_duplicate_labels_per_day: f64,
    pub storage_cost_per_day: f64,
    pub total_cost_per_day: f64,
    /// The daily cost at the ends of the store's and the duplicates' intervals, when either has
    /// one.
    pub total_cost_per_day_ci95: Option<[f64; 2]>,
    /// What the cost budget is checked on: the cost at the top of the store's interval.
    pub cost_checked_per_day: f64,
    pub meets_duplicates: bool,
    pub meets_store: bool,
    pub meets_cost: bool,
    /// Shorter than the carrier's window: late retries after our purge are caught only by the
    /// carrier remembering its derived key.
    pub relies_on_carrier_window: bool,
}

impl Choice {
    pub fn meets_all(&self) -> bool {
        self.meets_duplicates && self.meets_store && self.meets_cost
    }

    /// What the store budget is checked on: one copy at the top of its interval, at the
    /// day's peak.
    pub fn store_checked_bytes(&self) -> f64 {
        let top = self
            .store_bytes_ci95
            .map_or(self.store_bytes, |[_, high]| high);
        if self.store_bytes > 0.0 {
            top * self.peak_store_bytes / self.store_bytes
        } else {
            top
        }
    }
}

/// The decision, as the estimate, the simulator and the report show it. Field names are part
/// of the estimate's JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Recommendation {
    pub targets: Targets,
    pub replicas: f64,
    pub bytes_per_record: f64,
    pub bytes_per_record_ci95: Option<[f64; 2]>,
    /// The retry distribution's horizon: no retry is assumed later than this.
    pub horizon_s: f64,
    /// The cheapest retention meeting every target, if one does; a shorter one whose daily
    /// cost the intervals cannot tell from it wins the tie.
    pub recommended: Option<Choice>,
    /// The cheapest retention meeting every target, when a shorter one won the tie.
    pub tied_with: Option<Choice>,
    /// When none does: the retention with the fewest duplicates inside the store and cost
    /// budgets (if any fits them), to show how far the duplicates target is.
    pub closest: Option<Choice>,
    /// The cheapest retention (storage plus duplicate labels), the shorter one on a tie.
    pub cheapest: Choice,
    /// The cheapest retention is the horizon, so it rests on the assumed horizon, not on data.
    pub cheapest_is_assumption: bool,
    pub evidence: Option<RetryEvidence>,
    /// Whether duplicates count on the carrier's window (see [`DecisionInputs`]).
    pub count_carrier_window: bool,
    /// The decision in sentences, for the table output and the report.
    pub notes: Vec<String>,
    /// Every retention tried, shortest first.
    pub candidates: Vec<Choice>,
}

/// First-attempt timeouts a run measured, beside the model's figure at the asked share.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct MeasuredTimeouts {
    pub per_day: Interval,
    pub modelled_per_day: f64,
}

/// What a replay counted at one retention: `sim::replay::candidates` from its log of requests,
/// or the run's own figures at the retention it replayed.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Measured {
    pub retention_s: f64,
    /// Real duplicate labels a day, counted on the carrier's window as the simulated carrier
    /// keeps it. An estimate of 0 means none was seen: the interval is then a one-sided bound.
    pub duplicates_per_day: Interval,
    /// Records in one copy of the store, on average over the day.
    pub records: Interval,
    /// Retries that arrived after our purge, a day.
    pub late_after_purge_per_day: Interval,
}

/// What [`decide`] is given besides the model's inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionInputs {
    pub targets: Targets,
    /// 95 % interval of a measured bytes per record; the store and cost budgets are checked at
    /// its top.
    pub bytes_per_record_ci95: Option<[f64; 2]>,
    pub evidence: Option<RetryEvidence>,
    /// Count on the carrier's window (the model's "real duplicates"): a late retry the carrier
    /// still recognises buys nothing. `false` asks for a retention that holds on our keys alone.
    pub count_carrier_window: bool,
    /// What a simulation counted at each retention it weighs: there the counts decide (the
    /// model cannot see all a replay sees: retries that time out again, leases, crashes,
    /// 409 re-sends) and the model's figure stays beside them.
    pub measured: Vec<Measured>,
    /// When it rules out the model's timed-out calls, the measured share replaces the asked
    /// one: a slow carrier times out far more calls than `--timeout-fraction` says, and the
    /// decision must describe the system the run simulated. Inside the interval the asked share
    /// stands, the same figure without the sampling noise.
    pub measured_timeouts: Option<MeasuredTimeouts>,
    /// The store's sweeper and its period: at each retention weighed, records live their
    /// retention plus the sweeper's mean lag ([`crate::sweeper::Sweeper::mean_lag_s`]). `None`: the model's
    /// store, records gone at their retention.
    pub sweeper: Option<(SweeperPlan, f64)>,
    /// The arrival process, when it is not constant at the model's rate: the store budget is
    /// checked at the most records any retention-long window holds.
    pub arrivals: Option<Arrivals>,
}

impl Default for DecisionInputs {
    fn default() -> Self {
        DecisionInputs {
            targets: Targets::default(),
            bytes_per_record_ci95: None,
            evidence: None,
            count_carrier_window: true,
            measured: Vec::new(),
            measured_timeouts: None,
            sweeper: None,
            arrivals: None,
        }
    }
}

/// Storage plus `duplicates` a day priced at the label price, by the model's own formulas.
fn total_cost(params: &ModelParams, storage_cost_per_day: f64, duplicates: f64) -> f64 {
    let cost = model::formula(
        "duplicate_cost_per_day",
        &[
            ("duplicate_labels_per_day", duplicates),
            ("label_price_usd", params.label_price_usd),
        ],
    )
    .and_then(|d| {
        model::formula(
            "total_cost_per_day",
            &[
                ("storage_cost_per_day", storage_cost_per_day),
                ("duplicate_cost_per_day", d),
            ],
        )
    });
    // The formula table is static and tested: failing it is a bug, as in `model::estimate`.
    cost.unwrap_or_else(|e| panic!("the formula table is broken: {e}"))
}

/// Storage for every copy of a store of `store_bytes`, by the model's formula.
fn storage_cost(params: &ModelParams, store_bytes: f64) -> f64 {
    model::formula(
        "storage_cost_per_day",
        &[
            ("store_bytes", store_bytes),
            ("replicas", params.replicas),
            ("storage_usd_per_gb_month", params.storage_usd_per_gb_month),
        ],
    )
    // The formula table is static and tested: failing it is a bug, as in `model::estimate`.
    .unwrap_or_else(|e| panic!("the formula table is broken: {e}"))
}

/// A point estimate with no interval of its own (the model's figures).
fn exact(v: f64) -> Interval {
    Interval {
        estimate: v,
        ci95_low: v,
        ci95_high: v,
    }
}

fn choice(
    params: &ModelParams,
    dist: &RetryDelay,
    inputs: &DecisionInputs,
    retention_s: f64,
) -> Result<Choice, FormulaError> {
    let carrier_window_s = if inputs.count_carrier_window {
        params.carrier_window_s
    } else {
        0.0
    };
    let life_s = retention_s
        + inputs.sweeper.map_or(0.0, |(plan, period_s)| {
            plan.at(retention_s).mean_lag_s(period_s)
        });
    let p = ModelParams {
        retention_s,
        carrier_window_s,
        ..*params
    };
    let v = model::figures(&p, dist)?;
    // The model's records at the record's real lifetime, through the store formula at one byte
    // a record; duplicates stay at the retention.
    let model_records = model::figures(
        &ModelParams {
            retention_s: life_s,
            bytes_per_record: 1.0,
            ..p
        },
        dist,
    )?
    .store_bytes;
    // Records held at the day's peak over its mean: a store budget is a peak, not a mean.
    let peak_records = match &inputs.arrivals {
        Some(a) => a.max_arrivals_in(life_s),
        None => params.rate_per_s * life_s,
    };
    let peak_ratio = if model_records > 0.0 {
        (peak_records / model_records).max(1.0)
    } else {
        1.0
    };
    let measured = inputs
        .measured
        .iter()
        .filter(|_| inputs.count_carrier_window)
        .find(|m| (m.retention_s - retention_s).abs() < 0.5)
        .copied();
    let records = measured.map_or(exact(model_records), |m| m.records);
    // Where the replay saw a duplicate its count decides; where it saw none it only bounds
    // them, and the model's finer figure stands up to that bound.
    let duplicates = match measured {
        Some(m) if m.duplicates_per_day.estimate > 0.0 => m.duplicates_per_day,
        Some(m) => Interval {
            estimate: v
                .duplicate_labels_per_day
                .min(m.duplicates_per_day.ci95_high),
            ..m.duplicates_per_day
        },
        None => exact(v.duplicate_labels_per_day),
    };
    let bpr = params.bytes_per_record;
    let [bpr_low, bpr_high] = inputs.bytes_per_record_ci95.unwrap_or([bpr, bpr]);
    let store_bytes = records.estimate * bpr;
    // Records and bytes per record err independently: their relative errors add in
    // quadrature, as the run's own store figure has them (`sim::replay::store_size`), so the
    // decision and the run's table give one interval.
    let rel = |v: f64, est: f64| {
        if est > 0.0 {
            (v / est - 1.0).abs()
        } else {
            0.0
        }
    };
    let store_low =
        store_bytes * (1.0 - rel(records.ci95_low, records.estimate).hypot(rel(bpr_low, bpr)));
    let store_high =
        store_bytes * (1.0 + rel(records.ci95_high, records.estimate).hypot(rel(bpr_high, bpr)));
    let store_low = store_low.max(0.0);
    let storage = storage_cost(params, store_bytes);
    let total = total_cost(params, storage, duplicates.estimate);
    let total_low = total_cost(params, storage_cost(params, store_low), duplicates.ci95_low);
    let total_high = total_cost(
        params,
        storage_cost(params, store_high),
        duplicates.ci95_high,
    );
    // One rule for every budget that depends on the store's size (the store, and the cost
    // through storage): it is checked at the top of the store's interval, so a recommended
    // retention holds for any record size and count the measurement cannot rule out, as a
    // budget verdict of "holds" does. Duplicates are checked at their estimate.
    let worst_total = total_cost(
        params,
        storage_cost(params, store_high),
        duplicates.estimate,
    );
    let with_interval = inputs.bytes_per_record_ci95.is_some() || measured.is_some();
    let t = &inputs.targets;
    Ok(Choice {
        retention_s,
        retention: human_duration(retention_s),
        store_records: records.estimate,
        store_bytes,
        peak_store_bytes: store_bytes * peak_ratio,
        store_bytes_ci95: with_interval.then_some([store_low, store_high]),
        store_bytes_all_replicas: store_bytes * params.replicas,
        late_after_purge_per_day: measured.map_or(v.late_after_purge_per_day, |m| {
            m.late_after_purge_per_day.estimate
        }),
        late_after_both_windows_per_day: v.late_after_both_windows_per_day,
        duplicate_labels_per_day: duplicates.estimate,
        duplicates_measured: measured.map(|m| m.duplicates_per_day),
        model_duplicate_labels_per_day: v.duplicate_labels_per_day,
        storage_cost_per_day: storage,
        total_cost_per_day: total,
        total_cost_per_day_ci95: with_interval.then_some([total_low, total_high]),
        cost_checked_per_day: worst_total,
        meets_duplicates: duplicates.estimate <= t.max_duplicates_per_day,
        meets_store: t
            .max_store_gb
            .is_none_or(|gb| store_high * peak_ratio <= gb * 1e9),
        meets_cost: t.max_cost_per_day.is_none_or(|usd| worst_total <= usd),
        relies_on_carrier_window: retention_s < carrier_window_s,
    })
}

/// Decides the retention for `params` (its `retention_s` is only one more candidate) under
/// `dist`. Fails only on a broken formula table, which the model's tests rule out.
pub fn decide(
    params: &ModelParams,
    dist: &RetryDelay,
    inputs: &DecisionInputs,
) -> Result<Recommendation, FormulaError> {
    let horizon_s = dist.max_horizon_s();
    let (measured_params, timeouts_note) = measured_timeout_share(params, inputs);
    let params = &measured_params;
    let candidates = model::candidate_retentions_s(params.retention_s, dist)
        .into_iter()
        .map(|r| choice(params, dist, inputs, r))
        .collect::<Result<Vec<_>, _>>()?;
    let (recommended, tied_with) = cheapest_feasible(&candidates);
    let closest = match recommended {
        Some(_) => None,
        None => candidates
            .iter()
            .filter(|c| c.meets_store && c.meets_cost)
            // Fewest duplicates; among equals the shortest (candidates are sorted).
            .min_by(|a, b| {
                a.duplicate_labels_per_day
                    .total_cmp(&b.duplicate_labels_per_day)
            })
            .cloned(),
    };
    // `min_by` keeps the first of equal minima: a tie goes to the shorter retention.
    let cheapest = candidates
        .iter()
        .min_by(|a, b| a.total_cost_per_day.total_cmp(&b.total_cost_per_day))
        .cloned()
        .expect("the horizon is always a candidate");
    let cheapest_is_assumption = cheapest.retention_s >= horizon_s;
    let mut rec = Recommendation {
        targets: inputs.targets,
        replicas: params.replicas,
        bytes_per_record: params.bytes_per_record,
        bytes_per_record_ci95: inputs.bytes_per_record_ci95,
        horizon_s,
        recommended,
        tied_with,
        closest,
        cheapest,
        cheapest_is_assumption,
        evidence: inputs.evidence.clone(),
        count_carrier_window: inputs.count_carrier_window,
        notes: Vec::new(),
        candidates,
    };
    rec.notes = notes(&rec, params);
    rec.notes.extend(timeouts_note);
    rec.notes.extend(model_disagreements(&rec));
    Ok(rec)
}

/// The cheapest candidate meeting every target, or the shortest one whose cost interval
/// reaches it (the intervals cannot tell them apart, and a shorter retention is less to keep),
/// with the cheapest when the tie went to a shorter one.
fn cheapest_feasible(candidates: &[Choice]) -> (Option<Choice>, Option<Choice>) {
    let feasible = || candidates.iter().filter(|c| c.meets_all());
    // `min_by` keeps the first of equal minima: an exact tie goes to the shorter retention.
    let Some(best) =
        feasible().min_by(|a, b| a.total_cost_per_day.total_cmp(&b.total_cost_per_day))
    else {
        return (None, None);
    };
    let [_, best_high] = best
        .total_cost_per_day_ci95
        .unwrap_or([best.total_cost_per_day; 2]);
    let shortest_tied = feasible()
        .take_while(|c| c.retention_s < best.retention_s)
        .find(|c| {
            c.total_cost_per_day_ci95
                .unwrap_or([c.total_cost_per_day; 2])[0]
                <= best_high
        });
    match shortest_tied {
        Some(c) => (Some(c.clone()), Some(best.clone())),
        None => (Some(best.clone()), None),
    }
}

/// `params` at the measured timeout share when the measurement rules out the asked one (see
/// [`DecisionInputs::measured_timeouts`]), with the sentence that says so.
fn measured_timeout_share(
    params: &ModelParams,
    inputs: &DecisionInputs,
) -> (ModelParams, Option<String>) {
    let Some(m) = inputs.measured_timeouts else {
        return (*params, None);
    };
    if m.per_day.covers(m.modelled_per_day) || m.modelled_per_day <= 0.0 {
        return (*params, None);
    }
    let share = (params.timeout_fraction * m.per_day.estimate / m.modelled_per_day).min(1.0);
    let note = format!(
        "The run measured {} timed-out calls (95 % {}) against the model's {} at a timeout share of {}: the decision uses the measured share, {}.",
        per_day(m.per_day.estimate),
        crate::format::interval(m.per_day.ci95_low, m.per_day.ci95_high, per_day),
        per_day(m.modelled_per_day),
        crate::format::percent(params.timeout_fraction),
        crate::format::percent(share),
    );
    (
        ModelParams {
            timeout_fraction: share,
            ..*params
        },
        Some(note),
    )
}

/// Where a replay's duplicates rule out the model's figure (at the measured timeout share),
/// said once: the counts decided there, and the reader should know how far the model is off
/// for this system (it has no term for crashes, chained retries or 409 re-sends).
fn model_disagreements(rec: &Recommendation) -> Vec<String> {
    let off: Vec<(&Choice, Interval)> = rec
        .candidates
        .iter()
        .filter_map(|c| {
            let m = c.duplicates_measured?;
            (!m.covers(c.model_duplicate_labels_per_day)).then_some((c, m))
        })
        .collect();
    // The one the decision leans on most: the recommended retention if the model is off
    // there, else the farthest off.
    let shown = off
        .iter()
        .find(|(c, _)| {
            rec.recommended
                .as_ref()
                .is_some_and(|r| r.retention_s == c.retention_s)
        })
        .or_else(|| {
            off.iter().max_by(|(a, _), (b, _)| {
                let gap = |c: &Choice| {
                    (c.duplicate_labels_per_day - c.model_duplicate_labels_per_day).abs()
                };
                gap(a).total_cmp(&gap(b))
            })
        });
    let Some((c, m)) = shown else {
        return Vec::new();
    };
    let (lo, hi) = (m.ci95_low, m.ci95_high);
    let measured = if m.estimate > 0.0 {
        format!(
            "{} (95 % {})",
            per_day(m.estimate),
            crate::format::interval(lo, hi, per_day)
        )
    } else {
        format!("none (at most {})", per_day(hi))
    };
    vec![format!(
        "The replay's duplicates rule out the model's at {} of the {} retentions weighed (at {}: {} where the model gives {}); the decision goes by the replay's counts, the model's figures are shown beside them.",
        off.len(),
        rec.candidates.len(),
        c.retention,
        measured,
        per_day(c.model_duplicate_labels_per_day),
    )]
}

/// `17.7 GB (2 copies: 35.4 GB)`, with the interval when there is one.
pub fn store_text(c: &Choice, replicas: f64) -> String {
    let interval = match c.store_bytes_ci95 {
        Some([lo, hi]) => format!(" [{} – {}]", human_bytes(lo), human_bytes(hi)),
        None => String::new(),
    };
    // Under a daily profile the store peaks above its day's average: the budget's figure.
    let peak = if c.peak_store_bytes > c.store_bytes * 1.005 {
        format!(", peaking at {}", human_bytes(c.peak_store_bytes))
    } else {
        String::new()
    };
    format!(
        "{}{interval} per copy{peak}, {} for {}",
        human_bytes(c.store_bytes),
        human_bytes(c.store_bytes_all_replicas),
        crate::format::plural(replicas as u64, "copy", "copies")
    )
}

/// A retention's daily duplicates as the decision weighs them, with what the replay saw when
/// it saw none: `0.0123/day (none seen; at most 2.6/day)`.
fn duplicates_text(c: &Choice) -> String {
    match c.duplicates_measured {
        Some(m) if m.estimate == 0.0 => format!(
            "{} (none seen; at most {})",
            per_day(c.duplicate_labels_per_day),
            per_day(m.ci95_high)
        ),
        _ => per_day(c.duplicate_labels_per_day),
    }
}

/// `$3.52` with its interval when it has one: `$3.52 [$3.41 – $3.65]`.
pub fn cost_text(c: &Choice) -> String {
    match c.total_cost_per_day_ci95 {
        Some([lo, hi]) if hi > lo => {
            format!("{} [{} – {}]", usd(c.total_cost_per_day), usd(lo), usd(hi))
        }
        _ => usd(c.total_cost_per_day),
    }
}

/// When the cheapest retention breaks a target, what moving that target would save: the
/// figure the target would have to allow, and the daily cost it would cut.
fn what_a_budget_costs(rec: &Recommendation) -> Option<String> {
    let o = &rec.cheapest;
    if o.meets_all() {
        return None;
    }
    let t = &rec.targets;
    let mut needs = Vec::new();
    if !o.meets_duplicates {
        needs.push(format!(
            "a duplicates target of {}",
            per_day(o.duplicate_labels_per_day)
        ));
    }
    if !o.meets_store {
        needs.push(format!(
            "a store budget of {} (now {})",
            human_bytes(o.store_checked_bytes()),
            human_bytes(t.max_store_gb.unwrap_or(0.0) * 1e9),
        ));
    }
    if !o.meets_cost {
        needs.push(format!(
            "a cost budget of {}/day (now {}/day)",
            usd(o.cost_checked_per_day),
            usd(t.max_cost_per_day.unwrap_or(0.0))
        ));
    }
    Some(match &rec.recommended {
        Some(r) => format!(
            "{} would cut {}/day to {}/day ({} instead of {}).",
            capitalised(&needs.join(" and ")),
            usd(r.total_cost_per_day),
            usd(o.total_cost_per_day),
            o.retention,
            r.retention,
        ),
        None => format!(
            "{} would let {} qualify, at {}/day.",
            capitalised(&needs.join(" and ")),
            o.retention,
            usd(o.total_cost_per_day),
        ),
    })
}

fn capitalised(text: &str) -> String {
    let mut c = text.chars();
    c.next()
        .map(|f| f.to_uppercase().chain(c).collect())
        .unwrap_or_default()
}

fn targets_text(t: &Targets) -> String {
    let mut parts = vec![format!(
        "at most {} real duplicates",
        per_day(t.max_duplicates_per_day)
    )];
    if let Some(gb) = t.max_store_gb {
        parts.push(format!(
            "a store of at most {} per copy",
            human_bytes(gb * 1e9)
        ));
    }
    if let Some(c) = t.max_cost_per_day {
        parts.push(format!("at most {}/day in all", usd(c)));
    }
    parts.join(", ")
}

/// What a retention shorter than the carrier's window leans on: the late retries after our
/// purge that still come within the carrier's window are caught by its derived key; those
/// after it are not, and the ones that had already run are the duplicates counted.
fn carrier_window_note(c: &Choice, carrier_window_s: f64) -> String {
    // Counted by the replay (with its duplicates): the split by the carrier's window is then
    // not known, and only the model's is.
    if c.duplicates_measured.is_some() {
        return format!(
            "It is shorter than the carrier's {} window: the replay counted {} late retries after our purge; the carrier's derived key caught those within its window, and the {} real duplicates above are those it did not. If the carrier forgets sooner, more become duplicates (--without-carrier-window, or without_carrier_window = true under a scenario's [budgets], decides on our keys alone).",
            human_duration(carrier_window_s),
            per_day(c.late_after_purge_per_day),
            per_day(c.duplicate_labels_per_day),
        );
    }
    let caught = (c.late_after_purge_per_day - c.late_after_both_windows_per_day).max(0.0);
    format!(
        "It is shorter than the carrier's {} window: of the {} late retries after our purge, {} come within the carrier's window and are caught by its derived key, not by ours; {} come after it too, and those that had already run are the {} real duplicates above. If the carrier forgets sooner, more become duplicates (--without-carrier-window, or without_carrier_window = true under a scenario's [budgets], decides on our keys alone).",
        human_duration(carrier_window_s),
        per_day(c.late_after_purge_per_day),
        per_day(caught),
        per_day(c.late_after_both_windows_per_day),
        per_day(c.duplicate_labels_per_day),
    )
}

/// Why no retention is recommended: the first one under the duplicates target breaks a
/// budget, or none is under it at all.
fn why_none(rec: &Recommendation) -> String {
    let t = &rec.targets;
    let Some(c) = rec.candidates.iter().find(|c| c.meets_duplicates) else {
        let last = rec.candidates.last().unwrap_or(&rec.cheapest);
        return format!(
            "Why: even at {}, the longest retention tried, {} real duplicates remain, above the target of {}.",
            last.retention,
            per_day(last.duplicate_labels_per_day),
            per_day(t.max_duplicates_per_day),
        );
    };
    let mut broken = Vec::new();
    if !c.meets_store {
        let top = c.store_bytes_ci95.map_or(c.store_bytes, |[_, high]| high);
        let peak = c.store_checked_bytes();
        let at_peak = if peak > top * 1.005 {
            " at its peak"
        } else {
            ""
        };
        broken.push(format!(
            "a store of {}{at_peak} against the budget of {}",
            human_bytes(peak.max(top)),
            human_bytes(t.max_store_gb.unwrap_or(0.0) * 1e9),
        ));
    }
    if !c.meets_cost {
        broken.push(format!(
            "{}/day against the budget of {}/day",
            usd(c.cost_checked_per_day),
            usd(t.max_cost_per_day.unwrap_or(0.0)),
        ));
    }
    format!(
        "Why: the shortest retention under the duplicates target is {} ({} real duplicates), and it needs {}.",
        c.retention,
        per_day(c.duplicate_labels_per_day),
        broken.join(" and "),
    )
}

fn notes(rec: &Recommendation, params: &ModelParams) -> Vec<String> {
    let mut out = Vec::new();
    let replicas = rec.replicas;
    if !rec.count_carrier_window {
        out.push(
            "Duplicates are counted on our keys alone: any retry after our purge is assumed to buy a second label.".to_string(),
        );
    }
    match (&rec.recommended, &rec.closest) {
        (Some(c), _) => {
            out.push(format!(
                "Recommended retention: {}, the cheapest that meets {}: {} real duplicates, a store of {}, {}/day.",
                c.retention,
                targets_text(&rec.targets),
                duplicates_text(c),
                store_text(c, replicas),
                cost_text(c),
            ));
            if let Some(t) = &rec.tied_with {
                out.push(format!(
                    "{} costs {}/day, which the intervals cannot tell from {}'s: the tie goes to the shorter retention.",
                    t.retention,
                    cost_text(t),
                    c.retention,
                ));
            }
            if c.relies_on_carrier_window {
                out.push(carrier_window_note(c, params.carrier_window_s));
            }
            if let Some(e) = rec
                .evidence
                .as_ref()
                .filter(|e| e.latest_retry_s > c.retention_s)
            {
                out.push(format!(
                    "The fitted log holds a retry {} after its first request, later than {}: a retry that late finds its key purged, and the carrier's derived key is all that catches it (within its {} window).",
                    crate::format::approx_duration(e.latest_retry_s),
                    c.retention,
                    human_duration(params.carrier_window_s),
                ));
            }
            if c.retention_s >= rec.horizon_s {
                out.push(format!(
                    "It is the distribution's horizon ({}): the target needs every retry the distribution allows, so it rests on the assumed horizon.",
                    human_duration(rec.horizon_s)
                ));
            }
        }
        (None, Some(c)) => out.push(format!(
            "No retention up to the horizon meets {}. Within the budgets the fewest duplicates are at {}: {} real duplicates, a store of {}, {}/day.",
            targets_text(&rec.targets),
            c.retention,
            duplicates_text(c),
            store_text(c, replicas),
            usd(c.total_cost_per_day),
        )),
        (None, None) => out.push(format!(
            "No retention up to the horizon meets {}, and none fits the store and cost budgets at all.",
            targets_text(&rec.targets)
        )),
    }
    if rec.recommended.is_none() {
        out.push(why_none(rec));
    }
    let o = &rec.cheapest;
    out.push(format!(
        "Cheapest retention: {}, {}/day ({} real duplicates, a store of {}).",
        o.retention,
        cost_text(o),
        duplicates_text(o),
        store_text(o, replicas),
    ));
    out.extend(what_a_budget_costs(rec));
    if rec.cheapest_is_assumption {
        // A fitted distribution ends at the latest retry its log holds: data up to there, an
        // assumption only in that a longer log might hold a later one.
        let fitted_end = rec
            .evidence
            .as_ref()
            .filter(|e| rec.horizon_s <= e.latest_retry_s * 1.001);
        let mut s = match fitted_end {
            Some(_) => format!(
                "That is the retry distribution's horizon ({}), the latest retry the fitted log holds: no retry is assumed later, so keeping keys longer only adds storage, though a longer log might hold a later one.",
                human_duration(rec.horizon_s)
            ),
            None => format!(
                "That is the retry distribution's horizon ({}), an assumption, not a measurement: no retry is assumed later, so keeping keys longer only adds storage. Move it with --retry-horizon or a measured --retry-cdf.",
                human_duration(rec.horizon_s)
            ),
        };
        if let Some(e) = rec.evidence.as_ref().filter(|_| fitted_end.is_none()) {
            s.push_str(&format!(
                " The fitted log holds {} retries over {}; the latest came {} after its first request, so beyond {} the tail is not data.",
                human_count(e.retries as f64),
                crate::format::approx_duration(e.log_span_s),
                crate::format::approx_duration(e.latest_retry_s),
                crate::format::approx_duration(e.latest_retry_s),
            ));
        }
        out.push(s);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_read_the_way_people_say_them() {
        assert_eq!(parse_per_day("1/month").unwrap(), 1.0 / 30.0);
        assert_eq!(parse_per_day("14/week").unwrap(), 2.0);
        assert_eq!(parse_per_day("300").unwrap(), 300.0);
        assert!(
            parse_per_day("1/fortnight")
                .unwrap_err()
                .contains("fortnight")
        );
        assert!(parse_per_day("-1").is_err());
    }

    #[test]
    fn candidates_stop_at_the_horizon_and_include_it() {
        let dist = RetryDelay::seed_with(
            crate::traffic::Head::default(),
            crate::traffic::Tail::LogLinear {
                max_horizon_s: 10.0 * 86_400.0,
            },
        )
        .unwrap();
        let c = model::candidate_retentions_s(5_000.0, &dist);
        assert_eq!(c.first(), Some(&3_600.0));
        assert_eq!(c.last(), Some(&(10.0 * 86_400.0)));
        assert!(c.contains(&5_000.0));
        assert!(c.windows(2).all(|w| w[0] < w[1]));
    }
}
