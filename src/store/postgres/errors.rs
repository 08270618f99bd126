//! What a failed statement or connection means: a message that says what to check, and whether
//! a new connection is the only way on. Together because both read the same driver error, for
//! the user in one case and for the retry decision in the other.

use crate::store::pg_message;
use postgres::error::SqlState;

/// Turns a failed connection into a message that says what to check.
pub(in crate::store) fn explain_connect(e: &postgres::Error, config: &postgres::Config) -> String {
    let host = match config.get_hosts().first() {
        Some(postgres::config::Host::Tcp(h)) => h.clone(),
        #[cfg(unix)]
        Some(postgres::config::Host::Unix(p)) => p.display().to_string(),
        None => "localhost".to_string(),
    };
    let port = config.get_ports().first().copied().unwrap_or(5432);
    let user = config.get_user().unwrap_or("(the OS user)");
    let dbname = config.get_dbname().unwrap_or(user);
    if let Some(db) = e.as_db_error() {
        let code = db.code();
        return if *code == SqlState::INVALID_PASSWORD {
            format!(
                "password authentication failed for user `{user}`: check the user and password in the URL ({})",
                db.message()
            )
        } else if *code == SqlState::INVALID_AUTHORIZATION_SPECIFICATION {
            format!(
                "the server refused user `{user}` ({}): check the user name, and that pg_hba.conf lets it in from this host",
                db.message()
            )
        } else if *code == SqlState::INVALID_CATALOG_NAME {
            format!(
                "database `{dbname}` does not exist on {host}:{port}: create it (createdb -h {host} -p {port} -U {user} {dbname}) or name an existing one in the URL"
            )
        } else if *code == SqlState::TOO_MANY_CONNECTIONS {
            format!(
                "the server has no free connection slots ({}): lower --pool or raise max_connections",
                db.message()
            )
        } else {
            format!("the server refused the connection: {}", pg_message(e))
        };
    }
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            return match io.kind() {
                std::io::ErrorKind::ConnectionRefused => format!(
                    "connection refused by {host}:{port}: is PostgreSQL running there and listening on TCP? (e.g. pg_ctlcluster <version> main start), or fix the host and port in the URL"
                ),
                std::io::ErrorKind::TimedOut => format!(
                    "no answer from {host}:{port} within the connect timeout: check the host, port and any firewall"
                ),
                _ => format!("cannot reach {host}:{port}: {io}"),
            };
        }
        source = s.source();
    }
    let text = pg_message(e);
    if text.contains("password missing") {
        format!(
            "the server asks user `{user}` for a password and the URL has none: use postgres://{user}:PASSWORD@{host}:{port}/{dbname}"
        )
    } else if text.contains("timeout") {
        format!("no answer from {host}:{port} within the connect timeout ({text})")
    } else {
        format!("cannot connect to {host}:{port}: {text}")
    }
}

/// The server closed this session or the socket is gone: a new connection is the only way on.
pub(super) fn connection_lost(e: &postgres::Error) -> bool {
    if e.is_closed() {
        return true;
    }
    match e.code() {
        Some(code) => {
            let c = code.code();
            // 57P01 admin_shutdown (pg_terminate_backend), 57P02 crash_shutdown, 57P03
            // cannot_connect_now; class 08 is "connection exception".
            c == "57P01" || c == "57P02" || c == "57P03" || c.starts_with("08")
        }
        // No SQLSTATE: lost only if the cause is an I/O failure on the socket.
        None => {
            let mut source = std::error::Error::source(e);
            while let Some(s) = source {
                if s.is::<std::io::Error>() {
                    return true;
                }
                source = s.source();
            }
            false
        }
    }
}
