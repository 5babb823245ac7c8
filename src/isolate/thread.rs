//! The isolate thread: creates a sandbox, waits for (or is born with) one run, executes
//! it, delivers the completion, disposes the sandbox. Nothing here blocks Node's thread.
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Arc, Mutex, Weak};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use isolet_core::{ErrorKind, Failure, LogLevel};

use super::run::{Completion, ExecStats, HostReply, RunShared};
use super::warm::{prepare_context, Prepare, Ready, ReadyOnce, WarmUp, WarmingSlot};
use crate::limits::cpu::ThreadClock;
use crate::limits::watchdog;
use crate::limits::{lock, quarantine};
use crate::v8::{DataAnswer, OpArg, OpResult, OpValue, Output, Refusal, Sandbox, SandboxConfig, SandboxHost, Step};
use crate::web::WebState;

/// V8 sizes its stack limit from the thread it starts on; give it room for deep JS
/// recursion to end in a RangeError, never a native stack overflow.
const ISOLATE_THREAD_STACK: usize = 8 * 1024 * 1024;

/// The longest an isolate thread waits for Node's thread to take its run's result before
/// it disposes the isolate anyway (Node's thread may be busy with other work).
const HANDOVER_WAIT: Duration = Duration::from_millis(5);

/// Drops `old` (first: two isolates are never held at once) and makes a fresh isolate.
fn fresh_isolate(config: &SandboxConfig, old: Option<Sandbox>) -> (Arc<ThreadHost>, Option<Sandbox>) {
    drop(old);
    let host = Arc::new(ThreadHost::default());
    let sandbox = Sandbox::new(config, host.clone());
    (host, sandbox)
}

/// Runs whose heap peaked above this give their freed memory back to the OS.
const TRIM_AFTER_PEAK_HEAP_BYTES: f64 = 16.0 * 1024.0 * 1024.0;

static LIVE_THREADS: AtomicUsize = AtomicUsize::new(0);

/// Isolate threads currently alive (quarantined ones included).
pub(crate) fn live_threads() -> usize {
    LIVE_THREADS.load(Ordering::SeqCst)
}

/// The isolate threads' handles, so the process's exit can wait for their very end. A
/// thread's last act, after its work, is running its thread-local destructors; among them
/// OpenSSL's, which it registered when V8 seeded its isolate from Node's entropy source.
/// `exit()` runs OpenSSL's cleanup, which frees every thread's state too: a thread still
/// ending then freed it twice (glibc "double free or corruption", about 1 exit in 200 of
/// `isolet run` in thread mode on Node 20).
static HANDLES: Mutex<Vec<JoinHandle<()>>> = Mutex::new(Vec::new());

/// Keeps `handle`, joining the threads already finished (only their last instants left).
fn keep_handle(handle: JoinHandle<()>) {
    let finished = {
        let mut handles = lock(&HANDLES);
        let (finished, running) = std::mem::take(&mut *handles).into_iter().partition::<Vec<_>, _>(|h| h.is_finished());
        *handles = running;
        handles.push(handle);
        finished
    };
    for h in finished {
        let _ = h.join();
    }
}

/// Joins every isolate thread that has left its work (the count of live threads), waiting
/// until `deadline` for those that have left it to end; threads still working (quarantined,
/// or a Worker's) are left alone. Called before the process exits (see `HANDLES`).
pub(crate) fn join_ended(deadline: Instant) {
    loop {
        let finished = {
            let mut handles = lock(&HANDLES);
            let (finished, running) = std::mem::take(&mut *handles).into_iter().partition::<Vec<_>, _>(|h| h.is_finished());
            *handles = running;
            finished
        };
        for h in finished {
            let _ = h.join();
        }
        // Handles beyond the live count are threads between leaving the count and ending.
        if lock(&HANDLES).len() <= live_threads() || Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(1));
    }
}

/// The sandbox's view of the run it currently serves.
#[derive(Default)]
pub(crate) struct ThreadHost {
    run: Mutex<Option<Arc<RunShared>>>,
    /// The web layer's state (`web: true`), for the sandbox's life.
    web: WebState,
    /// A warm isolate preparing its context before any run is attached (`warm`).
    warming: WarmingSlot,
}

impl ThreadHost {
    fn current(&self) -> Option<Arc<RunShared>> {
        lock(&self.run).clone()
    }

    /// The warm-up in progress, if no run is attached.
    fn warm_up(&self) -> Option<Arc<WarmUp>> {
        lock(&self.warming).clone()
    }

    /// The run attached, or `None`; a warm-up that asked is told it asked for a run's things.
    fn current_or_note(&self) -> Option<Arc<RunShared>> {
        let run = self.current();
        if run.is_none() {
            if let Some(warm) = self.warm_up() {
                warm.asked_for_run();
            }
        }
        run
    }
}

impl SandboxHost for ThreadHost {
    fn wake(&self) {
        if let Some(run) = lock(&self.run).as_ref() {
            run.wake();
        }
    }

    fn host_call(&self, fn_index: u32, call_id: u32, args: &[u8]) -> Result<(), Refusal> {
        // A refusal goes back to the seam, which rejects the call's promise at once: a
        // sandbox looping on refused calls costs the host nothing per call.
        let refuse = |name: &'static str, message: String| Err(Refusal { name, message });
        let Some(run) = self.current_or_note() else { return refuse("Error", "the execution has ended".into()) };
        if !run.count_message() {
            return refuse("RangeError", format!("Bridge message limit of {} per execution exceeded", run.spec.plan.bridge.max_messages));
        }
        let Some(name) = run.spec.plan.tools.get(fn_index as usize) else {
            return refuse("Error", "unknown host function".into());
        };
        if let Err(message) = run.spec.tool_calls.admit(fn_index as usize, name) {
            return refuse(isolet_core::options::TOOL_REFUSAL_NAME, message);
        }
        // Counted before anything is copied for the host: what the arguments cost it
        // once deserialized is their values, not their bytes.
        let max_values = run.spec.plan.bridge.max_message_values;
        let max_bytes = run.spec.plan.bridge.max_message_bytes;
        let bounds = isolet_core::Bounds { values: max_values as u64, cost: isolet_core::limits::built_value_budget(max_bytes) };
        let tally = match isolet_core::tally(args, bounds) {
            Ok(t) => t,
            Err(isolet_core::CountError::TooMany { .. }) => {
                return refuse(
                    "RangeError",
                    format!("host call arguments hold more than {max_values} values, over the bridge limit (maxMessageValues)"),
                );
            }
            Err(isolet_core::CountError::TooCostly { .. }) => {
                return refuse(
                    "RangeError",
                    format!(
                        "host call arguments would take more than {} bytes in the host once built, {} x the bridge limit of {max_bytes} bytes (maxMessageBytes)",
                        isolet_core::limits::built_value_budget(max_bytes),
                        isolet_core::limits::BUILT_COST_PER_BYTE
                    ),
                );
            }
            Err(e) => return refuse("TypeError", format!("host call arguments could not be counted: {e}")),
        };
        if let Err(message) = run.begin_host_call(call_id, args.len(), tally) {
            return refuse("RangeError", message);
        }
        run.sink().host_call(call_id, name, args.to_vec());
        Ok(())
    }

    fn data_request(&self, key: &str) -> DataAnswer {
        match self.current_or_note() {
            Some(run) => run.request_data(key),
            None => DataAnswer::Terminated,
        }
    }

    fn heap_limit(&self) {
        if let Some(run) = self.current() {
            let run: Weak<RunShared> = Arc::downgrade(&run);
            watchdog::terminate_soon(run);
        } else if let Some(warm) = self.warm_up() {
            warm.at_heap_limit();
        }
    }

    fn fatal_oom(&self, held_bytes: usize) -> ! {
        // A warm-up's thread parks for good: the pool is told it will never be ready.
        if let Some(warm) = self.warm_up() {
            warm.give_up();
        }
        let counted = self.current().is_some_and(|run| run.abandon_after_fatal_oom(held_bytes));
        quarantine::park_current_thread(!counted, held_bytes)
    }

    fn given_module(&self, key: &str) -> Option<(String, bool)> {
        let run = self.current_or_note()?;
        // The prelude's first: no run may replace one of its modules (refused when the
        // run was planned), so this order only matters to a plan no check made.
        if let Some(source) = run.spec.code.prelude_modules.get(key) {
            return Some((source.clone(), true));
        }
        let own = run.spec.plan.modules.get(key);
        own.or_else(|| run.spec.sandbox_modules.as_ref().and_then(|m| m.get(key))).map(|s| (s.clone(), false))
    }

    fn engine_code(&self) -> Option<Arc<crate::v8::EngineCode>> {
        Some(self.current()?.spec.code.clone())
    }

    fn module_resolver(&self) -> bool {
        self.current().is_some_and(|run| run.spec.plan.module_resolver)
    }

    fn resolve_module(&self, key: &str, referrer: &str) -> DataAnswer {
        match self.current_or_note() {
            Some(run) => run.request_module(key, referrer),
            None => DataAnswer::Terminated,
        }
    }

    fn op(&self, op: u32, args: &mut [OpArg]) -> OpResult {
        crate::web::call(&self.web, self, op, args)
    }

    fn script(&self, index: u32) -> Option<crate::v8::EmbeddedScript> {
        crate::web::script(index)
    }

    fn script_cache(&self, index: u32, data: &[u8]) {
        crate::web::script_cache(index, data)
    }
}

impl crate::web::WebHost for ThreadHost {
    fn log(&self, level: u32, message: &str) -> usize {
        let Some(run) = self.current() else {
            if let Some(warm) = self.warm_up() {
                warm.logged();
            }
            return 0;
        };
        run.log(LogLevel::from_index(level), message);
        run.log_room()
    }

    fn log_room(&self) -> usize {
        self.current().map_or(0, |run| run.log_room())
    }
}

/// Where an isolate thread gets its one run.
pub(crate) enum JobSource {
    /// A cold start: the run is known before the isolate exists.
    Now(Arc<RunShared>),
    /// A warm isolate: `ready` is called once the isolate exists (and its context is
    /// prepared, if `prepare` says so), then the thread waits for a run. A closed channel
    /// ends the thread.
    Later { jobs: mpsc::Receiver<Arc<RunShared>>, ready: Ready, prepare: Option<Prepare> },
}

/// What a run finds in its isolate's context as it starts.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Context {
    /// Nothing: the console, web APIs and prelude are evaluated, then the run's globals.
    Fresh,
    /// A warm isolate's: console, web APIs and prelude are there; the run adds its globals.
    Prepared,
    /// A persistent sandbox's after its first run: everything is there.
    Kept,
}

pub(crate) struct IsolateThread;

impl IsolateThread {
    /// Starts a thread that serves one run from `source`; `on_exit` runs as it ends, told
    /// whether the thread had been quarantined (and then finished on its own).
    pub(crate) fn spawn(config: SandboxConfig, source: JobSource, on_exit: Box<dyn FnOnce(bool) + Send>) -> std::io::Result<()> {
        Self::start("isolet-isolate", Box::new(move || thread_main(config, source)), on_exit)
    }

    /// Starts an isolate thread (a persistent sandbox's) that runs `body`, which returns
    /// whether the thread had been quarantined; `on_exit` as for `spawn`.
    pub(crate) fn spawn_with(body: Box<dyn FnOnce() -> bool + Send>, on_exit: Box<dyn FnOnce(bool) + Send>) -> std::io::Result<()> {
        Self::start("isolet-sandbox", body, on_exit)
    }

    /// Starts any thread that makes an isolate (named `name`): counted live while `body`
    /// runs, so the process's exit waits for it (see `engine::shutdown_all`), and its
    /// handle kept, so the exit waits for its very end (see `HANDLES`).
    pub(crate) fn start(name: &str, body: Box<dyn FnOnce() -> bool + Send>, on_exit: Box<dyn FnOnce(bool) + Send>) -> std::io::Result<()> {
        LIVE_THREADS.fetch_add(1, Ordering::SeqCst);
        let spawned = std::thread::Builder::new().name(name.into()).stack_size(ISOLATE_THREAD_STACK).spawn(move || {
            crate::limits::banner::quiet_this_thread();
            let quarantined = body();
            LIVE_THREADS.fetch_sub(1, Ordering::SeqCst);
            on_exit(quarantined);
        });
        match spawned {
            Ok(handle) => {
                keep_handle(handle);
                Ok(())
            }
            Err(e) => {
                LIVE_THREADS.fetch_sub(1, Ordering::SeqCst);
                Err(e)
            }
        }
    }
}

/// Gives freed malloc'd pages back after a big run (see `thread_main`).
pub(crate) fn trim_after(peak_heap: f64, failed: Option<ErrorKind>) {
    if peak_heap > TRIM_AFTER_PEAK_HEAP_BYTES || failed == Some(ErrorKind::MemoryLimit) {
        // SAFETY: malloc_trim has no preconditions. glibc only (musl has no arenas to trim).
        #[cfg(all(target_os = "linux", target_env = "gnu"))]
        unsafe {
            libc::malloc_trim(0)
        };
        #[cfg(target_os = "macos")]
        macos_pressure_relief();
    }
}

/// macOS's malloc_trim: every malloc zone gives back the free pages it can.
#[cfg(target_os = "macos")]
fn macos_pressure_relief() {
    extern "C" {
        // libSystem's <malloc/malloc.h> (macOS 10.7+); not in the libc crate.
        fn malloc_zone_pressure_relief(zone: *mut libc::c_void, goal: libc::size_t) -> libc::size_t;
    }
    // SAFETY: a null zone means all zones; goal 0 means as much as possible.
    unsafe { malloc_zone_pressure_relief(std::ptr::null_mut(), 0) };
}

/// Returns whether the run's thread had been quarantined.
fn thread_main(config: SandboxConfig, source: JobSource) -> bool {
    let (mut host, mut sandbox) = fresh_isolate(&config, None);
    let mut context = Context::Fresh;
    let run = match source {
        JobSource::Now(run) => run,
        JobSource::Later { jobs, ready, prepare } => {
            let ready = ReadyOnce::new(ready);
            let mut shape = None;
            if let (Some(sb), Some(prepare)) = (sandbox.as_mut(), prepare.as_ref()) {
                if prepare_context(sb, &host.warming, &host.web, prepare, &ready) {
                    context = Context::Prepared;
                    shape = Some(prepare.shape());
                } else if prepare.engine_stopped() {
                    ready.call(false, None);
                    return false;
                } else {
                    // What the warm-up did belongs to a run: an unprepared isolate instead.
                    (host, sandbox) = fresh_isolate(&config, sandbox);
                }
            }
            ready.call(sandbox.is_some(), shape);
            if sandbox.is_none() {
                return false;
            }
            let run = match jobs.recv() {
                Ok(run) => run,
                Err(_) => return false, // pool shrank or engine shut down
            };
            if context == Context::Prepared && !prepare.is_some_and(|p| p.serves(&run)) {
                // Prepared in a shape runs no longer ask for (the pool found none that
                // fits): a fresh isolate for this run.
                context = Context::Fresh;
                (host, sandbox) = fresh_isolate(&config, sandbox);
            }
            run
        }
    };
    let (failed, peak_heap) = match sandbox.as_mut() {
        Some(sb) => execute_plan(sb, &host, &run, context),
        None => {
            let failure = Failure::new(ErrorKind::Internal, "Could not create a V8 isolate");
            run.complete(Completion { result: Err(failure), stats: ExecStats::default(), logs: Vec::new() });
            (Some(ErrorKind::Internal), 0.0)
        }
    };
    // Disposing unmaps the isolate's heap, which interrupts every thread of this process:
    // not while Node's thread takes the run's result (thread isolation).
    if let Some(handover) = run.sink().handover() {
        handover.wait(HANDOVER_WAIT);
    }
    drop(sandbox);
    // A big run leaves malloc'd pages (parser zones, ArrayBuffers) cached in this
    // thread's arena after its isolate is gone; give them back so host RSS returns
    // toward baseline. Small runs skip it: trimming costs every run about 0.4 ms of CPU.
    trim_after(peak_heap, failed);
    // Gives the slot back; a quarantined thread that got here finished on its own: its
    // isolate is disposed like any other, so it leaves the quarantine.
    run.thread_exited()
}

/// Executes one plan on `sandbox` until it settles or is stopped: a one-shot run, or one
/// run of a persistent sandbox; delivers the completion and returns the failure kind, if
/// any, and the peak heap in bytes.
pub(crate) fn execute_plan(sandbox: &mut Sandbox, host: &ThreadHost, run: &Arc<RunShared>, context: Context) -> (Option<ErrorKind>, f64) {
    let started = Instant::now();
    let clock = ThreadClock::start_on_current_thread();
    *lock(&host.run) = Some(run.clone());
    run.attach(sandbox.handle(), clock);
    let watched: Weak<RunShared> = Arc::downgrade(run);
    watchdog::watch(watched);
    run.sink().started();

    let step = install_and_run(sandbox, host, run, context);
    // Modules imported with import() since the run's top level: their caches now.
    sandbox.flush_module_caches();
    // The web layer's scripts it ran first in this process: their caches, with what it used.
    sandbox.cache_scripts();
    let result = finish(sandbox, run, step);
    let (result, unhandled_rejections) = report_rejections(sandbox, run, result);

    let heap = sandbox.heap();
    let stats = ExecStats {
        wall_time_ms: started.elapsed().as_secs_f64() * 1000.0,
        cpu_time_ms: run.code_cpu(&clock).as_secs_f64() * 1000.0,
        heap_used_bytes: heap.used as f64,
        heap_peak_bytes: heap.peak as f64,
        host_calls: run.messages(),
        unhandled_rejections,
    };
    *lock(&host.run) = None;
    run.detach();
    let kind = result.as_ref().err().map(|f| f.kind);
    run.complete(Completion { result, stats, logs: run.take_logs() });
    (kind, stats.heap_peak_bytes)
}

/// Unhandled rejections described in a run's logs; the rest are counted.
const MAX_REPORTED_REJECTIONS: usize = 10;

/// The promises the run rejected with no handler that have none now: each a `warn` log
/// entry (its reason, and where), all counted in `stats.unhandledRejections`; with
/// `unhandledRejections: 'error'` a run that would have succeeded fails with the first.
/// A run that did not run to its end (a limit, the caller, bad code) has none described.
fn report_rejections(sandbox: &mut Sandbox, run: &RunShared, result: Result<Vec<u8>, Failure>) -> (Result<Vec<u8>, Failure>, u32) {
    if matches!(&result, Err(f) if f.kind != ErrorKind::Runtime) || run.should_stop() {
        return (result, 0);
    }
    let (described, count) = sandbox.take_rejections(MAX_REPORTED_REJECTIONS);
    for thrown in &described {
        run.log(LogLevel::Warn, &isolet_core::seam_policy::unhandled_rejection_entry(thrown));
    }
    if count as usize > described.len() {
        run.log(LogLevel::Warn, &format!("… and {} more unhandled promise rejections", count as usize - described.len()));
    }
    let strict = run.spec.plan.unhandled_rejections == isolet_core::options::UnhandledRejections::Error;
    match (result, described.into_iter().next()) {
        (Ok(_), Some(first)) if strict => (Err(Failure::unhandled_rejection(first)), count),
        (result, _) => (result, count),
    }
}

fn install_and_run(sandbox: &mut Sandbox, host: &ThreadHost, run: &RunShared, context: Context) -> Step {
    let spec = &run.spec;
    sandbox.set_copy_limits(spec.plan.bridge.max_message_bytes, spec.plan.bridge.max_output_bytes);
    sandbox.set_module_limits(spec.plan.module_limits);
    host.web.begin_run();
    let fetch_tool = web_fetch_tool(&spec.plan);
    match context {
        Context::Fresh => {
            // `console` and the web APIs come first, so the prelude may use them too.
            if spec.plan.web {
                host.web.start();
            }
            if let Some(step) = crate::web::install(sandbox, &host.web, spec.plan.web, fetch_tool) {
                return step;
            }
            // The prelude runs first, under the run's limits, before any tool or `data` exists.
            match sandbox.run_prelude(&spec.code) {
                Step::Settled | Step::Pending => {}
                failed => return failed,
            }
        }
        Context::Prepared => {
            // The web clock starts with the run, as in a fresh context.
            if spec.plan.web {
                host.web.start();
            }
            host.web.set_fetch_tool(fetch_tool);
        }
        Context::Kept => {
            // A persistent sandbox's later run: a module it loaded stays as it was loaded.
            if let Some(message) = sandbox.replaced_module(&spec.plan.modules) {
                return Step::Invalid(message);
            }
        }
    }
    if context != Context::Kept {
        if let Some(step) = install_globals(sandbox, spec) {
            return step;
        }
    }
    // What the run's own code rejects with no handler, from here on (not the prelude's).
    sandbox.clear_rejections();
    let mut step = match &spec.call {
        Some((name, args)) => sandbox.call_global(name, args),
        None => sandbox.run_with(&spec.plan.code, spec.plan.mode, Some(&spec.code)),
    };
    let mut replies = VecDeque::new();
    while matches!(step, Step::Pending) {
        if run.should_stop() {
            return Step::Terminated;
        }
        let next_task = sandbox.run_tasks().map(Duration::from_millis);
        // Waiting for a timer sleeps (it costs no CPU time) until it is due.
        let next = match (next_task, host.web.next_timer()) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        };
        // Every reply queued since the last wake-up is handed in before the next poll.
        run.wait_for_work(next, &mut replies);
        for reply in replies.drain(..) {
            match reply {
                HostReply::Fulfill { call_id, value } => sandbox.fulfill_call(call_id, &value),
                HostReply::Reject { call_id, name, message } => sandbox.reject_call(call_id, &name, &message),
            }
        }
        for (id, fired) in host.web.due_timers() {
            if !sandbox.settle_op(id, OpValue::Bool(fired)) {
                return Step::Terminated;
            }
        }
        step = sandbox.poll();
        // A callback the run scheduled threw (a timer's, an event listener's): the run
        // ends with that error, as an uncaught exception ends a Node or Deno program.
        if let Some(thrown) = host.web.take_uncaught() {
            return Step::Threw(thrown);
        }
    }
    match host.web.take_uncaught() {
        Some(thrown) => Step::Threw(thrown),
        None => step,
    }
}

/// The index of the tool the web layer's `fetch` calls (`RunPlan::web_fetch`).
fn web_fetch_tool(plan: &isolet_core::RunPlan) -> Option<u32> {
    if !plan.web_fetch {
        return None;
    }
    plan.tools.iter().position(|t| t == "fetch").map(|i| i as u32)
}

/// Installs the run's host functions, data object and WebAssembly instances; `Some`
/// when that ended the run.
fn install_globals(sandbox: &mut Sandbox, spec: &super::RunSpec) -> Option<Step> {
    // Names were checked when the request was admitted; dotted ones go into namespaces.
    let mut namespaces: Vec<(&str, Vec<(&str, u32)>)> = Vec::new();
    let web_fetch = web_fetch_tool(&spec.plan);
    for (index, name) in spec.plan.tools.iter().enumerate() {
        // The web layer's `fetch` holds this one (and is the global `fetch`).
        if web_fetch == Some(index as u32) {
            continue;
        }
        match name.split_once('.') {
            None => {
                if !sandbox.add_host_function(name, index as u32) {
                    return Some(Step::Terminated);
                }
            }
            Some((ns, member)) => match namespaces.iter_mut().find(|(n, _)| *n == ns) {
                Some((_, members)) => members.push((member, index as u32)),
                None => namespaces.push((ns, vec![(member, index as u32)])),
            },
        }
    }
    for (ns, members) in &namespaces {
        if !sandbox.add_host_namespace(ns, members) {
            return Some(Step::Terminated);
        }
    }
    if spec.plan.data_object && !sandbox.add_data_object("data") {
        return Some(Step::Terminated);
    }
    for (name, module) in &spec.wasm_modules {
        if let Err(thrown) = sandbox.add_wasm_instance("wasm", name, module) {
            return Some(Step::Threw(thrown));
        }
    }
    None
}

fn finish(sandbox: &mut Sandbox, run: &RunShared, step: Step) -> Result<Vec<u8>, Failure> {
    // `None`: V8 terminated the run; which limit (if any) did it is decided below.
    let outcome: Option<Result<Vec<u8>, Failure>> = match step {
        Step::Settled => match sandbox.take_result() {
            Output::Value(bytes) => Some(output_within_values(bytes, &run.spec.plan.bridge)),
            Output::Threw(thrown) => Some(Err(Failure::threw(thrown))),
            Output::Uncloneable(path) => Some(Err(Failure::uncloneable_output(&path))),
            Output::TooLarge => Some(Err(Failure::too_many_output_bytes(run.spec.plan.bridge.max_output_bytes))),
            Output::Terminated => None,
        },
        Step::Threw(thrown) => Some(Err(Failure::threw(thrown))),
        Step::Syntax(thrown) => Some(Err(Failure::syntax(thrown))),
        Step::Invalid(message) => Some(Err(Failure::new(ErrorKind::Validation, message))),
        Step::Terminated | Step::Pending => None,
    };
    // Limits win over whatever the script saw while being stopped. A run whose one large
    // allocation passed the ceiling with no GC since (V8 grants it past the limit) fails
    // like one stopped at the limit.
    let over_ceiling =
        isolet_core::seam_policy::over_heap_ceiling(run.spec.plan.limits.memory_mb as usize * 1024 * 1024, sandbox.heap().peak_young_large);
    if sandbox.hit_memory_limit() || over_ceiling {
        return Err(Failure::out_of_memory(run.spec.plan.limits.memory_mb));
    }
    match (outcome, run.stop_reason()) {
        // A syntax error stands even if a stop raced with it: the code never ran.
        (Some(Err(f)), _) if f.kind == ErrorKind::Validation => Err(f),
        // A stop requested while the run finished (e.g. a data request cut short by
        // the time limit) still ends it: the limit was reached.
        (_, Some(reason)) => Err(run.failure_for(reason)),
        (Some(result), None) => result,
        (None, None) => Err(Failure::new(ErrorKind::Internal, "Execution was terminated unexpectedly")),
    }
}

/// The result if it holds at most `max` values and would cost the parent at most the
/// run's memory limit once built (isolet-core `value_count::tally`): what the parent
/// builds of it is bounded beyond its bytes.
/// What a result may hold: `maxOutputValues` values, and a cost once built within
/// `limits::built_value_budget` of `maxOutputBytes`.
pub(crate) fn output_bounds(bridge: &isolet_core::BridgeLimits) -> isolet_core::Bounds {
    isolet_core::Bounds { values: bridge.max_output_values as u64, cost: isolet_core::limits::built_value_budget(bridge.max_output_bytes) }
}

/// What a result refused for its cost would cost (counted on to the end, for the message).
pub(crate) fn over_budget_cost(bytes: &[u8]) -> u64 {
    let all = isolet_core::Bounds { values: u64::MAX, cost: u64::MAX };
    isolet_core::tally(bytes, all).map(|t| t.cost).unwrap_or(u64::MAX)
}

fn output_within_values(bytes: Vec<u8>, bridge: &isolet_core::BridgeLimits) -> Result<Vec<u8>, Failure> {
    match isolet_core::tally(&bytes, output_bounds(bridge)) {
        Ok(_) => Ok(bytes),
        Err(isolet_core::CountError::TooMany { .. }) => Err(Failure::too_many_output_values(bridge.max_output_values)),
        Err(isolet_core::CountError::TooCostly { .. }) => {
            Err(isolet_core::limits::too_costly_output(over_budget_cost(&bytes), bridge.max_output_bytes))
        }
        Err(e) => Err(Failure::new(ErrorKind::Runtime, format!("The result could not be copied out of the sandbox: {e}"))),
    }
}
