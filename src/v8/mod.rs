//! Safe wrappers over the C++ seam (`native/isolet_v8.cc`). Used only by
//! `crate::isolate`; owned by the isolate thread except `IsolateHandle`, which any
//! thread may use to terminate execution.
mod ffi;

mod callbacks;
mod code;
mod module_loader;
mod ops;
mod values;
mod wasm;
pub(crate) use code::{EngineCode, PRELUDE_NAME};
pub(crate) use ops::{EmbeddedScript, OpArg, OpError, OpResult, OpValue};
pub(crate) use wasm::{wasm_compilations, WasmModule, WasmModules};

use callbacks::{
    data_request_cb, fatal_oom_cb, heap_limit_cb, host_call_cb, import_cb, op_cb, script_cache_cb, script_cb, text_cb, wake_cb, Callbacks,
};
use module_loader::ModuleState;
use ops::op_value;
use values::{empty_error, fixed_input, nul_joined, take_bytes, take_error, take_syntax, take_value};

use std::ffi::CStr;
use std::os::raw::c_void;
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use isolet_core::code_cache::{Lookup, Unit, UnitKind};
use isolet_core::modules;
use isolet_core::seam_policy;
use isolet_core::{ExecMode, Thrown};

/// What the isolate thread's owner provides to the sandbox: callbacks V8 makes.
pub(crate) trait SandboxHost: Send + Sync {
    /// A platform task was posted (any thread).
    fn wake(&self);
    /// The sandbox called host function `fn_index`: `Ok` when it went to the host (answer
    /// later with `fulfill_call`), `Err` when it is refused at once (the seam rejects the
    /// call's promise with it and keeps nothing for the call).
    fn host_call(&self, fn_index: u32, call_id: u32, args: &[u8]) -> Result<(), Refusal>;
    /// Blocking read of `data[key]`.
    fn data_request(&self, key: &str) -> DataAnswer;
    /// The heap reached its limit (inside a GC): terminate the run from another thread.
    fn heap_limit(&self);
    /// V8 hit a fatal OOM on this isolate's thread (or was about to: see the seam's
    /// `on_fatal_oom`); the isolate holds `held_bytes`. Must never return.
    fn fatal_oom(&self, held_bytes: usize) -> !;
    /// The source of module `key` given up front (the run's `modules`, its sandbox's, the
    /// engine's prelude modules), if it is there, and whether it is a prelude module.
    fn given_module(&self, _key: &str) -> Option<(String, bool)> {
        None
    }
    /// The engine's compiled-code cache, which modules are compiled through.
    fn engine_code(&self) -> Option<Arc<EngineCode>> {
        None
    }
    /// Whether the run has a `resolve` to ask for modules its map does not hold.
    fn module_resolver(&self) -> bool {
        false
    }
    /// Blocking: the run's `resolve` answer for `key`, imported from `referrer` (bytes of
    /// `isolet_core::modules::encode_resolved` / `encode_not_found`).
    fn resolve_module(&self, _key: &str, _referrer: &str) -> DataAnswer {
        DataAnswer::Terminated
    }
    /// Embedded script `index` (the web layer's JavaScript; `crate::web`).
    fn script(&self, _index: u32) -> Option<EmbeddedScript> {
        None
    }
    /// The code cache V8 made for embedded script `index`.
    fn script_cache(&self, _index: u32, _data: &[u8]) {}
    /// Native op `op` (the web layer's; `crate::web`), called synchronously from the sandbox.
    fn op(&self, _op: u32, _args: &mut [OpArg]) -> OpResult {
        Err(OpError::Threw { name: "TypeError", message: "no native ops in this sandbox".into(), installed: false })
    }
}

/// Why a host call was refused before it reached the host: the name and message of the
/// error the sandbox's promise rejects with.
#[derive(Debug)]
pub(crate) struct Refusal {
    pub name: &'static str,
    pub message: String,
}

pub(crate) enum DataAnswer {
    Value(Vec<u8>),
    Error(String),
    Terminated,
}

/// Where a run stands after `run` or `poll`.
#[derive(Debug)]
pub(crate) enum Step {
    Settled,
    Pending,
    Threw(Thrown),
    Syntax(Thrown),
    /// Refused before it ran, as a validation error with this message.
    Invalid(String),
    Terminated,
}

/// The settled result copied out.
#[derive(Debug)]
pub(crate) enum Output {
    Value(Vec<u8>),
    Threw(Thrown),
    /// The result holds a value that cannot be copied: the path of the first one
    /// (`result.items[3].onClick: function`).
    Uncloneable(String),
    TooLarge,
    Terminated,
}

/// Terminates a sandbox's execution from any thread; a no-op once it is disposed.
#[derive(Clone, Default)]
pub(crate) struct IsolateHandle(Arc<Mutex<Option<usize>>>);

/// The lock only guards an `Option<usize>`, which a panic cannot leave half-written.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

impl IsolateHandle {
    pub(crate) fn terminate(&self) -> bool {
        let guard = lock(&self.0);
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

/// A sandbox's heap, in bytes: used now, the most seen, and the most its young
/// large-object space was seen holding (one object V8 grants past the heap limit).
#[derive(Debug, Clone, Copy)]
pub(crate) struct HeapSample {
    pub used: usize,
    pub peak: usize,
    pub peak_young_large: usize,
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
    callbacks: *mut Callbacks,
}

impl Sandbox {
    /// Creates the isolate and its context on the calling thread, with the console and
    /// without the properties and namespaces `seam_policy` removes. This is the warm
    /// isolate's preparation: it runs before the run is known, so it holds nothing of it.
    pub(crate) fn new(config: &SandboxConfig, host: Arc<dyn SandboxHost>) -> Option<Sandbox> {
        let callbacks = Box::into_raw(Box::new(Callbacks {
            host,
            isolate: AtomicPtr::new(std::ptr::null_mut()),
            panicked: AtomicBool::new(false),
            raw: AtomicPtr::new(std::ptr::null_mut()),
            modules: Mutex::new(ModuleState::default()),
        }));
        let raw_config = ffi::isolet_sandbox_config {
            ctx: callbacks as *mut c_void,
            wake: wake_cb,
            on_host_call: host_call_cb,
            on_data_request: data_request_cb,
            on_heap_limit: heap_limit_cb,
            on_fatal_oom: fatal_oom_cb,
            on_op: op_cb,
            on_script: script_cb,
            on_script_cache: script_cache_cb,
            text: text_cb,
            heap_limit_bytes: config.heap_limit_bytes,
            array_buffer_limit_bytes: config.array_buffer_limit_bytes,
            heap_headroom_bytes: seam_policy::HEAP_HEADROOM_BYTES,
            max_heap_limit_raises: seam_policy::MAX_HEAP_LIMIT_RAISES,
            heap_ceiling_bytes: seam_policy::heap_ceiling_bytes(config.heap_limit_bytes),
            max_error_text_bytes: seam_policy::MAX_ERROR_TEXT_BYTES,
            // One byte more than a key may have, so an overlong key is seen as such.
            max_data_key_bytes: isolet_core::limits::MAX_DATA_KEY_BYTES + 1,
            max_json_values: seam_policy::max_json_values(config.heap_limit_bytes),
        };
        // SAFETY: config is valid for the call; the seam copies it.
        let raw = unsafe { ffi::isolet_sandbox_new(&raw_config) };
        if raw.is_null() {
            // SAFETY: never handed to a live sandbox.
            drop(unsafe { Box::from_raw(callbacks) });
            return None;
        }
        // SAFETY: raw is a live sandbox.
        let isolate = unsafe { ffi::isolet_sandbox_isolate(raw) };
        // SAFETY: callbacks is the live box just handed to the seam.
        unsafe { (*callbacks).isolate.store(isolate, Ordering::SeqCst) };
        // SAFETY: as above; `raw` is live until the box is freed (after dispose).
        unsafe { (*callbacks).raw.store(raw, Ordering::SeqCst) };
        // SAFETY: live sandbox; the handler is a plain function.
        unsafe { ffi::isolet_sandbox_set_import_handler(raw, import_cb, modules::MAX_SPECIFIER_BYTES) };
        let handle = IsolateHandle(Arc::new(Mutex::new(Some(isolate as usize))));
        let sandbox = Sandbox { raw, handle, callbacks };
        let mut ok = true;
        for (object, key) in seam_policy::REMOVED_PROPERTIES {
            // SAFETY: live sandbox, valid buffers.
            ok &= unsafe { ffi::isolet_sandbox_delete_global(sandbox.raw, object.as_ptr(), object.len(), key.as_ptr(), key.len()) } == 0;
        }
        // Sealed here, before the run arrives, not per run (about 30 µs of a trivial run):
        // the run's WebAssembly modules are instantiated with the constructor the seam kept.
        ok = ok && sandbox.seal_namespaces();
        (ok && !sandbox.panicked()).then_some(sandbox)
    }

    /// True once a callback panicked; the run was terminated and must end as an
    /// internal failure.
    pub(crate) fn panicked(&self) -> bool {
        // SAFETY: the callbacks box lives as long as self.
        unsafe { (*self.callbacks).panicked.load(Ordering::SeqCst) }
    }

    fn dispose_now(self) {
        drop(self);
    }

    pub(crate) fn handle(&self) -> IsolateHandle {
        self.handle.clone()
    }

    /// Copy caps: host-call arguments, and the result.
    pub(crate) fn set_copy_limits(&mut self, max_message_bytes: usize, max_output_bytes: usize) {
        // SAFETY: live sandbox.
        unsafe { ffi::isolet_sandbox_set_copy_limits(self.raw, max_message_bytes, max_output_bytes) };
    }

    /// Hands the code caches of the embedded scripts compiled without one to
    /// `SandboxHost::script_cache` (after a run: they hold what the run compiled).
    pub(crate) fn cache_scripts(&mut self) {
        // SAFETY: live sandbox.
        unsafe { ffi::isolet_sandbox_cache_scripts(self.raw) };
    }

    /// Resolves the promise an op gave back as `OpValue::Promise(id)` with `value`; false when
    /// the run is being stopped (a promise already settled or dropped is no error).
    pub(crate) fn settle_op(&mut self, id: u32, value: OpValue) -> bool {
        let mut raw = op_value(value);
        // SAFETY: live sandbox; the seam takes the value's block.
        let rc = unsafe { ffi::isolet_sandbox_settle_op(self.raw, id, &mut raw) };
        rc != ffi::ISOLET_TERMINATED && !self.panicked()
    }

    /// Defines each global `name` as a lazy data property whose value is that name's export of
    /// embedded script `script` (see `isolet_sandbox_install_ops` and `SandboxHost::script`);
    /// script `seam_script` is the one the seam calls (`makeError`, `uncloneablePath`).
    pub(crate) fn install_ops(&mut self, globals: &[(&str, u32)], seam_script: u32) -> Step {
        let names = nul_joined(&globals.iter().map(|(name, _)| *name).collect::<Vec<_>>());
        let scripts: Vec<u32> = globals.iter().map(|(_, script)| *script).collect();
        // SAFETY: live sandbox, valid buffers for the call.
        let rc =
            unsafe { ffi::isolet_sandbox_install_ops(self.raw, names.as_ptr(), names.len(), scripts.as_ptr(), scripts.len(), seam_script) };
        match rc {
            _ if self.panicked() => Step::Terminated,
            ffi::ISOLET_OK => Step::Settled,
            _ => Step::Terminated,
        }
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

    /// Instantiates the compiled `module` at `globalThis[ns][name]`: no compilation.
    pub(crate) fn add_wasm_instance(&mut self, ns: &str, name: &str, module: &WasmModule) -> Result<(), Thrown> {
        let mut err = empty_error();
        // SAFETY: live sandbox, valid buffers; `module.0` is a live compiled module.
        let rc = unsafe {
            ffi::isolet_sandbox_add_wasm_instance(self.raw, ns.as_ptr(), ns.len(), name.as_ptr(), name.len(), module.0, &mut err)
        };
        let result = match rc {
            ffi::ISOLET_OK => Ok(()),
            ffi::ISOLET_THREW => Err(take_error(&mut err)),
            _ => Err(Thrown { name: "Error".into(), message: "could not install the module".into(), ..Default::default() }),
        };
        // SAFETY: frees leftovers, null-safe.
        unsafe { ffi::isolet_error_free(&mut err) };
        result
    }

    /// Removes the namespaces `seam_policy::SEALED_NAMESPACES` names (`WebAssembly`),
    /// with their constructors' back links.
    fn seal_namespaces(&self) -> bool {
        seam_policy::SEALED_NAMESPACES.iter().all(|ns| {
            // SAFETY: live sandbox, valid buffer.
            unsafe { ffi::isolet_sandbox_remove_namespace(self.raw, ns.as_ptr(), ns.len()) == 0 }
        })
    }

    /// A persistent sandbox: its module graph outlives its runs.
    pub(crate) fn set_persistent(&mut self) {
        // SAFETY: the callbacks box lives as long as self.
        lock(unsafe { &(*self.callbacks).modules }).graph.set_persistent();
    }

    /// Compiles and starts the run's code, through the engine's compiled-code cache when
    /// one is given.
    pub(crate) fn run_with(&mut self, code: &str, mode: ExecMode, cache: Option<&EngineCode>) -> Step {
        if mode == ExecMode::Module {
            return self.run_module(code);
        }
        let mut err = empty_error();
        let wrapped = match mode {
            ExecMode::Script | ExecMode::Module => seam_policy::script_source(code),
            ExecMode::AsyncBody => seam_policy::async_body_source(code),
        };
        let kind = match mode {
            ExecMode::Script | ExecMode::Module => UnitKind::Script,
            ExecMode::AsyncBody => UnitKind::AsyncBody,
        };
        let rc = match cache {
            Some(cache) => {
                let key = cache.key(&Unit { kind, origin: seam_policy::SCRIPT_NAME, source: &wrapped.source });
                self.run_cached(&wrapped, key, seam_policy::SCRIPT_NAME, kind, cache, &mut err)
            }
            None => self.run_source(&wrapped, seam_policy::SCRIPT_NAME, &[], &mut err).0,
        };
        let step = match rc {
            _ if self.panicked() => Step::Terminated,
            ffi::ISOLET_OK => Step::Settled,
            ffi::ISOLET_PENDING => Step::Pending,
            ffi::ISOLET_THREW => Step::Threw(take_error(&mut err)),
            ffi::ISOLET_SYNTAX => {
                let at = take_syntax(&mut err);
                match mode {
                    ExecMode::Script | ExecMode::Module => Step::Syntax(at.thrown),
                    ExecMode::AsyncBody => {
                        let mut terminated = false;
                        let thrown =
                            seam_policy::async_body_syntax_error(code, at, |src, offset, how| match self.check_syntax(src, offset, how) {
                                Err(()) => {
                                    terminated = true;
                                    None
                                }
                                Ok(found) => found,
                            });
                        if terminated || self.panicked() {
                            Step::Terminated
                        } else {
                            Step::Syntax(thrown)
                        }
                    }
                }
            }
            ffi::ISOLET_TOO_LARGE => too_long(),
            _ => Step::Terminated,
        };
        // SAFETY: frees whatever the seam left in err (idempotent on null fields).
        unsafe { ffi::isolet_error_free(&mut err) };
        step
    }

    /// Compiles and starts `wrapped`, consuming `data` (a V8 code cache) when given; the
    /// seam's code, and whether V8 refused the data.
    fn run_source(&mut self, wrapped: &seam_policy::WrappedSource, origin: &str, data: &[u8], err: &mut ffi::isolet_error) -> (i32, bool) {
        let source = &wrapped.source;
        let mut rejected = 0;
        // SAFETY: live sandbox, valid buffers; `data` outlives the call (V8 reads it only
        // while compiling).
        let rc = unsafe {
            ffi::isolet_sandbox_run(
                self.raw,
                source.as_ptr(),
                source.len(),
                origin.as_ptr(),
                origin.len(),
                wrapped.column_offset,
                i32::from(wrapped.call),
                data.as_ptr(),
                data.len(),
                &mut rejected,
                err,
            )
        };
        (rc, rejected != 0)
    }

    /// Compiles (from the cache's data when it has some) and starts `wrapped`; produces
    /// its code cache after the top level ran, when the cache asks for it.
    fn run_cached(
        &mut self,
        wrapped: &seam_policy::WrappedSource,
        key: u64,
        origin: &str,
        kind: UnitKind,
        cache: &EngineCode,
        err: &mut ffi::isolet_error,
    ) -> i32 {
        let source = &wrapped.source;
        let unit = Unit { kind, origin, source };
        let lookup = cache.lookup(key, &unit);
        let data: &[u8] = match &lookup {
            Lookup::Hit(data) => data,
            _ => &[],
        };
        let (rc, rejected) = self.run_source(wrapped, origin, data, err);
        if rejected {
            cache.rejected(key);
        }
        if lookup == Lookup::Produce && matches!(rc, ffi::ISOLET_OK | ffi::ISOLET_PENDING) && !self.panicked() {
            if let Some(data) = self.create_code_cache() {
                cache.admit(key, &unit, data);
            }
        }
        rc
    }

    /// The code cache of the script `run_cached` compiled last.
    fn create_code_cache(&mut self) -> Option<Vec<u8>> {
        let mut out = ffi::isolet_bytes { ptr: std::ptr::null_mut(), len: 0 };
        // SAFETY: live sandbox, valid out-pointer.
        let rc = unsafe { ffi::isolet_sandbox_create_code_cache(self.raw, &mut out) };
        let bytes = take_bytes(&mut out);
        if rc == ffi::ISOLET_OK {
            bytes
        } else {
            None
        }
    }

    /// Runs the engine's prelude (a classic script named `prelude.js`) in this fresh
    /// context, through the cache (where it is kept for the engine's life).
    pub(crate) fn run_prelude(&mut self, code: &EngineCode) -> Step {
        let Some((wrapped, key)) = &code.prelude else { return Step::Settled };
        let mut err = empty_error();
        let rc = self.run_cached(wrapped, *key, PRELUDE_NAME, UnitKind::Prelude, code, &mut err);
        let step = match rc {
            _ if self.panicked() => Step::Terminated,
            ffi::ISOLET_OK => Step::Settled,
            ffi::ISOLET_PENDING => Step::Pending,
            ffi::ISOLET_THREW => Step::Threw(take_error(&mut err)),
            ffi::ISOLET_SYNTAX => Step::Syntax(take_syntax(&mut err).thrown),
            ffi::ISOLET_TOO_LARGE => too_long(),
            _ => Step::Terminated,
        };
        // SAFETY: frees whatever the seam left in err (idempotent on null fields).
        unsafe { ffi::isolet_error_free(&mut err) };
        step
    }

    /// Persistent sandboxes: calls the global function `name` with `args` (a serialized
    /// array) in the context earlier runs left; its return value is the result.
    pub(crate) fn call_global(&mut self, name: &str, args: &[u8]) -> Step {
        let fixed = match fixed_input(args) {
            Ok(fixed) => fixed,
            Err(message) => return Step::Threw(Thrown { name: "TypeError".into(), message, ..Default::default() }),
        };
        let args = fixed.as_deref().unwrap_or(args);
        let mut err = empty_error();
        // SAFETY: live sandbox, valid buffers.
        let rc = unsafe { ffi::isolet_sandbox_call_global(self.raw, name.as_ptr(), name.len(), args.as_ptr(), args.len(), &mut err) };
        let step = match rc {
            _ if self.panicked() => Step::Terminated,
            ffi::ISOLET_OK => Step::Settled,
            ffi::ISOLET_PENDING => Step::Pending,
            ffi::ISOLET_THREW => Step::Threw(take_error(&mut err)),
            ffi::ISOLET_FAILED => Step::Threw(Thrown {
                name: "TypeError".into(),
                message: "the arguments could not be copied into the sandbox".into(),
                ..Default::default()
            }),
            _ => Step::Terminated,
        };
        // SAFETY: frees leftovers, null-safe.
        unsafe { ffi::isolet_error_free(&mut err) };
        step
    }

    /// Persistent sandboxes, between runs: forgets the last result and the host calls
    /// still pending, and cancels a termination the run left behind.
    pub(crate) fn end_run(&mut self) {
        // SAFETY: live sandbox; no other thread can terminate it now (the run is detached).
        unsafe { ffi::isolet_sandbox_end_run(self.raw) };
        // The module graph keeps what was instantiated (the same instances for every later
        // run); the run's own code and what never got linked (a failed load, which a later
        // run may give anew) are released.
        // SAFETY: the callbacks box lives as long as self.
        let mut state = lock(unsafe { &(*self.callbacks).modules });
        let root = state.root.take();
        state.unlinked.clear();
        state.produce.clear();
        for id in state.graph.ids() {
            // SAFETY: live sandbox.
            let instantiated = unsafe { ffi::isolet_module_instantiated(self.raw, id) } != 0;
            if Some(id) == root || !instantiated {
                state.graph.release(id);
                // SAFETY: live sandbox; no instantiated module links to a module that is not.
                unsafe { ffi::isolet_module_release(self.raw, id) };
            }
        }
        state.graph.end_run();
    }

    /// Compiles `source` without running it: its syntax error, if any; `Err` when the
    /// run was terminated meanwhile.
    fn check_syntax(&mut self, source: &str, column_offset: i32, how: seam_policy::CheckAs) -> Result<Option<seam_policy::SyntaxAt>, ()> {
        let mut err = empty_error();
        let origin = seam_policy::SCRIPT_NAME;
        let as_body = i32::from(how == seam_policy::CheckAs::FunctionBody);
        // SAFETY: live sandbox, valid buffers.
        let rc = unsafe {
            ffi::isolet_sandbox_check_syntax(
                self.raw,
                source.as_ptr(),
                source.len(),
                origin.as_ptr(),
                origin.len(),
                column_offset,
                as_body,
                &mut err,
            )
        };
        let out = match rc {
            ffi::ISOLET_OK | ffi::ISOLET_TOO_LARGE => Ok(None),
            ffi::ISOLET_SYNTAX => Ok(Some(take_syntax(&mut err))),
            _ => Err(()),
        };
        // SAFETY: frees leftovers, null-safe.
        unsafe { ffi::isolet_error_free(&mut err) };
        out
    }

    pub(crate) fn poll(&mut self) -> Step {
        // SAFETY: live sandbox.
        match unsafe { ffi::isolet_sandbox_poll(self.raw) } {
            _ if self.panicked() => Step::Terminated,
            ffi::ISOLET_OK => Step::Settled,
            ffi::ISOLET_PENDING => Step::Pending,
            _ => Step::Terminated,
        }
    }

    pub(crate) fn take_result(&mut self) -> Output {
        let mut value = ffi::isolet_value { ptr: std::ptr::null_mut(), len: 0, cap: 0 };
        let mut err = empty_error();
        // SAFETY: live sandbox, valid out-pointers.
        let rc = unsafe { ffi::isolet_sandbox_take_result(self.raw, &mut value, &mut err) };
        let out = match rc {
            _ if self.panicked() => Output::Terminated,
            ffi::ISOLET_OK => Output::Value(take_value(&mut value)),
            ffi::ISOLET_THREW => Output::Threw(take_error(&mut err)),
            ffi::ISOLET_UNCLONEABLE => Output::Uncloneable(take_error(&mut err).message),
            ffi::ISOLET_TOO_LARGE => Output::TooLarge,
            _ => Output::Terminated,
        };
        drop(take_value(&mut value));
        // SAFETY: frees leftovers, null-safe.
        unsafe { ffi::isolet_error_free(&mut err) };
        out
    }

    /// Forgets the promises rejected with no handler so far: a run's code starts.
    pub(crate) fn clear_rejections(&mut self) {
        // SAFETY: live sandbox.
        unsafe { ffi::isolet_sandbox_clear_rejections(self.raw) };
    }

    /// The promises rejected with no handler that still have none (the run's own result
    /// excluded), first rejected first, at most `max` described; and how many there were.
    pub(crate) fn take_rejections(&mut self, max: usize) -> (Vec<Thrown>, u32) {
        let mut described = Vec::new();
        let mut count = 0u32;
        loop {
            let mut err = empty_error();
            // SAFETY: live sandbox, valid out-pointer.
            let rc = unsafe { ffi::isolet_sandbox_next_rejection(self.raw, &mut err) };
            if rc == ffi::ISOLET_OK && !self.panicked() {
                count = count.saturating_add(1);
                let thrown = take_error(&mut err);
                if described.len() < max {
                    described.push(thrown);
                }
            }
            // SAFETY: frees leftovers, null-safe.
            unsafe { ffi::isolet_error_free(&mut err) };
            if rc != ffi::ISOLET_OK || self.panicked() {
                break;
            }
        }
        // SAFETY: live sandbox.
        let dropped = unsafe { ffi::isolet_sandbox_dropped_rejections(self.raw) };
        (described, count.saturating_add(dropped))
    }

    /// Runs due platform tasks; returns ms until the next delayed one.
    pub(crate) fn run_tasks(&mut self) -> Option<u64> {
        // SAFETY: live sandbox.
        let next = unsafe { ffi::isolet_sandbox_run_tasks(self.raw) };
        (next >= 0).then_some(next as u64)
    }

    pub(crate) fn fulfill_call(&mut self, call_id: u32, value: &[u8]) {
        let fixed = match fixed_input(value) {
            Ok(fixed) => fixed,
            Err(message) => return self.reject_call(call_id, "TypeError", &message),
        };
        let value = fixed.as_deref().unwrap_or(value);
        // SAFETY: live sandbox, valid buffer.
        unsafe { ffi::isolet_sandbox_fulfill_call(self.raw, call_id, value.as_ptr(), value.len()) };
    }

    pub(crate) fn reject_call(&mut self, call_id: u32, name: &str, message: &str) {
        // SAFETY: live sandbox, valid buffers.
        unsafe {
            ffi::isolet_sandbox_reject_call(
                self.raw,
                call_id,
                seam_policy::host_error_class(name),
                name.as_ptr(),
                name.len(),
                message.as_ptr(),
                message.len(),
            )
        };
    }

    /// (used, peak) heap bytes.
    pub(crate) fn heap(&mut self) -> HeapSample {
        let (mut used, mut peak, mut peak_young_large) = (0, 0, 0);
        // SAFETY: live sandbox, valid out-pointers.
        unsafe { ffi::isolet_sandbox_heap(self.raw, &mut used, &mut peak, &mut peak_young_large) };
        HeapSample { used, peak, peak_young_large }
    }

    pub(crate) fn hit_memory_limit(&self) -> bool {
        // SAFETY: live sandbox.
        unsafe { ffi::isolet_sandbox_hit_memory_limit(self.raw) != 0 }
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        // Clear the handle first so no thread terminates a disposed isolate.
        *lock(&self.handle.0) = None;
        // SAFETY: raw is live and owned; after dispose the seam makes no more callbacks,
        // so the callbacks box can be freed.
        unsafe {
            ffi::isolet_sandbox_dispose(self.raw);
            drop(Box::from_raw(self.callbacks));
        }
    }
}

/// Code past V8's longest string, as the SyntaxError a run reports.
fn too_long() -> Step {
    let (name, message) = seam_policy::CODE_TOO_LONG;
    Step::Syntax(Thrown { name: name.into(), message: message.into(), ..Default::default() })
}
