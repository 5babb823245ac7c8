//! JS values to `isolet_core::Raw`: the option objects users pass, copied as they are so
//! that isolet-core checks every name and value (`crates/isolet-core/src/options.rs`).
use napi::bindgen_prelude::*;
use napi::bindgen_prelude::JsObjectValue;
use napi::{JsValue, KeyCollectionMode, KeyConversion, KeyFilter, ValueType};

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
    if value.is_array()? {
        let array = unsafe { value.cast::<Array>() }?;
        let mut items = Vec::with_capacity(array.len() as usize);
        for i in 0..array.len() {
            // A hole is undefined, not whatever Array.prototype holds at that index.
            if !array.has_own_property(&i.to_string())? {
                items.push(Raw::Undefined);
                continue;
            }
            let item: Unknown = array.get_element(i)?;
            items.push(raw_of(&item, depth + 1)?);
        }
        return Ok(Raw::Array(items));
    }
    let object = unsafe { value.cast::<Object>() }?;
    // Own enumerable keys, as `Object.keys` sees them (not the prototype's); symbol keys
    // are skipped below.
    let keys = object.get_all_property_names(KeyCollectionMode::OwnOnly, KeyFilter::Enumerable, KeyConversion::NumbersToStrings)?;
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
        let item: Unknown = object.get_property(key_value)?;
        entries.push((key, raw_of(&item, depth + 1)?));
    }
    Ok(Raw::Object(entries))
}
