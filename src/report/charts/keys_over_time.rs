//! Keys in the store over a sizing run: the whole run, and the sweeper's saw-tooth up close.

use super::{
    Area, Axis, ChartError, Ctx, GRID, Hover, INK, RATE_2000, Rgb, count_at_step, downsample, font,
    line, nice_ticks, nice_top, panel, render, vline,
};
use crate::format::{human_count, human_duration, thousands};
use plotters::prelude::*;

const C: &str = "keys_over_time";

/// The zoom starts an hour after the first purge, when the store has settled into its steady
/// state, and spans two hours: enough sweeps to see the saw-tooth repeat, few enough to see
/// each tooth.
const ZOOM_AFTER_PURGE_S: f64 = 3600.0;
const ZOOM_SPAN_S: f64 = 7200.0;

/// One line of keys in the store over simulated time.
pub struct KeyLine {
    pub label: String,
    pub colour: Rgb,
    /// (seconds, records scaled to full traffic)
    pub points: Vec<(f64, f64)>,
    pub retention_s: f64,
}

/// Keys in the store over time, one line per rate, and below it a two-hour zoom per line
/// where the sweeper's saw-tooth shows: arrivals ramp up between sweeps, each sweep cuts the
/// expired keys away.
pub fn keys_over_time(
    lines: &[KeyLine],
    zoom: bool,
    size: (u32, u32),
) -> Result<String, ChartError> {
    let (x_axis, y_axis) = whole_run_axes(lines);
    let windows: Vec<Vec<(f64, f64)>> = lines.iter().map(steady_window).collect();
    let zoom = zoom && windows.iter().any(|w| w.len() >= 3);
    let zoom_h = if zoom { 230 } else { 0 };
    render(
        C,
        (size.0, size.1 + zoom_h),
        "Keys in the store over simulated time",
        |root, hovers| {
            let (main, rest) = root.split_vertically(size.1);
            whole_run(&main, lines, &x_axis, &y_axis, hovers)?;
            if zoom && !lines.is_empty() {
                let parts = rest.split_evenly((1, lines.len()));
                for ((l, area), window) in lines.iter().zip(parts.iter()).zip(windows) {
                    if window.len() >= 3 {
                        saw_tooth(area, l, &window, hovers)?;
                    }
                }
            }
            Ok(())
        },
    )
}

/// Time in hours, ticked in the steps a clock has, and keys from 0, so runs of different
/// lengths and rates read alike.
fn whole_run_axes(lines: &[KeyLine]) -> (Axis<'static>, Axis<'static>) {
    let t_max = lines
        .iter()
        .flat_map(|l| l.points.last().map(|p| p.0))
        .fold(0.0, f64::max)
        / 3600.0;
    let y_max = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    // At most ten ticks.
    let step = [1.0, 2.0, 3.0, 6.0, 12.0, 24.0, 48.0, 168.0]
        .into_iter()
        .find(|s| t_max / s <= 10.0)
        .unwrap_or(720.0);
    let x_axis = Axis {
        lo: 0.0,
        hi: t_max.max(1.0),
        ticks: (0..=(t_max / step).floor() as usize)
            .map(|i| i as f64 * step)
            .collect(),
        fmt: &hours_label,
        desc: "Simulated time (hours)".into(),
    };
    let top = nice_top(y_max);
    let y_axis = Axis {
        lo: 0.0,
        hi: top,
        ticks: nice_ticks(0.0, top, 5),
        fmt: &human_count,
        desc: "Keys in the store".into(),
    };
    (x_axis, y_axis)
}

fn hours_label(v: f64) -> String {
    format!("{}h", thousands(v))
}

/// The zoom's points, in hours: empty when the run ends before the steady state.
fn steady_window(l: &KeyLine) -> Vec<(f64, f64)> {
    let from = l.retention_s + ZOOM_AFTER_PURGE_S;
    l.points
        .iter()
        .copied()
        .filter(|p| p.0 >= from && p.0 <= from + ZOOM_SPAN_S)
        .map(|(t, k)| (t / 3600.0, k))
        .collect()
}

/// The whole run, with each line's first purge marked: before it the store only grows, after
/// it the sweeper holds it level.
fn whole_run(
    area: &Area<'_>,
    lines: &[KeyLine],
    x_axis: &Axis<'_>,
    y_axis: &Axis<'_>,
    hovers: &mut Vec<Hover>,
) -> Result<(), ChartError> {
    let mut ctx = panel(C, area, "", x_axis, y_axis, 64)?;
    for l in lines {
        let pts: Vec<(f64, f64)> = downsample(&l.points, 500)
            .into_iter()
            .map(|(t, k)| (t / 3600.0, k))
            .collect();
        // Copied out so the legend's closure borrows nothing from `lines`.
        let colour = l.colour;
        tryc!(
            C,
            ctx.draw_series(LineSeries::new(pts.clone(), colour.c().stroke_width(2)))
                .map(|s| s.label(l.label.clone()).legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], colour.c().stroke_width(3))
                }))
        );
        vline(
            &mut ctx,
            C,
            l.retention_s / 3600.0,
            (0.0, y_axis.hi),
            l.colour,
            &format!("first purge ({})", human_duration(l.retention_s)),
            // Two rates with one retention purge at the same hour: one label under the other.
            if lines.len() > 1 && l.colour == RATE_2000 {
                16
            } else {
                2
            },
        )?;
        sampled_hovers(&ctx, &pts, 24, l.colour, hovers, |t, k| {
            format!("{}: {} keys at {}h", l.label, human_count(k), thousands(t))
        });
    }
    if lines.len() > 1 {
        tryc!(
            C,
            ctx.configure_series_labels()
                .position(SeriesLabelPosition::UpperLeft)
                .background_style(WHITE.mix(0.9))
                .border_style(GRID.c())
                .label_font(font(14, INK))
                .draw()
        );
    }
    Ok(())
}

/// Two hours of one line, its y axis fitted to the teeth: on the whole run's axis from 0 they
/// are a line's width high.
fn saw_tooth(
    area: &Area<'_>,
    l: &KeyLine,
    window: &[(f64, f64)],
    hovers: &mut Vec<Hover>,
) -> Result<(), ChartError> {
    let from = l.retention_s + ZOOM_AFTER_PURGE_S;
    let to = from + ZOOM_SPAN_S;
    let lo = window.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
    let hi = window.iter().map(|p| p.1).fold(0.0, f64::max);
    let pad = ((hi - lo) * 0.15).max(hi * 1e-4);
    let x_axis = Axis {
        lo: from / 3600.0,
        hi: to / 3600.0,
        ticks: nice_ticks(from / 3600.0, to / 3600.0, 4),
        fmt: &clock_label,
        desc: "Simulated time".into(),
    };
    let y_ticks = nice_ticks(lo - pad, hi + pad, 4);
    let y_step = y_ticks.get(1).map_or(1.0, |b| b - y_ticks[0]);
    let y_fmt = |v: f64| count_at_step(v, y_step);
    let y_axis = Axis {
        lo: lo - pad,
        hi: hi + pad,
        ticks: y_ticks,
        fmt: &y_fmt,
        desc: "Keys".into(),
    };
    let caption = format!("{}: two hours of the sweeper's saw-tooth", l.label);
    let mut ctx = panel(C, area, &caption, &x_axis, &y_axis, 64)?;
    let window = downsample(window, 400);
    line(&mut ctx, C, &window, l.colour)?;
    sampled_hovers(&ctx, &window, 30, l.colour, hovers, |t, k| {
        format!("{}: {} keys at {}", l.label, human_count(k), clock_label(t))
    });
    Ok(())
}

/// Hours and minutes, because the zoom's ticks fall between the hours.
fn clock_label(v: f64) -> String {
    let h = v.floor();
    let m = ((v - h) * 60.0).round();
    if m == 0.0 {
        format!("{h}h")
    } else {
        format!("{h}h{m:02}")
    }
}

/// Hover points on about `per_line` of a line's points, evenly spaced: one on every point
/// would multiply the SVG's size and bury the line under circles.
fn sampled_hovers(
    ctx: &Ctx<'_, '_>,
    pts: &[(f64, f64)],
    per_line: usize,
    colour: Rgb,
    hovers: &mut Vec<Hover>,
    title: impl Fn(f64, f64) -> String,
) {
    let every = (pts.len().max(1) / per_line).max(1);
    for (i, &(t, k)) in pts.iter().enumerate() {
        if i % every == 0 {
            hovers.push(Hover::at(ctx, (t, k), 3, colour, title(t, k)));
        }
    }
}
