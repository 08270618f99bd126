//! The request mix: which kinds of CreateLabel call the bench sends, in what proportions.

use crate::engine::Outcome;
use serde::{Serialize, Serializer};
use std::fmt;
use std::str::FromStr;

/// One kind of CreateLabel call, named by what the engine must answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A new key: claim, carrier, complete; 201.
    First,
    /// A completed key with the same body: the saved response; 201 replayed.
    Replay,
    /// A key whose lease another attempt holds: 409 request_in_progress.
    Conflict,
    /// A key whose holder died and whose lease expired: take over, carrier, complete; 201.
    Takeover,
    /// A completed key with another body: 422 idempotency_key_reused.
    Reused,
}

impl Kind {
    pub const ALL: [Kind; 5] = [
        Kind::First,
        Kind::Replay,
        Kind::Conflict,
        Kind::Takeover,
        Kind::Reused,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Kind::First => "first",
            Kind::Replay => "replay",
            Kind::Conflict => "conflict",
            Kind::Takeover => "takeover",
            Kind::Reused => "reused",
        }
    }

    fn index(self) -> usize {
        self as usize
    }

    fn parse(name: &str) -> Option<Self> {
        match name {
            "first" => Some(Kind::First),
            "replay" => Some(Kind::Replay),
            "conflict" | "409" => Some(Kind::Conflict),
            "takeover" => Some(Kind::Takeover),
            "reused" | "422" => Some(Kind::Reused),
            _ => None,
        }
    }

    /// What the engine must answer. A different answer is a bug, counted and failing the run.
    pub fn expected(self) -> Outcome {
        match self {
            Kind::First | Kind::Takeover => Outcome::Created,
            Kind::Replay => Outcome::Replayed,
            Kind::Conflict => Outcome::InProgress,
            Kind::Reused => Outcome::KeyReused,
        }
    }

    /// What the raw-SQL baseline must find. It compares no hashes, so a reused key reads like a
    /// replay: the same statements, the same rollback.
    pub fn expected_baseline(self) -> Outcome {
        match self {
            Kind::Reused => Outcome::Replayed,
            other => other.expected(),
        }
    }
}

/// A value per kind, in [`Kind::ALL`] order; serialises as a map from kind name.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct PerKind<T>(pub [T; 5]);

impl<T: Copy> PerKind<T> {
    pub fn get(&self, kind: Kind) -> T {
        self.0[kind.index()]
    }

    pub fn get_mut(&mut self, kind: Kind) -> &mut T {
        &mut self.0[kind.index()]
    }
}

impl<T: Serialize> Serialize for PerKind<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(Kind::ALL.iter().map(|k| (k.name(), &self.0[k.index()])))
    }
}

/// Weights are small integers: a share of 0.01 % is as fine as a bench needs.
pub const MAX_WEIGHT: u32 = 1_000_000;

/// Relative weights of each kind, e.g. `first=80,replay=10,conflict=5,takeover=5`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct Mix {
    pub weights: PerKind<u32>,
}

impl Default for Mix {
    fn default() -> Self {
        Self {
            weights: PerKind([80, 10, 5, 5, 0]),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("--mix `{text}`: {problem} (write it like first=80,replay=10,conflict=5,takeover=5)")]
pub struct MixError {
    pub text: String,
    pub problem: String,
}

impl Mix {
    pub fn total(&self) -> u64 {
        self.weights.0.iter().map(|&w| u64::from(w)).sum()
    }

    /// The fraction of requests of `kind`.
    pub fn share(&self, kind: Kind) -> f64 {
        match self.total() {
            0 => 0.0,
            t => f64::from(self.weights.get(kind)) / t as f64,
        }
    }

    /// The kind for a uniform draw `roll` in `0..total()`.
    pub fn pick(&self, roll: u64) -> Kind {
        let mut acc = 0u64;
        for kind in Kind::ALL {
            acc += u64::from(self.weights.get(kind));
            if roll < acc {
                return kind;
            }
        }
        Kind::First
    }
}

impl FromStr for Mix {
    type Err = MixError;

    fn from_str(text: &str) -> Result<Self, MixError> {
        let fail = |problem: String| MixError {
            text: text.to_string(),
            problem,
        };
        let mut weights = PerKind([0u32; 5]);
        let mut seen = [false; 5];
        for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (name, weight) = part
                .split_once('=')
                .ok_or_else(|| fail(format!("`{part}` is not kind=weight")))?;
            let kind = Kind::parse(name.trim()).ok_or_else(|| {
                fail(format!(
                    "unknown kind `{}`; the kinds are first, replay, conflict (or 409), takeover, reused (or 422)",
                    name.trim()
                ))
            })?;
            let weight: u32 = weight
                .trim()
                .parse()
                .ok()
                .filter(|w| *w <= MAX_WEIGHT)
                .ok_or_else(|| {
                    fail(format!(
                        "the weight of {} must be a whole number from 0 to {MAX_WEIGHT}",
                        kind.name()
                    ))
                })?;
            if std::mem::replace(&mut seen[kind.index()], true) {
                return Err(fail(format!("{} is given twice", kind.name())));
            }
            *weights.get_mut(kind) = weight;
        }
        let mix = Mix { weights };
        if mix.total() == 0 {
            return Err(fail("at least one weight must be above 0".into()));
        }
        Ok(mix)
    }
}

impl fmt::Display for Mix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = Kind::ALL
            .iter()
            .filter(|k| self.weights.get(**k) > 0)
            .map(|k| format!("{}={}", k.name(), self.weights.get(*k)))
            .collect();
        f.write_str(&parts.join(","))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_and_prints_back() {
        let m: Mix = "first=80, replay=10,409=5,takeover=5".parse().unwrap();
        assert_eq!(m.to_string(), "first=80,replay=10,conflict=5,takeover=5");
        assert_eq!(m, Mix::default());
        assert!((m.share(Kind::Conflict) - 0.05).abs() < 1e-12);
        assert_eq!(m.pick(0), Kind::First);
        assert_eq!(m.pick(79), Kind::First);
        assert_eq!(m.pick(80), Kind::Replay);
        assert_eq!(m.pick(99), Kind::Takeover);
    }

    #[test]
    fn refuses_what_is_not_a_mix() {
        for bad in [
            "",
            "first",
            "first=0",
            "first=-1",
            "first=x",
            "frist=1",
            "first=1,first=2",
            "first=2000000",
        ] {
            let e = bad.parse::<Mix>().unwrap_err();
            assert_eq!(e.text, bad);
        }
    }
}
