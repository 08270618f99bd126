//! The seed's reference idempotency engine: a record per (caller, key), two short transactions
//! around the carrier call, a lease with a lease token, and a batched sweeper.
//!
//! An attempt runs in three steps so a driver on a virtual clock can interleave many attempts
//! and kill one between any two of them: [`Engine::begin`] (validation of the key, txn 1),
//! [`Engine::call_carrier`] (no transaction open), and [`Engine::finish`] (txn 2).
//! [`Engine::handle`] runs the three back to back for callers that live in real time.

mod label;
pub mod request;

pub use label::label_body;

use crate::carrier::{Carrier, CarrierReply, CarrierResult, Purchase};
use crate::clock::{Clock, Millis};
use crate::store::{Completion, KeyState, LabelRow, LeaseToken, NewKey, Store, StoreError};
use bloomfilter::Bloom;
pub use request::{LabelRequest, Request, RequestDigest};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// How keys are scoped. `Global` reproduces the seed's failure "keys scoped globally, not per
/// caller": every caller's key lands in one namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KeyScope {
    #[default]
    PerCaller,
    Global,
}

/// Whose orders an order id names: a property of the modelled system, not a failure. `Shared` is
/// the seed's label service: order ids are global, and its callers (Fulfilment, Returns) label
/// the same orders, so "one label per parcel" holds across them (`UNIQUE (order_id,
/// parcel_no)`): a second caller asking for a parcel's label gets the existing one. `PerTenant`
/// is a multi-tenant label API whose tenants number their own orders: two tenants' "order 1"
/// are different parcels, and the labels are unique per tenant.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OrderSpace {
    #[default]
    Shared,
    PerTenant,
}

impl OrderSpace {
    /// The labels table's `order_space` column for a request from `caller_id` (unscoped): empty
    /// when every caller shares one order space.
    pub fn of(self, caller_id: &str) -> &str {
        match self {
            OrderSpace::Shared => "",
            OrderSpace::PerTenant => caller_id,
        }
    }
}

/// Where the key record is written relative to the label. `SeparateStore` reproduces "effect
/// and record in different stores": the label commits on its own, then the record does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RecordPlacement {
    #[default]
    SameTransaction,
    SeparateStore,
}

/// Whether the carrier is given a key. `None` reproduces "downstream call sent without a key".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CarrierKey {
    #[default]
    Derived,
    None,
}

/// The engine's knobs. Defaults are the seed's correct design; each non-default value of an enum
/// is one row of the seed's "How idempotency quietly fails" table. The fourth row, "lease
/// shorter than the slowest downstream call", is `lease_ms` below the carrier's latency.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct EngineConfig {
    /// How long a claim owns its key: the seed's 30 s.
    pub lease_ms: Millis,
    /// The carrier call's timeout: the seed's 20 s, inside the lease so the attempt that holds
    /// the lease always hears back before anyone may take over.
    pub carrier_timeout_ms: Millis,
    /// How long a completed record is kept: the seed's 24 h.
    pub retention_ms: Millis,
    pub key_scope: KeyScope,
    pub order_space: OrderSpace,
    pub record_placement: RecordPlacement,
    pub carrier_key: CarrierKey,
    /// Key length and saved-response size: the response is padded to a size drawn for its key.
    pub payload: crate::payload::PayloadSizes,
}

impl Default for EngineConfig {
    fn default() -> Self {
        Self {
            lease_ms: 30_000,
            carrier_timeout_ms: 20_000,
            retention_ms: crate::duration::DAY_MS,
            key_scope: KeyScope::PerCaller,
            order_space: OrderSpace::Shared,
            record_placement: RecordPlacement::SameTransaction,
            carrier_key: CarrierKey::Derived,
            payload: crate::payload::PayloadSizes::default(),
        }
    }
}

/// The named points at which an attempt can be made to die, as a killed process would.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum DiePoint {
    /// After txn 1 committed, before the carrier call: the lease is held, nothing bought.
    AfterTxn1,
    /// After the carrier answered, before txn 2: a label is bought and nothing records it.
    AfterCarrier,
    /// Inside txn 2, before its commit (with `SeparateStore`: between the label's commit and the
    /// record's).
    InsideTxn2,
}

/// How a request was answered, in the terms of the seed's status table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// 201, first run.
    Created,
    /// The saved response of a completed key, with `Idempotent-Replayed: true`.
    Replayed,
    /// 409 request_in_progress.
    InProgress,
    /// 422 idempotency_key_reused.
    KeyReused,
    /// 400 idempotency_key_missing.
    KeyMissing,
    /// 400 for an empty, over-long or control-character key.
    KeyInvalid,
    /// 400 validation_failed.
    ValidationFailed,
    /// 503 carrier_timeout: the lease is handed back so the next retry takes over at once.
    CarrierTimeout,
    /// 502 carrier_refused: a final outcome, saved and replayed like a success.
    CarrierRefused,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Response {
    pub status: u16,
    /// The error code of the body, where there is one.
    pub code: Option<String>,
    pub outcome: Outcome,
    /// `Idempotent-Replayed: true`.
    pub replayed: bool,
    /// For a 409: how long until the lease expires, as a retry-after hint.
    pub retry_after_ms: Option<Millis>,
    /// The key was claimed as new although the sweeper had purged it: the seed's alert for a
    /// retry that outlived retention, each one a possible duplicate.
    pub key_was_purged: bool,
    /// The carrier sold a new label that the labels table's natural key then turned away (the
    /// parcel already had one): an invoice line without a label of ours, the seed's sign of a
    /// second purchase. The answer is the parcel's existing label.
    pub unlabelled_purchase: bool,
    pub body: String,
}

impl Response {
    fn error(status: u16, outcome: Outcome, code: &str, detail: serde_json::Value) -> Self {
        let mut body = serde_json::json!({ "error": code });
        if let (Some(b), serde_json::Value::Object(extra)) = (body.as_object_mut(), detail) {
            b.extend(extra);
        }
        Self {
            status,
            code: Some(code.to_string()),
            outcome,
            replayed: false,
            retry_after_ms: None,
            key_was_purged: false,
            unlabelled_purchase: false,
            body: request::canonical_json(&body),
        }
    }

    /// The saved status and body of a completed key, given back with the replay flag.
    fn replay(status: u16, body: String) -> Self {
        let code = serde_json::from_str::<serde_json::Value>(&body)
            .ok()
            .and_then(|v| v.get("error").and_then(|e| e.as_str()).map(str::to_string));
        Self {
            status,
            code,
            outcome: Outcome::Replayed,
            replayed: true,
            retry_after_ms: None,
            key_was_purged: false,
            unlabelled_purchase: false,
            body,
        }
    }
}

/// An attempt that holds the lease on its key between txn 1 and txn 2.
#[derive(Debug, Clone)]
pub struct Attempt {
    /// The caller column as the key scope has it (`*` under global scoping).
    pub caller_id: String,
    /// The order space the label goes in ([`OrderSpace::of`] the unscoped caller).
    pub order_space: String,
    pub idem_key: String,
    pub lease_token: LeaseToken,
    pub label: LabelRequest,
    /// True when this attempt took over an expired lease rather than claiming a new key.
    pub took_over: bool,
    /// The sweeper had purged this key before this claim (see [`Response::key_was_purged`]).
    pub key_was_purged: bool,
}

pub enum Begun {
    /// The request was answered without running anything (replay, 409, 422, 400).
    Answered(Response),
    /// This attempt holds the lease and must call the carrier, then [`Engine::finish`].
    Owned(Attempt),
}

/// What [`Engine::finish`] came to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Finished {
    Answered(Response),
    /// The attempt died at the requested point; nobody is answered.
    Died,
}

#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Bounds the insert-then-inspect loop of txn 1: a row can vanish between the two statements
/// only if the sweeper deletes it in between, which cannot happen twice in a row.
const CLAIM_TRIES: usize = 3;

pub struct Engine {
    store: Box<dyn Store>,
    carrier: Arc<Carrier>,
    clock: Arc<dyn Clock>,
    config: EngineConfig,
    purged: Option<Bloom<str>>,
}

impl Engine {
    pub fn new(
        store: Box<dyn Store>,
        carrier: Arc<Carrier>,
        clock: Arc<dyn Clock>,
        config: EngineConfig,
    ) -> Self {
        Self {
            store,
            carrier,
            clock,
            config,
            purged: None,
        }
    }

    /// Remembers purged keys in a Bloom filter sized for `expected` keys, so a request that
    /// carries one is flagged. A Bloom filter because the point is to remember days of purges
    /// in a few bytes per key; a false positive (at `fp_rate`) only raises a needless alert.
    /// The seed makes its hashing deterministic.
    pub fn with_purge_filter(mut self, expected: usize, fp_rate: f64, seed: u64) -> Self {
        let mut s = [0u8; 32];
        s[..8].copy_from_slice(&seed.to_le_bytes());
        self.purged = Bloom::new_for_fp_rate_with_seed(expected.max(1), fp_rate, &s).ok();
        self
    }

    fn purge_key(caller_id: &str, idem_key: &str) -> String {
        format!("{caller_id}\u{0}{idem_key}")
    }

    pub fn config(&self) -> &EngineConfig {
        &self.config
    }

    pub fn store(&mut self) -> &mut dyn Store {
        self.store.as_mut()
    }

    /// The caller column as the scope switch has it.
    pub fn scope<'a>(&self, caller_id: &'a str) -> &'a str {
        match self.config.key_scope {
            KeyScope::PerCaller => caller_id,
            KeyScope::Global => "*",
        }
    }

    /// Checks the key, then runs txn 1: claim the key, or inspect it and answer.
    pub fn begin(&mut self, req: &Request) -> Result<Begun, EngineError> {
        self.begin_digested(req, RequestDigest::of(req))
    }

    /// [`Engine::begin`] with the request's hash and validation already computed from `req`
    /// (by [`RequestDigest::of`], on whichever thread read the request).
    pub fn begin_digested(
        &mut self,
        req: &Request,
        digest: RequestDigest,
    ) -> Result<Begun, EngineError> {
        debug_assert_eq!(
            digest.hash,
            RequestDigest::of(req).hash,
            "digest of another request"
        );
        let key = match request::check_key(req.idem_key.as_deref()) {
            Ok(k) => k.to_string(),
            Err(problem) => {
                let outcome = if problem == request::KeyProblem::Missing {
                    Outcome::KeyMissing
                } else {
                    Outcome::KeyInvalid
                };
                return Ok(Begun::Answered(Response::error(
                    400,
                    outcome,
                    problem.code(),
                    serde_json::json!({ "message": problem.message() }),
                )));
            }
        };
        let caller = self.scope(&req.caller_id).to_string();
        let RequestDigest { hash, validated } = digest;
        let token = new_lease_token();
        let now = self.clock.now_ms();
        let lease_until = now + self.config.lease_ms;

        let mut tx = self.store.begin()?;
        let mut took_over = false;
        let mut claimed = false;
        for _ in 0..CLAIM_TRIES {
            claimed = tx.insert_key(&NewKey {
                caller_id: &caller,
                idem_key: &key,
                request_hash: &hash,
                lease_token: &token,
                now_ms: now,
                locked_until_ms: lease_until,
                expires_at_ms: now + self.config.retention_ms,
            })?;
            if claimed {
                break;
            }
            let Some(row) = tx.lock_key(&caller, &key)? else {
                continue;
            };
            // Dropping `tx` without commit is the seed's ROLLBACK on each answer below.
            if row.request_hash != hash {
                return Ok(Begun::Answered(Response::error(
                    422,
                    Outcome::KeyReused,
                    "idempotency_key_reused",
                    serde_json::json!({
                        "message": "this key was used with a different request; use a new key for a new intent"
                    }),
                )));
            }
            if row.state == KeyState::Completed {
                return Ok(Begun::Answered(Response::replay(
                    row.response_status.unwrap_or(500),
                    row.response_body.unwrap_or_default(),
                )));
            }
            if let Some(until) = row.locked_until_ms
                && until > now
            {
                let mut r = Response::error(
                    409,
                    Outcome::InProgress,
                    "request_in_progress",
                    serde_json::json!({ "retry_after_ms": until - now }),
                );
                r.retry_after_ms = Some(until - now);
                return Ok(Begun::Answered(r));
            }
            tx.take_over(&caller, &key, &token, lease_until)?;
            took_over = true;
            claimed = true;
            break;
        }
        if !claimed {
            return Err(StoreError::Corrupt(format!(
                "key {key:?} neither inserts nor reads back after {CLAIM_TRIES} tries"
            ))
            .into());
        }
        tx.commit()?;

        // The seed's "fails validation → delete, 400": the claim is undone in its own short
        // transaction, and only while the lease is still this attempt's.
        let key_was_purged = !took_over
            && self
                .purged
                .as_ref()
                .is_some_and(|b| b.check(&Self::purge_key(&caller, &key)));
        match validated {
            Ok(label) => Ok(Begun::Owned(Attempt {
                caller_id: caller,
                order_space: self.config.order_space.of(&req.caller_id).to_string(),
                idem_key: key,
                lease_token: token,
                label,
                took_over,
                key_was_purged,
            })),
            Err(invalid) => {
                let mut tx = self.store.begin()?;
                tx.delete_key(&caller, &key, &token)?;
                tx.commit()?;
                Ok(Begun::Answered(Response::error(
                    400,
                    Outcome::ValidationFailed,
                    "validation_failed",
                    serde_json::json!({ "field": invalid.field, "message": invalid.message }),
                )))
            }
        }
    }

    /// The key the carrier is sent for `a`: the seed's `'carrier:' || key`, with the caller
    /// column joined unambiguously (see `carrier_key`); with global scoping the column is `*`
    /// and equal keys meet, as they do in our store. `None` under `--carrier-key none`. The one
    /// derivation for the in-process carrier and one behind HTTP (`serve --carrier-url`).
    pub fn carrier_key_for(&self, a: &Attempt) -> Option<String> {
        match self.config.carrier_key {
            CarrierKey::Derived => Some(crate::carrier::carrier_key(&a.caller_id, &a.idem_key)),
            CarrierKey::None => None,
        }
    }

    /// The carrier call, with no transaction open and no row lock held.
    pub fn call_carrier(&self, a: &Attempt) -> CarrierReply {
        let key = self.carrier_key_for(a);
        self.carrier.purchase(
            &Purchase {
                key: key.as_deref(),
                order_id: a.label.order_id,
                parcel_no: a.label.parcel_no,
                label_version: a.label.label_version,
                service: a.label.service,
                weight_g: a.label.weight_g,
            },
            self.clock.now_ms(),
        )
    }

    /// Txn 2: the effect and the outcome commit together, only if the lease is still ours.
    pub fn finish(
        &mut self,
        a: &Attempt,
        reply: &CarrierReply,
        die: Option<DiePoint>,
    ) -> Result<Finished, EngineError> {
        if die == Some(DiePoint::AfterCarrier) {
            return Ok(Finished::Died);
        }
        let now = self.clock.now_ms();
        if reply.latency_ms > self.config.carrier_timeout_ms {
            return self.carrier_timed_out(a, now);
        }
        // A label sold now (not replayed): if the labels table turns it away, the carrier
        // billed for a label nothing of ours holds.
        let fresh = matches!(
            reply.result,
            CarrierResult::Label {
                replayed: false,
                ..
            }
        );
        let (status, body, label) = match &reply.result {
            CarrierResult::Label { label, .. } => {
                let row = LabelRow {
                    label_id: label.label_id.clone(),
                    order_id: a.label.order_id,
                    parcel_no: a.label.parcel_no,
                    label_version: a.label.label_version,
                    tracking_no: label.tracking_no.clone(),
                    cost_cents: label.cost_cents,
                    created_by_key: a.idem_key.clone(),
                    order_space: a.order_space.clone(),
                };
                (
                    201,
                    label_body(&row, &self.config.payload.response_bytes),
                    Some(row),
                )
            }
            CarrierResult::KeyReused => return self.key_spent_at_carrier(a),
            CarrierResult::Refused { reason } => {
                let r = Response::error(
                    502,
                    Outcome::CarrierRefused,
                    "carrier_refused",
                    serde_json::json!({ "message": reason }),
                );
                (502, r.body, None)
            }
        };
        let completion = Completion {
            caller_id: &a.caller_id,
            idem_key: &a.idem_key,
            lease_token: &a.lease_token,
            response_status: status,
            response_body: &body,
            expires_at_ms: now + self.config.retention_ms,
        };
        let mut unlabelled = false;
        let answer = match self.config.record_placement {
            RecordPlacement::SameTransaction => {
                let mut tx = self.store.begin()?;
                if !tx.complete_key(&completion)? {
                    drop(tx);
                    return self.lost_lease(a);
                }
                let mut body = body;
                if let Some(row) = &label
                    && let Some(existing) = tx.insert_label(row)?
                {
                    unlabelled = fresh;
                    if !same_parcel(&existing, row) {
                        drop(tx);
                        return self.foreign_label(a, &existing, Some(&body));
                    }
                    // The second line of defence: the parcel already has this label version, so
                    // the existing label is the answer (the carrier may still have billed twice).
                    body = label_body(&existing, &self.config.payload.response_bytes);
                    tx.set_response_body(&a.caller_id, &a.idem_key, &body)?;
                }
                if die == Some(DiePoint::InsideTxn2) {
                    return Ok(Finished::Died);
                }
                tx.commit()?;
                body
            }
            RecordPlacement::SeparateStore => {
                let mut body = body.clone();
                if let Some(row) = &label {
                    let mut tx = self.store.begin()?;
                    if let Some(existing) = tx.insert_label(row)? {
                        unlabelled = fresh;
                        if !same_parcel(&existing, row) {
                            drop(tx);
                            return self.foreign_label(a, &existing, None);
                        }
                        body = label_body(&existing, &self.config.payload.response_bytes);
                    }
                    tx.commit()?;
                }
                if die == Some(DiePoint::InsideTxn2) {
                    return Ok(Finished::Died);
                }
                let mut tx = self.store.begin()?;
                let completion = Completion {
                    response_body: &body,
                    ..completion
                };
                if !tx.complete_key(&completion)? {
                    drop(tx);
                    return self.lost_lease(a);
                }
                tx.commit()?;
                body
            }
        };
        let outcome = if status == 201 {
            Outcome::Created
        } else {
            Outcome::CarrierRefused
        };
        let code = (status != 201).then(|| "carrier_refused".to_string());
        Ok(Finished::Answered(Response {
            status,
            code,
            outcome,
            replayed: false,
            retry_after_ms: None,
            key_was_purged: a.key_was_purged,
            unlabelled_purchase: unlabelled,
            body: answer,
        }))
    }

    /// The carrier did not answer in time. The purchase may have gone through; the derived key
    /// makes the next attempt's call safe, so the lease is handed back at once rather than
    /// make every retry wait it out.
    fn carrier_timed_out(&mut self, a: &Attempt, now: Millis) -> Result<Finished, EngineError> {
        let mut tx = self.store.begin()?;
        tx.release_lease(&a.caller_id, &a.idem_key, &a.lease_token, now)?;
        tx.commit()?;
        Ok(Finished::Answered(Response::error(
            503,
            Outcome::CarrierTimeout,
            "carrier_timeout",
            serde_json::json!({ "message": "the carrier did not answer in time; retry with the same key" }),
        )))
    }

    /// The carrier refused the key: it bought something else with it within its window.
    /// Nothing was bought, so nothing is saved: the claim goes, as a request that fails
    /// validation does, and the client learns its key is spent.
    fn key_spent_at_carrier(&mut self, a: &Attempt) -> Result<Finished, EngineError> {
        self.undo_claim(a)?;
        Ok(Finished::Answered(Response::error(
            422,
            Outcome::KeyReused,
            "idempotency_key_reused",
            serde_json::json!({
                "message": "the carrier has seen this key, within its own window, for another purchase (a key reused for a new intent after this service purged it); nothing was bought: use a new key for a new intent"
            }),
        )))
    }

    /// Deletes this attempt's claim, only while its lease is still this attempt's: the request
    /// ran nothing that a replay should repeat.
    fn undo_claim(&mut self, a: &Attempt) -> Result<(), EngineError> {
        let mut tx = self.store.begin()?;
        tx.delete_key(&a.caller_id, &a.idem_key, &a.lease_token)?;
        tx.commit()?;
        Ok(())
    }

    /// The carrier answered with a label id our store already holds for another parcel: a
    /// carrier that replays by key alone, whatever was asked. Saving it would answer this order
    /// with another order's label, now and on every replay, so nothing is saved: txn 2 rolls
    /// back, the claim goes, and the caller gets a 502 naming the label and its parcel.
    /// `completed_body`: the completion txn 2 wrote before the label's insert ran into the other
    /// parcel's row, undone where no rollback reached it (Redis).
    fn foreign_label(
        &mut self,
        a: &Attempt,
        existing: &LabelRow,
        completed_body: Option<&str>,
    ) -> Result<Finished, EngineError> {
        if let Some(body) = completed_body {
            let mut tx = self.store.begin()?;
            tx.undo_completion(&a.caller_id, &a.idem_key, body)?;
            tx.commit()?;
        }
        self.undo_claim(a)?;
        Ok(Finished::Answered(Response::error(
            502,
            Outcome::CarrierRefused,
            "carrier_refused",
            serde_json::json!({
                "message": format!(
                    "the carrier answered with label {}, which belongs to order {} parcel {}; nothing was saved: retry with a new key",
                    existing.label_id, existing.order_id, existing.parcel_no
                )
            }),
        )))
    }

    /// A slow attempt whose lease was taken over writes nothing; its caller gets what the key
    /// says now: the owner's saved response, or a 409 while the owner still runs.
    fn lost_lease(&mut self, a: &Attempt) -> Result<Finished, EngineError> {
        let now = self.clock.now_ms();
        let row = self.store.get_key(&a.caller_id, &a.idem_key)?;
        let r = match row {
            Some(row) if row.state == KeyState::Completed => Response::replay(
                row.response_status.unwrap_or(500),
                row.response_body.unwrap_or_default(),
            ),
            Some(row) => {
                let wait = row.locked_until_ms.map(|u| (u - now).max(0)).unwrap_or(0);
                let mut r = Response::error(
                    409,
                    Outcome::InProgress,
                    "request_in_progress",
                    serde_json::json!({ "retry_after_ms": wait }),
                );
                r.retry_after_ms = Some(wait);
                r
            }
            None => Response::error(
                409,
                Outcome::InProgress,
                "request_in_progress",
                serde_json::json!({ "retry_after_ms": 0 }),
            ),
        };
        Ok(Finished::Answered(r))
    }

    /// All three steps back to back, for callers in real time (the bench, the conformance tests).
    pub fn handle(&mut self, req: &Request) -> Result<Response, EngineError> {
        self.handle_digested(req, RequestDigest::of(req))
    }

    /// [`Engine::handle`] with the request's digest computed elsewhere (see
    /// [`Engine::begin_digested`]).
    pub fn handle_digested(
        &mut self,
        req: &Request,
        digest: RequestDigest,
    ) -> Result<Response, EngineError> {
        self.all_steps(req, digest, None).map(|f| match f {
            Finished::Answered(r) => r,
            Finished::Died => unreachable!("no die point was requested"),
        })
    }

    pub fn handle_with_fault(
        &mut self,
        req: &Request,
        die: Option<DiePoint>,
    ) -> Result<Finished, EngineError> {
        self.all_steps(req, RequestDigest::of(req), die)
    }

    fn all_steps(
        &mut self,
        req: &Request,
        digest: RequestDigest,
        die: Option<DiePoint>,
    ) -> Result<Finished, EngineError> {
        match self.begin_digested(req, digest)? {
            Begun::Answered(r) => Ok(Finished::Answered(r)),
            Begun::Owned(a) => {
                if die == Some(DiePoint::AfterTxn1) {
                    return Ok(Finished::Died);
                }
                let reply = self.call_carrier(&a);
                self.finish(&a, &reply, die)
            }
        }
    }

    /// Runs the sweeper: batches of `batch` expired records until a batch comes back short or
    /// `max_batches` ran (a bound, so one sweep cannot monopolise the write lock).
    pub fn sweep(&mut self, batch: u32, max_batches: u32) -> Result<u64, EngineError> {
        self.sweep_collect(batch, max_batches, &mut Vec::new())
    }

    /// [`Engine::sweep`], also handing back the (caller column, key) of every purged record.
    pub fn sweep_collect(
        &mut self,
        batch: u32,
        max_batches: u32,
        out: &mut Vec<(String, String)>,
    ) -> Result<u64, EngineError> {
        let now = self.clock.now_ms();
        let mut purged = 0;
        for _ in 0..max_batches {
            let keys = self.store.sweep_batch(now, batch)?;
            if let Some(bloom) = self.purged.as_mut() {
                for (caller, key) in &keys {
                    bloom.set(&Self::purge_key(caller, key));
                }
            }
            purged += keys.len() as u64;
            let short = keys.len() < batch as usize;
            out.extend(keys);
            if short {
                break;
            }
        }
        Ok(purged)
    }
}

/// Whether `existing`, the label row an insert ran into, is the parcel `row` asked for (the
/// seed's `UNIQUE (order_id, parcel_no)` defence) rather than a label id of another parcel.
fn same_parcel(existing: &LabelRow, row: &LabelRow) -> bool {
    (
        existing.order_id,
        existing.parcel_no,
        existing.label_version,
        &existing.order_space,
    ) == (
        row.order_id,
        row.parcel_no,
        row.label_version,
        &row.order_space,
    )
}

/// A fresh lease token: a version-4 UUID, the same 16 bytes and format as `Uuid::new_v4`'s (a
/// 16-byte BLOB in SQLite, PostgreSQL's `uuid`, so bytes per record do not change), drawn from
/// the thread's generator (`rand::random`: ChaCha seeded once from the OS and reseeded now and
/// then) rather than a `getrandom` system call per lease. A token only has to differ from the
/// other attempts' tokens for the same key; it is no secret, and no figure depends on its value.
fn new_lease_token() -> LeaseToken {
    *uuid::Builder::from_random_bytes(rand::random())
        .into_uuid()
        .as_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::payload::SizeDist;

    /// The saved body as it was written before the direct writer: a `serde_json::Value` built
    /// field by field and serialised once (its maps are sorted). Kept to check that the direct
    /// writer gives the very same bytes, so replays of keys saved by earlier versions stay
    /// byte-identical.
    fn label_body_through_value(l: &LabelRow, sizes: &crate::payload::SizeDist) -> String {
        use crate::payload::{label_timestamp, response_filler, response_target_bytes};
        let mut body = serde_json::json!({
            "label_id": l.label_id,
            "order_id": l.order_id,
            "parcel_no": l.parcel_no,
            "label_version": l.label_version,
            "tracking_no": l.tracking_no,
            "cost_cents": l.cost_cents,
        });
        let target = response_target_bytes(&l.created_by_key, l.order_id, sizes);
        let created_at = label_timestamp(&l.created_by_key, l.order_id);
        let extras: [(&str, serde_json::Value); 6] = [
            ("carrier", "ground-co".into()),
            ("service", "ground".into()),
            ("currency", "USD".into()),
            ("created_at", created_at.into()),
            (
                "label_url",
                format!("https://labels.example.com/v1/labels/{}.pdf", l.label_id).into(),
            ),
            (
                "tracking_url",
                format!("https://track.example.com/{}", l.tracking_no).into(),
            ),
        ];
        let mut len = json_text(&body).len();
        for (name, value) in extras {
            let cost = name.len() + 4 + json_text(&value).len();
            if len + cost > target {
                break;
            }
            body[name] = value;
            len += cost;
        }
        // `,"label_data":""` costs 16 bytes before any filler.
        const LABEL_DATA_OVERHEAD: usize = 16;
        if len + LABEL_DATA_OVERHEAD < target {
            let filler = target - len - LABEL_DATA_OVERHEAD;
            body["label_data"] = response_filler(&l.created_by_key, l.order_id, filler).into();
        }
        json_text(&body)
    }

    /// serde_json's compact text of a `Value`.
    fn json_text(v: &serde_json::Value) -> String {
        serde_json::to_string(v).unwrap_or_default()
    }

    /// The seed's label for parcel 1 of `order_id`.
    fn label_row(order_id: i64, label_id: &str, label_version: i64) -> LabelRow {
        LabelRow {
            label_id: label_id.to_string(),
            order_id,
            parcel_no: 1,
            label_version,
            tracking_no: format!("GRD{order_id:09}"),
            cost_cents: 600,
            created_by_key: format!("label:{order_id}:1:v1"),
            order_space: String::new(),
        }
    }

    #[test]
    fn the_direct_writer_gives_the_bytes_of_the_value_path() {
        for sizes in [
            "1",
            "100",
            "180",
            "250",
            "300",
            "2kB",
            "median=300B,p99=4kB",
        ] {
            let sizes = SizeDist::parse(sizes).unwrap();
            for (order_id, label_id) in
                [(1, "L-1"), (918_273, "lbl_\"q\\\u{1}é"), (999_999_999, "x")]
            {
                let row = label_row(order_id, label_id, 3);
                assert_eq!(
                    label_body(&row, &sizes),
                    label_body_through_value(&row, &sizes)
                );
            }
        }
    }

    /// A token is a version-4 UUID of 16 bytes, as `Uuid::new_v4` made them, and two differ.
    #[test]
    fn lease_tokens_are_version_4_uuids() {
        let a = new_lease_token();
        let b = new_lease_token();
        assert_ne!(a, b);
        let u = uuid::Uuid::from_bytes(a);
        assert_eq!(u.get_version_num(), 4);
        assert_eq!(u.get_variant(), uuid::Variant::RFC4122);
    }

    /// The saved body is written directly, not through a canonicaliser, for speed; it must be
    /// RFC 8785's text at every size, so a replay is byte-identical to what one would give.
    #[test]
    fn the_saved_body_is_canonical_at_every_size() {
        for sizes in ["100", "300", "2kB", "median=300B,p99=4kB"] {
            let sizes = SizeDist::parse(sizes).unwrap();
            for order_id in [1, 918_273, 999_999_999] {
                let row = label_row(order_id, &format!("L-{order_id}"), 1);
                let text = label_body(&row, &sizes);
                let v: serde_json::Value = serde_json::from_str(&text).unwrap();
                assert_eq!(text, request::canonical_json(&v));
            }
        }
    }
}
