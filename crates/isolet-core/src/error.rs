//! The closed set of ways a sandbox run can fail. Each kind maps to one JS error class
//! (the six classes of the `@coda/sandbox` seed) and one stable code.
use std::fmt;

/// Why a run failed. Every kind has a JS class name and a stable `code`.
#[non_exhaustive]
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ErrorKind {
    /// Wall-clock or CPU-time limit reached.
    Timeout,
    /// V8 heap limit or ArrayBuffer budget reached.
    MemoryLimit,
    /// The sandboxed code threw, or its result could not be copied out.
    Runtime,
    /// Invalid input: bad options, non-string code, syntax errors.
    Validation,
    /// The caller aborted the run (AbortSignal, `session.abort()`, shutdown).
    Aborted,
    /// A bug or resource failure in isolet itself (e.g. an isolate could not be made).
    Internal,
    /// The engine refused the run for lack of room: its queue is full, or too many
    /// threads that ignored termination are still running. Retry later.
    Overloaded,
    /// The engine cannot take runs yet (`SandboxEngine.init()` has not completed).
    NotReady,
    /// The sandbox host process serving the run died (signal, fatal error, killed by
    /// its supervisor for a reason other than the run's own limits).
    Crashed,
}

impl ErrorKind {
    pub const ALL: [ErrorKind; 9] = [
        ErrorKind::Timeout,
        ErrorKind::MemoryLimit,
        ErrorKind::Runtime,
        ErrorKind::Validation,
        ErrorKind::Aborted,
        ErrorKind::Internal,
        ErrorKind::Overloaded,
        ErrorKind::NotReady,
        ErrorKind::Crashed,
    ];

    /// The kind's own name (`Timeout`, `NotReady`, ...), as `lib/errors.js` refers to it.
    pub fn name(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "Timeout",
            ErrorKind::MemoryLimit => "MemoryLimit",
            ErrorKind::Runtime => "Runtime",
            ErrorKind::Validation => "Validation",
            ErrorKind::Aborted => "Aborted",
            ErrorKind::Internal => "Internal",
            ErrorKind::Overloaded => "Overloaded",
            ErrorKind::NotReady => "NotReady",
            ErrorKind::Crashed => "Crashed",
        }
    }

    /// The JS class the host sees.
    pub fn class_name(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "SandboxTimeoutError",
            ErrorKind::MemoryLimit => "SandboxOOMError",
            ErrorKind::Runtime => "SandboxRuntimeError",
            ErrorKind::Validation => "SandboxValidationError",
            ErrorKind::Aborted => "SandboxAbortedError",
            ErrorKind::Internal | ErrorKind::Overloaded | ErrorKind::NotReady | ErrorKind::Crashed => "SandboxError",
        }
    }

    /// Stable machine-readable code (`err.code` in JS).
    pub fn code(self) -> &'static str {
        match self {
            ErrorKind::Timeout => "ERR_ISOLET_TIMEOUT",
            ErrorKind::MemoryLimit => "ERR_ISOLET_OOM",
            ErrorKind::Runtime => "ERR_ISOLET_RUNTIME",
            ErrorKind::Validation => "ERR_ISOLET_VALIDATION",
            ErrorKind::Aborted => "ERR_ISOLET_ABORTED",
            ErrorKind::Internal => "ERR_ISOLET_INTERNAL",
            ErrorKind::Overloaded => "ERR_ISOLET_OVERLOADED",
            ErrorKind::NotReady => "ERR_ISOLET_NOT_READY",
            ErrorKind::Crashed => "ERR_ISOLET_CRASHED",
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.class_name())
    }
}

/// What the sandboxed code threw, as strings copied out of the isolate.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Thrown {
    pub name: String,
    pub message: String,
    pub stack: Option<String>,
    /// 1-based position, when V8 reported one.
    pub line: Option<u32>,
    pub column: Option<u32>,
    /// A thrown object's own enumerable fields, those that can be copied, serialized as
    /// one object (at most `seam_policy::MAX_ERROR_TEXT_BYTES`): `throw { code: 'E_AUTH' }`
    /// keeps its `code`.
    pub fields: Option<Vec<u8>>,
}

/// A failed run: its kind, a message for humans, and details where they exist.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind}: {message}")]
pub struct Failure {
    pub kind: ErrorKind,
    pub message: String,
    /// For `Runtime` and syntax (`Validation`) failures: what the code threw.
    pub thrown: Option<Box<Thrown>>,
    /// Which limit ended the run, one of [`LIMIT_NAMES`]: `"wall"` or `"cpu"` for
    /// `Timeout`; the option's name for a bridge limit (`"maxOutputValues"`).
    pub limit: Option<&'static str>,
}

/// Every `Failure::limit` there is (a frame from a sandbox host may name only these).
pub const LIMIT_NAMES: &[&str] = &["wall", "cpu", "maxOutputBytes", "maxOutputValues"];

impl Failure {
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        Failure { kind, message: message.into(), thrown: None, limit: None }
    }

    pub fn wall_timeout(ms: u64) -> Self {
        Failure { limit: Some("wall"), ..Failure::new(ErrorKind::Timeout, format!("Execution exceeded the wall-clock limit of {ms} ms")) }
    }

    pub fn cpu_timeout(ms: u64) -> Self {
        Failure { limit: Some("cpu"), ..Failure::new(ErrorKind::Timeout, format!("Execution exceeded the CPU-time limit of {ms} ms")) }
    }

    /// Stopped by its caller (`abort()`, an AbortSignal).
    pub fn aborted() -> Self {
        Failure::new(ErrorKind::Aborted, "Execution was aborted by the caller")
    }

    /// Ended (queued or running) by the engine's `shutdown()`.
    pub fn shut_down() -> Self {
        Failure::new(ErrorKind::Aborted, "The sandbox engine was shut down")
    }

    pub fn out_of_memory(mb: u32) -> Self {
        Failure::new(ErrorKind::MemoryLimit, format!("Isolate exceeded its memory limit of {mb} MB"))
    }

    /// The result holds more than `max` values (`maxOutputValues`).
    pub fn too_many_output_values(max: u32) -> Self {
        Failure {
            limit: Some("maxOutputValues"),
            ..Failure::new(ErrorKind::Runtime, format!("The result holds more than {max} values, over the output limit (maxOutputValues)"))
        }
    }

    /// The result takes more than `max` bytes serialized (`maxOutputBytes`).
    pub fn too_many_output_bytes(max: usize) -> Self {
        Failure {
            limit: Some("maxOutputBytes"),
            ..Failure::new(ErrorKind::Runtime, format!("The result exceeds the output limit of {max} bytes (maxOutputBytes)"))
        }
    }

    /// The code threw `thrown`; the message reads like V8's own `Name: message`.
    pub fn threw(thrown: Thrown) -> Self {
        let message = if thrown.message.is_empty() { thrown.name.clone() } else { format!("{}: {}", thrown.name, thrown.message) };
        Failure { thrown: Some(Box::new(thrown)), ..Failure::new(ErrorKind::Runtime, message) }
    }

    /// The result holds a value that cannot be copied out; `path` names the first one as
    /// the seam found it (`result.items[3].onClick: function`).
    pub fn uncloneable_output(path: &str) -> Self {
        let message = format!(
            "the result cannot be copied out of the sandbox: {path} (only data crosses: no functions, symbols, promises or proxies)"
        );
        Failure::threw(Thrown { name: "DataCloneError".into(), message, ..Default::default() })
    }

    /// `unhandledRejections: 'error'`: the run would have succeeded, but `thrown` rejected
    /// a promise nobody handled.
    pub fn unhandled_rejection(thrown: Thrown) -> Self {
        let described = if thrown.message.is_empty() { thrown.name.clone() } else { format!("{}: {}", thrown.name, thrown.message) };
        Failure { message: format!("Unhandled promise rejection: {described}"), ..Failure::threw(thrown) }
    }

    /// The code did not compile.
    pub fn syntax(thrown: Thrown) -> Self {
        let at = match (thrown.line, thrown.column) {
            (Some(l), Some(c)) => format!(" (line {l}, column {c})"),
            _ => String::new(),
        };
        let message = format!("{}: {}{at}", thrown.name, thrown.message);
        Failure { thrown: Some(Box::new(thrown)), ..Failure::new(ErrorKind::Validation, message) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_kind_has_a_distinct_code_and_one_of_the_six_classes() {
        let classes: std::collections::HashSet<_> = ErrorKind::ALL.iter().map(|k| k.class_name()).collect();
        let codes: std::collections::HashSet<_> = ErrorKind::ALL.iter().map(|k| k.code()).collect();
        assert_eq!(classes.len(), 6);
        assert_eq!(codes.len(), ErrorKind::ALL.len());
        assert!(classes.contains("SandboxError"));
    }

    #[test]
    fn thrown_message_reads_like_v8() {
        let f = Failure::threw(Thrown { name: "TypeError".into(), message: "x is not a function".into(), ..Default::default() });
        assert_eq!(f.kind, ErrorKind::Runtime);
        assert_eq!(f.message, "TypeError: x is not a function");
    }

    #[test]
    fn uncloneable_results_and_unhandled_rejections_say_what_happened() {
        let f = Failure::uncloneable_output("result.items[3].onClick: function");
        assert_eq!(f.kind, ErrorKind::Runtime);
        assert_eq!(
            f.message,
            "DataCloneError: the result cannot be copied out of the sandbox: result.items[3].onClick: function (only data crosses: no functions, symbols, promises or proxies)"
        );
        assert_eq!(f.thrown.as_ref().unwrap().name, "DataCloneError");
        let f = Failure::unhandled_rejection(Thrown { name: "Error".into(), message: "lost".into(), ..Default::default() });
        assert_eq!((f.kind, f.message.as_str()), (ErrorKind::Runtime, "Unhandled promise rejection: Error: lost"));
        assert_eq!(f.thrown.unwrap().message, "lost");
    }

    #[test]
    fn syntax_failure_carries_position() {
        let f = Failure::syntax(Thrown {
            name: "SyntaxError".into(),
            message: "Unexpected token".into(),
            line: Some(3),
            column: Some(7),
            ..Default::default()
        });
        assert_eq!(f.kind, ErrorKind::Validation);
        assert!(f.message.ends_with("(line 3, column 7)"));
    }
}
