//! How the latency table splits what the attempts came to: one row per outcome as the client
//! heard it by its deadline, and one row of the answers heard after it. Below both the
//! collector (`load::tally`) and the report (`load::summary`), which name the rows alike.

use serde::Serialize;

/// What one attempt came to, as the latency table splits it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// A 2xx without `Idempotent-Replayed: true`: the work ran.
    FirstRun,
    /// A 2xx with `Idempotent-Replayed: true`: the saved answer.
    Replay,
    /// A 409: another attempt holds the key.
    Conflict,
    /// Any other status, or no HTTP answer at all (refused, reset, TLS).
    Error,
    /// Nothing within the attempt's deadline.
    Timeout,
}

impl Outcome {
    pub const ALL: [Outcome; 5] = [
        Outcome::FirstRun,
        Outcome::Replay,
        Outcome::Conflict,
        Outcome::Error,
        Outcome::Timeout,
    ];

    pub fn name(self) -> &'static str {
        match self {
            Outcome::FirstRun => "first_run",
            Outcome::Replay => "replay",
            Outcome::Conflict => "conflict",
            Outcome::Error => "error",
            Outcome::Timeout => "timeout",
        }
    }
}

/// The latency table's row of answers heard after their deadline (beside [`Outcome::name`]'s).
pub const LATE: &str = "late";
