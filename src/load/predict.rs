//! `simulate`'s prediction beside what `load` counted: the same client, retry distribution,
//! rate and key policy replayed on the virtual clock against the target's settings as
//! `--retention` and `--carrier-window` describe them, so a count seen from outside can be
//! read against what the design says it should be.
//!
//! The run's lost replies are the simulator's timed-out calls that the server had finished
//! (`timeout_fraction` = the lost share, `done_fraction` = 1): those are the only calls whose
//! late retry can find its key purged and buy a second label. Both figures are duplicate
//! labels per day at the asked rate, so a scaled clock (`serve --time-scale`) changes neither.

use crate::run::Plan;
use crate::settings::Settings;
use crate::sim::replay::{Figure, Progress};
use crate::store::{StoreOptions, Stores};
use serde::Serialize;
use std::sync::atomic::AtomicBool;

/// What `simulate` predicts for the run's settings, and whether the two agree.
#[derive(Debug, Clone, Serialize)]
pub struct Prediction {
    /// The target's retention and carrier window the prediction assumed.
    pub retention: String,
    pub carrier_window: String,
    /// Duplicate labels per day at the asked rate, with the simulator's 95 % interval.
    pub duplicates_per_day: Figure,
    /// Each estimate inside the other's 95 % interval: the count seen from outside is what
    /// the design predicts, within both runs' noise.
    pub agrees: bool,
    /// The same prediction from the command line.
    pub command: String,
}

/// Runs the simulator on `settings` and sets its duplicates beside `count`, the run's own
/// figure; `command` is the same prediction as a command line.
pub fn predict(settings: &Settings, command: String, count: &Figure) -> anyhow::Result<Prediction> {
    let figure = simulate(settings)?;
    Ok(Prediction {
        retention: crate::duration::format_secs(settings.retentions()[0]),
        carrier_window: crate::duration::format_secs(settings.carrier.window_ms as f64 / 1000.0),
        agrees: agree(count, &figure),
        duplicates_per_day: figure,
        command,
    })
}

/// Runs the simulator on `settings` (in memory, its own seed) and returns its duplicates.
fn simulate(settings: &Settings) -> anyhow::Result<Figure> {
    let plan = Plan::new(settings)?;
    let stores = Stores::new(
        None,
        None,
        StoreOptions {
            purpose: "load prediction",
            ..StoreOptions::default()
        },
    )?;
    let never = AtomicBool::new(false);
    let progress = Progress {
        tick: &|_| {},
        interrupted: &never,
    };
    let reports = crate::run::simulate(&plan, &stores, &progress);
    stores.finish()?;
    let reports = reports?;
    let first = reports
        .first()
        .ok_or_else(|| anyhow::anyhow!("the prediction ran no simulation"))?;
    Ok(first.duplicate_labels_per_day)
}

/// Whether two estimates with 95 % intervals agree: their difference lies within its own 95 %
/// interval, each side's spread read from the half of its interval that faces the other.
///
/// Not "each inside the other's interval": `simulate` replays tens of thousands of intents and
/// its interval is a few percent wide, so a shorter live run would fall outside it most of the
/// time even when both are right. The difference test keeps its 95 % promise at any size.
pub fn agree(a: &Figure, b: &Figure) -> bool {
    use crate::stats::Z95;
    let above = b.estimate >= a.estimate;
    let sd = |f: &Figure, up: bool| {
        if up {
            (f.ci95_high - f.estimate) / Z95
        } else {
            (f.estimate - f.ci95_low) / Z95
        }
    };
    let spread = (sd(a, above).powi(2) + sd(b, !above).powi(2)).sqrt();
    let gap = (a.estimate - b.estimate).abs();
    gap.is_finite() && spread.is_finite() && gap <= Z95 * spread
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fig(estimate: f64, lo: f64, hi: f64) -> Figure {
        Figure {
            estimate,
            ci95_low: lo,
            ci95_high: hi,
            analytic: f64::NAN,
        }
    }

    #[test]
    fn agreement_is_the_difference_within_its_interval() {
        // A narrow prediction and a wide count 1.6 combined σ apart (gap 58,000; σ 36,700 =
        // √(36,200² + 4,800²)): they agree, though the count lies outside the prediction's
        // own interval.
        let predicted = fig(718_000.0, 708_600.0, 727_500.0);
        let counted = fig(660_000.0, 588_000.0, 731_000.0);
        assert!(agree(&counted, &predicted) && agree(&predicted, &counted));
        // 2.05 combined σ apart: they do not.
        let far = fig(641_000.0, 569_000.0, 714_000.0);
        assert!(!agree(&far, &predicted));
        // An interval that could not be computed agrees with nothing.
        assert!(!agree(&fig(1.0, 0.0, f64::INFINITY), &predicted));
    }
}
