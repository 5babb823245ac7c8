//! The engine's scheduling and accounting, generic over what a run and a warm isolate
//! are, so every rule is testable without V8: admission (a concurrency cap, then a
//! bounded FIFO queue, refusal when full or when too many stuck threads run), removal of
//! a waiting run (abort while queued), the warm-pool target, warm/cold start counting,
//! and thread accounting for shutdown's "idle" test.
use std::collections::{HashMap, VecDeque};

use crate::error::{ErrorKind, Failure};

/// Returned when the queue is at capacity; carries the rejected item back.
#[derive(Debug, PartialEq, Eq)]
pub struct QueueFull<T>(pub T);

#[derive(Debug)]
pub struct AdmissionQueue<T> {
    items: VecDeque<(u64, T)>,
    capacity: usize,
}

impl<T> AdmissionQueue<T> {
    pub fn new(capacity: usize) -> Self {
        AdmissionQueue { items: VecDeque::new(), capacity }
    }

    /// Appends `item` under `id`, or gives it back when the queue is full.
    pub fn push(&mut self, id: u64, item: T) -> Result<(), QueueFull<T>> {
        if self.items.len() >= self.capacity {
            return Err(QueueFull(item));
        }
        self.items.push_back((id, item));
        Ok(())
    }

    /// The oldest waiting item.
    pub fn pop(&mut self) -> Option<(u64, T)> {
        self.items.pop_front()
    }

    /// Takes a waiting item out of line (it was aborted before it started).
    pub fn remove(&mut self, id: u64) -> Option<T> {
        let pos = self.items.iter().position(|(i, _)| *i == id)?;
        self.items.remove(pos).map(|(_, t)| t)
    }

    /// Empties the queue (shutdown), oldest first.
    pub fn drain(&mut self) -> Vec<(u64, T)> {
        self.items.drain(..).collect()
    }

    pub fn len(&self) -> usize {
        self.items.len()
    }

    pub fn is_empty(&self) -> bool {
        self.items.is_empty()
    }
}


/// Environment variable: how many quarantined threads a process accepts before refusing runs.
pub const MAX_QUARANTINED_ENV: &str = "ISOLET_MAX_QUARANTINED";

/// Default for `ISOLET_MAX_QUARANTINED`: each quarantined thread holds an isolate of up
/// to its memory limit, so their number is capped.
pub const DEFAULT_MAX_QUARANTINED: usize = 32;

/// The cap from the environment's value (unset or unparsable: the default).
pub fn max_quarantined(env: Option<&str>) -> usize {
    env.and_then(|v| v.trim().parse().ok()).unwrap_or(DEFAULT_MAX_QUARANTINED)
}

/// `Some(failure)` when `quarantined` threads (ignoring termination, still running) reach
/// the cap `max`: new runs are refused so leaked isolates cannot grow without bound.
pub fn stuck_thread_refusal(quarantined: usize, max: usize) -> Option<Failure> {
    (quarantined >= max).then(|| {
        Failure::new(
            ErrorKind::Overloaded,
            format!(
                "{quarantined} sandbox threads ignored termination and are still running at idle priority \
                 (limit {MAX_QUARANTINED_ENV}={max}); restart the process to reclaim their memory"
            ),
        )
    })
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PoolConfig {
    /// Memory of warm isolates; runs asking for another limit get a cold isolate.
    pub memory_mb: u32,
    pub max_concurrent: usize,
    pub warm_pool_size: usize,
    pub max_queue: usize,
}

/// Counters kept as runs and threads come and go.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PoolCounters {
    pub completed: u64,
    pub failed: HashMap<ErrorKind, u64>,
    pub warm_starts: u64,
    pub cold_starts: u64,
    /// Warm isolates being created.
    pub warming: usize,
    /// Isolate threads alive (warm, busy and quarantined).
    pub threads: usize,
    /// Of those, threads that ignored termination and still run.
    pub quarantined: usize,
}

/// What `Pool::admit` decided for a new run.
#[derive(Debug, PartialEq, Eq)]
pub enum Admission<T> {
    /// It has a slot: start it now.
    Start(T),
    /// It waits in the queue.
    Queued,
    /// Refused, with the failure to answer it with.
    Refused(T, Failure),
}

/// Runs (`T`, cloned into the active set) and warm isolates (`W`, a handle to hand a
/// run to) under one owner; the engine keeps it behind its one lock.
#[derive(Debug)]
pub struct Pool<T, W> {
    config: PoolConfig,
    shutdown: bool,
    active: HashMap<u64, T>,
    queue: AdmissionQueue<T>,
    warm: VecDeque<W>,
    counters: PoolCounters,
}

impl<T: Clone, W> Pool<T, W> {
    pub fn new(config: PoolConfig) -> Self {
        Pool {
            config,
            shutdown: false,
            active: HashMap::new(),
            queue: AdmissionQueue::new(config.max_queue),
            warm: VecDeque::new(),
            counters: PoolCounters::default(),
        }
    }

    pub fn config(&self) -> &PoolConfig {
        &self.config
    }

    /// Admits run `id`: refused once shut down or when `quarantined` stuck threads reach
    /// `max_quarantined`; started while a slot is free; else queued; refused when the
    /// queue is full.
    pub fn admit(&mut self, id: u64, run: T, quarantined: usize, max_quarantined: usize) -> Admission<T> {
        if self.shutdown {
            return Admission::Refused(run, Failure::new(ErrorKind::Aborted, "The sandbox engine is shut down"));
        }
        if let Some(failure) = stuck_thread_refusal(quarantined, max_quarantined) {
            return Admission::Refused(run, failure);
        }
        if self.active.len() < self.config.max_concurrent {
            self.active.insert(id, run.clone());
            return Admission::Start(run);
        }
        match self.queue.push(id, run) {
            Ok(()) => Admission::Queued,
            Err(QueueFull(run)) => {
                let message =
                    format!("The engine's queue is full ({} waiting); try again later", self.config.max_queue);
                Admission::Refused(run, Failure::new(ErrorKind::Overloaded, message))
            }
        }
    }

    /// Takes a waiting run out of line (aborted before it started).
    pub fn remove_queued(&mut self, id: u64) -> Option<T> {
        self.queue.remove(id)
    }

    /// A warm isolate for a run needing `memory_mb`, if one matches and is ready.
    /// Count the start with `count_start` once the run is handed over.
    pub fn take_warm(&mut self, memory_mb: u32) -> Option<W> {
        if memory_mb != self.config.memory_mb {
            return None;
        }
        self.warm.pop_front()
    }

    pub fn count_start(&mut self, warm: bool) {
        if warm {
            self.counters.warm_starts += 1;
        } else {
            self.counters.cold_starts += 1;
        }
    }

    /// Run `id` gave its slot back: count its outcome (`failed`: its error kind) and its
    /// thread if quarantined.
    pub fn finished(&mut self, id: u64, failed: Option<ErrorKind>, quarantined: bool) {
        if self.active.remove(&id).is_none() {
            return; // not a run of this pool's slots: never counted twice
        }
        match failed {
            None => self.counters.completed += 1,
            Some(kind) => *self.counters.failed.entry(kind).or_insert(0) += 1,
        }
        if quarantined {
            self.counters.quarantined += 1;
        }
    }

    /// The oldest queued run, now holding a slot, while a slot is free (never after shutdown).
    pub fn next_to_start(&mut self) -> Option<T> {
        if self.shutdown || self.active.len() >= self.config.max_concurrent {
            return None;
        }
        let (id, run) = self.queue.pop()?;
        self.active.insert(id, run.clone());
        Some(run)
    }

    /// A run that took a slot but will not use it (it ended before it could start).
    pub fn forget(&mut self, id: u64) {
        self.active.remove(&id);
    }

    /// How many warm isolates to start creating now to reach the target (counted as warming).
    pub fn warm_to_create(&mut self) -> usize {
        if self.shutdown {
            return 0;
        }
        let have = self.warm.len() + self.counters.warming;
        let n = self.config.warm_pool_size.saturating_sub(have);
        self.counters.warming += n;
        n
    }

    /// A warm isolate finished being created (`Some`) or failed to (`None`).
    pub fn warm_ready(&mut self, warm: Option<W>) {
        self.counters.warming = self.counters.warming.saturating_sub(1);
        if let (Some(w), false) = (warm, self.shutdown) {
            self.warm.push_back(w);
        }
    }

    pub fn thread_started(&mut self) {
        self.counters.threads += 1;
    }

    /// An isolate thread ended (`quarantined`: it had been quarantined and ended on its own).
    pub fn thread_exited(&mut self, quarantined: bool) {
        self.counters.threads = self.counters.threads.saturating_sub(1);
        if quarantined {
            self.counters.quarantined = self.counters.quarantined.saturating_sub(1);
        }
    }

    /// Stops admitting; returns the queued runs (oldest first, to be answered) and the
    /// running ones (to be stopped); drops the warm isolates.
    pub fn shutdown(&mut self) -> (Vec<T>, Vec<T>) {
        self.shutdown = true;
        self.warm.clear();
        let queued = self.queue.drain().into_iter().map(|(_, t)| t).collect();
        (queued, self.active.values().cloned().collect())
    }

    pub fn is_shut_down(&self) -> bool {
        self.shutdown
    }

    /// No run holds a slot and every thread left is a quarantined one.
    pub fn is_idle(&self) -> bool {
        self.active.is_empty() && self.counters.threads <= self.counters.quarantined
    }

    pub fn counters(&self) -> &PoolCounters {
        &self.counters
    }

    pub fn warm(&self) -> usize {
        self.warm.len()
    }

    pub fn busy(&self) -> usize {
        self.active.len()
    }

    pub fn queued(&self) -> usize {
        self.queue.len()
    }
}
#[cfg(test)]
mod tests {
    use super::*;

    fn config(max_concurrent: usize, max_queue: usize, warm_pool_size: usize) -> PoolConfig {
        PoolConfig { memory_mb: 128, max_concurrent, warm_pool_size, max_queue }
    }

    fn pool(max_concurrent: usize, max_queue: usize) -> Pool<&'static str, u32> {
        Pool::new(config(max_concurrent, max_queue, 0))
    }

    fn kind<T>(a: &Admission<T>) -> Option<ErrorKind> {
        match a {
            Admission::Refused(_, f) => Some(f.kind),
            _ => None,
        }
    }

    #[test]
    fn admits_up_to_the_cap_then_queues_then_refuses_as_overloaded() {
        let mut p = pool(2, 1);
        assert_eq!(p.admit(1, "a", 0, 32), Admission::Start("a"));
        assert_eq!(p.admit(2, "b", 0, 32), Admission::Start("b"));
        assert_eq!(p.admit(3, "c", 0, 32), Admission::Queued);
        let refused = p.admit(4, "d", 0, 32);
        assert_eq!(kind(&refused), Some(ErrorKind::Overloaded));
        let Admission::Refused(back, f) = refused else { unreachable!() };
        assert_eq!(back, "d");
        assert!(f.message.contains("queue is full (1 waiting)"), "{}", f.message);
        assert_eq!((p.busy(), p.queued()), (2, 1));
    }

    #[test]
    fn a_freed_slot_starts_the_oldest_queued_run() {
        let mut p = pool(1, 3);
        p.admit(1, "a", 0, 32);
        for (id, r) in [(2, "b"), (3, "c"), (4, "d")] {
            assert_eq!(p.admit(id, r, 0, 32), Admission::Queued);
        }
        assert_eq!(p.next_to_start(), None, "the slot is still taken");
        p.finished(1, None, false);
        assert_eq!(p.next_to_start(), Some("b"));
        assert_eq!(p.next_to_start(), None);
        assert_eq!(p.remove_queued(3), Some("c"));
        p.finished(2, Some(ErrorKind::Timeout), false);
        assert_eq!(p.next_to_start(), Some("d"));
        assert_eq!(p.counters().completed, 1);
        assert_eq!(p.counters().failed.get(&ErrorKind::Timeout), Some(&1));
    }

    #[test]
    fn a_slot_is_counted_free_once() {
        let mut p = pool(1, 0);
        p.admit(1, "a", 0, 32);
        p.finished(1, None, true);
        p.finished(1, Some(ErrorKind::Internal), true);
        assert_eq!(p.counters().completed, 1);
        assert!(p.counters().failed.is_empty());
        assert_eq!(p.counters().quarantined, 1);
        // A run that never held a slot of this pool changes nothing.
        p.finished(9, None, false);
        assert_eq!(p.counters().completed, 1);
    }

    #[test]
    fn too_many_stuck_threads_refuses_as_overloaded() {
        let mut p = pool(4, 4);
        assert_eq!(p.admit(1, "a", 2, 3), Admission::Start("a"));
        let refused = p.admit(2, "b", 3, 3);
        assert_eq!(kind(&refused), Some(ErrorKind::Overloaded));
        let Admission::Refused(_, f) = refused else { unreachable!() };
        assert!(f.message.contains("ISOLET_MAX_QUARANTINED=3"), "{}", f.message);
        assert_eq!(max_quarantined(None), DEFAULT_MAX_QUARANTINED);
        assert_eq!(max_quarantined(Some("1")), 1);
        assert_eq!(max_quarantined(Some("lots")), DEFAULT_MAX_QUARANTINED);
    }

    #[test]
    fn after_shutdown_nothing_starts_and_new_runs_are_aborted() {
        let mut p = pool(1, 2);
        p.admit(1, "a", 0, 32);
        p.admit(2, "b", 0, 32);
        p.admit(3, "c", 0, 32);
        let (queued, running) = p.shutdown();
        assert_eq!(queued, vec!["b", "c"]);
        assert_eq!(running, vec!["a"]);
        assert_eq!(kind(&p.admit(4, "d", 0, 32)), Some(ErrorKind::Aborted));
        p.finished(1, None, false);
        assert_eq!(p.next_to_start(), None);
        assert_eq!(p.warm_to_create(), 0);
    }

    #[test]
    fn warm_pool_target_counts_isolates_being_made() {
        let mut p: Pool<&str, u32> = Pool::new(config(4, 4, 3));
        assert_eq!(p.warm_to_create(), 3);
        assert_eq!(p.warm_to_create(), 0, "three are already being made");
        p.warm_ready(Some(10));
        p.warm_ready(None); // one failed to come up
        assert_eq!(p.warm(), 1);
        assert_eq!(p.warm_to_create(), 1);
        p.warm_ready(Some(11));
        p.warm_ready(Some(12));
        assert_eq!(p.warm(), 3);
        assert_eq!(p.warm_to_create(), 0);
        // Warm isolates made before a shutdown are dropped when they come up after it.
        let mut q: Pool<&str, u32> = Pool::new(config(4, 4, 1));
        assert_eq!(q.warm_to_create(), 1);
        q.shutdown();
        q.warm_ready(Some(1));
        assert_eq!(q.warm(), 0);
    }

    #[test]
    fn warm_isolates_serve_only_runs_with_their_memory() {
        let mut p: Pool<&str, u32> = Pool::new(config(4, 4, 2));
        p.warm_to_create();
        p.warm_ready(Some(1));
        p.warm_ready(Some(2));
        assert_eq!(p.take_warm(64), None, "another memory limit needs a cold isolate");
        assert_eq!(p.take_warm(128), Some(1));
        p.count_start(true);
        p.count_start(false);
        assert_eq!((p.counters().warm_starts, p.counters().cold_starts), (1, 1));
        assert_eq!(p.take_warm(128), Some(2));
        assert_eq!(p.take_warm(128), None);
    }

    #[test]
    fn idle_means_no_slot_taken_and_only_quarantined_threads_left() {
        let mut p = pool(2, 0);
        assert!(p.is_idle());
        p.admit(1, "a", 0, 32);
        p.thread_started();
        assert!(!p.is_idle());
        // The run's thread ignored termination: its slot is given back, the thread stays.
        p.finished(1, Some(ErrorKind::Timeout), true);
        assert!(p.is_idle());
        p.thread_started(); // a warm thread
        assert!(!p.is_idle());
        p.thread_exited(false);
        assert!(p.is_idle());
        // The quarantined thread ends on its own.
        p.thread_exited(true);
        assert_eq!((p.counters().threads, p.counters().quarantined), (0, 0));
        // A run that took a slot and could not use it frees it without being counted.
        p.admit(2, "b", 0, 32);
        p.forget(2);
        assert!(p.is_idle());
        assert_eq!(p.counters().completed, 0);
    }

    #[test]
    fn fifo_order_and_capacity() {
        let mut q = AdmissionQueue::new(2);
        q.push(1, "a").unwrap();
        q.push(2, "b").unwrap();
        assert_eq!(q.push(3, "c"), Err(QueueFull("c")));
        assert_eq!(q.pop(), Some((1, "a")));
        q.push(3, "c").unwrap();
        assert_eq!(q.drain(), vec![(2, "b"), (3, "c")]);
        assert!(q.is_empty());
    }

    #[test]
    fn removes_a_waiting_entry_by_id() {
        let mut q = AdmissionQueue::new(3);
        for (i, s) in [(1, "a"), (2, "b"), (3, "c")] {
            q.push(i, s).unwrap();
        }
        assert_eq!(q.remove(2), Some("b"));
        assert_eq!(q.remove(2), None);
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop(), Some((1, "a")));
    }

    #[test]
    fn zero_capacity_refuses_everything() {
        let mut q: AdmissionQueue<u8> = AdmissionQueue::new(0);
        assert_eq!(q.push(1, 9), Err(QueueFull(9)));
    }
}
