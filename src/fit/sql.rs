//! `fit --emit-sql`: the query that computes a log's sufficient statistics
//! ([`super::Aggregates`]) where the log already lives, so a month of requests never leaves
//! the warehouse. One query shape for every dialect; only quoting, type names, the epoch of a
//! timestamp and a string's length in bytes differ.
//!
//! The result is a small long table `(stat, label, at, n, w, w2)` that
//! [`super::Aggregates::read`] turns back into statistics: its size depends on the number of
//! distinct key and response sizes, never on the number of rows.

use super::Columns;
use super::aggregates::{DONE_WITHIN_S, fixed_thresholds};
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

/// An optional column the table does not have.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum OptionalColumn {
    Caller,
    Status,
    ResponseBytes,
    Replayed,
    Weight,
}

/// What the query needs to know about the table.
#[derive(Debug, Clone)]
pub struct SqlOptions {
    pub dialect: Dialect,
    /// The table, as the warehouse names it (`schema.table`, `project.dataset.table`): written
    /// into the query as given.
    pub table: String,
    pub columns: Columns,
    /// `None`: the time column is a timestamp; otherwise it holds numbers in this unit.
    pub time_unit: Option<TimeUnit>,
    pub absent: Vec<OptionalColumn>,
}

impl Dialect {
    fn quote(self, name: &str) -> String {
        match self {
            Dialect::Bigquery | Dialect::Spark => format!("`{}`", name.replace('`', "``")),
            _ => format!("\"{}\"", name.replace('"', "\"\"")),
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

/// The query: its text ends with a newline and has no trailing semicolon issue for any engine.
pub fn emit(o: &SqlOptions) -> Result<String, String> {
    let d = o.dialect;
    if o.table.trim().is_empty() || o.table.contains(';') {
        return Err(format!(
            "--table {:?}: give the table's name as the warehouse knows it (no `;`)",
            o.table
        ));
    }
    let has = |c: OptionalColumn| !o.absent.contains(&c);
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
    let key_len = d.byte_length("k");
    let thresholds = fixed_thresholds()
        .iter()
        .map(|t| format!("SELECT CAST({t} AS {double}) AS at"))
        .chain(["SELECT supported AS at FROM horizon".to_string()])
        .collect::<Vec<_>>()
        // UNION, not UNION ALL: the supported horizon may equal a fixed threshold.
        .join("\n  UNION ");
    let null_text = format!("CAST(NULL AS {text})");
    let null_double = format!("CAST(NULL AS {double})");
    let null_int = format!("CAST(NULL AS {int})");
    let row = |stat: &str, label: &str, at: &str, n: &str, w: &str, w2: &str, rest: &str| {
        format!(
            "SELECT CAST('{stat}' AS {text}) AS stat, {label} AS label, CAST({at} AS {double}) AS at, CAST({n} AS {int}) AS n, CAST({w} AS {double}) AS w, CAST({w2} AS {double}) AS w2 {rest}"
        )
    };
    let (nt, nd, ni) = (null_text.as_str(), null_double.as_str(), null_int.as_str());
    let label = |v: &str| format!("CAST('{v}' AS {text})");
    let [first_min, first_max, log_min, log_max] =
        ["first_min", "first_max", "log_min", "log_max"].map(label);
    let stats = [
        row("rows", nt, nd, "COUNT(*)", nd, nd, "FROM src"),
        row(
            "left_out",
            nt,
            nd,
            "COUNT(*)",
            nd,
            nd,
            "FROM src WHERE t IS NULL OR k IS NULL OR k = ''",
        ),
        row("keys", nt, nd, "COUNT(*)", nd, nd, "FROM firsts"),
        row("span", &first_min, "first_min", ni, nd, nd, "FROM spans"),
        row("span", &first_max, "first_max", ni, nd, nd, "FROM spans"),
        row("span", &log_min, "log_min", ni, nd, nd, "FROM spans"),
        row("span", &log_max, "log_max", ni, nd, nd, "FROM spans"),
        row(
            "weighted",
            nt,
            nd,
            "COALESCE(MAX(CASE WHEN w <> 1.0 THEN 1 ELSE 0 END), 0)",
            nd,
            nd,
            "FROM ok",
        ),
        row("intents", nt, nd, "COUNT(*)", "SUM(w0)", "SUM(w0 * w0)", "FROM firsts"),
        row(
            "timed_out",
            nt,
            nd,
            "COUNT(*)",
            "SUM(w0)",
            "SUM(w0 * w0)",
            "FROM firsts WHERE s0 = 0",
        ),
        row(
            "hour",
            nt,
            "hour",
            "COUNT(*)",
            "SUM(w0)",
            nd,
            "FROM (SELECT FLOOR((t0 - 86400 * FLOOR(t0 / 86400)) / 3600) AS hour, w0 FROM firsts) hours GROUP BY hour",
        ),
        row("callers", nt, nd, "COUNT(DISTINCT c)", nd, nd, "FROM firsts"),
        row(
            "caller",
            "c",
            nd,
            ni,
            "cw",
            nd,
            "FROM (SELECT c, SUM(w0) AS cw FROM firsts GROUP BY c ORDER BY cw DESC, c LIMIT 10) top_callers",
        ),
        row(
            "done",
            nt,
            nd,
            "COUNT(*)",
            "SUM(w0)",
            "SUM(w0 * w0)",
            "FROM answered WHERE is_done = 1",
        ),
        row(
            "not_done",
            nt,
            nd,
            "COUNT(*)",
            "SUM(w0)",
            "SUM(w0 * w0)",
            "FROM answered WHERE is_done = 0",
        ),
        row("retries", nt, "MAX(d)", "COUNT(*)", nd, nd, "FROM later"),
        row(
            "retried_keys",
            nt,
            nd,
            "COUNT(*)",
            nd,
            nd,
            "FROM (SELECT DISTINCT c, k FROM later) retried",
        ),
        row("supported_horizon", nt, "supported", ni, nd, nd, "FROM horizon"),
        row(
            "counted",
            nt,
            "MAX(d)",
            "COUNT(*)",
            "SUM(w0)",
            "SUM(w0 * w0)",
            "FROM counted",
        ),
        row(
            "counted_min_positive",
            nt,
            "MIN(d)",
            "COUNT(*)",
            nd,
            nd,
            "FROM counted WHERE d > 0",
        ),
        row(
            "counted_within",
            nt,
            "th.at",
            "SUM(CASE WHEN cd.d <= th.at THEN 1 ELSE 0 END)",
            "SUM(CASE WHEN cd.d <= th.at THEN cd.w0 ELSE 0 END)",
            "SUM(CASE WHEN cd.d <= th.at THEN cd.w0 * cd.w0 ELSE 0 END)",
            "FROM thresholds th CROSS JOIN counted cd GROUP BY th.at",
        ),
        row(
            "key_bytes",
            nt,
            "kb",
            "COUNT(*)",
            "SUM(w0)",
            nd,
            "FROM firsts GROUP BY kb",
        ),
        row(
            "response_bytes",
            nt,
            "b",
            "COUNT(*)",
            "SUM(w0)",
            nd,
            "FROM sizes GROUP BY b",
        ),
    ]
    .join("\nUNION ALL\n");
    let order = "ORDER BY t, s, COALESCE(b, 4294967295), rp, w";
    Ok(format!(
        "-- idemcalc fit --emit-sql {dialect}: the sufficient statistics of a request log.
-- Save the result as CSV or Parquet and run: idemcalc fit --aggregates RESULT.csv --out SCENARIO.toml
WITH src AS (
  SELECT {time} AS t, {caller} AS c, {key} AS k, {status} AS s, {bytes} AS b, {replayed} AS rp, {weight} AS w
  FROM {table}
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
  SELECT f.c, f.k, r.t - f.t0 AS d, f.t0, f.w0
  FROM ranked r JOIN firsts f ON r.c = f.c AND r.k = f.k
  WHERE r.n > 1
),
counted AS (
  SELECT l.d, l.w0 FROM later l CROSS JOIN horizon h WHERE l.t0 <= h.log_max - h.supported
),
thresholds AS (
  {thresholds}
),
next_answer AS (
  SELECT c, k, MIN(n) AS n FROM ranked WHERE n > 1 AND s <> 0 AND rp <> 2 GROUP BY c, k
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
        table = o.table.trim(),
        done_within = DONE_WITHIN_S,
    ))
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
