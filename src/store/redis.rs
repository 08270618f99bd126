//! Redis as the key store: the seed's rejected alternative ("Where the key records live": a
//! separate cache with `SET NX` and a TTL), built as far as Redis allows so that what it costs
//! and how it fails can be measured rather than asserted.
//!
//! The label (the effect) stays in a relational store, a SQLite file beside it, so the effect
//! and its key record are in two stores exactly as in the seed's failure row: txn 2's label
//! insert commits in SQLite while the key's completion is a separate Redis write, and a crash
//! between the two leaves a label whose key still says "started". Redis has no row locks and
//! no transaction spanning both stores; what it does have, atomic scripts, guards every write
//! that must check the lease token.
//!
//! Layout under the store's prefix `P`:
//! - `P:k:<len(caller)>:<caller><key>`: one hash per record (hash, state, lease, response,
//!   times). The claim is a script that creates it only when absent: `SET … NX` on a hash.
//! - `P:exp`: the records by `expires_at`, a sorted set. The simulator runs on a virtual clock,
//!   so Redis' own TTL (wall-clock time) would never expire a record during a simulated day;
//!   the sweeper removes what the virtual clock has expired, as `PEXPIREAT` would in production.
//!   Its entries are counted in the store's bytes, like SQLite's `expires_at` index.

use super::exclusive::{self, Held};
use super::{
    Completion, Invariants, KeyRow, KeyState, LabelRow, LeaseToken, Millis, NewKey, SqliteOptions,
    SqliteStore, Store, StoreBytes, StoreError, Tx,
};
use redis::{Commands as _, Connection, Script};
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock};
use std::time::Duration;

/// A Redis key store with its labels in a SQLite file.
pub struct RedisStore {
    con: Connection,
    url: String,
    prefix: String,
    labels: SqliteStore,
    labels_path: PathBuf,
    /// The prefix's hold key, shared by every connection of this process to the prefix.
    hold: Arc<Held>,
    /// The hold key and its token, which every write script proves (see [`FENCE_LUA`]).
    fence: (String, String),
}

/// Refuses as the fence does when a hold has no Redis fence (cannot happen: `hold_prefix`
/// always makes one); a token no script can match.
const NO_TOKEN: &str = "";

fn err(location: &str, e: redis::RedisError) -> StoreError {
    // A command unanswered for the socket's read timeout: the driver says only "Resource
    // temporarily unavailable (os error 11)".
    if e.is_timeout() {
        return StoreError::Deadline {
            location: location.to_string(),
            message: format!(
                "Redis did not answer within {} s: the server is stopped or overloaded ({e})",
                super::CONNECT_DEADLINE.as_secs()
            ),
        };
    }
    StoreError::Open {
        location: location.to_string(),
        message: e.to_string(),
    }
}

/// Claim: create the record only when absent, and index it by expiry.
const CLAIM_LUA: &str = r#"
if redis.call('EXISTS', KEYS[1]) == 1 then return 0 end
redis.call('HSET', KEYS[1], 'h', ARGV[1], 's', 0, 'l', ARGV[2], 't', ARGV[3], 'c', ARGV[4], 'e', ARGV[5])
redis.call('ZADD', KEYS[2], ARGV[5], KEYS[1])
return 1
"#;

/// [`CLAIM_LUA`] as the bench's raw baseline runs it: no hold to prove.
pub(crate) static CLAIM: LazyLock<Script> = LazyLock::new(|| Script::new(CLAIM_LUA));

/// The first lines of every script through which the store writes: the hold key is the last
/// key and its token the last argument, and a script that finds another token (or none) refuses
/// with [`HOLD_LOST`] before writing anything, atomically with the write it guards. The
/// watcher's flag alone would let a client stopped after its check write once more.
const FENCE_LUA: &str = r#"
if redis.call('GET', KEYS[#KEYS]) ~= ARGV[#ARGV] then
  return redis.error_reply("HOLDLOST the hold key no longer holds this run's token")
end
"#;

/// The error code of a write refused by [`FENCE_LUA`].
const HOLD_LOST: &str = "HOLDLOST";

fn fenced(body: &str) -> Script {
    Script::new(&format!("{FENCE_LUA}{body}"))
}

static FENCED_CLAIM: LazyLock<Script> = LazyLock::new(|| fenced(CLAIM_LUA));

/// A takeover of an expired lease (the engine read the record and found it expired).
static TAKE_OVER: LazyLock<Script> = LazyLock::new(|| {
    fenced(
        r#"
redis.call('HSET', KEYS[1], 't', ARGV[1], 'l', ARGV[2])
return 1
"#,
    )
});

/// A saved response rewritten in place.
static SET_BODY: LazyLock<Script> = LazyLock::new(|| {
    fenced(
        r#"
redis.call('HSET', KEYS[1], 'rb', ARGV[1])
return 1
"#,
    )
});

/// Hand the lease back early, only while the token still holds it.
static RELEASE: LazyLock<Script> = LazyLock::new(|| {
    fenced(
        r#"
if redis.call('HGET', KEYS[1], 's') ~= '0' or redis.call('HGET', KEYS[1], 't') ~= ARGV[1] then return 0 end
redis.call('HSET', KEYS[1], 'l', ARGV[2])
return 1
"#,
    )
});

/// Txn 2's guarded completion: only the attempt holding the lease may complete the key.
const COMPLETE_LUA: &str = r#"
if redis.call('HGET', KEYS[1], 's') ~= '0' or redis.call('HGET', KEYS[1], 't') ~= ARGV[1] then return 0 end
redis.call('HDEL', KEYS[1], 'l', 't')
redis.call('HSET', KEYS[1], 's', 1, 'rs', ARGV[2], 'rb', ARGV[3], 'e', ARGV[4])
redis.call('ZADD', KEYS[2], ARGV[4], KEYS[1])
return 1
"#;

/// [`COMPLETE_LUA`] as the bench's raw baseline runs it: no hold to prove.
pub(crate) static COMPLETE: LazyLock<Script> = LazyLock::new(|| Script::new(COMPLETE_LUA));

static FENCED_COMPLETE: LazyLock<Script> = LazyLock::new(|| fenced(COMPLETE_LUA));

/// A completion txn 2 abandoned (`Tx::undo_completion`): deleted only while it is completed with
/// the very body that attempt wrote.
static UNDO_COMPLETION: LazyLock<Script> = LazyLock::new(|| {
    fenced(
        r#"
if redis.call('HGET', KEYS[1], 's') ~= '1' or redis.call('HGET', KEYS[1], 'rb') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], KEYS[1])
return 1
"#,
    )
});

/// The 400 path: delete a started record still held by this attempt.
static DELETE: LazyLock<Script> = LazyLock::new(|| {
    fenced(
        r#"
if redis.call('HGET', KEYS[1], 's') ~= '0' or redis.call('HGET', KEYS[1], 't') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('ZREM', KEYS[2], KEYS[1])
return 1
"#,
    )
});

/// One sweeper batch: the records expired by `now`, oldest first, deleted with their index
/// entries in one atomic step. As PostgreSQL's sweep (`store::postgres::sql::SWEEP`), a started
/// record whose lease is live stays: its expiry entry moves to the lease's end instead.
static SWEEP: LazyLock<Script> = LazyLock::new(|| {
    fenced(
        r#"
local names = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[2]))
local purged = {}
for _, name in ipairs(names) do
  local rec = redis.call('HMGET', name, 's', 'l')
  if rec[1] == '0' and rec[2] and tonumber(rec[2]) > tonumber(ARGV[1]) then
    redis.call('ZADD', KEYS[1], rec[2], name)
  else
    redis.call('DEL', name)
    redis.call('ZREM', KEYS[1], name)
    purged[#purged + 1] = name
  end
end
return purged
"#,
    )
});

/// Where a named prefix's labels live between runs, so the same prefix finds them again:
/// `TMPDIR/idemcalc-UID/redis-PREFIX-labels.sqlite`. Never at a predictable name in the shared
/// temporary directory itself, where another user could plant a link at it (the label file and
/// its lock file would then write through the link): the directory is this user's own, mode
/// 0700, and is refused if it is a link, another user's, or open to others.
pub fn named_labels_path(prefix: &str) -> Result<PathBuf, StoreError> {
    use std::os::unix::fs::{DirBuilderExt as _, MetadataExt as _, PermissionsExt as _};
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    let path = named_labels_location(&std::env::temp_dir(), prefix);
    let dir = path.parent().expect("a file in a directory").to_path_buf();
    let fail = |message: String| StoreError::Open {
        location: dir.display().to_string(),
        message,
    };
    match std::fs::DirBuilder::new().mode(0o700).create(&dir) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
        Err(e) => return Err(fail(format!("cannot create the private directory: {e}"))),
    }
    let meta = std::fs::symlink_metadata(&dir)
        .map_err(|e| fail(format!("cannot read the private directory: {e}")))?;
    if !meta.is_dir() || meta.uid() != uid || meta.permissions().mode() & 0o077 != 0 {
        return Err(fail(format!(
            "refusing a private directory that is {}; remove it, or set TMPDIR to another directory",
            if !meta.is_dir() {
                "not a directory (a link?)".to_string()
            } else if meta.uid() != uid {
                format!("owned by user {} (this is user {uid})", meta.uid())
            } else {
                format!(
                    "open to others (mode {:o})",
                    meta.permissions().mode() & 0o777
                )
            }
        )));
    }
    Ok(path)
}

/// The path [`named_labels_path`] gives under the temporary directory `temp`, without making
/// or checking anything (for a test that runs idemcalc with its own `TMPDIR`).
pub fn named_labels_location(temp: &Path, prefix: &str) -> PathBuf {
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };
    temp.join(format!("idemcalc-{uid}"))
        .join(format!("redis-{prefix}-labels.sqlite"))
}

impl RedisStore {
    /// Connects to `url` (`redis://HOST:PORT[/DB]`), keeping records under `prefix` and labels
    /// in the SQLite file at `labels_path` (created if needed).
    pub fn open(url: &str, prefix: &str, labels_path: &Path) -> Result<Self, StoreError> {
        Self::open_with(url, prefix, labels_path, &SqliteOptions::default())
    }

    /// As [`RedisStore::open`], with the label file opened as `labels` says (the bench's
    /// `--sync`).
    pub fn open_with(
        url: &str,
        prefix: &str,
        labels_path: &Path,
        labels: &SqliteOptions,
    ) -> Result<Self, StoreError> {
        let con = connect(url)?;
        let location = location(url, prefix);
        let hold = hold_prefix(url, prefix, &location)?;
        let fence = match hold.fence() {
            Some(exclusive::Fence::Redis { key, token }) => (key.clone(), token.clone()),
            _ => (hold_key(prefix), NO_TOKEN.to_string()),
        };
        let labels = SqliteStore::open(labels_path, labels)?;
        Ok(RedisStore {
            con,
            url: url.to_string(),
            prefix: prefix.to_string(),
            labels,
            labels_path: labels_path.to_path_buf(),
            hold,
            fence,
        })
    }

    fn index(&self) -> String {
        index_name(&self.prefix)
    }

    /// The prefix's hold, for a pool that opens connections later and must keep it meanwhile.
    pub(crate) fn hold(&self) -> Arc<Held> {
        self.hold.clone()
    }

    /// The connection, URL, prefix and label store, for the bench's raw baseline and fill, which
    /// issue the store's commands without the engine.
    pub(crate) fn raw(&mut self) -> (&mut Connection, &str, &str, &SqliteStore) {
        (&mut self.con, &self.url, &self.prefix, &self.labels)
    }

    /// Every record's name, from the expiry index.
    fn names(&mut self) -> Result<Vec<String>, StoreError> {
        let index = self.index();
        self.con
            .zrange(&index, 0, -1)
            .map_err(|e| err(&self.url, e))
    }
}

/// Why the server at `url` could not be used: silent (the wrong port, a hung server) or down.
fn open_err(url: &str, e: redis::RedisError) -> StoreError {
    StoreError::Open {
        location: url.to_string(),
        message: if e.is_timeout() {
            format!(
                "no answer within {} s ({e}): is a Redis server listening on that port?",
                super::CONNECT_DEADLINE.as_secs()
            )
        } else {
            format!(
                "cannot connect ({e}); is redis-server running? (`redis-server --daemonize yes`)"
            )
        },
    }
}

/// A connection to the server at `url`; the errors say whether the URL or the server is wrong.
fn connect(url: &str) -> Result<Connection, StoreError> {
    let client = redis::Client::open(url).map_err(|e| StoreError::Spec {
        spec: url.to_string(),
        message: format!("not a Redis URL: {e}"),
    })?;
    // The driver's timeout covers the socket, not its handshake's reads: connect on a thread
    // of its own, so a listener that accepts and never answers cannot block the run.
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(client.get_connection_with_timeout(super::CONNECT_DEADLINE));
    });
    let con = match rx.recv_timeout(super::CONNECT_DEADLINE) {
        Ok(connected) => connected.map_err(|e| open_err(url, e))?,
        Err(_) => {
            return Err(StoreError::Open {
                location: url.to_string(),
                message: format!(
                    "the server accepted the connection but did not answer within {} s: is a Redis server listening on that port?",
                    super::CONNECT_DEADLINE.as_secs()
                ),
            });
        }
    };
    // Every command of a run is small; one that gets no answer for this long means the server
    // is gone or is not Redis, and the run says so instead of waiting for ever.
    con.set_read_timeout(Some(super::CONNECT_DEADLINE))
        .and_then(|()| con.set_write_timeout(Some(super::CONNECT_DEADLINE)))
        .map_err(|e| open_err(url, e))?;
    Ok(con)
}

/// A prefix on a server as every message names it (the URL without its password).
pub fn location(url: &str, prefix: &str) -> String {
    format!("{} (prefix {prefix})", super::postgres::redact_url(url))
}

/// How long a Redis hold outlives its last renewal: a killed run's prefix is free again after it.
pub const HOLD_TTL: Duration = Duration::from_secs(15);

/// How often a Redis hold is renewed: five renewals fit in its expiry, so a slow server or a
/// busy machine does not lose it.
const RENEW_EVERY: Duration = Duration::from_secs(3);

/// Renew the hold only while it is ours.
static RENEW: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
redis.call('PEXPIRE', KEYS[1], ARGV[2])
return 1
"#,
    )
});

/// Delete the hold only while it is ours.
static UNHOLD: LazyLock<Script> = LazyLock::new(|| {
    Script::new(
        r#"
if redis.call('GET', KEYS[1]) ~= ARGV[1] then return 0 end
return redis.call('DEL', KEYS[1])
"#,
    )
});

/// The hold key under `prefix`: `P:hold`, holding a token that names the holder.
pub fn hold_key(prefix: &str) -> String {
    format!("{prefix}:hold")
}

/// Holds `prefix` on the server at `url` for this process, or says who holds it. The hold is a
/// key in Redis itself (see `store::exclusive`), so it holds among every process that reaches
/// the server, whatever their temporary directories or machines.
pub fn hold_prefix(url: &str, prefix: &str, location: &str) -> Result<Arc<Held>, StoreError> {
    let key = hold_key(prefix);
    exclusive::hold_on_server(
        format!("redis:{url}/{prefix}"),
        location,
        RENEW_EVERY,
        || {
            let fail = |message: String| StoreError::Open {
                location: location.to_string(),
                message,
            };
            let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
                .map(|h| h.trim().to_string())
                .unwrap_or_default();
            let token = format!(
                "idemcalc pid {} on {} ({})",
                std::process::id(),
                if host.is_empty() { "this host" } else { &host },
                uuid::Uuid::new_v4().simple()
            );
            let mut con = connect(url)?;
            let ttl_ms = HOLD_TTL.as_millis() as u64;
            let set: Option<String> = redis::cmd("SET")
                .arg(&key)
                .arg(&token)
                .arg("NX")
                .arg("PX")
                .arg(ttl_ms)
                .query(&mut con)
                .map_err(|e| fail(format!("cannot set the hold key {key}: {e}")))?;
            if set.is_none() {
                let holder: Option<String> =
                    redis::cmd("GET").arg(&key).query(&mut con).ok().flatten();
                let who = holder
                    .map(|h| h.split(" (").next().unwrap_or_default().to_string())
                    .filter(|h| !h.is_empty())
                    .unwrap_or_else(|| "another process".to_string());
                return Err(fail(format!(
                    "prefix `{prefix}` is in use by another idemcalc run ({who} holds the key {key}); wait for it to finish (a run that was killed frees it within {} s), or name another prefix with ?prefix=NAME",
                    HOLD_TTL.as_secs()
                )));
            }
            let (beat_key, beat_token) = (key.clone(), token.clone());
            let beat: exclusive::Beat = Box::new(move || {
                let renewed: Result<i64, _> = RENEW
                    .key(&beat_key)
                    .arg(&beat_token)
                    .arg(ttl_ms)
                    .invoke(&mut con);
                match renewed {
                    Ok(1) => Ok(()),
                    Ok(_) => Err(format!(
                        "the hold key {beat_key} expired or was taken by another process; another run may be writing under this prefix now"
                    )),
                    // One renewal without an answer leaves the key four more periods; the next
                    // one decides.
                    Err(e) if e.is_timeout() => Ok(()),
                    Err(e) => Err(format!("cannot renew the hold key {beat_key}: {e}")),
                }
            });
            let url = url.to_string();
            let fence = exclusive::Fence::Redis {
                key: key.clone(),
                token: token.clone(),
            };
            let release: exclusive::Release = Box::new(move || {
                if let Ok(mut con) = connect(&url) {
                    let _: Result<i64, _> = UNHOLD.key(&key).arg(&token).invoke(&mut con);
                }
            });
            Ok((beat, release, fence))
        },
    )
}

/// Asks the server at `url` for a PONG: whether a run can use it at all.
pub fn ping(url: &str) -> Result<(), StoreError> {
    redis::cmd("PING")
        .query::<String>(&mut connect(url)?)
        .map(drop)
        .map_err(|e| open_err(url, e))
}

/// The longest key prefix taken.
const MAX_PREFIX_BYTES: usize = 64;

/// A prefix names Redis keys, a SCAN pattern (`prefix:*`) and the labels file beside the run, so
/// it is kept to characters that mean nothing in any of them: a `*` or `?` would widen the
/// pattern to other programs' keys, and a `/` or `..` would write the labels file elsewhere.
pub fn check_prefix_name(prefix: &str) -> Result<(), String> {
    let ok = !prefix.is_empty()
        && prefix.len() <= MAX_PREFIX_BYTES
        && prefix
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if ok {
        Ok(())
    } else {
        Err(format!(
            "prefix `{}` is not allowed: use 1 to {MAX_PREFIX_BYTES} letters, digits, `_` and `-` (e.g. `capacity`)",
            prefix.escape_debug()
        ))
    }
}

/// Deletes every key under `prefix` on the server at `url` (a scratch store's cleanup).
pub fn drop_prefix(url: &str, prefix: &str) -> Result<u64, StoreError> {
    unlink_prefix(&mut connect(url)?, url, prefix)
}

/// Whether any key lives under `prefix` on the server at `url` (a record or the expiry index;
/// not the hold key, which says who is using the prefix, not what it holds).
pub fn holds_keys(url: &str, prefix: &str) -> Result<bool, StoreError> {
    let mut con = connect(url)?;
    let hold = hold_key(prefix);
    let mut names = con
        .scan_match::<_, String>(format!("{prefix}:*"))
        .map_err(|e| err(url, e))?;
    Ok(names.any(|n| n.is_ok_and(|n| n != hold)))
}

fn unlink_prefix(con: &mut Connection, url: &str, prefix: &str) -> Result<u64, StoreError> {
    let pattern = format!("{prefix}:*");
    let names: Vec<String> = con
        .scan_match::<_, String>(&pattern)
        .map_err(|e| err(url, e))?
        .filter_map(Result::ok)
        .collect();
    let mut n = 0;
    for chunk in names.chunks(500) {
        let deleted: u64 = redis::cmd("UNLINK")
            .arg(chunk)
            .query(con)
            .map_err(|e| err(url, e))?;
        n += deleted;
    }
    Ok(n)
}

/// The expiry index of the records under `prefix`.
pub(crate) fn index_name(prefix: &str) -> String {
    format!("{prefix}:exp")
}

/// The record's name: the caller's length first, so no caller or key text can be ambiguous.
pub(crate) fn record_name(prefix: &str, caller_id: &str, idem_key: &str) -> String {
    format!("{prefix}:k:{}:{caller_id}{idem_key}", caller_id.len())
}

/// The (caller, key) back from a record's name.
fn parse_name(prefix: &str, name: &str) -> Option<(String, String)> {
    let rest = name.strip_prefix(prefix)?.strip_prefix(":k:")?;
    let (len, rest) = rest.split_once(':')?;
    let len: usize = len.parse().ok()?;
    if !rest.is_char_boundary(len) {
        return None;
    }
    Some((rest[..len].to_string(), rest[len..].to_string()))
}

fn read_row(con: &mut Connection, url: &str, name: &str) -> Result<Option<KeyRow>, StoreError> {
    let fields: std::collections::HashMap<String, Vec<u8>> =
        con.hgetall(name).map_err(|e| err(url, e))?;
    if fields.is_empty() {
        return Ok(None);
    }
    let text = |k: &str| {
        fields
            .get(k)
            .map(|v| String::from_utf8_lossy(v).into_owned())
    };
    let int = |k: &str| text(k).and_then(|v| v.parse::<i64>().ok());
    let corrupt = |what: &str| StoreError::Corrupt(format!("{url} {name}: {what}"));
    let state = match int("s") {
        Some(0) => KeyState::Started,
        Some(1) => KeyState::Completed,
        _ => return Err(corrupt("no state")),
    };
    let lease_token = match fields.get("t") {
        Some(t) => Some(
            <LeaseToken>::try_from(t.as_slice())
                .map_err(|_| corrupt("lease token not 16 bytes"))?,
        ),
        None => None,
    };
    Ok(Some(KeyRow {
        request_hash: fields.get("h").cloned().ok_or_else(|| corrupt("no hash"))?,
        state,
        locked_until_ms: int("l"),
        lease_token,
        response_status: int("rs").and_then(|v| u16::try_from(v).ok()),
        response_body: text("rb"),
        created_at_ms: int("c").ok_or_else(|| corrupt("no created_at"))?,
        expires_at_ms: int("e").ok_or_else(|| corrupt("no expires_at"))?,
    }))
}

/// One engine transaction: Redis writes happen as they are issued (Redis has no transaction
/// that could also hold the label); the label insert is a real SQLite transaction, committed by
/// [`Tx::commit`]. Dropping it uncommitted rolls back the label only: the crash the seed warns of.
pub struct RedisTx<'a> {
    con: &'a mut Connection,
    url: &'a str,
    prefix: &'a str,
    labels: Labels<'a>,
    hold: &'a Held,
    fence: &'a (String, String),
}

/// A script's failure: [`StoreError::Lost`] when its fence refused it.
fn script_err(hold: &Held, url: &str, e: redis::RedisError) -> StoreError {
    if e.code() == Some(HOLD_LOST) {
        return hold.refused();
    }
    err(url, e)
}

/// The label store's side of a transaction, begun only when a label is written: txn 1 and a
/// replay touch Redis alone, so they never wait for SQLite's write lock, as a cache-backed
/// service's reads would not.
enum Labels<'a> {
    Idle(&'a mut SqliteStore),
    Open(Box<dyn Tx + 'a>),
    Gone,
}

impl<'a> Labels<'a> {
    fn tx(&mut self) -> Result<&mut (dyn Tx + 'a), StoreError> {
        if let Labels::Idle(_) = self {
            let Labels::Idle(store) = std::mem::replace(self, Labels::Gone) else {
                unreachable!("matched Idle above")
            };
            *self = Labels::Open(store.begin()?);
        }
        match self {
            Labels::Open(tx) => Ok(tx.as_mut()),
            _ => Err(StoreError::Corrupt(
                "the label store's transaction could not begin".into(),
            )),
        }
    }
}

impl RedisTx<'_> {
    fn name(&self, caller_id: &str, idem_key: &str) -> String {
        record_name(self.prefix, caller_id, idem_key)
    }

    fn index(&self) -> String {
        index_name(self.prefix)
    }

    /// Runs a fenced write script on the record `name` and the expiry index, with `args`.
    fn script(&mut self, script: &Script, name: &str, args: &[Vec<u8>]) -> Result<i64, StoreError> {
        let mut call = script.key(name);
        call.key(self.index());
        call.key(&self.fence.0);
        for a in args {
            call.arg(a.as_slice());
        }
        call.arg(&self.fence.1);
        call.invoke(self.con)
            .map_err(|e| script_err(self.hold, self.url, e))
    }
}

fn b(v: impl ToString) -> Vec<u8> {
    v.to_string().into_bytes()
}

impl Tx for RedisTx<'_> {
    fn insert_key(&mut self, key: &NewKey<'_>) -> Result<bool, StoreError> {
        let name = self.name(key.caller_id, key.idem_key);
        let done = self.script(
            &FENCED_CLAIM,
            &name,
            &[
                key.request_hash.to_vec(),
                b(key.locked_until_ms),
                key.lease_token.to_vec(),
                b(key.now_ms),
                b(key.expires_at_ms),
            ],
        )?;
        Ok(done == 1)
    }

    /// Reads the record. Redis cannot lock it: every write that depends on what was read checks
    /// the lease token again inside a script instead.
    fn lock_key(&mut self, caller_id: &str, idem_key: &str) -> Result<Option<KeyRow>, StoreError> {
        let name = self.name(caller_id, idem_key);
        read_row(self.con, self.url, &name)
    }

    fn take_over(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        lease_token: &LeaseToken,
        locked_until_ms: Millis,
    ) -> Result<(), StoreError> {
        let name = self.name(caller_id, idem_key);
        self.script(
            &TAKE_OVER,
            &name,
            &[lease_token.to_vec(), b(locked_until_ms)],
        )?;
        Ok(())
    }

    fn release_lease(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        lease_token: &LeaseToken,
        locked_until_ms: Millis,
    ) -> Result<bool, StoreError> {
        let name = self.name(caller_id, idem_key);
        Ok(self.script(&RELEASE, &name, &[lease_token.to_vec(), b(locked_until_ms)])? == 1)
    }

    fn complete_key(&mut self, done: &Completion<'_>) -> Result<bool, StoreError> {
        let name = self.name(done.caller_id, done.idem_key);
        Ok(self.script(
            &FENCED_COMPLETE,
            &name,
            &[
                done.lease_token.to_vec(),
                b(done.response_status),
                done.response_body.as_bytes().to_vec(),
                b(done.expires_at_ms),
            ],
        )? == 1)
    }

    fn set_response_body(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        response_body: &str,
    ) -> Result<(), StoreError> {
        let name = self.name(caller_id, idem_key);
        self.script(&SET_BODY, &name, &[response_body.as_bytes().to_vec()])?;
        Ok(())
    }

    fn insert_label(&mut self, label: &LabelRow) -> Result<Option<LabelRow>, StoreError> {
        self.labels.tx()?.insert_label(label)
    }

    fn delete_key(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        lease_token: &LeaseToken,
    ) -> Result<(), StoreError> {
        let name = self.name(caller_id, idem_key);
        self.script(&DELETE, &name, &[lease_token.to_vec()])?;
        Ok(())
    }

    fn undo_completion(
        &mut self,
        caller_id: &str,
        idem_key: &str,
        response_body: &str,
    ) -> Result<(), StoreError> {
        let name = self.name(caller_id, idem_key);
        self.script(
            &UNDO_COMPLETION,
            &name,
            &[response_body.as_bytes().to_vec()],
        )?;
        Ok(())
    }

    fn commit(self: Box<Self>) -> Result<(), StoreError> {
        match self.labels {
            Labels::Open(tx) => tx.commit(),
            Labels::Idle(_) | Labels::Gone => Ok(()),
        }
    }
}

impl Store for RedisStore {
    fn begin(&mut self) -> Result<Box<dyn Tx + '_>, StoreError> {
        self.hold.check()?;
        let RedisStore {
            con,
            url,
            prefix,
            labels,
            hold,
            fence,
            ..
        } = self;
        Ok(Box::new(RedisTx {
            con,
            url,
            prefix,
            labels: Labels::Idle(labels),
            hold,
            fence,
        }))
    }

    /// Redis' own expiry would do this in production (`PEXPIREAT`); on the simulator's virtual
    /// clock the sweeper does it, over the expiry index, in batches.
    fn sweep_batch(
        &mut self,
        now_ms: Millis,
        batch: u32,
    ) -> Result<Vec<(String, String)>, StoreError> {
        self.hold.check()?;
        let index = self.index();
        let names: Vec<String> = SWEEP
            .key(&index)
            .key(&self.fence.0)
            .arg(now_ms)
            .arg(batch)
            .arg(&self.fence.1)
            .invoke(&mut self.con)
            .map_err(|e| script_err(&self.hold, &self.url, e))?;
        Ok(names
            .iter()
            .filter_map(|n| parse_name(&self.prefix, n))
            .collect())
    }

    fn count_keys(&mut self) -> Result<u64, StoreError> {
        let index = self.index();
        self.con.zcard(&index).map_err(|e| err(&self.url, e))
    }

    fn labels(&mut self) -> Result<Vec<LabelRow>, StoreError> {
        self.labels.labels()
    }

    fn count_labels(&mut self) -> Result<u64, StoreError> {
        self.labels.count_labels()
    }

    /// Memory, not disk: `MEMORY USAGE` of each record (all of them up to 2,000, else an even
    /// sample scaled to the count) and of the expiry index. Redis prices as RAM.
    fn bytes(&mut self) -> Result<StoreBytes, StoreError> {
        const SAMPLE: usize = 2_000;
        let names = self.names()?;
        let step = names.len().div_ceil(SAMPLE).max(1);
        let mut sampled = 0u64;
        let mut total = 0u64;
        for name in names.iter().step_by(step) {
            let used: Option<u64> = redis::cmd("MEMORY")
                .arg("USAGE")
                .arg(name)
                .arg("SAMPLES")
                .arg(0)
                .query(&mut self.con)
                .map_err(|e| err(&self.url, e))?;
            if let Some(u) = used {
                total += u;
                sampled += 1;
            }
        }
        let keys_table_bytes = if sampled == 0 {
            0
        } else {
            (total as f64 / sampled as f64 * names.len() as f64).round() as u64
        };
        let index = self.index();
        let keys_index_bytes: Option<u64> = redis::cmd("MEMORY")
            .arg("USAGE")
            .arg(&index)
            .arg("SAMPLES")
            .arg(0)
            .query(&mut self.con)
            .map_err(|e| err(&self.url, e))?;
        Ok(StoreBytes {
            keys_table_bytes,
            keys_index_bytes: keys_index_bytes.unwrap_or(0),
        })
    }

    /// Redis has no integrity check of its own; the cross-store checks are what matter here:
    /// a completed 201 whose label is missing, and the labels per parcel (from SQLite).
    fn invariants(&mut self) -> Result<Invariants, StoreError> {
        let sqlite = self.labels.invariants()?;
        let labels: std::collections::HashSet<String> = self
            .labels
            .labels()?
            .into_iter()
            .map(|l| l.label_id)
            .collect();
        let mut completed_without_label = 0;
        for name in self.names()? {
            let Some(row) = read_row(&mut self.con, &self.url, &name)? else {
                continue;
            };
            let completed_201 =
                row.state == KeyState::Completed && row.response_status == Some(201);
            if completed_201
                && row
                    .replayed_label_id()
                    .is_none_or(|id| !labels.contains(&id))
            {
                completed_without_label += 1;
            }
        }
        Ok(Invariants {
            integrity_ok: sqlite.integrity_ok,
            completed_without_label,
            max_labels_per_parcel: sqlite.max_labels_per_parcel,
        })
    }

    fn describe(&self) -> String {
        format!(
            "{} (prefix {}, labels in sqlite:{})",
            self.url,
            self.prefix,
            self.labels_path.display()
        )
    }

    fn get_key(&mut self, caller_id: &str, idem_key: &str) -> Result<Option<KeyRow>, StoreError> {
        let name = record_name(&self.prefix, caller_id, idem_key);
        read_row(&mut self.con, &self.url, &name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_names_give_back_their_caller_and_key() {
        for (caller, key) in [("fulfilment", "label:1:2:v1"), ("a:b", "3:c"), ("", "k")] {
            let n = record_name("p", caller, key);
            assert_eq!(
                parse_name("p", &n),
                Some((caller.to_string(), key.to_string()))
            );
        }
        assert_eq!(parse_name("p", "q:k:1:ab"), None);
    }
}
