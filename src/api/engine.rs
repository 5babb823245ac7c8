//! `NativeEngine` and `RunHandle`: the bindings `lib/engine.js` and
//! `lib/run-sandbox.js` build on.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use isolet_core::{check_global_name, BridgeLimits, EngineConfig, ExecMode, IsolateLimits, RunPlan, ToolCalls};

use super::events::{EventFn, JsSink, RunEventJs};
use super::options::raw_of;
use super::{options_error, validation_error};
use crate::engine::{Engine, EngineConfig as PoolConfig};
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
    pub fn plan(&self, request: Unknown) -> Result<RunPlanJs, String> {
        let raw = raw_of(&request, 0).map_err(super::internal_error)?;
        Ok(self.config.plan(&raw).map_err(options_error)?.into())
    }
}

/// Checks `runSandbox(code, options)` (with `capabilities` as the capability names) and
/// returns the run's plan.
#[napi]
pub fn plan_run(code: Unknown, options: Unknown) -> Result<RunPlanJs, String> {
    let code = raw_of(&code, 0).map_err(super::internal_error)?;
    let options = raw_of(&options, 0).map_err(super::internal_error)?;
    Ok(isolet_core::options::run_sandbox(&code, &options).map_err(options_error)?.into())
}

/// A checked run, as produced by `planRun` or `EngineSettings.plan`: what `submit` takes
/// (and what travels to a sandbox host process). Every value is filled in; JS reads the
/// limits it needs (time, memory, message size) from here, never from defaults of its own.
#[napi(object)]
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
    /// Host functions installed in the sandbox (only these are visible), in order.
    pub tools: Vec<String>,
    /// Per tool (same order), its `maxCallsPerTool`, or null.
    pub max_calls: Vec<Option<u32>>,
    pub data_object: bool,
    /// `data` values given up front (serialized); reading them needs no round trip.
    /// Checked by the plan but not copied into it: JS sets the same buffers here.
    pub data_values: Option<std::collections::HashMap<String, Buffer>>,
    /// Instantiate the engine's WebAssembly modules (see `setWasmModules`).
    pub wasm: bool,
    /// Also send each console entry as a `console` event.
    pub stream_console: bool,
    /// Send the `started` event (default true). Callers that ignore it turn it off:
    /// it costs a wake-up of Node's thread in the middle of every run.
    pub started_event: Option<bool>,
}

impl From<RunPlan> for RunPlanJs {
    fn from(p: RunPlan) -> Self {
        let (l, b) = (p.limits, p.bridge);
        RunPlanJs {
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
            tools: p.tools,
            max_calls: p.max_calls,
            data_object: p.data_object,
            data_values: None,
            wasm: p.wasm,
            stream_console: p.stream_console,
            started_event: None,
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
    target: Arc<Mutex<Vec<(String, Arc<WasmModule>)>>>,
}

impl Task for CompileWasm {
    type Output = ();
    type JsValue = ();

    fn compute(&mut self) -> Result<()> {
        let heap_limit = self.memory_mb as usize * 1024 * 1024;
        let compiled = WasmModule::compile_all(&self.modules, heap_limit)
            .map_err(|(name, thrown)| validation_error(format!("wasm module \"{name}\" is invalid: {}", thrown.message)))?;
        *self.target.lock().unwrap_or_else(PoisonError::into_inner) = compiled;
        Ok(())
    }

    fn resolve(&mut self, _env: Env, _output: ()) -> Result<()> {
        Ok(())
    }
}

#[napi]
pub struct NativeEngine {
    engine: Engine,
    memory_mb: u32,
    /// Compiled by `set_wasm_modules`; read by every run that asks for them.
    wasm_modules: Arc<Mutex<Vec<(String, Arc<WasmModule>)>>>,
}

#[napi]
impl NativeEngine {
    /// An engine of isolate threads in this process, sized by checked settings.
    #[napi(constructor)]
    pub fn new(env: Env, settings: &EngineSettings) -> Self {
        let c = &settings.config;
        let config = PoolConfig {
            memory_mb: c.memory_mb,
            max_concurrent: c.max_concurrent_isolates as usize,
            warm_pool_size: c.warm_pool_size as usize,
            max_queue: c.max_queue_size as usize,
        };
        NativeEngine { engine: Engine::new(config, env.raw() as usize), memory_mb: c.memory_mb, wasm_modules: Arc::default() }
    }

    /// Registers the WebAssembly modules every run may instantiate: checks them, then
    /// resolves once each is compiled, exactly once, in an isolate of its own off the
    /// main thread; every run instantiates that compiled code. Rejects (a validation
    /// error naming the module) if one is refused or does not compile. Await it before
    /// submitting runs that use the modules.
    #[napi(ts_return_type = "Promise<void>")]
    pub fn set_wasm_modules(&self, modules: Vec<WasmModuleJs>) -> Result<AsyncTask<CompileWasm>> {
        let mut out = Vec::with_capacity(modules.len());
        for m in modules {
            check_wasm(&m.name, &m.bytes, self.memory_mb)?;
            out.push((m.name, m.bytes.to_vec()));
        }
        Ok(AsyncTask::new(CompileWasm { modules: out, memory_mb: self.memory_mb, target: self.wasm_modules.clone() }))
    }

    /// Starts creating the warm pool in the background.
    #[napi]
    pub fn warm_up(&self) {
        self.engine.warm_up();
    }

    /// Queues a planned run (see `planRun`, `EngineSettings.plan`); its events go to
    /// `on_event`.
    #[napi]
    pub fn submit(&self, plan: RunPlanJs, on_event: Function<RunEventJs, ()>) -> Result<RunHandle> {
        let started_event = plan.started_event.unwrap_or(true);
        let spec = self.spec_of(plan)?;
        let callback: EventFn = on_event
            .build_threadsafe_function::<RunEventJs>()
            .callee_handled::<false>()
            .build()?;
        let id = NEXT_RUN_ID.fetch_add(1, Ordering::SeqCst);
        let run = RunShared::new(id, spec, Arc::new(JsSink::new(callback, started_event)));
        self.engine.submit(run.clone());
        Ok(RunHandle { run, engine: self.engine.clone() })
    }

    #[napi]
    pub fn stats(&self) -> EngineStatsJs {
        let s = self.engine.stats();
        EngineStatsJs {
            warm: s.warm as u32,
            warming: s.warming as u32,
            busy: s.busy as u32,
            queued: s.queued as u32,
            completed: s.completed as f64,
            // By class, as the seed counts them: the kinds that share `SandboxError` add up.
            failed: s.failed.into_iter().fold(std::collections::HashMap::new(), |mut by_class, (k, v)| {
                *by_class.entry(k.class_name().to_string()).or_insert(0.0) += v as f64;
                by_class
            }),
            warm_starts: s.warm_starts as f64,
            cold_starts: s.cold_starts as f64,
            threads: s.threads as u32,
            quarantined: s.quarantined as u32,
        }
    }

    /// Stops accepting work and aborts everything queued or running.
    #[napi]
    pub fn shutdown(&self) {
        self.engine.shutdown();
    }

    /// Resolves true once every isolate thread of the engine has ended (quarantined
    /// threads excepted), false after `timeout_ms`.
    #[napi]
    pub fn wait_idle(&self, timeout_ms: u32) -> AsyncTask<WaitIdle> {
        AsyncTask::new(WaitIdle { engine: self.engine.clone(), timeout: Duration::from_millis(timeout_ms as u64) })
    }
}

impl NativeEngine {
    /// The pool and compiled WebAssembly modules, for a sandbox host's run channel
    /// (`host_channel.rs`), which submits runs without going through JS.
    pub(super) fn channel_parts(&self) -> (Engine, Vec<(String, Arc<WasmModule>)>) {
        (self.engine.clone(), self.wasm_modules.lock().unwrap_or_else(PoisonError::into_inner).clone())
    }

    /// The plan was made by isolet-core; here it only changes representation.
    fn spec_of(&self, p: RunPlanJs) -> Result<RunSpec> {
        let mode = match p.mode.as_str() {
            "script" => Mode::Script,
            "asyncBody" => Mode::AsyncBody,
            other => return Err(validation_error(format!("unknown mode `{other}`"))),
        };
        if p.max_calls.len() != p.tools.len() {
            return Err(validation_error("a run plan needs one maxCalls entry per tool"));
        }
        let limits = IsolateLimits { memory_mb: p.memory_mb, wall_time_ms: p.wall_time_ms as u64, cpu_time_ms: p.cpu_time_ms.map(|v| v as u64) };
        let bridge = BridgeLimits {
            max_message_bytes: p.max_message_bytes as usize,
            max_messages: p.max_messages,
            max_output_bytes: p.max_output_bytes as usize,
            max_log_entries: p.max_log_entries as usize,
            max_log_bytes: p.max_log_bytes as usize,
            max_pending_host_call_bytes: p.max_pending_host_call_bytes as usize,
            max_pending_host_calls: p.max_pending_host_calls,
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
            data_values: p.data_values.unwrap_or_default().into_iter().map(|(k, v)| (k, v.to_vec())).collect(),
            wasm_modules,
            stream_console: p.stream_console,
        })
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
    run: Arc<RunShared>,
    engine: Engine,
}

#[napi]
impl RunHandle {
    /// Fulfils host call `call_id` with a serialized value.
    #[napi]
    pub fn fulfill(&self, call_id: u32, value: Buffer) {
        self.run.push_reply(HostReply::Fulfill { call_id, value: value.to_vec() });
    }

    /// Rejects host call `call_id`; the sandbox sees a fresh Error with this name and message.
    #[napi]
    pub fn reject(&self, call_id: u32, name: String, message: String) {
        self.run.push_reply(HostReply::Reject { call_id, name, message });
    }

    /// Answers data request `id` with a serialized value, or with an error message.
    /// Returns false if no such request is waiting.
    #[napi]
    pub fn answer(&self, id: u32, value: Option<Buffer>, error: Option<String>) -> bool {
        let answer = match (value, error) {
            (_, Some(message)) => DataAnswer::Error(message),
            (Some(v), None) => DataAnswer::Value(v.to_vec()),
            (None, None) => DataAnswer::Error("data request answered without a value".into()),
        };
        self.run.push_answer(id, answer)
    }

    #[napi]
    pub fn abort(&self) {
        self.engine.abort(&self.run);
    }

    #[napi(getter)]
    pub fn id(&self) -> f64 {
        self.run.id as f64
    }
}
