//! Every statement has a deadline: a stopped server or a lock held by someone else ends a run
//! with exit 3 naming the statement and the wait, instead of leaving it waiting for ever.
//!
//! A test that stops a server stops a throwaway server of its own (in a temporary directory, on
//! a free port), never the shared one; the lock test locks only a fresh schema of its own.

use crate::common;

use common::{long_run, wait_within};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const EXIT_STORE_FAILED: i32 = 3;

fn unique(what: &str) -> String {
    format!(
        "{what}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..12]
    )
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Waits until the run has written key records into `schema`.
fn wait_for_rows(client: &mut postgres::Client, schema: &str, run: &mut Child) {
    let started = Instant::now();
    loop {
        let n: i64 = client
            .query_one(
                &format!("SELECT count(*) FROM {schema}.idempotency_keys"),
                &[],
            )
            .and_then(|r| r.try_get(0))
            .unwrap_or(0);
        if n > 0 {
            return;
        }
        assert!(run.try_wait().unwrap().is_none(), "the run ended early");
        assert!(
            started.elapsed() < Duration::from_secs(60),
            "no rows after 60 s"
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// The process ids of `pid` and its children.
fn with_children(pid: i32) -> Vec<i32> {
    let mut pids = vec![pid];
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Some(child) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{child}/stat")) else {
            continue;
        };
        // The parent pid is the second field after the parenthesised command.
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|s| s.parse::<i32>().ok());
        if ppid == Some(pid) {
            pids.push(child);
        }
    }
    pids
}

/// A PostgreSQL server of the test's own, in a temporary directory, stopped (and its processes
/// continued first) when dropped.
struct OwnPostgres {
    dir: tempfile::TempDir,
    bin: std::path::PathBuf,
    port: u16,
}

fn as_postgres(cmd: &Path) -> Command {
    // initdb and the server refuse to run as root.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(cmd);
        c
    } else {
        Command::new(cmd)
    }
}

impl OwnPostgres {
    fn start() -> Option<OwnPostgres> {
        let bin = std::fs::read_dir("/usr/lib/postgresql")
            .ok()?
            .flatten()
            .map(|e| e.path().join("bin"))
            .find(|p| p.join("initdb").exists())?;
        let dir = tempfile::tempdir().unwrap();
        let data = dir.path().join("data");
        if unsafe { libc::geteuid() } == 0 {
            let status = Command::new("chown")
                .args(["-R", "postgres"])
                .arg(dir.path())
                .status()
                .unwrap();
            assert!(status.success());
        }
        let out = as_postgres(&bin.join("initdb"))
            .args(["-A", "trust", "-U", "postgres", "-D"])
            .arg(&data)
            .output()
            .unwrap();
        assert!(out.status.success(), "initdb: {out:?}");
        let port = free_port();
        let out = as_postgres(&bin.join("pg_ctl"))
            .arg("-D")
            .arg(&data)
            .arg("-l")
            .arg(dir.path().join("log"))
            .arg("-o")
            .arg(format!(
                "-p {port} -k {} -c listen_addresses=127.0.0.1 -c fsync=off",
                dir.path().display()
            ))
            .args(["-w", "start"])
            .output()
            .unwrap();
        assert!(out.status.success(), "pg_ctl start: {out:?}");
        Some(OwnPostgres { dir, bin, port })
    }

    fn url(&self) -> String {
        format!("postgres://postgres@127.0.0.1:{}/postgres", self.port)
    }

    fn postmaster(&self) -> i32 {
        let text = std::fs::read_to_string(self.dir.path().join("data/postmaster.pid")).unwrap();
        text.lines().next().unwrap().trim().parse().unwrap()
    }

    fn signal_all(&self, sig: i32) {
        for pid in with_children(self.postmaster()) {
            unsafe {
                libc::kill(pid, sig);
            }
        }
    }
}

impl Drop for OwnPostgres {
    fn drop(&mut self) {
        self.signal_all(libc::SIGCONT);
        let _ = as_postgres(&self.bin.join("pg_ctl"))
            .arg("-D")
            .arg(self.dir.path().join("data"))
            .args(["-m", "immediate", "-w", "stop"])
            .output();
    }
}

/// A server stopped mid-run (`kill -STOP` of every one of its processes) answers nothing: the
/// statement in flight gets no answer within its deadline, and the run ends, exit 3, naming it.
#[test]
fn a_stopped_postgres_server_ends_the_run_within_its_deadline() {
    let Some(server) = OwnPostgres::start() else {
        eprintln!("*** no PostgreSQL binaries under /usr/lib/postgresql: SKIPPED");
        return;
    };
    let schema = unique("t_stop");
    let tmp = tempfile::tempdir().unwrap();
    let mut run = long_run(&format!("{}?schema={schema}", server.url()), tmp.path());
    let mut client = postgres::Client::connect(&server.url(), postgres::NoTls).unwrap();
    wait_for_rows(&mut client, &schema, &mut run);
    drop(client);
    std::thread::sleep(Duration::from_millis(500));
    server.signal_all(libc::SIGSTOP);
    let stopped = Instant::now();
    let (code, err) = wait_within(run, Duration::from_secs(60));
    let took = stopped.elapsed();
    drop(server);
    eprintln!("stopped server: exit {code:?} after {took:?}: {err}");
    assert_eq!(code, Some(EXIT_STORE_FAILED), "{err}");
    assert!(
        err.contains("no answer from the server to the")
            || err.contains("did not answer its check"),
        "names the statement: {err}"
    );
    assert!(err.contains("stopped"), "{err}");
    assert!(
        took < Duration::from_secs(20),
        "the run took {took:?} to notice"
    );
}

/// A `LOCK TABLE … ACCESS EXCLUSIVE` held by another session on the run's own (fresh) schema:
/// the run stops after its lock_timeout, exit 3, naming the statement and the wait, instead of
/// waiting silently for as long as the lock is held.
#[test]
fn a_table_locked_by_another_session_ends_the_run_after_its_lock_timeout() {
    let Some(url) = common::server_url(common::PG_URL_VAR) else {
        return;
    };
    let schema = unique("t_lock");
    let tmp = tempfile::tempdir().unwrap();
    let mut run = long_run(&format!("{url}?schema={schema}"), tmp.path());
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    wait_for_rows(&mut admin, &schema, &mut run);
    let mut tx = admin.transaction().unwrap();
    tx.batch_execute(&format!(
        "LOCK TABLE {schema}.idempotency_keys IN ACCESS EXCLUSIVE MODE"
    ))
    .unwrap();
    let locked = Instant::now();
    let (code, err) = wait_within(run, Duration::from_secs(45));
    let took = locked.elapsed();
    tx.rollback().unwrap();
    let _ = admin.batch_execute(&format!("DROP SCHEMA IF EXISTS {schema} CASCADE"));
    eprintln!("locked table: exit {code:?} after {took:?}: {err}");
    assert_eq!(code, Some(EXIT_STORE_FAILED), "{err}");
    assert!(err.contains("lock_timeout"), "names the wait: {err}");
    assert!(err.contains("waited longer than"), "{err}");
    assert!(took < Duration::from_secs(15), "took {took:?}");
}

/// A Redis server of the test's own, paused mid-run: exit 3 saying Redis did not answer, not a
/// bare "Resource temporarily unavailable".
#[test]
fn a_stopped_redis_server_ends_the_run_with_a_clear_message() {
    let port = free_port();
    let dir = tempfile::tempdir().unwrap();
    let Ok(mut server) = Command::new("redis-server")
        .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
        .args(["--save", "", "--appendonly", "no", "--dir"])
        .arg(dir.path())
        .stdout(Stdio::null())
        .spawn()
    else {
        eprintln!("*** no redis-server: SKIPPED");
        return;
    };
    let url = format!("redis://127.0.0.1:{port}");
    let started = Instant::now();
    let mut con = loop {
        if let Ok(c) = redis::Client::open(url.as_str()).unwrap().get_connection() {
            break c;
        }
        assert!(started.elapsed() < Duration::from_secs(10), "no redis");
        std::thread::sleep(Duration::from_millis(50));
    };
    let prefix = unique("stop");
    let mut run = long_run(&format!("{url}?prefix={prefix}"), dir.path());
    let started = Instant::now();
    while redis::cmd("DBSIZE").query::<i64>(&mut con).unwrap() < 3 {
        assert!(run.try_wait().unwrap().is_none(), "the run ended early");
        assert!(started.elapsed() < Duration::from_secs(60), "no keys");
        std::thread::sleep(Duration::from_millis(50));
    }
    unsafe {
        libc::kill(server.id() as i32, libc::SIGSTOP);
    }
    let stopped = Instant::now();
    let (code, err) = wait_within(run, Duration::from_secs(60));
    let took = stopped.elapsed();
    unsafe {
        libc::kill(server.id() as i32, libc::SIGCONT);
    }
    let _ = server.kill();
    let _ = server.wait();
    eprintln!("stopped redis: exit {code:?} after {took:?}: {err}");
    assert_eq!(code, Some(EXIT_STORE_FAILED), "{err}");
    assert!(err.contains("did not answer within"), "{err}");
    assert!(took < Duration::from_secs(20), "took {took:?}");
}

/// Issue 38: `idemcalc serve` on PostgreSQL whose writer's backend is stopped (`kill -STOP` of
/// that one server process, on a server of the test's own): the request in flight gets 503
/// within the statement's deadline and its client-side margin, not a hang; once the backend is
/// continued the writer opens a new connection and the service answers again. The hold's own
/// session is not stopped, so the store stays held throughout.
#[test]
fn serve_answers_503_when_its_postgres_backend_stops_and_recovers() {
    let Some(server) = OwnPostgres::start() else {
        eprintln!("*** no PostgreSQL binaries under /usr/lib/postgresql: SKIPPED");
        return;
    };
    let schema = unique("t_serve_stop");
    let mut serve = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(["serve", "--listen", "127.0.0.1:0", "--pool", "1"])
        .args(["--trust-caller-header", "x-caller", "--store"])
        .arg(format!("{}?schema={schema}", server.url()))
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let base = common::listening_url(&mut serve).expect("a listening line from serve");
    idemcalc::net::install_tls_provider();
    let http = reqwest::blocking::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let post = |key: &str| {
        http.post(format!("{base}/labels"))
            .header("x-caller", "fulfilment")
            .header("idempotency-key", key)
            .header("content-type", "application/json")
            .body(r#"{"order_id":918273,"parcel_no":1,"weight_g":1450,"service":"ground"}"#)
            .send()
            .map(|r| r.status().as_u16())
    };
    assert_eq!(post("k-before").unwrap(), 201);
    let mut client = postgres::Client::connect(&server.url(), postgres::NoTls).unwrap();
    // The pool's one connection (the hold's session is `idemcalc pid N`).
    let writer: i32 = client
        .query_one(
            "SELECT pid FROM pg_stat_activity WHERE application_name = 'idemcalc'",
            &[],
        )
        .unwrap()
        .get(0);
    unsafe {
        libc::kill(writer, libc::SIGSTOP);
    }
    let stopped = Instant::now();
    let during = post("k-during");
    let took = stopped.elapsed();
    unsafe {
        libc::kill(writer, libc::SIGCONT);
    }
    assert_eq!(during.unwrap(), 503, "after {took:?}");
    assert!(took < Duration::from_secs(20), "503 after {took:?}");
    // A new connection answers; the stopped request's claim never committed.
    let started = Instant::now();
    let after = loop {
        let s = post("k-after").unwrap();
        if s != 503 || started.elapsed() > Duration::from_secs(30) {
            break s;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(after, 201);
    assert_eq!(post("k-during").unwrap(), 201);
    unsafe {
        libc::kill(serve.id() as i32, libc::SIGTERM);
    }
    let (code, _) = wait_within(serve, Duration::from_secs(30));
    assert_eq!(code, Some(0));
    drop(client);
    drop(server);
}
