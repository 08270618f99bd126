//! Runs a scenario's scripted timeline (`idemcalc scenario`) through the event driver and reports
//! what each caller got back, what the store and the carrier hold, and the lanes of events the
//! report draws like the seed's "The lease decides who may run".

use super::flow::{Flow, Observed, Send, carrier_replayed};
use crate::carrier::CarrierConfig;
use crate::carrier::{Carrier, CarrierReply, CarrierResult, InvoiceLine};
use crate::clock::{Millis, VirtualClock};
use crate::engine::EngineConfig;
use crate::engine::{DiePoint, Engine, EngineError, Outcome, Request, Response};
use crate::store::{Invariants, LabelRow, Store, StoreError};
use serde::Serialize;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

/// A scripted timeline: requests sent, and sweeps run, at fixed virtual times.
#[derive(Debug, Clone, Serialize)]
pub struct Timeline {
    /// One-way network delay.
    #[serde(with = "crate::duration::serde_str")]
    pub network: Duration,
    /// Server time from txn 1 to the carrier call.
    #[serde(with = "crate::duration::serde_str")]
    pub processing: Duration,
    pub requests: Vec<TimelineRequest>,
    /// The engine's sweeper, run at these times: the seed's last transition ("Purged: row
    /// deleted; a repeat after this is treated as brand new") needs one.
    pub sweeps: Vec<TimelineSweep>,
}

/// One run of the sweeper: every expired record, in batches of `batch`.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineSweep {
    #[serde(with = "crate::duration::serde_str")]
    pub at: Duration,
    pub batch: u32,
}

/// What a sweep purged.
#[derive(Debug, Clone, Serialize)]
pub struct SweepResult {
    pub at_s: f64,
    /// The purged records as (caller column, key).
    pub purged: Vec<(String, String)>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TimelineRequest {
    /// A name for the lane this request is drawn in ("Attempt 1", "Retries").
    pub lane: Option<String>,
    #[serde(with = "crate::duration::serde_str")]
    pub sent: Duration,
    pub caller: String,
    /// The idempotency key; absent means the body's derived key (`label:ORDER:PARCEL:vN`).
    pub key: Option<String>,
    /// Send no key at all (the 400 idempotency_key_missing case).
    pub no_key: bool,
    /// The JSON text sent: the request's body, the timeline's, or a verbatim `raw_body`.
    pub body: String,
    #[serde(with = "crate::duration::serde_opt")]
    pub carrier_latency: Option<Duration>,
    /// Server time from the carrier's answer to txn 2.
    #[serde(with = "crate::duration::serde_opt")]
    pub finish: Option<Duration>,
    pub die: Option<DiePoint>,
}

#[derive(Debug, Clone, Serialize)]
pub struct TimelineResponse {
    pub lane: String,
    pub sent_s: f64,
    /// When the answer reached the caller.
    pub arrived_s: f64,
    pub status: u16,
    pub code: Option<String>,
    pub outcome: Outcome,
    pub replayed: bool,
    pub tracking_no: Option<String>,
}

/// One bar or point in a lane, for the timeline chart and the table view.
#[derive(Debug, Clone, Serialize)]
pub struct TimelineEvent {
    pub lane: String,
    pub start_s: f64,
    pub end_s: Option<f64>,
    pub kind: &'static str,
    pub text: String,
}

#[derive(Debug, Clone, Serialize)]
pub struct TimelineReport {
    pub scenario: String,
    pub store: String,
    pub responses: Vec<TimelineResponse>,
    /// The tracking number of the last label a caller received.
    pub tracking_no: Option<String>,
    pub labels: Vec<LabelRow>,
    pub carrier_purchases: Vec<InvoiceLine>,
    pub carrier_replays: u64,
    pub events: Vec<TimelineEvent>,
    pub sweeps: Vec<SweepResult>,
    pub invariants: Invariants,
}

#[derive(Debug, thiserror::Error)]
pub enum TimelineError {
    #[error("the scenario has no [timeline] to run")]
    NoTimeline,
    #[error(transparent)]
    Engine(#[from] EngineError),
    #[error(transparent)]
    Store(#[from] StoreError),
}

fn secs(ms: Millis) -> f64 {
    ms as f64 / 1000.0
}

fn tracking_of(body: &str) -> Option<String> {
    serde_json::from_str::<serde_json::Value>(body)
        .ok()?
        .get("tracking_no")?
        .as_str()
        .map(str::to_string)
}

/// Runs `timeline` (of the scenario called `name`) against `store`.
pub fn run(
    name: &str,
    timeline: &Timeline,
    engine: EngineConfig,
    carrier: CarrierConfig,
    store: Box<dyn Store>,
) -> Result<TimelineReport, TimelineError> {
    let store_name = store.describe();
    let clock = VirtualClock::new();
    let carrier = Arc::new(Carrier::new(carrier));
    let engine = Engine::new(store, carrier.clone(), Arc::new(clock.clone()), engine);
    let lease_ms = engine.config().lease_ms;
    let mut flow = Flow::new(engine, clock);
    let lanes = send_all(&mut flow, timeline);
    for s in &timeline.sweeps {
        flow.sweep_at(crate::duration::ms(s.at), s.batch, u32::MAX);
    }
    let mut observed = Vec::new();
    while flow.step(&mut observed)? {}
    let sweeps = observed
        .iter()
        .filter_map(|o| match o {
            Observed::Swept { at_ms, purged } => Some(SweepResult {
                at_s: secs(*at_ms),
                purged: purged.clone(),
            }),
            _ => None,
        })
        .collect();
    let (events, responses) = draw(timeline, &lanes, lease_ms, &observed);
    let tracking_no = responses.iter().rev().find_map(|r| r.tracking_no.clone());
    let engine = flow.engine();
    let labels = engine.store().labels()?;
    let invariants = engine.store().invariants()?;
    Ok(TimelineReport {
        scenario: name.to_string(),
        store: store_name,
        responses,
        tracking_no,
        labels,
        carrier_purchases: carrier.ledger(),
        carrier_replays: carrier.stats().replays,
        events,
        sweeps,
        invariants,
    })
}

/// Puts every scripted request on the wire at its time; returns the lane each is drawn in.
fn send_all(flow: &mut Flow, timeline: &Timeline) -> Vec<String> {
    let ms = crate::duration::ms;
    let mut lanes = Vec::new();
    for (i, r) in timeline.requests.iter().enumerate() {
        let body = r.body.clone();
        let key = if r.no_key {
            None
        } else {
            Some(r.key.clone().unwrap_or_else(|| {
                crate::engine::request::validate(&body)
                    .map(|l| l.derived_key())
                    .unwrap_or_else(|_| format!("request-{i}"))
            }))
        };
        let mut send = Send::new(
            i as u64,
            Request::create_label(&r.caller, key.as_deref(), &body),
        );
        send.network_ms = ms(timeline.network);
        send.processing_ms = ms(timeline.processing);
        send.finish_ms = r.finish.map(ms).unwrap_or(0);
        send.carrier_latency_ms = r.carrier_latency.map(ms);
        send.die = r.die;
        lanes.push(
            r.lane
                .clone()
                .unwrap_or_else(|| format!("Request {}", i + 1)),
        );
        flow.send(ms(r.sent), send);
    }
    lanes
}

/// The lanes of events, in time order, and what each caller got back, from what the driver
/// reported.
fn draw(
    timeline: &Timeline,
    lanes: &[String],
    lease_ms: Millis,
    observed: &[Observed],
) -> (Vec<TimelineEvent>, Vec<TimelineResponse>) {
    let mut d = Drawing {
        lanes,
        lease_ms,
        events: Vec::new(),
        responses: Vec::new(),
        lease_of: HashMap::new(),
    };
    for (i, r) in timeline.requests.iter().enumerate() {
        d.events.push(TimelineEvent {
            lane: "Caller".into(),
            start_s: r.sent.as_secs_f64(),
            end_s: None,
            kind: "send",
            text: format!("→ {}: CreateLabel", lanes[i]),
        });
    }
    for o in observed {
        d.observe(o);
    }
    d.events.sort_by(|a, b| a.start_s.total_cmp(&b.start_s));
    (d.events, d.responses)
}

/// The events and responses drawn so far.
struct Drawing<'a> {
    lanes: &'a [String],
    lease_ms: Millis,
    events: Vec<TimelineEvent>,
    responses: Vec<TimelineResponse>,
    /// The lease event of each request that claimed its key, to end it when txn 2 commits.
    lease_of: HashMap<u64, usize>,
}

impl Drawing<'_> {
    fn observe(&mut self, o: &Observed) {
        match o {
            Observed::Claimed {
                id,
                at_ms,
                took_over,
            } => self.claimed(*id, *at_ms, *took_over),
            Observed::CarrierAnswered {
                called_ms,
                at_ms,
                reply,
                ..
            } => self.events.push(carrier_event(*called_ms, *at_ms, reply)),
            Observed::Answered {
                id,
                at_ms,
                response,
            } => self.answered(*id, *at_ms, response),
            Observed::Died { id, at_ms, point } => self.events.push(TimelineEvent {
                lane: self.lanes[*id as usize].clone(),
                start_s: secs(*at_ms),
                end_s: None,
                kind: "died",
                text: format!("process killed ({})", died_where(*point)),
            }),
            Observed::Replied {
                id,
                sent_ms,
                at_ms,
                response,
            } => self.replied(*id, *sent_ms, *at_ms, response),
            Observed::Swept { at_ms, purged } => self.events.push(TimelineEvent {
                lane: "Sweeper".into(),
                start_s: secs(*at_ms),
                end_s: None,
                kind: "sweep",
                text: match purged.len() {
                    0 => "sweep: nothing expired".to_string(),
                    1 => format!("sweep: purged {}", purged[0].1),
                    n => format!("sweep: purged {n} records"),
                },
            }),
            _ => {}
        }
    }

    /// Txn 1 claimed the key: a lease bar until the lease would end.
    fn claimed(&mut self, id: u64, at_ms: Millis, took_over: bool) {
        let lane = self.lanes[id as usize].clone();
        self.lease_of.insert(id, self.events.len());
        self.events.push(TimelineEvent {
            lane: lane.clone(),
            start_s: secs(at_ms),
            end_s: Some(secs(at_ms + self.lease_ms)),
            kind: "lease",
            text: if took_over {
                format!("{lane} takes over the expired lease")
            } else {
                format!("lease held by {lane}")
            },
        });
    }

    /// The server answered: the lease ends, and an answer other than 201 is marked.
    fn answered(&mut self, id: u64, at_ms: Millis, response: &Response) {
        // A completed attempt releases its lease (txn 2 clears locked_until).
        if let Some(&i) = self.lease_of.get(&id)
            && let Some(end) = self.events[i].end_s.as_mut()
        {
            *end = end.min(secs(at_ms));
        }
        if response.status != 201 {
            self.events.push(TimelineEvent {
                lane: self.lanes[id as usize].clone(),
                start_s: secs(at_ms),
                end_s: None,
                kind: "answer",
                text: format!(
                    "{} {}",
                    response.status,
                    response.code.clone().unwrap_or_default()
                ),
            });
        }
    }

    /// The caller heard the answer.
    fn replied(&mut self, id: u64, sent_ms: Millis, at_ms: Millis, response: &Response) {
        let tracking_no = tracking_of(&response.body);
        let lane = self.lanes[id as usize].clone();
        self.events.push(TimelineEvent {
            lane: "Caller".into(),
            start_s: secs(at_ms),
            end_s: None,
            kind: "reply",
            text: format!(
                "{} {}{}",
                response.status,
                tracking_no
                    .clone()
                    .or_else(|| response.code.clone())
                    .unwrap_or_default(),
                if response.replayed { " (replayed)" } else { "" }
            ),
        });
        self.responses.push(TimelineResponse {
            lane,
            sent_s: secs(sent_ms),
            arrived_s: secs(at_ms),
            status: response.status,
            code: response.code.clone(),
            outcome: response.outcome,
            replayed: response.replayed,
            tracking_no,
        });
    }
}

/// The carrier's bar: the call, from `called_ms` to its answer.
fn carrier_event(called_ms: Millis, at_ms: Millis, reply: &CarrierReply) -> TimelineEvent {
    let text = match &reply.result {
        CarrierResult::Label { label, .. } if carrier_replayed(reply) => {
            format!("same label replayed ({})", label.tracking_no)
        }
        CarrierResult::Label { label, .. } => {
            format!("buy label ({})", label.tracking_no)
        }
        CarrierResult::KeyReused => "refused: key reused for another purchase".to_string(),
        CarrierResult::Refused { reason } => format!("refused: {reason}"),
    };
    TimelineEvent {
        lane: "Carrier".into(),
        start_s: secs(called_ms),
        end_s: Some(secs(at_ms)),
        kind: "carrier",
        text,
    }
}

fn died_where(point: DiePoint) -> &'static str {
    match point {
        DiePoint::AfterTxn1 => "after txn 1",
        DiePoint::AfterCarrier => "after the carrier call, before txn 2",
        DiePoint::InsideTxn2 => "inside txn 2",
    }
}

/// The human view: one line per event, like the seed's "Timeline as a list".
pub fn render_table(r: &TimelineReport) -> String {
    let mut out = format!("Scenario {} on {}\n\n", r.scenario, r.store);
    for e in &r.events {
        let when = match e.end_s {
            Some(end) => format!("{:>5.1}–{:<5.1} s", e.start_s, end),
            None => format!("{:>5.1} s      ", e.start_s),
        };
        out.push_str(&format!("{when}  {:<10}  {}\n", e.lane, e.text));
    }
    out.push_str("\nResponses\n  sent_s  arrived_s  status  code / tracking\n");
    for x in &r.responses {
        out.push_str(&format!(
            "  {:>6.1}  {:>9.1}  {:>6}  {}{}\n",
            x.sent_s,
            x.arrived_s,
            x.status,
            x.tracking_no
                .clone()
                .or_else(|| x.code.clone())
                .unwrap_or_default(),
            if x.replayed {
                " (Idempotent-Replayed: true)"
            } else {
                ""
            }
        ));
    }
    out.push_str(&format!(
        "\nLabels in the store: {}   carrier purchases: {}   carrier replays: {}\n",
        r.labels.len(),
        r.carrier_purchases.len(),
        r.carrier_replays
    ));
    out.push_str(&format!(
        "Invariants: integrity {}, completed keys without a label {}, most labels per parcel {}\n",
        if r.invariants.integrity_ok {
            "ok"
        } else {
            "FAILED"
        },
        r.invariants.completed_without_label,
        r.invariants.max_labels_per_parcel
    ));
    out
}
