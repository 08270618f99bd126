//! Issue 54: `load --shard I/N` on N processes, added back by `load merge`, is the one run of
//! the same seed. Four shards run at once against a server started here, then one run alone,
//! and every count of the merged report equals the one run's, its latency percentiles within
//! 1 %.
//!
//! The server answers each order after a delay that is a function of the order number (1 s
//! plus up to 0.96 s), so the two runs' latencies are the same values give or take the
//! scheduler's noise, a few milliseconds against a second: what is left to differ is whether
//! the histograms were added (percentiles of the union) or averaged. It hands the label of
//! order `n - 1` to every order ending in 1: the two are consecutive intents, which four shards
//! never send from the same process, so only a merge over the union of labels sees them shared.

use axum::Router;
use axum::body::Bytes;
use axum::routing::post;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The label and the delay of one order.
async fn create_label(body: Bytes) -> (axum::http::StatusCode, String) {
    let order = serde_json::from_slice::<Value>(&body)
        .ok()
        .and_then(|v| v["order_id"].as_i64())
        .unwrap_or(0);
    tokio::time::sleep(Duration::from_millis(1000 + (order % 97) as u64 * 10)).await;
    let label = if order % 10 == 1 { order - 1 } else { order };
    (
        axum::http::StatusCode::CREATED,
        format!(r#"{{"label_id":"L-{label}","tracking_no":"GRD{label:09}"}}"#),
    )
}

fn start_server() -> (tokio::runtime::Runtime, String) {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let listener = runtime
        .block_on(tokio::net::TcpListener::bind("127.0.0.1:0"))
        .unwrap();
    let addr = listener.local_addr().unwrap();
    let app = Router::new().route("/labels", post(create_label));
    runtime.spawn(async move { axum::serve(listener, app).await });
    (runtime, format!("http://{addr}"))
}

/// `load` on the test's run (seed 7, 150/s for 3 s), with `extra` flags, its JSON to `out`.
fn load(url: &str, out: &Path, extra: &[&str]) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_idemcalc"));
    c.args([
        "load",
        url,
        "--rate",
        "150",
        "--duration",
        "3s",
        "--seed",
        "7",
    ])
    .args([
        "--first-order",
        "5000",
        "--deadline",
        "5s",
        "--observe",
        "1s",
    ])
    .args([
        "--lose-replies",
        "0.05",
        "--quiet",
        "--format",
        "json",
        "--out",
    ])
    .arg(out)
    .args(extra)
    .stdout(Stdio::null())
    .stderr(Stdio::piped());
    c
}

fn json(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn merge(files: &[&PathBuf], extra: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args(["load", "merge"])
        .args(files)
        .args(extra)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// The counts a merge must reproduce exactly, by name.
fn counts(r: &Value) -> Vec<(String, Value)> {
    let mut out: Vec<(String, Value)> = Vec::new();
    for k in [
        "duplicate_labels",
        "unexpected_422",
        "stuck_intents",
        "dropped_intents",
        "replays",
        "error_share",
        "ok",
    ] {
        out.push((k.into(), r[k].clone()));
    }
    for (k, v) in r["counts"].as_object().unwrap() {
        out.push((format!("counts.{k}"), v.clone()));
    }
    for (k, v) in r["latency_ms"].as_object().unwrap() {
        out.push((format!("latency_ms.{k}.count"), v["count"].clone()));
    }
    for k in ["statuses", "stuck", "checked", "errors"] {
        out.push((k.into(), r[k].clone()));
    }
    out.push(("orders".into(), r["orders"].clone()));
    let started: Vec<Value> = r["per_second"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["started"].clone())
        .collect();
    out.push(("per_second.started".into(), Value::Array(started)));
    out
}

#[test]
fn four_shards_merged_are_the_one_run_of_their_seed() {
    let (_server, url) = start_server();
    let dir = tempfile::tempdir().unwrap();
    let files: Vec<PathBuf> = (0..4)
        .map(|i| dir.path().join(format!("shard-{i}.json")))
        .collect();
    // The four at once, as a Kubernetes Indexed Job runs them.
    let children: Vec<_> = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            load(&url, f, &["--shard", &format!("{i}/4")])
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let whole = dir.path().join("whole.json");
    let out = load(&url, &whole, &[]).output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let merged_path = dir.path().join("merged.json");
    let all: Vec<&PathBuf> = files.iter().collect();
    let (code, _, err) = merge(&all, &["--out", merged_path.to_str().unwrap(), "--quiet"]);
    // `--quiet` is not a merge flag: refused by clap, with its usage code.
    assert_eq!(code, Some(2), "{err}");
    let (code, stdout, err) = merge(
        &all,
        &["--format", "json", "--out", merged_path.to_str().unwrap()],
    );
    assert_eq!(code, Some(0), "{err}");
    let merged = json(&merged_path);
    assert_eq!(serde_json::from_str::<Value>(&stdout).unwrap(), merged);
    let one = json(&whole);

    // Each shard sent a quarter of the schedule at a quarter of the rate; none of them saw a
    // label shared, since the two intents sharing one are always in different shards.
    let mut shard_intents = 0;
    for f in &files {
        let s = json(f);
        assert_eq!(s["run"]["rate_per_s"], 37.5);
        assert_eq!(s["counts"]["shared_labels"], 0, "{}", f.display());
        shard_intents += s["counts"]["intents_started"].as_u64().unwrap();
        let tally = &s["shard"]["tally"];
        assert!(tally["histograms"]["first_run"].as_str().unwrap().len() > 10);
    }
    assert_eq!(
        shard_intents,
        one["counts"]["intents_started"].as_u64().unwrap()
    );
    assert!(shard_intents > 300, "{shard_intents} intents");

    for ((name, got), (_, want)) in counts(&merged).iter().zip(counts(&one)) {
        assert_eq!(got, &want, "{name}: merged {got}, one run {want}");
    }
    assert!(one["counts"]["shared_labels"].as_u64().unwrap() > 10);
    assert!(one["counts"]["lost_replies"].as_u64().unwrap() > 0);
    assert_eq!(merged["run"]["rate_per_s"], 150.0);
    assert_eq!(merged["merged_from"].as_array().unwrap().len(), 4);
    assert!(merged.get("shard").is_none());
    for row in ["first_run", "late"] {
        let (m, o) = (&merged["latency_ms"][row], &one["latency_ms"][row]);
        for p in ["p50", "p90", "p99"] {
            let (m, o) = (m[p].as_f64().unwrap(), o[p].as_f64().unwrap());
            if o == 0.0 {
                assert_eq!(m, 0.0, "{row} {p}");
                continue;
            }
            assert!(
                (m - o).abs() <= 0.01 * o,
                "{row} {p}: merged {m} ms, one run {o} ms"
            );
        }
    }

    // Refused, naming the file: a missing index, an index twice, another run's shard, a run
    // without --shard.
    let (code, _, err) = merge(&all[..3], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("index 3 of 4 is missing"), "{err}");
    let (code, _, err) = merge(&[all[0], all[1], all[2], all[0]], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("index 0 of 4 again"), "{err}");
    let mut other = json(&files[3]);
    other["run"]["seed"] = 8.into();
    let other_path = dir.path().join("other-seed.json");
    std::fs::write(&other_path, other.to_string()).unwrap();
    let (code, _, err) = merge(&[all[0], all[1], all[2], &other_path], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(
        err.contains("other-seed.json: seed 8, but") && err.contains("shards of different runs"),
        "{err}"
    );
    let (code, _, err) = merge(&[&whole], &[]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("whole.json: a run without --shard"), "{err}");
}

#[test]
fn a_shard_without_first_order_or_outside_its_count_is_refused() {
    let (code, _, err) = common_run(&["--shard", "0/4"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--shard 0/4: needs --first-order"), "{err}");
    let (code, _, err) = common_run(&["--shard", "4/4", "--first-order", "1"]);
    assert_eq!(code, Some(2), "{err}");
    assert!(err.contains("--shard 4/4: I must be 0..3"), "{err}");
}

fn common_run(extra: &[&str]) -> (Option<i32>, String, String) {
    let mut args = vec!["load", "http://127.0.0.1:9", "--duration", "1s", "--quiet"];
    args.extend(extra);
    crate::common::idemcalc(&args)
}

/// The invoice is read again for the whole run: `serve` calls `idemcalc carrier` over HTTP,
/// two shards each reconcile their own orders, and the merge reconciles the union of them,
/// with its own `duplicate_purchases` budget.
#[test]
fn a_merge_reads_the_invoice_for_every_shards_orders() {
    use crate::common::spawn_listening;
    let dir = tempfile::tempdir().unwrap();
    let callers = dir.path().join("callers");
    std::fs::write(&callers, "tok-shards fulfilment\n").unwrap();
    let (_carrier, carrier) = spawn_listening(&["carrier", "--listen", "127.0.0.1:0"]);
    let store = format!("sqlite:{}", dir.path().join("store.sqlite").display());
    let (_serve, base) = spawn_listening(&[
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--store",
        &store,
        "--carrier-url",
        &carrier,
        "--callers",
        callers.to_str().unwrap(),
    ]);
    let invoice = format!("{}/v1/invoice", carrier.trim_end_matches('/'));
    let files: Vec<PathBuf> = (0..2)
        .map(|i| dir.path().join(format!("shard-{i}.json")))
        .collect();
    let children: Vec<_> = files
        .iter()
        .enumerate()
        .map(|(i, f)| {
            Command::new(env!("CARGO_BIN_EXE_idemcalc"))
                .args([
                    "load",
                    &base,
                    "--rate",
                    "100",
                    "--duration",
                    "2s",
                    "--seed",
                    "3",
                ])
                .args(["--first-order", "8000000", "--deadline", "5s", "--quiet"])
                .args(["--carrier-invoice", &invoice, "--shard", &format!("{i}/2")])
                .arg("--callers")
                .arg(&callers)
                .arg("--out")
                .arg(f)
                .stdout(Stdio::null())
                .stderr(Stdio::piped())
                .spawn()
                .unwrap()
        })
        .collect();
    for c in children {
        let out = c.wait_with_output().unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    let merged_path = dir.path().join("merged.json");
    let (code, _, err) = merge(
        &files.iter().collect::<Vec<_>>(),
        &["--out", merged_path.to_str().unwrap()],
    );
    assert_eq!(code, Some(0), "{err}");
    let merged = json(&merged_path);
    let lines = |r: &Value| r["invoice"]["lines"].as_u64().unwrap();
    let shards: Vec<Value> = files.iter().map(|f| json(f)).collect();
    for s in &shards {
        assert_eq!(s["shard"]["invoice"]["url"], invoice.as_str());
        assert_eq!(lines(s), s["orders"]["count"].as_u64().unwrap(), "{s}");
    }
    assert_eq!(merged["stuck_intents"], 0, "{merged}");
    assert_eq!(lines(&merged), lines(&shards[0]) + lines(&shards[1]));
    assert_eq!(lines(&merged), merged["orders"]["count"].as_u64().unwrap());
    assert!(lines(&merged) > 100, "{merged}");
    assert_eq!(merged["invoice"]["duplicate_purchases"], 0);
    let budget = merged["budgets"]
        .as_array()
        .unwrap()
        .iter()
        .find(|b| b["budget"] == "duplicate_purchases")
        .unwrap_or_else(|| panic!("no duplicate_purchases budget: {merged}"));
    assert_eq!(budget["ok"], true);
}
