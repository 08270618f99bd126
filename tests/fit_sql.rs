//! `fit --emit-sql` and `fit --aggregates`: each dialect's query parses (sqlparser), and on the
//! PostgreSQL server here the query's result gives the same fit as reading the file directly.

mod common;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, UNIX_EPOCH};

use idemcalc::fit::{Columns, Dialect, OptionalColumn, SqlOptions, emit_sql};
use sqlparser::dialect::{
    BigQueryDialect, DatabricksDialect, DuckDbDialect, GenericDialect, PostgreSqlDialect,
};
use sqlparser::parser::Parser;

const BIN: &str = env!("CARGO_BIN_EXE_idemcalc");

fn options(dialect: Dialect) -> SqlOptions {
    SqlOptions {
        dialect,
        table: "logs.requests".into(),
        columns: Columns::default(),
        time_unit: None,
        absent: Vec::new(),
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
                o.absent = vec![
                    OptionalColumn::Caller,
                    OptionalColumn::Status,
                    OptionalColumn::Replayed,
                    OptionalColumn::Weight,
                ];
            }
            let sql = emit_sql(&o).unwrap();
            let parsed = Parser::parse_sql(parser.as_ref(), &sql)
                .unwrap_or_else(|e| panic!("{dialect:?} variant {variant}: {e}\n{sql}"));
            assert_eq!(parsed.len(), 1, "{dialect:?}: one statement");
            assert!(sql.contains("logs.requests"), "{dialect:?}");
        }
    }
    // A table name that would end the statement is refused.
    let mut o = options(Dialect::Postgres);
    o.table = "t; DROP TABLE x".into();
    assert!(emit_sql(&o).unwrap_err().contains("--table"));
}

/// `IDEMCALC_PG_URL`, or `None` with a notice (a panic in CI, where the server must be there).
fn pg_url() -> Option<String> {
    match std::env::var(common::PG_URL_VAR) {
        Ok(u) if !u.trim().is_empty() => Some(u),
        _ if std::env::var_os("CI").is_some() => {
            panic!("CI is set but {} is not", common::PG_URL_VAR)
        }
        _ => {
            eprintln!(
                "SKIPPED the PostgreSQL round trip: {} is not set",
                common::PG_URL_VAR
            );
            None
        }
    }
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
    o.table = table.clone();
    if weight.is_empty() {
        o.absent.push(OptionalColumn::Weight);
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
    let Some(url) = pg_url() else { return };
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
