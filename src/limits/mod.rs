//! Time limits: the watchdog thread that stops runs at their wall-clock or CPU-time
//! limit, and the quarantine for threads that V8 cannot stop.
pub(crate) mod quarantine;
pub(crate) mod watchdog;

/// Sets the V8 flags that make runs stoppable (`isolet_core::limits::v8_flags`), once per
/// process, at addon load: before any sandbox compiles code.
pub(crate) fn apply_v8_flags() {
    static APPLY: std::sync::Once = std::sync::Once::new();
    APPLY.call_once(|| {
        let opt_out = std::env::var(isolet_core::limits::LOOP_UNROLLING_ENV).ok();
        if let Some(flags) = isolet_core::limits::v8_flags(&crate::v8::version(), opt_out.as_deref()) {
            crate::v8::set_flags(flags);
        }
    });
}
