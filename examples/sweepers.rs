//! The two PostgreSQL sweepers side by side over a simulated week of churn: batched `DELETE` on
//! `expires_at` (the seed's) against a key table partitioned by `expires_at` whose expired
//! partitions are dropped whole (`--sweeper partitions`).
//!
//! ```text
//! cargo run --release --example sweepers -- --store postgres://postgres@127.0.0.1:5432/test
//! ```
//!
//! Each strategy gets a scratch schema and the same churn on a virtual clock: every tick, one
//! transaction claims the tick's new keys and a second completes them with the seed's saved
//! response (the engine's two transactions, batched per tick so that a week runs in minutes),
//! and every `--sweep-period` the sweeper runs until a batch comes back short. Meanwhile a second
//! connection looks keys up without pause, on the wall clock, and the longest lookup that
//! overlapped a sweep is kept. Measured per strategy: bytes per record at steady state (the key
//! table's relations, `pg_total_relation_size` of each, over the records in it), dead tuples
//! (`pg_stat_user_tables`), WAL written while the sweeper ran per purged key
//! (`pg_current_wal_insert_lsn`, which also counts autovacuum's work in those windows), sweeper
//! time, and lookup waits. Run it with autovacuum on, as a real server has it: it says so when
//! it is off.

use clap::Parser;
use idemcalc::clock::Millis;
use idemcalc::store::{
    Completion, NewKey, PgOptions, PgPool, Store, StoreSpec, Sweeper, Synchronous,
};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicI64, AtomicU64, Ordering};
use std::time::{Duration, Instant};

#[derive(Debug, Parser)]
struct Args {
    /// postgres://USER@HOST:PORT/DATABASE; each strategy gets a scratch schema, dropped after.
    #[arg(long)]
    store: String,
    /// New keys per simulated second.
    #[arg(long, default_value_t = 5.0)]
    rate: f64,
    /// Simulated time.
    #[arg(long, default_value = "7d", value_parser = idemcalc::duration::clap_parse)]
    duration: Duration,
    #[arg(long, default_value = "1d", value_parser = idemcalc::duration::clap_parse)]
    retention: Duration,
    /// The partition range; default a quarter of the retention, as `simulate` uses.
    #[arg(long, value_parser = idemcalc::duration::clap_parse)]
    partition_period: Option<Duration>,
    #[arg(long, default_value = "60s", value_parser = idemcalc::duration::clap_parse)]
    sweep_period: Duration,
    #[arg(long, default_value_t = 10_000)]
    sweep_batch: u32,
    /// Keys claimed and completed per transaction pair.
    #[arg(long, default_value = "10s", value_parser = idemcalc::duration::clap_parse)]
    tick: Duration,
    /// Only this strategy: delete or partitions.
    #[arg(long)]
    only: Option<String>,
}

/// What one strategy measured.
#[derive(Debug, Default)]
struct Figures {
    name: String,
    records: u64,
    key_bytes: u64,
    dead_tuples: i64,
    purged: u64,
    sweeps: u64,
    sweep_s: f64,
    sweep_wal_bytes: i64,
    total_wal_bytes: i64,
    longest_sweep_ms: f64,
    lookups: u64,
    lookup_max_ms_sweeping: f64,
    lookup_max_ms_otherwise: f64,
    churn_s: f64,
}

fn key(id: u64) -> String {
    format!("label:{id}:1:v1")
}

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let url = match StoreSpec::parse(&args.store)? {
        StoreSpec::Postgres { url, .. } => url,
        other => anyhow::bail!(
            "--store: the sweepers are PostgreSQL's, not {}",
            other.describe()
        ),
    };
    let mut admin = postgres::Client::connect(&url, postgres::NoTls)?;
    let autovacuum: String = admin.query_one("SHOW autovacuum", &[])?.get(0);
    if autovacuum != "on" {
        eprintln!(
            "warning: autovacuum is {autovacuum} on this server; a real server runs it \
             (ALTER SYSTEM SET autovacuum = on; SELECT pg_reload_conf();)"
        );
    }
    let retention_ms = args.retention.as_millis() as Millis;
    let period_ms = args
        .partition_period
        .map_or((retention_ms / 4).max(60_000), |d| d.as_millis() as Millis);
    let mut out = Vec::new();
    for (name, sweeper) in [
        ("delete", Sweeper::Delete),
        ("partitions", Sweeper::Partitions { period_ms }),
    ] {
        if args.only.as_deref().is_some_and(|o| o != name) {
            continue;
        }
        let f = run(&args, &url, name, sweeper, retention_ms)?;
        print_one(&f, &args);
        out.push(f);
    }
    println!();
    println!(
        "| over {} at {}/s, retention {} | {} |",
        idemcalc::duration::format_secs(args.duration.as_secs_f64()),
        args.rate,
        idemcalc::duration::format_secs(args.retention.as_secs_f64()),
        out.iter()
            .map(|f| f.name.as_str())
            .collect::<Vec<_>>()
            .join(" | ")
    );
    println!("|---|{}", "---:|".repeat(out.len()));
    let row = |label: &str, cell: &dyn Fn(&Figures) -> String| {
        println!(
            "| {label} | {} |",
            out.iter().map(cell).collect::<Vec<_>>().join(" | ")
        );
    };
    row("bytes per record at the end", &|f| {
        format!("{:.0} B", f.key_bytes as f64 / f.records.max(1) as f64)
    });
    row("records in the store at the end", &|f| {
        f.records.to_string()
    });
    row("dead tuples at the end", &|f| f.dead_tuples.to_string());
    row("WAL while sweeping, per purged key", &|f| {
        format!("{:.0} B", f.sweep_wal_bytes as f64 / f.purged.max(1) as f64)
    });
    row("WAL in all, per key written", &|f| {
        format!(
            "{:.0} B",
            f.total_wal_bytes as f64 / (args.rate * args.duration.as_secs_f64()).max(1.0)
        )
    });
    row("sweeper time per purged key", &|f| {
        format!("{:.2} µs", f.sweep_s * 1e6 / f.purged.max(1) as f64)
    });
    row("longest sweep", &|f| {
        format!("{:.1} ms", f.longest_sweep_ms)
    });
    row("longest lookup during a sweep", &|f| {
        format!("{:.1} ms", f.lookup_max_ms_sweeping)
    });
    row("longest lookup otherwise", &|f| {
        format!("{:.1} ms", f.lookup_max_ms_otherwise)
    });
    Ok(())
}

fn print_one(f: &Figures, args: &Args) {
    eprintln!(
        "{}: {} records, {:.0} B per record, {} dead tuples, {} purged in {} sweeps ({:.2} s), \
         {:.0} B WAL per purged key, {} lookups (max {:.1} ms while sweeping, {:.1} ms otherwise), churn {:.0} s for {:.0} keys",
        f.name,
        f.records,
        f.key_bytes as f64 / f.records.max(1) as f64,
        f.dead_tuples,
        f.purged,
        f.sweeps,
        f.sweep_s,
        f.sweep_wal_bytes as f64 / f.purged.max(1) as f64,
        f.lookups,
        f.lookup_max_ms_sweeping,
        f.lookup_max_ms_otherwise,
        f.churn_s,
        args.rate * args.duration.as_secs_f64()
    );
}

fn lsn(client: &mut postgres::Client) -> anyhow::Result<i64> {
    Ok(client
        .query_one(
            "SELECT pg_wal_lsn_diff(pg_current_wal_insert_lsn(), '0/0')::int8",
            &[],
        )?
        .get(0))
}

fn run(
    args: &Args,
    url: &str,
    name: &str,
    sweeper: Sweeper,
    retention_ms: Millis,
) -> anyhow::Result<Figures> {
    let schema = format!(
        "idemcalc_sweepers_{name}_{}",
        &uuid::Uuid::new_v4().simple().to_string()[..8]
    );
    let pool = PgPool::connect(
        url,
        &PgOptions {
            schema: schema.clone(),
            pool_size: 3,
            synchronous: Synchronous::Off,
            sweeper,
            ..PgOptions::default()
        },
    )?;
    let result = churn(args, url, name, &pool, retention_ms);
    pool.drop_schema()?;
    result
}

fn churn(
    args: &Args,
    url: &str,
    name: &str,
    pool: &PgPool,
    retention_ms: Millis,
) -> anyhow::Result<Figures> {
    let mut store = pool.get()?;
    let mut admin = postgres::Client::connect(url, postgres::NoTls)?;
    let epoch: Millis = 1_790_000_000_000;
    let end_ms = args.duration.as_millis() as Millis;
    let tick_ms = args.tick.as_millis() as Millis;
    let sweep_ms = args.sweep_period.as_millis() as Millis;
    let hash = [7u8; 32];
    let body = idemcalc::bench::fill::label_body("L-1", 1);

    // The lookup thread: keys written so far are 0..written; it looks up recent ones.
    let written = Arc::new(AtomicU64::new(0));
    let sweeping = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let max_sweeping_us = Arc::new(AtomicI64::new(0));
    let max_other_us = Arc::new(AtomicI64::new(0));
    let lookups = Arc::new(AtomicU64::new(0));
    let looker = {
        let mut s = pool.get()?;
        let (written, sweeping, stop) = (written.clone(), sweeping.clone(), stop.clone());
        let (max_s, max_o, lookups) = (
            max_sweeping_us.clone(),
            max_other_us.clone(),
            lookups.clone(),
        );
        std::thread::spawn(move || -> anyhow::Result<()> {
            let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
            while !stop.load(Ordering::Relaxed) {
                let n = written.load(Ordering::Relaxed);
                if n == 0 {
                    std::thread::sleep(Duration::from_millis(1));
                    continue;
                }
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let id = n - 1 - x % n.min(100_000);
                let during = sweeping.load(Ordering::Relaxed);
                let t = Instant::now();
                s.get_key("fulfilment", &key(id))?;
                let us = t.elapsed().as_micros() as i64;
                let during = during || sweeping.load(Ordering::Relaxed);
                let max = if during { &max_s } else { &max_o };
                max.fetch_max(us, Ordering::Relaxed);
                lookups.fetch_add(1, Ordering::Relaxed);
            }
            Ok(())
        })
    };

    let wal_start = lsn(&mut admin)?;
    let mut f = Figures {
        name: name.to_string(),
        ..Figures::default()
    };
    let started = Instant::now();
    let mut next_id: u64 = 0;
    let mut owed = 0.0;
    let mut next_sweep = sweep_ms;
    let mut next_report = 86_400_000;
    let mut t = 0;
    while t < end_ms {
        t += tick_ms;
        let now = epoch + t;
        owed += args.rate * tick_ms as f64 / 1000.0;
        let n = owed.floor() as u64;
        owed -= n as f64;
        let ids = next_id..next_id + n;
        next_id += n;
        let token = [1u8; 16];
        let mut tx = store.begin()?;
        for id in ids.clone() {
            let k = key(id);
            tx.insert_key(&NewKey {
                caller_id: "fulfilment",
                idem_key: &k,
                request_hash: &hash,
                locked_until_ms: now + 30_000,
                lease_token: &token,
                now_ms: now,
                expires_at_ms: now + retention_ms,
            })?;
        }
        tx.commit()?;
        let mut tx = store.begin()?;
        for id in ids {
            let k = key(id);
            tx.complete_key(&Completion {
                caller_id: "fulfilment",
                idem_key: &k,
                lease_token: &token,
                response_status: 201,
                response_body: &body,
                expires_at_ms: now + retention_ms,
            })?;
        }
        tx.commit()?;
        written.store(next_id, Ordering::Relaxed);
        if t >= next_sweep {
            next_sweep += sweep_ms;
            let before = lsn(&mut admin)?;
            sweeping.store(true, Ordering::Relaxed);
            let s0 = Instant::now();
            loop {
                let purged = store.sweep_batch(now, args.sweep_batch)?;
                f.purged += purged.len() as u64;
                if purged.len() < args.sweep_batch as usize {
                    break;
                }
            }
            let took = s0.elapsed();
            sweeping.store(false, Ordering::Relaxed);
            f.sweeps += 1;
            f.sweep_s += took.as_secs_f64();
            f.longest_sweep_ms = f.longest_sweep_ms.max(took.as_secs_f64() * 1e3);
            f.sweep_wal_bytes += lsn(&mut admin)? - before;
        }
        if t >= next_report {
            next_report += 86_400_000;
            let records = store.count_keys()?;
            let b = store.bytes()?;
            eprintln!(
                "{name}: day {:.0}: {records} records, {:.0} B per record, {} purged, {:.1} s wall",
                t as f64 / 86_400_000.0,
                (b.keys_table_bytes + b.keys_index_bytes) as f64 / records.max(1) as f64,
                f.purged,
                started.elapsed().as_secs_f64()
            );
        }
    }
    f.churn_s = started.elapsed().as_secs_f64();
    stop.store(true, Ordering::Relaxed);
    looker
        .join()
        .map_err(|_| anyhow::anyhow!("the lookup thread panicked"))??;
    f.total_wal_bytes = lsn(&mut admin)? - wal_start;
    f.records = store.count_keys()?;
    let b = store.bytes()?;
    f.key_bytes = b.keys_table_bytes + b.keys_index_bytes;
    // Statistics reach the views when a session reports them; give the server a moment.
    std::thread::sleep(Duration::from_millis(1500));
    f.dead_tuples = admin
        .query_one(
            "SELECT COALESCE(sum(n_dead_tup), 0)::int8 FROM pg_stat_user_tables
              WHERE schemaname = $1 AND relname LIKE 'idempotency_keys%'",
            &[&pool.schema()],
        )?
        .get(0);
    f.lookups = lookups.load(Ordering::Relaxed);
    f.lookup_max_ms_sweeping = max_sweeping_us.load(Ordering::Relaxed) as f64 / 1e3;
    f.lookup_max_ms_otherwise = max_other_us.load(Ordering::Relaxed) as f64 / 1e3;
    Ok(f)
}
