//! Every retention the decision weighs, counted from the one replay.
//!
//! A client cannot tell a replayed 201 from a first run's, so the requests that reach the
//! server (their times, keys, attempts and weights) are the same at any retention that
//! outlasts a carrier call and a lease: only what the server does with a request whose record
//! is gone depends on the retention. The replay therefore logs each request that reached the
//! engine (when, for which record and parcel, what the engine did with it, how its attempt
//! ended), and at the end replays the log once per candidate retention through the two windows
//! that decide a duplicate: the record's life in our store (its retention from the completion,
//! then the sweeper's next pass, never while a lease is live) and the carrier's memory of the
//! derived key (its window from the sale). A request that finds its record gone at a candidate
//! creates it anew and calls the carrier, which sells a second label once its window has passed;
//! a request the replay created afresh finds the record still there at a longer candidate and
//! is answered the saved response. Crashes, takeovers, chained retries and re-sends after a 409
//! are in the log as they happened, so every cause of a duplicate the replay sees is counted at
//! every candidate, from the same sample (common random numbers: candidates differ only by
//! their retention, never by sampling noise of their own).
//!
//! Two simplifications, both second order (docs/simulate.md): a carrier call that exists only
//! at a candidate completes at once and succeeds, and a request refused at the replayed
//! retention (409, 422) is refused at every candidate. At the replayed retention the log
//! reproduces the replay's own counts (`tests/it/sim.rs`).

use super::tallies::CandidateTally;
use crate::clock::Millis;
use crate::sim::Map;
use crate::sweeper::Sweeper;

/// One retention to count, with the sweeper the store would run at it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    pub retention_ms: Millis,
    pub sweeper: Sweeper,
}

/// What the engine did with a request when it arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Claim {
    /// Not claimed: answered from the record (a replay) or refused (409, 422, 400).
    No { replayed: bool },
    /// Txn 1 claimed the key (a new record, or a takeover of an expired lease).
    Yes,
}

/// How a claimed attempt ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    /// Still running when the replay stopped.
    Open,
    /// Txn 2 saved a response (201, or the carrier's refusal) at this time.
    Completed(Millis),
    /// The carrier timed out: the lease was handed back at this time.
    HandedBack(Millis),
    /// The attempt was killed: its lease runs out at this time.
    Died { lease_until: Millis },
}

#[derive(Debug, Clone, Copy)]
struct Event {
    record: u32,
    parcel: u32,
    at: Millis,
    first_sent: Millis,
    retry: bool,
    /// The send's weight, and its intent's without the retry delay's likelihood ratio (what a
    /// record a first attempt creates stands for).
    w: f64,
    base_w: f64,
    claim: Claim,
    /// The carrier answered with a label (sold or replayed by key).
    labelled: bool,
    end: End,
}

/// The log of every request that reached the engine, kept for [`Evidence::count`].
#[derive(Debug, Default)]
pub(super) struct Evidence {
    records: Map<String, u32>,
    parcels: Map<(u32, i64), u32>,
    events: Vec<Event>,
}

/// What a request brings to the log when it arrives.
pub(super) struct Arrival<'a> {
    pub record: &'a str,
    pub parcel: (u32, i64),
    pub at: Millis,
    pub first_sent: Millis,
    pub retry: bool,
    pub w: f64,
    pub base_w: f64,
}

/// The replay's fixed rules the log is replayed under.
pub(super) struct Rules {
    pub sweep_every: Millis,
    /// After the arrivals stop the replay sweeps just before each event: a record leaves as
    /// soon as it may.
    pub arrival_end: Millis,
    pub lease_ms: Millis,
    pub carrier_window_ms: Millis,
    /// The carrier is given the derived key (else every call it answers is a sale).
    pub carrier_keys: bool,
}

impl Evidence {
    /// Logs an arrival; returns its index for the later marks.
    pub(super) fn arrived(&mut self, a: Arrival<'_>) -> usize {
        let next = self.records.len() as u32;
        let record = match self.records.get(a.record) {
            Some(&id) => id,
            None => {
                self.records.insert(a.record.to_string(), next);
                next
            }
        };
        let next = self.parcels.len() as u32;
        let parcel = *self.parcels.entry(a.parcel).or_insert(next);
        self.events.push(Event {
            record,
            parcel,
            at: a.at,
            first_sent: a.first_sent,
            retry: a.retry,
            w: a.w,
            base_w: a.base_w,
            claim: Claim::No { replayed: false },
            labelled: false,
            end: End::Open,
        });
        self.events.len() - 1
    }

    pub(super) fn claimed(&mut self, i: usize) {
        if let Some(e) = self.events.get_mut(i) {
            e.claim = Claim::Yes;
        }
    }

    pub(super) fn labelled(&mut self, i: usize) {
        if let Some(e) = self.events.get_mut(i) {
            e.labelled = true;
        }
    }

    pub(super) fn died(&mut self, i: usize, lease_ms: Millis) {
        if let Some(e) = self.events.get_mut(i)
            && e.claim == Claim::Yes
        {
            e.end = End::Died {
                lease_until: e.at + lease_ms,
            };
        }
    }

    /// The server's answer: for a claim, how the attempt left the record; otherwise whether it
    /// was the record's saved response.
    pub(super) fn answered(&mut self, i: usize, at: Millis, replayed: bool, handed_back: bool) {
        let Some(e) = self.events.get_mut(i) else {
            return;
        };
        match e.claim {
            Claim::Yes if handed_back => e.end = End::HandedBack(at),
            Claim::Yes => e.end = End::Completed(at),
            Claim::No { .. } => e.claim = Claim::No { replayed },
        }
    }

    /// Every candidate counted over the log.
    pub(super) fn count(&self, candidates: &[Candidate], rules: &Rules) -> Vec<CandidateTally> {
        // A stable sort by record keeps each record's requests in the order they arrived.
        let mut order: Vec<u32> = (0..self.events.len() as u32).collect();
        order.sort_by_key(|&i| self.events[i as usize].record);
        let mut sales = vec![0u32; self.parcels.len()];
        candidates
            .iter()
            .map(|c| {
                sales.iter_mut().for_each(|s| *s = 0);
                let mut out = CandidateTally {
                    retention_s: c.retention_ms as f64 / 1000.0,
                    ..CandidateTally::default()
                };
                for run in order.chunk_by(|&a, &b| {
                    self.events[a as usize].record == self.events[b as usize].record
                }) {
                    let events = run.iter().map(|&i| &self.events[i as usize]);
                    count_record(events, c, rules, &mut sales, &mut out);
                }
                out
            })
            .collect()
    }
}

/// One record's life at a candidate, as the store and the carrier would live it.
#[derive(Debug, Clone, Copy)]
struct Record {
    created: Millis,
    /// Weight the record stands for.
    w: f64,
    complete: bool,
    expires: Millis,
    lease_until: Millis,
}

impl Record {
    /// When the sweeper removes it: the first sweep once it has expired (a partition: once
    /// its whole range has) and no live lease holds it.
    fn gone_at(&self, c: &Candidate, rules: &Rules) -> Millis {
        let expired = match c.sweeper {
            Sweeper::Delete => self.expires,
            Sweeper::Partitions { period_ms } => {
                let q = period_ms.max(1);
                (self.expires.div_euclid(q) + 1) * q
            }
        };
        let ready = if self.complete {
            expired
        } else {
            expired.max(self.lease_until)
        };
        if ready >= rules.arrival_end {
            ready + 1
        } else {
            let p = rules.sweep_every.max(1);
            (ready + p - 1).div_euclid(p) * p
        }
    }
}

fn count_record<'a>(
    events: impl Iterator<Item = &'a Event>,
    c: &Candidate,
    rules: &Rules,
    sales: &mut [u32],
    out: &mut CandidateTally,
) {
    let r = c.retention_ms;
    let mut record: Option<Record> = None;
    let mut sold_at: Option<Millis> = None;
    let close = |rec: &Record, out: &mut CandidateTally| {
        let life_s = (rec.gone_at(c, rules) - rec.created) as f64 / 1000.0;
        out.record_seconds += rec.w * life_s;
        out.record_seconds_sq += (rec.w * life_s).powi(2);
    };
    for e in events {
        if let Some(rec) = record
            && e.at >= rec.gone_at(c, rules)
        {
            close(&rec, out);
            record = None;
        }
        if e.retry && record.is_none() && e.at - e.first_sent > r {
            out.late.add(e.w);
        }
        let lease_live = record.is_some_and(|rec| !rec.complete && e.at < rec.lease_until);
        let answered_from_record = record.is_some_and(|rec| rec.complete);
        let calls = match e.claim {
            Claim::Yes => !answered_from_record && !lease_live,
            Claim::No { replayed } => replayed && !answered_from_record && !lease_live,
        };
        if !calls {
            continue;
        }
        let rec = record.get_or_insert(Record {
            created: e.at,
            w: if e.retry { e.w } else { e.base_w },
            complete: false,
            expires: e.at + r,
            lease_until: e.at + rules.lease_ms,
        });
        // A call the replay made reached the carrier only if it answered with a label; one
        // that exists only at this candidate is taken to.
        let reached = match e.claim {
            Claim::Yes => e.labelled,
            Claim::No { .. } => true,
        };
        if reached {
            let remembered =
                rules.carrier_keys && sold_at.is_some_and(|s| e.at < s + rules.carrier_window_ms);
            if !remembered {
                sold_at = Some(e.at);
                let n = &mut sales[e.parcel as usize];
                *n += 1;
                if *n >= 2 {
                    out.duplicates.add(e.w);
                }
            }
        }
        match (e.claim, e.end) {
            (Claim::Yes, End::HandedBack(t)) => {
                rec.complete = false;
                rec.lease_until = t;
            }
            (Claim::Yes, End::Died { lease_until }) => {
                rec.complete = false;
                rec.lease_until = lease_until;
            }
            (Claim::Yes, End::Completed(t)) => {
                rec.complete = true;
                rec.expires = t + r;
            }
            (_, _) => {
                rec.complete = true;
                rec.expires = e.at + r;
            }
        }
    }
    if let Some(rec) = record {
        close(&rec, out);
    }
}
