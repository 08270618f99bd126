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

/// The model JSON the page embeds for its script.
fn embedded_model(html: &str) -> serde_json::Value {
    let marker = "<script type=\"application/json\" id=\"idemcalc-model\">";
    let start = html.find(marker).expect("the embedded model") + marker.len();
    let end = start + html[start..].find("</script>").unwrap();
    serde_json::from_str(&html[start..end]).unwrap()
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

    // What the page starts from (the decision's scenario at its measured bytes per record, as
    // embedded in the page), and what Rust says the store is at 3 days.
    let html = std::fs::read_to_string(out.join("index.html")).unwrap();
    let base: ModelParams = serde_json::from_value(embedded_model(&html)["base"].clone()).unwrap();
    let summary: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("summary.json")).unwrap()).unwrap();
    assert_eq!(
        base.bytes_per_record,
        summary["decision"]["recommendation"]["bytes_per_record"]
            .as_f64()
            .unwrap(),
        "the what-if panel starts from the measured bytes per record"
    );
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
    // Issue 51, item 7: the retention control is not an input of the decision, so the card
    // the script recomputes from the run's counts is the card as written.
    for id in ["out-decision", "out-decision-note"] {
        assert!(text_of(&html, id).is_some_and(|t| !t.is_empty()), "{id}");
        let written = text_of(&html, id).map(|t| t.replace("&#x2f;", "/").replace("&amp;", "&"));
        assert_eq!(
            text_of(&dom, id),
            written,
            "{id}: the what-if's decision at the card's inputs"
        );
    }
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
        text_of(&dom, "out-cheapest").as_deref(),
        Some(idemcalc::format::human_duration(moved.cheapest_retention_s).as_str())
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

// ---- The page as people use it, through ChromeDriver (WebDriver over plain HTTP). ----

/// A WebDriver session on a ChromeDriver child process; both end when it drops.
struct Driver {
    child: std::process::Child,
    port: u16,
    session: String,
}

fn find_chromedriver() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os("CHROMEDRIVER") {
        return Some(PathBuf::from(p));
    }
    ["/usr/bin/chromedriver", "/usr/lib/chromium/chromedriver"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.is_file())
}

/// One HTTP/1.1 request with a JSON body; returns the JSON `value` of the answer.
fn http(
    port: u16,
    method: &str,
    path: &str,
    body: Option<&serde_json::Value>,
) -> serde_json::Value {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(("127.0.0.1", port)).expect("chromedriver");
    stream.set_read_timeout(Some(BROWSER_TIMEOUT)).unwrap();
    let body = body.map(|b| b.to_string()).unwrap_or_default();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    )
    .unwrap();
    // Read the head, then exactly Content-Length bytes: ChromeDriver keeps the connection open.
    let mut raw = Vec::new();
    let mut buf = [0u8; 8192];
    let head_end = loop {
        if let Some(i) = raw.windows(4).position(|w| w == b"\r\n\r\n") {
            break i + 4;
        }
        let n = stream.read(&mut buf).expect("an answer from chromedriver");
        assert!(n > 0, "chromedriver closed the connection");
        raw.extend_from_slice(&buf[..n]);
    };
    let head = String::from_utf8_lossy(&raw[..head_end]).to_ascii_lowercase();
    let length: usize = head
        .lines()
        .find_map(|l| l.strip_prefix("content-length:"))
        .and_then(|v| v.trim().parse().ok())
        .expect("a Content-Length");
    while raw.len() < head_end + length {
        let n = stream.read(&mut buf).expect("the rest of the answer");
        assert!(n > 0, "chromedriver closed the connection early");
        raw.extend_from_slice(&buf[..n]);
    }
    let payload = String::from_utf8_lossy(&raw[head_end..head_end + length]).into_owned();
    let v: serde_json::Value = serde_json::from_str(&payload)
        .unwrap_or_else(|e| panic!("{method} {path}: {e}: {payload}"));
    if let Some(err) = v["value"].get("error") {
        panic!("{method} {path}: {err}: {}", v["value"]["message"]);
    }
    v["value"].clone()
}

impl Driver {
    fn start(chromium: &Path, chromedriver: &Path, width: u32, height: u32) -> Driver {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap().port()
        };
        let child = Command::new(chromedriver)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start chromedriver");
        let started = Instant::now();
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(
                started.elapsed() < BROWSER_TIMEOUT,
                "chromedriver did not start"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        let caps = serde_json::json!({"capabilities": {"alwaysMatch": {
            "browserName": "chrome",
            "goog:chromeOptions": {
                "binary": chromium,
                "args": ["--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                         format!("--window-size={width},{height}")],
            }
        }}});
        let v = http(port, "POST", "/session", Some(&caps));
        let session = v["sessionId"].as_str().expect("a session").to_string();
        Driver {
            child,
            port,
            session,
        }
    }

    fn cmd(&self, method: &str, path: &str, body: serde_json::Value) -> serde_json::Value {
        let path = format!("/session/{}{path}", self.session);
        let body = (method == "POST").then_some(body);
        http(self.port, method, &path, body.as_ref())
    }

    fn go(&self, url: &str) {
        self.cmd("POST", "/url", serde_json::json!({ "url": url }));
    }

    fn js(&self, script: &str) -> serde_json::Value {
        self.js_with(script, "")
    }

    /// Runs `script` with `arg` as its `arguments[0]`.
    fn js_with(&self, script: &str, arg: &str) -> serde_json::Value {
        self.cmd(
            "POST",
            "/execute/sync",
            serde_json::json!({ "script": script, "args": [arg] }),
        )
    }

    /// A Chrome DevTools Protocol command: media emulation, device metrics.
    fn cdp(&self, cmd: &str, params: serde_json::Value) -> serde_json::Value {
        self.cmd(
            "POST",
            "/goog/cdp/execute",
            serde_json::json!({ "cmd": cmd, "params": params }),
        )
    }

    fn set_width(&self, width: u32, height: u32) {
        self.cmd(
            "POST",
            "/window/rect",
            serde_json::json!({ "width": width, "height": height }),
        );
    }

    /// Sends keys to the focused element, the way a keyboard does.
    fn keys(&self, keys: &str) {
        let actions: Vec<serde_json::Value> = keys
            .chars()
            .flat_map(|c| {
                [
                    serde_json::json!({"type": "keyDown", "value": c.to_string()}),
                    serde_json::json!({"type": "keyUp", "value": c.to_string()}),
                ]
            })
            .collect();
        self.cmd(
            "POST",
            "/actions",
            serde_json::json!({"actions": [{"type": "key", "id": "kbd", "actions": actions}]}),
        );
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        let _ = std::panic::catch_unwind(|| {
            http(
                self.port,
                "DELETE",
                &format!("/session/{}", self.session),
                None,
            )
        });
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Layout problems at the current width: elements wider than the viewport (outside a
/// container that scrolls them) and visible text smaller than 9 px, as rendered (SVG text is
/// scaled by its drawing).
const LAYOUT_CHECK: &str = r#"
var vw = document.documentElement.clientWidth, problems = [];
if (document.documentElement.scrollWidth > vw + 1) problems.push("page scrolls sideways: " + document.documentElement.scrollWidth + " > " + vw);
function scrolls(e) {
  for (var p = e.parentElement; p; p = p.parentElement) {
    var o = getComputedStyle(p).overflowX;
    if (o === "auto" || o === "scroll" || o === "hidden") return true;
  }
  return false;
}
function hidden(e) {
  for (var p = e; p && p.nodeType === 1; p = p.parentElement) {
    var cs = getComputedStyle(p);
    if (cs.display === "none" || cs.visibility === "hidden") return true;
    if (p.classList && p.classList.contains("sr-only")) return true;
    if (p.tagName === "DETAILS" && !p.open && p !== e && !(e.tagName === "SUMMARY" || e.closest("summary"))) return true;
  }
  return false;
}
document.querySelectorAll("body *").forEach(function (e) {
  if (hidden(e)) return;
  var r = e.getBoundingClientRect();
  if (r.width > 0 && r.right > vw + 1 && !scrolls(e)) problems.push("wider than the viewport: <" + e.tagName.toLowerCase() + " id=" + e.id + " class=" + e.getAttribute("class") + "> right " + Math.round(r.right));
  var own = Array.prototype.some.call(e.childNodes, function (n) { return n.nodeType === 3 && n.textContent.trim(); });
  if (!own || r.width === 0) return;
  var size = parseFloat(getComputedStyle(e).fontSize);
  var svg = e.closest && e.closest("svg");
  if (svg && svg.viewBox && svg.viewBox.baseVal && svg.viewBox.baseVal.width) {
    size = parseFloat(e.getAttribute("font-size") || size) * svg.getBoundingClientRect().width / svg.viewBox.baseVal.width;
  }
  if (size < 9) problems.push("text at " + size.toFixed(1) + " px: " + e.textContent.trim().slice(0, 40));
});
return problems.slice(0, 20);
"#;

/// The page the browser tests open, written once: two sizing scenarios, a failure
/// demonstration and a timeline, with a baseline. Its URL and folder.
fn page() -> &'static (String, PathBuf) {
    static PAGE: std::sync::OnceLock<(String, PathBuf)> = std::sync::OnceLock::new();
    PAGE.get_or_init(|| {
        // Two sizing scenarios, a failure demonstration and a timeline, with a baseline.
        let out = Path::new(env!("CARGO_TARGET_TMPDIR")).join("page-report");
        let before = Path::new(env!("CARGO_TARGET_TMPDIR")).join("page-report-before");
        let _ = std::fs::remove_dir_all(&out);
        let _ = std::fs::remove_dir_all(&before);
        let scenarios = tempfile::tempdir().unwrap();
        let small = |name: &str, seed: u64, extra: &str| {
            format!(
                "name = \"{name}\"\nseed = {seed}\n[engine]\nretention = \"1h\"\n{extra}[traffic]\nrate = 400\nduration = \"3h\"\ntarget = 300\nseries_points = 60\n[model]\npeak_rate = 2000\n[budgets]\nmax_store_gb = 25\nmax_duplicates_per_day = 300\nmax_cost_per_day = 2000\n"
            )
        };
        std::fs::write(
            scenarios.path().join("a-small.toml"),
            small("a-small", 5, ""),
        )
        .unwrap();
        std::fs::write(
            scenarios.path().join("b-small.toml"),
            small("b-small", 6, ""),
        )
        .unwrap();
        std::fs::write(
            scenarios.path().join("c-short-lease.toml"),
            small("c-short-lease", 7, "lease = \"1s\"\n"),
        )
        .unwrap();
        std::fs::copy(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/lease-takeover.toml"),
            scenarios.path().join("lease-takeover.toml"),
        )
        .unwrap();
        for (dir, extra) in [(&before, None), (&out, Some(before.join("summary.json")))] {
            let mut cmd = Command::new(BIN);
            cmd.args(["report", "--quiet", "--scenarios"])
                .arg(scenarios.path())
                .arg("--out")
                .arg(dir);
            if let Some(b) = extra {
                cmd.arg("--baseline").arg(b);
            }
            assert!(cmd.status().unwrap().success());
        }
        let url = format!(
            "file://{}",
            out.join("index.html").canonicalize().unwrap().display()
        );
        (url, out)
    })
}

/// Chromium and ChromeDriver, or `None` (outside CI) when they are not installed.
fn browsers() -> Option<(PathBuf, PathBuf)> {
    let (Some(chromium), Some(chromedriver)) = (find_chromium(), find_chromedriver()) else {
        if std::env::var_os("CI").is_some() {
            panic!(
                "chromium and chromedriver must be installed in CI (apt-get install chromium chromium-driver)"
            );
        }
        eprintln!(
            "SKIPPED the page test: chromium or chromedriver is not installed (apt-get install chromium chromium-driver)"
        );
        return None;
    };
    Some((chromium, chromedriver))
}

#[test]
fn the_page_works_on_phones_in_print_from_links_and_by_keyboard() {
    let Some((chromium, chromedriver)) = browsers() else {
        return;
    };
    let (url, out) = page();
    let url = url.clone();
    let d = Driver::start(&chromium, &chromedriver, 1440, 1000);
    d.go(&url);
    assert_eq!(d.js("return document.body.getAttribute('data-ready')"), "1");
    assert_eq!(d.js("return document.body.getAttribute('data-errors')"), "");

    // Above the fold: the decision, with its store size, duplicates and cost.
    let fold = d.js(
        "var r = document.getElementById('decision').getBoundingClientRect(); return [r.top, r.bottom, window.innerHeight];",
    );
    assert!(
        fold[1].as_f64().unwrap() <= fold[2].as_f64().unwrap(),
        "the decision must be above the fold at 1440 px: {fold}"
    );
    let cards = d.js("return Array.from(document.querySelectorAll('#decision .card .label')).map(e => e.textContent)");
    assert_eq!(cards.as_array().unwrap().len(), 4, "{cards}");
    // The comparison with the baseline is on the page.
    assert!(
        d.js("return document.querySelectorAll('#comparison tbody tr').length")
            .as_u64()
            .unwrap()
            >= 4
    );

    // Layout at desktop and phone widths.
    for (w, h) in [(1440, 1000), (390, 844)] {
        d.set_width(w, h);
        d.js("window.dispatchEvent(new Event('resize')); return 1");
        let problems = d.js(LAYOUT_CHECK);
        assert_eq!(
            problems.as_array().unwrap().len(),
            0,
            "at {w} px: {problems:#}"
        );
    }
    d.set_width(1440, 1000);

    // Keyboard: the tabs of a tab list move with the arrow keys, Home and End.
    let tabs = d
        .js("return Array.from(document.querySelectorAll('#scenarios [role=tab]')).map(t => t.id)");
    let tabs: Vec<String> = tabs
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap().to_string())
        .collect();
    assert_eq!(tabs.len(), 2, "two sizing scenarios: {tabs:?}");
    d.js(&format!(
        "document.getElementById('{}').focus(); return 1",
        tabs[0]
    ));
    d.keys("\u{E014}"); // ArrowRight
    assert_eq!(d.js("return document.activeElement.id"), tabs[1].as_str());
    assert_eq!(
        d.js(&format!(
            "return document.getElementById('{}').getAttribute('aria-selected')",
            tabs[1]
        )),
        "true"
    );
    assert_eq!(
        d.js("return getComputedStyle(document.getElementById('sc-b-small')).display"),
        "block"
    );
    assert_eq!(
        d.js("return getComputedStyle(document.getElementById('sc-a-small')).display"),
        "none"
    );
    d.keys("\u{E011}"); // Home
    assert_eq!(d.js("return document.activeElement.id"), tabs[0].as_str());
    // Each chart's values are in a table a keyboard reaches.
    assert!(
        d.js("return document.querySelectorAll('details.data table').length")
            .as_u64()
            .unwrap()
            >= 3
    );

    // The URL fragment: moving controls and tabs writes it; opening it restores the view.
    d.js("var c = document.getElementById('ctl-replicas'); c.value = String(Number(c.value) + 1); c.dispatchEvent(new Event('input', {bubbles: true})); return 1");
    d.js("var c = document.getElementById('ctl-retention_s'); c.value = String(Number(c.value) + 2); c.dispatchEvent(new Event('input', {bubbles: true})); return 1");
    d.js(&format!(
        "document.getElementById('{}').click(); return 1",
        tabs[1]
    ));
    let hash = d.js("return location.hash").as_str().unwrap().to_string();
    assert!(hash.contains("replicas=3"), "{hash}");
    assert!(hash.contains("scenario=b-small"), "{hash}");
    let view = "return [document.getElementById('val-replicas').textContent, document.getElementById('val-retention_s').textContent, document.getElementById('out-store_bytes').textContent, document.getElementById('out-decision').textContent, document.getElementById('tab-sc-b-small').getAttribute('aria-selected')]";
    let shown = d.js(view);
    d.go("about:blank");
    d.go(&format!("{url}{hash}"));
    assert_eq!(d.js(view), shown, "the link {hash} must reproduce the view");
    assert_eq!(d.js("return document.body.getAttribute('data-errors')"), "");

    // A larger saved response moves the bytes per record by its own size, from the measured
    // figure the panel starts at.
    d.go("about:blank");
    d.go(&format!("{url}#response_bytes=2000"));
    let moved = d.js("var m = JSON.parse(document.getElementById('idemcalc-model').textContent); return [Number(document.getElementById('out-bytes_per_record').getAttribute('data-value')), m.base.bytes_per_record, m.payload.response_bytes]");
    let m: Vec<f64> = moved
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_f64().unwrap())
        .collect();
    assert!(
        (m[0] - (m[1] + 2000.0 - m[2])).abs() < 1e-6,
        "bytes per record used {m:?}"
    );
    assert_eq!(d.js("return document.body.getAttribute('data-errors')"), "");

    // Issue 22: a link's values outside what the flag or file would take are refused, visibly,
    // and the controls stay where they were.
    d.go("about:blank");
    d.go(&format!("{url}#max_duplicates=-5&rate=99999999"));
    let note =
        d.js("var n = document.getElementById('fragment-note'); return [n.hidden, n.textContent]");
    assert_eq!(note[0], false, "{note}");
    let text = note[1].as_str().unwrap_or_default();
    assert!(
        text.contains("max_duplicates=-5") && text.contains("rate=99999999"),
        "{text}"
    );
    assert!(
        !d.js("return location.hash")
            .as_str()
            .unwrap_or_default()
            .contains("99999999"),
        "a refused value is not kept in the link"
    );

    // A target only the 30-day horizon meets, with the 25 GB store budget it breaks: the card
    // says none, in red, and names the store budget as what blocks it.
    let card = "var o = document.getElementById('out-decision'); return [o.textContent, o.parentNode.classList.contains('blocked'), document.getElementById('out-decision-note').textContent, document.getElementById('val-max_store_gb').textContent]";
    d.go("about:blank");
    d.go(&format!("{url}#max_duplicates=0.0001"));
    let blocked = d.js(card);
    assert_eq!(blocked[0], "none", "{blocked}");
    assert_eq!(blocked[1], true, "{blocked}");
    let why = blocked[2].as_str().unwrap_or_default();
    assert!(
        why.contains("breaks the store budget of 25 GB"),
        "the note names the blocking budget: {why}"
    );
    assert_eq!(
        blocked[3], "25 GB",
        "the store budget is a control: {blocked}"
    );
    // The store budget is adjustable: lifting it (from a link, as a slider move would) gives a
    // recommendation again, and the link says so.
    d.go("about:blank");
    d.go(&format!("{url}#max_duplicates=0.0001&max_store_gb=none"));
    let lifted = d.js(card);
    assert_ne!(lifted[0], "none", "{lifted}");
    assert_eq!(lifted[1], false, "{lifted}");
    assert_eq!(lifted[3], "none", "{lifted}");
    let hash = d.js("return location.hash");
    assert!(
        hash.as_str()
            .unwrap_or_default()
            .contains("max_store_gb=none"),
        "{hash}"
    );
    assert_eq!(d.js("return document.body.getAttribute('data-errors')"), "");

    // Print: every scenario shows, the controls do not.
    d.cdp(
        "Emulation.setEmulatedMedia",
        serde_json::json!({"media": "print"}),
    );
    let printed = d.js(
        "return [Array.from(document.querySelectorAll('.scenario')).filter(e => getComputedStyle(e).display === 'none').length, getComputedStyle(document.getElementById('controls')).display, document.querySelectorAll('.scenario').length]",
    );
    assert_eq!(printed[0], 0, "every scenario prints: {printed}");
    assert_eq!(printed[1], "none", "controls do not print: {printed}");
    assert_eq!(printed[2], 4, "{printed}");

    // Screenshots for a person, and for the README.
    drop(d);
    let profile = tempfile::tempdir().unwrap();
    for (name, size) in [("page-1440.png", "1440,2400"), ("page-390.png", "390,2400")] {
        let shot = out.join(name);
        run_browser(
            &chromium,
            profile.path(),
            &[
                format!("--screenshot={}", shot.display()),
                format!("--window-size={size}"),
                url.clone(),
            ],
        );
        assert!(shot.is_file(), "no screenshot {name}");
        println!("screenshot: {}", shot.display());
    }
}

/// Elements among `selector` that a reader cannot see without scrolling sideways: past the
/// viewport's right edge, or cut by a container that scrolls or clips them.
const CUT_OFF: &str = r#"
var vw = document.documentElement.clientWidth, out = [];
document.querySelectorAll(arguments[0]).forEach(function (e) {
  if (!e.getClientRects().length || getComputedStyle(e).visibility === "hidden") return;
  var r = e.getBoundingClientRect(), right = vw;
  for (var p = e.parentElement; p; p = p.parentElement) {
    var o = getComputedStyle(p).overflowX;
    if (o === "auto" || o === "scroll" || o === "hidden") right = Math.min(right, p.getBoundingClientRect().right);
  }
  if (r.right > right + 1 || r.left < -1) out.push(e.tagName.toLowerCase() + "." + e.className + " '" + e.textContent.trim().slice(0, 30) + "' right " + Math.round(r.right) + " > " + Math.round(right));
});
return out;
"#;

/// Pairs of text labels in one chart whose boxes overlap.
const OVERLAPS: &str = r#"
var out = [];
document.querySelectorAll(arguments[0]).forEach(function (svg) {
  var boxes = Array.from(svg.querySelectorAll("text")).filter(function (t) { return t.textContent.trim(); })
    .map(function (t) { return [t.textContent, t.getBoundingClientRect()]; });
  for (var i = 0; i < boxes.length; i++) for (var j = i + 1; j < boxes.length; j++) {
    var a = boxes[i][1], b = boxes[j][1];
    var w = Math.min(a.right, b.right) - Math.max(a.left, b.left), h = Math.min(a.bottom, b.bottom) - Math.max(a.top, b.top);
    if (w > 1 && h > 1) out.push(boxes[i][0] + " / " + boxes[j][0]);
  }
});
return out;
"#;

/// Relative luminance contrast of an element's text on the nearest background behind it.
const CONTRAST: &str = r#"
function rgb(c) { var m = c.match(/[\d.]+/g).map(Number); return m; }
function lum(c) { var v = rgb(c).slice(0, 3).map(function (x) { x /= 255; return x <= 0.03928 ? x / 12.92 : Math.pow((x + 0.055) / 1.055, 2.4); }); return 0.2126 * v[0] + 0.7152 * v[1] + 0.0722 * v[2]; }
function bg(e) { for (; e; e = e.parentElement) { var c = getComputedStyle(e).backgroundColor; if (rgb(c).length < 4 || rgb(c)[3] > 0) return c; } return "rgb(255,255,255)"; }
var out = [];
document.querySelectorAll(arguments[0]).forEach(function (e) {
  if (!e.getClientRects().length) return;
  var a = lum(getComputedStyle(e).color), b = lum(bg(e));
  var ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
  out.push([e.tagName.toLowerCase() + "." + e.className + " '" + e.textContent.trim().slice(0, 20) + "'", ratio, lum(bg(e))]);
});
return out;
"#;

#[test]
fn the_page_prints_on_a4_reads_on_a_phone_and_in_the_dark() {
    let Some((chromium, chromedriver)) = browsers() else {
        return;
    };
    let (url, out) = page();
    let d = Driver::start(&chromium, &chromedriver, 1440, 1000);
    let metrics = |width: u32, height: u32| {
        d.cdp(
            "Emulation.setDeviceMetricsOverride",
            serde_json::json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
    };
    let cut_off = |selector: &str| -> Vec<String> {
        serde_json::from_value(d.js_with(CUT_OFF, selector)).unwrap()
    };
    d.go(url);
    assert_eq!(d.js("return document.body.getAttribute('data-ready')"), "1");

    // Desktop: the trade-off's labels (budget, target, recommended, cheapest, now) never
    // sit on one another, nor do the static charts' axis labels.
    let overlaps = d.js_with(OVERLAPS, "#tradeoff svg, .scenario.active svg.chart");
    assert_eq!(
        overlaps,
        serde_json::json!([]),
        "overlapping labels at 1440 px"
    );
    let cut = cut_off(".verdict-cell, #glance .mark, #decision .card");
    assert!(cut.is_empty(), "cut off at 1440 px: {cut:#?}");

    // A phone, 390 px wide: the decision and every verdict on screen without scrolling
    // sideways, in each sizing scenario's tab.
    metrics(390, 844);
    d.js("window.dispatchEvent(new Event('resize')); return 1");
    let tabs = d
        .js("return Array.from(document.querySelectorAll('#scenarios [role=tab]')).map(t => t.id)");
    for tab in tabs.as_array().unwrap() {
        d.js(&format!(
            "document.getElementById('{}').click(); return 1",
            tab.as_str().unwrap()
        ));
        let cut = cut_off(
            "#decision h2, #decision .card .value, #verdict, #glance .mark, #glance .badge, .scenario.active .verdict-cell, #out-decision",
        );
        assert!(cut.is_empty(), "cut off at 390 px: {cut:#?}");
    }
    let overlaps = d.js_with(OVERLAPS, "#tradeoff svg");
    assert_eq!(
        overlaps,
        serde_json::json!([]),
        "overlapping labels at 390 px"
    );

    // Print on A4 (210 mm less 12 mm margins: 703 CSS px): every table's rightmost column is
    // inside the page box, nothing scrolls, and no chart label sits on another.
    d.cdp(
        "Emulation.setEmulatedMedia",
        serde_json::json!({"media": "print"}),
    );
    metrics(703, 1000);
    d.js("window.dispatchEvent(new Event('resize')); return 1");
    let cut = cut_off("table tr > :last-child, svg.chart");
    assert!(cut.is_empty(), "outside the A4 page box: {cut:#?}");
    let scrolls = d.js(
        "return Array.from(document.querySelectorAll('.tablewrap, .svgwrap, table')).filter(e => e.getClientRects().length && e.scrollWidth > e.clientWidth + 1).map(e => e.className + ' ' + e.scrollWidth + ' > ' + e.clientWidth)",
    );
    assert_eq!(scrolls, serde_json::json!([]), "scrolls in print");
    let overlaps = d.js_with(OVERLAPS, "svg.chart");
    assert_eq!(
        overlaps,
        serde_json::json!([]),
        "overlapping labels in print"
    );
    // The printed document itself: A4 pages, and not one per table row.
    let pdf = d.cmd(
        "POST",
        "/print",
        serde_json::json!({"page": {"width": 21.0, "height": 29.7}, "background": true}),
    );
    let pdf = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        pdf.as_str().unwrap(),
    )
    .unwrap();
    std::fs::write(out.join("page-print.pdf"), &pdf).unwrap();
    let pages = pdf_pages(&pdf);
    println!(
        "printed: {} ({pages} pages)",
        out.join("page-print.pdf").display()
    );
    assert!((1..=20).contains(&pages), "{pages} printed pages");

    // Dark: under prefers-color-scheme: dark the page is dark and its text keeps 4.5:1.
    metrics(1440, 1000);
    d.cdp(
        "Emulation.setEmulatedMedia",
        serde_json::json!({"media": "screen", "features": [{"name": "prefers-color-scheme", "value": "dark"}]}),
    );
    let body_lum = d.js("var m = getComputedStyle(document.body).backgroundColor.match(/\\d+/g).map(Number); return (m[0] + m[1] + m[2]) / 3");
    assert!(
        body_lum.as_f64().unwrap() < 60.0,
        "dark background: {body_lum}"
    );
    let contrast = d.js_with(
        CONTRAST,
        "h1, h2, .sub, .muted, .card .value, .card .label, a, .verdict-cell, .mark, .badge, td, th, code, .olabel, .oval, .note",
    );
    let low: Vec<&serde_json::Value> = contrast
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c[1].as_f64().unwrap() < 4.5)
        .collect();
    assert!(
        low.is_empty(),
        "text under 4.5:1 in the dark theme: {low:#?}"
    );
    assert_eq!(d.js("return document.body.getAttribute('data-errors')"), "");
}

/// The pages of a PDF: its page objects, `/Type /Page` (not `/Pages`), however spaced.
fn pdf_pages(pdf: &[u8]) -> usize {
    let text = String::from_utf8_lossy(pdf).replace(' ', "");
    text.matches("/Type/Page").count() - text.matches("/Type/Pages").count()
}

/// Tables whose right (or left) edge passes the panel they sit in, in every scenario's tab:
/// each tab is opened in turn, since a closed one is not laid out.
const TABLES_OUT_OF_CARDS: &str = r#"
var out = [];
function check(where) {
  document.querySelectorAll("table").forEach(function (t) {
    if (!t.getClientRects().length) return;
    var card = t.closest(".panel");
    if (!card) return;
    var r = t.getBoundingClientRect(), c = card.getBoundingClientRect();
    var m = where + ": table." + t.className + " " + Math.round(r.left) + "–" + Math.round(r.right) + " outside its panel " + Math.round(c.left) + "–" + Math.round(c.right);
    if ((r.right > c.right + 1 || r.left < c.left - 1) && out.indexOf(m) < 0) out.push(m);
  });
}
check("page");
document.querySelectorAll(".scenarios [role=tab]").forEach(function (t) { t.click(); check(t.getAttribute("data-tab")); });
return out;
"#;

/// Text in the charts of `selector` crossed by a line, a curve, a point or a ring drawn in the
/// same chart (grid lines aside): every mark is walked pixel by pixel and each point tested
/// against each text's box, as rendered.
const STRUCK_TEXT: &str = r#"
var out = [];
document.querySelectorAll(arguments[0]).forEach(function (svg) {
  var texts = Array.from(svg.querySelectorAll("text")).filter(function (t) { return t.textContent.trim() && t.getClientRects().length; })
    .map(function (t) { var r = t.getBoundingClientRect(); return [t.textContent.trim(), r.left + 1, r.top + 1, r.right - 1, r.bottom - 1]; });
  function at(e, x, y) { var p = svg.createSVGPoint(); p.x = x; p.y = y; return p.matrixTransform(e.getScreenCTM()); }
  function hit(e, p) {
    texts.forEach(function (t) {
      if (p.x > t[1] && p.x < t[3] && p.y > t[2] && p.y < t[4]) {
        var m = "'" + t[0] + "' crossed by " + e.tagName + (e.getAttribute("class") ? "." + e.getAttribute("class") : "");
        if (out.indexOf(m) < 0) out.push(m);
      }
    });
  }
  svg.querySelectorAll("path, line, circle").forEach(function (e) {
    if (e.classList.contains("grid")) return;
    if (e.tagName === "path") {
      for (var s = 0, n = e.getTotalLength(); s <= n; s += 1) { var q = e.getPointAtLength(s); hit(e, at(e, q.x, q.y)); }
    } else if (e.tagName === "line") {
      var x1 = +e.getAttribute("x1"), y1 = +e.getAttribute("y1"), x2 = +e.getAttribute("x2"), y2 = +e.getAttribute("y2");
      var len = Math.max(1, Math.hypot(x2 - x1, y2 - y1));
      for (var i = 0; i <= len; i++) hit(e, at(e, x1 + (x2 - x1) * i / len, y1 + (y2 - y1) * i / len));
    } else {
      var cx = +e.getAttribute("cx"), cy = +e.getAttribute("cy"), r = +e.getAttribute("r");
      for (var a = 0; a < 360; a += 3) hit(e, at(e, cx + r * Math.cos(a * Math.PI / 180), cy + r * Math.sin(a * Math.PI / 180)));
    }
  });
});
return out;
"#;

/// The page's text as a reader sees it, scripts and style sheets aside (the script's source
/// names `NaN`), after the script has run.
const PAGE_WORDS: &str = r#"
var copy = document.body.cloneNode(true);
copy.querySelectorAll("script, style").forEach(function (e) { e.remove(); });
return copy.textContent;
"#;

/// Text of the charts in `selector` that is outside the part of its chart on screen (its
/// wrapper scrolls or clips it), and the texts shown.
const CHART_TEXT_OFF_SCREEN: &str = r#"
var off = [], shown = [];
document.querySelectorAll(arguments[0]).forEach(function (svg) {
  if (!svg.getClientRects().length) return;
  var wrap = svg.closest(".svgwrap").getBoundingClientRect();
  svg.querySelectorAll("text").forEach(function (t) {
    var r = t.getBoundingClientRect(), s = t.textContent.trim();
    if (!s) return;
    if (r.right > wrap.right + 1 || r.left < wrap.left - 1) off.push(s + " at " + Math.round(r.left) + "–" + Math.round(r.right) + " of " + Math.round(wrap.left) + "–" + Math.round(wrap.right));
    else shown.push(s);
  });
});
return [off, shown];
"#;

/// Issue 36, item 7: the report page's defects a reviewer found with the bundled scenarios,
/// on the test's page.
/// 1. The budget table spilled out of its panel at 1440 px (right edge 1312 px, panel 1255).
/// 2. Chart labels under lines: "recommended 1h" struck by the 25 GB budget line, labels
///    crossed by curves in print, the cheapest ring over the "30d" tick; a caption naming
///    dashed lines hidden under the total.
/// 3. "NaN/day" in the model column.
/// 4. At 390 px the bytes-per-record chart showed full-width bars, no value, no 512 B line.
/// 6. Literal backticks in captions.
#[test]
fn issue_36_item_7_tables_labels_and_words_on_the_page() {
    let Some((chromium, chromedriver)) = browsers() else {
        return;
    };
    let (url, _) = page();
    let d = Driver::start(&chromium, &chromedriver, 1440, 1000);
    let metrics = |width: u32, height: u32| {
        d.cdp(
            "Emulation.setDeviceMetricsOverride",
            serde_json::json!({"width": width, "height": height, "deviceScaleFactor": 1, "mobile": false}),
        );
        d.js("window.dispatchEvent(new Event('resize')); return 1");
    };
    d.go(url);
    assert_eq!(d.js("return document.body.getAttribute('data-ready')"), "1");

    // 1, 2: at a desktop's and a phone's width, every table inside its panel and no chart
    // label of the trade-off crossed by anything drawn.
    for (w, h) in [(1440, 1000), (390, 844)] {
        metrics(w, h);
        let spilled = d.js(TABLES_OUT_OF_CARDS);
        assert_eq!(spilled, serde_json::json!([]), "at {w} px");
        let struck = d.js_with(STRUCK_TEXT, "#tradeoff svg");
        assert_eq!(struck, serde_json::json!([]), "at {w} px");
    }
    // 2, in print (A4 less its margins).
    d.cdp(
        "Emulation.setEmulatedMedia",
        serde_json::json!({"media": "print"}),
    );
    metrics(703, 1000);
    let struck = d.js_with(STRUCK_TEXT, "#tradeoff svg");
    assert_eq!(struck, serde_json::json!([]), "in print");
    d.cdp(
        "Emulation.setEmulatedMedia",
        serde_json::json!({"media": "screen"}),
    );
    metrics(1440, 1000);
    // Labels come after every line and carry a white halo, so none is ever struck through.
    let order = d.js(
        "var svg = document.querySelector('#tradeoff svg'), g = svg.lastElementChild; return [g.getAttribute('class'), g.querySelectorAll('text').length, Array.from(g.querySelectorAll('text')).every(t => t.getAttribute('paint-order') === 'stroke' && t.getAttribute('stroke') === '#fff')]",
    );
    assert_eq!(order[0], "labels", "{order}");
    assert!(order[1].as_u64().unwrap() >= 4, "{order}");
    assert_eq!(order[2], true, "{order}");
    // The caption names only what is drawn: the cost's dashed parts, the limits' purple
    // dashes, the grey "now" line and the simulated whiskers each exactly when they are there.
    let drawn = d.js(
        "var svg = document.querySelector('#tradeoff svg'); return [document.getElementById('tradeoff-legend').textContent, svg.querySelectorAll('path.part').length, svg.querySelectorAll('line.limit').length, svg.querySelectorAll('line.marker[stroke-dasharray]').length, svg.querySelectorAll('line.whisker').length]",
    );
    let legend = drawn[0].as_str().unwrap();
    let count = |i: usize| drawn[i].as_u64().unwrap();
    assert_eq!(
        legend.contains("storage grey and duplicates red"),
        count(1) > 0,
        "{drawn}"
    );
    assert_eq!(legend.contains("purple dashes"), count(2) > 0, "{drawn}");
    assert_eq!(legend.contains("grey dashed line"), count(3) > 0, "{drawn}");
    assert_eq!(legend.contains("Black whiskers"), count(4) > 0, "{drawn}");

    // 3, 6: words a reader must never see, before and after a control moves.
    let words = |when: &str| {
        let text = d.js(PAGE_WORDS);
        let text = text.as_str().unwrap();
        for bad in ["NaN", "undefined", "Infinity", "`"] {
            let at = text.find(bad).map(|i| {
                let before: String = text[..i].chars().rev().take(80).collect();
                let after: String = text[i..].chars().take(40).collect();
                let around = format!("{}{after}", before.chars().rev().collect::<String>());
                around.split_whitespace().collect::<Vec<_>>().join(" ")
            });
            assert_eq!(at, None, "{bad:?} on the page {when}");
        }
        assert!(text.contains("no model"), "{when}");
    };
    words("at load");
    d.js("var c = document.getElementById('ctl-done_fraction'); c.value = '0'; c.dispatchEvent(new Event('input', {bubbles: true})); return 1");
    words("with no timed-out call already done");

    // 4: on a phone the bytes-per-record chart shows each run's value and the assumed
    // 512 B line's label on screen, not past the chart's edge.
    metrics(390, 844);
    let seen = d.js_with(CHART_TEXT_OFF_SCREEN, "#chart-bytes svg.chart");
    assert_eq!(seen[0], serde_json::json!([]), "off screen at 390 px");
    let shown: Vec<&str> = seen[1]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t.as_str())
        .collect();
    assert!(shown.iter().any(|t| t.starts_with("assumed ")), "{shown:?}");
    for run in ["a-small", "b-small", "c-short-lease"] {
        assert!(
            shown
                .iter()
                .any(|t| t.starts_with(&format!("{run}: ")) && t.ends_with(" B")),
            "{run}'s value: {shown:?}"
        );
    }
    assert_eq!(d.js("return document.body.getAttribute('data-errors')"), "");
}
