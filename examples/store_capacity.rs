//! Measures a store as an architect sizes it: bytes per record and throughput with the real
//! engine writing real records, and on PostgreSQL what the sweeper's batched deletes leave behind
//! (dead tuples) and what `VACUUM` recovers.
//!
//! ```text
//! cargo run --release --example store_capacity -- --store sqlite:/tmp/cap.sqlite --keys 100000
//! cargo run --release --example store_capacity -- --store postgres://postgres@127.0.0.1/test --keys 100000
//! ```
//!
//! Each key is one CreateLabel through `Engine::handle` (txn 1, the simulated carrier, txn 2), so
//! a record is exactly what the engine writes: the seed's derived key `label:<order>:1:v1`, its
//! SHA-256, the saved 201 body, the timestamps, plus one label row. On PostgreSQL without
//! `?schema=`, a scratch schema is used and dropped at the end (`--keep` keeps it).

use clap::Parser;
use idemcalc::carrier::{Carrier, CarrierConfig, Latency};
use idemcalc::clock::{Clock as _, VirtualClock};
use idemcalc::engine::{Engine, EngineConfig, Request};
use idemcalc::store::{
    OpenOptions, PgOptions, PgPool, PostgresStore, Store, StoreBytes, StorePool, StoreSpec,
    Synchronous,
};
use std::sync::Arc;
use std::time::Instant;

#[derive(Debug, Parser)]
struct Args {
    /// The store: sqlite:PATH or postgres://USER@HOST:PORT/DATABASE[?schema=NAME].
    #[arg(long)]
    store: String,
    /// Keys to write.
    #[arg(long, default_value_t = 100_000)]
    keys: u64,
    /// Engines writing at once, each on its own connection.
    #[arg(long, default_value_t = 1)]
    threads: u32,
    /// Commit durability: off, normal or full (PostgreSQL: off → synchronous_commit = off).
    #[arg(long, default_value = "normal")]
    sync: String,
    /// Sweeper batch size, in records.
    #[arg(long, default_value_t = 1_000)]
    batch: u32,
    /// Keep the scratch PostgreSQL schema.
    #[arg(long)]
    keep: bool,
}

/// One engine per thread on a shared virtual clock and carrier.
struct Rig {
    pool: StorePool,
    clock: VirtualClock,
    carrier: Arc<Carrier>,
}

impl Rig {
    fn engine(&self) -> anyhow::Result<Engine> {
        Ok(Engine::new(
            self.pool.get()?,
            self.carrier.clone(),
            Arc::new(self.clock.clone()),
            EngineConfig::default(),
        ))
    }

    /// Writes keys `first..first + n` with `threads` engines; returns seconds taken and the summed
    /// length of keys and saved bodies.
    fn fill(&self, first: u64, n: u64, threads: u32) -> anyhow::Result<(f64, u64)> {
        let start = Instant::now();
        let per = n.div_ceil(u64::from(threads));
        let payload = std::thread::scope(|s| -> anyhow::Result<u64> {
            let mut handles = Vec::new();
            for t in 0..u64::from(threads) {
                let mut engine = self.engine()?;
                let clock = &self.clock;
                let lo = first + t * per;
                let hi = (lo + per).min(first + n);
                handles.push(s.spawn(move || -> anyhow::Result<u64> {
                    let mut payload = 0;
                    for i in lo..hi {
                        let order = 100_000_000 + i;
                        let key = format!("label:{order}:1:v1");
                        let body = format!(
                            r#"{{"order_id":{order},"parcel_no":1,"label_version":1,"weight_g":1450,"service":"ground"}}"#
                        );
                        let r = engine.handle(&Request::create_label("fulfilment", Some(&key), &body))?;
                        anyhow::ensure!(r.status == 201, "key {key}: {r:?}");
                        // The seed's average 400 creates/s: 2.5 ms apart, so `expires_at` values
                        // are distinct as in production (equal ones would let PostgreSQL's b-tree
                        // deduplication shrink the index unrealistically).
                        clock.advance_ms(2 + (i % 2) as i64);
                        payload += (key.len() + r.body.len()) as u64;
                    }
                    Ok(payload)
                }));
            }
            let mut payload = 0;
            for h in handles {
                payload += h
                    .join()
                    .map_err(|_| anyhow::anyhow!("a writer panicked"))??;
            }
            Ok(payload)
        })?;
        Ok((start.elapsed().as_secs_f64(), payload))
    }
}

fn per_record(bytes: u64, n: u64) -> f64 {
    bytes as f64 / n.max(1) as f64
}

/// Prints the store's size per live record and returns the sizes.
fn print_bytes(label: &str, store: &mut dyn Store) -> anyhow::Result<StoreBytes> {
    let b = store.bytes()?;
    let (keys, labels) = (store.count_keys()?, store.count_labels()?);
    println!(
        "  {label:<30} {keys:>7} keys {:>11} B = {:>6.1} B/record (table+pk {:>6.1}, expires_at index {:>5.1}); {labels} labels",
        b.keys_bytes(),
        per_record(b.keys_bytes(), keys),
        per_record(b.keys_table_bytes, keys),
        per_record(b.keys_index_bytes, keys),
    );
    Ok(b)
}

/// Per-record sizes of each relation of the key store.
fn pg_breakdown(store: &mut PostgresStore, n: u64) -> anyhow::Result<()> {
    let r = store.client()?.query_one(
        "SELECT pg_relation_size('idempotency_keys'),
                pg_table_size('idempotency_keys') - pg_relation_size('idempotency_keys'),
                pg_relation_size('idempotency_keys_pkey'),
                pg_relation_size('idempotency_keys_expires_at')",
        &[],
    )?;
    let part = |i: usize| per_record(r.get::<_, i64>(i).max(0) as u64, n);
    println!(
        "  per record: heap {:.1} B, TOAST + free-space/visibility maps {:.1} B, primary key {:.1} B, expires_at index {:.1} B",
        part(0),
        part(1),
        part(2),
        part(3)
    );
    Ok(())
}

/// Live and dead tuples and heap size of `idempotency_keys`, after making this session's pending
/// statistics visible (they are flushed when a session goes idle, not at each commit).
fn pg_tuples(store: &mut PostgresStore) -> anyhow::Result<(i64, i64, i64)> {
    let client = store.client()?;
    client.batch_execute("SELECT pg_stat_force_next_flush()")?;
    let row = client.query_one(
        "SELECT n_live_tup, n_dead_tup, pg_relation_size(relid)
           FROM pg_stat_user_tables WHERE relid = 'idempotency_keys'::regclass",
        &[],
    )?;
    Ok((row.get(0), row.get(1), row.get(2)))
}

/// Closes the pool's idle sessions, which flushes their statistics as they exit, and reads once
/// the numbers stop moving (two reads 200 ms apart agree; at most 10 s).
fn pg_tuples_settled(pool: &PgPool, store: &mut PostgresStore) -> anyhow::Result<(i64, i64, i64)> {
    pool.close_idle();
    let mut last = pg_tuples(store)?;
    for _ in 0..50 {
        std::thread::sleep(std::time::Duration::from_millis(200));
        let now = pg_tuples(store)?;
        if now == last {
            return Ok(now);
        }
        last = now;
    }
    Ok(last)
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let sync = match args.sync.as_str() {
        "off" => Synchronous::Off,
        "normal" => Synchronous::Normal,
        "full" => Synchronous::Full,
        other => anyhow::bail!("--sync {other}: use off, normal or full"),
    };
    anyhow::ensure!(
        args.keys >= 2 && args.threads >= 1,
        "--keys ≥ 2, --threads ≥ 1"
    );
    let options = OpenOptions::default()
        .with_synchronous(sync)
        .with_pool_size(args.threads + 3);
    let (pool, scratch) = match StoreSpec::parse(&args.store)? {
        StoreSpec::Postgres { url, schema } => {
            let scratch = schema.is_none();
            let schema = schema.unwrap_or_else(|| {
                format!(
                    "idemcalc_capacity_{}",
                    &uuid::Uuid::new_v4().simple().to_string()[..12]
                )
            });
            let pool = PgPool::connect(
                &url,
                &PgOptions {
                    schema,
                    ..options.postgres.clone()
                },
            )?;
            (StorePool::Postgres(pool.clone()), scratch.then_some(pool))
        }
        StoreSpec::Sqlite(_) | StoreSpec::Redis { .. } => {
            (StorePool::open(&args.store, &options)?, None)
        }
    };
    let result = run(&args, pool);
    if let Some(pool) = scratch
        && !args.keep
    {
        pool.drop_schema()?;
    }
    result
}

fn run(args: &Args, pool: StorePool) -> anyhow::Result<()> {
    let n = args.keys;
    let half = n / 2;
    println!(
        "store {} ({}), {n} keys, {} thread(s), sync {}",
        pool.describe(),
        pool.kind(),
        args.threads,
        args.sync
    );
    let rig = Rig {
        pool,
        clock: VirtualClock::new(),
        carrier: Arc::new(Carrier::new(CarrierConfig {
            latency: Latency::Fixed { ms: 50 },
            ..CarrierConfig::default()
        })),
    };
    // Measuring connections, taken first so that the writers' sessions are others (their
    // statistics reach pg_stat_user_tables when they close).
    let mut store = rig.pool.get()?;
    let mut pg = match &rig.pool {
        StorePool::Postgres(p) => Some((p.clone(), p.get()?)),
        StorePool::Sqlite { .. } | StorePool::Redis { .. } => None,
    };
    // Two halves an hour apart (virtual time), so a sweep a day after the first half ended
    // purges exactly the first.
    let (s1, p1) = rig.fill(0, half, args.threads)?;
    let first_half_end_ms = rig.clock.now_ms();
    rig.clock.advance_ms(3_600_000);
    let (s2, p2) = rig.fill(half, n - half, args.threads)?;
    let secs = s1 + s2;
    println!(
        "fill: {n} CreateLabel in {secs:.1} s = {:.0} requests/s ({:.0} commits/s); key + saved body {:.1} B/record on average",
        n as f64 / secs,
        2.0 * n as f64 / secs,
        per_record(p1 + p2, n)
    );
    print_bytes("after the fill", store.as_mut())?;
    if let Some((pool, pg)) = pg.as_mut() {
        pg_breakdown(pg, n)?;
        let (live, dead, heap) = pg_tuples_settled(pool, pg)?;
        println!(
            "  tuples: {live} live, {dead} dead (each txn 2 UPDATE leaves one dead version; page pruning already reclaimed most), heap {heap} B"
        );
    }

    // The sweeper: a day after the first half completed, purge it in batches.
    rig.clock.set_ms(first_half_end_ms + 86_400_000);
    let mut engine = Engine::new(
        rig.pool.get()?,
        rig.carrier.clone(),
        Arc::new(rig.clock.clone()),
        EngineConfig::default(),
    );
    let start = Instant::now();
    let purged = engine.sweep(args.batch, u32::MAX)?;
    let sweep_s = start.elapsed().as_secs_f64();
    drop(engine);
    anyhow::ensure!(purged == half, "swept {purged}, expected {half}");
    println!(
        "sweep: {purged} records in batches of {} in {sweep_s:.2} s = {:.0} records/s",
        args.batch,
        purged as f64 / sweep_s
    );
    print_bytes("after the sweep", store.as_mut())?;

    let Some((pool, mut pg)) = pg else {
        return Ok(());
    };
    let (live, dead, heap) = pg_tuples_settled(&pool, &mut pg)?;
    println!("  tuples: {live} live, {dead} dead, heap {heap} B");
    pg.client()?.batch_execute("VACUUM idempotency_keys")?;
    let (live, dead, heap) = pg_tuples(&mut pg)?;
    println!(
        "VACUUM: tuples {live} live, {dead} dead, heap {heap} B (space reusable, not returned)"
    );
    let vacuumed = print_bytes("after VACUUM", store.as_mut())?;
    // Refill as many keys as were swept: they land in the space VACUUM made reusable.
    rig.clock.advance_ms(3_600_000);
    let (s3, _) = rig.fill(n, half, args.threads)?;
    let refilled = store.bytes()?;
    print_bytes("after the refill", store.as_mut())?;
    pg_breakdown(&mut pg, n)?;
    println!(
        "refill: {half} new keys in {s3:.1} s; keys grew by {} B ({:.1} B per new record)",
        refilled.keys_bytes() as i64 - vacuumed.keys_bytes() as i64,
        (refilled.keys_bytes() as f64 - vacuumed.keys_bytes() as f64) / half as f64
    );
    // One statement per call: VACUUM cannot run in the implicit transaction of a batch.
    pg.client()?.batch_execute("VACUUM FULL idempotency_keys")?;
    pg.client()?.batch_execute("VACUUM FULL labels")?;
    print_bytes("after VACUUM FULL (compacted)", store.as_mut())?;
    Ok(())
}
