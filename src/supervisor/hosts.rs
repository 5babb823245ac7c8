//! Hosts' lives: starting them (on one spawner thread), keeping the engine's number of
//! them, ending them (and shutdown), and what becomes of their runs when one is gone
//! (`policy::lost_run_verdict`).
use std::collections::HashMap;
use std::sync::atomic::Ordering;
use std::sync::{mpsc, Arc, Mutex, OnceLock, Weak};
use std::time::{Duration, Instant};

use isolet_core::frame::{self, Kind, WireHealth};
use isolet_core::host_policy::{self as policy, EventBudget, HostEnd, HostView, Lingering, LostRun, LostVerdict, StartVerdict};
use isolet_core::queue::Tenant;
use isolet_core::run_state::StopReason;
use isolet_core::Failure;

use super::process::{self, CpuReader};
use super::reader::io_loop;
use super::runs::shut_down_failure;
use super::state::Host;
use super::writer::HostWriter;
use super::{HostPhase, Inner, State, LIVE_HOSTS};
use crate::limits::lock;

impl State {
    /// Keeps `processes` hosts starting or serving (replacements rate-limited).
    pub(super) fn ensure_hosts(&mut self) {
        if self.shut || self.invalid_config.is_some() {
            return;
        }
        if let Some(t) = self.spawn_not_before {
            let now = Instant::now();
            if now < t {
                self.call_later(t - now);
                return;
            }
        }
        let live = self
            .hosts
            .iter()
            .filter(|h| h.end.is_none() && h.phase != HostPhase::Draining && !h.suspect && !h.for_solo && h.sandboxes_of.is_none())
            .count();
        for _ in live..self.host_target() {
            let now = self.now_ms();
            let shared_started = self.counters.started - self.counters.sandbox_hosts_started;
            if shared_started >= self.processes as u64 && !self.starts.may_replace(now) {
                self.call_later(Duration::from_millis(policy::RESTART_PERIOD_MS));
                return;
            }
            self.spawn_host();
        }
    }

    pub(super) fn host_target(&self) -> usize {
        policy::host_target(self.processes, self.trouble_until.is_some_and(|t| Instant::now() < t))
    }

    /// Calls `dispatch` again after `delay` (one pending call at a time).
    pub(super) fn call_later(&mut self, delay: Duration) {
        if std::mem::replace(&mut self.timer_pending, true) {
            return;
        }
        let me = self.me.clone();
        let spawned = std::thread::Builder::new().name("isolet-host-timer".into()).stack_size(64 * 1024).spawn(move || {
            std::thread::sleep(delay);
            if let Some(inner) = me.upgrade() {
                let mut s = inner.state();
                s.timer_pending = false;
                s.dispatch();
            }
        });
        if spawned.is_err() {
            self.timer_pending = false;
        }
    }

    pub(super) fn spawn_host(&mut self) -> u64 {
        let start = self.host_config.encode();
        self.spawn_host_with(start, None)
    }

    /// Starts a host for persistent sandboxes of `tenant` (a slot and a place for each it
    /// may hold, no warm isolates).
    pub(super) fn spawn_sandbox_host(&mut self, tenant: Tenant) -> u64 {
        let mut config = self.host_config.clone();
        config.pool = policy::sandbox_host_pool(self.config, self.sandboxes_per_host);
        self.counters.sandbox_hosts_started += 1;
        self.spawn_host_with(config.encode(), Some(tenant))
    }

    pub(super) fn spawn_host_with(&mut self, start: Vec<u8>, sandboxes_of: Option<Tenant>) -> u64 {
        let key = self.next_host;
        self.next_host += 1;
        self.counters.started += 1;
        self.hosts.push(Host {
            key,
            phase: HostPhase::Starting,
            pid: None,
            writer: None,
            runs: HashMap::new(),
            born: Instant::now(),
            ready_rss_mb: 0,
            health: WireHealth::default(),
            warm_left: 0,
            stuck_at_ready: 0,
            health_frames: 0,
            done_frames: 0,
            last_start: 0,
            solo: None,
            for_solo: false,
            end: None,
            reaping: false,
            shutdown_deadline: None,
            lingering: Lingering::default(),
            suspect: false,
            sandboxes_of,
            pending: Vec::new(),
            cpu: None,
            memory_end: None,
        });
        let me = self.me.clone();
        if !spawner().run(Box::new(move || start_host(me, key, start))) {
            // Settled later, never here: the caller holds the state lock and may be in a loop.
            self.unstartable.push(key);
            self.call_later(Duration::from_millis(1));
        }
        key
    }

    pub(super) fn host_views(&self) -> Vec<HostView> {
        self.hosts.iter().map(Host::view).collect()
    }

    /// Tells host `key` to end for `end` (kept if it was told already): kills it, and
    /// settles its runs now, not once it is reaped: a dying host can take long to go (a
    /// thread of it at the lowest priority on a busy machine holds up its exit).
    pub(super) fn end_host(&mut self, key: u64, end: HostEnd) {
        let Some(h) = self.host_mut(key) else { return };
        if h.end.is_none() {
            h.end = Some(end);
        }
        if let Some(w) = &h.writer {
            w.close();
        }
        h.kill();
        // A host that never got ready is judged on its exit (its last words say why).
        if h.phase != HostPhase::Starting {
            let end = h.end.clone().unwrap_or(HostEnd::Shutdown);
            self.dying.insert(key);
            self.retire(key, end, "", "");
        }
    }

    pub(super) fn shutdown(&mut self) {
        if self.shut {
            return;
        }
        self.close_sandboxes(isolet_core::sandbox::CloseReason::Shutdown);
        self.shut = true;
        let (queued, _active) = self.pool.shutdown();
        for id in queued {
            self.fail(id, shut_down_failure());
        }
        for id in std::mem::take(&mut self.unplaced) {
            self.fail(id, shut_down_failure());
        }
        // The runs left are on hosts: if a host ends before its run answers, the run is
        // answered as shut down (see `retire`), whatever the host's end.
        for run in self.runs.values_mut() {
            run.life.request_stop(StopReason::Shutdown);
        }
        let grace = Instant::now() + Duration::from_millis(policy::SHUTDOWN_GRACE_MS);
        let keys: Vec<(u64, HostPhase)> = self.hosts.iter().map(|h| (h.key, h.phase)).collect();
        for (key, phase) in keys {
            if phase == HostPhase::Starting {
                self.end_host(key, HostEnd::Shutdown);
                continue;
            }
            let Some(h) = self.host_mut(key) else { continue };
            h.phase = HostPhase::Draining;
            if h.end.is_none() {
                h.end = Some(HostEnd::Shutdown);
            }
            h.shutdown_deadline = Some(grace);
            if let Some(w) = &h.writer {
                w.send(&[&frame::header_only(Kind::Shutdown, 0, 0, 0)]);
            }
        }
    }

    /// Host `key` is gone (reaped, or never started: `spawn_error`): answer or restart
    /// its runs, count it, replace it.
    pub(super) fn host_exited(
        &mut self,
        key: u64,
        status: Option<std::process::ExitStatus>,
        stderr_tail: &str,
        spawn_error: Option<String>,
    ) {
        if self.dying.remove(&key) {
            return; // retired when it was told to end
        }
        let Some(host) = self.host(key) else { return };
        let reason = match (&spawn_error, status) {
            (Some(e), _) => format!("spawn failed: {e}"),
            (None, Some(st)) => exit_reason(st),
            (None, None) => "exit code unknown".to_string(),
        };
        let end = match host.end.clone() {
            Some(end) => end,
            None => {
                if spawn_error.is_none() {
                    self.counters.crashed += 1;
                    *self.counters.crash_reasons.entry(reason.clone()).or_insert(0) += 1;
                }
                HostEnd::Crash { reason: reason.clone(), oom: policy::looks_like_oom(stderr_tail) }
            }
        };
        self.retire(key, end, &reason, stderr_tail);
    }

    /// Host `key` is gone for `end` (or going: killed, not reaped yet): counts it, answers
    /// or starts again its runs, replaces it.
    pub(super) fn retire(&mut self, key: u64, end: HostEnd, reason: &str, stderr_tail: &str) {
        let Some(pos) = self.hosts.iter().position(|h| h.key == key) else { return };
        let host = self.hosts.remove(pos);
        if policy::spare_after(&end, host.sandboxes_of.is_some()) {
            self.trouble_until = Some(Instant::now() + Duration::from_millis(policy::SPARE_AFTER_TROUBLE_MS));
        }
        if let Some(k) = end.recycled_key() {
            // `stuck` was counted when the stuck thread was reported.
            if k != "stuck" {
                *self.counters.recycled.entry(k).or_insert(0) += 1;
            }
        }
        self.counters.retired_warm_starts = self.counters.retired_warm_starts.saturating_add(host.health.warm_starts);
        self.counters.retired_cold_starts = self.counters.retired_cold_starts.saturating_add(host.health.cold_starts);
        let suspects = host.runs.len() + host.lingering.recently_ended(self.now_ms());
        self.sandboxes_lost(key);
        let mut lost: Vec<(u32, u64)> = host.runs.into_iter().collect();
        lost.sort_unstable();
        for (_, id) in lost {
            let Some(run) = self.runs.get_mut(&id) else { continue };
            run.on_host = None;
            let view = LostRun {
                seen_outside: run.plan.is_none() || run.budget.seen_outside(),
                overdue: run.overdue,
                restarts: run.restarts,
                wall_time_ms: run.wall_time_ms,
                elapsed_ms: run.first_started.map(|t| t.elapsed().as_millis() as u64).unwrap_or(0),
                alone: run.alone,
            };
            // A run the caller stopped (abort, shutdown) is answered as such, never started again.
            if let Some(reason) = run.life.stop_reason() {
                let failure = match reason {
                    StopReason::Shutdown => shut_down_failure(),
                    _ => Failure::aborted(),
                };
                self.fail(id, failure);
                continue;
            }
            // What it cost, if the parent ended its host for memory: the host's figures.
            let figures = match (host.memory_end, run.host_cpu_at_start_ms) {
                (Some((Some(cpu_end), rss)), Some(cpu_start)) => Some(policy::memory_end_stats(cpu_start, cpu_end, rss, host.ready_rss_mb)),
                _ => None,
            };
            // A sandbox's run is never started again elsewhere: its context is gone.
            if run.sandbox.is_some() {
                self.fail_with(id, policy::lost_run_failure(&end, view), figures);
                continue;
            }
            match policy::lost_run_verdict(&end, view, suspects) {
                LostVerdict::Restart { wall_time_ms, alone } => {
                    run.restarts += 1;
                    run.alone = alone;
                    run.overdue = false;
                    run.budget = EventBudget::new(run.bridge, run.stream_console).with_max_module_requests(run.max_modules);
                    if let Some(plan) = run.plan.as_mut() {
                        Arc::make_mut(plan).limits.wall_time_ms = wall_time_ms;
                    }
                    // It already said it started.
                    run.started_event = false;
                    run.lost = Some(policy::lost_run_failure(&end, view));
                    self.unplaced.push_front(id);
                }
                LostVerdict::Fail(f) => self.fail_with(id, f, figures),
            }
        }
        // A sandbox's host ended while starting because its sandbox closed did not fail to start.
        if host.phase == HostPhase::Starting && !self.shut && self.invalid_config.is_none() && end != HostEnd::SandboxClosed {
            if let StartVerdict::GiveUp { after_ms } = self.starts.failed() {
                self.cannot_start = Some(policy::start_failure(reason, stderr_tail));
                self.spawn_not_before = Some(Instant::now() + Duration::from_millis(after_ms));
            }
        }
        self.dispatch();
    }
}

/// "signal SIGSEGV" or "exit code 3".
pub(super) fn exit_reason(status: std::process::ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    if let Some(sig) = status.signal() {
        return format!("signal {}", signal_name(sig));
    }
    format!("exit code {}", status.code().unwrap_or(-1))
}

pub(super) fn signal_name(sig: i32) -> String {
    let name = match sig {
        libc::SIGSEGV => "SIGSEGV",
        libc::SIGKILL => "SIGKILL",
        libc::SIGABRT => "SIGABRT",
        libc::SIGTRAP => "SIGTRAP",
        libc::SIGBUS => "SIGBUS",
        libc::SIGILL => "SIGILL",
        libc::SIGFPE => "SIGFPE",
        libc::SIGTERM => "SIGTERM",
        libc::SIGINT => "SIGINT",
        libc::SIGSYS => "SIGSYS",
        libc::SIGHUP => "SIGHUP",
        libc::SIGPIPE => "SIGPIPE",
        _ => return format!("{sig}"),
    };
    name.to_string()
}

/// An errno's name (`EPERM`), as Node names spawn failures.
pub(super) fn errno_name(e: &std::io::Error) -> String {
    let name = match e.raw_os_error() {
        Some(libc::EPERM) => "EPERM",
        Some(libc::EAGAIN) => "EAGAIN",
        Some(libc::ENOMEM) => "ENOMEM",
        Some(libc::ENOENT) => "ENOENT",
        Some(libc::EACCES) => "EACCES",
        Some(libc::EMFILE) => "EMFILE",
        Some(libc::ENFILE) => "ENFILE",
        Some(libc::ENOSYS) => "ENOSYS",
        _ => return e.to_string(),
    };
    name.to_string()
}

pub(super) type Job = Box<dyn FnOnce() + Send>;

/// Starts every host, on one thread that lives as long as the process: a host's
/// parent-death signal fires when the *thread* that started it ends, so hosts must not
/// be started by a thread that ends (an I/O thread replacing its own host, a Worker).
pub(super) struct Spawner {
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
}

pub(super) fn spawner() -> &'static Spawner {
    static SPAWNER: OnceLock<Spawner> = OnceLock::new();
    SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let started = std::thread::Builder::new().name("isolet-spawner".into()).spawn(move || {
            for job in rx {
                job();
            }
        });
        Spawner { jobs: Mutex::new(started.ok().map(|_| tx)) }
    })
}

impl Spawner {
    /// Queues `job`; false when there is no spawner thread (none could be made).
    fn run(&self, job: Job) -> bool {
        match lock(&self.jobs).as_ref() {
            Some(tx) => tx.send(job).is_ok(),
            None => false,
        }
    }
}

pub(super) fn start_host(me: Weak<Inner>, key: u64, start_frame: Vec<u8>) {
    let Some(inner) = me.upgrade() else { return };
    let command = process::host_command();
    let options = isolet_core::limits::sandbox_host_node_options(&crate::v8::version());
    let env_vars: Vec<(String, String)> =
        std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect();
    let env = policy::host_env(env_vars.iter().map(|(k, v)| (k.as_str(), v.as_str())));
    let spawned = match &command {
        Some(c) => process::spawn(c, options, &env),
        None => Err(std::io::Error::other("no sandbox host command set")),
    };
    let spawned = match spawned {
        Ok(s) => s,
        Err(e) => {
            let mut s = inner.state();
            s.host_exited(key, None, &e.to_string(), Some(errno_name(&e)));
            drop(s);
            inner.changed.notify_all();
            return;
        }
    };
    LIVE_HOSTS.fetch_add(1, Ordering::SeqCst);
    let pid = spawned.child.id();
    let writer = HostWriter::start(&spawned.channel);
    {
        let mut s = inner.state();
        let ended = match s.host_mut(key) {
            Some(h) => {
                h.pid = Some(pid);
                h.cpu = Some(CpuReader::open(pid));
                match &writer {
                    Ok(w) => {
                        h.writer = Some(w.clone());
                        w.send(&[&start_frame]);
                    }
                    Err(_) => h.end = Some(HostEnd::StartTimeout),
                }
                h.end.is_some()
            }
            None => true,
        };
        if ended {
            // SAFETY: our unreaped child.
            unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
        }
    }
    drop(inner);
    let io = std::thread::Builder::new().name("isolet-host-io".into()).stack_size(512 * 1024);
    let writer = writer.ok();
    let spawned = Arc::new(Mutex::new(Some(spawned)));
    let for_thread = spawned.clone();
    let closer = writer.clone();
    let me_again = me.clone();
    if io.spawn(move || io_loop(me, key, for_thread, writer)).is_err() {
        // No thread to serve it: end it here, and settle it as a start that failed.
        if let Some(w) = closer {
            w.close();
        }
        if let Some(mut sp) = lock(&spawned).take() {
            let _ = sp.child.kill();
            let status = sp.child.wait().ok();
            LIVE_HOSTS.fetch_sub(1, Ordering::SeqCst);
            if let Some(inner) = me_again.upgrade() {
                inner.state().host_exited(key, status, "", Some("no I/O thread".into()));
                inner.changed.notify_all();
            }
        }
    }
}
