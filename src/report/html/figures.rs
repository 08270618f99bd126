//! The charts across scenarios, each with the table of its values: how late retries arrive
//! against the purge lines, keys in the store over time, measured bytes per record, and the
//! engine bench when one was given.

use super::{DataTable, bar_charts, rough_duration, svg_or_note};
use crate::format::{
    human_bytes, human_count, human_duration, latency, percent, rate_per_s, significant, thousands,
};
use crate::report::charts::{self, Bar, KeyLine, RatePalette, Window};
use crate::run::results::{BenchResults, BenchSide, Summary, WhatIfStart};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub(super) struct ChartView {
    id: &'static str,
    title: String,
    svg: String,
    note: String,
    table: Option<DataTable>,
}

/// Every chart that has something to draw, in the page's order.
pub(super) fn charts(
    summary: &Summary,
    start: &WhatIfStart,
    palette: &RatePalette,
) -> Vec<ChartView> {
    let mut out = vec![retry_chart(summary, start)];
    out.extend(keys_chart(summary, palette));
    out.extend(bytes_chart(summary, start, palette));
    if let Some(bench) = &summary.bench {
        out.push(bench_chart(bench, start, palette));
    }
    out
}

/// The purge lines on the retry chart: each retention a run kept keys for, the shortest in
/// red; the panel's starting retention when nothing was simulated.
fn windows(summary: &Summary, start: &WhatIfStart) -> Vec<Window> {
    let mut windows: Vec<Window> = Vec::new();
    for s in &summary.scenarios {
        for r in &s.runs {
            if !windows.iter().any(|w| w.seconds == r.retention_s) {
                windows.push(Window {
                    seconds: r.retention_s,
                    label: format!("{} purge", human_duration(r.retention_s)),
                    colour: if windows.is_empty() {
                        charts::BAD
                    } else {
                        charts::MUTED
                    },
                });
            }
        }
    }
    windows.sort_by(|a, b| a.seconds.total_cmp(&b.seconds));
    if windows.is_empty() {
        windows.push(Window {
            seconds: start.params.retention_s,
            label: format!("{} purge", human_duration(start.params.retention_s)),
            colour: charts::BAD,
        });
    }
    windows
}

fn retry_chart(summary: &Summary, start: &WhatIfStart) -> ChartView {
    let dist = &start.retry;
    let retention_s = start.params.retention_s;
    let retry_table = DataTable {
        head: vec!["Delay after the first attempt", "Share of retries arrived"],
        rows: dist
            .points()
            .iter()
            .map(|(t, c)| vec![human_duration(*t), percent(*c)])
            .collect(),
    };
    ChartView {
        table: Some(retry_table),
        id: "chart-retry",
        title: "How late do retries arrive?".into(),
        svg: svg_or_note(charts::retry_cdf(dist, &windows(summary, start))),
        note: format!(
            "{} A retry later than a purge line finds its key gone: at {} that is {} of timed-out calls, {} a day.",
            dist.shape_text(),
            human_duration(retention_s),
            percent(start.estimate.late_after_purge_fraction),
            human_count(start.estimate.late_after_purge_per_day),
        ),
    }
}

/// Keys over time, one line per rate (the first scenario at that rate); none without runs.
fn keys_chart(summary: &Summary, palette: &RatePalette) -> Option<ChartView> {
    let mut seen_rates: Vec<f64> = Vec::new();
    let mut lines = Vec::new();
    for s in &summary.scenarios {
        for r in s.runs.iter().take(1) {
            if seen_rates.contains(&r.rate_per_s) {
                continue;
            }
            seen_rates.push(r.rate_per_s);
            lines.push(KeyLine {
                label: format!("{} ({})", rate_per_s(r.rate_per_s), s.name),
                colour: palette.colour(r.rate_per_s),
                points: r
                    .sim
                    .series
                    .iter()
                    .map(|p| (p.t_s, p.keys_estimated))
                    .collect(),
                retention_s: r.retention_s,
            });
        }
    }
    if lines.is_empty() {
        return None;
    }
    let rows = lines
        .iter()
        .flat_map(|l| {
            charts::downsample(&l.points, 9)
                .into_iter()
                .map(|(t, k)| vec![l.label.clone(), rough_duration(t), human_count(k)])
                .collect::<Vec<_>>()
        })
        .collect();
    Some(ChartView {
        table: Some(DataTable {
            head: vec!["Run", "Simulated time", "Keys in the store"],
            rows,
        }),
        id: "chart-keys",
        title: "Keys in the store over simulated time".into(),
        svg: svg_or_note(charts::keys_over_time(&lines, true, (1000, 300))),
        note: "Records in the store, scaled to full traffic, one line per rate (the first scenario at that rate). The store fills for one retention, then the sweeper purges what expired and it levels off; the zooms show two hours of that steady state, where keys pile up between sweeps and each sweep cuts them back.".into(),
    })
}

/// Measured bytes per record of every run against the model's assumption; none without runs.
fn bytes_chart(summary: &Summary, start: &WhatIfStart, palette: &RatePalette) -> Option<ChartView> {
    let bpr: Vec<Bar> = summary
        .scenarios
        .iter()
        .flat_map(|s| s.runs.iter().map(move |r| (s, r)))
        .map(|(s, r)| {
            let f = &r.figures.bytes_per_record;
            let label = if s.runs.len() > 1 {
                format!("{} ({})", s.name, r.retention)
            } else {
                s.name.clone()
            };
            Bar {
                label: label.clone(),
                value: f.estimate,
                interval: (f.ci95_high > f.ci95_low).then_some((f.ci95_low, f.ci95_high)),
                colour: palette.colour(r.rate_per_s),
                hover: format!(
                    "{label}: {} per record measured (model assumes {})",
                    human_bytes(f.estimate.round()),
                    human_bytes(f.analytic)
                ),
                text: human_bytes(f.estimate.round()),
            }
        })
        .collect();
    if bpr.is_empty() {
        return None;
    }
    // The model's assumption, as each bar's tooltip says: not the what-if panel's start, which
    // is the measured figure.
    let assumed = summary
        .scenarios
        .iter()
        .flat_map(|s| s.runs.iter())
        .map(|r| r.figures.bytes_per_record.analytic)
        .find(|a| a.is_finite())
        .unwrap_or(start.params.bytes_per_record);
    Some(ChartView {
        table: Some(DataTable {
            head: vec!["Run", "Bytes per record"],
            rows: bpr.iter().map(|b| vec![b.label.clone(), b.text.clone()]).collect(),
        }),
        id: "chart-bytes",
        title: "Measured against assumed bytes per record".into(),
        svg: bar_charts(&charts::BarChart {
            chart: "bytes_per_record",
            bars: &bpr,
            x_desc: "Bytes per key record, rows and both indexes (SQLite)",
            log: false,
            fmt: &|v| human_bytes(v),
            reference: Some((assumed, format!("assumed {}", human_bytes(assumed)))),
            width: 1000,
        }),
        note: "What one key record takes in the simulated SQLite store (row plus primary-key and expires_at indexes, from dbstat) at the end of the arrivals, against the seed's ~512 B assumption. Pass the measured figure to `idemcalc estimate --bytes-per-record` to size a store like this one; a PostgreSQL row carries more overhead.".into(),
    })
}

/// Engine throughput from `idemcalc bench`, with and without keys, each side's mean with its
/// 95 % interval over the runs, against the store's measured ceiling and the peak rate.
fn bench_chart(bench: &BenchResults, start: &WhatIfStart, palette: &RatePalette) -> ChartView {
    let (bars, rows) = bench_bars(bench, palette.colour(start.params.rate_per_s));
    let peak = start.params.peak_rate_per_s;
    let warnings: Vec<String> = bench
        .results
        .iter()
        .flat_map(|r| r.warnings.iter().map(move |w| format!("{}: {w}", r.name)))
        .collect();
    let mut note = "Creates per second the engine sustained in `idemcalc bench`, with the idempotency layer and without it (the bare SQL it runs): each bar is the mean over the bench's alternating runs and its whisker the mean's 95% interval, so two bars whose whiskers overlap may not differ. The ceiling bar is the store's own limit measured before the runs (flushes or round trips per second over those one create needs). The red line is the peak rate the store must take.".to_string();
    for w in &warnings {
        note.push(' ');
        note.push_str(w);
        note.push('.');
    }
    ChartView {
        table: Some(DataTable {
            head: vec!["Run", "Creates per second (95% interval)", "Against"],
            rows,
        }),
        id: "chart-bench",
        title: "Engine throughput (from idemcalc bench)".into(),
        svg: bar_charts(&charts::BarChart {
            chart: "bench",
            bars: &bars,
            x_desc: "Label creates per second",
            log: false,
            fmt: &|v| thousands(v),
            reference: Some((peak, format!("peak {}", rate_per_s(peak)))),
            width: 1000,
        }),
        note,
    }
}

/// The bars, and the table beside them: each bar's name, its rate with the interval, and what
/// it is measured against.
fn bench_bars(bench: &BenchResults, colour: charts::Rgb) -> (Vec<Bar>, Vec<Vec<String>>) {
    use crate::report::vocabulary::{bench_rate, bench_ratio};
    let ci = |s: Option<&BenchSide>| s.and_then(|s| s.creates_per_s_ci95);
    let interval = |s: Option<&BenchSide>| ci(s).and_then(|i| i.bounds());
    let mut bars = Vec::new();
    let mut rows = Vec::new();
    let mut push = |bar: Bar, against: String| {
        rows.push(vec![bar.label.clone(), bar.hover.clone(), against]);
        bars.push(bar);
    };
    for row in &bench.results {
        if let Some(v) = row.creates_per_s {
            let latency_text = format!(
                "{}{}",
                row.p50_us
                    .map(|p| format!(", p50 {}", latency(p.round() as u64)))
                    .unwrap_or_default(),
                row.p99_us
                    .map(|p| format!(", p99 {}", latency(p.round() as u64)))
                    .unwrap_or_default()
            );
            let (short, against) = match (&row.ratio, row.overhead_ratio) {
                (Some(r), _) => (
                    format!(" ({}× the bare SQL)", significant(r.mean, 3)),
                    bench_ratio(r),
                ),
                (None, Some(o)) => {
                    let t = format!("×{} overhead", significant(o, 3));
                    (format!(" ({t})"), t)
                }
                (None, None) => (String::new(), String::new()),
            };
            push(
                Bar {
                    label: format!("{} with keys", row.name),
                    value: v,
                    interval: interval(row.engine_summary.as_ref()),
                    colour,
                    hover: format!(
                        "{}{latency_text}",
                        bench_rate(v, ci(row.engine_summary.as_ref()).as_ref())
                    ),
                    text: format!("{}/s{short}", thousands(v)),
                },
                against,
            );
        }
        if let Some(v) = row.baseline_creates_per_s {
            push(
                Bar {
                    label: format!("{} without keys", row.name),
                    value: v,
                    interval: interval(row.baseline_summary.as_ref()),
                    colour: charts::MUTED,
                    hover: bench_rate(v, ci(row.baseline_summary.as_ref()).as_ref()),
                    text: format!("{}/s", thousands(v)),
                },
                "the bare SQL the engine runs".into(),
            );
        }
        if let Some(c) = &row.ceiling {
            push(
                Bar {
                    label: format!("{} ceiling", row.name),
                    value: c.creates_per_s,
                    interval: None,
                    colour: charts::MUTED,
                    hover: format!(
                        "{}/s: {} {} per second ÷ {} per create",
                        thousands(c.creates_per_s),
                        thousands(c.per_s),
                        c.unit,
                        significant(c.per_create, 3)
                    ),
                    text: format!("{}/s", thousands(c.creates_per_s)),
                },
                format!(
                    "the engine reaches {} of it{}",
                    percent(c.engine_share),
                    c.note
                        .as_deref()
                        .map(|n| format!(" ({n})"))
                        .unwrap_or_default()
                ),
            );
        }
    }
    (bars, rows)
}
