//! The engine: admission (at most `max_concurrent` runs at once, a bounded FIFO queue
//! for the rest), a warm pool of pre-created isolates, shutdown, and statistics. The
//! rules are `isolet_core::queue::Pool`'s, behind one mutex; this module runs them.
mod pool;

pub(crate) use pool::{shutdown_all, stop_all, Engine, EngineConfig};
