//! Simulation on a virtual clock: scripted timelines and synthetic traffic, both replayed against
//! the real engine over a real store.

pub mod deviations;
pub mod flow;
pub mod replay;
pub mod request_log;
pub mod timeline;
