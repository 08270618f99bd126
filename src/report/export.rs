//! One trait, many small formats (hyperfine's `Exporter`): each turns the same [`Summary`] into
//! the bytes of one file, so adding a format never touches the run.

use super::html::{self, Kind, fmt};
use super::{Status, Summary};

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

/// `summary.md`: one table a CI job appends to its job summary, then the broken budgets.
pub struct MarkdownExporter;

/// Pipes would end a Markdown table cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

impl Exporter for MarkdownExporter {
    fn file_name(&self) -> &'static str {
        "summary.md"
    }

    fn serialize(&self, summary: &Summary) -> Result<Vec<u8>, ExportError> {
        let mut out = String::from("## idemcalc capacity report\n\n");
        out.push_str(
            "| Scenario | Rate | Retention | Store size (95% interval) | Duplicate labels | Daily cost | Budgets |\n",
        );
        out.push_str("|---|---:|---:|---|---|---|---|\n");
        let range = |kind: Kind, f: &crate::sim::replay::Figure| {
            format!(
                "{} ({} – {})",
                fmt(kind, f.estimate),
                fmt(kind, f.ci95_low),
                fmt(kind, f.ci95_high)
            )
        };
        for s in &summary.scenarios {
            for r in &s.runs {
                let verdicts = if r.verdicts.is_empty() {
                    "–".to_string()
                } else {
                    r.verdicts
                        .iter()
                        .map(|v| {
                            let mark = match v.status {
                                Status::Ok => "✅",
                                Status::AtRisk => "⚠️",
                                Status::Broken => "❌",
                            };
                            format!(
                                "{mark} {} ≤ {}",
                                v.budget,
                                html::budget_value(v.budget, v.limit)
                            )
                        })
                        .collect::<Vec<_>>()
                        .join("<br>")
                };
                let f = &r.figures;
                out.push_str(&format!(
                    "| {} | {} | {} | {} | {} | {} | {} |\n",
                    cell(&s.name),
                    fmt(Kind::Rate, r.rate_per_s),
                    r.retention,
                    range(Kind::Bytes, &f.store_bytes),
                    range(Kind::PerDay, &f.duplicate_labels_per_day),
                    range(Kind::UsdPerDay, &f.total_cost_per_day),
                    verdicts
                ));
            }
            if let Some(t) = &s.timeline {
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
                    "| {} | timeline | – | {} | {} label(s), {} carrier purchase(s) | – | – |\n",
                    cell(&s.name),
                    cell(&answers.join(", ")),
                    t.labels.len(),
                    t.carrier_purchases.len()
                ));
            }
        }
        out.push('\n');
        let checked: usize = summary
            .scenarios
            .iter()
            .map(|s| s.runs.iter().map(|r| r.verdicts.len()).sum::<usize>())
            .sum();
        if summary.broken_budgets.is_empty() {
            out.push_str(&format!("**All {checked} budget checks hold.**\n"));
        } else {
            out.push_str(&format!(
                "**{} of {checked} budget checks broken:**\n\n",
                summary.broken_budgets.len()
            ));
            for b in &summary.broken_budgets {
                out.push_str(&format!("- {}\n", b.describe()));
            }
        }
        out.push_str(
            "\nEstimates are from the simulator (engine on SQLite, measured bytes per record); the interval is its 95% interval. Full report: `index.html`.\n",
        );
        Ok(out.into_bytes())
    }
}

/// `index.html`: the one-page report.
pub struct HtmlExporter;

impl Exporter for HtmlExporter {
    fn file_name(&self) -> &'static str {
        "index.html"
    }

    fn serialize(&self, summary: &Summary) -> Result<Vec<u8>, ExportError> {
        Ok(html::render(summary)?.into_bytes())
    }
}
