//! The thread backend: runs on isolate threads of this process (`pool`), with the
//! engine's prelude and compiled-code cache and its WebAssembly modules, compiled once.
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use isolet_core::queue::Tenant;
use isolet_core::sandbox::{Budget, CloseReason, SandboxPlan};
use isolet_core::{EngineConfig, Failure, RunPlan};

use super::control::RunControl;
use super::pool::ThreadPool;
use super::{Backend, Deferred, EngineReport, Sandbox, SandboxBackend};
use crate::isolate::code::check_prelude;
use crate::isolate::persistent::SandboxCore;
use crate::isolate::warm::Preparation;
use crate::isolate::{EventSink, HostReply, RunShared, RunSpec};
use crate::v8::{DataAnswer, EngineCode, WasmModule, WasmModules};

pub(super) struct ThreadBackend {
    pool: ThreadPool,
    /// The prelude and compiled-code cache of every run.
    code: Arc<EngineCode>,
    /// Compiled by `set_wasm_modules`; read by every run that asks for them.
    wasm_modules: Arc<Mutex<WasmModules>>,
    memory_mb: u32,
    /// The engine's `web`: the prelude is checked with the web APIs a run gets by default.
    web: bool,
}

impl ThreadBackend {
    pub(super) fn new(config: &EngineConfig, env: usize) -> ThreadBackend {
        let code = EngineCode::new(config.prelude.clone(), config.code_cache_bytes);
        let preparation = Preparation::new(code.clone(), config.web);
        ThreadBackend {
            pool: ThreadPool::new(config.pool(), env, Some(preparation)),
            code,
            wasm_modules: Arc::default(),
            memory_mb: config.memory_mb,
            web: config.web,
        }
    }
}

impl Backend for ThreadBackend {
    fn set_wasm_modules(&self, modules: Vec<(String, Vec<u8>)>) -> Deferred {
        let target = self.wasm_modules.clone();
        let heap_limit = self.memory_mb as usize * 1024 * 1024;
        // Compiled in an isolate of its own, off Node's thread, once per engine.
        Box::new(move || {
            let compiled = WasmModule::compile_all(&modules, heap_limit)
                .map_err(|(name, thrown)| format!("wasm module \"{name}\" is invalid: {}", thrown.message))?;
            *target.lock().unwrap_or_else(PoisonError::into_inner) = compiled;
            Ok(())
        })
    }

    fn check_prelude(&self) -> Deferred {
        let (code, memory_mb, web) = (self.code.clone(), self.memory_mb, self.web);
        Box::new(move || check_prelude(&code, memory_mb, web))
    }

    fn warm_up(&self) {
        self.pool.warm_up();
    }

    fn ready(&self, _timeout: Duration) -> Result<(), String> {
        Ok(())
    }

    fn submit(&self, id: u64, tenant: Tenant, plan: Arc<RunPlan>, _started_event: bool, sink: Arc<dyn EventSink>) -> Arc<dyn RunControl> {
        let modules = self.wasm_modules.lock().unwrap_or_else(PoisonError::into_inner);
        let run = RunShared::new(id, RunSpec::new(plan, &modules).with_code(self.code.clone()), sink);
        drop(modules);
        self.pool.submit(run.clone(), tenant);
        Arc::new(IsolateRun { run, stop: Stopper::Pool(self.pool.clone()) })
    }

    fn open_sandbox(&self, id: u64, plan: SandboxPlan) -> Result<Sandbox, Failure> {
        let core = self.pool.open_sandbox(id, plan, self.code.clone())?;
        Ok(Arc::new(ThreadSandbox { core }))
    }

    fn stats(&self) -> EngineReport {
        EngineReport { engine: self.pool.stats(), code_cache: self.code.stats(), processes: None }
    }

    fn shutdown(&self) {
        self.pool.shutdown();
    }

    fn wait_idle(&self, timeout: Duration) -> bool {
        self.pool.wait_idle(timeout)
    }
}

/// A run on an isolate thread of this process, a one-shot run's or a sandbox's.
struct IsolateRun {
    run: Arc<RunShared>,
    stop: Stopper,
}

/// Who stops a run: the pool (it may be waiting for a slot, or running), or its sandbox
/// (waiting in the engine's queue: answered now; handed to the sandbox's thread or
/// running: the stop reaches it, and one not started yet stops as it attaches).
enum Stopper {
    Pool(ThreadPool),
    Sandbox(Arc<SandboxCore>),
}

impl RunControl for IsolateRun {
    fn reply(&self, reply: HostReply) {
        self.run.push_reply(reply);
    }

    fn answer(&self, id: u32, answer: DataAnswer) -> bool {
        self.run.push_answer(id, answer)
    }

    fn abort(&self) {
        match &self.stop {
            Stopper::Pool(pool) => pool.abort(&self.run),
            Stopper::Sandbox(core) => core.abort(&self.run),
        }
    }
}

/// A persistent sandbox on an isolate thread of its own.
struct ThreadSandbox {
    core: Arc<SandboxCore>,
}

impl SandboxBackend for ThreadSandbox {
    fn submit(
        &self,
        id: u64,
        plan: Arc<RunPlan>,
        call: Option<(String, Vec<u8>)>,
        _started_event: bool,
        sink: Arc<dyn EventSink>,
    ) -> Arc<dyn RunControl> {
        Arc::new(IsolateRun { run: self.core.start_run(id, plan, call, sink), stop: Stopper::Sandbox(self.core.clone()) })
    }

    fn ready(&self, _timeout: Duration) -> Result<(), Failure> {
        Ok(())
    }

    fn close(&self, reason: CloseReason) {
        self.core.close(reason, true);
    }

    fn close_reason(&self) -> Option<CloseReason> {
        self.core.close_reason()
    }

    fn usage(&self) -> Budget {
        self.core.budget()
    }
}
