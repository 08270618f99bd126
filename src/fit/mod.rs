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

use std::collections::{BTreeMap, HashMap};
use std::io::BufRead as _;
use std::path::{Path, PathBuf};

#[cfg(feature = "tables")]
use polars::prelude::{DataFrame, DataType, Series};
use rayon::prelude::*;
use serde::Serialize;

use crate::duration::DAY_S;
use crate::format::human_duration;
use crate::model::SWEEP_RETENTIONS_S;
use crate::payload::{SizeDist, fnv64};
use crate::sim::request_log::LogRow;
use crate::traffic::{DEFAULT_MAX_HORIZON_S, DEFAULT_MIN_DELAY_S, RetrySpec};

use crate::stats::Z95;

/// The delays the seed's table gives, where a fitted CDF is reported, plus a week, two and a
/// month for logs that are long enough.
pub const CDF_POINTS_S: [f64; 10] = [
    10.0,
    60.0,
    600.0,
    3_600.0,
    21_600.0,
    86_400.0,
    259_200.0,
    604_800.0,
    1_209_600.0,
    2_592_000.0,
];

/// Retries answered within this long of the first request tell whether it had run: the
/// record is surely still there, so a replay means done and a fresh 201 means not.
const DONE_WITHIN_S: f64 = 3_600.0;

/// At most this many points in a fitted size histogram: enough for a long tail, small enough
/// for a scenario file a person reads.
const MAX_HISTOGRAM_POINTS: usize = 40;

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
    fn all(&self) -> [&String; 7] {
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

/// The unit of a numeric `time` column (text times are RFC 3339).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum TimeUnit {
    #[default]
    S,
    Ms,
    Us,
    Ns,
}

impl TimeUnit {
    fn to_s(self) -> f64 {
        match self {
            TimeUnit::S => 1.0,
            TimeUnit::Ms => 1e-3,
            TimeUnit::Us => 1e-6,
            TimeUnit::Ns => 1e-9,
        }
    }
}

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

/// One request, compact: the key is kept as a hash of (caller, key).
#[derive(Debug, Clone, Copy)]
struct Req {
    key: u64,
    caller: u32,
    time_s: f64,
    /// 0 when the caller got no answer in time.
    status: u16,
    /// `u32::MAX` when the log has no size for it.
    response_bytes: u32,
    /// 0 no, 1 yes, 2 not in the log.
    replayed: u8,
    key_bytes: u16,
    weight: f32,
}

/// Why rows were left out, with counts; reported, never silently dropped.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct BadRows {
    pub total: u64,
    /// Reason → rows, e.g. "time: not a number or RFC 3339 time".
    pub reasons: BTreeMap<String, u64>,
    /// The first few, as `file: row N: reason` (N counts data rows from 1), to go and look.
    pub examples: Vec<String>,
}

impl BadRows {
    fn add(&mut self, path: &Path, row: usize, reason: &str) {
        self.total += 1;
        *self.reasons.entry(reason.to_string()).or_insert(0) += 1;
        if self.examples.len() < 5 {
            self.examples
                .push(format!("{}: row {}: {reason}", path.display(), row + 1));
        }
    }
}

/// A value with its 95 % interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize)]
pub struct Estimate {
    pub estimate: f64,
    pub ci95_low: f64,
    pub ci95_high: f64,
}

impl Estimate {
    pub fn contains(&self, v: f64) -> bool {
        self.ci95_low <= v && v <= self.ci95_high
    }
}

/// A weighted share `Σ w·x / Σ w`, with a delta-method interval that treats each row's weight
/// as a Poisson count: exact for unweighted rows (it is then the binomial normal interval) and
/// right for the simulator's stratified samples, whose strata carry different weights.
fn share(yes: (f64, f64), no: (f64, f64)) -> Option<Estimate> {
    let (a, var_a) = yes;
    let (b, var_b) = no;
    let n = a + b;
    if n <= 0.0 {
        return None;
    }
    let p = a / n;
    let var = (b * b * var_a + a * a * var_b) / n.powi(4);
    let half = Z95 * var.sqrt();
    Some(Estimate {
        estimate: p,
        ci95_low: (p - half).max(0.0),
        ci95_high: (p + half).min(1.0),
    })
}

/// Weighted sum and the sum of squared weights: a count and its Poisson variance.
#[derive(Debug, Clone, Copy, Default)]
struct Sum(f64, f64);

impl Sum {
    fn add(&mut self, w: f64) {
        self.0 += w;
        self.1 += w * w;
    }
    fn pair(self) -> (f64, f64) {
        (self.0, self.1)
    }
}

/// One point of the fitted late-retry CDF.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CdfPoint {
    pub delay_s: f64,
    pub delay: String,
    pub arrived: Estimate,
}

/// Retries later than a retention, in the log and per day.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Beyond {
    pub retention_s: f64,
    pub retention: String,
    pub retries: f64,
    pub per_day: f64,
}

/// A fitted size distribution with its summary.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct SizeFit {
    pub samples: u64,
    pub mean_bytes: f64,
    pub median_bytes: f64,
    pub p99_bytes: f64,
    pub max_bytes: f64,
    pub dist: SizeDist,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct CallerShare {
    pub caller: String,
    pub share: f64,
}

/// Everything `fit` found.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Fit {
    pub files: Vec<String>,
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
    pub rate_per_s: Estimate,
    /// Mean arrival rate per hour of the day (UTC, or since the log's time origin), `None` for
    /// hours the log does not cover.
    pub hourly_rate_per_s: Vec<Option<f64>>,
    pub peak_hour_rate_per_s: Option<f64>,
    pub timeout_fraction: Option<Estimate>,
    pub done_fraction: Option<Estimate>,
    /// Later requests for an already-seen key (the retries).
    pub retries: u64,
    pub retried_keys: u64,
    /// The delay up to which every key counted was watched for retries, seconds.
    pub supported_horizon_s: f64,
    pub latest_retry_s: Option<f64>,
    pub retry_cdf: Vec<CdfPoint>,
    /// Share of counted retries later than the supported horizon (unseen shape).
    pub beyond_horizon: Option<Estimate>,
    pub retries_beyond: Vec<Beyond>,
    /// The fitted distribution as the model and the simulator take it, when there are retries.
    pub retry_points: Option<Vec<(f64, f64)>>,
    pub retry_min_delay_s: f64,
    pub retry_max_horizon_s: f64,
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
}

/// One cell, whatever the column's type in the file.
#[derive(Debug, Clone, Copy)]
enum Cell<'a> {
    Null,
    Str(&'a str),
    Num(f64),
    Bool(bool),
}

impl Cell<'_> {
    fn number(self) -> Result<Option<f64>, ()> {
        match self {
            Cell::Null => Ok(None),
            Cell::Num(v) => Ok(Some(v)),
            Cell::Bool(b) => Ok(Some(f64::from(u8::from(b)))),
            Cell::Str(s) => {
                let s = s.trim();
                if s.is_empty() {
                    Ok(None)
                } else {
                    s.parse::<f64>().map(Some).map_err(|_| ())
                }
            }
        }
    }
}

/// Reads rows into [`Req`]s, interning callers.
struct Reader<'o> {
    options: &'o FitOptions,
    callers: HashMap<String, u32>,
    caller_names: Vec<String>,
    reqs: Vec<Req>,
    bad: BadRows,
    rows: u64,
}

impl<'o> Reader<'o> {
    fn new(options: &'o FitOptions) -> Self {
        Reader {
            options,
            callers: HashMap::new(),
            caller_names: Vec::new(),
            reqs: Vec::new(),
            bad: BadRows::default(),
            rows: 0,
        }
    }

    fn caller_id(&mut self, name: &str) -> u32 {
        if let Some(id) = self.callers.get(name) {
            return *id;
        }
        let id = self.caller_names.len() as u32;
        self.callers.insert(name.to_string(), id);
        self.caller_names.push(name.to_string());
        id
    }

    /// One row from its seven cells (absent columns are `Null`).
    fn row(&mut self, path: &Path, index: usize, cells: [Cell<'_>; 7]) {
        self.rows += 1;
        let [time, caller, key, status, bytes, replayed, weight] = cells;
        let time_s = match time {
            Cell::Str(s) if s.trim().parse::<f64>().is_err() && !s.trim().is_empty() => {
                match humantime::parse_rfc3339_weak(s.trim()) {
                    Ok(t) => t
                        .duration_since(std::time::UNIX_EPOCH)
                        .map_or(f64::NAN, |d| d.as_secs_f64()),
                    Err(_) => f64::NAN,
                }
            }
            other => match other.number() {
                Ok(Some(v)) => v * self.options.time_unit.to_s(),
                _ => f64::NAN,
            },
        };
        if !time_s.is_finite() {
            return self.bad.add(
                path,
                index,
                "time: missing, or neither a number nor an RFC 3339 time",
            );
        }
        let key_text = match key {
            Cell::Str(s) if !s.is_empty() => s.to_string(),
            Cell::Num(v) => format!("{v}"),
            _ => {
                return self
                    .bad
                    .add(path, index, "idempotency_key: missing or empty");
            }
        };
        let caller_text = match caller {
            Cell::Str(s) => s.to_string(),
            Cell::Num(v) => format!("{v}"),
            _ => String::new(),
        };
        let status = match status.number() {
            Ok(None) => 0,
            Ok(Some(v)) if v == v.trunc() && (0.0..=999.0).contains(&v) => v as u16,
            _ => {
                return self.bad.add(
                    path,
                    index,
                    "status: not an HTTP status (0 or empty for no answer)",
                );
            }
        };
        let response_bytes = match bytes.number() {
            Ok(None) => u32::MAX,
            Ok(Some(v)) if v >= 0.0 && v < f64::from(u32::MAX) => v as u32,
            _ => {
                return self
                    .bad
                    .add(path, index, "response_bytes: not a size in bytes");
            }
        };
        let replayed = match replayed {
            Cell::Null => 2,
            Cell::Bool(b) => u8::from(b),
            Cell::Num(v) => u8::from(v != 0.0),
            Cell::Str(s) => match s.trim().to_ascii_lowercase().as_str() {
                "" => 2,
                "true" | "1" | "yes" => 1,
                "false" | "0" | "no" => 0,
                _ => return self.bad.add(path, index, "replayed: not true or false"),
            },
        };
        let weight = match weight.number() {
            Ok(None) => 1.0,
            Ok(Some(v)) if v > 0.0 && v.is_finite() => v,
            _ => return self.bad.add(path, index, "weight: not a number above 0"),
        };
        let caller_id = self.caller_id(&caller_text);
        self.reqs.push(Req {
            key: fnv64(&[caller_text.as_bytes(), key_text.as_bytes()]),
            caller: caller_id,
            time_s,
            status,
            response_bytes,
            replayed,
            key_bytes: key_text.len().min(usize::from(u16::MAX)) as u16,
            weight: weight as f32,
        });
    }

    #[cfg(feature = "tables")]
    fn read_frame(&mut self, path: &Path, df: &DataFrame) -> Result<(), FitError> {
        let c = &self.options.columns;
        let names = c.all();
        for required in [&c.time, &c.key] {
            if df.column(required).is_err() {
                let found: Vec<String> = df
                    .get_column_names()
                    .iter()
                    .map(|n| n.to_string())
                    .collect();
                return Err(file_err(
                    path,
                    format!(
                        "no column `{required}` (found {}); name it with --{}-column",
                        found.join(", "),
                        if required == &c.time { "time" } else { "key" }
                    ),
                ));
            }
        }
        // Owned, typed copies the cell iterators borrow from.
        let series: Vec<Option<Series>> = names
            .iter()
            .map(|name| {
                let Ok(col) = df.column(name) else {
                    return Ok(None);
                };
                let s = col.as_materialized_series().clone();
                let s = match s.dtype() {
                    DataType::String | DataType::Boolean | DataType::Float64 => s,
                    d if d.is_primitive_numeric() => s.cast(&DataType::Float64)?,
                    _ => s.cast(&DataType::String)?,
                };
                Ok(Some(s))
            })
            .collect::<Result<_, polars::prelude::PolarsError>>()
            .map_err(|e| file_err(path, e.to_string()))?;
        let height = df.height();
        let mut iters: Vec<Box<dyn Iterator<Item = Cell<'_>> + '_>> = Vec::new();
        for s in &series {
            let it: Box<dyn Iterator<Item = Cell<'_>>> = match s {
                None => Box::new(std::iter::repeat_n(Cell::Null, height)),
                Some(s) => match s.dtype() {
                    DataType::String => Box::new(
                        s.str()
                            .map_err(|e| file_err(path, e.to_string()))?
                            .iter()
                            .map(|v| v.map_or(Cell::Null, Cell::Str)),
                    ),
                    DataType::Boolean => Box::new(
                        s.bool()
                            .map_err(|e| file_err(path, e.to_string()))?
                            .iter()
                            .map(|v| v.map_or(Cell::Null, Cell::Bool)),
                    ),
                    _ => Box::new(
                        s.f64()
                            .map_err(|e| file_err(path, e.to_string()))?
                            .iter()
                            .map(|v| v.map_or(Cell::Null, Cell::Num)),
                    ),
                },
            };
            iters.push(it);
        }
        for index in 0..height {
            let mut cells = [Cell::Null; 7];
            for (cell, it) in cells.iter_mut().zip(iters.iter_mut()) {
                *cell = it.next().unwrap_or(Cell::Null);
            }
            self.row(path, index, cells);
        }
        Ok(())
    }

    #[cfg(feature = "tables")]
    fn read_csv(&mut self, path: &Path) -> Result<(), FitError> {
        use polars_io::prelude::{CsvReadOptions, SerReader as _};
        // Every column as text: a malformed cell becomes one bad row instead of failing the
        // whole file on a type polars inferred from the first rows.
        let df = CsvReadOptions::default()
            .with_has_header(true)
            .with_infer_schema_length(Some(0))
            .try_into_reader_with_file_path(Some(path.to_path_buf()))
            .and_then(|r| r.finish())
            .map_err(|e| file_err(path, e.to_string()))?;
        self.read_frame(path, &df)
    }

    /// Without the `tables` feature (a build without polars, such as the fuzz targets') only
    /// NDJSON logs can be read.
    #[cfg(not(feature = "tables"))]
    fn read_csv(&mut self, path: &Path) -> Result<(), FitError> {
        Err(file_err(
            path,
            "this build has no CSV reader (the `tables` feature is off)",
        ))
    }

    #[cfg(not(feature = "tables"))]
    fn read_parquet(&mut self, path: &Path) -> Result<(), FitError> {
        Err(file_err(
            path,
            "this build has no Parquet reader (the `tables` feature is off)",
        ))
    }

    #[cfg(feature = "tables")]
    fn read_parquet(&mut self, path: &Path) -> Result<(), FitError> {
        use polars_io::prelude::{ParquetReader, SerReader as _};
        let file = std::fs::File::open(path).map_err(|e| file_err(path, e.to_string()))?;
        let mut reader = ParquetReader::new(file);
        let schema = reader.schema().map_err(|e| file_err(path, e.to_string()))?;
        let c = &self.options.columns;
        let wanted: Vec<String> = c
            .all()
            .into_iter()
            .filter(|n| schema.contains(n))
            .cloned()
            .collect();
        let df = reader
            .with_columns(Some(wanted))
            .finish()
            .map_err(|e| file_err(path, e.to_string()))?;
        self.read_frame(path, &df)
    }

    fn read_ndjson(&mut self, path: &Path) -> Result<(), FitError> {
        let file = std::fs::File::open(path).map_err(|e| file_err(path, e.to_string()))?;
        let columns = self.options.columns.clone();
        let names = columns.all();
        for (index, line) in std::io::BufReader::new(file).lines().enumerate() {
            let line = line.map_err(|e| file_err(path, e.to_string()))?;
            if line.trim().is_empty() {
                continue;
            }
            let Ok(serde_json::Value::Object(obj)) = serde_json::from_str(&line) else {
                self.rows += 1;
                self.bad.add(path, index, "not a JSON object");
                continue;
            };
            let cell = |name: &str| match obj.get(name) {
                Some(serde_json::Value::String(s)) => Cell::Str(s.as_str()),
                Some(serde_json::Value::Number(n)) => n.as_f64().map_or(Cell::Null, Cell::Num),
                Some(serde_json::Value::Bool(b)) => Cell::Bool(*b),
                _ => Cell::Null,
            };
            let cells = [
                cell(names[0]),
                cell(names[1]),
                cell(names[2]),
                cell(names[3]),
                cell(names[4]),
                cell(names[5]),
                cell(names[6]),
            ];
            self.row(path, index, cells);
        }
        Ok(())
    }
}

/// Checks that a log file's extension is one `fit` reads and `simulate` writes.
pub fn log_kind(path: &Path) -> Result<(), FitError> {
    kind(path).map(|_| ())
}

/// Which reader a file needs, from its extension.
fn kind(path: &Path) -> Result<&'static str, FitError> {
    let ext = path
        .extension()
        .and_then(|e| e.to_str())
        .unwrap_or("")
        .to_ascii_lowercase();
    match ext.as_str() {
        "csv" => Ok("csv"),
        "parquet" | "pq" => Ok("parquet"),
        "ndjson" | "jsonl" | "json" => Ok("ndjson"),
        _ => Err(file_err(
            path,
            "unknown log format; name the file .csv, .parquet or .ndjson (.jsonl)",
        )),
    }
}

/// Weighted quantile of sorted `(value, weight)` pairs.
fn weighted_quantile(sorted: &[(f64, f64)], total: f64, p: f64) -> f64 {
    let mut acc = 0.0;
    for (v, w) in sorted {
        acc += w;
        if acc >= p * total {
            return *v;
        }
    }
    sorted.last().map_or(f64::NAN, |x| x.0)
}

/// A size distribution from `(bytes, weight)` samples: fixed when every sample has one size,
/// otherwise a histogram of at most [`MAX_HISTOGRAM_POINTS`] points, each the weighted mean of
/// an equal-weight slice of the sorted samples (so the histogram keeps the mean exactly).
fn size_fit(mut samples: Vec<(f64, f64)>) -> Option<SizeFit> {
    if samples.is_empty() {
        return None;
    }
    samples.sort_by(|a, b| a.0.total_cmp(&b.0));
    let total: f64 = samples.iter().map(|s| s.1).sum();
    let mean = samples.iter().map(|(v, w)| v * w).sum::<f64>() / total;
    let min = samples[0].0;
    let max = samples[samples.len() - 1].0;
    let dist = if min == max {
        SizeDist::Fixed {
            bytes: min.max(1.0),
        }
    } else {
        let mut points: Vec<(f64, f64)> = Vec::new();
        let slice = total / MAX_HISTOGRAM_POINTS as f64;
        let (mut sum_vw, mut sum_w) = (0.0, 0.0);
        for (v, w) in &samples {
            sum_vw += v * w;
            sum_w += w;
            if sum_w >= slice {
                points.push(((sum_vw / sum_w).max(1.0), sum_w));
                (sum_vw, sum_w) = (0.0, 0.0);
            }
        }
        if sum_w > 0.0 {
            points.push(((sum_vw / sum_w).max(1.0), sum_w));
        }
        // Rounded for a readable file: a byte and four significant weights are plenty.
        let points = points
            .into_iter()
            .map(|(v, w)| ((v * 10.0).round() / 10.0, round_sig(w, 6)))
            .collect();
        SizeDist::Histogram { points }
    };
    Some(SizeFit {
        samples: samples.len() as u64,
        mean_bytes: mean,
        median_bytes: weighted_quantile(&samples, total, 0.5),
        p99_bytes: weighted_quantile(&samples, total, 0.99),
        max_bytes: max,
        dist,
    })
}

fn round_sig(v: f64, digits: i32) -> f64 {
    if v == 0.0 || !v.is_finite() {
        return v;
    }
    let scale = 10f64.powi(digits - 1 - v.abs().log10().floor() as i32);
    (v * scale).round() / scale
}

/// Reads the logs and derives the inputs.
pub fn fit(paths: &[PathBuf], options: &FitOptions) -> Result<Fit, FitError> {
    if paths.is_empty() {
        return Err(FitError::Data("give at least one log file".into()));
    }
    let mut reader = Reader::new(options);
    for path in paths {
        match kind(path)? {
            "csv" => reader.read_csv(path)?,
            "parquet" => reader.read_parquet(path)?,
            _ => reader.read_ndjson(path)?,
        }
    }
    let Reader {
        mut reqs,
        bad,
        rows,
        caller_names,
        ..
    } = reader;
    if reqs.is_empty() {
        return Err(FitError::Data(format!(
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
        )));
    }
    reqs.par_sort_unstable_by(|a, b| a.key.cmp(&b.key).then(a.time_s.total_cmp(&b.time_s)));
    let weighted = reqs.iter().any(|r| r.weight != 1.0);
    let has_replayed = reqs.iter().any(|r| r.replayed != 2);

    // Group boundaries: one group per (caller, key).
    let mut starts: Vec<usize> = Vec::new();
    for (i, r) in reqs.iter().enumerate() {
        if i == 0 || reqs[i - 1].key != r.key {
            starts.push(i);
        }
    }
    let groups: Vec<&[Req]> = starts
        .iter()
        .enumerate()
        .map(|(g, &s)| {
            let e = starts.get(g + 1).copied().unwrap_or(reqs.len());
            &reqs[s..e]
        })
        .collect();

    let first_min = groups
        .iter()
        .map(|g| g[0].time_s)
        .fold(f64::INFINITY, f64::min);
    let first_max = groups
        .iter()
        .map(|g| g[0].time_s)
        .fold(f64::NEG_INFINITY, f64::max);
    let log_min = reqs.iter().map(|r| r.time_s).fold(f64::INFINITY, f64::min);
    let log_max = reqs
        .iter()
        .map(|r| r.time_s)
        .fold(f64::NEG_INFINITY, f64::max);
    let arrival_span_s = first_max - first_min;
    if arrival_span_s <= 0.0 {
        return Err(FitError::Data(
            "every key's first request has the same time: the log covers no time to count arrivals in".into(),
        ));
    }

    // Arrivals: every key's first request, by weight.
    let mut intents = Sum::default();
    let mut timed_out = Sum::default();
    let mut answered = Sum::default();
    let mut hourly = [0.0f64; 24];
    let mut caller_w: HashMap<u32, f64> = HashMap::new();
    for g in &groups {
        let r = g[0];
        let w = f64::from(r.weight);
        intents.add(w);
        if r.status == 0 {
            timed_out.add(w);
        } else {
            answered.add(w);
        }
        let hour = ((r.time_s.rem_euclid(DAY_S)) / 3_600.0) as usize;
        hourly[hour.min(23)] += w;
        *caller_w.entry(r.caller).or_insert(0.0) += w;
    }
    let rate = intents.0 / arrival_span_s;
    let rate_half = Z95 * intents.1.sqrt() / arrival_span_s;
    let rate_per_s = Estimate {
        estimate: rate,
        ci95_low: (rate - rate_half).max(0.0),
        ci95_high: rate + rate_half,
    };
    // Seconds of the arrival window falling in each hour of the day, to turn counts into rates.
    let mut covered = [0.0f64; 24];
    let mut t = first_min;
    // Bounded: one step per hour boundary, at most ten years of log.
    let mut steps = 0;
    while t < first_max && steps < 24 * 3_660 {
        let next = ((t / 3_600.0).floor() + 1.0) * 3_600.0;
        let end = next.min(first_max);
        let hour = ((t.rem_euclid(DAY_S)) / 3_600.0) as usize;
        covered[hour.min(23)] += end - t;
        t = end;
        steps += 1;
    }
    let hourly_rate_per_s: Vec<Option<f64>> = (0..24)
        .map(|h| (covered[h] >= 60.0).then(|| hourly[h] / covered[h]))
        .collect();
    let peak_hour_rate_per_s = (arrival_span_s >= DAY_S)
        .then(|| {
            hourly_rate_per_s
                .iter()
                .flatten()
                .copied()
                .fold(f64::NEG_INFINITY, f64::max)
        })
        .filter(|v| v.is_finite());
    let timeout_fraction = share(timed_out.pair(), answered.pair());

    // Done fraction: of timed-out first requests answered within an hour, those answered by a
    // replay. A later retry may find the record purged and run as new, so it says nothing about
    // the first attempt; an hour is shorter than any retention worth running.
    let mut done = Sum::default();
    let mut not_done = Sum::default();
    if has_replayed {
        for g in &groups {
            if g[0].status != 0 {
                continue;
            }
            if let Some(next) = g[1..].iter().find(|r| r.status != 0 && r.replayed != 2)
                && next.time_s - g[0].time_s <= DONE_WITHIN_S
            {
                let w = f64::from(g[0].weight);
                if next.replayed == 1 && (200..300).contains(&next.status) {
                    done.add(w);
                } else {
                    not_done.add(w);
                }
            }
        }
    }
    let done_fraction = share(done.pair(), not_done.pair());

    // Late retries. A key is watched for retries from its first request to the end of the
    // log; counting only keys watched for at least `supported` seconds keeps the CDF free of
    // the bias toward short delays that a log ending mid-retry would give.
    let supported_horizon_s = (log_max - first_max).max((log_max - first_min) / 2.0);
    let cutoff = log_max - supported_horizon_s;
    let mut delays: Vec<(f64, f64)> = Vec::new();
    let mut retries = 0u64;
    let mut retried_keys = 0u64;
    let mut latest_retry_s: Option<f64> = None;
    for g in &groups {
        if g.len() > 1 {
            retried_keys += 1;
        }
        let first = g[0].time_s;
        for r in &g[1..] {
            retries += 1;
            let d = r.time_s - first;
            latest_retry_s = Some(latest_retry_s.map_or(d, |l: f64| l.max(d)));
            if first <= cutoff {
                delays.push((d, f64::from(g[0].weight)));
            }
        }
    }
    delays.sort_by(|a, b| a.0.total_cmp(&b.0));
    let in_cdf = |t: f64| {
        let (mut yes, mut no) = (Sum::default(), Sum::default());
        for &(d, w) in &delays {
            if d <= t {
                yes.add(w);
            } else {
                no.add(w);
            }
        }
        (yes, no)
    };
    let retry_cdf: Vec<CdfPoint> = CDF_POINTS_S
        .iter()
        .filter(|&&t| t <= supported_horizon_s)
        .filter_map(|&t| {
            let (yes, no) = in_cdf(t);
            share(yes.pair(), no.pair()).map(|arrived| CdfPoint {
                delay_s: t,
                delay: human_duration(t),
                arrived,
            })
        })
        .collect();
    let beyond_horizon = {
        let (yes, no) = in_cdf(supported_horizon_s);
        share(no.pair(), yes.pair())
    };
    let days = arrival_span_s / DAY_S;
    let retries_beyond: Vec<Beyond> = SWEEP_RETENTIONS_S
        .iter()
        .filter(|&&t| t <= supported_horizon_s)
        .map(|&t| {
            let n: f64 = delays.iter().filter(|d| d.0 > t).map(|d| d.1).sum();
            Beyond {
                retention_s: t,
                retention: human_duration(t),
                retries: n,
                per_day: n / days,
            }
        })
        .collect();

    // The distribution for the model and the simulator: the CDF at the points below the latest
    // counted retry, then that retry at 100 % if nothing lay beyond the supported horizon, or
    // the supported horizon's value and the default tail after it.
    let latest_counted = delays.last().map(|d| d.0);
    let min_delay_s = delays
        .iter()
        .map(|d| d.0)
        .find(|d| *d > 0.0)
        .unwrap_or(DEFAULT_MIN_DELAY_S);
    let mut retry_max_horizon_s = DEFAULT_MAX_HORIZON_S;
    let retry_points = latest_counted.filter(|l| *l > 0.0).map(|latest| {
        let mut pts: Vec<(f64, f64)> = retry_cdf
            .iter()
            .filter(|p| p.delay_s < latest && p.delay_s > min_delay_s)
            .map(|p| (p.delay_s, p.arrived.estimate))
            .collect();
        let beyond = beyond_horizon.map_or(0.0, |b| b.estimate);
        if beyond == 0.0 {
            pts.push((latest, 1.0));
            retry_max_horizon_s = latest;
        } else {
            let (yes, no) = in_cdf(supported_horizon_s);
            let f = share(yes.pair(), no.pair()).map_or(0.0, |e| e.estimate);
            if pts.last().is_none_or(|p| p.0 < supported_horizon_s) {
                pts.push((supported_horizon_s, f));
            }
            retry_max_horizon_s = DEFAULT_MAX_HORIZON_S.max(2.0 * supported_horizon_s);
        }
        // A CDF needs two points; a single one gets the earliest retry in front of it.
        if pts.len() < 2 {
            pts.insert(0, (min_delay_s.min(pts[0].0 / 2.0), 0.0));
        }
        pts
    });

    // Sizes: each key's length once, and each key's first 2xx response once.
    let key_bytes = size_fit(
        groups
            .iter()
            .map(|g| (f64::from(g[0].key_bytes), f64::from(g[0].weight)))
            .collect(),
    );
    let response_bytes = size_fit(
        groups
            .iter()
            .filter_map(|g| {
                g.iter()
                    .find(|r| (200..300).contains(&r.status) && r.response_bytes != u32::MAX)
                    .map(|r| (f64::from(r.response_bytes), f64::from(g[0].weight)))
            })
            .collect(),
    );

    let mut by_caller: Vec<(String, f64)> = caller_w
        .into_iter()
        .map(|(id, w)| (caller_names[id as usize].clone(), w))
        .collect();
    by_caller.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
    let top_callers = by_caller
        .iter()
        .take(10)
        .map(|(c, w)| CallerShare {
            caller: c.clone(),
            share: w / intents.0,
        })
        .collect();

    Ok(Fit {
        files: paths.iter().map(|p| p.display().to_string()).collect(),
        rows,
        bad_rows: bad,
        weighted,
        keys: groups.len() as u64,
        arrival_span_s,
        log_span_s: log_max - log_min,
        rate_per_s,
        hourly_rate_per_s,
        peak_hour_rate_per_s,
        timeout_fraction,
        done_fraction,
        retries,
        retried_keys,
        supported_horizon_s,
        latest_retry_s,
        retry_cdf,
        beyond_horizon,
        retries_beyond,
        retry_points,
        retry_min_delay_s: min_delay_s,
        retry_max_horizon_s,
        key_bytes,
        response_bytes,
        callers: by_caller.len() as u64,
        top_callers,
    })
}

impl Fit {
    /// The fitted distribution as a scenario field, if the log had retries.
    pub fn retry_spec(&self) -> Option<RetrySpec> {
        let points = self.retry_points.as_ref()?;
        // Rounding the measured last point may bring it onto a grid point before it: keep
        // delays strictly increasing, as a CDF needs, by dropping the grid point.
        let mut out: Vec<(String, f64, f64)> = Vec::new();
        for (d, f) in points {
            let text = crate::format::approx_duration(*d);
            let back = crate::duration::parse(&text).map_or(*d, |b| b.as_secs_f64());
            while out.last().is_some_and(|p| p.2 >= back) {
                out.pop();
            }
            out.push((text, round_sig(*f, 6), back));
        }
        Some(RetrySpec {
            points: out.into_iter().map(|(t, f, _)| (t, f)).collect(),
            min_delay: crate::format::approx_duration(self.retry_min_delay_s),
            horizon: crate::format::approx_duration(self.retry_max_horizon_s),
            retries: Some(self.retries),
            latest_retry: self.latest_retry_s.map(crate::format::approx_duration),
            log_span: Some(crate::format::approx_duration(self.log_span_s)),
        })
    }

    /// A scenario file `report` runs as is: the fitted traffic at the seed's engine and carrier.
    pub fn scenario_toml(&self, name: &str) -> String {
        let mut out = String::new();
        out.push_str(&format!(
            "# Fitted by `idemcalc fit` from {} ({} rows, {} bad).\n",
            self.files.join(", "),
            self.rows,
            self.bad_rows.total
        ));
        out.push_str("# Engine and carrier are the seed's; edit them to match your system.\n");
        let mut doc = toml::Table::new();
        doc.insert("name".into(), name.into());
        doc.insert(
            "description".into(),
            format!(
                "Fitted from {} keys over {} of arrivals: {:.4}/s, {} callers.",
                self.keys,
                crate::format::approx_duration(self.arrival_span_s),
                self.rate_per_s.estimate,
                self.callers
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

    /// The chart-free summary `idemcalc fit` prints.
    pub fn summary(&self) -> String {
        use crate::format::{human_bytes, human_count, percent};
        let est = |e: &Estimate, f: &dyn Fn(f64) -> String| {
            format!(
                "{} (95% {} – {})",
                f(e.estimate),
                f(e.ci95_low),
                f(e.ci95_high)
            )
        };
        let rate = |v: f64| format!("{}/s", crate::format::significant(v, 4));
        let mut out = format!(
            "Read {} rows from {}: {} keys, {} of arrivals, {} of log{}.\n",
            human_count(self.rows as f64),
            self.files.join(", "),
            human_count(self.keys as f64),
            crate::format::approx_duration(self.arrival_span_s),
            crate::format::approx_duration(self.log_span_s),
            if self.weighted { ", rows weighted" } else { "" }
        );
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
        out.push_str(&format!(
            "\nArrival rate        {}\n",
            est(&self.rate_per_s, &rate)
        ));
        match self.peak_hour_rate_per_s {
            Some(p) => out.push_str(&format!("Busiest hour        {}\n", rate(p))),
            None => out.push_str("Busiest hour        - (needs a day of arrivals)\n"),
        }
        match &self.timeout_fraction {
            Some(t) => out.push_str(&format!("Timeout fraction    {}\n", est(t, &percent))),
            None => out.push_str("Timeout fraction    -\n"),
        }
        match &self.done_fraction {
            Some(d) => out.push_str(&format!(
                "Done fraction       {} (timed-out calls later answered by a replay)\n",
                est(d, &percent)
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
                        .map(|c| format!("{} {}", c.caller, percent(c.share)))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            } else {
                String::new()
            }
        ));
        let size_line = |name: &str, s: &Option<SizeFit>| match s {
            Some(s) => format!(
                "{name:<20}mean {}, median {}, p99 {}, max {} ({} samples)\n",
                human_bytes(s.mean_bytes),
                human_bytes(s.median_bytes),
                human_bytes(s.p99_bytes),
                human_bytes(s.max_bytes),
                human_count(s.samples as f64)
            ),
            None => format!("{name:<20}- (no sizes in the log)\n"),
        };
        out.push_str(&size_line("Key length", &self.key_bytes));
        out.push_str(&size_line("Saved response", &self.response_bytes));
        if self.retries == 0 {
            out.push_str(
                "\nNo key repeats in this log: there are no retries to fit a late-retry distribution to,\nso the scenario keeps the seed's illustrative one.\n",
            );
            return out;
        }
        out.push_str(&format!(
            "\nLate retries: {} later requests on {} keys; the latest {} after its first request.\n",
            human_count(self.retries as f64),
            human_count(self.retried_keys as f64),
            crate::format::approx_duration(self.latest_retry_s.unwrap_or(0.0))
        ));
        out.push_str(&format!(
            "Keys watched for at least {} count (the horizon this log supports).\n\n",
            crate::format::approx_duration(self.supported_horizon_s)
        ));
        out.push_str("  Time since the first request   Arrived\n");
        for p in &self.retry_cdf {
            out.push_str(&format!(
                "  {:<30} {}\n",
                p.delay,
                est(&p.arrived, &percent)
            ));
        }
        if let Some(b) = &self.beyond_horizon {
            out.push_str(&format!(
                "  {:<30} {}\n",
                format!(
                    "later than {}",
                    crate::format::approx_duration(self.supported_horizon_s)
                ),
                est(b, &percent)
            ));
        }
        if !self.retries_beyond.is_empty() {
            out.push_str("\n  Retention   Retries later than it   Per day\n");
            for b in &self.retries_beyond {
                out.push_str(&format!(
                    "  {:<11} {:>21} {:>9}\n",
                    b.retention,
                    human_count(b.retries),
                    human_count(b.per_day)
                ));
            }
        }
        out
    }
}

/// Writes request-log rows as Parquet, CSV or NDJSON, by the file's extension, with the
/// columns `fit` reads by default.
pub fn write_log(path: &Path, rows: &[LogRow]) -> Result<(), FitError> {
    let err = |e: &dyn std::fmt::Display| file_err(path, e.to_string());
    let fmt = kind(path)?;
    if fmt == "ndjson" {
        let mut text = String::new();
        for r in rows {
            text.push_str(&serde_json::to_string(r).map_err(|e| err(&e))?);
            text.push('\n');
        }
        return std::fs::write(path, text).map_err(|e| err(&e));
    }
    write_table(path, fmt, rows)
}

/// CSV and Parquet logs, through polars.
#[cfg(feature = "tables")]
fn write_table(path: &Path, fmt: &str, rows: &[LogRow]) -> Result<(), FitError> {
    use polars::df;
    use polars_io::prelude::{CsvWriter, ParquetWriter, SerWriter as _};
    let err = |e: &dyn std::fmt::Display| file_err(path, e.to_string());
    let mut frame = df!(
        "time" => rows.iter().map(|r| r.time).collect::<Vec<_>>(),
        "caller" => rows.iter().map(|r| r.caller.clone()).collect::<Vec<_>>(),
        "idempotency_key" => rows.iter().map(|r| r.idempotency_key.clone()).collect::<Vec<_>>(),
        "status" => rows.iter().map(|r| u32::from(r.status)).collect::<Vec<_>>(),
        "response_bytes" => rows.iter().map(|r| r.response_bytes).collect::<Vec<_>>(),
        "replayed" => rows.iter().map(|r| r.replayed).collect::<Vec<_>>(),
        "weight" => rows.iter().map(|r| r.weight).collect::<Vec<_>>(),
    )
    .map_err(|e| err(&e))?;
    let file = std::fs::File::create(path).map_err(|e| err(&e))?;
    if fmt == "csv" {
        CsvWriter::new(file).finish(&mut frame).map_err(|e| err(&e))
    } else {
        ParquetWriter::new(file)
            .finish(&mut frame)
            .map(|_| ())
            .map_err(|e| err(&e))
    }
}

#[cfg(not(feature = "tables"))]
fn write_table(path: &Path, _fmt: &str, _rows: &[LogRow]) -> Result<(), FitError> {
    Err(file_err(
        path,
        "this build writes NDJSON logs only (the `tables` feature is off)",
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unweighted_share_has_the_binomial_interval() {
        let e = share((100.0, 100.0), (900.0, 900.0)).unwrap();
        assert!((e.estimate - 0.1).abs() < 1e-12);
        let half = Z95 * (0.1f64 * 0.9 / 1000.0).sqrt();
        assert!((e.ci95_high - 0.1 - half).abs() < 1e-12);
    }

    #[test]
    fn a_histogram_keeps_the_mean() {
        let samples: Vec<(f64, f64)> = (1..=1000).map(|i| (f64::from(i), 1.0)).collect();
        let f = size_fit(samples).unwrap();
        assert!((f.mean_bytes - 500.5).abs() < 1e-9);
        assert!((f.dist.mean_bytes() - 500.5).abs() < 0.1);
        assert_eq!(f.median_bytes, 500.0);
        let fixed = size_fit(vec![(36.0, 1.0), (36.0, 2.0)]).unwrap();
        assert_eq!(fixed.dist, SizeDist::Fixed { bytes: 36.0 });
    }
}
