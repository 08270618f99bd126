//! The machine a run shares: its cores, and how busy other work kept them before the run.
//! Only the state before the run is judged: after it, the load average is mostly the bench's
//! own work and its store server's (issue 53: 0.82 before, 4.87 after, nothing else running).

use serde::Serialize;

/// The machine's state before the run, the part of it that is other programs' work: the
/// 1-minute load average and the share of all cores busy, read before the bench (and the
/// store server it drives) adds its own. Read after, both mostly measure the bench itself.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct MachineBefore {
    pub load_1m: Option<f64>,
    /// Busy share of all cores (0 to 1) over a short window before the run.
    pub cpu_busy: Option<f64>,
    pub cores: usize,
}

/// The machine the run shared. Only what it was before the run counts against the figures:
/// after, the load average holds the bench's own work and its store server's.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Machine {
    pub cores: usize,
    pub load_avg_1m_before: Option<f64>,
    /// Includes the run's own load: shown, never judged.
    pub load_avg_1m_after: Option<f64>,
    /// Share of all cores busy (0 to 1) over [`BUSY_WINDOW`] just before the run.
    pub cpu_busy_before: Option<f64>,
}

impl Machine {
    pub fn now(before: MachineBefore) -> Self {
        Self {
            cores: before.cores,
            load_avg_1m_before: before.load_1m,
            load_avg_1m_after: load_average(),
            cpu_busy_before: before.cpu_busy,
        }
    }

    pub fn before(&self) -> MachineBefore {
        MachineBefore {
            load_1m: self.load_avg_1m_before,
            cpu_busy: self.cpu_busy_before,
            cores: self.cores,
        }
    }
}

/// How long the cores are watched before a run: long enough for a few hundred scheduler ticks
/// on two cores, short beside any run.
pub const BUSY_WINDOW: std::time::Duration = std::time::Duration::from_millis(250);

/// The machine before the bench adds any work of its own: called first thing in a run.
pub fn machine_before() -> MachineBefore {
    let load_1m = load_average();
    let first = cpu_times();
    std::thread::sleep(BUSY_WINDOW);
    let cpu_busy = match (first, cpu_times()) {
        (Some((b0, t0)), Some((b1, t1))) if t1 > t0 => {
            Some(b1.saturating_sub(b0) as f64 / (t1 - t0) as f64)
        }
        _ => None,
    };
    MachineBefore {
        load_1m,
        cpu_busy,
        cores: crate::host::cores(),
    }
}

/// Busy and total time of all cores so far, in ticks, from `/proc/stat` (Linux): of `user nice
/// system idle iowait irq softirq steal`, idle and iowait are not busy.
fn cpu_times() -> Option<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let fields: Vec<u64> = stat
        .lines()
        .next()?
        .strip_prefix("cpu ")?
        .split_whitespace()
        .take(8)
        .map(|f| f.parse().ok())
        .collect::<Option<_>>()?;
    let total: u64 = fields.iter().sum();
    let idle = fields.get(3)? + fields.get(4).copied().unwrap_or(0);
    Some((total.saturating_sub(idle), total))
}

/// The 1-minute load average, where the system reports one (Linux).
pub fn load_average() -> Option<f64> {
    std::fs::read_to_string("/proc/loadavg")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}
