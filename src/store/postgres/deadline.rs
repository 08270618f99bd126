//! Every statement has a deadline, on the server and in the client.
//!
//! On the server each pool connection runs with `statement_timeout` and `lock_timeout` sized to
//! the engine's statements (a claim or a completion takes milliseconds, so a few seconds is
//! generous); the sweeper, migrations and the bench's fills set longer ones of their own around
//! their statements. Those fire only while the server runs: a server whose processes are stopped
//! (`kill -STOP`), or a host that vanished with its TCP stack still answering, accepts the bytes
//! and answers nothing, and TCP keepalives and `TCP_USER_TIMEOUT` never fire because the kernel
//! still acknowledges. So the client keeps a deadline of its own: each statement arms its
//! connection's [`Guard`] with what it is, and a watchdog thread shuts down the socket of a
//! statement still unanswered a margin after its server-side deadline. The driver then fails
//! the statement at once, and the store reports which statement got no answer for how long.
//!
//! The socket is found by the ports the server reports for the session (`inet_client_port()`,
//! `inet_server_port()`) among this process's descriptors, and checked again before it is shut
//! down, so a descriptor number reused by another file is never touched. A Unix-socket
//! connection has no guard (it cannot reach a stopped remote host; the server-side deadlines
//! still apply).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

/// The engine's statements (claims, completions, reads of one key): each takes milliseconds.
pub const STATEMENT_TIMEOUT: Duration = Duration::from_secs(5);
/// How long an engine statement waits for a lock another session holds.
pub const LOCK_TIMEOUT: Duration = Duration::from_secs(3);
/// The sweeper's batched `DELETE` and a partition's detach and drop.
pub const SWEEP_TIMEOUT: Duration = Duration::from_secs(60);
/// Migrations, dropping a scratch schema, the bench's fills and `ANALYZE`.
pub const BULK_TIMEOUT: Duration = Duration::from_secs(300);
/// How much longer than its server-side deadline the client waits for an answer before it
/// decides the server is not running: a live server answers with its own timeout error first.
pub const CLIENT_MARGIN: Duration = Duration::from_secs(2);

/// The `SET` that gives a session the engine's deadlines.
pub fn engine_settings() -> String {
    format!(
        "SET statement_timeout = {}; SET lock_timeout = {};",
        STATEMENT_TIMEOUT.as_millis(),
        LOCK_TIMEOUT.as_millis()
    )
}

/// A deadline in whole seconds, for messages.
pub fn secs(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}

/// One connection's client-side deadline.
pub struct Guard {
    /// The socket's descriptor and its local and peer ports; `None` when it was not found.
    socket: Option<(i32, u16, u16)>,
    /// When the statement in flight was sent (ms since [`base`], plus one); 0 when none is.
    armed_at: AtomicU64,
    /// How long the statement in flight may go unanswered.
    limit_ms: AtomicU64,
    /// Its server-side deadline.
    server_ms: AtomicU64,
    /// The statement in flight, or the last one.
    what: Mutex<&'static str>,
    /// Set when the watchdog shut the socket down.
    fired: AtomicBool,
}

fn base() -> Instant {
    static BASE: OnceLock<Instant> = OnceLock::new();
    *BASE.get_or_init(Instant::now)
}

fn now_ms() -> u64 {
    base().elapsed().as_millis() as u64 + 1
}

impl Guard {
    /// The guard of `client`'s connection, registered with the watchdog.
    pub fn attach(client: &mut postgres::Client) -> Arc<Guard> {
        let ports = client
            .query_opt("SELECT inet_client_port(), inet_server_port()", &[])
            .ok()
            .flatten()
            .and_then(|r| {
                let local: Option<i32> = r.try_get(0).ok()?;
                let peer: Option<i32> = r.try_get(1).ok()?;
                Some((u16::try_from(local?).ok()?, u16::try_from(peer?).ok()?))
            });
        let socket =
            ports.and_then(|(local, peer)| find_socket(local, peer).map(|fd| (fd, local, peer)));
        let guard = Arc::new(Guard {
            socket,
            armed_at: AtomicU64::new(0),
            limit_ms: AtomicU64::new(0),
            server_ms: AtomicU64::new(0),
            what: Mutex::new(""),
            fired: AtomicBool::new(false),
        });
        if guard.socket.is_some() {
            let mut guards = registry().lock().unwrap_or_else(|p| p.into_inner());
            guards.retain(|g| g.strong_count() > 0);
            guards.push(Arc::downgrade(&guard));
        }
        guard
    }

    /// A guard that never fires (no socket to watch).
    pub fn none() -> Arc<Guard> {
        Arc::new(Guard {
            socket: None,
            armed_at: AtomicU64::new(0),
            limit_ms: AtomicU64::new(0),
            server_ms: AtomicU64::new(0),
            what: Mutex::new(""),
            fired: AtomicBool::new(false),
        })
    }

    /// Arms the guard for one statement, `what`, whose server-side deadline is `server`; disarmed
    /// when the returned value is dropped.
    pub fn arm(self: &Arc<Self>, what: &'static str, server: Duration) -> Armed {
        *self.what.lock().unwrap_or_else(|p| p.into_inner()) = what;
        self.server_ms
            .store(server.as_millis() as u64, Ordering::Release);
        self.limit_ms.store(
            (server + CLIENT_MARGIN).as_millis() as u64,
            Ordering::Release,
        );
        self.armed_at.store(now_ms(), Ordering::Release);
        if self.socket.is_some() {
            watchdog();
        }
        Armed(self.clone())
    }

    /// Arms the guard for the rest of the connection's life: closing a client waits for the
    /// server to see it go, which a stopped server never does. Called just before the client
    /// is dropped; the guard itself must outlive the client.
    pub fn arm_for_close(self: &Arc<Self>) {
        std::mem::forget(self.arm("closing the connection", Duration::ZERO));
    }

    /// The statement in flight, or the last one armed.
    pub fn what(&self) -> &'static str {
        *self.what.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The server-side deadline of the statement in flight, or of the last one.
    pub fn server(&self) -> Duration {
        Duration::from_millis(self.server_ms.load(Ordering::Acquire))
    }

    /// When the watchdog cut the connection: how long the statement went unanswered.
    pub fn fired(&self) -> Option<Duration> {
        self.fired
            .load(Ordering::Acquire)
            .then(|| Duration::from_millis(self.limit_ms.load(Ordering::Acquire)))
    }
}

/// A statement in flight; disarms its guard when dropped.
pub struct Armed(Arc<Guard>);

impl Drop for Armed {
    fn drop(&mut self) {
        self.0.armed_at.store(0, Ordering::Release);
    }
}

fn registry() -> &'static Mutex<Vec<Weak<Guard>>> {
    static REGISTRY: OnceLock<Mutex<Vec<Weak<Guard>>>> = OnceLock::new();
    REGISTRY.get_or_init(|| Mutex::new(Vec::new()))
}

/// Starts the watchdog thread once: four times a second it cuts every connection whose
/// statement has outlived its deadline.
fn watchdog() {
    static STARTED: OnceLock<()> = OnceLock::new();
    STARTED.get_or_init(|| {
        std::thread::spawn(|| {
            loop {
                std::thread::sleep(Duration::from_millis(250));
                let now = now_ms();
                let guards: Vec<Arc<Guard>> = registry()
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .iter()
                    .filter_map(Weak::upgrade)
                    .collect();
                for g in guards {
                    let at = g.armed_at.load(Ordering::Acquire);
                    let limit = g.limit_ms.load(Ordering::Acquire);
                    if at == 0 || now.saturating_sub(at) < limit || g.fired.load(Ordering::Acquire)
                    {
                        continue;
                    }
                    if let Some((fd, local, peer)) = g.socket
                        && ports_of(fd) == Some((local, peer))
                    {
                        g.fired.store(true, Ordering::Release);
                        // SAFETY: `fd` is a socket of ours with the connection's ports (checked
                        // just now); shutdown only ends its traffic, it does not close it.
                        unsafe {
                            libc::shutdown(fd, libc::SHUT_RDWR);
                        }
                    }
                }
            }
        });
    });
}

/// The local and peer TCP ports of descriptor `fd`, if it is a TCP socket.
fn ports_of(fd: i32) -> Option<(u16, u16)> {
    fn port(fd: i32, peer: bool) -> Option<u16> {
        // SAFETY: a zeroed sockaddr_storage is a valid buffer of the length passed.
        let mut addr: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let p = &mut addr as *mut libc::sockaddr_storage as *mut libc::sockaddr;
        // SAFETY: `p` points at `len` writable bytes.
        let rc = unsafe {
            if peer {
                libc::getpeername(fd, p, &mut len)
            } else {
                libc::getsockname(fd, p, &mut len)
            }
        };
        if rc != 0 {
            return None;
        }
        match i32::from(addr.ss_family) {
            libc::AF_INET => {
                // SAFETY: the family says the storage holds a sockaddr_in.
                let a = unsafe { &*(p as *const libc::sockaddr_in) };
                Some(u16::from_be(a.sin_port))
            }
            libc::AF_INET6 => {
                // SAFETY: the family says the storage holds a sockaddr_in6.
                let a = unsafe { &*(p as *const libc::sockaddr_in6) };
                Some(u16::from_be(a.sin6_port))
            }
            _ => None,
        }
    }
    Some((port(fd, false)?, port(fd, true)?))
}

/// The one descriptor of this process that is a TCP socket from local port `local` to peer port
/// `peer`; `None` if there is none or more than one.
fn find_socket(local: u16, peer: u16) -> Option<i32> {
    let mut found = None;
    for entry in std::fs::read_dir("/proc/self/fd").ok()? {
        let Some(fd) = entry
            .ok()
            .and_then(|e| e.file_name().to_str().and_then(|s| s.parse::<i32>().ok()))
        else {
            continue;
        };
        if ports_of(fd) == Some((local, peer)) {
            if found.is_some() {
                return None;
            }
            found = Some(fd);
        }
    }
    found
}
