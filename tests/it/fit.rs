//! `idemcalc fit`: the round trip through `simulate --request-log`, and what it says about bad
//! or repeat-free logs.

use std::path::{Path, PathBuf};
use std::process::Command;

use idemcalc::fit::{self, FitOptions};
use idemcalc::scenario::Scenario;
use idemcalc::traffic::RetryDelay;

fn idemcalc(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(args)
        .output()
        .unwrap()
}

fn ok(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "exit {:?}: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn path(dir: &Path, name: &str) -> PathBuf {
    dir.join(name)
}

/// The simulation's inputs come back out of its own request log, inside their intervals.
///
/// Full fidelity (`--sample 1`) at 1 create/s for 12 h: 43,200 keys, 5 % of them timed out
/// (about 2,200 retries), so every interval is narrow and every retry is followed to its end.
#[test]
fn fit_recovers_the_simulations_inputs_from_its_request_log() {
    let dir = tempfile::tempdir().unwrap();
    let log = path(dir.path(), "requests.parquet");
    let out = path(dir.path(), "fitted.toml");
    ok(idemcalc(&[
        "simulate",
        "--rate",
        "1",
        "--retention",
        "1h",
        "--duration",
        "12h",
        "--sample",
        "1",
        "--timeout-rate",
        "0.05",
        "--done-fraction",
        "0.6",
        "--response-bytes",
        "median=300B,p99=2kB",
        "--request-log",
        log.to_str().unwrap(),
        "--quiet",
        "--format",
        "json",
    ]));
    let json = ok(idemcalc(&[
        "fit",
        log.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
        "--format",
        "json",
    ]));
    let f: serde_json::Value = serde_json::from_str(&json).unwrap();
    let inside = |e: &serde_json::Value, truth: f64, what: &str| {
        let (lo, hi) = (
            e["ci95_low"].as_f64().unwrap(),
            e["ci95_high"].as_f64().unwrap(),
        );
        assert!(
            lo <= truth && truth <= hi,
            "{what}: {truth} outside [{lo}, {hi}]"
        );
    };
    assert_eq!(f["bad_rows"]["total"], 0);
    inside(&f["rate_per_s"], 1.0, "rate");
    inside(&f["timeout_fraction"], 0.05, "timeout fraction");
    inside(&f["done_fraction"], 0.6, "done fraction");

    // The seed's CDF at its own points. Seven intervals at once: each is widened to 99.7 %
    // (×1.5) so that the test asks "inside its interval" of all seven without a 30 % chance
    // of one miss by luck.
    let seed = RetryDelay::seed();
    let cdf = f["retry_cdf"].as_array().unwrap();
    for &(t, truth) in &idemcalc::traffic::SEED_POINTS {
        let p = cdf
            .iter()
            .find(|p| p["delay_s"].as_f64() == Some(t))
            .unwrap_or_else(|| panic!("no CDF point at {t} s"));
        let a = &p["arrived"];
        let est = a["estimate"].as_f64().unwrap();
        let half = (a["ci95_high"].as_f64().unwrap() - a["ci95_low"].as_f64().unwrap()) / 2.0;
        assert!(
            (est - truth).abs() <= 1.5 * half.max(1e-9),
            "CDF at {t} s: {est} ± {half} vs the seed's {truth}"
        );
        assert_eq!(seed.cdf(t), truth);
    }

    // Payload sizes: every derived key is padded to the seed's 36 B; responses are log-normal
    // with median 300 B and p99 2 kB. 43,200 samples pin the median within a percent or two and
    // the p99 within a few.
    assert_eq!(f["key_bytes"]["median_bytes"], 36.0);
    assert_eq!(f["key_bytes"]["dist"], 36.0);
    let median = f["response_bytes"]["median_bytes"].as_f64().unwrap();
    let p99 = f["response_bytes"]["p99_bytes"].as_f64().unwrap();
    assert!((median / 300.0 - 1.0).abs() < 0.03, "median {median}");
    assert!((p99 / 2000.0 - 1.0).abs() < 0.08, "p99 {p99}");

    // The written scenario loads and carries what was fitted.
    let s = Scenario::load(&out).unwrap();
    let t = &s.settings.traffic;
    assert!((t.rate_per_s - f["rate_per_s"]["estimate"].as_f64().unwrap()).abs() < 1e-4);
    assert!((t.timeout_fraction - 0.05).abs() < 0.01);
    let fitted = idemcalc::run::Plan::new(&s.settings).unwrap().retry;
    assert!((fitted.cdf(3_600.0) - 0.94).abs() < 0.02);
    let evidence = s
        .settings
        .retry
        .fitted
        .as_ref()
        .unwrap()
        .evidence()
        .unwrap();
    assert_eq!(evidence.retries, f["retries"].as_u64().unwrap());
}

#[test]
fn bad_rows_are_counted_and_named() {
    let dir = tempfile::tempdir().unwrap();
    let log = path(dir.path(), "log.csv");
    std::fs::write(
        &log,
        "time,caller,idempotency_key,status,response_bytes\n\
         0,a,k1,201,300\n\
         1.5,a,k2,,\n\
         yesterday,a,k3,201,300\n\
         3,a,,201,300\n\
         4,a,k4,abc,300\n\
         2026-09-30T00:00:05Z,a,k5,201,-3\n\
         60,a,k2,201,300\n\
         100,b,k1,201,310\n",
    )
    .unwrap();
    let f = fit::fit(std::slice::from_ref(&log), &FitOptions::default()).unwrap();
    assert_eq!(f.rows, 8);
    assert_eq!(f.bad_rows.total, 4);
    assert_eq!(f.bad_rows.reasons.len(), 4, "{:?}", f.bad_rows.reasons);
    assert!(
        f.bad_rows.examples[0]
            .ends_with("log.csv: row 3: time: missing, or neither a number nor an RFC 3339 time"),
        "{:?}",
        f.bad_rows.examples
    );
    // Keys are per caller: (a,k1), (a,k2), (b,k1); k2 timed out and came back after 58.5 s.
    assert_eq!(f.keys, 3);
    assert_eq!(f.retries, 1);
    assert_eq!(f.latest_retry_s, Some(58.5));
    let t = f.timeout_fraction.unwrap();
    assert!((t.estimate - 1.0 / 3.0).abs() < 1e-12);
    let text = f.summary();
    assert!(text.contains("Bad rows, left out: 4"), "{text}");
}

#[test]
fn a_log_without_repeats_says_so_and_keeps_the_seeds_distribution() {
    let dir = tempfile::tempdir().unwrap();
    let log = path(dir.path(), "log.ndjson");
    let lines: String = (0..50)
        .map(|i| {
            format!(
                "{{\"time\":{},\"caller\":\"c\",\"idempotency_key\":\"key-{i}\",\"status\":201,\"response_bytes\":{}}}\n",
                i * 10,
                250 + i
            )
        })
        .collect();
    std::fs::write(&log, lines).unwrap();
    let out = path(dir.path(), "none.toml");
    let text = ok(idemcalc(&[
        "fit",
        log.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]));
    assert!(text.contains("No key repeats in this log"), "{text}");
    let s = Scenario::load(&out).unwrap();
    assert!(s.settings.retry.fitted.is_none());
    assert_eq!(
        idemcalc::run::Plan::new(&s.settings).unwrap().retry,
        RetryDelay::seed()
    );
    // 50 keys over 490 s.
    assert!((s.settings.traffic.rate_per_s - 50.0 / 490.0).abs() < 1e-6);
}

#[test]
fn unreadable_logs_name_the_file_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let log = path(dir.path(), "log.csv");
    std::fs::write(&log, "ts,key\n1,a\n5,b\n").unwrap();
    let out = idemcalc(&["fit", log.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("log.csv") && err.contains("missing column `time`"),
        "{err}"
    );
    // Every missing column at once, each with the flag and the likely candidate.
    assert!(err.contains("--time-column ts"), "{err}");
    assert!(
        err.contains("column `idempotency_key`") && err.contains("--key-column key"),
        "{err}"
    );
    // Renamed by flags, the same file reads.
    let text = ok(idemcalc(&[
        "fit",
        log.to_str().unwrap(),
        "--time-column",
        "ts",
        "--key-column",
        "key",
    ]));
    assert!(text.contains("Read 2 rows"), "{text}");
    // No status column: every call answered, and said; no timeout seen is a one-sided bound,
    // not `0% (95% 0% – 0%)`.
    assert!(text.contains("no `status` column"), "{text}");
    assert!(text.contains("Timeout fraction    none seen, ≤ "), "{text}");

    let weird = path(dir.path(), "log.xlsx");
    std::fs::write(&weird, "x").unwrap();
    let out = idemcalc(&["fit", weird.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("log.xlsx: unknown log format"));
}

/// Issue 21: `simulate --scenario FITTED.toml` dropped the fitted retry distribution (its
/// `--dry-run` showed `retry.fitted: null` and it simulated on the seed's curve), while
/// `report --scenarios` used it. The fitted points must reach the simulation, and give the
/// same distribution, model and late arrivals as the same points in a `--retry-cdf` file.
#[test]
fn simulate_scenario_keeps_the_fitted_retry_distribution() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = path(dir.path(), "fitted.toml");
    let log = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/logs/example-requests.csv");
    ok(idemcalc(&[
        "fit",
        log.to_str().unwrap(),
        "--out",
        scenario.to_str().unwrap(),
    ]));
    let s = Scenario::load(&scenario).unwrap();
    let spec = s
        .settings
        .retry
        .fitted
        .clone()
        .expect("the log has retries");

    let dry: serde_json::Value = serde_json::from_str(&ok(idemcalc(&[
        "simulate",
        "--scenario",
        scenario.to_str().unwrap(),
        "--dry-run",
    ])))
    .unwrap();
    let points = dry["retry"]["fitted"]["points"].as_array().unwrap();
    assert_eq!(points.len(), spec.points.len(), "{dry}");
    assert_eq!(points[0][0], spec.points[0].0.as_str());

    // The same points as a CDF file, with the fitted head and horizon as flags.
    let cdf = path(dir.path(), "fitted-cdf.csv");
    let text: String = spec
        .points
        .iter()
        .map(|(d, f)| format!("{d},{f}\n"))
        .collect();
    std::fs::write(&cdf, text).unwrap();
    let t = &s.settings.traffic;
    let rate = t.rate_per_s.to_string();
    let timeout = t.timeout_fraction.to_string();
    let done = t.done_fraction.to_string();
    let common = ["--retention", "1h", "--format", "json", "--quiet"];
    let from_scenario: Vec<&str> = ["simulate", "--scenario", scenario.to_str().unwrap()]
        .into_iter()
        .chain(common)
        .collect();
    let from_cdf: Vec<&str> = [
        "simulate",
        "--rate",
        &rate,
        "--timeout-fraction",
        &timeout,
        "--done-fraction",
        &done,
        "--retry-cdf",
        cdf.to_str().unwrap(),
        "--retry-min-delay",
        &spec.min_delay,
        "--retry-horizon",
        &spec.horizon,
    ]
    .into_iter()
    .chain(common)
    .collect();
    let a: serde_json::Value = serde_json::from_str(&ok(idemcalc(&from_scenario))).unwrap();
    let b: serde_json::Value = serde_json::from_str(&ok(idemcalc(&from_cdf))).unwrap();
    let late = |v: &serde_json::Value, k: &str| v["late_after_purge_per_day"][k].as_f64().unwrap();
    // One distribution, so one model figure; the seed's curve would give about a third.
    assert!(
        (late(&a, "analytic") / late(&b, "analytic") - 1.0).abs() < 1e-9,
        "{} vs {}",
        late(&a, "analytic"),
        late(&b, "analytic")
    );
    // Measured on each side: the intervals overlap.
    assert!(
        late(&a, "ci95_low") <= late(&b, "ci95_high")
            && late(&b, "ci95_low") <= late(&a, "ci95_high"),
        "{a:#} vs {b:#}"
    );
}

/// Issue 24, item 6: a log's file name and its callers are the user's text. A newline in the
/// file name must not end the fitted scenario's comment and write TOML, and a caller name with
/// terminal escape sequences must not reach the terminal raw.
#[test]
fn names_from_the_log_cannot_inject_toml_or_escapes() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("log\nengine.retention = \"1m\"\n.csv");
    let mut text = String::from("time,caller,idempotency_key,status\n");
    for i in 0..200 {
        let caller = if i % 2 == 0 {
            "a\u{1b}]0;pwned\u{7}"
        } else {
            "b"
        };
        text.push_str(&format!("{}.0,{caller},label:{i}:1:v1,201\n", i * 10));
    }
    std::fs::write(&log, text).unwrap();
    let out_file = dir.path().join("fitted.toml");
    let out = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args([
            "fit",
            log.to_str().unwrap(),
            "--out",
            out_file.to_str().unwrap(),
        ])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(!stdout.contains('\u{1b}'), "{stdout}");
    let fitted = std::fs::read_to_string(&out_file).unwrap();
    assert!(!fitted.contains("\nengine.retention"), "{fitted}");
    let scenario = Scenario::load(&out_file).unwrap();
    assert_eq!(scenario.settings.engine.retentions_s, vec![86_400.0]);
}

/// Issue 22: a Parquet `timestamp[ms|us|ns]` or `date` time column (what pyarrow, polars, Spark
/// and DuckDB write) failed with a raw "cannot create series from Timestamp". It is read as
/// seconds since 1970 whatever its unit, so the same requests fit the same as epoch seconds.
#[test]
fn parquet_timestamp_columns_are_read_in_any_unit() {
    use polars::prelude::*;
    use polars_io::prelude::ParquetWriter;
    let dir = tempfile::tempdir().unwrap();
    let secs: Vec<i64> = (0..600).map(|i| 1_700_000_000 + i * 7).collect();
    let keys: Vec<String> = (0..600).map(|i| format!("k{}", i % 500)).collect();
    let statuses: Vec<i64> = (0..600)
        .map(|i| if i % 50 == 0 { 0 } else { 201 })
        .collect();
    let csv = path(dir.path(), "seconds.csv");
    let mut text = String::from("time,idempotency_key,status\n");
    for ((t, k), st) in secs.iter().zip(&keys).zip(&statuses) {
        text.push_str(&format!("{t},{k},{st}\n"));
    }
    std::fs::write(&csv, text).unwrap();
    let expected = fit::fit(&[csv], &FitOptions::default()).unwrap();
    for (unit, per_s) in [
        (TimeUnit::Milliseconds, 1_000),
        (TimeUnit::Microseconds, 1_000_000),
        (TimeUnit::Nanoseconds, 1_000_000_000),
    ] {
        let ticks: Vec<i64> = secs.iter().map(|s| s * per_s).collect();
        let time = Series::new("time".into(), ticks)
            .cast(&DataType::Datetime(unit, None))
            .unwrap();
        let mut df = DataFrame::new_infer_height(vec![
            time.into(),
            Series::new("idempotency_key".into(), keys.clone()).into(),
            Series::new("status".into(), statuses.clone()).into(),
        ])
        .unwrap();
        let file = path(dir.path(), &format!("log-{per_s}.parquet"));
        ParquetWriter::new(std::fs::File::create(&file).unwrap())
            .finish(&mut df)
            .unwrap();
        let got = fit::fit(&[file], &FitOptions::default()).unwrap();
        assert_eq!(got.keys, expected.keys, "{unit:?}");
        assert_eq!(got.bad_rows.total, 0, "{unit:?}: {:?}", got.bad_rows);
        assert!(
            (got.rate_per_s.estimate - expected.rate_per_s.estimate).abs() < 1e-9,
            "{unit:?}: {} against {}",
            got.rate_per_s.estimate,
            expected.rate_per_s.estimate
        );
        assert!(
            (got.log_span_s - expected.log_span_s).abs() < 1e-6,
            "{unit:?}"
        );
    }
}

/// A log spilled to partitions on disk (here after 100 requests; by default after 16 M) fits
/// exactly as one held in memory: the partitions' statistics merge without loss.
#[test]
fn a_log_larger_than_memory_fits_the_same() {
    let example =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("scenarios/logs/example-requests.csv");
    let dir = tempfile::tempdir().unwrap();
    // The same requests as NDJSON and as Parquet (several of fit's read chunks), too.
    let ndjson = path(dir.path(), "example.ndjson");
    let text = std::fs::read_to_string(&example).unwrap();
    let mut lines = text.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let mut out = String::new();
    for line in lines {
        let fields: Vec<&str> = line.split(',').collect();
        let obj: serde_json::Map<String, serde_json::Value> = header
            .iter()
            .zip(&fields)
            .filter(|(_, v)| !v.is_empty())
            .map(|(k, v)| {
                let value = match *k {
                    "caller" | "idempotency_key" => serde_json::json!(v),
                    "replayed" => serde_json::json!(*v == "true"),
                    _ => serde_json::json!(v.parse::<f64>().unwrap()),
                };
                (k.to_string(), value)
            })
            .collect();
        out.push_str(&serde_json::to_string(&obj).unwrap());
        out.push('\n');
    }
    std::fs::write(&ndjson, out).unwrap();
    let in_memory = fit::fit(std::slice::from_ref(&example), &FitOptions::default()).unwrap();
    for log in [example, ndjson] {
        let spilled = fit::fit(
            std::slice::from_ref(&log),
            &FitOptions {
                max_rows_in_memory: Some(100),
                ..FitOptions::default()
            },
        )
        .unwrap();
        let (mut a, mut b) = (
            serde_json::to_value(&in_memory).unwrap(),
            serde_json::to_value(&spilled).unwrap(),
        );
        a.as_object_mut().unwrap().remove("files");
        b.as_object_mut().unwrap().remove("files");
        assert_eq!(a, b, "{}", log.display());
    }
}

/// Times in the wrong unit say so: relative milliseconds read as seconds (a 40-minute log as
/// four weeks), and seconds since 1970 read as milliseconds.
#[test]
fn a_time_unit_that_looks_wrong_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let ms = path(dir.path(), "ms.csv");
    let mut text = String::from("time,idempotency_key,status\n");
    for i in 0..3_000u64 {
        text.push_str(&format!("{},k{i},201\n", i * 800));
    }
    std::fs::write(&ms, text).unwrap();
    let f = fit::fit(std::slice::from_ref(&ms), &FitOptions::default()).unwrap();
    assert!(
        f.warnings.iter().any(|w| w.contains("--time-unit ms")),
        "{:?}",
        f.warnings
    );
    let right = fit::fit(
        &[ms],
        &FitOptions {
            time_unit: fit::TimeUnit::Ms,
            ..FitOptions::default()
        },
    )
    .unwrap();
    assert!(right.warnings.is_empty(), "{:?}", right.warnings);

    let epoch = path(dir.path(), "epoch.csv");
    let mut text = String::from("time,idempotency_key,status\n");
    for i in 0..3_000u64 {
        text.push_str(&format!("{},k{i},201\n", 1_764_633_600 + i));
    }
    std::fs::write(&epoch, text).unwrap();
    let f = fit::fit(
        std::slice::from_ref(&epoch),
        &FitOptions {
            time_unit: fit::TimeUnit::Ms,
            ..FitOptions::default()
        },
    )
    .unwrap();
    assert!(
        f.warnings
            .iter()
            .any(|w| w.contains("leave --time-unit out")),
        "{:?}",
        f.warnings
    );
    let right = fit::fit(&[epoch], &FitOptions::default()).unwrap();
    assert!(right.warnings.is_empty(), "{:?}", right.warnings);
}

/// A log whose latest request comes after every counted first retry: 3,000 keys 43 s apart,
/// one in ten timed out and retried after 1 s to 20 h; the sixth key's first retry comes
/// 1.366d after it (the latest counted one), and the last key's first retry at 1.2d hears
/// nothing too, so it asks again 1.412d after its first request, where the log ends.
fn log_with_a_late_second_retry() -> String {
    const START: u64 = 1_764_633_600;
    let mut rows = String::from("time,caller,idempotency_key,status,response_bytes,replayed\n");
    let end = START as f64 + 2_999.0 * 43.0 + 121_996.8;
    for i in 0..3_000u64 {
        let t0 = (START + i * 43) as f64;
        let key = format!("label:{}:1:v1", 700_000 + i);
        if i != 5 && i != 2_999 && i % 10 != 3 {
            rows.push_str(&format!("{t0:.3},fulfilment,{key},201,300,false\n"));
            continue;
        }
        rows.push_str(&format!("{t0:.3},fulfilment,{key},,,\n"));
        let retry = match i {
            5 => 118_022.4,
            2_999 => {
                rows.push_str(&format!("{:.3},fulfilment,{key},,,\n", t0 + 103_680.0));
                121_996.8
            }
            // Spread log-uniformly over 1 s to 20 h by the golden ratio's multiples.
            _ => (((i as f64) * 0.618_034).fract() * (72_000f64).ln()).exp(),
        };
        if t0 + retry <= end {
            rows.push_str(&format!(
                "{:.3},fulfilment,{key},200,300,true\n",
                t0 + retry
            ));
        }
    }
    rows
}

/// Words like `118022.4s`: a duration written as a count of seconds past a minute, which the
/// one formatter never writes for people.
fn raw_seconds(text: &str) -> Vec<String> {
    text.split(|c: char| c.is_whitespace() || ",;()[]\"'=".contains(c))
        .filter(|w| {
            w.strip_suffix('s')
                .filter(|n| !n.ends_with('m'))
                .and_then(|n| n.parse::<f64>().ok())
                .is_some_and(|v| v >= 60.0)
        })
        .map(str::to_string)
        .collect()
}

/// Issue 51, item 6: a fitted log's card said "Keep keys for 118022.4s" (1.366d, the latest
/// counted first retry) beside a latest retry of 1.412d; the file held `horizon = "1.366d"`
/// beside `latest_retry = "1.412d"`, and fit's text called a third delay "the horizon this log
/// supports" and printed "later than 1.634d 0% (95% 0% – 0%)". One horizon now, at least the
/// latest retry the log holds, stated once, every duration through the one formatter, and a
/// share of none a one-sided bound.
#[test]
fn one_horizon_covers_the_latest_retry_the_log_holds() {
    let dir = tempfile::tempdir().unwrap();
    let log = path(dir.path(), "late.csv");
    let out = path(dir.path(), "late.toml");
    std::fs::write(&log, log_with_a_late_second_retry()).unwrap();
    let text = ok(idemcalc(&[
        "fit",
        log.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ]));
    let f = fit::fit(std::slice::from_ref(&log), &FitOptions::default()).unwrap();
    let latest_s = f.latest_retry_s.unwrap();
    assert!((latest_s - 121_996.8).abs() < 1e-3, "{latest_s}");

    // The scenario file: one horizon, at least the latest retry, which stands beside it.
    let file = std::fs::read_to_string(&out).unwrap();
    let s = Scenario::load(&out).unwrap();
    let spec = s.settings.retry.fitted.clone().unwrap();
    let secs = |t: &str| idemcalc::duration::parse(t).unwrap().as_secs_f64();
    assert_eq!(spec.horizon, "1.412d", "{file}");
    assert_eq!(spec.latest_retry.as_deref(), Some("1.412d"), "{file}");
    assert!(secs(&spec.horizon) >= latest_s * (1.0 - 1e-9), "{file}");
    assert_eq!(file.matches("horizon").count(), 1, "{file}");
    let plan = idemcalc::run::Plan::new(&s.settings).unwrap();
    assert_eq!(plan.retry.max_horizon_s(), secs(&spec.horizon));

    // fit's text: the horizon once, no 0–0 interval, no duration in raw seconds.
    let horizon_lines: Vec<&str> = text
        .lines()
        .filter(|l| l.to_lowercase().contains("horizon"))
        .collect();
    assert_eq!(horizon_lines.len(), 1, "{text}");
    assert!(horizon_lines[0].contains("Horizon: 1.412d"), "{text}");
    assert_eq!(text.to_lowercase().matches("horizon").count(), 1, "{text}");
    assert!(!text.contains("0% – 0%"), "{text}");
    let later = text.lines().find(|l| l.contains("later than")).unwrap();
    assert!(later.contains("none seen, ≤ "), "{later}");
    for t in [&text, &file] {
        assert!(raw_seconds(t).is_empty(), "{:?} in {t}", raw_seconds(t));
    }

    // The decision on the fitted scenario keeps keys at least as long as the latest retry,
    // or says why not.
    let evidence = spec.evidence();
    let job = &plan.jobs[0];
    let inputs = idemcalc::decision::DecisionInputs {
        targets: s.settings.budgets.targets(),
        evidence,
        ..Default::default()
    };
    let rec = idemcalc::decision::decide(&job.params, &plan.retry, &inputs).unwrap();
    let chosen = rec.recommended.as_ref().unwrap_or(&rec.cheapest);
    let card = idemcalc::format::human_duration(chosen.retention_s);
    assert!(raw_seconds(&card).is_empty(), "{card}");
    assert!(
        chosen.retention_s >= latest_s * (1.0 - 1e-9)
            || rec.notes.iter().any(|n| n.contains("1.412d")),
        "{card}: {:?}",
        rec.notes
    );
}
