//! Wake-ups of an event sink's consumer (Node's thread) held back on one thread while it
//! holds a lock the woken thread is about to need. The process engine reads a host's
//! frames under its state lock; a `done` or `hostCall` event pushed there woke Node's
//! thread, which (on the same CPU, by wake-up preemption, or on the other) then blocked on
//! that lock to submit the next run or send the call's reply, and had to be woken again.
use std::cell::RefCell;
use std::sync::Arc;

/// What wakes a consumer (an engine's event channel rings Node's thread).
pub trait Ring: Send + Sync {
    fn ring(&self);
}

thread_local! {
    /// Rings held on this thread while a `HoldRings` lives, once each.
    static HELD: RefCell<Option<Vec<Arc<dyn Ring>>>> = const { RefCell::new(None) };
}

/// While it lives, `ring_or_hold` on this thread only notes the ring; dropping it rings
/// them (create it before taking the lock, drop it after releasing it). Holds nest: the
/// outermost one rings (or hands over, `take`) what every one of them held.
pub struct HoldRings {
    outermost: bool,
}

impl HoldRings {
    // Not `Default`: making one takes part in the thread's nesting of holds.
    #[allow(clippy::new_without_default)]
    pub fn new() -> HoldRings {
        let outermost = HELD.with(|h| {
            let mut h = h.borrow_mut();
            let outermost = h.is_none();
            if outermost {
                *h = Some(Vec::new());
            }
            outermost
        });
        HoldRings { outermost }
    }

    /// Ends the hold without ringing: what it held, for the caller to serve (Node's thread
    /// drains its own channel rather than waking itself). Empty for a nested hold.
    pub fn take(mut self) -> Vec<Arc<dyn Ring>> {
        let held = self.release();
        std::mem::forget(self);
        held
    }

    fn release(&mut self) -> Vec<Arc<dyn Ring>> {
        if !self.outermost {
            return Vec::new();
        }
        HELD.with(|h| h.borrow_mut().take()).unwrap_or_default()
    }
}

impl Drop for HoldRings {
    fn drop(&mut self) {
        for ring in self.release() {
            ring.ring();
        }
    }
}

/// Rings `target` now, or once this thread's `HoldRings` drops.
pub fn ring_or_hold(target: &Arc<dyn Ring>) {
    let rung_now = HELD.with(|h| match h.borrow_mut().as_mut() {
        Some(held) => {
            if !held.iter().any(|r| Arc::ptr_eq(r, target)) {
                held.push(target.clone());
            }
            false
        }
        None => true,
    });
    if rung_now {
        target.ring();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    struct Count(AtomicUsize);
    impl Ring for Count {
        fn ring(&self) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn rings_wait_for_the_hold_and_ring_once_each() {
        let a = Arc::new(Count(AtomicUsize::new(0)));
        let b = Arc::new(Count(AtomicUsize::new(0)));
        let (ra, rb): (Arc<dyn Ring>, Arc<dyn Ring>) = (a.clone(), b.clone());
        ring_or_hold(&ra);
        assert_eq!(a.0.load(Ordering::SeqCst), 1);
        let hold = HoldRings::new();
        ring_or_hold(&ra);
        ring_or_hold(&rb);
        ring_or_hold(&ra);
        assert_eq!((a.0.load(Ordering::SeqCst), b.0.load(Ordering::SeqCst)), (1, 0));
        drop(hold);
        assert_eq!((a.0.load(Ordering::SeqCst), b.0.load(Ordering::SeqCst)), (2, 1));
        ring_or_hold(&rb);
        assert_eq!(b.0.load(Ordering::SeqCst), 2);
    }

    #[test]
    fn a_nested_hold_leaves_its_rings_to_the_outermost_which_can_take_them() {
        let a = Arc::new(Count(AtomicUsize::new(0)));
        let ra: Arc<dyn Ring> = a.clone();
        let outer = HoldRings::new();
        let inner = HoldRings::new();
        ring_or_hold(&ra);
        drop(inner);
        assert_eq!(a.0.load(Ordering::SeqCst), 0, "the inner hold rang");
        let inner = HoldRings::new();
        assert!(inner.take().is_empty(), "a nested hold handed over the outer's rings");
        let held = outer.take();
        assert_eq!(held.len(), 1);
        assert!(Arc::ptr_eq(&held[0], &ra));
        assert_eq!(a.0.load(Ordering::SeqCst), 0, "take rang");
        ring_or_hold(&ra);
        assert_eq!(a.0.load(Ordering::SeqCst), 1, "the hold outlived take");
    }
}

/// How long an isolate thread waiting for a host call's reply spins before it sleeps: a
/// synchronous tool answers within tens of microseconds, and a futex sleep and wake-up
/// costs about as much again (the sleeper must be scheduled back in).
pub const REPLY_SPIN_US: u64 = 50;

/// A thread spins again while its last wait took at most this long. Twice the spin, not
/// the spin: a reply a little slower than the spin (the wait then ends asleep, its
/// wake-up on top) must not stop the spinning for good, or a round trip that takes 40 µs
/// spinning and 56 µs without (process isolation, measured) settles at 56 once one reply
/// is late.
pub const SPIN_AGAIN_WITHIN_US: u64 = 2 * REPLY_SPIN_US;

/// Whether an isolate thread about to wait for work spins for `REPLY_SPIN_US` first: only
/// with a host call of its run in flight (a timer or a data request sleeps at once), only
/// while the last wait was short (`SPIN_AGAIN_WITHIN_US`: a slow tool costs no CPU time),
/// and only while a core is left for the thread that answers (`spinning` threads now, of
/// `cores`).
pub fn spin_for_reply(calls_in_flight: usize, last_wait_us: u64, spinning: usize, cores: usize) -> bool {
    calls_in_flight > 0 && last_wait_us <= SPIN_AGAIN_WITHIN_US && spinning + 1 < cores
}

#[cfg(test)]
mod spin_tests {
    use super::*;

    #[test]
    fn spins_only_for_a_reply_that_comes_fast_with_a_core_to_spare() {
        // A host call in flight whose answers have been quick, one core free: spin.
        assert!(spin_for_reply(1, 20, 0, 2));
        // Nothing in flight (a timer, a data request): sleep at once.
        assert!(!spin_for_reply(0, 0, 0, 2));
        // The last wait took longer than twice the spin: a slow tool costs no CPU.
        assert!(!spin_for_reply(1, SPIN_AGAIN_WITHIN_US + 1, 0, 2));
        // A little longer than the spin (a reply just missed it) keeps the spinning on.
        assert!(spin_for_reply(1, REPLY_SPIN_US + 6, 0, 2));
        assert!(spin_for_reply(1, SPIN_AGAIN_WITHIN_US, 0, 2));
        // Another thread spins already on a 2-core machine: the answering thread needs the other.
        assert!(!spin_for_reply(3, 10, 1, 2));
        assert!(spin_for_reply(3, 10, 1, 4));
        // One core: never.
        assert!(!spin_for_reply(1, 0, 0, 1));
    }
}
