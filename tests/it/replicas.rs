//! Issue 54: `serve --replica` as several processes on one PostgreSQL schema behind a real load
//! balancer (HAProxy from the distribution, started by each test with a config of its own on a
//! free port), with the carrier behind HTTP shared by every replica, as in production.

use crate::common;
use crate::serve::status_table_answers;
use common::{PG_URL_VAR, Server, client};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

const BODY: &str = r#"{"order_id":918273,"parcel_no":1,"weight_g":1450,"service":"ground"}"#;

/// The seed's 30 s lease at 10x: 3 s of wall time.
const SCALE: &str = "10";

fn fresh_schema() -> String {
    format!("r_{}", &uuid::Uuid::new_v4().simple().to_string()[..16])
}

fn with_schema(url: &str, schema: &str) -> String {
    let sep = if url.contains('?') { '&' } else { '?' };
    format!("{url}{sep}schema={schema}")
}

/// `haproxy` from the distribution, or `None` (said on stderr) where it is not installed;
/// in CI (`.ci/run` installs it) its absence fails the test.
fn haproxy_path() -> Option<&'static str> {
    let found = Command::new("haproxy")
        .arg("-v")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return Some("haproxy");
    }
    assert!(
        std::env::var_os("CI").is_none(),
        "CI is set but haproxy is not installed (.ci/run installs it)"
    );
    eprintln!("*** haproxy is not installed: SKIPPED a test that needs a load balancer");
    None
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port()
}

/// Three (or `n`) replicas of `serve` on one fresh schema, the carrier they share, and HAProxy
/// in front, round-robin with health checks on `/healthz`. The schema is dropped at the end.
struct Cluster {
    url: String,
    schema: String,
    replicas: Vec<Option<Server>>,
    carrier: String,
    balancer: Option<common::Killed>,
    /// The balancer as a [`Server`] with no process of its own, for the shared request helpers.
    front: Option<Server>,
    _carrier: common::Killed,
    _dir: tempfile::TempDir,
}

impl Cluster {
    fn start(n: usize, carrier_args: &[&str], balanced: bool) -> Option<Cluster> {
        let url = common::server_url(PG_URL_VAR)?;
        let haproxy = if balanced {
            Some(haproxy_path()?)
        } else {
            None
        };
        let mut all = vec!["carrier", "--listen", "127.0.0.1:0", "--time-scale", SCALE];
        all.extend_from_slice(carrier_args);
        let (carrier_proc, carrier) = common::spawn_listening(&all);
        let schema = fresh_schema();
        let store = with_schema(&url, &schema);
        let replicas = (1..=n)
            .map(|i| {
                let name = format!("r{i}");
                Some(Server::start(
                    &store,
                    &[
                        "--replica",
                        &name,
                        "--carrier-url",
                        &carrier,
                        "--test-hooks",
                        "--time-scale",
                        SCALE,
                        "--pool",
                        "2",
                        // A sweep every 100 ms of wall time, so the test sees who sweeps.
                        "--sweep-period",
                        "1s",
                    ],
                ))
            })
            .collect::<Vec<_>>();
        let dir = tempfile::tempdir().unwrap();
        let mut cluster = Cluster {
            url,
            schema,
            replicas,
            carrier,
            balancer: None,
            front: None,
            _carrier: carrier_proc,
            _dir: dir,
        };
        if let Some(haproxy) = haproxy {
            cluster.balance(haproxy);
        }
        Some(cluster)
    }

    /// Starts HAProxy over the replicas, in the foreground (`-db`), and waits until it answers.
    fn balance(&mut self, haproxy: &str) {
        let port = free_port();
        let servers: String = self
            .replicas
            .iter()
            .flatten()
            .enumerate()
            .map(|(i, s)| format!("  server r{} {} check\n", i + 1, s.addr))
            .collect();
        // Each request on a new server connection: a replica's header deadline closes idle ones,
        // and a request sent on a connection just closed would be answered 502. A refused
        // connection (a killed replica not yet marked down) is tried on another server.
        let config = format!(
            "global\n  maxconn 2000\n\
             defaults\n  mode http\n  timeout connect 1s\n  timeout client 60s\n  timeout server 60s\n  \
             option http-server-close\n  option redispatch\n  retries 3\n\
             frontend fe\n  bind 127.0.0.1:{port}\n  default_backend replicas\n\
             backend replicas\n  balance roundrobin\n  option httpchk GET /healthz\n  \
             default-server inter 300ms fall 2 rise 1\n{servers}"
        );
        let path = self._dir.path().join("haproxy.cfg");
        std::fs::write(&path, config).unwrap();
        let child = Command::new(haproxy)
            .arg("-db")
            .arg("-f")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("start haproxy");
        let balancer = common::Killed(child);
        let base = format!("http://127.0.0.1:{port}");
        let c = client();
        let up = (0..200).any(|_| {
            let ok = c
                .get(format!("{base}/healthz"))
                .send()
                .is_ok_and(|r| r.status().as_u16() == 200);
            if !ok {
                std::thread::sleep(Duration::from_millis(50));
            }
            ok
        });
        assert!(up, "haproxy did not answer /healthz on port {port}");
        self.balancer = Some(balancer);
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(
            dir.path().join("callers"),
            format!("{} fulfilment\n", common::TOKEN),
        )
        .unwrap();
        self.front = Some(Server {
            child: None,
            addr: format!("127.0.0.1:{port}"),
            base,
            stderr: dir.path().join("stderr"),
            dir,
        });
    }

    fn front(&self) -> &Server {
        self.front.as_ref().expect("a balanced cluster")
    }

    fn replica(&self, i: usize) -> &Server {
        self.replicas[i].as_ref().expect("a live replica")
    }

    fn live(&self) -> impl Iterator<Item = (usize, &Server)> {
        self.replicas
            .iter()
            .enumerate()
            .filter_map(|(i, s)| Some((i, s.as_ref()?)))
    }

    /// `kill -9` of replica `i`: no drain, no goodbye to the store.
    fn kill(&mut self, i: usize) {
        let mut s = self.replicas[i].take().expect("a live replica");
        let mut child = s.child.take().unwrap();
        child.kill().unwrap();
        child.wait().unwrap();
    }

    /// A metric summed over the live replicas.
    fn total(&self, name: &str) -> f64 {
        self.live().map(|(_, s)| counted(s, name)).sum()
    }

    fn admin(&self) -> postgres::Client {
        postgres::Client::connect(&self.url, postgres::NoTls).unwrap()
    }

    fn labels(&self) -> i64 {
        self.admin()
            .query_one(&format!("SELECT count(*) FROM {}.labels", self.schema), &[])
            .unwrap()
            .get(0)
    }

    fn invoice(&self) -> Vec<serde_json::Value> {
        let text = client()
            .get(format!("{}/v1/invoice", self.carrier))
            .send()
            .unwrap()
            .text()
            .unwrap();
        serde_json::from_str::<serde_json::Value>(&text)
            .unwrap()
            .as_array()
            .unwrap()
            .clone()
    }

    /// The index of the replica whose `/metrics` says it sweeps, once exactly one does (a
    /// replica takes the key within its retry period; a hang fails the test).
    /// Waits until replica `i` has swept, then checks that no other live replica ever has.
    fn only_sweeper(&self, i: usize) {
        let batches = "idemcalc_sweeper_batches_total";
        let started = Instant::now();
        while counted(self.replica(i), batches) == 0.0 {
            assert!(
                started.elapsed() < Duration::from_secs(60),
                "the leader never swept"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
        for (j, s) in self.live() {
            if j != i {
                assert_eq!(counted(s, batches), 0.0, "r{} swept too", j + 1);
            }
        }
    }

    fn one_leader(&self) -> usize {
        let c = client();
        for _ in 0..400 {
            let leading: Vec<usize> = self
                .live()
                .filter(|(_, s)| s.metric(&c, "idemcalc_sweeper_leader") == 1.0)
                .map(|(i, _)| i)
                .collect();
            if let [one] = leading[..] {
                return one;
            }
            assert!(leading.len() <= 1, "two replicas sweep: {leading:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
        panic!("no replica became the sweeper");
    }
}

/// A metric of `s`, 0 when it has not been counted yet (a label set appears with its first
/// count).
fn counted(s: &Server, name: &str) -> f64 {
    let text = client()
        .get(s.url("/metrics"))
        .send()
        .unwrap()
        .text()
        .unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
        .unwrap_or(0.0)
}

impl Drop for Cluster {
    fn drop(&mut self) {
        self.front.take();
        self.balancer.take();
        self.replicas.clear();
        if let Ok(mut admin) = postgres::Client::connect(&self.url, postgres::NoTls) {
            let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {} CASCADE", self.schema));
        }
    }
}

/// The seed's status table through HAProxy over three replicas: every answer as from one
/// server, whichever replica serves each request (a died attempt's lease on one replica is
/// 409 on the others), and the replicas' counts add up to one server's.
#[test]
fn three_replicas_behind_haproxy_answer_the_status_table() {
    let Some(cluster) = Cluster::start(3, &[], true) else {
        return;
    };
    let c = client();
    // Round-robin: every replica answers, each naming itself.
    let mut seen = std::collections::BTreeSet::new();
    for _ in 0..6 {
        let r = c.get(cluster.front().url("/healthz")).send().unwrap();
        assert_eq!(r.status().as_u16(), 200);
        seen.insert(
            r.headers()["idemcalc-replica"]
                .to_str()
                .unwrap()
                .to_string(),
        );
    }
    assert_eq!(seen.len(), 3, "{seen:?}");
    status_table_answers(cluster.front(), true);
    assert_eq!(
        cluster.total(r#"idemcalc_requests_total{status="201",outcome="created"}"#),
        1.0
    );
    assert_eq!(
        cluster.total(r#"idemcalc_requests_total{status="201",outcome="replayed"}"#),
        2.0
    );
    // One carrier for all: the label bought once per parcel (918273 and the died one, 5).
    assert_eq!(cluster.invoice().len(), 2);
    assert_eq!(
        cluster.labels(),
        1,
        "the died attempt's key holds no label yet"
    );
}

/// The seed's lease-takeover timeline across processes: an attempt on replica A is inside its
/// carrier call when A is killed (-9); retries through the balancer get 409 while A's lease
/// runs, then another replica takes the lease over and answers with the label the carrier sold
/// A's attempt: one label, one invoice line.
#[test]
fn a_lease_of_a_killed_replica_is_taken_over_by_another() {
    // The carrier takes 1 s of wall time (10 s at 10x); the lease is 3 s.
    let Some(mut cluster) = Cluster::start(3, &["--carrier-latency", "10s"], true) else {
        return;
    };
    let a = cluster.replica(0).base.clone();
    let key = "\"label:918273:1:v1\"";
    let first = std::thread::spawn(move || {
        client()
            .post(format!("{a}/labels"))
            .bearer_auth(common::TOKEN)
            .header("idempotency-key", key)
            .header("content-type", "application/json")
            .body(BODY)
            .send()
    });
    // Txn 1 committed (the key is claimed, its lease A's), so A is in its carrier call.
    let mut admin = cluster.admin();
    let claimed = format!("SELECT count(*) FROM {}.idempotency_keys", cluster.schema);
    let started = Instant::now();
    while admin.query_one(&claimed, &[]).unwrap().get::<_, i64>(0) == 0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "A never claimed the key"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
    cluster.kill(0);
    let c = client();
    assert!(
        first.join().unwrap().is_err(),
        "a killed replica answers nothing"
    );
    let mut conflicts = 0;
    let last = loop {
        let r = cluster.front().post(&c, Some(key), BODY).send().unwrap();
        if r.status().as_u16() != 409 {
            break r;
        }
        conflicts += 1;
        assert!(conflicts < 200, "the lease was never taken over");
        std::thread::sleep(Duration::from_millis(100));
    };
    assert!(
        conflicts >= 1,
        "the dead replica's lease turned retries away first; then {} {:?}",
        last.status(),
        last.headers()
    );
    assert_eq!(last.status().as_u16(), 201);
    let by = last.headers()["idemcalc-replica"]
        .to_str()
        .unwrap()
        .to_string();
    assert_ne!(by, "r1", "served by a survivor");
    let label: serde_json::Value = serde_json::from_str(&last.text().unwrap()).unwrap();
    assert_eq!(cluster.total("idemcalc_takeovers_total"), 1.0);
    let taker = cluster
        .live()
        .find(|(_, s)| s.metric(&c, "idemcalc_takeovers_total") == 1.0)
        .map(|(i, _)| format!("r{}", i + 1));
    assert_eq!(
        taker.as_deref(),
        Some(by.as_str()),
        "the replica that answered took it over"
    );
    // The carrier sold A's attempt the label; the takeover's call got it back, not a second.
    let invoice = cluster.invoice();
    assert_eq!(invoice.len(), 1, "{invoice:?}");
    assert_eq!(invoice[0]["label_id"], label["label_id"]);
    assert_eq!(cluster.labels(), 1);
    let replay = cluster.front().post(&c, Some(key), BODY).send().unwrap();
    assert_eq!(replay.headers()["idempotent-replayed"], "true");
}

/// `load` through the balancer while one replica is killed (-9) mid-run: no intent labelled
/// twice, none left without its label, and the carrier billed exactly the labels the store
/// holds.
#[test]
fn a_replica_killed_mid_load_leaves_no_duplicate_and_invoice_equals_labels() {
    let Some(mut cluster) = Cluster::start(3, &[], true) else {
        return;
    };
    let callers = cluster._dir.path().join("load-callers");
    std::fs::write(&callers, format!("{} fulfilment\n", common::TOKEN)).unwrap();
    let load = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args([
            "load",
            &cluster.front().base,
            "--rate",
            "100",
            "--duration",
            "4s",
        ])
        .args(["--time-scale", SCALE, "--format", "json", "--quiet"])
        // An intent whose attempt died with the replica waits out the lease (3 s) before a
        // survivor takes it over: listen long enough for that retry.
        .args(["--observe", "8s", "--max-attempts", "10"])
        .arg("--carrier-invoice")
        .arg(format!("{}/v1/invoice", cluster.carrier))
        .arg("--callers")
        .arg(&callers)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    // Mid-run: once the victim has answered some creates.
    let created = r#"idemcalc_requests_total{status="201",outcome="created"}"#;
    let started = Instant::now();
    while counted(cluster.replica(1), created) < 20.0 {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no load arrived"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    cluster.kill(1);
    let out = load.wait_with_output().unwrap();
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!("{e}: {}", String::from_utf8_lossy(&out.stderr));
    });
    assert_eq!(json["duplicate_labels"], 0, "{json}");
    assert_eq!(json["stuck_intents"], 0, "{json}");
    assert_eq!(json["unexpected_422"], 0, "{json}");
    assert_eq!(
        json["checked"]["labelled_intents"], json["counts"]["intents_started"],
        "every intent ends with its label: {json}"
    );
    assert_eq!(json["invoice"]["duplicate_purchases"], 0, "{json}");
    let labels = cluster.labels();
    assert!(labels > 100, "{labels} labels: {json}");
    assert_eq!(cluster.invoice().len() as i64, labels, "{json}");
    assert_eq!(out.status.code(), Some(0), "{json}");
}

/// One replica sweeps at a time; when it dies (-9) its session ends with it, and another
/// replica takes the sweeper key within its retry period. Runs that measure alone are refused
/// while replicas serve, naming one, and a replica is refused while such a run holds the schema.
#[test]
fn one_sweeper_at_a_time_handed_over_and_measuring_runs_kept_out() {
    let Some(mut cluster) = Cluster::start(3, &[], false) else {
        return;
    };
    let leader = cluster.one_leader();
    assert_eq!(cluster.total("idemcalc_sweeper_elected_total"), 1.0);
    cluster.only_sweeper(leader);
    let store = with_schema(&cluster.url, &cluster.schema);
    let (code, _, err) = common::idemcalc(&["simulate", "--store", &store, "--duration", "1h"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("in use by another idemcalc run"), "{err}");
    assert!(
        err.contains("idemcalc serve replica r"),
        "names the holder: {err}"
    );
    // A server that holds alone is refused too.
    let (code, _, err) = common::idemcalc(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--store",
        &store,
        "--trust-caller-header",
        "x-caller",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("in use by another idemcalc run"), "{err}");
    cluster.kill(leader);
    let next = cluster.one_leader();
    assert_ne!(next, leader);
    assert_eq!(cluster.total("idemcalc_sweeper_elected_total"), 1.0);
    cluster.only_sweeper(next);
    // Every replica gone: a measuring run holds the schema, and a replica is refused meanwhile.
    cluster.replicas.clear();
    let tmp = tempfile::tempdir().unwrap();
    let mut run = common::long_run(&store, tmp.path());
    let mut admin = cluster.admin();
    let held = |admin: &mut postgres::Client| -> bool {
        admin
            .query_one(
                "SELECT count(*) > 0 FROM pg_stat_activity WHERE application_name LIKE 'idemcalc pid %'",
                &[],
            )
            .unwrap()
            .get(0)
    };
    let started = Instant::now();
    while !held(&mut admin) {
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "the run never held the schema"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let (code, _, err) = common::idemcalc(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--store",
        &store,
        "--trust-caller-header",
        "x-caller",
        "--replica",
        "late",
        "--carrier-url",
        &cluster.carrier,
    ]);
    let _ = run.kill();
    let _ = run.wait();
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("held alone by another idemcalc run (idemcalc pid"),
        "{err}"
    );
}

/// `--replica` on a store replicas cannot share is refused, saying why.
#[test]
fn replicas_need_a_named_postgres_schema() {
    let dir = tempfile::tempdir().unwrap();
    let sqlite = format!("sqlite:{}", dir.path().join("s.sqlite").display());
    let serve = |store: &str, name: &str| {
        common::idemcalc(&[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--store",
            store,
            "--trust-caller-header",
            "x-caller",
            "--replica",
            name,
            "--carrier-url",
            "http://127.0.0.1:9",
        ])
    };
    let (code, _, err) = serve(&sqlite, "a");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("SQLite stays one server"), "{err}");
    let (code, _, err) = common::idemcalc(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--store",
        &sqlite,
        "--trust-caller-header",
        "x-caller",
        "--replica",
        "a",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--replica needs --carrier-url"), "{err}");
    let (code, _, err) = serve(&sqlite, "a b");
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--replica \"a b\""), "{err}");
    let (code, _, err) = common::idemcalc(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--store",
        &sqlite,
        "--trust-caller-header",
        "x-caller",
        "--replica",
        "a",
        "--carrier-url",
        "http://127.0.0.1:9",
        "--sweeper",
        "partitions",
    ]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--sweeper partitions"), "{err}");
    if let Some(url) = common::server_url(PG_URL_VAR) {
        let (code, _, err) = serve(&url, "a");
        assert_eq!(code, Some(2), "{err}");
        assert!(err.contains("?schema=NAME"), "{err}");
    }
}
