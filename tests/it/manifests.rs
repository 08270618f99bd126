//! Issue 54: the Kubernetes manifests under `deploy/kubernetes/` validate against Kubernetes'
//! own schemas (`kubernetes-validate --strict`, unknown fields refused), and hold the facts
//! that span files, which no schema sees: the grace period outlasts the preStop sleep and
//! `serve --drain`, readiness asks `/healthz` on the port `serve` listens on, the Service
//! reaches that port, `load --shard` takes `JOB_COMPLETION_INDEX` with N = the Job's
//! completions, the merge reads exactly the N files the shards write, every Secret referenced
//! exists with its key, and every `idemcalc` command line parses as the binary's own.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;

fn manifests() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    assert!(files.len() >= 4, "{files:?}");
    files
}

/// `kubernetes-validate --strict` on `files`: its exit code and what it said.
fn validate(files: &[PathBuf]) -> (bool, String) {
    let out = Command::new("python3")
        .args(["-m", "kubernetes_validate", "--strict", "--quiet"])
        .args(files)
        .output()
        .unwrap();
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), said)
}

#[test]
fn every_manifest_validates_against_kubernetes_schemas() {
    if !crate::common::python_has("kubernetes_validate", "the Kubernetes schema check") {
        return;
    }
    let files = manifests();
    let (ok, said) = validate(&files);
    assert!(ok, "{said}");
    // The validator refuses what it should: the serve Deployment with a field misspelt.
    let dir = tempfile::tempdir().unwrap();
    let serve =
        std::fs::read_to_string(files.iter().find(|f| f.ends_with("serve.yaml")).unwrap()).unwrap();
    let broken = dir.path().join("serve.yaml");
    std::fs::write(&broken, serve.replace("readinessProbe:", "readinesProbe:")).unwrap();
    let (ok, said) = validate(&[broken]);
    assert!(!ok && said.contains("readinesProbe"), "{said}");
}

/// Every document of every manifest, as JSON (PyYAML comes with kubernetes-validate).
fn documents() -> Vec<Value> {
    let script = "import json, sys, yaml\n\
                  print(json.dumps([d for f in sys.argv[1:] for d in yaml.safe_load_all(open(f)) if d]))";
    let out = Command::new("python3")
        .args(["-c", script])
        .args(manifests())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

fn find<'a>(docs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    docs.iter()
        .find(|d| d["kind"] == kind && d["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in deploy/kubernetes"))
}

fn strings(v: &Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_string()).collect())
        .unwrap_or_default()
}

/// The value after `flag` in `args`.
fn after<'a>(args: &'a [String], flag: &str) -> &'a str {
    let i = args
        .iter()
        .position(|a| a == flag)
        .unwrap_or_else(|| panic!("{flag} not in {args:?}"));
    &args[i + 1]
}

/// `args` with the container's `$(VAR)` references as Kubernetes fills them, run through the
/// binary's own parser.
fn assert_parses(args: &[String], vars: &[(&str, &str)]) {
    let mut words = vec!["idemcalc".to_string()];
    for a in args {
        let mut a = a.clone();
        for (name, value) in vars {
            a = a.replace(&format!("$({name})"), value);
        }
        assert!(
            !a.contains("$("),
            "{a}: a variable the container does not define"
        );
        words.push(a);
    }
    if let Err(e) = idemcalc::cli::parses(&words) {
        panic!("{words:?} does not parse: {e}");
    }
}

#[test]
fn the_manifests_agree_with_each_other_and_with_the_binary() {
    if !crate::common::python_has("yaml", "the manifests' cross-file checks") {
        return;
    }
    let docs = documents();

    // serve: grace period past the preStop sleep and --drain; readiness on /healthz at the
    // port it listens on, which the Service targets.
    let serve = find(&docs, "Deployment", "idemcalc-serve");
    let pod = &serve["spec"]["template"]["spec"];
    let c = &pod["containers"][0];
    let args = strings(&c["args"]);
    assert_eq!(args[0], "serve");
    let drain_s = idemcalc::duration::parse(after(&args, "--drain"))
        .unwrap()
        .as_secs_f64();
    let sleep_s = c["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_f64()
        .unwrap_or(0.0);
    let grace_s = pod["terminationGracePeriodSeconds"].as_f64().unwrap();
    assert!(
        grace_s > drain_s + sleep_s,
        "terminationGracePeriodSeconds {grace_s} must exceed --drain {drain_s} s + preStop {sleep_s} s"
    );
    let probe = &c["readinessProbe"]["httpGet"];
    assert_eq!(probe["path"], "/healthz");
    let port = &c["ports"][0];
    assert!(probe["port"] == port["name"] || probe["port"] == port["containerPort"]);
    let listen = after(&args, "--listen");
    assert_eq!(
        listen.rsplit(':').next().unwrap(),
        port["containerPort"].to_string(),
        "--listen {listen} against containerPort"
    );
    let service = find(&docs, "Service", "idemcalc-serve");
    let target = &service["spec"]["ports"][0]["targetPort"];
    assert!(target == &port["name"] || target == &port["containerPort"]);
    assert_eq!(
        service["spec"]["selector"],
        serve["spec"]["template"]["metadata"]["labels"]
    );
    // Each pod a replica named after itself, of the schema the Secret names, with the one
    // carrier: what `serve --replica` requires.
    let env: Vec<&str> = c["env"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|e| e["name"].as_str())
        .collect();
    for var in ["IDEMCALC_STORE", "POD_NAME", "CARRIER_URL"] {
        assert!(
            env.contains(&var),
            "{var} not in the serve container's env {env:?}"
        );
    }
    assert_eq!(after(&args, "--replica"), "$(POD_NAME)");
    let store = "postgres://u@h/db?schema=labels";
    assert_parses(
        &args,
        &[
            ("IDEMCALC_STORE", store),
            ("POD_NAME", "idemcalc-serve-7d9f8b6c4-x2x9z"),
            ("CARRIER_URL", "http://carrier.default.svc:8080"),
        ],
    );

    // load: an Indexed Job whose --shard is JOB_COMPLETION_INDEX/completions, all at once,
    // each shard's result under the index; no pod retried (a shard sent twice replays).
    let job = find(&docs, "Job", "idemcalc-load");
    let spec = &job["spec"];
    assert_eq!(spec["completionMode"], "Indexed");
    assert_eq!(spec["backoffLimit"], 0);
    let n = spec["completions"].as_u64().unwrap();
    assert_eq!(spec["parallelism"].as_u64(), Some(n));
    let c = &spec["template"]["spec"]["containers"][0];
    let args = strings(&c["args"]);
    assert_eq!(
        after(&args, "--shard"),
        format!("$(JOB_COMPLETION_INDEX)/{n}")
    );
    let out = after(&args, "--out").to_string();
    assert!(out.contains("$(JOB_COMPLETION_INDEX)"), "{out}");
    for i in 0..n {
        assert_parses(&args, &[("JOB_COMPLETION_INDEX", &i.to_string())]);
    }
    assert!(args.iter().any(|a| a == "--first-order"));
    let results = |job: &Value| {
        job["spec"]["template"]["spec"]["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find_map(|v| v["persistentVolumeClaim"]["claimName"].as_str())
            .unwrap()
            .to_string()
    };

    // merge: reads exactly the N results on the same volume.
    let merge = find(&docs, "Job", "idemcalc-merge");
    let margs = strings(&merge["spec"]["template"]["spec"]["containers"][0]["args"]);
    assert_eq!(margs[..2], ["load", "merge"]);
    let inputs: Vec<&String> = margs[2..]
        .iter()
        .take_while(|a| !a.starts_with("--"))
        .collect();
    let want: Vec<String> = (0..n)
        .map(|i| out.replace("$(JOB_COMPLETION_INDEX)", &i.to_string()))
        .collect();
    assert_eq!(inputs, want.iter().collect::<Vec<_>>());
    assert_eq!(results(job), results(merge));
    find(&docs, "PersistentVolumeClaim", &results(job));
    assert_parses(&margs, &[]);

    // Every Secret referenced exists, with the key asked for.
    let mut refs = Vec::new();
    collect_secret_refs(&Value::Array(docs.clone()), &mut refs);
    assert!(refs.len() >= 3, "{refs:?}");
    for (name, key) in refs {
        let secret = find(&docs, "Secret", &name);
        assert!(
            secret["stringData"].get(&key).is_some() || secret["data"].get(&key).is_some(),
            "Secret {name} has no key {key}"
        );
    }
}

/// (Secret name, key) of every `secretKeyRef` and secret volume item.
fn collect_secret_refs(v: &Value, out: &mut Vec<(String, String)>) {
    match v {
        Value::Object(m) => {
            if let Some(r) = m.get("secretKeyRef") {
                out.push((
                    r["name"].as_str().unwrap().into(),
                    r["key"].as_str().unwrap().into(),
                ));
            }
            if let Some(s) = m.get("secret") {
                let name = s["secretName"].as_str().unwrap().to_string();
                for item in s["items"].as_array().into_iter().flatten() {
                    out.push((name.clone(), item["key"].as_str().unwrap().into()));
                }
            }
            m.values().for_each(|v| collect_secret_refs(v, out));
        }
        Value::Array(a) => a.iter().for_each(|v| collect_secret_refs(v, out)),
        _ => {}
    }
}
