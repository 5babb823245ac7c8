//! Raw declarations of `native/isolet_v8.h`. Only `super` (the safe wrapper) uses them.
#![allow(non_camel_case_types, dead_code)]
use std::os::raw::{c_char, c_void};

#[repr(C)]
pub struct isolet_sandbox {
    _unused: [u8; 0],
}

#[repr(C)]
pub struct isolet_wasm_module {
    _unused: [u8; 0],
}

#[repr(C)]
pub struct isolet_bytes {
    pub ptr: *mut u8,
    pub len: usize,
}

#[repr(C)]
pub struct isolet_value {
    pub ptr: *mut u8,
    pub len: usize,
    pub cap: usize,
}

#[repr(C)]
pub struct isolet_error {
    pub name: isolet_bytes,
    pub constructor: isolet_bytes,
    pub message: isolet_bytes,
    pub stack: isolet_bytes,
    pub value_kind: i32,
    pub line: i32,
    pub column: i32,
    pub position: i32,
    pub fields: isolet_bytes,
}

pub const ISOLET_OK: i32 = 0;
pub const ISOLET_PENDING: i32 = 1;
pub const ISOLET_THREW: i32 = 2;
pub const ISOLET_TERMINATED: i32 = 3;
pub const ISOLET_SYNTAX: i32 = 4;
pub const ISOLET_TOO_LARGE: i32 = 5;
pub const ISOLET_FAILED: i32 = 6;
pub const ISOLET_ABSENT: i32 = 7;
pub const ISOLET_UNCLONEABLE: i32 = 8;

/// A host call refused at once: its error's class and the lengths of the name and
/// message written one after the other into the seam's buffer.
#[repr(C)]
pub struct isolet_refusal {
    pub error_class: u32,
    pub name_len: usize,
    pub message_len: usize,
}

pub const ISOLET_OP_UNDEFINED: u32 = 0;
pub const ISOLET_OP_NUMBER: u32 = 1;
pub const ISOLET_OP_BOOL: u32 = 2;
pub const ISOLET_OP_STRING: u32 = 3;
pub const ISOLET_OP_BYTES: u32 = 4;
pub const ISOLET_OP_OTHER: u32 = 5;
pub const ISOLET_OP_LATIN1: u32 = 6;
pub const ISOLET_OP_NULL: u32 = 7;
pub const ISOLET_OP_PROMISE: u32 = 8;
pub const ISOLET_OP_MAX_ARGS: usize = 8;
pub const ISOLET_OP_MAX_RESULTS: usize = 16;
pub const ISOLET_ERROR_CLASS_INSTALLED: u32 = 4;

/// A native op's argument or result (`ISOLET_OP_*`).
#[repr(C)]
pub struct isolet_op_value {
    pub kind: u32,
    pub number: f64,
    pub ptr: *mut u8,
    pub len: usize,
    pub cap: usize,
}

#[repr(C)]
pub struct isolet_script {
    pub code: *const u8,
    pub len: usize,
    pub origin: *const u8,
    pub origin_len: usize,
    pub cache: *const u8,
    pub cache_len: usize,
}

#[repr(C)]
pub struct isolet_op_result {
    pub count: u32,
    pub values: [isolet_op_value; ISOLET_OP_MAX_RESULTS],
    pub error_class: u32,
    pub name: isolet_op_value,
    pub message: isolet_op_value,
}

#[repr(C)]
pub struct isolet_sandbox_config {
    pub ctx: *mut c_void,
    pub wake: extern "C" fn(ctx: *mut c_void),
    pub on_host_call: extern "C" fn(
        ctx: *mut c_void,
        fn_index: u32,
        call_id: u32,
        args: *const u8,
        len: usize,
        refusal: *mut isolet_refusal,
        buf: *mut u8,
        cap: usize,
    ) -> i32,
    pub on_data_request: extern "C" fn(ctx: *mut c_void, key: *const u8, key_len: usize, out: *mut isolet_bytes) -> i32,
    pub on_heap_limit: extern "C" fn(ctx: *mut c_void),
    pub on_fatal_oom: extern "C" fn(ctx: *mut c_void, held_bytes: usize),
    pub on_op: extern "C" fn(ctx: *mut c_void, op: u32, args: *mut isolet_op_value, argc: usize, result: *mut isolet_op_result) -> i32,
    pub on_script: extern "C" fn(ctx: *mut c_void, index: u32, script: *mut isolet_script) -> i32,
    pub on_script_cache: extern "C" fn(ctx: *mut c_void, index: u32, data: *const u8, len: usize),
    pub text: extern "C" fn(ctx: *mut c_void, what: u32, a: u64, b: u64, buf: *mut u8, cap: usize) -> usize,
    pub heap_limit_bytes: usize,
    pub array_buffer_limit_bytes: usize,
    pub heap_headroom_bytes: usize,
    pub max_heap_limit_raises: u32,
    pub heap_ceiling_bytes: usize,
    pub max_error_text_bytes: usize,
    pub max_data_key_bytes: usize,
    pub max_json_values: u64,
}

/// `import()`: see `isolet_import_fn` in `native/isolet_v8.h`.
pub type isolet_import_fn = extern "C" fn(
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
) -> i32;

extern "C" {
    pub fn isolet_v8_init(main_uses_node_snapshot: i32) -> i32;
    pub fn isolet_v8_set_flags(flags: *const c_char, len: usize);
    pub fn isolet_v8_version() -> *const c_char;
    pub fn isolet_sandbox_new(config: *const isolet_sandbox_config) -> *mut isolet_sandbox;
    pub fn isolet_sandbox_dispose(sb: *mut isolet_sandbox);
    pub fn isolet_sandbox_set_copy_limits(sb: *mut isolet_sandbox, max_message: usize, max_output: usize);
    pub fn isolet_sandbox_isolate(sb: *mut isolet_sandbox) -> *mut c_void;
    pub fn isolet_isolate_terminate(isolate: *mut c_void);
    pub fn isolet_sandbox_delete_global(
        sb: *mut isolet_sandbox,
        object: *const u8,
        object_len: usize,
        key: *const u8,
        key_len: usize,
    ) -> i32;
    pub fn isolet_sandbox_remove_namespace(sb: *mut isolet_sandbox, ns: *const u8, ns_len: usize) -> i32;
    pub fn isolet_sandbox_add_host_function(sb: *mut isolet_sandbox, name: *const u8, len: usize, fn_index: u32) -> i32;
    pub fn isolet_sandbox_add_host_namespace(
        sb: *mut isolet_sandbox,
        ns: *const u8,
        ns_len: usize,
        names: *const u8,
        names_len: usize,
        fn_indices: *const u32,
        count: usize,
    ) -> i32;
    pub fn isolet_sandbox_add_data_object(sb: *mut isolet_sandbox, name: *const u8, len: usize) -> i32;
    pub fn isolet_wasm_compile(
        sb: *mut isolet_sandbox,
        wasm: *const u8,
        wasm_len: usize,
        out: *mut *mut isolet_wasm_module,
        err: *mut isolet_error,
    ) -> i32;
    pub fn isolet_sandbox_add_wasm_instance(
        sb: *mut isolet_sandbox,
        ns: *const u8,
        ns_len: usize,
        name: *const u8,
        name_len: usize,
        module: *const isolet_wasm_module,
        err: *mut isolet_error,
    ) -> i32;
    pub fn isolet_wasm_module_free(module: *mut isolet_wasm_module);
    #[allow(clippy::too_many_arguments)] // the seam's flat C signature
    pub fn isolet_sandbox_run(
        sb: *mut isolet_sandbox,
        code: *const u8,
        len: usize,
        origin: *const u8,
        origin_len: usize,
        column_offset: i32,
        call_completion: i32,
        cache: *const u8,
        cache_len: usize,
        cache_rejected: *mut i32,
        err: *mut isolet_error,
    ) -> i32;
    pub fn isolet_sandbox_create_code_cache(sb: *mut isolet_sandbox, out: *mut isolet_bytes) -> i32;
    pub fn isolet_sandbox_check_syntax(
        sb: *mut isolet_sandbox,
        code: *const u8,
        len: usize,
        origin: *const u8,
        origin_len: usize,
        column_offset: i32,
        as_function_body: i32,
        err: *mut isolet_error,
    ) -> i32;
    pub fn isolet_sandbox_call_global(
        sb: *mut isolet_sandbox,
        name: *const u8,
        name_len: usize,
        args: *const u8,
        args_len: usize,
        err: *mut isolet_error,
    ) -> i32;
    pub fn isolet_sandbox_end_run(sb: *mut isolet_sandbox);
    pub fn isolet_sandbox_poll(sb: *mut isolet_sandbox) -> i32;
    pub fn isolet_sandbox_take_result(sb: *mut isolet_sandbox, value: *mut isolet_value, err: *mut isolet_error) -> i32;
    pub fn isolet_sandbox_clear_rejections(sb: *mut isolet_sandbox);
    pub fn isolet_sandbox_next_rejection(sb: *mut isolet_sandbox, err: *mut isolet_error) -> i32;
    pub fn isolet_sandbox_dropped_rejections(sb: *mut isolet_sandbox) -> u32;
    pub fn isolet_sandbox_run_tasks(sb: *mut isolet_sandbox) -> i64;
    pub fn isolet_sandbox_fulfill_call(sb: *mut isolet_sandbox, call_id: u32, bytes: *const u8, len: usize) -> i32;
    pub fn isolet_sandbox_reject_call(
        sb: *mut isolet_sandbox,
        call_id: u32,
        error_class: u32,
        name: *const u8,
        name_len: usize,
        message: *const u8,
        message_len: usize,
    ) -> i32;
    #[allow(clippy::too_many_arguments)] // the seam's flat C signature
    pub fn isolet_module_compile(
        sb: *mut isolet_sandbox,
        code: *const u8,
        len: usize,
        name: *const u8,
        name_len: usize,
        cache: *const u8,
        cache_len: usize,
        cache_rejected: *mut i32,
        id: *mut u32,
        err: *mut isolet_error,
    ) -> i32;
    pub fn isolet_module_create_code_cache(sb: *mut isolet_sandbox, id: u32, out: *mut isolet_bytes) -> i32;
    pub fn isolet_module_instantiated(sb: *mut isolet_sandbox, id: u32) -> i32;
    pub fn isolet_module_release(sb: *mut isolet_sandbox, id: u32);
    pub fn isolet_module_evaluate(sb: *mut isolet_sandbox, id: u32, err: *mut isolet_error) -> i32;
    pub fn isolet_module_requests(sb: *mut isolet_sandbox, id: u32, out: *mut isolet_bytes, count: *mut usize) -> i32;
    pub fn isolet_module_link(sb: *mut isolet_sandbox, id: u32, targets: *const u32, count: usize) -> i32;
    pub fn isolet_module_run(sb: *mut isolet_sandbox, id: u32, err: *mut isolet_error) -> i32;
    pub fn isolet_sandbox_set_import_handler(sb: *mut isolet_sandbox, on_import: isolet_import_fn, max_specifier_bytes: usize);
    pub fn isolet_sandbox_cache_scripts(sb: *mut isolet_sandbox);
    pub fn isolet_sandbox_settle_op(sb: *mut isolet_sandbox, id: u32, value: *mut isolet_op_value) -> i32;
    pub fn isolet_sandbox_install_ops(
        sb: *mut isolet_sandbox,
        names: *const u8,
        names_len: usize,
        scripts: *const u32,
        count: usize,
        seam_script: u32,
    ) -> i32;
    pub fn isolet_sandbox_heap(sb: *mut isolet_sandbox, used: *mut usize, peak: *mut usize, peak_young_large: *mut usize);
    pub fn isolet_sandbox_hit_memory_limit(sb: *mut isolet_sandbox) -> i32;
    pub fn isolet_bytes_free(bytes: *mut isolet_bytes);
    pub fn isolet_error_free(err: *mut isolet_error);
}
