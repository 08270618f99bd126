//! `idemcalc`: size and price idempotency-key stores.
//!
//! See ARCHITECTURE.md for the module map and how a scenario becomes a report.

pub mod cli;
pub mod duration;
pub mod format;
pub mod model;
pub mod traffic;
