//! The seed's client, one task per intent, on the wall clock: one key for every attempt, a
//! deadline per attempt, backoff with full jitter after a 409 (never sooner than its
//! `Retry-After`), a 5xx or a failed connection, and after silence (a timeout, or a reply the
//! run chose to lose) a late retry drawn from the late-retry distribution, divided by the time
//! scale. The same rules as the simulated client (`sim::replay::client`), on real sockets.
//!
//! An attempt whose deadline passes is not cancelled: the tool keeps listening for up to
//! `observe` more, so a label the server made for an attempt its client gave up on is still
//! seen and compared with what later attempts get. That is the "checked from outside": the
//! client behaves as the seed's does, and the tool sees every answer.

use super::body::{Body, error_kind, read_capped, size_text};
use super::outcome::Outcome;
use super::request::Parcel;
use super::tally::End;
use super::{Ctx, KeyPolicy};
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// What the client makes of one attempt.
enum Heard {
    /// A 2xx, or a final refusal: the intent is over.
    Final(End),
    /// Try again after this long (409, 429, 5xx, a failed connection).
    Backoff(Duration),
    /// Nothing heard by the deadline: a late retry from the distribution.
    Silence,
}

/// An answer as the tool reads it.
struct Reply {
    status: u16,
    replayed: bool,
    retry_after: Option<Duration>,
    /// `None` when the body passed `--max-body`: an error, whatever the status.
    body: Option<Vec<u8>>,
}

/// Runs intent `id`, whose first attempt is due at `due`.
pub(super) async fn intent(ctx: Arc<Ctx>, id: u64, due: Instant, live: Arc<()>) {
    let mut rng = StdRng::seed_from_u64(crate::payload::fnv64(&[
        b"load-intent",
        &ctx.seed.to_le_bytes(),
        &id.to_le_bytes(),
    ]));
    let caller = if ctx.callers.is_empty() {
        None
    } else {
        Some(rng.random_range(0..ctx.callers.len()))
    };
    let caller_name = caller.map_or("-", |c| ctx.callers[c].name.as_str());
    let parcel = Parcel {
        order: ctx.first_order + id as i64,
        parcel: 1,
        version: 1,
    };
    let mut key = match ctx.key_policy {
        KeyPolicy::Derived => ctx.template.key_for(&parcel),
        // Drawn and kept before the first attempt, as the seed asks of a random key.
        KeyPolicy::RandomSaved | KeyPolicy::NewPerAttempt => random_key(&mut rng),
    };
    let start_s = ctx.at_s(due);
    let first_due = due;
    let mut due = due;
    let Ok(permit) = ctx.permits.clone().try_acquire_owned() else {
        ctx.lock().dropped(start_s);
        return;
    };
    ctx.lock().start(id, caller_name, &key, start_s);
    let mut permit = Some(permit);
    for attempt in 1..=ctx.max_attempts {
        if attempt > 1 {
            if due > ctx.end() {
                return ctx.lock().end(id, End::RetryNotSent);
            }
            tokio::time::sleep_until(due).await;
            let Ok(p) = ctx.permits.clone().try_acquire_owned() else {
                let mut c = ctx.lock();
                c.counts.attempts_dropped += 1;
                return c.end(id, End::AttemptDropped);
            };
            permit = Some(p);
            if ctx.key_policy == KeyPolicy::NewPerAttempt {
                key = random_key(&mut rng);
            }
        }
        let lose = rng.random::<f64>() < ctx.lose_reply_fraction;
        let send = Send {
            id,
            attempt,
            key: &key,
            caller,
            parcel: &parcel,
            due,
            lose,
            live: &live,
        };
        let heard = send_attempt(&ctx, send, permit.take()).await;
        due = match heard {
            Heard::Final(end) => return ctx.lock().end(id, end),
            Heard::Backoff(wait) => {
                let cap = ctx
                    .backoff_cap
                    .min(ctx.backoff_base * (1u32 << attempt.min(20)));
                let jitter = cap.mul_f64(rng.random::<f64>());
                let wait = jitter.max(wait).max(Duration::from_millis(1));
                if Instant::now() + wait > ctx.end() {
                    let mut c = ctx.lock();
                    c.counts.backoff_retries_not_sent += 1;
                    return c.end(id, End::RetryNotSent);
                }
                Instant::now() + wait
            }
            Heard::Silence => {
                // From the first attempt for the first retry, as the distribution is "time
                // since the first attempt"; from the attempt that went silent after that.
                let from = if attempt == 1 { first_due } else { due };
                let delay_s = ctx.retry.sample(&mut rng) / ctx.time_scale;
                let at = (from + Duration::from_secs_f64(delay_s.min(1e9))).max(Instant::now());
                if attempt < ctx.max_attempts {
                    let mut c = ctx.lock();
                    c.counts.late_retries_scheduled += 1;
                    if at > ctx.end() {
                        c.counts.late_retries_not_sent += 1;
                    }
                }
                at
            }
        };
    }
    ctx.lock().end(id, End::Exhausted);
}

/// One attempt's particulars.
struct Send<'a> {
    id: u64,
    attempt: u32,
    key: &'a str,
    caller: Option<usize>,
    parcel: &'a Parcel,
    due: Instant,
    /// The network loses the reply: the tool reads it, the client acts as if it heard nothing.
    lose: bool,
    /// Held by whatever still runs for the intent, so the run waits for it.
    live: &'a Arc<()>,
}

async fn send_attempt(
    ctx: &Arc<Ctx>,
    s: Send<'_>,
    permit: Option<tokio::sync::OwnedSemaphorePermit>,
) -> Heard {
    let request = match build(ctx, &s) {
        Ok(r) => r,
        Err(e) => {
            ctx.lock().error(format!("request: {e}"));
            return Heard::Final(End::Refused);
        }
    };
    ctx.lock().sent(s.id, s.attempt, s.key);
    let client = ctx.client.clone();
    let max_body = ctx.max_body;
    let mut answer = Box::pin(async move {
        let response = client.execute(request).await?;
        let status = response.status().as_u16();
        let headers = response.headers();
        let replayed = headers
            .get("idempotent-replayed")
            .and_then(|v| v.to_str().ok())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("true"));
        let retry_after = headers
            .get(reqwest::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.trim().parse::<f64>().ok())
            .filter(|s| s.is_finite() && *s >= 0.0)
            .map(|s| Duration::from_secs_f64(s.min(86_400.0)));
        let body = match read_capped(response, max_body).await? {
            Body::Read(b) => Some(b),
            Body::TooLarge => None,
        };
        Ok::<Reply, reqwest::Error>(Reply {
            status,
            replayed,
            retry_after,
            body,
        })
    });
    // Bound first, so the borrow of `answer` ends before it may move to the observer.
    let in_time = tokio::time::timeout(ctx.deadline, &mut answer).await;
    match in_time {
        Ok(result) => {
            drop(permit);
            let latency_us = s.due.elapsed().as_micros() as u64;
            heard(ctx, &s, result, latency_us)
        }
        Err(_) => {
            let now_s = ctx.at_s(Instant::now());
            ctx.lock()
                .attempt(Outcome::Timeout, s.due.elapsed().as_micros() as u64, now_s);
            // Keep listening, holding the pool's slot: the connection is still open.
            let (ctx, id, observe, live) = (ctx.clone(), s.id, ctx.observe, s.live.clone());
            let due = s.due;
            tokio::spawn(async move {
                let _live = live;
                if let Ok(Ok(reply)) = tokio::time::timeout(observe, answer).await {
                    let latency_us = due.elapsed().as_micros() as u64;
                    let now_s = ctx.at_s(Instant::now());
                    let mut c = ctx.lock();
                    let status = reply.body.as_ref().map(|_| reply.status);
                    c.late_answer(status, latency_us, now_s);
                    match (&reply.body, status) {
                        (Some(body), Some(status)) => {
                            c.status(status);
                            if (200..300).contains(&status) {
                                c.label(id, ctx.template.identity_of(body));
                            }
                        }
                        _ => c.error(too_large(ctx.max_body)),
                    }
                }
                drop(permit);
            });
            Heard::Silence
        }
    }
}

/// What the client does with an answer heard in time.
fn heard(ctx: &Ctx, s: &Send<'_>, result: Result<Reply, reqwest::Error>, latency_us: u64) -> Heard {
    let now_s = ctx.at_s(Instant::now());
    let mut c = ctx.lock();
    let reply = match result {
        Ok(r) => r,
        Err(e) => {
            c.attempt(Outcome::Error, latency_us, now_s);
            c.error(error_kind(&e));
            return Heard::Backoff(Duration::ZERO);
        }
    };
    let status = reply.status;
    let Some(body) = &reply.body else {
        // Larger than `--max-body`: read no further, as a body that failed to arrive.
        c.attempt(Outcome::Error, latency_us, now_s);
        c.error(too_large(ctx.max_body));
        return Heard::Backoff(Duration::ZERO);
    };
    c.status(status);
    let outcome = match status {
        200..=299 if reply.replayed => Outcome::Replay,
        200..=299 => Outcome::FirstRun,
        409 => Outcome::Conflict,
        _ => Outcome::Error,
    };
    c.attempt(outcome, latency_us, now_s);
    if outcome == Outcome::Error {
        c.error(format!("HTTP {status}"));
    }
    if (200..300).contains(&status) {
        c.label(s.id, ctx.template.identity_of(body));
    }
    if status == 422 {
        c.counts.unexpected_422 += 1;
    }
    if s.lose {
        c.counts.lost_replies += 1;
        return Heard::Silence;
    }
    match status {
        200..=299 => Heard::Final(End::Labelled),
        409 | 429 | 500..=599 => Heard::Backoff(reply.retry_after.unwrap_or(Duration::ZERO)),
        _ => Heard::Final(End::Refused),
    }
}

/// The request of one attempt.
fn build(ctx: &Ctx, s: &Send<'_>) -> anyhow::Result<reqwest::Request> {
    let t = &ctx.template;
    let mut request = ctx
        .client
        .request(t.method.clone(), ctx.url.clone())
        .timeout(ctx.deadline + ctx.observe)
        .header(t.key_header.clone(), t.key_header_value(s.key)?)
        .body(t.body_for(s.parcel, s.key));
    for (name, value) in &t.headers {
        request = request.header(name.clone(), value.clone());
    }
    if let Some(c) = s.caller {
        request = request.bearer_auth(&ctx.callers[c].token);
    }
    Ok(request.build()?)
}

/// The error kind of an answer whose body passed `--max-body`.
fn too_large(max_body: u64) -> String {
    format!("body: larger than --max-body ({})", size_text(max_body))
}

/// A UUIDv4 from the intent's own random draws, so a seed gives the same keys.
fn random_key(rng: &mut StdRng) -> String {
    uuid::Builder::from_random_bytes(rng.random())
        .into_uuid()
        .to_string()
}
