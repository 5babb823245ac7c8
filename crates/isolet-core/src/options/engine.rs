//! `new SandboxEngine(config)` and `engine.submit(request)` (with their isolate and bridge
//! limits, tool policy, prelude and WebAssembly modules), and persistent sandboxes
//! (`createSandbox(options)`, `sandbox.run(code, options)`).
use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU32, Ordering};

use crate::limits::{
    BridgeLimits, IsolateLimits, DEFAULT_CODE_CACHE_MB, DEFAULT_ENGINE_MEMORY_MB, MAX_CODE_CACHE_MB, MAX_PRELUDE_BYTES, MAX_TIME_MS,
};
use crate::names::check_global_name;

use super::limits::{BRIDGE_LIMITS, CPU_TIME, IDLE_TIME, MAX_COUNT, MEMORY, MODULES, MODULE_BYTES, QUEUE_TIME, WALL_TIME};
use super::run::{
    bridge_limits, check_module_map, check_prelude_shadowing, check_tool_names, code_of, module_map, module_options, ExecMode, GivenBridge,
    Isolation, RunPlan, UnhandledRejections, BRIDGE_NAMES, CODE_TYPE, DEFAULT_ISOLATION, ISOLATION_MODES, LANGUAGES, MODULE_MAP, RESOLVE,
    RUN_SANDBOX, TENANT, UNHANDLED_REJECTIONS_OPT,
};
use super::table::{err, fields, opt, whole, Fields, Kind, Opt, OptionsError, Raw};

/// Default CPU-time limit of an engine request (`DEFAULT_ISOLATE_LIMITS.cpuTimeMs`).
pub const DEFAULT_REQUEST_CPU_TIME_MS: u64 = 5_000;
/// Default wall-clock limit of an engine request (`DEFAULT_ISOLATE_LIMITS.wallTimeMs`).
pub const DEFAULT_REQUEST_WALL_TIME_MS: u64 = 30_000;

/// `idleTimeoutMs` of a persistent sandbox unless it says otherwise: an open sandbox keeps
/// its memory (and in process mode a host process) while nobody uses it, so one that is
/// forgotten is closed after 10 minutes without a run rather than never.
pub const DEFAULT_SANDBOX_IDLE_TIMEOUT_MS: u64 = 600_000;
/// Most open sandboxes an engine may be configured to allow (`maxOpenSandboxes`).
const MAX_OPEN_SANDBOXES: u64 = 100_000;

/// `defaultIsolateLimits` and a request's `isolateLimits`. `memoryMb` has no default
/// here: it falls back to the engine's `memoryMb` (the memory of its warm isolates).
pub const ISOLATE_LIMITS: &[Opt] = &[
    MEMORY.called("memoryMb", &["memoryLimitMb"]).default_of(None),
    CPU_TIME.default_of(Some(DEFAULT_REQUEST_CPU_TIME_MS)),
    WALL_TIME.called("wallTimeMs", &["timeoutMs", "timeout"]).default_of(Some(DEFAULT_REQUEST_WALL_TIME_MS)),
    QUEUE_TIME,
];

/// `new SandboxEngine(config)`.
pub const ENGINE_CONFIG: &[Opt] = &[
    MEMORY.aliases(&[]).seed_names(&["memoryMb"]).default_of(Some(DEFAULT_ENGINE_MEMORY_MB as u64)),
    whole("maxConcurrentIsolates", 1, 1024, Some(4), &["maxConcurrency", "concurrency"]),
    whole("warmPoolSize", 0, 256, Some(0), &["warmPool"]),
    whole("maxQueueSize", 0, 1_000_000, Some(1000), &["queueSize"]),
    whole("processes", 1, 64, Some(2), &[]),
    // Process isolation: persistent sandboxes of one tenant that share a sandbox host.
    whole("sandboxesPerHost", 1, crate::host_policy::MAX_SANDBOXES_PER_HOST, Some(crate::host_policy::DEFAULT_SANDBOXES_PER_HOST), &[]),
    QUEUE_TIME.default_of(Some(crate::queue::DEFAULT_MAX_QUEUE_MS)),
    whole("maxOpenSandboxes", 1, MAX_OPEN_SANDBOXES, Some(crate::queue::DEFAULT_MAX_OPEN_SANDBOXES as u64), &["maxSandboxes"]),
    // Default: a quarter of maxOpenSandboxes (`queue::default_max_open_sandboxes_per_tenant`).
    whole("maxOpenSandboxesPerTenant", 1, MAX_OPEN_SANDBOXES, None, &["maxSandboxesPerTenant"]),
    opt("isolation", Kind::OneOf(ISOLATION_MODES)),
    opt("defaultIsolateLimits", Kind::Object(ISOLATE_LIMITS)),
    opt("defaultBridgeLimits", Kind::Object(BRIDGE_LIMITS)),
    opt("tools", Kind::Tools).aliases(&["capabilities"]),
    opt("wasmModules", Kind::WasmModules),
    opt("prelude", Kind::Prelude),
    whole("codeCacheMb", 0, MAX_CODE_CACHE_MB as u64, Some(DEFAULT_CODE_CACHE_MB as u64), &["codeCache"]),
    opt("web", Kind::Bool),
    // Its requests' unless they say otherwise.
    UNHANDLED_REJECTIONS_OPT,
];

/// `toolPolicy` of a request.
pub const TOOL_POLICY: &[Opt] = &[opt("allowedTools", Kind::Names), opt("maxCallsPerTool", Kind::CountMap { max: MAX_COUNT })];

/// `engine.submit(request)`.
pub const SUBMIT_REQUEST: &[Opt] = &[
    opt("requestId", Kind::Text),
    opt("code", Kind::Text),
    opt("language", Kind::OneOf(LANGUAGES)),
    opt("isolateLimits", Kind::Object(ISOLATE_LIMITS)),
    opt("bridgeLimits", Kind::Object(BRIDGE_LIMITS)),
    opt("toolPolicy", Kind::Object(TOOL_POLICY)),
    opt("tools", Kind::Tools).aliases(&["capabilities"]),
    opt("data", Kind::BytesMap),
    TENANT,
    CODE_TYPE,
    MODULE_MAP,
    RESOLVE,
    MODULES,
    MODULE_BYTES,
    opt("web", Kind::Bool),
    UNHANDLED_REJECTIONS_OPT,
];

/// One entry of `wasmModules`.
pub(super) const WASM_MODULE: &[Opt] =
    &[opt("name", Kind::Text), opt("source", Kind::Shaped("a Uint8Array or ArrayBuffer")).aliases(&["bytes", "module"])];

/// A checked `SandboxEngine` config.
#[derive(Debug, Clone, PartialEq)]
pub struct EngineConfig {
    /// Memory per isolate: warm isolates have it, requests get it unless their own
    /// `isolateLimits.memoryMb` (or `defaultIsolateLimits.memoryMb`) says otherwise.
    pub memory_mb: u32,
    pub max_concurrent_isolates: u32,
    pub warm_pool_size: u32,
    pub max_queue_size: u32,
    pub processes: u32,
    /// Persistent sandboxes of one tenant a sandbox host holds (process isolation).
    pub sandboxes_per_host: u32,
    /// How long a run may wait for a slot unless it says otherwise (`maxQueueMs`).
    pub max_queue_ms: u64,
    pub max_open_sandboxes: u32,
    pub max_open_sandboxes_per_tenant: u32,
    pub isolation: Isolation,
    /// Limits of a request that names none.
    pub default_limits: IsolateLimits,
    pub default_bridge: BridgeLimits,
    /// What `defaultBridgeLimits` gave of the limits derived from another, for requests.
    pub default_bridge_given: GivenBridge,
    /// The engine's tools (flattened names), each callable only if a request allows it.
    pub tools: Vec<String>,
    /// Names of the WebAssembly modules, in order.
    pub wasm_modules: Vec<String>,
    /// Evaluated into every run's fresh context before the run's code (`prelude`).
    pub prelude: Option<Prelude>,
    /// Compiled-code cache budget in bytes (`codeCacheMb`; see `code_cache`).
    pub code_cache_bytes: usize,
    /// `web` of a request that says nothing about it.
    pub web: bool,
    /// `unhandledRejections` of a request that says nothing about it.
    pub unhandled_rejections: UnhandledRejections,
}

/// An engine's prelude: a classic script run in every fresh context before the run's code,
/// before its tools, `data` and modules exist (`source`), and ES modules every run may
/// import by key without giving them (`modules`: compiled through the code cache, evaluated
/// when a run first imports one).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Prelude {
    pub source: Option<String>,
    pub modules: BTreeMap<String, String>,
}

impl Prelude {
    /// The keys of its modules.
    pub fn module_keys(&self) -> Vec<String> {
        self.modules.keys().cloned().collect()
    }
}

/// `prelude` as an object.
pub const PRELUDE: &[Opt] = &[opt("source", Kind::Text), opt("modules", Kind::ModuleMap)];

fn prelude_of(f: &Fields) -> Result<Option<Prelude>, OptionsError> {
    let path = f.path("prelude");
    let prelude = match f.get("prelude") {
        None | Some(Raw::Undefined) => return Ok(None),
        Some(Raw::String(source)) => Prelude { source: Some(source.clone()), modules: BTreeMap::new() },
        Some(object @ Raw::Object(_)) => {
            let p = fields(&path, &path, object, PRELUDE)?;
            let modules = module_map(&p, "modules")?;
            for key in modules.keys() {
                let at = format!("{}['{key}']", p.path("modules"));
                if key == crate::modules::ROOT_MODULE {
                    return Err(err(&at, format!("{at}: '{key}' is the name of each run's own code")));
                }
                if crate::modules::is_typescript(key, "javascript") {
                    return Err(err(
                        &at,
                        format!("{at}: prelude modules are JavaScript (their types are not stripped); give it a .js key"),
                    ));
                }
            }
            Prelude { source: p.text("source")?.map(str::to_string), modules }
        }
        Some(other) => {
            return Err(err(&path, format!("{path} must be a string or an object {{ source?, modules? }}, got {}", other.describe())));
        }
    };
    let bytes = prelude.source.as_ref().map_or(0, String::len) + prelude.modules.values().map(String::len).sum::<usize>();
    if bytes > MAX_PRELUDE_BYTES {
        return Err(err(&path, format!("{path} must be at most {MAX_PRELUDE_BYTES} bytes, got {bytes} bytes")));
    }
    if prelude.source.is_none() && prelude.modules.is_empty() {
        return Ok(None);
    }
    Ok(Some(prelude))
}

impl EngineConfig {
    /// The size of the engine's pool of isolates (in this process, or in each host).
    pub fn pool(&self) -> crate::queue::PoolConfig {
        crate::queue::PoolConfig {
            memory_mb: self.memory_mb,
            max_concurrent: self.max_concurrent_isolates as usize,
            warm_pool_size: self.warm_pool_size as usize,
            max_queue: self.max_queue_size as usize,
            max_queue_ms: Some(self.max_queue_ms),
            max_open_sandboxes: self.max_open_sandboxes as usize,
            max_open_sandboxes_per_tenant: self.max_open_sandboxes_per_tenant as usize,
        }
    }

    /// Checks `new SandboxEngine(config)`. `config.tools` holds the tool names (JS
    /// flattened the functions); `config.wasmModules` entries are `{ name, source }`.
    pub fn from_raw(config: &Raw) -> Result<EngineConfig, OptionsError> {
        let f = fields("", "SandboxEngine config", config, ENGINE_CONFIG)?;
        let isolate = f.object("defaultIsolateLimits")?;
        // The engine's memoryLimitMb (the seed's memoryMb) wins over defaultIsolateLimits.memoryMb:
        // the seed's own pattern passes DEFAULT_ISOLATE_LIMITS (memoryMb 128) next to its memoryMb.
        let memory_mb = match (f.whole("memoryLimitMb")?, isolate.whole("memoryMb")?) {
            (Some(m), _) | (None, Some(m)) => m,
            (None, None) => DEFAULT_ENGINE_MEMORY_MB as u64,
        } as u32;
        let default_limits = IsolateLimits {
            memory_mb,
            wall_time_ms: isolate.whole_or_default("wallTimeMs")?,
            cpu_time_ms: Some(isolate.whole_or_default("cpuTimeMs")?),
        };
        let bridge = f.object("defaultBridgeLimits")?;
        let (default_bridge, default_bridge_given) =
            bridge_limits(&bridge, BridgeLimits::default(), &GivenBridge::default(), BRIDGE_NAMES)?;
        let tools = f.names("tools")?.unwrap_or_default();
        check_tool_names("tools", "tool", &tools)?;
        // As memoryLimitMb: the engine's own option wins over defaultIsolateLimits'.
        let max_queue_ms = match (f.whole("maxQueueMs")?, isolate.whole("maxQueueMs")?) {
            (Some(ms), _) | (None, Some(ms)) => ms,
            (None, None) => f.whole_or_default("maxQueueMs")?,
        };
        let max_open_sandboxes = f.whole_or_default("maxOpenSandboxes")?;
        let per_tenant = match f.whole("maxOpenSandboxesPerTenant")? {
            Some(n) if n > max_open_sandboxes => {
                return Err(err(
                    "maxOpenSandboxesPerTenant",
                    format!("maxOpenSandboxesPerTenant must be at most maxOpenSandboxes ({max_open_sandboxes}), got {n}"),
                ))
            }
            Some(n) => n,
            None => crate::queue::default_max_open_sandboxes_per_tenant(max_open_sandboxes as usize) as u64,
        };
        Ok(EngineConfig {
            memory_mb,
            max_concurrent_isolates: f.whole_or_default("maxConcurrentIsolates")? as u32,
            warm_pool_size: f.whole_or_default("warmPoolSize")? as u32,
            max_queue_size: f.whole_or_default("maxQueueSize")? as u32,
            processes: f.whole_or_default("processes")? as u32,
            sandboxes_per_host: f.whole_or_default("sandboxesPerHost")? as u32,
            max_queue_ms,
            max_open_sandboxes: max_open_sandboxes as u32,
            max_open_sandboxes_per_tenant: per_tenant as u32,
            isolation: Isolation::parse(f.one_of("isolation")?).unwrap_or(DEFAULT_ISOLATION),
            default_limits,
            default_bridge,
            default_bridge_given,
            tools,
            wasm_modules: wasm_module_names(f.get("wasmModules"))?,
            prelude: prelude_of(&f)?,
            code_cache_bytes: f.whole_or_default("codeCacheMb")? as usize * 1024 * 1024,
            web: f.bool("web")?.unwrap_or(false),
            unhandled_rejections: UnhandledRejections::parse(f.one_of("unhandledRejections")?).unwrap_or_default(),
        })
    }

    /// Checks `engine.submit(request)`. `request.tools` holds the request's own tool
    /// names and `request.data` the serialized values (JS shaped both). The `data` values
    /// are checked, not copied: JS hands the same buffers to the engine with the plan.
    pub fn plan(&self, request: &Raw) -> Result<RunPlan, OptionsError> {
        if !matches!(request, Raw::Object(_)) {
            return Err(err("request", format!("request must be an object, got {}", request.describe())));
        }
        let f = fields("request", "request", request, SUBMIT_REQUEST)?;
        f.text("requestId")?;
        let code = code_of("request.code", f.get("code").unwrap_or(&Raw::Undefined))?;
        let isolate = f.object("isolateLimits")?;
        let d = self.default_limits;
        let limits = IsolateLimits {
            memory_mb: isolate.whole("memoryMb")?.map_or(d.memory_mb, |m| m as u32),
            wall_time_ms: isolate.whole("wallTimeMs")?.unwrap_or(d.wall_time_ms),
            cpu_time_ms: isolate.whole("cpuTimeMs")?.or(d.cpu_time_ms),
        };
        let (bridge, _) = bridge_limits(&f.object("bridgeLimits")?, self.default_bridge, &self.default_bridge_given, BRIDGE_NAMES)?;
        let own = f.names("tools")?.unwrap_or_default();
        check_tool_names("request.tools", "tool", &own)?;
        if let Some(name) = own.iter().find(|n| self.tools.contains(n)) {
            return Err(err("request.tools", format!("request.tools.{name} clashes with the engine tool of that name")));
        }
        let policy = self.tool_policy(&f.object("toolPolicy")?, &own)?;
        match f.get("data") {
            None => {}
            Some(Raw::Object(entries)) => {
                if let Some((k, v)) = entries.iter().find(|(_, v)| !matches!(v, Raw::Bytes(_) | Raw::Undefined)) {
                    return Err(err("request.data", format!("request.data.{k} must be serialized bytes, got {}", v.describe())));
                }
            }
            Some(other) => return Err(err("request.data", format!("request.data must be an object, got {}", other.describe()))),
        }
        let (is_module, modules, module_limits, module_resolver) = module_options(&f)?;
        if let Some(prelude) = &self.prelude {
            check_prelude_shadowing("request.modules", &modules, &prelude.module_keys())?;
        }
        Ok(RunPlan {
            code,
            mode: if is_module { ExecMode::Module } else { ExecMode::AsyncBody },
            language: f.one_of("language")?.unwrap_or("javascript"),
            isolation: None,
            limits,
            bridge,
            tools: policy.0,
            max_calls: policy.1,
            data_object: true,
            data_values: BTreeMap::new(),
            wasm: !self.wasm_modules.is_empty(),
            web: f.bool("web")?.unwrap_or(self.web),
            unhandled_rejections: UnhandledRejections::parse(f.one_of("unhandledRejections")?).unwrap_or(self.unhandled_rejections),
            stream_console: true,
            tenant: f.label("tenant")?,
            modules,
            module_limits,
            module_resolver,
            max_queue_ms: isolate.whole("maxQueueMs")?,
            web_fetch: false,
        })
    }

    /// The tools a request may call: engine tools its policy allows, plus its own tools
    /// (handed over by the requester, so allowed), each with its call limit.
    fn tool_policy(&self, policy: &Fields, own: &[String]) -> Result<(Vec<String>, Vec<Option<u32>>), OptionsError> {
        let registered = || {
            let all: Vec<&str> = self.tools.iter().chain(own).map(String::as_str).collect();
            if all.is_empty() {
                "none".to_string()
            } else {
                all.join(", ")
            }
        };
        let allowed = policy.names("allowedTools")?.unwrap_or_default();
        for name in &allowed {
            if !self.tools.contains(name) && !own.contains(name) {
                let path = policy.path("allowedTools");
                return Err(err(&path, format!("{path} names unknown tool \"{name}\" (registered: {})", registered())));
            }
        }
        let mut limits: HashMap<&str, u32> = HashMap::new();
        let max_path = policy.path("maxCallsPerTool");
        match policy.get("maxCallsPerTool") {
            None => {}
            Some(Raw::Object(entries)) => {
                let Kind::CountMap { max } = policy.opt("maxCallsPerTool").kind else { unreachable!() };
                for (name, v) in entries.iter().filter(|(_, v)| !v.is_undefined()) {
                    if !self.tools.contains(name) && !own.contains(name) {
                        return Err(err(&max_path, format!("{max_path} names unknown tool \"{name}\" (registered: {})", registered())));
                    }
                    match v {
                        Raw::Number(n) if n.is_finite() && n.fract() == 0.0 && *n >= 0.0 && *n <= max as f64 => {
                            limits.insert(name, *n as u32);
                        }
                        other => {
                            return Err(err(
                                &max_path,
                                format!("{max_path}.{name} must be a whole number from 0 to {max}, got {}", other.describe()),
                            ))
                        }
                    }
                }
            }
            Some(other) => return Err(err(&max_path, format!("{max_path} must be an object, got {}", other.describe()))),
        }
        let tools: Vec<String> = self.tools.iter().filter(|t| allowed.contains(t)).chain(own).cloned().collect();
        let max_calls = tools.iter().map(|t| limits.get(t.as_str()).copied()).collect();
        Ok((tools, max_calls))
    }
}

/// Checks the shape of `wasmModules`: an array of `{ name, source }` with identifier
/// names, each once, and byte sources. (The bytes themselves are checked and compiled
/// where the modules are registered.)
fn wasm_module_names(raw: Option<&Raw>) -> Result<Vec<String>, OptionsError> {
    let items = match raw {
        None => return Ok(Vec::new()),
        Some(Raw::Array(items)) => items,
        Some(other) => return Err(err("wasmModules", format!("wasmModules must be an array, got {}", other.describe()))),
    };
    let mut names: Vec<String> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        let at = format!("wasmModules[{i}]");
        if !matches!(item, Raw::Object(_)) {
            return Err(err(&at, format!("{at} must be an object {{ name, source }}, got {}", item.describe())));
        }
        let f = fields(&at, &at, item, WASM_MODULE)?;
        let name = match f.get("name") {
            Some(Raw::String(s)) if check_global_name(s).is_ok() => s.clone(),
            Some(Raw::String(s)) => {
                let why = check_global_name(s).unwrap_err();
                return Err(err(&format!("{at}.name"), format!("{at}.name: {why}")));
            }
            other => {
                let got = other.map_or("undefined".to_string(), Raw::describe);
                return Err(err(&format!("{at}.name"), format!("{at}.name must be a JavaScript identifier, got {got}")));
            }
        };
        if names.contains(&name) {
            return Err(err(&format!("{at}.name"), format!("{at}.name: wasm module name '{name}' is given more than once")));
        }
        match f.get("source") {
            Some(Raw::Bytes(_)) => {}
            other => {
                let got = other.map_or("undefined".to_string(), Raw::describe);
                return Err(err(&format!("{at}.source"), format!("{at}.source must be a Uint8Array or ArrayBuffer, got {got}")));
            }
        }
        names.push(name);
    }
    Ok(names)
}

/// Counts a run's calls per tool against its `maxCallsPerTool`: the one place a tool
/// call is counted.
#[derive(Debug)]
pub struct ToolCalls {
    limits: Vec<Option<u32>>,
    used: Vec<AtomicU32>,
}

impl ToolCalls {
    pub fn new(limits: Vec<Option<u32>>) -> Self {
        let used = limits.iter().map(|_| AtomicU32::new(0)).collect();
        ToolCalls { limits, used }
    }

    /// Counts one call of tool `index` (named `name`); the refusal message once the
    /// tool has used up its calls. The sandbox sees it as a `PermissionError`.
    pub fn admit(&self, index: usize, name: &str) -> Result<(), String> {
        let (Some(limit), Some(used)) = (self.limits.get(index), self.used.get(index)) else {
            return Err(format!("tool \"{name}\" is not allowed by this request's toolPolicy"));
        };
        let n = used.fetch_add(1, Ordering::SeqCst).saturating_add(1);
        match limit {
            Some(max) if n > *max => Err(format!("tool \"{name}\" exceeded its limit of {max} calls")),
            _ => Ok(()),
        }
    }
}

/// The error name a tool-policy refusal has inside the sandbox.
pub const TOOL_REFUSAL_NAME: &str = "PermissionError";

/// The sandbox-wide options of `createSandbox(options)` (see `crate::sandbox`).
pub const SANDBOX_LIMITS: &[Opt] = &[
    whole("totalCpuTimeMs", 1, MAX_TIME_MS, None, &["maxTotalCpuTimeMs", "cpuBudgetMs"]),
    IDLE_TIME.default_of(Some(DEFAULT_SANDBOX_IDLE_TIMEOUT_MS)),
    whole("maxTotalHostCalls", 0, MAX_COUNT, None, &["totalHostCalls"]),
];

/// `sandbox.run(code, options)` of a persistent sandbox (and the run of `sandbox.call`).
/// `modules` join the sandbox's own for this run; `maxModules` and `maxModuleBytes` are
/// the sandbox's (its module graph's, for its life).
pub const SANDBOX_RUN: &[Opt] = &[
    WALL_TIME.default_of(None),
    CPU_TIME,
    opt("language", Kind::OneOf(LANGUAGES)),
    opt("signal", Kind::Shaped("an AbortSignal")),
    CODE_TYPE,
    MODULE_MAP,
    RESOLVE,
    QUEUE_TIME,
    UNHANDLED_REJECTIONS_OPT,
];

/// Options of runSandbox a persistent sandbox does not take: the per-call `signal`.
const NOT_SANDBOX_OPTIONS: &[&str] = &["signal"];

/// `createSandbox(options)` / `engine.openSandbox(options)`: runSandbox's options but
/// `NOT_SANDBOX_OPTIONS` (`timeoutMs` and `cpuTimeMs` are each run's defaults), and the
/// sandbox-wide limits.
pub fn sandbox_table() -> &'static [Opt] {
    static TABLE: std::sync::OnceLock<Vec<Opt>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| RUN_SANDBOX.iter().filter(|o| !NOT_SANDBOX_OPTIONS.contains(&o.name)).chain(SANDBOX_LIMITS).copied().collect())
}

/// Checks `createSandbox(options)`; see `crate::sandbox::sandbox_plan`.
pub(crate) fn sandbox_options(options: &Raw) -> Result<crate::sandbox::SandboxPlan, OptionsError> {
    let f = fields("", "createSandbox options", options, sandbox_table())?;
    // A classic script by default, so that declarations land in the context's global
    // scope; `type: 'module'` makes each run a module unless the run says otherwise.
    let base = super::run::run_sandbox_plan(&f, String::new(), false)?;
    let limits = crate::sandbox::SandboxLimits {
        total_cpu_time_ms: f.whole("totalCpuTimeMs")?,
        idle_timeout_ms: Some(f.whole_or_default("idleTimeoutMs")?),
        max_total_host_calls: f.whole("maxTotalHostCalls")?,
    };
    Ok(crate::sandbox::SandboxPlan { base, limits })
}

/// Checks `sandbox.run(code, options)`; see `crate::sandbox::run_plan`.
pub(crate) fn sandbox_run(
    sandbox: &crate::sandbox::SandboxPlan,
    budget: &crate::sandbox::Budget,
    code: &Raw,
    options: &Raw,
) -> Result<RunPlan, OptionsError> {
    let code = code_of("code", code)?;
    let f = fields("", "sandbox.run options", options, SANDBOX_RUN)?;
    let mut plan = sandbox.base.clone();
    plan.code = code;
    if let Some(language) = f.one_of("language")? {
        plan.language = language;
    }
    match f.one_of("type")? {
        Some("module") => plan.mode = ExecMode::Module,
        Some(_) => plan.mode = ExecMode::Script,
        None => {}
    }
    // The run's own modules only: the sandbox's map stays where the sandbox lives, and
    // what earlier runs loaded is in its module graph.
    plan.modules = module_map(&f, "modules")?;
    check_module_map(&f, &plan.modules, plan.module_limits)?;
    plan.module_resolver = f.function("resolve")? || sandbox.base.module_resolver;
    if let Some(wall) = f.whole("timeoutMs")? {
        plan.limits.wall_time_ms = wall;
    }
    if let Some(ms) = f.whole("maxQueueMs")? {
        plan.max_queue_ms = Some(ms);
    }
    if let Some(mode) = UnhandledRejections::parse(f.one_of("unhandledRejections")?) {
        plan.unhandled_rejections = mode;
    }
    let own_cpu = f.whole("cpuTimeMs")?.or(plan.limits.cpu_time_ms);
    plan.limits.cpu_time_ms = budget.run_cpu_limit_ms(&sandbox.limits, own_cpu);
    plan.bridge.max_messages = budget.run_host_calls(&sandbox.limits, plan.bridge.max_messages);
    Ok(plan)
}
