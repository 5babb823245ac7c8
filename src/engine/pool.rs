//! Scheduling and the warm pool. An isolate serves exactly one run and is then
//! destroyed; warm isolates are created ahead of time on their own threads and
//! replaced in the background after each use. The decisions (admit, queue or refuse;
//! which queued run starts; warm or cold; how many to warm; when the engine is idle)
//! are `isolet_core::queue::Pool`'s; this file carries them out with threads.
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use isolet_core::queue::{Admission, Pool, PoolConfig, Tenant, TenantCounts};
use isolet_core::{ErrorKind, Failure};

use isolet_core::sandbox::{CloseReason, SandboxPlan};

use crate::isolate::persistent::{self, RunCount, SandboxCore, SlotRelease};
use crate::isolate::thread::JobSource;
use crate::isolate::{IsolateThread, RunShared, StopReason};
use crate::limits::{lock, quarantine};
use crate::v8::SandboxConfig;

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
    pub tenants: Vec<TenantCounts>,
    /// Open persistent sandboxes (each holds a slot).
    pub sandboxes: usize,
}

/// A warm isolate's thread, waiting for its one run.
type WarmIsolate = mpsc::Sender<Arc<RunShared>>;

struct Inner {
    /// Lock order: this lock may be held while taking a run's `life` lock (admitting
    /// it), never while a run ends (its ending calls back in here).
    pool: Mutex<Pool<Arc<RunShared>, WarmIsolate>>,
    idle: Condvar,
    /// Callers sleeping in `wait_idle`; changed and read under `pool`'s lock, so runs and
    /// threads ending (twice per run) notify `idle` only when someone waits.
    idle_waiters: AtomicUsize,
    /// Open persistent sandboxes, to close at shutdown.
    sandboxes: Mutex<HashMap<u64, Weak<SandboxCore>>>,
}

impl Inner {
    fn pool(&self) -> MutexGuard<'_, Pool<Arc<RunShared>, WarmIsolate>> {
        lock(&self.pool)
    }

    /// Whether `wait_idle` has sleepers to notify; call with `pool`'s lock held, after
    /// changing what `is_idle` reads, and notify `idle` after releasing it.
    fn idle_watched(&self) -> bool {
        self.idle_waiters.load(Ordering::Relaxed) > 0
    }

    /// A thread counted by `thread_started` could not be spawned (`warm`: it was to be a
    /// warm isolate, counted as warming too).
    fn thread_not_started(&self, warm: bool) {
        let mut pool = self.pool();
        pool.thread_exited(false);
        if warm {
            pool.warm_ready(None);
        }
        let watched = self.idle_watched();
        drop(pool);
        if watched {
            self.idle.notify_all();
        }
    }
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
    stop_all(env, timeout);
    // A quarantined thread still owns a live isolate, and V8 (13+) aborts in V8::Dispose
    // when any isolate is left: the process leaves now, with the code its main thread was
    // exiting with. Only the main environment's teardown may end the process: a Worker's
    // ending leaves the quarantined thread running (its process exits later, through
    // here: lib/native.js loads isolet on the main thread when a Worker loads it first).
    if quarantine::quarantined() > 0 && quarantine::on_main_thread() {
        quarantine::exit_without_v8_teardown();
    }
}

/// Shuts down every engine of environment `env` and waits (up to `timeout`) for their
/// isolate threads. Called from `process.on('exit')` too: `process.exit()` disposes Node's
/// platform without running environment cleanup hooks, and an isolate thread still
/// creating or holding an isolate then would use a platform that is gone.
pub(crate) fn stop_all(env: usize, timeout: Duration) {
    let engines: Vec<_> =
        lock(&ENGINES).iter().filter(|(owner, _)| *owner == env).filter_map(|(_, e)| e.upgrade()).collect();
    let deadline = Instant::now() + timeout;
    for inner in engines {
        let engine = Engine { inner };
        engine.shutdown();
        engine.wait_idle(deadline.saturating_duration_since(Instant::now()));
    }
}

fn sandbox_config(memory_mb: u32) -> SandboxConfig {
    let bytes = memory_mb as usize * 1024 * 1024;
    SandboxConfig { heap_limit_bytes: bytes, array_buffer_limit_bytes: bytes }
}

fn could_not_start() -> Failure {
    Failure::new(ErrorKind::Internal, "Could not start an isolate thread")
}

impl Engine {
    /// `env` identifies the Node environment that owns the engine (see `shutdown_all`).
    pub(crate) fn new(config: PoolConfig, env: usize) -> Engine {
        let pool = Pool::new(config);
        let inner = Arc::new(Inner {
            pool: Mutex::new(pool),
            idle: Condvar::new(),
            idle_waiters: AtomicUsize::new(0),
            sandboxes: Mutex::new(HashMap::new()),
        });
        let mut engines = lock(&ENGINES);
        engines.retain(|(_, e)| e.strong_count() > 0);
        engines.push((env, Arc::downgrade(&inner)));
        Engine { inner }
    }

    /// Creates the warm pool (off the caller's path: each isolate on its own thread).
    pub(crate) fn warm_up(&self) {
        let mut launch = Launch::default();
        Self::replenish(&mut self.inner.pool(), &mut launch);
        self.launch(launch);
    }

    pub(crate) fn submit(&self, run: Arc<RunShared>, tenant: Tenant) {
        let mut pool = self.inner.pool();
        let admission = pool.admit(run.id, tenant, run, quarantine::quarantined(), quarantine::max_quarantined());
        let mut launch = Launch::default();
        match admission {
            Admission::Start(run) => self.start(&mut pool, run, &mut launch),
            Admission::Queued => {}
            Admission::Refused(run, failure) => {
                drop(pool);
                run.refuse(failure);
                return;
            }
            Admission::QueuedInPlaceOf(out, failure) => {
                // Another tenant's newest queued run gave its place up (the queue is full).
                drop(pool);
                out.refuse(failure);
                return;
            }
        }
        drop(pool);
        self.launch(launch);
    }

    /// Aborts a run whether it is queued or running.
    pub(crate) fn abort(&self, run: &Arc<RunShared>) {
        let queued = self.inner.pool().remove_queued(run.id);
        match queued {
            Some(queued) => {
                queued.refuse(queued.failure_for(StopReason::Aborted));
            }
            None => {
                run.request_stop(StopReason::Aborted);
            }
        }
    }

    /// Stops accepting work, aborts queued and running runs, drops warm isolates
    /// (closing their channels ends their threads).
    pub(crate) fn shutdown(&self) {
        let open: Vec<_> = lock(&self.inner.sandboxes).drain().filter_map(|(_, s)| s.upgrade()).collect();
        for sandbox in open {
            sandbox.close(CloseReason::Shutdown, true);
        }
        let (queued, running) = self.inner.pool().shutdown();
        for run in queued {
            run.refuse(run.failure_for(StopReason::Shutdown));
        }
        for run in running {
            run.request_stop(StopReason::Shutdown);
        }
    }

    /// Waits until no thread of this engine is alive except quarantined ones.
    pub(crate) fn wait_idle(&self, timeout: Duration) -> bool {
        let deadline = Instant::now() + timeout;
        let mut pool = self.inner.pool();
        loop {
            if pool.is_idle() {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            self.inner.idle_waiters.fetch_add(1, Ordering::Relaxed);
            pool = self.inner.idle.wait_timeout(pool, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
            self.inner.idle_waiters.fetch_sub(1, Ordering::Relaxed);
        }
    }

    pub(crate) fn stats(&self) -> EngineStats {
        let pool = self.inner.pool();
        let c = pool.counters();
        EngineStats {
            warm: pool.warm(),
            warming: c.warming,
            busy: pool.busy(),
            queued: pool.queued(),
            completed: c.completed,
            failed: c.failed.clone(),
            warm_starts: c.warm_starts,
            cold_starts: c.cold_starts,
            threads: c.threads,
            quarantined: c.quarantined,
            tenants: pool.tenants(),
            sandboxes: pool.open_sandboxes(),
        }
    }

    /// Starts `run`, which holds a slot in `pool`, on a warm isolate, or adds it to
    /// `launch` for a new thread (counted here, spawned once the lock is released).
    fn start(&self, pool: &mut Pool<Arc<RunShared>, WarmIsolate>, run: Arc<RunShared>, launch: &mut Launch) {
        let weak = Arc::downgrade(&self.inner);
        let id = run.id;
        let admitted = run.admit(Box::new(move |failed, quarantined| {
            if let Some(inner) = weak.upgrade() {
                Engine { inner }.finished(id, failed, quarantined);
            }
        }));
        if !admitted {
            pool.forget(id); // it ended before it could start
            return;
        }
        let mut run = run;
        while let Some(warm) = pool.take_warm(run.spec.plan.limits.memory_mb) {
            match warm.send(run) {
                Ok(()) => {
                    pool.count_start(true);
                    return;
                }
                // That warm thread is gone (its isolate failed): try the next.
                Err(mpsc::SendError(back)) => run = back,
            }
        }
        pool.count_start(false);
        // Counted now so the engine is never seen idle while the thread is being made.
        pool.thread_started();
        // The pool is topped up when a run finishes, not here: creating an isolate now
        // would compete for CPU with the run that was just started.
        launch.cold.push(run);
    }

    /// Spawns the threads `launch` counted, without the engine's lock: spawning under it
    /// made `submit` on Node's thread wait for a descheduled pool thread (p99 2-3 ms).
    /// A thread that cannot be made is uncounted; its run is refused (giving its slot
    /// back through `finished`), a warm one is retried by the next finished run.
    fn launch(&self, launch: Launch) {
        for run in launch.cold {
            let config = sandbox_config(run.spec.plan.limits.memory_mb);
            if self.spawn(config, JobSource::Now(run.clone())).is_err() {
                self.inner.thread_not_started(false);
                run.refuse(could_not_start());
            }
        }
        if launch.warm == 0 {
            return;
        }
        let memory_mb = self.inner.pool().config().memory_mb;
        for _ in 0..launch.warm {
            let (tx, rx) = mpsc::channel();
            let weak = Arc::downgrade(&self.inner);
            let ready = Box::new(move |ok: bool| {
                if let Some(inner) = weak.upgrade() {
                    inner.pool().warm_ready(ok.then_some(tx));
                }
            });
            if self.spawn(sandbox_config(memory_mb), JobSource::Later { jobs: rx, ready }).is_err() {
                self.inner.thread_not_started(true);
            }
        }
    }

    /// What an isolate thread's end tells the pool (it was counted by `thread_started`).
    fn on_thread_exit(&self) -> Box<dyn FnOnce(bool) + Send> {
        let weak: Weak<Inner> = Arc::downgrade(&self.inner);
        Box::new(move |quarantined: bool| {
            if let Some(inner) = weak.upgrade() {
                let mut pool = inner.pool();
                pool.thread_exited(quarantined);
                let watched = inner.idle_watched();
                drop(pool);
                if watched {
                    inner.idle.notify_all();
                }
            }
        })
    }

    /// Starts an isolate thread already counted by `thread_started`.
    fn spawn(&self, config: SandboxConfig, source: JobSource) -> std::io::Result<()> {
        let on_exit = self.on_thread_exit();
        IsolateThread::spawn(config, source, on_exit)
    }

    /// Counts the warm isolates needed to top the pool up to `warm_pool_size` (as warming
    /// and as threads); `launch` makes them.
    fn replenish(pool: &mut Pool<Arc<RunShared>, WarmIsolate>, launch: &mut Launch) {
        let n = pool.warm_to_create();
        for _ in 0..n {
            pool.thread_started();
        }
        launch.warm += n;
    }

    /// Run `id` gave its slot back: count it, start queued runs, top the pool up.
    fn finished(&self, id: u64, failed: Option<ErrorKind>, quarantined: bool) {
        let mut pool = self.inner.pool();
        pool.finished(id, failed, quarantined);
        self.slot_freed(pool);
    }

    /// A slot was given back (under `pool`'s lock): start queued runs, top the pool up.
    fn slot_freed(&self, mut pool: MutexGuard<'_, Pool<Arc<RunShared>, WarmIsolate>>) {
        let mut launch = Launch::default();
        while let Some(next) = pool.next_to_start() {
            self.start(&mut pool, next, &mut launch);
        }
        Self::replenish(&mut pool, &mut launch);
        let watched = self.inner.idle_watched();
        drop(pool);
        if watched {
            self.inner.idle.notify_all();
        }
        self.launch(launch);
    }
}

impl Engine {
    /// Opens a persistent sandbox: takes a slot (or is refused, see
    /// `Pool::admit_sandbox`) and starts its isolate thread, which keeps it until closed.
    pub(crate) fn open_sandbox(
        &self,
        id: u64,
        plan: SandboxPlan,
        code: Arc<crate::isolate::code::EngineCode>,
    ) -> Result<Arc<SandboxCore>, Failure> {
        let tenant = Tenant::from(plan.base.tenant.as_deref());
        let config = sandbox_config(plan.base.limits.memory_mb);
        {
            let mut pool = self.inner.pool();
            pool.admit_sandbox(id, tenant.clone(), quarantine::quarantined(), quarantine::max_quarantined())?;
            pool.thread_started();
        }
        let weak = Arc::downgrade(&self.inner);
        let release: SlotRelease = Box::new(move |_failed, quarantined| {
            if let Some(inner) = weak.upgrade() {
                lock(&inner.sandboxes).remove(&id);
                Engine { inner }.sandbox_closed(id, quarantined);
            }
        });
        let weak = Arc::downgrade(&self.inner);
        let count: RunCount = Box::new(move |failed| {
            if let Some(inner) = weak.upgrade() {
                inner.pool().sandbox_run_finished(&tenant, failed);
            }
        });
        let (core, jobs) = SandboxCore::new(plan, release, count, code);
        lock(&self.inner.sandboxes).insert(id, Arc::downgrade(&core));
        let on_exit = self.on_thread_exit();
        let thread_core = core.clone();
        let body = Box::new(move || persistent::sandbox_main(config, thread_core, jobs));
        if IsolateThread::spawn_with(body, on_exit).is_err() {
            self.inner.thread_not_started(false);
            core.close(CloseReason::Internal, false);
            // The thread never ran: give the slot back here.
            lock(&self.inner.sandboxes).remove(&id);
            self.sandbox_closed(id, false);
            return Err(could_not_start());
        }
        Ok(core)
    }

    /// Sandbox `id` gave its slot back: start queued runs, top the pool up.
    fn sandbox_closed(&self, id: u64, quarantined: bool) {
        let mut pool = self.inner.pool();
        pool.sandbox_closed(id, quarantined);
        self.slot_freed(pool);
    }
}

/// Isolate threads counted in the pool under its lock, to be spawned after it is released.
#[derive(Default)]
struct Launch {
    /// Runs that start on a new isolate of their own.
    cold: Vec<Arc<RunShared>>,
    /// Warm isolates to make.
    warm: usize,
}
