//! The plans a run and a persistent sandbox travel as: `Run`, `SandboxOpen`,
//! `SandboxRun` and `SandboxClosed` payloads, encoded and checked when decoded.
use super::*;

/// `Run`: a checked plan as it travels to a sandbox host, and whether the caller wants
/// the `started` event (a choice of the submission, not of the plan).
pub fn encode_run(run_id: u32, plan: &RunPlan, started_event: bool) -> Vec<u8> {
    let data_bytes: usize = plan.data_values.iter().map(|(k, v)| k.len() + v.len() + 8).sum();
    let module_bytes: usize = plan.modules.iter().map(|(k, v)| k.len() + v.len() + 8).sum();
    let mut w = FrameWriter::new(Kind::Run, run_id, 0, plan.code.len() + data_bytes + module_bytes + 180);
    w.str(&plan.code).u8(match plan.mode {
        ExecMode::Script => 0,
        ExecMode::AsyncBody => 1,
        ExecMode::Module => 2,
    });
    w.str(plan.language);
    w.u8(match plan.isolation {
        None => 0,
        Some(Isolation::Process) => 1,
        Some(Isolation::Thread) => 2,
    });
    let (l, b) = (&plan.limits, &plan.bridge);
    w.u32(l.memory_mb).u64(l.wall_time_ms);
    match l.cpu_time_ms {
        Some(v) => w.u8(1).u64(v),
        None => w.u8(0),
    };
    w.u64(b.max_message_bytes as u64).u32(b.max_messages).u64(b.max_output_bytes as u64);
    w.u64(b.max_log_entries as u64).u64(b.max_log_bytes as u64);
    w.u64(b.max_pending_host_call_bytes as u64).u32(b.max_pending_host_calls);
    w.u32(b.max_output_values).u32(b.max_message_values).u32(b.max_pending_host_call_values);
    w.u32(plan.tools.len() as u32);
    for t in &plan.tools {
        w.str(t);
    }
    w.u32(plan.max_calls.len() as u32);
    for m in &plan.max_calls {
        w.opt_u32(*m);
    }
    w.bool(plan.data_object).u32(plan.data_values.len() as u32);
    for (k, v) in &plan.data_values {
        w.str(k).bytes(v);
    }
    w.bool(plan.wasm).bool(plan.stream_console).bool(plan.web);
    w.bool(plan.unhandled_rejections == crate::options::UnhandledRejections::Error);
    match &plan.tenant {
        Some(t) => w.u8(1).str(t),
        None => w.u8(0),
    };
    w.u32(plan.modules.len() as u32);
    for (k, v) in &plan.modules {
        w.str(k).str(v);
    }
    w.u32(plan.module_limits.max_modules).u64(plan.module_limits.max_module_bytes).bool(plan.module_resolver);
    w.bool(plan.web_fetch);
    w.bool(started_event);
    w.finish()
}

pub(super) fn opt_u64(w: &mut FrameWriter, v: Option<u64>) {
    match v {
        Some(n) => w.u8(1).u64(n),
        None => w.u8(0),
    };
}

pub(super) fn read_opt_u64(r: &mut Reader) -> Result<Option<u64>, FrameError> {
    Ok(if r.bool()? { Some(r.u64()?) } else { None })
}

/// `SandboxOpen`: the sandbox-wide limits, then its base plan as a `Run` payload.
pub fn encode_sandbox_open(sandbox: u32, plan: &crate::sandbox::SandboxPlan) -> Vec<u8> {
    let run = encode_run(0, &plan.base, false);
    let mut w = FrameWriter::new(Kind::SandboxOpen, sandbox, 0, run.len() + 32);
    opt_u64(&mut w, plan.limits.total_cpu_time_ms);
    opt_u64(&mut w, plan.limits.idle_timeout_ms);
    opt_u64(&mut w, plan.limits.max_total_host_calls);
    w.tail(&run[HEADER_BYTES..]);
    w.finish()
}

pub fn decode_sandbox_open(payload: &[u8]) -> Result<crate::sandbox::SandboxPlan, FrameError> {
    let mut r = Reader::new(payload);
    let limits = crate::sandbox::SandboxLimits {
        total_cpu_time_ms: read_opt_u64(&mut r)?,
        idle_timeout_ms: read_opt_u64(&mut r)?,
        max_total_host_calls: read_opt_u64(&mut r)?,
    };
    let (base, _) = decode_run(r.rest())?;
    Ok(crate::sandbox::SandboxPlan { base, limits })
}

/// `SandboxRun`: the global function to call with its serialized arguments (or none:
/// run the plan's code), then the run's plan as a `Run` payload.
pub fn encode_sandbox_run(run_id: u32, sandbox: u32, plan: &RunPlan, started_event: bool, call: Option<(&str, &[u8])>) -> Vec<u8> {
    let run = encode_run(0, plan, started_event);
    let extra = call.map_or(0, |(n, a)| n.len() + a.len() + 8);
    let mut w = FrameWriter::new(Kind::SandboxRun, run_id, sandbox, run.len() + extra + 8);
    match call {
        Some((name, args)) => w.u8(1).str(name).bytes(args),
        None => w.u8(0),
    };
    w.tail(&run[HEADER_BYTES..]);
    w.finish()
}

/// `sandbox.call`: the global function's name and its serialized arguments (an array).
pub type SandboxCall = (String, Vec<u8>);

/// A `SandboxRun` frame's plan, `started` choice and call.
pub fn decode_sandbox_run(payload: &[u8]) -> Result<(RunPlan, bool, Option<SandboxCall>), FrameError> {
    let mut r = Reader::new(payload);
    let call = if r.bool()? { Some((r.str()?.to_string(), r.bytes()?.to_vec())) } else { None };
    let (plan, started_event) = decode_run(r.rest())?;
    Ok((plan, started_event, call))
}

/// `SandboxClosed`: why the host closed the sandbox.
pub fn encode_sandbox_closed(sandbox: u32, reason: crate::sandbox::CloseReason) -> Vec<u8> {
    let mut w = FrameWriter::new(Kind::SandboxClosed, sandbox, 0, 16);
    w.str(reason.as_str());
    w.finish()
}

pub fn decode_sandbox_closed(payload: &[u8]) -> Result<crate::sandbox::CloseReason, FrameError> {
    let mut r = Reader::new(payload);
    let reason = crate::sandbox::CloseReason::named(r.str()?).ok_or(FrameError::Invalid("close reason"))?;
    r.end()?;
    Ok(reason)
}

/// A `Run` frame's plan and `started` choice. A plan no checked plan could be (a language
/// isolet does not know, a call limit per tool missing) is refused like a malformed frame.
pub fn decode_run(payload: &[u8]) -> Result<(RunPlan, bool), FrameError> {
    let mut r = Reader::new(payload);
    let code = r.str()?.to_string();
    let mode = match r.u8()? {
        0 => ExecMode::Script,
        1 => ExecMode::AsyncBody,
        2 => ExecMode::Module,
        _ => return Err(FrameError::Invalid("mode")),
    };
    let language = r.str()?;
    let language = *LANGUAGES.iter().find(|l| **l == language).ok_or(FrameError::Invalid("language"))?;
    let isolation = match r.u8()? {
        0 => None,
        1 => Some(Isolation::Process),
        2 => Some(Isolation::Thread),
        _ => return Err(FrameError::Invalid("isolation")),
    };
    let memory_mb = r.u32()?;
    let wall_time_ms = r.u64()?;
    let cpu_time_ms = if r.bool()? { Some(r.u64()?) } else { None };
    let bridge = BridgeLimits {
        max_message_bytes: r.u64()? as usize,
        max_messages: r.u32()?,
        max_output_bytes: r.u64()? as usize,
        max_log_entries: r.u64()? as usize,
        max_log_bytes: r.u64()? as usize,
        max_pending_host_call_bytes: r.u64()? as usize,
        max_pending_host_calls: r.u32()?,
        max_output_values: r.u32()?,
        max_message_values: r.u32()?,
        max_pending_host_call_values: r.u32()?,
    };
    // Counts are bounded by the payload (each entry takes at least one byte), so a
    // bad count cannot make us reserve much.
    let n = r.u32()? as usize;
    let mut tools = Vec::with_capacity(n.min(payload.len()));
    for _ in 0..n {
        tools.push(r.str()?.to_string());
    }
    let n = r.u32()? as usize;
    if n != tools.len() {
        return Err(FrameError::Invalid("one maxCalls entry per tool"));
    }
    let mut max_calls = Vec::with_capacity(n);
    for _ in 0..n {
        max_calls.push(r.opt_u32()?);
    }
    let data_object = r.bool()?;
    let n = r.u32()? as usize;
    let mut data_values = BTreeMap::new();
    for _ in 0..n {
        let k = r.str()?.to_string();
        data_values.insert(k, r.bytes()?.to_vec());
    }
    let (wasm, stream_console, web) = (r.bool()?, r.bool()?, r.bool()?);
    let unhandled_rejections =
        if r.bool()? { crate::options::UnhandledRejections::Error } else { crate::options::UnhandledRejections::Warn };
    let tenant = if r.bool()? { Some(r.str()?.to_string()) } else { None };
    let n = r.u32()? as usize;
    let mut modules = BTreeMap::new();
    for _ in 0..n {
        let k = r.str()?.to_string();
        // Keys are as the options check leaves them: a key it would have changed is no
        // key of a checked plan.
        if crate::modules::map_key(&k).ok().as_deref() != Some(k.as_str()) {
            return Err(FrameError::Invalid("module key"));
        }
        modules.insert(k, r.str()?.to_string());
    }
    if modules.len() != n {
        return Err(FrameError::Invalid("module keys are distinct"));
    }
    let module_limits = crate::modules::ModuleLimits { max_modules: r.u32()?, max_module_bytes: r.u64()? };
    if module_limits.max_modules == 0 || module_limits.max_module_bytes == 0 || crate::modules::check_map(&modules, module_limits).is_err()
    {
        return Err(FrameError::Invalid("modules within their limits"));
    }
    let module_resolver = r.bool()?;
    let web_fetch = r.bool()?;
    let started_event = r.bool()?;
    r.end()?;
    let plan = RunPlan {
        code,
        mode,
        language,
        isolation,
        limits: IsolateLimits { memory_mb, wall_time_ms, cpu_time_ms },
        bridge,
        tools,
        max_calls,
        data_object,
        data_values,
        wasm,
        web,
        unhandled_rejections,
        stream_console,
        tenant,
        modules,
        module_limits,
        module_resolver,
        // The parent queued the run and kept its deadline.
        max_queue_ms: None,
        web_fetch,
    };
    Ok((plan, started_event))
}
