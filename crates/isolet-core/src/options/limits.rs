//! Every limit that more than one entry point sets, declared once: its name, bounds,
//! default and other spellings. The entry points' tables place these declarations; where
//! an entry point's contract differs (a seed's own name, a seed's own default), its row
//! says so with [`Opt::called`] or [`Opt::default_of`], and the reason is written there.
//! `a_limit_takes_the_same_range_under_every_entry_point` (tests) holds the tables to it.
use crate::limits::{
    DEFAULT_MAX_LOG_BYTES, DEFAULT_MAX_LOG_ENTRIES, DEFAULT_MAX_MESSAGES, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_MESSAGE_VALUES,
    DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_OUTPUT_VALUES, DEFAULT_MAX_PENDING_HOST_CALLS, DEFAULT_MAX_PENDING_HOST_CALL_BYTES,
    DEFAULT_MAX_PENDING_HOST_CALL_VALUES, DEFAULT_RUN_MEMORY_MB, DEFAULT_WALL_TIME_MS, MAX_MEMORY_MB, MAX_TIME_MS, MIN_MEMORY_MB,
};

use super::table::{whole, Opt};

/// Largest byte limit an option takes: 1 GiB.
pub(super) const MAX_BYTES: u64 = 1 << 30;
/// Largest accepted in-flight byte budget: 16 GiB.
pub(super) const MAX_PENDING_BYTES: u64 = 1 << 34;
pub(super) const MAX_LOG_ENTRIES: u64 = 1_000_000;
pub(super) const MAX_PENDING_CALLS: u64 = 1_000_000;
pub(super) const MAX_COUNT: u64 = u32::MAX as u64;
/// Most modules a run may be allowed (`maxModules`).
pub(super) const MAX_MODULES_LIMIT: u64 = 100_000;

// ---- A run's isolate -------------------------------------------------------------------

/// A run's wall-clock limit. 5 s for `runSandbox`, the CLI, autoFix and a persistent
/// sandbox's runs; an engine request's `isolateLimits.wallTimeMs` is 30 s and Code Mode's
/// `timeoutMs` 60 s, as in their seeds; `sandbox.run` has none of its own (the sandbox's).
pub(super) const WALL_TIME: Opt = whole("timeoutMs", 1, MAX_TIME_MS, Some(DEFAULT_WALL_TIME_MS), &["wallTimeMs", "timeout"]);
/// A run's CPU-time limit: none of its own (the wall-clock limit bounds it) but for an
/// engine request, whose seed gives it 5 s.
pub(super) const CPU_TIME: Opt = whole("cpuTimeMs", 1, MAX_TIME_MS, None, &[]);
/// A run's heap limit: 64 MB, and an engine's 128 MB (the memory of its warm isolates).
pub(super) const MEMORY: Opt =
    whole("memoryLimitMb", MIN_MEMORY_MB as u64, MAX_MEMORY_MB as u64, Some(DEFAULT_RUN_MEMORY_MB as u64), &["memoryMb", "memory"]);
/// How long a run may wait for a slot; 0: start now or fail. A run has none of its own
/// (the engine's, `queue::DEFAULT_MAX_QUEUE_MS`).
pub(super) const QUEUE_TIME: Opt = whole("maxQueueMs", 0, MAX_TIME_MS, None, &["queueTimeoutMs"]);
/// A module run's graph: most modules, and most bytes of one module's source.
pub(super) const MODULES: Opt = whole("maxModules", 1, MAX_MODULES_LIMIT, Some(crate::modules::DEFAULT_MAX_MODULES as u64), &[]);
pub(super) const MODULE_BYTES: Opt = whole("maxModuleBytes", 1, MAX_BYTES, Some(crate::modules::DEFAULT_MAX_MODULE_BYTES), &[]);

// ---- The bridge: what crosses between the sandbox and the host -------------------------

pub(super) const MESSAGE_BYTES: Opt = whole("maxMessageBytes", 1, MAX_BYTES, Some(DEFAULT_MAX_MESSAGE_BYTES as u64), &[]);
/// Host calls a run may make: `maxMessages` in the engine's seed, `maxHostCalls` in
/// runSandbox's.
pub(super) const MESSAGES: Opt = whole("maxMessages", 0, MAX_COUNT, Some(DEFAULT_MAX_MESSAGES as u64), &["maxHostCalls"]);
pub(super) const OUTPUT_BYTES: Opt = whole("maxOutputBytes", 1, MAX_BYTES, Some(DEFAULT_MAX_OUTPUT_BYTES as u64), &[]);
pub(super) const LOG_ENTRIES: Opt = whole("maxLogEntries", 0, MAX_LOG_ENTRIES, Some(DEFAULT_MAX_LOG_ENTRIES as u64), &[]);
pub(super) const LOG_BYTES: Opt = whole("maxLogBytes", 1, MAX_BYTES, Some(DEFAULT_MAX_LOG_BYTES as u64), &[]);
pub(super) const PENDING_CALL_BYTES: Opt =
    whole("maxPendingHostCallBytes", 1, MAX_PENDING_BYTES, Some(DEFAULT_MAX_PENDING_HOST_CALL_BYTES as u64), &[]);
pub(super) const PENDING_CALLS: Opt = whole("maxPendingHostCalls", 1, MAX_PENDING_CALLS, Some(DEFAULT_MAX_PENDING_HOST_CALLS as u64), &[]);
pub(super) const OUTPUT_VALUES: Opt = whole("maxOutputValues", 1, MAX_COUNT, Some(DEFAULT_MAX_OUTPUT_VALUES as u64), &[]);
pub(super) const MESSAGE_VALUES: Opt = whole("maxMessageValues", 1, MAX_COUNT, Some(DEFAULT_MAX_MESSAGE_VALUES as u64), &[]);
pub(super) const PENDING_CALL_VALUES: Opt =
    whole("maxPendingHostCallValues", 1, MAX_COUNT, Some(DEFAULT_MAX_PENDING_HOST_CALL_VALUES as u64), &[]);

/// A table with the bridge limits in it: `$before`, the ten bridge limits (the host-call
/// count as `$messages`: its name differs by seed), then `$after`.
macro_rules! with_bridge_limits {
    ([$($before:expr),* $(,)?], $messages:expr, [$($after:expr),* $(,)?]) => {
        &[
            $($before,)*
            $crate::options::limits::MESSAGE_BYTES,
            $messages,
            $crate::options::limits::OUTPUT_BYTES,
            $crate::options::limits::LOG_ENTRIES,
            $crate::options::limits::LOG_BYTES,
            $crate::options::limits::PENDING_CALL_BYTES,
            $crate::options::limits::PENDING_CALLS,
            $crate::options::limits::OUTPUT_VALUES,
            $crate::options::limits::MESSAGE_VALUES,
            $crate::options::limits::PENDING_CALL_VALUES,
            $($after,)*
        ]
    };
}
pub(super) use with_bridge_limits;

/// The bridge limits, under the engine's seed names (`defaultBridgeLimits`, a request's
/// `bridgeLimits`). runSandbox takes the same, with `maxHostCalls` for `maxMessages`.
pub const BRIDGE_LIMITS: &[Opt] = with_bridge_limits!([], MESSAGES, []);

// ---- A persistent sandbox -------------------------------------------------------------

/// How long an open sandbox may go without a run before it is closed. A persistent
/// sandbox's default is `DEFAULT_SANDBOX_IDLE_TIMEOUT_MS`; the CLI's and Code Mode's
/// stateful sessions take theirs unless given.
pub(super) const IDLE_TIME: Opt = whole("idleTimeoutMs", 1, MAX_TIME_MS, None, &["idleMs", "idleTimeout"]);

#[cfg(test)]
mod tests {
    use super::super::doc::sections;
    use super::super::table::Kind;
    use std::collections::BTreeMap;

    /// A limit is declared once: wherever an option of that name is taken (or its seed
    /// name), it takes the same range. Only the capability factories' own options, which
    /// mean something else under the same word (a fetch's `timeoutMs`), are apart.
    #[test]
    fn a_limit_takes_the_same_range_under_every_entry_point() {
        const APART: &[&str] = &["createFetchCapability", "createFileReadCapability", "MCP over HTTP"];
        let mut seen: BTreeMap<&str, ((u64, u64), &str)> = BTreeMap::new();
        let mut shared = 0;
        for section in sections().iter().filter(|s| !APART.contains(&s.title)) {
            for o in section.table {
                let Kind::Whole { min, max } = o.kind else { continue };
                for name in std::iter::once(o.name).chain(o.seed_names.iter().copied()) {
                    match seen.get(name) {
                        Some((range, first)) => {
                            assert_eq!(*range, (min, max), "{name} of {} takes another range than under {first}", section.title);
                            shared += 1;
                        }
                        None => {
                            seen.insert(name, ((min, max), section.title));
                        }
                    }
                }
            }
        }
        // The limits runSandbox, the engine, sandboxes, Code Mode, autoFix and the CLI share.
        assert!(shared >= 20, "only {shared} options are shared between entry points");
    }

    #[test]
    fn the_engine_and_run_sandbox_take_the_same_bridge_limits() {
        let run: Vec<_> = super::super::RUN_SANDBOX.iter().filter(|o| o.name.starts_with("max")).map(|o| o.name).collect();
        for o in super::BRIDGE_LIMITS {
            let name = if o.name == "maxMessages" { "maxHostCalls" } else { o.name };
            assert!(run.contains(&name), "runSandbox does not take {name}");
        }
    }
}
