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
use crate::model::{self, FormulaError, ModelParams, SWEEP_RETENTIONS_S};
use crate::traffic::{RetryDelay, RetryEvidence};

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
    /// One copy of the store at the point bytes per record, bytes.
    pub store_bytes: f64,
    /// One copy at the ends of the bytes-per-record interval, when one was given.
    pub store_bytes_ci95: Option<[f64; 2]>,
    /// Every copy together (`replicas` × one copy), bytes.
    pub store_bytes_all_replicas: f64,
    pub late_after_purge_per_day: f64,
    pub duplicate_labels_per_day: f64,
    pub storage_cost_per_day: f64,
    pub total_cost_per_day: f64,
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
    /// The shortest retention meeting every target, if one does.
    pub recommended: Option<Choice>,
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

/// What [`decide`] is given besides the model's inputs.
#[derive(Debug, Clone, PartialEq)]
pub struct DecisionInputs {
    pub targets: Targets,
    /// 95 % interval of a measured bytes per record; the store budget is checked at its top.
    pub bytes_per_record_ci95: Option<[f64; 2]>,
    pub evidence: Option<RetryEvidence>,
    /// Count on the carrier's window (the model's "real duplicates"): a late retry the carrier
    /// still recognises buys nothing. `false` asks for a retention that holds on our keys alone.
    pub count_carrier_window: bool,
}

impl Default for DecisionInputs {
    fn default() -> Self {
        DecisionInputs {
            targets: Targets::default(),
            bytes_per_record_ci95: None,
            evidence: None,
            count_carrier_window: true,
        }
    }
}

/// The retentions tried: the sweep's (what people configure), the current one and the horizon,
/// never beyond the horizon (past it a longer retention only adds storage).
fn candidates_s(params: &ModelParams, horizon_s: f64) -> Vec<f64> {
    let mut out: Vec<f64> = SWEEP_RETENTIONS_S.to_vec();
    out.push(params.retention_s);
    out.push(horizon_s);
    out.retain(|r| r.is_finite() && *r > 0.0 && *r <= horizon_s);
    out.sort_by(f64::total_cmp);
    out.dedup();
    out
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
    let at = |bytes_per_record: f64| {
        model::figures(
            &ModelParams {
                retention_s,
                bytes_per_record,
                carrier_window_s,
                ..*params
            },
            dist,
        )
    };
    let v = at(params.bytes_per_record)?;
    let (store_bytes_ci95, high) = match inputs.bytes_per_record_ci95 {
        Some([low, high]) => {
            let lo = at(low)?;
            let hi = at(high)?;
            (Some([lo.store_bytes, hi.store_bytes]), Some(hi))
        }
        None => (None, None),
    };
    // Budgets are checked at the top of the interval: a recommendation must hold for the
    // record size the measurement cannot rule out.
    let worst = high.as_ref().unwrap_or(&v);
    let t = &inputs.targets;
    Ok(Choice {
        retention_s,
        retention: human_duration(retention_s),
        store_bytes: v.store_bytes,
        store_bytes_ci95,
        store_bytes_all_replicas: v.store_bytes * params.replicas,
        late_after_purge_per_day: v.late_after_purge_per_day,
        duplicate_labels_per_day: v.duplicate_labels_per_day,
        storage_cost_per_day: v.storage_cost_per_day,
        total_cost_per_day: v.total_cost_per_day,
        meets_duplicates: v.duplicate_labels_per_day <= t.max_duplicates_per_day,
        meets_store: t
            .max_store_gb
            .is_none_or(|gb| worst.store_bytes <= gb * 1e9),
        meets_cost: t
            .max_cost_per_day
            .is_none_or(|usd| worst.total_cost_per_day <= usd),
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
    let candidates = candidates_s(params, horizon_s)
        .into_iter()
        .map(|r| choice(params, dist, inputs, r))
        .collect::<Result<Vec<_>, _>>()?;
    let recommended = candidates.iter().find(|c| c.meets_all()).cloned();
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
        closest,
        cheapest,
        cheapest_is_assumption,
        evidence: inputs.evidence.clone(),
        count_carrier_window: inputs.count_carrier_window,
        notes: Vec::new(),
        candidates,
    };
    rec.notes = notes(&rec, params);
    Ok(rec)
}

/// `17.7 GB (2 copies: 35.4 GB)`, with the interval when there is one.
pub fn store_text(c: &Choice, replicas: f64) -> String {
    let interval = match c.store_bytes_ci95 {
        Some([lo, hi]) => format!(" [{} – {}]", human_bytes(lo), human_bytes(hi)),
        None => String::new(),
    };
    format!(
        "{}{interval} per copy, {} for {} copies",
        human_bytes(c.store_bytes),
        human_bytes(c.store_bytes_all_replicas),
        replicas
    )
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
                "Recommended retention: {}, the shortest that meets {}: {} real duplicates, a store of {}, {}/day.",
                c.retention,
                targets_text(&rec.targets),
                per_day(c.duplicate_labels_per_day),
                store_text(c, replicas),
                usd(c.total_cost_per_day),
            ));
            if c.relies_on_carrier_window {
                out.push(format!(
                    "It is shorter than the carrier's {} window: the {} late retries after our purge are caught by the carrier's derived key, not by ours. If the carrier forgets sooner, they become duplicates (--without-carrier-window, or without_carrier_window = true under a scenario's [budgets], decides on our keys alone).",
                    human_duration(params.carrier_window_s),
                    per_day(c.late_after_purge_per_day),
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
            per_day(c.duplicate_labels_per_day),
            store_text(c, replicas),
            usd(c.total_cost_per_day),
        )),
        (None, None) => out.push(format!(
            "No retention up to the horizon meets {}, and none fits the store and cost budgets at all.",
            targets_text(&rec.targets)
        )),
    }
    let o = &rec.cheapest;
    out.push(format!(
        "Cheapest retention: {}, {}/day ({} real duplicates, a store of {}).",
        o.retention,
        usd(o.total_cost_per_day),
        per_day(o.duplicate_labels_per_day),
        store_text(o, replicas),
    ));
    if rec.cheapest_is_assumption {
        let mut s = format!(
            "That is the retry distribution's horizon ({}), an assumption, not a measurement: no retry is assumed later, so keeping keys longer only adds storage. Move it with --retry-horizon or a measured --retry-cdf.",
            human_duration(rec.horizon_s)
        );
        if let Some(e) = &rec.evidence {
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
        let p = ModelParams {
            retention_s: 5_000.0,
            ..ModelParams::default()
        };
        let c = candidates_s(&p, 10.0 * 86_400.0);
        assert_eq!(c.first(), Some(&3_600.0));
        assert_eq!(c.last(), Some(&(10.0 * 86_400.0)));
        assert!(c.contains(&5_000.0));
        assert!(c.windows(2).all(|w| w[0] < w[1]));
    }
}
