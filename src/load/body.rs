//! Reading an answer's body with a ceiling. A server that sends a body without end (or a
//! `Content-Length` of terabytes) must not decide how much memory `load` takes: buffering
//! one endless 201 over loopback grew the process by about 1.3 GB a second for as long as
//! the attempt was heard out. So a body is read chunk by chunk and given up on once it passes
//! the ceiling; dropping the response closes its connection, and the answer counts as an
//! error, not as a label. A failure with no answer to read is named here too, for the
//! attempts and the invoice alike.

/// A body as read, or the fact that it was larger than allowed.
pub(super) enum Body {
    Read(Vec<u8>),
    /// Larger than the ceiling; nothing of it is kept.
    TooLarge,
}

/// Reads `response`'s body up to `max` bytes. A declared length above `max` is refused
/// before a byte is read, so a server that announces a huge body costs nothing.
pub(super) async fn read_capped(
    mut response: reqwest::Response,
    max: u64,
) -> Result<Body, reqwest::Error> {
    if response.content_length().is_some_and(|n| n > max) {
        return Ok(Body::TooLarge);
    }
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await? {
        if body.len() as u64 + chunk.len() as u64 > max {
            return Ok(Body::TooLarge);
        }
        body.extend_from_slice(&chunk);
    }
    Ok(Body::Read(body))
}

/// A size for a message: `1 MiB` when it is a whole number of binary units (as the defaults
/// are), else the decimal size.
pub fn size_text(bytes: u64) -> String {
    for (unit, factor) in [("GiB", 1u64 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)] {
        if bytes >= factor && bytes.is_multiple_of(factor) {
            return format!("{} {unit}", bytes / factor);
        }
    }
    crate::format::human_bytes(bytes as f64)
}

/// Reads a `--max-body`-style flag: a size of at least one byte and at most 4 GiB (what a
/// run can hold in memory for one answer; the flag exists to bound memory, not to lift it).
pub fn parse_max(flag: &str, text: &str) -> anyhow::Result<u64> {
    let bytes =
        crate::payload::parse_bytes(text).map_err(|e| anyhow::anyhow!("{flag} {text}: {e}"))?;
    if !(1.0..=(4u64 << 30) as f64).contains(&bytes) {
        anyhow::bail!("{flag} {text}: must be at least 1 byte and at most 4 GiB");
    }
    Ok(bytes as u64)
}

/// A failure without an HTTP answer, named by what failed, with the innermost cause (the
/// OS's "connection refused", rustls's "invalid peer certificate").
pub(super) fn error_kind(e: &reqwest::Error) -> String {
    let what = if e.is_connect() {
        "connect"
    } else if e.is_timeout() {
        "timeout"
    } else if e.is_body() || e.is_decode() {
        "body"
    } else {
        "request"
    };
    let mut cause: &dyn std::error::Error = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    format!("{what}: {cause}")
}
