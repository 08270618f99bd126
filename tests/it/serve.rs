//! `idemcalc serve` over real HTTP: the built binary on a free port per test, driven with
//! reqwest and `curl`, on SQLite, PostgreSQL (a scratch schema) and Redis (a scratch prefix).

use crate::common;

use common::{PG_URL_VAR, REDIS_URL_VAR, Server, TOKEN, client, signal};
use idemcalc::store::Store as _;
use reqwest::blocking::{Client, RequestBuilder};
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::process::Command;
use std::time::Duration;

const BODY: &str = r#"{"order_id":918273,"parcel_no":1,"weight_g":1450,"service":"ground"}"#;
const OTHER_BODY: &str = r#"{"order_id":918273,"parcel_no":1,"weight_g":1500,"service":"ground"}"#;

/// Requests of the tests in this file, on the server [`common::Server`] started.
impl Server {
    pub(crate) fn post(&self, client: &Client, key: Option<&str>, body: &str) -> RequestBuilder {
        let mut r = client
            .post(self.url("/labels"))
            .bearer_auth(TOKEN)
            .header("content-type", "application/json")
            .body(body.to_string());
        if let Some(k) = key {
            r = r.header("idempotency-key", k);
        }
        r
    }
}

/// The SQLite store at `path`, opened by the test: it opens only once the server has released it.
fn reopen(path: &std::path::Path) -> idemcalc::store::SqliteStore {
    idemcalc::store::SqliteStore::open(path, &Default::default()).unwrap()
}

/// The stores every status-table test runs on: SQLite always, PostgreSQL and Redis when their
/// variables are set (in CI they must be).
fn stores(dir: &std::path::Path) -> Vec<String> {
    let mut v = vec![format!("sqlite:{}", dir.join("store.sqlite").display())];
    for var in [PG_URL_VAR, REDIS_URL_VAR] {
        v.extend(common::server_url(var));
    }
    v
}

pub(crate) fn problem(
    r: reqwest::blocking::Response,
    status: u16,
    code: &str,
) -> serde_json::Value {
    assert_eq!(r.status().as_u16(), status, "{code}");
    assert_eq!(
        r.headers()["content-type"],
        "application/problem+json",
        "{code}"
    );
    let v: serde_json::Value = serde_json::from_str(&r.text().unwrap()).unwrap();
    assert_eq!(v["type"], format!("/problems/{code}"), "{v}");
    assert_eq!(v["status"], status, "{v}");
    assert!(v["title"].as_str().is_some_and(|t| !t.is_empty()), "{v}");
    assert!(v["detail"].as_str().is_some_and(|t| !t.is_empty()), "{v}");
    v
}

/// Every row of the seed's status table, and the header rules around it, on each store.
#[test]
fn every_row_of_the_status_table_over_http_on_every_store() {
    let dir = tempfile::tempdir().unwrap();
    for store in stores(dir.path()) {
        let s = Server::start(&store, &["--test-hooks"]);
        status_table(&s);
        let (code, err) = s.stop();
        assert_eq!(code, Some(0), "{store}: {err}");
        assert!(err.contains("hold is released"), "{err}");
        // The start line states the HTTP threads the store's kind gets by default.
        let kind = store.split(':').next().unwrap();
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        let threads = idemcalc::serve::default_http_threads(kind, cores);
        assert!(
            err.contains(&format!("HTTP on {threads} thread")),
            "{store}: {err}"
        );
    }
}

fn status_table(s: &Server) {
    status_table_answers(s, false);
    let c = client();
    assert_eq!(
        s.metric(
            &c,
            r#"idemcalc_requests_total{status="201",outcome="created"}"#
        ),
        1.0
    );
    assert_eq!(
        s.metric(
            &c,
            r#"idemcalc_requests_total{status="201",outcome="replayed"}"#
        ),
        2.0
    );
}

/// The status table's answers at `s`; `balanced`: `s` is a load balancer, which answers a
/// handler that died (closed its connection unanswered) with its own 502.
pub(crate) fn status_table_answers(s: &Server, balanced: bool) {
    let c = client();
    // 401: no token, an unknown token; never a default caller.
    let r = c
        .post(s.url("/labels"))
        .header("idempotency-key", "\"k\"")
        .body(BODY)
        .send()
        .unwrap();
    assert!(r.headers().contains_key("www-authenticate"));
    problem(r, 401, "unauthenticated");
    let r = c
        .post(s.url("/labels"))
        .bearer_auth("nope")
        .header("idempotency-key", "\"k\"")
        .body(BODY)
        .send()
        .unwrap();
    problem(r, 401, "unauthenticated");
    // 400 idempotency_key_missing, and its type resolves to documentation.
    let v = problem(
        s.post(&c, None, BODY).send().unwrap(),
        400,
        "idempotency_key_missing",
    );
    let doc = c.get(s.url(v["type"].as_str().unwrap())).send().unwrap();
    assert_eq!(doc.status().as_u16(), 200);
    assert!(doc.text().unwrap().contains("Idempotency-Key"));
    // 201 first run, with the key as an sf-string.
    let first = s
        .post(&c, Some("\"label:918273:1:v1\""), BODY)
        .send()
        .unwrap();
    assert_eq!(first.status().as_u16(), 201);
    assert!(!first.headers().contains_key("idempotent-replayed"));
    let first_body = first.bytes().unwrap();
    let label: serde_json::Value = serde_json::from_slice(&first_body).unwrap();
    assert_eq!(label["order_id"], 918273);
    // 201 replay: the bare spelling names the same key; the saved body byte for byte.
    let again = s.post(&c, Some("label:918273:1:v1"), BODY).send().unwrap();
    assert_eq!(again.status().as_u16(), 201);
    assert_eq!(again.headers()["idempotent-replayed"], "true");
    assert_eq!(again.bytes().unwrap(), first_body);
    // 422: another body; the same body on another path (method and path are hashed).
    let v = problem(
        s.post(&c, Some("\"label:918273:1:v1\""), OTHER_BODY)
            .send()
            .unwrap(),
        422,
        "idempotency_key_reused",
    );
    assert_eq!(v["code"], "idempotency_key_reused");
    let r = c
        .post(s.url("/v1/labels"))
        .bearer_auth(TOKEN)
        .header("idempotency-key", "\"label:918273:1:v1\"")
        .body(BODY)
        .send()
        .unwrap();
    problem(r, 422, "idempotency_key_reused");
    // Two key headers, a malformed sf-string.
    let r = s
        .post(&c, Some("\"a\""), BODY)
        .header("idempotency-key", "\"a\"")
        .send()
        .unwrap();
    problem(r, 400, "idempotency_key_multiple");
    problem(
        s.post(&c, Some("\"abc"), BODY).send().unwrap(),
        400,
        "idempotency_key_malformed",
    );
    // Malformed JSON: 400 with the position.
    let v = problem(
        s.post(&c, Some("\"bad-json\""), "{\"order_id\": 1,,}")
            .send()
            .unwrap(),
        400,
        "validation_failed",
    );
    assert!(v["detail"].as_str().unwrap().contains("column"), "{v}");
    // 409: an attempt died after the carrier call and holds the lease (30 s).
    let died = s
        .post(&c, Some("\"label:5:1:v1\""), &BODY.replace("918273", "5"))
        .header("idemcalc-test-die", "after-carrier")
        .send();
    if balanced {
        assert_eq!(
            died.unwrap().status().as_u16(),
            502,
            "the balancer's answer"
        );
    } else {
        assert!(died.is_err(), "a dead handler answers nothing: {died:?}");
    }
    let r = s
        .post(&c, Some("\"label:5:1:v1\""), &BODY.replace("918273", "5"))
        .send()
        .unwrap();
    let retry_after: u64 = r.headers()["retry-after"]
        .to_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!((1..=30).contains(&retry_after), "{retry_after}");
    let v = problem(r, 409, "request_in_progress");
    assert!(
        v["retry_after_ms"]
            .as_u64()
            .is_some_and(|ms| ms > 0 && ms <= 30_000),
        "{v}"
    );
    // curl: the replay again, headers and all.
    let out = Command::new("curl")
        .args(["-sS", "-i", "-X", "POST", &s.url("/labels")])
        .args(["-H", &format!("Authorization: Bearer {TOKEN}")])
        .args(["-H", "Idempotency-Key: \"label:918273:1:v1\""])
        .args(["--data-binary", BODY])
        .output()
        .expect("curl is installed");
    let text = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    assert!(text.starts_with("http/1.1 201"), "{text}");
    assert!(text.contains("idempotent-replayed: true"), "{text}");
    assert!(
        text.ends_with(&String::from_utf8_lossy(&first_body).to_ascii_lowercase()),
        "{text}"
    );
    let out = Command::new("curl")
        .args(["-sS", "-i", "-X", "POST", &s.url("/labels")])
        .args(["-H", &format!("Authorization: Bearer {TOKEN}")])
        .args(["--data-binary", BODY])
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout).to_ascii_lowercase();
    assert!(
        text.starts_with("http/1.1 400") && text.contains("application/problem+json"),
        "{text}"
    );
    assert_eq!(
        c.get(s.url("/healthz")).send().unwrap().status().as_u16(),
        200
    );
    problem(c.get(s.url("/nope")).send().unwrap(), 404, "not_found");
    problem(
        c.get(s.url("/labels")).send().unwrap(),
        405,
        "method_not_allowed",
    );
}

/// The seed's lease-takeover timeline over HTTP: attempt 1 buys the label and dies; retries get
/// 409 with Retry-After until the lease expires; then a retry takes over and the carrier's key
/// hands back the same label. One label, one purchase, one takeover.
#[test]
fn the_lease_takeover_timeline_over_http() {
    takeover_timeline(&[]);
}

/// The same timeline with a carrier that answers at once, so the takeover runs txn 1, the
/// carrier call and txn 2 on one trip to the writer: the same answers and the same counts.
#[test]
fn the_lease_takeover_timeline_with_a_carrier_that_answers_at_once() {
    takeover_timeline(&["--carrier-latency", "0s"]);
}

fn takeover_timeline(extra: &[&str]) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    // The seed's 30 s lease at 10x: 3 s of wall time.
    let mut args = vec!["--test-hooks", "--time-scale", "10"];
    args.extend_from_slice(extra);
    let s = Server::on_sqlite(&path, &args);
    let c = client();
    let key = Some("\"label:918273:1:v1\"");
    let died = s
        .post(&c, key, BODY)
        .header("idemcalc-test-die", "after-carrier")
        .send();
    assert!(died.is_err(), "{died:?}");
    let mut conflicts = 0;
    let last = loop {
        let r = s.post(&c, key, BODY).send().unwrap();
        if r.status().as_u16() != 409 {
            break r;
        }
        conflicts += 1;
        assert!(r.headers().contains_key("retry-after"));
        let v: serde_json::Value = serde_json::from_str(&r.text().unwrap()).unwrap();
        let wait = v["retry_after_ms"].as_u64().unwrap();
        assert!(wait <= 3_000, "{v}");
        assert!(conflicts < 100, "the lease never expired");
        std::thread::sleep(Duration::from_millis(wait.clamp(10, 500)));
    };
    assert!(conflicts >= 1);
    assert_eq!(last.status().as_u16(), 201);
    assert!(
        !last.headers().contains_key("idempotent-replayed"),
        "a takeover runs, it is no replay"
    );
    let label: serde_json::Value = serde_json::from_str(&last.text().unwrap()).unwrap();
    assert_eq!(
        label["label_id"], "L-1",
        "the carrier's first label, replayed"
    );
    assert_eq!(label["tracking_no"], "GRD000918273");
    assert_eq!(s.metric(&c, "idemcalc_takeovers_total"), 1.0);
    assert_eq!(
        s.metric(&c, "idemcalc_takeovers_while_owner_alive_total"),
        0.0
    );
    assert_eq!(s.metric(&c, "idemcalc_carrier_purchases_total"), 1.0);
    assert_eq!(s.metric(&c, "idemcalc_carrier_replays_total"), 1.0);
    s.stop_ok();
    let mut store = reopen(&path);
    assert_eq!(store.count_labels().unwrap(), 1);
}

/// With a carrier that answers at once, attempts complete on one trip to the writer. Many at
/// once, on many keys and on one key, still give one label per key, bought once.
#[test]
fn a_carrier_that_answers_at_once_labels_each_key_once_under_concurrency() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    let s = Server::on_sqlite(&path, &["--carrier-latency", "0s"]);
    let body = |order: u32| {
        format!(r#"{{"order_id":{order},"parcel_no":1,"weight_g":1450,"service":"ground"}}"#)
    };
    // 8 threads, each sending 5 keys of its own, then all of them the one shared key.
    let answers: Vec<(u16, bool, String)> = std::thread::scope(|scope| {
        let threads: Vec<_> = (0..8u32)
            .map(|t| {
                let (s, body) = (&s, &body);
                scope.spawn(move || {
                    let c = client();
                    let mut got = Vec::new();
                    for order in (0..5).map(|i| 1000 + t * 10 + i).chain([7]) {
                        let key = format!("\"label:{order}:1:v1\"");
                        let r = s.post(&c, Some(&key), &body(order)).send().unwrap();
                        let replayed = r.headers().contains_key("idempotent-replayed");
                        got.push((r.status().as_u16(), replayed, r.text().unwrap()));
                    }
                    got
                })
            })
            .collect();
        threads
            .into_iter()
            .flat_map(|t| t.join().unwrap())
            .collect()
    });
    let created = answers.iter().filter(|a| a.0 == 201 && !a.1).count();
    let replayed = answers.iter().filter(|a| a.0 == 201 && a.1).count();
    let in_progress = answers.iter().filter(|a| a.0 == 409).count();
    assert_eq!(created, 41, "40 own keys and the shared one: {answers:?}");
    assert_eq!(replayed + in_progress, 7, "{answers:?}");
    // Every 201 for the shared key is the same label, byte for byte.
    let shared: Vec<&String> = answers
        .iter()
        .filter(|a| a.0 == 201 && a.2.contains("\"order_id\":7,"))
        .map(|a| &a.2)
        .collect();
    assert_eq!(shared.len(), 1 + replayed);
    assert!(shared.windows(2).all(|w| w[0] == w[1]), "{shared:?}");
    let c = client();
    assert_eq!(s.metric(&c, "idemcalc_carrier_purchases_total"), 41.0);
    assert_eq!(s.metric(&c, "idemcalc_in_flight"), 0.0);
    s.stop_ok();
    let mut store = reopen(&path);
    assert_eq!(store.count_labels().unwrap(), 41);
}

/// `--time-scale 3600 --retention 24h`: a completed key is swept after about 24 s, sent again it
/// is new, and `/metrics` counts one request with a purged key.
#[test]
fn a_key_swept_on_the_scaled_clock_is_new_again_and_counted() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(
        &format!("sqlite:{}", dir.path().join("store.sqlite").display()),
        &["--time-scale", "3600", "--retention", "24h"],
    );
    let c = client();
    let key = Some("\"label:918273:1:v1\"");
    assert_eq!(s.post(&c, key, BODY).send().unwrap().status().as_u16(), 201);
    let replay = s.post(&c, key, BODY).send().unwrap();
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
    let mut polls = 0;
    while s.metric(&c, "idemcalc_sweeper_rows_total") < 1.0 {
        polls += 1;
        assert!(polls < 1200, "nothing swept in two minutes");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(s.metric(&c, "idemcalc_keys_in_store"), 0.0);
    let again = s.post(&c, key, BODY).send().unwrap();
    assert_eq!(again.status().as_u16(), 201);
    assert!(
        !again.headers().contains_key("idempotent-replayed"),
        "treated as new"
    );
    assert_eq!(s.metric(&c, "idemcalc_purged_key_requests_total"), 1.0);
    s.stop_ok();
}

/// A body over the limit, a slow-loris head, a stalled body and a thousand idle connections:
/// each is cut off or refused while other clients are answered.
#[test]
fn limits_leave_the_server_answering_others() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::start(
        &format!("sqlite:{}", dir.path().join("store.sqlite").display()),
        &["--header-timeout", "1s", "--body-timeout", "1s"],
    );
    let c = client();
    let ok = |key: &str| {
        let r = s
            .post(
                &c,
                Some(&format!("\"{key}\"")),
                &BODY.replace("918273", &key[1..]),
            )
            .send()
            .unwrap();
        assert_eq!(r.status().as_u16(), 201, "{key}");
    };
    // A 10 MB body: 413 from its declared length, before a byte of it is read.
    let mut big = TcpStream::connect(&s.addr).unwrap();
    write!(
        big,
        "POST /labels HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\nIdempotency-Key: \"big\"\r\nContent-Length: {}\r\n\r\n",
        10 << 20
    )
    .unwrap();
    let mut answer = String::new();
    big.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
    let _ = big.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    assert!(
        answer.contains("application/problem+json") && answer.contains("body_too_large"),
        "{answer}"
    );
    ok("k1");
    // A thousand idle connections, then another client.
    let idle: Vec<TcpStream> = (0..1000)
        .map(|_| TcpStream::connect(&s.addr).unwrap())
        .collect();
    ok("k2");
    drop(idle);
    // Slow-loris: one byte of the head every 100 ms is cut off by the header deadline.
    let mut loris = TcpStream::connect(&s.addr).unwrap();
    loris
        .set_read_timeout(Some(Duration::from_millis(100)))
        .unwrap();
    let head = b"POST /labels HTTP/1.1\r\nHost: x\r\nX-Slow: ";
    let mut closed = false;
    for i in 0..600 {
        if loris.write_all(&[head[i.min(head.len() - 1)]]).is_err() {
            closed = true;
            break;
        }
        let mut buf = [0u8; 64];
        match loris.read(&mut buf) {
            Ok(0) => {
                closed = true;
                break;
            }
            Ok(_) => {}
            Err(e)
                if e.kind() == std::io::ErrorKind::WouldBlock
                    || e.kind() == std::io::ErrorKind::TimedOut => {}
            Err(_) => {
                closed = true;
                break;
            }
        }
        if i == 5 {
            ok("k3");
        }
    }
    assert!(closed, "the slow-loris connection was never closed");
    // A stalled body: 408.
    let mut stall = TcpStream::connect(&s.addr).unwrap();
    write!(
        stall,
        "POST /labels HTTP/1.1\r\nHost: x\r\nConnection: close\r\nAuthorization: Bearer {TOKEN}\r\nIdempotency-Key: \"stall\"\r\nContent-Length: 100\r\n\r\n{{\"order"
    )
    .unwrap();
    let mut answer = String::new();
    stall
        .set_read_timeout(Some(Duration::from_secs(30)))
        .unwrap();
    let _ = stall.read_to_string(&mut answer);
    assert!(answer.starts_with("HTTP/1.1 408"), "{answer}");
    assert!(answer.contains("body_timeout"), "{answer}");
    ok("k4");
    s.stop_ok();
}

/// SIGTERM while a request is in flight (the carrier takes 1 s): the request still gets its
/// 201, and the server exits 0 having released the store.
#[test]
fn sigterm_drains_the_request_in_flight() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    let s = Server::on_sqlite(&path, &["--carrier-latency", "1s"]);
    let c = client();
    let req = s.post(&c, Some("\"drain\""), BODY);
    let flight = std::thread::spawn(move || req.send().map(|r| r.status().as_u16()));
    while s.metric(&c, "idemcalc_in_flight") < 1.0 {
        std::thread::sleep(Duration::from_millis(10));
    }
    let (code, err) = s.stop();
    assert_eq!(flight.join().unwrap().unwrap(), 201, "{err}");
    assert_eq!(code, Some(0), "{err}");
    // Released: the store opens again in this process.
    reopen(&path);
}

/// Bad flags and files exit 2 naming them, before anything listens.
#[test]
fn bad_input_is_refused_naming_the_flag() {
    let dir = tempfile::tempdir().unwrap();
    let callers = dir.path().join("callers");
    std::fs::write(&callers, "only-a-token\n").unwrap();
    let c = callers.to_str().unwrap();
    for (args, needle) in [
        (vec!["serve", "--callers", c], ":1: expected `TOKEN CALLER`"),
        (vec!["serve"], "--callers"),
        (
            vec![
                "serve",
                "--trust-caller-header",
                "x-caller",
                "--listen",
                "0.0.0.0:0",
            ],
            "loopback",
        ),
        (
            vec!["serve", "--callers", c, "--time-scale", "0"],
            "--time-scale",
        ),
        (
            vec!["serve", "--callers", c, "--retention", "1h,2h"],
            "one retention",
        ),
        (
            vec!["serve", "--callers", c, "--http-threads", "0"],
            "--http-threads 0",
        ),
        (
            vec!["serve", "--callers", c, "--http-threads", "100000"],
            "--http-threads 100000",
        ),
        // Sizes allocated at start: refused, not an allocation that aborts the process.
        (
            vec!["serve", "--callers", c, "--queue", "1000000000000"],
            "--queue 1000000000000: give at most 1000000",
        ),
        (
            vec![
                "serve",
                "--callers",
                c,
                "--max-connections",
                "10000000000000000000",
            ],
            "--max-connections 10000000000000000000",
        ),
    ] {
        let (code, _, err) = common::idemcalc(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(needle), "{args:?}: {err}");
        assert!(!err.contains("panicked"), "{err}");
    }
}

/// A store that stops answering (its key table locked by another session): the request gets
/// 503 with Retry-After within the statement's deadline, never a 201, `/healthz` turns 503 while
/// `/metrics` keeps answering, and once the lock is gone the same retry creates the label and
/// readiness is back.
#[test]
fn a_locked_postgres_store_answers_503_within_its_deadline_and_recovers() {
    let Some(url) = common::server_url(PG_URL_VAR) else {
        return;
    };
    let schema = format!(
        "t_serve_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    );
    let s = Server::start(&format!("{url}?schema={schema}"), &["--pool", "2"]);
    let c = client();
    assert_eq!(
        s.post(&c, Some("\"a\""), BODY)
            .send()
            .unwrap()
            .status()
            .as_u16(),
        201
    );
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut tx = admin.transaction().unwrap();
    tx.batch_execute(&format!(
        "LOCK TABLE {schema}.idempotency_keys IN ACCESS EXCLUSIVE MODE"
    ))
    .unwrap();
    let body = BODY.replace("918273", "2");
    let r = s.post(&c, Some("\"b\""), &body).send().unwrap();
    assert!(r.headers().contains_key("retry-after"));
    let v = problem(r, 503, "store_unavailable");
    assert!(
        v["detail"].as_str().unwrap().contains("lock_timeout"),
        "{v}"
    );
    // Readiness follows the write path; the routes that need no store keep answering.
    let status = |path: &str| c.get(s.url(path)).send().unwrap().status().as_u16();
    assert_eq!(status("/healthz"), 503);
    assert_eq!(status("/metrics"), 200);
    tx.rollback().unwrap();
    let r = s.post(&c, Some("\"b\""), &body).send().unwrap();
    assert_eq!(r.status().as_u16(), 201);
    assert_eq!(status("/healthz"), 200);
    s.stop_ok();
    admin
        .batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"))
        .unwrap();
}

/// A Redis server that stops answering (`CLIENT PAUSE`, a server of the test's own): the
/// request gets 503 with Retry-After when the store's read deadline passes, never a 201, the
/// routes that need no store keep answering, and once the server answers again so does the
/// service.
#[test]
fn a_paused_redis_store_answers_503_and_the_service_recovers() {
    let Some(redis) = common::OwnRedis::start() else {
        return;
    };
    let s = Server::start(&redis.url, &["--pool", "1"]);
    let c = client();
    assert_eq!(
        s.post(&c, Some("\"a\""), BODY)
            .send()
            .unwrap()
            .status()
            .as_u16(),
        201
    );
    let mut admin = ::redis::Client::open(redis.url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let _: () = ::redis::cmd("CLIENT")
        .arg("PAUSE")
        .arg("9000")
        .arg("ALL")
        .query(&mut admin)
        .unwrap();
    assert_eq!(
        c.get(s.url("/healthz")).send().unwrap().status().as_u16(),
        200
    );
    let r = s
        .post(&c, Some("\"b\""), &BODY.replace("918273", "2"))
        .send()
        .unwrap();
    assert!(r.headers().contains_key("retry-after"));
    problem(r, 503, "store_unavailable");
    let mut tries = 0;
    loop {
        let r = s
            .post(&c, Some("\"c\""), &BODY.replace("918273", "3"))
            .send()
            .unwrap();
        match r.status().as_u16() {
            201 => break,
            503 => {}
            other => panic!("{other}: {}", r.text().unwrap()),
        }
        tries += 1;
        assert!(tries < 120, "the service never recovered");
        std::thread::sleep(Duration::from_millis(500));
    }
    s.stop_ok();
}

/// Issue 39 against issue 38: `idemcalc load` with its defaults (order numbers included) sends
/// the seed's client to `idemcalc serve`, and from outside sees what the seed promises: every
/// intent labelled, once, with no 422. `load`'s default first order number was once past the
/// engine's limit, so every request got a 400 from `serve` and no test noticed.
#[test]
fn load_against_serve_labels_every_intent_once() {
    let dir = tempfile::tempdir().unwrap();
    let store = format!("sqlite:{}", dir.path().join("store.sqlite").display());
    let s = Server::start(&store, &[]);
    let callers = dir.path().join("load-callers");
    std::fs::write(
        &callers,
        format!("{TOKEN} fulfilment\ntok-returns returns\n"),
    )
    .unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(["load", &s.base, "--rate", "100", "--duration", "2s"])
        .args(["--format", "json", "--quiet", "--lose-replies", "0.05"])
        .arg("--callers")
        .arg(&callers)
        .output()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    assert_eq!(out.status.code(), Some(0), "{json}");
    assert_eq!(json["duplicate_labels"], 0, "{json}");
    assert_eq!(json["unexpected_422"], 0, "{json}");
    assert_eq!(json["stuck_intents"], 0, "{json}");
    assert_eq!(json["errors"], serde_json::json!({}), "{json}");
    let started = json["counts"]["intents_started"].as_u64().unwrap();
    assert!(started > 100, "{json}");
    // Lost replies (5 % of the seed's 60 % of timed-out calls here) come back as replays.
    assert!(json["replays"].as_u64().unwrap() <= started, "{json}");
}

/// `idemcalc carrier --listen 127.0.0.1:0 ARGS…`, once it listens: the process and its URL.
fn start_carrier(args: &[&str]) -> (common::Killed, String) {
    let mut all = vec!["carrier", "--listen", "127.0.0.1:0"];
    all.extend_from_slice(args);
    common::spawn_listening(&all)
}

/// Issue 38: the carrier as a real hop. The seed's lease-takeover timeline with the carrier
/// behind HTTP (`idemcalc carrier`, `serve --carrier-url`): the first attempt dies after the
/// carrier sold the label, the takeover calls the carrier again with the same derived key and
/// gets the same label back. Reconciled from outside: the carrier's invoice holds one line,
/// and it is the label the service stored and answered.
#[test]
fn the_lease_takeover_timeline_with_the_carrier_behind_http() {
    let (carrier, carrier_url) = start_carrier(&["--time-scale", "10"]);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    let s = Server::on_sqlite(
        &path,
        &[
            "--test-hooks",
            "--time-scale",
            "10",
            "--carrier-url",
            &carrier_url,
        ],
    );
    let c = client();
    let key = Some("\"label:918273:1:v1\"");
    let died = s
        .post(&c, key, BODY)
        .header("idemcalc-test-die", "after-carrier")
        .send();
    assert!(died.is_err(), "{died:?}");
    let last = loop {
        let r = s.post(&c, key, BODY).send().unwrap();
        if r.status().as_u16() != 409 {
            break r;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    assert_eq!(last.status().as_u16(), 201);
    let label: serde_json::Value = serde_json::from_str(&last.text().unwrap()).unwrap();
    // A replay of the same key answers the same label, and the carrier is not called again.
    let again = s.post(&c, key, BODY).send().unwrap();
    assert_eq!(again.status().as_u16(), 201);
    assert!(again.headers().contains_key("idempotent-replayed"));
    let invoice: serde_json::Value = serde_json::from_str(
        &c.get(format!("{carrier_url}/v1/invoice"))
            .send()
            .unwrap()
            .text()
            .unwrap(),
    )
    .unwrap();
    let lines = invoice.as_array().unwrap();
    assert_eq!(lines.len(), 1, "one purchase for one intent: {invoice}");
    assert_eq!(lines[0]["label_id"], label["label_id"]);
    assert_eq!(lines[0]["tracking_no"], label["tracking_no"]);
    assert_eq!(
        lines[0]["carrier_key"],
        idemcalc::carrier::carrier_key("fulfilment", "label:918273:1:v1")
    );
    // What the service saw of the carrier: one purchase, then one replay (the takeover's call).
    assert_eq!(s.metric(&c, "idemcalc_carrier_purchases_total"), 1.0);
    assert_eq!(s.metric(&c, "idemcalc_carrier_replays_total"), 1.0);
    assert_eq!(s.metric(&c, "idemcalc_takeovers_total"), 1.0);
    let err = s.stop_ok();
    assert!(err.contains("over HTTP"), "{err}");
    drop(carrier);
    let mut store = reopen(&path);
    let labels = store.labels().unwrap();
    assert_eq!(labels.len(), 1);
    assert_eq!(labels[0].label_id, label["label_id"].as_str().unwrap());
}

/// A key reused for another order after serve purged it, while the carrier (in process, and
/// behind HTTP) still remembers it: 422 `idempotency_key_reused`, never the first order's
/// label, and no label saved for the second order. Before, both answered 201 with order
/// 881000001's label for order 881000002 and replayed it from then on.
#[test]
fn a_key_reused_after_its_purge_is_422_not_another_orders_label() {
    let (carrier, carrier_url) = start_carrier(&["--time-scale", "3600"]);
    for remote in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("store.sqlite");
        let mut args = vec!["--time-scale", "3600", "--retention", "2m"];
        if remote {
            args.extend(["--carrier-url", &carrier_url]);
        }
        let s = Server::on_sqlite(&path, &args);
        let c = client();
        let key = if remote { "\"reused-r\"" } else { "\"reused\"" };
        let first = BODY.replace("918273", "881000001");
        let second = BODY.replace("918273", "881000002");
        assert_eq!(s.post(&c, Some(key), &first).send().unwrap().status(), 201);
        let mut polls = 0;
        while s.metric(&c, "idemcalc_sweeper_rows_total") < 1.0 {
            polls += 1;
            assert!(polls < 600, "nothing swept in a minute");
            std::thread::sleep(Duration::from_millis(100));
        }
        let r = s.post(&c, Some(key), &second).send().unwrap();
        let p = problem(r, 422, "idempotency_key_reused");
        assert!(!p.to_string().contains("881000001"), "remote {remote}: {p}");
        s.stop_ok();
        let mut store = reopen(&path);
        let labels = store.labels().unwrap();
        assert_eq!(labels.len(), 1, "remote {remote}: {labels:?}");
        assert_eq!(labels[0].order_id, 881000001);
    }
    drop(carrier);
}

/// SIGTERM past `--drain`: the attempts still running (here waiting 8 s on the carrier) are
/// answered 503 `shutting_down` with `Retry-After`, never dropped with no answer, and the exit
/// code (1) and the log say how many were cut. Before, every connection closed unanswered and
/// the server exited 0.
#[test]
fn requests_running_past_the_drain_get_503_shutting_down_and_exit_1() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::on_sqlite(
        &dir.path().join("store.sqlite"),
        &[
            "--carrier-latency",
            "8s",
            "--carrier-timeout",
            "20s",
            "--drain",
            "1s",
        ],
    );
    let c = client();
    let answers: Vec<_> = (0..5)
        .map(|i| {
            let request = s.post(
                &c,
                Some(&format!("\"cut-{i}\"")),
                &BODY.replace("918273", &format!("77000{i}")),
            );
            std::thread::spawn(move || request.send())
        })
        .collect();
    let mut polls = 0;
    while s.metric(&c, "idemcalc_in_flight") < 5.0 {
        polls += 1;
        assert!(polls < 300, "the attempts never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, err) = s.stop();
    for answer in answers {
        let r = answer
            .join()
            .unwrap()
            .expect("an answer, not a dropped connection");
        assert!(r.headers().contains_key("retry-after"), "{r:?}");
        problem(r, 503, "shutting_down");
    }
    assert_eq!(code, Some(1), "{err}");
    assert!(err.contains("5 requests still running"), "{err}");
}

/// A 12 s stall of the PostgreSQL session that holds the schema (`kill -STOP` of its backend)
/// loses the hold: serve stops with exit 3, naming it, so a supervisor starts it again. Before,
/// it stayed up answering every request and `/healthz` with 503, for good.
#[test]
fn a_stalled_hold_session_stops_serve_with_exit_3() {
    let Some(url) = common::server_url(PG_URL_VAR) else {
        return;
    };
    let mut s = Server::start(&url, &[]);
    let c = client();
    assert_eq!(
        s.post(&c, Some("\"stall-1\""), BODY)
            .send()
            .unwrap()
            .status(),
        201
    );
    let server_pid = s.child.as_ref().unwrap().id();
    let mut pg = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let backend: i32 = pg
        .query_one(
            "SELECT pid FROM pg_stat_activity WHERE application_name = $1",
            &[&format!("idemcalc pid {server_pid}")],
        )
        .unwrap()
        .get(0);
    // SAFETY: plain kill(2) of the PostgreSQL backend that holds the test's schema.
    unsafe { libc::kill(backend, libc::SIGSTOP) };
    std::thread::sleep(Duration::from_secs(12));
    unsafe { libc::kill(backend, libc::SIGCONT) };
    let mut child = s.child.take().unwrap();
    let mut code = None;
    for i in 0..600 {
        if let Some(status) = child.try_wait().unwrap() {
            code = status.code();
            break;
        }
        // Requests (and the sweeper) find the hold lost.
        let _ = s.post(&c, Some(&format!("\"stall-{i}\"")), BODY).send();
        std::thread::sleep(Duration::from_millis(100));
    }
    let err = std::fs::read_to_string(&s.stderr).unwrap_or_default();
    if code.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    assert_eq!(code, Some(3), "{err}");
    assert!(err.contains("hold was lost"), "{err}");
}

/// `/healthz` follows the write path: while a foreign `BEGIN EXCLUSIVE` keeps every create
/// from committing (past the writer's 5 s busy timeout), readiness is 503, and 200 again once a
/// write succeeds. Before, it stayed 200 while every create failed.
#[test]
fn healthz_follows_the_store_and_comes_back() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    let s = Server::on_sqlite(&path, &[]);
    let c = client();
    let health = || c.get(s.url("/healthz")).send().unwrap().status().as_u16();
    assert_eq!(
        s.post(&c, Some("\"h-1\""), BODY).send().unwrap().status(),
        201
    );
    assert_eq!(health(), 200);
    let foreign = rusqlite::Connection::open(&path).unwrap();
    foreign.execute_batch("BEGIN EXCLUSIVE").unwrap();
    let body = BODY.replace("918273", "918274");
    let r = s.post(&c, Some("\"h-2\""), &body).send().unwrap();
    problem(r, 503, "store_unavailable");
    assert_eq!(health(), 503);
    foreign.execute_batch("ROLLBACK").unwrap();
    drop(foreign);
    assert_eq!(
        s.post(&c, Some("\"h-2\""), &body).send().unwrap().status(),
        201
    );
    assert_eq!(health(), 200);
    s.stop_ok();
}

/// The shared order space, made visible: caller B, with its own key, asking for an order caller
/// A labelled gets A's label (the seed's natural-key defence), the carrier sells a second label
/// that nothing of ours holds, and `/metrics` counts it on every store, with the carrier in
/// process and behind HTTP. The start-up lines say the order space is shared.
#[test]
fn a_purchase_the_natural_key_turned_away_is_counted_on_every_store() {
    let (carrier, carrier_url) = start_carrier(&[]);
    for remote in [false, true] {
        // A store of its own per carrier: the two carriers number their labels alike (L-1, …).
        let dir = tempfile::tempdir().unwrap();
        for (i, store) in stores(dir.path()).into_iter().enumerate() {
            let mut args = vec![];
            if remote {
                args.extend(["--carrier-url", carrier_url.as_str()]);
            }
            let s = Server::start(&store, &args);
            let c = client();
            // An order of its own per store and carrier: the carrier behind HTTP outlives a
            // server and would replay a key it saw.
            let body = BODY.replace("918273", &format!("5550{i}{}", u8::from(remote)));
            let run = format!("{i}-{}", u8::from(remote));
            let a = s
                .post(&c, Some(&format!("\"a-{run}\"")), &body)
                .send()
                .unwrap();
            assert_eq!(a.status(), 201, "{store}");
            let a: serde_json::Value = serde_json::from_str(&a.text().unwrap()).unwrap();
            let b = c
                .post(s.url("/labels"))
                .bearer_auth("tok-returns")
                .header("idempotency-key", format!("\"b-{run}\""))
                .header("content-type", "application/json")
                .body(body.clone())
                .send()
                .unwrap();
            assert_eq!(b.status(), 201, "{store}");
            let b: serde_json::Value = serde_json::from_str(&b.text().unwrap()).unwrap();
            assert_eq!(
                a["label_id"], b["label_id"],
                "{store}: the parcel's one label"
            );
            assert_eq!(
                s.metric(&c, "idemcalc_unlabelled_purchases_total"),
                1.0,
                "{store}, remote {remote}"
            );
            let err = s.stop_ok();
            assert!(err.contains("order space shared"), "{err}");
        }
    }
    drop(carrier);
}

/// SIGHUP re-reads the callers file: a revoked token gets 401 and a new one is served, with no
/// restart; a bad new file is refused with a line naming file and line, and the callers in
/// force stay. Before, SIGHUP killed the server.
#[test]
fn sighup_reads_the_callers_file_again_and_keeps_it_when_bad() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::on_sqlite(&dir.path().join("store.sqlite"), &[]);
    let c = client();
    let send = |token: &str, key: &str| {
        c.post(s.url("/labels"))
            .bearer_auth(token)
            .header("idempotency-key", format!("\"{key}\""))
            .header("content-type", "application/json")
            .body(BODY.replace("918273", &key[4..]))
            .send()
            .unwrap()
            .status()
            .as_u16()
    };
    assert_eq!(send("tok-returns", "hup-100"), 201);
    let callers = s.dir.path().join("callers");
    std::fs::write(&callers, format!("{TOKEN} fulfilment\ntok-new returns\n")).unwrap();
    signal(s.child.as_ref().unwrap(), libc::SIGHUP);
    let mut polls = 0;
    while send("tok-returns", "hup-101") != 401 {
        polls += 1;
        assert!(polls < 200, "the revoked token still works");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(send("tok-new", "hup-102"), 201);
    std::fs::write(&callers, "tok-x fulfilment\nonly-one-field\n").unwrap();
    signal(s.child.as_ref().unwrap(), libc::SIGHUP);
    let mut polls = 0;
    while !std::fs::read_to_string(&s.stderr)
        .unwrap_or_default()
        .contains("the callers in force stay")
    {
        polls += 1;
        assert!(polls < 200, "no word on the bad file");
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        send("tok-new", "hup-103"),
        201,
        "the callers in force stayed"
    );
    assert_eq!(send("tok-x", "hup-104"), 401);
    let err = s.stop_ok();
    assert!(err.contains(&format!("{}:2:", callers.display())), "{err}");
}

/// `idemcalc carrier` refuses what no label service should send (a negative order or weight, an
/// empty key, two key headers) with 400 and buys nothing, and closes a connection whose request
/// head does not arrive within its 10 s deadline. Before, it sold labels for order -5 and kept
/// a slow-loris connection open for good.
#[test]
fn the_carrier_refuses_bad_purchases_and_slow_heads() {
    let (carrier, url) = start_carrier(&["--carrier-latency", "0s", "--invoice-lines", "1"]);
    let c = client();
    let buy = |body: &str, keys: &[&str]| {
        let mut r = c
            .post(format!("{url}/v1/labels"))
            .header("content-type", "application/json")
            .body(body.to_string());
        for k in keys {
            r = r.header("idempotency-key", *k);
        }
        r.send().unwrap().status().as_u16()
    };
    let good = r#"{"order_id":1,"parcel_no":1,"label_version":1,"service":"ground","weight_g":10}"#;
    assert_eq!(
        buy(&good.replace("\"order_id\":1", "\"order_id\":-5"), &["k1"]),
        400
    );
    assert_eq!(buy(&good.replace("10}", "-1}"), &["k2"]), 400);
    assert_eq!(buy(good, &[""]), 400);
    assert_eq!(buy(good, &["k3", "k4"]), 400);
    assert_eq!(buy(good, &["k5"]), 201);
    let invoice = c.get(format!("{url}/v1/invoice")).send().unwrap();
    assert!(!invoice.headers().contains_key("idemcalc-invoice-dropped"));
    let lines: serde_json::Value = serde_json::from_str(&invoice.text().unwrap()).unwrap();
    assert_eq!(
        lines.as_array().unwrap().len(),
        1,
        "only k5 was bought: {lines}"
    );
    // Past --invoice-lines the oldest line goes, and the invoice says so.
    let other = good.replace("\"order_id\":1", "\"order_id\":2");
    assert_eq!(buy(&other, &["k6"]), 201);
    let invoice = c.get(format!("{url}/v1/invoice")).send().unwrap();
    assert_eq!(invoice.headers()["idemcalc-invoice-dropped"], "1");
    let lines: serde_json::Value = serde_json::from_str(&invoice.text().unwrap()).unwrap();
    assert_eq!(lines[0]["order_id"], 2, "{lines}");
    let mut slow = TcpStream::connect(url.trim_start_matches("http://")).unwrap();
    write!(slow, "POST /v1/labels HTTP/1.1\r\nHost: x\r\n").unwrap();
    slow.set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut rest = Vec::new();
    let closed = slow.read_to_end(&mut rest);
    assert!(
        closed.is_ok(),
        "the carrier kept the slow head's connection: {closed:?}"
    );
    drop(carrier);
}

/// Idle connections from one address cannot take every slot: past `--max-connections-per-peer`
/// they are closed at once, and a `/healthz` probe from another address is answered at once.
/// Before, a flood of idle connections above `--max-connections` held every slot until the
/// header deadline, and the probe waited in the backlog.
#[test]
fn an_idle_flood_from_one_address_leaves_slots_for_others() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::on_sqlite(
        &dir.path().join("store.sqlite"),
        &[
            "--max-connections",
            "64",
            "--max-connections-per-peer",
            "16",
            "--header-timeout",
            "60s",
        ],
    );
    let addr: std::net::SocketAddr = s.addr.parse().unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let flood: Vec<tokio::net::TcpStream> = rt.block_on(async {
        let mut open = Vec::new();
        for _ in 0..100 {
            let socket = tokio::net::TcpSocket::new_v4().unwrap();
            socket.bind("127.0.0.2:0".parse().unwrap()).unwrap();
            open.push(socket.connect(addr).await.unwrap());
        }
        open
    });
    let c = Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .unwrap();
    let health = c.get(s.url("/healthz")).send();
    assert_eq!(health.map(|r| r.status().as_u16()).ok(), Some(200));
    assert!(s.metric(&client(), "idemcalc_connections_open") <= 18.0);
    drop(flood);
    s.stop_ok();
}

/// A carrier that does not answer (nothing listens at `--carrier-url`) is the seed's timeout: a
/// 503 the client retries with the same key, the lease handed back, no label stored.
#[test]
fn an_unreachable_carrier_is_a_timeout_and_stores_nothing() {
    let closed = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", closed.local_addr().unwrap());
    drop(closed);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    let s = Server::on_sqlite(&path, &["--carrier-url", &url]);
    let c = client();
    let r = s.post(&c, Some("\"k-unreachable\""), BODY).send().unwrap();
    let p = problem(r, 503, "carrier_timeout");
    assert!(p["detail"].is_string() || p["title"].is_string(), "{p}");
    // The lease was handed back: the retry is not a 409 but another try at the carrier.
    let r = s.post(&c, Some("\"k-unreachable\""), BODY).send().unwrap();
    assert_eq!(r.status().as_u16(), 503);
    s.stop_ok();
    let mut store = reopen(&path);
    assert_eq!(store.count_labels().unwrap(), 0);
}
