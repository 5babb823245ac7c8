//! What the supervisor knows, under one lock (`Inner::state`): its hosts, its runs, their
//! counters, and the engine's configuration as sent to each host.
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::{Arc, Weak};
use std::time::Instant;

use isolet_core::frame::{WireHealth, WireLockdown, WireStart};
use isolet_core::host_policy::{EventBudget, HostEnd, HostView, Lingering, Starts};
use isolet_core::queue::{Pool, PoolConfig, Tenant};
use isolet_core::run_state::RunState;
use isolet_core::{Failure, RunPlan};

use super::process::CpuReader;
use super::runs::HeldFrames;
use super::sandboxes::{ProcessSandbox, SandboxOf};
use super::writer::HostWriter;
use super::Inner;
use crate::isolate::EventSink;
use crate::limits::queue_timer::QueueTimer;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum HostPhase {
    Starting,
    Serving,
    /// Takes no new work; ended once its runs end.
    Draining,
}

pub(super) struct Host {
    pub(super) key: u64,
    pub(super) phase: HostPhase,
    pub(super) pid: Option<u32>,
    pub(super) writer: Option<Arc<HostWriter>>,
    /// Runs in flight here: wire id -> run id.
    pub(super) runs: HashMap<u32, u64>,
    pub(super) born: Instant,
    /// Resident MB when it reported ready.
    pub(super) ready_rss_mb: u64,
    pub(super) health: WireHealth,
    pub(super) warm_left: u32,
    pub(super) stuck_at_ready: u32,
    /// Health and lower frames received (see `policy::health_allowed`).
    pub(super) health_frames: u64,
    pub(super) done_frames: u64,
    pub(super) last_start: u64,
    /// The run it serves alone (started again after its host ended), if any.
    pub(super) solo: Option<u64>,
    /// It was started for a run that must run alone (not counted among the hosts the
    /// engine keeps until it has served one).
    pub(super) for_solo: bool,
    /// Why the supervisor is ending it (`None`: it has not been told to end).
    pub(super) end: Option<HostEnd>,
    /// Its I/O thread is reaping it: its pid may no longer be signalled.
    pub(super) reaping: bool,
    pub(super) shutdown_deadline: Option<Instant>,
    /// Allowances of runs that ended here a moment ago.
    pub(super) lingering: Lingering,
    /// A run here is well past its wall limit: a replacement is started already.
    pub(super) suspect: bool,
    /// The tenant whose persistent sandboxes it holds, if it is a sandbox host: it serves
    /// their runs only and ends once none is open (`policy::sandbox_host_pool`).
    pub(super) sandboxes_of: Option<Tenant>,
    /// Frames for it sent once it is ready (its sandbox's open, and runs made meanwhile).
    pub(super) pending: Vec<Vec<u8>>,
    /// Reads its CPU time (once it has a pid).
    pub(super) cpu: Option<CpuReader>,
    /// Its CPU time (ms) and resident MB when the parent ended it for memory.
    pub(super) memory_end: Option<(Option<f64>, u64)>,
}

impl Host {
    pub(super) fn view(&self) -> HostView {
        HostView {
            serving: matches!(self.phase, HostPhase::Serving | HostPhase::Draining)
                && self.end.is_none()
                && self.shutdown_deadline.is_none(),
            draining: self.phase == HostPhase::Draining,
            runs: self.runs.len(),
            warm: self.warm_left,
            last_start: self.last_start,
            solo: self.solo.is_some(),
            dedicated: self.sandboxes_of.is_some(),
        }
    }

    pub(super) fn kill(&self) {
        if let (Some(pid), false) = (self.pid, self.reaping) {
            // SAFETY: the pid is our unreaped child (a zombie at worst), never another process.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
    }
}

pub(super) struct Run {
    pub(super) sink: Arc<dyn EventSink>,
    /// The plan, kept for a restart until something of the run is seen outside.
    pub(super) plan: Option<Arc<RunPlan>>,
    /// Send the `started` event (the caller's choice; off once it was sent).
    pub(super) started_event: bool,
    pub(super) memory_mb: u32,
    pub(super) wall_time_ms: u64,
    pub(super) bridge: isolet_core::BridgeLimits,
    pub(super) stream_console: bool,
    /// The run's `language`: a resolved module of a TypeScript run is stripped.
    pub(super) language: &'static str,
    /// `maxModules`: the most `resolve` requests its host may send.
    pub(super) max_modules: u32,
    pub(super) life: RunState,
    /// The host and wire id it runs under.
    pub(super) on_host: Option<(u64, u32)>,
    pub(super) first_started: Option<Instant>,
    pub(super) attempt_started: Option<Instant>,
    /// Its host's CPU time when it started there (linux), for its stats if the host is
    /// ended for memory under it.
    pub(super) host_cpu_at_start_ms: Option<f64>,
    pub(super) deadline: Option<Instant>,
    pub(super) budget: EventBudget,
    pub(super) restarts: u32,
    pub(super) alone: bool,
    pub(super) started_sent: bool,
    pub(super) overdue: bool,
    /// Set when it was started again after its host ended: its answer if it cannot be
    /// started again in time.
    pub(super) lost: Option<Failure>,
    /// A run of a persistent sandbox (pinned to its host, never started again).
    pub(super) sandbox: Option<SandboxOf>,
}

impl Run {
    pub(super) fn new(sink: Arc<dyn EventSink>, plan: Arc<RunPlan>, started_event: bool, sandbox: Option<SandboxOf>) -> Run {
        Run {
            sink,
            memory_mb: plan.limits.memory_mb,
            wall_time_ms: plan.limits.wall_time_ms,
            bridge: plan.bridge,
            stream_console: plan.stream_console,
            language: plan.language,
            max_modules: plan.module_limits.max_modules,
            budget: EventBudget::new(plan.bridge, plan.stream_console).with_max_module_requests(plan.module_limits.max_modules),
            plan: Some(plan),
            started_event,
            life: RunState::new(),
            on_host: None,
            first_started: None,
            attempt_started: None,
            host_cpu_at_start_ms: None,
            deadline: None,
            restarts: 0,
            alone: false,
            started_sent: false,
            overdue: false,
            lost: None,
            sandbox,
        }
    }
}

#[derive(Default)]
pub(super) struct Counters {
    pub(super) started: u64,
    pub(super) crashed: u64,
    pub(super) recycled: BTreeMap<&'static str, u64>,
    pub(super) crash_reasons: BTreeMap<String, u64>,
    /// Of `started`, hosts started for persistent sandboxes (not replacements).
    pub(super) sandbox_hosts_started: u64,
    /// Start counts of hosts that ended.
    pub(super) retired_warm_starts: u64,
    pub(super) retired_cold_starts: u64,
}

pub(super) struct State {
    /// The engine's pool over all hosts.
    pub(super) config: PoolConfig,
    /// Hosts kept running.
    pub(super) processes: usize,
    pub(super) per_host: usize,
    /// Persistent sandboxes of one tenant a sandbox host holds (`sandboxesPerHost`).
    pub(super) sandboxes_per_host: usize,
    pub(super) host_config: WireStart,
    pub(super) pool: Pool<u64, ()>,
    pub(super) runs: HashMap<u64, Run>,
    /// Runs holding a slot and waiting for a host; restarted runs go first.
    pub(super) unplaced: VecDeque<u64>,
    pub(super) hosts: Vec<Host>,
    /// Hosts told to end and retired, not reaped yet.
    pub(super) dying: HashSet<u64>,
    /// Hosts that could not even be handed to the spawner thread (none exists).
    pub(super) unstartable: Vec<u64>,
    pub(super) next_host: u64,
    pub(super) next_wire: u32,
    pub(super) starts_given: u64,
    pub(super) starts: Starts,
    pub(super) spawn_not_before: Option<Instant>,
    /// Until when a spare host stands by (`policy::SPARE_AFTER_TROUBLE_MS`).
    pub(super) trouble_until: Option<Instant>,
    /// Set while no host can be started (after repeated failures): runs that no serving
    /// host can take get this failure at once instead of waiting out the backoff.
    pub(super) cannot_start: Option<Failure>,
    pub(super) timer_pending: bool,
    /// Threads waiting on `Inner::changed` (`ready`, `wait_idle`): frames wake it only then.
    pub(super) waiters: usize,
    /// Run frames held back by `start_on` while `submit` dispatches, sent once the lock is
    /// released (see `send_after_unlock`).
    pub(super) held: Option<Vec<HeldFrames>>,
    pub(super) shut: bool,
    pub(super) invalid_config: Option<String>,
    pub(super) lockdown: Option<WireLockdown>,
    pub(super) counters: Counters,
    pub(super) epoch: Instant,
    pub(super) me: Weak<Inner>,
    /// Open persistent sandboxes, each on one host.
    pub(super) sandboxes: HashMap<u64, Arc<ProcessSandbox>>,
    /// Fails queued runs at their deadline (the pool counts in ms from `epoch`).
    pub(super) timer: Arc<QueueTimer>,
}

impl State {
    pub(super) fn host(&self, key: u64) -> Option<&Host> {
        self.hosts.iter().find(|h| h.key == key)
    }

    pub(super) fn host_mut(&mut self, key: u64) -> Option<&mut Host> {
        self.hosts.iter_mut().find(|h| h.key == key)
    }

    pub(super) fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }
}
