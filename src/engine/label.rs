//! The saved 201 body, built from the label row alone so every replay is byte-identical.

use super::request;
use crate::store::LabelRow;

/// The saved 201 body: what the caller needs to ship the parcel, as a label API answers it
/// (label URL, carrier, service, timestamps), at a size drawn for its key from `sizes`.
///
/// Fields are added in order of how often real label APIs return them while the body stays
/// within the target, then `label_data` (an inline label image, the usual reason a response
/// runs to kilobytes) fills the rest. Everything is a function of the label row, so a label
/// found again (the unique-constraint path) gets the very same bytes, and replays stay
/// byte-identical.
pub fn label_body(l: &LabelRow, sizes: &crate::payload::SizeDist) -> String {
    use crate::payload::{label_timestamp, response_filler, response_target_bytes};
    let target = response_target_bytes(&l.created_by_key, l.order_id, sizes);
    let mut ints = [itoa::Buffer::new(); 4];
    let [order_id, parcel_no, label_version, cost_cents] = &mut ints;
    let (order_id, parcel_no) = (order_id.format(l.order_id), parcel_no.format(l.parcel_no));
    let label_version = label_version.format(l.label_version);
    let cost_cents = cost_cents.format(l.cost_cents);
    let (label_id, tracking_no) = (json_escaped(&l.label_id), json_escaped(&l.tracking_no));
    let created_at = label_timestamp(&l.created_by_key, l.order_id);
    // Every member the body can have, in RFC 8785's order (names sorted by their UTF-16 code
    // units: for these ASCII names, bytes), each with when it is added: the row's own fields
    // always (0), then the extras in order of how often label APIs return them (1 to 6) while
    // the body stays within the target, then `label_data` (7) to fill the rest. A value is its
    // pieces' text, quoted unless it is a number.
    const LABEL_DATA: usize = 4;
    let mut members: [(&str, u8, bool, [&str; 3]); 13] = [
        ("carrier", 1, true, ["ground-co", "", ""]),
        ("cost_cents", 0, false, [cost_cents, "", ""]),
        ("created_at", 4, true, [&created_at, "", ""]),
        ("currency", 3, true, ["USD", "", ""]),
        ("label_data", 7, true, ["", "", ""]),
        ("label_id", 0, true, [&label_id, "", ""]),
        (
            "label_url",
            5,
            true,
            ["https://labels.example.com/v1/labels/", &label_id, ".pdf"],
        ),
        ("label_version", 0, false, [label_version, "", ""]),
        ("order_id", 0, false, [order_id, "", ""]),
        ("parcel_no", 0, false, [parcel_no, "", ""]),
        ("service", 2, true, ["ground", "", ""]),
        ("tracking_no", 0, true, [&tracking_no, "", ""]),
        (
            "tracking_url",
            6,
            true,
            ["https://track.example.com/", &tracking_no, ""],
        ),
    ];
    // `"name":value` and the comma or brace after it.
    let cost = |&(name, _, quoted, parts): &(&str, u8, bool, [&str; 3])| {
        name.len() + 4 + 2 * usize::from(quoted) + parts.iter().map(|p| p.len()).sum::<usize>()
    };
    let mut included = [false; 13];
    let mut len = 1;
    for (m, inc) in members.iter().zip(&mut included).filter(|(m, _)| m.1 == 0) {
        len += cost(m);
        *inc = true;
    }
    for rank in 1..=6 {
        let Some(i) = members.iter().position(|m| m.1 == rank) else {
            continue;
        };
        if len + cost(&members[i]) > target {
            break;
        }
        len += cost(&members[i]);
        included[i] = true;
    }
    // `,"label_data":""` before any filler; the filler's alphabet needs no escaping.
    let data;
    if len + cost(&members[LABEL_DATA]) < target {
        let filler = target - len - cost(&members[LABEL_DATA]);
        data = response_filler(&l.created_by_key, l.order_id, filler);
        members[LABEL_DATA].3[0] = &data;
        len += cost(&members[LABEL_DATA]);
        included[LABEL_DATA] = true;
    }
    let mut text = String::with_capacity(len);
    for ((name, _, quoted, parts), _) in members.iter().zip(included).filter(|(_, inc)| *inc) {
        text.push_str(if text.is_empty() { "{\"" } else { ",\"" });
        text.push_str(name);
        text.push_str(if *quoted { "\":\"" } else { "\":" });
        parts.iter().for_each(|p| text.push_str(p));
        if *quoted {
            text.push('"');
        }
    }
    text.push('}');
    debug_assert_eq!(text.len(), len);
    debug_assert_eq!(
        text,
        request::canonical_json(&serde_json::from_str(&text).unwrap_or_default())
    );
    text
}

/// A string's JSON text between its quotes as RFC 8785 writes it: only `"`, `\` and control
/// characters escaped (serde_json escapes the same, for a string that needs it). Written
/// directly, the saved body costs a sixth of what building a `serde_json::Value` and
/// serialising it did (docs/bench.md, "The saved body, the prepared fence and the independent
/// harness").
pub(super) fn json_escaped(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        return s.into();
    }
    let quoted = serde_json::to_string(s).unwrap_or_default();
    quoted[1..quoted.len() - 1].to_owned().into()
}
