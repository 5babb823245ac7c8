//! `docs/options.md`, rendered from the option tables: every entry point, each option
//! with its kind, range, default, other spellings and flag. A test fails when the
//! committed page is not the render; `ISOLET_WRITE_DOCS=1 cargo test -p isolet-core
//! options_page` rewrites it.
use std::fmt::Write;

use super::engine::WASM_MODULE;
use super::*;

/// One section of the page: an entry point or an object some entry points take.
pub(crate) struct Section {
    pub title: &'static str,
    /// The lead paragraph.
    pub about: &'static str,
    pub table: &'static [Opt],
    /// Flags that set its options, with the commands that take them.
    pub flags: &'static [(&'static [Flag], &'static str)],
}

const fn section(title: &'static str, about: &'static str, table: &'static [Opt]) -> Section {
    Section { title, about, table, flags: &[] }
}

/// Every option set, in the page's order.
pub(crate) fn sections() -> Vec<Section> {
    vec![
        section("runSandbox", "`runSandbox(code, options)`: one run in a fresh isolate.", RUN_SANDBOX),
        section(
            "createSandbox",
            "`createSandbox(options)` and `engine.openSandbox(options)`: a persistent sandbox. runSandbox's options but `signal` (`timeoutMs` and `cpuTimeMs` are each run's defaults), and the sandbox-wide limits.",
            sandbox_table(),
        ),
        section("sandbox.run", "`sandbox.run(code, options)` of a persistent sandbox.", SANDBOX_RUN),
        section(
            "SandboxEngine",
            "`new SandboxEngine(config)`, and the `engine` object of the CLI's config file. `memoryMb` is @coda/sandbox's name for `memoryLimitMb`.",
            ENGINE_CONFIG,
        ),
        section("engine.submit", "`engine.submit(request)`: the fields of an `ExecuteMessage`, as in @coda/sandbox.", SUBMIT_REQUEST),
        section("IsolateLimits", "A SandboxEngine's `defaultIsolateLimits` and a request's `isolateLimits`: @coda/sandbox's names.", ISOLATE_LIMITS),
        section("BridgeLimits", "A SandboxEngine's `defaultBridgeLimits` and a request's `bridgeLimits`: @coda/sandbox's names.", BRIDGE_LIMITS),
        section("toolPolicy", "A request's `toolPolicy`.", TOOL_POLICY),
        section("prelude", "A SandboxEngine's `prelude`, given as an object (a string is its `source`).", PRELUDE),
        section("wasmModules", "Each entry of a SandboxEngine's `wasmModules`.", WASM_MODULE),
        section(
            "IsoletExecutor",
            "`new IsoletExecutor(options)` of `isolet/codemode`: these, and every [SandboxEngine](#sandboxengine) option (`web` is `true` unless given).",
            CODEMODE_EXECUTOR,
        ),
        Section {
            title: "autoFix",
            about: "`autoFix(options)`, and the flags of `isolet autofix` that set them.",
            table: AUTOFIX_OPTIONS,
            flags: &[(AUTOFIX_FLAGS, "")],
        },
        Section {
            title: "isolet run and isolet mcp",
            about: "The keys of the `--config` file of `isolet run` and `isolet mcp` (and of `mcpSettings(config)` of `isolet/mcp`), and the flags that set them: a flag wins over the file. `isolet run` ignores `http`, `stateful` and `idleTimeoutMs`.",
            table: CLI_SETTINGS,
            flags: &[(CLI_FLAGS, ""), (MCP_FLAGS, "isolet mcp")],
        },
        Section {
            title: "MCP over HTTP",
            about: "The `http` object of the config file, the flags of `isolet mcp` that set it, and the options of `serveHttp(settings, options)` (where `listen` defaults to a free local port).",
            table: MCP_HTTP,
            flags: &[(MCP_HTTP_FLAGS, "")],
        },
        section("run_code", "The arguments of the `run_code` tool of `isolet mcp`.", MCP_RUN_CODE),
        section("createFetchCapability", "`createFetchCapability(options)`.", FETCH_CAPABILITY),
        section("createFileReadCapability", "`createFileReadCapability(dir, options)`.", FILE_READ_CAPABILITY),
    ]
}

fn same_table(a: &[Opt], b: &[Opt]) -> bool {
    a.len() == b.len() && a.iter().zip(b).all(|(x, y)| x.name == y.name)
}

/// GitHub's anchor for a heading.
fn anchor(title: &str) -> String {
    title
        .chars()
        .filter_map(|c| match c {
            ' ' => Some('-'),
            c if c.is_ascii_alphanumeric() || c == '-' || c == '_' => Some(c.to_ascii_lowercase()),
            _ => None,
        })
        .collect()
}

fn link(sections: &[Section], table: &[Opt]) -> String {
    match sections.iter().find(|s| same_table(s.table, table)) {
        Some(s) => format!("object: [{}](#{})", s.title, anchor(s.title)),
        None => "object".into(),
    }
}

fn code_list(names: impl IntoIterator<Item = String>) -> String {
    names.into_iter().map(|n| format!("`{n}`")).collect::<Vec<_>>().join(", ")
}

fn kind(sections: &[Section], k: &Kind) -> String {
    match k {
        Kind::Whole { min, max } => format!("whole number, {min} to {max}"),
        Kind::OneOf(choices) => choices.iter().map(|c| format!("`'{c}'`")).collect::<Vec<_>>().join(" or "),
        Kind::Text => "string".into(),
        Kind::Label { max_bytes } => format!("string, 1 to {max_bytes} bytes"),
        Kind::Names => "array of strings".into(),
        Kind::Tools => "object of functions, by name".into(),
        Kind::Object(table) => link(sections, table),
        Kind::CountMap { max } => format!("object of whole numbers, 0 to {max}, by tool name"),
        Kind::BytesMap => "object of values, by name".into(),
        Kind::WasmModules => format!("array of {}", link(sections, WASM_MODULE).replace("object: ", "")),
        Kind::Shaped(what) => what.replace('|', "\\|"),
        Kind::Bool => "boolean".into(),
        Kind::Function => "function".into(),
        Kind::ModuleMap => "object of module sources (strings), by key".into(),
        Kind::Prelude => format!("string, or {}", link(sections, PRELUDE)),
    }
}

/// The flags that set `option` (its old spellings if `deprecated`), as `` `--flag` ``, with
/// the command when only one takes it.
fn flags_of(s: &Section, option: &str, deprecated: bool) -> Vec<String> {
    let mut out = Vec::new();
    for (map, command) in s.flags {
        for f in map.iter().filter(|f| f.option == option) {
            let names: Vec<&str> = if deprecated { f.deprecated.to_vec() } else { vec![f.flag] };
            for name in names {
                out.push(if command.is_empty() { format!("`--{name}`") } else { format!("`--{name}` ({command})") });
            }
        }
    }
    out
}

/// The page.
pub fn render() -> String {
    let sections = sections();
    let mut page = String::new();
    let p = &mut page;
    p.push_str("# Options reference\n\n");
    p.push_str(
        "<!-- Rendered from the tables in crates/isolet-core/src/options/ by `ISOLET_WRITE_DOCS=1 cargo test -p isolet-core options_page`: change the tables, not this page. -->\n\n",
    );
    p.push_str(
        "Every option of every entry point, as isolet checks it. One concept has one name everywhere: \
         `timeoutMs` (wall-clock limit), `cpuTimeMs`, `memoryLimitMb` (heap limit), `idleTimeoutMs`, \
         `allowedOrigins`, `providerTimeoutMs`; a flag of the CLI is the option's name in kebab-case \
         (`--timeout-ms`, `--memory-limit-mb`), and a flag of an array option may be given more than once. \
         The objects of @coda/sandbox's `SandboxEngine` keep that package's names.\n\n",
    );
    p.push_str(
        "- **Also accepted**: a seed's own name for the option (`memoryMb` of `SandboxEngine`), accepted for good.\n\
         - **Deprecated**: an old spelling, still accepted in this release: it sets the option, and its first use \
         in a process emits a `DeprecationWarning` (code `ISOLET_DEP_OPTION_NAME`) that names the new spelling. \
         Two spellings of one option given together are a `SandboxValidationError` naming both.\n\
         - **Suggested for**: names that are not accepted, but for which an error suggests this option. Any \
         other unknown name is a `SandboxValidationError` that suggests the nearest known one.\n\
         - A default left blank is described in the entry point's guide (none, or derived from another option).\n\n",
    );
    p.push_str("## Renamed in this release\n\n| Where | Deprecated | Use |\n| --- | --- | --- |\n");
    for s in &sections {
        for o in s.table {
            for old in o.deprecated {
                let _ = writeln!(p, "| [{}](#{}) | `{old}` | `{}` |", s.title, anchor(s.title), o.name);
            }
        }
        for (map, _) in s.flags {
            for f in map.iter() {
                for old in f.deprecated {
                    let _ = writeln!(p, "| [{}](#{}) flag | `--{old}` | `--{}` |", s.title, anchor(s.title), f.flag);
                }
            }
        }
    }
    p.push_str("\n## Entry points\n\n");
    for s in &sections {
        let _ = writeln!(p, "- [{}](#{})", s.title, anchor(s.title));
    }
    for s in &sections {
        let _ = write!(p, "\n## {}\n\n{}\n\n", s.title, s.about);
        let heads = ["Option", "Flag", "Kind", "Default", "Also accepted", "Deprecated", "Suggested for"];
        let rows: Vec<[String; 7]> = s
            .table
            .iter()
            .map(|o| {
                let deprecated = [code_list(o.deprecated.iter().map(|d| d.to_string())), flags_of(s, o.name, true).join(", ")];
                [
                    format!("`{}`", o.name),
                    flags_of(s, o.name, false).join(", "),
                    kind(&sections, &o.kind),
                    o.default.map(|d| d.to_string()).unwrap_or_default(),
                    code_list(o.seed_names.iter().map(|n| n.to_string())),
                    deprecated.into_iter().filter(|d| !d.is_empty()).collect::<Vec<_>>().join(", "),
                    code_list(o.aliases.iter().map(|a| a.to_string())),
                ]
            })
            .collect();
        // Only the columns some option fills (Option and Kind always).
        let shown: Vec<usize> = (0..heads.len()).filter(|&c| c == 0 || c == 2 || rows.iter().any(|r| !r[c].is_empty())).collect();
        let line = |cells: Vec<&str>| format!("| {} |\n", cells.join(" | "));
        p.push_str(&line(shown.iter().map(|&c| heads[c]).collect()));
        p.push_str(&line(shown.iter().map(|_| "---").collect()));
        for r in &rows {
            p.push_str(&line(shown.iter().map(|&c| r[c].as_str()).collect()));
        }
    }
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_page() {
        let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/options.md");
        let page = render();
        if std::env::var_os("ISOLET_WRITE_DOCS").is_some() {
            std::fs::write(path, &page).expect("write docs/options.md");
        }
        let committed = std::fs::read_to_string(path).unwrap_or_default();
        assert!(
            committed == page,
            "docs/options.md is not the render of the option tables: run `ISOLET_WRITE_DOCS=1 cargo test -p isolet-core options_page`"
        );
    }

    #[test]
    fn every_table_has_a_section_and_every_object_a_link() {
        let sections = sections();
        for s in &sections {
            for o in s.table {
                if let Kind::Object(t) = o.kind {
                    assert!(sections.iter().any(|s| same_table(s.table, t)), "{}.{} links nowhere", s.title, o.name);
                }
            }
        }
        assert_eq!(anchor("isolet run and isolet mcp"), "isolet-run-and-isolet-mcp");
        assert_eq!(anchor("sandbox.run"), "sandboxrun");
    }
}
