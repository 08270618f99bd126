//! Pooling replicates into what `idemcalc simulate` reports ([`SimReport`]): tallies add up
//! (replicates are independent draws of the same process), the store's size and bytes per
//! record average, with an interval from the spread across replicates when there are several.
//! Measurements only: every figure's model value is left NaN for `run` to fill from its plan.

use super::config::SimConfig;
use super::store_size::{bytes_per_record_figure, records_figure, store_bytes_figure};
use super::tallies::{Figure, SeriesPoint, Tallies, Tally};
use crate::engine::Outcome;
use crate::traffic::Arrivals;
use serde::Serialize;

/// Counts by status and code, as replayed (unweighted) and scaled to full traffic.
#[derive(Debug, Clone, Serialize)]
pub struct OutcomeRow {
    pub status: u16,
    pub outcome: Outcome,
    pub code: Option<String>,
    pub replayed: u64,
    pub per_day: f64,
}

/// The signals the seed's "Detection" column asks for, per day at full traffic.
#[derive(Debug, Clone, Copy, Default, Serialize)]
pub struct Detection {
    /// Parcels the carrier sold more than one label for.
    pub parcels_with_two_labels_per_day: f64,
    /// Requests that claimed a key the sweeper had purged. The engine flags them from a Bloom
    /// filter (the operator's cheap view, with false positives); this figure counts only the
    /// claims whose key is in the exact set of keys purged in the replay.
    pub purged_key_requests_per_day: f64,
    /// What the engine's Bloom filter flagged: the operator's alert, false positives included.
    pub purged_key_bloom_flags_per_day: f64,
    /// Replays handed to a caller other than the one whose request created the record.
    pub cross_caller_replays_per_day: f64,
    /// Carrier invoice lines with no label row behind them.
    pub invoice_lines_without_label_per_day: f64,
    /// Takeovers while the attempt that held the lease was still running.
    pub takeovers_while_running_per_day: f64,
    /// Every takeover of an expired lease (a dead attempt's, a timed-out carrier call's).
    pub takeovers_per_day: f64,
    /// Reconciliation: label rows committed while their key's completion was not (a crash
    /// between the two writes when they are not one transaction).
    pub labels_without_completed_key_per_day: f64,
    /// Reconciliation: completed 201 records whose label row is missing (a crash inside txn 2
    /// where the record and the label are not one transaction), read back at each crash, per
    /// day. The store's own end-of-run check (`invariants`) sees only those not yet purged.
    pub completed_keys_without_label_per_day: f64,
}

/// One retention the decision weighs, counted from the replay's log of requests
/// ([`super::candidates`]): the same sample at every candidate.
#[derive(Debug, Clone, Serialize)]
pub struct CandidateFigures {
    pub retention_s: f64,
    pub retention: String,
    pub duplicate_labels_per_day: Figure,
    pub late_after_purge_per_day: Figure,
    /// Records in the store on average: by Little's law, the records created per second times
    /// how long each lives (its retention from its completion plus the sweeper's lag).
    pub store_records: Figure,
}

/// What `idemcalc simulate` reports: the pooled replicates, each figure beside the model's.
#[derive(Debug, Clone, Serialize)]
pub struct SimReport {
    pub schema_version: u32,
    pub seed: u64,
    pub rate: f64,
    pub retention_s: f64,
    pub retention: String,
    pub replicates: u32,
    /// Simulated time per replicate: arrivals plus the late retries still to come after them.
    pub simulated_seconds: f64,
    /// How long arrivals ran, per replicate.
    pub arrival_seconds: f64,
    pub sample_ordinary: f64,
    pub sample_timed_out: f64,
    pub replayed_intents: u64,
    pub replayed_requests: u64,
    pub store: String,
    pub bytes_per_record_measured: Figure,
    pub store_records_steady: Figure,
    pub store_bytes_steady: Figure,
    /// Calls whose first attempt timed out: what the model calls timed-out calls.
    pub timed_out_per_day: Figure,
    /// Every attempt that timed out, retries included (no model figure: the model does not
    /// follow retries that time out again).
    pub timed_out_attempts_per_day: Figure,
    pub late_after_purge_per_day: Figure,
    pub duplicate_labels_per_day: Figure,
    pub duplicate_cost_per_day: Figure,
    pub unlabelled_per_day: Figure,
    /// Attempts after the first, per day.
    pub retries_per_day: f64,
    /// Claims of a key the sweeper had purged (exact, not the Bloom filter's), with interval.
    pub purged_key_requests_per_day: Figure,
    /// Takeovers of an expired lease, with interval.
    pub takeovers_per_day: Figure,
    /// The network-loss fraction the run used (an input, or calibrated from the timeout rate).
    pub network_loss_fraction: f64,
    /// The share of calls expected to time out at these latencies and this loss.
    pub expected_timeout_fraction: f64,
    pub detection: Detection,
    pub outcomes: Vec<OutcomeRow>,
    pub invariants: SimInvariants,
    pub series: Vec<SeriesPoint>,
    /// Every retention the decision weighs, counted from this run's requests.
    pub candidates: Vec<CandidateFigures>,
    /// What the figures cannot say: no steady window, no events seen, an interval that could
    /// not be computed. Shown under the table.
    pub notes: Vec<String>,
    pub interrupted: bool,
    /// Every replicate's arrivals lasted past the record's longest life, so the store was
    /// measured in a steady window (`run::steady_from_ms`); otherwise it is the store at the
    /// end of the arrivals, still growing.
    pub steady_window: bool,
    pub wall_seconds: f64,
}

#[derive(Debug, Clone, Serialize)]
pub struct SimInvariants {
    pub integrity_ok: bool,
    pub max_labels_per_parcel: u64,
    pub completed_without_label: u64,
    pub replays_byte_identical: bool,
    /// All of the above hold.
    pub hold: bool,
}

pub const SCHEMA_VERSION: u32 = 1;

/// Pools replicates: tallies add up (they are independent draws of the same process), the
/// store size and bytes per record average, with an interval from the spread across
/// replicates when there are several.
pub fn pool(
    cfg: &SimConfig,
    arrivals: &Arrivals,
    runs: &[Tallies],
    store: String,
    wall_seconds: f64,
) -> SimReport {
    let sum = sum_tallies(runs);
    let days = sum.days.max(1e-9);
    let (s_o, s_t) = cfg.fractions();

    let mut notes = Vec::new();
    let replayed_intents: u64 = runs.iter().map(|t| t.replayed_intents).sum();
    let bytes_per_record = bytes_per_record_figure(runs, &mut notes);
    // A record lives its retention plus the sweeper's mean lag.
    let life_s = cfg.record_life_s();
    let records = records_figure(runs, life_s, &mut notes);
    let store_bytes = store_bytes_figure(&records, &bytes_per_record);
    let unit_w = unit_weight(cfg, s_o, s_t);
    let mut counted = |name: &str, t: &Tally| {
        let f = t.per_day(days, unit_w);
        if t.n == 0 {
            notes.push(format!(
                "{name}: none in {} replayed intents, so fewer than {}/day (one-sided 95 %)",
                crate::format::thousands(replayed_intents as f64),
                crate::format::thousands(f.ci95_high.ceil())
            ));
        }
        f
    };
    let timed_out = counted("timed-out calls", &sum.timed_out_first);
    let timed_out_attempts = sum.timed_out.per_day(days, unit_w);
    let late = counted("late arrivals after purge", &sum.late);
    let duplicates = counted("duplicate labels", &sum.duplicates);
    // A price, not a measurement: `run` prices the duplicates through the model's formula
    // (at the label price in dollars, which a price in whole cents would round).
    let duplicate_cost = Figure {
        estimate: f64::NAN,
        ci95_low: f64::NAN,
        ci95_high: f64::NAN,
        analytic: f64::NAN,
    };
    SimReport {
        schema_version: SCHEMA_VERSION,
        seed: cfg.seed,
        rate: arrivals.mean_rate_per_s(),
        retention_s: cfg.retention_s(),
        retention: crate::duration::format_secs(cfg.retention_s()),
        replicates: runs.len() as u32,
        simulated_seconds: runs.iter().map(|t| t.simulated_s).fold(0.0, f64::max),
        arrival_seconds: cfg.arrival_s(),
        sample_ordinary: s_o,
        sample_timed_out: s_t,
        replayed_intents,
        replayed_requests: runs.iter().map(|t| t.replayed_requests).sum(),
        store,
        bytes_per_record_measured: bytes_per_record,
        store_records_steady: records,
        store_bytes_steady: store_bytes,
        timed_out_per_day: timed_out,
        timed_out_attempts_per_day: timed_out_attempts,
        late_after_purge_per_day: late,
        duplicate_labels_per_day: duplicates,
        duplicate_cost_per_day: duplicate_cost,
        unlabelled_per_day: sum.unlabelled.per_day(days, unit_w),
        retries_per_day: sum.retries.w / days,
        purged_key_requests_per_day: sum.purged_key_requests.per_day(days, unit_w),
        takeovers_per_day: sum.takeovers.per_day(days, unit_w),
        network_loss_fraction: cfg.network_loss(),
        expected_timeout_fraction: cfg.expected_timeout_fraction(),
        detection: detection(&sum, days),
        outcomes: outcome_rows(&sum, days),
        invariants: invariants(runs),
        series: mean_series(runs),
        candidates: candidate_figures(runs, unit_w),
        notes,
        interrupted: runs.iter().any(|t| t.interrupted),
        steady_window: !runs.is_empty() && runs.iter().all(|t| t.steady_points > 0),
        wall_seconds,
    }
}

/// Each candidate retention pooled over the replicates: counts add, and the records' time
/// (Σ w·life) over the arrivals' total span is the mean store.
fn candidate_figures(runs: &[Tallies], unit_w: f64) -> Vec<CandidateFigures> {
    let Some(first) = runs.first() else {
        return Vec::new();
    };
    let days: f64 = runs.iter().map(|t| t.days).sum::<f64>().max(1e-9);
    let span_s = days * 86_400.0;
    (0..first.candidates.len())
        .map(|j| {
            let (mut duplicates, mut late) = (Tally::default(), Tally::default());
            let (mut secs, mut secs_sq) = (0.0, 0.0);
            for c in runs.iter().filter_map(|t| t.candidates.get(j)) {
                duplicates.merge(&c.duplicates);
                late.merge(&c.late);
                secs += c.record_seconds;
                secs_sq += c.record_seconds_sq;
            }
            let records = secs / span_s;
            let half = crate::stats::Z95 * secs_sq.sqrt() / span_s;
            let retention_s = first.candidates[j].retention_s;
            CandidateFigures {
                retention_s,
                retention: crate::duration::format_secs(retention_s),
                duplicate_labels_per_day: duplicates.per_day(days, unit_w),
                late_after_purge_per_day: late.per_day(days, unit_w),
                store_records: Figure {
                    estimate: records,
                    ci95_low: (records - half).max(0.0),
                    ci95_high: records + half,
                    analytic: f64::NAN,
                },
            }
        })
        .collect()
}

/// The replicates' event tallies added up, and their days.
fn sum_tallies(runs: &[Tallies]) -> Tallies {
    let mut sum = Tallies::default();
    for t in runs {
        for (k, v) in [
            (&mut sum.late, &t.late),
            (&mut sum.duplicates, &t.duplicates),
            (&mut sum.unlabelled, &t.unlabelled),
            (&mut sum.purged_key_requests, &t.purged_key_requests),
            (&mut sum.purged_key_flags, &t.purged_key_flags),
            (&mut sum.cross_caller, &t.cross_caller),
            (&mut sum.takeovers_running, &t.takeovers_running),
            (&mut sum.takeovers, &t.takeovers),
            (&mut sum.parcels_two_labels, &t.parcels_two_labels),
            (&mut sum.invoice_without_label, &t.invoice_without_label),
            (
                &mut sum.labels_without_completed_key,
                &t.labels_without_completed_key,
            ),
            (&mut sum.completed_without_label, &t.completed_without_label),
            (&mut sum.timed_out, &t.timed_out),
            (&mut sum.timed_out_first, &t.timed_out_first),
            (&mut sum.retries, &t.retries),
        ] {
            k.merge(v);
        }
        for (key, v) in &t.outcomes {
            sum.outcomes.entry(key.clone()).or_default().merge(v);
        }
        sum.days += t.days;
    }
    sum
}

/// The largest weight one replayed event can carry: events come from timed-out intents
/// (weight ≤ 1/s_t in the tail: timed out or crashed first) unless ordinary ones can also
/// go wrong.
fn unit_weight(cfg: &SimConfig, s_o: f64, s_t: f64) -> f64 {
    let ordinary_can_fail =
        cfg.carrier.hang_fraction > 0.0 || cfg.carrier.error_fraction > 0.0 || cfg.callers > 1;
    if ordinary_can_fail {
        1.0 / s_o
    } else {
        1.0 / s_t
    }
}

/// The first replicate's series, each point's store size averaged across replicates.
fn mean_series(runs: &[Tallies]) -> Vec<SeriesPoint> {
    let mut series: Vec<SeriesPoint> = runs.first().map(|t| t.series.clone()).unwrap_or_default();
    if runs.len() > 1 {
        for (i, p) in series.iter_mut().enumerate() {
            let vals: Vec<f64> = runs
                .iter()
                .filter_map(|t| t.series.get(i).map(|q| q.keys_estimated))
                .collect();
            p.keys_estimated = vals.iter().sum::<f64>() / vals.len() as f64;
        }
    }
    series
}

fn outcome_rows(sum: &Tallies, days: f64) -> Vec<OutcomeRow> {
    sum.outcomes
        .iter()
        .map(|((status, outcome, code), t)| OutcomeRow {
            status: *status,
            outcome: *outcome,
            code: code.clone(),
            replayed: t.n,
            per_day: t.w / days,
        })
        .collect()
}

/// The invariants of every replicate's store together.
fn invariants(runs: &[Tallies]) -> SimInvariants {
    let invariants = SimInvariants {
        integrity_ok: runs.iter().all(|t| t.invariant_integrity_ok),
        max_labels_per_parcel: runs
            .iter()
            .map(|t| t.invariant_max_labels_per_parcel)
            .max()
            .unwrap_or(0),
        completed_without_label: runs
            .iter()
            .map(|t| t.invariant_completed_without_label)
            .sum(),
        replays_byte_identical: runs.iter().all(|t| t.invariant_replays_identical),
        hold: false,
    };
    SimInvariants {
        hold: invariants.integrity_ok
            && invariants.max_labels_per_parcel <= 1
            && invariants.completed_without_label == 0
            && invariants.replays_byte_identical,
        ..invariants
    }
}

fn detection(sum: &Tallies, days: f64) -> Detection {
    Detection {
        parcels_with_two_labels_per_day: sum.parcels_two_labels.w / days,
        purged_key_requests_per_day: sum.purged_key_requests.w / days,
        purged_key_bloom_flags_per_day: sum.purged_key_flags.w / days,
        cross_caller_replays_per_day: sum.cross_caller.w / days,
        invoice_lines_without_label_per_day: sum.invoice_without_label.w / days,
        takeovers_while_running_per_day: sum.takeovers_running.w / days,
        takeovers_per_day: sum.takeovers.w / days,
        labels_without_completed_key_per_day: sum.labels_without_completed_key.w / days,
        completed_keys_without_label_per_day: sum.completed_without_label.w / days,
    }
}
