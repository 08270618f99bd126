//! What arrives at the label service, and the checks made before and after a key is claimed.

use crate::carrier::Service;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The seed's limit, as Stripe's: keys up to 255 characters. Longer keys are refused rather than
/// truncated, since two keys that share 255 bytes would otherwise collide.
pub const MAX_KEY_BYTES: usize = 255;

/// A CreateLabel call as the server sees it. The body is raw text: canonicalisation happens
/// here, so two bodies that differ only in key order or spacing hash alike.
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
    /// The body the seed's client sends, as canonical JSON.
    pub fn body_json(&self) -> String {
        let service = serde_json::to_value(self.service).unwrap_or(Value::Null);
        let v = serde_json::json!({
            "order_id": self.order_id,
            "parcel_no": self.parcel_no,
            "label_version": self.label_version,
            "weight_g": self.weight_g,
            "service": service,
        });
        canonical_json(&v)
    }

    /// The seed's derived key: `label:918273:1:v1`.
    pub fn derived_key(&self) -> String {
        format!(
            "label:{}:{}:v{}",
            self.order_id, self.parcel_no, self.label_version
        )
    }
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

pub fn validate(body: &str) -> Result<LabelRequest, Invalid> {
    let v: Value =
        serde_json::from_str(body).map_err(|e| invalid("body", &format!("not JSON: {e}")))?;
    let obj = v
        .as_object()
        .ok_or_else(|| invalid("body", "must be a JSON object"))?;
    let positive_int = |field: &str| -> Result<i64, Invalid> {
        match obj.get(field) {
            None => Err(invalid(field, "is required")),
            Some(x) => match x.as_i64() {
                Some(n) if n > 0 => Ok(n),
                Some(_) => Err(invalid(field, "must be a positive integer")),
                None => Err(invalid(field, "must be an integer")),
            },
        }
    };
    let order_id = positive_int("order_id")?;
    let parcel_no = positive_int("parcel_no")?;
    // A reprint is a new intent with a new version; an absent version is the first label.
    let label_version = if obj.contains_key("label_version") {
        positive_int("label_version")?
    } else {
        1
    };
    if order_id > 999_999_999 {
        return Err(invalid("order_id", "must have at most 9 digits"));
    }
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

/// Canonical JSON in the spirit of RFC 8785: object keys sorted, no insignificant whitespace, and
/// integral numbers written without a fraction (`1450.0` and `1450` are the same weight).
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                out.push_str(&Value::String(k.clone()).to_string());
                out.push(':');
                write_canonical(&map[k], out);
            }
            out.push('}');
        }
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Number(n) => match n.as_f64() {
            Some(f) if n.is_f64() && f.fract() == 0.0 && f.abs() < 9.0e15 => {
                out.push_str(&(f as i64).to_string())
            }
            _ => out.push_str(&n.to_string()),
        },
        other => out.push_str(&other.to_string()),
    }
}

/// SHA-256 of method + path + canonical body. A body that is not JSON hashes as its raw text, so
/// it can still be claimed and then refused as a validation failure, as the seed's state table has it.
pub fn request_hash(method: &str, path: &str, body: &str) -> [u8; 32] {
    let canonical = serde_json::from_str::<Value>(body)
        .map(|v| canonical_json(&v))
        .unwrap_or_else(|_| body.to_string());
    let mut h = Sha256::new();
    h.update(method.as_bytes());
    h.update(b"\n");
    h.update(path.as_bytes());
    h.update(b"\n");
    h.update(canonical.as_bytes());
    h.finalize().into()
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
}
