//! The life of one run as an explicit state machine:
//!
//! ```text
//! Queued -> Running -> Stopping{reason} -> Finished | Abandoned
//!    \          \______________________________/^
//!     \___________________ (never started) _____/
//! ```
//!
//! Four parties touch a run at once: the engine (admits, aborts, shuts down), the isolate
//! thread (finishes it, then exits), the watchdog (asks it to stop, gives up on a thread
//! that ignores termination) and the caller (aborts). Each asks this machine, under one
//! lock, what it may do; the machine answers with the steps to carry out, so the caller
//! is answered exactly once and the concurrency slot is given back exactly once, in an
//! order fixed per ending. Races become orderings of calls, which the tests below list.
use crate::error::Failure;

/// Why a run was asked to stop. The first reason asked for is the one reported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopReason {
    WallTimeout,
    CpuTimeout,
    Aborted,
    Shutdown,
}

/// What a run stopped for `reason` answers, in both isolation modes and whatever it was
/// doing when the stop came (looping, in a built-in whose thread had to be given up,
/// waiting on a host call, queued): a caller's stop is SandboxAbortedError, never a time
/// limit the run did not reach. `wall_time_ms`/`cpu_time_ms`: the run's limits.
pub fn stop_failure(reason: StopReason, wall_time_ms: u64, cpu_time_ms: u64) -> Failure {
    match reason {
        StopReason::WallTimeout => Failure::wall_timeout(wall_time_ms),
        StopReason::CpuTimeout => Failure::cpu_timeout(cpu_time_ms),
        StopReason::Aborted => Failure::aborted(),
        StopReason::Shutdown => Failure::shut_down(),
    }
}

/// The reason a stop asked for `asked` is recorded under. A limit the run has already
/// passed wins over a caller's stop (abort, shutdown) that came after it: the watchdog,
/// which ticks every 5 ms and may be delayed on a busy machine, can be late to notice,
/// and the run is answered for what ended it first. `elapsed_ms`/`cpu_used_ms`: the run's
/// clocks now (none before it started executing).
pub fn stop_reason_at(
    asked: StopReason,
    elapsed_ms: Option<u64>,
    wall_time_ms: u64,
    cpu_used_ms: Option<u64>,
    cpu_time_ms: Option<u64>,
) -> StopReason {
    if !matches!(asked, StopReason::Aborted | StopReason::Shutdown) {
        return asked;
    }
    if elapsed_ms.is_some_and(|e| e >= wall_time_ms) {
        return StopReason::WallTimeout;
    }
    if let (Some(used), Some(limit)) = (cpu_used_ms, cpu_time_ms) {
        if used >= limit {
            return StopReason::CpuTimeout;
        }
    }
    asked
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Waiting for a concurrency slot.
    Queued,
    /// Holds a slot; its thread is starting or executing.
    Running,
    /// Asked to stop; the thread has not finished yet. (When termination reached the
    /// isolate, for the watchdog's grace period, is the caller's to track: a run asked
    /// to stop before its isolate exists is terminated only once it does.)
    Stopping { reason: StopReason },
    /// The caller was answered with the run's own result (or a refusal).
    Finished,
    /// The thread ignored termination (or hit a fatal OOM) and was quarantined; the
    /// caller was answered without it. The thread may still end on its own later.
    Abandoned,
}

/// How a run ends; passed to [`RunState::finish`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ending {
    /// The isolate thread has the run's result. Its slot is given back when the thread
    /// has disposed its isolate ([`RunState::thread_exited`]).
    Completed,
    /// No thread will ever serve the run: refused at admission, aborted or shut down
    /// while queued, or its thread could not be started.
    NotStarted,
    /// The thread cannot be stopped: it is quarantined and the caller answered now.
    Abandoned,
}

/// One thing the party that ended a run must do, in the order given.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Count the run's thread as quarantined (it is alive: it cannot exit before the
    /// steps of this finish are done).
    Quarantine,
    /// Give the concurrency slot back; `quarantined`: its thread lives on in quarantine.
    ReleaseSlot { quarantined: bool },
    /// Send the completion to the caller.
    Answer,
}

/// What `request_stop` decided.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StopDecision {
    /// The run now stops for this reason: terminate its isolate (if it has one) and wake it.
    Stop,
    /// Not running yet: the reason is kept and the run stops as soon as it starts.
    Recorded,
    /// Already stopping (the first reason stands) or already ended: nothing to do.
    Ignored,
}

/// What the isolate thread must do as it exits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ThreadExit {
    /// Give the slot back now (the run finished normally; its isolate is disposed).
    pub release_slot: bool,
    /// The thread had been quarantined and ended on its own: it leaves the quarantine.
    pub left_quarantine: bool,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LifecycleError {
    /// The run already ended: a late finish (e.g. the thread finishing after the watchdog
    /// gave up on it). Expected in races; the caller does nothing.
    AlreadyEnded,
    /// A transition the lifecycle does not have (a bug in the caller).
    Illegal { phase: Phase, event: &'static str },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Slot {
    NotHeld,
    Held,
    Released,
}

#[derive(Debug, Clone)]
pub struct RunState {
    phase: Phase,
    slot: Slot,
    /// The thread called `thread_exited` (it can happen once).
    thread_gone: bool,
    /// The first reason the run was asked to stop for, kept once it has ended: an
    /// abandonment is decided after the phase has left `Stopping`, and must still say
    /// why (a shut-down run is aborted, not timed out).
    stopped_for: Option<StopReason>,
}

impl Default for RunState {
    fn default() -> Self {
        Self::new()
    }
}

const ANSWER: &[Step] = &[Step::Answer];
const ANSWER_THEN_RELEASE: &[Step] = &[Step::Answer, Step::ReleaseSlot { quarantined: false }];
// Counted and released before the caller hears of it, so neither the caller nor a
// process exiting right after sees a result while an uncounted thread still runs V8.
const QUARANTINE_RELEASE_ANSWER: &[Step] = &[Step::Quarantine, Step::ReleaseSlot { quarantined: true }, Step::Answer];

impl RunState {
    pub fn new() -> Self {
        RunState { phase: Phase::Queued, slot: Slot::NotHeld, thread_gone: false, stopped_for: None }
    }

    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// The reason the run is stopping for; none before a stop and once it has ended.
    pub fn stop_reason(&self) -> Option<StopReason> {
        match self.phase {
            Phase::Stopping { reason } => Some(reason),
            _ => None,
        }
    }

    /// Why the run was asked to stop (the first reason), before and after it ended;
    /// none if it never was.
    pub fn stopped_for(&self) -> Option<StopReason> {
        self.stopped_for
    }

    /// The caller was answered (finished or abandoned).
    pub fn has_ended(&self) -> bool {
        matches!(self.phase, Phase::Finished | Phase::Abandoned)
    }

    fn illegal<T>(&self, event: &'static str) -> Result<T, LifecycleError> {
        Err(LifecycleError::Illegal { phase: self.phase, event })
    }

    /// The run takes a concurrency slot. A run asked to stop while queued may still be
    /// admitted: it then stops as soon as its isolate exists.
    pub fn admit(&mut self) -> Result<(), LifecycleError> {
        match (self.phase, self.slot) {
            (Phase::Queued, Slot::NotHeld) => {
                self.phase = Phase::Running;
                self.slot = Slot::Held;
                Ok(())
            }
            (Phase::Stopping { .. }, Slot::NotHeld) => {
                self.slot = Slot::Held;
                Ok(())
            }
            (Phase::Finished | Phase::Abandoned, _) => Err(LifecycleError::AlreadyEnded),
            _ => self.illegal("admit"),
        }
    }

    /// Asks the run to stop for `reason`; the first reason wins.
    pub fn request_stop(&mut self, reason: StopReason) -> StopDecision {
        match self.phase {
            Phase::Queued => {
                self.phase = Phase::Stopping { reason };
                self.stopped_for = Some(reason);
                StopDecision::Recorded
            }
            Phase::Running => {
                self.phase = Phase::Stopping { reason };
                self.stopped_for = Some(reason);
                StopDecision::Stop
            }
            Phase::Stopping { .. } | Phase::Finished | Phase::Abandoned => StopDecision::Ignored,
        }
    }

    /// The one way a run ends. Returns the steps to carry out, in order, or why there
    /// are none.
    pub fn finish(&mut self, ending: Ending) -> Result<&'static [Step], LifecycleError> {
        if self.has_ended() {
            return Err(LifecycleError::AlreadyEnded);
        }
        match (ending, self.slot) {
            (Ending::NotStarted, Slot::NotHeld) => {
                self.phase = Phase::Finished;
                Ok(ANSWER)
            }
            (Ending::NotStarted, Slot::Held) => {
                self.phase = Phase::Finished;
                self.slot = Slot::Released;
                Ok(ANSWER_THEN_RELEASE)
            }
            // The slot goes back when the thread has disposed the isolate.
            (Ending::Completed, Slot::Held) => {
                self.phase = Phase::Finished;
                Ok(ANSWER)
            }
            (Ending::Abandoned, Slot::Held) if !self.thread_gone => {
                self.phase = Phase::Abandoned;
                self.slot = Slot::Released;
                Ok(QUARANTINE_RELEASE_ANSWER)
            }
            (Ending::Completed, _) => self.illegal("finish(Completed) without a slot"),
            (Ending::Abandoned, _) => self.illegal("finish(Abandoned) without a live thread"),
            (Ending::NotStarted, Slot::Released) => self.illegal("finish(NotStarted) after release"),
        }
    }

    /// The thread that served the run is exiting (its isolate is disposed).
    pub fn thread_exited(&mut self) -> Result<ThreadExit, LifecycleError> {
        if self.thread_gone || self.slot == Slot::NotHeld {
            return self.illegal("thread_exited");
        }
        let exit = match (self.phase, self.slot) {
            (Phase::Finished, Slot::Held) => {
                self.slot = Slot::Released;
                ThreadExit { release_slot: true, left_quarantine: false }
            }
            (Phase::Abandoned, _) => ThreadExit { release_slot: false, left_quarantine: true },
            // Running, Stopping, or a run whose slot was already given back without a thread.
            _ => return self.illegal("thread_exited"),
        };
        self.thread_gone = true;
        Ok(exit)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn running() -> RunState {
        let mut s = RunState::new();
        s.admit().unwrap();
        s
    }

    fn illegal(r: Result<impl std::fmt::Debug, LifecycleError>) -> bool {
        matches!(r, Err(LifecycleError::Illegal { .. }))
    }

    #[test]
    fn normal_run_answers_then_releases_at_thread_exit() {
        let mut s = RunState::new();
        assert_eq!(s.phase(), Phase::Queued);
        s.admit().unwrap();
        assert_eq!(s.phase(), Phase::Running);
        assert_eq!(s.finish(Ending::Completed), Ok(ANSWER));
        assert_eq!(s.phase(), Phase::Finished);
        assert_eq!(s.thread_exited(), Ok(ThreadExit { release_slot: true, left_quarantine: false }));
        // Exactly once.
        assert!(illegal(s.thread_exited()));
        assert_eq!(s.finish(Ending::Completed), Err(LifecycleError::AlreadyEnded));
    }

    #[test]
    fn stop_then_finish_reports_the_first_reason() {
        let mut s = running();
        assert_eq!(s.request_stop(StopReason::WallTimeout), StopDecision::Stop);
        assert_eq!(s.request_stop(StopReason::CpuTimeout), StopDecision::Ignored);
        assert_eq!(s.stop_reason(), Some(StopReason::WallTimeout));
        assert_eq!(s.finish(Ending::Completed), Ok(ANSWER));
        assert_eq!(s.stop_reason(), None);
        assert!(s.thread_exited().unwrap().release_slot);
    }

    #[test]
    fn stop_arriving_after_finish_is_ignored() {
        let mut s = running();
        s.finish(Ending::Completed).unwrap();
        assert_eq!(s.request_stop(StopReason::Aborted), StopDecision::Ignored);
        assert_eq!(s.phase(), Phase::Finished);
        // Also after the thread is gone.
        s.thread_exited().unwrap();
        assert_eq!(s.request_stop(StopReason::Shutdown), StopDecision::Ignored);
    }

    #[test]
    fn abort_while_queued_answers_without_a_slot() {
        let mut s = RunState::new();
        assert_eq!(s.request_stop(StopReason::Aborted), StopDecision::Recorded);
        assert_eq!(s.finish(Ending::NotStarted), Ok(ANSWER));
        // The engine may still pop it from a queue it raced with: it must not start.
        assert_eq!(s.admit(), Err(LifecycleError::AlreadyEnded));
        assert!(illegal(s.thread_exited()));
    }

    #[test]
    fn stop_recorded_while_queued_stops_the_run_once_admitted() {
        let mut s = RunState::new();
        s.request_stop(StopReason::Shutdown);
        s.admit().unwrap();
        assert_eq!(s.stop_reason(), Some(StopReason::Shutdown));
        assert_eq!(s.request_stop(StopReason::Aborted), StopDecision::Ignored);
        assert_eq!(s.finish(Ending::Completed), Ok(ANSWER));
        assert!(s.thread_exited().unwrap().release_slot);
    }

    #[test]
    fn refused_at_admission_answers_only() {
        let mut s = RunState::new();
        assert_eq!(s.finish(Ending::NotStarted), Ok(ANSWER));
        assert_eq!(s.finish(Ending::NotStarted), Err(LifecycleError::AlreadyEnded));
    }

    #[test]
    fn thread_that_could_not_start_answers_then_releases() {
        let mut s = running();
        assert_eq!(s.finish(Ending::NotStarted), Ok(ANSWER_THEN_RELEASE));
        // No thread will exit for it.
        assert!(illegal(s.thread_exited()));
    }

    #[test]
    fn timeout_then_late_finish_quarantines_first_and_ignores_the_late_result() {
        let mut s = running();
        s.request_stop(StopReason::WallTimeout);
        assert_eq!(s.finish(Ending::Abandoned), Ok(&[Step::Quarantine, Step::ReleaseSlot { quarantined: true }, Step::Answer][..]));
        assert_eq!(s.phase(), Phase::Abandoned);
        assert_eq!(s.finish(Ending::Completed), Err(LifecycleError::AlreadyEnded));
        // The thread ends on its own later: no second release, it leaves the quarantine.
        assert_eq!(s.thread_exited(), Ok(ThreadExit { release_slot: false, left_quarantine: true }));
    }

    #[test]
    fn finish_before_the_watchdog_gives_up_wins() {
        let mut s = running();
        s.request_stop(StopReason::CpuTimeout);
        s.finish(Ending::Completed).unwrap();
        assert_eq!(s.finish(Ending::Abandoned), Err(LifecycleError::AlreadyEnded));
        assert!(s.thread_exited().unwrap().release_slot);
    }

    #[test]
    fn abandon_after_the_thread_exited_is_illegal() {
        // The thread can exit only after finishing, so the watchdog sees AlreadyEnded, not this.
        let mut s = running();
        s.finish(Ending::Completed).unwrap();
        s.thread_exited().unwrap();
        assert_eq!(s.finish(Ending::Abandoned), Err(LifecycleError::AlreadyEnded));
    }

    #[test]
    fn shutdown_while_stopping_keeps_the_first_reason() {
        let mut s = running();
        s.request_stop(StopReason::WallTimeout);
        assert_eq!(s.request_stop(StopReason::Shutdown), StopDecision::Ignored);
        assert_eq!(s.stop_reason(), Some(StopReason::WallTimeout));
    }

    #[test]
    fn an_abandoned_run_still_knows_why_it_was_stopped() {
        // Shutdown (or abort) of a run in a built-in that ignores termination: the
        // watchdog abandons it after the phase has left Stopping; the answer must say
        // shut down, not a time limit that was never reached.
        for reason in [StopReason::Shutdown, StopReason::Aborted, StopReason::CpuTimeout] {
            let mut s = running();
            s.request_stop(reason);
            s.finish(Ending::Abandoned).unwrap();
            assert_eq!(s.stop_reason(), None);
            assert_eq!(s.stopped_for(), Some(reason));
            // A later reason changes nothing.
            s.request_stop(StopReason::WallTimeout);
            assert_eq!(s.stopped_for(), Some(reason));
        }
        // Recorded while queued, kept through admission and the end.
        let mut s = RunState::new();
        s.request_stop(StopReason::Shutdown);
        s.finish(Ending::NotStarted).unwrap();
        assert_eq!(s.stopped_for(), Some(StopReason::Shutdown));
        // A run never stopped has no reason, also after a fatal OOM abandonment.
        let mut s = running();
        s.finish(Ending::Abandoned).unwrap();
        assert_eq!(s.stopped_for(), None);
    }

    #[test]
    fn a_limit_already_passed_wins_over_a_callers_later_stop() {
        use StopReason::*;
        // Within its limits: the caller's reason stands.
        assert_eq!(stop_reason_at(Aborted, Some(99), 100, Some(10), Some(50)), Aborted);
        assert_eq!(stop_reason_at(Shutdown, None, 100, None, Some(50)), Shutdown);
        // Past its wall limit (the watchdog had not noticed yet), or its CPU limit.
        assert_eq!(stop_reason_at(Aborted, Some(100), 100, Some(10), None), WallTimeout);
        assert_eq!(stop_reason_at(Shutdown, Some(250), 100, None, None), WallTimeout);
        assert_eq!(stop_reason_at(Aborted, Some(60), 100, Some(50), Some(50)), CpuTimeout);
        // The watchdog's own reasons pass through.
        assert_eq!(stop_reason_at(CpuTimeout, Some(10), 100, Some(50), Some(50)), CpuTimeout);
        assert_eq!(stop_reason_at(WallTimeout, Some(10), 100, None, None), WallTimeout);
    }

    #[test]
    fn a_callers_stop_is_aborted_and_a_limit_names_itself() {
        use crate::error::ErrorKind;
        let kind = |r| stop_failure(r, 30_000, 500).kind;
        assert_eq!(kind(StopReason::Aborted), ErrorKind::Aborted);
        assert_eq!(kind(StopReason::Shutdown), ErrorKind::Aborted);
        assert_eq!(stop_failure(StopReason::Shutdown, 30_000, 500).message, "The sandbox engine was shut down");
        let wall = stop_failure(StopReason::WallTimeout, 30_000, 500);
        assert_eq!((wall.kind, wall.limit), (ErrorKind::Timeout, Some("wall")));
        assert!(wall.message.contains("30000 ms"));
        assert_eq!(stop_failure(StopReason::CpuTimeout, 30_000, 500).limit, Some("cpu"));
    }

    #[test]
    fn fatal_oom_while_running_abandons_without_a_stop() {
        let mut s = running();
        assert_eq!(s.finish(Ending::Abandoned).unwrap()[0], Step::Quarantine);
        assert_eq!(s.request_stop(StopReason::Aborted), StopDecision::Ignored);
    }

    #[test]
    fn transitions_the_lifecycle_does_not_have() {
        // Completing or abandoning a run that never had a slot.
        assert!(illegal(RunState::new().finish(Ending::Completed)));
        assert!(illegal(RunState::new().finish(Ending::Abandoned)));
        // Admitting twice.
        assert!(illegal(running().admit()));
        // A thread exiting before it finished its run.
        assert!(illegal(running().thread_exited()));
        let mut s = running();
        s.request_stop(StopReason::Aborted);
        assert!(illegal(s.thread_exited()));
        // A thread that never existed exiting.
        assert!(illegal(RunState::new().thread_exited()));
    }

    #[test]
    fn every_ordering_of_the_four_parties_answers_once_and_releases_once() {
        // Events: S = stop requested, F = thread finishes, G = watchdog gives up (only
        // after S), X = thread exits (only after F). Every interleaving must answer and
        // release exactly once.
        #[derive(Clone, Copy, Debug)]
        enum E {
            S,
            F,
            G,
            X,
        }
        fn orders(prefix: Vec<E>, left: Vec<E>, out: &mut Vec<Vec<E>>) {
            if left.is_empty() {
                out.push(prefix);
                return;
            }
            for i in 0..left.len() {
                let mut p = prefix.clone();
                p.push(left[i]);
                let mut l = left.clone();
                l.remove(i);
                orders(p, l, out);
            }
        }
        let mut all = Vec::new();
        orders(Vec::new(), vec![E::S, E::F, E::G, E::X], &mut all);
        let mut checked = 0;
        for order in all {
            let pos = |e: fn(&E) -> bool| order.iter().position(e).unwrap();
            if pos(|e| matches!(e, E::G)) < pos(|e| matches!(e, E::S)) {
                continue; // the watchdog gives up only on a stopping run
            }
            if pos(|e| matches!(e, E::X)) < pos(|e| matches!(e, E::F)) {
                continue; // the thread exits only after finishing
            }
            let mut s = running();
            let (mut answers, mut releases, mut quarantines) = (0, 0, 0);
            let mut count = |steps: &[Step]| {
                for step in steps {
                    match step {
                        Step::Answer => answers += 1,
                        Step::ReleaseSlot { .. } => releases += 1,
                        Step::Quarantine => quarantines += 1,
                    }
                }
            };
            let mut left_quarantine = false;
            for e in &order {
                match e {
                    E::S => {
                        s.request_stop(StopReason::WallTimeout);
                    }
                    E::F => match s.finish(Ending::Completed) {
                        Ok(steps) => count(steps),
                        Err(e) => assert_eq!(e, LifecycleError::AlreadyEnded, "{order:?}"),
                    },
                    E::G => match s.finish(Ending::Abandoned) {
                        Ok(steps) => count(steps),
                        Err(e) => assert_eq!(e, LifecycleError::AlreadyEnded, "{order:?}"),
                    },
                    E::X => {
                        let exit = s.thread_exited().unwrap();
                        if exit.release_slot {
                            count(&[Step::ReleaseSlot { quarantined: false }]);
                        }
                        left_quarantine = exit.left_quarantine;
                    }
                }
            }
            assert_eq!((answers, releases), (1, 1), "{order:?}");
            assert_eq!(quarantines, left_quarantine as i32, "{order:?}");
            checked += 1;
        }
        assert_eq!(checked, 6);
    }
}
