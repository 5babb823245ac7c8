//! The engine's scheduling and accounting, generic over what a run and a warm isolate
//! are, so every rule is testable without V8: admission (a concurrency cap, then a
//! bounded queue served round-robin across tenants, refusal when full or when too many
//! stuck threads run), removal of a waiting run (abort while queued), per-tenant counts,
//! the warm-pool target, warm/cold start counting, and thread accounting for shutdown's
//! "idle" test.
//!
//! Fairness rules (see [`AdmissionQueue`] and [`IDLE_TENANTS_KEPT`]): one FIFO per
//! tenant, tenants served in turn; a full queue makes room by pushing out the newest run
//! of the tenant holding the most; per-tenant counts live while a tenant has runs queued
//! or running, and for at most [`IDLE_TENANTS_KEPT`] idle tenants after that.
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Arc;

use crate::error::{ErrorKind, Failure};

/// Whose run it is, for fair queueing: a name the embedder gives (the `tenant` option),
/// or [`Tenant::SHARED`], the one tenant of every run that names none. Cheap to clone.
/// Names are trusted: a caller free to pick a new name per run gets a turn per name.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Tenant(Option<Arc<str>>);

impl Tenant {
    /// The tenant of runs without a `tenant` option.
    pub const SHARED: Tenant = Tenant(None);

    pub fn named(name: &str) -> Tenant {
        Tenant(Some(Arc::from(name)))
    }

    /// The name given, `None` for [`Tenant::SHARED`].
    pub fn name(&self) -> Option<&str> {
        self.0.as_deref()
    }
}

impl From<Option<&str>> for Tenant {
    /// A run plan's `tenant` (`None`: the shared tenant).
    fn from(name: Option<&str>) -> Tenant {
        name.map_or(Tenant::SHARED, Tenant::named)
    }
}

/// Returned when the queue is at capacity; carries the rejected item back.
#[derive(Debug, PartialEq, Eq)]
pub struct QueueFull<T>(pub T);

/// A run that waited in the queue, with its id and tenant.
#[derive(Debug, PartialEq, Eq)]
pub struct Queued<T> {
    pub id: u64,
    pub tenant: Tenant,
    pub item: T,
}

/// The runs waiting for a slot: one FIFO per tenant, at most `capacity` runs in all.
///
/// **Round-robin.** The tenant at the front of the rotation gives its oldest run and
/// goes to the back (or leaves the rotation when it has none left); a tenant whose run
/// is queued when it has none waiting joins at the back. So while a tenant has runs
/// waiting, every other tenant starts at most one run between two of its starts: its
/// wait depends on how many tenants wait, not on how many runs they queued. Turns are
/// counted in starts, whatever a run's length, since that is unknown when it starts
/// (which is why this is plain and not deficit round-robin).
///
/// **Bound.** When the queue is full, a new run takes the place of the newest queued run
/// of the tenant holding the most (on a tie, the one of them served last), as `fq_codel`
/// drops from its fattest flow; but only if its own tenant, counting the new run, then
/// holds no more than that tenant, else it is refused. So one tenant may fill an
/// otherwise empty queue, yet cannot lock others out: a tenant holding `k` queued runs
/// can always queue one more while another holds `k + 2` or more, and a full queue tends
/// to equal shares. Tenants one apart do not push each other's runs out by turns. A
/// capacity of 1 never pushes out (no tenant can hold `k + 2`).
#[derive(Debug)]
pub struct AdmissionQueue<T> {
    /// Per tenant with runs waiting, its runs oldest first (never an empty list).
    waiting: HashMap<Tenant, VecDeque<(u64, T)>>,
    /// The tenants of `waiting`, each once, the next to be served first.
    rotation: VecDeque<Tenant>,
    len: usize,
    capacity: usize,
}

impl<T> AdmissionQueue<T> {
    pub fn new(capacity: usize) -> Self {
        AdmissionQueue { waiting: HashMap::new(), rotation: VecDeque::new(), len: 0, capacity }
    }

    /// Appends `item` under `id` to its tenant's line: `Ok(None)`, or `Ok(Some(run))`
    /// when the queue was full and `run` was pushed out to make room (see the type's
    /// doc), or the item back when the queue is full.
    pub fn push(&mut self, id: u64, tenant: Tenant, item: T) -> Result<Option<Queued<T>>, QueueFull<T>> {
        let mut pushed_out = None;
        if self.len >= self.capacity {
            let Some(fattest) = self.fattest() else { return Err(QueueFull(item)) };
            if self.queued_of(&tenant) + 1 > self.queued_of(&fattest).saturating_sub(1) {
                return Err(QueueFull(item));
            }
            pushed_out = self.pop_newest(&fattest);
        }
        match self.waiting.get_mut(&tenant) {
            Some(runs) => runs.push_back((id, item)),
            None => {
                self.rotation.push_back(tenant.clone());
                self.waiting.insert(tenant, VecDeque::from([(id, item)]));
            }
        }
        self.len += 1;
        Ok(pushed_out)
    }

    /// The oldest run of the tenant whose turn it is; that tenant goes to the back.
    pub fn pop(&mut self) -> Option<Queued<T>> {
        while let Some(tenant) = self.rotation.pop_front() {
            let Some(runs) = self.waiting.get_mut(&tenant) else { continue };
            let Some((id, item)) = runs.pop_front() else {
                self.waiting.remove(&tenant);
                continue;
            };
            if runs.is_empty() {
                self.waiting.remove(&tenant);
            } else {
                self.rotation.push_back(tenant.clone());
            }
            self.len -= 1;
            return Some(Queued { id, tenant, item });
        }
        None
    }

    /// Takes a waiting item out of line (it was aborted before it started).
    pub fn remove(&mut self, id: u64) -> Option<Queued<T>> {
        let (tenant, pos) =
            self.waiting.iter().find_map(|(t, runs)| runs.iter().position(|(i, _)| *i == id).map(|pos| (t.clone(), pos)))?;
        let runs = self.waiting.get_mut(&tenant)?;
        let (_, item) = runs.remove(pos)?;
        if runs.is_empty() {
            self.leave(&tenant);
        }
        self.len -= 1;
        Some(Queued { id, tenant, item })
    }

    /// Empties the queue (shutdown), in the order the runs would have started.
    pub fn drain(&mut self) -> Vec<Queued<T>> {
        std::iter::from_fn(|| self.pop()).collect()
    }

    pub fn len(&self) -> usize {
        self.len
    }

    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// How many runs of `tenant` wait.
    pub fn queued_of(&self, tenant: &Tenant) -> usize {
        self.waiting.get(tenant).map_or(0, VecDeque::len)
    }

    /// The tenant holding the most queued runs; on a tie, the one served last. A scan
    /// of the waiting tenants, only when the queue is full (`fq_codel` scans too).
    fn fattest(&self) -> Option<Tenant> {
        self.rotation.iter().max_by_key(|t| self.queued_of(t)).cloned()
    }

    fn pop_newest(&mut self, tenant: &Tenant) -> Option<Queued<T>> {
        let runs = self.waiting.get_mut(tenant)?;
        let (id, item) = runs.pop_back()?;
        if runs.is_empty() {
            self.leave(tenant);
        }
        self.len -= 1;
        Some(Queued { id, tenant: tenant.clone(), item })
    }

    /// `tenant` has no run waiting any more: out of the rotation, so that its next run
    /// joins at the back rather than at a turn it held before.
    fn leave(&mut self, tenant: &Tenant) {
        self.waiting.remove(tenant);
        self.rotation.retain(|t| t != tenant);
    }
}

/// How many tenants with nothing queued or running keep their counts (for `stats()`);
/// beyond that, the one idle longest is forgotten. Tenants with runs queued or running
/// are always kept, and there are at most `max_queue + max_concurrent` of those, so a
/// caller naming a new tenant per run cannot grow the counts without bound (each name is
/// at most `options::MAX_TENANT_BYTES` long).
pub const IDLE_TENANTS_KEPT: usize = 256;

/// One tenant's counts, as `Pool::tenants` reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantCounts {
    pub tenant: Tenant,
    pub queued: usize,
    pub running: usize,
    /// Runs that ended, since the tenant was last forgotten (see [`IDLE_TENANTS_KEPT`]).
    pub completed: u64,
    pub failed: HashMap<ErrorKind, u64>,
}

#[derive(Debug, Default)]
struct TenantRecord {
    running: usize,
    completed: u64,
    failed: HashMap<ErrorKind, u64>,
    /// Set while nothing of the tenant is queued or running: its key in `TenantBook::idle`.
    idle_since: Option<u64>,
}

/// Per-tenant counts, bounded as [`IDLE_TENANTS_KEPT`] says.
#[derive(Debug, Default)]
struct TenantBook {
    records: HashMap<Tenant, TenantRecord>,
    /// The idle tenants, by when they went idle (a counter), longest idle first.
    idle: BTreeMap<u64, Tenant>,
    idle_stamps: u64,
}

impl TenantBook {
    /// The record of `tenant`, which has a run queued or running now (made if new).
    fn busy(&mut self, tenant: &Tenant) -> &mut TenantRecord {
        let record = self.records.entry(tenant.clone()).or_default();
        if let Some(stamp) = record.idle_since.take() {
            self.idle.remove(&stamp);
        }
        record
    }

    /// Marks `tenant` idle once it has nothing running and no run `queued`, then forgets
    /// the tenants idle longest beyond the cap.
    fn settle(&mut self, tenant: &Tenant, queued: usize) {
        let Some(record) = self.records.get_mut(tenant) else { return };
        if queued > 0 || record.running > 0 || record.idle_since.is_some() {
            return;
        }
        self.idle_stamps += 1;
        record.idle_since = Some(self.idle_stamps);
        self.idle.insert(self.idle_stamps, tenant.clone());
        while self.idle.len() > IDLE_TENANTS_KEPT {
            if let Some((_, longest_idle)) = self.idle.pop_first() {
                self.records.remove(&longest_idle);
            }
        }
    }

    /// A run of `tenant` gave its slot back; its record, to count the outcome in.
    fn release(&mut self, tenant: &Tenant) -> Option<&mut TenantRecord> {
        let record = self.records.get_mut(tenant)?;
        record.running = record.running.saturating_sub(1);
        Some(record)
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
    /// It waits in the full queue in place of `T`, another tenant's newest queued run
    /// (see [`AdmissionQueue`]), which is to be answered with the failure.
    QueuedInPlaceOf(T, Failure),
    /// Refused, with the failure to answer it with.
    Refused(T, Failure),
}

/// Counts a run's outcome (`failed`: its error kind) in the engine's and, when it has
/// one, its tenant's counts.
fn count_outcome(counters: &mut PoolCounters, record: Option<&mut TenantRecord>, failed: Option<ErrorKind>) {
    match failed {
        None => {
            counters.completed += 1;
            if let Some(r) = record {
                r.completed += 1;
            }
        }
        Some(kind) => {
            *counters.failed.entry(kind).or_insert(0) += 1;
            if let Some(r) = record {
                *r.failed.entry(kind).or_insert(0) += 1;
            }
        }
    }
}

/// Runs (`T`, cloned into the active set) and warm isolates (`W`, a handle to hand a
/// run to) under one owner; the engine keeps it behind its one lock.
#[derive(Debug)]
pub struct Pool<T, W> {
    config: PoolConfig,
    shutdown: bool,
    active: HashMap<u64, (Tenant, T)>,
    /// Open persistent sandboxes, each holding a slot for its life (see `admit_sandbox`).
    sandboxes: HashMap<u64, Tenant>,
    queue: AdmissionQueue<T>,
    tenants: TenantBook,
    warm: VecDeque<W>,
    counters: PoolCounters,
}

impl<T: Clone, W> Pool<T, W> {
    pub fn new(config: PoolConfig) -> Self {
        Pool {
            config,
            shutdown: false,
            active: HashMap::new(),
            sandboxes: HashMap::new(),
            queue: AdmissionQueue::new(config.max_queue),
            tenants: TenantBook::default(),
            warm: VecDeque::new(),
            counters: PoolCounters::default(),
        }
    }

    pub fn config(&self) -> &PoolConfig {
        &self.config
    }

    /// Admits run `id` of `tenant`: refused once shut down or when `quarantined` stuck
    /// threads reach `max_quarantined`; started while a slot is free; else queued in its
    /// tenant's line, maybe in place of another tenant's run, or refused when the queue
    /// is full (the rules of [`AdmissionQueue`]). Refused and pushed-out runs are not
    /// counted as failed: they never held a slot.
    pub fn admit(&mut self, id: u64, tenant: Tenant, run: T, quarantined: usize, max_quarantined: usize) -> Admission<T> {
        if self.shutdown {
            return Admission::Refused(run, Failure::new(ErrorKind::Aborted, "The sandbox engine is shut down"));
        }
        if let Some(failure) = stuck_thread_refusal(quarantined, max_quarantined) {
            return Admission::Refused(run, failure);
        }
        if self.slots_taken() < self.config.max_concurrent {
            self.tenants.busy(&tenant).running += 1;
            self.active.insert(id, (tenant, run.clone()));
            return Admission::Start(run);
        }
        let full = format!("The engine's queue is full ({} waiting)", self.config.max_queue);
        match self.queue.push(id, tenant.clone(), run) {
            Ok(pushed_out) => {
                self.tenants.busy(&tenant);
                let Some(out) = pushed_out else { return Admission::Queued };
                self.settle(&out.tenant);
                let message = format!("{full} and this run's tenant held the most of it; it made room for another tenant's run; try again later");
                Admission::QueuedInPlaceOf(out.item, Failure::new(ErrorKind::Overloaded, message))
            }
            Err(QueueFull(run)) => Admission::Refused(run, Failure::new(ErrorKind::Overloaded, format!("{full}; try again later"))),
        }
    }

    /// Takes a waiting run out of line (aborted before it started).
    pub fn remove_queued(&mut self, id: u64) -> Option<T> {
        let removed = self.queue.remove(id)?;
        self.settle(&removed.tenant);
        Some(removed.item)
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
        let Some((tenant, _)) = self.active.remove(&id) else {
            return; // not a run of this pool's slots: never counted twice
        };
        let record = self.tenants.release(&tenant);
        count_outcome(&mut self.counters, record, failed);
        if quarantined {
            self.counters.quarantined += 1;
        }
        self.settle(&tenant);
    }

    /// The queued run whose turn it is (round-robin across tenants, see
    /// [`AdmissionQueue`]), now holding a slot, while a slot is free (never after shutdown).
    pub fn next_to_start(&mut self) -> Option<T> {
        if self.shutdown || self.slots_taken() >= self.config.max_concurrent {
            return None;
        }
        let Queued { id, tenant, item } = self.queue.pop()?;
        self.tenants.busy(&tenant).running += 1;
        self.active.insert(id, (tenant, item.clone()));
        Some(item)
    }

    /// A run that took a slot but will not use it (it ended before it could start).
    pub fn forget(&mut self, id: u64) {
        if let Some((tenant, _)) = self.active.remove(&id) {
            self.tenants.release(&tenant);
            self.settle(&tenant);
        }
    }

    /// Marks `tenant` idle if it has nothing queued or running (see [`IDLE_TENANTS_KEPT`]).
    fn settle(&mut self, tenant: &Tenant) {
        self.tenants.settle(tenant, self.queue.queued_of(tenant));
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

    /// Stops admitting; returns the queued runs (in the order they would have started,
    /// to be answered) and the running ones (to be stopped); drops the warm isolates.
    pub fn shutdown(&mut self) -> (Vec<T>, Vec<T>) {
        self.shutdown = true;
        self.warm.clear();
        let mut queued = Vec::with_capacity(self.queue.len());
        for Queued { tenant, item, .. } in self.queue.drain() {
            self.settle(&tenant);
            queued.push(item);
        }
        (queued, self.active.values().map(|(_, run)| run.clone()).collect())
    }

    pub fn is_shut_down(&self) -> bool {
        self.shutdown
    }

    /// No run holds a slot and every thread left is a quarantined one.
    pub fn is_idle(&self) -> bool {
        self.active.is_empty() && self.sandboxes.is_empty() && self.counters.threads <= self.counters.quarantined
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

    /// Slots held by runs and by open sandboxes.
    fn slots_taken(&self) -> usize {
        self.active.len() + self.sandboxes.len()
    }

    /// Opens persistent sandbox `id` of `tenant`: it holds one slot from now until
    /// `sandbox_closed`, like a run that lasts. Never queued: refused (overloaded) when
    /// every slot is taken, so opening never waits behind runs; refused once shut down or
    /// when too many stuck threads run, as runs are.
    pub fn admit_sandbox(&mut self, id: u64, tenant: Tenant, quarantined: usize, max_quarantined: usize) -> Result<(), Failure> {
        if self.shutdown {
            return Err(Failure::new(ErrorKind::Aborted, "The sandbox engine is shut down"));
        }
        if let Some(failure) = stuck_thread_refusal(quarantined, max_quarantined) {
            return Err(failure);
        }
        if self.slots_taken() >= self.config.max_concurrent {
            let message = format!(
                "Every isolate slot of the engine is taken ({} of {}, {} by open sandboxes); close a sandbox or try again later",
                self.slots_taken(),
                self.config.max_concurrent,
                self.sandboxes.len()
            );
            return Err(Failure::new(ErrorKind::Overloaded, message));
        }
        self.tenants.busy(&tenant).running += 1;
        self.sandboxes.insert(id, tenant);
        Ok(())
    }

    /// Sandbox `id` closed and gave its slot back (`quarantined`: its thread was left
    /// running). Given back once. Not an outcome: its runs are counted, each once (see
    /// `sandbox_run_finished`), the failure that closed it among them.
    pub fn sandbox_closed(&mut self, id: u64, quarantined: bool) -> bool {
        let Some(tenant) = self.sandboxes.remove(&id) else { return false };
        self.tenants.release(&tenant);
        if quarantined {
            self.counters.quarantined += 1;
        }
        self.settle(&tenant);
        true
    }

    /// A run (or call) of a persistent sandbox of `tenant` ended: counted like a one-shot
    /// run's outcome, in the engine's and the tenant's counts (`failed`: its error kind).
    /// Its slot is the sandbox's, given back by `sandbox_closed` (which may come first: a
    /// run whose thread was quarantined closes its sandbox before it answers).
    pub fn sandbox_run_finished(&mut self, tenant: &Tenant, failed: Option<ErrorKind>) {
        let record = self.tenants.records.get_mut(tenant);
        count_outcome(&mut self.counters, record, failed);
    }

    /// Open persistent sandboxes.
    pub fn open_sandboxes(&self) -> usize {
        self.sandboxes.len()
    }

    /// Ids of the open sandboxes (to close them at shutdown).
    pub fn sandbox_ids(&self) -> Vec<u64> {
        self.sandboxes.keys().copied().collect()
    }

    /// Per tenant with runs queued or running, and the latest idle ones (at most
    /// [`IDLE_TENANTS_KEPT`]): its counts, the shared tenant first, then by name.
    pub fn tenants(&self) -> Vec<TenantCounts> {
        let mut all: Vec<TenantCounts> = self
            .tenants
            .records
            .iter()
            .map(|(tenant, r)| TenantCounts {
                tenant: tenant.clone(),
                queued: self.queue.queued_of(tenant),
                running: r.running,
                completed: r.completed,
                failed: r.failed.clone(),
            })
            .collect();
        all.sort_by(|a, b| a.tenant.cmp(&b.tenant));
        all
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

    fn id_item<T>(e: Queued<T>) -> (u64, T) {
        (e.id, e.item)
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
        assert_eq!(p.admit(1, Tenant::SHARED, "a", 0, 32), Admission::Start("a"));
        assert_eq!(p.admit(2, Tenant::SHARED, "b", 0, 32), Admission::Start("b"));
        assert_eq!(p.admit(3, Tenant::SHARED, "c", 0, 32), Admission::Queued);
        let refused = p.admit(4, Tenant::SHARED, "d", 0, 32);
        assert_eq!(kind(&refused), Some(ErrorKind::Overloaded));
        let Admission::Refused(back, f) = refused else { unreachable!() };
        assert_eq!(back, "d");
        assert!(f.message.contains("queue is full (1 waiting)"), "{}", f.message);
        assert_eq!((p.busy(), p.queued()), (2, 1));
    }

    #[test]
    fn a_freed_slot_starts_the_oldest_queued_run() {
        let mut p = pool(1, 3);
        p.admit(1, Tenant::SHARED, "a", 0, 32);
        for (id, r) in [(2, "b"), (3, "c"), (4, "d")] {
            assert_eq!(p.admit(id, Tenant::SHARED, r, 0, 32), Admission::Queued);
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
        p.admit(1, Tenant::SHARED, "a", 0, 32);
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
        assert_eq!(p.admit(1, Tenant::SHARED, "a", 2, 3), Admission::Start("a"));
        let refused = p.admit(2, Tenant::SHARED, "b", 3, 3);
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
        p.admit(1, Tenant::SHARED, "a", 0, 32);
        p.admit(2, Tenant::SHARED, "b", 0, 32);
        p.admit(3, Tenant::SHARED, "c", 0, 32);
        let (queued, running) = p.shutdown();
        assert_eq!(queued, vec!["b", "c"]);
        assert_eq!(running, vec!["a"]);
        assert_eq!(kind(&p.admit(4, Tenant::SHARED, "d", 0, 32)), Some(ErrorKind::Aborted));
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
        p.admit(1, Tenant::SHARED, "a", 0, 32);
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
        p.admit(2, Tenant::SHARED, "b", 0, 32);
        p.forget(2);
        assert!(p.is_idle());
        assert_eq!(p.counters().completed, 0);
    }

    #[test]
    fn an_open_sandbox_holds_a_slot_until_it_closes() {
        let mut p = pool(2, 1);
        assert_eq!(p.admit_sandbox(100, Tenant::SHARED, 0, 32), Ok(()));
        assert_eq!(p.open_sandboxes(), 1);
        assert_eq!(p.admit(1, Tenant::SHARED, "a", 0, 32), Admission::Start("a"));
        // Both slots taken: a run queues, another sandbox is refused at once.
        assert_eq!(p.admit(2, Tenant::SHARED, "b", 0, 32), Admission::Queued);
        let refused = p.admit_sandbox(101, Tenant::SHARED, 0, 32).unwrap_err();
        assert_eq!(refused.kind, ErrorKind::Overloaded);
        assert!(refused.message.contains("1 by open sandboxes"), "{}", refused.message);
        assert_eq!(p.next_to_start(), None);
        assert!(!p.is_idle());
        // Closing gives the slot back to the queued run; counted once.
        assert!(p.sandbox_closed(100, false));
        assert!(!p.sandbox_closed(100, false));
        assert_eq!(p.next_to_start(), Some("b"));
        p.finished(1, None, false);
        p.finished(2, None, false);
        assert!(p.is_idle());
    }

    #[test]
    fn a_sandbox_runs_outcomes_count_like_runs_in_its_tenants_counts() {
        let mut p = pool(2, 4);
        let t = Tenant::named("t");
        p.admit_sandbox(5, t.clone(), 0, 32).unwrap();
        p.sandbox_run_finished(&t, None);
        p.sandbox_run_finished(&t, Some(ErrorKind::Timeout));
        assert_eq!(p.counters().completed, 1);
        assert_eq!(p.counters().failed.get(&ErrorKind::Timeout), Some(&1));
        let counts = |p: &Pool<&str, u32>| p.tenants().into_iter().find(|c| c.tenant == Tenant::named("t")).unwrap();
        let c = counts(&p);
        assert_eq!((c.running, c.completed, c.failed.get(&ErrorKind::Timeout).copied()), (1, 1, Some(1)), "the slot stays the sandbox's");
        // Closing is not an outcome; a run that answers after its sandbox closed still counts.
        assert!(p.sandbox_closed(5, true));
        assert_eq!(p.counters().failed.values().sum::<u64>(), 1);
        p.sandbox_run_finished(&t, Some(ErrorKind::MemoryLimit));
        let c = counts(&p);
        assert_eq!((c.running, c.completed, c.failed.values().sum::<u64>()), (0, 1, 2));
    }

    #[test]
    fn a_sandbox_closed_by_a_stuck_run_counts_its_thread_as_quarantined() {
        let mut p = pool(1, 0);
        p.admit_sandbox(7, Tenant::named("t"), 0, 32).unwrap();
        p.thread_started();
        assert!(p.sandbox_closed(7, true));
        assert_eq!(p.counters().quarantined, 1);
        assert!(p.is_idle(), "only a quarantined thread is left");
        p.thread_exited(true);
        assert_eq!(p.counters().quarantined, 0);
        // After shutdown, and with too many stuck threads, no sandbox opens.
        assert_eq!(p.admit_sandbox(8, Tenant::SHARED, 32, 32).unwrap_err().kind, ErrorKind::Overloaded);
        p.shutdown();
        assert_eq!(p.admit_sandbox(9, Tenant::SHARED, 0, 32).unwrap_err().kind, ErrorKind::Aborted);
    }

    #[test]
    fn fifo_order_and_capacity() {
        let mut q = AdmissionQueue::new(2);
        q.push(1, Tenant::SHARED, "a").unwrap();
        q.push(2, Tenant::SHARED, "b").unwrap();
        assert_eq!(q.push(3, Tenant::SHARED, "c"), Err(QueueFull("c")));
        assert_eq!(q.pop().map(id_item), Some((1, "a")));
        q.push(3, Tenant::SHARED, "c").unwrap();
        assert_eq!(q.drain().into_iter().map(id_item).collect::<Vec<_>>(), vec![(2, "b"), (3, "c")]);
        assert!(q.is_empty());
    }

    #[test]
    fn removes_a_waiting_entry_by_id() {
        let mut q = AdmissionQueue::new(3);
        for (i, s) in [(1, "a"), (2, "b"), (3, "c")] {
            q.push(i, Tenant::SHARED, s).unwrap();
        }
        assert_eq!(q.remove(2).map(|e| e.item), Some("b"));
        assert!(q.remove(2).is_none());
        assert_eq!(q.len(), 2);
        assert_eq!(q.pop().map(id_item), Some((1, "a")));
    }

    #[test]
    fn zero_capacity_refuses_everything() {
        let mut q: AdmissionQueue<u8> = AdmissionQueue::new(0);
        assert_eq!(q.push(1, Tenant::SHARED, 9), Err(QueueFull(9)));
    }

    // --- Fairness across tenants ---

    /// Runs that carry their own id and label, so a started run says what it is.
    type Run = (u64, &'static str);

    fn t(name: &str) -> Tenant {
        Tenant::named(name)
    }

    fn counts_of<T: Clone, W>(p: &Pool<T, W>, tenant: &Tenant) -> Option<TenantCounts> {
        p.tenants().into_iter().find(|c| &c.tenant == tenant)
    }

    /// With one slot held by run `running`: finishes it and starts the next, until the
    /// queue is empty; the labels in start order.
    fn serve_one_at_a_time(p: &mut Pool<Run, u32>, mut running: u64) -> Vec<&'static str> {
        let mut order = Vec::new();
        loop {
            p.finished(running, None, false);
            let Some((id, label)) = p.next_to_start() else { return order };
            order.push(label);
            running = id;
        }
    }

    #[test]
    fn tenants_are_served_in_turn_each_in_its_own_order() {
        let mut p: Pool<Run, u32> = Pool::new(config(1, 10, 0));
        assert_eq!(p.admit(1, t("a"), (1, "a0"), 0, 32), Admission::Start((1, "a0")));
        for (id, tenant, label) in [(2, "a", "a1"), (3, "a", "a2"), (4, "a", "a3"), (5, "b", "b1"), (6, "b", "b2"), (7, "c", "c1")] {
            assert_eq!(p.admit(id, t(tenant), (id, label), 0, 32), Admission::Queued);
        }
        assert_eq!(serve_one_at_a_time(&mut p, 1), ["a1", "b1", "c1", "a2", "b2", "a3"]);
    }

    #[test]
    fn a_light_tenant_waits_for_at_most_one_start_of_a_heavy_one() {
        for slots in [1, 2, 4] {
            let mut p: Pool<Run, u32> = Pool::new(config(slots, 1000, 0));
            let mut running: VecDeque<u64> = VecDeque::new();
            for id in 0..(slots as u64 + 200) {
                match p.admit(id, t("heavy"), (id, "heavy"), 0, 32) {
                    Admission::Start(_) => running.push_back(id),
                    other => assert_eq!(other, Admission::Queued),
                }
            }
            for round in 0..3u64 {
                let light = 10_000 + round;
                assert_eq!(p.admit(light, t("light"), (light, "light"), 0, 32), Admission::Queued);
                let mut heavy_starts_first = 0;
                loop {
                    p.finished(running.pop_front().unwrap(), None, false);
                    let (id, label) = p.next_to_start().expect("heavy still has runs queued");
                    running.push_back(id);
                    if label == "light" {
                        break;
                    }
                    heavy_starts_first += 1;
                }
                // Plain FIFO would make it wait for all 200 heavy runs queued before it.
                assert_eq!(heavy_starts_first, 1, "{slots} slots, round {round}");
            }
        }
    }

    #[test]
    fn a_full_queue_makes_room_from_the_tenant_holding_the_most() {
        let mut p: Pool<Run, u32> = Pool::new(config(1, 5, 0));
        p.admit(1, t("heavy"), (1, "h1"), 0, 32);
        for (id, label) in [(2, "h2"), (3, "h3"), (4, "h4"), (5, "h5"), (6, "h6")] {
            assert_eq!(p.admit(id, t("heavy"), (id, label), 0, 32), Admission::Queued, "one tenant may fill the queue");
        }
        let Admission::Refused(_, f) = p.admit(7, t("heavy"), (7, "h7"), 0, 32) else { panic!("a full queue refuses its holder") };
        assert_eq!(f.message, "The engine's queue is full (5 waiting); try again later");
        // Another tenant takes the place of heavy's newest queued run...
        let Admission::QueuedInPlaceOf(out, f) = p.admit(8, t("light"), (8, "l8"), 0, 32) else { panic!("light is locked out") };
        assert_eq!((out, f.kind), ((6, "h6"), ErrorKind::Overloaded));
        assert!(f.message.starts_with("The engine's queue is full (5 waiting) and this run's tenant held the most"), "{}", f.message);
        assert!(matches!(p.admit(9, t("light"), (9, "l9"), 0, 32), Admission::QueuedInPlaceOf((5, "h5"), _)));
        // ...until one more would give it more than heavy (3 against 2): tenants one apart
        // do not push each other out.
        assert_eq!(kind(&p.admit(10, t("light"), (10, "l10"), 0, 32)), Some(ErrorKind::Overloaded));
        assert_eq!(kind(&p.admit(11, t("heavy"), (11, "h11"), 0, 32)), Some(ErrorKind::Overloaded));
        assert_eq!((counts_of(&p, &t("heavy")).unwrap().queued, counts_of(&p, &t("light")).unwrap().queued), (3, 2));
        assert!(matches!(p.admit(12, t("x"), (12, "x12"), 0, 32), Admission::QueuedInPlaceOf((4, "h4"), _)));
        // On a tie (2 and 2), the tenant served last (light joined the rotation after
        // heavy) gives way.
        assert!(matches!(p.admit(13, t("y"), (13, "y13"), 0, 32), Admission::QueuedInPlaceOf((9, "l9"), _)));
        assert_eq!(p.queued(), 5);
        // Pushed-out runs never held a slot: not counted as failed, anywhere.
        assert!(p.counters().failed.is_empty());
        assert!(p.tenants().iter().all(|c| c.failed.is_empty()));
        assert_eq!(serve_one_at_a_time(&mut p, 1), ["h2", "l8", "x12", "y13", "h3"]);
    }

    #[test]
    fn a_queue_of_one_never_pushes_out() {
        let mut p: Pool<Run, u32> = Pool::new(config(1, 1, 0));
        p.admit(1, t("a"), (1, "a"), 0, 32);
        assert_eq!(p.admit(2, t("a"), (2, "a"), 0, 32), Admission::Queued);
        assert_eq!(kind(&p.admit(3, t("b"), (3, "b"), 0, 32)), Some(ErrorKind::Overloaded));
    }

    #[test]
    fn an_aborted_queued_run_leaves_its_tenants_line_and_turn() {
        let mut p: Pool<Run, u32> = Pool::new(config(1, 10, 0));
        p.admit(1, t("a"), (1, "a0"), 0, 32);
        for (id, tenant, label) in [(2, "a", "a1"), (3, "b", "b1"), (4, "c", "c1"), (5, "b", "b2")] {
            p.admit(id, t(tenant), (id, label), 0, 32);
        }
        assert_eq!(p.remove_queued(3), Some((3, "b1")));
        assert_eq!(counts_of(&p, &t("b")).unwrap().queued, 1);
        assert_eq!(p.remove_queued(5), Some((5, "b2")));
        assert_eq!(p.remove_queued(5), None);
        assert_eq!(p.remove_queued(1), None, "a running run is not in the queue");
        assert_eq!(p.queued(), 2);
        let b = counts_of(&p, &t("b")).unwrap();
        assert_eq!((b.queued, b.running, b.completed), (0, 0, 0), "an aborted queued run is not counted");
        // b left the rotation: its next run joins behind c instead of taking its old turn.
        p.admit(6, t("b"), (6, "b3"), 0, 32);
        assert_eq!(serve_one_at_a_time(&mut p, 1), ["a1", "c1", "b3"]);
    }

    #[test]
    fn shutdown_drains_every_tenant_in_serving_order() {
        let mut p: Pool<Run, u32> = Pool::new(config(1, 10, 0));
        p.admit(1, t("a"), (1, "a0"), 0, 32);
        for (id, tenant, label) in [(2, "a", "a1"), (3, "a", "a2"), (4, "b", "b1"), (5, "", "s1")] {
            let tenant = if tenant.is_empty() { Tenant::SHARED } else { t(tenant) };
            p.admit(id, tenant, (id, label), 0, 32);
        }
        let (queued, running) = p.shutdown();
        assert_eq!(queued.iter().map(|r| r.1).collect::<Vec<_>>(), ["a1", "b1", "s1", "a2"]);
        assert_eq!(running, [(1, "a0")]);
        assert_eq!(p.queued(), 0);
        assert!(p.tenants().iter().all(|c| c.queued == 0));
        assert_eq!(counts_of(&p, &t("a")).unwrap().running, 1);
        p.finished(1, Some(ErrorKind::Aborted), false);
        assert_eq!(p.next_to_start(), None);
        assert_eq!(counts_of(&p, &t("a")).unwrap().failed.get(&ErrorKind::Aborted), Some(&1));
    }

    #[test]
    fn counts_are_kept_per_tenant_and_runs_without_one_share_one() {
        let mut p: Pool<Run, u32> = Pool::new(config(2, 10, 0));
        p.admit(1, Tenant::SHARED, (1, "s"), 0, 32);
        p.admit(2, Tenant::from(None), (2, "s"), 0, 32);
        p.admit(3, Tenant::from(Some("b")), (3, "b"), 0, 32);
        p.admit(4, t("a"), (4, "a"), 0, 32);
        p.admit(5, t("a"), (5, "a"), 0, 32);
        fn row(c: &TenantCounts) -> (Option<&str>, usize, usize, u64) {
            (c.tenant.name(), c.queued, c.running, c.completed)
        }
        assert_eq!(p.tenants().iter().map(row).collect::<Vec<_>>(), [(None, 0, 2, 0), (Some("a"), 2, 0, 0), (Some("b"), 1, 0, 0)]);
        p.finished(1, None, false);
        assert_eq!(p.next_to_start(), Some((3, "b")), "b queued before a");
        p.finished(2, Some(ErrorKind::Timeout), false);
        assert_eq!(p.next_to_start(), Some((4, "a")));
        p.finished(3, Some(ErrorKind::MemoryLimit), false);
        assert_eq!(p.next_to_start(), Some((5, "a")));
        p.forget(4); // took a slot, never ran: not counted
        p.finished(5, None, false);
        let shared = counts_of(&p, &Tenant::SHARED).unwrap();
        assert_eq!((shared.queued, shared.running, shared.completed), (0, 0, 1));
        assert_eq!(shared.failed, HashMap::from([(ErrorKind::Timeout, 1)]));
        assert_eq!(counts_of(&p, &t("b")).unwrap().failed, HashMap::from([(ErrorKind::MemoryLimit, 1)]));
        let a = counts_of(&p, &t("a")).unwrap();
        assert_eq!((a.queued, a.running, a.completed, a.failed.len()), (0, 0, 1, 0));
        assert_eq!((p.counters().completed, p.counters().failed.values().sum::<u64>()), (2, 2));
    }

    #[test]
    fn tenant_counts_stay_bounded_when_every_run_names_a_new_tenant() {
        let (slots, queue) = (2, 8);
        let bound = IDLE_TENANTS_KEPT + slots + queue;
        let mut p: Pool<u64, u32> = Pool::new(config(slots, queue, 0));
        assert_eq!(p.admit(0, t("slow"), 0, 0, 32), Admission::Start(0));
        // Runs that start and end, each under a new name.
        for id in 1..5_000u64 {
            assert_eq!(p.admit(id, t(&format!("t{id}")), id, 0, 32), Admission::Start(id));
            p.finished(id, None, false);
            assert!(p.tenants.records.len() <= bound);
        }
        let kept = p.tenants();
        assert_eq!(kept.len(), IDLE_TENANTS_KEPT + 1);
        let named = |n: &str| kept.iter().find(|c| c.tenant.name() == Some(n)).cloned();
        assert_eq!(named("slow").map(|c| c.running), Some(1), "a tenant with a run running is never forgotten");
        assert_eq!(named("t4999").map(|c| c.completed), Some(1), "the latest idle tenants keep their counts");
        assert!(named(&format!("t{}", 5_000 - IDLE_TENANTS_KEPT)).is_some());
        assert!(named(&format!("t{}", 4_999 - IDLE_TENANTS_KEPT)).is_none(), "the longest idle is forgotten");
        // Runs that wait and are aborted, each under a new name, next to tenants waiting.
        assert_eq!(p.admit(5_000, t("slot"), 5_000, 0, 32), Admission::Start(5_000));
        for id in 5_001..5_008u64 {
            assert_eq!(p.admit(id, t(&format!("w{id}")), id, 0, 32), Admission::Queued);
        }
        for id in 6_000..11_000u64 {
            assert_eq!(p.admit(id, t(&format!("q{id}")), id, 0, 32), Admission::Queued);
            assert_eq!(p.remove_queued(id), Some(id));
            assert!(p.tenants.records.len() <= bound);
            assert!(p.queue.waiting.len() <= queue);
        }
        let kept = p.tenants();
        assert_eq!(kept.len(), IDLE_TENANTS_KEPT + 2 + 7);
        assert!(kept.iter().filter(|c| c.tenant.name().is_some_and(|n| n.starts_with('w'))).all(|c| c.queued == 1));
        // Once a forgotten tenant comes back, it starts from zero.
        p.finished(5_000, None, false);
        assert_eq!(p.next_to_start(), Some(5_001));
        p.finished(5_001, None, false);
        p.next_to_start();
        assert_eq!(p.admit(11_000, t("t1"), 11_000, 0, 32), Admission::Queued);
        assert_eq!(counts_of(&p, &t("t1")).map(|c| (c.queued, c.completed)), Some((1, 0)));
    }

    /// A small deterministic generator, so the interleaving test needs no crate.
    struct Lcg(u64);

    impl Lcg {
        fn below(&mut self, n: u64) -> u64 {
            self.0 = self.0.wrapping_mul(6364136223846793005).wrapping_add(1442695040888963407);
            (self.0 >> 33) % n
        }
    }

    #[test]
    fn no_tenant_starts_twice_while_another_waits_for_its_turn() {
        let names = [None, Some("heavy"), Some("b"), Some("c"), Some("d")];
        let mut p: Pool<(u64, Tenant), u32> = Pool::new(config(2, 12, 0));
        let mut rng = Lcg(17);
        let mut running: Vec<(u64, Tenant)> = Vec::new();
        let mut queued: HashMap<Tenant, Vec<u64>> = HashMap::new();
        // Per waiting tenant: who started since it joined the rotation or last started.
        let mut started_since: HashMap<Tenant, Vec<Tenant>> = HashMap::new();
        let (mut pushed_out, mut refused, mut starts) = (0, 0, 0);
        fn on_start(who: &Tenant, started_since: &mut HashMap<Tenant, Vec<Tenant>>, still_waiting: bool) {
            for (waiting, seen) in started_since.iter_mut().filter(|(w, _)| *w != who) {
                assert!(!seen.contains(who), "{who:?} started twice while {waiting:?} waited");
                seen.push(who.clone());
            }
            started_since.remove(who);
            if still_waiting {
                started_since.insert(who.clone(), Vec::new());
            }
        }
        for id in 0..20_000u64 {
            match rng.below(10) {
                // Arrivals, half of them the heavy tenant's.
                0..=4 => {
                    let tenant = Tenant::from(if rng.below(2) == 0 { Some("heavy") } else { names[rng.below(5) as usize] });
                    let joins = queued.get(&tenant).is_none_or(Vec::is_empty);
                    match p.admit(id, tenant.clone(), (id, tenant.clone()), 0, 32) {
                        Admission::Start(run) => {
                            on_start(&tenant, &mut started_since, false);
                            running.push(run);
                        }
                        Admission::Refused(..) => refused += 1,
                        admission => {
                            if let Admission::QueuedInPlaceOf((out, owner), _) = admission {
                                pushed_out += 1;
                                let line = queued.get_mut(&owner).unwrap();
                                assert_eq!(line.pop(), Some(out), "the newest run of its tenant");
                            }
                            queued.entry(tenant.clone()).or_default().push(id);
                            if joins {
                                started_since.insert(tenant, Vec::new());
                            }
                        }
                    }
                }
                // An abort of a queued run.
                5 => {
                    let waiting: Vec<&Tenant> = queued.iter().filter(|(_, l)| !l.is_empty()).map(|(t, _)| t).collect();
                    if let Some(tenant) = waiting.get(rng.below(waiting.len().max(1) as u64) as usize).map(|t| (*t).clone()) {
                        let line = queued.get_mut(&tenant).unwrap();
                        let victim = line.remove(rng.below(line.len() as u64) as usize);
                        assert_eq!(p.remove_queued(victim), Some((victim, tenant.clone())));
                        if line.is_empty() {
                            started_since.remove(&tenant);
                        }
                    }
                }
                // A run ends; freed slots go to queued runs.
                _ => {
                    if running.is_empty() {
                        continue;
                    }
                    let (done, _) = running.swap_remove(rng.below(running.len() as u64) as usize);
                    p.finished(done, None, false);
                    while let Some((next, tenant)) = p.next_to_start() {
                        let line = queued.get_mut(&tenant).unwrap();
                        assert_eq!(line.first(), Some(&next), "each tenant's runs start oldest first");
                        line.remove(0);
                        starts += 1;
                        on_start(&tenant, &mut started_since, !line.is_empty());
                        running.push((next, tenant));
                    }
                }
            }
            // The counts agree with what the test saw.
            for c in p.tenants() {
                assert_eq!(c.queued, queued.get(&c.tenant).map_or(0, Vec::len), "{:?}", c.tenant);
                assert_eq!(c.running, running.iter().filter(|(_, t)| *t == c.tenant).count(), "{:?}", c.tenant);
            }
            assert_eq!(p.queued(), queued.values().map(Vec::len).sum::<usize>());
            assert!(p.queued() <= 12);
        }
        // The interleaving took every path.
        assert!(pushed_out > 50 && refused > 50 && starts > 1000, "{pushed_out} {refused} {starts}");
    }
}
