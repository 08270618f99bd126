//! The carrier's invoice against what the clients got: the seed's reconciliation ("carrier
//! invoice lines with no matching label"), from outside the service.
//!
//! A second execution of one intent (its key purged, the carrier's window passed) buys a
//! second label, but the service's second line of defence, `UNIQUE (order_id, parcel_no)` on
//! `labels`, answers with the label it already holds: the client sees one identity and the
//! carrier bills twice ("our records look right; the carrier bills twice"). So a client cannot
//! count such a duplicate; the invoice can. `load --carrier-invoice URL` reads it after the run
//! (`idemcalc carrier` serves it at `GET /v1/invoice`) and counts the lines of the run's own
//! orders beyond one per parcel and version.

use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::Duration;

/// What the invoice says about the run's intents; `LoadReport::add_invoice` puts it per day
/// at the run's rate, as the clients' duplicates are.
#[derive(Debug, Clone, Serialize)]
pub struct InvoiceCount {
    pub url: String,
    /// Invoice lines for the run's orders.
    pub lines: u64,
    /// Lines beyond the first for one (order, parcel, version): labels bought twice.
    pub duplicate_purchases: u64,
}

/// The fields of a line this check reads.
#[derive(Debug, Deserialize)]
struct Line {
    order_id: i64,
    parcel_no: i64,
    label_version: i64,
}

/// Reads the invoice at `url` and counts the purchases of orders `first_order ..
/// first_order + intents` (the run's: intent n labels order first + n).
pub fn reconcile(
    url: &reqwest::Url,
    first_order: i64,
    intents: u64,
) -> anyhow::Result<InvoiceCount> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let text = rt.block_on(async {
        let client = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .build()?;
        let r = client.get(url.clone()).send().await?.error_for_status()?;
        r.text().await
    });
    let text = text.map_err(|e| anyhow::anyhow!("--carrier-invoice {url}: {e}"))?;
    let lines: Vec<Line> = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!("--carrier-invoice {url}: not a carrier invoice (a JSON list of lines with order_id, parcel_no, label_version): {e}")
    })?;
    let end = first_order.saturating_add(intents as i64);
    let mut per_parcel: HashMap<(i64, i64, i64), u64> = HashMap::new();
    for l in lines
        .iter()
        .filter(|l| (first_order..end).contains(&l.order_id))
    {
        *per_parcel
            .entry((l.order_id, l.parcel_no, l.label_version))
            .or_default() += 1;
    }
    let count: u64 = per_parcel.values().sum();
    let duplicate_purchases: u64 = per_parcel.values().map(|n| n - 1).sum();
    Ok(InvoiceCount {
        url: url.to_string(),
        lines: count,
        duplicate_purchases,
    })
}
