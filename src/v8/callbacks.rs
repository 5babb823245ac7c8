//! The callbacks V8 makes into Rust through the seam: each runs under `guarded`, so a
//! panic never unwinds into V8 or Node; and the two helpers the seam links against
//! (`isolet_json_scan_feed`, the serialized values' allocator).
use std::os::raw::c_void;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicPtr, Ordering};
use std::sync::{Arc, Mutex};

use isolet_core::modules;
use isolet_core::seam_policy::{self, SeamText};

use super::module_loader::{ensure_module, link_pending, module_thrown, LoadError, ModuleState};
use super::ops::{op_block, op_value, ByteView, OpArg, OpError};
use super::values::bytes;
use super::values::fixed_input;
use super::{ffi, lock, DataAnswer, SandboxHost};

/// What the seam's callbacks reach: the host, and what a panic needs to stop the run.
pub(super) struct Callbacks {
    pub(super) host: Arc<dyn SandboxHost>,
    /// The isolate, once it exists (callbacks may come while it is being created).
    pub(super) isolate: AtomicPtr<c_void>,
    /// A callback panicked: the run was terminated and ends as an internal failure.
    pub(super) panicked: AtomicBool,
    /// The sandbox, once it exists: `import()` compiles and links from inside V8.
    pub(super) raw: AtomicPtr<ffi::isolet_sandbox>,
    /// The isolate's module graph (its modules live as long as it does).
    pub(super) modules: Mutex<ModuleState>,
}

/// Runs callback body `f` so that a panic never unwinds into V8 or Node (which would
/// abort the process): the panic terminates the run and the callback returns `on_panic`.
pub(super) fn guarded<R>(ctx: *mut c_void, on_panic: R, f: impl FnOnce(&dyn SandboxHost) -> R) -> R {
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

pub(super) extern "C" fn wake_cb(ctx: *mut c_void) {
    guarded(ctx, (), |host| host.wake());
}

pub(super) extern "C" fn heap_limit_cb(ctx: *mut c_void) {
    guarded(ctx, (), |host| host.heap_limit());
}

pub(super) extern "C" fn fatal_oom_cb(ctx: *mut c_void, held_bytes: usize) {
    guarded(ctx, (), |host| host.fatal_oom(held_bytes));
    // Only a panic gets here; returning would let V8 abort the whole process.
    loop {
        std::thread::park();
    }
}

#[allow(clippy::too_many_arguments)] // the seam's flat C signature
pub(super) extern "C" fn host_call_cb(
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

pub(super) extern "C" fn script_cb(ctx: *mut c_void, index: u32, out: *mut ffi::isolet_script) -> i32 {
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

pub(super) extern "C" fn script_cache_cb(ctx: *mut c_void, index: u32, data: *const u8, len: usize) {
    // SAFETY: the seam passes its cache's bytes for the call.
    let data = unsafe { bytes(data, len) };
    guarded(ctx, (), |host| host.script_cache(index, data));
}

pub(super) extern "C" fn op_cb(
    ctx: *mut c_void,
    op: u32,
    args: *mut ffi::isolet_op_value,
    argc: usize,
    result: *mut ffi::isolet_op_result,
) -> i32 {
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
pub(super) fn copy_cut(text: &str, out: &mut [u8]) -> usize {
    let mut len = text.len().min(out.len());
    while !text.is_char_boundary(len) {
        len -= 1;
    }
    out[..len].copy_from_slice(&text.as_bytes()[..len]);
    len
}

pub(super) extern "C" fn text_cb(ctx: *mut c_void, what: u32, a: u64, b: u64, buf: *mut u8, cap: usize) -> usize {
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

pub(super) extern "C" fn data_request_cb(ctx: *mut c_void, key: *const u8, key_len: usize, out: *mut ffi::isolet_bytes) -> i32 {
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

#[allow(clippy::too_many_arguments)] // the seam's flat C signature
pub(super) extern "C" fn import_cb(
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
