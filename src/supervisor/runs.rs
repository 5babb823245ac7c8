//! A run's end: its one answer (`finish`), with its slot given back, and abort.
use std::sync::Arc;

use isolet_core::frame::{self, Kind};
use isolet_core::run_state::{Ending, StopReason};
use isolet_core::Failure;

use super::writer::HostWriter;
use super::State;
use crate::isolate::run::ExecStats;
use crate::isolate::Completion;

/// A host's writer and the frames held back for it.
pub(super) type HeldFrames = (Arc<HostWriter>, Vec<Vec<u8>>);

pub(super) fn failure_completion(failure: Failure, wall_time_ms: f64) -> Completion {
    Completion { result: Err(failure), stats: ExecStats { wall_time_ms, ..Default::default() }, logs: Vec::new() }
}

pub(super) fn shut_down_failure() -> Failure {
    Failure::shut_down()
}

impl State {
    /// Ends run `id` with `completion` (its only answer), gives its slot back.
    pub(super) fn finish(&mut self, id: u64, mut completion: Completion) {
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

    pub(super) fn fail(&mut self, id: u64, failure: Failure) {
        self.fail_with(id, failure, None);
    }

    /// As `fail`, with the run's CPU time and heap when they are known from outside it
    /// (`policy::memory_end_stats`).
    pub(super) fn fail_with(&mut self, id: u64, failure: Failure, figures: Option<(f64, u64)>) {
        let wall = self.runs.get(&id).and_then(|r| r.first_started).map(|t| t.elapsed().as_secs_f64() * 1000.0).unwrap_or(0.0);
        let mut completion = failure_completion(failure, wall);
        if let Some((cpu_time_ms, heap_bytes)) = figures {
            completion.stats.cpu_time_ms = cpu_time_ms;
            completion.stats.heap_used_bytes = heap_bytes as f64;
            completion.stats.heap_peak_bytes = heap_bytes as f64;
        }
        self.finish(id, completion);
    }

    pub(super) fn abort(&mut self, id: u64) {
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
}
