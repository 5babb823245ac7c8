//! Persistent sandboxes of a process engine: they live in sandbox hosts of their own, one
//! tenant's to a host and at most `sandboxesPerHost` to it (`policy::sandbox_host_pool`,
//! `policy::sandbox_host_for`); a host is started when a sandbox finds none of its
//! tenant's with room, and ends once its last sandbox closed. An open sandbox holds no slot
//! of the engine; each of its runs is admitted through the engine's fair queue like a
//! one-shot run (with its queue deadline) and, once it has a slot, sent to the sandbox's
//! host (never placed elsewhere, never started again).
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

use isolet_core::frame;
use isolet_core::host_policy::{self as policy, HostEnd};
use isolet_core::queue::{Admission, Tenant};
use isolet_core::sandbox::{closed_failure, waiting_run_failure, Budget, CloseReason, SandboxPlan};
use isolet_core::{ErrorKind, Failure, RunPlan};

use super::runs::{failure_completion, shut_down_failure};
use super::{HostPhase, Inner, ProcessEngine, ProcessRun, Run, State};
use crate::isolate::{BeforeDone, Completion, EventSink};
use crate::limits::lock;

/// A persistent sandbox of a process engine: on which host it lives, and what the parent
/// knows of it (the host decides when it closes and tells; the parent closes it when
/// asked, when its host is lost, and at shutdown).
pub(crate) struct ProcessSandbox {
    pub id: u64,
    tenant: Tenant,
    pub(super) host: u64,
    wire: u32,
    pub(super) memory_mb: u32,
    status: Mutex<SandboxStatus>,
    inner: Weak<Inner>,
}

#[derive(Default)]
struct SandboxStatus {
    closed: Option<CloseReason>,
    usage: Budget,
}

/// What a run of a persistent sandbox carries until it starts on the sandbox's host.
pub(super) struct SandboxOf {
    /// The sandbox's id, its host and its wire id there.
    pub id: u64,
    host: u64,
    wire: u32,
    /// `sandbox.call(name, args)` instead of the run's code.
    call: Option<(String, Vec<u8>)>,
}

impl ProcessSandbox {
    pub(super) fn is_open(&self) -> bool {
        lock(&self.status).closed.is_none()
    }

    pub(crate) fn close_reason(&self) -> Option<CloseReason> {
        lock(&self.status).closed
    }

    pub(crate) fn usage(&self) -> Budget {
        lock(&self.status).usage
    }

    /// Closes it (a run in flight is aborted by its host, one waiting for a slot here).
    /// Idempotent.
    pub(crate) fn close(&self) {
        let Some(inner) = self.inner.upgrade() else { return };
        let mut s = inner.state();
        s.close_sandbox(self.id, CloseReason::Closed, true);
    }

    /// Admits run `id` of the sandbox through the engine's queue; its events go to `sink`.
    pub(crate) fn submit(
        self: &Arc<Self>,
        id: u64,
        plan: Arc<RunPlan>,
        call: Option<(String, Vec<u8>)>,
        started_event: bool,
        sink: Arc<dyn EventSink>,
    ) -> Arc<ProcessRun> {
        let handle = Arc::new(ProcessRun { id, inner: self.inner.clone() });
        let sandbox = Arc::downgrade(self);
        // The caller hears of the run after the sandbox has counted what it used.
        let sink: Arc<dyn EventSink> = Arc::new(BeforeDone {
            inner: sink,
            before_done: move |completion: &mut Completion| {
                if let Some(sb) = sandbox.upgrade() {
                    let mut status = lock(&sb.status);
                    status.usage.runs += 1;
                    status.usage.cpu_used_ms += completion.stats.cpu_time_ms.max(0.0);
                    status.usage.host_calls_used += completion.stats.host_calls as u64;
                }
            },
        });
        let Some(inner) = self.inner.upgrade() else {
            sink.done(failure_completion(shut_down_failure(), 0.0));
            return handle;
        };
        let mut s = inner.state();
        if let Some(reason) = self.close_reason() {
            drop(s);
            sink.done(failure_completion(closed_failure(reason), 0.0));
            return handle;
        }
        let of = SandboxOf { id: self.id, host: self.host, wire: self.wire, call };
        let max_queue_ms = plan.max_queue_ms;
        s.runs.insert(id, Run::new(sink, plan, started_event, Some(of)));
        let at = s.admit_at();
        match s.pool.admit(id, self.tenant.clone(), id, max_queue_ms, at) {
            Admission::Start(_) => s.take_slot(id),
            Admission::Queued => s.arm_timer(),
            Admission::QueuedInPlaceOf(out, failure) => {
                s.arm_timer();
                s.fail(out, failure);
            }
            Admission::Refused(_, failure) => s.fail(id, failure),
        }
        handle
    }
}

impl ProcessEngine {
    /// Opens a persistent sandbox in a sandbox host of its tenant's with room, or in one
    /// started for it now (`ready` waits for it): refused while no host can be started
    /// (`policy::sandbox_host_refusal`) or past the engine's bounds on open sandboxes
    /// (`Pool::admit_sandbox`). Its host takes no one-shot run and no other tenant's
    /// sandbox, and ends once its last sandbox closed: no one-shot run and no other
    /// tenant can end the sandbox; a sandbox of the same tenant in the same host can.
    pub(crate) fn open_sandbox(&self, id: u64, plan: SandboxPlan) -> Result<Arc<ProcessSandbox>, Failure> {
        let mut s = self.inner.state();
        if s.shut {
            return Err(shut_down_failure());
        }
        if let Some(why) = &s.invalid_config {
            return Err(Failure::new(ErrorKind::Validation, why.clone()));
        }
        if let Some(refused) = policy::sandbox_host_refusal(s.cannot_start.as_ref()) {
            return Err(refused);
        }
        let tenant = Tenant::from(plan.base.tenant.as_deref());
        s.pool.admit_sandbox(id, tenant.clone(), 0, usize::MAX)?;
        let views: Vec<policy::SandboxHostView> = s
            .hosts
            .iter()
            .map(|h| policy::SandboxHostView {
                same_tenant: h.sandboxes_of.as_ref() == Some(&tenant),
                taking: h.end.is_none() && h.phase != HostPhase::Draining && !h.suspect && h.shutdown_deadline.is_none(),
                open: s.sandboxes_open_on(h.key),
            })
            .collect();
        let host = match policy::sandbox_host_for(&views, s.sandboxes_per_host) {
            Some(i) => s.hosts[i].key,
            None => s.spawn_sandbox_host(tenant.clone()),
        };
        let wire = s.next_wire;
        s.next_wire = if wire == u32::MAX { 1 } else { wire + 1 };
        let sandbox = Arc::new(ProcessSandbox {
            id,
            tenant,
            host,
            wire,
            memory_mb: plan.base.limits.memory_mb,
            status: Mutex::new(SandboxStatus::default()),
            inner: Arc::downgrade(&self.inner),
        });
        s.sandboxes.insert(id, sandbox.clone());
        // To a host that is still starting: sent once it is ready (see `on_frame`).
        let open = frame::encode_sandbox_open(wire, &plan);
        let Some(h) = s.host_mut(host) else { return Ok(sandbox) };
        match (h.phase, h.writer.clone()) {
            (HostPhase::Starting, _) | (_, None) => h.pending.push(open),
            (_, Some(w)) => {
                // In line before the lock is released, so the sandbox's first run (sent
                // under the lock) never overtakes its open.
                let queue = w.queue();
                drop(s);
                w.send_queued(queue, &[&open]);
            }
        }
        Ok(sandbox)
    }
}

impl ProcessSandbox {
    /// Waits until the sandbox's host serves (at most `timeout`); `Err`: the sandbox
    /// closed first (its host could not be started, or the engine shut down).
    pub(crate) fn ready(&self, timeout: Duration) -> Result<(), Failure> {
        let Some(inner) = self.inner.upgrade() else { return Err(shut_down_failure()) };
        let deadline = Instant::now() + timeout;
        let mut s = inner.state();
        loop {
            if let Some(reason) = self.close_reason() {
                if let Some(why) = &s.invalid_config {
                    return Err(Failure::new(ErrorKind::Validation, why.clone()));
                }
                if reason == CloseReason::HostLost {
                    let why = s.cannot_start.as_ref().map_or_else(|| "it ended before it was ready".to_string(), |f| f.message.clone());
                    return Err(Failure::new(
                        ErrorKind::Crashed,
                        format!("The sandbox host process started for the sandbox did not come up: {why}"),
                    ));
                }
                return Err(closed_failure(reason));
            }
            if s.host(self.host).is_some_and(|h| h.phase == HostPhase::Serving && h.end.is_none()) {
                return Ok(());
            }
            let now = Instant::now();
            if now >= deadline {
                // Its start timeout ends it well before this.
                return Err(Failure::new(ErrorKind::Crashed, "The sandbox host process started for the sandbox did not come up in time"));
            }
            s.waiters += 1;
            s = inner.changed.wait_timeout(s, deadline - now).unwrap_or_else(|e| e.into_inner()).0;
            s.waiters -= 1;
        }
    }
}

impl State {
    /// Sandbox run `id` got a slot: sends it to its sandbox's host (held there until the
    /// host is ready), or fails it when that host is gone.
    pub(super) fn start_sandbox_run(&mut self, id: u64) {
        let wire = self.next_wire;
        let Some(run) = self.runs.get_mut(&id) else { return };
        let Some(of) = run.sandbox.as_mut() else { return };
        let (sandbox_id, host_key, sandbox_wire, call) = (of.id, of.host, of.wire, of.call.take());
        let host_index = self.hosts.iter().position(|h| h.key == host_key && h.end.is_none());
        let (Some(host_index), true) = (host_index, self.sandboxes.contains_key(&sandbox_id)) else {
            self.fail(id, closed_failure(CloseReason::HostLost));
            return;
        };
        let Some(plan) = run.plan.as_ref() else { return };
        self.next_wire = if wire == u32::MAX { 1 } else { wire + 1 };
        let frame =
            frame::encode_sandbox_run(wire, sandbox_wire, plan, run.started_event, call.as_ref().map(|(n, a)| (n.as_str(), a.as_slice())));
        let now = Instant::now();
        run.deadline = Some(now + Duration::from_millis(policy::run_deadline_ms(plan.limits.wall_time_ms)));
        run.on_host = Some((host_key, wire));
        run.first_started = Some(now);
        run.attempt_started = Some(now);
        let h = &mut self.hosts[host_index];
        h.runs.insert(wire, id);
        if h.phase == HostPhase::Starting {
            h.pending.push(frame);
        } else if let Some(w) = h.writer.clone() {
            self.send_or_hold(w, frame);
        }
    }

    /// Closes sandbox `id` for `reason`; `tell_host`: ask its host to close it too (not
    /// when the host said so, or is gone). A run of it waiting for a slot is answered now.
    pub(super) fn close_sandbox(&mut self, id: u64, reason: CloseReason, tell_host: bool) {
        let Some(sb) = self.sandboxes.remove(&id) else { return };
        {
            let mut status = lock(&sb.status);
            if status.closed.is_none() {
                status.closed = Some(reason);
            }
        }
        if tell_host {
            if let Some(w) = self.host(sb.host).and_then(|h| h.writer.clone()) {
                w.send(&[&frame::header_only(frame::Kind::SandboxClose, sb.wire, 0, 0)]);
            }
        }
        let waiting: Vec<u64> =
            self.runs.iter().filter(|(_, r)| r.sandbox.as_ref().is_some_and(|of| of.id == id)).map(|(run, _)| *run).collect();
        for run in waiting {
            if self.pool.remove_queued(run).is_some() {
                self.fail(run, waiting_run_failure(reason));
            }
        }
        self.pool.sandbox_closed(id);
        // Its host ends with its last sandbox: now if it is still starting (nothing of the
        // sandboxes was sent to it), else once its last run answered.
        if self.host(sb.host).is_some_and(|h| h.phase == HostPhase::Starting) && self.sandboxes_open_on(sb.host) == 0 {
            self.end_host(sb.host, HostEnd::SandboxClosed);
        }
        self.after_run_left(sb.host);
        self.dispatch();
    }

    /// Sandboxes open in host `key` (closed ones are out of `sandboxes` at once).
    pub(super) fn sandboxes_open_on(&self, key: u64) -> usize {
        self.sandboxes.values().filter(|sb| sb.host == key).count()
    }

    /// Host `key` said it closed the sandbox it knows as `wire`.
    pub(super) fn sandbox_closed_on_host(&mut self, key: u64, wire: u32, reason: CloseReason) {
        let id = self.sandboxes.values().find(|sb| sb.host == key && sb.wire == wire).map(|sb| sb.id);
        if let Some(id) = id {
            self.close_sandbox(id, reason, false);
        }
    }

    /// Host `key` is gone: its sandboxes are closed (`hostLost`).
    pub(super) fn sandboxes_lost(&mut self, key: u64) {
        let ids: Vec<u64> = self.sandboxes.values().filter(|sb| sb.host == key).map(|sb| sb.id).collect();
        for id in ids {
            self.close_sandbox(id, CloseReason::HostLost, false);
        }
    }

    /// Closes every sandbox (shutdown).
    pub(super) fn close_sandboxes(&mut self, reason: CloseReason) {
        let ids: Vec<u64> = self.sandboxes.keys().copied().collect();
        for id in ids {
            self.close_sandbox(id, reason, true);
        }
    }
}
