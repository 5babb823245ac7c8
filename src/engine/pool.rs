//! Scheduling and the warm pool. An isolate serves exactly one run and is then
//! destroyed; warm isolates are created ahead of time on their own threads and
//! replaced in the background after each use. A persistent sandbox's runs take slots
//! through the same queue and run on the sandbox's own thread. The decisions (admit,
//! queue, refuse or expire; which queued run starts; warm or cold; how many to warm;
//! bounds on open sandboxes; when the engine is idle) are `isolet_core::queue::Pool`'s;
//! this file carries them out with threads.
use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Condvar, Mutex, MutexGuard, OnceLock, Weak};
use std::time::{Duration, Instant};

use isolet_core::queue::{Admission, AdmitAt, EngineStats, Pool, PoolConfig, Tenant};
use isolet_core::{ErrorKind, Failure};

use isolet_core::sandbox::{CloseReason, SandboxPlan};

use crate::isolate::persistent::{self, SandboxCore, SandboxLink};
use crate::isolate::thread::JobSource;
use crate::isolate::warm::Preparation;
use crate::isolate::{IsolateThread, RunShared, StopReason};
use crate::limits::queue_timer::QueueTimer;
use crate::limits::{lock, quarantine};
use crate::v8::SandboxConfig;
use isolet_core::warm_context::ContextShape;

/// A warm isolate's thread, waiting for its one run, and the shape of the context it
/// prepared (`None`: none; it serves any run).
struct WarmIsolate {
    jobs: mpsc::Sender<Arc<RunShared>>,
    shape: Option<ContextShape>,
}

/// What holds a slot: a one-shot run (on a warm or a new isolate) or a run of a
/// persistent sandbox (on that sandbox's thread).
#[derive(Clone)]
enum Job {
    Run(Arc<RunShared>),
    Sandbox(Arc<RunShared>, Arc<SandboxCore>),
}

impl Job {
    fn run(&self) -> &Arc<RunShared> {
        match self {
            Job::Run(run) | Job::Sandbox(run, _) => run,
        }
    }
}

struct Inner {
    /// Lock order: this lock may be held while taking a run's `life` lock (admitting
    /// it), never while a run ends (its ending calls back in here).
    pool: Mutex<Pool<Job, WarmIsolate>>,
    idle: Condvar,
    /// Callers sleeping in `wait_idle`; changed and read under `pool`'s lock, so runs and
    /// threads ending (twice per run) notify `idle` only when someone waits.
    idle_waiters: AtomicUsize,
    /// Open persistent sandboxes, to close at shutdown.
    sandboxes: Mutex<HashMap<u64, Weak<SandboxCore>>>,
    /// The engine's clock for queue deadlines (`Pool` counts in ms from here).
    epoch: Instant,
    /// Fails queued runs at their deadline.
    timer: Arc<QueueTimer>,
    /// What warm isolates evaluate before their run arrives (`isolate::warm`).
    preparation: Option<Arc<Preparation>>,
    /// Told when a warm isolate is ready (a sandbox host then reports its counts: a
    /// prepared context may take longer than the report that follows a run's end).
    on_warm_ready: OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl Inner {
    fn pool(&self) -> MutexGuard<'_, Pool<Job, WarmIsolate>> {
        lock(&self.pool)
    }

    fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// The moment a run asks for a slot.
    fn admit_at(&self) -> AdmitAt {
        AdmitAt { now_ms: self.now_ms(), quarantined: quarantine::quarantined(), max_quarantined: quarantine::max_quarantined() }
    }

    /// Wakes the timer by `deadline` (the pool's next, read under its lock; armed after
    /// it is released, as arming may start the timer's thread).
    fn arm_timer(&self, deadline: Option<u64>) {
        if let Some(deadline) = deadline {
            self.timer.arm(self.epoch + Duration::from_millis(deadline));
        }
    }

    /// Fails the queued runs past their deadline; the next deadline (the timer's call).
    fn expire_queued(&self) -> Option<Instant> {
        let mut pool = self.pool();
        let expired = pool.expire_queued(self.now_ms());
        let next = pool.next_queue_deadline().map(|d| self.epoch + Duration::from_millis(d));
        drop(pool);
        for (job, failure) in expired {
            job.run().refuse(failure);
        }
        next
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
pub(crate) struct ThreadPool {
    inner: Arc<Inner>,
}

/// Every engine alive in the process, so Node's exit can stop them all first.
/// Each entry is tagged with the Node environment (main thread or worker) that made it.
static ENGINES: Mutex<Vec<(usize, Weak<Inner>)>> = Mutex::new(Vec::new());

/// Shuts every engine down and waits (up to `timeout`) until no isolate thread is left
/// except quarantined ones. Called as Node's environment is torn down: disposing an
/// isolate while Node disposes V8 would crash the process.
pub(crate) fn shutdown_all(env: usize, timeout: Duration) {
    let deadline = Instant::now() + timeout;
    stop_all(env, timeout);
    if !quarantine::on_main_thread() {
        return;
    }
    // A quarantined thread still owns a live isolate, and V8 (13+) aborts in V8::Dispose
    // when any isolate is left: the process leaves now, with the code its main thread was
    // exiting with. So does it while any other isolate thread is still alive past the wait
    // (its isolate being disposed as V8 is torn down would free V8's state twice). Only the
    // main environment's teardown may end the process: a Worker's ending leaves the
    // quarantined thread running (its process exits later, through here: lib/native.js
    // loads isolet on the main thread when a Worker loads it first).
    let unstopped = || crate::isolate::thread::live_threads() > quarantine::quarantined();
    while unstopped() && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(1));
    }
    if quarantine::quarantined() > 0 || unstopped() {
        quarantine::exit_without_v8_teardown();
    }
    crate::isolate::thread::join_ended(deadline);
}

/// Shuts down every engine of environment `env` and waits (up to `timeout`) for their
/// isolate threads. Called from `process.on('exit')` too: `process.exit()` disposes Node's
/// platform without running environment cleanup hooks, and an isolate thread still
/// creating or holding an isolate then would use a platform that is gone.
pub(crate) fn stop_all(env: usize, timeout: Duration) {
    let engines: Vec<_> = lock(&ENGINES).iter().filter(|(owner, _)| *owner == env).filter_map(|(_, e)| e.upgrade()).collect();
    let deadline = Instant::now() + timeout;
    for inner in engines {
        let engine = ThreadPool { inner };
        engine.shutdown();
        engine.wait_idle(deadline.saturating_duration_since(Instant::now()));
    }
    // `process.exit()` goes on to `exit()`: the threads that ended must be gone first.
    if quarantine::on_main_thread() {
        crate::isolate::thread::join_ended(deadline);
    }
}

fn sandbox_config(memory_mb: u32) -> SandboxConfig {
    let bytes = memory_mb as usize * 1024 * 1024;
    SandboxConfig { heap_limit_bytes: bytes, array_buffer_limit_bytes: bytes }
}

fn could_not_start() -> Failure {
    Failure::new(ErrorKind::Internal, "Could not start an isolate thread")
}

impl ThreadPool {
    /// `env` identifies the Node environment that owns the engine (see `shutdown_all`);
    /// `preparation`, what its warm isolates make ready before their run arrives.
    pub(crate) fn new(config: PoolConfig, env: usize, preparation: Option<Arc<Preparation>>) -> ThreadPool {
        let pool = Pool::new(config);
        let inner = Arc::new_cyclic(|me: &Weak<Inner>| {
            let me = me.clone();
            Inner {
                pool: Mutex::new(pool),
                idle: Condvar::new(),
                idle_waiters: AtomicUsize::new(0),
                sandboxes: Mutex::new(HashMap::new()),
                epoch: Instant::now(),
                timer: QueueTimer::new(Box::new(move || me.upgrade()?.expire_queued())),
                preparation,
                on_warm_ready: OnceLock::new(),
            }
        });
        let mut engines = lock(&ENGINES);
        engines.retain(|(_, e)| e.strong_count() > 0);
        engines.push((env, Arc::downgrade(&inner)));
        ThreadPool { inner }
    }

    /// `told` is called each time a warm isolate is ready (once set, for good).
    pub(crate) fn on_warm_ready(&self, told: Box<dyn Fn() + Send + Sync>) {
        let _ = self.inner.on_warm_ready.set(told);
    }

    /// Creates the warm pool (off the caller's path: each isolate on its own thread).
    pub(crate) fn warm_up(&self) {
        let mut launch = Launch::default();
        Self::replenish(&mut self.inner.pool(), &mut launch);
        self.launch(launch);
    }

    pub(crate) fn submit(&self, run: Arc<RunShared>, tenant: Tenant) {
        self.admit(Job::Run(run), tenant);
    }

    /// Admits a one-shot run or a sandbox's run: started, queued (with its deadline), or
    /// answered with the refusal.
    fn admit(&self, job: Job, tenant: Tenant) {
        let (id, max_queue_ms) = (job.run().id, job.run().spec.plan.max_queue_ms);
        // Threads parked after fatal OOMs hold their isolates for good: past their bound,
        // no new run may risk another.
        if let Some(failure) = quarantine::parked_refusal() {
            job.run().refuse(failure);
            return;
        }
        let mut pool = self.inner.pool();
        let admission = pool.admit(id, tenant, job, max_queue_ms, self.inner.admit_at());
        let mut launch = Launch::default();
        match admission {
            Admission::Start(job) => self.start(&mut pool, job, &mut launch),
            Admission::Queued => {
                let deadline = pool.next_queue_deadline();
                drop(pool);
                self.inner.arm_timer(deadline);
                return;
            }
            Admission::Refused(job, failure) => {
                drop(pool);
                job.run().refuse(failure);
                return;
            }
            Admission::QueuedInPlaceOf(out, failure) => {
                // Another tenant's newest queued run gave its place up (the queue is full).
                let deadline = pool.next_queue_deadline();
                drop(pool);
                self.inner.arm_timer(deadline);
                out.run().refuse(failure);
                return;
            }
        }
        drop(pool);
        self.launch(launch);
    }

    /// Aborts a run whether it is queued or running.
    pub(crate) fn abort(&self, run: &Arc<RunShared>) {
        if !self.withdraw(run, run.failure_for(StopReason::Aborted)) {
            run.request_stop(StopReason::Aborted);
        }
    }

    /// Answers `run` with `failure` if it waits in the queue; false if it does not.
    fn withdraw(&self, run: &Arc<RunShared>, failure: Failure) -> bool {
        let queued = self.inner.pool().remove_queued(run.id);
        match queued {
            Some(job) => {
                job.run().refuse(failure);
                true
            }
            None => false,
        }
    }

    /// Stops accepting work, aborts queued and running runs, drops warm isolates
    /// (closing their channels ends their threads).
    pub(crate) fn shutdown(&self) {
        let open: Vec<_> = lock(&self.inner.sandboxes).drain().filter_map(|(_, s)| s.upgrade()).collect();
        for sandbox in open {
            sandbox.close(CloseReason::Shutdown, true);
        }
        // Warm isolates still preparing their contexts stop now (no run will take them).
        if let Some(preparation) = &self.inner.preparation {
            preparation.stop_all();
        }
        let (queued, running) = self.inner.pool().shutdown();
        for job in queued {
            job.run().refuse(job.run().failure_for(StopReason::Shutdown));
        }
        for job in running {
            job.run().request_stop(StopReason::Shutdown);
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
            max_open_sandboxes: pool.config().max_open_sandboxes,
            max_open_sandboxes_per_tenant: pool.config().max_open_sandboxes_per_tenant,
            queue_expired: c.queue_expired,
        }
    }

    /// Starts `job`, which holds a slot in `pool`: a one-shot run on a warm isolate, or
    /// added to `launch` for a new thread (counted here, spawned once the lock is
    /// released); a sandbox's run is added to `launch` to be handed to its thread.
    fn start(&self, pool: &mut Pool<Job, WarmIsolate>, job: Job, launch: &mut Launch) {
        let weak = Arc::downgrade(&self.inner);
        let run = match job {
            Job::Run(run) => run,
            Job::Sandbox(run, core) => {
                let id = run.id;
                let sandbox_released = core.on_run_released();
                let admitted = run.admit(Box::new(move |failed, quarantined| {
                    sandbox_released(failed, quarantined);
                    if let Some(inner) = weak.upgrade() {
                        ThreadPool { inner }.finished(id, failed, quarantined);
                    }
                }));
                if admitted {
                    launch.sandbox.push((run, core));
                } else {
                    pool.forget(id); // it ended before it could start
                }
                return;
            }
        };
        let id = run.id;
        let admitted = run.admit(Box::new(move |failed, quarantined| {
            if let Some(inner) = weak.upgrade() {
                ThreadPool { inner }.finished(id, failed, quarantined);
            }
        }));
        if !admitted {
            pool.forget(id); // it ended before it could start
            return;
        }
        if let Some(preparation) = &self.inner.preparation {
            preparation.follow(&run);
        }
        let mut run = run;
        let shape = ContextShape::of(&run.spec.plan);
        while let Some((warm, fits)) = pool.take_warm(run.spec.plan.limits.memory_mb, |w| w.shape.is_none_or(|s| s == shape)) {
            match warm.jobs.send(run) {
                Ok(()) => {
                    // One that does not fit makes a fresh isolate for the run: a cold start.
                    pool.count_start(fits);
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
        for (run, core) in launch.sandbox {
            core.serve(run);
        }
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
            let ready = Box::new(move |ok: bool, shape: Option<ContextShape>| {
                if let Some(inner) = weak.upgrade() {
                    inner.pool().warm_ready(ok.then_some(WarmIsolate { jobs: tx, shape }));
                    if let Some(told) = inner.on_warm_ready.get() {
                        told();
                    }
                }
            });
            let prepare = self.inner.preparation.as_ref().and_then(|p| p.next());
            if self.spawn(sandbox_config(memory_mb), JobSource::Later { jobs: rx, ready, prepare }).is_err() {
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
    fn replenish(pool: &mut Pool<Job, WarmIsolate>, launch: &mut Launch) {
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
    fn slot_freed(&self, mut pool: MutexGuard<'_, Pool<Job, WarmIsolate>>) {
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

impl ThreadPool {
    /// Opens a persistent sandbox (or is refused, see `Pool::admit_sandbox`: it counts
    /// against the engine's bounds on open sandboxes, not its slots) and starts its
    /// isolate thread, which keeps it until closed. Its runs take slots as they come.
    pub(crate) fn open_sandbox(&self, id: u64, plan: SandboxPlan, code: Arc<crate::v8::EngineCode>) -> Result<Arc<SandboxCore>, Failure> {
        let tenant = Tenant::from(plan.base.tenant.as_deref());
        let config = sandbox_config(plan.base.limits.memory_mb);
        if let Some(failure) = quarantine::parked_refusal() {
            return Err(failure);
        }
        {
            let mut pool = self.inner.pool();
            pool.admit_sandbox(id, tenant.clone(), quarantine::quarantined(), quarantine::max_quarantined())?;
            pool.thread_started();
        }
        let link = Box::new(EngineLink { inner: Arc::downgrade(&self.inner), id, tenant });
        let (core, jobs) = SandboxCore::new(plan, link, code);
        lock(&self.inner.sandboxes).insert(id, Arc::downgrade(&core));
        let on_exit = self.on_thread_exit();
        let thread_core = core.clone();
        let body = Box::new(move || persistent::sandbox_main(config, thread_core, jobs));
        if IsolateThread::spawn_with(body, on_exit).is_err() {
            self.inner.thread_not_started(false);
            // The thread never ran: closing it gives its place back.
            core.close(CloseReason::Internal, false);
            return Err(could_not_start());
        }
        Ok(core)
    }

    /// Sandbox `id` is no longer open (it holds no slot: only idleness may change).
    fn sandbox_closed(&self, id: u64) {
        let mut pool = self.inner.pool();
        pool.sandbox_closed(id);
        let watched = self.inner.idle_watched();
        drop(pool);
        if watched {
            self.inner.idle.notify_all();
        }
    }
}

/// A persistent sandbox's way to its engine (see `SandboxLink`).
struct EngineLink {
    inner: Weak<Inner>,
    id: u64,
    tenant: Tenant,
}

impl SandboxLink for EngineLink {
    fn submit(&self, core: &Arc<SandboxCore>, run: Arc<RunShared>) {
        match self.inner.upgrade() {
            Some(inner) => ThreadPool { inner }.admit(Job::Sandbox(run, core.clone()), self.tenant.clone()),
            None => {
                run.refuse(Failure::shut_down());
            }
        }
    }

    fn abort(&self, run: &Arc<RunShared>) {
        match self.inner.upgrade() {
            Some(inner) => ThreadPool { inner }.abort(run),
            None => {
                run.request_stop(StopReason::Aborted);
            }
        }
    }

    fn withdraw(&self, run: &Arc<RunShared>, failure: Failure) -> bool {
        self.inner.upgrade().is_some_and(|inner| ThreadPool { inner }.withdraw(run, failure))
    }

    fn closed(&self) {
        if let Some(inner) = self.inner.upgrade() {
            lock(&inner.sandboxes).remove(&self.id);
            ThreadPool { inner }.sandbox_closed(self.id);
        }
    }
}

/// Isolate threads counted in the pool under its lock, to be spawned after it is released.
#[derive(Default)]
struct Launch {
    /// Runs that start on a new isolate of their own.
    cold: Vec<Arc<RunShared>>,
    /// Sandbox runs to hand to their sandbox's thread.
    sandbox: Vec<(Arc<RunShared>, Arc<SandboxCore>)>,
    /// Warm isolates to make.
    warm: usize,
}
