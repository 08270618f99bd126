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
//!
//! This file holds what makes the charts look like one family (colours, fonts, the framed
//! panel, axes, markers, the SVG wrapper with its hover points); each chart has its own file
//! and is re-exported here, so callers name `charts::tradeoff`, not the file it lives in.

use crate::format::{human_duration, thousands};
use plotters::coord::Shift;
use plotters::coord::ranged1d::{DefaultFormatting, KeyPointHint, Ranged};
use plotters::prelude::*;
use std::ops::Range;

fn err(chart: &'static str) -> impl Fn(&dyn std::fmt::Display) -> ChartError {
    move |e| ChartError {
        chart,
        message: e.to_string(),
    }
}

/// Every plotters call can fail; this names the chart in the error the page shows. Defined
/// above the `mod` lines because a `macro_rules!` is only visible in modules declared after it,
/// and `err` is named by its full path so the chart files need not import it.
macro_rules! tryc {
    ($chart:expr, $e:expr) => {
        $e.map_err(|e| $crate::report::charts::err($chart)(&e))?
    };
}

mod bars;
mod keys_over_time;
mod retry_cdf;
mod timeline;
mod tradeoff;

pub use bars::{Bar, BarChart, Layout, bars};
pub use keys_over_time::{KeyLine, keys_over_time};
pub use retry_cdf::{Window, retry_cdf};
pub use timeline::timeline;
pub use tradeoff::{
    Drawn, Limits, PARTS_MIN_SHARE, SimPoint, Tradeoff, TradeoffRow, parts_shown, tradeoff,
};

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
/// Budget and target lines: purple, apart from the red of the duplicates curves.
pub const LIMIT: Rgb = Rgb(124, 58, 237);
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

/// A point with a hover text, drawn after plotters is done: plotters has no element that
/// carries an SVG `<title>`.
struct Hover {
    px: (i32, i32),
    r: u32,
    colour: Rgb,
    title: String,
}

impl Hover {
    /// Takes the pixel position while the chart's coordinates are still at hand; the circle
    /// itself is written into the SVG only once plotters has finished it.
    fn at(ctx: &Ctx<'_, '_>, point: (f64, f64), r: u32, colour: Rgb, title: String) -> Hover {
        Hover {
            px: ctx.backend_coord(&point),
            r,
            colour,
            title,
        }
    }
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
type Area<'b> = DrawingArea<SVGBackend<'b>, Shift>;

/// One axis: its range, where its ticks go, how they read, and what it measures (with unit).
struct Axis<'f> {
    lo: f64,
    hi: f64,
    ticks: Vec<f64>,
    fmt: &'f dyn Fn(f64) -> String,
    desc: String,
}

/// `size` is what plotters calls a size; its SVG writes `size / 1.24` px, so 13 gives 10.5 px,
/// above the 9 px a page must never go below.
fn font(size: u32, colour: Rgb) -> TextStyle<'static> {
    ("sans-serif", size).into_font().color(&colour.c())
}

/// The frame of every chart: one SVG of a fixed size (the page's layout and the size bound
/// rest on it), white behind, and the hover points added once `draw` has filled it in. The
/// SVG exists only after plotters lets go of it, hence a closure rather than a returned area.
fn render(
    chart: &'static str,
    size: (u32, u32),
    aria: &str,
    draw: impl FnOnce(&Area<'_>, &mut Vec<Hover>) -> Result<(), ChartError>,
) -> Result<String, ChartError> {
    let mut svg = String::new();
    let mut hovers = Vec::new();
    {
        let root = SVGBackend::with_string(&mut svg, size).into_drawing_area();
        tryc!(chart, root.fill(&WHITE));
        draw(&root, &mut hovers)?;
        tryc!(chart, root.present());
    }
    Ok(finish(svg, aria, &hovers))
}

/// Every panel is framed alike (margins, gridlines at the ticks only, muted axes, the same type
/// sizes), so the page's charts read as one family and a chart only says what differs.
fn panel<'a, 'b: 'a>(
    chart: &'static str,
    area: &'a Area<'b>,
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

/// Rounded to the millisecond because 10^log10(60) need not give back exactly 60, and a tick
/// should read `1m`, not `59.99999999999999s`.
fn log_duration_label(v: f64) -> String {
    human_duration((10f64.powf(v) * 1000.0).round() / 1000.0)
}

/// A dashed marker (a retention, a purge, "now", a reference value): dashed and 1 px, so it
/// reads as a mark on the chart rather than as one more series.
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
        text_at(
            ctx,
            chart,
            (x, y.1),
            label.to_string(),
            (4, label_dy),
            font(13, colour),
        )?;
    }
    Ok(())
}

/// A label pinned to a data point but offset in pixels, so it stays beside its mark whatever
/// the axis scale.
fn text_at(
    ctx: &mut Ctx<'_, '_>,
    chart: &'static str,
    at: (f64, f64),
    text: String,
    offset_px: (i32, i32),
    style: TextStyle<'static>,
) -> Result<(), ChartError> {
    tryc!(
        chart,
        ctx.draw_series(std::iter::once(
            EmptyElement::at(at) + Text::new(text, offset_px, style)
        ))
    );
    Ok(())
}

/// A series line: 2 px, so it stands out from the 1 px grid and markers on every chart.
fn line(
    ctx: &mut Ctx<'_, '_>,
    chart: &'static str,
    points: &[(f64, f64)],
    colour: Rgb,
) -> Result<(), ChartError> {
    tryc!(
        chart,
        ctx.draw_series(LineSeries::new(
            points.iter().copied(),
            colour.c().stroke_width(2)
        ))
    );
    Ok(())
}

/// An interval's whisker (or one of its caps): in ink whatever the series colour, so the 95 %
/// intervals of the bar chart and of the trade-off's simulated points read the same.
fn segment(
    ctx: &mut Ctx<'_, '_>,
    chart: &'static str,
    from: (f64, f64),
    to: (f64, f64),
) -> Result<(), ChartError> {
    tryc!(
        chart,
        ctx.draw_series(std::iter::once(PathElement::new(
            vec![from, to],
            INK.c().stroke_width(2)
        )))
    );
    Ok(())
}

/// A filled rectangle (a bar, a lease, a carrier call); `opacity` below 1 lets the grid and
/// the labels of overlapping spans show through.
fn band(
    ctx: &mut Ctx<'_, '_>,
    chart: &'static str,
    corners: [(f64, f64); 2],
    colour: Rgb,
    opacity: f64,
) -> Result<(), ChartError> {
    tryc!(
        chart,
        ctx.draw_series(std::iter::once(Rectangle::new(
            corners,
            colour.c().mix(opacity).filled()
        )))
    );
    Ok(())
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
    use crate::traffic::RetryDelay;

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
