//! Writing request logs, what `simulate --request-log` does: the columns [`super::fit`] reads.

use std::path::Path;

use super::read::kind;
use super::{FitError, file_err};
use crate::sim::request_log::LogRow;

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
        return crate::output::write(path, text.as_bytes()).map_err(|e| err(&e));
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
    crate::output::write_with(path, |file| {
        if fmt == "csv" {
            CsvWriter::new(file)
                .finish(&mut frame)
                .map_err(std::io::Error::other)
        } else {
            ParquetWriter::new(file)
                .finish(&mut frame)
                .map(|_| ())
                .map_err(std::io::Error::other)
        }
    })
    .map_err(|e| err(&e))
}

/// The columns of every request log [`write_log`] writes, in order.
const LOG_COLUMNS: [&str; 7] = [
    "time",
    "caller",
    "idempotency_key",
    "status",
    "response_bytes",
    "replayed",
    "weight",
];

/// Whether `path` is a request log [`write_log`] wrote, so `simulate --request-log` may replace
/// it without `--force`: a CSV whose first line is exactly the log's header, an NDJSON file
/// whose first line is an object with exactly the log's fields, or a Parquet file
/// (`PAR1` at both ends) whose footer names every column of the log.
pub fn is_request_log(path: &Path) -> bool {
    use crate::output::{contains, head, tail};
    let first_line = |bytes: Vec<u8>| -> Vec<u8> {
        let end = memchr::memchr(b'\n', &bytes).unwrap_or(bytes.len());
        bytes[..end].to_vec()
    };
    match kind(path) {
        Ok("csv") => first_line(head(path, 4096)) == LOG_COLUMNS.join(",").as_bytes(),
        Ok("ndjson") => {
            let line = first_line(head(path, 4096));
            let Ok(serde_json::Value::Object(obj)) = serde_json::from_slice(&line) else {
                return false;
            };
            obj.len() == LOG_COLUMNS.len() && LOG_COLUMNS.iter().all(|c| obj.contains_key(*c))
        }
        Ok("parquet") => {
            let footer = tail(path, 64 * 1024);
            head(path, 4) == b"PAR1"
                && footer.ends_with(b"PAR1")
                && LOG_COLUMNS.iter().all(|c| contains(&footer, c.as_bytes()))
        }
        _ => false,
    }
}

#[cfg(not(feature = "tables"))]
fn write_table(path: &Path, _fmt: &str, _rows: &[LogRow]) -> Result<(), FitError> {
    Err(file_err(
        path,
        "this build writes NDJSON logs only (the `tables` feature is off)",
    ))
}
