//! `idemcalc load` against small HTTP servers started here on free ports: a correct
//! idempotent server (a record per caller and key, the saved answer replayed, 409 while an
//! attempt holds the key), two broken ones (one reclaims an in-progress key whatever its body,
//! as Powertools' expired-record bug did; one keeps its records in a cache that forgets under
//! eviction), and the failures a run must end on time through: a closed port, a server that
//! never answers, TLS with a certificate nobody trusts, and a proxy that adds latency.
//!
//! Runs are a second or two at small rates. The only time assertions are generous bounds.

use axum::Router;
use axum::body::Bytes;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use idemcalc::load::{self, KeyPolicy, LoadConfig, LoadReport};
use std::collections::{HashMap, HashSet, VecDeque};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How a test server goes wrong, if it does.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Flaw {
    None,
    /// A repeat that finds the key in progress runs again (Powertools' expired-record bug).
    ReclaimsInProgress,
    /// Records live in a cache of this many keys, oldest evicted first.
    ForgetsBeyond(usize),
    /// Answers 422 to everything.
    Always422,
}

#[derive(Clone)]
enum Record {
    InProgress { body: Bytes },
    Done { body: Bytes, answer: String },
}

/// A (caller, key) pair.
type Id = (String, String);
/// The records, and the order they were made in (for eviction).
type Records = (HashMap<Id, Record>, VecDeque<Id>);

struct Service {
    flaw: Flaw,
    /// Every this-many-th run takes 400 ms, past the client's 250 ms deadline.
    slow_every: u64,
    records: Mutex<Records>,
    runs: AtomicU64,
    callers_seen: Mutex<HashSet<String>>,
    headers_seen: Mutex<HashSet<String>>,
}

fn problem(status: StatusCode, code: &str) -> Response {
    (
        status,
        [("content-type", "application/problem+json")],
        format!(
            r#"{{"type":"about:blank","title":"{code}","status":{}}}"#,
            status.as_u16()
        ),
    )
        .into_response()
}

async fn create_label(State(s): State<Arc<Service>>, headers: HeaderMap, body: Bytes) -> Response {
    if s.flaw == Flaw::Always422 {
        return problem(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused");
    }
    let caller = headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Bearer "))
        .unwrap_or("anonymous")
        .to_string();
    s.callers_seen.lock().unwrap().insert(caller.clone());
    if let Some(v) = headers.get("x-test").and_then(|v| v.to_str().ok()) {
        s.headers_seen.lock().unwrap().insert(v.to_string());
    }
    let Some(key) = headers
        .get("idempotency-key")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix('"')?.strip_suffix('"'))
    else {
        return problem(StatusCode::BAD_REQUEST, "idempotency_key_missing");
    };
    let id = (caller, key.to_string());
    {
        let mut guard = s.records.lock().unwrap();
        let (records, order) = &mut *guard;
        match records.get(&id) {
            Some(Record::InProgress { body: b } | Record::Done { body: b, .. }) if *b != body => {
                return problem(StatusCode::UNPROCESSABLE_ENTITY, "idempotency_key_reused");
            }
            Some(Record::Done { answer, .. }) => {
                return (
                    StatusCode::CREATED,
                    [("idempotent-replayed", "true")],
                    answer.clone(),
                )
                    .into_response();
            }
            Some(Record::InProgress { .. }) if s.flaw != Flaw::ReclaimsInProgress => {
                return (
                    StatusCode::CONFLICT,
                    [
                        ("retry-after", "0"),
                        ("content-type", "application/problem+json"),
                    ],
                    r#"{"title":"request_in_progress"}"#,
                )
                    .into_response();
            }
            _ => {}
        }
        records.insert(id.clone(), Record::InProgress { body: body.clone() });
        order.push_back(id.clone());
        if let Flaw::ForgetsBeyond(capacity) = s.flaw {
            while order.len() > capacity {
                if let Some(old) = order.pop_front() {
                    records.remove(&old);
                }
            }
        }
    }
    let n = s.runs.fetch_add(1, Ordering::SeqCst) + 1;
    let pause = if s.slow_every > 0 && n % s.slow_every == 0 {
        400
    } else {
        2
    };
    tokio::time::sleep(Duration::from_millis(pause)).await;
    let answer = format!(r#"{{"label_id":"L-{n}","tracking_no":"GRD{n:09}"}}"#);
    let mut guard = s.records.lock().unwrap();
    if let Some(r) = guard.0.get_mut(&id) {
        *r = Record::Done {
            body,
            answer: answer.clone(),
        };
    }
    (StatusCode::CREATED, answer).into_response()
}

/// A server on a free port, running on its own runtime until dropped.
struct TestServer {
    addr: SocketAddr,
    service: Arc<Service>,
    _runtime: tokio::runtime::Runtime,
}

impl TestServer {
    fn start(flaw: Flaw, slow_every: u64) -> Self {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        let service = Arc::new(Service {
            flaw,
            slow_every,
            records: Mutex::new((HashMap::new(), VecDeque::new())),
            runs: AtomicU64::new(0),
            callers_seen: Mutex::new(HashSet::new()),
            headers_seen: Mutex::new(HashSet::new()),
        });
        let app = Router::new()
            .route("/labels", post(create_label))
            .with_state(service.clone());
        let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
        let addr = listener.local_addr().unwrap();
        runtime.spawn(async move { axum::serve(listener, app).await });
        TestServer {
            addr,
            service,
            _runtime: runtime,
        }
    }

    fn url(&self) -> reqwest::Url {
        format!("http://{}", self.addr).parse().unwrap()
    }
}

/// A short run at the seed's client, late retries 100 times sooner (most within 100 ms).
fn config(url: reqwest::Url, rate_per_s: f64, secs: f64) -> LoadConfig {
    let mut cfg = LoadConfig::seed(url, rate_per_s, Duration::from_secs_f64(secs));
    cfg.time_scale = 100.0;
    cfg.lose_reply_fraction = 0.1;
    cfg.observe = Duration::from_secs(1);
    cfg.seed = 7;
    cfg.first_order = 1_000;
    cfg
}

fn run(cfg: &LoadConfig) -> LoadReport {
    load::run(cfg, &|_| {}).expect("the run completes")
}

/// The longest a run may take: its arrivals, the last attempt's deadline and observation
/// window, and slack for a loaded machine.
fn on_time(cfg: &LoadConfig, report: &LoadReport) {
    let limit = cfg.duration + cfg.deadline + cfg.observe + Duration::from_secs(5);
    assert!(
        report.wall_s < limit.as_secs_f64(),
        "ran {} s, limit {:?}",
        report.wall_s,
        limit
    );
}

#[test]
fn a_correct_server_gives_no_duplicates_and_replays_lost_replies() {
    let server = TestServer::start(Flaw::None, 10);
    let dir = tempfile::tempdir().unwrap();
    let callers = dir.path().join("callers");
    std::fs::write(
        &callers,
        "# token caller\ntok-a fulfilment\ntok-b returns\n",
    )
    .unwrap();
    let mut cfg = config(server.url(), 100.0, 2.0);
    cfg.callers = load::request::read_callers(&callers).unwrap();
    cfg.template.add_header_line("X-Test: seen").unwrap();
    let report = run(&cfg);
    assert!(report.counts.intents_started > 100, "{report:#?}");
    assert_eq!(report.duplicate_labels, 0, "{:#?}", report.duplicates);
    assert_eq!(report.unexpected_422, 0);
    assert_eq!(report.stuck_intents, 0, "{:#?}", report.stuck);
    assert!(report.replays > 0, "lost replies are retried and replayed");
    assert!(report.counts.lost_replies > 0);
    assert!(report.latency_ms["first_run"].count > 0);
    assert!(
        report.latency_ms["timeout"].count > 0,
        "every 10th run is slow"
    );
    assert_eq!(report.counts.shared_labels, 0);
    assert!(report.ok);
    assert_eq!(
        *server.service.callers_seen.lock().unwrap(),
        HashSet::from(["tok-a".to_string(), "tok-b".to_string()])
    );
    assert!(server.service.headers_seen.lock().unwrap().contains("seen"));
    // The JSON keeps the figures a dashboard or a CI job reads.
    let json = serde_json::to_value(&report).unwrap();
    for field in [
        "achieved_rate_per_s",
        "duplicate_labels",
        "unexpected_422",
        "stuck_intents",
        "dropped_intents",
    ] {
        assert!(json[field].is_number(), "{field}");
    }
    for p in ["p50", "p99", "p999", "max"] {
        assert!(json["latency_ms"]["first_run"][p].is_number(), "{p}");
    }
    assert!(report.text().contains("duplicate labels"));
    assert!(report.markdown().contains("| duplicate labels | 0 |"));
    on_time(&cfg, &report);
}

#[test]
fn a_server_that_reclaims_in_progress_keys_is_caught_and_the_intents_named() {
    let server = TestServer::start(Flaw::ReclaimsInProgress, 5);
    let cfg = config(server.url(), 100.0, 2.0);
    let report = run(&cfg);
    assert!(report.duplicate_labels > 0, "{report:#?}");
    assert!(!report.ok);
    let d = &report.duplicates[0];
    assert!(d.keys[0].starts_with("label:"), "{d:?}");
    assert!(d.labels.len() >= 2, "{d:?}");
    assert!(report.duplicates_per_day.ci95_low > 0.0);
    assert!(report.text().contains(&d.keys[0]));
}

#[test]
fn a_cache_that_forgets_under_eviction_is_caught() {
    let server = TestServer::start(Flaw::ForgetsBeyond(20), 0);
    let mut cfg = config(server.url(), 100.0, 2.0);
    cfg.lose_reply_fraction = 0.3;
    // Late retries ten times sooner: most come after twenty newer keys have pushed theirs out.
    cfg.time_scale = 10.0;
    let report = run(&cfg);
    assert!(report.duplicate_labels > 0, "{report:#?}");
    assert!(!report.ok);
}

#[test]
fn a_new_key_per_attempt_duplicates_even_on_a_correct_server() {
    let server = TestServer::start(Flaw::None, 0);
    let mut cfg = config(server.url(), 100.0, 1.5);
    cfg.key_policy = KeyPolicy::NewPerAttempt;
    cfg.lose_reply_fraction = 0.3;
    let report = run(&cfg);
    assert!(report.duplicate_labels > 0, "{report:#?}");
    assert!(report.duplicates.iter().all(|d| d.keys.len() >= 2));
}

#[test]
fn a_422_is_never_expected() {
    let server = TestServer::start(Flaw::Always422, 0);
    let cfg = config(server.url(), 50.0, 1.0);
    let report = run(&cfg);
    assert!(report.unexpected_422 > 0);
    assert_eq!(report.unexpected_422, report.counts.attempts_sent);
    assert_eq!(report.stuck.refused, report.stuck_intents);
    assert!(!report.ok);
}

#[test]
fn a_closed_port_ends_on_time_with_connection_errors() {
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let cfg = config(format!("http://{addr}").parse().unwrap(), 50.0, 1.0);
    let report = run(&cfg);
    assert!(report.counts.intents_started > 0);
    assert_eq!(report.stuck_intents, report.counts.intents_started);
    assert_eq!(report.latency_ms["first_run"].count, 0);
    assert!(
        report.errors.keys().any(|k| k.starts_with("connect")),
        "{:?}",
        report.errors
    );
    assert_eq!(report.error_share, 1.0);
    // Nothing answered, so nothing was checked: the run fails and names the refusal.
    assert!(!report.ok);
    assert!(
        report.verdict.failures[0].starts_with("nothing answered at http://"),
        "{:?}",
        report.verdict.failures
    );
    on_time(&cfg, &report);
}

#[test]
fn a_server_that_never_answers_ends_on_time_with_timeouts() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    // Accepts and holds every connection, reading nothing and answering nothing.
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for s in listener.incoming().flatten() {
            held.push(s);
        }
    });
    let mut cfg = config(format!("http://{addr}").parse().unwrap(), 50.0, 1.0);
    cfg.observe = Duration::from_millis(500);
    cfg.max_in_flight = 10;
    let report = run(&cfg);
    assert!(report.latency_ms["timeout"].count > 0, "{report:#?}");
    assert_eq!(report.latency_ms["first_run"].count, 0);
    assert!(report.dropped_intents > 0, "a full pool drops intents");
    // Dropped intents never started; every started one is stuck.
    assert_eq!(report.stuck_intents, report.counts.intents_started);
    assert!(!report.ok);
    assert!(
        report.verdict.failures[0].contains("no answer within the 250 ms deadline"),
        "{:?}",
        report.verdict.failures
    );
    on_time(&cfg, &report);
}

const CERT_PEM: &str = "-----BEGIN CERTIFICATE-----
MIIBmjCCAUGgAwIBAgIUUL/GzDLw44FKTA9iw462oQl7P/kwCgYIKoZIzj0EAwIw
FDESMBAGA1UEAwwJbG9jYWxob3N0MCAXDTI2MTIwNjE2MzAwNFoYDzIxMjYxMTEy
MTYzMDA0WjAUMRIwEAYDVQQDDAlsb2NhbGhvc3QwWTATBgcqhkjOPQIBBggqhkjO
PQMBBwNCAATcS/dWeAqQCIzI12fyb9UiLiRwZTGT8RQ+wFVRnLNs/D7yEZS0nSQB
SNHGyuo4fk0/2WGZyjWSdeEied14K3zmo28wbTAdBgNVHQ4EFgQUDsQsBgb7LWTp
Dttf18kKjrU6ItMwHwYDVR0jBBgwFoAUDsQsBgb7LWTpDttf18kKjrU6ItMwDwYD
VR0TAQH/BAUwAwEB/zAaBgNVHREEEzARgglsb2NhbGhvc3SHBH8AAAEwCgYIKoZI
zj0EAwIDRwAwRAIgHRBvtHlqcHTOiOWpBJrqqo2ah77yZoLWaLrp8T8VnhICIBjs
u4ZkNnuilbjgXJwBxfUL8J52rMLGBoJ0OQaLdk6c
-----END CERTIFICATE-----
";

const KEY_PEM: &str = "-----BEGIN PRIVATE KEY-----
MIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgV6Pe7S1lkz1raWrZ
ULXOnZxy0OelNKXv91rlPoqSAkOhRANCAATcS/dWeAqQCIzI12fyb9UiLiRwZTGT
8RQ+wFVRnLNs/D7yEZS0nSQBSNHGyuo4fk0/2WGZyjWSdeEied14K3zm
-----END PRIVATE KEY-----
";

/// ring's provider, as `load` uses (rustls marks it deprecated for its lack of post-quantum
/// key exchange, which a certificate test does not need).
#[allow(deprecated)]
fn ring_provider() -> rustls::crypto::CryptoProvider {
    rustls::crypto::ring::default_provider()
}

#[test]
fn a_certificate_nobody_trusts_fails_each_attempt_by_name() {
    use rustls::pki_types::pem::PemObject as _;
    use rustls::pki_types::{CertificateDer, PrivateKeyDer};
    let certs = vec![CertificateDer::from_pem_slice(CERT_PEM.as_bytes()).unwrap()];
    let key = PrivateKeyDer::from_pem_slice(KEY_PEM.as_bytes()).unwrap();
    let tls = Arc::new(
        rustls::ServerConfig::builder_with_provider(Arc::new(ring_provider()))
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .unwrap(),
    );
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for tcp in listener.incoming().flatten() {
            let tls = tls.clone();
            std::thread::spawn(move || {
                let conn = rustls::ServerConnection::new(tls).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, tcp);
                let mut sink = Vec::new();
                let _ = std::io::Read::read_to_end(&mut tls, &mut sink);
            });
        }
    });
    let cfg = config(format!("https://{addr}").parse().unwrap(), 20.0, 1.0);
    let report = run(&cfg);
    assert_eq!(report.latency_ms["first_run"].count, 0);
    assert!(
        report
            .errors
            .keys()
            .any(|k| k.to_lowercase().contains("certificate")),
        "{:?}",
        report.errors
    );
    assert!(!report.ok);
    assert!(
        report.verdict.failures[0].contains("certificate"),
        "{:?}",
        report.verdict.failures
    );
    on_time(&cfg, &report);
}

/// Forwards each chunk after `delay`, both ways: `2 × delay` added to every round trip.
async fn delaying_proxy(listener: TcpListener, upstream: SocketAddr, delay: Duration) {
    async fn pipe(
        mut from: tokio::net::tcp::OwnedReadHalf,
        mut to: tokio::net::tcp::OwnedWriteHalf,
        delay: Duration,
    ) {
        let mut buf = vec![0u8; 16 * 1024];
        while let Ok(n) = from.read(&mut buf).await {
            if n == 0 {
                break;
            }
            tokio::time::sleep(delay).await;
            if to.write_all(&buf[..n]).await.is_err() {
                break;
            }
        }
    }
    while let Ok((inbound, _)) = listener.accept().await {
        tokio::spawn(async move {
            let Ok(outbound) = TcpStream::connect(upstream).await else {
                return;
            };
            let (ri, wi) = inbound.into_split();
            let (ro, wo) = outbound.into_split();
            tokio::spawn(pipe(ri, wo, delay));
            tokio::spawn(pipe(ro, wi, delay));
        });
    }
}

#[test]
fn added_latency_shows_in_every_percentile_and_changes_nothing_else() {
    let server = TestServer::start(Flaw::None, 0);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listener = runtime.block_on(TcpListener::bind("127.0.0.1:0")).unwrap();
    let addr = listener.local_addr().unwrap();
    runtime.spawn(delaying_proxy(
        listener,
        server.addr,
        Duration::from_millis(100),
    ));
    let mut cfg = config(format!("http://{addr}").parse().unwrap(), 50.0, 2.0);
    cfg.deadline = Duration::from_secs(1);
    let report = run(&cfg);
    let first = report.latency_ms["first_run"];
    assert!(first.count > 0, "{report:#?}");
    // Sleeps are never shorter than asked: a floor, not a wall-clock race.
    assert!(first.p50 >= 200.0, "{first:?}");
    assert_eq!(report.duplicate_labels, 0);
    assert!(report.ok);
    on_time(&cfg, &report);
}

#[test]
fn the_command_line_prints_json_and_exits_1_on_duplicates() {
    let bin = env!("CARGO_BIN_EXE_idemcalc");
    let good = TestServer::start(Flaw::None, 0);
    let out = std::process::Command::new(bin)
        .args(["load", good.url().as_str(), "--rate", "50"])
        .args(["--duration", "1s", "--format", "json", "--quiet"])
        .args(["--time-scale", "100", "--lose-replies", "0.1"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json["duplicate_labels"], 0);
    assert!(json["achieved_rate_per_s"].as_f64().unwrap() > 0.0);

    let bad = TestServer::start(Flaw::ReclaimsInProgress, 3);
    let out = std::process::Command::new(bin)
        .args(["load", bad.url().as_str(), "--rate", "80"])
        .args(["--duration", "1500ms", "--format", "markdown", "--quiet"])
        .args(["--time-scale", "100", "--seed", "3"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    assert!(String::from_utf8_lossy(&out.stdout).contains("BROKEN"));

    for (flag, value) in [
        ("--rate", "0"),
        ("--time-scale", "0"),
        ("--identity", "tracking_no"),
        ("--header", "nocolon"),
        ("--callers", "/nonexistent/callers"),
    ] {
        let out = std::process::Command::new(bin)
            .args(["load", "http://127.0.0.1:9", flag, value, "--quiet"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{flag} {value}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(flag), "{flag}: {err}");
    }
}

#[test]
fn the_default_template_is_the_seeds_request_and_a_file_can_change_it() {
    use load::request::Parcel;
    let p = Parcel {
        order: 918273,
        parcel: 1,
        version: 1,
    };
    let t = load::Template::default();
    let key = t.key_for(&p);
    assert_eq!(key, "label:918273:1:v1");
    assert_eq!(t.key_header_value(&key).unwrap(), "\"label:918273:1:v1\"");
    assert!(t.body_for(&p, &key).contains("\"order_id\":918273"));
    assert_eq!(
        t.identity_of(br#"{"tracking_no":"GRD1","label_id":"L-1"}"#),
        Some("GRD1".into())
    );
    assert_eq!(t.identity_of(b"not json"), None);

    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("template.toml");
    std::fs::write(
        &file,
        r#"
        method = "PUT"
        path = "/v1/shipments"
        key = "ship-{order}-{parcel}"
        key_format = "raw"
        identity = "/shipment/id"
        body = '{"order": {order}, "request_id": "{key}"}'
        [headers]
        X-Api-Version = "3"
        "#,
    )
    .unwrap();
    let t = load::Template::from_file(&file).unwrap();
    let key = t.key_for(&p);
    assert_eq!(key, "ship-918273-1");
    assert_eq!(
        t.body_for(&p, &key),
        r#"{"order": 918273, "request_id": "ship-918273-1"}"#
    );
    assert_eq!(t.key_header_value(&key).unwrap(), "ship-918273-1");
    assert_eq!(t.identity_of(br#"{"shipment":{"id":7}}"#), Some("7".into()));

    std::fs::write(&file, "identity = \"tracking_no\"\n").unwrap();
    let err = load::Template::from_file(&file).unwrap_err();
    assert!(format!("{err:#}").contains("identity"), "{err:#}");
    std::fs::write(&file, "colour = 1\n").unwrap();
    assert!(load::Template::from_file(&file).is_err());

    let mut t = load::Template::default();
    assert!(t.add_header_line("no colon").is_err());
    assert!(t.add_header_line("Bad Name: x").is_err());
    t.add_header_line("Authorization: Bearer t").unwrap();
    assert!(t.key_header_value("\u{e9}").is_err());
}

#[test]
fn a_callers_file_names_the_line_it_cannot_read() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("callers");
    std::fs::write(&file, "# who\nt1 fulfilment\n\nt2 returns # second\n").unwrap();
    let callers = load::request::read_callers(&file).unwrap();
    assert_eq!(callers.len(), 2);
    assert_eq!(callers[1].name, "returns");
    std::fs::write(&file, "t1 fulfilment\nt2\n").unwrap();
    let err = load::request::read_callers(&file).unwrap_err().to_string();
    assert!(err.contains(":2:"), "{err}");
    std::fs::write(&file, "# only a comment\n").unwrap();
    assert!(load::request::read_callers(&file).is_err());
}

/// Ctrl-C stops a long run at once: no intent or retry starts after it, the attempts already
/// sent are heard out, and the report covers the time run, says so, and exits 130 (as
/// `simulate` does on Ctrl-C).
#[test]
fn ctrl_c_stops_the_run_and_reports_the_part_run() {
    let good = TestServer::start(Flaw::None, 0);
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(["load", good.url().as_str(), "--rate", "50"])
        .args(["--duration", "10m", "--format", "json", "--quiet"])
        .args(["--time-scale", "100"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Until intents are being answered.
    let started = std::time::Instant::now();
    while good.service.runs.load(Ordering::Relaxed) < 20 {
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "no intent arrived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let sent_at = std::time::Instant::now();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(child.id() as i32),
        nix::sys::signal::Signal::SIGINT,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    // The deadline and the observation window (2 s), and slack for a loaded machine.
    assert!(
        sent_at.elapsed() < Duration::from_secs(20),
        "took {:?} to stop",
        sent_at.elapsed()
    );
    assert_eq!(
        out.status.code(),
        Some(130),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let after = json["run"]["interrupted_after_s"].as_f64().unwrap();
    assert!(after > 0.0 && after < 60.0, "{after}");
    assert_eq!(json["run"]["duration_s"].as_f64().unwrap(), after);
    // The achieved rate is over the time run, not the ten minutes asked.
    let rate = json["achieved_rate_per_s"].as_f64().unwrap();
    assert!(rate > 25.0 && rate < 100.0, "{rate}");
    assert_eq!(json["duplicate_labels"], 0);
}

/// `--out FILE` writes the result as JSON whatever `--format` prints, replaces a result it
/// wrote before, and refuses a file it did not write (exit 2, the file unchanged).
#[test]
fn out_writes_the_json_result_and_refuses_a_foreign_file() {
    let good = TestServer::start(Flaw::None, 0);
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("result.json");
    let run = |path: &std::path::Path| {
        std::process::Command::new(env!("CARGO_BIN_EXE_idemcalc"))
            .args(["load", good.url().as_str(), "--rate", "20"])
            .args(["--duration", "500ms", "--quiet", "--time-scale", "100"])
            .arg("--out")
            .arg(path)
            .output()
            .unwrap()
    };
    for _ in 0..2 {
        let o = run(&out);
        assert_eq!(
            o.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&o.stderr)
        );
        // The table on stdout, the JSON in the file.
        assert!(String::from_utf8_lossy(&o.stdout).contains("Checks from outside"));
        let json: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&out).unwrap()).unwrap();
        assert_eq!(json["duplicate_labels"], 0);
    }
    let foreign = dir.path().join("notes.txt");
    std::fs::write(&foreign, "mine\n").unwrap();
    let o = run(&foreign);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--out"));
    assert_eq!(std::fs::read_to_string(&foreign).unwrap(), "mine\n");
}
