//! The `--store` and `--pool` flags, shared by every subcommand that runs the engine.

use crate::store::{OpenOptions, StorePool};

/// Where the engine keeps its records.
#[derive(Debug, Clone, clap::Args)]
pub struct StoreArgs {
    /// The store: `sqlite:PATH`, a file path, or
    /// `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?schema=NAME]` (schema default
    /// `idemcalc`; the store creates and touches only that schema).
    #[arg(long, value_name = "SPEC")]
    pub store: Option<String>,
    /// At most this many PostgreSQL connections (one per worker); ignored for SQLite.
    #[arg(long, value_name = "CONNECTIONS", default_value_t = 8,
          value_parser = clap::value_parser!(u32).range(1..=crate::store::postgres::MAX_POOL_SIZE as i64))]
    pub pool: u32,
}

impl StoreArgs {
    /// Connects to the store named by `--store`, or `default_spec` when the flag is absent.
    pub fn open(&self, default_spec: &str, options: OpenOptions) -> anyhow::Result<StorePool> {
        let spec = self.store.as_deref().unwrap_or(default_spec);
        let options = options.with_pool_size(self.pool);
        Ok(StorePool::open(spec, &options)?)
    }
}
