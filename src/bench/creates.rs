//! A fixed number of first-run creates on one side, with no clients, channels or clocks around
//! them: what an instruction counter (callgrind) divides by, engine against baseline, so the
//! comparison of what the engine adds does not depend on a shared machine's noise
//! (`scripts/callgrind-create`, docs/bench.md). Each create goes through the very `Service` the
//! bench's writer calls, with the key and body its clients send.

use super::checkpoint::Checkpoints;
use super::drive::{Job, Service};
use super::fill::{Filler, Layout, WEIGHT_G, body, key};
use super::{BenchConfig, BenchError, SqliteWriter, carrier, open};
use crate::clock::{Clock, SystemClock};
use crate::engine::{Engine, EngineConfig, Outcome};
use crate::store::{SqliteOptions, Store};
use std::path::Path;
use std::sync::Arc;

/// Which side the creates run on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Side {
    Engine,
    Baseline,
}

impl Side {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "engine" => Some(Side::Engine),
            "baseline" => Some(Side::Baseline),
            _ => None,
        }
    }
}

/// One side's writer on a pre-filled SQLite store, ready to create.
pub struct CreateLoop {
    service: Box<dyn Service>,
    next_order_id: i64,
}

impl CreateLoop {
    /// Fills `dir/creates.sqlite` with `prefill` completed keys and opens `side` on it, as the
    /// bench opens a side: `synchronous = NORMAL`, each transaction committing on its own. WAL
    /// checkpoints are left until the store is dropped, so none falls inside the counted creates.
    pub fn open(side: Side, dir: &Path, prefill: u64) -> Result<Self, BenchError> {
        let path = dir.join("creates.sqlite");
        let layout = Layout {
            completed: prefill,
            held: 0,
            lease_expired: 0,
        };
        let mut filler = Filler::open(&path)?;
        filler.fill(&layout, SystemClock.now_ms())?;
        filler.close()?;
        let config = BenchConfig {
            checkpoints: Checkpoints::Deferred,
            ..BenchConfig::default()
        };
        let writer = open(&path, &SqliteOptions::default(), &config)?;
        let service: Box<dyn Service> = match (side, writer) {
            (Side::Engine, SqliteWriter::PerTransaction(store)) => Box::new(Engine::new(
                Box::new(store),
                carrier(&config),
                Arc::new(SystemClock),
                EngineConfig::default(),
            )),
            (Side::Baseline, writer) => Box::new(super::Baseline::new(writer)),
            (Side::Engine, SqliteWriter::Group(_)) => {
                return Err(BenchError::Invalid(
                    "the create loop commits each transaction on its own".into(),
                ));
            }
        };
        Ok(Self {
            service,
            next_order_id: layout.fresh_from(),
        })
    }

    /// Runs `n` first-run creates, each a new key; every one must answer 201. Never inlined, so
    /// `callgrind --toggle-collect` can count this function alone.
    #[inline(never)]
    pub fn run(&mut self, n: u64) -> Result<u64, String> {
        for _ in 0..n {
            let order_id = self.next_order_id;
            self.next_order_id += 1;
            let job = Job {
                worker: 0,
                order_id,
                key: key(order_id),
                body: body(order_id, WEIGHT_G),
                // Computed by the engine's writer: this loop counts all the engine's work.
                digest: None,
            };
            match self.service.serve(job)? {
                Outcome::Created => {}
                other => return Err(format!("order {order_id}: {other:?}, expected Created")),
            }
        }
        Ok(n)
    }

    /// The side's store, to check what the creates left.
    pub fn store(&mut self) -> &mut dyn Store {
        self.service.store()
    }
}
