//! The process backend: runs in sandbox host processes, supervised by
//! `crate::supervisor` (which owns hosts, placement, budgets and drain); this file is the
//! engine's view of it.
use std::sync::Arc;
use std::time::Duration;

use isolet_core::queue::Tenant;
use isolet_core::sandbox::{Budget, CloseReason, SandboxPlan};
use isolet_core::{EngineConfig, Failure, RunPlan};

use super::control::RunControl;
use super::{Backend, Deferred, EngineReport, LoopWatch, Sandbox, SandboxBackend};
use crate::isolate::{EventSink, HostReply};
use crate::supervisor::{ProcessEngine, ProcessRun, ProcessSandbox};
use crate::v8::DataAnswer;

/// A process engine of `config`: its hosts check the prelude and compile the WebAssembly
/// modules as they start, each with its own compiled-code cache.
pub(super) fn process_backend(config: &EngineConfig, env: usize, loop_watch: Arc<dyn LoopWatch>) -> ProcessEngine {
    let engine = ProcessEngine::new(config.pool(), config.processes as usize, config.sandboxes_per_host as usize, env, Some(loop_watch));
    engine.set_engine_code(config.prelude.clone(), config.code_cache_bytes, config.web);
    engine
}

fn nothing_left() -> Deferred {
    Box::new(|| Ok(()))
}

impl Backend for ProcessEngine {
    fn set_wasm_modules(&self, modules: Vec<(String, Vec<u8>)>) -> Deferred {
        // Sent in every host's `Start`; a module a host cannot compile fails `ready`.
        ProcessEngine::set_wasm_modules(self, modules);
        nothing_left()
    }

    fn check_prelude(&self) -> Deferred {
        nothing_left()
    }

    fn warm_up(&self) {
        ProcessEngine::warm_up(self);
    }

    fn ready(&self, timeout: Duration) -> Result<(), String> {
        ProcessEngine::ready(self, timeout)
    }

    fn submit(&self, id: u64, tenant: Tenant, plan: Arc<RunPlan>, started_event: bool, sink: Arc<dyn EventSink>) -> Arc<dyn RunControl> {
        ProcessEngine::submit(self, id, tenant, plan, started_event, sink)
    }

    fn open_sandbox(&self, id: u64, plan: SandboxPlan) -> Result<Sandbox, Failure> {
        Ok(Arc::new(HostedSandbox(ProcessEngine::open_sandbox(self, id, plan)?)))
    }

    fn stats(&self) -> EngineReport {
        let stats = ProcessEngine::stats(self);
        EngineReport { engine: stats.engine, code_cache: self.code_cache_stats(), processes: Some(stats.processes) }
    }

    fn shutdown(&self) {
        ProcessEngine::shutdown(self);
    }

    fn wait_idle(&self, timeout: Duration) -> bool {
        ProcessEngine::wait_idle(self, timeout)
    }
}

impl RunControl for ProcessRun {
    fn reply(&self, reply: HostReply) {
        ProcessRun::reply(self, reply);
    }

    fn answer(&self, id: u32, answer: DataAnswer) -> bool {
        ProcessRun::answer(self, id, answer)
    }

    fn abort(&self) {
        ProcessRun::abort(self);
    }
}

/// A persistent sandbox in a sandbox host process of its own.
struct HostedSandbox(Arc<ProcessSandbox>);

impl SandboxBackend for HostedSandbox {
    fn submit(
        &self,
        id: u64,
        plan: Arc<RunPlan>,
        call: Option<(String, Vec<u8>)>,
        started_event: bool,
        sink: Arc<dyn EventSink>,
    ) -> Arc<dyn RunControl> {
        self.0.submit(id, plan, call, started_event, sink)
    }

    fn ready(&self, timeout: Duration) -> Result<(), Failure> {
        self.0.ready(timeout)
    }

    fn close(&self, _reason: CloseReason) {
        // The host decides how its sandbox closed; asked by the caller, it is `closed`.
        self.0.close();
    }

    fn close_reason(&self) -> Option<CloseReason> {
        self.0.close_reason()
    }

    fn usage(&self) -> Budget {
        self.0.usage()
    }
}
