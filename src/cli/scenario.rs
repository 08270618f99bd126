use super::Format;
use crate::scenario::Scenario;
use crate::sim::timeline;
use crate::store::Synchronous;
use crate::store::{Slot, StoreOptions, Stores};
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct ScenarioArgs {
    /// The scenario file (TOML) whose [timeline] to run, e.g. scenarios/lease-takeover.toml.
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// The store: `sqlite:PATH`, a file path, `postgres://USER@HOST:PORT/DATABASE` or
    /// `redis://HOST:PORT[/DB]`. A PostgreSQL or Redis run uses a temporary schema or prefix
    /// removed afterwards, unless `?schema=NAME` / `?prefix=NAME` names one to keep (default:
    /// SQLite in memory). It must be empty.
    #[arg(long, value_name = "SPEC", conflicts_with = "db")]
    pub store: Option<String>,
    /// Keep the SQLite store in this new file: shorthand for `--store sqlite:FILE`.
    #[arg(long, value_name = "FILE")]
    pub db: Option<PathBuf>,
}

/// Exit codes: 0 the store's invariants hold; 1 one failed (after printing everything);
/// 2 bad input, including a store that already holds records.
pub fn run(args: &ScenarioArgs) -> anyhow::Result<i32> {
    let scenario = Scenario::load(&args.file)?;
    if scenario.timeline.is_none() {
        anyhow::bail!(
            "{}: no [timeline] to run; a [traffic] scenario runs with `idemcalc report --scenarios DIR --out DIR`",
            args.file.display()
        );
    }
    // A timeline starts at virtual 2026-01-01 with an empty store, so running it twice gives
    // the same answers; the store's name in the output is stable for scratch stores.
    let stores = Stores::new(
        args.store.as_deref(),
        args.db.as_deref(),
        StoreOptions {
            purpose: "scenario",
            synchronous: Synchronous::Normal,
            pool_size: 2,
            // No answer of a timeline depends on the disk.
            scratch_in_memory: true,
        },
    )?;
    let report = crate::run::timeline(&scenario, &stores, Slot::default())
        .map_err(|e| anyhow::anyhow!("{}: running the timeline: {e:#}", args.file.display()));
    stores.finish()?;
    let report = report?;
    match args.format {
        Format::Table => super::print(&timeline::render_table(&report))?,
        Format::Json => super::print(&(serde_json::to_string_pretty(&report)? + "\n"))?,
    }
    let inv = &report.invariants;
    let hold =
        inv.integrity_ok && inv.completed_without_label == 0 && inv.max_labels_per_parcel <= 1;
    if !hold {
        eprintln!(
            "{}: the store's invariants failed (see Invariants above)",
            args.file.display()
        );
        return Ok(super::EXIT_BUDGET);
    }
    Ok(0)
}
