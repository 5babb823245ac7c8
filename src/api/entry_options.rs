//! The options of the other entry points (the CLI, `isolet/codemode`, `autoFix`, the MCP
//! tool, the capability factories), checked by isolet-core's tables
//! (`crates/isolet-core/src/options/`); JS only shapes types before and after.
use std::collections::HashMap;

use napi::bindgen_prelude::*;
use napi_derive::napi;

use isolet_core::options::{self, Opt};
use isolet_core::Raw;

use super::options::raw_of;
use super::{checked, internal_error};

fn raw(value: &Unknown) -> std::result::Result<Raw, Error<String>> {
    raw_of(value, 0).map_err(internal_error)
}

/// `isolet run` / `isolet mcp` settings (`CLI_SETTINGS`).
#[napi(object)]
pub struct CliSettingsJs {
    pub timeout_ms: f64,
    pub cpu_time_ms: f64,
    pub memory_limit_mb: u32,
    /// Unset: the caller's (the MCP tool's argument, else JavaScript).
    pub language: Option<String>,
    pub isolation: Option<String>,
    pub read_dir: Option<String>,
    pub allowed_origins: Vec<String>,
    /// The web platform APIs in the runs: on unless `--no-web` or `"web": false`.
    pub web: bool,
    pub max_concurrent_isolates: u32,
    pub warm_pool_size: u32,
    /// The key of the file's `engine` memory, which `memoryLimitMb` replaces.
    pub engine_memory_key: Option<String>,
    /// `isolet mcp`: one persistent sandbox per session.
    pub stateful: bool,
    pub idle_timeout_ms: Option<f64>,
    /// `unhandledRejections` of the runs; unset: the engine's.
    pub unhandled_rejections: Option<String>,
}

/// `flags`: parsed flags by name (strings, `true` for a switch, an array for a repeatable
/// flag); `config`: the parsed JSON of `configFile`, if any; `sourceFile`: the file
/// `isolet run` runs.
#[napi]
pub fn cli_settings(
    env: &Env,
    flags: Unknown,
    config: Unknown,
    config_file: Option<String>,
    source_file: Option<String>,
) -> std::result::Result<CliSettingsJs, Error<String>> {
    let (flags, config) = (raw(&flags)?, raw(&config)?);
    let s = checked(env, || options::cli_settings(&flags, &config, config_file.as_deref(), source_file.as_deref()))?;
    Ok(CliSettingsJs {
        timeout_ms: s.limits.wall_time_ms as f64,
        cpu_time_ms: s.limits.cpu_time_ms.unwrap_or(s.limits.wall_time_ms) as f64,
        memory_limit_mb: s.limits.memory_mb,
        language: s.language.map(str::to_string),
        isolation: s.isolation.map(|i| i.as_str().to_string()),
        read_dir: s.read_dir,
        allowed_origins: s.allowed_origins,
        web: s.web,
        max_concurrent_isolates: s.max_concurrent_isolates,
        warm_pool_size: s.warm_pool_size,
        engine_memory_key: s.engine_memory_key,
        stateful: s.stateful,
        idle_timeout_ms: s.idle_timeout_ms.map(|ms| ms as f64),
        unhandled_rejections: s.unhandled_rejections.map(str::to_string),
    })
}

/// `isolet mcp --http` / `serveHttp` settings (`MCP_HTTP`).
#[napi(object)]
pub struct McpHttpSettingsJs {
    pub host: String,
    pub port: u32,
    pub allowed_hosts: Vec<String>,
    pub allowed_origins: Vec<String>,
    /// The token itself (`serveHttp`'s or the file's `token`).
    pub token: Option<String>,
    /// The environment variable that holds the token.
    pub token_env: Option<String>,
    /// The file that holds the token.
    pub token_file: Option<String>,
    pub max_sessions: f64,
    pub max_sessions_per_client: f64,
    pub session_idle_ms: f64,
    pub max_body_bytes: f64,
    pub max_runs_per_session: u32,
}

impl From<options::McpHttpSettings> for McpHttpSettingsJs {
    fn from(s: options::McpHttpSettings) -> Self {
        use options::TokenSource;
        let (mut token, mut token_env, mut token_file) = (None, None, None);
        match s.token {
            Some(TokenSource::Value(v)) => token = Some(v),
            Some(TokenSource::Env(v)) => token_env = Some(v),
            Some(TokenSource::File(v)) => token_file = Some(v),
            None => {}
        }
        McpHttpSettingsJs {
            host: s.host,
            port: s.port as u32,
            allowed_hosts: s.allowed_hosts,
            allowed_origins: s.allowed_origins,
            token,
            token_env,
            token_file,
            max_sessions: s.max_sessions as f64,
            max_sessions_per_client: s.max_sessions_per_client as f64,
            session_idle_ms: s.session_idle_ms as f64,
            max_body_bytes: s.max_body_bytes as f64,
            max_runs_per_session: s.max_runs_per_session as u32,
        }
    }
}

/// `isolet mcp`'s HTTP settings from its flags and config file; unset: stdio.
#[napi]
pub fn mcp_http_settings(
    env: &Env,
    flags: Unknown,
    config: Unknown,
    config_file: Option<String>,
) -> std::result::Result<Option<McpHttpSettingsJs>, Error<String>> {
    let (flags, config) = (raw(&flags)?, raw(&config)?);
    let s = checked(env, || options::mcp_http_settings(&flags, &config, config_file.as_deref()))?;
    Ok(s.map(Into::into))
}

/// `serveHttp(settings, options)`'s options.
#[napi]
pub fn mcp_http_options(env: &Env, options: Unknown) -> std::result::Result<McpHttpSettingsJs, Error<String>> {
    let options = raw(&options)?;
    Ok(checked(env, || options::mcp_http_options(&options))?.into())
}

/// `isolet autofix`'s number flags as the autoFix options they set.
#[napi]
pub fn autofix_flags(env: &Env, flags: Unknown) -> std::result::Result<HashMap<String, f64>, Error<String>> {
    let flags = raw(&flags)?;
    let set = checked(env, || options::autofix_flags(&flags))?;
    Ok(set.into_iter().map(|(k, v)| (k.to_string(), v as f64)).collect())
}

/// A flag of a command, for its command-line parser (`isolet_core::options::CommandFlag`).
#[napi(object)]
pub struct CommandFlagJs {
    pub name: String,
    pub option: String,
    pub switch: bool,
    pub repeated: bool,
    pub deprecated: bool,
}

/// Every spelling of the flags of `isolet <command>` that set its options (old ones too).
#[napi]
pub fn command_flags(command: String) -> Vec<CommandFlagJs> {
    let flags = options::command_flags(&command).unwrap_or_default();
    flags
        .into_iter()
        .map(|f| CommandFlagJs {
            name: f.name.into(),
            option: f.option.into(),
            switch: f.switch,
            repeated: f.repeated,
            deprecated: f.deprecated,
        })
        .collect()
}

/// The message for a flag `command` does not know (`known`: its flags, without `--`).
#[napi]
pub fn unknown_flag_message(command: String, given: String, known: Vec<String>) -> String {
    let known: Vec<&str> = known.iter().map(String::as_str).collect();
    options::unknown_flag(&command, &given, &known)
}

/// The message for a command `program` does not have (`known`: its commands).
#[napi]
pub fn unknown_command_message(program: String, given: String, known: Vec<String>) -> String {
    let known: Vec<&str> = known.iter().map(String::as_str).collect();
    options::unknown_command(&program, &given, &known)
}

#[napi(object)]
pub struct CodemodeSettingsJs {
    pub timeout_ms: f64,
    pub cpu_time_ms: f64,
    pub language: String,
    pub stateful: bool,
    pub idle_timeout_ms: Option<f64>,
    /// The keys of the executor's own options, as given: the rest is the engine's config.
    pub own_keys: Vec<String>,
}

/// `new IsoletExecutor(options)` (`CODEMODE_EXECUTOR`, then the engine's names).
#[napi]
pub fn codemode_settings(env: &Env, options: Unknown) -> std::result::Result<CodemodeSettingsJs, Error<String>> {
    let options = raw(&options)?;
    let s = checked(env, || options::codemode_executor(&options))?;
    Ok(CodemodeSettingsJs {
        timeout_ms: s.timeout_ms as f64,
        cpu_time_ms: s.cpu_time_ms as f64,
        language: s.language.to_string(),
        stateful: s.stateful,
        idle_timeout_ms: s.idle_timeout_ms.map(|ms| ms as f64),
        own_keys: s.own_keys,
    })
}

#[napi(object)]
pub struct AutoFixSettingsJs {
    pub language: String,
    pub memory_limit_mb: u32,
    pub timeout_ms: f64,
    pub provider_timeout_ms: f64,
    pub max_suggestion_bytes: f64,
    pub max_file_bytes: f64,
    /// A custom provider's name; unset for OpenAI.
    pub custom_provider: Option<String>,
}

/// `autoFix(options)` (`AUTOFIX_OPTIONS`).
#[napi]
pub fn autofix_settings(env: &Env, options: Unknown) -> std::result::Result<AutoFixSettingsJs, Error<String>> {
    let options = raw(&options)?;
    let s = checked(env, || options::autofix_options(&options))?;
    Ok(AutoFixSettingsJs {
        language: s.language.to_string(),
        memory_limit_mb: s.memory_limit_mb,
        timeout_ms: s.timeout_ms as f64,
        provider_timeout_ms: s.provider_timeout_ms as f64,
        max_suggestion_bytes: s.max_suggestion_bytes as f64,
        max_file_bytes: s.max_file_bytes as f64,
        custom_provider: s.custom_provider,
    })
}

#[napi(object)]
pub struct RunCodeArgumentsJs {
    pub code: String,
    pub language: Option<String>,
    pub sandbox: Option<String>,
}

/// The MCP `run_code` tool's arguments (`MCP_RUN_CODE`).
#[napi]
pub fn run_code_arguments(env: &Env, arguments: Unknown) -> std::result::Result<RunCodeArgumentsJs, Error<String>> {
    let arguments = raw(&arguments)?;
    let (code, language, sandbox) = checked(env, || options::mcp_run_code(&arguments))?;
    Ok(RunCodeArgumentsJs { code, language: language.map(str::to_string), sandbox })
}

#[napi(object)]
pub struct FetchSettingsJs {
    pub allowed_origins: Vec<String>,
    pub allowed_methods: Option<Vec<String>>,
    pub timeout_ms: f64,
    pub max_response_bytes: f64,
    pub max_request_bytes: f64,
}

/// `createFetchCapability(options)` (`FETCH_CAPABILITY`).
#[napi]
pub fn fetch_capability_settings(env: &Env, options: Unknown) -> std::result::Result<FetchSettingsJs, Error<String>> {
    let options = raw(&options)?;
    let s = checked(env, || options::fetch_capability(&options))?;
    Ok(FetchSettingsJs {
        allowed_origins: s.allowed_origins,
        allowed_methods: s.allowed_methods,
        timeout_ms: s.timeout_ms as f64,
        max_response_bytes: s.max_response_bytes as f64,
        max_request_bytes: s.max_request_bytes as f64,
    })
}

#[napi(object)]
pub struct FileReadSettingsJs {
    pub max_bytes: f64,
    pub max_reads_in_flight: u32,
}

/// `createFileReadCapability(dir, options)` (`FILE_READ_CAPABILITY`).
#[napi]
pub fn file_read_capability_settings(env: &Env, options: Unknown) -> std::result::Result<FileReadSettingsJs, Error<String>> {
    let options = raw(&options)?;
    let (max_bytes, in_flight) = checked(env, || options::file_read_capability(&options))?;
    Ok(FileReadSettingsJs { max_bytes: max_bytes as f64, max_reads_in_flight: in_flight as u32 })
}

/// The defaults of the entry points' tables, for help texts and exported constants.
#[napi(object)]
pub struct EntryDefaultsJs {
    pub cli: HashMap<String, f64>,
    pub codemode: HashMap<String, f64>,
    pub autofix: HashMap<String, f64>,
    pub fetch: HashMap<String, f64>,
    pub file_read: HashMap<String, f64>,
    /// The values of `language`, in every option set.
    pub languages: Vec<String>,
}

#[napi]
pub fn entry_defaults() -> EntryDefaultsJs {
    let of = |table: &[Opt]| options::defaults_of(table).into_iter().map(|(k, v)| (k.to_string(), v as f64)).collect();
    let mut cli: HashMap<String, f64> = of(options::CLI_SETTINGS);
    cli.insert("maxConcurrentIsolates".into(), options::CLI_MAX_CONCURRENT_ISOLATES as f64);
    cli.insert("warmPoolSize".into(), options::CLI_WARM_POOL_SIZE as f64);
    cli.extend(of(options::MCP_HTTP));
    EntryDefaultsJs {
        cli,
        codemode: of(options::CODEMODE_EXECUTOR),
        autofix: of(options::AUTOFIX_OPTIONS),
        fetch: of(options::FETCH_CAPABILITY),
        file_read: of(options::FILE_READ_CAPABILITY),
        languages: options::LANGUAGES.iter().map(|l| l.to_string()).collect(),
    }
}
