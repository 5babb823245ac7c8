//! Every public option of isolet, validated once, under the names users type.
//!
//! Each entry point's options are a table of [`Opt`]: public name, kind, range, default,
//! and the other spellings it is accepted under (a seed's own name, for good; an old
//! spelling, deprecated: mapped to the name with a one-time warning, see
//! [`take_deprecations`]). JS hands over what the user wrote as a [`Raw`] tree (after type
//! shaping only: functions become tool names, `data` values become serialized bytes,
//! TypeScript is stripped later), and this module turns it into a checked, ready-to-run
//! [`RunPlan`] or [`EngineConfig`], or an [`OptionsError`] that names the option path and
//! the value given; an unknown name suggests the nearest known one. This is the "raw vs
//! derived" split of ripgrep's lowargs/hiargs: nothing downstream re-checks or re-defaults.
//! `docs/options.md` is rendered from the tables (`doc`).
use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::limits::{
    BridgeLimits, IsolateLimits, DEFAULT_CODE_CACHE_MB, DEFAULT_ENGINE_MEMORY_MB, DEFAULT_MAX_LOG_BYTES, DEFAULT_MAX_LOG_ENTRIES,
    DEFAULT_MAX_MESSAGES, DEFAULT_MAX_MESSAGE_BYTES, DEFAULT_MAX_MESSAGE_VALUES, DEFAULT_MAX_OUTPUT_BYTES, DEFAULT_MAX_OUTPUT_VALUES,
    DEFAULT_MAX_PENDING_HOST_CALLS, DEFAULT_MAX_PENDING_HOST_CALL_BYTES, DEFAULT_MAX_PENDING_HOST_CALL_VALUES, DEFAULT_RUN_MEMORY_MB,
    DEFAULT_WALL_TIME_MS, MAX_CODE_CACHE_MB, MAX_MEMORY_MB, MAX_PRELUDE_BYTES, MAX_TIME_MS, MIN_MEMORY_MB,
};
use crate::modules::ModuleLimits;
use crate::names::{check_capability_names, check_global_name};

pub mod doc;

/// A JS value as the user gave it, after JS's type shaping.
#[derive(Debug, Clone, PartialEq)]
pub enum Raw {
    Undefined,
    Null,
    Bool(bool),
    Number(f64),
    String(String),
    /// A Uint8Array, Buffer or ArrayBuffer (serialized `data` values, WASM sources), by
    /// its length: only its type is checked here, so its bytes are never copied for that.
    Bytes(usize),
    Array(Vec<Raw>),
    /// Own enumerable string-keyed properties, in order.
    Object(Vec<(String, Raw)>),
    Function,
    /// Anything else (symbol, bigint, ...), by its `typeof`.
    Other(&'static str),
    /// A value whose read threw (a getter, a Proxy trap), with what it threw: an option
    /// that cannot be read is a bad option, named like any other.
    Unreadable(String),
}

impl Raw {
    /// The value as a message shows it: `-5`, `'vm'`, `null`, `an object`.
    pub fn describe(&self) -> String {
        match self {
            Raw::Undefined => "undefined".into(),
            Raw::Null => "null".into(),
            Raw::Bool(b) => b.to_string(),
            Raw::Number(n) => js_number(*n),
            Raw::String(s) => {
                let mut short: String = s.chars().take(60).collect();
                if short.len() < s.len() {
                    short.push('…');
                }
                format!("'{short}'")
            }
            Raw::Bytes(_) => "a Uint8Array".into(),
            Raw::Array(_) => "an array".into(),
            Raw::Object(_) => "an object".into(),
            Raw::Function => "a function".into(),
            Raw::Other(t) => format!("a {t}"),
            Raw::Unreadable(why) => format!("a value that could not be read ({why})"),
        }
    }

    fn is_undefined(&self) -> bool {
        matches!(self, Raw::Undefined)
    }
}

fn js_number(n: f64) -> String {
    if n.is_nan() {
        "NaN".into()
    } else if n.is_infinite() {
        if n > 0.0 {
            "Infinity".into()
        } else {
            "-Infinity".into()
        }
    } else if n.fract() == 0.0 && n.abs() < 1e21 {
        format!("{}", n as i128)
    } else {
        format!("{n}")
    }
}

/// What an option accepts.
#[derive(Debug, Clone, Copy)]
pub enum Kind {
    /// A whole number in `min..=max`.
    Whole { min: u64, max: u64 },
    /// One of these strings.
    OneOf(&'static [&'static str]),
    /// A string.
    Text,
    /// A non-empty string of at most `max_bytes` UTF-8 bytes.
    Label { max_bytes: usize },
    /// An array of strings.
    Names,
    /// An object of host functions by name (`capabilities`, `tools`): JS hands over their
    /// names, which are checked as an array of names.
    Tools,
    /// A plain object with these options.
    Object(&'static [Opt]),
    /// An object of whole numbers in `0..=max`, keyed by tool name.
    CountMap { max: u64 },
    /// An object of serialized values (`data`), keyed by property name.
    BytesMap,
    /// An array of `{ name, source }` WebAssembly modules.
    WasmModules,
    /// Shaped and checked in JS, accepted as given; what it is, for docs (`an AbortSignal`).
    Shaped(&'static str),
    /// `true` or `false`.
    Bool,
    /// A function (a callback the entry point calls).
    Function,
    /// An object of module sources (strings), keyed by module key (`modules`).
    ModuleMap,
    /// An engine's prelude: a source string, or `{ source?, modules? }` ([`PRELUDE`]).
    Prelude,
}

/// One public option: its name, kind, default (for whole numbers), the other spellings
/// it is accepted under, and the names it is known by elsewhere, for suggestions.
#[derive(Debug, Clone, Copy)]
pub struct Opt {
    pub name: &'static str,
    pub kind: Kind,
    pub default: Option<u64>,
    /// A seed's own name for it (SandboxEngine's `memoryMb`): accepted for good, no warning.
    pub seed_names: &'static [&'static str],
    /// Old spellings: accepted this release as the option, each with a one-time warning
    /// naming `name` ([`take_deprecations`]).
    pub deprecated: &'static [&'static str],
    /// Names it is known by elsewhere (other option sets): never accepted, only suggested.
    pub aliases: &'static [&'static str],
}

const fn opt(name: &'static str, kind: Kind) -> Opt {
    Opt { name, kind, default: None, seed_names: &[], deprecated: &[], aliases: &[] }
}

const fn whole(name: &'static str, min: u64, max: u64, default: Option<u64>, aliases: &'static [&'static str]) -> Opt {
    Opt { default, aliases, ..opt(name, Kind::Whole { min, max }) }
}

impl Opt {
    const fn aliases(self, aliases: &'static [&'static str]) -> Opt {
        Opt { aliases, ..self }
    }

    const fn seed_names(self, seed_names: &'static [&'static str]) -> Opt {
        Opt { seed_names, ..self }
    }

    const fn deprecated(self, deprecated: &'static [&'static str]) -> Opt {
        Opt { deprecated, ..self }
    }

    /// How `key` spells this option, if it does.
    fn spelling(&self, key: &str) -> Option<Spelling> {
        if self.name == key {
            Some(Spelling::Name)
        } else if self.seed_names.contains(&key) {
            Some(Spelling::Seed)
        } else if self.deprecated.contains(&key) {
            Some(Spelling::Deprecated)
        } else {
            None
        }
    }
}

/// How a given key spells its option.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Spelling {
    Name,
    Seed,
    Deprecated,
}

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
const UNHANDLED_REJECTIONS_OPT: Opt =
    opt("unhandledRejections", Kind::OneOf(UNHANDLED_REJECTIONS)).aliases(&["unhandledRejection", "onUnhandledRejection"]);
/// Most modules a run may be allowed (`maxModules`).
const MAX_MODULES_LIMIT: u64 = 100_000;

const MAX_BYTES: u64 = 1 << 30;
/// Largest accepted in-flight byte budget: 16 GiB.
const MAX_PENDING_BYTES: u64 = 1 << 34;
const MAX_LOG_ENTRIES: u64 = 1_000_000;
const MAX_PENDING_CALLS: u64 = 1_000_000;
const MAX_COUNT: u64 = u32::MAX as u64;
const MEM: (u64, u64) = (MIN_MEMORY_MB as u64, MAX_MEMORY_MB as u64);

/// Default CPU-time limit of an engine request (`DEFAULT_ISOLATE_LIMITS.cpuTimeMs`).
pub const DEFAULT_REQUEST_CPU_TIME_MS: u64 = 5_000;
/// Default wall-clock limit of an engine request (`DEFAULT_ISOLATE_LIMITS.wallTimeMs`).
pub const DEFAULT_REQUEST_WALL_TIME_MS: u64 = 30_000;
/// Default `isolation` of `runSandbox` and `SandboxEngine`: a process boundary.
pub const DEFAULT_ISOLATION: Isolation = Isolation::Process;
/// Longest `tenant`, in UTF-8 bytes: the engine keeps counts per tenant name.
pub const MAX_TENANT_BYTES: usize = 256;
/// `idleTimeoutMs` of a persistent sandbox unless it says otherwise: an open sandbox keeps
/// its memory (and in process mode a host process) while nobody uses it, so one that is
/// forgotten is closed after 10 minutes without a run rather than never.
pub const DEFAULT_SANDBOX_IDLE_TIMEOUT_MS: u64 = 600_000;
/// Most open sandboxes an engine may be configured to allow (`maxOpenSandboxes`).
const MAX_OPEN_SANDBOXES: u64 = 100_000;

/// The bridge limits, shared by `defaultBridgeLimits` and a request's `bridgeLimits`.
pub const BRIDGE_LIMITS: &[Opt] = &[
    whole("maxMessageBytes", 1, MAX_BYTES, Some(DEFAULT_MAX_MESSAGE_BYTES as u64), &[]),
    whole("maxMessages", 0, MAX_COUNT, Some(DEFAULT_MAX_MESSAGES as u64), &["maxHostCalls"]),
    whole("maxOutputBytes", 1, MAX_BYTES, Some(DEFAULT_MAX_OUTPUT_BYTES as u64), &[]),
    whole("maxLogEntries", 0, MAX_LOG_ENTRIES, Some(DEFAULT_MAX_LOG_ENTRIES as u64), &[]),
    whole("maxLogBytes", 1, MAX_BYTES, Some(DEFAULT_MAX_LOG_BYTES as u64), &[]),
    whole("maxPendingHostCallBytes", 1, MAX_PENDING_BYTES, Some(DEFAULT_MAX_PENDING_HOST_CALL_BYTES as u64), &[]),
    whole("maxPendingHostCalls", 1, MAX_PENDING_CALLS, Some(DEFAULT_MAX_PENDING_HOST_CALLS as u64), &[]),
    whole("maxOutputValues", 1, MAX_COUNT, Some(DEFAULT_MAX_OUTPUT_VALUES as u64), &[]),
    whole("maxMessageValues", 1, MAX_COUNT, Some(DEFAULT_MAX_MESSAGE_VALUES as u64), &[]),
    whole("maxPendingHostCallValues", 1, MAX_COUNT, Some(DEFAULT_MAX_PENDING_HOST_CALL_VALUES as u64), &[]),
];

/// `defaultIsolateLimits` and a request's `isolateLimits`. `memoryMb` has no default
/// here: it falls back to the engine's `memoryMb` (the memory of its warm isolates).
pub const ISOLATE_LIMITS: &[Opt] = &[
    whole("memoryMb", MEM.0, MEM.1, None, &["memoryLimitMb"]),
    whole("cpuTimeMs", 1, MAX_TIME_MS, Some(DEFAULT_REQUEST_CPU_TIME_MS), &[]),
    whole("wallTimeMs", 1, MAX_TIME_MS, Some(DEFAULT_REQUEST_WALL_TIME_MS), &["timeoutMs", "timeout"]),
    // A run's own (none: the engine's, `queue::DEFAULT_MAX_QUEUE_MS`); 0: start now or fail.
    whole("maxQueueMs", 0, MAX_TIME_MS, None, &["queueTimeoutMs"]),
];

/// `runSandbox(code, options)`.
pub const RUN_SANDBOX: &[Opt] = &[
    whole("memoryLimitMb", MEM.0, MEM.1, Some(DEFAULT_RUN_MEMORY_MB as u64), &["memoryMb", "memoryLimit"]),
    whole("timeoutMs", 1, MAX_TIME_MS, Some(DEFAULT_WALL_TIME_MS), &["wallTimeMs", "timeout"]),
    whole("cpuTimeMs", 1, MAX_TIME_MS, None, &[]),
    whole("maxOutputBytes", 1, MAX_BYTES, Some(DEFAULT_MAX_OUTPUT_BYTES as u64), &[]),
    whole("maxMessageBytes", 1, MAX_BYTES, Some(DEFAULT_MAX_MESSAGE_BYTES as u64), &[]),
    whole("maxHostCalls", 0, MAX_COUNT, Some(DEFAULT_MAX_MESSAGES as u64), &["maxMessages"]),
    whole("maxLogEntries", 0, MAX_LOG_ENTRIES, Some(DEFAULT_MAX_LOG_ENTRIES as u64), &[]),
    whole("maxLogBytes", 1, MAX_BYTES, Some(DEFAULT_MAX_LOG_BYTES as u64), &[]),
    whole("maxPendingHostCallBytes", 1, MAX_PENDING_BYTES, Some(DEFAULT_MAX_PENDING_HOST_CALL_BYTES as u64), &[]),
    whole("maxPendingHostCalls", 1, MAX_PENDING_CALLS, Some(DEFAULT_MAX_PENDING_HOST_CALLS as u64), &[]),
    whole("maxOutputValues", 1, MAX_COUNT, Some(DEFAULT_MAX_OUTPUT_VALUES as u64), &[]),
    whole("maxMessageValues", 1, MAX_COUNT, Some(DEFAULT_MAX_MESSAGE_VALUES as u64), &[]),
    whole("maxPendingHostCallValues", 1, MAX_COUNT, Some(DEFAULT_MAX_PENDING_HOST_CALL_VALUES as u64), &[]),
    opt("isolation", Kind::OneOf(ISOLATION_MODES)),
    opt("language", Kind::OneOf(LANGUAGES)),
    opt("capabilities", Kind::Tools).aliases(&["tools"]),
    opt("signal", Kind::Shaped("an AbortSignal")),
    opt("tenant", Kind::Label { max_bytes: MAX_TENANT_BYTES }),
    opt("type", Kind::OneOf(CODE_TYPES)),
    opt("modules", Kind::ModuleMap),
    opt("resolve", Kind::Function),
    whole("maxModules", 1, MAX_MODULES_LIMIT, Some(crate::modules::DEFAULT_MAX_MODULES as u64), &[]),
    whole("maxModuleBytes", 1, MAX_BYTES, Some(crate::modules::DEFAULT_MAX_MODULE_BYTES), &[]),
    // A run's own (none: the engine's, `queue::DEFAULT_MAX_QUEUE_MS`); 0: start now or fail.
    whole("maxQueueMs", 0, MAX_TIME_MS, None, &["queueTimeoutMs"]),
    opt("web", Kind::Bool),
    UNHANDLED_REJECTIONS_OPT,
];

/// `new SandboxEngine(config)`.
pub const ENGINE_CONFIG: &[Opt] = &[
    whole("memoryLimitMb", MEM.0, MEM.1, Some(DEFAULT_ENGINE_MEMORY_MB as u64), &[]).seed_names(&["memoryMb"]),
    whole("maxConcurrentIsolates", 1, 1024, Some(4), &["maxConcurrency", "concurrency"]),
    whole("warmPoolSize", 0, 256, Some(0), &["warmPool"]),
    whole("maxQueueSize", 0, 1_000_000, Some(1000), &["queueSize"]),
    whole("processes", 1, 64, Some(2), &[]),
    whole("maxQueueMs", 0, MAX_TIME_MS, Some(crate::queue::DEFAULT_MAX_QUEUE_MS), &["queueTimeoutMs"]),
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
    opt("tenant", Kind::Label { max_bytes: MAX_TENANT_BYTES }),
    opt("type", Kind::OneOf(CODE_TYPES)),
    opt("modules", Kind::ModuleMap),
    opt("resolve", Kind::Function),
    whole("maxModules", 1, MAX_MODULES_LIMIT, Some(crate::modules::DEFAULT_MAX_MODULES as u64), &[]),
    whole("maxModuleBytes", 1, MAX_BYTES, Some(crate::modules::DEFAULT_MAX_MODULE_BYTES), &[]),
    opt("web", Kind::Bool),
    UNHANDLED_REJECTIONS_OPT,
];

/// One entry of `wasmModules`.
const WASM_MODULE: &[Opt] =
    &[opt("name", Kind::Text), opt("source", Kind::Shaped("a Uint8Array or ArrayBuffer")).aliases(&["bytes", "module"])];

/// An option was not acceptable. `path` is the option as the user wrote it
/// (`timeoutMs`, `request.isolateLimits.wallTimeMs`, `wasmModules[1].name`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionsError {
    pub path: String,
    pub message: String,
}

impl fmt::Display for OptionsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for OptionsError {}

fn err(path: &str, message: String) -> OptionsError {
    OptionsError { path: path.to_string(), message }
}

/// The first value under `raw` (at `path`) that could not be read, as the error that
/// names it: a throwing getter deep in an option is reported under its own path, before
/// any check that would describe its parent instead.
pub fn unreadable(path: &str, raw: &Raw) -> Option<OptionsError> {
    match raw {
        Raw::Unreadable(why) => {
            let name = if path.is_empty() { "options" } else { path };
            Some(err(name, format!("{name} could not be read: {why}")))
        }
        Raw::Array(items) => items.iter().enumerate().find_map(|(i, v)| unreadable(&format!("{path}[{i}]"), v)),
        Raw::Object(entries) => entries.iter().find_map(|(k, v)| unreadable(&join(path, k), v)),
        _ => None,
    }
}

fn join(prefix: &str, name: &str) -> String {
    if prefix.is_empty() {
        name.to_string()
    } else {
        format!("{prefix}.{name}")
    }
}

/// The nearest known name to `given`, if one is close: same letters in another case, a
/// common stem (`maxConcurrency` -> `maxConcurrentIsolates`), a small edit distance, or a
/// known alias (`wallTimeMs` -> `timeoutMs` in runSandbox).
pub fn suggest(given: &str, table: &[Opt]) -> Option<&'static str> {
    if let Some(o) = table.iter().find(|o| o.aliases.iter().any(|a| a.eq_ignore_ascii_case(given))) {
        return Some(o.name);
    }
    nearest(given, table.iter().map(|o| o.name))
}

/// The nearest of `names` to `given` by spelling alone (no aliases), if one is close.
pub fn nearest<'n>(given: &str, names: impl IntoIterator<Item = &'n str>) -> Option<&'n str> {
    let g = given.to_ascii_lowercase();
    let mut best: Option<(usize, &'n str)> = None;
    for name in names {
        let k = name.to_ascii_lowercase();
        let distance = edit_distance(&g, &k);
        let prefix = g.bytes().zip(k.bytes()).take_while(|(a, b)| a == b).count();
        let shorter = g.len().min(k.len());
        let close = distance <= (k.len() / 3).max(2) || (prefix >= 4 && prefix * 5 >= shorter * 3);
        if close && best.is_none_or(|(d, _)| distance < d) {
            best = Some((distance, name));
        }
    }
    best.map(|(_, name)| name)
}

fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<u8> = b.bytes().collect();
    let mut row: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.bytes().enumerate() {
        let mut prev = row[0];
        row[0] = i + 1;
        for (j, &cb) in b.iter().enumerate() {
            let cur = row[j + 1];
            row[j + 1] = (prev + usize::from(ca != cb)).min(row[j] + 1).min(cur + 1);
            prev = cur;
        }
    }
    row[b.len()]
}

/// The code of the warning an old spelling gets.
pub const DEPRECATED_NAME_CODE: &str = "ISOLET_DEP_OPTION_NAME";

thread_local! {
    /// What this thread's checks met of old spellings since `take_deprecations`.
    static MET: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

/// The warnings reported so far in this process: each is reported once.
#[derive(Debug, Default)]
pub(crate) struct Reported(std::collections::HashSet<String>);

static REPORTED: std::sync::Mutex<Option<Reported>> = std::sync::Mutex::new(None);

/// Records an old spelling's warning for `take_deprecations`.
fn meet_deprecated(message: String) {
    MET.with(|met| met.borrow_mut().push(message));
}

/// `isolet: <old> ... is deprecated; use <new>`: the warning of an old option spelling.
fn deprecation(old: &str, what: &str, new: &str) -> String {
    format!("isolet: `{old}` of {what} is deprecated; use `{new}`")
}

/// The warnings (DeprecationWarning, code [`DEPRECATED_NAME_CODE`]) for the old spellings
/// this thread's checks met since the last call, each only the first time in the process:
/// the binding emits them after every check.
pub fn take_deprecations() -> Vec<String> {
    if MET.with(|met| met.borrow().is_empty()) {
        return Vec::new();
    }
    let mut reported = REPORTED.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    take_deprecations_into(reported.get_or_insert_with(Reported::default))
}

/// `take_deprecations` against `reported`.
pub(crate) fn take_deprecations_into(reported: &mut Reported) -> Vec<String> {
    let met = MET.with(|met| std::mem::take(&mut *met.borrow_mut()));
    met.into_iter().filter(|m| reported.0.insert(m.clone())).collect()
}

/// The checked fields of one options object: each option with the key it was given under.
#[derive(Debug)]
struct Fields<'a> {
    prefix: String,
    table: &'static [Opt],
    values: Vec<(&'static Opt, &'a str, &'a Raw)>,
}

/// Checks that `raw` is an object (or absent) holding only options of `table`.
/// `what` names the object in messages when it is not one (`options`, `request`).
fn fields<'a>(prefix: &str, what: &str, raw: &'a Raw, table: &'static [Opt]) -> Result<Fields<'a>, OptionsError> {
    if let Raw::Unreadable(why) = raw {
        let name = if prefix.is_empty() { what } else { prefix };
        return Err(err(name, format!("{name} could not be read: {why}")));
    }
    let entries: &[(String, Raw)] = match raw {
        Raw::Undefined => &[],
        Raw::Object(entries) => entries,
        other => return Err(err(prefix, format!("{what} must be an object, got {}", other.describe()))),
    };
    let mut values: Vec<(&'static Opt, &'a str, &'a Raw)> = Vec::new();
    let mut deprecated = Vec::new();
    for (key, value) in entries {
        let Some((o, spelling)) = table.iter().find_map(|o| Some((o, o.spelling(key)?))) else {
            let path = join(prefix, key);
            let hint = match suggest(key, table) {
                Some(near) => format!("did you mean {}?", join(prefix, near)),
                None => format!("known options: {}", table.iter().map(|o| o.name).collect::<Vec<_>>().join(", ")),
            };
            return Err(err(&path, format!("{path} is not a known option of {what}; {hint}")));
        };
        if let Some(e) = unreadable(&join(prefix, key), value) {
            return Err(e);
        }
        if value.is_undefined() {
            continue;
        }
        if let Some((_, other, _)) = values.iter().find(|(seen, other, _)| std::ptr::eq(*seen, o) && *other != key) {
            return Err(both_given(&join(prefix, other), &join(prefix, key), &join(prefix, o.name), what));
        }
        if spelling == Spelling::Deprecated {
            deprecated.push(deprecation(&join(prefix, key), what, &join(prefix, o.name)));
        }
        values.push((o, key, value));
    }
    // Met once the names are right: two spellings of one option are an error, not a warning.
    deprecated.into_iter().for_each(meet_deprecated);
    Ok(Fields { prefix: prefix.to_string(), table, values })
}

/// Two spellings of one option given together (`first` and `second`, as given).
fn both_given(first: &str, second: &str, name: &str, what: &str) -> OptionsError {
    err(second, format!("{first} and {second} are the same option of {what}: give only {name}"))
}

impl<'a> Fields<'a> {
    fn get(&self, name: &str) -> Option<&'a Raw> {
        debug_assert!(self.table.iter().any(|o| o.name == name), "{name} is not in the table");
        self.values.iter().find(|(o, _, _)| o.name == name).map(|(_, _, v)| *v)
    }

    /// The key option `name` was given under, if given.
    fn key(&self, name: &str) -> Option<&'a str> {
        self.values.iter().find(|(o, _, _)| o.name == name).map(|(_, key, _)| *key)
    }

    /// The option's path as the user wrote it (its name if not given).
    fn path(&self, name: &str) -> String {
        join(&self.prefix, self.key(name).unwrap_or(name))
    }

    fn opt(&self, name: &str) -> &'static Opt {
        self.table.iter().find(|o| o.name == name).expect("option in table")
    }

    /// A whole number in the option's range, or `None` if absent.
    fn whole(&self, name: &str) -> Result<Option<u64>, OptionsError> {
        let Kind::Whole { min, max } = self.opt(name).kind else { unreachable!("{name} is not a number") };
        let Some(v) = self.get(name) else { return Ok(None) };
        match v {
            Raw::Number(n) if n.is_finite() && n.fract() == 0.0 && *n >= min as f64 && *n <= max as f64 => Ok(Some(*n as u64)),
            _ => {
                let path = self.path(name);
                Err(err(&path, format!("{path} must be a whole number from {min} to {max}, got {}", v.describe())))
            }
        }
    }

    /// A whole number, or the table's default.
    fn whole_or_default(&self, name: &str) -> Result<u64, OptionsError> {
        Ok(self.whole(name)?.or(self.opt(name).default).expect("option has a default"))
    }

    fn one_of(&self, name: &str) -> Result<Option<&'static str>, OptionsError> {
        let Kind::OneOf(choices) = self.opt(name).kind else { unreachable!("{name} is not a choice") };
        let Some(v) = self.get(name) else { return Ok(None) };
        if let Raw::String(s) = v {
            if let Some(c) = choices.iter().find(|c| **c == s) {
                return Ok(Some(c));
            }
        }
        let path = self.path(name);
        let list = choices.iter().map(|c| format!("'{c}'")).collect::<Vec<_>>();
        let list = match list.split_last() {
            Some((last, rest)) if !rest.is_empty() => format!("{} or {last}", rest.join(", ")),
            _ => list.join(""),
        };
        Err(err(&path, format!("{path} must be {list}, got {}", v.describe())))
    }

    fn text(&self, name: &str) -> Result<Option<&'a str>, OptionsError> {
        match self.get(name) {
            None => Ok(None),
            Some(Raw::String(s)) => Ok(Some(s)),
            Some(v) => {
                let path = self.path(name);
                Err(err(&path, format!("{path} must be a string, got {}", v.describe())))
            }
        }
    }

    fn label(&self, name: &str) -> Result<Option<String>, OptionsError> {
        let Kind::Label { max_bytes } = self.opt(name).kind else { unreachable!("{name} is not a label") };
        let got = match self.get(name) {
            None => return Ok(None),
            Some(Raw::String(s)) if !s.is_empty() && s.len() <= max_bytes => return Ok(Some(s.clone())),
            // The length is what is wrong, not the (cut) text.
            Some(Raw::String(s)) if !s.is_empty() => format!("{} bytes", s.len()),
            Some(v) => v.describe(),
        };
        let path = self.path(name);
        Err(err(&path, format!("{path} must be a non-empty string of at most {max_bytes} bytes, got {got}")))
    }

    fn names(&self, name: &str) -> Result<Option<Vec<String>>, OptionsError> {
        let Some(v) = self.get(name) else { return Ok(None) };
        let path = self.path(name);
        let bad = || err(&path, format!("{path} must be an array of names, got {}", v.describe()));
        let Raw::Array(items) = v else { return Err(bad()) };
        items
            .iter()
            .map(|i| match i {
                Raw::String(s) => Ok(s.clone()),
                _ => Err(bad()),
            })
            .collect::<Result<Vec<_>, _>>()
            .map(Some)
    }

    fn object(&self, name: &str) -> Result<Fields<'a>, OptionsError> {
        let Kind::Object(table) = self.opt(name).kind else { unreachable!("{name} is not an object") };
        let path = self.path(name);
        fields(&path, &path, self.get(name).unwrap_or(&Raw::Undefined), table)
    }
}

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

    fn parse(s: Option<&str>) -> Option<Isolation> {
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
fn module_options(f: &Fields) -> Result<(bool, BTreeMap<String, String>, ModuleLimits, bool), OptionsError> {
    let is_module = f.one_of("type")? == Some("module");
    let limits =
        ModuleLimits { max_modules: f.whole_or_default("maxModules")? as u32, max_module_bytes: f.whole_or_default("maxModuleBytes")? };
    let modules = module_map(f, "modules")?;
    check_module_map(f, &modules, limits)?;
    Ok((is_module, modules, limits, f.function("resolve")?))
}

/// A map of module sources (`modules`, `prelude.modules`), by normalized key.
fn module_map(f: &Fields, name: &str) -> Result<BTreeMap<String, String>, OptionsError> {
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
fn check_module_map(f: &Fields, modules: &BTreeMap<String, String>, limits: ModuleLimits) -> Result<(), OptionsError> {
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

fn bridge_limits(
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
const BRIDGE_NAMES: [&str; 10] = [
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

fn code_of(path: &str, code: &Raw) -> Result<String, OptionsError> {
    match code {
        Raw::String(s) => Ok(s.clone()),
        other => Err(err(path, format!("{path} must be a string, got {}", other.describe()))),
    }
}

fn check_tool_names(path: &str, label: &str, names: &[String]) -> Result<(), OptionsError> {
    check_capability_names(names).map_err(|e| err(path, format!("{label} name: {e}")))
}

/// `runSandbox(code, options)`: the plan of one run. `options.capabilities` holds the
/// capability names (JS flattened the functions); given at all, the code is an async
/// function body (the seed's semantics).
pub fn run_sandbox(code: &Raw, options: &Raw) -> Result<RunPlan, OptionsError> {
    let code = code_of("code", code)?;
    let f = fields("", "runSandbox options", options, RUN_SANDBOX)?;
    let memory_mb = f.whole_or_default("memoryLimitMb")? as u32;
    let wall_time_ms = f.whole_or_default("timeoutMs")?;
    let cpu_time_ms = f.whole("cpuTimeMs")?;
    let (bridge, _) = bridge_limits(&f, BridgeLimits::default(), &GivenBridge::default(), RUN_SANDBOX_BRIDGE_NAMES)?;
    let capabilities = f.names("capabilities")?;
    let tools = capabilities.clone().unwrap_or_default();
    check_tool_names("capabilities", "capability", &tools)?;
    let (is_module, modules, module_limits, module_resolver) = module_options(&f)?;
    Ok(RunPlan {
        code,
        mode: if is_module {
            ExecMode::Module
        } else if capabilities.is_some() {
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
        web: f.bool("web")?.unwrap_or(false),
        unhandled_rejections: UnhandledRejections::parse(f.one_of("unhandledRejections")?).unwrap_or_default(),
        stream_console: false,
        tenant: f.label("tenant")?,
        modules,
        module_limits,
        module_resolver,
        max_queue_ms: f.whole("maxQueueMs")?,
        web_fetch: false,
    })
}

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
    whole("idleTimeoutMs", 1, MAX_TIME_MS, Some(DEFAULT_SANDBOX_IDLE_TIMEOUT_MS), &["idleMs", "idleTimeout"]),
    whole("maxTotalHostCalls", 0, MAX_COUNT, None, &["totalHostCalls"]),
];

/// `sandbox.run(code, options)` of a persistent sandbox (and the run of `sandbox.call`).
/// `modules` join the sandbox's own for this run; `maxModules` and `maxModuleBytes` are
/// the sandbox's (its module graph's, for its life).
pub const SANDBOX_RUN: &[Opt] = &[
    whole("timeoutMs", 1, MAX_TIME_MS, None, &["wallTimeMs", "timeout"]),
    whole("cpuTimeMs", 1, MAX_TIME_MS, None, &[]),
    opt("language", Kind::OneOf(LANGUAGES)),
    opt("signal", Kind::Shaped("an AbortSignal")),
    opt("type", Kind::OneOf(CODE_TYPES)),
    opt("modules", Kind::ModuleMap),
    opt("resolve", Kind::Function),
    // A run's own (none: the engine's, `queue::DEFAULT_MAX_QUEUE_MS`); 0: start now or fail.
    whole("maxQueueMs", 0, MAX_TIME_MS, None, &["queueTimeoutMs"]),
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
    let (bridge, _) = bridge_limits(&f, BridgeLimits::default(), &GivenBridge::default(), RUN_SANDBOX_BRIDGE_NAMES)?;
    let tools = f.names("capabilities")?.unwrap_or_default();
    check_tool_names("capabilities", "capability", &tools)?;
    let (is_module, modules, module_limits, module_resolver) = module_options(&f)?;
    let base = RunPlan {
        code: String::new(),
        // A classic script by default, so that declarations land in the context's global
        // scope; `type: 'module'` makes each run a module unless the run says otherwise.
        mode: if is_module { ExecMode::Module } else { ExecMode::Script },
        language: f.one_of("language")?.unwrap_or("javascript"),
        isolation: Some(Isolation::parse(f.one_of("isolation")?).unwrap_or(DEFAULT_ISOLATION)),
        limits: IsolateLimits {
            memory_mb: f.whole_or_default("memoryLimitMb")? as u32,
            wall_time_ms: f.whole_or_default("timeoutMs")?,
            cpu_time_ms: f.whole("cpuTimeMs")?,
        },
        bridge,
        max_calls: vec![None; tools.len()],
        tools,
        data_object: false,
        data_values: BTreeMap::new(),
        wasm: false,
        // Kept for the sandbox's life: its globals are installed by its first run.
        web: f.bool("web")?.unwrap_or(false),
        // Each run's unless it says otherwise.
        unhandled_rejections: UnhandledRejections::parse(f.one_of("unhandledRejections")?).unwrap_or_default(),
        stream_console: false,
        tenant: f.label("tenant")?,
        // The sandbox's own map: every run may import from it (a run's plan carries only
        // the run's own map; see `sandbox_run`).
        modules,
        module_limits,
        module_resolver,
        max_queue_ms: f.whole("maxQueueMs")?,
        web_fetch: false,
    };
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            (e.path.as_str(), e.message.as_str()),
            ("prelude", "prelude must be a string or an object { source?, modules? }, got 1")
        );
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
            obj(&[
                ("source", s("var x = 1")),
                ("modules", mods(&[("./lib/a.js", s("export const a = 1")), ("zod", s("export default 1"))])),
            ]),
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
        let e =
            EngineConfig::from_raw(&obj(&[("prelude", obj(&[("source", s(&big)), ("modules", mods(&[("a.js", s(&big))]))]))])).unwrap_err();
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
            run_sandbox(&code(), &obj(&[("web", Raw::Bool(true)), ("capabilities", Raw::Array(vec![Raw::String("fetch".into())]))]))
                .unwrap();
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
            x.message.starts_with("defaultBridgeLimits.maxPendingHostCallBytes (5000 bytes) must be at least request.bridgeLimits.maxMessageBytes (6000 bytes)"),
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
        assert!(EngineConfig::from_raw(&obj(&[("maxSandboxes", num(3.0))]))
            .unwrap_err()
            .message
            .ends_with("did you mean maxOpenSandboxes?"));
        // maxQueueMs: the engine's own wins over defaultIsolateLimits', as memoryMb does.
        let limits = |ms: f64| obj(&[("maxQueueMs", num(ms))]);
        assert_eq!(EngineConfig::from_raw(&obj(&[("defaultIsolateLimits", limits(700.0))])).unwrap().max_queue_ms, 700);
        assert_eq!(
            EngineConfig::from_raw(&obj(&[("maxQueueMs", num(0.0)), ("defaultIsolateLimits", limits(700.0))])).unwrap().max_queue_ms,
            0
        );
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
}

// The other entry points: the CLI (`isolet run`, `isolet mcp`, `isolet autofix`), Code
// Mode's `IsoletExecutor`, `autoFix(options)`, the MCP tool's arguments and the capability
// factories. Each has a table under its own names; what they share with runSandbox and
// the engine (time, memory, language, isolation) takes its range from the same constants.

/// A command-line flag and the option of its command's table that it sets: the flag is
/// the option's name in kebab-case (`--timeout-ms`), but for `--no-web` and the `http-`
/// of `isolet mcp`'s HTTP flags, which set the config file's `http` object.
#[derive(Debug, Clone, Copy)]
pub struct Flag {
    /// Without the leading `--`.
    pub flag: &'static str,
    pub option: &'static str,
    /// Old spellings of the flag: accepted this release, each with a one-time warning.
    pub deprecated: &'static [&'static str],
}

const fn flag(flag: &'static str, option: &'static str) -> Flag {
    Flag { flag, option, deprecated: &[] }
}

impl Flag {
    const fn deprecated(self, deprecated: &'static [&'static str]) -> Flag {
        Flag { deprecated, ..self }
    }
}

/// Isolates the CLI's engine runs at once unless its `engine` config says otherwise.
pub const CLI_MAX_CONCURRENT_ISOLATES: u64 = 2;
/// Warm isolates of the CLI's engine unless its `engine` config says otherwise.
pub const CLI_WARM_POOL_SIZE: u64 = 1;

/// `isolet run` and `isolet mcp`, as `--config` keys (`CLI_FLAGS` are the flags).
/// `cpuTimeMs` has no default of its own: it is the wall-clock limit.
pub const CLI_SETTINGS: &[Opt] = &[
    whole("timeoutMs", 1, MAX_TIME_MS, Some(DEFAULT_WALL_TIME_MS), &["wallTimeMs", "timeout"]),
    whole("cpuTimeMs", 1, MAX_TIME_MS, None, &[]),
    whole("memoryLimitMb", MEM.0, MEM.1, Some(DEFAULT_RUN_MEMORY_MB as u64), &["memory"]).deprecated(&["memoryMb"]),
    opt("language", Kind::OneOf(LANGUAGES)),
    opt("isolation", Kind::OneOf(ISOLATION_MODES)),
    opt("readDir", Kind::Text),
    opt("allowedOrigins", Kind::Names).deprecated(&["allowOrigins"]),
    // The web platform APIs in the runs (docs/web.md); on unless `false` (`--no-web`).
    opt("web", Kind::Bool),
    opt("engine", Kind::Object(ENGINE_CONFIG)),
    // `isolet mcp --http`'s settings; `isolet run` takes the key and ignores it, so that
    // one file can serve both commands.
    opt("http", Kind::Object(MCP_HTTP)),
    // `isolet mcp`: one persistent sandbox per MCP session (`isolet run` ignores them).
    opt("stateful", Kind::Bool),
    whole("idleTimeoutMs", 1, MAX_TIME_MS, None, &["sandboxIdleMs"]).deprecated(&["statefulIdleMs"]),
    UNHANDLED_REJECTIONS_OPT,
];

/// The flags of `isolet run` and `isolet mcp` that set `CLI_SETTINGS`.
pub const CLI_FLAGS: &[Flag] = &[
    flag("timeout-ms", "timeoutMs"),
    flag("cpu-time-ms", "cpuTimeMs"),
    flag("memory-limit-mb", "memoryLimitMb").deprecated(&["memory-mb"]),
    flag("language", "language"),
    flag("isolation", "isolation"),
    flag("read-dir", "readDir"),
    // Repeatable, as every flag of an array option.
    flag("allowed-origins", "allowedOrigins").deprecated(&["allow-origin"]),
    flag("unhandled-rejections", "unhandledRejections"),
    // A `no-` flag sets its boolean option to false.
    flag("no-web", "web"),
];

/// The flags of `isolet mcp` alone that set `CLI_SETTINGS`.
pub const MCP_FLAGS: &[Flag] = &[flag("stateful", "stateful"), flag("idle-timeout-ms", "idleTimeoutMs")];

/// Default of `new IsoletExecutor({ timeoutMs })`, as in Code Mode's DynamicWorkerExecutor.
pub const DEFAULT_CODEMODE_TIMEOUT_MS: u64 = 60_000;

/// `new IsoletExecutor(options)`'s own options; its other options are `ENGINE_CONFIG`'s.
/// `timeoutMs` is the wall-clock limit of a run, and its CPU-time limit unless
/// `defaultIsolateLimits.cpuTimeMs` says otherwise.
pub const CODEMODE_EXECUTOR: &[Opt] = &[
    whole("timeoutMs", 1, MAX_TIME_MS, Some(DEFAULT_CODEMODE_TIMEOUT_MS), &["wallTimeMs"]).deprecated(&["timeout"]),
    opt("language", Kind::OneOf(LANGUAGES)),
    opt("stateful", Kind::Bool),
    whole("idleTimeoutMs", 1, MAX_TIME_MS, None, &[]).deprecated(&["idleTimeout"]),
    // A fetch capability (createFetchCapability): every execution's `fetch`.
    opt("fetch", Kind::Function),
];

/// How long autoFix waits for the provider by default.
pub const DEFAULT_PROVIDER_TIMEOUT_MS: u64 = 60_000;
/// Largest suggestion and largest file autoFix takes by default: 1 MiB.
pub const DEFAULT_AUTOFIX_MAX_BYTES: u64 = 1 << 20;

/// `autoFix(options)`. The sandbox limits default to runSandbox's.
pub const AUTOFIX_OPTIONS: &[Opt] = &[
    opt("filePath", Kind::Text),
    opt("root", Kind::Text),
    opt("instruction", Kind::Text),
    opt("test", Kind::Text),
    opt("provider", Kind::Shaped("`'openai'`, or an object with a `complete({ system, prompt, model, signal })` method")),
    opt("apiKey", Kind::Text),
    opt("baseURL", Kind::Text),
    opt("model", Kind::Text),
    opt("autoApprove", Kind::Bool),
    opt("approve", Kind::Function),
    opt("auditLog", Kind::Text),
    opt("language", Kind::OneOf(LANGUAGES)),
    whole("memoryLimitMb", MEM.0, MEM.1, Some(DEFAULT_RUN_MEMORY_MB as u64), &["memoryMb", "memory"]),
    whole("timeoutMs", 1, MAX_TIME_MS, Some(DEFAULT_WALL_TIME_MS), &["timeout", "wallTimeMs"]),
    whole("providerTimeoutMs", 1, MAX_TIME_MS, Some(DEFAULT_PROVIDER_TIMEOUT_MS), &["providerTimeout"]),
    whole("maxSuggestionBytes", 1, MAX_BYTES, Some(DEFAULT_AUTOFIX_MAX_BYTES), &[]),
    whole("maxFileBytes", 1, MAX_BYTES, Some(DEFAULT_AUTOFIX_MAX_BYTES), &[]),
];

/// The flags of `isolet autofix` that set `AUTOFIX_OPTIONS` numbers.
pub const AUTOFIX_FLAGS: &[Flag] = &[
    flag("timeout-ms", "timeoutMs").deprecated(&["timeout"]),
    flag("memory-limit-mb", "memoryLimitMb").deprecated(&["memory"]),
    flag("provider-timeout-ms", "providerTimeoutMs").deprecated(&["provider-timeout"]),
];

/// MCP sessions an HTTP server holds at once by default: each holds a transport, an SDK
/// server and its streams, so an unauthenticated client can make the server hold at most
/// this many (a new one past it is refused with 503 until one closes or idles out).
pub const DEFAULT_MCP_MAX_SESSIONS: u64 = 16;
/// How long a session may go without a connection (no request in flight, no stream open)
/// before it is closed, and a stateful sandbox handle without a call before it expires:
/// short, so that clients that vanish without ending their session free their place soon.
pub const DEFAULT_MCP_SESSION_IDLE_MS: u64 = 60_000;
/// Sessions (and stateful sandbox handles) one client (one bearer token from one remote
/// address) may hold at once by default: below `DEFAULT_MCP_MAX_SESSIONS`, so no client
/// alone can fill the server. A client at its bound that opens another gives up its
/// least recently used idle one; others never lose theirs to it.
pub const DEFAULT_MCP_MAX_SESSIONS_PER_CLIENT: u64 = 4;
/// Largest request body by default: the JSON of one `run_code` call, code included.
pub const DEFAULT_MCP_MAX_BODY_BYTES: u64 = 4 << 20;
/// Tool calls one session may have in flight by default; past it a call is an error
/// result. With the body cap this bounds the code the server holds per session.
pub const DEFAULT_MCP_MAX_RUNS_PER_SESSION: u64 = 4;

/// `isolet mcp --http` (the `http` object of `--config`, and `serveHttp`'s options).
/// `listen` is `[host:]port`; the token comes from `token` (API, file), `tokenEnv` (the
/// name of an environment variable) or `tokenFile`, never from a flag's value.
pub const MCP_HTTP: &[Opt] = &[
    opt("listen", Kind::Text).aliases(&["http", "port", "address"]),
    opt("allowedHosts", Kind::Names).aliases(&["allowHosts", "hosts"]),
    opt("allowedOrigins", Kind::Names).aliases(&["allowOrigins", "origins"]),
    opt("token", Kind::Text),
    opt("tokenEnv", Kind::Text),
    opt("tokenFile", Kind::Text),
    whole("maxSessions", 1, 100_000, Some(DEFAULT_MCP_MAX_SESSIONS), &["sessions"]),
    whole("maxSessionsPerClient", 1, 100_000, Some(DEFAULT_MCP_MAX_SESSIONS_PER_CLIENT), &["sessionsPerClient", "maxSessionsPerAddress"]),
    whole("sessionIdleMs", 1, MAX_TIME_MS, Some(DEFAULT_MCP_SESSION_IDLE_MS), &["idleTimeoutMs", "idleMs"]),
    whole("maxBodyBytes", 1, MAX_BYTES, Some(DEFAULT_MCP_MAX_BODY_BYTES), &["maxRequestBytes"]),
    whole("maxRunsPerSession", 1, 1024, Some(DEFAULT_MCP_MAX_RUNS_PER_SESSION), &["maxRuns"]),
];

/// The flags of `isolet mcp` that set `MCP_HTTP` (there is no flag for `token`).
pub const MCP_HTTP_FLAGS: &[Flag] = &[
    flag("http", "listen"),
    flag("http-allowed-hosts", "allowedHosts").deprecated(&["http-allow-host"]),
    flag("http-allowed-origins", "allowedOrigins").deprecated(&["http-allow-origin"]),
    flag("token-env", "tokenEnv"),
    flag("token-file", "tokenFile"),
    flag("max-sessions", "maxSessions"),
    flag("max-sessions-per-client", "maxSessionsPerClient"),
    flag("session-idle-ms", "sessionIdleMs"),
    flag("max-body-bytes", "maxBodyBytes"),
    flag("max-runs-per-session", "maxRunsPerSession"),
];

/// The `run_code` tool's arguments (`isolet mcp`). `sandbox` is the handle of a stateful
/// server's persistent sandbox under MCP 2026-07-28 (lib/mcp.js checks whose it is).
pub const MCP_RUN_CODE: &[Opt] = &[opt("code", Kind::Text), opt("language", Kind::OneOf(LANGUAGES)), opt("sandbox", Kind::Text)];

/// Largest response body `createFetchCapability` accepts: it becomes one JS string.
const MAX_FETCH_RESPONSE_BYTES: u64 = 256 << 20;
/// `Number.MAX_SAFE_INTEGER`.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

/// `createFetchCapability(options)`. The entries of `allowedOrigins` and `allowedMethods`
/// (URLs, HTTP methods) are checked where they are used, in lib/capabilities/fetch.js.
pub const FETCH_CAPABILITY: &[Opt] = &[
    opt("allowedOrigins", Kind::Names).aliases(&["allowOrigins", "origins"]),
    whole("timeoutMs", 1, MAX_TIME_MS, Some(10_000), &["timeout"]),
    whole("maxResponseBytes", 0, MAX_FETCH_RESPONSE_BYTES, Some(5 << 20), &[]),
    whole("maxRequestBytes", 0, MAX_SAFE_INTEGER, Some(1 << 20), &[]),
    opt("allowedMethods", Kind::Names).aliases(&["methods"]),
];

/// `createFileReadCapability(dir, options)`. A file over 256 MiB could not become one JS
/// string (base64 grows it by a third); `maxReadsInFlight` bounds one run's reads at once,
/// so that a readFile storm cannot queue unbounded work and buffers on the host.
pub const FILE_READ_CAPABILITY: &[Opt] =
    &[whole("maxBytes", 0, 256 << 20, Some(10 << 20), &[]), whole("maxReadsInFlight", 1, 1024, Some(8), &[])];

/// The defaults of `table`'s numbers, by name (for help texts and exported constants).
pub fn defaults_of(table: &[Opt]) -> Vec<(&'static str, u64)> {
    table.iter().filter_map(|o| Some((o.name, o.default?))).collect()
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

/// The message for a flag `command` does not know (`known` without their `--`), with the
/// nearest known flag when one is close, as currently spelled (the CLI points to `--help`
/// on a line of its own).
pub fn unknown_flag(command: &str, given: &str, known: &[&str]) -> String {
    let name = given.trim_start_matches('-');
    match nearest(name, known.iter().copied()).map(current_flag) {
        Some(near) => format!("{given} is not a known option of {command}; did you mean --{near}?"),
        None => format!("{given} is not a known option of {command}"),
    }
}

/// A flag's current spelling (`memory-mb` -> `memory-limit-mb`); any other name as is.
fn current_flag(name: &str) -> &str {
    let maps = [CLI_FLAGS, MCP_FLAGS, MCP_HTTP_FLAGS, AUTOFIX_FLAGS];
    maps.iter().flat_map(|m| m.iter()).find(|f| f.deprecated.contains(&name)).map_or(name, |f| f.flag)
}

/// The message for a command `program` does not have, with the nearest one when close.
pub fn unknown_command(program: &str, given: &str, known: &[&str]) -> String {
    match nearest(given, known.iter().copied()) {
        Some(near) => format!("{given:?} is not a command of {program}; did you mean {near}?"),
        None => format!("{given:?} is not a command of {program}; its commands: {}", known.join(", ")),
    }
}

impl<'a> Fields<'a> {
    fn bool(&self, name: &str) -> Result<Option<bool>, OptionsError> {
        match self.get(name) {
            None => Ok(None),
            Some(Raw::Bool(b)) => Ok(Some(*b)),
            Some(v) => Err(self.wrong(name, "a boolean", v)),
        }
    }

    fn function(&self, name: &str) -> Result<bool, OptionsError> {
        match self.get(name) {
            None => Ok(false),
            Some(Raw::Function) => Ok(true),
            Some(v) => Err(self.wrong(name, "a function", v)),
        }
    }

    /// A string that must be given and not be empty.
    fn required_text(&self, name: &str) -> Result<&'a str, OptionsError> {
        match self.get(name) {
            Some(Raw::String(s)) if !s.is_empty() => Ok(s),
            v => Err(self.wrong(name, "a non-empty string", v.unwrap_or(&Raw::Undefined))),
        }
    }

    /// An array of strings, non-empty unless `may_be_empty` (`what` names an entry in the message).
    fn strings(&self, name: &str, what: &str, may_be_empty: bool) -> Result<Option<Vec<String>>, OptionsError> {
        let Some(v) = self.get(name) else { return Ok(None) };
        match v {
            Raw::Array(items) if (may_be_empty || !items.is_empty()) && items.iter().all(|i| matches!(i, Raw::String(_))) => {
                Ok(Some(items.iter().filter_map(|i| if let Raw::String(s) = i { Some(s.clone()) } else { None }).collect()))
            }
            _ => Err(self.wrong(name, &format!("{} of {what}", if may_be_empty { "an array" } else { "a non-empty array" }), v)),
        }
    }

    fn wrong(&self, name: &str, expected: &str, got: &Raw) -> OptionsError {
        let path = self.path(name);
        err(&path, format!("{path} must be {expected}, got {}", got.describe()))
    }
}

/// Flag values as the options they set, with the flag each was given as.
#[derive(Debug)]
struct FlagOptions {
    options: Raw,
    /// (option, flag as given), in the order given.
    given: Vec<(&'static str, String)>,
}

impl FlagOptions {
    /// `e` about an option a flag set, told under the flag as given: `--timeout-ms must be ...`.
    fn blame(&self, e: OptionsError) -> OptionsError {
        let Some((_, flag)) = self.given.iter().find(|(option, _)| *option == e.path) else { return e };
        let path = format!("--{flag}");
        let message = match e.message.strip_prefix(e.path.as_str()) {
            Some(rest) => format!("{path}{rest}"),
            None => e.message,
        };
        OptionsError { path, message }
    }
}

/// Flag values (strings, arrays for a repeated flag) as the options they set: digits
/// become numbers for number options; anything else stays as given, for the message.
/// Flags that set no option of `table` (`--config`, `--help`) are left out. An old
/// spelling of a flag is met as deprecated; two spellings of one flag are an error.
fn options_of_flags(flags: &Raw, maps: &[&'static [Flag]], table: &[Opt]) -> Result<FlagOptions, OptionsError> {
    let mut out = FlagOptions { options: Raw::Undefined, given: Vec::new() };
    let Raw::Object(entries) = flags else { return Ok(out) };
    let mut options = Vec::new();
    let mut deprecated = Vec::new();
    for (name, value) in entries.iter().filter(|(_, v)| !v.is_undefined()) {
        let Some(set) = maps.iter().flat_map(|m| m.iter()).find(|f| f.flag == name || f.deprecated.contains(&name.as_str())) else {
            continue;
        };
        let Some(o) = table.iter().find(|o| o.name == set.option) else { continue };
        if let Some((_, other)) = out.given.iter().find(|(option, _)| *option == set.option) {
            let message = format!("--{other} and --{name} are the same option: give only --{}", set.flag);
            return Err(err(&format!("--{name}"), message));
        }
        if name != set.flag {
            deprecated.push(format!("isolet: the flag `--{name}` is deprecated; use `--{}`", set.flag));
        }
        let value = match value {
            Raw::String(s) if matches!(o.kind, Kind::Whole { .. }) && !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()) => {
                s.parse::<f64>().map_or_else(|_| value.clone(), Raw::Number)
            }
            // `--no-web`: the option `web`, false.
            Raw::Bool(given) if matches!(o.kind, Kind::Bool) && set.flag.starts_with("no-") => Raw::Bool(!given),
            _ => value.clone(),
        };
        options.push((set.option.to_string(), value));
        out.given.push((set.option, name.clone()));
    }
    deprecated.into_iter().for_each(meet_deprecated);
    out.options = Raw::Object(options);
    Ok(out)
}

/// A flag of a command line, for its parser.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CommandFlag {
    /// Without the leading `--`.
    pub name: &'static str,
    /// The option it sets.
    pub option: &'static str,
    /// Takes no value.
    pub switch: bool,
    /// May be given more than once (an array option).
    pub repeated: bool,
    /// An old spelling.
    pub deprecated: bool,
}

/// Every spelling of the flags of `isolet <command>` that set an option (old ones
/// included); `None` for a command with no such flags. The CLI parses its command line
/// with these.
pub fn command_flags(command: &str) -> Option<Vec<CommandFlag>> {
    let sets: &[(&[Flag], &[Opt])] = match command {
        "run" => &[(CLI_FLAGS, CLI_SETTINGS)],
        "mcp" => &[(CLI_FLAGS, CLI_SETTINGS), (MCP_FLAGS, CLI_SETTINGS), (MCP_HTTP_FLAGS, MCP_HTTP)],
        "autofix" => &[(AUTOFIX_FLAGS, AUTOFIX_OPTIONS)],
        _ => return None,
    };
    let mut flags = Vec::new();
    for (map, table) in sets {
        for f in *map {
            let kind = table.iter().find(|o| o.name == f.option).expect("a flag sets an option of its table").kind;
            let (switch, repeated) = (matches!(kind, Kind::Bool), matches!(kind, Kind::Names));
            let spellings = std::iter::once((f.flag, false)).chain(f.deprecated.iter().map(|d| (*d, true)));
            flags.extend(spellings.map(|(name, deprecated)| CommandFlag { name, option: f.option, switch, repeated, deprecated }));
        }
    }
    Some(flags)
}

/// `e` about a part of something bigger: `engine.processes` of the CLI's config.
fn within(prefix: &str, e: OptionsError) -> OptionsError {
    let path = join(prefix, &e.path);
    let message = match e.message.strip_prefix(e.path.as_str()) {
        Some(rest) if !e.path.is_empty() => format!("{path}{rest}"),
        _ => format!("{prefix}: {}", e.message),
    };
    OptionsError { path, message }
}

/// What `isolet run` and `isolet mcp` run with, from flags, `--config` and the defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct CliSettings {
    pub limits: IsolateLimits,
    /// The flag's or file's language, else (with a source file) by its name; `None`: the
    /// caller's (the MCP tool's argument, else JavaScript).
    pub language: Option<&'static str>,
    pub isolation: Option<Isolation>,
    pub read_dir: Option<String>,
    pub allowed_origins: Vec<String>,
    /// The web platform APIs in the runs (`web`; `--no-web` turns them off): on by default.
    pub web: bool,
    pub max_concurrent_isolates: u32,
    pub warm_pool_size: u32,
    /// The key under which the file's `engine` gives its memory, which the CLI's own
    /// `memoryLimitMb` replaces.
    pub engine_memory_key: Option<String>,
    /// `isolet mcp`: one persistent sandbox per session, closed after `idle_timeout_ms`
    /// without a call.
    pub stateful: bool,
    pub idle_timeout_ms: Option<u64>,
    /// `unhandledRejections` of the runs (the flag's, else the file's, else the engine's).
    pub unhandled_rejections: Option<&'static str>,
}

/// One source's CLI settings, checked.
struct CliValues {
    timeout_ms: Option<u64>,
    cpu_time_ms: Option<u64>,
    memory_mb: Option<u64>,
    language: Option<&'static str>,
    isolation: Option<&'static str>,
    read_dir: Option<String>,
    allowed_origins: Option<Vec<String>>,
    unhandled_rejections: Option<&'static str>,
    web: Option<bool>,
    stateful: Option<bool>,
    /// With the option's path as given.
    idle_timeout_ms: Option<(u64, String)>,
}

fn cli_values(f: &Fields) -> Result<CliValues, OptionsError> {
    Ok(CliValues {
        timeout_ms: f.whole("timeoutMs")?,
        cpu_time_ms: f.whole("cpuTimeMs")?,
        memory_mb: f.whole("memoryLimitMb")?,
        language: f.one_of("language")?,
        isolation: f.one_of("isolation")?,
        read_dir: f.text("readDir")?.map(str::to_string),
        allowed_origins: f.strings("allowedOrigins", "origin strings", true)?,
        unhandled_rejections: f.one_of("unhandledRejections")?,
        web: f.bool("web")?,
        stateful: f.bool("stateful")?,
        idle_timeout_ms: f.whole("idleTimeoutMs")?.map(|ms| (ms, f.path("idleTimeoutMs"))),
    })
}

/// `isolet run` / `isolet mcp` settings: `flags` as parsed (flag name -> string, `true`
/// for a switch, an array of strings for a repeatable flag) win over `config`, the
/// parsed JSON of `config_file`. `source_file` is the file `isolet run` runs, for its language.
pub fn cli_settings(flags: &Raw, config: &Raw, config_file: Option<&str>, source_file: Option<&str>) -> Result<CliSettings, OptionsError> {
    let flag_options = options_of_flags(flags, &[CLI_FLAGS, MCP_FLAGS], CLI_SETTINGS)?;
    let given = fields("", "the command line", &flag_options.options, CLI_SETTINGS)
        .and_then(|f| cli_values(&f))
        .map_err(|e| flag_options.blame(e))?;
    let in_file = |e: OptionsError| OptionsError { message: format!("--config {}: {}", config_file.unwrap_or("file"), e.message), ..e };
    let (file, concurrency, warm, engine_memory_key) = match config {
        Raw::Undefined => (None, None, None, None),
        Raw::Object(_) => {
            let f = fields("", "the config file", config, CLI_SETTINGS).map_err(in_file)?;
            let values = cli_values(&f).map_err(in_file)?;
            // The whole engine config is checked here, so that a bad value is blamed on its key.
            let engine = f.object("engine").map_err(in_file)?;
            let raw = Raw::Object(engine.values.iter().map(|(_, key, v)| (key.to_string(), (*v).clone())).collect());
            EngineConfig::from_raw(&raw).map_err(|e| in_file(within("engine", e)))?;
            let concurrency = engine.whole("maxConcurrentIsolates").map_err(in_file)?;
            let warm = engine.whole("warmPoolSize").map_err(in_file)?;
            (Some(values), concurrency, warm, engine.key("memoryLimitMb").map(str::to_string))
        }
        other => return Err(in_file(err("", format!("must hold a JSON object, got {}", other.describe())))),
    };
    let file = file.as_ref();
    let stateful = given.stateful.or(file.and_then(|v| v.stateful)).unwrap_or(false);
    let idle_timeout_ms = match (&given.idle_timeout_ms, file.and_then(|v| v.idle_timeout_ms.clone())) {
        (Some((ms, _)), _) if stateful => Some(*ms),
        (Some(_), _) => {
            return Err(flag_options.blame(err("idleTimeoutMs", "idleTimeoutMs applies to a stateful server only; add --stateful".into())))
        }
        (None, Some((ms, _))) if stateful => Some(ms),
        (None, Some((_, path))) => {
            return Err(in_file(err(&path, format!("{path} applies to a stateful server only; set stateful: true"))))
        }
        (None, None) => None,
    };
    let wall_time_ms = given.timeout_ms.or(file.and_then(|v| v.timeout_ms)).unwrap_or(DEFAULT_WALL_TIME_MS);
    let limits = IsolateLimits {
        memory_mb: given.memory_mb.or(file.and_then(|v| v.memory_mb)).unwrap_or(DEFAULT_RUN_MEMORY_MB as u64) as u32,
        wall_time_ms,
        cpu_time_ms: Some(given.cpu_time_ms.or(file.and_then(|v| v.cpu_time_ms)).unwrap_or(wall_time_ms)),
    };
    Ok(CliSettings {
        limits,
        language: given.language.or(file.and_then(|v| v.language)).or(source_file.map(language_of_file)),
        isolation: Isolation::parse(given.isolation.or(file.and_then(|v| v.isolation))),
        read_dir: given.read_dir.or(file.and_then(|v| v.read_dir.clone())),
        allowed_origins: given.allowed_origins.or(file.and_then(|v| v.allowed_origins.clone())).unwrap_or_default(),
        web: given.web.or(file.and_then(|v| v.web)).unwrap_or(true),
        max_concurrent_isolates: concurrency.unwrap_or(CLI_MAX_CONCURRENT_ISOLATES) as u32,
        warm_pool_size: warm.unwrap_or(CLI_WARM_POOL_SIZE) as u32,
        engine_memory_key,
        stateful,
        idle_timeout_ms,
        unhandled_rejections: given.unhandled_rejections.or(file.and_then(|v| v.unhandled_rejections)),
    })
}

/// `isolet autofix`'s number flags, checked under the flags' names; the options they set
/// (`timeoutMs`, ...), to hand to `autoFix`.
pub fn autofix_flags(flags: &Raw) -> Result<Vec<(&'static str, u64)>, OptionsError> {
    let flag_options = options_of_flags(flags, &[AUTOFIX_FLAGS], AUTOFIX_OPTIONS)?;
    let f = fields("", "isolet autofix", &flag_options.options, AUTOFIX_OPTIONS).map_err(|e| flag_options.blame(e))?;
    let mut set = Vec::new();
    for Flag { option, .. } in AUTOFIX_FLAGS {
        if let Some(n) = f.whole(option).map_err(|e| flag_options.blame(e))? {
            set.push((*option, n));
        }
    }
    Ok(set)
}

/// What an `IsoletExecutor` runs with; its engine options go to `SandboxEngine` as given.
#[derive(Debug, Clone, PartialEq)]
pub struct CodemodeSettings {
    pub timeout_ms: u64,
    /// The engine's `defaultIsolateLimits.cpuTimeMs`, else the timeout.
    pub cpu_time_ms: u64,
    pub language: &'static str,
    /// One persistent sandbox for all executions (`stateful: true`).
    pub stateful: bool,
    /// Stateful only: no execution for this long closes the sandbox.
    pub idle_timeout_ms: Option<u64>,
    /// The keys of the options that are the executor's own (whatever their spelling), so
    /// that the rest goes to its engine.
    pub own_keys: Vec<String>,
}

/// Its own options, then the engine's: one list for names and suggestions.
fn codemode_table() -> &'static [Opt] {
    static TABLE: std::sync::OnceLock<Vec<Opt>> = std::sync::OnceLock::new();
    TABLE.get_or_init(|| CODEMODE_EXECUTOR.iter().chain(ENGINE_CONFIG).copied().collect())
}

/// Checks `new IsoletExecutor(options)`: its own options and the names of the engine's
/// (their values are checked when the executor builds its engine, at construction).
pub fn codemode_executor(options: &Raw) -> Result<CodemodeSettings, OptionsError> {
    let f = fields("", "IsoletExecutor options", options, codemode_table())?;
    let timeout_ms = f.whole_or_default("timeoutMs")?;
    let stateful = f.bool("stateful")?.unwrap_or(false);
    let idle_timeout_ms = f.whole("idleTimeoutMs")?;
    if idle_timeout_ms.is_some() && !stateful {
        let path = f.path("idleTimeoutMs");
        return Err(err(&path, format!("{path} applies to a stateful executor only; set stateful: true")));
    }
    let own_keys = match options {
        Raw::Object(entries) => {
            entries.iter().filter(|(k, _)| CODEMODE_EXECUTOR.iter().any(|o| o.spelling(k).is_some())).map(|(k, _)| k.clone()).collect()
        }
        _ => Vec::new(),
    };
    Ok(CodemodeSettings {
        timeout_ms,
        cpu_time_ms: f.object("defaultIsolateLimits")?.whole("cpuTimeMs")?.unwrap_or(timeout_ms),
        language: f.one_of("language")?.unwrap_or("javascript"),
        stateful,
        idle_timeout_ms,
        own_keys,
    })
}

/// autoFix's checked options, with the defaults filled in (the environment is JS's).
#[derive(Debug, Clone, PartialEq)]
pub struct AutoFixSettings {
    /// `language`, else by the file's name.
    pub language: &'static str,
    pub memory_limit_mb: u32,
    pub timeout_ms: u64,
    pub provider_timeout_ms: u64,
    pub max_suggestion_bytes: u64,
    pub max_file_bytes: u64,
    /// A custom provider's name (`custom` when it gives none); `None` for OpenAI.
    pub custom_provider: Option<String>,
}

/// Checks `autoFix(options)`. JS hands `provider` over as `'openai'` or as
/// `{ name, complete }` read from the object (its methods may live on a prototype).
pub fn autofix_options(options: &Raw) -> Result<AutoFixSettings, OptionsError> {
    if !matches!(options, Raw::Object(_)) {
        return Err(err("options", format!("options must be an object, got {}", options.describe())));
    }
    let f = fields("options", "autoFix", options, AUTOFIX_OPTIONS)?;
    let file_path = f.required_text("filePath")?;
    f.required_text("root")?;
    let instruction = f.get("instruction").unwrap_or(&Raw::Undefined);
    if !matches!(instruction, Raw::String(s) if !s.trim().is_empty()) {
        return Err(f.wrong("instruction", "a string that describes what is wrong", instruction));
    }
    for name in ["test", "apiKey", "baseURL", "model"] {
        f.text(name)?;
    }
    if let Some(log) = f.text("auditLog")? {
        if log.is_empty() || log.contains('\0') {
            return Err(f.wrong("auditLog", "a non-empty path without NUL bytes", f.get("auditLog").unwrap_or(&Raw::Undefined)));
        }
    }
    f.bool("autoApprove")?;
    f.function("approve")?;
    let custom_provider = match f.get("provider") {
        None => None,
        Some(Raw::String(s)) if s == "openai" => None,
        Some(Raw::Object(entries)) if entries.iter().any(|(k, v)| k == "complete" && *v == Raw::Function) => {
            let name = entries.iter().find_map(|(k, v)| match v {
                Raw::String(s) if k == "name" && !s.is_empty() => Some(s.clone()),
                _ => None,
            });
            Some(name.unwrap_or_else(|| "custom".to_string()))
        }
        Some(v) => return Err(f.wrong("provider", "'openai' or an object with a complete({ system, prompt, model, signal }) method", v)),
    };
    Ok(AutoFixSettings {
        language: f.one_of("language")?.unwrap_or_else(|| language_of_file(file_path)),
        memory_limit_mb: f.whole_or_default("memoryLimitMb")? as u32,
        timeout_ms: f.whole_or_default("timeoutMs")?,
        provider_timeout_ms: f.whole_or_default("providerTimeoutMs")?,
        max_suggestion_bytes: f.whole_or_default("maxSuggestionBytes")?,
        max_file_bytes: f.whole_or_default("maxFileBytes")?,
        custom_provider,
    })
}

/// Checks the `run_code` tool's arguments: its code, its language and its sandbox handle
/// if it names them.
pub fn mcp_run_code(arguments: &Raw) -> Result<(String, Option<&'static str>, Option<String>), OptionsError> {
    let f = fields("", "run_code arguments", arguments, MCP_RUN_CODE)?;
    let code = code_of("code", f.get("code").unwrap_or(&Raw::Undefined))?;
    Ok((code, f.one_of("language")?, f.text("sandbox")?.map(str::to_string)))
}

/// Where the HTTP server's bearer token comes from (JS reads it at start).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    Value(String),
    /// The name of an environment variable.
    Env(String),
    /// A file whose contents (without surrounding white space) are the token.
    File(String),
}

/// `isolet mcp --http`'s checked settings, defaults filled in.
#[derive(Debug, Clone, PartialEq)]
pub struct McpHttpSettings {
    /// The address to bind: `127.0.0.1` unless one is given.
    pub host: String,
    /// 0: a free port, chosen when the server binds.
    pub port: u16,
    /// Host header values accepted besides the local ones of the bound port.
    pub allowed_hosts: Vec<String>,
    /// Origin header values accepted besides the local ones of the bound port.
    pub allowed_origins: Vec<String>,
    pub token: Option<TokenSource>,
    pub max_sessions: u64,
    /// Sessions and sandbox handles one client (token and remote address) holds at once.
    pub max_sessions_per_client: u64,
    pub session_idle_ms: u64,
    pub max_body_bytes: u64,
    pub max_runs_per_session: u64,
}

/// The local address HTTP serves on unless `listen` names a host.
pub const DEFAULT_MCP_HOST: &str = "127.0.0.1";

/// `[host:]port`: `8080`, `0.0.0.0:8080`, `localhost:0`, `[::1]:8080`.
fn listen_address(path: &str, given: &str) -> Result<(String, u16), OptionsError> {
    let bad = || {
        err(
            path,
            format!(
                "{path} must be [host:]port with a port from 0 to 65535 (8080, 0.0.0.0:8080, [::1]:8080), got {}",
                Raw::String(given.into()).describe()
            ),
        )
    };
    let (host, port) = if let Some(rest) = given.strip_prefix('[') {
        let (host, port) = rest.split_once("]:").ok_or_else(bad)?;
        (host, port)
    } else {
        match given.rsplit_once(':') {
            // A bare IPv6 address needs its brackets; `:80` would read as every interface
            // elsewhere (Go), so an empty host is refused rather than guessed.
            Some((host, _)) if host.contains(':') || host.is_empty() => return Err(bad()),
            Some((host, port)) => (host, port),
            None => ("", given),
        }
    };
    let host_ok = host.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._:%".contains(&b));
    if !host_ok || port.is_empty() || port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(bad());
    }
    let port: u16 = port.parse().map_err(|_| bad())?;
    let host = if given.starts_with('[') || !host.is_empty() { host.to_string() } else { DEFAULT_MCP_HOST.to_string() };
    if host.is_empty() {
        return Err(bad());
    }
    Ok((host, port))
}

/// One source's HTTP settings, checked, unmerged.
struct HttpValues {
    listen: Option<(String, u16)>,
    allowed_hosts: Option<Vec<String>>,
    allowed_origins: Option<Vec<String>>,
    token: Option<TokenSource>,
    max_sessions: Option<u64>,
    max_sessions_per_client: Option<u64>,
    session_idle_ms: Option<u64>,
    max_body_bytes: Option<u64>,
    max_runs_per_session: Option<u64>,
}

fn http_values(f: &Fields) -> Result<HttpValues, OptionsError> {
    let listen = match f.text("listen")? {
        Some(l) => Some(listen_address(&f.path("listen"), l)?),
        None => None,
    };
    let mut token = None;
    for (name, source) in
        [("token", TokenSource::Value as fn(String) -> TokenSource), ("tokenEnv", TokenSource::Env), ("tokenFile", TokenSource::File)]
    {
        let Some(v) = f.text(name)? else { continue };
        if v.is_empty() {
            return Err(f.wrong(name, "a non-empty string", f.get(name).unwrap_or(&Raw::Undefined)));
        }
        if token.is_some() {
            let path = f.path(name);
            return Err(err(&path, format!("{path}: give one of {}, {} and {}", f.path("token"), f.path("tokenEnv"), f.path("tokenFile"))));
        }
        token = Some(source(v.to_string()));
    }
    Ok(HttpValues {
        listen,
        allowed_hosts: f.strings("allowedHosts", "host names", true)?,
        allowed_origins: f.strings("allowedOrigins", "origin strings", true)?,
        token,
        max_sessions: f.whole("maxSessions")?,
        max_sessions_per_client: f.whole("maxSessionsPerClient")?,
        session_idle_ms: f.whole("sessionIdleMs")?,
        max_body_bytes: f.whole("maxBodyBytes")?,
        max_runs_per_session: f.whole("maxRunsPerSession")?,
    })
}

fn http_settings(given: HttpValues, file: Option<HttpValues>, listen: (String, u16)) -> McpHttpSettings {
    let file = file.as_ref();
    let or_default = |g: Option<u64>, f: Option<u64>, name: &str| {
        g.or(f).or_else(|| MCP_HTTP.iter().find(|o| o.name == name).and_then(|o| o.default)).expect("option has a default")
    };
    McpHttpSettings {
        host: listen.0,
        port: listen.1,
        allowed_hosts: given.allowed_hosts.or_else(|| file.and_then(|f| f.allowed_hosts.clone())).unwrap_or_default(),
        allowed_origins: given.allowed_origins.or_else(|| file.and_then(|f| f.allowed_origins.clone())).unwrap_or_default(),
        token: given.token.or_else(|| file.and_then(|f| f.token.clone())),
        max_sessions: or_default(given.max_sessions, file.and_then(|f| f.max_sessions), "maxSessions"),
        max_sessions_per_client: or_default(
            given.max_sessions_per_client,
            file.and_then(|f| f.max_sessions_per_client),
            "maxSessionsPerClient",
        ),
        session_idle_ms: or_default(given.session_idle_ms, file.and_then(|f| f.session_idle_ms), "sessionIdleMs"),
        max_body_bytes: or_default(given.max_body_bytes, file.and_then(|f| f.max_body_bytes), "maxBodyBytes"),
        max_runs_per_session: or_default(given.max_runs_per_session, file.and_then(|f| f.max_runs_per_session), "maxRunsPerSession"),
    }
}

/// `isolet mcp`'s HTTP settings from its flags (they win) and the `http` object of its
/// config file; `None`: neither names an address, so the server speaks stdio. An HTTP
/// flag without `--http` (or the file's `http.listen`) is a usage error.
pub fn mcp_http_settings(flags: &Raw, config: &Raw, config_file: Option<&str>) -> Result<Option<McpHttpSettings>, OptionsError> {
    let flag_options = options_of_flags(flags, &[MCP_HTTP_FLAGS], MCP_HTTP)?;
    let given =
        fields("", "the command line", &flag_options.options, MCP_HTTP).and_then(|f| http_values(&f)).map_err(|e| flag_options.blame(e))?;
    let in_file = |e: OptionsError| OptionsError { message: format!("--config {}: {}", config_file.unwrap_or("file"), e.message), ..e };
    let file = match config {
        Raw::Object(_) => {
            let f = fields("", "the config file", config, CLI_SETTINGS).map_err(in_file)?;
            Some(http_values(&f.object("http").map_err(in_file)?).map_err(in_file)?)
        }
        _ => None,
    };
    let Some(listen) = given.listen.clone().or_else(|| file.as_ref().and_then(|f| f.listen.clone())) else {
        return match flag_options.given.first() {
            None => Ok(None),
            Some((_, flag)) => {
                Err(err(&format!("--{flag}"), format!("--{flag} needs --http [host:]port (isolet mcp speaks stdio without it)")))
            }
        };
    };
    Ok(Some(http_settings(given, file, listen)))
}

/// `serveHttp(settings, options)`'s options (`MCP_HTTP`); `listen` defaults to
/// `127.0.0.1:0`, a free local port.
pub fn mcp_http_options(options: &Raw) -> Result<McpHttpSettings, OptionsError> {
    if !matches!(options, Raw::Object(_) | Raw::Undefined) {
        return Err(err("options", format!("options must be an object, got {}", options.describe())));
    }
    let given = http_values(&fields("", "serveHttp options", options, MCP_HTTP)?)?;
    let listen = given.listen.clone().unwrap_or((DEFAULT_MCP_HOST.to_string(), 0));
    Ok(http_settings(given, None, listen))
}

/// `createFetchCapability`'s checked limits.
#[derive(Debug, Clone, PartialEq)]
pub struct FetchSettings {
    pub allowed_origins: Vec<String>,
    /// `None`: the capability's default methods.
    pub allowed_methods: Option<Vec<String>>,
    pub timeout_ms: u64,
    pub max_response_bytes: u64,
    pub max_request_bytes: u64,
}

pub fn fetch_capability(options: &Raw) -> Result<FetchSettings, OptionsError> {
    if !matches!(options, Raw::Object(_)) {
        return Err(err("options", format!("options must be an object with allowedOrigins, got {}", options.describe())));
    }
    let f = fields("", "createFetchCapability", options, FETCH_CAPABILITY)?;
    let allowed_origins = f.strings("allowedOrigins", "origin strings", false)?;
    let Some(allowed_origins) = allowed_origins else {
        return Err(f.wrong("allowedOrigins", "a non-empty array of origin strings", &Raw::Undefined));
    };
    Ok(FetchSettings {
        allowed_origins,
        allowed_methods: f.strings("allowedMethods", "method names", false)?,
        timeout_ms: f.whole_or_default("timeoutMs")?,
        max_response_bytes: f.whole_or_default("maxResponseBytes")?,
        max_request_bytes: f.whole_or_default("maxRequestBytes")?,
    })
}

/// `createFileReadCapability`'s checked limits: `(maxBytes, maxReadsInFlight)`.
pub fn file_read_capability(options: &Raw) -> Result<(u64, u64), OptionsError> {
    if !matches!(options, Raw::Object(_) | Raw::Undefined) {
        return Err(err("options", format!("options must be an object, got {}", options.describe())));
    }
    let f = fields("", "createFileReadCapability", options, FILE_READ_CAPABILITY)?;
    Ok((f.whole_or_default("maxBytes")?, f.whole_or_default("maxReadsInFlight")?))
}

#[cfg(test)]
mod entry_tests {
    use super::*;

    pub(super) fn obj(entries: &[(&str, Raw)]) -> Raw {
        Raw::Object(entries.iter().map(|(k, v)| (k.to_string(), v.clone())).collect())
    }
    pub(super) fn s(v: &str) -> Raw {
        Raw::String(v.into())
    }
    pub(super) fn num(n: f64) -> Raw {
        Raw::Number(n)
    }
    fn cli(flags: Raw, config: Raw) -> Result<CliSettings, OptionsError> {
        cli_settings(&flags, &config, Some("isolet.json"), None)
    }

    #[test]
    fn cli_defaults_are_runsandboxs_and_cpu_follows_the_wall_clock() {
        let c = cli(obj(&[]), Raw::Undefined).unwrap();
        assert_eq!(c.limits, IsolateLimits { memory_mb: 64, wall_time_ms: 5000, cpu_time_ms: Some(5000) });
        assert_eq!((c.language, c.isolation, c.max_concurrent_isolates, c.warm_pool_size), (None, None, 2, 1));
        let c = cli(obj(&[("timeout-ms", s("300"))]), Raw::Undefined).unwrap();
        assert_eq!(c.limits.cpu_time_ms, Some(300));
        let ts = cli_settings(&obj(&[]), &Raw::Undefined, None, Some("a/b.MTS")).unwrap();
        assert_eq!(ts.language, Some("typescript"));
    }

    #[test]
    fn unhandled_rejections_is_one_option_under_one_name_everywhere() {
        use crate::options::UnhandledRejections::{Error, Warn};
        // runSandbox, createSandbox and sandbox.run: warn unless told; a bad value names the option.
        assert_eq!(run_sandbox(&s("1"), &Raw::Undefined).unwrap().unhandled_rejections, Warn);
        assert_eq!(run_sandbox(&s("1"), &obj(&[("unhandledRejections", s("error"))])).unwrap().unhandled_rejections, Error);
        let e = run_sandbox(&s("1"), &obj(&[("unhandledRejections", s("strict"))])).unwrap_err();
        assert_eq!(
            (e.path.as_str(), e.message.as_str()),
            ("unhandledRejections", "unhandledRejections must be 'warn' or 'error', got 'strict'")
        );
        let e = run_sandbox(&s("1"), &obj(&[("onUnhandledRejection", s("error"))])).unwrap_err();
        assert!(e.message.ends_with("did you mean unhandledRejections?"), "{}", e.message);
        let sandbox = crate::sandbox::sandbox_plan(&obj(&[("unhandledRejections", s("error"))])).unwrap();
        assert_eq!(sandbox.base.unhandled_rejections, Error);
        let budget = crate::sandbox::Budget::default();
        let run = |o: Raw| crate::sandbox::run_plan(&sandbox, &budget, &s("1"), &o);
        assert_eq!(run(Raw::Undefined).unwrap().unhandled_rejections, Error);
        assert_eq!(run(obj(&[("unhandledRejections", s("warn"))])).unwrap().unhandled_rejections, Warn);
        // An engine's is its requests' default; a request may say otherwise.
        let request = |extra: &[(&str, Raw)]| obj(&[&[("code", s("return 1"))], extra].concat());
        let engine = EngineConfig::from_raw(&obj(&[("unhandledRejections", s("error"))])).unwrap();
        assert_eq!(engine.plan(&request(&[])).unwrap().unhandled_rejections, Error);
        assert_eq!(engine.plan(&request(&[("unhandledRejections", s("warn"))])).unwrap().unhandled_rejections, Warn);
        let e = engine.plan(&request(&[("unhandledRejections", num(1.0))])).unwrap_err();
        assert_eq!(e.message, "request.unhandledRejections must be 'warn' or 'error', got 1");
        // isolet run and isolet mcp: the flag, else the config file.
        assert_eq!(cli(obj(&[("unhandled-rejections", s("error"))]), Raw::Undefined).unwrap().unhandled_rejections, Some("error"));
        assert_eq!(cli(obj(&[]), obj(&[("unhandledRejections", s("warn"))])).unwrap().unhandled_rejections, Some("warn"));
        assert_eq!(cli(obj(&[]), Raw::Undefined).unwrap().unhandled_rejections, None);
        let e = cli(obj(&[("unhandled-rejections", s("loud"))]), Raw::Undefined).unwrap_err();
        assert!(e.message.contains("--unhandled-rejections must be 'warn' or 'error', got 'loud'"), "{}", e.message);
    }

    #[test]
    fn cli_flags_win_over_the_config_file() {
        let file = obj(&[("timeoutMs", num(200.0)), ("language", s("typescript")), ("allowedOrigins", Raw::Array(vec![s("http://a")]))]);
        let c = cli(obj(&[("timeout-ms", s("3000"))]), file.clone()).unwrap();
        assert_eq!((c.limits.wall_time_ms, c.language), (3000, Some("typescript")));
        assert_eq!(c.allowed_origins, ["http://a"]);
        assert!(cli(obj(&[]), obj(&[("allowedOrigins", Raw::Array(vec![]))])).unwrap().allowed_origins.is_empty());
        let c = cli(obj(&[("isolation", s("thread"))]), obj(&[("engine", obj(&[("warmPoolSize", num(0.0))]))])).unwrap();
        assert_eq!((c.isolation, c.warm_pool_size, c.max_concurrent_isolates), (Some(Isolation::Thread), 0, 2));
    }

    #[test]
    fn cli_web_is_on_unless_the_flag_or_the_file_turns_it_off() {
        assert!(cli(obj(&[]), Raw::Undefined).unwrap().web);
        assert!(!cli(obj(&[("no-web", Raw::Bool(true))]), Raw::Undefined).unwrap().web);
        assert!(!cli(obj(&[]), obj(&[("web", Raw::Bool(false))])).unwrap().web);
        assert!(cli(obj(&[]), obj(&[("web", Raw::Bool(true))])).unwrap().web);
        // The flag wins over the file.
        assert!(!cli(obj(&[("no-web", Raw::Bool(true))]), obj(&[("web", Raw::Bool(true))])).unwrap().web);
        let e = cli(obj(&[]), obj(&[("web", s("no"))])).unwrap_err();
        assert_eq!(e.message, "--config isolet.json: web must be a boolean, got 'no'");
    }

    #[test]
    fn cli_errors_name_the_flag_or_the_config_key() {
        let e = cli(obj(&[("timeout-ms", s("soon"))]), Raw::Undefined).unwrap_err();
        assert_eq!(
            (e.path.as_str(), e.message.as_str()),
            ("--timeout-ms", "--timeout-ms must be a whole number from 1 to 2147483647, got 'soon'")
        );
        let e = cli(obj(&[("memory-limit-mb", s("0"))]), Raw::Undefined).unwrap_err();
        assert_eq!(e.message, "--memory-limit-mb must be a whole number from 8 to 8192, got 0");
        let e = cli(obj(&[("language", s("python"))]), Raw::Undefined).unwrap_err();
        assert_eq!(e.message, "--language must be 'javascript' or 'typescript', got 'python'");
        let e = cli(obj(&[]), obj(&[("timeoutMs", s("fast"))])).unwrap_err();
        assert_eq!(e.message, "--config isolet.json: timeoutMs must be a whole number from 1 to 2147483647, got 'fast'");
        let e = cli(obj(&[]), obj(&[("timeout", num(5.0))])).unwrap_err();
        assert_eq!(e.message, "--config isolet.json: timeout is not a known option of the config file; did you mean timeoutMs?");
        let e = cli(obj(&[]), obj(&[("engine", obj(&[("processes", num(0.0))]))])).unwrap_err();
        assert_eq!(e.message, "--config isolet.json: engine.processes must be a whole number from 1 to 64, got 0");
        let e = cli(obj(&[]), obj(&[("engine", obj(&[("maxConcurrency", num(1.0))]))])).unwrap_err();
        assert!(e.message.ends_with("did you mean engine.maxConcurrentIsolates?"), "{}", e.message);
        let e = cli(obj(&[]), Raw::Array(vec![])).unwrap_err();
        assert_eq!(e.message, "--config isolet.json: must hold a JSON object, got an array");
        let e = cli(obj(&[]), obj(&[("allowedOrigins", s("http://a"))])).unwrap_err();
        assert_eq!(e.message, "--config isolet.json: allowedOrigins must be an array of origin strings, got 'http://a'");
    }

    #[test]
    fn mcp_http_is_off_without_an_address_and_defaults_to_the_loopback() {
        let http = |flags: Raw, config: Raw| mcp_http_settings(&flags, &config, Some("isolet.json"));
        assert_eq!(http(obj(&[("timeout-ms", s("5"))]), Raw::Undefined).unwrap(), None);
        let h = http(obj(&[("http", s("8080"))]), Raw::Undefined).unwrap().unwrap();
        assert_eq!((h.host.as_str(), h.port, h.max_sessions, h.session_idle_ms), ("127.0.0.1", 8080, 16, 60_000));
        assert_eq!((h.max_body_bytes, h.max_runs_per_session, h.token.clone()), (4 << 20, 4, None));
        assert_eq!(h.max_sessions_per_client, 4);
        let h = http(obj(&[("http", s("1")), ("max-sessions-per-client", s("2"))]), Raw::Undefined).unwrap().unwrap();
        assert_eq!(h.max_sessions_per_client, 2);
        for (given, host, port) in [("0.0.0.0:0", "0.0.0.0", 0), ("[::1]:65535", "::1", 65535), ("localhost:9", "localhost", 9)] {
            let h = http(obj(&[("http", s(given))]), Raw::Undefined).unwrap().unwrap();
            assert_eq!((h.host.as_str(), h.port), (host, port), "{given}");
        }
        for bad in ["", "x", "65536", ":80", "::1:80", "a b:80", "[::1]", "1.2.3.4:-1", "host:"] {
            let e = http(obj(&[("http", s(bad))]), Raw::Undefined).unwrap_err();
            assert!(e.message.starts_with("--http must be [host:]port with a port from 0 to 65535"), "{bad}: {}", e.message);
        }
    }

    #[test]
    fn mcp_http_flags_win_over_the_file_and_need_an_address() {
        let http = |flags: Raw, config: Raw| mcp_http_settings(&flags, &config, Some("isolet.json"));
        let file = obj(&[(
            "http",
            obj(&[
                ("listen", s("0.0.0.0:80")),
                ("maxSessions", num(3.0)),
                ("tokenFile", s("/run/t")),
                ("allowedHosts", Raw::Array(vec![s("mcp.example")])),
            ]),
        )]);
        let h = http(obj(&[]), file.clone()).unwrap().unwrap();
        assert_eq!((h.host.as_str(), h.port, h.max_sessions, h.token), ("0.0.0.0", 80, 3, Some(TokenSource::File("/run/t".into()))));
        assert_eq!(h.allowed_hosts, ["mcp.example"]);
        let h = http(obj(&[("http", s("81")), ("max-sessions", s("7")), ("token-env", s("T"))]), file).unwrap().unwrap();
        assert_eq!((h.host.as_str(), h.port, h.max_sessions, h.token), ("127.0.0.1", 81, 7, Some(TokenSource::Env("T".into()))));
        let e = http(obj(&[("max-sessions", s("7"))]), Raw::Undefined).unwrap_err();
        assert_eq!(e.message, "--max-sessions needs --http [host:]port (isolet mcp speaks stdio without it)");
        let e = http(obj(&[("http", s("1")), ("max-sessions", s("0"))]), Raw::Undefined).unwrap_err();
        assert_eq!(e.message, "--max-sessions must be a whole number from 1 to 100000, got 0");
        let e = http(obj(&[]), obj(&[("http", obj(&[("listen", s("1")), ("token", s("a")), ("tokenEnv", s("B"))]))])).unwrap_err();
        assert_eq!(e.message, "--config isolet.json: http.tokenEnv: give one of http.token, http.tokenEnv and http.tokenFile");
        let e = http(obj(&[]), obj(&[("http", obj(&[("maxSession", num(1.0))]))])).unwrap_err();
        assert!(e.message.ends_with("did you mean http.maxSessions?"), "{}", e.message);
        // `isolet run` takes the same file.
        assert!(cli(obj(&[]), obj(&[("http", obj(&[("listen", s("1"))]))])).is_ok());
    }

    #[test]
    fn serve_http_options_default_to_a_free_local_port() {
        let h = mcp_http_options(&Raw::Undefined).unwrap();
        assert_eq!((h.host.as_str(), h.port), ("127.0.0.1", 0));
        let h = mcp_http_options(&obj(&[("token", s("secret")), ("sessionIdleMs", num(50.0))])).unwrap();
        assert_eq!((h.token, h.session_idle_ms), (Some(TokenSource::Value("secret".into())), 50));
        assert_eq!(mcp_http_options(&obj(&[("token", s(""))])).unwrap_err().message, "token must be a non-empty string, got ''");
        assert_eq!(
            mcp_http_options(&obj(&[("port", num(1.0))])).unwrap_err().message,
            "port is not a known option of serveHttp options; did you mean listen?"
        );
    }

    #[test]
    fn unknown_flags_suggest_the_nearest_flag() {
        let known = ["timeout-ms", "memory-mb", "config", "help"];
        assert_eq!(
            unknown_flag("isolet run", "--timeout", &known),
            "--timeout is not a known option of isolet run; did you mean --timeout-ms?"
        );
        assert_eq!(unknown_flag("isolet run", "--bogus", &known), "--bogus is not a known option of isolet run");
        // An old spelling is suggested as it is spelled now.
        let autofix = ["timeout", "timeout-ms", "root"];
        assert_eq!(
            unknown_flag("isolet autofix", "--timout", &autofix),
            "--timout is not a known option of isolet autofix; did you mean --timeout-ms?"
        );
        let commands = ["run", "mcp", "autofix", "help"];
        assert_eq!(unknown_command("isolet", "rn", &commands), "\"rn\" is not a command of isolet; did you mean run?");
        assert_eq!(unknown_command("isolet", "autofx", &commands), "\"autofx\" is not a command of isolet; did you mean autofix?");
        assert_eq!(
            unknown_command("isolet", "frobnicate", &commands),
            "\"frobnicate\" is not a command of isolet; its commands: run, mcp, autofix, help"
        );
    }

    #[test]
    fn autofix_flags_are_checked_under_their_names() {
        assert_eq!(autofix_flags(&obj(&[("timeout-ms", s("250")), ("root", s("."))])).unwrap(), [("timeoutMs", 250)]);
        let e = autofix_flags(&obj(&[("memory-limit-mb", s("lots"))])).unwrap_err();
        assert_eq!(e.message, "--memory-limit-mb must be a whole number from 8 to 8192, got 'lots'");
    }

    #[test]
    fn mcp_stateful_comes_from_the_flags_or_the_config_file() {
        let c = cli_settings(&Raw::Undefined, &obj(&[("stateful", Raw::Bool(true)), ("idleTimeoutMs", num(5000.0))]), Some("c.json"), None)
            .unwrap();
        assert_eq!((c.stateful, c.idle_timeout_ms), (true, Some(5000)));
        let c = cli_settings(&Raw::Undefined, &Raw::Undefined, None, None).unwrap();
        assert_eq!((c.stateful, c.idle_timeout_ms), (false, None));
        let c = cli_settings(
            &obj(&[("stateful", Raw::Bool(true)), ("idle-timeout-ms", s("70"))]),
            &obj(&[("idleTimeoutMs", num(5.0))]),
            None,
            None,
        )
        .unwrap();
        assert_eq!((c.stateful, c.idle_timeout_ms), (true, Some(70)));
        let e = cli_settings(&Raw::Undefined, &obj(&[("idleTimeoutMs", num(5000.0))]), Some("c.json"), None).unwrap_err();
        assert_eq!(e.message, "--config c.json: idleTimeoutMs applies to a stateful server only; set stateful: true");
        let e = cli_settings(&Raw::Undefined, &obj(&[("statefulIdleMs", num(5000.0))]), Some("c.json"), None).unwrap_err();
        assert_eq!(e.message, "--config c.json: statefulIdleMs applies to a stateful server only; set stateful: true");
        let e = cli_settings(&obj(&[("idle-timeout-ms", s("5"))]), &Raw::Undefined, None, None).unwrap_err();
        assert_eq!(e.message, "--idle-timeout-ms applies to a stateful server only; add --stateful");
        let e = cli_settings(&Raw::Undefined, &obj(&[("stateful", s("yes"))]), Some("c.json"), None).unwrap_err();
        assert!(e.message.starts_with("--config c.json: stateful must be a boolean"), "{}", e.message);
    }

    #[test]
    fn codemode_has_its_own_timeout_and_the_engines_names() {
        let c = codemode_executor(&Raw::Undefined).unwrap();
        let defaults = CodemodeSettings {
            timeout_ms: 60_000,
            cpu_time_ms: 60_000,
            language: "javascript",
            stateful: false,
            idle_timeout_ms: None,
            own_keys: vec![],
        };
        assert_eq!(c, defaults);
        let c = codemode_executor(&obj(&[("timeoutMs", num(500.0)), ("defaultIsolateLimits", obj(&[("cpuTimeMs", num(100.0))]))])).unwrap();
        assert_eq!((c.timeout_ms, c.cpu_time_ms, c.own_keys), (500, 100, vec!["timeoutMs".to_string()]));
        let e = |o: Raw| codemode_executor(&o).unwrap_err().message;
        assert_eq!(e(obj(&[("timeot", num(1.0))])), "timeot is not a known option of IsoletExecutor options; did you mean timeoutMs?");
        assert!(e(obj(&[("zzz", num(1.0))])).contains("known options: timeoutMs, language, stateful, idleTimeoutMs, fetch, memoryLimitMb"));
        assert!(e(obj(&[("warmPool", num(1.0))])).ends_with("did you mean warmPoolSize?"));
        assert_eq!(e(obj(&[("timeoutMs", num(-1.0))])), "timeoutMs must be a whole number from 1 to 2147483647, got -1");
        assert_eq!(e(s("x")), "IsoletExecutor options must be an object, got 'x'");
        // Stateful: one persistent sandbox, closed after idleTimeoutMs.
        let c = codemode_executor(&obj(&[("stateful", Raw::Bool(true)), ("idleTimeoutMs", num(1000.0))])).unwrap();
        assert_eq!((c.stateful, c.idle_timeout_ms), (true, Some(1000)));
        assert!(e(obj(&[("idleTimeoutMs", num(1000.0))])).contains("idleTimeoutMs applies to a stateful executor only"));
        assert!(e(obj(&[("stateful", num(1.0))])).starts_with("stateful must be a boolean"));
        assert!(e(obj(&[("stateful", Raw::Bool(true)), ("idleTimeoutMs", num(0.0))])).starts_with("idleTimeoutMs must be a whole number"));
        // The engine's options are the rest, under any of their spellings.
        let c = codemode_executor(&obj(&[("memoryMb", num(64.0)), ("stateful", Raw::Bool(false)), ("fetch", Raw::Undefined)])).unwrap();
        assert_eq!(c.own_keys, ["stateful", "fetch"]);
    }

    #[test]
    fn autofix_refuses_typos_and_fills_in_defaults() {
        let base = [("filePath", s("src/a.ts")), ("root", s(".")), ("instruction", s("fix it"))];
        let with = |extra: &[(&str, Raw)]| obj(&[extra, &base[..]].concat()); // the first of a name counts
        let a = autofix_options(&with(&[])).unwrap();
        assert_eq!((a.language, a.memory_limit_mb, a.timeout_ms, a.provider_timeout_ms), ("typescript", 64, 5000, 60_000));
        assert_eq!((a.max_suggestion_bytes, a.max_file_bytes, a.custom_provider), (1 << 20, 1 << 20, None));
        let e = |extra: &[(&str, Raw)]| autofix_options(&with(extra)).unwrap_err().message;
        assert_eq!(
            e(&[("autoApproved", Raw::Bool(true))]),
            "options.autoApproved is not a known option of autoFix; did you mean options.autoApprove?"
        );
        assert_eq!(e(&[("tset", s("throw 1"))]), "options.tset is not a known option of autoFix; did you mean options.test?");
        assert_eq!(e(&[("timeoutMs", num(-1.0))]), "options.timeoutMs must be a whole number from 1 to 2147483647, got -1");
        assert_eq!(e(&[("autoApprove", s("yes"))]), "options.autoApprove must be a boolean, got 'yes'");
        assert_eq!(e(&[("instruction", s("  "))]), "options.instruction must be a string that describes what is wrong, got '  '");
        assert!(e(&[("provider", obj(&[]))]).starts_with("options.provider must be 'openai' or an object with a complete("));
        let custom = autofix_options(&with(&[("provider", obj(&[("complete", Raw::Function)]))])).unwrap();
        assert_eq!(custom.custom_provider.as_deref(), Some("custom"));
        assert_eq!(autofix_options(&Raw::Undefined).unwrap_err().message, "options must be an object, got undefined");
        assert_eq!(autofix_options(&obj(&[])).unwrap_err().message, "options.filePath must be a non-empty string, got undefined");
    }

    #[test]
    fn mcp_and_capability_options() {
        assert_eq!(mcp_run_code(&obj(&[("code", s("1"))])).unwrap(), ("1".to_string(), None, None));
        assert_eq!(mcp_run_code(&obj(&[("code", s("1")), ("sandbox", s("sbx"))])).unwrap().2.as_deref(), Some("sbx"));
        assert!(mcp_run_code(&obj(&[("code", s("1")), ("lang", s("typescript"))]))
            .unwrap_err()
            .message
            .ends_with("did you mean language?"));
        assert_eq!(mcp_run_code(&obj(&[])).unwrap_err().message, "code must be a string, got undefined");
        let f = fetch_capability(&obj(&[("allowedOrigins", Raw::Array(vec![s("http://a")]))])).unwrap();
        assert_eq!((f.timeout_ms, f.max_response_bytes, f.max_request_bytes), (10_000, 5 << 20, 1 << 20));
        let e = fetch_capability(&obj(&[("allowedOrigin", Raw::Array(vec![s("http://a")]))])).unwrap_err();
        assert_eq!(e.message, "allowedOrigin is not a known option of createFetchCapability; did you mean allowedOrigins?");
        assert_eq!(
            fetch_capability(&obj(&[])).unwrap_err().message,
            "allowedOrigins must be a non-empty array of origin strings, got undefined"
        );
        assert_eq!(file_read_capability(&Raw::Undefined).unwrap(), (10 << 20, 8));
        assert!(file_read_capability(&obj(&[("maxbytes", num(1.0))])).unwrap_err().message.ends_with("did you mean maxBytes?"));
        assert_eq!(file_read_capability(&Raw::Null).unwrap_err().message, "options must be an object, got null");
    }
}

#[cfg(test)]
mod name_tests {
    use super::entry_tests::{num, obj, s};
    use super::*;
    use std::collections::HashSet;
    fn origins(v: &[&str]) -> Raw {
        Raw::Array(v.iter().map(|o| s(o)).collect())
    }
    /// The old spellings this thread met since the last call (a fresh process each time).
    fn met() -> Vec<String> {
        take_deprecations_into(&mut Reported::default())
    }

    /// Every table: the page's sections, and the executor's (its own and the engine's).
    fn tables() -> Vec<(&'static str, &'static [Opt])> {
        doc::sections().into_iter().map(|s| (s.title, s.table)).chain([("IsoletExecutor", codemode_table())]).collect()
    }

    const FLAG_SETS: [(&[Flag], &[Opt]); 4] =
        [(CLI_FLAGS, CLI_SETTINGS), (MCP_FLAGS, CLI_SETTINGS), (MCP_HTTP_FLAGS, MCP_HTTP), (AUTOFIX_FLAGS, AUTOFIX_OPTIONS)];

    /// A value `kind` accepts.
    fn sample(kind: Kind) -> Raw {
        match kind {
            Kind::Whole { min, .. } => num(min.max(1) as f64),
            Kind::Names => origins(&["http://a"]),
            Kind::Bool => Raw::Bool(true),
            other => unreachable!("no sample for {other:?}"),
        }
    }

    #[test]
    fn every_spelling_names_one_option_and_a_suggestion_is_never_accepted() {
        for (title, table) in tables() {
            let mut accepted = HashSet::new();
            for o in table {
                for name in std::iter::once(&o.name).chain(o.seed_names).chain(o.deprecated) {
                    assert!(accepted.insert(*name), "{title}: {name} spells two options");
                }
            }
            for o in table {
                for alias in o.aliases {
                    assert!(!accepted.contains(alias), "{title}: {alias}, suggested for {}, is accepted", o.name);
                }
            }
        }
    }

    #[test]
    fn every_flag_is_its_option_in_kebab_case() {
        let kebab = |name: &str| {
            name.chars().fold(String::new(), |mut k, c| {
                if c.is_ascii_uppercase() {
                    k.push('-');
                }
                k.push(c.to_ascii_lowercase());
                k
            })
        };
        for (map, table) in FLAG_SETS {
            for f in map {
                assert!(table.iter().any(|o| o.name == f.option), "--{} sets no option", f.flag);
                let expected = match (f.option, std::ptr::eq(map, MCP_HTTP_FLAGS)) {
                    ("web", _) => "no-web".to_string(),
                    ("listen", true) => "http".to_string(),
                    // The HTTP server's allow-lists, apart from the runs' `allowedOrigins`.
                    ("allowedHosts" | "allowedOrigins", true) => format!("http-{}", kebab(f.option)),
                    (option, _) => kebab(option),
                };
                assert_eq!(f.flag, expected);
            }
        }
        for command in ["run", "mcp", "autofix"] {
            let flags = command_flags(command).unwrap();
            let mut names: Vec<&str> = flags.iter().map(|f| f.name).collect();
            names.sort_unstable();
            names.dedup();
            assert_eq!(names.len(), flags.len(), "isolet {command} has a flag twice");
        }
        let mcp = command_flags("mcp").unwrap();
        let find = |name: &str| mcp.iter().find(|f| f.name == name).copied().unwrap();
        let origins = CommandFlag { name: "allowed-origins", option: "allowedOrigins", switch: false, repeated: true, deprecated: false };
        assert_eq!(find("allowed-origins"), origins);
        assert_eq!(find("allow-origin"), CommandFlag { name: "allow-origin", deprecated: true, ..origins });
        assert!(find("stateful").switch && find("no-web").switch && !find("idle-timeout-ms").switch);
        assert!(!command_flags("run").unwrap().iter().any(|f| f.name == "stateful"));
        assert_eq!(command_flags("help"), None);
    }

    #[test]
    fn an_old_spelling_sets_its_option_is_met_and_clashes_with_the_new_one() {
        met();
        let mut count = 0;
        for (title, table) in tables() {
            for o in table {
                for old in o.deprecated {
                    let v = sample(o.kind);
                    let given = obj(&[(old, v.clone())]);
                    let f = fields("", "X", &given, table).unwrap();
                    assert_eq!((f.get(o.name), f.path(o.name)), (Some(&v), old.to_string()), "{title}");
                    assert_eq!(met(), [format!("isolet: `{old}` of X is deprecated; use `{}`", o.name)]);
                    let e = fields("", "X", &obj(&[(old, v.clone()), (o.name, v.clone())]), table).unwrap_err();
                    assert_eq!(
                        (e.path.as_str(), e.message),
                        (o.name, format!("{old} and {} are the same option of X: give only {}", o.name, o.name))
                    );
                    assert!(met().is_empty(), "an error, not a warning");
                    count += 1;
                }
                for seed in o.seed_names {
                    let v = sample(o.kind);
                    let given = obj(&[(seed, v.clone())]);
                    let f = fields("p", "X", &given, table).unwrap();
                    assert_eq!((f.get(o.name), f.path(o.name)), (Some(&v), format!("p.{seed}")));
                    let e = fields("p", "X", &obj(&[(seed, v.clone()), (o.name, v.clone())]), table).unwrap_err();
                    assert_eq!(e.message, format!("p.{seed} and p.{} are the same option of X: give only p.{}", o.name, o.name));
                }
            }
        }
        assert!(count >= 5, "{count}");
        assert_eq!(met(), Vec::<String>::new(), "a seed's name is no deprecation");
        // An absent (undefined) old spelling is no option, no clash and no warning.
        let given = obj(&[("timeout", Raw::Undefined), ("timeoutMs", num(5.0))]);
        let f = fields("", "X", &given, CODEMODE_EXECUTOR).unwrap();
        assert_eq!(f.get("timeoutMs"), Some(&num(5.0)));
        assert!(met().is_empty());
    }

    #[test]
    fn an_old_flag_sets_its_option_is_met_and_clashes_with_the_new_one() {
        met();
        for (map, table) in FLAG_SETS {
            for f in map {
                for old in f.deprecated {
                    let o = table.iter().find(|o| o.name == f.option).unwrap();
                    let v = match sample(o.kind) {
                        Raw::Number(n) => s(&n.to_string()),
                        other => other,
                    };
                    let given = options_of_flags(&obj(&[(old, v.clone())]), &[map], table).unwrap();
                    let Raw::Object(options) = &given.options else { panic!() };
                    assert_eq!(options[0].0, f.option);
                    assert_eq!(met(), [format!("isolet: the flag `--{old}` is deprecated; use `--{}`", f.flag)]);
                    let e = options_of_flags(&obj(&[(f.flag, v.clone()), (old, v.clone())]), &[map], table).unwrap_err();
                    assert_eq!(e.message, format!("--{} and --{old} are the same option: give only --{}", f.flag, f.flag));
                    assert!(met().is_empty(), "an error, not a warning");
                }
            }
        }
    }

    #[test]
    fn each_warning_is_reported_once_per_process() {
        met();
        let mut process = Reported::default();
        let executor = obj(&[("timeout", num(50.0)), ("stateful", Raw::Bool(true)), ("idleTimeout", num(9.0))]);
        for _ in 0..3 {
            codemode_executor(&executor).unwrap();
        }
        let first = take_deprecations_into(&mut process);
        assert_eq!(
            first,
            [
                "isolet: `timeout` of IsoletExecutor options is deprecated; use `timeoutMs`",
                "isolet: `idleTimeout` of IsoletExecutor options is deprecated; use `idleTimeoutMs`"
            ]
        );
        codemode_executor(&executor).unwrap();
        autofix_flags(&obj(&[("timeout", s("5"))])).unwrap();
        autofix_flags(&obj(&[("timeout", s("6"))])).unwrap();
        assert_eq!(take_deprecations_into(&mut process), ["isolet: the flag `--timeout` is deprecated; use `--timeout-ms`"]);
        assert!(take_deprecations_into(&mut process).is_empty());
        // The process-wide record.
        meet_deprecated("isolet: a test's own warning".into());
        meet_deprecated("isolet: a test's own warning".into());
        assert_eq!(take_deprecations(), ["isolet: a test's own warning"]);
        meet_deprecated("isolet: a test's own warning".into());
        assert!(take_deprecations().is_empty());
    }

    #[test]
    fn the_entry_points_take_old_spellings_with_the_same_effect() {
        met();
        // Code Mode.
        let old = codemode_executor(&obj(&[("timeout", num(50.0)), ("stateful", Raw::Bool(true)), ("idleTimeout", num(9.0))])).unwrap();
        let new = codemode_executor(&obj(&[("timeoutMs", num(50.0)), ("stateful", Raw::Bool(true)), ("idleTimeoutMs", num(9.0))])).unwrap();
        assert_eq!((old.timeout_ms, old.cpu_time_ms, old.idle_timeout_ms), (new.timeout_ms, new.cpu_time_ms, new.idle_timeout_ms));
        assert_eq!(
            (old.own_keys, new.own_keys),
            (
                vec!["timeout".to_string(), "stateful".into(), "idleTimeout".into()],
                vec!["timeoutMs".to_string(), "stateful".into(), "idleTimeoutMs".into()]
            )
        );
        let e = codemode_executor(&obj(&[("timeout", num(-1.0))])).unwrap_err();
        assert_eq!((e.path.as_str(), e.message.as_str()), ("timeout", "timeout must be a whole number from 1 to 2147483647, got -1"));
        let e = codemode_executor(&obj(&[("idleTimeout", num(5.0))])).unwrap_err();
        assert_eq!(e.message, "idleTimeout applies to a stateful executor only; set stateful: true");
        let e = codemode_executor(&obj(&[("timeout", num(5.0)), ("timeoutMs", num(5.0))])).unwrap_err();
        assert_eq!(e.message, "timeout and timeoutMs are the same option of IsoletExecutor options: give only timeoutMs");
        // The CLI's config file and flags.
        let cli = |flags: Raw, config: Raw| cli_settings(&flags, &config, Some("c.json"), None);
        let file = |memory: &str, origins_key: &str, idle: &str| {
            obj(&[(memory, num(32.0)), (origins_key, origins(&["http://a"])), ("stateful", Raw::Bool(true)), (idle, num(70.0))])
        };
        let old = cli(Raw::Undefined, file("memoryMb", "allowOrigins", "statefulIdleMs")).unwrap();
        let new = cli(Raw::Undefined, file("memoryLimitMb", "allowedOrigins", "idleTimeoutMs")).unwrap();
        assert_eq!(old, new);
        assert_eq!(
            (new.limits.memory_mb, new.allowed_origins.as_slice(), new.idle_timeout_ms),
            (32, &["http://a".to_string()][..], Some(70))
        );
        let flags = |memory: &str, origins_flag: &str| obj(&[(memory, s("16")), (origins_flag, origins(&["http://b", "http://c"]))]);
        let old = cli(flags("memory-mb", "allow-origin"), Raw::Undefined).unwrap();
        let new = cli(flags("memory-limit-mb", "allowed-origins"), Raw::Undefined).unwrap();
        assert_eq!(old, new);
        assert_eq!((new.limits.memory_mb, new.allowed_origins.len()), (16, 2));
        let e = cli(obj(&[("memory-mb", s("0"))]), Raw::Undefined).unwrap_err();
        assert_eq!((e.path.as_str(), e.message.as_str()), ("--memory-mb", "--memory-mb must be a whole number from 8 to 8192, got 0"));
        let e = cli(Raw::Undefined, obj(&[("memoryMb", num(0.0))])).unwrap_err();
        assert_eq!(e.message, "--config c.json: memoryMb must be a whole number from 8 to 8192, got 0");
        let e = cli(obj(&[("memory-mb", s("8")), ("memory-limit-mb", s("8"))]), Raw::Undefined).unwrap_err();
        assert_eq!(e.message, "--memory-mb and --memory-limit-mb are the same option: give only --memory-limit-mb");
        let e = cli(Raw::Undefined, obj(&[("allowOrigins", origins(&[])), ("allowedOrigins", origins(&[]))])).unwrap_err();
        assert_eq!(
            e.message,
            "--config c.json: allowOrigins and allowedOrigins are the same option of the config file: give only allowedOrigins"
        );
        // The file's engine memory, under either of its names, is what the CLI's replaces.
        assert_eq!(
            cli(Raw::Undefined, obj(&[("engine", obj(&[("memoryMb", num(9.0))]))])).unwrap().engine_memory_key.as_deref(),
            Some("memoryMb")
        );
        assert_eq!(
            cli(Raw::Undefined, obj(&[("engine", obj(&[("memoryLimitMb", num(9.0))]))])).unwrap().engine_memory_key.as_deref(),
            Some("memoryLimitMb")
        );
        let e = cli(Raw::Undefined, obj(&[("engine", obj(&[("memoryMb", num(0.0))]))])).unwrap_err();
        assert_eq!(e.message, "--config c.json: engine.memoryMb must be a whole number from 8 to 8192, got 0");
        // isolet mcp's HTTP flags.
        let http = |hosts: &str| {
            mcp_http_settings(&obj(&[("http", s("1")), (hosts, origins(&["mcp.example"]))]), &Raw::Undefined, None).unwrap().unwrap()
        };
        assert_eq!(http("http-allow-host"), http("http-allowed-hosts"));
        let e = mcp_http_settings(&obj(&[("http-allow-origin", origins(&["http://a"]))]), &Raw::Undefined, None).unwrap_err();
        assert_eq!(e.message, "--http-allow-origin needs --http [host:]port (isolet mcp speaks stdio without it)");
        // isolet autofix.
        let old = autofix_flags(&obj(&[("timeout", s("250")), ("memory", s("32")), ("provider-timeout", s("900"))])).unwrap();
        let new =
            autofix_flags(&obj(&[("timeout-ms", s("250")), ("memory-limit-mb", s("32")), ("provider-timeout-ms", s("900"))])).unwrap();
        assert_eq!(old, new);
        assert_eq!(new, [("timeoutMs", 250), ("memoryLimitMb", 32), ("providerTimeoutMs", 900)]);
        let e = autofix_flags(&obj(&[("provider-timeout", s("soon"))])).unwrap_err();
        assert_eq!(e.message, "--provider-timeout must be a whole number from 1 to 2147483647, got 'soon'");
        // SandboxEngine: memoryMb is the seed's name for memoryLimitMb, not deprecated.
        let old = EngineConfig::from_raw(&obj(&[("memoryMb", num(48.0))])).unwrap();
        let new = EngineConfig::from_raw(&obj(&[("memoryLimitMb", num(48.0))])).unwrap();
        assert_eq!((old.memory_mb, old), (48, new));
        let e = EngineConfig::from_raw(&obj(&[("memoryMb", num(48.0)), ("memoryLimitMb", num(48.0))])).unwrap_err();
        assert_eq!(e.message, "memoryMb and memoryLimitMb are the same option of SandboxEngine config: give only memoryLimitMb");
        let e = EngineConfig::from_raw(&obj(&[("memoryMb", num(1.0))])).unwrap_err();
        assert_eq!(e.message, "memoryMb must be a whole number from 8 to 8192, got 1");
        // Each old spelling met, once (a fresh process); the engine's `memoryMb` is not among them.
        let of = |what: &str, pairs: &[(&str, &str)]| -> Vec<String> {
            pairs.iter().map(|(old, new)| format!("isolet: `{old}` of {what} is deprecated; use `{new}`")).collect()
        };
        let flags = [
            "memory-mb:memory-limit-mb",
            "allow-origin:allowed-origins",
            "http-allow-host:http-allowed-hosts",
            "http-allow-origin:http-allowed-origins",
            "timeout:timeout-ms",
            "memory:memory-limit-mb",
            "provider-timeout:provider-timeout-ms",
        ];
        let expected: Vec<String> = of("IsoletExecutor options", &[("timeout", "timeoutMs"), ("idleTimeout", "idleTimeoutMs")])
            .into_iter()
            .chain(of(
                "the config file",
                &[("memoryMb", "memoryLimitMb"), ("allowOrigins", "allowedOrigins"), ("statefulIdleMs", "idleTimeoutMs")],
            ))
            .chain(
                flags
                    .iter()
                    .map(|f| f.split_once(':').unwrap())
                    .map(|(old, new)| format!("isolet: the flag `--{old}` is deprecated; use `--{new}`")),
            )
            .collect();
        assert_eq!(met(), expected);
    }
}
