//! One replicate, start to end ([`run_once`]): the engine on an empty store and a virtual
//! clock, the replay loop that interleaves sampled arrivals, the driver's events, the sweeper
//! and the time-series points, and the reconciliation at the end (the store's invariants,
//! invoice lines and completed records without a label).

use super::candidates::Rules;
use super::client::{Replay, namesakes, sampled_share};
use super::config::{SimConfig, SimError, invalid};
use super::tallies::{SeriesPoint, Tallies};
use crate::carrier::{Carrier, CarrierConfig, LedgerFile};
use crate::clock::{Millis, VirtualClock};
use crate::engine::{CarrierKey, Engine, EngineError};
use crate::sim::flow::Observed;
use crate::store::Store;
use crate::traffic::{Arrivals, LoadProfile, RetryDelay};
use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;

/// How a run reports how far it got, and learns that it must stop.
pub struct Progress<'a> {
    /// Called now and then with the fraction of simulated time done.
    pub tick: &'a (dyn Fn(f64) + Sync),
    /// Set by a Ctrl-C handler: the run stops at the next event and reports how far it got.
    pub interrupted: &'a AtomicBool,
}

/// Scales an arrival process by `factor` (the thinning of a Poisson process is Poisson).
fn scaled(arrivals: &Arrivals, factor: f64) -> Arrivals {
    match arrivals {
        Arrivals::Constant { rate_per_s } => Arrivals::Constant {
            rate_per_s: rate_per_s * factor,
        },
        Arrivals::Profile(p) => LoadProfile::new(
            p.steps()
                .iter()
                .map(|s| (s.start_s, s.rate_per_s * factor))
                .collect(),
        )
        .map(Arrivals::Profile)
        .unwrap_or(Arrivals::Constant {
            rate_per_s: p.mean_rate_per_s() * factor,
        }),
    }
}

/// Bytes of the key records (rows and both indexes) per record, from the store's own accounting.
fn bytes_per_record(engine: &mut Engine) -> Result<f64, SimError> {
    Ok(bytes_and_records(engine)?.0)
}

fn bytes_and_records(engine: &mut Engine) -> Result<(f64, u64), SimError> {
    let bytes = engine.store().bytes()?;
    let n = engine.store().count_keys()?;
    Ok(if n == 0 {
        (0.0, 0)
    } else {
        (bytes.keys_bytes() as f64 / n as f64, n)
    })
}

/// At most this many measurements of bytes per record in a run: each one reads the store's
/// page accounting, which costs a scan.
const BYTES_PER_RECORD_SAMPLES: u64 = 12;

/// Runs one replicate and returns its tallies.
pub fn run_once(
    cfg: &SimConfig,
    arrivals: &Arrivals,
    dist: &RetryDelay,
    store: Box<dyn Store>,
    replicate: u64,
    progress: &Progress<'_>,
) -> Result<Tallies, SimError> {
    cfg.validate()?;
    let store = empty(store)?;
    let seed = cfg
        .seed
        .wrapping_mul(0x9E37_79B9_7F4A_7C15)
        .wrapping_add(replicate);
    let clock = VirtualClock::new();
    // Only replicate 0 runs on the store the run names; the ledger file is its carrier's.
    let ledger = cfg.carrier_ledger.as_ref().filter(|_| replicate == 0);
    let engine = engine_for(cfg, arrivals, store, &clock, seed, ledger);
    let mut r = Replay::new(cfg, dist, engine, clock, seed);
    let mut schedule = Schedule::new(cfg, arrivals, &mut r);
    r.t.series_every_s = schedule.series_every as f64 / 1000.0;
    drive(&mut r, &mut schedule, progress)?;
    finish(r)
}

/// `store`, if it holds nothing: a simulation counts every record and label in it as its own.
fn empty(mut store: Box<dyn Store>) -> Result<Box<dyn Store>, SimError> {
    if let Some(what) = crate::store::existing_contents(store.as_mut())? {
        return Err(invalid(
            "--store",
            format!(
                "{} already holds {what}; a simulation needs an empty store (a new file or schema)",
                store.describe()
            ),
        ));
    }
    Ok(store)
}

/// The replicate's engine on `store`: a carrier of its own seed (no invoice lines kept in
/// memory; each written to `ledger` when given), and a Bloom filter of purged keys sized for
/// the records the replicate is expected to write.
fn engine_for(
    cfg: &SimConfig,
    arrivals: &Arrivals,
    store: Box<dyn Store>,
    clock: &VirtualClock,
    seed: u64,
    ledger: Option<&Arc<LedgerFile>>,
) -> Engine {
    let mut carrier = Carrier::new(CarrierConfig {
        seed: seed ^ 0x00C0_FFEE,
        ..cfg.carrier.clone()
    })
    .without_ledger();
    if let Some(file) = ledger {
        carrier = carrier.with_ledger_file(Arc::clone(file));
    }
    let carrier = Arc::new(carrier);
    let expected_records = arrivals.mean_rate_per_s()
        * sampled_share(cfg)
        * f64::from(namesakes(cfg))
        * cfg.arrival_s();
    Engine::new(store, carrier, Arc::new(clock.clone()), cfg.engine.clone()).with_purge_filter(
        expected_records as usize + 1000,
        0.001,
        seed,
    )
}

/// When the replay loop's own events come, in virtual ms: the next sampled arrival, sweep,
/// time-series point and measurement of bytes per record.
struct Schedule {
    /// The arrivals replayed: the traffic thinned to the two strata's sample fractions.
    sampled: Arrivals,
    /// When arrivals stop.
    arrival_ms: Millis,
    sweep_every: Millis,
    series_every: Millis,
    /// The steady window starts once one retention and a sweep have passed.
    steady_from: Millis,
    bpr_every: Millis,
    /// Arrival times are kept exact (seconds, f64) and only rounded down to the clock's
    /// millisecond when scheduled: each gap is drawn from the exact previous arrival, so gaps
    /// shorter than a millisecond are not lost (at 400/s, truncating each one inflated the
    /// traffic by 23 %).
    next_arrival_s: f64,
    next_arrival: Millis,
    next_sweep: Millis,
    next_series: Millis,
    next_bpr: Millis,
}

/// What the replay loop does next, and at what virtual time.
enum Next {
    Series(Millis),
    Sweep(Millis),
    Arrival(Millis),
    /// The driver's next event.
    Flow(Millis),
}

impl Next {
    fn at(&self) -> Millis {
        match *self {
            Next::Series(t) | Next::Sweep(t) | Next::Arrival(t) | Next::Flow(t) => t,
        }
    }
}

/// Where the steady-state average starts: once the oldest records can have left (retention
/// plus the sweeper's longest lag), and so that the window to the end of the arrivals spans
/// whole cycles of the store's size — whole partition periods (a partitioned store's size is
/// a sawtooth a period long: 4 h keys in 1 h partitions averaged from 4 h 1 m read 3 % high)
/// and whole days under a daily profile (a rush's store peaks once a day).
fn steady_from_ms(cfg: &SimConfig, arrivals: &Arrivals, arrival_ms: Millis) -> Millis {
    let (max_lag_s, sweeper_cycle_s) = cfg.sweeper.max_lag_and_cycle_s(cfg.sweep_period_s);
    let cycle_s = match arrivals {
        Arrivals::Profile(_) => crate::duration::DAY_S,
        Arrivals::Constant { .. } => sweeper_cycle_s,
    };
    let earliest = cfg.engine.retention_ms + (max_lag_s * 1000.0).ceil() as Millis;
    let cycle = ((cycle_s * 1000.0) as Millis).max(1);
    let whole = (arrival_ms - earliest).max(0) / cycle * cycle;
    if whole > 0 {
        arrival_ms - whole
    } else {
        earliest
    }
}

impl Schedule {
    /// The schedule at time zero; draws the first arrival from `r`'s random stream.
    fn new(cfg: &SimConfig, arrivals: &Arrivals, r: &mut Replay<'_>) -> Self {
        let sampled = scaled(arrivals, sampled_share(cfg));
        let arrival_ms = (cfg.arrival_s() * 1000.0) as Millis;
        let sweep_every = ((cfg.sweep_period_s * 1000.0) as Millis).max(1);
        let series_every = (arrival_ms / Millis::from(cfg.series_points.max(1))).max(1000);
        let steady_from = steady_from_ms(cfg, arrivals, arrival_ms);
        // Bytes per record is read at a few points of the steady window, or of the second
        // half of the arrivals when the run is too short to have one.
        let bpr_from = if steady_from < arrival_ms {
            steady_from
        } else {
            arrival_ms / 2
        };
        let bpr_every =
            ((arrival_ms - bpr_from) / series_every / BYTES_PER_RECORD_SAMPLES as Millis).max(1)
                * series_every;
        let next_arrival_s = sampled.next_arrival(0.0, &mut r.rng);
        Schedule {
            next_arrival: (next_arrival_s * 1000.0) as Millis,
            next_arrival_s,
            sampled,
            arrival_ms,
            sweep_every,
            series_every,
            steady_from,
            bpr_every,
            next_sweep: sweep_every,
            next_series: series_every,
            next_bpr: bpr_from,
        }
    }

    /// The next thing to do when the driver's next event is at `flow_at`; `None` once
    /// arrivals have stopped and the driver has nothing left. At equal times a series point
    /// comes first, then the sweep, then an arrival, then the driver.
    fn next(&self, flow_at: Option<Millis>) -> Option<Next> {
        let open = self.next_arrival < self.arrival_ms;
        if !open && flow_at.is_none() {
            return None;
        }
        // Once arrivals stop only far-apart retries remain; sweep just before each of them.
        let sweep_at = if open {
            self.next_sweep
        } else {
            self.next_sweep.max(flow_at.unwrap_or(self.next_sweep) - 1)
        };
        let arrival_at = if open { self.next_arrival } else { Millis::MAX };
        let series_at = if self.next_series <= self.arrival_ms {
            self.next_series
        } else {
            Millis::MAX
        };
        let now = arrival_at
            .min(flow_at.unwrap_or(Millis::MAX))
            .min(sweep_at)
            .min(series_at);
        Some(if now == series_at {
            Next::Series(now)
        } else if now == sweep_at {
            Next::Sweep(now)
        } else if now == arrival_at {
            Next::Arrival(now)
        } else {
            Next::Flow(now)
        })
    }
}

/// The replay loop; a store that fails once the loop has begun writing is reported with how far
/// the run got ([`SimError::StoreFailed`]).
fn drive(r: &mut Replay<'_>, s: &mut Schedule, progress: &Progress<'_>) -> Result<(), SimError> {
    drive_events(r, s, progress)
        .and_then(|()| ledger_ok(r.cfg))
        .map_err(|e| match e {
            SimError::Store(source) | SimError::Engine(EngineError::Store(source)) => {
                SimError::StoreFailed {
                    source,
                    simulated_s: r.flow.now_ms() as f64 / 1000.0,
                    arrival_s: s.arrival_ms as f64 / 1000.0,
                }
            }
            other => other,
        })
}

/// Runs until arrivals have stopped and every request is done, or the run is interrupted.
fn drive_events(
    r: &mut Replay<'_>,
    s: &mut Schedule,
    progress: &Progress<'_>,
) -> Result<(), SimError> {
    let mut observed = Vec::new();
    let mut last_tick = Instant::now();
    loop {
        if progress.interrupted.load(Ordering::Relaxed) {
            r.t.interrupted = true;
            break;
        }
        if !r.crashed_in_txn2.is_empty() {
            r.inspect_crashes()?;
        }
        ledger_ok(r.cfg)?;
        let Some(next) = s.next(r.flow.peek_ms()) else {
            break;
        };
        let now = next.at();
        if last_tick.elapsed().as_millis() >= 200 {
            (progress.tick)((now as f64 / s.arrival_ms as f64).min(1.0));
            last_tick = Instant::now();
        }
        match next {
            Next::Series(now) => r.series_point(now, s)?,
            Next::Sweep(now) => {
                r.flow.sweep_at(now, r.cfg.sweep_batch, u32::MAX);
                r.step(&mut observed)?;
                s.next_sweep = now + s.sweep_every;
            }
            Next::Arrival(now) => {
                r.t.replayed_intents += r.arrive(now);
                s.next_arrival_s = s.sampled.next_arrival(s.next_arrival_s, &mut r.rng);
                s.next_arrival = (s.next_arrival_s * 1000.0) as Millis;
            }
            Next::Flow(_) => r.step(&mut observed)?,
        }
    }
    Ok(())
}

/// Fails once the carrier's ledger file (`--carrier-ledger`) has refused a line: checked
/// before every event and at the end, so a run stops at the first purchase it could not write.
fn ledger_ok(cfg: &SimConfig) -> Result<(), SimError> {
    match cfg.carrier_ledger.as_deref() {
        Some(file) => match file.error() {
            Some(message) => Err(SimError::CarrierLedger {
                path: file.path().to_path_buf(),
                message: message.to_string(),
            }),
            None => Ok(()),
        },
        None => Ok(()),
    }
}

/// The replicate's tallies once the loop is done: the store's invariants, and the labels
/// table reconciled against the carrier's sales and the records crashes left completed.
fn finish(mut r: Replay<'_>) -> Result<Tallies, SimError> {
    r.t.simulated_s = r.flow.now_ms() as f64 / 1000.0;
    // Per-day figures divide by the arrivals replayed: all of them, or when interrupted only
    // those up to where the run stopped (dividing by the planned arrivals read 6,366 timed-out
    // calls a day where the model has 34,560).
    let covered_s = if r.t.interrupted {
        r.t.simulated_s.min(r.cfg.arrival_s())
    } else {
        r.cfg.arrival_s()
    };
    r.t.days = covered_s / 86_400.0;
    if r.t.bytes_per_record == 0.0 {
        r.t.bytes_per_record = bytes_per_record(r.flow.engine())?;
    }
    let engine = r.flow.engine();
    let inv = engine.store().invariants()?;
    r.t.invariant_max_labels_per_parcel = inv.max_labels_per_parcel;
    r.t.invariant_completed_without_label = inv.completed_without_label;
    r.t.invariant_integrity_ok = inv.integrity_ok;
    let labels: HashSet<String> = engine
        .store()
        .labels()?
        .into_iter()
        .map(|l| l.label_id)
        .collect();
    r.inspect_crashes()?;
    r.t.candidates = r.evidence.count(
        &r.cfg.candidates,
        &Rules {
            sweep_every: ((r.cfg.sweep_period_s * 1000.0) as Millis).max(1),
            arrival_end: (r.cfg.arrival_s() * 1000.0) as Millis,
            lease_ms: r.cfg.engine.lease_ms,
            carrier_window_ms: r.cfg.carrier.window_ms,
            carrier_keys: r.cfg.engine.carrier_key == CarrierKey::Derived,
        },
    );
    for (label_id, w) in &r.completed_at_crash {
        if !labels.contains(label_id) {
            r.t.completed_without_label.add(*w);
        }
    }
    for (label_id, w) in &r.purchases {
        if !labels.contains(label_id) {
            r.t.invoice_without_label.add(*w);
        }
    }
    Ok(r.t)
}

impl Replay<'_> {
    /// Runs the driver's next event and takes in what it reports.
    fn step(&mut self, observed: &mut Vec<Observed>) -> Result<(), SimError> {
        self.flow.step(observed)?;
        for o in observed.drain(..) {
            self.observe(o);
        }
        Ok(())
    }

    /// A time-series point at `now`: the store's size, the steady window's sums, and now
    /// and then its bytes per record.
    fn series_point(&mut self, now: Millis, s: &mut Schedule) -> Result<(), SimError> {
        let keys = self.estimated_keys();
        self.t.series.push(SeriesPoint {
            t_s: now as f64 / 1000.0,
            keys_estimated: keys,
            keys_replayed: self.live.len() as u64,
        });
        if now >= s.steady_from {
            self.t.steady_keys_sum += keys;
            self.t.steady_weight_sq_sum += self.live_weight_sq.max(0.0);
            self.t.steady_points += 1;
        }
        self.t.end_keys = keys;
        self.t.end_weight_sq = self.live_weight_sq.max(0.0);
        if now >= s.next_bpr {
            let (b, n) = bytes_and_records(self.flow.engine())?;
            if b > 0.0 {
                self.t.bytes_per_record_samples.push(b);
                self.t.bytes_per_record_records.push(n);
            }
            s.next_bpr = now + s.bpr_every;
        }
        // Bytes per record at the end of the arrivals, when the store is at its steady size.
        if s.next_series + s.series_every > s.arrival_ms {
            self.t.bytes_per_record = bytes_per_record(self.flow.engine())?;
        }
        s.next_series += s.series_every;
        Ok(())
    }

    /// Reads back each record whose attempt just died inside txn 2. On a store whose txn 2 is
    /// one transaction the crash rolled the completion back and the record is still started;
    /// where the record and the label are written separately (Redis) the record may already
    /// say 201 with a label that was never stored, and every retry is replayed that label.
    /// Read at once, before a retry or the sweeper touches the record; the labels table,
    /// which nothing purges, is checked at the end of the run.
    fn inspect_crashes(&mut self) -> Result<(), SimError> {
        for (record, w) in std::mem::take(&mut self.crashed_in_txn2) {
            let Some((caller, key)) = record.split_once('\u{0}') else {
                continue;
            };
            let Some(row) = self.flow.engine().store().get_key(caller, key)? else {
                continue;
            };
            if let Some(label_id) = row.replayed_label_id() {
                self.completed_at_crash.push((label_id, w));
            }
        }
        Ok(())
    }
}
