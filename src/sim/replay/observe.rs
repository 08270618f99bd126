//! What the replicate makes of each thing the driver reports: the server's side of every
//! request (claims, takeovers, carrier purchases, crashes, answers, the sweeper's purges)
//! counted into the tallies with the weight of the intent behind it, and the client's side
//! (a reply, a deadline passed) handed to the client state machine.

use super::candidates::Arrival;
use super::client::Replay;
use crate::carrier::{CarrierReply, CarrierResult};
use crate::clock::Millis;
use crate::engine::{DiePoint, Outcome, RecordPlacement, Response};
use crate::sim::flow::Observed;

fn hash64(text: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    text.hash(&mut h);
    h.finish()
}

impl Replay<'_> {
    pub(super) fn observe(&mut self, o: Observed) {
        match o {
            Observed::Arrived { id, at_ms } => self.arrived(id, at_ms),
            Observed::Claimed { id, took_over, .. } => self.claimed(id, took_over),
            Observed::CarrierAnswered { id, reply, .. } => self.carrier_answered(id, &reply),
            Observed::Died { id, point, .. } => self.died(id, point),
            Observed::Answered {
                id,
                response,
                at_ms,
            } => self.answered(id, at_ms, &response),
            Observed::TimedOut { id, sent_ms, at_ms } => self.timed_out(id, sent_ms, at_ms),
            Observed::Replied {
                id,
                response,
                at_ms,
                ..
            } => self.replied(id, &response, at_ms),
            Observed::Swept { purged, .. } => self.swept(purged),
        }
    }

    /// A request reached the engine.
    fn arrived(&mut self, id: u64, at_ms: Millis) {
        let Some(info) = self.sends.get_mut(&id) else {
            return;
        };
        let base_w = self
            .intents
            .get(&info.intent)
            .map_or(info.weight, |i| i.base_weight);
        info.event = Some(self.evidence.arrived(Arrival {
            record: &info.record,
            parcel: (info.caller, info.order_id),
            at: at_ms,
            first_sent: info.first_sent_ms,
            retry: info.attempt > 1,
            w: info.weight,
            base_w,
        }));
        // A retry that reaches the engine when its record is gone (purged, or never
        // written because the request was lost) more than one retention after the first
        // attempt: every such retry, not only the first of each call.
        if info.attempt > 1
            && at_ms - info.first_sent_ms > self.cfg.engine.retention_ms
            && !self.live.contains_key(&info.record)
        {
            let w = info.weight;
            self.t.late.add(w);
        }
    }

    /// Txn 1 claimed the key, afresh or by taking over an expired lease.
    fn claimed(&mut self, id: u64, took_over: bool) {
        let Some(info) = self.sends.get_mut(&id) else {
            return;
        };
        info.claimed = true;
        if let Some(ev) = info.event {
            self.evidence.claimed(ev);
        }
        let record = info.record.clone();
        let w = info.weight;
        let intent = info.intent;
        let first = info.attempt == 1;
        let runs = self.running.entry(record.clone()).or_insert(0);
        if took_over {
            self.t.takeovers.add(w);
            if *runs > 0 {
                self.t.takeovers_running.add(w);
            }
        }
        *runs += 1;
        if !took_over {
            if self.purged.remove(&record) {
                self.t.purged_key_requests.add(w);
            }
            // A first attempt's record is there whatever the retry delay drawn, so it stands for
            // what the intent's stratum does; a record a retry creates (after a loss, or after
            // the purge) is there because of the delay drawn, so it carries the delay's
            // likelihood ratio too.
            let weight = match self.intents.get(&intent) {
                Some(i) if first => i.base_weight,
                _ => w,
            };
            if self.live.insert(record, weight).is_none() {
                self.live_weight += weight;
                self.live_weight_sq += weight * weight;
            }
        }
    }

    /// The carrier answered; a label it sold (not replayed) is counted per parcel.
    fn carrier_answered(&mut self, id: u64, reply: &CarrierReply) {
        let CarrierResult::Label { label, replayed } = &reply.result else {
            return;
        };
        let Some(info) = self.sends.get_mut(&id) else {
            return;
        };
        info.bought_label = true;
        if let Some(ev) = info.event {
            self.evidence.labelled(ev);
        }
        if *replayed {
            return;
        }
        let (caller, order_id, w) = (info.caller, info.order_id, info.weight);
        let n = self.sold.entry((caller, order_id)).or_insert(0);
        *n += 1;
        if *n == 2 {
            self.t.parcels_two_labels.add(w);
        }
        if *n >= 2 {
            self.t.duplicates.add(w);
        }
        self.purchases.push((label.label_id.clone(), w));
    }

    /// The attempt's process was killed at `point`.
    fn died(&mut self, id: u64, point: DiePoint) {
        let Some(info) = self.sends.get_mut(&id) else {
            return;
        };
        info.server_done = true;
        if let Some(ev) = info.event {
            self.evidence.died(ev, self.cfg.engine.lease_ms);
        }
        if info.claimed
            && let Some(r) = self.running.get_mut(&info.record)
        {
            *r = r.saturating_sub(1);
        }
        if point == DiePoint::InsideTxn2 && info.bought_label {
            self.crashed_in_txn2
                .push((info.record.clone(), info.weight));
        }
        // With the label and the record in separate stores, a death between the two
        // writes leaves a label row whose key never completed.
        if point == DiePoint::InsideTxn2
            && info.bought_label
            && self.cfg.engine.record_placement == RecordPlacement::SeparateStore
        {
            let w = info.weight;
            self.t.labels_without_completed_key.add(w);
        }
        // Its caller hears nothing and retries when its deadline passes.
        self.settle(id);
    }

    /// The server sent its answer: counted by status and code, and checked against the
    /// record's first body (replays byte-identical) and creator (no replay to another caller).
    fn answered(&mut self, id: u64, at_ms: Millis, response: &Response) {
        let Some(info) = self.sends.get_mut(&id) else {
            return;
        };
        info.server_done = true;
        if let Some(ev) = info.event {
            self.evidence.answered(
                ev,
                at_ms,
                response.replayed,
                response.outcome == Outcome::CarrierTimeout,
            );
        }
        if info.claimed {
            info.claimed = false;
            if let Some(r) = self.running.get_mut(&info.record) {
                *r = r.saturating_sub(1);
            }
        }
        let record = info.record.clone();
        let (w, caller) = (info.weight, info.caller);
        self.settle(id);
        self.t.replayed_requests += 1;
        self.t
            .outcomes
            .entry((response.status, response.outcome, response.code.clone()))
            .or_default()
            .add(w);
        if response.key_was_purged {
            self.t.purged_key_flags.add(w);
        }
        if response.status == 201 {
            let h = hash64(&response.body);
            match self.first_body.get(&record) {
                Some(first) if *first != h && response.replayed => {
                    self.t.invariant_replays_identical = false;
                }
                Some(_) => {}
                None => {
                    self.first_body.insert(record.clone(), h);
                }
            }
            if response.outcome == Outcome::Created {
                self.creator.insert(record, caller);
            } else if response.replayed && self.creator.get(&record).is_some_and(|c| *c != caller) {
                self.t.cross_caller.add(w);
            }
        }
    }

    /// The client's deadline passed with no reply: counted, and the client retries.
    fn timed_out(&mut self, id: u64, sent_ms: Millis, at_ms: Millis) {
        let Some(info) = self.sends.get_mut(&id) else {
            return;
        };
        info.client_done = true;
        let intent_id = info.intent;
        let first = info.attempt == 1;
        self.settle(id);
        let Some(intent) = self.intents.get(&intent_id) else {
            return;
        };
        let w = if first {
            intent.base_weight
        } else {
            intent.weight
        };
        self.t.timed_out.add(w);
        if first {
            self.t.timed_out_first.add(w);
        }
        self.retry_after_silence(intent_id, sent_ms, at_ms);
    }

    /// The client heard the answer.
    fn replied(&mut self, id: u64, response: &Response, at_ms: Millis) {
        self.t.request_log.replied(id, response);
        let Some(info) = self.sends.get_mut(&id) else {
            return;
        };
        info.client_done = true;
        let intent_id = info.intent;
        self.settle(id);
        self.after_reply(intent_id, response, at_ms);
    }

    /// The sweeper purged these (caller column, key) records.
    fn swept(&mut self, purged: Vec<(String, String)>) {
        for (caller, key) in purged {
            let record = format!("{caller}\u{0}{key}");
            if let Some(w) = self.live.remove(&record) {
                self.live_weight -= w;
                self.live_weight_sq -= w * w;
            }
            self.purged.insert(record);
        }
    }

    /// Records in the store, scaled to full traffic: the live records' weights summed.
    pub(super) fn estimated_keys(&self) -> f64 {
        self.live_weight.max(0.0)
    }
}
