//! The supervisor: the parent's side of process isolation (isolation: 'process'). Runs
//! execute in sandbox host processes, each a `node` child running isolates in thread mode
//! (`lib/supervisor/sandbox-host.js` calls `serveSandboxHost`; its side is
//! `crate::sandbox_host`). Admission, the queue and its fairness are the same
//! `isolet_core::queue::Pool` as thread mode's; every supervision decision (budgets,
//! deadlines, placement, what becomes of the runs of a host that ended) is
//! `isolet_core::host_policy`'s. This folder carries them out, one concern a file:
//! - `state`: what the supervisor knows (hosts, runs, counters), under one lock;
//! - `admission`: slots, the fair queue and placement of runs on hosts;
//! - `runs`: a run's end (its one answer) and abort;
//! - `hosts`: starting, ending, replacing hosts, and what becomes of their runs;
//! - `health`: deadlines, memory budgets, stuck threads and drain;
//! - `frames`: what a host's frames mean; `reader`: reading them (Node's loop while it is
//!   free, else the host's I/O thread) and each host's I/O thread;
//! - `sandboxes`: persistent sandboxes, each on a host of its own;
//! - `stats`; `process`: the mechanism of one host process (spawn, writer, reads).
//!
//! Lock order: a host's read lock (`HostFrames::read`), then `Inner::state`, then a host
//! writer's lock (a frame's place in line is taken under the state lock, so a run's frames
//! never overtake each other).
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use isolet_core::frame::{self, Kind, WireStart};
use isolet_core::host_policy::{self as policy, HostEnd, Starts};
use isolet_core::queue::{Admission, Pool, PoolConfig, Tenant};
use isolet_core::RunPlan;

use crate::isolate::{EventSink, HostReply};
use crate::limits::lock;
use crate::limits::queue_timer::QueueTimer;
use crate::v8::DataAnswer;

mod admission;
mod frames;
mod health;
mod hosts;
pub(crate) mod process;
mod reader;
mod runs;
mod sandboxes;
mod state;
mod stats;
mod writer;

use admission::send_after_unlock;
use runs::failure_completion;
pub(crate) use sandboxes::ProcessSandbox;
use state::{Counters, HostPhase, Run, State};
pub(crate) use stats::{ProcessStats, Stats};

/// Node's event loop, as the supervisor asks it to read hosts' run channels: a host's
/// frames then reach Node's thread straight from its loop, not through a wake-up by the
/// host's I/O thread.
pub(crate) trait LoopWatch: Send + Sync {
    /// From now on Node's thread calls `reader.readable(fd)` whenever `fd` (the watch owns
    /// it) is readable, until that returns false or the loop's environment ends (then
    /// `reader.unwatched()`). False when the loop takes no more watches (it is closing).
    fn watch(&self, fd: std::os::fd::OwnedFd, reader: std::sync::Arc<dyn ChannelReader>) -> bool;
}

/// What reads a watched channel (see `LoopWatch`).
pub(crate) trait ChannelReader: Send + Sync {
    /// Reads what `fd` has; false once nothing more is to be read from it.
    fn readable(&self, fd: std::os::fd::RawFd) -> bool;
    /// Node's thread stopped watching (for any reason): someone else must read.
    fn unwatched(&self);
}

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

impl ProcessEngine {
    /// `env` identifies the Node environment that owns the engine (see `end_all`).
    /// `processes`: hosts kept running, `config` the pool over all of them;
    /// `sandboxes_per_host`: persistent sandboxes of one tenant a sandbox host holds.
    /// `loop_watch`: Node's loop, to read hosts' channels on (else their I/O threads do).
    pub(crate) fn new(
        config: PoolConfig,
        processes: usize,
        sandboxes_per_host: usize,
        env: usize,
        loop_watch: Option<Arc<dyn LoopWatch>>,
    ) -> ProcessEngine {
        let processes = processes.clamp(1, config.max_concurrent.max(1));
        let per_host = config.max_concurrent.div_ceil(processes);
        let host_config = WireStart {
            parent_pid: std::process::id(),
            pool: policy::shared_host_pool(config, processes),
            wasm_modules: Vec::new(),
            prelude: None,
            code_cache_bytes: 0,
            prelude_modules: Default::default(),
            web: false,
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
                sandboxes_per_host: sandboxes_per_host.max(1),
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

    /// What every host starts with beside its pool: the prelude it checks as it starts and
    /// runs before each run's code, the budget of its own compiled-code cache, and the
    /// engine's `web` (the shape its warm isolates prepare their contexts in).
    pub(crate) fn set_engine_code(&self, prelude: Option<isolet_core::options::Prelude>, code_cache_bytes: usize, web: bool) {
        let mut state = self.inner.state();
        state.host_config.web = web;
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

// ---- starting hosts ----------------------------------------------------------------

#[allow(dead_code)]
fn _assert_send() {
    fn is_send<T: Send>() {}
    is_send::<ProcessEngine>();
}
