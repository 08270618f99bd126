//! The carrier's purchases against the labels a killed run's store kept (issue 35, item 12).
//!
//! "At most one label per parcel" cannot fail on SQLite or PostgreSQL: the labels table's
//! UNIQUE constraint and `ON CONFLICT DO NOTHING` make it so. What can go wrong is money: the
//! carrier sold a label the store does not know of (the seed's monitoring figure "carrier
//! invoice lines with no matching label"), or the store holds a label the carrier never sold.
//! `simulate --carrier-ledger FILE` writes each purchase as it is booked, so a SIGKILL leaves
//! every one of them; this module reads that file with a CSV reader of its own (not the
//! crate's) and reconciles it with the store's labels and started keys.

use std::collections::{HashMap, HashSet};
use std::path::Path;

/// The ledger's columns, as its header line names them.
const COLUMNS: [&str; 8] = [
    "at_ms",
    "carrier_key",
    "order_id",
    "parcel_no",
    "label_version",
    "label_id",
    "tracking_no",
    "cost_cents",
];

/// What a label says about itself, in the store or on an invoice line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Sold {
    pub label_id: String,
    pub order_id: i64,
    pub parcel_no: i64,
    pub label_version: i64,
    pub tracking_no: String,
    pub cost_cents: i64,
}

impl Sold {
    fn parcel(&self) -> (i64, i64, i64) {
        (self.order_id, self.parcel_no, self.label_version)
    }
}

/// One invoice line: the carrier key it was bought under (empty when sent without one) and
/// the label.
#[derive(Debug, Clone)]
pub struct Invoice {
    pub carrier_key: String,
    pub label: Sold,
}

/// A ledger file as read.
#[derive(Debug, Default)]
pub struct Ledger {
    pub lines: Vec<Invoice>,
    /// Lines that are not invoice lines (a wrong header, field count or number).
    pub malformed: i64,
    /// The file ends inside a line: the `write(2)` a kill cut short (the kernel may stop a
    /// write between pages). Its purchase never returned, so no label can be its; not read.
    pub torn_tail: bool,
}

/// The records of a CSV text (RFC 4180: quoted fields, `""` inside them), and whether the text
/// ends inside a record (no final newline).
fn records(text: &str) -> (Vec<Vec<String>>, bool) {
    let mut out = Vec::new();
    let (mut record, mut field) = (Vec::new(), String::new());
    let (mut quoted, mut chars) = (false, text.chars().peekable());
    while let Some(c) = chars.next() {
        match (quoted, c) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                field.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => field.push(c),
            (false, '"') => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut field)),
            (false, '\n') => {
                record.push(std::mem::take(&mut field));
                out.push(std::mem::take(&mut record));
            }
            (false, c) => field.push(c),
        }
    }
    let torn = quoted || !field.is_empty() || !record.is_empty();
    (out, torn)
}

/// Reads the ledger at `path`; a missing or empty file is an empty ledger (the run was killed
/// before it wrote its header).
pub fn read(path: &Path) -> Ledger {
    let text = match std::fs::read(path) {
        Ok(bytes) => String::from_utf8_lossy(&bytes).into_owned(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => panic!("read the ledger {}: {e}", path.display()),
    };
    let (rows, torn_tail) = records(&text);
    let mut ledger = Ledger {
        torn_tail,
        ..Ledger::default()
    };
    let mut rows = rows.into_iter();
    if let Some(header) = rows.next()
        && header != COLUMNS
    {
        ledger.malformed += 1;
    }
    for row in rows {
        match invoice(&row) {
            Some(line) => ledger.lines.push(line),
            None => ledger.malformed += 1,
        }
    }
    ledger
}

fn invoice(row: &[String]) -> Option<Invoice> {
    let [
        at_ms,
        key,
        order,
        parcel,
        version,
        label_id,
        tracking_no,
        cost,
    ] = row
    else {
        return None;
    };
    at_ms.parse::<i64>().ok()?;
    Some(Invoice {
        carrier_key: key.clone(),
        label: Sold {
            label_id: label_id.clone(),
            order_id: order.parse().ok()?,
            parcel_no: parcel.parse().ok()?,
            label_version: version.parse().ok()?,
            tracking_no: tracking_no.clone(),
            cost_cents: cost.parse().ok()?,
        },
    })
}

/// A field written as the carrier writes it: quoted when it holds a comma, quote or newline.
pub fn csv_field(text: &str) -> String {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\""))
    } else {
        text.to_string()
    }
}

/// The store, as the reconciliation needs it: every label, and the `(caller_id, idem_key)` of
/// every record still `started`.
#[derive(Debug, Default)]
pub struct StoreView {
    pub labels: Vec<Sold>,
    pub started: Vec<(String, String)>,
}

/// The store against the ledger.
#[derive(Debug, Default, Clone, Copy)]
pub struct Reconciled {
    /// Purchases in the ledger.
    pub invoice_lines: i64,
    /// Lines that are not invoice lines, and label ids on two lines (the carrier numbers each
    /// label it sells once).
    pub malformed: i64,
    pub torn_tail: bool,
    /// Records still `started`.
    pub started: i64,
    /// (a) Labels without an invoice line of the same label id, tracking number, parcel
    /// (order, parcel, version) and cost: labels the carrier never sold.
    pub labels_not_sold: i64,
    /// (b) Carrier keys on more than one invoice line. The carrier replays a key it holds, and
    /// the kill runs keep every key inside its 24 h window (1 h of arrivals), so this is a
    /// broken carrier key store or derivation.
    pub keys_billed_twice: i64,
    /// (c) Invoice lines without a label of their label id, explained by their key still being
    /// `started` (in flight when the process died, or given up by its client).
    pub in_flight: i64,
    /// (c) ... explained by their parcel's label having been bought under another carrier key:
    /// a duplicate purchase, which the simulator counts.
    pub duplicates: i64,
    /// (c) ... explained by neither: the carrier billed a label the store lost.
    pub unexplained: i64,
}

impl Reconciled {
    /// Every label sold, every key billed once, every unmatched purchase explained, and no
    /// more purchases in flight than keys left started.
    pub fn holds(&self) -> bool {
        self.malformed == 0
            && self.labels_not_sold == 0
            && self.keys_billed_twice == 0
            && self.unexplained == 0
            && self.in_flight <= self.started
    }
}

/// Reconciles `store` against `ledger`. The carrier key of each started record is the label
/// service's own derivation (`idemcalc::carrier::carrier_key`, the one function of the crate
/// this uses: the harness checks what was bought, not how keys are made).
pub fn reconcile(store: &StoreView, ledger: &Ledger) -> Reconciled {
    let mut r = Reconciled {
        invoice_lines: ledger.lines.len() as i64,
        malformed: ledger.malformed,
        torn_tail: ledger.torn_tail,
        started: store.started.len() as i64,
        ..Reconciled::default()
    };
    let mut by_label: HashMap<&str, &Invoice> = HashMap::new();
    let mut keys: HashSet<&str> = HashSet::new();
    for line in &ledger.lines {
        if by_label.insert(&line.label.label_id, line).is_some() {
            r.malformed += 1;
        }
        if !line.carrier_key.is_empty() && !keys.insert(&line.carrier_key) {
            r.keys_billed_twice += 1;
        }
    }
    r.labels_not_sold = store
        .labels
        .iter()
        .filter(|l| {
            by_label
                .get(l.label_id.as_str())
                .is_none_or(|i| i.label != **l)
        })
        .count() as i64;
    let stored: HashSet<&str> = store.labels.iter().map(|l| l.label_id.as_str()).collect();
    let by_parcel: HashMap<(i64, i64, i64), &str> = store
        .labels
        .iter()
        .map(|l| (l.parcel(), l.label_id.as_str()))
        .collect();
    let in_flight: HashSet<String> = store
        .started
        .iter()
        .map(|(caller, key)| idemcalc::carrier::carrier_key(caller, key))
        .collect();
    for line in &ledger.lines {
        if stored.contains(line.label.label_id.as_str()) {
            continue;
        }
        let bought_under_another_key = by_parcel
            .get(&line.label.parcel())
            .and_then(|id| by_label.get(id))
            .is_some_and(|kept| kept.carrier_key != line.carrier_key);
        if in_flight.contains(&line.carrier_key) {
            r.in_flight += 1;
        } else if bought_under_another_key {
            r.duplicates += 1;
        } else {
            r.unexplained += 1;
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reader_takes_quotes_and_sees_a_torn_tail() {
        let (rows, torn) = records("a,\"b,\"\"c\"\"\"\n1,2\n3,\"4");
        assert_eq!(rows, vec![vec!["a", "b,\"c\""], vec!["1", "2"]]);
        assert!(torn);
        let (rows, torn) = records("x\n");
        assert_eq!(rows, vec![vec!["x"]]);
        assert!(!torn);
    }
}
