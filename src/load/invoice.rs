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

/// Where the invoice is and how much of it is read: an invoice is the carrier's whole ledger,
/// every run's lines, so its ceiling is far above one answer's, and its wait is bounded so a
/// carrier that never answers costs seconds, not the run's report.
#[derive(Debug, Clone)]
pub struct InvoiceSource {
    pub url: reqwest::Url,
    /// `--max-invoice-body`.
    pub max_body: u64,
    /// `--invoice-timeout`: for the whole read, connection to last byte.
    pub timeout: Duration,
}

/// Reads the invoice and counts the purchases of `orders` (the order numbers the run's
/// intents labelled, ascending: `LoadReport::orders`). The error is the reason in words,
/// without the URL (the caller names it).
pub fn reconcile(source: &InvoiceSource, orders: &[i64]) -> anyhow::Result<InvoiceCount> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let read = rt.block_on(async {
        // `load merge` reads the invoice without a run before it to install the provider.
        crate::net::install_tls_provider();
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        let get = async {
            let r = client.get(source.url.clone()).send().await?;
            let status = r.status();
            let dropped: u64 = r
                .headers()
                .get(crate::carrier::INVOICE_DROPPED)
                .and_then(|v| v.to_str().ok()?.parse().ok())
                .unwrap_or(0);
            let body = super::body::read_capped(r, source.max_body).await?;
            Ok::<_, reqwest::Error>((status, dropped, body))
        };
        match tokio::time::timeout(source.timeout, get).await {
            Ok(r) => Ok(r),
            Err(_) => Err(anyhow::anyhow!(
                "no complete answer within {} (--invoice-timeout)",
                crate::duration::format_secs(source.timeout.as_secs_f64())
            )),
        }
    });
    // Drops whatever is still open (an endless body) without waiting for it.
    rt.shutdown_background();
    let (status, dropped, body) =
        read?.map_err(|e| anyhow::anyhow!("{}", super::body::error_kind(&e)))?;
    if !status.is_success() {
        anyhow::bail!("HTTP {status}");
    }
    if dropped > 0 {
        anyhow::bail!(
            "the carrier dropped its {dropped} oldest invoice lines (its --invoice-lines limit), so the run's purchases may be missing from it"
        );
    }
    let super::body::Body::Read(text) = body else {
        anyhow::bail!(
            "larger than --max-invoice-body ({})",
            super::body::size_text(source.max_body)
        );
    };
    let lines: Vec<Line> = serde_json::from_slice(&text).map_err(|e| {
        anyhow::anyhow!("not a carrier invoice (a JSON list of lines with order_id, parcel_no, label_version): {e}")
    })?;
    Ok(count(&source.url, &lines, orders))
}

/// The lines of `orders` (ascending), and those beyond one per parcel and version.
fn count(url: &reqwest::Url, lines: &[Line], orders: &[i64]) -> InvoiceCount {
    let mut per_parcel: HashMap<(i64, i64, i64), u64> = HashMap::new();
    for l in lines
        .iter()
        .filter(|l| orders.binary_search(&l.order_id).is_ok())
    {
        *per_parcel
            .entry((l.order_id, l.parcel_no, l.label_version))
            .or_default() += 1;
    }
    let count: u64 = per_parcel.values().sum();
    let duplicate_purchases: u64 = per_parcel.values().map(|n| n - 1).sum();
    InvoiceCount {
        url: url.to_string(),
        lines: count,
        duplicate_purchases,
    }
}
