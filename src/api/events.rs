//! Run events as JS objects, delivered through a thread-safe function.
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi::threadsafe_function::{ThreadsafeFunction, ThreadsafeFunctionCallMode};
use napi_derive::napi;

use isolet_core::{Failure, LogLevel};

use crate::isolate::{Completion, EventSink};

#[napi(object)]
pub struct LogEntryJs {
    pub level: String,
    pub message: String,
}

#[napi(object)]
pub struct StatsJs {
    pub wall_time_ms: f64,
    pub cpu_time_ms: f64,
    /// Peak V8 heap use during the run.
    pub heap_used_bytes: f64,
    pub heap_at_end_bytes: f64,
    pub host_calls: u32,
}

#[napi(object)]
pub struct FailureJs {
    pub code: String,
    pub class_name: String,
    pub message: String,
    pub limit: Option<String>,
    pub thrown_name: Option<String>,
    pub thrown_message: Option<String>,
    pub stack: Option<String>,
    pub line: Option<u32>,
    pub column: Option<u32>,
}

impl From<Failure> for FailureJs {
    fn from(f: Failure) -> Self {
        let has_thrown = f.thrown.is_some();
        let thrown = f.thrown.map(|t| *t).unwrap_or_default();
        FailureJs {
            code: f.kind.code().to_string(),
            class_name: f.kind.class_name().to_string(),
            message: f.message,
            limit: f.limit.map(str::to_string),
            thrown_name: has_thrown.then(|| thrown.name.clone()),
            thrown_message: has_thrown.then(|| thrown.message.clone()),
            stack: thrown.stack,
            line: thrown.line,
            column: thrown.column,
        }
    }
}

/// One event of a run. `type` is `started`, `console`, `hostCall`, `dataRequest` or `done`.
#[napi(object)]
pub struct RunEventJs {
    #[napi(js_name = "type")]
    pub kind: String,
    pub call_id: Option<u32>,
    pub name: Option<String>,
    pub payload: Option<Buffer>,
    pub id: Option<u32>,
    pub key: Option<String>,
    pub level: Option<String>,
    pub message: Option<String>,
    pub ok: Option<bool>,
    pub error: Option<FailureJs>,
    pub stats: Option<StatsJs>,
    pub logs: Option<Vec<LogEntryJs>>,
}

impl RunEventJs {
    fn of(kind: &str) -> Self {
        RunEventJs {
            kind: kind.to_string(),
            call_id: None,
            name: None,
            payload: None,
            id: None,
            key: None,
            level: None,
            message: None,
            ok: None,
            error: None,
            stats: None,
            logs: None,
        }
    }
}

pub(crate) type EventFn = ThreadsafeFunction<RunEventJs, (), RunEventJs, Status, false>;

/// Sends run events to a JS callback. The callback keeps Node's event loop alive
/// until the run is done, then is released.
pub(crate) struct JsSink {
    callback: std::sync::Mutex<Option<Arc<EventFn>>>,
    /// Whether the JS side wants `started`; runSandbox does not, and skipping it saves
    /// one wake-up of Node's thread (and one JS call) per run.
    started_event: bool,
}

impl JsSink {
    pub(crate) fn new(callback: EventFn, started_event: bool) -> Self {
        JsSink { callback: std::sync::Mutex::new(Some(Arc::new(callback))), started_event }
    }

    fn send(&self, event: RunEventJs) {
        let callback = self.callback.lock().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        if let Some(cb) = callback {
            cb.call(event, ThreadsafeFunctionCallMode::NonBlocking);
        }
    }
}

impl EventSink for JsSink {
    fn started(&self) {
        if self.started_event {
            self.send(RunEventJs::of("started"));
        }
    }

    fn console(&self, level: LogLevel, message: &str) {
        let mut e = RunEventJs::of("console");
        e.level = Some(level.as_str().to_string());
        e.message = Some(message.to_string());
        self.send(e);
    }

    fn host_call(&self, call_id: u32, name: &str, args: Vec<u8>) {
        let mut e = RunEventJs::of("hostCall");
        e.call_id = Some(call_id);
        e.name = Some(name.to_string());
        e.payload = Some(args.into());
        self.send(e);
    }

    fn data_request(&self, id: u32, key: &str) {
        let mut e = RunEventJs::of("dataRequest");
        e.id = Some(id);
        e.key = Some(key.to_string());
        self.send(e);
    }

    fn done(&self, completion: Completion) {
        let mut e = RunEventJs::of("done");
        let s = completion.stats;
        e.stats = Some(StatsJs {
            wall_time_ms: s.wall_time_ms,
            cpu_time_ms: s.cpu_time_ms,
            heap_used_bytes: s.heap_peak_bytes,
            heap_at_end_bytes: s.heap_used_bytes,
            host_calls: s.host_calls,
        });
        e.logs = Some(
            completion
                .logs
                .into_iter()
                .map(|l| LogEntryJs { level: l.level.as_str().to_string(), message: l.message })
                .collect(),
        );
        match completion.result {
            Ok(bytes) => {
                e.ok = Some(true);
                e.payload = Some(bytes.into());
            }
            Err(failure) => {
                e.ok = Some(false);
                e.error = Some(failure.into());
            }
        }
        self.send(e);
        // Last event: let go of the callback so Node may exit.
        self.callback.lock().unwrap_or_else(std::sync::PoisonError::into_inner).take();
    }
}
