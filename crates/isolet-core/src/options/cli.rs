//! The command line: the settings and flags of `isolet run` and `isolet mcp`, the number
//! flags of `isolet autofix`, and the messages for an unknown flag or command.
use crate::limits::{IsolateLimits, DEFAULT_RUN_MEMORY_MB, DEFAULT_WALL_TIME_MS};

use super::engine::{EngineConfig, ENGINE_CONFIG};
use super::integrations::{http_settings, http_values, McpHttpSettings, AUTOFIX_FLAGS, AUTOFIX_OPTIONS, MCP_HTTP, MCP_HTTP_FLAGS};
use super::limits::{CPU_TIME, IDLE_TIME, MEMORY, WALL_TIME};
use super::run::{language_of_file, Isolation, ISOLATION_MODES, LANGUAGES, UNHANDLED_REJECTIONS_OPT};
use super::table::{err, fields, flag, nearest, opt, options_of_flags, within, Fields, Flag, Kind, Opt, OptionsError, Raw};

/// Isolates the CLI's engine runs at once unless its `engine` config says otherwise.
pub const CLI_MAX_CONCURRENT_ISOLATES: u64 = 2;
/// Warm isolates of the CLI's engine unless its `engine` config says otherwise.
pub const CLI_WARM_POOL_SIZE: u64 = 1;

/// `isolet run` and `isolet mcp`, as `--config` keys (`CLI_FLAGS` are the flags).
/// `cpuTimeMs` has no default of its own: it is the wall-clock limit.
pub const CLI_SETTINGS: &[Opt] = &[
    WALL_TIME,
    CPU_TIME,
    MEMORY.aliases(&["memory"]).deprecated(&["memoryMb"]),
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
    IDLE_TIME.aliases(&["sandboxIdleMs"]).deprecated(&["statefulIdleMs"]),
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
