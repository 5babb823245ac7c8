//! Rules for names the host installs as sandbox globals (capabilities, tools, the
//! `data` and `wasm` objects): plain identifiers that never shadow a built-in.

/// Globals of a fresh context (ECMAScript built-ins and what isolet itself installs)
/// plus reserved words. A capability may not take any of these names.
const RESERVED: &[&str] = &[
    // ECMAScript global objects and functions
    "globalThis",
    "Infinity",
    "NaN",
    "undefined",
    "eval",
    "isFinite",
    "isNaN",
    "parseFloat",
    "parseInt",
    "decodeURI",
    "decodeURIComponent",
    "encodeURI",
    "encodeURIComponent",
    "escape",
    "unescape",
    "AggregateError",
    "Array",
    "ArrayBuffer",
    "Atomics",
    "BigInt",
    "BigInt64Array",
    "BigUint64Array",
    "Boolean",
    "DataView",
    "Date",
    "Error",
    "EvalError",
    "FinalizationRegistry",
    "Float32Array",
    "Float64Array",
    "Float16Array",
    "Function",
    "Int8Array",
    "Int16Array",
    "Int32Array",
    "Intl",
    "Iterator",
    "JSON",
    "Map",
    "Math",
    "Number",
    "Object",
    "Promise",
    "Proxy",
    "RangeError",
    "ReferenceError",
    "Reflect",
    "RegExp",
    "Set",
    "SharedArrayBuffer",
    "String",
    "Symbol",
    "SyntaxError",
    "TypeError",
    "Uint8Array",
    "Uint8ClampedArray",
    "Uint16Array",
    "Uint32Array",
    "URIError",
    "WeakMap",
    "WeakRef",
    "WeakSet",
    "WebAssembly",
    "SuppressedError",
    "DisposableStack",
    "AsyncDisposableStack",
    // installed by isolet
    "console",
    "data",
    "wasm",
    // reserved words and literals
    "await",
    "break",
    "case",
    "catch",
    "class",
    "const",
    "continue",
    "debugger",
    "default",
    "delete",
    "do",
    "else",
    "enum",
    "export",
    "extends",
    "false",
    "finally",
    "for",
    "function",
    "if",
    "implements",
    "import",
    "in",
    "instanceof",
    "interface",
    "let",
    "new",
    "null",
    "package",
    "private",
    "protected",
    "public",
    "return",
    "static",
    "super",
    "switch",
    "this",
    "throw",
    "true",
    "try",
    "typeof",
    "var",
    "void",
    "while",
    "with",
    "yield",
    "arguments",
];

/// Why a global name was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    #[error("`{0}` is not a valid JavaScript identifier")]
    NotIdentifier(String),
    #[error("`{0}` would shadow a built-in global or reserved word")]
    Reserved(String),
    #[error("`{0}` is given more than once")]
    Duplicate(String),
    #[error("`{0}` is both a function and a namespace")]
    Clash(String),
}

/// Where a capability is installed: `globalThis[member]`, or
/// `globalThis[namespace][member]` for a dotted `namespace.member`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CapabilityName<'a> {
    pub namespace: Option<&'a str>,
    pub member: &'a str,
}

/// Checks one capability name: a global name, or `namespace.member` (one level) where the
/// namespace is a global name and the member any identifier except `__proto__`.
pub fn check_capability_name(name: &str) -> Result<CapabilityName<'_>, NameError> {
    match name.split_once('.') {
        None => check_global_name(name).map(|()| CapabilityName { namespace: None, member: name }),
        Some((namespace, member)) => {
            check_global_name(namespace)?;
            // Members are properties, so keywords are fine (`github.delete`).
            if !is_identifier(member) || member == "__proto__" {
                return Err(NameError::NotIdentifier(name.to_string()));
            }
            Ok(CapabilityName { namespace: Some(namespace), member })
        }
    }
}

/// Checks a run's whole capability list: each name, no repeats, and no name that is
/// both a plain function and a namespace.
pub fn check_capability_names(names: &[String]) -> Result<(), NameError> {
    let mut seen = std::collections::HashSet::new();
    let mut flat = std::collections::HashSet::new();
    let mut namespaces = std::collections::HashSet::new();
    for name in names {
        let parsed = check_capability_name(name)?;
        if !seen.insert(name.as_str()) {
            return Err(NameError::Duplicate(name.clone()));
        }
        let clash = match parsed.namespace {
            None => {
                flat.insert(parsed.member);
                namespaces.contains(parsed.member)
            }
            Some(ns) => {
                namespaces.insert(ns);
                flat.contains(ns)
            }
        };
        if clash {
            return Err(NameError::Clash(parsed.namespace.unwrap_or(parsed.member).to_string()));
        }
    }
    Ok(())
}

fn is_identifier(name: &str) -> bool {
    let mut chars = name.chars();
    let ok_start = matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_' || c == '$');
    ok_start && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') && name.len() <= 128
}

/// Accepts ASCII identifiers (`[A-Za-z_$][A-Za-z0-9_$]*`, at most 128 characters) that
/// are not reserved.
pub fn check_global_name(name: &str) -> Result<(), NameError> {
    if !is_identifier(name) {
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

    #[test]
    fn splits_namespaced_names() {
        assert_eq!(check_capability_name("github.listIssues"), Ok(CapabilityName { namespace: Some("github"), member: "listIssues" }));
        assert_eq!(check_capability_name("readFile"), Ok(CapabilityName { namespace: None, member: "readFile" }));
        assert!(check_capability_name("db.delete").is_ok(), "keywords are fine as members");
    }

    #[test]
    fn refuses_bad_namespaced_names() {
        for bad in ["a.b.c", ".x", "x.", "Object.keys", "gh.__proto__", "gh.1x", "console.log"] {
            assert!(check_capability_name(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn refuses_duplicates_and_clashes() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(check_capability_names(&names(&["a", "gh.x", "gh.y"])), Ok(()));
        assert_eq!(check_capability_names(&names(&["gh.x", "gh.x"])), Err(NameError::Duplicate("gh.x".into())));
        assert_eq!(check_capability_names(&names(&["gh", "gh.x"])), Err(NameError::Clash("gh".into())));
        assert_eq!(check_capability_names(&names(&["gh.x", "gh"])), Err(NameError::Clash("gh".into())));
    }
}
