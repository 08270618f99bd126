//! The report at its boundary: the `idemcalc report` command on small scenario directories.
//! Every run here simulates a few hundred intents, so the suite takes seconds.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::common;

const BIN: &str = env!("CARGO_BIN_EXE_idemcalc");

fn dir_with(files: &[(&str, String)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (name, text) in files {
        std::fs::write(dir.path().join(name), text).unwrap();
    }
    dir
}

struct Run {
    code: i32,
    stdout: String,
    stderr: String,
}

fn report(scenarios: &Path, out: &Path) -> Run {
    let o = Command::new(BIN)
        .args(["report", "--scenarios"])
        .arg(scenarios)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

fn timeline_scenario() -> String {
    std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/lease-takeover.toml"),
    )
    .unwrap()
}

#[test]
fn writes_every_file_and_the_same_json_twice() {
    let dir = dir_with(&[
        ("a.toml", common::tiny_scenario("a", 1, "max_store_gb = 10")),
        ("lease-takeover.toml", timeline_scenario()),
    ]);
    let out1 = tempfile::tempdir().unwrap();
    let out2 = tempfile::tempdir().unwrap();
    let r1 = report(dir.path(), out1.path());
    assert_eq!(r1.code, 0, "{}\n{}", r1.stdout, r1.stderr);
    let r2 = report(dir.path(), out2.path());
    assert_eq!(r2.code, 0, "{}", r2.stderr);

    for f in [
        "index.html",
        "summary.json",
        "summary.md",
        "tables/a-series.csv",
        "tables/a-series.parquet",
        "tables/a-outcomes.csv",
        "tables/a-figures.parquet",
    ] {
        assert!(out1.path().join(f).is_file(), "missing {f}");
    }
    let j1 = std::fs::read(out1.path().join("summary.json")).unwrap();
    let j2 = std::fs::read(out2.path().join("summary.json")).unwrap();
    assert!(
        j1 == j2,
        "same inputs and seed must give a byte-identical summary.json"
    );

    let json: serde_json::Value = serde_json::from_slice(&j1).unwrap();
    assert_eq!(json["schema_version"], 4);
    assert_eq!(
        json["scenarios"][0]["runs"][0]["config"]["carrier"]["label_price_cents"],
        600
    );
    assert_eq!(json["scenarios"][0]["kind"], "sizing");
    assert_eq!(json["scenarios"][1]["kind"], "timeline");
    // The headline decision is the first sizing scenario's, at its measured bytes per record.
    assert_eq!(json["decision"]["scenario"], "a");
    let measured = json["scenarios"][0]["runs"][0]["figures"]["bytes_per_record"]["estimate"]
        .as_f64()
        .unwrap();
    assert_eq!(
        json["decision"]["recommendation"]["bytes_per_record"].as_f64(),
        Some(measured)
    );
    assert_eq!(json["scenarios"][0]["name"], "a");
    assert_eq!(
        json["scenarios"][0]["runs"][0]["verdicts"][0]["status"],
        "ok"
    );
    assert_eq!(
        json["scenarios"][1]["timeline"]["tracking_no"],
        "GRD000918273"
    );
    let text = String::from_utf8_lossy(&j1);
    assert!(
        !text.contains("wall_seconds"),
        "no wall-clock time in the JSON"
    );
    assert!(
        !text.contains(&std::env::temp_dir().display().to_string()),
        "no temporary path in the JSON"
    );

    let md = std::fs::read_to_string(out1.path().join("summary.md")).unwrap();
    assert!(md.contains("| a | 400/s | 1h |"), "{md}");
    assert!(md.contains("All 1 budget checks hold"), "{md}");
    // The job summary leads with the decision, explains its marks and keeps timelines apart.
    let decision_at = md
        .find("### Recommended retention")
        .or_else(|| md.find("### No retention meets"))
        .expect("a decision");
    assert!(decision_at < md.find("### Sizing runs").unwrap(), "{md}");
    assert!(md.contains("Legend: ✅ holds"), "{md}");
    assert!(md.contains("### Timelines\n"), "{md}");
    assert!(
        !md.contains("| timeline |"),
        "no timeline row among the sizing rows: {md}"
    );
}

#[test]
fn a_broken_budget_exits_1_after_writing_everything() {
    let dir = dir_with(&[
        (
            "ok.toml",
            common::tiny_scenario("ok", 2, "max_duplicates_per_day = 1000000"),
        ),
        (
            "tight.toml",
            common::tiny_scenario("tight", 3, "max_store_gb = 0.001\nmax_cost_per_day = 0"),
        ),
    ]);
    let out = tempfile::tempdir().unwrap();
    let r = report(dir.path(), out.path());
    assert_eq!(r.code, 1, "{}\n{}", r.stdout, r.stderr);
    assert!(out.path().join("index.html").is_file());
    assert!(out.path().join("summary.json").is_file());
    // Each broken budget with its figure and its limit.
    assert!(r.stderr.contains("2 budgets broken"), "{}", r.stderr);
    assert!(
        r.stderr.contains("tight (1h): max_store_gb:") && r.stderr.contains("> 1 MB"),
        "{}",
        r.stderr
    );
    assert!(
        r.stderr.contains("tight (1h): max_cost_per_day:") && r.stderr.contains("> $0.00/day"),
        "{}",
        r.stderr
    );
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("summary.json")).unwrap()).unwrap();
    assert_eq!(json["broken_budgets"].as_array().unwrap().len(), 2);
    assert_eq!(json["broken_budgets"][0]["budget"], "max_store_gb");
    let html = std::fs::read_to_string(out.path().join("index.html")).unwrap();
    assert!(html.contains("2 of 3 budget checks broken"));
    // CI reads each breach with its interval and how far past the limit it is.
    let md = std::fs::read_to_string(out.path().join("summary.md")).unwrap();
    let line = md
        .lines()
        .find(|l| l.starts_with("- ❌ tight (1h): max_store_gb:"))
        .unwrap_or_else(|| panic!("no breach line in {md}"));
    assert!(
        line.contains("(95%: ") && line.contains("over by"),
        "{line}"
    );
}

/// A failure demonstration is not a sizing run: it has its own table in `summary.md`, its own
/// section on the page, and no decision.
#[test]
fn failure_demonstrations_stand_apart() {
    let failure = common::tiny_scenario("short-lease", 4, "")
        .replace("[engine]\n", "[engine]\nlease = \"1s\"\n");
    let dir = dir_with(&[
        ("a.toml", common::tiny_scenario("a", 1, "")),
        ("b.toml", failure),
    ]);
    let out = tempfile::tempdir().unwrap();
    let r = report(dir.path(), out.path());
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    // Outside a terminal the run says what it is doing instead of nothing (issue 22).
    assert!(r.stderr.contains("running: 2 scenarios"), "{}", r.stderr);
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("summary.json")).unwrap()).unwrap();
    assert_eq!(json["scenarios"][1]["kind"], "failure");
    assert!(json["scenarios"][1]["decision"].is_null());
    let md = std::fs::read_to_string(out.path().join("summary.md")).unwrap();
    // Issue 22: a folder without budgets says so, not "All 0 budget checks hold".
    assert!(md.contains("No budgets set"), "{md}");
    assert!(!md.contains("All 0 budget checks"), "{md}");
    let failures = md
        .find("### Failure demonstrations")
        .expect("a failure table");
    assert!(
        md[failures..].contains("| short-lease | `lease = 1s` |"),
        "{md}"
    );
    assert!(!md[..failures].contains("| short-lease |"), "{md}");
    let html = std::fs::read_to_string(out.path().join("index.html")).unwrap();
    assert!(html.contains("id=\"demonstrations\""));
    // The bytes chart's reference line is the model's assumption, as its tooltips say, not
    // the measured figure the what-if panel starts from (issue 22).
    assert!(html.contains("assumed 512 B"), "the reference line's label");
}

fn report_with(scenarios: &Path, out: &Path, extra: &[&str]) -> Run {
    let o = Command::new(BIN)
        .args(["report", "--quiet", "--scenarios"])
        .arg(scenarios)
        .arg("--out")
        .arg(out)
        .args(extra)
        .output()
        .unwrap();
    Run {
        code: o.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&o.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&o.stderr).into_owned(),
    }
}

/// `report --baseline`: another seed changes nothing real; a quadrupled response size changes
/// the store, which `max_store_growth` then refuses.
#[test]
fn a_baseline_comparison_marks_only_real_changes() {
    let before = tempfile::tempdir().unwrap();
    let dir = dir_with(&[("a.toml", common::tiny_scenario("a", 1, ""))]);
    let r = report_with(dir.path(), before.path(), &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let baseline = before.path().join("summary.json");

    let reseeded = dir_with(&[("a.toml", common::tiny_scenario("a", 2, ""))]);
    let out = tempfile::tempdir().unwrap();
    let r = report_with(
        reseeded.path(),
        out.path(),
        &["--baseline", baseline.to_str().unwrap()],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("summary.json")).unwrap()).unwrap();
    let changes = json["comparison"]["changes"].as_array().unwrap();
    assert!(changes.len() >= 4);
    assert!(
        changes.iter().all(|c| c["real"] == false),
        "another seed is not a change: {changes:#?}"
    );

    // Four times the saved response: in a run this small the store's record count moves by
    // ±15 % with the seed, so only a change well past that is beyond sampling noise.
    let quadrupled = common::tiny_scenario("a", 2, "max_store_growth = 0.10")
        .replace("[traffic]\n", "[traffic]\nresponse_bytes = \"1200B\"\n");
    let bigger = dir_with(&[("a.toml", quadrupled)]);
    let out = tempfile::tempdir().unwrap();
    let r = report_with(
        bigger.path(),
        out.path(),
        &["--baseline", baseline.to_str().unwrap()],
    );
    assert_eq!(
        r.code, 1,
        "the store grew past max_store_growth\n{}",
        r.stderr
    );
    assert!(r.stderr.contains("max_store_growth"), "{}", r.stderr);
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.path().join("summary.json")).unwrap()).unwrap();
    let store = json["comparison"]["changes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["figure"] == "store_bytes")
        .unwrap();
    assert_eq!(store["real"], true, "{store:#?}");
    assert!(store["relative"].as_f64().unwrap() > 0.3, "{store:#?}");
    let md = std::fs::read_to_string(out.path().join("summary.md")).unwrap();
    assert!(md.contains("### Against the baseline"), "{md}");
    // Issue 22: the change comes before the tables, the broken growth check is counted with the
    // others and shown in the run's Budgets cell, and no cell holds raw HTML.
    let against = md.find("### Against the baseline").unwrap();
    assert!(against < md.find("### Sizing runs").unwrap(), "{md}");
    assert!(md.contains("1 of 1 budget checks broken"), "{md}");
    assert!(md.contains("❌ max_store_growth ≤ +10.0%"), "{md}");
    assert!(!md.contains("<br>"), "{md}");
    // Which input changed, not only which figure.
    assert!(md.contains("Inputs changed:"), "{md}");
    assert!(md.contains("response_bytes"), "{md}");
    assert!(
        json["comparison"]["changed_inputs"]
            .as_array()
            .is_some_and(|a| a.iter().any(|c| c["input"]
                .as_str()
                .is_some_and(|i| i.contains("response_bytes")))),
        "{:#?}",
        json["comparison"]["changed_inputs"]
    );
    let html = std::fs::read_to_string(out.path().join("index.html")).unwrap();
    assert!(html.contains("id=\"comparison\""));
    // The page's Budgets cell shows the growth check too, as the Markdown's does.
    assert!(
        html.contains("Store growth"),
        "the growth verdict on the page"
    );
    let verdicts = json["scenarios"][0]["runs"][0]["verdicts"]
        .as_array()
        .unwrap();
    assert!(
        verdicts
            .iter()
            .any(|v| v["budget"] == "max_store_growth" && v["status"] == "broken"),
        "{verdicts:#?}"
    );

    // A missing or foreign baseline is a clear error naming the flag or the file.
    let r = report_with(
        dir.path(),
        out.path(),
        &["--baseline", "/nonexistent/summary.json"],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("--baseline"), "{}", r.stderr);
    let foreign = out.path().join("foreign.json");
    std::fs::write(&foreign, "{\"results\": []}").unwrap();
    let r = report_with(
        dir.path(),
        out.path(),
        &["--baseline", foreign.to_str().unwrap()],
    );
    assert_eq!(r.code, 2, "{}", r.stderr);
    assert!(r.stderr.contains("foreign.json"), "{}", r.stderr);
}

#[test]
fn bad_scenarios_are_refused_with_file_line_and_field() {
    let dir = dir_with(&[
        ("good.toml", common::tiny_scenario("good", 1, "")),
        (
            "typo.toml",
            "name = \"typo\"\n[traffic]\nrate = 400\nreplicas = 3\n".to_string(),
        ),
        (
            "range.toml",
            "name = \"range\"\n[traffic]\nrate = 400\ndone_fraction = 1.6\n".to_string(),
        ),
        (
            "duration.toml",
            "name = \"duration\"\n[engine]\nretention = \"two days\"\n[traffic]\n".to_string(),
        ),
    ]);
    let out = tempfile::tempdir().unwrap();
    let r = report(dir.path(), out.path());
    assert_eq!(r.code, 2, "{}", r.stderr);
    for expected in [
        "typo.toml:4:1: field `traffic.replicas`",
        "range.toml:4: field `traffic.done_fraction`",
        "duration.toml:3:13: field `engine.retention`",
    ] {
        assert!(r.stderr.contains(expected), "{expected}\n{}", r.stderr);
    }
    assert!(
        !out.path().join("index.html").exists(),
        "nothing runs on bad input"
    );
}

#[test]
fn the_page_fetches_nothing() {
    let dir = dir_with(&[("a.toml", common::tiny_scenario("a", 4, ""))]);
    let out = tempfile::tempdir().unwrap();
    assert_eq!(report(dir.path(), out.path()).code, 0);
    let html = std::fs::read_to_string(out.path().join("index.html")).unwrap();
    for banned in [
        "src=\"http",
        "href=\"http",
        "url(",
        "@import",
        "<link",
        "<iframe",
        "fetch(",
        "XMLHttpRequest",
    ] {
        assert!(
            !html.contains(banned),
            "the page must be self-contained: {banned}"
        );
    }
    // The only absolute URL is the SVG namespace, which is a name, not a request.
    let urls = html.matches("http").count();
    let namespaces = html.matches("http://www.w3.org/2000/svg").count();
    assert_eq!(urls, namespaces);
    assert!(html.contains("<svg class=\"chart\""));
    assert!(html.len() < 2_000_000, "{} bytes", html.len());
}

#[test]
fn bench_results_add_the_throughput_chart() {
    let dir = dir_with(&[("a.toml", common::tiny_scenario("a", 5, ""))]);
    let bench = dir.path().join("bench.json");
    std::fs::write(
        &bench,
        r#"{"results": [{"store": "sqlite", "creates_per_s": 5200, "baseline_creates_per_s": 9100, "overhead_ratio": 1.75, "p50_us": 180, "p99_us": 950, "extra": true}]}"#,
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let o = report_with(
        dir.path(),
        out.path(),
        &["--bench", bench.to_str().unwrap()],
    );
    assert_eq!(o.code, 0, "{}", o.stderr);
    let html = std::fs::read_to_string(out.path().join("index.html")).unwrap();
    assert!(html.contains("Engine throughput"));
    assert!(html.contains("sqlite with keys"));
    // A row without runs has no interval, and says so instead of drawing none.
    assert!(html.contains("one run: no interval"), "{html}");
    let json = std::fs::read_to_string(out.path().join("summary.json")).unwrap();
    assert!(json.contains("\"creates_per_s\": 5200.0"));
}

/// What `idemcalc bench --runs 3 --format json` writes, as the report reads it: each side's
/// mean with the 95 % interval of its runs as a whisker, the paired ratio and the ceiling, in
/// the page and in summary.md; two bench files are two stores side by side.
#[test]
fn a_real_bench_run_is_drawn_with_its_intervals() {
    let dir = dir_with(&[("a.toml", common::tiny_scenario("a", 5, ""))]);
    let bench = dir.path().join("bench.json");
    let b = Command::new(BIN)
        .args([
            "bench",
            "--runs",
            "3",
            "--duration",
            "150ms",
            "--prefill",
            "200",
            "--workers",
            "2",
            "--format",
            "json",
        ])
        .output()
        .unwrap();
    assert_eq!(
        b.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&b.stderr)
    );
    std::fs::write(&bench, &b.stdout).unwrap();
    let v: serde_json::Value = serde_json::from_slice(&b.stdout).unwrap();
    let ci = &v["engine_summary"]["creates_per_s_ci95"];
    let (lo, hi, mean) = (
        ci["low"].as_f64().unwrap(),
        ci["high"].as_f64().unwrap(),
        v["creates_per_s"].as_f64().unwrap(),
    );
    assert!(lo <= mean && mean <= hi, "{ci}");
    // Student t with 2 degrees of freedom: half-width 4.303 σ / √3, from the runs' own σ.
    let sd = v["engine_summary"]["creates_per_s"]["sd"].as_f64().unwrap();
    let half = 4.302_652_7 * sd / 3f64.sqrt();
    assert!(
        ((hi - lo) / 2.0 - half).abs() <= 1e-6 * half.max(1.0),
        "{ci} sd {sd}"
    );

    let out = tempfile::tempdir().unwrap();
    let file = bench.to_str().unwrap();
    let o = report_with(dir.path(), out.path(), &["--bench", file, "--bench", file]);
    assert_eq!(o.code, 0, "{}", o.stderr);
    let html = std::fs::read_to_string(out.path().join("index.html")).unwrap();
    // Named by its commit mode; both files drawn.
    assert!(html.matches("sqlite:per_transaction with keys").count() >= 2);
    assert!(html.contains("over 3 runs"), "the interval's run count");
    assert!(html.contains("of the baseline (95%:"), "the paired ratio");
    let md = std::fs::read_to_string(out.path().join("summary.md")).unwrap();
    assert!(md.contains("### Engine throughput"), "{md}");
    let row = md
        .lines()
        .find(|l| l.starts_with("| sqlite:per_transaction |"))
        .unwrap();
    assert!(
        row.contains("over 3 runs") && row.contains("of the baseline (95%:"),
        "{row}"
    );
    if v["ceiling"].is_object() {
        assert!(html.contains("sqlite:per_transaction ceiling"));
        assert!(row.contains("engine at "), "{row}");
    }
}

#[test]
fn the_bundled_scenarios_all_load() {
    let dir: PathBuf = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let loaded = idemcalc::report::load_dir(&dir).unwrap_or_else(|errors| {
        panic!(
            "{}",
            errors
                .iter()
                .map(|e| e.to_string())
                .collect::<Vec<_>>()
                .join("\n")
        )
    });
    let names: Vec<String> = loaded.iter().map(|l| l.file_name()).collect();
    for required in [
        "baseline-400.toml",
        "peak-2000.toml",
        "retention-3d.toml",
        "lease-takeover.toml",
        "failure-new-key-per-attempt.toml",
        "failure-short-retention.toml",
        "failure-global-keys.toml",
        "failure-separate-store.toml",
        "failure-carrier-without-key.toml",
        "failure-short-lease.toml",
    ] {
        assert!(names.iter().any(|n| n == required), "missing {required}");
    }
    // The file name and the scenario's name agree, so a CI log points at the right file.
    for l in &loaded {
        assert_eq!(format!("{}.toml", l.scenario.name), l.file_name());
    }
}

#[test]
fn simulate_writes_a_report_too() {
    let out = tempfile::tempdir().unwrap();
    let page = out.path().join("run.html");
    let o = Command::new(BIN)
        .args([
            "simulate",
            "--quiet",
            "--retention",
            "1h",
            "--duration",
            "2h",
            "--sample",
            "0.0005",
            "--report",
        ])
        .arg(&page)
        .output()
        .unwrap();
    assert_eq!(
        o.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("id=\"decision\""));
    assert!(html.contains("Keep keys for") || html.contains("No retention meets"));
}

/// The example in scenarios/README.md is a valid scenario: documentation that compiles.
#[test]
fn the_readme_example_parses() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/README.md");
    let text = std::fs::read_to_string(&path).unwrap();
    let start = text.rfind("```toml\n").expect("a toml example") + "```toml\n".len();
    let end = start + text[start..].find("```").unwrap();
    let s = idemcalc::scenario::Scenario::parse(&path, &text[start..end]).unwrap();
    assert_eq!(s.sim_configs().len(), 3);
    assert!(s.budgets.is_some());
}

/// `report --compare-store`: the headline scenario measured again on each store and priced at
/// the headline's retention, the report's own store first; Redis (when the suite has it) is
/// priced as memory and says what it gives up.
#[test]
fn compared_stores_are_measured_and_priced() {
    let scenarios = dir_with(&[("a.toml", common::tiny_scenario("a", 3, "max_store_gb = 25"))]);
    let out = tempfile::tempdir().unwrap();
    let other = out.path().join("other.sqlite");
    let mut extra = vec![
        "--compare-store".to_string(),
        format!("sqlite:{}", other.display()),
    ];
    let redis = common::server_url(common::REDIS_URL_VAR);
    if let Some(url) = &redis {
        extra.extend(["--compare-store".to_string(), url.clone()]);
    }
    let extra: Vec<&str> = extra.iter().map(String::as_str).collect();
    let run = report_with(scenarios.path(), &out.path().join("r"), &extra);
    assert_eq!(run.code, 0, "{}{}", run.stdout, run.stderr);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("r/summary.json")).unwrap())
            .unwrap();
    let rows = summary["stores"].as_array().unwrap();
    assert_eq!(rows.len(), 2 + usize::from(redis.is_some()));
    assert_eq!(rows[0]["store"], "sqlite (in memory)");
    assert_eq!(rows[1]["kind"], "sqlite");
    let headline = &summary["decision"]["recommendation"];
    for r in rows {
        // The same traffic on another store: the same engine answers, so the same duplicates.
        assert_eq!(
            r["duplicate_labels_per_day"]["estimate"],
            rows[0]["duplicate_labels_per_day"]["estimate"]
        );
        let bytes = r["bytes_per_record"]["estimate"].as_f64().unwrap();
        assert!((200.0..5_000.0).contains(&bytes), "{r}");
        // The store scales with the measured bytes per record from the decision's store.
        let choice = if headline["recommended"].is_null() {
            &headline["closest"]
        } else {
            &headline["recommended"]
        };
        let choice = if choice.is_null() {
            &headline["cheapest"]
        } else {
            choice
        };
        let expected = choice["store_bytes"].as_f64().unwrap()
            / headline["bytes_per_record"].as_f64().unwrap()
            * bytes;
        let got = r["store_bytes"].as_f64().unwrap();
        assert!((got / expected - 1.0).abs() < 1e-9, "{got} vs {expected}");
        assert_eq!(r["retention"], choice["retention"]);
    }
    if redis.is_some() {
        let r = &rows[2];
        assert_eq!(
            (&r["kind"], &r["priced_as"]),
            (&"redis".into(), &"memory".into())
        );
        assert!(r["caveat"].as_str().unwrap().contains("eviction"));
        // RAM at $12 against disk at $0.10 a GB-month: the same bytes cost 120 times more.
        let per_byte = |r: &serde_json::Value| {
            r["storage_cost_per_day"].as_f64().unwrap() / r["store_bytes"].as_f64().unwrap()
        };
        assert!((per_byte(r) / per_byte(&rows[0]) - 120.0).abs() < 1e-6);
    }
    let md = std::fs::read_to_string(out.path().join("r/summary.md")).unwrap();
    assert!(md.contains("### Stores compared"), "{md}");
    let html = std::fs::read_to_string(out.path().join("r/index.html")).unwrap();
    assert!(html.contains("Stores compared"));
    // Named stores are kept, scratch ones dropped.
    assert!(other.exists());
}

/// Each scenario's inputs fingerprint: the same for the same validated inputs however the file
/// is written, different when an input changes.
#[test]
fn each_scenario_carries_a_hash_of_its_inputs() {
    use idemcalc::scenario::Scenario;
    let dir = tempfile::tempdir().unwrap();
    let a = dir.path().join("a.toml");
    let b = dir.path().join("b.toml");
    let c = dir.path().join("c.toml");
    std::fs::write(
        &a,
        "name = \"x\"\n[engine]\nretention = \"1h\"\n[traffic]\nrate = 400\n",
    )
    .unwrap();
    // The same inputs, written otherwise: a comment, a default spelled out, another order.
    std::fs::write(
        &b,
        "# same\nname = \"x\"\n[traffic]\nrate = 400.0\n[engine]\nretention = \"60m\"\n",
    )
    .unwrap();
    std::fs::write(
        &c,
        "name = \"x\"\n[engine]\nretention = \"2h\"\n[traffic]\nrate = 400\n",
    )
    .unwrap();
    let hash = |p: &Path| {
        let s = Scenario::load(p).unwrap();
        idemcalc::run::Plan::new(&s.settings)
            .unwrap()
            .inputs_sha256(s.timeline.as_ref(), s.budgets.as_ref())
    };
    assert_eq!(hash(&a), hash(&b));
    assert_ne!(hash(&a), hash(&c));
    assert_eq!(hash(&a).len(), 64);
}

/// Issue 34, item 7: the inputs hash covers a `--retry-cdf` file's contents, not its path. The
/// same points in another file give the same hash; one changed point changes it.
#[test]
fn inputs_hash_follows_the_retry_cdf_contents() {
    let dir = tempfile::tempdir().unwrap();
    let hash_of = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        let mut settings = idemcalc::settings::Settings::default();
        settings.retry.cdf = Some(path);
        idemcalc::run::Plan::new(&settings)
            .unwrap()
            .inputs_sha256(None, None)
    };
    let a = hash_of("a.csv", "10s,0.5\n1h,0.9\n3d,1\n");
    let moved = hash_of("b.csv", "10s,0.5\n1h,0.9\n3d,1\n");
    let changed = hash_of("a.csv", "10s,0.5\n1h,0.8\n3d,1\n");
    assert_eq!(a, moved, "the same contents elsewhere");
    assert_ne!(a, changed, "one point changed");
}

/// Issue 34, item 2: the what-if panel starts at the headline's decision, the one that weighs
/// the run's measured duplicates and timeouts, so the page's card and its headline give one
/// answer. Each bundled sizing scenario is the headline of its own report here.
#[test]
fn the_whatif_start_and_the_headline_agree_for_every_bundled_scenario() {
    let bundled = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut compared = 0;
    for name in ["baseline-400.toml", "peak-2000.toml", "retention-3d.toml"] {
        let dir = tempfile::tempdir().unwrap();
        let scenarios = dir.path().join("in");
        std::fs::create_dir(&scenarios).unwrap();
        std::fs::copy(bundled.join(name), scenarios.join(name)).unwrap();
        let out = dir.path().join("out");
        let run = report(&scenarios, &out);
        assert!(run.code == 0 || run.code == 1, "{name}: {}", run.stderr);
        let summary: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(out.join("summary.json")).unwrap())
                .unwrap();
        let headline = summary["decision"]["recommendation"]["recommended"]["retention"]
            .as_str()
            .unwrap_or("none")
            .to_string();
        let html = std::fs::read_to_string(out.join("index.html")).unwrap();
        let card = html
            .split("id=\"out-decision\">")
            .nth(1)
            .and_then(|rest| rest.split('<').next())
            .unwrap_or_else(|| panic!("{name}: no decision card"));
        assert_eq!(card, headline, "{name}: the what-if card and the headline");
        compared += 1;
    }
    assert_eq!(compared, 3);
}

/// `summary.md` copied the `--baseline` file's strings as raw Markdown and HTML: a baseline
/// could put a tag, a link or an image into the summary a CI job shows.
#[test]
fn baseline_strings_are_escaped_in_the_markdown_summary() {
    let before = tempfile::tempdir().unwrap();
    let dir = dir_with(&[("a.toml", common::tiny_scenario("a", 1, ""))]);
    let r = report_with(dir.path(), before.path(), &[]);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let path = before.path().join("summary.json");
    let mut json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&path).unwrap()).unwrap();
    let hostile = "<img src=x onerror=alert(1)>[click](https://evil.example)\n# heading |";
    json["scenarios"][0]["name"] = hostile.into();
    let baseline = before.path().join("baseline.json");
    std::fs::write(&baseline, serde_json::to_vec(&json).unwrap()).unwrap();

    let out = tempfile::tempdir().unwrap();
    let r = report_with(
        dir.path(),
        out.path(),
        &["--baseline", baseline.to_str().unwrap()],
    );
    assert_eq!(r.code, 0, "{}", r.stderr);
    let md = std::fs::read_to_string(out.path().join("summary.md")).unwrap();
    assert!(md.contains("Only in the baseline"), "{md}");
    assert!(
        md.contains("&lt;img src=x onerror=alert\\(1\\)&gt;"),
        "{md}"
    );
    assert!(!md.contains("<img"), "{md}");
    assert!(!md.contains("](https"), "{md}");
    assert!(!md.contains("\n# heading"), "{md}");
}

/// Issue 36, item 1: several callers sharing the label service, keys scoped per caller, is the
/// seed's design, not a defence removed: such a scenario (what `fit` writes for a log with
/// three callers) is sized and decided, not filed under the failure demonstrations.
#[test]
fn several_callers_are_sized_not_a_failure() {
    let text = common::tiny_scenario("three-callers", 5, "")
        .replace("target = 300", "target = 300\ncallers = 3");
    let dir = dir_with(&[("three-callers.toml", text)]);
    let out = tempfile::tempdir().unwrap();
    let run = report(dir.path(), out.path());
    assert_eq!(run.code, 0, "{}", run.stderr);
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(out.path().join("summary.json")).unwrap())
            .unwrap();
    let s = &summary["scenarios"][0];
    assert_eq!(s["kind"], "sizing", "{}", s["deviations"]);
    assert!(
        !summary["decision"].is_null(),
        "a decision for the headline"
    );
}

/// The text a reader sees on the page without script: tags, the style sheet and the script
/// (whose source mentions `NaN`) removed, entities decoded as far as they matter here.
fn page_text(html: &str) -> String {
    let mut visible = html.to_string();
    for (open, close) in [("<style", "</style>"), ("<script", "</script>")] {
        while let Some(i) = visible.find(open) {
            let end = visible[i..]
                .find(close)
                .map_or(visible.len(), |j| i + j + close.len());
            visible.replace_range(i..end, " ");
        }
    }
    let mut out = String::with_capacity(visible.len());
    let mut in_tag = false;
    for c in visible.chars() {
        match c {
            '<' => in_tag = true,
            '>' if in_tag => {
                in_tag = false;
                out.push(' ');
            }
            c if !in_tag => out.push(c),
            _ => {}
        }
    }
    // minijinja writes `/` as `&#x2f;`.
    let out = out
        .replace("&#x2f;", "/")
        .replace("&#39;", "'")
        .replace("&quot;", "\"")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&");
    out.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Issue 36, item 7 (the report page, found with the bundled scenarios), in the files the
/// report writes, before any script runs:
/// 3. the model column said `NaN/day` where the terminal says "no model";
/// 5. a figure with nothing seen read `0/day (0/day – 25,883/day)` in `summary.md` and on the
///    page, `≤ 2.6/day (95 %)` in the terminal: now `none seen, ≤ …` everywhere;
/// 6. captions showed Markdown's backticks literally;
/// 7. "1 replicates", "1 copies";
/// 8. a run without a steady window labelled its store "(steady)" on the page and in the
///    terminal; it is "(at the end)" in both;
/// 9. "72406s of 108h": spans in one unit, from the one duration formatter.
#[test]
fn issue_36_item_7_the_page_says_what_the_terminal_says() {
    // Arrivals (2 h) stop before one retention (3 h) has passed: no steady window.
    let short = common::tiny_scenario("short", 3, "max_duplicates_per_day = 300")
        .replace("retention = \"1h\"", "retention = \"3h\"");
    // A failure demonstration, whose table in summary.md has the parcels left unlabelled.
    let forgetful = common::tiny_scenario("forgetful-carrier", 4, "")
        .replace("[traffic]", "[carrier]\nwindow = \"1h\"\n\n[traffic]");
    let dir = dir_with(&[("short.toml", short), ("z.toml", forgetful)]);
    let out = tempfile::tempdir().unwrap();
    let r = report(dir.path(), out.path());
    assert_eq!(r.code, 0, "{}\n{}", r.stdout, r.stderr);
    let html = std::fs::read_to_string(out.path().join("index.html")).unwrap();
    let text = page_text(&html);
    for word in ["NaN", "undefined", "Infinity", "`"] {
        assert!(
            !text.contains(word),
            "the page shows {word:?}: …{}…",
            text.find(word)
                .map(|i| &text[i.saturating_sub(120)..(i + 60).min(text.len())])
                .unwrap_or_default()
        );
    }
    assert!(text.contains("no model"), "the model column says so");
    assert!(
        html.contains("<code>idemcalc estimate --bytes-per-record</code>"),
        "backticks become code"
    );
    // Nothing was left unlabelled in so short a run: a one-sided bound, written one way.
    let md = std::fs::read_to_string(out.path().join("summary.md")).unwrap();
    assert!(text.contains("none seen, ≤ "), "the page's one-sided bound");
    assert!(md.contains("0/day (none seen, ≤ "), "{md}");
    assert!(!md.contains("0/day (0/day – "), "{md}");
    assert!(
        !text.contains(" 0/day 0/day – "),
        "nothing seen is not a two-sided interval from 0"
    );
    // Plurals agree with their counts.
    assert!(text.contains("1 replicate;"), "one replicate");
    assert!(!text.contains(" 1 replicates") && !text.contains(" 1 copies"));
    // No steady window: the store is labelled as read at the end, never "(steady)".
    let tab = &html[html.find("id=\"sc-short\"").expect("the scenario's tab")..];
    let tab = page_text(&tab[..tab.find("</article>").unwrap()]);
    assert!(tab.contains("Store size (at the end)"), "the page's label");
    assert!(
        !tab.contains("(steady)"),
        "no steady window, no \"(steady)\""
    );
    // Spans from the one duration formatter: "2h of arrivals", not "7200s".
    assert!(text.contains(" 2h of arrivals ("), "the sampling line");

    // The terminal says the same for the same run.
    let o = Command::new(BIN)
        .args([
            "simulate",
            "--quiet",
            "--rate",
            "400",
            "--retention",
            "3h",
            "--duration",
            "2h",
            "--target",
            "300",
            "--seed",
            "3",
        ])
        .output()
        .unwrap();
    let cli = String::from_utf8_lossy(&o.stdout);
    assert_eq!(o.status.code(), Some(0), "{cli}");
    assert!(cli.contains("store size (at the end)"), "{cli}");
    assert!(!cli.contains("(steady)"), "{cli}");
    assert!(cli.contains("none seen, ≤ "), "{cli}");
    assert!(!cli.contains("(95 %)"), "{cli}");
    assert!(cli.contains("1 replicate,"), "{cli}");
}
