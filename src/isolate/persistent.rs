//! Persistent sandboxes: one isolate thread keeps one `Sandbox` (isolate and context)
//! and serves the runs of one sandbox in turn, each with its own `RunShared` (so the
//! watchdog, stops, host calls and events work as for one-shot runs). An open sandbox
//! holds no slot of its engine: each run is admitted through the engine's queue like a
//! one-shot run and handed to the sandbox's thread once it has a slot (`SandboxLink`,
//! `SandboxCore::serve`). What closes a sandbox is `isolet_core::sandbox`'s; this file
//! carries it out.
use std::sync::mpsc::{self, RecvTimeoutError, TryRecvError};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use isolet_core::sandbox::{budget_failure, closed_failure, waiting_run_failure, Budget, CloseReason, RunOutcome, SandboxPlan};
use isolet_core::{ErrorKind, Failure};

use isolet_core::RunPlan;

use super::run::{BeforeDone, Completion, EventSink, RunShared, RunSpec, StopReason};
use super::thread::{execute_plan, trim_after, Context, ThreadHost};
use crate::limits::lock;
use crate::v8::EngineCode;
use crate::v8::{Sandbox, SandboxConfig};

/// Told once, when a sandbox closes.
type OnClose = Box<dyn FnOnce(CloseReason) + Send>;

/// What a sandbox needs of the engine it is open on (`engine::pool` provides it).
pub(crate) trait SandboxLink: Send + Sync {
    /// Admits `run` of `core` through the engine's queue; once the run has a slot the
    /// engine hands it over with `SandboxCore::serve`.
    fn submit(&self, core: &Arc<SandboxCore>, run: Arc<RunShared>);
    /// Aborts `run`: taken out of the queue if it waits there, else asked to stop.
    fn abort(&self, run: &Arc<RunShared>);
    /// Answers `run` with `failure` if it still waits in the queue (false if it does not).
    fn withdraw(&self, run: &Arc<RunShared>, failure: Failure) -> bool;
    /// The sandbox no longer counts among the engine's open sandboxes (called once).
    fn closed(&self);
}

struct CoreState {
    budget: Budget,
    closed: Option<CloseReason>,
    /// The run being served, to stop it when the sandbox is closed meanwhile.
    current: Option<Weak<RunShared>>,
    /// The run waiting in the engine's queue for a slot, if any.
    waiting: Option<Weak<RunShared>>,
    /// `SandboxLink::closed` was called.
    released: bool,
}

/// One persistent sandbox, shared by its handle (JS), its isolate thread and its runs'
/// event sinks.
pub(crate) struct SandboxCore {
    pub plan: SandboxPlan,
    /// The engine's prelude (run once, before the sandbox's first run) and code cache.
    code: Arc<EngineCode>,
    /// The sandbox's own `modules`, which every run may import.
    modules: Arc<std::collections::BTreeMap<String, String>>,
    jobs: Mutex<Option<mpsc::Sender<Arc<RunShared>>>>,
    state: Mutex<CoreState>,
    link: Box<dyn SandboxLink>,
    /// Told once, when the sandbox closes (a sandbox host tells its parent).
    on_close: Mutex<Option<OnClose>>,
}

impl SandboxCore {
    pub(crate) fn new(
        plan: SandboxPlan,
        link: Box<dyn SandboxLink>,
        code: Arc<EngineCode>,
    ) -> (Arc<SandboxCore>, mpsc::Receiver<Arc<RunShared>>) {
        let (tx, rx) = mpsc::channel();
        let state = CoreState { budget: Budget::default(), closed: None, current: None, waiting: None, released: false };
        // The sandbox's map moves here: runs are planned elsewhere (by its handle, or the
        // parent in process isolation), so nothing else here reads it.
        let mut plan = plan;
        let modules = Arc::new(std::mem::take(&mut plan.base.modules));
        (
            Arc::new(SandboxCore {
                plan,
                code,
                modules,
                jobs: Mutex::new(Some(tx)),
                state: Mutex::new(state),
                link,
                on_close: Mutex::new(None),
            }),
            rx,
        )
    }

    pub(crate) fn budget(&self) -> Budget {
        lock(&self.state).budget
    }

    pub(crate) fn close_reason(&self) -> Option<CloseReason> {
        lock(&self.state).closed
    }

    /// Sets what to tell when the sandbox closes (told at once if it is closed already).
    pub(crate) fn on_close(&self, tell: Box<dyn FnOnce(CloseReason) + Send>) {
        match self.close_reason() {
            Some(reason) => tell(reason),
            None => *lock(&self.on_close) = Some(tell),
        }
    }

    /// Starts run `id` of this sandbox: `plan` (the run's own limits) within what is left
    /// of the sandbox's budgets, or `call` instead of its code, through the engine's queue.
    /// Runs are handed over one at a time by their caller, so the budget read here is the
    /// one the run gets.
    pub(crate) fn start_run(
        self: &Arc<Self>,
        id: u64,
        plan: Arc<RunPlan>,
        call: Option<(String, Vec<u8>)>,
        sink: Arc<dyn EventSink>,
    ) -> Arc<RunShared> {
        let budget = self.budget();
        let limits = &self.plan.limits;
        let mut plan = plan;
        let cpu = budget.run_cpu_limit_ms(limits, plan.limits.cpu_time_ms);
        let calls = budget.run_host_calls(limits, plan.bridge.max_messages);
        if cpu != plan.limits.cpu_time_ms || calls != plan.bridge.max_messages {
            let p = Arc::make_mut(&mut plan);
            p.limits.cpu_time_ms = cpu;
            p.bridge.max_messages = calls;
        }
        let core = Arc::downgrade(self);
        // The caller hears of the run after the sandbox has counted it.
        let sink: Arc<dyn EventSink> = Arc::new(BeforeDone {
            inner: sink,
            before_done: move |completion: &mut Completion| {
                if let Some(core) = core.upgrade() {
                    // An abandoned run closed the sandbox already: its slot release came first.
                    core.run_done(completion);
                }
            },
        });
        let mut spec = RunSpec::new(plan, &[]).with_code(self.code.clone());
        spec.call = call;
        spec.sandbox_modules = Some(self.modules.clone());
        let run = RunShared::new(id, spec, sink);
        {
            let mut state = lock(&self.state);
            if let Some(reason) = state.closed {
                drop(state);
                run.refuse(closed_failure(reason));
                return run;
            }
            state.waiting = Some(Arc::downgrade(&run));
        }
        self.link.submit(self, run.clone());
        run
    }

    /// The engine gave `run` a slot: hands it to the sandbox's thread, or refuses it when
    /// the sandbox closed meanwhile (its slot goes back through its release).
    pub(crate) fn serve(&self, run: Arc<RunShared>) {
        let sent = match lock(&self.jobs).as_ref() {
            Some(jobs) => jobs.send(run.clone()).is_ok(),
            None => false,
        };
        // Cleared after the send: the thread's idle check sees either this run waiting or
        // it in the channel.
        {
            let mut state = lock(&self.state);
            if state.waiting.as_ref().is_some_and(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(&run))) {
                state.waiting = None;
            }
        }
        if !sent {
            let reason = self.close_reason().unwrap_or(CloseReason::Internal);
            run.refuse(closed_failure(reason));
        }
    }

    /// Aborts run `run` of this sandbox, whether it waits for a slot or runs.
    pub(crate) fn abort(&self, run: &Arc<RunShared>) {
        self.link.abort(run);
    }

    /// A run of the sandbox waits in the engine's queue (so the sandbox is not idle).
    fn run_waiting(&self) -> bool {
        let waiting = lock(&self.state).waiting.as_ref().and_then(Weak::upgrade);
        waiting.is_some_and(|run| !run.has_answered())
    }

    /// A run of the sandbox ignored termination (its thread was quarantined): the sandbox
    /// closes (its thread is counted as quarantined).
    fn abandoned(&self, failed: Option<ErrorKind>) {
        let reason = if failed == Some(ErrorKind::MemoryLimit) { CloseReason::OutOfMemory } else { CloseReason::Unresponsive };
        self.close(reason, false);
    }

    /// What a run of this sandbox tells the engine when it gives its slot back.
    pub(crate) fn on_run_released(self: &Arc<Self>) -> impl Fn(Option<ErrorKind>, bool) + Send + 'static {
        let core = Arc::downgrade(self);
        move |failed, quarantined| {
            if let (Some(core), true) = (core.upgrade(), quarantined) {
                core.abandoned(failed);
            }
        }
    }

    /// Closes the sandbox (the first reason stays); its thread ends once its current run
    /// does. `stop_current`: stop the run being served (a close from outside).
    pub(crate) fn close(&self, reason: CloseReason, stop_current: bool) -> bool {
        let (current, waiting) = {
            let mut state = lock(&self.state);
            if state.closed.is_some() {
                return false;
            }
            state.closed = Some(reason);
            (state.current.as_ref().and_then(Weak::upgrade), state.waiting.take().and_then(|w| w.upgrade()))
        };
        // Dropping the only sender ends the thread's wait for the next run.
        drop(lock(&self.jobs).take());
        // Closed, it no longer counts as open (its isolate is disposed a moment later).
        self.release();
        let tell = lock(&self.on_close).take();
        if let Some(tell) = tell {
            tell(reason);
        }
        if let (true, Some(run)) = (stop_current, current) {
            let stop = if reason == CloseReason::Shutdown { StopReason::Shutdown } else { StopReason::Aborted };
            run.request_stop(stop);
        }
        // A run still waiting for a slot is answered now, as the run in flight would be.
        if let Some(run) = waiting {
            self.link.withdraw(&run, waiting_run_failure(reason));
        }
        true
    }

    /// The sandbox no longer counts as open, once (at its close, or its thread's end).
    fn release(&self) {
        let first = !std::mem::replace(&mut lock(&self.state).released, true);
        if first {
            self.link.closed();
        }
    }

    /// A run of this sandbox ended with `completion`: counts it against the budgets and
    /// closes the sandbox when the policy says so (before the caller hears of the run,
    /// so `closeReason` is set when its result arrives).
    fn run_done(&self, completion: &mut Completion) {
        let outcome = RunOutcome {
            failed: completion.result.as_ref().err().map(|f| f.kind),
            abandoned: false,
            cpu_time_ms: completion.stats.cpu_time_ms,
            host_calls: completion.stats.host_calls as u64,
        };
        let close = {
            let mut state = lock(&self.state);
            let close = state.budget.after_run(&self.plan.limits, &outcome);
            if state.closed.is_some() {
                None
            } else {
                close
            }
        };
        if let Some(reason) = close {
            if let Some(failure) = budget_failure(reason, &self.plan.limits) {
                if completion.result.as_ref().is_err_and(|f| f.kind == ErrorKind::Timeout) {
                    completion.result = Err(failure);
                }
            }
            self.close(reason, false);
        }
    }
}

/// The isolate thread of one sandbox: creates it, serves its runs in turn until it is
/// closed (or idle too long), disposes it. Returns whether the thread had been quarantined.
pub(crate) fn sandbox_main(config: SandboxConfig, core: Arc<SandboxCore>, jobs: mpsc::Receiver<Arc<RunShared>>) -> bool {
    let host = Arc::new(ThreadHost::default());
    let mut sandbox = Sandbox::new(&config, host.clone());
    match sandbox.as_mut() {
        Some(sb) => sb.set_persistent(),
        None => {
            core.close(CloseReason::Internal, false);
        }
    }
    let idle = core.plan.limits.idle_timeout_ms.map(Duration::from_millis);
    let mut installed = false;
    let mut quarantined = false;
    let mut peak = 0.0;
    let mut closing_kind = None;
    // Each run's release (`on_run_released`) gives its slot back after `thread_exited`.
    loop {
        let next = match idle {
            Some(after) => jobs.recv_timeout(after),
            None => jobs.recv().map_err(|_| RecvTimeoutError::Disconnected),
        };
        let run = match next {
            Ok(run) => run,
            // Waiting for a slot is not idleness; a run handed over just now is served.
            Err(RecvTimeoutError::Timeout) if core.run_waiting() => continue,
            Err(RecvTimeoutError::Timeout) => match jobs.try_recv() {
                Ok(run) => run,
                Err(TryRecvError::Empty | TryRecvError::Disconnected) => {
                    core.close(CloseReason::IdleTimeout, false);
                    continue;
                }
            },
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let (Some(sb), None) = (sandbox.as_mut(), core.close_reason()) else {
            run.refuse(closed_failure(core.close_reason().unwrap_or(CloseReason::Internal)));
            continue;
        };
        lock(&core.state).current = Some(Arc::downgrade(&run));
        let (failed, heap_peak) = execute_plan(sb, &host, &run, if installed { Context::Kept } else { Context::Fresh });
        installed = true;
        peak = heap_peak;
        sb.end_run();
        lock(&core.state).current = None;
        quarantined = run.thread_exited();
        if core.close_reason().is_some() {
            closing_kind = failed;
        }
        if quarantined {
            break;
        }
    }
    // Whatever was queued behind the last run is refused.
    while let Ok(run) = jobs.try_recv() {
        run.refuse(closed_failure(core.close_reason().unwrap_or(CloseReason::Closed)));
    }
    drop(sandbox);
    trim_after(peak, closing_kind);
    core.release();
    quarantined
}
