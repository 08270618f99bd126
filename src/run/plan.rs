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
use crate::settings::{Retry, Settings};
use crate::sim::replay::{Candidate, SimConfig};
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
}

impl JobPlan {
    pub fn retention_s(&self) -> f64 {
        self.config.retention_s()
    }
}

impl Plan {
    /// SHA-256 of every input the run used, as JSON: the validated settings with defaults
    /// filled in, the retry distribution as resolved (a `--retry-cdf` file's contents, not its
    /// path), and a scenario's timeline and budgets. Two runs with the same hash ran the same
    /// inputs, whatever the files' formatting, comments or locations; a changed default or a
    /// changed CDF file changes it. The one basis for `simulate` and `report` alike.
    pub fn inputs_sha256(
        &self,
        timeline: Option<&crate::sim::timeline::Timeline>,
        budgets: Option<&crate::settings::Budgets>,
    ) -> String {
        #[derive(serde::Serialize)]
        struct Inputs<'a> {
            settings: &'a Settings,
            retry_delay: &'a RetryDelay,
            timeline: Option<&'a crate::sim::timeline::Timeline>,
            budgets: Option<&'a crate::settings::Budgets>,
        }
        let mut settings = self.settings.clone();
        settings.retry.cdf = None;
        crate::settings::sha256_of(&Inputs {
            settings: &settings,
            retry_delay: &self.retry,
            timeline,
            budgets,
        })
    }

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
                    let sweeper = settings.traffic.sweeper.at(retention_s);
                    let mut config = settings.sim_config(retention_s);
                    config.sweeper = sweeper;
                    config.candidates = model::candidate_retentions_s(retention_s, &retry)
                        .into_iter()
                        .map(|r| Candidate {
                            retention_ms: (r * 1000.0).round() as crate::clock::Millis,
                            sweeper: settings.traffic.sweeper.at(r),
                        })
                        .collect();
                    JobPlan {
                        config,
                        model: model::estimate(&params, &retry),
                        params,
                        sweeper,
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
