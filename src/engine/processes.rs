//! The process backend (isolation: 'process'): runs execute in sandbox host processes,
//! each a `node` child running isolates in thread mode (`lib/supervisor/sandbox-host.js`
//! calls `serveSandboxHost`). Admission, the queue and its fairness are the same
//! `isolet_core::queue::Pool` as thread mode's; every supervision decision (budgets,
//! deadlines, placement, what becomes of the runs of a host that ended) is
//! `isolet_core::host_policy`'s. This file carries them out, with Node's loop reading the
//! hosts' frames while it is free (`HostFrames`), one I/O thread per host (stderr, exit,
//! memory and deadline checks, and frames Node's thread leaves waiting) and a writer
//! thread per host.
//!
//! Lock order: a host's read lock (`HostFrames::read`), then `Inner::state`, then a host
//! writer's lock (a frame's place in line is taken under the state lock, so a run's frames
//! never overtake each other).
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use isolet_core::frame::{self, Header, Kind, WireDone, WireHealth, WireLockdown, WireReady, WireStart};
use isolet_core::host_policy::{
    self as policy, EventBudget, HostEnd, HostView, Lingering, LostRun, LostVerdict, StartVerdict, Starts, StuckVerdict,
};
use isolet_core::queue::{Admission, AdmitAt, Pool, PoolConfig, Tenant};
use isolet_core::run_state::{Ending, RunState, StopReason};
use isolet_core::{ErrorKind, Failure, RunPlan};

use super::queue_timer::QueueTimer;
use super::{ChannelReader, LoopWatch};
use crate::isolate::run::ExecStats;
use crate::isolate::{Completion, EventSink, HostReply};
use crate::limits::lock;
use crate::supervisor::host::{self, CpuReader, FrameStream, HostWriter, Read1, RssReader, StderrTail};
use crate::v8::DataAnswer;
use isolet_core::wakeups;

mod sandboxes;
pub(crate) use sandboxes::ProcessSandbox;
use sandboxes::SandboxOf;

/// Sandbox host processes alive in this process, over all engines.
static LIVE_HOSTS: AtomicUsize = AtomicUsize::new(0);

pub(crate) fn live_hosts() -> usize {
    LIVE_HOSTS.load(Ordering::SeqCst)
}

/// Every process engine alive, tagged with the Node environment that made it, so that
/// environment's end (or `process.exit`) ends their hosts.
static ENGINES: Mutex<Vec<(usize, Weak<Inner>)>> = Mutex::new(Vec::new());

/// Ends every host of environment `env`'s process engines now (the process is exiting).
pub(crate) fn end_all(env: usize) {
    let engines: Vec<_> = lock(&ENGINES).iter().filter(|(owner, _)| *owner == env).filter_map(|(_, e)| e.upgrade()).collect();
    for inner in engines {
        let mut s = inner.state();
        s.shut = true;
        let keys: Vec<u64> = s.hosts.iter().map(|h| h.key).collect();
        for key in keys {
            s.end_host(key, HostEnd::Shutdown);
        }
    }
}

#[derive(Clone)]
pub(crate) struct ProcessEngine {
    inner: Arc<Inner>,
}

struct Inner {
    state: Mutex<State>,
    /// Hosts became ready or ended (for `ready` and `wait_idle`).
    changed: Condvar,
    /// Node's loop, which reads hosts' channels while it is free (`HostFrames`).
    loop_watch: Option<Arc<dyn LoopWatch>>,
}

impl Inner {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum HostPhase {
    Starting,
    Serving,
    /// Takes no new work; ended once its runs end.
    Draining,
}

struct Host {
    key: u64,
    phase: HostPhase,
    pid: Option<u32>,
    writer: Option<Arc<HostWriter>>,
    /// Runs in flight here: wire id -> run id.
    runs: HashMap<u32, u64>,
    born: Instant,
    /// Resident MB when it reported ready.
    ready_rss_mb: u64,
    health: WireHealth,
    warm_left: u32,
    stuck_at_ready: u32,
    /// Health and lower frames received (see `policy::health_allowed`).
    health_frames: u64,
    done_frames: u64,
    last_start: u64,
    /// The run it serves alone (started again after its host ended), if any.
    solo: Option<u64>,
    /// It was started for a run that must run alone (not counted among the hosts the
    /// engine keeps until it has served one).
    for_solo: bool,
    /// Why the supervisor is ending it (`None`: it has not been told to end).
    end: Option<HostEnd>,
    /// Its I/O thread is reaping it: its pid may no longer be signalled.
    reaping: bool,
    shutdown_deadline: Option<Instant>,
    /// Allowances of runs that ended here a moment ago.
    lingering: Lingering,
    /// A run here is well past its wall limit: a replacement is started already.
    suspect: bool,
    /// The persistent sandbox it was started for: it serves that sandbox's runs only and
    /// ends when the sandbox closes (`policy::sandbox_host_pool`).
    sandbox: Option<u64>,
    /// Frames for it sent once it is ready (its sandbox's open, and runs made meanwhile).
    pending: Vec<Vec<u8>>,
    /// Reads its CPU time (once it has a pid).
    cpu: Option<CpuReader>,
    /// Its CPU time (ms) and resident MB when the parent ended it for memory.
    memory_end: Option<(Option<f64>, u64)>,
}

impl Host {
    fn view(&self) -> HostView {
        HostView {
            serving: matches!(self.phase, HostPhase::Serving | HostPhase::Draining)
                && self.end.is_none()
                && self.shutdown_deadline.is_none(),
            draining: self.phase == HostPhase::Draining,
            runs: self.runs.len(),
            warm: self.warm_left,
            last_start: self.last_start,
            solo: self.solo.is_some(),
            dedicated: self.sandbox.is_some(),
        }
    }

    fn kill(&self) {
        if let (Some(pid), false) = (self.pid, self.reaping) {
            // SAFETY: the pid is our unreaped child (a zombie at worst), never another process.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
    }
}

struct Run {
    sink: Arc<dyn EventSink>,
    /// The plan, kept for a restart until something of the run is seen outside.
    plan: Option<Arc<RunPlan>>,
    /// Send the `started` event (the caller's choice; off once it was sent).
    started_event: bool,
    memory_mb: u32,
    wall_time_ms: u64,
    bridge: isolet_core::BridgeLimits,
    stream_console: bool,
    /// The run's `language`: a resolved module of a TypeScript run is stripped.
    language: &'static str,
    /// `maxModules`: the most `resolve` requests its host may send.
    max_modules: u32,
    life: RunState,
    /// The host and wire id it runs under.
    on_host: Option<(u64, u32)>,
    first_started: Option<Instant>,
    attempt_started: Option<Instant>,
    /// Its host's CPU time when it started there (linux), for its stats if the host is
    /// ended for memory under it.
    host_cpu_at_start_ms: Option<f64>,
    deadline: Option<Instant>,
    budget: EventBudget,
    restarts: u32,
    alone: bool,
    started_sent: bool,
    overdue: bool,
    /// Set when it was started again after its host ended: its answer if it cannot be
    /// started again in time.
    lost: Option<Failure>,
    /// A run of a persistent sandbox (pinned to its host, never started again).
    sandbox: Option<SandboxOf>,
}

impl Run {
    fn new(sink: Arc<dyn EventSink>, plan: Arc<RunPlan>, started_event: bool, sandbox: Option<SandboxOf>) -> Run {
        Run {
            sink,
            memory_mb: plan.limits.memory_mb,
            wall_time_ms: plan.limits.wall_time_ms,
            bridge: plan.bridge,
            stream_console: plan.stream_console,
            language: plan.language,
            max_modules: plan.module_limits.max_modules,
            budget: EventBudget::new(plan.bridge, plan.stream_console).with_max_module_requests(plan.module_limits.max_modules),
            plan: Some(plan),
            started_event,
            life: RunState::new(),
            on_host: None,
            first_started: None,
            attempt_started: None,
            host_cpu_at_start_ms: None,
            deadline: None,
            restarts: 0,
            alone: false,
            started_sent: false,
            overdue: false,
            lost: None,
            sandbox,
        }
    }
}

#[derive(Default)]
struct Counters {
    started: u64,
    crashed: u64,
    recycled: BTreeMap<&'static str, u64>,
    crash_reasons: BTreeMap<String, u64>,
    /// Of `started`, hosts started for a persistent sandbox (not replacements).
    sandbox_hosts_started: u64,
    /// Start counts of hosts that ended.
    retired_warm_starts: u64,
    retired_cold_starts: u64,
}

struct State {
    /// The engine's pool over all hosts.
    config: PoolConfig,
    /// Hosts kept running.
    processes: usize,
    per_host: usize,
    host_config: WireStart,
    pool: Pool<u64, ()>,
    runs: HashMap<u64, Run>,
    /// Runs holding a slot and waiting for a host; restarted runs go first.
    unplaced: VecDeque<u64>,
    hosts: Vec<Host>,
    /// Hosts told to end and retired, not reaped yet.
    dying: std::collections::HashSet<u64>,
    /// Hosts that could not even be handed to the spawner thread (none exists).
    unstartable: Vec<u64>,
    next_host: u64,
    next_wire: u32,
    starts_given: u64,
    starts: Starts,
    spawn_not_before: Option<Instant>,
    /// Until when a spare host stands by (`policy::SPARE_AFTER_TROUBLE_MS`).
    trouble_until: Option<Instant>,
    /// Set while no host can be started (after repeated failures): runs that no serving
    /// host can take get this failure at once instead of waiting out the backoff.
    cannot_start: Option<Failure>,
    timer_pending: bool,
    /// Threads waiting on `Inner::changed` (`ready`, `wait_idle`): frames wake it only then.
    waiters: usize,
    /// Run frames held back by `start_on` while `submit` dispatches, sent once the lock is
    /// released (see `send_after_unlock`).
    held: Option<Vec<HeldFrames>>,
    shut: bool,
    invalid_config: Option<String>,
    lockdown: Option<WireLockdown>,
    counters: Counters,
    epoch: Instant,
    me: Weak<Inner>,
    /// Open persistent sandboxes, each on one host.
    sandboxes: HashMap<u64, Arc<ProcessSandbox>>,
    /// Fails queued runs at their deadline (the pool counts in ms from `epoch`).
    timer: Arc<QueueTimer>,
}

/// What a host-side snapshot of an engine reports (`stats().processes`).
#[derive(Debug, Clone, Default)]
pub(crate) struct ProcessStats {
    pub live: usize,
    pub starting: usize,
    pub draining: usize,
    pub started: u64,
    pub crashed: u64,
    pub recycled: BTreeMap<&'static str, u64>,
    pub crash_reasons: BTreeMap<String, u64>,
    pub pids: Vec<u32>,
    pub lockdown: Option<WireLockdown>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Stats {
    pub engine: super::pool::EngineStats,
    pub processes: ProcessStats,
}

/// A host's writer and the frames held back for it.
type HeldFrames = (Arc<HostWriter>, Vec<Vec<u8>>);

fn failure_completion(failure: Failure, wall_time_ms: f64) -> Completion {
    Completion { result: Err(failure), stats: ExecStats { wall_time_ms, ..Default::default() }, logs: Vec::new() }
}

fn shut_down_failure() -> Failure {
    Failure::shut_down()
}

impl ProcessEngine {
    /// `env` identifies the Node environment that owns the engine (see `end_all`).
    /// `processes`: hosts kept running, `config` the pool over all of them.
    /// `loop_watch`: Node's loop, to read hosts' channels on (else their I/O threads do).
    pub(crate) fn new(config: PoolConfig, processes: usize, env: usize, loop_watch: Option<Arc<dyn LoopWatch>>) -> ProcessEngine {
        let processes = processes.clamp(1, config.max_concurrent.max(1));
        let per_host = config.max_concurrent.div_ceil(processes);
        let host_config = WireStart {
            parent_pid: std::process::id(),
            pool: policy::shared_host_pool(config, processes),
            wasm_modules: Vec::new(),
            prelude: None,
            code_cache_bytes: 0,
            prelude_modules: Default::default(),
        };
        let pool = Pool::new(PoolConfig { warm_pool_size: 0, ..config });
        let inner = Arc::new_cyclic(|me: &Weak<Inner>| Inner {
            state: Mutex::new(State {
                timer: {
                    let me = me.clone();
                    QueueTimer::new(Box::new(move || me.upgrade()?.state().expire_queued()))
                },
                config,
                processes,
                per_host,
                host_config,
                pool,
                runs: HashMap::new(),
                unplaced: VecDeque::new(),
                hosts: Vec::new(),
                dying: Default::default(),
                unstartable: Vec::new(),
                next_host: 1,
                next_wire: 1,
                starts_given: 0,
                starts: Starts::default(),
                spawn_not_before: None,
                trouble_until: None,
                cannot_start: None,
                timer_pending: false,
                waiters: 0,
                held: None,
                shut: false,
                invalid_config: None,
                lockdown: None,
                counters: Counters::default(),
                epoch: Instant::now(),
                me: me.clone(),
                sandboxes: HashMap::new(),
            }),
            changed: Condvar::new(),
            loop_watch,
        });
        let mut engines = lock(&ENGINES);
        engines.retain(|(_, e)| e.strong_count() > 0);
        engines.push((env, Arc::downgrade(&inner)));
        ProcessEngine { inner }
    }

    /// The WebAssembly modules every host compiles (checked by the caller).
    pub(crate) fn set_wasm_modules(&self, modules: Vec<(String, Vec<u8>)>) {
        self.inner.state().host_config.wasm_modules = modules;
    }

    /// The prelude every host checks as it starts and runs before each run's code, and
    /// the budget of each host's own compiled-code cache.
    pub(crate) fn set_engine_code(&self, prelude: Option<isolet_core::options::Prelude>, code_cache_bytes: usize) {
        let mut state = self.inner.state();
        let prelude = prelude.unwrap_or_default();
        state.host_config.prelude = prelude.source;
        state.host_config.prelude_modules = prelude.modules;
        state.host_config.code_cache_bytes = code_cache_bytes as u64;
    }

    /// The compiled-code caches of the live hosts, added up (each host keeps its own).
    pub(crate) fn code_cache_stats(&self) -> isolet_core::code_cache::CodeCacheStats {
        let state = self.inner.state();
        let mut total = isolet_core::code_cache::CodeCacheStats::default();
        for h in state.hosts.iter().filter(|h| h.end.is_none()) {
            total.add(&h.health.code_cache);
        }
        total
    }

    /// Starts the hosts (they make their warm isolates as they come up).
    pub(crate) fn warm_up(&self) {
        self.inner.state().ensure_hosts();
    }

    /// Waits until no host is starting; `Err` carries why a host refused the engine's
    /// configuration (a WebAssembly module that does not compile).
    pub(crate) fn ready(&self, timeout: Duration) -> Result<(), String> {
        let deadline = Instant::now() + timeout;
        let mut s = self.inner.state();
        loop {
            if let Some(why) = &s.invalid_config {
                return Err(why.clone());
            }
            if s.shut || !s.hosts.iter().any(|h| h.phase == HostPhase::Starting) {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(());
            }
            s.waiters += 1;
            s = self.inner.changed.wait_timeout(s, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
            s.waiters -= 1;
        }
    }

    /// Admits a run; its events go to `sink` (`started` only if `started_event`).
    pub(crate) fn submit(
        &self,
        id: u64,
        tenant: Tenant,
        plan: Arc<RunPlan>,
        started_event: bool,
        sink: Arc<dyn EventSink>,
    ) -> Arc<ProcessRun> {
        let handle = Arc::new(ProcessRun { id, inner: Arc::downgrade(&self.inner) });
        let mut s = self.inner.state();
        let max_queue_ms = plan.max_queue_ms;
        let run = Run::new(sink.clone(), plan, started_event, None);
        let at = s.admit_at();
        match s.pool.admit(id, tenant, id, max_queue_ms, at) {
            Admission::Refused(_, failure) => {
                drop(s);
                sink.done(failure_completion(failure, 0.0));
                return handle;
            }
            Admission::QueuedInPlaceOf(out, failure) => {
                // Another tenant's newest queued run gave its place up (the queue is full).
                s.runs.insert(id, run);
                s.arm_timer();
                s.fail(out, failure);
            }
            Admission::Start(_) => {
                s.runs.insert(id, run);
                s.take_slot(id);
            }
            Admission::Queued => {
                s.runs.insert(id, run);
                s.arm_timer();
            }
        }
        s.held = Some(Vec::new());
        s.dispatch();
        let held = s.held.take().unwrap_or_default();
        send_after_unlock(s, held);
        handle
    }

    pub(crate) fn stats(&self) -> Stats {
        self.inner.state().stats()
    }

    /// Stops accepting work; aborts queued runs; asks every host to end (their runs
    /// end aborted), killing those that do not within `SHUTDOWN_GRACE_MS`.
    pub(crate) fn shutdown(&self) {
        self.inner.state().shutdown();
        self.inner.changed.notify_all();
    }

    /// Waits until every host has ended, at most `timeout` (then kills them all).
    pub(crate) fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut s = self.inner.state();
        loop {
            if s.hosts.is_empty() && s.dying.is_empty() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                let keys: Vec<u64> = s.hosts.iter().map(|h| h.key).collect();
                for key in keys {
                    s.end_host(key, HostEnd::Shutdown);
                }
                return false;
            }
            s.waiters += 1;
            s = self.inner.changed.wait_timeout(s, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
            s.waiters -= 1;
        }
    }
}

/// The caller's handle on one run: replies, answers, abort.
pub(crate) struct ProcessRun {
    id: u64,
    inner: Weak<Inner>,
}

impl ProcessRun {
    pub(crate) fn reply(&self, reply: HostReply) {
        let Some(inner) = self.inner.upgrade() else { return };
        let call_id = match &reply {
            HostReply::Fulfill { call_id, .. } | HostReply::Reject { call_id, .. } => *call_id,
        };
        let mut s = inner.state();
        let Some(run) = s.runs.get_mut(&self.id) else { return };
        let Some((key, wire)) = run.on_host else { return };
        // A reply to a call not in flight (late, or never made) is dropped.
        if !run.budget.answered(call_id) {
            return;
        }
        let Some(writer) = s.host(key).and_then(|h| h.writer.clone()) else { return };
        // In line before the lock is released, sent after: the woken host may take this
        // CPU at once, and the I/O thread must not wait for the lock meanwhile.
        let queue = writer.queue();
        drop(s);
        match reply {
            HostReply::Fulfill { value, .. } => {
                let head = frame::header_only(Kind::Fulfill, wire, call_id, value.len());
                writer.send_owned_queued(queue, &head, value);
            }
            HostReply::Reject { name, message, .. } => writer.send_queued(queue, &[&frame::encode_reject(wire, call_id, &name, &message)]),
        }
    }

    /// Answers data request `id`; false when the run has no such request waiting.
    pub(crate) fn answer(&self, answer_id: u32, answer: DataAnswer) -> bool {
        let Some(inner) = self.inner.upgrade() else { return false };
        let mut s = inner.state();
        let Some(run) = s.runs.get_mut(&self.id) else { return false };
        let Some((key, wire)) = run.on_host else { return false };
        if !run.budget.take_data_request(answer_id) {
            return false;
        }
        let Some(writer) = s.host(key).and_then(|h| h.writer.clone()) else { return false };
        match answer {
            DataAnswer::Value(v) => {
                let head = frame::encode_answer_head(wire, answer_id, Some(v.len()), None);
                writer.send_owned(&head, v);
            }
            DataAnswer::Error(e) => writer.send(&[&frame::encode_answer_head(wire, answer_id, None, Some(&e))]),
            DataAnswer::Terminated => writer.send(&[&frame::encode_answer_head(wire, answer_id, None, Some("terminated"))]),
        }
        true
    }

    pub(crate) fn abort(&self) {
        let Some(inner) = self.inner.upgrade() else { return };
        let mut s = inner.state();
        s.abort(self.id);
    }
}

impl State {
    fn host(&self, key: u64) -> Option<&Host> {
        self.hosts.iter().find(|h| h.key == key)
    }

    fn host_mut(&mut self, key: u64) -> Option<&mut Host> {
        self.hosts.iter_mut().find(|h| h.key == key)
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The moment a run asks for a slot (stuck threads are each host's to count).
    fn admit_at(&self) -> AdmitAt {
        AdmitAt { now_ms: self.now_ms(), quarantined: 0, max_quarantined: usize::MAX }
    }

    /// Wakes the timer by the pool's next queue deadline.
    fn arm_timer(&self) {
        if let Some(deadline) = self.pool.next_queue_deadline() {
            self.timer.arm(self.epoch + Duration::from_millis(deadline));
        }
    }

    /// Fails the queued runs past their deadline; the next deadline (the timer's call).
    fn expire_queued(&mut self) -> Option<Instant> {
        for (id, failure) in self.pool.expire_queued(self.now_ms()) {
            self.fail(id, failure);
        }
        self.pool.next_queue_deadline().map(|d| self.epoch + Duration::from_millis(d))
    }

    /// Run `id` got a slot in the pool: a one-shot run waits for a host, a sandbox's run
    /// goes to its sandbox's host.
    fn take_slot(&mut self, id: u64) {
        let Some(run) = self.runs.get_mut(&id) else { return };
        if run.life.admit().is_err() {
            return;
        }
        if run.sandbox.is_some() {
            self.start_sandbox_run(id);
        } else {
            self.unplaced.push_back(id);
        }
    }

    /// Sends `frame` to a host by `w`, or holds it back while `submit` dispatches (see
    /// `send_after_unlock`).
    fn send_or_hold(&mut self, w: Arc<HostWriter>, frame: Vec<u8>) {
        match self.held.as_mut() {
            Some(held) => match held.iter_mut().find(|(o, _)| Arc::ptr_eq(o, &w)) {
                Some((_, frames)) => frames.push(frame),
                None => held.push((w, vec![frame])),
            },
            None => w.send(&[&frame]),
        }
    }

    /// Ends run `id` with `completion` (its only answer), gives its slot back.
    fn finish(&mut self, id: u64, mut completion: Completion) {
        let Some(mut run) = self.runs.remove(&id) else { return };
        if let Some((key, wire)) = run.on_host.take() {
            let now = self.now_ms();
            if let Some(h) = self.host_mut(key) {
                h.runs.remove(&wire);
                if h.solo == Some(id) {
                    h.solo = None;
                }
                h.lingering.ended(run.memory_mb, now);
            }
        }
        self.unplaced.retain(|&u| u != id);
        let ending = if run.life.phase() == isolet_core::run_state::Phase::Queued { Ending::NotStarted } else { Ending::Completed };
        if run.life.finish(ending).is_err() {
            return;
        }
        if let Some(first) = run.first_started {
            // A run started again answers with its whole wall time.
            let total = first.elapsed().as_secs_f64() * 1000.0;
            if completion.stats.wall_time_ms < total && run.restarts > 0 {
                completion.stats.wall_time_ms = total;
            }
        }
        // A sandbox's run held a slot of its own, like a one-shot run.
        self.pool.finished(id, completion.result.as_ref().err().map(|f| f.kind), false);
        run.sink.done(completion);
    }

    fn fail(&mut self, id: u64, failure: Failure) {
        self.fail_with(id, failure, None);
    }

    /// As `fail`, with the run's CPU time and heap when they are known from outside it
    /// (`policy::memory_end_stats`).
    fn fail_with(&mut self, id: u64, failure: Failure, figures: Option<(f64, u64)>) {
        let wall = self.runs.get(&id).and_then(|r| r.first_started).map(|t| t.elapsed().as_secs_f64() * 1000.0).unwrap_or(0.0);
        let mut completion = failure_completion(failure, wall);
        if let Some((cpu_time_ms, heap_bytes)) = figures {
            completion.stats.cpu_time_ms = cpu_time_ms;
            completion.stats.heap_used_bytes = heap_bytes as f64;
            completion.stats.heap_peak_bytes = heap_bytes as f64;
        }
        self.finish(id, completion);
    }

    fn abort(&mut self, id: u64) {
        if self.pool.remove_queued(id).is_some() {
            self.fail(id, Failure::aborted());
            self.dispatch();
            return;
        }
        let Some(run) = self.runs.get_mut(&id) else { return };
        run.life.request_stop(StopReason::Aborted);
        match run.on_host {
            None => {
                self.fail(id, Failure::aborted());
                self.dispatch();
            }
            Some((key, wire)) => {
                if let Some(w) = self.host(key).and_then(|h| h.writer.clone()) {
                    w.send(&[&frame::header_only(Kind::Abort, wire, 0, 0)]);
                }
            }
        }
    }

    /// Keeps `processes` hosts starting or serving (replacements rate-limited).
    fn ensure_hosts(&mut self) {
        if self.shut || self.invalid_config.is_some() {
            return;
        }
        if let Some(t) = self.spawn_not_before {
            let now = Instant::now();
            if now < t {
                self.call_later(t - now);
                return;
            }
        }
        let live = self
            .hosts
            .iter()
            .filter(|h| h.end.is_none() && h.phase != HostPhase::Draining && !h.suspect && !h.for_solo && h.sandbox.is_none())
            .count();
        for _ in live..self.host_target() {
            let now = self.now_ms();
            let shared_started = self.counters.started - self.counters.sandbox_hosts_started;
            if shared_started >= self.processes as u64 && !self.starts.may_replace(now) {
                self.call_later(Duration::from_millis(policy::RESTART_PERIOD_MS));
                return;
            }
            self.spawn_host();
        }
    }

    fn host_target(&self) -> usize {
        policy::host_target(self.processes, self.trouble_until.is_some_and(|t| Instant::now() < t))
    }

    /// Calls `dispatch` again after `delay` (one pending call at a time).
    fn call_later(&mut self, delay: Duration) {
        if std::mem::replace(&mut self.timer_pending, true) {
            return;
        }
        let me = self.me.clone();
        let spawned = std::thread::Builder::new().name("isolet-host-timer".into()).stack_size(64 * 1024).spawn(move || {
            std::thread::sleep(delay);
            if let Some(inner) = me.upgrade() {
                let mut s = inner.state();
                s.timer_pending = false;
                s.dispatch();
            }
        });
        if spawned.is_err() {
            self.timer_pending = false;
        }
    }

    fn spawn_host(&mut self) -> u64 {
        let start = self.host_config.encode();
        self.spawn_host_with(start, None)
    }

    /// Starts a host of its own for persistent sandbox `sandbox` (one slot, no warm isolates).
    fn spawn_sandbox_host(&mut self, sandbox: u64) -> u64 {
        let mut config = self.host_config.clone();
        config.pool = policy::sandbox_host_pool(self.config);
        self.counters.sandbox_hosts_started += 1;
        self.spawn_host_with(config.encode(), Some(sandbox))
    }

    fn spawn_host_with(&mut self, start: Vec<u8>, sandbox: Option<u64>) -> u64 {
        let key = self.next_host;
        self.next_host += 1;
        self.counters.started += 1;
        self.hosts.push(Host {
            key,
            phase: HostPhase::Starting,
            pid: None,
            writer: None,
            runs: HashMap::new(),
            born: Instant::now(),
            ready_rss_mb: 0,
            health: WireHealth::default(),
            warm_left: 0,
            stuck_at_ready: 0,
            health_frames: 0,
            done_frames: 0,
            last_start: 0,
            solo: None,
            for_solo: false,
            end: None,
            reaping: false,
            shutdown_deadline: None,
            lingering: Lingering::default(),
            suspect: false,
            sandbox,
            pending: Vec::new(),
            cpu: None,
            memory_end: None,
        });
        let me = self.me.clone();
        if !spawner().run(Box::new(move || start_host(me, key, start))) {
            // Settled later, never here: the caller holds the state lock and may be in a loop.
            self.unstartable.push(key);
            self.call_later(Duration::from_millis(1));
        }
        key
    }

    fn host_views(&self) -> Vec<HostView> {
        self.hosts.iter().map(Host::view).collect()
    }

    /// Gives runs holding a slot a host, and slots to queued runs.
    fn dispatch(&mut self) {
        for key in std::mem::take(&mut self.unstartable) {
            self.host_exited(key, None, "", Some("no thread to start sandbox hosts".into()));
        }
        self.ensure_hosts();
        while let Some(id) = self.pool.next_to_start() {
            self.take_slot(id);
        }
        let mut i = 0;
        let mut waiting_alone = 0;
        while i < self.unplaced.len() {
            let id = self.unplaced[i];
            let Some(run) = self.runs.get_mut(&id) else {
                self.unplaced.remove(i);
                continue;
            };
            let alone = run.alone;
            // A run started again gets what is left of its wall limit, counted from its
            // first start; with too little left it fails with its host's end.
            if let (Some(lost), Some(first)) = (run.lost.clone(), run.first_started) {
                match policy::restart_wall_ms(run.wall_time_ms, first.elapsed().as_millis() as u64) {
                    Some(left) => {
                        if let Some(plan) = run.plan.as_mut() {
                            // A copy only for a run that is started again (rare).
                            Arc::make_mut(plan).limits.wall_time_ms = left;
                        }
                    }
                    None => {
                        self.unplaced.remove(i);
                        self.fail(id, lost);
                        continue;
                    }
                }
            }
            let views = self.host_views();
            let placed = policy::place(&views, self.per_host, alone)
                .or_else(|| policy::place_overflow(&views, self.config.max_concurrent, alone))
                .or_else(|| policy::place_last_resort(&views, self.config.max_concurrent, alone));
            match placed {
                Some(h) => {
                    self.unplaced.remove(i);
                    self.start_on(h, id);
                }
                None if alone => {
                    waiting_alone += 1;
                    i += 1;
                }
                None => break,
            }
        }
        if !self.shut && self.invalid_config.is_none() {
            let starting = self.hosts.iter().filter(|h| h.for_solo && h.phase == HostPhase::Starting && h.end.is_none()).count();
            for _ in 0..policy::solo_hosts_to_start(waiting_alone, starting) {
                // Hosts for runs started again are replacements too: a stream of
                // host-ending runs gets no more starts than the restart rate.
                if !self.starts.may_replace(self.now_ms()) {
                    self.call_later(Duration::from_millis(policy::RESTART_PERIOD_MS));
                    break;
                }
                let key = self.spawn_host();
                if let Some(h) = self.host_mut(key) {
                    h.for_solo = true;
                }
            }
        }
        self.fail_if_no_host_can_start();
    }

    /// While no host can be started and none serves, runs waiting for one fail now.
    fn fail_if_no_host_can_start(&mut self) {
        let Some(failure) = self.cannot_start.clone() else { return };
        if self.hosts.iter().any(|h| h.end.is_none() && h.phase == HostPhase::Serving && h.sandbox.is_none()) {
            return;
        }
        let (queued, _) = self.pool_drain_queued();
        for id in queued.into_iter().chain(std::mem::take(&mut self.unplaced)) {
            self.fail(id, failure.clone());
        }
    }

    fn start_on(&mut self, host_index: usize, id: u64) {
        let wire = self.next_wire;
        self.next_wire = if wire == u32::MAX { 1 } else { wire + 1 };
        self.starts_given += 1;
        let given = self.starts_given;
        let Some(run) = self.runs.get_mut(&id) else { return };
        let Some(plan) = run.plan.as_ref() else {
            // Not reachable: only runs nothing was seen of wait for a host.
            self.fail(id, Failure::new(ErrorKind::Internal, "a run without a plan waited for a host"));
            return;
        };
        let frame = frame::encode_run(wire, plan, run.started_event);
        let now = Instant::now();
        run.on_host = Some((self.hosts[host_index].key, wire));
        run.first_started.get_or_insert(now);
        run.attempt_started = Some(now);
        run.host_cpu_at_start_ms = self.hosts[host_index].cpu.as_ref().and_then(CpuReader::ms);
        run.deadline = Some(now + Duration::from_millis(policy::run_deadline_ms(plan.limits.wall_time_ms)));
        let alone = run.alone;
        let h = &mut self.hosts[host_index];
        h.runs.insert(wire, id);
        h.warm_left = h.warm_left.saturating_sub(1);
        h.last_start = given;
        if alone {
            h.solo = Some(id);
        }
        h.for_solo = false;
        let Some(w) = h.writer.clone() else { return };
        self.send_or_hold(w, frame);
    }

    /// Tells host `key` to end for `end` (kept if it was told already): kills it.
    /// Tells host `key` to end for `end` (kept if it was told already): kills it, and
    /// settles its runs now, not once it is reaped: a dying host can take long to go (a
    /// thread of it at idle priority on a busy machine holds up its exit).
    fn end_host(&mut self, key: u64, end: HostEnd) {
        let Some(h) = self.host_mut(key) else { return };
        if h.end.is_none() {
            h.end = Some(end);
        }
        if let Some(w) = &h.writer {
            w.close();
        }
        h.kill();
        // A host that never got ready is judged on its exit (its last words say why).
        if h.phase != HostPhase::Starting {
            let end = h.end.clone().unwrap_or(HostEnd::Shutdown);
            self.dying.insert(key);
            self.retire(key, end, "", "");
        }
    }

    fn shutdown(&mut self) {
        if self.shut {
            return;
        }
        self.close_sandboxes(isolet_core::sandbox::CloseReason::Shutdown);
        self.shut = true;
        let (queued, _active) = self.pool.shutdown();
        for id in queued {
            self.fail(id, shut_down_failure());
        }
        for id in std::mem::take(&mut self.unplaced) {
            self.fail(id, shut_down_failure());
        }
        // The runs left are on hosts: if a host ends before its run answers, the run is
        // answered as shut down (see `retire`), whatever the host's end.
        for run in self.runs.values_mut() {
            run.life.request_stop(StopReason::Shutdown);
        }
        let grace = Instant::now() + Duration::from_millis(policy::SHUTDOWN_GRACE_MS);
        let keys: Vec<(u64, HostPhase)> = self.hosts.iter().map(|h| (h.key, h.phase)).collect();
        for (key, phase) in keys {
            if phase == HostPhase::Starting {
                self.end_host(key, HostEnd::Shutdown);
                continue;
            }
            let Some(h) = self.host_mut(key) else { continue };
            h.phase = HostPhase::Draining;
            if h.end.is_none() {
                h.end = Some(HostEnd::Shutdown);
            }
            h.shutdown_deadline = Some(grace);
            if let Some(w) = &h.writer {
                w.send(&[&frame::header_only(Kind::Shutdown, 0, 0, 0)]);
            }
        }
    }

    /// The largest payload host `key` may send in a frame with `h`'s header.
    fn frame_limit(&self, key: u64, h: &Header) -> Result<usize, String> {
        let Some(host) = self.host(key) else { return Err("a frame of a host that ended".into()) };
        if h.kind == Kind::SandboxClosed {
            return Ok(policy::MAX_CONTROL_FRAME_BYTES);
        }
        if h.run_id == 0 {
            return match h.kind {
                Kind::Health | Kind::Ready | Kind::Invalid | Kind::Bye | Kind::Lower => Ok(policy::MAX_CONTROL_FRAME_BYTES),
                _ => Err(format!("a {:?} frame of no run", h.kind)),
            };
        }
        let Some(id) = host.runs.get(&h.run_id) else { return Err("a frame for no run in flight".into()) };
        let run = self.runs.get(id).ok_or("a frame for no run in flight")?;
        Ok(policy::frame_limit(&run.bridge))
    }

    /// What a frame's values are counted against (`HostFrames::hand_over` counts a big one
    /// off the state lock): `None` for a frame that is not a host call or result of a run
    /// in flight here.
    fn count_bounds(&self, key: u64, h: &Header) -> Option<CountBounds> {
        let id = self.host(key)?.runs.get(&h.run_id)?;
        let run = self.runs.get(id)?;
        match h.kind {
            Kind::HostCall => Some(CountBounds { values: run.budget.args_bounds(), log_entries: 0, log_bytes: 0 }),
            Kind::Done => Some(CountBounds {
                values: crate::isolate::thread::output_bounds(&run.bridge),
                log_entries: run.bridge.max_log_entries,
                log_bytes: run.bridge.max_log_bytes,
            }),
            _ => None,
        }
    }

    /// A frame from host `key`; `Err` ends the host for breaking the protocol. `pre`: its
    /// host-call arguments or result counted already (see `HostFrames::hand_over`).
    fn on_frame(&mut self, key: u64, h: Header, payload: Vec<u8>, rss: &RssReader, pre: Option<Precount>) -> Result<(), String> {
        let bad = |e: frame::FrameError| e.to_string();
        match h.kind {
            Kind::Ready => {
                let ready = WireReady::decode(&payload).map_err(bad)?;
                let rss_mb = rss.mb().unwrap_or(0);
                let Some(host) = self.host_mut(key) else { return Ok(()) };
                if host.phase != HostPhase::Starting {
                    return Err("a second ready".into());
                }
                host.phase = HostPhase::Serving;
                host.ready_rss_mb = rss_mb;
                host.health = ready.health;
                host.stuck_at_ready = ready.health.stuck;
                host.warm_left = ready.health.warm;
                // A sandbox's host: its open (then any run made meanwhile) only now, so
                // nothing of the sandbox reaches the host before it has locked itself down.
                let pending = std::mem::take(&mut host.pending);
                if let Some(w) = host.writer.clone() {
                    let parts: Vec<&[u8]> = pending.iter().map(Vec::as_slice).collect();
                    if !parts.is_empty() {
                        w.send(&parts);
                    }
                }
                self.lockdown.get_or_insert(ready.lockdown);
                self.starts.ready();
                self.cannot_start = None;
                self.dispatch();
                return Ok(());
            }
            Kind::Invalid => {
                // Only before ready: no sandboxed code has run in the host yet.
                if self.host(key).is_some_and(|h| h.phase != HostPhase::Starting) {
                    return Err("an invalid frame after ready".into());
                }
                let why = frame::decode_invalid(&payload).map_err(bad)?.to_string();
                self.invalid_config.get_or_insert(why);
                self.end_host(key, HostEnd::Shutdown);
                return Ok(());
            }
            Kind::Bye => return Ok(()),
            Kind::SandboxClosed => {
                // Counted like health frames: a compromised host cannot flood them either.
                let Some(host) = self.host_mut(key) else { return Ok(()) };
                host.health_frames += 1;
                if !policy::health_allowed(host.health_frames, host.done_frames, host.born.elapsed().as_millis() as u64) {
                    return Err("more sandbox-closed frames than a host sends".into());
                }
                let reason = frame::decode_sandbox_closed(&payload).map_err(bad)?;
                self.sandbox_closed_on_host(key, h.run_id, reason);
                return Ok(());
            }
            Kind::Lower | Kind::Health => {
                // A compromised host could flood these to take this thread's time.
                let Some(host) = self.host_mut(key) else { return Ok(()) };
                host.health_frames += 1;
                if !policy::health_allowed(host.health_frames, host.done_frames, host.born.elapsed().as_millis() as u64) {
                    return Err("more health frames than a host sends".into());
                }
                let pid = host.pid;
                if h.kind == Kind::Health {
                    self.note_health(key, WireHealth::decode(&payload).map_err(bad)?);
                    return Ok(());
                }
                // Its own threads only (checked against its task list): lowering them harms
                // no one but the host. Each is a thread stuck at full priority otherwise.
                for tid in frame::decode_lower(&payload).map_err(bad)? {
                    if let Some(pid) = pid {
                        crate::limits::quarantine::lower_thread_of(pid, tid);
                    }
                }
                return Ok(());
            }
            _ => {}
        }
        let id = *self.host(key).and_then(|host| host.runs.get(&h.run_id)).ok_or("a frame for no run in flight")?;
        let frame_bytes = payload.len() + frame::HEADER_BYTES;
        let run = self.runs.get_mut(&id).ok_or("a frame for no run in flight")?;
        let over = |e: policy::OverBudget| e.0.to_string();
        match h.kind {
            Kind::Started => {
                run.budget.started().map_err(over)?;
                if !std::mem::replace(&mut run.started_sent, true) {
                    run.sink.started();
                }
            }
            Kind::Console => {
                run.budget.console(frame_bytes).map_err(over)?;
                let (level, message) = frame::decode_console(&payload).map_err(bad)?;
                run.plan = None;
                run.sink.console(level, message);
            }
            Kind::HostCall => {
                let (name, at) = frame::decode_host_call(&payload).map_err(bad)?;
                run.budget.host_call(h.call_id, payload.len() - at).map_err(over)?;
                match pre {
                    Some(counted) => run.budget.host_call_counted(h.call_id, counted).map_err(over)?,
                    None => run.budget.host_call_values(h.call_id, &payload[at..]).map_err(over)?,
                }
                let name = name.to_string();
                let mut args = payload;
                args.drain(..at);
                run.plan = None;
                run.sink.host_call(h.call_id, &name, args);
            }
            Kind::ModuleRequest => {
                // Counted and awaited like a data request (its answer is an `Answer` frame).
                run.budget.module_request(h.call_id, frame_bytes).map_err(over)?;
                let (key, referrer) = frame::decode_module_request(&payload).map_err(bad)?;
                let typescript = isolet_core::modules::is_typescript(key, run.language);
                let (key, referrer) = (key.to_string(), referrer.to_string());
                run.plan = None;
                run.sink.module_request(h.call_id, &key, &referrer, typescript);
            }
            Kind::DataRequest => {
                run.budget.data_request(h.call_id, frame_bytes).map_err(over)?;
                let key_text = std::str::from_utf8(&payload).map_err(|_| "a data key that is not UTF-8".to_string())?;
                run.plan = None;
                run.sink.data_request(h.call_id, key_text);
            }
            Kind::Done => {
                let (done, at) = WireDone::decode(&payload, run.bridge.max_log_entries, run.bridge.max_log_bytes).map_err(bad)?;
                let s = done.stats;
                let result = match done.result {
                    // Counted before Node's thread builds it: the host's isolate did, unless
                    // the host is compromised (isolet-core `value_count`).
                    Ok(()) => match pre
                        .unwrap_or_else(|| isolet_core::tally(&payload[at..], crate::isolate::thread::output_bounds(&run.bridge)))
                    {
                        Ok(_) => {
                            let mut out = payload;
                            out.drain(..at);
                            Ok(out)
                        }
                        Err(isolet_core::CountError::TooMany { .. }) => Err(Failure::too_many_output_values(run.bridge.max_output_values)),
                        Err(isolet_core::CountError::TooCostly { .. }) => Err(isolet_core::limits::too_costly_output(
                            crate::isolate::thread::over_budget_cost(&payload[at..]),
                            run.bridge.max_output_bytes,
                        )),
                        Err(e) => Err(Failure::new(ErrorKind::Runtime, format!("The result could not be copied out of the sandbox: {e}"))),
                    },
                    Err(f) => Err(f),
                };
                let completion = Completion {
                    result,
                    stats: ExecStats {
                        wall_time_ms: s.wall_time_ms,
                        cpu_time_ms: s.cpu_time_ms,
                        heap_used_bytes: s.heap_used_bytes,
                        heap_peak_bytes: s.heap_peak_bytes,
                        host_calls: s.host_calls,
                        unhandled_rejections: s.unhandled_rejections,
                    },
                    logs: done.logs,
                };
                if let Some(host) = self.host_mut(key) {
                    host.done_frames += 1;
                }
                self.finish(id, completion);
                self.note_health(key, done.health);
                self.after_run_left(key);
                self.dispatch();
            }
            other => return Err(format!("a {other:?} frame from a host")),
        }
        Ok(())
    }

    /// A run left host `key`: a draining host with none left is ended, and so is an idle
    /// one beyond the hosts the engine keeps (a replacement that came up for a host that
    /// then turned out well).
    fn after_run_left(&mut self, key: u64) {
        let Some(h) = self.host(key) else { return };
        if !h.runs.is_empty() {
            return;
        }
        // A draining host ends even with sandboxes open (they are lost): it holds a thread
        // that ignored termination.
        if h.phase == HostPhase::Draining {
            self.end_host(key, HostEnd::Stuck);
            return;
        }
        // A sandbox's own host ends with its sandbox, once the sandbox's last run answered.
        if let Some(sandbox) = h.sandbox {
            if !self.sandboxes.contains_key(&sandbox) && policy::end_sandbox_host_now(h.runs.len()) {
                self.end_host(key, HostEnd::SandboxClosed);
            }
            return;
        }
        let suspect_elsewhere = self.hosts.iter().any(|o| o.suspect && o.end.is_none());
        let serving = self.hosts.iter().filter(|o| o.end.is_none() && o.phase != HostPhase::Draining && o.sandbox.is_none()).count();
        if h.phase == HostPhase::Serving && !h.suspect && !suspect_elsewhere && serving > self.host_target() {
            self.end_host(key, HostEnd::Surplus);
        }
    }

    fn note_health(&mut self, key: u64, health: WireHealth) {
        let warm_cap = self.host_config.pool.warm_pool_size as u32;
        let Some(host) = self.host_mut(key) else { return };
        host.health = health;
        // As reported by the host (untrusted), but never more than it was configured
        // with: a host claiming warm isolates would otherwise win every placement.
        host.warm_left = health.warm.min(warm_cap);
        let stuck = health.stuck > host.stuck_at_ready && host.phase == HostPhase::Serving && host.end.is_none();
        if !stuck {
            return;
        }
        // A thread ignored termination: only ending the process reclaims it.
        let neighbours: Vec<u64> = host.runs.values().copied().collect();
        *self.counters.recycled.entry("stuck").or_insert(0) += 1;
        match policy::stuck_verdict(neighbours.len()) {
            StuckVerdict::EndNow => self.end_host(key, HostEnd::Stuck),
            StuckVerdict::Drain => {
                if let Some(h) = self.host_mut(key) {
                    h.phase = HostPhase::Draining;
                }
                self.dispatch();
            }
        }
    }

    /// A poll of host `key`: deadlines, memory, start and shutdown timeouts (and runs
    /// waiting to be started again whose time ran out, on any host's poll).
    fn tick(&mut self, key: u64, rss_mb: Option<u64>) {
        if self.unplaced.iter().any(|id| self.runs.get(id).is_some_and(|r| r.lost.is_some())) {
            self.dispatch();
        }
        let Some(host) = self.host(key) else { return };
        if host.end.is_some() {
            if host.shutdown_deadline.is_some_and(|t| Instant::now() >= t) {
                host.kill();
            }
            return;
        }
        if host.phase == HostPhase::Starting {
            if host.born.elapsed() >= Duration::from_millis(policy::START_TIMEOUT_MS) {
                self.end_host(key, HostEnd::StartTimeout);
            }
            return;
        }
        let now = Instant::now();
        let suspect = host.runs.values().filter_map(|id| self.runs.get(id)).any(|r| {
            let elapsed = r.attempt_started.map(|t| t.elapsed().as_millis() as u64).unwrap_or(0);
            let wall = r.plan.as_ref().map_or(r.wall_time_ms, |p| p.limits.wall_time_ms);
            policy::suspect(elapsed, wall)
        });
        if suspect != host.suspect {
            if let Some(h) = self.host_mut(key) {
                h.suspect = suspect;
            }
            if suspect {
                self.ensure_hosts();
            }
        }
        let Some(host) = self.host(key) else { return };
        let overdue = host.runs.values().copied().find(|id| self.runs.get(id).and_then(|r| r.deadline).is_some_and(|d| now >= d));
        if let Some(id) = overdue {
            if let Some(r) = self.runs.get_mut(&id) {
                r.overdue = true;
            }
            self.end_host(key, HostEnd::Overdue);
            return;
        }
        let mut in_flight: Vec<u32> = host.runs.values().filter_map(|id| self.runs.get(id)).map(|r| r.memory_mb).collect();
        // An open sandbox keeps its heap between runs.
        in_flight.extend(self.sandboxes.values().filter(|sb| sb.host == key && sb.is_open()).map(|sb| sb.memory_mb));
        let now_ms = self.now_ms();
        let per_host = self.per_host;
        let Some(host) = self.host_mut(key) else { return };
        let ready_rss = host.ready_rss_mb;
        let budget = policy::host_budget_mb(ready_rss, host.lingering.current(now_ms, per_host).chain(in_flight));
        if let Some(rss) = rss_mb {
            if rss > budget {
                host.memory_end = Some((host.cpu.as_ref().and_then(CpuReader::ms), rss));
                self.end_host(key, HostEnd::Memory { rss_mb: rss, budget_mb: budget });
            }
        }
    }

    fn poll_period(&self, key: u64) -> u64 {
        match self.host(key) {
            Some(h) if h.phase == HostPhase::Starting || h.end.is_some() => policy::POLL_BUSY_MS * 5,
            Some(h) => policy::poll_period_ms(h.runs.len()),
            None => policy::POLL_BUSY_MS,
        }
    }

    /// Host `key` is gone (reaped, or never started: `spawn_error`): answer or restart
    /// its runs, count it, replace it.
    fn host_exited(&mut self, key: u64, status: Option<std::process::ExitStatus>, stderr_tail: &str, spawn_error: Option<String>) {
        if self.dying.remove(&key) {
            return; // retired when it was told to end
        }
        let Some(host) = self.host(key) else { return };
        let reason = match (&spawn_error, status) {
            (Some(e), _) => format!("spawn failed: {e}"),
            (None, Some(st)) => exit_reason(st),
            (None, None) => "exit code unknown".to_string(),
        };
        let end = match host.end.clone() {
            Some(end) => end,
            None => {
                if spawn_error.is_none() {
                    self.counters.crashed += 1;
                    *self.counters.crash_reasons.entry(reason.clone()).or_insert(0) += 1;
                }
                HostEnd::Crash { reason: reason.clone(), oom: policy::looks_like_oom(stderr_tail) }
            }
        };
        self.retire(key, end, &reason, stderr_tail);
    }

    /// Host `key` is gone for `end` (or going: killed, not reaped yet): counts it, answers
    /// or starts again its runs, replaces it.
    fn retire(&mut self, key: u64, end: HostEnd, reason: &str, stderr_tail: &str) {
        let Some(pos) = self.hosts.iter().position(|h| h.key == key) else { return };
        let host = self.hosts.remove(pos);
        if policy::spare_after(&end, host.sandbox.is_some()) {
            self.trouble_until = Some(Instant::now() + Duration::from_millis(policy::SPARE_AFTER_TROUBLE_MS));
        }
        if let Some(k) = end.recycled_key() {
            // `stuck` was counted when the stuck thread was reported.
            if k != "stuck" {
                *self.counters.recycled.entry(k).or_insert(0) += 1;
            }
        }
        self.counters.retired_warm_starts = self.counters.retired_warm_starts.saturating_add(host.health.warm_starts);
        self.counters.retired_cold_starts = self.counters.retired_cold_starts.saturating_add(host.health.cold_starts);
        let suspects = host.runs.len() + host.lingering.recently_ended(self.now_ms());
        self.sandboxes_lost(key);
        let mut lost: Vec<(u32, u64)> = host.runs.into_iter().collect();
        lost.sort_unstable();
        for (_, id) in lost {
            let Some(run) = self.runs.get_mut(&id) else { continue };
            run.on_host = None;
            let view = LostRun {
                seen_outside: run.plan.is_none() || run.budget.seen_outside(),
                overdue: run.overdue,
                restarts: run.restarts,
                wall_time_ms: run.wall_time_ms,
                elapsed_ms: run.first_started.map(|t| t.elapsed().as_millis() as u64).unwrap_or(0),
                alone: run.alone,
            };
            // A run the caller stopped (abort, shutdown) is answered as such, never started again.
            if let Some(reason) = run.life.stop_reason() {
                let failure = match reason {
                    StopReason::Shutdown => shut_down_failure(),
                    _ => Failure::aborted(),
                };
                self.fail(id, failure);
                continue;
            }
            // What it cost, if the parent ended its host for memory: the host's figures.
            let figures = match (host.memory_end, run.host_cpu_at_start_ms) {
                (Some((Some(cpu_end), rss)), Some(cpu_start)) => Some(policy::memory_end_stats(cpu_start, cpu_end, rss, host.ready_rss_mb)),
                _ => None,
            };
            // A sandbox's run is never started again elsewhere: its context is gone.
            if run.sandbox.is_some() {
                self.fail_with(id, policy::lost_run_failure(&end, view), figures);
                continue;
            }
            match policy::lost_run_verdict(&end, view, suspects) {
                LostVerdict::Restart { wall_time_ms, alone } => {
                    run.restarts += 1;
                    run.alone = alone;
                    run.overdue = false;
                    run.budget = EventBudget::new(run.bridge, run.stream_console).with_max_module_requests(run.max_modules);
                    if let Some(plan) = run.plan.as_mut() {
                        Arc::make_mut(plan).limits.wall_time_ms = wall_time_ms;
                    }
                    // It already said it started.
                    run.started_event = false;
                    run.lost = Some(policy::lost_run_failure(&end, view));
                    self.unplaced.push_front(id);
                }
                LostVerdict::Fail(f) => self.fail_with(id, f, figures),
            }
        }
        // A sandbox's host ended while starting because its sandbox closed did not fail to start.
        if host.phase == HostPhase::Starting && !self.shut && self.invalid_config.is_none() && end != HostEnd::SandboxClosed {
            if let StartVerdict::GiveUp { after_ms } = self.starts.failed() {
                self.cannot_start = Some(policy::start_failure(reason, stderr_tail));
                self.spawn_not_before = Some(Instant::now() + Duration::from_millis(after_ms));
            }
        }
        self.dispatch();
    }

    /// Takes every queued one-shot run out of the pool's queue (no host can be started;
    /// a sandbox's run waits for its own host, which serves).
    fn pool_drain_queued(&mut self) -> (Vec<u64>, ()) {
        let mut out = Vec::new();
        let queued = |r: &Run| r.life.phase() == isolet_core::run_state::Phase::Queued && r.sandbox.is_none();
        let ids: Vec<u64> = self.runs.iter().filter(|(_, r)| queued(r)).map(|(id, _)| *id).collect();
        for id in ids {
            if self.pool.remove_queued(id).is_some() {
                out.push(id);
            }
        }
        out.sort_unstable();
        (out, ())
    }

    fn stats(&self) -> Stats {
        let c = self.pool.counters();
        let mut e = super::pool::EngineStats {
            busy: self.hosts.iter().map(|h| h.runs.len()).sum(),
            queued: self.pool.queued() + self.unplaced.len(),
            completed: c.completed,
            failed: c.failed.clone(),
            tenants: self.pool.tenants(),
            warm_starts: self.counters.retired_warm_starts,
            cold_starts: self.counters.retired_cold_starts,
            sandboxes: self.pool.open_sandboxes(),
            max_open_sandboxes: self.pool.config().max_open_sandboxes,
            max_open_sandboxes_per_tenant: self.pool.config().max_open_sandboxes_per_tenant,
            queue_expired: c.queue_expired,
            ..Default::default()
        };
        for h in &self.hosts {
            e.warm_starts = e.warm_starts.saturating_add(h.health.warm_starts);
            e.cold_starts = e.cold_starts.saturating_add(h.health.cold_starts);
            if h.end.is_none() {
                e.warm += h.health.warm as usize;
                e.warming += h.health.warming as usize;
                e.threads += h.health.engine_threads as usize;
                e.quarantined += h.health.quarantined as usize;
            }
        }
        let p = ProcessStats {
            live: self.hosts.iter().filter(|h| h.end.is_none() && h.phase != HostPhase::Draining).count(),
            starting: self.hosts.iter().filter(|h| h.phase == HostPhase::Starting).count(),
            draining: self.hosts.iter().filter(|h| h.phase == HostPhase::Draining && h.end.is_none()).count(),
            started: self.counters.started,
            crashed: self.counters.crashed,
            recycled: self.counters.recycled.clone(),
            crash_reasons: self.counters.crash_reasons.clone(),
            pids: self.hosts.iter().filter_map(|h| h.pid).collect(),
            lockdown: self.lockdown.clone(),
        };
        Stats { engine: e, processes: p }
    }
}

/// Sends frames held back under the engine's lock `s`: each writer's place in line is
/// taken while `s` is held (so no frame sent later, an `Abort` say, can overtake them), the
/// system calls are made after `s` is released. A send wakes the host's reader, which may
/// take this CPU at once; with the lock held, the I/O thread reading that host's answer
/// would then wait for this thread to be scheduled again.
fn send_after_unlock(s: MutexGuard<'_, State>, held: Vec<(Arc<HostWriter>, Vec<Vec<u8>>)>) {
    if held.is_empty() {
        return;
    }
    let queued: Vec<_> = held.iter().map(|(w, frames)| (w, w.queue(), frames)).collect();
    drop(s);
    for (w, queue, frames) in queued {
        let parts: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        w.send_queued(queue, &parts);
    }
}

/// "signal SIGSEGV" or "exit code 3".
fn exit_reason(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.signal() {
        return format!("signal {}", signal_name(sig));
    }
    format!("exit code {}", status.code().unwrap_or(-1))
}

fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGKILL => "SIGKILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGSYS => "SIGSYS",
        libc::SIGHUP => "SIGHUP",
        libc::SIGPIPE => "SIGPIPE",
        _ => return format!("{sig}"),
    };
    name.to_string()
}

/// An errno's name (`EPERM`), as Node names spawn failures.
fn errno_name(e: &std::io::Error) -> String {
    let name = match e.raw_os_error() {
        Some(libc::EPERM) => "EPERM",
        Some(libc::EAGAIN) => "EAGAIN",
        Some(libc::ENOMEM) => "ENOMEM",
        Some(libc::ENOENT) => "ENOENT",
        Some(libc::EACCES) => "EACCES",
        Some(libc::EMFILE) => "EMFILE",
        Some(libc::ENFILE) => "ENFILE",
        Some(libc::ENOSYS) => "ENOSYS",
        _ => return e.to_string(),
    };
    name.to_string()
}

// ---- starting hosts ----------------------------------------------------------------

type Job = Box<dyn FnOnce() + Send>;

/// Starts every host, on one thread that lives as long as the process: a host's
/// parent-death signal fires when the *thread* that started it ends, so hosts must not
/// be started by a thread that ends (an I/O thread replacing its own host, a Worker).
struct Spawner {
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
}

fn spawner() -> &'static Spawner {
    static SPAWNER: OnceLock<Spawner> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let started = std::thread::Builder::new().name("isolet-spawner".into()).spawn(move || {
            for job in rx {
                job();
            }
        });
        Spawner { jobs: Mutex::new(started.ok().map(|_| tx)) }
    })
}

impl Spawner {
    /// Queues `job`; false when there is no spawner thread (none could be made).
    fn run(&self, job: Job) -> bool {
        match lock(&self.jobs).as_ref() {
            Some(tx) => tx.send(job).is_ok(),
            None => false,
        }
    }
}

fn start_host(me: Weak<Inner>, key: u64, start_frame: Vec<u8>) {
    let Some(inner) = me.upgrade() else { return };
    let command = host::host_command();
    let options = isolet_core::limits::sandbox_host_node_options(&crate::v8::version());
    let env_vars: Vec<(String, String)> =
        std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect();
    let env = policy::host_env(env_vars.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let spawned = match &command {
        Some(c) => host::spawn(c, options, &env),
        None => Err(std::io::Error::other("no sandbox host command set")),
    };
    let spawned = match spawned {
        Ok(s) => s,
        Err(e) => {
            let mut s = inner.state();
            s.host_exited(key, None, &e.to_string(), Some(errno_name(&e)));
            drop(s);
            inner.changed.notify_all();
            return;
        }
    };
    LIVE_HOSTS.fetch_add(1, Ordering::SeqCst);
    let pid = spawned.child.id();
    let writer = HostWriter::start(&spawned.channel);
    {
        let mut s = inner.state();
        let ended = match s.host_mut(key) {
            Some(h) => {
                h.pid = Some(pid);
                h.cpu = Some(CpuReader::open(pid));
                match &writer {
                    Ok(w) => {
                        h.writer = Some(w.clone());
                        w.send(&[&start_frame]);
                    }
                    Err(_) => h.end = Some(HostEnd::StartTimeout),
                }
                h.end.is_some()
            }
            None => true,
        };
        if ended {
            // SAFETY: our unreaped child.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
    }
    drop(inner);
    let io = std::thread::Builder::new().name("isolet-host-io".into()).stack_size(512 * 1024);
    let writer = writer.ok();
    let spawned = Arc::new(Mutex::new(Some(spawned)));
    let for_thread = spawned.clone();
    let closer = writer.clone();
    let me_again = me.clone();
    if io.spawn(move || io_loop(me, key, for_thread, writer)).is_err() {
        // No thread to serve it: end it here, and settle it as a start that failed.
        if let Some(w) = closer {
            w.close();
        }
        if let Some(mut sp) = lock(&spawned).take() {
            let _ = sp.child.kill();
            let status = sp.child.wait().ok();
            LIVE_HOSTS.fetch_sub(1, Ordering::SeqCst);
            if let Some(inner) = me_again.upgrade() {
                inner.state().host_exited(key, status, "", Some("no I/O thread".into()));
                inner.changed.notify_all();
            }
        }
    }
}

/// A host's run channel and the frames read from it. Node's thread reads it while its loop
/// is free (`LoopWatch`): the frames' events then reach JavaScript without a wake-up by
/// another thread. The host's I/O thread reads it when Node's thread has left what is
/// waiting unread for a poll period (`policy::UnreadFrames`: the application's JavaScript
/// holds Node's thread, and a run's `done` must still free its slot and keep its
/// deadline), when the host has closed its end (what is left is read before the host's
/// runs are settled), and always where Node's loop does not watch it.
struct HostFrames {
    inner: Weak<Inner>,
    /// Itself, for the helper thread `hand_over` starts.
    me: Weak<HostFrames>,
    key: u64,
    rss: RssReader,
    read: Mutex<ReadState>,
    /// Node's loop watches the channel.
    node_reads: AtomicBool,
    /// Reads by Node's thread, for the I/O thread's check that they keep up.
    node_read_count: AtomicU64,
}

struct ReadState {
    frames: FrameStream,
    /// False once the host broke the protocol: nothing more is read from it.
    reading: bool,
    eof: bool,
    /// Frames handed to a helper thread (see `HostFrames::hand_over`), in order, and
    /// whether one is running: while it is, every frame read goes here.
    handed: VecDeque<(Header, Vec<u8>)>,
    helper: bool,
}

/// Frames whose values are counted off the thread that read them: a result or host-call
/// argument list at least this long (the count walks every value: ~10 ms per MB of small
/// objects), so Node's thread, which reads most frames, never spends that time.
const COUNT_ELSEWHERE_MIN: usize = 256 * 1024;

/// A result or argument list counted ahead of `State::on_frame`.
type Precount = Result<isolet_core::Tally, isolet_core::CountError>;

/// What `State::count_bounds` gives a helper to count a frame against.
struct CountBounds {
    values: isolet_core::Bounds,
    log_entries: usize,
    log_bytes: usize,
}

/// Counts a frame's values (off any lock).
fn precount(h: &Header, payload: &[u8], bounds: &CountBounds) -> Option<Precount> {
    let at = match h.kind {
        Kind::HostCall => frame::decode_host_call(payload).ok()?.1,
        Kind::Done => {
            let (done, at) = WireDone::decode(payload, bounds.log_entries, bounds.log_bytes).ok()?;
            done.result.ok()?;
            at
        }
        _ => return None,
    };
    Some(isolet_core::tally(&payload[at..], bounds.values))
}

impl HostFrames {
    /// One read of the channel, and every whole frame read so far handled. True when
    /// bytes were read.
    fn read_once(&self, fd: RawFd) -> bool {
        let mut r = lock(&self.read);
        if !r.reading || r.eof {
            return false;
        }
        let data = match r.frames.read_from(fd) {
            Ok(Read1::Data) => true,
            Ok(Read1::Eof) => {
                r.eof = true;
                false
            }
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock || e.kind() == std::io::ErrorKind::Interrupted => false,
            Err(_) => {
                r.eof = true;
                false
            }
        };
        if !data {
            return false;
        }
        let Some(inner) = self.inner.upgrade() else {
            r.reading = false;
            return false;
        };
        // Node's thread is woken for these frames' events once the state lock is
        // released: it needs that lock for what it does next (a reply, the next run).
        let held = wakeups::HoldRings::new();
        let mut s = inner.state();
        let key = self.key;
        // No helper thread could be started: the handed frames are handled here at the end.
        let mut inline = false;
        loop {
            let next = r.frames.next_frame(&mut |h| s.frame_limit(key, h));
            let outcome = match next {
                Ok(Some((h, payload))) => {
                    // A big result or argument list is counted off this thread and this lock,
                    // and every frame after it follows it there, in order.
                    if r.helper || (payload.len() >= COUNT_ELSEWHERE_MIN && matches!(h.kind, Kind::HostCall | Kind::Done)) {
                        r.handed.push_back((h, payload));
                        if !std::mem::replace(&mut r.helper, true) && !self.hand_over() {
                            inline = true;
                        }
                        Ok(true)
                    } else {
                        s.on_frame(key, h, payload, &self.rss, None).map(|_| true)
                    }
                }
                Ok(None) => Ok(false),
                Err(why) => Err(why),
            };
            match outcome {
                Ok(true) => continue,
                Ok(false) => break,
                Err(why) => {
                    // Nothing more is read from a host that broke the protocol.
                    s.end_host(key, HostEnd::Protocol(why));
                    r.reading = false;
                    break;
                }
            }
        }
        // A futex system call per frame otherwise, though almost never anyone waits.
        let wake = s.waiters > 0;
        drop(s);
        drop(r);
        drop(held);
        if wake {
            inner.changed.notify_all();
        }
        if inline {
            self.helper();
        }
        true
    }

    /// Starts a helper thread for the frames in `handed`: it counts a big frame's values
    /// before it takes the state lock, then handles each frame as `read_once` does, in
    /// order, until none is left.
    /// False when no thread could be started: the caller then runs `helper` itself, once
    /// it holds no lock.
    fn hand_over(&self) -> bool {
        let Some(me) = self.me.upgrade() else { return false };
        std::thread::Builder::new().name("isolet-count".into()).spawn(move || me.helper()).is_ok()
    }

    fn helper(&self) {
        let key = self.key;
        loop {
            let next = {
                let mut r = lock(&self.read);
                match r.handed.pop_front() {
                    Some(f) if r.reading => f,
                    _ => {
                        r.handed.clear();
                        r.helper = false;
                        return;
                    }
                }
            };
            let Some(inner) = self.inner.upgrade() else { return };
            let (h, payload) = next;
            let bounds = if payload.len() >= COUNT_ELSEWHERE_MIN { inner.state().count_bounds(key, &h) } else { None };
            let pre = bounds.and_then(|b| precount(&h, &payload, &b));
            let held = wakeups::HoldRings::new();
            let mut s = inner.state();
            let outcome = s.on_frame(key, h, payload, &self.rss, pre);
            if let Err(why) = outcome {
                s.end_host(key, HostEnd::Protocol(why));
                drop(s);
                drop(held);
                let mut r = lock(&self.read);
                r.reading = false;
                r.handed.clear();
                r.helper = false;
                return;
            }
            let wake = s.waiters > 0;
            drop(s);
            drop(held);
            if wake {
                inner.changed.notify_all();
            }
        }
    }

    /// Reads until nothing is waiting (or a frame is left half read).
    fn read_all(&self, fd: RawFd) {
        while self.read_once(fd) {}
    }

    /// Still read from: not at its end, not refused.
    fn open(&self) -> bool {
        let r = lock(&self.read);
        r.reading && !r.eof
    }
}

impl ChannelReader for HostFrames {
    fn readable(&self, fd: RawFd) -> bool {
        self.node_read_count.fetch_add(1, Ordering::Relaxed);
        self.read_once(fd);
        self.open()
    }

    fn unwatched(&self) {
        self.node_reads.store(false, Ordering::Release);
    }
}

/// Asks Node's loop to read host `key`'s channel; false where it cannot (no loop to
/// watch with, or it is closing) or on macOS (the I/O thread learns of the host's end
/// of the channel closing by `POLLRDHUP`, which only Linux has).
fn watch_on_node_loop(me: &Weak<Inner>, frames: &Arc<HostFrames>, channel: &std::os::unix::net::UnixStream) -> bool {
    if !cfg!(target_os = "linux") {
        return false;
    }
    let Some(watch) = me.upgrade().and_then(|inner| inner.loop_watch.clone()) else { return false };
    let Ok(fd) = channel.try_clone() else { return false };
    frames.node_reads.store(true, Ordering::Release);
    let reader: Arc<dyn ChannelReader> = frames.clone();
    if !watch.watch(OwnedFd::from(fd), reader) {
        frames.node_reads.store(false, Ordering::Release);
        return false;
    }
    true
}

/// One host's I/O: its stderr, its exit, its memory and its runs' deadlines on every poll
/// period, and its frames when Node's loop does not read them (see `HostFrames`). Ends
/// once the host is reaped.
fn io_loop(me: Weak<Inner>, key: u64, spawned: Arc<Mutex<Option<host::Spawned>>>, writer: Option<Arc<HostWriter>>) {
    let Some(mut sp) = lock(&spawned).take() else { return };
    let pid = sp.child.id();
    let pidfd = host::pidfd_of(pid);
    let frames = Arc::new_cyclic(|frames_me| HostFrames {
        inner: me.clone(),
        me: frames_me.clone(),
        key,
        rss: RssReader::open(pid),
        read: Mutex::new(ReadState { frames: FrameStream::new(), reading: true, eof: false, handed: VecDeque::new(), helper: false }),
        node_reads: AtomicBool::new(false),
        node_read_count: AtomicU64::new(0),
    });
    watch_on_node_loop(&me, &frames, &sp.channel);
    let chan_fd = sp.channel.as_raw_fd();
    let mut stderr = StderrTail::new(sp.stderr, policy::STDERR_TAIL_BYTES);
    let mut stderr_open = true;
    let mut exited_at: Option<Instant> = None;
    // Ticks (memory, deadlines) once per poll period, however often the host wakes us.
    let mut last_tick = Instant::now();
    let mut unread = policy::UnreadFrames::default();
    loop {
        let period = match me.upgrade() {
            Some(inner) => inner.state().poll_period(key),
            None => {
                let _ = sp.child.kill();
                break;
            }
        };
        let timeout = match exited_at {
            Some(t) => (policy::EXIT_CLOSE_GRACE_MS).saturating_sub(t.elapsed().as_millis() as u64).min(period),
            None => period,
        };
        let open = frames.open();
        let node_reads = frames.node_reads.load(Ordering::Acquire);
        let fds = [
            // Node's loop reads the frames: woken only by the host closing its end.
            (if open { chan_fd } else { -1 }, if node_reads { host::HANG_UP } else { host::READABLE }),
            (if stderr_open { stderr.fd() } else { -1 }, host::READABLE),
            // Readable for good once the host exited: polled until then only.
            (if exited_at.is_none() { pidfd.as_ref().map_or(-1, |f| f.as_raw_fd()) } else { -1 }, host::READABLE),
        ];
        let ready = host::poll_ready(&fds, timeout);
        if ready[1] {
            stderr_open = stderr.read_some();
        }
        if ready[0] {
            if node_reads {
                frames.read_all(chan_fd);
            } else {
                frames.read_once(chan_fd);
            }
        }
        if exited_at.is_none() {
            let gone = match &pidfd {
                Some(_) => ready[2],
                None => host::exited_unreaped(pid),
            };
            if gone {
                exited_at = Some(Instant::now());
            }
        }
        let (reading, eof) = {
            let r = lock(&frames.read);
            (r.reading, r.eof)
        };
        if eof || (exited_at.is_some() && !reading) {
            // Its end of the channel closed (it has exited, or it is ended now), or it
            // exited and nothing more is read from it.
            break;
        }
        if exited_at.is_some_and(|t| t.elapsed() >= Duration::from_millis(policy::EXIT_CLOSE_GRACE_MS)) {
            break;
        }
        if exited_at.is_none() && last_tick.elapsed() >= Duration::from_millis(period) {
            last_tick = Instant::now();
            if frames.node_reads.load(Ordering::Acquire) && reading {
                let node_reads = frames.node_read_count.load(Ordering::Relaxed);
                let waiting = host::poll_ready(&[(chan_fd, host::READABLE)], 0)[0];
                if unread.check(waiting, node_reads) {
                    frames.read_all(chan_fd);
                }
            }
            let mb = frames.rss.mb();
            let Some(inner) = me.upgrade() else { break };
            inner.state().tick(key, mb);
        }
    }
    // Node's loop stops watching at the channel's end of file (its copy of the descriptor
    // sees it once the host is gone) or when it refuses to read more.
    if let Some(w) = &writer {
        w.close();
    }
    if let Some(inner) = me.upgrade() {
        if let Some(h) = inner.state().host_mut(key) {
            h.reaping = true;
        }
    }
    let _ = sp.child.kill();
    let status = sp.child.wait().ok();
    LIVE_HOSTS.fetch_sub(1, Ordering::SeqCst);
    // Frames handed to a helper (a big result being counted) are handled before the host's
    // runs are settled, as every frame read is.
    for _ in 0..2000 {
        if !lock(&frames.read).helper {
            break;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    // What it wrote last (a V8 OOM message comes right before the end); bounded, as a
    // descendant may hold the pipe open where lock-down is unavailable.
    for _ in 0..16 {
        if !stderr_open || !host::poll_ready(&[(stderr.fd(), host::READABLE)], 0)[0] {
            break;
        }
        stderr_open = stderr.read_some();
    }
    drop(sp.channel);
    if let Some(inner) = me.upgrade() {
        let mut s = inner.state();
        s.host_exited(key, status, &stderr.text(), None);
        drop(s);
        inner.changed.notify_all();
    }
}

#[allow(dead_code)]
fn _assert_send() {
    fn is_send<T: Send>() {}
    is_send::<ProcessEngine>();
}
