//! The report in a real browser: headless Chromium opens `index.html`, the page's own script
//! moves the retention control (from the URL fragment, through the same `input` event a user's
//! slider move fires), and the store size it recomputes must be the analytic figure Rust
//! computes for that retention, formatted the same way. No console error is allowed. A
//! screenshot is kept next to the test's output for a person to look at.
//!
//! Needs Debian's `chromium` (`apt-get install chromium`; `.ci/run` installs it). Without it the
//! test fails when `CI` is set and otherwise says loudly that it was skipped.

use idemcalc::format::human_bytes;
use idemcalc::model::{self, ModelParams};
use idemcalc::traffic::RetryDelay;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BIN: &str = env!("CARGO_BIN_EXE_idemcalc");
/// A bound on one browser run: a hung browser must fail the test, not stall CI.
const BROWSER_TIMEOUT: Duration = Duration::from_secs(60);
/// The retention the test moves the control to: 3 days, the seed's suggestion.
const RETENTION_S: f64 = 259_200.0;

fn find_chromium() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHROMIUM") {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    for dir in std::env::split_paths(&path) {
        for name in ["chromium", "chromium-browser", "google-chrome"] {
            let candidate = dir.join(name);
            if candidate.is_file() {
                return Some(candidate);
            }
        }
    }
    None
}

/// Runs the browser with `args`, killing it after [`BROWSER_TIMEOUT`]; returns stdout, stderr.
fn run_browser(chromium: &Path, profile: &Path, args: &[String]) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let (out_path, err_path) = (dir.path().join("out"), dir.path().join("err"));
    let mut child = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--hide-scrollbars",
            "--enable-logging=stderr",
            "--v=0",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::fs::File::create(&err_path).unwrap())
        .spawn()
        .expect("start chromium");
    let started = Instant::now();
    loop {
        if child.try_wait().unwrap().is_some() {
            break;
        }
        if started.elapsed() > BROWSER_TIMEOUT {
            let _ = child.kill();
            let _ = child.wait();
            panic!("chromium did not finish within {BROWSER_TIMEOUT:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    (
        std::fs::read_to_string(out_path).unwrap_or_default(),
        std::fs::read_to_string(err_path).unwrap_or_default(),
    )
}

/// The value of `attr` on the first tag that contains `marker`.
fn attribute(dom: &str, marker: &str, attr: &str) -> Option<String> {
    let at = dom.find(marker)?;
    let start = dom[..at].rfind('<')?;
    let end = at + dom[at..].find('>')?;
    let tag = &dom[start..end];
    let key = format!("{attr}=\"");
    let from = tag.find(&key)? + key.len();
    let len = tag[from..].find('"')?;
    Some(tag[from..from + len].to_string())
}

/// The text of the element with `id`.
fn text_of(dom: &str, id: &str) -> Option<String> {
    let at = dom.find(&format!("id=\"{id}\""))?;
    let open_end = at + dom[at..].find('>')? + 1;
    let close = open_end + dom[open_end..].find('<')?;
    Some(dom[open_end..close].trim().to_string())
}

/// Console messages from the page: the page never logs when all is well.
fn console_lines(stderr: &str) -> Vec<&str> {
    stderr
        .lines()
        .filter(|l| l.contains(":CONSOLE") && l.contains("index.html"))
        .collect()
}

#[test]
fn moving_the_retention_recomputes_the_store_size() {
    let Some(chromium) = find_chromium() else {
        if std::env::var_os("CI").is_some() {
            panic!(
                "chromium is not installed; CI must run the browser test (apt-get install chromium)"
            );
        }
        eprintln!();
        eprintln!("**************************************************************************");
        eprintln!("*  SKIPPED the browser test: chromium is not installed.                  *");
        eprintln!("*  Install it with `apt-get install -y chromium` (Debian) to run it.     *");
        eprintln!("**************************************************************************");
        return;
    };

    // A small report: one simulated scenario of a few hundred intents and the seed's timeline.
    let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("browser-report");
    let _ = std::fs::remove_dir_all(&out);
    let scenarios = tempfile::tempdir().unwrap();
    std::fs::write(
        scenarios.path().join("small.toml"),
        "name = \"small\"\nseed = 5\n[engine]\nretention = \"1h\"\n[traffic]\nrate = 400\nduration = \"3h\"\ntarget = 300\nseries_points = 60\n[model]\npeak_rate = 2000\n[budgets]\nmax_store_gb = 25\n",
    )
    .unwrap();
    std::fs::copy(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/lease-takeover.toml"),
        scenarios.path().join("lease-takeover.toml"),
    )
    .unwrap();
    let status = Command::new(BIN)
        .args(["report", "--quiet", "--scenarios"])
        .arg(scenarios.path())
        .arg("--out")
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());

    // What the page starts from, and what Rust says the store is at 3 days.
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    // The page starts from the first simulated scenario (file order).
    let first_run = summary["scenarios"]
        .as_array()
        .unwrap()
        .iter()
        .find_map(|s| s["runs"].as_array().and_then(|r| r.first()))
        .expect("a simulated run");
    let base: ModelParams = serde_json::from_value(first_run["model"]["params"].clone()).unwrap();
    let at_start = model::estimate(&base, &RetryDelay::seed());
    let moved = model::estimate(
        &ModelParams {
            retention_s: RETENTION_S,
            ..base
        },
        &RetryDelay::seed(),
    );
    let expected = human_bytes(moved.store_bytes);
    assert_ne!(
        human_bytes(at_start.store_bytes),
        expected,
        "the move must change the figure"
    );

    let index = out.join("index.html").canonicalize().unwrap();
    let url = format!("file://{}#retention={RETENTION_S}", index.display());
    let profile = tempfile::tempdir().unwrap();
    let (dom, stderr) = run_browser(
        &chromium,
        profile.path(),
        &["--dump-dom".into(), url.clone()],
    );

    assert_eq!(
        attribute(&dom, "<body", "data-ready").as_deref(),
        Some("1"),
        "the page's script did not run to its end\n{stderr}"
    );
    assert_eq!(
        attribute(&dom, "<body", "data-errors").as_deref(),
        Some(""),
        "errors in the page"
    );
    let console = console_lines(&stderr);
    assert!(
        console.is_empty(),
        "console messages:\n{}",
        console.join("\n")
    );
    assert_eq!(text_of(&dom, "val-retention_s").as_deref(), Some("3d"));
    assert_eq!(
        text_of(&dom, "out-store_bytes").as_deref(),
        Some(expected.as_str()),
        "the recomputed store size must be the analytic figure for 3 days"
    );
    let value: f64 = attribute(&dom, "id=\"out-store_bytes\"", "data-value")
        .unwrap()
        .parse()
        .unwrap();
    assert!((value - moved.store_bytes).abs() <= 1e-9 * moved.store_bytes);
    assert_eq!(
        text_of(&dom, "out-recommended").as_deref(),
        Some(idemcalc::format::human_duration(moved.recommended_retention_s).as_str())
    );

    // A screenshot for a person to look at.
    let shot = out.join("screenshot.png");
    let (_, stderr) = run_browser(
        &chromium,
        profile.path(),
        &[
            format!("--screenshot={}", shot.display()),
            "--window-size=1400,2400".into(),
            url,
        ],
    );
    assert!(
        shot.metadata().map(|m| m.len() > 10_000).unwrap_or(false),
        "no screenshot\n{stderr}"
    );
    eprintln!("browser test screenshot: {}", shot.display());
    println!("browser test screenshot: {}", shot.display());
}
