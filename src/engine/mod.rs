//! The engine: admission (at most `max_concurrent` runs at once, a bounded FIFO queue
//! for the rest), a warm pool of pre-created isolates, shutdown, and statistics.
//! Owned by no particular thread; all state is behind one mutex.
mod pool;

pub(crate) use pool::{shutdown_all, Engine, EngineConfig};
