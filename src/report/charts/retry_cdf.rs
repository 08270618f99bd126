//! How late retries arrive, against the retention windows that decide whether their key is
//! still there.

use super::{
    Area, Axis, ChartError, Ctx, Hover, RATE_400, Rgb, duration_ticks, line, log_duration_label,
    panel, render, vline,
};
use crate::format::{human_duration, percent, thousands};
use crate::traffic::RetryDelay;

const C: &str = "retry_cdf";

/// The survival axis stops at 0.01 %: below it no retention choice changes anything a reader
/// would act on, and the line would fall off the chart at the distribution's end.
const TO_COME_FLOOR_LOG10: f64 = -4.0;

/// A retention window to mark on the late-retry chart.
pub struct Window {
    pub seconds: f64,
    pub label: String,
    pub colour: Rgb,
}

/// The late-retry distribution: left, the share of retries arrived by each delay (the seed's
/// table as points, the interpolation as a line); right, the share still to come on a log
/// scale, where 0.8 % and 0.1 % are far apart. Retention windows are marked on both.
pub fn retry_cdf(dist: &RetryDelay, windows: &[Window]) -> Result<String, ChartError> {
    let lo_s = 0.25f64.min(dist.points()[0].0 / 2.0);
    let hi_s = dist
        .max_horizon_s()
        .max(dist.points().last().map_or(1.0, |p| p.0));
    let (xlo, xhi) = (lo_s.log10(), hi_s.log10() + 0.05);
    // Sampled evenly in log-time, where the interpolation is linear: 240 points keep the
    // line smooth at 500 px and the SVG small.
    let curve: Vec<(f64, f64)> = (0..=240)
        .map(|i| {
            let x = xlo + (xhi - xlo) * f64::from(i) / 240.0;
            (x, dist.cdf(10f64.powf(x)))
        })
        .collect();
    let x_axis = Axis {
        lo: xlo,
        hi: xhi,
        ticks: duration_ticks(lo_s, hi_s),
        fmt: &log_duration_label,
        desc: "Time since the first attempt (log scale)".into(),
    };
    render(
        C,
        (1000, 330),
        "Late-retry distribution with the retention windows marked",
        |root, hovers| {
            let (left, right) = root.split_horizontally(500);
            arrived(&left, &x_axis, &curve, dist, windows, hovers)?;
            still_to_come(&right, &x_axis, &curve, dist, windows, hovers)
        },
    )
}

/// The left panel, on a linear scale, where the bulk of retries (the first minutes) shows.
fn arrived(
    area: &Area<'_>,
    x_axis: &Axis<'_>,
    curve: &[(f64, f64)],
    dist: &RetryDelay,
    windows: &[Window],
    hovers: &mut Vec<Hover>,
) -> Result<(), ChartError> {
    let pct = |v: f64| format!("{}%", thousands(v * 100.0));
    let y_axis = Axis {
        lo: 0.0,
        hi: 1.0,
        ticks: vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
        fmt: &pct,
        desc: "Retries arrived (%)".into(),
    };
    let mut ctx = panel(
        C,
        area,
        "Retries arrived by each delay",
        x_axis,
        &y_axis,
        52,
    )?;
    line(&mut ctx, C, curve, RATE_400)?;
    mark_windows(&mut ctx, windows, (0.0, 1.0))?;
    for &(t, f) in dist.points() {
        hovers.push(Hover::at(
            &ctx,
            (t.log10(), f),
            4,
            RATE_400,
            format!(
                "{}: {} arrived, {} still to come",
                human_duration(t),
                percent(f),
                percent(1.0 - f)
            ),
        ));
    }
    Ok(())
}

/// The right panel, on a log scale: the tail a retention cuts off is a fraction of a percent,
/// flat on a linear axis, yet it is what the duplicates come from.
fn still_to_come(
    area: &Area<'_>,
    x_axis: &Axis<'_>,
    curve: &[(f64, f64)],
    dist: &RetryDelay,
    windows: &[Window],
    hovers: &mut Vec<Hover>,
) -> Result<(), ChartError> {
    let (ylo, yhi) = (TO_COME_FLOOR_LOG10, 0.0f64);
    let surv_fmt = |v: f64| percent(10f64.powf(v));
    let y_axis = Axis {
        lo: ylo,
        hi: yhi + 0.05,
        ticks: vec![-4.0, -3.0, -2.0, -1.0, 0.0],
        fmt: &surv_fmt,
        desc: "Retries still to come (%, log scale)".into(),
    };
    let mut ctx = panel(C, area, "…and still to come after it", x_axis, &y_axis, 60)?;
    let surv: Vec<(f64, f64)> = curve
        .iter()
        .map(|&(x, c)| (x, (1.0 - c).max(1e-6).log10().max(ylo)))
        .collect();
    line(&mut ctx, C, &surv, RATE_400)?;
    mark_windows(&mut ctx, windows, (ylo, yhi))?;
    for w in windows.iter().filter(|w| w.seconds > 0.0) {
        let s = dist.survival(w.seconds);
        if s > 0.0 {
            hovers.push(Hover::at(
                &ctx,
                (w.seconds.log10(), s.log10().max(ylo)),
                5,
                w.colour,
                format!("{}: {} of retries arrive after it", w.label, percent(s)),
            ));
        }
    }
    for &(t, f) in dist.points() {
        let s = 1.0 - f;
        if s > 0.0 {
            hovers.push(Hover::at(
                &ctx,
                (t.log10(), s.log10().max(ylo)),
                4,
                RATE_400,
                format!("{}: {} still to come", human_duration(t), percent(s)),
            ));
        }
    }
    Ok(())
}

/// The same windows on both panels, so a purge can be read on either scale.
fn mark_windows(
    ctx: &mut Ctx<'_, '_>,
    windows: &[Window],
    y: (f64, f64),
) -> Result<(), ChartError> {
    for (i, w) in windows.iter().enumerate() {
        if w.seconds > 0.0 {
            // Staggered, so labels of nearby windows (24h, 3d) do not overprint.
            let dy = 2 + 14 * (i % 3) as i32;
            vline(ctx, C, w.seconds.log10(), y, w.colour, &w.label, dy)?;
        }
    }
    Ok(())
}
