//! The single-page HTML report: view structs with every value already formatted for people
//! (criterion's split between numbers for analysis and text for reading), rendered with the
//! embedded minijinja template.
//!
//! The page is self-contained: CSS, SVG, script and data are inline and nothing is fetched.
//! Without script it shows every figure of the run; with script the "What if?" panel
//! re-evaluates [`crate::model::FORMULAS`] in the browser (the strings are embedded, not
//! copied into the script), so moving a control gives what `idemcalc estimate` would print.
//!
//! A file per part of the page, so each reads on its own: [`glance`] the headline (decision,
//! verdicts, at-a-glance tables, stores compared), [`comparison`] the change against a
//! baseline, [`whatif`] the panel and [`script`] the data its script checks itself against,
//! [`figures`] the charts across scenarios, [`scenarios`] and [`runs`] each scenario's tab.
//! None evaluates the model: the panel's starting figures come from `run`
//! ([`crate::run::results::WhatIfStart`]).

mod comparison;
mod figures;
mod glance;
mod load;
mod runs;
mod scenarios;
mod script;
mod whatif;

use super::Summary;
use super::charts::{self, RatePalette};
use crate::format::{plural, significant};
use crate::model;
use crate::run::results::{RunResult, ScenarioKind, WhatIfStart};
use serde::Serialize;

const TEMPLATE: &str = include_str!("../templates/report.html.j2");
const CSS: &str = include_str!("../templates/report.css");
const SCRIPT: &str = include_str!("../templates/report.js");

#[derive(Debug, thiserror::Error)]
pub enum HtmlError {
    #[error("the report template: {0}")]
    Template(#[from] minijinja::Error),
    #[error("embedding the model as JSON: {0}")]
    Json(#[from] serde_json::Error),
}

/// The values behind a chart, as a table: what a keyboard or screen-reader user reads instead
/// of hovering over points.
#[derive(Debug, Clone, Serialize)]
struct DataTable {
    head: Vec<&'static str>,
    rows: Vec<Vec<String>>,
}

#[derive(Debug, Clone, Serialize)]
struct Page {
    title: String,
    subtitle: String,
    verdict: String,
    verdict_class: &'static str,
    broken: Vec<String>,
    decision: Option<glance::DecisionView>,
    legend: &'static str,
    sizing_rows: Vec<glance::GlanceRow>,
    failure_rows: Vec<glance::GlanceRow>,
    stores: Vec<glance::StoreView>,
    /// The retention the store comparison measured at and the one it prices at.
    stores_measured_at: String,
    stores_priced_at: String,
    comparison: Option<comparison::ComparisonView>,
    whatif: whatif::WhatIf,
    charts: Vec<figures::ChartView>,
    /// `report --load`: each live-service run.
    loads: Vec<load::LoadView>,
    scenarios: Vec<scenarios::ScenarioView>,
    formulas: Vec<(String, String, String)>,
    stamp: super::RunStamp,
    /// Each scenario's name with the start of its inputs hash.
    inputs: Vec<(String, String)>,
    version: String,
}

/// Renders the page.
pub fn render(summary: &Summary, stamp: &super::RunStamp) -> Result<String, HtmlError> {
    let palette = RatePalette::new(
        summary
            .scenarios
            .iter()
            .flat_map(|s| s.runs.iter().map(|r| r.rate_per_s)),
    );
    // The panel starts from the decision's scenario at the bytes per record it measured, so
    // the what-if panel and the headline size the same store.
    let start = &summary.whatif;
    let sim_points = whatif::sim_points(summary, &start.params);
    let (verdict, verdict_class) = glance::verdict(summary);
    let (stores_measured_at, stores_priced_at) = glance::stores_at(&summary.stores);
    let page = Page {
        title: "Idempotency-key store: capacity report".into(),
        subtitle: subtitle(summary),
        verdict,
        verdict_class,
        broken: super::broken_lines(summary),
        decision: glance::decision(summary),
        legend: glance::PAGE_LEGEND,
        sizing_rows: glance::rows(summary, ScenarioKind::Sizing),
        failure_rows: glance::rows(summary, ScenarioKind::Failure),
        stores: glance::store_views(&summary.stores),
        stores_measured_at,
        stores_priced_at,
        comparison: summary.comparison.as_ref().map(comparison::view),
        whatif: whatif::panel(start, &palette, &sim_points),
        charts: figures::charts(summary, start, &palette),
        loads: load::views(summary.load.as_ref()),
        scenarios: summary
            .scenarios
            .iter()
            .map(|s| scenarios::view(s, &palette))
            .collect(),
        formulas: formulas(),
        stamp: stamp.clone(),
        inputs: summary
            .scenarios
            .iter()
            .map(|s| (s.name.clone(), s.inputs_sha256.clone()))
            .collect(),
        version: format!("{} {}", summary.tool.name, summary.tool.version),
    };
    fill_template(&page, start, &sim_points)
}

/// Under the title: the tool, what was run and the promise that it reruns the same.
fn subtitle(summary: &Summary) -> String {
    let simulated = summary
        .scenarios
        .iter()
        .filter(|s| !s.runs.is_empty())
        .count();
    let timelines = summary
        .scenarios
        .iter()
        .filter(|s| s.timeline.is_some())
        .count();
    format!(
        "{} {} · {} ({simulated} simulated, {}) · figures per day at full traffic · same scenarios and seeds, same numbers",
        summary.tool.name,
        summary.tool.version,
        plural(summary.scenarios.len() as u64, "scenario", "scenarios"),
        plural(timelines as u64, "timeline", "timelines"),
    )
}

/// The formula table at the foot of the page: the strings the script evaluates.
fn formulas() -> Vec<(String, String, String)> {
    model::FORMULAS
        .iter()
        .map(|f| (f.label.to_string(), f.name.to_string(), f.expr.to_string()))
        .collect()
}

/// The page through the embedded template, with the script's data beside it.
fn fill_template(
    page: &Page,
    start: &WhatIfStart,
    sim_points: &[charts::SimPoint],
) -> Result<String, HtmlError> {
    let mut env = minijinja::Environment::new();
    env.add_filter("code", |text: String| {
        minijinja::Value::from_safe_string(code_spans(&text))
    });
    env.add_template("report.html.j2", TEMPLATE)?;
    let template = env.get_template("report.html.j2")?;
    let html = template.render(minijinja::context! {
        page => minijinja::Value::from(minijinja::value::Serde(page)),
        css => minijinja::Value::from_safe_string(CSS.to_string()),
        script => minijinja::Value::from_safe_string(SCRIPT.to_string()),
        model_json => minijinja::Value::from_safe_string(script::data(start, sim_points)?),
    })?;
    Ok(html)
}

/// A bar chart in both its layouts, the page showing the one that fits: the wide one on a
/// desktop and in print, the narrow one on a phone (see `report.css`).
fn bar_charts(c: &charts::BarChart<'_>) -> String {
    format!(
        "<div class=\"wide-only\">{}</div><div class=\"narrow-only\">{}</div>",
        svg_or_note(charts::bars(c, charts::Layout::Wide)),
        svg_or_note(charts::bars(c, charts::Layout::Narrow))
    )
}

/// Prose written for every format (Markdown's `code spans` among it) as HTML: escaped, each
/// pair of backticks a `<code>` element, so the page shows no literal backtick. A backtick
/// without its pair is dropped. The template's `code` filter.
fn code_spans(text: &str) -> String {
    let pairs = text.matches('`').count() / 2;
    let mut out = String::with_capacity(text.len() + 16);
    for (i, part) in text.split('`').enumerate() {
        let escaped = charts::escape(part).replace('\'', "&#39;");
        if i % 2 == 1 && i <= 2 * pairs {
            out.push_str("<code>");
            out.push_str(&escaped);
            out.push_str("</code>");
        } else {
            out.push_str(&escaped);
        }
    }
    out
}

/// A chart, or the reason it could not be drawn, as the page shows it.
fn svg_or_note(r: Result<String, charts::ChartError>) -> String {
    r.unwrap_or_else(|e| {
        format!(
            "<p class=\"note\">Chart not drawn: {}</p>",
            charts::escape(&e.to_string())
        )
    })
}

fn slug(name: &str) -> String {
    let s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() {
                c.to_ascii_lowercase()
            } else {
                '-'
            }
        })
        .collect();
    format!("sc-{}", s.trim_matches('-'))
}

/// Whether the run had a steady window to measure its store in (the simulator's own answer,
/// `SimReport::steady_window`); a run whose arrivals stop before it has none to show.
fn steady_reached(r: &RunResult) -> bool {
    r.sampling.steady_window
}

fn not_reached(r: &RunResult) -> String {
    format!(
        "arrivals ({}) stop before one retention ({}) has passed: still growing",
        rough_duration(r.sampling.arrival_seconds),
        r.retention
    )
}

/// A simulated span as the one duration formatter writes a measured one (`31.16d`, `1.5d`,
/// `3h`).
fn rough_duration(s: f64) -> String {
    crate::duration::format_approx(s)
}

fn secs(v: f64) -> String {
    format!("{} s", significant(v, 3))
}

#[cfg(test)]
mod tests {
    use super::super::vocabulary::budget_value;
    use super::code_spans;
    use crate::settings::Budget;

    /// Issue 36, item 6 of the page: captions showed Markdown's backticks literally.
    #[test]
    fn backticks_become_code_and_text_is_escaped() {
        assert_eq!(
            code_spans("Pass it to `idemcalc estimate --bytes-per-record` <now>"),
            "Pass it to <code>idemcalc estimate --bytes-per-record</code> &lt;now&gt;"
        );
        assert_eq!(code_spans("a `b` c ` d"), "a <code>b</code> c  d");
        assert_eq!(
            code_spans("it's \"x\" & y"),
            "it&#39;s &quot;x&quot; &amp; y"
        );
    }

    #[test]
    fn budget_values_read_in_their_unit() {
        assert_eq!(budget_value(Budget::MaxStoreGb, 17.69472), "17.7 GB");
        assert_eq!(
            budget_value(Budget::MaxDuplicatesPerDay, 20.736),
            "20.7/day"
        );
        assert_eq!(
            budget_value(Budget::MaxCostPerDay, 124_416.0),
            "$124,416/day"
        );
    }
}
