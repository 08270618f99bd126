//! What a log's columns say before any row is read: the required ones missing (all named at
//! once), and the optional ones the log seems to hold under another name, or not at all. A log
//! whose status is in a column called `code` was read as if no call had a status, without a word.

/// Column names in the log, set by flags; the defaults are the names docs/fit.md documents.
#[derive(Debug, Clone, PartialEq)]
pub struct Columns {
    pub time: String,
    pub caller: String,
    pub key: String,
    pub status: String,
    pub response_bytes: String,
    pub replayed: String,
    pub weight: String,
}

impl Columns {
    /// Every column, in the order each reader reads them.
    pub(super) fn all(&self) -> [&String; 7] {
        [
            &self.time,
            &self.caller,
            &self.key,
            &self.status,
            &self.response_bytes,
            &self.replayed,
            &self.weight,
        ]
    }
}

impl Default for Columns {
    fn default() -> Self {
        Columns {
            time: "time".into(),
            caller: "caller".into(),
            key: "idempotency_key".into(),
            status: "status".into(),
            response_bytes: "response_bytes".into(),
            replayed: "replayed".into(),
            weight: "weight".into(),
        }
    }
}

/// Names other tools give each column, with the flag that picks one.
const ALIASES: [(&str, &[&str]); 7] = [
    (
        "time",
        &[
            "timestamp",
            "ts",
            "time_s",
            "created_at",
            "request_time",
            "at",
            "datetime",
        ],
    ),
    (
        "caller",
        &[
            "tenant",
            "client",
            "client_id",
            "caller_id",
            "account",
            "account_id",
            "user_id",
        ],
    ),
    (
        "key",
        &[
            "key",
            "idem_key",
            "idempotency-key",
            "request_id",
            "idempotencykey",
        ],
    ),
    (
        "status",
        &[
            "code",
            "status_code",
            "http_status",
            "response_status",
            "http_code",
        ],
    ),
    (
        "response-bytes",
        &[
            "bytes",
            "size",
            "response_size",
            "body_bytes",
            "bytes_sent",
            "content_length",
        ],
    ),
    (
        "replayed",
        &["replay", "cached", "idempotent_replayed", "was_replayed"],
    ),
    ("weight", &["w", "sample_weight"]),
];

/// What the columns found say.
#[derive(Debug, Default, PartialEq)]
pub(super) struct ColumnReport {
    /// Required columns not found, each with the flag that names it.
    pub missing: Vec<String>,
    pub warnings: Vec<String>,
    /// No status column: every call is taken as answered, as docs/fit.md says.
    pub status_absent: bool,
}

impl ColumnReport {
    /// The error for missing required columns, naming every one and what was found.
    pub fn missing_message(&self, found: &[String]) -> Option<String> {
        (!self.missing.is_empty()).then(|| {
            format!(
                "missing {} (found {})",
                self.missing.join("; "),
                shown(found)
            )
        })
    }
}

/// At most 20 found names, escaped: a header of a million columns makes a short message.
fn shown(found: &[String]) -> String {
    let mut names: Vec<String> = found
        .iter()
        .take(20)
        .map(|n| format!("`{}`", n.escape_debug()))
        .collect();
    if found.len() > 20 {
        names.push(format!("and {} more", found.len() - 20));
    }
    if names.is_empty() {
        "no columns".into()
    } else {
        names.join(", ")
    }
}

/// Checks the log's column names `found` against the columns `fit` reads.
pub(super) fn check(found: &[String], c: &Columns) -> ColumnReport {
    let has = |name: &str| found.iter().any(|f| f == name);
    let wanted = [
        ("time", &c.time, true),
        ("caller", &c.caller, false),
        ("key", &c.key, true),
        ("status", &c.status, false),
        ("response-bytes", &c.response_bytes, false),
        ("replayed", &c.replayed, false),
        ("weight", &c.weight, false),
    ];
    let mut report = ColumnReport::default();
    for (flag, name, required) in wanted {
        if has(name) {
            continue;
        }
        let alias = ALIASES
            .iter()
            .find(|(f, _)| *f == flag)
            .and_then(|(_, names)| {
                found
                    .iter()
                    .find(|n| names.iter().any(|a| a.eq_ignore_ascii_case(n)))
            });
        let hint = match alias {
            Some(a) => format!(
                "; `{}` looks like it: --{flag}-column {}",
                a.escape_debug(),
                a.escape_debug()
            ),
            None => format!("; name it with --{flag}-column"),
        };
        if required {
            report.missing.push(format!("column `{name}`{hint}"));
        } else if flag == "status" {
            report.status_absent = true;
            report.warnings.push(format!(
                "no `{name}` column: every call is taken as answered (timeout fraction 0){hint}"
            ));
        } else if alias.is_some() {
            report.warnings.push(format!("no `{name}` column{hint}"));
        }
    }
    let read = c.all();
    let unread: Vec<String> = found
        .iter()
        .filter(|f| !read.contains(f))
        .cloned()
        .collect();
    if !unread.is_empty() {
        report
            .warnings
            .push(format!("columns not read: {}", shown(&unread)));
    }
    report
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn every_missing_required_column_is_named_at_once() {
        let r = check(&names(&["timestamp", "code"]), &Columns::default());
        let m = r.missing_message(&names(&["timestamp", "code"])).unwrap();
        assert!(
            m.contains("`time`") && m.contains("--time-column timestamp"),
            "{m}"
        );
        assert!(
            m.contains("`idempotency_key`") && m.contains("--key-column"),
            "{m}"
        );
    }

    #[test]
    fn columns_under_other_names_are_suggested_and_status_absent_is_said() {
        let found = names(&[
            "time",
            "idempotency_key",
            "code",
            "bytes",
            "tenant",
            "region",
        ]);
        let r = check(&found, &Columns::default());
        assert!(r.missing.is_empty());
        assert!(r.status_absent);
        let all = r.warnings.join("\n");
        assert!(all.contains("--status-column code"), "{all}");
        assert!(all.contains("--response-bytes-column bytes"), "{all}");
        assert!(all.contains("--caller-column tenant"), "{all}");
        assert!(
            all.contains("columns not read") && all.contains("`region`"),
            "{all}"
        );
    }

    #[test]
    fn a_complete_log_gets_no_warning() {
        let found = names(&[
            "time",
            "caller",
            "idempotency_key",
            "status",
            "response_bytes",
            "replayed",
        ]);
        assert_eq!(check(&found, &Columns::default()), ColumnReport::default());
    }
}
