//! The routes: `POST /labels` (CreateLabel, the seed's status table), `GET /metrics`,
//! `GET /healthz`, `GET /problems/CODE`.

use super::carrier::{PurchaseBody, RemoteCarrier};
use super::detect::{Creators, InFlight, PurgeMemory, Running};
use super::headers::{Callers, KeyHeader, idempotency_key};
use super::metrics::Metrics;
use super::problem::{self, Problem};
use super::writers::{Began, CarrierCall, Job, JobError, Writers};
use crate::carrier::{Carrier, CarrierReply, CarrierResult, CarrierStats};
use crate::clock::ScaledClock;
use crate::engine::{
    Attempt, DiePoint, EngineConfig, Finished, Outcome, Request, RequestDigest, Response,
};
use axum::Router;
use axum::body::Body;
use axum::extract::{Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::IntoResponse;
use http_body_util::{BodyExt as _, LengthLimitError, Limited};
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// The header a test sends, with `--test-hooks` only, to make its handler die at a point of
/// the attempt as a killed process would: `after-txn1`, `after-carrier` or `inside-txn2`.
pub const DIE_HEADER: &str = "idemcalc-test-die";

/// The peer of a connection, put on each of its requests.
#[derive(Debug, Clone, Copy)]
pub struct Peer(pub SocketAddr);

/// A response whose handler died: the connection is closed without an answer.
#[derive(Debug, Clone, Copy)]
pub struct Died;

pub struct Limits {
    pub max_body_bytes: usize,
    pub body_timeout: Duration,
}

/// Everything the handlers share.
pub struct App {
    pub writers: Writers,
    pub metrics: Metrics,
    /// Replaced whole on SIGHUP when `--callers` is re-read (`serve::reload_callers`).
    pub callers: std::sync::RwLock<Callers>,
    pub purged: PurgeMemory,
    /// Under `--key-scope global` only: per-caller scoping makes a replay to another caller
    /// impossible.
    pub creators: Option<Creators>,
    pub inflight: InFlight,
    pub clock: Arc<ScaledClock>,
    pub carrier: Arc<Carrier>,
    /// `--carrier-url`: the carrier behind HTTP, called from here instead of `carrier`.
    pub remote_carrier: Option<RemoteCarrier>,
    /// What the carrier behind HTTP answered (it alone knows its duplicate purchases: its
    /// `/v1/invoice`).
    pub remote_seen: std::sync::Mutex<CarrierStats>,
    pub engine: EngineConfig,
    pub limits: Limits,
    pub test_hooks: bool,
    /// False once the store's hold is lost: `/healthz` says 503 from then on.
    pub held: AtomicBool,
    /// Raised when the drain's deadline passes: every attempt still running is answered 503
    /// `shutting_down` instead of dropped with no answer.
    pub drain_over: Flag,
    /// Attempts answered so at the drain's deadline.
    pub cut: std::sync::atomic::AtomicU64,
    /// Raised when the store's hold is lost: the server stops (exit 3) so a supervisor starts
    /// it again, rather than staying alive and unavailable.
    pub hold_lost: Flag,
    /// False while the store's last answer to a request or a sweep was a failure: `/healthz`
    /// follows the write path, so a balancer stops sending while every create would fail.
    pub store_ok: AtomicBool,
    /// `--replica NAME`, sent back on every answer as `idemcalc-replica`: behind a balancer, a
    /// client (and a test) sees which replica served it.
    pub replica: Option<axum::http::HeaderValue>,
}

impl App {
    /// The hold is gone: `/healthz` turns 503 and the server begins to stop.
    pub fn lost_hold(&self) {
        self.held.store(false, Ordering::Relaxed);
        self.hold_lost.raise();
    }
}

/// A one-way switch any number of tasks can wait on.
pub struct Flag(tokio::sync::watch::Sender<bool>);

impl Default for Flag {
    fn default() -> Self {
        Flag(tokio::sync::watch::channel(false).0)
    }
}

impl Flag {
    pub fn raise(&self) {
        self.0.send_replace(true);
    }

    /// Resolves once [`Flag::raise`] was called (at once if it already was).
    pub async fn raised(&self) {
        let mut seen = self.0.subscribe();
        let _ = seen.wait_for(|up| *up).await;
    }
}

pub fn router(app: Arc<App>) -> Router {
    use axum::routing::{get, post};
    let create = post(create_label).fallback(method_not_allowed);
    Router::new()
        .route("/labels", create.clone())
        .route("/v1/labels", create)
        .route("/metrics", get(metrics))
        .route("/healthz", get(healthz))
        .route("/problems/{code}", get(describe))
        .fallback(not_found)
        .with_state(app)
}

/// The carrier's counts: the in-process carrier's own, or what the one behind HTTP answered.
fn carrier_stats(app: &App) -> CarrierStats {
    match &app.remote_carrier {
        Some(_) => *app.remote_seen.lock().unwrap_or_else(|p| p.into_inner()),
        None => app.carrier.stats(),
    }
}

async fn not_found() -> Problem {
    Problem::new("not_found", "no such resource")
}

async fn method_not_allowed() -> impl IntoResponse {
    let mut r = Problem::new("method_not_allowed", "CreateLabel is POST").into_response();
    r.headers_mut()
        .insert(header::ALLOW, HeaderValue::from_static("POST"));
    r
}

/// A code that is not UTF-8 once percent-decoded (`/problems/%FF`) is no problem's either: it
/// gets the same 404 problem as an unknown one, not axum's plain-text rejection.
async fn describe(
    code: Result<Path<String>, axum::extract::rejection::PathRejection>,
) -> axum::response::Response {
    let Ok(Path(code)) = code else {
        return Problem::new("not_found", "no problem has this name").into_response();
    };
    match problem::describe(&code) {
        Some(text) => ([(header::CONTENT_TYPE, "text/plain; charset=utf-8")], text).into_response(),
        None => Problem::new("not_found", format!("no problem is called {code:?}")).into_response(),
    }
}

async fn healthz(State(app): State<Arc<App>>) -> axum::response::Response {
    if !app.held.load(Ordering::Relaxed) {
        Problem::new("store_unavailable", "the store's hold was lost").into_response()
    } else if !app.store_ok.load(Ordering::Relaxed) {
        Problem::new(
            "store_unavailable",
            "the store's last write failed; ready again after the next one succeeds",
        )
        .retry_after_ms(1000)
        .into_response()
    } else {
        (StatusCode::OK, "ok\n").into_response()
    }
}

async fn metrics(State(app): State<Arc<App>>) -> axum::response::Response {
    (
        [(
            header::CONTENT_TYPE,
            "application/openmetrics-text; version=1.0.0; charset=utf-8",
        )],
        app.metrics.render(&carrier_stats(&app)),
    )
        .into_response()
}

/// An answer and the outcome it is counted under.
struct Answer {
    response: axum::response::Response,
    outcome: &'static str,
}

impl From<Problem> for Answer {
    fn from(p: Problem) -> Self {
        Answer {
            outcome: p.code,
            response: p.into_response(),
        }
    }
}

async fn create_label(
    State(app): State<Arc<App>>,
    peer: Option<axum::Extension<Peer>>,
    req: axum::extract::Request,
) -> axum::response::Response {
    let started = Instant::now();
    let loopback = peer.is_some_and(|p| p.0.0.ip().is_loopback());
    let answer = create(&app, loopback, req).await;
    let status = answer.response.status().as_u16();
    app.metrics.answered(
        status,
        answer.outcome,
        Some(started.elapsed().as_secs_f64()),
    );
    answer.response
}

async fn create(app: &Arc<App>, loopback: bool, req: axum::extract::Request) -> Answer {
    let (parts, body) = req.into_parts();
    let found = app
        .callers
        .read()
        .unwrap_or_else(|p| p.into_inner())
        .caller(&parts.headers, loopback);
    let caller = match found {
        Ok(c) => c,
        Err(e) => return Problem::new("unauthenticated", e.0).into(),
    };
    let key = match idempotency_key(&parts.headers) {
        KeyHeader::Absent => None,
        KeyHeader::Key(k) => Some(k),
        KeyHeader::Multiple(n) => {
            return Problem::new(
                "idempotency_key_multiple",
                format!("the request has {n} Idempotency-Key headers"),
            )
            .into();
        }
        KeyHeader::Malformed(why) => {
            return Problem::new("idempotency_key_malformed", why).into();
        }
    };
    let die = match die_point(app, &parts.headers) {
        Ok(d) => d,
        Err(p) => return p.into(),
    };
    let body = match read_body(app, &parts.headers, body).await {
        Ok(b) => b,
        Err(p) => return p.into(),
    };
    let req = Request {
        caller_id: caller,
        idem_key: key,
        method: parts.method.as_str().to_string(),
        path: parts.uri.path().to_string(),
        body,
    };
    // Its own task: a client that hangs up must not cancel an attempt between the carrier call
    // and txn 2 (the seed: the service finishes a purchase it started). The drain's deadline
    // answers the client, never cancels the task: it may still reach txn 2.
    let running = tokio::spawn(flow(app.clone(), req, die));
    let done = tokio::select! {
        done = running => done,
        () = app.drain_over.raised() => {
            app.cut.fetch_add(1, Ordering::Relaxed);
            let lease_ms = app.clock.wall(app.engine.lease_ms).as_millis() as u64;
            return Problem::new(
                "shutting_down",
                "the server stopped before this attempt finished; its lease expires after Retry-After, and a retry with the same key then takes it over",
            )
            .retry_after_ms(lease_ms)
            .into();
        }
    };
    match done {
        Ok(Ok(Flow::Answered(r))) => {
            app.store_ok.store(true, Ordering::Relaxed);
            engine_answer(app, r)
        }
        Ok(Ok(Flow::Died)) => {
            let mut response = StatusCode::INTERNAL_SERVER_ERROR.into_response();
            response.extensions_mut().insert(Died);
            Answer {
                response,
                outcome: "died",
            }
        }
        Ok(Err(e)) => job_problem(app, e).into(),
        Err(e) => Problem::new("internal_error", format!("the handler failed: {e}")).into(),
    }
}

/// The test hook's die point, honoured only under `--test-hooks`.
fn die_point(app: &App, headers: &HeaderMap) -> Result<Option<DiePoint>, Problem> {
    let Some(v) = headers.get(DIE_HEADER) else {
        return Ok(None);
    };
    if !app.test_hooks {
        return Ok(None);
    }
    match v.to_str().unwrap_or("") {
        "after-txn1" => Ok(Some(DiePoint::AfterTxn1)),
        "after-carrier" => Ok(Some(DiePoint::AfterCarrier)),
        "inside-txn2" => Ok(Some(DiePoint::InsideTxn2)),
        other => Err(Problem::new(
            "validation_failed",
            format!("{DIE_HEADER}: {other:?} is not after-txn1, after-carrier or inside-txn2"),
        )
        .with("field", DIE_HEADER)),
    }
}

/// The body as text, within the size limit (413) and the read deadline (408, the slow-loris
/// cut-off for bodies); a body that is not UTF-8 is refused naming the byte where it stops.
async fn read_body(app: &App, headers: &HeaderMap, body: Body) -> Result<String, Problem> {
    let limit = app.limits.max_body_bytes;
    let too_large = || {
        Problem::new(
            "body_too_large",
            format!("the body is larger than the server's limit of {limit} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let read = tokio::time::timeout(app.limits.body_timeout, Limited::new(body, limit).collect());
    let bytes = match read.await {
        Err(_) => {
            return Err(Problem::new(
                "body_timeout",
                format!(
                    "the body did not arrive within {}",
                    crate::duration::format_secs(app.limits.body_timeout.as_secs_f64())
                ),
            ));
        }
        Ok(Err(e)) if e.is::<LengthLimitError>() => return Err(too_large()),
        Ok(Err(e)) => {
            return Err(Problem::new(
                "validation_failed",
                format!("the body could not be read: {e}"),
            )
            .with("field", "body"));
        }
        Ok(Ok(c)) => c.to_bytes(),
    };
    String::from_utf8(bytes.to_vec()).map_err(|e| {
        Problem::new(
            "validation_failed",
            format!(
                "the body is not UTF-8 from byte {}",
                e.utf8_error().valid_up_to()
            ),
        )
        .with("field", "body")
    })
}

/// Counts an attempt in `in_flight` until it ends, however it ends (the shutdown waits for the
/// count to reach zero).
struct InFlightGauge<'a>(&'a App);

impl<'a> InFlightGauge<'a> {
    fn enter(app: &'a App) -> Self {
        app.metrics.in_flight.inc();
        InFlightGauge(app)
    }
}

impl Drop for InFlightGauge<'_> {
    fn drop(&mut self) {
        self.0.metrics.in_flight.dec();
    }
}

enum Flow {
    Answered(Response),
    Died,
}

/// One attempt: txn 1 (and the carrier's reply) on a writer, the carrier's latency waited out
/// here with no transaction open, then txn 2 on a writer. A carrier in this process that
/// answers with no latency leaves nothing to wait for, so the writer runs txn 2 at once.
async fn flow(app: Arc<App>, req: Request, die: Option<DiePoint>) -> Result<Flow, JobError> {
    let _counted = InFlightGauge::enter(&app);
    let caller = req.caller_id.clone();
    let key = req.idem_key.clone();
    let digest = RequestDigest::of(&req);
    let request = Box::new((req, digest));
    let began = app
        .writers
        .call(|reply| Job::Begin {
            request,
            may_complete: die.is_none(),
            reply,
        })
        .await?;
    let (attempt, carrier) = match began {
        Began::Answered(r) => {
            note_replay(&app, &caller, key.as_deref(), &r);
            return Ok(Flow::Answered(r));
        }
        Began::Completed(a, finished) => {
            let _running = note_attempt(&app, &a);
            return Ok(finished_flow(&app, &a.idem_key, &caller, finished));
        }
        Began::Owned(a, carrier) => (a, carrier),
    };
    let _running = note_attempt(&app, &attempt);
    if die == Some(DiePoint::AfterTxn1) {
        return Ok(Flow::Died);
    }
    let reply = match carrier {
        CarrierCall::Answered(reply) => {
            // The service waits for the carrier at most its timeout; past it the engine
            // answers 503.
            let waited = app
                .clock
                .wall(reply.latency_ms.min(app.engine.carrier_timeout_ms + 1));
            // tokio's timer ticks by the millisecond: a zero sleep still waits for the next
            // tick, a millisecond added to every request of a carrier that answers at once.
            if !waited.is_zero() {
                tokio::time::sleep(waited).await;
            }
            reply
        }
        CarrierCall::Remote(key) => remote_purchase(&app, key.as_deref(), &attempt).await,
    };
    if die == Some(DiePoint::AfterCarrier) {
        return Ok(Flow::Died);
    }
    let key = attempt.idem_key.clone();
    // Waits for room in the queue rather than answering 503: this attempt may have bought a
    // label, and txn 2 is what records it.
    let finished = app
        .writers
        .call_waiting(|tx| Job::Finish(Box::new((attempt, reply, die)), tx))
        .await?;
    Ok(finished_flow(&app, &key, &caller, finished))
}

/// Counts what an attempt holding the lease signals (a takeover, with its owner still running
/// or not; a key the sweeper purged, sent again), and marks it running until the guard drops.
fn note_attempt<'a>(app: &'a App, attempt: &Attempt) -> Running<'a> {
    let (running, owner_alive) = app.inflight.enter(&attempt.caller_id, &attempt.idem_key);
    if attempt.took_over {
        app.metrics.takeovers.inc();
        if owner_alive {
            app.metrics.takeovers_while_owner_alive.inc();
        }
    } else if app.purged.contains(&attempt.caller_id, &attempt.idem_key) {
        app.metrics.purged_key_requests.inc();
    }
    running
}

/// Txn 2's outcome; a label created is remembered against its creator for `--key-scope global`.
fn finished_flow(app: &App, key: &str, caller: &str, finished: Finished) -> Flow {
    match finished {
        Finished::Died => Flow::Died,
        Finished::Answered(r) => {
            if r.outcome == Outcome::Created
                && let Some(c) = &app.creators
            {
                c.created(key, caller);
            }
            Flow::Answered(r)
        }
    }
}

/// The carrier behind HTTP, called with no transaction open; what it answered is counted for
/// `/metrics` as the in-process carrier counts its own.
async fn remote_purchase(app: &App, key: Option<&str>, a: &Attempt) -> CarrierReply {
    let Some(remote) = &app.remote_carrier else {
        unreachable!("a remote carrier call without --carrier-url");
    };
    let body = PurchaseBody {
        order_id: a.label.order_id,
        parcel_no: a.label.parcel_no,
        label_version: a.label.label_version,
        service: a.label.service,
        weight_g: a.label.weight_g,
    };
    let reply = remote
        .purchase(key, &body, &app.clock, app.engine.carrier_timeout_ms)
        .await;
    let mut seen = app.remote_seen.lock().unwrap_or_else(|p| p.into_inner());
    match &reply.result {
        CarrierResult::Label { replayed: true, .. } => seen.replays += 1,
        CarrierResult::Label { label, .. } => {
            seen.purchases += 1;
            seen.billed_cents += label.cost_cents;
        }
        CarrierResult::Refused { .. } if reply.hung => {}
        CarrierResult::Refused { .. } | CarrierResult::KeyReused => seen.refusals += 1,
    }
    reply
}

/// Under `--key-scope global`, a saved label replayed to a caller other than its creator.
fn note_replay(app: &App, caller: &str, key: Option<&str>, r: &Response) {
    if r.replayed
        && r.status == 201
        && let (Some(c), Some(key)) = (&app.creators, key)
        && c.replayed_to_another(key, caller)
    {
        app.metrics.cross_caller_replays.inc();
    }
}

/// The engine's answer as HTTP: saved responses byte for byte, errors as problem details.
fn engine_answer(app: &App, r: Response) -> Answer {
    let outcome = outcome_name(r.outcome);
    if r.unlabelled_purchase {
        app.metrics.unlabelled_purchases.inc();
    }
    if r.replayed || matches!(r.outcome, Outcome::Created | Outcome::CarrierRefused) {
        // What the key saved (a label, or a final carrier refusal) and its replays: the very
        // bytes the store holds, so a replay is byte-identical to the first answer.
        let status = StatusCode::from_u16(r.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, r.body).into_response();
        let h = response.headers_mut();
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        if r.replayed {
            h.insert("idempotent-replayed", HeaderValue::from_static("true"));
        }
        return Answer { response, outcome };
    }
    let engine_body: serde_json::Value = serde_json::from_str(&r.body).unwrap_or_default();
    let code = r.code.as_deref().unwrap_or("internal_error");
    let mut p = match r.outcome {
        Outcome::InProgress => {
            let wall = app.clock.wall(r.retry_after_ms.unwrap_or(0));
            Problem::new(
                code,
                "an attempt with this key holds the lease; retry with the same key and body after Retry-After",
            )
            .retry_after_ms(wall.as_millis() as u64)
        }
        _ => Problem::new(
            code,
            engine_body["message"]
                .as_str()
                .unwrap_or(problem::kind(code).title),
        ),
    };
    if let Some(field) = engine_body["field"].as_str() {
        p = p.with("field", field);
    }
    if r.outcome == Outcome::CarrierTimeout {
        p = p.retry_after_ms(0);
    }
    Answer {
        outcome,
        response: p.into_response(),
    }
}

fn outcome_name(o: Outcome) -> &'static str {
    match o {
        Outcome::Created => "created",
        Outcome::Replayed => "replayed",
        Outcome::InProgress => "request_in_progress",
        Outcome::KeyReused => "idempotency_key_reused",
        Outcome::KeyMissing => "idempotency_key_missing",
        Outcome::KeyInvalid => "idempotency_key_invalid",
        Outcome::ValidationFailed => "validation_failed",
        Outcome::CarrierTimeout => "carrier_timeout",
        Outcome::CarrierRefused => "carrier_refused",
    }
}

/// A job that got no answer: never a 201, always with a retry hint.
fn job_problem(app: &App, e: JobError) -> Problem {
    match e {
        JobError::Store(m) => {
            app.store_ok.store(false, Ordering::Relaxed);
            Problem::new("store_unavailable", m).retry_after_ms(1000)
        }
        JobError::Lost(m) => {
            app.lost_hold();
            Problem::new("store_unavailable", m).retry_after_ms(1000)
        }
        JobError::Overloaded => Problem::new(
            "overloaded",
            format!(
                "all {} writers are busy and the queue is full",
                app.writers.count
            ),
        )
        .retry_after_ms(1000),
        JobError::Stopped => {
            Problem::new("shutting_down", "the server is shutting down").retry_after_ms(1000)
        }
    }
}
