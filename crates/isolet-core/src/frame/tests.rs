#[test]
fn sandbox_frames_round_trip_and_refuse_what_no_parent_sends() {
    use crate::sandbox::{CloseReason, SandboxLimits, SandboxPlan};
    let raw = crate::options::Raw::Object(vec![(
        "capabilities".into(),
        crate::options::Raw::Array(vec![crate::options::Raw::String("f".into())]),
    )]);
    let mut plan = crate::sandbox::sandbox_plan(&raw).unwrap();
    plan.limits = SandboxLimits { total_cpu_time_ms: Some(5), idle_timeout_ms: None, max_total_host_calls: Some(0) };
    let open = encode_sandbox_open(7, &plan);
    let h = Header::decode(&open).unwrap();
    assert_eq!((h.kind, h.run_id, h.len as usize), (Kind::SandboxOpen, 7, open.len() - HEADER_BYTES));
    assert!(h.kind.from_parent());
    let back: SandboxPlan = decode_sandbox_open(&open[HEADER_BYTES..]).unwrap();
    assert_eq!(back, plan);
    let mut run = plan.base.clone();
    run.code = "x + 1".into();
    let frame = encode_sandbox_run(3, 7, &run, true, Some(("f", &[1, 2, 3])));
    let h = Header::decode(&frame).unwrap();
    assert_eq!((h.kind, h.run_id, h.call_id), (Kind::SandboxRun, 3, 7));
    let (p, started, call) = decode_sandbox_run(&frame[HEADER_BYTES..]).unwrap();
    assert_eq!((p, started, call), (run.clone(), true, Some(("f".to_string(), vec![1, 2, 3]))));
    let frame = encode_sandbox_run(4, 7, &run, false, None);
    assert_eq!(decode_sandbox_run(&frame[HEADER_BYTES..]).unwrap().2, None);
    // Truncated frames are errors, never panics.
    for cut in 0..frame.len() - HEADER_BYTES {
        assert!(decode_sandbox_run(&frame[HEADER_BYTES..HEADER_BYTES + cut]).is_err());
    }
    let closed = encode_sandbox_closed(7, CloseReason::OutOfMemory);
    let h = Header::decode(&closed).unwrap();
    assert!(!h.kind.from_parent());
    assert_eq!(decode_sandbox_closed(&closed[HEADER_BYTES..]).unwrap(), CloseReason::OutOfMemory);
    let mut bad = FrameWriter::new(Kind::SandboxClosed, 7, 0, 8);
    bad.str("gone fishing");
    assert!(decode_sandbox_closed(&bad.finish()[HEADER_BYTES..]).is_err());
}

use super::*;

fn payload(frame: &[u8]) -> (Header, &[u8]) {
    let h = Header::decode(frame).unwrap();
    assert_eq!(h.len as usize, frame.len() - HEADER_BYTES, "length field matches the payload");
    (h, &frame[HEADER_BYTES..])
}

fn plan() -> RunPlan {
    RunPlan {
        code: "return 1 + ünïcode".into(),
        mode: ExecMode::AsyncBody,
        language: "typescript",
        isolation: Some(Isolation::Thread),
        limits: IsolateLimits { memory_mb: 64, wall_time_ms: 5000, cpu_time_ms: Some(77) },
        bridge: BridgeLimits {
            max_message_bytes: 1 << 24,
            max_messages: 1000,
            max_output_bytes: 1 << 20,
            max_log_entries: 10,
            max_log_bytes: 4096,
            max_pending_host_call_bytes: 1 << 26,
            max_pending_host_calls: 128,
            max_output_values: 1000,
            max_message_values: 2000,
            max_pending_host_call_values: 8000,
        },
        tools: vec!["a".into(), "b.c".into()],
        max_calls: vec![Some(3), None],
        data_object: true,
        data_values: [("k".to_string(), vec![1, 2, 3]), ("__proto__".to_string(), vec![])].into_iter().collect(),
        wasm: false,
        web: true,
        unhandled_rejections: crate::options::UnhandledRejections::Error,
        stream_console: true,
        tenant: Some("team-a".into()),
        modules: [("util.ts".to_string(), "export const x = 1".to_string()), ("zod".to_string(), String::new())].into_iter().collect(),
        module_limits: crate::modules::ModuleLimits { max_modules: 9, max_module_bytes: 1000 },
        module_resolver: true,
        max_queue_ms: None,
        web_fetch: true,
    }
}

#[test]
fn control_frames_round_trip_and_truncations_are_errors() {
    let pool = PoolConfig {
        memory_mb: 64,
        max_concurrent: 2,
        warm_pool_size: 1,
        max_queue: 2,
        max_queue_ms: Some(1500),
        max_open_sandboxes: 3,
        max_open_sandboxes_per_tenant: 1,
    };
    let start = WireStart {
        parent_pid: 7,
        pool,
        wasm_modules: vec![("m".into(), vec![0, 97, 115, 109])],
        prelude: Some("var lib = 1;".into()),
        prelude_modules: [("lib/a.js".to_string(), "export const a = 1".to_string())].into_iter().collect(),
        code_cache_bytes: 1 << 20,
        web: true,
    };
    let frame = start.encode();
    let (h, body) = payload(&frame);
    assert_eq!((h.kind, h.run_id), (Kind::Start, 0));
    assert!(h.kind.from_parent() && Kind::Shutdown.from_parent());
    assert_eq!(WireStart::decode(body).unwrap(), start);
    for n in 0..body.len() {
        assert!(WireStart::decode(&body[..n]).is_err());
    }
    let ready = WireReady {
        pid: 9,
        lockdown: WireLockdown {
            seccomp: true,
            no_new_privs: true,
            parent_death_signal: false,
            reason: Some("why".into()),
            refused: vec!["execve".into()],
            io_uring_rings: 0,
        },
        health: WireHealth { warm: 2, ..Default::default() },
    };
    let frame = ready.encode();
    let (h, body) = payload(&frame);
    assert!(!h.kind.from_parent());
    assert_eq!(WireReady::decode(body).unwrap(), ready);
    for n in 0..body.len() {
        assert!(WireReady::decode(&body[..n]).is_err());
    }
    let frame = encode_invalid("bad module");
    assert_eq!(decode_invalid(payload(&frame).1).unwrap(), "bad module");
    let frame = encode_lower(&[7, 9]);
    assert_eq!(decode_lower(payload(&frame).1).unwrap(), [7, 9]);
    let too_many: Vec<u32> = (0..=MAX_LOWER_TIDS as u32).collect();
    assert!(decode_lower(payload(&encode_lower(&too_many)).1).is_err());
}

#[test]
fn header_round_trips_and_rejects_bad_kinds_and_reserved_bytes() {
    let h = Header { kind: Kind::HostCall, run_id: 0xdead_beef, call_id: 7, len: 99 };
    assert_eq!(Header::decode(&h.encode()).unwrap(), h);
    let mut bad = h.encode();
    bad[0] = 99;
    assert_eq!(Header::decode(&bad), Err(FrameError::UnknownKind(99)));
    let mut bad = h.encode();
    bad[2] = 1;
    assert_eq!(Header::decode(&bad), Err(FrameError::Reserved));
    assert_eq!(Header::decode(&[1, 0, 0]), Err(FrameError::ShortHeader));
    assert!(Kind::Abort.from_parent() && !Kind::Done.from_parent());
    for b in 0..=255u8 {
        if let Some(k) = Kind::from_u8(b) {
            assert_eq!(k as u8, b);
        }
    }
}

#[test]
fn plans_round_trip() {
    let p = plan();
    let frame = encode_run(42, &p, false);
    let (h, body) = payload(&frame);
    assert_eq!((h.kind, h.run_id), (Kind::Run, 42));
    assert_eq!(decode_run(body).unwrap(), (p, false));
    let mut other = plan();
    other.limits.cpu_time_ms = None;
    other.mode = ExecMode::Script;
    other.language = "javascript";
    other.isolation = None;
    other.tenant = None;
    assert_eq!(decode_run(payload(&encode_run(1, &other, true)).1).unwrap(), (other, true));
    let mut module = plan();
    module.mode = ExecMode::Module;
    module.module_resolver = false;
    assert_eq!(decode_run(payload(&encode_run(1, &module, true)).1).unwrap(), (module, true));
}

#[test]
fn a_plan_no_check_could_make_is_refused() {
    let mut p = plan();
    p.max_calls.pop();
    assert_eq!(decode_run(payload(&encode_run(1, &p, true)).1), Err(FrameError::Invalid("one maxCalls entry per tool")));
    let mut p = plan();
    p.language = "python";
    assert_eq!(decode_run(payload(&encode_run(1, &p, true)).1), Err(FrameError::Invalid("language")));
    let mut p = plan();
    p.modules.insert("./not/normalized.js".into(), String::new());
    assert_eq!(decode_run(payload(&encode_run(1, &p, true)).1), Err(FrameError::Invalid("module key")));
    let mut p = plan();
    p.module_limits.max_modules = 2; // two modules and the run's own code
    assert_eq!(decode_run(payload(&encode_run(1, &p, true)).1), Err(FrameError::Invalid("modules within their limits")));
    let mut p = plan();
    p.module_limits.max_module_bytes = 5;
    assert_eq!(decode_run(payload(&encode_run(1, &p, true)).1), Err(FrameError::Invalid("modules within their limits")));
}

#[test]
fn every_truncation_of_a_plan_is_an_error_not_a_panic() {
    let frame = encode_run(1, &plan(), true);
    let body = &frame[HEADER_BYTES..];
    for n in 0..body.len() {
        assert!(decode_run(&body[..n]).is_err(), "prefix of {n} bytes");
    }
    let mut longer = body.to_vec();
    longer.push(0);
    assert_eq!(decode_run(&longer), Err(FrameError::Trailing(1)));
}

#[test]
fn a_huge_count_does_not_allocate_by_the_count() {
    // tools count u32::MAX with nothing behind it: Truncated, after reserving at
    // most the payload's length.
    let mut w = FrameWriter::new(Kind::Run, 1, 0, 0);
    w.str("").u8(0).str("javascript").u8(0).u32(8).u64(1).u8(0);
    w.u64(1).u32(1).u64(1).u64(1).u64(1).u64(1).u32(1).u32(1).u32(1).u32(1).u32(u32::MAX);
    let frame = w.finish();
    assert_eq!(decode_run(&frame[HEADER_BYTES..]), Err(FrameError::Truncated));
}

fn done(result: Result<(), Failure>) -> WireDone {
    WireDone {
        stats: WireStats {
            wall_time_ms: 1.5,
            cpu_time_ms: 0.25,
            heap_peak_bytes: 1e6,
            heap_used_bytes: 5e5,
            host_calls: 3,
            unhandled_rejections: 2,
        },
        logs: vec![LogEntry { level: LogLevel::Warn, message: "w".into() }, LogEntry { level: LogLevel::Debug, message: String::new() }],
        health: WireHealth {
            stuck: 1,
            threads: 4,
            warm: 2,
            warming: 1,
            engine_threads: 3,
            quarantined: 1,
            warm_starts: 10,
            cold_starts: 2,
            code_cache: CodeCacheStats { hits: 5, misses: 6, rejected: 1, evictions: 2, entries: 3, bytes: 4096, budget_bytes: 1 << 25 },
        },
        result,
    }
}

#[test]
fn done_round_trips_with_its_result_as_the_tail() {
    let d = done(Ok(()));
    let output = b"serialized result";
    let mut frame = d.encode_head(9, output);
    frame.extend_from_slice(output);
    let (h, body) = payload(&frame);
    assert_eq!((h.kind, h.run_id), (Kind::Done, 9));
    let (back, at) = WireDone::decode(body, 100, 1 << 20).unwrap();
    assert_eq!(back, d);
    assert_eq!(&body[at..], output);
}

#[test]
fn a_done_over_its_runs_log_limits_is_refused() {
    let mut d = done(Ok(()));
    d.logs = (0..5).map(|_| LogEntry { level: LogLevel::Log, message: "x".repeat(100) }).collect();
    let mut frame = d.encode_head(9, b"r");
    frame.extend_from_slice(b"r");
    let body = payload(&frame).1;
    // Entries: up to maxLogEntries and the one marker entry.
    assert!(WireDone::decode(body, 4, 1 << 20).is_ok());
    assert_eq!(WireDone::decode(body, 3, 1 << 20).unwrap_err(), FrameError::Invalid("more log entries than the run allows"));
    // Bytes: up to maxLogBytes and 64 per entry.
    assert!(WireDone::decode(body, 10, 500 - 5 * 64).is_ok());
    assert_eq!(WireDone::decode(body, 10, 499 - 5 * 64).unwrap_err(), FrameError::Invalid("more log bytes than the run allows"));
}

#[test]
fn failures_round_trip_with_every_detail() {
    let thrown =
        Thrown { name: "TypeError".into(), message: "x".into(), stack: Some("at y".into()), line: Some(3), column: None, fields: None };
    let fields =
        Thrown { name: "Object".into(), message: "[object Object]".into(), fields: Some(vec![0xff, 0x0f, b'o', 0]), ..Default::default() };
    for f in [
        Failure::threw(thrown),
        Failure::threw(fields),
        Failure::unhandled_rejection(Thrown { name: "Error".into(), message: "lost".into(), ..Default::default() }),
        Failure::wall_timeout(5),
        Failure::cpu_timeout(6),
        Failure::too_many_output_values(7),
        Failure::too_many_output_bytes(8),
        Failure::new(ErrorKind::Crashed, "gone"),
    ] {
        let d = done(Err(f));
        let frame = d.encode_head(2, &[]);
        let (back, at) = WireDone::decode(payload(&frame).1, 100, 1 << 20).unwrap();
        assert_eq!(back, d);
        assert_eq!(at, frame.len() - HEADER_BYTES);
    }
    // A failed done has no tail.
    let mut frame = done(Err(Failure::new(ErrorKind::Internal, "i"))).encode_head(2, &[]);
    frame.push(0);
    let len = (frame.len() - HEADER_BYTES) as u32;
    frame[LENGTH_OFFSET..HEADER_BYTES].copy_from_slice(&len.to_le_bytes());
    assert_eq!(WireDone::decode(payload(&frame).1, 100, 1 << 20).unwrap_err(), FrameError::Trailing(1));
}

#[test]
fn a_host_cannot_send_thrown_fields_over_the_seams_limit() {
    let big = Thrown { name: "Object".into(), fields: Some(vec![0; crate::seam_policy::MAX_ERROR_TEXT_BYTES + 1]), ..Default::default() };
    let frame = done(Err(Failure::threw(big))).encode_head(2, &[]);
    assert_eq!(WireDone::decode(payload(&frame).1, 100, 1 << 20).unwrap_err(), FrameError::Invalid("thrown fields over their byte limit"));
}

#[test]
fn garbage_never_panics_a_decoder() {
    // A small xorshift so the test is deterministic.
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    for _ in 0..20_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % 64) as usize;
        let bytes: Vec<u8> = (0..len).map(|i| (x >> (i % 8 * 8)) as u8 ^ i as u8).collect();
        let _ = Header::decode(&bytes);
        let _ = decode_run(&bytes);
        let _ = WireDone::decode(&bytes, 100, 1 << 20);
        let _ = WireHealth::decode(&bytes);
        let _ = decode_host_call(&bytes);
        let _ = decode_console(&bytes);
        let _ = decode_reject(&bytes);
        let _ = decode_answer(&bytes);
    }
}

#[test]
fn small_frames_round_trip() {
    let (h, body) = {
        let f = encode_console(5, LogLevel::Error, "boom");
        let h = Header::decode(&f).unwrap();
        (h, f[HEADER_BYTES..].to_vec())
    };
    assert_eq!((h.kind, h.run_id), (Kind::Console, 5));
    assert_eq!(decode_console(&body).unwrap(), (LogLevel::Error, "boom"));

    let f = encode_reject(1, 2, "RangeError", "too big");
    assert_eq!(decode_reject(payload(&f).1).unwrap(), ("RangeError", "too big"));

    let mut f = encode_host_call_head(1, 8, "fetch", 3);
    f.extend_from_slice(&[7, 8, 9]);
    let (h, body) = payload(&f);
    assert_eq!(h.call_id, 8);
    let (name, at) = decode_host_call(body).unwrap();
    assert_eq!((name, &body[at..]), ("fetch", &[7u8, 8, 9][..]));

    let mut f = encode_answer_head(1, 4, Some(2), None);
    f.extend_from_slice(&[5, 6]);
    assert!(matches!(decode_answer(payload(&f).1).unwrap(), WireAnswer::Value(&[5, 6])));
    let f = encode_answer_head(1, 4, None, Some("nope"));
    assert!(matches!(decode_answer(payload(&f).1).unwrap(), WireAnswer::Error("nope")));

    let h = WireHealth { stuck: 2, ..Default::default() };
    assert_eq!(WireHealth::decode(payload(&h.encode()).1).unwrap(), h);
    let only = header_only(Kind::Abort, 3, 0, 0);
    assert_eq!(Header::decode(&only).unwrap(), Header { kind: Kind::Abort, run_id: 3, call_id: 0, len: 0 });
}
