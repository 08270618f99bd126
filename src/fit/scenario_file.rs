//! The fitted scenario file: what `idemcalc fit --out` writes, a scenario `idemcalc report`
//! runs as is.

use super::Fit;
use super::estimate::round_sig;
use crate::format::{approx_duration, plural};
use crate::payload::SizeDist;
use crate::traffic::RetrySpec;

/// How every scenario file `fit --out` writes begins: what marks a file as one `fit` may
/// replace without `--force` (`crate::output`).
pub const SCENARIO_HEADER: &str = "# Fitted by `idemcalc fit` from ";

impl Fit {
    /// The fitted distribution as a scenario field, if the log had retries.
    pub fn retry_spec(&self) -> Option<RetrySpec> {
        let points = self.retry_points.as_ref()?;
        // Rounding the measured last point may bring it onto a grid point before it: keep
        // delays strictly increasing, as a CDF needs, by dropping the grid point.
        let mut out: Vec<(String, f64, f64)> = Vec::new();
        for (d, f) in points {
            let text = approx_duration(*d);
            let back = crate::duration::parse(&text).map_or(*d, |b| b.as_secs_f64());
            while out.last().is_some_and(|p| p.2 >= back) {
                out.pop();
            }
            out.push((text, round_sig(*f, 6), back));
        }
        Some(RetrySpec {
            points: out.into_iter().map(|(t, f, _)| (t, f)).collect(),
            min_delay: approx_duration(self.retry_min_delay_s),
            horizon: approx_duration(self.horizon_s),
            retries: Some(self.retries),
            latest_retry: self.latest_retry_text(),
            log_span: Some(approx_duration(self.log_span_s)),
        })
    }

    /// The latest retry as fit writes it, rounded up as the horizon is, so that a horizon
    /// set by it reads the same (`1.412d` beside `1.412d`, not `1.413d` beside `1.412d`).
    pub fn latest_retry_text(&self) -> Option<String> {
        self.latest_retry_s
            .map(|s| approx_duration(crate::duration::round_up_approx(s)))
    }

    /// A scenario file `report` runs as is: the fitted traffic at the seed's engine and carrier.
    pub fn scenario_toml(&self, name: &str) -> String {
        let mut out = String::new();
        out.push_str(SCENARIO_HEADER);
        out.push_str(&format!(
            "{} ({} rows, {} bad).\n",
            // A file name is the user's text: escaped, a newline in it cannot end the comment
            // and write TOML.
            self.files
                .iter()
                .map(|f| f.escape_debug().to_string())
                .collect::<Vec<_>>()
                .join(", "),
            self.rows,
            self.bad_rows.total
        ));
        out.push_str("# Engine and carrier are the seed's; edit them to match your system.\n");
        let mut doc = toml::Table::new();
        doc.insert("name".into(), name.into());
        doc.insert(
            "description".into(),
            format!(
                "Fitted from {} over {} of arrivals: {:.4}/s, {}.",
                plural(self.keys, "key", "keys"),
                approx_duration(self.arrival_span_s),
                self.rate_per_s.estimate,
                plural(self.callers, "caller", "callers")
            )
            .into(),
        );
        doc.insert("seed".into(), 1.into());
        let mut traffic = toml::Table::new();
        traffic.insert("rate".into(), round_sig(self.rate_per_s.estimate, 6).into());
        if let Some(t) = self.timeout_fraction {
            traffic.insert("timeout_fraction".into(), round_sig(t.estimate, 6).into());
        }
        if let Some(d) = self.done_fraction {
            traffic.insert("done_fraction".into(), round_sig(d.estimate, 6).into());
        }
        traffic.insert(
            "callers".into(),
            (self.callers.clamp(1, 10_000) as i64).into(),
        );
        let to_value = |d: &SizeDist| toml::Value::try_from(d).ok();
        if let Some(v) = self.key_bytes.as_ref().and_then(|k| to_value(&k.dist)) {
            traffic.insert("key_bytes".into(), v);
        }
        if let Some(v) = self.response_bytes.as_ref().and_then(|k| to_value(&k.dist)) {
            traffic.insert("response_bytes".into(), v);
        }
        if let Some(v) = self
            .retry_spec()
            .and_then(|s| toml::Value::try_from(s).ok())
        {
            traffic.insert("retry_delay".into(), v);
        }
        doc.insert("traffic".into(), traffic.into());
        if let Some(peak) = self.peak_hour_rate_per_s {
            let mut model = toml::Table::new();
            model.insert(
                "peak_rate".into(),
                round_sig(peak.max(self.rate_per_s.estimate), 6).into(),
            );
            doc.insert("model".into(), model.into());
        }
        out.push_str(&toml::to_string(&doc).unwrap_or_default());
        out
    }
}
