// isolet_v8.h: the only interface between isolet's Rust code and V8.
//
// Every function here is plain C: opaque handles, pointer + length pairs, integers and
// callbacks (function pointer + context). No V8 handle and no C++ exception crosses it.
// Unless a comment says otherwise, a function must be called on the thread that created
// the sandbox (its "isolate thread").
#ifndef ISOLET_V8_H_
#define ISOLET_V8_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct isolet_sandbox isolet_sandbox;

// A byte buffer allocated by this layer (malloc); release with isolet_bytes_free.
typedef struct {
  uint8_t* ptr;
  size_t len;
} isolet_bytes;

// A serialized value (the run's result) in memory from Rust's allocator, so Rust adopts
// it as a Vec without a copy: `cap` is the size of the allocation, `len` the bytes used.
// The two functions are defined on the Rust side (src/v8/mod.rs); realloc(NULL, 0, n)
// allocates, and a NULL return (out of memory) leaves the old block in place.
typedef struct {
  uint8_t* ptr;
  size_t len;
  size_t cap;
} isolet_value;
uint8_t* isolet_value_realloc(uint8_t* ptr, size_t old_cap, size_t new_cap);
void isolet_value_free(uint8_t* ptr, size_t cap);

// What kind of value was thrown (Rust picks the reported name from it).
enum {
  ISOLET_VALUE_NATIVE_ERROR = 0,  // an Error object made by V8 or an Error subclass
  ISOLET_VALUE_OBJECT = 1,        // any other object (functions included)
  ISOLET_VALUE_STRING = 2,
  ISOLET_VALUE_NUMBER = 3,
  ISOLET_VALUE_BOOLEAN = 4,
  ISOLET_VALUE_UNDEFINED = 5,
  ISOLET_VALUE_NULL = 6,
  ISOLET_VALUE_SYMBOL = 7,
  ISOLET_VALUE_BIGINT = 8,
};

// What the sandboxed code threw (or failed to compile with), as raw parts: each string
// is UTF-8, cut to the config's max_error_text_bytes; a field is {NULL, 0} when absent
// (e.g. `name` when the value has no string `name`).
typedef struct {
  isolet_bytes name;         // the value's `name` property, when it is a string
  isolet_bytes constructor;  // the object's constructor name (V8's, runs no JS)
  isolet_bytes message;
  isolet_bytes stack;
  int32_t value_kind;  // ISOLET_VALUE_*
  int32_t line;        // 1-based, 0 when unknown
  int32_t column;      // 1-based, 0 when unknown
  int32_t position;    // of a syntax error: 0-based UTF-16 offset in the compiled source, else -1
  // A thrown object's own enumerable string-keyed fields that can be copied, serialized
  // (ValueSerializer) as one object of at most max_error_text_bytes; {NULL, 0} when none.
  isolet_bytes fields;
} isolet_error;

// Status codes returned by the functions below.
enum {
  ISOLET_OK = 0,          // finished; a value is available
  ISOLET_PENDING = 1,     // a promise is still pending
  ISOLET_THREW = 2,       // the script threw; the error is filled in
  ISOLET_TERMINATED = 3,  // execution was terminated (limit, abort or OOM)
  ISOLET_SYNTAX = 4,      // the code did not compile; the error is filled in
  ISOLET_TOO_LARGE = 5,   // a value to copy out (or the code) exceeded its byte cap
  ISOLET_FAILED = 6,      // internal failure (e.g. the isolate could not be created)
  ISOLET_ABSENT = 7,      // on_data_request: not a data key, the read falls through
  ISOLET_UNCLONEABLE = 8, // take_result: a value in the result cannot be copied; err->message
                          // names the first one (`result.items[3].onClick: function`)
};

// Texts the seam throws into the sandbox; Rust writes the words (see `text` below).
enum {
  ISOLET_TEXT_HOST_ARGS_TOO_LARGE = 0,  // a: the byte cap
  ISOLET_TEXT_BUFFER_OVER_BUDGET = 1,   // a: bytes asked for, b: the ArrayBuffer budget
  ISOLET_TEXT_DATA_READ_ONLY = 2,
  ISOLET_TEXT_HOST_REPLY_UNREADABLE = 3,
};

// A host call refused before it reached the host (see on_host_call).
typedef struct {
  uint32_t error_class;  // ISOLET_ERROR_CLASS_*
  size_t name_len;
  size_t message_len;
} isolet_refusal;

// Native ops: the one generic way sandbox JavaScript calls Rust synchronously (see
// isolet_sandbox_install_ops). A value crossing in either direction is one of these kinds.
enum {
  ISOLET_OP_UNDEFINED = 0,
  ISOLET_OP_NUMBER = 1,  // `number`
  ISOLET_OP_BOOL = 2,    // `number` is 0 or 1
  // In: a string's UTF-8 (lone surrogates replaced by U+FFFD), in memory charged to the
  // run's ArrayBuffer budget while the op runs. Out: UTF-8 (Rust's allocator).
  ISOLET_OP_STRING = 3,
  // In: the bytes an ArrayBuffer or ArrayBuffer view covers, in place (no copy; the op may
  // write them; {NULL, 0} when detached). Out: a new Uint8Array over the block itself, from
  // Rust's allocator, charged to the run's ArrayBuffer budget until it is collected.
  ISOLET_OP_BYTES = 4,
  ISOLET_OP_OTHER = 5,   // in: any other value (null, object, symbol, bigint), not converted
  ISOLET_OP_LATIN1 = 6,  // out: a string whose characters are these bytes (U+0000 to U+00FF)
  ISOLET_OP_NULL = 7,    // out: null
  // Out: a new promise, pending until isolet_sandbox_settle_op(`number`, ...): Rust chose
  // the id (an async op). Never in a settlement.
  ISOLET_OP_PROMISE = 8,
};
typedef struct {
  uint32_t kind;  // ISOLET_OP_*
  double number;
  uint8_t* ptr;
  size_t len;
  size_t cap;  // out: the block's size, for isolet_value_free
} isolet_op_value;
// An embedded script (see isolet_sandbox_install_ops): ASCII source that lives as long as
// the process (V8 reads it in place), its name in stacks, and its V8 code cache ({NULL, 0}:
// none), alive at least until the compile that asked for it returns.
typedef struct {
  const uint8_t* code;
  size_t len;
  const uint8_t* origin;
  size_t origin_len;
  const uint8_t* cache;
  size_t cache_len;
} isolet_script;
#define ISOLET_OP_MAX_ARGS 8
#define ISOLET_OP_MAX_RESULTS 16
// What an op gives back: `count` values (one: that value; otherwise an array of them), or,
// when it threw, the error: class ISOLET_ERROR_CLASS_*, name and message (UTF-8 strings).
// Every block in it is Rust's (isolet_value_realloc) and the seam frees or adopts it. The
// seam sets count, error_class, name and message before the call; values past `count` are
// never read.
typedef struct {
  uint32_t count;
  isolet_op_value values[ISOLET_OP_MAX_RESULTS];
  uint32_t error_class;
  isolet_op_value name;
  isolet_op_value message;
} isolet_op_result;

typedef struct {
  // Callbacks into Rust; all receive `ctx`. All run on the isolate thread except `wake`.
  void* ctx;
  // A platform task was posted for this isolate (any thread): the isolate thread should
  // call isolet_sandbox_run_tasks soon. Never called after isolet_sandbox_dispose starts.
  void (*wake)(void* ctx);
  // The sandbox called host function `fn_index`; `args` holds the serialized argument
  // array. Returns ISOLET_OK when the call went to the host (the reply comes later through
  // isolet_sandbox_fulfill_call / _reject_call), or ISOLET_THREW when it was refused at
  // once: *refusal holds the error's class and the lengths of its name and message, written
  // one after the other into buf (at most cap bytes), and the call's promise is rejected
  // now, keeping nothing for it outside the heap.
  int32_t (*on_host_call)(void* ctx, uint32_t fn_index, uint32_t call_id, const uint8_t* args,
                          size_t len, isolet_refusal* refusal, uint8_t* buf, size_t cap);
  // The sandbox read `data[key]` for a key not cached yet. Blocks until the host answers.
  // Returns ISOLET_OK with *out set to serialized bytes (malloc'd, owned by the caller),
  // ISOLET_THREW with *out holding a UTF-8 message to throw, ISOLET_ABSENT (the key is
  // never a data key, e.g. the `then` promise machinery probes) or ISOLET_TERMINATED.
  // `key` holds at most max_data_key_bytes of the key's UTF-8.
  int32_t (*on_data_request)(void* ctx, const uint8_t* key, size_t key_len, isolet_bytes* out);
  // The heap reached its limit (called inside a GC on the isolate thread). The run must
  // be terminated from another thread: V8 13 ignores TerminateExecution issued from
  // inside the near-heap-limit callback.
  void (*on_heap_limit)(void* ctx);
  // V8 hit a fatal out-of-memory condition on the isolate thread (e.g. "young object
  // promotion failed" during a GC), which the near-heap-limit callback cannot turn into
  // a termination, or the run kept allocating through every headroom the near-heap-limit
  // callback grants with its termination pending (handed over then, before V8's fatal
  // path prints to the process's stderr and grows the heap in failing GCs). `held_bytes`:
  // what the isolate holds (its heap at that moment and its ArrayBuffers). Must not
  // return: returning lets V8 abort the whole process.
  void (*on_fatal_oom)(void* ctx, size_t held_bytes);
  // The sandbox called native op `op` with `argc` arguments (see ISOLET_OP_*): returns
  // ISOLET_OK (*result holds its values), ISOLET_THREW (*result holds the error) or
  // ISOLET_TERMINATED (the run is being stopped). Runs JS never; must not call the seam.
  int32_t (*on_op)(void* ctx, uint32_t op, isolet_op_value* args, size_t argc, isolet_op_result* result);
  // Embedded script `index`: ISOLET_OK with *script filled in, or ISOLET_ABSENT.
  int32_t (*on_script)(void* ctx, uint32_t index, isolet_script* script);
  // The code cache V8 made for embedded script `index` (the bytes are the seam's).
  void (*on_script_cache)(void* ctx, uint32_t index, const uint8_t* data, size_t len);
  // Writes the text for ISOLET_TEXT_* `what` (numbers in a, b) into buf, at most cap
  // bytes of UTF-8; returns the bytes written.
  size_t (*text)(void* ctx, uint32_t what, uint64_t a, uint64_t b, uint8_t* buf, size_t cap);
  // Heap budget: V8 heap limit (young + old generation) and ArrayBuffer bytes.
  size_t heap_limit_bytes;
  size_t array_buffer_limit_bytes;
  // Headroom granted each time the heap limit is reached, so V8 can unwind the
  // terminated script instead of aborting, and how many times it is granted.
  size_t heap_headroom_bytes;
  uint32_t max_heap_limit_raises;
  // The run ends as out of memory (as at the heap limit) when its young large-object space
  // (where V8 grants one object of any size) is seen above this at a GC, or its used heap
  // after a full GC (what is live) is.
  size_t heap_ceiling_bytes;
  // Longest text copied out of a thrown value (each of name, message, stack).
  size_t max_error_text_bytes;
  // Bytes of a data key copied out of the heap (enough for Rust to refuse a longer key).
  size_t max_data_key_bytes;
  // A JSON.parse text with more places where a value or key can start ends the run as
  // out of memory before the parse (V8's parser keeps a handle per value outside the
  // heap and checks no interrupt; see isolet_json_scan_feed).
  uint64_t max_json_values;
} isolet_sandbox_config;

// A JSON.parse text's scan, fed in pieces (defined on the Rust side, src/v8/mod.rs;
// layout: isolet-core's seam_policy::JsonScan). Start it as {0, max_values, 0, 0, 0}.
typedef struct {
  uint64_t values;
  uint64_t max_values;
  uint8_t in_string;
  uint8_t escaped;
  uint8_t started;
} isolet_json_scan;
// Counts `len` characters (`char_size` 1: one-byte, 2: UTF-16 units); returns 0 once the
// text holds more than `max_values`, else 1.
int32_t isolet_json_scan_feed(isolet_json_scan* scan, const void* chars, size_t len,
                              uint32_t char_size);

// Main thread, once, while Node's JS is running (at addon load): captures Node's platform.
// `main_uses_node_snapshot`: Node's main isolate started from Node's startup snapshot
// (not `--no-node-snapshot`); on V8 < 12 sandbox isolates then start from it too, since
// the process shares one read-only heap. Returns 0 on success, nonzero if no Node
// environment is current.
int32_t isolet_v8_init(int32_t main_uses_node_snapshot);
// The V8 version string, e.g. "11.3.244.8-node.33".
const char* isolet_v8_version(void);
// V8::SetFlagsFromString: process-wide, affects code compiled afterwards (Node's too).
void isolet_v8_set_flags(const char* flags, size_t len);

// Creates an isolate registered with Node's platform, with limits and a fresh context
// holding V8's built-ins, ArrayBuffer constructors that charge resizable buffers to the
// budget, and nothing else. NULL on failure.
isolet_sandbox* isolet_sandbox_new(const isolet_sandbox_config* config);
// Disposes the isolate and frees everything; `sb` is invalid afterwards.
void isolet_sandbox_dispose(isolet_sandbox* sb);
// Caps on serialized values copied out: host-call arguments, and the final result.
void isolet_sandbox_set_copy_limits(isolet_sandbox* sb, size_t max_message_bytes,
                                    size_t max_output_bytes);
// The raw isolate, for isolet_isolate_terminate.
void* isolet_sandbox_isolate(isolet_sandbox* sb);
// Any thread: stops running JS as soon as V8 checks for interrupts.
void isolet_isolate_terminate(void* isolate);

// Globals the run may use. Every property the seam writes on a sandbox object is
// defined (never assigned), so no setter the sandbox adds can observe it. (`console` is
// an embedded script's: see isolet_sandbox_install_ops.)
//
// Deletes `globalThis[object][key]`, or `globalThis[key]` when object_len is 0.
int32_t isolet_sandbox_delete_global(isolet_sandbox* sb, const uint8_t* object, size_t object_len,
                                     const uint8_t* key, size_t key_len);
// Deletes `globalThis[ns]` after cutting the `constructor` link of each of its member
// functions' prototypes, so objects made by them cannot lead back to it.
int32_t isolet_sandbox_remove_namespace(isolet_sandbox* sb, const uint8_t* ns, size_t ns_len);
// Defines (never assigns) `globalThis[name]` as a host function: a call serializes its
// arguments (at most the run's max_message_bytes) and hands them to on_host_call as host
// function `fn_index`; it returns a promise, settled by isolet_sandbox_fulfill_call or
// isolet_sandbox_reject_call, or rejected at once when the call is refused.
int32_t isolet_sandbox_add_host_function(isolet_sandbox* sb, const uint8_t* name, size_t len,
                                         uint32_t fn_index);
// Installs `globalThis[ns]` as a frozen, null-prototype, read-only object holding host
// functions: `names` is `count` identifiers joined by '\0', `fn_indices` their indices.
int32_t isolet_sandbox_add_host_namespace(isolet_sandbox* sb, const uint8_t* ns, size_t ns_len,
                                          const uint8_t* names, size_t names_len,
                                          const uint32_t* fn_indices, size_t count);
// Installs a read-only global `name` whose properties come from on_data_request.
int32_t isolet_sandbox_add_data_object(isolet_sandbox* sb, const uint8_t* name, size_t len);

// A compiled WebAssembly module that any isolate of the process can instantiate
// without compiling again (V8 shares the native module). Free with
// isolet_wasm_module_free, on any thread.
typedef struct isolet_wasm_module isolet_wasm_module;
// Compiles `wasm` in the sandbox's isolate: ISOLET_OK (*out set) or ISOLET_THREW (*err).
int32_t isolet_wasm_compile(isolet_sandbox* sb, const uint8_t* wasm, size_t wasm_len,
                            isolet_wasm_module** out, isolet_error* err);
// Instantiates a compiled module (no imports) at globalThis[ns][name] (`ns` is created
// as a plain object if absent), with the context's original WebAssembly.Instance (kept
// when the sandbox was created), so it works after isolet_sandbox_remove_namespace took
// `WebAssembly` away. ISOLET_OK, ISOLET_THREW (*err) or ISOLET_FAILED.
int32_t isolet_sandbox_add_wasm_instance(isolet_sandbox* sb, const uint8_t* ns, size_t ns_len,
                                         const uint8_t* name, size_t name_len,
                                         const isolet_wasm_module* module, isolet_error* err);
void isolet_wasm_module_free(isolet_wasm_module* module);

// Compiles and starts `code` as a classic script named `origin` whose first line starts
// at `column_offset`; with `call_completion`, the script's value (a function) is then
// called with no arguments and its return value is the result. ISOLET_OK or
// ISOLET_PENDING (promise), ISOLET_THREW, ISOLET_SYNTAX, ISOLET_TOO_LARGE (longer than
// V8's longest string) or ISOLET_TERMINATED. A V8 code cache `cache` (`cache_len` bytes,
// none when 0) is consumed if V8 accepts it; *cache_rejected is 1 when it was given and
// refused (wrong V8 version or flags, or not this source's length), and the code was
// compiled from source. The compiled script is kept for isolet_sandbox_create_code_cache.
int32_t isolet_sandbox_run(isolet_sandbox* sb, const uint8_t* code, size_t len,
                           const uint8_t* origin, size_t origin_len, int32_t column_offset,
                           int32_t call_completion, const uint8_t* cache, size_t cache_len,
                           int32_t* cache_rejected, isolet_error* err);
// The code cache (bytecode, no heap state) of the script isolet_sandbox_run compiled
// last, including the functions compiled since: ISOLET_OK (*out set) or ISOLET_FAILED.
int32_t isolet_sandbox_create_code_cache(isolet_sandbox* sb, isolet_bytes* out);
// Compiles `code` without running it: as a classic script, or with `as_function_body` as
// the body of a plain function (V8 parses it to the end of `code`). ISOLET_OK,
// ISOLET_SYNTAX (*err, with its position), ISOLET_TOO_LARGE or ISOLET_TERMINATED.
int32_t isolet_sandbox_check_syntax(isolet_sandbox* sb, const uint8_t* code, size_t len,
                                    const uint8_t* origin, size_t origin_len,
                                    int32_t column_offset, int32_t as_function_body,
                                    isolet_error* err);
// Persistent sandboxes: calls the global function `name` with the serialized array `args`
// as its arguments, in the context earlier runs left; its return value is the result, as
// for isolet_sandbox_run (ISOLET_OK, _PENDING, _THREW, _TERMINATED or _FAILED).
int32_t isolet_sandbox_call_global(isolet_sandbox* sb, const uint8_t* name, size_t name_len,
                                   const uint8_t* args, size_t args_len, isolet_error* err);
// Persistent sandboxes, between runs: drops the last result, the host calls and async op
// promises still pending, and cancels a termination left by the run, so the context
// serves another.
void isolet_sandbox_end_run(isolet_sandbox* sb);
// Runs microtasks and reports: ISOLET_OK (settled), ISOLET_PENDING or ISOLET_TERMINATED.
int32_t isolet_sandbox_poll(isolet_sandbox* sb);
// Copies the settled result out: ISOLET_OK (*value set), ISOLET_THREW (*err set),
// ISOLET_UNCLONEABLE (*err's message is the path of the first value that cannot be
// copied), ISOLET_TOO_LARGE or ISOLET_TERMINATED.
int32_t isolet_sandbox_take_result(isolet_sandbox* sb, isolet_value* value, isolet_error* err);
// Unhandled rejections: promises rejected while no handler was attached, that still have
// none (V8's promise-reject callback; at most 1000 are kept, the rest only counted). The
// run's own completion is never one. clear forgets them (a run starts); next describes
// one (its reason, and where it was rejected when the reason has no stack) into *err and
// forgets it: ISOLET_OK, ISOLET_ABSENT when none is left, ISOLET_TERMINATED; dropped is
// how many were counted but not kept since the last clear.
void isolet_sandbox_clear_rejections(isolet_sandbox* sb);
int32_t isolet_sandbox_next_rejection(isolet_sandbox* sb, isolet_error* err);
uint32_t isolet_sandbox_dropped_rejections(isolet_sandbox* sb);
// Runs due platform tasks; returns milliseconds until the next delayed task, or -1.
int64_t isolet_sandbox_run_tasks(isolet_sandbox* sb);

// Settles a host call's promise. `bytes` is a serialized value.
int32_t isolet_sandbox_fulfill_call(isolet_sandbox* sb, uint32_t call_id, const uint8_t* bytes,
                                    size_t len);
// Rejects it with a fresh sandbox Error of class ISOLET_ERROR_CLASS_* whose `name` is
// `name` (unless name_len is 0): the host's error object never enters the isolate.
enum {
  ISOLET_ERROR_CLASS_ERROR = 0,
  ISOLET_ERROR_CLASS_TYPE = 1,
  ISOLET_ERROR_CLASS_RANGE = 2,
  ISOLET_ERROR_CLASS_REFERENCE = 3,
  // Native ops only: the seam script's makeError(message, name) (isolet_sandbox_install_ops),
  // e.g. a DOMException.
  ISOLET_ERROR_CLASS_INSTALLED = 4,
};
int32_t isolet_sandbox_reject_call(isolet_sandbox* sb, uint32_t call_id, uint32_t error_class,
                                   const uint8_t* name, size_t name_len, const uint8_t* message,
                                   size_t message_len);

// ES modules. A sandbox keeps every module it compiled (by id, from 0) for its life; Rust
// keeps the graph (keys, limits) and links each module's requests to the ids it chose.
//
// Compiles `code` as a module named `name` (its stacks show that name): ISOLET_OK (*id
// set), ISOLET_SYNTAX (*err, with line and column), ISOLET_TOO_LARGE or ISOLET_TERMINATED.
// A V8 code cache is consumed as isolet_sandbox_run does: *cache_rejected is 1 when it was
// given and refused (the module was compiled from source).
int32_t isolet_module_compile(isolet_sandbox* sb, const uint8_t* code, size_t len,
                              const uint8_t* name, size_t name_len, const uint8_t* cache,
                              size_t cache_len, int32_t* cache_rejected, uint32_t* id,
                              isolet_error* err);
// The code cache (bytecode, no heap state) of module `id`, with the functions compiled
// since it was: ISOLET_OK (*out set) or ISOLET_FAILED.
int32_t isolet_module_create_code_cache(isolet_sandbox* sb, uint32_t id, isolet_bytes* out);
// 1 once module `id` is instantiated (it and everything it imports are linked in V8).
int32_t isolet_module_instantiated(isolet_sandbox* sb, uint32_t id);
// Forgets module `id` (a persistent sandbox's finished root, a module that never linked);
// a later compile may take its id. No instantiated module may still link to it.
void isolet_module_release(isolet_sandbox* sb, uint32_t id);
// Instantiates and evaluates module `id` and runs microtasks, leaving the run's result
// alone (a prelude module's check): ISOLET_OK (evaluated), ISOLET_PENDING (top-level await
// still waiting), ISOLET_THREW (*err), ISOLET_TERMINATED or ISOLET_FAILED.
int32_t isolet_module_evaluate(isolet_sandbox* sb, uint32_t id, isolet_error* err);
// The specifiers module `id` imports, in V8's order, joined by '\0' into *out (malloc'd;
// release with isolet_bytes_free); *count is how many. ISOLET_OK or ISOLET_FAILED.
int32_t isolet_module_requests(isolet_sandbox* sb, uint32_t id, isolet_bytes* out, size_t* count);
// Module `id`'s requests (same order) resolve to modules `targets`.
int32_t isolet_module_link(isolet_sandbox* sb, uint32_t id, const uint32_t* targets, size_t count);
// Instantiates module `id` (every module it reaches must be linked) and evaluates it; the
// run's result is then its `default` export, else its namespace copied to a plain object.
// As isolet_sandbox_run: ISOLET_OK, ISOLET_PENDING (top-level await), ISOLET_THREW or
// ISOLET_TERMINATED.
int32_t isolet_module_run(isolet_sandbox* sb, uint32_t id, isolet_error* err);
// import(): `on_import` gets the importer's name and the specifier (each at most
// `max_specifier_bytes` + 1 bytes of it) and returns ISOLET_OK with *id set to a module
// whose graph is linked, ISOLET_THREW with the class (ISOLET_ERROR_CLASS_*) and message
// (at most `cap` bytes into buf, *len its length) of the error the import's promise
// rejects with, or ISOLET_TERMINATED.
typedef int32_t (*isolet_import_fn)(void* ctx, const uint8_t* referrer, size_t referrer_len,
                                    const uint8_t* specifier, size_t specifier_len, uint32_t* id,
                                    uint32_t* error_class, uint8_t* buf, size_t cap, size_t* len);
void isolet_sandbox_set_import_handler(isolet_sandbox* sb, isolet_import_fn on_import,
                                       size_t max_specifier_bytes);

// Native ops: defines the global `names[i]` (`count` names joined by '\0') as a lazy data
// property (writable, configurable, not enumerable) whose value, computed on its first
// access, is exports[names[i]], `exports` being what embedded script `scripts[i]` gives.
// An embedded script (see on_script) is run at most once per context, on first use: its
// value, a function, is called with a frozen object `lib` of five native primitives, which
// JS cannot tell from built-ins and no sandbox code sees unless a script hands them out:
//   op(index, ...args)  calls on_op synchronously with op `index` and the arguments (at
//                       most ISOLET_OP_MAX_ARGS, converted as ISOLET_OP_* says; no sandbox
//                       code runs while they are) and returns what it gives back, or throws
//                       its error;
//   clone(value)        the structured clone of `value` (V8's serializer, as values cross
//                       the bridge), bounded by the run's ArrayBuffer budget; what cannot be
//                       cloned throws ISOLET_ERROR_CLASS_INSTALLED "DataCloneError";
//   load(index)         the exports of embedded script `index`;
//   host(index)         a new function that calls host function `index` as the one
//                       isolet_sandbox_add_host_function installs does (on_host_call, its
//                       promise settled by isolet_sandbox_fulfill_call / _reject_call), so
//                       a script can wrap a host function the run has without a global;
//   cloneKind(value)    how the structured clone treats `value`: "primitive", "leaf" (an
//                       object copied whole), "map", "set", "array", "object", or the kind
//                       it refuses ("function", "symbol", "Proxy", "Promise", ...);
// and what it returns is its exports. A script compiles with its code cache when on_script
// has one; else isolet_sandbox_cache_scripts makes one for on_script_cache. The seam calls
// two exports of script `seam_script`: makeError(message, name) makes the
// ISOLET_ERROR_CLASS_INSTALLED errors, uncloneablePath(result) names the value a result
// could not be copied for (ISOLET_UNCLONEABLE). ISOLET_OK, ISOLET_FAILED or
// ISOLET_TERMINATED; nothing runs (nor is compiled) until a run reads one of the globals.
int32_t isolet_sandbox_install_ops(isolet_sandbox* sb, const uint8_t* names, size_t names_len,
                                   const uint32_t* scripts, size_t count, uint32_t seam_script);

// Makes the code caches of the embedded scripts this sandbox compiled without one, for
// on_script_cache: after a run, so they hold the functions the run compiled too.
void isolet_sandbox_cache_scripts(isolet_sandbox* sb);

// Resolves the promise an op gave back as ISOLET_OP_PROMISE `id` with `value` (an op
// result value; the seam takes its block). The reactions run at the next microtask
// checkpoint (isolet_sandbox_poll). ISOLET_OK, ISOLET_FAILED (no such promise: settled, or
// dropped by isolet_sandbox_end_run) or ISOLET_TERMINATED.
int32_t isolet_sandbox_settle_op(isolet_sandbox* sb, uint32_t id, isolet_op_value* value);

// Heap statistics in bytes: current used heap, the highest value seen, and the most the
// young large-object space was seen holding (sampled at each GC and by this call).
void isolet_sandbox_heap(isolet_sandbox* sb, size_t* used, size_t* peak, size_t* peak_young_large);
// 1 if the run hit its memory limit (heap or ArrayBuffers).
int32_t isolet_sandbox_hit_memory_limit(isolet_sandbox* sb);

void isolet_bytes_free(isolet_bytes* bytes);
void isolet_error_free(isolet_error* err);

// On Node's own thread, for the host's writer of big arrays (lib/codec.js): the own
// enumerable string keys of object `value` (a napi_value) that are not array indices, as a
// napi_value of an array, or null (not an object, a Proxy, or it threw).
void* isolet_named_keys(void* value);

#ifdef __cplusplus
}
#endif

#endif  // ISOLET_V8_H_
