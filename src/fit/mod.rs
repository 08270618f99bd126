//! `idemcalc fit`: a system's own inputs from its request logs.
//!
//! A request log has one row per request as the caller saw it: when it was sent, by whom,
//! with which idempotency key, the status it got back (none when the caller heard nothing in
//! time), the response size, and optionally whether the answer was a replay and how many real
//! requests the row stands for (see docs/fit.md). From it this module derives, with 95 %
//! intervals where they mean something: the arrival rate and its daily profile, the timeout
//! fraction, the done fraction (from replays), the late-retry distribution, the key-length and
//! response-size distributions and the callers. [`Fit::scenario_toml`] writes them as a
//! scenario that `idemcalc report` runs as is.
//!
//! CSV and Parquet are read with polars (CSV as text columns, so a malformed cell is one bad
//! row, not a failed file); NDJSON with serde_json, because polars' NDJSON reader is a feature
//! this build leaves out. Only a compact row per request is kept (a hash of the key, not the
//! key), so ten million rows fit in a few hundred MB.
//!
//! The module is split by what each part does: `read.rs` turns CSV, Parquet and NDJSON logs
//! into compact requests; `estimate.rs` derives the rate, the daily profile, the timeout and
//! done fractions, the sizes and the callers; `retries.rs` the late-retry CDF and its one
//! horizon; `scenario_file.rs` writes the fitted scenario and `summary.rs` the terminal text; `log.rs` writes request logs for `simulate --request-log`. This file holds
//! the public API and [`fit`], the recipe that runs them in order.

use std::path::{Path, PathBuf};

use rayon::prelude::*;
use serde::Serialize;

mod aggregates;
mod columns;
mod estimate;
mod log;
mod read;
mod request;
mod retries;
mod scenario_file;
mod spill;
mod sql;
mod stat_rows;
mod summary;

use crate::stats::Interval;
pub use columns::Columns;
pub use estimate::{CallerShare, SizeFit};
pub use log::{is_request_log, write_log};
pub use read::{BadRows, TimeUnit, log_kind};
pub use retries::{Beyond, CDF_POINTS_S, CdfPoint};
pub use scenario_file::SCENARIO_HEADER;

pub use aggregates::{Aggregates, SizeCount, Spans, Sum};
pub use sql::{
    Dialect, OptionalColumn, Source, SqlOptions, TableName, emit as emit_sql, optional_columns,
};
pub use stat_rows::StatRow;

use aggregates::Tally;
use read::Log;

#[derive(Debug, thiserror::Error)]
pub enum FitError {
    #[error("{}: {message}", path.display())]
    File { path: PathBuf, message: String },
    #[error("{0}")]
    Data(String),
}

fn file_err(path: &Path, message: impl Into<String>) -> FitError {
    FitError::File {
        path: path.to_path_buf(),
        message: message.into(),
    }
}

/// Everything `fit` found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fit {
    pub files: Vec<String>,
    /// What the reader guessed or could not use: a missing status column, columns not read,
    /// columns that look like the ones `fit` reads under other names.
    pub warnings: Vec<String>,
    pub rows: u64,
    pub bad_rows: BadRows,
    /// Rows standing for more than one request (a `weight` column): the simulator's samples.
    pub weighted: bool,
    /// Distinct (caller, key) pairs: intents.
    pub keys: u64,
    /// From the first to the last first request, seconds: the window arrivals are counted in.
    pub arrival_span_s: f64,
    /// From the first to the last row, seconds.
    pub log_span_s: f64,
    pub rate_per_s: Interval,
    /// Mean arrival rate per hour of the day (UTC, or since the log's time origin), `None` for
    /// hours the log does not cover.
    pub hourly_rate_per_s: Vec<Option<f64>>,
    pub peak_hour_rate_per_s: Option<f64>,
    pub timeout_fraction: Option<Interval>,
    pub done_fraction: Option<Interval>,
    /// Later requests for an already-seen key, every one (re-sends on 409 included).
    pub retries: u64,
    pub retried_keys: u64,
    /// The delay up to which every key counted was watched for retries, seconds: where the
    /// log's view of the late-retry CDF ends (not a horizon: the distribution's one horizon is
    /// [`Fit::horizon_s`]).
    pub watched_s: f64,
    /// The latest request for a key after its first, any request: evidence the horizon covers.
    pub latest_retry_s: Option<f64>,
    pub retry_cdf: Vec<CdfPoint>,
    /// Share of counted timed-out calls first retried later than [`Fit::watched_s`] (a shape
    /// the log cannot show); a one-sided bound when none was.
    pub later_than_watched: Option<Interval>,
    pub retries_beyond: Vec<Beyond>,
    /// The fitted distribution as the model and the simulator take it, when there are retries.
    pub retry_points: Option<Vec<(f64, f64)>>,
    pub retry_min_delay_s: f64,
    /// The fitted distribution's horizon, the one the scenario writes and the decision weighs
    /// retentions up to: never short of [`Fit::latest_retry_s`].
    pub horizon_s: f64,
    pub key_bytes: Option<SizeFit>,
    pub response_bytes: Option<SizeFit>,
    pub callers: u64,
    pub top_callers: Vec<CallerShare>,
}

/// Options of one fit.
#[derive(Debug, Clone, Default)]
pub struct FitOptions {
    pub columns: Columns,
    pub time_unit: TimeUnit,
    /// Requests held in memory before the log is spilled to partitions on disk; `None` for
    /// the default (about 16 M requests, 670 MB).
    pub max_rows_in_memory: Option<usize>,
}

/// Reads the logs and derives the inputs.
pub fn fit(paths: &[PathBuf], options: &FitOptions) -> Result<Fit, FitError> {
    if paths.is_empty() {
        return Err(FitError::Data("give at least one log file".into()));
    }
    let Log {
        mut reqs,
        spill,
        times,
        bad,
        rows,
        caller_names,
        mut warnings,
    } = read::read_logs(paths, options)?;
    let tally = match spill {
        Some(spill) => spill.tally()?,
        None => {
            // By key, then time: each (caller, key) becomes one run of rows, its first
            // request first.
            reqs.par_sort_unstable_by(request::order);
            Tally::of_sorted(&reqs)
        }
    };
    drop(reqs);
    if tally.is_empty() {
        return Err(no_usable_rows(paths, rows, &bad));
    }
    let aggregates = tally.finish(rows, &caller_names);
    let spans = &aggregates.spans;
    warnings.extend(times.unit_warning(options.time_unit, spans.log_min, spans.log_s()));
    Fit::from_aggregates(
        paths.iter().map(|p| p.display().to_string()).collect(),
        warnings,
        bad,
        &aggregates,
    )
}

/// The inputs from a warehouse query's result (`fit --emit-sql`, saved as CSV or Parquet).
pub fn fit_aggregates(path: &Path) -> Result<Fit, FitError> {
    let rows = stat_rows::read_stat_rows(path)?;
    let aggregates = Aggregates::from_rows(&rows).map_err(|m| file_err(path, m))?;
    // The rows the query could not use: it counts them, the file reader would name them.
    let mut bad = BadRows::default();
    if let Some(n) = rows
        .iter()
        .find(|r| r.stat == "left_out")
        .and_then(|r| r.n)
        .filter(|n| *n > 0.0)
    {
        bad.total = n as u64;
        bad.reasons.insert(
            "time or key missing (left out by the query)".into(),
            n as u64,
        );
    }
    Fit::from_aggregates(
        vec![path.display().to_string()],
        Vec::new(),
        bad,
        &aggregates,
    )
    .map_err(|e| match e {
        FitError::Data(m) => file_err(path, m),
        e => e,
    })
}

impl Fit {
    /// Every figure from the log's sufficient statistics: the one place they are estimated,
    /// whichever way the statistics were gathered.
    pub fn from_aggregates(
        files: Vec<String>,
        warnings: Vec<String>,
        bad_rows: BadRows,
        a: &Aggregates,
    ) -> Result<Fit, FitError> {
        let arrivals = estimate::arrivals(a)?;
        let late = retries::retries(a);
        Ok(Fit {
            files,
            warnings,
            rows: a.rows,
            bad_rows,
            weighted: a.weighted,
            keys: a.keys,
            arrival_span_s: a.spans.arrival_s(),
            log_span_s: a.spans.log_s(),
            rate_per_s: arrivals.rate_per_s,
            hourly_rate_per_s: arrivals.hourly_rate_per_s,
            peak_hour_rate_per_s: arrivals.peak_hour_rate_per_s,
            timeout_fraction: arrivals.timeout_fraction,
            done_fraction: estimate::share(a.done.pair(), a.not_done.pair()),
            retries: late.retries,
            retried_keys: late.retried_keys,
            watched_s: late.watched_s,
            latest_retry_s: late.latest_retry_s,
            retry_cdf: late.cdf,
            later_than_watched: late.later_than_watched,
            retries_beyond: late.beyond,
            retry_points: late.points,
            retry_min_delay_s: late.min_delay_s,
            horizon_s: late.horizon_s,
            key_bytes: estimate::sizes(&a.key_bytes),
            response_bytes: estimate::sizes(&a.response_bytes),
            callers: a.callers,
            top_callers: estimate::callers(a),
        })
    }
}

/// The logs held no row `fit` can use: say how many rows there were and the first bad one.
fn no_usable_rows(paths: &[PathBuf], rows: u64, bad: &BadRows) -> FitError {
    FitError::Data(format!(
        "{}: no usable rows ({} rows, {} bad{})",
        paths
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", "),
        rows,
        bad.total,
        bad.examples
            .first()
            .map(|e| format!("; first: {e}"))
            .unwrap_or_default()
    ))
}
