//! Criterion benches of the engine, each request kind on a store pre-filled to a realistic size.
//!
//! The store holds 1 M completed keys with their labels (`IDEMCALC_BENCH_KEYS` changes that),
//! the size of about 40 minutes of the seed's average 400 creates/s. Filling it takes a while, so
//! it is built once into a template under the target directory and copied for each run; every
//! bench then works on that one copy, each with keys of its own. Sample sizes and times are
//! small so the whole `cargo bench` stays within a couple of minutes: these benches catch
//! regressions, `idemcalc bench` measures capacity.

use criterion::{BatchSize, Criterion, Throughput, criterion_group, criterion_main};
use idemcalc::bench::fill::{self, Filler, Layout, Prefill};
use idemcalc::carrier::{Carrier, CarrierConfig, Latency};
use idemcalc::clock::{Clock, SystemClock};
use idemcalc::engine::{Engine, EngineConfig, Request};
use idemcalc::store::group::{GroupCommitStore, GroupPolicy};
use idemcalc::store::sqlite::SCHEMA_VERSION;
use idemcalc::store::{SqliteOptions, SqliteStore, Store};
use std::hint::black_box;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

const DEFAULT_KEYS: u64 = 1_000_000;
/// Requests per iteration of the group-commit bench: one batch.
const GROUP_BATCH: u64 = 64;
/// Records per sweeper batch, the engine's usual batch.
const SWEEP_BATCH: u32 = 1000;

fn keys() -> u64 {
    std::env::var("IDEMCALC_BENCH_KEYS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(DEFAULT_KEYS)
}

/// The filled template, built on first use and kept between runs (the schema version is in the
/// name, so a schema change builds a new one).
fn template(keys: u64) -> PathBuf {
    let dir = PathBuf::from(option_env!("CARGO_TARGET_TMPDIR").unwrap_or("target/tmp"));
    std::fs::create_dir_all(&dir).expect("create the bench template directory");
    let path = dir.join(format!("engine-bench-{keys}-v{SCHEMA_VERSION}.sqlite"));
    if !path.exists() {
        eprintln!("filling {} with {keys} keys (once)…", path.display());
        let partial = path.with_extension("partial");
        let _ = std::fs::remove_file(&partial);
        let mut f = Filler::open(&partial).expect("open the template");
        f.add(Prefill::Completed, 1..1 + keys as i64, SystemClock.now_ms())
            .expect("fill the template");
        f.close().expect("checkpoint the template");
        std::fs::rename(&partial, &path).expect("keep the template");
    }
    path
}

fn request(id: i64, weight_g: u32) -> Request {
    Request::create_label(
        fill::CALLER,
        Some(&fill::key(id)),
        &fill::body(id, weight_g),
    )
}

/// The carrier answers at once; one carrier serves every engine of the run, so label ids (which
/// it numbers) stay unique in the shared store.
fn carrier() -> Arc<Carrier> {
    Arc::new(
        Carrier::new(CarrierConfig {
            latency: Latency::Fixed { ms: 0 },
            ..CarrierConfig::default()
        })
        .without_ledger(),
    )
}

fn new_engine(store: Box<dyn Store>, carrier: &Arc<Carrier>) -> Engine {
    Engine::new(
        store,
        carrier.clone(),
        Arc::new(SystemClock),
        EngineConfig::default(),
    )
}

struct Bed {
    _dir: tempfile::TempDir,
    path: PathBuf,
    layout: Layout,
    /// Ids above every pre-filled one, handed out to benches that need keys of their own.
    next_id: i64,
}

impl Bed {
    fn new() -> Self {
        let keys = keys();
        let template = template(keys);
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("bench.sqlite");
        std::fs::copy(&template, &path).expect("copy the template");
        // Held leases are written now rather than in the template, so they are live whatever
        // the template's age.
        let layout = Layout {
            completed: keys,
            held: 1,
            lease_expired: 0,
        };
        let mut f = Filler::open(&path).expect("open the copy");
        f.add(Prefill::Held, layout.held_ids(), SystemClock.now_ms())
            .expect("hold a lease");
        f.close().expect("checkpoint");
        Self {
            _dir: dir,
            path,
            next_id: layout.fresh_from(),
            layout,
        }
    }

    fn ids(&mut self, n: u64) -> std::ops::Range<i64> {
        let start = self.next_id;
        self.next_id += n as i64;
        start..self.next_id
    }

    fn path(&self) -> &Path {
        &self.path
    }
}

fn benches(c: &mut Criterion) {
    let mut bed = Bed::new();
    let mut filler = Filler::open(bed.path()).expect("open a setup connection");
    let store = SqliteStore::open(bed.path(), &SqliteOptions::default()).expect("open the store");
    let carrier = carrier();
    let mut engine = new_engine(Box::new(store), &carrier);
    // A completed key in the middle of the key space, so lookups walk a full-depth b-tree.
    let completed = bed.layout.completed_ids().start + bed.layout.completed as i64 / 2;
    let held = bed.layout.held_ids().start;

    let mut g = c.benchmark_group(format!("engine_{}_keys", bed.layout.completed));
    g.sample_size(10)
        .warm_up_time(Duration::from_millis(500))
        .measurement_time(Duration::from_secs(2));

    let mut next = bed.ids(10_000_000).start;
    g.bench_function("first_run", |b| {
        b.iter_batched(
            || {
                next += 1;
                request(next, fill::WEIGHT_G)
            },
            |req| engine.handle(&req).expect("first run"),
            BatchSize::SmallInput,
        )
    });

    let replay = request(completed, fill::WEIGHT_G);
    g.bench_function("replay", |b| {
        b.iter(|| engine.handle(black_box(&replay)).expect("replay"))
    });

    let conflict = request(held, fill::WEIGHT_G);
    g.bench_function("conflict_409", |b| {
        b.iter(|| engine.handle(black_box(&conflict)).expect("409"))
    });

    let reused = request(completed, fill::OTHER_WEIGHT_G);
    g.bench_function("reused_422", |b| {
        b.iter(|| engine.handle(black_box(&reused)).expect("422"))
    });

    let mut abandoned = bed.ids(1_000_000).start;
    g.bench_function("takeover", |b| {
        b.iter_batched(
            || {
                // An attempt claimed this key and died; its lease has expired.
                abandoned += 1;
                filler
                    .add(
                        Prefill::LeaseExpired,
                        abandoned..abandoned + 1,
                        SystemClock.now_ms(),
                    )
                    .expect("abandon a key");
                request(abandoned, fill::WEIGHT_G)
            },
            |req| engine.handle(&req).expect("takeover"),
            BatchSize::SmallInput,
        )
    });

    let mut expired = bed.ids(100_000_000).start;
    // Each sample also writes 1,000 expired records untimed: give it the time to collect 10.
    g.measurement_time(Duration::from_secs(4));
    g.throughput(Throughput::Elements(u64::from(SWEEP_BATCH)));
    g.bench_function("sweeper_batch_1000", |b| {
        b.iter_batched(
            || {
                let ids = expired..expired + i64::from(SWEEP_BATCH);
                expired = ids.end;
                filler
                    .add(Prefill::RecordExpired, ids, SystemClock.now_ms())
                    .expect("expire records");
            },
            |()| engine.sweep(SWEEP_BATCH, 1).expect("sweep"),
            BatchSize::PerIteration,
        )
    });
    drop(engine);

    // The same first runs, 64 to a physical commit.
    let group = GroupCommitStore::open(
        bed.path(),
        &SqliteOptions::default(),
        GroupPolicy {
            max_batch: 4 * GROUP_BATCH as u32,
            max_wait: Duration::from_secs(1),
        },
    )
    .expect("open the group-commit store");
    let mut grouped = new_engine(Box::new(group.clone()), &carrier);
    let mut next = bed.ids(100_000_000).start;
    g.measurement_time(Duration::from_secs(2));
    g.throughput(Throughput::Elements(GROUP_BATCH));
    g.bench_function("first_run_group_commit_x64", |b| {
        b.iter_batched(
            || {
                (0..GROUP_BATCH)
                    .map(|_| {
                        next += 1;
                        request(next, fill::WEIGHT_G)
                    })
                    .collect::<Vec<_>>()
            },
            |reqs| {
                for req in &reqs {
                    grouped.handle(req).expect("first run");
                }
                group.flush().expect("commit the batch");
            },
            BatchSize::SmallInput,
        )
    });
    g.finish();
}

criterion_group!(engine_benches, benches);
criterion_main!(engine_benches);
