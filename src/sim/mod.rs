//! Simulation on a virtual clock: scripted timelines and synthetic traffic, both replayed against
//! the real engine over a real store.

pub mod deviations;
pub mod flow;
pub mod replay;
pub mod request_log;
pub mod timeline;

/// The replay's own maps (intents, sends, records, parcels), keyed by what it makes itself, so
/// there is no adversary to hash against: a fixed-seed fast hash in place of SipHash, which
/// was 8 % of `simulate --retention 3d` (callgrind, docs/performance.md).
pub(crate) type Map<K, V> = std::collections::HashMap<K, V, foldhash::fast::FixedState>;
pub(crate) type Set<K> = std::collections::HashSet<K, foldhash::fast::FixedState>;
