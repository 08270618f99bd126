//! Property tests for every parser that reads user input (issue 15, item 3): the request body's
//! validator and canonical form, the duration parser, the scenario parser and the retry-CDF
//! reader. They run on the stable toolchain with the rest of the suite; `fuzz/` runs the same
//! entry points under libFuzzer for longer. The RNG seed is fixed, so a run is reproducible and
//! a failure is found again by the next run.

use idemcalc::carrier::Service;
use idemcalc::duration;
use idemcalc::engine::request::{
    FIELDS, LabelRequest, MAX_EXACT_INTEGER, MAX_ORDER_ID, canonical_json, hash_and_validate,
    request_hash, validate,
};
use idemcalc::scenario::Scenario;
use idemcalc::traffic::{Head, RetryDelay, Tail};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use serde_json::Value;
use std::path::Path;
use std::time::Duration;

/// Small case counts, so the whole file runs in a few seconds. `PROPTEST_CASES` and
/// `PROPTEST_RNG_SEED` override both for a longer hunt (`PROPTEST_CASES=100000 cargo test
/// --release --test it props::`).
fn config(cases: u32) -> Config {
    let env = |name: &str| std::env::var(name).ok().and_then(|v| v.parse().ok());
    Config {
        cases: env("PROPTEST_CASES").map_or(cases, |c: u64| c as u32),
        rng_seed: RngSeed::Fixed(env("PROPTEST_RNG_SEED").unwrap_or(15)),
        failure_persistence: None,
        ..Config::default()
    }
}

/// The longest run of ASCII digits the generators produce: far past `u64::MAX` seconds
/// (`18446744073709551616s`, 20 digits), which once panicked in `Duration::from_secs_f64`.
const MAX_DIGIT_RUN: usize = 40;

fn short_digit_runs(text: &str) -> bool {
    text.split(|c: char| !c.is_ascii_digit())
        .all(|run| run.len() <= MAX_DIGIT_RUN)
}

// ---- Request bodies ----

fn service() -> impl Strategy<Value = Service> {
    prop_oneof![
        Just(Service::Ground),
        Just(Service::Express),
        Just(Service::Overnight)
    ]
}

/// Positive finite weights: everyday grams and any double at all.
fn weight_g() -> impl Strategy<Value = f64> {
    prop_oneof![
        (1u32..100_000).prop_map(f64::from),
        (1u32..100_000_000).prop_map(|n| f64::from(n) / 1000.0),
        any::<f64>().prop_filter("positive and finite", |w| *w > 0.0 && w.is_finite()),
    ]
}

fn label_request() -> impl Strategy<Value = LabelRequest> {
    (
        1..=MAX_ORDER_ID,
        prop_oneof![1i64..10, 1..=MAX_EXACT_INTEGER],
        prop_oneof![Just(1i64), 1..=MAX_EXACT_INTEGER],
        weight_g(),
        service(),
    )
        .prop_map(
            |(order_id, parcel_no, label_version, weight_g, service)| LabelRequest {
                order_id,
                parcel_no,
                label_version,
                weight_g,
                service,
            },
        )
}

/// Ways to write one integer as a JSON number.
fn int_spelling(n: i64, how: u8) -> String {
    match how % 3 {
        0 => n.to_string(),
        1 => format!("{n}.0"),
        _ => format!("{n:e}"),
    }
}

/// Ways to write one double as a JSON number.
fn float_spelling(w: f64, how: u8) -> String {
    match how % 5 {
        0 => format!("{w}"),
        1 => format!("{w:?}"),
        2 => format!("{w:e}"),
        3 => format!("{w:E}"),
        // More digits than a double holds: the parser must still round to the nearest double.
        _ => format!("{w:.30e}"),
    }
}

/// `r` as a body with its keys in `order`, the given number spellings and whitespace, and
/// `label_version` left out when it is the default and `omit_default` says so.
fn render(
    r: &LabelRequest,
    order: &[usize],
    spell: &[u8],
    space: &str,
    omit_default: bool,
) -> String {
    let service = serde_json::to_string(&r.service).unwrap();
    let fields: Vec<(&str, String)> = vec![
        ("order_id", int_spelling(r.order_id, spell[0])),
        ("parcel_no", int_spelling(r.parcel_no, spell[1])),
        ("label_version", int_spelling(r.label_version, spell[2])),
        ("weight_g", float_spelling(r.weight_g, spell[3])),
        ("service", service),
    ];
    let parts: Vec<String> = order
        .iter()
        .map(|&i| &fields[i])
        .filter(|(k, _)| !(omit_default && *k == "label_version" && r.label_version == 1))
        .map(|(k, v)| format!("{space}\"{k}\"{space}:{space}{v}{space}"))
        .collect();
    format!("{space}{{{}}}{space}", parts.join(","))
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
            .map(Value::Number)),
        "\\PC{0,8}".prop_map(Value::String),
        prop_oneof![Just("ground"), Just("express"), Just("teleport")]
            .prop_map(|s| Value::String(s.to_string())),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::btree_map("[a-z_]{0,8}", inner, 0..4)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Objects over the real field names (and one stranger), each with any JSON value or a
/// plausible one: most are refused, some are accepted.
fn near_body() -> impl Strategy<Value = String> {
    let value = prop_oneof![
        json_value(),
        (1i64..1000).prop_map(Value::from),
        Just(Value::String("ground".into())),
    ];
    let name = prop_oneof![
        prop::sample::select(FIELDS.to_vec()).prop_map(str::to_string),
        Just("note".to_string()),
    ];
    prop::collection::btree_map(name, value, 0..7)
        .prop_map(|m| Value::Object(m.into_iter().collect()).to_string())
}

proptest! {
    #![proptest_config(config(256))]

    /// Never a panic, whatever arrives as a body.
    #[test]
    fn any_text_is_answered_without_a_panic(body in "\\PC{0,64}") {
        let (_, validated) = hash_and_validate("POST", "/labels", &body);
        if let Err(e) = validated {
            prop_assert!(!e.field.is_empty());
        }
    }

    /// A body the service accepts is the request it names: its canonical form validates to the
    /// same request and hashes alike, and canonicalising twice changes nothing.
    #[test]
    fn any_accepted_body_round_trips(body in prop_oneof![near_body(), "\\PC{0,64}"]) {
        if let Ok(r) = validate(&body) {
            let canonical = r.body_json();
            prop_assert_eq!(validate(&canonical), Ok(r.clone()));
            prop_assert_eq!(validate(&canonical).unwrap().body_json(), canonical.clone());
            prop_assert_eq!(
                request_hash("POST", "/labels", &body),
                request_hash("POST", "/labels", &canonical)
            );
        }
    }

    /// Key order, whitespace, the spelling of each number and an omitted default never change
    /// the request or its hash.
    #[test]
    fn rewriting_a_body_keeps_its_request_and_hash(
        r in label_request(),
        order in Just(vec![0usize, 1, 2, 3, 4]).prop_shuffle(),
        spell in prop::collection::vec(any::<u8>(), 4),
        space in prop_oneof![Just(""), Just(" "), Just("\n\t ")],
        omit_default in any::<bool>(),
    ) {
        let body = render(&r, &order, &spell, space, omit_default);
        prop_assert_eq!(validate(&body), Ok(r.clone()), "{}", body);
        prop_assert_eq!(
            request_hash("POST", "/labels", &body),
            request_hash("POST", "/labels", &r.body_json()),
            "{}", body
        );
    }

    /// Two requests that differ hash apart (a SHA-256 collision aside).
    #[test]
    fn different_requests_hash_apart(a in label_request(), b in label_request()) {
        prop_assume!(a != b);
        prop_assert_ne!(
            request_hash("POST", "/labels", &a.body_json()),
            request_hash("POST", "/labels", &b.body_json())
        );
    }

    /// RFC 8785 output is a fixed point: parsing it and writing it again gives the same text.
    #[test]
    fn canonical_json_is_idempotent(v in json_value()) {
        let once = canonical_json(&v);
        let again: Value = serde_json::from_str(&once).unwrap();
        prop_assert_eq!(canonical_json(&again), once);
    }
}

// ---- Durations ----

/// Near-misses of the duration syntax, and plain text.
fn duration_text() -> impl Strategy<Value = String> {
    prop_oneof![
        "[0-9]{1,13}(\\.[0-9]{0,6})?[ ]?(ms|s|m|min|h|d|us|ns|y|w|)",
        "[0-9]{1,6}[a-z]{1,3} [0-9]{1,6}[a-z]{1,3}",
        "[ -~]{0,16}",
        "\\PC{0,16}",
    ]
    .prop_filter("no value past u64::MAX seconds", |t| short_digit_runs(t))
}

proptest! {
    #![proptest_config(config(512))]

    #[test]
    fn durations_never_panic(text in duration_text()) {
        match duration::parse(&text) {
            Ok(_) => {}
            Err(e) => prop_assert_eq!(e.text, text),
        }
    }

    /// What `format_secs` writes, `parse` reads back (to the microsecond).
    #[test]
    fn formatted_durations_read_back(ms in 0u64..100_000_000_000) {
        let secs = ms as f64 / 1000.0;
        let text = duration::format_secs(secs);
        let back = duration::parse(&text).unwrap();
        let want = Duration::from_millis(ms);
        let diff = back.abs_diff(want);
        prop_assert!(diff <= Duration::from_micros(1), "{} read as {:?}, not {:?}", text, back, want);
    }

    /// `N unit` is N times the unit.
    #[test]
    fn a_number_and_a_unit_scale(n in 0u32..1_000_000, unit in prop::sample::select(vec![
        ("ms", 0.001), ("s", 1.0), ("m", 60.0), ("min", 60.0), ("h", 3600.0), ("d", 86_400.0),
    ])) {
        let want = f64::from(n) * unit.1;
        match duration::parse(&format!("{n}{}", unit.0)) {
            Ok(d) => prop_assert!((d.as_secs_f64() - want).abs() <= 1e-6 * want.max(1.0)),
            // The one limit every duration has (per-setting limits come on top).
            Err(e) => prop_assert!(want > 100.0 * 365.0 * 86_400.0, "{:?}", e),
        }
    }
}

// ---- Scenario files ----

fn bundled_scenarios() -> Vec<String> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut texts: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .map(|p| std::fs::read_to_string(p).unwrap())
        .collect();
    texts.sort();
    assert!(
        texts.len() >= 5,
        "the bundled scenarios are the mutation corpus"
    );
    texts
}

/// A TOML value of any type, including the classic bad ones.
fn toml_value() -> impl Strategy<Value = String> {
    let scalar = prop_oneof![
        any::<i64>().prop_map(|n| n.to_string()),
        prop::sample::select(vec![
            "0",
            "-1",
            "0.0",
            "-0.0",
            "nan",
            "inf",
            "-inf",
            "1e308",
            "-1e308",
            "5e-324",
            "1.5",
            "0.999",
            "true",
            "false",
            "\"\"",
            "\"24h\"",
            "\"0s\"",
            "\"-5s\"",
            "\"9999999999999d\"",
            "\"1h 30m\"",
            "\"ground\"",
            "\"global\"",
            "\"after_carrier\"",
        ])
        .prop_map(str::to_string),
        any::<f64>()
            .prop_filter("TOML has no NaN payloads", |f| f.is_finite())
            .prop_map(|f| format!("{f:?}")),
        duration_text().prop_map(|t| format!("{t:?}")),
    ];
    scalar.prop_recursive(2, 8, 3, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..3).prop_map(|v| format!("[{}]", v.join(", "))),
            (inner.clone(), inner).prop_map(|(a, b)| format!("{{ median = {a}, p99 = {b} }}")),
        ]
    })
}

/// Runs everything a loaded scenario is turned into before a run starts.
fn use_scenario(s: &Scenario) {
    let _ = s.engine_config();
    let _ = s.carrier_config();
    let _ = s.sim_configs();
    let _ = s.settings.arrivals();
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn any_text_as_a_scenario_never_panics(text in "\\PC{0,200}") {
        prop_assume!(short_digit_runs(&text));
        if let Ok(s) = Scenario::parse(Path::new("prop.toml"), &text) {
            use_scenario(&s);
        }
    }

    #[test]
    fn any_bytes_as_a_scenario_never_panics(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
        let text = String::from_utf8_lossy(&bytes);
        prop_assume!(short_digit_runs(&text));
        if let Ok(s) = Scenario::parse(Path::new("prop.toml"), &text) {
            use_scenario(&s);
        }
    }

    /// Each bundled scenario with one value replaced by another of any type: refused with the
    /// file named, or accepted and usable; never a panic.
    #[test]
    fn a_scenario_with_one_value_changed_never_panics(
        file in any::<prop::sample::Index>(),
        line in any::<prop::sample::Index>(),
        value in toml_value(),
    ) {
        let texts = bundled_scenarios();
        let text = file.get(&texts);
        let lines: Vec<&str> = text.lines().collect();
        let assignments: Vec<usize> = (0..lines.len())
            .filter(|&i| !lines[i].trim_start().starts_with('#') && lines[i].contains(" = "))
            .collect();
        prop_assume!(!assignments.is_empty());
        let at = *line.get(&assignments);
        let key = lines[at].split(" = ").next().unwrap();
        let mut changed: Vec<String> = lines.iter().map(|l| l.to_string()).collect();
        changed[at] = format!("{key} = {value}");
        let changed = changed.join("\n");
        match Scenario::parse(Path::new("prop.toml"), &changed) {
            Ok(s) => use_scenario(&s),
            Err(e) => prop_assert!(e.to_string().contains("prop.toml"), "{}", e),
        }
    }
}

// ---- Retry CDF files ----

/// Increasing delays and never-decreasing fractions ending at 1: a CDF the reader must accept.
fn cdf_points() -> impl Strategy<Value = Vec<(u64, f64)>> {
    prop::collection::vec((1u64..10_000_000, 0.0f64..1.0), 1..8).prop_map(|mut raw| {
        raw.sort_by_key(|p| p.0);
        raw.dedup_by_key(|p| p.0);
        let mut fractions: Vec<f64> = raw.iter().map(|p| p.1).collect();
        fractions.sort_by(f64::total_cmp);
        let mut points: Vec<(u64, f64)> = raw
            .iter()
            .zip(fractions)
            .map(|(&(ms, _), f)| (ms + 1000, (f * 1000.0).round() / 1000.0))
            .collect();
        let last_ms = points.last().map_or(1000, |p| p.0);
        points.push((last_ms + 1000, 1.0));
        points
    })
}

proptest! {
    #![proptest_config(config(256))]

    #[test]
    fn any_text_as_a_retry_cdf_never_panics(
        text in prop_oneof![
            "\\PC{0,120}",
            prop::collection::vec(
                (duration_text(), prop_oneof!["[0-9.%-]{0,6}", "\\PC{0,6}"]),
                0..6,
            )
            .prop_map(|lines| lines.iter().map(|(d, f)| format!("{d},{f}\n")).collect()),
        ]
    ) {
        prop_assume!(short_digit_runs(&text));
        let path = Path::new("prop.csv");
        match RetryDelay::from_csv_str(&text, path, Head::default(), Tail::default()) {
            Ok(d) => {
                let mut previous = 0.0;
                for t in [0.1, 1.0, 60.0, 3600.0, 86_400.0, 1e7] {
                    let c = d.cdf(t);
                    prop_assert!((0.0..=1.0).contains(&c) && c >= previous);
                    previous = c;
                }
            }
            Err(e) => prop_assert!(e.to_string().contains("prop.csv"), "{}", e),
        }
    }

    /// A valid CDF written as CSV (with a header, a comment and percentages) reads back as its
    /// points.
    #[test]
    fn a_written_retry_cdf_reads_back(points in cdf_points(), percent in any::<bool>()) {
        let mut text = String::from("delay,cdf\n# measured\n");
        for &(ms, f) in &points {
            if percent {
                text.push_str(&format!("{ms}ms, {}%\n", f * 100.0));
            } else {
                text.push_str(&format!("{ms}ms,{f}\n"));
            }
        }
        let d = RetryDelay::from_csv_str(&text, Path::new("prop.csv"), Head::default(), Tail::default())
            .unwrap_or_else(|e| panic!("{e}\n{text}"));
        prop_assert_eq!(d.points().len(), points.len());
        for (&(s, c), &(ms, f)) in d.points().iter().zip(&points) {
            prop_assert!((s - ms as f64 / 1000.0).abs() < 1e-9);
            prop_assert!((c - f).abs() < 1e-12);
        }
        prop_assert!((d.cdf(d.max_horizon_s()) - 1.0).abs() < 1e-12);
    }
}
