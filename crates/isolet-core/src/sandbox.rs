//! Persistent sandboxes (`createSandbox`, `engine.openSandbox`): one isolate and one
//! context kept for many runs. This module owns their options and the policy of what
//! ends one: the sandbox-wide budgets (total CPU time, total host calls), the limits each
//! run gets out of what is left of them, and which run outcomes close the sandbox.
//!
//! The rules:
//! - A run that throws, has a syntax error, is aborted, or passes its own wall-clock or
//!   CPU limit ends; the sandbox stays open (V8 unwinds the terminated script; the
//!   context keeps whatever the run had done before it was stopped).
//! - A run that runs out of memory closes the sandbox: the heap limit is the isolate's
//!   for its life, and a heap at its limit cannot be trusted to serve another run.
//! - A run that ignored termination (its thread was quarantined) closes it.
//! - An internal failure or a lost host closes it.
//! - The total CPU time or the total host calls used up close it (after that run).
//! - No run for `idleTimeoutMs` closes it (default 10 minutes; a run waiting for an
//!   isolate slot is not idleness); so does `close()` and the engine's shutdown.
//!
//! Every later run or call of a closed sandbox is refused with [`closed_failure`]; a run
//! still waiting for a slot when it closes gets [`waiting_run_failure`].
use crate::error::{ErrorKind, Failure};
use crate::options::{self, Raw, RunPlan};

/// Why a sandbox is closed (`sandbox.closeReason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum CloseReason {
    /// `sandbox.close()`.
    Closed,
    /// No run for `idleTimeoutMs`.
    IdleTimeout,
    /// A run reached the heap limit.
    OutOfMemory,
    /// A run ignored termination; its thread was left to finish at the lowest priority.
    Unresponsive,
    /// `totalCpuTimeMs` used up.
    TotalCpuTime,
    /// `maxTotalHostCalls` used up.
    TotalHostCalls,
    /// The engine shut down.
    Shutdown,
    /// The sandbox host process serving it was lost (process isolation).
    HostLost,
    /// A failure of isolet itself.
    Internal,
}

impl CloseReason {
    /// The name JS sees (`sandbox.closeReason`).
    pub fn as_str(self) -> &'static str {
        match self {
            CloseReason::Closed => "closed",
            CloseReason::IdleTimeout => "idleTimeout",
            CloseReason::OutOfMemory => "outOfMemory",
            CloseReason::Unresponsive => "unresponsive",
            CloseReason::TotalCpuTime => "totalCpuTime",
            CloseReason::TotalHostCalls => "totalHostCalls",
            CloseReason::Shutdown => "shutdown",
            CloseReason::HostLost => "hostLost",
            CloseReason::Internal => "internal",
        }
    }

    /// Every reason, for the frame protocol's checks.
    pub const ALL: [CloseReason; 9] = [
        CloseReason::Closed,
        CloseReason::IdleTimeout,
        CloseReason::OutOfMemory,
        CloseReason::Unresponsive,
        CloseReason::TotalCpuTime,
        CloseReason::TotalHostCalls,
        CloseReason::Shutdown,
        CloseReason::HostLost,
        CloseReason::Internal,
    ];

    /// The reason named `s` (as `as_str` names it).
    pub fn named(s: &str) -> Option<CloseReason> {
        CloseReason::ALL.iter().copied().find(|r| r.as_str() == s)
    }
}

/// The sandbox-wide limits (`None`: no such limit).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SandboxLimits {
    pub total_cpu_time_ms: Option<u64>,
    pub idle_timeout_ms: Option<u64>,
    pub max_total_host_calls: Option<u64>,
}

/// A checked `createSandbox(options)`: the plan every run starts from (its code empty,
/// its limits the per-run defaults) and the sandbox-wide limits.
#[derive(Debug, Clone, PartialEq)]
pub struct SandboxPlan {
    pub base: RunPlan,
    pub limits: SandboxLimits,
}

/// Checks `createSandbox(options)` (`capabilities` as names, like runSandbox's).
pub fn sandbox_plan(raw: &Raw) -> Result<SandboxPlan, options::OptionsError> {
    options::sandbox_options(raw)
}

/// The plan of one run of the sandbox: `code` with the run's own limits (`run_options`,
/// checked against [`SANDBOX_RUN`](crate::options::SANDBOX_RUN)) over the sandbox's, within what is left of
/// its budgets.
pub fn run_plan(sandbox: &SandboxPlan, budget: &Budget, code: &Raw, run_options: &Raw) -> Result<RunPlan, options::OptionsError> {
    options::sandbox_run(sandbox, budget, code, run_options)
}

/// What a sandbox has used of its sandbox-wide limits.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Budget {
    pub cpu_used_ms: f64,
    pub host_calls_used: u64,
    pub runs: u64,
}

impl Budget {
    /// The CPU limit of the next run: its own, cut to what is left of the total.
    pub fn run_cpu_limit_ms(&self, limits: &SandboxLimits, run_cpu_ms: Option<u64>) -> Option<u64> {
        match limits.total_cpu_time_ms {
            None => run_cpu_ms,
            Some(total) => {
                let left = (total as f64 - self.cpu_used_ms).max(1.0).ceil() as u64;
                Some(run_cpu_ms.map_or(left, |own| own.min(left)))
            }
        }
    }

    /// The host calls the next run may make: its own limit, cut to what is left.
    pub fn run_host_calls(&self, limits: &SandboxLimits, run_max: u32) -> u32 {
        match limits.max_total_host_calls {
            None => run_max,
            Some(total) => total.saturating_sub(self.host_calls_used).min(run_max as u64) as u32,
        }
    }

    /// Counts a finished run and says whether it closes the sandbox.
    pub fn after_run(&mut self, limits: &SandboxLimits, outcome: &RunOutcome) -> Option<CloseReason> {
        self.runs += 1;
        self.cpu_used_ms += outcome.cpu_time_ms.max(0.0);
        self.host_calls_used += outcome.host_calls;
        if outcome.abandoned {
            return Some(if outcome.failed == Some(ErrorKind::MemoryLimit) { CloseReason::OutOfMemory } else { CloseReason::Unresponsive });
        }
        match outcome.failed {
            Some(ErrorKind::MemoryLimit) => return Some(CloseReason::OutOfMemory),
            Some(ErrorKind::Internal) => return Some(CloseReason::Internal),
            Some(ErrorKind::Crashed) => return Some(CloseReason::HostLost),
            _ => {}
        }
        if limits.total_cpu_time_ms.is_some_and(|total| self.cpu_used_ms >= total as f64) {
            return Some(CloseReason::TotalCpuTime);
        }
        if limits.max_total_host_calls.is_some_and(|total| self.host_calls_used >= total) {
            return Some(CloseReason::TotalHostCalls);
        }
        None
    }
}

/// How one run of a sandbox ended, as the policy needs it.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct RunOutcome {
    pub failed: Option<ErrorKind>,
    /// The run's thread ignored termination (or hit a fatal OOM) and was left behind.
    pub abandoned: bool,
    pub cpu_time_ms: f64,
    pub host_calls: u64,
}

/// The failure a run gets when the run itself closed the sandbox through a budget (it
/// replaces the per-run CPU limit's message: the run had the rest of the total).
pub fn budget_failure(reason: CloseReason, limits: &SandboxLimits) -> Option<Failure> {
    match reason {
        CloseReason::TotalCpuTime => {
            let total = limits.total_cpu_time_ms.unwrap_or(0);
            let mut f = Failure::new(
                ErrorKind::Timeout,
                format!("The sandbox's total CPU time limit of {total} ms (totalCpuTimeMs) is used up; the sandbox is closed"),
            );
            f.limit = Some("cpu");
            Some(f)
        }
        _ => None,
    }
}

/// What every run or call of a closed sandbox gets: a validation error saying so, and why.
pub fn closed_failure(reason: CloseReason) -> Failure {
    let why = match reason {
        CloseReason::Closed => "it was closed",
        CloseReason::IdleTimeout => "it was idle longer than its idleTimeoutMs",
        CloseReason::OutOfMemory => "a run ran out of memory (memoryLimitMb)",
        CloseReason::Unresponsive => "a run ignored termination",
        CloseReason::TotalCpuTime => "its total CPU time (totalCpuTimeMs) is used up",
        CloseReason::TotalHostCalls => "its total host calls (maxTotalHostCalls) are used up",
        CloseReason::Shutdown => "its engine shut down",
        CloseReason::HostLost => "the sandbox host process serving it was lost",
        CloseReason::Internal => "of an internal failure",
    };
    Failure::new(ErrorKind::Validation, format!("The sandbox is closed ({}): {why}", reason.as_str()))
}

/// What a run of the sandbox that waits in its engine's queue for a slot gets when the
/// sandbox closes for `reason`: what the run in flight gets (aborted by `close()`, shut
/// down with the engine), else what every later run gets.
pub fn waiting_run_failure(reason: CloseReason) -> Failure {
    match reason {
        CloseReason::Closed => Failure::aborted(),
        CloseReason::Shutdown => Failure::shut_down(),
        other => closed_failure(other),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits(cpu: Option<u64>, calls: Option<u64>) -> SandboxLimits {
        SandboxLimits { total_cpu_time_ms: cpu, idle_timeout_ms: None, max_total_host_calls: calls }
    }

    fn outcome(failed: Option<ErrorKind>, cpu: f64, calls: u64) -> RunOutcome {
        RunOutcome { failed, abandoned: false, cpu_time_ms: cpu, host_calls: calls }
    }

    #[test]
    fn errors_and_timeouts_keep_the_sandbox_open() {
        let l = limits(None, None);
        let mut b = Budget::default();
        for kind in [None, Some(ErrorKind::Runtime), Some(ErrorKind::Timeout), Some(ErrorKind::Validation), Some(ErrorKind::Aborted)] {
            assert_eq!(b.after_run(&l, &outcome(kind, 5.0, 1)), None, "{kind:?}");
        }
        assert_eq!(b.runs, 5);
        assert_eq!(b.host_calls_used, 5);
    }

    #[test]
    fn memory_internal_and_stuck_runs_close_it() {
        let l = limits(None, None);
        assert_eq!(Budget::default().after_run(&l, &outcome(Some(ErrorKind::MemoryLimit), 1.0, 0)), Some(CloseReason::OutOfMemory));
        assert_eq!(Budget::default().after_run(&l, &outcome(Some(ErrorKind::Internal), 1.0, 0)), Some(CloseReason::Internal));
        assert_eq!(Budget::default().after_run(&l, &outcome(Some(ErrorKind::Crashed), 1.0, 0)), Some(CloseReason::HostLost));
        let stuck = RunOutcome { failed: Some(ErrorKind::Timeout), abandoned: true, ..Default::default() };
        assert_eq!(Budget::default().after_run(&l, &stuck), Some(CloseReason::Unresponsive));
        let fatal_oom = RunOutcome { failed: Some(ErrorKind::MemoryLimit), abandoned: true, ..Default::default() };
        assert_eq!(Budget::default().after_run(&l, &fatal_oom), Some(CloseReason::OutOfMemory));
    }

    #[test]
    fn the_cpu_total_cuts_each_runs_limit_then_closes_the_sandbox() {
        let l = limits(Some(100), None);
        let mut b = Budget::default();
        assert_eq!(b.run_cpu_limit_ms(&l, None), Some(100));
        assert_eq!(b.run_cpu_limit_ms(&l, Some(30)), Some(30));
        assert_eq!(b.after_run(&l, &outcome(None, 80.0, 0)), None);
        assert_eq!(b.run_cpu_limit_ms(&l, Some(30)), Some(20));
        assert_eq!(b.run_cpu_limit_ms(&l, None), Some(20));
        assert_eq!(b.after_run(&l, &outcome(Some(ErrorKind::Timeout), 20.5, 0)), Some(CloseReason::TotalCpuTime));
        // Never a limit of 0 (which would mean none): at least 1 ms.
        assert_eq!(b.run_cpu_limit_ms(&l, None), Some(1));
        // No total: the run's own limit, or none.
        assert_eq!(b.run_cpu_limit_ms(&limits(None, None), None), None);
        assert_eq!(b.run_cpu_limit_ms(&limits(None, None), Some(7)), Some(7));
    }

    #[test]
    fn the_host_call_total_cuts_each_runs_limit_then_closes_the_sandbox() {
        let l = limits(None, Some(10));
        let mut b = Budget::default();
        assert_eq!(b.run_host_calls(&l, 1000), 10);
        assert_eq!(b.run_host_calls(&l, 3), 3);
        assert_eq!(b.after_run(&l, &outcome(None, 1.0, 7)), None);
        assert_eq!(b.run_host_calls(&l, 1000), 3);
        assert_eq!(b.after_run(&l, &outcome(None, 1.0, 3)), Some(CloseReason::TotalHostCalls));
        assert_eq!(b.run_host_calls(&l, 1000), 0);
        assert_eq!(Budget::default().run_host_calls(&limits(None, None), 42), 42);
    }

    #[test]
    fn closed_failures_are_validation_errors_naming_the_reason() {
        for reason in CloseReason::ALL {
            let f = closed_failure(reason);
            assert_eq!(f.kind, ErrorKind::Validation);
            assert!(f.message.starts_with("The sandbox is closed ("), "{}", f.message);
            assert!(f.message.contains(reason.as_str()));
            assert_eq!(CloseReason::named(reason.as_str()), Some(reason));
        }
        assert_eq!(waiting_run_failure(CloseReason::Closed).kind, ErrorKind::Aborted);
        assert_eq!(waiting_run_failure(CloseReason::Shutdown), Failure::shut_down());
        assert_eq!(waiting_run_failure(CloseReason::IdleTimeout), closed_failure(CloseReason::IdleTimeout));
        let f = budget_failure(CloseReason::TotalCpuTime, &limits(Some(50), None)).unwrap();
        assert_eq!((f.kind, f.limit), (ErrorKind::Timeout, Some("cpu")));
        assert!(f.message.contains("50 ms"));
        assert!(budget_failure(CloseReason::OutOfMemory, &limits(None, None)).is_none());
    }

    fn obj(entries: &[(&str, Raw)]) -> Raw {
        Raw::Object(entries.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }

    #[test]
    fn options_are_checked_under_their_names() {
        let plan = sandbox_plan(&obj(&[
            ("memoryLimitMb", Raw::Number(32.0)),
            ("totalCpuTimeMs", Raw::Number(500.0)),
            ("idleTimeoutMs", Raw::Number(1000.0)),
            ("maxTotalHostCalls", Raw::Number(9.0)),
            ("capabilities", Raw::Array(vec![Raw::String("add".into())])),
            ("isolation", Raw::String("thread".into())),
        ]))
        .unwrap();
        assert_eq!(plan.base.limits.memory_mb, 32);
        assert_eq!(plan.base.tools, vec!["add".to_string()]);
        assert_eq!(plan.base.mode, crate::options::ExecMode::Script);
        assert_eq!(plan.limits, SandboxLimits { total_cpu_time_ms: Some(500), idle_timeout_ms: Some(1000), max_total_host_calls: Some(9) });
        let e = sandbox_plan(&obj(&[("idleTimeout", Raw::Number(5.0))])).unwrap_err();
        assert_eq!(e.path, "idleTimeout");
        assert!(e.message.contains("did you mean idleTimeoutMs?"), "{}", e.message);
        let e = sandbox_plan(&obj(&[("totalCpuTimeMs", Raw::Number(-1.0))])).unwrap_err();
        assert_eq!(e.path, "totalCpuTimeMs");
        let e = sandbox_plan(&obj(&[("signal", Raw::Null)])).unwrap_err();
        assert!(e.message.contains("not a known option"), "{}", e.message);
    }

    #[test]
    fn a_runs_plan_takes_its_own_limits_within_the_budgets() {
        let plan = sandbox_plan(&obj(&[
            ("timeoutMs", Raw::Number(700.0)),
            ("cpuTimeMs", Raw::Number(300.0)),
            ("totalCpuTimeMs", Raw::Number(1000.0)),
            ("maxTotalHostCalls", Raw::Number(5.0)),
        ]))
        .unwrap();
        let mut budget = Budget::default();
        let run = run_plan(&plan, &budget, &Raw::String("1".into()), &Raw::Undefined).unwrap();
        assert_eq!((run.code.as_str(), run.limits.wall_time_ms, run.limits.cpu_time_ms), ("1", 700, Some(300)));
        assert_eq!(run.bridge.max_messages, 5);
        budget.cpu_used_ms = 900.0;
        budget.host_calls_used = 4;
        let run = run_plan(&plan, &budget, &Raw::String("2".into()), &obj(&[("timeoutMs", Raw::Number(50.0))])).unwrap();
        assert_eq!((run.limits.wall_time_ms, run.limits.cpu_time_ms, run.bridge.max_messages), (50, Some(100), 1));
        let e = run_plan(&plan, &budget, &Raw::String("3".into()), &obj(&[("memoryLimitMb", Raw::Number(5.0))])).unwrap_err();
        assert_eq!(e.path, "memoryLimitMb");
        let e = run_plan(&plan, &budget, &Raw::Number(3.0), &Raw::Undefined).unwrap_err();
        assert_eq!(e.path, "code");
    }

    fn modules(entries: &[(&str, &str)]) -> Raw {
        obj(&entries.iter().map(|(k, v)| (*k, Raw::String(v.to_string()))).collect::<Vec<_>>())
    }

    #[test]
    fn module_options_are_the_sandboxs_and_each_run_brings_only_its_own_map() {
        let plan = sandbox_plan(&obj(&[
            ("modules", modules(&[("./lib/a.js", "export const a = 1")])),
            ("maxModules", Raw::Number(3.0)),
            ("maxModuleBytes", Raw::Number(100.0)),
            ("resolve", Raw::Function),
        ]))
        .unwrap();
        assert_eq!(plan.base.mode, crate::options::ExecMode::Script, "runs are scripts unless they say type: 'module'");
        assert_eq!(plan.base.modules.keys().collect::<Vec<_>>(), ["lib/a.js"]);
        assert_eq!(plan.base.module_limits, crate::modules::ModuleLimits { max_modules: 3, max_module_bytes: 100 });
        assert!(plan.base.module_resolver);
        let budget = Budget::default();
        let run = run_plan(
            &plan,
            &budget,
            &Raw::String("1".into()),
            &obj(&[("type", Raw::String("module".into())), ("modules", modules(&[("b.js", "export default 2")]))]),
        )
        .unwrap();
        assert_eq!(run.mode, crate::options::ExecMode::Module);
        // The sandbox's map stays with the sandbox: a run's plan carries its own map alone.
        assert_eq!(run.modules.keys().collect::<Vec<_>>(), ["b.js"]);
        assert!(run.module_resolver, "the sandbox's resolve serves every run");
        assert_eq!(run.module_limits, plan.base.module_limits);
        // The run's map is held to the sandbox's limits; the limits themselves are not a run's.
        let e =
            run_plan(&plan, &budget, &Raw::String("1".into()), &obj(&[("modules", modules(&[("b.js", &"x".repeat(101))]))])).unwrap_err();
        assert_eq!(e.path, "modules");
        let e = run_plan(&plan, &budget, &Raw::String("1".into()), &obj(&[("maxModules", Raw::Number(9.0))])).unwrap_err();
        assert!(e.message.contains("not a known option of sandbox.run options"), "{}", e.message);
        // type: 'module' at creation is each run's default; a run may be a script again.
        let plan = sandbox_plan(&obj(&[("type", Raw::String("module".into()))])).unwrap();
        assert_eq!(plan.base.mode, crate::options::ExecMode::Module);
        assert!(!plan.base.module_resolver);
        let run =
            run_plan(&plan, &budget, &Raw::String("1".into()), &obj(&[("type", Raw::String("script".into())), ("resolve", Raw::Function)]))
                .unwrap();
        assert_eq!(run.mode, crate::options::ExecMode::Script);
        assert!(run.module_resolver);
        let e = run_plan(&plan, &budget, &Raw::String("1".into()), &obj(&[("resolve", Raw::Number(1.0))])).unwrap_err();
        assert_eq!(e.path, "resolve");
    }
}
