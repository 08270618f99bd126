//! The two request headers the service decides on: `Idempotency-Key` (which intent) and
//! `Authorization` (whose), and the callers file that maps tokens to callers.

use axum::http::HeaderMap;
use sha2::{Digest as _, Sha256};
use std::collections::HashMap;
use std::path::Path;

/// What the `Idempotency-Key` header(s) of a request say.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyHeader {
    Absent,
    Key(String),
    /// More than one `Idempotency-Key` field line: which one is the intent is undecidable.
    Multiple(usize),
    /// Neither an sf-string nor a bare key; the reason.
    Malformed(String),
}

/// Reads the key as the IETF draft has it: an RFC 8941 Item of type String, `"abc"`.
///
/// A bare key (`abc`, `label:918273:1:v1`, a UUID) is accepted too, since it is what Stripe's
/// clients and most others send, and it names the same key as its quoted form, so a client
/// that switches spelling keeps its keys. A bare key is visible ASCII without `"`, `,`, `\` and
/// spaces: a comma is what a proxy folding two field lines into one writes, so a folded pair
/// is refused rather than read as one odd key. Parameters (`"abc";p=1`) are refused: the draft
/// defines none, and ignoring them would make `"abc";p=1` and `"abc";p=2` one key.
pub fn idempotency_key(headers: &HeaderMap) -> KeyHeader {
    let mut values = headers.get_all("idempotency-key").iter();
    let Some(value) = values.next() else {
        return KeyHeader::Absent;
    };
    let more = values.count();
    if more > 0 {
        return KeyHeader::Multiple(more + 1);
    }
    let bytes = value.as_bytes();
    let text = match std::str::from_utf8(bytes) {
        Ok(t) => t.trim_matches([' ', '\t']),
        Err(_) => return KeyHeader::Malformed("the value is not ASCII".into()),
    };
    if text.starts_with('"') {
        let item: sfv::Item = match sfv::Parser::new(text).parse_item() {
            Ok(item) => item,
            Err(e) => return KeyHeader::Malformed(format!("not an RFC 8941 string: {e}")),
        };
        if !item.params.is_empty() {
            return KeyHeader::Malformed(
                "parameters are not allowed after the key's string".into(),
            );
        }
        return match item.bare_item.as_string() {
            Some(s) => KeyHeader::Key(s.as_str().to_string()),
            None => KeyHeader::Malformed("not an RFC 8941 string".into()),
        };
    }
    let bare_ok = |c: char| c.is_ascii_graphic() && !matches!(c, '"' | ',' | '\\');
    if let Some(bad) = text.chars().find(|c| !bare_ok(*c)) {
        return KeyHeader::Malformed(format!(
            "a bare key may not hold {bad:?}; quote it as an RFC 8941 string (\"…\")"
        ));
    }
    // An empty value is left to the engine's own check (idempotency_key_empty).
    KeyHeader::Key(text.to_string())
}

/// Who may call, and how the caller is found.
pub enum Callers {
    /// `--callers FILE`: SHA-256 of each token → its caller. Tokens are kept as digests so a
    /// lookup compares digests, not the secret's bytes one by one.
    Tokens(HashMap<[u8; 32], String>),
    /// `--trust-caller-header NAME`: the caller is whatever the header says. Load tests only,
    /// refused unless both the listener and the peer are on loopback.
    Header(String),
}

/// Why a request has no caller.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unauthenticated(pub String);

impl Callers {
    /// Reads `TOKEN CALLER` lines; `#` starts a comment line, blank lines are skipped. Errors
    /// name the file and line.
    pub fn from_file(path: &Path) -> Result<Self, String> {
        let name = path.display();
        let text =
            crate::input::read_limited(path).map_err(|e| format!("--callers {name}: {e}"))?;
        // An editor's byte-order mark would otherwise become part of the first token.
        let text = text.strip_prefix('\u{feff}').unwrap_or(&text);
        let mut tokens = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            // Fields are split on ASCII spaces and tabs only: an em-space inside a token is a
            // typo to refuse, not a field separator.
            let line = line.trim_matches([' ', '\t']);
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let fields: Vec<&str> = line.split([' ', '\t']).filter(|f| !f.is_empty()).collect();
            let [token, caller] = fields[..] else {
                return Err(format!(
                    "--callers {name}:{}: expected `TOKEN CALLER`, found {} fields",
                    i + 1,
                    fields.len()
                ));
            };
            // A token a client cannot send in an Authorization header (NUL, other controls,
            // non-ASCII) could never authenticate anyone.
            if let Some(c) = token.chars().find(|c| !c.is_ascii_graphic()) {
                return Err(format!(
                    "--callers {name}:{}: the token holds {c:?}; tokens are visible ASCII, as an Authorization header carries them",
                    i + 1
                ));
            }
            if let Some(c) = caller.chars().find(|c| c.is_control() || c.is_whitespace()) {
                return Err(format!(
                    "--callers {name}:{}: the caller name holds {c:?}",
                    i + 1
                ));
            }
            if caller.len() > 255 {
                return Err(format!(
                    "--callers {name}:{}: the caller name is longer than 255 bytes",
                    i + 1
                ));
            }
            if tokens.insert(digest(token), caller.to_string()).is_some() {
                return Err(format!(
                    "--callers {name}:{}: this token is already listed on an earlier line",
                    i + 1
                ));
            }
        }
        if tokens.is_empty() {
            return Err(format!(
                "--callers {name}: no `TOKEN CALLER` line, so nobody could call"
            ));
        }
        Ok(Callers::Tokens(tokens))
    }

    /// Tokens listed (0 for a trusted header).
    pub fn token_count(&self) -> usize {
        match self {
            Callers::Tokens(t) => t.len(),
            Callers::Header(_) => 0,
        }
    }

    /// The caller of a request from `peer_loopback`.
    pub fn caller(
        &self,
        headers: &HeaderMap,
        peer_loopback: bool,
    ) -> Result<String, Unauthenticated> {
        match self {
            Callers::Tokens(tokens) => {
                let mut auth = headers.get_all("authorization").iter();
                let (Some(value), None) = (auth.next(), auth.next()) else {
                    return Err(Unauthenticated(
                        "send exactly one Authorization: Bearer TOKEN header".into(),
                    ));
                };
                let text = value.to_str().unwrap_or("");
                let token = match text.split_once(' ') {
                    Some((scheme, token)) if scheme.eq_ignore_ascii_case("bearer") => token.trim(),
                    _ => {
                        return Err(Unauthenticated(
                            "the Authorization header is not `Bearer TOKEN`".into(),
                        ));
                    }
                };
                tokens.get(&digest(token)).cloned().ok_or_else(|| {
                    Unauthenticated("the bearer token is not a known caller's".into())
                })
            }
            Callers::Header(name) => {
                if !peer_loopback {
                    return Err(Unauthenticated(format!(
                        "the {name} header is trusted from loopback only"
                    )));
                }
                let mut values = headers.get_all(name.as_str()).iter();
                if let (Some(_), Some(_)) = (values.next(), values.next()) {
                    return Err(Unauthenticated(format!(
                        "send exactly one {name} header: with two, the caller is ambiguous"
                    )));
                }
                match headers.get(name.as_str()).map(|v| v.to_str()) {
                    Some(Ok(c)) if !c.is_empty() && c.len() <= 255 => Ok(c.to_string()),
                    _ => Err(Unauthenticated(format!(
                        "no caller in the {name} header (1 to 255 visible characters)"
                    ))),
                }
            }
        }
    }
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn with_keys(values: &[&[u8]]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for v in values {
            h.append("idempotency-key", HeaderValue::from_bytes(v).unwrap());
        }
        h
    }

    #[test]
    fn keys_are_sf_strings_or_bare_and_both_name_one_key() {
        let k = |v: &[u8]| idempotency_key(&with_keys(&[v]));
        assert_eq!(k(br#""abc""#), KeyHeader::Key("abc".into()));
        assert_eq!(k(b"abc"), KeyHeader::Key("abc".into()));
        assert_eq!(
            k(br#""label:918273:1:v1""#),
            KeyHeader::Key("label:918273:1:v1".into())
        );
        assert_eq!(k(br#""a \"q\" b""#), KeyHeader::Key(r#"a "q" b"#.into()));
        assert_eq!(k(br#""""#), KeyHeader::Key(String::new()));
        for bad in [
            &br#""abc"#[..],
            br#""abc";p=1"#,
            br#""a", "b""#,
            b"a,b",
            b"a b",
            br#"a"b"#,
            b"caf\xc3\xa9",
        ] {
            assert!(
                matches!(k(bad), KeyHeader::Malformed(_)),
                "{:?}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(idempotency_key(&HeaderMap::new()), KeyHeader::Absent);
        assert_eq!(
            idempotency_key(&with_keys(&[b"\"a\"", b"\"a\""])),
            KeyHeader::Multiple(2)
        );
    }

    #[test]
    fn the_callers_file_names_its_bad_line() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("callers");
        std::fs::write(&path, "# tokens\n\ns3cret fulfilment\nt2 returns\n").unwrap();
        let callers = Callers::from_file(&path).unwrap();
        let mut h = HeaderMap::new();
        assert!(callers.caller(&h, true).is_err());
        h.insert("authorization", HeaderValue::from_static("Bearer s3cret"));
        assert_eq!(callers.caller(&h, false).unwrap(), "fulfilment");
        h.insert("authorization", HeaderValue::from_static("bearer t2"));
        assert_eq!(callers.caller(&h, false).unwrap(), "returns");
        h.insert("authorization", HeaderValue::from_static("Bearer nope"));
        assert!(callers.caller(&h, true).is_err());
        std::fs::write(&path, "ok a\nonly-one-field\n").unwrap();
        let e = Callers::from_file(&path).err().unwrap();
        assert!(e.contains(":2:") && e.contains("TOKEN CALLER"), "{e}");
        std::fs::write(&path, "# nobody\n").unwrap();
        assert!(
            Callers::from_file(&path)
                .err()
                .unwrap()
                .contains("no `TOKEN CALLER`")
        );
        std::fs::write(&path, "t a\nt b\n").unwrap();
        assert!(
            Callers::from_file(&path)
                .err()
                .unwrap()
                .contains("already listed")
        );
    }

    #[test]
    fn the_caller_header_is_trusted_from_loopback_only() {
        let callers = Callers::Header("x-caller".into());
        let mut h = HeaderMap::new();
        h.insert("x-caller", HeaderValue::from_static("load"));
        assert_eq!(callers.caller(&h, true).unwrap(), "load");
        assert!(callers.caller(&h, false).is_err());
        h.append("x-caller", HeaderValue::from_static("other"));
        assert!(callers.caller(&h, true).is_err(), "two caller headers");
    }

    /// A byte-order mark is not part of the first token; a token with NUL or an em-space is
    /// refused, naming its line, since no client could send it.
    #[test]
    fn callers_file_edge_cases() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("callers");
        std::fs::write(&path, "\u{feff}s3cret fulfilment\n").unwrap();
        let callers = Callers::from_file(&path).unwrap();
        let mut h = HeaderMap::new();
        h.insert("authorization", HeaderValue::from_static("Bearer s3cret"));
        assert_eq!(callers.caller(&h, false).unwrap(), "fulfilment");
        for bad in ["ok a\nt\u{0}k b\n", "ok a\ntok\u{2003}en b\n"] {
            std::fs::write(&path, bad).unwrap();
            let e = Callers::from_file(&path).err().unwrap();
            assert!(e.contains(":2:"), "{bad:?}: {e}");
        }
    }
}
