//! `idemcalc estimate`: the seed's three "In practice" tables, recomputed from flags.
//!
//! Flags are checked once (the settings table names the flag and the value); the run's
//! [`Plan`] then evaluates the model once, as it does for `simulate`.

use super::Format;
use crate::decision::{self, DecisionInputs, Recommendation};
use crate::model::Estimate;
use crate::report::text;
use crate::run::Plan;
use crate::settings::Settings;
use crate::settings::flags::Flags;
use crate::settings::knobs::ESTIMATE;

#[derive(clap::Args, Debug)]
pub struct EstimateArgs {
    /// The model's knobs, from the settings table (the same names as `simulate`'s).
    #[command(flatten)]
    pub knobs: Flags<ESTIMATE>,

    /// Output: readable tables, or one JSON object.
    #[arg(long, value_enum, default_value_t = Format::Table)]
    pub format: Format,
}

impl EstimateArgs {
    /// The validated settings, with the one retention the estimate is about.
    pub fn settings(&self) -> anyhow::Result<(Settings, f64)> {
        let settings = self.knobs.settings()?;
        match settings.retentions() {
            [one] => {
                let r = *one;
                Ok((settings, r))
            }
            _ => anyhow::bail!(
                "--retention: estimate takes one retention (its sweep covers the others)"
            ),
        }
    }

    #[cfg(test)]
    fn params(&self) -> anyhow::Result<crate::model::ModelParams> {
        let (settings, retention_s) = self.settings()?;
        Ok(settings.model_params(retention_s))
    }
}

pub fn run(args: &EstimateArgs) -> anyhow::Result<()> {
    let (settings, _) = args.settings()?;
    // The plan of the one retention: the same evaluation `simulate` shows beside its run.
    let plan = Plan::new(&settings)?;
    let job = plan
        .jobs
        .first()
        .ok_or_else(|| anyhow::anyhow!("--retention: estimate takes one retention"))?;
    let estimate = &job.model;
    let b = &settings.budgets;
    let inputs = DecisionInputs {
        targets: b.targets(),
        count_carrier_window: !b.without_carrier_window,
        // The model alone: the seed's store, no sweeper's lag and no daily profile.
        ..DecisionInputs::default()
    };
    let recommendation = decision::decide(&job.params, &plan.retry, &inputs)
        .map_err(|e| anyhow::anyhow!("the decision's formulas: {e}"))?;
    let text = match args.format {
        Format::Json => {
            serde_json::to_string_pretty(&EstimateOutput {
                estimate,
                decision: &recommendation,
            })? + "\n"
        }
        Format::Table => {
            let source = match &settings.retry.cdf {
                Some(path) => format!("measured, from {}", path.display()),
                None => "the seed's illustrative table, not measured".to_string(),
            };
            text::estimate(estimate, &source) + &text::decision(&recommendation)
        }
    };
    super::print(&text)
}

/// The estimate's JSON: the model's figures, then the decision under `decision`.
#[derive(serde::Serialize)]
struct EstimateOutput<'a> {
    #[serde(flatten)]
    estimate: &'a Estimate,
    decision: &'a Recommendation,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::SEED;
    use crate::traffic::{DEFAULT_MAX_HORIZON_S, DEFAULT_MIN_DELAY_S, Head, RetryDelay, Tail};
    use clap::Parser as _;

    #[derive(clap::Parser, Debug)]
    struct Wrapper {
        #[command(flatten)]
        args: EstimateArgs,
    }

    /// The flag defaults come from the settings table; they must stay the seed's.
    #[test]
    fn flag_defaults_are_the_seed() {
        let w = Wrapper::try_parse_from(["x"]).unwrap();
        assert_eq!(w.args.params().unwrap(), SEED);
        let (settings, _) = w.args.settings().unwrap();
        assert_eq!(Plan::new(&settings).unwrap().retry, RetryDelay::seed());
        assert_eq!(
            settings.retry.head,
            Head::LogUniform {
                min_delay_s: DEFAULT_MIN_DELAY_S
            }
        );
        assert_eq!(
            settings.retry.tail,
            Tail::LogLinear {
                max_horizon_s: DEFAULT_MAX_HORIZON_S
            }
        );
    }

    #[test]
    fn bad_values_name_the_flag_and_value() {
        for (flag, value) in [
            ("--retention", "24 parsecs"),
            ("--retention", "0s"),
            ("--carrier-window", "tomorrow"),
            ("--rate", "-3"),
            ("--rate", "lots"),
            ("--timeout-fraction", "1.5"),
            ("--done-fraction", "160%"),
            ("--label-price", "-1"),
        ] {
            let err = Wrapper::try_parse_from(["x", flag, value])
                .map_err(|e| e.to_string())
                .and_then(|w| w.args.settings().map_err(|e| e.to_string()))
                .unwrap_err();
            assert!(err.contains(flag) && err.contains(value), "{err}");
        }
    }

    #[test]
    fn fractions_take_percentages() {
        let w = Wrapper::try_parse_from(["x", "--timeout-fraction", "0.1%"]).unwrap();
        assert!((w.args.params().unwrap().timeout_fraction - 0.001).abs() < 1e-15);
    }
}
