//! isolet: run untrusted JavaScript in bare V8 isolates from Node.js.
//!
//! Layers, from JS inwards:
//! - `api`: napi bindings for the engine (with `capabilities`, the only modules that
//!   import `napi`);
//! - `engine`: the one engine (admission, warm pool, sessions, shutdown) over two
//!   backends: isolate threads here (`engine::pool`) and sandbox host processes
//!   (`supervisor`, the parent's side; `sandbox_host`, the host's);
//! - `isolate`: the isolate thread and the state a run shares across threads;
//! - `limits`: the watchdog and the quarantine of unstoppable threads;
//! - `v8`: safe wrappers over the C++ seam in `native/` (the only code touching V8);
//! - `capabilities`: host-side capability implementations (scoped file reads).
//!
//! Pure logic (limits, errors, logs, names, queue) lives in `crates/isolet-core`.
#![deny(unsafe_op_in_unsafe_fn)]
// `clippy --all-targets` builds this cdylib's test harness, which has no Node to register
// the napi exports with: everything only they reach looks unused there. It holds no tests
// (`test = false`: pure logic is tested in isolet-core).
#![cfg_attr(test, allow(dead_code))]

mod api;
mod capabilities;
mod engine;
mod isolate;
mod limits;
mod sandbox_host;
mod supervisor;
mod v8;
mod web;
