//! isolet: run untrusted JavaScript in bare V8 isolates from Node.js.
//!
//! Layers, from JS inwards:
//! - `api`: napi bindings for the engine (with `capabilities`, the only modules that
//!   import `napi`);
//! - `engine`: admission, warm pool, shutdown;
//! - `isolate`: the isolate thread and the state a run shares across threads;
//! - `limits`: the watchdog and the quarantine of unstoppable threads;
//! - `v8`: safe wrappers over the C++ seam in `native/` (the only code touching V8);
//! - `capabilities`: host-side capability implementations (scoped file reads).
//!
//! Pure logic (limits, errors, logs, names, queue) lives in `crates/isolet-core`.
#![deny(unsafe_op_in_unsafe_fn)]

mod api;
mod capabilities;
mod engine;
mod isolate;
mod limits;
mod supervisor;
mod v8;
mod web;
