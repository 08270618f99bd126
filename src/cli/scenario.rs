use super::Format;
use crate::scenario::Scenario;
use crate::sim::timeline;
use crate::store::{SqliteOptions, SqliteStore};
use anyhow::Context;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct ScenarioArgs {
    /// The scenario file (TOML) whose [timeline] to run, e.g. scenarios/lease-takeover.toml.
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// Keep the SQLite store in this file (default: a temporary file removed afterwards).
    #[arg(long)]
    pub db: Option<PathBuf>,
}

pub fn run(args: &ScenarioArgs) -> anyhow::Result<i32> {
    let scenario = Scenario::load(&args.file)?;
    if scenario.timeline.is_none() {
        anyhow::bail!(
            "{}: no [timeline] to run; a [traffic] scenario runs with `idemcalc report --scenarios DIR --out DIR`",
            args.file.display()
        );
    }
    let tmp;
    let path = match &args.db {
        Some(p) => p.clone(),
        None => {
            tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
            tmp.path().join("store.sqlite")
        }
    };
    let store = SqliteStore::open(&path, &SqliteOptions::default())?;
    let report = timeline::run(&scenario, Box::new(store))
        .with_context(|| format!("{}: running the timeline", args.file.display()))?;
    match args.format {
        Format::Table => print!("{}", timeline::render_table(&report)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
    }
    Ok(0)
}
