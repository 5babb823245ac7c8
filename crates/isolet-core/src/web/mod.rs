//! The web platform APIs' pure logic (`web: true`; docs/web.md): what the sandbox's
//! `atob`, `TextDecoder`, `URL`, `crypto` and friends compute, as plain functions over
//! bytes and strings, under `cargo test`. The spec-heavy parts come from well-kept
//! libraries (ada for WHATWG URL, encoding_rs, RustCrypto, getrandom); the ops that call
//! these from the sandbox are `src/web/`, the WebIDL classes are `src/web/js/`.
pub mod base64;
pub mod crypto;
pub mod encoding;
pub mod url;

/// An error a web API throws in the sandbox, as its standard names it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebError {
    Type(String),
    Range(String),
    /// A `DOMException` with this name (`InvalidCharacterError`, `QuotaExceededError`, ...).
    Dom { name: &'static str, message: String },
}

impl WebError {
    pub fn dom(name: &'static str, message: impl Into<String>) -> WebError {
        WebError::Dom { name, message: message.into() }
    }
}
