//! Horizontal bars, for figures compared across runs (outcomes, bytes per record, throughput).
//!
//! Each chart comes in two layouts: wide, with the bars' names in an axis on the left and each
//! value past its bar, and narrow (a phone's width), with each name and value written above its
//! bar so the bars get the whole width. A 1000 px chart scrolled sideways on a 390 px phone
//! showed only the names and the bars' full-width starts: no value, no reference line.

use super::{
    Axis, BAD, ChartError, Ctx, Hover, INK, Rgb, band, category_label, font, nice_ticks, nice_top,
    panel, render, segment, text_at, vline,
};
use plotters::style::text_anchor::{HPos, Pos, VPos};

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

/// A bar chart: horizontal bars, top to bottom in the order given, on a linear or log axis,
/// with an optional reference line (e.g. the assumed 512 B per record).
pub struct BarChart<'a> {
    /// The chart's name in errors.
    pub chart: &'static str,
    pub bars: &'a [Bar],
    /// What the value axis measures, with its unit.
    pub x_desc: &'a str,
    pub log: bool,
    /// How the linear axis's ticks read.
    pub fmt: &'a dyn Fn(f64) -> String,
    /// A value to mark across the bars, and its label.
    pub reference: Option<(f64, String)>,
    /// The wide layout's width in pixels.
    pub width: u32,
}

/// The narrow layout's width: a 390 px phone leaves about 354 px inside a panel.
pub const NARROW_PX: u32 = 340;

/// Which of the two layouts to draw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Layout {
    /// Names in an axis on the left, values past the bars, `BarChart::width` wide.
    Wide,
    /// Each name and value above its bar, [`NARROW_PX`] wide.
    Narrow,
}

/// Pixels per bar: the narrow layout stacks a line of text over each bar.
fn row_px(layout: Layout) -> u32 {
    match layout {
        Layout::Wide => 30,
        Layout::Narrow => 40,
    }
}

/// Draws `c` in `layout`.
pub fn bars(c: &BarChart<'_>, layout: Layout) -> Result<String, ChartError> {
    let chart = c.chart;
    let narrow = layout == Layout::Narrow;
    let n = c.bars.len().max(1);
    let max = c
        .bars
        .iter()
        .map(|b| b.interval.map_or(b.value, |i| i.1.max(b.value)))
        .chain(c.reference.iter().map(|r| r.0))
        .fold(0.0, f64::max);
    // Wide: the names' axis is wide enough for the longest name at about 7 px a character,
    // within bounds so one long name cannot squeeze the bars away. Narrow: names are above the
    // bars, and the axis only keeps the bars off the frame.
    let label_px = if narrow {
        4
    } else {
        c.bars
            .iter()
            .map(|b| b.label.chars().count())
            .max()
            .unwrap_or(8)
            .clamp(6, 34) as u32
            * 7
            + 14
    };
    let (x_lo, x_hi, ticks) = if c.log {
        // A decade and a half of room past the longest bar for its value label (wide); every
        // other decade on a phone, where eleven would run together.
        let hi = (max.max(10.0).log10() + if narrow { 0.3 } else { 1.6 }).ceil();
        let step = if narrow { 2 } else { 1 };
        (
            0.0,
            hi,
            (0..=hi as i32)
                .step_by(step)
                .map(f64::from)
                .collect::<Vec<_>>(),
        )
    } else {
        let top = nice_top(max * if narrow { 1.02 } else { 1.12 });
        (0.0, top, nice_ticks(0.0, top, if narrow { 3 } else { 5 }))
    };
    let to_x = |v: f64| if c.log { v.max(1.0).log10() } else { v };
    // Decades read 1k, 10k, 100k, 1M: the axis stays legible on a phone and in print, where
    // "100,000" beside "10,000" would run together. The bars' own labels keep their text.
    let log_fmt = |v: f64| decade(10f64.powf(v));
    let lin_fmt = |v: f64| (c.fmt)(v);
    let x_axis = Axis {
        lo: x_lo,
        hi: x_hi,
        ticks,
        fmt: if c.log { &log_fmt } else { &lin_fmt },
        desc: c.x_desc.to_string(),
    };
    let labels: Vec<String> = if narrow {
        Vec::new()
    } else {
        c.bars.iter().map(|b| b.label.clone()).collect()
    };
    let y_fmt = |v: f64| category_label(&labels, v);
    // The narrow layout keeps a line at the top for the reference line's label.
    let y_hi = n as f64 - 0.4
        + if narrow && c.reference.is_some() {
            0.6
        } else {
            0.0
        };
    let y_axis = Axis {
        lo: -0.6,
        hi: y_hi,
        ticks: if narrow {
            Vec::new()
        } else {
            (0..n).map(|i| i as f64).collect()
        },
        fmt: &y_fmt,
        desc: String::new(),
    };
    let height = 64 + row_px(layout) * n as u32 + if narrow { 24 } else { 0 };
    let width = if narrow { NARROW_PX } else { c.width };
    render(chart, (width, height), c.x_desc, |root, hovers| {
        let mut ctx = panel(chart, root, "", &x_axis, &y_axis, label_px)?;
        if let Some((v, label)) = &c.reference {
            let x = to_x(*v);
            if narrow {
                vline(&mut ctx, chart, x, (-0.6, y_hi), BAD, "", 0)?;
                // Its label at the top, on whichever side of the line has room.
                let right = x > (x_lo + x_hi) / 2.0;
                let style = font(13, BAD).pos(Pos::new(
                    if right { HPos::Right } else { HPos::Left },
                    VPos::Top,
                ));
                text_at(
                    &mut ctx,
                    chart,
                    (x, y_hi),
                    label.clone(),
                    (if right { -4 } else { 4 }, 2),
                    style,
                )?;
            } else {
                vline(&mut ctx, chart, x, (-0.6, y_hi), BAD, label, 2)?;
            }
        }
        let place = Place {
            x_lo,
            to_x: &to_x,
            layout,
        };
        for (i, b) in c.bars.iter().enumerate() {
            let y = (n - 1 - i) as f64;
            draw_bar(&mut ctx, chart, b, y, &place, hovers)?;
        }
        Ok(())
    })
}

/// Where every bar of a chart goes: the value axis's start, how a value maps onto it, the
/// layout.
struct Place<'f> {
    x_lo: f64,
    to_x: &'f dyn Fn(f64) -> f64,
    layout: Layout,
}

/// One bar at row `y`. Wide: its value label goes past the whisker's end when there is one, so
/// the text never sits on the interval it describes. Narrow: the bar sits in the lower part of
/// its row and its name and value are written above it.
fn draw_bar(
    ctx: &mut Ctx<'_, '_>,
    chart: &'static str,
    b: &Bar,
    y: f64,
    place: &Place<'_>,
    hovers: &mut Vec<Hover>,
) -> Result<(), ChartError> {
    let Place { x_lo, to_x, layout } = *place;
    // Narrow: the bar in the lower half of its row, its text above.
    let (mid, half) = match layout {
        Layout::Wide => (y, 0.32),
        Layout::Narrow => (y - 0.08, 0.18),
    };
    let x1 = to_x(b.value);
    band(
        ctx,
        chart,
        [(x_lo, mid - half), (x1.max(x_lo), mid + half)],
        b.colour,
        0.85,
    )?;
    let mut end = x1;
    if let Some((lo, hi)) = b.interval {
        let (lo, hi) = (to_x(lo), to_x(hi));
        end = end.max(hi);
        segment(ctx, chart, (lo, mid), (hi, mid))?;
        for x in [lo, hi] {
            segment(ctx, chart, (x, mid - half / 2.0), (x, mid + half / 2.0))?;
        }
    }
    match layout {
        Layout::Wide => text_at(ctx, chart, (end, y), b.text.clone(), (6, -6), font(13, INK))?,
        Layout::Narrow => text_at(
            ctx,
            chart,
            (x_lo, y + 0.45),
            format!("{}: {}", b.label, b.text),
            (2, 0),
            font(13, INK),
        )?,
    }
    hovers.push(Hover::at(ctx, (x1, mid), 4, b.colour, b.hover.clone()));
    Ok(())
}

/// A power of ten as a short label: 1, 10, 100, 1k … 100k, 1M … 1B.
fn decade(v: f64) -> String {
    let v = v.round();
    match v {
        v if v >= 1e9 => format!("{}B", v / 1e9),
        v if v >= 1e6 => format!("{}M", v / 1e6),
        v if v >= 1e3 => format!("{}k", v / 1e3),
        v => format!("{v}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decades_are_short() {
        let labels: Vec<String> = (0..=9).map(|e| super::decade(10f64.powi(e))).collect();
        assert_eq!(
            labels,
            [
                "1", "10", "100", "1k", "10k", "100k", "1M", "10M", "100M", "1B"
            ]
        );
    }

    /// Issue 36, item 4 of the page: at 390 px the bytes-per-record chart showed full-width
    /// bars with no values and no 512 B line. The narrow layout is a phone's width and carries
    /// every value and the reference line's label.
    #[test]
    fn the_narrow_layout_fits_a_phone_and_keeps_values_and_reference() {
        let bars: Vec<Bar> = ["baseline-400", "peak-2000"]
            .iter()
            .zip([517.0, 530.0])
            .map(|(name, v)| Bar {
                label: name.to_string(),
                value: v,
                interval: Some((v - 3.0, v + 3.0)),
                colour: INK,
                hover: String::new(),
                text: format!("{v} B"),
            })
            .collect();
        let fmt = |v: f64| format!("{v} B");
        let c = BarChart {
            chart: "bytes",
            bars: &bars,
            x_desc: "Bytes per record",
            log: false,
            fmt: &fmt,
            reference: Some((512.0, "assumed 512 B".into())),
            width: 1000,
        };
        let svg = bars_svg(&c, Layout::Narrow);
        assert!(svg.contains(&format!("width=\"{NARROW_PX}\"")), "{svg}");
        for text in ["baseline-400: 517 B", "peak-2000: 530 B", "assumed 512 B"] {
            assert!(svg.contains(text), "{text} missing");
        }
        let wide = bars_svg(&c, Layout::Wide);
        assert!(wide.contains("width=\"1000\""));
    }

    fn bars_svg(c: &BarChart<'_>, layout: Layout) -> String {
        bars(c, layout).unwrap()
    }
}
