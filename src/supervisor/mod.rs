//! Sandbox host processes (see "The process boundary" in the design). Inside a host:
//! `lock_down`, the least-privilege step taken right after start-up, and `channel`, the
//! native run channel to the parent. In the parent: `host`, the mechanism of starting
//! one host, writing to and reading from it (the process backend,
//! `crate::engine::processes`, decides what to do with it). It must not import `napi`;
//! `src/api/` exposes it to JS.
mod channel;
pub(crate) mod host;
mod lockdown;

pub(crate) use channel::serve;
pub(crate) use lockdown::lock_down;
