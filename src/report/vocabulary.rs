//! The report's vocabulary, shared by every format: how each kind of quantity is written, what
//! a budget and a compared figure are called, the verdict marks. One place, so the page,
//! `summary.md` and the terminal cannot name one thing two ways.

use super::Status;
use crate::format::{
    estimate_interval, human_bytes, human_count, human_duration, percent, rate_per_s, usd,
};
use crate::run::results::Figure;
use crate::run::{Change, ChangeFigure};
use crate::settings::Budget;
use serde::Serialize;

/// How a number is shown; the page's script has a formatter of the same name for each, and
/// checks at load that it agrees with these on the values of the run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Quantity {
    Bytes,
    /// Decimal gigabytes, as the store budget is set.
    Gigabytes,
    Count,
    PerDay,
    Usd,
    UsdPerDay,
    Percent,
    Duration,
    Rate,
}

/// Formats `v` the way the page shows a figure of this kind.
pub fn show(quantity: Quantity, v: f64) -> String {
    match quantity {
        Quantity::Bytes => human_bytes(v),
        Quantity::Gigabytes => human_bytes(v * 1e9),
        Quantity::Count => human_count(v),
        Quantity::PerDay => format!("{}/day", human_count(v)),
        Quantity::Usd => usd(v),
        Quantity::UsdPerDay => format!("{}/day", usd(v)),
        Quantity::Percent => percent(v),
        Quantity::Duration => human_duration(v),
        Quantity::Rate => rate_per_s(v),
    }
}

/// What the model column says for a figure the model has no formula for (it follows first
/// attempts only): the run leaves its value NaN, and no format may show that as `NaN`.
pub const NO_MODEL: &str = "no model";

/// The model's value of a figure, or [`NO_MODEL`].
pub fn model_value(quantity: Quantity, v: f64) -> String {
    if v.is_nan() {
        NO_MODEL.to_string()
    } else {
        show(quantity, v)
    }
}

/// A figure's 95 % interval, through [`estimate_interval`]: `17.7 GB – 18.2 GB`, `none seen,
/// ≤ 2.6/day` when nothing was counted, `no interval (see notes)` when it could not be
/// computed. The one way the terminal, `summary.md` and the page write an interval.
pub fn interval(quantity: Quantity, f: &Figure) -> String {
    estimate_interval(f.estimate, f.ci95_low, f.ci95_high, |v| show(quantity, v))
}

/// A figure with its interval in brackets (`17.7 GB (17.7 GB – 18.2 GB)`, `0/day (none seen,
/// ≤ 2.6/day)`); the estimate alone when the interval has no width or could not be computed.
pub fn with_interval(quantity: Quantity, f: &Figure) -> String {
    if !(f.ci95_low.is_finite() && f.ci95_high.is_finite() && f.ci95_low < f.ci95_high) {
        show(quantity, f.estimate)
    } else {
        format!("{} ({})", show(quantity, f.estimate), interval(quantity, f))
    }
}

/// Where a store-size figure was read: in the steady window, or at the end of the arrivals
/// when the run has none (`SimReport::steady_window`), still growing. The terminal and the
/// page label the store's rows with it.
pub fn store_window(steady_window: bool) -> &'static str {
    if steady_window {
        "steady"
    } else {
        "at the end"
    }
}

/// A budget's figure or limit in its unit: GB, labels per day or dollars per day.
pub fn budget_value(budget: Budget, v: f64) -> String {
    match budget {
        Budget::MaxStoreGb => human_bytes(v * 1e9),
        Budget::MaxDuplicatesPerDay => show(Quantity::PerDay, v),
        Budget::MaxStoreGrowth => format!("{:+.1}%", v * 100.0),
        Budget::MaxCostPerDay => show(Quantity::UsdPerDay, v),
    }
}

pub fn budget_label(budget: Budget) -> &'static str {
    match budget {
        Budget::MaxStoreGb => "Store size",
        Budget::MaxDuplicatesPerDay => "Duplicate labels",
        Budget::MaxStoreGrowth => "Store growth",
        Budget::MaxCostPerDay => "Daily cost",
    }
}

pub fn change_quantity(figure: ChangeFigure) -> Quantity {
    match figure {
        ChangeFigure::StoreBytes | ChangeFigure::BytesPerRecord => Quantity::Bytes,
        ChangeFigure::DuplicateLabelsPerDay => Quantity::PerDay,
        ChangeFigure::TotalCostPerDay => Quantity::UsdPerDay,
    }
}

pub fn change_label(figure: ChangeFigure) -> &'static str {
    match figure {
        ChangeFigure::StoreBytes => "Store size",
        ChangeFigure::BytesPerRecord => "Bytes per record",
        ChangeFigure::DuplicateLabelsPerDay => "Duplicate labels",
        ChangeFigure::TotalCostPerDay => "Daily cost",
    }
}

/// `+12.3% (95%: +10.1% – +14.5%)`.
pub fn relative_text(c: &Change) -> String {
    if !c.relative.is_finite() {
        return "–".into();
    }
    match c.relative_ci95 {
        Some([lo, hi]) => format!(
            "{:+.1}% ({:+.1}% – {:+.1}%)",
            c.relative * 100.0,
            lo * 100.0,
            hi * 100.0
        ),
        None => format!("{:+.1}%", c.relative * 100.0),
    }
}

pub fn mark(status: Status) -> &'static str {
    match status {
        Status::Ok => "✅",
        Status::AtRisk => "⚠️",
        Status::Broken => "❌",
    }
}

/// The verdict legend, shared by `summary.md` and the page.
pub const LEGEND: &str = "✅ holds: the whole 95% interval is within the limit · ⚠️ at risk: the estimate is within the limit, the interval reaches past it · ❌ broken: the estimate is past the limit";

/// A bench side's creates/s with its interval over the runs: `13,419/s (95%: 13,100/s –
/// 13,700/s over 5 runs)`; one run has no interval and says so rather than drawing none.
pub fn bench_rate(mean: f64, iv: Option<&crate::stats::MeanInterval>) -> String {
    let rate = |v: f64| format!("{}/s", crate::format::thousands(v));
    match iv.and_then(|i| i.bounds().map(|b| (i.n, b))) {
        Some((n, (lo, hi))) => format!(
            "{} (95%: {} over {n} runs)",
            rate(mean),
            crate::format::interval(lo, hi, rate)
        ),
        None => format!("{} (one run: no interval)", rate(mean)),
    }
}

/// The engine's share of its baseline from the paired runs: `0.91 of the baseline (95%: 0.88 –
/// 0.94)`.
pub fn bench_ratio(iv: &crate::stats::MeanInterval) -> String {
    let f = |v: f64| crate::format::significant(v, 3);
    match iv.bounds() {
        Some((lo, hi)) => format!(
            "{} of the baseline (95%: {})",
            f(iv.mean),
            crate::format::interval(lo, hi, f)
        ),
        None => format!("{} of the baseline (one pair: no interval)", f(iv.mean)),
    }
}
