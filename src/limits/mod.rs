//! Time limits: the watchdog thread that asks runs to stop at their wall-clock or
//! CPU-time limit, thread CPU clocks, and the quarantine for threads that V8 cannot stop.
//! Nothing here knows the isolate thread: runs are seen through `watchdog::Watched`.
pub(crate) mod banner;
pub(crate) mod cpu;
pub(crate) mod quarantine;
pub(crate) mod queue_timer;
pub(crate) mod watchdog;

/// Locks `m`, recovering the data if a thread panicked while holding it: every lock
/// here guards plain state that stays consistent between statements, and a panic
/// in one run must not wedge the engine for all others.
pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Sets the V8 flags that make runs stoppable (`isolet_core::limits::v8_flags`), once per
/// process, at addon load: before any sandbox compiles code.
pub(crate) fn apply_v8_flags() {
    static APPLY: std::sync::Once = std::sync::Once::new();
    APPLY.call_once(|| {
        // V8's fatal-OOM banner from an isolate thread is not the user's stderr's.
        banner::install();
        let opt_out = std::env::var(isolet_core::limits::LOOP_UNROLLING_ENV).ok();
        if let Some(flags) = isolet_core::limits::v8_flags(&crate::v8::version(), opt_out.as_deref()) {
            crate::v8::set_flags(flags);
        }
    });
}
