//! Where the report's "What if?" panel starts, evaluated once beside the rest of the run's
//! results: the report computes no model figure and makes no decision, so the figures the page
//! starts from, and checks its script against, are computed here.

use super::results::{Headline, ScenarioResult, WhatIfStart};
use crate::decision::{DecisionInputs, Targets, decide};
use crate::model;
use crate::traffic::RetryDelay;

/// The panel's start for a run's scenarios. It starts from the headline's scenario (the
/// first sizing one) at the bytes per record it measured, so the panel and the headline size
/// the same store; without a headline from the first scenario with a run, without any run from
/// the seed's figures.
pub fn start(scenarios: &[ScenarioResult], headline: Option<&Headline>) -> WhatIfStart {
    let decided = headline.and_then(|d| {
        scenarios
            .iter()
            .find(|s| s.name == d.scenario)
            .map(|s| (s, &d.recommendation))
    });
    let primary = decided
        .and_then(|(s, _)| s.runs.first().map(|r| (s, r)))
        .or_else(|| {
            scenarios
                .iter()
                .find_map(|s| s.runs.first().map(|r| (s, r)))
        });
    let retry = primary.map_or_else(RetryDelay::seed, |(_, r)| r.model.retry_delay.clone());
    let mut params = primary.map_or(model::SEED, |(_, r)| r.model.params);
    if let Some((_, rec)) = decided {
        params.bytes_per_record = rec.bytes_per_record;
        // The page decides with its carrier-window control: a decision on our keys alone
        // (`without_carrier_window`) starts it at none, so both rules give the same answer.
        if !rec.count_carrier_window {
            params.carrier_window_s = 0.0;
        }
    }
    let targets = decided.map_or_else(Targets::default, |(_, r)| r.targets);
    let payload = primary
        .map(|(_, r)| r.config.engine.payload.clone())
        .unwrap_or_default();
    // Without the bytes-per-record interval: the panel does not move it.
    let model_decision = decide(
        &params,
        &retry,
        &DecisionInputs {
            targets,
            ..Default::default()
        },
    )
    .ok()
    .and_then(|r| r.recommended);
    WhatIfStart {
        scenario: primary.map(|(s, _)| s.name.clone()),
        estimate: model::estimate(&params, &retry),
        figures: model::figures(&params, &retry).ok(),
        // The headline's answer, so the card agrees with it.
        decision: match decided {
            Some((_, rec)) => rec.recommended.clone(),
            None => model_decision.clone(),
        },
        model_decision,
        weighed: decided
            .map(|(_, rec)| rec.candidates.clone())
            .unwrap_or_default(),
        key_bytes: payload.key_bytes.mean_bytes(),
        response_bytes: payload.response_bytes.mean_bytes(),
        params,
        retry,
        targets,
    }
}
