//! Issue 50's HTTP sweep of the two servers: `idemcalc serve` (the in-process carrier, an
//! SQLite store in a temporary directory) and `idemcalc carrier`, each sent a few hundred
//! crafted connections (`crafted`) over raw TCP, a few at a time, plus a slow-loris head and a
//! slow-loris body beside them. Every connection must be answered or closed within a bound (no
//! hang); no answer may be a 500 (the server turns a panicking handler into one); every
//! refusal with a body must be the server's documented error body (serve: RFC 9457 problem
//! details as `serve::problem` writes them; carrier: `{"reason"}`). Afterwards the server must
//! still be alive, `/healthz` 200, a valid request still served, and SIGTERM must end it with
//! exit 0 and no panic on its stderr.

use super::common;
use super::crafted::{Case, Target, cases};
use super::wire::{Answer, Exchange, exchange, read_answers};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::net::TcpStream;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

/// Connections open at once.
const WORKERS: usize = 8;
/// serve's head and body deadlines in this sweep: short, so cases that stall are cut soon.
const SERVE_DEADLINE_S: u64 = 3;
/// A connection neither answered nor closed within this hangs. Above every deadline a server
/// under attack keeps (serve's 3 s here; the carrier's fixed 10 s), with room for a loaded
/// machine.
const HANG: Duration = Duration::from_secs(25);

fn serve_target() -> Target {
    Target {
        path: "/labels",
        auth: Some("Bearer tok-fulfilment"),
        key: |n| format!("\"attack-{n}\""),
        fields: |n| {
            vec![
                ("order_id", n.to_string()),
                ("parcel_no", "1".into()),
                ("weight_g", "1450".into()),
                ("service", "\"ground\"".into()),
            ]
        },
    }
}

fn carrier_target() -> Target {
    Target {
        path: "/v1/labels",
        auth: None,
        key: |n| format!("carrier:attack:{n}"),
        fields: |n| {
            vec![
                ("order_id", n.to_string()),
                ("parcel_no", "1".into()),
                ("label_version", "1".into()),
                ("service", "\"ground\"".into()),
                ("weight_g", "1450".into()),
            ]
        },
    }
}

/// What is wrong with one of serve's answers, if anything: a 500, or a refusal with a body
/// that is not the problem details `serve::problem` writes (`type` `/problems/CODE`, `title`,
/// `status` equal to the answer's, `detail`, `code`).
fn serve_fault(a: &Answer) -> Option<String> {
    if a.status == 500 {
        return Some("a 500: a handler failed".into());
    }
    if a.status < 400 || a.body.is_empty() {
        return None;
    }
    if a.header("content-type") != Some(b"application/problem+json".as_slice()) {
        return Some(format!(
            "{} with content-type {:?}: {}",
            a.status,
            a.header("content-type").map(String::from_utf8_lossy),
            String::from_utf8_lossy(&a.body)
        ));
    }
    let Ok(v) = serde_json::from_slice::<serde_json::Value>(&a.body) else {
        return Some(format!(
            "{}: not JSON: {}",
            a.status,
            String::from_utf8_lossy(&a.body)
        ));
    };
    let code = v["code"].as_str().unwrap_or_default();
    let ok = !code.is_empty()
        && v["type"] == format!("/problems/{code}")
        && v["title"].as_str().is_some_and(|t| !t.is_empty())
        && v["status"] == a.status
        && v["detail"].is_string();
    (!ok).then(|| format!("{}: not a problem as serve writes them: {v}", a.status))
}

/// What is wrong with one of the carrier's answers: a 500, or a refusal with a body that is not
/// its documented `{"reason": "…"}`.
fn carrier_fault(a: &Answer) -> Option<String> {
    if a.status == 500 {
        return Some("a 500: a handler failed".into());
    }
    if a.status < 400 || a.body.is_empty() {
        return None;
    }
    let json = a
        .header("content-type")
        .is_some_and(|t| t.starts_with(b"application/json"));
    let reason = serde_json::from_slice::<serde_json::Value>(&a.body)
        .ok()
        .and_then(|v| v["reason"].as_str().map(str::to_string))
        .is_some_and(|r| !r.is_empty());
    (!(json && reason)).then(|| {
        format!(
            "{} is not {{\"reason\"}} as JSON: {}",
            a.status,
            String::from_utf8_lossy(&a.body)
        )
    })
}

/// Every case on its own connection, `WORKERS` at a time; each one's exchange, in order.
fn run_cases(addr: &str, cases: &[Case]) -> Vec<Exchange> {
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<Exchange>>> = Mutex::new((0..cases.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..WORKERS {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(case) = cases.get(i) else { break };
                    let x = exchange(addr, &case.bytes, case.expect, HANG);
                    done.lock().unwrap()[i] = Some(x);
                }
            });
        }
    });
    done.into_inner().unwrap().into_iter().flatten().collect()
}

/// The faults of a sweep, one line per case that has one, and the tally of what came back.
fn judge(
    cases: &[Case],
    exchanges: &[Exchange],
    fault: fn(&Answer) -> Option<String>,
) -> (Vec<String>, BTreeMap<String, usize>) {
    let mut faults = Vec::new();
    let mut tally = BTreeMap::new();
    for (case, x) in cases.iter().zip(exchanges) {
        if x.hung {
            faults.push(format!(
                "{}: no answer and no close within {HANG:?}",
                case.name
            ));
        }
        if x.answers.is_empty() {
            *tally.entry("closed unanswered".to_string()).or_default() += 1;
        }
        for a in &x.answers {
            *tally.entry(a.status.to_string()).or_default() += 1;
            if let Some(f) = fault(a) {
                faults.push(format!("{}: {f}", case.name));
            }
        }
    }
    (faults, tally)
}

/// A head sent a byte at a time, never finished: how long until the server closed it, or
/// `None` if it did not within [`HANG`].
fn slow_head(addr: &str) -> Option<Duration> {
    let started = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    let head = b"POST /labels HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    let mut i = 0;
    while started.elapsed() < HANG {
        let byte = head.get(i).copied().unwrap_or(b'a');
        if s.write_all(&[byte]).is_err() {
            return Some(started.elapsed());
        }
        i += 1;
        let x = read_answers(&mut s, 1, Instant::now() + Duration::from_millis(200));
        if x.closed {
            return Some(started.elapsed());
        }
    }
    None
}

/// A whole head, then its body a byte at a time: the answer the server gave (or none, if it
/// closed), or `Err` if it did neither within [`HANG`].
fn slow_body(addr: &str, head: &str) -> Result<Option<Answer>, String> {
    let started = Instant::now();
    let mut s = TcpStream::connect(addr).unwrap();
    s.write_all(head.as_bytes()).unwrap();
    while started.elapsed() < HANG {
        if s.write_all(b" ").is_err() {
            break;
        }
        let x = read_answers(&mut s, 1, Instant::now() + Duration::from_millis(200));
        if x.closed || !x.answers.is_empty() {
            return Ok(x.answers.into_iter().next());
        }
    }
    let x = read_answers(&mut s, 1, Instant::now() + Duration::from_secs(1));
    if x.closed || !x.answers.is_empty() {
        return Ok(x.answers.into_iter().next());
    }
    Err(format!("neither answered nor closed within {HANG:?}"))
}

/// `GET /healthz` on a fresh connection: its status.
fn health(addr: &str) -> Option<u16> {
    let x = exchange(
        addr,
        b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        1,
        HANG,
    );
    x.answers.first().map(|a| a.status)
}

/// One valid request of `target` (intent `n`) on a fresh connection: its answer.
fn one_valid(addr: &str, target: &Target, n: u64) -> Answer {
    let body = format!(
        "{{{}}}",
        (target.fields)(n)
            .iter()
            .map(|(k, v)| format!("\"{k}\":{v}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let auth = target
        .auth
        .map(|a| format!("Authorization: {a}\r\n"))
        .unwrap_or_default();
    let request = format!(
        "POST {} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n{auth}Idempotency-Key: {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        target.path,
        (target.key)(n),
        body.len()
    );
    let x = exchange(addr, request.as_bytes(), 1, HANG);
    x.answers
        .into_iter()
        .next()
        .expect("an answer to a valid request")
}

/// Everything the sweep of one server found.
struct Swept {
    faults: Vec<String>,
    tally: BTreeMap<String, usize>,
    loris_head: Option<Duration>,
    loris_body: Result<Option<Answer>, String>,
}

/// The crafted cases against the server at `addr`, with the two slow-loris clients beside them.
fn sweep(addr: &str, cases: &[Case], fault: fn(&Answer) -> Option<String>, path: &str) -> Swept {
    let body_head = format!(
        "POST {path} HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer tok-fulfilment\r\nIdempotency-Key: \"loris\"\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"
    );
    std::thread::scope(|s| {
        let head = s.spawn(|| slow_head(addr));
        let body = s.spawn(|| slow_body(addr, &body_head));
        let exchanges = run_cases(addr, cases);
        let (faults, tally) = judge(cases, &exchanges, fault);
        Swept {
            faults,
            tally,
            loris_head: head.join().unwrap(),
            loris_body: body.join().unwrap(),
        }
    })
}

fn assert_no_faults(what: &str, swept: &Swept, n: usize) {
    assert!(
        swept.faults.is_empty(),
        "{what}: {} of {n} cases went wrong:\n{}",
        swept.faults.len(),
        swept.faults.join("\n")
    );
    assert!(
        swept.loris_head.is_some(),
        "{what}: a head sent a byte every 200 ms was never cut off"
    );
    eprintln!(
        "{what}: {n} crafted connections, answers by status {:?}; slow head closed after {:?}",
        swept.tally, swept.loris_head
    );
}

#[test]
fn serve_answers_or_closes_every_crafted_request_with_a_problem_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let deadline = format!("{SERVE_DEADLINE_S}s");
    let s = common::Server::on_sqlite(
        &dir.path().join("store.sqlite"),
        &["--header-timeout", &deadline, "--body-timeout", &deadline],
    );
    let target = serve_target();
    let cases = cases(&target, 7, 120);
    let swept = sweep(&s.addr, &cases, serve_fault, target.path);
    assert_no_faults("serve", &swept, cases.len());
    // The stalled body is answered 408, as a problem.
    match &swept.loris_body {
        Ok(Some(a)) => {
            assert_eq!(a.status, 408, "{}", String::from_utf8_lossy(&a.body));
            assert_eq!(serve_fault(a), None);
        }
        other => panic!("serve: a body sent a byte every 200 ms got {other:?}, not a 408"),
    }
    assert_eq!(
        health(&s.addr),
        Some(200),
        "serve: /healthz after the sweep"
    );
    let a = one_valid(&s.addr, &target, 99_000_001);
    assert_eq!(a.status, 201, "{}", String::from_utf8_lossy(&a.body));
    assert_eq!(
        a.header("content-type"),
        Some(b"application/json".as_slice())
    );
    let err = s.stop_ok();
    assert!(!err.contains("panicked"), "serve panicked:\n{err}");
}

#[test]
fn the_carrier_answers_or_closes_every_crafted_request_never_a_panic() {
    let dir = tempfile::tempdir().unwrap();
    let stderr = dir.path().join("stderr");
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args([
            "carrier",
            "--listen",
            "127.0.0.1:0",
            "--carrier-latency",
            "0s",
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::fs::File::create(&stderr).unwrap())
        .spawn()
        .unwrap();
    let url = common::listening_url(&mut child).expect("the carrier's listening line");
    let carrier = common::Killed(child);
    let addr = url.trim_start_matches("http://").to_string();
    let target = carrier_target();
    let cases = cases(&target, 8, 40);
    let swept = sweep(&addr, &cases, carrier_fault, target.path);
    assert_no_faults("carrier", &swept, cases.len());
    match &swept.loris_body {
        Ok(None) => {}
        Ok(Some(a)) => assert_eq!(carrier_fault(a), None, "{}", a.status),
        Err(e) => panic!("carrier: a body sent a byte every 200 ms: {e}"),
    }
    assert_eq!(
        health(&addr),
        Some(200),
        "carrier: /healthz after the sweep"
    );
    let a = one_valid(&addr, &target, 99_000_001);
    assert_eq!(a.status, 201, "{}", String::from_utf8_lossy(&a.body));
    let mut carrier = carrier;
    common::signal(&carrier.0, libc::SIGTERM);
    let (code, _) = common::wait_child(&mut carrier.0, HANG);
    let err = std::fs::read_to_string(&stderr).unwrap_or_default();
    assert_eq!(code, Some(0), "the carrier's exit on SIGTERM:\n{err}");
    assert!(!err.contains("panicked"), "the carrier panicked:\n{err}");
}
