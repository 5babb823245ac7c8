//! `NativeEngine` and `RunHandle`: the bindings `lib/engine.js` and
//! `lib/run-sandbox.js` build on.
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::{sys, JsValue};
use napi_derive::napi;

use isolet_core::queue::{Tenant, TenantCounts};
use isolet_core::{check_global_name, EngineConfig, ExecMode, Isolation, RunPlan};

use super::events::Dispatcher;
use super::options::raw_of;
use super::{checked, validation_error};
use crate::engine::control::RunControl;
use crate::engine::{Deferred, Engine, EngineReport};
use crate::isolate::HostReply;
use crate::v8::DataAnswer;

static NEXT_RUN_ID: AtomicU64 = AtomicU64::new(1);

/// A new id for a run or a sandbox (one sequence: a sandbox's slot is keyed by it).
pub(crate) fn next_run_id() -> u64 {
    NEXT_RUN_ID.fetch_add(1, Ordering::Relaxed)
}

/// A checked `SandboxEngine` config (or the config of one of runSandbox's engines):
/// `new SandboxEngine(config)` is validated here, once, under the public names.
#[napi]
pub struct EngineSettings {
    config: EngineConfig,
}

#[napi]
impl EngineSettings {
    /// Checks a `SandboxEngine` config; `tools` holds the flattened tool names.
    #[napi(constructor)]
    pub fn new(env: &Env, config: Unknown) -> Result<Self, String> {
        let raw = raw_of(&config, 0).map_err(super::internal_error)?;
        Ok(EngineSettings { config: checked(env, || EngineConfig::from_raw(&raw))? })
    }

    /// `process` or `thread`.
    #[napi(getter)]
    pub fn isolation(&self) -> &'static str {
        self.config.isolation.as_str()
    }

    #[napi(getter)]
    pub fn memory_mb(&self) -> u32 {
        self.config.memory_mb
    }

    #[napi(getter)]
    pub fn warm_pool_size(&self) -> u32 {
        self.config.warm_pool_size
    }

    #[napi(getter)]
    pub fn max_concurrent_isolates(&self) -> u32 {
        self.config.max_concurrent_isolates
    }

    #[napi(getter)]
    pub fn max_open_sandboxes(&self) -> u32 {
        self.config.max_open_sandboxes
    }

    #[napi(getter)]
    pub fn max_open_sandboxes_per_tenant(&self) -> u32 {
        self.config.max_open_sandboxes_per_tenant
    }

    /// Checks `engine.submit(request)` (with `tools` as the request's own tool names and
    /// `data` values serialized) and returns the run's plan. `data` is the same object of
    /// Buffers as `request.data`: its bytes are copied into the plan once, here.
    #[napi]
    pub fn plan(&self, env: &Env, request: Unknown, data: Option<Unknown>) -> Result<RunPlanJs, String> {
        let raw = raw_of(&request, 0).map_err(super::internal_error)?;
        let mut plan = checked(env, || self.config.plan(&raw))?;
        if let Some(data) = data {
            plan.data_values = data_values_of(env.raw(), data.raw()).map_err(super::internal_error)?;
        }
        Ok(RunPlanJs { plan: Arc::new(plan) })
    }
}

/// Checks `runSandbox(code, options)` (with `capabilities` as the capability names) and
/// returns the run's plan.
#[napi]
pub fn plan_run(env: &Env, code: Unknown, options: Unknown) -> Result<RunPlanJs, String> {
    let code = raw_of(&code, 0).map_err(super::internal_error)?;
    let options = raw_of(&options, 0).map_err(super::internal_error)?;
    let plan = checked(env, || isolet_core::options::run_sandbox(&code, &options))?;
    Ok(RunPlanJs { plan: Arc::new(plan) })
}

/// A checked run, as `planRun` and `EngineSettings.plan` return it: what `submit` takes,
/// in either isolation mode, with every limit filled in. JS reads the limits it needs
/// (time, message size, pending calls) from here, never from defaults of its own; only
/// the code is set again, once TypeScript is stripped. Submitting it shares the plan with
/// the run (no copy of its code or data).
#[napi(js_name = "RunPlan")]
pub struct RunPlanJs {
    pub(crate) plan: Arc<RunPlan>,
}

#[napi]
impl RunPlanJs {
    #[napi(getter)]
    pub fn code(&self) -> String {
        self.plan.code.clone()
    }

    /// The code to run instead (JavaScript stripped of its types). A run already
    /// submitted keeps the code it had.
    #[napi(setter)]
    pub fn set_code(&mut self, code: String) {
        Arc::make_mut(&mut self.plan).code = code;
    }

    /// `script` (completion value) or `asyncBody` (only `return` gives output).
    #[napi(getter)]
    pub fn mode(&self) -> &'static str {
        match self.plan.mode {
            ExecMode::Script => "script",
            ExecMode::AsyncBody => "asyncBody",
            ExecMode::Module => "module",
        }
    }

    /// Whether anything of the run is TypeScript to strip before it is submitted: its code
    /// (`language: 'typescript'`) or a module of its map.
    #[napi(getter)]
    pub fn strips_types(&self) -> bool {
        let language = self.plan.language;
        language == "typescript" || self.plan.modules.keys().any(|k| isolet_core::modules::is_typescript(k, language))
    }

    /// The source of module `key` of the checked map.
    #[napi]
    pub fn module_source(&self, key: String) -> Option<String> {
        self.plan.modules.get(&key).cloned()
    }

    /// Keys of the `modules` map whose sources are TypeScript (JS strips them, then sets
    /// each with `setModule`).
    #[napi(getter)]
    pub fn typescript_modules(&self) -> Vec<String> {
        let language = self.plan.language;
        self.plan.modules.keys().filter(|k| isolet_core::modules::is_typescript(k, language)).cloned().collect()
    }

    /// The source of module `key` (a key of the checked map), stripped of its types; the
    /// map stays within its limits.
    #[napi]
    pub fn set_module(&mut self, key: String, source: String) -> Result<()> {
        let plan = Arc::make_mut(&mut self.plan);
        let Some(old) = plan.modules.get_mut(&key) else {
            return Err(validation_error(format!("modules has no module '{key}'")));
        };
        let before = std::mem::replace(old, source);
        // Stripping replaces types with spaces; should it ever add bytes, the map is
        // checked again rather than sent past its limit.
        if isolet_core::modules::check_map(&plan.modules, plan.module_limits).is_err() {
            plan.modules.insert(key.clone(), before);
            return Err(validation_error(format!("modules['{key}'] is over maxModuleBytes once its types are stripped")));
        }
        Ok(())
    }

    /// With `web`, the run's global `fetch` is WHATWG fetch over its tool `fetch` (a fetch
    /// capability, which the caller checked): whether it is (docs/web.md).
    #[napi]
    pub fn use_web_fetch(&mut self) -> bool {
        Arc::make_mut(&mut self.plan).use_web_fetch()
    }

    /// `javascript` or `typescript`; JS strips types before submitting.
    #[napi(getter)]
    pub fn language(&self) -> &'static str {
        self.plan.language
    }

    /// runSandbox only: `process` or `thread`.
    #[napi(getter)]
    pub fn isolation(&self) -> Option<&'static str> {
        self.plan.isolation.map(Isolation::as_str)
    }

    #[napi(getter)]
    pub fn wall_time_ms(&self) -> f64 {
        self.plan.limits.wall_time_ms as f64
    }

    #[napi(getter)]
    pub fn max_message_bytes(&self) -> f64 {
        self.plan.bridge.max_message_bytes as f64
    }

    #[napi(getter)]
    pub fn max_pending_host_call_bytes(&self) -> f64 {
        self.plan.bridge.max_pending_host_call_bytes as f64
    }

    #[napi(getter)]
    pub fn max_pending_host_calls(&self) -> u32 {
        self.plan.bridge.max_pending_host_calls
    }
}

/// `resolve`'s answer as the bytes `RunHandle.answer` carries to the sandbox: the source
/// and the canonical key it named, or (no source) that it found no module.
#[napi]
pub fn module_answer(source: Option<String>, specifier: Option<String>) -> Buffer {
    match source {
        Some(source) => isolet_core::modules::encode_resolved(&source, specifier.as_deref()).into(),
        None => isolet_core::modules::encode_not_found().into(),
    }
}

/// A `data` object of serialized values: own string keys to Buffers, copied.
fn data_values_of(env: napi::sys::napi_env, object: napi::sys::napi_value) -> Result<BTreeMap<String, Vec<u8>>> {
    use super::keys::value as v;
    let not_bytes = || validation_error("request.data must be an object of serialized values");
    if v::type_of(env, object)? != napi::sys::ValueType::napi_object {
        return Err(not_bytes());
    }
    let mut names = std::ptr::null_mut();
    // SAFETY: on the env's thread; `object` is a live object of this scope.
    super::keys::check_status(unsafe {
        napi::sys::napi_get_all_property_names(
            env,
            object,
            napi::sys::KeyCollectionMode::own_only,
            napi::sys::KeyFilter::enumerable | napi::sys::KeyFilter::skip_symbols,
            napi::sys::KeyConversion::numbers_to_strings,
            &mut names,
        )
    })?;
    let len = v::array_len(env, names)?.unwrap_or(0);
    let mut out = BTreeMap::new();
    for i in 0..len {
        let name = v::element(env, names, i)?;
        let mut value = std::ptr::null_mut();
        // SAFETY: as above; `name` is one of the object's own keys.
        super::keys::check_status(unsafe { napi::sys::napi_get_property(env, object, name, &mut value) })?;
        let key = v::to_string(env, name)?.ok_or_else(not_bytes)?;
        let bytes = v::to_bytes(env, value)?.ok_or_else(not_bytes)?;
        out.insert(key, bytes);
    }
    Ok(out)
}

#[napi(object)]
pub struct WasmModuleJs {
    pub name: String,
    pub bytes: Buffer,
}

#[napi(object)]
pub struct EngineStatsJs {
    pub warm: u32,
    pub warming: u32,
    pub busy: u32,
    pub queued: u32,
    pub completed: f64,
    pub failed: std::collections::HashMap<String, f64>,
    pub warm_starts: f64,
    pub cold_starts: f64,
    pub threads: u32,
    pub quarantined: u32,
    /// Per tenant (the runs naming none under `null`): queued, running, completed, failed.
    pub tenants: Vec<TenantStatsJs>,
    /// Process isolation only.
    pub processes: Option<SandboxProcessStatsJs>,
    /// The compiled-code cache (process mode: every live host's, added up).
    pub code_cache: CodeCacheStatsJs,
    /// Persistent sandboxes of the engine.
    pub sandboxes: SandboxCountsJs,
    /// Runs that waited for a slot past their `maxQueueMs` and failed (never counted in
    /// `failed`: they never ran).
    pub queue_expired: f64,
}

#[napi(object)]
pub struct CodeCacheStatsJs {
    pub hits: f64,
    pub misses: f64,
    pub rejected: f64,
    pub evictions: f64,
    pub entries: f64,
    pub bytes: f64,
    pub budget_bytes: f64,
}

impl From<isolet_core::code_cache::CodeCacheStats> for CodeCacheStatsJs {
    fn from(c: isolet_core::code_cache::CodeCacheStats) -> Self {
        CodeCacheStatsJs {
            hits: c.hits as f64,
            misses: c.misses as f64,
            rejected: c.rejected as f64,
            evictions: c.evictions as f64,
            entries: c.entries as f64,
            bytes: c.bytes as f64,
            budget_bytes: c.budget_bytes as f64,
        }
    }
}

#[napi(object)]
pub struct SandboxCountsJs {
    /// Open sandboxes (an idle one holds no isolate slot; its runs do, while they run).
    pub open: u32,
    /// The engine's bound on them (`maxOpenSandboxes`).
    pub max_open_sandboxes: u32,
    /// The most one named tenant may hold (`maxOpenSandboxesPerTenant`).
    pub max_open_sandboxes_per_tenant: u32,
}

#[napi(object)]
pub struct TenantStatsJs {
    pub tenant: Option<String>,
    pub queued: u32,
    pub running: u32,
    /// The tenant's open persistent sandboxes.
    pub sandboxes: u32,
    pub completed: f64,
    pub failed: std::collections::HashMap<String, f64>,
}

/// Failure counts by class, as the seed counts them: the kinds that share `SandboxError` add up.
fn by_class(failed: std::collections::HashMap<isolet_core::ErrorKind, u64>) -> std::collections::HashMap<String, f64> {
    failed.into_iter().fold(std::collections::HashMap::new(), |mut by_class, (k, v)| {
        *by_class.entry(k.class_name().to_string()).or_insert(0.0) += v as f64;
        by_class
    })
}

fn tenant_stats(t: TenantCounts) -> TenantStatsJs {
    TenantStatsJs {
        tenant: t.tenant.name().map(str::to_string),
        queued: t.queued as u32,
        running: t.running as u32,
        sandboxes: t.sandboxes as u32,
        completed: t.completed as f64,
        failed: by_class(t.failed),
    }
}

/// `stats().processes`: the sandbox host processes of an engine and their supervision.
#[napi(object)]
pub struct SandboxProcessStatsJs {
    pub live: u32,
    pub starting: u32,
    pub draining: u32,
    pub started: f64,
    pub crashed: f64,
    pub recycled: std::collections::HashMap<String, f64>,
    pub crash_reasons: std::collections::HashMap<String, f64>,
    pub pids: Vec<u32>,
    pub lockdown: Option<LockdownJs>,
}

#[napi(object)]
pub struct LockdownJs {
    pub seccomp: bool,
    pub no_new_privs: bool,
    pub parent_death_signal: bool,
    pub reason: Option<String>,
    /// io_uring rings the host had open at lock-down (0: libuv runs without io_uring there).
    pub io_uring_rings: u32,
}

/// Refuses a WebAssembly module that is not well-formed, has imports, or has a memory
/// without a maximum or one that may grow past `memory_mb` (WebAssembly memory lives
/// outside the heap and ArrayBuffer budgets: only the module's declared maximum bounds
/// it). Compiles nothing: `SandboxEngine.init()` calls it in the parent whatever the
/// isolation, and `setWasmModules` again before it compiles.
#[napi]
pub fn check_wasm_module(name: String, bytes: Buffer, memory_mb: u32) -> Result<()> {
    check_wasm(&name, &bytes, memory_mb)
}

fn check_wasm(name: &str, bytes: &[u8], memory_mb: u32) -> Result<()> {
    use isolet_core::wasm::WasmMemoryError;
    check_global_name(name).map_err(|e| validation_error(format!("wasm module name: {e}")))?;
    isolet_core::wasm::check_module(bytes, memory_mb as u64 * 1024 * 1024).map_err(|e| {
        let verdict = match e {
            WasmMemoryError::Malformed(_) | WasmMemoryError::Imports(_) => "is invalid",
            WasmMemoryError::NoMaximum { .. } | WasmMemoryError::OverBudget { .. } => "is refused",
        };
        validation_error(format!("wasm module \"{name}\" {verdict}: {e}"))
    })
}

/// Work an engine hands back to be finished off the main thread: compiling its
/// WebAssembly modules, checking its prelude (see `crate::engine::Deferred`).
pub struct EngineWork {
    work: Option<Deferred>,
}

impl Task for EngineWork {
    type Output = ();
    type JsValue = ();

    fn compute(&mut self) -> Result<()> {
        match self.work.take() {
            Some(work) => work().map_err(validation_error),
            None => Ok(()),
        }
    }

    fn resolve(&mut self, _env: Env, _output: ()) -> Result<()> {
        Ok(())
    }
}

#[napi]
pub struct NativeEngine {
    engine: Engine,
    memory_mb: u32,
    /// Delivers the events of every run of this engine on Node's thread.
    dispatcher: std::rc::Rc<Dispatcher>,
    /// Keys of the prelude's modules, which no sandbox's or run's `modules` may replace.
    prelude_keys: Arc<Vec<String>>,
}

impl Drop for NativeEngine {
    fn drop(&mut self) {
        // Runs still in flight keep their callbacks; the channel closes after the last.
        self.dispatcher.orphan();
    }
}

#[napi]
impl NativeEngine {
    /// An engine sized by checked settings, of isolate threads in this process or of
    /// sandbox host processes (`isolation`).
    #[napi(constructor)]
    pub fn new(env: Env, settings: &EngineSettings) -> Result<Self> {
        let c = &settings.config;
        let prelude_keys = Arc::new(c.prelude.as_ref().map(|p| p.module_keys()).unwrap_or_default());
        let dispatcher = Dispatcher::new(&env)?;
        let engine = Engine::new(c, env.raw() as usize, dispatcher.loop_watch());
        Ok(NativeEngine { engine, memory_mb: c.memory_mb, dispatcher, prelude_keys })
    }

    /// Registers the WebAssembly modules every run may instantiate: checks them, then
    /// resolves once each is compiled, exactly once per process (here, in an isolate of its
    /// own off the main thread; in process mode, by each host as it starts). Rejects (a
    /// validation error naming the module) if one is refused or does not compile. Await it
    /// before submitting runs that use the modules.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn set_wasm_modules(&self, modules: Vec<WasmModuleJs>) -> Result<AsyncTask<EngineWork>> {
        let mut out = Vec::with_capacity(modules.len());
        for m in modules {
            check_wasm(&m.name, &m.bytes, self.memory_mb)?;
            out.push((m.name, m.bytes.to_vec()));
        }
        Ok(AsyncTask::new(EngineWork { work: Some(self.engine.set_wasm_modules(out)) }))
    }

    /// Checks the engine's prelude (thread mode: runs it once off the main thread, which
    /// compiles it into the cache); rejects with a validation error saying what is wrong
    /// (a syntax error with its line and column, what it threw, that it ran too long or out
    /// of memory). In process mode every host does this as it starts, and `ready` rejects.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn check_prelude(&self) -> AsyncTask<EngineWork> {
        AsyncTask::new(EngineWork { work: Some(self.engine.check_prelude()) })
    }

    /// Starts creating the warm pool (thread mode) or the sandbox hosts (process mode) in
    /// the background.
    #[napi]
    pub fn warm_up(&self) {
        self.engine.warm_up();
    }

    /// Resolves once the engine can serve: at once in thread mode; once every sandbox host
    /// has started (or failed to: a replacement follows) in process mode. Rejects with a
    /// validation error when a host refused the configuration (a WebAssembly module that
    /// does not compile there).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn ready(&self) -> AsyncTask<Ready> {
        AsyncTask::new(Ready { engine: self.engine.clone() })
    }

    /// Queues a planned run (see `planRun`, `EngineSettings.plan`); its events go to
    /// `on_event`, always later than this call returns (never from inside it). The
    /// `started` event is sent unless `started_event` is false: it costs a wake-up of
    /// Node's thread in the middle of every run, so callers that ignore it turn it off.
    /// Returns the run's id (see `handleOf`).
    #[napi]
    pub fn submit(&self, plan: &RunPlanJs, on_event: Function, started_event: Option<bool>) -> Result<f64> {
        let started_event = started_event.unwrap_or(true);
        let id = NEXT_RUN_ID.fetch_add(1, Ordering::Relaxed);
        let tenant = Tenant::from(plan.plan.tenant.as_deref());
        let sink = self.dispatcher.register(id, on_event.value().value, started_event)?;
        let control = self.engine.submit(id, tenant, plan.plan.clone(), started_event, sink);
        self.dispatcher.keep_control(id, control);
        Ok(id as f64)
    }

    /// The host side of run `run_id` (of this engine or of one of its sandboxes), asked
    /// for when first needed: null once its `done` was delivered.
    #[napi]
    pub fn handle_of(&self, run_id: f64) -> Option<RunHandle> {
        self.dispatcher.control(run_id as u64).map(RunHandle::of)
    }

    #[napi]
    pub fn stats(&self) -> EngineStatsJs {
        let EngineReport { engine: s, code_cache, processes } = self.engine.stats();
        let processes = processes.map(|q| {
            let counts = |m: BTreeMap<String, u64>| m.into_iter().map(|(k, v)| (k, v as f64)).collect();
            SandboxProcessStatsJs {
                live: q.live as u32,
                starting: q.starting as u32,
                draining: q.draining as u32,
                started: q.started as f64,
                crashed: q.crashed as f64,
                recycled: counts(q.recycled.into_iter().map(|(k, v)| (k.to_string(), v)).collect()),
                crash_reasons: counts(q.crash_reasons),
                pids: q.pids,
                lockdown: q.lockdown.map(|l| LockdownJs {
                    seccomp: l.seccomp,
                    no_new_privs: l.no_new_privs,
                    parent_death_signal: l.parent_death_signal,
                    reason: l.reason,
                    io_uring_rings: l.io_uring_rings,
                }),
            }
        });
        EngineStatsJs {
            warm: s.warm as u32,
            warming: s.warming as u32,
            busy: s.busy as u32,
            queued: s.queued as u32,
            completed: s.completed as f64,
            failed: by_class(s.failed),
            warm_starts: s.warm_starts as f64,
            cold_starts: s.cold_starts as f64,
            threads: s.threads as u32,
            quarantined: s.quarantined as u32,
            tenants: s.tenants.into_iter().map(tenant_stats).collect(),
            sandboxes: SandboxCountsJs {
                open: s.sandboxes as u32,
                max_open_sandboxes: s.max_open_sandboxes as u32,
                max_open_sandboxes_per_tenant: s.max_open_sandboxes_per_tenant as u32,
            },
            queue_expired: s.queue_expired as f64,
            processes,
            code_cache: code_cache.into(),
        }
    }

    /// Stops accepting work and aborts everything queued or running.
    #[napi]
    pub fn shutdown(&self) {
        self.engine.shutdown();
    }

    /// Resolves true once every isolate thread (quarantined ones excepted) or sandbox host
    /// of the engine has ended, false after `timeout_ms` (process mode: the hosts left are
    /// then killed).
    #[napi]
    pub fn wait_idle(&self, timeout_ms: u32) -> AsyncTask<WaitIdle> {
        AsyncTask::new(WaitIdle { engine: self.engine.clone(), timeout: Duration::from_millis(timeout_ms as u64) })
    }
}

pub struct Ready {
    engine: Engine,
}

impl Task for Ready {
    type Output = ();
    type JsValue = ();

    fn compute(&mut self) -> Result<()> {
        self.engine.ready(Duration::from_millis(isolet_core::host_policy::START_TIMEOUT_MS + 5_000)).map_err(validation_error)
    }

    fn resolve(&mut self, _env: Env, _output: ()) -> Result<()> {
        Ok(())
    }
}

pub struct WaitIdle {
    engine: Engine,
    timeout: Duration,
}

impl Task for WaitIdle {
    type Output = bool;
    type JsValue = bool;

    fn compute(&mut self) -> Result<bool> {
        Ok(self.engine.wait_idle(self.timeout))
    }

    fn resolve(&mut self, _env: Env, output: bool) -> Result<bool> {
        Ok(output)
    }
}

/// The host side of one run: answers host calls and data requests, aborts.
#[napi]
pub struct RunHandle {
    run: Arc<dyn RunControl>,
}

impl RunHandle {
    pub(crate) fn of(run: Arc<dyn RunControl>) -> RunHandle {
        RunHandle { run }
    }
}

impl NativeEngine {
    /// The one engine behind this binding.
    pub(crate) fn engine(&self) -> &Engine {
        &self.engine
    }

    pub(crate) fn prelude_keys(&self) -> Arc<Vec<String>> {
        self.prelude_keys.clone()
    }

    pub(crate) fn dispatcher(&self) -> &std::rc::Rc<Dispatcher> {
        &self.dispatcher
    }
}

#[napi]
impl RunHandle {
    /// Fulfils host call `call_id` with a serialized value (copied: the isolate thread
    /// reads it later, and holding the JS Buffer until then would cost a reference).
    /// Measured and left out: that reference. With huge pages the copy costs ~3 ms per
    /// 32 MB, less than the 4 KB page faults the isolate's own copy used to take.
    #[napi]
    pub fn fulfill(&self, call_id: u32, value: BufferSlice) {
        self.run.reply(HostReply::Fulfill { call_id, value: copy_out_of_js(&value) });
    }

    /// Fulfils host call `call_id` with `view`, a Uint8Array over the whole of a plain
    /// ArrayBuffer, written in V8's serialization format (`version`: the format's version
    /// byte, checked by `lib/bridge.js` against Node's own serializer) straight into memory
    /// Rust owns: one copy of its bytes where `serialize` + `fulfill` made two. Returns the
    /// encoded length (the same bytes v8.Serializer writes), or -1 when `view` is not such an
    /// array (the caller serializes it); nothing is sent when the length passes `max_bytes`.
    #[napi]
    pub fn fulfill_uint8_array(&self, env: &Env, call_id: u32, view: Unknown<'_>, version: u32, max_bytes: f64) -> Result<f64> {
        let Some(bytes) = whole_uint8_array(env, &view) else { return Ok(-1.0) };
        let Ok(version) = u8::try_from(version) else { return Ok(-1.0) };
        let n = bytes.len() as u64;
        let total = 2 + 1 + varint_len(n) + bytes.len() + 3 + varint_len(n) + 1;
        if total as f64 > max_bytes {
            return Ok(total as f64);
        }
        let mut out = with_huge_capacity(total);
        // Header, ArrayBuffer ('B', byte length, bytes), then the view over all of it
        // ('V', 'B' = Uint8Array, offset 0, length, flags 0).
        out.extend_from_slice(&[0xff, version, b'B']);
        push_varint(&mut out, n);
        out.extend_from_slice(bytes);
        out.extend_from_slice(&[b'V', b'B', 0]);
        push_varint(&mut out, n);
        out.push(0);
        debug_assert_eq!(out.len(), total);
        self.run.reply(HostReply::Fulfill { call_id, value: out });
        Ok(total as f64)
    }

    /// Fulfils host call `call_id` with `value`, a string of `chars` UTF-16 code units, if it
    /// is ASCII only: written as V8's serializer writes a one-byte string (`version` as above)
    /// straight into memory Rust owns. Returns the encoded length, or -1 when `value` is not
    /// such a string (the caller serializes it); nothing is sent past `max_bytes`.
    #[napi]
    pub fn fulfill_ascii_string(
        &self,
        env: &Env,
        call_id: u32,
        value: Unknown<'_>,
        chars: f64,
        version: u32,
        max_bytes: f64,
    ) -> Result<f64> {
        let raw_env = env.raw();
        let Ok(version) = u8::try_from(version) else { return Ok(-1.0) };
        let mut n = 0usize;
        // SAFETY: a null buffer asks for the length only; a non-string fails with a status.
        let status = unsafe { sys::napi_get_value_string_latin1(raw_env, value.raw(), std::ptr::null_mut(), 0, &mut n) };
        if status != sys::Status::napi_ok || n == 0 || n as f64 != chars {
            return Ok(-1.0);
        }
        let head = 2 + 1 + varint_len(n as u64);
        let total = head + n;
        // One more byte for the NUL that Node-API writes after the characters.
        let mut out = with_huge_capacity(total + 1);
        out.extend_from_slice(&[0xff, version, b'"']);
        push_varint(&mut out, n as u64);
        let mut written = 0usize;
        // UTF-8 into exactly n bytes: they are all ASCII only if the first characters that
        // filled them were n ASCII characters, i.e. the whole string (checked below).
        // SAFETY: `out` has room for n + 1 bytes past `head`; Node-API writes at most
        // bufsize - 1 = n bytes and a NUL.
        let status =
            unsafe { sys::napi_get_value_string_utf8(raw_env, value.raw(), out.as_mut_ptr().add(head).cast(), n + 1, &mut written) };
        if status != sys::Status::napi_ok || written != n {
            return Ok(-1.0);
        }
        // SAFETY: the n bytes after `head` were just written.
        unsafe { out.set_len(total) };
        if !out[head..].is_ascii() {
            return Ok(-1.0);
        }
        if total as f64 > max_bytes {
            return Ok(total as f64);
        }
        self.run.reply(HostReply::Fulfill { call_id, value: out });
        Ok(total as f64)
    }

    /// Rejects host call `call_id`; the sandbox sees a fresh Error with this name and message.
    #[napi]
    pub fn reject(&self, call_id: u32, name: String, message: String) {
        self.run.reply(HostReply::Reject { call_id, name, message });
    }

    /// Answers data request `id` with a serialized value, or with an error message.
    /// Returns false if no such request is waiting.
    #[napi]
    pub fn answer(&self, id: u32, value: Option<BufferSlice>, error: Option<String>) -> bool {
        let answer = match (value, error) {
            (_, Some(message)) => DataAnswer::Error(message),
            (Some(v), None) => DataAnswer::Value(copy_out_of_js(&v)),
            (None, None) => DataAnswer::Error("data request answered without a value".into()),
        };
        self.run.answer(id, answer)
    }

    #[napi]
    pub fn abort(&self) {
        self.run.abort();
    }
}

/// Large copies start below this: smaller ones fault few pages.
#[cfg(target_os = "linux")]
const HUGE_ADVISE_MIN: usize = 4 << 20;
#[cfg(target_os = "linux")]
const HUGE_PAGE: usize = 2 << 20;

/// `bytes` copied into a new Vec. A big one spent most of its copy in 4 KB page faults of
/// the fresh mapping (8,192 per 32 MB); its whole 2 MB pages are advised as transparent
/// huge pages before the copy touches them. Only whole aligned huge pages inside the
/// allocation are advised, so resident memory never exceeds its length.
fn copy_out_of_js(bytes: &[u8]) -> Vec<u8> {
    let mut out = with_huge_capacity(bytes.len());
    out.extend_from_slice(bytes);
    out
}

/// An empty Vec of `capacity`, its whole 2 MB pages advised as huge pages when it is big.
fn with_huge_capacity(capacity: usize) -> Vec<u8> {
    #[cfg_attr(not(target_os = "linux"), allow(unused_mut))]
    let mut out = Vec::<u8>::with_capacity(capacity);
    // Linux only: macOS has no transparent huge pages to advise.
    #[cfg(target_os = "linux")]
    if capacity >= HUGE_ADVISE_MIN {
        let start = out.as_mut_ptr() as usize;
        let begin = start.next_multiple_of(HUGE_PAGE);
        let end = (start + capacity) / HUGE_PAGE * HUGE_PAGE;
        if end > begin {
            // SAFETY: [begin, end) lies inside `out`'s allocation, which nothing has read or
            // written yet; MADV_HUGEPAGE only changes how its pages are backed (a failure,
            // e.g. THP disabled, leaves ordinary pages).
            unsafe { libc::madvise(begin as *mut libc::c_void, end - begin, libc::MADV_HUGEPAGE) };
        }
    }
    out
}

/// The bytes of `value` if it is a Uint8Array over the whole of an ArrayBuffer (offset 0,
/// the buffer's full length, not empty), read through Node-API, never through getters.
/// Resizable and shared buffers are excluded by the caller (Node-API cannot tell them).
fn whole_uint8_array<'a>(env: &'a Env, value: &'a Unknown<'_>) -> Option<&'a [u8]> {
    let raw_env = env.raw();
    let mut kind = sys::TypedarrayType::int8_array;
    let (mut len, mut byte_offset) = (0usize, 0usize);
    let mut data: *mut std::ffi::c_void = std::ptr::null_mut();
    let mut arraybuffer = std::ptr::null_mut();
    // SAFETY: out-pointers are valid; a value that is not a typed array fails with a status.
    let status =
        unsafe { sys::napi_get_typedarray_info(raw_env, value.raw(), &mut kind, &mut len, &mut data, &mut arraybuffer, &mut byte_offset) };
    if status != sys::Status::napi_ok || kind != sys::TypedarrayType::uint8_array || data.is_null() || len == 0 || byte_offset != 0 {
        return None;
    }
    let (mut buffer_data, mut buffer_len) = (std::ptr::null_mut(), 0usize);
    // SAFETY: `arraybuffer` is the view's buffer; a shared one fails with a status.
    let status = unsafe { sys::napi_get_arraybuffer_info(raw_env, arraybuffer, &mut buffer_data, &mut buffer_len) };
    if status != sys::Status::napi_ok || buffer_len != len || buffer_data != data {
        return None;
    }
    // SAFETY: `len` bytes at `data` belong to the live array, which no JS can touch while
    // this synchronous call (on Node's thread) copies them.
    Some(unsafe { std::slice::from_raw_parts(data.cast::<u8>(), len) })
}

fn varint_len(mut n: u64) -> usize {
    let mut len = 1;
    while n >= 0x80 {
        n >>= 7;
        len += 1;
    }
    len
}

fn push_varint(out: &mut Vec<u8>, mut n: u64) {
    while n >= 0x80 {
        out.push((n as u8 & 0x7f) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
}
