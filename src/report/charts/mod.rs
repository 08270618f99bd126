//! The report's charts, drawn with plotters as inline SVG.
//!
//! Every chart has a fixed pixel size and at most a few hundred points per series (series are
//! downsampled keeping each bucket's minimum and maximum, so the sweeper's saw-tooth survives
//! as an envelope): criterion's users complained of 10 MiB plots, and a report page must open
//! at once. Axes are linear `f64` with explicit tick positions; log axes are drawn as log10 of
//! the value with labels mapped back, which keeps plotters' generic types to one shape.
//!
//! Points carry an SVG `<title>`, so hovering shows the value without any script; the page's
//! script only restyles it as a tooltip. No chart function panics: plotters errors come back
//! as [`ChartError`] and the page shows a note instead of the chart.

use crate::format::{human_bytes, human_count, human_duration, thousands, usd};
use crate::sim::timeline::TimelineEvent;
use crate::traffic::RetryDelay;
use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::prelude::*;
use std::ops::Range;

#[derive(Debug, thiserror::Error)]
#[error("chart `{chart}`: {message}")]
pub struct ChartError {
    pub chart: &'static str,
    pub message: String,
}

/// A colour as plotters and CSS both want it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

impl Rgb {
    pub fn hex(self) -> String {
        format!("#{:02x}{:02x}{:02x}", self.0, self.1, self.2)
    }
    fn c(self) -> RGBColor {
        RGBColor(self.0, self.1, self.2)
    }
}

pub const INK: Rgb = Rgb(31, 41, 55);
pub const MUTED: Rgb = Rgb(107, 114, 128);
const GRID: Rgb = Rgb(229, 231, 235);
pub const OK: Rgb = Rgb(22, 163, 74);
pub const WARN: Rgb = Rgb(217, 119, 6);
pub const BAD: Rgb = Rgb(220, 38, 38);
pub const CARRIER: Rgb = Rgb(124, 58, 237);
/// The seed's two rates keep their colours on every chart; other rates take the rest in order.
const RATE_400: Rgb = Rgb(37, 99, 235);
const RATE_2000: Rgb = Rgb(234, 88, 12);
const OTHER_RATES: [Rgb; 5] = [
    Rgb(5, 150, 105),
    Rgb(219, 39, 119),
    Rgb(8, 145, 178),
    Rgb(101, 163, 13),
    Rgb(147, 51, 234),
];

/// One colour per arrival rate, the same on every chart of a page.
#[derive(Debug, Clone)]
pub struct RatePalette {
    rates: Vec<f64>,
}

impl RatePalette {
    pub fn new(rates: impl IntoIterator<Item = f64>) -> Self {
        let mut rates: Vec<f64> = rates.into_iter().filter(|r| r.is_finite()).collect();
        rates.sort_by(f64::total_cmp);
        rates.dedup();
        RatePalette { rates }
    }

    pub fn colour(&self, rate: f64) -> Rgb {
        if (rate - 400.0).abs() < 1e-9 {
            return RATE_400;
        }
        if (rate - 2000.0).abs() < 1e-9 {
            return RATE_2000;
        }
        let others: Vec<f64> = self
            .rates
            .iter()
            .copied()
            .filter(|r| (r - 400.0).abs() >= 1e-9 && (r - 2000.0).abs() >= 1e-9)
            .collect();
        let i = others.iter().position(|r| *r == rate).unwrap_or(0);
        OTHER_RATES[i % OTHER_RATES.len()]
    }
}

/// A point with a hover text, drawn after plotters is done.
struct Hover {
    px: (i32, i32),
    r: u32,
    colour: Rgb,
    title: String,
}

/// A linear `f64` axis whose ticks are exactly the ones given: every chart picks its own
/// (durations on log axes, round numbers elsewhere) and formats them itself.
#[derive(Debug, Clone)]
struct Lin {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
}

impl Ranged for Lin {
    type FormatOption = DefaultFormatting;
    type ValueType = f64;

    fn map(&self, value: &f64, limit: (i32, i32)) -> i32 {
        let span = self.hi - self.lo;
        let f = if span == 0.0 {
            0.0
        } else {
            (value - self.lo) / span
        };
        limit.0 + (f * f64::from(limit.1 - limit.0)).round() as i32
    }

    fn key_points<Hint: KeyPointHint>(&self, hint: Hint) -> Vec<f64> {
        // Light grid lines are off; bold ones sit at the ticks.
        if hint.weight().allow_light_points() {
            Vec::new()
        } else {
            self.ticks.clone()
        }
    }

    fn range(&self) -> Range<f64> {
        self.lo..self.hi
    }
}

type Coord = Cartesian2d<Lin, Lin>;
type Ctx<'a, 'b> = ChartContext<'a, SVGBackend<'b>, Coord>;

/// One axis: its range, where its ticks go, how they read, and what it measures (with unit).
struct Axis<'f> {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
    fmt: &'f dyn Fn(f64) -> String,
    desc: String,
}

fn err(chart: &'static str) -> impl Fn(&dyn std::fmt::Display) -> ChartError {
    move |e| ChartError {
        chart,
        message: e.to_string(),
    }
}

macro_rules! tryc {
    ($chart:expr, $e:expr) => {
        $e.map_err(|e| err($chart)(&e))?
    };
}

/// `size` is what plotters calls a size; its SVG writes `size / 1.24` px, so 13 gives 10.5 px,
/// above the 9 px a page must never go below.
fn font(size: u32, colour: Rgb) -> TextStyle<'static> {
    ("sans-serif", size).into_font().color(&colour.c())
}

/// A framed panel with a caption, gridlines at the ticks and labelled axes.
fn panel<'a, 'b: 'a>(
    chart: &'static str,
    area: &'a DrawingArea<SVGBackend<'b>, Shift>,
    caption: &str,
    x: &Axis<'_>,
    y: &Axis<'_>,
    y_label_px: u32,
) -> Result<Ctx<'a, 'b>, ChartError> {
    let mut builder = ChartBuilder::on(area);
    builder
        .margin_top(6)
        .margin_right(18)
        .margin_left(6)
        .x_label_area_size(38)
        .y_label_area_size(y_label_px);
    if !caption.is_empty() {
        builder.caption(caption, font(16, INK));
    }
    let mut ctx = tryc!(
        chart,
        builder.build_cartesian_2d(
            Lin {
                lo: x.lo,
                hi: x.hi,
                ticks: x.ticks.clone(),
            },
            Lin {
                lo: y.lo,
                hi: y.hi,
                ticks: y.ticks.clone(),
            },
        )
    );
    let xf = |v: &f64| (x.fmt)(*v);
    let yf = |v: &f64| (y.fmt)(*v);
    tryc!(
        chart,
        ctx.configure_mesh()
            .bold_line_style(GRID.c().stroke_width(1))
            .light_line_style(TRANSPARENT)
            .axis_style(MUTED.c())
            .label_style(font(13, MUTED))
            .axis_desc_style(font(14, INK))
            .x_label_formatter(&xf)
            .y_label_formatter(&yf)
            .x_desc(x.desc.clone())
            .y_desc(y.desc.clone())
            .draw()
    );
    Ok(ctx)
}

/// Writes the hover points into the SVG plotters produced and marks it up for the page.
fn finish(svg: String, aria: &str, hovers: &[Hover]) -> String {
    let mut out = svg.replacen(
        "<svg ",
        &format!(
            "<svg class=\"chart\" role=\"img\" aria-label=\"{}\" ",
            escape(aria)
        ),
        1,
    );
    if !hovers.is_empty() {
        let mut g = String::from("<g class=\"pts\">");
        for h in hovers {
            g.push_str(&format!(
                "<circle class=\"pt\" cx=\"{}\" cy=\"{}\" r=\"{}\" fill=\"{}\" stroke=\"#fff\" stroke-width=\"1\"><title>{}</title></circle>",
                h.px.0,
                h.px.1,
                h.r,
                h.colour.hex(),
                escape(&h.title)
            ));
        }
        g.push_str("</g>");
        if let Some(i) = out.rfind("</svg>") {
            out.insert_str(i, &g);
        }
    }
    out
}

/// Escapes text for an SVG attribute or element.
pub fn escape(text: &str) -> String {
    text.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
}

/// Keeps at most `max` points: each bucket contributes its lowest and highest point, in time
/// order, so peaks and troughs (the sweeper's teeth) are never smoothed away.
pub fn downsample(points: &[(f64, f64)], max: usize) -> Vec<(f64, f64)> {
    if points.len() <= max || max < 4 {
        return points.to_vec();
    }
    let buckets = max / 2;
    let size = points.len().div_ceil(buckets);
    let mut out = Vec::with_capacity(max);
    for chunk in points.chunks(size) {
        let lo = chunk
            .iter()
            .enumerate()
            .min_by(|a, b| a.1.1.total_cmp(&b.1.1))
            .map(|(i, _)| i)
            .unwrap_or(0);
        let hi = chunk
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.1.total_cmp(&b.1.1))
            .map(|(i, _)| i)
            .unwrap_or(0);
        let (a, b) = if lo <= hi { (lo, hi) } else { (hi, lo) };
        out.push(chunk[a]);
        if b != a {
            out.push(chunk[b]);
        }
    }
    out
}

/// Round tick positions covering `lo..hi`, about `n` of them, at 1, 2, 2.5 or 5 × 10^k.
pub fn nice_ticks(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    if hi.partial_cmp(&lo) != Some(std::cmp::Ordering::Greater)
        || !lo.is_finite()
        || !hi.is_finite()
    {
        return vec![lo];
    }
    let raw = (hi - lo) / n.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 2.5, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let first = (lo / step).ceil() * step;
    let mut out = Vec::new();
    let mut v = first;
    // A bound, not an expectation: n ticks plus rounding.
    for _ in 0..(4 * n + 4) {
        if v > hi + step * 1e-9 {
            break;
        }
        out.push(if v.abs() < step * 1e-9 { 0.0 } else { v });
        v += step;
    }
    out
}

/// The top of a y axis from 0 that shows `max` with some room: the next nice tick above it.
fn nice_top(max: f64) -> f64 {
    if max.is_nan() || max <= 0.0 || !max.is_finite() {
        return 1.0;
    }
    let ticks = nice_ticks(0.0, max * 1.08, 5);
    let step = ticks.get(1).copied().unwrap_or(max);
    (max * 1.08 / step).ceil() * step
}

/// A count on an axis whose ticks are `step` apart: millions with as many decimals as the step
/// needs, so ticks 50,000 apart near 34.6M read 34.60M, 34.65M rather than 34.6M twice.
fn count_at_step(v: f64, step: f64) -> String {
    if v.abs() >= 1e6 && step > 0.0 {
        let decimals = (-(step / 1e6).log10()).ceil().clamp(0.0, 4.0) as usize;
        format!("{:.decimals$}M", v / 1e6)
    } else {
        thousands(v)
    }
}

/// Durations people configure, as log10 seconds, for log-time axes.
fn duration_ticks(lo_s: f64, hi_s: f64) -> Vec<f64> {
    [
        1.0,
        10.0,
        60.0,
        600.0,
        3_600.0,
        21_600.0,
        86_400.0,
        259_200.0,
        604_800.0,
        2_592_000.0,
    ]
    .iter()
    .filter(|s| **s >= lo_s * 0.999 && **s <= hi_s * 1.001)
    .map(|s| s.log10())
    .collect()
}

fn log_duration_label(v: f64) -> String {
    human_duration((10f64.powf(v) * 1000.0).round() / 1000.0)
}

/// A vertical marker line with a label at its top.
fn vline(
    ctx: &mut Ctx<'_, '_>,
    chart: &'static str,
    x: f64,
    y: (f64, f64),
    colour: Rgb,
    label: &str,
    label_dy: i32,
) -> Result<(), ChartError> {
    tryc!(
        chart,
        ctx.draw_series(DashedLineSeries::new(
            vec![(x, y.0), (x, y.1)],
            5,
            4,
            colour.c().stroke_width(1)
        ))
    );
    if !label.is_empty() {
        tryc!(
            chart,
            ctx.draw_series(std::iter::once(
                EmptyElement::at((x, y.1))
                    + Text::new(label.to_string(), (4, label_dy), font(13, colour))
            ))
        );
    }
    Ok(())
}

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
    const C: &str = "retry_cdf";
    let lo_s = 0.25f64.min(dist.points()[0].0 / 2.0);
    let hi_s = dist
        .max_horizon_s()
        .max(dist.points().last().map_or(1.0, |p| p.0));
    let (xlo, xhi) = (lo_s.log10(), hi_s.log10() + 0.05);
    let curve: Vec<(f64, f64)> = (0..=240)
        .map(|i| {
            let x = xlo + (xhi - xlo) * f64::from(i) / 240.0;
            (x, dist.cdf(10f64.powf(x)))
        })
        .collect();
    let x_fmt = log_duration_label;
    let x_axis = Axis {
        lo: xlo,
        hi: xhi,
        ticks: duration_ticks(lo_s, hi_s),
        fmt: &x_fmt,
        desc: "Time since the first attempt (log scale)".into(),
    };
    let pct = |v: f64| format!("{}%", thousands(v * 100.0));
    let mut svg = String::new();
    let mut hovers = Vec::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 330)).into_drawing_area();
        tryc!(C, root.fill(&WHITE));
        let (left, right) = root.split_horizontally(500);
        // Left: arrived, linear.
        let y_axis = Axis {
            lo: 0.0,
            hi: 1.0,
            ticks: vec![0.0, 0.2, 0.4, 0.6, 0.8, 1.0],
            fmt: &pct,
            desc: "Retries arrived (%)".into(),
        };
        let mut ctx = panel(
            C,
            &left,
            "Retries arrived by each delay",
            &x_axis,
            &y_axis,
            52,
        )?;
        tryc!(
            C,
            ctx.draw_series(LineSeries::new(curve.clone(), RATE_400.c().stroke_width(2)))
        );
        for (i, w) in windows.iter().enumerate() {
            if w.seconds > 0.0 {
                // Staggered, so labels of nearby windows (24h, 3d) do not overprint.
                let dy = 2 + 14 * (i % 3) as i32;
                vline(
                    &mut ctx,
                    C,
                    w.seconds.log10(),
                    (0.0, 1.0),
                    w.colour,
                    &w.label,
                    dy,
                )?;
            }
        }
        for &(t, f) in dist.points() {
            hovers.push(Hover {
                px: ctx.backend_coord(&(t.log10(), f)),
                r: 4,
                colour: RATE_400,
                title: format!(
                    "{}: {} arrived, {} still to come",
                    human_duration(t),
                    crate::format::percent(f),
                    crate::format::percent(1.0 - f)
                ),
            });
        }
        // Right: still to come, log.
        let (ylo, yhi) = (-4.0f64, 0.0f64);
        let surv_fmt = |v: f64| crate::format::percent(10f64.powf(v));
        let y_axis = Axis {
            lo: ylo,
            hi: yhi + 0.05,
            ticks: vec![-4.0, -3.0, -2.0, -1.0, 0.0],
            fmt: &surv_fmt,
            desc: "Retries still to come (%, log scale)".into(),
        };
        let mut ctx = panel(
            C,
            &right,
            "…and still to come after it",
            &x_axis,
            &y_axis,
            60,
        )?;
        let surv: Vec<(f64, f64)> = curve
            .iter()
            .map(|&(x, c)| (x, (1.0 - c).max(1e-6).log10().max(ylo)))
            .collect();
        tryc!(
            C,
            ctx.draw_series(LineSeries::new(surv, RATE_400.c().stroke_width(2)))
        );
        for (i, w) in windows.iter().enumerate() {
            if w.seconds > 0.0 {
                let dy = 2 + 14 * (i % 3) as i32;
                vline(
                    &mut ctx,
                    C,
                    w.seconds.log10(),
                    (ylo, yhi),
                    w.colour,
                    &w.label,
                    dy,
                )?;
                let s = dist.survival(w.seconds);
                if s > 0.0 {
                    hovers.push(Hover {
                        px: ctx.backend_coord(&(w.seconds.log10(), s.log10().max(ylo))),
                        r: 5,
                        colour: w.colour,
                        title: format!(
                            "{}: {} of retries arrive after it",
                            w.label,
                            crate::format::percent(s)
                        ),
                    });
                }
            }
        }
        for &(t, f) in dist.points() {
            let s = 1.0 - f;
            if s > 0.0 {
                hovers.push(Hover {
                    px: ctx.backend_coord(&(t.log10(), s.log10().max(ylo))),
                    r: 4,
                    colour: RATE_400,
                    title: format!(
                        "{}: {} still to come",
                        human_duration(t),
                        crate::format::percent(s)
                    ),
                });
            }
        }
        tryc!(C, root.present());
    }
    Ok(finish(
        svg,
        "Late-retry distribution with the retention windows marked",
        &hovers,
    ))
}

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
    const C: &str = "keys_over_time";
    let t_max = lines
        .iter()
        .flat_map(|l| l.points.last().map(|p| p.0))
        .fold(0.0, f64::max)
        / 3600.0;
    let y_max = lines
        .iter()
        .flat_map(|l| l.points.iter().map(|p| p.1))
        .fold(0.0, f64::max);
    let hours = |v: f64| format!("{}h", thousands(v));
    let count = |v: f64| human_count(v);
    // Hours in the steps a clock has: at most ten ticks.
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
        fmt: &hours,
        desc: "Simulated time (hours)".into(),
    };
    let top = nice_top(y_max);
    let y_axis = Axis {
        lo: 0.0,
        hi: top,
        ticks: nice_ticks(0.0, top, 5),
        fmt: &count,
        desc: "Keys in the store".into(),
    };
    // Two hours of the steady state, an hour after the first purge, for each line that has it.
    let windows: Vec<Vec<(f64, f64)>> = lines
        .iter()
        .map(|l| {
            let from = l.retention_s + 3600.0;
            l.points
                .iter()
                .copied()
                .filter(|p| p.0 >= from && p.0 <= from + 7200.0)
                .map(|(t, k)| (t / 3600.0, k))
                .collect()
        })
        .collect();
    let zoom = zoom && windows.iter().any(|w| w.len() >= 3);
    let zoom_h = if zoom { 230 } else { 0 };
    let mut svg = String::new();
    let mut hovers = Vec::new();
    {
        let root = SVGBackend::with_string(&mut svg, (size.0, size.1 + zoom_h)).into_drawing_area();
        tryc!(C, root.fill(&WHITE));
        let (main, rest) = root.split_vertically(size.1);
        let mut ctx = panel(C, &main, "", &x_axis, &y_axis, 64)?;
        for l in lines {
            let pts: Vec<(f64, f64)> = downsample(&l.points, 500)
                .into_iter()
                .map(|(t, k)| (t / 3600.0, k))
                .collect();
            tryc!(
                C,
                ctx.draw_series(LineSeries::new(pts.clone(), l.colour.c().stroke_width(2)))
                    .map(|s| s.label(l.label.clone()).legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], l.colour.c().stroke_width(3))
                    }))
            );
            vline(
                &mut ctx,
                C,
                l.retention_s / 3600.0,
                (0.0, top),
                l.colour,
                &format!("first purge ({})", human_duration(l.retention_s)),
                if lines.len() > 1 && l.colour == RATE_2000 {
                    16
                } else {
                    2
                },
            )?;
            let n = pts.len().max(1);
            for (i, &(t, k)) in pts.iter().enumerate() {
                if i % (n / 24).max(1) == 0 {
                    hovers.push(Hover {
                        px: ctx.backend_coord(&(t, k)),
                        r: 3,
                        colour: l.colour,
                        title: format!("{}: {} keys at {}h", l.label, human_count(k), thousands(t)),
                    });
                }
            }
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
        if zoom && !lines.is_empty() {
            let parts = rest.split_evenly((1, lines.len()));
            for ((l, area), window) in lines.iter().zip(parts.iter()).zip(windows) {
                let from = l.retention_s + 3600.0;
                let to = from + 7200.0;
                if window.len() < 3 {
                    continue;
                }
                let lo = window.iter().map(|p| p.1).fold(f64::INFINITY, f64::min);
                let hi = window.iter().map(|p| p.1).fold(0.0, f64::max);
                let pad = ((hi - lo) * 0.15).max(hi * 1e-4);
                let zx = |v: f64| {
                    let h = v.floor();
                    let m = ((v - h) * 60.0).round();
                    if m == 0.0 {
                        format!("{h}h")
                    } else {
                        format!("{h}h{m:02}")
                    }
                };
                let zx_axis = Axis {
                    lo: from / 3600.0,
                    hi: to / 3600.0,
                    ticks: nice_ticks(from / 3600.0, to / 3600.0, 4),
                    fmt: &zx,
                    desc: "Simulated time".into(),
                };
                let zy_ticks = nice_ticks(lo - pad, hi + pad, 4);
                let zy_step = zy_ticks.get(1).map_or(1.0, |b| b - zy_ticks[0]);
                let zy_fmt = |v: f64| count_at_step(v, zy_step);
                let zy_axis = Axis {
                    lo: lo - pad,
                    hi: hi + pad,
                    ticks: zy_ticks.clone(),
                    fmt: &zy_fmt,
                    desc: "Keys".into(),
                };
                let caption = format!("{}: two hours of the sweeper's saw-tooth", l.label);
                let mut z = panel(C, area, &caption, &zx_axis, &zy_axis, 64)?;
                let window = downsample(&window, 400);
                tryc!(
                    C,
                    z.draw_series(LineSeries::new(
                        window.clone(),
                        l.colour.c().stroke_width(2)
                    ))
                );
                let n = window.len().max(1);
                for (i, &(t, k)) in window.iter().enumerate() {
                    if i % (n / 30).max(1) == 0 {
                        hovers.push(Hover {
                            px: z.backend_coord(&(t, k)),
                            r: 3,
                            colour: l.colour,
                            title: format!("{}: {} keys at {}", l.label, human_count(k), zx(t)),
                        });
                    }
                }
            }
        }
        tryc!(C, root.present());
    }
    Ok(finish(
        svg,
        "Keys in the store over simulated time",
        &hovers,
    ))
}

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

/// One panel of the trade-off: caption, axis description, the model's value, the simulated
/// value, and how values read.
type TradeoffPanel<'f> = (
    &'static str,
    &'static str,
    fn(&TradeoffRow) -> f64,
    fn(&SimPoint) -> (f64, f64, f64),
    &'f dyn Fn(f64) -> String,
);

/// The retention trade-off: store size, duplicate labels and total daily cost against
/// retention, the cheapest retention ringed and the current one marked. Simulated figures, when
/// given, are drawn as points with their 95 % interval.
pub fn tradeoff(
    rows: &[TradeoffRow],
    current_s: f64,
    cheapest_s: f64,
    colour: Rgb,
    sims: &[SimPoint],
) -> Result<String, ChartError> {
    const C: &str = "tradeoff";
    if rows.is_empty() {
        return Err(ChartError {
            chart: C,
            message: "no retentions to draw".into(),
        });
    }
    let lo_s = rows.first().map_or(3600.0, |r| r.retention_s);
    let hi_s = rows.last().map_or(2_592_000.0, |r| r.retention_s);
    let (xlo, xhi) = (lo_s.log10() - 0.08, hi_s.log10() + 0.08);
    let x_fmt = log_duration_label;
    let x_axis = Axis {
        lo: xlo,
        hi: xhi,
        ticks: duration_ticks(lo_s, hi_s)
            .into_iter()
            .filter(|t| (*t - 1.0).abs() > 1e-9 && (*t - 600f64.log10()).abs() > 1e-9)
            .collect(),
        fmt: &x_fmt,
        desc: "Retention (log scale)".into(),
    };
    let panels: [TradeoffPanel<'_>; 3] = [
        (
            "Store size",
            "Store size (bytes)",
            |r| r.store_bytes,
            |s| s.store,
            &|v| human_bytes(v),
        ),
        (
            "Duplicate labels per day",
            "Duplicate labels per day",
            |r| r.duplicates_per_day,
            |s| s.duplicates,
            &|v| human_count(v),
        ),
        (
            "Total daily cost",
            "Cost per day (USD)",
            |r| r.total_cost_per_day,
            |s| s.cost,
            &|v| usd(v),
        ),
    ];
    let mut svg = String::new();
    let mut hovers = Vec::new();
    {
        let root = SVGBackend::with_string(&mut svg, (1000, 300)).into_drawing_area();
        tryc!(C, root.fill(&WHITE));
        let areas = root.split_evenly((1, 3));
        for (pi, ((caption, desc, get, sim_get, fmt), area)) in
            panels.iter().zip(areas.iter()).enumerate()
        {
            let max = rows
                .iter()
                .map(get)
                .chain(sims.iter().map(|s| sim_get(s).2))
                .fold(0.0, f64::max);
            let top = nice_top(max);
            let y_axis = Axis {
                lo: 0.0,
                hi: top,
                ticks: nice_ticks(0.0, top, 4),
                fmt,
                desc: desc.to_string(),
            };
            let mut ctx = panel(C, area, caption, &x_axis, &y_axis, 62)?;
            let pts: Vec<(f64, f64)> = rows
                .iter()
                .map(|r| (r.retention_s.log10(), get(r)))
                .collect();
            if pi == 2 {
                // The two parts of the cost, thin and dashed, under the total.
                for (part, c) in [
                    (
                        rows.iter()
                            .map(|r| (r.retention_s.log10(), r.storage_cost_per_day))
                            .collect::<Vec<_>>(),
                        MUTED,
                    ),
                    (
                        rows.iter()
                            .map(|r| (r.retention_s.log10(), r.duplicate_cost_per_day))
                            .collect(),
                        BAD,
                    ),
                ] {
                    tryc!(
                        C,
                        ctx.draw_series(DashedLineSeries::new(part, 4, 3, c.c().stroke_width(1)))
                    );
                }
            }
            tryc!(
                C,
                ctx.draw_series(LineSeries::new(pts.clone(), colour.c().stroke_width(2)))
            );
            vline(
                &mut ctx,
                C,
                current_s.log10(),
                (0.0, top),
                MUTED,
                &format!("now {}", human_duration(current_s)),
                2,
            )?;
            for s in sims {
                let (lo, est, hi) = sim_get(s);
                let x = s.retention_s.log10();
                tryc!(
                    C,
                    ctx.draw_series(std::iter::once(PathElement::new(
                        vec![(x, lo), (x, hi)],
                        INK.c().stroke_width(2)
                    )))
                );
                hovers.push(Hover {
                    px: ctx.backend_coord(&(x, est)),
                    r: 5,
                    colour: INK,
                    title: format!(
                        "simulated at {}: {} (95%: {} – {})",
                        human_duration(s.retention_s),
                        fmt(est),
                        fmt(lo),
                        fmt(hi)
                    ),
                });
            }
            for r in rows {
                let v = get(r);
                let cheapest = pi == 2 && r.retention_s == cheapest_s;
                hovers.push(Hover {
                    px: ctx.backend_coord(&(r.retention_s.log10(), v)),
                    r: if cheapest { 6 } else { 3 },
                    colour: if cheapest { OK } else { colour },
                    title: format!(
                        "{}: {}{}",
                        human_duration(r.retention_s),
                        fmt(v),
                        if cheapest { " (cheapest)" } else { "" }
                    ),
                });
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
        }
        tryc!(C, root.present());
    }
    Ok(finish(
        svg,
        "Retention trade-off: store size, duplicates and daily cost",
        &hovers,
    ))
}

/// One bar of a horizontal bar chart.
pub struct Bar {
    pub label: String,
    pub value: f64,
    /// 95 % interval, drawn as a whisker.
    pub interval: Option<(f64, f64)>,
    pub colour: Rgb,
    pub hover: String,
    pub text: String,
}

/// Horizontal bars, top to bottom in the order given, on a linear or log axis, with an optional
/// reference line (e.g. the assumed 512 B per record).
pub fn bars(
    chart: &'static str,
    bars: &[Bar],
    x_desc: &str,
    log: bool,
    fmt: &dyn Fn(f64) -> String,
    reference: Option<(f64, String)>,
    width: u32,
) -> Result<String, ChartError> {
    let c = chart;
    let n = bars.len().max(1);
    let max = bars
        .iter()
        .map(|b| b.interval.map_or(b.value, |i| i.1.max(b.value)))
        .chain(reference.iter().map(|r| r.0))
        .fold(0.0, f64::max);
    let label_px = bars
        .iter()
        .map(|b| b.label.chars().count())
        .max()
        .unwrap_or(8)
        .clamp(6, 34) as u32
        * 7
        + 14;
    let (x_lo, x_hi, ticks) = if log {
        // A decade and a half of room past the longest bar for its value label.
        let hi = (max.max(10.0).log10() + 1.6).ceil();
        (0.0, hi, (0..=hi as i32).map(f64::from).collect::<Vec<_>>())
    } else {
        let top = nice_top(max * 1.12);
        (0.0, top, nice_ticks(0.0, top, 5))
    };
    let to_x = |v: f64| if log { v.max(1.0).log10() } else { v };
    let log_fmt = |v: f64| fmt(10f64.powf(v));
    let lin_fmt = |v: f64| fmt(v);
    let x_axis = Axis {
        lo: x_lo,
        hi: x_hi,
        ticks,
        fmt: if log { &log_fmt } else { &lin_fmt },
        desc: x_desc.to_string(),
    };
    let labels: Vec<String> = bars.iter().map(|b| b.label.clone()).collect();
    let y_fmt = |v: f64| category_label(&labels, v);
    let y_axis = Axis {
        lo: -0.6,
        hi: n as f64 - 0.4,
        ticks: (0..n).map(|i| i as f64).collect(),
        fmt: &y_fmt,
        desc: String::new(),
    };
    let height = 64 + 30 * n as u32;
    let mut svg = String::new();
    let mut hovers = Vec::new();
    {
        let root = SVGBackend::with_string(&mut svg, (width, height)).into_drawing_area();
        tryc!(c, root.fill(&WHITE));
        let mut ctx = panel(c, &root, "", &x_axis, &y_axis, label_px)?;
        for (i, b) in bars.iter().enumerate() {
            let y = (n - 1 - i) as f64;
            let x1 = to_x(b.value);
            tryc!(
                c,
                ctx.draw_series(std::iter::once(Rectangle::new(
                    [(x_lo, y - 0.32), (x1.max(x_lo), y + 0.32)],
                    b.colour.c().mix(0.85).filled()
                )))
            );
            let mut end = x1;
            if let Some((lo, hi)) = b.interval {
                let (lo, hi) = (to_x(lo), to_x(hi));
                end = end.max(hi);
                tryc!(
                    c,
                    ctx.draw_series(std::iter::once(PathElement::new(
                        vec![(lo, y), (hi, y)],
                        INK.c().stroke_width(2)
                    )))
                );
                for x in [lo, hi] {
                    tryc!(
                        c,
                        ctx.draw_series(std::iter::once(PathElement::new(
                            vec![(x, y - 0.15), (x, y + 0.15)],
                            INK.c().stroke_width(2)
                        )))
                    );
                }
            }
            tryc!(
                c,
                ctx.draw_series(std::iter::once(
                    EmptyElement::at((end, y)) + Text::new(b.text.clone(), (6, -6), font(13, INK))
                ))
            );
            hovers.push(Hover {
                px: ctx.backend_coord(&(x1, y)),
                r: 4,
                colour: b.colour,
                title: b.hover.clone(),
            });
        }
        if let Some((v, label)) = &reference {
            vline(&mut ctx, c, to_x(*v), (-0.6, n as f64 - 0.4), BAD, label, 2)?;
        }
        tryc!(c, root.present());
    }
    Ok(finish(svg, x_desc, &hovers))
}

/// The lanes of a scripted timeline, like the seed's "The lease decides who may run": leases
/// and carrier calls as bars, requests, answers and deaths as marks, the lease expiry dashed.
pub fn timeline(events: &[TimelineEvent], lanes: &[String]) -> Result<String, ChartError> {
    const C: &str = "timeline";
    let n = lanes.len().max(1);
    let instant_end = events
        .iter()
        .filter(|e| e.kind != "lease")
        .map(|e| e.end_s.unwrap_or(e.start_s))
        .fold(0.0, f64::max);
    let t_lo = events.iter().map(|e| e.start_s).fold(0.0, f64::min) - 1.0;
    // Room on the right for the last label (the caller's 201 and its tracking number).
    let t_hi = instant_end + (0.14 * (instant_end - t_lo)).max(3.0);
    let secs = |v: f64| format!("{} s", crate::format::significant(v, 3));
    let x_axis = Axis {
        lo: t_lo,
        hi: t_hi,
        ticks: nice_ticks(t_lo.max(0.0), t_hi, 10),
        fmt: &secs,
        desc: "Time (seconds)".into(),
    };
    let lane_y = |lane: &str| {
        let i = lanes.iter().position(|l| l == lane).unwrap_or(0);
        (n - 1 - i) as f64
    };
    let y_fmt = |v: f64| category_label(lanes, v);
    let y_axis = Axis {
        lo: -0.7,
        hi: n as f64 - 0.3,
        ticks: (0..n).map(|i| i as f64).collect(),
        fmt: &y_fmt,
        desc: String::new(),
    };
    let mut svg = String::new();
    let mut hovers = Vec::new();
    {
        let root =
            SVGBackend::with_string(&mut svg, (1000, 80 + 70 * n as u32)).into_drawing_area();
        tryc!(C, root.fill(&WHITE));
        let mut ctx = panel(C, &root, "", &x_axis, &y_axis, 90)?;
        let mut caller_toggle = false;
        for e in events {
            let y = lane_y(&e.lane);
            let when = match e.end_s {
                Some(end) => format!(
                    "{}–{} s",
                    crate::format::significant(e.start_s, 3),
                    crate::format::significant(end, 3)
                ),
                None => format!("{} s", crate::format::significant(e.start_s, 3)),
            };
            let title = format!("{when} · {} · {}", e.lane, e.text);
            match (e.kind, e.end_s) {
                ("lease" | "carrier", Some(end)) => {
                    let (colour, h, alpha, dy) = if e.kind == "lease" {
                        (WARN, 0.34, 0.22, 0.0)
                    } else {
                        (CARRIER, 0.22, 0.75, 0.0)
                    };
                    let end = end.min(t_hi);
                    tryc!(
                        C,
                        ctx.draw_series(std::iter::once(Rectangle::new(
                            [(e.start_s, y - h + dy), (end, y + h + dy)],
                            colour.c().mix(alpha).filled()
                        )))
                    );
                    let label = e.text.clone();
                    tryc!(
                        C,
                        ctx.draw_series(std::iter::once(
                            EmptyElement::at((e.start_s, y + h))
                                + Text::new(
                                    label,
                                    (3, -15),
                                    font(14, if e.kind == "lease" { WARN } else { CARRIER })
                                )
                        ))
                    );
                    hovers.push(Hover {
                        px: ctx.backend_coord(&(e.start_s, y)),
                        r: 4,
                        colour,
                        title,
                    });
                    if e.kind == "lease" && end < t_hi && e.end_s.is_some_and(|x| x <= t_hi) {
                        vline(
                            &mut ctx,
                            C,
                            end,
                            (-0.7, n as f64 - 0.3),
                            WARN,
                            "lease expires",
                            2,
                        )?;
                    }
                }
                _ => {
                    let (colour, r) = match e.kind {
                        "died" => (BAD, 6),
                        "send" => (MUTED, 4),
                        "reply" if e.text.starts_with('2') => (OK, 6),
                        "reply" | "answer" if e.text.starts_with("409") => (WARN, 5),
                        "reply" | "answer" => (BAD, 5),
                        _ => (INK, 4),
                    };
                    // In the caller's lane sends and replies alternate above and below the
                    // line, so labels a few hundred milliseconds apart do not overprint.
                    let dy = if e.lane == "Caller" {
                        caller_toggle = !caller_toggle;
                        if e.kind == "send" { -20 } else { 8 }
                    } else {
                        8
                    };
                    let text = match e.kind {
                        "send" => e.text.trim_end_matches(": CreateLabel").to_string(),
                        "died" => "✕ process killed".to_string(),
                        _ => e.text.clone(),
                    };
                    tryc!(
                        C,
                        ctx.draw_series(std::iter::once(
                            EmptyElement::at((e.start_s, y))
                                + Text::new(text, (4, dy), font(14, colour))
                        ))
                    );
                    hovers.push(Hover {
                        px: ctx.backend_coord(&(e.start_s, y)),
                        r,
                        colour,
                        title,
                    });
                }
            }
        }
        tryc!(C, root.present());
    }
    Ok(finish(svg, "Timeline lanes", &hovers))
}

/// The label of a horizontal category axis at `v`, categories drawn top to bottom (the first at
/// the largest y).
fn category_label(labels: &[String], v: f64) -> String {
    let i = labels.len() as f64 - 1.0 - v.round();
    if i >= 0.0 {
        labels.get(i as usize).cloned().unwrap_or_default()
    } else {
        String::new()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downsampling_keeps_extremes_and_bounds_size() {
        let pts: Vec<(f64, f64)> = (0..10_000)
            .map(|i| {
                (
                    i as f64,
                    if i % 600 == 599 {
                        0.0
                    } else {
                        (i % 600) as f64
                    },
                )
            })
            .collect();
        let d = downsample(&pts, 500);
        assert!(d.len() <= 500);
        assert_eq!(d.iter().map(|p| p.1).fold(0.0, f64::max), 598.0);
        assert_eq!(d.iter().map(|p| p.1).fold(f64::INFINITY, f64::min), 0.0);
        assert!(d.windows(2).all(|w| w[0].0 < w[1].0));
    }

    #[test]
    fn zoomed_counts_keep_their_step() {
        assert_eq!(count_at_step(34_600_000.0, 50_000.0), "34.60M");
        assert_eq!(count_at_step(34_650_000.0, 50_000.0), "34.65M");
        assert_eq!(count_at_step(34_000_000.0, 1_000_000.0), "34M");
        assert_eq!(count_at_step(5_000.0, 1_000.0), "5,000");
    }

    #[test]
    fn ticks_are_round() {
        assert_eq!(
            nice_ticks(0.0, 100.0, 5),
            vec![0.0, 20.0, 40.0, 60.0, 80.0, 100.0]
        );
        assert_eq!(nice_ticks(0.0, 36.0, 6), vec![0.0, 10.0, 20.0, 30.0]);
    }

    #[test]
    fn charts_are_bounded_and_carry_hover_titles() {
        let dist = RetryDelay::seed();
        let svg = retry_cdf(
            &dist,
            &[Window {
                seconds: 86_400.0,
                label: "24h".into(),
                colour: BAD,
            }],
        )
        .unwrap();
        assert!(svg.starts_with("<svg class=\"chart\""));
        assert!(svg.contains("<title>10s: 62% arrived, 38% still to come</title>"));
        assert!(svg.len() < 150_000, "{}", svg.len());
        let line = KeyLine {
            label: "400/s".into(),
            colour: RATE_400,
            points: (0..20_000)
                .map(|i| (i as f64 * 10.0, (i % 60) as f64))
                .collect(),
            retention_s: 86_400.0,
        };
        let svg = keys_over_time(&[line], true, (1000, 300)).unwrap();
        assert!(svg.len() < 150_000, "{}", svg.len());
    }
}
