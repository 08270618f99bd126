//! Horizontal bars, for figures compared across runs (outcomes, bytes per record, throughput).

use super::{
    Axis, BAD, ChartError, Ctx, Hover, INK, Rgb, band, category_label, font, nice_ticks, nice_top,
    panel, render, segment, text_at, vline,
};

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
    let n = bars.len().max(1);
    let max = bars
        .iter()
        .map(|b| b.interval.map_or(b.value, |i| i.1.max(b.value)))
        .chain(reference.iter().map(|r| r.0))
        .fold(0.0, f64::max);
    // Wide enough for the longest label at about 7 px a character, within bounds so one long
    // label cannot squeeze the bars away.
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
    // Decades read 1k, 10k, 100k, 1M: the axis stays legible on a phone and in print, where
    // "100,000" beside "10,000" would run together. The bars' own labels keep `fmt`.
    let log_fmt = |v: f64| decade(10f64.powf(v));
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
    render(chart, (width, height), x_desc, |root, hovers| {
        let mut ctx = panel(chart, root, "", &x_axis, &y_axis, label_px)?;
        for (i, b) in bars.iter().enumerate() {
            let y = (n - 1 - i) as f64;
            draw_bar(&mut ctx, chart, b, y, x_lo, &to_x, hovers)?;
        }
        if let Some((v, label)) = &reference {
            vline(
                &mut ctx,
                chart,
                to_x(*v),
                (-0.6, n as f64 - 0.4),
                BAD,
                label,
                2,
            )?;
        }
        Ok(())
    })
}

/// One bar at row `y`. Its value label goes past the whisker's end when there is one, so
/// the text never sits on the interval it describes.
fn draw_bar(
    ctx: &mut Ctx<'_, '_>,
    chart: &'static str,
    b: &Bar,
    y: f64,
    x_lo: f64,
    to_x: &dyn Fn(f64) -> f64,
    hovers: &mut Vec<Hover>,
) -> Result<(), ChartError> {
    let x1 = to_x(b.value);
    band(
        ctx,
        chart,
        [(x_lo, y - 0.32), (x1.max(x_lo), y + 0.32)],
        b.colour,
        0.85,
    )?;
    let mut end = x1;
    if let Some((lo, hi)) = b.interval {
        let (lo, hi) = (to_x(lo), to_x(hi));
        end = end.max(hi);
        segment(ctx, chart, (lo, y), (hi, y))?;
        for x in [lo, hi] {
            segment(ctx, chart, (x, y - 0.15), (x, y + 0.15))?;
        }
    }
    text_at(ctx, chart, (end, y), b.text.clone(), (6, -6), font(13, INK))?;
    hovers.push(Hover::at(ctx, (x1, y), 4, b.colour, b.hover.clone()));
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
}
