//! isolet-core: the parts of isolet that need neither Node nor V8, so `cargo test`
//! can reach them: every public option and its validation (options/), limits, the error taxonomy, console-log
//! accounting, per-run host-call budgets, WebAssembly memory checks, capability-name
//! rules and the engine's admission queue.
//!
//! Nothing here may depend on `napi` or on the V8 seam.
pub mod budget;
pub mod code_cache;
pub mod error;
pub mod frame;
pub mod host_policy;
pub mod limits;
pub mod logs;
pub mod modules;
pub mod names;
pub mod options;
pub mod primitive;
pub mod queue;
pub mod run_state;
pub mod sandbox;
pub mod seam_policy;
pub mod syscall_policy;
pub mod value_count;
pub mod wakeups;
pub mod warm_context;
pub mod wasm;
pub mod web;

pub use budget::{BudgetError, PendingCalls};
pub use error::{ErrorKind, Failure, Thrown};
pub use limits::{BridgeLimits, IsolateLimits};
pub use logs::{LogBuffer, LogEntry, LogLevel};
pub use names::{check_capability_name, check_capability_names, check_global_name, CapabilityName, NameError};
pub use options::{EngineConfig, ExecMode, Isolation, OptionsError, Raw, RunPlan, ToolCalls};
pub use queue::{AdmissionQueue, QueueFull, Tenant};
pub use value_count::{count_values, fixed_length_buffers, tally, Bounds, CountError, Tally};
