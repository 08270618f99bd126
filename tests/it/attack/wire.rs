//! HTTP/1.1 by hand, for the sweep: requests go out byte for byte as crafted and answers are
//! parsed here, because a real client would refuse to send what the sweep sends (or repair it)
//! and would hide how the server framed its answer.

use std::io::{ErrorKind, Read as _, Write as _};
use std::net::TcpStream;
use std::time::{Duration, Instant};

/// One answer as it came over the wire.
#[derive(Debug, Clone)]
pub struct Answer {
    pub status: u16,
    /// Field names lower-cased, values as sent.
    pub headers: Vec<(String, Vec<u8>)>,
    pub body: Vec<u8>,
}

impl Answer {
    pub fn header(&self, name: &str) -> Option<&[u8]> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_slice())
    }
}

/// What one connection got.
#[derive(Debug, Default)]
pub struct Exchange {
    /// Final answers, in order (1xx interim answers are left out).
    pub answers: Vec<Answer>,
    /// The server closed (or reset) the connection.
    pub closed: bool,
    /// Fewer answers than expected and no close within the limit: the server hangs a request.
    pub hung: bool,
    /// Bytes after the last answer that did not make a whole one.
    pub leftover: usize,
}

/// How long an answered connection may stay quiet before the exchange counts as over: the
/// server keeps a connection alive after answering, which is not a hang.
const QUIET: Duration = Duration::from_millis(300);

/// Sends `bytes` on a new connection to `addr` and reads what comes back, until the server
/// closes the connection, or `expect` answers have come and then nothing for a moment, or
/// `limit` passes (a hang). Write errors are not failures: a server may refuse a request
/// before it is sent whole and close the connection under the sender.
pub fn exchange(addr: &str, bytes: &[u8], expect: usize, limit: Duration) -> Exchange {
    let started = Instant::now();
    let mut stream = TcpStream::connect(addr).expect("connect to the server under test");
    stream.set_write_timeout(Some(limit)).unwrap();
    let _ = stream.write_all(bytes);
    read_answers(&mut stream, expect, started + limit)
}

/// Reads answers from `stream` as [`exchange`] does, until `deadline`.
pub fn read_answers(stream: &mut TcpStream, expect: usize, deadline: Instant) -> Exchange {
    stream
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let mut buf = Vec::new();
    let mut out = Exchange::default();
    let mut last_byte = Instant::now();
    let mut chunk = [0u8; 16 * 1024];
    loop {
        match stream.read(&mut chunk) {
            Ok(0) => {
                out.closed = true;
                break;
            }
            Ok(n) => {
                buf.extend_from_slice(&chunk[..n]);
                last_byte = Instant::now();
            }
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
            Err(_) => {
                out.closed = true;
                break;
            }
        }
        let (answers, _) = parse_all(&buf, false);
        if answers.len() >= expect.max(1) && last_byte.elapsed() >= QUIET {
            break;
        }
        if Instant::now() >= deadline {
            out.hung = answers.len() < expect.max(1);
            break;
        }
    }
    let (answers, used) = parse_all(&buf, out.closed);
    out.answers = answers;
    out.leftover = buf.len() - used;
    out
}

/// Every whole answer in `buf`, and how many bytes they took. With `closed`, an answer framed
/// by the close (no length, not chunked) is whole at the end of `buf`.
pub fn parse_all(buf: &[u8], closed: bool) -> (Vec<Answer>, usize) {
    let mut answers = Vec::new();
    let mut at = 0;
    while let Some((answer, used)) = parse_one(&buf[at..], closed) {
        at += used;
        if !(100..200).contains(&answer.status) {
            answers.push(answer);
        }
    }
    (answers, at)
}

fn find(hay: &[u8], needle: &[u8]) -> Option<usize> {
    hay.windows(needle.len()).position(|w| w == needle)
}

/// One answer at the start of `buf`, if it is all there.
fn parse_one(buf: &[u8], closed: bool) -> Option<(Answer, usize)> {
    let head_end = find(buf, b"\r\n\r\n")?;
    let head = &buf[..head_end];
    let mut lines = head
        .split(|&b| b == b'\n')
        .map(|l| l.strip_suffix(b"\r").unwrap_or(l));
    let status_line = std::str::from_utf8(lines.next()?).ok()?;
    let mut parts = status_line.splitn(3, ' ');
    if !parts.next()?.starts_with("HTTP/") {
        return None;
    }
    let status: u16 = parts.next()?.parse().ok()?;
    let headers: Vec<(String, Vec<u8>)> = lines
        .filter_map(|l| {
            let colon = l.iter().position(|&b| b == b':')?;
            let name = String::from_utf8_lossy(&l[..colon])
                .trim()
                .to_ascii_lowercase();
            let value = l[colon + 1..].trim_ascii().to_vec();
            Some((name, value))
        })
        .collect();
    let mut answer = Answer {
        status,
        headers,
        body: Vec::new(),
    };
    let body_start = head_end + 4;
    let rest = &buf[body_start..];
    if (100..200).contains(&status) || status == 204 || status == 304 {
        return Some((answer, body_start));
    }
    let chunked = answer
        .header("transfer-encoding")
        .is_some_and(|v| v.to_ascii_lowercase().ends_with(b"chunked"));
    if chunked {
        let (body, used) = dechunk(rest)?;
        answer.body = body;
        return Some((answer, body_start + used));
    }
    if let Some(length) = answer.header("content-length") {
        let n: usize = std::str::from_utf8(length).ok()?.trim().parse().ok()?;
        if rest.len() < n {
            return None;
        }
        answer.body = rest[..n].to_vec();
        return Some((answer, body_start + n));
    }
    if !closed {
        return None;
    }
    answer.body = rest.to_vec();
    Some((answer, buf.len()))
}

/// A chunked body, if its last chunk has come: the body and the bytes it took.
fn dechunk(buf: &[u8]) -> Option<(Vec<u8>, usize)> {
    let mut body = Vec::new();
    let mut at = 0;
    loop {
        let line_end = at + find(&buf[at..], b"\r\n")?;
        let size_text = std::str::from_utf8(&buf[at..line_end]).ok()?;
        let size_text = size_text.split(';').next()?.trim();
        let size = usize::from_str_radix(size_text, 16).ok()?;
        at = line_end + 2;
        if size == 0 {
            // Trailers, then the blank line.
            let end = at + find(&buf[at..], b"\r\n")?;
            if end == at {
                return Some((body, at + 2));
            }
            let trailers_end = at + find(&buf[at..], b"\r\n\r\n")?;
            return Some((body, trailers_end + 4));
        }
        if buf.len() < at + size + 2 {
            return None;
        }
        body.extend_from_slice(&buf[at..at + size]);
        at += size + 2;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_parser_frames_answers_by_length_chunks_and_close() {
        let two = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\n{}HTTP/1.1 400 Bad\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\nHTTP/1.1 200 OK\r\n\r\nto the end";
        let (a, used) = parse_all(two, false);
        assert_eq!(a.len(), 2);
        assert_eq!(a[0].status, 201);
        assert_eq!(a[1].body, b"abc");
        assert!(used < two.len());
        let (a, used) = parse_all(two, true);
        assert_eq!(a.len(), 3);
        assert_eq!(a[2].body, b"to the end");
        assert_eq!(used, two.len());
    }
}
