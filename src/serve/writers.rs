//! The engine's blocking store calls, kept off the async workers: writer threads, each owning
//! one engine on one store connection, fed by one bounded channel.
//!
//! As in the bench (`bench::drive`): SQLite has one writer at a time, so one thread owns the
//! store and serves every request (more connections would queue on the file's lock through
//! SQLite's busy handler, which sleeps); PostgreSQL and Redis take writers in parallel, one
//! thread per pooled connection. The sweeper's batches go through the same channel, so on
//! SQLite they run on the one writer between requests instead of fighting it for the lock.

use crate::carrier::{Carrier, CarrierReply};
use crate::clock::Clock;
use crate::engine::{
    Attempt, Begun, DiePoint, Engine, EngineConfig, EngineError, Finished, Request, RequestDigest,
    Response,
};
use crate::store::{StoreError, StorePool};
use std::sync::mpsc::{Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use tokio::sync::{OwnedSemaphorePermit, Semaphore, TryAcquireError, oneshot};

/// Why a job got no answer from the store.
#[derive(Debug, Clone)]
pub enum JobError {
    /// The store failed (a server gone, a deadline passed): nothing was answered from it.
    Store(String),
    /// The store's hold is gone: another process may write into it now. Permanent.
    Lost(String),
    /// Every writer is busy and the queue is full.
    Overloaded,
    /// The writers have stopped (shutting down).
    Stopped,
}

impl From<EngineError> for JobError {
    fn from(e: EngineError) -> Self {
        let EngineError::Store(s) = &e;
        match s {
            StoreError::Lost { .. } => JobError::Lost(e.to_string()),
            _ => JobError::Store(e.to_string()),
        }
    }
}

/// Txn 1's outcome, with what the carrier is to be asked when this attempt holds the lease: the
/// in-process carrier's reply (it answers at once; its latency is waited out by the caller,
/// with no transaction open), or, with a carrier behind HTTP, the key to send it.
pub enum Began {
    Answered(Response),
    Owned(Attempt, CarrierCall),
    /// The in-process carrier answered with no latency to wait out, so the writer ran txn 2
    /// straight after it, as the bench's engine does: one trip to the writer instead of two.
    Completed(Attempt, Finished),
}

/// The carrier's part of an attempt that holds the lease.
pub enum CarrierCall {
    /// The in-process carrier's reply.
    Answered(CarrierReply),
    /// To be sent to the carrier behind HTTP (`--carrier-url`), with this key.
    Remote(Option<String>),
}

/// What one sweep did.
pub struct Swept {
    pub keys: Vec<(String, String)>,
    pub batches: u64,
    /// The store's records after the sweep (`None`: the count failed).
    pub keys_in_store: Option<u64>,
}

pub enum Job {
    /// Txn 1, with the request's digest computed by the HTTP worker that read it, so the
    /// writers (SQLite's one above all) spend their time on transactions. With `may_complete`,
    /// an in-process carrier that answers with no latency is followed by txn 2 on the spot
    /// ([`Began::Completed`]); without it (a test hook that kills the handler between the two)
    /// txn 2 is left to the caller.
    Begin {
        request: Box<(Request, RequestDigest)>,
        may_complete: bool,
        reply: oneshot::Sender<Result<Began, JobError>>,
    },
    Finish(
        Box<(Attempt, CarrierReply, Option<DiePoint>)>,
        oneshot::Sender<Result<Finished, JobError>>,
    ),
    Sweep {
        batch: u32,
        max_batches: u32,
        count: bool,
        reply: oneshot::Sender<Result<Swept, JobError>>,
    },
}

/// A queued job with its slot in the queue, given back when a writer takes the job.
type Queued = (Job, OwnedSemaphorePermit);

/// The writer threads and the queue in front of them.
pub struct Writers {
    jobs: Mutex<Option<SyncSender<Queued>>>,
    /// The queue's free slots. A job takes one before it is sent, so the channel is never
    /// found full, and a job that must wait for room waits here, woken when a writer takes a
    /// job, instead of polling the channel.
    slots: Arc<Semaphore>,
    threads: Mutex<Vec<JoinHandle<()>>>,
    pub count: usize,
}

/// What every writer's engine is made of.
pub struct EngineParts {
    pub pool: StorePool,
    pub carrier: Arc<Carrier>,
    pub clock: Arc<dyn Clock>,
    pub config: EngineConfig,
    /// The carrier is behind HTTP: the writers leave its call to the async side.
    pub remote_carrier: bool,
}

impl Writers {
    /// Opens one store connection per writer now, so a store that cannot be opened fails the
    /// start, naming it.
    pub fn start(parts: Arc<EngineParts>, count: usize, queue: usize) -> Result<Self, StoreError> {
        let queue = queue.max(1);
        let (tx, rx) = std::sync::mpsc::sync_channel::<Queued>(queue);
        let rx = Arc::new(Mutex::new(rx));
        let mut threads = Vec::new();
        for i in 0..count {
            let engine = open_engine(&parts)?;
            let (rx, own) = (rx.clone(), parts.clone());
            let t = std::thread::Builder::new()
                .name(format!("serve-writer-{i}"))
                .spawn(move || writer(engine, &own, &rx))
                .map_err(|e| StoreError::Open {
                    location: parts.pool.describe(),
                    message: format!("cannot start a writer thread: {e}"),
                })?;
            threads.push(t);
        }
        Ok(Writers {
            jobs: Mutex::new(Some(tx)),
            slots: Arc::new(Semaphore::new(queue)),
            threads: Mutex::new(threads),
            count,
        })
    }

    /// Queues a job that holds a slot.
    fn send(&self, job: Job, slot: OwnedSemaphorePermit) -> Result<(), JobError> {
        let jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        let Some(tx) = jobs.as_ref() else {
            return Err(JobError::Stopped);
        };
        match tx.try_send((job, slot)) {
            Ok(()) => Ok(()),
            // Cannot happen while every queued job holds one of the channel's slots.
            Err(TrySendError::Full(_)) => Err(JobError::Overloaded),
            Err(TrySendError::Disconnected(_)) => Err(JobError::Stopped),
        }
    }

    /// Runs a job on a writer and waits for its answer. A full queue is an answer (503), not
    /// a stall of the async worker that asked.
    pub async fn call<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, JobError>>) -> Job,
    ) -> Result<T, JobError> {
        let slot = match self.slots.clone().try_acquire_owned() {
            Ok(slot) => slot,
            Err(TryAcquireError::NoPermits) => return Err(JobError::Overloaded),
            Err(TryAcquireError::Closed) => return Err(JobError::Stopped),
        };
        let (tx, rx) = oneshot::channel();
        self.send(make(tx), slot)?;
        rx.await.unwrap_or(Err(JobError::Stopped))
    }

    /// [`Writers::call`] for a job that must not be refused: while the queue is full it waits
    /// for a slot instead of answering [`JobError::Overloaded`].
    pub async fn call_waiting<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, JobError>>) -> Job,
    ) -> Result<T, JobError> {
        let Ok(slot) = self.slots.clone().acquire_owned().await else {
            return Err(JobError::Stopped);
        };
        let (tx, rx) = oneshot::channel();
        self.send(make(tx), slot)?;
        rx.await.unwrap_or(Err(JobError::Stopped))
    }

    /// Closes the queue; the writers finish what is queued, drop their engines (giving their
    /// connections and the store's hold back) and end.
    pub fn stop(&self) {
        self.jobs.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.slots.close();
        let threads: Vec<_> = self
            .threads
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .drain(..)
            .collect();
        for t in threads {
            let _ = t.join();
        }
    }
}

fn open_engine(parts: &EngineParts) -> Result<Engine, StoreError> {
    Ok(Engine::new(
        parts.pool.get()?,
        parts.carrier.clone(),
        parts.clock.clone(),
        parts.config.clone(),
    ))
}

/// One writer: takes jobs until the queue closes. A store error drops the engine, so its
/// connection goes back (PostgreSQL's pool replaces a broken one) and the next job opens a new
/// one; a lost hold stays lost.
fn writer(engine: Engine, parts: &EngineParts, jobs: &Mutex<Receiver<Queued>>) {
    let mut engine = Some(engine);
    loop {
        let job = {
            let rx = jobs.lock().unwrap_or_else(|p| p.into_inner());
            match rx.recv() {
                // The job leaves the queue: its slot is free for the next.
                Ok((job, _slot)) => job,
                Err(_) => return,
            }
        };
        if engine.is_none() {
            match open_engine(parts) {
                Ok(e) => engine = Some(e),
                Err(e) => {
                    fail(job, JobError::from(EngineError::Store(e)));
                    continue;
                }
            }
        }
        let Some(e) = engine.as_mut() else { continue };
        let ok = run(e, job, parts.remote_carrier);
        if !ok {
            engine = None;
        }
    }
}

/// Answers a job with `err`.
fn fail(job: Job, err: JobError) {
    match job {
        Job::Begin { reply, .. } => drop(reply.send(Err(err))),
        Job::Finish(_, reply) => drop(reply.send(Err(err))),
        Job::Sweep { reply, .. } => drop(reply.send(Err(err))),
    }
}

/// Runs one job on `engine`; false when the store failed.
fn run(engine: &mut Engine, job: Job, remote_carrier: bool) -> bool {
    match job {
        Job::Begin {
            request,
            may_complete,
            reply,
        } => {
            let (req, digest) = *request;
            let r = engine.begin_digested(&req, digest).and_then(|b| match b {
                Begun::Answered(r) => Ok(Began::Answered(r)),
                Begun::Owned(a) if remote_carrier => {
                    let key = engine.carrier_key_for(&a);
                    Ok(Began::Owned(a, CarrierCall::Remote(key)))
                }
                Begun::Owned(a) => {
                    // The carrier is called with no transaction open, as ever; only the
                    // wait for its latency, when there is one, goes back to the caller.
                    let carrier = engine.call_carrier(&a);
                    if may_complete && carrier.latency_ms <= 0 {
                        let finished = engine.finish(&a, &carrier, None)?;
                        Ok(Began::Completed(a, finished))
                    } else {
                        Ok(Began::Owned(a, CarrierCall::Answered(carrier)))
                    }
                }
            });
            let ok = r.is_ok();
            let _ = reply.send(r.map_err(JobError::from));
            ok
        }
        Job::Finish(parts, reply) => {
            let (attempt, carrier, die) = *parts;
            let r = engine.finish(&attempt, &carrier, die);
            let ok = r.is_ok();
            let _ = reply.send(r.map_err(JobError::from));
            ok
        }
        Job::Sweep {
            batch,
            max_batches,
            count,
            reply,
        } => {
            let mut keys = Vec::new();
            let r = engine.sweep_collect(batch, max_batches, &mut keys);
            let ok = r.is_ok();
            let r = r.map_err(JobError::from).map(|purged| {
                let keys_in_store = if count {
                    engine.store().count_keys().ok()
                } else {
                    None
                };
                Swept {
                    batches: (purged / u64::from(batch.max(1)) + 1).min(u64::from(max_batches)),
                    keys,
                    keys_in_store,
                }
            });
            let _ = reply.send(r);
            ok
        }
    }
}
