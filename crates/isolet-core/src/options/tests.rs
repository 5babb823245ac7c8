//! Tests of runSandbox, SandboxEngine, engine.submit and the table language they use.
use super::*;
use std::collections::BTreeMap;

use crate::limits::{BridgeLimits, IsolateLimits};

fn obj(entries: &[(&str, Raw)]) -> Raw {
    Raw::Object(entries.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
}
fn num(n: f64) -> Raw {
    Raw::Number(n)
}
fn s(v: &str) -> Raw {
    Raw::String(v.into())
}
fn names(v: &[&str]) -> Raw {
    Raw::Array(v.iter().map(|n| s(n)).collect())
}
fn code() -> Raw {
    s("1")
}

#[test]
fn prelude_and_code_cache_are_checked_under_their_names() {
    let c = EngineConfig::from_raw(&Raw::Undefined).unwrap();
    assert_eq!(c.prelude, None);
    assert_eq!(c.code_cache_bytes, crate::limits::DEFAULT_CODE_CACHE_MB as usize * 1024 * 1024);
    let c = EngineConfig::from_raw(&obj(&[("prelude", s("var x = 1")), ("codeCacheMb", num(0.0))])).unwrap();
    assert_eq!(c.prelude, Some(Prelude { source: Some("var x = 1".into()), modules: BTreeMap::new() }));
    assert_eq!(c.code_cache_bytes, 0);
    let e = EngineConfig::from_raw(&obj(&[("prelude", num(1.0))])).unwrap_err();
    assert_eq!((e.path.as_str(), e.message.as_str()), ("prelude", "prelude must be a string or an object { source?, modules? }, got 1"));
    let big = "x".repeat(crate::limits::MAX_PRELUDE_BYTES + 1);
    let e = EngineConfig::from_raw(&obj(&[("prelude", s(&big))])).unwrap_err();
    assert_eq!(e.message, format!("prelude must be at most {} bytes, got {} bytes", crate::limits::MAX_PRELUDE_BYTES, big.len()));
    let at_limit = "x".repeat(crate::limits::MAX_PRELUDE_BYTES);
    assert!(EngineConfig::from_raw(&obj(&[("prelude", s(&at_limit))])).is_ok());
    let e = EngineConfig::from_raw(&obj(&[("codeCacheMb", num(1025.0))])).unwrap_err();
    assert_eq!(e.message, "codeCacheMb must be a whole number from 0 to 1024, got 1025");
    let e = EngineConfig::from_raw(&obj(&[("preludes", s("1"))])).unwrap_err();
    assert!(e.message.contains("did you mean prelude?"), "{}", e.message);
}

#[test]
fn prelude_modules_are_checked_under_their_names() {
    let mods = |entries: &[(&str, Raw)]| obj(entries);
    let c = EngineConfig::from_raw(&obj(&[(
        "prelude",
        obj(&[("source", s("var x = 1")), ("modules", mods(&[("./lib/a.js", s("export const a = 1")), ("zod", s("export default 1"))]))]),
    )]))
    .unwrap();
    let p = c.prelude.clone().unwrap();
    assert_eq!(p.source.as_deref(), Some("var x = 1"));
    assert_eq!(p.module_keys(), ["lib/a.js", "zod"]);
    // Modules alone are a prelude too; an empty object is none.
    let c = EngineConfig::from_raw(&obj(&[("prelude", obj(&[("modules", mods(&[("a.js", s(""))]))]))])).unwrap();
    assert_eq!(c.prelude.unwrap().source, None);
    assert_eq!(EngineConfig::from_raw(&obj(&[("prelude", obj(&[]))])).unwrap().prelude, None);
    let e = EngineConfig::from_raw(&obj(&[("prelude", obj(&[("module", mods(&[]))]))])).unwrap_err();
    assert_eq!(e.path, "prelude.module");
    assert!(e.message.contains("did you mean prelude.modules?"), "{}", e.message);
    let e = EngineConfig::from_raw(&obj(&[("prelude", obj(&[("modules", mods(&[("a.js", num(1.0))]))]))])).unwrap_err();
    assert_eq!(
        (e.path.as_str(), e.message.as_str()),
        ("prelude.modules['a.js']", "prelude.modules['a.js'] must be a module's source (a string), got 1")
    );
    let e = EngineConfig::from_raw(&obj(&[("prelude", obj(&[("modules", mods(&[("a.ts", s(""))]))]))])).unwrap_err();
    assert!(e.message.contains("prelude modules are JavaScript"), "{}", e.message);
    let e = EngineConfig::from_raw(&obj(&[("prelude", obj(&[("modules", mods(&[("a.js", s("")), ("./a.js", s(""))]))]))])).unwrap_err();
    assert!(e.message.contains("which another key of prelude.modules names too"), "{}", e.message);
    let big = "x".repeat(crate::limits::MAX_PRELUDE_BYTES / 2 + 1);
    let e = EngineConfig::from_raw(&obj(&[("prelude", obj(&[("source", s(&big)), ("modules", mods(&[("a.js", s(&big))]))]))])).unwrap_err();
    assert_eq!(e.path, "prelude");
    // A request cannot replace a prelude module.
    let c = EngineConfig::from_raw(&obj(&[("prelude", obj(&[("modules", mods(&[("lib.js", s("export default 1"))]))]))])).unwrap();
    let e = c.plan(&obj(&[("code", s("return 1")), ("modules", mods(&[("./lib.js", s("export default 2"))]))])).unwrap_err();
    assert_eq!(e.path, "request.modules['lib.js']");
    assert!(e.message.contains("names a module of the engine's prelude"), "{}", e.message);
    assert!(c.plan(&obj(&[("code", s("return 1")), ("modules", mods(&[("other.js", s(""))]))])).is_ok());
}

#[test]
fn an_option_that_could_not_be_read_is_named_by_its_path() {
    let threw = || Raw::Unreadable("its getter threw Error: boom".into());
    let e = run_sandbox(&code(), &obj(&[("timeoutMs", threw())])).unwrap_err();
    assert_eq!(e.path, "timeoutMs");
    assert_eq!(e.message, "timeoutMs could not be read: its getter threw Error: boom");
    // The options object itself (a Proxy whose ownKeys trap throws).
    let e = run_sandbox(&code(), &threw()).unwrap_err();
    assert_eq!(e.message, "runSandbox options could not be read: its getter threw Error: boom");
    // Deep under its own path; an unknown name is still named as unknown.
    let e = run_sandbox(&code(), &obj(&[("capabilities", Raw::Array(vec![s("a"), threw()]))])).unwrap_err();
    assert_eq!(e.message, "capabilities[1] could not be read: its getter threw Error: boom");
    let e = run_sandbox(&code(), &obj(&[("timeout", threw())])).unwrap_err();
    assert!(e.message.starts_with("timeout is not a known option of runSandbox options; did you mean timeoutMs?"), "{}", e.message);
    let engine = EngineConfig::from_raw(&Raw::Undefined).unwrap();
    let request = |extra: (&str, Raw)| obj(&[("code", code()), extra]);
    let e = engine.plan(&request(("isolateLimits", obj(&[("memoryMb", threw())])))).unwrap_err();
    assert_eq!(e.message, "request.isolateLimits.memoryMb could not be read: its getter threw Error: boom");
    let e = engine.plan(&request(("toolPolicy", obj(&[("allowedTools", Raw::Array(vec![threw()]))])))).unwrap_err();
    assert_eq!(e.path, "request.toolPolicy.allowedTools[0]");
    let e = engine.plan(&request(("toolPolicy", threw()))).unwrap_err();
    assert_eq!(e.message, "request.toolPolicy could not be read: its getter threw Error: boom");
    let e = EngineConfig::from_raw(&obj(&[("defaultBridgeLimits", obj(&[("maxMessages", threw())]))])).unwrap_err();
    assert_eq!(e.message, "defaultBridgeLimits.maxMessages could not be read: its getter threw Error: boom");
    // The code argument is described like any value that is not a string.
    let e = run_sandbox(&threw(), &Raw::Undefined).unwrap_err();
    assert_eq!(e.message, "code must be a string, got a value that could not be read (its getter threw Error: boom)");
}

#[test]
fn web_fetch_needs_web_and_a_fetch_tool() {
    let mut with_web =
        run_sandbox(&code(), &obj(&[("web", Raw::Bool(true)), ("capabilities", Raw::Array(vec![Raw::String("fetch".into())]))])).unwrap();
    assert!(with_web.use_web_fetch() && with_web.web_fetch);
    let mut without_web = run_sandbox(&code(), &obj(&[("capabilities", Raw::Array(vec![Raw::String("fetch".into())]))])).unwrap();
    assert!(!without_web.use_web_fetch());
    let mut other_tool =
        run_sandbox(&code(), &obj(&[("web", Raw::Bool(true)), ("capabilities", Raw::Array(vec![Raw::String("get".into())]))])).unwrap();
    assert!(!other_tool.use_web_fetch());
}

#[test]
fn web_is_a_boolean_off_by_default_and_the_same_everywhere() {
    let web = |v: Raw| obj(&[("web", v)]);
    assert!(!run_sandbox(&code(), &Raw::Undefined).unwrap().web);
    assert!(run_sandbox(&code(), &web(Raw::Bool(true))).unwrap().web);
    let e = run_sandbox(&code(), &web(s("yes"))).unwrap_err();
    assert_eq!((e.path.as_str(), e.message.as_str()), ("web", "web must be a boolean, got 'yes'"));
    // The engine's choice is its requests' default; a request may say otherwise.
    let request = |extra: &[(&str, Raw)]| obj(&[&[("code", s("return 1"))], extra].concat());
    let off = EngineConfig::from_raw(&Raw::Undefined).unwrap();
    assert!(!off.web && !off.plan(&request(&[])).unwrap().web);
    assert!(off.plan(&request(&[("web", Raw::Bool(true))])).unwrap().web);
    let on = EngineConfig::from_raw(&web(Raw::Bool(true))).unwrap();
    assert!(on.plan(&request(&[])).unwrap().web);
    assert!(!on.plan(&request(&[("web", Raw::Bool(false))])).unwrap().web);
    let e = on.plan(&request(&[("web", num(1.0))])).unwrap_err();
    assert_eq!(e.message, "request.web must be a boolean, got 1");
    assert_eq!(EngineConfig::from_raw(&web(Raw::Null)).unwrap_err().message, "web must be a boolean, got null");
    // A persistent sandbox keeps the choice it was opened with; a run cannot change it.
    let sandbox = crate::sandbox::sandbox_plan(&web(Raw::Bool(true))).unwrap();
    let budget = crate::sandbox::Budget::default();
    assert!(crate::sandbox::run_plan(&sandbox, &budget, &code(), &Raw::Undefined).unwrap().web);
    let e = crate::sandbox::run_plan(&sandbox, &budget, &code(), &web(Raw::Bool(false))).unwrap_err();
    assert!(e.message.contains("web"), "{}", e.message);
    assert!(!crate::sandbox::sandbox_plan(&Raw::Undefined).unwrap().base.web);
}

#[test]
fn run_sandbox_defaults_follow_the_seed() {
    let p = run_sandbox(&code(), &Raw::Undefined).unwrap();
    assert_eq!(p.limits, IsolateLimits { memory_mb: 64, wall_time_ms: 5000, cpu_time_ms: None });
    assert_eq!(p.bridge, BridgeLimits::default());
    assert_eq!((p.mode, p.isolation, p.language), (ExecMode::Script, Some(Isolation::Process), "javascript"));
    let p = run_sandbox(&code(), &obj(&[("capabilities", names(&["a", "gh.x"])), ("isolation", s("thread"))])).unwrap();
    assert_eq!((p.mode, p.isolation), (ExecMode::AsyncBody, Some(Isolation::Thread)));
    assert_eq!(p.tools, ["a", "gh.x"]);
}

#[test]
fn run_sandbox_options_land_in_the_limits_under_their_own_names() {
    let o = obj(&[
        ("memoryLimitMb", num(32.0)),
        ("timeoutMs", num(100.0)),
        ("cpuTimeMs", num(50.0)),
        ("maxHostCalls", num(2.0)),
        ("maxOutputBytes", num(1000.0)),
        ("maxLogEntries", num(3.0)),
        ("maxLogBytes", num(10.0)),
        ("maxMessageBytes", num(500.0)),
        ("maxPendingHostCallBytes", num(600.0)),
        ("maxPendingHostCalls", num(4.0)),
        ("signal", obj(&[])),
        ("language", Raw::Undefined),
    ]);
    let p = run_sandbox(&code(), &o).unwrap();
    assert_eq!(p.limits, IsolateLimits { memory_mb: 32, wall_time_ms: 100, cpu_time_ms: Some(50) });
    let b = p.bridge;
    assert_eq!(
        (
            b.max_messages,
            b.max_output_bytes,
            b.max_log_entries,
            b.max_log_bytes,
            b.max_message_bytes,
            b.max_pending_host_call_bytes,
            b.max_pending_host_calls
        ),
        (2, 1000, 3, 10, 500, 600, 4)
    );
    let o = obj(&[("maxOutputValues", num(7.0)), ("maxMessageValues", num(8.0)), ("maxPendingHostCallValues", num(9.0))]);
    let b = run_sandbox(&code(), &o).unwrap().bridge;
    assert_eq!((b.max_output_values, b.max_message_values, b.max_pending_host_call_values), (7, 8, 9));
    let engine = EngineConfig::from_raw(&obj(&[("defaultBridgeLimits", obj(&[("maxOutputValues", num(5.0))]))])).unwrap();
    let p = engine.plan(&obj(&[("code", code()), ("bridgeLimits", obj(&[("maxMessageValues", num(6.0))]))])).unwrap();
    assert_eq!((p.bridge.max_output_values, p.bridge.max_message_values), (5, 6));
}

#[test]
fn value_limits_have_defaults_and_one_message_fits_the_pending_budget() {
    let b = run_sandbox(&code(), &Raw::Undefined).unwrap().bridge;
    assert_eq!((b.max_output_values, b.max_message_values, b.max_pending_host_call_values), (1 << 23, 1 << 23, 1 << 25));
    let e = |o: Raw| run_sandbox(&code(), &o).unwrap_err().message;
    assert_eq!(e(obj(&[("maxOutputValues", num(0.0))])), "maxOutputValues must be a whole number from 1 to 4294967295, got 0");
    let m = e(obj(&[("maxMessageValues", num(10.0)), ("maxPendingHostCallValues", num(9.0))]));
    assert!(
        m.starts_with("maxPendingHostCallValues (9 values) must be at least maxMessageValues (10 values): one message must fit"),
        "{m}"
    );
    // Given alone, a lower in-flight bound takes the message's down with it.
    let c = EngineConfig::from_raw(&Raw::Undefined).unwrap();
    let p = c.plan(&obj(&[("code", code()), ("bridgeLimits", obj(&[("maxPendingHostCallValues", num(1.0))]))])).unwrap();
    assert_eq!((p.bridge.max_message_values, p.bridge.max_pending_host_call_values), (1, 1));
}

#[test]
fn derived_limits_follow_the_limit_the_user_sets_and_only_both_given_can_disagree() {
    let b = |o: Raw| run_sandbox(&code(), &o).unwrap().bridge;
    let e = |o: Raw| run_sandbox(&code(), &o).unwrap_err();
    // Raising one raises what follows it.
    let r = b(obj(&[("maxMessageValues", num(1e7))]));
    assert_eq!((r.max_message_values, r.max_pending_host_call_values), (10_000_000, 40_000_000));
    let r = b(obj(&[("maxMessageBytes", num((32 << 20) as f64))]));
    assert_eq!((r.max_message_bytes, r.max_pending_host_call_bytes), (32 << 20, 128 << 20));
    // Within the derived option's range.
    let r = b(obj(&[("maxMessageValues", num(4e9))]));
    assert_eq!(r.max_pending_host_call_values, u32::MAX);
    // Lowering the derived one alone takes the other down to it.
    let r = b(obj(&[("maxPendingHostCallBytes", num(1000.0))]));
    assert_eq!((r.max_message_bytes, r.max_pending_host_call_bytes), (1000, 1000));
    // Both given and consistent: as given.
    let r = b(obj(&[("maxMessageBytes", num(100.0)), ("maxPendingHostCallBytes", num(100.0))]));
    assert_eq!((r.max_message_bytes, r.max_pending_host_call_bytes), (100, 100));
    // Both given against the rule: the one error, naming both and the rule.
    let x = e(obj(&[("maxMessageBytes", num(2000.0)), ("maxPendingHostCallBytes", num(1000.0))]));
    assert_eq!(x.path, "maxPendingHostCallBytes");
    assert_eq!(
        x.message,
        "maxPendingHostCallBytes (1000 bytes) must be at least maxMessageBytes (2000 bytes): one message must fit in what may be in flight. \
         Give one of them and the other follows (maxPendingHostCallBytes is 4 x maxMessageBytes unless given)"
    );
    // Across an engine's defaults and a request: what either level gave counts as given.
    let engine = |d: Raw| EngineConfig::from_raw(&obj(&[("defaultBridgeLimits", d)])).unwrap();
    let req = |l: Raw| obj(&[("code", code()), ("bridgeLimits", l)]);
    let c = engine(obj(&[("maxMessageBytes", num(1000.0))]));
    assert_eq!(c.default_bridge.max_pending_host_call_bytes, 4000);
    let p = c.plan(&req(obj(&[("maxMessageBytes", num(3000.0))]))).unwrap();
    assert_eq!(p.bridge.max_pending_host_call_bytes, 12_000, "follows the request's message size");
    let c = engine(obj(&[("maxPendingHostCallBytes", num(5000.0))]));
    assert_eq!(c.plan(&req(obj(&[]))).unwrap().bridge.max_message_bytes, 5000);
    let x = c.plan(&req(obj(&[("maxMessageBytes", num(6000.0))]))).unwrap_err();
    assert!(
        x.message.starts_with(
            "defaultBridgeLimits.maxPendingHostCallBytes (5000 bytes) must be at least request.bridgeLimits.maxMessageBytes (6000 bytes)"
        ),
        "{}",
        x.message
    );
}

#[test]
fn bad_values_name_the_option_and_the_value() {
    let e = |o: Raw| run_sandbox(&code(), &o).unwrap_err().message;
    assert_eq!(e(obj(&[("timeoutMs", num(-5.0))])), "timeoutMs must be a whole number from 1 to 2147483647, got -5");
    assert_eq!(e(obj(&[("memoryLimitMb", num(1.5))])), "memoryLimitMb must be a whole number from 8 to 8192, got 1.5");
    assert_eq!(e(obj(&[("maxHostCalls", s("2"))])), "maxHostCalls must be a whole number from 0 to 4294967295, got '2'");
    assert_eq!(e(obj(&[("cpuTimeMs", num(f64::NAN))])), "cpuTimeMs must be a whole number from 1 to 2147483647, got NaN");
    assert_eq!(e(obj(&[("isolation", s("vm"))])), "isolation must be 'process' or 'thread', got 'vm'");
    assert_eq!(e(obj(&[("language", s("python"))])), "language must be 'javascript' or 'typescript', got 'python'");
    assert_eq!(e(Raw::Null), "runSandbox options must be an object, got null");
    assert_eq!(run_sandbox(&Raw::Null, &Raw::Undefined).unwrap_err().message, "code must be a string, got null");
    let e2 = e(obj(&[("maxMessageBytes", num(1000.0)), ("maxPendingHostCallBytes", num(999.0))]));
    assert!(e2.starts_with("maxPendingHostCallBytes (999 bytes) must be at least maxMessageBytes (1000 bytes)"), "{e2}");
}

#[test]
fn unknown_options_suggest_the_nearest_name() {
    let e = |o: Raw| run_sandbox(&code(), &o).unwrap_err().message;
    assert_eq!(e(obj(&[("timeout", num(5.0))])), "timeout is not a known option of runSandbox options; did you mean timeoutMs?");
    assert!(e(obj(&[("memoryMb", num(5.0))])).ends_with("did you mean memoryLimitMb?"));
    assert!(e(obj(&[("maxMessages", num(5.0))])).ends_with("did you mean maxHostCalls?"));
    assert!(e(obj(&[("zzz", num(5.0))])).contains("known options: memoryLimitMb, timeoutMs"));
    let c = EngineConfig::from_raw(&obj(&[("maxConcurrency", num(2.0))])).unwrap_err();
    assert!(c.message.ends_with("did you mean maxConcurrentIsolates?"), "{}", c.message);
    let engine = EngineConfig::from_raw(&Raw::Undefined).unwrap();
    let r = engine.plan(&obj(&[("code", code()), ("isolateLimits", obj(&[("wallTimeMS", num(5.0))]))])).unwrap_err();
    assert_eq!(r.path, "request.isolateLimits.wallTimeMS");
    assert!(r.message.ends_with("did you mean request.isolateLimits.wallTimeMs?"), "{}", r.message);
    let r = engine.plan(&obj(&[("code", code()), ("bridgeLimits", obj(&[("maxHostCalls", num(5.0))]))])).unwrap_err();
    assert!(r.message.ends_with("did you mean request.bridgeLimits.maxMessages?"), "{}", r.message);
}

#[test]
fn suggestions_stay_quiet_for_unrelated_names() {
    assert_eq!(suggest("banana", RUN_SANDBOX), None);
    assert_eq!(suggest("TIMEOUTMS", RUN_SANDBOX), Some("timeoutMs"));
    assert_eq!(suggest("warmPoolSise", ENGINE_CONFIG), Some("warmPoolSize"));
}

#[test]
fn engine_memory_is_the_per_isolate_memory() {
    let isolate_defaults = obj(&[("memoryMb", num(128.0)), ("cpuTimeMs", num(5000.0)), ("wallTimeMs", num(30000.0))]);
    // The seed's pattern: memoryMb next to DEFAULT_ISOLATE_LIMITS; memoryMb wins.
    let c = EngineConfig::from_raw(&obj(&[("memoryMb", num(32.0)), ("defaultIsolateLimits", isolate_defaults)])).unwrap();
    assert_eq!(c.default_limits.memory_mb, 32);
    assert_eq!(c.plan(&obj(&[("code", code())])).unwrap().limits.memory_mb, 32);
    // A request's own memoryMb overrides it.
    let r = obj(&[("code", code()), ("isolateLimits", obj(&[("memoryMb", num(16.0))]))]);
    assert_eq!(c.plan(&r).unwrap().limits.memory_mb, 16);
    // defaultIsolateLimits may omit memoryMb, or give it when memoryMb is absent.
    let c = EngineConfig::from_raw(&obj(&[("defaultIsolateLimits", obj(&[("wallTimeMs", num(100.0))]))])).unwrap();
    assert_eq!(c.default_limits, IsolateLimits { memory_mb: 128, wall_time_ms: 100, cpu_time_ms: Some(5000) });
    let c = EngineConfig::from_raw(&obj(&[("defaultIsolateLimits", obj(&[("memoryMb", num(48.0))]))])).unwrap();
    assert_eq!(c.memory_mb, 48);
}

#[test]
fn engine_config_defaults_and_ranges() {
    let c = EngineConfig::from_raw(&Raw::Undefined).unwrap();
    assert_eq!((c.memory_mb, c.max_concurrent_isolates, c.warm_pool_size, c.max_queue_size, c.processes), (128, 4, 0, 1000, 2));
    assert_eq!(c.isolation, Isolation::Process);
    let e = EngineConfig::from_raw(&obj(&[("processes", num(0.0))])).unwrap_err();
    assert_eq!(e.message, "processes must be a whole number from 1 to 64, got 0");
    let e = EngineConfig::from_raw(&obj(&[("defaultBridgeLimits", obj(&[("maxMessages", num(-1.0))]))])).unwrap_err();
    assert_eq!(e.message, "defaultBridgeLimits.maxMessages must be a whole number from 0 to 4294967295, got -1");
    let e = EngineConfig::from_raw(&obj(&[("defaultIsolateLimits", num(5.0))])).unwrap_err();
    assert_eq!(e.message, "defaultIsolateLimits must be an object, got 5");
    let e = EngineConfig::from_raw(&s("x")).unwrap_err();
    assert_eq!(e.message, "SandboxEngine config must be an object, got 'x'");
}

#[test]
fn engine_bounds_on_sandboxes_and_queue_waits_have_defaults_and_names() {
    let c = EngineConfig::from_raw(&Raw::Undefined).unwrap();
    assert_eq!((c.max_open_sandboxes, c.max_open_sandboxes_per_tenant, c.max_queue_ms), (256, 64, 30_000));
    let pool = c.pool();
    assert_eq!((pool.max_open_sandboxes, pool.max_open_sandboxes_per_tenant, pool.max_queue_ms), (256, 64, Some(30_000)));
    // The per-tenant default follows the engine's bound: a quarter, at least 1.
    let c = EngineConfig::from_raw(&obj(&[("maxOpenSandboxes", num(10.0))])).unwrap();
    assert_eq!((c.max_open_sandboxes, c.max_open_sandboxes_per_tenant), (10, 2));
    let c = EngineConfig::from_raw(&obj(&[("maxOpenSandboxes", num(2.0))])).unwrap();
    assert_eq!(c.max_open_sandboxes_per_tenant, 1);
    let e = EngineConfig::from_raw(&obj(&[("maxOpenSandboxes", num(8.0)), ("maxOpenSandboxesPerTenant", num(9.0))])).unwrap_err();
    assert_eq!(
        (e.path.as_str(), e.message.as_str()),
        ("maxOpenSandboxesPerTenant", "maxOpenSandboxesPerTenant must be at most maxOpenSandboxes (8), got 9")
    );
    let e = EngineConfig::from_raw(&obj(&[("maxOpenSandboxes", num(0.0))])).unwrap_err();
    assert_eq!(e.message, "maxOpenSandboxes must be a whole number from 1 to 100000, got 0");
    assert!(EngineConfig::from_raw(&obj(&[("maxSandboxes", num(3.0))])).unwrap_err().message.ends_with("did you mean maxOpenSandboxes?"));
    // maxQueueMs: the engine's own wins over defaultIsolateLimits', as memoryMb does.
    let limits = |ms: f64| obj(&[("maxQueueMs", num(ms))]);
    assert_eq!(EngineConfig::from_raw(&obj(&[("defaultIsolateLimits", limits(700.0))])).unwrap().max_queue_ms, 700);
    assert_eq!(EngineConfig::from_raw(&obj(&[("maxQueueMs", num(0.0)), ("defaultIsolateLimits", limits(700.0))])).unwrap().max_queue_ms, 0);
    let e = EngineConfig::from_raw(&obj(&[("maxQueueMs", num(-1.0))])).unwrap_err();
    assert_eq!(e.message, "maxQueueMs must be a whole number from 0 to 2147483647, got -1");
    // A request's own, else none (the engine's applies when it is queued).
    let c = EngineConfig::from_raw(&Raw::Undefined).unwrap();
    let request = |extra: &[(&str, Raw)]| obj(&[&[("code", s("return 1"))], extra].concat());
    assert_eq!(c.plan(&request(&[])).unwrap().max_queue_ms, None);
    assert_eq!(c.plan(&request(&[("isolateLimits", limits(250.0))])).unwrap().max_queue_ms, Some(250));
    let e = c.plan(&request(&[("maxQueueMs", num(5.0))])).unwrap_err();
    assert!(e.message.contains("not a known option"), "{}", e.message);
    // runSandbox, createSandbox and sandbox.run take it under the same name.
    assert_eq!(run_sandbox(&code(), &obj(&[("maxQueueMs", num(40.0))])).unwrap().max_queue_ms, Some(40));
    assert_eq!(run_sandbox(&code(), &Raw::Undefined).unwrap().max_queue_ms, None);
    let sandbox = crate::sandbox::sandbox_plan(&obj(&[("maxQueueMs", num(60.0))])).unwrap();
    assert_eq!(sandbox.base.max_queue_ms, Some(60));
    let budget = crate::sandbox::Budget::default();
    assert_eq!(crate::sandbox::run_plan(&sandbox, &budget, &code(), &Raw::Undefined).unwrap().max_queue_ms, Some(60));
    assert_eq!(crate::sandbox::run_plan(&sandbox, &budget, &code(), &obj(&[("maxQueueMs", num(5.0))])).unwrap().max_queue_ms, Some(5));
    // A sandbox closes after 10 idle minutes unless it says otherwise.
    let plain = crate::sandbox::sandbox_plan(&Raw::Undefined).unwrap();
    assert_eq!((plain.limits.idle_timeout_ms, plain.base.max_queue_ms), (Some(DEFAULT_SANDBOX_IDLE_TIMEOUT_MS), None));
    assert_eq!(DEFAULT_SANDBOX_IDLE_TIMEOUT_MS, 600_000);
}

#[test]
fn wasm_module_shapes_are_checked_with_the_config() {
    let m = |name: Raw, source: Raw| obj(&[("name", name), ("source", source)]);
    let cfg = |mods: Vec<Raw>| EngineConfig::from_raw(&obj(&[("wasmModules", Raw::Array(mods))]));
    assert_eq!(cfg(vec![m(s("a"), Raw::Bytes(1)), m(s("b"), Raw::Bytes(1))]).unwrap().wasm_modules, ["a", "b"]);
    assert!(cfg(vec![m(s("1x"), Raw::Bytes(1))]).unwrap_err().message.starts_with("wasmModules[0].name: `1x` is not a valid"));
    assert!(cfg(vec![m(s("a"), Raw::Bytes(1)), m(s("a"), Raw::Bytes(1))]).unwrap_err().message.contains("more than once"));
    assert_eq!(
        cfg(vec![m(s("a"), s("bytes"))]).unwrap_err().message,
        "wasmModules[0].source must be a Uint8Array or ArrayBuffer, got 'bytes'"
    );
    assert!(cfg(vec![obj(&[("name", s("a")), ("bytes", Raw::Bytes(1))])]).unwrap_err().message.contains("did you mean"));
}

#[test]
fn tool_policy_installs_only_allowed_tools() {
    let c = EngineConfig::from_raw(&obj(&[("tools", names(&["gh.list", "gh.create", "now"]))])).unwrap();
    let plan = |policy: Raw, own: &[&str]| c.plan(&obj(&[("code", code()), ("toolPolicy", policy), ("tools", names(own))]));
    let p = plan(Raw::Undefined, &[]).unwrap();
    assert!(p.tools.is_empty(), "no tools unless a policy names them");
    let p = plan(
        obj(&[("allowedTools", names(&["gh.list"])), ("maxCallsPerTool", obj(&[("gh.list", num(1.0)), ("mine", num(2.0))]))]),
        &["mine"],
    )
    .unwrap();
    assert_eq!(p.tools, ["gh.list", "mine"]);
    assert_eq!(p.max_calls, [Some(1), Some(2)]);
    let e = plan(obj(&[("allowedTools", names(&["gh.nope"]))]), &[]).unwrap_err();
    assert_eq!(e.message, "request.toolPolicy.allowedTools names unknown tool \"gh.nope\" (registered: gh.list, gh.create, now)");
    let e = plan(obj(&[("maxCallsPerTool", obj(&[("x", num(1.0))]))]), &[]).unwrap_err();
    assert!(e.message.starts_with("request.toolPolicy.maxCallsPerTool names unknown tool \"x\""));
    let e = plan(obj(&[("maxCallsPerTool", obj(&[("now", num(-1.0))]))]), &[]).unwrap_err();
    assert!(e.message.starts_with("request.toolPolicy.maxCallsPerTool.now must be a whole number"));
    let e = plan(Raw::Undefined, &["now"]).unwrap_err();
    assert_eq!(e.message, "request.tools.now clashes with the engine tool of that name");
}

#[test]
fn tool_calls_are_counted_once_per_tool() {
    let calls = ToolCalls::new(vec![Some(2), None]);
    assert!(calls.admit(0, "a").is_ok());
    assert!(calls.admit(1, "b").is_ok());
    assert!(calls.admit(0, "a").is_ok());
    assert_eq!(calls.admit(0, "a").unwrap_err(), "tool \"a\" exceeded its limit of 2 calls");
    for _ in 0..100 {
        assert!(calls.admit(1, "b").is_ok());
    }
    assert!(calls.admit(7, "x").is_err());
}

#[test]
fn request_data_and_code_are_checked() {
    let c = EngineConfig::from_raw(&Raw::Undefined).unwrap();
    assert_eq!(c.plan(&obj(&[])).unwrap_err().message, "request.code must be a string, got undefined");
    assert_eq!(c.plan(&Raw::Null).unwrap_err().message, "request must be an object, got null");
    let p = c.plan(&obj(&[("code", code()), ("data", obj(&[("a", Raw::Bytes(1))]))])).unwrap();
    assert!(p.data_object);
    let e = c.plan(&obj(&[("code", code()), ("data", obj(&[("a", num(1.0))]))])).unwrap_err();
    assert_eq!(e.message, "request.data.a must be serialized bytes, got 1");
    assert_eq!(p.limits, IsolateLimits { memory_mb: 128, wall_time_ms: 30_000, cpu_time_ms: Some(5000) });
    let e = c.plan(&obj(&[("code", code()), ("data", names(&["x"]))])).unwrap_err();
    assert_eq!(e.message, "request.data must be an object, got an array");
}

#[test]
fn tenant_is_a_short_non_empty_string_for_runs_and_requests() {
    let run = |o: Raw| run_sandbox(&code(), &o);
    assert_eq!(run(Raw::Undefined).unwrap().tenant, None);
    assert_eq!(run(obj(&[("tenant", Raw::Undefined)])).unwrap().tenant, None);
    assert_eq!(run(obj(&[("tenant", s("acme"))])).unwrap().tenant.as_deref(), Some("acme"));
    let longest = "é".repeat(MAX_TENANT_BYTES / 2); // counted in bytes, not characters
    assert_eq!(run(obj(&[("tenant", s(&longest))])).unwrap().tenant, Some(longest.clone()));
    let e = |v: Raw| run(obj(&[("tenant", v)])).unwrap_err();
    assert_eq!(e(s("")).message, "tenant must be a non-empty string of at most 256 bytes, got ''");
    assert_eq!(e(s(&format!("{longest}x"))).message, "tenant must be a non-empty string of at most 256 bytes, got 257 bytes");
    assert_eq!(e(num(7.0)).message, "tenant must be a non-empty string of at most 256 bytes, got 7");
    assert_eq!(e(Raw::Null).path, "tenant");
    assert!(run(obj(&[("tenants", s("a"))])).unwrap_err().message.ends_with("did you mean tenant?"));

    let c = EngineConfig::from_raw(&Raw::Undefined).unwrap();
    let plan = |tenant: Raw| c.plan(&obj(&[("code", code()), ("tenant", tenant)]));
    assert_eq!(plan(Raw::Undefined).unwrap().tenant, None);
    assert_eq!(plan(s("acme")).unwrap().tenant.as_deref(), Some("acme"));
    let e = plan(names(&["acme"])).unwrap_err();
    assert_eq!(
        (e.path.as_str(), e.message.as_str()),
        ("request.tenant", "request.tenant must be a non-empty string of at most 256 bytes, got an array")
    );
}
