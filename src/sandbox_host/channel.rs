//! A sandbox host process's whole life after its entry script loaded the addon: frames
//! (`isolet_core::frame`) over the socket the parent gave it on `HOST_CHANNEL_FD`, and
//! nothing else. It reads the engine it serves with (`Start`), compiles its WebAssembly
//! modules, starts its threads, locks itself down and says `Ready`; from then on isolate
//! threads write their events here directly (one writer lock, a frame written whole), and
//! a reader thread takes the parent's frames (run, fulfill, reject, answer, abort,
//! shutdown) to the engine and the runs' inboxes. Node's JS thread only waits.
//!
//! The threads are created and the descriptor set to blocking before lock-down;
//! afterwards they only read and write that descriptor.
use std::collections::HashMap;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, RawFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use isolet_core::frame::{
    self, FrameError, Header, Kind, WireAnswer, WireDone, WireHealth, WireLockdown, WireReady, WireStart, WireStats, HEADER_BYTES,
};
use isolet_core::{ErrorKind, Failure, LogLevel};

use isolet_core::sandbox::CloseReason;

use crate::engine::pool::ThreadPool;
use crate::isolate::code::check_prelude;
use crate::isolate::persistent::SandboxCore;
use crate::isolate::warm::Preparation;
use crate::isolate::{Completion, EventSink, HostReply, RunShared, RunSpec};
use crate::limits::lock;
use crate::v8::EngineCode;
use crate::v8::{DataAnswer, WasmModule, WasmModules};

/// A tail up to this size is copied behind its head, so the frame is one write.
const COPY_TAIL_BYTES: usize = 64 * 1024;
/// How long after a run ends the engine's counts are reported (warm isolates are
/// replaced in the background), coalescing the runs that end meanwhile.
const HEALTH_DELAY: Duration = Duration::from_millis(20);
/// Read buffer of the reader thread.
const READ_BUFFER_BYTES: usize = 64 * 1024;
/// Exit status when the parent's frames make no sense (it is trusted: a bug).
const EXIT_PROTOCOL: i32 = 70;
/// How long a shutdown waits for the runs in flight to end before the host exits anyway.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(5);
/// Looks of the health thread at nothing to report before it sleeps until woken.
const HEALTH_IDLE_LOOKS: u32 = 50;

/// Whether the engine's counts are to be reported; whether the health thread waits to be
/// told so (else it looks by itself every `HEALTH_DELAY`).
struct HealthDue {
    due: bool,
    asleep: bool,
}

/// When the engine's counts are reported after ready (warm isolates come up meanwhile).
const HEALTH_AFTER_READY: [Duration; 2] = [Duration::from_millis(50), Duration::from_millis(200)];

struct Channel {
    /// The socket; never closed by us (the process ends with it).
    file: &'static File,
    /// What the parent sends, read a whole frame at a time under this lock: by the reader
    /// thread, or by an isolate thread spinning for its host call's reply (`read_replies`),
    /// which then needs no wake-up of the reader thread to get it.
    input: Mutex<BufReader<&'static File>>,
    /// Wakes the reader thread when an isolate thread left a frame only the reader thread
    /// dispatches in `input` (the socket itself may have nothing more to say): a byte
    /// written to one end of this socket pair, polled at the other.
    reader_wake: (UnixStream, UnixStream),
    writer: Mutex<()>,
    /// Set once a write failed (the parent is gone): later events are dropped.
    broken: AtomicBool,
    engine: ThreadPool,
    wasm_modules: WasmModules,
    /// The engine's prelude and this host's compiled-code cache.
    code: Arc<EngineCode>,
    /// Runs in flight, by the parent's run id.
    runs: Mutex<HashMap<u32, Arc<RunShared>>>,
    /// Persistent sandboxes open here, by the parent's wire id.
    sandboxes: Mutex<HashMap<u32, Arc<SandboxCore>>>,
    health_due: Mutex<HealthDue>,
    health_wake: Condvar,
}

/// Serves as a sandbox host over `fd` until the parent says shutdown or goes away; never
/// returns. `env` is the Node environment the engine belongs to (this process's main one).
pub(crate) fn serve(fd: RawFd, env: usize) -> ! {
    crate::limits::watchdog::answer_within_grace();
    // The socket's descriptor may be non-blocking; our threads block on it instead.
    // SAFETY: fcntl on a descriptor number has no memory effects; a bad one gives EBADF.
    unsafe {
        let flags = libc::fcntl(fd, libc::F_GETFL);
        if flags < 0 || libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) < 0 {
            protocol_broken();
        }
    }
    // SAFETY: the descriptor is the parent's socket, open for the life of the process and
    // owned by nothing else here; leaked, it is never closed.
    let file: &'static File = Box::leak(Box::new(unsafe { File::from_raw_fd(fd) }));
    let start = read_start(file);
    // Non-blocking both ways: a full pair only means the reader is due to wake already.
    let Ok(reader_wake) = UnixStream::pair() else { protocol_broken() };
    if reader_wake.0.set_nonblocking(true).is_err() || reader_wake.1.set_nonblocking(true).is_err() {
        protocol_broken();
    }
    let heap_limit = start.pool.memory_mb as usize * 1024 * 1024;
    let wasm_modules = match WasmModule::compile_all(&start.wasm_modules, heap_limit) {
        Ok(m) => m,
        Err((name, thrown)) => {
            let message = format!("wasm module \"{name}\" is invalid: {}", thrown.message);
            let mut out: &File = file;
            let _ = out.write_all(&frame::encode_invalid(&message));
            // SAFETY: nothing of ours needs to run at exit.
            unsafe { libc::_exit(0) }
        }
    };
    let prelude = isolet_core::options::Prelude { source: start.prelude.clone(), modules: start.prelude_modules.clone() };
    let code = EngineCode::new(Some(prelude), start.code_cache_bytes as usize);
    let engine = ThreadPool::new(start.pool, env, Some(Preparation::new(code.clone(), start.web)));
    let ch = Arc::new(Channel {
        file,
        // Buffered: the parent writes the replies of one tick together, and one read
        // takes them all (a payload larger than the buffer is read straight into place).
        input: Mutex::new(BufReader::with_capacity(READ_BUFFER_BYTES, file)),
        reader_wake,
        writer: Mutex::new(()),
        broken: AtomicBool::new(false),
        engine,
        wasm_modules,
        code,
        runs: Mutex::new(HashMap::new()),
        sandboxes: Mutex::new(HashMap::new()),
        health_due: Mutex::new(HealthDue { due: false, asleep: false }),
        health_wake: Condvar::new(),
    });
    let reader = ch.clone();
    let reporter = ch.clone();
    let replies = ch.clone();
    crate::isolate::run::read_replies_while_spinning(Box::new(move || replies.read_replies()));
    let threads = std::thread::Builder::new().name("isolet-channel".into()).spawn(move || reader.read_loop()).and_then(|_| {
        std::thread::Builder::new().name("isolet-health".into()).stack_size(256 * 1024).spawn(move || reporter.health_loop())
    });
    if threads.is_err() {
        protocol_broken();
    }
    // From here on this process can start no process, open no file or socket (Linux;
    // elsewhere the status says why not). See docs/process-isolation.md.
    let lockdown = WireLockdown::from(super::lock_down(start.parent_pid));
    // The prelude is code: it first runs after lock-down, in an isolate of its own.
    if let Err(message) = check_prelude(&ch.code, start.pool.memory_mb, start.web) {
        ch.send(frame::encode_invalid(&message), &[]);
        // SAFETY: nothing of ours needs to run at exit.
        unsafe { libc::_exit(0) }
    }
    let told = Arc::downgrade(&ch);
    ch.engine.on_warm_ready(Box::new(move || {
        if let Some(ch) = told.upgrade() {
            ch.report_health_soon();
        }
    }));
    ch.engine.warm_up();
    ch.send(WireReady { pid: std::process::id(), lockdown, health: ch.health() }.encode(), &[]);
    for delay in HEALTH_AFTER_READY {
        std::thread::sleep(delay);
        ch.report_health_soon();
    }
    loop {
        std::thread::park();
    }
}

/// The first frame: the engine to serve with.
fn read_start(file: &File) -> WireStart {
    let mut input: &File = file;
    let mut head = [0u8; HEADER_BYTES];
    if input.read_exact(&mut head).is_err() {
        // SAFETY: the parent is gone before we started: nothing to serve.
        unsafe { libc::_exit(0) }
    }
    let header = match Header::decode(&head) {
        Ok(h) if h.kind == Kind::Start => h,
        _ => protocol_broken(),
    };
    let mut payload = vec![0u8; header.len as usize];
    if input.read_exact(&mut payload).is_err() {
        unsafe { libc::_exit(0) }
    }
    WireStart::decode(&payload).unwrap_or_else(|_| protocol_broken())
}

impl Channel {
    /// Writes one frame: `head` (header and fields) and then `tail`, under the writer
    /// lock so frames of different threads never interleave.
    fn send(&self, mut head: Vec<u8>, tail: &[u8]) {
        if self.broken.load(Ordering::Relaxed) {
            return;
        }
        if !tail.is_empty() && tail.len() <= COPY_TAIL_BYTES {
            head.extend_from_slice(tail);
        }
        let big_tail = tail.len() > COPY_TAIL_BYTES;
        let _w = lock(&self.writer);
        let mut out: &File = self.file;
        let ok = out.write_all(&head).is_ok() && (!big_tail || out.write_all(tail).is_ok());
        if !ok {
            self.broken.store(true, Ordering::Relaxed);
        }
    }

    /// Asks the parent to lower the stuck threads this process could not lower itself.
    fn report_not_lowered(&self) {
        let tids = crate::limits::quarantine::take_not_lowered();
        for chunk in tids.chunks(frame::MAX_LOWER_TIDS) {
            let tids: Vec<u32> = chunk.iter().map(|&t| t as u32).collect();
            self.send(frame::encode_lower(&tids), &[]);
        }
    }

    fn health(&self) -> WireHealth {
        let s = self.engine.stats();
        WireHealth {
            stuck: crate::limits::quarantine::quarantined() as u32,
            threads: crate::isolate::thread::live_threads() as u32,
            warm: s.warm as u32,
            warming: s.warming as u32,
            engine_threads: s.threads as u32,
            quarantined: s.quarantined as u32,
            warm_starts: s.warm_starts,
            cold_starts: s.cold_starts,
            code_cache: self.code.stats(),
        }
    }

    fn health_loop(self: Arc<Self>) {
        // Looks every HEALTH_DELAY while runs keep ending, so that a run's end need not
        // wake this thread (a wake-up on a busy CPU just when the parent's threads have
        // the run's answer to deliver); after HEALTH_IDLE_LOOKS empty looks it sleeps until
        // woken.
        let mut empty_looks = 0;
        loop {
            std::thread::sleep(HEALTH_DELAY);
            {
                let mut h = lock(&self.health_due);
                if !h.due {
                    empty_looks += 1;
                    if empty_looks < HEALTH_IDLE_LOOKS {
                        continue;
                    }
                    h.asleep = true;
                    while !h.due {
                        h = self.health_wake.wait(h).unwrap_or_else(std::sync::PoisonError::into_inner);
                    }
                    h.asleep = false;
                    drop(h);
                    // Coalesce the runs that end within the delay, as before.
                    std::thread::sleep(HEALTH_DELAY);
                    h = lock(&self.health_due);
                }
                h.due = false;
            }
            empty_looks = 0;
            self.report_not_lowered();
            self.send(self.health().encode(), &[]);
        }
    }

    fn report_health_soon(&self) {
        let mut h = lock(&self.health_due);
        h.due = true;
        if h.asleep {
            drop(h);
            self.health_wake.notify_one();
        }
    }

    /// The parent asked us to end: abort the runs in flight, give their threads a moment
    /// to write their answers, say goodbye, exit.
    fn shutdown(&self) -> ! {
        self.engine.shutdown();
        self.engine.wait_idle(SHUTDOWN_WAIT);
        self.send(frame::header_only(Kind::Bye, 0, 0, 0).to_vec(), &[]);
        // SAFETY: nothing of ours needs to run at exit; quarantined threads end with us.
        unsafe { libc::_exit(0) }
    }

    fn run(&self, id: u32) -> Option<Arc<RunShared>> {
        lock(&self.runs).get(&id).cloned()
    }

    fn read_loop(self: Arc<Self>) {
        let fd = self.file.as_raw_fd();
        loop {
            {
                let mut input = lock(&self.input);
                // A frame left in the buffer by an isolate thread, or the socket's next.
                if !input.buffer().is_empty() || readable_now(fd) {
                    // Dispatched under the lock, so frames are handled in the order sent.
                    let (header, payload) = read_frame(&mut input);
                    if header.kind == Kind::Shutdown {
                        self.shutdown();
                    }
                    if self.dispatch(&header, payload).is_err() {
                        protocol_broken();
                    }
                    continue;
                }
            }
            wait_readable(fd, self.reader_wake.1.as_raw_fd());
        }
    }

    /// An isolate thread spinning for a reply reads the replies the parent sent, if no one
    /// else is reading: each is pushed to its run (its own among them). It stops at a frame
    /// of another kind, or a reply of more than `READ_BUFFER_BYTES`, which the reader
    /// thread reads and dispatches (it is woken for it), and at an empty socket.
    fn read_replies(&self) {
        let Ok(mut input) = self.input.try_lock() else { return };
        loop {
            if input.buffer().is_empty() {
                if !readable_now(self.file.as_raw_fd()) {
                    return;
                }
                // Readable: this read returns what is there (0 at the end: the reader sees it).
                if input.fill_buf().map_or(true, |b| b.is_empty()) {
                    self.wake_reader();
                    return;
                }
            }
            // A small reply is read even if only its head is here: the parent sends its
            // payload right behind it (a separate write), so the wait is microseconds and
            // the spin's CPU credit stays capped. A large one is the reader thread's.
            let buffered = input.buffer();
            let small_reply = buffered.len() >= HEADER_BYTES
                && Header::decode(&buffered[..HEADER_BYTES])
                    .is_ok_and(|h| matches!(h.kind, Kind::Fulfill | Kind::Reject | Kind::Answer) && h.len as usize <= READ_BUFFER_BYTES);
            if !small_reply {
                self.wake_reader();
                return;
            }
            let (header, payload) = read_frame(&mut input);
            if self.dispatch_reply(&header, payload).is_err() {
                protocol_broken();
            }
        }
    }

    fn wake_reader(&self) {
        // Full (WouldBlock): the reader is due to wake already.
        let _ = (&self.reader_wake.0).write(&[1]);
    }

    /// A reply to a host call or a data request: pushed to its run.
    fn dispatch_reply(&self, h: &Header, payload: Vec<u8>) -> Result<(), FrameError> {
        match h.kind {
            Kind::Fulfill => {
                if let Some(run) = self.run(h.run_id) {
                    run.push_reply(HostReply::Fulfill { call_id: h.call_id, value: payload });
                }
            }
            Kind::Reject => {
                let (name, message) = frame::decode_reject(&payload)?;
                if let Some(run) = self.run(h.run_id) {
                    run.push_reply(HostReply::Reject { call_id: h.call_id, name: name.into(), message: message.into() });
                }
            }
            Kind::Answer => {
                let answer = match frame::decode_answer(&payload)? {
                    WireAnswer::Value(v) => DataAnswer::Value(v.to_vec()),
                    WireAnswer::Error(e) => DataAnswer::Error(e.into()),
                };
                if let Some(run) = self.run(h.run_id) {
                    run.push_answer(h.call_id, answer);
                }
            }
            _ => return Err(FrameError::UnknownKind(h.kind as u8)),
        }
        Ok(())
    }

    fn dispatch(self: &Arc<Self>, h: &Header, payload: Vec<u8>) -> Result<(), FrameError> {
        match h.kind {
            Kind::Run => self.submit(h.run_id, &payload),
            Kind::Fulfill | Kind::Reject | Kind::Answer => self.dispatch_reply(h, payload)?,
            Kind::Abort => {
                if let Some(run) = self.run(h.run_id) {
                    self.engine.abort(&run);
                }
            }
            Kind::SandboxOpen => self.open_sandbox(h.run_id, &payload)?,
            Kind::SandboxRun => self.sandbox_run(h.run_id, h.call_id, &payload),
            Kind::SandboxClose => {
                let core = lock(&self.sandboxes).remove(&h.run_id);
                if let Some(core) = core {
                    core.close(CloseReason::Closed, true);
                }
            }
            Kind::Start => return Err(FrameError::Invalid("a second start")),
            _ => return Err(FrameError::UnknownKind(h.kind as u8)),
        }
        Ok(())
    }

    fn submit(self: &Arc<Self>, run_id: u32, payload: &[u8]) {
        let sink = |started_event| Arc::new(ChannelSink { ch: self.clone(), run_id, started_event });
        let (plan, started_event) = match frame::decode_run(payload) {
            Ok(decoded) => decoded,
            Err(e) => return sink(false).refused(&format!("a run frame is malformed: {e}")),
        };
        let spec = RunSpec::new(Arc::new(plan), &self.wasm_modules).with_code(self.code.clone());
        let run = RunShared::new(run_id as u64, spec, sink(started_event));
        // In the map before the engine sees it: its first event may come at once.
        lock(&self.runs).insert(run_id, run.clone());
        // The parent served tenants in turn already.
        self.engine.submit(run, isolet_core::queue::Tenant::SHARED);
    }
}

impl Channel {
    /// Opens persistent sandbox `wire` on this host's engine; a sandbox that cannot be
    /// opened here is reported closed at once.
    fn open_sandbox(self: &Arc<Self>, wire: u32, payload: &[u8]) -> Result<(), FrameError> {
        let plan = frame::decode_sandbox_open(payload)?;
        match self.engine.open_sandbox(wire as u64, plan, self.code.clone()) {
            Ok(core) => {
                lock(&self.sandboxes).insert(wire, core.clone());
                let ch = Arc::downgrade(self);
                core.on_close(Box::new(move |reason| {
                    if let Some(ch) = ch.upgrade() {
                        lock(&ch.sandboxes).remove(&wire);
                        ch.send(frame::encode_sandbox_closed(wire, reason), &[]);
                    }
                }));
            }
            Err(_) => self.send(frame::encode_sandbox_closed(wire, CloseReason::Internal), &[]),
        }
        Ok(())
    }

    /// A run of persistent sandbox `sandbox`, under the parent's wire id `run_id`.
    fn sandbox_run(self: &Arc<Self>, run_id: u32, sandbox: u32, payload: &[u8]) {
        let sink = |started_event| Arc::new(ChannelSink { ch: self.clone(), run_id, started_event });
        let (plan, started_event, call) = match frame::decode_sandbox_run(payload) {
            Ok(decoded) => decoded,
            Err(e) => return sink(false).refused(&format!("a sandbox run frame is malformed: {e}")),
        };
        let core = lock(&self.sandboxes).get(&sandbox).cloned();
        let Some(core) = core else {
            let failure = isolet_core::sandbox::closed_failure(CloseReason::Closed);
            let done = WireDone { stats: WireStats::default(), logs: Vec::new(), health: self.health(), result: Err(failure) };
            return self.send(done.encode_head(run_id, &[]), &[]);
        };
        // Replies and answers for it come through this (the reader) thread, after this
        // returns; a run that answered meanwhile is taken out again (its `done` found
        // nothing to remove).
        let run = core.start_run(run_id as u64, Arc::new(plan), call, sink(started_event));
        lock(&self.runs).insert(run_id, run.clone());
        if run.has_answered() {
            lock(&self.runs).remove(&run_id);
        }
    }
}

/// Waits until `fd` has bytes (or is closed). A thread blocked in read(2) on a Unix socket
/// is woken whenever its peer reads (the socket's space to write grew: one wait queue for
/// both), i.e. at every frame the parent takes from the isolate threads; a poll(2) waiter
/// for input is not.
/// Sleeps until the socket `fd` has something to read or a byte came on `wake` (the
/// reading end of `Channel::reader_wake`, non-blocking); takes what came on `wake`.
fn wait_readable(fd: RawFd, wake: RawFd) {
    let mut p = [libc::pollfd { fd, events: libc::POLLIN, revents: 0 }, libc::pollfd { fd: wake, events: libc::POLLIN, revents: 0 }];
    // SAFETY: two valid pollfds. An error or EINTR just sends the caller round again.
    unsafe { libc::poll(p.as_mut_ptr(), 2, -1) };
    if p[1].revents != 0 {
        let mut bytes = [0u8; 64];
        // SAFETY: reads into a live buffer of its length from our non-blocking socket.
        unsafe { libc::read(wake, bytes.as_mut_ptr().cast(), bytes.len()) };
    }
}

/// Whether the socket `fd` has something to read (or its end) now.
fn readable_now(fd: RawFd) -> bool {
    let mut p = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: one valid pollfd; a zero timeout never blocks.
    unsafe { libc::poll(&mut p, 1, 0) > 0 }
}

/// Reads one whole frame from `input` (blocking for the rest of one begun). EOF or an
/// error: the parent is gone, and so are we; a frame the parent never sends ends the host.
fn read_frame(input: &mut BufReader<&'static File>) -> (Header, Vec<u8>) {
    let mut head = [0u8; HEADER_BYTES];
    if input.read_exact(&mut head).is_err() {
        // SAFETY: nothing of ours needs to run at exit.
        unsafe { libc::_exit(0) }
    }
    let header = match Header::decode(&head) {
        Ok(h) if h.kind.from_parent() => h,
        _ => protocol_broken(),
    };
    let mut payload = vec![0u8; header.len as usize];
    if input.read_exact(&mut payload).is_err() {
        // SAFETY: as above.
        unsafe { libc::_exit(0) }
    }
    (header, payload)
}

/// The parent sent what it never sends: end this host (its runs fail `Crashed` there).
fn protocol_broken() -> ! {
    // SAFETY: `_exit` ends the process without running anything of ours or V8's.
    unsafe { libc::_exit(EXIT_PROTOCOL) }
}

/// One run's events, as frames.
struct ChannelSink {
    ch: Arc<Channel>,
    run_id: u32,
    started_event: bool,
}

impl ChannelSink {
    /// A run the host could not take: its one event.
    fn refused(&self, message: &str) {
        let failure = Failure::new(ErrorKind::Internal, message);
        let done = WireDone { stats: WireStats::default(), logs: Vec::new(), health: self.ch.health(), result: Err(failure) };
        self.ch.send(done.encode_head(self.run_id, &[]), &[]);
    }
}

impl EventSink for ChannelSink {
    fn started(&self) {
        if self.started_event {
            self.ch.send(frame::header_only(Kind::Started, self.run_id, 0, 0).to_vec(), &[]);
        }
    }

    fn console(&self, level: LogLevel, message: &str) {
        self.ch.send(frame::encode_console(self.run_id, level, message), &[]);
    }

    fn host_call(&self, call_id: u32, name: &str, args: Vec<u8>) {
        self.ch.send(frame::encode_host_call_head(self.run_id, call_id, name, args.len()), &args);
    }

    fn data_request(&self, id: u32, key: &str) {
        self.ch.send(frame::header_only(Kind::DataRequest, self.run_id, id, key.len()).to_vec(), key.as_bytes());
    }

    fn module_request(&self, id: u32, key: &str, referrer: &str, _typescript: bool) {
        // The parent decides again from the plan it keeps whether the source is TypeScript.
        self.ch.send(frame::encode_module_request(self.run_id, id, key, referrer), &[]);
    }

    fn done(&self, completion: Completion) {
        lock(&self.ch.runs).remove(&self.run_id);
        // A run abandoned by the watchdog quarantined its thread just before this.
        self.ch.report_not_lowered();
        let s = completion.stats;
        let (result, output) = match completion.result {
            Ok(bytes) => (Ok(()), bytes),
            Err(f) => (Err(f), Vec::new()),
        };
        let done = WireDone {
            stats: WireStats {
                wall_time_ms: s.wall_time_ms,
                cpu_time_ms: s.cpu_time_ms,
                heap_peak_bytes: s.heap_peak_bytes,
                heap_used_bytes: s.heap_used_bytes,
                host_calls: s.host_calls,
                unhandled_rejections: s.unhandled_rejections,
            },
            logs: completion.logs,
            health: self.ch.health(),
            result,
        };
        self.ch.send(done.encode_head(self.run_id, &output), &output);
        self.ch.report_health_soon();
        // The parent's I/O thread, just woken by that frame, gets this CPU before the rest
        // of this thread's work (disposing of the isolate, then its slot) when both wait
        // for the same one. The slot given back late cannot overflow this host's queue: it
        // is sized to the parent's whole pool (`ProcessEngine::new`).
        // SAFETY: sched_yield has no arguments and no effect on memory.
        unsafe { libc::sched_yield() };
    }
}
