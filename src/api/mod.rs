//! The JS-facing layer: the only module that imports `napi`. It converts JS values to
//! checked Rust types, hands runs to the engine, and turns run events into JS calls.
//! The public API (`runSandbox`, `SandboxEngine`, error classes) is finished in
//! `lib/*.js` on top of these bindings.
mod copies;
mod diagnostics;
mod engine;
mod entry_options;
mod events;
mod keys;
mod lockdown;
mod options;
mod sandbox;
mod sandbox_host;
mod values;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use isolet_core::{ErrorKind, OptionsError};

/// An error of `kind` thrown by a binding (a `Result<T, String>` binding): `err.code`
/// in JS is its `ERR_ISOLET_*` code, so `lib/errors.js` gives it the class of its kind.
pub(crate) fn kind_error(kind: ErrorKind, message: impl Into<String>) -> Error<String> {
    Error::new(kind.code().to_string(), message.into())
}

/// A bad option, named as the user wrote it.
pub(crate) fn options_error(e: OptionsError) -> Error<String> {
    kind_error(ErrorKind::Validation, e.message)
}

/// `check`'s result once the old option spellings it met are emitted as Node
/// `DeprecationWarning`s (each once per process, as isolet-core decides): every binding
/// that checks user options goes through here.
pub(crate) fn checked<T>(env: &Env, check: impl FnOnce() -> std::result::Result<T, OptionsError>) -> std::result::Result<T, Error<String>> {
    let result = check();
    for message in isolet_core::options::take_deprecations() {
        emit_deprecation(env, message).map_err(internal_error)?;
    }
    result.map_err(options_error)
}

fn emit_deprecation(env: &Env, message: String) -> Result<()> {
    let process: Object = env.get_global()?.get_named_property("process")?;
    let emit: Function<FnArgs<(String, &str, &str)>, Unknown> = process.get_named_property("emitWarning")?;
    emit.apply(process, FnArgs::from((message, "DeprecationWarning", isolet_core::options::DEPRECATED_NAME_CODE)))?;
    Ok(())
}

/// A failure of napi itself while reading a value (not the user's input).
pub(crate) fn internal_error(e: Error) -> Error<String> {
    kind_error(ErrorKind::Internal, e.reason.clone())
}

/// Invalid input from JS, thrown with napi's `InvalidArg` status (which `lib/errors.js`
/// maps to `SandboxValidationError`, like napi's own argument type errors).
pub(crate) fn validation_error(message: impl Into<String>) -> Error {
    Error::new(Status::InvalidArg, message.into())
}

/// One error kind: its name in isolet-core, its stable code and its JS class.
#[napi(object)]
pub struct ErrorKindJs {
    pub kind: String,
    pub code: String,
    pub class_name: String,
}

/// The table of error kinds -> codes -> classes that `lib/errors.js` builds on.
#[napi]
pub fn error_kinds() -> Vec<ErrorKindJs> {
    ErrorKind::ALL
        .iter()
        .map(|k| ErrorKindJs { kind: k.name().to_string(), code: k.code().to_string(), class_name: k.class_name().to_string() })
        .collect()
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
    crate::v8::init(node_snapshot)
        .map_err(|code| Error::from_reason(format!("isolet: could not capture Node's V8 platform (code {code})")))?;
    crate::limits::apply_v8_flags();
    // Before Node disposes V8 at exit, stop every isolate thread.
    let owner = env.raw() as usize;
    env.add_env_cleanup_hook((), move |_| {
        crate::engine::shutdown_all(owner, std::time::Duration::from_secs(2));
        events::close_all_on_this_thread();
        keys::forget(owner as napi::sys::napi_env);
    })?;
    if crate::limits::quarantine::on_main_thread() {
        crate::limits::quarantine::set_main_guarded();
    }
    Ok(NativeInfo {
        v8_version: crate::v8::version(),
        node_abi: env!("ISOLET_NODE_ABI").to_string(),
        node_version: env!("ISOLET_NODE_VERSION").to_string(),
    })
}

/// Whether isolet is loaded on the process's main thread too (see
/// `quarantine::main_guarded`); lib/native.js loads it there when a Worker loads it first.
#[napi]
pub fn main_thread_guarded() -> bool {
    crate::limits::quarantine::main_guarded()
}

#[napi(object)]
pub struct ProcessStats {
    /// Isolate threads alive in this process (warm, running and quarantined).
    pub live_threads: u32,
    /// Threads that ignored termination and still run at the lowest priority (or are parked
    /// after a fatal V8 OOM); drops again when such a thread finishes on its own.
    pub quarantined_threads: u32,
    /// Sandbox host processes alive, over all engines of this process.
    pub sandbox_processes: u32,
    /// Of `quarantined_threads`, those parked after a fatal V8 out-of-memory (thread
    /// isolation): they never run again, and their isolates stay in this process.
    pub parked_threads: u32,
    /// What those parked threads' isolates hold, in bytes (heap at its limit with the
    /// headroom granted, and ArrayBuffers).
    pub parked_bytes: f64,
    /// Past this (`ISOLET_MAX_PARKED_MB`, default 512 MB) new runs are refused with
    /// `ERR_ISOLET_OVERLOADED`, naming the bound and process isolation.
    pub max_parked_bytes: f64,
}

#[napi]
pub fn process_stats() -> ProcessStats {
    ProcessStats {
        live_threads: crate::isolate::thread::live_threads() as u32,
        quarantined_threads: crate::limits::quarantine::quarantined() as u32,
        sandbox_processes: crate::engine::live_hosts() as u32,
        parked_threads: crate::limits::quarantine::parked().0 as u32,
        parked_bytes: crate::limits::quarantine::parked().1 as f64,
        max_parked_bytes: crate::limits::quarantine::max_parked_bytes() as f64,
    }
}

/// Called from `process.on('exit')`: records the code the process is exiting with (used
/// if quarantined threads force isolet to end the process before V8's teardown), and stops
/// this environment's engines, as `process.exit()` runs no environment cleanup hooks.
#[napi]
pub fn note_exit(env: Env, code: i32) {
    crate::limits::quarantine::set_exit_code(code);
    crate::engine::stop_all(env.raw() as usize, std::time::Duration::from_secs(2));
    events::close_all_on_this_thread();
}

/// Defaults of the public options, from isolet-core's tables, for the exported
/// constants (`RUN_SANDBOX_DEFAULTS`, `DEFAULT_ISOLATE_LIMITS`, ...). Read once at load;
/// runs never carry defaults from JS.
#[napi(object)]
pub struct OptionDefaultsJs {
    /// `runSandbox`: `memoryLimitMb`, `timeoutMs`.
    pub run_sandbox: std::collections::HashMap<String, f64>,
    /// `SandboxEngine` `memoryMb`.
    pub engine_memory_mb: u32,
    /// `defaultIsolateLimits` / `isolateLimits`, with `memoryMb` the engine's default.
    pub isolate_limits: std::collections::HashMap<String, f64>,
    /// `defaultBridgeLimits` / `bridgeLimits`.
    pub bridge_limits: std::collections::HashMap<String, f64>,
    /// `isolation` of runSandbox and SandboxEngine when none is given.
    pub isolation: String,
}

#[napi]
pub fn option_defaults() -> OptionDefaultsJs {
    use isolet_core::options::{Opt, BRIDGE_LIMITS, ENGINE_CONFIG, ISOLATE_LIMITS, RUN_SANDBOX};
    let of = |table: &[Opt], names: &[&str]| -> std::collections::HashMap<String, f64> {
        table.iter().filter(|o| names.contains(&o.name)).filter_map(|o| Some((o.name.to_string(), o.default? as f64))).collect()
    };
    let engine_memory = ENGINE_CONFIG.iter().find(|o| o.name == "memoryLimitMb").and_then(|o| o.default).expect("a default engine memory");
    let mut isolate_limits = of(ISOLATE_LIMITS, &["cpuTimeMs", "wallTimeMs"]);
    isolate_limits.insert("memoryMb".into(), engine_memory as f64);
    OptionDefaultsJs {
        run_sandbox: of(RUN_SANDBOX, &["memoryLimitMb", "timeoutMs"]),
        engine_memory_mb: engine_memory as u32,
        isolate_limits,
        bridge_limits: of(BRIDGE_LIMITS, &BRIDGE_LIMITS.iter().map(|o| o.name).collect::<Vec<_>>()),
        isolation: isolet_core::options::DEFAULT_ISOLATION.as_str().to_string(),
    }
}
