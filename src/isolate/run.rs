//! State of one run shared between its isolate thread, the watchdog, the engine and the
//! JS thread. Every field is either immutable or behind a lock or atomic.
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU8, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use isolet_core::limits::{MAX_DATA_KEY_BYTES, MAX_REJECTION_MESSAGE_BYTES};
use isolet_core::{BridgeLimits, ErrorKind, Failure, IsolateLimits, LogBuffer, LogEntry, LogLevel, PendingCalls};

use crate::v8::{DataAnswer, IsolateHandle, Mode, WasmModule};

/// Everything needed to execute one request.
pub(crate) struct RunSpec {
    pub code: String,
    pub mode: Mode,
    pub limits: IsolateLimits,
    pub bridge: BridgeLimits,
    /// Host functions to install, by global name; the index is the call's `fn_index`.
    /// Only tools the request's policy allows are here (denied ones are not visible).
    pub capabilities: Vec<String>,
    /// Calls per capability against its `maxCallsPerTool` (same index).
    pub tool_calls: isolet_core::ToolCalls,
    /// Install the read-only `data` global.
    pub data_object: bool,
    /// Serialized `data` values known up front.
    pub data_values: HashMap<String, Vec<u8>>,
    /// WebAssembly modules to instantiate under `wasm.<name>`.
    pub wasm_modules: Vec<(String, Arc<WasmModule>)>,
    /// Send console entries as they happen (sessions) instead of only at the end.
    pub stream_console: bool,
}

/// Statistics reported with every result and error.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct ExecStats {
    pub wall_time_ms: f64,
    pub cpu_time_ms: f64,
    pub heap_used_bytes: f64,
    pub heap_peak_bytes: f64,
    pub host_calls: u32,
}

pub(crate) struct Completion {
    pub result: Result<Vec<u8>, Failure>,
    pub stats: ExecStats,
    pub logs: Vec<LogEntry>,
}

/// Outbound events, delivered to JS by the API layer.
pub(crate) trait EventSink: Send + Sync {
    fn started(&self);
    fn console(&self, level: LogLevel, message: &str);
    fn host_call(&self, call_id: u32, name: &str, args: Vec<u8>);
    fn data_request(&self, id: u32, key: &str);
    /// Called exactly once per run.
    fn done(&self, completion: Completion);
}

/// A host's answer to a host call.
pub(crate) enum HostReply {
    Fulfill { call_id: u32, value: Vec<u8> },
    Reject { call_id: u32, name: String, message: String },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(crate) enum StopReason {
    WallTimeout = 1,
    CpuTimeout = 2,
    Aborted = 3,
    Shutdown = 4,
}

impl StopReason {
    fn from_u8(v: u8) -> Option<StopReason> {
        match v {
            1 => Some(StopReason::WallTimeout),
            2 => Some(StopReason::CpuTimeout),
            3 => Some(StopReason::Aborted),
            4 => Some(StopReason::Shutdown),
            _ => None,
        }
    }
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
}

impl Inbox {
    fn new(bridge: &BridgeLimits) -> Self {
        Inbox {
            replies: VecDeque::new(),
            answers: HashMap::new(),
            waiting: Default::default(),
            pending: PendingCalls::new(bridge.max_pending_host_call_bytes, bridge.max_pending_host_calls),
            closed: false,
            woken: false,
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

/// Where the isolate thread runs, for CPU accounting and quarantine.
#[derive(Clone, Copy)]
pub(crate) struct ThreadInfo {
    pub pthread: libc::pthread_t,
    pub cpu_clock: libc::clockid_t,
    pub cpu_at_start: Duration,
}

/// Called once when a run gives back its slot: (failure kind, thread quarantined).
pub(crate) type ReleaseHook = Box<dyn FnOnce(Option<ErrorKind>, bool) + Send>;

pub(crate) struct RunShared {
    pub id: u64,
    pub spec: RunSpec,
    sink: Arc<dyn EventSink>,
    inbox: Mutex<Inbox>,
    cv: Condvar,
    isolate: Mutex<Option<IsolateHandle>>,
    stop: AtomicU8,
    stopped_at: Mutex<Option<Instant>>,
    delivered: AtomicBool,
    released: AtomicBool,
    started_at: Mutex<Option<Instant>>,
    thread: Mutex<Option<ThreadInfo>>,
    /// True while the isolate thread serving this run may still run; cleared (under the
    /// lock) before it exits, so a pthread_t is never used after its thread is gone.
    thread_gate: Mutex<bool>,
    /// The watchdog quarantined the serving thread (set under `thread_gate`).
    quarantined: AtomicBool,
    logs: Mutex<LogBuffer>,
    messages: AtomicU32,
    next_data_id: AtomicU32,
    on_release: Mutex<Option<ReleaseHook>>,
}

impl RunShared {
    pub(crate) fn new(id: u64, spec: RunSpec, sink: Arc<dyn EventSink>) -> Arc<RunShared> {
        let logs = LogBuffer::new(spec.bridge.max_log_entries, spec.bridge.max_log_bytes);
        let inbox = Inbox::new(&spec.bridge);
        Arc::new(RunShared {
            id,
            spec,
            sink,
            inbox: Mutex::new(inbox),
            cv: Condvar::new(),
            isolate: Mutex::new(None),
            stop: AtomicU8::new(0),
            stopped_at: Mutex::new(None),
            delivered: AtomicBool::new(false),
            released: AtomicBool::new(false),
            started_at: Mutex::new(None),
            thread: Mutex::new(None),
            thread_gate: Mutex::new(true),
            quarantined: AtomicBool::new(false),
            logs: Mutex::new(logs),
            messages: AtomicU32::new(0),
            next_data_id: AtomicU32::new(1),
            on_release: Mutex::new(None),
        })
    }

    /// Called once when the run no longer occupies a concurrency slot.
    pub(crate) fn set_on_release(&self, f: ReleaseHook) {
        *self.on_release.lock().unwrap() = Some(f);
    }

    /// Frees the run's slot (idempotent): after the isolate thread finished, or after the
    /// watchdog gave up on it.
    pub(crate) fn release(&self, failed: Option<ErrorKind>, quarantined: bool) {
        if self.released.swap(true, Ordering::SeqCst) {
            return;
        }
        let hook = self.on_release.lock().unwrap().take();
        if let Some(f) = hook {
            f(failed, quarantined);
        }
    }

    pub(crate) fn sink(&self) -> &Arc<dyn EventSink> {
        &self.sink
    }

    // ---- lifecycle -----------------------------------------------------------------

    pub(crate) fn attach(&self, isolate: IsolateHandle, thread: ThreadInfo) {
        *self.thread.lock().unwrap() = Some(thread);
        *self.started_at.lock().unwrap() = Some(Instant::now());
        let mut slot = self.isolate.lock().unwrap();
        if self.stop_reason().is_some() {
            isolate.terminate();
        }
        *slot = Some(isolate);
    }

    /// The isolate thread is about to exit; returns whether it had been quarantined.
    pub(crate) fn close_thread_gate(&self) -> bool {
        let mut gate = self.thread_gate.lock().unwrap();
        *gate = false;
        self.quarantined.load(Ordering::SeqCst)
    }

    /// If the serving thread is still alive: runs `f` with it (keeping it alive
    /// meanwhile), marks it quarantined and gives the run's slot back as failed with
    /// `kind`, all before the thread can exit. Returns whether it did.
    pub(crate) fn quarantine_thread(&self, kind: ErrorKind, f: impl FnOnce(ThreadInfo)) -> bool {
        let gate = self.thread_gate.lock().unwrap();
        let (true, Some(info)) = (*gate, self.thread()) else { return false };
        f(info);
        self.quarantined.store(true, Ordering::SeqCst);
        self.release(Some(kind), true);
        drop(gate);
        true
    }

    pub(crate) fn detach(&self) {
        *self.isolate.lock().unwrap() = None;
    }

    pub(crate) fn started_at(&self) -> Option<Instant> {
        *self.started_at.lock().unwrap()
    }

    pub(crate) fn thread(&self) -> Option<ThreadInfo> {
        *self.thread.lock().unwrap()
    }

    /// Asks the run to stop; the first reason wins. Safe from any thread.
    pub(crate) fn stop(&self, reason: StopReason) -> bool {
        if self.stop.compare_exchange(0, reason as u8, Ordering::SeqCst, Ordering::SeqCst).is_err() {
            return false;
        }
        *self.stopped_at.lock().unwrap() = Some(Instant::now());
        if let Some(isolate) = self.isolate.lock().unwrap().as_ref() {
            isolate.terminate();
        }
        self.wake();
        true
    }

    /// Terminates the isolate's current JS execution without setting a stop reason
    /// (used for the memory limit, whose flag lives in the sandbox).
    pub(crate) fn terminate_isolate(&self) {
        if let Some(isolate) = self.isolate.lock().unwrap().as_ref() {
            isolate.terminate();
        }
    }

    pub(crate) fn stop_reason(&self) -> Option<StopReason> {
        StopReason::from_u8(self.stop.load(Ordering::SeqCst))
    }

    pub(crate) fn stopped_at(&self) -> Option<Instant> {
        *self.stopped_at.lock().unwrap()
    }

    pub(crate) fn is_delivered(&self) -> bool {
        self.delivered.load(Ordering::SeqCst)
    }

    /// Delivers the run's one completion; later calls are ignored. Returns whether
    /// this call delivered.
    pub(crate) fn deliver(&self, completion: Completion) -> bool {
        if !self.claim_delivery() {
            return false;
        }
        self.send_claimed(completion);
        true
    }

    /// First half of `deliver`: true for exactly one caller, which must then call
    /// `send_claimed`. Lets the watchdog park a thread between the two.
    pub(crate) fn claim_delivery(&self) -> bool {
        !self.delivered.swap(true, Ordering::SeqCst)
    }

    pub(crate) fn send_claimed(&self, completion: Completion) {
        self.close_inbox();
        self.sink.done(completion);
    }

    /// The run is over: free whatever replies and answers still wait, and drop any that
    /// arrive later, so nothing is held for a run that has ended.
    fn close_inbox(&self) {
        let mut inbox = self.inbox.lock().unwrap();
        inbox.closed = true;
        inbox.replies.clear();
        inbox.answers.clear();
        inbox.waiting.clear();
        inbox.pending.clear();
        self.cv.notify_all();
    }

    /// The failure matching a stop reason.
    pub(crate) fn failure_for(&self, reason: StopReason) -> Failure {
        match reason {
            StopReason::WallTimeout => Failure::wall_timeout(self.spec.limits.wall_time_ms),
            StopReason::CpuTimeout => Failure::cpu_timeout(self.spec.limits.cpu_time_ms.unwrap_or(0)),
            StopReason::Aborted => Failure::new(ErrorKind::Aborted, "Execution was aborted by the caller"),
            StopReason::Shutdown => Failure::new(ErrorKind::Aborted, "The sandbox engine was shut down"),
        }
    }

    pub(crate) fn take_logs(&self) -> Vec<LogEntry> {
        let mut logs = self.logs.lock().unwrap();
        let full = std::mem::replace(&mut *logs, LogBuffer::new(0, 0));
        full.finish()
    }

    // ---- inbox ---------------------------------------------------------------------

    pub(crate) fn wake(&self) {
        self.inbox.lock().unwrap().woken = true;
        self.cv.notify_all();
    }

    /// Admits host call `call_id` against the run's in-flight budget; `Err` carries
    /// the message of the RangeError the sandbox sees instead.
    pub(crate) fn begin_host_call(&self, call_id: u32, arg_bytes: usize) -> Result<(), String> {
        let mut inbox = self.inbox.lock().unwrap();
        if inbox.closed {
            return Err("the execution has ended".into());
        }
        inbox.pending.begin(call_id, arg_bytes).map_err(|e| e.to_string())
    }

    /// A host's reply to a call in flight. Replies to calls not in flight (late, after
    /// the run ended, or unknown) are dropped; a reply that would pass the in-flight
    /// byte budget becomes a RangeError.
    pub(crate) fn push_reply(&self, reply: HostReply) {
        let mut inbox = self.inbox.lock().unwrap();
        if inbox.closed {
            return;
        }
        let call_id = reply.call_id();
        let reply = match reply {
            HostReply::Reject { call_id, name, message } => HostReply::Reject {
                call_id,
                name: truncate_utf8(name, 256),
                message: truncate_utf8(message, MAX_REJECTION_MESSAGE_BYTES),
            },
            other => other,
        };
        let reply = match inbox.pending.charge_reply(call_id, reply.bytes()) {
            Ok(true) => reply,
            Ok(false) => return,
            Err(e) => HostReply::Reject { call_id, name: "RangeError".into(), message: format!("the reply was refused: {e}") },
        };
        inbox.replies.push_back(reply);
        self.cv.notify_all();
    }

    /// Rejects a call that was refused before it reached the host (not in flight).
    pub(crate) fn reject_unsent(&self, call_id: u32, name: &str, message: String) {
        let mut inbox = self.inbox.lock().unwrap();
        if inbox.closed {
            return;
        }
        inbox.replies.push_back(HostReply::Reject { call_id, name: name.into(), message });
        self.cv.notify_all();
    }

    /// Answers data request `id`; false when no such request is waiting. An answer
    /// larger than `maxMessageBytes` is replaced by an error the sandbox sees.
    pub(crate) fn push_answer(&self, id: u32, answer: DataAnswer) -> bool {
        let max = self.spec.bridge.max_message_bytes;
        let answer = match answer {
            DataAnswer::Value(v) if v.len() > max => {
                DataAnswer::Error(format!("data answer of {} bytes exceeds maxMessageBytes ({max})", v.len()))
            }
            DataAnswer::Error(m) => DataAnswer::Error(truncate_utf8(m, MAX_REJECTION_MESSAGE_BYTES)),
            other => other,
        };
        let mut inbox = self.inbox.lock().unwrap();
        if !inbox.waiting.remove(&id) {
            return false;
        }
        inbox.answers.insert(id, answer);
        self.cv.notify_all();
        true
    }

    /// Waits until there is a reply, a wake-up or a stop, at most `timeout`; returns the
    /// replies received.
    pub(crate) fn wait_for_work(&self, timeout: Option<Duration>) -> Vec<HostReply> {
        let mut inbox = self.inbox.lock().unwrap();
        // A stop also wakes us; re-check every 100 ms as a backstop.
        let limit = timeout.unwrap_or(Duration::from_millis(100)).min(Duration::from_millis(100));
        if inbox.replies.is_empty() && !inbox.woken && self.stop_reason().is_none() {
            inbox = self.cv.wait_timeout(inbox, limit).unwrap().0;
        }
        inbox.woken = false;
        let replies: Vec<HostReply> = inbox.replies.drain(..).collect();
        // Handed to the sandbox right after this returns: no longer in flight.
        for reply in &replies {
            inbox.pending.settle(reply.call_id());
        }
        replies
    }

    // ---- bridge accounting ---------------------------------------------------------

    /// Counts one message against `max_messages`; false when over.
    pub(crate) fn count_message(&self) -> bool {
        let n = self.messages.fetch_add(1, Ordering::SeqCst) + 1;
        n <= self.spec.bridge.max_messages
    }

    pub(crate) fn messages(&self) -> u32 {
        self.messages.load(Ordering::SeqCst).min(self.spec.bridge.max_messages)
    }

    pub(crate) fn log(&self, level: LogLevel, message: &str) {
        let mut logs = self.logs.lock().unwrap();
        if logs.push(level, message) && self.spec.stream_console {
            // Stream the entry as kept (truncated to the byte budget), never the original.
            let kept = logs.last().map(|e| e.message.clone()).unwrap_or_default();
            drop(logs);
            self.sink.console(level, &kept);
        }
    }

    /// Console bytes the run's log still keeps (0 once entries or bytes are used up).
    pub(crate) fn log_room(&self) -> usize {
        self.logs.lock().unwrap().room()
    }

    /// Blocking data request from the isolate thread.
    pub(crate) fn request_data(&self, key: &str) -> DataAnswer {
        if let Some(value) = self.spec.data_values.get(key) {
            return DataAnswer::Value(value.clone());
        }
        if key.len() > MAX_DATA_KEY_BYTES {
            // Refused before it is counted, sent or buffered anywhere on the host.
            return DataAnswer::Error(format!("data key is longer than the limit of {MAX_DATA_KEY_BYTES} bytes"));
        }
        if !self.count_message() {
            return DataAnswer::Error(format!(
                "Bridge message limit of {} per execution exceeded",
                self.spec.bridge.max_messages
            ));
        }
        let id = self.next_data_id.fetch_add(1, Ordering::SeqCst);
        {
            let mut inbox = self.inbox.lock().unwrap();
            if inbox.closed {
                return DataAnswer::Terminated;
            }
            // Reads block the isolate thread, so at most one request per run waits here.
            inbox.waiting.insert(id);
        }
        self.sink.data_request(id, key);
        let mut inbox = self.inbox.lock().unwrap();
        loop {
            if let Some(answer) = inbox.answers.remove(&id) {
                return answer;
            }
            if self.stop_reason().is_some() {
                inbox.waiting.remove(&id);
                return DataAnswer::Terminated;
            }
            inbox = self.cv.wait_timeout(inbox, Duration::from_millis(100)).unwrap().0;
        }
    }
}
