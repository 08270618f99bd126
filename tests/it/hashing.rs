//! Regression tests for the request hash (issue 15, item 2): the hash covers the validated
//! request in RFC 8785 form, so spellings of one request replay and a body the service would
//! read two ways is refused. Each runs on a real SQLite file and on PostgreSQL.

use crate::common;

use common::{BODY, Backend, Harness, KEY};
use idemcalc::engine::{Outcome, Request, Response};

fn send(h: &mut Harness, key: &str, body: &str) -> Response {
    h.engine
        .handle(&Request::create_label("fulfilment", Some(key), body))
        .unwrap()
}

fn field_of(r: &Response) -> String {
    let v: serde_json::Value = serde_json::from_str(&r.body).unwrap();
    v["field"].as_str().unwrap_or_default().to_string()
}

/// `{"weight_g":9999,"weight_g":1450}` was read as 1450 g (serde_json keeps the last value), so
/// it replayed the 1450 g label. Now it is a 400 naming the field, and leaves no record.
fn duplicate_keys_are_400_naming_the_field(b: Backend) {
    let mut h = Harness::new(b);
    let dup =
        r#"{"order_id":918273,"parcel_no":1,"weight_g":9999,"weight_g":1450,"service":"ground"}"#;
    let r = send(&mut h, "fresh-key", dup);
    assert_eq!(
        (r.status, r.code.as_deref()),
        (400, Some("validation_failed")),
        "{}",
        r.body
    );
    assert_eq!(field_of(&r), "weight_g", "{}", r.body);
    assert_eq!(h.engine.store().count_keys().unwrap(), 0);

    // Against a completed key it is not the saved request: never a replay of the 1450 g label.
    let first = send(&mut h, KEY, BODY);
    assert_eq!(first.status, 201);
    let again = send(&mut h, KEY, dup);
    assert!(!again.replayed, "{again:?}");
    assert_eq!(again.outcome, Outcome::KeyReused);

    // A repeated key anywhere in the body is named by its path.
    let nested =
        r#"{"order_id":1,"parcel_no":1,"weight_g":1,"service":"ground","x":{"a":1,"a":2}}"#;
    let r = send(&mut h, "nested-key", nested);
    assert_eq!(
        (r.status, field_of(&r).as_str()),
        (400, "x.a"),
        "{}",
        r.body
    );
    assert_eq!(h.carrier.stats().purchases, 1);
    h.assert_invariants();
}

/// `1e16` and `10000000000000000` are one number (RFC 8785 writes both as the latter), but the
/// raw-text hash gave 422 to the second.
fn equal_numbers_hash_alike(b: Backend) {
    let mut h = Harness::new(b);
    let body = |w: &str| {
        format!(r#"{{"order_id":918273,"parcel_no":1,"weight_g":{w},"service":"ground"}}"#)
    };
    let first = send(&mut h, KEY, &body("1e16"));
    assert_eq!(first.status, 201, "{}", first.body);
    for same in ["10000000000000000", "1E+16", "10000000000000000.0", "1e16"] {
        let r = send(&mut h, KEY, &body(same));
        assert!(r.replayed && r.status == 201, "{same}: {r:?}");
        assert_eq!(r.body, first.body);
    }
    // Integer fields too: 918273 spelled as a double is the same order.
    let r = send(
        &mut h,
        KEY,
        r#"{"order_id":9.18273e5,"parcel_no":1.0,"weight_g":1e16,"service":"ground"}"#,
    );
    assert!(r.replayed, "{r:?}");
    // A different number is a different request.
    let r = send(&mut h, KEY, &body("10000000000000002"));
    assert_eq!(r.outcome, Outcome::KeyReused, "{r:?}");
    assert_eq!(h.carrier.stats().purchases, 1);
    h.assert_invariants();
}

/// A body with `"label_version":1` and one that omits it validate to the same request, and now
/// hash alike; `"label_version":2` is a reprint, a new intent.
fn explicit_default_hashes_like_omitted(b: Backend) {
    let mut h = Harness::new(b);
    let explicit = BODY;
    let omitted = r#"{"order_id":918273,"parcel_no":1,"weight_g":1450,"service":"ground"}"#;
    let first = send(&mut h, KEY, omitted);
    assert_eq!(first.status, 201);
    let r = send(&mut h, KEY, explicit);
    assert!(r.replayed && r.body == first.body, "{r:?}");
    let reprint =
        r#"{"order_id":918273,"parcel_no":1,"label_version":2,"weight_g":1450,"service":"ground"}"#;
    let r = send(&mut h, KEY, reprint);
    assert_eq!(r.outcome, Outcome::KeyReused, "{r:?}");
    assert_eq!(h.carrier.stats().purchases, 1);
    h.assert_invariants();
}

/// A field the service does not read would otherwise be outside the hash (two bodies differing
/// only there would replay each other); it is refused instead, by name.
fn unknown_fields_are_400_naming_the_field(b: Backend) {
    let mut h = Harness::new(b);
    let r = send(
        &mut h,
        KEY,
        r#"{"order_id":918273,"parcel_no":1,"weight_g":1450,"service":"ground","weight_kg":1.45}"#,
    );
    assert_eq!((r.status, field_of(&r).as_str()), (400, "weight_kg"));
    assert_eq!(h.engine.store().count_keys().unwrap(), 0);
    h.assert_invariants();
}

/// Integers past 2^53 - 1 have no exact RFC 8785 form: `parcel_no` 2^53 and 2^53 + 1 would
/// share one hash, so they are refused.
fn integers_past_2_pow_53_are_400(b: Backend) {
    let mut h = Harness::new(b);
    for (i, parcel) in ["9007199254740992", "9007199254740993", "1e300"]
        .iter()
        .enumerate()
    {
        let body =
            format!(r#"{{"order_id":1,"parcel_no":{parcel},"weight_g":1,"service":"ground"}}"#);
        let r = send(&mut h, &format!("k{i}"), &body);
        assert_eq!(
            (r.status, field_of(&r).as_str()),
            (400, "parcel_no"),
            "{body}"
        );
    }
    let ok = r#"{"order_id":1,"parcel_no":9007199254740991,"weight_g":1,"service":"ground"}"#;
    assert_eq!(send(&mut h, "k-max", ok).status, 201);
    h.assert_invariants();
}

macro_rules! on_every_store {
    ($($name:ident),* $(,)?) => {
        mod sqlite {
            $( #[test] fn $name() { super::$name(super::common::Backend::sqlite()); } )*
        }
        mod postgres {
            $(
                #[test]
                fn $name() {
                    if let Some(b) = super::common::Backend::postgres() {
                        super::$name(b);
                    }
                }
            )*
        }
    };
}

on_every_store!(
    duplicate_keys_are_400_naming_the_field,
    equal_numbers_hash_alike,
    explicit_default_hashes_like_omitted,
    unknown_fields_are_400_naming_the_field,
    integers_past_2_pow_53_are_400,
);
