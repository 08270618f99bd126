use super::Format;
use crate::scenario::Scenario;
use crate::sim::timeline;
use crate::store::{OpenOptions, PgOptions, PgPool, StorePool, StoreSpec};
use anyhow::Context;
use std::path::PathBuf;

#[derive(Debug, clap::Args)]
pub struct ScenarioArgs {
    /// The scenario file (TOML) whose [timeline] to run, e.g. scenarios/lease-takeover.toml.
    pub file: PathBuf,
    /// Output format.
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
    /// The store: `sqlite:PATH`, a file path, or `postgres://USER@HOST:PORT/DATABASE`. A
    /// PostgreSQL run uses a temporary schema dropped afterwards, unless `?schema=NAME` names one
    /// to keep (default: a temporary SQLite file removed afterwards).
    #[arg(long, value_name = "SPEC", conflicts_with = "db")]
    pub store: Option<String>,
    /// Keep the SQLite store in this file: shorthand for `--store sqlite:FILE`.
    #[arg(long, value_name = "FILE")]
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
    let spec = match (&args.store, &args.db) {
        (Some(spec), _) => StoreSpec::parse(spec)?,
        (None, Some(path)) => StoreSpec::Sqlite(path.clone()),
        (None, None) => {
            tmp = tempfile::tempdir().context("cannot create a temporary directory")?;
            StoreSpec::Sqlite(tmp.path().join("store.sqlite"))
        }
    };
    // A timeline starts at virtual 2026-01-01 with an empty store: a PostgreSQL run without a
    // named schema gets a scratch one, as a SQLite run without --db gets a scratch file, so that
    // running it twice gives the same answers.
    // Scratch stores have random paths and schema names; the report names them stably so the
    // same scenario prints the same JSON.
    let stable_name = match (&spec, &args.store, &args.db) {
        (StoreSpec::Sqlite(_), None, None) => Some("sqlite (temporary file)".to_string()),
        (StoreSpec::Postgres { url, schema: None }, _, _) => Some(format!(
            "{} (scratch schema)",
            crate::store::postgres::redact_url(url)
        )),
        _ => None,
    };
    let (pool, scratch) = match spec {
        StoreSpec::Sqlite(path) => (
            StorePool::open(&path.display().to_string(), &OpenOptions::default())?,
            None,
        ),
        StoreSpec::Postgres { url, schema } => {
            let scratch = schema.is_none();
            let schema = schema.unwrap_or_else(|| {
                format!(
                    "idemcalc_scenario_{}",
                    &uuid::Uuid::new_v4().simple().to_string()[..12]
                )
            });
            let options = PgOptions {
                schema,
                pool_size: 2,
                ..PgOptions::default()
            };
            let pool = PgPool::connect(&url, &options)?;
            (StorePool::Postgres(pool.clone()), scratch.then_some(pool))
        }
    };
    let result = pool.get().map_err(anyhow::Error::from).and_then(|store| {
        timeline::run(&scenario, store)
            .with_context(|| format!("{}: running the timeline", args.file.display()))
    });
    if let Some(pool) = scratch {
        pool.drop_schema()?;
    }
    let mut report = result?;
    if let Some(name) = stable_name {
        report.store = name;
    }
    match args.format {
        Format::Table => print!("{}", timeline::render_table(&report)),
        Format::Json => println!("{}", serde_json::to_string_pretty(&report)?),
    }
    Ok(0)
}
