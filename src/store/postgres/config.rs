//! What a PostgreSQL store is told before it connects: the schema, the pool, the sweeper, and
//! the checks and redaction applied to what the user typed. Apart from the pool so that a
//! `--store` spec can be checked and shown (password redacted) without opening anything.

use crate::store::Synchronous;
pub use crate::sweeper::{Sweeper, SweeperPlan};
use std::time::Duration;

/// The schema used when neither `?schema=` nor an option names one.
pub const DEFAULT_SCHEMA: &str = "idemcalc";

/// Upper bound on `--pool`: PostgreSQL's default `max_connections` is 100, and a pool bigger than
/// the server allows only turns into connection errors under load.
pub const MAX_POOL_SIZE: u32 = 256;

/// PostgreSQL identifiers are at most 63 bytes (NAMEDATALEN - 1); longer ones are truncated
/// silently by the server, which would make two schema names one.
const MAX_SCHEMA_NAME_BYTES: usize = 63;

/// How to reach the server and what to create there.
#[derive(Debug, Clone, PartialEq)]
pub struct PgOptions {
    /// The schema that holds the store's tables.
    pub schema: String,
    /// At most this many connections open at once (`--pool`).
    pub pool_size: u32,
    /// `Off` sets `synchronous_commit = off` (a commit returns before its WAL reaches disk; a
    /// server crash may lose the last few hundred milliseconds of commits, never consistency);
    /// `Normal` and `Full` keep the server's `on`.
    pub synchronous: Synchronous,
    /// How long to wait for the server to accept a connection.
    pub connect_timeout: Duration,
    /// How long [`PgPool::get`](super::PgPool::get) waits for a connection when all `pool_size` are in use.
    pub checkout_timeout: Duration,
    /// Hold the schema for this process while the pool lives (a session advisory lock), so a
    /// second process that names it is refused instead of writing into a run's rows.
    pub exclusive: bool,
    /// With `exclusive`: hold the schema shared, as this replica of a service that runs as
    /// several processes on one schema (`serve --replica NAME`; see
    /// `store::exclusive::hold_pg_replica`). `None`: hold it alone.
    pub replica: Option<String>,
    /// How expired records go; a schema keeps the layout it was created with.
    pub sweeper: Sweeper,
}

impl Default for PgOptions {
    fn default() -> Self {
        Self {
            schema: DEFAULT_SCHEMA.to_string(),
            pool_size: 8,
            synchronous: Synchronous::Normal,
            connect_timeout: Duration::from_secs(5),
            checkout_timeout: Duration::from_secs(30),
            exclusive: true,
            replica: None,
            sweeper: Sweeper::Delete,
        }
    }
}

/// Checks a schema name: lower-case letters, digits and `_`, not starting with a digit, at most
/// 63 bytes. Restrictive on purpose: such a name needs no quoting rules to be safe in DDL and
/// means the same thing quoted or not.
pub fn check_schema_name(name: &str) -> Result<(), String> {
    let ok_start = name
        .chars()
        .next()
        .is_some_and(|c| c.is_ascii_lowercase() || c == '_');
    let ok_rest = name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
    if !ok_start || !ok_rest || name.len() > MAX_SCHEMA_NAME_BYTES {
        return Err(format!(
            "schema name `{name}` is not allowed: use 1 to {MAX_SCHEMA_NAME_BYTES} lower-case letters, digits and `_`, not starting with a digit (e.g. `idemcalc`)"
        ));
    }
    if name.starts_with("pg_") {
        return Err(format!(
            "schema name `{name}` is reserved: names starting with `pg_` belong to PostgreSQL"
        ));
    }
    // The server's own catalogue, and the database's default schema where other applications'
    // tables live: a run creates and, when scratch, drops tables and types, so it takes a
    // schema of its own.
    if let Some(whose) = match name {
        "information_schema" => Some("PostgreSQL's catalogue"),
        "public" => Some("the database's default schema, shared with other applications"),
        _ => None,
    } {
        return Err(format!(
            "schema name `{name}` is reserved: it is {whose}; name a schema of idemcalc's own, e.g. ?schema={DEFAULT_SCHEMA}"
        ));
    }
    Ok(())
}

/// The URL with any password replaced by `***`, for messages and reports.
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let (scheme, rest) = url.split_at(scheme_end + 3);
    // The user information ends at the last '@' before the query: a password may itself hold
    // '@' or '/' (unescaped), and every character of it must go.
    let query_start = rest.find('?').unwrap_or(rest.len());
    let (before_query, tail) = rest.split_at(query_start);
    let before_query = match before_query.rfind('@') {
        Some(at) => {
            let (userinfo, host_and_path) = before_query.split_at(at);
            match userinfo.find(':') {
                Some(colon) => format!("{}:***{host_and_path}", &userinfo[..colon]),
                None => before_query.to_string(),
            }
        }
        None => before_query.to_string(),
    };
    // A password may also travel as a query parameter.
    let tail = match tail.strip_prefix('?') {
        Some(query) => {
            let params: Vec<String> = query
                .split('&')
                .map(|p| match p.split_once('=') {
                    Some((k, _)) if k.eq_ignore_ascii_case("password") => format!("{k}=***"),
                    _ => p.to_string(),
                })
                .collect();
            format!("?{}", params.join("&"))
        }
        None => tail.to_string(),
    };
    format!("{scheme}{before_query}{tail}")
}

/// `"name"`: the schema name is already restricted by [`check_schema_name`](super::check_schema_name); quoting keeps it
/// exact even so.
pub(super) fn quote_ident(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_never_reach_a_message() {
        assert_eq!(
            redact_url("postgres://alice:s3cret@db.example:5433/prod?sslmode=disable"),
            "postgres://alice:***@db.example:5433/prod?sslmode=disable"
        );
        assert_eq!(
            redact_url("postgresql://bob@127.0.0.1/test?password=hunter2&schema=x"),
            "postgresql://bob@127.0.0.1/test?password=***&schema=x"
        );
        assert_eq!(
            redact_url("postgres://postgres@127.0.0.1:5432/test"),
            "postgres://postgres@127.0.0.1:5432/test"
        );
        // A password holding '@' or '/' still disappears whole.
        assert_eq!(
            redact_url("postgres://u:p@ss@h/db"),
            "postgres://u:***@h/db"
        );
        assert_eq!(
            redact_url("postgres://u:p/ss@h/db"),
            "postgres://u:***@h/db"
        );
    }

    #[test]
    fn schema_names_are_plain_identifiers() {
        assert!(check_schema_name("idemcalc").is_ok());
        assert!(check_schema_name("t_0123abcd").is_ok());
        for bad in [
            "",
            "1abc",
            "Upper",
            "a-b",
            "a;drop",
            "pg_x",
            "public",
            "information_schema",
            &"a".repeat(64),
        ] {
            assert!(check_schema_name(bad).is_err(), "{bad:?}");
        }
    }
}
