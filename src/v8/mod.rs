//! Safe wrappers over the C++ seam (`native/isolet_v8.cc`). Used only by
//! `crate::isolate`; owned by the isolate thread except `IsolateHandle`, which any
//! thread may use to terminate execution.
mod ffi;

mod code;
pub(crate) use code::{EngineCode, PRELUDE_NAME};

use std::ffi::CStr;
use std::os::raw::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use isolet_core::code_cache::{Lookup, Unit, UnitKind};
use isolet_core::modules::{self, ModuleError, ModuleGraph, ModuleLimits};
use isolet_core::seam_policy::{self, SeamText, ThrownKind};
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

/// WebAssembly compilations this process has made (each `WasmModule::compile`).
static WASM_COMPILATIONS: AtomicU64 = AtomicU64::new(0);

pub(crate) fn wasm_compilations() -> u64 {
    WASM_COMPILATIONS.load(Ordering::Relaxed)
}

/// A compiled WebAssembly module: every isolate of the process instantiates this same
/// code without compiling again (V8 shares the native module between isolates).
pub(crate) struct WasmModule(*mut ffi::isolet_wasm_module);

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
struct CompileHost;

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

/// What the seam's callbacks reach: the host, and what a panic needs to stop the run.
struct Callbacks {
    host: Arc<dyn SandboxHost>,
    /// The isolate, once it exists (callbacks may come while it is being created).
    isolate: AtomicPtr<c_void>,
    /// A callback panicked: the run was terminated and ends as an internal failure.
    panicked: AtomicBool,
    /// The sandbox, once it exists: `import()` compiles and links from inside V8.
    raw: AtomicPtr<ffi::isolet_sandbox>,
    /// The isolate's module graph (its modules live as long as it does).
    modules: Mutex<ModuleState>,
}

/// The module graph's policy (isolet-core) and the modules compiled but not linked yet.
#[derive(Default)]
struct ModuleState {
    graph: ModuleGraph,
    unlinked: Vec<u32>,
    /// The root module of the run being served (a persistent sandbox releases it after).
    root: Option<u32>,
    /// Modules whose code cache the engine's cache asked for, made once their code ran.
    produce: Vec<PendingCache>,
}

/// A module compiled from source whose code cache is to be made and kept.
struct PendingCache {
    id: u32,
    key: u64,
    kind: UnitKind,
    origin: String,
    source: String,
    code: Arc<EngineCode>,
}

/// Why a module graph could not be loaded.
enum LoadError {
    Module(ModuleError),
    /// A module did not compile: its error, naming it.
    Syntax(Thrown),
    Terminated,
}

impl LoadError {
    /// As the run's step (a static import of the run's own code).
    fn into_step(self) -> Step {
        match self {
            LoadError::Module(e) => Step::Threw(module_thrown(&e)),
            LoadError::Syntax(thrown) => Step::Syntax(thrown),
            LoadError::Terminated => Step::Terminated,
        }
    }
}

/// The error a module that cannot be loaded throws: a RangeError for a limit.
fn module_thrown(e: &ModuleError) -> Thrown {
    let name = match e {
        ModuleError::TooManyModules { .. } | ModuleError::TooManyBytes { .. } => "RangeError",
        _ => "Error",
    };
    Thrown { name: name.into(), message: e.to_string(), ..Default::default() }
}

/// Compiles `source` as module `key` (through the engine's code cache when there is one:
/// `kind` says which units it keeps); a syntax error names the module (unless it is the
/// run's own code, named like a script's).
fn compile_module(
    raw: *mut ffi::isolet_sandbox,
    source: &str,
    key: &str,
    cache: Option<(&Arc<EngineCode>, UnitKind)>,
    produce: &mut Vec<PendingCache>,
) -> Result<u32, LoadError> {
    let mut err = empty_error();
    let mut id = 0u32;
    let unit = cache.map(|(code, kind)| (code, Unit { kind, origin: key, source }));
    let looked = unit.as_ref().map(|(code, unit)| {
        let key = code.key(unit);
        (key, code.lookup(key, unit))
    });
    let data: &[u8] = match &looked {
        Some((_, Lookup::Hit(data))) => data,
        _ => &[],
    };
    let mut rejected = 0;
    // SAFETY: live sandbox, valid buffers and out-pointers; `data` outlives the call.
    let rc = unsafe {
        ffi::isolet_module_compile_cached(
            raw,
            source.as_ptr(),
            source.len(),
            key.as_ptr(),
            key.len(),
            data.as_ptr(),
            data.len(),
            &mut rejected,
            &mut id,
            &mut err,
        )
    };
    if let (Some((code, unit)), Some((cache_key, lookup))) = (&unit, &looked) {
        if rejected != 0 {
            code.rejected(*cache_key);
        }
        if *lookup == Lookup::Produce && rc == ffi::ISOLET_OK {
            produce.push(PendingCache {
                id,
                key: *cache_key,
                kind: unit.kind,
                origin: key.to_string(),
                source: source.to_string(),
                code: (*code).clone(),
            });
        }
    }
    let out = match rc {
        ffi::ISOLET_OK => Ok(id),
        ffi::ISOLET_SYNTAX => {
            let mut thrown = take_error(&mut err);
            if key != modules::ROOT_MODULE {
                thrown.message = format!("in module '{key}': {}", thrown.message);
            }
            Err(LoadError::Syntax(thrown))
        }
        ffi::ISOLET_TOO_LARGE => {
            let (name, message) = seam_policy::CODE_TOO_LONG;
            Err(LoadError::Syntax(Thrown { name: name.into(), message: message.into(), ..Default::default() }))
        }
        _ => Err(LoadError::Terminated),
    };
    // SAFETY: frees leftovers, null-safe.
    unsafe { ffi::isolet_error_free(&mut err) };
    out
}

/// Admits, compiles and enters module `name` in the graph (counted back out if it does
/// not compile).
fn load_module(
    raw: *mut ffi::isolet_sandbox,
    host: &dyn SandboxHost,
    state: &mut ModuleState,
    name: &str,
    source: &str,
    prelude: bool,
) -> Result<u32, LoadError> {
    state.graph.admit(source.len()).map_err(LoadError::Module)?;
    let code = host.engine_code();
    let kind = if prelude { UnitKind::PreludeModule } else { UnitKind::Module };
    match compile_module(raw, source, name, code.as_ref().map(|c| (c, kind)), &mut state.produce) {
        Ok(id) => {
            state.graph.insert(name, id, source);
            Ok(id)
        }
        Err(e) => {
            state.graph.unadmit(source.len());
            Err(e)
        }
    }
}

fn module_requests(raw: *mut ffi::isolet_sandbox, id: u32) -> Result<Vec<String>, LoadError> {
    let mut out = ffi::isolet_bytes { ptr: std::ptr::null_mut(), len: 0 };
    let mut count = 0usize;
    // SAFETY: live sandbox, valid out-pointers.
    if unsafe { ffi::isolet_module_requests(raw, id, &mut out, &mut count) } != ffi::ISOLET_OK {
        take_bytes(&mut out);
        return Err(LoadError::Terminated);
    }
    let joined = take_bytes(&mut out).unwrap_or_default();
    if count == 0 {
        return Ok(Vec::new());
    }
    Ok(joined.split(|b| *b == 0).map(|s| String::from_utf8_lossy(s).into_owned()).collect())
}

/// The module `key` names (imported from `referrer`): from the graph, the run's map, or
/// the host's `resolve`; compiled and queued for linking when new.
fn ensure_module(
    raw: *mut ffi::isolet_sandbox,
    host: &dyn SandboxHost,
    state: &mut ModuleState,
    key: &str,
    referrer: &str,
) -> Result<u32, LoadError> {
    match state.graph.get(key) {
        Some(Ok(id)) => return Ok(id),
        Some(Err(e)) => return Err(LoadError::Module(e)),
        None => {}
    }
    let failed = |state: &mut ModuleState, e: ModuleError| {
        state.graph.fail(key, e.clone());
        Err(LoadError::Module(e))
    };
    let not_found = || ModuleError::NotFound { specifier: key.to_string(), referrer: referrer.to_string() };
    let resolve_error = |message: String| ModuleError::Resolve { specifier: key.to_string(), referrer: referrer.to_string(), message };
    let (name, source, prelude) = match host.given_module(key) {
        Some((source, prelude)) => (key.to_string(), source, prelude),
        // Not remembered: a run without `resolve` could otherwise fill the graph (outside
        // V8's heap) with as many missing keys as it can name.
        None if !host.module_resolver() => return Err(LoadError::Module(not_found())),
        None => {
            state.graph.admit_request().map_err(LoadError::Module)?;
            match host.resolve_module(key, referrer) {
                DataAnswer::Terminated => return Err(LoadError::Terminated),
                DataAnswer::Error(message) => return failed(state, resolve_error(message)),
                DataAnswer::Value(bytes) => match modules::decode_resolved(&bytes) {
                    Ok(None) => return failed(state, not_found()),
                    Ok(Some((None, source))) => (key.to_string(), source, false),
                    Ok(Some((Some(canonical), source))) => match modules::map_key(&canonical) {
                        Ok(name) => {
                            if let Some(Ok(id)) = state.graph.get(&name) {
                                state.graph.alias(key, id);
                                return Ok(id);
                            }
                            (name, source, false)
                        }
                        Err(why) => return failed(state, resolve_error(format!("the specifier it returned {why}"))),
                    },
                    Err(why) => return failed(state, resolve_error(format!("its answer is {why}"))),
                },
            }
        }
    };
    let id = load_module(raw, host, state, &name, &source, prelude)?;
    state.graph.alias(key, id);
    state.unlinked.push(id);
    Ok(id)
}

/// Loads what the modules `root` reaches that are compiled but not linked yet import, and
/// links them. A module stays queued until its imports are all there, so a failed load is
/// finished by a later one that reaches the same module; a load that does not reach it
/// leaves it alone (an `import()` that failed must not fail the next, unrelated one).
fn link_pending(raw: *mut ffi::isolet_sandbox, host: &dyn SandboxHost, state: &mut ModuleState, root: u32) -> Result<(), LoadError> {
    let mut work = vec![root];
    let mut seen = std::collections::HashSet::new();
    while let Some(id) = work.pop() {
        if !seen.insert(id) || !state.unlinked.contains(&id) {
            continue;
        }
        let from = state.graph.key_of(id).unwrap_or(modules::ROOT_MODULE).to_string();
        let mut targets = Vec::new();
        for specifier in module_requests(raw, id)? {
            let key = modules::module_key(&specifier, &from).map_err(LoadError::Module)?;
            targets.push(ensure_module(raw, host, state, &key, &from)?);
        }
        // SAFETY: live sandbox; `targets` is valid for the call.
        unsafe { ffi::isolet_module_link(raw, id, targets.as_ptr(), targets.len()) };
        state.unlinked.retain(|queued| *queued != id);
        work.extend(targets);
    }
    Ok(())
}

#[allow(clippy::too_many_arguments)] // the seam's flat C signature
extern "C" fn import_cb(
    ctx: *mut c_void,
    referrer: *const u8,
    referrer_len: usize,
    specifier: *const u8,
    specifier_len: usize,
    id: *mut u32,
    error_class: *mut u32,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> i32 {
    // SAFETY: the seam passes valid buffers for the duration of the call.
    let referrer = String::from_utf8_lossy(unsafe { bytes(referrer, referrer_len) }).into_owned();
    let specifier = String::from_utf8_lossy(unsafe { bytes(specifier, specifier_len) }).into_owned();
    // SAFETY: ctx is the `callbacks` box of a live Sandbox.
    let callbacks = unsafe { &*(ctx as *const Callbacks) };
    let loaded = guarded(ctx, Err(LoadError::Terminated), |host| {
        let raw = callbacks.raw.load(Ordering::SeqCst);
        if raw.is_null() {
            return Err(LoadError::Terminated);
        }
        let key = modules::module_key(&specifier, &referrer).map_err(LoadError::Module)?;
        let mut state = lock(&callbacks.modules);
        let id = ensure_module(raw, host, &mut state, &key, &referrer)?;
        link_pending(raw, host, &mut state, id)?;
        Ok(id)
    });
    let (name, message) = match loaded {
        Ok(module) => {
            // SAFETY: valid out-pointer from the seam.
            unsafe { *id = module };
            return ffi::ISOLET_OK;
        }
        Err(LoadError::Terminated) => return ffi::ISOLET_TERMINATED,
        Err(LoadError::Module(e)) => {
            let thrown = module_thrown(&e);
            (thrown.name, thrown.message)
        }
        Err(LoadError::Syntax(t)) => {
            let at = match (t.line, t.column) {
                (Some(l), Some(c)) => format!(" (line {l}, column {c})"),
                _ => String::new(),
            };
            ("Error".to_string(), format!("{}: {}{at}", t.name, t.message))
        }
    };
    // SAFETY: valid out-pointer from the seam.
    unsafe { *error_class = seam_policy::host_error_class(&name) };
    // SAFETY: the seam passes a writable buffer of `cap` bytes and a valid `len`.
    let out = unsafe { std::slice::from_raw_parts_mut(buf, cap) };
    unsafe { *len = copy_cut(&message, out) };
    ffi::ISOLET_THREW
}

/// Runs callback body `f` so that a panic never unwinds into V8 or Node (which would
/// abort the process): the panic terminates the run and the callback returns `on_panic`.
fn guarded<R>(ctx: *mut c_void, on_panic: R, f: impl FnOnce(&dyn SandboxHost) -> R) -> R {
    // SAFETY: ctx is the `callbacks` box of a live Sandbox (callbacks stop before dispose).
    let callbacks = unsafe { &*(ctx as *const Callbacks) };
    match catch_unwind(AssertUnwindSafe(|| f(callbacks.host.as_ref()))) {
        Ok(r) => r,
        Err(_) => {
            callbacks.panicked.store(true, Ordering::SeqCst);
            let isolate = callbacks.isolate.load(Ordering::SeqCst);
            if !isolate.is_null() {
                // SAFETY: set after creation and live until dispose, after which no
                // callback runs; TerminateExecution is thread-safe.
                unsafe { ffi::isolet_isolate_terminate(isolate) };
            }
            on_panic
        }
    }
}

extern "C" fn wake_cb(ctx: *mut c_void) {
    guarded(ctx, (), |host| host.wake());
}

extern "C" fn heap_limit_cb(ctx: *mut c_void) {
    guarded(ctx, (), |host| host.heap_limit());
}

extern "C" fn fatal_oom_cb(ctx: *mut c_void, held_bytes: usize) {
    guarded(ctx, (), |host| host.fatal_oom(held_bytes));
    // Only a panic gets here; returning would let V8 abort the whole process.
    loop {
        std::thread::park();
    }
}

#[allow(clippy::too_many_arguments)] // the seam's flat C signature
extern "C" fn host_call_cb(
    ctx: *mut c_void,
    fn_index: u32,
    call_id: u32,
    args: *const u8,
    len: usize,
    refusal: *mut ffi::isolet_refusal,
    buf: *mut u8,
    cap: usize,
) -> i32 {
    // SAFETY: as above.
    let args = unsafe { bytes(args, len) };
    let outcome = guarded(ctx, Ok(()), |host| host.host_call(fn_index, call_id, args));
    let Err(refused) = outcome else { return ffi::ISOLET_OK };
    // SAFETY: the seam passes a writable buffer of `cap` bytes and a valid `refusal`, both
    // live for the duration of the call.
    let out = unsafe { std::slice::from_raw_parts_mut(buf, cap) };
    let name_len = copy_cut(refused.name, out);
    let message_len = copy_cut(&refused.message, &mut out[name_len..]);
    // SAFETY: as above.
    unsafe {
        *refusal = ffi::isolet_refusal { error_class: seam_policy::host_error_class(refused.name), name_len, message_len };
    }
    ffi::ISOLET_THREW
}

/// A script the seam compiles by index (`isolet_script`): ASCII source for the process's
/// life, its name in stacks, and its code cache when there is one.
pub(crate) struct EmbeddedScript {
    pub code: &'static str,
    pub origin: &'static str,
    pub cache: Option<&'static [u8]>,
}

extern "C" fn script_cb(ctx: *mut c_void, index: u32, out: *mut ffi::isolet_script) -> i32 {
    let Some(script) = guarded(ctx, None, |host| host.script(index)) else { return ffi::ISOLET_ABSENT };
    // The seam reads it as one-byte characters, so only ASCII is the same text.
    if !script.code.is_ascii() {
        debug_assert!(false, "embedded script {index} is not ASCII");
        return ffi::ISOLET_ABSENT;
    }
    let cache = script.cache.unwrap_or(&[]);
    // SAFETY: a valid out-pointer from the seam; everything pointed to is 'static.
    unsafe {
        *out = ffi::isolet_script {
            code: script.code.as_ptr(),
            len: script.code.len(),
            origin: script.origin.as_ptr(),
            origin_len: script.origin.len(),
            cache: cache.as_ptr(),
            cache_len: cache.len(),
        };
    }
    ffi::ISOLET_OK
}

extern "C" fn script_cache_cb(ctx: *mut c_void, index: u32, data: *const u8, len: usize) {
    // SAFETY: the seam passes its cache's bytes for the call.
    let data = unsafe { bytes(data, len) };
    guarded(ctx, (), |host| host.script_cache(index, data));
}

/// A native op's argument as the seam converted it (`ISOLET_OP_*` in `native/isolet_v8.h`).
pub(crate) enum OpArg<'a> {
    Undefined,
    Number(f64),
    Bool(bool),
    /// A string's UTF-8 (lone surrogates already replaced by U+FFFD).
    Str(&'a str),
    /// The bytes of an ArrayBuffer or view, in place.
    Bytes(ByteView<'a>),
    /// Any other value (null, an object, ...), not converted.
    Other,
}

/// The bytes of a sandbox ArrayBuffer (or view) for the length of one op call. Two
/// arguments may be views of the same buffer, so an op holds a mutable borrow of one view
/// only while it reads no other.
pub(crate) struct ByteView<'a> {
    ptr: *mut u8,
    len: usize,
    _call: std::marker::PhantomData<&'a mut [u8]>,
}

impl ByteView<'_> {
    pub(crate) fn bytes(&self) -> &[u8] {
        // SAFETY: the seam passes the view's memory, alive and unmoved for the call (no
        // sandbox code or allocation runs while an op runs); null only when empty.
        unsafe { bytes(self.ptr, self.len) }
    }

    pub(crate) fn bytes_mut(&mut self) -> &mut [u8] {
        if self.len == 0 || self.ptr.is_null() {
            return &mut [];
        }
        // SAFETY: as `bytes`; `&mut self` keeps this view's other borrows out meanwhile.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

/// A value a native op gives back.
#[derive(Debug, PartialEq)]
pub(crate) enum OpValue {
    Null,
    Number(f64),
    Bool(bool),
    String(String),
    /// A string whose characters are these bytes (`atob`'s "binary string").
    Latin1(Vec<u8>),
    /// A new Uint8Array over these bytes (no copy), charged to the run's ArrayBuffer budget.
    Bytes(Vec<u8>),
    /// A new promise, settled later by `Sandbox::settle_op` with this id (an async op).
    Promise(u32),
}

/// Why a native op did not give values back.
#[derive(Debug, PartialEq)]
pub(crate) enum OpError {
    /// Throw an error: a built-in class (`TypeError`, `RangeError`, `Error`) by name, or,
    /// with `installed`, the one the web layer's error maker makes (a DOMException).
    Threw { name: &'static str, message: String, installed: bool },
    /// The run is being stopped.
    Terminated,
}

pub(crate) type OpResult = Result<Vec<OpValue>, OpError>;

/// Moves `bytes` into a seam value (the seam frees or adopts the block).
fn op_block(kind: u32, bytes: Vec<u8>) -> ffi::isolet_op_value {
    let mut bytes = std::mem::ManuallyDrop::new(bytes);
    ffi::isolet_op_value { kind, number: 0.0, ptr: bytes.as_mut_ptr(), len: bytes.len(), cap: bytes.capacity() }
}

fn op_value(value: OpValue) -> ffi::isolet_op_value {
    let scalar = |kind, number| ffi::isolet_op_value { kind, number, ptr: std::ptr::null_mut(), len: 0, cap: 0 };
    match value {
        OpValue::Null => scalar(ffi::ISOLET_OP_NULL, 0.0),
        OpValue::Number(n) => scalar(ffi::ISOLET_OP_NUMBER, n),
        OpValue::Bool(b) => scalar(ffi::ISOLET_OP_BOOL, f64::from(u8::from(b))),
        OpValue::String(s) => op_block(ffi::ISOLET_OP_STRING, s.into_bytes()),
        OpValue::Latin1(b) => op_block(ffi::ISOLET_OP_LATIN1, b),
        OpValue::Bytes(b) => op_block(ffi::ISOLET_OP_BYTES, b),
        OpValue::Promise(id) => scalar(ffi::ISOLET_OP_PROMISE, f64::from(id)),
    }
}

extern "C" fn op_cb(ctx: *mut c_void, op: u32, args: *mut ffi::isolet_op_value, argc: usize, result: *mut ffi::isolet_op_result) -> i32 {
    // SAFETY: the seam passes `argc <= ISOLET_OP_MAX_ARGS` converted arguments and a zeroed
    // result, all live for the call.
    let raw_args = unsafe { std::slice::from_raw_parts(args, argc.min(ffi::ISOLET_OP_MAX_ARGS)) };
    let result = unsafe { &mut *result };
    let mut args: Vec<OpArg> = raw_args
        .iter()
        .map(|a| match a.kind {
            ffi::ISOLET_OP_NUMBER => OpArg::Number(a.number),
            ffi::ISOLET_OP_BOOL => OpArg::Bool(a.number != 0.0),
            // The seam wrote it with V8's UTF-8 writer, invalid sequences replaced.
            ffi::ISOLET_OP_STRING => match std::str::from_utf8(unsafe { bytes(a.ptr, a.len) }) {
                Ok(s) => OpArg::Str(s),
                Err(_) => OpArg::Other,
            },
            ffi::ISOLET_OP_BYTES => OpArg::Bytes(ByteView { ptr: a.ptr, len: a.len, _call: std::marker::PhantomData }),
            ffi::ISOLET_OP_UNDEFINED => OpArg::Undefined,
            _ => OpArg::Other,
        })
        .collect();
    let outcome = guarded(ctx, Err(OpError::Terminated), |host| host.op(op, &mut args));
    match outcome {
        Ok(values) if values.len() <= ffi::ISOLET_OP_MAX_RESULTS => {
            result.count = values.len() as u32;
            for (slot, value) in result.values.iter_mut().zip(values) {
                *slot = op_value(value);
            }
            ffi::ISOLET_OK
        }
        Ok(_) => {
            debug_assert!(false, "an op gave back more than ISOLET_OP_MAX_RESULTS values");
            ffi::ISOLET_TERMINATED
        }
        Err(OpError::Threw { name, message, installed }) => {
            result.error_class = if installed { ffi::ISOLET_ERROR_CLASS_INSTALLED } else { seam_policy::host_error_class(name) };
            // A built-in class carries its own name; only others are named.
            if installed || result.error_class == 0 {
                result.name = op_block(ffi::ISOLET_OP_STRING, name.as_bytes().to_vec());
            }
            result.message = op_block(ffi::ISOLET_OP_STRING, message.into_bytes());
            ffi::ISOLET_THREW
        }
        Err(OpError::Terminated) => ffi::ISOLET_TERMINATED,
    }
}

/// Copies as much of `text` into `out` as fits, cut at a character boundary; returns the
/// bytes written.
fn copy_cut(text: &str, out: &mut [u8]) -> usize {
    let mut len = text.len().min(out.len());
    while !text.is_char_boundary(len) {
        len -= 1;
    }
    out[..len].copy_from_slice(&text.as_bytes()[..len]);
    len
}

extern "C" fn text_cb(ctx: *mut c_void, what: u32, a: u64, b: u64, buf: *mut u8, cap: usize) -> usize {
    guarded(ctx, 0, |_| {
        let text = SeamText::from_seam(what, a, b).map(|t| t.to_string()).unwrap_or_default();
        // Cut at a character boundary so the seam always gets valid UTF-8.
        let mut len = text.len().min(cap);
        while !text.is_char_boundary(len) {
            len -= 1;
        }
        // SAFETY: the seam passes `buf` valid for `cap` bytes; len <= cap.
        unsafe { std::ptr::copy_nonoverlapping(text.as_ptr(), buf, len) };
        len
    })
}

extern "C" fn data_request_cb(ctx: *mut c_void, key: *const u8, key_len: usize, out: *mut ffi::isolet_bytes) -> i32 {
    // SAFETY: as above.
    let key = unsafe { bytes(key, key_len) };
    // The seam copies at most max_data_key_bytes of the key: enough for the host to
    // refuse an overlong one by length, never the whole string.
    let key = String::from_utf8_lossy(key).into_owned();
    if seam_policy::is_never_a_data_key(&key) {
        return ffi::ISOLET_ABSENT;
    }
    let answer = guarded(ctx, DataAnswer::Terminated, |host| host.data_request(&key));
    let (code, payload) = match answer {
        DataAnswer::Value(v) => match fixed_input(&v) {
            Ok(None) => (ffi::ISOLET_OK, v),
            Ok(Some(fixed)) => (ffi::ISOLET_OK, fixed),
            Err(msg) => (ffi::ISOLET_THREW, msg.into_bytes()),
        },
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

/// The seam's `JSON.parse` guard counts its text here (`isolet_json_scan` in
/// `native/isolet_v8.h` is `seam_policy::JsonScan`).
#[no_mangle]
pub extern "C" fn isolet_json_scan_feed(scan: *mut seam_policy::JsonScan, chars: *const c_void, len: usize, char_size: u32) -> i32 {
    // SAFETY: the seam passes its own scan and `len` characters of `char_size` bytes each,
    // alive for the call (a buffer it just wrote).
    let scan = unsafe { &mut *scan };
    let within = match char_size {
        1 => scan.feed(unsafe { bytes(chars.cast::<u8>(), len) }),
        _ if len == 0 => scan.feed::<u16>(&[]),
        _ => scan.feed(unsafe { std::slice::from_raw_parts(chars.cast::<u16>(), len) }),
    };
    i32::from(within)
}

/// The seam's allocator for serialized values (`isolet_value` in `native/isolet_v8.h`):
/// blocks of `u8` from Rust's global allocator, so `take_value` adopts one as a `Vec`.
#[no_mangle]
pub extern "C" fn isolet_value_realloc(ptr: *mut u8, old_cap: usize, new_cap: usize) -> *mut u8 {
    if new_cap == 0 || new_cap > isize::MAX as usize {
        return std::ptr::null_mut();
    }
    let new_layout = std::alloc::Layout::array::<u8>(new_cap).expect("checked above");
    if ptr.is_null() || old_cap == 0 {
        // SAFETY: non-zero size.
        return unsafe { std::alloc::alloc(new_layout) };
    }
    let old_layout = std::alloc::Layout::array::<u8>(old_cap).expect("a size this allocator gave");
    // SAFETY: the seam passes back a block this function returned, with its size.
    unsafe { std::alloc::realloc(ptr, old_layout, new_cap) }
}

/// Frees a block from `isolet_value_realloc` (null or size 0: nothing).
#[no_mangle]
pub extern "C" fn isolet_value_free(ptr: *mut u8, cap: usize) {
    if ptr.is_null() || cap == 0 {
        return;
    }
    // SAFETY: a block from isolet_value_realloc of size `cap`.
    unsafe { std::alloc::dealloc(ptr, std::alloc::Layout::array::<u8>(cap).expect("a size this allocator gave")) };
}

/// The serialized value as a `Vec` over the seam's block itself (no copy); `v` is left empty.
fn take_value(v: &mut ffi::isolet_value) -> Vec<u8> {
    let (ptr, len, cap) = (v.ptr, v.len, v.cap);
    *v = ffi::isolet_value { ptr: std::ptr::null_mut(), len: 0, cap: 0 };
    if ptr.is_null() || cap == 0 {
        return Vec::new();
    }
    // SAFETY: `ptr` is a block of `cap` bytes from Rust's global allocator with align 1
    // (isolet_value_realloc), of which the first `len <= cap` are initialized.
    let mut bytes = unsafe { Vec::from_raw_parts(ptr, len.min(cap), cap) };
    // V8 grows its buffer by doubling: give back a large unused tail (the allocator
    // shrinks in place, no copy), as the result may be held for a while.
    if bytes.capacity() - bytes.len() > (bytes.len() / 8).max(4096) {
        bytes.shrink_to_fit();
    }
    bytes
}

/// Host bytes as they enter the sandbox (a reply, a data answer, call arguments): every
/// resizable ArrayBuffer in them made a fixed-length one of its current length
/// (isolet-core `fixed_length_buffers`), so a buffer from the host never grows the run past
/// its memory limit (V8 reserves a resizable buffer's maximum outside the heap and the
/// ArrayBuffer budget). `Ok(None)`: nothing to change. Bytes holding a `~` that cannot be
/// read as the bridge writes them are refused rather than trusted.
fn fixed_input(bytes: &[u8]) -> Result<Option<Vec<u8>>, String> {
    isolet_core::fixed_length_buffers(bytes).map_err(|e| format!("a value from the host could not be read: {e}"))
}

fn take_bytes(b: &mut ffi::isolet_bytes) -> Option<Vec<u8>> {
    if b.ptr.is_null() {
        return None;
    }
    // SAFETY: the seam filled `b`; we copy, then free with its allocator.
    let v = unsafe { bytes(b.ptr, b.len) }.to_vec();
    unsafe { ffi::isolet_bytes_free(b) };
    Some(v)
}

fn empty_error() -> ffi::isolet_error {
    let e = || ffi::isolet_bytes { ptr: std::ptr::null_mut(), len: 0 };
    ffi::isolet_error {
        name: e(),
        constructor: e(),
        message: e(),
        stack: e(),
        value_kind: 0,
        line: 0,
        column: 0,
        position: -1,
        fields: e(),
    }
}

/// The thrown value's parts, named by `seam_policy::thrown_name`.
fn take_error(e: &mut ffi::isolet_error) -> Thrown {
    let text = |b: &mut ffi::isolet_bytes| take_bytes(b).map(|v| String::from_utf8_lossy(&v).into_owned());
    let name = text(&mut e.name);
    let constructor = text(&mut e.constructor);
    let stack = text(&mut e.stack).filter(|s| !s.is_empty());
    Thrown {
        name: seam_policy::thrown_name(ThrownKind::from_seam(e.value_kind), name.as_deref(), constructor.as_deref()),
        message: text(&mut e.message).unwrap_or_default(),
        stack,
        line: (e.line > 0).then_some(e.line as u32),
        column: (e.column > 0).then_some(e.column as u32),
        fields: take_bytes(&mut e.fields),
    }
}

/// A syntax error with its offset in the compiled source.
fn take_syntax(e: &mut ffi::isolet_error) -> seam_policy::SyntaxAt {
    let position = u32::try_from(e.position).ok();
    seam_policy::SyntaxAt { thrown: take_error(e), position }
}

/// Joins names with NUL for the seam; names are checked identifiers or fixed words.
fn nul_joined(names: &[&str]) -> String {
    names.join("\0")
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
    /// ops' DOMException-class errors are made by script `error_script`'s `makeError`.
    pub(crate) fn install_ops(&mut self, globals: &[(&str, u32)], error_script: u32) -> Step {
        let names = nul_joined(&globals.iter().map(|(name, _)| *name).collect::<Vec<_>>());
        let scripts: Vec<u32> = globals.iter().map(|(_, script)| *script).collect();
        // SAFETY: live sandbox, valid buffers for the call.
        let rc = unsafe {
            ffi::isolet_sandbox_install_ops(self.raw, names.as_ptr(), names.len(), scripts.as_ptr(), scripts.len(), error_script)
        };
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

    /// The limits of the run now served on the isolate's module graph.
    pub(crate) fn set_module_limits(&mut self, limits: ModuleLimits) {
        // SAFETY: the callbacks box lives as long as self.
        lock(unsafe { &(*self.callbacks).modules }).graph.set_limits(limits);
    }

    /// Runs `code` as the root module (`modules::ROOT_MODULE`): loads and links what it
    /// imports, then evaluates it.
    fn run_module(&mut self, code: &str) -> Step {
        // SAFETY: the callbacks box lives as long as self.
        let callbacks = unsafe { &*self.callbacks };
        let loaded = {
            let mut state = lock(&callbacks.modules);
            let host = callbacks.host.as_ref();
            let mut load = || -> Result<u32, LoadError> {
                let id = load_module(self.raw, host, &mut state, modules::ROOT_MODULE, code, false)?;
                state.root = Some(id);
                state.unlinked.push(id);
                link_pending(self.raw, host, &mut state, id)?;
                Ok(id)
            };
            load()
        };
        let id = match loaded {
            _ if self.panicked() => return Step::Terminated,
            Ok(id) => id,
            Err(e) => return e.into_step(),
        };
        let mut err = empty_error();
        // SAFETY: live sandbox, valid out-pointer.
        let rc = unsafe { ffi::isolet_module_run(self.raw, id, &mut err) };
        let step = match rc {
            _ if self.panicked() => Step::Terminated,
            ffi::ISOLET_OK => Step::Settled,
            ffi::ISOLET_PENDING => Step::Pending,
            ffi::ISOLET_THREW => Step::Threw(take_error(&mut err)),
            _ => Step::Terminated,
        };
        // SAFETY: frees leftovers, null-safe.
        unsafe { ffi::isolet_error_free(&mut err) };
        if matches!(step, Step::Settled | Step::Pending) {
            // Their top levels ran: the caches hold what that compiled too.
            self.flush_module_caches();
        }
        step
    }

    /// Makes the code caches the engine's cache asked for, of the modules compiled since
    /// the last time (after their code ran, so the functions it compiled are in them).
    pub(crate) fn flush_module_caches(&mut self) {
        // SAFETY: the callbacks box lives as long as self.
        let pending = std::mem::take(&mut lock(unsafe { &(*self.callbacks).modules }).produce);
        for p in pending {
            if self.panicked() {
                return;
            }
            let mut out = ffi::isolet_bytes { ptr: std::ptr::null_mut(), len: 0 };
            // SAFETY: live sandbox, valid out-pointer; a released or unknown id fails.
            let rc = unsafe { ffi::isolet_module_create_code_cache(self.raw, p.id, &mut out) };
            if let (ffi::ISOLET_OK, Some(data)) = (rc, take_bytes(&mut out)) {
                p.code.admit(p.key, &Unit { kind: p.kind, origin: &p.origin, source: &p.source }, data);
            }
        }
    }

    /// Persistent sandboxes: the run's own `modules` that name a module an earlier run
    /// loaded from another source (which cannot be replaced), as the run's error message.
    pub(crate) fn replaced_module(&self, given: &std::collections::BTreeMap<String, String>) -> Option<String> {
        // SAFETY: the callbacks box lives as long as self.
        let state = lock(unsafe { &(*self.callbacks).modules });
        given.iter().find(|(key, source)| state.graph.loaded_otherwise(key, source)).map(|(key, _)| {
            format!("modules['{key}']: module '{key}' was loaded by an earlier run of this sandbox from another source; a loaded module cannot be replaced")
        })
    }

    /// Evaluates the engine's prelude module `key` (its imports among the prelude's
    /// modules) in this fresh context: what is wrong with it, naming it, for `init()`.
    pub(crate) fn check_prelude_module(&mut self, key: &str) -> Result<(), Step> {
        // SAFETY: the callbacks box lives as long as self.
        let callbacks = unsafe { &*self.callbacks };
        let loaded = {
            let mut state = lock(&callbacks.modules);
            let host = callbacks.host.as_ref();
            let mut load = || -> Result<u32, LoadError> {
                let id = ensure_module(self.raw, host, &mut state, key, "prelude")?;
                link_pending(self.raw, host, &mut state, id)?;
                Ok(id)
            };
            load()
        };
        let id = match loaded {
            _ if self.panicked() => return Err(Step::Terminated),
            Ok(id) => id,
            Err(e) => return Err(e.into_step()),
        };
        let mut err = empty_error();
        // SAFETY: live sandbox, valid out-pointer.
        let rc = unsafe { ffi::isolet_module_evaluate(self.raw, id, &mut err) };
        let out = match rc {
            _ if self.panicked() => Err(Step::Terminated),
            ffi::ISOLET_OK | ffi::ISOLET_PENDING => Ok(()),
            ffi::ISOLET_THREW => Err(Step::Threw(take_error(&mut err))),
            _ => Err(Step::Terminated),
        };
        // SAFETY: frees leftovers, null-safe.
        unsafe { ffi::isolet_error_free(&mut err) };
        if out.is_ok() {
            self.flush_module_caches();
        }
        out
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
            None => self.run_uncached(&wrapped, seam_policy::SCRIPT_NAME, &mut err),
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
            ffi::ISOLET_TOO_LARGE => {
                let (name, message) = seam_policy::CODE_TOO_LONG;
                Step::Syntax(Thrown { name: name.into(), message: message.into(), ..Default::default() })
            }
            _ => Step::Terminated,
        };
        // SAFETY: frees whatever the seam left in err (idempotent on null fields).
        unsafe { ffi::isolet_error_free(&mut err) };
        step
    }

    fn run_uncached(&mut self, wrapped: &seam_policy::WrappedSource, origin: &str, err: &mut ffi::isolet_error) -> i32 {
        let source = &wrapped.source;
        // SAFETY: live sandbox, valid buffers.
        unsafe {
            ffi::isolet_sandbox_run(
                self.raw,
                source.as_ptr(),
                source.len(),
                origin.as_ptr(),
                origin.len(),
                wrapped.column_offset,
                i32::from(wrapped.call),
                err,
            )
        }
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
        let mut rejected = 0;
        // SAFETY: live sandbox, valid buffers; `data` outlives the call (V8 reads it only
        // while compiling).
        let rc = unsafe {
            ffi::isolet_sandbox_run_cached(
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
        if rejected != 0 {
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
            ffi::ISOLET_TOO_LARGE => {
                let (name, message) = seam_policy::CODE_TOO_LONG;
                Step::Syntax(Thrown { name: name.into(), message: message.into(), ..Default::default() })
            }
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
