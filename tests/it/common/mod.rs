//! Shared test harness: an engine over a real store on a virtual clock, and the checks every
//! conformance test ends with. The store comes from a [`Backend`], so one suite runs against
//! every store.
#![allow(dead_code)]

use idemcalc::carrier::{Carrier, CarrierConfig, Latency};
use idemcalc::clock::VirtualClock;
use idemcalc::engine::{Engine, EngineConfig, Request};
use idemcalc::store::{
    PgOptions, PgPool, RedisStore, SqliteOptions, SqliteStore, Store, Sweeper, Synchronous,
};
use std::io::Write as _;
use std::path::PathBuf;
use std::sync::{Arc, Once};

pub const BODY: &str =
    r#"{"order_id":918273,"parcel_no":1,"label_version":1,"weight_g":1450,"service":"ground"}"#;
pub const OTHER_BODY: &str =
    r#"{"order_id":918273,"parcel_no":1,"label_version":1,"weight_g":1500,"service":"ground"}"#;
pub const KEY: &str = "label:918273:1:v1";

/// The one environment variable through which the tests find PostgreSQL, e.g.
/// `postgres://postgres@127.0.0.1:5432/test`. `.ci/run` sets it.
pub const PG_URL_VAR: &str = "IDEMCALC_PG_URL";

/// The environment variable through which the tests find Redis, e.g. `redis://127.0.0.1:6379`.
/// `.ci/run` sets it.
pub const REDIS_URL_VAR: &str = "IDEMCALC_REDIS_URL";

/// Connections per test: the concurrency tests race up to 16 engines, each on its own connection.
const PG_TEST_POOL: u32 = 20;

/// The partitioned backend's period: an hour, so a day's retention spans 25 partitions.
pub const PARTITIONS: Sweeper = Sweeper::Partitions {
    period_ms: 3_600_000,
};

/// Where a test's store lives. Each backend value is private to one test.
pub enum Backend {
    Sqlite {
        _dir: tempfile::TempDir,
        path: PathBuf,
    },
    /// A fresh schema `t_<random>` on the server at `url`, dropped when the backend is dropped,
    /// so tests run in parallel without seeing each other's rows.
    Postgres {
        url: String,
        schema: String,
        pool: PgPool,
        sweeper: Sweeper,
    },
    /// Key records under a fresh prefix `t_<random>` on the Redis server at `url`, deleted when
    /// the backend is dropped; labels in a SQLite file in `dir`.
    Redis {
        url: String,
        prefix: String,
        dir: tempfile::TempDir,
    },
}

/// The server `var` names (`IDEMCALC_PG_URL`, `IDEMCALC_REDIS_URL`): the one check every test
/// that needs a server makes. Unset on a developer's machine, `None` after saying so loudly;
/// unset under CI (`CI` set), a failure: a CI run must not pass without the server.
pub fn server_url(var: &str) -> Option<String> {
    match std::env::var(var) {
        Ok(url) if !url.trim().is_empty() => Some(url),
        _ if std::env::var_os("CI").is_some() => panic!(
            "CI is set but {var} is not: the tests that need its server must run in CI \
             (.ci/run starts PostgreSQL and Redis and sets {PG_URL_VAR} and {REDIS_URL_VAR})"
        ),
        _ => {
            let _ = writeln!(
                std::io::stderr(),
                "*** {var} is not set: SKIPPED a test that needs its server"
            );
            None
        }
    }
}

impl Backend {
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("store.sqlite");
        Backend::Sqlite { _dir: dir, path }
    }

    /// A store in a new schema on the server named by `IDEMCALC_PG_URL`, or `None` (after saying
    /// so loudly on stderr) when the variable is unset on a developer's machine. Panics in CI
    /// (`CI` set) without the variable, and anywhere when the variable names a server that cannot
    /// be used: asked for PostgreSQL, a run must not pass without it.
    pub fn postgres() -> Option<Self> {
        Self::postgres_with(Sweeper::Delete)
    }

    /// As [`Backend::postgres`], with the key table partitioned by `expires_at` in periods of
    /// an hour (`--sweeper partitions`).
    pub fn postgres_partitions() -> Option<Self> {
        Self::postgres_with(PARTITIONS)
    }

    fn postgres_with(sweeper: Sweeper) -> Option<Self> {
        let url = server_url(PG_URL_VAR)?;
        let schema = format!("t_{}", &uuid::Uuid::new_v4().simple().to_string()[..16]);
        Some(Self::postgres_at(&url, &schema, sweeper))
    }

    /// A store under a new prefix on the server named by `IDEMCALC_REDIS_URL`, or `None` (said
    /// loudly) when it is unset on a developer's machine; in CI its absence fails the test.
    pub fn redis() -> Option<Self> {
        let url = server_url(REDIS_URL_VAR)?;
        Some(Self::redis_at(&url))
    }

    pub fn redis_at(url: &str) -> Self {
        let prefix = format!("t_{}", &uuid::Uuid::new_v4().simple().to_string()[..16]);
        let dir = tempfile::tempdir().expect("temp dir");
        RedisStore::open(url, &prefix, &dir.path().join("labels.sqlite"))
            .unwrap_or_else(|e| panic!("{REDIS_URL_VAR} is set but Redis cannot be used: {e}"));
        Backend::Redis {
            url: url.to_string(),
            prefix,
            dir,
        }
    }

    fn postgres_at(url: &str, schema: &str, sweeper: Sweeper) -> Self {
        install_amcheck(url);
        let options = PgOptions {
            schema: schema.to_string(),
            pool_size: PG_TEST_POOL,
            // Visibility and locking do not depend on it, and it keeps the suite fast.
            synchronous: Synchronous::Off,
            sweeper,
            ..PgOptions::default()
        };
        let pool = PgPool::connect(url, &options).unwrap_or_else(|e| {
            panic!(
                "{PG_URL_VAR} is set but PostgreSQL cannot be used: {e}\n\
                 Start the server (pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start) \
                 or unset {PG_URL_VAR} to run the SQLite half only."
            )
        });
        Backend::Postgres {
            url: url.to_string(),
            schema: schema.to_string(),
            pool,
            sweeper,
        }
    }

    /// A new, empty store of the same kind.
    pub fn fresh(&self) -> Self {
        match self {
            Backend::Sqlite { .. } => Backend::sqlite(),
            Backend::Postgres { url, sweeper, .. } => Self::postgres_at(
                url,
                &format!("t_{}", &uuid::Uuid::new_v4().simple().to_string()[..16]),
                *sweeper,
            ),
            Backend::Redis { url, .. } => Self::redis_at(url),
        }
    }

    /// A new connection to this test's store.
    pub fn connect(&self) -> Box<dyn Store> {
        match self {
            Backend::Sqlite { path, .. } => {
                Box::new(SqliteStore::open(path, &SqliteOptions::default()).expect("open store"))
            }
            Backend::Postgres { pool, .. } => Box::new(pool.get().expect("a pooled connection")),
            Backend::Redis { url, prefix, dir } => Box::new(
                RedisStore::open(url, prefix, &dir.path().join("labels.sqlite"))
                    .expect("open the Redis store"),
            ),
        }
    }
}

impl Drop for Backend {
    fn drop(&mut self) {
        if let Backend::Redis { url, prefix, .. } = self {
            let _ = idemcalc::store::redis::drop_prefix(url, prefix);
        }
        if let Backend::Postgres { pool, schema, .. } = self
            && let Err(e) = pool.drop_schema()
        {
            let _ = writeln!(
                std::io::stderr(),
                "warning: could not drop test schema {schema}: {e}"
            );
        }
    }
}

/// Installs the `amcheck` extension in the test database once per test binary, so that
/// `invariants().integrity_ok` is a real b-tree check in the tests. The store never installs it
/// itself (extensions are database-wide); the test database is ours to set up.
fn install_amcheck(url: &str) {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        let Ok(mut client) = postgres::Client::connect(url, postgres::NoTls) else {
            return; // PgPool::connect reports the real problem.
        };
        if let Err(e) = client.batch_execute("CREATE EXTENSION IF NOT EXISTS amcheck") {
            // Another test binary may be creating it at the same instant; anything else only
            // means integrity_ok falls back to "the invariant queries ran".
            let _ = writeln!(std::io::stderr(), "note: amcheck not installed: {e:?}");
        }
    });
}

pub struct Harness {
    pub backend: Backend,
    pub clock: VirtualClock,
    pub carrier: Arc<Carrier>,
    pub engine: Engine,
    pub config: EngineConfig,
}

pub fn carrier_config() -> CarrierConfig {
    CarrierConfig {
        latency: Latency::Fixed { ms: 50 },
        ..CarrierConfig::default()
    }
}

impl Harness {
    pub fn new(backend: Backend) -> Self {
        Self::with_config(backend, EngineConfig::default())
    }

    pub fn with_config(backend: Backend, config: EngineConfig) -> Self {
        let clock = VirtualClock::new();
        let carrier = Arc::new(Carrier::new(carrier_config()));
        let engine = Engine::new(
            backend.connect(),
            carrier.clone(),
            Arc::new(clock.clone()),
            config.clone(),
        );
        Self {
            backend,
            clock,
            carrier,
            engine,
            config,
        }
    }

    /// Another engine (its own connection) on the same store, clock and carrier.
    pub fn second_engine(&self) -> Engine {
        Engine::new(
            self.backend.connect(),
            self.carrier.clone(),
            Arc::new(self.clock.clone()),
            self.config.clone(),
        )
    }

    pub fn request(&self, body: &str) -> Request {
        Request::create_label("fulfilment", Some(KEY), body)
    }

    /// The checks that end every conformance test: the store is intact, every completed 201 has
    /// its label, and no parcel has two labels.
    pub fn assert_invariants(&mut self) {
        let inv = self.engine.store().invariants().expect("invariants");
        assert!(inv.integrity_ok, "integrity_check failed");
        assert_eq!(
            inv.completed_without_label, 0,
            "completed key without its label"
        );
        assert!(inv.max_labels_per_parcel <= 1, "a parcel has two labels");
    }
}

/// The JSON of `idemcalc ARGS --format json --quiet`, run from the project's root; a failed run
/// fails the test with its stderr.
pub fn json_of(args: &[&str]) -> serde_json::Value {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .args(["--format", "json", "--quiet"])
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// A `redis-server` of the test's own on a free port, for a test that changes server settings
/// (`maxmemory`) or needs the server to hold nothing else: the shared server at
/// `IDEMCALC_REDIS_URL` may hold other programs' keys, which an LRU cap would evict instead of
/// the test's. Stopped when dropped. `None` (said on stderr) where `redis-server` is not
/// installed, except in CI, where the Redis tests must run.
pub struct OwnRedis {
    child: std::process::Child,
    _dir: tempfile::TempDir,
    pub url: String,
}

impl OwnRedis {
    pub fn start() -> Option<Self> {
        let dir = tempfile::tempdir().expect("temp dir");
        // The port is free when asked; another process could take it before the server binds,
        // so a failed start is retried on a new port.
        for _ in 0..5 {
            let port = std::net::TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .expect("a free port")
                .port();
            let spawned = std::process::Command::new("redis-server")
                .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
                .args(["--save", "", "--appendonly", "no"])
                .arg("--dir")
                .arg(dir.path())
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn();
            let mut child = match spawned {
                Ok(child) => child,
                Err(e) => {
                    if std::env::var_os("CI").is_some() {
                        panic!("CI is set but redis-server cannot be started: {e}");
                    }
                    let _ = writeln!(
                        std::io::stderr(),
                        "*** redis-server cannot be started ({e}): a test that needs its own Redis was SKIPPED"
                    );
                    return None;
                }
            };
            let url = format!("redis://127.0.0.1:{port}");
            for _ in 0..100 {
                let up = redis::Client::open(url.as_str())
                    .and_then(|c| c.get_connection())
                    .and_then(|mut c| redis::cmd("PING").query::<String>(&mut c));
                if up.is_ok() {
                    return Some(OwnRedis {
                        child,
                        _dir: dir,
                        url,
                    });
                }
                if child.try_wait().ok().flatten().is_some() {
                    break;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
        panic!("redis-server did not start on any of five free ports");
    }

    /// A backend on this server under a fresh prefix.
    pub fn backend(&self) -> Backend {
        Backend::redis_at(&self.url)
    }
}

impl Drop for OwnRedis {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The exit code and stderr of `child`, killing it (and failing the test) if it is still running
/// after `limit`: a hang fails the test instead of blocking the suite.
pub fn wait_within(
    mut child: std::process::Child,
    limit: std::time::Duration,
) -> (Option<i32>, String) {
    wait_child(&mut child, limit)
}

/// [`wait_within`] for a child the caller keeps (in a [`Killed`], say).
pub fn wait_child(
    child: &mut std::process::Child,
    limit: std::time::Duration,
) -> (Option<i32>, String) {
    let started = std::time::Instant::now();
    loop {
        if let Some(status) = child.try_wait().expect("poll the child") {
            let mut err = String::new();
            if let Some(mut stderr) = child.stderr.take() {
                use std::io::Read as _;
                let _ = stderr.read_to_string(&mut err);
            }
            return (status.code(), err);
        }
        if started.elapsed() > limit {
            let _ = child.kill();
            panic!("the child is still running after {limit:?}: it hangs");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

/// Runs the idemcalc binary to the end: its exit code, stdout and stderr.
pub fn idemcalc(args: &[&str]) -> (Option<i32>, String, String) {
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(args)
        .output()
        .expect("run idemcalc");
    (
        o.status.code(),
        String::from_utf8_lossy(&o.stdout).into_owned(),
        String::from_utf8_lossy(&o.stderr).into_owned(),
    )
}

/// A simulation that runs for minutes unless stopped: every intent replayed at 400/s for 12 h,
/// its per-run files under `tmpdir`.
pub fn long_run(store: &str, tmpdir: &std::path::Path) -> std::process::Child {
    std::process::Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(["simulate", "--store", store, "--retention", "1h"])
        .args(["--duration", "12h", "--sample", "1", "--quiet"])
        .env("TMPDIR", tmpdir)
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("run idemcalc")
}

/// A scenario that replays a few hundred intents over two hours: fast, but every part of the
/// report (figures, budgets, series, outcomes) has something in it.
pub fn tiny_scenario(name: &str, seed: u64, budgets: &str) -> String {
    format!(
        r#"name = "{name}"
description = "A small run for the tests."
seed = {seed}

[engine]
retention = "1h"

[traffic]
rate = 400
duration = "2h"
target = 300
series_points = 60

[budgets]
{budgets}
"#
    )
}

/// The URL a server started with `--listen 127.0.0.1:0` (`idemcalc serve`, `idemcalc carrier`)
/// prints as its one stdout line, `listening on http://ADDR`; `None` when it printed something
/// else (it failed to start).
pub fn listening_url(child: &mut std::process::Child) -> Option<String> {
    use std::io::BufRead as _;
    let mut line = String::new();
    std::io::BufReader::new(child.stdout.take()?)
        .read_line(&mut line)
        .ok()?;
    line.trim()
        .strip_prefix("listening on ")
        .map(str::to_string)
}

/// A server process killed when the test ends, however it ends.
pub struct Killed(pub std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `idemcalc ARGS…` (a server started with `--listen 127.0.0.1:0`), once it listens: the
/// process and its URL.
pub fn spawn_listening(args: &[&str]) -> (Killed, String) {
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let base = listening_url(&mut child).unwrap_or_else(|| panic!("no listening line: {args:?}"));
    (Killed(child), base)
}

/// The bearer token [`Server::start`] writes into its callers file, for the caller `fulfilment`
/// (`tok-returns` names the caller `returns`).
pub const TOKEN: &str = "tok-fulfilment";

/// A client that opens a connection per request: a kept-alive one could be closed by the
/// server's header deadline just as a test reuses it.
pub fn client() -> reqwest::blocking::Client {
    idemcalc::net::install_tls_provider();
    reqwest::blocking::Client::builder()
        .timeout(std::time::Duration::from_secs(60))
        .pool_max_idle_per_host(0)
        .build()
        .unwrap()
}

/// A running `idemcalc serve`: killed (SIGTERM, then SIGKILL) if the test ends without
/// stopping it. Its callers file and stderr live in `dir`.
pub struct Server {
    pub child: Option<std::process::Child>,
    pub base: String,
    pub addr: String,
    pub stderr: std::path::PathBuf,
    pub dir: tempfile::TempDir,
}

impl Server {
    /// `idemcalc serve --listen 127.0.0.1:0 --store STORE --callers FILE ARGS…`, once it listens.
    pub fn start(store: &str, args: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let callers = dir.path().join("callers");
        std::fs::write(
            &callers,
            format!("# test callers\n{TOKEN} fulfilment\n\ntok-returns returns\n"),
        )
        .unwrap();
        let stderr = dir.path().join("stderr");
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_idemcalc"))
            .args(["serve", "--listen", "127.0.0.1:0", "--store", store])
            .arg("--callers")
            .arg(&callers)
            .args(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .unwrap();
        let base = listening_url(&mut child).unwrap_or_else(|| {
            let _ = child.kill();
            panic!(
                "no listening line; stderr: {}",
                std::fs::read_to_string(&stderr).unwrap_or_default()
            )
        });
        let addr = base.trim_start_matches("http://").to_string();
        Server {
            child: Some(child),
            base,
            addr,
            stderr,
            dir,
        }
    }

    /// [`Server::start`] on the SQLite file at `path`.
    pub fn on_sqlite(path: &std::path::Path, args: &[&str]) -> Server {
        Server::start(&format!("sqlite:{}", path.display()), args)
    }

    /// A metric's value from the server's `/metrics`.
    pub fn metric(&self, client: &reqwest::blocking::Client, name: &str) -> f64 {
        let text = client
            .get(self.url("/metrics"))
            .send()
            .unwrap()
            .text()
            .unwrap();
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
            .unwrap_or_else(|| panic!("{name} not in /metrics:\n{text}"))
    }

    pub fn url(&self, path: &str) -> String {
        format!("{}{path}", self.base)
    }

    /// The callers file the server was started with (`TOKEN CALLER` lines, as `load` reads).
    pub fn callers(&self) -> std::path::PathBuf {
        self.dir.path().join("callers")
    }

    /// [`Server::stop`], which must end in a clean exit (0): what the server said on stderr.
    pub fn stop_ok(self) -> String {
        let (code, err) = self.stop();
        assert_eq!(code, Some(0), "{err}");
        err
    }

    /// SIGTERM, then the exit code and everything the server said on stderr.
    pub fn stop(self) -> (Option<i32>, String) {
        self.stop_with(libc::SIGTERM)
    }

    /// Signal `sig` (SIGTERM, SIGINT), then the exit code and everything said on stderr.
    pub fn stop_with(mut self, sig: i32) -> (Option<i32>, String) {
        let child = self.child.take().unwrap();
        signal(&child, sig);
        let (code, _) = wait_within(child, std::time::Duration::from_secs(60));
        (
            code,
            std::fs::read_to_string(&self.stderr).unwrap_or_default(),
        )
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            signal(&child, libc::SIGTERM);
            for _ in 0..200 {
                if child.try_wait().ok().flatten().is_some() {
                    return;
                }
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Sends `sig` to a child of this test.
pub fn signal(child: &std::process::Child, sig: i32) {
    // SAFETY: a plain kill(2) of our own child.
    unsafe {
        libc::kill(child.id() as i32, sig);
    }
}

/// python3 can import `modules`, or `false` with a notice (a panic under CI, where
/// `.ci/run` installs them).
pub fn python_has(modules: &str, what: &str) -> bool {
    let ok = std::process::Command::new("python3")
        .args(["-c", &format!("import {modules}")])
        .output()
        .is_ok_and(|o| o.status.success());
    if !ok {
        if std::env::var_os("CI").is_some() {
            panic!("CI is set but python3 cannot import {modules} (pip install {modules})");
        }
        eprintln!("SKIPPED {what}: python3 cannot import {modules} (pip install {modules})");
    }
    ok
}
