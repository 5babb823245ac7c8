//! Run events, delivered to JS through one channel per engine.
//!
//! Isolate threads (and the watchdog, pool threads, Node's own thread when a run is
//! refused) push events on the engine's queue; the first event into an empty queue wakes
//! Node's thread with a `uv_async_t` of ours, after the queue's lock is released. Node's
//! thread then delivers every queued event (of every run of the engine) in one callback,
//! each to its run's JS callback. This replaces one `napi_threadsafe_function` per run:
//! making one cost `submit` a uv handle per run, and Node's `napi_call_threadsafe_function`
//! wakes the loop while holding the function's mutex, so on busy cores Node's thread woke
//! only to sleep again on that mutex (128 of 134 contended waits of Node's thread).
use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::ffi::{c_int, c_void};
use std::os::fd::{AsRawFd, OwnedFd};
use std::ptr;
use std::rc::{Rc, Weak};
use std::sync::{Arc, Mutex, RwLock};

use napi::bindgen_prelude::*;
use napi::sys;
use napi_derive::napi;

use isolet_core::{Failure, LogLevel};

use super::keys::{value as v, Key, Keys};
use crate::engine::control::RunControl;
use crate::engine::{ChannelReader, LoopWatch};
use crate::isolate::{Completion, EventSink, Handover};

#[napi(object)]
pub struct FailureJs {
    pub code: String,
    pub class_name: String,
    pub message: String,
    pub limit: Option<String>,
    pub thrown_name: Option<String>,
    pub thrown_message: Option<String>,
    pub stack: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// A thrown object's own enumerable fields that could be copied, serialized.
    pub thrown_fields: Option<Buffer>,
}

impl From<Failure> for FailureJs {
    fn from(f: Failure) -> Self {
        let has_thrown = f.thrown.is_some();
        let thrown = f.thrown.map(|t| *t).unwrap_or_default();
        FailureJs {
            code: f.kind.code().to_string(),
            class_name: f.kind.class_name().to_string(),
            message: f.message,
            limit: f.limit.map(str::to_string),
            thrown_name: has_thrown.then(|| thrown.name.clone()),
            thrown_message: has_thrown.then(|| thrown.message.clone()),
            stack: thrown.stack,
            line: thrown.line,
            column: thrown.column,
            thrown_fields: thrown.fields.map(Buffer::from),
        }
    }
}

/// `event` as the JS object a run's callback receives, built with cached property names:
/// `{ type: 'started' }`, `{ type: 'console', level, message }`,
/// `{ type: 'hostCall', callId, name, payload }`, `{ type: 'dataRequest', id, key }` or
/// `{ type: 'moduleRequest', id, key, referrer, typescript }`; `payload` is a Buffer. A
/// `done` goes as arguments (`done_args`).
fn event_value(keys: &Keys, event: Event) -> Result<sys::napi_value> {
    let env = keys.env();
    match event {
        Event::Started => keys.object(&[(Key::Type, keys.string(Key::Started)?)]),
        Event::Console { level, message } => keys.object(&[
            (Key::Type, keys.string(Key::Console)?),
            (Key::Level, v::string(env, level.as_str())?),
            (Key::Message, v::string(env, &message)?),
        ]),
        Event::HostCall { call_id, name, args } => keys.object(&[
            (Key::Type, keys.string(Key::HostCall)?),
            (Key::CallId, v::u32(env, call_id)?),
            (Key::Name, v::string(env, &name)?),
            (Key::Payload, v::buffer(env, args)?),
        ]),
        Event::DataRequest { id, key } => {
            keys.object(&[(Key::Type, keys.string(Key::DataRequest)?), (Key::Id, v::u32(env, id)?), (Key::Key, v::string(env, &key)?)])
        }
        Event::ModuleRequest { id, key, referrer, typescript } => keys.object(&[
            (Key::Type, keys.string(Key::ModuleRequest)?),
            (Key::Id, v::u32(env, id)?),
            (Key::Key, v::string(env, &key)?),
            (Key::Referrer, v::string(env, &referrer)?),
            (Key::Typescript, v::bool(env, typescript)?),
        ]),
        Event::Done(_) => Err(Error::from_reason("isolet: a done event goes as arguments (done_args)")),
    }
}

/// Arguments of a run's callback for its `done`: `('done', ok, value, payload, error,
/// wallTimeMs, cpuTimeMs, heapUsedBytes, heapAtEndBytes, hostCalls, logs,
/// unhandledRejections)`. `lib/execute.js`
/// makes the public result of them: an object literal there costs Node's thread a
/// fraction of setting the same properties one by one through Node-API (its map
/// transitions were a tenth of that thread's CPU per trivial run). `value` is a result
/// that is one primitive, already made; `payload` a Buffer of any other (undefined when
/// not); `error` the failure; `heapUsedBytes` the peak V8 heap use during the run; `logs`
/// `[{ level, message }]`, or undefined for none.
fn done_args(keys: &Keys, completion: Completion) -> Result<[sys::napi_value; DONE_ARGS]> {
    let env = keys.env();
    let undefined = v::primitive(env, isolet_core::primitive::Primitive::Undefined)?;
    let s = completion.stats;
    let logs = if completion.logs.is_empty() {
        undefined
    } else {
        let logs = v::array(env, completion.logs.len())?;
        for (i, entry) in completion.logs.into_iter().enumerate() {
            let e = keys.object(&[(Key::Level, v::string(env, entry.level.as_str())?), (Key::Message, v::string(env, &entry.message)?)])?;
            v::set_element(env, logs, i as u32, e)?;
        }
        logs
    };
    let (ok, value, payload, error) = match completion.result {
        // One primitive (most results) is made here: no Buffer, no deserializer.
        Ok(bytes) => match isolet_core::primitive::single_primitive(&bytes) {
            Some(p) => (true, v::primitive(env, p)?, undefined, undefined),
            None => (true, undefined, v::buffer(env, bytes)?, undefined),
        },
        // SAFETY: on the env's thread inside the caller's handle scope.
        Err(failure) => (false, undefined, undefined, unsafe { FailureJs::to_napi_value(env, failure.into()) }?),
    };
    Ok([
        keys.string(Key::Done)?,
        v::bool(env, ok)?,
        value,
        payload,
        error,
        v::f64(env, s.wall_time_ms)?,
        v::f64(env, s.cpu_time_ms)?,
        v::f64(env, s.heap_peak_bytes)?,
        v::f64(env, s.heap_used_bytes)?,
        v::u32(env, s.host_calls)?,
        logs,
        v::u32(env, s.unhandled_rejections)?,
    ])
}

const DONE_ARGS: usize = 12;

/// An event of one run, as queued by the thread that produced it.
pub(crate) enum Event {
    Started,
    Console {
        level: LogLevel,
        message: String,
    },
    HostCall {
        call_id: u32,
        name: String,
        args: Vec<u8>,
    },
    DataRequest {
        id: u32,
        key: String,
    },
    ModuleRequest {
        id: u32,
        key: String,
        referrer: String,
        typescript: bool,
    },
    /// The last event of a run.
    Done(Completion),
}

// ---- libuv (exported by every Node binary; the addon resolves them at load) ---------

#[allow(non_camel_case_types)]
type uv_async_t = c_void;
#[allow(non_camel_case_types)]
type uv_poll_t = c_void;
const UV_ASYNC: c_int = 1;
const UV_POLL: c_int = 8;
const UV_READABLE: c_int = 1;

extern "C" {
    fn uv_handle_size(kind: c_int) -> usize;
    fn uv_async_init(event_loop: *mut sys::uv_loop_s, handle: *mut uv_async_t, cb: unsafe extern "C" fn(*mut uv_async_t)) -> c_int;
    fn uv_async_send(handle: *mut uv_async_t) -> c_int;
    fn uv_close(handle: *mut uv_async_t, cb: Option<unsafe extern "C" fn(*mut uv_async_t)>);
    fn uv_ref(handle: *mut uv_async_t);
    fn uv_unref(handle: *mut uv_async_t);
    fn uv_handle_set_data(handle: *mut uv_async_t, data: *mut c_void);
    fn uv_handle_get_data(handle: *const uv_async_t) -> *mut c_void;
    fn uv_poll_init(event_loop: *mut sys::uv_loop_s, handle: *mut uv_poll_t, fd: c_int) -> c_int;
    fn uv_poll_start(handle: *mut uv_poll_t, events: c_int, cb: unsafe extern "C" fn(*mut uv_poll_t, c_int, c_int)) -> c_int;
    fn uv_poll_stop(handle: *mut uv_poll_t) -> c_int;
}

fn uv_layout(kind: c_int) -> std::alloc::Layout {
    // SAFETY: uv_handle_size has no preconditions.
    let size = unsafe { uv_handle_size(kind) };
    std::alloc::Layout::from_size_align(size, 16).expect("uv handle layout")
}

/// The `uv_async_t` that wakes Node's thread. Only `uv_async_send` is called on it off
/// Node's thread, which libuv allows from any thread.
struct Bell(*mut uv_async_t);

// SAFETY: the pointer is only used for `uv_async_send` (thread-safe in libuv) by other
// threads, and only while `EventChannel::bell`'s read lock is held; Node's thread takes
// the write lock before it closes and frees the handle.
unsafe impl Send for Bell {}
unsafe impl Sync for Bell {}

struct Queue {
    events: Vec<(u64, Event)>,
    /// Node's thread is delivering events and will look at the queue again before it
    /// stops: a push needs no wake-up.
    draining: bool,
    /// The engine's channel is closed (its Node environment is going away): drop events.
    closed: bool,
    /// Descriptors for Node's loop to watch (`LoopWatch`), not yet taken by its thread.
    watches: Vec<(OwnedFd, Arc<dyn ChannelReader>)>,
}

/// Where the threads of one engine queue events for Node's thread.
pub(crate) struct EventChannel {
    queue: Mutex<Queue>,
    /// None once the channel is closed. Held for reading only around `uv_async_send`, so
    /// the handle cannot be freed under a sender; never taken by Node's thread to drain.
    bell: RwLock<Option<Bell>>,
}

impl isolet_core::wakeups::Ring for EventChannel {
    fn ring(&self) {
        EventChannel::ring(self);
    }
}

impl EventChannel {
    fn push(self: &Arc<Self>, run: u64, event: Event) {
        let ring = {
            let mut q = crate::limits::lock(&self.queue);
            if q.closed {
                return;
            }
            let ring = q.events.is_empty() && !q.draining;
            q.events.push((run, event));
            ring
        };
        // After the queue's lock is released: the woken thread never blocks on it (nor on
        // a lock the pushing thread holds: see `wakeups`).
        if ring {
            let target: Arc<dyn isolet_core::wakeups::Ring> = self.clone();
            isolet_core::wakeups::ring_or_hold(&target);
        }
    }

    fn ring(&self) {
        let bell = self.bell.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(bell) = bell.as_ref() {
            // SAFETY: the handle is open while it is in `bell` (see `Bell`).
            unsafe { uv_async_send(bell.0) };
        }
    }

    /// Swaps the queued events into `into` (empty); marks the queue as being drained, or
    /// not any more when nothing was queued.
    fn take(&self, into: &mut Vec<(u64, Event)>) {
        let mut q = crate::limits::lock(&self.queue);
        std::mem::swap(&mut q.events, into);
        q.draining = !into.is_empty();
    }

    /// Node's thread stops draining with events still queued: wake it again later.
    fn yield_drain(&self) {
        let pending = {
            let mut q = crate::limits::lock(&self.queue);
            q.draining = false;
            !q.events.is_empty()
        };
        if pending {
            self.ring();
        }
    }

    /// Refuses further events and gives up the handle; returns it (once).
    fn close(&self) -> Option<Bell> {
        let bell = self.bell.write().unwrap_or_else(std::sync::PoisonError::into_inner).take();
        let (dropped, watches) = {
            let mut q = crate::limits::lock(&self.queue);
            q.closed = true;
            (std::mem::take(&mut q.events), std::mem::take(&mut q.watches))
        };
        drop(dropped); // outside the lock: completions may own large buffers
        for (_, reader) in watches {
            reader.unwatched();
        }
        bell
    }
}

impl LoopWatch for EventChannel {
    fn watch(&self, fd: OwnedFd, reader: Arc<dyn ChannelReader>) -> bool {
        {
            let mut q = crate::limits::lock(&self.queue);
            if q.closed {
                return false;
            }
            q.watches.push((fd, reader));
        }
        self.ring();
        true
    }
}

/// A run's sink: queues its events on its engine's channel.
pub(crate) struct JsSink {
    channel: Arc<EventChannel>,
    run: u64,
    /// Whether `done` was sent. A sink dropped without it (a bug elsewhere) still ends
    /// its run on the JS side, so the loop reference taken for it is given back.
    done_sent: std::sync::atomic::AtomicBool,
    /// Whether the JS side wants `started`; runSandbox does not, and skipping it saves
    /// one wake-up of Node's thread (and one JS call) per run.
    started_event: bool,
    /// Told once Node's thread took the run's result.
    handover: Arc<Handover>,
}

impl EventSink for JsSink {
    fn started(&self) {
        if self.started_event {
            self.channel.push(self.run, Event::Started);
        }
    }

    fn console(&self, level: LogLevel, message: &str) {
        self.channel.push(self.run, Event::Console { level, message: message.to_string() });
    }

    fn host_call(&self, call_id: u32, name: &str, args: Vec<u8>) {
        self.channel.push(self.run, Event::HostCall { call_id, name: name.to_string(), args });
    }

    fn data_request(&self, id: u32, key: &str) {
        self.channel.push(self.run, Event::DataRequest { id, key: key.to_string() });
    }

    fn module_request(&self, id: u32, key: &str, referrer: &str, typescript: bool) {
        let event = Event::ModuleRequest { id, key: key.to_string(), referrer: referrer.to_string(), typescript };
        self.channel.push(self.run, event);
    }

    fn done(&self, completion: Completion) {
        self.done_sent.store(true, std::sync::atomic::Ordering::Release);
        self.channel.push(self.run, Event::Done(completion));
    }

    fn handover(&self) -> Option<Arc<Handover>> {
        Some(self.handover.clone())
    }
}

impl Drop for JsSink {
    fn drop(&mut self) {
        if !self.done_sent.load(std::sync::atomic::Ordering::Acquire) {
            let failure = isolet_core::Failure::new(isolet_core::ErrorKind::Internal, "The run ended without a result");
            self.channel.push(self.run, Event::Done(Completion { result: Err(failure), stats: Default::default(), logs: Vec::new() }));
        }
    }
}

// ---- Node's side ---------------------------------------------------------------------

/// Batches delivered per wake-up before Node's thread lets the rest of its loop run.
const MAX_BATCHES_PER_WAKE: usize = 16;

thread_local! {
    /// The dispatchers of this thread's Node environment (one environment per thread).
    static DISPATCHERS: RefCell<Vec<Weak<Dispatcher>>> = const { RefCell::new(Vec::new()) };
}

/// A run in flight, as Node's thread knows it.
struct RunEntry {
    /// Its JS callback.
    callback: sys::napi_ref,
    /// Its host side (replies, answers, abort), handed to JS when asked (`RunHandle`):
    /// most runs never need one, and a JS object per run costs Node's thread.
    control: Option<Arc<dyn RunControl>>,
    /// Told after its `done` was delivered (and the microtasks after it ran).
    handover: Arc<Handover>,
}

/// The Node-thread half of an engine's channel: the JS callback of every run in flight,
/// the uv handle (referenced, keeping Node's loop alive, only while runs are in flight)
/// and the async context events are delivered in. Lives on Node's thread only.
pub(crate) struct Dispatcher {
    env: sys::napi_env,
    event_loop: *mut sys::uv_loop_s,
    channel: Arc<EventChannel>,
    /// The poll handles of the descriptors its loop watches (`LoopWatch`), unreferenced.
    watches: RefCell<Vec<*mut uv_poll_t>>,
    /// Null once closed.
    handle: Cell<*mut uv_async_t>,
    runs: RefCell<HashMap<u64, RunEntry>>,
    /// Reused between wake-ups so a steady stream allocates nothing.
    batch: RefCell<Vec<(u64, Event)>>,
    /// The runs whose `done` this batch delivered (`Handover`).
    taken: RefCell<Vec<Arc<Handover>>>,
    resource: sys::napi_ref,
    context: sys::napi_async_context,
    in_flight: Cell<usize>,
    /// The `NativeEngine` is gone: close once the last run in flight is delivered.
    orphaned: Cell<bool>,
    /// Closed, or closing once the delivery in progress returns.
    closing: Cell<bool>,
    delivering: Cell<bool>,
}

fn check(status: sys::napi_status, what: &str) -> Result<()> {
    if status == sys::Status::napi_ok {
        Ok(())
    } else {
        Err(Error::new(Status::from(status), format!("isolet: {what} failed")))
    }
}

impl Dispatcher {
    /// Makes the channel of one engine on Node's thread of `env`.
    pub(crate) fn new(env: &Env) -> Result<Rc<Dispatcher>> {
        let raw = env.raw();
        let mut event_loop = ptr::null_mut();
        // SAFETY: called on the env's thread with a live env; out-pointers are valid.
        unsafe {
            check(sys::napi_get_uv_event_loop(raw, &mut event_loop), "napi_get_uv_event_loop")?;
            let mut object = ptr::null_mut();
            check(sys::napi_create_object(raw, &mut object), "napi_create_object")?;
            let mut name = ptr::null_mut();
            let label = "isolet:events";
            check(sys::napi_create_string_utf8(raw, label.as_ptr().cast(), label.len() as isize, &mut name), "napi_create_string_utf8")?;
            let mut context = ptr::null_mut();
            check(sys::napi_async_init(raw, object, name, &mut context), "napi_async_init")?;
            let mut resource = ptr::null_mut();
            check(sys::napi_create_reference(raw, object, 1, &mut resource), "napi_create_reference")?;
            let handle = std::alloc::alloc_zeroed(uv_layout(UV_ASYNC)).cast::<uv_async_t>();
            if handle.is_null() || uv_async_init(event_loop, handle, on_wake) != 0 {
                if !handle.is_null() {
                    std::alloc::dealloc(handle.cast(), uv_layout(UV_ASYNC));
                }
                sys::napi_async_destroy(raw, context);
                sys::napi_delete_reference(raw, resource);
                return Err(Error::from_reason("isolet: could not create the engine's event channel"));
            }
            // Idle until a run is in flight.
            uv_unref(handle);
            let channel = Arc::new(EventChannel {
                queue: Mutex::new(Queue { events: Vec::new(), draining: false, closed: false, watches: Vec::new() }),
                bell: RwLock::new(Some(Bell(handle))),
            });
            let dispatcher = Rc::new(Dispatcher {
                env: raw,
                event_loop,
                channel,
                watches: RefCell::new(Vec::new()),
                handle: Cell::new(handle),
                runs: RefCell::new(HashMap::new()),
                batch: RefCell::new(Vec::new()),
                taken: RefCell::new(Vec::new()),
                resource,
                context,
                in_flight: Cell::new(0),
                orphaned: Cell::new(false),
                closing: Cell::new(false),
                delivering: Cell::new(false),
            });
            // The handle owns one count, given back when libuv has closed it.
            uv_handle_set_data(handle, Rc::into_raw(dispatcher.clone()) as *mut c_void);
            DISPATCHERS.with(|all| {
                let mut all = all.borrow_mut();
                all.retain(|d| d.strong_count() > 0);
                all.push(Rc::downgrade(&dispatcher));
            });
            Ok(dispatcher)
        }
    }

    /// Node's loop of this dispatcher, for a process engine to read its hosts' channels on.
    pub(crate) fn loop_watch(&self) -> Arc<dyn LoopWatch> {
        self.channel.clone()
    }

    /// Starts watching what `LoopWatch::watch` queued.
    fn take_watches(self: &Rc<Self>) {
        let pending = std::mem::take(&mut crate::limits::lock(&self.channel.queue).watches);
        for (fd, reader) in pending {
            if self.closing.get() {
                reader.unwatched();
                continue;
            }
            // SAFETY: on the loop's thread; the handle is freed only by `on_watch_closed`.
            unsafe {
                let handle = std::alloc::alloc_zeroed(uv_layout(UV_POLL)).cast::<uv_poll_t>();
                if handle.is_null() {
                    reader.unwatched();
                    continue;
                }
                if uv_poll_init(self.event_loop, handle, fd.as_raw_fd()) != 0 {
                    std::alloc::dealloc(handle.cast(), uv_layout(UV_POLL));
                    reader.unwatched();
                    continue;
                }
                let watch = Box::new(Watch { fd, reader, dispatcher: Rc::downgrade(self) });
                uv_handle_set_data(handle, Box::into_raw(watch).cast());
                uv_unref(handle);
                self.watches.borrow_mut().push(handle);
                if uv_poll_start(handle, UV_READABLE, on_channel_readable) != 0 {
                    self.unwatch(handle);
                }
            }
        }
    }

    /// Stops watching `handle`'s descriptor and closes it.
    fn unwatch(&self, handle: *mut uv_poll_t) {
        let mut watches = self.watches.borrow_mut();
        let Some(at) = watches.iter().position(|h| *h == handle) else { return };
        watches.swap_remove(at);
        drop(watches);
        // SAFETY: an open poll handle of this loop (it was in `watches`), on its thread.
        unsafe { stop_watch(handle) };
    }

    /// Registers run `run`'s JS callback and returns the run's sink. Node's loop stays
    /// alive until the run's `done` is delivered.
    pub(crate) fn register(&self, run: u64, callback: sys::napi_value, started_event: bool) -> Result<Arc<JsSink>> {
        if self.closing.get() {
            return Err(Error::from_reason("isolet: the engine's event channel is closed"));
        }
        let mut reference = ptr::null_mut();
        // SAFETY: on the env's thread; `callback` is a value of the current call.
        check(unsafe { sys::napi_create_reference(self.env, callback, 1, &mut reference) }, "napi_create_reference")?;
        let handover = Arc::new(Handover::default());
        self.runs.borrow_mut().insert(run, RunEntry { callback: reference, control: None, handover: handover.clone() });
        let n = self.in_flight.get() + 1;
        self.in_flight.set(n);
        if n == 1 {
            // SAFETY: the handle is open (checked above), on its loop's thread.
            unsafe { uv_ref(self.handle.get()) };
        }
        Ok(Arc::new(JsSink {
            channel: self.channel.clone(),
            run,
            done_sent: std::sync::atomic::AtomicBool::new(false),
            started_event,
            handover,
        }))
    }

    /// Keeps run `run`'s host side until its `done` is delivered, for `control`.
    pub(crate) fn keep_control(&self, run: u64, control: Arc<dyn RunControl>) {
        if let Some(entry) = self.runs.borrow_mut().get_mut(&run) {
            entry.control = Some(control);
        }
    }

    /// Run `run`'s host side, until its `done` was delivered.
    pub(crate) fn control(&self, run: u64) -> Option<Arc<dyn RunControl>> {
        self.runs.borrow().get(&run).and_then(|e| e.control.clone())
    }

    /// The `NativeEngine` was collected: close now, or after the last run in flight.
    pub(crate) fn orphan(&self) {
        self.orphaned.set(true);
        if self.in_flight.get() == 0 {
            self.request_close();
        }
    }

    /// Stops the channel at once (no thread signals the handle after this returns) and
    /// releases the rest now, or after the delivery in progress.
    fn request_close(&self) {
        if self.closing.replace(true) {
            return;
        }
        let _ = self.channel.close();
        if !self.delivering.get() {
            self.finish_close();
        }
    }

    /// Releases every callback and the async context, and closes the handle.
    fn finish_close(&self) {
        let handle = self.handle.replace(ptr::null_mut());
        if handle.is_null() {
            return;
        }
        let env = self.env;
        for (_, RunEntry { callback: reference, .. }) in self.runs.borrow_mut().drain() {
            // SAFETY: on the env's thread; each reference was made by `register`.
            unsafe { sys::napi_delete_reference(env, reference) };
        }
        self.in_flight.set(0);
        for watch in self.watches.borrow_mut().drain(..) {
            // SAFETY: an open poll handle of this loop, on its thread.
            unsafe { stop_watch(watch) };
        }
        // SAFETY: on the env's thread; made in `new`, released once (the handle was set).
        unsafe {
            sys::napi_async_destroy(env, self.context);
            sys::napi_delete_reference(env, self.resource);
            uv_close(handle, Some(on_closed));
        }
    }

    /// Delivers everything queued, in batches; each batch runs in one callback scope, so
    /// promise jobs and `process.nextTick` callbacks run after it, as after any callback.
    fn drain(&self) {
        self.delivering.set(true);
        let mut batch = std::mem::take(&mut *self.batch.borrow_mut());
        let mut batches = 0;
        loop {
            if self.closing.get() {
                break;
            }
            self.channel.take(&mut batch);
            if batch.is_empty() {
                break;
            }
            self.deliver_batch(&mut batch);
            batch.clear();
            batches += 1;
            if batches == MAX_BATCHES_PER_WAKE {
                self.channel.yield_drain();
                break;
            }
        }
        batch.clear();
        *self.batch.borrow_mut() = batch;
        self.delivering.set(false);
        if self.closing.get() {
            self.finish_close();
        }
    }

    fn deliver_batch(&self, batch: &mut Vec<(u64, Event)>) {
        let env = self.env;
        // SAFETY: on the env's thread, inside a libuv callback (no JS on the stack); every
        // scope opened here is closed in reverse order before returning.
        unsafe {
            let mut handles = ptr::null_mut();
            if sys::napi_open_handle_scope(env, &mut handles) != sys::Status::napi_ok {
                return;
            }
            let mut resource = ptr::null_mut();
            sys::napi_get_reference_value(env, self.resource, &mut resource);
            let mut scope = ptr::null_mut();
            let scoped =
                !resource.is_null() && sys::napi_open_callback_scope(env, resource, self.context, &mut scope) == sys::Status::napi_ok;
            let keys = Keys::of(env);
            for (run, event) in batch.drain(..) {
                if self.closing.get() {
                    break; // closed by a callback (process.exit(), a Worker ending)
                }
                match &keys {
                    Ok(keys) => self.deliver(keys, run, event),
                    Err(_) => break,
                }
            }
            if scoped {
                sys::napi_close_callback_scope(env, scope);
            }
            sys::napi_close_handle_scope(env, handles);
        }
        // The callbacks and the microtasks after them ran: their isolates may go now.
        for handover in self.taken.borrow_mut().drain(..) {
            handover.taken();
        }
    }

    /// Calls run `run`'s callback with `event`; its `done` releases the callback.
    fn deliver(&self, keys: &Keys, run: u64, event: Event) {
        let env = self.env;
        let done = matches!(event, Event::Done(_));
        let reference = if done {
            self.runs.borrow_mut().remove(&run).map(|e| {
                self.taken.borrow_mut().push(e.handover);
                e.callback
            })
        } else {
            self.runs.borrow().get(&run).map(|e| e.callback)
        };
        // A run's events after its `done` (or of a run never registered) have no one to go to.
        let Some(reference) = reference else { return };
        // SAFETY: on the env's thread inside `deliver_batch`'s scopes; `reference` is live
        // (made by `register`, deleted only here or when closing); the handle scope opened
        // here is closed before returning.
        unsafe {
            let mut handles = ptr::null_mut();
            sys::napi_open_handle_scope(env, &mut handles);
            let mut callback = ptr::null_mut();
            sys::napi_get_reference_value(env, reference, &mut callback);
            if done {
                sys::napi_delete_reference(env, reference);
            }
            if !callback.is_null() {
                let mut global = ptr::null_mut();
                sys::napi_get_global(env, &mut global);
                let mut result = ptr::null_mut();
                let status = match event {
                    Event::Done(completion) => done_args(keys, completion)
                        .map(|args| sys::napi_call_function(env, global, callback, args.len(), args.as_ptr(), &mut result)),
                    other => event_value(keys, other).map(|value| sys::napi_call_function(env, global, callback, 1, &value, &mut result)),
                };
                match status {
                    Ok(sys::Status::napi_pending_exception) | Err(_) => report_exception(env),
                    Ok(_) => {}
                }
            }
            sys::napi_close_handle_scope(env, handles);
        }
        if done {
            let n = self.in_flight.get().saturating_sub(1);
            self.in_flight.set(n);
            if n == 0 && !self.closing.get() {
                // SAFETY: the handle is open (not closing), on its loop's thread.
                unsafe { uv_unref(self.handle.get()) };
                if self.orphaned.get() {
                    self.request_close();
                }
            }
        }
    }
}

/// A callback threw: it is an uncaught exception of the process, as after any callback.
///
/// # Safety
/// On the env's thread, with a napi call of `env` just failed.
unsafe fn report_exception(env: sys::napi_env) {
    let mut error = ptr::null_mut();
    // SAFETY: as the caller promises.
    unsafe {
        if sys::napi_get_and_clear_last_exception(env, &mut error) == sys::Status::napi_ok && !error.is_null() {
            // During teardown this may fail or be ignored; there is nothing more to do then.
            sys::napi_fatal_exception(env, error);
        }
    }
}

/// libuv calls this on Node's thread after one or more `uv_async_send`s.
unsafe extern "C" fn on_wake(handle: *mut uv_async_t) {
    // SAFETY: the handle's data is the count `Dispatcher::new` gave it, released only in
    // `on_closed`, which libuv calls after this can no longer be called.
    unsafe {
        let data = uv_handle_get_data(handle) as *const Dispatcher;
        if data.is_null() {
            return;
        }
        Rc::increment_strong_count(data);
        let dispatcher = Rc::from_raw(data);
        dispatcher.take_watches();
        dispatcher.drain();
    }
}

/// A descriptor Node's loop watches for a reader (`LoopWatch`): the poll handle's data.
struct Watch {
    fd: OwnedFd,
    reader: Arc<dyn ChannelReader>,
    dispatcher: Weak<Dispatcher>,
}

/// libuv calls this on Node's thread while a watched descriptor is readable. The reader's
/// events for this engine are delivered right after, in this callback: no wake-up of
/// Node's thread by itself.
unsafe extern "C" fn on_channel_readable(handle: *mut uv_poll_t, status: c_int, _events: c_int) {
    // SAFETY: the handle's data is its `Watch`, freed only in `on_watch_closed`.
    let watch = unsafe { &*(uv_handle_get_data(handle) as *const Watch) };
    let Some(dispatcher) = watch.dispatcher.upgrade() else { return };
    if dispatcher.closing.get() {
        return;
    }
    let hold = isolet_core::wakeups::HoldRings::new();
    let more = status == 0 && watch.reader.readable(watch.fd.as_raw_fd());
    let mut drain = false;
    for ring in hold.take() {
        if std::ptr::addr_eq(Arc::as_ptr(&ring), Arc::as_ptr(&dispatcher.channel)) && !dispatcher.delivering.get() {
            drain = true;
        } else {
            ring.ring();
        }
    }
    if !more {
        dispatcher.unwatch(handle);
    }
    if drain {
        dispatcher.drain();
    }
}

/// Stops a poll handle, tells its reader, and closes it.
///
/// # Safety
/// `handle` is an open poll handle made by `take_watches`, on its loop's thread.
unsafe fn stop_watch(handle: *mut uv_poll_t) {
    // SAFETY: as the caller promises; its data is its `Watch` until `on_watch_closed`.
    unsafe {
        uv_poll_stop(handle);
        let watch = &*(uv_handle_get_data(handle) as *const Watch);
        watch.reader.unwatched();
        uv_close(handle, Some(on_watch_closed));
    }
}

unsafe extern "C" fn on_watch_closed(handle: *mut uv_poll_t) {
    // SAFETY: libuv is done with the handle; it was allocated with this layout, and its
    // data is the `Watch` `take_watches` boxed (dropping it closes the descriptor).
    unsafe {
        let data = uv_handle_get_data(handle) as *mut Watch;
        std::alloc::dealloc(handle.cast(), uv_layout(UV_POLL));
        if !data.is_null() {
            drop(Box::from_raw(data));
        }
    }
}

unsafe extern "C" fn on_closed(handle: *mut uv_async_t) {
    // SAFETY: libuv is done with the handle; it was allocated with this layout, and its
    // data is the count `Dispatcher::new` gave it.
    unsafe {
        let data = uv_handle_get_data(handle) as *const Dispatcher;
        std::alloc::dealloc(handle.cast(), uv_layout(UV_ASYNC));
        if !data.is_null() {
            drop(Rc::from_raw(data));
        }
    }
}
/// Closes every engine channel of this thread's environment: at its teardown (cleanup
/// hook) and on `process.exit()` (after the engines' threads were stopped), so no thread
/// ever signals a handle of a loop that is going away.
pub(crate) fn close_all_on_this_thread() {
    let all = DISPATCHERS.try_with(|all| std::mem::take(&mut *all.borrow_mut())).unwrap_or_default();
    for dispatcher in all.iter().filter_map(Weak::upgrade) {
        dispatcher.request_close();
    }
}
