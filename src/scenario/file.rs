//! Scenario files (TOML) as raw knob values: the file-side twin of [`crate::settings::flags`].
//!
//! Only the layout is typed here (which sections exist, the `[timeline]` script); every knob
//! field is read as a raw TOML value and checked by the same [`crate::settings::Values::check`] as a flag,
//! so a file and the command line cannot disagree on a default or a limit. Unknown fields are
//! refused, and every error names the file, the line (and the column when the value is
//! unreadable) and the dotted field, because a scenario directory is edited by hand.

mod locate;

use super::{Scenario, ScenarioError};
use crate::duration;
use crate::engine::DiePoint;
use crate::settings::knobs::{self, KNOBS, Raw};
use crate::settings::{Settings, SettingsError, Values};
use crate::sim::timeline::{Timeline, TimelineRequest, TimelineSweep};
use crate::traffic::RetrySpec;
use locate::{field_at, line_col, locate, locate_key, missing_field, value_column};
use serde::Deserialize;
use std::path::Path;
use std::time::Duration;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FileToml {
    name: String,
    #[serde(default)]
    description: String,
    seed: Option<toml::Value>,
    engine: Option<toml::Table>,
    carrier: Option<toml::Table>,
    traffic: Option<toml::Table>,
    model: Option<toml::Table>,
    budgets: Option<toml::Table>,
    timeline: Option<TimelineToml>,
}

/// A scripted timeline as written: requests sent at fixed virtual times.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct TimelineToml {
    #[serde(default = "default_network", with = "duration::serde_str")]
    network: Duration,
    #[serde(default = "default_processing", with = "duration::serde_str")]
    processing: Duration,
    body: Option<toml::Value>,
    #[serde(rename = "request")]
    requests: Vec<RequestToml>,
    #[serde(default, rename = "sweep")]
    sweeps: Vec<SweepToml>,
}

/// `[[timeline.sweep]]`: the engine's sweeper at a virtual time.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SweepToml {
    #[serde(with = "duration::serde_str")]
    at: Duration,
    batch: Option<u32>,
}

fn default_network() -> Duration {
    Duration::from_millis(200)
}
fn default_processing() -> Duration {
    Duration::from_millis(300)
}
fn default_caller() -> String {
    "fulfilment".to_string()
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RequestToml {
    lane: Option<String>,
    #[serde(with = "duration::serde_str")]
    sent: Duration,
    #[serde(default = "default_caller")]
    caller: String,
    key: Option<String>,
    #[serde(default)]
    no_key: bool,
    body: Option<toml::Value>,
    raw_body: Option<String>,
    #[serde(default, with = "duration::serde_opt")]
    carrier_latency: Option<Duration>,
    #[serde(default, with = "duration::serde_opt")]
    finish: Option<Duration>,
    die: Option<DiePoint>,
}

fn raw_of(v: &toml::Value) -> Raw {
    match v {
        toml::Value::String(s) => Raw::Text(s.clone()),
        toml::Value::Float(f) => Raw::Float(*f),
        toml::Value::Integer(i) => Raw::Int(*i),
        toml::Value::Array(items) => Raw::List(items.iter().map(raw_of).collect()),
        toml::Value::Boolean(b) => Raw::Bool(*b),
        other => Raw::Other(other.to_string()),
    }
}

/// Reads and parses a scenario file, with the size limit every input file has.
pub fn load(path: &Path) -> Result<Scenario, ScenarioError> {
    let text = crate::input::read_limited(path).map_err(|io| ScenarioError::Read {
        path: path.to_path_buf(),
        io,
    })?;
    parse(path, &text)
}

/// Parses and validates `text`; `path` names the file in errors.
pub fn parse(path: &Path, text: &str) -> Result<Scenario, ScenarioError> {
    let src = Source { path, text };
    let file: FileToml = toml::from_str(text).map_err(|e| src.toml_error(&e))?;
    let Given { raw, fitted } = raw_values(&src, &file)?;
    let values = Values::check(raw.iter().cloned()).map_err(|e| src.settings_error(e))?;
    let mut settings = Settings::from_values(&values).map_err(|e| src.settings_error(e))?;
    settings.retry.fitted = fitted;
    check_name(&src, &file.name)?;
    let parts = Parts {
        traffic: file.traffic.is_some(),
        budgets: file.budgets.is_some(),
        timeline: file.timeline.is_some(),
    };
    let timeline = match file.timeline {
        None => None,
        Some(t) => Some(timeline(t).map_err(|(field, message)| src.fail(&field, message))?),
    };
    check_runnable(&src, &settings, parts)?;
    Ok(Scenario {
        name: file.name,
        description: file.description,
        budgets: parts.budgets.then(|| settings.budgets.clone()),
        simulated: parts.traffic,
        settings,
        timeline,
        given: raw,
    })
}

/// The file being parsed, to turn a problem into an error naming its line and field.
struct Source<'a> {
    path: &'a Path,
    text: &'a str,
}

impl Source<'_> {
    fn invalid(
        &self,
        line: Option<usize>,
        column: Option<usize>,
        field: String,
        message: String,
    ) -> ScenarioError {
        ScenarioError::Invalid {
            path: self.path.to_path_buf(),
            line,
            column,
            field,
            message,
        }
    }

    /// A problem with `field`, at the line that sets it (or its table's header).
    fn fail(&self, field: &str, message: String) -> ScenarioError {
        self.invalid(locate(self.text, field), None, field.to_string(), message)
    }

    /// The file is not TOML, or not the layout: a wrong type, an unknown section.
    fn toml_error(&self, e: &toml::de::Error) -> ScenarioError {
        let text = self.text;
        let (line, column, field) = match e.span() {
            Some(span) => {
                let (line, column) = line_col(text, span.start);
                (Some(line), Some(column), field_at(text, span.start))
            }
            None => (None, None, String::new()),
        };
        let message = e.message().trim_end().to_string();
        // A missing required field has no span of its own; the message names it.
        let field = if field.is_empty() {
            missing_field(&message).unwrap_or_default()
        } else {
            field
        };
        self.invalid(line, column, field, message)
    }

    /// A field set in the file but unknown to the table, with the likeliest meant one: a
    /// near spelling in the same table (`replicas` under `[traffic]` → `replicates`), and the
    /// same name where it does exist (`[model] replicas`, full copies of the store).
    fn unknown(&self, field: String, known: Vec<&str>) -> ScenarioError {
        let (line, column) = locate_key(self.text, &field).unzip();
        let key = field.rsplit('.').next().unwrap_or(&field).to_string();
        let mut hint = String::new();
        if let Some(near) = nearest(&key, &known) {
            hint.push_str(&format!("; did you mean `{near}`?"));
        }
        if let Some(k) = KNOBS.iter().find(|k| {
            k.field
                .is_some_and(|f| f != field && f.rsplit('.').next() == Some(key.as_str()))
        }) {
            let f = k.field.unwrap_or_default();
            let (table, name) = f.rsplit_once('.').unwrap_or(("", f));
            hint.push_str(&format!(
                " (`{name}` is a field of `[{table}]`: {})",
                k.help.trim_end_matches('.')
            ));
        }
        self.invalid(
            line,
            column,
            field,
            format!(
                "unknown field `{key}`{hint}, expected one of {}",
                known.join(", ")
            ),
        )
    }

    /// A knob's value refused by the validator, at the knob's field (and the value's column
    /// when it could not be read at all).
    fn settings_error(&self, e: SettingsError) -> ScenarioError {
        let k = knobs::knob(e.knob);
        let field = e.field.or(k.field).unwrap_or(k.name).to_string();
        let (line, column) = match locate_key(self.text, &field) {
            Some((line, _)) if e.unreadable => (Some(line), value_column(self.text, line)),
            Some((line, _)) => (Some(line), None),
            None => (None, None),
        };
        self.invalid(line, column, field, e.message)
    }
}

/// What a file sets: every knob as a raw value, in file order, and the fitted retry
/// distribution (`[traffic] retry_delay`) if it has one.
struct Given {
    raw: Vec<(knobs::KnobId, Raw)>,
    fitted: Option<RetrySpec>,
}

fn raw_values(src: &Source<'_>, file: &FileToml) -> Result<Given, ScenarioError> {
    let mut raw: Vec<(knobs::KnobId, Raw)> = Vec::new();
    // `[traffic] retry_delay`, what `idemcalc fit` writes: a structured table, not a knob.
    let mut fitted: Option<RetrySpec> = None;
    if let Some(seed) = &file.seed {
        raw.push((knobs::KnobId::Seed, raw_of(seed)));
    }
    let sections = [
        ("engine", &file.engine),
        ("carrier", &file.carrier),
        ("traffic", &file.traffic),
        ("model", &file.model),
        ("budgets", &file.budgets),
    ];
    for (section, table) in sections {
        let Some(table) = table else { continue };
        let known = section_fields(section);
        for (key, value) in table {
            let field = format!("{section}.{key}");
            if field == "traffic.retry_delay" {
                fitted = Some(retry_delay(src, &field, value)?);
                continue;
            }
            for (f, v) in knob_entries(src, section, key, &field, value)? {
                let f = renamed(&f).map_or(f, str::to_string);
                match KNOBS.iter().find(|k| k.field == Some(f.as_str())) {
                    Some(k) => raw.push((k.id, raw_of(v))),
                    None => {
                        let known = if f == field {
                            known.clone()
                        } else {
                            let parent = format!("{field}.");
                            KNOBS
                                .iter()
                                .filter_map(|k| k.field?.strip_prefix(parent.as_str()))
                                .collect()
                        };
                        return Err(src.unknown(f, known));
                    }
                }
            }
        }
    }
    Ok(Given { raw, fitted })
}

/// The known field nearest to `key` in spelling, if one is near enough to be a slip.
fn nearest<'a>(key: &str, known: &[&'a str]) -> Option<&'a str> {
    known
        .iter()
        .map(|k| (strsim::jaro_winkler(key, k), *k))
        .filter(|(score, _)| *score >= 0.85)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, k)| k)
}

/// Fields renamed so that one concept has one name everywhere (the flag, the file, the JSON),
/// with their new names. Files written before keep working; scenarios/README.md lists them.
const RENAMED_FIELDS: &[(&str, &str)] = &[
    ("carrier.price_usd", "carrier.label_price_usd"),
    ("traffic.crash_rate", "traffic.crash_fraction"),
];

/// The new name of a renamed field.
fn renamed(field: &str) -> Option<&'static str> {
    RENAMED_FIELDS
        .iter()
        .find(|(old, _)| *old == field)
        .map(|(_, new)| *new)
}

/// The fields a section may set, sorted: `[carrier]` → `label_price_usd`, `latency`, `window`, …
fn section_fields(section: &str) -> Vec<&'static str> {
    let prefix = format!("{section}.");
    KNOBS
        .iter()
        .filter_map(|k| k.field?.strip_prefix(&prefix))
        .map(|rest| rest.split('.').next().unwrap_or(rest))
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect()
}

/// `[traffic] retry_delay`: a fitted distribution, read whole and checked as the run will use
/// it.
fn retry_delay(
    src: &Source<'_>,
    field: &str,
    value: &toml::Value,
) -> Result<RetrySpec, ScenarioError> {
    let spec: RetrySpec = value
        .clone()
        .try_into()
        .map_err(|e: toml::de::Error| src.fail(field, e.message().to_string()))?;
    spec.to_retry_delay().map_err(|e| src.fail(field, e))?;
    Ok(spec)
}

/// The knob fields one `key = value` of a section sets. A table value (`latency = { median =
/// .., p99 = .. }`, `rush = { .. }`) spreads over the knobs of its sub-fields; a plain one is
/// one knob.
fn knob_entries<'v>(
    src: &Source<'_>,
    section: &str,
    key: &str,
    field: &str,
    value: &'v toml::Value,
) -> Result<Vec<(String, &'v toml::Value)>, ScenarioError> {
    Ok(match value {
        // A size distribution's table (`{ median = .., p99 = .. }`) is one knob.
        toml::Value::Table(_)
            if KNOBS
                .iter()
                .any(|k| k.field == Some(field) && k.kind == knobs::Kind::Size) =>
        {
            vec![(field.to_string(), value)]
        }
        // `rate = {}` sets nothing, and silently meant the default (400/s): refuse it.
        toml::Value::Table(inner) if inner.is_empty() => {
            let subs = sub_fields(field);
            let what = match KNOBS.iter().find(|k| k.field == Some(field)) {
                Some(k) if k.default.is_some() || subs.is_empty() => {
                    format!("give a value, e.g. {} = {}", key, example(k))
                }
                _ => format!("give its fields, e.g. {key} = {{ {subs} }}"),
            };
            return Err(src.fail(field, format!("an empty table sets nothing: {what}")));
        }
        toml::Value::Table(inner) => {
            if section == "traffic" && key == "rush" && !inner.contains_key("rate") {
                return Err(src.fail(
                    field,
                    "a rush needs its `rate` (creates/s), e.g. { rate = 2000, start = \"16h\", duration = \"4h\" }".into(),
                ));
            }
            inner
                .iter()
                .map(|(k, v)| (format!("{field}.{k}"), v))
                .collect()
        }
        // A table's name given a plain value: say what the table looks like.
        _ if section == "traffic" && key == "rush" => {
            return Err(src.fail(
                field,
                "a rush is a table: rush = { rate = 2000, start = \"16h\", duration = \"4h\" } (creates/s, start and length of the daily rush)".into(),
            ));
        }
        _ => vec![(field.to_string(), value)],
    })
}

/// A knob's default as a file would spell it, for an example in an error message.
fn example(k: &knobs::Knob) -> String {
    let d = k.default.unwrap_or("…");
    match k.kind {
        knobs::Kind::Duration { .. }
        | knobs::Kind::Choice(_)
        | knobs::Kind::Path
        | knobs::Kind::Size
        | knobs::Kind::PerDay => format!("{d:?}"),
        _ => d.to_string(),
    }
}

/// The knob fields under `field.`, as `a = …, b = …`.
fn sub_fields(field: &str) -> String {
    let parent = format!("{field}.");
    KNOBS
        .iter()
        .filter_map(|k| k.field?.strip_prefix(parent.as_str()))
        .map(|f| format!("{f} = …"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The name becomes part of output file names (tables/<name>-series.csv), so it must not be
/// able to climb out of the output directory.
fn check_name(src: &Source<'_>, name: &str) -> Result<(), ScenarioError> {
    name_problem(name).map_or(Ok(()), |m| Err(src.fail("name", m)))
}

/// Why `name` cannot name a scenario, or `None`: the one rule, for a file's `name` and for
/// the name `fit --out` would give the scenario it writes.
pub fn name_problem(name: &str) -> Option<String> {
    let name_ok = !name.is_empty()
        && !name.starts_with('.')
        && name.len() <= 100
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    (!name_ok).then(|| {
        format!(
            "{name:?}: use up to 100 letters, digits, '-', '_' or '.', not starting with '.' (it names output files)"
        )
    })
}

/// Which sections a file has.
#[derive(Debug, Clone, Copy)]
struct Parts {
    traffic: bool,
    budgets: bool,
    timeline: bool,
}

/// The file has something to run, and budgets that can be checked: budgets need simulated
/// traffic, and a store budget a run long enough to reach its steady state.
fn check_runnable(
    src: &Source<'_>,
    settings: &Settings,
    parts: Parts,
) -> Result<(), ScenarioError> {
    if parts.budgets && !parts.traffic {
        return Err(src.fail(
            "budgets",
            "budgets apply to simulated figures; add a [traffic] section".into(),
        ));
    }
    if settings.budgets.max_store_gb.is_some() {
        // The store is measured once it is steady, after one retention and a sweep.
        for cfg in settings.sim_configs() {
            let steady_from = cfg.retention_s() + cfg.sweep_period_s;
            if cfg.arrival_s() <= steady_from {
                return Err(src.fail(
                    "budgets.max_store_gb",
                    format!(
                        "the store is measured in its steady state, after one retention ({}) and a sweep; traffic.duration ({}) must be longer",
                        duration::format_secs(cfg.retention_s()),
                        duration::format_secs(cfg.arrival_s())
                    ),
                ));
            }
        }
    }
    if !parts.timeline && !parts.traffic {
        return Err(src.fail(
            "traffic",
            "nothing to run: add a [traffic] section (simulated) or a [timeline] (scripted)".into(),
        ));
    }
    Ok(())
}

/// The timeline with every body resolved to the JSON text a client would send.
fn timeline(t: TimelineToml) -> Result<Timeline, (String, String)> {
    if t.requests.is_empty() {
        return Err((
            "timeline.request".into(),
            "needs at least one request".into(),
        ));
    }
    let mut requests = Vec::new();
    for (i, r) in t.requests.into_iter().enumerate() {
        let body = match (r.raw_body, &r.body, &t.body) {
            (Some(raw), _, _) => raw,
            (None, Some(b), _) | (None, None, Some(b)) => body_text(b),
            (None, None, None) => {
                return Err((
                    format!("timeline.request[{i}].body"),
                    "no body here and no timeline.body to default to".into(),
                ));
            }
        };
        requests.push(TimelineRequest {
            lane: r.lane,
            sent: r.sent,
            caller: r.caller,
            key: r.key,
            no_key: r.no_key,
            body,
            carrier_latency: r.carrier_latency,
            finish: r.finish,
            die: r.die,
        });
    }
    let mut sweeps = Vec::new();
    for (i, s) in t.sweeps.into_iter().enumerate() {
        let batch = s
            .batch
            .unwrap_or_else(|| crate::settings::Settings::default().traffic.sweep_batch);
        if batch == 0 {
            return Err((
                format!("timeline.sweep[{i}].batch"),
                "must be at least 1".into(),
            ));
        }
        sweeps.push(TimelineSweep { at: s.at, batch });
    }
    Ok(Timeline {
        network: t.network,
        processing: t.processing,
        requests,
        sweeps,
    })
}

/// Converts a TOML body to the JSON text a client would send.
fn body_text(v: &toml::Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}
