//! Whether a run checked anything, and the run's verdict in one place.
//!
//! A run's budgets (duplicates, 422s, p99, error share) are all about the answers that came:
//! a run where every request got a 401, a 307 or a 500, where nothing listened at the URL, or
//! where every 201 lacked the identity at the template's pointer has nothing to count, so
//! every budget reads "ok" and the run passed while checking nothing. k6 marks such requests
//! `http_req_failed`; here the rule is sharper, because what `load` checks is labels: **a run
//! checked enough when at least one intent got a 2xx whose label identity was read** (in
//! time, late or lost on the way). Below that the run fails, and its first line says why,
//! from the most common thing the attempts got instead. How many intents were not checked is
//! reported either way (`unchecked_share`): a run that checked a few of many passes, since
//! an overloaded service legitimately leaves intents without a label, and the error share
//! and its budget are where that is judged.

use crate::format::thousands;
use serde::Serialize;
use std::collections::BTreeMap;

/// One budget checked (k6's threshold): below the run's verdict, which reads them all.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Verdict {
    pub budget: &'static str,
    pub limit: f64,
    pub measured: f64,
    pub ok: bool,
}

/// How many intents a label identity was read for, and, when none was, why.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Checked {
    /// Intents with at least one 2xx whose identity was read: those the duplicate check
    /// covers.
    pub labelled_intents: u64,
    /// Intents started without one.
    pub unchecked_intents: u64,
    /// `unchecked_intents` over the intents started (1 when none started).
    pub unchecked_share: f64,
    /// At least one intent was labelled.
    pub enough: bool,
    /// Why not, when not enough: the most common thing the attempts got instead, with what to
    /// change.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub why: Option<String>,
}

/// What the run's attempts got, as far as the "why" needs it.
pub(super) struct Seen<'a> {
    pub intents_started: u64,
    pub dropped_intents: u64,
    /// 2xx answers without an identity at the template's pointer.
    pub identity_missing: u64,
    pub labelled_intents: u64,
    /// Attempts as the client heard them by their deadline, every outcome.
    pub heard: u64,
    pub conflicts: u64,
    pub timeouts: u64,
    pub errors: &'a BTreeMap<String, u64>,
    pub statuses: &'a BTreeMap<u16, u64>,
    /// The URL the requests went to.
    pub target: String,
    pub identity: &'a str,
    pub deadline_ms: f64,
    pub max_in_flight: usize,
}

impl Checked {
    pub(super) fn of(seen: &Seen<'_>) -> Self {
        let started = seen.intents_started;
        let unchecked = started.saturating_sub(seen.labelled_intents);
        let enough = seen.labelled_intents > 0;
        Checked {
            labelled_intents: seen.labelled_intents,
            unchecked_intents: unchecked,
            unchecked_share: if started == 0 {
                1.0
            } else {
                unchecked as f64 / started as f64
            },
            enough,
            why: (!enough).then(|| why(seen)),
        }
    }

    /// The budget row that carries the rule into `budgets` (and so into `report --load`,
    /// which fails on a broken budget): at most every intent but one unchecked.
    pub(super) fn budget(&self) -> Verdict {
        let started = self.labelled_intents + self.unchecked_intents;
        Verdict {
            budget: UNCHECKED_BUDGET,
            limit: started as f64 - 1.0,
            measured: self.unchecked_intents as f64,
            ok: self.enough,
        }
    }
}

/// The budget row of the "checked enough" rule.
pub const UNCHECKED_BUDGET: &str = "unchecked_intents";
/// The budget row of an invoice that was asked for and could not be read.
pub const INVOICE_UNREAD_BUDGET: &str = "invoice_unread";

/// The most common thing the attempts got instead of a label, in words, with a hint.
fn why(seen: &Seen<'_>) -> String {
    if seen.intents_started == 0 {
        return if seen.dropped_intents > 0 {
            format!(
                "no intent started: all {} found the pool full (--max-in-flight {})",
                thousands(seen.dropped_intents as f64),
                seen.max_in_flight
            )
        } else {
            "no intent started: the run was shorter than one arrival (raise --rate or --duration)"
                .into()
        };
    }
    let ok_answers: u64 = seen
        .statuses
        .iter()
        .filter(|(s, _)| (200..300).contains(*s))
        .map(|(_, n)| n)
        .sum();
    if ok_answers > 0 && seen.identity_missing > 0 {
        return format!(
            "no answer named a label: {} 2xx answers had no identity at `{}` (a non-empty \
             string or a number); pass --identity POINTER (or a --template identity) pointing \
             at the label's identity",
            thousands(seen.identity_missing as f64),
            seen.identity
        );
    }
    let heard = seen.heard;
    // Every failure by kind, a 409 and a timeout being kinds of their own.
    let mut kinds: Vec<(String, u64)> = seen.errors.iter().map(|(k, n)| (k.clone(), *n)).collect();
    kinds.push(("HTTP 409".into(), seen.conflicts));
    kinds.push((TIMEOUT.into(), seen.timeouts));
    let Some((kind, n)) = kinds
        .into_iter()
        .filter(|(_, n)| *n > 0)
        .max_by(|a, b| a.1.cmp(&b.1).then_with(|| b.0.cmp(&a.0)))
    else {
        return "no answer was heard".into();
    };
    let of = format!(
        "{} of {} attempts",
        thousands(n as f64),
        thousands(heard.max(n) as f64)
    );
    if let Some(status) = kind.strip_prefix("HTTP ") {
        let hint = status.parse::<u16>().map_or("", status_hint);
        return format!("no request succeeded: {status} on {of}{hint}");
    }
    if kind == TIMEOUT {
        return format!(
            "no request succeeded: no answer within the {} ms deadline on {of}",
            crate::format::significant(seen.deadline_ms, 4)
        );
    }
    if kind.starts_with("connect") {
        return format!("nothing answered at {}: {kind} on {of}", seen.target);
    }
    format!("no request succeeded: {kind} on {of}")
}

const TIMEOUT: &str = "timeout";

/// What to change, given the status every attempt got.
fn status_hint(status: u16) -> &'static str {
    match status {
        401 | 403 => "; pass --callers or --header",
        404 | 405 => "; check the URL and the template's method and path",
        300..=399 => "; redirects are not followed: give the URL they point to",
        400 | 422 => "; the server refuses the request: check the template's body and key",
        409 => "; every attempt found its key in progress",
        429 => "; the server is limiting the rate: lower --rate",
        500..=599 => "; the server failed every request",
        _ => "",
    }
}

/// The run's verdict: passed, or each reason it failed, in the order a reader needs them
/// (nothing checked first, since every other figure then means nothing).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct RunVerdict {
    pub ok: bool,
    /// One line per reason the run failed; empty when it passed.
    pub failures: Vec<String>,
    /// The verdict in one sentence, as the text output ends with it.
    pub summary: String,
}

impl RunVerdict {
    pub(super) fn of(
        checked: &Checked,
        budgets: &[Verdict],
        invoice_unread: Option<&str>,
    ) -> RunVerdict {
        let mut failures = Vec::new();
        if let Some(why) = &checked.why {
            failures.push(why.clone());
        }
        if let Some(reason) = invoice_unread {
            failures.push(format!("the carrier's invoice was not read: {reason}"));
        }
        // The two rows above have their own sentence; every other broken budget is named.
        for v in budgets
            .iter()
            .filter(|v| !v.ok && v.budget != UNCHECKED_BUDGET && v.budget != INVOICE_UNREAD_BUDGET)
        {
            failures.push(format!(
                "budget crossed: {} {} > {}",
                v.budget,
                crate::format::significant(v.measured, 3),
                crate::format::significant(v.limit, 3)
            ));
        }
        let ok = failures.is_empty() && budgets.iter().all(|v| v.ok);
        let summary = if ok {
            format!(
                "ok: a label was read for {} of {} intents ({} unchecked); no budget crossed ({} checked)",
                thousands(checked.labelled_intents as f64),
                thousands((checked.labelled_intents + checked.unchecked_intents) as f64),
                crate::format::percent(checked.unchecked_share),
                budgets.len()
            )
        } else {
            format!("FAILED: {}", failures.join(" | "))
        };
        RunVerdict {
            ok,
            failures,
            summary,
        }
    }
}
