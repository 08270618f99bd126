//! Error answers as RFC 9457 problem details (`application/problem+json`), one table of them.
//!
//! Every problem's `type` is `/problems/CODE` on the server itself, and `GET /problems/CODE`
//! serves what it means and what to do: the IETF Idempotency-Key draft asks for a link to
//! documentation in each error, and a link that resolves on the very server that answered can
//! never point at documentation of another version.

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::{Map, Value};

/// One kind of problem: its code (the `type`'s last segment, and the engine's error code where
/// the engine answered), status, title and what the client should do.
pub struct Kind {
    pub code: &'static str,
    pub status: u16,
    pub title: &'static str,
    pub advice: &'static str,
}

/// Every problem the server answers with. The first five codes after `unauthenticated` are the
/// seed's status table and the engine's own key checks.
pub const KINDS: &[Kind] = &[
    Kind {
        code: "unauthenticated",
        status: 401,
        title: "No known caller",
        advice: "Send `Authorization: Bearer TOKEN` with a token the server's callers file lists; the caller it names scopes your idempotency keys.",
    },
    Kind {
        code: "idempotency_key_missing",
        status: 400,
        title: "Idempotency-Key required",
        advice: "CreateLabel requires an `Idempotency-Key` header: one key per intent (e.g. \"label:918273:1:v1\"), the same on every retry. Fix the client.",
    },
    Kind {
        code: "request_in_progress",
        status: 409,
        title: "A request with this key is in progress",
        advice: "An attempt with this key holds the lease. Wait for Retry-After (or the body's retry_after_ms) and retry with the same key and body.",
    },
    Kind {
        code: "idempotency_key_reused",
        status: 422,
        title: "Idempotency-Key reused with another request",
        advice: "This key was used with a different method, path or body, here or (within the carrier's own key window, after this service purged it) at the carrier. A client bug: never retry it blindly; a new intent needs a new key.",
    },
    Kind {
        code: "idempotency_key_multiple",
        status: 400,
        title: "More than one Idempotency-Key",
        advice: "Send exactly one `Idempotency-Key` header: with two, the server cannot tell which intent the request is.",
    },
    Kind {
        code: "idempotency_key_malformed",
        status: 400,
        title: "Idempotency-Key is not a structured-field string",
        advice: "Send the key as an RFC 8941 string (`Idempotency-Key: \"abc\"`), or as a bare key of visible ASCII without quotes, commas, backslashes or spaces (`Idempotency-Key: abc`); both name the key abc.",
    },
    Kind {
        code: "idempotency_key_empty",
        status: 400,
        title: "Idempotency-Key is empty",
        advice: "Send a non-empty key.",
    },
    Kind {
        code: "idempotency_key_too_long",
        status: 400,
        title: "Idempotency-Key too long",
        advice: "Keys are at most 255 bytes, as Stripe's; a longer key is refused, never truncated.",
    },
    Kind {
        code: "idempotency_key_invalid_characters",
        status: 400,
        title: "Idempotency-Key holds control characters",
        advice: "Use printable characters only.",
    },
    Kind {
        code: "validation_failed",
        status: 400,
        title: "The CreateLabel body is invalid",
        advice: "The body must be a JSON object with order_id, parcel_no, weight_g, service and optionally label_version; `field` names what is wrong and `detail` says where. The key was released: fix the body and send it again with the same key.",
    },
    Kind {
        code: "carrier_timeout",
        status: 503,
        title: "The carrier did not answer in time",
        advice: "The outcome is unknown and was not saved; retry with the same key: the carrier's derived key makes the retry safe.",
    },
    Kind {
        code: "carrier_refused",
        status: 502,
        title: "The carrier refused the label",
        advice: "A final outcome, saved under the key and replayed to every retry; a new attempt needs a new key.",
    },
    Kind {
        code: "body_too_large",
        status: 413,
        title: "Request body too large",
        advice: "CreateLabel bodies are small JSON objects; the server's limit is set by --max-body.",
    },
    Kind {
        code: "body_timeout",
        status: 408,
        title: "The request body did not arrive in time",
        advice: "Send the whole body within the server's --body-timeout.",
    },
    Kind {
        code: "store_unavailable",
        status: 503,
        title: "The key store failed",
        advice: "Nothing was answered from it, and no label was confirmed; retry with the same key after Retry-After.",
    },
    Kind {
        code: "overloaded",
        status: 503,
        title: "The server's queue is full",
        advice: "Retry with the same key after Retry-After.",
    },
    Kind {
        code: "shutting_down",
        status: 503,
        title: "The server is shutting down",
        advice: "Retry with the same key, against another instance or after the restart. An attempt cut off at the end of the server's drain keeps its lease until it expires (Retry-After): the retry then takes it over, and the carrier's derived key makes that safe.",
    },
    Kind {
        code: "not_found",
        status: 404,
        title: "No such resource",
        advice: "The server answers POST /labels (and its alias POST /v1/labels), GET /metrics, GET /healthz and GET /problems/CODE.",
    },
    Kind {
        code: "method_not_allowed",
        status: 405,
        title: "Method not allowed",
        advice: "CreateLabel is POST.",
    },
    Kind {
        code: "internal_error",
        status: 500,
        title: "The server failed",
        advice: "A bug: the request's outcome is whatever the key says now; retry with the same key.",
    },
];

/// The kind of `code`; an unknown code is the server's own bug, answered as one.
pub fn kind(code: &str) -> &'static Kind {
    KINDS
        .iter()
        .find(|k| k.code == code)
        .or_else(|| KINDS.iter().find(|k| k.code == "internal_error"))
        .expect("internal_error is in KINDS")
}

/// An error answer on its way out.
#[derive(Debug, Clone)]
pub struct Problem {
    pub code: &'static str,
    pub status: u16,
    pub detail: String,
    /// Extension members (`field`, `retry_after_ms`, …).
    pub extra: Map<String, Value>,
    /// Wall-clock milliseconds until a retry can succeed: `Retry-After` and `retry_after_ms`.
    pub retry_after_ms: Option<u64>,
}

impl Problem {
    pub fn new(code: &str, detail: impl Into<String>) -> Self {
        let k = kind(code);
        Problem {
            code: k.code,
            status: k.status,
            detail: detail.into(),
            extra: Map::new(),
            retry_after_ms: None,
        }
    }

    pub fn with(mut self, name: &str, value: impl Into<Value>) -> Self {
        self.extra.insert(name.to_string(), value.into());
        self
    }

    pub fn retry_after_ms(mut self, ms: u64) -> Self {
        self.retry_after_ms = Some(ms);
        self
    }

    /// The problem's JSON text (RFC 9457 members first, then the extensions).
    pub fn body(&self) -> String {
        let k = kind(self.code);
        let mut o = Map::new();
        o.insert("type".into(), format!("/problems/{}", k.code).into());
        o.insert("title".into(), k.title.into());
        o.insert("status".into(), self.status.into());
        o.insert("detail".into(), self.detail.clone().into());
        o.insert("code".into(), k.code.into());
        if let Some(ms) = self.retry_after_ms {
            o.insert("retry_after_ms".into(), ms.into());
        }
        for (name, value) in &self.extra {
            o.entry(name.clone()).or_insert_with(|| value.clone());
        }
        Value::Object(o).to_string()
    }
}

/// `Retry-After` in whole seconds (HTTP's delta-seconds), rounded up so a client that obeys it
/// never comes back early; at least 1.
pub fn retry_after_header(ms: u64) -> HeaderValue {
    HeaderValue::from(ms.div_ceil(1000).max(1))
}

impl IntoResponse for Problem {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut r = (status, self.body()).into_response();
        let h = r.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/problem+json"),
        );
        if let Some(ms) = self.retry_after_ms {
            h.insert(header::RETRY_AFTER, retry_after_header(ms));
        }
        if self.code == "unauthenticated" {
            h.insert(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Bearer realm=\"idemcalc\""),
            );
        }
        r
    }
}

/// `GET /problems/CODE`: the documentation a problem's `type` links to.
pub fn describe(code: &str) -> Option<String> {
    let k = KINDS.iter().find(|k| k.code == code)?;
    Some(format!(
        "{code}: {} (HTTP {})\n\n{}\n",
        k.title, k.status, k.advice
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_unique_and_bodies_carry_the_rfc_9457_members() {
        for (i, k) in KINDS.iter().enumerate() {
            assert!(
                KINDS[i + 1..].iter().all(|o| o.code != k.code),
                "{}",
                k.code
            );
            let body: Value = serde_json::from_str(&Problem::new(k.code, "d").body()).unwrap();
            assert_eq!(body["type"], format!("/problems/{}", k.code));
            assert_eq!(body["status"], k.status);
            assert_eq!(body["title"], k.title);
            assert_eq!(body["detail"], "d");
            assert!(describe(k.code).is_some());
        }
        assert_eq!(kind("no_such_code").code, "internal_error");
        assert_eq!(retry_after_header(1), HeaderValue::from(1));
        assert_eq!(retry_after_header(1001), HeaderValue::from(2));
        assert_eq!(retry_after_header(0), HeaderValue::from(1));
    }
}
