//! Resource limits, their defaults and their validation.
//!
//! The values users give are checked in `options/`, under the public option names;
//! the types here are the checked, ready-to-use limits.
//!
//! # Limitations
//! - The memory limit caps the V8 heap (young + old generation). ArrayBuffer and typed
//!   array backing stores live outside that heap and are capped separately at the same
//!   number of megabytes, so a run can hold at most twice `memory_mb` in total.
//! - WebAssembly memories are reserved by V8 outside both budgets (capped by the
//!   module's own maximum, at most 4 GiB of address space, committed lazily).
//! - The time limits are enforced by a watchdog thread that terminates execution.
//!   A few V8 built-ins loop without checking for termination; such a run is reported
//!   as timed out within a grace period and its thread is quarantined: lowered to idle
//!   priority and left to finish on its own (never stopped by a signal).
use crate::error::{ErrorKind, Failure};

/// Default memory for `runSandbox` (the `@azmr/ai` seed): 64 MB.
pub const DEFAULT_RUN_MEMORY_MB: u32 = 64;
/// Default memory per isolate for `SandboxEngine` (the `@coda/sandbox` seed): 128 MB.
pub const DEFAULT_ENGINE_MEMORY_MB: u32 = 128;
/// Default wall-clock limit: 5 seconds.
pub const DEFAULT_WALL_TIME_MS: u64 = 5_000;
/// Smallest accepted memory limit; V8 needs a few megabytes just to start.
pub const MIN_MEMORY_MB: u32 = 8;
/// Largest accepted memory limit.
pub const MAX_MEMORY_MB: u32 = 8_192;
/// Largest accepted time limit (about 24 days, the range of a JS timer).
pub const MAX_TIME_MS: u64 = 2_147_483_647;

/// Default cap on one message crossing the bridge (host-call arguments, replies,
/// data answers): 16 MiB, so a file at the file capability's 10 MB cap fits.
pub const DEFAULT_MAX_MESSAGE_BYTES: usize = 16 * 1024 * 1024;
/// Default cap on host calls plus data requests per execution.
pub const DEFAULT_MAX_MESSAGES: u32 = 1_000;
/// Default cap on the serialized result: 16 MiB.
pub const DEFAULT_MAX_OUTPUT_BYTES: usize = 16 * 1024 * 1024;
/// Default cap on captured console entries per execution.
pub const DEFAULT_MAX_LOG_ENTRIES: usize = 1_000;
/// Default cap on captured console bytes per execution: 1 MiB.
pub const DEFAULT_MAX_LOG_BYTES: usize = 1024 * 1024;
/// Default cap on the bytes of host-call arguments and replies in flight at once per
/// execution: 64 MiB, four default-sized messages. Counted from the call until its
/// reply reached the sandbox, so a run that fires calls without awaiting them cannot
/// make the host hold more than this on its behalf.
pub const DEFAULT_MAX_PENDING_HOST_CALL_BYTES: usize = 4 * DEFAULT_MAX_MESSAGE_BYTES;
/// Default cap on host calls in flight at once per execution.
pub const DEFAULT_MAX_PENDING_HOST_CALLS: u32 = 128;
/// Default cap on the values of the result (see `value_count` for what one value is):
/// 8,388,608, a safety bound far above data (1.5 M numbers are 1.5 M values, 100,000 rows
/// of 5 fields 1.1 M). What a result costs the parent is bounded by what it would cost
/// once built (`value_count`'s estimate, within the run's memory: `built_value_budget`),
/// and it is built a slice at a time (`lib/codec.js`), so its count no longer stands for
/// a stall of the parent's event loop.
pub const DEFAULT_MAX_OUTPUT_VALUES: u32 = 1 << 23;
/// Default cap on the values of one message from the sandbox (a host call's argument
/// list), as for the result.
pub const DEFAULT_MAX_MESSAGE_VALUES: u32 = 1 << 23;
/// Default cap on the values of host-call arguments in flight at once per execution:
/// four default-sized messages, as for the bytes (`derived_limit`).
pub const DEFAULT_MAX_PENDING_HOST_CALL_VALUES: u32 = 1 << 25;
/// The limits derived from another: each is `factor` times the one it comes from unless
/// the user gives it too, and must then be at least that one (one message must fit in what
/// may be in flight). `BridgeLimitsGiven::resolve` applies them; docs/budgets.md lists them.
pub const DERIVED_LIMITS: &[DerivedLimit] = &[
    DerivedLimit { option: "maxPendingHostCallBytes", from: "maxMessageBytes", factor: 4, unit: "bytes" },
    DerivedLimit { option: "maxPendingHostCallValues", from: "maxMessageValues", factor: 4, unit: "values" },
];

/// One limit derived from another (see `DERIVED_LIMITS`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DerivedLimit {
    /// The derived option.
    pub option: &'static str,
    /// The option it follows.
    pub from: &'static str,
    /// Its value when only `from` (or neither) is given: `factor` x `from`.
    pub factor: u64,
    pub unit: &'static str,
}

impl DerivedLimit {
    /// The derived limit's value: the one given, or `factor` x `from` (within `max`); an
    /// error when the given one is below `from`, naming both and the rule.
    pub fn resolve(&self, given: Option<u64>, from: u64, max: u64) -> Result<u64, DerivedLimitError> {
        match given {
            None => Ok(from.saturating_mul(self.factor).min(max)),
            Some(v) if v >= from => Ok(v),
            Some(v) => Err(DerivedLimitError { limit: *self, given: v, from }),
        }
    }
}

/// Both a derived limit and the one it follows were given, and they break the rule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DerivedLimitError {
    pub limit: DerivedLimit,
    pub given: u64,
    pub from: u64,
}

/// What values built in the parent may cost its heap (`value_count`'s estimate), per byte
/// of the byte limit they cross under: a result at most 6 x `maxOutputBytes`, one host
/// call's arguments 6 x `maxMessageBytes`, the arguments in flight 6 x
/// `maxPendingHostCallBytes`. Data costs 1-5 times its bytes once built (1.5 M doubles:
/// 13.5 MB, 36-42 MB built; 100,000 rows of 5 fields: 8.3 MB, 19 MB; 900,000 small
/// objects: 14.4 MB, 72 MB); values that cost far more than their bytes are refused:
/// 16 MiB of two-character strings would be 134 MB, of empty objects 358 MB, a 17-byte
/// sparse array 240 MB. Derived from the byte limit, it follows it (`DERIVED_LIMITS`).
pub const BUILT_COST_PER_BYTE: u64 = 6;

/// `BUILT_COST_PER_BYTE` x `limit_bytes`.
pub fn built_value_budget(limit_bytes: usize) -> u64 {
    BUILT_COST_PER_BYTE.saturating_mul(limit_bytes as u64)
}

/// Built in the host, the result would cost its heap about `cost` bytes, more than
/// `built_value_budget` of `maxOutputBytes` (`max`) allows.
pub fn too_costly_output(cost: u64, max: usize) -> Failure {
    let k = BUILT_COST_PER_BYTE;
    Failure {
        limit: Some("maxOutputBytes"),
        ..Failure::new(
            ErrorKind::Runtime,
            format!(
                "The result would take about {cost} bytes in the host once built, over {k} x the output limit of {max} bytes (maxOutputBytes)"
            ),
        )
    }
}
/// Longest `data` key, in UTF-8 bytes. Keys are property names, not payloads; a longer
/// read is refused in the sandbox and never reaches the host.
/// Longest engine `prelude`, in UTF-8 bytes: every host keeps it, and its compiled form.
pub const MAX_PRELUDE_BYTES: usize = 8 * 1024 * 1024;
/// How long the prelude may run when `init()` checks it (each run then counts its prelude
/// against the run's own limits).
pub const PRELUDE_INIT_TIME_MS: u64 = 2_000;
/// Default compiled-code cache per engine (`codeCacheMb`), and in process mode per host.
pub const DEFAULT_CODE_CACHE_MB: u32 = 32;
/// Largest `codeCacheMb`.
pub const MAX_CODE_CACHE_MB: u32 = 1024;
pub const MAX_DATA_KEY_BYTES: usize = 1024;
/// Longest error message a host rejection carries into the sandbox, in UTF-8 bytes.
pub const MAX_REJECTION_MESSAGE_BYTES: usize = 8 * 1024;

/// CPU, memory and wall-clock limits of one execution.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IsolateLimits {
    /// V8 heap limit in MB (and, separately, the ArrayBuffer budget).
    pub memory_mb: u32,
    /// Wall-clock limit in ms; counts waiting on the host. Default 5000.
    pub wall_time_ms: u64,
    /// CPU-time limit in ms, counting only time on the isolate's thread. Default: none
    /// (the wall-clock limit bounds CPU time too).
    pub cpu_time_ms: Option<u64>,
}

impl IsolateLimits {
    pub fn with_memory(memory_mb: u32) -> Self {
        IsolateLimits { memory_mb, wall_time_ms: DEFAULT_WALL_TIME_MS, cpu_time_ms: None }
    }

    pub fn heap_bytes(&self) -> usize {
        self.memory_mb as usize * 1024 * 1024
    }
}

impl Default for IsolateLimits {
    fn default() -> Self {
        IsolateLimits::with_memory(DEFAULT_ENGINE_MEMORY_MB)
    }
}

/// Size and count limits on everything that crosses between host and isolate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BridgeLimits {
    /// Bytes of one serialized message in either direction. Default 16 MiB.
    pub max_message_bytes: usize,
    /// Host calls plus data requests per execution. Default 1000.
    pub max_messages: u32,
    /// Bytes of the serialized result. Default 16 MiB.
    pub max_output_bytes: usize,
    /// Console entries kept per execution. Default 1000.
    pub max_log_entries: usize,
    /// Console bytes kept per execution. Default 1 MiB.
    pub max_log_bytes: usize,
    /// Bytes of host-call arguments plus replies in flight at once. Default 64 MiB.
    pub max_pending_host_call_bytes: usize,
    /// Host calls in flight at once. Default 128.
    pub max_pending_host_calls: u32,
    /// Values of the serialized result. Default 32,768.
    pub max_output_values: u32,
    /// Values of one message from the sandbox (host-call arguments). Default 32,768.
    pub max_message_values: u32,
    /// Values of host-call arguments in flight at once. Default 131,072.
    pub max_pending_host_call_values: u32,
}

impl Default for BridgeLimits {
    fn default() -> Self {
        BridgeLimits {
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            max_messages: DEFAULT_MAX_MESSAGES,
            max_output_bytes: DEFAULT_MAX_OUTPUT_BYTES,
            max_log_entries: DEFAULT_MAX_LOG_ENTRIES,
            max_log_bytes: DEFAULT_MAX_LOG_BYTES,
            max_pending_host_call_bytes: DEFAULT_MAX_PENDING_HOST_CALL_BYTES,
            max_pending_host_calls: DEFAULT_MAX_PENDING_HOST_CALLS,
            max_output_values: DEFAULT_MAX_OUTPUT_VALUES,
            max_message_values: DEFAULT_MAX_MESSAGE_VALUES,
            max_pending_host_call_values: DEFAULT_MAX_PENDING_HOST_CALL_VALUES,
        }
    }
}

/// Environment variable: the most memory, in MB, that threads parked after a fatal V8
/// out-of-memory may hold in a process before its new thread-mode runs are refused.
pub const MAX_PARKED_MB_ENV: &str = "ISOLET_MAX_PARKED_MB";
/// Default of `ISOLET_MAX_PARKED_MB`: 512 MB, three or four 64 MB runs' isolates (each
/// holds its heap at the limit plus the headroom granted, ~130 MB, and its ArrayBuffers).
pub const DEFAULT_MAX_PARKED_MB: u64 = 512;

/// What a thread parked after a fatal OOM keeps in the process beyond what its isolate
/// reports (`held`: its heap's committed pages, V8's malloc'd memory, its ArrayBuffers):
/// measured as the process's resident growth, a parked 64 MB run left 190 MB against 126
/// reported, a 128 MB one 205 against 144 (Node 20).
pub const PARKED_OVERHEAD_BYTES: u64 = 64 * 1024 * 1024;

/// What a thread parked after a fatal OOM holds for good, for `parked_memory_refusal`.
pub fn parked_thread_bytes(held: u64) -> u64 {
    held.saturating_add(PARKED_OVERHEAD_BYTES)
}

/// The bound from the environment's value (unset or unparsable: the default), in bytes.
pub fn max_parked_bytes(env: Option<&str>) -> u64 {
    env.and_then(|v| v.trim().parse::<u64>().ok()).unwrap_or(DEFAULT_MAX_PARKED_MB).saturating_mul(1024 * 1024)
}

/// `Some(failure)` once `threads` parked threads hold `bytes`, at least `max`: a thread
/// V8 ended in a fatal OOM cannot be given back in this process (V8 would abort it if
/// the thread returned; its isolate cannot be disposed), so no new run may risk another.
pub fn parked_memory_refusal(threads: usize, bytes: u64, max: u64) -> Option<Failure> {
    (threads > 0 && bytes >= max).then(|| {
        let mb = |b: u64| b.div_ceil(1024 * 1024);
        Failure::new(
            ErrorKind::Overloaded,
            format!(
                "{threads} sandbox threads of this process ended in a fatal out-of-memory and hold {} MB it cannot reclaim \
                 (limit {MAX_PARKED_MB_ENV}={}): thread isolation cannot give such memory back. Use isolation: 'process' \
                 (the default), where such a run ends its sandbox host process and its memory with it, or restart this process",
                mb(bytes),
                mb(max)
            ),
        )
    })
}

/// The niceness a quarantined thread is lowered to (Linux): the lowest priority of the
/// ordinary policy, not SCHED_IDLE. It shares its process with others (Node's thread in
/// thread mode, its neighbours' runs in a draining sandbox host), and a thread it blocks
/// on a lock it holds (the address space's, taken by a page fault or an mmap; an
/// allocator's) waits until it runs again: at idle priority, for as long as the machine
/// is busy. Soaks saw whole draining hosts stall past their runs' deadlines, using 220 ms
/// of CPU in 2.75 s, and their neighbours fail with them. At nice 19 it still gets its
/// small fair share, so such a wait is short; the throttle bounds what it takes.
pub const QUARANTINE_NICE: i32 = 19;

/// A quarantined thread (a built-in that ignored termination, left to finish at the
/// lowest priority) runs at most this much CPU time between pauses: the lowest priority
/// alone still gives it a whole core when nothing else wants one, for as long as it loops.
pub const QUARANTINE_RUN_MS: u64 = 5;
/// Its pause after each `QUARANTINE_RUN_MS` of CPU time. The pause is a bounded sleep in a
/// signal handler, never a stop: a lock the thread holds (its allocator's, Node's platform
/// queue's) is held at most this much longer, where a thread stopped for good froze the
/// process.
pub const QUARANTINE_PAUSE_MS: u64 = 20;

/// The most of one core a quarantined thread uses: `QUARANTINE_RUN_MS` of every
/// `QUARANTINE_RUN_MS + QUARANTINE_PAUSE_MS` (issue 35: under half a core).
pub fn quarantine_core_share() -> f64 {
    QUARANTINE_RUN_MS as f64 / (QUARANTINE_RUN_MS + QUARANTINE_PAUSE_MS) as f64
}

/// Environment variable that keeps V8's Turboshaft loop unrolling on (`1`).
pub const LOOP_UNROLLING_ENV: &str = "ISOLET_V8_LOOP_UNROLLING";

/// The V8 flags isolet sets at load so that `TerminateExecution` reaches every loop.
///
/// V8 >= 13 unrolls loops whose body inlines a builtin with a short internal loop
/// (`while (true) x = new Array(1000).fill(1)`) and drops their interrupt check, so the
/// time limit never lands. `--no-turboshaft-loop-unrolling` (present from V8 12.4; V8
/// rejects unknown flags, so it is only set where it exists) restores the check. V8
/// flags are process-wide, so this also affects the host's own JIT; `opt_out` (the
/// `ISOLET_V8_LOOP_UNROLLING=1` environment variable) leaves V8 as it is.
pub fn v8_flags(v8_version: &str, opt_out: Option<&str>) -> Option<&'static str> {
    if opt_out.map(str::trim) == Some("1") {
        return None;
    }
    let mut parts = v8_version.split(|c: char| !c.is_ascii_digit());
    let major: u32 = parts.next()?.parse().ok()?;
    let minor: u32 = parts.next()?.parse().ok()?;
    ((major, minor) >= (12, 4)).then_some("--no-turboshaft-loop-unrolling")
}

/// Whether Node's main isolate started from Node's own startup snapshot, given
/// `process.execArgv` and `NODE_OPTIONS` (command-line options override the variable;
/// the last of `--node-snapshot` / `--no-node-snapshot` wins).
pub fn node_snapshot_in_use(exec_argv: &[String], node_options: &str) -> bool {
    let mut in_use = true;
    for arg in node_options.split_whitespace().chain(exec_argv.iter().map(String::as_str)) {
        match arg {
            "--no-node-snapshot" => in_use = false,
            "--node-snapshot" => in_use = true,
            _ => {}
        }
    }
    in_use
}

/// Node options a sandbox host process is started with, for the V8 of this Node.
/// Before V8 12 (Node 20) an isolate made while Node runs from its own startup snapshot
/// must start from that snapshot too (see `node_snapshot_in_use`), which costs about 3x the
/// CPU of V8's own blob per isolate (3.8 vs 1.25 ms measured); a sandbox host runs no
/// Node code that needs the snapshot, so it goes without. Later lines already use V8's
/// blob, and the option would only slow the host's start.
pub fn sandbox_host_node_options(v8_version: &str) -> &'static [&'static str] {
    let major: Option<u32> = v8_version.split(|c: char| !c.is_ascii_digit()).next().and_then(|m| m.parse().ok());
    match major {
        Some(m) if m < 12 => &["--no-node-snapshot"],
        _ => &[],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_quarantined_thread_uses_under_half_a_core_and_holds_a_lock_briefly() {
        assert!(quarantine_core_share() < 0.5, "{}", quarantine_core_share());
        // A pause holds the thread's locks this long; a timer below 1 ms costs more than it saves.
        const { assert!(QUARANTINE_PAUSE_MS <= 20 && QUARANTINE_RUN_MS >= 1) };
    }

    #[test]
    fn defaults_follow_the_seeds() {
        let run = IsolateLimits::with_memory(DEFAULT_RUN_MEMORY_MB);
        assert_eq!(run.memory_mb, 64);
        assert_eq!(run.wall_time_ms, 5_000);
        assert_eq!(IsolateLimits::default().memory_mb, 128);
        assert_eq!(run.heap_bytes(), 64 * 1024 * 1024);
    }

    #[test]
    fn pending_host_call_budget_defaults_to_four_messages() {
        let d = BridgeLimits::default();
        assert_eq!(d.max_pending_host_call_bytes, 4 * d.max_message_bytes);
        assert_eq!(d.max_pending_host_calls, 128);
        assert_eq!(d.max_pending_host_call_values, 4 * d.max_message_values);
        // The defaults are what the derivations make of the defaults they follow.
        let [bytes, values] = DERIVED_LIMITS else { panic!("two derived limits") };
        assert_eq!(bytes.resolve(None, d.max_message_bytes as u64, u64::MAX), Ok(d.max_pending_host_call_bytes as u64));
        assert_eq!(values.resolve(None, d.max_message_values as u64, u64::MAX), Ok(d.max_pending_host_call_values as u64));
    }

    #[test]
    fn a_derived_limit_follows_its_source_unless_given_and_then_must_fit_one_message() {
        let d = DERIVED_LIMITS[0];
        assert_eq!(d.resolve(None, 10, u64::MAX), Ok(40), "follows the message size");
        assert_eq!(d.resolve(None, 10, 25), Ok(25), "within the option's range");
        assert_eq!(d.resolve(Some(10), 10, u64::MAX), Ok(10), "given: kept");
        assert_eq!(d.resolve(Some(1000), 10, u64::MAX), Ok(1000));
        assert_eq!(d.resolve(Some(9), 10, u64::MAX), Err(DerivedLimitError { limit: d, given: 9, from: 10 }));
    }

    #[test]
    fn the_value_defaults_hold_the_issue_sizes_and_the_built_budget_follows_the_bytes() {
        // 1.5 M numbers (and their array), 100,000 rows of 5 fields (object, 5 keys, 5
        // values each), far under the safety bound.
        const { assert!(1_500_001 * 4 < DEFAULT_MAX_OUTPUT_VALUES) };
        const { assert!(1_100_001 * 4 < DEFAULT_MAX_MESSAGE_VALUES) };
        assert_eq!(built_value_budget(16 << 20), 96 << 20);
    }

    #[test]
    fn parked_memory_past_its_bound_refuses_runs_and_says_why() {
        assert_eq!(max_parked_bytes(None), 512 << 20);
        assert_eq!(max_parked_bytes(Some(" 200 ")), 200 << 20);
        assert_eq!(max_parked_bytes(Some("lots")), 512 << 20);
        assert!(parked_memory_refusal(0, 0, 0).is_none(), "nothing parked");
        assert!(parked_memory_refusal(1, (200 << 20) - 1, 200 << 20).is_none());
        let f = parked_memory_refusal(2, 260 << 20, 200 << 20).expect("refused");
        assert_eq!(f.kind, ErrorKind::Overloaded);
        assert!(f.message.starts_with("2 sandbox threads of this process ended in a fatal out-of-memory and hold 260 MB"), "{}", f.message);
        assert!(f.message.contains("ISOLET_MAX_PARKED_MB=200") && f.message.contains("isolation: 'process'"), "{}", f.message);
    }

    #[test]
    fn loop_unrolling_is_turned_off_where_the_flag_exists() {
        assert_eq!(v8_flags("11.3.244.8-node.33", None), None);
        assert_eq!(v8_flags("12.4.254.21-node.33", None), Some("--no-turboshaft-loop-unrolling"));
        assert_eq!(v8_flags("12.3.1", None), None);
        assert_eq!(v8_flags("13.6.233.10-node.20", None), Some("--no-turboshaft-loop-unrolling"));
        assert_eq!(v8_flags("14.6.1", Some("0")), Some("--no-turboshaft-loop-unrolling"));
        assert_eq!(v8_flags("14.6.1", Some("1")), None);
        assert_eq!(v8_flags("garbage", None), None);
    }

    #[test]
    fn sandbox_hosts_skip_node_snapshot_only_before_v8_12() {
        assert_eq!(sandbox_host_node_options("11.3.244.8-node.38"), &["--no-node-snapshot"]);
        assert!(sandbox_host_node_options("12.4.254.21-node.33").is_empty());
        assert!(sandbox_host_node_options("14.6.202.34-node.40").is_empty());
        assert!(sandbox_host_node_options("garbage").is_empty());
    }

    #[test]
    fn node_snapshot_use_follows_the_last_option() {
        let argv = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(node_snapshot_in_use(&[], ""));
        assert!(!node_snapshot_in_use(&argv(&["-e", "x", "--no-node-snapshot"]), ""));
        assert!(!node_snapshot_in_use(&[], "--max-old-space-size=100 --no-node-snapshot"));
        assert!(node_snapshot_in_use(&argv(&["--node-snapshot"]), "--no-node-snapshot"));
    }
}
