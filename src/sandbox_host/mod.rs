//! Inside a sandbox host process (see "The process boundary" in the design): `lock_down`,
//! the least-privilege step taken right after start-up, and `channel`, the native run
//! channel to the parent, which serves the parent's runs on this process's isolate
//! threads. The parent's side is `crate::supervisor`. It must not import `napi`;
//! `src/api/` exposes it to JS.
mod channel;
mod lockdown;

pub(crate) use channel::serve;
pub(crate) use lockdown::lock_down;
