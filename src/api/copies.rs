//! Handing a long string result to JS without copying it (used by `lib/bridge.js`).
use std::os::raw::{c_char, c_void};
use std::ptr;

use napi::bindgen_prelude::*;
use napi::{sys, JsValue};
use napi_derive::napi;

type CreateExternalString<T> = unsafe extern "C" fn(
    sys::napi_env,
    *const T,
    isize,
    sys::napi_finalize,
    *mut c_void,
    *mut sys::napi_value,
    *mut bool,
) -> sys::napi_status;

/// Node's `node_api_create_external_string_{latin1,utf16}` (Node-API 10, and in Node 20
/// since 20.4), looked up at run time: the addon must still load on a Node without them.
fn external_string_fn<T>(name: &'static [u8]) -> Option<CreateExternalString<T>> {
    // SAFETY: dlsym with a NUL-terminated name; a found symbol has this C signature.
    let p = unsafe { libc::dlsym(libc::RTLD_DEFAULT, name.as_ptr().cast()) };
    // SAFETY: a non-null symbol of that name is that function.
    (!p.is_null()).then(|| unsafe { std::mem::transmute::<*mut c_void, CreateExternalString<T>>(p) })
}

/// A string over bytes `offset .. offset + length` of `bytes` (a Uint8Array the caller
/// owns alone and never touches again): Latin-1 bytes, or UTF-16LE code units when
/// `two_byte`, kept alive with `bytes` until the string is collected. `null` when the
/// range is out of bounds, when Node has no external strings, or when it copied.
#[napi(js_name = "shareString")]
pub fn share_string<'env>(env: &'env Env, bytes: Unknown<'env>, offset: f64, length: f64, two_byte: bool) -> Result<Option<Unknown<'env>>> {
    let raw_env = env.raw();
    let value = bytes.raw();
    let mut kind = sys::TypedarrayType::int8_array;
    let mut len = 0usize;
    let mut data: *mut c_void = ptr::null_mut();
    let mut arraybuffer = ptr::null_mut();
    let mut byte_offset = 0usize;
    // SAFETY: out-pointers are valid; a non-typed-array fails with a status.
    let status =
        unsafe { sys::napi_get_typedarray_info(raw_env, value, &mut kind, &mut len, &mut data, &mut arraybuffer, &mut byte_offset) };
    if status != sys::Status::napi_ok || kind != sys::TypedarrayType::uint8_array || data.is_null() {
        return Ok(None);
    }
    if !(offset >= 0.0 && length >= 1.0 && offset.fract() == 0.0 && length.fract() == 0.0 && offset + length <= len as f64) {
        return Ok(None);
    }
    let (offset, length) = (offset as usize, length as usize);
    // SAFETY: in bounds (checked above).
    let start = unsafe { data.cast::<u8>().add(offset) };
    if two_byte && (!length.is_multiple_of(2) || !(start as usize).is_multiple_of(2)) {
        return Ok(None);
    }
    let mut reference = ptr::null_mut();
    // SAFETY: live value; the reference keeps `bytes` (and so its memory) alive.
    if unsafe { sys::napi_create_reference(raw_env, value, 1, &mut reference) } != sys::Status::napi_ok {
        return Ok(None);
    }
    let mut out = ptr::null_mut();
    let mut copied = false;
    // SAFETY: the characters stay valid and unchanged while `reference` holds `bytes`;
    // `release` deletes the reference when the string is collected.
    let status = unsafe {
        if two_byte {
            match external_string_fn::<u16>(b"node_api_create_external_string_utf16\0") {
                Some(f) => f(raw_env, start.cast(), (length / 2) as isize, Some(release), reference.cast(), &mut out, &mut copied),
                None => sys::Status::napi_generic_failure,
            }
        } else {
            match external_string_fn::<c_char>(b"node_api_create_external_string_latin1\0") {
                Some(f) => f(raw_env, start.cast(), length as isize, Some(release), reference.cast(), &mut out, &mut copied),
                None => sys::Status::napi_generic_failure,
            }
        }
    };
    if status != sys::Status::napi_ok {
        // SAFETY: the reference made above, not handed to anyone.
        unsafe { sys::napi_delete_reference(raw_env, reference) };
        return Ok(None);
    }
    // `copied`: Node made its own copy and has already called `release`; the string is
    // as good either way.
    let _ = copied;
    // SAFETY: a value just created in this env.
    Ok(Some(unsafe { Unknown::from_raw_unchecked(raw_env, out) }))
}

unsafe extern "C" fn release(env: sys::napi_env, _data: *mut c_void, hint: *mut c_void) {
    // SAFETY: `hint` is the reference share_string made, deleted only here.
    unsafe { sys::napi_delete_reference(env, hint.cast()) };
}
