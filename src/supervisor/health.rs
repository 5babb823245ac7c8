//! A host's health: its runs' deadlines, its memory budget, threads stuck in it (drain),
//! and whether it is still needed once a run left it.
use std::time::{Duration, Instant};

use isolet_core::frame::WireHealth;
use isolet_core::host_policy::{self as policy, HostEnd, StuckVerdict};

use super::process::CpuReader;
use super::{HostPhase, State};

impl State {
    /// A run left host `key`: a draining host with none left is ended, and so is an idle
    /// one beyond the hosts the engine keeps (a replacement that came up for a host that
    /// then turned out well).
    pub(super) fn after_run_left(&mut self, key: u64) {
        let Some(h) = self.host(key) else { return };
        if !h.runs.is_empty() {
            return;
        }
        // A draining host ends even with sandboxes open (they are lost): it holds a thread
        // that ignored termination.
        if h.phase == HostPhase::Draining {
            self.end_host(key, HostEnd::Stuck);
            return;
        }
        // A sandbox host ends once its last sandbox closed and that one's last run answered.
        if h.sandboxes_of.is_some() {
            if policy::end_sandbox_host_now(h.runs.len(), self.sandboxes_open_on(key)) {
                self.end_host(key, HostEnd::SandboxClosed);
            }
            return;
        }
        let suspect_elsewhere = self.hosts.iter().any(|o| o.suspect && o.end.is_none());
        let serving = self.hosts.iter().filter(|o| o.end.is_none() && o.phase != HostPhase::Draining && o.sandboxes_of.is_none()).count();
        if h.phase == HostPhase::Serving && !h.suspect && !suspect_elsewhere && serving > self.host_target() {
            self.end_host(key, HostEnd::Surplus);
        }
    }

    pub(super) fn note_health(&mut self, key: u64, health: WireHealth) {
        let warm_cap = self.host_config.pool.warm_pool_size as u32;
        let Some(host) = self.host_mut(key) else { return };
        host.health = health;
        // As reported by the host (untrusted), but never more than it was configured
        // with: a host claiming warm isolates would otherwise win every placement.
        host.warm_left = health.warm.min(warm_cap);
        let stuck = health.stuck > host.stuck_at_ready && host.phase == HostPhase::Serving && host.end.is_none();
        if !stuck {
            return;
        }
        // A thread ignored termination: only ending the process reclaims it.
        let neighbours: Vec<u64> = host.runs.values().copied().collect();
        *self.counters.recycled.entry("stuck").or_insert(0) += 1;
        match policy::stuck_verdict(neighbours.len()) {
            StuckVerdict::EndNow => self.end_host(key, HostEnd::Stuck),
            StuckVerdict::Drain => {
                if let Some(h) = self.host_mut(key) {
                    h.phase = HostPhase::Draining;
                }
                self.dispatch();
            }
        }
    }

    /// A poll of host `key`: deadlines, memory, start and shutdown timeouts (and runs
    /// waiting to be started again whose time ran out, on any host's poll).
    pub(super) fn tick(&mut self, key: u64, rss_mb: Option<u64>) {
        if self.unplaced.iter().any(|id| self.runs.get(id).is_some_and(|r| r.lost.is_some())) {
            self.dispatch();
        }
        let Some(host) = self.host(key) else { return };
        if host.end.is_some() {
            if host.shutdown_deadline.is_some_and(|t| Instant::now() >= t) {
                host.kill();
            }
            return;
        }
        if host.phase == HostPhase::Starting {
            if host.born.elapsed() >= Duration::from_millis(policy::START_TIMEOUT_MS) {
                self.end_host(key, HostEnd::StartTimeout);
            }
            return;
        }
        let now = Instant::now();
        let suspect = host.runs.values().filter_map(|id| self.runs.get(id)).any(|r| {
            let elapsed = r.attempt_started.map(|t| t.elapsed().as_millis() as u64).unwrap_or(0);
            let wall = r.plan.as_ref().map_or(r.wall_time_ms, |p| p.limits.wall_time_ms);
            policy::suspect(elapsed, wall)
        });
        if suspect != host.suspect {
            if let Some(h) = self.host_mut(key) {
                h.suspect = suspect;
            }
            if suspect {
                self.ensure_hosts();
            }
        }
        let Some(host) = self.host(key) else { return };
        let overdue = host.runs.values().copied().find(|id| self.runs.get(id).and_then(|r| r.deadline).is_some_and(|d| now >= d));
        if let Some(id) = overdue {
            if let Some(r) = self.runs.get_mut(&id) {
                r.overdue = true;
            }
            self.end_host(key, HostEnd::Overdue);
            return;
        }
        let mut in_flight: Vec<u32> = host.runs.values().filter_map(|id| self.runs.get(id)).map(|r| r.memory_mb).collect();
        // An open sandbox keeps its heap between runs.
        in_flight.extend(self.sandboxes.values().filter(|sb| sb.host == key && sb.is_open()).map(|sb| sb.memory_mb));
        let now_ms = self.now_ms();
        let per_host = self.per_host;
        let Some(host) = self.host_mut(key) else { return };
        let ready_rss = host.ready_rss_mb;
        let budget = policy::host_budget_mb(ready_rss, host.lingering.current(now_ms, per_host).chain(in_flight));
        if let Some(rss) = rss_mb {
            if rss > budget {
                host.memory_end = Some((host.cpu.as_ref().and_then(CpuReader::ms), rss));
                self.end_host(key, HostEnd::Memory { rss_mb: rss, budget_mb: budget });
            }
        }
    }

    pub(super) fn poll_period(&self, key: u64) -> u64 {
        match self.host(key) {
            Some(h) if h.phase == HostPhase::Starting || h.end.is_some() => policy::POLL_BUSY_MS * 5,
            Some(h) => policy::poll_period_ms(h.runs.len()),
            None => policy::POLL_BUSY_MS,
        }
    }
}
