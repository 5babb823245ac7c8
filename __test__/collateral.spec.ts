// No collateral (process isolation): a run never fails because a neighbour in the same
// sandbox host misbehaved, innocent runs keep most of their throughput while a stream of
// hostile runs ends hosts, and a light tenant is not stuck behind a heavy one's queue.
// Innocents here are "sleepers" that nobody outside has seen anything of (Atomics.wait,
// a little compute, no host call): such a run is started again on a host of its own when
// its host ends under it. What a neighbour that made a host call still sees is tested too.
import { describe, expect, it } from 'vitest';
import fs from 'node:fs';
import { SandboxEngine, SandboxError } from '..';

const INNOCENT = 'const w = new Int32Array(new SharedArrayBuffer(4)); Atomics.wait(w, 0, 0, 80); let x = 0; for (let i = 0; i < 1e5; i++) x += i; return x';
const INNOCENT_OUTPUT = 4999950000;

type HostileKind = { code: string; wallTimeMs: number; meanwhile?: (engine: SandboxEngine) => Promise<void> };

const HOSTILE: Record<string, HostileKind> = {
  // V8's heap limit ends it inside its isolate: the host is untouched.
  'a heap bomb': { code: 'const a = []; for (;;) a.push(new Array(1e5).fill(1))', wallTimeMs: 3000 },
  // One 256 MB allocation (a grown array's backing store) past the heap limit, granted
  // before any GC sees it: the run ends at its heap ceiling or by its host's budget.
  'a single huge allocation': { code: 'return new Array(2 ** 25).fill(1.5).length', wallTimeMs: 5000 },
  // A JSON text of 5e7 values: ended by the parse guard before V8's parser holds them.
  'a JSON.parse of 5e7 values': { code: "return JSON.parse('[' + '1,'.repeat(5e7) + '1]').length", wallTimeMs: 5000 },
  // A flattened 256 MB string under a 64 MB limit (a rope costs nothing until flattened):
  // ended at its heap ceiling, or by its host's memory budget if that comes first.
  'a host-memory bomb (a flattened string)': { code: "const s = 'x'.repeat(2 ** 28); return (s + 'y').charCodeAt(10)", wallTimeMs: 5000 },
  // A built-in that ignores termination: its thread is stuck for good.
  'an unstoppable built-in': { code: 'return Array.prototype.indexOf.call({ length: 2 ** 53 - 1 }, 1)', wallTimeMs: 300 },
};

/**
 * A run that crashes its host (SIGSEGV, as a V8 bug reachable from JavaScript does; none
 * is on every Node line, so the signal comes from here): it computes, and the host whose
 * CPU time grows while it does (the innocents mostly sleep) is sent SIGSEGV. Hosts being
 * drained are let go first, so only a host serving this run computes that much.
 */
const CRASH: HostileKind = {
  code: 'const t = Date.now(); let x = 0; while (Date.now() - t < 400) x++; return x',
  wallTimeMs: 1000,
  async meanwhile(engine) {
    const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
    const processes = () => engine.stats().processes!;
    for (let i = 0; i < 500 && processes().draining > 0; i++) await sleep(20);
    const pids = processes().pids;
    const before = pids.map(cpuTicks);
    await sleep(150);
    const gained = pids.map((pid, i) => cpuTicks(pid) - before[i]);
    const busiest = gained.indexOf(Math.max(...gained));
    // 3 ticks: 30 ms of CPU in 150 ms; an innocent computes about 1 ms per run.
    if (gained[busiest] >= 3) process.kill(pids[busiest], 'SIGSEGV');
  },
};

/** A process's user + system CPU time in clock ticks (-1 once it is gone). */
function cpuTicks(pid: number): number {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return Number(fields[11]) + Number(fields[12]);
  } catch {
    return -1;
  }
}

let n = 0;
const rid = () => `c${++n}`;

async function makeEngine(extra: Record<string, unknown> = {}) {
  const engine = new SandboxEngine({ memoryMb: 64, maxConcurrentIsolates: 4, processes: 2, warmPoolSize: 4, ...extra });
  await engine.init();
  return engine;
}

function innocent(engine: SandboxEngine) {
  return engine.submit({ requestId: rid(), code: INNOCENT, isolateLimits: { wallTimeMs: 3000 } }).done;
}

describe('no collateral: innocent runs next to hostile ones in the same host', () => {
  for (const [kind, hostile] of Object.entries(HOSTILE)) {
    it(`0 innocent failures next to ${kind}`, async () => {
      const engine = await makeEngine();
      try {
        const innocentEnds = [];
        for (let round = 0; round < 3; round++) {
          // Four slots over two hosts: one innocent shares the hostile run's host.
          const bad = engine.submit({ requestId: rid(), code: hostile.code, isolateLimits: { wallTimeMs: hostile.wallTimeMs } }).done;
          const good = [innocent(engine), innocent(engine), innocent(engine)];
          const [badEnd, ...goodEnds] = await Promise.all([bad, ...good]);
          expect(badEnd.type).toBe('error');
          innocentEnds.push(...goodEnds);
        }
        const failed = innocentEnds.filter((e) => e.type !== 'result');
        expect(failed.map((e) => e.type === 'error' && e.error.message)).toEqual([]);
        for (const e of innocentEnds) expect(e.type === 'result' && e.data).toBe(INNOCENT_OUTPUT);
      } finally {
        await engine.shutdown();
      }
    });
  }

  it('a V8 crash of the host (SIGSEGV) with two runs in it: both are started again alone and answer', async () => {
    const engine = await makeEngine({ processes: 1, maxConcurrentIsolates: 2, warmPoolSize: 2 });
    try {
      const [pid] = engine.stats().processes!.pids;
      const slow = 'const w = new Int32Array(new SharedArrayBuffer(4)); Atomics.wait(w, 0, 0, 400); return 7';
      const runs = [0, 1].map(() => engine.submit({ requestId: rid(), code: slow }).done);
      await new Promise((r) => setTimeout(r, 150));
      process.kill(pid, 'SIGSEGV');
      const ends = await Promise.all(runs);
      expect(ends.map((e) => e.type === 'result' && e.data)).toEqual([7, 7]);
      const p = engine.stats().processes!;
      expect(p.crashed).toBe(1);
      expect(p.crashReasons['signal SIGSEGV']).toBe(1);
    } finally {
      await engine.shutdown();
    }
  });

  it('a neighbour that made a host call cannot be started again: it fails ERR_ISOLET_CRASHED, typed', async () => {
    let calls = 0;
    const engine = await makeEngine({ processes: 1, maxConcurrentIsolates: 2, warmPoolSize: 2, tools: { ping: () => ++calls } });
    try {
      const [pid] = engine.stats().processes!.pids;
      const seen = engine.submit({
        requestId: rid(),
        code: 'await ping(); const w = new Int32Array(new SharedArrayBuffer(4)); Atomics.wait(w, 0, 0, 2000); return 1',
        toolPolicy: { allowedTools: ['ping'] },
      }).done;
      const unseen = engine.submit({ requestId: rid(), code: 'const w = new Int32Array(new SharedArrayBuffer(4)); Atomics.wait(w, 0, 0, 2000); return 2' }).done;
      // The host is killed once the call was seen (a loaded machine took more than 150 ms
      // for it), while both runs still wait.
      for (let i = 0; i < 500 && calls < 1; i++) await new Promise((r) => setTimeout(r, 20));
      expect(calls).toBe(1);
      process.kill(pid, 'SIGSEGV');
      const [a, b] = await Promise.all([seen, unseen]);
      expect(a.type).toBe('error');
      if (a.type === 'error') {
        expect(a.error).toBeInstanceOf(SandboxError);
        expect((a.error as SandboxError).code).toBe('ERR_ISOLET_CRASHED');
      }
      expect(b.type === 'result' && b.data).toBe(2);
      // The tool ran once: the run that was seen was not run twice.
      expect(calls).toBe(1);
    } finally {
      await engine.shutdown();
    }
  });

  it('a neighbour waiting on a host call next to an unstoppable built-in keeps its work (the host drains)', async () => {
    const engine = await makeEngine({
      processes: 1,
      maxConcurrentIsolates: 2,
      warmPoolSize: 2,
      tools: { later: () => new Promise((r) => setTimeout(() => r(5), 1200)) },
    });
    try {
      const waiting = engine.submit({ requestId: rid(), code: 'return (await later()) + 1', toolPolicy: { allowedTools: ['later'] } }).done;
      const stuck = await engine.submit({ requestId: rid(), code: HOSTILE['an unstoppable built-in'].code, isolateLimits: { wallTimeMs: 200 } }).done;
      expect(stuck.type).toBe('error');
      expect((await waiting).type === 'result' && (await waiting as { data: number }).data).toBe(6);
      expect(engine.stats().processes!.recycled.stuck).toBe(1);
    } finally {
      await engine.shutdown();
    }
  });
});

/**
 * Innocent runs per second, three at a time (at least `count`, and more while `more()`),
 * and the slowest one's settle time over its limit.
 */
async function innocentThroughput(engine: SandboxEngine, count: number, tenant?: string, more = () => false) {
  let started = 0;
  let lateMs = 0;
  const failures: string[] = [];
  const t0 = Date.now();
  const lane = async () => {
    while (started < count || more()) {
      started++;
      const t = Date.now();
      const end = await engine.submit({ requestId: rid(), code: INNOCENT, isolateLimits: { wallTimeMs: 3000 }, tenant }).done;
      lateMs = Math.max(lateMs, Date.now() - t - 3000);
      if (end.type !== 'result') failures.push(end.error.message);
    }
  };
  await Promise.all([lane(), lane(), lane()]);
  return { runs: started, perSecond: (started * 1000) / (Date.now() - t0), failures, lateMs };
}

/**
 * Runs `code` one after another until `stop()`; every one must settle within its limit +
 * 1 s. A kind's `meanwhile` acts from outside while its run is in flight.
 */
function hostileStream(engine: SandboxEngine, code: string | HostileKind[], wallTimeMs = 0, tenant?: string) {
  let stopped = false;
  let worstOverMs = -Infinity;
  let count = 0;
  const kinds: HostileKind[] = typeof code === 'string' ? [{ code, wallTimeMs }] : code;
  const done = (async () => {
    while (!stopped) {
      const t = Date.now();
      const kind = kinds[count % kinds.length];
      wallTimeMs = kind.wallTimeMs;
      const run = engine.submit({ requestId: rid(), code: kind.code, isolateLimits: { wallTimeMs }, tenant }).done;
      if (kind.meanwhile) await kind.meanwhile(engine);
      await run;
      worstOverMs = Math.max(worstOverMs, Date.now() - t - wallTimeMs);
      count++;
    }
  })();
  return {
    /** Hostile runs settled so far. */
    get count() {
      return count;
    },
    async stop() {
      stopped = true;
      await done;
      return { worstOverMs, count };
    },
  };
}

describe('throughput under attack: innocents keep at least 70% of their quiet throughput', () => {
  const streams: Array<[string, string, number]> = [
    ['a stream of host-killing runs (memory past the host budget)', HOSTILE['a single huge allocation'].code, 5000],
    ['a stream of unstoppable built-ins', HOSTILE['an unstoppable built-in'].code, 300],
  ];
  for (const [what, code, wallTimeMs] of streams) {
    it(what, async () => {
      // Five slots: the hostile stream takes one, the innocents three, and they never
      // wait for a slot; what they lose is what the hostile runs cost their hosts.
      const engine = await makeEngine({ maxConcurrentIsolates: 5, processes: 2 });
      try {
        const { ratios } = await attackRounds(engine, () => hostileStream(engine, code, wallTimeMs));
        expect(Math.max(...ratios)).toBeGreaterThanOrEqual(0.7);
      } finally {
        await engine.shutdown();
      }
    });
  }

  it('a stream of every hostile kind and host crashes from one tenant next to another tenant: 0 innocent failures, 70% of quiet throughput', async () => {
    const engine = await makeEngine({ maxConcurrentIsolates: 5, processes: 2 });
    try {
      const kinds = [CRASH, ...Object.values(HOSTILE)];
      // The innocents keep running until every kind has had its turn in each round.
      const { ratios, innocents } = await attackRounds(engine, () => hostileStream(engine, kinds, 0, 'attacker'), 'victim', kinds.length);
      expect(Math.max(...ratios)).toBeGreaterThanOrEqual(0.7);
      // The crash kind did crash hosts, with victims' runs beside it.
      expect(engine.stats().processes!.crashReasons['signal SIGSEGV']).toBeGreaterThan(0);
      // The tenants' counts: every victim run completed; the attacker's failed.
      const tenants = Object.fromEntries(engine.stats().tenants.map((t) => [t.tenant, t]));
      expect(innocents).toBeGreaterThanOrEqual(180);
      expect(tenants.victim).toMatchObject({ completed: innocents, failed: {} });
      expect(Object.values(tenants.attacker.failed as Record<string, number>).reduce((a, b) => a + b, 0)).toBeGreaterThan(0);
    } finally {
      await engine.shutdown();
    }
  }, 120_000);
});

/**
 * Two rounds of: innocents alone (the quiet baseline), then innocents next to the
 * hostile stream `start` begins, until at least `hostileRuns` of its runs settled; no
 * innocent fails, every run settles within its limit + 1 s. Returns each round's loud /
 * quiet throughput and how many innocent runs there were.
 */
async function attackRounds(engine: SandboxEngine, start: () => ReturnType<typeof hostileStream>, tenant?: string, hostileRuns = 0) {
  const ratios = [];
  let innocents = 0;
  for (let round = 0; round < 2; round++) {
    const quiet = await innocentThroughput(engine, 45, tenant);
    const attack = start();
    const loud = await innocentThroughput(engine, 45, tenant, () => attack.count < hostileRuns);
    innocents += quiet.runs + loud.runs;
    const hostile = await attack.stop();
    expect(quiet.failures).toEqual([]);
    expect(loud.failures).toEqual([]);
    expect(hostile.count).toBeGreaterThan(0);
    // Every run settles within its limit + 1 s.
    expect(hostile.worstOverMs).toBeLessThan(1000);
    expect(loud.lateMs).toBeLessThan(1000);
    ratios.push(loud.perSecond / quiet.perSecond);
    // COLLATERAL_REPORT=1 prints the figures behind the assertions (for notes and docs).
    if (process.env.COLLATERAL_REPORT) {
      console.info(`collateral: quiet ${quiet.perSecond.toFixed(1)} runs/s, under attack ${loud.perSecond.toFixed(1)} runs/s (${hostile.count} hostile settled)`);
    }
  }
  return { ratios, innocents };
}

describe('fair scheduling across tenants', () => {
  for (const isolation of ['process', 'thread'] as const) {
    it(`a light tenant's run waits for about one of a heavy tenant's runs, not its queue (${isolation})`, async () => {
      const engine = new SandboxEngine({ isolation, memoryMb: 64, maxConcurrentIsolates: 2, processes: 1, warmPoolSize: 2, maxQueueSize: 1000 });
      await engine.init();
      try {
        // 300 ms each: the light run (a cold isolate at worst) must come in while the first
        // heavy ones still wait, on a loaded machine too.
        const heavyCode = 'const w = new Int32Array(new SharedArrayBuffer(4)); Atomics.wait(w, 0, 0, 300); return 1';
        let heavyDone = 0;
        const heavy = Array.from({ length: 20 }, () =>
          engine.submit({ requestId: rid(), code: heavyCode, tenant: 'heavy' }).done.then((e) => {
            heavyDone++;
            return e;
          }),
        );
        const counts = engine.stats().tenants.find((t) => t.tenant === 'heavy')!;
        expect(counts.queued + counts.running + counts.completed).toBe(20);
        expect(counts.queued).toBeGreaterThan(15);
        const light = await engine.submit({ requestId: rid(), code: 'return 1 + 1', tenant: 'light' }).done;
        expect(light.type === 'result' && light.data).toBe(2);
        // Two slots: the light run took the first one to free up after it came, so at
        // most the two running then and the one started before it had finished.
        expect(heavyDone).toBeLessThanOrEqual(3);
        await Promise.all(heavy);
        // Thread mode gives a slot back once its isolate is disposed, just after the answer.
        await expect.poll(() => Object.fromEntries(engine.stats().tenants.map((t) => [t.tenant, t])), { timeout: 10_000 }).toMatchObject({
          heavy: { queued: 0, running: 0, completed: 20 },
          light: { queued: 0, running: 0, completed: 1 },
        });
      } finally {
        await engine.shutdown();
      }
    });
  }

  it('runs without a tenant share one (tenant: null in stats), and a bad tenant is refused by name', async () => {
    const engine = await makeEngine({ isolation: 'thread' });
    try {
      await engine.submit({ requestId: rid(), code: 'return 1' }).done;
      // Thread mode gives the slot back once the isolate is disposed, just after the answer.
      await expect.poll(() => engine.stats().tenants, { timeout: 10_000 }).toEqual([{ tenant: null, queued: 0, running: 0, sandboxes: 0, completed: 1, failed: {} }]);
      const bad = await engine.submit({ requestId: rid(), code: 'return 1', tenant: '' }).done;
      expect(bad.type === 'error' && bad.error.message).toMatch(/request\.tenant/);
    } finally {
      await engine.shutdown();
    }
  });
});
