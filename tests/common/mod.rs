//! Shared test harness: an engine over a real store on a virtual clock, and the checks every
//! conformance test ends with. The store comes from a [`Backend`], so one suite runs against
//! every store.
#![allow(dead_code)]

use idemcalc::carrier::{Carrier, CarrierConfig, Latency};
use idemcalc::clock::VirtualClock;
use idemcalc::engine::{Engine, EngineConfig, Request};
use idemcalc::store::{SqliteOptions, SqliteStore, Store};
use std::path::PathBuf;
use std::sync::Arc;

pub const BODY: &str =
    r#"{"order_id":918273,"parcel_no":1,"label_version":1,"weight_g":1450,"service":"ground"}"#;
pub const OTHER_BODY: &str =
    r#"{"order_id":918273,"parcel_no":1,"label_version":1,"weight_g":1500,"service":"ground"}"#;
pub const KEY: &str = "label:918273:1:v1";

/// Where a test's store lives. Each backend value is private to one test.
pub enum Backend {
    Sqlite {
        _dir: tempfile::TempDir,
        path: PathBuf,
    },
}

impl Backend {
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("store.sqlite");
        Backend::Sqlite { _dir: dir, path }
    }

    /// A new, empty store of the same kind.
    pub fn fresh(&self) -> Self {
        match self {
            Backend::Sqlite { .. } => Backend::sqlite(),
        }
    }

    /// A new connection to this test's store.
    pub fn connect(&self) -> Box<dyn Store> {
        match self {
            Backend::Sqlite { path, .. } => {
                Box::new(SqliteStore::open(path, &SqliteOptions::default()).expect("open store"))
            }
        }
    }
}

pub struct Harness {
    pub backend: Backend,
    pub clock: VirtualClock,
    pub carrier: Arc<Carrier>,
    pub engine: Engine,
    pub config: EngineConfig,
}

pub fn carrier_config() -> CarrierConfig {
    CarrierConfig {
        latency: Latency::Fixed { ms: 50 },
        ..CarrierConfig::default()
    }
}

impl Harness {
    pub fn new(backend: Backend) -> Self {
        Self::with_config(backend, EngineConfig::default())
    }

    pub fn with_config(backend: Backend, config: EngineConfig) -> Self {
        let clock = VirtualClock::new();
        let carrier = Arc::new(Carrier::new(carrier_config()));
        let engine = Engine::new(
            backend.connect(),
            carrier.clone(),
            Arc::new(clock.clone()),
            config.clone(),
        );
        Self {
            backend,
            clock,
            carrier,
            engine,
            config,
        }
    }

    /// Another engine (its own connection) on the same store, clock and carrier.
    pub fn second_engine(&self) -> Engine {
        Engine::new(
            self.backend.connect(),
            self.carrier.clone(),
            Arc::new(self.clock.clone()),
            self.config.clone(),
        )
    }

    pub fn request(&self, body: &str) -> Request {
        Request::create_label("fulfilment", Some(KEY), body)
    }

    /// The checks that end every conformance test: the store is intact, every completed 201 has
    /// its label, and no parcel has two labels.
    pub fn assert_invariants(&mut self) {
        let inv = self.engine.store().invariants().expect("invariants");
        assert!(inv.integrity_ok, "integrity_check failed");
        assert_eq!(
            inv.completed_without_label, 0,
            "completed key without its label"
        );
        assert!(inv.max_labels_per_parcel <= 1, "a parcel has two labels");
    }
}
