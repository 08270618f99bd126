//! Terminal text: what `estimate` and `simulate` print by default. Like the other exporters it
//! formats figures already computed (through `format`) and computes none.

use crate::decision::{Choice, Recommendation};
use crate::duration;
use crate::duration::DAY_S;
use crate::format::{
    Align, human_bytes, human_count, human_duration, percent, plural, rate_per_s, significant,
    text_table, thousands, usd,
};
use crate::model::Estimate;
use crate::report::vocabulary::{NO_MODEL, store_window};
use crate::run::results::{Figure, SimReport};
use crate::traffic::{Head, Tail};

/// The answer first: for each retention the user asked about (`asked`, seconds and as typed),
/// one line saying whether it meets the targets, in the user's words, and which retention to
/// keep instead; then the cheapest retention with the budgets it breaks. Every figure is the
/// decision's own ([`Recommendation::candidates`]); `simulate` prints these lines first.
pub fn verdict(asked: &[(f64, String)], r: &Recommendation) -> String {
    let mut out = String::new();
    for (retention_s, retention) in asked {
        let Some(c) = r
            .candidates
            .iter()
            .find(|c| (c.retention_s - retention_s).abs() <= 1e-6 * retention_s.max(1.0))
        else {
            continue;
        };
        let misses = misses(c, r);
        let mut line = format!(
            "{retention}: {} ({}/day in all), ",
            duplicates_text(c),
            crate::decision::cost_text(c)
        );
        if misses.is_empty() {
            line.push_str(&format!(
                "meets the target of {}",
                per_day_in_words(r.targets.max_duplicates_per_day)
            ));
        } else {
            line.push_str(&misses.join(" and "));
        }
        match &r.recommended {
            Some(k) if k.retention_s == c.retention_s => line.push_str("; keep it"),
            Some(k) => line.push_str(&format!(
                "; keep {}: {} per copy, {}/day",
                k.retention,
                human_bytes(k.store_bytes),
                usd(k.total_cost_per_day)
            )),
            None => {
                line.push_str("; no retention meets every target");
                if let Some(k) = &r.closest {
                    line.push_str(&format!(
                        " (closest within the budgets: {}, {} duplicate labels/day)",
                        k.retention,
                        duplicates(k.duplicate_labels_per_day)
                    ));
                }
            }
        }
        out.push_str(&line);
        out.push('\n');
    }
    if let Some(line) = cheapest(r) {
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// The cheapest retention with the budgets it breaks, when it is not the recommended one: shown
/// beside a recommendation, a cheaper retention must say why it is not the answer.
pub fn cheapest(r: &Recommendation) -> Option<String> {
    let c = &r.cheapest;
    cheapest_budgets(r).map(|budgets| {
        format!(
            "Cheapest: {}, {}/day, {budgets}",
            c.retention,
            usd(c.total_cost_per_day)
        )
    })
}

/// The targets and budgets the cheapest retention misses, or that it meets them all; `None`
/// when it is the recommended retention.
pub fn cheapest_budgets(r: &Recommendation) -> Option<String> {
    let c = &r.cheapest;
    if r.recommended
        .as_ref()
        .is_some_and(|k| k.retention_s == c.retention_s)
    {
        return None;
    }
    let misses = misses(c, r);
    Some(if misses.is_empty() {
        "within every target and budget".to_string()
    } else {
        misses.join(" and ")
    })
}

/// What a retention misses, in words: the duplicates target, the store and the cost budgets.
fn misses(c: &Choice, r: &Recommendation) -> Vec<String> {
    let t = &r.targets;
    let mut out = Vec::new();
    if !c.meets_duplicates {
        out.push(format!(
            "misses the target of {}",
            per_day_in_words(t.max_duplicates_per_day)
        ));
    }
    if let Some(gb) = t.max_store_gb.filter(|_| !c.meets_store) {
        out.push(format!(
            "needs {} per copy against the {} budget",
            human_bytes(c.peak_store_bytes.max(c.store_bytes)),
            human_bytes(gb * 1e9)
        ));
    }
    if let Some(budget) = t.max_cost_per_day.filter(|_| !c.meets_cost) {
        out.push(format!(
            "costs {}/day against the {}/day budget",
            usd(c.total_cost_per_day),
            usd(budget)
        ));
    }
    out
}

/// A retention's duplicates as the decision weighed them, with the replay's interval where it
/// counted them: `21.7 duplicate labels/day (95 % 20.1 – 23.3)`, `no duplicate label seen (at
/// most 2.6/day)`, or the model's figure alone.
fn duplicates_text(c: &Choice) -> String {
    match c.duplicates_measured {
        Some(m) if m.estimate > 0.0 => format!(
            "{} duplicate labels/day (95 % {})",
            duplicates(c.duplicate_labels_per_day),
            crate::format::interval(m.ci95_low, m.ci95_high, duplicates)
        ),
        Some(m) => format!(
            "no duplicate label seen (at most {}/day)",
            duplicates(m.ci95_high)
        ),
        None => format!(
            "{} duplicate labels/day (the model's)",
            duplicates(c.duplicate_labels_per_day)
        ),
    }
}

/// A daily count as a sentence says it: `21.7`, `0.0333` → `0.0333`.
fn duplicates(per_day: f64) -> String {
    crate::format::count_per_day(per_day).replace("/day", "")
}

/// A daily rate as people state a target: `1/30` → "1 a month", `2/7` → "2 a week", `0.5` →
/// "1 every 2 days", `3` → "3 a day": the first whole count of days, weeks, months (30 days) or
/// years (365), as `--max-duplicates-per-day 1/month` reads them.
pub fn per_day_in_words(per_day: f64) -> String {
    if !(per_day.is_finite() && per_day > 0.0) {
        return "none".to_string();
    }
    if per_day >= 1.0 {
        return format!("{} a day", significant(per_day, 3));
    }
    let every_days = 1.0 / per_day;
    if every_days < 7.0 && (every_days - every_days.round()).abs() <= 1e-6 * every_days {
        return format!("1 every {} days", every_days.round());
    }
    for (days, period) in [(7.0, "a week"), (30.0, "a month"), (365.0, "a year")] {
        let n = per_day * days;
        if n >= 1.0 - 1e-9 && (n - n.round()).abs() <= 1e-6 * n {
            return format!("{} {period}", n.round());
        }
    }
    format!("1 every {} days", significant(every_days, 3))
}

/// The decision's sentences, after the sweep.
pub fn decision(r: &Recommendation) -> String {
    let mut out = String::from("\nDecision\n\n");
    for note in &r.notes {
        out.push_str(&wrap(note, 94, "  "));
    }
    out
}

/// What `report` tells a person at a terminal: the headline's decision in its own sentences
/// (the first two: the answer and, when it is not the answer, the cheapest) and the number of
/// scenarios; the full summary is `summary.md`, and the Markdown goes to stdout only when it is
/// not a terminal (a CI job's log).
pub fn report_summary(summary: &crate::run::results::Summary) -> String {
    let mut out = String::new();
    if let Some(h) = &summary.decision {
        out.push_str(&format!("Decision ({}):\n", h.scenario));
        for note in h.recommendation.notes.iter().take(2) {
            out.push_str(&wrap(note, 94, "  "));
        }
    }
    out.push_str(&format!(
        "{} run; the full summary is summary.md beside the page.\n",
        plural(summary.scenarios.len() as u64, "scenario", "scenarios")
    ));
    out
}

/// The decision's heading with why there is none.
pub fn no_decision(reason: &str) -> String {
    format!("\nDecision\n\n{}", wrap(reason, 94, "  "))
}

/// Wraps a sentence at `width` columns, each line indented.
fn wrap(text: &str, width: usize, indent: &str) -> String {
    let mut out = String::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            out.push_str(indent);
            out.push_str(&line);
            out.push('\n');
            line.clear();
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        out.push_str(indent);
        out.push_str(&line);
        out.push('\n');
    }
    out
}

/// Durations in the tables: `24h (86,400 s)` reads both ways.
fn duration_with_secs(secs: f64) -> String {
    format!("{} ({} s)", human_duration(secs), thousands(secs))
}

/// `34.56M × 512 B` at one day's retention (as the seed writes it), `34.56M × 3 days × 512 B`
/// otherwise.
fn store_working(keys_per_day: f64, retention_s: f64, bytes_per_record: f64) -> String {
    let days = retention_s / DAY_S;
    let factor = if days == 1.0 {
        String::new()
    } else {
        format!(" × {} days", significant(days, 4))
    };
    format!(
        "{}{factor} × {}",
        human_count(keys_per_day),
        human_bytes(bytes_per_record)
    )
}

/// The three tables of the seed's "In practice" section, then the retention sweep: one step
/// per section, in the seed's order.
pub fn estimate(e: &Estimate, source: &str) -> String {
    let mut out = String::new();
    out.push_str(&store_size(e));
    out.push_str(&without_keys(e));
    out.push_str(&with_keys(e));
    out.push_str(&format!("\nHow late do retries arrive? ({source})\n\n"));
    out.push_str(&late_table(e));
    out.push_str(&sweep(e));
    out
}

/// An assumption's row: its name and its value.
fn pair(a: &str, b: String) -> Vec<String> {
    vec![a.to_string(), b]
}

/// A working table's columns: what, from what, and the result, which lines up by its digits.
const LEFT_RIGHT: [Align; 3] = [Align::Left, Align::Left, Align::Right];

/// "How big is the key store?": its assumptions and working.
fn store_size(e: &Estimate) -> String {
    let p = &e.params;
    let mut out = String::from("How big is the key store?\n\n  Assumptions\n");
    out.push_str(&text_table(
        &[],
        &[
            pair("Average label creates", rate_per_s(p.rate_per_s)),
            pair("Peak label creates", rate_per_s(p.peak_rate_per_s)),
            pair(
                "Retention after completion",
                duration_with_secs(p.retention_s),
            ),
            pair("Bytes per record", human_bytes(p.bytes_per_record)),
        ],
        &[],
        4,
    ));
    out.push_str("\n  Working\n");
    out.push_str(&text_table(
        &[],
        &[
            vec![
                "Keys per day".into(),
                format!("{} × 86,400 s", rate_per_s(p.rate_per_s)),
                human_count(e.keys_per_day),
            ],
            vec![
                "Store size at average load".into(),
                store_working(e.keys_per_day, p.retention_s, p.bytes_per_record),
                format!("≈ {}", human_bytes(e.store_bytes)),
            ],
            vec![
                "Keys if the peak lasted all day".into(),
                format!("{} × 86,400 s", rate_per_s(p.peak_rate_per_s)),
                human_count(e.peak_keys_per_day),
            ],
            vec![
                "Worst-case store size".into(),
                store_working(e.peak_keys_per_day, p.retention_s, p.bytes_per_record),
                format!("≈ {}", human_bytes(e.peak_store_bytes)),
            ],
        ],
        &LEFT_RIGHT,
        4,
    ));
    out
}

/// "What the keys save": its assumptions, and what retrying without keys (or never
/// retrying) would cost.
fn without_keys(e: &Estimate) -> String {
    let p = &e.params;
    let mut out = String::from("\nWhat the keys save\n\n  Assumptions\n");
    out.push_str(&text_table(
        &[],
        &[
            pair("Label creates per day", human_count(e.keys_per_day)),
            pair("Calls that time out", percent(p.timeout_fraction)),
            pair(
                "Of those, already done server-side",
                percent(p.done_fraction),
            ),
            pair("Average label price", usd(p.label_price_usd)),
            pair(
                "Cost of a parcel left unlabelled",
                usd(p.unlabelled_parcel_usd),
            ),
            pair("Carrier's key window", human_duration(p.carrier_window_s)),
            pair(
                "Storage price",
                format!("{}/GB-month", usd(p.storage_usd_per_gb_month)),
            ),
        ],
        &[],
        4,
    ));
    out.push_str("\n  Working, without keys\n");
    let timed_out = human_count(e.timed_out_per_day);
    out.push_str(&text_table(
        &[],
        &[
            vec![
                "Timed-out calls per day".into(),
                format!("{} × {}", human_count(e.keys_per_day), p.timeout_fraction),
                timed_out.clone(),
            ],
            vec![
                "Duplicate labels if retried without keys".into(),
                format!("{timed_out} × {}", p.done_fraction),
                format!("{}/day", human_count(e.duplicates_without_keys_per_day)),
            ],
            vec![
                "Money spent on duplicates".into(),
                format!(
                    "{} × {}",
                    human_count(e.duplicates_without_keys_per_day),
                    usd(p.label_price_usd)
                ),
                format!("{}/day", usd(e.duplicate_cost_without_keys_per_day)),
            ],
            vec![
                "Parcels left unlabelled if never retried".into(),
                format!("{timed_out} × {}", significant(1.0 - p.done_fraction, 6)),
                format!("{}/day", human_count(e.stuck_without_retry_per_day)),
            ],
            vec![
                "Cost of parcels left unlabelled".into(),
                format!(
                    "{} × {}",
                    human_count(e.stuck_without_retry_per_day),
                    usd(p.unlabelled_parcel_usd)
                ),
                format!("{}/day", usd(e.stuck_cost_without_retry_per_day)),
            ],
        ],
        &LEFT_RIGHT,
        4,
    ));
    out
}

/// With keys at the retention: late arrivals next to the real duplicates among them, then
/// what keeping the keys costs and saves.
fn with_keys(e: &Estimate) -> String {
    let p = &e.params;
    let retention = human_duration(p.retention_s);
    let mut out = format!(
        "\n  With keys, retention {retention}: late arrivals next to the real duplicates among them\n"
    );
    out.push_str(&late_and_duplicates(e, &retention));
    out.push_str(&format!(
        "    A late arrival is a duplicate only if its first attempt had run ({}) and the carrier\n    \
         no longer knows the derived key: it must come after both our {retention} and the carrier's {}.\n\n",
        percent(p.done_fraction),
        human_duration(p.carrier_window_s),
    ));
    out.push_str(&costs_with_keys(e));
    out
}

fn late_and_duplicates(e: &Estimate, retention: &str) -> String {
    let p = &e.params;
    let timed_out = human_count(e.timed_out_per_day);
    let window = human_duration(e.duplicate_window_s);
    let duplicate_fraction = p.done_fraction * (1.0 - e.retry_delay.cdf(e.duplicate_window_s));
    text_table(
        &["", "Late arrivals after purge", "Real duplicates"],
        &[
            vec![
                "Retry comes later than".into(),
                retention.to_string(),
                window.clone(),
            ],
            vec![
                "Share of timed-out calls".into(),
                percent(e.late_after_purge_fraction),
                percent(duplicate_fraction),
            ],
            vec![
                "Working".into(),
                format!("{timed_out} × {}", percent(e.late_after_purge_fraction)),
                format!(
                    "{timed_out} × {} × {}",
                    p.done_fraction,
                    percent(1.0 - e.retry_delay.cdf(e.duplicate_window_s))
                ),
            ],
            vec![
                "Per day".into(),
                human_count(e.late_after_purge_per_day),
                human_count(e.duplicate_labels_per_day),
            ],
            vec![
                "Cost per day".into(),
                "-".into(),
                usd(e.duplicate_cost_per_day),
            ],
        ],
        &[Align::Left, Align::Right, Align::Right],
        4,
    )
}

fn costs_with_keys(e: &Estimate) -> String {
    let p = &e.params;
    text_table(
        &[],
        &[
            vec![
                "Storage cost".into(),
                format!(
                    "{} × {}/GB-month",
                    human_bytes(e.store_bytes),
                    usd(p.storage_usd_per_gb_month)
                ),
                format!("{}/day", usd(e.storage_cost_per_day)),
            ],
            vec![
                "Total with keys".into(),
                format!(
                    "{} + {}",
                    usd(e.storage_cost_per_day),
                    usd(e.duplicate_cost_per_day)
                ),
                format!("{}/day", usd(e.total_cost_per_day)),
            ],
            vec![
                "Saved against retrying without keys".into(),
                format!(
                    "{} − {}",
                    usd(e.duplicate_cost_without_keys_per_day),
                    usd(e.total_cost_per_day)
                ),
                format!("{}/day", usd(e.saving_per_day)),
            ],
        ],
        &LEFT_RIGHT,
        4,
    )
}

/// The retention sweep, its cheapest retention marked.
fn sweep(e: &Estimate) -> String {
    let p = &e.params;
    let mut out = format!(
        "\nRetention sweep (storage at {}/GB-month, duplicates at {} each)\n\n",
        usd(p.storage_usd_per_gb_month),
        usd(p.label_price_usd)
    );
    out.push_str(&sweep_table(e));
    // The cheapest is marked in the table and said once, under Decision, which weighs the same
    // retentions (`model::candidate_retentions_s`).
    out.push_str(&format!(
        "  Retentions up to the retry distribution's horizon ({}); past it keys only add storage.\n",
        human_duration(e.retry_delay.max_horizon_s())
    ));
    out
}

/// The distribution's points, with its head and tail ends and the retention marked.
fn late_table(e: &Estimate) -> String {
    let dist = &e.retry_delay;
    let retention_s = e.params.retention_s;
    let mut rows: Vec<(f64, String)> = Vec::new();
    if let Head::LogUniform { min_delay_s } = dist.head() {
        rows.push((min_delay_s, "earliest retry".into()));
    }
    for &(delay_s, _) in dist.points() {
        rows.push((delay_s, String::new()));
    }
    if dist.points().last().is_some_and(|p| p.1 < 1.0) {
        rows.push((dist.max_horizon_s(), "horizon".into()));
    }
    match rows.iter_mut().find(|r| r.0 == retention_s) {
        Some(row) => row.1 = "◀ retention".into(),
        None => rows.push((retention_s, "◀ retention".into())),
    }
    rows.sort_by(|a, b| a.0.total_cmp(&b.0));
    let table: Vec<Vec<String>> = rows
        .into_iter()
        .map(|(delay_s, note)| {
            vec![
                human_duration(delay_s),
                percent(dist.cdf(delay_s)),
                human_count(e.timed_out_per_day * dist.survival(delay_s)),
                note,
            ]
        })
        .collect();
    let mut out = text_table(
        &[
            "Time since the first attempt",
            "Arrived",
            "Later than this, per day",
            "",
        ],
        &table,
        &[Align::Left, Align::Right, Align::Right, Align::Left],
        4,
    );
    let head = match dist.head() {
        Head::LogUniform { min_delay_s } => {
            format!("spread log-uniformly from {}", human_duration(min_delay_s))
        }
        Head::AtFirstPoint => "all at that delay".into(),
    };
    let (first_s, first_cdf) = dist.points()[0];
    let &(last_s, last_cdf) = dist.points().last().expect("at least two points");
    out.push_str(&format!(
        "    Between points: linear in log-time. Up to {}: {} {head}.\n",
        human_duration(first_s),
        percent(first_cdf)
    ));
    if last_cdf < 1.0 {
        let tail = match dist.tail() {
            Tail::LogLinear { max_horizon_s } => format!(
                "linear in log-time to 100% at {}",
                human_duration(max_horizon_s)
            ),
            Tail::AtHorizon { max_horizon_s } => {
                format!("all of it at {}", human_duration(max_horizon_s))
            }
        };
        out.push_str(&format!(
            "    After {}: the last {} {tail}.\n",
            human_duration(last_s),
            percent(1.0 - last_cdf)
        ));
    }
    out
}

fn sweep_table(e: &Estimate) -> String {
    let rows: Vec<Vec<String>> = e
        .retention_sweep
        .iter()
        .map(|r| {
            let mut marks = Vec::new();
            if r.retention_s == e.params.retention_s {
                marks.push("◀ retention");
            }
            if r.retention_s == e.cheapest_retention_s {
                marks.push("◀ cheapest");
            }
            vec![
                r.retention.clone(),
                human_bytes(r.store_bytes),
                human_count(r.late_after_purge_per_day),
                human_count(r.duplicate_labels_per_day),
                usd(r.storage_cost_per_day),
                usd(r.duplicate_cost_per_day),
                usd(r.total_cost_per_day),
                marks.join(" "),
            ]
        })
        .collect();
    text_table(
        &[
            "Retention",
            "Store",
            "Late/day",
            "Duplicates/day",
            "Storage/day",
            "Duplicates $/day",
            "Total/day",
            "",
        ],
        &rows,
        &[
            Align::Left,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Right,
            Align::Left,
        ],
        4,
    )
}

/// The human summary: each figure with its interval and the model's value beside it.
pub fn simulation(r: &SimReport) -> String {
    use crate::format::human_count;
    // An interrupted run says how much simulated time its figures actually cover.
    // Both ends in one unit (`20.11h of 108h`), from the one duration formatter.
    let covered = if r.interrupted {
        let (done, planned) = duration::format_approx_pair(r.simulated_seconds, r.arrival_seconds);
        format!("{done} of {planned} simulated, interrupted")
    } else {
        format!("{} simulated", duration::format_approx(r.arrival_seconds))
    };
    let mut out = format!(
        "Simulation at {}/s, retention {} (seed {}, {}, {covered}, {:.1} s wall)\n",
        human_count(r.rate),
        r.retention,
        r.seed,
        plural(u64::from(r.replicates), "replicate", "replicates"),
        r.wall_seconds
    );
    out.push_str(&format!(
        "Replayed {} intents ({} requests) on {}; ordinary calls sampled at {:.3} %, timed-out calls at {:.1} %\n\n",
        human_count(r.replayed_intents as f64),
        human_count(r.replayed_requests as f64),
        r.store,
        r.sample_ordinary * 100.0,
        r.sample_timed_out * 100.0
    ));
    out.push_str(&figures_table(r));
    out.push_str("\nDetection signals (per day at full traffic)\n");
    let d = &r.detection;
    for (name, v) in [
        ("parcels with two labels", d.parcels_with_two_labels_per_day),
        (
            "requests carrying a purged key",
            d.purged_key_requests_per_day,
        ),
        ("replays to another caller", d.cross_caller_replays_per_day),
        (
            "invoice lines without a label",
            d.invoice_lines_without_label_per_day,
        ),
        (
            "takeovers while the owner runs",
            d.takeovers_while_running_per_day,
        ),
        ("takeovers of an expired lease", d.takeovers_per_day),
        (
            "labels without a completed key",
            d.labels_without_completed_key_per_day,
        ),
        (
            "completed keys without a label",
            d.completed_keys_without_label_per_day,
        ),
    ] {
        out.push_str(&format!("  {name:<34} {v:>12.1}\n"));
    }
    out.push_str("\nResponses (replayed, and per day at full traffic)\n");
    for o in &r.outcomes {
        out.push_str(&format!(
            "  {} {:<28} {:>10} {:>16}\n",
            o.status,
            o.code
                .clone()
                .unwrap_or_else(|| format!("{:?}", o.outcome).to_lowercase()),
            o.replayed,
            human_count(o.per_day)
        ));
    }
    for note in &r.notes {
        out.push_str(&format!("\nnote: {note}"));
    }
    if !r.notes.is_empty() {
        out.push('\n');
    }
    let inv = &r.invariants;
    out.push_str(&format!(
        "\nInvariants: {} (integrity {}, most labels per parcel {}, completed keys without label {}, replays byte-identical {})\n\n",
        if inv.hold { "hold" } else { "BROKEN" },
        if inv.integrity_ok { "ok" } else { "FAILED" },
        inv.max_labels_per_parcel,
        inv.completed_without_label,
        if inv.replays_byte_identical { "yes" } else { "NO" }
    ));
    out
}

/// The measured figures with their intervals and the model's value beside each.
fn figures_table(r: &SimReport) -> String {
    use crate::format::{estimate_interval, human_bytes, human_count, per_day, usd};
    let mut out = String::new();
    out.push_str(&format!(
        "{:<34} {:>14} {:>27} {:>14}\n",
        "figure", "measured", "95% interval", "model"
    ));
    let row = |name: &str, f: &Figure, fmt: &dyn Fn(f64) -> String| {
        format!(
            "{:<34} {:>14} {:>27} {:>14}\n",
            name,
            fmt(f.estimate),
            estimate_interval(f.estimate, f.ci95_low, f.ci95_high, fmt),
            // The model follows first attempts only: a figure it has no value for says so.
            if f.analytic.is_nan() {
                NO_MODEL.to_string()
            } else {
                fmt(f.analytic)
            }
        )
    };
    let bytes = |v: f64| format!("{v:.0} B");
    let count = human_count;
    let gb = human_bytes;
    let money = |v: f64| format!("{}/day", usd(v));
    out.push_str(&row(
        "bytes per record",
        &r.bytes_per_record_measured,
        &bytes,
    ));
    // "(steady)" only when the run had a steady window; otherwise the store at the end of the
    // arrivals, as the page labels it too.
    let window = store_window(r.steady_window);
    out.push_str(&row(
        &format!("records in the store ({window})"),
        &r.store_records_steady,
        &count,
    ));
    out.push_str(&row(
        &format!("store size ({window})"),
        &r.store_bytes_steady,
        &gb,
    ));
    out.push_str(&row(
        "timed-out calls (first attempts)",
        &r.timed_out_per_day,
        &per_day,
    ));
    out.push_str(&row(
        "timed-out attempts (retries too)",
        &r.timed_out_attempts_per_day,
        &per_day,
    ));
    out.push_str(&row(
        "late arrivals after purge",
        &r.late_after_purge_per_day,
        &per_day,
    ));
    out.push_str(&row(
        "duplicate labels",
        &r.duplicate_labels_per_day,
        &per_day,
    ));
    out.push_str(&row(
        "money on duplicates",
        &r.duplicate_cost_per_day,
        &money,
    ));
    out.push_str(&row(
        "parcels left unlabelled",
        &r.unlabelled_per_day,
        &per_day,
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::per_day_in_words;

    /// Issue 36, item 4: targets in the user's words. The default target is 1/30 a day, which
    /// `--max-duplicates-per-day 1/month` parses to (30 days a month): one a month. 2/week is
    /// 2/7 a day, two a week; 0.5 a day is one every 2 days; 0.3 a day is one every 3.33 days,
    /// 2.1 a week, 9 a month.
    #[test]
    fn issue_36_item_4_targets_read_as_people_state_them() {
        assert_eq!(per_day_in_words(1.0 / 30.0), "1 a month");
        assert_eq!(per_day_in_words(2.0 / 7.0), "2 a week");
        assert_eq!(per_day_in_words(3.0 / 365.0), "3 a year");
        assert_eq!(per_day_in_words(0.5), "1 every 2 days");
        assert_eq!(per_day_in_words(0.3), "9 a month");
        assert_eq!(per_day_in_words(0.01), "1 every 100 days");
        assert_eq!(per_day_in_words(300.0), "300 a day");
        assert_eq!(per_day_in_words(0.0), "none");
    }
}
