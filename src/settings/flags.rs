//! Command-line flags built from the settings table: one `Arg` per knob of the subcommand.
//!
//! Parsing only records what was typed (no clap value parsers, no clap defaults), so a flag
//! and a file field go through the same check in [`super::Values::check`] and a flag left out
//! means the table's default, exactly as a field left out of a file does.

use super::knobs::{KNOBS, Kind, KnobId, Raw};
use super::{Settings, SettingsError, Values};
use clap::{Arg, ArgAction, ArgMatches, Args, Command, FromArgMatches};

/// The flags of one subcommand (`C` is a [`super::knobs`] command bit), as typed.
#[derive(Debug, Clone, Default)]
pub struct Flags<const C: u8> {
    given: Vec<(KnobId, Raw)>,
}

impl<const C: u8> Flags<C> {
    /// The flags as the one validated settings value.
    pub fn settings(&self) -> Result<Settings, SettingsError> {
        self.settings_over(&[])
    }

    /// The flags over a base (a scenario file's values): a flag given wins over the file.
    pub fn settings_over(&self, base: &[(KnobId, Raw)]) -> Result<Settings, SettingsError> {
        let merged = base.iter().chain(self.given.iter()).cloned();
        Settings::from_values(&Values::check(merged)?)
    }

    /// Whether the knob `id` was given as a flag.
    pub fn gives(&self, id: KnobId) -> bool {
        self.given.iter().any(|(n, _)| *n == id)
    }

    /// Flags as if typed, without clap: what another subcommand passes on (`load` takes the
    /// retry distribution's flags and reads them as `simulate` would).
    pub fn given(pairs: &[(KnobId, &str)]) -> Self {
        Flags {
            given: pairs
                .iter()
                .map(|(k, v)| (*k, Raw::Text(v.to_string())))
                .collect(),
        }
    }

    /// Test helper: flags as if typed, without clap, by knob name (a test panics on a name the
    /// table does not have).
    pub fn from_pairs(pairs: &[(&'static str, &str)]) -> Self {
        Flags {
            given: pairs
                .iter()
                .map(|(n, v)| {
                    let k = super::knobs::by_name(n).unwrap_or_else(|| panic!("no knob {n}"));
                    (k.id, Raw::Text(v.to_string()))
                })
                .collect(),
        }
    }
}

/// `--help` headings, in the order they are shown: a knob's heading is its scenario-file
/// section, so the help reads like a scenario file (`--retention` first, not 25th).
const HEADINGS: [(&str, &str); 6] = [
    ("engine.", "Engine (the seed's server)"),
    ("traffic.", "Traffic and the client"),
    ("carrier.", "Carrier"),
    ("budgets.", "Budgets (the decision)"),
    ("model.", "Model and prices"),
    ("", "Run"),
];

/// The knobs `-h` shows: the questions most runs ask. `--help` shows every knob.
const SHORT_HELP: [&str; 12] = [
    "--retention",
    "--rate",
    "--peak-rate",
    "--duration",
    "--replicates",
    "--seed",
    "--sample",
    "--retry-cdf",
    "--response-bytes",
    "--max-duplicates-per-day",
    "--max-store-gb",
    "--max-cost-per-day",
];

fn heading(k: &super::knobs::Knob) -> usize {
    let field = k.field.unwrap_or("");
    HEADINGS
        .iter()
        .position(|(prefix, _)| field.starts_with(prefix))
        .unwrap_or(HEADINGS.len() - 1)
}

/// The first sentence of a help text, for `-h`; `--help` shows it all.
fn first_sentence(help: &str) -> &str {
    let mut from = 0;
    while let Some(i) = help[from..].find(". ") {
        let end = from + i;
        let before = &help[..end];
        if !(before.ends_with("e.g") || before.ends_with("i.e")) {
            return &help[..=end];
        }
        from = end + 2;
    }
    help
}

fn augment(mut cmd: Command, command: u8) -> Command {
    let mut knobs: Vec<_> = KNOBS.iter().filter(|k| k.commands & command != 0).collect();
    // Stable: within a heading, the table's order.
    knobs.sort_by_key(|k| heading(k));
    let hidden = knobs
        .iter()
        .filter(|k| !SHORT_HELP.contains(&k.flag))
        .count();
    if hidden > 0 {
        cmd = cmd
            .after_help(format!(
                "{hidden} more flags (engine, carrier, failure switches, prices): --help lists every one, grouped."
            ))
            .after_long_help("");
    }
    for k in knobs {
        let short_help = SHORT_HELP.contains(&k.flag);
        let section = HEADINGS[heading(k)].1;
        let short = first_sentence(k.help).to_string();
        let mut help = k.help.to_string();
        if let Kind::Choice(words) = k.kind {
            let words: Vec<String> = words.iter().map(|w| w.replace('_', "-")).collect();
            help.push_str(&format!(" [possible values: {}]", words.join(", ")));
        }
        if k.kind == Kind::Switch {
            let mut arg = Arg::new(k.name)
                .long(&k.flag[2..])
                .help(short)
                .long_help(help)
                .help_heading(section)
                .hide_short_help(!short_help)
                .action(ArgAction::SetTrue);
            for a in k.aliases {
                arg = arg.alias(*a);
            }
            cmd = cmd.arg(arg);
            continue;
        }
        if let Some(d) = k.default {
            help.push_str(&format!(" [default: {}]", d.replace('_', "-")));
        }
        let mut arg = Arg::new(k.name)
            .long(&k.flag[2..])
            .value_name(k.value_name)
            .help(short)
            .long_help(help)
            .help_heading(section)
            .hide_short_help(!short_help)
            .action(ArgAction::Set)
            .num_args(1)
            // `--rate -3` reaches the check, which names the flag, instead of clap's
            // "unexpected argument".
            .allow_hyphen_values(true);
        for a in k.aliases {
            arg = arg.alias(*a);
        }
        cmd = cmd.arg(arg);
    }
    cmd
}

impl<const C: u8> FromArgMatches for Flags<C> {
    fn from_arg_matches(m: &ArgMatches) -> Result<Self, clap::Error> {
        let given = KNOBS
            .iter()
            .filter(|k| k.commands & C != 0)
            .filter_map(|k| {
                if k.kind == Kind::Switch {
                    // Given means on; left out means the table's default, as in a file.
                    return m.get_flag(k.name).then_some((k.id, Raw::Bool(true)));
                }
                m.get_one::<String>(k.name)
                    .map(|v| (k.id, Raw::Text(v.clone())))
            })
            .collect();
        Ok(Flags { given })
    }

    fn update_from_arg_matches(&mut self, m: &ArgMatches) -> Result<(), clap::Error> {
        *self = Self::from_arg_matches(m)?;
        Ok(())
    }
}

impl<const C: u8> Args for Flags<C> {
    fn augment_args(cmd: Command) -> Command {
        augment(cmd, C)
    }

    fn augment_args_for_update(cmd: Command) -> Command {
        augment(cmd, C)
    }
}
