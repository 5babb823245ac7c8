//! Handing a large result's contents to JS without copying them (used by `lib/bridge.js`).
use std::os::raw::c_void;
use std::ptr;

use napi::bindgen_prelude::*;
use napi::{sys, JsValue};
use napi_derive::napi;

/// Memory shared out must start at this alignment, as an ArrayBuffer from V8's own
/// allocator would: a Float64Array or Atomics over it must not straddle words.
const SHARED_ALIGN: usize = 16;

/// An ArrayBuffer over bytes `offset .. offset + length` of `bytes` (a Uint8Array the
/// caller owns alone and never touches again), sharing its memory and keeping `bytes`
/// alive until the ArrayBuffer is collected. `null` when the range is out of bounds,
/// empty, not 16-byte aligned, or Node refuses external memory: the caller copies then.
#[napi(js_name = "shareBytes")]
pub fn share_bytes<'env>(env: &'env Env, bytes: Unknown<'env>, offset: f64, length: f64) -> Result<Option<Unknown<'env>>> {
    let raw_env = env.raw();
    let value = bytes.raw();
    let mut kind = sys::TypedarrayType::int8_array;
    let mut len = 0usize;
    let mut data: *mut c_void = ptr::null_mut();
    let mut arraybuffer = ptr::null_mut();
    let mut byte_offset = 0usize;
    // SAFETY: out-pointers are valid; a non-typed-array fails with a status.
    let status = unsafe {
        sys::napi_get_typedarray_info(raw_env, value, &mut kind, &mut len, &mut data, &mut arraybuffer, &mut byte_offset)
    };
    if status != sys::Status::napi_ok || kind != sys::TypedarrayType::uint8_array || data.is_null() {
        return Ok(None);
    }
    if !(offset >= 0.0 && length >= 1.0 && offset.fract() == 0.0 && length.fract() == 0.0 && offset + length <= len as f64) {
        return Ok(None);
    }
    let (offset, length) = (offset as usize, length as usize);
    // SAFETY: in bounds of the typed array's memory (checked above).
    let start = unsafe { data.cast::<u8>().add(offset) };
    if (start as usize) % SHARED_ALIGN != 0 {
        return Ok(None);
    }
    let mut reference = ptr::null_mut();
    // SAFETY: live value; the reference keeps `bytes` (and so its memory) alive.
    if unsafe { sys::napi_create_reference(raw_env, value, 1, &mut reference) } != sys::Status::napi_ok {
        return Ok(None);
    }
    let mut out = ptr::null_mut();
    // SAFETY: `start .. start + length` stays valid while `reference` holds `bytes`;
    // `release` deletes the reference once the new ArrayBuffer's memory is let go.
    let status = unsafe {
        sys::napi_create_external_arraybuffer(raw_env, start.cast(), length, Some(release), reference.cast(), &mut out)
    };
    if status != sys::Status::napi_ok {
        // SAFETY: the reference made above, not handed to anyone.
        unsafe { sys::napi_delete_reference(raw_env, reference) };
        return Ok(None);
    }
    // SAFETY: a value just created in this env.
    Ok(Some(unsafe { Unknown::from_raw_unchecked(raw_env, out) }))
}

unsafe extern "C" fn release(env: sys::napi_env, _data: *mut c_void, hint: *mut c_void) {
    // SAFETY: `hint` is the reference share_bytes made, deleted only here.
    unsafe { sys::napi_delete_reference(env, hint.cast()) };
}
