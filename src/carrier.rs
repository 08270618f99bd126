//! The simulated carrier: the downstream API that sells labels.
//!
//! It is a separate service with its own idempotency store on the derived key (`carrier:` + our
//! key) and its own retention window, and a billing ledger with one invoice line per purchase, so
//! a duplicate purchase is a countable line with no matching label on our side. It is shared by
//! every engine in a run (`Carrier` is `Sync`), as a real carrier is shared by every worker.
//! The ledger can also go to a file line by line as each purchase is booked ([`LedgerFile`],
//! `simulate --carrier-ledger`), so a run killed with SIGKILL leaves its purchases behind to be
//! checked against the labels its store kept.

use crate::clock::Millis;
use bloomfilter::Bloom;
use rand::distr::Distribution as _;
use rand::rngs::StdRng;
use rand::{RngExt as _, SeedableRng};
use serde::{Deserialize, Serialize};
use sha2::{Digest as _, Sha256};
use statrs::distribution::{ContinuousCDF as _, LogNormal};
use std::collections::{HashMap, VecDeque};
use std::fs::File;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// The carrier latency `timeout_fraction` is calibrated against: `simulate`'s defaults, 30 ms
/// median and 100 ms p99 (log-normal).
pub const SEED_CARRIER_LATENCY: Latency = Latency::LogNormal {
    median_ms: 30.0,
    p99_ms: 100.0,
};

/// The carrier's own limit on an idempotency key, as Stripe's: 255 characters. A longer key is
/// refused, never truncated, since truncation would merge two keys that share a prefix.
pub const MAX_KEY_BYTES: usize = 255;

/// The tracking number of the `nth` label sold for `order_id`. The first carries the seed's
/// form, `GRD000918273` (the service's prefix, the order zero-padded to nine digits); later
/// ones (another parcel, a reprint or a duplicate) get a suffix, `GRD000918273-2`, so two boxes
/// never share a number. Built with `itoa` rather than `format!`: it runs on every purchase.
pub fn tracking_no(service: Service, order_id: i64, nth: u32) -> String {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(order_id.unsigned_abs());
    let mut out = String::with_capacity(3 + 1 + 9.max(digits.len()) + 11);
    out.push_str(service.prefix());
    // `{:09}`'s form: a sign counts toward the nine places.
    let width: usize = if order_id < 0 {
        out.push('-');
        8
    } else {
        9
    };
    out.extend(std::iter::repeat_n('0', width.saturating_sub(digits.len())));
    out.push_str(digits);
    if nth != 1 {
        out.push('-');
        out.push_str(itoa::Buffer::new().format(nth));
    }
    out
}

/// The carrier's id of its `n`th sale, `L-n`.
fn label_id(n: u64) -> String {
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(n);
    let mut out = String::with_capacity(2 + digits.len());
    out.push_str("L-");
    out.push_str(digits);
    out
}

/// The key the label service sends the carrier for `(caller_id, idem_key)`.
///
/// The seed derives `'carrier:' || key`; our keys are scoped per caller and the carrier sees us
/// as one client, so the caller must be part of it, and the join must be unambiguous: keys with
/// `:` are normal (the seed's own `label:918273:1:v1`), so a plain `caller:key` would make
/// caller `acme` with key `eu:order-1` and caller `acme:eu` with key `order-1` one carrier key.
/// The caller is therefore length-prefixed (`carrier:4:acme:eu:order-1` against
/// `carrier:7:acme:eu:order-1`), which decodes one way only. When that does not fit the carrier's
/// 255-byte limit (a 255-byte key already does not), the same text is hashed instead:
/// `carrier:sha256:` and 64 hex digits, 79 bytes. The two forms cannot meet: the readable one has
/// a digit after `carrier:`, the hashed one an `s`.
pub fn carrier_key(caller_id: &str, idem_key: &str) -> String {
    // Built by hand rather than with `format!`: it runs on every carrier call (issue 40).
    let mut length = itoa::Buffer::new();
    let length = length.format(caller_id.len());
    let mut readable = String::with_capacity(
        "carrier::".len() + length.len() + caller_id.len() + 1 + idem_key.len(),
    );
    for part in ["carrier:", length, ":", caller_id, ":", idem_key] {
        readable.push_str(part);
    }
    if readable.len() <= MAX_KEY_BYTES {
        return readable;
    }
    let digest = Sha256::digest(readable.as_bytes());
    format!("carrier:sha256:{}", hex::encode(digest))
}

/// The carrier services, each with the tracking-number prefix the seed's `GRD000918273` shows.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Service {
    Ground,
    Express,
    Overnight,
}

impl Service {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "ground" => Some(Service::Ground),
            "express" => Some(Service::Express),
            "overnight" => Some(Service::Overnight),
            _ => None,
        }
    }

    /// The word clients send, as `parse` reads it.
    pub fn name(self) -> &'static str {
        match self {
            Service::Ground => "ground",
            Service::Express => "express",
            Service::Overnight => "overnight",
        }
    }

    pub fn prefix(self) -> &'static str {
        match self {
            Service::Ground => "GRD",
            Service::Express => "EXP",
            Service::Overnight => "OVN",
        }
    }
}

/// How long the carrier takes to answer.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum Latency {
    Fixed {
        ms: Millis,
    },
    /// Log-normal, described by its median and 99th percentile because those are the two
    /// figures a carrier's status page or an APM tool shows.
    LogNormal {
        median_ms: f64,
        p99_ms: f64,
    },
}

impl Latency {
    /// The log-normal's (μ, σ) of ln(latency in ms); `None` for a fixed latency.
    fn log_normal(&self) -> Option<(f64, f64)> {
        match *self {
            Latency::Fixed { .. } => None,
            Latency::LogNormal { median_ms, p99_ms } => {
                // p99 of a log-normal is median · exp(2.326 σ).
                let sigma = crate::stats::log_normal_sigma(median_ms, p99_ms).max(1e-9);
                Some((median_ms.max(1e-3).ln(), sigma))
            }
        }
    }

    /// Probability that one call's latency, rounded to whole milliseconds as the carrier
    /// rounds it, is above `ms`.
    pub fn p_above_ms(&self, ms: Millis) -> f64 {
        match *self {
            Latency::Fixed { ms: fixed } => f64::from(u8::from(fixed > ms)),
            Latency::LogNormal { .. } => {
                let (mu, sigma) = self.log_normal().expect("log-normal");
                LogNormal::new(mu, sigma)
                    .map(|d| 1.0 - d.cdf(ms as f64 + 0.5))
                    .unwrap_or(0.0)
            }
        }
    }

    /// The latency at quantile `p`, rounded to whole milliseconds: inverse-CDF sampling, so a
    /// caller can draw from the part of the distribution below or above a threshold (the
    /// simulator stratifies on "this call will outlast the client's deadline").
    pub fn quantile_ms(&self, p: f64) -> Millis {
        match *self {
            Latency::Fixed { ms } => ms,
            Latency::LogNormal { .. } => {
                let (mu, sigma) = self.log_normal().expect("log-normal");
                LogNormal::new(mu, sigma)
                    .map(|d| d.inverse_cdf(p.clamp(1e-15, 1.0 - 1e-15)).round() as Millis)
                    .unwrap_or(0)
            }
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CarrierConfig {
    pub latency: Latency,
    /// Fraction of calls on which the carrier hangs past any client timeout, after the purchase
    /// went through: the reply is lost, the money is not.
    pub hang_fraction: f64,
    /// How long a hung call takes before its (late) answer.
    pub hang_ms: Millis,
    /// Fraction of calls the carrier refuses outright (nothing bought, nothing billed).
    pub error_fraction: f64,
    /// The carrier's own key window for a repeated key. 24 h, like Stripe's, by default.
    pub window_ms: Millis,
    /// Price of one label, in cents: the seed's $6.00.
    pub label_price_cents: i64,
    pub seed: u64,
}

impl Default for CarrierConfig {
    fn default() -> Self {
        Self {
            // The latencies the seed's 0.1 % timeout rate is calibrated against.
            latency: SEED_CARRIER_LATENCY,
            hang_fraction: 0.0,
            hang_ms: 60_000,
            error_fraction: 0.0,
            window_ms: crate::duration::DAY_MS,
            label_price_cents: 600,
            seed: 1,
        }
    }
}

/// What the label service sends to the carrier.
#[derive(Debug, Clone)]
pub struct Purchase<'a> {
    /// The derived key; `None` reproduces "downstream call sent without a key".
    pub key: Option<&'a str>,
    pub order_id: i64,
    pub parcel_no: i64,
    pub label_version: i64,
    pub service: Service,
    pub weight_g: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CarrierLabel {
    pub label_id: String,
    pub tracking_no: String,
    pub cost_cents: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub enum CarrierResult {
    /// A label: bought now, or (`replayed`) the one the same key bought earlier.
    Label { label: CarrierLabel, replayed: bool },
    /// The key was used within the carrier's window for another purchase (another order,
    /// parcel, version, service or weight): refused, nothing bought, as every idempotent API
    /// refuses a key reused with another request (the IETF draft's 422). Replaying the first
    /// purchase's label would hand one order's label to another.
    KeyReused,
    /// A definitive refusal: nothing was bought.
    Refused { reason: String },
}

/// The header of the carrier's `GET /v1/invoice` (`idemcalc carrier`) that says how many of the
/// oldest lines its `--invoice-lines` limit dropped, so a reconciliation knows it is short.
pub const INVOICE_DROPPED: &str = "idemcalc-invoice-dropped";

/// The wire word for [`CarrierResult::KeyReused`] in a refusal's `reason` (`idemcalc carrier`),
/// the code every status table of this project gives a reused key.
pub const KEY_REUSED: &str = "idempotency_key_reused";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CarrierReply {
    pub result: CarrierResult,
    /// How long the answer takes to come back; the caller compares it with its timeout.
    pub latency_ms: Millis,
    /// The carrier hung after buying (`hang_fraction`): a driver that sets the latency itself
    /// must keep this one.
    pub hung: bool,
}

/// One billed purchase.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InvoiceLine {
    pub at_ms: Millis,
    pub carrier_key: Option<String>,
    pub order_id: i64,
    pub parcel_no: i64,
    pub label_version: i64,
    pub label_id: String,
    pub tracking_no: String,
    pub cost_cents: i64,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct CarrierStats {
    pub purchases: u64,
    pub replays: u64,
    pub refusals: u64,
    pub billed_cents: i64,
    /// Purchases beyond the first for the same (order, parcel, version): labels paid twice.
    pub duplicate_purchases: u64,
    pub keys_held: u64,
}

/// The carrier's maps, hashed with foldhash: SipHash cost a create about 1,000 instructions
/// across its lookups (issue 40), and nothing here iterates a map, so no output depends on the
/// per-process random seed.
type FastMap<K, V> = HashMap<K, V, foldhash::fast::RandomState>;

pub struct Carrier {
    config: CarrierConfig,
    latency: Option<LogNormal>,
    state: Mutex<State>,
}

/// What a key was first used for: a repeat must ask for the same purchase to be replayed.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Asked {
    order_id: i64,
    parcel_no: i64,
    label_version: i64,
    service: Service,
    weight_g: f64,
}

impl Asked {
    fn of(p: &Purchase<'_>) -> Self {
        Self {
            order_id: p.order_id,
            parcel_no: p.parcel_no,
            label_version: p.label_version,
            service: p.service,
            weight_g: p.weight_g,
        }
    }
}

struct State {
    rng: StdRng,
    /// Per key: the label it bought, when the key leaves the window, and what it asked for.
    keys: FastMap<Arc<str>, (CarrierLabel, Millis, Asked)>,
    /// Keys in the order they expire, so forgetting them is a pop from the front.
    expiry: VecDeque<(Millis, Arc<str>)>,
    ledger: VecDeque<InvoiceLine>,
    /// Labels sold per (order, parcel, version), with the last sale's time: the carrier's view
    /// of "more than one label".
    sold: FastMap<(i64, i64, i64), (u32, Millis)>,
    /// Labels sold per order, with the last sale's time, to number a second label's tracking
    /// number.
    per_order: FastMap<i64, (u32, Millis)>,
    /// Set by [`Carrier::forgetting_sales`]: sales leave `sold` and `per_order` a key window
    /// after their parcel's last sale, in the order of this queue.
    forget: Option<Forgetting>,
    stats: CarrierStats,
    keep_ledger: bool,
    /// The most invoice lines kept in memory ([`Carrier::with_ledger_limit`]); older ones are
    /// dropped and counted.
    ledger_limit: Option<usize>,
    ledger_dropped: u64,
    /// Where each invoice line also goes as it is booked, if anywhere.
    file: Option<Arc<LedgerFile>>,
}

impl Carrier {
    pub fn new(config: CarrierConfig) -> Self {
        let latency = config
            .latency
            .log_normal()
            .and_then(|(mu, sigma)| LogNormal::new(mu, sigma).ok());
        let rng = StdRng::seed_from_u64(config.seed);
        Self {
            config,
            latency,
            state: Mutex::new(State {
                rng,
                keys: FastMap::default(),
                expiry: VecDeque::new(),
                ledger: VecDeque::new(),
                sold: FastMap::default(),
                per_order: FastMap::default(),
                forget: None,
                stats: CarrierStats::default(),
                keep_ledger: true,
                ledger_limit: None,
                ledger_dropped: 0,
                file: None,
            }),
        }
    }

    /// Long simulations keep counts only: a ledger of every purchase over days of traffic would
    /// grow without bound, and duplicates are already counted per parcel.
    pub fn without_ledger(self) -> Self {
        self.lock().keep_ledger = false;
        self
    }

    /// For a process that runs indefinitely (`serve`, `idemcalc carrier`): what the carrier
    /// remembers of each parcel's sales (to count a second label, to number its tracking
    /// number) is forgotten a key window after the parcel's last sale, so memory follows the
    /// window's traffic, not every create ever (about 270 B a create before). A parcel sold
    /// again after that is billed as usual but not counted a duplicate here (the invoice has
    /// both lines); an order sold again after the carrier forgot it gets a tracking number
    /// suffixed with its sale's number (`GRD000918273-r57`) whenever a fixed-size Bloom filter
    /// of the orders ever sold says it may have had one, so two boxes still never share one.
    /// A simulation keeps everything: it is finite, and its counts must be exact.
    pub fn forgetting_sales(self) -> Self {
        self.lock().forget = Some(Forgetting::new());
        self
    }

    /// Keeps at most `lines` invoice lines in memory, dropping the oldest and counting them
    /// ([`Carrier::ledger_dropped`]): `idemcalc carrier`'s `--invoice-lines`.
    pub fn with_ledger_limit(self, lines: usize) -> Self {
        self.lock().ledger_limit = Some(lines.max(1));
        self
    }

    /// Also writes every invoice line to `file` as the purchase is booked, inside the carrier's
    /// lock and before the reply returns: whatever the process does next (a kill included),
    /// the purchase is in the file. Independent of [`Carrier::without_ledger`], which only
    /// drops the lines kept in memory.
    pub fn with_ledger_file(self, file: Arc<LedgerFile>) -> Self {
        self.lock().file = Some(file);
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        // A panic while holding the lock cannot leave the maps half-updated in a way that matters
        // for counting, so a poisoned lock is taken over rather than propagated.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Buys (or replays) a label at `now_ms`. The purchase is booked at the moment of the call:
    /// a reply that arrives late or never still cost money.
    pub fn purchase(&self, p: &Purchase<'_>, now_ms: Millis) -> CarrierReply {
        let mut s = self.lock();
        while let Some((t, _)) = s.expiry.front() {
            if *t > now_ms {
                break;
            }
            let Some((_, key)) = s.expiry.pop_front() else {
                break;
            };
            if s.keys.get(&key).is_some_and(|(_, exp, _)| *exp <= now_ms) {
                s.keys.remove(&key);
            }
        }
        let base_latency = match self.config.latency {
            Latency::Fixed { ms } => ms,
            Latency::LogNormal { .. } => self
                .latency
                .as_ref()
                .map(|d| d.sample(&mut s.rng).round() as Millis)
                .unwrap_or(0),
        };
        let roll: f64 = s.rng.random();
        if roll < self.config.error_fraction {
            s.stats.refusals += 1;
            return CarrierReply {
                result: CarrierResult::Refused {
                    reason: "carrier_unavailable".into(),
                },
                latency_ms: base_latency,
                hung: false,
            };
        }
        if p.key.is_some_and(|k| k.len() > MAX_KEY_BYTES) {
            s.stats.refusals += 1;
            return CarrierReply {
                result: CarrierResult::Refused {
                    reason: "idempotency_key_too_long".into(),
                },
                latency_ms: base_latency,
                hung: false,
            };
        }
        let hung = roll < self.config.error_fraction + self.config.hang_fraction;
        let latency_ms = if hung {
            self.config.hang_ms
        } else {
            base_latency
        };
        if let Some(key) = p.key
            && let Some((label, _, asked)) = s.keys.get(key)
        {
            if *asked != Asked::of(p) {
                s.stats.refusals += 1;
                return CarrierReply {
                    result: CarrierResult::KeyReused,
                    latency_ms: base_latency,
                    hung: false,
                };
            }
            let label = label.clone();
            s.stats.replays += 1;
            return CarrierReply {
                result: CarrierResult::Label {
                    label,
                    replayed: true,
                },
                latency_ms,
                hung,
            };
        }
        s.forget_sales_before(now_ms, self.config.window_ms);
        let label = s.sell(p, now_ms, self.config.label_price_cents);
        if let Some(key) = p.key {
            let expires = now_ms + self.config.window_ms;
            // One allocation for the key, shared by the map and the expiry queue.
            let key: Arc<str> = Arc::from(key);
            s.keys
                .insert(key.clone(), (label.clone(), expires, Asked::of(p)));
            s.expiry.push_back((expires, key));
        }
        CarrierReply {
            result: CarrierResult::Label {
                label,
                replayed: false,
            },
            latency_ms,
            hung,
        }
    }

    pub fn stats(&self) -> CarrierStats {
        let s = self.lock();
        CarrierStats {
            keys_held: s.keys.len() as u64,
            ..s.stats
        }
    }

    /// The invoice lines so far (empty when built `without_ledger`; the latest ones under a
    /// ledger limit).
    pub fn ledger(&self) -> Vec<InvoiceLine> {
        self.lock().ledger.iter().cloned().collect()
    }

    /// Invoice lines dropped by the ledger limit.
    pub fn ledger_dropped(&self) -> u64 {
        self.lock().ledger_dropped
    }

    /// Parcels and orders whose sales the carrier remembers: what [`Carrier::forgetting_sales`]
    /// bounds.
    pub fn remembered_sales(&self) -> (usize, usize) {
        let s = self.lock();
        (s.sold.len(), s.per_order.len())
    }
}

/// What [`Carrier::forgetting_sales`] keeps: the sales in the order they leave memory, and the
/// orders ever sold.
struct Forgetting {
    queue: VecDeque<(Millis, (i64, i64, i64))>,
    orders_ever: Bloom<i64>,
}

/// Orders the Bloom filter of orders ever sold is sized for, at 1 % false positives (about
/// 1.2 MB); past it the rate climbs and more first labels get a sale-number suffix, which keeps
/// tracking numbers unique all the same.
const ORDERS_EVER: usize = 1_000_000;

impl Forgetting {
    fn new() -> Self {
        Self {
            queue: VecDeque::new(),
            orders_ever: Bloom::new_for_fp_rate_with_seed(ORDERS_EVER, 0.01, &[7; 32])
                .expect("a valid Bloom filter size"),
        }
    }
}

impl State {
    /// Forgets the parcels and orders whose last sale is a window old.
    fn forget_sales_before(&mut self, now_ms: Millis, window_ms: Millis) {
        let Some(f) = self.forget.as_mut() else {
            return;
        };
        // The queue holds each sale's time, oldest first.
        while let Some(&(sold_at, parcel)) = f.queue.front() {
            if sold_at + window_ms > now_ms {
                break;
            }
            f.queue.pop_front();
            if self
                .sold
                .get(&parcel)
                .is_some_and(|(_, last)| last + window_ms <= now_ms)
            {
                self.sold.remove(&parcel);
            }
            if self
                .per_order
                .get(&parcel.0)
                .is_some_and(|(_, last)| last + window_ms <= now_ms)
            {
                self.per_order.remove(&parcel.0);
            }
        }
    }

    /// The tracking number of the sale about to be booked: the seed's form for an order's first
    /// label, `-n` for its nth while remembered, `-rN` (N the sale's number) for an order the
    /// carrier forgot but may have sold before.
    fn next_tracking_no(&mut self, p: &Purchase<'_>, now_ms: Millis) -> String {
        let known = self.per_order.contains_key(&p.order_id);
        let k = self.per_order.entry(p.order_id).or_insert((0, now_ms));
        k.0 += 1;
        k.1 = now_ms;
        let nth = k.0;
        match self.forget.as_mut() {
            Some(f) if !known && f.orders_ever.check(&p.order_id) => {
                let mut t = tracking_no(p.service, p.order_id, 1);
                t.push_str("-r");
                t.push_str(itoa::Buffer::new().format(self.stats.purchases));
                t
            }
            Some(f) => {
                f.orders_ever.set(&p.order_id);
                tracking_no(p.service, p.order_id, nth)
            }
            None => tracking_no(p.service, p.order_id, nth),
        }
    }

    fn sell(&mut self, p: &Purchase<'_>, now_ms: Millis, price_cents: i64) -> CarrierLabel {
        self.stats.purchases += 1;
        self.stats.billed_cents += price_cents;
        let parcel = (p.order_id, p.parcel_no, p.label_version);
        let n = self.sold.entry(parcel).or_insert((0, now_ms));
        n.0 += 1;
        n.1 = now_ms;
        if n.0 > 1 {
            self.stats.duplicate_purchases += 1;
        }
        let tracking_no = self.next_tracking_no(p, now_ms);
        if let Some(f) = self.forget.as_mut() {
            f.queue.push_back((now_ms, parcel));
        }
        let label = CarrierLabel {
            label_id: label_id(self.stats.purchases),
            tracking_no,
            cost_cents: price_cents,
        };
        if self.keep_ledger || self.file.is_some() {
            let line = InvoiceLine {
                at_ms: now_ms,
                carrier_key: p.key.map(str::to_string),
                order_id: p.order_id,
                parcel_no: p.parcel_no,
                label_version: p.label_version,
                label_id: label.label_id.clone(),
                tracking_no: label.tracking_no.clone(),
                cost_cents: price_cents,
            };
            if let Some(file) = &self.file {
                file.book(&line);
            }
            if self.keep_ledger {
                self.ledger.push_back(line);
                if self
                    .ledger_limit
                    .is_some_and(|limit| self.ledger.len() > limit)
                {
                    self.ledger.pop_front();
                    self.ledger_dropped += 1;
                }
            }
        }
        label
    }
}

/// The first line of a ledger file: its columns, and what marks the file as idemcalc's.
pub const LEDGER_HEADER: &str =
    "at_ms,carrier_key,order_id,parcel_no,label_version,label_id,tracking_no,cost_cents\n";

/// The carrier's invoice lines as CSV in a file, one line per purchase written as it is booked
/// ([`Carrier::with_ledger_file`]): the carrier's own record of what it sold, which survives the
/// process (the in-memory ledger does not), so a killed run's store can be checked against it.
///
/// Each line is one `write(2)` on an unbuffered file: nothing waits in a buffer for a kill to
/// lose, and a line is never split over two calls a kill could fall between. A failed or short
/// write is kept ([`LedgerFile::error`]), the part of a line a short write left is cut off again,
/// and nothing more is written: a ledger missing a line in its middle would read as a purchase
/// never made. The run checks it and stops.
#[derive(Debug)]
pub struct LedgerFile {
    file: File,
    path: PathBuf,
    /// Bytes in the file: where a short write's part line is cut off.
    written: AtomicU64,
    failed: OnceLock<String>,
}

impl LedgerFile {
    /// Takes an open, empty file (the caller opened it in place, not through a temporary file:
    /// a killed run never gets to rename one) and writes the header.
    pub fn new(file: File, path: &Path) -> std::io::Result<Self> {
        let header = LEDGER_HEADER.as_bytes();
        write_once(&file, header)?;
        Ok(Self {
            file,
            path: path.to_path_buf(),
            written: AtomicU64::new(header.len() as u64),
            failed: OnceLock::new(),
        })
    }

    fn book(&self, line: &InvoiceLine) {
        if self.failed.get().is_some() {
            return;
        }
        let line = csv_line(line);
        match write_once(&self.file, line.as_bytes()) {
            Ok(()) => {
                self.written.fetch_add(line.len() as u64, Ordering::Relaxed);
            }
            Err(e) => {
                // Whole lines only: a short write's part line goes (if the file lets us).
                let _ = self.file.set_len(self.written.load(Ordering::Relaxed));
                let _ = self.failed.set(e.to_string());
            }
        }
    }

    /// Why the ledger stopped taking lines, if it did.
    pub fn error(&self) -> Option<&str> {
        self.failed.get().map(String::as_str)
    }

    pub fn path(&self) -> &Path {
        &self.path
    }
}

/// One `write(2)` of all of `bytes` (again only when interrupted before writing anything): a
/// short write is an error, not a second call.
fn write_once(mut file: &File, bytes: &[u8]) -> std::io::Result<()> {
    let written = loop {
        match file.write(bytes) {
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            other => break other?,
        }
    };
    if written == bytes.len() {
        Ok(())
    } else {
        Err(std::io::Error::other(format!(
            "short write, {written} of {} bytes; is the disk full, or a file size limit reached?",
            bytes.len()
        )))
    }
}

/// An invoice line as CSV (RFC 4180), ending in a newline; a purchase sent without a key has an
/// empty `carrier_key`.
fn csv_line(l: &InvoiceLine) -> String {
    format!(
        "{},{},{},{},{},{},{},{}\n",
        l.at_ms,
        csv_field(l.carrier_key.as_deref().unwrap_or("")),
        l.order_id,
        l.parcel_no,
        l.label_version,
        csv_field(&l.label_id),
        csv_field(&l.tracking_no),
        l.cost_cents
    )
}

/// A text field, quoted (inner quotes doubled) when it holds a comma, quote or line break: a
/// caller's key may hold any of them.
fn csv_field(text: &str) -> std::borrow::Cow<'_, str> {
    if text.contains([',', '"', '\n', '\r']) {
        format!("\"{}\"", text.replace('"', "\"\"")).into()
    } else {
        text.into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The numbers built with `itoa` are the text `format!` wrote before (labels already sold
    /// and saved in a store keep theirs), at every width, sign and suffix.
    #[test]
    fn numbers_are_the_text_format_writes() {
        let orders = [
            0,
            7,
            918_273,
            123_456_789,
            1_234_567_890,
            -1,
            -12_345_678,
            -123_456_789,
            i64::MAX,
            i64::MIN,
        ];
        for service in [Service::Ground, Service::Express, Service::Overnight] {
            for order_id in orders {
                let prefix = service.prefix();
                assert_eq!(
                    tracking_no(service, order_id, 1),
                    format!("{prefix}{order_id:09}")
                );
                for nth in [2, 10, u32::MAX] {
                    assert_eq!(
                        tracking_no(service, order_id, nth),
                        format!("{prefix}{order_id:09}-{nth}")
                    );
                }
            }
        }
        assert_eq!(tracking_no(Service::Ground, 918_273, 1), "GRD000918273");
        for n in [0, 1, 42, u64::MAX] {
            assert_eq!(label_id(n), format!("L-{n}"));
        }
    }

    /// Issue 11, defect 8: `carrier:` + caller + `:` + key made caller `acme` with key
    /// `eu:order-1` and caller `acme:eu` with key `order-1` one carrier key.
    #[test]
    fn derived_carrier_key_is_unambiguous() {
        assert_ne!(
            carrier_key("acme", "eu:order-1"),
            carrier_key("acme:eu", "order-1")
        );
        assert_ne!(carrier_key("a", "b:c"), carrier_key("a:b", "c"));
        assert_eq!(
            carrier_key("fulfilment", "label:918273:1:v1"),
            "carrier:10:fulfilment:label:918273:1:v1"
        );
        // A 255-byte key (the most the label service accepts) still fits the carrier's limit,
        // and two such keys that differ only in their last byte stay two carrier keys.
        let long_a = format!("{}a", "k".repeat(254));
        let long_b = format!("{}b", "k".repeat(254));
        let (a, b) = (carrier_key("acme", &long_a), carrier_key("acme", &long_b));
        assert!(a.len() <= MAX_KEY_BYTES && b.len() <= MAX_KEY_BYTES, "{a}");
        assert_ne!(a, b);
        assert!(a.starts_with("carrier:sha256:"));
        assert!(carrier_key(&"c".repeat(300), "k").len() <= MAX_KEY_BYTES);
    }

    #[test]
    fn the_carrier_refuses_a_key_over_its_limit() {
        let carrier = Carrier::new(CarrierConfig::default());
        let key = "k".repeat(MAX_KEY_BYTES + 1);
        let reply = carrier.purchase(
            &Purchase {
                key: Some(&key),
                order_id: 1,
                parcel_no: 1,
                label_version: 1,
                service: Service::Ground,
                weight_g: 1450.0,
            },
            0,
        );
        assert!(matches!(reply.result, CarrierResult::Refused { .. }));
        assert_eq!(carrier.stats().purchases, 0);
    }

    /// `--carrier-ledger`: the header, then one CSV line per purchase as it is booked (a
    /// replay bills nothing and writes nothing), a key with a comma and a quote quoted.
    #[test]
    fn the_ledger_file_gets_each_purchase_as_it_is_booked() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ledger.csv");
        let file = File::create(&path).unwrap();
        let ledger = Arc::new(LedgerFile::new(file, &path).unwrap());
        let carrier = Carrier::new(CarrierConfig::default())
            .without_ledger()
            .with_ledger_file(Arc::clone(&ledger));
        let key = carrier_key("acme", "eu,\"1\"");
        let buy = |key: Option<&str>, parcel_no| {
            carrier.purchase(
                &Purchase {
                    key,
                    order_id: 7,
                    parcel_no,
                    label_version: 1,
                    service: Service::Ground,
                    weight_g: 1450.0,
                },
                5,
            )
        };
        buy(Some(&key), 1);
        let after_one = std::fs::read_to_string(&path).unwrap();
        assert_eq!(
            after_one,
            format!(
                "{LEDGER_HEADER}5,\"carrier:4:acme:eu,\"\"1\"\"\",7,1,1,L-1,GRD000000007,600\n"
            )
        );
        buy(Some(&key), 1);
        buy(None, 2);
        let text = std::fs::read_to_string(&path).unwrap();
        assert_eq!(text.lines().count(), 3, "{text}");
        assert!(
            text.ends_with("5,,7,2,1,L-2,GRD000000007-2,600\n"),
            "{text}"
        );
        assert!(
            carrier.ledger().is_empty(),
            "without_ledger keeps none in memory"
        );
        assert!(ledger.error().is_none());
    }

    #[test]
    fn latency_tail_matches_its_quantiles() {
        let l = Latency::LogNormal {
            median_ms: 30.0,
            p99_ms: 100.0,
        };
        // "Above 30 ms once rounded" is above 30.5 ms: a little under half, by
        // Φ(ln(30.5/30) / σ) − ½ with σ = ln(100/30) / 2.326 = 0.5176, i.e. 0.0127.
        assert!(
            (l.p_above_ms(30) - 0.4873).abs() < 0.001,
            "{}",
            l.p_above_ms(30)
        );
        assert!((l.p_above_ms(100) - 0.01).abs() < 0.001);
        assert_eq!(l.quantile_ms(0.5), 30);
        assert_eq!(Latency::Fixed { ms: 300 }.p_above_ms(248), 1.0);
    }
}
