//! Internal bindings of process isolation's run channel (not in the public
//! `index.d.ts`): the sandbox host starts it (`startHostChannel`), the supervisor builds
//! the frames it sends (`frameRun`, `frameFulfill`, ...) and decodes the frames it
//! receives (`decodeHostFrame`). Frames are `isolet_core::frame`'s; JS only finds where
//! a frame ends (`frameLayout`).
use napi::bindgen_prelude::*;
use napi_derive::napi;

use isolet_core::frame::{self, Header, Kind, WireDone, WireHealth, WirePlan, HEADER_BYTES, LENGTH_OFFSET};

use super::engine::{NativeEngine, RunPlanJs};
use super::events::FailureJs;
use super::validation_error;

/// Tails up to this size are copied into the frame (one write); larger ones are
/// written by the caller after the header it gets back.
const COPY_TAIL_BYTES: usize = 64 * 1024;

#[napi(object)]
pub struct FrameLayoutJs {
    pub header_bytes: u32,
    pub length_offset: u32,
}

/// Where a frame's payload length sits, so JS can cut the byte stream into frames.
#[napi]
pub fn frame_layout() -> FrameLayoutJs {
    FrameLayoutJs { header_bytes: HEADER_BYTES as u32, length_offset: LENGTH_OFFSET as u32 }
}

/// Sandbox host: serves runs over descriptor `fd` (the parent's extra pipe) for
/// `engine` from now on, with the WebAssembly modules it has compiled. Call it once,
/// after `setWasmModules` resolved and before `lockDown`.
#[napi]
pub fn start_host_channel(engine: &NativeEngine, fd: i32) -> Result<()> {
    let (pool, wasm) = engine.channel_parts();
    crate::supervisor::start_channel(fd, pool, wasm).map_err(|e| Error::from_reason(format!("isolet: run channel on fd {fd}: {e}")))
}

/// The `Run` frame of a checked plan (what `engine.submit` takes in thread mode).
#[napi]
pub fn frame_run(run_id: u32, plan: RunPlanJs) -> Result<Buffer> {
    let (mode, limits, bridge) = plan.checked_parts()?;
    let wire = WirePlan {
        code: plan.code,
        mode,
        limits,
        bridge,
        tools: plan.tools,
        max_calls: plan.max_calls,
        data_object: plan.data_object,
        data_values: plan.data_values.unwrap_or_default().into_iter().map(|(k, v)| (k, v.to_vec())).collect(),
        wasm: plan.wasm,
        stream_console: plan.stream_console,
        started_event: plan.started_event.unwrap_or(true),
    };
    Ok(wire.encode(run_id).into())
}

/// The `Fulfill` frame of host call `call_id`: the whole frame for a value up to 64 KiB,
/// else only its header (write `value` after it).
#[napi]
pub fn frame_fulfill(run_id: u32, call_id: u32, value: Buffer) -> Buffer {
    let head = frame::header_only(Kind::Fulfill, run_id, call_id, value.len());
    with_small_tail(head.to_vec(), &value)
}

#[napi]
pub fn frame_reject(run_id: u32, call_id: u32, name: String, message: String) -> Buffer {
    frame::encode_reject(run_id, call_id, &name, &message).into()
}

/// The `Answer` frame of data request `answer_id`: a value (whole frame up to 64 KiB,
/// else only the head: write `value` after it) or an error message.
#[napi]
pub fn frame_answer(run_id: u32, answer_id: u32, value: Option<Buffer>, error: Option<String>) -> Buffer {
    match (&value, error.as_deref()) {
        (Some(v), None) => with_small_tail(frame::encode_answer_head(run_id, answer_id, Some(v.len()), None), v),
        (_, e) => frame::encode_answer_head(run_id, answer_id, None, e).into(),
    }
}

#[napi]
pub fn frame_abort(run_id: u32) -> Buffer {
    frame::header_only(Kind::Abort, run_id, 0, 0).to_vec().into()
}

fn with_small_tail(mut head: Vec<u8>, tail: &[u8]) -> Buffer {
    if tail.len() <= COPY_TAIL_BYTES {
        head.extend_from_slice(tail);
    }
    head.into()
}

#[napi(object)]
pub struct HostHealthJs {
    pub stuck: u32,
    pub threads: u32,
    pub warm: u32,
    pub warming: u32,
    pub engine_threads: u32,
    pub quarantined: u32,
    pub warm_starts: f64,
    pub cold_starts: f64,
}

impl From<WireHealth> for HostHealthJs {
    fn from(h: WireHealth) -> Self {
        HostHealthJs {
            stuck: h.stuck,
            threads: h.threads,
            warm: h.warm,
            warming: h.warming,
            engine_threads: h.engine_threads,
            quarantined: h.quarantined,
            warm_starts: h.warm_starts as f64,
            cold_starts: h.cold_starts as f64,
        }
    }
}

/// A console line of a finished run, as a sandbox host's `done` frame carries it.
#[napi(object)]
pub struct LogEntryJs {
    pub level: String,
    pub message: String,
}

/// The stats of a finished run, as a sandbox host's `done` frame carries them (the same
/// fields thread mode's `done` event has).
#[napi(object)]
pub struct StatsJs {
    pub wall_time_ms: f64,
    pub cpu_time_ms: f64,
    /// Peak V8 heap use during the run.
    pub heap_used_bytes: f64,
    pub heap_at_end_bytes: f64,
    pub host_calls: u32,
}

/// One frame from a sandbox host, decoded: a run event in the shape thread mode's
/// events have (`type`, `callId`, `name`, ...), with its run and, where the event
/// carries bytes, where they are in the frame (`payloadStart`..the end), so JS takes
/// them as a view of the frame instead of a copy.
#[napi(object)]
pub struct HostFrameJs {
    #[napi(js_name = "type")]
    pub kind: String,
    pub run_id: u32,
    pub call_id: Option<u32>,
    pub name: Option<String>,
    pub payload_start: Option<u32>,
    pub id: Option<u32>,
    pub key: Option<String>,
    pub level: Option<String>,
    pub message: Option<String>,
    pub ok: Option<bool>,
    pub error: Option<FailureJs>,
    pub stats: Option<StatsJs>,
    pub logs: Option<Vec<LogEntryJs>>,
    pub health: Option<HostHealthJs>,
}

impl HostFrameJs {
    fn of(kind: &str, run_id: u32) -> Self {
        HostFrameJs {
            kind: kind.to_string(),
            run_id,
            call_id: None,
            name: None,
            payload_start: None,
            id: None,
            key: None,
            level: None,
            message: None,
            ok: None,
            error: None,
            stats: None,
            logs: None,
            health: None,
        }
    }
}

/// Decodes one whole frame (header and payload) from a sandbox host. Throws on
/// anything malformed or over its run's log limits (`maxLogEntries`, `maxLogBytes`; 0
/// for a health frame): the host is untrusted, and the caller ends it.
#[napi]
pub fn decode_host_frame(frame: Buffer, max_log_entries: u32, max_log_bytes: f64) -> Result<HostFrameJs> {
    let bad = |e: &dyn std::fmt::Display| validation_error(format!("malformed frame from a sandbox host: {e}"));
    let h = Header::decode(&frame).map_err(|e| bad(&e))?;
    if h.len as usize != frame.len() - HEADER_BYTES {
        return Err(bad(&"length does not match"));
    }
    let p = &frame[HEADER_BYTES..];
    let at = |offset: usize| Some((HEADER_BYTES + offset) as u32);
    let mut ev;
    match h.kind {
        Kind::Started => {
            if !p.is_empty() {
                return Err(bad(&"started has a payload"));
            }
            ev = HostFrameJs::of("started", h.run_id);
        }
        Kind::Console => {
            let (level, message) = frame::decode_console(p).map_err(|e| bad(&e))?;
            ev = HostFrameJs::of("console", h.run_id);
            ev.level = Some(level.as_str().to_string());
            ev.message = Some(message.to_string());
        }
        Kind::HostCall => {
            let (name, args_at) = frame::decode_host_call(p).map_err(|e| bad(&e))?;
            ev = HostFrameJs::of("hostCall", h.run_id);
            ev.call_id = Some(h.call_id);
            ev.name = Some(name.to_string());
            ev.payload_start = at(args_at);
        }
        Kind::DataRequest => {
            let key = std::str::from_utf8(p).map_err(|_| bad(&"key is not utf-8"))?;
            ev = HostFrameJs::of("dataRequest", h.run_id);
            ev.id = Some(h.call_id);
            ev.key = Some(key.to_string());
        }
        Kind::Health => {
            ev = HostFrameJs::of("health", h.run_id);
            ev.health = Some(WireHealth::decode(p).map_err(|e| bad(&e))?.into());
        }
        Kind::Done => {
            let (done, result_at) = WireDone::decode(p, max_log_entries as usize, max_log_bytes as usize).map_err(|e| bad(&e))?;
            ev = HostFrameJs::of("done", h.run_id);
            let s = done.stats;
            ev.stats = Some(StatsJs {
                wall_time_ms: s.wall_time_ms,
                cpu_time_ms: s.cpu_time_ms,
                heap_used_bytes: s.heap_peak_bytes,
                heap_at_end_bytes: s.heap_used_bytes,
                host_calls: s.host_calls,
            });
            ev.logs = Some(done.logs.into_iter().map(|l| LogEntryJs { level: l.level.as_str().to_string(), message: l.message }).collect());
            ev.health = Some(done.health.into());
            match done.result {
                Ok(()) => {
                    ev.ok = Some(true);
                    ev.payload_start = at(result_at);
                }
                Err(f) => {
                    ev.ok = Some(false);
                    ev.error = Some(f.into());
                }
            }
        }
        Kind::Run | Kind::Fulfill | Kind::Reject | Kind::Answer | Kind::Abort => {
            return Err(bad(&format!("a host sent a {:?} frame", h.kind)));
        }
    }
    Ok(ev)
}
