//! What this host is: how many cores a run may use. Read in one place, for the bench's
//! statistics and for `serve`'s thread counts alike.

/// The cores this process may run on (1 where the system does not say).
pub fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}
