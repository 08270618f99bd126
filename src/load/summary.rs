//! A run's figures as they are reported: the JSON shape ([`LoadReport`]), the budgets checked
//! against it (k6's thresholds: p99, error share, duplicates), the verdict (which also fails a
//! run that checked nothing, `load::verdict`), and the terminal and Markdown text of the same
//! figures.

use super::invoice::InvoiceCount;
use super::predict::{Agreement, Prediction};
pub use super::verdict::Verdict;
use super::verdict::{Checked, INVOICE_UNREAD_BUDGET, RunVerdict, Seen};
use crate::format::{
    Align, count_per_day, estimate_interval, human_count, percent, rate_per_s, text_table,
    thousands,
};
use crate::report::live;
use crate::sim::replay::{Figure, Tally};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// The share of the late-retry distribution a run must cover (its late retries sent before it
/// ended) for "too short to test" not to point at `--time-scale` as well: below it, retries
/// the prediction counts fell after the run, and a scaled clock brings them inside.
const COVERED_ENOUGH: f64 = 0.95;

/// Latency of one outcome, in milliseconds from each attempt's intended start.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Percentiles {
    pub count: u64,
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub p999: f64,
    pub max: f64,
}

impl Percentiles {
    pub(super) fn of(h: &Histogram<u64>) -> Self {
        let ms = |us: u64| us as f64 / 1000.0;
        if h.is_empty() {
            return Percentiles {
                count: 0,
                p50: 0.0,
                p90: 0.0,
                p99: 0.0,
                p999: 0.0,
                max: 0.0,
            };
        }
        Percentiles {
            count: h.len(),
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        }
    }
}

/// Counts that are not per outcome.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Counts {
    pub intents_started: u64,
    pub dropped_intents: u64,
    pub attempts_sent: u64,
    pub retries_sent: u64,
    /// Retries the late-retry distribution scheduled (after a timeout or a lost reply).
    pub late_retries_scheduled: u64,
    pub late_retries_not_sent: u64,
    /// Backoff retries (409, 5xx, connection errors) that fell after the run's end.
    pub backoff_retries_not_sent: u64,
    pub attempts_dropped: u64,
    pub lost_replies: u64,
    /// Answers heard after their attempt's deadline, while the tool still listened.
    pub late_replies: u64,
    pub unexpected_422: u64,
    /// 2xx answers without an identity at the template's pointer.
    pub identity_missing: u64,
    /// Labels handed to two different intents (another intent's saved answer replayed).
    pub shared_labels: u64,
}

impl Counts {
    /// Adds a shard's counts (`load merge`).
    pub(super) fn add(&mut self, o: &Counts) {
        self.intents_started += o.intents_started;
        self.dropped_intents += o.dropped_intents;
        self.attempts_sent += o.attempts_sent;
        self.retries_sent += o.retries_sent;
        self.late_retries_scheduled += o.late_retries_scheduled;
        self.late_retries_not_sent += o.late_retries_not_sent;
        self.backoff_retries_not_sent += o.backoff_retries_not_sent;
        self.attempts_dropped += o.attempts_dropped;
        self.lost_replies += o.lost_replies;
        self.late_replies += o.late_replies;
        self.unexpected_422 += o.unexpected_422;
        self.identity_missing += o.identity_missing;
        self.shared_labels += o.shared_labels;
    }
}

/// One intent that got two labels: its caller, the keys it sent, the identities it was given.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Duplicate {
    pub caller: String,
    pub keys: Vec<String>,
    pub labels: Vec<String>,
}

/// Intents that never got a 2xx, by how their client finished.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Stuck {
    pub total: u64,
    /// A final refusal (400, 401, 422, …).
    pub refused: u64,
    pub attempts_spent: u64,
    /// The next retry fell after the run's end (not sent).
    pub retry_after_end: u64,
    pub pool_full: u64,
    pub other: u64,
}

/// One wall-clock second.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SecondRow {
    pub t_s: u64,
    pub started: u64,
    pub dropped: u64,
    pub first_run: u64,
    pub replay: u64,
    pub conflict: u64,
    pub error: u64,
    pub timeout: u64,
    /// Answers heard this second after their deadline (their attempts were counted as
    /// timeouts when the deadline passed).
    pub late: u64,
    /// Over every answer heard this second, late ones included.
    pub latency_ms_p99: f64,
}

/// What the collector hands over at the end of a run.
pub(super) struct LoadSummary {
    pub(super) counts: Counts,
    pub(super) latency: BTreeMap<String, Percentiles>,
    /// Every 2xx, in time or late.
    pub(super) ok_latency: Percentiles,
    /// Intents a label identity was read for.
    pub(super) labelled_intents: u64,
    /// The ids of the intents started, ascending (intent n labels order `first_order + n`).
    pub(super) intent_ids: Vec<u64>,
    pub(super) statuses: BTreeMap<u16, u64>,
    pub(super) per_second: Vec<SecondRow>,
    pub(super) duplicates: Vec<Duplicate>,
    pub(super) stuck: Stuck,
    pub(super) errors: BTreeMap<String, u64>,
    pub(super) retry_distribution_covered: f64,
}

/// Thresholds that fail the run (exit 1), as k6's thresholds do.
#[derive(Debug, Clone, Copy, Default, PartialEq, Serialize, Deserialize)]
pub struct Budgets {
    /// p99 of the 2xx answers (first runs and replays, in time or late), milliseconds.
    pub latency_ms_p99: Option<f64>,
    /// Share of attempts answered with an error or nothing at all.
    pub error_share: Option<f64>,
    /// Duplicate labels allowed; 0 unless asked otherwise: a duplicate is the bug this finds.
    pub duplicate_labels: u64,
    /// Unexpected 422s allowed (this client never changes a body under a key).
    pub unexpected_422: u64,
}

/// What the run was asked, echoed in the output.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RunEcho {
    pub url: String,
    pub method: String,
    pub path: String,
    /// The rate this process sent at: a shard's share of the run's (`shard`).
    pub rate_per_s: f64,
    /// `load --shard I/N`: which part of the run's one schedule this process sent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<ShardEcho>,
    pub arrivals: String,
    /// How long intents started: the asked duration, or up to a Ctrl-C.
    pub duration_s: f64,
    /// Set when Ctrl-C stopped the run this many seconds in: the figures cover that part.
    pub interrupted_after_s: Option<f64>,
    pub seed: u64,
    pub deadline_ms: f64,
    pub observe_ms: f64,
    pub max_attempts: u32,
    pub time_scale: f64,
    pub lose_reply_fraction: f64,
    pub key_policy: String,
    pub first_order: i64,
    pub callers: usize,
    pub max_in_flight: usize,
    /// `--max-body`: an answer whose body is larger is an error.
    pub max_body_bytes: u64,
    pub identity: String,
    pub retry_distribution: String,
}

/// Everything `idemcalc load` reports, as its JSON.
#[derive(Debug, Clone, Serialize)]
pub struct LoadReport {
    pub run: RunEcho,
    /// Intents started per second of the run (dropped ones not counted).
    pub achieved_rate_per_s: f64,
    /// First runs (2xx not replayed) per second.
    pub creates_per_s: f64,
    pub wall_s: f64,
    pub duplicate_labels: u64,
    /// Duplicate labels per day at the asked rate, with Garwood's 95 % interval.
    pub duplicates_per_day: Figure,
    pub unexpected_422: u64,
    pub stuck_intents: u64,
    pub dropped_intents: u64,
    pub replays: u64,
    /// Share of attempts answered with an error or nothing.
    pub error_share: f64,
    /// Mean over intents of the late-retry distribution's CDF at the time each had left
    /// (times the time scale): the share of late retries the run could have sent.
    pub retry_distribution_covered: f64,
    pub latency_ms: BTreeMap<String, Percentiles>,
    pub counts: Counts,
    pub stuck: Stuck,
    pub errors: BTreeMap<String, u64>,
    /// The intents that got two labels (the first 100).
    pub duplicates: Vec<Duplicate>,
    pub per_second: Vec<SecondRow>,
    /// Every HTTP answer read, in time or late, by status.
    pub statuses: BTreeMap<u16, u64>,
    /// The order numbers the run's intents labelled: what the invoice is read for.
    pub orders: Orders,
    /// How many intents a label was read for; a run with none fails.
    pub checked: Checked,
    pub budgets: Vec<Verdict>,
    /// Whether the run passed: it checked something, read the invoice it was asked to, and
    /// kept every budget. `verdict` says why not.
    pub ok: bool,
    pub verdict: RunVerdict,
    /// `--carrier-invoice`: the carrier's invoice reconciled with the run's intents.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invoice: Option<InvoiceCheck>,
    /// `--carrier-invoice` asked for and not read (no answer in time, an error status, a body
    /// too large or not an invoice): the report is kept, and the run fails.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invoice_unread: Option<InvoiceUnread>,
    /// `--retention`: `simulate`'s duplicates per day for the same settings, beside the count.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prediction: Option<super::predict::Prediction>,
    /// `load merge`: the shard files this report adds up, in index order.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub merged_from: Vec<String>,
}

/// A shard as its report echoes it (`load::shard`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ShardEcho {
    pub index: u32,
    pub count: u32,
    /// The whole run's rate; this shard sent `1 / count` of it.
    pub run_rate_per_s: f64,
}

/// The order numbers of the intents started (dropped intents take an id, and so an order
/// number, but send nothing).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Orders {
    pub first: Option<i64>,
    pub last: Option<i64>,
    pub count: u64,
    /// Every one, ascending, for the invoice; not in the JSON.
    #[serde(skip)]
    numbers: Vec<i64>,
}

impl Orders {
    /// The orders of intents `ids` (ascending) of a run starting at `first_order`.
    fn of(first_order: i64, ids: &[u64]) -> Self {
        let numbers: Vec<i64> = ids
            .iter()
            .map(|&id| first_order.saturating_add(id as i64))
            .collect();
        Orders {
            first: numbers.first().copied(),
            last: numbers.last().copied(),
            count: numbers.len() as u64,
            numbers,
        }
    }

    /// Every order number the run sent, ascending.
    pub fn numbers(&self) -> &[i64] {
        &self.numbers
    }
}

/// An invoice asked for and not read.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct InvoiceUnread {
    pub url: String,
    pub reason: String,
}

/// The most duplicates listed by name; the count covers all.
const DUPLICATES_LISTED: usize = 100;

impl LoadReport {
    pub(super) fn new(run: RunEcho, s: LoadSummary, budgets: &Budgets, wall_s: f64) -> Self {
        let c = &s.counts;
        let dup_n = s
            .duplicates
            .iter()
            .map(|d| d.labels.len() as u64 - 1)
            .sum::<u64>();
        let duplicates_per_day = per_day_at_rate(dup_n, c.intents_started, run.rate_per_s);
        let count = |o: &str| s.latency.get(o).map_or(0, |p| p.count);
        let failed = count("error") + count("timeout");
        // Attempts as the client heard them: a late answer's attempt is already a timeout.
        let answered: u64 = super::outcome::Outcome::ALL
            .iter()
            .map(|o| count(o.name()))
            .sum();
        let error_share = if answered == 0 {
            0.0
        } else {
            failed as f64 / answered as f64
        };
        let ok_p99 = s.ok_latency.p99;
        let checked = Checked::of(&Seen {
            intents_started: c.intents_started,
            dropped_intents: c.dropped_intents,
            identity_missing: c.identity_missing,
            labelled_intents: s.labelled_intents,
            heard: answered,
            conflicts: count("conflict"),
            timeouts: count("timeout"),
            errors: &s.errors,
            statuses: &s.statuses,
            target: format!("{}{}", run.url.trim_end_matches('/'), run.path),
            identity: &run.identity,
            deadline_ms: run.deadline_ms,
            max_in_flight: run.max_in_flight,
        });
        let mut verdicts = vec![
            checked.budget(),
            verdict(
                "duplicate_labels",
                budgets.duplicate_labels as f64,
                dup_n as f64,
            ),
            verdict(
                "unexpected_422",
                budgets.unexpected_422 as f64,
                c.unexpected_422 as f64,
            ),
        ];
        if let Some(limit) = budgets.latency_ms_p99 {
            verdicts.push(verdict("latency_ms_p99", limit, ok_p99));
        }
        if let Some(limit) = budgets.error_share {
            verdicts.push(verdict("error_share", limit, error_share));
        }
        let duration_s = run.duration_s;
        let verdict = RunVerdict::of(&checked, &verdicts, None);
        LoadReport {
            achieved_rate_per_s: c.intents_started as f64 / duration_s,
            creates_per_s: count("first_run") as f64 / duration_s,
            wall_s,
            duplicate_labels: dup_n,
            duplicates_per_day,
            unexpected_422: c.unexpected_422,
            stuck_intents: s.stuck.total,
            dropped_intents: c.dropped_intents,
            replays: count("replay"),
            error_share,
            retry_distribution_covered: s.retry_distribution_covered,
            ok: verdict.ok,
            verdict,
            checked,
            orders: Orders::of(run.first_order, &s.intent_ids),
            statuses: s.statuses,
            budgets: verdicts,
            latency_ms: s.latency,
            counts: s.counts,
            stuck: s.stuck,
            errors: s.errors,
            duplicates: s.duplicates.into_iter().take(DUPLICATES_LISTED).collect(),
            per_second: s.per_second,
            run,
            invoice: None,
            invoice_unread: None,
            prediction: None,
            merged_from: Vec::new(),
        }
    }

    /// The verdict again, after a budget was added or the invoice could not be read.
    fn settle(&mut self) {
        let unread = self.invoice_unread.as_ref().map(|u| u.reason.as_str());
        self.verdict = RunVerdict::of(&self.checked, &self.budgets, unread);
        self.ok = self.verdict.ok;
    }

    /// The terminal text.
    pub fn text(&self) -> String {
        self.render(false)
    }

    /// The same figures as Markdown.
    pub fn markdown(&self) -> String {
        self.render(true)
    }

    /// The "checks from outside" table: the counts, the invoice's and the prediction's rows.
    fn check_rows(&self) -> Vec<Vec<String>> {
        let c = &self.counts;
        let rows = vec![
            row("duplicate labels", thousands(self.duplicate_labels as f64)),
            row(
                "duplicates per day at the asked rate (95 %)",
                with_interval(&self.duplicates_per_day),
            ),
        ];
        let mut rows = rows;
        rows.push(row(
            "intents checked (a label read)",
            format!(
                "{} of {} ({} unchecked)",
                thousands(self.checked.labelled_intents as f64),
                thousands(c.intents_started as f64),
                percent(self.checked.unchecked_share)
            ),
        ));
        if c.identity_missing > 0 {
            rows.push(row(
                &format!("2xx answers without an identity at {}", self.run.identity),
                thousands(c.identity_missing as f64),
            ));
        }
        if let Some(i) = &self.invoice {
            rows.push(row(
                "labels bought twice, on the carrier's invoice (per day, 95 %)",
                format!(
                    "{} of {} lines: {}",
                    thousands(i.count.duplicate_purchases as f64),
                    thousands(i.count.lines as f64),
                    with_interval(&i.duplicates_per_day)
                ),
            ));
        }
        if let Some(u) = &self.invoice_unread {
            rows.push(row(
                "labels bought twice, on the carrier's invoice",
                format!("not checked: {}", u.reason),
            ));
        }
        if let Some(p) = &self.prediction {
            rows.push(row(
                &format!(
                    "simulate's prediction (retention {}, carrier window {}, 95 %)",
                    p.retention, p.carrier_window
                ),
                format!(
                    "{}: {}",
                    with_interval(&p.duplicates_per_day),
                    self.agreement_text(p)
                ),
            ));
        }
        rows.extend([
            row("unexpected 422", thousands(self.unexpected_422 as f64)),
            row(
                "labels shared by two intents",
                thousands(c.shared_labels as f64),
            ),
            row(
                "stuck intents (no 2xx)",
                format!(
                    "{} (refused {}, attempts spent {}, retry after the end {}, pool full {})",
                    thousands(self.stuck.total as f64),
                    thousands(self.stuck.refused as f64),
                    thousands(self.stuck.attempts_spent as f64),
                    thousands(self.stuck.retry_after_end as f64),
                    thousands(self.stuck.pool_full as f64)
                ),
            ),
            row("replays", thousands(self.replays as f64)),
            row(
                "retry distribution covered",
                format!(
                    "{} (late retries scheduled {}, not sent {})",
                    percent(self.retry_distribution_covered),
                    thousands(c.late_retries_scheduled as f64),
                    thousands(c.late_retries_not_sent as f64)
                ),
            ),
        ]);
        rows
    }

    /// The prediction's verdict in words. Too short to test says how much longer a run would
    /// have to be, and, when late retries fell after the run's end, that a scaled clock brings
    /// them inside it.
    fn agreement_text(&self, p: &Prediction) -> String {
        let mut text = live::agreement(
            &p.agreement.name(),
            p.run_longer.map(|n| live::TooShort {
                interval_over_prediction: p.interval_over_prediction.unwrap_or(f64::INFINITY),
                max_interval_over_prediction: p.max_interval_over_prediction,
                run_longer: n,
                run_s: self.run.duration_s,
            }),
        );
        if p.agreement != Agreement::TooShort {
            return text;
        }
        if self.retry_distribution_covered < COVERED_ENOUGH {
            text.push_str(&format!(
                "; --time-scale would also bring more of the late retries inside the run ({} now)",
                percent(self.retry_distribution_covered)
            ));
        }
        text
    }

    /// The days of traffic at the asked rate the run stands for: what its counts are per day
    /// over, and what a prediction's expected count is taken over.
    pub fn run_days(&self) -> f64 {
        self.counts.intents_started as f64 / (self.run.rate_per_s * crate::duration::DAY_S)
    }

    fn render(&self, md: bool) -> String {
        let r = &self.run;
        let c = &self.counts;
        let mut out = String::new();
        let h = |t: &str| heading(t, md);
        if md {
            out.push_str("# idemcalc load\n\n");
        }
        // A failed run says why before anything else: every figure below may mean nothing.
        for f in &self.verdict.failures {
            out.push_str(&if md {
                format!("**FAILED**: {f}\n\n")
            } else {
                format!("FAILED: {f}\n")
            });
        }
        if !md && !self.verdict.failures.is_empty() {
            out.push('\n');
        }
        out.push_str(&format!(
            "{} {}{} at {} ({} arrivals) for {}, seed {}, deadline {} ms, time scale {}\n\n",
            r.method,
            r.url.trim_end_matches('/'),
            r.path,
            rate_per_s(r.rate_per_s),
            r.arrivals,
            crate::format::human_duration(r.duration_s),
            r.seed,
            r.deadline_ms,
            r.time_scale
        ));
        // A shard's figures are its part of the run; a merge's are the whole run's.
        if let Some(s) = &r.shard {
            out.push_str(&format!(
                "shard {}/{} of a run at {}: this part's figures; `idemcalc load merge` adds the {} results\n\n",
                s.index,
                s.count,
                rate_per_s(s.run_rate_per_s),
                s.count
            ));
        }
        if !self.merged_from.is_empty() {
            out.push_str(&format!(
                "merged from {} shards: {}\n\n",
                self.merged_from.len(),
                self.merged_from.join(", ")
            ));
        }
        if let Some(after) = r.interrupted_after_s {
            out.push_str(&format!(
                "interrupted: Ctrl-C stopped new intents and retries after {}; the attempts already sent were heard out, and the figures below cover that part of the run\n\n",
                crate::format::human_duration(after)
            ));
        }
        out.push_str(&h("Checks from outside"));
        let rows = self.check_rows();
        out.push_str(&table(&["check", "value"], &rows, md));
        out.push_str(&h("Speed"));
        let rows = vec![
            row(
                "intents started",
                format!(
                    "{} ({} achieved, {} dropped)",
                    thousands(c.intents_started as f64),
                    rate_per_s(self.achieved_rate_per_s),
                    thousands(self.dropped_intents as f64)
                ),
            ),
            row("creates (first runs)", rate_per_s(self.creates_per_s)),
            row(
                "attempts",
                format!(
                    "{} ({} retries, {} lost replies, {} late replies)",
                    thousands(c.attempts_sent as f64),
                    thousands(c.retries_sent as f64),
                    thousands(c.lost_replies as f64),
                    thousands(c.late_replies as f64)
                ),
            ),
            row("error share", percent(self.error_share)),
        ];
        out.push_str(&table(&["figure", "value"], &rows, md));
        out.push_str(&h("Latency from the intended start (ms)"));
        // The outcomes as the client heard them, then the answers heard after their deadline.
        let names = super::outcome::Outcome::ALL
            .iter()
            .map(|o| o.name())
            .chain([super::outcome::LATE]);
        let rows: Vec<Vec<String>> = names
            .filter_map(|name| self.latency_ms.get(name).map(|p| (name, p)))
            .filter(|(_, p)| p.count > 0)
            .map(|(name, p)| live::latency_row(name, p.count, [p.p50, p.p90, p.p99, p.p999, p.max]))
            .collect();
        out.push_str(&table(&live::LATENCY_HEAD, &rows, md));
        out.push_str(&self.render_lists(md));
        out
    }

    /// The errors, the duplicates by name and the budgets.
    fn render_lists(&self, md: bool) -> String {
        let mut out = String::new();
        let h = |t: &str| heading(t, md);
        if !self.errors.is_empty() {
            out.push_str(&h("Errors"));
            let rows: Vec<Vec<String>> = self
                .errors
                .iter()
                .map(|(k, n)| vec![k.clone(), thousands(*n as f64)])
                .collect();
            out.push_str(&table(&["error", "count"], &rows, md));
        }
        if !self.duplicates.is_empty() {
            out.push_str(&h("Duplicate labels (intent: key → labels)"));
            let rows: Vec<Vec<String>> = self
                .duplicates
                .iter()
                .take(20)
                .map(|d| vec![d.caller.clone(), d.keys.join(" "), d.labels.join(" ")])
                .collect();
            out.push_str(&table(&["caller", "key", "labels"], &rows, md));
        }
        out.push_str(&h("Budgets"));
        let rows: Vec<Vec<String>> = self
            .budgets
            .iter()
            .map(|v| {
                vec![
                    v.budget.to_string(),
                    sig(v.limit),
                    sig(v.measured),
                    if v.ok { "ok" } else { "BROKEN" }.to_string(),
                ]
            })
            .collect();
        out.push_str(&table(
            &["budget", "limit", "measured", "verdict"],
            &rows,
            md,
        ));
        // The verdict last, as k6 ends with its thresholds crossed.
        out.push_str(&h("Verdict"));
        if self.verdict.ok {
            out.push_str(&format!("{}\n", self.verdict.summary));
        } else {
            let bullet = if md { "- " } else { "" };
            for f in &self.verdict.failures {
                out.push_str(&format!("{bullet}FAILED: {f}\n"));
            }
        }
        out
    }
}

fn heading(title: &str, md: bool) -> String {
    if md {
        format!("## {title}\n\n")
    } else {
        format!("{title}\n")
    }
}

/// The carrier's invoice against the run: the count, and the same per day at the asked rate
/// with its 95 % interval.
#[derive(Debug, Clone, Serialize)]
pub struct InvoiceCheck {
    #[serde(flatten)]
    pub count: InvoiceCount,
    pub duplicates_per_day: Figure,
}

/// `n` events over a run of `intents` at `rate_per_s`, per day at that rate with Garwood's
/// 95 % interval: the run stands for `intents / (rate × 1 day)` days of traffic.
pub fn per_day_at_rate(n: u64, intents: u64, rate_per_s: f64) -> Figure {
    let days = intents as f64 / (rate_per_s * crate::duration::DAY_S);
    Tally {
        n,
        w: n as f64,
        w2: n as f64,
    }
    .per_day(days.max(f64::MIN_POSITIVE), 1.0)
}

impl LoadReport {
    /// Adds the carrier invoice's count: its own budget (the duplicates budget), and the
    /// figure a prediction is compared with, since a client cannot see a purchase the service
    /// answered with the label it already held.
    pub fn add_invoice(&mut self, count: InvoiceCount, limit: u64) {
        let check = InvoiceCheck {
            duplicates_per_day: per_day_at_rate(
                count.duplicate_purchases,
                self.counts.intents_started,
                self.run.rate_per_s,
            ),
            count,
        };
        let v = verdict(
            "duplicate_purchases",
            limit as f64,
            check.count.duplicate_purchases as f64,
        );
        self.budgets.push(v);
        self.invoice = Some(check);
        self.settle();
    }

    /// The invoice was asked for and could not be read: the run keeps its report and fails,
    /// since the labels bought twice it was to count are not counted. The budget row carries
    /// the failure into `report --load`.
    pub fn add_invoice_unread(&mut self, url: &reqwest::Url, reason: String) {
        self.budgets.push(verdict(INVOICE_UNREAD_BUDGET, 0.0, 1.0));
        self.invoice_unread = Some(InvoiceUnread {
            url: url.to_string(),
            reason,
        });
        self.settle();
    }

    /// The duplicates per day to compare a prediction with: the invoice's when it was read
    /// (it sees every purchase), else what the clients saw.
    pub fn duplicates_to_compare(&self) -> &Figure {
        self.invoice
            .as_ref()
            .map_or(&self.duplicates_per_day, |i| &i.duplicates_per_day)
    }
}

fn verdict(budget: &'static str, limit: f64, measured: f64) -> Verdict {
    Verdict {
        budget,
        limit,
        measured,
        ok: measured <= limit,
    }
}

fn row(name: &str, value: String) -> Vec<String> {
    vec![name.to_string(), value]
}

/// A per-day figure with its interval, written one way for every row: `simulate`'s and the
/// page's, where a count of zero is "none seen, ≤ 12,772/day", not "0 (0 – 12772)"; the unit
/// on the estimate and thousands separated, so the two figures of a row read against each
/// other (`85.3/day (82 – 88.5)`).
fn with_interval(d: &Figure) -> String {
    if d.estimate == 0.0 {
        return estimate_interval(d.estimate, d.ci95_low, d.ci95_high, count_per_day);
    }
    let range = estimate_interval(d.estimate, d.ci95_low, d.ci95_high, human_count);
    format!("{} ({range})", count_per_day(d.estimate))
}

fn sig(v: f64) -> String {
    crate::format::significant(v, 3)
}

fn table(header: &[&str], rows: &[Vec<String>], md: bool) -> String {
    if !md {
        // Two columns are a name and a sentence; more are numbers under their heading.
        let rest = if header.len() == 2 {
            Align::Left
        } else {
            Align::Right
        };
        let mut align = vec![Align::Left];
        align.extend(std::iter::repeat_n(rest, header.len() - 1));
        return text_table(header, rows, &align, 2) + "\n";
    }
    let mut out = format!("| {} |\n|", header.join(" | "));
    out.push_str(&"---|".repeat(header.len()));
    out.push('\n');
    for r in rows {
        out.push_str(&format!("| {} |\n", r.join(" | ").replace('\n', " ")));
    }
    out.push('\n');
    out
}
