//! What arrives at the label service, and the checks made before and after a key is claimed.

use crate::carrier::Service;
use serde::Deserializer;
use serde::de::{self, DeserializeSeed, MapAccess, SeqAccess, Visitor};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::cell::RefCell;

use crate::payload::MAX_KEY_BYTES;

/// A CreateLabel call as the server sees it. The body is raw text: it is validated and
/// canonicalised here (see [`hash_and_validate`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Request {
    pub caller_id: String,
    pub idem_key: Option<String>,
    pub method: String,
    pub path: String,
    pub body: String,
}

impl Request {
    /// `POST /labels` from `caller_id` with `key` and a JSON body.
    pub fn create_label(caller_id: &str, key: Option<&str>, body: &str) -> Self {
        Self {
            caller_id: caller_id.to_string(),
            idem_key: key.map(str::to_string),
            method: "POST".to_string(),
            path: "/labels".to_string(),
            body: body.to_string(),
        }
    }
}

/// The body of a valid CreateLabel.
#[derive(Debug, Clone, PartialEq)]
pub struct LabelRequest {
    pub order_id: i64,
    pub parcel_no: i64,
    pub label_version: i64,
    pub weight_g: f64,
    pub service: Service,
}

impl LabelRequest {
    /// The body the seed's client sends, as RFC 8785 canonical JSON: also the text the request
    /// hash covers, so every body that validates to `self` hashes like this one.
    ///
    /// Written directly rather than through a `Value` and the canonicaliser, which cost more
    /// than the rest of the hash: the five names are fixed and already in RFC 8785 order, the
    /// integers are within ±2^53 (validation refuses larger ones) so their decimal digits are
    /// their RFC 8785 form, the service is one of three plain words, and the weight goes
    /// through the ECMAScript number formatting RFC 8785 prescribes. `body_json_is_rfc_8785`
    /// holds this against the canonicaliser.
    pub fn body_json(&self) -> String {
        let mut text = String::with_capacity(128);
        self.write_body_json(&mut |part| text.push_str(part));
        text
    }

    /// [`LabelRequest::body_json`]'s text in pieces, so the request hash takes them as they
    /// are written, with no `String` and no formatting machinery in between.
    fn write_body_json(&self, out: &mut impl FnMut(&str)) {
        let mut digits = [0u8; 20];
        out(r#"{"label_version":"#);
        out(decimal(self.label_version, &mut digits));
        out(r#","order_id":"#);
        out(decimal(self.order_id, &mut digits));
        out(r#","parcel_no":"#);
        out(decimal(self.parcel_no, &mut digits));
        out(r#","service":""#);
        out(self.service.name());
        out(r#"","weight_g":"#);
        out(weight_json(
            self.weight_g,
            &mut digits,
            &mut ryu_js::Buffer::new(),
        ));
        out("}");
    }

    /// The seed's derived key: `label:918273:1:v1`.
    pub fn derived_key(&self) -> String {
        format!(
            "label:{}:{}:v{}",
            self.order_id, self.parcel_no, self.label_version
        )
    }
}

/// The weight as RFC 8785 writes a number (ECMAScript's shortest round-trip form). A whole
/// number of grams below 2^53, the common case, is its integer's digits: every integer that
/// small is a double of its own, so no shorter digit string reads back as it (and `-0` is
/// `0`). Other values go through `ryu_js` (626 instructions per create under callgrind,
/// which this path saves).
fn weight_json<'a>(
    weight_g: f64,
    digits: &'a mut [u8; 20],
    ryu: &'a mut ryu_js::Buffer,
) -> &'a str {
    const EXACT: f64 = 9_007_199_254_740_992.0; // 2^53
    if weight_g.fract() == 0.0 && weight_g.abs() < EXACT {
        decimal(weight_g as i64, digits)
    } else {
        ryu.format(weight_g)
    }
}

/// `n` in decimal, as `format!("{n}")` writes it, in `buf`.
fn decimal(n: i64, buf: &mut [u8; 20]) -> &str {
    let mut i = buf.len();
    let mut m = n.unsigned_abs();
    loop {
        i -= 1;
        buf[i] = b'0' + (m % 10) as u8;
        m /= 10;
        if m == 0 {
            break;
        }
    }
    if n < 0 {
        i -= 1;
        buf[i] = b'-';
    }
    // Digits and a sign are ASCII.
    std::str::from_utf8(&buf[i..]).unwrap_or_default()
}

/// A key refused before anything is touched; each has its own code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyProblem {
    Missing,
    Empty,
    TooLong,
    ControlCharacters,
}

impl KeyProblem {
    pub fn code(self) -> &'static str {
        match self {
            KeyProblem::Missing => "idempotency_key_missing",
            KeyProblem::Empty => "idempotency_key_empty",
            KeyProblem::TooLong => "idempotency_key_too_long",
            KeyProblem::ControlCharacters => "idempotency_key_invalid_characters",
        }
    }

    pub fn message(self) -> String {
        match self {
            KeyProblem::Missing => "CreateLabel requires an Idempotency-Key".to_string(),
            KeyProblem::Empty => "the Idempotency-Key is empty".to_string(),
            KeyProblem::TooLong => {
                format!("the Idempotency-Key is longer than {MAX_KEY_BYTES} bytes")
            }
            KeyProblem::ControlCharacters => {
                "the Idempotency-Key holds control characters".to_string()
            }
        }
    }
}

pub fn check_key(key: Option<&str>) -> Result<&str, KeyProblem> {
    let key = key.ok_or(KeyProblem::Missing)?;
    if key.is_empty() {
        Err(KeyProblem::Empty)
    } else if key.len() > MAX_KEY_BYTES {
        Err(KeyProblem::TooLong)
    } else if key.chars().any(char::is_control) {
        Err(KeyProblem::ControlCharacters)
    } else {
        Ok(key)
    }
}

/// A body that fails validation, naming the field.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invalid {
    pub field: String,
    pub message: String,
}

fn invalid(field: &str, message: &str) -> Invalid {
    Invalid {
        field: field.to_string(),
        message: message.to_string(),
    }
}

/// The fields of a CreateLabel body. Any other field is refused, so that two bodies the service
/// treats alike are exactly the bodies that hash alike.
pub const FIELDS: [&str; 5] = [
    "label_version",
    "order_id",
    "parcel_no",
    "service",
    "weight_g",
];

/// The largest integer an IEEE-754 double holds exactly (2^53 - 1, I-JSON's limit). RFC 8785
/// writes every number as a double, so a larger `parcel_no` would share its canonical form, and
/// its hash, with its neighbour.
pub const MAX_EXACT_INTEGER: i64 = 9_007_199_254_740_991;

/// The seed's order ids have at most 9 digits.
pub const MAX_ORDER_ID: i64 = 999_999_999;

/// Parses JSON like `serde_json::from_str`, but refuses an object that names a key twice.
/// serde_json keeps the last value silently, which let `{"weight_g":9999,"weight_g":1450}`
/// pass as the 1450 g request; the first repeated key is reported by its path (`weight_g`,
/// `a.b`, `a[2].b`).
pub fn parse_strict(body: &str) -> Result<Value, Invalid> {
    let duplicate = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_str(body);
    let parsed = Strict {
        duplicate: &duplicate,
        path: "",
    }
    .deserialize(&mut de)
    .and_then(|v| de.end().map(|()| v));
    match (parsed, duplicate.into_inner()) {
        (_, Some(path)) => Err(Invalid {
            field: path,
            message: "appears twice; name each field once".to_string(),
        }),
        (Ok(v), None) => Ok(v),
        (Err(e), None) => Err(invalid("body", &format!("not JSON: {e}"))),
    }
}

/// A serde seed that builds a [`Value`] and records the path of the first repeated object key.
struct Strict<'a> {
    duplicate: &'a RefCell<Option<String>>,
    path: &'a str,
}

impl Strict<'_> {
    fn child<'b>(&'b self, path: &'b str) -> Strict<'b> {
        Strict {
            duplicate: self.duplicate,
            path,
        }
    }
}

impl<'de> DeserializeSeed<'de> for Strict<'_> {
    type Value = Value;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Value, D::Error> {
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Strict<'_> {
    type Value = Value;

    fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
        f.write_str("a JSON value")
    }

    fn visit_bool<E>(self, b: bool) -> Result<Value, E> {
        Ok(Value::Bool(b))
    }

    fn visit_i64<E>(self, n: i64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_u64<E>(self, n: u64) -> Result<Value, E> {
        Ok(Value::Number(n.into()))
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<Value, E> {
        serde_json::Number::from_f64(n)
            .map(Value::Number)
            .ok_or_else(|| E::custom("a number out of range"))
    }

    fn visit_str<E>(self, s: &str) -> Result<Value, E> {
        Ok(Value::String(s.to_string()))
    }

    fn visit_string<E>(self, s: String) -> Result<Value, E> {
        Ok(Value::String(s))
    }

    fn visit_unit<E>(self) -> Result<Value, E> {
        Ok(Value::Null)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Value, A::Error> {
        let mut items = Vec::new();
        loop {
            let path = format!("{}[{}]", self.path, items.len());
            match seq.next_element_seed(self.child(&path))? {
                Some(v) => items.push(v),
                None => return Ok(Value::Array(items)),
            }
        }
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Value, A::Error> {
        let mut obj = serde_json::Map::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if self.path.is_empty() {
                key.clone()
            } else {
                format!("{}.{key}", self.path)
            };
            if obj.contains_key(&key) {
                *self.duplicate.borrow_mut() = Some(path);
                return Err(de::Error::custom(format!("duplicate key {key:?}")));
            }
            let v = map.next_value_seed(self.child(&path))?;
            obj.insert(key, v);
        }
        Ok(Value::Object(obj))
    }
}

/// A JSON number as an integer in `1..=max`, accepting any spelling of it (`2`, `2.0`, `2e0`):
/// RFC 8785 numbers are doubles, so these are one number and must validate alike.
fn positive_integer(obj: &Map<String, Value>, field: &str, max: i64) -> Result<i64, Invalid> {
    let Some(x) = obj.get(field) else {
        return Err(invalid(field, "is required"));
    };
    let n = match (x.as_i64(), x.as_f64()) {
        (Some(n), _) => n as f64,
        (None, Some(f)) => f,
        (None, None) => return Err(invalid(field, "must be an integer")),
    };
    if n.fract() != 0.0 {
        Err(invalid(field, "must be an integer"))
    } else if n <= 0.0 {
        Err(invalid(field, "must be a positive integer"))
    } else if n > max as f64 {
        Err(invalid(field, &format!("must be at most {max}")))
    } else {
        Ok(x.as_i64().unwrap_or(n as i64))
    }
}

/// The body as the seed's clients send it: an object of the five fields, each once, the
/// integers as JSON integers and the service as a plain string. Parsed straight into its fields,
/// with no `Value`, map or string built, for the common case only: any body this does not take
/// (another shape, a duplicate or unknown field, `2.0` for an integer, an escaped service, a
/// value out of range) goes through [`validate`]'s general path, which names what is wrong.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Plain<'a> {
    order_id: i64,
    parcel_no: i64,
    #[serde(default = "first_version")]
    label_version: i64,
    weight_g: f64,
    service: &'a str,
}

fn first_version() -> i64 {
    1
}

/// [`validate`]'s answer for a body of the common shape (see [`Plain`]), or `None` to take the
/// general path. It accepts only what the general path accepts, with the same values:
/// `plain_and_general_validation_agree` holds the two together.
fn validate_plain(body: &str) -> Option<LabelRequest> {
    // serde's derived struct would also take an array of the five values; the general path
    // refuses anything but an object.
    if !body
        .trim_start_matches([' ', '\t', '\n', '\r'])
        .starts_with('{')
    {
        return None;
    }
    let p: Plain<'_> = serde_json::from_str(body).ok()?;
    let in_range = |n: i64, max: i64| (1..=max).contains(&n);
    let valid = in_range(p.order_id, MAX_ORDER_ID)
        && in_range(p.parcel_no, MAX_EXACT_INTEGER)
        && in_range(p.label_version, MAX_EXACT_INTEGER)
        && p.weight_g > 0.0
        && p.weight_g.is_finite();
    if !valid {
        return None;
    }
    Some(LabelRequest {
        order_id: p.order_id,
        parcel_no: p.parcel_no,
        label_version: p.label_version,
        weight_g: p.weight_g,
        service: Service::parse(p.service)?,
    })
}

pub fn validate(body: &str) -> Result<LabelRequest, Invalid> {
    match validate_plain(body) {
        Some(label) => Ok(label),
        None => validate_general(body),
    }
}

/// Validation of any body, through a strict parse into a `Value`: names the field at fault.
fn validate_general(body: &str) -> Result<LabelRequest, Invalid> {
    let v = parse_strict(body)?;
    let obj = v
        .as_object()
        .ok_or_else(|| invalid("body", "must be a JSON object"))?;
    if let Some(unknown) = obj.keys().find(|k| !FIELDS.contains(&k.as_str())) {
        return Err(invalid(
            unknown,
            &format!("is not a field of CreateLabel ({})", FIELDS.join(", ")),
        ));
    }
    let order_id = positive_integer(obj, "order_id", MAX_ORDER_ID)?;
    let parcel_no = positive_integer(obj, "parcel_no", MAX_EXACT_INTEGER)?;
    // A reprint is a new intent with a new version; an absent version is the first label.
    let label_version = if obj.contains_key("label_version") {
        positive_integer(obj, "label_version", MAX_EXACT_INTEGER)?
    } else {
        1
    };
    let weight_g = match obj.get("weight_g") {
        None => return Err(invalid("weight_g", "is required")),
        Some(x) => match x.as_f64() {
            Some(w) if w > 0.0 && w.is_finite() => w,
            Some(_) => return Err(invalid("weight_g", "must be a positive number")),
            None => return Err(invalid("weight_g", "must be a number")),
        },
    };
    let service = match obj.get("service") {
        None => return Err(invalid("service", "is required")),
        Some(Value::String(s)) => Service::parse(s)
            .ok_or_else(|| invalid("service", "must be one of ground, express, overnight"))?,
        Some(_) => return Err(invalid("service", "must be a string")),
    };
    Ok(LabelRequest {
        order_id,
        parcel_no,
        label_version,
        weight_g,
        service,
    })
}

/// RFC 8785 (JSON Canonicalization Scheme): keys sorted by UTF-16 code units, no insignificant
/// whitespace, numbers as ECMAScript writes doubles (`1450.0` and `1.45e3` are `1450`).
pub fn canonical_json(v: &Value) -> String {
    // A `Value` cannot hold NaN or an infinity, the only numbers RFC 8785 cannot write, and the
    // writer is a String: serialisation cannot fail.
    serde_json_canonicalizer::to_string(v).expect("RFC 8785 writes every serde_json::Value")
}

/// SHA-256 of method + path + the canonical form of the *validated* request, and the validation
/// result, so a caller validates once.
///
/// The canonical form is the RFC 8785 text of all five fields as validation understood them,
/// defaults filled in: bodies that differ in key order, spacing, the spelling of a number or an
/// omitted default are one request and hash alike; bodies that validate differently never do.
/// A body that fails validation hashes as its raw text, so it can still be claimed and then
/// refused with a 400, as the seed's state table has it (its raw text can never equal a valid
/// body's canonical form, since that form validates).
pub fn hash_and_validate(
    method: &str,
    path: &str,
    body: &str,
) -> ([u8; 32], Result<LabelRequest, Invalid>) {
    let validated = validate(body);
    let mut h = Sha256::new();
    h.update(method.as_bytes());
    h.update(b"\n");
    h.update(path.as_bytes());
    h.update(b"\n");
    match &validated {
        Ok(label) => label.write_body_json(&mut |part| h.update(part.as_bytes())),
        Err(_) => h.update(body.as_bytes()),
    }
    (h.finalize().into(), validated)
}

/// A request's hash and validation, computed once. Pure CPU with no store, so a server
/// computes it on the thread that read the request ([`super::Engine::begin_digested`]): the
/// one SQLite writer that serialises every transaction then spends none of its time on it.
#[derive(Debug, Clone)]
pub struct RequestDigest {
    pub(super) hash: [u8; 32],
    pub(super) validated: Result<LabelRequest, Invalid>,
}

impl RequestDigest {
    pub fn of(req: &Request) -> Self {
        Self::of_parts(&req.method, &req.path, &req.body)
    }

    /// The digest of a request with this method, path and body (the only parts it covers).
    pub fn of_parts(method: &str, path: &str, body: &str) -> Self {
        let (hash, validated) = hash_and_validate(method, path, body);
        Self { hash, validated }
    }
}

/// [`hash_and_validate`]'s hash alone.
pub fn request_hash(method: &str, path: &str, body: &str) -> [u8; 32] {
    hash_and_validate(method, path, body).0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_order_and_spacing_do_not_change_the_hash() {
        let a = r#"{"order_id":918273,"parcel_no":1,"weight_g":1450,"service":"ground"}"#;
        let b = r#"{ "service" : "ground", "weight_g": 1450.0,
                     "parcel_no": 1, "order_id": 918273 }"#;
        assert_eq!(
            request_hash("POST", "/labels", a),
            request_hash("POST", "/labels", b)
        );
        let c = r#"{"order_id":918273,"parcel_no":1,"weight_g":1500,"service":"ground"}"#;
        assert_ne!(
            request_hash("POST", "/labels", a),
            request_hash("POST", "/labels", c)
        );
        assert_ne!(
            request_hash("POST", "/labels", a),
            request_hash("PUT", "/labels", a)
        );
    }

    #[test]
    fn body_json_is_rfc_8785() {
        let weights = [
            1450.0,
            1450.5,
            0.1,
            1e-7,
            123456789.125,
            1e21,
            9007199254740991.0,
            5e-324,
            1.7976931348623157e308,
            0.0,
            -0.0,
            -1450.0,
            123_456_789_012_345.0,
            9007199254740992.0,
            -9007199254740991.0,
            1e20,
            1e-300,
        ];
        for (i, weight_g) in weights.into_iter().enumerate() {
            for service in [Service::Ground, Service::Express, Service::Overnight] {
                let r = LabelRequest {
                    order_id: 918273 + i as i64,
                    parcel_no: 9007199254740991,
                    label_version: -3,
                    weight_g,
                    service,
                };
                let v = serde_json::json!({
                    "order_id": r.order_id,
                    "parcel_no": r.parcel_no,
                    "label_version": r.label_version,
                    "weight_g": r.weight_g,
                    "service": serde_json::to_value(service).unwrap(),
                });
                assert_eq!(r.body_json(), canonical_json(&v), "{r:?}");
            }
        }
    }

    #[test]
    fn decimal_writes_what_format_writes() {
        let mut buf = [0u8; 20];
        for n in [
            0,
            1,
            -1,
            9,
            10,
            918_273,
            -3,
            i64::MAX,
            i64::MIN,
            9_007_199_254_740_991,
        ] {
            assert_eq!(decimal(n, &mut buf), n.to_string());
        }
    }

    #[test]
    fn keys_are_checked_before_anything_else() {
        assert_eq!(check_key(None), Err(KeyProblem::Missing));
        assert_eq!(check_key(Some("")), Err(KeyProblem::Empty));
        assert_eq!(check_key(Some(&"k".repeat(256))), Err(KeyProblem::TooLong));
        assert_eq!(check_key(Some("a\nb")), Err(KeyProblem::ControlCharacters));
        assert_eq!(
            check_key(Some(&"k".repeat(255))),
            Ok("k".repeat(255).as_str())
        );
    }

    #[test]
    fn validation_names_the_field() {
        let cases = [
            (
                r#"{"parcel_no":1,"weight_g":1,"service":"ground"}"#,
                "order_id",
            ),
            (
                r#"{"order_id":1,"parcel_no":1,"weight_g":0,"service":"ground"}"#,
                "weight_g",
            ),
            (
                r#"{"order_id":1,"parcel_no":1,"weight_g":-3,"service":"ground"}"#,
                "weight_g",
            ),
            (
                r#"{"order_id":1,"parcel_no":1,"weight_g":"9","service":"ground"}"#,
                "weight_g",
            ),
            (
                r#"{"order_id":1,"parcel_no":1,"weight_g":9,"service":"teleport"}"#,
                "service",
            ),
            (
                r#"{"order_id":"1","parcel_no":1,"weight_g":9,"service":"ground"}"#,
                "order_id",
            ),
            (r#"[1,2]"#, "body"),
            (r#"{not json"#, "body"),
        ];
        for (body, field) in cases {
            assert_eq!(validate(body).unwrap_err().field, field, "{body}");
        }
        let ok =
            validate(r#"{"order_id":918273,"parcel_no":1,"weight_g":1450,"service":"ground"}"#)
                .unwrap();
        assert_eq!(ok.label_version, 1);
        assert_eq!(ok.derived_key(), "label:918273:1:v1");
    }

    #[test]
    fn the_hash_covers_the_rfc_8785_form_of_the_validated_request() {
        let body = r#"{ "weight_g": 1.45e3, "service": "ground", "parcel_no": 1.0,
                        "order_id": 918273 }"#;
        let label = validate(body).unwrap();
        assert_eq!(
            label.body_json(),
            r#"{"label_version":1,"order_id":918273,"parcel_no":1,"service":"ground","weight_g":1450}"#
        );
        let mut h = Sha256::new();
        h.update(b"POST\n/labels\n");
        h.update(label.body_json().as_bytes());
        let expected: [u8; 32] = h.finalize().into();
        assert_eq!(request_hash("POST", "/labels", body), expected);
        // RFC 8785's own number examples (its section 3.2.2.3).
        let v: Value = serde_json::from_str("[1e21, 1e-7, 0.000001, -0, 4.50, 1e16]").unwrap();
        assert_eq!(
            canonical_json(&v),
            "[1e+21,1e-7,0.000001,0,4.5,10000000000000000]"
        );
    }

    /// The plain path takes a body only when the general path takes it too, with the same
    /// values; every other body goes to the general path and gets its error.
    #[test]
    fn plain_and_general_validation_agree() {
        let bodies = [
            r#"{"order_id":918273,"parcel_no":1,"weight_g":1450,"service":"ground"}"#,
            r#"{"label_version":2,"order_id":1,"parcel_no":9007199254740991,"service":"express","weight_g":0.5}"#,
            r#" { "service" : "overnight", "weight_g": 1.45e3, "parcel_no": 3, "order_id": 999999999 } "#,
            r#"{"order_id":918273,"parcel_no":1.0,"weight_g":1450,"service":"ground"}"#,
            r#"{"order_id":918273,"parcel_no":2e0,"weight_g":1450,"service":"ground"}"#,
            r#"{"order_id":918273,"parcel_no":1,"weight_g":1450,"service":"gr\u006fund"}"#,
            r#"{"order\u005fid":918273,"parcel_no":1,"weight_g":1450,"service":"ground"}"#,
            r#"{"order_id":918273,"order_id":918274,"parcel_no":1,"weight_g":1450,"service":"ground"}"#,
            r#"{"order_id":918273,"parcel_no":1,"weight_g":1450,"service":"ground","extra":1}"#,
            r#"[918273,1,1,1450,"ground"]"#,
            r#"{"order_id":1000000000,"parcel_no":1,"weight_g":1450,"service":"ground"}"#,
            r#"{"order_id":0,"parcel_no":1,"weight_g":1450,"service":"ground"}"#,
            r#"{"order_id":-3,"parcel_no":1,"weight_g":1450,"service":"ground"}"#,
            r#"{"order_id":1,"parcel_no":9007199254740992,"weight_g":1450,"service":"ground"}"#,
            r#"{"order_id":1,"parcel_no":18446744073709551615,"weight_g":1450,"service":"ground"}"#,
            r#"{"order_id":1,"parcel_no":1,"label_version":null,"weight_g":1450,"service":"ground"}"#,
            r#"{"order_id":1,"parcel_no":1,"weight_g":-0,"service":"ground"}"#,
            r#"{"order_id":1,"parcel_no":1,"weight_g":1e400,"service":"ground"}"#,
            r#"{"order_id":1,"parcel_no":1,"weight_g":"9","service":"ground"}"#,
            r#"{"order_id":1,"parcel_no":1,"weight_g":9,"service":"teleport"}"#,
            r#"{"order_id":1,"parcel_no":1,"weight_g":9,"service":"ground"} x"#,
            r#"{"order_id":1,"parcel_no":1,"weight_g":9}"#,
            r#"{}"#,
            r#""#,
        ];
        let mut plain = 0;
        for body in bodies {
            let general = validate_general(body);
            if let Some(label) = validate_plain(body) {
                plain += 1;
                assert_eq!(general, Ok(label), "{body}");
            }
            assert_eq!(validate(body), general, "{body}");
        }
        // The first three, and the one whose field name is escaped (`order\u005fid` is
        // `order_id` to both paths).
        assert_eq!(plain, 4, "the plain path takes the plain bodies");
    }

    #[test]
    fn duplicate_keys_are_named_by_their_path() {
        for (body, field) in [
            (r#"{"a":1,"a":2}"#, "a"),
            (r#"{"a":{"b":1,"b":2}}"#, "a.b"),
            (r#"{"a":[{},{"c":1,"c":1}]}"#, "a[1].c"),
        ] {
            assert_eq!(parse_strict(body).unwrap_err().field, field, "{body}");
        }
        assert_eq!(parse_strict(r#"{"a":1} x"#).unwrap_err().field, "body");
        assert!(parse_strict(r#"{"a":{"a":1},"b":[{"a":1},{"a":1}]}"#).is_ok());
    }
}
