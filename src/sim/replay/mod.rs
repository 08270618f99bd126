//! Synthetic traffic replayed against the real engine on a virtual clock (`idemcalc simulate`).
//!
//! # What is simulated
//! Intents (one label for one parcel) arrive as a Poisson process, each from one of `callers`
//! tenants that number their orders alike. Every attempt carries the client's 250 ms deadline: a
//! reply later than that is never heard, so timeouts come from the latencies (1 ms of network
//! each way and the carrier's log-normal latency) and from the network losing a request or its
//! reply (`network_loss`, an input; of the losses, a share `done_fraction` lose the reply after
//! the server ran it). A client that heard nothing retries after a delay drawn from the
//! late-retry distribution (time since the first attempt); a retry answered 409 or 503 is
//! retried with exponential backoff and full jitter, up to `max_attempts` attempts in all. The
//! sweeper runs every `sweep_period_s` in batches. Every request goes through the engine's real
//! transactions on a real store.
//!
//! # Scaling: a stratified, importance-sampled replay
//! Three days at 400/s is over 100 M records; replaying them all would take hours. Two strata:
//!
//! * ordinary intents (no timeout) are replayed with probability `s_o` (`--sample`), each
//!   standing for `1/s_o` intents. They determine the store's size.
//! * timed-out intents (their first attempt is lost, or its carrier latency outlasts the
//!   deadline: drawn from the upper part of the latency distribution), rare (0.1 %) but the
//!   main source of late arrivals and duplicates, are replayed with probability
//!   `s_t = min(1, s_o · boost)`, each standing for `1/s_t`.
//!   Their retry delay is drawn from a mixture that puts half the draws in the tail beyond
//!   `tail_from_s` (the part that outlives retention); each draw then carries the likelihood
//!   ratio `f(d)/g(d)` as an extra weight, which keeps every estimator unbiased.
//!
//! Under per-tenant order spaces every tenant has an order of each number, and with global keys
//! those namesakes share a record; the sampling unit is then the group of namesakes, bad when
//! any member's first attempt is, so members keep independent fates (`client::arrive_namesakes`).
//!
//! A figure that counts events (late arrivals, duplicates) is estimated as `Σ wᵢ / days` over
//! the replayed events, with variance `Σ wᵢ² / days²` (the events are independent draws);
//! the 95 % interval is the normal one on that variance, or Garwood's exact Poisson interval
//! when all weights are equal and the count is small; with no event at all, a one-sided bound.
//! The store's size is the weighted count of live records, `Σ wᵢ`, averaged over the steady
//! window (after one retention has passed): a record a first attempt created weighs its
//! stratum's `1/s`, and one a retry created (after a loss or a purge) carries the tilted
//! delay's likelihood ratio as well, since the delay drawn is why it exists. Its variance is
//! that of a time average of an M/G/∞ count: each replayed record is Poisson at any instant
//! (variance `Σ wᵢ²`), and two
//! instants `h` apart share the records that live through both, a fraction `(1 - h/L)⁺` for a
//! record life `L` (retention plus the sweeper's mean lag). With `--sample 1` both strata are
//! replayed in full and the delay is drawn without tilting: a full-fidelity run, the ground
//! truth the sampled estimator is checked against (`tests/it/sim.rs`, `examples/coverage.rs`).
//!
//! # Where each part lives
//! `config`: what a simulation is asked, and its validation. `client`: intents, attempts and
//! retries, and the replicate's state. `observe`: what each event the driver reports adds to
//! the tallies. `run`: one replicate, the replay loop and the reconciliation at its end.
//! `tallies`: weighted event counts and the figures made of them. `store_size`: the records
//! and bytes-per-record figures. `pool`: replicates pooled into a [`SimReport`].
//!
//! The simulator measures only: each figure's model value ([`Figure::analytic`]) is left NaN
//! here, and `run` fills it from its plan's one model evaluation.

mod candidates;
mod client;
mod config;
mod observe;
mod pool;
mod run;
mod store_size;
mod tallies;

pub use candidates::Candidate;
pub use config::{
    KeyPolicy, SEED_DEADLINE_MS, SEED_NETWORK_MS, SimConfig, SimError, default_arrival_s, p_slow,
    whole_days_arrival_s,
};
pub use pool::{
    CandidateFigures, Detection, OutcomeRow, SCHEMA_VERSION, SimInvariants, SimReport, pool,
};
pub use run::{Progress, run_once};
pub use store_size::time_average_variance_factor;
pub use tallies::{CandidateTally, Figure, SeriesPoint, Tallies, Tally};

use crate::store::{Store, StoreError};
use crate::traffic::{Arrivals, RetryDelay};
use std::time::Instant;

/// Runs `replicates` independent replicates in parallel (rayon), each on its own store from
/// `open_store`, and pools them. `store_name` is what the report calls the store: a stable
/// name, not a temporary path, so the same inputs give the same JSON.
pub fn simulate(
    cfg: &SimConfig,
    arrivals: &Arrivals,
    dist: &RetryDelay,
    replicates: u32,
    store_name: &str,
    open_store: &(dyn Fn(u32) -> Result<Box<dyn Store>, StoreError> + Sync),
    progress: &Progress<'_>,
) -> Result<SimReport, SimError> {
    use rayon::prelude::*;
    cfg.validate()?;
    let started = Instant::now();
    let runs: Vec<Tallies> = (0..replicates.max(1))
        .into_par_iter()
        .map(|i| {
            let store = open_store(i)?;
            run_once(cfg, arrivals, dist, store, u64::from(i), progress)
        })
        .collect::<Result<_, _>>()?;
    Ok(pool(
        cfg,
        arrivals,
        &runs,
        store_name.to_string(),
        started.elapsed().as_secs_f64(),
    ))
}
