//! Clients and writers: how one slice of a bench run is driven.
//!
//! SQLite has one writer at a time, so one thread owns the store (the engine, or the baseline's
//! connection) and serves every request; `--workers` client threads send it requests over a
//! channel and wait for their answers. PostgreSQL takes writers in parallel: one writer thread
//! per pooled connection (`--pool`) takes requests from the same channel, as a server's request
//! threads share its pool. With N connections instead, writers would queue on the
//! database lock through SQLite's busy handler, which sleeps in steps of 1, 2, 5, 10 ms: the
//! bench would measure those sleeps, not the engine. With group commit the writer holds each
//! answer until the batch it depends on has committed.

use super::fill::{Layout, METHOD, OTHER_WEIGHT_G, PATH, WEIGHT_G, body, key};
use super::mix::{Kind, Mix, PerKind};
use crate::engine::{Engine, Outcome, Request, RequestDigest};
use crate::store::Store;
use crate::store::group::GroupCommitStore;
use hdrhistogram::Histogram;
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng};
use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::mpsc::{self, Receiver, Sender, TryRecvError};
use std::thread;
use std::time::{Duration, Instant};

/// One CreateLabel call as a client sends it.
pub struct Job {
    pub worker: usize,
    pub order_id: i64,
    pub key: String,
    pub body: String,
    /// The engine side's request hash and validation, computed by the client thread as a
    /// server computes it on the thread that read the request (`serve`'s HTTP workers), so
    /// the one writer runs transactions only. `None`: the writer computes it (the baseline
    /// has none to compute).
    pub digest: Option<RequestDigest>,
}

/// What the writer sends back: the outcome, or why there is none.
pub type Answer = Result<Outcome, String>;

/// What serves requests on the writer thread.
pub trait Service: Send {
    fn serve(&mut self, job: Job) -> Result<Outcome, String>;
    /// The store it writes, for the checks at the end of a run.
    fn store(&mut self) -> &mut dyn Store;
}

impl Service for Engine {
    fn serve(&mut self, job: Job) -> Result<Outcome, String> {
        let req = label_request(job.key, job.body);
        let digest = job.digest.unwrap_or_else(|| RequestDigest::of(&req));
        self.handle_digested(&req, digest)
            .map(|r| r.outcome)
            .map_err(|e| e.to_string())
    }

    fn store(&mut self) -> &mut dyn Store {
        Engine::store(self)
    }
}

/// The CreateLabel call the bench's clients make, as the engine receives it.
fn label_request(key: String, body: String) -> Request {
    Request {
        caller_id: super::fill::CALLER.to_string(),
        idem_key: Some(key),
        method: METHOD.to_string(),
        path: PATH.to_string(),
        body,
    }
}

/// The digest a client computes for the engine's side (see [`Job::digest`]).
fn client_digest(plan: &Plan<'_>, body: &str) -> Option<RequestDigest> {
    (!plan.baseline).then(|| RequestDigest::of_parts(METHOD, PATH, body))
}

/// How the writer's transactions reach the disk.
pub enum Commits {
    /// Each transaction commits on its own: an answer is durable when it is computed.
    PerTransaction,
    /// Logical transactions share physical commits: answers wait for their batch.
    Group(GroupCommitStore),
}

/// Where the next fresh and the next abandoned key come from, per store, across slices.
pub struct Counters {
    next_fresh: AtomicI64,
    next_lease_expired: AtomicI64,
}

impl Counters {
    pub fn new(layout: &Layout) -> Self {
        Self {
            next_fresh: AtomicI64::new(layout.fresh_from()),
            next_lease_expired: AtomicI64::new(layout.lease_expired_ids().start),
        }
    }
}

/// What the clients of one side do in a slice.
pub struct Plan<'a> {
    pub workers: usize,
    /// Creates per second for the whole side; `None` is flat out.
    pub rate_per_s: Option<f64>,
    pub length: Duration,
    pub mix: &'a Mix,
    pub layout: &'a Layout,
    pub counters: &'a Counters,
    pub seed: u64,
    /// Answers are checked against [`Kind::expected_baseline`] rather than [`Kind::expected`].
    pub baseline: bool,
    /// Set by Ctrl-C: clients send nothing more and the slice ends.
    pub interrupted: &'a AtomicBool,
}

/// What one slice (or, summed, one side) came to.
pub struct Tally {
    /// Microseconds from when each request was due to when its answer arrived.
    pub latency_us: Histogram<u64>,
    /// Microseconds from when each request was due to when its client sent it: the load
    /// generator's own lateness (a client still waiting, or not yet scheduled by the OS). It is
    /// part of the latency above; a large one says the machine, not the engine, was the limit.
    pub send_lag_us: Histogram<u64>,
    pub by_kind: PerKind<u64>,
    /// 201s given to callers: each must have its label in the store.
    pub created: u64,
    /// Saved responses replayed, 409s and 422s given (whatever the kind of request).
    pub replayed: u64,
    pub conflicts: u64,
    pub reused: u64,
    pub unexpected: u64,
    pub errors: u64,
    pub first_problem: Option<String>,
    /// Takeovers sent as first runs because every abandoned key was used.
    pub takeovers_short: u64,
    pub elapsed: Duration,
    /// Time the writer spent serving and committing, not waiting for requests.
    pub busy: Duration,
    /// Answers withheld because their batch did not commit.
    pub lost_answers: u64,
}

/// Latencies up to an hour, to 3 significant digits.
const LATENCY_MAX_US: u64 = 3_600_000_000;

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).expect("static histogram bounds are valid")
}

impl Tally {
    pub fn new() -> Self {
        Self {
            latency_us: histogram(),
            send_lag_us: histogram(),
            by_kind: PerKind::default(),
            created: 0,
            replayed: 0,
            conflicts: 0,
            reused: 0,
            unexpected: 0,
            errors: 0,
            first_problem: None,
            takeovers_short: 0,
            elapsed: Duration::ZERO,
            busy: Duration::ZERO,
            lost_answers: 0,
        }
    }

    pub fn requests(&self) -> u64 {
        self.by_kind.0.iter().sum()
    }

    pub fn absorb(&mut self, other: Tally) {
        // Both histograms share bounds, so adding cannot fail.
        let _ = self.latency_us.add(&other.latency_us);
        let _ = self.send_lag_us.add(&other.send_lag_us);
        for kind in Kind::ALL {
            *self.by_kind.get_mut(kind) += other.by_kind.get(kind);
        }
        self.created += other.created;
        self.replayed += other.replayed;
        self.conflicts += other.conflicts;
        self.reused += other.reused;
        self.unexpected += other.unexpected;
        self.errors += other.errors;
        if self.first_problem.is_none() {
            self.first_problem = other.first_problem;
        }
        self.takeovers_short += other.takeovers_short;
        self.elapsed += other.elapsed;
        self.busy += other.busy;
        self.lost_answers += other.lost_answers;
    }

    fn problem(&mut self, text: String) {
        if self.first_problem.is_none() {
            self.first_problem = Some(text);
        }
    }
}

impl Default for Tally {
    fn default() -> Self {
        Self::new()
    }
}

/// Runs one slice: `plan.workers` clients against one writer per service (group commit needs
/// exactly one).
pub fn run_slice(services: &mut [Box<dyn Service>], commits: &Commits, plan: &Plan<'_>) -> Tally {
    let (job_tx, job_rx) = mpsc::channel::<Job>();
    let job_rx = Mutex::new(job_rx);
    let (reply_txs, reply_rxs): (Vec<Sender<Answer>>, Vec<Receiver<Answer>>) =
        (0..plan.workers).map(|_| mpsc::channel()).unzip();
    thread::scope(|s| {
        // Named threads, so a profile tells the writers from the clients.
        let writers: Vec<_> = services
            .iter_mut()
            .enumerate()
            .map(|(i, service)| {
                let (jobs, replies) = (&job_rx, &reply_txs);
                thread::Builder::new()
                    .name(format!("bench-writer-{i}"))
                    .spawn_scoped(s, move || serve(service.as_mut(), commits, jobs, replies))
            })
            .collect();
        let start = Instant::now();
        let clients: Vec<_> = reply_rxs
            .into_iter()
            .enumerate()
            .map(|(w, answers)| {
                let jobs = job_tx.clone();
                thread::Builder::new()
                    .name(format!("bench-client-{w}"))
                    .spawn_scoped(s, move || client(w, plan, start, jobs, answers))
            })
            .collect();
        drop(job_tx);
        let mut tally = Tally::new();
        let mut last = start;
        for c in clients {
            match c.map(|h| h.join()) {
                Ok(Ok((t, last_answer))) => {
                    last = last.max(last_answer);
                    tally.absorb(t);
                }
                Ok(Err(_)) => tally.problem("a client thread panicked".into()),
                Err(e) => tally.problem(format!("cannot start a client thread: {e}")),
            }
        }
        for writer in writers {
            match writer.map(|h| h.join()) {
                Ok(Ok((busy, lost))) => {
                    tally.busy += busy;
                    tally.lost_answers += lost;
                }
                Ok(Err(_)) => tally.problem("a writer thread panicked".into()),
                Err(e) => tally.problem(format!("cannot start a writer thread: {e}")),
            }
        }
        tally.elapsed = last - start;
        tally
    })
}

/// A writer: serves requests one at a time and hands each answer back once it is durable.
/// Returns its busy time and the answers it had to withhold. Writers share the channel: the one
/// holding its lock waits for the next request, the others for the lock.
fn serve(
    service: &mut dyn Service,
    commits: &Commits,
    jobs: &Mutex<Receiver<Job>>,
    replies: &[Sender<Answer>],
) -> (Duration, u64) {
    let mut held: VecDeque<(u64, usize, Answer)> = VecDeque::new();
    let mut busy = Duration::ZERO;
    let mut lost = 0;
    loop {
        let next = {
            // A writer that panicked holding the lock left the receiver intact.
            let jobs = jobs.lock().unwrap_or_else(|p| p.into_inner());
            if held.is_empty() {
                jobs.recv().map_err(|_| TryRecvError::Disconnected)
            } else {
                jobs.try_recv()
            }
        };
        let t0 = Instant::now();
        match next {
            Ok(job) => {
                let worker = job.worker;
                let answer = service.serve(job);
                let ticket = match commits {
                    Commits::PerTransaction => 0,
                    Commits::Group(g) => {
                        let ticket = g.ticket();
                        // A failed commit is reported through `take_lost` in `release`.
                        let _ = g.flush_if_due();
                        ticket
                    }
                };
                held.push_back((ticket, worker, answer));
            }
            // Nobody else is waiting to be served: commit now, since holding the batch open
            // would only add latency to the answers already in it.
            Err(TryRecvError::Empty) => {
                if let Commits::Group(g) = commits {
                    let _ = g.flush();
                }
            }
            Err(TryRecvError::Disconnected) => break,
        }
        lost += release(&mut held, commits, replies);
        busy += t0.elapsed();
    }
    (busy, lost)
}

/// Sends every held answer whose batch has ended; an answer of a lost batch becomes an error.
fn release(
    held: &mut VecDeque<(u64, usize, Answer)>,
    commits: &Commits,
    replies: &[Sender<Answer>],
) -> u64 {
    let (through, lost) = match commits {
        Commits::PerTransaction => (u64::MAX, Vec::new()),
        Commits::Group(g) => (g.ended_through(), g.take_lost()),
    };
    let mut withheld = 0;
    while held
        .front()
        .is_some_and(|(ticket, _, _)| *ticket <= through)
    {
        let Some((ticket, worker, answer)) = held.pop_front() else {
            break;
        };
        let answer = match lost.iter().find(|l| l.id == ticket) {
            Some(l) => {
                withheld += 1;
                Err(format!("the batch did not commit: {}", l.error))
            }
            None => answer,
        };
        // A client that is gone no longer needs its answer.
        let _ = replies[worker].send(answer);
    }
    withheld
}

/// One client: sends requests (closed loop, or open loop at its share of the rate) until the
/// slice ends, and records each answer's latency from when the request was due.
fn client(
    worker: usize,
    plan: &Plan<'_>,
    start: Instant,
    jobs: Sender<Job>,
    answers: Receiver<Answer>,
) -> (Tally, Instant) {
    let mut tally = Tally::new();
    let mut rng = StdRng::seed_from_u64(plan.seed ^ (worker as u64).wrapping_mul(0x9E37_79B9));
    let end = start + plan.length;
    let total = plan.mix.total();
    let mut last = start;
    let mut i = worker as u64;
    loop {
        let due = match plan.rate_per_s {
            // Request i of the side is due at start + i / rate; this client sends every
            // `workers`-th. A client that is still waiting sends late, and the wait counts.
            Some(rate) => {
                let due = start + Duration::from_secs_f64(i as f64 / rate);
                if due >= end {
                    break;
                }
                i += plan.workers as u64;
                let now = Instant::now();
                if due > now {
                    thread::sleep(due - now);
                }
                due
            }
            None => {
                let now = Instant::now();
                if now >= end {
                    break;
                }
                now
            }
        };
        if plan.interrupted.load(Ordering::Relaxed) {
            break;
        }
        let drawn = plan.mix.pick(rng.random_range(0..total));
        let (kind, order_id, weight_g) = choose(drawn, plan, &mut rng, &mut tally);
        let (idem_key, body) = (key(order_id), body(order_id, weight_g));
        tally
            .send_lag_us
            .saturating_record(due.elapsed().as_micros().max(1) as u64);
        // After the send lag is read: the digest is the server's work, part of the latency.
        let job = Job {
            worker,
            order_id,
            digest: client_digest(plan, &body),
            key: idem_key,
            body,
        };
        if jobs.send(job).is_err() {
            tally.problem("the writer stopped early".into());
            break;
        }
        let Ok(answer) = answers.recv() else {
            tally.problem("the writer stopped early".into());
            break;
        };
        let now = Instant::now();
        last = now;
        tally
            .latency_us
            .saturating_record((now - due).as_micros().max(1) as u64);
        *tally.by_kind.get_mut(kind) += 1;
        let expected = if plan.baseline {
            kind.expected_baseline()
        } else {
            kind.expected()
        };
        match answer {
            Ok(outcome) => {
                match outcome {
                    Outcome::Created => tally.created += 1,
                    Outcome::Replayed => tally.replayed += 1,
                    Outcome::InProgress => tally.conflicts += 1,
                    Outcome::KeyReused => tally.reused += 1,
                    _ => {}
                }
                if outcome != expected {
                    tally.unexpected += 1;
                    tally.problem(format!(
                        "a {} request ({}) got {outcome:?}, expected {expected:?}",
                        kind.name(),
                        key(order_id)
                    ));
                }
            }
            Err(e) => {
                tally.errors += 1;
                tally.problem(format!("a {} request failed: {e}", kind.name()));
            }
        }
    }
    (tally, last)
}

/// The key a drawn kind goes to: a fresh id, a random pre-filled one, or the next abandoned one.
fn choose(kind: Kind, plan: &Plan<'_>, rng: &mut StdRng, tally: &mut Tally) -> (Kind, i64, u32) {
    let fresh = || plan.counters.next_fresh.fetch_add(1, Ordering::Relaxed);
    match kind {
        Kind::First => (Kind::First, fresh(), WEIGHT_G),
        Kind::Replay => (
            kind,
            rng.random_range(plan.layout.completed_ids()),
            WEIGHT_G,
        ),
        Kind::Reused => (
            kind,
            rng.random_range(plan.layout.completed_ids()),
            OTHER_WEIGHT_G,
        ),
        Kind::Conflict => (kind, rng.random_range(plan.layout.held_ids()), WEIGHT_G),
        Kind::Takeover => {
            let id = plan
                .counters
                .next_lease_expired
                .fetch_add(1, Ordering::Relaxed);
            if plan.layout.lease_expired_ids().contains(&id) {
                (kind, id, WEIGHT_G)
            } else {
                tally.takeovers_short += 1;
                (Kind::First, fresh(), WEIGHT_G)
            }
        }
    }
}
