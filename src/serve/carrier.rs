//! The carrier as a real hop (`idemcalc carrier --listen`, `idemcalc serve --carrier-url`).
//!
//! In process, the engine's carrier answers at once and its latency is waited out by the
//! caller. Behind HTTP the same simulated carrier (its own key store, latency, hangs, refusals,
//! billing ledger) answers after its latency on the wall clock (divided by `--time-scale`), and
//! the label service calls it with the derived key and its carrier timeout, as the seed's
//! service calls a real carrier: a reply that does not come in time is a timeout, whatever
//! the carrier did meanwhile, and the derived key makes the next attempt's call safe.
//!
//! The wire: `POST /v1/labels` with `Idempotency-Key: <the derived key>` (absent: a call
//! without a key) and `{"order_id", "parcel_no", "label_version", "service", "weight_g"}`;
//! 201 with `{"label_id", "tracking_no", "cost_cents"}` (and `Idempotent-Replayed: true` for a
//! key seen within the carrier's window), 422 with `{"reason"}` for a refusal (nothing bought;
//! `"idempotency_key_reused"` when the key was used within the window for another purchase).
//! `GET /v1/invoice`: every billed purchase as JSON, for reconciling invoice lines against
//! labels (the seed's "carrier invoice lines with no matching label"); at most `--invoice-lines`
//! of the latest, with `Idemcalc-Invoice-Dropped: N` when older ones were dropped.

use crate::carrier::{
    Carrier, CarrierConfig, CarrierLabel, CarrierReply, CarrierResult, INVOICE_DROPPED,
    InvoiceLine, KEY_REUSED, Purchase, Service,
};
use crate::clock::ScaledClock;
use crate::clock::{Clock as _, Millis};
use axum::Json;
use axum::extract::State;
use axum::http::{HeaderValue, StatusCode};
use axum::response::IntoResponse;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// The header that says a reply is the one an earlier call with the same key got.
const REPLAYED: &str = "idempotent-replayed";

/// What the label service sends the carrier.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PurchaseBody {
    pub order_id: i64,
    pub parcel_no: i64,
    pub label_version: i64,
    pub service: Service,
    pub weight_g: f64,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
struct RefusalBody {
    reason: String,
}

/// A running carrier's settings.
pub struct CarrierServeConfig {
    pub listen: SocketAddr,
    pub carrier: CarrierConfig,
    /// The carrier's clock (its key window, its latencies) runs this many times faster than
    /// the wall, as `serve --time-scale` does for the engine.
    pub time_scale: f64,
    /// `--invoice-lines`: the most invoice lines kept; the oldest go first.
    pub invoice_lines: usize,
}

struct CarrierApp {
    carrier: Carrier,
    clock: ScaledClock,
}

/// Runs the carrier until SIGTERM or Ctrl-C. `started` gets the bound address once it accepts
/// connections.
pub fn run(config: CarrierServeConfig, started: impl FnOnce(SocketAddr)) -> anyhow::Result<()> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .thread_name("carrier-http")
        .build()?;
    let app = Arc::new(CarrierApp {
        carrier: Carrier::new(config.carrier)
            .forgetting_sales()
            .with_ledger_limit(config.invoice_lines),
        clock: ScaledClock::new(config.time_scale),
    });
    runtime.block_on(async {
        use axum::routing::{get, post};
        let router = axum::Router::new()
            .route("/v1/labels", post(buy))
            .route("/v1/invoice", get(invoice))
            .route("/healthz", get(|| async { "ok\n" }))
            .with_state(app);
        let listener = tokio::net::TcpListener::bind(config.listen)
            .await
            .map_err(|e| anyhow::anyhow!("--listen {}: {e}", config.listen))?;
        let stop = super::shutdown_signal()?;
        started(listener.local_addr()?);
        serve_with_header_deadline(listener, router, stop).await;
        Ok(())
    })
}

/// How long a connection may take to send a request head: a slow-loris connection, or an idle
/// keep-alive one, is closed after it, as `serve --header-timeout` does.
const HEADER_TIMEOUT: Duration = Duration::from_secs(10);

/// axum's own `serve` sets no deadline on a request head; hyper's connection builder does.
async fn serve_with_header_deadline(
    listener: tokio::net::TcpListener,
    router: axum::Router,
    stop: impl std::future::Future<Output = ()>,
) {
    use hyper_util::rt::{TokioIo, TokioTimer};
    use tower::Service as _;
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut http1 = hyper::server::conn::http1::Builder::new();
    http1
        .timer(TokioTimer::new())
        .header_read_timeout(HEADER_TIMEOUT)
        .keep_alive(true);
    tokio::pin!(stop);
    loop {
        let stream = tokio::select! {
            a = listener.accept() => match a {
                Ok((stream, _)) => stream,
                Err(_) => {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                }
            },
            () = &mut stop => break,
        };
        let _ = stream.set_nodelay(true);
        let router = router.clone();
        let service =
            hyper::service::service_fn(move |req: hyper::Request<hyper::body::Incoming>| {
                let mut router = router.clone();
                async move { router.call(req.map(axum::body::Body::new)).await }
            });
        let conn = graceful.watch(http1.serve_connection(TokioIo::new(stream), service));
        tokio::spawn(async move {
            let _ = conn.await;
        });
    }
    drop(listener);
    let _ = tokio::time::timeout(HEADER_TIMEOUT, graceful.shutdown()).await;
}

/// The most of a purchase's body that is read: a purchase is about a hundred bytes.
const MAX_PURCHASE_BODY: usize = 64 * 1024;

/// A refusal as the carrier words them: `{"reason"}`.
fn refusal(status: StatusCode, reason: impl Into<String>) -> axum::response::Response {
    let reason = reason.into();
    (status, Json(RefusalBody { reason })).into_response()
}

/// The purchase in a request's body. The body must arrive within the head's deadline, and a
/// declared length above the ceiling is refused before a byte is read: hyper bounds the head
/// only, so a stalled body, or one announced at a terabyte, held its connection for good.
async fn purchase_body(
    request: axum::extract::Request,
) -> Result<PurchaseBody, axum::response::Response> {
    use axum::extract::FromRequest as _;
    let (parts, body) = request.into_parts();
    let declared = parts
        .headers
        .get(axum::http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok()?.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_PURCHASE_BODY as u64) {
        return Err(refusal(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!("a purchase is at most {MAX_PURCHASE_BODY} bytes"),
        ));
    }
    let read = tokio::time::timeout(
        HEADER_TIMEOUT,
        axum::body::to_bytes(body, MAX_PURCHASE_BODY),
    );
    let bytes = match read.await {
        Err(_) => {
            return Err(refusal(
                StatusCode::REQUEST_TIMEOUT,
                format!(
                    "the body did not arrive within {}",
                    crate::duration::format_secs(HEADER_TIMEOUT.as_secs_f64())
                ),
            ));
        }
        Ok(Err(e)) => {
            return Err(refusal(
                StatusCode::BAD_REQUEST,
                format!("the body could not be read: {e}"),
            ));
        }
        Ok(Ok(bytes)) => bytes,
    };
    let request = axum::extract::Request::from_parts(parts, axum::body::Body::from(bytes));
    match Json::<PurchaseBody>::from_request(request, &()).await {
        Ok(Json(body)) => Ok(body),
        Err(e) => Err(refusal(StatusCode::BAD_REQUEST, e.body_text())),
    }
}

/// One purchase: booked at once (a reply lost later still cost money), answered after the
/// carrier's latency.
async fn buy(
    State(app): State<Arc<CarrierApp>>,
    request: axum::extract::Request,
) -> axum::response::Response {
    let headers = request.headers().clone();
    let body = match purchase_body(request).await {
        Ok(body) => body,
        Err(refused) => return refused,
    };
    let refuse = |reason: &str| refusal(StatusCode::BAD_REQUEST, reason);
    let mut keys = headers.get_all("idempotency-key").iter();
    let key = match (keys.next().map(HeaderValue::to_str), keys.next()) {
        (_, Some(_)) => return refuse("more than one Idempotency-Key header"),
        (Some(Ok("")), None) => return refuse("the Idempotency-Key is empty"),
        (Some(Ok(k)), None) => Some(k.to_string()),
        (Some(Err(_)), None) => return refuse("Idempotency-Key is not visible ASCII"),
        (None, _) => None,
    };
    if body.order_id < 1 || body.parcel_no < 1 || body.label_version < 1 {
        return refuse("order_id, parcel_no and label_version are positive integers");
    }
    if !(body.weight_g.is_finite() && body.weight_g > 0.0) {
        return refuse("weight_g is a positive number of grams");
    }
    let reply = app.carrier.purchase(
        &Purchase {
            key: key.as_deref(),
            order_id: body.order_id,
            parcel_no: body.parcel_no,
            label_version: body.label_version,
            service: body.service,
            weight_g: body.weight_g,
        },
        app.clock.now_ms(),
    );
    // A zero sleep would still wait for the timer's next millisecond tick.
    let latency = app.clock.wall(reply.latency_ms);
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    match reply.result {
        CarrierResult::Label { label, replayed } => {
            let mut r = (StatusCode::CREATED, Json(label)).into_response();
            if replayed {
                r.headers_mut()
                    .insert(REPLAYED, HeaderValue::from_static("true"));
            }
            r
        }
        CarrierResult::KeyReused => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(RefusalBody {
                reason: KEY_REUSED.to_string(),
            }),
        )
            .into_response(),
        CarrierResult::Refused { reason } => (
            StatusCode::UNPROCESSABLE_ENTITY,
            Json(RefusalBody { reason }),
        )
            .into_response(),
    }
}

async fn invoice(State(app): State<Arc<CarrierApp>>) -> axum::response::Response {
    let lines: Vec<InvoiceLine> = app.carrier.ledger();
    let dropped = app.carrier.ledger_dropped();
    let mut r = Json(lines).into_response();
    if dropped > 0 {
        r.headers_mut()
            .insert(INVOICE_DROPPED, HeaderValue::from(dropped));
    }
    r
}

/// The label service's side of the hop: calls a carrier at `url` with the derived key and the
/// engine's carrier timeout (on the engine's clock, so divided by `--time-scale` on the wall).
pub struct RemoteCarrier {
    client: reqwest::Client,
    labels: reqwest::Url,
}

impl RemoteCarrier {
    pub fn new(url: &reqwest::Url) -> anyhow::Result<Self> {
        crate::net::install_tls_provider();
        let labels = url
            .join("v1/labels")
            .map_err(|e| anyhow::anyhow!("--carrier-url {url}: {e}"))?;
        let client = reqwest::Client::builder()
            .pool_idle_timeout(Duration::from_secs(30))
            .build()?;
        Ok(RemoteCarrier { client, labels })
    }

    /// One call. Whatever keeps an answer from arriving within `timeout_ms` (the carrier's
    /// latency or hang, a refused connection, a 5xx) is a timeout to the engine: it cannot tell
    /// whether the carrier bought, so it hands the lease back and the next attempt calls again
    /// with the same key. A 422 is the carrier's refusal (nothing bought).
    pub async fn purchase(
        &self,
        key: Option<&str>,
        body: &PurchaseBody,
        clock: &ScaledClock,
        timeout_ms: Millis,
    ) -> CarrierReply {
        let started = Instant::now();
        let mut request = self
            .client
            .post(self.labels.clone())
            .timeout(clock.wall(timeout_ms))
            .header(reqwest::header::CONTENT_TYPE, "application/json")
            .body(serde_json::to_vec(body).unwrap_or_default());
        if let Some(k) = key {
            request = request.header("Idempotency-Key", k);
        }
        let answered = async {
            let response = request.send().await.ok()?;
            let status = response.status();
            let replayed = response.headers().contains_key(REPLAYED);
            if status == StatusCode::CREATED {
                let label: CarrierLabel =
                    serde_json::from_slice(&response.bytes().await.ok()?).ok()?;
                Some(CarrierResult::Label { label, replayed })
            } else if status == StatusCode::UNPROCESSABLE_ENTITY {
                let r: RefusalBody = serde_json::from_slice(&response.bytes().await.ok()?).ok()?;
                Some(if r.reason == KEY_REUSED {
                    CarrierResult::KeyReused
                } else {
                    CarrierResult::Refused { reason: r.reason }
                })
            } else {
                None
            }
        }
        .await;
        // The time the engine's clock saw pass.
        let latency_ms = clock.engine_ms(started.elapsed());
        match answered {
            Some(result) => CarrierReply {
                result,
                latency_ms: latency_ms.min(timeout_ms),
                hung: false,
            },
            None => CarrierReply {
                result: CarrierResult::Refused {
                    reason: "no answer from the carrier".into(),
                },
                // Past the timeout: the engine answers 503 and hands the lease back.
                latency_ms: timeout_ms + 1,
                hung: true,
            },
        }
    }
}
