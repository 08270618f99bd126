//! The retention trade-off: what a longer retention costs in store size, what it saves in
//! duplicate labels, and where the daily total is lowest.

use super::{
    Area, Axis, BAD, ChartError, Ctx, Hover, INK, LIMIT, MUTED, OK, Rgb, duration_ticks, font,
    line, log_duration_label, nice_ticks, nice_top, panel, render, segment, text_at, vline,
};
use crate::format::{human_bytes, human_count, human_duration, usd};
use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};

const C: &str = "tradeoff";

/// One retention of the trade-off, from the model's sweep.
pub struct TradeoffRow {
    pub retention_s: f64,
    pub store_bytes: f64,
    pub duplicates_per_day: f64,
    pub storage_cost_per_day: f64,
    pub duplicate_cost_per_day: f64,
    pub total_cost_per_day: f64,
}

/// A simulated figure to set beside the model's curve: (retention, low, estimate, high).
pub struct SimPoint {
    pub retention_s: f64,
    pub store: (f64, f64, f64),
    pub duplicates: (f64, f64, f64),
    pub cost: (f64, f64, f64),
}

/// One panel of the trade-off. The three differ only in the figure they read and how it
/// prints, so one table and one drawing function keep them alike.
struct Metric {
    caption: &'static str,
    desc: &'static str,
    model: fn(&TradeoffRow) -> f64,
    /// (low, estimate, high)
    sim: fn(&SimPoint) -> (f64, f64, f64),
    fmt: fn(f64) -> String,
    /// The cost panel also shows the cost's two parts and rings the cheapest retention: the
    /// decision is made on it.
    is_cost: bool,
    /// Its limit line, if set, and what it is called: the store and cost budgets, the
    /// duplicates target.
    limit: fn(&Limits) -> Option<f64>,
    limit_word: &'static str,
    /// The limit in the caption.
    limit_name: &'static str,
}

const METRICS: [Metric; 3] = [
    Metric {
        caption: "Store size",
        desc: "Store size (bytes)",
        model: |r| r.store_bytes,
        sim: |s| s.store,
        fmt: human_bytes,
        is_cost: false,
        limit: |l| l.store_bytes,
        limit_word: "budget",
        limit_name: "the store budget",
    },
    Metric {
        caption: "Duplicate labels per day",
        desc: "Duplicate labels per day",
        model: |r| r.duplicates_per_day,
        sim: |s| s.duplicates,
        fmt: human_count,
        is_cost: false,
        limit: |l| l.duplicates_per_day,
        limit_word: "target",
        limit_name: "the duplicates target",
    },
    Metric {
        caption: "Total daily cost",
        desc: "Cost per day (USD)",
        model: |r| r.total_cost_per_day,
        sim: |s| s.cost,
        fmt: usd,
        is_cost: true,
        limit: |l| l.cost_per_day,
        limit_word: "budget",
        limit_name: "the cost budget",
    },
];

/// What the trade-off draws: the model's sweep, the retentions it marks, the simulated runs
/// beside the curves and the decision's limits.
pub struct Tradeoff<'a> {
    pub rows: &'a [TradeoffRow],
    /// The retention the inputs are at ("now").
    pub current_s: f64,
    pub cheapest_s: f64,
    /// The decision's retention at the inputs, if one meets every target.
    pub recommended_s: Option<f64>,
    pub colour: Rgb,
    pub sims: &'a [SimPoint],
    pub limits: &'a Limits,
}

/// The decision's limits, one per panel, in the panel's unit: store bytes per copy, duplicate
/// labels per day, USD per day. A budget not set is `None`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    pub store_bytes: Option<f64>,
    pub duplicates_per_day: Option<f64>,
    pub cost_per_day: Option<f64>,
}

/// The cost's two parts are drawn only where they can be told apart: somewhere along the
/// sweep the smaller of them must reach this share of the panel's height. Otherwise one lies
/// on the axis and the other under the total at every retention (storage of a few dollars a
/// day against thousands in duplicates), and a caption naming them would name lines no one can
/// see. The page's script draws by the same rule (the share is in its data).
pub const PARTS_MIN_SHARE: f64 = 0.03;

/// Whether the cost's parts are drawn on a panel whose axis reaches `top`: the smaller part
/// reaches [`PARTS_MIN_SHARE`] of it at some retention.
pub fn parts_shown(rows: &[TradeoffRow], top: f64) -> bool {
    rows.iter()
        .map(|r| r.storage_cost_per_day.min(r.duplicate_cost_per_day))
        .any(|smaller| smaller >= PARTS_MIN_SHARE * top)
}

/// The chart and the caption of what it shows: only the lines, rings and whiskers drawn.
pub struct Drawn {
    pub svg: String,
    pub legend: String,
}

/// What one panel drew that the caption names.
#[derive(Debug, Clone, Copy, Default)]
struct PanelDrawn {
    limit: bool,
    /// The cost panel: whether its parts were drawn.
    parts: Option<bool>,
}

/// The retention trade-off: store size, duplicate labels and total daily cost against
/// retention, the cheapest retention ringed, the recommended and the current one marked.
/// Simulated figures, when given, are drawn as points with their 95 % interval; the budgets
/// and the target as lines. Labels are drawn last, over every line.
pub fn tradeoff(t: &Tradeoff<'_>) -> Result<Drawn, ChartError> {
    if t.rows.is_empty() {
        return Err(ChartError {
            chart: C,
            message: "no retentions to draw".into(),
        });
    }
    let x_axis = retention_axis(t.rows);
    let mut drawn = [PanelDrawn::default(); 3];
    let svg = render(
        C,
        (1000, 300),
        "Retention trade-off: store size, duplicates and daily cost",
        |root, hovers| {
            let areas = root.split_evenly((1, 3));
            for ((metric, area), d) in METRICS.iter().zip(areas.iter()).zip(drawn.iter_mut()) {
                *d = metric_panel(area, t, &x_axis, metric, hovers)?;
            }
            Ok(())
        },
    )?;
    Ok(Drawn {
        svg,
        legend: legend(t, &drawn),
    })
}

/// The caption's words for what was drawn, in the order the eye meets it. The page's script
/// writes the same sentence when it redraws (`legendText` in `report.js`).
fn legend(t: &Tradeoff<'_>, drawn: &[PanelDrawn; 3]) -> String {
    let mut parts = Vec::new();
    let limits: Vec<&str> = METRICS
        .iter()
        .zip(drawn)
        .filter(|(_, d)| d.limit)
        .map(|(m, _)| m.limit_name)
        .collect();
    let cost_parts = drawn.iter().find_map(|d| d.parts);
    let mut line = "The line in each panel is the model at the inputs above".to_string();
    match cost_parts {
        Some(true) => line.push_str(
            " (on the cost panel, dashed: its two parts, storage grey and duplicates red)",
        ),
        Some(false) => {
            let most = |f: fn(&TradeoffRow) -> f64| t.rows.iter().map(f).fold(0.0, f64::max);
            line.push_str(&format!(
                " (the cost's two parts are not drawn: at every retention one of them is too small to tell apart from the axis, so the other lies on the total; storage reaches {}, duplicates {})",
                usd_per_day(most(|r| r.storage_cost_per_day)),
                usd_per_day(most(|r| r.duplicate_cost_per_day))
            ))
        }
        None => {}
    }
    parts.push(line);
    if !limits.is_empty() {
        parts.push(format!("the long purple dashes are {}", and_list(&limits)));
    }
    match t.recommended_s {
        Some(r) if r == t.current_s => parts.push(format!(
            "the green line is the recommended retention, {}, which the inputs are at",
            human_duration(r)
        )),
        Some(r) => {
            parts.push(format!(
                "the grey dashed line is the retention the inputs are at, {}",
                human_duration(t.current_s)
            ));
            parts.push(format!(
                "the green line the recommended one, {}",
                human_duration(r)
            ));
        }
        None => parts.push(format!(
            "the grey dashed line is the retention the inputs are at, {} (none is recommended at these inputs)",
            human_duration(t.current_s)
        )),
    }
    parts.push(format!(
        "the green ring is the cheapest retention, {}",
        human_duration(t.cheapest_s)
    ));
    let mut out = format!("{}.", parts.join("; "));
    if !t.sims.is_empty() {
        out.push_str(" Black whiskers are simulated runs at the same traffic with their 95% interval (at the bytes per record they measured); they stay while only the retention moves.");
    }
    out
}

fn usd_per_day(v: f64) -> String {
    format!("{}/day", usd(v))
}

/// `a`, `a and b`, `a, b and c`.
fn and_list(items: &[&str]) -> String {
    match items {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.join(", ")),
    }
}

/// The sweep's retentions on a log axis, with a little room at both ends for the end points'
/// marks. The 10 s and 10 min ticks are left out: on a panel a third of the page wide they
/// would crowd their neighbours.
fn retention_axis(rows: &[TradeoffRow]) -> Axis<'static> {
    let lo_s = rows.first().map_or(3600.0, |r| r.retention_s);
    let hi_s = rows.last().map_or(2_592_000.0, |r| r.retention_s);
    let (xlo, xhi) = (lo_s.log10() - 0.08, hi_s.log10() + 0.08);
    Axis {
        lo: xlo,
        hi: xhi,
        ticks: duration_ticks(lo_s, hi_s)
            .into_iter()
            .filter(|t| (*t - 1.0).abs() > 1e-9 && (*t - 600f64.log10()).abs() > 1e-9)
            .collect(),
        fmt: &log_duration_label,
        desc: "Retention (log scale)".into(),
    }
}

/// A label to draw once every line is down, so none is drawn over it.
struct Label {
    at: (f64, f64),
    text: String,
    offset_px: (i32, i32),
    style: TextStyle<'static>,
}

/// One metric against retention. Its y axis reaches the highest simulated interval too, so a
/// simulation above the model's curve is never cut off, and the limit when it is near the
/// data (one far above would flatten the curve: the page's script draws by the same rule).
fn metric_panel(
    area: &Area<'_>,
    t: &Tradeoff<'_>,
    x_axis: &Axis<'_>,
    metric: &Metric,
    hovers: &mut Vec<Hover>,
) -> Result<PanelDrawn, ChartError> {
    let max = t
        .rows
        .iter()
        .map(metric.model)
        .chain(t.sims.iter().map(|s| (metric.sim)(s).2))
        .fold(0.0, f64::max);
    let limit = (metric.limit)(t.limits).filter(|l| l.is_finite() && *l <= max * 3.0);
    let top = nice_top(limit.map_or(max, |l| l.max(max)));
    // Zero sits a little above the x axis, so a ring or point at zero stays off its labels.
    let y_axis = Axis {
        lo: -0.05 * top,
        hi: top,
        ticks: nice_ticks(0.0, top, 4),
        fmt: &metric.fmt,
        desc: metric.desc.to_string(),
    };
    let mut ctx = panel(C, area, metric.caption, x_axis, &y_axis, 62)?;
    let mut labels = Vec::new();
    let pts = along_retention(t.rows, metric.model);
    let parts = (metric.is_cost).then(|| parts_shown(t.rows, top));
    if parts == Some(true) {
        cost_parts(&mut ctx, t.rows)?;
    }
    line(&mut ctx, C, &pts, t.colour)?;
    if let Some(l) = limit {
        let (x0, x1) = (x_axis.lo, x_axis.hi);
        tryc!(
            C,
            ctx.draw_series(DashedLineSeries::new(
                vec![(x0, l), (x1, l)],
                8,
                4,
                LIMIT.c().stroke_width(2)
            ))
        );
        // At the right end, where the retention lines (now, recommended: short retentions)
        // rarely are: over the line, or under it near the top of the panel.
        let high = l > top * 0.85;
        labels.push(Label {
            at: (x1, l),
            text: format!("{} {}", metric.limit_word, (metric.fmt)(l)),
            offset_px: (-4, if high { 4 } else { -3 }),
            style: font(13, LIMIT).pos(Pos::new(
                HPos::Right,
                if high { VPos::Top } else { VPos::Bottom },
            )),
        });
    }
    marks(&mut ctx, t, top, &mut labels)?;
    simulated(&mut ctx, t.sims, metric, hovers)?;
    modelled(&mut ctx, t, metric, hovers, &mut labels)?;
    for l in labels {
        text_at(&mut ctx, C, l.at, l.text, l.offset_px, l.style)?;
    }
    Ok(PanelDrawn {
        limit: limit.is_some(),
        parts,
    })
}

/// The retention the inputs are at (grey dashes) and the recommended one (a green line): one
/// green line when they are the same, so neither hides the other.
fn marks(
    ctx: &mut Ctx<'_, '_>,
    t: &Tradeoff<'_>,
    top: f64,
    labels: &mut Vec<Label>,
) -> Result<(), ChartError> {
    let now = t.current_s.log10();
    if t.recommended_s != Some(t.current_s) {
        vline(ctx, C, now, (0.0, top), MUTED, "", 0)?;
        labels.push(Label {
            at: (now, top),
            text: format!("now {}", human_duration(t.current_s)),
            offset_px: (4, 2),
            style: font(13, MUTED),
        });
    }
    if let Some(r) = t.recommended_s {
        let x = r.log10();
        tryc!(
            C,
            ctx.draw_series(std::iter::once(PathElement::new(
                vec![(x, 0.0), (x, top)],
                OK.c().stroke_width(2)
            )))
        );
        // At the top of its line, a line under the "now" label: the limits' labels are at the
        // right end of their lines and the curves rarely reach the top left.
        labels.push(Label {
            at: (x, top),
            text: if r == t.current_s {
                format!("recommended {} (now)", human_duration(r))
            } else {
                format!("recommended {}", human_duration(r))
            },
            offset_px: (4, 16),
            style: font(13, OK),
        });
    }
    Ok(())
}

/// A figure of each row at log10 of its retention, the x the axis is drawn in.
fn along_retention(rows: &[TradeoffRow], y: impl Fn(&TradeoffRow) -> f64) -> Vec<(f64, f64)> {
    rows.iter().map(|r| (r.retention_s.log10(), y(r))).collect()
}

/// The two parts of the cost, thin and dashed under the total: storage rises with retention
/// and duplicates fall, which is why the total has a lowest point.
fn cost_parts(ctx: &mut Ctx<'_, '_>, rows: &[TradeoffRow]) -> Result<(), ChartError> {
    let storage = along_retention(rows, |r| r.storage_cost_per_day);
    let duplicates = along_retention(rows, |r| r.duplicate_cost_per_day);
    for (pts, colour) in [(storage, MUTED), (duplicates, BAD)] {
        tryc!(
            C,
            ctx.draw_series(DashedLineSeries::new(pts, 4, 3, colour.c().stroke_width(1)))
        );
    }
    Ok(())
}

/// Simulated figures as whiskers in ink, apart from the model's coloured curve they check.
fn simulated(
    ctx: &mut Ctx<'_, '_>,
    sims: &[SimPoint],
    metric: &Metric,
    hovers: &mut Vec<Hover>,
) -> Result<(), ChartError> {
    let fmt = metric.fmt;
    for s in sims {
        let (lo, est, hi) = (metric.sim)(s);
        let x = s.retention_s.log10();
        segment(ctx, C, (x, lo), (x, hi))?;
        hovers.push(Hover::at(
            ctx,
            (x, est),
            5,
            INK,
            format!(
                "simulated at {}: {} (95%: {} – {})",
                human_duration(s.retention_s),
                fmt(est),
                fmt(lo),
                fmt(hi)
            ),
        ));
    }
    Ok(())
}

/// A hover point on each of the model's retentions, the cheapest one ringed and labelled on
/// the cost panel, where the decision is read.
fn modelled(
    ctx: &mut Ctx<'_, '_>,
    t: &Tradeoff<'_>,
    metric: &Metric,
    hovers: &mut Vec<Hover>,
    labels: &mut Vec<Label>,
) -> Result<(), ChartError> {
    for r in t.rows {
        let v = (metric.model)(r);
        let cheapest = metric.is_cost && r.retention_s == t.cheapest_s;
        hovers.push(Hover::at(
            ctx,
            (r.retention_s.log10(), v),
            if cheapest { 6 } else { 3 },
            if cheapest { OK } else { t.colour },
            format!(
                "{}: {}{}",
                human_duration(r.retention_s),
                (metric.fmt)(v),
                if cheapest { " (cheapest)" } else { "" }
            ),
        ));
        if cheapest {
            tryc!(
                C,
                ctx.draw_series(std::iter::once(
                    EmptyElement::at((r.retention_s.log10(), v))
                        + Circle::new((0, 0), 9, OK.c().stroke_width(2))
                ))
            );
            labels.push(Label {
                at: (r.retention_s.log10(), v),
                text: format!("cheapest {}", human_duration(r.retention_s)),
                offset_px: (-12, -14),
                style: font(13, OK).pos(Pos::new(HPos::Right, VPos::Bottom)),
            });
        }
    }
    Ok(())
}
