//! Creates per second of the engine, of its raw-SQL baseline and of an independent harness that
//! runs the seed's statements with nothing else, in alternating runs of one process, so the
//! three rates are compared on the same machine at the same moment (docs/bench.md, "The
//! independent harness").
//!
//! ```text
//! cargo run --release --example create_rate -- [--sides LIST] [ROUNDS] [CREATES] [PREFILL] [DIR]
//! ```
//!
//! Defaults: 5 rounds of 20,000 creates on 10,000 keys, stores in a temporary directory under
//! `DIR` (the system's temporary directory if not given; `/dev/shm` keeps the disk's writeback
//! out of a comparison of CPU work).
//!
//! The harness shares no code with idemcalc: its schema, pragmas, statements and saved
//! response are written here from the seed (the two tables, txn 1's claim, txn 2's completion
//! and label, two commits per create, statements prepared once), so a cost the engine and its
//! own baseline both carry by mistake still shows against it. The engine and the baseline run
//! through `bench::creates::CreateLoop`, the loop `scripts/callgrind-create` counts: one writer,
//! first-run creates only, no clients or channels. Every side opens a fresh store of `PREFILL`
//! completed keys per run, at `synchronous = NORMAL` with checkpoints left to the end.
//! `--sides harness` (or any comma-separated list of harness, engine, baseline) runs only those:
//! `scripts/callgrind-create` counts the harness's `Harness::run` that way.

use idemcalc::bench::creates::{CreateLoop, Side};
use idemcalc::bench::runs::{MeanInterval, Spread, paired_ratio, ratio_interval_text};
use rusqlite::{Connection, params};
use std::path::Path;
use std::time::{Instant, SystemTime, UNIX_EPOCH};

/// The seed's tables in SQLite: the key table with its `(caller_id, idem_key)` key and an
/// index on `expires_at` for the sweeper's oldest-first delete, and the labels with the second
/// line of defence, `UNIQUE (order_id, parcel_no)`.
const SCHEMA: &str = "
CREATE TABLE idempotency_keys (
    caller_id TEXT NOT NULL, idem_key TEXT NOT NULL, request_hash BLOB NOT NULL,
    state INTEGER NOT NULL, locked_until INTEGER, lease_token BLOB,
    response_status INTEGER, response_body TEXT,
    created_at INTEGER NOT NULL, expires_at INTEGER NOT NULL,
    PRIMARY KEY (caller_id, idem_key));
CREATE INDEX idempotency_keys_expires_at ON idempotency_keys (expires_at);
CREATE TABLE labels (
    label_id TEXT NOT NULL PRIMARY KEY, order_id INTEGER NOT NULL, parcel_no INTEGER NOT NULL,
    tracking_no TEXT NOT NULL, cost_cents INTEGER NOT NULL, created_by_key TEXT NOT NULL,
    UNIQUE (order_id, parcel_no));
";

const CLAIM: &str = "INSERT INTO idempotency_keys
    (caller_id, idem_key, request_hash, state, locked_until, lease_token, created_at, expires_at)
    VALUES (?1, ?2, ?3, 0, ?4, ?5, ?6, ?7) ON CONFLICT (caller_id, idem_key) DO NOTHING";
const COMPLETE: &str = "UPDATE idempotency_keys
    SET state = 1, locked_until = NULL, lease_token = NULL, response_status = 201,
        response_body = ?1, expires_at = ?2
    WHERE caller_id = ?3 AND idem_key = ?4 AND state = 0 AND lease_token = ?5";
const LABEL: &str = "INSERT INTO labels
    (label_id, order_id, parcel_no, tracking_no, cost_cents, created_by_key)
    VALUES (?1, ?2, 1, ?3, 600, ?4)";
const LEASE_MS: i64 = 30_000;
const RETENTION_MS: i64 = 86_400_000;
/// The seed's saved response, ~300 B.
const RESPONSE_BYTES: usize = 300;

/// The seed's statements on one connection, and nothing else.
struct Harness {
    conn: Connection,
    next_order_id: i64,
}

impl Harness {
    fn open(path: &Path, prefill: i64) -> rusqlite::Result<Self> {
        let conn = Connection::open(path)?;
        conn.execute_batch(
            "PRAGMA page_size = 8192; PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL;
             PRAGMA wal_autocheckpoint = 0;",
        )?;
        conn.execute_batch(SCHEMA)?;
        let mut harness = Self {
            conn,
            next_order_id: 1,
        };
        harness.conn.execute_batch("BEGIN")?;
        for _ in 0..prefill {
            harness.create()?;
        }
        harness
            .conn
            .execute_batch("COMMIT; PRAGMA wal_checkpoint(TRUNCATE);")?;
        Ok(harness)
    }

    /// Claim, complete and label one new key: with `autocommit`, txn 1 and txn 2 each commit
    /// (`BEGIN IMMEDIATE … COMMIT`, prepared once like every statement); without, inside the
    /// caller's transaction (the fill).
    fn create(&mut self) -> rusqlite::Result<()> {
        let order_id = self.next_order_id;
        self.next_order_id += 1;
        let outer = !self.conn.is_autocommit();
        let key = format!("label:{order_id}:1:v1");
        let mut hash = [0u8; 32];
        hash[..8].copy_from_slice(&order_id.to_le_bytes());
        let token = (order_id as u128)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            .to_le_bytes();
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as i64);
        let c = &self.conn;
        let begin = |c: &Connection| -> rusqlite::Result<()> {
            if !outer {
                c.prepare_cached("BEGIN IMMEDIATE")?.execute([])?;
            }
            Ok(())
        };
        let commit = |c: &Connection| -> rusqlite::Result<()> {
            if !outer {
                c.prepare_cached("COMMIT")?.execute([])?;
            }
            Ok(())
        };
        begin(c)?;
        let claimed = c.prepare_cached(CLAIM)?.execute(params![
            "fulfilment",
            key,
            &hash[..],
            now + LEASE_MS,
            &token[..],
            now,
            now + RETENTION_MS
        ])?;
        assert_eq!(claimed, 1, "a new key is claimed");
        commit(c)?;

        let label_id = format!("lbl_{order_id:012}");
        let tracking_no = format!("GRD{order_id:09}");
        let mut response = format!(
            r#"{{"cost_cents":600,"label_id":"{label_id}","order_id":{order_id},"parcel_no":1,"tracking_no":"{tracking_no}","pad":""#
        );
        while response.len() < RESPONSE_BYTES - 2 {
            response.push('x');
        }
        response.push_str("\"}");
        begin(c)?;
        let completed = c.prepare_cached(COMPLETE)?.execute(params![
            response,
            now + RETENTION_MS,
            "fulfilment",
            key,
            &token[..]
        ])?;
        assert_eq!(completed, 1, "the lease is still ours");
        c.prepare_cached(LABEL)?
            .execute(params![label_id, order_id, tracking_no, key])?;
        commit(c)
    }

    /// The measured creates, each committing its two transactions. Never inlined, so
    /// `callgrind --toggle-collect` can count this function alone.
    #[inline(never)]
    fn run(&mut self, n: u64) -> rusqlite::Result<()> {
        for _ in 0..n {
            self.create()?;
        }
        Ok(())
    }

    fn labels(&self) -> rusqlite::Result<i64> {
        self.conn
            .query_row("SELECT count(*) FROM labels", [], |r| r.get(0))
    }
}

/// Creates per second of one run of one side on a fresh store in `dir`.
fn run(side: &str, dir: &Path, creates: u64, prefill: u64) -> anyhow::Result<f64> {
    let path = dir.join(format!("{side}.sqlite"));
    let seconds = match side {
        "harness" => {
            let mut h = Harness::open(&path, prefill as i64)?;
            let start = Instant::now();
            h.run(creates)?;
            let s = start.elapsed().as_secs_f64();
            anyhow::ensure!(
                h.labels()? == (prefill + creates) as i64,
                "harness lost a label"
            );
            s
        }
        _ => {
            let which = Side::parse(side).ok_or_else(|| anyhow::anyhow!("no side {side}"))?;
            let mut l = CreateLoop::open(which, dir, prefill)?;
            let start = Instant::now();
            l.run(creates).map_err(anyhow::Error::msg)?;
            let s = start.elapsed().as_secs_f64();
            anyhow::ensure!(
                l.store().count_labels()? == prefill + creates,
                "{side} lost a label"
            );
            s
        }
    };
    Ok(creates as f64 / seconds)
}

fn arg(args: &[String], i: usize, default: u64, name: &str) -> anyhow::Result<u64> {
    match args.get(i) {
        None => Ok(default),
        Some(s) => s
            .parse()
            .map_err(|_| anyhow::anyhow!("{name} must be a whole number, not {s}")),
    }
}

fn interval(m: &MeanInterval) -> String {
    match ratio_interval_text(m) {
        Some(text) => format!("{:.2}, {text}", m.mean),
        None => format!("{:.2} (one round: no interval)", m.mean),
    }
}

fn main() -> anyhow::Result<()> {
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let all = ["harness", "engine", "baseline"];
    let mut only: Vec<&str> = all.to_vec();
    if args.first().map(String::as_str) == Some("--sides") {
        let list = args.get(1).cloned().unwrap_or_default();
        only = all
            .into_iter()
            .filter(|s| list.split(',').any(|x| x == *s))
            .collect();
        anyhow::ensure!(
            !only.is_empty() && list.split(',').all(|x| all.contains(&x)),
            "--sides takes a comma-separated list of harness, engine and baseline, not {list:?}"
        );
        args.drain(..2);
    }
    let rounds = arg(&args, 0, 5, "ROUNDS")?.max(1);
    let creates = arg(&args, 1, 20_000, "CREATES")?.max(1);
    let prefill = arg(&args, 2, 10_000, "PREFILL")?;
    let parent = args
        .get(3)
        .map_or_else(std::env::temp_dir, std::path::PathBuf::from);
    let sides = all;
    let mut rates: [Vec<f64>; 3] = Default::default();
    for round in 0..rounds {
        // Rotate which side goes first, so a drift in the machine's load favours none.
        for k in 0..sides.len() {
            let i = (k + round as usize) % sides.len();
            if !only.contains(&sides[i]) {
                continue;
            }
            let dir = tempfile::tempdir_in(&parent)?;
            let rate = run(sides[i], dir.path(), creates, prefill)?;
            eprintln!("round {}: {:<8} {rate:>9.0} creates/s", round + 1, sides[i]);
            rates[i].push(rate);
        }
    }
    println!(
        "{rounds} rounds of {creates} first-run creates per side, each on a fresh store of {prefill} keys in {}",
        parent.display()
    );
    println!(
        "{:<9} {:>17} {:>9} {:>9}",
        "", "creates/s mean ± σ", "min", "max"
    );
    for (side, r) in sides.iter().zip(&rates).filter(|(_, r)| !r.is_empty()) {
        let s = Spread::of(r);
        println!(
            "{side:<9} {:>10.0} ± {:>5.0} {:>9.0} {:>9.0}",
            s.mean, s.sd, s.min, s.max
        );
    }
    let [harness, engine, baseline] = &rates;
    if only.len() < sides.len() {
        return Ok(());
    }
    println!(
        "engine / harness:   {}",
        interval(&paired_ratio(engine, harness))
    );
    println!(
        "baseline / harness: {}",
        interval(&paired_ratio(baseline, harness))
    );
    println!(
        "engine / baseline:  {}",
        interval(&paired_ratio(engine, baseline))
    );
    Ok(())
}
