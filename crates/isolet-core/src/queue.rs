//! The engine's scheduling and accounting, generic over what a run and a warm isolate
//! are, so every rule is testable without V8: admission (a concurrency cap, then a
//! bounded queue served round-robin across tenants, refusal when full or when too many
//! stuck threads run), queue deadlines (`maxQueueMs`), removal of a waiting run (abort
//! while queued), the bounds on open persistent sandboxes (per engine and per tenant),
//! per-tenant counts, the warm-pool target, warm/cold start counting, and thread
//! accounting for shutdown's "idle" test.
//!
//! Fairness rules (see [`AdmissionQueue`], [`Pool`] and [`IDLE_TENANTS_KEPT`]): one FIFO
//! per tenant, tenants served in turn; a full queue makes room by pushing out the newest
//! run of the tenant holding the most; no run waits past its queue deadline; slots are
//! held by runs only (a persistent sandbox's runs included), never by an idle sandbox;
//! per-tenant counts live while a tenant has runs queued or running or sandboxes open,
//! and for at most [`IDLE_TENANTS_KEPT`] idle tenants after that.
use std::collections::{BTreeMap, BTreeSet, HashMap, VecDeque};
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

/// How many tenants with nothing queued, running or open keep their counts (for
/// `stats()`); beyond that, the one idle longest is forgotten. Tenants with runs queued
/// or running, or sandboxes open, are always kept, and there are at most `max_queue +
/// max_concurrent + max_open_sandboxes` of those, so a caller naming a new tenant per run
/// cannot grow the counts without bound (each name is at most `options::MAX_TENANT_BYTES`
/// long).
pub const IDLE_TENANTS_KEPT: usize = 256;

/// What an engine reports of itself (`stats()`), in either isolation mode: counters kept
/// as runs come and go, and the counts derived when asked.
#[derive(Debug, Clone, Default)]
pub struct EngineStats {
    pub warm: usize,
    pub warming: usize,
    pub busy: usize,
    pub queued: usize,
    pub completed: u64,
    pub failed: HashMap<ErrorKind, u64>,
    pub warm_starts: u64,
    pub cold_starts: u64,
    pub threads: usize,
    pub quarantined: usize,
    pub tenants: Vec<TenantCounts>,
    /// Open persistent sandboxes (none holds a slot while idle).
    pub sandboxes: usize,
    /// `maxOpenSandboxes`, `maxOpenSandboxesPerTenant`.
    pub max_open_sandboxes: usize,
    pub max_open_sandboxes_per_tenant: usize,
    /// Runs that waited past their `maxQueueMs` and failed.
    pub queue_expired: u64,
}

/// One tenant's counts, as `Pool::tenants` reports them.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TenantCounts {
    pub tenant: Tenant,
    pub queued: usize,
    pub running: usize,
    /// Persistent sandboxes of the tenant open now.
    pub sandboxes: usize,
    /// Runs that ended, since the tenant was last forgotten (see [`IDLE_TENANTS_KEPT`]).
    pub completed: u64,
    pub failed: HashMap<ErrorKind, u64>,
}

#[derive(Debug, Default)]
struct TenantRecord {
    running: usize,
    sandboxes: usize,
    completed: u64,
    failed: HashMap<ErrorKind, u64>,
    /// Set while nothing of the tenant is queued, running or open: its key in
    /// `TenantBook::idle`.
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
    /// The record of `tenant`, which has a run queued or running, or a sandbox open, now
    /// (made if new).
    fn busy(&mut self, tenant: &Tenant) -> &mut TenantRecord {
        let record = self.records.entry(tenant.clone()).or_default();
        if let Some(stamp) = record.idle_since.take() {
            self.idle.remove(&stamp);
        }
        record
    }

    /// Marks `tenant` idle once it has nothing running or open and no run `queued`, then
    /// forgets the tenants idle longest beyond the cap.
    fn settle(&mut self, tenant: &Tenant, queued: usize) {
        let Some(record) = self.records.get_mut(tenant) else { return };
        if queued > 0 || record.running > 0 || record.sandboxes > 0 || record.idle_since.is_some() {
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

    /// Sandboxes of `tenant` open now.
    fn sandboxes_of(&self, tenant: &Tenant) -> usize {
        self.records.get(tenant).map_or(0, |r| r.sandboxes)
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
                "{quarantined} sandbox threads ignored termination and are still running at the lowest priority \
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
    /// `maxQueueMs`: how long a run may wait for a slot unless it says otherwise (see
    /// [`Pool::expire_queued`]); `None`: as long as it takes (a sandbox host's pool, whose
    /// runs the parent admitted already).
    pub max_queue_ms: Option<u64>,
    /// `maxOpenSandboxes`: persistent sandboxes open at once (see [`Pool::admit_sandbox`]).
    pub max_open_sandboxes: usize,
    /// `maxOpenSandboxesPerTenant`: of those, the most one named tenant may hold.
    pub max_open_sandboxes_per_tenant: usize,
}

/// `maxQueueMs` unless the engine says otherwise: how long a run waits for a slot before
/// it fails. A run queued behind a full engine of runs at the longest default wall limit
/// (an engine request's, 30 s) gets the first slot one of them frees within it; bursts of
/// short runs (runSandbox's default limit is 5 s) drain many times over in that time.
pub const DEFAULT_MAX_QUEUE_MS: u64 = 30_000;

/// `maxOpenSandboxes` unless the engine says otherwise. An idle open sandbox costs about
/// 2 MB (thread mode) or 10-16 MB of the machine's memory (process mode: a host process
/// each; see docs/budgets.md), so 256 of them fit a small machine in either mode.
pub const DEFAULT_MAX_OPEN_SANDBOXES: usize = 256;

/// `maxOpenSandboxesPerTenant` unless the engine says otherwise: a quarter of the
/// engine's bound (at least 1), so one tenant cannot hold every place.
pub fn default_max_open_sandboxes_per_tenant(max_open_sandboxes: usize) -> usize {
    (max_open_sandboxes / 4).max(1)
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
    /// Runs that waited in the queue past their `maxQueueMs` and failed (never counted as
    /// failed runs: they never held a slot).
    pub queue_expired: u64,
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

/// The moment a run asks for a slot: the engine's clock (ms from any fixed start, for
/// queue deadlines) and its stuck threads (see [`stuck_thread_refusal`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AdmitAt {
    pub now_ms: u64,
    pub quarantined: usize,
    pub max_quarantined: usize,
}

/// How long a queued run may wait, from when it was queued.
#[derive(Debug, Clone, Copy)]
struct QueueWait {
    since_ms: u64,
    max_ms: u64,
}

impl QueueWait {
    fn deadline(&self) -> u64 {
        self.since_ms.saturating_add(self.max_ms)
    }
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
///
/// **Slots are for runs.** A slot is held by a run while it runs, whether a one-shot run
/// or a run (or call) of a persistent sandbox, and every run is admitted the same way:
/// a free slot, else the fair queue. An open sandbox holds no slot while idle; open
/// sandboxes are bounded by their own counts, `maxOpenSandboxes` per engine and
/// `maxOpenSandboxesPerTenant` per named tenant, since what they cost is memory.
///
/// **Queue deadlines.** A queued run waits at most its `maxQueueMs` (else the engine's);
/// past it the backend's timer calls [`Pool::expire_queued`] and the run fails
/// (overloaded) instead of waiting on: a full engine answers late, never not at all.
#[derive(Debug)]
pub struct Pool<T, W> {
    config: PoolConfig,
    shutdown: bool,
    active: HashMap<u64, (Tenant, T)>,
    /// Open persistent sandboxes and their tenants (see `admit_sandbox`).
    sandboxes: HashMap<u64, Tenant>,
    queue: AdmissionQueue<T>,
    /// Queued runs with a deadline, soonest first, and their waits by id.
    deadlines: BTreeSet<(u64, u64)>,
    waits: HashMap<u64, QueueWait>,
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
            deadlines: BTreeSet::new(),
            waits: HashMap::new(),
            tenants: TenantBook::default(),
            warm: VecDeque::new(),
            counters: PoolCounters::default(),
        }
    }

    pub fn config(&self) -> &PoolConfig {
        &self.config
    }

    /// Admits run `id` of `tenant`: refused once shut down or when too many stuck threads
    /// run (`at`); started while a slot is free; else queued in its tenant's line, maybe in
    /// place of another tenant's run, or refused when the queue is full (the rules of
    /// [`AdmissionQueue`]) or when it may not wait at all (`maxQueueMs` 0). It waits at
    /// most `max_queue_ms` (`None`: the engine's). Refused, pushed-out and expired runs
    /// are not counted as failed: they never held a slot.
    pub fn admit(&mut self, id: u64, tenant: Tenant, run: T, max_queue_ms: Option<u64>, at: AdmitAt) -> Admission<T> {
        if self.shutdown {
            return Admission::Refused(run, Failure::new(ErrorKind::Aborted, "The sandbox engine is shut down"));
        }
        if let Some(failure) = stuck_thread_refusal(at.quarantined, at.max_quarantined) {
            return Admission::Refused(run, failure);
        }
        if self.active.len() < self.config.max_concurrent {
            self.tenants.busy(&tenant).running += 1;
            self.active.insert(id, (tenant, run.clone()));
            return Admission::Start(run);
        }
        let max_wait = max_queue_ms.or(self.config.max_queue_ms);
        if max_wait == Some(0) {
            return Admission::Refused(run, self.queue_deadline_failure(0, 0));
        }
        let full = format!("The engine's queue is full ({} waiting)", self.config.max_queue);
        match self.queue.push(id, tenant.clone(), run) {
            Ok(pushed_out) => {
                self.tenants.busy(&tenant);
                if let Some(max_ms) = max_wait {
                    let wait = QueueWait { since_ms: at.now_ms, max_ms };
                    self.deadlines.insert((wait.deadline(), id));
                    self.waits.insert(id, wait);
                }
                let Some(out) = pushed_out else { return Admission::Queued };
                self.forget_wait(out.id);
                self.settle(&out.tenant);
                let message =
                    format!("{full} and this run's tenant held the most of it; it made room for another tenant's run; try again later");
                Admission::QueuedInPlaceOf(out.item, Failure::new(ErrorKind::Overloaded, message))
            }
            Err(QueueFull(run)) => Admission::Refused(run, Failure::new(ErrorKind::Overloaded, format!("{full}; try again later"))),
        }
    }

    /// The failure of a run that waited `waited_ms` for a slot, past its `max_ms`.
    fn queue_deadline_failure(&self, waited_ms: u64, max_ms: u64) -> Failure {
        let (busy, slots, queued) = (self.active.len(), self.config.max_concurrent, self.queue.len());
        let wait = if max_ms == 0 {
            "may not wait for one (maxQueueMs 0)".to_string()
        } else {
            format!("waited {waited_ms} ms for one, past its maxQueueMs of {max_ms} ms")
        };
        Failure::new(
            ErrorKind::Overloaded,
            format!("Every isolate slot of the engine is taken ({busy} of {slots}, {queued} runs waiting) and this run {wait}; try again later, or raise maxQueueMs"),
        )
    }

    /// Takes out of the queue every run whose wait reached its deadline by `now_ms`, each
    /// with the failure to answer it with.
    pub fn expire_queued(&mut self, now_ms: u64) -> Vec<(T, Failure)> {
        let mut expired = Vec::new();
        while let Some(&(deadline, id)) = self.deadlines.first() {
            if deadline > now_ms {
                break;
            }
            let wait = self.waits.get(&id).copied();
            let Some(item) = self.remove_queued(id) else {
                self.deadlines.remove(&(deadline, id));
                continue;
            };
            let wait = wait.unwrap_or(QueueWait { since_ms: now_ms, max_ms: 0 });
            self.counters.queue_expired += 1;
            expired.push((item, self.queue_deadline_failure(now_ms.saturating_sub(wait.since_ms), wait.max_ms)));
        }
        expired
    }

    /// When the next queued run reaches its deadline (engine clock, ms), if one waits
    /// with a deadline: the backend's timer wakes then to call `expire_queued`.
    pub fn next_queue_deadline(&self) -> Option<u64> {
        self.deadlines.first().map(|&(deadline, _)| deadline)
    }

    /// Queued run `id` left the queue: its deadline goes too.
    fn forget_wait(&mut self, id: u64) {
        if let Some(wait) = self.waits.remove(&id) {
            self.deadlines.remove(&(wait.deadline(), id));
        }
    }

    /// Takes a waiting run out of line (aborted before it started).
    pub fn remove_queued(&mut self, id: u64) -> Option<T> {
        let removed = self.queue.remove(id)?;
        self.forget_wait(id);
        self.settle(&removed.tenant);
        Some(removed.item)
    }

    /// A warm isolate for a run needing `memory_mb`, if one matches and is ready: the
    /// oldest whose context `fits` the run, else the oldest (its thread makes a fresh
    /// isolate for the run: an isolate prepared in a shape runs no longer ask for would
    /// otherwise hold its place for good), with whether it fits. Count the start with
    /// `count_start` once the run is handed over.
    pub fn take_warm(&mut self, memory_mb: u32, fits: impl Fn(&W) -> bool) -> Option<(W, bool)> {
        if memory_mb != self.config.memory_mb {
            return None;
        }
        match self.warm.iter().position(fits) {
            Some(i) => self.warm.remove(i).map(|w| (w, true)),
            None => self.warm.pop_front().map(|w| (w, false)),
        }
    }

    pub fn count_start(&mut self, warm: bool) {
        if warm {
            self.counters.warm_starts += 1;
        } else {
            self.counters.cold_starts += 1;
        }
    }

    /// Run `id` gave its slot back: count its outcome (`failed`: its error kind) and its
    /// thread if quarantined. A run of a persistent sandbox too: its slot was its own.
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
        if self.shutdown || self.active.len() >= self.config.max_concurrent {
            return None;
        }
        let Queued { id, tenant, item } = self.queue.pop()?;
        self.forget_wait(id);
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

    /// Marks `tenant` idle if it has nothing queued, running or open (see
    /// [`IDLE_TENANTS_KEPT`]).
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
        for Queued { id, tenant, item } in self.queue.drain() {
            self.forget_wait(id);
            self.settle(&tenant);
            queued.push(item);
        }
        (queued, self.active.values().map(|(_, run)| run.clone()).collect())
    }

    pub fn is_shut_down(&self) -> bool {
        self.shutdown
    }

    /// No run holds a slot, no sandbox is open and every thread left is a quarantined one.
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

    /// Opens persistent sandbox `id` of `tenant`. It takes no slot (its runs do, through
    /// `admit`); it counts against `maxOpenSandboxes` and, for a named tenant,
    /// `maxOpenSandboxesPerTenant` until `sandbox_closed`. Runs naming no tenant are the
    /// embedder's own and share one count, the engine's: a caller that is to be bounded
    /// is given a tenant. Refused (overloaded, naming the bound) past either; refused once
    /// shut down or when too many stuck threads run, as runs are. Never queued.
    pub fn admit_sandbox(&mut self, id: u64, tenant: Tenant, quarantined: usize, max_quarantined: usize) -> Result<(), Failure> {
        if self.shutdown {
            return Err(Failure::new(ErrorKind::Aborted, "The sandbox engine is shut down"));
        }
        if let Some(failure) = stuck_thread_refusal(quarantined, max_quarantined) {
            return Err(failure);
        }
        let (open, max) = (self.sandboxes.len(), self.config.max_open_sandboxes);
        if open >= max {
            return Err(Failure::new(
                ErrorKind::Overloaded,
                format!("The engine has {open} persistent sandboxes open, at most maxOpenSandboxes ({max}); close one or try again later"),
            ));
        }
        if let Some(name) = tenant.name() {
            let (theirs, max) = (self.tenants.sandboxes_of(&tenant), self.config.max_open_sandboxes_per_tenant);
            if theirs >= max {
                return Err(Failure::new(
                    ErrorKind::Overloaded,
                    format!("Tenant '{name}' has {theirs} persistent sandboxes open, at most maxOpenSandboxesPerTenant ({max}); close one of them or try again later"),
                ));
            }
        }
        self.tenants.busy(&tenant).sandboxes += 1;
        self.sandboxes.insert(id, tenant);
        Ok(())
    }

    /// Sandbox `id` closed: it no longer counts as open. Counted once (false after).
    /// Not an outcome: its runs were counted, each once, as they gave their slots back.
    pub fn sandbox_closed(&mut self, id: u64) -> bool {
        let Some(tenant) = self.sandboxes.remove(&id) else { return false };
        if let Some(record) = self.tenants.records.get_mut(&tenant) {
            record.sandboxes = record.sandboxes.saturating_sub(1);
        }
        self.settle(&tenant);
        true
    }

    /// Open persistent sandboxes.
    pub fn open_sandboxes(&self) -> usize {
        self.sandboxes.len()
    }

    /// Ids of the open sandboxes (to close them at shutdown).
    pub fn sandbox_ids(&self) -> Vec<u64> {
        self.sandboxes.keys().copied().collect()
    }

    /// Per tenant with runs queued or running or sandboxes open, and the latest idle ones
    /// (at most [`IDLE_TENANTS_KEPT`]): its counts, the shared tenant first, then by name.
    pub fn tenants(&self) -> Vec<TenantCounts> {
        let mut all: Vec<TenantCounts> = self
            .tenants
            .records
            .iter()
            .map(|(tenant, r)| TenantCounts {
                tenant: tenant.clone(),
                queued: self.queue.queued_of(tenant),
                running: r.running,
                sandboxes: r.sandboxes,
                completed: r.completed,
                failed: r.failed.clone(),
            })
            .collect();
        all.sort_by(|a, b| a.tenant.cmp(&b.tenant));
        all
    }
}

#[cfg(test)]
mod tests;
