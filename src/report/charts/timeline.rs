//! A scripted timeline as lanes: who held the lease, who called the carrier, what each caller
//! saw, in the order it happened.

use super::{
    Axis, BAD, CARRIER, ChartError, Ctx, Hover, INK, MUTED, OK, WARN, band, category_label, font,
    nice_ticks, panel, render, text_at, vline,
};
use crate::run::results::TimelineEvent;

const C: &str = "timeline";

/// The lanes of a scripted timeline, like the seed's "The lease decides who may run": leases
/// and carrier calls as bars, requests, answers and deaths as marks, the lease expiry dashed.
pub fn timeline(events: &[TimelineEvent], lanes: &[String]) -> Result<String, ChartError> {
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
    let y_fmt = |v: f64| category_label(lanes, v);
    let y_axis = Axis {
        lo: -0.7,
        hi: n as f64 - 0.3,
        ticks: (0..n).map(|i| i as f64).collect(),
        fmt: &y_fmt,
        desc: String::new(),
    };
    let lane_y = |lane: &str| {
        let i = lanes.iter().position(|l| l == lane).unwrap_or(0);
        (n - 1 - i) as f64
    };
    render(
        C,
        (1000, 80 + 70 * n as u32),
        "Timeline lanes",
        |root, hovers| {
            let mut ctx = panel(C, root, "", &x_axis, &y_axis, 90)?;
            let lanes_y = (y_axis.lo, y_axis.hi);
            for e in events {
                let y = lane_y(&e.lane);
                match (e.kind, e.end_s) {
                    ("lease" | "carrier", Some(end)) => {
                        span(&mut ctx, e, y, end.min(t_hi), t_hi, lanes_y, hovers)?;
                    }
                    _ => instant(&mut ctx, e, y, hovers)?,
                }
            }
            Ok(())
        },
    )
}

/// When and where, since the marks' labels are kept short to fit between their neighbours.
fn hover_title(e: &TimelineEvent) -> String {
    let significant = crate::format::significant;
    let when = match e.end_s {
        Some(end) => format!("{}–{} s", significant(e.start_s, 3), significant(end, 3)),
        None => format!("{} s", significant(e.start_s, 3)),
    };
    format!("{when} · {} · {}", e.lane, e.text)
}

/// A lease or a carrier call, which last a while, as a bar. The lease is pale because its
/// worker's answers and death fall within it and must read on top. `end` is already cut at
/// the chart's edge `t_hi`: a lease that outlasts the script is not marked as expiring.
fn span(
    ctx: &mut Ctx<'_, '_>,
    e: &TimelineEvent,
    y: f64,
    end: f64,
    t_hi: f64,
    lanes_y: (f64, f64),
    hovers: &mut Vec<Hover>,
) -> Result<(), ChartError> {
    let (colour, h, alpha) = if e.kind == "lease" {
        (WARN, 0.34, 0.22)
    } else {
        (CARRIER, 0.22, 0.75)
    };
    band(ctx, C, [(e.start_s, y - h), (end, y + h)], colour, alpha)?;
    text_at(
        ctx,
        C,
        (e.start_s, y + h),
        e.text.clone(),
        (3, -15),
        font(14, colour),
    )?;
    hovers.push(Hover::at(ctx, (e.start_s, y), 4, colour, hover_title(e)));
    if e.kind == "lease" && end < t_hi {
        vline(ctx, C, end, lanes_y, WARN, "lease expires", 2)?;
    }
    Ok(())
}

/// A send, an answer, a reply or a death: an instant, so a labelled mark coloured by outcome.
fn instant(
    ctx: &mut Ctx<'_, '_>,
    e: &TimelineEvent,
    y: f64,
    hovers: &mut Vec<Hover>,
) -> Result<(), ChartError> {
    let (colour, r) = match e.kind {
        "died" => (BAD, 6),
        "send" => (MUTED, 4),
        "reply" if e.text.starts_with('2') => (OK, 6),
        "reply" | "answer" if e.text.starts_with("409") => (WARN, 5),
        "reply" | "answer" => (BAD, 5),
        _ => (INK, 4),
    };
    // In the caller's lane sends sit above the line and replies below, so labels a few
    // hundred milliseconds apart do not overprint.
    let dy = if e.lane == "Caller" && e.kind == "send" {
        -20
    } else {
        8
    };
    let text = match e.kind {
        "send" => e.text.trim_end_matches(": CreateLabel").to_string(),
        "died" => "✕ process killed".to_string(),
        _ => e.text.clone(),
    };
    text_at(ctx, C, (e.start_s, y), text, (4, dy), font(14, colour))?;
    hovers.push(Hover::at(ctx, (e.start_s, y), r, colour, hover_title(e)));
    Ok(())
}
