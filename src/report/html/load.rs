//! `report --load`: each live-service run as a panel: what was checked from outside, the
//! latency per outcome drawn and tabled, the budgets.

use super::bar_charts;
use crate::format::significant;
use crate::report::charts::{self, Bar};
use crate::report::live::{self, BUDGETS_HEAD, LATENCY_HEAD, LiveRows};
use crate::run::results::LoadResults;
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
pub(super) struct LoadView {
    rows: LiveRows,
    latency_head: [&'static str; 7],
    budgets_head: [&'static str; 4],
    svg: String,
}

pub(super) fn views(load: Option<&LoadResults>) -> Vec<LoadView> {
    let Some(load) = load else {
        return Vec::new();
    };
    load.results
        .iter()
        .map(|r| {
            // p99 per outcome, its p50 in the text: the tail is what a budget is set on.
            let bars: Vec<Bar> = live::outcomes_seen(r)
                .map(|(o, p)| Bar {
                    label: o.to_string(),
                    value: p.p99,
                    interval: None,
                    colour: if o == "first_run" || o == "replay" {
                        charts::INK
                    } else {
                        charts::BAD
                    },
                    hover: format!(
                        "{o}: {} answers, p50 {} ms, p99 {} ms, max {} ms",
                        p.count,
                        significant(p.p50, 3),
                        significant(p.p99, 3),
                        significant(p.max, 3)
                    ),
                    text: format!(
                        "p99 {} ms (p50 {})",
                        significant(p.p99, 3),
                        significant(p.p50, 3)
                    ),
                })
                .collect();
            let budget = r
                .budgets
                .iter()
                .find(|v| v.budget == "latency_ms_p99")
                .map(|v| (v.limit, format!("budget {} ms", significant(v.limit, 3))));
            LoadView {
                rows: live::rows(r),
                latency_head: LATENCY_HEAD,
                budgets_head: BUDGETS_HEAD,
                svg: if bars.is_empty() {
                    String::new()
                } else {
                    bar_charts(&charts::BarChart {
                        chart: "load latency",
                        bars: &bars,
                        x_desc: "p99 latency from the intended start (ms)",
                        log: false,
                        fmt: &|v| significant(v, 3),
                        reference: budget,
                        width: 1000,
                    })
                },
            }
        })
        .collect()
}
