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
//! lets the requests in flight finish within `--drain`, stops the writers (releasing the
//! store's hold) and exits 0.

pub mod carrier;
pub mod detect;
pub mod headers;
pub mod http;
pub mod metrics;
pub mod problem;
pub mod writers;

use crate::carrier::{Carrier, CarrierConfig};
use crate::clock::Millis;
use crate::engine::{EngineConfig, KeyScope};
use crate::store::checkpoint::{CHECKPOINT_INTERVAL, Checkpointer};
use crate::store::{Slot, StoreOptions, StorePool, Stores, Sweeper, Synchronous};
use detect::{Creators, InFlight, PurgeMemory};
use headers::Callers;
use http::{App, Died, Limits, Peer};
use hyper_util::rt::{TokioIo, TokioTimer};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;
use tower::Service as _;
use writers::{EngineParts, Job, JobError, ScaledClock, Writers};

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
    pub max_body_bytes: usize,
    pub header_timeout: Duration,
    pub body_timeout: Duration,
    pub max_connections: usize,
    pub queue: usize,
    pub drain: Duration,
    /// Purged keys the Bloom filter is sized for; also the recent set of creators.
    pub purge_memory: usize,
    pub test_hooks: bool,
    pub seed: u64,
    /// Tokio worker threads for HTTP; `None`: [`default_http_threads`].
    pub http_threads: Option<usize>,
}

/// Batches per sweep job: a backlog is swept in rounds, so requests queue behind one round at
/// most, not behind the whole backlog.
const SWEEP_ROUND_BATCHES: u32 = 4;

/// Runs the server until SIGTERM or Ctrl-C. `started` gets the bound address and the lines that
/// describe the server, once it accepts connections.
pub fn run(
    config: ServeConfig,
    started: impl FnOnce(SocketAddr, Vec<String>),
) -> anyhow::Result<()> {
    let stores = Stores::new(
        config.store.as_deref(),
        None,
        StoreOptions {
            purpose: "serve",
            synchronous: Synchronous::Normal,
            pool_size: config.pool_size,
            scratch_in_memory: false,
        },
    )?;
    let mut pool = stores.pool_with(Slot::default(), config.sweeper)?;
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
        .unwrap_or_else(|| default_http_threads(pool.kind(), crate::bench::cores()));
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(http_threads)
        .enable_all()
        .thread_name("serve-http")
        .build()?;
    let clock = Arc::new(ScaledClock::new(config.time_scale));
    let carrier = Arc::new(Carrier::new(config.carrier.clone()).without_ledger());
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
        metrics: metrics::Metrics::new(),
        callers: config.callers,
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
    });
    let served = runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|e| anyhow::anyhow!("--listen {}: {e}", config.listen))?;
        let addr = listener.local_addr()?;
        // Before the server says it listens: a SIGTERM right after must drain, not kill.
        let stop = shutdown_signal()?;
        started(
            addr,
            describe(&app, &stores, (writer_count, http_threads), &summary),
        );
        let sweeping = tokio::spawn(sweeper(
            app.clone(),
            config.sweep_period_ms,
            config.sweep_batch,
        ));
        let accept = Accept {
            header_timeout: config.header_timeout,
            max_connections: config.max_connections,
            drain: config.drain,
        };
        let r = accept.serve(listener, app.clone(), stop).await;
        sweeping.abort();
        r
    });
    // Every connection is closed or abandoned by now: stop the writers, which gives every
    // connection back and with the last one the store's hold.
    app.writers.stop();
    if let Some(c) = checkpointer {
        c.stop();
    }
    drop(app);
    drop(parts);
    drop(runtime);
    stores.finish()?;
    served
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
    max_body_bytes: usize,
}

fn config_summary(c: &ServeConfig) -> Summary {
    Summary {
        carrier_url: c.carrier_url.clone(),
        time_scale: c.time_scale,
        header_timeout: c.header_timeout,
        max_connections: c.max_connections,
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
        "store {} ({} writer{}, HTTP on {} thread{}), held by this process",
        stores.name(),
        writers,
        if writers == 1 { "" } else { "s" },
        http_threads,
        if http_threads == 1 { "" } else { "s" }
    )];
    lines.push(format!(
        "retention {}, lease {}, carrier timeout {}",
        d(e.retention_ms),
        d(e.lease_ms),
        d(e.carrier_timeout_ms)
    ));
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
    if let Callers::Header(name) = &app.callers {
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
        "limits: body {} bytes, request head within {}, at most {} connections",
        s.max_body_bytes,
        crate::duration::format_secs(s.header_timeout.as_secs_f64()),
        s.max_connections
    ));
    lines
}

/// Sweeps every `period_ms` of the engine's clock, in rounds of a few batches, remembering what
/// it purged.
async fn sweeper(app: Arc<App>, period_ms: Millis, batch: u32) {
    let period = app.clock.wall(period_ms).max(Duration::from_millis(1));
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
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
                // A full queue skips this period; a failing store is counted.
                Err(JobError::Overloaded) => break,
                Err(_) => {
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
    drain: Duration,
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
            let _ = stream.set_nodelay(true);
            let router = router.clone();
            let service = hyper::service::service_fn(
                move |mut req: hyper::Request<hyper::body::Incoming>| {
                    req.extensions_mut().insert(Peer(peer));
                    let mut router = router.clone();
                    async move {
                        let response = match router.call(req.map(axum::body::Body::new)).await {
                            Ok(r) => r,
                            Err(never) => match never {},
                        };
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
                drop(slot);
            });
        }
        drop(listener);
        eprintln!(
            "shutting down: no new connections; draining requests in flight (at most {})",
            crate::duration::format_secs(self.drain.as_secs_f64())
        );
        tokio::select! {
            () = graceful.shutdown() => {}
            () = tokio::time::sleep(self.drain) => {
                eprintln!("the drain deadline passed with connections still open; closing them");
            }
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
