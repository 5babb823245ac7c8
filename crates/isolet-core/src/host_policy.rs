//! Supervision policy of sandbox host processes (isolation: 'process'): every number and
//! decision the parent's process backend (`src/supervisor/`) acts on, so each is
//! under `cargo test`. The backend carries them out with processes, pipes and threads.
//!
//! A host is replaced, never repaired. Runs in a host that ends are answered here: a run
//! that nobody has seen anything of (no host call, data request or streamed console
//! entry) and that was not the only suspect is started again on a host of its own;
//! every other run gets the typed failure of the host's end.
use std::collections::{HashMap, HashSet};

use crate::queue::PoolConfig;
use crate::value_count::{tally, Bounds, CountError};
use crate::{BridgeLimits, ErrorKind, Failure};

// ---- time ------------------------------------------------------------------------

/// How long the sandbox host's own watchdog waits after termination reached a run's
/// isolate before it gives up on the thread and answers the run as timed out.
pub const WATCHDOG_GRACE_MS: u64 = 400;
/// In this process (thread isolation), the longest a stopped run's thread may keep a
/// caller waiting when the machine starves it of CPU: it keeps its caller within its
/// limit + 1 s. A sandbox host gives up at `WATCHDOG_GRACE_MS` whatever its CPU (the
/// parent's deadline counts on it, and it ends the host rather than quarantining).
pub const STARVED_GRACE_MS: u64 = 1_000;

/// Whether the watchdog gives up on the thread of a run that termination reached
/// `terminated_for_ms` ago and that has used `cpu_since_ms` of CPU since (`None`: its
/// thread's clock cannot be read). A thread stuck in a built-in that ignores termination
/// spins a core: it has used about the grace in CPU when the grace is over. One that is
/// still unwinding, on a machine too busy to run it (a flattened 256 MB rope takes
/// 160-290 ms of CPU to finish), has not, and is given until `max_ms`; quarantining it
/// would hold its memory at the lowest priority and count against `ISOLET_MAX_QUARANTINED`.
pub fn give_up_on_stopped(terminated_for_ms: u64, cpu_since_ms: Option<u64>, max_ms: u64) -> bool {
    if terminated_for_ms < WATCHDOG_GRACE_MS {
        return false;
    }
    match cpu_since_ms {
        Some(cpu) => cpu >= WATCHDOG_GRACE_MS / 2 || terminated_for_ms >= max_ms.max(WATCHDOG_GRACE_MS),
        None => true,
    }
}

/// What the answer of a run stopped at its limit may take to reach the parent beyond
/// the watchdog's grace (a frame written by a thread at the lowest priority, a busy host).
pub const CHANNEL_MARGIN_MS: u64 = 350;

/// How long past its wall limit a run may go unanswered before its host is ended: the
/// host's watchdog answers within `WATCHDOG_GRACE_MS`; this is the backstop, and keeps
/// every run settled within its limit + 1 s.
pub const fn deadline_grace_ms() -> u64 {
    WATCHDOG_GRACE_MS + CHANNEL_MARGIN_MS
}

/// Milliseconds after its start by which a run of `wall_time_ms` must be answered.
pub fn run_deadline_ms(wall_time_ms: u64) -> u64 {
    wall_time_ms.saturating_add(deadline_grace_ms())
}

/// A run unanswered this long past its wall limit is probably stuck in a built-in that
/// ignores termination (a run that can be stopped answers within milliseconds): its host
/// is replaced from then on, so the replacement is up when the host stops taking work.
pub const SUSPECT_AFTER_MS: u64 = 100;

/// Whether a run `elapsed_ms` into a wall limit of `wall_time_ms` makes its host suspect.
pub fn suspect(elapsed_ms: u64, wall_time_ms: u64) -> bool {
    elapsed_ms >= wall_time_ms.saturating_add(SUSPECT_AFTER_MS)
}

/// For this long after a host ended badly (memory, a stuck or overdue run, a crash, a
/// protocol breach), one host more than the engine keeps stands by: under a stream of
/// hostile runs, hosts end faster than a replacement starts, and runs would wait for one.
pub const SPARE_AFTER_TROUBLE_MS: u64 = 5_000;

/// Hosts to keep starting or serving: `processes`, one more while there was trouble lately.
pub fn host_target(processes: usize, recent_trouble: bool) -> usize {
    processes + recent_trouble as usize
}

/// A host that does not report ready in this time is ended and replaced.
pub const START_TIMEOUT_MS: u64 = 15_000;
/// After a host exits, how long its run channel may stay open (held by a descendant,
/// possible only where lock-down is unavailable) before the parent closes it.
pub const EXIT_CLOSE_GRACE_MS: u64 = 500;
/// How long `shutdown` waits for a host to exit on its own before it is killed.
pub const SHUTDOWN_GRACE_MS: u64 = 5_000;

/// How often a host's resident memory (and its runs' deadlines) are checked: often while
/// runs are in flight, rarely when idle.
pub const POLL_BUSY_MS: u64 = 10;
pub const POLL_IDLE_MS: u64 = 500;

/// The poll period of a host with `runs` in flight.
pub fn poll_period_ms(runs: usize) -> u64 {
    if runs > 0 {
        POLL_BUSY_MS
    } else {
        POLL_IDLE_MS
    }
}

/// Whether a host's I/O thread must read its channel itself where Node's loop reads it:
/// bytes were already waiting at its previous check (one poll period ago) and Node's
/// thread has not read since (the application's JavaScript holds it). Runs then still end,
/// free their slots and keep their deadlines however long Node's thread is busy.
#[derive(Debug, Default)]
pub struct UnreadFrames {
    /// Node's count of reads when bytes were last seen waiting.
    waiting_at: Option<u64>,
}

impl UnreadFrames {
    /// One check: `waiting` (bytes wait to be read now) and `node_reads` (Node's thread's
    /// reads of this channel so far). True: read them now.
    pub fn check(&mut self, waiting: bool, node_reads: u64) -> bool {
        if !waiting {
            self.waiting_at = None;
            return false;
        }
        if self.waiting_at == Some(node_reads) {
            self.waiting_at = None;
            return true;
        }
        self.waiting_at = Some(node_reads);
        false
    }
}

// ---- memory ----------------------------------------------------------------------

/// Resident memory a run may add to its host: its heap limit twice (V8's near-limit
/// headroom, code and ArrayBuffer memory) plus a fixed slack.
pub fn run_allowance_mb(memory_mb: u32) -> u64 {
    2 * memory_mb as u64 + 32
}

/// Added to the resident memory a host has when ready (its warm isolates still come).
pub const BASE_SLACK_MB: u64 = 96;

/// The resident memory a host may have now: its base (ready RSS + `BASE_SLACK_MB`) and
/// the allowance of every run in flight in it, or that ended less than `LINGER_MS` ago
/// (a run answers before its isolate is disposed: its memory is still resident then).
pub fn host_budget_mb(ready_rss_mb: u64, runs_memory_mb: impl IntoIterator<Item = u32>) -> u64 {
    let runs: u64 = runs_memory_mb.into_iter().map(run_allowance_mb).sum();
    ready_rss_mb + BASE_SLACK_MB + runs
}

/// The CPU time (user + system, in clock ticks) in the text of /proc/<pid>/stat: fields
/// 14 and 15, counted after the command name's closing parenthesis (the name may hold
/// spaces and parentheses itself).
pub fn cpu_ticks_of_stat(stat: &str) -> Option<u64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let mut fields = rest.split_ascii_whitespace();
    // `rest` starts at field 3 (the state): utime is the 12th from there, stime the 13th.
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The stats of the run alone in a host the parent ended for its memory (the run's own
/// figures die with the host): its CPU time is the host's since the run started there,
/// its heap the host's resident growth since it was ready. `(cpu_time_ms, heap_bytes)`.
pub fn memory_end_stats(host_cpu_at_start_ms: f64, host_cpu_at_end_ms: f64, rss_mb: u64, ready_rss_mb: u64) -> (f64, u64) {
    ((host_cpu_at_end_ms - host_cpu_at_start_ms).max(0.0), rss_mb.saturating_sub(ready_rss_mb) << 20)
}

/// How long a run's allowance stays in its host's budget after the run answered (its
/// isolate is disposed after the answer; on a loaded machine that can take a while).
pub const LINGER_MS: u64 = 500;

/// How long a run that ended in a host stays a suspect when the host then passes its
/// memory budget: the pages of a heap that hit its limit may come back to the system
/// later than `LINGER_MS`, and the run left alone in the host must not be blamed for them.
pub const RECENTLY_ENDED_MS: u64 = 2_000;

/// Runs that ended recently in one host: (memory MB, ended at ms).
#[derive(Debug, Clone, Default)]
pub struct Lingering {
    ended: Vec<(u32, u64)>,
}

impl Lingering {
    pub fn ended(&mut self, memory_mb: u32, now_ms: u64) {
        self.ended.push((memory_mb, now_ms));
    }

    /// The memory limits of the `at_most` latest runs that ended less than `LINGER_MS`
    /// before `now_ms` (entries older than `RECENTLY_ENDED_MS` are forgotten). A host holds
    /// at most its run capacity of isolates at once, so no more allowances than that can
    /// still be resident: without the cap a stream of runs that end at once (a few ms
    /// each) would lift the budget by hundreds of allowances for a neighbour to spend.
    pub fn current(&mut self, now_ms: u64, at_most: usize) -> impl Iterator<Item = u32> + '_ {
        self.ended.retain(|&(_, at)| now_ms.saturating_sub(at) < RECENTLY_ENDED_MS);
        self.ended.iter().rev().filter(move |&&(_, at)| now_ms.saturating_sub(at) < LINGER_MS).take(at_most).map(|&(mb, _)| mb)
    }

    /// How many runs ended less than `RECENTLY_ENDED_MS` before `now_ms`: suspects, beside
    /// the runs in flight, when the host ends (`lost_run_verdict`).
    pub fn recently_ended(&self, now_ms: u64) -> usize {
        self.ended.iter().filter(|&&(_, at)| now_ms.saturating_sub(at) < RECENTLY_ENDED_MS).count()
    }
}

// ---- starts ----------------------------------------------------------------------

/// The niceness a host adds to the parent's when it starts (Linux: CFS weights, within the
/// parent's session). The parent is the application: its event loop must get the CPU
/// when it needs it, before sandboxed code does (on 2 cores, with hosts spinning in
/// hostile loops, a parent at equal weight got a third of a core: results built late, its
/// loop delayed 100-600 ms); hosts share what it leaves among themselves as before.
pub const HOST_NICENESS: i32 = 10;

/// The niceness to set in a host whose parent has `parent_nice`: `HOST_NICENESS` more,
/// within the range Linux allows (-20..=19).
pub fn host_nice(parent_nice: i32) -> i32 {
    parent_nice.saturating_add(HOST_NICENESS).clamp(-20, 19)
}

/// Consecutive start failures after which queued runs are failed instead of waiting.
pub const MAX_START_FAILURES: u32 = 3;
/// The wait before hosts are tried again after `MAX_START_FAILURES`, doubling with each
/// further failure up to `MAX_START_BACKOFF_MS`.
pub const START_BACKOFF_MS: u64 = 1_000;
pub const MAX_START_BACKOFF_MS: u64 = 30_000;

/// Host replacements allowed at once; beyond them, one more per `RESTART_PERIOD_MS`
/// (a stream of runs that end their hosts must not keep the machine busy starting
/// `node` processes: each start costs about 50 ms of CPU).
pub const RESTART_BURST: u32 = 8;
pub const RESTART_PERIOD_MS: u64 = 100;

/// What to do after a host failed to start.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StartVerdict {
    /// Start another at once.
    Retry,
    /// Fail the queued runs (no host can be had) and start none before `after_ms`.
    GiveUp { after_ms: u64 },
}

/// Start failures and restarts of one engine's hosts.
#[derive(Debug, Clone, Default)]
pub struct Starts {
    failures: u32,
    /// Restart tokens used, and when they were last refilled (ms on the caller's clock).
    used: u32,
    refilled_at: u64,
}

impl Starts {
    /// A host failed before it was ready.
    pub fn failed(&mut self) -> StartVerdict {
        self.failures += 1;
        if self.failures < MAX_START_FAILURES {
            return StartVerdict::Retry;
        }
        let doublings = (self.failures - MAX_START_FAILURES).min(16);
        StartVerdict::GiveUp { after_ms: (START_BACKOFF_MS << doublings).min(MAX_START_BACKOFF_MS) }
    }

    /// A host reported ready: the failures are forgiven.
    pub fn ready(&mut self) {
        self.failures = 0;
    }

    /// Whether a host that ended may be replaced now (`now_ms` on a monotonic clock);
    /// if not, the caller tries again after `RESTART_PERIOD_MS`. The first start of
    /// each host is not counted: only replacements are.
    pub fn may_replace(&mut self, now_ms: u64) -> bool {
        let refills = now_ms.saturating_sub(self.refilled_at) / RESTART_PERIOD_MS;
        if refills > 0 {
            self.used = self.used.saturating_sub(refills.min(u32::MAX as u64) as u32);
            self.refilled_at += refills * RESTART_PERIOD_MS;
        }
        if self.used >= RESTART_BURST {
            return false;
        }
        self.used += 1;
        true
    }
}

// ---- frames ----------------------------------------------------------------------

/// Largest frame a run's host may send beyond the run's limits (error texts, headers).
pub const FRAME_HEADROOM_BYTES: usize = 4 * 1024 * 1024;
/// Largest frame of no run (`Health`, `Ready`, `Invalid`): a few hundred bytes.
pub const MAX_CONTROL_FRAME_BYTES: usize = 64 * 1024;

/// Largest frame the host of a run with `bridge` limits may send for it: a host call's
/// arguments or a result, with the run's logs, plus headroom. Anything longer ends the host.
pub fn frame_limit(bridge: &BridgeLimits) -> usize {
    let logs = bridge.max_log_bytes.saturating_add(8usize.saturating_mul(bridge.max_log_entries));
    bridge.max_message_bytes.max(bridge.max_output_bytes).saturating_add(logs).saturating_add(FRAME_HEADROOM_BYTES)
}

/// Health frames a host may send beyond one per `done`: a few at once, then one per
/// period (a real host reports 20 ms after runs end, coalesced).
pub const HEALTH_BURST: u64 = 16;
pub const HEALTH_PERIOD_MS: u64 = 10;

/// Whether a host `age_ms` old that has sent `frames` health frames (this one included)
/// and `dones` run answers stays within what a real host sends.
pub fn health_allowed(frames: u64, dones: u64, age_ms: u64) -> bool {
    frames <= HEALTH_BURST + dones + age_ms / HEALTH_PERIOD_MS
}

/// What the events a host sends for one run may amount to: a `started` once, `console`
/// entries only if asked for and within the log limits, host calls and data requests
/// within `maxMessages`, host calls in flight within `maxPendingHostCalls` and
/// `maxPendingHostCallBytes`: what the run's isolate enforces. A host that sends more is
/// not the host we started (a compromised one could make the parent buffer without end).
#[derive(Debug, Clone)]
pub struct EventBudget {
    bridge: BridgeLimits,
    stream_console: bool,
    started: bool,
    consoles: usize,
    console_bytes: usize,
    messages: u64,
    calls: HashMap<u32, usize>,
    call_bytes: usize,
    /// Values and built cost of each call's arguments in flight (see `value_count`), and
    /// their sums; the most that cost may reach (`limits::built_value_budget`).
    call_values: HashMap<u32, (u64, u64)>,
    values: u64,
    cost: u64,
    max_cost: u64,
    data_requests: HashSet<u32>,
    /// `resolve` requests seen, and the most the run's isolate makes (`maxModules`).
    module_requests: u32,
    max_module_requests: u32,
}

/// Why a host's event was one too many.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OverBudget(pub &'static str);

impl EventBudget {
    pub fn new(bridge: BridgeLimits, stream_console: bool) -> Self {
        EventBudget {
            bridge,
            stream_console,
            started: false,
            consoles: 0,
            console_bytes: 0,
            messages: 0,
            calls: HashMap::new(),
            call_bytes: 0,
            call_values: HashMap::new(),
            values: 0,
            cost: 0,
            max_cost: crate::limits::built_value_budget(bridge.max_pending_host_call_bytes),
            data_requests: HashSet::new(),
            module_requests: 0,
            max_module_requests: u32::MAX,
        }
    }

    /// The run's isolate asks `resolve` at most `max` times (`maxModules`).
    pub fn with_max_module_requests(mut self, max: u32) -> Self {
        self.max_module_requests = max;
        self
    }

    /// A `resolve` request: a data request (counted, awaited), and one of `maxModules`.
    pub fn module_request(&mut self, id: u32, frame_bytes: usize) -> Result<(), OverBudget> {
        self.module_requests = self.module_requests.saturating_add(1);
        if self.module_requests > self.max_module_requests {
            return Err(OverBudget("more resolve requests than the run may make"));
        }
        self.data_request(id, frame_bytes)
    }

    pub fn started(&mut self) -> Result<(), OverBudget> {
        if std::mem::replace(&mut self.started, true) {
            return Err(OverBudget("a second started event"));
        }
        Ok(())
    }

    pub fn console(&mut self, frame_bytes: usize) -> Result<(), OverBudget> {
        self.consoles += 1;
        self.console_bytes = self.console_bytes.saturating_add(frame_bytes);
        let byte_limit = self.bridge.max_log_bytes.saturating_add(64 * self.bridge.max_log_entries);
        if !self.stream_console || self.consoles > self.bridge.max_log_entries || self.console_bytes > byte_limit {
            return Err(OverBudget("more console events than the run may send"));
        }
        Ok(())
    }

    pub fn host_call(&mut self, call_id: u32, arg_bytes: usize) -> Result<(), OverBudget> {
        self.messages += 1;
        if self.messages > self.bridge.max_messages as u64 || arg_bytes > self.bridge.max_message_bytes {
            return Err(OverBudget("more host calls than the run may make"));
        }
        if self.calls.insert(call_id, arg_bytes).is_some() {
            return Err(OverBudget("a host call id already in flight"));
        }
        self.call_bytes += arg_bytes;
        if self.calls.len() > self.bridge.max_pending_host_calls as usize || self.call_bytes > self.bridge.max_pending_host_call_bytes {
            return Err(OverBudget("more host calls in flight than the run may keep"));
        }
        Ok(())
    }

    /// Counts the values of host call `call_id`'s arguments (admitted by `host_call`)
    /// before anything of them is built on Node's thread: more than `maxMessageValues`,
    /// or in flight past `maxPendingHostCallValues`, is more than the run's isolate lets
    /// through, so the host is not the one we started.
    pub fn host_call_values(&mut self, call_id: u32, args: &[u8]) -> Result<(), OverBudget> {
        let counted = tally(args, self.args_bounds());
        self.host_call_counted(call_id, counted)
    }

    /// What one call's arguments may hold (`tally`'s bounds), for counting them elsewhere.
    pub fn args_bounds(&self) -> Bounds {
        Bounds { values: self.bridge.max_message_values as u64, cost: crate::limits::built_value_budget(self.bridge.max_message_bytes) }
    }

    /// `host_call_values` with the arguments counted already (off the lock, within
    /// `args_bounds`).
    pub fn host_call_counted(&mut self, call_id: u32, counted: Result<crate::value_count::Tally, CountError>) -> Result<(), OverBudget> {
        let t = match counted {
            Ok(t) => t,
            Err(CountError::TooMany { .. }) => return Err(OverBudget("host call arguments of more values than the run may send")),
            Err(CountError::TooCostly { .. }) => {
                return Err(OverBudget("host call arguments that would cost more once built than the run may send"))
            }
            Err(CountError::Unreadable(_)) => return Err(OverBudget("host call arguments that are not serialized values")),
        };
        self.values += t.values;
        self.cost = self.cost.saturating_add(t.cost);
        let entry = self.call_values.entry(call_id).or_default();
        entry.0 += t.values;
        entry.1 = entry.1.saturating_add(t.cost);
        if self.values > self.bridge.max_pending_host_call_values as u64 {
            return Err(OverBudget("more host-call argument values in flight than the run may keep"));
        }
        if self.cost > self.max_cost {
            return Err(OverBudget("host-call arguments in flight that would cost more once built than the run may keep"));
        }
        Ok(())
    }

    /// The parent answered host call `call_id`: it is no longer in flight. False when it
    /// was not (a late reply after the run ended, or an id never sent).
    pub fn answered(&mut self, call_id: u32) -> bool {
        if let Some((n, cost)) = self.call_values.remove(&call_id) {
            self.values -= n;
            self.cost -= cost;
        }
        match self.calls.remove(&call_id) {
            Some(bytes) => {
                self.call_bytes -= bytes;
                true
            }
            None => false,
        }
    }

    pub fn data_request(&mut self, id: u32, frame_bytes: usize) -> Result<(), OverBudget> {
        self.messages += 1;
        if self.messages > self.bridge.max_messages as u64
            || frame_bytes > self.bridge.max_message_bytes.saturating_add(FRAME_HEADROOM_BYTES)
            || !self.data_requests.insert(id)
        {
            return Err(OverBudget("more data requests than the run may make"));
        }
        Ok(())
    }

    /// Whether data request `id` waits for an answer; it no longer does after this.
    pub fn take_data_request(&mut self, id: u32) -> bool {
        self.data_requests.remove(&id)
    }

    /// Whether anything of the run has been seen outside its host: a host call, a data
    /// request or a streamed console entry (its `started` event is not counted: a run
    /// started again does not send it twice).
    pub fn seen_outside(&self) -> bool {
        self.messages > 0 || self.consoles > 0
    }
}

// ---- placement -------------------------------------------------------------------

/// What placement needs to know of one host.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct HostView {
    /// Ready and taking work (not starting, draining or dead).
    pub serving: bool,
    pub runs: usize,
    /// Warm isolates it likely has now.
    pub warm: u32,
    /// When it was last given a run (a counter): ties go to the one idle longest.
    pub last_start: u64,
    /// It serves one run alone (a run started again after its host ended): it takes no
    /// other until that run ends.
    pub solo: bool,
    /// It has a stuck thread (at the lowest priority) and is to end once its runs end.
    pub draining: bool,
    /// It was started for one persistent sandbox and serves only that sandbox's runs
    /// (see `sandbox_host_pool`): no placement here ever picks it.
    pub dedicated: bool,
}

/// The host a run should start on, or `None` when none can take it now. A run that must
/// run `alone` takes only a serving host with no runs. Others take a serving host with a
/// free slot (`per_host`): one with a warm isolate first (a run there starts at once),
/// then the least busy, then the one given a run longest ago.
pub fn place(hosts: &[HostView], per_host: usize, alone: bool) -> Option<usize> {
    let eligible =
        |h: &HostView| h.serving && !h.draining && !h.solo && !h.dedicated && if alone { h.runs == 0 } else { h.runs < per_host };
    let better = |a: &HostView, b: &HostView| {
        let (aw, bw) = (a.warm > 0, b.warm > 0);
        if aw != bw {
            return aw;
        }
        if a.runs != b.runs {
            return a.runs < b.runs;
        }
        a.last_start < b.last_start
    };
    let mut best: Option<usize> = None;
    for (i, h) in hosts.iter().enumerate() {
        if eligible(h) && best.is_none_or(|b| better(h, &hosts[b])) {
            best = Some(i);
        }
    }
    best
}

/// The host a run should start on when every serving host has its share of runs (some
/// hosts are being replaced): any serving host below `max_runs` (the engine's concurrency
/// cap, which admission already enforces), so no run waits for a host to start while
/// another serves. `None` for a run that must run alone.
pub fn place_overflow(hosts: &[HostView], max_runs: usize, alone: bool) -> Option<usize> {
    if alone {
        return None;
    }
    place(hosts, max_runs, false)
}

/// The host a run should start on when no host takes runs but draining ones and ones
/// serving a run alone (hosts end faster than replacements start, under a stream of
/// hostile runs): one of those, rather than a wait of a host's start. A draining host's
/// stuck thread is at the lowest priority; a run next to one started again alone is new, so
/// nothing of it has been seen either and it would be started again too if that host
/// ended. `None` once any other host takes runs, so those hosts go back to their state.
pub fn place_last_resort(hosts: &[HostView], max_runs: usize, alone: bool) -> Option<usize> {
    if alone || hosts.iter().any(|h| h.serving && !h.draining && !h.solo && !h.dedicated) {
        return None;
    }
    let fallback: Vec<HostView> = hosts.iter().map(|h| HostView { draining: false, solo: false, ..*h }).collect();
    place(&fallback, max_runs, false)
}

// ---- persistent sandboxes ---------------------------------------------------------

/// Persistent sandboxes of one tenant a sandbox host holds at most, unless the engine says
/// otherwise (`sandboxesPerHost`): a host costs the machine 7-9 MB and 60 ms to start, an
/// idle sandbox in it about 1 MB, so an agent server's hundreds of sandboxes cost a few MB
/// each, and most open without a host start.
pub const DEFAULT_SANDBOXES_PER_HOST: u64 = 16;
/// The most `sandboxesPerHost` may say.
pub const MAX_SANDBOXES_PER_HOST: u64 = 256;

/// The pool a sandbox host starts with: a slot and a place for each of the sandboxes it
/// may hold (`sandboxes_per_host`, at most the engine's slots running at once), and no
/// warm isolate (no one-shot run ever comes to it; each would cost it memory). Sandboxes
/// live in hosts of their own, one tenant's to a host, so that no one-shot run and no
/// other tenant can end them: a one-shot run that ends its host (a memory bomb, a crash, a
/// built-in that ignores termination) can be started again elsewhere, a sandbox's context
/// cannot. A sandbox that ends its host ends its host's other sandboxes (each closes
/// `hostLost`); `sandboxesPerHost: 1` gives each a host of its own.
pub fn sandbox_host_pool(engine: PoolConfig, sandboxes_per_host: usize) -> PoolConfig {
    let sandboxes = sandboxes_per_host.max(1);
    // The parent admitted the sandboxes and queued their runs (with their deadlines) already.
    PoolConfig {
        memory_mb: engine.memory_mb,
        max_concurrent: sandboxes.min(engine.max_concurrent.max(1)),
        warm_pool_size: 0,
        max_queue: sandboxes,
        max_queue_ms: None,
        max_open_sandboxes: sandboxes,
        max_open_sandboxes_per_tenant: sandboxes,
    }
}

/// A sandbox host as `sandbox_host_for` sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxHostView {
    /// It holds the sandboxes of the tenant opening one.
    pub same_tenant: bool,
    /// It takes more: starting or serving, not told to end, not draining, no run of it
    /// well past its wall limit (it may be ended for that).
    pub taking: bool,
    /// Sandboxes open in it.
    pub open: usize,
}

/// The host a new sandbox opens in: the fullest host of its tenant with room (packing
/// keeps hosts, and the memory they cost, few); `None`: a host is started for it.
pub fn sandbox_host_for(hosts: &[SandboxHostView], sandboxes_per_host: usize) -> Option<usize> {
    hosts
        .iter()
        .enumerate()
        .filter(|(_, h)| h.same_tenant && h.taking && h.open < sandboxes_per_host.max(1))
        .max_by_key(|(i, h)| (h.open, std::cmp::Reverse(*i)))
        .map(|(i, _)| i)
}

/// The pool a shared host (one-shot runs only) starts with: the parent's whole pool as
/// its slots and queue (`host_queue_size`), its share of the warm isolates, no queue
/// deadline (the parent admits, queues and expires runs) and no sandbox (each has a host
/// of its own).
pub fn shared_host_pool(engine: PoolConfig, processes: usize) -> PoolConfig {
    PoolConfig {
        memory_mb: engine.memory_mb,
        max_concurrent: engine.max_concurrent,
        warm_pool_size: engine.warm_pool_size.div_ceil(processes.max(1)),
        max_queue: host_queue_size(engine.max_concurrent),
        max_queue_ms: None,
        max_open_sandboxes: 0,
        max_open_sandboxes_per_tenant: 0,
    }
}

/// Whether another persistent sandbox may have a host started for it now: not while no
/// host can be started (`cannot_start`). The bounds on open sandboxes are the pool's
/// (`Pool::admit_sandbox`: `maxOpenSandboxes`, `maxOpenSandboxesPerTenant`), so an
/// engine's hosts never number more than its shared hosts, a spare and
/// `maxOpenSandboxes`. The refusal is typed (overloaded) and says why.
pub fn sandbox_host_refusal(cannot_start: Option<&Failure>) -> Option<Failure> {
    cannot_start
        .map(|f| Failure::new(ErrorKind::Overloaded, format!("No sandbox host process can be started for the sandbox now: {}", f.message)))
}

/// Whether a sandbox host, after a sandbox of it closed or a run left it, is ended now:
/// yes once no sandbox is open in it and no run is in flight there; a run still in flight
/// answers first (it was stopped with its sandbox, or it is the run whose end closed the
/// sandbox, and its answer says why), or meets its deadline.
pub fn end_sandbox_host_now(runs_in_flight: usize, open_sandboxes: usize) -> bool {
    runs_in_flight == 0 && open_sandboxes == 0
}

/// Whether a spare host stands by after a host's `end` (`SPARE_AFTER_TROUBLE_MS`): not
/// for ends that are no trouble, nor for a sandbox's own host (no one-shot run was there
/// to be started again; its sandbox's runs are never replaced).
pub fn spare_after(end: &HostEnd, dedicated: bool) -> bool {
    !dedicated && !matches!(end, HostEnd::Shutdown | HostEnd::Surplus | HostEnd::SandboxClosed)
}

/// Hosts to start for runs that must run alone and find no empty host: one each, less
/// those already starting for them (waiting for a busy host to empty could take the
/// whole of its runs' limits; a host starts in tens of milliseconds).
/// The queue of a host's own engine, whose slots are the parent's whole pool
/// (`max_concurrent`). The parent admits runs and places at most `max_concurrent` on one
/// host (`place_overflow`, `place_last_resort`); a run the host has answered keeps its
/// slot there until its isolate is disposed, which may be late (its thread yields the CPU
/// to the parent first), so the next runs the parent sends may wait in this queue. Those
/// runs are among the parent's runs on that host: a queue that long never overflows.
pub fn host_queue_size(max_concurrent: usize) -> usize {
    max_concurrent.max(1)
}

pub fn solo_hosts_to_start(waiting_alone: usize, starting_for_them: usize) -> usize {
    waiting_alone.saturating_sub(starting_for_them)
}

/// The wall time a run started again may still have, `elapsed_ms` after it first started;
/// `None` when too little is left to start it at all (it fails with its host's end).
pub fn restart_wall_ms(wall_time_ms: u64, elapsed_ms: u64) -> Option<u64> {
    let left = wall_time_ms.saturating_sub(elapsed_ms);
    (left >= MIN_RESTART_WALL_MS).then_some(left)
}

// ---- ends ------------------------------------------------------------------------

/// Why a host ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum HostEnd {
    /// The persistent sandbox it was started for closed.
    SandboxClosed,
    /// Its resident memory passed its budget (MB resident, MB budget).
    Memory { rss_mb: u64, budget_mb: u64 },
    /// A run went past its deadline unanswered: the host cannot stop it.
    Overdue,
    /// It reported a stuck thread and was ended (at once, or once its other runs ended).
    Stuck,
    /// It broke the frame protocol.
    Protocol(String),
    /// It did not report ready in time.
    StartTimeout,
    /// The engine shut down, or this process is exiting.
    Shutdown,
    /// More hosts serve than the engine keeps (a replacement came up for a host that
    /// turned out well): an idle one is ended.
    Surplus,
    /// It ended on its own: a signal or an exit status (`signal SIGSEGV`, `exit code 134`),
    /// and whether its last words were those of an out-of-memory death.
    Crash { reason: String, oom: bool },
}

impl HostEnd {
    /// The `stats().processes.recycled` key of an end the supervisor chose (`None`: the
    /// host crashed, or the end was orderly).
    pub fn recycled_key(&self) -> Option<&'static str> {
        match self {
            HostEnd::Memory { .. } => Some("memory"),
            HostEnd::Overdue => Some("overdue"),
            HostEnd::Stuck => Some("stuck"),
            HostEnd::Protocol(_) => Some("protocol"),
            HostEnd::StartTimeout => Some("start-timeout"),
            HostEnd::Shutdown | HostEnd::Surplus | HostEnd::SandboxClosed | HostEnd::Crash { .. } => None,
        }
    }
}

/// The last bytes of a host's stderr kept to tell a V8 out-of-memory death from another.
pub const STDERR_TAIL_BYTES: usize = 8192;

/// Whether a host's last words are those of V8 running out of memory.
pub fn looks_like_oom(stderr_tail: &str) -> bool {
    let t = stderr_tail.to_ascii_lowercase();
    ["out of memory", "heap limit", "allocation failed"].iter().any(|p| t.contains(p))
}

/// Times a run may be started again after its host ended under it (one more for a run
/// started again alone that had neighbours placed next to it: `lost_run_verdict`).
pub const MAX_RESTARTS_PER_RUN: u32 = 1;
/// A run started again needs at least this much of its wall limit left.
pub const MIN_RESTART_WALL_MS: u64 = 50;

/// One run in flight in a host that ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LostRun {
    /// Something of it was seen outside its host (`EventBudget::seen_outside`).
    pub seen_outside: bool,
    /// It went past its own deadline (the reason of an `Overdue` end).
    pub overdue: bool,
    /// Times it has already been started again.
    pub restarts: u32,
    pub wall_time_ms: u64,
    pub elapsed_ms: u64,
    /// It ran alone in its host (a restarted run does): nobody else is a suspect.
    pub alone: bool,
}

/// What becomes of a run whose host ended.
#[derive(Debug, Clone, PartialEq)]
pub enum LostVerdict {
    /// Start it again with this much of its wall limit left; `alone` on a host when it
    /// may have been the culprit (so a culprit started again ends only its own host).
    Restart {
        wall_time_ms: u64,
        alone: bool,
    },
    Fail(Failure),
}

/// The verdict for run `run` of a host that ended for `end`, with `suspects` runs that
/// may have caused it: those in flight at the end and those that ended there within
/// `RECENTLY_ENDED_MS` (whose memory may not have come back yet). A run is started again
/// only if nothing of it was seen outside, it has starts left (`MAX_RESTARTS_PER_RUN`), it
/// was not itself overdue, the end was not a shutdown, it may not be the one to blame (the
/// culprit is known: the stuck or overdue run; or there is another suspect), and enough of
/// its wall limit is left. Everything else fails with the end's typed failure.
pub fn lost_run_verdict(end: &HostEnd, run: LostRun, suspects: usize) -> LostVerdict {
    let left = run.wall_time_ms.saturating_sub(run.elapsed_ms);
    let culprit_known = matches!(end, HostEnd::Stuck | HostEnd::Overdue);
    // A run started again alone that ends up sharing its host (runs placed next to it as a
    // last resort, while hosts end faster than they start) is one suspect among several
    // again: it gets one more start, or a hostile neighbour placed there fails it.
    let max_restarts = MAX_RESTARTS_PER_RUN + u32::from(run.alone);
    let restartable = !run.seen_outside
        && !run.overdue
        && (culprit_known || suspects > 1)
        && run.restarts < max_restarts
        && !matches!(end, HostEnd::Shutdown | HostEnd::Surplus | HostEnd::SandboxClosed)
        && !matches!(end, HostEnd::StartTimeout)
        && left >= MIN_RESTART_WALL_MS;
    if restartable {
        return LostVerdict::Restart { wall_time_ms: left, alone: !culprit_known };
    }
    LostVerdict::Fail(lost_run_failure(end, run))
}

/// The failure of a run whose host ended for `end`.
pub fn lost_run_failure(end: &HostEnd, run: LostRun) -> Failure {
    match end {
        HostEnd::Memory { rss_mb, budget_mb } => Failure::new(
            ErrorKind::MemoryLimit,
            format!(
                "The sandbox host process passed its memory budget ({rss_mb} MB resident, budget {budget_mb} MB) and was ended, with every run in it"
            ),
        ),
        HostEnd::Overdue if run.overdue => {
            let mut f = Failure::new(
                ErrorKind::Timeout,
                format!(
                    "Execution could not be stopped at its time limit ({} ms); its sandbox host process was ended",
                    run.wall_time_ms
                ),
            );
            f.limit = Some("wall");
            f
        }
        HostEnd::Overdue | HostEnd::Stuck => Failure::new(
            ErrorKind::Crashed,
            "Another run in the same sandbox host process could not be stopped, so the process was ended with every run in it",
        ),
        HostEnd::Shutdown | HostEnd::Surplus => Failure::new(ErrorKind::Aborted, "The sandbox engine is shut down"),
        HostEnd::SandboxClosed => Failure::new(ErrorKind::Aborted, "The persistent sandbox was closed"),
        HostEnd::Crash { reason, oom: true } => Failure::new(
            ErrorKind::MemoryLimit,
            format!("The sandbox host process ran out of memory ({reason}) and was ended, with every run in it"),
        ),
        HostEnd::Crash { reason, oom: false } => {
            Failure::new(ErrorKind::Crashed, format!("The sandbox host process crashed ({reason}); every run in it ended"))
        }
        HostEnd::Protocol(why) => Failure::new(
            ErrorKind::Crashed,
            format!("The sandbox host process broke the run protocol ({why}) and was ended, with every run in it"),
        ),
        HostEnd::StartTimeout => Failure::new(ErrorKind::Crashed, "The sandbox host process did not start in time"),
    }
}

/// The failure of queued runs when no host can be started (`why`: the last failure,
/// `stderr_tail`: the host's last words, if any).
pub fn start_failure(why: &str, stderr_tail: &str) -> Failure {
    let tail: Vec<&str> = stderr_tail.trim().lines().rev().take(3).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    let message = if tail.is_empty() {
        format!("Could not start a sandbox host process ({why})")
    } else {
        format!("Could not start a sandbox host process ({why}): {}", tail.join(" | "))
    };
    Failure::new(ErrorKind::Crashed, message)
}

/// What to do with a host that reported a thread stuck in a run that ignored termination
/// (its run already answered as timed out; the thread lowered to the lowest priority, so it
/// takes the smallest share of the CPU). With no other run in it, it is ended now; else it
/// takes no new work, a replacement starts at once, and it is ended once its other runs
/// finish: they keep what they have done (starting them again elsewhere would throw it
/// away, and is not possible at all for a run that has been seen outside).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StuckVerdict {
    EndNow,
    Drain,
}

pub fn stuck_verdict(neighbours: usize) -> StuckVerdict {
    if neighbours == 0 {
        StuckVerdict::EndNow
    } else {
        StuckVerdict::Drain
    }
}

// ---- the host's environment ------------------------------------------------------

/// The environment of a sandbox host: isolet's own settings and the time zone (so dates
/// read alike in both modes), nothing else (no secrets of the parent reach a host), and
/// libuv kept off io_uring: rings opened before lock-down would let the host submit work
/// that seccomp never sees.
pub fn host_env<'a>(parent: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<(String, String)> {
    let mut env = vec![("ISOLET_SANDBOX_HOST".to_string(), "1".to_string()), ("UV_USE_IO_URING".to_string(), "0".to_string())];
    for (k, v) in parent {
        if (k.starts_with("ISOLET_") && k != "ISOLET_SANDBOX_HOST") || k == "TZ" {
            env.push((k.to_string(), v.to_string()));
        }
    }
    env
}

/// The descriptor a sandbox host finds its run channel on (0-2 are /dev/null, /dev/null
/// and the stderr pipe; every other descriptor of the parent is closed in the child).
pub const HOST_CHANNEL_FD: i32 = 3;

#[cfg(test)]
mod tests;
