//! Reading request logs: CSV and Parquet through polars, NDJSON through serde_json, each row
//! into a compact [`Req`], with the rows that cannot be read counted in [`BadRows`].

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};

#[cfg(feature = "tables")]
use polars::prelude::{DataFrame, DataType, Series, TimeUnit as PlTimeUnit};
use serde::Serialize;

use super::aggregates::MAX_TIME_S;
use super::request::Req;
use super::spill::{SPILL_ROWS, Spill};
use super::{FitError, FitOptions, file_err};
use crate::payload::fnv64;

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
    fn name(self) -> &'static str {
        match self {
            TimeUnit::S => "seconds",
            TimeUnit::Ms => "milliseconds",
            TimeUnit::Us => "microseconds",
            TimeUnit::Ns => "nanoseconds",
        }
    }

    pub(super) fn to_s(self) -> f64 {
        match self {
            TimeUnit::S => 1.0,
            TimeUnit::Ms => 1e-3,
            TimeUnit::Us => 1e-6,
            TimeUnit::Ns => 1e-9,
        }
    }
}

/// What the logs held: the usable requests, the rows left out, and the callers' names.
pub(super) struct Log {
    /// The requests in memory, or (for a log larger than [`SPILL_ROWS`]) none: they are all in
    /// `spill`'s partitions.
    pub(super) reqs: Vec<Req>,
    pub(super) spill: Option<Spill>,
    pub(super) bad: BadRows,
    /// Rows read, bad ones included.
    pub(super) rows: u64,
    /// Indexed by [`Req::caller`].
    pub(super) caller_names: Vec<String>,
    pub(super) warnings: Vec<String>,
    pub(super) times: NumericTimes,
}

/// The largest weight a row may carry (one sampled row standing for a trillion requests): a
/// weight near `f32::MAX` would overflow the tallies to infinity.
const MAX_WEIGHT: f64 = 1e12;

/// Reads every log, each with the reader its extension names. Each must be a regular file (a
/// FIFO would block, a device never end) and named once: the same file under two names would
/// count every request twice.
pub(super) fn read_logs(paths: &[PathBuf], options: &FitOptions) -> Result<Log, FitError> {
    let mut seen: Vec<(&Path, std::fs::Metadata)> = Vec::new();
    for path in paths {
        kind(path)?;
        let meta = crate::input::check_regular(path).map_err(|e| file_err(path, e.to_string()))?;
        if let Some((first, _)) = seen.iter().find(|(_, m)| crate::input::same_file(m, &meta)) {
            return Err(file_err(
                path,
                format!(
                    "is the same file as {}; give each log once (its requests would be counted twice)",
                    first.display()
                ),
            ));
        }
        seen.push((path, meta));
    }
    let mut reader = Reader::new(options);
    reader.input_bytes = seen.iter().map(|(_, m)| m.len()).sum();
    for path in paths {
        match kind(path)? {
            "csv" => reader.read_csv(path)?,
            "parquet" => reader.read_parquet(path)?,
            _ => reader.read_ndjson(path)?,
        }
    }
    reader.spill_if_large(true)?;
    let Reader {
        reqs,
        spill,
        times,
        bad,
        rows,
        caller_names,
        warnings,
        ..
    } = reader;
    Ok(Log {
        reqs,
        spill,
        times,
        bad,
        rows,
        caller_names,
        warnings,
    })
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

/// Bytes of CSV parsed at once: about 850 k rows of a typical log.
#[cfg(feature = "tables")]
const CSV_CHUNK_BYTES: usize = 128 << 20;

/// Rows of Parquet read at once.
#[cfg(feature = "tables")]
const PARQUET_CHUNK_ROWS: usize = 1 << 20;

/// Where each CSV record in `buf` ends (just past its newline), skipping newlines inside
/// quoted fields: a quote toggles "inside", and an escaped quote (`""`) toggles it twice.
#[cfg(feature = "tables")]
fn record_ends(buf: &[u8]) -> impl Iterator<Item = usize> + '_ {
    let mut quoted = false;
    memchr::memchr2_iter(b'"', b'\n', buf).filter_map(move |i| {
        if buf[i] == b'"' {
            quoted = !quoted;
            None
        } else {
            (!quoted).then_some(i + 1)
        }
    })
}

/// The byte-order mark some tools put at the start of a UTF-8 file.
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

#[cfg(feature = "tables")]
/// A CSV header's names, unquoted (`"a""b"` is `a"b`), without the line end.
fn csv_header_names(header: &[u8]) -> Vec<String> {
    let line = header.strip_suffix(b"\n").unwrap_or(header);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = String::from_utf8_lossy(line);
    let (mut names, mut name, mut quoted) = (Vec::new(), String::new(), false);
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '"' if quoted && chars.peek() == Some(&'"') => {
                name.push('"');
                chars.next();
            }
            '"' => quoted = !quoted,
            ',' if !quoted => names.push(std::mem::take(&mut name)),
            c => name.push(c),
        }
    }
    names.push(name);
    names
}

#[cfg(feature = "tables")]
/// A CSV header is UTF-8 and names each column once: polars renames a second `time` and the
/// fit then read the wrong one (and said every key's first request had the same time).
fn check_csv_header(path: &Path, header: &[u8]) -> Result<(), FitError> {
    if let Err(e) = std::str::from_utf8(header) {
        let at = e.valid_up_to();
        return Err(file_err(
            path,
            format!(
                "the header (line 1, byte {at}): byte 0x{:02X} is not UTF-8 text; save the log as UTF-8",
                header[at]
            ),
        ));
    }
    let names = csv_header_names(header);
    for (i, name) in names.iter().enumerate() {
        if names[..i].contains(name) {
            let shown: String = name.escape_debug().take(100).collect();
            return Err(file_err(
                path,
                format!(
                    "column `{shown}` appears twice in the header (columns {} and {}); rename one",
                    names.iter().position(|n| n == name).unwrap_or(0) + 1,
                    i + 1
                ),
            ));
        }
    }
    Ok(())
}

/// One NDJSON row's object, refusing a key given twice (serde_json keeps the last silently,
/// so `{"status": 500, "status": 201}` would read as answered).
struct UniqueKeys(serde_json::Map<String, serde_json::Value>);

impl<'de> serde::Deserialize<'de> for UniqueKeys {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct Visit;
        impl<'de> serde::de::Visitor<'de> for Visit {
            type Value = UniqueKeys;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> Result<UniqueKeys, A::Error> {
                let mut out = serde_json::Map::new();
                while let Some(key) = map.next_key::<String>()? {
                    if out.contains_key(&key) {
                        let shown: String = key.escape_debug().take(100).collect();
                        return Err(serde::de::Error::custom(format!(
                            "{DUPLICATE_KEY}`{shown}`: it appears twice in the row"
                        )));
                    }
                    let value = map.next_value()?;
                    out.insert(key, value);
                }
                Ok(UniqueKeys(out))
            }
        }
        d.deserialize_map(Visit)
    }
}

/// How [`UniqueKeys`] marks its own error among serde_json's.
const DUPLICATE_KEY: &str = "duplicate key ";

/// Reads rows into [`Req`]s, interning callers.
struct Reader<'o> {
    options: &'o FitOptions,
    callers: HashMap<String, u32>,
    caller_names: Vec<String>,
    reqs: Vec<Req>,
    bad: BadRows,
    rows: u64,
    warnings: Vec<String>,
    /// The file being read has no status column: its calls were all answered.
    status_absent: bool,
    /// The file's time column is a typed timestamp or date, already read as seconds since
    /// 1970: `--time-unit` does not apply to it.
    time_in_seconds: bool,
    spill: Option<Spill>,
    times: NumericTimes,
    /// The size of every log file, which sizes the spill's partitions.
    input_bytes: u64,
}

/// What the numeric times looked like, to tell when a unit was likely wrong.
#[derive(Debug, Default, Clone, Copy)]
pub(super) struct NumericTimes {
    /// Times read as plain numbers (not RFC 3339, not a typed timestamp).
    pub(super) numbers: u64,
    /// Some had a fractional part.
    pub(super) fractional: bool,
}

impl NumericTimes {
    /// A warning when whole-number times read as seconds look like milliseconds or finer:
    /// not epoch seconds (they start before 2001) yet spanning more than a week. A log of
    /// relative milliseconds covering 40 minutes otherwise reads as 28 days at a thousandth
    /// of the rate, without a word.
    pub(super) fn unit_warning(&self, unit: TimeUnit, first_s: f64, span_s: f64) -> Option<String> {
        let week = 7.0 * 86_400.0;
        // The other way round: seconds since 1970 (years 2000 to 2100) read in a finer unit.
        let raw_first = first_s / unit.to_s();
        if unit != TimeUnit::S && self.numbers > 0 && (9.5e8..4.1e9).contains(&raw_first) {
            return Some(format!(
                "the times look like seconds since 1970 (the first is {raw_first:.0}), but --time-unit reads them as {}; leave --time-unit out if they are seconds",
                unit.name()
            ));
        }
        (unit == TimeUnit::S
            && self.numbers > 0
            && !self.fractional
            && first_s.abs() < 1e9
            && span_s > week)
            .then(|| {
                format!(
                    "the times are whole numbers that, read as seconds, span {}; if they are milliseconds (or microseconds, nanoseconds), give --time-unit ms (us, ns)",
                    crate::format::approx_duration(span_s)
                )
            })
    }
}

/// The status a row without one is given when its log has no status column: answered (a 2xx).
const ANSWERED: u16 = 200;

impl<'o> Reader<'o> {
    fn new(options: &'o FitOptions) -> Self {
        Reader {
            options,
            callers: HashMap::new(),
            caller_names: Vec::new(),
            reqs: Vec::new(),
            bad: BadRows::default(),
            rows: 0,
            warnings: Vec::new(),
            status_absent: false,
            time_in_seconds: false,
            spill: None,
            times: NumericTimes::default(),
            input_bytes: 0,
        }
    }

    /// Moves the requests read so far to disk once there are too many to hold (or, at the
    /// end, if the log has spilled before), so memory holds one chunk of a large log.
    fn spill_if_large(&mut self, at_end: bool) -> Result<(), FitError> {
        let limit = self.options.max_rows_in_memory.unwrap_or(SPILL_ROWS);
        if self.spill.is_none() && (at_end || self.reqs.len() < limit) {
            return Ok(());
        }
        let spill = match &mut self.spill {
            Some(s) => s,
            None => self.spill.insert(Spill::new(self.input_bytes)?),
        };
        spill.write(&self.reqs)?;
        self.reqs.clear();
        self.reqs.shrink_to(1 << 20);
        Ok(())
    }

    /// Checks a file's column names: every missing required column is an error naming all of
    /// them; the rest become warnings, each naming the file.
    fn columns(&mut self, path: &Path, found: &[String]) -> Result<(), FitError> {
        let report = super::columns::check(found, &self.options.columns);
        if let Some(message) = report.missing_message(found) {
            return Err(file_err(path, message));
        }
        self.status_absent = report.status_absent;
        let name = path.display().to_string();
        self.warnings.extend(
            report
                .warnings
                .into_iter()
                .map(|w| format!("{}: {w}", name.escape_debug())),
        );
        Ok(())
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
                Ok(Some(v)) if self.time_in_seconds => v,
                Ok(Some(v)) => {
                    self.times.numbers += 1;
                    self.times.fractional |= v.fract() != 0.0;
                    v * self.options.time_unit.to_s()
                }
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
        if time_s.abs() > MAX_TIME_S {
            return self.bad.add(
                path,
                index,
                "time: more than 3,000 years from 1970 (is --time-unit right?)",
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
            Ok(None) if self.status_absent => ANSWERED,
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
            Ok(Some(v)) if v > 0.0 && v <= MAX_WEIGHT => v,
            _ => {
                return self
                    .bad
                    .add(path, index, "weight: not a number above 0 and at most 1e12");
            }
        };
        let caller_id = self.caller_id(&caller_text);
        self.reqs.push(Req {
            key: key_hash(&caller_text, &key_text),
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
    /// One frame of a file: `offset` data rows came before it, and the first frame's columns
    /// are checked (every frame of a file has the same).
    fn read_frame(&mut self, path: &Path, df: &DataFrame, offset: usize) -> Result<(), FitError> {
        let c = &self.options.columns;
        let names = c.all();
        let found: Vec<String> = df
            .get_column_names()
            .iter()
            .map(|n| n.to_string())
            .collect();
        if offset == 0 {
            self.columns(path, &found)?;
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
                    // What pyarrow, polars, Spark and DuckDB write for a time: seconds since 1970.
                    DataType::Datetime(unit, _) => {
                        let per_s = match unit {
                            PlTimeUnit::Milliseconds => 1e3,
                            PlTimeUnit::Microseconds => 1e6,
                            PlTimeUnit::Nanoseconds => 1e9,
                        };
                        &s.cast(&DataType::Int64)?.cast(&DataType::Float64)? / per_s
                    }
                    DataType::Date => {
                        &s.cast(&DataType::Int32)?.cast(&DataType::Float64)? * 86_400.0
                    }
                    DataType::String | DataType::Boolean | DataType::Float64 => s,
                    d if d.is_primitive_numeric() => s.cast(&DataType::Float64)?,
                    _ => s.cast(&DataType::String)?,
                };
                Ok(Some(s))
            })
            .collect::<Result<_, polars::prelude::PolarsError>>()
            .map_err(|e| file_err(path, e.to_string()))?;
        self.time_in_seconds = df
            .column(&c.time)
            .is_ok_and(|t| matches!(t.dtype(), DataType::Datetime(..) | DataType::Date));
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
            self.row(path, offset + index, cells);
        }
        Ok(())
    }

    /// A CSV file a chunk of records at a time, each parsed by polars with the header in
    /// front, so memory holds one chunk whatever the file's size. Chunks end at a newline
    /// outside quotes.
    #[cfg(feature = "tables")]
    fn read_csv(&mut self, path: &Path) -> Result<(), FitError> {
        use polars_io::prelude::{CsvReadOptions, SerReader as _};
        use std::io::Read as _;
        let io = |e: std::io::Error| file_err(path, e.to_string());
        let mut file = crate::input::open(path).map_err(io)?;
        let mut buf: Vec<u8> = Vec::new();
        let mut header: Option<Vec<u8>> = None;
        let mut want = CSV_CHUNK_BYTES;
        let (mut eof, mut offset) = (false, 0usize);
        // Bytes of the file before `buf`, for the position of a byte that is not UTF-8.
        let mut consumed = 0usize;
        loop {
            while !eof && buf.len() < want {
                let start = buf.len();
                buf.resize(want, 0);
                let n = file.read(&mut buf[start..]).map_err(io)?;
                buf.truncate(start + n);
                eof = n == 0;
            }
            let header = match &header {
                Some(h) => h,
                None => {
                    let end = match record_ends(&buf).next() {
                        Some(end) => end,
                        None if eof => buf.len(),
                        None => {
                            want *= 2;
                            continue;
                        }
                    };
                    let mut h: Vec<u8> = buf.drain(..end).collect();
                    consumed += h.len();
                    // A UTF-8 byte-order mark (Excel's "CSV UTF-8") is not part of the first name.
                    if h.starts_with(UTF8_BOM) {
                        h.drain(..UTF8_BOM.len());
                    }
                    check_csv_header(path, &h)?;
                    header.insert(h)
                }
            };
            let cut = if eof {
                buf.len()
            } else {
                match record_ends(&buf).last() {
                    Some(cut) => cut,
                    // One record longer than the chunk: read more.
                    None => {
                        want *= 2;
                        continue;
                    }
                }
            };
            // polars says only "invalid utf-8 sequence": say which row and byte.
            if let Err(e) = std::str::from_utf8(&buf[..cut]) {
                let at = e.valid_up_to();
                let row = offset + record_ends(&buf[..at]).count() + 1;
                return Err(file_err(
                    path,
                    format!(
                        "row {row} (byte {} of the file): byte 0x{:02X} is not UTF-8 text; save the log as UTF-8 (a Latin-1 or Windows-1252 export gives this)",
                        consumed + at,
                        buf[at]
                    ),
                ));
            }
            let mut chunk = Vec::with_capacity(header.len() + cut);
            chunk.extend_from_slice(header);
            chunk.extend_from_slice(&buf[..cut]);
            buf.drain(..cut);
            consumed += cut;
            // Every column as text: a malformed cell becomes one bad row instead of failing
            // the whole file on a type polars inferred from the first rows.
            let df = polars_read(path, "CSV", || {
                CsvReadOptions::default()
                    .with_has_header(true)
                    .with_infer_schema_length(Some(0))
                    .into_reader_with_file_handle(std::io::Cursor::new(chunk))
                    .finish()
                    .map_err(|e| file_err(path, csv_message(&e.to_string())))
            })?;
            self.read_frame(path, &df, offset)?;
            offset += df.height();
            self.spill_if_large(false)?;
            if eof && buf.is_empty() {
                return Ok(());
            }
        }
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

    /// A Parquet file [`PARQUET_CHUNK_ROWS`] rows at a time, only the columns `fit` reads.
    #[cfg(feature = "tables")]
    fn read_parquet(&mut self, path: &Path) -> Result<(), FitError> {
        use polars_io::prelude::{ParquetReader, SerReader as _};
        let open = || {
            std::fs::File::open(path)
                .map(ParquetReader::new)
                .map_err(|e| file_err(path, e.to_string()))
        };
        let mut reader = open()?;
        let (schema, total) = polars_read(path, "Parquet", || {
            let schema = reader.schema().map_err(|e| file_err(path, e.to_string()))?;
            let total = reader
                .num_rows()
                .map_err(|e| file_err(path, e.to_string()))?;
            Ok((schema, total))
        })?;
        let c = &self.options.columns;
        let wanted: Vec<String> = c
            .all()
            .into_iter()
            .filter(|n| schema.contains(n))
            .cloned()
            .collect();
        let mut offset = 0;
        loop {
            let reader = open()?
                .with_columns(Some(wanted.clone()))
                .with_slice(Some((offset, PARQUET_CHUNK_ROWS)));
            let df = polars_read(path, "Parquet", || {
                reader.finish().map_err(|e| file_err(path, e.to_string()))
            })?;
            self.read_frame(path, &df, offset)?;
            offset += df.height();
            self.spill_if_large(false)?;
            if df.height() == 0 || offset >= total {
                return Ok(());
            }
        }
    }

    fn read_ndjson(&mut self, path: &Path) -> Result<(), FitError> {
        let file = crate::input::open(path).map_err(|e| file_err(path, e.to_string()))?;
        let columns = self.options.columns.clone();
        let names = columns.all();
        self.time_in_seconds = false;
        let mut reader = std::io::BufReader::new(file);
        let mut bytes = Vec::new();
        // Every field name seen, for the column check at the end (bounded: a log whose rows
        // all name different fields is not worth remembering them all).
        let mut seen: Vec<String> = Vec::new();
        for index in 0.. {
            let more = crate::input::next_line(&mut reader, &mut bytes)
                .map_err(|e| file_err(path, format!("line {}: {e}", index + 1)))?;
            if !more {
                break;
            }
            if index == 0 && bytes.starts_with(UTF8_BOM) {
                bytes.drain(..UTF8_BOM.len());
            }
            if bytes.trim_ascii().is_empty() {
                continue;
            }
            let obj = match serde_json::from_slice::<UniqueKeys>(&bytes) {
                Ok(UniqueKeys(obj)) => obj,
                Err(e) if e.is_data() && e.to_string().starts_with(DUPLICATE_KEY) => {
                    let why = e.to_string();
                    let why = why.split(" at line ").next().unwrap_or(&why);
                    return Err(file_err(
                        path,
                        format!("row {}: {why}; a row names each field once", index + 1),
                    ));
                }
                Err(_) => {
                    self.rows += 1;
                    self.bad.add(path, index, "not a JSON object");
                    continue;
                }
            };
            for k in obj.keys() {
                if seen.len() < 1000 && !seen.contains(k) {
                    seen.push(k.clone());
                }
            }
            // A row without the status field was answered, as a log without the column.
            self.status_absent = !obj.contains_key(names[3].as_str());
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
            if index % (1 << 20) == 0 {
                self.spill_if_large(false)?;
            }
        }
        self.columns(path, &seen)
    }
}

#[cfg(feature = "tables")]
/// polars' CSV error without its advice, which names Python options (`truncate_ragged_lines`,
/// `infer_schema_length`) a user of `fit` cannot set; with what to do instead.
pub(super) fn csv_message(polars: &str) -> String {
    let first = polars.split("\n\n").next().unwrap_or(polars).trim();
    let first: String = first.chars().take(300).collect();
    if polars.contains("truncate_ragged_lines") {
        format!("{first}: a row has more fields than the header; check the delimiter and quoting")
    } else if polars.contains("infer_schema_length") || polars.contains("could not parse") {
        format!("{first}: check the file's quoting (an unclosed quote runs to the end of the file)")
    } else {
        first
    }
}

/// Guarded polars reads under way: while one is, the panic hook says nothing (the panic
/// becomes the read's error instead).
#[cfg(feature = "tables")]
static QUIET_PANICS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// Runs one polars read of `path` (a `format` file), turning a panic inside polars into an
/// error naming the file. A Parquet file with one bit flipped made polars panic (an index out
/// of bounds, a slice too short), and the user saw a backtrace note and exit 101 for what is
/// bad input: now it is "FILE: not a Parquet file polars can read …", exit 2. polars' own
/// worker threads hand their panic back to the caller (rayon resumes it there), so this one
/// `catch_unwind` sees them too. The default hook's message is held back while a guarded read
/// runs (a hook installed once, passing every other panic to the hook it replaced), so the
/// user reads one error, not a panic message and then the error. The release profile unwinds
/// (`Cargo.toml` sets no `panic = "abort"`), which this relies on.
#[cfg(feature = "tables")]
pub(super) fn polars_read<T>(
    path: &Path,
    format: &str,
    read: impl FnOnce() -> Result<T, FitError>,
) -> Result<T, FitError> {
    use std::sync::atomic::Ordering;
    static HOOK: std::sync::Once = std::sync::Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if QUIET_PANICS.load(Ordering::SeqCst) == 0 {
                previous(info);
            }
        }));
    });
    QUIET_PANICS.fetch_add(1, Ordering::SeqCst);
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(read));
    QUIET_PANICS.fetch_sub(1, Ordering::SeqCst);
    result.unwrap_or_else(|payload| {
        let why = payload
            .downcast_ref::<&str>()
            .map(|s| (*s).to_string())
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "no message".to_string());
        let why: String = why.chars().take(200).collect();
        Err(file_err(
            path,
            format!(
                "not a {format} file polars can read (it failed inside polars: {why}); the file \
                 is damaged or not {format}: write it again or give another"
            ),
        ))
    })
}

/// A (caller, key) pair's identity: a byte that UTF-8 never holds between the two, so caller
/// `ab` with key `c` is not caller `a` with key `bc`.
fn key_hash(caller: &str, key: &str) -> u64 {
    fnv64(&[caller.as_bytes(), &[0xff], key.as_bytes()])
}

/// Checks that a log file's extension is one `fit` reads and `simulate` writes.
pub fn log_kind(path: &Path) -> Result<(), FitError> {
    kind(path).map(|_| ())
}

/// Which reader (and writer) a file needs, from its extension.
pub(super) fn kind(path: &Path) -> Result<&'static str, FitError> {
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

#[cfg(all(test, feature = "tables"))]
mod tests {
    use super::record_ends;

    #[test]
    fn records_end_at_newlines_outside_quotes() {
        let csv = b"a,b\n1,\"x\ny\"\n2,\"say \"\"hi\"\"\"\n3,z";
        let ends: Vec<usize> = record_ends(csv).collect();
        assert_eq!(ends, vec![4, 12, 27]);
        assert_eq!(&csv[12..27], b"2,\"say \"\"hi\"\"\"\n");
    }
}
