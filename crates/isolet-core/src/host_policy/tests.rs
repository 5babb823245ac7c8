use super::*;

#[test]
fn the_cpu_time_of_a_proc_stat_line() {
    // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
    let line = "4242 (node) R 1 4242 4242 0 -1 4194560 1000 0 0 0 250 31 0 0 20 0 9 0 100 1000 200";
    assert_eq!(cpu_ticks_of_stat(line), Some(281));
    // A name with spaces and parentheses of its own.
    let odd = "7 (a) b (c)) S 1 7 7 0 -1 0 0 0 0 0 12 3 0 0 20 0 1 0 5 6 7";
    assert_eq!(cpu_ticks_of_stat(odd), Some(15));
    assert_eq!(cpu_ticks_of_stat("7 (short) S 1 2"), None);
    assert_eq!(cpu_ticks_of_stat("no parenthesis"), None);
}

#[test]
fn a_memory_ended_run_has_the_hosts_figures() {
    assert_eq!(memory_end_stats(120.0, 470.0, 612, 100), (350.0, 512 << 20));
    // A clock read before the start, or an RSS below the ready one: never negative.
    assert_eq!(memory_end_stats(500.0, 470.0, 90, 100), (0.0, 0));
}

#[test]
fn a_hosts_queue_holds_every_run_the_parent_can_place_on_it() {
    // Runs placed one by one (shares first, then overflow, then last resort) until no
    // host takes one, with hosts being replaced (not serving) or draining: the most
    // one host ever holds is what its queue must take if none of its slots is free.
    for max_concurrent in [1usize, 2, 4, 8, 9, 32] {
        for processes in 1..=4usize {
            let per_host = max_concurrent.div_ceil(processes);
            for serving in 0..=processes {
                let mut hosts: Vec<HostView> = (0..processes)
                    // Past `serving`: draining, or starting (not serving yet) in turn.
                    .map(|i| HostView {
                        serving: i < serving || i % 2 == 0,
                        runs: 0,
                        warm: 0,
                        last_start: 0,
                        solo: false,
                        draining: i >= serving,
                        dedicated: false,
                    })
                    .collect();
                for placed in 0..max_concurrent {
                    let at = place(&hosts, per_host, false)
                        .or_else(|| place_overflow(&hosts, max_concurrent, false))
                        .or_else(|| place_last_resort(&hosts, max_concurrent, false));
                    let Some(at) = at else { break };
                    hosts[at].runs += 1;
                    hosts[at].last_start = placed as u64 + 1;
                }
                let most = hosts.iter().map(|h| h.runs).max().unwrap_or(0);
                assert!(most <= host_queue_size(max_concurrent), "{max_concurrent} slots, {processes} hosts: {most} on one");
            }
        }
    }
    assert_eq!(host_queue_size(0), 1);
}

fn lost(seen: bool, restarts: u32, elapsed: u64) -> LostRun {
    LostRun { seen_outside: seen, overdue: false, restarts, wall_time_ms: 5000, elapsed_ms: elapsed, alone: false }
}

#[test]
fn a_stopped_thread_is_given_up_on_after_the_grace_on_a_cpu_or_at_the_starved_limit() {
    // Before the grace: never.
    assert!(!give_up_on_stopped(WATCHDOG_GRACE_MS - 1, Some(WATCHDOG_GRACE_MS), STARVED_GRACE_MS));
    // A spinning thread: at the grace, as before.
    assert!(give_up_on_stopped(WATCHDOG_GRACE_MS, Some(WATCHDOG_GRACE_MS - 10), STARVED_GRACE_MS));
    // Starved (little CPU since termination): it may still be unwinding, up to the cap.
    assert!(!give_up_on_stopped(WATCHDOG_GRACE_MS + 300, Some(40), STARVED_GRACE_MS));
    assert!(give_up_on_stopped(STARVED_GRACE_MS, Some(40), STARVED_GRACE_MS));
    // A host's watchdog (cap = the grace) gives up at the grace whatever its CPU.
    assert!(give_up_on_stopped(WATCHDOG_GRACE_MS, Some(0), WATCHDOG_GRACE_MS));
    // No clock: the grace alone.
    assert!(give_up_on_stopped(WATCHDOG_GRACE_MS, None, STARVED_GRACE_MS));
    // Within the limit + 1 s the deadline promises.
    const { assert!(STARVED_GRACE_MS <= 1_000) };
}

#[test]
fn the_deadline_is_the_watchdogs_grace_plus_a_margin_within_one_second() {
    assert_eq!(deadline_grace_ms(), WATCHDOG_GRACE_MS + CHANNEL_MARGIN_MS);
    assert!(deadline_grace_ms() < 1000, "every run settles within its limit + 1 s");
    assert_eq!(run_deadline_ms(300), 300 + deadline_grace_ms());
    assert_eq!(run_deadline_ms(u64::MAX), u64::MAX);
}

#[test]
fn a_hosts_budget_is_its_base_plus_each_runs_allowance() {
    assert_eq!(run_allowance_mb(64), 160);
    assert_eq!(host_budget_mb(50, []), 50 + BASE_SLACK_MB);
    assert_eq!(host_budget_mb(50, [64, 128]), 50 + BASE_SLACK_MB + 160 + 288);
}

#[test]
fn hosts_run_below_the_parent_within_the_range_linux_allows() {
    assert_eq!(host_nice(0), HOST_NICENESS);
    assert_eq!(host_nice(-20), -20 + HOST_NICENESS);
    assert_eq!(host_nice(15), 19);
    assert_eq!(host_nice(i32::MAX), 19);
}

#[test]
fn a_stream_of_runs_that_end_at_once_lifts_the_budget_by_at_most_the_hosts_capacity() {
    let mut l = Lingering::default();
    // 500 runs of 64 MB ended within 100 ms in a host of 4 slots.
    for i in 0..500 {
        l.ended(64, 1000 + i / 5);
    }
    assert_eq!(host_budget_mb(10, l.current(1100, 4)), 10 + BASE_SLACK_MB + 4 * run_allowance_mb(64));
    // All 500 stay suspects for a memory end.
    assert_eq!(l.recently_ended(1100), 500);
}

#[test]
fn a_run_that_just_ended_keeps_its_allowance_for_a_while() {
    let mut l = Lingering::default();
    l.ended(64, 1000);
    l.ended(128, 1200);
    assert_eq!(l.current(1100, 8).collect::<Vec<_>>(), [128, 64]);
    assert_eq!(l.current(1000 + LINGER_MS, 8).collect::<Vec<_>>(), [128]);
    assert_eq!(l.current(1200 + LINGER_MS, 8).count(), 0);
    assert_eq!(host_budget_mb(10, l.current(1200 + LINGER_MS, 8).chain([64])), 10 + BASE_SLACK_MB + 160);
    // They stay suspects longer than they keep their allowance.
    assert_eq!(l.recently_ended(1200 + LINGER_MS), 2);
    assert_eq!(l.recently_ended(1000 + RECENTLY_ENDED_MS), 1);
    assert_eq!(l.current(1200 + RECENTLY_ENDED_MS, 8).count(), 0);
    assert_eq!(l.recently_ended(1200 + RECENTLY_ENDED_MS), 0);
    const { assert!(LINGER_MS < RECENTLY_ENDED_MS) };
}

#[test]
fn a_run_well_past_its_wall_limit_makes_its_host_suspect() {
    assert!(!suspect(300 + SUSPECT_AFTER_MS - 1, 300));
    assert!(suspect(300 + SUSPECT_AFTER_MS, 300));
    assert!(!suspect(u64::MAX - 1, u64::MAX));
    const { assert!(SUSPECT_AFTER_MS < WATCHDOG_GRACE_MS, "suspected before the host's watchdog gives up") };
}

#[test]
fn a_spare_host_stands_by_after_trouble() {
    assert_eq!(host_target(2, false), 2);
    assert_eq!(host_target(2, true), 3);
}

#[test]
fn polling_is_fast_only_while_runs_are_in_flight() {
    assert_eq!(poll_period_ms(0), POLL_IDLE_MS);
    assert_eq!(poll_period_ms(3), POLL_BUSY_MS);
}

#[test]
fn start_failures_retry_then_back_off_doubling_to_a_cap_and_are_forgiven_on_ready() {
    let mut s = Starts::default();
    assert_eq!(s.failed(), StartVerdict::Retry);
    assert_eq!(s.failed(), StartVerdict::Retry);
    assert_eq!(s.failed(), StartVerdict::GiveUp { after_ms: 1000 });
    assert_eq!(s.failed(), StartVerdict::GiveUp { after_ms: 2000 });
    assert_eq!(s.failed(), StartVerdict::GiveUp { after_ms: 4000 });
    for _ in 0..40 {
        s.failed();
    }
    assert_eq!(s.failed(), StartVerdict::GiveUp { after_ms: MAX_START_BACKOFF_MS });
    s.ready();
    assert_eq!(s.failed(), StartVerdict::Retry);
}

#[test]
fn replacements_are_rate_limited_after_a_burst() {
    let mut s = Starts::default();
    for _ in 0..RESTART_BURST {
        assert!(s.may_replace(0));
    }
    assert!(!s.may_replace(0));
    assert!(!s.may_replace(RESTART_PERIOD_MS - 1));
    assert!(s.may_replace(RESTART_PERIOD_MS));
    assert!(!s.may_replace(RESTART_PERIOD_MS));
    // A quiet while refills the whole burst, no more.
    let later = RESTART_PERIOD_MS * 1000;
    for _ in 0..RESTART_BURST {
        assert!(s.may_replace(later));
    }
    assert!(!s.may_replace(later));
}

#[test]
fn a_runs_frame_limit_covers_its_largest_message_and_logs() {
    let b = BridgeLimits::default();
    let limit = frame_limit(&b);
    assert!(limit >= b.max_output_bytes + b.max_log_bytes);
    assert_eq!(limit, b.max_output_bytes.max(b.max_message_bytes) + b.max_log_bytes + 8 * b.max_log_entries + FRAME_HEADROOM_BYTES);
    let huge = BridgeLimits { max_output_bytes: usize::MAX, ..b };
    assert_eq!(frame_limit(&huge), usize::MAX);
}

#[test]
fn health_frames_are_allowed_in_a_burst_then_per_period_and_per_done() {
    assert!(health_allowed(HEALTH_BURST, 0, 0));
    assert!(!health_allowed(HEALTH_BURST + 1, 0, 0));
    assert!(health_allowed(HEALTH_BURST + 1, 1, 0));
    assert!(health_allowed(HEALTH_BURST + 5, 0, 5 * HEALTH_PERIOD_MS));
    assert!(!health_allowed(HEALTH_BURST + 20_000, 0, 1000));
}

#[test]
fn the_event_budget_holds_a_host_to_what_its_runs_isolate_enforces() {
    let bridge = BridgeLimits {
        max_messages: 3,
        max_pending_host_calls: 2,
        max_pending_host_call_bytes: 100,
        max_log_entries: 2,
        ..BridgeLimits::default()
    };
    let mut b = EventBudget::new(bridge, true);
    assert!(!b.seen_outside());
    assert_eq!(b.started(), Ok(()));
    assert!(b.started().is_err(), "started once");
    assert!(!b.seen_outside(), "started is not seen outside");
    assert_eq!(b.host_call(1, 60), Ok(()));
    assert!(b.seen_outside());
    assert!(b.host_call(1, 1).is_err(), "an id already in flight");
    let mut b = EventBudget::new(bridge, true);
    b.host_call(1, 60).unwrap();
    assert!(b.host_call(2, 41).is_err(), "over maxPendingHostCallBytes");
    let mut b = EventBudget::new(bridge, true);
    b.host_call(1, 10).unwrap();
    b.host_call(2, 10).unwrap();
    assert!(b.answered(1));
    assert!(!b.answered(1), "answered once");
    b.host_call(3, 10).unwrap();
    assert!(b.host_call(4, 10).is_err(), "over maxMessages");
    let mut b = EventBudget::new(bridge, true);
    b.host_call(1, 1).unwrap();
    b.host_call(2, 1).unwrap();
    assert!(b.host_call(3, 1).is_err(), "over maxPendingHostCalls");
    let mut b = EventBudget::new(bridge, true);
    b.console(10).unwrap();
    b.console(10).unwrap();
    assert!(b.console(10).is_err(), "over maxLogEntries");
    let mut quiet = EventBudget::new(bridge, false);
    assert!(quiet.console(10).is_err(), "console events only when streamed");
    let mut d = EventBudget::new(bridge, false);
    let mut m = EventBudget::new(bridge, false).with_max_module_requests(2);
    m.module_request(1, 20).unwrap();
    m.module_request(2, 20).unwrap();
    assert!(m.module_request(3, 20).is_err(), "past maxModules");
    assert!(m.take_data_request(1), "answered like a data request");
    d.data_request(7, 20).unwrap();
    assert!(d.data_request(7, 20).is_err(), "a data request id waiting already");
    assert!(d.take_data_request(7));
    assert!(!d.take_data_request(7));
}

#[test]
fn the_event_budget_counts_the_values_of_host_call_arguments() {
    let bridge = BridgeLimits { max_message_values: 4, max_pending_host_call_values: 6, ..BridgeLimits::default() };
    // ['a', 'b'] (3 values) and ['a', 'b', 'c', 'd'] (5 values), as V8 writes them.
    let three = [0xff, 0x0f, b'A', 2, b'"', 1, b'a', b'"', 1, b'b', b'$', 0, 2];
    let five = [0xff, 0x0f, b'A', 4, b'"', 1, b'a', b'"', 1, b'b', b'"', 1, b'c', b'"', 1, b'd', b'$', 0, 4];
    let mut b = EventBudget::new(bridge, false);
    b.host_call(1, three.len()).unwrap();
    assert_eq!(b.host_call_values(1, &three), Ok(()));
    assert!(b.host_call_values(2, &five).is_err(), "over maxMessageValues");
    let mut b = EventBudget::new(bridge, false);
    b.host_call_values(1, &three).unwrap();
    b.host_call_values(2, &three).unwrap();
    assert!(b.host_call_values(3, &three).is_err(), "over maxPendingHostCallValues");
    let mut b = EventBudget::new(bridge, false);
    b.host_call(1, three.len()).unwrap();
    b.host_call_values(1, &three).unwrap();
    b.host_call(2, three.len()).unwrap();
    b.host_call_values(2, &three).unwrap();
    assert!(b.answered(1));
    assert_eq!(b.host_call_values(3, &three), Ok(()), "an answered call's values are released");
    // What they cost once built, with a memory limit too small for two of them.
    let one = tally(&three, Bounds { values: u64::MAX, cost: u64::MAX }).unwrap().cost;
    let mut b = EventBudget::new(BridgeLimits::default(), false);
    b.max_cost = one + one / 2;
    b.host_call_values(1, &three).unwrap();
    assert!(b.host_call_values(2, &three).is_err(), "in flight past the run's memory");
    assert_eq!(EventBudget::new(BridgeLimits::default(), false).max_cost, 6 * (64 << 20));
    assert!(b.host_call_values(4, &[0xff, 0x0f, b'Q']).is_err(), "unreadable");
}

fn host(runs: usize, warm: u32, last_start: u64) -> HostView {
    HostView { serving: true, runs, warm, last_start, solo: false, draining: false, dedicated: false }
}

#[test]
fn placement_prefers_warm_then_least_busy_then_idle_longest() {
    let hosts = [host(1, 0, 1), host(1, 1, 2), host(0, 0, 3)];
    assert_eq!(place(&hosts, 2, false), Some(1), "a warm isolate first");
    let hosts = [host(1, 0, 1), host(0, 0, 3), host(0, 0, 2)];
    assert_eq!(place(&hosts, 2, false), Some(2), "least busy, then idle longest");
    let full = [host(2, 1, 1), HostView { serving: false, ..host(0, 1, 0) }];
    assert_eq!(place(&full, 2, false), None, "full or not serving");
}

#[test]
fn a_run_that_must_run_alone_takes_only_an_empty_host_and_solo_hosts_take_nothing_else() {
    let hosts = [host(1, 1, 1), host(0, 0, 2)];
    assert_eq!(place(&hosts, 2, true), Some(1));
    let busy = [host(1, 1, 1), host(1, 0, 2)];
    assert_eq!(place(&busy, 2, true), None);
    let solo = [HostView { solo: true, ..host(1, 1, 1) }];
    assert_eq!(place(&solo, 4, false), None, "a solo host takes no new run");
    assert_eq!(solo_hosts_to_start(3, 1), 2);
    let full = [host(2, 0, 1), HostView { serving: false, ..host(0, 0, 2) }];
    assert_eq!(place(&full, 2, false), None);
    assert_eq!(place_overflow(&full, 8, false), Some(0), "a serving host takes more while another is replaced");
    assert_eq!(place_overflow(&full, 8, true), None);
    assert_eq!(place_overflow(&[host(8, 0, 1)], 8, false), None);
    let draining = [HostView { draining: true, ..host(1, 0, 1) }, HostView { serving: false, ..host(0, 0, 2) }];
    assert_eq!(place_overflow(&draining, 8, false), None, "a draining host takes no run");
    assert_eq!(place_last_resort(&draining, 8, false), Some(0), "unless nothing else serves");
    let mixed = [draining[0], host(3, 0, 2)];
    assert_eq!(place_last_resort(&mixed, 8, false), None);
    let solo = [HostView { solo: true, ..host(1, 0, 1) }];
    assert_eq!(place_last_resort(&solo, 8, false), Some(0));
    assert_eq!(place_last_resort(&solo, 8, true), None);
    assert_eq!(solo_hosts_to_start(1, 2), 0);
}

#[test]
fn a_sandboxs_own_host_takes_no_other_run_whatever_else_is_full() {
    let sandbox = HostView { dedicated: true, ..host(0, 1, 0) };
    assert_eq!(place(&[sandbox, host(1, 0, 1)], 2, false), Some(1));
    assert_eq!(place(&[sandbox], 2, false), None, "idle and warm, still not for one-shot runs");
    assert_eq!(place(&[sandbox], 2, true), None, "nor for a run that must run alone");
    assert_eq!(place_overflow(&[sandbox, host(2, 0, 1)], 8, false), Some(1));
    assert_eq!(place_overflow(&[sandbox], 8, false), None);
    // Last resort: a draining shared host, never a sandbox's; and a serving sandbox
    // host does not count as a host that takes runs.
    let draining = HostView { draining: true, ..host(1, 0, 1) };
    assert_eq!(place_last_resort(&[sandbox, draining], 8, false), Some(1));
    assert_eq!(place_last_resort(&[sandbox], 8, false), None);
}

#[test]
fn a_sandbox_host_has_one_slot_no_warm_isolate_and_no_queue_deadline_of_its_own() {
    let engine = PoolConfig {
        memory_mb: 64,
        max_concurrent: 8,
        warm_pool_size: 4,
        max_queue: 100,
        max_queue_ms: Some(30_000),
        max_open_sandboxes: 256,
        max_open_sandboxes_per_tenant: 64,
    };
    let own = sandbox_host_pool(engine, 1);
    assert_eq!((own.memory_mb, own.max_concurrent, own.warm_pool_size, own.max_queue), (64, 1, 0, 1));
    assert_eq!((own.max_queue_ms, own.max_open_sandboxes, own.max_open_sandboxes_per_tenant), (None, 1, 1));
    // Several sandboxes: a slot each, but never more than the engine runs at once.
    let sixteen = sandbox_host_pool(engine, 16);
    assert_eq!((sixteen.max_concurrent, sixteen.warm_pool_size, sixteen.max_queue), (8, 0, 16));
    assert_eq!((sixteen.max_open_sandboxes, sixteen.max_open_sandboxes_per_tenant), (16, 16));
    assert_eq!(sandbox_host_pool(engine, 0).max_open_sandboxes, 1, "at least one");
    let shared = shared_host_pool(engine, 3);
    assert_eq!((shared.max_concurrent, shared.warm_pool_size, shared.max_queue), (8, 2, 8));
    assert_eq!((shared.max_queue_ms, shared.max_open_sandboxes), (None, 0), "the parent queues; sandboxes have hosts of their own");
    assert_eq!(sandbox_host_refusal(None), None);
    let down = start_failure("spawn failed: EAGAIN", "");
    let f = sandbox_host_refusal(Some(&down)).unwrap();
    assert_eq!(f.kind, ErrorKind::Overloaded);
    assert!(f.message.contains("EAGAIN"), "{}", f.message);
}

#[test]
fn a_closed_sandboxs_host_ends_after_its_last_run_and_calls_for_no_spare() {
    assert!(end_sandbox_host_now(0, 0));
    assert!(!end_sandbox_host_now(1, 0), "its last run answers first");
    assert!(!end_sandbox_host_now(0, 1), "another sandbox is open in it");
    let oom = HostEnd::Memory { rss_mb: 900, budget_mb: 300 };
    assert!(spare_after(&oom, false));
    assert!(!spare_after(&oom, true), "a sandbox's host ending replaces nothing");
    assert!(!spare_after(&HostEnd::SandboxClosed, false));
    assert!(!spare_after(&HostEnd::Shutdown, false));
    assert_eq!(HostEnd::SandboxClosed.recycled_key(), None);
    let run = LostRun { seen_outside: false, overdue: false, restarts: 0, wall_time_ms: 5000, elapsed_ms: 0, alone: false };
    match lost_run_verdict(&HostEnd::SandboxClosed, run, 2) {
        LostVerdict::Fail(f) => assert_eq!(f.kind, ErrorKind::Aborted),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_run_started_again_gets_what_is_left_of_its_wall_limit_or_fails() {
    assert_eq!(restart_wall_ms(5000, 1200), Some(3800));
    assert_eq!(restart_wall_ms(5000, 5000 - MIN_RESTART_WALL_MS), Some(MIN_RESTART_WALL_MS));
    assert_eq!(restart_wall_ms(5000, 4990), None);
    assert_eq!(restart_wall_ms(100, 7000), None);
}

#[test]
fn a_neighbour_nobody_has_seen_is_started_again_with_the_time_it_has_left() {
    let end = HostEnd::Memory { rss_mb: 900, budget_mb: 500 };
    assert_eq!(lost_run_verdict(&end, lost(false, 0, 1200), 2), LostVerdict::Restart { wall_time_ms: 3800, alone: true });
    let crash = HostEnd::Crash { reason: "signal SIGSEGV".into(), oom: false };
    assert_eq!(lost_run_verdict(&crash, lost(false, 0, 0), 3), LostVerdict::Restart { wall_time_ms: 5000, alone: true });
    // The stuck or overdue run is the culprit: its one neighbour is not, and need not run alone.
    assert_eq!(lost_run_verdict(&HostEnd::Stuck, lost(false, 0, 0), 1), LostVerdict::Restart { wall_time_ms: 5000, alone: false });
    assert_eq!(lost_run_verdict(&HostEnd::Overdue, lost(false, 0, 0), 2), LostVerdict::Restart { wall_time_ms: 5000, alone: false });
}

#[test]
fn a_run_seen_outside_restarted_before_alone_overdue_or_out_of_time_fails_with_the_ends_failure() {
    let end = HostEnd::Memory { rss_mb: 900, budget_mb: 500 };
    let fail_kind = |v: LostVerdict| match v {
        LostVerdict::Fail(f) => f.kind,
        other => panic!("{other:?}"),
    };
    assert_eq!(fail_kind(lost_run_verdict(&end, lost(true, 0, 0), 2)), ErrorKind::MemoryLimit);
    assert_eq!(fail_kind(lost_run_verdict(&end, lost(false, 1, 0), 2)), ErrorKind::MemoryLimit);
    assert_eq!(fail_kind(lost_run_verdict(&end, lost(false, 0, 0), 1)), ErrorKind::MemoryLimit, "the only suspect");
    // Started again alone: the only suspect when alone, one of several when runs were
    // placed next to it, then one more start and no more.
    let alone_again = LostRun { alone: true, ..lost(false, 1, 0) };
    assert_eq!(fail_kind(lost_run_verdict(&end, alone_again, 1)), ErrorKind::MemoryLimit);
    assert_eq!(lost_run_verdict(&end, alone_again, 2), LostVerdict::Restart { wall_time_ms: 5000, alone: true });
    assert_eq!(fail_kind(lost_run_verdict(&end, LostRun { restarts: 2, ..alone_again }, 2)), ErrorKind::MemoryLimit);
    assert_eq!(fail_kind(lost_run_verdict(&end, lost(false, 0, 4990), 2)), ErrorKind::MemoryLimit, "no time left");
    let overdue = LostRun { overdue: true, ..lost(false, 0, 5750) };
    let f = match lost_run_verdict(&HostEnd::Overdue, overdue, 2) {
        LostVerdict::Fail(f) => f,
        other => panic!("{other:?}"),
    };
    assert_eq!((f.kind, f.limit), (ErrorKind::Timeout, Some("wall")));
    assert_eq!(fail_kind(lost_run_verdict(&HostEnd::Overdue, lost(true, 0, 10), 2)), ErrorKind::Crashed);
    assert_eq!(fail_kind(lost_run_verdict(&HostEnd::Shutdown, lost(false, 0, 0), 2)), ErrorKind::Aborted);
    let oom = HostEnd::Crash { reason: "signal SIGTRAP".into(), oom: true };
    assert_eq!(fail_kind(lost_run_verdict(&oom, lost(true, 0, 0), 2)), ErrorKind::MemoryLimit);
}

#[test]
fn a_stuck_host_ends_now_unless_other_runs_are_in_it() {
    assert_eq!(stuck_verdict(0), StuckVerdict::EndNow);
    assert_eq!(stuck_verdict(2), StuckVerdict::Drain);
}

#[test]
fn recycled_keys_name_the_supervisors_own_decisions() {
    assert_eq!(HostEnd::Memory { rss_mb: 1, budget_mb: 1 }.recycled_key(), Some("memory"));
    assert_eq!(HostEnd::Overdue.recycled_key(), Some("overdue"));
    assert_eq!(HostEnd::Protocol("x".into()).recycled_key(), Some("protocol"));
    assert_eq!(HostEnd::Crash { reason: "x".into(), oom: false }.recycled_key(), None);
    assert_eq!(HostEnd::Shutdown.recycled_key(), None);
}

#[test]
fn oom_deaths_are_told_by_their_last_words() {
    assert!(looks_like_oom("FATAL ERROR: Reached heap limit Allocation failed - JavaScript heap out of memory"));
    assert!(!looks_like_oom("Segmentation fault"));
    let f = start_failure("spawn failed: EPERM", "a\nb\nc\nd\n");
    assert_eq!(f.message, "Could not start a sandbox host process (spawn failed: EPERM): b | c | d");
    assert_eq!(start_failure("exit code 1", "").message, "Could not start a sandbox host process (exit code 1)");
}

#[test]
fn a_host_gets_isolets_settings_and_the_time_zone_only_and_no_io_uring() {
    let env =
        host_env([("PATH", "/bin"), ("TZ", "UTC"), ("ISOLET_MAX_QUARANTINED", "3"), ("AWS_SECRET", "x"), ("ISOLET_SANDBOX_HOST", "0")]);
    let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
    assert_eq!(names, ["ISOLET_SANDBOX_HOST", "UV_USE_IO_URING", "TZ", "ISOLET_MAX_QUARANTINED"]);
    assert_eq!(env[0].1, "1");
    assert_eq!(env[1].1, "0");
}

#[test]
fn the_io_thread_reads_what_node_left_waiting_a_whole_poll_period() {
    let mut u = UnreadFrames::default();
    // Nothing waiting: nothing to do.
    assert!(!u.check(false, 0));
    // Bytes waiting once: Node's loop may not have had its turn yet.
    assert!(!u.check(true, 0));
    // Still waiting a period later, Node has read nothing since: read them.
    assert!(u.check(true, 0));
    // Node keeps reading (its count moves): never taken over, however busy the channel.
    let mut u = UnreadFrames::default();
    for n in 1..50 {
        assert!(!u.check(true, n), "took over from a Node thread that reads (check {n})");
    }
    // Read meanwhile and nothing waits now: the next waiting bytes get their period again.
    let mut u = UnreadFrames::default();
    assert!(!u.check(true, 7));
    assert!(!u.check(false, 8));
    assert!(!u.check(true, 8));
    assert!(u.check(true, 8));
    // After a take-over, the next bytes wait a period again before the next.
    assert!(!u.check(true, 8));
    assert!(u.check(true, 8));
}

#[test]
fn a_new_sandbox_opens_in_the_fullest_host_of_its_tenant_with_room() {
    let h = |same_tenant, taking, open| SandboxHostView { same_tenant, taking, open };
    assert_eq!(sandbox_host_for(&[], 16), None, "no host yet: one is started");
    // Another tenant's host never takes it, however empty.
    assert_eq!(sandbox_host_for(&[h(false, true, 0)], 16), None);
    // The fullest with room, so hosts fill before new ones start.
    assert_eq!(sandbox_host_for(&[h(true, true, 3), h(true, true, 9), h(true, true, 16)], 16), Some(1));
    // The first of equals.
    assert_eq!(sandbox_host_for(&[h(true, true, 2), h(true, true, 2)], 16), Some(0));
    // A host that takes no more (ending, draining, overdue) is passed over.
    assert_eq!(sandbox_host_for(&[h(true, false, 1), h(true, true, 5)], 16), Some(1));
    assert_eq!(sandbox_host_for(&[h(true, false, 1)], 16), None);
    // Full hosts: a new one.
    assert_eq!(sandbox_host_for(&[h(true, true, 16)], 16), None);
    // One sandbox per host: every sandbox starts a host.
    assert_eq!(sandbox_host_for(&[h(true, true, 1)], 1), None);
    assert_eq!(sandbox_host_for(&[h(true, true, 0)], 1), Some(0));
}
