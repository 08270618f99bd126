//! The simulator's ground truth, at scale: many sampled runs of a small world against
//! full-fidelity replays of the same world, and how often each 95 % interval covers the truth.
//!
//! ```text
//! cargo run --release --example coverage -- --seeds 200 --full-runs 16
//! ```
//!
//! The truth is the mean of `--full-runs` full-fidelity replays (`--sample 1`: every intent, no
//! tilting); each of `--seeds` sampled runs (`--sample`, timed-out calls boosted `--boost`
//! times) gives an estimate and a 95 % interval per figure. A right interval covers the truth
//! in about 95 % of seeds, and its z-scores ((estimate − truth) / half-width × 1.96) have a
//! standard deviation near 1: above 1 the interval is too narrow, below 1 too wide.
//! `tests/it/sim.rs` runs the same check with 40 seeds.

use clap::Parser;
use idemcalc::sim::replay::{self, Figure, Progress, SimConfig, SimReport};
use idemcalc::store::{SqliteOptions, SqliteStore, Store, Synchronous};
use idemcalc::traffic::{Arrivals, RetryDelay};
use rayon::prelude::*;
use std::sync::atomic::AtomicBool;

#[derive(Debug, Parser)]
struct Args {
    /// Sampled runs, one seed each.
    #[arg(long, default_value_t = 200)]
    seeds: u64,
    /// Full-fidelity runs whose mean is the truth.
    #[arg(long, default_value_t = 16)]
    full_runs: u64,
    /// Fraction of ordinary intents the sampled runs replay.
    #[arg(long, default_value_t = 0.25)]
    sample: f64,
    /// How much more often the sampled runs replay timed-out intents.
    #[arg(long, default_value_t = 4.0)]
    boost: f64,
}

fn run(cfg: &SimConfig) -> anyhow::Result<SimReport> {
    let dir = tempfile::tempdir()?;
    let path = dir.path().join("store.sqlite");
    let open = |_: u32| -> Result<Box<dyn Store>, _> {
        let opts = SqliteOptions {
            synchronous: Synchronous::Off,
            ..SqliteOptions::default()
        };
        Ok(Box::new(SqliteStore::open(&path, &opts)?) as Box<dyn Store>)
    };
    let stop = AtomicBool::new(false);
    let progress = Progress {
        tick: &|_| {},
        interrupted: &stop,
    };
    let arrivals = Arrivals::constant(cfg.rate_per_s)?;
    Ok(replay::simulate(
        cfg,
        &arrivals,
        &RetryDelay::seed(),
        1,
        "sqlite",
        &open,
        &progress,
    )?)
}

type Pick = fn(&SimReport) -> Figure;

const FIGURES: [(&str, Pick); 6] = [
    ("records in the store", |r| r.store_records_steady),
    ("late arrivals after purge /day", |r| {
        r.late_after_purge_per_day
    }),
    ("duplicate labels /day", |r| r.duplicate_labels_per_day),
    ("purged-key requests /day", |r| {
        r.purged_key_requests_per_day
    }),
    ("takeovers /day", |r| r.takeovers_per_day),
    ("timed-out calls /day", |r| r.timed_out_per_day),
];

fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let world = SimConfig::coverage_world();
    let full: Vec<SimReport> = (0..args.full_runs)
        .into_par_iter()
        .map(|i| {
            run(&SimConfig {
                seed: 1_000_000 + i,
                ..world.clone()
            })
        })
        .collect::<anyhow::Result<_>>()?;
    let sampled: Vec<SimReport> = (0..args.seeds)
        .into_par_iter()
        .map(|seed| {
            run(&SimConfig {
                sample: Some(args.sample),
                timeout_boost: Some(args.boost),
                seed,
                ..world.clone()
            })
        })
        .collect::<anyhow::Result<_>>()?;

    let expected_intents = world.rate_per_s * world.arrival_s();
    let replayed = full.iter().map(|r| r.replayed_intents as f64).sum::<f64>() / full.len() as f64;
    println!(
        "World: {}/s for {} s, retention {} s, network loss {}, crashes {}; truth = mean of {} full-fidelity runs ({:.0} intents each, {:.0} asked for); {} sampled runs at sample {} (timed-out ×{}).\n",
        world.rate_per_s,
        world.arrival_s(),
        world.retention_s(),
        world.network_loss(),
        world.crash_fraction,
        full.len(),
        replayed,
        expected_intents,
        sampled.len(),
        args.sample,
        args.boost
    );
    println!("| figure | truth (full fidelity) | sampled mean | 95 % covers truth | sd of z |");
    println!("|---|---:|---:|---:|---:|");
    for (name, pick) in FIGURES {
        let truths: Vec<f64> = full.iter().map(|r| pick(r).estimate).collect();
        let n = truths.len() as f64;
        let truth = truths.iter().sum::<f64>() / n;
        let se = (truths.iter().map(|t| (t - truth).powi(2)).sum::<f64>() / (n - 1.0) / n).sqrt();
        let figs: Vec<Figure> = sampled.iter().map(pick).collect();
        let covered = figs
            .iter()
            .filter(|f| f.ci95_low <= truth && truth <= f.ci95_high)
            .count();
        let z: Vec<f64> = figs
            .iter()
            .filter(|f| f.ci95_high > f.ci95_low)
            .map(|f| {
                let half = if f.estimate >= truth {
                    f.estimate - f.ci95_low
                } else {
                    f.ci95_high - f.estimate
                };
                (f.estimate - truth) / (half / 1.959_963_985).max(1e-12)
            })
            .collect();
        let zm = z.iter().sum::<f64>() / z.len().max(1) as f64;
        let zsd =
            (z.iter().map(|v| (v - zm).powi(2)).sum::<f64>() / (z.len().max(2) - 1) as f64).sqrt();
        let mean = figs.iter().map(|f| f.estimate).sum::<f64>() / figs.len() as f64;
        println!(
            "| {name} | {truth:.1} ± {se:.1} | {mean:.1} | {covered}/{} ({:.0} %) | {zsd:.2} |",
            figs.len(),
            100.0 * covered as f64 / figs.len() as f64
        );
    }
    Ok(())
}
