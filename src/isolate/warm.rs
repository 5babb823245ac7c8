//! A warm isolate makes its context ready while it waits for its run: `console`, the web
//! APIs and the engine's prelude are evaluated then, off the run's path, so a fresh run
//! starts at its own code (issue 35: a prelude at no cost). The rules of when such a
//! context may serve a run are `isolet_core::warm_context`'s.
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use isolet_core::run_state::StopReason;
use isolet_core::warm_context::{ContextShape, WarmUpSeen, WARM_UP_TIME_MS};

use super::run::RunShared;
use crate::limits::lock;
use crate::limits::watchdog::{self, Observation, Watched};
use crate::v8::{EngineCode, IsolateHandle, Sandbox, Step};

/// What a warm isolate's thread tells its pool once it is ready to take a run (or never
/// will be: `false`), with the shape of the context it prepared, if any.
pub(crate) type Ready = Box<dyn FnOnce(bool, Option<ContextShape>) + Send>;

/// `Ready`, called once: by the thread, or for it when it gives up on its warm-up (a
/// built-in that ignores termination, a fatal OOM: the thread never comes back).
#[derive(Clone)]
pub(crate) struct ReadyOnce(Arc<Mutex<Option<Ready>>>);

impl ReadyOnce {
    pub(crate) fn new(ready: Ready) -> ReadyOnce {
        ReadyOnce(Arc::new(Mutex::new(Some(ready))))
    }

    pub(crate) fn call(&self, ok: bool, shape: Option<ContextShape>) {
        let ready = lock(&self.0).take();
        if let Some(ready) = ready {
            ready(ok, shape);
        }
    }
}

/// What a pool's warm isolates prepare: the engine's code, in the shape its runs have
/// lately asked for (the last run started: a run of another shape takes a fresh isolate).
pub(crate) struct Preparation {
    code: Arc<EngineCode>,
    shape: Mutex<ContextShape>,
    /// Cleared for good once a warm-up could not be used (`WarmUpSeen::usable`), and when
    /// the engine shuts down.
    enabled: AtomicBool,
    /// The warm-ups in progress, stopped when the engine shuts down.
    active: Mutex<Vec<Weak<WarmUp>>>,
    /// The engine shut down.
    stopped: AtomicBool,
}

impl Preparation {
    pub(crate) fn new(code: Arc<EngineCode>, web: bool) -> Arc<Preparation> {
        Arc::new(Preparation {
            code,
            shape: Mutex::new(ContextShape { web, fetch: false }),
            enabled: AtomicBool::new(true),
            active: Mutex::new(Vec::new()),
            stopped: AtomicBool::new(false),
        })
    }

    /// Stops the warm-ups in progress and prepares no more (the engine shuts down).
    pub(crate) fn stop_all(&self) {
        self.stopped.store(true, Ordering::Relaxed);
        self.enabled.store(false, Ordering::Relaxed);
        let active: Vec<_> = lock(&self.active).drain(..).filter_map(|w| w.upgrade()).collect();
        for warm in active {
            warm.request_stop(StopReason::Shutdown);
        }
    }

    /// A run was started: later warm isolates take the shape of its context.
    pub(crate) fn follow(&self, run: &RunShared) {
        if Arc::ptr_eq(&run.spec.code, &self.code) {
            *lock(&self.shape) = ContextShape::of(&run.spec.plan);
        }
    }

    /// What the next warm isolate evaluates, unless preparing is off.
    pub(crate) fn next(self: &Arc<Self>) -> Option<Prepare> {
        self.enabled.load(Ordering::Relaxed).then(|| Prepare { from: self.clone(), shape: *lock(&self.shape) })
    }
}

/// One warm isolate's preparation.
pub(crate) struct Prepare {
    from: Arc<Preparation>,
    shape: ContextShape,
}

impl Prepare {
    pub(crate) fn shape(&self) -> ContextShape {
        self.shape
    }

    /// The engine shut down: no isolate is wanted any more.
    pub(crate) fn engine_stopped(&self) -> bool {
        self.from.stopped.load(Ordering::Relaxed)
    }

    /// Whether the context prepared for this shape serves `run` as a fresh one would.
    pub(crate) fn serves(&self, run: &RunShared) -> bool {
        Arc::ptr_eq(&run.spec.code, &self.from.code) && ContextShape::of(&run.spec.plan) == self.shape
    }
}

/// A warm-up in progress, as the watchdog and the sandbox's host see it.
pub(crate) struct WarmUp {
    started: Instant,
    handle: IsolateHandle,
    ready: ReadyOnce,
    /// One lock for what it saw and whether it ended: a stop decided as the warm-up ends
    /// either is seen by it or terminates nothing (a termination left pending would end
    /// the run's first script).
    state: Mutex<WarmState>,
}

#[derive(Default)]
struct WarmState {
    seen: WarmUpSeen,
    done: bool,
    stopped_at: Option<Instant>,
}

impl WarmUp {
    /// The warm-up wrote to the console.
    pub(crate) fn logged(&self) {
        lock(&self.state).seen.logged = true;
    }

    /// The warm-up asked for a tool, `data` or a module: things only a run has.
    pub(crate) fn asked_for_run(&self) {
        lock(&self.state).seen.asked_for_run = true;
    }

    /// The isolate reached its heap limit: stop the warm-up from the watchdog's thread.
    pub(crate) fn at_heap_limit(self: &Arc<Self>) {
        let me: Weak<dyn Watched> = Arc::downgrade(self) as Weak<dyn Watched>;
        watchdog::terminate_soon(me);
    }

    /// Its thread will never come back (parked after a fatal OOM, or held by a built-in
    /// that ignores termination): the pool is told now that it will never be ready.
    pub(crate) fn give_up(&self) {
        lock(&self.state).done = true;
        self.ready.call(false, None);
    }

    /// Ends the warm-up: what it saw.
    fn end(&self) -> WarmUpSeen {
        let mut state = lock(&self.state);
        state.done = true;
        state.seen
    }
}

impl Watched for WarmUp {
    fn observe(&self) -> Option<Observation> {
        let state = lock(&self.state);
        if state.done {
            return None;
        }
        Some(Observation {
            wall_limit: Duration::from_millis(WARM_UP_TIME_MS),
            cpu_limit: None,
            elapsed: self.started.elapsed(),
            cpu_used: None,
            terminated_for: state.stopped_at.map(|t| t.elapsed()),
            cpu_at_termination: None,
        })
    }

    fn request_stop(&self, _reason: StopReason) {
        let mut state = lock(&self.state);
        if state.done {
            return;
        }
        state.seen.stopped = true;
        state.stopped_at.get_or_insert_with(Instant::now);
        self.handle.terminate();
    }

    /// A built-in that ignores termination holds the thread: no run is attached to answer,
    /// so the thread is left to finish (its isolate is then dropped, never handed a run).
    fn abandon(&self) {
        self.give_up();
    }

    fn terminate_isolate(&self) {
        self.request_stop(StopReason::WallTimeout);
    }
}

/// The host side of a warm-up: where the sandbox's host records what it saw.
pub(crate) type WarmingSlot = Mutex<Option<Arc<WarmUp>>>;

/// Prepares `sandbox`'s context as `prepare` says: the console and web globals, then the
/// prelude, watched for time and memory. True when the context may serve a run; false
/// when the isolate must be dropped (and then no later warm isolate prepares).
pub(crate) fn prepare_context(
    sandbox: &mut Sandbox,
    warming: &WarmingSlot,
    web: &crate::web::WebState,
    prepare: &Prepare,
    ready: &ReadyOnce,
) -> bool {
    let warm = Arc::new(WarmUp { started: Instant::now(), handle: sandbox.handle(), ready: ready.clone(), state: Mutex::default() });
    {
        let mut active = lock(&prepare.from.active);
        active.retain(|w| w.strong_count() > 0);
        active.push(Arc::downgrade(&warm));
    }
    // Shut down meanwhile: nothing to prepare for.
    if !prepare.from.enabled.load(Ordering::Relaxed) {
        warm.end();
        return false;
    }
    *lock(warming) = Some(warm.clone());
    watchdog::watch(Arc::downgrade(&warm) as Weak<dyn Watched>);
    web.begin_run();
    if prepare.shape.web {
        web.start();
    }
    // The fetch tool's index is the run's: set as it arrives (`WebState::set_fetch_tool`).
    let fetch_tool = prepare.shape.fetch.then_some(u32::MAX);
    let settled = crate::web::install(sandbox, web, prepare.shape.web, fetch_tool).is_none()
        && matches!(sandbox.run_prelude(&prepare.from.code), Step::Settled);
    let mut seen = warm.end();
    *lock(warming) = None;
    // A callback the prelude scheduled that threw would end the run it is handed to.
    seen.settled = settled && web.take_uncaught().is_none();
    seen.timer_set = web.next_timer().is_some();
    seen.read_run_state = web.read_run_state();
    seen.stopped |= sandbox.hit_memory_limit();
    let usable = seen.usable();
    if !usable {
        prepare.from.enabled.store(false, Ordering::Relaxed);
    }
    usable
}
