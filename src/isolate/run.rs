//! State of one run shared between its isolate thread, the watchdog, the engine and the
//! JS thread. Every field is either immutable or behind a lock or atomic.
//!
//! The run's lifecycle is `isolet_core::run_state::RunState` behind one lock (`life`),
//! together with what the transitions need (the isolate to terminate, the thread's
//! clock, the slot's release hook). One lock rather than an atomic state word because a
//! transition and its side effect must be atomic together: a stop must terminate the
//! isolate attached at that moment, and the watchdog may read a thread's CPU clock only
//! while the thread cannot have exited. Every ending goes through `end`, which carries
//! out the steps the state machine returns, in its order, under the `ending` lock.
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use isolet_core::limits::{MAX_DATA_KEY_BYTES, MAX_REJECTION_MESSAGE_BYTES};
use isolet_core::run_state::{Ending, LifecycleError, Phase, RunState, Step, StopDecision};
use isolet_core::{BridgeLimits, ErrorKind, Failure, LogBuffer, LogEntry, LogLevel, PendingCalls, RunPlan, ToolCalls};

pub(crate) use isolet_core::run_state::StopReason;

use crate::limits::cpu::ThreadClock;
use crate::limits::lock;
use crate::limits::watchdog::{Observation, Watched};
use crate::v8::EngineCode;
use crate::v8::{DataAnswer, IsolateHandle, WasmModule, WasmModules};

/// One run as its isolate executes it: the checked plan (shared with whoever submitted
/// it: a restart or a second look costs no copy) and what the run keeps while it runs.
pub(crate) struct RunSpec {
    /// Its `tools` are the host functions installed, by global name; the index is a call's
    /// `fn_index`. Only tools the request's policy allows are there (denied ones are not
    /// visible).
    pub plan: Arc<RunPlan>,
    /// Calls per tool against its `maxCallsPerTool` (same index).
    pub tool_calls: ToolCalls,
    /// WebAssembly modules to instantiate under `wasm.<name>` (none unless `plan.wasm`).
    pub wasm_modules: WasmModules,
    /// The engine's prelude and compiled-code cache.
    pub code: Arc<EngineCode>,
    /// Persistent sandboxes (`sandbox.call`): call this global function with these
    /// serialized arguments (an array) instead of running `plan.code`.
    pub call: Option<(String, Vec<u8>)>,
    /// Persistent sandboxes: the sandbox's own `modules` (its runs' plans carry their own).
    pub sandbox_modules: Option<Arc<std::collections::BTreeMap<String, String>>>,
}

impl RunSpec {
    /// `engine_modules`: the engine's compiled WebAssembly modules.
    pub(crate) fn new(plan: Arc<RunPlan>, engine_modules: &[(String, Arc<WasmModule>)]) -> RunSpec {
        let tool_calls = ToolCalls::new(plan.max_calls.clone());
        let wasm_modules = if plan.wasm { engine_modules.to_vec() } else { Vec::new() };
        RunSpec { plan, tool_calls, wasm_modules, code: EngineCode::none(), call: None, sandbox_modules: None }
    }

    /// The run uses the engine's prelude and compiled-code cache.
    pub(crate) fn with_code(mut self, code: Arc<EngineCode>) -> RunSpec {
        self.code = code;
        self
    }
}

/// Statistics reported with every result and error.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ExecStats {
    pub wall_time_ms: f64,
    pub cpu_time_ms: f64,
    pub heap_used_bytes: f64,
    pub heap_peak_bytes: f64,
    pub host_calls: u32,
    /// Promises rejected with no handler that had none when the run ended.
    pub unhandled_rejections: u32,
}

pub(crate) struct Completion {
    pub result: Result<Vec<u8>, Failure>,
    pub stats: ExecStats,
    pub logs: Vec<LogEntry>,
}

/// Node's thread took a run's result (its callback ran, and the microtasks after it). The
/// isolate thread waits for that before disposing the isolate: disposal unmaps the heap,
/// and the interrupts that sends to the process's other threads slowed Node's thread
/// taking the result by 0.3 ms for a trivial run, 1.1 ms with a 1 MB prelude (measured).
#[derive(Default)]
pub(crate) struct Handover {
    taken: Mutex<bool>,
    cv: Condvar,
}

impl Handover {
    pub(crate) fn taken(&self) {
        *lock(&self.taken) = true;
        self.cv.notify_one();
    }

    /// Until the result was taken, or `max` passed.
    pub(crate) fn wait(&self, max: Duration) {
        let taken = lock(&self.taken);
        let _ = self.cv.wait_timeout_while(taken, max, |taken| !*taken);
    }
}

/// In a sandbox host: reads the replies the parent sent, if no one else is reading (its
/// channel's `read_replies`). An isolate thread spinning for a reply calls it, so the
/// reply needs no wake-up of the host's reader thread (on 2 cores, with the parent's
/// thread answering and this one spinning, the reader waited for a core).
static REPLY_READER: OnceLock<Box<dyn Fn() + Send + Sync>> = OnceLock::new();

/// Sets `REPLY_READER` (once, by a sandbox host as it starts serving).
pub(crate) fn read_replies_while_spinning(read: Box<dyn Fn() + Send + Sync>) {
    let _ = REPLY_READER.set(read);
}

/// Outbound events, delivered to JS by the API layer.
pub(crate) trait EventSink: Send + Sync {
    fn started(&self);
    fn console(&self, level: LogLevel, message: &str);
    fn host_call(&self, call_id: u32, name: &str, args: Vec<u8>);
    fn data_request(&self, id: u32, key: &str);
    /// An import for the host's `resolve`: module `key` (joined to its importer),
    /// imported from `referrer`; `typescript`: its source is to be stripped of types.
    /// Answered like a data request (`push_answer`).
    fn module_request(&self, id: u32, key: &str, referrer: &str, typescript: bool);
    /// Called exactly once per run.
    fn done(&self, completion: Completion);
    /// Told when the caller has taken the completion, for a sink that delivers it to
    /// Node's thread of this process.
    fn handover(&self) -> Option<Arc<Handover>> {
        None
    }
}

/// Passes every event of a run on to `inner`, with `before_done` seeing (and amending) its
/// completion first: how a persistent sandbox counts what its runs used, in either mode.
pub(crate) struct BeforeDone<F> {
    pub inner: Arc<dyn EventSink>,
    pub before_done: F,
}

impl<F: Fn(&mut Completion) + Send + Sync> EventSink for BeforeDone<F> {
    fn started(&self) {
        self.inner.started();
    }

    fn console(&self, level: LogLevel, message: &str) {
        self.inner.console(level, message);
    }

    fn host_call(&self, call_id: u32, name: &str, args: Vec<u8>) {
        self.inner.host_call(call_id, name, args);
    }

    fn data_request(&self, id: u32, key: &str) {
        self.inner.data_request(id, key);
    }

    fn module_request(&self, id: u32, key: &str, referrer: &str, typescript: bool) {
        self.inner.module_request(id, key, referrer, typescript);
    }

    fn done(&self, mut completion: Completion) {
        (self.before_done)(&mut completion);
        self.inner.done(completion);
    }

    fn handover(&self) -> Option<Arc<Handover>> {
        self.inner.handover()
    }
}

/// A host's answer to a host call.
pub(crate) enum HostReply {
    Fulfill { call_id: u32, value: Vec<u8> },
    Reject { call_id: u32, name: String, message: String },
}

impl HostReply {
    fn call_id(&self) -> u32 {
        match self {
            HostReply::Fulfill { call_id, .. } | HostReply::Reject { call_id, .. } => *call_id,
        }
    }

    fn bytes(&self) -> usize {
        match self {
            HostReply::Fulfill { value, .. } => value.len(),
            HostReply::Reject { name, message, .. } => name.len() + message.len(),
        }
    }
}

struct Inbox {
    replies: VecDeque<HostReply>,
    answers: HashMap<u32, DataAnswer>,
    /// Data requests sent and not answered yet.
    waiting: std::collections::HashSet<u32>,
    /// Host calls sent and not yet answered inside the sandbox, with their bytes.
    pending: PendingCalls,
    /// The run delivered its completion: later replies and answers are dropped.
    closed: bool,
    woken: bool,
    /// The isolate thread sleeps in `wait_for_work` and nobody has woken it yet: only
    /// then does a reply need a `FUTEX_WAKE`. Replies arriving while it runs, or after
    /// the first reply woke it, are picked up by the same wake-up.
    sleeping: bool,
}

impl Inbox {
    fn new(bridge: &BridgeLimits) -> Self {
        Inbox {
            replies: VecDeque::new(),
            answers: HashMap::new(),
            waiting: Default::default(),
            pending: PendingCalls::new(
                bridge.max_pending_host_call_bytes,
                bridge.max_pending_host_calls,
                bridge.max_pending_host_call_values as u64,
                isolet_core::limits::built_value_budget(bridge.max_pending_host_call_bytes),
            ),
            closed: false,
            woken: false,
            sleeping: false,
        }
    }
}

/// Cuts `s` to at most `max` bytes on a char boundary.
fn truncate_utf8(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut cut = max;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
        s.push_str("… [truncated]");
    }
    s
}

/// Called once when a run gives back its slot: (failure kind, thread quarantined).
pub(crate) type ReleaseHook = Box<dyn FnOnce(Option<ErrorKind>, bool) + Send>;

/// The lifecycle and what its transitions act on; behind `RunShared::life`.
struct Life {
    state: RunState,
    /// The isolate while its thread executes the run (cleared before it is disposed, so
    /// it is never terminated after).
    isolate: Option<IsolateHandle>,
    /// The serving thread's CPU clock, from the moment it started executing.
    clock: Option<ThreadClock>,
    started_at: Option<Instant>,
    /// When termination reached the isolate for the stop (the watchdog's grace counts
    /// from here, not from the request: a run stopped before its isolate existed).
    terminated_at: Option<Instant>,
    /// The thread's CPU time when termination reached it (see `watchdog::check`).
    cpu_at_termination: Option<Duration>,
    /// The failure kind the run ended with, reported when the slot is given back.
    failed: Option<ErrorKind>,
    on_release: Option<ReleaseHook>,
}

pub(crate) struct RunShared {
    pub id: u64,
    pub spec: RunSpec,
    sink: Arc<dyn EventSink>,
    inbox: Mutex<Inbox>,
    cv: Condvar,
    life: Mutex<Life>,
    /// Held while the steps of an ending (`end`, `thread_exited`) are carried out, so
    /// they never interleave: e.g. a quarantined thread cannot leave the quarantine
    /// before the party that abandoned it has counted it and given its slot back.
    /// Taken before `life`, never while holding it or the engine's lock.
    ending: Mutex<()>,
    logs: Mutex<LogBuffer>,
    messages: AtomicU32,
    next_data_id: AtomicU32,
    /// Something was queued in the inbox (a reply, an answer, a wake-up) since the isolate
    /// thread last looked: what it spins on before it sleeps (`wait_for_work`).
    arrived: AtomicBool,
    /// How long (µs) the isolate thread's last wait for a reply took, spin and sleep.
    last_wait_us: AtomicU64,
    /// CPU time (ns) the isolate thread spent spinning for replies: not the run's code's,
    /// so not counted in its `cpuTimeMs` (`code_cpu`).
    spin_cpu_ns: AtomicU64,
}

/// Isolate threads spinning for a reply now, in this process (`wakeups::spin_for_reply`).
static SPINNING: AtomicUsize = AtomicUsize::new(0);

fn cores() -> usize {
    static CORES: OnceLock<usize> = OnceLock::new();
    *CORES.get_or_init(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
}

impl RunShared {
    pub(crate) fn new(id: u64, spec: RunSpec, sink: Arc<dyn EventSink>) -> Arc<RunShared> {
        let logs = LogBuffer::new(spec.plan.bridge.max_log_entries, spec.plan.bridge.max_log_bytes);
        let inbox = Inbox::new(&spec.plan.bridge);
        let life = Life {
            state: RunState::new(),
            isolate: None,
            clock: None,
            started_at: None,
            terminated_at: None,
            cpu_at_termination: None,
            failed: None,
            on_release: None,
        };
        Arc::new(RunShared {
            id,
            spec,
            sink,
            inbox: Mutex::new(inbox),
            cv: Condvar::new(),
            life: Mutex::new(life),
            ending: Mutex::new(()),
            logs: Mutex::new(logs),
            messages: AtomicU32::new(0),
            next_data_id: AtomicU32::new(1),
            arrived: AtomicBool::new(false),
            last_wait_us: AtomicU64::new(0),
            spin_cpu_ns: AtomicU64::new(0),
        })
    }

    /// CPU time the run's code has used on `clock` (its thread's): less what the thread
    /// spent spinning for replies.
    pub(crate) fn code_cpu(&self, clock: &ThreadClock) -> Duration {
        clock.used().saturating_sub(Duration::from_nanos(self.spin_cpu_ns.load(Ordering::Relaxed)))
    }

    pub(crate) fn sink(&self) -> &Arc<dyn EventSink> {
        &self.sink
    }

    // ---- lifecycle -----------------------------------------------------------------

    /// The run takes a concurrency slot; `on_release` is called once when it gives it
    /// back. False when the run has already ended (it must not start).
    pub(crate) fn admit(&self, on_release: ReleaseHook) -> bool {
        let mut life = lock(&self.life);
        match life.state.admit() {
            Ok(()) => {
                life.on_release = Some(on_release);
                true
            }
            Err(_) => false,
        }
    }

    /// The run's thread starts executing on `isolate`. A stop asked for earlier reaches
    /// the isolate now.
    pub(crate) fn attach(&self, isolate: IsolateHandle, clock: ThreadClock) {
        let mut life = lock(&self.life);
        life.clock = Some(clock);
        life.started_at = Some(Instant::now());
        if life.state.stop_reason().is_some() {
            isolate.terminate();
            life.terminated_at = Some(Instant::now());
            life.cpu_at_termination = Some(self.code_cpu(&clock));
        }
        life.isolate = Some(isolate);
    }

    /// The isolate is about to be disposed: nothing may terminate it any more.
    pub(crate) fn detach(&self) {
        lock(&self.life).isolate = None;
    }

    /// Asks the run to stop; the first reason wins. Safe from any thread. Returns
    /// whether this call's reason is the one the run stops for.
    pub(crate) fn request_stop(&self, reason: StopReason) -> bool {
        let decision = {
            let mut life = lock(&self.life);
            let reason = if life.state.has_ended() {
                reason
            } else {
                // Read under the lock while the run has not ended: its thread is alive.
                let ms = |d: Duration| d.as_millis() as u64;
                let limits = &self.spec.plan.limits;
                let elapsed = life.started_at.map(|t| ms(t.elapsed()));
                let cpu = life.clock.map(|c| ms(self.code_cpu(&c)));
                isolet_core::run_state::stop_reason_at(reason, elapsed, limits.wall_time_ms, cpu, limits.cpu_time_ms)
            };
            let decision = life.state.request_stop(reason);
            if decision == StopDecision::Stop {
                if let Some(isolate) = life.isolate.as_ref() {
                    isolate.terminate();
                    life.terminated_at = Some(Instant::now());
                    life.cpu_at_termination = life.clock.map(|c| self.code_cpu(&c));
                }
            }
            decision
        };
        if decision == StopDecision::Ignored {
            return false;
        }
        self.wake();
        true
    }

    /// The run has been answered (its `done` was delivered).
    pub(crate) fn has_answered(&self) -> bool {
        lock(&self.life).state.has_ended()
    }

    pub(crate) fn stop_reason(&self) -> Option<StopReason> {
        lock(&self.life).state.stop_reason()
    }

    /// The run was asked to stop or has already been answered (e.g. abandoned while its
    /// thread was slow to unwind): its thread should unwind now.
    pub(crate) fn should_stop(&self) -> bool {
        let life = lock(&self.life);
        life.state.stop_reason().is_some() || life.state.has_ended()
    }

    /// The one way a run ends: asks the state machine, then carries out its steps in
    /// order. `completion` is built only when this call ends the run (under the lock,
    /// where the thread's clock may be read). Returns whether it did.
    fn end(&self, ending: Ending, completion: impl FnOnce(&Life) -> Completion) -> bool {
        let _ending = lock(&self.ending);
        let (steps, completion, hook, clock) = {
            let mut life = lock(&self.life);
            match life.state.finish(ending) {
                Ok(steps) => {
                    let completion = completion(&life);
                    life.failed = completion.result.as_ref().err().map(|f| f.kind);
                    let releases = steps.iter().any(|s| matches!(s, Step::ReleaseSlot { .. }));
                    let hook = if releases { life.on_release.take() } else { None };
                    (steps, completion, hook, life.clock)
                }
                Err(LifecycleError::AlreadyEnded) => return false,
                Err(illegal @ LifecycleError::Illegal { .. }) => {
                    debug_assert!(false, "isolet run {}: {illegal:?}", self.id);
                    return false;
                }
            }
        };
        let failed = completion.result.as_ref().err().map(|f| f.kind);
        let (mut completion, mut hook) = (Some(completion), hook);
        for step in steps {
            match *step {
                Step::Quarantine => match clock {
                    // SAFETY: the thread is alive: it exits only after `thread_exited`,
                    // which waits for the `ending` lock held here.
                    Some(clock) => unsafe { crate::limits::quarantine::quarantine(clock.pthread(), clock.tid()) },
                    None => debug_assert!(false, "isolet run {}: quarantine without a thread", self.id),
                },
                Step::ReleaseSlot { quarantined } => {
                    if let Some(f) = hook.take() {
                        f(failed, quarantined);
                    }
                }
                Step::Answer => {
                    self.close_inbox();
                    if let Some(c) = completion.take() {
                        self.sink.done(c);
                    }
                }
            }
        }
        true
    }

    /// The isolate thread has the run's result.
    pub(crate) fn complete(&self, completion: Completion) -> bool {
        self.end(Ending::Completed, |_| completion)
    }

    /// The run will never get a thread (refused, aborted or shut down while queued, or
    /// its thread could not start): it is answered with `failure`.
    pub(crate) fn refuse(&self, failure: Failure) -> bool {
        self.end(Ending::NotStarted, |_| Completion { result: Err(failure), stats: ExecStats::default(), logs: Vec::new() })
    }

    /// A fatal V8 OOM on the run's thread, which parks for good: the run answers now, with
    /// its figures (wall and CPU time so far, `held_bytes` of heap and ArrayBuffers, host
    /// calls), and counts its thread as quarantined. Returns whether the thread is counted
    /// (now or by an earlier abandonment).
    pub(crate) fn abandon_after_fatal_oom(&self, held_bytes: usize) -> bool {
        let failure = Failure::out_of_memory(self.spec.plan.limits.memory_mb);
        let (wall, cpu) = {
            let life = lock(&self.life);
            (life.started_at.map(|t| t.elapsed()), life.clock.map(|c| self.code_cpu(&c)))
        };
        let stats = ExecStats {
            wall_time_ms: wall.map_or(0.0, |d| d.as_secs_f64() * 1000.0),
            cpu_time_ms: cpu.map_or(0.0, |d| d.as_secs_f64() * 1000.0),
            heap_used_bytes: held_bytes as f64,
            heap_peak_bytes: held_bytes as f64,
            host_calls: self.messages(),
            ..ExecStats::default()
        };
        let ended = self.end(Ending::Abandoned, |_| Completion { result: Err(failure), stats, logs: self.take_logs() });
        ended || lock(&self.life).state.phase() == Phase::Abandoned
    }

    /// The thread that served the run is exiting, its isolate disposed: gives the slot
    /// back (unless the run was abandoned, which did). Returns whether the thread had
    /// been quarantined, and leaves the quarantine if so.
    pub(crate) fn thread_exited(&self) -> bool {
        let _ending = lock(&self.ending);
        let (exit, hook, failed) = {
            let mut life = lock(&self.life);
            match life.state.thread_exited() {
                Ok(exit) => (exit, if exit.release_slot { life.on_release.take() } else { None }, life.failed),
                Err(illegal) => {
                    debug_assert!(false, "isolet run {}: {illegal:?}", self.id);
                    return false;
                }
            }
        };
        if let Some(f) = hook {
            f(failed, false);
        }
        if exit.left_quarantine {
            crate::limits::quarantine::release();
        }
        exit.left_quarantine
    }

    /// The run is over: free whatever replies and answers still wait, and drop any that
    /// arrive later, so nothing is held for a run that has ended.
    fn close_inbox(&self) {
        let mut inbox = lock(&self.inbox);
        inbox.closed = true;
        inbox.replies.clear();
        inbox.answers.clear();
        inbox.waiting.clear();
        inbox.pending.clear();
        self.cv.notify_all();
    }

    /// The failure matching a stop reason.
    pub(crate) fn failure_for(&self, reason: StopReason) -> Failure {
        let limits = &self.spec.plan.limits;
        isolet_core::run_state::stop_failure(reason, limits.wall_time_ms, limits.cpu_time_ms.unwrap_or(0))
    }

    pub(crate) fn take_logs(&self) -> Vec<LogEntry> {
        let mut logs = lock(&self.logs);
        let full = std::mem::replace(&mut *logs, LogBuffer::new(0, 0));
        full.finish()
    }

    // ---- inbox ---------------------------------------------------------------------

    pub(crate) fn wake(&self) {
        {
            let mut inbox = lock(&self.inbox);
            inbox.woken = true;
            inbox.sleeping = false;
            self.arrived.store(true, Ordering::Release);
        }
        self.cv.notify_all();
    }

    /// Queues a reply and says whether the isolate thread must be woken for it (the
    /// caller notifies after releasing the lock, so the woken thread does not block on it).
    fn queue_reply(inbox: &mut Inbox, reply: HostReply) -> bool {
        inbox.replies.push_back(reply);
        std::mem::take(&mut inbox.sleeping)
    }

    /// Admits host call `call_id` (its arguments' bytes and values) against the run's
    /// in-flight budget; `Err` carries the message of the RangeError the sandbox sees.
    pub(crate) fn begin_host_call(&self, call_id: u32, arg_bytes: usize, args: isolet_core::Tally) -> Result<(), String> {
        let mut inbox = lock(&self.inbox);
        if inbox.closed {
            return Err("the execution has ended".into());
        }
        inbox.pending.begin(call_id, arg_bytes, args.values, args.cost).map_err(|e| e.to_string())
    }

    /// A host's reply to a call in flight. Replies to calls not in flight (late, after
    /// the run ended, or unknown) are dropped; a reply that would pass the in-flight
    /// byte budget becomes a RangeError.
    pub(crate) fn push_reply(&self, reply: HostReply) {
        let mut inbox = lock(&self.inbox);
        if inbox.closed {
            return;
        }
        let call_id = reply.call_id();
        let reply = match reply {
            HostReply::Reject { call_id, name, message } => {
                HostReply::Reject { call_id, name: truncate_utf8(name, 256), message: truncate_utf8(message, MAX_REJECTION_MESSAGE_BYTES) }
            }
            other => other,
        };
        let reply = match inbox.pending.charge_reply(call_id, reply.bytes()) {
            Ok(true) => reply,
            Ok(false) => return,
            Err(e) => HostReply::Reject { call_id, name: "RangeError".into(), message: format!("the reply was refused: {e}") },
        };
        let wake = Self::queue_reply(&mut inbox, reply);
        self.arrived.store(true, Ordering::Release);
        drop(inbox);
        if wake {
            self.cv.notify_all();
        }
    }

    /// Answers data request `id`; false when no such request is waiting. The answer was
    /// written within `maxMessageBytes` by the host (`intoSandbox` in lib/bridge.js).
    pub(crate) fn push_answer(&self, id: u32, answer: DataAnswer) -> bool {
        let answer = match answer {
            DataAnswer::Error(m) => DataAnswer::Error(truncate_utf8(m, MAX_REJECTION_MESSAGE_BYTES)),
            other => other,
        };
        let mut inbox = lock(&self.inbox);
        if !inbox.waiting.remove(&id) {
            return false;
        }
        inbox.answers.insert(id, answer);
        self.arrived.store(true, Ordering::Release);
        drop(inbox);
        self.cv.notify_all();
        true
    }

    /// Waits until there is a reply, a wake-up or a stop, at most `timeout`; moves every
    /// reply received into `replies` (empty on entry; its buffer is swapped with the
    /// inbox's, so a steady exchange allocates nothing per wake-up).
    pub(crate) fn wait_for_work(&self, timeout: Option<Duration>, replies: &mut VecDeque<HostReply>) {
        debug_assert!(replies.is_empty());
        let mut inbox = lock(&self.inbox);
        // A stop also wakes us; re-check every 100 ms as a backstop.
        let limit = timeout.unwrap_or(Duration::from_millis(100)).min(Duration::from_millis(100));
        if inbox.replies.is_empty() && !inbox.woken && !self.should_stop() {
            let started = Instant::now();
            let last = self.last_wait_us.load(Ordering::Relaxed);
            if isolet_core::wakeups::spin_for_reply(inbox.pending.in_flight(), last, SPINNING.load(Ordering::Relaxed), cores()) {
                // Under the lock: nothing queued since the check above can be missed.
                self.arrived.store(false, Ordering::Relaxed);
                drop(inbox);
                SPINNING.fetch_add(1, Ordering::Relaxed);
                let spin_start = Instant::now();
                let spin = Duration::from_micros(isolet_core::wakeups::REPLY_SPIN_US).min(limit);
                let read_replies = REPLY_READER.get();
                while !self.arrived.load(Ordering::Acquire) && spin_start.elapsed() < spin {
                    match read_replies {
                        Some(read) => read(),
                        None => std::hint::spin_loop(),
                    }
                }
                // A busy loop's CPU time is its wall time (reading the thread's CPU clock
                // costs a system call, a microsecond here): were the thread preempted
                // meanwhile, the run's code is credited at most REPLY_SPIN_US a wait.
                self.spin_cpu_ns.fetch_add(spin_start.elapsed().min(spin).as_nanos() as u64, Ordering::Relaxed);
                SPINNING.fetch_sub(1, Ordering::Relaxed);
                inbox = lock(&self.inbox);
            }
            if inbox.replies.is_empty() && !inbox.woken && !self.should_stop() {
                inbox.sleeping = true;
                inbox = self.cv.wait_timeout(inbox, limit.saturating_sub(started.elapsed())).unwrap_or_else(|e| e.into_inner()).0;
                inbox.sleeping = false;
            }
            if !inbox.replies.is_empty() {
                self.last_wait_us.store(started.elapsed().as_micros() as u64, Ordering::Relaxed);
            }
        }
        inbox.woken = false;
        std::mem::swap(&mut inbox.replies, replies);
        // Handed to the sandbox right after this returns: no longer in flight.
        for reply in replies.iter() {
            inbox.pending.settle(reply.call_id());
        }
    }

    // ---- bridge accounting ---------------------------------------------------------

    /// Counts one message against `max_messages`; false when over.
    pub(crate) fn count_message(&self) -> bool {
        // Past the limit the count stops growing: a run refused in a loop for hours never
        // wraps it back under. Only the isolate thread counts, so load-then-add is exact.
        if self.messages.load(Ordering::SeqCst) >= self.spec.plan.bridge.max_messages {
            return false;
        }
        self.messages.fetch_add(1, Ordering::SeqCst);
        true
    }

    pub(crate) fn messages(&self) -> u32 {
        self.messages.load(Ordering::SeqCst).min(self.spec.plan.bridge.max_messages)
    }

    pub(crate) fn log(&self, level: LogLevel, message: &str) {
        let mut logs = lock(&self.logs);
        if logs.push(level, message) && self.spec.plan.stream_console {
            // Stream the entry as kept (truncated to the byte budget), never the original.
            let kept = logs.last().map(|e| e.message.clone()).unwrap_or_default();
            drop(logs);
            self.sink.console(level, &kept);
        }
    }

    /// Console bytes the run's log still keeps (0 once entries or bytes are used up).
    pub(crate) fn log_room(&self) -> usize {
        lock(&self.logs).room()
    }

    /// Blocking data request from the isolate thread.
    pub(crate) fn request_data(&self, key: &str) -> DataAnswer {
        if let Some(value) = self.spec.plan.data_values.get(key) {
            return DataAnswer::Value(value.clone());
        }
        if key.len() > MAX_DATA_KEY_BYTES {
            // Refused before it is counted, sent or buffered anywhere on the host.
            return DataAnswer::Error(format!("data key is longer than the limit of {MAX_DATA_KEY_BYTES} bytes"));
        }
        // Reads block the isolate thread, so at most one request per run waits here.
        self.ask_host(|id| self.sink.data_request(id, key))
    }

    /// Blocking request to the host's `resolve` from the isolate thread: counted as a
    /// message (`maxMessages`) and answered within the run's time limits.
    pub(crate) fn request_module(&self, key: &str, referrer: &str) -> DataAnswer {
        let typescript = isolet_core::modules::is_typescript(key, self.spec.plan.language);
        self.ask_host(|id| self.sink.module_request(id, key, referrer, typescript))
    }

    /// Counts a blocking request as a message, sends it with `send(id)` and waits for its
    /// answer, until the run stops.
    fn ask_host(&self, send: impl FnOnce(u32)) -> DataAnswer {
        if !self.count_message() {
            return DataAnswer::Error(format!("Bridge message limit of {} per execution exceeded", self.spec.plan.bridge.max_messages));
        }
        let id = self.next_data_id.fetch_add(1, Ordering::SeqCst);
        {
            let mut inbox = lock(&self.inbox);
            if inbox.closed {
                return DataAnswer::Terminated;
            }
            inbox.waiting.insert(id);
        }
        send(id);
        let mut inbox = lock(&self.inbox);
        loop {
            if let Some(answer) = inbox.answers.remove(&id) {
                return answer;
            }
            if inbox.closed || self.should_stop() {
                inbox.waiting.remove(&id);
                return DataAnswer::Terminated;
            }
            inbox = self.cv.wait_timeout(inbox, Duration::from_millis(100)).unwrap_or_else(|e| e.into_inner()).0;
        }
    }
}

impl Watched for RunShared {
    fn observe(&self) -> Option<Observation> {
        let life = lock(&self.life);
        if life.state.has_ended() {
            return None;
        }
        let limits = &self.spec.plan.limits;
        Some(Observation {
            wall_limit: Duration::from_millis(limits.wall_time_ms),
            cpu_limit: limits.cpu_time_ms.map(Duration::from_millis),
            elapsed: life.started_at.map(|t| t.elapsed()).unwrap_or_default(),
            // Read under the lock while the run has not ended: its thread is alive.
            cpu_used: life.clock.map(|c| self.code_cpu(&c)),
            terminated_for: life.terminated_at.map(|t| t.elapsed()),
            cpu_at_termination: life.cpu_at_termination,
        })
    }

    fn request_stop(&self, reason: StopReason) {
        RunShared::request_stop(self, reason);
    }

    /// The thread ignored termination: answer with the stop's failure now and quarantine
    /// the thread (the lowest priority, left to run; see `limits::quarantine`).
    fn abandon(&self) {
        self.end(Ending::Abandoned, |life| {
            // Read after `finish` moved the phase on: the reason is kept past the end.
            let reason = life.state.stopped_for().unwrap_or(StopReason::WallTimeout);
            Completion {
                result: Err(self.failure_for(reason)),
                stats: ExecStats {
                    wall_time_ms: life.started_at.map(|t| t.elapsed().as_secs_f64() * 1000.0).unwrap_or(0.0),
                    cpu_time_ms: life.clock.map(|c| self.code_cpu(&c).as_secs_f64() * 1000.0).unwrap_or(0.0),
                    ..Default::default()
                },
                logs: self.take_logs(),
            }
        });
    }

    fn terminate_isolate(&self) {
        if let Some(isolate) = lock(&self.life).isolate.as_ref() {
            isolate.terminate();
        }
    }
}
