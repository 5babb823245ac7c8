//! `runSandbox(code, options)` and the run plan every entry point produces, and what the
//! others share with it: the limit constants, the module options, the bridge-limit checks.
use std::collections::BTreeMap;

use crate::limits::{BridgeLimits, IsolateLimits, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_MESSAGE_VALUES};
use crate::modules::ModuleLimits;
use crate::names::check_capability_names;

use super::limits::{
    with_bridge_limits, CPU_TIME, MAX_COUNT, MAX_PENDING_BYTES, MEMORY, MESSAGES, MODULES, MODULE_BYTES, QUEUE_TIME, WALL_TIME,
};
use super::table::{err, fields, opt, Fields, Kind, Opt, OptionsError, Raw};

/// Isolation modes (`isolation`).
pub const ISOLATION_MODES: &[&str] = &["process", "thread"];
/// Source languages (`language`).
pub const LANGUAGES: &[&str] = &["javascript", "typescript"];
/// What the code is (`type`): a classic script (or async body) or an ES module.
pub const CODE_TYPES: &[&str] = &["script", "module"];
/// What a run does about a promise rejected with no handler that has none when the run
/// ends (`unhandledRejections`): reports it in its logs and stats, or fails with it too.
pub const UNHANDLED_REJECTIONS: &[&str] = &["warn", "error"];
/// `unhandledRejections`, the same in every option set that takes it.
pub(super) const UNHANDLED_REJECTIONS_OPT: Opt =
    opt("unhandledRejections", Kind::OneOf(UNHANDLED_REJECTIONS)).aliases(&["unhandledRejection", "onUnhandledRejection"]);

/// Default `isolation` of `runSandbox` and `SandboxEngine`: a process boundary.
pub const DEFAULT_ISOLATION: Isolation = Isolation::Process;
/// Longest `tenant`, in UTF-8 bytes: the engine keeps counts per tenant name.
pub const MAX_TENANT_BYTES: usize = 256;

/// Options runSandbox, engine requests and sandboxes share, each the same everywhere.
pub(super) const TENANT: Opt = opt("tenant", Kind::Label { max_bytes: MAX_TENANT_BYTES });
pub(super) const CODE_TYPE: Opt = opt("type", Kind::OneOf(CODE_TYPES));
pub(super) const MODULE_MAP: Opt = opt("modules", Kind::ModuleMap);
pub(super) const RESOLVE: Opt = opt("resolve", Kind::Function);

/// `runSandbox(code, options)`.
pub const RUN_SANDBOX: &[Opt] = with_bridge_limits!(
    [MEMORY.aliases(&["memoryMb", "memoryLimit"]), WALL_TIME, CPU_TIME],
    MESSAGES.called("maxHostCalls", &["maxMessages"]),
    [
        opt("isolation", Kind::OneOf(ISOLATION_MODES)),
        opt("language", Kind::OneOf(LANGUAGES)),
        opt("capabilities", Kind::Tools).aliases(&["tools"]),
        opt("signal", Kind::Shaped("an AbortSignal")),
        TENANT,
        CODE_TYPE,
        MODULE_MAP,
        RESOLVE,
        MODULES,
        MODULE_BYTES,
        QUEUE_TIME,
        opt("web", Kind::Bool),
        UNHANDLED_REJECTIONS_OPT,
    ]
);

/// Where isolates run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Isolation {
    Process,
    Thread,
}

impl Isolation {
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::Process => "process",
            Isolation::Thread => "thread",
        }
    }

    pub(super) fn parse(s: Option<&str>) -> Option<Isolation> {
        s.map(|s| if s == "thread" { Isolation::Thread } else { Isolation::Process })
    }
}

/// `unhandledRejections`: a promise rejected with no handler that still has none when the
/// run ends is reported (a `warn` log entry and `stats.unhandledRejections`); with `Error`
/// a run that would have succeeded fails with the first one instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum UnhandledRejections {
    #[default]
    Warn,
    Error,
}

impl UnhandledRejections {
    pub fn as_str(self) -> &'static str {
        match self {
            UnhandledRejections::Warn => "warn",
            UnhandledRejections::Error => "error",
        }
    }

    /// From a checked value of `UNHANDLED_REJECTIONS`.
    pub fn parse(s: Option<&str>) -> Option<UnhandledRejections> {
        s.map(|s| if s == "error" { UnhandledRejections::Error } else { UnhandledRejections::Warn })
    }
}

/// How the code runs: its completion value is the output (`Script`), or it is the body
/// of an async function and only `return` gives output (`AsyncBody`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ExecMode {
    Script,
    AsyncBody,
    /// An ES module (`type: 'module'`): its default export, else its namespace, is the
    /// output.
    Module,
}

/// A checked run, ready for an engine: everything a thread or process backend needs.
#[derive(Debug, Clone, PartialEq)]
pub struct RunPlan {
    pub code: String,
    pub mode: ExecMode,
    /// `javascript` or `typescript` (JS strips types before the run starts).
    pub language: &'static str,
    /// runSandbox only: which default engine serves the run.
    pub isolation: Option<Isolation>,
    pub limits: IsolateLimits,
    pub bridge: BridgeLimits,
    /// Host functions installed as globals, in call-index order. Only these exist in
    /// the sandbox: a tool the policy does not allow is not visible at all.
    pub tools: Vec<String>,
    /// Per installed tool (same order), the most calls it may take.
    pub max_calls: Vec<Option<u32>>,
    pub data_object: bool,
    /// `data` values given up front (serialized), by key: reading them needs no round
    /// trip. The options checks see only their types; the bytes are set by the binding.
    pub data_values: BTreeMap<String, Vec<u8>>,
    /// Instantiate the engine's WebAssembly modules.
    pub wasm: bool,
    /// Install the web platform APIs (`web`: URL, TextEncoder, timers, ...; docs/web.md).
    pub web: bool,
    /// `unhandledRejections`: what the run does about rejections nobody handled.
    pub unhandled_rejections: UnhandledRejections,
    /// Send console entries as they happen (sessions).
    pub stream_console: bool,
    /// Whose run it is (`tenant`): queued runs are served in turn across tenants
    /// (`queue::AdmissionQueue`); `None` is the one tenant of runs naming none.
    pub tenant: Option<String>,
    /// Module sources given up front (`modules`), by key (`modules::map_key`).
    pub modules: BTreeMap<String, String>,
    /// `maxModules`, `maxModuleBytes`.
    pub module_limits: ModuleLimits,
    /// A `resolve` function answers imports the map does not hold.
    pub module_resolver: bool,
    /// `maxQueueMs`: how long the run may wait for a slot (`None`: the engine's). Not sent
    /// to sandbox hosts: the parent queues.
    pub max_queue_ms: Option<u64>,
    /// With `web`: the tool `fetch` is a fetch capability (`createFetchCapability`) that
    /// speaks the web layer's protocol, and the global `fetch` is WHATWG fetch over it
    /// (docs/web.md). Set by the JS layer, which knows the capability (`use_web_fetch`).
    pub web_fetch: bool,
}

impl RunPlan {
    /// Makes the global `fetch` WHATWG fetch over the tool `fetch` when the run has the web
    /// APIs and that tool; returns whether it did.
    pub fn use_web_fetch(&mut self) -> bool {
        self.web_fetch = self.web && self.tools.iter().any(|t| t == "fetch");
        self.web_fetch
    }
}

/// The module options of a run: its `ExecMode::Module` choice and its map, limits and
/// resolver, checked (the map against the limits, as resolved modules are).
pub(super) fn module_options(f: &Fields) -> Result<(bool, BTreeMap<String, String>, ModuleLimits, bool), OptionsError> {
    let is_module = f.one_of("type")? == Some("module");
    let limits =
        ModuleLimits { max_modules: f.whole_or_default("maxModules")? as u32, max_module_bytes: f.whole_or_default("maxModuleBytes")? };
    let modules = module_map(f, "modules")?;
    check_module_map(f, &modules, limits)?;
    Ok((is_module, modules, limits, f.function("resolve")?))
}

/// A map of module sources (`modules`, `prelude.modules`), by normalized key.
pub(super) fn module_map(f: &Fields, name: &str) -> Result<BTreeMap<String, String>, OptionsError> {
    let mut modules = BTreeMap::new();
    match f.get(name) {
        None => {}
        Some(Raw::Object(entries)) => {
            for (given, source) in entries {
                let path = format!("{}['{given}']", f.path(name));
                let Raw::String(source) = source else {
                    return Err(err(&path, format!("{path} must be a module's source (a string), got {}", source.describe())));
                };
                let key = crate::modules::map_key(given).map_err(|why| err(&path, format!("{path}: the key {why}")))?;
                if modules.insert(key.clone(), source.clone()).is_some() {
                    return Err(err(&path, format!("{path} names module '{key}', which another key of {} names too", f.path(name))));
                }
            }
        }
        Some(other) => {
            let path = f.path(name);
            return Err(err(&path, format!("{path} must be an object of module sources, got {}", other.describe())));
        }
    }
    Ok(modules)
}

/// A run's `modules` within `limits` (its own code counts as a module).
pub(super) fn check_module_map(f: &Fields, modules: &BTreeMap<String, String>, limits: ModuleLimits) -> Result<(), OptionsError> {
    if let Err(e) = crate::modules::check_map(modules, limits) {
        let path = f.path("modules");
        let bytes: u64 = modules.values().map(|s| s.len() as u64).sum();
        let message = match e {
            crate::modules::ModuleError::TooManyModules { max } => format!(
                "{path} holds {} modules, with the run's own code over {} ({max}); raise it or give fewer modules",
                modules.len(),
                f.path("maxModules")
            ),
            _ => format!("{path} holds {bytes} bytes of source, over {} ({})", f.path("maxModuleBytes"), limits.max_module_bytes),
        };
        return Err(err(&path, message));
    }
    Ok(())
}

/// A run's (or a sandbox's) `modules` may not name a module of the engine's prelude.
pub fn check_prelude_shadowing(path: &str, modules: &BTreeMap<String, String>, prelude_keys: &[String]) -> Result<(), OptionsError> {
    match modules.keys().find(|k| prelude_keys.contains(k)) {
        None => Ok(()),
        Some(key) => {
            let at = format!("{path}['{key}']");
            Err(err(&at, format!("{at} names a module of the engine's prelude (prelude.modules), which a run cannot replace")))
        }
    }
}

/// What the user gave of the limits `limits::DERIVED_LIMITS` relates (in order
/// `maxMessageBytes`, `maxPendingHostCallBytes`, `maxMessageValues`,
/// `maxPendingHostCallValues`), with the path they were given under, at this level or an
/// outer one (an engine's `defaultBridgeLimits` for its requests).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GivenBridge([Option<(u64, String)>; 4]);

pub(super) fn bridge_limits(
    f: &Fields,
    base: BridgeLimits,
    outer: &GivenBridge,
    names: [&str; 10],
) -> Result<(BridgeLimits, GivenBridge), OptionsError> {
    let [message, messages, output, entries, log_bytes, pending_bytes, pending_calls, output_values, message_values, pending_values] =
        names;
    let pick = |name: &str, base: u64| -> Result<u64, OptionsError> { Ok(f.whole(name)?.unwrap_or(base)) };
    let mut given = outer.clone();
    for (slot, name) in [message, pending_bytes, message_values, pending_values].into_iter().enumerate() {
        if let Some(v) = f.whole(name)? {
            given.0[slot] = Some((v, f.path(name)));
        }
    }
    let [bytes_rule, values_rule] = crate::limits::DERIVED_LIMITS else { unreachable!("two derived limits") };
    let (max_message_bytes, max_pending_host_call_bytes) =
        derived_pair(&given.0[0], &given.0[1], bytes_rule, DEFAULT_MAX_MESSAGE_BYTES as u64, MAX_PENDING_BYTES)?;
    let (max_message_values, max_pending_host_call_values) =
        derived_pair(&given.0[2], &given.0[3], values_rule, DEFAULT_MAX_MESSAGE_VALUES as u64, MAX_COUNT)?;
    let limits = BridgeLimits {
        max_output_values: pick(output_values, base.max_output_values as u64)? as u32,
        max_message_values: max_message_values as u32,
        max_pending_host_call_values: max_pending_host_call_values as u32,
        max_message_bytes: max_message_bytes as usize,
        max_messages: pick(messages, base.max_messages as u64)? as u32,
        max_output_bytes: pick(output, base.max_output_bytes as u64)? as usize,
        max_log_entries: pick(entries, base.max_log_entries as u64)? as usize,
        max_log_bytes: pick(log_bytes, base.max_log_bytes as u64)? as usize,
        max_pending_host_call_bytes: max_pending_host_call_bytes as usize,
        max_pending_host_calls: pick(pending_calls, base.max_pending_host_calls as u64)? as u32,
    };
    Ok((limits, given))
}

/// A limit and the one derived from it (`rule`), from what the user gave of them: given
/// one, the other follows it (the derived one `rule.factor` times the other; the other no
/// more than the derived one); given both, they must keep the rule, and the error names
/// both as the user wrote them.
fn derived_pair(
    source: &Option<(u64, String)>,
    derived: &Option<(u64, String)>,
    rule: &crate::limits::DerivedLimit,
    default_source: u64,
    max_derived: u64,
) -> Result<(u64, u64), OptionsError> {
    match (source, derived) {
        (Some((from, from_path)), Some((value, path))) => match rule.resolve(Some(*value), *from, max_derived) {
            Ok(v) => Ok((*from, v)),
            Err(e) => {
                let unit = e.limit.unit;
                let message = format!(
                    "{path} ({value} {unit}) must be at least {from_path} ({from} {unit}): one message must fit in what may be in flight. \
                     Give one of them and the other follows ({} is {} x {} unless given)",
                    rule.option, rule.factor, rule.from
                );
                Err(err(path, message))
            }
        },
        (Some((from, _)), None) => Ok((*from, rule.resolve(None, *from, max_derived).unwrap_or(max_derived))),
        (None, Some((value, _))) => Ok(((*value).min(default_source), *value)),
        (None, None) => Ok((default_source, rule.resolve(None, default_source, max_derived).unwrap_or(max_derived))),
    }
}

const VALUE_NAMES: [&str; 3] = ["maxOutputValues", "maxMessageValues", "maxPendingHostCallValues"];
pub(super) const BRIDGE_NAMES: [&str; 10] = [
    "maxMessageBytes",
    "maxMessages",
    "maxOutputBytes",
    "maxLogEntries",
    "maxLogBytes",
    "maxPendingHostCallBytes",
    "maxPendingHostCalls",
    VALUE_NAMES[0],
    VALUE_NAMES[1],
    VALUE_NAMES[2],
];
const RUN_SANDBOX_BRIDGE_NAMES: [&str; 10] = [
    "maxMessageBytes",
    "maxHostCalls",
    "maxOutputBytes",
    "maxLogEntries",
    "maxLogBytes",
    "maxPendingHostCallBytes",
    "maxPendingHostCalls",
    VALUE_NAMES[0],
    VALUE_NAMES[1],
    VALUE_NAMES[2],
];

pub(super) fn code_of(path: &str, code: &Raw) -> Result<String, OptionsError> {
    match code {
        Raw::String(s) => Ok(s.clone()),
        other => Err(err(path, format!("{path} must be a string, got {}", other.describe()))),
    }
}

pub(super) fn check_tool_names(path: &str, label: &str, names: &[String]) -> Result<(), OptionsError> {
    check_capability_names(names).map_err(|e| err(path, format!("{label} name: {e}")))
}

/// `runSandbox(code, options)`: the plan of one run. `options.capabilities` holds the
/// capability names (JS flattened the functions); given at all, the code is an async
/// function body (the seed's semantics).
pub fn run_sandbox(code: &Raw, options: &Raw) -> Result<RunPlan, OptionsError> {
    let code = code_of("code", code)?;
    let f = fields("", "runSandbox options", options, RUN_SANDBOX)?;
    run_sandbox_plan(&f, code, true)
}

/// The plan runSandbox's options make, which `createSandbox` shares (its runs start from
/// it): with `capabilities_make_body`, code given capabilities is an async function body.
pub(super) fn run_sandbox_plan(f: &Fields, code: String, capabilities_make_body: bool) -> Result<RunPlan, OptionsError> {
    let memory_mb = f.whole_or_default("memoryLimitMb")? as u32;
    let wall_time_ms = f.whole_or_default("timeoutMs")?;
    let cpu_time_ms = f.whole("cpuTimeMs")?;
    let (bridge, _) = bridge_limits(f, BridgeLimits::default(), &GivenBridge::default(), RUN_SANDBOX_BRIDGE_NAMES)?;
    let capabilities = f.names("capabilities")?;
    let tools = capabilities.clone().unwrap_or_default();
    check_tool_names("capabilities", "capability", &tools)?;
    let (is_module, modules, module_limits, module_resolver) = module_options(f)?;
    Ok(RunPlan {
        code,
        mode: if is_module {
            ExecMode::Module
        } else if capabilities_make_body && capabilities.is_some() {
            ExecMode::AsyncBody
        } else {
            ExecMode::Script
        },
        language: f.one_of("language")?.unwrap_or("javascript"),
        isolation: Some(Isolation::parse(f.one_of("isolation")?).unwrap_or(DEFAULT_ISOLATION)),
        limits: IsolateLimits { memory_mb, wall_time_ms, cpu_time_ms },
        bridge,
        max_calls: vec![None; tools.len()],
        tools,
        data_object: false,
        data_values: BTreeMap::new(),
        wasm: false,
        // A persistent sandbox keeps it for its life: its globals are installed by its first run.
        web: f.bool("web")?.unwrap_or(false),
        unhandled_rejections: UnhandledRejections::parse(f.one_of("unhandledRejections")?).unwrap_or_default(),
        stream_console: false,
        tenant: f.label("tenant")?,
        // A persistent sandbox's own map: every run may import from it (a run's plan
        // carries only the run's own map; see `sandbox_run`).
        modules,
        module_limits,
        module_resolver,
        max_queue_ms: f.whole("maxQueueMs")?,
        web_fetch: false,
    })
}

/// The language of a source file by its name: TypeScript for `.ts`, `.mts` and `.cts`.
pub fn language_of_file(path: &str) -> &'static str {
    let lower = path.to_ascii_lowercase();
    if [".ts", ".mts", ".cts"].iter().any(|ext| lower.ends_with(ext)) {
        "typescript"
    } else {
        "javascript"
    }
}
