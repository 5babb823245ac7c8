//! `NativeEngine` and `RunHandle`: the bindings `lib/engine.js` and
//! `lib/run-sandbox.js` build on.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use isolet_core::limits::{self, DEFAULT_ENGINE_MEMORY_MB, MAX_MEMORY_MB, MIN_MEMORY_MB};
use isolet_core::{check_capability_names, check_global_name, BridgeLimits, IsolateLimits, RawBridgeLimits};

use super::events::{EventFn, JsSink, RunEventJs};
use super::validation_error;
use crate::engine::{Engine, EngineConfig};
use crate::isolate::{HostReply, RunShared, RunSpec};
use crate::v8::{DataAnswer, Mode, WasmModule};

static NEXT_RUN_ID: AtomicU64 = AtomicU64::new(1);

#[napi(object)]
pub struct EngineOptions {
    /// Memory of warm isolates in MB (default 128).
    pub memory_mb: Option<f64>,
    /// Runs executing at once (default 4).
    pub max_concurrent_isolates: Option<f64>,
    /// Isolates created ahead of time (default 0).
    pub warm_pool_size: Option<f64>,
    /// Runs allowed to wait for a slot (default 1000).
    pub max_queue_size: Option<f64>,
}

#[napi(object)]
pub struct WasmModuleJs {
    pub name: String,
    pub bytes: Buffer,
}

#[napi(object)]
pub struct RunRequest {
    pub code: String,
    /// `script` (completion value) or `asyncBody` (only `return` gives output).
    pub mode: String,
    pub memory_mb: Option<f64>,
    pub timeout_ms: Option<f64>,
    pub cpu_time_ms: Option<f64>,
    pub max_message_bytes: Option<f64>,
    pub max_messages: Option<f64>,
    pub max_output_bytes: Option<f64>,
    pub max_log_entries: Option<f64>,
    pub max_log_bytes: Option<f64>,
    /// Bytes of host-call arguments and replies in flight at once (default 64 MiB).
    pub max_pending_host_call_bytes: Option<f64>,
    /// Host calls in flight at once (default 128).
    pub max_pending_host_calls: Option<f64>,
    /// Global names of host functions; calls arrive as `hostCall` events.
    pub capabilities: Option<Vec<String>>,
    /// Install the read-only `data` object; reads arrive as `dataRequest` events.
    pub data_object: Option<bool>,
    /// `data` values given up front (serialized); reading them needs no round trip.
    pub data_values: Option<std::collections::HashMap<String, Buffer>>,
    /// Instantiate the engine's WebAssembly modules (see `setWasmModules`).
    pub wasm: Option<bool>,
    /// Also send each console entry as a `console` event.
    pub stream_console: Option<bool>,
    /// Send the `started` event (default true). Callers that ignore it turn it off:
    /// it costs a wake-up of Node's thread in the middle of every run.
    pub started_event: Option<bool>,
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

/// An optional engine option: the default when absent, else a checked whole number.
fn whole(name: &'static str, v: Option<f64>, default: usize, min: usize, max: usize) -> Result<usize> {
    v.map_or(Ok(default), |v| {
        limits::whole(name, v, min as u64, max as u64).map(|n| n as usize).map_err(|e| validation_error(e.to_string()))
    })
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
    #[napi(constructor)]
    pub fn new(env: Env, options: EngineOptions) -> Result<Self> {
        let memory_mb = whole("memoryMb", options.memory_mb, DEFAULT_ENGINE_MEMORY_MB as usize, MIN_MEMORY_MB as usize, MAX_MEMORY_MB as usize)? as u32;
        let config = EngineConfig {
            memory_mb,
            max_concurrent: whole("maxConcurrentIsolates", options.max_concurrent_isolates, 4, 1, 1024)?,
            warm_pool_size: whole("warmPoolSize", options.warm_pool_size, 0, 0, 256)?,
            max_queue: whole("maxQueueSize", options.max_queue_size, 1000, 0, 1_000_000)?,
        };
        Ok(NativeEngine { engine: Engine::new(config, env.raw() as usize), memory_mb, wasm_modules: Arc::default() })
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

    /// Queues a run; its events go to `on_event`. Validation errors throw synchronously.
    #[napi]
    pub fn submit(&self, request: RunRequest, on_event: Function<RunEventJs, ()>) -> Result<RunHandle> {
        let started_event = request.started_event.unwrap_or(true);
        let spec = self.spec_of(request)?;
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
            failed: s.failed.into_iter().map(|(k, v)| (k.class_name().to_string(), v as f64)).collect(),
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
    fn spec_of(&self, r: RunRequest) -> Result<RunSpec> {
        let mode = match r.mode.as_str() {
            "script" => Mode::Script,
            "asyncBody" => Mode::AsyncBody,
            other => return Err(validation_error(format!("unknown mode `{other}`"))),
        };
        let base = IsolateLimits::with_memory(self.memory_mb);
        let limits = IsolateLimits::from_raw(base, r.memory_mb, r.timeout_ms, r.cpu_time_ms)
            .map_err(|e| validation_error(e.to_string()))?;
        let raw = RawBridgeLimits {
            max_message_bytes: r.max_message_bytes,
            max_messages: r.max_messages,
            max_output_bytes: r.max_output_bytes,
            max_log_entries: r.max_log_entries,
            max_log_bytes: r.max_log_bytes,
            max_pending_host_call_bytes: r.max_pending_host_call_bytes,
            max_pending_host_calls: r.max_pending_host_calls,
        };
        let bridge = BridgeLimits::from_raw(BridgeLimits::default(), raw).map_err(|e| validation_error(e.to_string()))?;
        let capabilities = r.capabilities.unwrap_or_default();
        check_capability_names(&capabilities).map_err(|e| validation_error(format!("capability name: {e}")))?;
        let wasm_modules = if r.wasm.unwrap_or(false) { self.wasm_modules.lock().unwrap_or_else(PoisonError::into_inner).clone() } else { Vec::new() };
        Ok(RunSpec {
            code: r.code,
            mode,
            limits,
            bridge,
            capabilities,
            data_object: r.data_object.unwrap_or(false),
            data_values: r
                .data_values
                .unwrap_or_default()
                .into_iter()
                .map(|(k, v)| (k, v.to_vec()))
                .collect(),
            wasm_modules,
            stream_console: r.stream_console.unwrap_or(false),
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
