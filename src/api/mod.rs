//! The JS-facing layer: the only module that imports `napi`. It converts JS values to
//! checked Rust types, hands runs to the engine, and turns run events into JS calls.
//! The public API (`runSandbox`, `SandboxEngine`, error classes) is finished in
//! `lib/*.js` on top of these bindings.
mod diagnostics;
mod engine;
mod events;
mod lockdown;

use napi::bindgen_prelude::*;
use napi_derive::napi;

/// Invalid input from JS. The JS layer turns every error thrown by a binding into a
/// `SandboxValidationError` carrying this message.
pub(crate) fn validation_error(message: impl Into<String>) -> Error {
    Error::new(Status::InvalidArg, message.into())
}

#[napi(object)]
pub struct NativeInfo {
    pub v8_version: String,
    /// `process.versions.modules` of the Node the addon was built for.
    pub node_abi: String,
    pub node_version: String,
}

/// Captures Node's V8 platform; must be called once, on the main thread, at load.
#[napi]
pub fn init(env: Env) -> Result<NativeInfo> {
    let process: Object = env.get_global()?.get_named_property("process")?;
    let exec_argv: Vec<String> = process.get_named_property("execArgv")?;
    let node_options = std::env::var("NODE_OPTIONS").unwrap_or_default();
    let node_snapshot = isolet_core::limits::node_snapshot_in_use(&exec_argv, &node_options);
    crate::v8::init(node_snapshot).map_err(|code| {
        Error::from_reason(format!("isolet: could not capture Node's V8 platform (code {code})"))
    })?;
    crate::limits::apply_v8_flags();
    // Before Node disposes V8 at exit, stop every isolate thread.
    let owner = env.raw() as usize;
    env.add_env_cleanup_hook((), move |_| crate::engine::shutdown_all(owner, std::time::Duration::from_secs(2)))?;
    Ok(NativeInfo {
        v8_version: crate::v8::version(),
        node_abi: env!("ISOLET_NODE_ABI").to_string(),
        node_version: env!("ISOLET_NODE_VERSION").to_string(),
    })
}

#[napi(object)]
pub struct ProcessStats {
    /// Isolate threads alive in this process (warm, running and quarantined).
    pub live_threads: u32,
    /// Threads that ignored termination and still run at idle priority (or are parked
    /// after a fatal V8 OOM); drops again when such a thread finishes on its own.
    pub quarantined_threads: u32,
}

#[napi]
pub fn process_stats() -> ProcessStats {
    ProcessStats {
        live_threads: crate::isolate::thread::live_threads() as u32,
        quarantined_threads: crate::limits::quarantine::quarantined() as u32,
    }
}

/// Records the code the process is exiting with (from `process.on('exit')`), used if
/// quarantined threads force isolet to end the process before V8's teardown.
#[napi]
pub fn note_exit_code(code: i32) {
    crate::limits::quarantine::set_exit_code(code);
}

/// The limit defaults of `crates/isolet-core`, so JS states each one only once.
#[napi(object)]
pub struct DefaultsJs {
    pub run_memory_mb: u32,
    pub engine_memory_mb: u32,
    pub wall_time_ms: u32,
    pub max_message_bytes: u32,
    pub max_messages: u32,
    pub max_output_bytes: u32,
    pub max_log_entries: u32,
    pub max_log_bytes: u32,
    pub max_pending_host_call_bytes: f64,
    pub max_pending_host_calls: u32,
    pub max_data_key_bytes: u32,
}

#[napi]
pub fn defaults() -> DefaultsJs {
    use isolet_core::limits::{DEFAULT_ENGINE_MEMORY_MB, DEFAULT_RUN_MEMORY_MB, DEFAULT_WALL_TIME_MS};
    let bridge = isolet_core::BridgeLimits::default();
    DefaultsJs {
        run_memory_mb: DEFAULT_RUN_MEMORY_MB,
        engine_memory_mb: DEFAULT_ENGINE_MEMORY_MB,
        wall_time_ms: DEFAULT_WALL_TIME_MS as u32,
        max_message_bytes: bridge.max_message_bytes as u32,
        max_messages: bridge.max_messages,
        max_output_bytes: bridge.max_output_bytes as u32,
        max_log_entries: bridge.max_log_entries as u32,
        max_log_bytes: bridge.max_log_bytes as u32,
        max_pending_host_call_bytes: bridge.max_pending_host_call_bytes as f64,
        max_pending_host_calls: bridge.max_pending_host_calls,
        max_data_key_bytes: isolet_core::limits::MAX_DATA_KEY_BYTES as u32,
    }
}
