//! isolet-core's count of the values in serialized bytes, for JS: what the isolate's side
//! and the process supervisor check results and host-call arguments with, exposed so that
//! `__test__/budgets-values.spec.ts` can hold it against what V8's own deserializer builds.
use napi::bindgen_prelude::*;
use napi_derive::napi;

use isolet_core::CountError;

/// How many values serialized `bytes` hold (isolet-core's `count_values`): the count,
/// `-1` when more than `max`, `-2` when the bytes are not readable as the bridge writes.
#[napi(js_name = "countValues")]
pub fn count_values(bytes: BufferSlice, max: f64) -> f64 {
    let max = if max.is_finite() && max >= 0.0 { max as u64 } else { 0 };
    match isolet_core::count_values(&bytes, max) {
        Ok(n) => n as f64,
        Err(CountError::TooMany { .. } | CountError::TooCostly { .. }) => -1.0,
        Err(CountError::Unreadable(_)) => -2.0,
    }
}

/// What serialized `bytes` would cost once built (isolet-core's `tally`): `[values, cost
/// bytes]`, or `null` when the bytes are not readable as the bridge writes. For
/// `__test__/budgets-values.spec.ts`, which holds the estimate against what V8 builds.
#[napi(js_name = "tallyValues")]
pub fn tally_values(bytes: BufferSlice) -> Option<Vec<f64>> {
    let all = isolet_core::Bounds { values: u64::MAX, cost: u64::MAX };
    isolet_core::tally(&bytes, all).ok().map(|t| vec![t.values as f64, t.cost as f64])
}

extern "C" {
    /// `native/isolet_v8.h`: the named (non-index) own enumerable keys of an object.
    fn isolet_named_keys(value: *mut std::os::raw::c_void) -> *mut std::os::raw::c_void;
}

/// The own enumerable string keys of `value` that are not array indices (or `null`): what
/// V8's serializer writes after a dense array's elements. `lib/codec.js` asks it for big
/// arrays, where `Object.keys` would make a string of every index first.
#[napi(js_name = "namedKeys")]
pub fn named_keys<'env>(env: &'env Env, value: Unknown<'env>) -> Option<Unknown<'env>> {
    // SAFETY: a live napi_value of this env, on Node's thread (napi calls us there); the
    // result is a value of the callback's handle scope.
    let keys = unsafe { isolet_named_keys(value.raw().cast()) };
    // SAFETY: a value just made in this env, or null.
    (!keys.is_null()).then(|| unsafe { Unknown::from_raw_unchecked(env.raw(), keys.cast()) })
}
