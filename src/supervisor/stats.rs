//! What `stats()` reports of a process engine: the engine's counts added up over its hosts,
//! and the hosts themselves.
use std::collections::BTreeMap;

use isolet_core::frame::WireLockdown;
use isolet_core::queue::EngineStats;

use super::{HostPhase, State};

/// What a host-side snapshot of an engine reports (`stats().processes`).
#[derive(Debug, Clone, Default)]
pub(crate) struct ProcessStats {
    pub live: usize,
    pub starting: usize,
    pub draining: usize,
    pub started: u64,
    pub crashed: u64,
    pub recycled: BTreeMap<&'static str, u64>,
    pub crash_reasons: BTreeMap<String, u64>,
    pub pids: Vec<u32>,
    pub lockdown: Option<WireLockdown>,
}

#[derive(Debug, Clone, Default)]
pub(crate) struct Stats {
    pub engine: EngineStats,
    pub processes: ProcessStats,
}

impl State {
    pub(super) fn stats(&self) -> Stats {
        let c = self.pool.counters();
        let mut e = EngineStats {
            busy: self.hosts.iter().map(|h| h.runs.len()).sum(),
            queued: self.pool.queued() + self.unplaced.len(),
            completed: c.completed,
            failed: c.failed.clone(),
            tenants: self.pool.tenants(),
            warm_starts: self.counters.retired_warm_starts,
            cold_starts: self.counters.retired_cold_starts,
            sandboxes: self.pool.open_sandboxes(),
            max_open_sandboxes: self.pool.config().max_open_sandboxes,
            max_open_sandboxes_per_tenant: self.pool.config().max_open_sandboxes_per_tenant,
            queue_expired: c.queue_expired,
            ..Default::default()
        };
        for h in &self.hosts {
            e.warm_starts = e.warm_starts.saturating_add(h.health.warm_starts);
            e.cold_starts = e.cold_starts.saturating_add(h.health.cold_starts);
            if h.end.is_none() {
                e.warm += h.health.warm as usize;
                e.warming += h.health.warming as usize;
                e.threads += h.health.engine_threads as usize;
                e.quarantined += h.health.quarantined as usize;
            }
        }
        let p = ProcessStats {
            live: self.hosts.iter().filter(|h| h.end.is_none() && h.phase != HostPhase::Draining).count(),
            starting: self.hosts.iter().filter(|h| h.phase == HostPhase::Starting).count(),
            draining: self.hosts.iter().filter(|h| h.phase == HostPhase::Draining && h.end.is_none()).count(),
            started: self.counters.started,
            crashed: self.counters.crashed,
            recycled: self.counters.recycled.clone(),
            crash_reasons: self.counters.crash_reasons.clone(),
            pids: self.hosts.iter().filter_map(|h| h.pid).collect(),
            lockdown: self.lockdown.clone(),
        };
        Stats { engine: e, processes: p }
    }
}
