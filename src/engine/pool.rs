//! Scheduling and the warm pool. An isolate serves exactly one run and is then
//! destroyed; warm isolates are created ahead of time on their own threads and
//! replaced in the background after each use.
use std::collections::{HashMap, VecDeque};
use std::sync::{mpsc, Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use isolet_core::{AdmissionQueue, ErrorKind, Failure};

use crate::isolate::thread::JobSource;
use crate::isolate::{Completion, ExecStats, IsolateThread, RunShared, StopReason};
use crate::v8::SandboxConfig;

#[derive(Debug, Clone)]
pub(crate) struct EngineConfig {
    /// Memory of warm isolates; runs asking for another limit get a cold isolate.
    pub memory_mb: u32,
    pub max_concurrent: usize,
    pub warm_pool_size: usize,
    pub max_queue: usize,
}

/// Counters kept as runs come and go; `Engine::stats` adds the derived counts.
#[derive(Debug, Clone, Default)]
pub(crate) struct EngineStats {
    pub warm: usize,
    pub warming: usize,
    pub busy: usize,
    pub queued: usize,
    pub completed: u64,
    pub failed: HashMap<ErrorKind, u64>,
    pub warm_starts: u64,
    pub cold_starts: u64,
    pub threads: usize,
    pub quarantined: usize,
}

struct State {
    shutdown: bool,
    active: HashMap<u64, Arc<RunShared>>,
    queue: AdmissionQueue<Arc<RunShared>>,
    warm: VecDeque<mpsc::Sender<Arc<RunShared>>>,
    stats: EngineStats,
}

struct Inner {
    config: EngineConfig,
    state: Mutex<State>,
    idle: Condvar,
}

/// Cheap to clone; threads hold only `Weak` references to it.
#[derive(Clone)]
pub(crate) struct Engine {
    inner: Arc<Inner>,
}

/// Every engine alive in the process, so Node's exit can stop them all first.
/// Each entry is tagged with the Node environment (main thread or worker) that made it.
static ENGINES: Mutex<Vec<(usize, Weak<Inner>)>> = Mutex::new(Vec::new());

/// Shuts every engine down and waits (up to `timeout`) until no isolate thread is left
/// except quarantined ones. Called as Node's environment is torn down: disposing an
/// isolate while Node disposes V8 would crash the process.
pub(crate) fn shutdown_all(env: usize, timeout: Duration) {
    let engines: Vec<_> = ENGINES
        .lock()
        .unwrap()
        .iter()
        .filter(|(owner, _)| *owner == env)
        .filter_map(|(_, e)| e.upgrade())
        .collect();
    let deadline = Instant::now() + timeout;
    for inner in engines {
        let engine = Engine { inner };
        engine.shutdown();
        engine.wait_idle(deadline.saturating_duration_since(Instant::now()));
    }
    // A quarantined thread still owns a live isolate, and V8 (13+) aborts in V8::Dispose
    // when any isolate is left: the process leaves now, with the code its main thread was
    // exiting with. Only the main environment's teardown may end the process: a Worker's
    // ending leaves the quarantined thread running (its process exits later).
    if crate::limits::quarantine::quarantined() > 0 && crate::limits::quarantine::on_main_thread() {
        crate::limits::quarantine::exit_without_v8_teardown();
    }
}

fn sandbox_config(memory_mb: u32) -> SandboxConfig {
    let bytes = memory_mb as usize * 1024 * 1024;
    SandboxConfig { heap_limit_bytes: bytes, array_buffer_limit_bytes: bytes }
}

fn refuse(run: &RunShared, failure: Failure) {
    run.deliver(Completion { result: Err(failure), stats: ExecStats::default(), logs: Vec::new() });
}

impl Engine {
    /// `env` identifies the Node environment that owns the engine (see `shutdown_all`).
    pub(crate) fn new(config: EngineConfig, env: usize) -> Engine {
        let state = State {
            shutdown: false,
            active: HashMap::new(),
            queue: AdmissionQueue::new(config.max_queue),
            warm: VecDeque::new(),
            stats: EngineStats::default(),
        };
        let inner = Arc::new(Inner { config, state: Mutex::new(state), idle: Condvar::new() });
        let mut engines = ENGINES.lock().unwrap();
        engines.retain(|(_, e)| e.strong_count() > 0);
        engines.push((env, Arc::downgrade(&inner)));
        Engine { inner }
    }

    /// Creates the warm pool (off the caller's path: each isolate on its own thread).
    pub(crate) fn warm_up(&self) {
        let mut state = self.inner.state.lock().unwrap();
        self.replenish(&mut state);
    }

    pub(crate) fn submit(&self, run: Arc<RunShared>) {
        let mut state = self.inner.state.lock().unwrap();
        if state.shutdown {
            drop(state);
            return refuse(&run, Failure::new(ErrorKind::Aborted, "The sandbox engine is shut down"));
        }
        if let Some(message) = crate::limits::quarantine::refusal() {
            drop(state);
            return refuse(&run, Failure::new(ErrorKind::Internal, message));
        }
        if state.active.len() < self.inner.config.max_concurrent {
            self.start(&mut state, run);
            return;
        }
        if let Err(full) = state.queue.push(run.id, run) {
            drop(state);
            let message = format!(
                "The engine's queue is full ({} waiting); try again later",
                self.inner.config.max_queue
            );
            return refuse(&full.0, Failure::new(ErrorKind::Internal, message));
        }
    }

    /// Aborts a run whether it is queued or running.
    pub(crate) fn abort(&self, run: &Arc<RunShared>) {
        let mut state = self.inner.state.lock().unwrap();
        if let Some(queued) = state.queue.remove(run.id) {
            drop(state);
            return refuse(&queued, queued.failure_for(StopReason::Aborted));
        }
        drop(state);
        run.stop(StopReason::Aborted);
    }

    /// Stops accepting work, aborts queued and running runs, drops warm isolates.
    pub(crate) fn shutdown(&self) {
        let mut state = self.inner.state.lock().unwrap();
        state.shutdown = true;
        let queued = state.queue.drain();
        state.warm.clear(); // closing the channels ends the warm threads
        let running: Vec<_> = state.active.values().cloned().collect();
        drop(state);
        for (_, run) in queued {
            refuse(&run, run.failure_for(StopReason::Shutdown));
        }
        for run in running {
            run.stop(StopReason::Shutdown);
        }
    }

    /// Waits until no thread of this engine is alive except quarantined ones.
    pub(crate) fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.inner.state.lock().unwrap();
        loop {
            let s = &state.stats;
            if state.active.is_empty() && s.threads <= s.quarantined {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            state = self.inner.idle.wait_timeout(state, deadline - now).unwrap().0;
        }
    }

    pub(crate) fn stats(&self) -> EngineStats {
        let state = self.inner.state.lock().unwrap();
        let mut stats = state.stats.clone();
        stats.warm = state.warm.len();
        stats.busy = state.active.len();
        stats.queued = state.queue.len();
        stats
    }

    fn start(&self, state: &mut State, run: Arc<RunShared>) {
        state.active.insert(run.id, run.clone());
        let weak = Arc::downgrade(&self.inner);
        let id = run.id;
        run.set_on_release(Box::new(move |failed, quarantined| {
            if let Some(inner) = weak.upgrade() {
                Engine { inner }.finished(id, failed, quarantined);
            }
        }));
        let mut run = Some(run);
        if run.as_ref().unwrap().spec.limits.memory_mb == self.inner.config.memory_mb {
            while let Some(tx) = state.warm.pop_front() {
                match tx.send(run.take().unwrap()) {
                    Ok(()) => {
                        state.stats.warm_starts += 1;
                        break;
                    }
                    Err(mpsc::SendError(back)) => run = Some(back),
                }
            }
        }
        if let Some(run) = run {
            state.stats.cold_starts += 1;
            let config = sandbox_config(run.spec.limits.memory_mb);
            self.spawn(state, config, JobSource::Now(run.clone()), Some(run));
        }
        // The pool is topped up when a run finishes, not here: creating an isolate now
        // would compete for CPU with the run that was just started.
    }

    fn spawn(&self, state: &mut State, config: SandboxConfig, source: JobSource, run: Option<Arc<RunShared>>) {
        state.stats.threads += 1;
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        let on_exit = Box::new(move |quarantined: bool| {
            if let Some(inner) = weak.upgrade() {
                let mut state = inner.state.lock().unwrap();
                state.stats.threads -= 1;
                if quarantined {
                    state.stats.quarantined -= 1;
                }
                inner.idle.notify_all();
            }
        });
        if IsolateThread::spawn(config, source, on_exit).is_err() {
            state.stats.threads -= 1;
            if let Some(run) = run {
                state.active.remove(&run.id);
                refuse(&run, Failure::new(ErrorKind::Internal, "Could not start an isolate thread"));
            }
        }
    }

    /// Tops the warm pool up to `warm_pool_size`, counting isolates still being made.
    fn replenish(&self, state: &mut State) {
        let want = self.inner.config.warm_pool_size;
        while !state.shutdown && state.warm.len() + state.stats.warming < want {
            state.stats.warming += 1;
            let (tx, rx) = mpsc::channel();
            let weak = Arc::downgrade(&self.inner);
            let ready = Box::new(move |ok: bool| {
                let Some(inner) = weak.upgrade() else { return };
                let mut state = inner.state.lock().unwrap();
                state.stats.warming -= 1;
                if ok && !state.shutdown {
                    state.warm.push_back(tx);
                }
            });
            let config = sandbox_config(self.inner.config.memory_mb);
            self.spawn(state, config, JobSource::Later { jobs: rx, ready }, None);
        }
    }

    fn finished(&self, id: u64, failed: Option<ErrorKind>, quarantined: bool) {
        let mut state = self.inner.state.lock().unwrap();
        state.active.remove(&id);
        match failed {
            None => state.stats.completed += 1,
            Some(kind) => *state.stats.failed.entry(kind).or_insert(0) += 1,
        }
        if quarantined {
            state.stats.quarantined += 1;
        }
        if !state.shutdown {
            while state.active.len() < self.inner.config.max_concurrent {
                let Some((_, next)) = state.queue.pop() else { break };
                if next.is_delivered() {
                    continue;
                }
                self.start(&mut state, next);
            }
        }
        self.replenish(&mut state);
        self.inner.idle.notify_all();
    }
}
