//! Tests that measure how the tool behaves with the machine to itself: a minute of `serve`,
//! `load` and `bench` writing flat out. Cargo runs test binaries one after another, so these do
//! not share the two cores with the rest of the suite (`tests/it`), whose parallel tests would
//! starve the very checkpoints they measure.

#[path = "../it/common/mod.rs"]
mod common;
mod wal;
