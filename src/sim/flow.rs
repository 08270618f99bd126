//! A discrete-event driver of requests against one engine on a virtual clock.
//!
//! Both the scripted timelines of `idemcalc scenario` and the synthetic traffic of `idemcalc
//! simulate` run through this one driver, so a timeline and a day of traffic exercise the engine
//! through exactly the same steps: arrival → txn 1 → carrier call → txn 2 → reply, each at its
//! own virtual instant, with attempts interleaving freely between steps.

use crate::carrier::{CarrierReply, CarrierResult};
use crate::clock::{Millis, VirtualClock};
use crate::engine::{Attempt, Begun, DiePoint, Engine, EngineError, Finished, Request, Response};
use crate::sim::Map;
use std::cmp::Reverse;
use std::collections::BinaryHeap;

/// One request put on the wire by a client.
#[derive(Debug, Clone)]
pub struct Send {
    /// The driver's own id for the request, chosen by the client and echoed in every event.
    pub id: u64,
    pub request: Request,
    /// One-way network delay, each way.
    pub network_ms: Millis,
    /// Server time between txn 1 and the carrier call.
    pub processing_ms: Millis,
    /// Server time between the carrier's answer and txn 2.
    pub finish_ms: Millis,
    /// Overrides the carrier's own latency for this attempt's call.
    pub carrier_latency_ms: Option<Millis>,
    pub die: Option<DiePoint>,
    /// The request never reaches the server.
    pub lose_request: bool,
    /// The server runs the request but the reply never reaches the caller.
    pub lose_reply: bool,
    /// The client's deadline: a reply later than this after sending is never heard, and the
    /// client learns of the silence at that instant ([`Observed::TimedOut`]). `None` (scripted
    /// timelines) waits for the reply however late.
    pub deadline_ms: Option<Millis>,
}

impl Send {
    pub fn new(id: u64, request: Request) -> Self {
        Self {
            id,
            request,
            network_ms: 0,
            processing_ms: 0,
            finish_ms: 0,
            carrier_latency_ms: None,
            die: None,
            lose_request: false,
            lose_reply: false,
            deadline_ms: None,
        }
    }
}

/// What happened, in the order it happened. Times are virtual milliseconds since the start.
#[derive(Debug, Clone)]
pub enum Observed {
    Arrived {
        id: u64,
        at_ms: Millis,
    },
    /// Txn 1 claimed the key (`took_over` when it took over an expired lease).
    Claimed {
        id: u64,
        at_ms: Millis,
        took_over: bool,
    },
    CarrierAnswered {
        id: u64,
        called_ms: Millis,
        at_ms: Millis,
        reply: CarrierReply,
    },
    Died {
        id: u64,
        at_ms: Millis,
        point: DiePoint,
    },
    /// The server sent its answer (it reaches the caller at `Replied`, unless lost).
    Answered {
        id: u64,
        at_ms: Millis,
        response: Response,
    },
    Replied {
        id: u64,
        sent_ms: Millis,
        at_ms: Millis,
        response: Response,
    },
    /// The client's deadline passed with no reply: lost on the way, killed, or just slow (the
    /// server may still be running it; its reply, if any, will not be heard).
    TimedOut {
        id: u64,
        sent_ms: Millis,
        at_ms: Millis,
    },
    Swept {
        at_ms: Millis,
        /// (caller column, key) of each purged record.
        purged: Vec<(String, String)>,
    },
}

enum Event {
    Arrive(u64),
    CallCarrier(u64),
    Finish(u64),
    Reply(u64, Response),
    Deadline(u64),
    Sweep { batch: u32, max_batches: u32 },
}

struct InFlight {
    send: Send,
    sent_ms: Millis,
    attempt: Option<Attempt>,
    called_ms: Millis,
    reply: Option<CarrierReply>,
}

pub struct Flow {
    engine: Engine,
    clock: VirtualClock,
    queue: BinaryHeap<Reverse<(Millis, u64)>>,
    events: Map<u64, (Millis, Event)>,
    seq: u64,
    inflight: Map<u64, InFlight>,
    /// Clients still listening, with when they sent: only requests with a deadline.
    waiting: Map<u64, Millis>,
}

impl Flow {
    pub fn new(engine: Engine, clock: VirtualClock) -> Self {
        Self {
            engine,
            clock,
            queue: BinaryHeap::new(),
            events: Map::default(),
            seq: 0,
            inflight: Map::default(),
            waiting: Map::default(),
        }
    }

    pub fn engine(&mut self) -> &mut Engine {
        &mut self.engine
    }

    pub fn now_ms(&self) -> Millis {
        self.clock.elapsed_ms()
    }

    fn push(&mut self, at_ms: Millis, event: Event) {
        self.seq += 1;
        self.queue.push(Reverse((at_ms, self.seq)));
        self.events.insert(self.seq, (at_ms, event));
    }

    /// Puts `send` on the wire at `at_ms` (virtual ms since the start).
    pub fn send(&mut self, at_ms: Millis, send: Send) {
        let id = send.id;
        let arrive = at_ms + send.network_ms;
        let lost = send.lose_request;
        if let Some(deadline) = send.deadline_ms {
            self.waiting.insert(id, at_ms);
            // A reply at exactly the deadline is in time; the silence is known just after.
            self.push(at_ms + deadline + 1, Event::Deadline(id));
        }
        self.inflight.insert(
            id,
            InFlight {
                send,
                sent_ms: at_ms,
                attempt: None,
                called_ms: 0,
                reply: None,
            },
        );
        if lost {
            self.inflight.remove(&id);
        } else {
            self.push(arrive, Event::Arrive(id));
        }
    }

    /// Runs the sweeper at `at_ms`.
    pub fn sweep_at(&mut self, at_ms: Millis, batch: u32, max_batches: u32) {
        self.push(at_ms, Event::Sweep { batch, max_batches });
    }

    /// The time of the next event, if any.
    pub fn peek_ms(&self) -> Option<Millis> {
        self.queue.peek().map(|Reverse((t, _))| *t)
    }

    /// Runs the next event and reports what it did. `None` when nothing is scheduled.
    pub fn step(&mut self, out: &mut Vec<Observed>) -> Result<bool, EngineError> {
        let Some(Reverse((at_ms, seq))) = self.queue.pop() else {
            return Ok(false);
        };
        let Some((_, event)) = self.events.remove(&seq) else {
            return Ok(true);
        };
        self.clock.set_ms(crate::clock::VIRTUAL_EPOCH_MS + at_ms);
        match event {
            Event::Arrive(id) => self.arrive(id, at_ms, out)?,
            Event::CallCarrier(id) => self.call_carrier(id, at_ms, out),
            Event::Finish(id) => self.finish(id, at_ms, out)?,
            Event::Reply(id, response) => {
                if let Some(f) = self.inflight.remove(&id) {
                    let listening =
                        f.send.deadline_ms.is_none() || self.waiting.remove(&id).is_some();
                    if listening {
                        out.push(Observed::Replied {
                            id,
                            sent_ms: f.sent_ms,
                            at_ms,
                            response,
                        });
                    }
                }
            }
            Event::Deadline(id) => {
                if let Some(sent_ms) = self.waiting.remove(&id) {
                    out.push(Observed::TimedOut { id, sent_ms, at_ms });
                }
            }
            Event::Sweep { batch, max_batches } => {
                let mut purged = Vec::new();
                self.engine.sweep_collect(batch, max_batches, &mut purged)?;
                out.push(Observed::Swept { at_ms, purged });
            }
        }
        Ok(true)
    }

    fn answer(&mut self, id: u64, at_ms: Millis, response: Response, out: &mut Vec<Observed>) {
        out.push(Observed::Answered {
            id,
            at_ms,
            response: response.clone(),
        });
        match self.inflight.get(&id) {
            Some(f) if !f.send.lose_reply => {
                let back = at_ms + f.send.network_ms;
                self.push(back, Event::Reply(id, response));
            }
            _ => {
                self.inflight.remove(&id);
            }
        }
    }

    fn arrive(
        &mut self,
        id: u64,
        at_ms: Millis,
        out: &mut Vec<Observed>,
    ) -> Result<(), EngineError> {
        out.push(Observed::Arrived { id, at_ms });
        let Some(f) = self.inflight.get(&id) else {
            return Ok(());
        };
        let request = f.send.request.clone();
        match self.engine.begin(&request)? {
            Begun::Answered(r) => self.answer(id, at_ms, r, out),
            Begun::Owned(attempt) => {
                out.push(Observed::Claimed {
                    id,
                    at_ms,
                    took_over: attempt.took_over,
                });
                let f = self.inflight.get_mut(&id).expect("checked above");
                let (die, processing) = (f.send.die, f.send.processing_ms);
                f.attempt = Some(attempt);
                if die == Some(DiePoint::AfterTxn1) {
                    let at = at_ms + processing;
                    self.inflight.remove(&id);
                    out.push(Observed::Died {
                        id,
                        at_ms: at,
                        point: DiePoint::AfterTxn1,
                    });
                } else {
                    self.push(at_ms + processing, Event::CallCarrier(id));
                }
            }
        }
        Ok(())
    }

    fn call_carrier(&mut self, id: u64, at_ms: Millis, out: &mut Vec<Observed>) {
        let Some(f) = self.inflight.get_mut(&id) else {
            return;
        };
        let Some(attempt) = f.attempt.as_ref() else {
            return;
        };
        let mut reply = self.engine.call_carrier(attempt);
        // A hung call keeps its hang: the override stands for the carrier's ordinary latency.
        if let Some(ms) = f.send.carrier_latency_ms
            && !reply.hung
        {
            reply.latency_ms = ms;
        }
        // The caller stops listening at its timeout; a later answer is never seen.
        let timeout = self.engine.config().carrier_timeout_ms;
        let heard_ms = at_ms + reply.latency_ms.min(timeout);
        out.push(Observed::CarrierAnswered {
            id,
            called_ms: at_ms,
            at_ms: at_ms + reply.latency_ms,
            reply: reply.clone(),
        });
        f.called_ms = at_ms;
        let finish_ms = f.send.finish_ms;
        f.reply = Some(reply);
        self.push(heard_ms + finish_ms, Event::Finish(id));
    }

    fn finish(
        &mut self,
        id: u64,
        at_ms: Millis,
        out: &mut Vec<Observed>,
    ) -> Result<(), EngineError> {
        let Some(f) = self.inflight.get(&id) else {
            return Ok(());
        };
        let (Some(attempt), Some(reply)) = (f.attempt.clone(), f.reply.clone()) else {
            return Ok(());
        };
        let die = f.send.die;
        match self.engine.finish(&attempt, &reply, die)? {
            Finished::Answered(r) => self.answer(id, at_ms, r, out),
            Finished::Died => {
                self.inflight.remove(&id);
                out.push(Observed::Died {
                    id,
                    at_ms,
                    point: die.unwrap_or(DiePoint::InsideTxn2),
                });
            }
        }
        Ok(())
    }
}

/// Whether a carrier reply replayed an earlier label.
pub fn carrier_replayed(reply: &CarrierReply) -> bool {
    matches!(reply.result, CarrierResult::Label { replayed: true, .. })
}
