//! `idemcalc fit LOG…`: request logs in, a scenario file and a summary out.

use std::path::{Path, PathBuf};

use anyhow::Context as _;

use super::Format;
use crate::fit::{self, Columns, FitOptions, TimeUnit};
use crate::output::{Input, Kind, Target};

#[derive(Debug, clap::Args)]
pub struct FitArgs {
    /// Request logs: .csv, .parquet or .ndjson (.jsonl), one row per request (docs/fit.md).
    #[arg(
        required_unless_present_any = ["aggregates", "emit_sql"],
        conflicts_with_all = ["aggregates", "emit_sql"],
        value_name = "LOG"
    )]
    pub logs: Vec<PathBuf>,
    /// Print a query for DIALECT that computes what `fit` needs inside the warehouse holding
    /// the log (--table, or --from-file with duckdb); save its result and give it to
    /// --aggregates.
    #[arg(
        long,
        value_enum,
        value_name = "DIALECT",
        requires = "sql_source",
        conflicts_with = "aggregates"
    )]
    pub emit_sql: Option<fit::Dialect>,
    /// The table --emit-sql reads: NAME, SCHEMA.NAME or CATALOG.SCHEMA.NAME, each part bare
    /// (letters, digits, _) or quoted as the dialect quotes names (docs/fit.md).
    #[arg(long, value_name = "NAME", requires = "emit_sql", group = "sql_source")]
    pub table: Option<String>,
    /// The .csv, .parquet or .ndjson log DuckDB reads itself (--emit-sql duckdb only).
    #[arg(long, value_name = "PATH", requires = "emit_sql", group = "sql_source")]
    pub from_file: Option<PathBuf>,
    /// The table's columns (--emit-sql), comma-separated, e.g. as `SELECT * FROM t LIMIT 0`
    /// shows them: the optional columns among them are read. Without it the query reads only
    /// the optional columns named by their --*-column flag.
    #[arg(
        long,
        value_delimiter = ',',
        value_name = "NAME",
        requires = "emit_sql"
    )]
    pub columns: Option<Vec<String>>,
    /// Optional columns not to read (--emit-sql) even when named or listed, comma-separated.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        value_name = "COLUMN",
        requires = "emit_sql"
    )]
    pub without: Vec<fit::OptionalColumn>,
    /// Fit from the result of the --emit-sql query, saved as .csv or .parquet.
    #[arg(long, value_name = "RESULT")]
    pub aggregates: Option<PathBuf>,
    /// Write the fitted scenario here (e.g. my-system.toml); `idemcalc report` runs it as is.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Replace an existing --out file that `idemcalc fit` did not write (one it wrote, starting
    /// with its header comment, is replaced without it). An input log and a symbolic link are
    /// refused even so.
    #[arg(long)]
    pub force: bool,
    /// The scenario's name (default: the --out file's stem).
    #[arg(long)]
    pub name: Option<String>,
    /// Column with the time the request was sent: seconds (see --time-unit) or RFC 3339.
    #[arg(long, default_value = "time")]
    pub time_column: String,
    /// Unit of a numeric time column [default: s]. With --emit-sql, give it when the column
    /// holds epoch numbers; without it the column is read as a timestamp.
    #[arg(long, value_enum)]
    pub time_unit: Option<TimeUnit>,
    /// Column with the caller (tenant); absent means one caller [default: caller].
    #[arg(long, value_name = "NAME")]
    pub caller_column: Option<String>,
    /// Column with the idempotency key (its length is the key size).
    #[arg(long, default_value = "idempotency_key")]
    pub key_column: String,
    /// Column with the HTTP status the caller got; 0 or empty when it heard nothing in time
    /// [default: status].
    #[arg(long, value_name = "NAME")]
    pub status_column: Option<String>,
    /// Column with the response body's size, bytes [default: response_bytes].
    #[arg(long, value_name = "NAME")]
    pub response_bytes_column: Option<String>,
    /// Column saying whether the answer was a replay (Idempotent-Replayed); optional
    /// [default: replayed].
    #[arg(long, value_name = "NAME")]
    pub replayed_column: Option<String>,
    /// Column with how many requests a row stands for (sampled logs); optional, each row one
    /// request without it [default: weight].
    #[arg(long, value_name = "NAME")]
    pub weight_column: Option<String>,
    /// Requests held in memory before a large log is spilled to partitions in TMPDIR
    /// [default: 16777216, about 670 MB].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..))]
    pub max_rows_in_memory: Option<u64>,
    /// Output of the summary.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

pub fn run(args: &FitArgs) -> anyhow::Result<i32> {
    let defaults = Columns::default();
    let or = |named: &Option<String>, default: String| named.clone().unwrap_or(default);
    let columns = Columns {
        time: args.time_column.clone(),
        caller: or(&args.caller_column, defaults.caller),
        key: args.key_column.clone(),
        status: or(&args.status_column, defaults.status),
        response_bytes: or(&args.response_bytes_column, defaults.response_bytes),
        replayed: or(&args.replayed_column, defaults.replayed),
        weight: or(&args.weight_column, defaults.weight),
    };
    if let Some(dialect) = args.emit_sql {
        let source = match (&args.from_file, &args.table) {
            (Some(path), _) => fit::Source::File(path.clone()),
            (None, table) => fit::Source::Table(
                fit::TableName::parse(table.as_deref().unwrap_or_default(), dialect)
                    .map_err(anyhow::Error::msg)?,
            ),
        };
        use fit::OptionalColumn as C;
        let named: Vec<C> = [
            (C::Caller, &args.caller_column),
            (C::Status, &args.status_column),
            (C::ResponseBytes, &args.response_bytes_column),
            (C::Replayed, &args.replayed_column),
            (C::Weight, &args.weight_column),
        ]
        .into_iter()
        .filter(|(_, flag)| flag.is_some())
        .map(|(c, _)| c)
        .collect();
        let optional =
            fit::optional_columns(&columns, &named, args.columns.as_deref(), &args.without)
                .map_err(anyhow::Error::msg)?;
        let sql = fit::emit_sql(&fit::SqlOptions {
            dialect,
            source,
            columns,
            time_unit: args.time_unit,
            optional,
        })
        .map_err(anyhow::Error::msg)?;
        super::print(&sql)?;
        return Ok(0);
    }
    let options = FitOptions {
        columns,
        time_unit: args.time_unit.unwrap_or_default(),
        max_rows_in_memory: args.max_rows_in_memory.map(|n| n as usize),
    };
    // The scenario's name is checked before the fit, which may take minutes: a name from the
    // --out file's stem (`my system.toml`) that cannot name a scenario asks for --name.
    let name = args
        .out
        .as_deref()
        .map(|out| scenario_name(args, out))
        .transpose()?;
    if let Some(out) = &args.out {
        let mut inputs: Vec<Input> = args
            .logs
            .iter()
            .map(|path| Input { what: "LOG", path })
            .collect();
        if let Some(path) = &args.aggregates {
            inputs.push(Input {
                what: "--aggregates",
                path,
            });
        }
        let ours = |path: &Path| {
            crate::output::head(path, fit::SCENARIO_HEADER.len() as u64)
                == fit::SCENARIO_HEADER.as_bytes()
        };
        let target = Target {
            flag: "--out",
            path: out,
            kind: Kind::File,
            ours: &ours,
            mark: "a scenario `idemcalc fit` wrote starts with its header comment, `# Fitted by \
                   `idemcalc fit``",
        };
        crate::output::check(&target, args.force, &inputs)?;
    }
    let started = std::time::Instant::now();
    let f = match &args.aggregates {
        Some(result) => fit::fit_aggregates(result)?,
        None => fit::fit(&args.logs, &options)?,
    };
    let elapsed = started.elapsed();
    if let (Some(out), Some(name)) = (&args.out, &name) {
        let text = f.scenario_toml(name);
        // What `report` will do with it: refuse now rather than there.
        crate::scenario::Scenario::parse(out, &text)
            .context("the fitted scenario does not load (a bug in fit; please report it)")?;
        crate::output::write(out, text.as_bytes())
            .with_context(|| format!("--out {}: cannot write the scenario", out.display()))?;
    }
    match args.format {
        Format::Json => super::print(&(serde_json::to_string_pretty(&f)? + "\n"))?,
        Format::Table => {
            super::print(&f.summary())?;
            if let Some(out) = &args.out {
                super::print(&format!(
                    "\nWrote {} ({}).\n",
                    out.display(),
                    crate::format::approx_duration(elapsed.as_secs_f64())
                ))?;
            }
        }
    }
    Ok(0)
}

/// The fitted scenario's name: `--name`, or the `--out` file's stem; refused here, before the
/// fit, if it cannot name a scenario.
fn scenario_name(args: &FitArgs, out: &Path) -> anyhow::Result<String> {
    if let Some(n) = &args.name {
        return match crate::scenario::file::name_problem(n) {
            Some(why) => Err(anyhow::anyhow!("--name: {why}")),
            None => Ok(n.clone()),
        };
    }
    let stem = out.file_stem().map_or_else(
        || "fitted".to_string(),
        |s| s.to_string_lossy().into_owned(),
    );
    match crate::scenario::file::name_problem(&stem) {
        Some(why) => Err(anyhow::anyhow!(
            "--out {}: the scenario would be named after the file, {why}; give it a name with --name NAME",
            out.display()
        )),
        None => Ok(stem),
    }
}
