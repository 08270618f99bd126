//! The integration tests, one binary: each module is a behaviour of the real binary or the
//! library, run against real SQLite files, PostgreSQL, Redis, HTTP and Chromium. One binary
//! links the crate (and polars) once, and its tests share the two cores instead of running
//! binary after binary. `cargo test --release --test it sim::` runs one module.

mod common;

mod answer_first;
mod attack;
mod bench;
mod browser;
mod conformance;
mod deadlines;
mod decision;
mod doc_commands;
mod errors;
mod fit;
mod fit_chain;
mod fit_sql;
mod hashing;
mod holds;
mod kill;
mod layers;
mod load;
mod load_agrees;
mod load_faults;
mod load_shards;
mod manifests;
mod model;
mod off_path;
mod outputs;
mod postgres_store;
mod props;
mod quoted_figures;
mod redis_store;
mod replicas;
mod report;
mod scratch_store;
mod serve;
mod settings;
mod sim;
mod timeline;
