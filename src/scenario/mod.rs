//! Scenarios: a name, the validated [`Settings`] of a simulated run, an optional scripted
//! timeline (`idemcalc scenario`) and the budgets a report checks (`idemcalc report`).
//!
//! The file format (TOML, documented in `scenarios/README.md`) is read by
//! [`file`]; what is here holds no TOML, so the simulator and the report see
//! only checked values.

pub mod file;

use crate::carrier::CarrierConfig;
use crate::engine::EngineConfig;
use crate::model::ModelParams;
use crate::settings::flags::Flags;
use crate::settings::{Settings, SettingsError};
use crate::sim::replay::SimConfig;
use crate::sim::timeline::{self, Timeline, TimelineError, TimelineReport};
use crate::store::Store;
use serde::Serialize;
use std::path::{Path, PathBuf};

pub use crate::settings::Budgets;

/// A scenario that cannot be used. `line` is 1-based; it is absent only when the file could not
/// be read or the field does not appear in the file (a required field that is missing).
#[derive(Debug, thiserror::Error)]
pub enum ScenarioError {
    // Not `source`, so that `{:#}` chains do not print the cause twice.
    #[error("{}: cannot read the scenario file: {io}", path.display())]
    Read { path: PathBuf, io: std::io::Error },
    #[error("{}: cannot read the scenario directory: {io}", path.display())]
    ReadDir { path: PathBuf, io: std::io::Error },
    #[error("{}{}: field `{field}`: {message}", path.display(), at(*line, *column))]
    Invalid {
        path: PathBuf,
        line: Option<usize>,
        column: Option<usize>,
        field: String,
        message: String,
    },
}

fn at(line: Option<usize>, column: Option<usize>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(":{l}:{c}"),
        (Some(l), None) => format!(":{l}"),
        _ => String::new(),
    }
}

impl ScenarioError {
    /// The dotted field the error is about (`traffic.timeout_fraction`), if any.
    pub fn field(&self) -> Option<&str> {
        match self {
            ScenarioError::Read { .. } | ScenarioError::ReadDir { .. } => None,
            ScenarioError::Invalid { field, .. } => Some(field),
        }
    }

    pub fn line(&self) -> Option<usize> {
        match self {
            ScenarioError::Read { .. } | ScenarioError::ReadDir { .. } => None,
            ScenarioError::Invalid { line, .. } => *line,
        }
    }
}

/// A loaded, validated scenario.
#[derive(Debug, Clone, Serialize)]
pub struct Scenario {
    pub name: String,
    pub description: String,
    /// Every knob, defaults filled in.
    pub settings: Settings,
    /// The file has a `[traffic]` section: it is simulated once per retention.
    pub simulated: bool,
    pub timeline: Option<Timeline>,
    /// Limits the report checks; a broken one makes `idemcalc report` exit 1.
    pub budgets: Option<Budgets>,
    /// The knob values the file set, for flags to override (`simulate --scenario`).
    #[serde(skip)]
    pub(crate) given: Vec<(crate::settings::knobs::KnobId, crate::settings::knobs::Raw)>,
}

impl Scenario {
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        file::load(path)
    }

    /// Parses and validates `text`; `path` names the file in errors.
    pub fn parse(path: &Path, text: &str) -> Result<Self, ScenarioError> {
        file::parse(path, text)
    }

    /// The engine at the first retention: what a timeline runs with.
    pub fn engine_config(&self) -> EngineConfig {
        let first = self.settings.retentions().first().copied().unwrap_or(0.0);
        self.settings.engine_config(first)
    }

    pub fn carrier_config(&self) -> CarrierConfig {
        self.settings.carrier_config()
    }

    /// The scenario under command-line flags (`simulate --scenario FILE --flag …`): the file's
    /// fields and the flags are checked together, a flag winning over its field. The file's
    /// fitted retry distribution stays unless `--retry-cdf` replaces it.
    pub fn settings_under<const C: u8>(&self, flags: &Flags<C>) -> Result<Settings, SettingsError> {
        let mut settings = flags.settings_over(&self.given)?;
        if !flags.gives(crate::settings::knobs::KnobId::RetryCdf) {
            settings.retry.fitted = self.settings.retry.fitted.clone();
        }
        Ok(settings)
    }

    /// Runs the scripted timeline against `store`, with the engine at the first retention.
    pub fn run_timeline(&self, store: Box<dyn Store>) -> Result<TimelineReport, TimelineError> {
        let t = self.timeline.as_ref().ok_or(TimelineError::NoTimeline)?;
        timeline::run(
            &self.name,
            t,
            self.engine_config(),
            self.carrier_config(),
            store,
        )
    }

    /// One simulation per retention, in the order the file lists them. Empty for a
    /// timeline-only scenario.
    pub fn sim_configs(&self) -> Vec<SimConfig> {
        if !self.simulated {
            return Vec::new();
        }
        self.settings.sim_configs()
    }

    /// What the analytic model is asked for this scenario at `retention_s`.
    pub fn model_params(&self, retention_s: f64) -> ModelParams {
        self.settings.model_params(retention_s)
    }
}

/// A scenario file and what it says.
#[derive(Debug, Clone)]
pub struct Loaded {
    pub path: PathBuf,
    pub scenario: Scenario,
}

impl Loaded {
    pub fn file_name(&self) -> String {
        self.path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default()
    }
}

/// Loads every `*.toml` of `dir` in file-name order. All bad files are reported together, so a
/// CI log shows every mistake at once.
pub fn load_dir(dir: &Path) -> Result<Vec<Loaded>, Vec<ScenarioError>> {
    let entries = match std::fs::read_dir(dir) {
        Ok(e) => e,
        Err(source) => {
            return Err(vec![ScenarioError::ReadDir {
                path: dir.to_path_buf(),
                io: source,
            }]);
        }
    };
    let mut paths: Vec<PathBuf> = entries
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| p.extension().is_some_and(|x| x == "toml"))
        .collect();
    paths.sort();
    let mut loaded = Vec::new();
    let mut errors = Vec::new();
    for path in paths {
        match Scenario::load(&path) {
            Ok(scenario) => loaded.push(Loaded { path, scenario }),
            Err(e) => errors.push(e),
        }
    }
    let mut names: Vec<&str> = loaded.iter().map(|l| l.scenario.name.as_str()).collect();
    names.sort();
    if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
        let dup = w[0].to_string();
        for l in loaded.iter().filter(|l| l.scenario.name == dup).skip(1) {
            errors.push(ScenarioError::Invalid {
                path: l.path.clone(),
                line: Some(1),
                column: None,
                field: "name".into(),
                message: format!("another scenario is already called `{dup}`"),
            });
        }
    }
    if errors.is_empty() {
        Ok(loaded)
    } else {
        Err(errors)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<Scenario, ScenarioError> {
        Scenario::parse(Path::new("x.toml"), text)
    }

    fn err(text: &str) -> (Option<usize>, String, String) {
        let e = parse(text).unwrap_err();
        let shown = e.to_string();
        (e.line(), e.field().unwrap_or("").to_string(), shown)
    }

    /// Lines 1-4; a test's own lines start at line 5.
    const TRAFFIC: &str = "name = \"t\"\n[engine]\nretention = [\"24h\", \"3d\"]\n[traffic]\n";

    #[test]
    fn a_sweep_gives_one_sim_config_per_retention() {
        let s = parse(&format!("{TRAFFIC}rate = 400\n")).unwrap();
        let configs = s.sim_configs();
        assert_eq!(configs.len(), 2);
        assert_eq!(configs[1].engine.retention_ms, 259_200_000);
        assert_eq!(configs[0].rate_per_s, 400.0);
        let p = s.model_params(86_400.0);
        assert_eq!(p.rate_per_s, 400.0);
        // The seed's 2,000/s rush sizes the worst case unless the traffic peaks higher.
        assert_eq!(p.peak_rate_per_s, 2000.0);
    }

    #[test]
    fn a_rush_sets_the_peak_and_the_mean() {
        let s = parse(&format!(
            "{TRAFFIC}rate = 400\nrush = {{ rate = 2000, start = \"16h\", duration = \"4h\" }}\n"
        ))
        .unwrap();
        let p = s.model_params(86_400.0);
        assert_eq!(p.peak_rate_per_s, 2000.0);
        assert!((p.rate_per_s - (400.0 * 20.0 + 2000.0 * 4.0) / 24.0).abs() < 1e-9);
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let cases = [
            // unknown field
            (
                format!("{TRAFFIC}rate = 400\nsampel = 0.1\n"),
                6,
                "traffic.sampel",
            ),
            // bad duration in a list
            (
                "name = \"t\"\n[engine]\nretention = [\"24h\", \"3 parsecs\"]\n[traffic]\n"
                    .to_string(),
                3,
                "engine.retention",
            ),
            // out of range, caught after parsing
            (
                format!("{TRAFFIC}rate = 400\ntimeout_fraction = 1.5\n"),
                6,
                "traffic.timeout_fraction",
            ),
            (format!("{TRAFFIC}rate = -3\n"), 5, "traffic.rate"),
            (
                format!("{TRAFFIC}rate = 400\n[budgets]\nmax_store_gb = -1\n"),
                7,
                "budgets.max_store_gb",
            ),
            (
                format!(
                    "{TRAFFIC}rate = 400\nrush = {{ rate = 2000, start = \"23h\", duration = \"4h\" }}\n"
                ),
                6,
                "traffic.rush",
            ),
            (
                "name = \"t\"\n[traffic]\n[budgets]\nmax_cost = 3\n".to_string(),
                4,
                "budgets.max_cost",
            ),
            (
                "name = \"t\"\n[trafic]\nrate = 3\n".to_string(),
                2,
                "trafic",
            ),
        ];
        for (text, line, field) in cases {
            let (got_line, got_field, shown) = err(&text);
            assert_eq!(got_field, field, "{shown}");
            assert_eq!(got_line, Some(line), "{shown}");
            assert!(shown.starts_with(&format!("x.toml:{line}")), "{shown}");
            assert!(shown.contains(field), "{shown}");
        }
    }

    #[test]
    fn nothing_to_run_and_budgets_without_traffic_are_refused() {
        let (_, field, _) = err("name = \"t\"\n");
        assert_eq!(field, "traffic");
        let (line, field, _) = err(
            "name = \"t\"\n[budgets]\nmax_store_gb = 3\n[timeline]\nbody = {a = 1}\n[[timeline.request]]\nsent = \"0s\"\n",
        );
        assert_eq!((line, field.as_str()), (Some(2), "budgets"));
    }

    #[test]
    fn names_cannot_leave_the_output_directory() {
        for bad in ["../x", "a/b", ".hidden", "", "tab\there"] {
            let text = format!("name = {bad:?}\n[traffic]\n");
            let (line, field, shown) = err(&text);
            assert_eq!((line, field.as_str()), (Some(1), "name"), "{shown}");
        }
        assert!(parse("name = \"ok-1.2_x\"\n[traffic]\n").is_ok());
    }

    #[test]
    fn retention_is_one_or_many() {
        let s = parse(TRAFFIC).unwrap();
        assert_eq!(s.settings.retentions(), [86_400.0, 259_200.0]);
        let one = parse("name = \"t\"\n[engine]\nretention = \"3d\"\n[traffic]\n").unwrap();
        assert_eq!(one.settings.retentions(), [259_200.0]);
    }

    /// Issue 15: `idemcalc scenario /dev/zero` grew to gigabytes; input files are regular
    /// files and have a size limit.
    #[test]
    fn an_endless_file_is_refused_quickly() {
        let e = Scenario::load(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/dev/zero") && e.contains("is a device"), "{e}");
        let dir = tempfile::tempdir().unwrap();
        let big = dir.path().join("big.toml");
        std::fs::write(&big, "#".repeat(2 << 20)).unwrap();
        let e = Scenario::load(&big).unwrap_err().to_string();
        assert!(e.contains("big.toml") && e.contains("limit"), "{e}");
    }
}
