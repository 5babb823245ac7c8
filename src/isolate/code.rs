//! The check of an engine's prelude when the engine starts: run once in a throwaway
//! isolate, within its time and memory limits (the compiled code itself is
//! `crate::v8::EngineCode`).
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

use isolet_core::limits::PRELUDE_INIT_TIME_MS;

use super::thread::IsolateThread;
use crate::limits::lock;
use crate::v8::{
    DataAnswer, EmbeddedScript, EngineCode, IsolateHandle, OpArg, OpResult, Refusal, Sandbox, SandboxConfig, SandboxHost, Step,
};
use crate::web::{WebHost, WebState};

/// How long a prelude check waits after terminating an overlong prelude.
const TERMINATION_GRACE: Duration = Duration::from_millis(1000);

/// The host of the isolate that checks a prelude: nothing exists yet for it to call; its
/// modules import each other only. `console` and the engine's web APIs are there, as in a
/// run's context (what they would log goes nowhere).
struct PreludeHost {
    handle: Mutex<Option<IsolateHandle>>,
    code: Arc<EngineCode>,
    web: WebState,
}

impl WebHost for PreludeHost {
    fn log(&self, _level: u32, _message: &str) -> usize {
        0
    }

    fn log_room(&self) -> usize {
        0
    }
}

impl SandboxHost for PreludeHost {
    fn wake(&self) {}
    fn host_call(&self, _: u32, _: u32, _: &[u8]) -> Result<(), Refusal> {
        Err(Refusal { name: "Error", message: "unknown host function".into() })
    }
    fn data_request(&self, _: &str) -> DataAnswer {
        DataAnswer::Terminated
    }
    fn heap_limit(&self) {
        // Terminate from another thread (V8 13 ignores it from inside the callback).
        if let Some(handle) = lock(&self.handle).clone() {
            std::thread::spawn(move || handle.terminate());
        }
    }
    fn fatal_oom(&self, _held_bytes: usize) -> ! {
        // Returning would let V8 abort the process; this thread holds nothing else.
        loop {
            std::thread::park();
        }
    }
    fn given_module(&self, key: &str) -> Option<(String, bool)> {
        self.code.prelude_modules.get(key).map(|s| (s.clone(), true))
    }
    fn engine_code(&self) -> Option<Arc<EngineCode>> {
        Some(self.code.clone())
    }
    fn op(&self, op: u32, args: &mut [OpArg]) -> OpResult {
        crate::web::call(&self.web, self, op, args)
    }
    fn script(&self, index: u32) -> Option<EmbeddedScript> {
        crate::web::script(index)
    }
    fn script_cache(&self, index: u32, data: &[u8]) {
        crate::web::script_cache(index, data)
    }
}

/// Runs the prelude once in a throwaway isolate (on a thread of its own, within
/// `PRELUDE_INIT_TIME_MS` and `memory_mb`), after `console` and, with `web` (the engine's),
/// the web APIs, as a run's context has them; this also puts its compiled code in the
/// cache. The error says what is wrong with it, for `init()` to throw.
pub(crate) fn check_prelude(code: &Arc<EngineCode>, memory_mb: u32, web: bool) -> Result<(), String> {
    if code.prelude.is_none() && code.prelude_modules.is_empty() {
        return Ok(());
    }
    let heap_limit_bytes = memory_mb as usize * 1024 * 1024;
    let (tx, rx) = mpsc::channel::<Result<(), String>>();
    let host = Arc::new(PreludeHost { handle: Mutex::new(None), code: code.clone(), web: WebState::default() });
    let (code_for_thread, host_for_thread) = (code.clone(), host.clone());
    // An isolate thread like a run's: the process's exit waits for it.
    let check = Box::new(move || {
        let config = SandboxConfig { heap_limit_bytes, array_buffer_limit_bytes: heap_limit_bytes };
        let Some(mut sandbox) = Sandbox::new(&config, host_for_thread.clone()) else {
            let _ = tx.send(Err("prelude could not be checked: no V8 isolate could be created".into()));
            return false;
        };
        *lock(&host_for_thread.handle) = Some(sandbox.handle());
        let mut what = "prelude".to_string();
        if web {
            host_for_thread.web.start();
        }
        let installed = crate::web::install(&mut sandbox, &host_for_thread.web, web, None);
        let mut step = installed.unwrap_or_else(|| sandbox.run_prelude(&code_for_thread));
        // Then each module, as a run importing it would evaluate it (after the source).
        if matches!(step, Step::Settled | Step::Pending) {
            for key in code_for_thread.prelude_modules.keys() {
                if let Err(failed) = sandbox.check_prelude_module(key) {
                    what = format!("prelude module '{key}'");
                    step = failed;
                    break;
                }
            }
        }
        let out_of_memory = sandbox.hit_memory_limit();
        *lock(&host_for_thread.handle) = None;
        let result = match step {
            _ if out_of_memory => Err(format!("{what} ran out of memory (the engine's memoryMb is {memory_mb})")),
            Step::Settled | Step::Pending => Ok(()),
            Step::Syntax(t) => Err(format!("{what} has a syntax error: {}: {}{}", t.name, t.message, at(t.line, t.column))),
            Step::Threw(t) => Err(format!("{what} threw {}: {}{}", t.name, t.message, at(t.line, t.column))),
            Step::Invalid(message) => Err(format!("{what}: {message}")),
            Step::Terminated => Err(format!("{what} did not finish within {PRELUDE_INIT_TIME_MS} ms")),
        };
        drop(sandbox);
        let _ = tx.send(result);
        false
    });
    if IsolateThread::start("isolet-prelude", check, Box::new(|_| {})).is_err() {
        return Err("prelude could not be checked: no thread could be started".into());
    }
    match rx.recv_timeout(Duration::from_millis(PRELUDE_INIT_TIME_MS)) {
        Ok(result) => result,
        Err(_) => {
            if let Some(handle) = lock(&host.handle).clone() {
                handle.terminate();
            }
            match rx.recv_timeout(TERMINATION_GRACE) {
                Ok(Err(message)) => Err(message),
                // Finished just as it was stopped: still over its time.
                _ => Err(format!("prelude did not finish within {PRELUDE_INIT_TIME_MS} ms")),
            }
        }
    }
}

fn at(line: Option<u32>, column: Option<u32>) -> String {
    match (line, column) {
        (Some(l), Some(c)) => format!(" at line {l}, column {c}"),
        (Some(l), None) => format!(" at line {l}"),
        _ => String::new(),
    }
}
