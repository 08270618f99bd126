//! The report's vocabulary, shared by every format: how each kind of quantity is written, what
//! a budget and a compared figure are called, the verdict marks. One place, so the page,
//! `summary.md` and the terminal cannot name one thing two ways.

use super::Status;
use crate::format::{human_bytes, human_count, human_duration, percent, rate_per_s, usd};
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
