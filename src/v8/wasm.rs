//! WebAssembly modules compiled once per engine (in an isolate of their own), then
//! instantiated in each run that asks for them.
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use isolet_core::Thrown;

use super::values::{empty_error, take_error};
use super::{ffi, DataAnswer, Refusal, Sandbox, SandboxConfig, SandboxHost};

/// WebAssembly compilations this process has made (each `WasmModule::compile`).
pub(super) static WASM_COMPILATIONS: AtomicU64 = AtomicU64::new(0);

pub(crate) fn wasm_compilations() -> u64 {
    WASM_COMPILATIONS.load(Ordering::Relaxed)
}

/// A compiled WebAssembly module: every isolate of the process instantiates this same
/// code without compiling again (V8 shares the native module between isolates).
pub(crate) struct WasmModule(pub(super) *mut ffi::isolet_wasm_module);

/// An engine's compiled WebAssembly modules, by the name the sandbox sees.
pub(crate) type WasmModules = Vec<(String, Arc<WasmModule>)>;

// SAFETY: V8's CompiledWasmModule is a shared_ptr to a process-wide native module, made
// to be instantiated from any isolate and released from any thread; the seam only
// reads it (copies the shared_ptr) when instantiating.
unsafe impl Send for WasmModule {}

unsafe impl Sync for WasmModule {}

impl Drop for WasmModule {
    fn drop(&mut self) {
        // SAFETY: owned pointer from the seam, freed once.
        unsafe { ffi::isolet_wasm_module_free(self.0) };
    }
}

impl WasmModule {
    /// Compiles each `(name, bytes)` once, in a throwaway isolate on the calling thread
    /// (never Node's own). The error names the module that did not compile.
    // Once per engine, off Node's thread: a large error costs nothing here.
    #[allow(clippy::result_large_err)]
    pub(crate) fn compile_all(modules: &[(String, Vec<u8>)], heap_limit_bytes: usize) -> Result<WasmModules, (String, Thrown)> {
        if modules.is_empty() {
            return Ok(Vec::new());
        }
        let config = SandboxConfig { heap_limit_bytes, array_buffer_limit_bytes: heap_limit_bytes };
        let internal =
            |name: &str, message: &str| (name.to_string(), Thrown { name: "Error".into(), message: message.into(), ..Default::default() });
        let Some(sandbox) = Sandbox::new(&config, Arc::new(CompileHost)) else {
            return Err(internal(&modules[0].0, "no V8 isolate could be created to compile it"));
        };
        let mut out = Vec::with_capacity(modules.len());
        for (name, bytes) in modules {
            let mut raw = std::ptr::null_mut();
            let mut err = empty_error();
            WASM_COMPILATIONS.fetch_add(1, Ordering::Relaxed);
            // SAFETY: live sandbox, valid buffers and out-pointers.
            let rc = unsafe { ffi::isolet_wasm_compile(sandbox.raw, bytes.as_ptr(), bytes.len(), &mut raw, &mut err) };
            let result = match rc {
                ffi::ISOLET_OK if !raw.is_null() => Ok(WasmModule(raw)),
                ffi::ISOLET_THREW => Err((name.clone(), take_error(&mut err))),
                _ => Err(internal(name, "V8 could not compile it")),
            };
            // SAFETY: frees what the seam left in err (null-safe).
            unsafe { ffi::isolet_error_free(&mut err) };
            out.push((name.clone(), Arc::new(result?)));
        }
        sandbox.dispose_now();
        Ok(out)
    }
}

/// The host of the isolate that compiles WebAssembly: it runs no code, so nothing calls
/// back but V8's own tasks and memory reports.
pub(super) struct CompileHost;

impl SandboxHost for CompileHost {
    fn wake(&self) {}
    fn host_call(&self, _: u32, _: u32, _: &[u8]) -> Result<(), Refusal> {
        Err(Refusal { name: "Error", message: "unknown host function".into() })
    }
    fn data_request(&self, _: &str) -> DataAnswer {
        DataAnswer::Terminated
    }
    fn heap_limit(&self) {}
    fn fatal_oom(&self, _held_bytes: usize) -> ! {
        // Returning would let V8 abort the process; this thread holds nothing else.
        loop {
            std::thread::park();
        }
    }
}
