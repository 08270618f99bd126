//! `idemcalc serve`: the seed's Label service over HTTP, on the same engine and stores as
//! `simulate` and `bench`.
//!
//! One process holds one store (as `simulate` holds it: `store::Stores`). Requests are read by
//! hyper on tokio's workers; the engine's blocking store calls run on writer threads
//! ([`writers`]); the carrier's latency is waited out on tokio between txn 1 and txn 2, with no
//! transaction open. A sweeper task sends the seed's batched delete (or partition drops) to the
//! writers every sweep period of the engine's clock, which `--time-scale` speeds up.
//!
//! Limits: a body limit (413), a header read deadline that closes a connection whose request
//! head does not arrive in time (slow-loris, and idle keep-alive connections), a body read
//! deadline (408), a cap on open connections (further ones wait in the listen backlog), a
//! bounded queue in front of the writers (503 `overloaded`). SIGTERM or Ctrl-C stops accepting,
//! lets the requests in flight finish within `--drain` (those still running then are answered
//! 503 `shutting_down` and counted), stops the writers (releasing the store's hold) and exits 0,
//! or 1 when any request was cut off.

pub mod carrier;
pub mod detect;
pub mod headers;
pub mod http;
pub mod leader;
pub mod metrics;
pub mod problem;
pub mod writers;

use crate::carrier::{Carrier, CarrierConfig};
use crate::clock::Millis;
use crate::clock::ScaledClock;
use crate::engine::{EngineConfig, KeyScope};
use crate::store::checkpoint::{CHECKPOINT_INTERVAL, Checkpointer};
use crate::store::{Slot, StoreOptions, StorePool, Stores, Sweeper, Synchronous};
use detect::{Creators, InFlight, PurgeMemory};
use headers::Callers;
use http::{App, Died, Limits, Peer};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;
use tower::Service as _;
use writers::{EngineParts, Job, JobError, Writers};

/// Everything a server needs, validated.
pub struct ServeConfig {
    pub listen: SocketAddr,
    /// `--store`; `None`: a scratch SQLite file removed at exit.
    pub store: Option<String>,
    /// Writers (and connections) on PostgreSQL and Redis; SQLite has one.
    pub pool_size: u32,
    pub engine: EngineConfig,
    pub carrier: CarrierConfig,
    /// `--carrier-url`: call this carrier over HTTP instead of the in-process one.
    pub carrier_url: Option<reqwest::Url>,
    pub sweeper: Sweeper,
    /// The sweep period, in the engine's time.
    pub sweep_period_ms: Millis,
    pub sweep_batch: u32,
    /// The engine's clock runs this many times faster than the wall.
    pub time_scale: f64,
    pub callers: Callers,
    /// `--callers FILE`, read again on SIGHUP.
    pub callers_file: Option<std::path::PathBuf>,
    pub max_body_bytes: usize,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub max_connections: usize,
    pub max_connections_per_peer: usize,
    pub queue: usize,
    pub drain: Duration,
    /// Purged keys the Bloom filter is sized for; also the recent set of creators.
    pub purge_memory: usize,
    pub test_hooks: bool,
    pub seed: u64,
    /// Tokio worker threads for HTTP; `None`: [`default_http_threads`].
    pub http_threads: Option<usize>,
    /// `--replica NAME`: one of several servers on one PostgreSQL schema, which it holds shared;
    /// one replica at a time sweeps ([`leader`]). `None`: the only server, holding it alone.
    pub replica: Option<String>,
}

/// The header naming the replica that answered (`--replica`).
pub const REPLICA_HEADER: &str = "idemcalc-replica";

/// How long the 503s of attempts cut off at the drain's deadline get to reach their clients.
const CUT_ANSWERS: Duration = Duration::from_secs(1);

/// Batches per sweep job: a backlog is swept in rounds, so requests queue behind one round at
/// most, not behind the whole backlog.
const SWEEP_ROUND_BATCHES: u32 = 4;

/// Runs the server until SIGTERM or Ctrl-C. `started` gets the bound address and the lines that
/// describe the server, once it accepts connections.
pub fn run(
    config: ServeConfig,
    started: impl FnOnce(SocketAddr, Vec<String>),
) -> anyhow::Result<Stopped> {
    let (stores, mut pool) = open_store(&config)?;
    let (metrics, leader) = sweeping_metrics(&config, &pool)?;
    // SQLite's writer never checkpoints: a thread of its own does, with the writer's
    // `synchronous`, so no request waits for a checkpoint's fsyncs (the bench's default;
    // docs/serve.md, "Throughput and latency").
    let checkpointer = match &mut pool {
        StorePool::Sqlite { path, options } => {
            options.inline_checkpoints = false;
            let started = Checkpointer::start(path, options.synchronous, CHECKPOINT_INTERVAL)?;
            Some(started)
        }
        _ => None,
    };
    let writer_count = match pool.kind() {
        "sqlite" => 1,
        _ => config.pool_size.max(1) as usize,
    };
    let http_threads = config
        .http_threads
        .unwrap_or_else(|| default_http_threads(pool.kind(), crate::host::cores()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(http_threads)
        .enable_all()
        .thread_name("serve-http")
        .build()?;
    let clock = Arc::new(ScaledClock::new(config.time_scale));
    // A server runs indefinitely: the carrier keeps no invoice and forgets sales a window old.
    let carrier = Arc::new(
        Carrier::new(config.carrier.clone())
            .without_ledger()
            .forgetting_sales(),
    );
    let remote_carrier = config
        .carrier_url
        .as_ref()
        .map(carrier::RemoteCarrier::new)
        .transpose()?;
    let parts = Arc::new(EngineParts {
        pool,
        carrier: carrier.clone(),
        clock: clock.clone(),
        config: config.engine.clone(),
        remote_carrier: remote_carrier.is_some(),
    });
    let writers = Writers::start(parts.clone(), writer_count, config.queue)?;
    let summary = config_summary(&config);
    let app = Arc::new(App {
        writers,
        metrics,
        callers: std::sync::RwLock::new(config.callers),
        purged: PurgeMemory::new(config.purge_memory, config.seed).map_err(anyhow::Error::msg)?,
        creators: (config.engine.key_scope == KeyScope::Global)
            .then(|| Creators::new(config.purge_memory)),
        inflight: InFlight::default(),
        clock,
        carrier,
        remote_carrier,
        remote_seen: Default::default(),
        engine: config.engine.clone(),
        limits: Limits {
            max_body_bytes: config.max_body_bytes,
            body_timeout: config.body_timeout,
        },
        test_hooks: config.test_hooks,
        held: AtomicBool::new(true),
        drain_over: http::Flag::default(),
        cut: Default::default(),
        hold_lost: http::Flag::default(),
        store_ok: AtomicBool::new(true),
        replica: config
            .replica
            .as_deref()
            .map(axum::http::HeaderValue::from_str)
            .transpose()?,
    });
    let served = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|e| anyhow::anyhow!("--listen {}: {e}", config.listen))?;
        let addr = listener.local_addr()?;
        // Before the server says it listens: a SIGTERM right after must drain, not kill.
        let signalled = shutdown_signal()?;
        let lost = app.clone();
        let stop = async move {
            tokio::select! {
                () = signalled => {}
                () = lost.hold_lost.raised() => {
                    eprintln!("the store's hold was lost: stopping, so that a supervisor starts the server again");
                }
            }
        };
        started(
            addr,
            describe(&app, &stores, (writer_count, http_threads), &summary),
        );
        let reloading = tokio::spawn(reload_callers(app.clone(), config.callers_file.clone()));
        let sweeping = tokio::spawn(sweeper(
            app.clone(),
            leader.clone(),
            config.sweep_period_ms,
            config.sweep_batch,
        ));
        let accept = Accept {
            header_timeout: config.header_timeout,
            max_connections: config.max_connections,
            per_peer: config.max_connections_per_peer,
            drain: config.drain,
        };
        let r = accept.serve(listener, app.clone(), stop).await;
        sweeping.abort();
        reloading.abort();
        r
    });
    // Every connection is closed or abandoned by now: stop the writers, which gives every
    // connection back and with the last one the store's hold.
    app.writers.stop();
    if let Some(c) = checkpointer {
        let c = c.stop();
        eprintln!(
            "sqlite: {} checkpoints, the WAL at most {} on disk (bounded at about {}), {} failed",
            c.checkpoints,
            crate::format::human_bytes(c.wal_bytes_max as f64),
            crate::format::human_bytes(crate::store::checkpoint::WAL_LIMIT_BYTES as f64),
            c.errors
        );
    }
    let cut = app.cut.load(Ordering::Relaxed);
    let hold_lost = !app.held.load(Ordering::Relaxed);
    drop(app);
    drop(parts);
    drop(runtime);
    // The sweeper key goes with its session, to a replica still serving.
    drop(leader);
    stores.finish()?;
    served.map(|()| Stopped { cut, hold_lost })
}

/// The server's store, held alone, or shared as one replica of several (`--replica`).
fn open_store(config: &ServeConfig) -> anyhow::Result<(Stores, StorePool)> {
    let mut stores = Stores::new(
        config.store.as_deref(),
        None,
        StoreOptions {
            purpose: "serve",
            synchronous: Synchronous::Normal,
            pool_size: config.pool_size,
            scratch_in_memory: false,
        },
    )?;
    if let Some(name) = &config.replica {
        stores.as_replica(name)?;
    }
    let pool = stores.pool_with(Slot::default(), config.sweeper)?;
    Ok((stores, pool))
}

/// The metrics, and this replica's try for the sweeper key ([`leader`]) when it is one of
/// several: a server alone always sweeps.
fn sweeping_metrics(
    config: &ServeConfig,
    pool: &StorePool,
) -> anyhow::Result<(metrics::Metrics, Option<Arc<leader::Leader>>)> {
    let mut metrics = metrics::Metrics::new();
    let leader = match (&config.replica, pool.postgres()) {
        (Some(name), Some(pg)) => {
            metrics.identify(name);
            Some(Arc::new(elect(pg, name, &metrics)?))
        }
        _ => {
            metrics.sweeper_leader.set(1);
            None
        }
    };
    Ok((metrics, leader))
}

/// Starts this replica's try for the sweeper key ([`leader`]), with the metrics and a line on
/// stderr following each change.
fn elect(
    pg: &crate::store::PgPool,
    name: &str,
    m: &metrics::Metrics,
) -> anyhow::Result<leader::Leader> {
    let (gauge, elected, who) = (
        m.sweeper_leader.clone(),
        m.sweeper_elected.clone(),
        name.to_string(),
    );
    Ok(leader::Leader::start(pg.clone(), name, move |now| {
        gauge.set(i64::from(now));
        if now {
            elected.inc();
            eprintln!("replica {who}: this replica sweeps now (it holds the sweeper key)");
        } else {
            eprintln!(
                "replica {who}: this replica no longer sweeps (its session for the sweeper key ended, or it is stopping)"
            );
        }
    })?)
}

/// How a server that was asked to stop ended.
pub struct Stopped {
    /// Attempts still running at the drain's deadline, answered 503 `shutting_down`.
    pub cut: u64,
    /// It stopped because the store's hold was lost.
    pub hold_lost: bool,
}

/// HTTP worker threads when `--http-threads` is not given. SQLite's one writer thread is where
/// a flat-out server spends most of its time, so it keeps a core of its own: the HTTP side
/// gets the others (at least one), since one HTTP thread handles many times what one writer
/// can commit. With PostgreSQL or Redis the writers mostly wait for the server, so HTTP gets
/// every core, tokio's own default. Measured in docs/serve.md ("HTTP threads").
pub fn default_http_threads(store_kind: &str, cores: usize) -> usize {
    match store_kind {
        "sqlite" => cores.saturating_sub(1).max(1),
        _ => cores.max(1),
    }
}

/// The settings a start-up line states, besides the store.
struct Summary {
    carrier_url: Option<reqwest::Url>,
    time_scale: f64,
    header_timeout: Duration,
    max_connections: usize,
    per_peer: usize,
    max_body_bytes: usize,
}

fn config_summary(c: &ServeConfig) -> Summary {
    Summary {
        carrier_url: c.carrier_url.clone(),
        time_scale: c.time_scale,
        header_timeout: c.header_timeout,
        max_connections: c.max_connections,
        per_peer: c.max_connections_per_peer,
        max_body_bytes: c.max_body_bytes,
    }
}

/// What the server says at start, one line each.
fn describe(
    app: &App,
    stores: &Stores,
    (writers, http_threads): (usize, usize),
    s: &Summary,
) -> Vec<String> {
    let d = |ms: Millis| crate::duration::format_secs(ms as f64 / 1000.0);
    let wall = |ms: Millis| crate::duration::format_secs(app.clock.wall(ms).as_secs_f64());
    let e = &app.engine;
    let mut lines = vec![format!(
        "store {} ({} writer{}, HTTP on {} thread{}), {}",
        stores.name(),
        writers,
        if writers == 1 { "" } else { "s" },
        http_threads,
        if http_threads == 1 { "" } else { "s" },
        match &app.replica {
            None => "held by this process".to_string(),
            Some(name) => format!(
                "held shared by replica {} (simulate and bench are refused while any replica serves it); one replica at a time sweeps, the others try for the sweeper key every {}",
                name.to_str().unwrap_or_default(),
                crate::duration::format_secs(leader::RETRY.as_secs_f64())
            ),
        }
    )];
    lines.push(format!(
        "retention {}, lease {}, carrier timeout {}",
        d(e.retention_ms),
        d(e.lease_ms),
        d(e.carrier_timeout_ms)
    ));
    lines.push(match e.order_space {
        crate::engine::OrderSpace::Shared => "order space shared by every caller (--order-space shared): one label per parcel across callers, so a caller asking, with its own key, for an order another caller labelled gets that label back, and the carrier may bill again (counted as idemcalc_unlabelled_purchases_total); a public API whose tenants number their own orders wants --order-space per-tenant".to_string(),
        crate::engine::OrderSpace::PerTenant => "order space per tenant (--order-space per-tenant): each caller's order ids are its own".to_string(),
    });
    lines.push(match &s.carrier_url {
        Some(url) => format!("carrier: {url} over HTTP, with the derived key"),
        None => "carrier: the simulated one, in this process".to_string(),
    });
    if s.time_scale != 1.0 {
        lines.push(format!(
            "time scale {}: the engine's clock runs {}x the wall clock, every engine duration divided by {}: retention {} passes in {}, the lease {} in {}, carrier latencies likewise",
            s.time_scale,
            s.time_scale,
            s.time_scale,
            d(e.retention_ms),
            wall(e.retention_ms),
            d(e.lease_ms),
            wall(e.lease_ms),
        ));
    }
    if let Callers::Header(name) = &*app.callers.read().unwrap_or_else(|p| p.into_inner()) {
        lines.push(format!(
            "WARNING: the caller is taken from the {name} header, unauthenticated: for load tests on loopback only (requests from other addresses get 401)"
        ));
    }
    if app.test_hooks {
        lines.push(format!(
            "WARNING: test hooks on: a request with {}: after-txn1|after-carrier|inside-txn2 makes its handler die there",
            http::DIE_HEADER
        ));
    }
    lines.push(format!(
        "purged keys remembered in a Bloom filter sized for {} keys at {} % false positives{}",
        app.purged.expected,
        detect::PURGE_FP_RATE * 100.0,
        if app.creators.is_some() {
            format!(
                "; creators of the last {} records kept for replays to another caller",
                app.purged.expected
            )
        } else {
            String::new()
        }
    ));
    lines.push(format!(
        "limits: body {} bytes, request head within {}, at most {} connections ({} from one address)",
        s.max_body_bytes,
        crate::duration::format_secs(s.header_timeout.as_secs_f64()),
        s.max_connections,
        s.per_peer
    ));
    lines
}

/// SIGHUP, the usual reload signal, re-reads `--callers FILE` (revoking a token needs no
/// restart): a file that reads and checks whole replaces the callers at once; a bad one is
/// refused with a line naming file and line, and the callers in force stay. Without a file
/// (`--trust-caller-header`) SIGHUP is caught and said to change nothing, never a kill.
async fn reload_callers(app: Arc<App>, path: Option<std::path::PathBuf>) {
    use tokio::signal::unix::{SignalKind, signal};
    let Ok(mut hup) = signal(SignalKind::hangup()) else {
        return;
    };
    while hup.recv().await.is_some() {
        let Some(path) = &path else {
            eprintln!("SIGHUP: no --callers file to read again; nothing changed");
            continue;
        };
        match Callers::from_file(path) {
            Ok(callers) => {
                let count = callers.token_count();
                *app.callers.write().unwrap_or_else(|p| p.into_inner()) = callers;
                eprintln!("SIGHUP: {} read again: {count} tokens", path.display());
            }
            Err(e) => eprintln!("SIGHUP: {e}; the callers in force stay"),
        }
    }
}

/// Sweeps every `period_ms` of the engine's clock, in rounds of a few batches, remembering what
/// it purged.
async fn sweeper(
    app: Arc<App>,
    leader: Option<Arc<leader::Leader>>,
    period_ms: Millis,
    batch: u32,
) {
    let period = app.clock.wall(period_ms).max(Duration::from_millis(1));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        // Among replicas, the one holding the sweeper key sweeps; the others skip the period.
        if leader.as_ref().is_some_and(|l| !l.leading()) {
            continue;
        }
        loop {
            let swept = app
                .writers
                .call(|reply| Job::Sweep {
                    batch,
                    max_batches: SWEEP_ROUND_BATCHES,
                    count: true,
                    reply,
                })
                .await;
            match swept {
                Ok(s) => {
                    app.store_ok.store(true, Ordering::Relaxed);
                    app.purged.remember(&s.keys);
                    app.metrics.sweeper_batches.inc_by(s.batches);
                    app.metrics.sweeper_rows.inc_by(s.keys.len() as u64);
                    if let Some(n) = s.keys_in_store {
                        app.metrics.keys_in_store.set(n as i64);
                    }
                    if (s.keys.len() as u64) < u64::from(batch) * u64::from(SWEEP_ROUND_BATCHES) {
                        break;
                    }
                }
                Err(JobError::Stopped) => return,
                Err(JobError::Lost(_)) => {
                    app.lost_hold();
                    return;
                }
                // A full queue skips this period; a failing store is counted.
                Err(JobError::Overloaded) => break,
                Err(_) => {
                    app.store_ok.store(false, Ordering::Relaxed);
                    app.metrics.sweeper_failures.inc();
                    break;
                }
            }
        }
    }
}

struct Accept {
    header_timeout: Duration,
    max_connections: usize,
    /// Most connections open at once from one address.
    per_peer: usize,
    drain: Duration,
}

/// Connections open per client address, for the per-peer cap.
#[derive(Default)]
struct Peers(std::sync::Mutex<std::collections::HashMap<std::net::IpAddr, usize>>);

impl Peers {
    /// Counts a connection from `ip`, unless `ip` already has `cap` open.
    fn enter(self: &Arc<Self>, ip: std::net::IpAddr, cap: usize) -> Option<PeerSlot> {
        let mut open = self.0.lock().unwrap_or_else(|p| p.into_inner());
        let n = open.entry(ip).or_default();
        if *n >= cap {
            return None;
        }
        *n += 1;
        Some(PeerSlot(self.clone(), ip))
    }
}

/// One counted connection; dropping it gives the count back.
struct PeerSlot(Arc<Peers>, std::net::IpAddr);

impl Drop for PeerSlot {
    fn drop(&mut self) {
        let mut open = self.0.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = open.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                open.remove(&self.1);
            }
        }
    }
}

impl Accept {
    /// Accepts connections until SIGTERM or Ctrl-C, then drains them within `drain`.
    async fn serve(
        &self,
        listener: tokio::net::TcpListener,
        app: Arc<App>,
        stop: impl std::future::Future<Output = ()>,
    ) -> anyhow::Result<()> {
        let router = http::router(app.clone());
        let graceful = hyper_util::server::graceful::GracefulShutdown::new();
        let slots = Arc::new(tokio::sync::Semaphore::new(self.max_connections));
        let peers = Arc::new(Peers::default());
        let mut http1 = hyper::server::conn::http1::Builder::new();
        http1
            .timer(TokioTimer::new())
            .header_read_timeout(self.header_timeout)
            .keep_alive(true);
        tokio::pin!(stop);
        loop {
            let slot = tokio::select! {
                s = slots.clone().acquire_owned() => s?,
                () = &mut stop => break,
            };
            let (stream, peer) = tokio::select! {
                a = listener.accept() => match a {
                    Ok(a) => a,
                    // Out of descriptors, a connection reset before accept: keep serving.
                    Err(_) => {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                        continue;
                    }
                },
                () = &mut stop => break,
            };
            // Past its own cap a client's connection is closed at once, its slot given back.
            let Some(peer_slot) = peers.enter(peer.ip(), self.per_peer) else {
                drop(stream);
                continue;
            };
            let _ = stream.set_nodelay(true);
            let router = router.clone();
            let replica = app.replica.clone();
            let service = hyper::service::service_fn(
                move |mut req: hyper::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(Peer(peer));
                    let mut router = router.clone();
                    let replica = replica.clone();
                    async move {
                        let mut response = match router.call(req.map(axum::body::Body::new)).await {
                            Ok(r) => r,
                            Err(never) => match never {},
                        };
                        if let Some(name) = replica {
                            response.headers_mut().insert(REPLICA_HEADER, name);
                        }
                        if response.extensions().get::<Died>().is_some() {
                            // The handler died: close the connection without an answer, as a
                            // killed process would.
                            return Err(std::io::Error::other("the handler died (test hook)"));
                        }
                        Ok(response)
                    }
                },
            );
            let conn = graceful.watch(http1.serve_connection(TokioIo::new(stream), service));
            let metrics_app = app.clone();
            tokio::spawn(async move {
                metrics_app.metrics.connections_open.inc();
                let _ = conn.await;
                metrics_app.metrics.connections_open.dec();
                drop(peer_slot);
                drop(slot);
            });
        }
        drop(listener);
        eprintln!(
            "shutting down: no new connections; draining requests in flight (at most {})",
            crate::duration::format_secs(self.drain.as_secs_f64())
        );
        let drained = graceful.shutdown();
        tokio::pin!(drained);
        let late = tokio::select! {
            () = &mut drained => false,
            () = tokio::time::sleep(self.drain) => true,
        };
        if late {
            // Every attempt still running is answered 503 `shutting_down` on its connection,
            // which then closes; the answers get a moment to go out.
            app.drain_over.raise();
            let _ = tokio::time::timeout(CUT_ANSWERS, &mut drained).await;
            eprintln!(
                "the drain deadline passed: {} requests still running were answered 503 shutting_down; their keys keep their leases until they expire, then a retry takes them over",
                app.cut.load(Ordering::Relaxed)
            );
        }
        // Attempts whose clients hung up run in their own tasks: give them the rest of the
        // deadline to reach txn 2.
        let deadline = tokio::time::Instant::now() + self.drain;
        while app.metrics.in_flight.get() > 0 && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        Ok(())
    }
}

/// A future that resolves on SIGTERM or Ctrl-C (SIGINT); both are caught from the moment this
/// returns.
fn shutdown_signal() -> anyhow::Result<impl std::future::Future<Output = ()>> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    Ok(async move {
        tokio::select! {
            _ = term.recv() => {}
            _ = int.recv() => {}
        }
    })
}

#[cfg(test)]
mod tests {
    use super::default_http_threads;

    /// SQLite's writer keeps a core when there is one to spare; the other stores get them all.
    #[test]
    fn http_threads_leave_sqlites_writer_a_core() {
        assert_eq!(default_http_threads("sqlite", 2), 1);
        assert_eq!(default_http_threads("sqlite", 8), 7);
        assert_eq!(default_http_threads("sqlite", 1), 1);
        assert_eq!(default_http_threads("postgres", 2), 2);
        assert_eq!(default_http_threads("redis", 1), 1);
    }
}
