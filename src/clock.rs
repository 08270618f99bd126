//! Injected time. The engine never asks SQL for `now()`: every timestamp it writes comes from a
//! [`Clock`], so the simulator can run days of traffic in seconds on a [`VirtualClock`] and a test
//! can step past a lease or a retention window exactly.

use std::sync::Arc;
use std::sync::atomic::{AtomicI64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// Milliseconds since the Unix epoch. Integer milliseconds keep arithmetic exact and store as one
/// SQLite INTEGER; the seed's finest interval is a tenth of a second.
pub type Millis = i64;

pub trait Clock: Send + Sync {
    fn now_ms(&self) -> Millis;
}

/// Wall-clock time, for the bench and any real use of the engine.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> Millis {
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as Millis)
            .unwrap_or(0)
    }
}

/// A clock that only moves when told to. Clones share one time, so the driver of a simulation and
/// the engines it drives always agree on "now".
#[derive(Debug, Clone)]
pub struct VirtualClock(Arc<AtomicI64>);

/// 2026-01-01T00:00:00Z: virtual runs start at a fixed, realistic instant so stored timestamps
/// look like real ones when a kept store is inspected.
pub const VIRTUAL_EPOCH_MS: Millis = 1_767_225_600_000;

impl VirtualClock {
    pub fn new() -> Self {
        Self(Arc::new(AtomicI64::new(VIRTUAL_EPOCH_MS)))
    }

    /// Moves the clock to `t_ms`. Time never runs backwards: an earlier instant is ignored, which
    /// keeps `expires_at` and lease arithmetic monotone even if a driver schedules sloppily.
    pub fn set_ms(&self, t_ms: Millis) {
        self.0.fetch_max(t_ms, Ordering::SeqCst);
    }

    pub fn advance_ms(&self, by_ms: Millis) {
        self.0.fetch_add(by_ms.max(0), Ordering::SeqCst);
    }

    /// Milliseconds since [`VIRTUAL_EPOCH_MS`], the "simulated time" users read in timelines.
    pub fn elapsed_ms(&self) -> Millis {
        self.now_ms() - VIRTUAL_EPOCH_MS
    }
}

impl Default for VirtualClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for VirtualClock {
    fn now_ms(&self) -> Millis {
        self.0.load(Ordering::SeqCst)
    }
}

/// A clock that runs `scale` times faster than the wall from the moment the server starts
/// (`--time-scale`): every duration the engine measures on it (lease, retention, the carrier's
/// latency and timeout, the sweep period) passes `scale` times sooner. At scale 1 it is the
/// system clock.
pub struct ScaledClock {
    start_ms: Millis,
    start: std::time::Instant,
    scale: f64,
}

impl ScaledClock {
    pub fn new(scale: f64) -> Self {
        ScaledClock {
            start_ms: SystemClock.now_ms(),
            start: std::time::Instant::now(),
            scale,
        }
    }

    /// The wall-clock time an engine duration takes.
    pub fn wall(&self, engine_ms: Millis) -> std::time::Duration {
        std::time::Duration::from_secs_f64(engine_ms.max(0) as f64 / 1000.0 / self.scale)
    }

    /// The engine duration a wall-clock time is (the inverse of [`ScaledClock::wall`]).
    pub fn engine_ms(&self, wall: std::time::Duration) -> Millis {
        (wall.as_secs_f64() * 1000.0 * self.scale).round() as Millis
    }
}

impl Clock for ScaledClock {
    fn now_ms(&self) -> Millis {
        self.start_ms + (self.start.elapsed().as_secs_f64() * 1000.0 * self.scale) as Millis
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn virtual_clock_is_shared_and_monotone() {
        let a = VirtualClock::new();
        let b = a.clone();
        a.advance_ms(1500);
        assert_eq!(b.elapsed_ms(), 1500);
        b.set_ms(VIRTUAL_EPOCH_MS + 1000);
        assert_eq!(a.elapsed_ms(), 1500, "set_ms never moves time backwards");
    }

    #[test]
    fn a_scaled_clock_runs_faster_and_converts_back_to_the_wall() {
        let c = ScaledClock::new(3600.0);
        assert_eq!(c.wall(86_400_000), std::time::Duration::from_secs(24));
        let a = c.now_ms();
        std::thread::sleep(std::time::Duration::from_millis(2));
        assert!(
            c.now_ms() - a >= 7_000,
            "2 ms of wall time is 7.2 s of engine time"
        );
    }
}
