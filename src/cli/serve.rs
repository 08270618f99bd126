use crate::serve::ServeConfig;
use crate::serve::headers::Callers;
use crate::settings::Settings;
use crate::settings::flags::Flags;
use crate::settings::knobs::SERVE;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

#[derive(Debug, clap::Args)]
#[command(after_help = "\
Routes: POST /labels (CreateLabel; POST /v1/labels is the same service under another path,
which the request hash tells apart), GET /metrics (Prometheus/OpenMetrics text), GET /healthz
(200 while the store is open and held), GET /problems/CODE (what an error's `type` means).

The caller is who authenticated: `Authorization: Bearer TOKEN`, looked up in --callers FILE
(one `TOKEN CALLER` pair a line, `#` comments and blank lines ignored); no or an unknown token
is 401. --trust-caller-header NAME takes the caller from a header instead, for load tests on
loopback only: it refuses a non-loopback --listen and answers 401 to other peers.

Idempotency-Key: an RFC 8941 string (\"abc\") as the IETF draft has it, or a bare key of
visible ASCII without quotes, commas, backslashes or spaces (abc); both name the key abc. Two
Idempotency-Key headers are 400. Errors are application/problem+json (RFC 9457).

--time-scale N runs the engine's clock N times faster than the wall: every engine duration
(retention, lease, carrier latency and timeout, sweep period) passes N times sooner, so
--time-scale 3600 --retention 24h sweeps a completed key after about 24 s.

SIGHUP: read --callers FILE again (a bad file is refused, naming its line, and the callers in
force stay).

SIGTERM or Ctrl-C: stop accepting, finish the requests in flight within --drain, release the
store's hold, exit 0. Requests still running when --drain ends are answered 503 shutting_down
(Retry-After: the lease) and counted, and the exit code is 1. Exit 2: bad input or a store that
cannot be opened or is held by another process. Exit 3: the store's hold was lost while serving
(a stalled or restarted PostgreSQL session, an expired Redis hold key): the server stops rather
than stay alive and unavailable, so a supervisor starts it again.")]
pub struct ServeArgs {
    /// The engine, carrier and sweeper knobs, from the settings table (a scenario file's fields).
    #[command(flatten)]
    pub knobs: Flags<SERVE>,
    /// Take the knobs from this scenario file's [engine] and [carrier]; flags given as well
    /// override the file's values.
    #[arg(long, value_name = "FILE")]
    pub scenario: Option<PathBuf>,
    /// Address and port to listen on; port 0 picks a free one (printed at start).
    #[arg(long, value_name = "ADDR:PORT", default_value = "127.0.0.1:8080")]
    pub listen: SocketAddr,
    /// The store: an SQLite file (`sqlite:PATH` or a path), postgres://USER@HOST:PORT/DATABASE
    /// (`?schema=NAME` kept, else a scratch schema dropped at exit) or redis://HOST:PORT
    /// (`?prefix=NAME` kept, else a scratch prefix). Held by this process while it runs.
    /// Default: a scratch SQLite file removed at exit.
    #[arg(long, value_name = "SPEC")]
    pub store: Option<String>,
    /// PostgreSQL or Redis connections, one writer thread each (SQLite has one writer).
    #[arg(long, value_name = "CONNECTIONS", default_value_t = 4)]
    pub pool: u32,
    /// Threads that serve HTTP. Default: one less than the cores with SQLite (its one writer
    /// keeps a core), every core with PostgreSQL or Redis.
    #[arg(long, value_name = "N")]
    pub http_threads: Option<usize>,
    /// Bearer tokens and the callers they authenticate: `TOKEN CALLER` per line.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "trust_caller_header"
    )]
    pub callers: Option<PathBuf>,
    /// Load tests on loopback only: take the caller from this header, unauthenticated.
    #[arg(long, value_name = "HEADER", conflicts_with = "callers")]
    pub trust_caller_header: Option<String>,
    /// Run the engine's clock this many times faster than the wall (1 to 1000000).
    #[arg(long, value_name = "N", default_value_t = 1.0)]
    pub time_scale: f64,
    /// Largest request body, in bytes (413 above it).
    #[arg(long, value_name = "BYTES", default_value_t = 65_536)]
    pub max_body: usize,
    /// A connection whose request head has not arrived within this is closed (slow-loris, and
    /// idle keep-alive connections).
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::duration::clap_parse)]
    pub header_timeout: Duration,
    /// A body that has not arrived within this is answered 408.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::duration::clap_parse)]
    pub body_timeout: Duration,
    /// Most connections open at once (1 to 1,000,000); further ones wait in the listen backlog.
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub max_connections: usize,
    /// Most connections open at once from one address (1 to 1,000,000; half the default
    /// --max-connections): a further one is closed at once, so one client's idle connections
    /// cannot take every slot from the others (a balancer's health checks among them). Raise it
    /// with --max-connections for clients that all share one address.
    #[arg(long, value_name = "N", default_value_t = 2048)]
    pub max_connections_per_peer: usize,
    /// Requests waiting for a writer before new ones get 503 `overloaded` (1 to 1,000,000).
    #[arg(long, value_name = "N", default_value_t = 4096)]
    pub queue: usize,
    /// On SIGTERM or Ctrl-C, how long requests in flight get to finish.
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = crate::duration::clap_parse)]
    pub drain: Duration,
    /// Purged keys the Bloom filter that flags requests with a purged key is sized for (1 %
    /// false positives up to it).
    #[arg(long, value_name = "KEYS", default_value_t = 1_000_000)]
    pub purge_memory: usize,
    /// Call the carrier over HTTP at this URL (`idemcalc carrier --listen`, or any service with
    /// its `POST /v1/labels`), with the derived key and the carrier timeout, instead of the
    /// simulated carrier in this process. Its knobs (latency, window, price) are then the
    /// carrier's own.
    #[arg(long, value_name = "URL")]
    pub carrier_url: Option<String>,
    /// Serve as replica NAME of several on one PostgreSQL schema (`?schema=NAME`): the schema
    /// is held shared, so any number of replicas serve it behind a balancer while `simulate`
    /// and `bench` (which measure alone) are refused, and the reverse; one replica at a time
    /// sweeps. NAME (letters, digits, `.`, `_`, `-`; at most 40) is on every answer
    /// (`idemcalc-replica` header) and in /metrics (`idemcalc_replica_info`).
    #[arg(long, value_name = "NAME")]
    pub replica: Option<String>,
    /// Tests only: honour the `idemcalc-test-die` request header, which makes a handler die at
    /// a point of its attempt (after-txn1, after-carrier, inside-txn2) as a killed process would.
    #[arg(long)]
    pub test_hooks: bool,
}

/// More HTTP threads than this only costs memory: the writers are the limit long before.
const MAX_HTTP_THREADS: usize = 1024;
/// The queue and the connection cap are allocated or counted out at start (a channel of that
/// many slots, a semaphore of that many permits): past this, a value is a typo, not a size.
const MAX_QUEUE_OR_CONNECTIONS: usize = 1_000_000;

impl ServeArgs {
    fn settings(&self) -> anyhow::Result<Settings> {
        match &self.scenario {
            None => Ok(self.knobs.settings()?),
            Some(path) => Ok(crate::scenario::Scenario::load(path)?.settings_under(&self.knobs)?),
        }
    }

    /// Every check before anything is opened or bound.
    pub fn config(&self) -> anyhow::Result<ServeConfig> {
        let settings = self.settings()?;
        let retention_s = match settings.retentions() {
            [one] => *one,
            many => anyhow::bail!(
                "--retention: a server keeps keys for one retention, not {} ({})",
                many.len(),
                many.iter()
                    .map(|s| crate::duration::format_secs(*s))
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        };
        if !(1.0..=1e6).contains(&self.time_scale) {
            anyhow::bail!(
                "--time-scale {}: give a factor from 1 (real time) to 1000000",
                self.time_scale
            );
        }
        for (flag, n) in [
            ("--pool", self.pool as usize),
            ("--max-body", self.max_body),
            ("--max-connections", self.max_connections),
            ("--max-connections-per-peer", self.max_connections_per_peer),
            ("--queue", self.queue),
            ("--purge-memory", self.purge_memory),
            ("--http-threads", self.http_threads.unwrap_or(1)),
        ] {
            if n == 0 {
                anyhow::bail!("{flag} 0: give at least 1");
            }
        }
        for (flag, n, max) in [
            (
                "--http-threads",
                self.http_threads.unwrap_or(1),
                MAX_HTTP_THREADS,
            ),
            ("--queue", self.queue, MAX_QUEUE_OR_CONNECTIONS),
            (
                "--max-connections",
                self.max_connections,
                MAX_QUEUE_OR_CONNECTIONS,
            ),
            (
                "--max-connections-per-peer",
                self.max_connections_per_peer,
                MAX_QUEUE_OR_CONNECTIONS,
            ),
        ] {
            if n > max {
                anyhow::bail!("{flag} {n}: give at most {max}");
            }
        }
        for (flag, d) in [
            ("--header-timeout", self.header_timeout),
            ("--body-timeout", self.body_timeout),
        ] {
            if d.is_zero() {
                anyhow::bail!("{flag} 0s: give a deadline above zero");
            }
        }
        let callers = match (&self.callers, &self.trust_caller_header) {
            (Some(path), _) => Callers::from_file(path).map_err(anyhow::Error::msg)?,
            (None, Some(name)) => {
                if !self.listen.ip().is_loopback() {
                    anyhow::bail!(
                        "--trust-caller-header is for load tests on loopback only; --listen {} is not a loopback address",
                        self.listen
                    );
                }
                if axum::http::HeaderName::from_bytes(name.as_bytes()).is_err() {
                    anyhow::bail!("--trust-caller-header {name:?}: not a header name");
                }
                Callers::Header(name.to_ascii_lowercase())
            }
            (None, None) => anyhow::bail!("--callers FILE is required"),
        };
        if let Some(spec) = &self.store {
            crate::store::StoreSpec::parse(spec)?;
        }
        if let Some(name) = &self.replica {
            check_replica_name(name)?;
            if self.carrier_url.is_none() {
                anyhow::bail!(
                    "--replica needs --carrier-url: replicas share one carrier (idemcalc carrier, or the real one); carriers inside each replica would number their labels alike (two replicas' L-1 collide in the labels table) and never know the key another replica bought with"
                );
            }
            if settings.traffic.sweeper.at(retention_s).partitioned() {
                anyhow::bail!(
                    "--replica with --sweeper partitions: not supported; each replica keeps its own list of the partitions it created, which another replica's drops would leave stale. Use --sweeper delete"
                );
            }
        }
        let carrier_url = match &self.carrier_url {
            None => None,
            Some(text) => {
                let url = reqwest::Url::parse(text)
                    .map_err(|e| anyhow::anyhow!("--carrier-url {text:?}: {e}"))?;
                if !matches!(url.scheme(), "http" | "https") || url.host().is_none() {
                    anyhow::bail!("--carrier-url {text:?}: give an http:// or https:// URL");
                }
                Some(url)
            }
        };
        Ok(ServeConfig {
            carrier_url,
            listen: self.listen,
            store: self.store.clone(),
            pool_size: self.pool,
            engine: settings.engine_config(retention_s),
            carrier: settings.carrier_config(),
            sweeper: settings.traffic.sweeper.at(retention_s),
            sweep_period_ms: crate::duration::ms(Duration::from_secs_f64(
                settings.traffic.sweep_period_s,
            )),
            sweep_batch: settings.traffic.sweep_batch,
            time_scale: self.time_scale,
            callers,
            callers_file: self.callers.clone(),
            max_body_bytes: self.max_body,
            header_timeout: self.header_timeout,
            body_timeout: self.body_timeout,
            max_connections: self.max_connections,
            max_connections_per_peer: self.max_connections_per_peer,
            queue: self.queue,
            drain: self.drain,
            purge_memory: self.purge_memory,
            test_hooks: self.test_hooks,
            seed: settings.seed,
            http_threads: self.http_threads,
            replica: self.replica.clone(),
        })
    }
}

/// Longest `--replica` name: it goes into `application_name` (63 bytes) with words around it.
const MAX_REPLICA_NAME: usize = 40;

/// A replica's name goes into a header, a metric label and a PostgreSQL session name: plain
/// characters only, so it reads the same in each.
fn check_replica_name(name: &str) -> anyhow::Result<()> {
    let plain = |c: char| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-');
    if name.is_empty() || name.len() > MAX_REPLICA_NAME || !name.chars().all(plain) {
        anyhow::bail!(
            "--replica {name:?}: give 1 to {MAX_REPLICA_NAME} letters, digits, '.', '_' or '-'"
        );
    }
    Ok(())
}

pub fn run(args: &ServeArgs) -> anyhow::Result<i32> {
    let config = args.config()?;
    let mut printed = Ok(());
    let stopped = crate::serve::run(config, |addr, lines| {
        for line in lines {
            eprintln!("{line}");
        }
        // The one line on stdout, for scripts (and tests) that start the server on port 0.
        printed = super::print(&format!("listening on http://{addr}\n"));
    })?;
    printed?;
    if stopped.hold_lost {
        eprintln!("stopped: the store's hold was lost (exit 3); start the server again");
        return Ok(3);
    }
    eprintln!("stopped: the store's hold is released");
    // A supervisor (and a test) learns that requests were cut off, not only the log.
    Ok(i32::from(stopped.cut > 0))
}
