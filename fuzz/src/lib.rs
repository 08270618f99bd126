//! The checks each fuzz target runs on one input: the same properties as `tests/it/props.rs`, so a
//! finding here is a failing property there. Every check panics on a broken property, which
//! libFuzzer reports as a crash and saves under `artifacts/`.

use idemcalc::duration;
use idemcalc::engine::request::{canonical_json, hash_and_validate, request_hash, validate};
use idemcalc::scenario::Scenario;
use idemcalc::traffic::{Head, RetryDelay, Tail};
use std::path::Path;

/// The longest run of digits passed on to code that reads durations: far past `u64::MAX`
/// seconds (20 digits), which once panicked; kept as a bound on input size only.
pub const MAX_DIGIT_RUN: usize = 4096;

pub fn short_digit_runs(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_digit())
        .all(|run| run.len() <= MAX_DIGIT_RUN)
}

/// How serde_json's reserved object keys begin, as the canonical form writes the first one.
const SERDE_JSON_PRIVATE_KEY: &str = "{\"$serde_json::private::";

/// A body is answered without a panic; an accepted one round-trips through its canonical form
/// with the same hash; any JSON's RFC 8785 form is a fixed point.
pub fn body(text: &str) {
    let (hash, validated) = hash_and_validate("POST", "/labels", text);
    if let Ok(r) = validated {
        let canonical = r.body_json();
        assert_eq!(validate(&canonical).as_ref(), Ok(&r), "{text}");
        assert_eq!(request_hash("POST", "/labels", &canonical), hash, "{text}");
    }
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(text) {
        let once = canonical_json(&v);
        match serde_json::from_str::<serde_json::Value>(&once) {
            Ok(again) => assert_eq!(canonical_json(&again), once, "{text}"),
            // serde_json (with its `raw_value` feature, which a dependency enables) reads an
            // object whose *first* key is its private token as a raw value, not as a map. RFC
            // 8785 sorts keys, and `$` sorts before letters, so the canonical form of an
            // object holding that key (anywhere) can start with it: valid JSON that this
            // parser alone refuses. Any other refusal is a broken canonical form.
            Err(e) => assert!(
                once.starts_with(SERDE_JSON_PRIVATE_KEY),
                "RFC 8785 is JSON: {e}: {text}"
            ),
        }
    }
}

/// A duration parses or is refused naming the text.
pub fn duration(text: &str) {
    if !short_digit_runs(text) {
        return;
    }
    if let Err(e) = duration::parse(text) {
        assert_eq!(e.text, text);
    }
}

/// A scenario file is refused naming the file, or accepted and turned into run settings.
pub fn scenario(text: &str) {
    if !short_digit_runs(text) {
        return;
    }
    match Scenario::parse(Path::new("fuzz.toml"), text) {
        Ok(s) => {
            let _ = s.engine_config();
            let _ = s.carrier_config();
            let _ = s.sim_configs();
            let _ = s.settings.arrivals();
        }
        Err(e) => assert!(e.to_string().contains("fuzz.toml"), "{e}"),
    }
}

/// A retry-CDF file is refused naming the file, or read as a CDF that rises from 0 to 1.
pub fn retry_cdf(text: &str) {
    if !short_digit_runs(text) {
        return;
    }
    match RetryDelay::from_csv_str(
        text,
        Path::new("fuzz.csv"),
        Head::default(),
        Tail::default(),
    ) {
        Ok(d) => {
            let mut at_s = [0.1, 1.0, 60.0, 3600.0, 86_400.0, 1e7, d.max_horizon_s()];
            at_s.sort_by(f64::total_cmp);
            let mut previous = 0.0;
            for t in at_s {
                let c = d.cdf(t);
                assert!((0.0..=1.0).contains(&c) && c >= previous, "{text}");
                previous = c;
            }
        }
        Err(e) => assert!(e.to_string().contains("fuzz.csv"), "{e}"),
    }
}
