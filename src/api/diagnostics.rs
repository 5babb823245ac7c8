//! Counters that let tests (and operators) check what the process did, not only what
//! it answered.
use napi_derive::napi;

/// WebAssembly compilations this process has made. Each module given to
/// `setWasmModules` is compiled once, whatever the number of isolates and runs.
#[napi]
pub fn wasm_compilations() -> f64 {
    crate::v8::wasm_compilations() as f64
}
