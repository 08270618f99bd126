//! One trait, many small formats (hyperfine's `Exporter`): each turns the same [`Summary`] into
//! the bytes of one file, so adding a format never touches the run.

use super::html;
use super::vocabulary::{
    self, LEGEND, Quantity, change_label, change_quantity, mark, relative_text, show, with_interval,
};
use super::{RunResult, ScenarioResult, Status, Summary};
use crate::format::{human_bytes, plural};
use crate::run::results::{BenchResults, Headline, LoadResults, ScenarioKind, StoreRow};
use crate::run::{Change, Comparison};

#[derive(Debug, thiserror::Error)]
pub enum ExportError {
    #[error("summary.json: {0}")]
    Json(#[from] serde_json::Error),
    #[error("index.html: {0}")]
    Html(#[from] html::HtmlError),
}

pub trait Exporter {
    /// The file this exporter writes in the output directory.
    fn file_name(&self) -> &'static str;
    fn serialize(&self, summary: &Summary) -> Result<Vec<u8>, ExportError>;
}

/// `summary.json`: the public, versioned schema CI reads (see [`super::SCHEMA_VERSION`]).
/// Pretty-printed with a final newline so a diff between two runs reads line by line.
pub struct JsonExporter;

impl Exporter for JsonExporter {
    fn file_name(&self) -> &'static str {
        "summary.json"
    }

    fn serialize(&self, summary: &Summary) -> Result<Vec<u8>, ExportError> {
        let mut out = serde_json::to_vec_pretty(summary)?;
        out.push(b'\n');
        Ok(out)
    }
}

/// `summary.md`: what a CI job appends to its job summary. It leads with the decision and the
/// verdicts (with a legend), then sizing runs, failure demonstrations and timelines in tables
/// of their own, then the change against a baseline.
pub struct MarkdownExporter;

/// Pipes would end a Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

/// Text from outside this run (the `--baseline` file's names and values) as plain text in
/// Markdown: every character Markdown or HTML would act on is escaped (HTML's as entities, the
/// rest with a backslash) and a line break becomes a space, so a baseline cannot add links,
/// images, headings or tags to the summary a CI job shows.
fn plain(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '&' => out.push_str("&amp;"),
            '\n' | '\r' => out.push(' '),
            '\\' | '`' | '*' | '_' | '[' | ']' | '(' | ')' | '#' | '!' | '|' | '~' | '{' | '}'
            | '+' | '-' | '.' | ':' => {
                out.push('\\');
                out.push(c);
            }
            c if c.is_control() => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// Text from outside this run inside a code span: no backtick can close it early, no line
/// break or pipe can end the table row; nothing inside a code span is Markdown or HTML.
fn code(text: &str) -> String {
    let text: String = text
        .chars()
        .map(|c| match c {
            '`' => '\'',
            c if c.is_control() => ' ',
            c => c,
        })
        .collect();
    format!("`{}`", text.replace('|', "\\|"))
}

fn decision_md(out: &mut String, h: &Headline) {
    let r = &h.recommendation;
    match (&r.recommended, &r.closest) {
        (Some(c), _) => out.push_str(&format!(
            "### Recommended retention: **{}** ({})\n\n",
            c.retention,
            cell(&h.scenario)
        )),
        (None, Some(c)) => out.push_str(&format!(
            "### No retention meets every target ({}); closest: **{}**\n\n",
            cell(&h.scenario),
            c.retention
        )),
        (None, None) => out.push_str(&format!(
            "### No retention meets the targets ({})\n\n",
            cell(&h.scenario)
        )),
    }
    if let Some(line) = super::text::cheapest(r) {
        out.push_str(&format!("**{}.**\n\n", cell(&line)));
    }
    for note in &r.notes {
        out.push_str(&format!("- {}\n", cell(note)));
    }
    out.push_str(&format!(
        "\nStore sizes at the measured {} per record{}; {} of the store {} priced.\n\n",
        human_bytes(r.bytes_per_record.round()),
        match r.bytes_per_record_ci95 {
            Some([lo, hi]) => format!(" (95%: {} – {})", human_bytes(lo), human_bytes(hi)),
            None => String::new(),
        },
        plural(r.replicas as u64, "copy", "copies"),
        if r.replicas as u64 == 1 { "is" } else { "are" }
    ));
}

impl Exporter for MarkdownExporter {
    fn file_name(&self) -> &'static str {
        "summary.md"
    }

    fn serialize(&self, summary: &Summary) -> Result<Vec<u8>, ExportError> {
        let mut out = String::from("## idemcalc capacity report\n\n");
        // A broken budget or a figure that changed against the baseline is what a CI reader
        // must act on: it leads, before the decision's bullets. Otherwise the decision leads.
        let alarm = !super::broken_lines(summary).is_empty()
            || summary
                .comparison
                .as_ref()
                .is_some_and(|c| c.changes.iter().any(|x| x.real));
        if !alarm && let Some(h) = &summary.decision {
            decision_md(&mut out, h);
        }
        verdicts_md(&mut out, summary);
        if let Some(c) = &summary.comparison {
            comparison_md(&mut out, c);
        }
        if alarm && let Some(h) = &summary.decision {
            decision_md(&mut out, h);
        }
        sizing_md(&mut out, summary);
        failures_md(&mut out, summary);
        if !summary.stores.is_empty() {
            stores_md(&mut out, &summary.stores);
        }
        timelines_md(&mut out, summary);
        if let Some(b) = &summary.bench {
            bench_md(&mut out, b);
        }
        if let Some(l) = &summary.load {
            load_md(&mut out, l);
        }
        out.push_str(
            "Estimates are from the simulator (the reference engine, measured bytes per record); intervals are 95% intervals. Full report: `index.html`.\n",
        );
        Ok(out.into_bytes())
    }
}

/// How many budget checks ran, the broken ones and those at risk, and the legend.
fn verdicts_md(out: &mut String, summary: &Summary) {
    let mut checked = 0usize;
    let mut at_risk = Vec::new();
    for s in &summary.scenarios {
        for r in &s.runs {
            checked += r.verdicts.len();
            for v in r.verdicts.iter().filter(|v| v.status == Status::AtRisk) {
                at_risk.push(v.describe(&s.name, &r.retention));
            }
        }
    }
    let broken = super::broken_lines(summary);
    checked += summary.load.as_ref().map_or(0, |l| l.checked());
    if checked == 0 {
        out.push_str(
            "**No budgets set**: no scenario has a `[budgets]` table, so nothing was checked.\n\n",
        );
        return;
    }
    if broken.is_empty() && at_risk.is_empty() {
        out.push_str(&format!("**✅ All {checked} budget checks hold.**\n\n"));
    } else {
        out.push_str(&format!(
            "**{} of {checked} budget checks broken, {} at risk.**\n\n",
            broken.len(),
            at_risk.len()
        ));
        for b in &broken {
            out.push_str(&format!("- ❌ {}\n", cell(b)));
        }
        for a in &at_risk {
            out.push_str(&format!("- ⚠️ {}\n", cell(a)));
        }
        out.push('\n');
    }
    out.push_str(&format!("Legend: {LEGEND}.\n\n"));
}

/// A run's verdicts in one table cell (the store-growth check against a baseline among them).
/// Separated by commas: CommonMark renderers in safe mode drop a raw `<br>`.
fn run_verdicts(r: &RunResult) -> String {
    if r.verdicts.is_empty() {
        return "–".to_string();
    }
    r.verdicts
        .iter()
        .map(|v| {
            format!(
                "{} {} ≤ {}",
                mark(v.status),
                v.budget.name(),
                vocabulary::budget_value(v.budget, v.limit)
            )
        })
        .collect::<Vec<_>>()
        .join(", ")
}

fn of_kind(summary: &Summary, kind: ScenarioKind) -> impl Iterator<Item = &ScenarioResult> {
    summary.scenarios.iter().filter(move |s| s.kind == kind)
}

fn sizing_md(out: &mut String, summary: &Summary) {
    if of_kind(summary, ScenarioKind::Sizing).next().is_none() {
        return;
    }
    out.push_str("### Sizing runs\n\n");
    out.push_str(
        "| Scenario | Rate | Retention | Store size (95% interval) | Bytes/record | Duplicate labels | Daily cost | Budgets |\n",
    );
    out.push_str("|---|---:|---:|---|---:|---|---|---|\n");
    for s in of_kind(summary, ScenarioKind::Sizing) {
        for r in &s.runs {
            let f = &r.figures;
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                cell(&s.name),
                show(Quantity::Rate, r.rate_per_s),
                r.retention,
                with_interval(Quantity::Bytes, &f.store_bytes),
                show(Quantity::Bytes, f.bytes_per_record.estimate.round()),
                with_interval(Quantity::PerDay, &f.duplicate_labels_per_day),
                with_interval(Quantity::UsdPerDay, &f.total_cost_per_day),
                run_verdicts(r)
            ));
        }
    }
    out.push('\n');
}

fn failures_md(out: &mut String, summary: &Summary) {
    if of_kind(summary, ScenarioKind::Failure).next().is_none() {
        return;
    }
    out.push_str("### Failure demonstrations\n\n");
    out.push_str(
        "Each removes one of the seed's defences; its figures show what that costs, not a store to size.\n\n",
    );
    out.push_str(
        "| Scenario | Defence removed | Retention | Duplicate labels | Parcels left unlabelled | Budgets |\n",
    );
    out.push_str("|---|---|---:|---|---|---|\n");
    for s in of_kind(summary, ScenarioKind::Failure) {
        for r in &s.runs {
            let f = &r.figures;
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} |\n",
                cell(&s.name),
                cell(
                    &s.deviations
                        .iter()
                        .map(|d| format!("`{d}`"))
                        .collect::<Vec<_>>()
                        .join(", ")
                ),
                r.retention,
                with_interval(Quantity::PerDay, &f.duplicate_labels_per_day),
                with_interval(Quantity::PerDay, &f.unlabelled_per_day),
                run_verdicts(r)
            ));
        }
    }
    out.push('\n');
}

/// Each scripted timeline's answers in order, with what it stored and bought.
fn timelines_md(out: &mut String, summary: &Summary) {
    let timelines: Vec<_> = summary
        .scenarios
        .iter()
        .filter_map(|s| s.timeline.as_ref().map(|t| (s, t)))
        .collect();
    if timelines.is_empty() {
        return;
    }
    out.push_str("### Timelines\n\n");
    out.push_str("| Scenario | Answers, in order | Labels | Carrier purchases |\n");
    out.push_str("|---|---|---:|---:|\n");
    for (s, t) in timelines {
        let answers: Vec<String> = t
            .responses
            .iter()
            .map(|r| {
                format!(
                    "{} {}",
                    r.status,
                    r.tracking_no
                        .clone()
                        .or_else(|| r.code.clone())
                        .unwrap_or_default()
                )
            })
            .collect();
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            cell(&s.name),
            cell(&answers.join(", ")),
            t.labels.len(),
            t.carrier_purchases.len()
        ));
    }
    out.push('\n');
}

/// The headline scenario on each store (`report --compare-store`).
fn stores_md(out: &mut String, rows: &[StoreRow]) {
    out.push_str(
        "### Stores compared

",
    );
    out.push_str(&format!(
        "The headline scenario measured on each store at {}, priced at {} with every copy; a store in memory is priced as memory.

",
        rows[0].measured_at, rows[0].retention
    ));
    out.push_str(
        "| Store | Bytes/record (95% interval) | Store per copy | Priced as | Storage cost | Duplicate labels | Gives up |
",
    );
    out.push_str(
        "|---|---|---|---|---:|---|---|
",
    );
    for r in rows {
        out.push_str(&format!(
            "| {} | {} | {} ({} – {}) | {} at {}/GB-month | {} | {} | {} |
",
            cell(&r.store),
            with_interval(Quantity::Bytes, &r.bytes_per_record),
            show(Quantity::Bytes, r.store_bytes),
            show(Quantity::Bytes, r.store_bytes_ci95[0]),
            show(Quantity::Bytes, r.store_bytes_ci95[1]),
            r.priced_as,
            show(Quantity::Usd, r.usd_per_gb_month),
            show(Quantity::UsdPerDay, r.storage_cost_per_day),
            with_interval(Quantity::PerDay, &r.duplicate_labels_per_day),
            cell(r.caveat.unwrap_or("nothing"))
        ));
    }
    out.push('\n');
}

/// `report --bench`: each store's engine and bare-SQL rates with their intervals, the ratio
/// from the paired runs and the store's ceiling; the bench's own noise warnings beneath.
fn bench_md(out: &mut String, b: &BenchResults) {
    use super::vocabulary::{bench_rate, bench_ratio};
    let none = || "—".to_string();
    out.push_str("### Engine throughput (idemcalc bench)\n\n");
    out.push_str(
        "| Store | With keys | Without keys (the bare SQL) | Engine / bare SQL | Ceiling |\n",
    );
    out.push_str("|---|---|---|---|---|\n");
    for r in &b.results {
        let side = |mean: Option<f64>, s: Option<&crate::run::results::BenchSide>| {
            mean.map_or_else(none, |m| {
                bench_rate(m, s.and_then(|s| s.creates_per_s_ci95).as_ref())
            })
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} |\n",
            cell(&r.name),
            side(r.creates_per_s, r.engine_summary.as_ref()),
            side(r.baseline_creates_per_s, r.baseline_summary.as_ref()),
            r.ratio.as_ref().map_or_else(none, bench_ratio),
            r.ceiling.as_ref().map_or_else(none, |c| format!(
                "{}/s (engine at {}){}",
                crate::format::thousands(c.creates_per_s),
                crate::format::percent(c.engine_share),
                c.note
                    .as_deref()
                    .map(|n| format!(": {n}"))
                    .unwrap_or_default()
            )),
        ));
    }
    out.push('\n');
    for r in &b.results {
        for w in &r.warnings {
            out.push_str(&format!("- ⚠️ {}: {}\n", cell(&r.name), cell(w)));
        }
    }
    if b.results.iter().any(|r| !r.warnings.is_empty()) {
        out.push('\n');
    }
}

/// `report --load`: each live-service run's checks, latency per outcome and budgets.
fn load_md(out: &mut String, l: &LoadResults) {
    use super::live::{self, BUDGETS_HEAD, LATENCY_HEAD};
    let table = |out: &mut String, head: &[&str], rows: &[Vec<String>]| {
        out.push_str(&format!("| {} |\n", head.join(" | ")));
        out.push_str(&format!("|---{}|\n", "|---:".repeat(head.len() - 1)));
        for r in rows {
            let cells: Vec<String> = r.iter().map(|c| cell(c)).collect();
            out.push_str(&format!("| {} |\n", cells.join(" | ")));
        }
        out.push('\n');
    };
    for r in &l.results {
        let v = live::rows(r);
        out.push_str(&format!(
            "### Against a live service (idemcalc load, `{}`)\n\n`{}`\n\n",
            v.file, v.title
        ));
        let checks: Vec<Vec<String>> = v
            .checks
            .iter()
            .map(|(k, x)| vec![k.clone(), x.clone()])
            .collect();
        table(out, &["Checked from outside", "Value"], &checks);
        table(out, &LATENCY_HEAD, &v.latency);
        if !v.budgets.is_empty() {
            table(out, &BUDGETS_HEAD, &v.budgets);
        }
    }
}

fn comparison_md(out: &mut String, c: &Comparison) {
    let real: Vec<&Change> = c.changes.iter().filter(|x| x.real).collect();
    out.push_str("### Against the baseline\n\n");
    out.push_str(&format!(
        "{} compared with {}; {} changed by more than sampling explains (|z| > {:.2}, a 5% family-wise false-alarm rate).\n\n",
        plural(c.changes.len() as u64, "figure", "figures"),
        code(&c.baseline),
        real.len(),
        c.z_threshold
    ));
    if c.changed_inputs.is_empty() {
        out.push_str("Inputs: unchanged.\n\n");
    } else {
        out.push_str("Inputs changed:\n\n");
        for x in c.changed_inputs.iter().take(20) {
            out.push_str(&format!(
                "- {} ({}): {} {} → {}\n",
                plain(&x.scenario),
                plain(&x.retention),
                code(&x.input),
                plain(&x.before),
                plain(&x.after)
            ));
        }
        if c.changed_inputs.len() > 20 {
            out.push_str(&format!(
                "- and {} more (summary.json, `comparison.changed_inputs`)\n",
                c.changed_inputs.len() - 20
            ));
        }
        out.push('\n');
    }
    if !real.is_empty() {
        out.push_str(
            "| Scenario | Retention | Figure | Before | After | Change (95% interval) |\n",
        );
        out.push_str("|---|---:|---|---|---|---|\n");
        for x in real {
            let k = change_quantity(x.figure);
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | **{}** |\n",
                plain(&x.scenario),
                plain(&x.retention),
                change_label(x.figure),
                with_interval(k, &x.before),
                with_interval(k, &x.after),
                relative_text(x)
            ));
        }
        out.push('\n');
    }
    for (label, list) in [
        ("Only in the baseline", &c.only_in_baseline),
        ("New in this run", &c.only_in_this_run),
    ] {
        if !list.is_empty() {
            let names: Vec<String> = list.iter().map(|n| plain(n)).collect();
            out.push_str(&format!("{label}: {}.\n\n", names.join(", ")));
        }
    }
}

/// `index.html`: the one-page report, with the run's stamp at its foot.
#[derive(Debug, Clone, Default)]
pub struct HtmlExporter {
    pub stamp: super::RunStamp,
}

impl Exporter for HtmlExporter {
    fn file_name(&self) -> &'static str {
        "index.html"
    }

    fn serialize(&self, summary: &Summary) -> Result<Vec<u8>, ExportError> {
        Ok(html::render(summary, &self.stamp)?.into_bytes())
    }
}
