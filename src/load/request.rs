//! What one attempt sends and how its answer is read: the request template (method, path,
//! headers, a body with placeholders, the key's pattern and header, and where the answer keeps
//! the label's identity), the callers a run spreads intents over, and `--header` lines.
//!
//! The default template is `idemcalc serve`'s `POST /labels`: the seed's CreateLabel body
//! ([`LabelRequest::body_json`]), the seed's derived key ([`LabelRequest::derived_key`]) sent
//! as an RFC 8941 sf-string in `Idempotency-Key`, and the label's identity read from the
//! saved response's `tracking_no` ([`crate::engine::label_body`]): two tracking numbers for
//! one parcel are two labels bought.

use crate::carrier::Service;
use crate::engine::request::LabelRequest;
use anyhow::{Context, bail};
use reqwest::Method;
use reqwest::header::{HeaderName, HeaderValue};
use std::collections::BTreeMap;
use std::path::Path;

/// The seed's parcel: 1,450 g by ground, parcel 1, label version 1 (a reprint is another
/// intent, with another version).
pub const SEED_WEIGHT_G: f64 = 1450.0;

/// How the key travels in its header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Deserialize, serde::Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum KeyFormat {
    /// `"label:1:1:v1"`: the IETF Idempotency-Key draft's Structured Field string.
    SfString,
    /// `label:1:1:v1`: the bare text, as Stripe's API takes it.
    Raw,
}

/// One parcel to label: what the placeholders `{order}`, `{parcel}`, `{version}` stand for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Parcel {
    pub order: i64,
    pub parcel: i64,
    pub version: i64,
}

impl Parcel {
    fn seed_request(&self) -> LabelRequest {
        LabelRequest {
            order_id: self.order,
            parcel_no: self.parcel,
            label_version: self.version,
            weight_g: SEED_WEIGHT_G,
            service: Service::Ground,
        }
    }
}

/// What every attempt of a run sends, and where its answer names the label.
#[derive(Debug, Clone)]
pub struct Template {
    pub method: Method,
    /// Joined to the URL given on the command line.
    pub path: String,
    /// The key's pattern; `None` is the seed's derived key.
    pub key: Option<String>,
    pub key_header: HeaderName,
    pub key_format: KeyFormat,
    /// RFC 6901 JSON pointer to the label's identity in a 2xx body.
    pub identity: String,
    /// The body's pattern (`{key}` may appear too); `None` is the seed's CreateLabel body.
    pub body: Option<String>,
    pub headers: Vec<(HeaderName, HeaderValue)>,
}

/// The seed's label identity in `idemcalc serve`'s answer.
pub const DEFAULT_IDENTITY: &str = "/tracking_no";

impl Default for Template {
    fn default() -> Self {
        Template {
            method: Method::POST,
            path: "/labels".into(),
            key: None,
            key_header: HeaderName::from_static("idempotency-key"),
            key_format: KeyFormat::SfString,
            identity: DEFAULT_IDENTITY.into(),
            body: None,
            headers: vec![(
                reqwest::header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            )],
        }
    }
}

/// A template file as written (TOML); every field may be left out for the default's.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct TemplateFile {
    method: Option<String>,
    path: Option<String>,
    key: Option<String>,
    key_header: Option<String>,
    key_format: Option<KeyFormat>,
    identity: Option<String>,
    body: Option<String>,
    headers: Option<BTreeMap<String, String>>,
}

impl Template {
    /// Reads a TOML template; errors name the file and the field.
    pub fn from_file(path: &Path) -> anyhow::Result<Template> {
        let text = crate::input::read_limited(path)
            .with_context(|| format!("--template {}: cannot read", path.display()))?;
        let file: TemplateFile = toml::from_str(&text)
            .map_err(|e| anyhow::anyhow!("--template {}: {e}", path.display()))?;
        Self::from_parts(file).with_context(|| format!("--template {}", path.display()))
    }

    fn from_parts(file: TemplateFile) -> anyhow::Result<Template> {
        let mut t = Template::default();
        if let Some(m) = file.method {
            t.method = Method::from_bytes(m.as_bytes())
                .map_err(|_| anyhow::anyhow!("method: `{m}` is not an HTTP method"))?;
        }
        if let Some(p) = file.path {
            if !p.starts_with('/') {
                bail!("path: `{p}` must start with /");
            }
            t.path = p;
        }
        if let Some(k) = file.key {
            if k.is_empty() {
                bail!("key: the key pattern is empty");
            }
            t.key = Some(k);
        }
        if let Some(h) = file.key_header {
            t.key_header = HeaderName::from_bytes(h.as_bytes())
                .map_err(|_| anyhow::anyhow!("key_header: `{h}` is not a header name"))?;
        }
        if let Some(f) = file.key_format {
            t.key_format = f;
        }
        if let Some(i) = file.identity {
            t.set_identity(&i).context("identity")?;
        }
        t.body = file.body;
        if let Some(headers) = file.headers {
            for (name, value) in headers {
                t.add_header(&name, &value)
                    .with_context(|| format!("headers.{name}"))?;
            }
        }
        Ok(t)
    }

    /// Sets the JSON pointer of the label's identity.
    pub fn set_identity(&mut self, pointer: &str) -> anyhow::Result<()> {
        if !(pointer.is_empty() || pointer.starts_with('/')) {
            bail!("`{pointer}` is not a JSON pointer (RFC 6901: empty, or starting with /)");
        }
        self.identity = pointer.to_string();
        Ok(())
    }

    /// Adds a header, replacing one of the same name (so `--header Content-Type: …` wins).
    pub fn add_header(&mut self, name: &str, value: &str) -> anyhow::Result<()> {
        let name = HeaderName::from_bytes(name.trim().as_bytes())
            .map_err(|_| anyhow::anyhow!("`{}` is not a header name", name.trim()))?;
        let value = HeaderValue::from_str(value.trim())
            .map_err(|_| anyhow::anyhow!("the value of {name} is not a valid header value"))?;
        self.headers.retain(|(n, _)| *n != name);
        self.headers.push((name, value));
        Ok(())
    }

    /// Adds a `--header 'Name: value'` line, as curl's `-H`.
    pub fn add_header_line(&mut self, line: &str) -> anyhow::Result<()> {
        let Some((name, value)) = line.split_once(':') else {
            bail!("--header `{line}`: write it as 'Name: value'");
        };
        self.add_header(name, value)
            .with_context(|| format!("--header `{line}`"))
    }

    /// The intent's key, derived from its parcel.
    pub fn key_for(&self, parcel: &Parcel) -> String {
        match &self.key {
            None => parcel.seed_request().derived_key(),
            Some(pattern) => fill(pattern, parcel, ""),
        }
    }

    /// The body every attempt of the intent sends (the same bytes each time: a client that
    /// changes the body under one key is the bug a 422 reports).
    pub fn body_for(&self, parcel: &Parcel, key: &str) -> String {
        match &self.body {
            None => parcel.seed_request().body_json(),
            Some(pattern) => fill(pattern, parcel, key),
        }
    }

    /// The key as its header carries it; a key that cannot be a header value is refused
    /// before the run starts (see [`Template::check`]).
    pub fn key_header_value(&self, key: &str) -> anyhow::Result<HeaderValue> {
        let text = match self.key_format {
            KeyFormat::Raw => key.to_string(),
            KeyFormat::SfString => {
                if let Some(c) = key.chars().find(|c| !(' '..='~').contains(c)) {
                    bail!(
                        "key `{key}` holds {c:?}, which an sf-string (RFC 8941) cannot carry; use key_format = \"raw\""
                    );
                }
                format!("\"{}\"", key.replace('\\', "\\\\").replace('"', "\\\""))
            }
        };
        HeaderValue::from_str(&text)
            .map_err(|_| anyhow::anyhow!("key `{key}` is not a header value"))
    }

    /// Fails if the first parcel's key cannot be sent: every key has the same shape.
    pub fn check(&self, parcel: &Parcel) -> anyhow::Result<()> {
        self.key_header_value(&self.key_for(parcel)).map(|_| ())
    }

    /// The label's identity in a 2xx body: a non-empty string at the pointer, or a number's
    /// JSON text; `None` otherwise. An empty string, a boolean, an object or an array names no
    /// label: taken as one, every answer of a server that sends `{"tracking_no": ""}` shared
    /// one "label" and a run that checked nothing passed.
    pub fn identity_of(&self, body: &[u8]) -> Option<String> {
        let value: serde_json::Value = serde_json::from_slice(body).ok()?;
        match value.pointer(&self.identity)? {
            serde_json::Value::String(s) if !s.is_empty() => Some(s.clone()),
            serde_json::Value::Number(n) => Some(n.to_string()),
            _ => None,
        }
    }
}

fn fill(pattern: &str, parcel: &Parcel, key: &str) -> String {
    pattern
        .replace("{order}", &parcel.order.to_string())
        .replace("{parcel}", &parcel.parcel.to_string())
        .replace("{version}", &parcel.version.to_string())
        .replace("{key}", key)
}

/// One caller of a run: the token it sends and the name it is reported under.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Caller {
    pub token: String,
    pub name: String,
}

/// Reads a callers file, `TOKEN CALLER` per line (`#` starts a comment), the same file as
/// `idemcalc serve --callers`.
pub fn read_callers(path: &Path) -> anyhow::Result<Vec<Caller>> {
    let text = crate::input::read_limited(path)
        .with_context(|| format!("--callers {}: cannot read", path.display()))?;
    parse_callers(&text).map_err(|(line, problem)| {
        anyhow::anyhow!("--callers {}:{line}: {problem}", path.display())
    })
}

fn parse_callers(text: &str) -> Result<Vec<Caller>, (usize, String)> {
    let mut callers = Vec::new();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let mut words = line.split_whitespace();
        let (Some(token), Some(name), None) = (words.next(), words.next(), words.next()) else {
            return Err((i + 1, format!("expected `TOKEN CALLER`, found `{line}`")));
        };
        if HeaderValue::from_str(&format!("Bearer {token}")).is_err() {
            return Err((i + 1, "the token cannot be sent in a header".into()));
        }
        callers.push(Caller {
            token: token.into(),
            name: name.into(),
        });
    }
    if callers.is_empty() {
        return Err((1, "no `TOKEN CALLER` line".into()));
    }
    Ok(callers)
}
