//! The simulator's tables as polars DataFrames, written as CSV and Parquet.
//!
//! This is the only module that uses polars: it keeps polars' API churn in one place and lets
//! the rest of the crate speak plain Rust structs. CSV is for people and spreadsheets, Parquet
//! for notebooks that want typed columns.
//!
//! Without the `tables` cargo feature (the fuzz crate's build) [`write_all`] refuses with
//! [`TableError::Disabled`] instead, so polars is not compiled at all.

use crate::sim::replay::SimReport;
#[cfg(feature = "tables")]
use polars::df;
#[cfg(feature = "tables")]
use polars::prelude::{DataFrame, PolarsError};
#[cfg(feature = "tables")]
use polars_io::prelude::{CsvWriter, ParquetWriter, SerWriter};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum TableError {
    #[cfg(feature = "tables")]
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[cfg(feature = "tables")]
    #[error("{path}: {source}")]
    Polars {
        path: PathBuf,
        #[source]
        source: PolarsError,
    },
    #[cfg(not(feature = "tables"))]
    #[error("{}: this idemcalc was built without the `tables` feature, so it writes no tables", path.display())]
    Disabled { path: PathBuf },
}

/// Without polars there is nothing to write the tables with.
#[cfg(not(feature = "tables"))]
pub fn write_all(dir: &Path, _prefix: &str, _r: &SimReport) -> Result<Vec<PathBuf>, TableError> {
    Err(TableError::Disabled {
        path: dir.to_path_buf(),
    })
}

#[cfg(feature = "tables")]
/// The time series of keys in the store.
pub fn series(r: &SimReport) -> Result<DataFrame, PolarsError> {
    df!(
        "t_s" => r.series.iter().map(|p| p.t_s).collect::<Vec<_>>(),
        "keys_estimated" => r.series.iter().map(|p| p.keys_estimated).collect::<Vec<_>>(),
        "keys_replayed" => r.series.iter().map(|p| p.keys_replayed).collect::<Vec<_>>(),
    )
}

#[cfg(feature = "tables")]
/// Responses by status, outcome and code.
pub fn outcomes(r: &SimReport) -> Result<DataFrame, PolarsError> {
    df!(
        "status" => r.outcomes.iter().map(|o| u32::from(o.status)).collect::<Vec<_>>(),
        "outcome" => r.outcomes.iter().map(|o| format!("{:?}", o.outcome)).collect::<Vec<_>>(),
        "code" => r.outcomes.iter().map(|o| o.code.clone().unwrap_or_default()).collect::<Vec<_>>(),
        "replayed" => r.outcomes.iter().map(|o| o.replayed).collect::<Vec<_>>(),
        "per_day" => r.outcomes.iter().map(|o| o.per_day).collect::<Vec<_>>(),
    )
}

#[cfg(feature = "tables")]
/// Every headline figure with its interval and the model's value.
pub fn figures(r: &SimReport) -> Result<DataFrame, PolarsError> {
    let rows = [
        ("bytes_per_record_measured", r.bytes_per_record_measured),
        ("store_records_steady", r.store_records_steady),
        ("store_bytes_steady", r.store_bytes_steady),
        ("timed_out_per_day", r.timed_out_per_day),
        ("timed_out_attempts_per_day", r.timed_out_attempts_per_day),
        ("late_after_purge_per_day", r.late_after_purge_per_day),
        ("duplicate_labels_per_day", r.duplicate_labels_per_day),
        ("duplicate_cost_per_day", r.duplicate_cost_per_day),
        ("unlabelled_per_day", r.unlabelled_per_day),
    ];
    df!(
        "figure" => rows.iter().map(|(n, _)| n.to_string()).collect::<Vec<_>>(),
        "estimate" => rows.iter().map(|(_, f)| f.estimate).collect::<Vec<_>>(),
        "ci95_low" => rows.iter().map(|(_, f)| f.ci95_low).collect::<Vec<_>>(),
        "ci95_high" => rows.iter().map(|(_, f)| f.ci95_high).collect::<Vec<_>>(),
        "analytic" => rows.iter().map(|(_, f)| f.analytic).collect::<Vec<_>>(),
    )
}

#[cfg(feature = "tables")]
fn write_both(dir: &Path, stem: &str, mut frame: DataFrame) -> Result<Vec<PathBuf>, TableError> {
    let csv = dir.join(format!("{stem}.csv"));
    let parquet = dir.join(format!("{stem}.parquet"));
    write_one(&csv, |f| CsvWriter::new(f).finish(&mut frame))?;
    write_one(&parquet, |f| {
        ParquetWriter::new(f).finish(&mut frame).map(drop)
    })?;
    Ok(vec![csv, parquet])
}

/// One table file, through `crate::output` (a temporary file renamed over the old one; never
/// through a symbolic link), keeping polars' error as polars'.
#[cfg(feature = "tables")]
fn write_one(
    path: &Path,
    write: impl FnOnce(&mut std::fs::File) -> Result<(), PolarsError>,
) -> Result<(), TableError> {
    let mut polars = None;
    let written = crate::output::write_with(path, |f| {
        write(f).map_err(|e| {
            polars = Some(e);
            std::io::Error::other("polars could not write the table")
        })
    });
    match (written, polars) {
        (_, Some(source)) => Err(TableError::Polars {
            path: path.to_path_buf(),
            source,
        }),
        (Err(source), None) => Err(TableError::Io {
            path: path.to_path_buf(),
            source,
        }),
        (Ok(()), None) => Ok(()),
    }
}

/// The header of every `figures.csv` [`write_all`] writes.
const FIGURES_HEADER: &[u8] = b"figure,estimate,ci95_low,ci95_high,analytic\n";

/// Whether `dir` holds tables [`write_all`] wrote, so `simulate --out` may write into it
/// again without `--force`: a `figures.csv` (or `<prefix>figures.csv`) that begins with the
/// figures table's header.
pub fn is_tables_dir(dir: &Path) -> bool {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return false;
    };
    entries.flatten().any(|e| {
        e.file_name().to_string_lossy().ends_with("figures.csv")
            && crate::output::head(&e.path(), FIGURES_HEADER.len() as u64) == FIGURES_HEADER
    })
}

#[cfg(feature = "tables")]
/// Writes `<prefix>series`, `<prefix>outcomes` and `<prefix>figures` as CSV and Parquet into
/// `dir` (created if needed); returns the files written.
pub fn write_all(dir: &Path, prefix: &str, r: &SimReport) -> Result<Vec<PathBuf>, TableError> {
    // The report's `tables/` is not checked by `crate::output::check` as its `--out` is: a link
    // planted there would send the tables wherever it points.
    if std::fs::symlink_metadata(dir).is_ok_and(|m| m.file_type().is_symlink()) {
        return Err(TableError::Io {
            path: dir.to_path_buf(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "is a symbolic link; idemcalc does not write through links",
            ),
        });
    }
    std::fs::create_dir_all(dir).map_err(|source| TableError::Io {
        path: dir.to_path_buf(),
        source,
    })?;
    let pl = |source| TableError::Polars {
        path: dir.to_path_buf(),
        source,
    };
    let mut written = write_both(dir, &format!("{prefix}series"), series(r).map_err(pl)?)?;
    written.extend(write_both(
        dir,
        &format!("{prefix}outcomes"),
        outcomes(r).map_err(pl)?,
    )?);
    written.extend(write_both(
        dir,
        &format!("{prefix}figures"),
        figures(r).map_err(pl)?,
    )?);
    Ok(written)
}
