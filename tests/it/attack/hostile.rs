//! Issue 50's hostile servers for `idemcalc load`: tiny servers started here (std::net, a
//! thread per connection) that close at once, send garbage, answer 201s that name no label,
//! send bodies past `--max-body` or without end, never answer, lie in `Content-Length`, answer
//! 500/401/429/409 with odd bodies, redirect to themselves, drip their answer a byte at a
//! time; and, behind a server that does label, carrier invoices that fail. The real binary
//! runs a short load against each. None of these servers ever names a label, so every run must
//! fail: exit 1, its text opening with one `FAILED: …` line that says why, never exit 0, never
//! a panic, a signal or a run past its limit. A correct server beside them must pass (exit 0),
//! so the failures are the servers' and not the harness's.

use super::common;
use std::io::{ErrorKind, Read as _, Write as _};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

/// A load run that has not ended within this hangs: its duration (1 s), deadline, observation
/// window and one second more are its own bound; the rest is room for a loaded machine.
const LIMIT: Duration = Duration::from_secs(45);
/// Load runs at once.
const PARALLEL: usize = 6;

/// What a hostile server does with one connection; the flag is raised when the test is done.
type Behaviour = Arc<dyn Fn(&mut TcpStream, &AtomicBool) + Send + Sync>;

/// A server on a free port of loopback, a thread per connection, until dropped.
struct Hostile {
    url: String,
    stop: Arc<AtomicBool>,
    accept: Option<std::thread::JoinHandle<()>>,
}

impl Hostile {
    fn start(behaviour: Behaviour) -> Hostile {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let accept = std::thread::spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        let (b, f) = (behaviour.clone(), flag.clone());
                        std::thread::spawn(move || {
                            stream.set_nonblocking(false).unwrap();
                            let _ = stream.set_write_timeout(Some(Duration::from_secs(5)));
                            b(&mut stream, &f);
                        });
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        Hostile {
            url,
            stop,
            accept: Some(accept),
        }
    }
}

impl Drop for Hostile {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
    }
}

/// One request read off `stream`: its head, and its body by `Content-Length`; `None` once the
/// client is gone.
fn read_request(stream: &mut TcpStream) -> Option<String> {
    let _ = stream.set_read_timeout(Some(Duration::from_secs(5)));
    let mut buf = Vec::new();
    let mut byte = [0u8; 1];
    while !buf.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => buf.push(byte[0]),
            _ => return None,
        }
    }
    let head = String::from_utf8_lossy(&buf).into_owned();
    let length: usize = head
        .lines()
        .find_map(|l| {
            let (name, value) = l.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse().ok())?
        })
        .unwrap_or(0);
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).ok()?;
    Some(head)
}

/// Keeps the connection open, saying nothing, until the client goes or the test ends.
fn hold(stream: &mut TcpStream, stop: &AtomicBool) {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(50)));
    let mut sink = [0u8; 4096];
    while !stop.load(Ordering::Relaxed) {
        match stream.read(&mut sink) {
            Ok(0) => return,
            Ok(_) => {}
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => return,
        }
    }
}

/// A behaviour from a closure.
fn on(f: impl Fn(&mut TcpStream, &AtomicBool) + Send + Sync + 'static) -> Behaviour {
    Arc::new(f)
}

/// Answers every request on the connection with `raw`, byte for byte (kept alive).
fn answer(raw: impl Into<Vec<u8>>) -> Behaviour {
    let raw = raw.into();
    on(move |s, _| {
        while read_request(s).is_some() {
            if s.write_all(&raw).is_err() {
                return;
            }
        }
    })
}

/// A 201 with `body`, framed by its length.
fn created(body: &str) -> Behaviour {
    answer(format!(
        "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
        body.len()
    ))
}

/// Each request answered with `head` and then `chunk` written over and over, `every` apart,
/// until the client goes.
fn endless(head: &'static str, chunk: impl Into<Vec<u8>>, every: Duration) -> Behaviour {
    let chunk = chunk.into();
    on(move |s, stop| {
        if read_request(s).is_none() || s.write_all(head.as_bytes()).is_err() {
            return;
        }
        while !stop.load(Ordering::Relaxed) && s.write_all(&chunk).is_ok() {
            std::thread::sleep(every);
        }
    })
}

/// A chunk of `n` spaces, framed.
fn spaces_chunk(n: usize) -> Vec<u8> {
    let mut c = format!("{n:x}\r\n").into_bytes();
    c.extend(vec![b' '; n]);
    c.extend_from_slice(b"\r\n");
    c
}

/// Every request answered `code` with the header lines `extra` and `body`.
fn status(code: u16, extra: &[u8], body: &[u8]) -> Behaviour {
    let mut raw = format!("HTTP/1.1 {code} Odd\r\n").into_bytes();
    raw.extend_from_slice(extra);
    raw.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
    raw.extend_from_slice(body);
    answer(raw)
}

/// A correct idempotent server, as far as `load` can tell: a 201 naming one label per key.
fn labels() -> Behaviour {
    on(|s, _| {
        while let Some(head) = read_request(s) {
            let key = head
                .lines()
                .find_map(|l| {
                    let (name, value) = l.split_once(':')?;
                    name.eq_ignore_ascii_case("idempotency-key")
                        .then(|| value.trim().trim_matches('"').to_string())
                })
                .unwrap_or_default();
            let body = format!(r#"{{"tracking_no":"T-{key}"}}"#);
            let raw = format!(
                "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            );
            if s.write_all(raw.as_bytes()).is_err() {
                return;
            }
        }
    })
}

/// Bytes that look like nothing, the same every run.
fn garbage(n: usize) -> Vec<u8> {
    use rand::{RngExt as _, SeedableRng};
    let mut rng = rand::rngs::StdRng::seed_from_u64(50);
    (0..n).map(|_| rng.random()).collect()
}

/// The hostile servers: a name, how it behaves, and the words the run's first line must hold
/// (any one of them: what a run meets first may vary with timing).
fn hostiles() -> Vec<(&'static str, Behaviour, &'static [&'static str])> {
    let no_label: &[&str] = &["no answer named a label"];
    let no_success: &[&str] = &["no request succeeded", "nothing answered at"];
    let timeout: &[&str] = &["no answer within the 250 ms deadline"];
    let head_1mb = {
        let mut raw = b"HTTP/1.1 201 Created\r\nX-Huge: ".to_vec();
        raw.extend(vec![b'h'; 1 << 20]);
        raw.extend_from_slice(b"\r\nContent-Length: 2\r\n\r\n{}");
        answer(raw)
    };
    // A label, but past the ceiling: it must not count.
    let huge_declared = {
        let mut body = b"{\"tracking_no\":\"T-1\"".to_vec();
        body.extend(vec![b' '; 200_000]);
        body.push(b'}');
        let mut raw = format!(
            "HTTP/1.1 201 Created\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        raw.extend(body);
        answer(raw)
    };
    let huge_chunked = {
        let mut raw = b"HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
        for _ in 0..50 {
            raw.extend(spaces_chunk(4096));
        }
        raw.extend_from_slice(b"0\r\n\r\n");
        answer(raw)
    };
    let mut gzip =
        b"HTTP/1.1 201 Created\r\nContent-Encoding: gzip\r\nContent-Length: 64\r\n\r\n".to_vec();
    gzip.extend(garbage(64));
    let mut junk_500 =
        b"HTTP/1.1 500 Oops\r\nContent-Type: application/problem+json\r\nContent-Length: 300\r\n\r\n"
            .to_vec();
    junk_500.extend(garbage(300));
    vec![
        ("closes at once", on(|_, _| {}), no_success),
        (
            "reads, then closes",
            on(|s, _| {
                let _ = read_request(s);
            }),
            no_success,
        ),
        (
            "answers garbage, then closes",
            on(|s, _| {
                if read_request(s).is_some() {
                    let _ = s.write_all(&garbage(4096));
                }
            }),
            no_success,
        ),
        (
            "answers one garbage line, then holds",
            on(|s, stop| {
                if read_request(s).is_some() && s.write_all(b"HELLO\r\n").is_ok() {
                    hold(s, stop);
                }
            }),
            &["no request succeeded", "no answer within"],
        ),
        ("201, invalid JSON", created("{\"tracking_no\":"), no_label),
        ("201, null", created("null"), no_label),
        (
            "201, identity null",
            created("{\"tracking_no\":null}"),
            no_label,
        ),
        (
            "201, identity empty",
            created("{\"tracking_no\":\"\"}"),
            no_label,
        ),
        (
            "201, identity an object",
            created("{\"tracking_no\":{}}"),
            no_label,
        ),
        (
            "201, identity an array",
            created("{\"tracking_no\":[1]}"),
            no_label,
        ),
        (
            "201, identity true",
            created("{\"tracking_no\":true}"),
            no_label,
        ),
        (
            "204, no body",
            answer("HTTP/1.1 204 No Content\r\n\r\n"),
            no_label,
        ),
        ("201, gzip garbage", answer(gzip), no_label),
        (
            "201, HTTP/1.0 framed by the close",
            on(|s, _| {
                if read_request(s).is_some() {
                    let _ = s.write_all(b"HTTP/1.0 201 Created\r\n\r\nnot json at all");
                }
            }),
            no_label,
        ),
        (
            "201, Content-Length past the body",
            on(|s, _| {
                if read_request(s).is_some() {
                    let _ = s.write_all(b"HTTP/1.1 201 Created\r\nContent-Length: 1000\r\n\r\n{\"tracking_no\":\"T-1\"}");
                }
            }),
            no_success,
        ),
        (
            "201, Content-Length inside the body",
            answer("HTTP/1.1 201 Created\r\nContent-Length: 5\r\n\r\n{\"tracking_no\":\"T-1\"}"),
            &["no answer named a label", "no request succeeded"],
        ),
        (
            "201, bad chunks",
            answer(
                "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n{}\r\n0\r\n\r\n",
            ),
            no_success,
        ),
        (
            "201, a body past --max-body, declared",
            huge_declared,
            &["larger than --max-body"],
        ),
        (
            "201, a body past --max-body, chunked",
            huge_chunked,
            &["larger than --max-body"],
        ),
        (
            "201, a body without end",
            endless(
                "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n",
                spaces_chunk(4096),
                Duration::ZERO,
            ),
            &["larger than --max-body"],
        ),
        (
            "201, a body a byte at a time without end",
            endless(
                "HTTP/1.1 201 Created\r\nTransfer-Encoding: chunked\r\n\r\n",
                spaces_chunk(1),
                Duration::from_millis(100),
            ),
            timeout,
        ),
        (
            "201, dripped a byte every 200 ms",
            endless(
                "HTTP/1.1 201 Created\r\nContent-Length: 40\r\n\r\n",
                b" ".to_vec(),
                Duration::from_millis(200),
            ),
            timeout,
        ),
        (
            "interim 100s without end",
            endless(
                "",
                b"HTTP/1.1 100 Continue\r\n\r\n".to_vec(),
                Duration::from_millis(50),
            ),
            &["no answer within", "no request succeeded"],
        ),
        ("201, a 1 MiB head", head_1mb, no_success),
        (
            "never answers",
            on(|s, stop| {
                if read_request(s).is_some() {
                    hold(s, stop);
                }
            }),
            timeout,
        ),
        (
            "never reads",
            // The connection stays open while this runs: the thread holds it.
            on(|_, stop| {
                let mut wait = 0;
                while !stop.load(Ordering::Relaxed) && wait < 600 {
                    std::thread::sleep(Duration::from_millis(50));
                    wait += 1;
                }
            }),
            timeout,
        ),
        (
            "500, garbage problem",
            answer(junk_500),
            &["no request succeeded: 500"],
        ),
        (
            "401, empty",
            status(401, b"WWW-Authenticate: Bearer realm=\"\"\r\n", b""),
            &["no request succeeded: 401"],
        ),
        (
            "429, Retry-After of years",
            status(429, b"Retry-After: 99999999999\r\n", b"slow down"),
            &["no request succeeded: 429"],
        ),
        (
            "429, Retry-After not a number",
            status(429, b"Retry-After: soon\r\n", b"\xff\xfe"),
            &["no request succeeded: 429"],
        ),
        (
            "409 for ever",
            status(409, b"Retry-After: 0\r\n", b"{}"),
            &["no request succeeded: 409"],
        ),
        (
            "503, Retry-After -5",
            status(503, b"Retry-After: -5\r\n", b"<html>busy</html>"),
            &["no request succeeded: 503"],
        ),
        (
            "999, an unknown status",
            status(999, b"", b"{}"),
            &["no request succeeded"],
        ),
        (
            "a status that is not a number",
            answer("HTTP/1.1 2O1 Created\r\nContent-Length: 2\r\n\r\n{}"),
            no_success,
        ),
        (
            "301, Location garbage",
            status(301, b"Location: \xff\xfe/\r\n", b""),
            &["redirects are not followed", "no request succeeded"],
        ),
        (
            "302, no Location",
            status(302, b"", b""),
            &["redirects are not followed"],
        ),
    ]
}

/// How a load run ended: exit code, stdout, stderr.
struct Ran {
    code: Option<i32>,
    out: String,
    err: String,
}

/// `idemcalc load URL` for a second at 20/s with `extra`, its output in `dir`.
fn load(dir: &std::path::Path, name: &str, url: &str, extra: &[&str]) -> Ran {
    let file: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    let out_path = dir.join(format!("{file}.out"));
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_idemcalc"))
        .args([
            "load",
            url,
            "--rate",
            "20",
            "--duration",
            "1s",
            "--observe",
            "300ms",
        ])
        .args(["--lose-replies", "0", "--max-body", "64KiB", "--quiet"])
        .args(extra)
        .stdin(std::process::Stdio::null())
        .stdout(std::fs::File::create(&out_path).unwrap())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let (code, err) = common::wait_within(child, LIMIT);
    Ran {
        code,
        out: std::fs::read_to_string(&out_path).unwrap_or_default(),
        err,
    }
}

/// What is wrong with a run against a server that never named a label, if anything.
fn failed_clearly(ran: &Ran, expected: &[&str]) -> Result<String, String> {
    if ran.code.is_none() {
        return Err(format!("killed by a signal\n{}", ran.err));
    }
    if ran.code == Some(101) || ran.err.contains("panicked") {
        return Err(format!("a panic\n{}", ran.err));
    }
    if ran.code != Some(1) {
        return Err(format!("exit {:?}\n{}\n{}", ran.code, ran.out, ran.err));
    }
    let first = ran.out.lines().next().unwrap_or_default();
    let last = ran.out.lines().last().unwrap_or_default();
    if !first.starts_with("FAILED: ") || !expected.iter().any(|e| first.contains(e)) {
        return Err(format!(
            "the first line does not say {expected:?}: {first:?}"
        ));
    }
    if !last.starts_with("FAILED: ") {
        return Err(format!("the text does not end with the verdict: {last:?}"));
    }
    Ok(first.to_string())
}

/// A load run to make, borrowing the test's servers and directory.
type Job<'a, T> = Box<dyn FnOnce() -> T + Send + 'a>;

/// Runs `jobs` `PARALLEL` at a time; their results in order.
fn in_parallel<T: Send>(jobs: Vec<Job<'_, T>>) -> Vec<T> {
    let next = AtomicUsize::new(0);
    let slots: Vec<std::sync::Mutex<Option<Job<'_, T>>>> = jobs
        .into_iter()
        .map(|j| std::sync::Mutex::new(Some(j)))
        .collect();
    let results: Vec<std::sync::Mutex<Option<T>>> =
        slots.iter().map(|_| std::sync::Mutex::new(None)).collect();
    std::thread::scope(|s| {
        for _ in 0..PARALLEL {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(slot) = slots.get(i) else { break };
                    let job = slot.lock().unwrap().take().unwrap();
                    *results[i].lock().unwrap() = Some(job());
                }
            });
        }
    });
    results
        .into_iter()
        .map(|r| r.into_inner().unwrap().unwrap())
        .collect()
}

#[test]
fn load_fails_clearly_against_every_hostile_server_and_passes_a_correct_one() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let servers: Vec<(&str, Hostile, &[&str])> = hostiles()
        .into_iter()
        .map(|(name, b, expected)| (name, Hostile::start(b), expected))
        .collect();
    let correct = Hostile::start(labels());
    // A redirect to itself, for ever.
    let redirect = Hostile::start(answer(
        "HTTP/1.1 307 Again\r\nLocation: /labels\r\nContent-Length: 0\r\n\r\n",
    ));
    // A port nothing listens on.
    let closed_port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        format!("http://{}", listener.local_addr().unwrap())
    };
    let invoices: Vec<(&str, Hostile, Vec<String>, &str)> = vec![
        (
            "invoice garbage",
            Hostile::start(answer(
                b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n[{]}x".to_vec(),
            )),
            vec![],
            "not a carrier invoice",
        ),
        (
            "invoice 500",
            Hostile::start(answer("HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n")),
            vec![],
            "HTTP 500",
        ),
        (
            "invoice without end",
            Hostile::start(endless(
                "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n",
                spaces_chunk(4096),
                Duration::ZERO,
            )),
            vec!["--max-invoice-body".into(), "64KiB".into()],
            "larger than --max-invoice-body",
        ),
        (
            "invoice never answers",
            Hostile::start(on(|s, stop| {
                if read_request(s).is_some() {
                    hold(s, stop);
                }
            })),
            vec!["--invoice-timeout".into(), "1s".into()],
            "no complete answer within",
        ),
    ];
    let mut jobs: Vec<Job<'_, Result<String, String>>> = Vec::new();
    for (name, server, expected) in &servers {
        let name = *name;
        let url = server.url.clone();
        jobs.push(Box::new(move || {
            failed_clearly(&load(d, name, &url, &[]), expected).map_err(|e| format!("{name}: {e}"))
        }));
    }
    jobs.push(Box::new(|| {
        failed_clearly(
            &load(d, "redirect", &redirect.url, &[]),
            &["redirects are not followed"],
        )
        .map_err(|e| format!("307 to itself: {e}"))
    }));
    jobs.push(Box::new(|| {
        failed_clearly(
            &load(d, "closed port", &closed_port, &[]),
            &["nothing answered at"],
        )
        .map_err(|e| format!("nothing listening: {e}"))
    }));
    for (name, server, extra, expected) in &invoices {
        let name = *name;
        let invoice = format!("{}/v1/invoice", server.url);
        let correct = correct.url.clone();
        jobs.push(Box::new(move || {
            let mut args: Vec<&str> = vec!["--carrier-invoice", &invoice];
            args.extend(extra.iter().map(String::as_str));
            let ran = load(d, name, &correct, &args);
            let line = failed_clearly(&ran, &["the carrier's invoice was not read"])
                .map_err(|e| format!("{name}: {e}"))?;
            if !line.contains(expected) {
                return Err(format!("{name}: the reason is not {expected:?}: {line}"));
            }
            Ok(line)
        }));
    }
    let correct_url = correct.url.clone();
    jobs.push(Box::new(move || {
        let ran = load(d, "correct", &correct_url, &[]);
        match (ran.code, ran.out.lines().last()) {
            (Some(0), Some(last)) if last.starts_with("ok: ") => Ok(last.to_string()),
            _ => Err(format!(
                "the correct server: exit {:?}\n{}\n{}",
                ran.code, ran.out, ran.err
            )),
        }
    }));
    let n = jobs.len();
    let results = in_parallel(jobs);
    let faults: Vec<&String> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    for line in results.iter().flatten() {
        eprintln!("  {line}");
    }
    assert!(
        faults.is_empty(),
        "{} of {n} load runs went wrong:\n{}",
        faults.len(),
        faults
            .iter()
            .map(|f| f.as_str())
            .collect::<Vec<_>>()
            .join("\n")
    );
    eprintln!("load against {n} servers: each failed with one clear line, the correct one passed");
}
