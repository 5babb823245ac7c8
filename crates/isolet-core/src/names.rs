//! Rules for names the host installs as sandbox globals (capabilities, tools, the
//! `data` and `wasm` objects): plain identifiers that never shadow a built-in.

/// Globals of a fresh context (ECMAScript built-ins and what isolet itself installs)
/// plus reserved words. A capability may not take any of these names.
const RESERVED: &[&str] = &[
    // ECMAScript global objects and functions
    "globalThis", "Infinity", "NaN", "undefined", "eval", "isFinite", "isNaN", "parseFloat",
    "parseInt", "decodeURI", "decodeURIComponent", "encodeURI", "encodeURIComponent", "escape",
    "unescape", "AggregateError", "Array", "ArrayBuffer", "Atomics", "BigInt", "BigInt64Array",
    "BigUint64Array", "Boolean", "DataView", "Date", "Error", "EvalError", "FinalizationRegistry",
    "Float32Array", "Float64Array", "Float16Array", "Function", "Int8Array", "Int16Array",
    "Int32Array", "Intl", "Iterator", "JSON", "Map", "Math", "Number", "Object", "Promise",
    "Proxy", "RangeError", "ReferenceError", "Reflect", "RegExp", "Set", "SharedArrayBuffer",
    "String", "Symbol", "SyntaxError", "TypeError", "Uint8Array", "Uint8ClampedArray",
    "Uint16Array", "Uint32Array", "URIError", "WeakMap", "WeakRef", "WeakSet", "WebAssembly",
    "SuppressedError", "DisposableStack", "AsyncDisposableStack",
    // installed by isolet
    "console", "data", "wasm",
    // reserved words and literals
    "await", "break", "case", "catch", "class", "const", "continue", "debugger", "default",
    "delete", "do", "else", "enum", "export", "extends", "false", "finally", "for", "function",
    "if", "implements", "import", "in", "instanceof", "interface", "let", "new", "null",
    "package", "private", "protected", "public", "return", "static", "super", "switch", "this",
    "throw", "true", "try", "typeof", "var", "void", "while", "with", "yield", "arguments",
];

/// Why a global name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("`{0}` is not a valid JavaScript identifier")]
    NotIdentifier(String),
    #[error("`{0}` would shadow a built-in global or reserved word")]
    Reserved(String),
}

/// Accepts ASCII identifiers (`[A-Za-z_$][A-Za-z0-9_$]*`, at most 128 characters) that
/// are not reserved.
pub fn check_global_name(name: &str) -> Result<(), NameError> {
    let mut chars = name.chars();
    let ok_start = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$');
    let ok_rest = chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$');
    if !ok_start || !ok_rest || name.len() > 128 {
        return Err(NameError::NotIdentifier(name.to_string()));
    }
    if RESERVED.contains(&name) {
        return Err(NameError::Reserved(name.to_string()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn accepts_plain_identifiers() {
        for ok in ["readFile", "fetch", "_x", "$db", "tool2"] {
            assert_eq!(check_global_name(ok), Ok(()), "{ok}");
        }
    }

    #[test]
    fn refuses_non_identifiers() {
        for bad in ["", "1abc", "a-b", "a b", "a.b", "ünïcode", "x\0"] {
            assert!(matches!(check_global_name(bad), Err(NameError::NotIdentifier(_))), "{bad:?}");
        }
    }

    #[test]
    fn refuses_builtins_and_keywords() {
        for bad in ["Object", "Promise", "globalThis", "eval", "console", "return"] {
            assert!(check_global_name(bad).is_err(), "{bad:?}");
        }
        assert!(matches!(check_global_name("Proxy"), Err(NameError::Reserved(_))));
    }
}
