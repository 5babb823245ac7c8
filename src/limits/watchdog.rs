//! One process-wide watchdog thread. Every 5 ms it looks at the runs it watches: wall
//! clock deadline passed or CPU time used up -> it asks the run to stop, and the run
//! calls V8's `TerminateExecution`. Termination reaches infinite loops, microtask and
//! promise loops and `Atomics.wait`. A few built-ins never check for it; if a run asked
//! to stop has not finished after the grace (on a CPU: see `give_up_on_stopped`) since
//! termination reached its isolate, the watchdog asks it to abandon its thread (the run answers its caller and quarantines the thread,
//! see `quarantine`). The watchdog decides when; the run decides what that means, and
//! is the only one that answers. It holds runs weakly: a run that has ended and been
//! dropped is simply forgotten.
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Condvar, Mutex, OnceLock, Weak};
use std::time::Duration;

use isolet_core::host_policy;
use isolet_core::run_state::StopReason;

use super::lock;

const TICK: Duration = Duration::from_millis(5);
/// Idle ticks (no run watched) before the watchdog sleeps for long. While it ticks, a new
/// run is seen at the next tick without a wake-up, so a steady stream of short runs costs
/// no `FUTEX_WAKE` (and no context switch of the watchdog) per run.
const IDLE_TICKS: u32 = 20;
/// The long sleep of an idle watchdog (a backstop: a new run wakes it).
const IDLE_SLEEP: Duration = Duration::from_millis(100);
/// The longest a stopped run's thread is waited for when the machine starves it of CPU
/// (`host_policy::give_up_on_stopped`): `STARVED_GRACE_MS` here, the grace alone in a
/// sandbox host (`answer_within_grace`).
static MAX_GRACE_MS: AtomicU64 = AtomicU64::new(host_policy::STARVED_GRACE_MS);

/// A sandbox host's watchdog answers every stopped run within the grace, as its parent's
/// deadline counts on (the parent ends the host rather than waiting).
pub(crate) fn answer_within_grace() {
    MAX_GRACE_MS.store(host_policy::WATCHDOG_GRACE_MS, Ordering::Relaxed);
}

/// What the watchdog sees of a run at one tick.
pub(crate) struct Observation {
    pub wall_limit: Duration,
    pub cpu_limit: Option<Duration>,
    /// Since the run started executing.
    pub elapsed: Duration,
    pub cpu_used: Option<Duration>,
    /// Since termination reached the run's isolate (it is stopping).
    pub terminated_for: Option<Duration>,
    /// The thread's CPU time when termination reached it.
    pub cpu_at_termination: Option<Duration>,
}

/// A run as the watchdog sees it.
pub(crate) trait Watched: Send + Sync {
    /// The run's clocks now, or `None` once it has ended (stop watching it).
    fn observe(&self) -> Option<Observation>;
    /// Ask the run to stop (the first reason wins).
    fn request_stop(&self, reason: StopReason);
    /// The run ignored termination past its grace: it gives up on its thread.
    fn abandon(&self);
    /// Terminate the run's current JS execution (the memory limit, whose flag lives in
    /// the sandbox, decides what that means).
    fn terminate_isolate(&self);
}

struct Watchdog {
    runs: Mutex<Vec<Weak<dyn Watched>>>,
    /// Runs to terminate on the next wake-up (memory limit reached).
    terminate: Mutex<Vec<Weak<dyn Watched>>>,
    cv: Condvar,
    /// The watchdog is in its long sleep: a new run must wake it. Written and read under
    /// `runs`' lock, so a run added just before it falls asleep keeps it ticking instead.
    dozing: AtomicBool,
}

fn watchdog() -> &'static Watchdog {
    static WATCHDOG: OnceLock<Watchdog> = OnceLock::new();
    WATCHDOG.get_or_init(|| {
        std::thread::Builder::new()
            .name("isolet-watchdog".into())
            .spawn(|| watch_loop(watchdog()))
            // Without a watchdog no run could be held to its time limits: failing the
            // first run loudly (napi turns the panic into a JS exception) beats running
            // every later one unbounded.
            .expect("isolet: cannot start the watchdog thread");
        Watchdog { runs: Mutex::new(Vec::new()), terminate: Mutex::new(Vec::new()), cv: Condvar::new(), dozing: AtomicBool::new(false) }
    })
}

/// Starts enforcing `run`'s time limits; call when it starts executing.
pub(crate) fn watch(run: Weak<dyn Watched>) {
    let dog = watchdog();
    let mut runs = lock(&dog.runs);
    runs.push(run);
    let dozing = dog.dozing.load(Ordering::Relaxed);
    drop(runs);
    if dozing {
        dog.cv.notify_one();
    }
}

/// Terminates `run`'s isolate from the watchdog thread, as soon as possible. For calls
/// made on the isolate's own thread inside V8 (e.g. the near-heap-limit callback),
/// where V8 may not honour a termination request.
pub(crate) fn terminate_soon(run: Weak<dyn Watched>) {
    let dog = watchdog();
    lock(&dog.terminate).push(run);
    dog.cv.notify_one();
}

fn watch_loop(dog: &'static Watchdog) {
    let mut runs = lock(&dog.runs);
    let mut idle_ticks = IDLE_TICKS;
    loop {
        let pending: Vec<_> = lock(&dog.terminate).drain(..).collect();
        for run in pending.iter().filter_map(Weak::upgrade) {
            run.terminate_isolate();
        }
        let dozing = runs.is_empty() && idle_ticks >= IDLE_TICKS;
        dog.dozing.store(dozing, Ordering::Relaxed);
        runs = dog.cv.wait_timeout(runs, if dozing { IDLE_SLEEP } else { TICK }).unwrap_or_else(|e| e.into_inner()).0;
        dog.dozing.store(false, Ordering::Relaxed);
        runs.retain(|run| run.upgrade().is_some_and(|run| check(&*run)));
        idle_ticks = if runs.is_empty() { idle_ticks.saturating_add(1) } else { 0 };
    }
}

/// Returns whether to keep watching `run`.
fn check(run: &dyn Watched) -> bool {
    let Some(seen) = run.observe() else { return false };
    if seen.elapsed >= seen.wall_limit {
        run.request_stop(StopReason::WallTimeout);
    }
    if let (Some(limit), Some(used)) = (seen.cpu_limit, seen.cpu_used) {
        if used >= limit {
            run.request_stop(StopReason::CpuTimeout);
        }
    }
    if let Some(terminated_for) = seen.terminated_for {
        let ms = |d: Duration| d.as_millis() as u64;
        let cpu_since = seen.cpu_used.zip(seen.cpu_at_termination).map(|(now, then)| ms(now.saturating_sub(then)));
        if host_policy::give_up_on_stopped(ms(terminated_for), cpu_since, MAX_GRACE_MS.load(Ordering::Relaxed)) {
            run.abandon();
            return false;
        }
    }
    true
}
