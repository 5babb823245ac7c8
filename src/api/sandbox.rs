//! `SandboxSettings`, `openSandbox` and `NativeSandbox`: the bindings `lib/sandbox.js`
//! builds persistent sandboxes on. Options are checked here, once, by isolet-core
//! (`isolet_core::sandbox`); what closes a sandbox is decided there too.
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use isolet_core::sandbox::{closed_failure, CloseReason, SandboxPlan};

use super::engine::{NativeEngine, RunHandle, RunPlanJs};
use super::events::Dispatcher;
use super::options::raw_of;
use super::{checked, kind_error, options_error};
use crate::engine::Sandbox;

/// A checked `createSandbox(options)`.
#[napi]
pub struct SandboxSettings {
    plan: Arc<SandboxPlan>,
    /// `isolation` was given (engine.openSandbox refuses one that is not the engine's).
    isolation_given: bool,
}

#[napi]
impl SandboxSettings {
    /// Checks `createSandbox(options)` (`capabilities` as names, like runSandbox's).
    #[napi(constructor)]
    pub fn new(env: &Env, options: Unknown) -> Result<Self, String> {
        let raw = raw_of(&options, 0).map_err(super::internal_error)?;
        let plan = checked(env, || isolet_core::sandbox::sandbox_plan(&raw))?;
        let isolation_given = matches!(&raw, isolet_core::Raw::Object(entries) if entries.iter().any(|(k, v)| k == "isolation" && *v != isolet_core::Raw::Undefined));
        Ok(SandboxSettings { plan: Arc::new(plan), isolation_given })
    }

    /// `process` or `thread`.
    #[napi(getter)]
    pub fn isolation(&self) -> &'static str {
        self.plan.base.isolation.unwrap_or(isolet_core::options::DEFAULT_ISOLATION).as_str()
    }

    #[napi(getter)]
    pub fn memory_limit_mb(&self) -> u32 {
        self.plan.base.limits.memory_mb
    }

    /// Keys of the sandbox's `modules` whose sources are TypeScript (JS strips them, then
    /// sets each with `setModule`, before the sandbox opens).
    #[napi(getter)]
    pub fn typescript_modules(&self) -> Vec<String> {
        let language = self.plan.base.language;
        self.plan.base.modules.keys().filter(|k| isolet_core::modules::is_typescript(k, language)).cloned().collect()
    }

    /// With `web`, the sandbox's global `fetch` is WHATWG fetch over its capability `fetch`
    /// (a fetch capability, which the caller checked): whether it is (docs/web.md).
    #[napi]
    pub fn use_web_fetch(&mut self) -> bool {
        Arc::make_mut(&mut self.plan).base.use_web_fetch()
    }

    /// The source of module `key` of the sandbox's checked map.
    #[napi]
    pub fn module_source(&self, key: String) -> Option<String> {
        self.plan.base.modules.get(&key).cloned()
    }

    /// Module `key` of the sandbox's map, stripped of its types (the map stays within its
    /// limits).
    #[napi]
    pub fn set_module(&mut self, key: String, source: String) -> Result<(), String> {
        let base = &mut Arc::make_mut(&mut self.plan).base;
        let Some(old) = base.modules.get_mut(&key) else {
            return Err(kind_error(isolet_core::ErrorKind::Validation, format!("modules has no module '{key}'")));
        };
        let before = std::mem::replace(old, source);
        if isolet_core::modules::check_map(&base.modules, base.module_limits).is_err() {
            base.modules.insert(key.clone(), before);
            return Err(kind_error(
                isolet_core::ErrorKind::Validation,
                format!("modules['{key}'] is over maxModuleBytes once its types are stripped"),
            ));
        }
        Ok(())
    }
}

/// One open persistent sandbox (see `lib/sandbox.js`).
#[napi]
pub struct NativeSandbox {
    sandbox: Sandbox,
    plan: Arc<SandboxPlan>,
    dispatcher: std::rc::Rc<Dispatcher>,
    /// Keys of the engine's prelude modules, which a run's `modules` may not replace.
    prelude_keys: Arc<Vec<String>>,
}

impl Drop for NativeSandbox {
    fn drop(&mut self) {
        // A sandbox nobody can reach any more is closed: it no longer counts as open.
        self.sandbox.close(CloseReason::Closed);
    }
}

/// Opens a persistent sandbox on `engine`: it counts among the engine's open sandboxes
/// until closed (its runs take slots as they come). Throws (typed) past the engine's
/// bounds on open sandboxes (`maxOpenSandboxes`, `maxOpenSandboxesPerTenant`) or when it
/// is shut down.
#[napi]
pub fn open_sandbox(engine: &NativeEngine, settings: &SandboxSettings) -> Result<NativeSandbox, String> {
    let id = super::engine::next_run_id();
    let plan = (*settings.plan).clone();
    let prelude_keys = engine.prelude_keys();
    isolet_core::options::check_prelude_shadowing("modules", &plan.base.modules, &prelude_keys).map_err(options_error)?;
    let engine_isolation = engine.engine().isolation();
    if settings.isolation_given && settings.isolation() != engine_isolation.as_str() {
        return Err(kind_error(
            isolet_core::ErrorKind::Validation,
            format!("isolation must be the engine's ('{}') or left out, got '{}'", engine_isolation.as_str(), settings.isolation()),
        ));
    }
    let sandbox = engine.engine().open_sandbox(id, plan).map_err(|f| kind_error(f.kind, f.message))?;
    // The sandbox's map lives where the sandbox does; the plan each run starts from needs
    // none of it (a run's plan carries the run's own map alone).
    let mut kept = (*settings.plan).clone();
    kept.base.modules.clear();
    Ok(NativeSandbox { sandbox, plan: Arc::new(kept), dispatcher: engine.dispatcher().clone(), prelude_keys })
}

#[napi]
impl NativeSandbox {
    /// The plan of one run: `code` (a string) with `options` (`timeoutMs`, `cpuTimeMs`,
    /// `language`, `signal`) over the sandbox's, within what is left of its budgets.
    #[napi]
    pub fn plan(&self, env: &Env, code: Unknown, options: Unknown) -> Result<RunPlanJs, String> {
        let code = raw_of(&code, 0).map_err(super::internal_error)?;
        let options = raw_of(&options, 0).map_err(super::internal_error)?;
        // The sandbox's budgets cut the run's limits when it starts (`SandboxCore::start_run`).
        let budget = isolet_core::sandbox::Budget::default();
        let plan = checked(env, || isolet_core::sandbox::run_plan(&self.plan, &budget, &code, &options))?;
        isolet_core::options::check_prelude_shadowing("modules", &plan.modules, &self.prelude_keys).map_err(options_error)?;
        Ok(RunPlanJs { plan: Arc::new(plan) })
    }

    /// Runs a planned run in the sandbox; the same events as `NativeEngine.submit`.
    #[napi]
    pub fn submit(&self, plan: &RunPlanJs, on_event: Function, started_event: Option<bool>) -> Result<f64> {
        self.start(plan, None, on_event, started_event)
    }

    /// Calls global function `name` of the sandbox with `args` (a serialized array) under
    /// a planned run's limits; the same events as `submit`.
    #[napi]
    pub fn submit_call(
        &self,
        plan: &RunPlanJs,
        name: String,
        args: Buffer,
        on_event: Function,
        started_event: Option<bool>,
    ) -> Result<f64> {
        self.start(plan, Some((name, args.to_vec())), on_event, started_event)
    }

    /// The host side of run `run_id`, as `NativeEngine.handleOf`.
    #[napi]
    pub fn handle_of(&self, run_id: f64) -> Option<RunHandle> {
        self.dispatcher.control(run_id as u64).map(RunHandle::of)
    }

    /// Starts a run; returns its id (see `handleOf`).
    fn start(&self, plan: &RunPlanJs, call: Option<(String, Vec<u8>)>, on_event: Function, started_event: Option<bool>) -> Result<f64> {
        let id = super::engine::next_run_id();
        let sink = self.dispatcher.register(id, on_event.value().value, started_event.unwrap_or(true))?;
        let control = self.sandbox.submit(id, plan.plan.clone(), call, started_event.unwrap_or(true), sink);
        self.dispatcher.keep_control(id, control);
        Ok(id as f64)
    }

    /// Resolves once the sandbox can run (process mode: its own sandbox host process is
    /// up), to null, or to the failure (`{ code, message }`) that closed it first.
    #[napi(ts_return_type = "Promise<{ code: string; message: string } | null>")]
    pub fn ready(&self) -> AsyncTask<SandboxReady> {
        AsyncTask::new(SandboxReady { sandbox: self.sandbox.clone() })
    }

    /// Closes the sandbox: a run in flight (or waiting for a slot) is aborted, later runs
    /// are refused; its isolate is disposed and it no longer counts as open. Idempotent.
    #[napi]
    pub fn close(&self) {
        self.sandbox.close(CloseReason::Closed);
    }

    /// Why the sandbox is closed (`closed`, `idleTimeout`, `outOfMemory`, ...), or null.
    #[napi(getter)]
    pub fn close_reason(&self) -> Option<&'static str> {
        self.reason().map(CloseReason::as_str)
    }

    /// The message every later run of the closed sandbox fails with, or null while open.
    #[napi(getter)]
    pub fn closed_message(&self) -> Option<String> {
        self.reason().map(|r| closed_failure(r).message)
    }

    fn reason(&self) -> Option<CloseReason> {
        self.sandbox.close_reason()
    }

    /// What the sandbox has used of its sandbox-wide limits.
    #[napi(getter)]
    pub fn usage(&self) -> SandboxUsageJs {
        let budget = self.sandbox.usage();
        SandboxUsageJs { runs: budget.runs as f64, cpu_time_ms: budget.cpu_used_ms, host_calls: budget.host_calls_used as f64 }
    }
}

pub struct SandboxReady {
    sandbox: Sandbox,
}

#[napi(object)]
pub struct SandboxOpenFailureJs {
    pub code: String,
    pub message: String,
}

impl Task for SandboxReady {
    type Output = Option<isolet_core::Failure>;
    type JsValue = Option<SandboxOpenFailureJs>;

    fn compute(&mut self) -> Result<Self::Output> {
        // A host that does not start is ended at its start timeout; this only backs it up.
        let timeout = std::time::Duration::from_millis(isolet_core::host_policy::START_TIMEOUT_MS + 5_000);
        Ok(self.sandbox.ready(timeout).err())
    }

    fn resolve(&mut self, _env: Env, output: Self::Output) -> Result<Self::JsValue> {
        Ok(output.map(|f| SandboxOpenFailureJs { code: f.kind.code().to_string(), message: f.message }))
    }
}

#[napi(object)]
pub struct SandboxUsageJs {
    pub runs: f64,
    pub cpu_time_ms: f64,
    pub host_calls: f64,
}
