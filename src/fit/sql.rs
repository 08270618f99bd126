//! `fit --emit-sql`: the query that computes a log's sufficient statistics
//! ([`super::Aggregates`]) where the log already lives, so a month of requests never leaves
//! the warehouse. One query shape for every dialect; only quoting, type names, the epoch of a
//! timestamp, a string's length in bytes and the spelling of a distinct union differ.
//!
//! The result is a small long table `(stat, label, at, n, w, w2)` that
//! [`super::Aggregates::from_rows`] turns back into statistics: its size depends on the number of
//! distinct key and response sizes, never on the number of rows.
//!
//! No text the user typed is spliced into the query: column names are always quoted with the
//! dialect's escape, the table is a [`TableName`] (identifiers only, parsed once) and a file
//! read by DuckDB ([`Source::File`]) is a string literal.

use std::path::{Path, PathBuf};

use super::Columns;
use super::aggregates::{DONE_WITHIN_S, IN_PROGRESS, fixed_thresholds};
use super::read::TimeUnit;

/// The SQL dialects `--emit-sql` writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Dialect {
    Postgres,
    Duckdb,
    /// Trino and Amazon Athena.
    Trino,
    Bigquery,
    /// Spark SQL (and Databricks).
    Spark,
}

/// A column of the log the query reads only when the table has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OptionalColumn {
    Caller,
    Status,
    ResponseBytes,
    Replayed,
    Weight,
}

impl OptionalColumn {
    pub const ALL: [OptionalColumn; 5] = [
        OptionalColumn::Caller,
        OptionalColumn::Status,
        OptionalColumn::ResponseBytes,
        OptionalColumn::Replayed,
        OptionalColumn::Weight,
    ];

    /// Its name in the table, as the `--*-column` flags set it.
    pub fn name(self, columns: &Columns) -> &str {
        match self {
            OptionalColumn::Caller => &columns.caller,
            OptionalColumn::Status => &columns.status,
            OptionalColumn::ResponseBytes => &columns.response_bytes,
            OptionalColumn::Replayed => &columns.replayed,
            OptionalColumn::Weight => &columns.weight,
        }
    }

    /// The flag that names it.
    pub fn flag(self) -> &'static str {
        match self {
            OptionalColumn::Caller => "--caller-column",
            OptionalColumn::Status => "--status-column",
            OptionalColumn::ResponseBytes => "--response-bytes-column",
            OptionalColumn::Replayed => "--replayed-column",
            OptionalColumn::Weight => "--weight-column",
        }
    }

    /// What the query assumes without it.
    fn without(self) -> &'static str {
        match self {
            OptionalColumn::Caller => "one caller",
            OptionalColumn::Status => "every request answered, so no timeouts",
            OptionalColumn::ResponseBytes => "no response sizes",
            OptionalColumn::Replayed => "no done fraction",
            OptionalColumn::Weight => "each row one request",
        }
    }
}

/// The optional columns the query reads: those named by their flag (`named`) and those in the
/// table's column list (`--columns`, `listed`), less `--without`. A table is not seen before
/// the query runs, so a column the user never named is not assumed to be there: a gateway log
/// has no `weight`, and a query reading it fails in the warehouse.
pub fn optional_columns(
    columns: &Columns,
    named: &[OptionalColumn],
    listed: Option<&[String]>,
    without: &[OptionalColumn],
) -> Result<Vec<OptionalColumn>, String> {
    if let Some(list) = listed {
        let has = |name: &str| list.iter().any(|c| c == name);
        for (name, flag) in [
            (&columns.time, "--time-column"),
            (&columns.key, "--key-column"),
        ] {
            if !has(name) {
                return Err(format!(
                    "--columns {}: no {name:?}, the column {flag} names (required)",
                    list.join(",")
                ));
            }
        }
        if let Some(c) = named.iter().find(|c| !has(c.name(columns))) {
            return Err(format!(
                "{} {}: not among --columns {}",
                c.flag(),
                c.name(columns),
                list.join(",")
            ));
        }
    }
    Ok(OptionalColumn::ALL
        .into_iter()
        .filter(|c| {
            named.contains(c) || listed.is_some_and(|l| l.iter().any(|n| n == c.name(columns)))
        })
        .filter(|c| !without.contains(c))
        .collect())
}

/// What the query needs to know about the table.
#[derive(Debug, Clone)]
pub struct SqlOptions {
    pub dialect: Dialect,
    /// Where the log is: a table (`--table`) or a file DuckDB reads (`--from-file`).
    pub source: Source,
    pub columns: Columns,
    /// `None`: the time column is a timestamp; otherwise it holds numbers in this unit.
    pub time_unit: Option<TimeUnit>,
    /// The optional columns the table has ([`optional_columns`]); the others are not read.
    pub optional: Vec<OptionalColumn>,
}

/// Where the query reads the log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// A table or view (`--table`).
    Table(TableName),
    /// A .csv, .parquet or .ndjson (.jsonl) file that DuckDB reads itself (`--from-file`;
    /// DuckDB only).
    File(PathBuf),
}

/// A table's name as the warehouse knows it: one to three dot-separated identifiers (`table`,
/// `schema.table`, `catalog.schema.table`, BigQuery's `project.dataset.table`). Only
/// [`TableName::parse`] makes one, so whatever it holds is a name, never SQL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableName {
    parts: Vec<Ident>,
}

/// One part of a table's name, unescaped; `quoted` when the user quoted it, so it is quoted
/// again (and keeps its case where the warehouse folds bare names).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Ident {
    name: String,
    quoted: bool,
}

impl TableName {
    /// Parses `--table` as `dialect` writes identifiers: each part bare (ASCII letters, digits
    /// and `_`, not starting with a digit; BigQuery's project part may hold `-`) or quoted in
    /// the dialect's own quotes (`"…"` with `""` inside for PostgreSQL, DuckDB and Trino;
    /// `` `…` `` with `` \` `` inside for BigQuery, with ` `` ` inside for Spark).
    pub fn parse(text: &str, dialect: Dialect) -> Result<TableName, String> {
        parse_parts(text, dialect)
            .and_then(|parts| check_parts(parts, dialect))
            .map_err(|why| {
                format!(
                    "--table {text:?}: {why}; give the table as NAME, SCHEMA.NAME or \
                     CATALOG.SCHEMA.NAME{}, each part made of letters, digits and _ (not \
                     starting with a digit) or quoted as {} (a file DuckDB reads goes to \
                     --from-file)",
                    if dialect == Dialect::Bigquery {
                        " (PROJECT.DATASET.TABLE, the project may hold -)"
                    } else {
                        ""
                    },
                    dialect.quoting_rule()
                )
            })
    }

    /// The name as `dialect` reads it: bare parts as typed, the others quoted.
    pub fn sql(&self, dialect: Dialect) -> String {
        self.parts
            .iter()
            .map(|p| {
                if p.quoted || p.name.contains('-') {
                    dialect.quote(&p.name)
                } else {
                    p.name.clone()
                }
            })
            .collect::<Vec<_>>()
            .join(".")
    }
}

/// Splits `text` into parts, unescaping quoted ones; a bare part is checked by
/// [`check_parts`], which knows how many parts there are.
fn parse_parts(text: &str, dialect: Dialect) -> Result<Vec<Ident>, String> {
    let open = dialect.quote_char();
    let mut parts = Vec::new();
    let mut chars = text.chars().peekable();
    loop {
        let mut name = String::new();
        let quoted = chars.peek() == Some(&open);
        if quoted {
            chars.next();
            loop {
                match chars.next() {
                    None => return Err(format!("the quote {open} is not closed")),
                    Some('\\') if dialect == Dialect::Bigquery => match chars.next() {
                        Some(c @ ('\\' | '`')) => name.push(c),
                        _ => return Err("inside `…` only \\` and \\\\ are escapes".into()),
                    },
                    Some(c) if c == open => {
                        if dialect != Dialect::Bigquery && chars.peek() == Some(&open) {
                            chars.next();
                            name.push(open);
                        } else {
                            break;
                        }
                    }
                    Some(c) if c.is_control() => {
                        return Err("a quoted name holds a control character".into());
                    }
                    Some(c) => name.push(c),
                }
            }
            if name.is_empty() {
                return Err("a quoted part is empty".into());
            }
        } else {
            while let Some(&c) = chars.peek() {
                if c == '.' {
                    break;
                }
                if !(c.is_ascii_alphanumeric() || c == '_' || c == '-') {
                    return Err(format!("{c:?} is not allowed in a bare name"));
                }
                name.push(c);
                chars.next();
            }
        }
        parts.push(Ident { name, quoted });
        match chars.next() {
            None => return Ok(parts),
            Some('.') => {}
            Some(c) => return Err(format!("{c:?} after a quoted part (expected . or the end)")),
        }
    }
}

/// The number of parts, and each bare part's spelling.
fn check_parts(parts: Vec<Ident>, dialect: Dialect) -> Result<TableName, String> {
    if parts.len() > 3 {
        return Err(format!("{} parts, at most 3", parts.len()));
    }
    for (i, p) in parts.iter().enumerate().filter(|(_, p)| !p.quoted) {
        let Some(first) = p.name.chars().next() else {
            return Err("an empty part".into());
        };
        if first.is_ascii_digit() {
            return Err(format!("{:?} starts with a digit", p.name));
        }
        let project = dialect == Dialect::Bigquery && i == 0 && parts.len() == 3;
        if p.name.contains('-') && !(project && first != '-' && !p.name.ends_with('-')) {
            return Err(format!("{:?} holds a - (quote it)", p.name));
        }
    }
    Ok(TableName { parts })
}

impl Dialect {
    /// A column's or a table part's name, quoted with the dialect's escape.
    fn quote(self, name: &str) -> String {
        match self {
            Dialect::Bigquery => format!("`{}`", name.replace('\\', "\\\\").replace('`', "\\`")),
            Dialect::Spark => format!("`{}`", name.replace('`', "``")),
            _ => format!("\"{}\"", name.replace('"', "\"\"")),
        }
    }

    fn quote_char(self) -> char {
        match self {
            Dialect::Bigquery | Dialect::Spark => '`',
            _ => '"',
        }
    }

    /// How a quoted identifier is written, for error messages.
    fn quoting_rule(self) -> &'static str {
        match self {
            Dialect::Bigquery => "`…` (\\` for a ` inside, \\\\ for a \\)",
            Dialect::Spark => "`…` (`` for a ` inside)",
            _ => "\"…\" (\"\" for a \" inside)",
        }
    }

    fn text(self) -> &'static str {
        match self {
            Dialect::Postgres => "TEXT",
            Dialect::Duckdb | Dialect::Trino => "VARCHAR",
            Dialect::Bigquery | Dialect::Spark => "STRING",
        }
    }

    fn double(self) -> &'static str {
        match self {
            Dialect::Postgres => "DOUBLE PRECISION",
            Dialect::Bigquery => "FLOAT64",
            _ => "DOUBLE",
        }
    }

    fn int(self) -> &'static str {
        match self {
            Dialect::Bigquery => "INT64",
            _ => "BIGINT",
        }
    }

    /// A union without duplicates: BigQuery has no bare `UNION`.
    fn union_distinct(self) -> &'static str {
        match self {
            Dialect::Bigquery => "UNION DISTINCT",
            _ => "UNION",
        }
    }

    /// Seconds since 1970 of a timestamp, as a double.
    fn epoch(self, col: &str) -> String {
        match self {
            Dialect::Postgres | Dialect::Duckdb => {
                format!("CAST(EXTRACT(EPOCH FROM {col}) AS {})", self.double())
            }
            Dialect::Trino => format!("to_unixtime({col})"),
            Dialect::Bigquery => format!("UNIX_MICROS({col}) / 1e6"),
            Dialect::Spark => format!("unix_micros({col}) / 1e6"),
        }
    }

    /// A string's length in bytes (a key's size in the store), not in characters.
    fn byte_length(self, col: &str) -> String {
        match self {
            Dialect::Duckdb => format!("strlen({col})"),
            Dialect::Trino => format!("length(to_utf8({col}))"),
            Dialect::Bigquery => format!("BYTE_LENGTH({col})"),
            Dialect::Postgres | Dialect::Spark => format!("octet_length({col})"),
        }
    }
}

/// What the query reads from: the table's name, or DuckDB's reader of the file.
fn from_sql(o: &SqlOptions) -> Result<String, String> {
    match &o.source {
        Source::Table(t) => Ok(t.sql(o.dialect)),
        Source::File(_) if o.dialect != Dialect::Duckdb => Err(format!(
            "--from-file: only with --emit-sql duckdb (DuckDB reads the file itself); {} reads \
             a table: give it with --table",
            dialect_name(o.dialect)
        )),
        Source::File(path) => duckdb_reader(path),
    }
}

/// `read_csv`, `read_parquet` or `read_json_auto` of `path`, written as a string literal.
fn duckdb_reader(path: &Path) -> Result<String, String> {
    let shown = path.display();
    let text = path
        .to_str()
        .ok_or_else(|| format!("--from-file {shown}: the path is not UTF-8"))?;
    if text.is_empty() || text.contains('\0') {
        return Err(format!("--from-file {text:?}: not a file name"));
    }
    let literal = format!("'{}'", text.replace('\'', "''"));
    // The formats `fit` reads, by the same extensions (`read::kind`), each with its reader.
    match super::read::kind(path) {
        Ok("csv") => Ok(format!("read_csv({literal}, header = true)")),
        Ok("parquet") => Ok(format!("read_parquet({literal})")),
        Ok(_) => Ok(format!("read_json_auto({literal})")),
        Err(e) => Err(format!("--from-file {e}")),
    }
}

/// The `SELECT` list that reads one row of the log into `t, c, k, s, b, rp, w`.
fn src_columns(o: &SqlOptions) -> String {
    let d = o.dialect;
    let has = |c: OptionalColumn| o.optional.contains(&c);
    let col = |name: &str| d.quote(name);
    let (text, double, int) = (d.text(), d.double(), d.int());
    let time = match o.time_unit {
        None => d.epoch(&col(&o.columns.time)),
        Some(u) => format!(
            "CAST({} AS {double}) * {}",
            col(&o.columns.time),
            unit_factor(u)
        ),
    };
    let caller = if has(OptionalColumn::Caller) {
        format!("COALESCE(CAST({} AS {text}), '')", col(&o.columns.caller))
    } else {
        "''".into()
    };
    // A log without a status column was answered every time, as `fit` reads a file.
    let status = if has(OptionalColumn::Status) {
        format!("COALESCE(CAST({} AS {int}), 0)", col(&o.columns.status))
    } else {
        "200".into()
    };
    let bytes = if has(OptionalColumn::ResponseBytes) {
        format!("CAST({} AS {int})", col(&o.columns.response_bytes))
    } else {
        format!("CAST(NULL AS {int})")
    };
    // 0 not replayed, 1 replayed, 2 not said: the codes `fit` orders and tests by.
    let replayed = if has(OptionalColumn::Replayed) {
        let r = col(&o.columns.replayed);
        format!("CASE WHEN {r} IS NULL THEN 2 WHEN {r} THEN 1 ELSE 0 END")
    } else {
        "2".into()
    };
    let weight = if has(OptionalColumn::Weight) {
        format!(
            "COALESCE(CAST({} AS {double}), 1.0)",
            col(&o.columns.weight)
        )
    } else {
        format!("CAST(1.0 AS {double})")
    };
    let key = format!("CAST({} AS {text})", col(&o.columns.key));
    format!(
        "{time} AS t, {caller} AS c, {key} AS k, {status} AS s, {bytes} AS b, {replayed} AS rp, {weight} AS w"
    )
}

/// The delays the counted weight is split at: the fixed ones and the supported horizon, once
/// each (the horizon may equal a fixed threshold).
fn thresholds_sql(d: Dialect) -> String {
    let double = d.double();
    fixed_thresholds()
        .iter()
        .map(|t| format!("SELECT CAST({t} AS {double}) AS at"))
        .chain(["SELECT supported AS at FROM horizon".to_string()])
        .collect::<Vec<_>>()
        .join(&format!("\n  {} ", d.union_distinct()))
}

/// One result row per statistic: `stat`, then the SQL of `label`, `at`, `n`, `w`, `w2` (each
/// cast to the result's column type) and the `FROM …` it is computed over.
const STATS: [[&str; 7]; 23] = [
    [
        "rows", "NULL", "NULL", "COUNT(*)", "NULL", "NULL", "FROM src",
    ],
    [
        "left_out",
        "NULL",
        "NULL",
        "COUNT(*)",
        "NULL",
        "NULL",
        "FROM src WHERE t IS NULL OR k IS NULL OR k = ''",
    ],
    [
        "keys",
        "NULL",
        "NULL",
        "COUNT(*)",
        "NULL",
        "NULL",
        "FROM firsts",
    ],
    [
        "span",
        "'first_min'",
        "first_min",
        "NULL",
        "NULL",
        "NULL",
        "FROM spans",
    ],
    [
        "span",
        "'first_max'",
        "first_max",
        "NULL",
        "NULL",
        "NULL",
        "FROM spans",
    ],
    [
        "span",
        "'log_min'",
        "log_min",
        "NULL",
        "NULL",
        "NULL",
        "FROM spans",
    ],
    [
        "span",
        "'log_max'",
        "log_max",
        "NULL",
        "NULL",
        "NULL",
        "FROM spans",
    ],
    [
        "weighted",
        "NULL",
        "NULL",
        "COALESCE(MAX(CASE WHEN w <> 1.0 THEN 1 ELSE 0 END), 0)",
        "NULL",
        "NULL",
        "FROM ok",
    ],
    [
        "intents",
        "NULL",
        "NULL",
        "COUNT(*)",
        "SUM(w0)",
        "SUM(w0 * w0)",
        "FROM firsts",
    ],
    [
        "timed_out",
        "NULL",
        "NULL",
        "COUNT(*)",
        "SUM(w0)",
        "SUM(w0 * w0)",
        "FROM firsts WHERE s0 = 0",
    ],
    [
        "hour",
        "NULL",
        "hour",
        "COUNT(*)",
        "SUM(w0)",
        "NULL",
        "FROM (SELECT FLOOR((t0 - 86400 * FLOOR(t0 / 86400)) / 3600) AS hour, w0 FROM firsts) hours GROUP BY hour",
    ],
    [
        "callers",
        "NULL",
        "NULL",
        "COUNT(DISTINCT c)",
        "NULL",
        "NULL",
        "FROM firsts",
    ],
    [
        "caller",
        "c",
        "NULL",
        "NULL",
        "cw",
        "NULL",
        "FROM (SELECT c, SUM(w0) AS cw FROM firsts GROUP BY c ORDER BY cw DESC, c LIMIT 10) top_callers",
    ],
    [
        "done",
        "NULL",
        "NULL",
        "COUNT(*)",
        "SUM(w0)",
        "SUM(w0 * w0)",
        "FROM answered WHERE is_done = 1",
    ],
    [
        "not_done",
        "NULL",
        "NULL",
        "COUNT(*)",
        "SUM(w0)",
        "SUM(w0 * w0)",
        "FROM answered WHERE is_done = 0",
    ],
    [
        "retries",
        "NULL",
        "MAX(d)",
        "COUNT(*)",
        "NULL",
        "NULL",
        "FROM later",
    ],
    [
        "retried_keys",
        "NULL",
        "NULL",
        "COUNT(*)",
        "NULL",
        "NULL",
        "FROM (SELECT DISTINCT c, k FROM later) retried",
    ],
    [
        "supported_horizon",
        "NULL",
        "supported",
        "NULL",
        "NULL",
        "NULL",
        "FROM horizon",
    ],
    [
        "counted",
        "NULL",
        "MAX(d)",
        "COUNT(*)",
        "SUM(w0)",
        "SUM(w0 * w0)",
        "FROM counted",
    ],
    [
        "counted_min_positive",
        "NULL",
        "MIN(d)",
        "COUNT(*)",
        "NULL",
        "NULL",
        "FROM counted WHERE d > 0",
    ],
    [
        "counted_within",
        "NULL",
        "th.at",
        "SUM(CASE WHEN cd.d <= th.at THEN 1 ELSE 0 END)",
        "SUM(CASE WHEN cd.d <= th.at THEN cd.w0 ELSE 0 END)",
        "SUM(CASE WHEN cd.d <= th.at THEN cd.w0 * cd.w0 ELSE 0 END)",
        "FROM thresholds th CROSS JOIN counted cd GROUP BY th.at",
    ],
    [
        "key_bytes",
        "NULL",
        "kb",
        "COUNT(*)",
        "SUM(w0)",
        "NULL",
        "FROM firsts GROUP BY kb",
    ],
    [
        "response_bytes",
        "NULL",
        "b",
        "COUNT(*)",
        "SUM(w0)",
        "NULL",
        "FROM sizes GROUP BY b",
    ],
];

/// The final `SELECT`: every row of [`STATS`], one `UNION ALL` apart.
fn stats_sql(d: Dialect) -> String {
    let (text, double, int) = (d.text(), d.double(), d.int());
    STATS
        .iter()
        .map(|[stat, label, at, n, w, w2, from]| {
            format!(
                "SELECT CAST('{stat}' AS {text}) AS stat, CAST({label} AS {text}) AS label, CAST({at} AS {double}) AS at, CAST({n} AS {int}) AS n, CAST({w} AS {double}) AS w, CAST({w2} AS {double}) AS w2 {from}"
            )
        })
        .collect::<Vec<_>>()
        .join("\nUNION ALL\n")
}

/// The query: one `WITH … SELECT` statement ending in a newline, without a semicolon.
pub fn emit(o: &SqlOptions) -> Result<String, String> {
    let d = o.dialect;
    let order = "ORDER BY t, s, COALESCE(b, 4294967295), rp, w";
    Ok(format!(
        "-- idemcalc fit --emit-sql {dialect}: the sufficient statistics of a request log.
{reads}-- Save the result as CSV or Parquet and run: idemcalc fit --aggregates RESULT.csv --out SCENARIO.toml
WITH src AS (
  SELECT {columns}
  FROM {from}
),
ok AS (SELECT * FROM src WHERE t IS NOT NULL AND k IS NOT NULL AND k <> ''),
ranked AS (SELECT ok.*, ROW_NUMBER() OVER (PARTITION BY c, k {order}) AS n FROM ok),
firsts AS (SELECT c, k, t AS t0, s AS s0, w AS w0, {key_len} AS kb FROM ranked WHERE n = 1),
spans AS (
  SELECT MIN(f.t0) AS first_min, MAX(f.t0) AS first_max, MIN(l.log_min) AS log_min, MAX(l.log_max) AS log_max
  FROM firsts f CROSS JOIN (SELECT MIN(t) AS log_min, MAX(t) AS log_max FROM ok) l
),
horizon AS (
  SELECT GREATEST(log_max - first_max, (log_max - first_min) / 2) AS supported, log_max FROM spans
),
later AS (
  SELECT f.c, f.k, r.t - f.t0 AS d, f.t0, f.w0, f.s0, r.n
  FROM ranked r JOIN firsts f ON r.c = f.c AND r.k = f.k
  WHERE r.n > 1
),
counted AS (
  SELECT l.d, l.w0 FROM later l CROSS JOIN horizon h
  WHERE l.n = 2 AND l.s0 = 0 AND l.t0 <= h.log_max - h.supported
),
thresholds AS (
  {thresholds}
),
next_answer AS (
  SELECT c, k, MIN(n) AS n FROM ranked WHERE n > 1 AND s <> 0 AND s <> {in_progress} AND rp <> 2 GROUP BY c, k
),
answered AS (
  SELECT f.w0, CASE WHEN r.rp = 1 AND r.s BETWEEN 200 AND 299 THEN 1 ELSE 0 END AS is_done
  FROM firsts f
  JOIN next_answer x ON x.c = f.c AND x.k = f.k
  JOIN ranked r ON r.c = x.c AND r.k = x.k AND r.n = x.n
  WHERE f.s0 = 0 AND r.t - f.t0 <= {done_within}
),
first_2xx AS (
  SELECT c, k, MIN(n) AS n FROM ranked WHERE s BETWEEN 200 AND 299 AND b IS NOT NULL GROUP BY c, k
),
sizes AS (
  SELECT r.b, f.w0
  FROM first_2xx x
  JOIN ranked r ON r.c = x.c AND r.k = x.k AND r.n = x.n
  JOIN firsts f ON f.c = x.c AND f.k = x.k
)
{stats}
",
        dialect = dialect_name(d),
        reads = reads_comment(o),
        columns = src_columns(o),
        from = from_sql(o)?,
        key_len = d.byte_length("k"),
        thresholds = thresholds_sql(d),
        stats = stats_sql(d),
        done_within = DONE_WITHIN_S,
        in_progress = IN_PROGRESS,
    ))
}

/// The comment lines naming the columns the query reads, and those it does not with what it
/// assumes instead and how to add them. Column names are the user's text: escaped, a newline
/// in one cannot end the comment.
fn reads_comment(o: &SqlOptions) -> String {
    let c = &o.columns;
    let shown = |name: &str| name.escape_debug().to_string();
    let mut read = vec![
        format!("{} (time)", shown(&c.time)),
        format!("{} (key)", shown(&c.key)),
    ];
    let mut not_read = Vec::new();
    for col in OptionalColumn::ALL {
        let name = shown(col.name(c));
        if o.optional.contains(&col) {
            read.push(name);
        } else {
            not_read.push(format!("{name} ({})", col.without()));
        }
    }
    let mut out = format!("-- Reads the columns {}.\n", read.join(", "));
    if !not_read.is_empty() {
        out.push_str(&format!(
            "-- Does not read {}: name a column with its --*-column flag, or list the table's columns with --columns.\n",
            not_read.join(", ")
        ));
    }
    out
}

fn unit_factor(u: TimeUnit) -> &'static str {
    match u {
        TimeUnit::S => "1.0",
        TimeUnit::Ms => "0.001",
        TimeUnit::Us => "0.000001",
        TimeUnit::Ns => "0.000000001",
    }
}

fn dialect_name(d: Dialect) -> &'static str {
    match d {
        Dialect::Postgres => "postgres",
        Dialect::Duckdb => "duckdb",
        Dialect::Trino => "trino",
        Dialect::Bigquery => "bigquery",
        Dialect::Spark => "spark",
    }
}
