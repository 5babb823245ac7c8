//! The parent's own count of the values in bytes a sandbox host process sent (a result,
//! host-call arguments), before `lib/bridge.js` deserializes them. The host counted them
//! already; a compromised host would not, and the parent builds every value on its own
//! thread.
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
