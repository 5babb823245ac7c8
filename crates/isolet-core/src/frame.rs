//! The frame protocol between a supervisor and its sandbox host process (isolation:
//! 'process'): run traffic travels as frames over a socket pair beside Node's IPC
//! channel, written by the child's isolate threads and read by a native thread there,
//! so the child's JS thread is off the hot path. Both ends encode and decode with this
//! code (the parent through the addon's `frame*` bindings).
//!
//! A frame is a fixed 16-byte header — kind (u8), three zero bytes, run id, call id and
//! payload length (u32 little-endian each) — followed by the payload. Payloads are
//! built from a few primitives (u8, u32, u64, f64, length-prefixed bytes). The child is
//! untrusted: every decoder here checks lengths and returns `FrameError` rather than
//! panicking or reading past the payload.
use std::collections::BTreeMap;

use crate::code_cache::CodeCacheStats;
use crate::options::LANGUAGES;
use crate::queue::PoolConfig;
use crate::{BridgeLimits, ErrorKind, ExecMode, Failure, IsolateLimits, Isolation, LogEntry, LogLevel, RunPlan, Thrown};

mod plan;
pub use plan::*;

pub const HEADER_BYTES: usize = 16;
/// Offset of the payload length in the header (JS reads only this field to frame).
pub const LENGTH_OFFSET: usize = 12;

/// What a frame carries. Parent -> child: `Run` .. `Abort`; child -> parent: the rest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Kind {
    Run = 1,
    Fulfill = 2,
    Reject = 3,
    Answer = 4,
    Abort = 5,
    /// The engine a host serves with (the first frame a host reads).
    Start = 6,
    /// End once the runs in flight have ended.
    Shutdown = 7,
    /// Open a persistent sandbox (`run_id`: its wire id).
    SandboxOpen = 8,
    /// A run of a persistent sandbox (`run_id`: the run's wire id, `call_id`: the sandbox's).
    SandboxRun = 9,
    /// Close a persistent sandbox (`run_id`: its wire id).
    SandboxClose = 10,
    Started = 16,
    Console = 17,
    HostCall = 18,
    DataRequest = 19,
    Done = 20,
    Health = 21,
    /// The host serves: its lock-down status and counts.
    Ready = 22,
    /// The host found the engine's configuration unusable (a module that does not compile).
    Invalid = 23,
    /// The host shut down as asked and is exiting.
    Bye = 24,
    /// Threads of the host stuck in runs that ignored termination, which it could not
    /// lower to the lowest priority itself (its seccomp filter allows that for its main thread
    /// only): the parent lowers them.
    Lower = 25,
    /// An import the run's module map does not hold, for the host's `resolve`: answered
    /// with an `Answer` frame, like a data request.
    ModuleRequest = 26,
    /// A persistent sandbox closed on the host (`run_id`: its wire id): its reason. Sent
    /// before the `Done` of the run that closed it.
    SandboxClosed = 27,
}

impl Kind {
    pub fn from_u8(b: u8) -> Option<Kind> {
        Some(match b {
            1 => Kind::Run,
            2 => Kind::Fulfill,
            3 => Kind::Reject,
            4 => Kind::Answer,
            5 => Kind::Abort,
            6 => Kind::Start,
            7 => Kind::Shutdown,
            8 => Kind::SandboxOpen,
            9 => Kind::SandboxRun,
            10 => Kind::SandboxClose,
            16 => Kind::Started,
            17 => Kind::Console,
            18 => Kind::HostCall,
            19 => Kind::DataRequest,
            20 => Kind::Done,
            21 => Kind::Health,
            22 => Kind::Ready,
            23 => Kind::Invalid,
            24 => Kind::Bye,
            25 => Kind::Lower,
            26 => Kind::ModuleRequest,
            27 => Kind::SandboxClosed,
            _ => return None,
        })
    }

    /// Whether the parent sends this kind (the child sends the others).
    pub fn from_parent(self) -> bool {
        (self as u8) < 16
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub run_id: u32,
    pub call_id: u32,
    pub len: u32,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    #[error("frame header too short")]
    ShortHeader,
    #[error("unknown frame kind {0}")]
    UnknownKind(u8),
    #[error("reserved header bytes are not zero")]
    Reserved,
    #[error("frame payload truncated")]
    Truncated,
    #[error("frame payload has {0} trailing bytes")]
    Trailing(usize),
    #[error("frame field is not valid: {0}")]
    Invalid(&'static str),
}

impl Header {
    pub fn encode(&self) -> [u8; HEADER_BYTES] {
        let mut h = [0u8; HEADER_BYTES];
        h[0] = self.kind as u8;
        h[4..8].copy_from_slice(&self.run_id.to_le_bytes());
        h[8..12].copy_from_slice(&self.call_id.to_le_bytes());
        h[12..16].copy_from_slice(&self.len.to_le_bytes());
        h
    }

    pub fn decode(b: &[u8]) -> Result<Header, FrameError> {
        if b.len() < HEADER_BYTES {
            return Err(FrameError::ShortHeader);
        }
        let kind = Kind::from_u8(b[0]).ok_or(FrameError::UnknownKind(b[0]))?;
        if b[1..4] != [0, 0, 0] {
            return Err(FrameError::Reserved);
        }
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        Ok(Header { kind, run_id: u32_at(4), call_id: u32_at(8), len: u32_at(12) })
    }
}

/// Builds one frame: the header is filled in by `finish` once the payload is known.
pub struct FrameWriter {
    buf: Vec<u8>,
}

impl FrameWriter {
    pub fn new(kind: Kind, run_id: u32, call_id: u32, capacity: usize) -> Self {
        let mut buf = Vec::with_capacity(HEADER_BYTES + capacity);
        buf.extend_from_slice(&Header { kind, run_id, call_id, len: 0 }.encode());
        FrameWriter { buf }
    }

    pub fn u8(&mut self, v: u8) -> &mut Self {
        self.buf.push(v);
        self
    }
    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_le_bytes());
        self
    }
    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u8(v as u8)
    }
    /// Length-prefixed bytes.
    pub fn bytes(&mut self, v: &[u8]) -> &mut Self {
        self.u32(v.len() as u32);
        self.buf.extend_from_slice(v);
        self
    }
    pub fn str(&mut self, v: &str) -> &mut Self {
        self.bytes(v.as_bytes())
    }
    pub fn opt_str(&mut self, v: Option<&str>) -> &mut Self {
        match v {
            Some(s) => self.u8(1).str(s),
            None => self.u8(0),
        }
    }
    pub fn opt_u32(&mut self, v: Option<u32>) -> &mut Self {
        match v {
            Some(n) => self.u8(1).u32(n),
            None => self.u8(0),
        }
    }
    /// Bytes that run to the end of the payload (no prefix): what a reader takes with
    /// `rest`, so the big part of a frame can be sliced out of it without a copy.
    pub fn tail(&mut self, v: &[u8]) -> &mut Self {
        self.buf.extend_from_slice(v);
        self
    }

    /// The finished frame. Payload length over u32 is not representable: callers keep
    /// payloads under their (much smaller) message limits.
    pub fn finish(mut self) -> Vec<u8> {
        self.finish_with_tail_len(0)
    }

    /// The finished frame's head, for a frame whose last `tail_len` bytes are written
    /// separately (a large payload written from where it is, not copied in here).
    pub fn finish_with_tail_len(&mut self, tail_len: usize) -> Vec<u8> {
        let len = (self.buf.len() - HEADER_BYTES + tail_len) as u32;
        self.buf[LENGTH_OFFSET..HEADER_BYTES].copy_from_slice(&len.to_le_bytes());
        std::mem::take(&mut self.buf)
    }
}

/// Reads a payload; every read is bounds-checked.
pub struct Reader<'a> {
    b: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(payload: &'a [u8]) -> Self {
        Reader { b: payload, pos: 0 }
    }
    fn take(&mut self, n: usize) -> Result<&'a [u8], FrameError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.b.len()).ok_or(FrameError::Truncated)?;
        let s = &self.b[self.pos..end];
        self.pos = end;
        Ok(s)
    }
    pub fn u8(&mut self) -> Result<u8, FrameError> {
        Ok(self.take(1)?[0])
    }
    pub fn u32(&mut self) -> Result<u32, FrameError> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().unwrap_or([0; 4])))
    }
    pub fn u64(&mut self) -> Result<u64, FrameError> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().unwrap_or([0; 8])))
    }
    pub fn f64(&mut self) -> Result<f64, FrameError> {
        Ok(f64::from_le_bytes(self.take(8)?.try_into().unwrap_or([0; 8])))
    }
    pub fn bool(&mut self) -> Result<bool, FrameError> {
        match self.u8()? {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(FrameError::Invalid("bool")),
        }
    }
    pub fn bytes(&mut self) -> Result<&'a [u8], FrameError> {
        let n = self.u32()? as usize;
        self.take(n)
    }
    pub fn str(&mut self) -> Result<&'a str, FrameError> {
        std::str::from_utf8(self.bytes()?).map_err(|_| FrameError::Invalid("utf-8"))
    }
    pub fn opt_str(&mut self) -> Result<Option<&'a str>, FrameError> {
        Ok(if self.bool()? { Some(self.str()?) } else { None })
    }
    pub fn opt_u32(&mut self) -> Result<Option<u32>, FrameError> {
        Ok(if self.bool()? { Some(self.u32()?) } else { None })
    }
    /// Where the reader is in the payload (the start of a `tail`).
    pub fn position(&self) -> usize {
        self.pos
    }
    /// The rest of the payload (a `tail`).
    pub fn rest(&mut self) -> &'a [u8] {
        let s = &self.b[self.pos..];
        self.pos = self.b.len();
        s
    }
    /// Fails if bytes are left over: a frame is exactly its fields.
    pub fn end(&self) -> Result<(), FrameError> {
        match self.b.len() - self.pos {
            0 => Ok(()),
            n => Err(FrameError::Trailing(n)),
        }
    }
}

/// The sandbox host's counts that the supervisor keeps (stuck threads and its engine's
/// pool), sent with every `done` and in `Health` frames.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WireHealth {
    pub stuck: u32,
    pub threads: u32,
    pub warm: u32,
    pub warming: u32,
    pub engine_threads: u32,
    pub quarantined: u32,
    pub warm_starts: u64,
    pub cold_starts: u64,
    /// The host's compiled-code cache.
    pub code_cache: CodeCacheStats,
}

impl WireHealth {
    fn write(&self, w: &mut FrameWriter) {
        w.u32(self.stuck).u32(self.threads).u32(self.warm).u32(self.warming);
        w.u32(self.engine_threads).u32(self.quarantined).u64(self.warm_starts).u64(self.cold_starts);
        let c = &self.code_cache;
        w.u64(c.hits).u64(c.misses).u64(c.rejected).u64(c.evictions).u64(c.entries).u64(c.bytes).u64(c.budget_bytes);
    }
    fn read(r: &mut Reader) -> Result<WireHealth, FrameError> {
        Ok(WireHealth {
            stuck: r.u32()?,
            threads: r.u32()?,
            warm: r.u32()?,
            warming: r.u32()?,
            engine_threads: r.u32()?,
            quarantined: r.u32()?,
            warm_starts: r.u64()?,
            cold_starts: r.u64()?,
            code_cache: CodeCacheStats {
                hits: r.u64()?,
                misses: r.u64()?,
                rejected: r.u64()?,
                evictions: r.u64()?,
                entries: r.u64()?,
                bytes: r.u64()?,
                budget_bytes: r.u64()?,
            },
        })
    }

    pub fn encode(&self) -> Vec<u8> {
        let mut w = FrameWriter::new(Kind::Health, 0, 0, 96);
        self.write(&mut w);
        w.finish()
    }

    pub fn decode(payload: &[u8]) -> Result<WireHealth, FrameError> {
        let mut r = Reader::new(payload);
        let h = WireHealth::read(&mut r)?;
        r.end()?;
        Ok(h)
    }
}

/// A run's statistics as its `done` carries them.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct WireStats {
    pub wall_time_ms: f64,
    pub cpu_time_ms: f64,
    pub heap_peak_bytes: f64,
    pub heap_used_bytes: f64,
    pub host_calls: u32,
    /// Promises rejected with no handler that had none when the run ended.
    pub unhandled_rejections: u32,
}

/// Bytes a log entry may carry beyond `maxLogBytes` (its "… [truncated]" suffix, the
/// dropped-entries marker).
const LOG_SLACK_PER_ENTRY: usize = 64;

/// The last event of a run. A successful result is the payload's tail, so the parent
/// slices it out of the frame (`result_at`) instead of copying it.
#[derive(Debug, Clone, PartialEq)]
pub struct WireDone {
    pub stats: WireStats,
    pub logs: Vec<LogEntry>,
    pub health: WireHealth,
    pub result: Result<(), Failure>,
}

fn level_of(b: u8) -> Result<LogLevel, FrameError> {
    Ok(match b {
        0 => LogLevel::Log,
        1 => LogLevel::Info,
        2 => LogLevel::Warn,
        3 => LogLevel::Error,
        4 => LogLevel::Debug,
        _ => return Err(FrameError::Invalid("log level")),
    })
}

pub fn level_byte(l: LogLevel) -> u8 {
    match l {
        LogLevel::Log => 0,
        LogLevel::Info => 1,
        LogLevel::Warn => 2,
        LogLevel::Error => 3,
        LogLevel::Debug => 4,
    }
}

impl WireDone {
    /// The frame's head (header and fields); `output` (a successful run's result) is
    /// its tail, written after it. Returns the head whole if `output` is empty.
    pub fn encode_head(&self, run_id: u32, output: &[u8]) -> Vec<u8> {
        let log_bytes: usize = self.logs.iter().map(|l| l.message.len() + 5).sum();
        let mut w = FrameWriter::new(Kind::Done, run_id, 0, log_bytes + 256);
        let s = &self.stats;
        w.f64(s.wall_time_ms)
            .f64(s.cpu_time_ms)
            .f64(s.heap_peak_bytes)
            .f64(s.heap_used_bytes)
            .u32(s.host_calls)
            .u32(s.unhandled_rejections);
        self.health.write(&mut w);
        w.u32(self.logs.len() as u32);
        for l in &self.logs {
            w.u8(level_byte(l.level)).str(&l.message);
        }
        match &self.result {
            Ok(()) => {
                w.u8(1);
            }
            Err(f) => {
                let kind = ErrorKind::ALL.iter().position(|k| *k == f.kind).unwrap_or(0) as u8;
                w.u8(0).u8(kind).str(&f.message).opt_str(f.limit);
                match &f.thrown {
                    Some(t) => {
                        w.u8(1).str(&t.name).str(&t.message).opt_str(t.stack.as_deref()).opt_u32(t.line).opt_u32(t.column);
                        match &t.fields {
                            Some(fields) => w.u8(1).bytes(fields),
                            None => w.u8(0),
                        };
                    }
                    None => {
                        w.u8(0);
                    }
                }
            }
        }
        w.finish_with_tail_len(output.len())
    }

    /// The event, and where in the payload a successful run's result starts (it runs to
    /// the end). `max_logs` / `max_log_bytes` are the run's `maxLogEntries` /
    /// `maxLogBytes`: a host (untrusted) claiming more is refused before anything is
    /// made of them (one marker entry and each entry's "… [truncated]" are allowed for).
    pub fn decode(payload: &[u8], max_logs: usize, max_log_bytes: usize) -> Result<(WireDone, usize), FrameError> {
        let mut r = Reader::new(payload);
        let stats = WireStats {
            wall_time_ms: r.f64()?,
            cpu_time_ms: r.f64()?,
            heap_peak_bytes: r.f64()?,
            heap_used_bytes: r.f64()?,
            host_calls: r.u32()?,
            unhandled_rejections: r.u32()?,
        };
        let health = WireHealth::read(&mut r)?;
        let n = r.u32()? as usize;
        if n > max_logs.saturating_add(1) {
            return Err(FrameError::Invalid("more log entries than the run allows"));
        }
        let byte_budget = max_log_bytes.saturating_add(LOG_SLACK_PER_ENTRY.saturating_mul(n));
        let mut log_bytes = 0usize;
        let mut logs = Vec::with_capacity(n.min(payload.len() / 5));
        for _ in 0..n {
            let level = level_of(r.u8()?)?;
            let message = r.str()?;
            log_bytes = log_bytes.saturating_add(message.len());
            if log_bytes > byte_budget {
                return Err(FrameError::Invalid("more log bytes than the run allows"));
            }
            logs.push(LogEntry { level, message: message.to_string() });
        }
        let result = if r.bool()? {
            Ok(())
        } else {
            let kind = *ErrorKind::ALL.get(r.u8()? as usize).ok_or(FrameError::Invalid("error kind"))?;
            let message = r.str()?.to_string();
            let limit = match r.opt_str()? {
                None => None,
                Some(name) => Some(*crate::error::LIMIT_NAMES.iter().find(|l| **l == name).ok_or(FrameError::Invalid("limit"))?),
            };
            let thrown = if r.bool()? {
                let (name, message, stack, line, column) =
                    (r.str()?.to_string(), r.str()?.to_string(), r.opt_str()?.map(str::to_string), r.opt_u32()?, r.opt_u32()?);
                let fields = if r.bool()? {
                    let bytes = r.bytes()?;
                    // A host is untrusted: no more than the seam copies.
                    if bytes.len() > crate::seam_policy::MAX_ERROR_TEXT_BYTES {
                        return Err(FrameError::Invalid("thrown fields over their byte limit"));
                    }
                    Some(bytes.to_vec())
                } else {
                    None
                };
                Some(Box::new(Thrown { name, message, stack, line, column, fields }))
            } else {
                None
            };
            r.end()?;
            Err(Failure { kind, message, thrown, limit })
        };
        let at = r.position();
        Ok((WireDone { stats, logs, health, result }, at))
    }
}

/// `HostCall`: the tool's name, then its serialized arguments as the tail.
pub fn encode_host_call_head(run_id: u32, call_id: u32, name: &str, args_len: usize) -> Vec<u8> {
    let mut w = FrameWriter::new(Kind::HostCall, run_id, call_id, name.len() + 4);
    w.str(name);
    w.finish_with_tail_len(args_len)
}

/// The tool's name and where the arguments start.
pub fn decode_host_call(payload: &[u8]) -> Result<(&str, usize), FrameError> {
    let mut r = Reader::new(payload);
    let name = r.str()?;
    Ok((name, r.position()))
}

/// `Console`: level, then the message.
pub fn encode_console(run_id: u32, level: LogLevel, message: &str) -> Vec<u8> {
    let mut w = FrameWriter::new(Kind::Console, run_id, 0, message.len() + 5);
    w.u8(level_byte(level)).str(message);
    w.finish()
}

pub fn decode_console(payload: &[u8]) -> Result<(LogLevel, &str), FrameError> {
    let mut r = Reader::new(payload);
    let level = level_of(r.u8()?)?;
    let message = r.str()?;
    r.end()?;
    Ok((level, message))
}

/// `Reject`: the Error's name and message.
pub fn encode_reject(run_id: u32, call_id: u32, name: &str, message: &str) -> Vec<u8> {
    let mut w = FrameWriter::new(Kind::Reject, run_id, call_id, name.len() + message.len() + 8);
    w.str(name).str(message);
    w.finish()
}

pub fn decode_reject(payload: &[u8]) -> Result<(&str, &str), FrameError> {
    let mut r = Reader::new(payload);
    let (name, message) = (r.str()?, r.str()?);
    r.end()?;
    Ok((name, message))
}

/// `Answer`: 1 and the value as the tail, or 0 and an error message.
pub fn encode_answer_head(run_id: u32, answer_id: u32, value_len: Option<usize>, error: Option<&str>) -> Vec<u8> {
    let mut w = FrameWriter::new(Kind::Answer, run_id, answer_id, 16 + error.map_or(0, str::len));
    match (value_len, error) {
        (Some(n), None) => {
            w.u8(1);
            w.finish_with_tail_len(n)
        }
        (_, e) => {
            w.u8(0).str(e.unwrap_or("data request answered without a value"));
            w.finish_with_tail_len(0)
        }
    }
}

pub enum WireAnswer<'a> {
    Value(&'a [u8]),
    Error(&'a str),
}

pub fn decode_answer(payload: &[u8]) -> Result<WireAnswer<'_>, FrameError> {
    let mut r = Reader::new(payload);
    if r.bool()? {
        Ok(WireAnswer::Value(r.rest()))
    } else {
        let e = r.str()?;
        r.end()?;
        Ok(WireAnswer::Error(e))
    }
}

/// `Start`: the engine a sandbox host serves with. Its pool is sized by the parent (its
/// share of the engine's slots and warm isolates); runs arrive as checked plans.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireStart {
    /// The parent's pid, which the host checks at lock-down (see `lock_down`).
    pub parent_pid: u32,
    /// The host's own pool: its share of the engine's slots.
    pub pool: PoolConfig,
    /// WebAssembly modules (name, bytes), compiled once by the host.
    pub wasm_modules: Vec<(String, Vec<u8>)>,
    /// The engine's prelude, checked and compiled once by the host as it starts.
    pub prelude: Option<String>,
    /// The prelude's modules, by key, checked likewise.
    pub prelude_modules: BTreeMap<String, String>,
    /// The host's compiled-code cache budget.
    pub code_cache_bytes: u64,
    /// The engine's `web` (what a request that says nothing about it gets): the shape the
    /// host's warm isolates prepare their contexts in until a run says otherwise.
    pub web: bool,
}

impl WireStart {
    pub fn encode(&self) -> Vec<u8> {
        let bytes: usize = self.wasm_modules.iter().map(|(n, b)| n.len() + b.len() + 8).sum();
        let prelude_bytes = self.prelude.as_ref().map_or(0, |p| p.len() + 8)
            + self.prelude_modules.iter().map(|(k, v)| k.len() + v.len() + 8).sum::<usize>();
        let mut w = FrameWriter::new(Kind::Start, 0, 0, bytes + prelude_bytes + 80);
        let p = &self.pool;
        w.u32(self.parent_pid).u32(p.memory_mb).u64(p.max_concurrent as u64).u64(p.warm_pool_size as u64).u64(p.max_queue as u64);
        opt_u64(&mut w, p.max_queue_ms);
        w.u64(p.max_open_sandboxes as u64).u64(p.max_open_sandboxes_per_tenant as u64);
        w.u32(self.wasm_modules.len() as u32);
        for (name, b) in &self.wasm_modules {
            w.str(name).bytes(b);
        }
        w.opt_str(self.prelude.as_deref()).u64(self.code_cache_bytes);
        w.u32(self.prelude_modules.len() as u32);
        for (k, v) in &self.prelude_modules {
            w.str(k).str(v);
        }
        w.bool(self.web);
        w.finish()
    }

    pub fn decode(payload: &[u8]) -> Result<WireStart, FrameError> {
        let mut r = Reader::new(payload);
        let parent_pid = r.u32()?;
        let pool = PoolConfig {
            memory_mb: r.u32()?,
            max_concurrent: r.u64()? as usize,
            warm_pool_size: r.u64()? as usize,
            max_queue: r.u64()? as usize,
            max_queue_ms: read_opt_u64(&mut r)?,
            max_open_sandboxes: r.u64()? as usize,
            max_open_sandboxes_per_tenant: r.u64()? as usize,
        };
        let n = r.u32()? as usize;
        let mut wasm_modules = Vec::with_capacity(n.min(payload.len()));
        for _ in 0..n {
            let name = r.str()?.to_string();
            wasm_modules.push((name, r.bytes()?.to_vec()));
        }
        let prelude = r.opt_str()?.map(str::to_string);
        let code_cache_bytes = r.u64()?;
        let n = r.u32()? as usize;
        let mut prelude_modules = BTreeMap::new();
        for _ in 0..n {
            let k = r.str()?.to_string();
            if crate::modules::map_key(&k).ok().as_deref() != Some(k.as_str()) {
                return Err(FrameError::Invalid("module key"));
            }
            prelude_modules.insert(k, r.str()?.to_string());
        }
        if prelude_modules.len() != n {
            return Err(FrameError::Invalid("module keys are distinct"));
        }
        let web = r.bool()?;
        r.end()?;
        Ok(WireStart { parent_pid, pool, wasm_modules, prelude, code_cache_bytes, prelude_modules, web })
    }
}

/// What least privilege a host could apply (see `src/sandbox_host/lockdown.rs`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct WireLockdown {
    pub seccomp: bool,
    pub no_new_privs: bool,
    pub parent_death_signal: bool,
    pub reason: Option<String>,
    pub refused: Vec<String>,
    pub io_uring_rings: u32,
}

/// `Ready`: the host's pid, lock-down status and counts.
#[derive(Debug, Clone, PartialEq)]
pub struct WireReady {
    pub pid: u32,
    pub lockdown: WireLockdown,
    pub health: WireHealth,
}

impl WireReady {
    pub fn encode(&self) -> Vec<u8> {
        let l = &self.lockdown;
        let mut w = FrameWriter::new(Kind::Ready, 0, 0, 256);
        w.u32(self.pid).bool(l.seccomp).bool(l.no_new_privs).bool(l.parent_death_signal).opt_str(l.reason.as_deref());
        w.u32(l.refused.len() as u32);
        for r in &l.refused {
            w.str(r);
        }
        w.u32(l.io_uring_rings);
        self.health.write(&mut w);
        w.finish()
    }

    pub fn decode(payload: &[u8]) -> Result<WireReady, FrameError> {
        let mut r = Reader::new(payload);
        let pid = r.u32()?;
        let (seccomp, no_new_privs, parent_death_signal) = (r.bool()?, r.bool()?, r.bool()?);
        let reason = r.opt_str()?.map(str::to_string);
        let n = r.u32()? as usize;
        let mut refused = Vec::with_capacity(n.min(payload.len()));
        for _ in 0..n {
            refused.push(r.str()?.to_string());
        }
        let io_uring_rings = r.u32()?;
        let health = WireHealth::read(&mut r)?;
        r.end()?;
        Ok(WireReady {
            pid,
            lockdown: WireLockdown { seccomp, no_new_privs, parent_death_signal, reason, refused, io_uring_rings },
            health,
        })
    }
}

/// Most thread ids one `Lower` frame may carry.
pub const MAX_LOWER_TIDS: usize = 64;

/// `Lower`: thread ids.
pub fn encode_lower(tids: &[u32]) -> Vec<u8> {
    let mut w = FrameWriter::new(Kind::Lower, 0, 0, 4 + 4 * tids.len());
    w.u32(tids.len() as u32);
    for t in tids {
        w.u32(*t);
    }
    w.finish()
}

pub fn decode_lower(payload: &[u8]) -> Result<Vec<u32>, FrameError> {
    let mut r = Reader::new(payload);
    let n = r.u32()? as usize;
    if n > MAX_LOWER_TIDS {
        return Err(FrameError::Invalid("more thread ids than a host has stuck"));
    }
    let mut tids = Vec::with_capacity(n);
    for _ in 0..n {
        tids.push(r.u32()?);
    }
    r.end()?;
    Ok(tids)
}

/// `Invalid`: why the host cannot serve with the engine's configuration.
pub fn encode_invalid(message: &str) -> Vec<u8> {
    let mut w = FrameWriter::new(Kind::Invalid, 0, 0, message.len() + 4);
    w.str(message);
    w.finish()
}

pub fn decode_invalid(payload: &[u8]) -> Result<&str, FrameError> {
    let mut r = Reader::new(payload);
    let m = r.str()?;
    r.end()?;
    Ok(m)
}

/// `ModuleRequest`: the key of the import (joined to its importer) and the importer's key.
pub fn encode_module_request(run_id: u32, request_id: u32, key: &str, referrer: &str) -> Vec<u8> {
    let mut w = FrameWriter::new(Kind::ModuleRequest, run_id, request_id, key.len() + referrer.len() + 8);
    w.str(key).str(referrer);
    w.finish()
}

pub fn decode_module_request(payload: &[u8]) -> Result<(&str, &str), FrameError> {
    let mut r = Reader::new(payload);
    let (key, referrer) = (r.str()?, r.str()?);
    r.end()?;
    if key.len() > crate::modules::MAX_SPECIFIER_BYTES || referrer.len() > crate::modules::MAX_SPECIFIER_BYTES {
        return Err(FrameError::Invalid("module specifier length"));
    }
    Ok((key, referrer))
}

/// A frame with an empty payload (`Started`, `Abort`) or one that is all tail
/// (`Fulfill`'s value, `DataRequest`'s key): the header alone.
pub fn header_only(kind: Kind, run_id: u32, call_id: u32, tail_len: usize) -> [u8; HEADER_BYTES] {
    Header { kind, run_id, call_id, len: tail_len as u32 }.encode()
}

#[cfg(test)]
mod tests;
