//! The terminal text `idemcalc fit` prints: what was read, the fitted inputs with their
//! intervals, and the late retries.

use super::Fit;
use super::estimate::SizeFit;
use crate::format::{
    approx_duration, estimate_interval, human_bytes, human_count, percent, significant,
};
use crate::stats::Interval;

impl Fit {
    /// The chart-free summary `idemcalc fit` prints.
    pub fn summary(&self) -> String {
        let mut out = self.summary_read();
        out.push_str(&self.summary_inputs());
        out.push_str(&self.summary_retries());
        out
    }

    /// What was read, and the rows left out.
    fn summary_read(&self) -> String {
        let mut out = format!(
            "Read {} rows from {}: {} keys, {} of arrivals, {} of log{}.\n",
            human_count(self.rows as f64),
            // Names from the user's files are escaped: no control character reaches the terminal.
            self.files
                .iter()
                .map(|f| f.escape_debug().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            human_count(self.keys as f64),
            approx_duration(self.arrival_span_s),
            approx_duration(self.log_span_s),
            if self.weighted { ", rows weighted" } else { "" }
        );
        for w in &self.warnings {
            out.push_str(&format!("Warning: {w}\n"));
        }
        if self.bad_rows.total > 0 {
            out.push_str(&format!(
                "Bad rows, left out: {}\n",
                human_count(self.bad_rows.total as f64)
            ));
            for (reason, n) in &self.bad_rows.reasons {
                out.push_str(&format!("  {n:>10}  {reason}\n"));
            }
            for e in &self.bad_rows.examples {
                out.push_str(&format!("  e.g. {e}\n"));
            }
        } else {
            out.push_str("Bad rows: none.\n");
        }
        out
    }

    /// Rate, busiest hour, fractions, callers and sizes, a line each.
    fn summary_inputs(&self) -> String {
        let mut out = format!(
            "\nArrival rate        {}\n",
            with_interval(&self.rate_per_s, &rate)
        );
        match self.peak_hour_rate_per_s {
            Some(p) => out.push_str(&format!("Busiest hour        {}\n", rate(p))),
            None => out.push_str("Busiest hour        - (needs a day of arrivals)\n"),
        }
        match &self.timeout_fraction {
            Some(t) => out.push_str(&format!(
                "Timeout fraction    {}\n",
                with_interval(t, &percent)
            )),
            None => out.push_str("Timeout fraction    -\n"),
        }
        match &self.done_fraction {
            Some(d) => out.push_str(&format!(
                "Done fraction       {} (timed-out calls later answered by a replay)\n",
                with_interval(d, &percent)
            )),
            None => out.push_str(
                "Done fraction       - (needs a `replayed` column and timed-out calls answered later)\n",
            ),
        }
        out.push_str(&format!(
            "Callers             {}{}\n",
            self.callers,
            if self.top_callers.len() > 1 {
                format!(
                    " (largest: {})",
                    self.top_callers
                        .iter()
                        .take(3)
                        .map(|c| format!("{} {}", c.caller.escape_debug(), percent(c.share)))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            } else {
                String::new()
            }
        ));
        out.push_str(&size_line("Key length", &self.key_bytes));
        out.push_str(&size_line("Saved response", &self.response_bytes));
        out
    }

    /// The late-retry CDF, the one horizon and the retries later than each retention, or why
    /// there are none.
    fn summary_retries(&self) -> String {
        if self.retries == 0 {
            return "\nNo key repeats in this log: there are no retries to fit a late-retry distribution to,\nso the scenario keeps the seed's illustrative one.\n".to_string();
        }
        let latest = self.latest_retry_text().unwrap_or_else(|| "0s".into());
        let mut out = format!(
            "\nLate retries: {} later requests on {} keys; the latest {latest} after its first request.\n",
            human_count(self.retries as f64),
            human_count(self.retried_keys as f64),
        );
        if self.retry_points.is_none() {
            out.push_str("No call that timed out was retried (the distribution counts only those), so the scenario\nkeeps the seed's illustrative distribution.\n");
            return out;
        }
        let watched = approx_duration(self.watched_s);
        out.push_str(&format!(
            "Counted per timed-out call, its first retry (not the re-sends after that retry's answer,\nsuch as those on 409), over calls watched for at least {watched}.\n\n"
        ));
        out.push_str("  Time since the first request   Timed-out calls retried by then\n");
        for p in &self.retry_cdf {
            out.push_str(&format!(
                "  {:<30} {}\n",
                p.delay,
                with_interval(&p.arrived, &percent)
            ));
        }
        if let Some(b) = &self.later_than_watched {
            out.push_str(&format!(
                "  {:<30} {}\n",
                format!("later than {watched}"),
                with_interval(b, &percent)
            ));
        }
        out.push_str(&self.summary_horizon(&latest));
        if !self.retries_beyond.is_empty() {
            out.push_str("\n  Retention   Calls retried later than it   Per day\n");
            for b in &self.retries_beyond {
                out.push_str(&format!(
                    "  {:<11} {:>27} {:>9}\n",
                    b.retention,
                    human_count(b.retries),
                    human_count(b.per_day)
                ));
            }
        }
        out
    }

    /// The distribution's one horizon, and what it rests on: the latest retry the log holds,
    /// or an assumption past the delay the log watched every call for.
    fn summary_horizon(&self, latest: &str) -> String {
        let horizon = approx_duration(self.horizon_s);
        let share_later = self.later_than_watched.map_or(0.0, |b| b.estimate);
        if share_later == 0.0 {
            let why = if horizon == latest {
                "the latest retry the log holds".to_string()
            } else {
                format!("after the latest retry the log holds ({latest})")
            };
            format!(
                "\nHorizon: {horizon}, {why}; the scenario's distribution reaches 100% there.\n"
            )
        } else {
            format!(
                "\nHorizon: {horizon}, assumed: {} of the counted calls were first retried later than the\nlog watched them, so the scenario's distribution runs on to it linearly in log-time.\n",
                percent(share_later)
            )
        }
    }
}

/// `value (95% low – high)`, each written by `f`; a share of none is the one-sided bound
/// alone (`none seen, ≤ 1%`), never `0% (95% 0% – 0%)`.
fn with_interval(e: &Interval, f: &dyn Fn(f64) -> String) -> String {
    let range = estimate_interval(e.estimate, e.ci95_low, e.ci95_high, f);
    if e.estimate == 0.0 {
        range
    } else {
        format!("{} (95% {range})", f(e.estimate))
    }
}

/// A rate per second, four significant digits.
fn rate(v: f64) -> String {
    format!("{}/s", significant(v, 4))
}

fn size_line(name: &str, s: &Option<SizeFit>) -> String {
    match s {
        Some(s) => format!(
            "{name:<20}mean {}, median {}, p99 {}, max {} ({} samples)\n",
            human_bytes(s.mean_bytes),
            human_bytes(s.median_bytes),
            human_bytes(s.p99_bytes),
            human_bytes(s.max_bytes),
            human_count(s.samples as f64)
        ),
        None => format!("{name:<20}- (no sizes in the log)\n"),
    }
}
