//! What the server remembers to raise the seed's detection signals, each bounded: purged keys
//! (a Bloom filter), the creators of recent records (a recent set, only where another caller
//! can see them), and the attempts running right now (to tell a takeover of a dead attempt
//! from one of a live one).

use bloomfilter::Bloom;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// `(caller column, key)` as one string; the NUL cannot occur in either part (the engine refuses
/// control characters in keys, and caller names come from a file of whitespace-split words or a
/// header value).
fn joined(caller_col: &str, key: &str) -> String {
    format!("{caller_col}\u{0}{key}")
}

/// The keys the sweeper purged, as a Bloom filter sized for `expected` keys at a 1 % false
/// positive rate: days of purges in about 10 bits a key. Past `expected` keys the rate climbs;
/// the start-up line says how many it is sized for. The server's own filter rather than the
/// engine's (`Engine::with_purge_filter`), because on PostgreSQL and Redis the sweeps run on
/// whichever writer is free and a request may reach any other.
pub struct PurgeMemory {
    bloom: Mutex<Bloom<str>>,
    pub expected: usize,
}

/// The false-positive rate of [`PurgeMemory`]: a false positive only raises a needless alert.
pub const PURGE_FP_RATE: f64 = 0.01;

impl PurgeMemory {
    pub fn new(expected: usize, seed: u64) -> Result<Self, String> {
        let mut s = [0u8; 32];
        s[..8].copy_from_slice(&seed.to_le_bytes());
        let bloom = Bloom::new_for_fp_rate_with_seed(expected.max(1), PURGE_FP_RATE, &s)
            .map_err(|e| format!("--purge-memory {expected}: {e}"))?;
        Ok(PurgeMemory {
            bloom: Mutex::new(bloom),
            expected,
        })
    }

    pub fn remember(&self, purged: &[(String, String)]) {
        let mut b = self.bloom.lock().unwrap_or_else(|p| p.into_inner());
        for (caller, key) in purged {
            b.set(&joined(caller, key));
        }
    }

    pub fn contains(&self, caller_col: &str, key: &str) -> bool {
        self.bloom
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .check(&joined(caller_col, key))
    }
}

/// Who created the most recent `capacity` records, by key: under `--key-scope global` two
/// callers share one namespace, and a replay to a caller other than the creator is the seed's
/// signal of that failure. The oldest entries go first.
pub struct Creators {
    inner: Mutex<(HashMap<String, String>, VecDeque<String>)>,
    capacity: usize,
}

impl Creators {
    pub fn new(capacity: usize) -> Self {
        Creators {
            inner: Mutex::new((HashMap::new(), VecDeque::new())),
            capacity: capacity.max(1),
        }
    }

    pub fn created(&self, key: &str, caller: &str) {
        let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let (map, order) = &mut *g;
        if map.insert(key.to_string(), caller.to_string()).is_none() {
            order.push_back(key.to_string());
        }
        while order.len() > self.capacity {
            if let Some(old) = order.pop_front() {
                map.remove(&old);
            }
        }
    }

    /// True when `key`'s creator is known and is not `caller`.
    pub fn replayed_to_another(&self, key: &str, caller: &str) -> bool {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        g.0.get(key).is_some_and(|c| c != caller)
    }
}

/// Attempts that hold a lease in this server right now, by (caller column, key).
#[derive(Default)]
pub struct InFlight {
    running: Mutex<HashMap<String, usize>>,
}

/// Marks an attempt as running until dropped (its handler answered, failed or died).
pub struct Running<'a> {
    owner: &'a InFlight,
    id: String,
}

impl InFlight {
    /// Registers an attempt; returns its guard and whether another attempt on the same key was
    /// still running (a takeover of a live owner, when this attempt took over).
    pub fn enter(&self, caller_col: &str, key: &str) -> (Running<'_>, bool) {
        let id = joined(caller_col, key);
        let mut m = self.running.lock().unwrap_or_else(|p| p.into_inner());
        let n = m.entry(id.clone()).or_insert(0);
        let others = *n > 0;
        *n += 1;
        (Running { owner: self, id }, others)
    }
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        let mut m = self.owner.running.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(n) = m.get_mut(&self.id) {
            *n -= 1;
            if *n == 0 {
                m.remove(&self.id);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn memories_are_bounded_and_say_what_they_hold() {
        let p = PurgeMemory::new(1000, 1).unwrap();
        assert!(!p.contains("c", "k"));
        p.remember(&[("c".into(), "k".into())]);
        assert!(p.contains("c", "k"));
        assert!(!p.contains("c2", "k"));

        let c = Creators::new(2);
        c.created("a", "x");
        assert!(c.replayed_to_another("a", "y"));
        assert!(!c.replayed_to_another("a", "x"));
        c.created("b", "x");
        c.created("c", "x");
        assert!(!c.replayed_to_another("a", "y"), "the oldest was forgotten");

        let f = InFlight::default();
        let (g1, others) = f.enter("c", "k");
        assert!(!others);
        let (g2, others) = f.enter("c", "k");
        assert!(others);
        drop((g1, g2));
        assert!(!f.enter("c", "k").1);
    }
}
