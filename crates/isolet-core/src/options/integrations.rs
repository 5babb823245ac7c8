//! The entry points of isolet's integrations: Code Mode's `IsoletExecutor`, `autoFix`, the
//! MCP server (`run_code`'s arguments, its HTTP settings) and the capability factories.
use crate::limits::MAX_TIME_MS;

use super::engine::ENGINE_CONFIG;
use super::limits::{IDLE_TIME, MAX_BYTES, MEMORY, WALL_TIME};
use super::run::{code_of, language_of_file, LANGUAGES};
use super::table::{err, fields, flag, opt, whole, Fields, Flag, Kind, Opt, OptionsError, Raw};

/// Default of `new IsoletExecutor({ timeoutMs })`, as in Code Mode's DynamicWorkerExecutor.
pub const DEFAULT_CODEMODE_TIMEOUT_MS: u64 = 60_000;

/// `new IsoletExecutor(options)`'s own options; its other options are `ENGINE_CONFIG`'s.
/// `timeoutMs` is the wall-clock limit of a run, and its CPU-time limit unless
/// `defaultIsolateLimits.cpuTimeMs` says otherwise.
pub const CODEMODE_EXECUTOR: &[Opt] = &[
    WALL_TIME.aliases(&["wallTimeMs"]).deprecated(&["timeout"]).default_of(Some(DEFAULT_CODEMODE_TIMEOUT_MS)),
    opt("language", Kind::OneOf(LANGUAGES)),
    opt("stateful", Kind::Bool),
    IDLE_TIME.aliases(&[]).deprecated(&["idleTimeout"]),
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
    MEMORY,
    WALL_TIME,
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
pub(super) fn codemode_table() -> &'static [Opt] {
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
pub(super) struct HttpValues {
    pub(super) listen: Option<(String, u16)>,
    allowed_hosts: Option<Vec<String>>,
    allowed_origins: Option<Vec<String>>,
    token: Option<TokenSource>,
    max_sessions: Option<u64>,
    max_sessions_per_client: Option<u64>,
    session_idle_ms: Option<u64>,
    max_body_bytes: Option<u64>,
    max_runs_per_session: Option<u64>,
}

pub(super) fn http_values(f: &Fields) -> Result<HttpValues, OptionsError> {
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

pub(super) fn http_settings(given: HttpValues, file: Option<HttpValues>, listen: (String, u16)) -> McpHttpSettings {
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
