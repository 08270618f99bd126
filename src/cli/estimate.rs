//! `idemcalc estimate`: the seed's three "In practice" tables, recomputed from flags.
//!
//! Flags are checked once here (clap value parsers name the flag and the value); after that
//! only a valid [`ModelParams`] and [`RetryDelay`] travel into the model.

use std::io::Write as _;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context as _;

use crate::decision::{self, DecisionInputs, Recommendation, Targets};
use crate::duration;
use crate::format::{
    Align, human_bytes, human_count, human_duration, percent, rate_per_s, significant, text_table,
    thousands, usd,
};
use crate::model::{self, Estimate, ModelParams, SEED};
use crate::traffic::{DAY_S, Head, RetryDelay, Tail};

#[derive(clap::Args, Debug)]
pub struct EstimateArgs {
    /// Average label creates, calls per second.
    #[arg(long, value_name = "CALLS_PER_S", default_value_t = SEED.rate_per_s)]
    #[arg(allow_negative_numbers = true, value_parser = above_zero)]
    pub rate: f64,

    /// Peak label creates, calls per second (sizes the worst-case store).
    #[arg(long, value_name = "CALLS_PER_S", default_value_t = SEED.peak_rate_per_s)]
    #[arg(allow_negative_numbers = true, value_parser = above_zero)]
    pub peak_rate: f64,

    /// How long a key is kept after completion, a duration like 24h or 3d.
    #[arg(long, value_name = "DURATION", default_value = "24h", value_parser = positive_duration)]
    pub retention: Duration,

    /// Stored size of one key record with index overhead, bytes (pass a measured figure if you
    /// have one). Default: key + 32 B hash + response + 144 B overhead, 512 B for the seed's.
    #[arg(long, value_name = "BYTES")]
    #[arg(allow_negative_numbers = true, value_parser = above_zero)]
    pub bytes_per_record: Option<f64>,

    /// Idempotency-key length: a size (36B) or median=SIZE,p99=SIZE; sets the default
    /// --bytes-per-record.
    #[arg(long, value_name = "SIZE", default_value = "36B", value_parser = crate::payload::SizeDist::parse)]
    pub key_bytes: crate::payload::SizeDist,

    /// Saved response size: a size (300B, 2kB) or median=SIZE,p99=SIZE; sets the default
    /// --bytes-per-record.
    #[arg(long, value_name = "SIZE", default_value = "300B", value_parser = crate::payload::SizeDist::parse)]
    pub response_bytes: crate::payload::SizeDist,

    /// Share of calls that time out, a fraction like 0.001 or 0.1%.
    #[arg(long, value_name = "FRACTION", default_value_t = SEED.timeout_fraction)]
    #[arg(allow_negative_numbers = true, value_parser = fraction)]
    pub timeout_fraction: f64,

    /// Share of timed-out calls already done server-side, a fraction like 0.6 or 60%.
    #[arg(long, value_name = "FRACTION", default_value_t = SEED.done_fraction)]
    #[arg(allow_negative_numbers = true, value_parser = fraction)]
    pub done_fraction: f64,

    /// Price of one label, USD.
    #[arg(long, value_name = "USD", default_value_t = SEED.label_price_usd)]
    #[arg(allow_negative_numbers = true, value_parser = not_negative)]
    pub label_price: f64,

    /// How long the carrier recognises our derived key, a duration like 24h.
    #[arg(long, value_name = "DURATION", default_value = "24h")]
    #[arg(value_parser = duration::clap_parse)]
    pub carrier_window: Duration,

    /// Storage price, USD per GB-month (decimal GB).
    #[arg(long, value_name = "USD_PER_GB_MONTH", default_value_t = SEED.storage_usd_per_gb_month)]
    #[arg(allow_negative_numbers = true, value_parser = not_negative)]
    pub storage_price: f64,

    /// Cost of one parcel left without a label, USD.
    #[arg(long, value_name = "USD", default_value_t = SEED.unlabelled_parcel_usd)]
    #[arg(allow_negative_numbers = true, value_parser = not_negative)]
    pub unlabelled_cost: f64,

    /// Measured late-retry distribution: CSV lines of `delay,cumulative fraction`, e.g. `90s,0.85`.
    #[arg(long, value_name = "FILE")]
    pub retry_cdf: Option<PathBuf>,

    /// How retries below the first point are spread.
    #[arg(long, value_enum, default_value_t = HeadKind::LogUniform)]
    pub retry_head: HeadKind,

    /// Earliest retry for a log-uniform head, a duration like 250ms.
    #[arg(long, value_name = "DURATION", default_value = "250ms", value_parser = positive_duration)]
    pub retry_min_delay: Duration,

    /// How retries beyond the last point are spread.
    #[arg(long, value_enum, default_value_t = TailKind::LogLinear)]
    pub retry_tail: TailKind,

    /// Delay by which every retry has arrived, a duration like 30d.
    #[arg(long, value_name = "DURATION", default_value = "30d", value_parser = positive_duration)]
    pub retry_horizon: Duration,

    /// Copies of the store paid for: a primary and its standbys (default 2).
    #[arg(long, value_name = "COPIES", default_value_t = SEED.replicas)]
    #[arg(allow_negative_numbers = true, value_parser = at_least_one)]
    pub replicas: f64,

    /// 95 % interval of a measured bytes per record, `LOW..HIGH` (e.g. `498..530`); the store
    /// budget is checked at its top.
    #[arg(long, value_name = "LOW..HIGH", value_parser = bytes_interval)]
    pub bytes_per_record_ci95: Option<[f64; 2]>,

    /// The decision's duplicates target, real duplicate labels per day: a number, or a rate
    /// like 1/month, 1/week, 5/day (default 1/month).
    #[arg(long, value_name = "PER_DAY", default_value = "1/month", value_parser = per_day)]
    pub max_duplicates_per_day: f64,

    /// The decision's store budget: the most one copy of the store may hold, e.g. 25GB.
    #[arg(long, value_name = "SIZE", value_parser = store_size)]
    pub store_budget: Option<f64>,

    /// The decision's cost budget: storage for every copy plus duplicate labels, USD per day.
    #[arg(long, value_name = "USD_PER_DAY")]
    #[arg(allow_negative_numbers = true, value_parser = not_negative)]
    pub cost_budget: Option<f64>,

    /// Decide on our keys alone: count every retry after our purge as a duplicate, even while
    /// the carrier still knows its derived key.
    #[arg(long)]
    pub without_carrier_window: bool,

    /// Output: readable tables, or one JSON object.
    #[arg(long, value_enum, default_value_t = OutputFormat::Table)]
    pub format: OutputFormat,
}

/// See [`Head`].
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeadKind {
    /// Spread log-uniformly from --retry-min-delay to the first point.
    LogUniform,
    /// All at the first point's delay.
    AtFirstPoint,
}

/// See [`Tail`].
#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum TailKind {
    /// Linear in log-time from the last point to 100% at --retry-horizon.
    LogLinear,
    /// All remaining retries at --retry-horizon (pessimistic).
    AtHorizon,
}

#[derive(clap::ValueEnum, Debug, Clone, Copy, PartialEq, Eq)]
pub enum OutputFormat {
    Table,
    Json,
}

fn parse_number(text: &str) -> Result<f64, String> {
    text.trim()
        .parse::<f64>()
        .ok()
        .filter(|v| v.is_finite())
        .ok_or_else(|| format!("`{text}` is not a number"))
}

fn above_zero(text: &str) -> Result<f64, String> {
    let v = parse_number(text)?;
    if v > 0.0 {
        Ok(v)
    } else {
        Err(format!("must be above 0, not {text}"))
    }
}

fn not_negative(text: &str) -> Result<f64, String> {
    let v = parse_number(text)?;
    if v >= 0.0 {
        Ok(v)
    } else {
        Err(format!("must be 0 or more, not {text}"))
    }
}

/// A fraction as `0.001` or `0.1%`, because the seed writes rates as percentages.
fn fraction(text: &str) -> Result<f64, String> {
    let v = match text.trim().strip_suffix('%') {
        Some(p) => parse_number(p)? / 100.0,
        None => parse_number(text)?,
    };
    if (0.0..=1.0).contains(&v) {
        Ok(v)
    } else {
        Err(format!(
            "must be a fraction from 0 to 1 (e.g. 0.001 or 0.1%), not {text}"
        ))
    }
}

fn at_least_one(text: &str) -> Result<f64, String> {
    let v = parse_number(text)?;
    if v >= 1.0 {
        Ok(v)
    } else {
        Err(format!(
            "must be 1 or more (a primary alone is 1), not {text}"
        ))
    }
}

/// `1/month`, `2/week`, `0.5/day` or a bare number per day.
fn per_day(text: &str) -> Result<f64, String> {
    crate::decision::parse_per_day(text)
}

/// A size in decimal units, `25GB`, `500 MB`, returned in decimal GB.
fn store_size(text: &str) -> Result<f64, String> {
    let bytes = crate::payload::parse_bytes(text)?;
    if bytes > 0.0 {
        Ok(bytes / 1e9)
    } else {
        Err(format!("must be above 0, not {text}"))
    }
}

/// `LOW..HIGH`, both above 0, LOW not above HIGH.
fn bytes_interval(text: &str) -> Result<[f64; 2], String> {
    let (lo, hi) = text
        .split_once("..")
        .ok_or_else(|| format!("`{text}` is not an interval; write it LOW..HIGH, e.g. 498..530"))?;
    let lo = crate::payload::parse_bytes(lo)?;
    let hi = crate::payload::parse_bytes(hi)?;
    if lo > 0.0 && lo <= hi {
        Ok([lo, hi])
    } else {
        Err(format!("`{text}`: LOW must be above 0 and not above HIGH"))
    }
}

fn positive_duration(text: &str) -> Result<Duration, String> {
    let d = duration::clap_parse(text)?;
    if d.is_zero() {
        Err(format!("must be longer than 0s, not {text}"))
    } else {
        Ok(d)
    }
}

impl EstimateArgs {
    pub fn params(&self) -> ModelParams {
        ModelParams {
            rate_per_s: self.rate,
            peak_rate_per_s: self.peak_rate,
            retention_s: self.retention.as_secs_f64(),
            bytes_per_record: self.bytes_per_record.unwrap_or_else(|| {
                model::record_bytes(
                    self.key_bytes.mean_bytes(),
                    self.response_bytes.mean_bytes(),
                )
            }),
            timeout_fraction: self.timeout_fraction,
            done_fraction: self.done_fraction,
            label_price_usd: self.label_price,
            carrier_window_s: self.carrier_window.as_secs_f64(),
            storage_usd_per_gb_month: self.storage_price,
            unlabelled_parcel_usd: self.unlabelled_cost,
            replicas: self.replicas,
        }
    }

    /// What the decision must meet, and the measured record size's interval.
    pub fn decision_inputs(&self) -> DecisionInputs {
        DecisionInputs {
            targets: Targets {
                max_duplicates_per_day: self.max_duplicates_per_day,
                max_store_gb: self.store_budget,
                max_cost_per_day: self.cost_budget,
            },
            bytes_per_record_ci95: self.bytes_per_record_ci95,
            evidence: None,
            count_carrier_window: !self.without_carrier_window,
        }
    }

    pub fn head(&self) -> Head {
        match self.retry_head {
            HeadKind::LogUniform => Head::LogUniform {
                min_delay_s: self.retry_min_delay.as_secs_f64(),
            },
            HeadKind::AtFirstPoint => Head::AtFirstPoint,
        }
    }

    pub fn tail(&self) -> Tail {
        let max_horizon_s = self.retry_horizon.as_secs_f64();
        match self.retry_tail {
            TailKind::LogLinear => Tail::LogLinear { max_horizon_s },
            TailKind::AtHorizon => Tail::AtHorizon { max_horizon_s },
        }
    }

    /// The seed's distribution, or the `--retry-cdf` file's, with the chosen head and tail.
    pub fn retry_delay(&self) -> anyhow::Result<RetryDelay> {
        match &self.retry_cdf {
            Some(path) => Ok(RetryDelay::from_csv_path_with(
                path,
                self.head(),
                self.tail(),
            )?),
            None => RetryDelay::seed_with(self.head(), self.tail()).context(
                "the seed's retry distribution does not fit --retry-min-delay/--retry-horizon",
            ),
        }
    }
}

/// The estimate's JSON: the model's figures, then the decision under `decision`.
#[derive(serde::Serialize)]
struct EstimateOutput<'a> {
    #[serde(flatten)]
    estimate: &'a Estimate,
    decision: &'a Recommendation,
}

/// The decision's sentences and the candidates that meet its targets, after the sweep.
pub fn render_decision(r: &Recommendation) -> String {
    let mut out = String::from("\nDecision\n\n");
    for note in &r.notes {
        out.push_str(&wrap(note, 94, "  "));
    }
    out
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

pub fn run(args: &EstimateArgs) -> anyhow::Result<()> {
    let params = args.params();
    params.validate()?;
    let dist = args.retry_delay()?;
    let estimate = model::estimate(&params, &dist);
    let decision = decision::decide(&params, &dist, &args.decision_inputs())?;
    let text = match args.format {
        OutputFormat::Json => {
            serde_json::to_string_pretty(&EstimateOutput {
                estimate: &estimate,
                decision: &decision,
            })? + "\n"
        }
        OutputFormat::Table => {
            let source = match &args.retry_cdf {
                Some(path) => format!("measured, from {}", path.display()),
                None => "the seed's illustrative table, not measured".to_string(),
            };
            render_tables(&estimate, &source) + &render_decision(&decision)
        }
    };
    let mut out = std::io::stdout().lock();
    match out.write_all(text.as_bytes()).and_then(|()| out.flush()) {
        // `idemcalc estimate | head` closing the pipe early is not an error.
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        other => Ok(other.context("cannot write to stdout")?),
    }
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

/// The three tables of the seed's "In practice" section, then the retention sweep.
pub fn render_tables(e: &Estimate, source: &str) -> String {
    let p = &e.params;
    let mut out = String::new();
    let pair = |a: &str, b: String| vec![a.to_string(), b];
    let left_right = [Align::Left, Align::Left, Align::Right];

    out.push_str("How big is the key store?\n\n  Assumptions\n");
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
        &left_right,
        4,
    ));

    out.push_str("\nWhat the keys save\n\n  Assumptions\n");
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
            pair(
                "Carrier's dedupe window",
                human_duration(p.carrier_window_s),
            ),
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
        &left_right,
        4,
    ));

    let retention = human_duration(p.retention_s);
    let window = human_duration(e.duplicate_window_s);
    let duplicate_fraction = p.done_fraction * (1.0 - e.retry_delay.cdf(e.duplicate_window_s));
    out.push_str(&format!(
        "\n  With keys, retention {retention}: late arrivals next to the real duplicates among them\n"
    ));
    out.push_str(&text_table(
        &["", "Late arrivals after purge", "Real duplicates"],
        &[
            vec![
                "Retry comes later than".into(),
                retention.clone(),
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
    ));
    out.push_str(&format!(
        "    A late arrival is a duplicate only if its first attempt had run ({}) and the carrier\n    \
         no longer knows the derived key: it must come after both our {retention} and the carrier's {}.\n\n",
        percent(p.done_fraction),
        human_duration(p.carrier_window_s),
    ));
    out.push_str(&text_table(
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
        &left_right,
        4,
    ));

    out.push_str(&format!("\nHow late do retries arrive? ({source})\n\n"));
    out.push_str(&late_table(e));

    out.push_str(&format!(
        "\nRetention sweep (storage at {}/GB-month, duplicates at {} each)\n\n",
        usd(p.storage_usd_per_gb_month),
        usd(p.label_price_usd)
    ));
    out.push_str(&sweep_table(e));
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
            if r.retention_s == e.recommended_retention_s {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::traffic::{DEFAULT_MAX_HORIZON_S, DEFAULT_MIN_DELAY_S};
    use clap::Parser as _;

    #[derive(clap::Parser, Debug)]
    struct Wrapper {
        #[command(flatten)]
        args: EstimateArgs,
    }

    /// The flag defaults are written next to the flags for `--help`; they must stay the seed's.
    #[test]
    fn flag_defaults_are_the_seed() {
        let w = Wrapper::try_parse_from(["x"]).unwrap();
        assert_eq!(w.args.params(), SEED);
        assert_eq!(w.args.retry_delay().unwrap(), RetryDelay::seed());
        assert_eq!(
            w.args.head(),
            Head::LogUniform {
                min_delay_s: DEFAULT_MIN_DELAY_S
            }
        );
        assert_eq!(
            w.args.tail(),
            Tail::LogLinear {
                max_horizon_s: DEFAULT_MAX_HORIZON_S
            }
        );
    }

    #[test]
    fn bad_values_name_the_flag_and_value() {
        for (flag, value) in [
            ("--retention", "24 parsecs"),
            ("--retention", "0s"),
            ("--carrier-window", "tomorrow"),
            ("--rate", "-3"),
            ("--rate", "lots"),
            ("--timeout-fraction", "1.5"),
            ("--done-fraction", "160%"),
            ("--label-price", "-1"),
        ] {
            let err = Wrapper::try_parse_from(["x", flag, value])
                .unwrap_err()
                .to_string();
            assert!(err.contains(flag) && err.contains(value), "{err}");
        }
    }

    #[test]
    fn payload_sizes_set_the_record_size_unless_it_is_given() {
        let w = Wrapper::try_parse_from(["x", "--response-bytes", "2kB"]).unwrap();
        assert_eq!(
            w.args.params().bytes_per_record,
            36.0 + 32.0 + 2000.0 + 144.0
        );
        let w =
            Wrapper::try_parse_from(["x", "--response-bytes", "2kB", "--bytes-per-record", "700"])
                .unwrap();
        assert_eq!(w.args.params().bytes_per_record, 700.0);
        let err = Wrapper::try_parse_from(["x", "--key-bytes", "huge"]).unwrap_err();
        assert!(err.to_string().contains("--key-bytes"), "{err}");
    }

    #[test]
    fn fractions_take_percentages() {
        let w = Wrapper::try_parse_from(["x", "--timeout-fraction", "0.1%"]).unwrap();
        assert!((w.args.timeout_fraction - 0.001).abs() < 1e-15);
    }
}
