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
