//! What the V8 seam (`native/isolet_v8.cc`) is told to do: its constants, the globals it
//! installs and removes, how code is wrapped, the words it throws and how a thrown value
//! is named. The seam holds primitives only; every choice it makes comes from here.

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
/// the seam formats at most what the log can still keep).
pub const MAX_CONSOLE_VALUE_BYTES: usize = 16 * 1024;

/// `console` methods, in level order: method `i` reports at level `i`, which
/// `crate::logs::LogLevel::from_index` reads back.
///
/// Formatting one entry stays a seam primitive ("format these arguments into at most
/// N bytes": strings and errors by `String()`, other objects by `JSON.stringify`), because
/// only the seam can stop formatting where the log room ends: arguments past it are never
/// converted, so their `toJSON` or getters never run. The room comes from the run's
/// `LogBuffer`, the per-argument cap from `MAX_CONSOLE_VALUE_BYTES`.
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
const ASYNC_BODY_SUFFIX: &str = "\n})()";

/// Source to compile and the column offset of its first line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WrappedSource {
    pub source: String,
    pub column_offset: i32,
}

/// `code` as a classic script: the completion value is the result.
pub fn script_source(code: &str) -> WrappedSource {
    WrappedSource { source: code.to_string(), column_offset: 0 }
}

/// `code` as the body of an async function called at once: only `return` gives the
/// result. The prefix sits on the user's first line and the column offset takes it back,
/// so reported lines and columns are the user's.
pub fn async_body_source(code: &str) -> WrappedSource {
    let mut source = String::with_capacity(ASYNC_BODY_PREFIX.len() + code.len() + ASYNC_BODY_SUFFIX.len());
    source.push_str(ASYNC_BODY_PREFIX);
    source.push_str(code);
    source.push_str(ASYNC_BODY_SUFFIX);
    WrappedSource { source, column_offset: -(ASYNC_BODY_PREFIX.len() as i32) }
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
            SeamText::BufferOverBudget { requested, budget } => write!(
                f,
                "ArrayBuffer maxByteLength of {requested} bytes exceeds the sandbox's ArrayBuffer budget of {budget} bytes"
            ),
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

#[cfg(test)]
mod tests {
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
        assert_eq!(
            SeamText::HostArgsTooLarge { limit: 1024 }.to_string(),
            "Host call arguments exceed the bridge limit of 1024 bytes"
        );
        assert_eq!(
            SeamText::BufferOverBudget { requested: 10, budget: 5 }.to_string(),
            "ArrayBuffer maxByteLength of 10 bytes exceeds the sandbox's ArrayBuffer budget of 5 bytes"
        );
        assert_eq!(SeamText::DataReadOnly.to_string(), "data is read-only");
    }

    #[test]
    fn the_async_body_keeps_the_users_first_line_and_columns() {
        let w = async_body_source("return 1");
        assert_eq!(w.source, "(async function () {return 1\n})()");
        assert_eq!(&w.source[(-w.column_offset) as usize..][..8], "return 1");
        assert_eq!(script_source("1 + 1"), WrappedSource { source: "1 + 1".into(), column_offset: 0 });
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
}
