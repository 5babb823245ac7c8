//! A warm isolate's context, made ready before its run arrives: `console`, the web
//! platform APIs and the engine's prelude are evaluated while the isolate waits, off the
//! run's path, so a fresh run pays for none of them (issue 35). What the warm-up must
//! know of the run is the context's shape; what it saw decides whether the context is
//! as a fresh one would be.
use crate::RunPlan;

/// What a prepared context holds beyond the engine's prelude: the web APIs, and the
/// global `fetch` over a fetch capability (its tool index is set when the run arrives).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct ContextShape {
    pub web: bool,
    pub fetch: bool,
}

impl ContextShape {
    /// The shape `plan`'s fresh context has.
    pub fn of(plan: &RunPlan) -> ContextShape {
        ContextShape { web: plan.web, fetch: plan.web && plan.web_fetch }
    }
}

/// What happened while a warm isolate prepared its context.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct WarmUpSeen {
    /// The prelude ran to its end (nothing thrown, nothing left pending).
    pub settled: bool,
    /// It wrote to the console: its lines belong to a run's logs, and no run was there.
    pub logged: bool,
    /// It asked for what only a run has: a tool, `data`, a module.
    pub asked_for_run: bool,
    /// It set a timer: the run loop that would fire it belongs to a run.
    pub timer_set: bool,
    /// It read what is the run's: the web clock (which starts with the run: a time kept
    /// from the warm-up would be off by the wait), the fetch capability's index.
    pub read_run_state: bool,
    /// It was stopped: over its time, or its isolate at the memory limit.
    pub stopped: bool,
}

impl WarmUpSeen {
    /// Whether the prepared context is what a run's own evaluation would have made, so a
    /// run may take it. Otherwise the isolate is dropped for a fresh one that evaluates
    /// everything under its run's limits (as without a warm-up), and the pool prepares
    /// no more contexts: a prelude that logs, asks for a run's things or sets timers
    /// would waste every warm-up after.
    pub fn usable(&self) -> bool {
        self.settled && !self.logged && !self.asked_for_run && !self.timer_set && !self.read_run_state && !self.stopped
    }
}

/// How long a warm isolate's preparation may take before it is stopped: the bound
/// `init()` holds the prelude to (`limits::PRELUDE_INIT_TIME_MS`).
pub const WARM_UP_TIME_MS: u64 = crate::limits::PRELUDE_INIT_TIME_MS;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::options::{run_sandbox, Raw};

    fn plan(web: bool, capabilities: &[&str]) -> RunPlan {
        let names = Raw::Array(capabilities.iter().map(|c| Raw::String(c.to_string())).collect());
        let options = Raw::Object(vec![("web".into(), Raw::Bool(web)), ("capabilities".into(), names)]);
        let mut plan = run_sandbox(&Raw::String("1".into()), &options).unwrap();
        plan.use_web_fetch();
        plan
    }

    #[test]
    fn a_context_has_the_web_apis_of_its_run_and_fetch_only_over_a_fetch_tool_with_them() {
        assert_eq!(ContextShape::of(&plan(false, &[])), ContextShape { web: false, fetch: false });
        assert_eq!(ContextShape::of(&plan(true, &["lookup"])), ContextShape { web: true, fetch: false });
        assert_eq!(ContextShape::of(&plan(true, &["fetch"])), ContextShape { web: true, fetch: true });
        assert_eq!(ContextShape::of(&plan(false, &["fetch"])), ContextShape { web: false, fetch: false });
    }

    #[test]
    fn a_context_is_usable_only_when_its_warm_up_settled_and_touched_nothing_of_a_run() {
        let clean = WarmUpSeen { settled: true, ..Default::default() };
        assert!(clean.usable());
        assert!(!WarmUpSeen::default().usable(), "not settled");
        for seen in [
            WarmUpSeen { logged: true, ..clean },
            WarmUpSeen { asked_for_run: true, ..clean },
            WarmUpSeen { timer_set: true, ..clean },
            WarmUpSeen { read_run_state: true, ..clean },
            WarmUpSeen { stopped: true, ..clean },
        ] {
            assert!(!seen.usable(), "{seen:?}");
        }
    }
}
