//! The timer that fails queued runs at their queue deadline (`maxQueueMs`; the rule is
//! `isolet_core::queue::Pool::expire_queued`): one thread per engine, started when a run
//! with a deadline is queued, asleep until the soonest deadline, gone once none is left.
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::Instant;

use crate::limits::lock;

/// Expires the runs whose deadline has come; returns the next deadline, if any (none also
/// once the engine is gone).
pub(crate) type Expire = Box<dyn Fn() -> Option<Instant> + Send + Sync>;

pub(crate) struct QueueTimer {
    state: Mutex<TimerState>,
    wake: Condvar,
    expire: Expire,
}

struct TimerState {
    /// When the thread must next call `expire`.
    next: Option<Instant>,
    /// A thread serves this timer.
    running: bool,
}

impl QueueTimer {
    pub(crate) fn new(expire: Expire) -> Arc<QueueTimer> {
        Arc::new(QueueTimer { state: Mutex::new(TimerState { next: None, running: false }), wake: Condvar::new(), expire })
    }

    /// A run whose deadline is `at` was queued: `expire` is called by then.
    pub(crate) fn arm(self: &Arc<Self>, at: Instant) {
        let mut state = lock(&self.state);
        if state.running && state.next.is_some_and(|next| next <= at) {
            return;
        }
        state.next = Some(state.next.map_or(at, |next| next.min(at)));
        if state.running {
            self.wake.notify_one();
            return;
        }
        state.running = true;
        drop(state);
        let me = Arc::downgrade(self);
        let spawned = std::thread::Builder::new().name("isolet-queue-timer".into()).stack_size(64 * 1024).spawn(move || serve(me));
        if spawned.is_err() {
            // Without a thread the runs wait for a slot as long as it takes; the next run
            // queued tries again.
            lock(&self.state).running = false;
        }
    }
}

fn serve(me: Weak<QueueTimer>) {
    while let Some(timer) = me.upgrade() {
        let mut state = lock(&timer.state);
        let Some(at) = state.next else {
            state.running = false;
            return;
        };
        let now = Instant::now();
        if now < at {
            drop(timer.wake.wait_timeout(state, at - now).unwrap_or_else(|e| e.into_inner()));
            continue;
        }
        state.next = None;
        drop(state);
        if let Some(next) = (timer.expire)() {
            let mut state = lock(&timer.state);
            state.next = Some(state.next.map_or(next, |n| n.min(next)));
        }
    }
}
