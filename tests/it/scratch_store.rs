//! A scratch store (no `--store`, no `--db`) lives in memory; a named one is a durable file.
//! Neither may change a figure: the same scenario and seed give the same JSON to the byte,
//! bytes per record included, except the store's name and the run's wall time.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_idemcalc");

/// The bundled baseline at a small scale: two retentions (so more than one job's store), two
/// replicates, a few thousand intents, with the sweeper purging during the run. Seconds.
const SIMULATE: &[&str] = &[
    "simulate",
    "--scenario",
    "scenarios/baseline-400.toml",
    "--retention",
    "1h,2h",
    "--duration",
    "3h",
    "--replicates",
    "2",
    "--target",
    "1500",
    "--seed",
    "11",
    "--format",
    "json",
    "--quiet",
];

fn idemcalc(args: &[&str], extra: &[&str]) -> String {
    let out = Command::new(BIN)
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .args(args)
        .args(extra)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{args:?} {extra:?}: {stdout}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

/// Takes every field called one of `names` out of `v`, wherever it is, and returns what each
/// held, in document order.
fn take(v: &mut serde_json::Value, names: &[&str], taken: &mut Vec<(String, serde_json::Value)>) {
    match v {
        serde_json::Value::Object(map) => {
            for name in names {
                if let Some(x) = map.remove(*name) {
                    taken.push((name.to_string(), x));
                }
            }
            for x in map.values_mut() {
                take(x, names, taken);
            }
        }
        serde_json::Value::Array(items) => {
            for x in items {
                take(x, names, taken);
            }
        }
        _ => {}
    }
}

/// The JSON without the fields that may differ, as text, and the stores it names.
fn figures(text: &str, differ: &[&str]) -> (String, Vec<String>) {
    let mut v: serde_json::Value = serde_json::from_str(text).unwrap();
    let mut taken = Vec::new();
    take(&mut v, differ, &mut taken);
    let stores = taken
        .into_iter()
        .filter(|(name, _)| name == "store")
        .map(|(_, x)| x.as_str().unwrap().to_string())
        .collect();
    (serde_json::to_string_pretty(&v).unwrap(), stores)
}

fn file_name(path: &Path) -> String {
    format!("sqlite:{}", path.display())
}

#[test]
fn a_simulation_in_memory_gives_the_file_stores_figures_to_the_byte() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("run.sqlite");
    let scratch = idemcalc(SIMULATE, &[]);
    let named = idemcalc(SIMULATE, &["--db", db.to_str().unwrap()]);

    let differ = ["store", "wall_seconds"];
    let (scratch_figures, scratch_stores) = figures(&scratch, &differ);
    let (named_figures, named_stores) = figures(&named, &differ);
    assert_eq!(scratch_stores, ["sqlite (in memory)"; 2]);
    assert_eq!(named_stores, [file_name(&db), file_name(&db)]);
    assert!(
        scratch_figures == named_figures,
        "the figures differ between the store in memory and the file:\n{}",
        first_difference(&scratch_figures, &named_figures)
    );

    // The comparison covers what the pages decide: bytes per record were measured, on every
    // job's own file (the first keeps the name, the others get a suffix).
    let v: serde_json::Value = serde_json::from_str(&scratch).unwrap();
    for run in v["sweep"].as_array().unwrap() {
        let bytes = run["bytes_per_record_measured"]["estimate"]
            .as_f64()
            .unwrap();
        assert!(bytes > 100.0 && bytes < 2000.0, "{bytes}");
    }
    for file in [
        "run.sqlite",
        "run_p0_r1.sqlite",
        "run_p1_r0.sqlite",
        "run_p1_r1.sqlite",
    ] {
        assert!(dir.path().join(file).is_file(), "{file}");
    }
}

#[test]
fn a_timeline_in_memory_answers_as_on_a_file() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("timeline.sqlite");
    let args = [
        "scenario",
        "scenarios/lease-takeover.toml",
        "--format",
        "json",
    ];
    let (scratch, scratch_stores) = figures(&idemcalc(&args, &[]), &["store"]);
    let (named, named_stores) = figures(
        &idemcalc(&args, &["--db", db.to_str().unwrap()]),
        &["store"],
    );
    assert_eq!(scratch_stores, ["sqlite (in memory)"]);
    assert_eq!(named_stores, [file_name(&db)]);
    assert!(scratch == named, "{}", first_difference(&scratch, &named));
}

/// The first line where `a` and `b` differ, with its neighbours, for a readable failure.
fn first_difference(a: &str, b: &str) -> String {
    let (a, b): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let i = a
        .iter()
        .zip(&b)
        .position(|(x, y)| x != y)
        .unwrap_or(a.len().min(b.len()));
    let from = i.saturating_sub(3);
    format!(
        "in memory, from line {from}:\n{}\nfile:\n{}",
        a[from..(i + 3).min(a.len())].join("\n"),
        b[from..(i + 3).min(b.len())].join("\n")
    )
}
