//! Tests of the names: one option per spelling, flags in kebab-case, old spellings and
//! their one-time warnings.
use super::entry_tests::{num, obj, s};
use super::integrations::codemode_table;
use super::table::{fields, meet_deprecated, options_of_flags, take_deprecations_into, Reported};
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
    assert_eq!((new.limits.memory_mb, new.allowed_origins.as_slice(), new.idle_timeout_ms), (32, &["http://a".to_string()][..], Some(70)));
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
    let new = autofix_flags(&obj(&[("timeout-ms", s("250")), ("memory-limit-mb", s("32")), ("provider-timeout-ms", s("900"))])).unwrap();
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
