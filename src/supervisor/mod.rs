//! Sandbox host processes: the child `node` processes that run isolates on an engine's
//! behalf (see "The process boundary" in the design). This module holds what runs
//! inside such a child: `lock_down`, the least-privilege step taken right after
//! start-up, and `channel`, the native run channel to the
//! parent. It must not import `napi`; `src/api/lockdown.rs` and `src/api/host_channel.rs`
//! expose it to JS.
mod channel;
mod lockdown;

pub(crate) use channel::start as start_channel;
pub(crate) use lockdown::lock_down;
