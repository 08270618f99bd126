//! One request of a log as `fit` keeps it, and the order a key's requests are read in: what
//! the reader makes, the spill writes to disk and the tally reads.

/// One request, compact: the key is kept as a hash of (caller, key).
#[derive(Debug, Clone, Copy)]
pub(super) struct Req {
    pub(super) key: u64,
    pub(super) caller: u32,
    pub(super) time_s: f64,
    /// 0 when the caller got no answer in time.
    pub(super) status: u16,
    /// `u32::MAX` when the log has no size for it.
    pub(super) response_bytes: u32,
    /// 0 no, 1 yes, 2 not in the log.
    pub(super) replayed: u8,
    pub(super) key_bytes: u16,
    pub(super) weight: f32,
}

/// The order `fit` reads a key's requests in: by time, ties broken by the rest of the row so
/// the first request is the same whatever order the file had them in (an unanswered one
/// first). The warehouse query (`sql.rs`) orders by the same columns.
pub(super) fn order(a: &Req, b: &Req) -> std::cmp::Ordering {
    a.key
        .cmp(&b.key)
        .then(a.time_s.total_cmp(&b.time_s))
        .then(a.status.cmp(&b.status))
        .then(a.response_bytes.cmp(&b.response_bytes))
        .then(a.replayed.cmp(&b.replayed))
        .then(a.weight.total_cmp(&b.weight))
}
