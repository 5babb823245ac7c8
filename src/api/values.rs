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
        Err(CountError::TooMany { .. }) => -1.0,
        Err(CountError::Unreadable(_)) => -2.0,
    }
}
