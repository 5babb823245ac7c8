//! Sandbox host processes: the child `node` processes that run isolates on an engine's
//! behalf (see "The process boundary" in the design). This module holds what runs
//! inside such a child: `lock_down`, the least-privilege step taken right after
//! start-up. It must not import `napi`; `src/api/lockdown.rs` exposes it to JS.
mod lockdown;

pub(crate) use lockdown::lock_down;
