//! The web platform APIs inside the sandbox (`web: true`; docs/web.md), on the isolate
//! thread. Their WebIDL classes are JavaScript (`js/*.js`, one script compiled once per
//! process and served from its V8 code cache); what they compute is Rust: the ops below,
//! reached through the seam's one generic primitive (`isolet_sandbox_install_ops`), over
//! the pure logic of `isolet_core::web`. Installing compiles nothing: each global is a lazy
//! data property, and the script of its family runs (from its V8 code cache, made by the
//! first isolate of the process that ran it) only when a run first reads one of them.
use std::sync::{Mutex, OnceLock};
use std::time::{Instant, SystemTime, UNIX_EPOCH};

use isolet_core::seam_policy::{CONSOLE_METHODS, MAX_CONSOLE_VALUE_BYTES};
use isolet_core::web::{base64, crypto, encoding, url, WebError, MAX_PENDING_TIMERS};
use isolet_core::Thrown;

use crate::limits::lock;
use crate::v8::{EmbeddedScript, OpArg, OpError, OpResult, OpValue, Sandbox, Step};

/// The embedded scripts, by the name the JS uses (`load(SCRIPT.<name>)`); each file is the
/// body of `(function (lib) { ... })`, whose return value is the script's exports.
const SCRIPTS: &[(&str, &str)] = &[
    ("webidl", include_str!("js/00_webidl.js")),
    ("domexception", include_str!("js/01_domexception.js")),
    ("base64", include_str!("js/02_base64.js")),
    ("encoding", include_str!("js/03_encoding.js")),
    ("url", include_str!("js/04_url.js")),
    ("crypto", include_str!("js/05_crypto.js")),
    ("events", include_str!("js/06_events.js")),
    ("misc", include_str!("js/07_misc.js")),
    ("timers", include_str!("js/08_timers.js")),
    ("console", include_str!("js/09_console.js")),
    ("inspect", include_str!("js/10_inspect.js")),
    ("fetch", include_str!("js/11_fetch.js")),
    ("seam", include_str!("js/12_seam.js")),
];

/// The globals of every sandbox, with or without `web`: `console` (Node's formatting).
const CONSOLE_GLOBALS: &[(&str, &str)] = &[("console", "console")];

/// The web layer's globals (`web: true`) and the script that exports each.
const GLOBALS: &[(&str, &str)] = &[
    ("atob", "base64"),
    ("btoa", "base64"),
    ("DOMException", "domexception"),
    ("TextEncoder", "encoding"),
    ("TextDecoder", "encoding"),
    ("URL", "url"),
    ("URLSearchParams", "url"),
    ("crypto", "crypto"),
    ("Crypto", "crypto"),
    ("SubtleCrypto", "crypto"),
    ("CryptoKey", "crypto"),
    ("Event", "events"),
    ("EventTarget", "events"),
    ("CustomEvent", "events"),
    ("AbortController", "events"),
    ("AbortSignal", "events"),
    ("structuredClone", "misc"),
    ("queueMicrotask", "misc"),
    ("performance", "misc"),
    ("Performance", "misc"),
    ("setTimeout", "timers"),
    ("setInterval", "timers"),
    ("clearTimeout", "timers"),
    ("clearInterval", "timers"),
    ("Blob", "fetch"),
    ("File", "fetch"),
    ("Headers", "fetch"),
    ("Request", "fetch"),
    ("Response", "fetch"),
];

/// With a fetch capability (`RunPlan::web_fetch`): WHATWG fetch over it.
const FETCH_GLOBALS: &[(&str, &str)] = &[("fetch", "fetch")];

/// The script the seam calls: `makeError(message, name)` makes the DOMExceptions ops throw,
/// `uncloneablePath(result)` names what a result could not be copied for.
const SEAM_SCRIPT: &str = "seam";

fn script_index(name: &str) -> u32 {
    SCRIPTS.iter().position(|(n, _)| *n == name).expect("a script of SCRIPTS") as u32
}

/// The script name the web layer's frames show in stacks.
const ORIGIN: &str = "isolet:web";

/// What ops reach of the run the sandbox serves: its log.
pub(crate) trait WebHost {
    /// Keeps a console entry at `level` (`LogLevel::from_index`); returns the bytes the
    /// run's log still keeps (0: full).
    fn log(&self, level: u32, message: &str) -> usize;
    /// The bytes the run's log still keeps (0: full, or no run).
    fn log_room(&self) -> usize;
}

/// One native op: its name in the JS (`OP.name`) and what it does.
struct Op {
    name: &'static str,
    call: fn(&WebState, &dyn WebHost, &mut [OpArg]) -> OpResult,
}

/// The ops, by index (the JS reaches them as `op(OP.<name>, ...)`).
const OPS: &[Op] = &[
    Op { name: "atob", call: op_atob },
    Op { name: "btoa", call: op_btoa },
    Op { name: "encodingLookup", call: op_encoding_lookup },
    Op { name: "decode", call: op_decode },
    Op { name: "encode", call: op_encode },
    Op { name: "encodeInto", call: op_encode_into },
    Op { name: "urlParse", call: op_url_parse },
    Op { name: "urlCanParse", call: op_url_can_parse },
    Op { name: "urlSet", call: op_url_set },
    Op { name: "urlencodedParse", call: op_urlencoded_parse },
    Op { name: "randomFill", call: op_random_fill },
    Op { name: "randomUuid", call: op_random_uuid },
    Op { name: "digest", call: op_digest },
    Op { name: "hmacSign", call: op_hmac_sign },
    Op { name: "hmacVerify", call: op_hmac_verify },
    Op { name: "now", call: op_now },
    Op { name: "timeOrigin", call: op_time_origin },
    Op { name: "reportError", call: op_report_error },
    Op { name: "timerEpoch", call: op_timer_epoch },
    Op { name: "timerArm", call: op_timer_arm },
    Op { name: "consoleRoom", call: op_console_room },
    Op { name: "consoleWrite", call: op_console_write },
    Op { name: "fetchTool", call: op_fetch_tool },
];

/// The embedded scripts' sources: each file wrapped as a function of `lib`, with the op and
/// script tables as `OP` and `SCRIPT`.
fn sources() -> &'static [String] {
    static SOURCES: OnceLock<Vec<String>> = OnceLock::new();
    SOURCES.get_or_init(|| {
        let table = |names: &mut dyn Iterator<Item = &str>| names.enumerate().map(|(i, n)| format!("{n}: {i}")).collect::<Vec<_>>().join(", ");
        let ops = table(&mut OPS.iter().map(|op| op.name));
        let scripts = table(&mut SCRIPTS.iter().map(|(name, _)| *name));
        let levels = table(&mut CONSOLE_METHODS.iter().copied());
        SCRIPTS
            .iter()
            .map(|(_, body)| {
                format!("(function (lib) {{ 'use strict'; const {{ op, clone, load }} = lib; const OP = {{ {ops} }}; const SCRIPT = {{ {scripts} }}; const LIMITS = {{ maxTimers: {MAX_PENDING_TIMERS}, maxConsoleValueBytes: {MAX_CONSOLE_VALUE_BYTES} }}; const LEVEL = {{ {levels} }};\n{body}}})")
            })
            .collect()
    })
}

/// The code caches of the embedded scripts (by index), made by the first isolate of this
/// process that runs each; never replaced, so a compile may read one in place.
static CODE_CACHES: [OnceLock<Vec<u8>>; SCRIPTS.len()] = [const { OnceLock::new() }; SCRIPTS.len()];

/// Embedded script `index` with its code cache, for the seam.
pub(crate) fn script(index: u32) -> Option<EmbeddedScript> {
    let index = index as usize;
    let code = sources().get(index)?;
    Some(EmbeddedScript { code, origin: ORIGIN, cache: CODE_CACHES[index].get().map(Vec::as_slice) })
}

/// The code cache V8 made for embedded script `index` (the first one made is kept).
pub(crate) fn script_cache(index: u32, data: &[u8]) {
    if let Some(slot) = CODE_CACHES.get(index as usize) {
        let _ = slot.set(data.to_vec());
    }
}

/// Per sandbox: the clock `performance` reads (from the install), and an error a callback
/// threw (a timer's, `queueMicrotask`'s) that ends the run.
#[derive(Default)]
pub(crate) struct WebState {
    /// The monotonic origin and the wall-clock time at it (ms since the epoch, coarsened).
    clock: Mutex<Option<(Instant, f64)>>,
    uncaught: Mutex<Option<Thrown>>,
    timers: Mutex<Timers>,
    /// The host function `fetch` speaks the web protocol to (the tool's index).
    fetch_tool: Mutex<Option<u32>>,
    /// JS read what belongs to a run (the clock, the fetch tool's index) since the last
    /// `begin_run`: a context prepared before its run must not have (`isolate::warm`).
    read_run_state: std::sync::atomic::AtomicBool,
}

/// The run loop's side of the timers: when the JS asked to be woken (`timerArm`), by the
/// promise to settle then, and wake-ups it replaced, to settle now (as not fired).
#[derive(Default)]
struct Timers {
    /// Bumped at each run: timers belong to the run that set them.
    epoch: u32,
    armed: Option<(Instant, u32)>,
    stale: Vec<u32>,
    next_id: u32,
}

impl WebState {
    /// The web layer is being installed: `performance.timeOrigin` is now.
    pub(crate) fn start(&self) {
        let wall = SystemTime::now().duration_since(UNIX_EPOCH).map(|d| d.as_secs_f64() * 1000.0).unwrap_or(0.0);
        *lock(&self.clock) = Some((Instant::now(), coarsen(wall)));
    }

    fn origin(&self) -> (Instant, f64) {
        self.read_run_state.store(true, std::sync::atomic::Ordering::Relaxed);
        *lock(&self.clock).get_or_insert_with(|| (Instant::now(), 0.0))
    }

    /// Whether JS read the clock or the fetch tool's index since the last `begin_run`.
    pub(crate) fn read_run_state(&self) -> bool {
        self.read_run_state.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The index of the run's fetch capability, for a context prepared before the run
    /// arrived (`web::install` sets it in a fresh one).
    pub(crate) fn set_fetch_tool(&self, fetch_tool: Option<u32>) {
        *lock(&self.fetch_tool) = fetch_tool;
    }

    /// The error a callback threw since the last look, which ends the run.
    pub(crate) fn take_uncaught(&self) -> Option<Thrown> {
        lock(&self.uncaught).take()
    }
    /// A run starts: timers of earlier runs (a persistent sandbox's) are gone; the seam
    /// dropped their promises when that run ended.
    pub(crate) fn begin_run(&self) {
        self.read_run_state.store(false, std::sync::atomic::Ordering::Relaxed);
        let mut t = lock(&self.timers);
        t.epoch = t.epoch.wrapping_add(1);
        t.armed = None;
        t.stale.clear();
    }

    /// How long the run loop may sleep before a timer is due (`None`: no timer pending).
    pub(crate) fn next_timer(&self) -> Option<std::time::Duration> {
        let t = lock(&self.timers);
        if !t.stale.is_empty() {
            return Some(std::time::Duration::ZERO);
        }
        t.armed.map(|(at, _)| at.saturating_duration_since(Instant::now()))
    }

    /// The wake-up promises to settle now: (id, whether its deadline came).
    pub(crate) fn due_timers(&self) -> Vec<(u32, bool)> {
        let mut t = lock(&self.timers);
        let mut due: Vec<(u32, bool)> = t.stale.drain(..).map(|id| (id, false)).collect();
        if let Some((at, id)) = t.armed {
            if at <= Instant::now() {
                t.armed = None;
                due.push((id, true));
            }
        }
        due
    }
}

/// `performance.now()`'s resolution, in ms: 100 µs, as browsers give pages that are not
/// cross-origin isolated, so sandboxed code gets no finer clock than that to time cache
/// effects with (Spectre-class attacks on the memory of this process).
pub(crate) const CLOCK_RESOLUTION_MS: f64 = 0.1;

fn coarsen(ms: f64) -> f64 {
    (ms / CLOCK_RESOLUTION_MS).floor() * CLOCK_RESOLUTION_MS
}

/// Installs `console` in `sandbox`'s fresh context, with `web` the web layer, and with
/// `fetch_tool` (the index of the run's fetch capability) `fetch`; `Some` when that ended
/// the run.
pub(crate) fn install(sandbox: &mut Sandbox, state: &WebState, web: bool, fetch_tool: Option<u32>) -> Option<Step> {
    *lock(&state.fetch_tool) = fetch_tool;
    let web_globals = if web { GLOBALS } else { &[] };
    let fetch_globals = if web && fetch_tool.is_some() { FETCH_GLOBALS } else { &[] };
    let globals: Vec<(&str, u32)> =
        CONSOLE_GLOBALS.iter().chain(web_globals).chain(fetch_globals).map(|(name, script)| (*name, script_index(script))).collect();
    match sandbox.install_ops(&globals, script_index(SEAM_SCRIPT)) {
        Step::Settled => None,
        other => Some(other),
    }
}

/// Runs op `index` for the sandbox.
pub(crate) fn call(state: &WebState, host: &dyn WebHost, index: u32, args: &mut [OpArg]) -> OpResult {
    match OPS.get(index as usize) {
        Some(op) => (op.call)(state, host, args),
        None => Err(type_error(format!("no native op {index}"))),
    }
}

fn type_error(message: String) -> OpError {
    OpError::Threw { name: "TypeError", message, installed: false }
}

fn thrown(e: WebError) -> OpError {
    match e {
        WebError::Type(message) => OpError::Threw { name: "TypeError", message, installed: false },
        WebError::Range(message) => OpError::Threw { name: "RangeError", message, installed: false },
        WebError::Dom { name, message } => OpError::Threw { name, message, installed: true },
    }
}

// Arguments. The JS layer converts per WebIDL before calling, so a wrong kind here is a
// bug of that layer (or sandbox code that found `op`), answered with a TypeError.

fn string<'a>(args: &[OpArg<'a>], i: usize) -> Result<&'a str, OpError> {
    match args.get(i) {
        Some(OpArg::Str(s)) => Ok(s),
        _ => Err(type_error(format!("argument {i} must be a string"))),
    }
}

fn optional_string<'a>(args: &[OpArg<'a>], i: usize) -> Result<Option<&'a str>, OpError> {
    match args.get(i) {
        None | Some(OpArg::Undefined) => Ok(None),
        Some(OpArg::Str(s)) => Ok(Some(s)),
        _ => Err(type_error(format!("argument {i} must be a string or undefined"))),
    }
}

fn flag(args: &[OpArg], i: usize) -> bool {
    matches!(args.get(i), Some(OpArg::Bool(true)))
}

fn bytes<'s>(args: &'s [OpArg], i: usize) -> Result<&'s [u8], OpError> {
    match args.get(i) {
        Some(OpArg::Bytes(view)) => Ok(view.bytes()),
        _ => Err(type_error(format!("argument {i} must be an ArrayBuffer or a view of one"))),
    }
}

fn one(value: OpValue) -> OpResult {
    Ok(vec![value])
}

fn op_atob(_: &WebState, _: &dyn WebHost, args: &mut [OpArg]) -> OpResult {
    one(OpValue::Latin1(base64::decode(string(args, 0)?).map_err(thrown)?))
}

fn op_btoa(_: &WebState, _: &dyn WebHost, args: &mut [OpArg]) -> OpResult {
    one(OpValue::String(base64::encode_latin1(string(args, 0)?).map_err(thrown)?))
}

fn op_encoding_lookup(_: &WebState, _: &dyn WebHost, args: &mut [OpArg]) -> OpResult {
    one(OpValue::String(encoding::lookup(string(args, 0)?).map_err(thrown)?))
}

/// (encoding, bytes, fatal, stream, stripBom) -> [text, bytes left for the next chunk]
fn op_decode(_: &WebState, _: &dyn WebHost, args: &mut [OpArg]) -> OpResult {
    let name = string(args, 0)?;
    let (text, tail) = encoding::decode(name, bytes(args, 1)?, flag(args, 2), flag(args, 3), flag(args, 4)).map_err(thrown)?;
    Ok(vec![OpValue::String(text), OpValue::Number(tail as f64)])
}

fn op_encode(_: &WebState, _: &dyn WebHost, args: &mut [OpArg]) -> OpResult {
    one(OpValue::Bytes(string(args, 0)?.as_bytes().to_vec()))
}

/// (text, destination) -> [UTF-16 units read, bytes written]: whole characters only.
fn op_encode_into(_: &WebState, _: &dyn WebHost, args: &mut [OpArg]) -> OpResult {
    let text = string(args, 0)?;
    let Some(OpArg::Bytes(dest)) = args.get_mut(1) else {
        return Err(type_error("argument 1 must be a Uint8Array".into()));
    };
    let out = dest.bytes_mut();
    let (mut read, mut written) = (0usize, 0usize);
    for c in text.chars() {
        let n = c.len_utf8();
        if written + n > out.len() {
            break;
        }
        c.encode_utf8(&mut out[written..written + n]);
        written += n;
        read += c.len_utf16();
    }
    Ok(vec![OpValue::Number(read as f64), OpValue::Number(written as f64)])
}

/// A URL record (`url::UrlParts`) without an array or, mostly, a string to make: the
/// offsets are written to the Int32Array `args[slots]`, and the op answers the href, or
/// `true` when it is `args[0]` unchanged (most URLs a program writes are already
/// serialized); null when there is no URL.
fn record(r: Option<url::UrlParts>, args: &mut [OpArg], slots: usize) -> OpResult {
    let Some(parts) = r else { return one(OpValue::Null) };
    let same = matches!(args.first(), Some(OpArg::Str(s)) if *s == parts.href);
    let Some(OpArg::Bytes(view)) = args.get_mut(slots) else {
        return Err(type_error(format!("argument {slots} must be an Int32Array")));
    };
    let out = view.bytes_mut();
    if out.len() < parts.offsets.len() * 4 {
        return Err(type_error(format!("argument {slots} must hold {} offsets", parts.offsets.len())));
    }
    for (slot, offset) in out.chunks_exact_mut(4).zip(parts.offsets) {
        slot.copy_from_slice(&(offset as i32).to_ne_bytes());
    }
    one(if same { OpValue::Bool(true) } else { OpValue::Latin1(parts.href.into_bytes()) })
}

fn op_url_parse(_: &WebState, _: &dyn WebHost, args: &mut [OpArg]) -> OpResult {
    let parts = url::parse(string(args, 0)?, optional_string(args, 1)?);
    record(parts, args, 2)
}

fn op_url_can_parse(_: &WebState, _: &dyn WebHost, args: &mut [OpArg]) -> OpResult {
    one(OpValue::Bool(url::can_parse(string(args, 0)?, optional_string(args, 1)?)))
}

fn op_url_set(_: &WebState, _: &dyn WebHost, args: &mut [OpArg]) -> OpResult {
    let setter = url::Setter::named(string(args, 1)?).ok_or_else(|| type_error("no such URL setter".into()))?;
    let parts = url::set(string(args, 0)?, setter, string(args, 2)?);
    record(parts, args, 3)
}

fn op_urlencoded_parse(_: &WebState, _: &dyn WebHost, args: &mut [OpArg]) -> OpResult {
    let pairs = url::parse_urlencoded(string(args, 0)?.as_bytes());
    one(OpValue::String(url::join_counted(pairs.iter().flat_map(|(k, v)| [k.as_str(), v.as_str()]))))
}

fn op_random_fill(_: &WebState, _: &dyn WebHost, args: &mut [OpArg]) -> OpResult {
    let Some(OpArg::Bytes(view)) = args.get_mut(0) else {
        return Err(type_error("argument 0 must be an integer typed array".into()));
    };
    crypto::fill_random(view.bytes_mut()).map_err(thrown)?;
    Ok(Vec::new())
}

fn op_random_uuid(_: &WebState, _: &dyn WebHost, _: &mut [OpArg]) -> OpResult {
    one(OpValue::String(crypto::random_uuid().map_err(thrown)?))
}

fn hash(args: &[OpArg], i: usize) -> Result<crypto::Hash, OpError> {
    crypto::Hash::named(string(args, i)?).map_err(thrown)
}

fn op_digest(_: &WebState, _: &dyn WebHost, args: &mut [OpArg]) -> OpResult {
    one(OpValue::Bytes(crypto::digest(hash(args, 0)?, bytes(args, 1)?)))
}

fn op_hmac_sign(_: &WebState, _: &dyn WebHost, args: &mut [OpArg]) -> OpResult {
    one(OpValue::Bytes(crypto::hmac_sign(hash(args, 0)?, bytes(args, 1)?, bytes(args, 2)?)))
}

fn op_hmac_verify(_: &WebState, _: &dyn WebHost, args: &mut [OpArg]) -> OpResult {
    one(OpValue::Bool(crypto::hmac_verify(hash(args, 0)?, bytes(args, 1)?, bytes(args, 2)?, bytes(args, 3)?)))
}

fn op_now(state: &WebState, _: &dyn WebHost, _: &mut [OpArg]) -> OpResult {
    one(OpValue::Number(coarsen(state.origin().0.elapsed().as_secs_f64() * 1000.0)))
}

fn op_time_origin(state: &WebState, _: &dyn WebHost, _: &mut [OpArg]) -> OpResult {
    one(OpValue::Number(state.origin().1))
}

fn op_timer_epoch(state: &WebState, _: &dyn WebHost, _: &mut [OpArg]) -> OpResult {
    one(OpValue::Number(f64::from(lock(&state.timers).epoch)))
}

/// (deadline in ms since the origin) -> a promise the run loop settles with `true` at the
/// deadline, or with `false` at once if a later `timerArm` replaces it.
fn op_timer_arm(state: &WebState, _: &dyn WebHost, args: &mut [OpArg]) -> OpResult {
    let deadline = match args.first() {
        Some(OpArg::Number(ms)) if ms.is_finite() && *ms >= 0.0 => *ms,
        _ => return Err(type_error("argument 0 must be a deadline in ms".into())),
    };
    let origin = state.origin().0;
    let mut t = lock(&state.timers);
    let id = t.next_id;
    t.next_id = t.next_id.wrapping_add(1);
    let at = origin + std::time::Duration::from_secs_f64(deadline / 1000.0);
    if let Some((_, replaced)) = t.armed.replace((at, id)) {
        t.stale.push(replaced);
    }
    one(OpValue::Promise(id))
}

/// (name, message, stack): a callback threw; the run ends with it (the first one wins).
fn op_report_error(state: &WebState, _: &dyn WebHost, args: &mut [OpArg]) -> OpResult {
    let text = |i| optional_string(args, i).ok().flatten().map(str::to_string);
    let mut uncaught = lock(&state.uncaught);
    if uncaught.is_none() {
        *uncaught = Some(Thrown {
            name: text(0).unwrap_or_else(|| "Error".into()),
            message: text(1).unwrap_or_default(),
            stack: text(2),
            ..Default::default()
        });
    }
    Ok(Vec::new())
}

fn op_console_room(_: &WebState, host: &dyn WebHost, _: &mut [OpArg]) -> OpResult {
    one(OpValue::Number(host.log_room() as f64))
}

/// (level, text) -> the bytes the run's log still keeps.
fn op_console_write(_: &WebState, host: &dyn WebHost, args: &mut [OpArg]) -> OpResult {
    let level = match args.first() {
        Some(OpArg::Number(n)) if *n >= 0.0 && *n < CONSOLE_METHODS.len() as f64 => *n as u32,
        _ => return Err(type_error("argument 0 must be a console level".into())),
    };
    one(OpValue::Number(host.log(level, string(args, 1)?) as f64))
}

/// The index of the host function the fetch capability is (for `lib.host`), or -1.
fn op_fetch_tool(state: &WebState, _: &dyn WebHost, _: &mut [OpArg]) -> OpResult {
    state.read_run_state.store(true, std::sync::atomic::Ordering::Relaxed);
    one(OpValue::Number(lock(&state.fetch_tool).map_or(-1.0, f64::from)))
}
