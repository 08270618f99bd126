//! `idemcalc load URL`: the seed's client replayed against a live idempotent HTTP API on the
//! wall clock, its speed measured and its idempotency checked from outside.
//!
//! # Open model
//! Intents start at `rate_per_s` (Poisson, from `traffic::Arrivals`, or evenly spaced),
//! seeded, whatever the server answers: a slow server does not slow the arrivals, as in k6's
//! arrival-rate executors and wrk2. Every latency counts from the attempt's intended start,
//! so time spent waiting for the scheduler or the pool is in it (no coordinated omission).
//! At most `max_in_flight` requests are open at once (the connection pool, sized to the
//! rate times the attempt's life); an intent that finds no free slot when it is due is not
//! started and is counted as dropped, as k6's `dropped_iterations`.
//!
//! # The client, and what is checked
//! See [`client`]: one key per intent, a deadline per attempt, backoff, late retries from the
//! late-retry distribution divided by `time_scale`. Every 2xx the tool sees for an intent
//! (in time, after the deadline, or "lost" on the way to the client) gives the label's
//! identity at the template's JSON pointer; two identities for one intent are a duplicate
//! label, listed with its keys. A 422 is never expected: this client never changes a body.
//!
//! # Ending on time
//! Arrivals and retries stop at `duration`; attempts still open then get their deadline and
//! the observation window, and the run ends at the latest `deadline + observe + 1 s` after
//! `duration`, whatever the server does.

pub mod body;
mod client;
pub mod invoice;
mod outcome;
pub mod predict;
pub mod request;
pub mod shard;
pub mod summary;
mod tally;
pub mod verdict;

pub use crate::sim::replay::KeyPolicy;
pub use outcome::Outcome;
pub use request::{Caller, Template};
pub use shard::Shard;
pub use summary::{Budgets, LoadReport};
pub use tally::{SecondTally, ShardTally};

use crate::traffic::{Arrivals, RetryDelay};
use rand::SeedableRng;
use rand::rngs::StdRng;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;

/// How intents are spaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Spacing {
    /// A Poisson process (`traffic::Arrivals`), as `simulate` replays.
    Poisson,
    /// Exactly `1 / rate` apart, as wrk2 and oha send.
    Constant,
}

/// Everything one run is asked.
#[derive(Debug, Clone)]
pub struct LoadConfig {
    /// The target's base URL; the template's path is joined to it.
    pub url: reqwest::Url,
    pub rate_per_s: f64,
    pub spacing: Spacing,
    pub duration: Duration,
    pub seed: u64,
    /// The client's deadline for one attempt (the seed's 250 ms).
    pub deadline: Duration,
    /// How long after the deadline the tool keeps listening for the answer.
    pub observe: Duration,
    pub max_attempts: u32,
    pub backoff_base: Duration,
    pub backoff_cap: Duration,
    pub retry: RetryDelay,
    /// Seconds of the target's clock per wall second: late-retry delays are divided by it.
    pub time_scale: f64,
    /// Share of replies the network loses on the way back (the server ran the call).
    pub lose_reply_fraction: f64,
    pub key_policy: KeyPolicy,
    /// The first intent's order number; intent `n` labels order `first_order + n`.
    pub first_order: i64,
    pub template: Template,
    pub callers: Vec<Caller>,
    pub max_in_flight: usize,
    /// The most of one answer's body that is read; an answer past it is an error.
    pub max_body: u64,
    /// HTTP/2 without TLS negotiation (h2c); over TLS, HTTP/2 is negotiated by ALPN anyway.
    pub http2_prior_knowledge: bool,
    pub budgets: Budgets,
    /// How the retry distribution was chosen, for the output.
    pub retry_source: String,
    /// `--shard I/N`: send only this shard's intents of the run's one schedule.
    pub shard: Option<Shard>,
}

impl LoadConfig {
    /// The seed's client against `url` at `rate_per_s` for `duration`: 250 ms deadline, 4
    /// attempts, backoff 100 ms doubling to 5 s (the simulated client's defaults), the seed's
    /// retry table, and the seed's share of replies lost after the server ran the call
    /// (timeouts × done fraction: 0.1 % × 60 %). All of them are the knob table's defaults, the
    /// ones `simulate` replays with.
    pub fn seed(url: reqwest::Url, rate_per_s: f64, duration: Duration) -> Self {
        let sim = crate::settings::Settings::default().sim_config(crate::duration::DAY_S);
        let ms = |v: crate::clock::Millis| Duration::from_millis(v.max(0) as u64);
        let deadline = ms(sim.deadline_ms);
        LoadConfig {
            url,
            rate_per_s,
            spacing: Spacing::Poisson,
            duration,
            seed: sim.seed,
            deadline,
            observe: Duration::from_secs(2),
            max_attempts: sim.max_attempts,
            backoff_base: ms(sim.backoff_base_ms),
            backoff_cap: ms(sim.backoff_cap_ms),
            retry: RetryDelay::seed(),
            time_scale: 1.0,
            lose_reply_fraction: sim.timeout_fraction * sim.done_fraction,
            key_policy: KeyPolicy::Derived,
            first_order: 1,
            template: Template::default(),
            callers: Vec::new(),
            max_in_flight: default_max_in_flight(rate_per_s, deadline),
            max_body: DEFAULT_MAX_BODY,
            http2_prior_knowledge: false,
            budgets: Budgets::default(),
            retry_source: "the seed's table".into(),
            shard: None,
        }
    }

    /// The rate this process sends at: the run's, or a shard's share of it.
    pub fn sent_rate_per_s(&self) -> f64 {
        self.rate_per_s / f64::from(self.shard.map_or(1, |s| s.count))
    }

    /// Refuses values the run cannot use; the message names the flag.
    pub fn check(&self) -> anyhow::Result<()> {
        let positive = |v: f64| v.is_finite() && v > 0.0;
        if !positive(self.rate_per_s) || self.rate_per_s > 1e6 {
            anyhow::bail!(
                "--rate {}: must be above 0 and at most 1,000,000/s",
                self.rate_per_s
            );
        }
        if self.duration.is_zero() {
            anyhow::bail!("--duration: must be above 0");
        }
        if self.deadline.is_zero() {
            anyhow::bail!("--deadline: must be above 0");
        }
        if !positive(self.time_scale) {
            anyhow::bail!("--time-scale {}: must be above 0", self.time_scale);
        }
        if !(0.0..=1.0).contains(&self.lose_reply_fraction) {
            anyhow::bail!(
                "--lose-replies {}: must be a fraction in 0..1",
                self.lose_reply_fraction
            );
        }
        if self.max_attempts == 0 || self.max_attempts > 100 {
            anyhow::bail!("--max-attempts {}: must be 1..100", self.max_attempts);
        }
        if self.max_in_flight == 0 {
            anyhow::bail!("--max-in-flight: must be at least 1");
        }
        if self.max_body == 0 {
            anyhow::bail!("--max-body: must be at least 1 byte");
        }
        if let Some(shard) = self.shard {
            shard.check()?;
        }
        let intents = self.rate_per_s * self.duration.as_secs_f64() * 1.5 + 1000.0;
        if self.first_order < 0 || self.first_order as f64 + intents > MAX_ORDER as f64 {
            anyhow::bail!(
                "--first-order {}: the run's order numbers (about rate × duration of them) must stay within 0..{MAX_ORDER}",
                self.first_order
            );
        }
        if !matches!(self.url.scheme(), "http" | "https") {
            anyhow::bail!("URL {}: only http:// and https:// are spoken", self.url);
        }
        self.template.check(&request::Parcel {
            order: self.first_order,
            parcel: 1,
            version: 1,
        })
    }
}

/// Order numbers stay within what the seed's CreateLabel takes (`idemcalc serve` refuses
/// larger ones with a 400).
pub const MAX_ORDER: i64 = crate::engine::request::MAX_ORDER_ID;

/// The most of one answer's body `load` reads: a label answer is a few kilobytes at most, so a
/// mebibyte leaves room for any real one and bounds memory to a mebibyte per request open.
pub const DEFAULT_MAX_BODY: u64 = 1 << 20;

/// Requests open at once: four deadlines' worth of arrivals (at least 32), so a server
/// answering within the deadline never fills the pool, and one that stops answering fills it
/// within a few deadlines instead of opening sockets without end.
pub fn default_max_in_flight(rate_per_s: f64, deadline: Duration) -> usize {
    (rate_per_s * deadline.as_secs_f64() * 4.0)
        .ceil()
        .clamp(32.0, 10_000.0) as usize
}

/// A default first order number that two runs a second apart do not share: the Unix time in
/// seconds (modulo 998,000, about 11.5 days) times a thousand, so a rerun against the same
/// server sends new keys rather than replays of the last run's, each run has room for a
/// thousand intents a second of the gap, and every order stays below [`MAX_ORDER`] with two
/// million to spare (a two-minute run at 2,000/s sends 240,000).
pub fn first_order_now() -> i64 {
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    (secs % 998_000) as i64 * 1000 + 1
}

/// What every task of a run shares.
pub(crate) struct Ctx {
    client: reqwest::Client,
    url: reqwest::Url,
    template: Template,
    callers: Vec<Caller>,
    key_policy: KeyPolicy,
    first_order: i64,
    seed: u64,
    deadline: Duration,
    observe: Duration,
    max_attempts: u32,
    backoff_base: Duration,
    backoff_cap: Duration,
    retry: RetryDelay,
    time_scale: f64,
    lose_reply_fraction: f64,
    max_body: u64,
    permits: Arc<tokio::sync::Semaphore>,
    start: Instant,
    /// When arrivals and retries stop, in ms after `start`: the run's duration, or the moment
    /// of a Ctrl-C.
    end_ms: std::sync::atomic::AtomicU64,
    collector: Mutex<tally::Collector>,
}

impl Ctx {
    fn lock(&self) -> MutexGuard<'_, tally::Collector> {
        self.collector.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Seconds since the run's start.
    fn at_s(&self, t: Instant) -> f64 {
        t.saturating_duration_since(self.start).as_secs_f64()
    }

    /// When arrivals and retries stop.
    fn end(&self) -> Instant {
        self.start + Duration::from_millis(self.end_ms.load(std::sync::atomic::Ordering::Relaxed))
    }

    /// Stops arrivals and retries now (Ctrl-C); attempts already sent are still heard out.
    fn stop_now(&self) {
        let now_ms = Instant::now()
            .saturating_duration_since(self.start)
            .as_millis() as u64;
        self.end_ms
            .fetch_min(now_ms, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Runs `cfg` and reports; `progress` is called with the share of the run done (0..1).
pub fn run(cfg: &LoadConfig, progress: &(dyn Fn(f64) + Sync)) -> anyhow::Result<LoadReport> {
    run_until(cfg, progress, &std::sync::atomic::AtomicBool::new(false))
}

/// [`run`], stopped early once `interrupted` is set (Ctrl-C): no intent or retry starts after
/// it, attempts already sent are heard out (their deadline and observation window), and the
/// report covers the time run, marked as interrupted.
pub fn run_until(
    cfg: &LoadConfig,
    progress: &(dyn Fn(f64) + Sync),
    interrupted: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<LoadReport> {
    Ok(run_sharded(cfg, progress, interrupted)?.0)
}

/// [`run_until`], with a shard's collector for `load merge` when `cfg.shard` is set.
pub fn run_sharded(
    cfg: &LoadConfig,
    progress: &(dyn Fn(f64) + Sync),
    interrupted: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<(LoadReport, Option<ShardTally>)> {
    cfg.check()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("idemcalc-load")
        .build()?;
    let wall = std::time::Instant::now();
    let (summary, covered_s, tally) = runtime.block_on(drive(cfg, progress, interrupted))?;
    // Anything still open (a server that never answers past the observation window) is
    // dropped here, not waited for.
    runtime.shutdown_timeout(Duration::from_millis(100));
    let mut echo = echo(cfg);
    if covered_s < echo.duration_s {
        echo.interrupted_after_s = Some(covered_s);
        echo.duration_s = covered_s.max(f64::MIN_POSITIVE);
    }
    let report = LoadReport::new(echo, summary, &cfg.budgets, wall.elapsed().as_secs_f64());
    Ok((report, tally))
}

/// The HTTP client: keep-alive pool as large as the requests open at once, TLS by rustls
/// with the platform's roots (a bad certificate fails the attempt, named).
fn http_client(cfg: &LoadConfig) -> anyhow::Result<reqwest::Client> {
    crate::net::install_tls_provider();
    let mut b = reqwest::Client::builder()
        .pool_max_idle_per_host(cfg.max_in_flight)
        .pool_idle_timeout(Duration::from_secs(30))
        .connect_timeout(cfg.deadline + cfg.observe)
        .tcp_nodelay(true)
        .no_proxy()
        .redirect(reqwest::redirect::Policy::none())
        .user_agent(concat!("idemcalc-load/", env!("CARGO_PKG_VERSION")));
    if cfg.http2_prior_knowledge {
        b = b.http2_prior_knowledge();
    }
    Ok(b.build()?)
}

async fn drive(
    cfg: &LoadConfig,
    progress: &(dyn Fn(f64) + Sync),
    interrupted: &std::sync::atomic::AtomicBool,
) -> anyhow::Result<(summary::LoadSummary, f64, Option<ShardTally>)> {
    // The template's path goes after the URL's own: http://h/api + /labels = /api/labels.
    let mut url = cfg.url.clone();
    url.set_path(&format!(
        "{}{}",
        cfg.url.path().trim_end_matches('/'),
        cfg.template.path
    ));
    let start = Instant::now() + Duration::from_millis(20);
    let ctx = Arc::new(Ctx {
        client: http_client(cfg)?,
        url,
        template: cfg.template.clone(),
        callers: cfg.callers.clone(),
        key_policy: cfg.key_policy,
        first_order: cfg.first_order,
        seed: cfg.seed,
        deadline: cfg.deadline,
        observe: cfg.observe,
        max_attempts: cfg.max_attempts,
        backoff_base: cfg.backoff_base,
        backoff_cap: cfg.backoff_cap,
        retry: cfg.retry.clone(),
        time_scale: cfg.time_scale,
        lose_reply_fraction: cfg.lose_reply_fraction,
        max_body: cfg.max_body,
        permits: Arc::new(tokio::sync::Semaphore::new(cfg.max_in_flight)),
        start,
        end_ms: std::sync::atomic::AtomicU64::new(cfg.duration.as_millis() as u64),
        collector: Mutex::new(tally::Collector::new()),
    });
    // Every task holds a clone: the run is over when only this one is left.
    let live = Arc::new(());
    let (rate, spacing, shard) = (cfg.rate_per_s, cfg.spacing, cfg.shard);
    tokio::spawn(schedule(ctx.clone(), rate, spacing, shard, live.clone()));
    let tail = cfg.deadline + cfg.observe + Duration::from_secs(1);
    let mut hard_end = ctx.end() + tail;
    let total_s = (hard_end - start).as_secs_f64();
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = Instant::now();
        if interrupted.load(std::sync::atomic::Ordering::Relaxed) && now < ctx.end() {
            ctx.stop_now();
            hard_end = ctx.end() + tail;
        }
        progress((ctx.at_s(now) / total_s).min(1.0));
        if Arc::strong_count(&live) == 1 || now >= hard_end {
            break;
        }
    }
    progress(1.0);
    let mut collector = std::mem::replace(&mut *ctx.lock(), tally::Collector::new());
    // The share of the retry distribution the run covered, up to where it ended.
    let end_s = ctx.at_s(ctx.end());
    let (retry, scale) = (&cfg.retry, cfg.time_scale);
    let covered_sum =
        collector.covered_sum(|started_s| retry.cdf((end_s - started_s).max(0.0) * scale));
    let tally = match cfg.shard {
        Some(_) => Some(collector.export(covered_sum)?),
        None => None,
    };
    Ok((collector.finish(covered_sum), end_s, tally))
}

/// Starts intents at their intended times until the run's end, whatever the server does.
/// A shard draws the same schedule and starts only its own intents: skipped ones are not
/// waited for, so the shard's clock is the run's.
async fn schedule(
    ctx: Arc<Ctx>,
    rate_per_s: f64,
    spacing: Spacing,
    shard: Option<Shard>,
    live: Arc<()>,
) {
    let mut rng = StdRng::seed_from_u64(ctx.seed);
    let Ok(poisson) = Arrivals::constant(rate_per_s) else {
        return;
    };
    let mut t_s = 0.0;
    let mut id = 0u64;
    loop {
        t_s = match spacing {
            Spacing::Poisson => poisson.next_arrival(t_s, &mut rng),
            Spacing::Constant if id == 0 => 0.0,
            Spacing::Constant => t_s + 1.0 / rate_per_s,
        };
        // The end moves earlier on Ctrl-C: asked again before and after each wait.
        if t_s >= ctx.at_s(ctx.end()) {
            break;
        }
        let due = ctx.start + Duration::from_secs_f64(t_s);
        if shard.is_some_and(|s| !s.takes(id + 1)) {
            id += 1;
            continue;
        }
        tokio::time::sleep_until(due).await;
        if due >= ctx.end() {
            break;
        }
        id += 1;
        tokio::spawn(client::intent(ctx.clone(), id, due, live.clone()));
    }
}

fn echo(cfg: &LoadConfig) -> summary::RunEcho {
    summary::RunEcho {
        url: cfg.url.to_string(),
        method: cfg.template.method.to_string(),
        path: cfg.template.path.clone(),
        rate_per_s: cfg.sent_rate_per_s(),
        shard: cfg.shard.map(|s| summary::ShardEcho {
            index: s.index,
            count: s.count,
            run_rate_per_s: cfg.rate_per_s,
        }),
        arrivals: match cfg.spacing {
            Spacing::Poisson => "poisson",
            Spacing::Constant => "constant",
        }
        .to_string(),
        duration_s: cfg.duration.as_secs_f64(),
        interrupted_after_s: None,
        seed: cfg.seed,
        deadline_ms: cfg.deadline.as_secs_f64() * 1000.0,
        observe_ms: cfg.observe.as_secs_f64() * 1000.0,
        max_attempts: cfg.max_attempts,
        time_scale: cfg.time_scale,
        lose_reply_fraction: cfg.lose_reply_fraction,
        key_policy: cfg.key_policy.name(),
        first_order: cfg.first_order,
        callers: cfg.callers.len().max(1),
        max_in_flight: cfg.max_in_flight,
        max_body_bytes: cfg.max_body,
        identity: cfg.template.identity.clone(),
        retry_distribution: format!("{}: {}", cfg.retry_source, cfg.retry.shape_text()),
    }
}
