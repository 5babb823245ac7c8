//! Internal bindings of process isolation (not in the public `index.d.ts`): how the
//! parent starts a sandbox host (`setSandboxHost`, called by `lib/native.js` at load),
//! and the host's whole life (`serveSandboxHost`, called by its entry script).
use napi::bindgen_prelude::*;
use napi_derive::napi;

use crate::engine::{set_host_command, HostCommand};

/// Sandbox hosts are started as `execPath [node options] script` (tests point `script`
/// at a host of their own).
#[napi]
pub fn set_sandbox_host(exec_path: String, script: String) {
    set_host_command(HostCommand { exec_path, script });
}

/// Serves as a sandbox host over the run channel the parent passed on descriptor 3, for
/// the rest of this process's life: never returns (the process exits when the parent
/// says shutdown or goes away).
#[napi]
pub fn serve_sandbox_host(env: Env) -> Result<()> {
    crate::sandbox_host::serve(isolet_core::host_policy::HOST_CHANNEL_FD, env.raw() as usize)
}
