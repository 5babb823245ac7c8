use super::*;

fn config(max_concurrent: usize, max_queue: usize, warm_pool_size: usize) -> PoolConfig {
    PoolConfig {
        memory_mb: 128,
        max_concurrent,
        warm_pool_size,
        max_queue,
        max_queue_ms: None,
        max_open_sandboxes: 256,
        max_open_sandboxes_per_tenant: 64,
    }
}

/// Admission at time 0 with no stuck thread.
const NOW: AdmitAt = at(0);

const fn at(now_ms: u64) -> AdmitAt {
    AdmitAt { now_ms, quarantined: 0, max_quarantined: 32 }
}

fn stuck(quarantined: usize, max_quarantined: usize) -> AdmitAt {
    AdmitAt { now_ms: 0, quarantined, max_quarantined }
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
    assert_eq!(p.admit(1, Tenant::SHARED, "a", None, NOW), Admission::Start("a"));
    assert_eq!(p.admit(2, Tenant::SHARED, "b", None, NOW), Admission::Start("b"));
    assert_eq!(p.admit(3, Tenant::SHARED, "c", None, NOW), Admission::Queued);
    let refused = p.admit(4, Tenant::SHARED, "d", None, NOW);
    assert_eq!(kind(&refused), Some(ErrorKind::Overloaded));
    let Admission::Refused(back, f) = refused else { unreachable!() };
    assert_eq!(back, "d");
    assert!(f.message.contains("queue is full (1 waiting)"), "{}", f.message);
    assert_eq!((p.busy(), p.queued()), (2, 1));
}

#[test]
fn a_freed_slot_starts_the_oldest_queued_run() {
    let mut p = pool(1, 3);
    p.admit(1, Tenant::SHARED, "a", None, NOW);
    for (id, r) in [(2, "b"), (3, "c"), (4, "d")] {
        assert_eq!(p.admit(id, Tenant::SHARED, r, None, NOW), Admission::Queued);
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
    p.admit(1, Tenant::SHARED, "a", None, NOW);
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
    assert_eq!(p.admit(1, Tenant::SHARED, "a", None, stuck(2, 3)), Admission::Start("a"));
    let refused = p.admit(2, Tenant::SHARED, "b", None, stuck(3, 3));
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
    p.admit(1, Tenant::SHARED, "a", None, NOW);
    p.admit(2, Tenant::SHARED, "b", None, NOW);
    p.admit(3, Tenant::SHARED, "c", None, NOW);
    let (queued, running) = p.shutdown();
    assert_eq!(queued, vec!["b", "c"]);
    assert_eq!(running, vec!["a"]);
    assert_eq!(kind(&p.admit(4, Tenant::SHARED, "d", None, NOW)), Some(ErrorKind::Aborted));
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
    let any = |_: &u32| true;
    assert_eq!(p.take_warm(64, any), None, "another memory limit needs a cold isolate");
    assert_eq!(p.take_warm(128, any), Some((1, true)));
    p.count_start(true);
    p.count_start(false);
    assert_eq!((p.counters().warm_starts, p.counters().cold_starts), (1, 1));
    assert_eq!(p.take_warm(128, any), Some((2, true)));
    assert_eq!(p.take_warm(128, any), None);
}

#[test]
fn a_run_takes_the_oldest_warm_isolate_that_fits_it_else_the_oldest() {
    let mut p: Pool<&str, u32> = Pool::new(config(4, 4, 3));
    p.warm_to_create();
    for w in [1, 2, 3] {
        p.warm_ready(Some(w));
    }
    assert_eq!(p.take_warm(128, |w| w % 2 == 0), Some((2, true)), "the one that fits, not the oldest");
    assert_eq!(p.take_warm(128, |w| *w > 5), Some((1, false)), "none fits: the oldest, said not to fit");
    assert_eq!(p.take_warm(128, |_| true), Some((3, true)));
    assert_eq!(p.take_warm(128, |_| true), None);
}

#[test]
fn idle_means_no_slot_taken_and_only_quarantined_threads_left() {
    let mut p = pool(2, 0);
    assert!(p.is_idle());
    p.admit(1, Tenant::SHARED, "a", None, NOW);
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
    p.admit(2, Tenant::SHARED, "b", None, NOW);
    p.forget(2);
    assert!(p.is_idle());
    assert_eq!(p.counters().completed, 0);
}

// --- Persistent sandboxes: their runs hold slots, they do not ---

fn sandbox_counts(p: &Pool<&'static str, u32>, tenant: &Tenant) -> (usize, usize, usize) {
    p.tenants().into_iter().find(|c| &c.tenant == tenant).map_or((0, 0, 0), |c| (c.sandboxes, c.running, c.queued))
}

#[test]
fn idle_open_sandboxes_hold_no_slot_so_another_tenants_run_starts_at_once() {
    // The attack: tenant a opens three times as many sandboxes as there are slots and
    // leaves them idle; tenant b's one-shot run still gets a slot.
    let mut p = pool(2, 10);
    let a = Tenant::named("a");
    for id in 100..106 {
        assert_eq!(p.admit_sandbox(id, a.clone(), 0, 32), Ok(()));
    }
    assert_eq!((p.open_sandboxes(), p.busy()), (6, 0));
    assert_eq!(sandbox_counts(&p, &a), (6, 0, 0));
    assert_eq!(p.admit(1, Tenant::named("b"), "b1", None, NOW), Admission::Start("b1"));
    // A sandbox's run takes a slot like any run, and gives it back when it ends.
    assert_eq!(p.admit(2, a.clone(), "a-run", None, NOW), Admission::Start("a-run"));
    assert_eq!(sandbox_counts(&p, &a), (6, 1, 0));
    assert_eq!(p.admit(3, a.clone(), "a-run2", None, NOW), Admission::Queued, "both slots are held by runs");
    p.finished(2, None, false);
    assert_eq!(p.next_to_start(), Some("a-run2"));
    p.finished(3, Some(ErrorKind::Runtime), false);
    p.finished(1, None, false);
    assert_eq!(p.busy(), 0);
    assert!(!p.is_idle(), "sandboxes are open");
    for id in 100..106 {
        assert!(p.sandbox_closed(id));
    }
    assert!(!p.sandbox_closed(100), "counted once");
    assert!(p.is_idle());
    assert_eq!(sandbox_counts(&p, &a), (0, 0, 0));
}

#[test]
fn sandbox_runs_wait_in_the_fair_queue_with_one_shot_runs() {
    let mut p: Pool<Run, u32> = Pool::new(config(1, 10, 0));
    p.admit_sandbox(100, t("a"), 0, 32).unwrap();
    assert_eq!(p.admit(1, t("a"), (1, "a-sandbox-1"), None, NOW), Admission::Start((1, "a-sandbox-1")));
    for (id, tenant, label) in [(2, "a", "a-sandbox-2"), (3, "a", "a-oneshot"), (4, "b", "b1"), (5, "b", "b2")] {
        assert_eq!(p.admit(id, t(tenant), (id, label), None, NOW), Admission::Queued);
    }
    // The sandbox's tenant takes its turns like any other: b waits for one start of a.
    assert_eq!(serve_one_at_a_time(&mut p, 1), ["a-sandbox-2", "b1", "a-oneshot", "b2"]);
}

#[test]
fn a_sandbox_run_counts_like_any_run_and_its_tenant_is_kept_while_a_sandbox_is_open() {
    let mut p = pool(2, 4);
    let tenant = Tenant::named("t");
    p.admit_sandbox(5, tenant.clone(), 0, 32).unwrap();
    p.admit(1, tenant.clone(), "r1", None, NOW);
    p.admit(2, tenant.clone(), "r2", None, NOW);
    p.finished(1, None, false);
    p.finished(2, Some(ErrorKind::Timeout), false);
    assert_eq!(p.counters().completed, 1);
    assert_eq!(p.counters().failed.get(&ErrorKind::Timeout), Some(&1));
    let c = p.tenants().into_iter().find(|c| c.tenant == tenant).unwrap();
    assert_eq!((c.sandboxes, c.running, c.completed, c.failed.get(&ErrorKind::Timeout).copied()), (1, 0, 1, Some(1)));
    // Other tenants come and go by the hundreds: a tenant with a sandbox open is never
    // forgotten, however long it has been idle.
    for id in 10..(10 + 2 * IDLE_TENANTS_KEPT as u64) {
        p.admit(id, t(&format!("n{id}")), "x", None, NOW);
        p.finished(id, None, false);
    }
    assert_eq!(sandbox_counts(&p, &tenant).0, 1);
    // Closing is not an outcome.
    assert!(p.sandbox_closed(5));
    assert_eq!((p.counters().completed - 2 * IDLE_TENANTS_KEPT as u64, p.counters().failed.values().sum::<u64>()), (1, 1));
}

#[test]
fn a_stuck_sandbox_run_counts_its_thread_once() {
    let mut p = pool(1, 0);
    p.admit_sandbox(7, Tenant::named("t"), 0, 32).unwrap();
    p.thread_started(); // the sandbox's thread
    assert_eq!(p.admit(1, Tenant::named("t"), "stuck", None, NOW), Admission::Start("stuck"));
    // The run ignored termination: it gives its slot back as quarantined; the sandbox closes.
    p.finished(1, Some(ErrorKind::Timeout), true);
    assert!(p.sandbox_closed(7));
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
fn open_sandboxes_are_bounded_per_engine_and_per_named_tenant_with_typed_refusals() {
    let mut p: Pool<&str, u32> = Pool::new(PoolConfig { max_open_sandboxes: 5, max_open_sandboxes_per_tenant: 2, ..config(1, 4, 0) });
    let (a, b) = (Tenant::named("a"), Tenant::named("b"));
    assert_eq!(p.admit_sandbox(1, a.clone(), 0, 32), Ok(()));
    assert_eq!(p.admit_sandbox(2, a.clone(), 0, 32), Ok(()));
    let refused = p.admit_sandbox(3, a.clone(), 0, 32).unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Overloaded);
    assert_eq!(
        refused.message,
        "Tenant 'a' has 2 persistent sandboxes open, at most maxOpenSandboxesPerTenant (2); close one of them or try again later"
    );
    // Another tenant is not held up by a's bound.
    assert_eq!(p.admit_sandbox(4, b.clone(), 0, 32), Ok(()));
    // Sandboxes naming no tenant are the embedder's own: only the engine's bound counts them.
    assert_eq!(p.admit_sandbox(5, Tenant::SHARED, 0, 32), Ok(()));
    assert_eq!(p.admit_sandbox(6, Tenant::SHARED, 0, 32), Ok(()));
    let refused = p.admit_sandbox(7, Tenant::SHARED, 0, 32).unwrap_err();
    assert_eq!(refused.kind, ErrorKind::Overloaded);
    assert_eq!(refused.message, "The engine has 5 persistent sandboxes open, at most maxOpenSandboxes (5); close one or try again later");
    assert_eq!(p.admit_sandbox(8, b.clone(), 0, 32).unwrap_err().message, refused.message, "the engine's bound comes first");
    // Refusals count nothing; a close makes room for its own tenant and for the engine.
    assert_eq!((p.open_sandboxes(), sandbox_counts(&p, &a).0), (5, 2));
    assert!(p.sandbox_closed(1));
    assert_eq!(p.admit_sandbox(9, a.clone(), 0, 32), Ok(()));
    assert!(p.admit_sandbox(10, a.clone(), 0, 32).is_err());
    assert!(p.sandbox_closed(5));
    assert_eq!(p.admit_sandbox(11, b.clone(), 0, 32), Ok(()));
    let mut ids = p.sandbox_ids();
    ids.sort_unstable();
    assert_eq!(ids, [2, 4, 6, 9, 11]);
    // A bound of 1 per tenant still lets every tenant open one.
    let mut one: Pool<&str, u32> = Pool::new(PoolConfig { max_open_sandboxes: 3, max_open_sandboxes_per_tenant: 1, ..config(1, 4, 0) });
    assert!(one.admit_sandbox(1, a.clone(), 0, 32).is_ok() && one.admit_sandbox(2, b.clone(), 0, 32).is_ok());
    assert!(one.admit_sandbox(3, a, 0, 32).is_err());
    assert_eq!(default_max_open_sandboxes_per_tenant(256), 64);
    assert_eq!(default_max_open_sandboxes_per_tenant(3), 1, "at least 1");
}

// --- Queue deadlines (maxQueueMs) ---

fn deadline_pool(slots: usize, engine_max_queue_ms: Option<u64>) -> Pool<Run, u32> {
    Pool::new(PoolConfig { max_queue_ms: engine_max_queue_ms, ..config(slots, 100, 0) })
}

#[test]
fn a_queued_run_fails_at_its_queue_deadline_not_before_and_typed() {
    let mut p = deadline_pool(1, Some(500));
    assert_eq!(p.admit(1, t("busy"), (1, "busy"), None, at(0)), Admission::Start((1, "busy")));
    assert_eq!(p.admit(2, t("b"), (2, "b"), None, at(10)), Admission::Queued);
    assert_eq!(p.admit(3, t("c"), (3, "c"), Some(100), at(20)), Admission::Queued, "its own deadline wins over the engine's");
    assert_eq!(p.next_queue_deadline(), Some(120));
    assert!(p.expire_queued(119).is_empty());
    let expired = p.expire_queued(130);
    assert_eq!(expired.len(), 1);
    let ((id, _), failure) = &expired[0];
    assert_eq!(*id, 3);
    assert_eq!(failure.kind, ErrorKind::Overloaded);
    assert_eq!(
        failure.message,
        "Every isolate slot of the engine is taken (1 of 1, 1 runs waiting) and this run waited 110 ms for one, past its maxQueueMs of 100 ms; try again later, or raise maxQueueMs"
    );
    assert_eq!(p.next_queue_deadline(), Some(510));
    assert_eq!((p.queued(), counts_of(&p, &t("c")).map(|c| c.queued)), (1, Some(0)));
    // Never counted as failed: it never held a slot.
    assert!(p.counters().failed.is_empty());
    assert_eq!(p.counters().queue_expired, 1);
    // A slot freed before the deadline: the run starts and its deadline is gone.
    p.finished(1, None, false);
    assert_eq!(p.next_to_start(), Some((2, "b")));
    assert_eq!(p.next_queue_deadline(), None);
    assert!(p.expire_queued(10_000).is_empty());
}

#[test]
fn max_queue_ms_0_means_start_now_or_fail_and_none_means_wait_as_long_as_it_takes() {
    let mut p = deadline_pool(1, None);
    assert_eq!(p.admit(1, t("a"), (1, "a"), Some(0), NOW), Admission::Start((1, "a")), "a free slot: it starts");
    let Admission::Refused(_, failure) = p.admit(2, t("b"), (2, "b"), Some(0), NOW) else { panic!("it may not wait") };
    assert_eq!(failure.kind, ErrorKind::Overloaded);
    assert!(failure.message.contains("this run may not wait for one (maxQueueMs 0)"), "{}", failure.message);
    // No deadline of its own and none of the engine's (a sandbox host's pool): it waits.
    assert_eq!(p.admit(3, t("c"), (3, "c"), None, NOW), Admission::Queued);
    assert_eq!(p.next_queue_deadline(), None);
    assert!(p.expire_queued(u64::MAX).is_empty());
    assert_eq!(p.queued(), 1);
}

#[test]
fn deadlines_leave_with_their_runs_however_they_leave_the_queue() {
    let mut p: Pool<Run, u32> = Pool::new(PoolConfig { max_queue_ms: Some(1000), ..config(1, 3, 0) });
    p.admit(1, t("a"), (1, "a"), None, NOW);
    p.admit(2, t("a"), (2, "a2"), None, at(1));
    p.admit(3, t("a"), (3, "a3"), None, at(2));
    p.admit(4, t("a"), (4, "a4"), None, at(3));
    assert_eq!(p.next_queue_deadline(), Some(1001));
    // Aborted.
    assert_eq!(p.remove_queued(2), Some((2, "a2")));
    assert_eq!(p.next_queue_deadline(), Some(1002));
    // Pushed out of the full queue by another tenant (a3, a4, b: full at 3).
    assert_eq!(p.admit(5, t("b"), (5, "b"), None, at(4)), Admission::Queued);
    assert!(matches!(p.admit(6, t("c"), (6, "c"), None, at(5)), Admission::QueuedInPlaceOf((4, "a4"), _)));
    // Expired: only the runs still queued, each once.
    let expired: Vec<u64> = p.expire_queued(1004).into_iter().map(|((id, _), _)| id).collect();
    assert_eq!(expired, [3, 5]);
    assert_eq!(p.next_queue_deadline(), Some(1005));
    // Shut down.
    p.shutdown();
    assert_eq!(p.next_queue_deadline(), None);
    assert!(p.expire_queued(u64::MAX).is_empty());
}

#[test]
fn no_run_waits_past_its_deadline_nor_fails_before_it() {
    let mut p: Pool<(u64, u64), u32> = Pool::new(PoolConfig { max_queue_ms: Some(300), ..config(2, 20, 0) });
    let mut rng = Lcg(5);
    let mut now = 0u64;
    let mut running: Vec<u64> = Vec::new();
    // Per queued run: (queued at, its wait limit).
    let mut queued: HashMap<u64, (u64, u64)> = HashMap::new();
    let (mut expired_count, mut started) = (0, 0);
    for id in 0..5_000u64 {
        now += rng.below(40);
        for ((run, since), failure) in p.expire_queued(now) {
            let (at, max) = queued.remove(&run).expect("a queued run");
            assert_eq!(at, since);
            assert!(now - at >= max, "run {run} expired after {} ms of its {max}", now - at);
            assert_eq!(failure.kind, ErrorKind::Overloaded);
            expired_count += 1;
        }
        // Whoever is still queued is within its deadline.
        for (run, (at, max)) in &queued {
            assert!(now - at < *max, "run {run} waited {} ms past its {max}", now - at);
        }
        if rng.below(3) == 0 && !running.is_empty() {
            let done = running.swap_remove(rng.below(running.len() as u64) as usize);
            p.finished(done, None, false);
            while let Some((next, _)) = p.next_to_start() {
                queued.remove(&next).expect("a queued run");
                running.push(next);
                started += 1;
            }
        }
        let own = [None, Some(50), Some(1000)][rng.below(3) as usize];
        let tenant = t(["a", "b", "c"][rng.below(3) as usize]);
        match p.admit(id, tenant, (id, now), own, at(now)) {
            Admission::Start(_) => running.push(id),
            Admission::Queued => {
                queued.insert(id, (now, own.unwrap_or(300)));
            }
            Admission::QueuedInPlaceOf((out, _), _) => {
                queued.remove(&out);
                queued.insert(id, (now, own.unwrap_or(300)));
            }
            Admission::Refused(..) => {}
        }
        assert_eq!(p.next_queue_deadline(), queued.values().map(|(at, max)| at + max).min());
    }
    assert!(expired_count > 100 && started > 100, "{expired_count} {started}");
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
    assert_eq!(p.admit(1, t("a"), (1, "a0"), None, NOW), Admission::Start((1, "a0")));
    for (id, tenant, label) in [(2, "a", "a1"), (3, "a", "a2"), (4, "a", "a3"), (5, "b", "b1"), (6, "b", "b2"), (7, "c", "c1")] {
        assert_eq!(p.admit(id, t(tenant), (id, label), None, NOW), Admission::Queued);
    }
    assert_eq!(serve_one_at_a_time(&mut p, 1), ["a1", "b1", "c1", "a2", "b2", "a3"]);
}

#[test]
fn a_light_tenant_waits_for_at_most_one_start_of_a_heavy_one() {
    for slots in [1, 2, 4] {
        let mut p: Pool<Run, u32> = Pool::new(config(slots, 1000, 0));
        let mut running: VecDeque<u64> = VecDeque::new();
        for id in 0..(slots as u64 + 200) {
            match p.admit(id, t("heavy"), (id, "heavy"), None, NOW) {
                Admission::Start(_) => running.push_back(id),
                other => assert_eq!(other, Admission::Queued),
            }
        }
        for round in 0..3u64 {
            let light = 10_000 + round;
            assert_eq!(p.admit(light, t("light"), (light, "light"), None, NOW), Admission::Queued);
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
    p.admit(1, t("heavy"), (1, "h1"), None, NOW);
    for (id, label) in [(2, "h2"), (3, "h3"), (4, "h4"), (5, "h5"), (6, "h6")] {
        assert_eq!(p.admit(id, t("heavy"), (id, label), None, NOW), Admission::Queued, "one tenant may fill the queue");
    }
    let Admission::Refused(_, f) = p.admit(7, t("heavy"), (7, "h7"), None, NOW) else { panic!("a full queue refuses its holder") };
    assert_eq!(f.message, "The engine's queue is full (5 waiting); try again later");
    // Another tenant takes the place of heavy's newest queued run...
    let Admission::QueuedInPlaceOf(out, f) = p.admit(8, t("light"), (8, "l8"), None, NOW) else { panic!("light is locked out") };
    assert_eq!((out, f.kind), ((6, "h6"), ErrorKind::Overloaded));
    assert!(f.message.starts_with("The engine's queue is full (5 waiting) and this run's tenant held the most"), "{}", f.message);
    assert!(matches!(p.admit(9, t("light"), (9, "l9"), None, NOW), Admission::QueuedInPlaceOf((5, "h5"), _)));
    // ...until one more would give it more than heavy (3 against 2): tenants one apart
    // do not push each other out.
    assert_eq!(kind(&p.admit(10, t("light"), (10, "l10"), None, NOW)), Some(ErrorKind::Overloaded));
    assert_eq!(kind(&p.admit(11, t("heavy"), (11, "h11"), None, NOW)), Some(ErrorKind::Overloaded));
    assert_eq!((counts_of(&p, &t("heavy")).unwrap().queued, counts_of(&p, &t("light")).unwrap().queued), (3, 2));
    assert!(matches!(p.admit(12, t("x"), (12, "x12"), None, NOW), Admission::QueuedInPlaceOf((4, "h4"), _)));
    // On a tie (2 and 2), the tenant served last (light joined the rotation after
    // heavy) gives way.
    assert!(matches!(p.admit(13, t("y"), (13, "y13"), None, NOW), Admission::QueuedInPlaceOf((9, "l9"), _)));
    assert_eq!(p.queued(), 5);
    // Pushed-out runs never held a slot: not counted as failed, anywhere.
    assert!(p.counters().failed.is_empty());
    assert!(p.tenants().iter().all(|c| c.failed.is_empty()));
    assert_eq!(serve_one_at_a_time(&mut p, 1), ["h2", "l8", "x12", "y13", "h3"]);
}

#[test]
fn a_queue_of_one_never_pushes_out() {
    let mut p: Pool<Run, u32> = Pool::new(config(1, 1, 0));
    p.admit(1, t("a"), (1, "a"), None, NOW);
    assert_eq!(p.admit(2, t("a"), (2, "a"), None, NOW), Admission::Queued);
    assert_eq!(kind(&p.admit(3, t("b"), (3, "b"), None, NOW)), Some(ErrorKind::Overloaded));
}

#[test]
fn an_aborted_queued_run_leaves_its_tenants_line_and_turn() {
    let mut p: Pool<Run, u32> = Pool::new(config(1, 10, 0));
    p.admit(1, t("a"), (1, "a0"), None, NOW);
    for (id, tenant, label) in [(2, "a", "a1"), (3, "b", "b1"), (4, "c", "c1"), (5, "b", "b2")] {
        p.admit(id, t(tenant), (id, label), None, NOW);
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
    p.admit(6, t("b"), (6, "b3"), None, NOW);
    assert_eq!(serve_one_at_a_time(&mut p, 1), ["a1", "c1", "b3"]);
}

#[test]
fn shutdown_drains_every_tenant_in_serving_order() {
    let mut p: Pool<Run, u32> = Pool::new(config(1, 10, 0));
    p.admit(1, t("a"), (1, "a0"), None, NOW);
    for (id, tenant, label) in [(2, "a", "a1"), (3, "a", "a2"), (4, "b", "b1"), (5, "", "s1")] {
        let tenant = if tenant.is_empty() { Tenant::SHARED } else { t(tenant) };
        p.admit(id, tenant, (id, label), None, NOW);
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
    p.admit(1, Tenant::SHARED, (1, "s"), None, NOW);
    p.admit(2, Tenant::from(None), (2, "s"), None, NOW);
    p.admit(3, Tenant::from(Some("b")), (3, "b"), None, NOW);
    p.admit(4, t("a"), (4, "a"), None, NOW);
    p.admit(5, t("a"), (5, "a"), None, NOW);
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
    assert_eq!(p.admit(0, t("slow"), 0, None, NOW), Admission::Start(0));
    // Runs that start and end, each under a new name.
    for id in 1..5_000u64 {
        assert_eq!(p.admit(id, t(&format!("t{id}")), id, None, NOW), Admission::Start(id));
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
    assert_eq!(p.admit(5_000, t("slot"), 5_000, None, NOW), Admission::Start(5_000));
    for id in 5_001..5_008u64 {
        assert_eq!(p.admit(id, t(&format!("w{id}")), id, None, NOW), Admission::Queued);
    }
    for id in 6_000..11_000u64 {
        assert_eq!(p.admit(id, t(&format!("q{id}")), id, None, NOW), Admission::Queued);
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
    assert_eq!(p.admit(11_000, t("t1"), 11_000, None, NOW), Admission::Queued);
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
                match p.admit(id, tenant.clone(), (id, tenant.clone()), None, NOW) {
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
