//! The engine: one `Engine` owns every run and persistent sandbox of a `SandboxEngine`
//! (and of runSandbox's engines), in either isolation mode, behind one `Backend`:
//! - `threads`: isolate threads in this process (`pool`, the warm pool and the threads'
//!   scheduling);
//! - `processes`: sandbox host processes, supervised by `crate::supervisor`.
//!
//! Admission, the fair queue and the counters are `isolet_core::queue::Pool`'s rules in
//! both (and, for hosts, `isolet_core::host_policy`'s); the backends carry them out.
//! `src/api/` calls the engine and never names a backend.
use std::ops::Deref;
use std::sync::Arc;
use std::time::Duration;

use isolet_core::code_cache::CodeCacheStats;
use isolet_core::queue::{EngineStats, Tenant};
use isolet_core::sandbox::{Budget, CloseReason, SandboxPlan};
use isolet_core::{EngineConfig, Failure, Isolation, RunPlan};

use crate::isolate::EventSink;

pub(crate) mod control;
pub(crate) mod pool;
mod processes;
mod threads;

pub(crate) use crate::supervisor::process::{set_host_command, HostCommand};
pub(crate) use crate::supervisor::{live_hosts, ChannelReader, LoopWatch, ProcessStats};
use control::RunControl;

/// Work an engine hands back to be finished off Node's thread (in an async task): compiling
/// WebAssembly modules, checking the prelude. `Err` says what is wrong, for a validation
/// error.
pub(crate) type Deferred = Box<dyn FnOnce() -> Result<(), String> + Send>;

/// What an engine reports of itself: the counts of either mode, its compiled-code cache,
/// and (process mode) its hosts.
pub(crate) struct EngineReport {
    pub engine: EngineStats,
    pub code_cache: CodeCacheStats,
    pub processes: Option<ProcessStats>,
}

/// An isolation mode, as the engine uses it.
pub(crate) trait Backend: Send + Sync {
    /// Registers the WebAssembly modules every run may instantiate (checked by the
    /// caller); the returned work compiles them where this mode compiles them here.
    fn set_wasm_modules(&self, modules: Vec<(String, Vec<u8>)>) -> Deferred;
    /// The check of the engine's prelude (it also compiles it into the code cache), where
    /// this mode checks it here; a host checks its own as it starts.
    fn check_prelude(&self) -> Deferred;
    /// Starts the warm isolates, or the hosts, in the background.
    fn warm_up(&self);
    /// Blocks until the engine can serve (its hosts started), at most `timeout`; `Err`:
    /// why a host refused the configuration.
    fn ready(&self, timeout: Duration) -> Result<(), String>;
    /// Admits run `id`; its events go to `sink` (`started` only if `started_event`).
    fn submit(&self, id: u64, tenant: Tenant, plan: Arc<RunPlan>, started_event: bool, sink: Arc<dyn EventSink>) -> Arc<dyn RunControl>;
    /// Opens persistent sandbox `id` (typed failure past the engine's bounds on open
    /// sandboxes, or when shut down).
    fn open_sandbox(&self, id: u64, plan: SandboxPlan) -> Result<Sandbox, Failure>;
    fn stats(&self) -> EngineReport;
    /// Stops accepting work and aborts everything queued or running.
    fn shutdown(&self);
    /// Blocks until every thread (quarantined ones excepted) or host has ended, at most
    /// `timeout` (then hosts left are killed): false if that time ran out.
    fn wait_idle(&self, timeout: Duration) -> bool;
}

/// One engine, of either isolation mode. Cheap to clone.
#[derive(Clone)]
pub(crate) struct Engine {
    backend: Arc<dyn Backend>,
    isolation: Isolation,
}

impl Engine {
    /// An engine of `config` for Node environment `env` (see `shutdown_all`); process mode
    /// reads its hosts' channels on `loop_watch`.
    pub(crate) fn new(config: &EngineConfig, env: usize, loop_watch: Arc<dyn LoopWatch>) -> Engine {
        let backend: Arc<dyn Backend> = match config.isolation {
            Isolation::Thread => Arc::new(threads::ThreadBackend::new(config, env)),
            Isolation::Process => Arc::new(processes::process_backend(config, env, loop_watch)),
        };
        Engine { backend, isolation: config.isolation }
    }

    pub(crate) fn isolation(&self) -> Isolation {
        self.isolation
    }
}

impl Deref for Engine {
    type Target = dyn Backend;
    fn deref(&self) -> &(dyn Backend + 'static) {
        &*self.backend
    }
}

/// A persistent sandbox, in either isolation mode.
pub(crate) trait SandboxBackend: Send + Sync {
    /// Starts run `id` in the sandbox: `plan`'s code, or a call of global function
    /// `call.0` with serialized arguments `call.1`.
    fn submit(
        &self,
        id: u64,
        plan: Arc<RunPlan>,
        call: Option<(String, Vec<u8>)>,
        started_event: bool,
        sink: Arc<dyn EventSink>,
    ) -> Arc<dyn RunControl>;
    /// Blocks until the sandbox can run (its host is up), at most `timeout`; `Err`: the
    /// failure that closed it first.
    fn ready(&self, timeout: Duration) -> Result<(), Failure>;
    /// Closes it (idempotent): a run in flight or waiting is aborted.
    fn close(&self, reason: CloseReason);
    fn close_reason(&self) -> Option<CloseReason>;
    /// What it has used of its sandbox-wide limits.
    fn usage(&self) -> Budget;
}

/// One open persistent sandbox.
pub(crate) type Sandbox = Arc<dyn SandboxBackend>;

/// Shuts every engine of environment `env` down (see `pool::shutdown_all`), ending the
/// hosts of its process engines.
pub(crate) fn shutdown_all(env: usize, timeout: Duration) {
    crate::supervisor::end_all(env);
    pool::shutdown_all(env, timeout);
}

/// Stops every engine of environment `env` (`process.on('exit')`).
pub(crate) fn stop_all(env: usize, timeout: Duration) {
    crate::supervisor::end_all(env);
    pool::stop_all(env, timeout);
}
