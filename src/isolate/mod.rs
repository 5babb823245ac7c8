//! The isolate thread: one OS thread per isolate, which creates it, serves exactly one
//! execution on it and disposes it. `run` holds the state a run shares with other
//! threads (inbox, lifecycle and its one `end`); `thread` holds the run loop.
pub(crate) mod code;
pub(crate) mod persistent;
pub(crate) mod run;
pub(crate) mod thread;
pub(crate) mod warm;

pub(crate) use run::{BeforeDone, Completion, EventSink, Handover, HostReply, RunShared, RunSpec, StopReason};
pub(crate) use thread::IsolateThread;
