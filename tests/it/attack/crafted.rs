//! The requests of the HTTP sweep: each starts from a request the server under attack would
//! take and breaks one thing (the request line, a header, the framing, the body, the protocol),
//! or many at once at positions drawn from a fixed seed. What a server must do with each is the
//! same whatever the case: answer, or close the connection, in bounded time.

use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng};

/// One connection's worth of bytes, and how many answers a server owes for them if it reads
/// them as they were meant (more than one only for pipelined requests).
pub struct Case {
    pub name: String,
    pub bytes: Vec<u8>,
    pub expect: usize,
}

/// What a valid request to the server under attack looks like.
pub struct Target {
    pub path: &'static str,
    /// The `Authorization` value a valid request carries, if the server asks for one.
    pub auth: Option<&'static str>,
    /// The `Idempotency-Key` value of intent `n`.
    pub key: fn(u64) -> String,
    /// The body of intent `n`, field by field (name, JSON text), so a case can replace one
    /// field's text with text no JSON value could be written as (`1e400`).
    pub fields: fn(u64) -> Vec<(&'static str, String)>,
}

/// A request as lines and a body, to be broken one part at a time.
#[derive(Clone)]
struct Req {
    line: Vec<u8>,
    headers: Vec<(Vec<u8>, Vec<u8>)>,
    body: Vec<u8>,
}

impl Req {
    fn bytes(&self) -> Vec<u8> {
        let mut out = self.line.clone();
        out.extend_from_slice(b"\r\n");
        for (name, value) in &self.headers {
            out.extend_from_slice(name);
            out.extend_from_slice(b": ");
            out.extend_from_slice(value);
            out.extend_from_slice(b"\r\n");
        }
        out.extend_from_slice(b"\r\n");
        out.extend_from_slice(&self.body);
        out
    }

    fn line(mut self, line: impl Into<Vec<u8>>) -> Self {
        self.line = line.into();
        self
    }

    /// Replaces every field line called `name` with one, or adds it.
    fn set(self, name: &str, value: impl Into<Vec<u8>>) -> Self {
        self.without(name).add(name, value)
    }

    /// Adds a field line, whatever is there already.
    fn add(mut self, name: &str, value: impl Into<Vec<u8>>) -> Self {
        self.headers.push((name.as_bytes().to_vec(), value.into()));
        self
    }

    fn without(mut self, name: &str) -> Self {
        self.headers
            .retain(|(n, _)| !n.eq_ignore_ascii_case(name.as_bytes()));
        self
    }

    /// A new body, with the `Content-Length` that frames it.
    fn body(self, body: impl Into<Vec<u8>>) -> Self {
        let body = body.into();
        let length = body.len().to_string();
        let mut r = self.set("Content-Length", length);
        r.body = body;
        r
    }

    /// A new body, leaving the framing headers as they are.
    fn raw_body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = body.into();
        self
    }

    fn keep_alive(self) -> Self {
        self.without("Connection")
    }
}

/// Builds the cases, every intent with its own key and order so that no case replays another.
struct Gen<'a> {
    target: &'a Target,
    n: u64,
    cases: Vec<Case>,
}

impl Gen<'_> {
    /// The fields of a fresh intent.
    fn fields(&mut self) -> Vec<(&'static str, String)> {
        self.n += 1;
        (self.target.fields)(self.n)
    }

    /// A request the server takes: a fresh intent, `Connection: close`.
    fn valid(&mut self) -> Req {
        let fields = self.fields();
        self.with_fields(&fields)
    }

    fn with_fields(&self, fields: &[(&'static str, String)]) -> Req {
        let mut r = Req {
            line: format!("POST {} HTTP/1.1", self.target.path).into_bytes(),
            headers: Vec::new(),
            body: Vec::new(),
        }
        .add("Host", "127.0.0.1")
        .add("Idempotency-Key", (self.target.key)(self.n))
        .add("Content-Type", "application/json")
        .add("Connection", "close");
        if let Some(auth) = self.target.auth {
            r = r.add("Authorization", auth);
        }
        r.body(json(fields))
    }

    /// A fresh intent's request with field `name`'s JSON text replaced by `raw`.
    fn with_field(&mut self, name: &str, raw: &str) -> Req {
        let mut fields = self.fields();
        for f in &mut fields {
            if f.0 == name {
                f.1 = raw.to_string();
            }
        }
        self.with_fields(&fields)
    }

    fn push(&mut self, name: impl Into<String>, bytes: Vec<u8>) {
        self.push_n(name, bytes, 1);
    }

    fn push_n(&mut self, name: impl Into<String>, bytes: Vec<u8>, expect: usize) {
        self.cases.push(Case {
            name: name.into(),
            bytes,
            expect,
        });
    }
}

fn json(fields: &[(&str, String)]) -> String {
    let inner: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    format!("{{{}}}", inner.join(","))
}

/// Every case against `target`: the fixed ones, then `mutations` whole requests corrupted at
/// positions drawn from `seed`.
pub fn cases(target: &Target, seed: u64, mutations: usize) -> Vec<Case> {
    let mut g = Gen {
        target,
        n: seed * 1_000_000,
        cases: Vec::new(),
    };
    request_lines(&mut g);
    headers(&mut g);
    keys(&mut g);
    framing(&mut g);
    bodies(&mut g, seed);
    protocol(&mut g, seed);
    let mut rng = StdRng::seed_from_u64(seed);
    for i in 0..mutations {
        let bytes = super::corrupt(&g.valid().bytes(), &mut rng);
        g.push(format!("mutation {i}"), bytes);
    }
    g.cases
}

fn request_lines(g: &mut Gen) {
    let p = g.target.path;
    let long_path = format!("/{}", "a".repeat(70_000));
    let long_method = "P".repeat(5_000);
    let lines: Vec<Vec<u8>> = vec![
        format!("POST  {p} HTTP/1.1").into(),
        format!("POST {p}  HTTP/1.1").into(),
        format!("POST {p} HTTP/1.1 extra").into(),
        format!("POST {p}").into(),
        b"POST".to_vec(),
        Vec::new(),
        format!("post {p} HTTP/1.1").into(),
        format!("P\0ST {p} HTTP/1.1").into(),
        format!("POST {p} HTTP/1.9").into(),
        format!("POST {p} HTTP/2.0").into(),
        format!("POST {p} HTTP/0.9").into(),
        format!("POST {p} http/1.1").into(),
        format!("POST {p}\tHTTP/1.1").into(),
        format!("POST {p}?x=1&y=%ZZ HTTP/1.1").into(),
        format!("POST {p}#fragment HTTP/1.1").into(),
        format!("POST http://127.0.0.1{p} HTTP/1.1").into(),
        b"POST http://[::1 HTTP/1.1".to_vec(),
        b"POST * HTTP/1.1".to_vec(),
        b"OPTIONS * HTTP/1.1".to_vec(),
        b"CONNECT 127.0.0.1:80 HTTP/1.1".to_vec(),
        format!("BREW {p} HTTP/1.1").into(),
        format!("{long_method} {p} HTTP/1.1").into(),
        format!("POST {long_path} HTTP/1.1").into(),
        format!("POST /{}{p} HTTP/1.1", "../".repeat(20)).into(),
        format!("POST /{p} HTTP/1.1").into(),
        format!("POST {p}/ HTTP/1.1").into(),
        format!("POST {p}%2F.. HTTP/1.1").into(),
        b"POST /lab\xc3\xa9ls HTTP/1.1".to_vec(),
        b"POST /lab\xffels HTTP/1.1".to_vec(),
        b"GET /problems/%FF HTTP/1.1".to_vec(),
        b"GET /problems/%00 HTTP/1.1".to_vec(),
        b"GET /problems/%C3%28 HTTP/1.1".to_vec(),
        b"GET /problems/..%2F..%2Fetc%2Fpasswd HTTP/1.1".to_vec(),
        b"GET /problems/idempotency_key_missing HTTP/1.1".to_vec(),
        b"GET /problems/ HTTP/1.1".to_vec(),
        b"GET /problems/a/b HTTP/1.1".to_vec(),
        b"GET /healthz HTTP/1.1".to_vec(),
        b"GET /metrics HTTP/1.1".to_vec(),
        b"GET /v1/invoice HTTP/1.1".to_vec(),
        b"POST /healthz HTTP/1.1".to_vec(),
        b"POST /metrics HTTP/1.1".to_vec(),
        b"PUT /problems/x HTTP/1.1".to_vec(),
        format!("GET {p} HTTP/1.1").into(),
        format!("DELETE {p} HTTP/1.1").into(),
        format!("PUT {p} HTTP/1.1").into(),
        format!("PATCH {p} HTTP/1.1").into(),
        format!("TRACE {p} HTTP/1.1").into(),
        b"POST /nope HTTP/1.1".to_vec(),
        b"POST / HTTP/1.1".to_vec(),
    ];
    for (i, line) in lines.into_iter().enumerate() {
        let r = g.valid().line(line);
        g.push(format!("request line {i}"), r.bytes());
    }
    // HTTP/1.0, which has no Host and closes by default.
    let r = g.valid().line(format!("POST {p} HTTP/1.0")).without("Host");
    g.push("HTTP/1.0 without Host", r.bytes());
    let r = g
        .valid()
        .line(format!("POST {p} HTTP/1.0"))
        .set("Connection", "keep-alive");
    g.push("HTTP/1.0 keep-alive", r.bytes());
}

fn headers(g: &mut Gen) {
    let huge = |n: usize| vec![b'x'; n];
    let mut many = g.valid();
    for i in 0..150 {
        many = many.add(&format!("X-Many-{i}"), "1");
    }
    g.push("150 header lines", many.bytes());
    let mut more = g.valid();
    for i in 0..2_000 {
        more = more.add(&format!("X-More-{i}"), "1");
    }
    g.push("2,000 header lines", more.bytes());
    let cases: Vec<(&str, Req)> = vec![
        ("no Host", g.valid().without("Host")),
        ("two Hosts", g.valid().add("Host", "other.example")),
        (
            "Host garbage",
            g.valid().set("Host", b"\xff\xfe::[[".to_vec()),
        ),
        ("Content-Length twice, equal", {
            let r = g.valid();
            let n = r.body.len().to_string();
            r.add("Content-Length", n)
        }),
        (
            "Content-Length twice, different",
            g.valid().add("Content-Length", "3"),
        ),
        ("Content-Length as a list", {
            let r = g.valid();
            let n = r.body.len();
            r.set("Content-Length", format!("{n}, {n}"))
        }),
        ("a 10 KB header", g.valid().add("X-Big", huge(10_000))),
        ("a 100 KB header", g.valid().add("X-Big", huge(100_000))),
        ("a 1 MB header", g.valid().add("X-Big", huge(1_000_000))),
        (
            "a 100 KB header name",
            g.valid().add(&"N".repeat(100_000), "1"),
        ),
        (
            "non-UTF-8 header",
            g.valid().add("X-Junk", b"\xc3\x28\xff\xfe".to_vec()),
        ),
        ("NUL in a header", g.valid().add("X-Nul", b"a\0b".to_vec())),
        (
            "CR alone in a header",
            g.valid().add("X-Cr", b"a\rb".to_vec()),
        ),
        (
            "LF alone in a header",
            g.valid().add("X-Lf", b"a\nb".to_vec()),
        ),
        ("space in a header name", g.valid().add("Bad Name", "x")),
        ("space before the colon", g.valid().add("X-Space ", "x")),
        ("@ in a header name", g.valid().add("Bad@Name", "x")),
        ("empty header name", g.valid().add("", "x")),
        ("obs-fold", g.valid().add("X-Folded", b"a\r\n b".to_vec())),
        (
            "obs-fold in the key",
            g.valid().set("Idempotency-Key", b"\"a\r\n b\"".to_vec()),
        ),
        (
            "obs-fold in Authorization",
            g.valid()
                .set("Authorization", b"Bearer\r\n tok-fulfilment".to_vec()),
        ),
        ("no Authorization", g.valid().without("Authorization")),
        (
            "Basic auth",
            g.valid().set("Authorization", "Basic dXNlcjpwYXNz"),
        ),
        (
            "Bearer without a token",
            g.valid().set("Authorization", "Bearer"),
        ),
        (
            "Bearer, two spaces",
            g.valid().set("Authorization", "Bearer  tok-fulfilment"),
        ),
        (
            "bearer in lower case",
            g.valid().set("Authorization", "bearer tok-fulfilment"),
        ),
        (
            "two Authorization headers",
            g.valid().add("Authorization", "Bearer tok-returns"),
        ),
        (
            "a token with a byte above 0x7f",
            g.valid()
                .set("Authorization", b"Bearer tok-fulfilment\xff".to_vec()),
        ),
        (
            "a 10 KB token",
            g.valid()
                .set("Authorization", format!("Bearer {}", "t".repeat(10_000))),
        ),
        ("no Content-Type", g.valid().without("Content-Type")),
        (
            "Content-Type text/plain",
            g.valid().set("Content-Type", "text/plain"),
        ),
        (
            "Content-Type garbage",
            g.valid().set("Content-Type", b"\x01;;==\xff".to_vec()),
        ),
        (
            "Expect: 100-continue",
            g.valid().add("Expect", "100-continue"),
        ),
        ("Expect: garbage", g.valid().add("Expect", "500-continue")),
        (
            "Upgrade: h2c",
            g.valid()
                .set("Connection", "Upgrade, HTTP2-Settings")
                .add("Upgrade", "h2c")
                .add("HTTP2-Settings", "AAMAAABkAARAAAAAAAIAAAAA"),
        ),
        (
            "Upgrade: websocket",
            g.valid()
                .set("Connection", "Upgrade")
                .add("Upgrade", "websocket")
                .add("Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="),
        ),
        (
            "Connection: garbage",
            g.valid().set("Connection", b"\xff close, ,,".to_vec()),
        ),
        (
            "Connection: close twice",
            g.valid().add("Connection", "close"),
        ),
        (
            "test hook header without --test-hooks",
            g.valid().add("idemcalc-test-die", "after-carrier"),
        ),
    ];
    for (name, r) in cases {
        g.push(name, r.bytes());
    }
    // Expect: 100-continue and no body: the body deadline decides.
    let r = g.valid().add("Expect", "100-continue").raw_body(Vec::new());
    g.push("Expect: 100-continue, no body", r.bytes());
}

fn keys(g: &mut Gen) {
    let values: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("empty string", b"\"\"".to_vec()),
        ("unterminated", b"\"abc".to_vec()),
        ("parameters", b"\"a\";p=1".to_vec()),
        ("folded pair, bare", b"abc,def".to_vec()),
        ("folded pair, strings", b"\"a\", \"b\"".to_vec()),
        ("UTF-8 inside quotes", "\"é\"".as_bytes().to_vec()),
        ("UTF-8 bare", "é".as_bytes().to_vec()),
        ("255 bytes", format!("\"{}\"", "k".repeat(255)).into()),
        ("256 bytes", format!("\"{}\"", "k".repeat(256)).into()),
        ("10 KB", format!("\"{}\"", "k".repeat(10_000)).into()),
        ("control byte inside quotes", b"\"a\x01b\"".to_vec()),
        ("escaped quote", b"\"a\\\"b\"".to_vec()),
        ("bad escape", b"\"a\\qb\"".to_vec()),
        ("backslash at the end", b"\"ab\\\"".to_vec()),
        ("sf boolean", b"?1".to_vec()),
        ("sf byte sequence", b":Ym9v:".to_vec()),
        ("sf integer", b"123".to_vec()),
        ("sf inner list", b"(\"a\" \"b\")".to_vec()),
        ("tabs around", b"\t\"abc\"\t".to_vec()),
        ("space inside, bare", b"a b".to_vec()),
        ("only spaces", b"   ".to_vec()),
        ("byte above 0x7f", b"\"a\xffb\"".to_vec()),
    ];
    for (name, value) in values {
        let r = g.valid().set("Idempotency-Key", value);
        g.push(format!("key: {name}"), r.bytes());
    }
    let r = g.valid().without("Idempotency-Key");
    g.push("key: absent", r.bytes());
    let r = g.valid().add("Idempotency-Key", "\"other\"");
    g.push("key: two headers", r.bytes());
    let r = g.valid();
    let same = r
        .headers
        .iter()
        .find(|(n, _)| n == b"Idempotency-Key")
        .map(|(_, v)| v.clone())
        .unwrap_or_default();
    g.push(
        "key: the same header twice",
        r.add("Idempotency-Key", same).bytes(),
    );
}

fn framing(g: &mut Gen) {
    let lengths: Vec<(&str, &str)> = vec![
        ("a terabyte", "1000000000000"),
        ("u64::MAX", "18446744073709551615"),
        ("past u64", "99999999999999999999999"),
        ("negative", "-1"),
        ("not a number", "abc"),
        ("exponent", "1e3"),
        ("plus sign", "+5"),
        ("empty", ""),
    ];
    for (name, value) in lengths {
        let r = g.valid().set("Content-Length", value);
        g.push(format!("Content-Length: {name}"), r.bytes());
    }
    // A declared length longer than what comes: the body deadline decides.
    let r = g.valid();
    let n = r.body.len() + 50;
    g.push(
        "Content-Length past the body",
        r.set("Content-Length", n.to_string()).bytes(),
    );
    // Shorter: the rest is read as the next request.
    let r = g.valid();
    let n = r.body.len() / 2;
    g.push(
        "Content-Length inside the body",
        r.set("Content-Length", n.to_string()).bytes(),
    );
    let over = vec![b' '; 70_000];
    let r = g.valid().body(over);
    g.push("a body over --max-body", r.bytes());
    let chunked = |r: Req, chunks: &[u8]| {
        r.without("Content-Length")
            .set("Transfer-Encoding", "chunked")
            .raw_body(chunks.to_vec())
    };
    // A fresh intent's request with its own body in one chunk.
    let framed = |g: &mut Gen| {
        let r = g.valid();
        let mut out = format!("{:x}\r\n", r.body.len()).into_bytes();
        out.extend_from_slice(&r.body);
        out.extend_from_slice(b"\r\n0\r\n\r\n");
        let length = r.body.len().to_string();
        (chunked(r, &out), length)
    };
    let (r, _) = framed(g);
    g.push("chunked", r.bytes());
    let (r, length) = framed(g);
    g.push(
        "Content-Length and chunked",
        r.add("Content-Length", length).bytes(),
    );
    let (r, _) = framed(g);
    g.push(
        "chunked and a wrong Content-Length",
        r.add("Content-Length", "3").bytes(),
    );
    let r = g.valid();
    let body = r.body.clone();
    let mut ones = Vec::new();
    for b in &body {
        ones.extend_from_slice(b"1\r\n");
        ones.push(*b);
        ones.extend_from_slice(b"\r\n");
    }
    ones.extend_from_slice(b"0\r\n\r\n");
    let r = chunked(r, &ones);
    g.push("chunks of one byte", r.bytes());
    let mut big = Vec::new();
    for _ in 0..20 {
        big.extend_from_slice(format!("{:x}\r\n", 4096).as_bytes());
        big.extend_from_slice(&[b' '; 4096]);
        big.extend_from_slice(b"\r\n");
    }
    big.extend_from_slice(b"0\r\n\r\n");
    let r = chunked(g.valid(), &big);
    g.push("chunked past --max-body", r.bytes());
    let bad: Vec<(&str, Vec<u8>)> = vec![
        ("size not hex", b"zz\r\nabc\r\n0\r\n\r\n".to_vec()),
        ("size negative", b"-1\r\nabc\r\n0\r\n\r\n".to_vec()),
        (
            "size 2^64-1",
            b"ffffffffffffffff\r\nabc\r\n0\r\n\r\n".to_vec(),
        ),
        (
            "size past 2^64",
            b"1ffffffffffffffff\r\nabc\r\n0\r\n\r\n".to_vec(),
        ),
        ("extension", b"3;a=b;c\r\nabc\r\n0\r\n\r\n".to_vec()),
        (
            "data longer than the size",
            b"1\r\nabc\r\n0\r\n\r\n".to_vec(),
        ),
        ("no CRLF after the data", b"3\r\nabc0\r\n\r\n".to_vec()),
        ("no last chunk", b"3\r\nabc\r\n".to_vec()),
        (
            "trailers",
            b"2\r\n{}\r\n0\r\nX-Trailer: 1\r\nContent-Length: 5\r\n\r\n".to_vec(),
        ),
        ("nothing", Vec::new()),
    ];
    for (name, chunks) in bad {
        let r = chunked(g.valid(), &chunks);
        g.push(format!("chunked: {name}"), r.bytes());
    }
    let codings: Vec<&str> = vec![
        "gzip",
        "gzip, chunked",
        "chunked, gzip",
        "chunked, chunked",
        "identity",
        "chunked ",
        "\tchunked",
        "xchunked",
    ];
    for coding in codings {
        let (r, _) = framed(g);
        g.push(
            format!("Transfer-Encoding: {coding:?}"),
            r.set("Transfer-Encoding", coding).bytes(),
        );
    }
    let (r, _) = framed(g);
    g.push(
        "Transfer-Encoding twice",
        r.add("Transfer-Encoding", "chunked").bytes(),
    );
}

fn bodies(g: &mut Gen, seed: u64) {
    let nested = |depth: usize, open: &str, close: &str| {
        format!("{}{}", open.repeat(depth), close.repeat(depth))
    };
    let whole: Vec<(&str, Vec<u8>)> = vec![
        ("empty", Vec::new()),
        ("null", b"null".to_vec()),
        ("an array", b"[]".to_vec()),
        ("an empty object", b"{}".to_vec()),
        ("a string", b"\"label\"".to_vec()),
        ("a number", b"1".to_vec()),
        ("whitespace", b" \t\r\n ".to_vec()),
        ("arrays 100 deep", nested(100, "[", "]").into()),
        ("arrays 129 deep", nested(129, "[", "]").into()),
        ("arrays 30,000 deep", nested(30_000, "[", "]").into()),
        ("arrays 30,000 deep, unclosed", "[".repeat(30_000).into()),
        ("objects 10,000 deep", nested(10_000, "{\"a\":", "}").into()),
        (
            "a 60 KB string",
            format!("\"{}\"", "s".repeat(60_000)).into(),
        ),
        ("a 60 KB number", "9".repeat(60_000).into()),
        ("10,000 keys", {
            let keys: Vec<String> = (0..10_000).map(|i| format!("\"k{i}\":1")).collect();
            format!("{{{}}}", keys.join(",")).into()
        }),
        ("not UTF-8", b"{\"service\":\"\xff\xfe\"}".to_vec()),
        ("UTF-16", b"\xff\xfe{\0}\0".to_vec()),
    ];
    for (name, body) in whole {
        let r = g.valid().body(body);
        g.push(format!("body: {name}"), r.bytes());
    }
    let valid = g.valid().body;
    for cut in [1, valid.len() / 3, valid.len() / 2, valid.len() - 1] {
        let r = g.valid().body(valid[..cut].to_vec());
        g.push(format!("body cut at {cut}"), r.bytes());
    }
    let mut bom = "\u{feff}".as_bytes().to_vec();
    bom.extend_from_slice(&valid);
    let mut trailing = valid.clone();
    trailing.extend_from_slice(b" garbage");
    let mut two = valid.clone();
    two.extend_from_slice(&valid);
    for (name, body) in [
        ("a BOM", bom),
        ("trailing garbage", trailing),
        ("two values", two),
    ] {
        let r = g.valid().body(body);
        g.push(format!("body: {name}"), r.bytes());
    }
    let numbers = [
        "1e400",
        "-1e400",
        "1e308",
        "99999999999999999999999",
        "9007199254740993",
        "18446744073709551616",
        "-9223372036854775809",
        "-0",
        "0",
        "-1",
        "1.5",
        "1e-400",
        "0.1e1",
    ];
    let others = [
        "\"1\"",
        "[1]",
        "null",
        "true",
        "{}",
        "\"\"",
        "\"\\ud800\"",
        "\"a\\u0000b\"",
        "\"überfast\"",
        "NaN",
        "Infinity",
        "01",
        ".5",
    ];
    let fields: Vec<&'static str> = (g.target.fields)(0).iter().map(|(f, _)| *f).collect();
    for field in &fields {
        for raw in numbers.iter().chain(others.iter()) {
            let r = g.with_field(field, raw);
            g.push(format!("{field}: {raw}"), r.bytes());
        }
    }
    let r = g.valid();
    let mut body = r.body.clone();
    body.pop();
    body.extend_from_slice(b",\"extra\":{\"nested\":[1,2,3]}}");
    g.push("an extra field", r.body(body).bytes());
    let r = g.valid();
    let mut body = r.body.clone();
    body.pop();
    body.extend_from_slice(format!(",\"{}\":7}}", fields[0]).as_bytes());
    g.push("a field twice", r.body(body).bytes());
    let mut rng = StdRng::seed_from_u64(seed ^ 0xb0d1e5);
    for i in 0..30 {
        let r = g.valid();
        let body = super::corrupt(&r.body, &mut rng);
        g.push(format!("body corrupted {i}"), r.body(body).bytes());
    }
}

fn protocol(g: &mut Gen, seed: u64) {
    let preface = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".to_vec();
    let mut settings = preface.clone();
    settings.extend_from_slice(&[0, 0, 0, 4, 0, 0, 0, 0, 0]);
    let mut rng = StdRng::seed_from_u64(seed ^ 0x9a7ba9e);
    let random: Vec<u8> = (0..2048).map(|_| rng.random()).collect();
    let client_hello = vec![
        0x16, 0x03, 0x01, 0x00, 0x2e, 0x01, 0x00, 0x00, 0x2a, 0x03, 0x03, 0, 0, 0, 0,
    ];
    let raw: Vec<(&str, Vec<u8>)> = vec![
        ("HTTP/2 preface", preface),
        ("HTTP/2 preface and SETTINGS", settings),
        ("a TLS ClientHello", client_hello),
        ("2 KB of random bytes", random),
        ("CRLFs only", b"\r\n\r\n\r\n\r\n".to_vec()),
        ("nothing at all", Vec::new()),
        (
            "a head without its end",
            b"POST /labels HTTP/1.1\r\nHost: x\r\n".to_vec(),
        ),
    ];
    for (name, bytes) in raw {
        g.push(name, bytes);
    }
    let mut lead = b"\r\n\r\n".to_vec();
    lead.extend_from_slice(&g.valid().bytes());
    g.push("CRLFs before a request", lead);
    let lf: Vec<u8> = String::from_utf8_lossy(&g.valid().bytes())
        .replace("\r\n", "\n")
        .into_bytes();
    g.push("LF line ends", lf);
    let mut three = g.valid().keep_alive().bytes();
    three.extend(g.valid().keep_alive().bytes());
    three.extend(g.valid().bytes());
    g.push_n("three pipelined requests", three, 3);
    let replay = g.valid();
    let mut twice = replay.clone().keep_alive().bytes();
    twice.extend(replay.bytes());
    g.push_n("one request pipelined twice (a replay)", twice, 2);
    let mut health = Vec::new();
    for _ in 0..19 {
        health.extend_from_slice(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n");
    }
    health.extend_from_slice(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    g.push_n("twenty pipelined health checks", health, 20);
    let mut then_garbage = g.valid().keep_alive().bytes();
    then_garbage.extend_from_slice(b"\x00\x01garbage\r\n\r\n");
    g.push("a request, then garbage", then_garbage);
    let mut then_bad = g.valid().keep_alive().bytes();
    then_bad.extend(g.valid().set("Content-Length", "abc").bytes());
    g.push("a request, then a bad one", then_bad);
    let mut smuggle = g
        .valid()
        .keep_alive()
        .without("Content-Length")
        .set("Transfer-Encoding", "chunked")
        .add("Content-Length", "4")
        .raw_body(b"0\r\n\r\n".to_vec())
        .bytes();
    smuggle.extend(g.valid().bytes());
    g.push("CL.TE smuggling attempt", smuggle);
}
