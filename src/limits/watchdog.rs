//! One process-wide watchdog thread. Every 5 ms it checks the runs it watches:
//! wall-clock deadline passed or CPU time used up → `RunShared::stop`, which calls V8's
//! `TerminateExecution`. Termination reaches infinite loops, microtask and promise
//! loops and `Atomics.wait`. A few built-ins never check for it; if a stopped run has
//! not finished after `GRACE`, the watchdog reports the timeout itself and quarantines
//! the thread (idle priority, left to run; see `quarantine`).
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::isolate::thread::cpu_time_of;
use crate::isolate::{Completion, RunShared, StopReason};

use super::quarantine;

const TICK: Duration = Duration::from_millis(5);
/// How long a stopped run may take to unwind before its thread is given up on.
pub(crate) const GRACE: Duration = Duration::from_millis(400);

struct Watchdog {
    runs: Mutex<Vec<Arc<RunShared>>>,
    /// Runs to terminate on the next wake-up (memory limit reached).
    terminate: Mutex<Vec<Arc<RunShared>>>,
    cv: Condvar,
}

fn watchdog() -> &'static Watchdog {
    static WATCHDOG: OnceLock<Watchdog> = OnceLock::new();
    WATCHDOG.get_or_init(|| {
        std::thread::Builder::new()
            .name("isolet-watchdog".into())
            .spawn(|| watch_loop(watchdog()))
            .expect("isolet: cannot start the watchdog thread");
        Watchdog { runs: Mutex::new(Vec::new()), terminate: Mutex::new(Vec::new()), cv: Condvar::new() }
    })
}

/// Starts enforcing `run`'s time limits; call when it starts executing.
pub(crate) fn watch(run: Arc<RunShared>) {
    let dog = watchdog();
    dog.runs.lock().unwrap().push(run);
    dog.cv.notify_one();
}

/// Terminates `run`'s isolate from the watchdog thread, as soon as possible. For calls
/// made on the isolate's own thread inside V8 (e.g. the near-heap-limit callback),
/// where V8 may not honour a termination request.
pub(crate) fn terminate_soon(run: Arc<RunShared>) {
    let dog = watchdog();
    dog.terminate.lock().unwrap().push(run);
    dog.cv.notify_one();
}

fn watch_loop(dog: &'static Watchdog) {
    let mut runs = dog.runs.lock().unwrap();
    loop {
        let pending: Vec<_> = dog.terminate.lock().unwrap().drain(..).collect();
        for run in pending {
            run.terminate_isolate();
        }
        if runs.is_empty() {
            runs = dog.cv.wait_timeout(runs, Duration::from_millis(100)).unwrap().0;
            continue;
        }
        runs = dog.cv.wait_timeout(runs, TICK).unwrap().0;
        let now = Instant::now();
        runs.retain(|run| check(run, now));
    }
}

/// Returns whether to keep watching `run`.
fn check(run: &Arc<RunShared>, now: Instant) -> bool {
    if run.is_delivered() {
        return false;
    }
    let Some(started) = run.started_at() else { return true };
    let limits = run.spec.limits;
    if now.duration_since(started) >= Duration::from_millis(limits.wall_time_ms) {
        run.stop(StopReason::WallTimeout);
    }
    if let (Some(cpu_limit), Some(thread)) = (limits.cpu_time_ms, run.thread()) {
        if cpu_time_of(&thread) >= Duration::from_millis(cpu_limit) {
            run.stop(StopReason::CpuTimeout);
        }
    }
    if let (Some(reason), Some(stopped)) = (run.stop_reason(), run.stopped_at()) {
        if now.duration_since(stopped) >= GRACE {
            give_up(run, reason, started, now);
            return false;
        }
    }
    true
}

/// The run ignored termination: answer for it and take its thread out of service.
fn give_up(run: &Arc<RunShared>, reason: StopReason, started: Instant, now: Instant) {
    let stats = crate::isolate::ExecStats {
        wall_time_ms: now.duration_since(started).as_secs_f64() * 1000.0,
        cpu_time_ms: run.thread().map(|t| cpu_time_of(&t).as_secs_f64() * 1000.0).unwrap_or(0.0),
        ..Default::default()
    };
    let failure = run.failure_for(reason);
    let kind = failure.kind;
    if !run.claim_delivery() {
        return;
    }
    // Count the thread before answering, so the caller (and a process exiting right
    // after) never sees the result while an uncounted thread still runs V8 code.
    let quarantined = run.quarantine_thread(kind, |thread| {
        // SAFETY: the gate keeps the thread from exiting during the call.
        unsafe { quarantine::quarantine(thread.pthread) };
    });
    if !quarantined {
        // The thread finished meanwhile and gave its slot back itself.
        run.release(Some(kind), false);
    }
    run.send_claimed(Completion { result: Err(failure), stats, logs: run.take_logs() });
}
