//! `NativeEngine` and `RunHandle`: the bindings `lib/engine.js` and
//! `lib/run-sandbox.js` build on.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi::{sys, JsValue};
use napi_derive::napi;

use isolet_core::frame::WirePlan;
use isolet_core::queue::{Tenant, TenantCounts};
use isolet_core::{check_global_name, BridgeLimits, EngineConfig, ExecMode, IsolateLimits, Isolation, RunPlan, ToolCalls};

use super::events::Dispatcher;
use super::keys::{Key, Keys};
use super::options::raw_of;
use super::{options_error, validation_error};
use crate::engine::{Engine, EngineConfig as PoolConfig, ProcessConfig, ProcessEngine, ProcessRun};
use crate::isolate::{HostReply, RunShared, RunSpec};
use crate::v8::{DataAnswer, Mode, WasmModule};

static NEXT_RUN_ID: AtomicU64 = AtomicU64::new(1);

/// A checked `SandboxEngine` config (or the config of one of runSandbox's engines):
/// `new SandboxEngine(config)` is validated here, once, under the public names.
#[napi]
pub struct EngineSettings {
    config: EngineConfig,
}

/// The parts of a checked engine config that JS uses to choose and size its backend.
#[napi(object)]
pub struct EngineConfigJs {
    pub memory_mb: u32,
    pub max_concurrent_isolates: u32,
    pub warm_pool_size: u32,
    pub max_queue_size: u32,
    pub processes: u32,
    /// `process` or `thread`.
    pub isolation: String,
    /// Names of the WebAssembly modules, in order.
    pub wasm_modules: Vec<String>,
}

#[napi]
impl EngineSettings {
    /// Checks a `SandboxEngine` config; `tools` holds the flattened tool names.
    #[napi(constructor)]
    pub fn new(config: Unknown) -> Result<Self, String> {
        let raw = raw_of(&config, 0).map_err(super::internal_error)?;
        Ok(EngineSettings { config: EngineConfig::from_raw(&raw).map_err(options_error)? })
    }

    #[napi(getter)]
    pub fn config(&self) -> EngineConfigJs {
        let c = &self.config;
        EngineConfigJs {
            memory_mb: c.memory_mb,
            max_concurrent_isolates: c.max_concurrent_isolates,
            warm_pool_size: c.warm_pool_size,
            max_queue_size: c.max_queue_size,
            processes: c.processes,
            isolation: c.isolation.as_str().to_string(),
            wasm_modules: c.wasm_modules.clone(),
        }
    }

    /// Checks `engine.submit(request)` (with `tools` as the request's own tool names and
    /// `data` values serialized) and returns the run's plan.
    #[napi]
    pub fn plan(&self, request: Unknown) -> Result<RunPlanOut, String> {
        let raw = raw_of(&request, 0).map_err(super::internal_error)?;
        Ok(self.config.plan(&raw).map_err(options_error)?.into())
    }
}

/// Checks `runSandbox(code, options)` (with `capabilities` as the capability names) and
/// returns the run's plan.
#[napi]
pub fn plan_run(code: Unknown, options: Unknown) -> Result<RunPlanOut, String> {
    let code = raw_of(&code, 0).map_err(super::internal_error)?;
    let options = raw_of(&options, 0).map_err(super::internal_error)?;
    Ok(isolet_core::options::run_sandbox(&code, &options).map_err(options_error)?.into())
}

/// A checked run, as produced by `planRun` or `EngineSettings.plan`: what `submit` takes
/// (and what travels to a sandbox host process). Every value is filled in; JS reads the
/// limits it needs (time, memory, message size) from here, never from defaults of its own.
/// A plain JS object, read by `submit` with cached property names (see `keys`) on every run.
pub struct RunPlanJs {
    pub code: String,
    /// `script` (completion value) or `asyncBody` (only `return` gives output).
    pub mode: String,
    /// `javascript` or `typescript`; JS strips types before submitting.
    pub language: String,
    /// runSandbox only: `process` or `thread`.
    pub isolation: Option<String>,
    pub memory_mb: u32,
    pub wall_time_ms: f64,
    pub cpu_time_ms: Option<f64>,
    pub max_message_bytes: f64,
    pub max_messages: u32,
    pub max_output_bytes: f64,
    pub max_log_entries: u32,
    pub max_log_bytes: f64,
    pub max_pending_host_call_bytes: f64,
    pub max_pending_host_calls: u32,
    pub max_output_values: u32,
    pub max_message_values: u32,
    pub max_pending_host_call_values: u32,
    /// Host functions installed in the sandbox (only these are visible), in order.
    pub tools: Vec<String>,
    /// Per tool (same order), its `maxCallsPerTool`, or null.
    pub max_calls: Vec<Option<u32>>,
    pub data_object: bool,
    /// `data` values given up front (serialized); reading them needs no round trip.
    /// Checked by the plan but not copied into it: JS sets the same buffers here.
    pub data_values: Option<Vec<(String, Vec<u8>)>>,
    /// Instantiate the engine's WebAssembly modules (see `setWasmModules`).
    pub wasm: bool,
    /// Also send each console entry as a `console` event.
    pub stream_console: bool,
    /// Send the `started` event (default true). Callers that ignore it turn it off:
    /// it costs a wake-up of Node's thread in the middle of every run.
    pub started_event: Option<bool>,
    /// Whose run it is: queued runs are served in turn across tenants.
    pub tenant: Option<String>,
}

impl RunPlanJs {
    /// The plan's mode and limits, as the run (thread mode) and the `Run` frame (process
    /// mode) both take them; a plan that no checked plan could be is refused.
    pub(crate) fn checked_parts(&self) -> Result<(ExecMode, IsolateLimits, BridgeLimits)> {
        let mode = match self.mode.as_str() {
            "script" => ExecMode::Script,
            "asyncBody" => ExecMode::AsyncBody,
            other => return Err(validation_error(format!("unknown mode `{other}`"))),
        };
        if self.max_calls.len() != self.tools.len() {
            return Err(validation_error("a run plan needs one maxCalls entry per tool"));
        }
        let limits = IsolateLimits { memory_mb: self.memory_mb, wall_time_ms: self.wall_time_ms as u64, cpu_time_ms: self.cpu_time_ms.map(|v| v as u64) };
        let bridge = BridgeLimits {
            max_message_bytes: self.max_message_bytes as usize,
            max_messages: self.max_messages,
            max_output_bytes: self.max_output_bytes as usize,
            max_log_entries: self.max_log_entries as usize,
            max_log_bytes: self.max_log_bytes as usize,
            max_pending_host_call_bytes: self.max_pending_host_call_bytes as usize,
            max_pending_host_calls: self.max_pending_host_calls,
            max_output_values: self.max_output_values,
            max_message_values: self.max_message_values,
            max_pending_host_call_values: self.max_pending_host_call_values,
        };
        Ok((mode, limits, bridge))
    }
}

impl TypeName for RunPlanJs {
    fn type_name() -> &'static str {
        "RunPlanJs"
    }

    fn value_type() -> napi::ValueType {
        napi::ValueType::Object
    }
}

impl ValidateNapiValue for RunPlanJs {}

/// A run plan field of the wrong type (a plan not made by `planRun`/`EngineSettings.plan`).
fn plan_field_error(key: Key, expected: &str) -> Error {
    validation_error(format!("run plan: `{}` must be {expected}", key.name()))
}

impl FromNapiValue for RunPlanJs {
    unsafe fn from_napi_value(env: napi::sys::napi_env, o: napi::sys::napi_value) -> Result<Self> {
        use super::keys::value as v;
        if v::type_of(env, o)? != napi::sys::ValueType::napi_object {
            return Err(validation_error("a run plan must be an object"));
        }
        // SAFETY: napi calls this on the env's thread inside the binding's handle scope.
        let keys = unsafe { Keys::of(env) }?;
        let string = |key: Key| -> Result<String> { v::to_string(env, keys.get(o, key)?)?.ok_or_else(|| plan_field_error(key, "a string")) };
        let opt_string = |key: Key| -> Result<Option<String>> {
            let value = keys.get(o, key)?;
            if v::is_nullish(env, value)? {
                return Ok(None);
            }
            v::to_string(env, value)?.map(Some).ok_or_else(|| plan_field_error(key, "a string"))
        };
        let number = |key: Key| -> Result<f64> { v::to_f64(env, keys.get(o, key)?)?.ok_or_else(|| plan_field_error(key, "a number")) };
        let opt_number = |key: Key| -> Result<Option<f64>> {
            let value = keys.get(o, key)?;
            if v::is_nullish(env, value)? {
                return Ok(None);
            }
            v::to_f64(env, value)?.map(Some).ok_or_else(|| plan_field_error(key, "a number"))
        };
        let count = |key: Key| -> Result<u32> {
            let n = number(key)?;
            if n.is_finite() && n >= 0.0 && n <= u32::MAX as f64 {
                Ok(n as u32)
            } else {
                Err(plan_field_error(key, "a count"))
            }
        };
        let flag = |key: Key| -> Result<bool> { v::to_bool(env, keys.get(o, key)?)?.ok_or_else(|| plan_field_error(key, "a boolean")) };
        let opt_flag = |key: Key| -> Result<Option<bool>> {
            let value = keys.get(o, key)?;
            if v::is_nullish(env, value)? {
                return Ok(None);
            }
            v::to_bool(env, value)?.map(Some).ok_or_else(|| plan_field_error(key, "a boolean"))
        };

        let tools_value = keys.get(o, Key::Tools)?;
        let tools_len = v::array_len(env, tools_value)?.ok_or_else(|| plan_field_error(Key::Tools, "an array"))?;
        let mut tools = Vec::with_capacity(tools_len as usize);
        for i in 0..tools_len {
            let item = v::element(env, tools_value, i)?;
            tools.push(v::to_string(env, item)?.ok_or_else(|| plan_field_error(Key::Tools, "an array of strings"))?);
        }
        let max_value = keys.get(o, Key::MaxCalls)?;
        let max_len = v::array_len(env, max_value)?.ok_or_else(|| plan_field_error(Key::MaxCalls, "an array"))?;
        let mut max_calls = Vec::with_capacity(max_len as usize);
        for i in 0..max_len {
            let item = v::element(env, max_value, i)?;
            if v::is_nullish(env, item)? {
                max_calls.push(None);
                continue;
            }
            let n = v::to_f64(env, item)?.ok_or_else(|| plan_field_error(Key::MaxCalls, "an array of counts or nulls"))?;
            if !(n.is_finite() && n >= 0.0 && n <= u32::MAX as f64) {
                return Err(plan_field_error(Key::MaxCalls, "an array of counts or nulls"));
            }
            max_calls.push(Some(n as u32));
        }
        let data_value = keys.get(o, Key::DataValues)?;
        let data_values = if v::is_nullish(env, data_value)? {
            None
        } else {
            Some(data_values_of(env, data_value)?)
        };
        Ok(RunPlanJs {
            code: string(Key::Code)?,
            mode: string(Key::Mode)?,
            language: string(Key::Language)?,
            isolation: opt_string(Key::Isolation)?,
            memory_mb: count(Key::MemoryMb)?,
            wall_time_ms: number(Key::WallTimeMs)?,
            cpu_time_ms: opt_number(Key::CpuTimeMs)?,
            max_message_bytes: number(Key::MaxMessageBytes)?,
            max_messages: count(Key::MaxMessages)?,
            max_output_bytes: number(Key::MaxOutputBytes)?,
            max_log_entries: count(Key::MaxLogEntries)?,
            max_log_bytes: number(Key::MaxLogBytes)?,
            max_pending_host_call_bytes: number(Key::MaxPendingHostCallBytes)?,
            max_pending_host_calls: count(Key::MaxPendingHostCalls)?,
            max_output_values: count(Key::MaxOutputValues)?,
            max_message_values: count(Key::MaxMessageValues)?,
            max_pending_host_call_values: count(Key::MaxPendingHostCallValues)?,
            tools,
            max_calls,
            data_object: flag(Key::DataObject)?,
            data_values,
            wasm: flag(Key::Wasm)?,
            stream_console: flag(Key::StreamConsole)?,
            started_event: opt_flag(Key::StartedEvent)?,
            tenant: opt_string(Key::Tenant)?,
        })
    }
}

/// A plan's `dataValues`: own string keys to Buffers, copied.
fn data_values_of(env: napi::sys::napi_env, object: napi::sys::napi_value) -> Result<Vec<(String, Vec<u8>)>> {
    use super::keys::value as v;
    if v::type_of(env, object)? != napi::sys::ValueType::napi_object {
        return Err(plan_field_error(Key::DataValues, "an object"));
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
    let mut out = Vec::with_capacity(len as usize);
    for i in 0..len {
        let name = v::element(env, names, i)?;
        let mut value = std::ptr::null_mut();
        // SAFETY: as above; `name` is one of the object's own keys.
        super::keys::check_status(unsafe { napi::sys::napi_get_property(env, object, name, &mut value) })?;
        let key = v::to_string(env, name)?.ok_or_else(|| plan_field_error(Key::DataValues, "an object of Buffers"))?;
        let bytes = v::to_bytes(env, value)?.ok_or_else(|| plan_field_error(Key::DataValues, "an object of Buffers"))?;
        out.push((key, bytes));
    }
    Ok(out)
}

/// A run plan as `planRun` and `EngineSettings.plan` return it: the fields of `RunPlanJs`
/// (without `dataValues` and `startedEvent`, which JS adds). Made by napi-rs's own
/// conversion, one `napi_define_properties` call, which measured a little faster than
/// the cached names `submit` reads `RunPlanJs` with.
#[napi(object, object_from_js = false, js_name = "RunPlan")]
pub struct RunPlanOut {
    pub code: String,
    pub mode: String,
    pub language: String,
    pub isolation: Option<String>,
    pub memory_mb: u32,
    pub wall_time_ms: f64,
    pub cpu_time_ms: Option<f64>,
    pub max_message_bytes: f64,
    pub max_messages: u32,
    pub max_output_bytes: f64,
    pub max_log_entries: u32,
    pub max_log_bytes: f64,
    pub max_pending_host_call_bytes: f64,
    pub max_pending_host_calls: u32,
    pub max_output_values: u32,
    pub max_message_values: u32,
    pub max_pending_host_call_values: u32,
    pub tools: Vec<String>,
    pub max_calls: Vec<Option<u32>>,
    pub data_object: bool,
    pub wasm: bool,
    pub stream_console: bool,
    pub tenant: Option<String>,
}

impl From<RunPlan> for RunPlanOut {
    fn from(p: RunPlan) -> Self {
        let (l, b) = (p.limits, p.bridge);
        RunPlanOut {
            code: p.code,
            mode: match p.mode {
                ExecMode::Script => "script".into(),
                ExecMode::AsyncBody => "asyncBody".into(),
            },
            language: p.language.to_string(),
            isolation: p.isolation.map(|i| i.as_str().to_string()),
            memory_mb: l.memory_mb,
            wall_time_ms: l.wall_time_ms as f64,
            cpu_time_ms: l.cpu_time_ms.map(|v| v as f64),
            max_message_bytes: b.max_message_bytes as f64,
            max_messages: b.max_messages,
            max_output_bytes: b.max_output_bytes as f64,
            max_log_entries: b.max_log_entries as u32,
            max_log_bytes: b.max_log_bytes as f64,
            max_pending_host_call_bytes: b.max_pending_host_call_bytes as f64,
            max_pending_host_calls: b.max_pending_host_calls,
            max_output_values: b.max_output_values,
            max_message_values: b.max_message_values,
            max_pending_host_call_values: b.max_pending_host_call_values,
            tools: p.tools,
            max_calls: p.max_calls,
            data_object: p.data_object,
            wasm: p.wasm,
            stream_console: p.stream_console,
            tenant: p.tenant,
        }
    }
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
}

#[napi(object)]
pub struct TenantStatsJs {
    pub tenant: Option<String>,
    pub queued: u32,
    pub running: u32,
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

/// Compiles an engine's WebAssembly modules off the main thread, once each, and stores
/// them where every run of the engine finds them.
pub struct CompileWasm {
    modules: Vec<(String, Vec<u8>)>,
    memory_mb: u32,
    /// Thread mode: where the compiled modules go. Process mode compiles in each host.
    target: Option<Arc<Mutex<Vec<(String, Arc<WasmModule>)>>>>,
}

impl Task for CompileWasm {
    type Output = ();
    type JsValue = ();

    fn compute(&mut self) -> Result<()> {
        let Some(target) = &self.target else { return Ok(()) };
        let heap_limit = self.memory_mb as usize * 1024 * 1024;
        let compiled = WasmModule::compile_all(&self.modules, heap_limit)
            .map_err(|(name, thrown)| validation_error(format!("wasm module \"{name}\" is invalid: {}", thrown.message)))?;
        *target.lock().unwrap_or_else(PoisonError::into_inner) = compiled;
        Ok(())
    }

    fn resolve(&mut self, _env: Env, _output: ()) -> Result<()> {
        Ok(())
    }
}

/// The engine's backend: isolate threads here, or sandbox host processes.
enum Backend {
    Threads(Engine),
    Processes(ProcessEngine),
}

#[napi]
pub struct NativeEngine {
    backend: Backend,
    memory_mb: u32,
    /// Thread mode: compiled by `set_wasm_modules`; read by every run that asks for them.
    wasm_modules: Arc<Mutex<Vec<(String, Arc<WasmModule>)>>>,
    /// Delivers the events of every run of this engine on Node's thread.
    dispatcher: std::rc::Rc<Dispatcher>,
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
        let owner = env.raw() as usize;
        let backend = match c.isolation {
            Isolation::Thread => Backend::Threads(Engine::new(
                PoolConfig {
                    memory_mb: c.memory_mb,
                    max_concurrent: c.max_concurrent_isolates as usize,
                    warm_pool_size: c.warm_pool_size as usize,
                    max_queue: c.max_queue_size as usize,
                },
                owner,
            )),
            Isolation::Process => Backend::Processes(ProcessEngine::new(
                ProcessConfig {
                    memory_mb: c.memory_mb,
                    max_concurrent: c.max_concurrent_isolates as usize,
                    warm_pool_size: c.warm_pool_size as usize,
                    max_queue: c.max_queue_size as usize,
                    processes: c.processes as usize,
                },
                owner,
            )),
        };
        let dispatcher = Dispatcher::new(&env)?;
        Ok(NativeEngine { backend, memory_mb: c.memory_mb, wasm_modules: Arc::default(), dispatcher })
    }

    /// Registers the WebAssembly modules every run may instantiate: checks them, then
    /// resolves once each is compiled, exactly once per process (here, in an isolate of its
    /// own off the main thread; in process mode, by each host as it starts). Rejects (a
    /// validation error naming the module) if one is refused or does not compile. Await it
    /// before submitting runs that use the modules.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn set_wasm_modules(&self, modules: Vec<WasmModuleJs>) -> Result<AsyncTask<CompileWasm>> {
        let mut out = Vec::with_capacity(modules.len());
        for m in modules {
            check_wasm(&m.name, &m.bytes, self.memory_mb)?;
            out.push((m.name, m.bytes.to_vec()));
        }
        let target = match &self.backend {
            Backend::Threads(_) => Some(self.wasm_modules.clone()),
            Backend::Processes(p) => {
                p.set_wasm_modules(out);
                out = Vec::new();
                None
            }
        };
        Ok(AsyncTask::new(CompileWasm { modules: out, memory_mb: self.memory_mb, target }))
    }

    /// Starts creating the warm pool (thread mode) or the sandbox hosts (process mode) in
    /// the background.
    #[napi]
    pub fn warm_up(&self) {
        match &self.backend {
            Backend::Threads(e) => e.warm_up(),
            Backend::Processes(p) => p.warm_up(),
        }
    }

    /// Resolves once the engine can serve: at once in thread mode; once every sandbox host
    /// has started (or failed to: a replacement follows) in process mode. Rejects with a
    /// validation error when a host refused the configuration (a WebAssembly module that
    /// does not compile there).
    #[napi(ts_return_type = "Promise<void>")]
    pub fn ready(&self) -> AsyncTask<Ready> {
        let engine = match &self.backend {
            Backend::Threads(_) => None,
            Backend::Processes(p) => Some(p.clone()),
        };
        AsyncTask::new(Ready { engine })
    }

    /// Queues a planned run (see `planRun`, `EngineSettings.plan`); its events go to
    /// `on_event`, always later than this call returns (never from inside it).
    #[napi]
    pub fn submit(&self, plan: RunPlanJs, on_event: Function) -> Result<RunHandle> {
        let started_event = plan.started_event.unwrap_or(true);
        let id = NEXT_RUN_ID.fetch_add(1, Ordering::Relaxed);
        let control: Arc<dyn RunControl> = match &self.backend {
            Backend::Threads(engine) => {
                let tenant = Tenant::from(plan.tenant.as_deref());
                let spec = self.spec_of(plan)?;
                let sink = self.dispatcher.register(id, on_event.value().value, started_event)?;
                let run = RunShared::new(id, spec, sink);
                engine.submit(run.clone(), tenant);
                Arc::new(ThreadRun { run, engine: engine.clone() })
            }
            Backend::Processes(engine) => {
                let tenant = Tenant::from(plan.tenant.as_deref());
                let wire = wire_plan_of(plan)?;
                let sink = self.dispatcher.register(id, on_event.value().value, started_event)?;
                engine.submit(id, tenant, wire, sink)
            }
        };
        Ok(RunHandle { run: control })
    }

    #[napi]
    pub fn stats(&self) -> EngineStatsJs {
        let (s, processes) = match &self.backend {
            Backend::Threads(e) => (e.stats(), None),
            Backend::Processes(p) => {
                let st = p.stats();
                let q = st.processes;
                let counts = |m: std::collections::BTreeMap<String, u64>| m.into_iter().map(|(k, v)| (k, v as f64)).collect();
                let processes = SandboxProcessStatsJs {
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
                };
                (st.engine, Some(processes))
            }
        };
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
            processes,
        }
    }

    /// Stops accepting work and aborts everything queued or running.
    #[napi]
    pub fn shutdown(&self) {
        match &self.backend {
            Backend::Threads(e) => e.shutdown(),
            Backend::Processes(p) => p.shutdown(),
        }
    }

    /// Resolves true once every isolate thread (quarantined ones excepted) or sandbox host
    /// of the engine has ended, false after `timeout_ms` (process mode: the hosts left are
    /// then killed).
    #[napi]
    pub fn wait_idle(&self, timeout_ms: u32) -> AsyncTask<WaitIdle> {
        let backend = match &self.backend {
            Backend::Threads(e) => IdleOf::Threads(e.clone()),
            Backend::Processes(p) => IdleOf::Processes(p.clone()),
        };
        AsyncTask::new(WaitIdle { backend, timeout: Duration::from_millis(timeout_ms as u64) })
    }
}

impl NativeEngine {
    /// The plan was made by isolet-core; here it only changes representation.
    fn spec_of(&self, p: RunPlanJs) -> Result<RunSpec> {
        let (mode, limits, bridge) = p.checked_parts()?;
        let mode = match mode {
            ExecMode::Script => Mode::Script,
            ExecMode::AsyncBody => Mode::AsyncBody,
        };
        let wasm_modules = if p.wasm { self.wasm_modules.lock().unwrap_or_else(PoisonError::into_inner).clone() } else { Vec::new() };
        Ok(RunSpec {
            code: p.code,
            mode,
            limits,
            bridge,
            tool_calls: ToolCalls::new(p.max_calls),
            capabilities: p.tools,
            data_object: p.data_object,
            data_values: p.data_values.unwrap_or_default().into_iter().collect(),
            wasm_modules,
            stream_console: p.stream_console,
        })
    }
}

/// The `Run` frame's plan of a checked plan (what a sandbox host submits to its engine).
fn wire_plan_of(plan: RunPlanJs) -> Result<WirePlan> {
    let (mode, limits, bridge) = plan.checked_parts()?;
    Ok(WirePlan {
        code: plan.code,
        mode,
        limits,
        bridge,
        tools: plan.tools,
        max_calls: plan.max_calls,
        data_object: plan.data_object,
        data_values: plan.data_values.unwrap_or_default(),
        wasm: plan.wasm,
        stream_console: plan.stream_console,
        started_event: plan.started_event.unwrap_or(true),
    })
}

pub struct Ready {
    engine: Option<ProcessEngine>,
}

impl Task for Ready {
    type Output = ();
    type JsValue = ();

    fn compute(&mut self) -> Result<()> {
        match &self.engine {
            None => Ok(()),
            Some(p) => p.ready(Duration::from_millis(isolet_core::host_policy::START_TIMEOUT_MS + 5_000)).map_err(validation_error),
        }
    }

    fn resolve(&mut self, _env: Env, _output: ()) -> Result<()> {
        Ok(())
    }
}

enum IdleOf {
    Threads(Engine),
    Processes(ProcessEngine),
}

pub struct WaitIdle {
    backend: IdleOf,
    timeout: Duration,
}

impl Task for WaitIdle {
    type Output = bool;
    type JsValue = bool;

    fn compute(&mut self) -> Result<bool> {
        Ok(match &self.backend {
            IdleOf::Threads(e) => e.wait_idle(self.timeout),
            IdleOf::Processes(p) => p.wait_idle(self.timeout),
        })
    }

    fn resolve(&mut self, _env: Env, output: bool) -> Result<bool> {
        Ok(output)
    }
}

/// What the host side of one run can do, whichever backend runs it.
pub(crate) trait RunControl: Send + Sync {
    fn reply(&self, reply: HostReply);
    fn answer(&self, id: u32, answer: DataAnswer) -> bool;
    fn abort(&self);
    fn id(&self) -> u64;
}

struct ThreadRun {
    run: Arc<RunShared>,
    engine: Engine,
}

impl RunControl for ThreadRun {
    fn reply(&self, reply: HostReply) {
        self.run.push_reply(reply);
    }

    fn answer(&self, id: u32, answer: DataAnswer) -> bool {
        self.run.push_answer(id, answer)
    }

    fn abort(&self) {
        self.engine.abort(&self.run);
    }

    fn id(&self) -> u64 {
        self.run.id
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

    fn id(&self) -> u64 {
        ProcessRun::id(self)
    }
}

/// The host side of one run: answers host calls and data requests, aborts.
#[napi]
pub struct RunHandle {
    run: Arc<dyn RunControl>,
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
    pub fn fulfill_ascii_string(&self, env: &Env, call_id: u32, value: Unknown<'_>, chars: f64, version: u32, max_bytes: f64) -> Result<f64> {
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
        let status = unsafe {
            sys::napi_get_value_string_utf8(raw_env, value.raw(), out.as_mut_ptr().add(head).cast(), n + 1, &mut written)
        };
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

    #[napi(getter)]
    pub fn id(&self) -> f64 {
        self.run.id() as f64
    }
}

/// Large copies start below this: smaller ones fault few pages.
const HUGE_ADVISE_MIN: usize = 4 << 20;
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
    let mut out = Vec::<u8>::with_capacity(capacity);
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
    let status = unsafe {
        sys::napi_get_typedarray_info(raw_env, value.raw(), &mut kind, &mut len, &mut data, &mut arraybuffer, &mut byte_offset)
    };
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
