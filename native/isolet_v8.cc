// isolet_v8.cc: the one file that touches V8. It creates isolates registered with
// Node's platform, runs code, copies values with V8's ValueSerializer and reports back
// through the plain-C interface in isolet_v8.h. It holds primitives only: every limit,
// name, text and choice comes from Rust (src/v8, isolet_core::seam_policy).
#include "isolet_v8.h"

#include <node.h>
#include <v8.h>
#include <v8-version.h>

#include <algorithm>
#include <cctype>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#if defined(__linux__)
#include <sys/mman.h>
#endif

#define ISOLET_V8_AT_LEAST(major, minor) \
  (V8_MAJOR_VERSION > (major) || (V8_MAJOR_VERSION == (major) && V8_MINOR_VERSION >= (minor)))

#if !ISOLET_V8_AT_LEAST(12, 0)
// Node 20 (V8 11): V8 shares one read-only heap per process, set up from the snapshot of
// the first isolate, i.e. Node's own startup snapshot. An isolate deserialized from
// another blob (V8's built-in one, the default) resolves its read-only references against
// that foreign heap and reads the wrong objects (e.g. Math's `E` key became `'`). Node's
// workers avoid it by starting from Node's blob; these two functions do that and are
// exported by Node 20's binary (Node 20 is end of life, so they no longer change).
namespace node {
class SnapshotBuilder {
 public:
  static const SnapshotData* GetEmbeddedSnapshotData();
  static void InitializeIsolateParams(const SnapshotData* data,
                                      v8::Isolate::CreateParams* params);
};
}  // namespace node
#endif

namespace {

using v8::Context;
using v8::HandleScope;
using v8::Isolate;
using v8::Local;
using v8::MaybeLocal;
using v8::Object;
using v8::String;
using v8::TryCatch;
using v8::Value;

node::MultiIsolatePlatform* g_platform = nullptr;
#if !ISOLET_V8_AT_LEAST(12, 0)
// Node's startup snapshot, when the main isolate started from it (see above).
const node::SnapshotData* g_node_snapshot = nullptr;
#endif

using Clock = std::chrono::steady_clock;

// Foreground tasks V8 posts for one isolate. The isolate thread drains them; posting
// from any thread wakes it through the Rust callback.
class TaskQueue final : public v8::TaskRunner {
 public:
  TaskQueue(void (*wake)(void*), void* ctx) : wake_(wake), ctx_(ctx) {}

  // After close(), tasks are dropped and the wake callback is never called again.
  void close() {
    std::deque<std::unique_ptr<v8::Task>> ready;
    std::vector<Delayed> delayed;
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
      ready.swap(ready_);
      delayed.swap(delayed_);
    }
  }

  // Runs every task that is due; returns ms until the next delayed task, or -1.
  int64_t run_due() {
    std::vector<std::unique_ptr<v8::Task>> due;
    int64_t next_ms = -1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      while (!ready_.empty()) {
        due.push_back(std::move(ready_.front()));
        ready_.pop_front();
      }
      auto now = Clock::now();
      for (size_t i = 0; i < delayed_.size();) {
        if (delayed_[i].at <= now) {
          due.push_back(std::move(delayed_[i].task));
          delayed_.erase(delayed_.begin() + i);
        } else {
          auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(delayed_[i].at - now)
                        .count() + 1;
          if (next_ms < 0 || ms < next_ms) next_ms = ms;
          ++i;
        }
      }
    }
    for (auto& task : due) task->Run();
    return next_ms;
  }

  bool IdleTasksEnabled() override { return false; }
  bool NonNestableTasksEnabled() const override { return true; }
  bool NonNestableDelayedTasksEnabled() const override { return true; }

#if ISOLET_V8_AT_LEAST(12, 4)
 protected:
  void PostTaskImpl(std::unique_ptr<v8::Task> task, const v8::SourceLocation&) override {
    post(std::move(task), 0);
  }
  void PostNonNestableTaskImpl(std::unique_ptr<v8::Task> task,
                               const v8::SourceLocation&) override {
    post(std::move(task), 0);
  }
  void PostDelayedTaskImpl(std::unique_ptr<v8::Task> task, double seconds,
                           const v8::SourceLocation&) override {
    post(std::move(task), seconds);
  }
  void PostNonNestableDelayedTaskImpl(std::unique_ptr<v8::Task> task, double seconds,
                                      const v8::SourceLocation&) override {
    post(std::move(task), seconds);
  }
  void PostIdleTaskImpl(std::unique_ptr<v8::IdleTask>, const v8::SourceLocation&) override {}
#else
  void PostTask(std::unique_ptr<v8::Task> task) override { post(std::move(task), 0); }
  void PostNonNestableTask(std::unique_ptr<v8::Task> task) override {
    post(std::move(task), 0);
  }
  void PostDelayedTask(std::unique_ptr<v8::Task> task, double seconds) override {
    post(std::move(task), seconds);
  }
  void PostNonNestableDelayedTask(std::unique_ptr<v8::Task> task, double seconds) override {
    post(std::move(task), seconds);
  }
  void PostIdleTask(std::unique_ptr<v8::IdleTask>) override {}
#endif

 private:
  struct Delayed {
    Clock::time_point at;
    std::unique_ptr<v8::Task> task;
  };

  void post(std::unique_ptr<v8::Task> task, double seconds) {
    std::lock_guard<std::mutex> lock(mu_);
    if (closed_) return;
    if (seconds <= 0) {
      ready_.push_back(std::move(task));
    } else {
      auto delay = std::chrono::duration_cast<Clock::duration>(
          std::chrono::duration<double>(seconds));
      delayed_.push_back(Delayed{Clock::now() + delay, std::move(task)});
    }
    // Under the lock, so close() guarantees no wake after it returns.
    wake_(ctx_);
  }

  std::mutex mu_;
  bool closed_ = false;
  std::deque<std::unique_ptr<v8::Task>> ready_;
  std::vector<Delayed> delayed_;
  void (*wake_)(void*);
  void* ctx_;
};

class PlatformDelegate final : public node::IsolatePlatformDelegate {
 public:
  explicit PlatformDelegate(std::shared_ptr<TaskQueue> tasks) : tasks_(std::move(tasks)) {}
  std::shared_ptr<v8::TaskRunner> GetForegroundTaskRunner() override { return tasks_; }
  bool IdleTasksEnabled() override { return false; }

 private:
  std::shared_ptr<TaskQueue> tasks_;
};

// Big ArrayBuffers (a 32 MB reply, deserialized into a fresh buffer) spent most of their
// copy in 4 KB page faults; the whole 2 MB pages inside one are advised as transparent
// huge pages before anything touches them (THP in "madvise" mode, the usual default).
// Only whole aligned huge pages are advised, so resident memory never exceeds the length.
constexpr size_t kHugePage = size_t{2} << 20;
constexpr size_t kHugeAdviseMin = size_t{4} << 20;

void AdviseHugePages(void* data, size_t length) {
#if defined(__linux__) && defined(MADV_HUGEPAGE)
  if (data == nullptr || length < kHugeAdviseMin) return;
  uintptr_t begin = (reinterpret_cast<uintptr_t>(data) + kHugePage - 1) & ~(kHugePage - 1);
  uintptr_t end = (reinterpret_cast<uintptr_t>(data) + length) & ~(kHugePage - 1);
  // A hint: failure (e.g. THP disabled) leaves ordinary pages.
  if (end > begin) (void)madvise(reinterpret_cast<void*>(begin), end - begin, MADV_HUGEPAGE);
#else
  (void)data;
  (void)length;
#endif
}

// ArrayBuffer memory lives outside the V8 heap, so it is counted here against its own cap.
class CountingAllocator final : public v8::ArrayBuffer::Allocator {
 public:
  CountingAllocator(size_t limit, std::atomic<bool>* over_limit)
      : inner_(v8::ArrayBuffer::Allocator::NewDefaultAllocator()),
        limit_(limit),
        over_limit_(over_limit) {}
  ~CountingAllocator() override { delete inner_; }

  void set_isolate(Isolate* isolate) { isolate_ = isolate; }

  void* Allocate(size_t length) override {
    if (!reserve(length)) return nullptr;
    void* p = inner_->Allocate(length);
    if (p == nullptr) used_ -= length;
    AdviseHugePages(p, length);  // calloc leaves fresh mappings untouched
    return p;
  }
  void* AllocateUninitialized(size_t length) override {
    if (!reserve(length)) return nullptr;
    void* p = inner_->AllocateUninitialized(length);
    if (p == nullptr) used_ -= length;
    AdviseHugePages(p, length);
    return p;
  }
  void Free(void* data, size_t length) override {
    inner_->Free(data, length);
    used_ -= length;
  }

  // Memory V8 reserves past this allocator (resizable and growable buffers come from
  // its page allocator) is charged here too; false when it would pass the budget.
  bool charge(size_t length) {
    if (length > limit_) return false;
    size_t now = used_.fetch_add(length) + length;
    if (now <= limit_) return true;
    used_ -= length;
    return false;
  }
  void refund(size_t length) { used_ -= length; }
  size_t limit() const { return limit_; }
  size_t used() const { return used_.load(); }

 private:
  bool reserve(size_t length) {
    size_t now = used_.fetch_add(length) + length;
    if (now <= limit_) return true;
    used_ -= length;
    // Over budget is out of memory for the whole run, not a catchable RangeError.
    over_limit_->store(true);
    if (isolate_ != nullptr) isolate_->TerminateExecution();
    return false;
  }

  v8::ArrayBuffer::Allocator* inner_;
  size_t limit_;
  std::atomic<size_t> used_{0};
  std::atomic<bool>* over_limit_;
  Isolate* isolate_ = nullptr;
};

}  // namespace

struct isolet_wasm_module {
  v8::CompiledWasmModule compiled;
};

// A resizable ArrayBuffer or growable SharedArrayBuffer charged at its maximum byte
// length; refunded when the buffer is collected.
struct BufferCharge {
  isolet_sandbox* sb;
  size_t bytes;
  v8::Global<v8::Object> buffer;
};

struct isolet_sandbox {
  isolet_sandbox_config config;
  Isolate* isolate = nullptr;
  std::atomic<bool> hit_memory_limit{false};
  std::unique_ptr<CountingAllocator> allocator;
  std::shared_ptr<TaskQueue> tasks;
  std::unique_ptr<PlatformDelegate> delegate;
  v8::Global<Context> context;
  v8::Global<Value> completion;
  // The script isolet_sandbox_run compiled last, for isolet_sandbox_create_code_cache.
  v8::Global<v8::UnboundScript> last_script;
  v8::Global<Object> data_cache;
  // The context's own WebAssembly.Instance, taken before `WebAssembly` is removed from
  // the global (when the sandbox is prepared), so the run's modules can still be
  // instantiated after the namespace is gone.
  v8::Global<v8::Function> wasm_instance;
  std::unordered_map<uint32_t, v8::Global<v8::Promise::Resolver>> calls;
  std::unordered_set<BufferCharge*> buffer_charges;
  uint32_t next_call_id = 1;
  // Where Rust writes the name and message of a refused host call (see on_host_call).
  std::vector<uint8_t> refusal_text;
  size_t peak_heap = 0;
  // The most memory the heap was seen to hold from the system (committed pages) and V8
  // to have malloc'd beside it, at a GC's end: what a thread parked after a fatal OOM
  // keeps, read where V8 may not be called.
  size_t peak_held = 0;
  // Index of V8's young large-object space ("new_large_object_space"), or -1, and the
  // most it was seen holding.
  int young_large_space = -1;
  size_t peak_young_large = 0;
  uint32_t heap_limit_raises = 0;
  // Set from the run's BridgeLimits (isolet_sandbox_set_copy_limits) before any code runs.
  size_t max_message_bytes = 0;
  size_t max_output_bytes = 0;
  // ES modules compiled in this isolate, by id, each with the ids its requests link to.
  struct LinkedModule {
    v8::Global<v8::Module> module;
    std::vector<uint32_t> targets;
  };
  std::vector<LinkedModule> modules;
  // Ids of released modules (isolet_module_release), taken again by the next compile.
  std::vector<uint32_t> free_module_ids;
  std::unordered_map<int, uint32_t> module_by_script;
  // The module whose evaluation is the run's completion (its result is read from it).
  v8::Global<v8::Module> result_module;
  isolet_import_fn on_import = nullptr;
  size_t max_specifier_bytes = 0;
  // Native ops: the `lib` object embedded scripts are called with, what each returned (by
  // index, once run), and the script whose `makeError` makes ISOLET_ERROR_CLASS_INSTALLED
  // errors.
  v8::Global<Object> ops_lib;
  std::vector<v8::Global<Value>> loaded;
  // Embedded scripts compiled without a code cache, whose cache isolet_sandbox_cache_scripts
  // makes (after the run, so it holds the functions the run compiled).
  std::vector<std::pair<uint32_t, v8::Global<v8::UnboundScript>>> uncached_scripts;
  // Promises ops gave back (ISOLET_OP_PROMISE), by the id Rust chose, until settled.
  std::unordered_map<uint32_t, v8::Global<v8::Promise::Resolver>> op_promises;
  uint32_t seam_script = 0;
  // Promises rejected while no handler was attached (V8's promise-reject callback), with
  // where they were rejected when the reason is no Error; one leaves the list when a
  // handler comes. isolet_sandbox_next_rejection reports those left.
  struct Rejection {
    v8::Global<v8::Promise> promise;
    int32_t line;
    int32_t column;
  };
  std::vector<Rejection> rejections;
  // Rejections counted but not kept (past kMaxKeptRejections) since the last clear.
  uint32_t dropped_rejections = 0;
};

namespace {

// The sandbox whose isolate this thread owns (isolate threads own exactly one).
thread_local isolet_sandbox* t_sandbox = nullptr;

isolet_sandbox* SandboxOf(Isolate* isolate) {
  return static_cast<isolet_sandbox*>(isolate->GetData(0));
}

isolet_bytes CopyBytes(const void* data, size_t len) {
  isolet_bytes out{nullptr, 0};
  out.ptr = static_cast<uint8_t*>(std::malloc(len == 0 ? 1 : len));
  if (out.ptr == nullptr) return out;
  if (len > 0) std::memcpy(out.ptr, data, len);
  out.len = len;
  return out;
}

// UTF-8 of a value's string form, cut to `max` bytes (at a character boundary); empty if
// conversion throws. Copies at most `max` bytes out of the heap, whatever the length.
std::string ToUtf8(Isolate* isolate, Local<Context> ctx, Local<Value> value, size_t max) {
  if (value.IsEmpty() || max == 0) return std::string();
  TryCatch try_catch(isolate);
  Local<String> str;
  if (!value->ToString(ctx).ToLocal(&str)) return std::string();
  // A UTF-16 unit takes at most 3 bytes of UTF-8.
  size_t capacity = std::min(max, static_cast<size_t>(str->Length()) * 3);
  std::string out(capacity, '\0');
#if ISOLET_V8_AT_LEAST(13, 6)
  size_t written = str->WriteUtf8V2(isolate, out.data(), capacity,
                                    String::WriteFlags::kReplaceInvalidUtf8);
#else
  size_t written = static_cast<size_t>(str->WriteUtf8(
      isolate, &out[0], static_cast<int>(std::min<size_t>(capacity, INT32_MAX)), nullptr,
      String::REPLACE_INVALID_UTF8 | String::NO_NULL_TERMINATION));
#endif
  out.resize(std::min(written, capacity));
  return out;
}

void SetText(isolet_bytes* slot, const std::string& text) {
  *slot = CopyBytes(text.data(), text.size());
}

// Strings from Rust are names and short texts, far below V8's longest string.
Local<String> Utf8(Isolate* isolate, const uint8_t* data, size_t len) {
  return String::NewFromUtf8(isolate, reinterpret_cast<const char*>(data),
                             v8::NewStringType::kNormal, static_cast<int>(len))
      .ToLocalChecked();
}

// Text for ISOLET_TEXT_* `what`, written by Rust.
Local<String> Text(isolet_sandbox* sb, uint32_t what, uint64_t a = 0, uint64_t b = 0) {
  uint8_t buf[512];
  size_t len = sb->config.text(sb->config.ctx, what, a, b, buf, sizeof(buf));
  return Utf8(sb->isolate, buf, std::min(len, sizeof(buf)));
}

Local<String> Utf8(Isolate* isolate, const char* text) {
  return String::NewFromUtf8(isolate, text).ToLocalChecked();
}

int32_t SerializeValue(Isolate* isolate, Local<Context> ctx, Local<Value> value, size_t cap,
                       isolet_value* out);

// The own enumerable string-keyed fields of a thrown object that can be copied, as one
// serialized object of at most `max` bytes into err->fields: a field that cannot be copied
// (a function), or that would pass `max`, is left out. Reading them runs the object's
// getters, as reading its `message` does; a Proxy's traps are not run.
void DescribeFields(Isolate* isolate, Local<Context> ctx, Local<Object> obj, size_t max, isolet_error* err) {
  if (obj->IsProxy() || max == 0) return;
  TryCatch try_catch(isolate);
  Local<v8::Array> keys;
  if (!obj->GetOwnPropertyNames(ctx, static_cast<v8::PropertyFilter>(v8::ONLY_ENUMERABLE | v8::SKIP_SYMBOLS),
                                v8::KeyConversionMode::kConvertToString)
           .ToLocal(&keys)) {
    return;
  }
  uint32_t count = std::min<uint32_t>(keys->Length(), 256);
  if (count == 0) return;
  Local<Object> copy = Object::New(isolate, v8::Null(isolate), nullptr, nullptr, 0);
  size_t used = 0;
  bool any = false;
  for (uint32_t i = 0; i < count; ++i) {
    Local<Value> key, value;
    if (!keys->Get(ctx, i).ToLocal(&key) || !key->IsName() || !obj->Get(ctx, key).ToLocal(&value)) {
      if (isolate->IsExecutionTerminating()) return;
      try_catch.Reset();
      continue;
    }
    isolet_value probe{nullptr, 0, 0};
    int32_t rc = SerializeValue(isolate, ctx, value, max, &probe);
    size_t len = probe.len;
    isolet_value_free(probe.ptr, probe.cap);
    if (isolate->IsExecutionTerminating()) return;
    try_catch.Reset();
    if (rc != ISOLET_OK || used + len > max) continue;
    used += len;
    if (copy->CreateDataProperty(ctx, key.As<v8::Name>(), value).FromMaybe(false)) any = true;
  }
  if (!any) return;
  isolet_value out{nullptr, 0, 0};
  if (SerializeValue(isolate, ctx, copy, max, &out) == ISOLET_OK) err->fields = CopyBytes(out.ptr, out.len);
  isolet_value_free(out.ptr, out.cap);
}

// Reads the parts of a thrown value without trusting its shape: getters may throw or
// return non-strings, in which case the part stays absent. Rust picks the name.
void DescribeException(Isolate* isolate, Local<Context> ctx, Local<Value> exception,
                       Local<v8::Message> message, isolet_error* err) {
  size_t max = SandboxOf(isolate)->config.max_error_text_bytes;
  int32_t kind = ISOLET_VALUE_UNDEFINED;
  std::string text;
  if (exception.IsEmpty()) {
    kind = ISOLET_VALUE_UNDEFINED;
  } else if (exception->IsObject()) {
    kind = exception->IsNativeError() ? ISOLET_VALUE_NATIVE_ERROR : ISOLET_VALUE_OBJECT;
    TryCatch try_catch(isolate);
    Local<Object> obj = exception.As<Object>();
    Local<Value> v;
    if (obj->Get(ctx, Utf8(isolate, "name")).ToLocal(&v) && v->IsString())
      SetText(&err->name, ToUtf8(isolate, ctx, v, max));
    SetText(&err->constructor, ToUtf8(isolate, ctx, obj->GetConstructorName(), max));
    if (obj->Get(ctx, Utf8(isolate, "message")).ToLocal(&v) && !v->IsUndefined())
      text = ToUtf8(isolate, ctx, v, max);
    if (obj->Get(ctx, Utf8(isolate, "stack")).ToLocal(&v) && v->IsString())
      SetText(&err->stack, ToUtf8(isolate, ctx, v, max));
    if (kind != ISOLET_VALUE_NATIVE_ERROR && text.empty()) text = ToUtf8(isolate, ctx, exception, max);
    if (!isolate->IsExecutionTerminating()) DescribeFields(isolate, ctx, obj, max, err);
  } else {
    kind = exception->IsString()    ? ISOLET_VALUE_STRING
           : exception->IsNumber()  ? ISOLET_VALUE_NUMBER
           : exception->IsBoolean() ? ISOLET_VALUE_BOOLEAN
           : exception->IsNull()    ? ISOLET_VALUE_NULL
           : exception->IsSymbol()  ? ISOLET_VALUE_SYMBOL
           : exception->IsBigInt()  ? ISOLET_VALUE_BIGINT
                                    : ISOLET_VALUE_UNDEFINED;
    // String(symbol) works where ToString throws; both are copied the same way.
    if (exception->IsSymbol()) {
      Local<Value> description = exception.As<v8::Symbol>()->Description(isolate);
      text = description->IsUndefined() ? std::string() : ToUtf8(isolate, ctx, description, max);
    } else {
      text = ToUtf8(isolate, ctx, exception, max);
    }
  }
  err->value_kind = kind;
  SetText(&err->message, text);
  err->line = 0;
  err->column = 0;
  err->position = -1;
  if (!message.IsEmpty()) {
    err->line = message->GetLineNumber(ctx).FromMaybe(0);
    err->column = message->GetStartColumn(ctx).FromMaybe(-1) + 1;
  }
}

// The serializer's buffer comes from Rust's allocator (isolet_value_realloc), so the
// result reaches Rust as a Vec without a copy; `cap_` tracks the block's size for it.
//
// V8 asks for max(needed, 2 * capacity) + 64 bytes each time it grows, so refusing any
// request over the limit refused results well under it (a 39 MB one under 64 MB). A
// result of at most `limit` bytes never needs more than 2 * limit + 64: that is allowed
// (untouched pages of the block are never faulted in), and SerializeValue checks the
// final size against the limit itself.
class Serializer final : public v8::ValueSerializer::Delegate {
 public:
  Serializer(Isolate* isolate, size_t limit) : isolate_(isolate), limit_(limit) {}

  void ThrowDataCloneError(Local<String> message) override {
    isolate_->ThrowException(v8::Exception::Error(message));
  }
  void* ReallocateBufferMemory(void* old_buffer, size_t size, size_t* actual_size) override {
    if (size > limit_ && size - limit_ > limit_ + 64) {  // size > 2 * limit + 64, no overflow
      too_large = true;
      return nullptr;
    }
    uint8_t* p = isolet_value_realloc(static_cast<uint8_t*>(old_buffer), cap_, size);
    if (p == nullptr) {
      *actual_size = 0;
      return nullptr;
    }
    cap_ = size;
    *actual_size = size;
    return p;
  }
  void FreeBufferMemory(void* buffer) override { isolet_value_free(static_cast<uint8_t*>(buffer), cap_); }

  size_t capacity() const { return cap_; }
  bool too_large = false;

 private:
  Isolate* isolate_;
  size_t limit_;
  size_t cap_ = 0;
};

// Serializes `value` with the structured-clone algorithm. Returns ISOLET_OK, ISOLET_THREW
// (exception left in the caller's TryCatch) or ISOLET_TOO_LARGE.
int32_t SerializeValue(Isolate* isolate, Local<Context> ctx, Local<Value> value, size_t cap,
                       isolet_value* out) {
  Serializer delegate(isolate, cap);
  v8::ValueSerializer serializer(isolate, &delegate);
  serializer.WriteHeader();
  if (serializer.WriteValue(ctx, value).IsNothing()) {
    return delegate.too_large ? ISOLET_TOO_LARGE : ISOLET_THREW;
  }
  std::pair<uint8_t*, size_t> buffer = serializer.Release();
  if (buffer.second > cap) {
    isolet_value_free(buffer.first, delegate.capacity());
    return ISOLET_TOO_LARGE;
  }
  out->ptr = buffer.first;
  out->len = buffer.second;
  out->cap = buffer.first == nullptr ? 0 : delegate.capacity();
  return ISOLET_OK;
}

MaybeLocal<Value> DeserializeValue(Isolate* isolate, Local<Context> ctx, const uint8_t* bytes,
                                   size_t len) {
  v8::ValueDeserializer deserializer(isolate, bytes, len);
  if (deserializer.ReadHeader(ctx).IsNothing()) return MaybeLocal<Value>();
  return deserializer.ReadValue(ctx);
}

// How the structured-clone algorithm treats a value (lib.cloneKind, for the seam script's
// uncloneablePath): what it refuses, by kind, or how it copies it.
const char* CloneKind(Local<Value> v) {
  if (v->IsSymbol() || v->IsSymbolObject()) return "symbol";
  if (v->IsFunction()) return "function";
  if (v->IsProxy()) return "Proxy";
  if (v->IsPromise()) return "Promise";
  if (v->IsWeakMap()) return "WeakMap";
  if (v->IsWeakSet()) return "WeakSet";
  if (v->IsSharedArrayBuffer()) return "SharedArrayBuffer";
  if (v->IsGeneratorObject()) return "generator";
  if (v->IsMapIterator() || v->IsSetIterator()) return "iterator";
  if (v->IsModuleNamespaceObject()) return "module namespace";
  if (v->IsExternal()) return "host object";
  if (!v->IsObject()) return "primitive";
  // Copied whole, without reading their properties.
  if (v->IsDate() || v->IsRegExp() || v->IsArrayBuffer() || v->IsArrayBufferView() || v->IsNativeError() ||
      v->IsNumberObject() || v->IsStringObject() || v->IsBooleanObject() || v->IsBigIntObject() ||
      v->IsWasmModuleObject())
    return "leaf";
  return v->IsMap() ? "map" : v->IsSet() ? "set" : v->IsArray() ? "array" : "object";
}

constexpr size_t kMaxKeptRejections = 1000;

// V8's promise-reject callback: keeps each promise rejected with no handler, and forgets
// it when a handler comes. Runs no JavaScript.
void OnPromiseReject(v8::PromiseRejectMessage message) {
  Local<v8::Promise> promise = message.GetPromise();
  // V8 calls it on the isolate thread, inside the isolate (V8 14 has no Promise::GetIsolate).
  Isolate* isolate = Isolate::GetCurrent();
  isolet_sandbox* sb = SandboxOf(isolate);
  if (sb == nullptr) return;
  if (message.GetEvent() == v8::kPromiseHandlerAddedAfterReject) {
    for (auto it = sb->rejections.rbegin(); it != sb->rejections.rend(); ++it) {
      if (it->promise == promise) {
        sb->rejections.erase(std::next(it).base());
        return;
      }
    }
    return;
  }
  if (message.GetEvent() != v8::kPromiseRejectWithNoHandler) return;
  if (sb->rejections.size() >= kMaxKeptRejections) {
    sb->dropped_rejections++;
    return;
  }
  int32_t line = 0;
  int32_t column = 0;
  Local<Value> reason = message.GetValue();
  // An Error carries its own stack; any other reason is placed where it was rejected.
  if (!reason.IsEmpty() && !reason->IsNativeError()) {
    Local<Context> ctx = isolate->GetCurrentContext();
    Local<v8::Message> where = v8::Exception::CreateMessage(isolate, reason);
    if (!ctx.IsEmpty() && !where.IsEmpty()) {
      line = where->GetLineNumber(ctx).FromMaybe(0);
      column = where->GetStartColumn(ctx).FromMaybe(-1) + 1;
    }
  }
  sb->rejections.push_back({v8::Global<v8::Promise>(isolate, promise), line, column});
}

// What a sandbox whose thread is handed over after a fatal OOM holds: its heap (`heap`
// bytes: committed pages and V8's malloc'd memory, or the most seen) and its ArrayBuffers.
size_t HeldBytes(isolet_sandbox* sb, size_t heap) {
  return std::max(heap, sb->peak_held) + (sb->allocator ? sb->allocator->used() : 0);
}

size_t NearHeapLimit(void* data, size_t current_limit, size_t initial_limit) {
  auto* sb = static_cast<isolet_sandbox*>(data);
  sb->hit_memory_limit.store(true);
  sb->isolate->TerminateExecution();
  sb->config.on_heap_limit(sb->config.ctx);
  // Grant headroom so V8 unwinds the terminated script instead of aborting the process,
  // but only twice. A script still allocating after that is in a built-in that ignores
  // termination (`new Array(2 ** 27).fill(0)`): V8 would end in a fatal OOM after more
  // failing mark-compacts (seconds of them, the heap growing meanwhile, then its "Last
  // few GCs" banner on the process's stderr). The thread is handed over here instead,
  // before any of that: Rust reports SandboxOOMError and parks it, its heap at this limit.
  if (++sb->heap_limit_raises > sb->config.max_heap_limit_raises) {
    if (t_sandbox == sb) {
      v8::HeapStatistics stats;
      sb->isolate->GetHeapStatistics(&stats);
      size_t heap = std::max(current_limit, stats.total_physical_size() + stats.malloced_memory());
      sb->config.on_fatal_oom(sb->config.ctx, HeldBytes(sb, heap));
    }
    return current_limit;
  }
  return current_limit + sb->config.heap_headroom_bytes;
}

// Fatal OOM inside V8. On the sandbox's own thread we hand over to Rust, which reports
// SandboxOOMError and parks the thread for good; elsewhere V8 aborts as before.
void OnFatalOOM(const char* location, const v8::OOMDetails& details) {
  isolet_sandbox* sb = t_sandbox;
  if (sb == nullptr) return;
  sb->hit_memory_limit.store(true);
  size_t heap = sb->config.heap_ceiling_bytes > sb->peak_heap ? sb->config.heap_ceiling_bytes : sb->peak_heap;
  sb->config.on_fatal_oom(sb->config.ctx, HeldBytes(sb, heap));
}

// Bytes in the young large-object space: where V8 puts a large object it grants whatever
// its size when the space is empty (see heap_ceiling_bytes in isolet-core).
size_t YoungLargeBytes(isolet_sandbox* sb) {
  if (sb->young_large_space < 0) return 0;
  v8::HeapSpaceStatistics space;
  if (!sb->isolate->GetHeapSpaceStatistics(&space, static_cast<size_t>(sb->young_large_space))) return 0;
  return space.space_used_size();
}

// Ends the run as out of memory, as the heap limit does (from another thread too: V8 13
// ignores TerminateExecution issued inside a GC callback).
void OverCeiling(isolet_sandbox* sb) {
  if (sb->hit_memory_limit.exchange(true)) return;
  sb->isolate->TerminateExecution();
  sb->config.on_heap_limit(sb->config.ctx);
}

void TrackPeakHeap(Isolate* isolate, v8::GCType, v8::GCCallbackFlags) {
  v8::HeapStatistics stats;
  isolate->GetHeapStatistics(&stats);
  isolet_sandbox* sb = SandboxOf(isolate);
  if (stats.used_heap_size() > sb->peak_heap) sb->peak_heap = stats.used_heap_size();
  size_t held = stats.total_physical_size() + stats.malloced_memory();
  if (held > sb->peak_held) sb->peak_held = held;
  size_t young_large = YoungLargeBytes(sb);
  if (young_large > sb->peak_young_large) sb->peak_young_large = young_large;
  if (young_large > sb->config.heap_ceiling_bytes) OverCeiling(sb);
}

// After a full GC the used heap is what is live: over the ceiling, the run is over it.
void CheckLiveHeap(Isolate* isolate, v8::GCType, v8::GCCallbackFlags) {
  v8::HeapStatistics stats;
  isolate->GetHeapStatistics(&stats);
  isolet_sandbox* sb = SandboxOf(isolate);
  if (stats.used_heap_size() > sb->config.heap_ceiling_bytes) OverCeiling(sb);
}

// The error a rejected host call's promise carries: class ISOLET_ERROR_CLASS_*, then
// `name` (when given) as an own property.
Local<Value> HostError(Isolate* isolate, Local<Context> ctx, uint32_t error_class, const uint8_t* name,
                       size_t name_len, const uint8_t* message, size_t message_len) {
  Local<String> text = Utf8(isolate, message, message_len);
  Local<Value> error = error_class == ISOLET_ERROR_CLASS_TYPE        ? v8::Exception::TypeError(text)
                       : error_class == ISOLET_ERROR_CLASS_RANGE     ? v8::Exception::RangeError(text)
                       : error_class == ISOLET_ERROR_CLASS_REFERENCE ? v8::Exception::ReferenceError(text)
                                                                     : v8::Exception::Error(text);
  if (name_len > 0) {
    (void)error.As<Object>()->CreateDataProperty(ctx, Utf8(isolate, "name"), Utf8(isolate, name, name_len));
  }
  return error;
}

void HostFunction(const v8::FunctionCallbackInfo<Value>& info) {
  Isolate* isolate = info.GetIsolate();
  Local<Context> ctx = isolate->GetCurrentContext();
  isolet_sandbox* sb = SandboxOf(isolate);
  uint32_t fn_index = info.Data().As<v8::Uint32>()->Value();

  Local<v8::Promise::Resolver> resolver;
  if (!v8::Promise::Resolver::New(ctx).ToLocal(&resolver)) return;
  info.GetReturnValue().Set(resolver->GetPromise());

  // Built from the values directly: no element is assigned, so a setter the sandbox put
  // on Array.prototype never sees an argument.
  std::vector<Local<Value>> values;
  values.reserve(info.Length());
  for (int i = 0; i < info.Length(); ++i) values.push_back(info[i]);
  Local<v8::Array> args = v8::Array::New(isolate, values.data(), values.size());
  isolet_value bytes{nullptr, 0, 0};
  int32_t rc;
  {
    TryCatch try_catch(isolate);
    rc = SerializeValue(isolate, ctx, args, sb->max_message_bytes, &bytes);
    if (rc == ISOLET_THREW) {
      if (try_catch.HasTerminated()) {
        try_catch.ReThrow();
        return;
      }
      Local<Value> reason = try_catch.Exception();
      try_catch.Reset();
      (void)resolver->Reject(ctx, reason);
      return;
    }
  }
  if (rc == ISOLET_TOO_LARGE) {
    Local<String> msg = Text(sb, ISOLET_TEXT_HOST_ARGS_TOO_LARGE, sb->max_message_bytes);
    (void)resolver->Reject(ctx, v8::Exception::RangeError(msg));
    return;
  }
  uint32_t call_id = sb->next_call_id++;
  isolet_refusal refusal{0, 0, 0};
  uint8_t* buf = sb->refusal_text.data();
  int32_t sent = sb->config.on_host_call(sb->config.ctx, fn_index, call_id, bytes.ptr, bytes.len,
                                         &refusal, buf, sb->refusal_text.size());
  isolet_value_free(bytes.ptr, bytes.cap);
  if (sent == ISOLET_OK) {
    // Replies are handed in on this thread only, so none can arrive before this.
    sb->calls.emplace(call_id, v8::Global<v8::Promise::Resolver>(isolate, resolver));
    return;
  }
  // Refused: rejected now, so a refusal costs only heap (the promise and its error),
  // never an entry queued outside it, however many calls the sandbox makes.
  size_t name_len = std::min(refusal.name_len, sb->refusal_text.size());
  size_t message_len = std::min(refusal.message_len, sb->refusal_text.size() - name_len);
  (void)resolver->Reject(ctx, HostError(isolate, ctx, refusal.error_class, buf, name_len,
                                        buf + name_len, message_len));
}

// data[key]: answered from the per-run cache, or by a (blocking) request to the host.
#if ISOLET_V8_AT_LEAST(12, 4)
v8::Intercepted DataGetter(Local<v8::Name> property, const v8::PropertyCallbackInfo<Value>& info) {
#define ISOLET_INTERCEPTED v8::Intercepted::kYes
#define ISOLET_NOT_INTERCEPTED v8::Intercepted::kNo
#else
void DataGetter(Local<v8::Name> property, const v8::PropertyCallbackInfo<Value>& info) {
#define ISOLET_INTERCEPTED
#define ISOLET_NOT_INTERCEPTED
#endif
  if (!property->IsString()) return ISOLET_NOT_INTERCEPTED;
  Isolate* isolate = info.GetIsolate();
  Local<Context> ctx = isolate->GetCurrentContext();
  isolet_sandbox* sb = SandboxOf(isolate);
  Local<Object> cache = sb->data_cache.Get(isolate);
  Local<String> key = property.As<String>();
  if (cache->HasOwnProperty(ctx, key).FromMaybe(false)) {
    Local<Value> cached;
    if (cache->Get(ctx, key).ToLocal(&cached)) {
      info.GetReturnValue().Set(cached);
    } else {
      info.GetReturnValue().SetUndefined();
    }
    return ISOLET_INTERCEPTED;
  }
  // At most max_data_key_bytes leave the heap, however long the key.
  std::string name = ToUtf8(isolate, ctx, key, sb->config.max_data_key_bytes);
  isolet_bytes answer{nullptr, 0};
  int32_t rc = sb->config.on_data_request(
      sb->config.ctx, reinterpret_cast<const uint8_t*>(name.data()), name.size(), &answer);
  if (rc == ISOLET_ABSENT) {
    isolet_bytes_free(&answer);
    return ISOLET_NOT_INTERCEPTED;
  }
  if (rc == ISOLET_TERMINATED) {
    isolet_bytes_free(&answer);
    isolate->TerminateExecution();
    // An intercepted read must yield a value (V8 >= 12.4 checks); termination follows.
    info.GetReturnValue().SetUndefined();
    return ISOLET_INTERCEPTED;
  }
  if (rc != ISOLET_OK) {
    std::string msg(reinterpret_cast<const char*>(answer.ptr), answer.len);
    isolet_bytes_free(&answer);
    isolate->ThrowException(v8::Exception::Error(Utf8(isolate, msg.c_str())));
    info.GetReturnValue().SetUndefined();
    return ISOLET_INTERCEPTED;
  }
  Local<Value> value;
  bool ok = DeserializeValue(isolate, ctx, answer.ptr, answer.len).ToLocal(&value);
  isolet_bytes_free(&answer);
  if (!ok) {
    // The deserializer threw; the exception propagates.
    info.GetReturnValue().SetUndefined();
    return ISOLET_INTERCEPTED;
  }
  (void)cache->CreateDataProperty(ctx, key, value);
  info.GetReturnValue().Set(value);
  return ISOLET_INTERCEPTED;
}

// Writes, deletes and definitions on the data object are refused.
#if ISOLET_V8_AT_LEAST(12, 4)
v8::Intercepted DataSetter(Local<v8::Name>, Local<Value>, const v8::PropertyCallbackInfo<void>& info) {
#else
void DataSetter(Local<v8::Name>, Local<Value>, const v8::PropertyCallbackInfo<Value>& info) {
#endif
  info.GetIsolate()->ThrowException(
      v8::Exception::TypeError(Text(SandboxOf(info.GetIsolate()), ISOLET_TEXT_DATA_READ_ONLY)));
  return ISOLET_INTERCEPTED;
}

#if ISOLET_V8_AT_LEAST(12, 4)
v8::Intercepted DataDeleter(Local<v8::Name>, const v8::PropertyCallbackInfo<v8::Boolean>& info) {
#else
void DataDeleter(Local<v8::Name>, const v8::PropertyCallbackInfo<v8::Boolean>& info) {
#endif
  info.GetIsolate()->ThrowException(
      v8::Exception::TypeError(Text(SandboxOf(info.GetIsolate()), ISOLET_TEXT_DATA_READ_ONLY)));
  info.GetReturnValue().Set(false);
  return ISOLET_INTERCEPTED;
}

// Where a charged buffer keeps its BufferCharge (a private symbol: invisible to JS).
Local<v8::Private> ChargeKey(Isolate* isolate) {
  return v8::Private::ForApi(isolate, String::NewFromUtf8Literal(isolate, "isolet:buffer-charge"));
}

void OnChargedBufferCollected(const v8::WeakCallbackInfo<BufferCharge>& info) {
  BufferCharge* charge = info.GetParameter();
  charge->buffer.Reset();
  charge->sb->allocator->refund(charge->bytes);
  charge->sb->buffer_charges.erase(charge);
  delete charge;
}

// The `construct` trap in front of ArrayBuffer and SharedArrayBuffer. V8 reserves and
// commits resizable and growable buffers through its page allocator, never through the
// ArrayBuffer::Allocator, so a buffer with `maxByteLength` is charged at that maximum
// before it exists and refused with a RangeError past the budget. Each argument is
// converted once, in the specification's order (ToIndex(length), then
// options.maxByteLength), and passed on as a number, so user code runs exactly as often
// as without the trap. Data: the realm's original Reflect.construct.
void ConstructBuffer(const v8::FunctionCallbackInfo<Value>& info) {
  Isolate* isolate = info.GetIsolate();
  Local<Context> ctx = isolate->GetCurrentContext();
  isolet_sandbox* sb = SandboxOf(isolate);
  if (info.Length() < 3 || !info[0]->IsFunction() || !info[1]->IsArray()) return;
  Local<v8::Array> args = info[1].As<v8::Array>();
  Local<Value> length = v8::Undefined(isolate);
  Local<Value> options = v8::Undefined(isolate);
  if (args->Length() > 0 && !args->Get(ctx, 0).ToLocal(&length)) return;
  if (args->Length() > 1 && !args->Get(ctx, 1).ToLocal(&options)) return;
  size_t charged = 0;
  if (options->IsObject()) {
    Local<v8::Number> length_number;
    if (!length->ToNumber(ctx).ToLocal(&length_number)) return;
    length = length_number;
    Local<Value> max;
    if (!options.As<Object>()->Get(ctx, Utf8(isolate, "maxByteLength")).ToLocal(&max)) return;
    options = v8::Undefined(isolate);
    if (!max->IsUndefined()) {
      Local<v8::Number> max_number;
      if (!max->ToNumber(ctx).ToLocal(&max_number)) return;
      Local<Object> fresh = Object::New(isolate);
      if (fresh->CreateDataProperty(ctx, Utf8(isolate, "maxByteLength"), max_number).IsNothing())
        return;
      options = fresh;
      double bytes = std::trunc(max_number->Value());
      // Out-of-range values are left to V8, which throws its own RangeError.
      if (std::isfinite(bytes) && bytes > 0 && bytes <= 9007199254740991.0) {
        charged = static_cast<size_t>(bytes);
        // Collected buffers are refunded by GC: collect once before refusing.
        bool ok = sb->allocator->charge(charged);
        if (!ok) {
          isolate->LowMemoryNotification();
          ok = sb->allocator->charge(charged);
        }
        if (!ok) {
          isolate->ThrowException(v8::Exception::RangeError(
              Text(sb, ISOLET_TEXT_BUFFER_OVER_BUDGET, charged, sb->allocator->limit())));
          return;
        }
      }
    }
  }
  Local<Value> forwarded[] = {length, options};
  Local<Value> argv[] = {info[0], v8::Array::New(isolate, forwarded, 2), info[2]};
  Local<Value> buffer;
  if (!info.Data().As<v8::Function>()->Call(ctx, v8::Undefined(isolate), 3, argv).ToLocal(&buffer) ||
      !buffer->IsObject()) {
    if (charged > 0) sb->allocator->refund(charged);
    return;
  }
  if (charged > 0) {
    auto* charge = new BufferCharge{sb, charged, v8::Global<Object>(isolate, buffer.As<Object>())};
    charge->buffer.SetWeak(charge, OnChargedBufferCollected, v8::WeakCallbackType::kParameter);
    sb->buffer_charges.insert(charge);
    (void)buffer.As<Object>()->SetPrivate(ctx, ChargeKey(isolate), v8::External::New(isolate, charge));
  }
  info.GetReturnValue().Set(buffer);
}

// ArrayBuffer.prototype.transfer / transferToFixedLength in front of the built-ins (data:
// the original). A transfer moves a resizable buffer's memory to the result: the charge
// moves with it (result resizable), or is refunded (result fixed-length: its memory
// comes from the counting allocator and the old reservation is released).
void TransferBuffer(const v8::FunctionCallbackInfo<Value>& info) {
  Isolate* isolate = info.GetIsolate();
  Local<Context> ctx = isolate->GetCurrentContext();
  isolet_sandbox* sb = SandboxOf(isolate);
  Local<Value> receiver = info.This();
  BufferCharge* charge = nullptr;
  Local<Value> slot;
  if (receiver->IsArrayBuffer() &&
      receiver.As<Object>()->GetPrivate(ctx, ChargeKey(isolate)).ToLocal(&slot) &&
      slot->IsExternal()) {
    charge = static_cast<BufferCharge*>(slot.As<v8::External>()->Value());
  }
  std::vector<Local<Value>> argv;
  for (int i = 0; i < info.Length(); ++i) argv.push_back(info[i]);
  Local<Value> result;
  if (!info.Data().As<v8::Function>()
           ->Call(ctx, receiver, static_cast<int>(argv.size()), argv.data())
           .ToLocal(&result))
    return;
  if (charge != nullptr && result->IsArrayBuffer() &&
      receiver.As<v8::ArrayBuffer>()->WasDetached()) {
    (void)receiver.As<Object>()->DeletePrivate(ctx, ChargeKey(isolate));
    if (result.As<v8::ArrayBuffer>()->GetBackingStore()->IsResizableByUserJavaScript()) {
      charge->buffer.Reset(isolate, result.As<Object>());
      charge->buffer.SetWeak(charge, OnChargedBufferCollected, v8::WeakCallbackType::kParameter);
      (void)result.As<Object>()->SetPrivate(ctx, ChargeKey(isolate), slot);
    } else {
      charge->buffer.Reset();
      sb->allocator->refund(charge->bytes);
      sb->buffer_charges.erase(charge);
      delete charge;
    }
  }
  info.GetReturnValue().Set(result);
}

// Puts ConstructBuffer in front of ArrayBuffer and SharedArrayBuffer: each global (and
// its prototype's `constructor`) becomes a Proxy of the original with only a construct
// trap, so every property, prototype and call behaves as before.
bool GuardResizableBuffers(Isolate* isolate, Local<Context> ctx) {
  Local<Object> global = ctx->Global();
  Local<Value> reflect, construct;
  if (!global->Get(ctx, Utf8(isolate, "Reflect")).ToLocal(&reflect) || !reflect->IsObject() ||
      !reflect.As<Object>()->Get(ctx, Utf8(isolate, "construct")).ToLocal(&construct) ||
      !construct->IsFunction())
    return false;
  // No prototype: trap lookups must not find anything the sandbox adds to Object.prototype.
  Local<Object> handler = Object::New(isolate);
#if ISOLET_V8_AT_LEAST(13, 0)
  if (handler->SetPrototypeV2(ctx, v8::Null(isolate)).IsNothing()) return false;
#else
  if (handler->SetPrototype(ctx, v8::Null(isolate)).IsNothing()) return false;
#endif
  Local<v8::Function> trap;
  if (!v8::Function::New(ctx, ConstructBuffer, construct, 3, v8::ConstructorBehavior::kThrow)
           .ToLocal(&trap) ||
      handler->CreateDataProperty(ctx, Utf8(isolate, "construct"), trap).IsNothing())
    return false;
  for (const char* name : {"ArrayBuffer", "SharedArrayBuffer"}) {
    Local<String> key = Utf8(isolate, name);
    Local<Value> ctor, proto;
    if (!global->Get(ctx, key).ToLocal(&ctor) || !ctor->IsFunction()) continue;
    Local<v8::Proxy> proxy;
    if (!v8::Proxy::New(ctx, ctor.As<Object>(), handler).ToLocal(&proxy)) return false;
    if (!ctor.As<Object>()->Get(ctx, Utf8(isolate, "prototype")).ToLocal(&proto) || !proto->IsObject())
      return false;
    if (!global->DefineOwnProperty(ctx, key, proxy, v8::DontEnum).FromMaybe(false) ||
        !proto.As<Object>()
             ->DefineOwnProperty(ctx, Utf8(isolate, "constructor"), proxy, v8::DontEnum)
             .FromMaybe(false))
      return false;
    if (std::strcmp(name, "ArrayBuffer") != 0) continue;
    // Same name, length and attributes as the built-ins (absent before V8 11.4).
    for (const char* method : {"transfer", "transferToFixedLength"}) {
      Local<String> method_key = Utf8(isolate, method);
      Local<Value> original;
      if (!proto.As<Object>()->Get(ctx, method_key).ToLocal(&original) || !original->IsFunction())
        continue;
      Local<v8::Function> wrapper;
      if (!v8::Function::New(ctx, TransferBuffer, original, 0, v8::ConstructorBehavior::kThrow)
               .ToLocal(&wrapper))
        return false;
      wrapper->SetName(method_key);
      if (!proto.As<Object>()->DefineOwnProperty(ctx, method_key, wrapper, v8::DontEnum).FromMaybe(false))
        return false;
    }
  }
  return true;
}

// Copies `text` out in pieces of Char (uint8_t: a one-byte string, uint16_t: UTF-16) and
// feeds them to `scan`; false once the scan says the text is past its bound.
template <typename Char>
bool FeedJsonText(Isolate* isolate, Local<String> text, size_t length, isolet_json_scan* scan) {
  constexpr size_t kPiece = 8192;
  Char piece[kPiece];
  for (size_t at = 0; at < length; at += kPiece) {
    size_t n = std::min(kPiece, length - at);
    if constexpr (sizeof(Char) == 1) {
#if ISOLET_V8_AT_LEAST(13, 6)
      text->WriteOneByteV2(isolate, static_cast<uint32_t>(at), static_cast<uint32_t>(n), piece);
#else
      text->WriteOneByte(isolate, piece, static_cast<int>(at), static_cast<int>(n), String::NO_NULL_TERMINATION);
#endif
    } else {
#if ISOLET_V8_AT_LEAST(13, 6)
      text->WriteV2(isolate, static_cast<uint32_t>(at), static_cast<uint32_t>(n), piece);
#else
      text->Write(isolate, piece, static_cast<int>(at), static_cast<int>(n), String::NO_NULL_TERMINATION);
#endif
    }
    if (!isolet_json_scan_feed(scan, piece, n, sizeof(Char))) return false;
  }
  return true;
}

// Whether `text` holds more places where a JSON value or key can start than the run's
// bound (Rust counts: isolet_json_scan_feed). A text whose characters alone pass the heap
// ceiling is over it without being read: flattening it to read it would allocate that much.
bool JsonTextTooLarge(isolet_sandbox* sb, Isolate* isolate, Local<String> text) {
  size_t length = static_cast<size_t>(text->Length());
  bool one_byte = text->IsOneByte();
  if (length * (one_byte ? 1 : 2) > sb->config.heap_ceiling_bytes) return true;
  // A text has at most one start per character plus its own: most texts need no scan.
  if (length < sb->config.max_json_values) return false;
  isolet_json_scan scan = {0, sb->config.max_json_values, 0, 0, 0};
  bool within = one_byte ? FeedJsonText<uint8_t>(isolate, text, length, &scan)
                         : FeedJsonText<uint16_t>(isolate, text, length, &scan);
  // An empty text is still one value's start.
  return !within || !isolet_json_scan_feed(&scan, nullptr, 0, 1);
}

// JSON.parse in front of the built-in (data: the original). V8's parser keeps a handle per
// value outside the heap and checks no interrupt while it parses, so the heap limit
// cannot stop it: a text with more values than the run's memory could hold ends the run
// as out of memory before the parse starts. The text is converted once, as the built-in
// would (ToString first), and handed on with the reviver.
void ParseJson(const v8::FunctionCallbackInfo<Value>& info) {
  Isolate* isolate = info.GetIsolate();
  Local<Context> ctx = isolate->GetCurrentContext();
  isolet_sandbox* sb = SandboxOf(isolate);
  Local<Value> given = info.Length() > 0 ? info[0] : Local<Value>(v8::Undefined(isolate));
  Local<String> text;
  if (!given->ToString(ctx).ToLocal(&text)) return;
  if (JsonTextTooLarge(sb, isolate, text)) {
    OverCeiling(sb);
    return;
  }
  Local<Value> argv[] = {text, info.Length() > 1 ? info[1] : Local<Value>(v8::Undefined(isolate))};
  Local<Value> result;
  if (info.Data().As<v8::Function>()->Call(ctx, info.This(), 2, argv).ToLocal(&result)) {
    info.GetReturnValue().Set(result);
  }
}

// Puts ParseJson in place of JSON.parse (same name, length and attributes).
bool GuardJsonParse(Isolate* isolate, Local<Context> ctx) {
  Local<Value> json, parse;
  Local<String> key = Utf8(isolate, "parse");
  if (!ctx->Global()->Get(ctx, Utf8(isolate, "JSON")).ToLocal(&json) || !json->IsObject() ||
      !json.As<Object>()->Get(ctx, key).ToLocal(&parse) || !parse->IsFunction())
    return false;
  Local<v8::Function> guard;
  if (!v8::Function::New(ctx, ParseJson, parse, 2, v8::ConstructorBehavior::kThrow).ToLocal(&guard))
    return false;
  guard->SetName(key);
  return json.As<Object>()->DefineOwnProperty(ctx, key, guard, v8::DontEnum).FromMaybe(false);
}

// Enters the sandbox's isolate and context for the current scope.
#define ENTER(sb)                                        \
  Isolate* isolate = (sb)->isolate;                      \
  Isolate::Scope isolate_scope(isolate);                 \
  HandleScope handle_scope(isolate);                     \
  Local<Context> ctx = (sb)->context.Get(isolate);       \
  Context::Scope context_scope(ctx)

// `code` as a V8 string, or false past V8's longest string (NewFromUtf8 takes an int length).
bool CodeString(Isolate* isolate, const uint8_t* code, size_t len, Local<String>* out) {
  return len <= static_cast<size_t>(INT32_MAX) &&
         String::NewFromUtf8(isolate, reinterpret_cast<const char*>(code),
                             v8::NewStringType::kNormal, static_cast<int>(len))
             .ToLocal(out);
}

v8::ScriptOrigin OriginOf(Isolate* isolate, const uint8_t* name, size_t len, int32_t column_offset) {
#if ISOLET_V8_AT_LEAST(12, 4)
  return v8::ScriptOrigin(Utf8(isolate, name, len), 0, column_offset);
#else
  return v8::ScriptOrigin(isolate, Utf8(isolate, name, len), 0, column_offset);
#endif
}

void DescribeSyntaxError(Isolate* isolate, Local<Context> ctx, TryCatch& try_catch, isolet_error* err) {
  DescribeException(isolate, ctx, try_catch.Exception(), try_catch.Message(), err);
  err->position = try_catch.Message().IsEmpty() ? -1 : try_catch.Message()->GetStartPosition();
}


// Entry `i` of a module's requests (V8 14 dropped the context parameter).
Local<v8::ModuleRequest> ModuleRequestAt(Local<Context> ctx, Local<v8::FixedArray> requests, int i) {
#if ISOLET_V8_AT_LEAST(14, 0)
  (void)ctx;
  return requests->Get(i).As<v8::ModuleRequest>();
#else
  return requests->Get(ctx, i).As<v8::ModuleRequest>();
#endif
}

// The module a request of `referrer` links to (Rust linked it before instantiation).
MaybeLocal<v8::Module> ResolveLinked(Local<Context> ctx, Local<String> specifier,
                                     Local<v8::FixedArray>, Local<v8::Module> referrer) {
  Isolate* isolate = Isolate::GetCurrent();  // the isolate thread's own
  isolet_sandbox* sb = SandboxOf(isolate);
  auto found = sb->module_by_script.find(referrer->ScriptId());
  if (found != sb->module_by_script.end()) {
    const auto& targets = sb->modules[found->second].targets;
    Local<v8::FixedArray> requests = referrer->GetModuleRequests();
    for (int i = 0; i < requests->Length() && static_cast<size_t>(i) < targets.size(); ++i) {
      Local<v8::ModuleRequest> request = ModuleRequestAt(ctx, requests, i);
      if (request->GetSpecifier()->StrictEquals(specifier) && targets[i] < sb->modules.size()) {
        return sb->modules[targets[i]].module.Get(isolate);
      }
    }
  }
  isolate->ThrowException(v8::Exception::Error(Utf8(isolate, "module import is not linked")));
  return MaybeLocal<v8::Module>();
}

// The run's result of an evaluated module: its `default` export, else its namespace
// copied to a plain object (a namespace is exotic and does not serialize).
bool ModuleResult(Isolate* isolate, Local<Context> ctx, Local<v8::Module> module, Local<Value>* out) {
  Local<Object> ns = module->GetModuleNamespace().As<Object>();
  Local<String> key = Utf8(isolate, "default");
  bool has_default;
  if (!ns->HasOwnProperty(ctx, key).To(&has_default)) return false;
  if (has_default) return ns->Get(ctx, key).ToLocal(out);
  Local<v8::Array> names;
  if (!ns->GetOwnPropertyNames(ctx, static_cast<v8::PropertyFilter>(v8::SKIP_SYMBOLS)).ToLocal(&names))
    return false;
  Local<Object> copy = Object::New(isolate);
  for (uint32_t i = 0; i < names->Length(); ++i) {
    Local<Value> name, value;
    if (!names->Get(ctx, i).ToLocal(&name) || !ns->Get(ctx, name).ToLocal(&value)) return false;
    if (!copy->CreateDataProperty(ctx, name.As<v8::Name>(), value).FromMaybe(false)) return false;
  }
  *out = copy;
  return true;
}

// A promise reaction that yields its data (the imported module's namespace).
void YieldData(const v8::FunctionCallbackInfo<Value>& info) { info.GetReturnValue().Set(info.Data()); }

// import(specifier): Rust loads and links the graph (asking the host as needed, on this
// thread), then the module is instantiated and evaluated here; the promise settles with
// its namespace once its evaluation (top-level await included) has.
MaybeLocal<v8::Promise> ImportDynamically(Local<Context> ctx, Local<v8::Data>, Local<Value> resource_name,
                                          Local<String> specifier, Local<v8::FixedArray>) {
  Isolate* isolate = Isolate::GetCurrent();  // the isolate thread's own
  isolet_sandbox* sb = SandboxOf(isolate);
  Local<v8::Promise::Resolver> resolver;
  if (!v8::Promise::Resolver::New(ctx).ToLocal(&resolver)) return MaybeLocal<v8::Promise>();
  Local<v8::Promise> promise = resolver->GetPromise();
  if (sb->on_import == nullptr) {
    (void)resolver->Reject(ctx, v8::Exception::Error(Utf8(isolate, "import() is not available")));
    return promise;
  }
  std::string referrer = ToUtf8(isolate, ctx, resource_name, sb->max_specifier_bytes + 1);
  std::string wanted = ToUtf8(isolate, ctx, specifier, sb->max_specifier_bytes + 1);
  uint32_t id = 0;
  uint32_t error_class = ISOLET_ERROR_CLASS_ERROR;
  size_t len = 0;
  uint8_t* buf = sb->refusal_text.data();
  int32_t rc = sb->on_import(sb->config.ctx, reinterpret_cast<const uint8_t*>(referrer.data()), referrer.size(),
                             reinterpret_cast<const uint8_t*>(wanted.data()), wanted.size(), &id, &error_class,
                             buf, sb->refusal_text.size(), &len);
  if (rc == ISOLET_TERMINATED) {
    // The promise never settles: the run is being stopped.
    isolate->TerminateExecution();
    return promise;
  }
  if (rc != ISOLET_OK) {
    len = std::min(len, sb->refusal_text.size());
    (void)resolver->Reject(ctx, HostError(isolate, ctx, error_class, nullptr, 0, buf, len));
    return promise;
  }
  if (id >= sb->modules.size()) {
    (void)resolver->Reject(ctx, v8::Exception::Error(Utf8(isolate, "no such module")));
    return promise;
  }
  Local<v8::Module> module = sb->modules[id].module.Get(isolate);
  TryCatch try_catch(isolate);
  Local<Value> evaluation;
  bool ok = (module->GetStatus() != v8::Module::kUninstantiated ||
             module->InstantiateModule(ctx, ResolveLinked).FromMaybe(false)) &&
            module->Evaluate(ctx).ToLocal(&evaluation);
  if (!ok) {
    if (try_catch.HasTerminated() || isolate->IsExecutionTerminating()) {
      // Stopped: the promise never settles, the run ends at the next interrupt check.
      isolate->TerminateExecution();
      return promise;
    }
    Local<Value> reason = try_catch.Exception();
    try_catch.Reset();
    (void)resolver->Reject(ctx, reason);
    return promise;
  }
  Local<Value> ns = module->GetModuleNamespace();
  if (!evaluation->IsPromise()) {
    (void)resolver->Resolve(ctx, ns);
    return promise;
  }
  Local<v8::Function> yield_ns;
  Local<v8::Promise> settled;
  if (!v8::Function::New(ctx, YieldData, ns, 0, v8::ConstructorBehavior::kThrow).ToLocal(&yield_ns) ||
      !evaluation.As<v8::Promise>()->Then(ctx, yield_ns).ToLocal(&settled)) {
    return promise;  // terminated or out of memory: the run ends
  }
  return settled;
}

// ---- Native ops (isolet_sandbox_install_ops) ----------------------------------------

// A Uint8Array's memory adopted from Rust: freed by Rust's allocator and refunded to the
// run's ArrayBuffer budget when V8 frees the backing store (on any thread).
struct AdoptedBytes {
  CountingAllocator* allocator;
  size_t cap;
};

void FreeAdoptedBytes(void* data, size_t, void* deleter_data) {
  auto* adopted = static_cast<AdoptedBytes*>(deleter_data);
  isolet_value_free(static_cast<uint8_t*>(data), adopted->cap);
  adopted->allocator->refund(adopted->cap);
  delete adopted;
}

// Charges `bytes` to the run's ArrayBuffer budget, collecting once before giving up; past
// the budget the run ends as out of memory, as an ArrayBuffer allocation over it does.
bool ChargeOrOutOfMemory(isolet_sandbox* sb, size_t bytes) {
  if (bytes == 0 || sb->allocator->charge(bytes)) return true;
  sb->isolate->LowMemoryNotification();
  if (sb->allocator->charge(bytes)) return true;
  OverCeiling(sb);
  return false;
}

void FreeOpValue(isolet_op_value* v) {
  if (v->ptr != nullptr) isolet_value_free(v->ptr, v->cap);
  v->ptr = nullptr;
  v->len = 0;
  v->cap = 0;
}

// Frees what an op wrote (its `count` values, its error's name and message) and was not adopted.
void FreeOpResult(isolet_op_result* r) {
  uint32_t count = std::min<uint32_t>(r->count, ISOLET_OP_MAX_RESULTS);
  for (uint32_t i = 0; i < count; ++i) FreeOpValue(&r->values[i]);
  FreeOpValue(&r->name);
  FreeOpValue(&r->message);
}

// A value an op gave back, as a sandbox value; takes (adopts or frees) its block. Empty
// when V8 refused it (an exception is then pending) or the run is out of memory.
MaybeLocal<Value> OpValueToJs(isolet_sandbox* sb, Isolate* isolate, isolet_op_value* v) {
  switch (v->kind) {
    case ISOLET_OP_NUMBER: {
      // Most are small integers (offsets, counts): made without a HeapNumber's allocation.
      double n = v->number;
      if (n >= -2147483648.0 && n <= 2147483647.0) {
        int32_t small = static_cast<int32_t>(n);
        if (static_cast<double>(small) == n && !(small == 0 && std::signbit(n))) return v8::Integer::New(isolate, small);
      }
      return v8::Number::New(isolate, n);
    }
    case ISOLET_OP_BOOL:
      return v8::Boolean::New(isolate, v->number != 0);
    case ISOLET_OP_NULL:
      return v8::Null(isolate);
    case ISOLET_OP_PROMISE: {
      Local<v8::Promise::Resolver> resolver;
      if (!v8::Promise::Resolver::New(isolate->GetCurrentContext()).ToLocal(&resolver)) return MaybeLocal<Value>();
      sb->op_promises[static_cast<uint32_t>(v->number)].Reset(isolate, resolver);
      return resolver->GetPromise();
    }
    case ISOLET_OP_STRING:
    case ISOLET_OP_LATIN1: {
      MaybeLocal<String> text;
      if (v->len <= static_cast<size_t>(String::kMaxLength)) {
        text = v->kind == ISOLET_OP_STRING
                   ? String::NewFromUtf8(isolate, reinterpret_cast<const char*>(v->ptr),
                                         v8::NewStringType::kNormal, static_cast<int>(v->len))
                   : String::NewFromOneByte(isolate, v->ptr, v8::NewStringType::kNormal,
                                            static_cast<int>(v->len));
      }
      FreeOpValue(v);
      Local<String> out;
      if (!text.ToLocal(&out)) {
        if (!isolate->IsExecutionTerminating())
          isolate->ThrowException(v8::Exception::RangeError(Utf8(isolate, "Invalid string length")));
        return MaybeLocal<Value>();
      }
      return out;
    }
    case ISOLET_OP_BYTES: {
      size_t len = v->len;
      Local<v8::ArrayBuffer> buffer;
      if (v->ptr == nullptr || v->cap == 0) {
        FreeOpValue(v);
        buffer = v8::ArrayBuffer::New(isolate, 0);
      } else {
        if (!ChargeOrOutOfMemory(sb, v->cap)) {
          FreeOpValue(v);
          return MaybeLocal<Value>();
        }
        auto* adopted = new AdoptedBytes{sb->allocator.get(), v->cap};
        std::shared_ptr<v8::BackingStore> store =
            v8::ArrayBuffer::NewBackingStore(v->ptr, len, FreeAdoptedBytes, adopted);
        v->ptr = nullptr;  // the backing store owns it now
        v->cap = 0;
        buffer = v8::ArrayBuffer::New(isolate, std::move(store));
      }
      return v8::Uint8Array::New(buffer, 0, len);
    }
    default:
      FreeOpValue(v);
      return v8::Undefined(isolate);
  }
}

// The exports of embedded script `index` (run once per context, called with `lib`); empty
// with an exception pending when it could not run.
MaybeLocal<Value> LoadExports(isolet_sandbox* sb, Isolate* isolate, Local<Context> ctx, uint32_t index);

// Calls export `name` of the seam script (isolet_sandbox_install_ops' `seam_script`).
MaybeLocal<Value> CallSeamScript(isolet_sandbox* sb, Isolate* isolate, Local<Context> ctx, const char* name, int argc,
                                 Local<Value>* argv) {
  Local<Value> exports, fn;
  if (sb->ops_lib.IsEmpty() || !LoadExports(sb, isolate, ctx, sb->seam_script).ToLocal(&exports) || !exports->IsObject() ||
      !exports.As<Object>()->Get(ctx, Utf8(isolate, name)).ToLocal(&fn) || !fn->IsFunction())
    return MaybeLocal<Value>();
  return fn.As<v8::Function>()->Call(ctx, v8::Undefined(isolate), argc, argv);
}

// Makes an ISOLET_ERROR_CLASS_INSTALLED error: the seam script's makeError(message, name).
MaybeLocal<Value> MakeInstalledError(isolet_sandbox* sb, Isolate* isolate, Local<Context> ctx, Local<String> message,
                                     Local<String> name) {
  Local<Value> argv[] = {message, name};
  return CallSeamScript(sb, isolate, ctx, "makeError", 2, argv);
}

// The error an op threw: made by the seam script for ISOLET_ERROR_CLASS_INSTALLED, else a
// fresh Error of the class, named.
Local<Value> OpError(isolet_sandbox* sb, Isolate* isolate, Local<Context> ctx, isolet_op_result* r) {
  Local<String> message = String::NewFromUtf8(isolate, reinterpret_cast<const char*>(r->message.ptr),
                                              v8::NewStringType::kNormal, static_cast<int>(r->message.len))
                              .FromMaybe(String::Empty(isolate));
  if (r->error_class == ISOLET_ERROR_CLASS_INSTALLED && !sb->ops_lib.IsEmpty()) {
    TryCatch try_catch(isolate);
    Local<Value> made;
    if (MakeInstalledError(sb, isolate, ctx, message, Utf8(isolate, r->name.ptr, r->name.len)).ToLocal(&made)) return made;
    if (try_catch.HasTerminated()) {
      try_catch.ReThrow();
      return v8::Undefined(isolate);
    }
  }
  uint32_t error_class =
      r->error_class == ISOLET_ERROR_CLASS_INSTALLED ? static_cast<uint32_t>(ISOLET_ERROR_CLASS_ERROR) : r->error_class;
  return HostError(isolate, ctx, error_class, r->name.ptr, r->name.len, r->message.ptr, r->message.len);
}

// op(index, ...args): see isolet_sandbox_install_ops.
void OpCall(const v8::FunctionCallbackInfo<Value>& info) {
  Isolate* isolate = info.GetIsolate();
  Local<Context> ctx = isolate->GetCurrentContext();
  isolet_sandbox* sb = SandboxOf(isolate);
  if (info.Length() < 1 || !info[0]->IsUint32()) {
    isolate->ThrowException(v8::Exception::TypeError(Utf8(isolate, "op: the first argument is the op's index")));
    return;
  }
  uint32_t op = info[0].As<v8::Uint32>()->Value();
  size_t argc = std::min<size_t>(static_cast<size_t>(info.Length() - 1), ISOLET_OP_MAX_ARGS);
  // Only the `argc` arguments are set and read (zeroing all the arrays below cost an op call
  // more than the rest of its crossing).
  isolet_op_value args[ISOLET_OP_MAX_ARGS];
  for (size_t i = 0; i < argc; ++i) args[i] = isolet_op_value{};
  // Strings first: flattening one may collect garbage, which may move a small typed
  // array's bytes; views are taken after, when nothing allocates any more.
  size_t charged = 0;
  bool ok = true;
  for (size_t i = 0; i < argc && ok; ++i) {
    Local<Value> arg = info[static_cast<int>(i + 1)];
    isolet_op_value& v = args[i];
    if (arg->IsString()) {
      Local<String> str = arg.As<String>();
      // Its UTF-8 takes at least a byte per UTF-16 unit: charged before it is measured, as
      // measuring flattens a rope ('x'.repeat(2 ** 29) is a few bytes until then), and a
      // flattening past the heap's limit inside this call is a fatal OOM, not a throw.
      size_t at_least = static_cast<size_t>(str->Length()) + 1;
      if (!ChargeOrOutOfMemory(sb, at_least)) {
        ok = false;
        break;
      }
      charged += at_least;
#if ISOLET_V8_AT_LEAST(13, 6)
      size_t need = str->Utf8LengthV2(isolate);
#else
      size_t need = static_cast<size_t>(str->Utf8Length(isolate));
#endif
      if (need + 1 > at_least && !ChargeOrOutOfMemory(sb, need + 1 - at_least)) {
        ok = false;
        break;
      }
      charged += need + 1 - at_least;
      v.kind = ISOLET_OP_STRING;
      v.ptr = static_cast<uint8_t*>(std::malloc(need + 1));
      v.cap = need + 1;
      if (v.ptr == nullptr) {
        OverCeiling(sb);
        ok = false;
        break;
      }
#if ISOLET_V8_AT_LEAST(13, 6)
      v.len = str->WriteUtf8V2(isolate, reinterpret_cast<char*>(v.ptr), need, String::WriteFlags::kReplaceInvalidUtf8);
#else
      v.len = static_cast<size_t>(str->WriteUtf8(isolate, reinterpret_cast<char*>(v.ptr), static_cast<int>(need), nullptr,
                                                 String::REPLACE_INVALID_UTF8 | String::NO_NULL_TERMINATION));
#endif
    } else if (arg->IsNumber()) {
      v.kind = ISOLET_OP_NUMBER;
      v.number = arg.As<v8::Number>()->Value();
    } else if (arg->IsBoolean()) {
      v.kind = ISOLET_OP_BOOL;
      v.number = arg->IsTrue() ? 1 : 0;
    } else if (arg->IsUndefined()) {
      v.kind = ISOLET_OP_UNDEFINED;
    } else if (arg->IsArrayBufferView() || arg->IsArrayBuffer() || arg->IsSharedArrayBuffer()) {
      v.kind = ISOLET_OP_BYTES;  // filled below
    } else {
      v.kind = ISOLET_OP_OTHER;
    }
  }
  for (size_t i = 0; i < argc && ok; ++i) {
    if (args[i].kind != ISOLET_OP_BYTES) continue;
    Local<Value> arg = info[static_cast<int>(i + 1)];
    if (arg->IsArrayBufferView()) {
      Local<v8::ArrayBufferView> view = arg.As<v8::ArrayBufferView>();
      Local<v8::ArrayBuffer> buffer = view->Buffer();
      size_t length = view->ByteLength();
      if (buffer->Data() != nullptr && length > 0) {
        args[i].ptr = static_cast<uint8_t*>(buffer->Data()) + view->ByteOffset();
        args[i].len = length;
      }
    } else if (arg->IsArrayBuffer()) {
      Local<v8::ArrayBuffer> buffer = arg.As<v8::ArrayBuffer>();
      if (buffer->Data() != nullptr) {
        args[i].ptr = static_cast<uint8_t*>(buffer->Data());
        args[i].len = buffer->ByteLength();
      }
    } else {
      Local<v8::SharedArrayBuffer> buffer = arg.As<v8::SharedArrayBuffer>();
      args[i].ptr = static_cast<uint8_t*>(buffer->Data());
      args[i].len = buffer->ByteLength();
    }
  }
  isolet_op_result result;
  result.count = 0;
  result.error_class = 0;
  result.name = isolet_op_value{};
  result.message = isolet_op_value{};
  int32_t rc = ok ? sb->config.on_op(sb->config.ctx, op, args, argc, &result) : ISOLET_TERMINATED;
  for (size_t i = 0; i < argc; ++i) {
    // Only strings were copied (malloc'd here); bytes are the views' own.
    if (args[i].kind == ISOLET_OP_STRING) std::free(args[i].ptr);
  }
  if (charged > 0) sb->allocator->refund(charged);
  if (rc == ISOLET_TERMINATED) {
    FreeOpResult(&result);
    isolate->TerminateExecution();
    return;
  }
  if (rc == ISOLET_THREW) {
    Local<Value> error = OpError(sb, isolate, ctx, &result);
    FreeOpResult(&result);
    if (!isolate->IsExecutionTerminating()) isolate->ThrowException(error);
    return;
  }
  uint32_t count = std::min<uint32_t>(result.count, ISOLET_OP_MAX_RESULTS);
  Local<Value> values[ISOLET_OP_MAX_RESULTS];
  bool made = true;
  for (uint32_t i = 0; i < count; ++i) {
    if (made) {
      made = OpValueToJs(sb, isolate, &result.values[i]).ToLocal(&values[i]);
    }
  }
  FreeOpResult(&result);
  if (!made) return;  // an exception is pending, or the run is out of memory
  if (count == 0) {
    info.GetReturnValue().SetUndefined();
  } else if (count == 1) {
    info.GetReturnValue().Set(values[0]);
  } else {
    info.GetReturnValue().Set(v8::Array::New(isolate, values, count));
  }
}

// A lazy global (isolet_sandbox_install_ops): its data is the index of its script, its
// value the script's exports[key].
void LazyGlobal(Local<v8::Name> key, const v8::PropertyCallbackInfo<Value>& info) {
  Isolate* isolate = info.GetIsolate();
  Local<Context> ctx = isolate->GetCurrentContext();
  Local<Value> exports, value;
  if (LoadExports(SandboxOf(isolate), isolate, ctx, info.Data().As<v8::Uint32>()->Value()).ToLocal(&exports) &&
      exports->IsObject() && exports.As<Object>()->Get(ctx, key).ToLocal(&value)) {
    info.GetReturnValue().Set(value);
  }
}

// An embedded script's source, which lives as long as the process: V8 reads it in place.
class StaticSource final : public v8::String::ExternalOneByteStringResource {
 public:
  StaticSource(const uint8_t* data, size_t len) : data_(reinterpret_cast<const char*>(data)), len_(len) {}
  const char* data() const override { return data_; }
  size_t length() const override { return len_; }

 private:
  const char* data_;
  size_t len_;
};

// Runs embedded script `index`, whose value is a function, and calls that with `lib`:
// *out is what the call returned. Its source and code cache come from on_script; when no
// cache was consumed, isolet_sandbox_cache_scripts makes one later. False with an exception
// pending (or the run terminating).
bool RunEmbedded(isolet_sandbox* sb, Isolate* isolate, Local<Context> ctx, uint32_t index, Local<Value>* out) {
  isolet_script script = {};
  if (sb->config.on_script(sb->config.ctx, index, &script) != ISOLET_OK) {
    isolate->ThrowException(v8::Exception::RangeError(Utf8(isolate, "no such embedded script")));
    return false;
  }
  Local<String> text;
  if (!String::NewExternalOneByte(isolate, new StaticSource(script.code, script.len)).ToLocal(&text)) return false;
  auto* cached = (script.cache_len > 0 && script.cache_len <= static_cast<size_t>(INT32_MAX))
                     ? new v8::ScriptCompiler::CachedData(script.cache, static_cast<int>(script.cache_len),
                                                          v8::ScriptCompiler::CachedData::BufferNotOwned)
                     : nullptr;
  v8::ScriptCompiler::Source source(text, OriginOf(isolate, script.origin, script.origin_len, 0), cached);
  auto options = cached != nullptr ? v8::ScriptCompiler::kConsumeCodeCache : v8::ScriptCompiler::kNoCompileOptions;
  Local<v8::Script> compiled;
  if (!v8::ScriptCompiler::Compile(ctx, &source, options).ToLocal(&compiled)) return false;
  bool consumed = cached != nullptr && !source.GetCachedData()->rejected;
  Local<Value> fn;
  if (!compiled->Run(ctx).ToLocal(&fn)) return false;
  if (!fn->IsFunction()) {
    isolate->ThrowException(v8::Exception::TypeError(Utf8(isolate, "an embedded script's value is not a function")));
    return false;
  }
  Local<Value> argv[] = {sb->ops_lib.Get(isolate)};
  if (!fn.As<v8::Function>()->Call(ctx, v8::Undefined(isolate), 1, argv).ToLocal(out)) return false;
  if (!consumed) sb->uncached_scripts.emplace_back(index, v8::Global<v8::UnboundScript>(isolate, compiled->GetUnboundScript()));
  return true;
}

MaybeLocal<Value> LoadExports(isolet_sandbox* sb, Isolate* isolate, Local<Context> ctx, uint32_t index) {
  if (index < sb->loaded.size() && !sb->loaded[index].IsEmpty()) return sb->loaded[index].Get(isolate);
  Local<Value> exports;
  if (!RunEmbedded(sb, isolate, ctx, index, &exports)) return MaybeLocal<Value>();
  if (index >= sb->loaded.size()) sb->loaded.resize(index + 1);
  sb->loaded[index].Reset(isolate, exports);
  return exports;
}

// load(index): see isolet_sandbox_install_ops.
void LoadCall(const v8::FunctionCallbackInfo<Value>& info) {
  Isolate* isolate = info.GetIsolate();
  Local<Context> ctx = isolate->GetCurrentContext();
  if (info.Length() < 1 || !info[0]->IsUint32()) {
    isolate->ThrowException(v8::Exception::TypeError(Utf8(isolate, "load(index)")));
    return;
  }
  Local<Value> exports;
  if (LoadExports(SandboxOf(isolate), isolate, ctx, info[0].As<v8::Uint32>()->Value()).ToLocal(&exports)) {
    info.GetReturnValue().Set(exports);
  }
}

// host(index): see isolet_sandbox_install_ops.
void HostCall(const v8::FunctionCallbackInfo<Value>& info) {
  Isolate* isolate = info.GetIsolate();
  Local<Context> ctx = isolate->GetCurrentContext();
  if (info.Length() < 1 || !info[0]->IsUint32()) {
    isolate->ThrowException(v8::Exception::TypeError(Utf8(isolate, "host(index)")));
    return;
  }
  Local<v8::Function> fn;
  if (v8::Function::New(ctx, HostFunction, info[0], 0, v8::ConstructorBehavior::kThrow).ToLocal(&fn)) {
    info.GetReturnValue().Set(fn);
  }
}

// The structured-clone algorithm's own failure, as its standard names it.
class CloneSerializer final : public v8::ValueSerializer::Delegate {
 public:
  CloneSerializer(isolet_sandbox* sb, size_t limit) : sb_(sb), limit_(limit) {}

  void ThrowDataCloneError(Local<String> message) override {
    Isolate* isolate = sb_->isolate;
    Local<Context> ctx = isolate->GetCurrentContext();
    Local<Value> error;
    if (!MakeInstalledError(sb_, isolate, ctx, message, Utf8(isolate, "DataCloneError")).ToLocal(&error)) return;
    isolate->ThrowException(error);
  }
  void* ReallocateBufferMemory(void* old_buffer, size_t size, size_t* actual_size) override {
    if (size > limit_) {
      too_large = true;
      return nullptr;
    }
    void* p = std::realloc(old_buffer, size);
    if (p == nullptr) return nullptr;
    *actual_size = size;
    return p;
  }
  // The serializer frees what it did not release; Release()'s block is the caller's.
  void FreeBufferMemory(void* buffer) override { std::free(buffer); }
  bool too_large = false;

 private:
  isolet_sandbox* sb_;
  size_t limit_;
};

// clone(value): see isolet_sandbox_install_ops. The serialized form lives outside the heap
// for the call: bounded by, and charged to, the run's ArrayBuffer budget.
void CloneCall(const v8::FunctionCallbackInfo<Value>& info) {
  Isolate* isolate = info.GetIsolate();
  Local<Context> ctx = isolate->GetCurrentContext();
  isolet_sandbox* sb = SandboxOf(isolate);
  Local<Value> value = info.Length() > 0 ? info[0] : Local<Value>(v8::Undefined(isolate));
  CloneSerializer delegate(sb, sb->allocator->limit());
  v8::ValueSerializer serializer(isolate, &delegate);
  serializer.WriteHeader();
  if (serializer.WriteValue(ctx, value).IsNothing()) {
    if (delegate.too_large && !isolate->IsExecutionTerminating()) OverCeiling(sb);
    return;
  }
  std::pair<uint8_t*, size_t> bytes = serializer.Release();
  std::unique_ptr<uint8_t, void (*)(void*)> owned(bytes.first, std::free);
  if (!ChargeOrOutOfMemory(sb, bytes.second)) return;
  Local<Value> copy;
  bool ok = DeserializeValue(isolate, ctx, bytes.first, bytes.second).ToLocal(&copy);
  sb->allocator->refund(bytes.second);
  if (ok) info.GetReturnValue().Set(copy);
}

// cloneKind(value): see isolet_sandbox_install_ops.
void CloneKindCall(const v8::FunctionCallbackInfo<Value>& info) {
  Isolate* isolate = info.GetIsolate();
  info.GetReturnValue().Set(Utf8(isolate, CloneKind(info.Length() > 0 ? info[0] : Local<Value>(v8::Undefined(isolate)))));
}

}  // namespace

extern "C" {

int32_t isolet_v8_init(int32_t main_uses_node_snapshot) {
  if (g_platform != nullptr) return 0;
#if !ISOLET_V8_AT_LEAST(12, 0)
  if (main_uses_node_snapshot) g_node_snapshot = node::SnapshotBuilder::GetEmbeddedSnapshotData();
#else
  (void)main_uses_node_snapshot;
#endif
  Isolate* isolate = Isolate::GetCurrent();
  if (isolate == nullptr) return 1;
  HandleScope scope(isolate);
  Local<Context> ctx = isolate->GetCurrentContext();
  if (ctx.IsEmpty()) return 2;
  node::Environment* env = node::GetCurrentEnvironment(ctx);
  if (env == nullptr) return 3;
  g_platform = node::GetMultiIsolatePlatform(env);
  return g_platform == nullptr ? 4 : 0;
}

const char* isolet_v8_version(void) { return v8::V8::GetVersion(); }

void isolet_v8_set_flags(const char* flags, size_t len) {
  v8::V8::SetFlagsFromString(flags, len);
}

isolet_sandbox* isolet_sandbox_new(const isolet_sandbox_config* config) {
  if (g_platform == nullptr) return nullptr;
  auto* sb = new isolet_sandbox();
  sb->config = *config;
  sb->refusal_text.resize(config->max_error_text_bytes);
  sb->allocator = std::make_unique<CountingAllocator>(config->array_buffer_limit_bytes,
                                                      &sb->hit_memory_limit);
  sb->tasks = std::make_shared<TaskQueue>(config->wake, config->ctx);
  sb->delegate = std::make_unique<PlatformDelegate>(sb->tasks);

  Isolate::CreateParams params;
  params.array_buffer_allocator = sb->allocator.get();
  params.constraints.ConfigureDefaultsFromHeapSize(0, config->heap_limit_bytes);
#if !ISOLET_V8_AT_LEAST(12, 0)
  if (g_node_snapshot != nullptr) node::SnapshotBuilder::InitializeIsolateParams(g_node_snapshot, &params);
#endif

  // Registration must come between Allocate and Initialize: heap setup already posts
  // tasks, and an unregistered isolate aborts the process in NodePlatform::ForIsolate.
  Isolate* isolate = Isolate::Allocate();
  g_platform->RegisterIsolate(isolate, sb->delegate.get());
  Isolate::Initialize(isolate, params);
  sb->isolate = isolate;
  sb->allocator->set_isolate(isolate);
  isolate->SetData(0, sb);
  isolate->SetMicrotasksPolicy(v8::MicrotasksPolicy::kExplicit);
  isolate->AddNearHeapLimitCallback(NearHeapLimit, sb);
  isolate->SetOOMErrorHandler(OnFatalOOM);
  isolate->SetPromiseRejectCallback(OnPromiseReject);
  t_sandbox = sb;
  isolate->AddGCPrologueCallback(TrackPeakHeap);
  isolate->AddGCEpilogueCallback(CheckLiveHeap, v8::kGCTypeMarkSweepCompact);
  for (size_t i = 0; i < isolate->NumberOfHeapSpaces(); ++i) {
    v8::HeapSpaceStatistics space;
    if (isolate->GetHeapSpaceStatistics(&space, i) && std::strcmp(space.space_name(), "new_large_object_space") == 0) {
      sb->young_large_space = static_cast<int>(i);
    }
  }

  bool guarded;
  {
    Isolate::Scope isolate_scope(isolate);
    HandleScope handle_scope(isolate);
    Local<Context> ctx = Context::New(isolate);
    Context::Scope context_scope(ctx);
    guarded = GuardResizableBuffers(isolate, ctx) && GuardJsonParse(isolate, ctx);
    Local<Value> wasm_ns, instance;
    if (ctx->Global()->Get(ctx, Utf8(isolate, "WebAssembly")).ToLocal(&wasm_ns) && wasm_ns->IsObject() &&
        wasm_ns.As<Object>()->Get(ctx, Utf8(isolate, "Instance")).ToLocal(&instance) &&
        instance->IsFunction()) {
      sb->wasm_instance.Reset(isolate, instance.As<v8::Function>());
    }
    sb->context.Reset(isolate, ctx);
    sb->data_cache.Reset(isolate, Object::New(isolate, v8::Null(isolate), nullptr, nullptr, 0));
  }
  if (!guarded) {
    // Without the guard a run could commit memory past its budget: no sandbox.
    isolet_sandbox_dispose(sb);
    return nullptr;
  }
  return sb;
}

void isolet_sandbox_dispose(isolet_sandbox* sb) {
  if (sb == nullptr) return;
  if (t_sandbox == sb) t_sandbox = nullptr;
  sb->tasks->close();
  {
    Isolate::Scope isolate_scope(sb->isolate);
    sb->calls.clear();
    for (BufferCharge* charge : sb->buffer_charges) delete charge;
    sb->buffer_charges.clear();
    sb->completion.Reset();
    sb->last_script.Reset();
    sb->result_module.Reset();
    sb->modules.clear();
    sb->free_module_ids.clear();
    sb->data_cache.Reset();
    sb->ops_lib.Reset();
    sb->loaded.clear();
    sb->uncached_scripts.clear();
    sb->op_promises.clear();
    sb->rejections.clear();
    sb->wasm_instance.Reset();
    sb->context.Reset();
  }
  Isolate* isolate = sb->isolate;
#if ISOLET_V8_AT_LEAST(13, 0)
  // Node 24+: the platform disposes, unregisters and frees in the one safe order.
  g_platform->DisposeIsolate(isolate);
#else
  // Unregister first, as Node's own Workers do (nodejs/node#30846): Dispose frees the
  // isolate, and another thread's Isolate::Allocate may get the same address before an
  // UnregisterIsolate that came after; RegisterIsolate then aborts the whole process
  // (`insertion.second`). V8 took its task runner at Initialize and asks no more.
  g_platform->UnregisterIsolate(isolate);
  isolate->Dispose();
#endif
  delete sb;
}

void isolet_sandbox_set_copy_limits(isolet_sandbox* sb, size_t max_message_bytes,
                                    size_t max_output_bytes) {
  sb->max_message_bytes = max_message_bytes;
  sb->max_output_bytes = max_output_bytes;
}

void* isolet_sandbox_isolate(isolet_sandbox* sb) { return sb->isolate; }

void isolet_isolate_terminate(void* isolate) {
  static_cast<Isolate*>(isolate)->TerminateExecution();
}

int32_t isolet_sandbox_add_host_function(isolet_sandbox* sb, const uint8_t* name, size_t len,
                                         uint32_t fn_index) {
  ENTER(sb);
  Local<v8::Function> fn;
  if (!v8::Function::New(ctx, HostFunction, v8::Integer::NewFromUnsigned(isolate, fn_index), 0,
                         v8::ConstructorBehavior::kThrow)
           .ToLocal(&fn))
    return ISOLET_FAILED;
  Local<String> key = Utf8(isolate, name, len);
  fn->SetName(key);
  // Defined, not assigned: a capability named `__proto__` becomes an own property
  // instead of replacing the global's prototype.
  return ctx->Global()->DefineOwnProperty(ctx, key, fn).FromMaybe(false) ? ISOLET_OK : ISOLET_FAILED;
}

int32_t isolet_sandbox_delete_global(isolet_sandbox* sb, const uint8_t* object, size_t object_len,
                                     const uint8_t* key, size_t key_len) {
  ENTER(sb);
  TryCatch try_catch(isolate);
  Local<Value> holder = ctx->Global();
  if (object_len > 0 && !ctx->Global()->Get(ctx, Utf8(isolate, object, object_len)).ToLocal(&holder))
    return ISOLET_FAILED;
  if (!holder->IsObject()) return ISOLET_OK;
  return holder.As<Object>()->Delete(ctx, Utf8(isolate, key, key_len)).FromMaybe(false) ? ISOLET_OK
                                                                                         : ISOLET_FAILED;
}

int32_t isolet_sandbox_remove_namespace(isolet_sandbox* sb, const uint8_t* ns_name, size_t ns_len) {
  ENTER(sb);
  TryCatch try_catch(isolate);
  Local<Object> global = ctx->Global();
  Local<String> ns_key = Utf8(isolate, ns_name, ns_len);
  Local<Value> ns;
  if (!global->Get(ctx, ns_key).ToLocal(&ns) || !ns->IsObject()) return ISOLET_OK;
  Local<v8::Array> names;
  // WebIDL members are not enumerable: ask for all string-keyed properties.
  if (!ns.As<Object>()
           ->GetOwnPropertyNames(ctx, static_cast<v8::PropertyFilter>(v8::SKIP_SYMBOLS))
           .ToLocal(&names))
    return ISOLET_FAILED;
  for (uint32_t i = 0; i < names->Length(); ++i) {
    Local<Value> name, member, proto;
    if (!names->Get(ctx, i).ToLocal(&name) || !ns.As<Object>()->Get(ctx, name).ToLocal(&member) ||
        !member->IsFunction())
      continue;
    if (!member.As<Object>()->Get(ctx, Utf8(isolate, "prototype")).ToLocal(&proto) ||
        !proto->IsObject())
      continue;
    if (proto.As<Object>()->Delete(ctx, Utf8(isolate, "constructor")).IsNothing())
      return ISOLET_FAILED;
  }
  return global->Delete(ctx, ns_key).FromMaybe(false) ? ISOLET_OK : ISOLET_FAILED;
}

int32_t isolet_sandbox_add_host_namespace(isolet_sandbox* sb, const uint8_t* ns, size_t ns_len,
                                          const uint8_t* names, size_t names_len,
                                          const uint32_t* fn_indices, size_t count) {
  ENTER(sb);
  // Null prototype: a member lookup never reaches Object.prototype of this context.
  Local<Object> holder = Object::New(isolate, v8::Null(isolate), nullptr, nullptr, 0);
  const auto fixed = static_cast<v8::PropertyAttribute>(v8::ReadOnly | v8::DontDelete);
  size_t start = 0;
  for (size_t i = 0; i < count; ++i) {
    const void* nul = std::memchr(names + start, '\0', names_len - start);
    size_t end = nul ? static_cast<const uint8_t*>(nul) - names : names_len;
    Local<v8::Function> fn;
    if (!v8::Function::New(ctx, HostFunction, v8::Integer::NewFromUnsigned(isolate, fn_indices[i]),
                           0, v8::ConstructorBehavior::kThrow)
             .ToLocal(&fn))
      return ISOLET_FAILED;
    Local<String> key = Utf8(isolate, names + start, end - start);
    fn->SetName(key);
    if (!holder->DefineOwnProperty(ctx, key, fn, fixed).FromMaybe(false)) return ISOLET_FAILED;
    start = end + 1;
    if (start > names_len && i + 1 < count) return ISOLET_FAILED;
  }
  if (!holder->SetIntegrityLevel(ctx, v8::IntegrityLevel::kFrozen).FromMaybe(false))
    return ISOLET_FAILED;
  return ctx->Global()->DefineOwnProperty(ctx, Utf8(isolate, ns, ns_len), holder, fixed).FromMaybe(false)
             ? ISOLET_OK
             : ISOLET_FAILED;
}

int32_t isolet_sandbox_add_data_object(isolet_sandbox* sb, const uint8_t* name, size_t len) {
  ENTER(sb);
  Local<v8::ObjectTemplate> tmpl = v8::ObjectTemplate::New(isolate);
  tmpl->SetHandler(v8::NamedPropertyHandlerConfiguration(
      DataGetter, DataSetter, nullptr, DataDeleter, nullptr, Local<Value>(),
      v8::PropertyHandlerFlags::kNonMasking));
  Local<Object> data;
  if (!tmpl->NewInstance(ctx).ToLocal(&data)) return ISOLET_FAILED;
#if ISOLET_V8_AT_LEAST(13, 0)
  (void)data->SetPrototypeV2(ctx, v8::Null(isolate));
#else
  (void)data->SetPrototype(ctx, v8::Null(isolate));
#endif
  return ctx->Global()
                 ->DefineOwnProperty(ctx, Utf8(isolate, name, len), data,
                                     static_cast<v8::PropertyAttribute>(v8::ReadOnly |
                                                                        v8::DontDelete))
                 .FromMaybe(false)
             ? ISOLET_OK
             : ISOLET_FAILED;
}

int32_t isolet_wasm_compile(isolet_sandbox* sb, const uint8_t* wasm, size_t wasm_len,
                            isolet_wasm_module** out, isolet_error* err) {
  ENTER(sb);
  TryCatch try_catch(isolate);
  Local<v8::WasmModuleObject> module;
  if (!v8::WasmModuleObject::Compile(isolate, v8::MemorySpan<const uint8_t>(wasm, wasm_len))
           .ToLocal(&module)) {
    DescribeException(isolate, ctx, try_catch.Exception(), try_catch.Message(), err);
    return ISOLET_THREW;
  }
  *out = new isolet_wasm_module{module->GetCompiledModule()};
  return ISOLET_OK;
}

int32_t isolet_sandbox_add_wasm_instance(isolet_sandbox* sb, const uint8_t* ns, size_t ns_len,
                                         const uint8_t* name, size_t name_len,
                                         const isolet_wasm_module* compiled, isolet_error* err) {
  ENTER(sb);
  TryCatch try_catch(isolate);
  Local<Object> global = ctx->Global();
  Local<String> ns_key = Utf8(isolate, ns, ns_len);
  Local<Value> holder_value;
  if (!global->GetRealNamedProperty(ctx, ns_key).ToLocal(&holder_value)) {
    try_catch.Reset();
    holder_value = Object::New(isolate);
    if (!global->DefineOwnProperty(ctx, ns_key, holder_value).FromMaybe(false)) return ISOLET_FAILED;
  }
  if (!holder_value->IsObject()) return ISOLET_FAILED;
  Local<v8::WasmModuleObject> module;
  if (!v8::WasmModuleObject::FromCompiledModule(isolate, compiled->compiled).ToLocal(&module))
    return ISOLET_FAILED;
  // new WebAssembly.Instance(module): V8 has no public C++ call for instantiation. The
  // constructor was kept when the context was made (the global namespace is gone by now).
  if (sb->wasm_instance.IsEmpty()) return ISOLET_FAILED;
  Local<v8::Function> ctor = sb->wasm_instance.Get(isolate);
  Local<Object> instance;
  Local<Value> argv[] = {module};
  if (!ctor->NewInstance(ctx, 1, argv).ToLocal(&instance)) {
    DescribeException(isolate, ctx, try_catch.Exception(), try_catch.Message(), err);
    return ISOLET_THREW;
  }
  Local<Value> exports;
  if (!instance->Get(ctx, Utf8(isolate, "exports")).ToLocal(&exports)) return ISOLET_FAILED;
  return holder_value.As<Object>()->CreateDataProperty(ctx, Utf8(isolate, name, name_len), exports).FromMaybe(false)
             ? ISOLET_OK
             : ISOLET_FAILED;
}

void isolet_wasm_module_free(isolet_wasm_module* module) { delete module; }

// How a started run continues: `ran` false reports what stopped it (a termination, or
// what it threw); else its value becomes the completion and microtasks run.
static int32_t Started(isolet_sandbox* sb, Isolate* isolate, Local<Context> ctx, TryCatch& try_catch,
                       bool ran, Local<Value> result, isolet_error* err) {
  if (!ran) {
    if (try_catch.HasTerminated() || isolate->IsExecutionTerminating()) return ISOLET_TERMINATED;
    if (!try_catch.HasCaught()) return ISOLET_FAILED;
    DescribeException(isolate, ctx, try_catch.Exception(), try_catch.Message(), err);
    return ISOLET_THREW;
  }
  sb->completion.Reset(isolate, result);
  return isolet_sandbox_poll(sb);
}

int32_t isolet_sandbox_run(isolet_sandbox* sb, const uint8_t* code, size_t len, const uint8_t* origin_name,
                           size_t origin_len, int32_t column_offset, int32_t call_completion,
                           const uint8_t* cache, size_t cache_len, int32_t* cache_rejected, isolet_error* err) {
  ENTER(sb);
  TryCatch try_catch(isolate);
  *cache_rejected = 0;
  sb->result_module.Reset();
  Local<String> text;
  if (!CodeString(isolate, code, len, &text)) return ISOLET_TOO_LARGE;
  // The Source owns the CachedData object (not the bytes, which stay Rust's).
  auto* cached = (cache_len > 0 && cache_len <= static_cast<size_t>(INT32_MAX))
                     ? new v8::ScriptCompiler::CachedData(cache, static_cast<int>(cache_len),
                                                          v8::ScriptCompiler::CachedData::BufferNotOwned)
                     : nullptr;
  v8::ScriptCompiler::Source script_source(text, OriginOf(isolate, origin_name, origin_len, column_offset), cached);
  auto options = cached != nullptr ? v8::ScriptCompiler::kConsumeCodeCache : v8::ScriptCompiler::kNoCompileOptions;
  Local<v8::Script> script;
  bool compiled = v8::ScriptCompiler::Compile(ctx, &script_source, options).ToLocal(&script);
  // V8 checks its version, flags and the source's length against the data; on a
  // mismatch it compiles from the source and says so here.
  if (cached != nullptr && script_source.GetCachedData()->rejected) *cache_rejected = 1;
  if (!compiled) {
    if (try_catch.HasTerminated()) return ISOLET_TERMINATED;
    DescribeSyntaxError(isolate, ctx, try_catch, err);
    return ISOLET_SYNTAX;
  }
  sb->last_script.Reset(isolate, script->GetUnboundScript());
  Local<Value> result;
  bool ran = script->Run(ctx).ToLocal(&result);
  // Called from here rather than by the script, so no frame of the wrapper's call site
  // shows in the sandbox's stacks.
  if (ran && call_completion != 0) {
    ran = result->IsFunction() &&
          result.As<v8::Function>()->Call(ctx, v8::Undefined(isolate), 0, nullptr).ToLocal(&result);
  }
  return Started(sb, isolate, ctx, try_catch, ran, result, err);
}

// Persistent sandboxes: calls globalThis[name](...args) in the context the earlier runs
// left, `args` a serialized array. The result is the completion, as for isolet_sandbox_run.
int32_t isolet_sandbox_call_global(isolet_sandbox* sb, const uint8_t* name, size_t name_len,
                                   const uint8_t* args, size_t args_len, isolet_error* err) {
  ENTER(sb);
  TryCatch try_catch(isolate);
  Local<Value> fn;
  Local<Value> list;
  bool ok = ctx->Global()->Get(ctx, Utf8(isolate, name, name_len)).ToLocal(&fn);
  if (ok && !fn->IsFunction()) {
    isolate->ThrowException(v8::Exception::TypeError(
        Utf8(isolate, (std::string(reinterpret_cast<const char*>(name), name_len) + " is not a function").c_str())));
    ok = false;
  }
  ok = ok && DeserializeValue(isolate, ctx, args, args_len).ToLocal(&list);
  if (ok && !list->IsArray()) return ISOLET_FAILED;
  Local<Value> result;
  if (ok) {
    Local<v8::Array> array = list.As<v8::Array>();
    uint32_t n = array->Length();
    std::vector<Local<Value>> argv;
    argv.reserve(n);
    for (uint32_t i = 0; ok && i < n; ++i) {
      Local<Value> item;
      ok = array->Get(ctx, i).ToLocal(&item);
      if (ok) argv.push_back(item);
    }
    ok = ok && fn.As<v8::Function>()->Call(ctx, v8::Undefined(isolate), static_cast<int>(argv.size()), argv.data()).ToLocal(&result);
  }
  return Started(sb, isolate, ctx, try_catch, ok, result, err);
}

int32_t isolet_sandbox_create_code_cache(isolet_sandbox* sb, isolet_bytes* out) {
  *out = isolet_bytes{nullptr, 0};
  ENTER(sb);
  if (sb->last_script.IsEmpty() || isolate->IsExecutionTerminating()) return ISOLET_FAILED;
  std::unique_ptr<v8::ScriptCompiler::CachedData> data(
      v8::ScriptCompiler::CreateCodeCache(sb->last_script.Get(isolate)));
  if (!data || data->length <= 0) return ISOLET_FAILED;
  *out = CopyBytes(data->data, static_cast<size_t>(data->length));
  return out->ptr == nullptr ? ISOLET_FAILED : ISOLET_OK;
}

// Persistent sandboxes, between two runs: forgets the finished run's result and its host
// calls still pending (their promises never settle), and clears a termination the run
// left behind, so the next run of the same context starts clean.
void isolet_sandbox_end_run(isolet_sandbox* sb) {
  Isolate::Scope isolate_scope(sb->isolate);
  HandleScope handle_scope(sb->isolate);
  sb->calls.clear();
  sb->op_promises.clear();
  sb->completion.Reset();
  // A module run's result is read from its module; a later call or script has none.
  sb->result_module.Reset();
  sb->isolate->CancelTerminateExecution();
}

int32_t isolet_sandbox_check_syntax(isolet_sandbox* sb, const uint8_t* code, size_t len,
                                    const uint8_t* origin_name, size_t origin_len,
                                    int32_t column_offset, int32_t as_function_body,
                                    isolet_error* err) {
  ENTER(sb);
  TryCatch try_catch(isolate);
  Local<String> text;
  if (!CodeString(isolate, code, len, &text)) return ISOLET_TOO_LARGE;
  v8::ScriptCompiler::Source source(text, OriginOf(isolate, origin_name, origin_len, column_offset));
  bool compiled;
  if (as_function_body != 0) {
    Local<v8::Function> fn;
    compiled = v8::ScriptCompiler::CompileFunction(ctx, &source).ToLocal(&fn);
  } else {
    Local<v8::Script> script;
    compiled = v8::ScriptCompiler::Compile(ctx, &source).ToLocal(&script);
  }
  if (compiled) return ISOLET_OK;
  if (try_catch.HasTerminated() || isolate->IsExecutionTerminating()) return ISOLET_TERMINATED;
  DescribeSyntaxError(isolate, ctx, try_catch, err);
  return ISOLET_SYNTAX;
}

int32_t isolet_sandbox_poll(isolet_sandbox* sb) {
  ENTER(sb);
  {
    TryCatch try_catch(isolate);
    isolate->PerformMicrotaskCheckpoint();
    if (try_catch.HasTerminated() || isolate->IsExecutionTerminating()) return ISOLET_TERMINATED;
  }
  if (sb->completion.IsEmpty()) return ISOLET_OK;
  Local<Value> completion = sb->completion.Get(isolate);
  if (completion->IsPromise() &&
      completion.As<v8::Promise>()->State() == v8::Promise::kPending) {
    return ISOLET_PENDING;
  }
  return ISOLET_OK;
}

int32_t isolet_sandbox_take_result(isolet_sandbox* sb, isolet_value* value, isolet_error* err) {
  ENTER(sb);
  TryCatch try_catch(isolate);
  Local<Value> result =
      sb->completion.IsEmpty() ? v8::Undefined(isolate).As<Value>() : sb->completion.Get(isolate);
  if (result->IsPromise()) {
    Local<v8::Promise> promise = result.As<v8::Promise>();
    if (promise->State() == v8::Promise::kRejected) {
      Local<Value> reason = promise->Result();
      Local<v8::Message> message = v8::Exception::CreateMessage(isolate, reason);
      DescribeException(isolate, ctx, reason, message, err);
      if (try_catch.HasTerminated() || isolate->IsExecutionTerminating()) return ISOLET_TERMINATED;
      return ISOLET_THREW;
    }
    if (promise->State() == v8::Promise::kPending) return ISOLET_PENDING;
    result = promise->Result();
  }
  if (!sb->result_module.IsEmpty() &&
      !ModuleResult(isolate, ctx, sb->result_module.Get(isolate), &result)) {
    if (try_catch.HasTerminated() || isolate->IsExecutionTerminating()) return ISOLET_TERMINATED;
    if (!try_catch.HasCaught()) return ISOLET_FAILED;
    DescribeException(isolate, ctx, try_catch.Exception(), try_catch.Message(), err);
    return ISOLET_THREW;
  }
  int32_t rc = SerializeValue(isolate, ctx, result, sb->max_output_bytes, value);
  if (try_catch.HasTerminated() || isolate->IsExecutionTerminating()) {
    isolet_value_free(value->ptr, value->cap);
    *value = isolet_value{nullptr, 0, 0};
    return ISOLET_TERMINATED;
  }
  if (rc == ISOLET_THREW) {
    // A value the serializer refuses is named by its path; anything else (a getter that
    // threw while the result was copied) is what it threw.
    Local<Value> exception = try_catch.Exception();
    Local<v8::Message> message = try_catch.Message();
    Local<Value> path;
    {
      TryCatch walk(isolate);
      if (!CallSeamScript(sb, isolate, ctx, "uncloneablePath", 1, &result).ToLocal(&path)) path = Local<Value>();
    }
    if (try_catch.HasTerminated() || isolate->IsExecutionTerminating()) return ISOLET_TERMINATED;
    if (!path.IsEmpty() && path->IsString() && path.As<String>()->Length() > 0) {
      SetText(&err->message, ToUtf8(isolate, ctx, path, sb->config.max_error_text_bytes));
      return ISOLET_UNCLONEABLE;
    }
    DescribeException(isolate, ctx, exception, message, err);
  }
  return rc;
}

void isolet_sandbox_clear_rejections(isolet_sandbox* sb) {
  Isolate::Scope isolate_scope(sb->isolate);
  sb->rejections.clear();
  sb->dropped_rejections = 0;
}

int32_t isolet_sandbox_next_rejection(isolet_sandbox* sb, isolet_error* err) {
  ENTER(sb);
  Local<Value> completion = sb->completion.IsEmpty() ? Local<Value>() : sb->completion.Get(isolate);
  while (!sb->rejections.empty()) {
    // The first rejected first.
    isolet_sandbox::Rejection kept = std::move(sb->rejections.front());
    sb->rejections.erase(sb->rejections.begin());
    Local<v8::Promise> promise = kept.promise.Get(isolate);
    // The run's own result is its error, not an unhandled rejection.
    if (!completion.IsEmpty() && completion->StrictEquals(promise)) continue;
    if (promise->State() != v8::Promise::kRejected || promise->HasHandler()) continue;
    TryCatch try_catch(isolate);
    DescribeException(isolate, ctx, promise->Result(), Local<v8::Message>(), err);
    if (try_catch.HasTerminated() || isolate->IsExecutionTerminating()) return ISOLET_TERMINATED;
    if (err->line == 0 && kept.line > 0) {
      err->line = kept.line;
      err->column = kept.column;
    }
    return ISOLET_OK;
  }
  return ISOLET_ABSENT;
}

uint32_t isolet_sandbox_dropped_rejections(isolet_sandbox* sb) { return sb->dropped_rejections; }

int64_t isolet_sandbox_run_tasks(isolet_sandbox* sb) {
  Isolate::Scope isolate_scope(sb->isolate);
  HandleScope handle_scope(sb->isolate);
  return sb->tasks->run_due();
}

int32_t isolet_sandbox_fulfill_call(isolet_sandbox* sb, uint32_t call_id, const uint8_t* bytes,
                                    size_t len) {
  ENTER(sb);
  auto it = sb->calls.find(call_id);
  if (it == sb->calls.end()) return ISOLET_FAILED;
  Local<v8::Promise::Resolver> resolver = it->second.Get(isolate);
  sb->calls.erase(it);
  TryCatch try_catch(isolate);
  Local<Value> value;
  if (DeserializeValue(isolate, ctx, bytes, len).ToLocal(&value)) {
    (void)resolver->Resolve(ctx, value);
  } else {
    if (try_catch.HasTerminated()) return ISOLET_TERMINATED;
    Local<Value> reason = try_catch.HasCaught()
                              ? try_catch.Exception()
                              : v8::Exception::Error(Text(sb, ISOLET_TEXT_HOST_REPLY_UNREADABLE));
    try_catch.Reset();
    (void)resolver->Reject(ctx, reason);
  }
  return ISOLET_OK;
}

int32_t isolet_sandbox_reject_call(isolet_sandbox* sb, uint32_t call_id, uint32_t error_class,
                                   const uint8_t* name, size_t name_len, const uint8_t* message,
                                   size_t message_len) {
  ENTER(sb);
  auto it = sb->calls.find(call_id);
  if (it == sb->calls.end()) return ISOLET_FAILED;
  Local<v8::Promise::Resolver> resolver = it->second.Get(isolate);
  sb->calls.erase(it);
  (void)resolver->Reject(ctx, HostError(isolate, ctx, error_class, name, name_len, message, message_len));
  return ISOLET_OK;
}

void isolet_sandbox_heap(isolet_sandbox* sb, size_t* used, size_t* peak, size_t* peak_young_large) {
  v8::HeapStatistics stats;
  sb->isolate->GetHeapStatistics(&stats);
  if (stats.used_heap_size() > sb->peak_heap) sb->peak_heap = stats.used_heap_size();
  size_t young_large = YoungLargeBytes(sb);
  if (young_large > sb->peak_young_large) sb->peak_young_large = young_large;
  *used = stats.used_heap_size();
  *peak = sb->peak_heap;
  *peak_young_large = sb->peak_young_large;
}

int32_t isolet_sandbox_hit_memory_limit(isolet_sandbox* sb) {
  return sb->hit_memory_limit.load() ? 1 : 0;
}

void isolet_bytes_free(isolet_bytes* bytes) {
  if (bytes == nullptr) return;
  std::free(bytes->ptr);
  bytes->ptr = nullptr;
  bytes->len = 0;
}

void isolet_error_free(isolet_error* err) {
  if (err == nullptr) return;
  isolet_bytes_free(&err->name);
  isolet_bytes_free(&err->constructor);
  isolet_bytes_free(&err->message);
  isolet_bytes_free(&err->stack);
  isolet_bytes_free(&err->fields);
}

void* isolet_named_keys(void* value) {
  // A napi_value of Node's isolate is its v8::Local (Node's v8impl does the same cast).
  Local<Value> v;
  static_assert(sizeof(v) == sizeof(value), "a Local is one pointer");
  std::memcpy(static_cast<void*>(&v), &value, sizeof(value));
  if (v.IsEmpty() || !v->IsObject() || v->IsProxy()) return nullptr;
  Isolate* isolate = Isolate::GetCurrent();
  Local<Context> ctx = isolate->GetCurrentContext();
  Local<v8::Array> keys;
  v8::TryCatch try_catch(isolate);
  auto filter = static_cast<v8::PropertyFilter>(v8::ONLY_ENUMERABLE | v8::SKIP_SYMBOLS);
  if (!v.As<v8::Object>()
           ->GetPropertyNames(ctx, v8::KeyCollectionMode::kOwnOnly, filter, v8::IndexFilter::kSkipIndices,
                              v8::KeyConversionMode::kConvertToString)
           .ToLocal(&keys)) {
    return nullptr;
  }
  void* out;
  std::memcpy(&out, &keys, sizeof(out));
  return out;
}

int32_t isolet_module_compile(isolet_sandbox* sb, const uint8_t* code, size_t len,
                                     const uint8_t* name, size_t name_len, const uint8_t* cache,
                                     size_t cache_len, int32_t* cache_rejected, uint32_t* id,
                                     isolet_error* err) {
  ENTER(sb);
  TryCatch try_catch(isolate);
  *cache_rejected = 0;
  Local<String> text;
  if (!CodeString(isolate, code, len, &text)) return ISOLET_TOO_LARGE;
#if ISOLET_V8_AT_LEAST(12, 4)
  v8::ScriptOrigin origin(Utf8(isolate, name, name_len), 0, 0, false, -1, Local<Value>(), false, false, true);
#else
  v8::ScriptOrigin origin(isolate, Utf8(isolate, name, name_len), 0, 0, false, -1, Local<Value>(), false, false, true);
#endif
  // The Source owns the CachedData object (not the bytes, which stay Rust's).
  auto* cached = (cache_len > 0 && cache_len <= static_cast<size_t>(INT32_MAX))
                     ? new v8::ScriptCompiler::CachedData(cache, static_cast<int>(cache_len),
                                                          v8::ScriptCompiler::CachedData::BufferNotOwned)
                     : nullptr;
  v8::ScriptCompiler::Source source(text, origin, cached);
  auto options = cached != nullptr ? v8::ScriptCompiler::kConsumeCodeCache : v8::ScriptCompiler::kNoCompileOptions;
  Local<v8::Module> module;
  bool compiled = v8::ScriptCompiler::CompileModule(isolate, &source, options).ToLocal(&module);
  if (cached != nullptr && source.GetCachedData()->rejected) *cache_rejected = 1;
  if (!compiled) {
    if (try_catch.HasTerminated() || isolate->IsExecutionTerminating()) return ISOLET_TERMINATED;
    DescribeSyntaxError(isolate, ctx, try_catch, err);
    return ISOLET_SYNTAX;
  }
  isolet_sandbox::LinkedModule linked{v8::Global<v8::Module>(isolate, module), {}};
  if (!sb->free_module_ids.empty()) {
    *id = sb->free_module_ids.back();
    sb->free_module_ids.pop_back();
    sb->modules[*id] = std::move(linked);
  } else {
    *id = static_cast<uint32_t>(sb->modules.size());
    sb->modules.push_back(std::move(linked));
  }
  sb->module_by_script[module->ScriptId()] = *id;
  return ISOLET_OK;
}

int32_t isolet_module_create_code_cache(isolet_sandbox* sb, uint32_t id, isolet_bytes* out) {
  *out = isolet_bytes{nullptr, 0};
  ENTER(sb);
  if (id >= sb->modules.size() || sb->modules[id].module.IsEmpty() || isolate->IsExecutionTerminating())
    return ISOLET_FAILED;
  Local<v8::Module> module = sb->modules[id].module.Get(isolate);
  if (!module->IsSourceTextModule()) return ISOLET_FAILED;
  std::unique_ptr<v8::ScriptCompiler::CachedData> data(
      v8::ScriptCompiler::CreateCodeCache(module->GetUnboundModuleScript()));
  if (!data || data->length <= 0) return ISOLET_FAILED;
  *out = CopyBytes(data->data, static_cast<size_t>(data->length));
  return out->ptr == nullptr ? ISOLET_FAILED : ISOLET_OK;
}

int32_t isolet_module_instantiated(isolet_sandbox* sb, uint32_t id) {
  ENTER(sb);
  if (id >= sb->modules.size() || sb->modules[id].module.IsEmpty()) return 0;
  return sb->modules[id].module.Get(isolate)->GetStatus() != v8::Module::kUninstantiated ? 1 : 0;
}

void isolet_module_release(isolet_sandbox* sb, uint32_t id) {
  ENTER(sb);
  if (id >= sb->modules.size() || sb->modules[id].module.IsEmpty()) return;
  sb->module_by_script.erase(sb->modules[id].module.Get(isolate)->ScriptId());
  sb->modules[id].module.Reset();
  std::vector<uint32_t>().swap(sb->modules[id].targets);
  sb->free_module_ids.push_back(id);
}

int32_t isolet_module_evaluate(isolet_sandbox* sb, uint32_t id, isolet_error* err) {
  ENTER(sb);
  TryCatch try_catch(isolate);
  if (id >= sb->modules.size() || sb->modules[id].module.IsEmpty()) return ISOLET_FAILED;
  Local<v8::Module> module = sb->modules[id].module.Get(isolate);
  Local<Value> evaluation;
  bool ok = (module->GetStatus() != v8::Module::kUninstantiated ||
             module->InstantiateModule(ctx, ResolveLinked).FromMaybe(false)) &&
            module->Evaluate(ctx).ToLocal(&evaluation);
  if (ok) {
    isolate->PerformMicrotaskCheckpoint();
    ok = !try_catch.HasCaught() && !isolate->IsExecutionTerminating();
  }
  if (!ok) {
    if (try_catch.HasTerminated() || isolate->IsExecutionTerminating()) return ISOLET_TERMINATED;
    if (!try_catch.HasCaught()) return ISOLET_FAILED;
    DescribeException(isolate, ctx, try_catch.Exception(), try_catch.Message(), err);
    return ISOLET_THREW;
  }
  if (!evaluation->IsPromise()) return ISOLET_OK;
  Local<v8::Promise> promise = evaluation.As<v8::Promise>();
  if (promise->State() == v8::Promise::kPending) return ISOLET_PENDING;
  if (promise->State() == v8::Promise::kRejected) {
    Local<Value> reason = promise->Result();
    DescribeException(isolate, ctx, reason, v8::Exception::CreateMessage(isolate, reason), err);
    return ISOLET_THREW;
  }
  return ISOLET_OK;
}

int32_t isolet_module_requests(isolet_sandbox* sb, uint32_t id, isolet_bytes* out, size_t* count) {
  ENTER(sb);
  *out = isolet_bytes{nullptr, 0};
  *count = 0;
  if (id >= sb->modules.size()) return ISOLET_FAILED;
  Local<v8::Module> module = sb->modules[id].module.Get(isolate);
  Local<v8::FixedArray> requests = module->GetModuleRequests();
  std::string joined;
  for (int i = 0; i < requests->Length(); ++i) {
    Local<v8::ModuleRequest> request = ModuleRequestAt(ctx, requests, i);
    if (i > 0) joined.push_back('\0');
    // Specifiers are part of the module's source, which Rust bounded.
    joined += ToUtf8(isolate, ctx, request->GetSpecifier(), SIZE_MAX / 2);
  }
  *out = CopyBytes(joined.data(), joined.size());
  *count = static_cast<size_t>(requests->Length());
  return out->ptr == nullptr ? ISOLET_FAILED : ISOLET_OK;
}

int32_t isolet_module_link(isolet_sandbox* sb, uint32_t id, const uint32_t* targets, size_t count) {
  if (id >= sb->modules.size()) return ISOLET_FAILED;
  sb->modules[id].targets.assign(targets, targets + count);
  return ISOLET_OK;
}

int32_t isolet_module_run(isolet_sandbox* sb, uint32_t id, isolet_error* err) {
  ENTER(sb);
  TryCatch try_catch(isolate);
  sb->completion.Reset();
  sb->result_module.Reset();
  if (id >= sb->modules.size()) return ISOLET_FAILED;
  Local<v8::Module> module = sb->modules[id].module.Get(isolate);
  Local<Value> evaluation;
  bool ok = (module->GetStatus() != v8::Module::kUninstantiated ||
             module->InstantiateModule(ctx, ResolveLinked).FromMaybe(false)) &&
            module->Evaluate(ctx).ToLocal(&evaluation);
  if (!ok) {
    if (try_catch.HasTerminated() || isolate->IsExecutionTerminating()) return ISOLET_TERMINATED;
    if (!try_catch.HasCaught()) return ISOLET_FAILED;
    DescribeException(isolate, ctx, try_catch.Exception(), try_catch.Message(), err);
    return ISOLET_THREW;
  }
  sb->completion.Reset(isolate, evaluation);
  sb->result_module.Reset(isolate, module);
  return isolet_sandbox_poll(sb);
}

void isolet_sandbox_set_import_handler(isolet_sandbox* sb, isolet_import_fn on_import,
                                       size_t max_specifier_bytes) {
  sb->on_import = on_import;
  sb->max_specifier_bytes = max_specifier_bytes;
  sb->isolate->SetHostImportModuleDynamicallyCallback(ImportDynamically);
}

void isolet_sandbox_cache_scripts(isolet_sandbox* sb) {
  if (sb->uncached_scripts.empty()) return;
  Isolate::Scope isolate_scope(sb->isolate);
  HandleScope handle_scope(sb->isolate);
  if (sb->isolate->IsExecutionTerminating()) return;
  for (auto& [index, script] : sb->uncached_scripts) {
    std::unique_ptr<v8::ScriptCompiler::CachedData> data(v8::ScriptCompiler::CreateCodeCache(script.Get(sb->isolate)));
    if (data && data->length > 0) sb->config.on_script_cache(sb->config.ctx, index, data->data, static_cast<size_t>(data->length));
  }
  sb->uncached_scripts.clear();
}

int32_t isolet_sandbox_settle_op(isolet_sandbox* sb, uint32_t id, isolet_op_value* value) {
  ENTER(sb);
  auto it = sb->op_promises.find(id);
  if (it == sb->op_promises.end() || value->kind == ISOLET_OP_PROMISE) {
    FreeOpValue(value);
    return ISOLET_FAILED;
  }
  Local<v8::Promise::Resolver> resolver = it->second.Get(isolate);
  sb->op_promises.erase(it);
  TryCatch try_catch(isolate);
  Local<Value> settled;
  if (OpValueToJs(sb, isolate, value).ToLocal(&settled)) {
    (void)resolver->Resolve(ctx, settled);
  } else if (!try_catch.HasTerminated() && try_catch.HasCaught()) {
    Local<Value> reason = try_catch.Exception();
    try_catch.Reset();
    (void)resolver->Reject(ctx, reason);
  }
  return try_catch.HasTerminated() || isolate->IsExecutionTerminating() ? ISOLET_TERMINATED : ISOLET_OK;
}

int32_t isolet_sandbox_install_ops(isolet_sandbox* sb, const uint8_t* names, size_t names_len,
                                   const uint32_t* scripts, size_t count, uint32_t seam_script) {
  ENTER(sb);
  TryCatch try_catch(isolate);
  sb->seam_script = seam_script;
  Local<v8::Function> op, clone, load, host, clone_kind;
  // Null prototype, frozen: the scripts' view of the primitives, which no sandbox code sees.
  Local<Object> lib = Object::New(isolate, v8::Null(isolate), nullptr, nullptr, 0);
  if (!v8::Function::New(ctx, OpCall, Local<Value>(), 1, v8::ConstructorBehavior::kThrow).ToLocal(&op) ||
      !v8::Function::New(ctx, CloneCall, Local<Value>(), 1, v8::ConstructorBehavior::kThrow).ToLocal(&clone) ||
      !v8::Function::New(ctx, LoadCall, Local<Value>(), 1, v8::ConstructorBehavior::kThrow).ToLocal(&load) ||
      !v8::Function::New(ctx, HostCall, Local<Value>(), 1, v8::ConstructorBehavior::kThrow).ToLocal(&host) ||
      !v8::Function::New(ctx, CloneKindCall, Local<Value>(), 1, v8::ConstructorBehavior::kThrow).ToLocal(&clone_kind) ||
      lib->CreateDataProperty(ctx, Utf8(isolate, "op"), op).IsNothing() ||
      lib->CreateDataProperty(ctx, Utf8(isolate, "clone"), clone).IsNothing() ||
      lib->CreateDataProperty(ctx, Utf8(isolate, "load"), load).IsNothing() ||
      lib->CreateDataProperty(ctx, Utf8(isolate, "host"), host).IsNothing() ||
      lib->CreateDataProperty(ctx, Utf8(isolate, "cloneKind"), clone_kind).IsNothing() ||
      !lib->SetIntegrityLevel(ctx, v8::IntegrityLevel::kFrozen).FromMaybe(false))
    return try_catch.HasTerminated() ? ISOLET_TERMINATED : ISOLET_FAILED;
  sb->ops_lib.Reset(isolate, lib);
  Local<Object> global = ctx->Global();
  size_t start = 0;
  for (size_t i = 0; i < count && start <= names_len; ++i) {
    const void* nul = std::memchr(names + start, '\0', names_len - start);
    size_t end = nul ? static_cast<const uint8_t*>(nul) - names : names_len;
    Local<String> key = Utf8(isolate, names + start, end - start);
    if (global->SetLazyDataProperty(ctx, key, LazyGlobal, v8::Integer::NewFromUnsigned(isolate, scripts[i]), v8::DontEnum)
            .IsNothing())
      return try_catch.HasTerminated() ? ISOLET_TERMINATED : ISOLET_FAILED;
    start = end + 1;
  }
  return ISOLET_OK;
}

}  // extern "C"
