//! Safe wrappers over the C++ seam (`native/isolet_v8.cc`). Used only by
//! `crate::isolate`; owned by the isolate thread except `IsolateHandle`, which any
//! thread may use to terminate execution.
mod ffi;

use std::ffi::CStr;
use std::os::raw::c_void;
use std::sync::{Arc, Mutex};

use isolet_core::Thrown;

/// What the isolate thread's owner provides to the sandbox: callbacks V8 makes.
pub(crate) trait SandboxHost: Send + Sync {
    /// A platform task was posted (any thread).
    fn wake(&self);
    /// A console entry; returns the bytes the run's log still keeps.
    fn console(&self, level: u32, message: &[u8]) -> usize;
    /// The sandbox called host function `fn_index`; answer later with `fulfill_call`.
    fn host_call(&self, fn_index: u32, call_id: u32, args: &[u8]);
    /// Blocking read of `data[key]`.
    fn data_request(&self, key: &str) -> DataAnswer;
    /// The heap reached its limit (inside a GC): terminate the run from another thread.
    fn heap_limit(&self);
    /// V8 hit a fatal OOM on this isolate's thread. Must never return.
    fn fatal_oom(&self) -> !;
}

pub(crate) enum DataAnswer {
    Value(Vec<u8>),
    Error(String),
    Terminated,
}

/// How code is run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// Classic script: the completion value is the result.
    Script,
    /// Async function body: only `return` gives a result.
    AsyncBody,
}

/// Where a run stands after `run` or `poll`.
#[derive(Debug)]
pub(crate) enum Step {
    Settled,
    Pending,
    Threw(Thrown),
    Syntax(Thrown),
    Terminated,
}

/// The settled result copied out.
#[derive(Debug)]
pub(crate) enum Output {
    Value(Vec<u8>),
    Threw(Thrown),
    TooLarge,
    Terminated,
}

/// Terminates a sandbox's execution from any thread; a no-op once it is disposed.
#[derive(Clone, Default)]
pub(crate) struct IsolateHandle(Arc<Mutex<Option<usize>>>);

impl IsolateHandle {
    pub(crate) fn terminate(&self) -> bool {
        let guard = self.0.lock().unwrap();
        match *guard {
            // SAFETY: the pointer is cleared (under this lock) before the isolate is
            // disposed, so it is live here; TerminateExecution is thread-safe.
            Some(isolate) => unsafe {
                ffi::isolet_isolate_terminate(isolate as *mut c_void);
                true
            },
            None => false,
        }
    }
}

/// Captures Node's platform. `main_uses_node_snapshot`: see `isolet_core::limits::node_snapshot_in_use`.
pub(crate) fn init(main_uses_node_snapshot: bool) -> Result<(), i32> {
    // SAFETY: called on Node's main thread while JS runs (addon load).
    match unsafe { ffi::isolet_v8_init(main_uses_node_snapshot as i32) } {
        0 => Ok(()),
        code => Err(code),
    }
}

/// Sets process-wide V8 flags (before sandboxes compile anything).
pub(crate) fn set_flags(flags: &str) {
    // SAFETY: valid buffer for the call; V8 copies what it needs.
    unsafe { ffi::isolet_v8_set_flags(flags.as_ptr() as *const std::os::raw::c_char, flags.len()) };
}

pub(crate) fn version() -> String {
    // SAFETY: V8 returns a static NUL-terminated string.
    unsafe { CStr::from_ptr(ffi::isolet_v8_version()) }.to_string_lossy().into_owned()
}

/// A WebAssembly module's bytes and, once some isolate compiled it, the compiled code
/// that every later isolate instantiates without compiling again.
pub(crate) struct WasmModule {
    pub bytes: Vec<u8>,
    compiled: Mutex<Option<CompiledWasm>>,
}

impl WasmModule {
    pub(crate) fn new(bytes: Vec<u8>) -> Self {
        WasmModule { bytes, compiled: Mutex::new(None) }
    }
}

struct CompiledWasm(*mut ffi::isolet_wasm_module);

// SAFETY: V8's CompiledWasmModule is a shared_ptr to a process-wide native module, made
// to be instantiated from any isolate and released from any thread.
unsafe impl Send for CompiledWasm {}

impl Drop for CompiledWasm {
    fn drop(&mut self) {
        // SAFETY: owned pointer from the seam, freed once.
        unsafe { ffi::isolet_wasm_module_free(self.0) };
    }
}

/// Memory and copy limits fixed when the isolate is created.
pub(crate) struct SandboxConfig {
    pub heap_limit_bytes: usize,
    pub array_buffer_limit_bytes: usize,
}

/// One V8 isolate with one context. Not `Send`: it lives and dies on its thread.
pub(crate) struct Sandbox {
    raw: *mut ffi::isolet_sandbox,
    handle: IsolateHandle,
    // Kept alive until after dispose: the C++ side holds a pointer to it.
    host: *mut Arc<dyn SandboxHost>,
}

fn host_of<'a>(ctx: *mut c_void) -> &'a Arc<dyn SandboxHost> {
    // SAFETY: ctx is the `host` box of a live Sandbox (callbacks stop before dispose).
    unsafe { &*(ctx as *const Arc<dyn SandboxHost>) }
}

extern "C" fn wake_cb(ctx: *mut c_void) {
    host_of(ctx).wake();
}

extern "C" fn heap_limit_cb(ctx: *mut c_void) {
    host_of(ctx).heap_limit();
}

extern "C" fn fatal_oom_cb(ctx: *mut c_void) {
    host_of(ctx).fatal_oom()
}

extern "C" fn console_cb(ctx: *mut c_void, level: u32, msg: *const u8, len: usize) -> usize {
    // SAFETY: the seam passes a valid buffer for the duration of the call.
    let msg = unsafe { bytes(msg, len) };
    host_of(ctx).console(level, msg)
}

extern "C" fn host_call_cb(ctx: *mut c_void, fn_index: u32, call_id: u32, args: *const u8, len: usize) {
    // SAFETY: as above.
    let args = unsafe { bytes(args, len) };
    host_of(ctx).host_call(fn_index, call_id, args);
}

extern "C" fn data_request_cb(
    ctx: *mut c_void,
    key: *const u8,
    key_len: usize,
    out: *mut ffi::isolet_bytes,
) -> i32 {
    // SAFETY: as above.
    let key = unsafe { bytes(key, key_len) };
    // Only the first bytes of an overlong key are copied: enough for the host to refuse
    // it by length (isolet_core::limits::MAX_DATA_KEY_BYTES), never the whole string.
    let key = String::from_utf8_lossy(&key[..key.len().min(isolet_core::limits::MAX_DATA_KEY_BYTES + 1)]).into_owned();
    let (code, payload) = match host_of(ctx).data_request(&key) {
        DataAnswer::Value(v) => (ffi::ISOLET_OK, v),
        DataAnswer::Error(msg) => (ffi::ISOLET_THREW, msg.into_bytes()),
        DataAnswer::Terminated => (ffi::ISOLET_TERMINATED, Vec::new()),
    };
    // The seam frees `out` with free(), so copy into malloc'd memory.
    // SAFETY: out is a valid pointer from the seam; malloc result checked.
    unsafe {
        let p = libc::malloc(payload.len().max(1)) as *mut u8;
        if p.is_null() {
            return ffi::ISOLET_TERMINATED;
        }
        std::ptr::copy_nonoverlapping(payload.as_ptr(), p, payload.len());
        (*out).ptr = p;
        (*out).len = payload.len();
    }
    code
}

/// # Safety
/// `ptr` must be valid for `len` bytes (or `len == 0`).
unsafe fn bytes<'a>(ptr: *const u8, len: usize) -> &'a [u8] {
    if len == 0 || ptr.is_null() {
        &[]
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

fn take_bytes(b: &mut ffi::isolet_bytes) -> Vec<u8> {
    // SAFETY: the seam filled `b` (or left it null); we copy, then free with its allocator.
    let v = unsafe { bytes(b.ptr, b.len) }.to_vec();
    unsafe { ffi::isolet_bytes_free(b) };
    v
}

fn empty_error() -> ffi::isolet_error {
    let e = || ffi::isolet_bytes { ptr: std::ptr::null_mut(), len: 0 };
    ffi::isolet_error { name: e(), message: e(), stack: e(), line: 0, column: 0 }
}

fn take_error(e: &mut ffi::isolet_error) -> Thrown {
    let text = |b: &mut ffi::isolet_bytes| String::from_utf8_lossy(&take_bytes(b)).into_owned();
    let stack = text(&mut e.stack);
    Thrown {
        name: text(&mut e.name),
        message: text(&mut e.message),
        stack: if stack.is_empty() { None } else { Some(stack) },
        line: (e.line > 0).then_some(e.line as u32),
        column: (e.column > 0).then_some(e.column as u32),
    }
}

impl Sandbox {
    /// Creates the isolate and its context on the calling thread.
    pub(crate) fn new(config: &SandboxConfig, host: Arc<dyn SandboxHost>) -> Option<Sandbox> {
        let host = Box::into_raw(Box::new(host));
        let raw_config = ffi::isolet_sandbox_config {
            ctx: host as *mut c_void,
            wake: wake_cb,
            on_console: console_cb,
            on_host_call: host_call_cb,
            on_data_request: data_request_cb,
            on_heap_limit: heap_limit_cb,
            on_fatal_oom: fatal_oom_cb,
            heap_limit_bytes: config.heap_limit_bytes,
            array_buffer_limit_bytes: config.array_buffer_limit_bytes,
        };
        // SAFETY: config is valid for the call; the seam copies it.
        let raw = unsafe { ffi::isolet_sandbox_new(&raw_config) };
        if raw.is_null() {
            // SAFETY: never handed to a live sandbox.
            drop(unsafe { Box::from_raw(host) });
            return None;
        }
        // SAFETY: raw is a live sandbox.
        let isolate = unsafe { ffi::isolet_sandbox_isolate(raw) } as usize;
        let handle = IsolateHandle(Arc::new(Mutex::new(Some(isolate))));
        Some(Sandbox { raw, handle, host })
    }

    pub(crate) fn handle(&self) -> IsolateHandle {
        self.handle.clone()
    }

    /// Copy caps, and `log_room`: console bytes the run keeps before its first entry.
    pub(crate) fn set_copy_limits(&mut self, max_message_bytes: usize, max_output_bytes: usize, log_room: usize) {
        // SAFETY: live sandbox.
        unsafe { ffi::isolet_sandbox_set_copy_limits(self.raw, max_message_bytes, max_output_bytes, log_room) };
    }

    pub(crate) fn add_host_function(&mut self, name: &str, index: u32) -> bool {
        // SAFETY: live sandbox, valid buffer.
        unsafe { ffi::isolet_sandbox_add_host_function(self.raw, name.as_ptr(), name.len(), index) == 0 }
    }

    /// Installs `globalThis[namespace]`, a frozen null-prototype object whose members
    /// are host functions `(name, index)`. Names must be checked identifiers (no NUL).
    pub(crate) fn add_host_namespace(&mut self, namespace: &str, members: &[(&str, u32)]) -> bool {
        let names = members.iter().map(|(name, _)| *name).collect::<Vec<_>>().join("\0");
        let indices: Vec<u32> = members.iter().map(|(_, index)| *index).collect();
        // SAFETY: live sandbox; `names` holds `members.len()` NUL-separated names and
        // `indices` as many entries, both alive for the call.
        unsafe {
            ffi::isolet_sandbox_add_host_namespace(
                self.raw,
                namespace.as_ptr(),
                namespace.len(),
                names.as_ptr(),
                names.len(),
                indices.as_ptr(),
                indices.len(),
            ) == 0
        }
    }

    pub(crate) fn add_data_object(&mut self, name: &str) -> bool {
        // SAFETY: live sandbox, valid buffer.
        unsafe { ffi::isolet_sandbox_add_data_object(self.raw, name.as_ptr(), name.len()) == 0 }
    }

    /// Instantiates `module` at `globalThis[ns][name]`, compiling it on first use and
    /// sharing the compiled code with every later isolate.
    pub(crate) fn add_wasm_instance(&mut self, ns: &str, name: &str, module: &WasmModule) -> Result<(), Thrown> {
        let mut err = empty_error();
        let mut compiled = module.compiled.lock().unwrap();
        let mut raw = compiled.as_ref().map_or(std::ptr::null_mut(), |c| c.0);
        let bytes = &module.bytes;
        // SAFETY: live sandbox, valid buffers; `raw` is null or a live compiled module.
        let rc = unsafe {
            ffi::isolet_sandbox_add_wasm_instance(
                self.raw, ns.as_ptr(), ns.len(), name.as_ptr(), name.len(), bytes.as_ptr(), bytes.len(), &mut raw, &mut err,
            )
        };
        if compiled.is_none() && !raw.is_null() {
            *compiled = Some(CompiledWasm(raw));
        }
        match rc {
            ffi::ISOLET_OK => Ok(()),
            ffi::ISOLET_THREW => Err(take_error(&mut err)),
            _ => Err(Thrown { name: "Error".into(), message: "could not install the module".into(), ..Default::default() }),
        }
    }

    /// Removes the `WebAssembly` global and its constructors' back links.
    pub(crate) fn seal_wasm(&mut self) -> bool {
        // SAFETY: live sandbox.
        unsafe { ffi::isolet_sandbox_seal_wasm(self.raw) == 0 }
    }

    pub(crate) fn run(&mut self, code: &str, mode: Mode) -> Step {
        let mut err = empty_error();
        let mode = match mode {
            Mode::Script => ffi::ISOLET_MODE_SCRIPT,
            Mode::AsyncBody => ffi::ISOLET_MODE_ASYNC_BODY,
        };
        // SAFETY: live sandbox, valid buffers.
        let rc = unsafe { ffi::isolet_sandbox_run(self.raw, code.as_ptr(), code.len(), mode, &mut err) };
        let step = match rc {
            ffi::ISOLET_OK => Step::Settled,
            ffi::ISOLET_PENDING => Step::Pending,
            ffi::ISOLET_THREW => Step::Threw(take_error(&mut err)),
            ffi::ISOLET_SYNTAX => Step::Syntax(take_error(&mut err)),
            _ => Step::Terminated,
        };
        // SAFETY: frees whatever the seam left in err (idempotent on null fields).
        unsafe { ffi::isolet_error_free(&mut err) };
        step
    }

    pub(crate) fn poll(&mut self) -> Step {
        // SAFETY: live sandbox.
        match unsafe { ffi::isolet_sandbox_poll(self.raw) } {
            ffi::ISOLET_OK => Step::Settled,
            ffi::ISOLET_PENDING => Step::Pending,
            _ => Step::Terminated,
        }
    }

    pub(crate) fn take_result(&mut self) -> Output {
        let mut value = ffi::isolet_bytes { ptr: std::ptr::null_mut(), len: 0 };
        let mut err = empty_error();
        // SAFETY: live sandbox, valid out-pointers.
        let rc = unsafe { ffi::isolet_sandbox_take_result(self.raw, &mut value, &mut err) };
        let out = match rc {
            ffi::ISOLET_OK => Output::Value(take_bytes(&mut value)),
            ffi::ISOLET_THREW => Output::Threw(take_error(&mut err)),
            ffi::ISOLET_TOO_LARGE => Output::TooLarge,
            _ => Output::Terminated,
        };
        // SAFETY: frees leftovers, null-safe.
        unsafe {
            ffi::isolet_bytes_free(&mut value);
            ffi::isolet_error_free(&mut err);
        }
        out
    }

    /// Runs due platform tasks; returns ms until the next delayed one.
    pub(crate) fn run_tasks(&mut self) -> Option<u64> {
        // SAFETY: live sandbox.
        let next = unsafe { ffi::isolet_sandbox_run_tasks(self.raw) };
        (next >= 0).then_some(next as u64)
    }

    pub(crate) fn fulfill_call(&mut self, call_id: u32, value: &[u8]) {
        // SAFETY: live sandbox, valid buffer.
        unsafe { ffi::isolet_sandbox_fulfill_call(self.raw, call_id, value.as_ptr(), value.len()) };
    }

    pub(crate) fn reject_call(&mut self, call_id: u32, name: &str, message: &str) {
        // SAFETY: live sandbox, valid buffers.
        unsafe {
            ffi::isolet_sandbox_reject_call(self.raw, call_id, name.as_ptr(), name.len(), message.as_ptr(), message.len())
        };
    }

    /// (used, peak) heap bytes.
    pub(crate) fn heap(&mut self) -> (usize, usize) {
        let (mut used, mut peak) = (0, 0);
        // SAFETY: live sandbox, valid out-pointers.
        unsafe { ffi::isolet_sandbox_heap(self.raw, &mut used, &mut peak) };
        (used, peak)
    }

    pub(crate) fn hit_memory_limit(&self) -> bool {
        // SAFETY: live sandbox.
        unsafe { ffi::isolet_sandbox_hit_memory_limit(self.raw) != 0 }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // Clear the handle first so no thread terminates a disposed isolate.
        *self.handle.0.lock().unwrap() = None;
        // SAFETY: raw is live and owned; after dispose the seam makes no more callbacks,
        // so the host box can be freed.
        unsafe {
            ffi::isolet_sandbox_dispose(self.raw);
            drop(Box::from_raw(self.host));
        }
    }
}
