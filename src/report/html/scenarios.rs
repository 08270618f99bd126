//! A scenario's tab: its badge (how its budgets fared), each simulated retention
//! ([`super::runs`]) and its scripted timeline, event by event.

use super::runs::{RunView, run_view};
use super::{secs, slug, svg_or_note};
use crate::format::{plural, significant};
use crate::report::charts::{self, RatePalette};
use crate::run::results::TimelineReport;
use crate::run::results::{ScenarioKind, ScenarioResult, Status};
use serde::Serialize;

#[derive(Debug, Clone, Serialize)]
struct EventRow {
    when: String,
    lane: String,
    text: String,
}

#[derive(Debug, Clone, Serialize)]
struct TimelineView {
    svg: String,
    events: Vec<EventRow>,
    responses: Vec<EventRow>,
    summary: String,
}

#[derive(Debug, Clone, Serialize)]
pub(super) struct ScenarioView {
    id: String,
    kind: ScenarioKind,
    name: String,
    file: String,
    description: String,
    deviations: Vec<String>,
    badge: &'static str,
    badge_text: String,
    runs: Vec<RunView>,
    timeline: Option<TimelineView>,
}

pub(super) fn view(s: &ScenarioResult, palette: &RatePalette) -> ScenarioView {
    let (badge, badge_text) = badge(s);
    ScenarioView {
        id: slug(&s.name),
        kind: s.kind,
        name: s.name.clone(),
        file: s.file.clone(),
        description: s.description.clone(),
        deviations: s.deviations.clone(),
        badge,
        badge_text,
        runs: s.runs.iter().map(|r| run_view(r, palette)).collect(),
        timeline: s.timeline.as_ref().map(timeline_view),
    }
}

/// The tab's badge: the worst verdict of any run, counted when broken.
fn badge(s: &ScenarioResult) -> (&'static str, String) {
    let statuses: Vec<Status> = s
        .runs
        .iter()
        .flat_map(|r| r.verdicts.iter().map(|v| v.status))
        .collect();
    let broken = statuses.iter().filter(|s| **s == Status::Broken).count();
    if statuses.is_empty() {
        (
            "none",
            if s.runs.is_empty() {
                "timeline".to_string()
            } else {
                "no budgets".to_string()
            },
        )
    } else if broken > 0 {
        ("broken", format!("{broken} broken"))
    } else if statuses.contains(&Status::AtRisk) {
        ("at_risk", "at risk".to_string())
    } else {
        ("ok", "budgets hold".to_string())
    }
}

fn timeline_view(t: &TimelineReport) -> TimelineView {
    let mut lanes: Vec<String> = vec!["Caller".into()];
    for e in &t.events {
        if e.lane != "Carrier" && !lanes.contains(&e.lane) {
            lanes.push(e.lane.clone());
        }
    }
    lanes.push("Carrier".into());
    let events = t
        .events
        .iter()
        .map(|e| EventRow {
            when: match e.end_s {
                Some(end) => format!("{}–{}", significant(e.start_s, 3), secs(end)),
                None => secs(e.start_s),
            },
            lane: e.lane.clone(),
            text: e.text.clone(),
        })
        .collect();
    TimelineView {
        svg: svg_or_note(charts::timeline(&t.events, &lanes)),
        events,
        responses: responses(t),
        summary: timeline_summary(t),
    }
}

/// Each answer the callers got, with when it was sent and answered.
fn responses(t: &TimelineReport) -> Vec<EventRow> {
    t.responses
        .iter()
        .map(|r| EventRow {
            when: format!("sent {}, answered {}", secs(r.sent_s), secs(r.arrived_s)),
            lane: r.lane.clone(),
            text: format!(
                "{} {}{}",
                r.status,
                r.tracking_no
                    .clone()
                    .or_else(|| r.code.clone())
                    .unwrap_or_default(),
                if r.replayed {
                    " (Idempotent-Replayed: true)"
                } else {
                    ""
                }
            ),
        })
        .collect()
}

fn timeline_summary(t: &TimelineReport) -> String {
    format!(
        "{} stored, {}, {}; integrity {}, most labels per parcel {}.",
        plural(t.labels.len() as u64, "label", "labels"),
        plural(
            t.carrier_purchases.len() as u64,
            "carrier purchase",
            "carrier purchases"
        ),
        plural(t.carrier_replays, "carrier replay", "carrier replays"),
        if t.invariants.integrity_ok {
            "ok"
        } else {
            "FAILED"
        },
        t.invariants.max_labels_per_parcel
    )
}
