//! Scenario files (TOML) as raw knob values: the file-side twin of [`crate::settings::flags`].
//!
//! Only the layout is typed here (which sections exist, the `[timeline]` script); every knob
//! field is read as a raw TOML value and checked by the same [`crate::settings::Values::check`] as a flag,
//! so a file and the command line cannot disagree on a default or a limit. Unknown fields are
//! refused, and every error names the file, the line (and the column when the value is
//! unreadable) and the dotted field, because a scenario directory is edited by hand.

use super::{Scenario, ScenarioError};
use crate::duration;
use crate::engine::DiePoint;
use crate::settings::knobs::{self, KNOBS, Raw};
use crate::settings::{Settings, SettingsError, Values};
use crate::sim::timeline::{Timeline, TimelineRequest};
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
    let text = crate::settings::read_limited(path).map_err(|io| ScenarioError::Read {
        path: path.to_path_buf(),
        io,
    })?;
    parse(path, &text)
}

/// Parses and validates `text`; `path` names the file in errors.
pub fn parse(path: &Path, text: &str) -> Result<Scenario, ScenarioError> {
    let invalid = |line, column, field: String, message: String| ScenarioError::Invalid {
        path: path.to_path_buf(),
        line,
        column,
        field,
        message,
    };
    let file: FileToml = toml::from_str(text).map_err(|e| {
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
        invalid(line, column, field, message)
    })?;
    // A field set in the file but unknown to the table.
    let unknown = |field: String, known: Vec<&str>| {
        let (line, column) = locate_key(text, &field).unzip();
        let key = field.rsplit('.').next().unwrap_or(&field).to_string();
        invalid(
            line,
            column,
            field,
            format!(
                "unknown field `{key}`, expected one of {}",
                known.join(", ")
            ),
        )
    };
    let mut raw: Vec<(&'static str, Raw)> = Vec::new();
    // `[traffic] retry_delay`, what `idemcalc fit` writes: a structured table, not a knob.
    let mut fitted: Option<crate::traffic::RetrySpec> = None;
    if let Some(seed) = &file.seed {
        raw.push(("seed", raw_of(seed)));
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
        let prefix = format!("{section}.");
        let known: Vec<&str> = KNOBS
            .iter()
            .filter_map(|k| k.field?.strip_prefix(&prefix))
            .map(|rest| rest.split('.').next().unwrap_or(rest))
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        for (key, value) in table {
            let field = format!("{section}.{key}");
            if field == "traffic.retry_delay" {
                let spec: crate::traffic::RetrySpec =
                    value.clone().try_into().map_err(|e: toml::de::Error| {
                        invalid(
                            locate(text, &field),
                            None,
                            field.clone(),
                            e.message().to_string(),
                        )
                    })?;
                spec.to_retry_delay()
                    .map_err(|e| invalid(locate(text, &field), None, field.clone(), e))?;
                fitted = Some(spec);
                continue;
            }
            // A table value (`latency = { median = .., p99 = .. }`, `rush = { .. }`) spreads
            // over the knobs of its sub-fields; a plain one is one knob.
            let entries: Vec<(String, &toml::Value)> = match value {
                // A size distribution's table (`{ median = .., p99 = .. }`) is one knob.
                toml::Value::Table(_)
                    if KNOBS.iter().any(|k| {
                        k.field == Some(field.as_str()) && k.kind == knobs::Kind::Size
                    }) =>
                {
                    vec![(field.clone(), value)]
                }
                toml::Value::Table(inner) => {
                    if section == "traffic" && key == "rush" && !inner.contains_key("rate") {
                        let line = locate(text, &field);
                        return Err(invalid(
                            line,
                            None,
                            field,
                            "a rush needs its `rate` (creates/s), e.g. { rate = 2000, start = \"16h\", duration = \"4h\" }".into(),
                        ));
                    }
                    inner
                        .iter()
                        .map(|(k, v)| (format!("{field}.{k}"), v))
                        .collect()
                }
                _ => vec![(field.clone(), value)],
            };
            for (f, v) in entries {
                match KNOBS.iter().find(|k| k.field == Some(f.as_str())) {
                    Some(k) => raw.push((k.name, raw_of(v))),
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
                        return Err(unknown(f, known));
                    }
                }
            }
        }
    }
    let settings_error = |e: SettingsError| {
        let k = knobs::knob(e.knob_name);
        let field = e.field.or(k.field).unwrap_or(k.name).to_string();
        let (line, column) = match locate_key(text, &field) {
            Some((line, _)) if e.unreadable => (Some(line), value_column(text, line)),
            Some((line, _)) => (Some(line), None),
            None => (None, None),
        };
        invalid(line, column, field, e.message)
    };
    let values = Values::check(raw.iter().cloned()).map_err(settings_error)?;
    let mut settings = Settings::from_values(&values).map_err(settings_error)?;
    settings.retry.fitted = fitted;

    let fail = |field: &str, message: String| {
        invalid(locate(text, field), None, field.to_string(), message)
    };
    // The name becomes part of output file names (tables/<name>-series.csv), so it must not be
    // able to climb out of the output directory.
    let name_ok = !file.name.is_empty()
        && !file.name.starts_with('.')
        && file.name.len() <= 100
        && file
            .name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
    if !name_ok {
        return Err(fail(
            "name",
            format!(
                "{:?}: use up to 100 letters, digits, '-', '_' or '.', not starting with '.' (it names output files)",
                file.name
            ),
        ));
    }
    let timeline = match file.timeline {
        None => None,
        Some(t) => Some(timeline(t).map_err(|(field, message)| fail(&field, message))?),
    };
    let has_traffic = file.traffic.is_some();
    if file.budgets.is_some() && !has_traffic {
        return Err(fail(
            "budgets",
            "budgets apply to simulated figures; add a [traffic] section".into(),
        ));
    }
    if settings.budgets.max_store_gb.is_some() {
        // The store is measured once it is steady, after one retention and a sweep.
        for cfg in settings.sim_configs() {
            let steady_from = cfg.retention_s() + cfg.sweep_period_s;
            if cfg.arrival_s() <= steady_from {
                return Err(fail(
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
    if timeline.is_none() && !has_traffic {
        return Err(fail(
            "traffic",
            "nothing to run: add a [traffic] section (simulated) or a [timeline] (scripted)".into(),
        ));
    }
    Ok(Scenario {
        name: file.name,
        description: file.description,
        budgets: (file.budgets.is_some()).then(|| settings.budgets.clone()),
        simulated: has_traffic,
        settings,
        timeline,
        given: raw,
    })
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
    Ok(Timeline {
        network: t.network,
        processing: t.processing,
        requests,
    })
}

/// Converts a TOML body to the JSON text a client would send.
fn body_text(v: &toml::Value) -> String {
    serde_json::to_string(v).unwrap_or_default()
}

/// The 1-based column of the value on `line` (after its `=`), where an unreadable value is.
fn value_column(text: &str, line: usize) -> Option<usize> {
    let l = text.lines().nth(line.checked_sub(1)?)?;
    let eq = l.find('=')?;
    let after = &l[eq + 1..];
    let pad = after.len() - after.trim_start().len();
    Some(l[..eq + 1 + pad].chars().count() + 1)
}

/// Like [`locate`], with the column where the key starts.
fn locate_key(text: &str, field: &str) -> Option<(usize, usize)> {
    let line = locate(text, field)?;
    let l = text.lines().nth(line - 1)?;
    Some((line, l.chars().count() - l.trim_start().chars().count() + 1))
}
/// 1-based line and column of byte `offset` in `text`.
fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let column = before
        .rfind('\n')
        .map_or(before.chars().count(), |i| before[i + 1..].chars().count())
        + 1;
    (line, column)
}

/// The table a line belongs to, if the line is a `[table]` or `[[table]]` header.
fn header(line: &str) -> Option<&str> {
    let t = line.trim();
    let t = t.split('#').next().unwrap_or("").trim();
    if let Some(inner) = t.strip_prefix("[[").and_then(|s| s.strip_suffix("]]")) {
        return Some(inner.trim());
    }
    t.strip_prefix('[')
        .and_then(|s| s.strip_suffix(']'))
        .map(str::trim)
}

/// The key a `key = value` line sets.
fn key_of(line: &str) -> Option<&str> {
    let t = line.trim();
    if t.starts_with('#') || t.starts_with('[') {
        return None;
    }
    let (key, _) = t.split_once('=')?;
    Some(key.trim().trim_matches('"'))
}

/// The dotted field at byte `offset`: the enclosing table plus the key of that line.
fn field_at(text: &str, offset: usize) -> String {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let line_start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let line_end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    let line = &text[line_start..line_end];
    if let Some(h) = header(line) {
        return h.to_string();
    }
    let table = text[..line_start].lines().rev().find_map(header);
    // For an inline table (`rush = { rate = -1 }`) name the key nearest before the offset.
    let in_line = &text[line_start..offset];
    let key = match key_of(line) {
        Some(outer) => {
            let inner = in_line
                .rsplit(['{', ','])
                .next()
                .and_then(key_of)
                .filter(|k| *k != outer);
            match inner {
                Some(k) if in_line.contains('{') => format!("{outer}.{k}"),
                _ => outer.to_string(),
            }
        }
        None => in_line.split_whitespace().next().unwrap_or("").to_string(),
    };
    match table {
        Some(t) if !key.is_empty() => format!("{t}.{key}"),
        Some(t) => t.to_string(),
        None => key,
    }
}

/// "missing field `name`" → `name`.
fn missing_field(message: &str) -> Option<String> {
    let rest = message.split("missing field `").nth(1)?;
    Some(rest.split('`').next()?.to_string())
}

/// The 1-based line where the dotted `field` is set, or its table's header, or none.
/// `timeline.request[2].body` finds the third `[[timeline.request]]`.
fn locate(text: &str, field: &str) -> Option<usize> {
    let parts: Vec<&str> = field.split('.').collect();
    // Longest prefix first: the key itself, then its table.
    for n in (1..=parts.len()).rev() {
        let (table_parts, key) = parts[..n].split_at(n - 1);
        let key = key[0];
        let (key, index) = match key.split_once('[') {
            Some((k, i)) => (k, i.trim_end_matches(']').parse::<usize>().ok()),
            None => (key, None),
        };
        let table = table_parts.join(".");
        let mut current = String::new();
        let mut seen = 0usize;
        for (i, line) in text.lines().enumerate() {
            if let Some(h) = header(line) {
                current = h.to_string();
                let full = if table.is_empty() {
                    key.to_string()
                } else {
                    format!("{table}.{key}")
                };
                if h == full {
                    if index.is_none_or(|want| want == seen) {
                        return Some(i + 1);
                    }
                    seen += 1;
                }
                continue;
            }
            if current == table && key_of(line) == Some(key) {
                return Some(i + 1);
            }
        }
    }
    None
}
