//! The retention trade-off: what a longer retention costs in store size, what it saves in
//! duplicate labels, and where the daily total is lowest.

use super::{
    Area, Axis, BAD, ChartError, Ctx, Hover, INK, LIMIT, MUTED, OK, Rgb, duration_ticks, font,
    line, log_duration_label, nice_ticks, nice_top, panel, render, segment, text_at, vline,
};
use crate::format::{human_bytes, human_count, human_duration, usd};
use plotters::prelude::*;

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
    },
];

/// What every panel draws from: the arguments of [`tradeoff`], kept together so the panel
/// functions do not each take seven of them.
struct Sweep<'a> {
    rows: &'a [TradeoffRow],
    current_s: f64,
    cheapest_s: f64,
    colour: Rgb,
    sims: &'a [SimPoint],
    limits: &'a Limits,
}

/// The decision's limits, one per panel, in the panel's unit: store bytes per copy, duplicate
/// labels per day, USD per day. A budget not set is `None`.
#[derive(Debug, Clone, Copy, Default)]
pub struct Limits {
    pub store_bytes: Option<f64>,
    pub duplicates_per_day: Option<f64>,
    pub cost_per_day: Option<f64>,
}

/// The retention trade-off: store size, duplicate labels and total daily cost against
/// retention, the cheapest retention ringed and the current one marked. Simulated figures, when
/// given, are drawn as points with their 95 % interval; the budgets and the target as lines.
pub fn tradeoff(
    rows: &[TradeoffRow],
    current_s: f64,
    cheapest_s: f64,
    colour: Rgb,
    sims: &[SimPoint],
    limits: &Limits,
) -> Result<String, ChartError> {
    if rows.is_empty() {
        return Err(ChartError {
            chart: C,
            message: "no retentions to draw".into(),
        });
    }
    let sweep = Sweep {
        rows,
        current_s,
        cheapest_s,
        colour,
        sims,
        limits,
    };
    let x_axis = retention_axis(rows);
    render(
        C,
        (1000, 300),
        "Retention trade-off: store size, duplicates and daily cost",
        |root, hovers| {
            let areas = root.split_evenly((1, 3));
            for (metric, area) in METRICS.iter().zip(areas.iter()) {
                metric_panel(area, &sweep, &x_axis, metric, hovers)?;
            }
            Ok(())
        },
    )
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

/// One metric against retention. Its y axis reaches the highest simulated interval too, so a
/// simulation above the model's curve is never cut off, and the limit when it is near the
/// data (one far above would flatten the curve: the page's script draws by the same rule).
fn metric_panel(
    area: &Area<'_>,
    sweep: &Sweep<'_>,
    x_axis: &Axis<'_>,
    metric: &Metric,
    hovers: &mut Vec<Hover>,
) -> Result<(), ChartError> {
    let max = sweep
        .rows
        .iter()
        .map(metric.model)
        .chain(sweep.sims.iter().map(|s| (metric.sim)(s).2))
        .fold(0.0, f64::max);
    let limit = (metric.limit)(sweep.limits).filter(|l| l.is_finite() && *l <= max * 3.0);
    let top = nice_top(limit.map_or(max, |l| l.max(max)));
    let y_axis = Axis {
        lo: 0.0,
        hi: top,
        ticks: nice_ticks(0.0, top, 4),
        fmt: &metric.fmt,
        desc: metric.desc.to_string(),
    };
    let mut ctx = panel(C, area, metric.caption, x_axis, &y_axis, 62)?;
    let pts = along_retention(sweep.rows, metric.model);
    if metric.is_cost {
        cost_parts(&mut ctx, sweep.rows)?;
    }
    line(&mut ctx, C, &pts, sweep.colour)?;
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
        // At the left, where "now" and the cheapest ring rarely are: under a line in the top
        // half, over one in the bottom half, so it never runs into the x axis.
        text_at(
            &mut ctx,
            C,
            (x0, l),
            format!("{} {}", metric.limit_word, (metric.fmt)(l)),
            (6, if l > top / 2.0 { 4 } else { -18 }),
            font(13, LIMIT),
        )?;
    }
    vline(
        &mut ctx,
        C,
        sweep.current_s.log10(),
        (0.0, top),
        MUTED,
        &format!("now {}", human_duration(sweep.current_s)),
        2,
    )?;
    simulated(&mut ctx, sweep.sims, metric, hovers)?;
    modelled(&mut ctx, sweep, metric, hovers)
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
    sweep: &Sweep<'_>,
    metric: &Metric,
    hovers: &mut Vec<Hover>,
) -> Result<(), ChartError> {
    for r in sweep.rows {
        let v = (metric.model)(r);
        let cheapest = metric.is_cost && r.retention_s == sweep.cheapest_s;
        hovers.push(Hover::at(
            ctx,
            (r.retention_s.log10(), v),
            if cheapest { 6 } else { 3 },
            if cheapest { OK } else { sweep.colour },
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
                        + Text::new(
                            format!("cheapest {}", human_duration(r.retention_s)),
                            (-64, -40),
                            font(13, OK)
                        )
                ))
            );
        }
    }
    Ok(())
}
