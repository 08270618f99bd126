//! `idemcalc load` against servers that give it nothing to check or too much to read
//! (issue "Reliability, round four"): every answer a 401, a 500 or a 307, nothing listening,
//! 201s without the label's identity, a 201 whose body never ends, answers that all come
//! after the deadline, and a carrier invoice that fails, lies, never answers or never ends.
//! Each server is started here on a free port; runs are a second or two at small rates.
//! No assertion is on wall time: a bounded wait is shown by the reason the run gives.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use idemcalc::load::{self, LoadConfig, LoadReport};
use std::collections::HashMap;
use std::net::SocketAddr;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// What the test server's `POST /labels` does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    /// Every request gets this status and a problem body (a 3xx with a `Location`).
    Status(u16),
    /// A 201 whose body has no `tracking_no`.
    NoIdentity,
    /// A correct idempotent server: the first run of a key waits `delay_ms`, then the
    /// carrier bills `buys` invoice lines for its parcel; a repeat gets the saved answer, a
    /// repeat while the first runs a 409.
    Labels { delay_ms: u64, buys: u64 },
}

/// One carrier invoice line, as `idemcalc carrier` writes the fields `load` reads.
#[derive(Clone, serde::Serialize)]
struct Line {
    order_id: i64,
    parcel_no: i64,
    label_version: i64,
    label_id: String,
}

struct Service {
    mode: Mode,
    /// Key → the saved answer, or `None` while its first run is in progress.
    records: Mutex<HashMap<String, Option<String>>>,
    invoice: Mutex<Vec<Line>>,
    runs: AtomicU64,
}

fn line(order_id: i64, label_id: &str) -> Line {
    Line {
        order_id,
        parcel_no: 1,
        label_version: 1,
        label_id: label_id.into(),
    }
}

async fn create_label(State(s): State<Arc<Service>>, headers: HeaderMap, body: Bytes) -> Response {
    let (delay_ms, buys) = match s.mode {
        Mode::Status(code) => {
            let status = StatusCode::from_u16(code).unwrap();
            let mut r = (status, format!(r#"{{"title":"test","status":{code}}}"#)).into_response();
            if (300..400).contains(&code) {
                r.headers_mut()
                    .insert("location", "http://127.0.0.1:9/elsewhere".parse().unwrap());
            }
            return r;
        }
        Mode::NoIdentity => {
            let n = s.runs.fetch_add(1, Ordering::SeqCst);
            return (StatusCode::CREATED, format!(r#"{{"label_id":"L-{n}"}}"#)).into_response();
        }
        Mode::Labels { delay_ms, buys } => (delay_ms, buys),
    };
    let key = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    {
        let mut records = s.records.lock().unwrap();
        match records.get(&key) {
            Some(Some(answer)) => {
                return (
                    StatusCode::CREATED,
                    [("idempotent-replayed", "true")],
                    answer.clone(),
                )
                    .into_response();
            }
            Some(None) => {
                return (StatusCode::CONFLICT, [("retry-after", "0")], "{}").into_response();
            }
            None => {
                records.insert(key.clone(), None);
            }
        }
    }
    tokio::time::sleep(Duration::from_millis(delay_ms)).await;
    let order: serde_json::Value = serde_json::from_slice(&body).unwrap();
    let order_id = order["order_id"].as_i64().unwrap();
    let n = s.runs.fetch_add(1, Ordering::SeqCst) + 1;
    let answer = format!(r#"{{"label_id":"L-{n}","tracking_no":"GRD{n:09}"}}"#);
    s.invoice
        .lock()
        .unwrap()
        .extend((0..buys).map(|_| line(order_id, &format!("L-{n}"))));
    s.records.lock().unwrap().insert(key, Some(answer.clone()));
    (StatusCode::CREATED, answer).into_response()
}

async fn invoice(State(s): State<Arc<Service>>) -> Response {
    let lines = s.invoice.lock().unwrap().clone();
    (StatusCode::OK, serde_json::to_string(&lines).unwrap()).into_response()
}

/// A server on a free port, running on its own runtime until dropped: `POST /labels` as its
/// mode says, `GET /v1/invoice` the lines billed, and invoices that go wrong.
struct TestServer {
    addr: SocketAddr,
    service: Arc<Service>,
    runtime: tokio::runtime::Runtime,
}

impl TestServer {
    fn start(mode: Mode) -> Self {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let service = Arc::new(Service {
            mode,
            records: Mutex::new(HashMap::new()),
            invoice: Mutex::new(Vec::new()),
            runs: AtomicU64::new(0),
        });
        let app = Router::new()
            .route("/labels", post(create_label))
            .route("/v1/invoice", get(invoice))
            .route(
                "/v1/invoice/500",
                get(|| async { (StatusCode::INTERNAL_SERVER_ERROR, "carrier down") }),
            )
            .route(
                "/v1/invoice/bad",
                get(|| async { "<html>not an invoice</html>" }),
            )
            .route(
                "/v1/invoice/never",
                get(|| async {
                    tokio::time::sleep(Duration::from_secs(3600)).await;
                    "[]"
                }),
            )
            .with_state(service.clone());
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        runtime.spawn(async move { axum::serve(listener, app).await });
        TestServer {
            addr,
            service,
            runtime,
        }
    }

    fn url(&self) -> reqwest::Url {
        format!("http://{}", self.addr).parse().unwrap()
    }

    /// A server on this one's runtime whose every answer is `head` and then a chunked body
    /// without end, 64 KiB a millisecond at most; returns its address and the bytes it sent.
    fn endless(&self, head: &'static str) -> (SocketAddr, Arc<AtomicU64>) {
        let listener = self
            .runtime
            .block_on(TcpListener::bind("127.0.0.1:0"))
            .unwrap();
        let addr = listener.local_addr().unwrap();
        let sent = Arc::new(AtomicU64::new(0));
        let total = sent.clone();
        self.runtime.spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let total = total.clone();
                tokio::spawn(async move {
                    // The request's head; its body, if any, is left unread.
                    let mut seen = Vec::new();
                    let mut buf = [0u8; 4096];
                    while !seen.windows(4).any(|w| w == b"\r\n\r\n") {
                        match socket.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => seen.extend_from_slice(&buf[..n]),
                        }
                    }
                    let chunk = vec![b'x'; 64 * 1024];
                    let mut frame = format!("{:x}\r\n", chunk.len()).into_bytes();
                    frame.extend_from_slice(&chunk);
                    frame.extend_from_slice(b"\r\n");
                    if socket.write_all(head.as_bytes()).await.is_err() {
                        return;
                    }
                    while socket.write_all(&frame).await.is_ok() {
                        total.fetch_add(frame.len() as u64, Ordering::Relaxed);
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    }
                });
            }
        });
        (addr, sent)
    }
}

/// A short run of the seed's client: late retries 100 times sooner, nothing lost.
fn config(url: reqwest::Url, rate_per_s: f64, secs: f64) -> LoadConfig {
    let mut cfg = LoadConfig::seed(url, rate_per_s, Duration::from_secs_f64(secs));
    cfg.time_scale = 100.0;
    cfg.lose_reply_fraction = 0.0;
    cfg.observe = Duration::from_secs(1);
    cfg.seed = 11;
    cfg.first_order = 70_000;
    cfg
}

fn run(cfg: &LoadConfig) -> LoadReport {
    load::run(cfg, &|_| {}).expect("the run completes")
}

fn idemcalc(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(args)
        .output()
        .unwrap()
}

fn closed_port() -> SocketAddr {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
}

/// Item 10: each way a run can check nothing fails it, and says which, first and last.
#[test]
fn a_run_that_checked_no_label_fails_and_says_why() {
    let refused = closed_port();
    let servers = [
        (
            Some(TestServer::start(Mode::Status(401))),
            "no request succeeded: 401 on",
            "pass --callers or --header",
        ),
        (
            Some(TestServer::start(Mode::Status(500))),
            "no request succeeded: 500 on",
            "the server failed every request",
        ),
        (
            Some(TestServer::start(Mode::Status(307))),
            "no request succeeded: 307 on",
            "redirects are not followed",
        ),
        (
            Some(TestServer::start(Mode::NoIdentity)),
            "no answer named a label",
            "no identity at `/tracking_no`",
        ),
        (None, "nothing answered at", "connect"),
    ];
    for (server, why, hint) in &servers {
        let url = server
            .as_ref()
            .map_or(format!("http://{refused}").parse().unwrap(), |s| s.url());
        let report = run(&config(url, 30.0, 1.0));
        assert!(report.counts.intents_started > 10, "{report:#?}");
        assert!(!report.ok, "{why}: {report:#?}");
        assert_eq!(report.checked.labelled_intents, 0);
        assert_eq!(report.checked.unchecked_share, 1.0);
        let first = &report.verdict.failures[0];
        assert!(first.contains(why) && first.contains(hint), "{first}");
        let broken = report
            .budgets
            .iter()
            .find(|v| v.budget == "unchecked_intents")
            .unwrap();
        assert!(!broken.ok, "{broken:?}");
        // The text opens with the reason and ends with the verdict.
        let text = report.text();
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        assert_eq!(lines[0], format!("FAILED: {first}"), "{text}");
        assert_eq!(*lines.last().unwrap(), lines[0], "{text}");
        let json = serde_json::to_value(&report).unwrap();
        assert_eq!(json["verdict"]["ok"], false);
        assert_eq!(json["checked"]["why"], first.as_str());
    }
    // The 401s are counted per status, and the share unchecked is every intent.
    let report = run(&config(servers[0].0.as_ref().unwrap().url(), 30.0, 1.0));
    assert_eq!(report.statuses[&401], report.counts.attempts_sent);
    let expected = format!(
        "401 on {n} of {n} attempts",
        n = report.counts.attempts_sent
    );
    assert!(report.verdict.failures[0].contains(&expected));
}

/// Item 10 from the command line: exit 1, the reason first on stdout (text) or on stderr
/// (JSON, whose `verdict` holds it too); a run that labels passes and says what it checked.
#[test]
fn the_command_line_fails_a_run_that_checked_nothing() {
    let server = TestServer::start(Mode::Status(401));
    let url = server.url().to_string();
    let common = ["--rate", "20", "--duration", "1s", "--quiet"];
    let out = idemcalc(&[&["load", &url][..], &common].concat());
    assert_eq!(out.status.code(), Some(1));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let first = stdout.lines().next().unwrap();
    assert!(
        first.starts_with("FAILED: no request succeeded: 401 on ")
            && first.ends_with("attempts; pass --callers or --header"),
        "{stdout}"
    );
    assert_eq!(stdout.trim_end().lines().last(), Some(first), "{stdout}");

    let out = idemcalc(&[&["load", &url, "--format", "json"][..], &common].concat());
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["ok"], false);
    let why = json["verdict"]["failures"][0].as_str().unwrap();
    assert!(why.starts_with("no request succeeded: 401"), "{json}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains(&format!("FAILED: {why}")), "{stderr}");

    let good = TestServer::start(Mode::Labels {
        delay_ms: 1,
        buys: 1,
    });
    let out = idemcalc(&[&["load", good.url().as_str()][..], &common].concat());
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let last = stdout.trim_end().lines().last().unwrap();
    assert!(last.starts_with("ok: a label was read for "), "{stdout}");
}

/// Item 14: the invoice is read for exactly the orders the run's intents labelled: intent n
/// labels order first + n, ids start at 1, and a dropped intent takes an id but sends
/// nothing. The carrier bills every label twice, and has a line for the order just before
/// the run's (another run's): every line of the run's orders is counted, and only those.
#[test]
fn the_invoice_counts_exactly_the_orders_the_run_sent() {
    let server = TestServer::start(Mode::Labels {
        delay_ms: 20,
        buys: 2,
    });
    let first = 50_000i64;
    server.service.invoice.lock().unwrap().extend([
        line(first, "another run's"),
        line(first - 1, "another run's"),
    ]);
    let invoice = format!("{}v1/invoice", server.url());
    let out = idemcalc(&[
        "load",
        server.url().as_str(),
        "--rate",
        "200",
        "--arrivals",
        "constant",
        "--duration",
        "1s",
        "--max-in-flight",
        "1",
        "--lose-replies",
        "0",
        "--first-order",
        &first.to_string(),
        "--carrier-invoice",
        &invoice,
        "--budget-duplicates",
        "1000000",
        "--format",
        "json",
        "--quiet",
    ]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stderr)));
    assert_eq!(out.status.code(), Some(0), "{json}");
    // With one request open at a time and 5 ms between arrivals, intents are dropped.
    assert!(json["dropped_intents"].as_u64().unwrap() > 0, "{json}");
    let labelled = json["checked"]["labelled_intents"].as_u64().unwrap();
    assert!(labelled > 5, "{json}");
    assert_eq!(
        json["invoice"]["lines"].as_u64(),
        Some(2 * labelled),
        "{json}"
    );
    assert_eq!(
        json["invoice"]["duplicate_purchases"].as_u64(),
        Some(labelled),
        "{json}"
    );
    // The first intent is id 1: order first + 1.
    assert_eq!(json["orders"]["first"].as_i64(), Some(first + 1), "{json}");
    assert_eq!(
        json["orders"]["count"].as_u64(),
        json["counts"]["intents_started"].as_u64()
    );
}

/// Item 12: an invoice that cannot be read keeps the report (stdout and `--out`), marks the
/// check not done with the reason, and fails the run; the wait and the size are bounded.
#[test]
fn an_invoice_that_cannot_be_read_keeps_the_report_and_fails_the_run() {
    let server = TestServer::start(Mode::Labels {
        delay_ms: 1,
        buys: 1,
    });
    let (endless, _) = server.endless("HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n");
    let refused = closed_port();
    let base = server.url();
    let cases = [
        (format!("{base}v1/invoice/500"), "HTTP 500"),
        (format!("{base}v1/invoice/bad"), "not a carrier invoice"),
        (
            format!("{base}v1/invoice/never"),
            "no complete answer within 1s (--invoice-timeout)",
        ),
        (
            format!("http://{endless}/v1/invoice"),
            "larger than --max-invoice-body (1 MiB)",
        ),
        (format!("http://{refused}/v1/invoice"), "connect"),
    ];
    let dir = tempfile::tempdir().unwrap();
    for (i, (invoice, reason)) in cases.iter().enumerate() {
        let out_file = dir.path().join(format!("result-{i}.json"));
        let first = (60_000 + i * 1000).to_string();
        let out = idemcalc(&[
            "load",
            base.as_str(),
            "--rate",
            "20",
            "--duration",
            "500ms",
            "--first-order",
            &first,
            "--carrier-invoice",
            invoice,
            "--invoice-timeout",
            "1s",
            "--max-invoice-body",
            "1MiB",
            "--format",
            "json",
            "--quiet",
            "--out",
            out_file.to_str().unwrap(),
        ]);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{invoice}: {stderr}");
        let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let said = json["invoice_unread"]["reason"].as_str().unwrap();
        assert!(said.contains(reason), "{invoice}: {said}");
        assert_eq!(json["invoice_unread"]["url"], invoice.as_str());
        assert!(json.get("invoice").is_none(), "{json}");
        assert!(json["checked"]["labelled_intents"].as_u64().unwrap() > 0);
        assert!(
            stderr.contains("FAILED: the carrier's invoice was not read: "),
            "{stderr}"
        );
        let budgets = json["budgets"].as_array().unwrap();
        assert!(
            budgets
                .iter()
                .any(|v| v["budget"] == "invoice_unread" && v["ok"] == false),
            "{json}"
        );
        let written: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&out_file).unwrap()).unwrap();
        assert_eq!(written, json);
    }
}

/// Item 11: a 201 whose body never ends is read up to `--max-body` and no further, counted
/// as an error of its own kind; the server's socket is closed, so it stops sending.
#[test]
fn a_body_without_end_is_cut_at_max_body_and_counted_as_an_error() {
    let host = TestServer::start(Mode::Status(500));
    let (addr, sent) = host.endless("HTTP/1.1 201 Created\r\ntransfer-encoding: chunked\r\n\r\n");
    let mut cfg = config(format!("http://{addr}").parse().unwrap(), 10.0, 1.0);
    cfg.max_body = 256 * 1024;
    cfg.max_attempts = 1;
    let report = run(&cfg);
    let attempts = report.counts.attempts_sent;
    assert!(attempts > 3, "{report:#?}");
    assert_eq!(
        report.errors.get("body: larger than --max-body (256 KiB)"),
        Some(&attempts),
        "{:?}",
        report.errors
    );
    assert_eq!(report.latency_ms["first_run"].count, 0);
    assert!(!report.ok);
    // What the server pushed before the closed socket stopped it: the ceiling and a few
    // chunks (about 390 kB measured), not the 36 MB an attempt heard out for its deadline and
    // observation window read before (the server paces itself to 64 KiB a millisecond).
    let per_attempt = sent.load(Ordering::Relaxed) / attempts;
    assert!(per_attempt < 8 << 20, "{per_attempt} bytes per attempt");
}

/// Item 13: answers after the deadline keep their latency: a `late` row, and the 2xx p99 a
/// budget is checked against includes them. A service answering everything in 400 ms
/// against a 250 ms deadline has a p99 of at least 400 ms, not none.
#[test]
fn late_answers_keep_their_latency_and_count_in_the_p99() {
    let server = TestServer::start(Mode::Labels {
        delay_ms: 400,
        buys: 1,
    });
    let mut cfg = config(server.url(), 20.0, 1.0);
    cfg.budgets.latency_ms_p99 = Some(300.0);
    let report = run(&cfg);
    let late = report.latency_ms["late"];
    assert!(late.count > 0, "{report:#?}");
    assert_eq!(late.count, report.counts.late_replies);
    // Sleeps are never shorter than asked: a floor, not a race.
    assert!(late.p50 >= 400.0, "{late:?}");
    assert_eq!(
        report.latency_ms["first_run"].count, 0,
        "every answer is late"
    );
    assert!(report.latency_ms["timeout"].count >= late.count);
    let p99 = report
        .budgets
        .iter()
        .find(|v| v.budget == "latency_ms_p99")
        .unwrap();
    assert!(p99.measured >= 400.0 && !p99.ok, "{p99:?}");
    assert!(
        report.checked.labelled_intents > 0,
        "late labels are checked"
    );
    assert!(!report.ok);
    assert!(
        report
            .verdict
            .failures
            .iter()
            .any(|f| f.starts_with("budget crossed: latency_ms_p99")),
        "{:?}",
        report.verdict.failures
    );
    assert!(
        report.text().lines().any(|l| l.starts_with("  late ")),
        "{}",
        report.text()
    );
    assert!(report.per_second.iter().map(|s| s.late).sum::<u64>() == late.count);
}
