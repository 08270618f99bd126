//! Issue 50's signals: SIGTERM, SIGINT and SIGHUP sent to `idemcalc serve` while `idemcalc
//! load` drives it, and SIGTERM and SIGINT sent to `load` mid-run. The exits are the documented
//! ones (docs/serve.md, "Limits and faults"; docs/load.md): serve drains and exits 0 on
//! SIGTERM and Ctrl-C, and SIGHUP re-reads its callers file and keeps serving; `load` stops
//! starting intents, reports the part it ran and exits 130. Never a panic, never a death by
//! the signal, and the `load` beside a stopping server ends on its own with a verdict.

use super::common::{self, Server};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A process still running this long after its signal (or its run's end) hangs.
const LIMIT: Duration = Duration::from_secs(45);

/// `idemcalc load` against `s` with its callers, for `duration` at 50/s; stdout to `out`.
fn start_load(s: &Server, duration: &str, out: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args([
            "load",
            &s.base,
            "--rate",
            "50",
            "--duration",
            duration,
            "--quiet",
        ])
        .arg("--callers")
        .arg(s.callers())
        .args(["--lose-replies", "0"])
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(out).unwrap())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

/// The creates `s` has answered (its own count, on `/metrics`).
fn created(s: &Server) -> f64 {
    let x = super::wire::exchange(
        &s.addr,
        b"GET /metrics HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n",
        1,
        LIMIT,
    );
    let text = x
        .answers
        .first()
        .map(|a| String::from_utf8_lossy(&a.body).into_owned())
        .unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("idemcalc_requests_total{") && l.contains("outcome=\"created\""))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// Waits until `s` has answered `more` creates beyond what it had: the load beside it runs,
/// its signal handlers long installed.
fn wait_for_creates(s: &Server, before: f64, more: f64) {
    let started = Instant::now();
    while created(s) < before + more {
        assert!(
            started.elapsed() < LIMIT,
            "serve did not create {more} labels in {LIMIT:?}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A load run that ended on its own beside a server that stopped or reloaded: no panic, no
/// signal, exit 0 or 1, and its text ends with the verdict.
fn assert_load_ended(what: &str, load: Child, out: &std::path::Path) -> Option<i32> {
    let (code, err) = common::wait_within(load, LIMIT);
    let text = std::fs::read_to_string(out).unwrap_or_default();
    assert!(!err.contains("panicked"), "{what}: load panicked:\n{err}");
    assert!(
        matches!(code, Some(0 | 1)),
        "{what}: load exit {code:?}\n{text}\n{err}"
    );
    let last = text.lines().last().unwrap_or_default();
    assert!(
        last.starts_with("ok: ") || last.starts_with("FAILED: "),
        "{what}: load's text does not end with its verdict: {last:?}"
    );
    code
}

#[test]
fn serve_drains_and_exits_0_on_sigterm_and_sigint_mid_load() {
    let dir = tempfile::tempdir().unwrap();
    for (name, sig) in [("SIGTERM", libc::SIGTERM), ("SIGINT", libc::SIGINT)] {
        let s = Server::on_sqlite(&dir.path().join(format!("{name}.sqlite")), &[]);
        let out = dir.path().join(format!("{name}.load"));
        let load = start_load(&s, "4s", &out);
        wait_for_creates(&s, 0.0, 20.0);
        let (code, err) = s.stop_with(sig);
        assert_eq!(code, Some(0), "serve on {name} mid-load:\n{err}");
        assert!(err.contains("shutting down"), "{name}: {err}");
        assert!(
            !err.contains("panicked"),
            "serve panicked on {name}:\n{err}"
        );
        let load_code = assert_load_ended(name, load, &out);
        eprintln!("{name} to serve mid-load: serve exit 0, load exit {load_code:?}");
    }
}

#[test]
fn sighup_mid_load_reloads_the_callers_and_serve_keeps_serving() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::on_sqlite(&dir.path().join("store.sqlite"), &[]);
    let out = dir.path().join("load");
    let load = start_load(&s, "3s", &out);
    wait_for_creates(&s, 0.0, 20.0);
    for _ in 0..3 {
        common::signal(s.child.as_ref().unwrap(), libc::SIGHUP);
        std::thread::sleep(Duration::from_millis(200));
    }
    // The callers did not change, so every intent still gets its label.
    let code = assert_load_ended("SIGHUP", load, &out);
    assert_eq!(
        code,
        Some(0),
        "{}",
        std::fs::read_to_string(&out).unwrap_or_default()
    );
    let err = s.stop_ok();
    assert!(err.contains("SIGHUP: "), "no word of the reload:\n{err}");
    assert!(
        !err.contains("panicked"),
        "serve panicked on SIGHUP:\n{err}"
    );
}

#[test]
fn load_reports_the_part_run_and_exits_130_on_sigterm_and_sigint() {
    let dir = tempfile::tempdir().unwrap();
    let s = Server::on_sqlite(&dir.path().join("store.sqlite"), &[]);
    for (name, sig) in [("SIGTERM", libc::SIGTERM), ("SIGINT", libc::SIGINT)] {
        let out = dir.path().join(format!("{name}.load"));
        let before = created(&s);
        let load = start_load(&s, "60s", &out);
        wait_for_creates(&s, before, 20.0);
        common::signal(&load, sig);
        let (code, err) = common::wait_within(load, LIMIT);
        let text = std::fs::read_to_string(&out).unwrap_or_default();
        assert!(!err.contains("panicked"), "{name}: load panicked:\n{err}");
        assert_eq!(code, Some(130), "{name} to load mid-run:\n{text}\n{err}");
        assert!(
            text.lines()
                .last()
                .is_some_and(|l| l.starts_with("ok: ") || l.starts_with("FAILED: ")),
            "{name}: the part run was not reported:\n{text}"
        );
    }
    let err = s.stop_ok();
    assert!(!err.contains("panicked"), "{err}");
}
