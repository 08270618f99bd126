//! The clients of one replicate, and the replicate's state ([`Replay`]). An intent is drawn
//! into a stratum (ordinary, or its first attempt timed out or crashed) and sent; a client
//! that heard nothing by its deadline retries after a delay from the late-retry distribution
//! (tilted towards the tail for timed-out intents, each draw weighted by its likelihood
//! ratio), one answered 409 or 503 retries with exponential backoff and full jitter, up to
//! `max_attempts` attempts in all.

use super::candidates::Evidence;
use super::config::{KeyPolicy, SimConfig};
use super::tallies::Tallies;
use crate::clock::{Millis, VirtualClock};
use crate::engine::{Engine, OrderSpace, Request, Response};
use crate::sim::flow::{Flow, Send};
use crate::sim::request_log::RequestLog;
use crate::sim::{Map, Set};
use crate::traffic::RetryDelay;
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng};

/// Which part of the traffic an intent was drawn from, each replayed at its own sample.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Stratum {
    Ordinary = 0,
    TimedOut = 1,
}

/// One parcel to label, from its first attempt until it is labelled or given up on.
pub(super) struct Intent {
    pub(super) stratum: Stratum,
    caller: u32,
    order_id: i64,
    /// The key every attempt carries; `None` under [`KeyPolicy::NewPerAttempt`].
    key: Option<String>,
    /// How many intents this one stands for.
    pub(super) weight: f64,
    /// The same without the likelihood ratio of the tilted delay: what a first-attempt
    /// timeout, which does not depend on the delay, stands for.
    pub(super) base_weight: f64,
    attempts: u32,
    first_sent_ms: Millis,
    /// The attempt's retry delay from the late-retry distribution (timed-out intents).
    retry_delay_ms: Millis,
}

/// How a first attempt goes, decided by its stratum; later attempts draw theirs.
#[derive(Debug, Clone, Copy)]
enum Fate {
    /// The carrier answers within the deadline.
    InTime,
    /// The carrier's latency outlasts the deadline.
    Slow,
    /// The network loses the request (`ran` false) or the reply (`ran` true).
    Lost { ran: bool },
    /// In time, but the attempt is killed at the crash point.
    Crash,
    /// Whatever the carrier and the network do (retries).
    Drawn,
}

/// What is known about one request on the wire, kept until both the client and the server are
/// done with it (a slow attempt runs on after its client gave up).
pub(super) struct SendInfo {
    pub(super) intent: u64,
    /// The record's identity in the store: scoped caller column + NUL + key.
    pub(super) record: String,
    pub(super) caller: u32,
    pub(super) order_id: i64,
    pub(super) weight: f64,
    pub(super) attempt: u32,
    pub(super) first_sent_ms: Millis,
    pub(super) claimed: bool,
    pub(super) bought_label: bool,
    pub(super) client_done: bool,
    pub(super) server_done: bool,
    /// Its entry in [`Replay::evidence`], once it reached the engine.
    pub(super) event: Option<usize>,
}

/// The first order number of every tenant: tenants number their orders alike, so with global
/// keys their derived keys meet.
const FIRST_ORDER_ID: i64 = 100_000_001;

/// The simulation of one replicate: the driver, the clients' state and the tallies.
pub(super) struct Replay<'a> {
    pub(super) cfg: &'a SimConfig,
    dist: &'a RetryDelay,
    pub(super) flow: Flow,
    pub(super) rng: StdRng,
    pub(super) s_o: f64,
    pub(super) s_t: f64,
    /// Share of first attempts that time out, of calls the network loses, and of calls whose
    /// carrier latency alone outlasts the deadline.
    p_first_timeout: f64,
    /// Share of first attempts that time out or crash: the boosted stratum.
    pub(super) p_first_bad: f64,
    network_loss: f64,
    /// Of the losses, the share that lost the reply ([`SimConfig::loss_done_fraction`]).
    loss_done: f64,
    p_slow: f64,
    /// Tilted retry-delay draw: probability of drawing from the tail, where it starts, its mass.
    tilt_q: f64,
    tail_from_s: f64,
    tail_mass: f64,
    pub(super) intents: Map<u64, Intent>,
    pub(super) sends: Map<u64, SendInfo>,
    next_send: u64,
    /// The next order number, per stratum in the shared order space, of the next group of
    /// namesakes in per-tenant ones (see [`Replay::arrive`]).
    next_order: [i64; 2],
    /// How many orders share each order number: every tenant's under per-tenant order spaces
    /// (the sampling unit is then the group of namesakes), else 1.
    namesakes: u32,
    next_intent: u64,
    /// Live records with the weight each stands for, mirrored from claims and the sweeper's
    /// purged keys, so the weighted store size needs no query.
    pub(super) live: Map<String, f64>,
    /// Σw and Σw² over `live`: the store's estimate and its Poisson variance.
    pub(super) live_weight: f64,
    pub(super) live_weight_sq: f64,
    /// Every record the sweeper purged and no request has claimed again: the exact set the
    /// engine's Bloom filter approximates.
    pub(super) purged: Set<String>,
    pub(super) first_body: Map<String, u64>,
    pub(super) creator: Map<String, u32>,
    pub(super) running: Map<String, u32>,
    /// Labels the carrier sold per (caller, order): the seed's "more than one label per parcel".
    pub(super) sold: Map<(u32, i64), u32>,
    /// Label ids the carrier sold, with the weight of the intent that bought them.
    pub(super) purchases: Vec<(String, f64)>,
    /// Records whose attempt died inside txn 2 after buying a label, to read back from the
    /// store before anything else happens (see [`Replay::inspect_crashes`]).
    pub(super) crashed_in_txn2: Vec<(String, f64)>,
    /// The label ids that such records were left completed with, and their weights; checked
    /// against the labels table at the end of the run.
    pub(super) completed_at_crash: Vec<(String, f64)>,
    /// Every request that reached the engine, for counting each candidate retention.
    pub(super) evidence: Evidence,
    pub(super) t: Tallies,
}

impl<'a> Replay<'a> {
    /// A replicate about to start: `engine` on a virtual `clock` at zero, the random draws
    /// seeded with `seed`, the retry delays of timed-out intents tilted towards the tail
    /// unless every intent is replayed.
    pub(super) fn new(
        cfg: &'a SimConfig,
        dist: &'a RetryDelay,
        engine: Engine,
        clock: VirtualClock,
        seed: u64,
    ) -> Self {
        let (s_o, s_t) = cfg.fractions();
        // The tail that matters is the part that outlives the shorter of the two windows;
        // tilting from a quarter of it keeps the ratio f/g close to 1 for the draws that count.
        let tail_from_s = (cfg.engine.retention_ms as f64 / 1000.0)
            .min(cfg.carrier.window_ms as f64 / 1000.0)
            .max(1.0)
            / 4.0;
        let tail_mass = dist.survival(tail_from_s);
        let full_fidelity = s_o >= 1.0 && s_t >= 1.0;
        let tilt_q = if !full_fidelity && tail_mass > 0.0 && tail_mass < 0.5 {
            0.5
        } else {
            0.0
        };
        Replay {
            cfg,
            dist,
            flow: Flow::new(engine, clock),
            rng: StdRng::seed_from_u64(seed),
            s_o,
            s_t,
            p_first_timeout: cfg.p_first_timeout(),
            p_first_bad: cfg.p_first_bad(),
            network_loss: cfg.network_loss(),
            loss_done: cfg.loss_done_fraction(),
            p_slow: cfg.p_slow(),
            tilt_q,
            tail_from_s,
            tail_mass,
            intents: Map::default(),
            sends: Map::default(),
            next_send: 0,
            next_order: [0, 0],
            namesakes: namesakes(cfg),
            next_intent: 0,
            live: Map::default(),
            live_weight: 0.0,
            live_weight_sq: 0.0,
            purged: Set::default(),
            first_body: Map::default(),
            creator: Map::default(),
            running: Map::default(),
            sold: Map::default(),
            purchases: Vec::new(),
            crashed_in_txn2: Vec::new(),
            completed_at_crash: Vec::new(),
            evidence: Evidence::default(),
            t: Tallies {
                invariant_replays_identical: true,
                request_log: RequestLog::new(cfg.request_log),
                ..Tallies::default()
            },
        }
    }

    fn draw_delay(&mut self) -> (Millis, f64) {
        let d = if self.tilt_q > 0.0 && self.rng.random::<f64>() < self.tilt_q {
            let u = 1.0 - self.tail_mass + self.tail_mass * self.rng.random::<f64>();
            self.dist.quantile(u.min(1.0 - 1e-12))
        } else {
            self.dist
                .quantile(self.rng.random::<f64>().min(1.0 - 1e-12))
        };
        // The likelihood ratio f/g of the mixture g = (1 - q) f + q f·1[d > τ] / S(τ).
        let ratio = if self.tilt_q == 0.0 {
            1.0
        } else if d > self.tail_from_s {
            1.0 / ((1.0 - self.tilt_q) + self.tilt_q / self.tail_mass)
        } else {
            1.0 / (1.0 - self.tilt_q)
        };
        ((d * 1000.0).round() as Millis, ratio)
    }

    fn record_of(&mut self, caller: u32, key: &str) -> String {
        let caller = format!("fulfilment-{caller}");
        let scoped = self.flow.engine().scope(&caller).to_string();
        format!("{scoped}\u{0}{key}")
    }

    /// A carrier latency from the part of its distribution within (`slow` false) or beyond
    /// (`slow` true) what the deadline leaves it.
    fn carrier_latency(&mut self, slow: bool) -> Millis {
        let budget = self.cfg.deadline_ms - 2 * self.cfg.network_ms;
        let u: f64 = self.rng.random();
        let latency = &self.cfg.carrier.latency;
        if slow {
            latency
                .quantile_ms(1.0 - self.p_slow + u * self.p_slow)
                .max(budget + 1)
        } else {
            latency.quantile_ms(u * (1.0 - self.p_slow)).min(budget)
        }
    }

    /// Puts the next attempt of `intent_id` on the wire at `at_ms`.
    fn send(&mut self, intent_id: u64, at_ms: Millis, fate: Fate) {
        let Some(mut intent) = self.intents.remove(&intent_id) else {
            return;
        };
        intent.attempts += 1;
        if intent.attempts == 1 {
            intent.first_sent_ms = at_ms;
        } else {
            self.t.retries.add(intent.weight);
        }
        let key = match &intent.key {
            Some(k) => k.clone(),
            None => random_key(&mut self.rng),
        };
        let body = format!(
            r#"{{"order_id":{},"parcel_no":1,"label_version":1,"weight_g":1450,"service":"ground"}}"#,
            intent.order_id
        );
        let caller = format!("fulfilment-{}", intent.caller);
        let record = self.record_of(intent.caller, &key);
        self.next_send += 1;
        let id = self.next_send;
        let mut send = Send::new(id, Request::create_label(&caller, Some(&key), &body));
        self.t
            .request_log
            .sent(id, at_ms, &caller, &key, intent.weight);
        send.network_ms = self.cfg.network_ms;
        send.deadline_ms = Some(self.cfg.deadline_ms);
        let fate = match fate {
            Fate::Drawn if self.rng.random::<f64>() < self.network_loss => Fate::Lost {
                ran: self.rng.random::<f64>() < self.loss_done,
            },
            f => f,
        };
        match fate {
            Fate::InTime | Fate::Crash => {
                send.carrier_latency_ms = Some(self.carrier_latency(false))
            }
            Fate::Slow => send.carrier_latency_ms = Some(self.carrier_latency(true)),
            Fate::Lost { ran } => {
                send.lose_request = !ran;
                send.lose_reply = ran;
            }
            Fate::Drawn => {}
        }
        // A first attempt's crash is decided by its stratum; later attempts draw theirs.
        let crash = match fate {
            Fate::Crash => true,
            _ if intent.attempts == 1 => false,
            _ => {
                self.cfg.crash_fraction > 0.0 && self.rng.random::<f64>() < self.cfg.crash_fraction
            }
        };
        if crash {
            send.die = Some(self.cfg.crash_point);
        }
        self.sends.insert(
            id,
            SendInfo {
                intent: intent_id,
                record,
                caller: intent.caller,
                order_id: intent.order_id,
                weight: intent.weight,
                attempt: intent.attempts,
                first_sent_ms: intent.first_sent_ms,
                claimed: false,
                bought_label: false,
                client_done: false,
                // A lost request never reaches the server.
                server_done: send.lose_request,
                event: None,
            },
        );
        self.intents.insert(intent_id, intent);
        self.flow.send(at_ms, send);
    }

    /// Forgets a request once neither its client nor the server has anything more to say.
    pub(super) fn settle(&mut self, id: u64) {
        if self
            .sends
            .get(&id)
            .is_some_and(|i| i.client_done && i.server_done)
        {
            self.sends.remove(&id);
        }
    }

    /// A client that heard nothing by its deadline retries after a delay from the late-retry
    /// distribution, counted from its first attempt for the first retry and from the attempt
    /// that went silent after that.
    pub(super) fn retry_after_silence(&mut self, intent_id: u64, sent_ms: Millis, now_ms: Millis) {
        let Some(intent) = self.intents.get(&intent_id) else {
            return;
        };
        if intent.attempts >= self.cfg.max_attempts {
            let w = intent.weight;
            self.t.unlabelled.add(w);
            self.intents.remove(&intent_id);
            return;
        }
        let (from_ms, delay) = if intent.attempts == 1 && intent.stratum == Stratum::TimedOut {
            (intent.first_sent_ms, intent.retry_delay_ms)
        } else {
            let d = self
                .dist
                .quantile(self.rng.random::<f64>().min(1.0 - 1e-12));
            (sent_ms, (d * 1000.0) as Millis)
        };
        self.send(intent_id, (from_ms + delay).max(now_ms), Fate::Drawn);
    }

    /// The next sampled arrival at `now_ms`: one intent, or under per-tenant order spaces one
    /// order number for every tenant (see [`Replay::arrive_namesakes`]). Returns how many
    /// intents it started.
    pub(super) fn arrive(&mut self, now_ms: Millis) -> u64 {
        if self.namesakes > 1 {
            return self.arrive_namesakes(now_ms);
        }
        let timed_out_share = {
            let to = self.p_first_bad * self.s_t;
            let or = (1.0 - self.p_first_bad) * self.s_o;
            if to + or > 0.0 { to / (to + or) } else { 0.0 }
        };
        let timed_out = self.rng.random::<f64>() < timed_out_share;
        let caller = self.rng.random::<u32>() % self.cfg.callers;
        // One counter numbers every caller's orders (the seed's shared order space), so no
        // two orders share an id; odd ids for the timed-out stratum, even for the ordinary.
        let stratum_index = usize::from(timed_out);
        let n = &mut self.next_order[stratum_index];
        let order_id = FIRST_ORDER_ID + 2 * *n + stratum_index as i64;
        *n += 1;
        let sampled_at = if timed_out { self.s_t } else { self.s_o };
        self.start_intent(now_ms, caller, order_id, timed_out, 1.0 / sampled_at);
        1
    }

    /// Tenants that number their own orders each have an order `n`: the `callers` namesakes
    /// share a derived key and, with global keys, a record. At full traffic each namesake's
    /// first attempt times out independently of the others, so the sampling unit is the group
    /// of namesakes, not the intent: a group is bad (boosted, sampled at `s_t`) when any
    /// member's first attempt is, with probability `q = 1 − (1 − p)^C`, and the members' fates
    /// are then drawn given that one is bad: the first bad member `j` with probability
    /// `(1 − p)^j p / q`, those before it good, those after it bad with probability `p` each.
    /// Every member stands for the group's `1/s`. Drawing members per stratum instead (the
    /// k-th timed-out order of one tenant meeting the k-th of another) made namesakes time out
    /// together, so one late retry re-created the record the others' late retries then found.
    ///
    /// The members come one lease apart, in a random order of tenants: near enough in time to
    /// meet (well inside any retention), far enough apart that one namesake's first attempt does
    /// not hold the lease when the next arrives, which tenants whose order counters merely
    /// coincide would not see either.
    fn arrive_namesakes(&mut self, now_ms: Millis) -> u64 {
        let callers = self.namesakes;
        let p = self.p_first_bad;
        let q = group_bad_probability(p, callers);
        let bad_share = {
            let bad = q * self.s_t;
            let good = (1.0 - q) * self.s_o;
            if bad + good > 0.0 {
                bad / (bad + good)
            } else {
                0.0
            }
        };
        let bad_group = self.rng.random::<f64>() < bad_share;
        let weight = if bad_group {
            1.0 / self.s_t
        } else {
            1.0 / self.s_o
        };
        let first_bad = if bad_group {
            first_bad_member(p, callers, self.rng.random::<f64>())
        } else {
            callers
        };
        let order_id = FIRST_ORDER_ID + self.next_order[0];
        self.next_order[0] += 1;
        let first_caller = self.rng.random::<u32>() % callers;
        for member in 0..callers {
            let timed_out = match member.cmp(&first_bad) {
                std::cmp::Ordering::Less => false,
                std::cmp::Ordering::Equal => true,
                std::cmp::Ordering::Greater => self.rng.random::<f64>() < p,
            };
            let caller = (first_caller + member) % callers;
            let at_ms = now_ms + Millis::from(member) * self.cfg.engine.lease_ms;
            self.start_intent(at_ms, caller, order_id, timed_out, weight);
        }
        u64::from(callers)
    }

    /// Starts an intent of `caller` for `order_id` whose first attempt is sent at `at_ms`,
    /// standing for `base_weight` intents (times the tilted delay's likelihood ratio when the
    /// first attempt times out or crashes).
    fn start_intent(
        &mut self,
        at_ms: Millis,
        caller: u32,
        order_id: i64,
        timed_out: bool,
        base_weight: f64,
    ) {
        let (stratum, weight, retry_delay_ms) = if timed_out {
            let (d, ratio) = self.draw_delay();
            (Stratum::TimedOut, ratio * base_weight, d)
        } else {
            (Stratum::Ordinary, base_weight, 0)
        };
        let key = match self.cfg.key_policy {
            KeyPolicy::Derived => Some(crate::payload::derived_key(
                order_id,
                &self.cfg.engine.payload.key_bytes,
            )),
            KeyPolicy::RandomSaved => Some(random_key(&mut self.rng)),
            KeyPolicy::NewPerAttempt => None,
        };
        self.next_intent += 1;
        let intent_id = self.next_intent;
        self.intents.insert(
            intent_id,
            Intent {
                stratum,
                caller,
                order_id,
                key,
                weight,
                base_weight,
                attempts: 0,
                first_sent_ms: at_ms,
                retry_delay_ms,
            },
        );
        let u = self.rng.random::<f64>() * self.p_first_bad;
        let fate = if !timed_out {
            Fate::InTime
        } else if u < self.network_loss {
            Fate::Lost {
                ran: self.rng.random::<f64>() < self.loss_done,
            }
        } else if u < self.p_first_timeout {
            Fate::Slow
        } else {
            Fate::Crash
        };
        self.send(intent_id, at_ms, fate);
    }

    /// A client that heard back: a 409 or 503 is retried with exponential backoff and full
    /// jitter while attempts remain; any other answer ends the intent, unlabelled unless 201.
    pub(super) fn after_reply(&mut self, intent_id: u64, response: &Response, at_ms: Millis) {
        let Some(intent) = self.intents.get_mut(&intent_id) else {
            return;
        };
        let retryable = matches!(response.status, 409 | 503);
        if retryable && intent.attempts < self.cfg.max_attempts {
            // Exponential backoff with full jitter, and never sooner than the server's
            // retry-after hint: a 409 says when the lease ends, so waiting less only
            // spends an attempt on another 409.
            let cap = self
                .cfg
                .backoff_cap_ms
                .min(self.cfg.backoff_base_ms << intent.attempts.min(20));
            let jitter = (self.rng.random::<f64>() * cap as f64) as Millis;
            let wait = jitter.max(response.retry_after_ms.unwrap_or(0)).max(1);
            self.send(intent_id, at_ms + wait, Fate::Drawn);
        } else {
            if response.status != 201 {
                self.t.unlabelled.add(intent.weight);
            }
            self.intents.remove(&intent_id);
        }
    }
}

/// How many orders share each order number (see [`Replay::arrive_namesakes`]).
pub(super) fn namesakes(cfg: &SimConfig) -> u32 {
    match cfg.engine.order_space {
        OrderSpace::PerTenant => cfg.callers,
        OrderSpace::Shared => 1,
    }
}

/// The share of the arrivals stream the replay samples: intents in the shared order space,
/// groups of namesakes (one per `namesakes` intents) in per-tenant ones.
pub(super) fn sampled_share(cfg: &SimConfig) -> f64 {
    let (s_o, s_t) = cfg.fractions();
    let c = namesakes(cfg);
    let q = group_bad_probability(cfg.p_first_bad(), c);
    ((1.0 - q) * s_o + q * s_t) / f64::from(c)
}

/// The chance that at least one of `members` independent first attempts, each bad with
/// probability `p`, is bad.
fn group_bad_probability(p: f64, members: u32) -> f64 {
    -((-p).ln_1p() * f64::from(members)).exp_m1()
}

/// The index of the first bad member of a group known to hold one, from a uniform `u`: member
/// `j` with probability `(1 − p)^j p / q` (a geometric distribution truncated to the group).
fn first_bad_member(p: f64, members: u32, u: f64) -> u32 {
    let q = group_bad_probability(p, members);
    let mut below = 0.0;
    for j in 0..members {
        below += (1.0 - p).powi(j as i32) * p / q;
        if u < below {
            return j;
        }
    }
    members - 1
}

fn random_key(rng: &mut StdRng) -> String {
    uuid::Builder::from_random_bytes(rng.random::<[u8; 16]>())
        .into_uuid()
        .to_string()
}
