//! The plan: validated [`Settings`] turned, once and before any store opens, into everything
//! a run needs: the arrival process, the late-retry distribution (a `--retry-cdf` file read
//! here and nowhere else, or a scenario's fitted points), and per retention the simulator's
//! configuration, the model's inputs, the model evaluated at them and the store's sweeper.
//!
//! Everything downstream (the replay, the results, the decision, every exporter) receives
//! these values; nothing re-reads a file or re-derives a model figure, so two outputs of one
//! run cannot disagree about its inputs.

use crate::model::{self, Estimate, ModelParams};
use crate::scenario::Loaded;
use crate::settings::{Retry, Settings, SweeperChoice};
use crate::sim::replay::SimConfig;
use crate::store::Sweeper;
use crate::traffic::{Arrivals, RetryDelay};

/// One set of settings, resolved.
#[derive(Debug, Clone)]
pub struct Plan {
    pub settings: Settings,
    pub arrivals: Arrivals,
    pub retry: RetryDelay,
    /// One per retention, in the order given; empty for a timeline-only scenario.
    pub jobs: Vec<JobPlan>,
}

/// One simulation: a retention of a plan.
#[derive(Debug, Clone)]
pub struct JobPlan {
    pub config: SimConfig,
    pub params: ModelParams,
    /// The model at `params`: the one evaluation every output of this job shows.
    pub model: Estimate,
    pub sweeper: Sweeper,
    /// What the job's results must say about how they were obtained.
    pub notes: Vec<String>,
}

impl JobPlan {
    pub fn retention_s(&self) -> f64 {
        self.config.retention_s()
    }
}

impl Plan {
    /// Resolves `settings`; an error names the flag or file that could not be used.
    pub fn new(settings: &Settings) -> anyhow::Result<Plan> {
        Self::with_jobs(settings, true)
    }

    /// A scenario's plan; errors are prefixed with its file.
    pub fn for_scenario(loaded: &Loaded) -> anyhow::Result<Plan> {
        Self::with_jobs(&loaded.scenario.settings, loaded.scenario.simulated)
            .map_err(|e| anyhow::anyhow!("{}: {e:#}", loaded.path.display()))
    }

    fn with_jobs(settings: &Settings, simulated: bool) -> anyhow::Result<Plan> {
        let arrivals = settings.arrivals().map_err(anyhow::Error::msg)?;
        let retry = retry_delay(&settings.retry)?;
        let jobs = if simulated {
            settings
                .retentions()
                .iter()
                .map(|&retention_s| {
                    let params = settings.model_params(retention_s);
                    let config = settings.sim_config(retention_s);
                    JobPlan {
                        notes: profile_note(settings, &config).into_iter().collect(),
                        config,
                        model: model::estimate(&params, &retry),
                        params,
                        sweeper: sweeper_for(settings, retention_s),
                    }
                })
                .collect()
        } else {
            Vec::new()
        };
        Ok(Plan {
            settings: settings.clone(),
            arrivals,
            retry,
            jobs,
        })
    }

    /// The model's inputs at the first retention: what `estimate` and the decision start from.
    pub fn first_params(&self) -> ModelParams {
        self.jobs.first().map_or_else(
            || {
                self.settings
                    .model_params(self.settings.retentions().first().copied().unwrap_or(0.0))
            },
            |j| j.params,
        )
    }
}

/// The late-retry distribution the settings ask for: a fitted one, the `--retry-cdf` file
/// (read with a size limit) or the seed's, with the head and tail asked for.
fn retry_delay(r: &Retry) -> anyhow::Result<RetryDelay> {
    if let Some(spec) = &r.fitted {
        return spec
            .to_retry_delay()
            .map_err(|e| anyhow::anyhow!("traffic.retry_delay: {e}"));
    }
    match &r.cdf {
        None => RetryDelay::seed_with(r.head, r.tail).map_err(|e| {
            anyhow::anyhow!(
                "--retry-min-delay/--retry-horizon: the seed's retry distribution does not fit them: {e}"
            )
        }),
        Some(path) => {
            let text = crate::input::read_limited(path).map_err(|io| {
                crate::traffic::RetryCdfError::Io {
                    path: path.clone(),
                    io,
                }
            })?;
            Ok(RetryDelay::from_csv_str(&text, path, r.head, r.tail)?)
        }
    }
}

/// Under a daily profile (a rush), per-day figures are right only over whole days: the default
/// duration is rounded up to them, and a duration given otherwise is said so.
fn profile_note(settings: &Settings, config: &SimConfig) -> Option<String> {
    let rush = settings.traffic.rush.as_ref()?;
    crate::sim::replay::partial_days_note(config.arrival_s(), rush.start_s, rush.duration_s)
}

/// A partition period shorter than this is refused by the store (at 1 s); the default keeps
/// a short retention from making hundreds of partitions.
const MIN_DEFAULT_PARTITION_S: f64 = 60.0;

/// The store's sweeper at a retention (`--sweeper`): partitions default to a quarter of the
/// retention, so a record outlives its retention by at most a quarter and a lookup probes
/// about five partitions.
fn sweeper_for(settings: &Settings, retention_s: f64) -> Sweeper {
    match settings.traffic.sweeper {
        SweeperChoice::Delete => Sweeper::Delete,
        SweeperChoice::Partitions => {
            let period_s = settings
                .traffic
                .partition_period_s
                .unwrap_or((retention_s / 4.0).max(MIN_DEFAULT_PARTITION_S));
            Sweeper::Partitions {
                period_ms: (period_s * 1000.0).round() as i64,
            }
        }
    }
}
