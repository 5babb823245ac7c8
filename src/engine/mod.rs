//! The engine: admission (at most `max_concurrent` runs at once, a bounded queue for the
//! rest), shutdown and statistics, with one of two backends: isolate threads in this
//! process (`pool`) or sandbox host processes (`processes`). The rules are
//! `isolet_core::queue::Pool`'s (and, for hosts, `isolet_core::host_policy`'s); this
//! module carries them out.
pub(crate) mod control;
pub(crate) mod pool;
pub(crate) mod processes;
mod queue_timer;

pub(crate) use pool::Engine;
pub(crate) use processes::{ProcessEngine, ProcessRun};

/// Shuts every engine of environment `env` down (see `pool::shutdown_all`), ending the
/// hosts of its process engines.
pub(crate) fn shutdown_all(env: usize, timeout: std::time::Duration) {
    processes::end_all(env);
    pool::shutdown_all(env, timeout);
}

/// Stops every engine of environment `env` (`process.on('exit')`).
pub(crate) fn stop_all(env: usize, timeout: std::time::Duration) {
    processes::end_all(env);
    pool::stop_all(env, timeout);
}

/// Node's event loop, as the process engine asks it to read hosts' run channels: a host's
/// frames then reach Node's thread straight from its loop, not through a wake-up by the
/// host's I/O thread.
pub(crate) trait LoopWatch: Send + Sync {
    /// From now on Node's thread calls `reader.readable(fd)` whenever `fd` (the watch owns
    /// it) is readable, until that returns false or the loop's environment ends (then
    /// `reader.unwatched()`). False when the loop takes no more watches (it is closing).
    fn watch(&self, fd: std::os::fd::OwnedFd, reader: std::sync::Arc<dyn ChannelReader>) -> bool;
}

/// What reads a watched channel (see `LoopWatch`).
pub(crate) trait ChannelReader: Send + Sync {
    /// Reads what `fd` has; false once nothing more is to be read from it.
    fn readable(&self, fd: std::os::fd::RawFd) -> bool;
    /// Node's thread stopped watching (for any reason): someone else must read.
    fn unwatched(&self);
}
