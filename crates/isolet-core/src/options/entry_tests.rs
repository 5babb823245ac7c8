//! Tests of the other entry points: the CLI, Code Mode, autoFix, MCP and the capabilities.
use super::*;
use crate::limits::IsolateLimits;

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
    assert!(mcp_run_code(&obj(&[("code", s("1")), ("lang", s("typescript"))])).unwrap_err().message.ends_with("did you mean language?"));
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
