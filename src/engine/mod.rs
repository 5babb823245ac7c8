//! The engine: admission (at most `max_concurrent` runs at once, a bounded queue for the
//! rest), shutdown and statistics, with one of two backends: isolate threads in this
//! process (`pool`) or sandbox host processes (`processes`). The rules are
//! `isolet_core::queue::Pool`'s (and, for hosts, `isolet_core::host_policy`'s); this
//! module carries them out.
pub(crate) mod control;
pub(crate) mod pool;

pub(crate) use crate::supervisor::{ChannelReader, LoopWatch, ProcessEngine, ProcessRun};
pub(crate) use pool::Engine;

/// Shuts every engine of environment `env` down (see `pool::shutdown_all`), ending the
/// hosts of its process engines.
pub(crate) fn shutdown_all(env: usize, timeout: std::time::Duration) {
    crate::supervisor::end_all(env);
    pool::shutdown_all(env, timeout);
}

/// Stops every engine of environment `env` (`process.on('exit')`).
pub(crate) fn stop_all(env: usize, timeout: std::time::Duration) {
    crate::supervisor::end_all(env);
    pool::stop_all(env, timeout);
}
