//! `fit --emit-sql` and `fit --aggregates`: each dialect's query parses (sqlparser, and sqlglot
//! with the dialect's own grammar), on the PostgreSQL server here the query's result gives the
//! same fit as reading the file directly, `--table` takes names only (an injected statement is
//! refused, on PostgreSQL and DuckDB), `--from-file` feeds DuckDB a file, and a result that
//! could not have come from the query is refused with the row and field named.

use crate::common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, UNIX_EPOCH};

use idemcalc::fit::{Columns, Dialect, OptionalColumn, Source, SqlOptions, TableName, emit_sql};
use sqlparser::dialect::{
    BigQueryDialect, DatabricksDialect, DuckDbDialect, GenericDialect, PostgreSqlDialect,
};
use sqlparser::parser::Parser;

const BIN: &str = env!("CARGO_BIN_EXE_idemcalc");

fn table_source(name: &str, dialect: Dialect) -> Source {
    Source::Table(TableName::parse(name, dialect).unwrap())
}

fn options(dialect: Dialect) -> SqlOptions {
    SqlOptions {
        dialect,
        source: table_source("logs.requests", dialect),
        columns: Columns::default(),
        time_unit: None,
        optional: OptionalColumn::ALL.to_vec(),
    }
}

#[test]
fn every_dialects_query_parses() {
    let dialects: [(Dialect, Box<dyn sqlparser::dialect::Dialect>); 5] = [
        (Dialect::Postgres, Box::new(PostgreSqlDialect {})),
        (Dialect::Duckdb, Box::new(DuckDbDialect {})),
        // sqlparser has no Trino dialect; Trino's SQL is ANSI's, which the generic one reads.
        (Dialect::Trino, Box::new(GenericDialect {})),
        (Dialect::Bigquery, Box::new(BigQueryDialect {})),
        (Dialect::Spark, Box::new(DatabricksDialect {})),
    ];
    for (dialect, parser) in &dialects {
        for variant in 0..3 {
            let mut o = options(*dialect);
            if variant == 1 {
                o.time_unit = Some(idemcalc::fit::TimeUnit::Ms);
                o.columns.key = "Idempotency-Key".into();
            }
            if variant == 2 {
                o.optional = vec![OptionalColumn::ResponseBytes];
            }
            let sql = emit_sql(&o).unwrap();
            let parsed = Parser::parse_sql(parser.as_ref(), &sql)
                .unwrap_or_else(|e| panic!("{dialect:?} variant {variant}: {e}\n{sql}"));
            assert_eq!(parsed.len(), 1, "{dialect:?}: one statement");
            assert!(sql.contains("logs.requests"), "{dialect:?}");
        }
    }
    // A table name that would end the statement is refused.
    let err = TableName::parse("t; DROP TABLE x", Dialect::Postgres).unwrap_err();
    assert!(err.contains("--table"), "{err}");
}

fn psql(url: &str, args: &[&str]) -> String {
    let out = Command::new("psql")
        .arg(url)
        .args(["-X", "-q", "-v", "ON_ERROR_STOP=1"])
        .args(args)
        .output()
        .expect("psql runs");
    assert!(
        out.status.success(),
        "psql {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A decimal number of seconds since 1970 as an RFC 3339 time, exactly (no float rounding).
fn rfc3339(seconds: &str) -> String {
    let (whole, frac) = seconds.split_once('.').unwrap_or((seconds, ""));
    let nanos: u32 = format!("{frac:0<9}")[..9].parse().unwrap();
    let t = UNIX_EPOCH + Duration::new(whole.parse().unwrap(), nanos);
    humantime::format_rfc3339_nanos(t).to_string()
}

fn fit_json(args: &[&str]) -> serde_json::Value {
    let out = Command::new(BIN)
        .arg("fit")
        .args(args)
        .args(["--format", "json"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "fit {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Every field equal, numbers to 1e-9 relative (sums added in another order), `files` apart.
fn assert_same(direct: &serde_json::Value, warehouse: &serde_json::Value, path: &str) {
    use serde_json::Value::*;
    match (direct, warehouse) {
        (Object(a), Object(b)) => {
            for (k, v) in a {
                if path.is_empty() && k == "files" {
                    continue;
                }
                let other = b.get(k).unwrap_or(&Null);
                assert_same(v, other, &format!("{path}.{k}"));
            }
            assert_eq!(a.len(), b.len(), "{path}: fields");
        }
        (Array(a), Array(b)) => {
            assert_eq!(a.len(), b.len(), "{path}: length");
            for (i, (x, y)) in a.iter().zip(b).enumerate() {
                assert_same(x, y, &format!("{path}[{i}]"));
            }
        }
        (Number(a), Number(b)) => {
            let (a, b) = (a.as_f64().unwrap(), b.as_f64().unwrap());
            assert!(
                (a - b).abs() <= 1e-9 * a.abs().max(1.0),
                "{path}: file {a}, warehouse {b}"
            );
        }
        (a, b) => assert_eq!(a, b, "{path}"),
    }
}

/// Loads a CSV log into a table with a `timestamptz` time column, runs the emitted query with
/// `psql --csv`, and fits from its result.
fn round_trip(url: &str, log: &Path, dir: &Path) {
    let schema = format!("fit_{}", &uuid::Uuid::new_v4().simple().to_string()[..12]);
    let table = format!("{schema}.requests");
    // The log with its epoch seconds written as RFC 3339 times, for COPY into timestamptz.
    let text = std::fs::read_to_string(log).unwrap();
    let mut lines = text.lines();
    let mut converted = String::with_capacity(text.len() + text.len() / 2);
    converted.push_str(lines.next().unwrap());
    converted.push('\n');
    for line in lines {
        let (time, rest) = line.split_once(',').unwrap();
        converted.push_str(&rfc3339(time));
        converted.push(',');
        converted.push_str(rest);
        converted.push('\n');
    }
    let copy = dir.join("timestamps.csv");
    std::fs::write(&copy, converted).unwrap();
    let header = text.lines().next().unwrap();
    let weight = if header.ends_with(",weight") {
        ", weight double precision"
    } else {
        ""
    };
    psql(
        url,
        &[
            "-c",
            &format!(
                "CREATE SCHEMA {schema}; CREATE TABLE {table} (time timestamptz, caller text, idempotency_key text, status integer, response_bytes bigint, replayed boolean{weight})"
            ),
        ],
    );
    psql(
        url,
        &[
            "-c",
            &format!("\\copy {table} FROM '{}' CSV HEADER", copy.display()),
        ],
    );
    let mut o = options(Dialect::Postgres);
    o.source = table_source(&table, Dialect::Postgres);
    if weight.is_empty() {
        o.optional.retain(|c| *c != OptionalColumn::Weight);
    }
    let query = dir.join("query.sql");
    std::fs::write(&query, emit_sql(&o).unwrap()).unwrap();
    let result = dir.join("result.csv");
    let ran = std::panic::catch_unwind(|| {
        psql(
            url,
            &[
                "--csv",
                "-f",
                query.to_str().unwrap(),
                "-o",
                result.to_str().unwrap(),
            ],
        )
    });
    psql(url, &["-c", &format!("DROP SCHEMA {schema} CASCADE")]);
    ran.unwrap();
    let result_rows = std::fs::read_to_string(&result).unwrap().lines().count();
    assert!(
        result_rows < 5_000,
        "the result stays small: {result_rows} rows"
    );

    let direct = fit_json(&[log.to_str().unwrap()]);
    let warehouse = fit_json(&["--aggregates", result.to_str().unwrap()]);
    assert_same(&direct, &warehouse, "");
    // And the scenario files say the same, their provenance line and name apart.
    let scenario = |args: &[&str], out: &Path| {
        let status = Command::new(BIN)
            .arg("fit")
            .args(args)
            .arg("--out")
            .arg(out)
            .args(["--name", "same", "--format", "json"])
            .output()
            .unwrap();
        assert!(status.status.success());
        std::fs::read_to_string(out)
            .unwrap()
            .lines()
            .filter(|l| !l.starts_with("# Fitted by"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    assert_eq!(
        scenario(&[log.to_str().unwrap()], &dir.join("direct.toml")),
        scenario(
            &["--aggregates", result.to_str().unwrap()],
            &dir.join("warehouse.toml")
        ),
        "{}",
        log.display()
    );
}

#[test]
fn the_postgres_query_gives_the_fit_the_file_gives() {
    let Some(url) = common::server_url(common::PG_URL_VAR) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let example =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/logs/example-requests.csv");
    round_trip(&url, &example, dir.path());

    // Half a million rows from twenty callers, with timeouts, retries up to days later, and
    // replays: the generator the README's timings use.
    let big = dir.path().join("requests-500k.csv");
    let status = Command::new("python3")
        .arg(PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scripts/gen-request-log.py"))
        .arg("500000")
        .arg(&big)
        .status()
        .expect("python3 runs scripts/gen-request-log.py");
    assert!(status.success());
    round_trip(&url, &big, dir.path());
}

#[test]
fn a_result_that_is_not_the_querys_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("result.csv");
    std::fs::write(&bad, "stat,label,at,n,w,w2\nrows,,,10,,\n").unwrap();
    let out = Command::new(BIN)
        .args(["fit", "--aggregates"])
        .arg(&bad)
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("result.csv") && err.contains("is this the result of the query"),
        "{err}"
    );
    std::fs::write(&bad, "a,b\n1,2\n").unwrap();
    let out = Command::new(BIN)
        .args(["fit", "--aggregates"])
        .arg(&bad)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("no column `stat`"), "{err}");
}

/// The injection of the report that led to `TableName`: it closes the `src` CTE, adds a
/// data-modifying one and opens a dummy one for the rest of the query.
fn injected(victims: &str) -> String {
    format!("logs.requests), evil AS (DELETE FROM {victims} RETURNING 1), pad AS (SELECT 1 AS z")
}

#[test]
fn table_names_are_identifiers_quoted_per_dialect() {
    let emitted = |name: &str, d: Dialect| TableName::parse(name, d).map(|t| t.sql(d));
    // Bare parts stay bare (PostgreSQL folds their case as it would have); quoted ones stay
    // quoted, with each dialect's escape.
    for (d, name, sql) in [
        (Dialect::Postgres, "requests", "requests"),
        (Dialect::Postgres, "Logs.Requests_2", "Logs.Requests_2"),
        (
            Dialect::Postgres,
            r#""we""ird"."requests""#,
            r#""we""ird"."requests""#,
        ),
        (Dialect::Duckdb, r#"main."a.b c""#, r#"main."a.b c""#),
        (Dialect::Trino, "hive.logs.requests", "hive.logs.requests"),
        (
            Dialect::Bigquery,
            "my-project.logs.requests",
            "`my-project`.logs.requests",
        ),
        (
            Dialect::Bigquery,
            "`my-project.logs.requests`",
            "`my-project.logs.requests`",
        ),
        (Dialect::Bigquery, r"`a\`b\\c`.t", r"`a\`b\\c`.t"),
        (Dialect::Spark, "`a``b`.t", "`a``b`.t"),
        (Dialect::Spark, "cat.db.t", "cat.db.t"),
    ] {
        assert_eq!(emitted(name, d).as_deref(), Ok(sql), "{d:?} {name}");
    }
    for (d, name) in [
        (Dialect::Postgres, injected("victims").as_str()),
        (Dialect::Postgres, "t; DROP TABLE x"),
        (Dialect::Postgres, ""),
        (Dialect::Postgres, "logs..requests"),
        (Dialect::Postgres, "a.b.c.d"),
        (Dialect::Postgres, "1requests"),
        (Dialect::Postgres, "logs requests"),
        (Dialect::Postgres, "my-project.logs.requests"),
        (Dialect::Postgres, r#""unclosed"#),
        (Dialect::Postgres, r#""a"b"#),
        (Dialect::Postgres, "`backticks`"),
        (Dialect::Postgres, "\"new\nline\""),
        (Dialect::Duckdb, "read_csv('/etc/passwd')"),
        (Dialect::Duckdb, "read_text('/etc/hostname')"),
        (Dialect::Bigquery, r#""double".t"#),
        (Dialect::Bigquery, "logs.my-table"),
        (Dialect::Bigquery, "`a``b`"),
        (Dialect::Bigquery, r"`a\nb`"),
        (Dialect::Spark, r"`a\`b`"),
        (Dialect::Spark, "my-project.logs.requests"),
    ] {
        let err = emitted(name, d).unwrap_err();
        assert!(
            err.contains("--table") && err.contains("letters, digits and _"),
            "{d:?} {name:?}: {err}"
        );
    }
    // Through the command line: refused as bad input, nothing printed.
    let out = Command::new(BIN)
        .args(["fit", "--emit-sql", "postgres", "--table"])
        .arg(injected("victims"))
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "the injected --table is refused"
    );
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--table"));
}

#[test]
fn quoted_columns_use_each_dialects_escape() {
    let mut o = options(Dialect::Bigquery);
    o.columns.key = r"Idem`Key\x".into();
    let sql = emit_sql(&o).unwrap();
    assert!(sql.contains(r"CAST(`Idem\`Key\\x` AS STRING)"), "{sql}");
    assert!(sql.contains("UNION DISTINCT") && !sql.contains("\n  UNION SELECT"));
    let mut o = options(Dialect::Spark);
    o.columns.key = "Idem`Key".into();
    assert!(
        emit_sql(&o)
            .unwrap()
            .contains("CAST(`Idem``Key` AS STRING)")
    );
    let mut o = options(Dialect::Postgres);
    o.columns.key = "Idem\"Key".into();
    assert!(
        emit_sql(&o)
            .unwrap()
            .contains("CAST(\"Idem\"\"Key\" AS TEXT)")
    );
}

#[test]
fn from_file_is_duckdbs_reader_of_a_string_literal() {
    let mut o = options(Dialect::Duckdb);
    for (path, from) in [
        (
            "/data/it's.csv",
            "read_csv('/data/it''s.csv', header = true)",
        ),
        ("logs/r.PARQUET", "read_parquet('logs/r.PARQUET')"),
        ("r.ndjson", "read_json_auto('r.ndjson')"),
        ("r.jsonl", "read_json_auto('r.jsonl')"),
    ] {
        o.source = Source::File(path.into());
        let sql = emit_sql(&o).unwrap();
        assert!(sql.contains(&format!("FROM {from}\n")), "{path}: {sql}");
    }
    o.source = Source::File("r.txt".into());
    assert!(emit_sql(&o).unwrap_err().contains("--from-file"));
    for d in [
        Dialect::Postgres,
        Dialect::Trino,
        Dialect::Bigquery,
        Dialect::Spark,
    ] {
        let mut o = options(d);
        o.source = Source::File("r.csv".into());
        let err = emit_sql(&o).unwrap_err();
        assert!(
            err.contains("--from-file") && err.contains("duckdb"),
            "{err}"
        );
    }
    // Both, or neither, is a usage error.
    for extra in [&["--table", "t", "--from-file", "r.csv"][..], &[][..]] {
        let out = Command::new(BIN)
            .args(["fit", "--emit-sql", "duckdb"])
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{extra:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("--table") && err.contains("--from-file"),
            "{err}"
        );
    }
}

/// Runs a Python script with arguments; its stdout, or a panic with its stderr.
fn python(script: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new("python3")
        .args(["-c", script])
        .args(args)
        .output()
        .expect("python3 runs");
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Parses each (dialect, file) pair with sqlglot's grammar of that dialect, errors raised.
const SQLGLOT: &str = r#"
import sys, sqlglot
from sqlglot.errors import ErrorLevel
bad = 0
for d, f in zip(sys.argv[1::2], sys.argv[2::2]):
    try:
        sqlglot.parse_one(open(f).read(), read=d, error_level=ErrorLevel.RAISE)
    except Exception as e:
        print(f"{f} ({d}): {e}")
        bad += 1
sys.exit(1 if bad else 0)
"#;

#[test]
fn sqlglot_parses_each_dialects_query_in_that_dialect() {
    if !common::python_has("sqlglot", "the sqlglot parse of every dialect") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut args = Vec::new();
    for (d, name, quoted_table) in [
        (Dialect::Postgres, "postgres", r#""we""ird"."requests""#),
        (Dialect::Duckdb, "duckdb", r#""we""ird".main."requests""#),
        (Dialect::Trino, "trino", r#"hive."we""ird".requests"#),
        (
            Dialect::Bigquery,
            "bigquery",
            r"my-project.`we\`ird`.requests",
        ),
        (Dialect::Spark, "spark", "`we``ird`.requests"),
    ] {
        for variant in 0..3 {
            let mut o = options(d);
            if variant == 1 {
                o.time_unit = Some(idemcalc::fit::TimeUnit::Ms);
                o.columns.key = "Idem`Key\"x".into();
                o.source = table_source(quoted_table, d);
            }
            if variant == 2 {
                o.optional = vec![
                    OptionalColumn::Status,
                    OptionalColumn::ResponseBytes,
                    OptionalColumn::Replayed,
                ];
            }
            let file = dir.path().join(format!("{name}-{variant}.sql"));
            std::fs::write(&file, emit_sql(&o).unwrap()).unwrap();
            args.push(name.to_string());
            args.push(file.to_str().unwrap().to_string());
        }
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    if let Err(e) = python(SQLGLOT, &args) {
        panic!("sqlglot refuses:\n{e}");
    }
    // The check has teeth: BigQuery's grammar refuses the bare UNION the query used to have.
    let bare = dir.path().join("bare-union.sql");
    let sql = emit_sql(&options(Dialect::Bigquery)).unwrap();
    std::fs::write(&bare, sql.replace("UNION DISTINCT", "UNION")).unwrap();
    let err = python(SQLGLOT, &["bigquery", bare.to_str().unwrap()]).unwrap_err();
    assert!(err.contains("DISTINCT or ALL"), "{err}");
}

/// The example log's header: the table the emitted queries run on has these columns.
const EXAMPLE_COLUMNS: &str = "time,caller,idempotency_key,status,response_bytes,replayed,weight";

fn example_log() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/logs/example-requests.csv")
}

/// `fit --emit-sql DIALECT ARGS` through the binary: the query, or the exit code and stderr.
fn emit(dialect: &str, args: &[&str]) -> Result<String, (Option<i32>, String)> {
    let out = Command::new(BIN)
        .args(["fit", "--emit-sql", dialect, "--time-unit", "s"])
        .args(["--columns", EXAMPLE_COLUMNS])
        .args(args)
        .output()
        .unwrap();
    if out.status.success() {
        Ok(String::from_utf8(out.stdout).unwrap())
    } else {
        Err((
            out.status.code(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        ))
    }
}

/// The injected `--table` is refused before any query exists; were one printed, it is run (so
/// the failure says what it did) and the test fails.
fn assert_injection_refused(dialect: &str, victims: &str, run: impl FnOnce(&str) -> String) {
    match emit(dialect, &["--table", &injected(victims)]) {
        Err((code, err)) => {
            assert_eq!(code, Some(2), "{err}");
            assert!(err.contains("--table"), "{err}");
        }
        Ok(query) => panic!(
            "{dialect}: the injected --table gave a query; running it: {}",
            run(&query)
        ),
    }
}

#[test]
fn an_injected_table_is_refused_and_a_quoted_name_runs_on_postgres() {
    let Some(url) = common::server_url(common::PG_URL_VAR) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let id = &uuid::Uuid::new_v4().simple().to_string()[..12];
    let scratch = format!("fit_inj_{id}");
    let victims = format!("{scratch}.victims");
    // A schema whose name needs quoting: a double quote in it.
    let weird = format!("we\"ird_{id}");
    let weird_sql = format!("\"{}\"", weird.replace('"', "\"\""));
    psql(
        &url,
        &[
            "-c",
            &format!(
                "CREATE SCHEMA {scratch}; CREATE TABLE {victims} AS SELECT generate_series(1, 3) AS id; \
                 CREATE SCHEMA {weird_sql}; CREATE TABLE {weird_sql}.\"requests\" (time double precision, \
                 caller text, idempotency_key text, status integer, response_bytes bigint, \
                 replayed boolean, weight double precision)"
            ),
        ],
    );
    let count = || {
        psql(
            &url,
            &["-tA", "-c", &format!("SELECT COUNT(*) FROM {victims}")],
        )
    };
    let ran = std::panic::catch_unwind(|| {
        psql(
            &url,
            &[
                "-c",
                &format!(
                    "\\copy {weird_sql}.\"requests\" FROM '{}' CSV HEADER",
                    example_log().display()
                ),
            ],
        );
        assert_injection_refused("postgres", &victims, |query| {
            let file = dir.path().join("injected.sql");
            std::fs::write(&file, query).unwrap();
            psql(&url, &["--csv", "-f", file.to_str().unwrap()]);
            format!("{victims} has {} rows left", count().trim())
        });
        let query = emit(
            "postgres",
            &["--table", &format!("{weird_sql}.\"requests\"")],
        )
        .unwrap();
        let file = dir.path().join("query.sql");
        std::fs::write(&file, &query).unwrap();
        let result = dir.path().join("result.csv");
        psql(
            &url,
            &[
                "--csv",
                "-f",
                file.to_str().unwrap(),
                "-o",
                result.to_str().unwrap(),
            ],
        );
        assert_eq!(count().trim(), "3", "victims untouched");
        let direct = fit_json(&[example_log().to_str().unwrap()]);
        let warehouse = fit_json(&["--aggregates", result.to_str().unwrap()]);
        assert_same(&direct, &warehouse, "");
    });
    psql(
        &url,
        &[
            "-c",
            &format!("DROP SCHEMA {scratch} CASCADE; DROP SCHEMA {weird_sql} CASCADE"),
        ],
    );
    if let Err(e) = ran {
        std::panic::resume_unwind(e);
    }
}

/// Runs a query on an in-memory DuckDB holding a `victims` table (3 rows) and the example log
/// as `"we""ird".requests`; writes the result as CSV and prints the victims left.
const DUCKDB_RUN: &str = r#"
import sys, duckdb
query, log, result = sys.argv[1:4]
lit = lambda s: "'" + s.replace("'", "''") + "'"
con = duckdb.connect()
con.execute("CREATE TABLE victims AS SELECT range AS id FROM range(3)")
con.execute('CREATE SCHEMA "we""ird"')
con.execute('CREATE TABLE "we""ird".requests AS SELECT * FROM read_csv(' + lit(log) + ', header = true)')
con.execute("COPY (" + open(query).read() + ") TO " + lit(result) + " (HEADER)")
print(con.execute("SELECT COUNT(*) FROM victims").fetchone()[0])
"#;

#[test]
fn an_injected_table_is_refused_and_from_file_runs_on_duckdb() {
    if !common::python_has("duckdb", "the DuckDB runs of the query") {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let log = example_log();
    let run = |query: &str, name: &str| -> (String, PathBuf) {
        let file = dir.path().join(format!("{name}.sql"));
        std::fs::write(&file, query).unwrap();
        let result = dir.path().join(format!("{name}.csv"));
        let left = python(
            DUCKDB_RUN,
            &[
                file.to_str().unwrap(),
                log.to_str().unwrap(),
                result.to_str().unwrap(),
            ],
        )
        .unwrap_or_else(|e| panic!("duckdb runs {name}: {e}"));
        (left.trim().to_string(), result)
    };
    assert_injection_refused("duckdb", "victims", |query| {
        format!("victims has {} rows left", run(query, "injected").0)
    });
    let direct = fit_json(&[log.to_str().unwrap()]);
    // A quoted schema name, and the file itself through --from-file (a quote in its name).
    let (left, result) = run(
        &emit("duckdb", &["--table", r#""we""ird".requests"#]).unwrap(),
        "quoted",
    );
    assert_eq!(left, "3", "victims untouched");
    assert_same(
        &direct,
        &fit_json(&["--aggregates", result.to_str().unwrap()]),
        "",
    );
    let copy = dir.path().join("it's a log.csv");
    std::fs::copy(&log, &copy).unwrap();
    let (_, result) = run(
        &emit("duckdb", &["--from-file", copy.to_str().unwrap()]).unwrap(),
        "from-file",
    );
    let warehouse = fit_json(&["--aggregates", result.to_str().unwrap()]);
    for figure in [
        "rows",
        "keys",
        "rate_per_s",
        "timeout_fraction",
        "done_fraction",
        "retries",
        "retry_cdf",
        "key_bytes",
        "response_bytes",
    ] {
        assert_same(&direct[figure], &warehouse[figure], figure);
    }
    assert_same(&direct, &warehouse, "");
}

/// The query's result over scenarios/logs/example-requests.csv, as PostgreSQL gave it
/// (`fit --emit-sql postgres --time-unit s` over the log loaded with a `double precision` time
/// column, run with `psql --csv`): one field per cell, no quoting.
fn example_result() -> Vec<Vec<String>> {
    let path =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/fit-example-aggregates.csv");
    std::fs::read_to_string(path)
        .unwrap()
        .lines()
        .map(|l| l.split(',').map(str::to_string).collect())
        .collect()
}

const FIELDS: [&str; 6] = ["stat", "label", "at", "n", "w", "w2"];

/// Sets `fields` (e.g. `[("n", "5")]`) of the rows whose stat is `stat` and whose label or `at`
/// is `which` (any row of the stat when empty).
fn set(rows: &mut [Vec<String>], stat: &str, which: &str, fields: &[(&str, &str)]) {
    let mut found = false;
    for r in rows.iter_mut().skip(1) {
        if r[0] == stat && (which.is_empty() || r[1] == which || r[2] == which) {
            for (f, v) in fields {
                r[FIELDS.iter().position(|x| x == f).unwrap()] = v.to_string();
            }
            found = true;
        }
    }
    assert!(found, "no {stat} {which} row in the example result");
}

fn remove(rows: &mut Vec<Vec<String>>, stat: &str, which: &str) {
    rows.retain(|r| !(r[0] == stat && (which.is_empty() || r[2] == which)));
}

type Edit = fn(&mut Vec<Vec<String>>);

/// A result with one impossible statistic: what was done, the stat and field the refusal must
/// name (`""`: none), the edit.
const CORRUPTIONS: &[(&str, &str, &str, Edit)] = &[
    ("a negative weight", "intents", "w", |r| {
        set(r, "intents", "", &[("w", "-2820")])
    }),
    ("a negative count", "keys", "n", |r| {
        set(r, "keys", "", &[("n", "-1")])
    }),
    ("a fractional count", "keys", "n", |r| {
        set(r, "keys", "", &[("n", "2819.5")])
    }),
    ("NaN", "intents", "w", |r| {
        set(r, "intents", "", &[("w", "NaN")])
    }),
    ("an infinite time", "span", "at", |r| {
        set(r, "span", "first_min", &[("at", "inf")])
    }),
    ("timed_out above intents", "timed_out", "n", |r| {
        set(
            r,
            "timed_out",
            "",
            &[("n", "2821"), ("w", "2821"), ("w2", "2821")],
        )
    }),
    ("done + not_done above timed_out", "not_done", "n", |r| {
        set(
            r,
            "not_done",
            "",
            &[("n", "100"), ("w", "100"), ("w2", "100")],
        )
    }),
    ("counted_within above counted", "counted_within", "n", |r| {
        set(
            r,
            "counted_within",
            "10",
            &[("n", "141"), ("w", "141"), ("w2", "141")],
        )
    }),
    (
        "counted_within shrinking with the delay",
        "counted_within",
        "n",
        |r| {
            set(
                r,
                "counted_within",
                "60",
                &[("n", "50"), ("w", "50"), ("w2", "50")],
            )
        },
    ),
    ("a threshold missing", "counted_within", "at", |r| {
        remove(r, "counted_within", "600")
    }),
    ("no timed_out row", "timed_out", "", |r| {
        remove(r, "timed_out", "")
    }),
    ("no counted row", "counted", "", |r| {
        remove(r, "counted", "")
    }),
    ("no hour rows", "hour", "", |r| remove(r, "hour", "")),
    ("w2 below w*w/n", "intents", "w2", |r| {
        set(r, "weighted", "", &[("n", "1")]);
        set(r, "intents", "", &[("w2", "1000")]);
    }),
    ("weights though no row is weighted", "intents", "w", |r| {
        set(r, "intents", "", &[("w", "3000")])
    }),
    (
        "usable rows that are neither keys nor retries",
        "keys",
        "n",
        |r| set(r, "rows", "", &[("n", "3000")]),
    ),
    (
        "key lengths of more keys than there are",
        "key_bytes",
        "n",
        |r| {
            let at = r.iter().find(|x| x[0] == "key_bytes").unwrap()[2].clone();
            set(r, "key_bytes", &at, &[("n", "5000"), ("w", "5000")]);
        },
    ),
    ("a negative response size", "response_bytes", "at", |r| {
        let at = r.iter().find(|x| x[0] == "response_bytes").unwrap()[2].clone();
        set(r, "response_bytes", &at, &[("at", "-1")]);
    }),
    ("hour 24", "hour", "at", |r| {
        set(r, "hour", "0", &[("at", "24")])
    }),
    ("spans out of order", "span", "at", |r| {
        set(r, "span", "first_max", &[("at", "0")])
    }),
    ("no caller", "callers", "n", |r| {
        set(r, "callers", "", &[("n", "0")])
    }),
    ("a row no query gives", "bogus", "", |r| {
        r.push(["bogus", "", "", "1", "", ""].map(String::from).to_vec())
    }),
    ("a single statistic twice", "rows", "", |r| {
        r.push(["rows", "", "", "2960", "", ""].map(String::from).to_vec())
    }),
];

#[test]
fn impossible_aggregates_are_refused_naming_row_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let result = dir.path().join("result.csv");
    let write = |rows: &[Vec<String>]| {
        let text: String = rows.iter().map(|r| r.join(",") + "\n").collect();
        std::fs::write(&result, text).unwrap();
    };
    // The result as the query gave it fits, as the log does.
    write(&example_result());
    assert_same(
        &fit_json(&[example_log().to_str().unwrap()]),
        &fit_json(&["--aggregates", result.to_str().unwrap()]),
        "",
    );
    let mut accepted = Vec::new();
    for (what, stat, field, edit) in CORRUPTIONS {
        let mut rows = example_result();
        edit(&mut rows);
        write(&rows);
        let out = Command::new(BIN)
            .args(["fit", "--aggregates"])
            .arg(&result)
            .arg("--out")
            .arg(dir.path().join("fitted.toml"))
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        let named = err.contains("result.csv")
            && err.contains(&format!("`{stat}"))
            && (field.is_empty() || err.contains(&format!(" {field} ")))
            && !err.contains("bug in fit");
        if out.status.code() != Some(2) || !named {
            accepted.push(format!(
                "{what}: exit {:?}, expected `{stat}` and {field:?} named: {err}",
                out.status.code()
            ));
        }
    }
    assert!(accepted.is_empty(), "{}", accepted.join("\n"));
}

/// Issue 36, item 3: a gateway log with only a time and a key. The query reads the columns the
/// user named and no others (`weight` made PostgreSQL answer `column "weight" does not exist`),
/// says in its comment which it reads, and its result fits: 4 keys over 3 s, one repeated, so
/// a rate of 4/3 per second (every key's first request between 0 s and 3 s) and no timeouts
/// (without a status, every request was answered).
#[test]
fn issue_36_item_3_emit_sql_runs_on_a_table_with_only_ts_and_k() {
    let Some(url) = common::server_url(common::PG_URL_VAR) else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let schema = format!(
        "fit_tk_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let table = format!("{schema}.t");
    psql(
        &url,
        &[
            "-c",
            &format!(
                "CREATE SCHEMA {schema}; CREATE TABLE {table} (ts timestamptz, k text); \
                 INSERT INTO {table} VALUES ('2026-01-01T00:00:00Z', 'a'), \
                 ('2026-01-01T00:00:01Z', 'b'), ('2026-01-01T00:00:02Z', 'c'), \
                 ('2026-01-01T00:00:03Z', 'd'), ('2026-01-01T00:00:10Z', 'a')"
            ),
        ],
    );
    let out = Command::new(BIN)
        .args(["fit", "--emit-sql", "postgres", "--table", &table])
        .args(["--time-column", "ts", "--key-column", "k"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let query = String::from_utf8(out.stdout).unwrap();
    let query_file = dir.path().join("query.sql");
    std::fs::write(&query_file, &query).unwrap();
    let result = dir.path().join("result.csv");
    let ran = std::panic::catch_unwind(|| {
        psql(
            &url,
            &[
                "--csv",
                "-f",
                query_file.to_str().unwrap(),
                "-o",
                result.to_str().unwrap(),
            ],
        )
    });
    psql(&url, &["-c", &format!("DROP SCHEMA {schema} CASCADE")]);
    ran.unwrap();
    assert!(
        query.contains("-- Reads the columns ts (time), k (key).\n"),
        "{query}"
    );
    assert!(
        query.contains("-- Does not read caller (one caller), status (every request answered"),
        "{query}"
    );
    let f = fit_json(&["--aggregates", result.to_str().unwrap()]);
    assert_eq!(f["keys"], 4, "{f:#}");
    assert_eq!(f["retries"], 1);
    assert!((f["rate_per_s"]["estimate"].as_f64().unwrap() - 4.0 / 3.0).abs() < 1e-9);
    assert_eq!(f["timeout_fraction"]["estimate"], 0.0);
}

/// Issue 36, item 3: `--columns` (the table's columns, as `SELECT * … LIMIT 0` shows them) adds
/// the optional columns it lists; `--without` takes one out again; a named column missing from
/// the list, or a list without the time column, is refused naming the flags.
#[test]
fn issue_36_item_3_columns_lists_what_the_table_has() {
    let emit_with = |args: &[&str]| {
        Command::new(BIN)
            .args(["fit", "--emit-sql", "postgres", "--table", "t"])
            .args(args)
            .output()
            .unwrap()
    };
    let listed = emit_with(&["--columns", "time,idempotency_key,status,weight,extra"]);
    let sql = String::from_utf8(listed.stdout).unwrap();
    assert!(
        sql.contains("-- Reads the columns time (time), idempotency_key (key), status, weight.\n"),
        "{sql}"
    );
    assert!(
        sql.contains(r#"CAST("weight" AS DOUBLE PRECISION)"#),
        "{sql}"
    );
    let without = emit_with(&[
        "--columns",
        "time,idempotency_key,status,weight",
        "--without",
        "weight",
    ]);
    let sql = String::from_utf8(without.stdout).unwrap();
    assert!(!sql.contains(r#""weight""#), "{sql}");
    assert!(sql.contains("weight (each row one request)"), "{sql}");
    // Named by its flag: read without a list.
    let named = emit_with(&["--status-column", "code"]);
    assert!(
        String::from_utf8(named.stdout)
            .unwrap()
            .contains(r#"CAST("code" AS BIGINT)"#)
    );
    for (args, said) in [
        (
            &[
                "--columns",
                "time,idempotency_key",
                "--status-column",
                "code",
            ][..],
            "--status-column code: not among --columns time,idempotency_key",
        ),
        (
            &["--columns", "ts,idempotency_key"][..],
            "--columns ts,idempotency_key: no \"time\", the column --time-column names",
        ),
    ] {
        let out = emit_with(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(err.contains(said), "{args:?}: {err}");
    }
}
