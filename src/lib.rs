//! `idemcalc`: size and price idempotency-key stores.
//!
//! See ARCHITECTURE.md for the module map and how a scenario becomes a report.

pub mod bench;
pub mod carrier;
pub mod cli;
pub mod clock;
pub mod decision;
pub mod duration;
pub mod engine;
pub mod fit;
pub mod format;
pub mod host;
pub mod input;
pub mod load;
pub mod model;
pub mod net;
pub mod output;
pub mod payload;
pub mod report;
pub mod run;
pub mod scenario;
pub mod serve;
pub mod settings;
pub mod sim;
pub mod stats;
pub mod store;
pub mod sweeper;
pub(crate) mod tables;
pub mod traffic;
