//! What a run saw, attempt by attempt and intent by intent: latency histograms per outcome
//! (from the attempt's intended start, so a late scheduler or a full pool shows up in them),
//! a tally per wall-clock second, and per intent the label identities every 2xx carried. The
//! checks from outside (duplicate labels, unexpected 422s, stuck intents, how many intents a
//! label was read for) are made here once, when the run ends ([`Collector::finish`]).
//!
//! An answer heard after its attempt's deadline is the client's timeout, and the latency table
//! counts the attempt there; but the answer's own latency is the service's tail, so it is
//! recorded too, in a `late` row and in the 2xx latency a budget is checked against. Without it
//! a service answering 5 % of calls past the deadline showed a p99 below the deadline.

use super::outcome::{LATE, Outcome};
use super::summary::{Counts, Duplicate, LoadSummary, Percentiles, SecondRow, Stuck};
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, HashMap};

/// How an intent's client finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(super) enum End {
    /// It heard a 2xx.
    Labelled,
    /// It heard a final refusal (4xx other than 409 and 429).
    Refused,
    /// Every attempt was spent.
    Exhausted,
    /// Its next retry fell after the run's end.
    RetryNotSent,
    /// Its next retry found no free slot in the pool.
    AttemptDropped,
}

/// One intent, from its first attempt on.
struct IntentLog {
    caller: String,
    /// Every key it sent (one, unless the key policy mints a key per attempt).
    keys: Vec<String>,
    /// Distinct label identities its 2xx answers carried, in the order seen.
    labels: Vec<String>,
    got_2xx: bool,
    started_s: f64,
    end: Option<End>,
}

/// Everything a run collected; one behind a mutex, shared by every task.
pub(super) struct Collector {
    histograms: BTreeMap<Outcome, Histogram<u64>>,
    seconds: Vec<Second>,
    intents: HashMap<u64, IntentLog>,
    /// Which intent each label identity was first seen for.
    owners: HashMap<String, u64>,
    pub(super) counts: Counts,
    /// Error answers and failures by kind (`HTTP 503`, `connect: …`), for the output.
    errors: BTreeMap<String, u64>,
    /// Every HTTP answer whose body was read, in time or late, by status: what a run that
    /// checked nothing reports as the reason.
    statuses: BTreeMap<u16, u64>,
    /// Answers heard after their deadline, any status, from the attempt's intended start.
    late: Histogram<u64>,
    /// Every 2xx, in time or late: the latency a p99 budget is checked against.
    ok_2xx: Histogram<u64>,
}

/// One wall-clock second of the run.
struct Second {
    started: u64,
    dropped: u64,
    outcomes: [u64; 5],
    late: u64,
    latency_us: Histogram<u64>,
}

/// Latencies up to an hour, at 3 significant digits (the bench's bounds).
const LATENCY_MAX_US: u64 = 3_600_000_000;

fn histogram(digits: u8) -> Histogram<u64> {
    Histogram::new_with_bounds(1, LATENCY_MAX_US, digits).expect("static bounds are valid")
}

impl Collector {
    pub(super) fn new() -> Self {
        Collector {
            histograms: Outcome::ALL.iter().map(|&o| (o, histogram(3))).collect(),
            seconds: Vec::new(),
            intents: HashMap::new(),
            owners: HashMap::new(),
            counts: Counts::default(),
            errors: BTreeMap::new(),
            statuses: BTreeMap::new(),
            late: histogram(3),
            ok_2xx: histogram(3),
        }
    }

    fn second(&mut self, at_s: f64) -> &mut Second {
        let i = at_s.max(0.0) as usize;
        while self.seconds.len() <= i {
            self.seconds.push(Second {
                started: 0,
                dropped: 0,
                outcomes: [0; 5],
                late: 0,
                latency_us: histogram(2),
            });
        }
        &mut self.seconds[i]
    }

    pub(super) fn start(&mut self, id: u64, caller: &str, key: &str, at_s: f64) {
        self.counts.intents_started += 1;
        self.second(at_s).started += 1;
        self.intents.insert(
            id,
            IntentLog {
                caller: caller.to_string(),
                keys: vec![key.to_string()],
                labels: Vec::new(),
                got_2xx: false,
                started_s: at_s,
                end: None,
            },
        );
    }

    pub(super) fn dropped(&mut self, at_s: f64) {
        self.counts.dropped_intents += 1;
        self.second(at_s).dropped += 1;
    }

    pub(super) fn sent(&mut self, id: u64, attempt: u32, key: &str) {
        self.counts.attempts_sent += 1;
        if attempt > 1 {
            self.counts.retries_sent += 1;
        }
        if let Some(log) = self.intents.get_mut(&id)
            && !log.keys.iter().any(|k| k == key)
        {
            log.keys.push(key.to_string());
        }
    }

    /// An attempt's outcome and its latency from the attempt's intended start.
    pub(super) fn attempt(&mut self, outcome: Outcome, latency_us: u64, done_at_s: f64) {
        let latency_us = latency_us.clamp(1, LATENCY_MAX_US);
        if let Some(h) = self.histograms.get_mut(&outcome) {
            h.saturating_record(latency_us);
        }
        if matches!(outcome, Outcome::FirstRun | Outcome::Replay) {
            self.ok_2xx.saturating_record(latency_us);
        }
        let second = self.second(done_at_s);
        second.outcomes[outcome as usize] += 1;
        second.latency_us.saturating_record(latency_us);
    }

    /// An HTTP answer whose body was read (in time or late), by status.
    pub(super) fn status(&mut self, status: u16) {
        *self.statuses.entry(status).or_default() += 1;
    }

    /// An answer heard after its attempt's deadline (already counted as a timeout): its
    /// latency from the intended start, so the tail is the service's and not the deadline.
    pub(super) fn late_answer(&mut self, status: Option<u16>, latency_us: u64, done_at_s: f64) {
        let latency_us = latency_us.clamp(1, LATENCY_MAX_US);
        self.counts.late_replies += 1;
        self.late.saturating_record(latency_us);
        if status.is_some_and(|s| (200..300).contains(&s)) {
            self.ok_2xx.saturating_record(latency_us);
        }
        let second = self.second(done_at_s);
        second.late += 1;
        second.latency_us.saturating_record(latency_us);
    }

    pub(super) fn error(&mut self, kind: String) {
        *self.errors.entry(kind).or_default() += 1;
    }

    /// A 2xx for intent `id` carried `identity` (heard in time, after the deadline, or lost
    /// on the way to the client: the tool saw it, so the label exists).
    pub(super) fn label(&mut self, id: u64, identity: Option<String>) {
        let Some(log) = self.intents.get_mut(&id) else {
            return;
        };
        log.got_2xx = true;
        let Some(identity) = identity else {
            self.counts.identity_missing += 1;
            return;
        };
        if log.labels.contains(&identity) {
            return;
        }
        log.labels.push(identity.clone());
        if !owned_by(&mut self.owners, identity, id) {
            self.counts.shared_labels += 1;
        }
    }

    pub(super) fn end(&mut self, id: u64, end: End) {
        if let Some(log) = self.intents.get_mut(&id) {
            log.end.get_or_insert(end);
        }
    }

    /// The sum over intents of `covered`, the share of the late-retry distribution an intent
    /// started `started_s` into the run had left to run: a sum, so shards' sums add.
    pub(super) fn covered_sum(&self, covered: impl Fn(f64) -> f64) -> f64 {
        self.intents.values().map(|l| covered(l.started_s)).sum()
    }

    /// The checks from outside, made once, for one run or for shards merged: every intent
    /// with two label identities is a duplicate label, every intent with no 2xx is stuck.
    /// `covered_sum` is [`Collector::covered_sum`] (over every shard's intents).
    pub(super) fn finish(self, covered_sum: f64) -> LoadSummary {
        let mut duplicates: Vec<Duplicate> = Vec::new();
        let mut stuck = Stuck::default();
        for log in self.intents.values() {
            if log.labels.len() > 1 {
                duplicates.push(Duplicate {
                    caller: log.caller.clone(),
                    keys: log.keys.clone(),
                    labels: log.labels.clone(),
                });
            }
            if !log.got_2xx {
                stuck.total += 1;
                match log.end {
                    Some(End::Refused) => stuck.refused += 1,
                    Some(End::Exhausted) => stuck.attempts_spent += 1,
                    Some(End::RetryNotSent) => stuck.retry_after_end += 1,
                    Some(End::AttemptDropped) => stuck.pool_full += 1,
                    Some(End::Labelled) | None => stuck.other += 1,
                }
            }
        }
        duplicates.sort_by(|a, b| a.keys.cmp(&b.keys));
        let n = self.intents.len();
        let labelled_intents = self
            .intents
            .values()
            .filter(|l| !l.labels.is_empty())
            .count() as u64;
        let mut intent_ids: Vec<u64> = self.intents.keys().copied().collect();
        intent_ids.sort_unstable();
        let mut latency: BTreeMap<String, Percentiles> = self
            .histograms
            .iter()
            .map(|(&o, h)| (o.name().to_string(), Percentiles::of(h)))
            .collect();
        latency.insert(LATE.to_string(), Percentiles::of(&self.late));
        LoadSummary {
            counts: self.counts,
            latency,
            ok_latency: Percentiles::of(&self.ok_2xx),
            labelled_intents,
            intent_ids,
            statuses: self.statuses,
            per_second: self
                .seconds
                .iter()
                .enumerate()
                .map(|(i, s)| SecondRow {
                    t_s: i as u64,
                    started: s.started,
                    dropped: s.dropped,
                    first_run: s.outcomes[Outcome::FirstRun as usize],
                    replay: s.outcomes[Outcome::Replay as usize],
                    conflict: s.outcomes[Outcome::Conflict as usize],
                    error: s.outcomes[Outcome::Error as usize],
                    timeout: s.outcomes[Outcome::Timeout as usize],
                    late: s.late,
                    latency_ms_p99: if s.latency_us.is_empty() {
                        0.0
                    } else {
                        s.latency_us.value_at_quantile(0.99) as f64 / 1000.0
                    },
                })
                .collect(),
            duplicates,
            stuck,
            errors: self.errors,
            retry_distribution_covered: if n == 0 { 0.0 } else { covered_sum / n as f64 },
        }
    }
}

/// Records that `identity` belongs to intent `id` unless an earlier intent holds it: `false`
/// when another intent does (a label shared by two intents). One rule for a run's labels as
/// they arrive and for shards' labels merged, where the count does not depend on the order.
fn owned_by(owners: &mut HashMap<String, u64>, identity: String, id: u64) -> bool {
    *owners.entry(identity).or_insert(id) == id
}

/// The row of every 2xx, in time or late, among a shard's histograms.
const OK_2XX: &str = "ok_2xx";

/// A collector as `load --shard` writes it and `load merge` adds it back: every figure a run's
/// report is computed from, so shards merged are reported by the same code as one run.
/// Histograms are HdrHistogram's V2-deflate encoding in base64, which add exactly; the intents
/// (what duplicates, shared labels, stuck intents and the invoice's orders are found from) are
/// one JSON array, deflated and in base64: about 10 bytes an intent with derived keys
/// (59,646 intents in 578 kB), more with random ones.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardTally {
    /// Latency in µs by row: each outcome's name, `late`, `ok_2xx`.
    pub histograms: BTreeMap<String, String>,
    pub seconds: Vec<SecondTally>,
    pub intents: String,
    pub counts: Counts,
    pub errors: BTreeMap<String, u64>,
    pub statuses: BTreeMap<u16, u64>,
    /// [`Collector::covered_sum`] over the shard's intents.
    pub covered_sum: f64,
}

/// One wall-clock second of a shard.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct SecondTally {
    pub started: u64,
    pub dropped: u64,
    pub outcomes: [u64; 5],
    pub late: u64,
    pub latency_us: String,
}

/// One intent: id, caller, keys, labels, whether a 2xx came, how its client finished.
#[derive(Serialize, Deserialize)]
struct IntentRow(u64, String, Vec<String>, Vec<String>, bool, Option<End>);

fn encode_histogram(h: &Histogram<u64>) -> anyhow::Result<String> {
    use hdrhistogram::serialization::Serializer as _;
    let mut bytes = Vec::new();
    hdrhistogram::serialization::V2DeflateSerializer::new()
        .serialize(h, &mut bytes)
        .map_err(|e| anyhow::anyhow!("histogram: {e:?}"))?;
    Ok(base64::Engine::encode(
        &base64::engine::general_purpose::STANDARD,
        bytes,
    ))
}

fn decode_histogram(text: &str) -> anyhow::Result<Histogram<u64>> {
    let bytes = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, text)?;
    hdrhistogram::serialization::Deserializer::new()
        .deserialize(&mut &bytes[..])
        .map_err(|e| anyhow::anyhow!("not an HdrHistogram V2 encoding: {e:?}"))
}

/// Adds `from` into `into`: the counts of equal buckets add, so percentiles of the sum are
/// those of one histogram that saw every value.
fn add_histogram(into: &mut Histogram<u64>, from: &str, what: &str) -> anyhow::Result<()> {
    let h = decode_histogram(from).map_err(|e| anyhow::anyhow!("histogram {what}: {e}"))?;
    into.add(&h)
        .map_err(|e| anyhow::anyhow!("histogram {what}: {e:?}"))
}

impl Collector {
    fn histogram_rows(&mut self) -> Vec<(String, &mut Histogram<u64>)> {
        let mut rows: Vec<(String, &mut Histogram<u64>)> = self
            .histograms
            .iter_mut()
            .map(|(o, h)| (o.name().to_string(), h))
            .collect();
        rows.push((LATE.to_string(), &mut self.late));
        rows.push((OK_2XX.to_string(), &mut self.ok_2xx));
        rows
    }

    /// The collector as a shard writes it; `covered_sum` from [`Collector::covered_sum`].
    pub(super) fn export(&mut self, covered_sum: f64) -> anyhow::Result<ShardTally> {
        let mut histograms = BTreeMap::new();
        for (name, h) in self.histogram_rows() {
            histograms.insert(name, encode_histogram(h)?);
        }
        let seconds = self
            .seconds
            .iter()
            .map(|s| {
                Ok(SecondTally {
                    started: s.started,
                    dropped: s.dropped,
                    outcomes: s.outcomes,
                    late: s.late,
                    latency_us: encode_histogram(&s.latency_us)?,
                })
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        let mut ids: Vec<&u64> = self.intents.keys().collect();
        ids.sort_unstable();
        let rows: Vec<IntentRow> = ids
            .into_iter()
            .map(|id| {
                let l = &self.intents[id];
                IntentRow(
                    *id,
                    l.caller.clone(),
                    l.keys.clone(),
                    l.labels.clone(),
                    l.got_2xx,
                    l.end,
                )
            })
            .collect();
        let mut deflate =
            flate2::write::DeflateEncoder::new(Vec::new(), flate2::Compression::default());
        serde_json::to_writer(&mut deflate, &rows)?;
        let intents = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            deflate.finish()?,
        );
        Ok(ShardTally {
            histograms,
            seconds,
            intents,
            counts: self.counts.clone(),
            errors: self.errors.clone(),
            statuses: self.statuses.clone(),
            covered_sum,
        })
    }

    /// Adds a shard's tally. Labels are owned again across every shard added so far, so a
    /// label handed to intents of two shards counts as shared, as in one run. An intent id
    /// already added is refused: two shards that overlap are not one run split.
    pub(super) fn absorb(&mut self, t: &ShardTally) -> anyhow::Result<()> {
        let mut given: BTreeMap<&str, &String> =
            t.histograms.iter().map(|(k, v)| (k.as_str(), v)).collect();
        for (name, h) in self.histogram_rows() {
            let text = given
                .remove(name.as_str())
                .ok_or_else(|| anyhow::anyhow!("histogram {name}: missing"))?;
            add_histogram(h, text, &name)?;
        }
        if let Some(name) = given.keys().next() {
            anyhow::bail!("histogram {name}: not a row this version writes");
        }
        for (i, s) in t.seconds.iter().enumerate() {
            let second = self.second(i as f64);
            second.started += s.started;
            second.dropped += s.dropped;
            for (sum, n) in second.outcomes.iter_mut().zip(s.outcomes) {
                *sum += n;
            }
            second.late += s.late;
            add_histogram(
                &mut second.latency_us,
                &s.latency_us,
                &format!("of second {i}"),
            )?;
        }
        let bytes = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, &t.intents)
            .map_err(|e| anyhow::anyhow!("intents: {e}"))?;
        let rows: Vec<IntentRow> =
            serde_json::from_reader(flate2::read::DeflateDecoder::new(&bytes[..]))
                .map_err(|e| anyhow::anyhow!("intents: {e}"))?;
        let mut counts = t.counts.clone();
        counts.shared_labels = 0;
        self.counts.add(&counts);
        for IntentRow(id, caller, keys, labels, got_2xx, end) in rows {
            if self.intents.contains_key(&id) {
                anyhow::bail!("intent {id} is in another shard too: the shards overlap");
            }
            for identity in &labels {
                if !owned_by(&mut self.owners, identity.clone(), id) {
                    self.counts.shared_labels += 1;
                }
            }
            let log = IntentLog {
                caller,
                keys,
                labels,
                got_2xx,
                started_s: 0.0,
                end,
            };
            self.intents.insert(id, log);
        }
        for (k, n) in &t.errors {
            *self.errors.entry(k.clone()).or_default() += n;
        }
        for (k, n) in &t.statuses {
            *self.statuses.entry(*k).or_default() += n;
        }
        Ok(())
    }
}
