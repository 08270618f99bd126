//! Redis as the key store (`store::redis`), against the real server named by
//! `IDEMCALC_REDIS_URL`: the seed's two reasons for rejecting a separate cache, each made to
//! happen and counted. The cases Redis honours run in `tests/it/conformance.rs` (`redis::*`).
//!
//! Each test works under a fresh key prefix; the one that changes a server setting (`maxmemory`)
//! starts a server of its own on a free port, so no test needs the shared server to be empty.

use crate::common;

use common::{BODY, Backend, Harness, KEY, OwnRedis};
use idemcalc::engine::{CarrierKey, DiePoint, EngineConfig, Finished, Outcome, Request};
use idemcalc::store::KeyState;

fn body(order_id: i64) -> String {
    format!(
        r#"{{"order_id":{order_id},"parcel_no":1,"label_version":1,"weight_g":1450,"service":"ground"}}"#
    )
}

fn request(order_id: i64) -> Request {
    Request::create_label(
        "fulfilment",
        Some(&format!("label:{order_id}:1:v1")),
        &body(order_id),
    )
}

/// The seed's txn 2 on two stores: the key's completion is a Redis write made at once, the
/// label a SQLite commit after it. A crash between them leaves a completed key whose label was
/// never stored, and the retry is replayed a label that does not exist. (On SQLite and
/// PostgreSQL the same crash writes nothing: `crash_inside_txn2_writes_nothing`.)
#[test]
fn a_crash_between_the_two_stores_replays_a_label_that_does_not_exist() {
    let Some(b) = Backend::redis() else { return };
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
    assert_eq!(row.state, KeyState::Completed, "the Redis half committed");
    assert_eq!(
        h.engine
            .store()
            .invariants()
            .unwrap()
            .completed_without_label,
        1
    );
    let retry = h.engine.handle(&h.request(BODY)).unwrap();
    assert_eq!(retry.outcome, Outcome::Replayed);
    assert_eq!(h.engine.store().count_labels().unwrap(), 0);
}

/// The other order (label first, as a cache-aside design writes it): a crash after the label's
/// commit and before the key's `SET` leaves the key unfinished; the retry takes the lease over
/// and buys again. Without a carrier key that is a second label paid for.
#[test]
fn a_crash_after_the_label_and_before_the_key_buys_a_second_label() {
    let Some(b) = Backend::redis() else { return };
    let config = EngineConfig {
        record_placement: idemcalc::engine::RecordPlacement::SeparateStore,
        carrier_key: CarrierKey::None,
        ..EngineConfig::default()
    };
    let mut h = Harness::with_config(b, config);
    let f = h
        .engine
        .handle_with_fault(&h.request(BODY), Some(DiePoint::InsideTxn2))
        .unwrap();
    assert_eq!(f, Finished::Died);
    assert_eq!(h.engine.store().count_labels().unwrap(), 1);
    h.clock.advance_ms(31_000);
    let retry = h.engine.handle(&h.request(BODY)).unwrap();
    assert_eq!(retry.status, 201);
    assert_eq!(
        h.carrier.stats().duplicate_purchases,
        1,
        "a label paid twice"
    );
}

/// Eviction: under `maxmemory` with `allkeys-lru`, Redis forgets records long before their
/// retention ends, and each forgotten key's retry is a new claim. With a carrier that keeps no
/// key of its own, every such retry buys a second label. The cap is set on a server of the
/// test's own: on a shared server holding other keys, the LRU evicts those instead.
#[test]
fn eviction_forgets_keys_and_their_retries_buy_again() {
    if Backend::redis().is_none() {
        return;
    }
    let Some(server) = OwnRedis::start() else {
        return;
    };
    let b = server.backend();
    let mut admin = redis::Client::open(server.url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let config = EngineConfig {
        carrier_key: CarrierKey::None,
        ..EngineConfig::default()
    };
    let mut h = Harness::with_config(b, config);
    const FIRST: i64 = 200;
    for id in 1..=FIRST {
        assert_eq!(h.engine.handle(&request(id)).unwrap().status, 201);
    }
    let info: String = redis::cmd("INFO").arg("memory").query(&mut admin).unwrap();
    let used: u64 = info
        .lines()
        .find_map(|l| l.strip_prefix("used_memory:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap();
    let evicted_before = evicted(&mut admin);

    // A cap just above what is in use, then more traffic: the least recently used records go.
    let set = |admin: &mut redis::Connection, name: &str, value: String| {
        let _: () = redis::cmd("CONFIG")
            .arg("SET")
            .arg(name)
            .arg(value)
            .query(admin)
            .unwrap();
    };
    // The run's hold key (the server is the test's own: it holds one), which the LRU may evict
    // with the records; every write script then refuses (the fence), so it is put back, with
    // its token, before the retries: what they show is the records' forgetting alone.
    let holds: Vec<String> = redis::cmd("KEYS").arg("*:hold").query(&mut admin).unwrap();
    assert_eq!(holds.len(), 1, "one hold key: {holds:?}");
    let token: String = redis::cmd("GET").arg(&holds[0]).query(&mut admin).unwrap();
    set(&mut admin, "maxmemory-policy", "allkeys-lru".into());
    set(&mut admin, "maxmemory", (used + 64 * 1024).to_string());
    for id in FIRST + 1..=FIRST + 1_500 {
        let _ = h.engine.handle(&request(id));
    }
    // Lift the cap before counting what was forgotten and before the retries: with the cap on,
    // any write (the hold's keep-alive among them) may evict one more record after the count.
    set(&mut admin, "maxmemory", "0".into());
    let forgotten = (1..=FIRST)
        .filter(|id| {
            h.engine
                .store()
                .get_key("fulfilment", &format!("label:{id}:1:v1"))
                .unwrap()
                .is_none()
        })
        .count() as u64;
    let _: () = redis::cmd("SET")
        .arg(&holds[0])
        .arg(&token)
        .arg("PX")
        .arg(15_000)
        .query(&mut admin)
        .unwrap();
    let before = h.carrier.stats().duplicate_purchases;
    for id in 1..=FIRST {
        let _ = h.engine.handle(&request(id));
    }
    let bought_again = h.carrier.stats().duplicate_purchases - before;
    let evictions = evicted(&mut admin) - evicted_before;
    eprintln!(
        "eviction: {evictions} keys evicted, {forgotten} of the first {FIRST} records forgotten within retention, {bought_again} labels bought again"
    );
    assert!(evictions > 0, "the cap must evict");
    assert!(forgotten > 0, "records forgotten before their retention");
    assert_eq!(
        bought_again, forgotten,
        "every forgotten key's retry buys a second label"
    );
}

fn evicted(admin: &mut redis::Connection) -> u64 {
    let info: String = redis::cmd("INFO").arg("stats").query(admin).unwrap();
    info.lines()
        .find_map(|l| l.strip_prefix("evicted_keys:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// `simulate` on Redis with crashes inside txn 2: each crash that had bought a label leaves a
/// completed record without one, and the detection signal counts them when they happen (it was
/// read from the store at the end of the run, after the sweeper had purged them, and said 0).
/// On SQLite the same crashes leave nothing completed.
#[test]
fn simulate_counts_completed_keys_without_a_label_as_they_happen() {
    let Some(url) = common::server_url(common::REDIS_URL_VAR) else {
        return;
    };
    let signal = |store: Option<&str>| {
        let mut args = vec![
            "simulate",
            "--retention",
            "10m",
            "--duration",
            "40m",
            "--rate",
            "20",
            "--crash-fraction",
            "0.01",
            "--crash-point",
            "inside-txn2",
            "--format",
            "json",
            "--quiet",
        ];
        if let Some(s) = store {
            args.extend(["--store", s]);
        }
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_idemcalc"))
            .args(&args)
            .output()
            .expect("run idemcalc");
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        let d = &v.get("runs").map_or(&v, |r| &r[0])["detection"];
        (
            d["completed_keys_without_label_per_day"].as_f64().unwrap(),
            d["invoice_lines_without_label_per_day"].as_f64().unwrap(),
        )
    };
    let (completed, invoiced) = signal(Some(&url));
    // 20/s for a day at 1 % is 17,280 crashed attempts, nearly all after buying a label.
    assert!(completed > 10_000.0, "{completed}");
    // Every such record's label is on the carrier's invoice and not in the labels table.
    assert!(completed <= invoiced * 1.0001, "{completed} vs {invoiced}");
    let (completed, _) = signal(None);
    assert_eq!(completed, 0.0);
}
