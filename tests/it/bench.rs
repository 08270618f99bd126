//! Group commit and `idemcalc bench`: behaviour only, never wall-clock figures.

use crate::common;

use common::{BODY, KEY, OTHER_BODY};
use idemcalc::bench::checkpoint::Checkpoints;
use idemcalc::bench::fill::{self, Filler, Layout};
use idemcalc::bench::{self, Baseline, BenchConfig, SqliteWriter};
use idemcalc::carrier::Carrier;
use idemcalc::clock::{Clock, SystemClock, VirtualClock};
use idemcalc::engine::{Begun, Engine, EngineConfig, Outcome, Request};
use idemcalc::store::group::{GroupCommitStore, GroupPolicy};
use idemcalc::store::{
    KeyState, LabelRow, NewKey, SqliteOptions, SqliteStore, Store, Synchronous, Tx,
};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

/// A policy that never closes a batch by itself, so each test decides when to flush.
fn manual() -> GroupPolicy {
    GroupPolicy {
        max_batch: 1000,
        max_wait: Duration::from_secs(1),
    }
}

fn temp_store() -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("store.sqlite");
    (dir, path)
}

fn open_group(path: &Path, policy: GroupPolicy) -> GroupCommitStore {
    GroupCommitStore::open(path, &SqliteOptions::default(), policy).unwrap()
}

/// Another connection, as another process would have.
fn other(path: &Path) -> SqliteStore {
    SqliteStore::open(path, &SqliteOptions::default()).unwrap()
}

/// Claims `key` in its own logical transaction and commits it (RELEASE) or drops it.
fn claim(tx: &mut dyn Tx, key: &str) {
    let inserted = tx
        .insert_key(&NewKey {
            caller_id: "c",
            idem_key: key,
            request_hash: &[7; 32],
            lease_token: &[1; 16],
            now_ms: 1,
            locked_until_ms: 30_001,
            expires_at_ms: 86_400_001,
        })
        .unwrap();
    assert!(inserted);
}

fn claim_committed(store: &mut GroupCommitStore, key: &str) {
    let mut tx = store.begin().unwrap();
    claim(tx.as_mut(), key);
    tx.commit().unwrap();
}

#[test]
fn a_dropped_logical_tx_rolls_back_only_itself() {
    let (_dir, path) = temp_store();
    let mut store = open_group(&path, manual());
    claim_committed(&mut store, "a");
    {
        let mut tx = store.begin().unwrap();
        claim(tx.as_mut(), "b");
        // Dropped without commit: what an attempt that dies inside its transaction does.
    }
    claim_committed(&mut store, "c");
    // The same connection already sees the batch as the next transaction would.
    assert!(store.get_key("c", "a").unwrap().is_some());
    assert!(store.get_key("c", "b").unwrap().is_none());
    store.flush().unwrap();

    let mut reader = other(&path);
    assert!(reader.get_key("c", "a").unwrap().is_some());
    assert!(reader.get_key("c", "b").unwrap().is_none());
    assert!(reader.get_key("c", "c").unwrap().is_some());
    let stats = store.stats();
    assert_eq!(
        (
            stats.commits,
            stats.logical_commits,
            stats.logical_rollbacks
        ),
        (1, 2, 1)
    );
    assert_eq!(stats.largest_batch, 3);
}

#[test]
fn nothing_of_a_batch_is_visible_to_another_connection_before_its_commit() {
    let (_dir, path) = temp_store();
    let mut store = open_group(&path, manual());
    let mut reader = other(&path);
    claim_committed(&mut store, "a");
    claim_committed(&mut store, "b");
    assert_eq!(reader.count_keys().unwrap(), 0);
    assert!(reader.get_key("c", "a").unwrap().is_none());
    store.flush().unwrap();
    assert_eq!(reader.count_keys().unwrap(), 2);
}

#[test]
fn answers_wait_for_their_batch_and_a_crash_loses_only_the_open_one() {
    let (_dir, path) = temp_store();
    let mut store = open_group(&path, manual());
    assert_eq!(store.ticket(), 0, "nothing pending before any transaction");
    claim_committed(&mut store, "kept");
    let first = store.ticket();
    assert!(
        first > store.ended_through(),
        "not durable before the commit"
    );
    store.flush().unwrap();
    assert!(first <= store.ended_through(), "durable after the commit");
    assert!(store.take_lost().is_empty());
    assert_eq!(store.ticket(), 0);

    claim_committed(&mut store, "lost");
    let second = store.ticket();
    assert!(second > first);
    assert!(second > store.ended_through());
    // The process dies here: the connection closes with the batch open, and the answer held for
    // `second` was never given.
    drop(store);

    let mut reader = other(&path);
    assert!(reader.get_key("c", "kept").unwrap().is_some());
    assert!(reader.get_key("c", "lost").unwrap().is_none());
    assert!(reader.invariants().unwrap().integrity_ok);
}

#[test]
fn a_full_batch_commits_before_the_next_transaction_begins() {
    let (_dir, path) = temp_store();
    let mut store = open_group(
        &path,
        GroupPolicy {
            max_batch: 2,
            max_wait: Duration::from_secs(1),
        },
    );
    // Opened first: opening a store takes the write lock, which the open batch holds.
    let mut reader = other(&path);
    claim_committed(&mut store, "a");
    assert!(!store.is_due());
    claim_committed(&mut store, "b");
    assert!(store.is_due());
    let full = store.ticket();
    claim_committed(&mut store, "c");
    assert_eq!(store.ended_through(), full);
    assert_eq!(store.stats().commits, 1);
    assert_eq!(store.stats().largest_batch, 2);
    assert_eq!(reader.count_keys().unwrap(), 2);
}

#[test]
fn a_batch_is_due_once_it_has_waited_its_maximum() {
    let (_dir, path) = temp_store();
    let mut store = open_group(
        &path,
        GroupPolicy {
            max_batch: 1000,
            max_wait: Duration::from_millis(1),
        },
    );
    claim_committed(&mut store, "a");
    std::thread::sleep(Duration::from_millis(5));
    assert!(store.is_due());
    store.flush_if_due().unwrap();
    assert_eq!(store.ticket(), 0);
    assert_eq!(other(&path).count_keys().unwrap(), 1);
}

#[test]
fn a_failed_statement_undoes_its_logical_tx_and_leaves_the_batch() {
    let (_dir, path) = temp_store();
    // A statement the store refuses: a trigger aborts any label for order 2.
    drop(other(&path));
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TRIGGER refuse BEFORE INSERT ON labels WHEN NEW.order_id = 2
             BEGIN SELECT RAISE(ABORT, 'refused'); END;",
        )
        .unwrap();
    let mut store = open_group(&path, manual());
    claim_committed(&mut store, "a");
    let label = |order_id| LabelRow {
        label_id: format!("L-{order_id}"),
        order_id,
        parcel_no: 1,
        label_version: 1,
        tracking_no: "GRD000000001".into(),
        cost_cents: 600,
        created_by_key: "a".into(),
        order_space: String::new(),
    };
    {
        let mut tx = store.begin().unwrap();
        assert_eq!(tx.insert_label(&label(1)).unwrap(), None);
        claim(tx.as_mut(), "b");
        // The statement fails and the engine would drop the transaction.
        assert!(tx.insert_label(&label(2)).is_err());
    }
    claim_committed(&mut store, "c");
    store.flush().unwrap();
    assert!(store.take_lost().is_empty());
    let mut reader = other(&path);
    assert_eq!(reader.count_keys().unwrap(), 2);
    assert!(reader.get_key("c", "b").unwrap().is_none());
    assert_eq!(reader.count_labels().unwrap(), 0);
}

/// The seed's status table through the engine over group commit, flushing as a writer would.
#[test]
fn the_engine_answers_over_group_commit_as_over_sqlite() {
    let (_dir, path) = temp_store();
    let store = open_group(&path, manual());
    let clock = VirtualClock::new();
    let mut engine = Engine::new(
        Box::new(store.clone()),
        Arc::new(Carrier::new(common::carrier_config())),
        Arc::new(clock.clone()),
        EngineConfig::default(),
    );
    let req = |body: &str| Request::create_label("fulfilment", Some(KEY), body);

    let first = engine.handle(&req(BODY)).unwrap();
    assert_eq!((first.status, first.outcome), (201, Outcome::Created));
    let replay = engine.handle(&req(BODY)).unwrap();
    assert_eq!(replay.outcome, Outcome::Replayed);
    assert_eq!(replay.body, first.body);
    assert_eq!(
        engine.handle(&req(OTHER_BODY)).unwrap().outcome,
        Outcome::KeyReused
    );

    // An attempt claims another key and dies before the carrier: its lease is held.
    let held_req = Request::create_label("fulfilment", Some("label:918273:2:v1"), BODY);
    match engine.begin(&held_req).unwrap() {
        Begun::Owned(_) => {}
        Begun::Answered(r) => panic!("expected the lease, got {r:?}"),
    }
    assert_eq!(
        engine.handle(&held_req).unwrap().outcome,
        Outcome::InProgress
    );
    clock.advance_ms(30_001);
    let takeover = engine.handle(&held_req).unwrap();
    assert_eq!(takeover.outcome, Outcome::Created);
    store.flush().unwrap();

    let mut reader = other(&path);
    let row = reader.get_key("fulfilment", KEY).unwrap().unwrap();
    assert_eq!(row.state, KeyState::Completed);
    let inv = reader.invariants().unwrap();
    assert!(inv.integrity_ok);
    assert_eq!(inv.completed_without_label, 0);
    assert_eq!(inv.max_labels_per_parcel, 1);
    assert_eq!(reader.count_labels().unwrap(), 1, "one label per parcel");
}

/// The baseline must write what the engine writes, or the ratio compares different work.
#[test]
fn baseline_leaves_the_rows_the_engine_leaves() {
    let (_dir, path) = temp_store();
    let baseline_path = path.with_file_name("baseline.sqlite");
    let layout = Layout {
        completed: 3,
        held: 2,
        lease_expired: 2,
    };
    let now = SystemClock.now_ms();
    for p in [&path, &baseline_path] {
        let mut f = Filler::open(p).unwrap();
        f.fill(&layout, now).unwrap();
        f.close().unwrap();
    }
    let mut engine = Engine::new(
        Box::new(other(&path)),
        Arc::new(Carrier::new(common::carrier_config())),
        Arc::new(SystemClock),
        EngineConfig::default(),
    );
    let mut baseline = Baseline::new(SqliteWriter::PerTransaction(other(&baseline_path)));
    let fresh = layout.fresh_from();
    let takeover = layout.lease_expired_ids().start;
    let replay = layout.completed_ids().start;
    let held = layout.held_ids().start;
    for (id, engine_outcome, baseline_outcome) in [
        (fresh, Outcome::Created, Outcome::Created),
        (takeover, Outcome::Created, Outcome::Created),
        (replay, Outcome::Replayed, Outcome::Replayed),
        (held, Outcome::InProgress, Outcome::InProgress),
    ] {
        let req = Request::create_label(
            fill::CALLER,
            Some(&fill::key(id)),
            &fill::body(id, fill::WEIGHT_G),
        );
        assert_eq!(engine.handle(&req).unwrap().outcome, engine_outcome);
        assert_eq!(
            baseline.create(id, &fill::key(id)).unwrap(),
            baseline_outcome
        );
    }
    for id in [fresh, takeover, replay, held] {
        let e = engine
            .store()
            .get_key(fill::CALLER, &fill::key(id))
            .unwrap()
            .unwrap();
        let b = baseline
            .store()
            .get_key(fill::CALLER, &fill::key(id))
            .unwrap()
            .unwrap();
        assert_eq!(e.state, b.state, "order {id}");
        assert_eq!(e.response_status, b.response_status, "order {id}");
        assert_eq!(e.locked_until_ms.is_some(), b.locked_until_ms.is_some());
        assert_eq!(e.lease_token.is_some(), b.lease_token.is_some());
        let shape = |body: Option<String>| {
            body.map(|s| {
                let v: serde_json::Value = serde_json::from_str(&s).unwrap();
                v.as_object().unwrap().keys().cloned().collect::<Vec<_>>()
            })
        };
        assert_eq!(shape(e.response_body), shape(b.response_body), "order {id}");
    }
    assert_eq!(
        engine.store().count_labels().unwrap(),
        baseline.store().count_labels().unwrap()
    );
    assert!(engine.store().invariants().unwrap().completed_without_label == 0);
    assert!(
        baseline
            .store()
            .invariants()
            .unwrap()
            .completed_without_label
            == 0
    );
}

fn small(group: Option<GroupPolicy>, rate_per_s: Option<f64>) -> BenchConfig {
    BenchConfig {
        workers: 4,
        rate_per_s,
        duration: Duration::from_millis(200),
        mix: "first=60,replay=10,conflict=10,takeover=10,reused=10"
            .parse()
            .unwrap(),
        prefill_keys: 500,
        group,
        ..BenchConfig::default()
    }
}

#[test]
fn a_run_answers_every_kind_and_checks_the_invariants_in_both_modes() {
    for (group, rate, checkpoints, synchronous) in [
        (None, None, Checkpoints::Background, Synchronous::Normal),
        (
            Some(GroupPolicy::default()),
            None,
            Checkpoints::Background,
            Synchronous::Normal,
        ),
        (
            Some(GroupPolicy::default()),
            Some(400.0),
            Checkpoints::Inline,
            Synchronous::Full,
        ),
        (None, Some(400.0), Checkpoints::Deferred, Synchronous::Off),
    ] {
        let config = BenchConfig {
            checkpoints,
            synchronous,
            ..small(group, rate)
        };
        let report = bench::run(&config).unwrap();
        assert!(report.ok, "{}", bench::render_table(&report));
        for side in [&report.engine, &report.baseline] {
            assert!(side.invariants.ok);
            assert_eq!(side.unexpected_answers, 0);
            assert!(side.requests > 0);
            assert_eq!(
                side.invariants.labels_stored,
                side.invariants.labels_expected
            );
        }
        for kind in ["first", "replay", "conflict", "takeover", "reused"] {
            let v = serde_json::to_value(report.engine.by_kind).unwrap();
            assert!(v[kind].as_u64().unwrap() > 0, "no {kind} requests");
        }
        assert_eq!(report.engine.group_commit.is_some(), group.is_some());
        assert_eq!(
            report.engine.checkpoints.is_some(),
            checkpoints == Checkpoints::Background
        );
        if let Some(g) = report.engine.group_commit {
            assert_eq!(g.lost_batches, 0);
            assert!(g.commits > 0);
        }
        assert!(report.creates_per_s > 0.0 && report.baseline_creates_per_s > 0.0);
        assert!(report.overhead_ratio > 0.0);
        assert!(report.latency_us.p50 <= report.latency_us.p99);
        assert!(report.latency_us.p99 <= report.latency_us.p99_9);
        assert!(report.latency_us.p99_9 <= report.latency_us.max);
    }
}

#[test]
fn a_run_refuses_what_it_cannot_do() {
    let mut c = small(None, None);
    c.prefill_keys = 0;
    let e = bench::run(&c).unwrap_err().to_string();
    assert!(e.contains("--prefill"), "{e}");

    let mut c = small(None, None);
    c.workers = 0;
    assert!(
        bench::run(&c)
            .unwrap_err()
            .to_string()
            .contains("--workers")
    );

    let c = small(None, Some(-1.0));
    assert!(bench::run(&c).unwrap_err().to_string().contains("--rate"));

    let mut c = small(
        Some(GroupPolicy {
            max_batch: 0,
            max_wait: Duration::from_millis(2),
        }),
        None,
    );
    c.synchronous = Synchronous::Full;
    assert!(bench::run(&c).unwrap_err().to_string().contains("batch"));
}

fn idemcalc(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(args)
        .output()
        .expect("run idemcalc")
}

#[test]
fn the_command_prints_the_figures_as_json() {
    let out = idemcalc(&[
        "bench",
        "--duration",
        "200ms",
        "--prefill",
        "500",
        "--workers",
        "4",
        "--group-commit",
        "on",
        "--format",
        "json",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    for field in [
        "creates_per_s",
        "baseline_creates_per_s",
        "overhead_ratio",
        "rate_vs_baseline",
    ] {
        assert!(v[field].as_f64().unwrap() > 0.0, "{field}");
    }
    for p in ["p50", "p99", "p99_9", "max"] {
        assert!(v["latency_us"][p].as_u64().unwrap() > 0, "{p}");
        assert!(v["baseline_latency_us"][p].as_u64().unwrap() > 0, "{p}");
    }
    assert_eq!(v["schema_version"], 3);
    // Issue 53's fields: the ratio's resolution, the ceiling's slices and the share's interval,
    // the machine before the run.
    assert!(v["ratio_resolution"]["too_wide"].is_boolean(), "{v}");
    assert!(v["ratio"]["low"].as_f64().unwrap() > 0.0, "{v}");
    let c = &v["ceiling"];
    assert_eq!(
        c["per_s_spread"]["n"].as_u64(),
        Some(bench::ceiling::CEILING_SLICES as u64),
        "{c}"
    );
    assert!(c["engine_share_ci95"]["low"].as_f64().unwrap() > 0.0, "{c}");
    assert!(c["share_is_noise"].is_boolean(), "{c}");
    assert!(v["machine"].get("cpu_busy_before").is_some(), "{v}");
    assert_eq!(v["commit_mode"], "sqlite:group");
    assert_eq!(v["ok"], true);
    assert_eq!(v["engine"]["invariants"]["ok"], true);
}

#[test]
fn the_command_refuses_bad_input_with_exit_code_2() {
    let dir = tempfile::tempdir().unwrap();
    let existing = dir.path().join("there.sqlite");
    std::fs::write(&existing, b"").unwrap();
    for args in [
        vec!["bench", "--mix", "frist=1"],
        vec!["bench", "--workers", "0"],
        vec!["bench", "--duration", "soon"],
        vec!["bench", "--rate", "0"],
        vec!["bench", "--store", existing.to_str().unwrap()],
    ] {
        let out = idemcalc(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        assert!(!out.stderr.is_empty(), "{args:?} says why");
    }
}

/// Issue 53: rerunning an identical `bench --store sqlite:FILE` replaces the two stores the
/// first run left (the store and its `_baseline` sibling, both idemcalc stores, held by no one),
/// as hyperfine and criterion reruns do; a lone file named by `--store` (someone's store) is
/// still refused, and kept.
#[test]
fn a_rerun_replaces_the_stores_its_first_run_left_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.sqlite");
    let mut c = small(None, None);
    c.store = Some(path.display().to_string());
    let first = bench::run(&c).unwrap();
    assert!(first.ok);
    let second = bench::run(&c).unwrap();
    assert!(second.ok, "{}", bench::render_table(&second));
    let mut reader = other(&path);
    assert_eq!(
        reader.count_labels().unwrap(),
        second.engine.invariants.labels_expected,
        "the second run's store holds its own labels only"
    );
    drop(reader);
    std::fs::remove_file(dir.path().join("run_baseline.sqlite")).unwrap();
    let err = bench::run(&c).unwrap_err().to_string();
    assert!(err.contains("exists already"), "{err}");
    assert!(path.exists(), "a lone store is kept");
}

#[test]
fn a_kept_store_holds_what_the_run_wrote() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.sqlite");
    let mut c = small(Some(GroupPolicy::default()), None);
    c.store = Some(path.display().to_string());
    let report = bench::run(&c).unwrap();
    assert!(report.ok);
    assert!(dir.path().join("run_baseline.sqlite").exists());
    let mut reader = other(&path);
    assert_eq!(
        reader.count_labels().unwrap(),
        report.engine.invariants.labels_expected
    );
    // The completion of a first run, read from another connection after the run.
    let completed: Vec<_> = reader
        .labels()
        .unwrap()
        .into_iter()
        .filter(|l| !l.label_id.starts_with("F-"))
        .collect();
    assert!(!completed.is_empty());
    let k = reader
        .get_key(fill::CALLER, &completed[0].created_by_key)
        .unwrap()
        .unwrap();
    assert_eq!(k.state, KeyState::Completed);
}

/// The PostgreSQL URL the suite runs against, or `None` (said loudly) off CI without one.
fn pg_url() -> Option<String> {
    common::Backend::postgres().map(|b| match &b {
        common::Backend::Postgres { url, .. } => url.clone(),
        _ => unreachable!("Backend::postgres gives a PostgreSQL backend"),
    })
}

/// Issue 14: `idemcalc bench --store postgres://…` failed with "unable to open database file".
#[test]
fn bench_on_postgres_runs_the_mix_with_a_pool_and_checks_the_invariants() {
    let Some(url) = pg_url() else { return };
    for synchronous in [Synchronous::Normal, Synchronous::Off] {
        let config = BenchConfig {
            store: Some(url.clone()),
            pool_size: 3,
            synchronous,
            ..small(None, None)
        };
        let report = bench::run(&config).unwrap();
        assert!(report.ok, "{}", bench::render_table(&report));
        assert_eq!(report.commit_mode, "postgres:per_transaction");
        assert_eq!(report.config.pool_size, Some(3));
        for side in [&report.engine, &report.baseline] {
            assert_eq!(side.unexpected_answers, 0, "{:?}", side.first_problem);
            assert_eq!(side.error_answers, 0, "{:?}", side.first_problem);
            assert!(side.invariants.ok);
            assert!(side.invariants.labels_stored > 500);
        }
        for kind in ["first", "replay", "conflict", "takeover", "reused"] {
            let v = serde_json::to_value(report.engine.by_kind).unwrap();
            assert!(v[kind].as_u64().unwrap() > 0, "no {kind} requests");
        }
        // pgbench ran the seed's statements on its own schema (CI has it with PostgreSQL).
        let pg = report
            .pgbench
            .as_ref()
            .unwrap_or_else(|| panic!("no pgbench figure: {:?}", report.pgbench_note));
        assert!(pg.creates_per_s > 0.0 && pg.engine_vs_pgbench > 0.0);
        assert_eq!(pg.failed, 0);
        assert!(!report.config.stores_kept);
    }
}

/// `bench --sweeper partitions`: the same mix on a key table partitioned by expiry, claims by
/// advisory lock on both sides and in pgbench's scripts, every check holding.
#[test]
fn bench_on_a_partitioned_key_table_runs_the_mix_and_pgbench() {
    let Some(url) = pg_url() else { return };
    let config = BenchConfig {
        store: Some(url.clone()),
        pool_size: 3,
        sweeper: idemcalc::store::Sweeper::Partitions {
            period_ms: 6 * 3_600_000,
        },
        ..small(None, None)
    };
    let report = bench::run(&config).unwrap();
    assert!(report.ok, "{}", bench::render_table(&report));
    assert_eq!(report.config.partition_period_ms, Some(6 * 3_600_000));
    for side in [&report.engine, &report.baseline] {
        assert_eq!(side.unexpected_answers, 0, "{:?}", side.first_problem);
        assert!(side.invariants.ok);
    }
    let pg = report
        .pgbench
        .as_ref()
        .unwrap_or_else(|| panic!("no pgbench figure: {:?}", report.pgbench_note));
    assert_eq!(pg.failed, 0);
    // Partitions are PostgreSQL's.
    let e = bench::run(&BenchConfig {
        store: None,
        ..config
    })
    .unwrap_err()
    .to_string();
    assert!(e.contains("--sweeper partitions"), "{e}");
}

#[test]
fn bench_on_a_named_postgres_schema_keeps_it_and_refuses_to_refill_it() {
    let Some(url) = pg_url() else { return };
    let schema = format!("bench_{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
    let spec = format!("{url}?schema={schema}");
    let config = BenchConfig {
        store: Some(spec.clone()),
        pool_size: 2,
        pgbench: false,
        ..small(None, None)
    };
    let report = bench::run(&config).unwrap();
    assert!(report.ok, "{}", bench::render_table(&report));
    assert!(report.config.stores_kept);
    let again = bench::run(&config).unwrap_err().to_string();
    assert!(
        again.contains("exists") && again.contains(&schema),
        "{again}"
    );
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let labels: i64 = admin
        .query_one(&format!("SELECT count(*) FROM {schema}.labels"), &[])
        .unwrap()
        .get(0);
    assert_eq!(labels as u64, report.engine.invariants.labels_stored);
    admin
        .batch_execute(&format!(
            "DROP SCHEMA {schema} CASCADE; DROP SCHEMA {schema}_baseline CASCADE;"
        ))
        .unwrap();
}

/// The Redis URL the suite runs against, or `None` (said loudly) off CI without one.
fn redis_url() -> Option<String> {
    common::Backend::redis().map(|b| match &b {
        common::Backend::Redis { url, .. } => url.clone(),
        _ => unreachable!("Backend::redis gives a Redis backend"),
    })
}

/// Issue 14: `idemcalc bench --store redis://…` ran nothing (it said so and exited 2).
#[test]
fn bench_on_redis_runs_the_mix_with_a_pool_and_checks_both_stores() {
    let Some(url) = redis_url() else { return };
    let config = BenchConfig {
        store: Some(url.clone()),
        pool_size: 3,
        ..small(None, None)
    };
    let report = bench::run(&config).unwrap();
    assert!(report.ok, "{}", bench::render_table(&report));
    assert_eq!(report.commit_mode, "redis:per_transaction");
    assert_eq!(report.config.store_kind, "redis");
    assert_eq!(report.config.pool_size, Some(3));
    for side in [&report.engine, &report.baseline] {
        assert_eq!(side.unexpected_answers, 0, "{:?}", side.first_problem);
        assert_eq!(side.error_answers, 0, "{:?}", side.first_problem);
        assert!(side.invariants.ok, "{:?}", side.invariants);
        assert!(side.invariants.labels_stored > 500);
    }
    for kind in ["first", "replay", "conflict", "takeover", "reused"] {
        let v = serde_json::to_value(report.engine.by_kind).unwrap();
        assert!(v[kind].as_u64().unwrap() > 0, "no {kind} requests");
    }
    assert!(!report.config.stores_kept);
    // The scratch prefixes are gone.
    let mut con = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    for side in [&report.engine, &report.baseline] {
        let prefix = side
            .store
            .split("prefix ")
            .nth(1)
            .and_then(|rest| rest.split(',').next())
            .unwrap_or_else(|| panic!("no prefix in {}", side.store));
        let left: Vec<String> = redis::cmd("KEYS")
            .arg(format!("{prefix}:*"))
            .query(&mut con)
            .unwrap();
        assert!(left.is_empty(), "{prefix}: {} keys left", left.len());
    }
}

#[test]
fn bench_on_a_named_redis_prefix_keeps_it_and_refuses_to_refill_it() {
    let Some(url) = redis_url() else { return };
    let prefix = format!("bench_{}", &uuid::Uuid::new_v4().simple().to_string()[..10]);
    let config = BenchConfig {
        store: Some(format!("{url}?prefix={prefix}")),
        pool_size: 2,
        ..small(None, None)
    };
    let report = bench::run(&config).unwrap();
    assert!(report.ok, "{}", bench::render_table(&report));
    assert!(report.config.stores_kept);
    let again = bench::run(&config).unwrap_err().to_string();
    assert!(again.contains(&prefix), "{again}");
    let mut con = redis::Client::open(url.as_str())
        .unwrap()
        .get_connection()
        .unwrap();
    let records: u64 = redis::cmd("ZCARD")
        .arg(format!("{prefix}:exp"))
        .query(&mut con)
        .unwrap();
    // Every prefilled key and every key the run claimed is there (a 400 path deletes none here).
    let firsts = serde_json::to_value(report.engine.by_kind).unwrap()["first"]
        .as_u64()
        .unwrap();
    assert!(records >= report.config.layout.completed + firsts);
    for p in [prefix.clone(), format!("{prefix}_baseline")] {
        idemcalc::store::redis::drop_prefix(&url, &p).unwrap();
        let _ = std::fs::remove_file(idemcalc::store::redis::named_labels_path(&p).unwrap());
    }
}

/// Issue 15: `bench` had no Ctrl-C handler; it died with no output and left a WAL of hundreds
/// of MB. Now SIGINT ends the measurement, the stores are checked and checkpointed, and the
/// report says how far the run got (exit 130).
#[test]
fn bench_sigint_prints_how_far_it_got_and_checkpoints_the_wal() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("run.sqlite");
    let child = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args([
            "bench",
            "--duration",
            "60s",
            "--runs",
            "1",
            "--prefill",
            "500",
            "--workers",
            "4",
            "--store",
            path.to_str().unwrap(),
        ])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Wait (bounded) until the run is measuring: the fill is done and the engine has written.
    let wal = dir.path().join("run.sqlite-wal");
    for _ in 0..300 {
        if std::fs::metadata(&wal).is_ok_and(|m| m.len() > 0) {
            break;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(300));
    let killed = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(130),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("interrupted: measured"), "{stdout}");
    assert!(stdout.contains("WAL checkpointed"), "{stdout}");
    assert!(stdout.contains("result: ok"), "{stdout}");
    for p in [&path, &dir.path().join("run_baseline.sqlite")] {
        let wal = p.with_extension("sqlite-wal");
        assert!(
            std::fs::metadata(&wal).map_or(true, |m| m.len() == 0),
            "{} left behind",
            wal.display()
        );
        let mut store = other(p);
        let inv = store.invariants().unwrap();
        assert!(inv.integrity_ok && inv.completed_without_label == 0);
        assert!(inv.max_labels_per_parcel <= 1);
    }
}

/// Issue 15: two runs on one store at once interfered. The second is now refused, naming the
/// store, with exit 2, while the first goes on undisturbed.
#[test]
fn a_second_bench_on_a_sqlite_file_in_use_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("held.sqlite");
    // This process holds the store (as a run does) while another process tries to use it.
    let holder = other(&path);
    let out = idemcalc(&[
        "bench",
        "--duration",
        "100ms",
        "--store",
        path.to_str().unwrap(),
    ]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("in use by another idemcalc run"),
        "{stderr}"
    );
    assert!(stderr.contains(&std::process::id().to_string()), "{stderr}");
    drop(holder);
    assert!(!idemcalc::store::exclusive::lock_path(&path).exists());
}

/// The figures of a repeated run, as the table says them: mean ± σ per side, the paired ratio
/// with its interval, the rates beside creates/s, and the store's ceiling.
fn assert_runs_table(table: &str, report: &bench::Report, runs: u32) {
    assert_eq!(report.runs_done, runs, "{table}");
    assert_eq!(report.runs.engine.len(), runs as usize);
    assert_eq!(report.runs.baseline.len(), runs as usize);
    for side in ["engine", "baseline"] {
        let line = table
            .lines()
            .find(|l| l.starts_with(&format!("{side} creates/s")))
            .unwrap_or_else(|| panic!("no {side} creates/s line:\n{table}"));
        assert!(line.contains(" ± "), "{line}");
        for what in ["p50", "p99"] {
            assert!(
                table.contains(&format!("{side} {what} ")),
                "no {side} {what}:\n{table}"
            );
        }
        assert!(
            table.contains(&format!("{side} per second: "))
                && table.contains(" in progress (409), "),
            "{table}"
        );
    }
    assert!(
        table.contains("engine / baseline creates/s: ") && table.contains("95 % interval"),
        "{table}"
    );
    let (low, high) = (report.ratio.low.unwrap(), report.ratio.high.unwrap());
    assert!(0.0 < low && low <= report.ratio.mean && report.ratio.mean <= high);
    // Too wide or not, the table says which, with the runs that would narrow it.
    let res = report.ratio_resolution.unwrap();
    assert_eq!(
        table.contains("too wide to tell a change of ±5 %"),
        res.too_wide,
        "{table}"
    );
    let c = report
        .ceiling
        .as_ref()
        .unwrap_or_else(|| panic!("no ceiling: {:?}", report.ceiling_note));
    assert!(c.per_s > 0.0 && c.creates_per_s > 0.0 && c.engine_share > 0.0);
    // The ceiling is measured in slices and shown with their spread.
    let s = &c.per_s_spread;
    assert_eq!(s.n, bench::ceiling::CEILING_SLICES);
    assert!(
        s.min <= s.mean && s.mean <= s.max && s.mean == c.per_s,
        "{s:?}"
    );
    let (share_low, share_high) = c.engine_share_ci95.bounds().unwrap();
    assert!(0.0 < share_low && share_low <= c.engine_share && c.engine_share <= share_high);
    assert!(
        table.contains("ceiling: ")
            && table.contains(&format!("({} slices", s.n))
            && table.contains(" per create = "),
        "{table}"
    );
    assert_eq!(table.contains("share of it is noise"), c.share_is_noise);
    assert!(table.contains("the engine reaches "), "{table}");
    // creates/s counts created labels only: the replays and 409s of the mix are beside it.
    for r in &report.runs.engine {
        assert!(r.creates > 0 && r.replays > 0 && r.conflicts > 0, "{r:?}");
        assert!(r.creates + r.replays + r.conflicts + r.reused <= r.requests);
        assert!(r.p50_us <= r.p99_us);
    }
}

fn repeated(store: Option<String>, pool_size: u32) -> BenchConfig {
    BenchConfig {
        store,
        pool_size,
        runs: 3,
        duration: Duration::from_millis(300),
        pgbench: false,
        ..small(None, None)
    }
}

#[test]
fn repeated_runs_on_sqlite_give_each_side_spread_ratio_interval_and_ceiling() {
    let report = bench::run(&repeated(None, 1)).unwrap();
    let table = bench::render_table(&report);
    assert!(report.ok, "{table}");
    assert_runs_table(&table, &report, 3);
    let c = report.ceiling.as_ref().unwrap();
    assert_eq!((c.unit.as_str(), c.per_create), ("flushes", 2.0));
}

#[test]
fn repeated_runs_on_postgres_give_each_side_spread_ratio_interval_and_ceiling() {
    let Some(url) = pg_url() else { return };
    let report = bench::run(&repeated(Some(url), 2)).unwrap();
    let table = bench::render_table(&report);
    assert!(report.ok, "{table}");
    assert_runs_table(&table, &report, 3);
    assert_eq!(report.ceiling.as_ref().unwrap().unit, "commits");
}

#[test]
fn repeated_runs_on_redis_give_each_side_spread_ratio_interval_and_ceiling() {
    let Some(url) = redis_url() else { return };
    let report = bench::run(&repeated(Some(url), 2)).unwrap();
    let table = bench::render_table(&report);
    assert!(report.ok, "{table}");
    assert_runs_table(&table, &report, 3);
    assert_eq!(report.ceiling.as_ref().unwrap().unit, "round trips");
}

/// `--save-baseline` then `--baseline`: a run against its own saved figures is "no change";
/// against the same file edited so the engine was 30 % faster, "regressed" exactly when the
/// difference's interval excludes 0 (on 300 ms runs of a shared machine σ can reach 30 %, and
/// then 30 % is within the noise: the rule is checked on the run's samples and on tight
/// synthetic ones); and the command exits 1 on a regression beyond `--fail-on-regression`
/// against a file edited to ten times the run's rate with no spread, which no noise covers.
#[test]
fn a_saved_baseline_says_no_change_against_itself_and_regressed_against_a_faster_one() {
    let dir = tempfile::tempdir().unwrap();
    let saved = dir.path().join("saved.json");
    let common = [
        "bench",
        "--duration",
        "300ms",
        "--runs",
        "3",
        "--prefill",
        "500",
        "--workers",
        "4",
    ];
    let mut args = common.to_vec();
    args.extend(["--save-baseline", saved.to_str().unwrap()]);
    let out = idemcalc(&args);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&saved).unwrap()).unwrap();
    let own = bench::runs::saved_engine_creates(&json).unwrap();
    assert_eq!(own.len(), 3);

    // Against itself: no change at all, and a verdict of "no change" or, when 3 runs of
    // 300 ms spread wider than ±10 %, "cannot tell"; never a regression.
    let same = bench::runs::compare("saved.json", &own, &own, Some(0.10));
    assert!(same.change.abs() < 1e-12, "{same:?}");
    assert!(
        matches!(
            same.verdict,
            bench::runs::Verdict::NoChange | bench::runs::Verdict::TooWide
        ),
        "{same:?}"
    );
    assert_eq!(
        same.verdict == bench::runs::Verdict::TooWide,
        same.resolution.unwrap().too_wide
    );
    assert!(!same.fails);

    let faster = |factor: f64| {
        let mut edited = json.clone();
        for r in edited["runs"]["engine"].as_array_mut().unwrap() {
            let v = r["creates_per_s"].as_f64().unwrap();
            r["creates_per_s"] = serde_json::json!(v * factor);
        }
        edited
    };
    let edited = bench::runs::saved_engine_creates(&faster(1.3)).unwrap();
    let c = bench::runs::compare("faster.json", &edited, &own, Some(0.10));
    // The ratio of the geometric means is exactly 1 / 1.3.
    assert!((c.change + 0.3 / 1.3).abs() < 1e-9, "{c:?}");
    let beyond_noise = c.change_high.unwrap() < 0.0;
    assert_eq!(
        c.verdict == bench::runs::Verdict::Regressed,
        beyond_noise,
        "{c:?}"
    );
    assert_eq!(c.fails, beyond_noise);
    let tight = [1000.0, 1010.0, 990.0];
    let tight_faster: Vec<f64> = tight.iter().map(|x| x * 1.3).collect();
    let c = bench::runs::compare("faster.json", &tight_faster, &tight, Some(0.10));
    assert_eq!(c.verdict, bench::runs::Verdict::Regressed, "{c:?}");
    assert!(c.fails);

    let mean = own.iter().sum::<f64>() / own.len() as f64;
    let mut far = json.clone();
    for r in far["runs"]["engine"].as_array_mut().unwrap() {
        r["creates_per_s"] = serde_json::json!(mean * 10.0);
    }
    let faster_file = dir.path().join("faster.json");
    std::fs::write(&faster_file, far.to_string()).unwrap();
    let mut args = common.to_vec();
    args.extend([
        "--baseline",
        faster_file.to_str().unwrap(),
        "--fail-on-regression",
        "10",
    ]);
    let out = idemcalc(&args);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("): regressed"), "{stdout}");
    assert!(
        stdout.contains("beyond --fail-on-regression 10.0 %"),
        "{stdout}"
    );
}

/// The noise rule on synthetic samples: a busy loop competing with a run does not make the
/// spread cross 10 % reliably on a shared machine, so the rule is tested on figures, not on
/// the machine. Only the machine before the run is judged: issue 53's PostgreSQL run had a
/// load of 0.82 before and 4.87 after, all of it the bench and its own PostgreSQL.
#[test]
fn the_noise_warning_names_wide_spread_and_a_loaded_machine_before_the_run() {
    use bench::Machine;
    use bench::machine::MachineBefore;
    use bench::runs::{Spread, noise_warnings};
    let tight = Spread::of(&[1000.0, 1010.0, 990.0, 1005.0, 995.0]);
    let wide = Spread::of(&[1290.0, 740.0, 710.0, 1000.0, 1100.0]);
    let quiet = MachineBefore {
        load_1m: Some(0.5),
        cpu_busy: Some(0.1),
        cores: 2,
    };
    assert!(noise_warnings(&tight, &tight, &quiet).is_empty());
    let w = noise_warnings(&wide, &tight, &quiet);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("engine σ") && !w[0].contains("baseline σ"),
        "{w:?}"
    );
    for what in ["close other programs", "--runs", "--duration"] {
        assert!(w[0].contains(what), "{w:?}");
    }
    let loaded = MachineBefore {
        load_1m: Some(3.5),
        ..quiet
    };
    let w = noise_warnings(&tight, &tight, &loaded);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(
        w[0].contains("load average before the run (3.50)") && w[0].contains("2 cores"),
        "{w:?}"
    );
    // Cores busy just before the run (other programs), though the load average is low.
    let busy = MachineBefore {
        cpu_busy: Some(0.8),
        ..quiet
    };
    let w = noise_warnings(&tight, &tight, &busy);
    assert_eq!(w.len(), 1, "{w:?}");
    assert!(w[0].contains("80 % of the 2 cores were busy"), "{w:?}");
    // The run: quiet before, the bench's own load after. Not a warning.
    let machine = Machine {
        cores: 2,
        load_avg_1m_before: Some(0.82),
        load_avg_1m_after: Some(4.87),
        cpu_busy_before: Some(0.05),
    };
    assert!(noise_warnings(&tight, &tight, &machine.before()).is_empty());
    // One run has no spread to judge.
    let one = Spread::of(&[1000.0]);
    let unknown = MachineBefore {
        load_1m: None,
        cpu_busy: None,
        cores: 2,
    };
    assert!(noise_warnings(&one, &one, &unknown).is_empty());
}

/// Ratios on the log scale, values derived by hand: ratios e^−0.1, 1, e^0.1 have logs with mean
/// 0 and sd 0.1; t(0.975, 2) = 4.302653, so the half-width is 4.302653 · 0.1 / √3 = 0.248414
/// and the interval e^∓0.248414 = 0.780037 to 1.281990, wider than ×/÷ 1.05 (ln 1.05 =
/// 0.048790). Narrowing it to ±5 % needs t(n−1) · 0.1 / √n ≤ 0.048790: n = 18 gives
/// 2.109816 · 0.1 / 4.242641 = 0.049729 (no), n = 19 gives 2.100922 · 0.1 / 4.358899 =
/// 0.048198 (yes): 19 paired runs.
#[test]
fn the_paired_ratio_is_a_geometric_mean_whose_interval_stays_above_zero() {
    use bench::runs::{RESOLUTION, Resolution, paired_logs, paired_ratio};
    let e = f64::exp;
    let engine = [1000.0 * e(-0.1), 1000.0, 1000.0 * e(0.1)];
    let baseline = [1000.0; 3];
    let r = paired_ratio(&engine, &baseline);
    assert!((r.mean - 1.0).abs() < 1e-12, "{r:?}");
    assert!((r.low.unwrap() - 0.780037).abs() < 1e-5, "{r:?}");
    assert!((r.high.unwrap() - 1.281990).abs() < 1e-5, "{r:?}");
    let logs = paired_logs(&engine, &baseline);
    assert!((logs.sd - 0.1).abs() < 1e-12);
    let res = Resolution::of(&r, &[logs.sd], RESOLUTION).unwrap();
    assert!(res.too_wide);
    assert_eq!(res.runs_needed, Some(19));
    assert!(
        res.advice("paired runs")
            .contains("about 19 paired runs would")
    );
    // Issue 53's case: three runs that spread over a factor of 50. A t interval on the ratios
    // themselves (0.1, 1, 5: mean 2.03, sd 2.61) reaches −4.45; on the logs it stays above 0.
    let wild = paired_ratio(&[100.0, 1000.0, 5000.0], &[1000.0; 3]);
    assert!(
        wild.low.unwrap() > 0.0 && wild.high.unwrap() > wild.mean,
        "{wild:?}"
    );
    // Bounds above 0 and above −100 % are never printed as 0 or −100 %.
    assert_eq!(bench::runs::ratio_text(0.0042), "0.0042");
    assert_eq!(bench::runs::ratio_text(0.456), "0.46");
    assert_eq!(bench::runs::change_text(-0.99996), "-99.9960 %");
    assert_eq!(bench::runs::change_text(0.0512711), "+5.1 %");
    // One pair: no interval, and nothing to resolve.
    let one = paired_ratio(&[900.0], &[1000.0]);
    assert!((one.mean - 0.9).abs() < 1e-12 && one.low.is_none());
    assert!(Resolution::of(&one, &[0.0], RESOLUTION).is_none());
    // A tight sample resolves ±5 % and asks for nothing.
    let tight = paired_ratio(&[990.0, 1000.0, 1010.0], &[1000.0; 3]);
    let res = Resolution::of(
        &tight,
        &[paired_logs(&[990.0, 1000.0, 1010.0], &[1000.0; 3]).sd],
        RESOLUTION,
    )
    .unwrap();
    assert!(!res.too_wide && res.runs_needed.is_none() && res.advice("x").is_empty());
}

/// A comparison on the log scale, derived by hand: saved = 1000 · (1, e^0.1, e^0.2), current =
/// saved · e^0.05. Both logs have sd 0.1, so each mean's variance is 0.01/3, Welch's degrees of
/// freedom (2 · 0.01/3)² / (2 · (0.01/3)² / 2) = 4, t(0.975, 4) = 2.776445, half-width
/// 2.776445 · √(0.02/3) = 0.226696: change e^0.05 − 1 = +5.127 %, interval e^−0.176696 − 1 =
/// −16.197 % to e^0.276696 − 1 = +31.877 %. Too wide for ±5 %: with n runs a side the
/// half-width is t(2n − 2) · √(0.02/n); n = 33 gives 1.997730 · 0.024618 = 0.049181 > 0.048790,
/// n = 34 gives 1.996564 · 0.024254 = 0.048424: 34 runs a side.
#[test]
fn a_comparison_never_falls_below_minus_100_percent_and_says_when_it_cannot_tell() {
    use bench::runs::{Verdict, compare};
    let e = f64::exp;
    let saved = [1000.0, 1000.0 * e(0.1), 1000.0 * e(0.2)];
    let current: Vec<f64> = saved.iter().map(|x| x * e(0.05)).collect();
    let c = compare("f", &saved, &current, None);
    assert!((c.change - 0.0512711).abs() < 1e-6, "{c:?}");
    assert!((c.change_low.unwrap() + 0.1619653).abs() < 1e-5, "{c:?}");
    assert!((c.change_high.unwrap() - 0.3187651).abs() < 1e-5, "{c:?}");
    assert_eq!(c.verdict, Verdict::TooWide);
    let res = c.resolution.unwrap();
    assert!(res.too_wide && (res.within - 0.05).abs() < 1e-12);
    assert_eq!(res.runs_needed, Some(34));
    // --fail-on-regression 40: the same interval lies within ±40 %, so it is "no change".
    let c = compare("f", &saved, &current, Some(0.40));
    assert_eq!(c.verdict, Verdict::NoChange, "{c:?}");
    assert!(!c.fails);
    // Issue 53's "-112.3 % to +126.8 %": a wild spread still gives an interval above −100 %.
    let wild = compare(
        "f",
        &[1000.0, 1400.0, 600.0],
        &[100.0, 1300.0, 2000.0],
        None,
    );
    assert!(wild.change_low.unwrap() > -1.0, "{wild:?}");
    assert_eq!(wild.verdict, Verdict::TooWide);
    let better = compare(
        "f",
        &[1000.0, 1010.0, 990.0],
        &[1300.0, 1310.0, 1290.0],
        None,
    );
    assert_eq!(better.verdict, Verdict::Improved);
    assert!(!better.fails);
    // One run a side: no interval, so no verdict beyond "cannot tell".
    let one = compare("f", &[1000.0], &[900.0], Some(0.05));
    assert_eq!(one.verdict, Verdict::TooWide);
    assert!(one.change_low.is_none() && !one.fails);
}

/// The ceiling's slices and the engine's share of it, by hand: slices 2000 · (1, e^d, e^−d) at
/// 2 units per create, engine runs 500 · (1, e^0.1, e^−0.1). At d = 0.1 both logs have sd 0.1,
/// the share is 500/1000 = 0.5 and its Welch interval (4 degrees of freedom, half-width
/// 0.226696 as above) 0.5 · e^∓0.226696 = 0.398582 to 0.627224. The slices' σ is 9.99 % of
/// their mean (not noise); at d = 0.2 it is 19.9 % (noise).
#[test]
fn the_ceiling_has_its_spread_and_says_when_the_engines_share_is_noise() {
    use bench::ceiling::Ceiling;
    let e = f64::exp;
    let slices = |d: f64| [2000.0, 2000.0 * e(d), 2000.0 * e(-d)];
    let engine = [500.0, 500.0 * e(0.1), 500.0 * e(-0.1)];
    let c = Ceiling::new("flushes", 1, &slices(0.1), 2.0, &engine, None);
    assert_eq!(c.per_s_spread.n, 3);
    assert!((c.per_s - 2006.672224).abs() < 1e-5, "{c:?}");
    assert!((c.creates_per_s - c.per_s / 2.0).abs() < 1e-9);
    assert!((c.engine_share - 0.5).abs() < 1e-12, "{c:?}");
    let (low, high) = c.engine_share_ci95.bounds().unwrap();
    assert!(
        (low - 0.398582).abs() < 1e-5 && (high - 0.627224).abs() < 1e-5,
        "{c:?}"
    );
    assert!(!c.share_is_noise);
    let noisy = Ceiling::new("flushes", 1, &slices(0.2), 2.0, &engine, None);
    assert!(noisy.share_is_noise, "{noisy:?}");
    // One engine run: a share, no interval.
    let one = Ceiling::new("flushes", 1, &slices(0.1), 2.0, &[500.0], None);
    assert!(one.engine_share > 0.0 && one.engine_share_ci95.bounds().is_none());
    // No engine run at all (interrupted during the warm-up): no share, not exp(0).
    let none = Ceiling::new("flushes", 1, &slices(0.1), 2.0, &[], None);
    assert_eq!(none.engine_share, 0.0);
}

/// `--per-statement` (issue 37, as `pgbench -r`): each of the seed's statements is timed on
/// both sides, and the table lists them. Counts only: the latencies are the machine's.
fn assert_per_statement(report: &bench::Report, baseline_timed: bool) {
    let table = bench::render_table(report);
    assert!(report.ok, "{table}");
    let p = report
        .per_statement
        .as_ref()
        .unwrap_or_else(|| panic!("no per-statement figures:\n{table}"));
    assert!(table.contains("per-statement latency"), "{table}");
    let mut sides = vec![("engine", &p.engine)];
    if baseline_timed {
        sides.push(("baseline", &p.baseline));
    } else {
        assert!(p.baseline.is_empty());
    }
    for (side, rows) in sides {
        let count = |name: &str| {
            rows.iter()
                .find(|r| r.statement == name)
                .map_or(0, |r| r.count)
        };
        for name in [
            "txn 1 BEGIN",
            "txn 1 INSERT key ON CONFLICT DO NOTHING",
            "txn 1 SELECT key (on conflict)",
            "txn 1 UPDATE take over lease",
            "txn 1 COMMIT",
            "txn 2 BEGIN",
            "txn 2 UPDATE complete key",
            "txn 2 INSERT label",
            "txn 2 COMMIT",
        ] {
            assert!(count(name) > 0, "{side}: no `{name}` timed:\n{table}");
        }
        // Every create runs each statement of txn 2 once, and only the measured runs are
        // timed (the warm-up's statements are forgotten), so the counts are the runs' creates.
        let runs = if side == "engine" {
            &report.runs.engine
        } else {
            &report.runs.baseline
        };
        let created: u64 = runs.iter().map(|r| r.creates).sum();
        assert_eq!(
            count("txn 2 UPDATE complete key"),
            created,
            "{side}:\n{table}"
        );
        assert_eq!(count("txn 2 INSERT label"), created, "{side}:\n{table}");
        assert!(count("txn 1 BEGIN") >= count("txn 1 INSERT key ON CONFLICT DO NOTHING"));
        for r in rows {
            assert!(r.p50_us <= r.p99_us, "{r:?}");
            assert!(table.contains(&r.statement), "{table}");
        }
    }
}

#[test]
fn per_statement_latency_times_each_statement_of_both_sides() {
    let config = BenchConfig {
        per_statement: true,
        ..small(None, None)
    };
    assert_per_statement(&bench::run(&config).unwrap(), true);
    let config = BenchConfig {
        per_statement: true,
        ..small(Some(GroupPolicy::default()), None)
    };
    assert_per_statement(&bench::run(&config).unwrap(), true);
    if let Some(url) = pg_url() {
        let config = BenchConfig {
            per_statement: true,
            ..repeated(Some(url), 2)
        };
        assert_per_statement(&bench::run(&config).unwrap(), true);
    }
    if let Some(url) = redis_url() {
        let config = BenchConfig {
            per_statement: true,
            ..repeated(Some(url), 2)
        };
        assert_per_statement(&bench::run(&config).unwrap(), false);
    }
    // Off by default: no timing, nothing in the report or its JSON.
    let report = bench::run(&small(None, None)).unwrap();
    assert!(report.per_statement.is_none());
    assert!(
        serde_json::to_value(&report).unwrap()["per_statement"].is_null(),
        "per_statement is left out of the JSON when not asked for"
    );
}

/// The create loop that `scripts/callgrind-create` counts instructions of (issue 40): each side
/// makes exactly the creates asked for, through the bench's own services, on a pre-filled store.
#[test]
fn the_create_loop_makes_exactly_its_creates_on_both_sides() {
    use idemcalc::bench::creates::{CreateLoop, Side};
    for side in [Side::Engine, Side::Baseline] {
        let dir = tempfile::tempdir().unwrap();
        let mut l = CreateLoop::open(side, dir.path(), 200).unwrap();
        assert_eq!(l.run(150).unwrap(), 150);
        assert_eq!(l.run(50).unwrap(), 50);
        let store = l.store();
        assert_eq!(store.count_labels().unwrap(), 400);
        assert_eq!(store.count_keys().unwrap(), 400);
        let inv = store.invariants().unwrap();
        assert!(inv.integrity_ok && inv.completed_without_label == 0);
        assert_eq!(inv.max_labels_per_parcel, 1);
    }
    assert_eq!(Side::parse("engine"), Some(Side::Engine));
    assert_eq!(Side::parse("nope"), None);
}
