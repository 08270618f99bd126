//! How expired key records leave a store, as a run asks for it and as a store runs it: a pure
//! value the settings, the decision and the stores share (how long a record lives depends on
//! it), apart from any store so that knowing it does not mean knowing stores.

use crate::clock::Millis;

/// How expired key records leave the store (`--sweeper`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Sweeper {
    /// The seed's: batched `DELETE … WHERE expires_at <= now` over an index on `expires_at`.
    /// Every purged row leaves a dead tuple for vacuum, and its WAL.
    #[default]
    Delete,
    /// The key table partitioned by `expires_at`, one partition per `period_ms`; a partition
    /// whose whole range has expired is detached and dropped. No dead tuples and almost no WAL,
    /// but a record lives until its partition ends: up to one period past its retention.
    Partitions { period_ms: Millis },
}

/// A partition period shorter than this is refused by the store (at 1 s); the default keeps
/// a short retention from making hundreds of partitions.
const MIN_DEFAULT_PARTITION_S: f64 = 60.0;

/// The sweeper a run asked for (`--sweeper`, `--partition-period`), before a retention picks
/// its partition period: what the decision needs to know how long records live at each
/// retention it weighs. The one sweeper choice of `simulate`, `report`, `serve` and `bench`;
/// [`Sweeper`] is what a store runs once the period is known.
#[derive(Debug, Clone, Copy, PartialEq, Default, serde::Serialize, serde::Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SweeperPlan {
    #[default]
    Delete,
    /// `period_s`: the partition period given, or `None` for a quarter of each retention.
    Partitions { period_s: Option<f64> },
}

impl SweeperPlan {
    /// The names `--sweeper` takes, in the order [`SweeperPlan::named`] reads them.
    pub const NAMES: &'static [&'static str] = &["delete", "partitions"];

    /// The plan a `--sweeper` name and a partition period give; `None` for a name not in
    /// [`SweeperPlan::NAMES`].
    pub fn named(name: &str, period_s: Option<f64>) -> Option<Self> {
        match name {
            "delete" => Some(SweeperPlan::Delete),
            "partitions" => Some(SweeperPlan::Partitions { period_s }),
            _ => None,
        }
    }

    /// The name `--sweeper` takes for this plan.
    pub fn name(self) -> &'static str {
        match self {
            SweeperPlan::Delete => Self::NAMES[0],
            SweeperPlan::Partitions { .. } => Self::NAMES[1],
        }
    }

    /// The store's sweeper at a retention: partitions default to a quarter of the retention,
    /// so a record outlives its retention by at most a quarter and a lookup probes about five
    /// partitions.
    pub fn at(self, retention_s: f64) -> Sweeper {
        match self {
            SweeperPlan::Delete => Sweeper::Delete,
            SweeperPlan::Partitions { period_s } => {
                let period_s = period_s.unwrap_or((retention_s / 4.0).max(MIN_DEFAULT_PARTITION_S));
                Sweeper::Partitions {
                    period_ms: (period_s * 1000.0).round() as i64,
                }
            }
        }
    }
}

impl Sweeper {
    /// How long an expired record stays, on average, before it leaves the store: the one
    /// answer to "how long does a record live" (its retention plus this). The seed's `DELETE`
    /// takes it at the next sweep, half a sweep period on average; a partition is dropped at
    /// the first sweep after its whole range has passed, half a partition period on average
    /// and then half a sweep period.
    pub fn mean_lag_s(self, sweep_period_s: f64) -> f64 {
        match self {
            Sweeper::Delete => sweep_period_s / 2.0,
            Sweeper::Partitions { period_ms } => period_ms as f64 / 2000.0 + sweep_period_s / 2.0,
        }
    }

    /// The longest an expired record can stay (a whole partition period and a sweep period, or
    /// a sweep period), and the cycle the store's size repeats with at a steady rate (the
    /// sawtooth of partitions dropped one period apart): a steady-state average must start
    /// after the first and span whole cycles of the second. The seed's sweeps take a minute's
    /// expiries at a time, a sawtooth too fine to bias an average over hours: no cycle (0).
    pub fn max_lag_and_cycle_s(self, sweep_period_s: f64) -> (f64, f64) {
        match self {
            Sweeper::Delete => (sweep_period_s, 0.0),
            Sweeper::Partitions { period_ms } => {
                let period_s = period_ms as f64 / 1000.0;
                (period_s + sweep_period_s, period_s)
            }
        }
    }

    /// Whether the key table is partitioned: no unique index then spans it.
    pub fn partitioned(self) -> bool {
        matches!(self, Sweeper::Partitions { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every name `--sweeper` lists reads back as the plan that writes it.
    #[test]
    fn every_sweeper_name_is_its_own_plan() {
        for name in SweeperPlan::NAMES {
            let plan = SweeperPlan::named(name, Some(60.0)).expect(name);
            assert_eq!(plan.name(), *name);
        }
        assert_eq!(SweeperPlan::named("vacuum", None), None);
    }
}
