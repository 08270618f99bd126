//! The lines of defence a run switches off: the one check of "off the seed's design", used by
//! the runner to class a scenario as a failure demonstration and by the report to keep such
//! runs off the sizing trade-off.

use super::replay::{KeyPolicy, SimConfig};
use crate::duration::{DAY_MS, format_secs};
use crate::engine::{CarrierKey, KeyScope, RecordPlacement};

/// The seed's lease: 30 s, longer than the carrier's 20 s timeout.
const SEED_LEASE_MS: i64 = 30_000;

/// The non-default engine, carrier and traffic switches of `cfg`, named like a scenario file
/// names them, so a failure scenario says at a glance which line of defence it removes.
/// `traffic` is false for a scripted timeline, whose requests are written out by hand.
///
/// A saved random key (`random_saved`) is not one: the seed names it a sound way to get a key.
/// Nor are several callers: callers sharing one label service, each with its own keys scoped
/// to it, is the seed's own design (and what most fitted logs hold); with `key_scope = global`
/// they are the failure, named by that switch.
pub fn deviations(cfg: &SimConfig, traffic: bool) -> Vec<String> {
    let mut out = Vec::new();
    let e = &cfg.engine;
    if e.key_scope == KeyScope::Global {
        out.push("key_scope = global".into());
    }
    if e.record_placement == RecordPlacement::SeparateStore {
        out.push("record_placement = separate_store".into());
    }
    if e.carrier_key == CarrierKey::None {
        out.push("carrier_key = none".into());
    }
    if traffic {
        if cfg.key_policy == KeyPolicy::NewPerAttempt {
            out.push("key_policy = new_per_attempt".into());
        }
        if cfg.crash_fraction > 0.0 {
            out.push(format!(
                "crash_fraction = {} at {}",
                cfg.crash_fraction,
                serde_json::to_value(cfg.crash_point)
                    .ok()
                    .and_then(|v| v.as_str().map(str::to_string))
                    .unwrap_or_default()
            ));
        }
    }
    let c = &cfg.carrier;
    // The seed's carrier remembers our derived key for a day; one that forgets sooner removes
    // the second line of defence behind a short retention.
    if c.window_ms < DAY_MS {
        out.push(format!(
            "carrier.window = {}",
            format_secs(c.window_ms as f64 / 1000.0)
        ));
    }
    if c.hang_fraction > 0.0 {
        out.push(format!("carrier.hang_fraction = {}", c.hang_fraction));
    }
    if e.lease_ms < SEED_LEASE_MS {
        out.push(format!(
            "lease = {}",
            format_secs(e.lease_ms as f64 / 1000.0)
        ));
    }
    out
}
