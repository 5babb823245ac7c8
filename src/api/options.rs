//! JS values to `isolet_core::Raw`: the option objects users pass, copied as they are so
//! that isolet-core checks every name and value (`crates/isolet-core/src/options/`).
//! A read that throws (a getter, a Proxy trap) is caught here and copied as
//! `Raw::Unreadable`, so it fails as a validation error naming the option, never as an
//! exception of unknown kind.
use napi::bindgen_prelude::JsObjectValue;
use napi::bindgen_prelude::*;
use napi::{sys, JsValue, KeyCollectionMode, KeyConversion, KeyFilter, ValueType};

use isolet_core::Raw;

/// Deepest level copied: `config.wasmModules[i].source` and
/// `request.toolPolicy.maxCallsPerTool[name]` are at depth 3; nothing deeper is an option.
const MAX_DEPTH: u32 = 3;

pub(crate) fn raw_of(value: &Unknown, depth: u32) -> Result<Raw> {
    // SAFETY (every `cast` below): the value's type was checked just before.
    Ok(match value.get_type()? {
        ValueType::Undefined => Raw::Undefined,
        ValueType::Null => Raw::Null,
        ValueType::Boolean => Raw::Bool(unsafe { value.cast::<bool>() }?),
        ValueType::Number => Raw::Number(unsafe { value.cast::<f64>() }?),
        ValueType::String => Raw::String(unsafe { value.cast::<String>() }?),
        ValueType::Function => Raw::Function,
        ValueType::Symbol => Raw::Other("symbol"),
        ValueType::BigInt => Raw::Other("bigint"),
        ValueType::Object => object_of(value, depth)?,
        _ => Raw::Other("value"),
    })
}

fn object_of(value: &Unknown, depth: u32) -> Result<Raw> {
    if value.is_buffer()? {
        return Ok(Raw::Bytes(unsafe { value.cast::<Buffer>() }?.len()));
    }
    if value.is_typedarray()? {
        // Only byte arrays are sources; another typed array is described, not copied.
        return Ok(match unsafe { value.cast::<Uint8Array>() } {
            Ok(bytes) => Raw::Bytes(bytes.len()),
            Err(_) => Raw::Other("typed array"),
        });
    }
    if value.is_arraybuffer()? {
        return Ok(Raw::Bytes(unsafe { value.cast::<ArrayBuffer>() }?.len()));
    }
    if depth >= MAX_DEPTH {
        return Ok(Raw::Other("object"));
    }
    let env = value.value().env;
    if value.is_array()? {
        let array = unsafe { value.cast::<Array>() }?;
        let mut items = Vec::with_capacity(array.len() as usize);
        for i in 0..array.len() {
            // A hole is undefined, not whatever Array.prototype holds at that index.
            let own = match caught(env, array.has_own_property(&i.to_string()))? {
                Ok(own) => own,
                Err(why) => {
                    items.push(Raw::Unreadable(why));
                    continue;
                }
            };
            if !own {
                items.push(Raw::Undefined);
                continue;
            }
            items.push(match caught(env, array.get_element::<Unknown>(i))? {
                Ok(item) => raw_of(&item, depth + 1)?,
                Err(why) => Raw::Unreadable(why),
            });
        }
        return Ok(Raw::Array(items));
    }
    let object = unsafe { value.cast::<Object>() }?;
    // Own enumerable keys, as `Object.keys` sees them (not the prototype's); symbol keys
    // are skipped below.
    let keys = match caught(
        env,
        object.get_all_property_names(KeyCollectionMode::OwnOnly, KeyFilter::Enumerable, KeyConversion::NumbersToStrings),
    )? {
        Ok(keys) => keys,
        Err(why) => return Ok(Raw::Unreadable(why)),
    };
    let keys = unsafe { Array::from_napi_value(keys.value().env, keys.raw()) }?;
    let mut entries = Vec::with_capacity(keys.len() as usize);
    for i in 0..keys.len() {
        let key_value: Unknown = keys.get_element(i)?;
        if key_value.get_type()? != ValueType::String {
            continue;
        }
        // SAFETY: checked to be a string just above.
        let key = unsafe { key_value.cast::<String>() }?;
        // Read by the key V8 gave us: going by `key` would make and internalize the
        // name again (a tenth of Node's thread per trivial run, measured).
        let item = match caught(env, object.get_property::<_, Unknown>(key_value))? {
            Ok(item) => raw_of(&item, depth + 1)?,
            Err(why) => Raw::Unreadable(why),
        };
        entries.push((key, item));
    }
    Ok(Raw::Object(entries))
}

/// `result`, or (when it failed because JS threw) what JS threw, with the exception
/// cleared so the binding can go on and report it as a bad option. Any other failure of
/// napi stays an error.
fn caught<T>(env: sys::napi_env, result: Result<T>) -> Result<std::result::Result<T, String>> {
    let err = match result {
        Ok(v) => return Ok(Ok(v)),
        Err(err) => err,
    };
    match take_exception(env) {
        Some(thrown) => Ok(Err(format!("reading it threw {}", describe_thrown(env, thrown)))),
        None => Err(err),
    }
}

/// The pending JS exception, cleared; none if nothing was thrown.
fn take_exception(env: sys::napi_env) -> Option<sys::napi_value> {
    let mut pending = false;
    // SAFETY: `env` is the live env of the current binding call, on its thread.
    if unsafe { sys::napi_is_exception_pending(env, &mut pending) } != sys::Status::napi_ok || !pending {
        return None;
    }
    let mut thrown = std::ptr::null_mut();
    // SAFETY: as above; an exception is pending.
    if unsafe { sys::napi_get_and_clear_last_exception(env, &mut thrown) } != sys::Status::napi_ok || thrown.is_null() {
        return None;
    }
    Some(thrown)
}

/// Longest description of a thrown value in a message.
const MAX_THROWN_CHARS: usize = 200;

/// A thrown value as a message shows it: `Error: boom`, `'text'`, `a symbol`. An Error's
/// `name` and `message` are read once each; if that throws too, it is just `an Error`.
fn describe_thrown(env: sys::napi_env, thrown: sys::napi_value) -> String {
    // SAFETY: a value of this env, just taken from it.
    let Ok(value) = (unsafe { Unknown::from_napi_value(env, thrown) }) else { return "a value".into() };
    let text = match value.get_type() {
        Ok(ValueType::String) => unsafe { value.cast::<String>() }.map(|s| format!("'{s}'")).unwrap_or_default(),
        Ok(ValueType::Object) if value.is_error().unwrap_or(false) => {
            // SAFETY: checked to be an object just above.
            let object = unsafe { value.cast::<Object>() };
            let field = |name: &str| -> Option<String> {
                let object = object.as_ref().ok()?;
                match object.get_named_property::<Unknown>(name) {
                    Ok(v) if v.get_type().ok()? == ValueType::String => unsafe { v.cast::<String>() }.ok(),
                    Ok(_) => None,
                    Err(_) => {
                        take_exception(env);
                        None
                    }
                }
            };
            match (field("name"), field("message")) {
                (Some(name), Some(message)) => format!("{name}: {message}"),
                (Some(name), None) => name,
                _ => "an Error".into(),
            }
        }
        // Depth MAX_DEPTH: an object is named, not read (no more of its code runs).
        Ok(_) => match raw_of(&value, MAX_DEPTH) {
            Ok(Raw::Other("object")) => "an object".into(),
            Ok(raw) => raw.describe(),
            Err(_) => "a value".into(),
        },
        Err(_) => "a value".into(),
    };
    let mut short: String = text.chars().take(MAX_THROWN_CHARS).collect();
    if short.len() < text.len() {
        short.push('…');
    }
    short
}
