//! What the V8 seam (`native/isolet_v8.cc`) is told to do: its constants, the globals it
//! installs and removes, how code is wrapped, the words it throws and how a thrown value
//! is named. The seam holds primitives only; every choice it makes comes from here.

use crate::error::Thrown;

/// Headroom granted when a sandbox's heap reaches its limit, so V8 can unwind the
/// terminated script instead of aborting the process.
pub const HEAP_HEADROOM_BYTES: usize = 32 * 1024 * 1024;
/// How often the headroom is granted. A script that keeps allocating past it reaches a
/// fatal OOM, which the isolate thread turns into a parked thread: memory stays bounded.
pub const MAX_HEAP_LIMIT_RAISES: u32 = 2;
/// Slack of the heap ceiling over a run's memory limit, as a fraction (1/N) of the limit:
/// V8 lets its young generation and an allocation in progress pass the old-generation
/// limit by a little before it collects, and a run within its limit must still pass.
pub const HEAP_CEILING_SLACK_DIVISOR: usize = 8;

/// The ceiling of a run with a heap limit of `limit_bytes`: `limit + limit / 8`.
///
/// V8 grants the first object of its young large-object space whatever its size (a
/// flattened string, a grown array's backing store), without reaching the near-heap-limit
/// callback, so one allocation could pass the limit and the run succeed holding it. A run
/// ends as out of memory when that space is seen above the ceiling (at any GC, and when
/// the run settles), or its used heap after a full GC (what is live) is. The used heap
/// before a GC is not judged: it counts garbage, which a run within its limit may hold.
pub fn heap_ceiling_bytes(limit_bytes: usize) -> usize {
    limit_bytes.saturating_add(limit_bytes / HEAP_CEILING_SLACK_DIVISOR)
}

/// Whether a run with heap limit `limit_bytes`, whose young large-object space was seen
/// holding at most `peak_young_large_bytes`, passed its ceiling.
pub fn over_heap_ceiling(limit_bytes: usize, peak_young_large_bytes: usize) -> bool {
    peak_young_large_bytes > heap_ceiling_bytes(limit_bytes)
}

/// Bytes V8's JSON parser may keep outside the heap per value or key while it parses (a
/// handle and its slot on the parser's stacks: a Node 20 parent held ~14 B per element
/// of `JSON.parse('[' + '1,'.repeat(1e8) + '1]')`), rounded up. The parser checks no
/// interrupt either, so the heap limit cannot stop it before it is done.
pub const JSON_BYTES_PER_VALUE: usize = 16;

/// The most values and keys a `JSON.parse` text may hold under a heap limit of
/// `limit_bytes`: past it the parse could keep more outside the heap than the run may
/// hold in it, and its result (at least 8 bytes a value) would not fit anyway. The seam
/// ends such a run as out of memory before the parse starts, as the heap limit would.
pub fn max_json_values(limit_bytes: usize) -> u64 {
    (limit_bytes / JSON_BYTES_PER_VALUE) as u64
}

/// Counts, over a JSON text fed in pieces, the places where a value or key can start
/// (the text's start and every `[`, `{`, `,` and `:` outside a string): an upper bound
/// on the handles V8's parser makes for it, whatever the text is (invalid text counts
/// the same way; the parser then throws its own SyntaxError). The seam keeps one in C
/// memory (`isolet_json_scan`), so its layout is fixed.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
#[repr(C)]
pub struct JsonScan {
    /// Starts counted so far, the text's start included once `feed` has run.
    pub values: u64,
    /// Past this many the text is refused (`max_json_values`).
    pub max_values: u64,
    pub in_string: bool,
    /// The previous character was a backslash inside a string.
    pub escaped: bool,
    pub started: bool,
}

impl JsonScan {
    pub fn new(max_values: u64) -> JsonScan {
        JsonScan { max_values, ..JsonScan::default() }
    }

    /// Counts `chars` (one-byte or UTF-16 code units); false once the text holds more
    /// than `max_values` (the rest need not be read).
    pub fn feed<C: Copy + Into<u32>>(&mut self, chars: &[C]) -> bool {
        if !self.started {
            self.started = true;
            self.values += 1;
        }
        for &c in chars {
            let c = c.into();
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if c == u32::from(b'\\') {
                    self.escaped = true;
                } else if c == u32::from(b'"') {
                    self.in_string = false;
                }
            } else if c == u32::from(b'"') {
                self.in_string = true;
            } else if matches!(c, 0x5b | 0x7b | 0x2c | 0x3a) {
                self.values += 1;
            }
        }
        self.values <= self.max_values
    }
}

/// Longest text copied out of a thrown value, for each of name, message and stack.
pub const MAX_ERROR_TEXT_BYTES: usize = 16 * 1024;
/// Longest text one console argument is formatted into (the run's log room may be less:
/// the console formats at most what the log can still keep).
pub const MAX_CONSOLE_VALUE_BYTES: usize = 16 * 1024;

/// The console's levels, in order: level `i` is reported as `crate::logs::LogLevel::from_index(i)`.
///
/// `console` is JavaScript in the sandbox (the web layer's `09_console.js`, installed in
/// every sandbox, with Node's util.format and util.inspect): it asks the run's `LogBuffer`
/// for the room left before formatting an entry and formats no more than that (arguments
/// past it are never inspected), each argument to at most `MAX_CONSOLE_VALUE_BYTES`.
pub const CONSOLE_METHODS: &[&str] = &["log", "info", "warn", "error", "debug"];

/// Properties removed from every fresh context, as (global object, key): what V8 adds
/// beyond ECMAScript and Node removes from its contexts too (node::InitializeContextRuntime).
pub const REMOVED_PROPERTIES: &[(&str, &str)] = &[("Intl", "v8BreakIterator")];

/// Namespaces removed from every fresh context, when the sandbox is prepared (before its
/// run's WebAssembly instances are installed: the seam keeps the constructor it needs for
/// them). `WebAssembly`
/// is not ECMAScript, and its `Memory` constructor would allocate outside the heap
/// budget; the `constructor` links of its members' prototypes are cut first, so exported
/// memories or tables cannot lead back to it.
pub const SEALED_NAMESPACES: &[&str] = &["WebAssembly"];

/// Keys of the `data` object that are never data: the promise machinery probes `then`
/// (`await data` must not ask the host for a key named `then`), so `data` is never a
/// thenable. Reads of these keys find nothing.
pub const NEVER_DATA_KEYS: &[&str] = &["then"];

pub fn is_never_a_data_key(key: &str) -> bool {
    NEVER_DATA_KEYS.contains(&key)
}

/// The script name in stacks and messages.
pub const SCRIPT_NAME: &str = "sandbox.js";

const ASYNC_BODY_PREFIX: &str = "(async function () {";
// No call: the seam calls the function itself, so no frame of a call site in the
// wrapper shows in the sandbox's stacks.
const ASYNC_BODY_SUFFIX: &str = "\n})";
/// The same body as a declaration, compiled (never run) only to tell the two causes of a
/// syntax error in the wrapper's suffix apart; see `async_body_syntax_error`.
const ASYNC_BODY_DECLARATION: &str = "async function isolet_body() {";

/// Source to compile, the column offset of its first line, and whether the seam calls
/// the script's value (the async function) to get the result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrappedSource {
    pub source: String,
    pub column_offset: i32,
    pub call: bool,
}

/// `code` as a classic script: the completion value is the result.
pub fn script_source(code: &str) -> WrappedSource {
    script_source_owned(code.to_string())
}

/// [`script_source`] of a text the caller gives up (no copy).
pub fn script_source_owned(code: String) -> WrappedSource {
    WrappedSource { source: code, column_offset: 0, call: false }
}

/// `code` as the body of an async function that the seam calls at once: only `return`
/// gives the result. The prefix sits on the user's first line and the column offset
/// takes it back, so reported lines and columns are the user's.
pub fn async_body_source(code: &str) -> WrappedSource {
    let mut source = String::with_capacity(ASYNC_BODY_PREFIX.len() + code.len() + ASYNC_BODY_SUFFIX.len());
    source.push_str(ASYNC_BODY_PREFIX);
    source.push_str(code);
    source.push_str(ASYNC_BODY_SUFFIX);
    WrappedSource { source, column_offset: -(ASYNC_BODY_PREFIX.len() as i32), call: true }
}

/// A syntax error as the seam reports it: the error, and its UTF-16 offset in the
/// compiled source when V8 gave one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyntaxAt {
    pub thrown: Thrown,
    pub position: Option<u32>,
}

/// How `async_body_syntax_error` asks the seam to compile (never run) a source.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CheckAs {
    /// A classic script.
    Script,
    /// The body of a plain (not async) function, parsed to the end of the source.
    FunctionBody,
}

/// The syntax error of async-body `code`, given the error of its wrapped source. An
/// error inside the user's code is theirs as it is. One in the wrapper's suffix means
/// V8 parsed all of the code without fault and then met the wrapper's `})`: either the
/// code ends unfinished (`return (`), or a stray `}` closed the body early. Either way the
/// suffix's token is not the user's, so the code is compiled again (on this error path
/// only) where V8 itself reaches the end of the user's input:
///
/// - as a declaration with no closing brace: an unfinished body fails at the very end,
///   with V8's own message (`Unexpected end of input`), like the script form;
/// - otherwise the body was closed early, and V8's function-body parse (which ends at the
///   end of the code) names the stray token where it stands. That parse does not know
///   `await`, so it is taken only when it finds the same fault as the wrapped parse.
///
/// `check(source, column_offset, how)` compiles and gives the syntax error, if any.
pub fn async_body_syntax_error(code: &str, wrapped: SyntaxAt, mut check: impl FnMut(&str, i32, CheckAs) -> Option<SyntaxAt>) -> Thrown {
    let code_units = code.encode_utf16().count();
    let in_suffix = |at: &SyntaxAt, prefix: &str| at.position.is_some_and(|p| p as usize >= prefix.len() + code_units);
    if !in_suffix(&wrapped, ASYNC_BODY_PREFIX) {
        return wrapped.thrown;
    }
    let declaration = format!("{ASYNC_BODY_DECLARATION}{code}");
    let unfinished = check(&declaration, -(ASYNC_BODY_DECLARATION.len() as i32), CheckAs::Script);
    if let Some(at) = unfinished.filter(|at| in_suffix(at, ASYNC_BODY_DECLARATION)) {
        return at.thrown;
    }
    if let Some(at) = check(code, 0, CheckAs::FunctionBody) {
        if at.thrown.message == wrapped.thrown.message {
            return at.thrown;
        }
    }
    // Not told apart (a stray `}` after an `await`): the wrapped parse's fault, placed at
    // the end of the user's input rather than on a line past it.
    let (line, column) = end_of(code);
    Thrown { line: Some(line), column: Some(column), ..wrapped.thrown }
}

/// The 1-based line and column just past the end of `code`, counted as V8 counts them
/// (lines end at LF, CR, CRLF, U+2028 and U+2029; columns in UTF-16 units).
fn end_of(code: &str) -> (u32, u32) {
    let (mut line, mut column) = (1u32, 1u32);
    let mut chars = code.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\r' if chars.peek() == Some(&'\n') => {}
            '\n' | '\r' | '\u{2028}' | '\u{2029}' => (line, column) = (line + 1, 1),
            _ => column += c.len_utf16() as u32,
        }
    }
    (line, column)
}

/// What the sandbox reads when the code is longer than V8's longest string.
pub const CODE_TOO_LONG: (&str, &str) = ("RangeError", "code is too long");

/// Texts the seam throws into the sandbox (its `ISOLET_TEXT_*` codes).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SeamText {
    HostArgsTooLarge { limit: u64 },
    BufferOverBudget { requested: u64, budget: u64 },
    DataReadOnly,
    HostReplyUnreadable,
}

impl SeamText {
    /// From the seam's code and numbers; `None` for an unknown code.
    pub fn from_seam(what: u32, a: u64, b: u64) -> Option<SeamText> {
        Some(match what {
            0 => SeamText::HostArgsTooLarge { limit: a },
            1 => SeamText::BufferOverBudget { requested: a, budget: b },
            2 => SeamText::DataReadOnly,
            3 => SeamText::HostReplyUnreadable,
            _ => return None,
        })
    }
}

impl std::fmt::Display for SeamText {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SeamText::HostArgsTooLarge { limit } => {
                write!(f, "Host call arguments exceed the bridge limit of {limit} bytes")
            }
            SeamText::BufferOverBudget { requested, budget } => {
                write!(f, "ArrayBuffer maxByteLength of {requested} bytes exceeds the sandbox's ArrayBuffer budget of {budget} bytes")
            }
            SeamText::DataReadOnly => f.write_str("data is read-only"),
            SeamText::HostReplyUnreadable => f.write_str("host reply could not be read"),
        }
    }
}

/// The sandbox-side class of a rejected host call's error, from the host error's name:
/// the standard names get their own class, so `instanceof TypeError` holds in the sandbox.
/// Values are the seam's `ISOLET_ERROR_CLASS_*`.
pub fn host_error_class(name: &str) -> u32 {
    match name {
        "TypeError" => 1,
        "RangeError" => 2,
        "ReferenceError" => 3,
        _ => 0,
    }
}

/// What kind of value was thrown (the seam's `ISOLET_VALUE_*`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ThrownKind {
    NativeError,
    Object,
    String,
    Number,
    Boolean,
    Undefined,
    Null,
    Symbol,
    BigInt,
}

impl ThrownKind {
    pub fn from_seam(code: i32) -> ThrownKind {
        match code {
            0 => ThrownKind::NativeError,
            1 => ThrownKind::Object,
            2 => ThrownKind::String,
            3 => ThrownKind::Number,
            4 => ThrownKind::Boolean,
            6 => ThrownKind::Null,
            7 => ThrownKind::Symbol,
            8 => ThrownKind::BigInt,
            _ => ThrownKind::Undefined,
        }
    }
}

/// The `name` reported for a thrown value: its `name` when that is a string (own or
/// inherited, as `error.name` reads it), else its constructor's name (`throw new
/// Test262Error()` whose class has no `name` gives `Test262Error`), else, for a
/// primitive, the name of its type's wrapper (`throw 5` gives `Number`; `undefined` and
/// `null` give themselves). `Error` is reported only for values that say so.
pub fn thrown_name(kind: ThrownKind, name: Option<&str>, constructor: Option<&str>) -> String {
    if let Some(name) = name {
        return name.to_string();
    }
    let primitive = match kind {
        ThrownKind::NativeError => "Error",
        ThrownKind::Object => "Object",
        ThrownKind::String => "String",
        ThrownKind::Number => "Number",
        ThrownKind::Boolean => "Boolean",
        ThrownKind::Undefined => "undefined",
        ThrownKind::Null => "null",
        ThrownKind::Symbol => "Symbol",
        ThrownKind::BigInt => "BigInt",
    };
    match (kind, constructor) {
        (ThrownKind::NativeError | ThrownKind::Object, Some(c)) if !c.is_empty() => c.to_string(),
        _ => primitive.to_string(),
    }
}

/// The log entry of an unhandled rejection: its reason's stack when it has one (an Error),
/// else its name and message and where the promise was rejected, as a stack frame
/// names it (so positions map back to the user's source like a stack's).
pub fn unhandled_rejection_entry(thrown: &Thrown) -> String {
    if let Some(stack) = thrown.stack.as_deref().filter(|s| !s.is_empty()) {
        return format!("Unhandled promise rejection: {stack}");
    }
    let described = if thrown.message.is_empty() { thrown.name.clone() } else { format!("{}: {}", thrown.name, thrown.message) };
    match (thrown.line, thrown.column) {
        (Some(line), Some(column)) => {
            format!("Unhandled promise rejection: {described}\n    at {}:{line}:{column}", SCRIPT_NAME)
        }
        _ => format!("Unhandled promise rejection: {described}"),
    }
}

/// Whether a `vfprintf` format string is a line of V8's OOM banner, which an isolate
/// thread's heap exhaustion prints to the process's stderr (the addon drops it there).
pub fn is_oom_banner(format: &[u8]) -> bool {
    format.starts_with(b"\n<--- Last few GCs --->") || format.starts_with(b"\n<--- JS stacktrace --->")
}

#[cfg(test)]
mod tests {
    #[test]
    fn only_the_oom_banner_lines_are_dropped() {
        assert!(super::is_oom_banner(b"\n<--- Last few GCs --->\n%s\n"));
        assert!(super::is_oom_banner(b"\n<--- JS stacktrace --->\n%s\n"));
        assert!(!super::is_oom_banner(b"\n#\n# Fatal error in %s\n# %s\n#\n\n"));
        assert!(!super::is_oom_banner(b"%s"));
    }

    use super::*;

    #[test]
    fn a_json_text_is_counted_by_where_values_and_keys_start_never_inside_strings() {
        let count = |text: &str| {
            let mut scan = JsonScan::new(u64::MAX);
            assert!(scan.feed(text.as_bytes()));
            scan.values
        };
        assert_eq!(count("1"), 1);
        assert_eq!(count("[1,2,3]"), 4);
        assert_eq!(count(r#"{"a":1,"b":[true,null]}"#), 7);
        // Commas, colons and brackets in strings, escaped quotes included, are text.
        assert_eq!(count(r#"["a,b:[{", "\",[" , "\\"]"#), 4);
        assert_eq!(count(&format!("[{}1]", "1,".repeat(1000))), 1002);
        // Pieces may split an escape or a string anywhere.
        let text: Vec<u16> = r#"["x\",", 1]"#.encode_utf16().collect();
        for cut in 0..text.len() {
            let mut scan = JsonScan::new(u64::MAX);
            scan.feed(&text[..cut]);
            scan.feed(&text[cut..]);
            assert_eq!(scan.values, 3, "cut at {cut}");
        }
    }

    #[test]
    fn a_json_text_past_its_bound_is_refused_once_it_passes() {
        let limit = 64 * 1024 * 1024;
        assert_eq!(max_json_values(limit), 4 * 1024 * 1024);
        let mut scan = JsonScan::new(3);
        assert!(scan.feed(b"[1,2"));
        assert!(!scan.feed(b",3]"));
        assert!(JsonScan::new(1).feed(b"\"[,,,,]\""));
    }

    #[test]
    fn heap_ceiling_is_the_limit_plus_an_eighth() {
        let mb = 1024 * 1024;
        assert_eq!(heap_ceiling_bytes(64 * mb), 72 * mb);
        assert_eq!(heap_ceiling_bytes(8 * mb), 9 * mb);
        // A 256 MB string under a 64 MB limit is over it; 64 MB of live data is not.
        assert!(256 * mb > heap_ceiling_bytes(64 * mb));
        assert!(64 * mb <= heap_ceiling_bytes(64 * mb));
        assert_eq!(heap_ceiling_bytes(usize::MAX), usize::MAX);
        assert!(over_heap_ceiling(64 * mb, 256 * mb));
        assert!(over_heap_ceiling(64 * mb, 72 * mb + 1));
        assert!(!over_heap_ceiling(64 * mb, 72 * mb));
        assert!(!over_heap_ceiling(256 * mb, 128 * mb));
    }

    #[test]
    fn a_string_name_wins_even_if_inherited_or_odd() {
        assert_eq!(thrown_name(ThrownKind::NativeError, Some("TypeError"), Some("TypeError")), "TypeError");
        assert_eq!(thrown_name(ThrownKind::Object, Some("Custom"), Some("Object")), "Custom");
        assert_eq!(thrown_name(ThrownKind::Object, Some(""), Some("Object")), "");
    }

    #[test]
    fn without_a_name_the_constructor_names_the_value() {
        assert_eq!(thrown_name(ThrownKind::Object, None, Some("Test262Error")), "Test262Error");
        assert_eq!(thrown_name(ThrownKind::Object, None, Some("Object")), "Object");
        assert_eq!(thrown_name(ThrownKind::Object, None, None), "Object");
        assert_eq!(thrown_name(ThrownKind::Object, None, Some("")), "Object");
    }

    #[test]
    fn primitives_are_named_by_their_type_never_error() {
        for (kind, want) in [
            (ThrownKind::Number, "Number"),
            (ThrownKind::String, "String"),
            (ThrownKind::Boolean, "Boolean"),
            (ThrownKind::Symbol, "Symbol"),
            (ThrownKind::BigInt, "BigInt"),
            (ThrownKind::Undefined, "undefined"),
            (ThrownKind::Null, "null"),
        ] {
            assert_eq!(thrown_name(kind, None, None), want);
            // A primitive has no constructor of its own to report.
            assert_eq!(thrown_name(kind, None, Some("Ignored")), want);
        }
    }

    #[test]
    fn the_seam_codes_round_trip() {
        for code in 0..=8 {
            let kind = ThrownKind::from_seam(code);
            assert_eq!(kind == ThrownKind::Undefined, code == 5, "{code}");
        }
        assert_eq!(ThrownKind::from_seam(99), ThrownKind::Undefined);
        assert_eq!(SeamText::from_seam(0, 7, 0), Some(SeamText::HostArgsTooLarge { limit: 7 }));
        assert_eq!(SeamText::from_seam(4, 0, 0), None);
    }

    #[test]
    fn texts_name_their_numbers() {
        assert_eq!(SeamText::HostArgsTooLarge { limit: 1024 }.to_string(), "Host call arguments exceed the bridge limit of 1024 bytes");
        assert_eq!(
            SeamText::BufferOverBudget { requested: 10, budget: 5 }.to_string(),
            "ArrayBuffer maxByteLength of 10 bytes exceeds the sandbox's ArrayBuffer budget of 5 bytes"
        );
        assert_eq!(SeamText::DataReadOnly.to_string(), "data is read-only");
    }

    #[test]
    fn the_async_body_keeps_the_users_first_line_and_columns() {
        let w = async_body_source("return 1");
        assert_eq!(w.source, "(async function () {return 1\n})");
        assert!(w.call);
        assert_eq!(&w.source[(-w.column_offset) as usize..][..8], "return 1");
        assert_eq!(script_source("1 + 1"), WrappedSource { source: "1 + 1".into(), column_offset: 0, call: false });
    }

    fn syntax(message: &str, line: u32, column: u32, position: u32) -> SyntaxAt {
        let thrown =
            Thrown { name: "SyntaxError".into(), message: message.into(), line: Some(line), column: Some(column), ..Default::default() };
        SyntaxAt { thrown, position: Some(position) }
    }

    #[test]
    fn an_error_inside_the_users_code_is_theirs_unchecked() {
        let wrapped = syntax("Unexpected identifier 'b'", 1, 3, 22);
        let t = async_body_syntax_error("a b", wrapped.clone(), |_, _, _| panic!("no second compile"));
        assert_eq!(t, wrapped.thrown);
    }

    #[test]
    fn an_unfinished_body_is_reported_where_v8_meets_the_end_of_the_input() {
        let code = "const a = 1;\nreturn (";
        let end = (ASYNC_BODY_PREFIX.len() + code.len()) as u32;
        let mut asked = vec![];
        let t = async_body_syntax_error(code, syntax("Unexpected token '}'", 3, 1, end + 1), |src, offset, how| {
            asked.push(how);
            assert_eq!((src, offset), (format!("{ASYNC_BODY_DECLARATION}{code}").as_str(), -(ASYNC_BODY_DECLARATION.len() as i32)));
            Some(syntax("Unexpected end of input", 2, 9, src.len() as u32))
        });
        assert_eq!((t.message.as_str(), t.line, t.column), ("Unexpected end of input", Some(2), Some(9)));
        assert_eq!(asked, [CheckAs::Script]);
    }

    #[test]
    fn a_stray_brace_is_named_where_it_stands() {
        let code = "return 1;\n}";
        let end = (ASYNC_BODY_PREFIX.len() + code.len()) as u32;
        let t = async_body_syntax_error(code, syntax("Unexpected token '}'", 3, 1, end + 1), |_, _, how| match how {
            CheckAs::Script => None, // the declaration closed early: it compiles
            CheckAs::FunctionBody => Some(syntax("Unexpected token '}'", 2, 1, 10)),
        });
        assert_eq!((t.line, t.column), (Some(2), Some(1)));
        // When the function-body parse trips over `await` instead, the wrapped fault is
        // placed at the end of the user's input (in UTF-16 columns, after a CRLF).
        let code = "await f();\r\n\u{e9}}";
        let end = (ASYNC_BODY_PREFIX.len() + code.encode_utf16().count()) as u32;
        let t = async_body_syntax_error(code, syntax("Unexpected token '}'", 3, 1, end + 1), |_, _, how| match how {
            CheckAs::Script => None,
            CheckAs::FunctionBody => Some(syntax("await is only valid in async functions", 1, 1, 0)),
        });
        assert_eq!((t.message.as_str(), t.line, t.column), ("Unexpected token '}'", Some(2), Some(3)));
    }

    #[test]
    fn console_levels_match_the_log_levels() {
        for (level, name) in CONSOLE_METHODS.iter().enumerate() {
            assert_eq!(crate::logs::LogLevel::from_index(level as u32).as_str(), *name);
        }
    }

    #[test]
    fn then_is_never_a_data_key() {
        assert!(is_never_a_data_key("then"));
        assert!(!is_never_a_data_key("accounts"));
        assert!(!is_never_a_data_key("Then"));
    }

    #[test]
    fn host_error_classes() {
        assert_eq!(host_error_class("TypeError"), 1);
        assert_eq!(host_error_class("RangeError"), 2);
        assert_eq!(host_error_class("ReferenceError"), 3);
        assert_eq!(host_error_class("MyError"), 0);
    }

    #[test]
    fn an_unhandled_rejection_is_logged_with_its_stack_or_where_it_was_rejected() {
        let entry = |t: Thrown| unhandled_rejection_entry(&t);
        assert_eq!(
            entry(Thrown {
                name: "Error".into(),
                message: "x".into(),
                stack: Some("Error: x\n    at f (sandbox.js:1:2)".into()),
                ..Default::default()
            }),
            "Unhandled promise rejection: Error: x\n    at f (sandbox.js:1:2)"
        );
        assert_eq!(
            entry(Thrown { name: "String".into(), message: "no".into(), line: Some(3), column: Some(9), ..Default::default() }),
            "Unhandled promise rejection: String: no\n    at sandbox.js:3:9"
        );
    }
}
