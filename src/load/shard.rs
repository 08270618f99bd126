//! `load --shard I/N` and `load merge`: one run's schedule sent from N processes (hosts,
//! Kubernetes pods), then added back into the one run's report.
//!
//! Every shard draws the whole run's seeded schedule (the same arrival times, intent ids and
//! per-intent draws: caller, lost replies, retry delays, keys, all from `seed` and the id) and
//! sends only the intents whose index is its own (`(id - 1) mod N = I`), so the N shards send
//! exactly the intents one run would, each at `rate / N`. A shard's JSON carries its collector
//! ([`ShardTally`]: HDR histograms in V2-deflate, counts, every intent's labels), and `merge`
//! adds the collectors and reports the sum through the code one run's report goes through:
//! duplicates and shared labels are found on the union of labels, the budgets and the verdict
//! are recomputed, and the invoice and the prediction are redone for the whole run by the
//! caller. Percentiles are never averaged: histograms add bucket by bucket.

use super::invoice::InvoiceSource;
use super::predict::Ask;
use super::summary::{Budgets, LoadReport, RunEcho, ShardEcho};
use super::tally::{Collector, ShardTally};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The layout of [`ShardBlock`]: a merge refuses a shard written in another.
pub const FORMAT: u32 = 1;

/// The most of one shard file that is read: about 10 bytes an intent with derived keys and
/// some 40 with random ones, so a gibibyte is tens of millions of intents per shard (20,000/s
/// for half an hour is 36 million, split over the shards).
const MAX_SHARD_BYTES: u64 = 1 << 30;

/// Which part of the run's one schedule a process sends: `I/N`, `I` from 0 (Kubernetes'
/// `JOB_COMPLETION_INDEX`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// `I/N` as `--shard` takes it; the error names the flag.
    pub fn parse(text: &str) -> anyhow::Result<Shard> {
        let bad = |why: &str| anyhow::anyhow!("--shard `{text}`: {why}, e.g. 0/4");
        let (i, n) = text.split_once('/').ok_or_else(|| bad("expected I/N"))?;
        let index: u32 = i.trim().parse().map_err(|_| bad("I is not a number"))?;
        let count: u32 = n.trim().parse().map_err(|_| bad("N is not a number"))?;
        let shard = Shard { index, count };
        shard.check()?;
        Ok(shard)
    }

    pub fn check(self) -> anyhow::Result<()> {
        if self.count == 0 || self.count > 10_000 {
            anyhow::bail!("--shard {}/{}: N must be 1..10000", self.index, self.count);
        }
        if self.index >= self.count {
            anyhow::bail!(
                "--shard {}/{}: I must be 0..{} (from 0, as JOB_COMPLETION_INDEX)",
                self.index,
                self.count,
                self.count - 1
            );
        }
        Ok(())
    }

    /// Whether intent `id` (from 1, in schedule order) is this shard's.
    pub fn takes(self, id: u64) -> bool {
        (id.wrapping_sub(1)) % u64::from(self.count) == u64::from(self.index)
    }
}

/// A shard's JSON: its report, and beside it what a merge needs.
#[derive(Serialize)]
pub struct ShardReport<'a> {
    #[serde(flatten)]
    pub report: &'a LoadReport,
    pub shard: &'a ShardBlock,
}

/// What a shard's JSON carries for `load merge`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ShardBlock {
    /// [`FORMAT`].
    pub format: u32,
    pub budgets: Budgets,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub invoice: Option<InvoiceAsk>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub prediction: Option<Ask>,
    pub tally: ShardTally,
}

/// `--carrier-invoice` and its bounds, as a shard writes them.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct InvoiceAsk {
    pub url: String,
    pub max_body_bytes: u64,
    pub timeout_ms: u64,
}

impl InvoiceAsk {
    pub fn of(source: &InvoiceSource) -> Self {
        InvoiceAsk {
            url: source.url.to_string(),
            max_body_bytes: source.max_body,
            timeout_ms: source.timeout.as_millis() as u64,
        }
    }

    fn source(&self) -> anyhow::Result<InvoiceSource> {
        Ok(InvoiceSource {
            url: reqwest::Url::parse(&self.url)
                .map_err(|e| anyhow::anyhow!("--carrier-invoice `{}`: {e}", self.url))?,
            max_body: self.max_body_bytes,
            timeout: Duration::from_millis(self.timeout_ms),
        })
    }
}

/// The fields of a result file a merge reads.
#[derive(Deserialize)]
struct ShardFile {
    run: RunEcho,
    wall_s: f64,
    shard: Option<ShardBlock>,
}

/// Shards added up: the report (budgets and verdict recomputed) and what the run asked of the
/// invoice and the prediction, to be redone on the merged figures.
pub struct Merged {
    pub report: LoadReport,
    pub budgets: Budgets,
    pub invoice: Option<InvoiceSource>,
    pub prediction: Option<Ask>,
}

/// What makes two shards parts of one run, by name: every value of the run's echo but the
/// shard's index, its pool and its wall time, plus its budgets, invoice and prediction.
fn run_identity(f: &ShardFile, b: &ShardBlock, shard: &ShardEcho) -> Vec<(&'static str, String)> {
    let r = &f.run;
    vec![
        ("shard count N", shard.count.to_string()),
        ("rate", shard.run_rate_per_s.to_string()),
        ("seed", r.seed.to_string()),
        ("target", format!("{} {}{}", r.method, r.url, r.path)),
        ("first order", r.first_order.to_string()),
        ("duration", r.duration_s.to_string()),
        ("arrivals", r.arrivals.clone()),
        ("deadline", r.deadline_ms.to_string()),
        ("observe", r.observe_ms.to_string()),
        ("max attempts", r.max_attempts.to_string()),
        ("time scale", r.time_scale.to_string()),
        ("lost replies", r.lose_reply_fraction.to_string()),
        ("key policy", r.key_policy.clone()),
        ("callers", r.callers.to_string()),
        ("max body", r.max_body_bytes.to_string()),
        ("identity", r.identity.clone()),
        ("retry distribution", r.retry_distribution.clone()),
        ("budgets", format!("{:?}", b.budgets)),
        ("carrier invoice", format!("{:?}", b.invoice)),
        ("prediction", format!("{:?}", b.prediction)),
    ]
}

fn read(path: &Path) -> anyhow::Result<(ShardFile, ShardBlock, ShardEcho)> {
    let name = path.display();
    let bytes = crate::input::read_limited_bytes(path, MAX_SHARD_BYTES)
        .map_err(|e| anyhow::anyhow!("{name}: {e}"))?;
    let mut file: ShardFile = serde_json::from_slice(&bytes)
        .map_err(|e| anyhow::anyhow!("{name}: not a result of `idemcalc load --out` ({e})"))?;
    let (Some(block), Some(shard)) = (file.shard.take(), file.run.shard) else {
        anyhow::bail!(
            "{name}: a run without --shard; `load merge` adds the results of `load --shard I/N --out FILE`"
        );
    };
    if block.format != FORMAT {
        anyhow::bail!(
            "{name}: shard format {}, this idemcalc reads format {FORMAT}",
            block.format
        );
    }
    if let Some(after) = file.run.interrupted_after_s {
        anyhow::bail!(
            "{name}: shard {}/{} was interrupted after {after:.1} s; its part of the run is incomplete",
            shard.index,
            shard.count
        );
    }
    Ok((file, block, shard))
}

/// Reads the shard files and adds them up. Refused, naming the file: a file that is not a
/// shard's result, shards of different runs (any value of [`run_identity`]), and a set of
/// indices that is not exactly `0..N` once each.
pub fn merge(paths: &[PathBuf]) -> anyhow::Result<Merged> {
    let shards = paths
        .iter()
        .map(|p| read(p))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let Some((first, first_block, first_shard)) = shards.first() else {
        anyhow::bail!("load merge: no shard files given");
    };
    let want = run_identity(first, first_block, first_shard);
    let mut by_index: Vec<Option<&Path>> = vec![None; first_shard.count as usize];
    for ((file, block, shard), path) in shards.iter().zip(paths) {
        let name = path.display();
        for ((what, theirs), (_, ours)) in run_identity(file, block, shard).iter().zip(&want) {
            if theirs != ours {
                anyhow::bail!(
                    "{name}: {what} {theirs}, but {} has {ours}: shards of different runs",
                    paths[0].display()
                );
            }
        }
        let slot = &mut by_index[shard.index as usize];
        if let Some(other) = slot {
            anyhow::bail!(
                "{name}: index {} of {} again ({} has it)",
                shard.index,
                shard.count,
                other.display()
            );
        }
        *slot = Some(path);
    }
    if let Some(i) = by_index.iter().position(Option::is_none) {
        anyhow::bail!(
            "load merge: index {i} of {} is missing (the files cover {} of the {} shards)",
            first_shard.count,
            shards.len(),
            first_shard.count
        );
    }
    let mut collector = Collector::new();
    let mut covered_sum = 0.0;
    for ((_, block, _), path) in shards.iter().zip(paths) {
        collector
            .absorb(&block.tally)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?;
        covered_sum += block.tally.covered_sum;
    }
    let mut run = first.run.clone();
    run.rate_per_s = first_shard.run_rate_per_s;
    run.shard = None;
    run.max_in_flight = shards.iter().map(|(f, _, _)| f.run.max_in_flight).sum();
    let wall_s = shards.iter().map(|(f, _, _)| f.wall_s).fold(0.0, f64::max);
    let mut report = LoadReport::new(
        run,
        collector.finish(covered_sum),
        &first_block.budgets,
        wall_s,
    );
    let mut order: Vec<(u32, &Path)> = shards
        .iter()
        .zip(paths)
        .map(|((_, _, s), p)| (s.index, p.as_path()))
        .collect();
    order.sort_unstable();
    report.merged_from = order
        .into_iter()
        .map(|(_, p)| p.display().to_string())
        .collect();
    Ok(Merged {
        budgets: first_block.budgets,
        invoice: first_block
            .invoice
            .as_ref()
            .map(InvoiceAsk::source)
            .transpose()?,
        prediction: first_block
            .prediction
            .as_ref()
            .map(|a| a.at_rate(first_shard.run_rate_per_s)),
        report,
    })
}
