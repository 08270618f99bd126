//! One knob, one name, one default, one check: flags and scenario files are two spellings of the
//! same settings (issue 10), and no value typed into either can panic the binary (issue 15).

use crate::common;

use common::idemcalc;
use idemcalc::scenario::Scenario;
use idemcalc::settings::flags::Flags;
use idemcalc::settings::knobs::{ESTIMATE, KNOBS, Kind, SIMULATE};
use idemcalc::settings::{Budgets, Settings};
use std::path::{Path, PathBuf};

fn scenario_path(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("scenarios")
        .join(name)
}

/// The minimal simulated scenario: every knob at its file default.
const MINIMAL: &str = "name = \"x\"\n[traffic]\n";

fn parse(text: &str) -> Result<Scenario, idemcalc::scenario::ScenarioError> {
    Scenario::parse(Path::new("x.toml"), text)
}

#[test]
fn every_flag_default_equals_the_scenario_files_default() {
    let file = parse(MINIMAL).unwrap().settings;
    let simulate = Flags::<SIMULATE>::default().settings().unwrap();
    let estimate = Flags::<ESTIMATE>::default().settings().unwrap();
    assert_eq!(simulate, file);
    assert_eq!(estimate, file);
    assert_eq!(Settings::default(), file);
}

/// `SimConfig::default()` (the simulator sits below `settings` and cannot ask the knob table)
/// repeats the table's defaults: it must repeat them exactly, field for field.
#[test]
fn the_simulators_own_default_is_the_knob_tables() {
    let own = serde_json::to_value(idemcalc::sim::replay::SimConfig::default()).unwrap();
    let table = serde_json::to_value(Settings::default().sim_config(86_400.0)).unwrap();
    assert_eq!(own, table);
}

/// Issue 34 item 10: one name per concept. The label price and the crash fraction had other
/// names in scenario files (`price_usd`, `crash_rate`) and on the command line
/// (`--crash-rate`); the new names are the knobs', and files and commands written before still
/// read the same.
#[test]
fn renamed_fields_and_flags_still_read_the_same() {
    let new =
        parse("name = \"x\"\n[carrier]\nlabel_price_usd = 4.8\n[traffic]\ncrash_fraction = 0.01\n")
            .unwrap()
            .settings;
    let old = parse("name = \"x\"\n[carrier]\nprice_usd = 4.8\n[traffic]\ncrash_rate = 0.01\n")
        .unwrap()
        .settings;
    assert_eq!(new, old);
    assert_eq!(new.carrier.label_price_usd, 4.8);
    assert_eq!(new.traffic.crash_fraction, 0.01);
    let flags = Flags::<SIMULATE>::from_pairs(&[("crash_fraction", "0.01")]);
    assert_eq!(flags.settings().unwrap().traffic.crash_fraction, 0.01);
    assert_eq!(
        dry_run(&["--crash-rate", "0.01"]),
        dry_run(&["--crash-fraction", "0.01"])
    );
}

/// The same default typed explicitly as a flag and written explicitly in a file lands on the
/// defaults: the table's text is valid in both spellings, and both read it the same way.
#[test]
fn each_default_typed_as_a_flag_or_written_in_a_file_is_the_default() {
    let defaults = Settings::default();
    for k in KNOBS {
        let Some(default) = k.default else { continue };
        if k.commands & SIMULATE != 0 {
            let flags = Flags::<SIMULATE>::from_pairs(&[(k.name, default)]);
            assert_eq!(flags.settings().unwrap(), defaults, "{}", k.flag);
        }
        let Some(field) = k.field else { continue };
        if field.starts_with("traffic.rush.") {
            // Writing any rush field in a file makes a rush; its defaults are checked below.
            continue;
        }
        let value = match k.kind {
            Kind::Number { .. } | Kind::Fraction | Kind::Count { .. } => default.to_string(),
            _ if k.list_max.is_some() => format!("[{default:?}]"),
            _ => format!("{default:?}"),
        };
        let text = toml_with(field, &value);
        let s = parse(&text).unwrap_or_else(|e| panic!("{field} = {value}: {e}\n{text}"));
        assert_eq!(s.settings, defaults, "{field}");
    }
    let rush = parse("name = \"x\"\n[traffic]\nrush = { rate = 2000 }\n").unwrap();
    let flags = Flags::<SIMULATE>::from_pairs(&[("rush_rate_per_s", "2000")]);
    assert_eq!(rush.settings, flags.settings().unwrap());
    let r = rush.settings.traffic.rush.unwrap();
    assert_eq!((r.start_s, r.duration_s), (16.0 * 3600.0, 4.0 * 3600.0));
}

/// A scenario with `field = value` (dotted fields inside an inline table).
fn toml_with(field: &str, value: &str) -> String {
    let parts: Vec<&str> = field.split('.').collect();
    let line = match parts.as_slice() {
        [key] => return format!("name = \"x\"\n{key} = {value}\n[traffic]\n"),
        [_, key] => format!("{key} = {value}"),
        [_, key, "median"] => format!("{key} = {{ median = {value}, p99 = \"100ms\" }}"),
        [_, key, "p99"] => format!("{key} = {{ median = \"30ms\", p99 = {value} }}"),
        [_, key, "rate"] => format!("{key} = {{ rate = {value} }}"),
        [_, key, sub] => format!("{key} = {{ rate = 2000, {sub} = {value} }}"),
        _ => panic!("{field}"),
    };
    let section = parts[0];
    if section == "traffic" {
        format!("name = \"x\"\n[traffic]\n{line}\n")
    } else {
        format!("name = \"x\"\n[traffic]\n[{section}]\n{line}\n")
    }
}

/// Each bundled simulated scenario, written as `simulate` flags.
const AS_FLAGS: &[(&str, &[&str])] = &[
    (
        "baseline-400.toml",
        &[
            "--seed=1",
            "--lease=30s",
            "--carrier-timeout=20s",
            "--retention=24h",
            "--carrier-median=30ms",
            "--carrier-p99=100ms",
            "--carrier-window=24h",
            "--label-price=6.0",
            "--rate=400",
            "--timeout-fraction=0.001",
            "--done-fraction=0.6",
            "--sweep-period=10m",
            "--series-points=2160",
            "--peak-rate=2000",
        ],
    ),
    (
        "failure-carrier-without-key.toml",
        &[
            "--seed=15",
            "--retention=24h",
            "--carrier-key=none",
            "--carrier-hang-fraction=0.01",
            "--rate=400",
            "--target=4000",
        ],
    ),
    (
        "failure-global-keys.toml",
        &[
            "--seed=13",
            "--retention=24h",
            "--key-scope=global",
            "--order-space=per-tenant",
            "--rate=400",
            "--callers=2",
            "--target=4000",
        ],
    ),
    (
        "failure-new-key-per-attempt.toml",
        &[
            "--seed=11",
            "--retention=24h",
            "--rate=400",
            "--key-policy=new-per-attempt",
            "--target=4000",
        ],
    ),
    (
        "failure-separate-store.toml",
        &[
            "--seed=14",
            "--retention=24h",
            "--record-placement=separate-store",
            "--rate=400",
            "--crash-fraction=0.01",
            "--crash-point=inside-txn2",
            "--backoff-base=5s",
            "--backoff-cap=30s",
            "--target=15000",
        ],
    ),
    (
        "failure-short-lease.toml",
        &[
            "--seed=16",
            "--lease=1s",
            "--retention=24h",
            "--carrier-median=300ms",
            "--carrier-p99=3s",
            "--rate=400",
            "--target=4000",
        ],
    ),
    (
        "failure-short-retention.toml",
        &[
            "--seed=12",
            "--retention=1h",
            "--carrier-window=1h",
            "--rate=400",
            "--target=4000",
        ],
    ),
    (
        "peak-2000.toml",
        &[
            "--seed=2",
            "--lease=30s",
            "--carrier-timeout=20s",
            "--retention=24h",
            "--carrier-median=30ms",
            "--carrier-p99=100ms",
            "--carrier-window=24h",
            "--label-price=6.0",
            "--rate=2000",
            "--timeout-fraction=0.001",
            "--done-fraction=0.6",
            "--sweep-period=10m",
            "--series-points=2160",
        ],
    ),
    (
        "retention-3d.toml",
        &[
            "--seed=3",
            "--lease=30s",
            "--carrier-timeout=20s",
            "--retention=3d",
            "--carrier-median=30ms",
            "--carrier-p99=100ms",
            "--carrier-window=24h",
            "--label-price=6.0",
            "--rate=400",
            "--timeout-fraction=0.001",
            "--done-fraction=0.6",
            "--target=30000",
            "--peak-rate=2000",
        ],
    ),
];

fn dry_run(args: &[&str]) -> serde_json::Value {
    let mut all = vec!["simulate", "--dry-run"];
    all.extend_from_slice(args);
    let (code, out, err) = idemcalc(&all);
    assert_eq!(code, Some(0), "{args:?}: {err}");
    serde_json::from_str(&out).unwrap()
}

#[test]
fn every_bundled_scenario_gives_the_same_settings_as_its_flags() {
    let simulated: Vec<String> = std::fs::read_dir(scenario_path(""))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .filter(|p| Scenario::load(p).unwrap().simulated)
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for name in &simulated {
        assert!(
            AS_FLAGS.iter().any(|(n, _)| n == name),
            "{name} has no flag equivalent in this test"
        );
    }
    for (name, flags) in AS_FLAGS {
        let path = scenario_path(name);
        let mut from_file = Scenario::load(&path).unwrap().settings;
        // Budgets are scenario-file fields only; everything else has a flag.
        from_file.budgets = Budgets::default();
        let from_flags = dry_run(flags);
        assert_eq!(
            from_flags,
            serde_json::to_value(&from_file).unwrap(),
            "{name}"
        );
        // And through the binary's own file path.
        let mut via_file = dry_run(&["--scenario", path.to_str().unwrap()]);
        via_file["budgets"] = serde_json::to_value(Budgets::default()).unwrap();
        assert_eq!(from_flags, via_file, "{name}");
    }
}

/// The same small scenario run from flags and from its file prints the same JSON (a whole day:
/// a daily rush needs whole days).
#[test]
fn a_scenario_as_flags_and_as_a_file_simulates_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("small.toml");
    std::fs::write(
        &file,
        "name = \"small\"\nseed = 7\n[engine]\nretention = \"1h\"\nlease = \"10s\"\n\
         [carrier]\nlatency = { median = \"50ms\", p99 = \"400ms\" }\n\
         [traffic]\nrate = 300\nduration = \"1d\"\ntarget = 300\nseries_points = 40\n\
         rush = { rate = 900, start = \"1h\", duration = \"30m\" }\n[model]\nbytes_per_record = 400\n",
    )
    .unwrap();
    let run = |args: &[&str]| {
        let mut all = vec!["simulate", "--quiet", "--format", "json"];
        all.extend_from_slice(args);
        let (code, out, err) = idemcalc(&all);
        assert_eq!(code, Some(0), "{err}");
        let mut v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v.as_object_mut().unwrap().remove("wall_seconds");
        v
    };
    let from_file = run(&["--scenario", file.to_str().unwrap()]);
    let from_flags = run(&[
        "--seed=7",
        "--retention=1h",
        "--lease=10s",
        "--carrier-median=50ms",
        "--carrier-p99=400ms",
        "--rate=300",
        "--duration=1d",
        "--target=300",
        "--series-points=40",
        "--rush-rate=900",
        "--rush-start=1h",
        "--rush-duration=30m",
        "--bytes-per-record=400",
    ]);
    assert_eq!(from_file, from_flags);
    // The model beside the measurement uses the file's record size, not a built-in 512 B.
    let bpr = from_file["bytes_per_record_measured"]["analytic"]
        .as_f64()
        .unwrap();
    assert_eq!(bpr, 400.0);
}

/// The classic bad values (issue 15). `0` is valid for some knobs (a fraction, a price, a seed).
const BAD: &[&str] = &[
    "",
    "-1",
    "0",
    "NaN",
    "inf",
    "1e308",
    "18446744073709551616",
    "18446744073709551616s",
];

/// Whether `0` is a valid value; `typed` as a flag, `0` is also a duration (zero seconds),
/// while in a file a duration must be a string.
fn zero_is_valid(kind: Kind, typed: bool) -> bool {
    match kind {
        Kind::Duration { above_zero, .. } => typed && !above_zero,
        Kind::Fraction => true,
        Kind::Number { min, above_min, .. } => min == 0.0 && !above_min,
        Kind::Count { min, .. } => min == 0,
        Kind::PerDay => true,
        _ => false,
    }
}

#[test]
fn bad_values_of_every_flag_exit_2_naming_the_flag() {
    for k in KNOBS {
        if matches!(k.kind, Kind::Choice(_) | Kind::Path) || k.commands == 0 {
            continue;
        }
        for bad in BAD {
            let flag = format!("{}={bad}", k.flag);
            let (code, _, err) = if k.commands & SIMULATE != 0 {
                idemcalc(&["simulate", "--dry-run", &flag])
            } else {
                idemcalc(&["estimate", "--format", "json", &flag])
            };
            assert!(!err.contains("panicked"), "{flag}: {err}");
            if *bad == "0" && zero_is_valid(k.kind, true) {
                assert_eq!(code, Some(0), "{flag}: {err}");
                continue;
            }
            assert_eq!(code, Some(2), "{flag}: {err}");
            assert!(err.contains(k.flag), "{flag}: {err}");
        }
    }
}

#[test]
fn bad_values_of_every_file_field_are_named_with_file_line_and_field() {
    let bad_toml = [
        "\"\"",
        "-1",
        "0",
        "nan",
        "inf",
        "1e308",
        "18446744073709551616",
        "\"18446744073709551616s\"",
    ];
    for k in KNOBS {
        let Some(field) = k.field else { continue };
        if matches!(k.kind, Kind::Choice(_) | Kind::Path) {
            continue;
        }
        for bad in bad_toml {
            let text = toml_with(field, bad);
            let result = parse(&text);
            if bad == "0" && zero_is_valid(k.kind, false) {
                assert!(result.is_ok(), "{field} = 0: {:?}", result.err());
                continue;
            }
            let e = result
                .err()
                .unwrap_or_else(|| panic!("{field} = {bad} was accepted"));
            let shown = e.to_string();
            // The field, or the table it sits in (`traffic.rush`, `carrier.latency`).
            let parent = field.rsplit_once('.').map_or(field, |p| p.0);
            let named = e.field().unwrap_or("");
            assert!(
                named == field || named == parent,
                "{field} = {bad}: names {named:?}: {shown}"
            );
            assert!(shown.starts_with("x.toml:"), "{field} = {bad}: {shown}");
            assert!(e.line().is_some(), "{field} = {bad}: {shown}");
        }
    }
}

/// Issue 15: a huge duration panicked in `Duration::from_secs_f64` (exit 101).
#[test]
fn a_retention_of_2_pow_64_seconds_exits_2_naming_the_flag() {
    let (code, _, err) = idemcalc(&["simulate", "--retention", "18446744073709551616s"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--retention"), "{err}");
    let (code, _, err) = idemcalc(&["estimate", "--retry-horizon", "18446744073709551616s"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--retry-horizon"), "{err}");
}

/// A retention that does not outlast the lease plus the carrier timeout is refused, naming
/// both, by every subcommand that takes it: a record could expire while its attempt still runs
/// (issue "Reliability, round four", item 2).
#[test]
fn a_retention_shorter_than_an_attempt_is_refused_naming_lease_and_carrier_timeout() {
    for cmd in [
        vec!["simulate", "--retention", "50s", "--dry-run"],
        vec!["serve", "--retention", "40s", "--callers", "/nonexistent"],
        vec![
            "simulate",
            "--retention",
            "10m",
            "--lease",
            "40m",
            "--carrier-timeout",
            "20m",
            "--dry-run",
        ],
    ] {
        let (code, _, err) = idemcalc(&cmd);
        assert_eq!(code, Some(2), "{cmd:?}: {err}");
        for flag in ["--retention", "--lease", "--carrier-timeout"] {
            assert!(err.contains(flag), "{cmd:?} names {flag}: {err}");
        }
    }
    let (code, _, err) = idemcalc(&["simulate", "--retention", "51s", "--dry-run"]);
    assert_eq!(code, Some(0), "just longer than 30s + 20s: {err}");
}

/// Issue 15: `idemcalc scenario /dev/zero` grew to 5 GB; input files are read with a limit.
#[test]
fn an_endless_scenario_file_is_refused() {
    let (code, _, err) = idemcalc(&["scenario", "/dev/zero"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("/dev/zero") && err.contains("is a device"),
        "{err}"
    );
    let (code, _, err) = idemcalc(&["estimate", "--retry-cdf", "/dev/zero"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("/dev/zero"), "{err}");
}

/// Issue 15: `scenario --db` onto an existing store replayed into it; it is refused like
/// `simulate`'s.
#[test]
fn a_timeline_onto_an_existing_store_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("store.sqlite");
    let file = scenario_path("lease-takeover.toml");
    let args = [
        "scenario",
        file.to_str().unwrap(),
        "--db",
        db.to_str().unwrap(),
    ];
    let (code, _, err) = idemcalc(&args);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = idemcalc(&args);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("already holds"), "{err}");
}

/// The old spellings still work, hidden: `--timeout-rate` is `--timeout-fraction`.
#[test]
fn old_flag_spellings_are_aliases() {
    let a = dry_run(&[
        "--timeout-rate=0.002",
        "--rush-rate=900",
        "--rush-for=2h",
        "--carrier-hang-rate=0.1",
    ]);
    let b = dry_run(&[
        "--timeout-fraction=0.002",
        "--rush-rate=900",
        "--rush-duration=2h",
        "--carrier-hang-fraction=0.1",
    ]);
    assert_eq!(a, b);
    let (_, help, _) = idemcalc(&["simulate", "--help"]);
    assert!(help.contains("--timeout-fraction") && !help.contains("--timeout-rate"));
}

/// No error names a flag that does not exist.
#[test]
fn errors_name_real_flags() {
    for (args, flag) in [
        (
            vec!["simulate", "--dry-run", "--crash-fraction=2"],
            "--crash-fraction",
        ),
        (
            vec!["simulate", "--dry-run", "--max-attempts=0"],
            "--max-attempts",
        ),
        (
            vec!["simulate", "--dry-run", "--replicates=65"],
            "--replicates",
        ),
        (
            vec!["simulate", "--dry-run", "--carrier-p99=10ms"],
            "--carrier-p99",
        ),
        (
            vec!["estimate", "--rate=500", "--peak-rate=450"],
            "--peak-rate",
        ),
    ] {
        let (code, _, err) = idemcalc(&args);
        assert_eq!(code, Some(2), "{args:?}: {err}");
        assert!(err.contains(flag), "{args:?}: {err}");
        let (_, help, _) = idemcalc(&[args[0], "--help"]);
        assert!(help.contains(flag), "{flag} is not a flag of {}", args[0]);
    }
}

/// ARCHITECTURE.md's invariants, read from the imports: the report formats results and never
/// touches a store; the simulator knows no file format and measures only (the model column
/// comes from the run's plan); the run layer knows no output format. A module's sub-folders
/// (`sim/replay/`, `report/charts/`) are read too.
#[test]
fn modules_do_not_import_what_they_must_not_know() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let rules: &[(&str, &[&str])] = &[
        (
            "report",
            &[
                "crate::store",
                "rusqlite",
                "postgres::",
                // Results come from `run::results`: the report knows nothing of the simulator
                // (which defences a run switched off is decided once, in `run`).
                "crate::sim",
            ],
        ),
        (
            "sim",
            &[
                "toml::",
                "crate::scenario::file",
                "crate::settings::knobs",
                "crate::report",
                "crate::model",
            ],
        ),
        (
            "run",
            &["crate::report", "crate::format", "crate::cli", "toml::"],
        ),
        ("model.rs", &["std::fs", "crate::store", "crate::sim"]),
        ("settings", &["crate::report", "crate::run", "crate::store"]),
        (
            "bench",
            &[
                "crate::run",
                "crate::settings",
                "crate::model",
                "crate::report",
                "crate::cli",
            ],
        ),
    ];
    for (module, banned) in rules {
        let path = src.join(module);
        let mut files: Vec<PathBuf> = Vec::new();
        let mut dirs = vec![path];
        while let Some(p) = dirs.pop() {
            if !p.is_dir() {
                files.push(p);
                continue;
            }
            for e in std::fs::read_dir(&p).unwrap() {
                let e = e.unwrap().path();
                if e.is_dir() {
                    dirs.push(e);
                } else if e.extension().is_some_and(|x| x == "rs") {
                    files.push(e);
                }
            }
        }
        assert!(!files.is_empty(), "{module}");
        for f in files {
            let text = std::fs::read_to_string(&f).unwrap();
            for b in *banned {
                assert!(!text.contains(b), "{} mentions {b}", f.display());
            }
        }
    }
}

/// Issue 10: `--without-carrier-window` was a flag of `estimate` alone; it is one knob, the same
/// on `estimate`, on `simulate` and in a scenario file's `[budgets]`.
#[test]
fn deciding_on_our_keys_alone_is_one_knob_in_flags_and_files() {
    let flags = Flags::<SIMULATE>::from_pairs(&[("without_carrier_window", "true")])
        .settings()
        .unwrap();
    assert!(flags.budgets.without_carrier_window);
    let file =
        parse("name = \"x\"\n[traffic]\n[budgets]\nwithout_carrier_window = true\n").unwrap();
    assert_eq!(file.settings, flags);
    let e = parse("name = \"x\"\n[traffic]\n[budgets]\nwithout_carrier_window = 1\n").unwrap_err();
    assert_eq!(e.field(), Some("budgets.without_carrier_window"), "{e}");
    assert!(e.to_string().contains("true or false"), "{e}");

    let via_flag = dry_run(&["--without-carrier-window"]);
    assert_eq!(via_flag["budgets"]["without_carrier_window"], true);
    assert!(
        dry_run(&[])["budgets"]
            .get("without_carrier_window")
            .is_none()
    );

    let decision = |args: &[&str]| {
        let mut all = vec!["estimate", "--format", "json"];
        all.extend_from_slice(args);
        let (code, out, err) = idemcalc(&all);
        assert_eq!(code, Some(0), "{err}");
        let v: serde_json::Value = serde_json::from_str(&out).unwrap();
        v["decision"].clone()
    };
    // Within a 25 GB store (the cheapest retention that fits it is the decision).
    let target = ["--max-duplicates-per-day", "300", "--max-store-gb", "25"];
    let counted = decision(&target);
    assert_eq!(counted["count_carrier_window"], true);
    let alone = decision(&[&target[..], &["--without-carrier-window"]].concat());
    assert_eq!(alone["count_carrier_window"], false);
    // Our keys alone need a longer retention for the same duplicates target.
    let retention = |d: &serde_json::Value| d["recommended"]["retention_s"].as_f64().unwrap();
    assert!(retention(&alone) > retention(&counted), "{alone}");
}

/// `simulate`, `scenario`, `report` and `bench` take `--store postgres://…` the same way,
/// through the same store lifecycle (`store::Stores`): scratch schemas without `?schema=`, a
/// named schema kept and never replayed into. Needs IDEMCALC_PG_URL (the conformance suite's
/// server).
#[test]
fn every_run_takes_a_postgres_store_the_same_way() {
    let Some(url) = common::server_url(common::PG_URL_VAR) else {
        return;
    };
    let (code, out, err) = idemcalc(&[
        "simulate",
        "--store",
        &url,
        "--retention",
        "1h",
        "--duration",
        "2h",
        "--target",
        "300",
        "--quiet",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("(scratch schemas)"), "{out}");
    let timeline = scenario_path("lease-takeover.toml");
    let (code, out, err) = idemcalc(&["scenario", timeline.to_str().unwrap(), "--store", &url]);
    assert_eq!(code, Some(0), "{err}");
    assert!(out.contains("(scratch schemas)"), "{out}");
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("tiny.toml"),
        "name = \"tiny\"\n[engine]\nretention = \"1h\"\n[traffic]\nduration = \"2h\"\ntarget = 300\n",
    )
    .unwrap();
    std::fs::copy(&timeline, dir.path().join("lease-takeover.toml")).unwrap();
    let out_dir = dir.path().join("out");
    let (code, _, err) = idemcalc(&[
        "report",
        "--quiet",
        "--scenarios",
        dir.path().to_str().unwrap(),
        "--out",
        out_dir.to_str().unwrap(),
        "--store",
        &url,
    ]);
    assert_eq!(code, Some(0), "{err}");
    // The bench takes its stores from the same place: scratch schemas, dropped afterwards.
    let (code, out, err) = idemcalc(&[
        "bench",
        "--store",
        &url,
        "--duration",
        "200ms",
        "--prefill",
        "200",
        "--workers",
        "2",
        "--pool",
        "2",
        "--format",
        "json",
    ]);
    assert_eq!(code, Some(0), "{err}");
    let bench: serde_json::Value = serde_json::from_str(&out).unwrap();
    let engine_store = bench["engine"]["store"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    assert!(engine_store.contains("idemcalc_bench_"), "{out}");
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let left: i64 = admin
        .query_one(
            "SELECT count(*) FROM pg_namespace
              WHERE nspname LIKE 'idemcalc_bench_%' AND $1 LIKE '%(schema ' || nspname || ')%'",
            &[&engine_store],
        )
        .unwrap()
        .get(0);
    assert_eq!(
        left, 0,
        "the bench's scratch schemas are dropped: {engine_store}"
    );

    let schema = format!("idemcalc_settings_test_{}", std::process::id());
    let named = format!("{url}?schema={schema}");
    let args = ["scenario", timeline.to_str().unwrap(), "--store", &named];
    let (code, _, err) = idemcalc(&args);
    assert_eq!(code, Some(0), "{err}");
    let (code, _, err) = idemcalc(&args);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("already holds"), "{err}");
    let options = idemcalc::store::PgOptions {
        schema,
        pool_size: 1,
        ..idemcalc::store::PgOptions::default()
    };
    idemcalc::store::PgPool::connect(&url, &options)
        .unwrap()
        .drop_schema()
        .unwrap();
}

/// Issue 22: `simulate --help` was 63 flags in one list with lines up to 261 characters and
/// `--retention` the 25th; `-h` printed the same. The knobs are grouped under their scenario
/// file's sections (the engine first), `-h` gives the dozen flags most runs set, a sentence
/// each, and says `--help` has the rest; lines wrap.
#[test]
fn help_is_grouped_by_section_and_short_with_h() {
    let (code, short, _) = idemcalc(&["simulate", "-h"]);
    assert_eq!(code, Some(0));
    let (_, long, _) = idemcalc(&["simulate", "--help"]);
    for heading in [
        "Engine (the seed's server):",
        "Traffic and the client:",
        "Carrier:",
        "Budgets (the decision):",
        "Model and prices:",
    ] {
        assert!(long.contains(heading), "{heading}\n{long}");
    }
    assert!(short.contains("Budgets (the decision):"), "{short}");
    assert!(
        !short.contains("--lease") && long.contains("--lease"),
        "{short}"
    );
    assert!(short.contains("--help lists every one"), "{short}");
    assert!(short.lines().count() < 70, "{short}");
    let engine = short.find("Engine (the seed's server):").unwrap();
    let retention = short.find("--retention").unwrap();
    let traffic = short.find("Traffic and the client:").unwrap();
    assert!(engine < retention && retention < traffic, "{short}");
    assert!(short.lines().count() < long.lines().count());
    // -h gives each flag its first sentence; --help the rest too (compared with the wrapping
    // undone).
    let flat = |t: &str| t.split_whitespace().collect::<Vec<_>>().join(" ");
    assert!(!flat(&short).contains("At most 90d."), "{short}");
    assert!(flat(&long).contains("At most 90d."), "{long}");
    for text in [&short, &long] {
        let widest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
        assert!(widest <= 100, "a help line of {widest} characters");
    }
}

/// Issue 36 item 9: `replicas` (full copies of the store, under `[model]`) written where the
/// simulation's `replicates` go gets both names in its error, not only the list of fields.
#[test]
fn a_near_miss_field_names_the_field_meant() {
    let e = parse("name = \"x\"\n[traffic]\nreplicas = 3\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("did you mean `replicates`?"), "{e}");
    assert!(e.contains("`replicas` is a field of `[model]`"), "{e}");
    let e = parse("name = \"x\"\n[model]\nreplicates = 3\n")
        .unwrap_err()
        .to_string();
    assert!(e.contains("did you mean `replicas`?"), "{e}");
    assert!(e.contains("`replicates` is a field of `[traffic]`"), "{e}");
    // Nothing near: no guess.
    let e = parse("name = \"x\"\n[traffic]\nzzz = 3\n")
        .unwrap_err()
        .to_string();
    assert!(!e.contains("did you mean"), "{e}");
}
