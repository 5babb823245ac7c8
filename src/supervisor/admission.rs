//! Admission and placement: slots from the fair queue (`isolet_core::queue::Pool`), queue
//! deadlines, and which host a run that holds a slot starts on (`policy::place`).
use std::sync::{Arc, MutexGuard};
use std::time::{Duration, Instant};

use isolet_core::frame;
use isolet_core::host_policy as policy;
use isolet_core::queue::AdmitAt;
use isolet_core::{ErrorKind, Failure};

use super::process::CpuReader;
use super::writer::HostWriter;
use super::{HostPhase, Run, State};

impl State {
    /// The moment a run asks for a slot (stuck threads are each host's to count).
    pub(super) fn admit_at(&self) -> AdmitAt {
        AdmitAt { now_ms: self.now_ms(), quarantined: 0, max_quarantined: usize::MAX }
    }

    /// Wakes the timer by the pool's next queue deadline.
    pub(super) fn arm_timer(&self) {
        if let Some(deadline) = self.pool.next_queue_deadline() {
            self.timer.arm(self.epoch + Duration::from_millis(deadline));
        }
    }

    /// Fails the queued runs past their deadline; the next deadline (the timer's call).
    pub(super) fn expire_queued(&mut self) -> Option<Instant> {
        for (id, failure) in self.pool.expire_queued(self.now_ms()) {
            self.fail(id, failure);
        }
        self.pool.next_queue_deadline().map(|d| self.epoch + Duration::from_millis(d))
    }

    /// Run `id` got a slot in the pool: a one-shot run waits for a host, a sandbox's run
    /// goes to its sandbox's host.
    pub(super) fn take_slot(&mut self, id: u64) {
        let Some(run) = self.runs.get_mut(&id) else { return };
        if run.life.admit().is_err() {
            return;
        }
        if run.sandbox.is_some() {
            self.start_sandbox_run(id);
        } else {
            self.unplaced.push_back(id);
        }
    }

    /// Sends `frame` to a host by `w`, or holds it back while `submit` dispatches (see
    /// `send_after_unlock`).
    pub(super) fn send_or_hold(&mut self, w: Arc<HostWriter>, frame: Vec<u8>) {
        match self.held.as_mut() {
            Some(held) => match held.iter_mut().find(|(o, _)| Arc::ptr_eq(o, &w)) {
                Some((_, frames)) => frames.push(frame),
                None => held.push((w, vec![frame])),
            },
            None => w.send(&[&frame]),
        }
    }

    /// Gives runs holding a slot a host, and slots to queued runs.
    pub(super) fn dispatch(&mut self) {
        for key in std::mem::take(&mut self.unstartable) {
            self.host_exited(key, None, "", Some("no thread to start sandbox hosts".into()));
        }
        self.ensure_hosts();
        while let Some(id) = self.pool.next_to_start() {
            self.take_slot(id);
        }
        let mut i = 0;
        let mut waiting_alone = 0;
        while i < self.unplaced.len() {
            let id = self.unplaced[i];
            let Some(run) = self.runs.get_mut(&id) else {
                self.unplaced.remove(i);
                continue;
            };
            let alone = run.alone;
            // A run started again gets what is left of its wall limit, counted from its
            // first start; with too little left it fails with its host's end.
            if let (Some(lost), Some(first)) = (run.lost.clone(), run.first_started) {
                match policy::restart_wall_ms(run.wall_time_ms, first.elapsed().as_millis() as u64) {
                    Some(left) => {
                        if let Some(plan) = run.plan.as_mut() {
                            // A copy only for a run that is started again (rare).
                            Arc::make_mut(plan).limits.wall_time_ms = left;
                        }
                    }
                    None => {
                        self.unplaced.remove(i);
                        self.fail(id, lost);
                        continue;
                    }
                }
            }
            let views = self.host_views();
            let placed = policy::place(&views, self.per_host, alone)
                .or_else(|| policy::place_overflow(&views, self.config.max_concurrent, alone))
                .or_else(|| policy::place_last_resort(&views, self.config.max_concurrent, alone));
            match placed {
                Some(h) => {
                    self.unplaced.remove(i);
                    self.start_on(h, id);
                }
                None if alone => {
                    waiting_alone += 1;
                    i += 1;
                }
                None => break,
            }
        }
        if !self.shut && self.invalid_config.is_none() {
            let starting = self.hosts.iter().filter(|h| h.for_solo && h.phase == HostPhase::Starting && h.end.is_none()).count();
            for _ in 0..policy::solo_hosts_to_start(waiting_alone, starting) {
                // Hosts for runs started again are replacements too: a stream of
                // host-ending runs gets no more starts than the restart rate.
                if !self.starts.may_replace(self.now_ms()) {
                    self.call_later(Duration::from_millis(policy::RESTART_PERIOD_MS));
                    break;
                }
                let key = self.spawn_host();
                if let Some(h) = self.host_mut(key) {
                    h.for_solo = true;
                }
            }
        }
        self.fail_if_no_host_can_start();
    }

    /// While no host can be started and none serves, runs waiting for one fail now.
    pub(super) fn fail_if_no_host_can_start(&mut self) {
        let Some(failure) = self.cannot_start.clone() else { return };
        if self.hosts.iter().any(|h| h.end.is_none() && h.phase == HostPhase::Serving && h.sandboxes_of.is_none()) {
            return;
        }
        let (queued, _) = self.pool_drain_queued();
        for id in queued.into_iter().chain(std::mem::take(&mut self.unplaced)) {
            self.fail(id, failure.clone());
        }
    }

    pub(super) fn start_on(&mut self, host_index: usize, id: u64) {
        let wire = self.next_wire;
        self.next_wire = if wire == u32::MAX { 1 } else { wire + 1 };
        self.starts_given += 1;
        let given = self.starts_given;
        let Some(run) = self.runs.get_mut(&id) else { return };
        let Some(plan) = run.plan.as_ref() else {
            // Not reachable: only runs nothing was seen of wait for a host.
            self.fail(id, Failure::new(ErrorKind::Internal, "a run without a plan waited for a host"));
            return;
        };
        let frame = frame::encode_run(wire, plan, run.started_event);
        let now = Instant::now();
        run.on_host = Some((self.hosts[host_index].key, wire));
        run.first_started.get_or_insert(now);
        run.attempt_started = Some(now);
        run.host_cpu_at_start_ms = self.hosts[host_index].cpu.as_ref().and_then(CpuReader::ms);
        run.deadline = Some(now + Duration::from_millis(policy::run_deadline_ms(plan.limits.wall_time_ms)));
        let alone = run.alone;
        let h = &mut self.hosts[host_index];
        h.runs.insert(wire, id);
        h.warm_left = h.warm_left.saturating_sub(1);
        h.last_start = given;
        if alone {
            h.solo = Some(id);
        }
        h.for_solo = false;
        let Some(w) = h.writer.clone() else { return };
        self.send_or_hold(w, frame);
    }

    /// Takes every queued one-shot run out of the pool's queue (no host can be started;
    /// a sandbox's run waits for its own host, which serves).
    pub(super) fn pool_drain_queued(&mut self) -> (Vec<u64>, ()) {
        let mut out = Vec::new();
        let queued = |r: &Run| r.life.phase() == isolet_core::run_state::Phase::Queued && r.sandbox.is_none();
        let ids: Vec<u64> = self.runs.iter().filter(|(_, r)| queued(r)).map(|(id, _)| *id).collect();
        for id in ids {
            if self.pool.remove_queued(id).is_some() {
                out.push(id);
            }
        }
        out.sort_unstable();
        (out, ())
    }
}

/// Sends frames held back under the engine's lock `s`: each writer's place in line is
/// taken while `s` is held (so no frame sent later, an `Abort` say, can overtake them), the
/// system calls are made after `s` is released. A send wakes the host's reader, which may
/// take this CPU at once; with the lock held, the I/O thread reading that host's answer
/// would then wait for this thread to be scheduled again.
pub(super) fn send_after_unlock(s: MutexGuard<'_, State>, held: Vec<(Arc<HostWriter>, Vec<Vec<u8>>)>) {
    if held.is_empty() {
        return;
    }
    let queued: Vec<_> = held.iter().map(|(w, frames)| (w, w.queue(), frames)).collect();
    drop(s);
    for (w, queue, frames) in queued {
        let parts: Vec<&[u8]> = frames.iter().map(Vec::as_slice).collect();
        w.send_queued(queue, &parts);
    }
}
