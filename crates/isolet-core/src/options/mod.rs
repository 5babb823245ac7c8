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

pub mod doc;

// The table language: `Raw`, `Kind`, `Opt`, `Flag`, the checks of an object against a
// table, and the errors, suggestions and deprecation warnings of every entry point.
mod table;

// One module per entry point. `run`: `runSandbox` and the run plan every entry point
// makes, with the limits the others share. `engine`: `SandboxEngine`, `engine.submit`
// and persistent sandboxes.
mod engine;
mod run;

// Every limit more than one entry point sets, declared once: name, bounds, default.
mod limits;

// The other entry points: the CLI (`isolet run`, `isolet mcp`, `isolet autofix`), Code
// Mode's `IsoletExecutor`, `autoFix(options)`, the MCP tool's arguments and the capability
// factories. Each has a table under its own names; what they share with runSandbox and
// the engine (time, memory, language, isolation) takes its range from the same constants.
mod cli;
mod integrations;

#[cfg(test)]
mod entry_tests;
#[cfg(test)]
mod name_tests;
#[cfg(test)]
mod tests;

pub use cli::{
    autofix_flags, cli_settings, command_flags, mcp_http_settings, unknown_command, unknown_flag, CliSettings, CommandFlag, CLI_FLAGS,
    CLI_MAX_CONCURRENT_ISOLATES, CLI_SETTINGS, CLI_WARM_POOL_SIZE, MCP_FLAGS,
};
pub(crate) use engine::{sandbox_options, sandbox_run};
pub use engine::{
    sandbox_table, EngineConfig, Prelude, ToolCalls, DEFAULT_REQUEST_CPU_TIME_MS, DEFAULT_REQUEST_WALL_TIME_MS,
    DEFAULT_SANDBOX_IDLE_TIMEOUT_MS, ENGINE_CONFIG, ISOLATE_LIMITS, PRELUDE, SANDBOX_LIMITS, SANDBOX_RUN, SUBMIT_REQUEST, TOOL_POLICY,
    TOOL_REFUSAL_NAME,
};
pub use integrations::{
    autofix_options, codemode_executor, fetch_capability, file_read_capability, mcp_http_options, mcp_run_code, AutoFixSettings,
    CodemodeSettings, FetchSettings, McpHttpSettings, TokenSource, AUTOFIX_FLAGS, AUTOFIX_OPTIONS, CODEMODE_EXECUTOR,
    DEFAULT_AUTOFIX_MAX_BYTES, DEFAULT_CODEMODE_TIMEOUT_MS, DEFAULT_MCP_HOST, DEFAULT_MCP_MAX_BODY_BYTES, DEFAULT_MCP_MAX_RUNS_PER_SESSION,
    DEFAULT_MCP_MAX_SESSIONS, DEFAULT_MCP_MAX_SESSIONS_PER_CLIENT, DEFAULT_MCP_SESSION_IDLE_MS, DEFAULT_PROVIDER_TIMEOUT_MS,
    FETCH_CAPABILITY, FILE_READ_CAPABILITY, MCP_HTTP, MCP_HTTP_FLAGS, MCP_RUN_CODE,
};
pub use limits::BRIDGE_LIMITS;
pub use run::{
    check_prelude_shadowing, language_of_file, run_sandbox, ExecMode, GivenBridge, Isolation, RunPlan, UnhandledRejections, CODE_TYPES,
    DEFAULT_ISOLATION, ISOLATION_MODES, LANGUAGES, MAX_TENANT_BYTES, RUN_SANDBOX, UNHANDLED_REJECTIONS,
};
pub use table::{defaults_of, nearest, suggest, take_deprecations, unreadable, Flag, Kind, Opt, OptionsError, Raw, DEPRECATED_NAME_CODE};
