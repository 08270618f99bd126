//! The store's size as figures: records in it (a time average of an M/G/∞ count over the
//! steady window, or the store at the end of the arrivals when the run has no steady window)
//! and bytes per record (read from the store's page accounting), each with its 95 % interval.

use super::tallies::{Figure, Tallies};

/// The page size both stores allocate in (SQLite's `PAGE_SIZE`, PostgreSQL's block).
const PAGE_BYTES: f64 = 8192.0;
/// The b-trees a key record lives in: SQLite's rowid table, its primary-key index and the
/// `expires_at` index (PostgreSQL's heap is no b-tree, but has the two indexes and a last page).
const KEY_BTREES: f64 = 3.0;

/// Half-width of the 95 % interval of bytes per record measured on one run's store, relative:
/// 1.96 × the spread between runs that differ only in their seed, measured on the bundled
/// scenarios (`report` on the 9 bundled scenarios against the same 9 with seed + 100, store
/// schema 3: relative standard deviation of one run 0.21 %, so ±0.41 %, rounded up). One run's
/// own samples share one b-tree layout and miss that spread; with two or more replicates it is
/// measured instead.
const ONE_LAYOUT_HALF_WIDTH: f64 = 0.005;

/// The variance of the mean of `n` counts taken `every_s` apart, relative to the variance of
/// one, for an M/G/∞ count whose items live `life_s`: two counts `h` apart share a fraction
/// `(1 - h/life)⁺` of their items, so their covariance is that fraction of the variance.
pub fn time_average_variance_factor(n: u64, every_s: f64, life_s: f64) -> f64 {
    if n <= 1 || life_s <= 0.0 {
        return 1.0;
    }
    let nf = n as f64;
    let mut sum = nf;
    for m in 1..n {
        let shared = 1.0 - m as f64 * every_s / life_s;
        if shared <= 0.0 {
            break;
        }
        sum += 2.0 * (nf - m as f64) * shared;
    }
    sum / (nf * nf)
}

/// Records in the store: the mean weighted count over the steady window, or, when the run has
/// none, the store at the end of the arrivals with a note saying it is still growing.
pub(super) fn records_figure(runs: &[Tallies], life_s: f64, notes: &mut Vec<String>) -> Figure {
    let steady: Vec<&Tallies> = runs.iter().filter(|t| t.steady_points > 0).collect();
    let k = runs.len().max(1) as f64;
    let (est, var) = if steady.len() == runs.len() && !runs.is_empty() {
        let est = steady
            .iter()
            .map(|t| t.steady_keys_sum / t.steady_points as f64)
            .sum::<f64>()
            / k;
        // Each record's presence is Poisson at any instant (var = mean), scaled by its weight
        // squared, and averaging over the window divides that by how many independent looks it
        // gets.
        let var = steady
            .iter()
            .map(|t| {
                let n = t.steady_points as f64;
                let instant = t.steady_weight_sq_sum / n;
                instant * time_average_variance_factor(t.steady_points, t.series_every_s, life_s)
            })
            .sum::<f64>()
            / (k * k);
        (est, var)
    } else {
        notes.push(format!(
            "no steady window: arrivals end before one retention plus a sweep has passed, so \
             records and store size are the store at the end of the arrivals, still growing \
             (a lower bound of the steady size); run with --duration longer than {}",
            crate::duration::format_secs(life_s.round())
        ));
        let est = runs.iter().map(|t| t.end_keys).sum::<f64>() / k;
        let var = runs.iter().map(|t| t.end_weight_sq).sum::<f64>() / (k * k);
        (est, var)
    };
    let half = crate::stats::Z95 * var.sqrt();
    Figure {
        estimate: est,
        ci95_low: (est - half).max(0.0),
        ci95_high: est + half,
        analytic: f64::NAN,
    }
}

/// The store's size: records × bytes per record, whose relative errors add in quadrature
/// (bytes per record measured once has no interval, and adds none).
pub(super) fn store_bytes_figure(records: &Figure, bytes_per_record: &Figure) -> Figure {
    let rel = |f: &Figure| {
        if f.estimate > 0.0 {
            (f.ci95_high - f.ci95_low) / 2.0 / f.estimate
        } else {
            0.0
        }
    };
    let rel_bytes = if bytes_per_record.ci95_low.is_finite() {
        rel(bytes_per_record)
    } else {
        0.0
    };
    let rel_store = (rel(records).powi(2) + rel_bytes.powi(2)).sqrt();
    let store_estimate = records.estimate * bytes_per_record.estimate;
    Figure {
        estimate: store_estimate,
        ci95_low: (store_estimate * (1.0 - rel_store)).max(0.0),
        ci95_high: store_estimate * (1.0 + rel_store),
        analytic: f64::NAN,
    }
}

/// Bytes per record: the spread across replicates when there are several, else the spread of
/// the measurements over one replicate's steady window. One measurement alone has no interval:
/// it is shown as such (not a number, `null` in JSON) with a note, never as a zero-width one.
pub(super) fn bytes_per_record_figure(runs: &[Tallies], notes: &mut Vec<String>) -> Figure {
    let figure = bytes_per_record_spread(runs, notes);
    // Within one run the samples share one b-tree layout, so their spread misses how another
    // run's keys would lay out the pages; each b-tree of the key table (the table, its primary
    // key, the `expires_at` index) is measured in whole pages and lands a page or so either
    // way. At least that much, per record, is in the interval.
    let records: Vec<u64> = runs
        .iter()
        .flat_map(|t| t.bytes_per_record_records.iter().copied())
        .collect();
    if records.is_empty() || !figure.ci95_low.is_finite() {
        return figure;
    }
    let mean_records = records.iter().sum::<u64>() as f64 / records.len() as f64;
    let mut floor = KEY_BTREES * PAGE_BYTES / (mean_records * (runs.len() as f64).sqrt());
    if runs.len() == 1 {
        floor = floor.max(ONE_LAYOUT_HALF_WIDTH * figure.estimate);
    }
    Figure {
        ci95_low: figure.ci95_low.min(figure.estimate - floor),
        ci95_high: figure.ci95_high.max(figure.estimate + floor),
        ..figure
    }
}

fn bytes_per_record_spread(runs: &[Tallies], notes: &mut Vec<String>) -> Figure {
    let per_run: Vec<f64> = runs
        .iter()
        .map(|t| {
            if t.bytes_per_record_samples.is_empty() {
                t.bytes_per_record
            } else {
                t.bytes_per_record_samples.iter().sum::<f64>()
                    / t.bytes_per_record_samples.len() as f64
            }
        })
        .collect();
    if per_run.len() >= 2 {
        return spread_figure(&per_run);
    }
    let samples = runs
        .first()
        .map(|t| t.bytes_per_record_samples.clone())
        .unwrap_or_default();
    if samples.len() >= 2 {
        return spread_figure(&samples);
    }
    notes.push(
        "bytes per record: measured once, so no interval can be given; run longer or with \
         --replicates 2 or more"
            .to_string(),
    );
    Figure {
        estimate: per_run.first().copied().unwrap_or(0.0),
        ci95_low: f64::NAN,
        ci95_high: f64::NAN,
        analytic: f64::NAN,
    }
}

/// Mean and a t interval over `values` (two or more).
fn spread_figure(values: &[f64]) -> Figure {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n.max(1.0);
    if values.len() < 2 {
        return Figure {
            estimate: mean,
            ci95_low: f64::NAN,
            ci95_high: f64::NAN,
            analytic: f64::NAN,
        };
    }
    let var = values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0);
    let t = crate::stats::t975(n - 1.0).unwrap_or(1.96);
    let half = t * (var / n).sqrt();
    Figure {
        estimate: mean,
        ci95_low: mean - half,
        ci95_high: mean + half,
        analytic: f64::NAN,
    }
}
