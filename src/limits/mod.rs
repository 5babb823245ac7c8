//! Time limits: the watchdog thread that stops runs at their wall-clock or CPU-time
//! limit, and the quarantine for threads that V8 cannot stop.
pub(crate) mod quarantine;
pub(crate) mod watchdog;
