//! The conformance suite: one test per row of the seed's transition table and status table, the
//! lease-takeover timeline, concurrency, lost leases, caller scoping and the sweeper, each run
//! against every store backend through the `conformance!` macro at the bottom.

use crate::common;

use common::{BODY, Backend, Harness, KEY, OTHER_BODY};
use idemcalc::carrier::CarrierResult;
use idemcalc::clock::VIRTUAL_EPOCH_MS;
use idemcalc::engine::{
    Begun, DiePoint, EngineConfig, Finished, KeyScope, OrderSpace, Outcome, Request, Response,
};
use idemcalc::store::KeyState;

fn owned(b: Begun) -> idemcalc::engine::Attempt {
    match b {
        Begun::Owned(a) => a,
        Begun::Answered(r) => panic!("expected to own the key, got {r:?}"),
    }
}

fn answered(b: Begun) -> Response {
    match b {
        Begun::Answered(r) => r,
        Begun::Owned(a) => panic!("expected an answer, got the lease: {a:?}"),
    }
}

fn finished(f: Finished) -> Response {
    match f {
        Finished::Answered(r) => r,
        Finished::Died => panic!("the attempt died"),
    }
}

// ---- The transition table, one test per row ----

/// No record → Started, lease held: first request; insert, lease 30 s.
fn t1_first_request_claims_with_a_30s_lease(b: Backend) {
    let mut h = Harness::new(b);
    let a = owned(h.engine.begin(&h.request(BODY)).unwrap());
    assert!(!a.took_over);
    let row = h
        .engine
        .store()
        .get_key("fulfilment", KEY)
        .unwrap()
        .unwrap();
    assert_eq!(row.state, KeyState::Started);
    assert_eq!(row.locked_until_ms, Some(VIRTUAL_EPOCH_MS + 30_000));
    assert_eq!(row.lease_token, Some(a.lease_token));
    assert_eq!(row.created_at_ms, VIRTUAL_EPOCH_MS);
    assert_eq!(row.expires_at_ms, VIRTUAL_EPOCH_MS + 86_400_000);
    assert_eq!(row.response_status, None);
    h.assert_invariants();
}

/// Started → No record: fails validation; delete, 400.
fn t2_validation_failure_deletes_the_record(b: Backend) {
    let mut h = Harness::new(b);
    let bad = r#"{"order_id":918273,"parcel_no":1,"weight_g":-5,"service":"ground"}"#;
    let r = answered(h.engine.begin(&h.request(bad)).unwrap());
    assert_eq!(
        (r.status, r.code.as_deref()),
        (400, Some("validation_failed"))
    );
    assert!(r.body.contains("weight_g"), "{}", r.body);
    assert_eq!(h.engine.store().get_key("fulfilment", KEY).unwrap(), None);
    assert_eq!(h.engine.store().count_labels().unwrap(), 0);
    assert_eq!(h.carrier.stats().purchases, 0);
    h.assert_invariants();
}

/// Started → Started: repeat, same body, lease live; 409.
fn t3_repeat_while_lease_live_gets_409(b: Backend) {
    let mut h = Harness::new(b);
    let _a = owned(h.engine.begin(&h.request(BODY)).unwrap());
    h.clock.advance_ms(4_800);
    let r = answered(h.engine.begin(&h.request(BODY)).unwrap());
    assert_eq!(
        (r.status, r.code.as_deref()),
        (409, Some("request_in_progress"))
    );
    assert_eq!(r.retry_after_ms, Some(25_200));
    h.assert_invariants();
}

/// Started → Started: repeat, same body, lease expired; take over.
fn t4_repeat_after_lease_expiry_takes_over(b: Backend) {
    let mut h = Harness::new(b);
    let first = owned(h.engine.begin(&h.request(BODY)).unwrap());
    h.clock.advance_ms(30_000);
    let second = owned(h.engine.begin(&h.request(BODY)).unwrap());
    assert!(second.took_over);
    assert_ne!(first.lease_token, second.lease_token);
    let row = h
        .engine
        .store()
        .get_key("fulfilment", KEY)
        .unwrap()
        .unwrap();
    assert_eq!(row.lease_token, Some(second.lease_token));
    assert_eq!(row.locked_until_ms, Some(VIRTUAL_EPOCH_MS + 60_000));
    h.assert_invariants();
}

/// Started → Started: repeat, new body; 422.
fn t5_new_body_while_started_gets_422(b: Backend) {
    let mut h = Harness::new(b);
    let _a = owned(h.engine.begin(&h.request(BODY)).unwrap());
    let r = answered(h.engine.begin(&h.request(OTHER_BODY)).unwrap());
    assert_eq!(
        (r.status, r.code.as_deref()),
        (422, Some("idempotency_key_reused"))
    );
    // Even after the lease expires, a different body never takes over.
    h.clock.advance_ms(31_000);
    let r = answered(h.engine.begin(&h.request(OTHER_BODY)).unwrap());
    assert_eq!(r.status, 422);
    h.assert_invariants();
}

/// Started → Completed: handler returns, lease still ours; save response.
fn t6_completion_saves_the_response_with_the_label(b: Backend) {
    let mut h = Harness::new(b);
    let a = owned(h.engine.begin(&h.request(BODY)).unwrap());
    let reply = h.engine.call_carrier(&a);
    h.clock.advance_ms(50);
    let r = finished(h.engine.finish(&a, &reply, None).unwrap());
    assert_eq!(
        (r.status, r.outcome, r.replayed),
        (201, Outcome::Created, false)
    );
    assert!(
        r.body.contains("\"tracking_no\":\"GRD000918273\""),
        "{}",
        r.body
    );
    let row = h
        .engine
        .store()
        .get_key("fulfilment", KEY)
        .unwrap()
        .unwrap();
    assert_eq!(row.state, KeyState::Completed);
    assert_eq!(row.response_status, Some(201));
    assert_eq!(row.response_body.as_deref(), Some(r.body.as_str()));
    assert_eq!((row.locked_until_ms, row.lease_token), (None, None));
    assert_eq!(row.expires_at_ms, VIRTUAL_EPOCH_MS + 50 + 86_400_000);
    let labels = h.engine.store().labels().unwrap();
    assert_eq!(labels.len(), 1);
    assert_eq!(labels[0].created_by_key, KEY);
    assert_eq!(labels[0].cost_cents, 600);
    h.assert_invariants();
}

/// Completed → Completed: repeat, same body; replay.
fn t7_repeat_after_completion_replays(b: Backend) {
    let mut h = Harness::new(b);
    let first = h.engine.handle(&h.request(BODY)).unwrap();
    h.clock.advance_ms(3_600_000);
    // Key order and spacing do not make a different request.
    let reordered = r#"{ "service": "ground", "weight_g": 1450, "label_version": 1,
                         "parcel_no": 1, "order_id": 918273 }"#;
    let again = h.engine.handle(&h.request(reordered)).unwrap();
    assert_eq!(
        (again.status, again.outcome, again.replayed),
        (201, Outcome::Replayed, true)
    );
    assert_eq!(again.body, first.body, "a replay is byte-identical");
    assert_eq!(h.carrier.stats().purchases, 1, "nothing runs on a replay");
    assert_eq!(
        h.carrier.stats().replays,
        0,
        "the carrier is not even called"
    );
    h.assert_invariants();
}

/// Completed → Completed: repeat, new body; 422.
fn t8_new_body_after_completion_gets_422(b: Backend) {
    let mut h = Harness::new(b);
    h.engine.handle(&h.request(BODY)).unwrap();
    let r = h.engine.handle(&h.request(OTHER_BODY)).unwrap();
    assert_eq!(
        (r.status, r.code.as_deref()),
        (422, Some("idempotency_key_reused"))
    );
    assert_eq!(h.engine.store().count_labels().unwrap(), 1);
    h.assert_invariants();
}

/// Completed → Purged: 24 h later; delete row (sweeper). A repeat after this is brand new.
fn t9_sweeper_purges_24h_after_completion(b: Backend) {
    let mut h = Harness::new(b);
    h.engine.handle(&h.request(BODY)).unwrap();
    h.clock.advance_ms(86_400_000 - 1);
    assert_eq!(h.engine.sweep(100, 10).unwrap(), 0, "not yet expired");
    h.clock.advance_ms(1);
    assert_eq!(h.engine.sweep(100, 10).unwrap(), 1);
    assert_eq!(h.engine.store().get_key("fulfilment", KEY).unwrap(), None);
    // Brand new: claimed again. The carrier's own 24 h window ran out at the same instant, so
    // it sells a second label; the labels table's unique (order, parcel, version) keeps one row
    // and the caller gets the existing label back. This is the seed's warning: retention must
    // outlast every retry.
    let a = owned(h.engine.begin(&h.request(BODY)).unwrap());
    assert!(!a.took_over);
    let reply = h.engine.call_carrier(&a);
    assert!(matches!(
        reply.result,
        CarrierResult::Label {
            replayed: false,
            ..
        }
    ));
    let r = finished(h.engine.finish(&a, &reply, None).unwrap());
    assert_eq!((r.status, r.outcome), (201, Outcome::Created));
    assert!(
        r.body.contains("\"label_id\":\"L-1\""),
        "the existing label: {}",
        r.body
    );
    assert_eq!(h.carrier.stats().purchases, 2, "the carrier billed twice");
    assert_eq!(h.engine.store().count_labels().unwrap(), 1);
    h.assert_invariants();
}

fn s1_201_first_run(b: Backend) {
    let mut h = Harness::new(b);
    let r = h.engine.handle(&h.request(BODY)).unwrap();
    assert_eq!(
        (r.status, r.outcome, r.replayed, r.code),
        (201, Outcome::Created, false, None)
    );
    assert_eq!(h.engine.store().count_labels().unwrap(), 1);
    h.assert_invariants();
}

fn s2_201_replay_is_flagged(b: Backend) {
    let mut h = Harness::new(b);
    h.engine.handle(&h.request(BODY)).unwrap();
    let r = h.engine.handle(&h.request(BODY)).unwrap();
    assert_eq!(
        (r.status, r.outcome, r.replayed),
        (201, Outcome::Replayed, true)
    );
    h.assert_invariants();
}

fn s3_409_request_in_progress(b: Backend) {
    let mut h = Harness::new(b);
    let a = owned(h.engine.begin(&h.request(BODY)).unwrap());
    let mut other = h.second_engine();
    let r = answered(other.begin(&h.request(BODY)).unwrap());
    assert_eq!((r.status, r.outcome), (409, Outcome::InProgress));
    assert!(r.body.contains("request_in_progress"));
    let reply = h.engine.call_carrier(&a);
    finished(h.engine.finish(&a, &reply, None).unwrap());
    h.assert_invariants();
}

fn s4_422_key_reused(b: Backend) {
    let mut h = Harness::new(b);
    h.engine.handle(&h.request(BODY)).unwrap();
    let r = h.engine.handle(&h.request(OTHER_BODY)).unwrap();
    assert_eq!((r.status, r.outcome), (422, Outcome::KeyReused));
    assert!(r.body.contains("idempotency_key_reused"));
    h.assert_invariants();
}

fn s5_400_key_missing_touches_nothing(b: Backend) {
    let mut h = Harness::new(b);
    let r = h
        .engine
        .handle(&Request::create_label("fulfilment", None, BODY))
        .unwrap();
    assert_eq!(
        (r.status, r.code.as_deref()),
        (400, Some("idempotency_key_missing"))
    );
    assert_eq!(h.engine.store().count_keys().unwrap(), 0);
    assert_eq!(h.carrier.stats().purchases, 0);
    h.assert_invariants();
}

// ---- Beyond the tables ----

/// The seed's "The lease decides who may run", from the shipped scenario file.
fn lease_takeover_timeline(b: Backend) {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/lease-takeover.toml");
    let scenario = idemcalc::scenario::Scenario::load(&path).unwrap();
    let report = scenario.run_timeline(b.connect()).unwrap();
    let got: Vec<(f64, f64, u16)> = report
        .responses
        .iter()
        .map(|r| (r.sent_s, r.arrived_s, r.status))
        .collect();
    assert_eq!(
        got,
        vec![(4.8, 5.2, 409), (17.8, 18.2, 409), (31.8, 38.2, 201)]
    );
    assert_eq!(report.tracking_no.as_deref(), Some("GRD000918273"));
    assert_eq!(report.labels.len(), 1);
    assert_eq!(report.carrier_purchases.len(), 1);
    assert_eq!(report.carrier_replays, 1);
    assert!(report.invariants.integrity_ok);
    assert_eq!(report.invariants.completed_without_label, 0);
    let died: Vec<_> = report.events.iter().filter(|e| e.kind == "died").collect();
    assert_eq!(died.len(), 1);
    assert_eq!(died[0].start_s, 10.0);
}

/// 8 threads × 50 requests, same key and body, separate connections.
fn concurrent_same_key(b: Backend) {
    let mut h = Harness::new(b);
    let bodies = std::sync::Mutex::new(Vec::new());
    let statuses = std::sync::Mutex::new(std::collections::BTreeMap::new());
    std::thread::scope(|s| {
        for _ in 0..8 {
            let mut engine = h.second_engine();
            let (bodies, statuses, req) = (&bodies, &statuses, h.request(BODY));
            s.spawn(move || {
                for _ in 0..50 {
                    let r = engine.handle(&req).unwrap();
                    *statuses.lock().unwrap().entry(r.status).or_insert(0) += 1;
                    if r.status == 201 {
                        bodies.lock().unwrap().push(r.body);
                    }
                }
            });
        }
    });
    let statuses = statuses.into_inner().unwrap();
    assert_eq!(statuses.values().sum::<u32>(), 400);
    assert!(
        statuses.keys().all(|s| *s == 201 || *s == 409),
        "only 201 and 409: {statuses:?}"
    );
    let bodies = bodies.into_inner().unwrap();
    assert!(!bodies.is_empty());
    assert!(
        bodies.iter().all(|x| *x == bodies[0]),
        "every 201 byte-identical"
    );
    assert_eq!(h.engine.store().count_labels().unwrap(), 1);
    assert_eq!(h.carrier.stats().purchases, 1);
    h.assert_invariants();
}

/// A slow attempt that lost its lease writes nothing; the one that took over owns the result.
fn slow_attempt_that_lost_its_lease_writes_nothing(b: Backend) {
    let mut h = Harness::new(b);
    let slow = owned(h.engine.begin(&h.request(BODY)).unwrap());
    let slow_reply = h.engine.call_carrier(&slow);
    h.clock.advance_ms(31_000);
    let mut other = h.second_engine();
    let fast = owned(other.begin(&h.request(BODY)).unwrap());
    assert!(fast.took_over);
    // The slow attempt tries to complete while the other holds the lease: nothing is written.
    let r = finished(h.engine.finish(&slow, &slow_reply, None).unwrap());
    assert_eq!(r.status, 409);
    assert_eq!(h.engine.store().count_labels().unwrap(), 0);
    let row = h
        .engine
        .store()
        .get_key("fulfilment", KEY)
        .unwrap()
        .unwrap();
    assert_eq!(row.lease_token, Some(fast.lease_token));
    // The owner completes; the carrier's key made its call a replay of the same label.
    let fast_reply = other.call_carrier(&fast);
    let owner = finished(other.finish(&fast, &fast_reply, None).unwrap());
    assert_eq!(owner.status, 201);
    // A second late completion by the slow attempt gets the owner's answer and changes nothing.
    let late = finished(h.engine.finish(&slow, &slow_reply, None).unwrap());
    assert_eq!(
        (late.status, late.replayed, &late.body),
        (201, true, &owner.body)
    );
    assert_eq!(h.engine.store().count_labels().unwrap(), 1);
    assert_eq!(h.carrier.stats().purchases, 1);
    h.assert_invariants();
}

/// Keys are scoped per caller; the global-scope switch reproduces the seed's collision.
fn caller_scoping(b: Backend) {
    // Two tenants with their own order numbering: the same key and the same body are two parcels.
    let body_b =
        r#"{"order_id":918273,"parcel_no":2,"label_version":1,"weight_g":1450,"service":"ground"}"#;
    let mut h = Harness::new(b);
    let a = h
        .engine
        .handle(&Request::create_label("tenant-a", Some(KEY), BODY))
        .unwrap();
    let bb = h
        .engine
        .handle(&Request::create_label("tenant-b", Some(KEY), body_b))
        .unwrap();
    assert_eq!((a.status, a.outcome), (201, Outcome::Created));
    assert_eq!((bb.status, bb.outcome), (201, Outcome::Created));
    assert_ne!(a.body, bb.body, "neither sees the other's saved response");
    assert_eq!(h.engine.store().count_labels().unwrap(), 2);
    h.assert_invariants();
    let same = h
        .engine
        .handle(&Request::create_label("tenant-b", Some(KEY), BODY))
        .unwrap();
    assert_eq!(same.status, 422, "tenant-b's record is its own");

    let config = EngineConfig {
        key_scope: KeyScope::Global,
        ..EngineConfig::default()
    };
    let mut g = Harness::with_config(h.backend.fresh(), config);
    g.engine
        .handle(&Request::create_label("tenant-a", Some(KEY), BODY))
        .unwrap();
    let collided = g
        .engine
        .handle(&Request::create_label("tenant-b", Some(KEY), BODY))
        .unwrap();
    assert!(collided.replayed, "tenant-b gets tenant-a's saved response");
}

/// The seed's second line of defence, `UNIQUE (order_id, parcel_no)` on labels, across callers
/// that share an order space (its Fulfilment and Returns): a second caller asking for the same
/// parcel, under its own key, gets the parcel's existing label. With per-tenant order spaces the
/// same order id is another tenant's parcel, and gets its own label.
fn order_space_decides_one_label_per_parcel(b: Backend) {
    let label_id = |r: &Response| -> String {
        let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
        v["label_id"].as_str().unwrap().to_string()
    };
    let mut h = Harness::new(b);
    let first = h
        .engine
        .handle(&Request::create_label("fulfilment", Some(KEY), BODY))
        .unwrap();
    let second = h
        .engine
        .handle(&Request::create_label("returns", Some(KEY), BODY))
        .unwrap();
    assert_eq!((first.status, first.outcome), (201, Outcome::Created));
    assert_eq!(second.status, 201);
    assert_eq!(
        label_id(&second),
        label_id(&first),
        "the parcel's existing label"
    );
    assert_eq!(h.engine.store().count_labels().unwrap(), 1);
    h.assert_invariants();

    let config = EngineConfig {
        order_space: OrderSpace::PerTenant,
        ..EngineConfig::default()
    };
    let mut t = Harness::with_config(h.backend.fresh(), config);
    let a = t
        .engine
        .handle(&Request::create_label("tenant-a", Some(KEY), BODY))
        .unwrap();
    let b = t
        .engine
        .handle(&Request::create_label("tenant-b", Some(KEY), BODY))
        .unwrap();
    assert_eq!((a.status, b.status), (201, 201));
    assert_ne!(
        label_id(&a),
        label_id(&b),
        "two tenants' order 918273 are two parcels"
    );
    assert_eq!(t.engine.store().count_labels().unwrap(), 2);
    t.assert_invariants();
}

/// A key lives until its expiry and no longer; a sweep deletes in batches of the batch size.
fn sweeper_batches(b: Backend) {
    let mut h = Harness::new(b);
    for i in 0..25 {
        let body = format!(
            r#"{{"order_id":{},"parcel_no":1,"weight_g":1000,"service":"ground"}}"#,
            1000 + i
        );
        let key = format!("label:{}:1:v1", 1000 + i);
        let r = h
            .engine
            .handle(&Request::create_label("fulfilment", Some(&key), &body))
            .unwrap();
        assert_eq!(r.status, 201);
        h.clock.advance_ms(1_000);
    }
    // The first key completed at +0 s expires at +24 h; at +24 h + 9.5 s ten have expired.
    h.clock.set_ms(VIRTUAL_EPOCH_MS + 86_400_000 + 9_500);
    assert_eq!(
        h.engine
            .store()
            .sweep_batch(h.clock.elapsed_ms() + VIRTUAL_EPOCH_MS, 4)
            .unwrap()
            .len(),
        4
    );
    assert_eq!(h.engine.sweep(4, 1).unwrap(), 4, "one batch of 4");
    assert_eq!(
        h.engine.sweep(4, 10).unwrap(),
        2,
        "the rest of the 10 expired"
    );
    assert_eq!(h.engine.store().count_keys().unwrap(), 15);
    assert_eq!(
        h.engine.store().count_labels().unwrap(),
        25,
        "labels are never swept"
    );
    h.assert_invariants();
}

/// A crash between the carrier call and txn 2 leaves a lease to take over and no label.
fn crash_after_carrier_is_recovered_by_takeover(b: Backend) {
    let mut h = Harness::new(b);
    let f = h
        .engine
        .handle_with_fault(&h.request(BODY), Some(DiePoint::AfterCarrier))
        .unwrap();
    assert_eq!(f, Finished::Died);
    assert_eq!(h.engine.store().count_labels().unwrap(), 0);
    h.clock.advance_ms(30_000);
    let r = h.engine.handle(&h.request(BODY)).unwrap();
    assert_eq!(r.status, 201);
    assert_eq!(h.carrier.stats().purchases, 1);
    assert_eq!(h.carrier.stats().replays, 1);
    h.assert_invariants();
}

/// A crash inside txn 2 rolls back both the record's completion and the label.
fn crash_inside_txn2_writes_nothing(b: Backend) {
    let mut h = Harness::new(b);
    let f = h
        .engine
        .handle_with_fault(&h.request(BODY), Some(DiePoint::InsideTxn2))
        .unwrap();
    assert_eq!(f, Finished::Died);
    assert_eq!(h.engine.store().count_labels().unwrap(), 0);
    let row = h
        .engine
        .store()
        .get_key("fulfilment", KEY)
        .unwrap()
        .unwrap();
    assert_eq!(row.state, KeyState::Started);
    h.assert_invariants();
}

/// Bad keys are refused with their own code and touch nothing.
fn bad_keys_touch_nothing(b: Backend) {
    let mut h = Harness::new(b);
    let long = "k".repeat(256);
    for (key, code) in [
        ("", "idempotency_key_empty"),
        (long.as_str(), "idempotency_key_too_long"),
        ("label:1\u{7}", "idempotency_key_invalid_characters"),
    ] {
        let r = h
            .engine
            .handle(&Request::create_label("fulfilment", Some(key), BODY))
            .unwrap();
        assert_eq!((r.status, r.code.as_deref()), (400, Some(code)));
    }
    assert_eq!(h.engine.store().count_keys().unwrap(), 0);
    h.assert_invariants();
}

/// Bad bodies get 400 validation_failed and leave no record behind.
fn bad_bodies_leave_no_record(b: Backend) {
    let mut h = Harness::new(b);
    for (i, body) in [
        r#"{"parcel_no":1,"weight_g":1450,"service":"ground"}"#,
        r#"{"order_id":1,"parcel_no":1,"weight_g":0,"service":"ground"}"#,
        r#"{"order_id":1,"parcel_no":1,"weight_g":1450,"service":"pigeon"}"#,
        r#"{"order_id":"1","parcel_no":1,"weight_g":1450,"service":"ground"}"#,
        r#"{"order_id":1,"parcel_no":1,"weight_g":1450,"service":"ground""#,
    ]
    .iter()
    .enumerate()
    {
        let key = format!("k{i}");
        let r = h
            .engine
            .handle(&Request::create_label("fulfilment", Some(&key), body))
            .unwrap();
        assert_eq!(
            (r.status, r.code.as_deref()),
            (400, Some("validation_failed")),
            "{body}"
        );
    }
    assert_eq!(h.engine.store().count_keys().unwrap(), 0);
    assert_eq!(h.carrier.stats().purchases, 0);
    h.assert_invariants();
}

// ---- Reliability: a key reused after its purge, a carrier that replays by key alone, the
// sweeper and live leases (issue "Reliability, round four", items 1 and 2) ----

/// Order 881000002's body, for a key first used for order 918273.
const ANOTHER_ORDER: &str =
    r#"{"order_id":881000002,"parcel_no":1,"label_version":1,"weight_g":1450,"service":"ground"}"#;

/// A key reused for another order after our purge, while the carrier still remembers it: the
/// carrier refuses (its own key saw another purchase), the caller gets 422 and a key it can
/// replace, and nothing is bought or saved. Before, the carrier replayed the first order's
/// label by key alone and the service answered 201 with it, for the second order.
fn reused_key_after_purge_gets_422_not_another_orders_label(b: Backend) {
    let config = EngineConfig {
        retention_ms: 3_600_000,
        ..EngineConfig::default()
    };
    let mut h = Harness::with_config(b, config);
    assert_eq!(h.engine.handle(&h.request(BODY)).unwrap().status, 201);
    // Past the retention (and past the end of a partitioned store's hour).
    h.clock.advance_ms(2 * 3_600_000 + 1_000);
    assert_eq!(h.engine.sweep(100, 10).unwrap(), 1);
    let r = h.engine.handle(&h.request(ANOTHER_ORDER)).unwrap();
    assert_eq!(
        (r.status, r.outcome, r.code.as_deref()),
        (422, Outcome::KeyReused, Some("idempotency_key_reused")),
        "{}",
        r.body
    );
    assert!(
        !r.body.contains("918273"),
        "another order's label: {}",
        r.body
    );
    assert_eq!(
        h.engine.store().get_key("fulfilment", KEY).unwrap(),
        None,
        "nothing ran, so nothing is saved under the key"
    );
    assert_eq!(h.engine.store().count_labels().unwrap(), 1);
    assert_eq!(h.carrier.stats().purchases, 1, "nothing bought");
    // Once the carrier's 24 h window has passed too, the key is new everywhere.
    h.clock.advance_ms(86_400_000);
    let r = h.engine.handle(&h.request(ANOTHER_ORDER)).unwrap();
    assert_eq!((r.status, r.outcome), (201, Outcome::Created), "{}", r.body);
    assert!(r.body.contains("\"order_id\":881000002"), "{}", r.body);
    assert_eq!(h.engine.store().count_labels().unwrap(), 2);
    h.assert_invariants();
}

/// A carrier that replays by key alone (any `--carrier-url`) hands back a label id our store
/// holds for another parcel: txn 2 saves nothing, the claim goes, the caller gets a 502 naming
/// the label, and a retry with a working carrier gets its own label.
fn a_label_of_another_parcel_is_never_saved(b: Backend) {
    use idemcalc::carrier::{CarrierLabel, CarrierReply};
    let mut h = Harness::new(b);
    assert_eq!(h.engine.handle(&h.request(BODY)).unwrap().status, 201);
    let req = Request::create_label("fulfilment", Some("another-intent"), ANOTHER_ORDER);
    let a = owned(h.engine.begin(&req).unwrap());
    let forged = CarrierReply {
        result: CarrierResult::Label {
            label: CarrierLabel {
                label_id: "L-1".into(),
                tracking_no: "GRD000918273".into(),
                cost_cents: 600,
            },
            replayed: true,
        },
        latency_ms: 10,
        hung: false,
    };
    let r = finished(h.engine.finish(&a, &forged, None).unwrap());
    assert_eq!(
        (r.status, r.outcome),
        (502, Outcome::CarrierRefused),
        "{}",
        r.body
    );
    assert!(
        r.body.contains("L-1") && r.body.contains("918273"),
        "{}",
        r.body
    );
    assert_eq!(
        h.engine
            .store()
            .get_key("fulfilment", "another-intent")
            .unwrap(),
        None
    );
    assert_eq!(h.engine.store().count_labels().unwrap(), 1);
    let r = h.engine.handle(&req).unwrap();
    assert_eq!((r.status, r.outcome), (201, Outcome::Created), "{}", r.body);
    assert!(r.body.contains("\"order_id\":881000002"), "{}", r.body);
    h.assert_invariants();
}

/// The sweeper deletes what the seed purges (completed records) and started records whose
/// lease is over, never a started record whose attempt may still be at the carrier. A
/// retention shorter than the lease is refused by the knob check; an `EngineConfig` built by
/// hand can still ask for one, which is what makes the case reachable here.
fn sweeper_never_deletes_a_live_lease(b: Backend) {
    let config = EngineConfig {
        lease_ms: 2 * 3_600_000,
        retention_ms: 10_000,
        ..EngineConfig::default()
    };
    let mut h = Harness::with_config(b, config);
    let a = owned(h.engine.begin(&h.request(BODY)).unwrap());
    let reply = h.engine.call_carrier(&a);
    // Expired for an hour (a partitioned store's hour has ended too), lease still live.
    h.clock.advance_ms(3_600_000 + 1_000);
    assert_eq!(h.engine.sweep(100, 10).unwrap(), 0, "a live lease is kept");
    let r = finished(h.engine.finish(&a, &reply, None).unwrap());
    assert_eq!((r.status, r.outcome), (201, Outcome::Created), "{}", r.body);
    // An attempt that dies after txn 1: its record goes once both its expiry and its lease
    // have passed.
    let req = Request::create_label("fulfilment", Some("abandoned"), ANOTHER_ORDER);
    let died = h
        .engine
        .handle_with_fault(&req, Some(DiePoint::AfterTxn1))
        .unwrap();
    assert_eq!(died, Finished::Died);
    h.clock.advance_ms(2 * 3_600_000 + 1_000);
    assert_eq!(h.engine.sweep(100, 10).unwrap(), 2);
    assert_eq!(h.engine.store().count_keys().unwrap(), 0);
    h.assert_invariants();
}

/// Runs every listed test against every listed backend: one module per backend, one `#[test]` per
/// name. `Backend::sqlite()` gives a backend and `Backend::postgres()` an `Option` (`None`: skipped,
/// and said so loudly); `.into()` takes both.
macro_rules! conformance {
    ($backend:ident: { $($name:ident),* $(,)? }) => {
        mod $backend {
            $(
                #[test]
                fn $name() {
                    let backend: Option<super::common::Backend> =
                        super::common::Backend::$backend().into();
                    if let Some(b) = backend {
                        super::$name(b);
                    }
                }
            )*
        }
    };
    ([$($backend:ident),+] $names:tt) => {
        $( conformance!($backend: $names); )+
    };
}

conformance!([sqlite, postgres] {
    t1_first_request_claims_with_a_30s_lease,
    t2_validation_failure_deletes_the_record,
    t3_repeat_while_lease_live_gets_409,
    t4_repeat_after_lease_expiry_takes_over,
    t5_new_body_while_started_gets_422,
    t6_completion_saves_the_response_with_the_label,
    t7_repeat_after_completion_replays,
    t8_new_body_after_completion_gets_422,
    t9_sweeper_purges_24h_after_completion,
    s1_201_first_run,
    s2_201_replay_is_flagged,
    s3_409_request_in_progress,
    s4_422_key_reused,
    s5_400_key_missing_touches_nothing,
    lease_takeover_timeline,
    concurrent_same_key,
    slow_attempt_that_lost_its_lease_writes_nothing,
    caller_scoping,
    order_space_decides_one_label_per_parcel,
    sweeper_batches,
    crash_after_carrier_is_recovered_by_takeover,
    crash_inside_txn2_writes_nothing,
    bad_keys_touch_nothing,
    bad_bodies_leave_no_record,
    reused_key_after_purge_gets_422_not_another_orders_label,
    a_label_of_another_parcel_is_never_saved,
    sweeper_never_deletes_a_live_lease,
});

// PostgreSQL with the key table partitioned by `expires_at` (`--sweeper partitions`): every case
// but the two that time the sweeper to the millisecond and the batch. A partition is dropped
// whole when its range has passed, so retention comes in steps of a partition and a sweep
// purges a partition, not a batch; `tests/it/postgres_store.rs` checks those steps instead:
// - `t9_sweeper_purges_24h_after_completion`: purged at the end of its partition, not at 24 h.
// - `sweeper_batches`: a dropped partition is not a batch of 4.
conformance!([postgres_partitions] {
    t1_first_request_claims_with_a_30s_lease,
    t2_validation_failure_deletes_the_record,
    t3_repeat_while_lease_live_gets_409,
    t4_repeat_after_lease_expiry_takes_over,
    t5_new_body_while_started_gets_422,
    t6_completion_saves_the_response_with_the_label,
    t7_repeat_after_completion_replays,
    t8_new_body_after_completion_gets_422,
    s1_201_first_run,
    s2_201_replay_is_flagged,
    s3_409_request_in_progress,
    s4_422_key_reused,
    s5_400_key_missing_touches_nothing,
    lease_takeover_timeline,
    concurrent_same_key,
    slow_attempt_that_lost_its_lease_writes_nothing,
    caller_scoping,
    order_space_decides_one_label_per_parcel,
    crash_after_carrier_is_recovered_by_takeover,
    crash_inside_txn2_writes_nothing,
    bad_keys_touch_nothing,
    bad_bodies_leave_no_record,
    reused_key_after_purge_gets_422_not_another_orders_label,
    a_label_of_another_parcel_is_never_saved,
    sweeper_never_deletes_a_live_lease,
});

// Redis holds the key records and SQLite the labels (`store::redis`): every case that needs no
// transaction spanning both stores. Left out, because Redis cannot honour them:
// - `crash_inside_txn2_writes_nothing`: the key's completion is a Redis write that a crash
//   between it and the label's SQLite commit cannot undo; `tests/it/redis_store.rs` measures that
//   failure instead.
// - `concurrent_same_key`: it counts on a claim blocking until the other claim's transaction
//   ends (row locks); Redis answers at once, so the race is decided differently (still one
//   label, checked in `tests/it/redis_store.rs`).
conformance!([redis] {
    t1_first_request_claims_with_a_30s_lease,
    t2_validation_failure_deletes_the_record,
    t3_repeat_while_lease_live_gets_409,
    t4_repeat_after_lease_expiry_takes_over,
    t5_new_body_while_started_gets_422,
    t6_completion_saves_the_response_with_the_label,
    t7_repeat_after_completion_replays,
    t8_new_body_after_completion_gets_422,
    t9_sweeper_purges_24h_after_completion,
    s1_201_first_run,
    s2_201_replay_is_flagged,
    s3_409_request_in_progress,
    s4_422_key_reused,
    s5_400_key_missing_touches_nothing,
    lease_takeover_timeline,
    slow_attempt_that_lost_its_lease_writes_nothing,
    caller_scoping,
    order_space_decides_one_label_per_parcel,
    sweeper_batches,
    crash_after_carrier_is_recovered_by_takeover,
    bad_keys_touch_nothing,
    bad_bodies_leave_no_record,
    reused_key_after_purge_gets_422_not_another_orders_label,
    a_label_of_another_parcel_is_never_saved,
    sweeper_never_deletes_a_live_lease,
});

// ---- The simulated carrier's own key store and memory ----

mod carrier {
    use idemcalc::carrier::{
        Carrier, CarrierConfig, CarrierLabel, CarrierResult, Latency, Purchase, Service,
    };
    use idemcalc::clock::Millis;

    fn buy(carrier: &Carrier, key: &str, order_id: i64, now_ms: Millis) -> CarrierLabel {
        let p = Purchase {
            key: Some(key),
            order_id,
            parcel_no: 1,
            label_version: 1,
            service: Service::Ground,
            weight_g: 1000.0,
        };
        match carrier.purchase(&p, now_ms).result {
            CarrierResult::Label { label, .. } => label,
            other => panic!("{other:?}"),
        }
    }

    fn fixed(window_ms: Millis) -> CarrierConfig {
        CarrierConfig {
            latency: Latency::Fixed { ms: 0 },
            window_ms,
            ..CarrierConfig::default()
        }
    }

    /// A key reused within the window for another purchase is refused (nothing billed); the same
    /// purchase is replayed.
    #[test]
    fn a_key_reused_for_another_purchase_is_refused() {
        let carrier = Carrier::new(fixed(1_000));
        let first = buy(&carrier, "k", 7, 0);
        assert_eq!(
            buy(&carrier, "k", 7, 10),
            first,
            "the same purchase: replayed"
        );
        let p = Purchase {
            key: Some("k"),
            order_id: 8,
            parcel_no: 1,
            label_version: 1,
            service: Service::Ground,
            weight_g: 1000.0,
        };
        assert_eq!(carrier.purchase(&p, 20).result, CarrierResult::KeyReused);
        assert_eq!(carrier.stats().purchases, 1);
        // Past the window the key is new.
        assert!(matches!(
            carrier.purchase(&p, 2_000).result,
            CarrierResult::Label {
                replayed: false,
                ..
            }
        ));
    }

    /// Forgetting sales: what the carrier remembers of parcels and orders follows the window's
    /// traffic (about 100 sales here, of 10,000), tracking numbers stay unique when an order
    /// comes back after it was forgotten, and the invoice keeps its last lines only.
    #[test]
    fn forgetting_sales_bounds_memory_and_keeps_tracking_numbers_unique() {
        let carrier = Carrier::new(fixed(1_000))
            .forgetting_sales()
            .with_ledger_limit(500);
        let mut tracking = std::collections::HashSet::new();
        for i in 0..10_000i64 {
            let label = buy(&carrier, &format!("k{i}"), i % 2_000, i * 10);
            assert!(tracking.insert(label.tracking_no.clone()), "{label:?}");
            let (parcels, orders) = carrier.remembered_sales();
            assert!(parcels <= 101 && orders <= 101, "{parcels} {orders} at {i}");
        }
        assert_eq!(carrier.ledger().len(), 500);
        assert_eq!(carrier.ledger_dropped(), 9_500);
        assert!(
            tracking.iter().any(|t| t.contains("-r")),
            "orders came back"
        );
        // Kept whole without forgetting, as a simulation needs.
        let exact = Carrier::new(fixed(1_000));
        for i in 0..3_000i64 {
            buy(&exact, &format!("k{i}"), i % 2_000, i * 10);
        }
        assert_eq!(exact.remembered_sales(), (2_000, 2_000));
        assert_eq!(exact.stats().duplicate_purchases, 1_000);
    }
}
