//! The web platform APIs' pure logic (`web: true`; docs/web.md): what the sandbox's
//! `atob`, `TextDecoder`, `URL`, `crypto` and friends compute, as plain functions over
//! bytes and strings, under `cargo test`. The spec-heavy parts come from well-kept
//! libraries (ada for WHATWG URL, encoding_rs, RustCrypto, getrandom); the ops that call
//! these from the sandbox are `src/web/`, the WebIDL classes are `src/web/js/`.
pub mod base64;
pub mod crypto;
pub mod encoding;
pub mod url;

/// Most timers (`setTimeout`, `setInterval`) a run may have pending at once: past it, a new
/// one is a RangeError. Each costs heap (its callback and arguments), which the memory limit
/// bounds anyway; this bounds the work of a run that schedules timers in a loop.
pub const MAX_PENDING_TIMERS: usize = 10_000;

/// An error a web API throws in the sandbox, as its standard names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebError {
    Type(String),
    Range(String),
    /// A `DOMException` with this name (`InvalidCharacterError`, `QuotaExceededError`, ...).
    Dom {
        name: &'static str,
        message: String,
    },
}

impl WebError {
    pub fn dom(name: &'static str, message: impl Into<String>) -> WebError {
        WebError::Dom { name, message: message.into() }
    }
}
